//! Opening a connection (a pool of database sessions, through `datafusion-table-providers`)
//! and the foreign catalog DataFusion sees: schemas and tables of the database, each table read
//! by the provider of its database's dialect, with projections, filters and LIMIT sent to the
//! database. A catalog connects on its first table, once per process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::common::TableReference;
use datafusion::error::DataFusionError;
use datafusion_table_providers::UnsupportedTypeAction;
use datafusion_table_providers::common::DatabaseCatalogProvider;
use datafusion_table_providers::mysql::{DynMySQLConnectionPool, MySQLTableFactory};
use datafusion_table_providers::postgres::{DynPostgresConnectionPool, PostgresTableFactory};
use datafusion_table_providers::sql::db_connection_pool::Mode;
use datafusion_table_providers::sql::db_connection_pool::mysqlpool::MySQLConnectionPool;
use datafusion_table_providers::sql::db_connection_pool::postgrespool::PostgresConnectionPool;
use datafusion_table_providers::sql::db_connection_pool::sqlitepool::{
    SqliteConnectionPool, SqliteConnectionPoolFactory,
};
use datafusion_table_providers::sqlite::{DynSqliteConnectionPool, SqliteTableFactory};
use datafusion_table_providers::util::secrets::to_secret_map;

use super::{Connection, ConnectionType, ForeignCatalog};
use crate::catalog::Warehouse;
use crate::error::{Error, Result};

/// An open connection.
#[derive(Clone)]
pub enum Pool {
    Postgres(Arc<PostgresConnectionPool>),
    MySql(Arc<MySQLConnectionPool>),
    Sqlite(Arc<SqliteConnectionPool>),
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pool::Postgres(_) => "Pool::Postgres",
            Pool::MySql(_) => "Pool::MySql",
            Pool::Sqlite(_) => "Pool::Sqlite",
        })
    }
}

impl Pool {
    /// Open `connection` on `catalog`'s database. Errors name the connection and where it
    /// points, never a secret's value.
    pub async fn open(connection: &Connection, catalog: Option<&ForeignCatalog>) -> Result<Pool> {
        let mut values: HashMap<String, String> = HashMap::new();
        for (k, v) in &connection.options {
            values.insert(k.clone(), v.resolve()?);
        }
        if let Some(c) = catalog {
            for (k, v) in &c.options {
                values.insert(k.clone(), v.resolve()?);
            }
        }
        let secrets: Vec<String> = connection
            .options
            .values()
            .filter(|v| matches!(v, super::OptionValue::Secret { .. }))
            .filter_map(|v| v.resolve().ok())
            .filter(|v| !v.is_empty())
            .collect();
        let name = &connection.name;
        let at = |values: &HashMap<String, String>| {
            format!(
                "{}:{}",
                values.get("host").map(String::as_str).unwrap_or(""),
                values.get("port").map(String::as_str).unwrap_or("")
            )
        };
        let failed = |e: &dyn std::fmt::Display, at: String| {
            let mut text = e.to_string();
            for s in &secrets {
                text = text.replace(s.as_str(), "***");
            }
            Error::Invalid(format!(
                "connection {name} ({} at {at}) failed: {}",
                connection.kind.name(),
                text.trim()
            ))
        };
        match connection.kind {
            ConnectionType::Postgresql => {
                let mut params = HashMap::new();
                for (ours, theirs) in [
                    ("host", "host"),
                    ("port", "port"),
                    ("user", "user"),
                    ("password", "pass"),
                    ("database", "db"),
                    ("sslmode", "sslmode"),
                ] {
                    if let Some(v) = values.get(ours) {
                        params.insert(theirs.to_string(), v.clone());
                    }
                }
                params
                    .entry("sslmode".into())
                    .or_insert_with(|| "prefer".into());
                params.insert("connection_pool_size".into(), "4".into());
                let pool = PostgresConnectionPool::new(to_secret_map(params))
                    .await
                    .map_err(|e| failed(&e, at(&values)))?
                    // json and jsonb as STRING.
                    .with_unsupported_type_action(UnsupportedTypeAction::String);
                Ok(Pool::Postgres(Arc::new(pool)))
            }
            ConnectionType::Mysql => {
                let mut params = HashMap::new();
                for (ours, theirs) in [
                    ("host", "host"),
                    ("port", "tcp_port"),
                    ("user", "user"),
                    ("password", "pass"),
                    ("database", "db"),
                    ("sslmode", "sslmode"),
                ] {
                    if let Some(v) = values.get(ours) {
                        params.insert(theirs.to_string(), v.clone());
                    }
                }
                params
                    .entry("sslmode".into())
                    .or_insert_with(|| "preferred".into());
                let pool = MySQLConnectionPool::new(to_secret_map(params))
                    .await
                    .map_err(|e| failed(&e, at(&values)))?;
                Ok(Pool::MySql(Arc::new(pool)))
            }
            ConnectionType::Sqlite => {
                let path = values.get("path").cloned().unwrap_or_default();
                // The engine would create a missing file: a typo must not make a database.
                if !std::path::Path::new(&path).is_file() {
                    return Err(Error::NotFound(format!(
                        "connection {name} (sqlite): no database file at {path}"
                    )));
                }
                let pool = SqliteConnectionPoolFactory::new(
                    &path,
                    Mode::File,
                    Duration::from_millis(5000),
                )
                .build()
                .await
                .map_err(|e| failed(&e, path.clone()))?;
                Ok(Pool::Sqlite(Arc::new(pool)))
            }
        }
    }

    /// The table `schema.table` of the database, read in its own dialect.
    async fn table(&self, schema: &str, table: &str) -> Result<Arc<dyn TableProvider>> {
        let reference = TableReference::partial(schema, table);
        let found = match self {
            Pool::Postgres(p) => {
                PostgresTableFactory::new(p.clone())
                    .table_provider(reference)
                    .await
            }
            Pool::MySql(p) => {
                MySQLTableFactory::new(p.clone())
                    .table_provider(reference)
                    .await
            }
            Pool::Sqlite(p) => {
                SqliteTableFactory::new(p.clone())
                    .table_provider(reference)
                    .await
            }
        };
        found.map_err(|e| Error::Other(e.to_string()))
    }

    /// Every schema of the database and its tables.
    async fn names(&self) -> Result<Vec<(String, Vec<String>)>> {
        let listed = match self {
            Pool::Postgres(p) => {
                let pool: Arc<DynPostgresConnectionPool> = p.clone();
                DatabaseCatalogProvider::try_new(pool).await
            }
            Pool::MySql(p) => {
                let pool: Arc<DynMySQLConnectionPool> = p.clone();
                DatabaseCatalogProvider::try_new(pool).await
            }
            Pool::Sqlite(p) => {
                let pool: Arc<DynSqliteConnectionPool> = p.clone();
                DatabaseCatalogProvider::try_new(pool).await
            }
        }
        .map_err(|e| Error::Other(e.to_string()))?;
        let mut out = vec![];
        let mut schemas = listed.schema_names();
        schemas.sort();
        for s in schemas {
            let mut tables = listed
                .schema(&s)
                .map(|p| p.table_names())
                .unwrap_or_default();
            tables.sort();
            out.push((s, tables));
        }
        Ok(out)
    }
}

/// A foreign catalog as DataFusion sees it (one per catalog and process: its schemas share
/// its connection).
#[derive(Debug)]
pub struct ForeignCatalogProvider(Arc<Inner>);

struct Inner {
    catalog: String,
    warehouse: Arc<Warehouse>,
    pool: tokio::sync::OnceCell<Pool>,
    /// Schemas and tables, once listed.
    names: Mutex<Option<Vec<(String, Vec<String>)>>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "foreign catalog {}", self.catalog)
    }
}

impl ForeignCatalogProvider {
    pub fn new(catalog: &str, warehouse: Arc<Warehouse>) -> Self {
        ForeignCatalogProvider(Arc::new(Inner {
            catalog: catalog.to_string(),
            warehouse,
            pool: tokio::sync::OnceCell::new(),
            names: Mutex::new(None),
        }))
    }

    /// Schemas and tables of the database (listed once per process).
    pub async fn list(&self) -> Result<Vec<(String, Vec<String>)>> {
        self.0.list().await
    }
}

impl Inner {
    async fn pool(&self) -> Result<&Pool> {
        self.pool
            .get_or_try_init(|| async {
                let def = self.warehouse.foreign_catalog(&self.catalog)?.ok_or_else(|| {
                    Error::NotFound(format!("catalog {} is not a foreign catalog", self.catalog))
                })?;
                let connection = self.warehouse.connection(&def.connection)?.ok_or_else(|| {
                    Error::NotFound(format!(
                        "foreign catalog {}: its connection {} was dropped (CREATE CONNECTION {} ... again, or DROP CATALOG {})",
                        self.catalog, def.connection, def.connection, self.catalog
                    ))
                })?;
                Pool::open(&connection, Some(&def)).await
            })
            .await
    }

    async fn list(&self) -> Result<Vec<(String, Vec<String>)>> {
        if let Some(names) = self.names.lock().ok().and_then(|n| n.clone()) {
            return Ok(names);
        }
        let names = self.pool().await?.names().await?;
        if let Ok(mut n) = self.names.lock() {
            *n = Some(names.clone());
        }
        Ok(names)
    }

    fn listed(&self) -> Vec<(String, Vec<String>)> {
        self.names
            .lock()
            .ok()
            .and_then(|n| n.clone())
            .unwrap_or_default()
    }
}

impl CatalogProvider for ForeignCatalogProvider {
    fn schema_names(&self) -> Vec<String> {
        self.0.listed().into_iter().map(|(s, _)| s).collect()
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        Some(Arc::new(ForeignSchema {
            catalog: self.0.clone(),
            schema: name.to_string(),
        }))
    }
}

/// One schema of a foreign catalog.
#[derive(Debug)]
struct ForeignSchema {
    catalog: Arc<Inner>,
    schema: String,
}

#[async_trait::async_trait]
impl SchemaProvider for ForeignSchema {
    fn table_names(&self) -> Vec<String> {
        self.catalog
            .listed()
            .into_iter()
            .find(|(s, _)| s == &self.schema)
            .map(|(_, t)| t)
            .unwrap_or_default()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
        let external = |e: Error| DataFusionError::External(Box::new(e));
        let pool = self.catalog.pool().await.map_err(external)?;
        pool.table(&self.schema, name).await.map(Some).map_err(|e| {
            external(e.context(format!("{}.{}.{name}", self.catalog.catalog, self.schema)))
        })
    }

    fn table_exist(&self, name: &str) -> bool {
        self.table_names().iter().any(|t| t == name)
    }
}
