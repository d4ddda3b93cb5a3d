//! DataFusion's view of the warehouse: every catalog directory (plus the samples and the scratch
//! catalog), each schema directory, and tables opened lazily on first reference.

use super::*;
use crate::error::Result;
use datafusion::catalog::{
    CatalogProvider, CatalogProviderList, MemoryCatalogProvider, MemorySchemaProvider,
    SchemaProvider, TableProvider,
};
use datafusion::error::DataFusionError;
use std::sync::Arc;

/// DataFusion's view of the warehouse: every catalog directory, plus samples and scratch.
#[derive(Debug)]
pub struct WarehouseCatalogs {
    warehouse: Arc<Warehouse>,
    samples: Arc<samples::SamplesCatalog>,
    scratch: Arc<MemoryCatalogProvider>,
    /// Foreign catalogs seen so far, each with its connection (opened on first use).
    foreign:
        std::sync::Mutex<std::collections::HashMap<String, Arc<foreign::ForeignCatalogProvider>>>,
}

impl WarehouseCatalogs {
    /// Catalog providers over `warehouse`.
    pub fn new(warehouse: Arc<Warehouse>) -> Self {
        let scratch = Arc::new(MemoryCatalogProvider::new());
        let _ = scratch.register_schema("pinned", Arc::new(MemorySchemaProvider::new()));
        WarehouseCatalogs {
            warehouse,
            samples: Arc::new(samples::SamplesCatalog::default()),
            scratch,
            foreign: Default::default(),
        }
    }

    /// The foreign catalog `name`, if it is one (the same provider, and connection, for the
    /// whole process).
    pub fn foreign(&self, name: &str) -> Option<Arc<foreign::ForeignCatalogProvider>> {
        let name = name.to_lowercase();
        if !self.warehouse.is_foreign(&name) {
            return None;
        }
        let mut cache = self.foreign.lock().ok()?;
        Some(
            cache
                .entry(name.clone())
                .or_insert_with(|| {
                    Arc::new(foreign::ForeignCatalogProvider::new(
                        &name,
                        self.warehouse.clone(),
                    ))
                })
                .clone(),
        )
    }

    /// Forget the foreign catalog `name`'s provider (dropped or replaced).
    pub fn forget_foreign(&self, name: &str) {
        if let Ok(mut cache) = self.foreign.lock() {
            cache.remove(&name.to_lowercase());
        }
    }

    /// The scratch schema where per-statement tables are registered.
    pub fn scratch_schema(&self) -> Arc<dyn SchemaProvider> {
        self.scratch
            .schema("pinned")
            .expect("scratch schema is registered at construction")
    }
}

impl CatalogProviderList for WarehouseCatalogs {
    fn register_catalog(
        &self,
        _name: String,
        _catalog: Arc<dyn CatalogProvider>,
    ) -> Option<Arc<dyn CatalogProvider>> {
        None
    }

    fn catalog_names(&self) -> Vec<String> {
        self.warehouse.catalogs()
    }

    fn catalog(&self, name: &str) -> Option<Arc<dyn CatalogProvider>> {
        let name = name.to_lowercase();
        match name.as_str() {
            SAMPLES => Some(self.samples.clone()),
            SCRATCH => Some(self.scratch.clone()),
            _ if self.warehouse.is_foreign(&name) => {
                self.foreign(&name).map(|f| f as Arc<dyn CatalogProvider>)
            }
            _ => Some(Arc::new(WarehouseCatalog {
                warehouse: self.warehouse.clone(),
                catalog: name,
            })),
        }
    }
}

/// One catalog directory.
#[derive(Debug)]
struct WarehouseCatalog {
    warehouse: Arc<Warehouse>,
    catalog: String,
}

impl CatalogProvider for WarehouseCatalog {
    fn schema_names(&self) -> Vec<String> {
        self.warehouse.schemas(&self.catalog)
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        Some(Arc::new(WarehouseSchema {
            warehouse: self.warehouse.clone(),
            catalog: self.catalog.clone(),
            schema: name.to_lowercase(),
        }))
    }
}

/// One schema directory; tables open lazily on first reference in a statement.
#[derive(Debug)]
struct WarehouseSchema {
    warehouse: Arc<Warehouse>,
    catalog: String,
    schema: String,
}

#[async_trait::async_trait]
impl SchemaProvider for WarehouseSchema {
    fn table_names(&self) -> Vec<String> {
        self.warehouse.tables(&self.catalog, &self.schema)
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
        let name = TableName::new(&self.catalog, &self.schema, name);
        if !self.warehouse.table_exists(&name) {
            return Ok(None);
        }
        let table = self
            .warehouse
            .open(&name)
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        provider_for(&table)
            .await
            .map(Some)
            .map_err(|e| DataFusionError::External(Box::new(e)))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.warehouse
            .table_exists(&TableName::new(&self.catalog, &self.schema, name))
    }
}
