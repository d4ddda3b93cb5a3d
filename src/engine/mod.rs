//! The session: one DataFusion context over the warehouse, the current catalog and schema,
//! and the session variables. It parses and binds statements (`statements` runs them); it
//! knows nothing of terminals.

pub mod bind;
mod collation;
pub(crate) mod files;
pub mod functions;
pub mod headers;
mod in_subquery;
pub mod json;
mod lateral;
mod pivot;
pub mod progress;
pub(crate) mod routines;
mod sample;
mod set_ops;
pub mod spark;
pub(crate) mod spelling;
pub mod types;
pub mod variables;
mod window_frames;
pub mod zone;

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::execution::context::SessionConfig;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::{Expr, ObjectName, ObjectNamePart};

use crate::catalog::{TableName, Warehouse, WarehouseCatalogs};
use crate::error::{Error, Result};
use crate::parser::{self, IdentifierResolver, Statement};

pub use variables::{LoopRow, Variable, Variables};

pub use crate::output::Output;

/// What a statement gives back to the shell: a finished result, or a query's rows still
/// coming (printed as they arrive; dropping it stops the query).
pub enum Reply {
    Done(Output),
    Rows(Box<RowStream>),
}

/// A query's rows as they are computed.
pub struct RowStream {
    pub schema: SchemaRef,
    pub stream: datafusion::physical_plan::SendableRecordBatchStream,
    /// Keeps the snapshots the query reads (time travel) until its last row.
    pub(crate) _bound: bind::Bound,
}

/// Options that change how statements run (set from the command line).
#[derive(Clone)]
pub struct Settings {
    /// Copy source files whole (not decoded) when their statistics allow.
    pub whole_files: bool,
    /// Allow whole-file copies to hard-link source files.
    pub hard_links: bool,
    /// Let decoded copies delta-encode integer columns that move in small steps.
    pub delta_encoding: bool,
    /// What shows progress bars (the shell's, on a terminal); None: none shown.
    pub progress: Option<Arc<dyn progress::View>>,
    /// VACUUM refuses to keep less than the table's `delta.deletedFileRetentionDuration`
    /// (Delta's `spark.databricks.delta.retentionDurationCheck.enabled`).
    pub retention_check: bool,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("whole_files", &self.whole_files)
            .field("hard_links", &self.hard_links)
            .field("delta_encoding", &self.delta_encoding)
            .field("progress", &self.progress.is_some())
            .field("retention_check", &self.retention_check)
            .finish()
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            whole_files: true,
            hard_links: true,
            delta_encoding: true,
            progress: None,
            retention_check: true,
        }
    }
}

/// One user's session over a warehouse. Cloning gives an independent copy of the variables
/// and current schema over the same engine (what a loop iteration gets).
#[derive(Clone)]
pub struct Session {
    ctx: SessionContext,
    warehouse: Arc<Warehouse>,
    catalogs: Arc<WarehouseCatalogs>,
    vars: Variables,
    catalog: String,
    schema: String,
    settings: Arc<Settings>,
    /// `CREATE TEMP VIEW`s, by lower-cased name: the session's, shared by its loop iterations.
    temp_views: Arc<std::sync::RwLock<std::collections::HashMap<String, crate::catalog::View>>>,
    /// `CREATE TEMPORARY FUNCTION`s, by lower-cased name, shared the same way.
    temp_functions:
        Arc<std::sync::RwLock<std::collections::HashMap<String, crate::catalog::Function>>>,
}

impl Session {
    /// A session over the warehouse at `root`. Does not touch the disk.
    pub fn new(root: impl Into<std::path::PathBuf>, settings: Settings) -> Self {
        Self::over(Warehouse::new(root), settings)
    }

    /// A session over the warehouse on the object store at `location` (`s3://bucket/prefix`).
    /// Asks the store nothing: see [`Session::check_warehouse`].
    pub fn on_store(location: &str, settings: Settings) -> crate::Result<Self> {
        let url = crate::catalog::external::parse_location(location).map_err(|e| {
            crate::Error::Invalid(format!(
                "warehouse {}: {e}",
                crate::catalog::external::shown_text(location)
            ))
        })?;
        let warehouse = Warehouse::on_store(&url)?;
        Ok(Self::over(warehouse, settings))
    }

    /// Whether the warehouse answers: on a store, its bucket exists and the credentials hold;
    /// a clear error naming it and its settings if not. Known without a request once the
    /// store has answered one of this process's; else one listing. The shell asks at the
    /// start of an interactive session, and otherwise once the first statement has run (a
    /// query: its first rows are in hand) and before its result is printed, again after the
    /// next while the store has not answered (a job's run makes one request fewer): a missing
    /// bucket looks like missing tables to each request, and would make `DROP SCHEMA IF
    /// EXISTS` a silent no-op.
    pub async fn check_warehouse(&self) -> crate::Result<()> {
        let root = self.warehouse.root();
        if root.answered() {
            return Ok(());
        }
        root.reachable().await
    }

    /// A session over `warehouse` (a local directory or a prefix on an object store).
    pub fn over(warehouse: Warehouse, settings: Settings) -> Self {
        let warehouse = Arc::new(warehouse);
        let catalogs = Arc::new(WarehouseCatalogs::new(warehouse.clone()));
        let mut config = SessionConfig::new()
            .with_information_schema(true)
            .with_create_default_catalog_and_schema(false)
            .with_default_catalog_and_schema("main", "default");
        config.options_mut().sql_parser.dialect = datafusion::config::Dialect::Databricks;
        // Errors about names and types point into the statement (the shell draws a caret).
        config.options_mut().sql_parser.collect_spans = true;
        config.options_mut().execution.time_zone = Some("UTC".into());
        // Databricks SQL runs in ANSI mode: Spark's functions raise on division by zero and
        // integer overflow instead of returning NULL or a wrapped value.
        config.options_mut().execution.enable_ansi_mode = true;
        // Numeric literals with a point are exact DECIMALs, as in Databricks (as DOUBLEs,
        // 9007199254740993.00 became ...992).
        config.options_mut().sql_parser.parse_float_as_decimal = true;
        // NULL is the smallest value, as in Databricks: first in ascending order, last in
        // descending (DataFusion's default, PostgreSQL's, puts it last in ascending order).
        config.options_mut().sql_parser.default_null_ordering = "nulls_min".into();
        // Spark's INT96 timestamps at microsecond precision: as nanoseconds, dates outside
        // 1677-2262 (a `9999-12-31` end date) wrapped around into other centuries.
        config.options_mut().execution.parquet.coerce_int96 = Some("us".into());
        // delta-rs' advice: dynamic IN-list join filters can panic on dictionary keys.
        config
            .options_mut()
            .optimizer
            .hash_join_inlist_pushdown_max_size = 0;
        config
            .options_mut()
            .optimizer
            .hash_join_inlist_pushdown_max_distinct_values = 0;
        use datafusion_spark::SessionStateBuilderSpark;
        let mut builder = datafusion::execution::SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            // Spark's functions over DataFusion's of the same name: Databricks semantics
            // (`concat` with a NULL is NULL, `round` rounds half up, ...).
            .with_spark_features()
            .with_catalog_list(catalogs.clone())
            // Delta's planner runs the write/merge plan nodes delta-rs builds.
            .with_query_planner(deltalake::delta_datafusion::planner::DeltaPlanner::new());
        // `arr[0]` is the first element, before DataFusion's 1-based `[]` sees it.
        if let Some(planners) = builder.expr_planners() {
            planners.insert(0, Arc::new(functions::ZeroBasedSubscript));
            // `+ - * /` between numbers as Databricks computes them (checked, `3 / 2` = 1.5).
            planners.insert(0, Arc::new(functions::AnsiArithmetic::new()));
        }
        // TIMESTAMP columns read in the session's zone, before types are coerced.
        let mut analyzer = datafusion::optimizer::Analyzer::new().rules;
        analyzer.insert(0, Arc::new(zone::WrittenWallClocks));
        analyzer.insert(0, Arc::new(zone::SessionZone));
        // A RANGE frame's integer offsets over a DATE order key as days, before coercion.
        analyzer.insert(0, Arc::new(window_frames::DateRangeFrames));
        // EXCEPT ALL and INTERSECT ALL counting copies of rows (before coercion, which may
        // cast the join's keys).
        analyzer.insert(0, Arc::new(set_ops::MultisetSetOps));
        // LIKE over a value that is not text reads its text, as Spark's implicit cast.
        analyzer.insert(0, Arc::new(functions::LikeOperands));
        // A FLOAT or DOUBLE compared with a DECIMAL as DOUBLEs, as Spark, before coercion.
        analyzer.insert(0, Arc::new(functions::FloatDecimalComparisons));
        analyzer.push(Arc::new(zone::SessionZoneCasts));
        // Casts Spark defines otherwise (a TIMESTAMP or DOUBLE as text, ...), after the zone's.
        analyzer.push(Arc::new(functions::SparkCasts));
        // `x [NOT] IN (SELECT ...)` with its NULLs where the engine's joins would drop them
        // (after coercion: both sides of the comparison share a type).
        analyzer.push(Arc::new(in_subquery::ThreeValuedInSubqueries));
        builder = builder.with_analyzer_rules(analyzer);
        // A Delta log's column bounds are not exact (NaN left out): never read a column as the
        // one value its file's bounds give, in any plan, delta-rs' own included.
        builder = builder.with_physical_optimizer_rule(Arc::new(crate::catalog::InexactFileBounds));
        let state = builder.build();
        let ctx = SessionContext::new_with_state(state);
        functions::register(&ctx);
        json::register(&ctx);
        Session {
            ctx,
            warehouse,
            catalogs,
            vars: Variables::default(),
            catalog: "main".into(),
            schema: "default".into(),
            settings: Arc::new(settings),
            temp_views: Default::default(),
            temp_functions: Default::default(),
        }
    }

    /// The DataFusion context queries are planned and run in.
    pub fn ctx(&self) -> &SessionContext {
        &self.ctx
    }

    /// The warehouse this session works on.
    pub fn warehouse(&self) -> &Arc<Warehouse> {
        &self.warehouse
    }

    /// The catalogs as the engine sees them (foreign ones with their connections).
    pub fn catalogs(&self) -> &Arc<WarehouseCatalogs> {
        &self.catalogs
    }

    /// The session's variables (`DECLARE`, `SET VAR`, the current FOR EACH row).
    pub fn vars(&self) -> &Variables {
        &self.vars
    }

    pub(crate) fn vars_mut(&mut self) -> &mut Variables {
        &mut self.vars
    }

    /// Declare (or replace) the session variable `name`, a STRING holding `value`
    /// (`tidemark --var name=value`; the value is text as given, not SQL).
    pub fn declare_string(&mut self, name: &str, value: &str) {
        use datafusion::sql::sqlparser::ast::{Expr, Value};
        self.vars.declare(
            name,
            variables::Variable {
                data_type: datafusion::arrow::datatypes::DataType::Utf8,
                value: datafusion::common::ScalarValue::Utf8(Some(value.to_string())),
                default: Some(Expr::value(Value::SingleQuotedString(value.to_string()))),
            },
        );
    }

    /// The schemas, tables and views of the foreign catalog `catalog` as its database has
    /// them now (None: not a foreign one).
    pub async fn foreign_names(
        &self,
        catalog: &str,
    ) -> Result<Option<crate::catalog::foreign::Names>> {
        match self.catalogs.foreign(catalog) {
            Some(f) => Ok(Some(f.list().await?)),
            None => Ok(None),
        }
    }

    /// A foreign catalog's table (None: no such catalog, schema or table).
    pub(crate) async fn foreign_table(
        &self,
        table: &TableName,
    ) -> Result<Option<Arc<dyn datafusion::catalog::TableProvider>>> {
        use datafusion::catalog::CatalogProvider;
        let Some(catalog) = self.catalogs.foreign(&table.catalog) else {
            return Ok(None);
        };
        let Some(schema) = catalog.schema(&table.schema) else {
            return Ok(None);
        };
        Ok(schema.table(&table.table).await?)
    }

    /// Forget the provider (and connection) of the foreign catalog `catalog`.
    pub(crate) fn forget_foreign(&self, catalog: &str) {
        self.catalogs.forget_foreign(catalog);
    }

    /// The current catalog (`USE CATALOG`).
    pub fn current_catalog(&self) -> &str {
        &self.catalog
    }

    /// The current schema (`USE`).
    pub fn current_schema(&self) -> &str {
        &self.schema
    }

    /// What `USE` does: unqualified names resolve in `catalog`.`schema` from now on.
    pub(crate) fn set_current(&mut self, catalog: String, schema: String) {
        self.catalog = catalog;
        self.schema = schema;
    }

    /// The command-line settings (whole-file copies, progress bars, ...).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// This session with other settings (a loop's quiet iterations).
    pub(crate) fn set_settings(&mut self, settings: Arc<Settings>) {
        self.settings = settings;
    }

    /// The session's temporary view `name`.
    pub(crate) fn temp_view(&self, name: &str) -> Option<crate::catalog::View> {
        let views = self.temp_views.read().unwrap_or_else(|e| e.into_inner());
        views.get(&name.to_lowercase()).cloned()
    }

    /// Define (or replace) the temporary view `name`.
    pub(crate) fn set_temp_view(&self, name: &str, view: crate::catalog::View) {
        let mut views = self.temp_views.write().unwrap_or_else(|e| e.into_inner());
        views.insert(name.to_lowercase(), view);
    }

    /// Drop the temporary view `name`; false when there is none.
    pub(crate) fn drop_temp_view(&self, name: &str) -> bool {
        let mut views = self.temp_views.write().unwrap_or_else(|e| e.into_inner());
        views.remove(&name.to_lowercase()).is_some()
    }

    /// The session's temporary views, sorted.
    pub(crate) fn temp_views(&self) -> Vec<String> {
        let views = self.temp_views.read().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<String> = views.keys().cloned().collect();
        names.sort();
        names
    }

    /// The session's temporary function `name`.
    pub(crate) fn temp_function(&self, name: &str) -> Option<crate::catalog::Function> {
        let functions = self
            .temp_functions
            .read()
            .unwrap_or_else(|e| e.into_inner());
        functions.get(&name.to_lowercase()).cloned()
    }

    /// Define (or replace) the temporary function `name`.
    pub(crate) fn set_temp_function(&self, name: &str, function: crate::catalog::Function) {
        let mut functions = self
            .temp_functions
            .write()
            .unwrap_or_else(|e| e.into_inner());
        functions.insert(name.to_lowercase(), function);
    }

    /// Drop the temporary function `name`; false when there is none.
    pub(crate) fn drop_temp_function(&self, name: &str) -> bool {
        let mut functions = self
            .temp_functions
            .write()
            .unwrap_or_else(|e| e.into_inner());
        functions.remove(&name.to_lowercase()).is_some()
    }

    /// The session's temporary functions, sorted.
    pub(crate) fn temp_functions(&self) -> Vec<String> {
        let functions = self
            .temp_functions
            .read()
            .unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<String> = functions.keys().cloned().collect();
        names.sort();
        names
    }

    /// Parse one statement, resolving `IDENTIFIER()` with this session's variables.
    pub fn parse(&self, sql: &str) -> Result<Statement> {
        parser::parse(sql, self)
    }

    /// Resolve the name of a table a statement writes or changes to a three-part name in the
    /// current catalog/schema. A one-part name of a temporary view is refused: reads see the
    /// view, so a write must not reach the table it hides.
    pub fn table_name(&self, name: &ObjectName) -> Result<TableName> {
        let parts = name_parts(name)?;
        if let [one] = parts.as_slice()
            && self.temp_view(one).is_some()
        {
            return Err(Error::Invalid(format!(
                "{one} is a temporary view: it is read-only and hides any table of its name (DROP VIEW {one} first, or name the table with its schema)"
            )));
        }
        TableName::resolve(&parts, &self.catalog, &self.schema)
    }

    /// [`Session::table_name`] for statements that describe what a name is (a temporary view
    /// too).
    pub(crate) fn object_name(&self, name: &ObjectName) -> Result<TableName> {
        TableName::resolve(&name_parts(name)?, &self.catalog, &self.schema)
    }
}

/// The plain string parts of an object name.
pub fn name_parts(name: &ObjectName) -> Result<Vec<String>> {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => Ok(i.value.clone()),
            other => Err(Error::Invalid(format!("'{other}' is not a plain name"))),
        })
        .collect()
}

impl IdentifierResolver for Session {
    fn resolve_identifier(&self, expr: &Expr) -> Result<String> {
        bind::const_string(expr, &self.vars)
    }
}
