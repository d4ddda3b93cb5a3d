//! Opening a connection (a pool of database sessions, through `datafusion-table-providers`)
//! and the foreign catalog DataFusion sees: schemas and tables of the database, each table read
//! by the provider of its database's dialect, with projections, filters and LIMIT sent to the
//! database. A catalog connects on its first table, once per process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::common::TableReference;
use datafusion::error::DataFusionError;
use datafusion_table_providers::UnsupportedTypeAction;
use datafusion_table_providers::mysql::MySQLTableFactory;
use datafusion_table_providers::postgres::PostgresTableFactory;
use datafusion_table_providers::sql::db_connection_pool::mysqlpool::MySQLConnectionPool;
use datafusion_table_providers::sql::db_connection_pool::postgrespool::PostgresConnectionPool;
use datafusion_table_providers::util::secrets::to_secret_map;

use super::snapshot::{MySqlReads, PostgresReads, SnapshotReads};
use super::{Connection, ConnectionType, ForeignCatalog};
use crate::catalog::Warehouse;
use crate::error::{Error, Result};
use datafusion::logical_expr::{Expr as EngineExpr, TableProviderFilterPushDown};

/// An open connection, and the secrets its text must never show.
#[derive(Clone)]
pub struct Pool {
    db: Db,
    secrets: Secrets,
    /// The connection's name and kind (`connection lite (sqlite)`), for errors.
    label: String,
}

/// The database sessions of an open connection.
#[derive(Clone)]
enum Db {
    /// With how many connections one read of a large table may use.
    Postgres(Arc<PostgresConnectionPool>, usize),
    MySql(Arc<MySQLConnectionPool>, usize),
    /// The file: listing it and each table's reads open read-only connections of their own
    /// (nothing about the file changes, not its journal mode either).
    Sqlite(std::path::PathBuf),
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.db {
            Db::Postgres(..) => "Pool::Postgres",
            Db::MySql(..) => "Pool::MySql",
            Db::Sqlite(_) => "Pool::Sqlite",
        })
    }
}

/// The values of a connection's `secret(...)` options: every error text about the connection
/// (opening it, listing its tables, reading them) goes through [`Secrets::scrub`].
#[derive(Clone, Default)]
pub(in crate::catalog::foreign) struct Secrets(Arc<[String]>);

impl Secrets {
    fn of(connection: &Connection) -> Secrets {
        let mut values: Vec<String> = connection
            .options
            .values()
            .filter(|v| matches!(v, super::OptionValue::Secret { .. }))
            .filter_map(|v| v.resolve().ok())
            .filter(|v| !v.is_empty())
            .collect();
        // A longer secret that contains a shorter one is blanked whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        Secrets(values.into())
    }

    /// `text` with every secret value replaced by `***`.
    pub(in crate::catalog::foreign) fn scrub(&self, text: impl std::fmt::Display) -> String {
        let mut text = text.to_string();
        for s in self.0.iter() {
            text = text.replace(s.as_str(), "***");
        }
        text
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
        let secrets = Secrets::of(connection);
        let name = &connection.name;
        let at = |values: &HashMap<String, String>| {
            format!(
                "{}:{}",
                values.get("host").map(String::as_str).unwrap_or(""),
                values.get("port").map(String::as_str).unwrap_or("")
            )
        };
        let label = format!("connection {name} ({})", connection.kind.name());
        let failed = |e: &dyn std::fmt::Display, at: String| {
            Error::Invalid(format!(
                "connection {name} ({} at {at}) failed: {}",
                connection.kind.name(),
                secrets.scrub(e).trim()
            ))
        };
        match connection.kind {
            ConnectionType::Postgresql => {
                let connections = values
                    .get("read_connections")
                    .and_then(|n| n.parse::<usize>().ok())
                    .unwrap_or(super::READ_CONNECTIONS)
                    .clamp(1, super::MAX_READ_CONNECTIONS);
                let mut params = driver_params(&values, "port", "verify-full");
                // A statement or copy run holds its snapshot's connection while it reads, and
                // a large table's read adds `connections - 1` more: room for several at once
                // (a split read that finds none free reads on its holder).
                params.insert(
                    "connection_pool_size".into(),
                    (2 * connections + 8).to_string(),
                );
                // Timestamps compared in UTC (filters are sent with UTC literals), string
                // literals read as standard SQL writes them (a backslash is a backslash, on a
                // server configured otherwise too), and no session may write.
                params.insert(
                    "options".into(),
                    "-c TimeZone=UTC -c standard_conforming_strings=on -c default_transaction_read_only=on".into(),
                );
                params.insert("application_name".into(), "tidemark".into());
                let pool = PostgresConnectionPool::new(to_secret_map(params))
                    .await
                    .map_err(|e| failed(&e, at(&values)))?
                    // json and jsonb as STRING.
                    .with_unsupported_type_action(UnsupportedTypeAction::String);
                Ok(Pool {
                    db: Db::Postgres(Arc::new(pool), connections),
                    secrets,
                    label,
                })
            }
            ConnectionType::Mysql => {
                // One connection unless told: several line their snapshots up under a brief
                // `LOCK TABLES ... READ` (see `snapshot::mysql`), which a DBA opts into.
                let connections = values
                    .get("read_connections")
                    .and_then(|n| n.parse::<usize>().ok())
                    .unwrap_or(1)
                    .clamp(1, super::MAX_READ_CONNECTIONS);
                let params = driver_params(&values, "tcp_port", "required");
                let pool = MySQLConnectionPool::new(to_secret_map(params))
                    .await
                    .map_err(|e| failed(&e, at(&values)))?;
                Ok(Pool {
                    db: Db::MySql(Arc::new(pool), connections),
                    secrets,
                    label,
                })
            }
            ConnectionType::Sqlite => {
                let path = values.get("path").cloned().unwrap_or_default();
                // The engine would create a missing file: a typo must not make a database.
                if !std::path::Path::new(&path).is_file() {
                    return Err(Error::NotFound(format!(
                        "connection {name} (sqlite): no database file at {path}"
                    )));
                }
                super::sqlite::check(path.as_ref())
                    .await
                    .map_err(|e| failed(&e, path.clone()))?;
                Ok(Pool {
                    db: Db::Sqlite(path.into()),
                    secrets,
                    label,
                })
            }
        }
    }

    /// How errors name a table of this database: `table main.orders of connection lite
    /// (sqlite)`, secrets blanked.
    fn what(&self, schema: &str, table: &str) -> Arc<Named> {
        Arc::new(Named {
            name: format!("table {schema}.{table} of {}", self.label),
            secrets: self.secrets.clone(),
        })
    }

    /// The table `schema.table` of the database, read in its own dialect (a PostgreSQL or
    /// MySQL table's reads in one snapshot: see [`snapshot`](super::snapshot)).
    async fn table(&self, schema: &str, table: &str) -> Result<Checked> {
        let reference = TableReference::partial(schema, table);
        let failed = |e: &dyn std::fmt::Display| Error::Other(self.secrets.scrub(e));
        match &self.db {
            Db::Postgres(p, connections) => {
                let provider = PostgresTableFactory::new(p.clone())
                    .table_provider(reference)
                    .await
                    .map_err(|e| failed(&e))?;
                let reads = PostgresReads::of(
                    p.clone(),
                    &provider,
                    schema,
                    table,
                    *connections,
                    self.secrets.clone(),
                );
                Ok(Checked {
                    inner: provider,
                    reads: reads.map(|r| Arc::new(r) as Arc<dyn SnapshotReads>),
                    what: self.what(schema, table),
                    postgres: Some((p.clone(), schema.to_string(), table.to_string())),
                })
            }
            Db::MySql(p, connections) => {
                let provider = MySQLTableFactory::new(p.clone())
                    .table_provider(reference)
                    .await
                    .map_err(|e| failed(&e))?;
                let reads = MySqlReads::of(
                    p.clone(),
                    &provider,
                    schema,
                    table,
                    *connections,
                    self.secrets.clone(),
                );
                Ok(Checked {
                    inner: provider,
                    reads: Some(Arc::new(reads)),
                    what: self.what(schema, table),
                    postgres: None,
                })
            }
            Db::Sqlite(path) => Ok(Checked {
                inner: Arc::new(
                    super::sqlite::SqliteTable::open(path, table)
                        .await
                        .map_err(|e| failed(&e))?,
                ),
                reads: None,
                what: self.what(schema, table),
                postgres: None,
            }),
        }
    }

    /// Every schema of the database with its tables and views (plain, materialized and
    /// foreign tables too), in the database's own spelling, sorted.
    async fn names(&self) -> Result<Names> {
        let other = |what: &str, e: &dyn std::fmt::Display| {
            Error::Other(
                self.secrets
                    .scrub(format!("listing the tables of the database: {what}: {e}")),
            )
        };
        // (schema, relation, is a view): a schema with no relations has one row with none.
        let rows: Vec<(String, Option<String>, bool)> = match &self.db {
            Db::Postgres(p, _) => {
                let conn = p
                    .connect_direct()
                    .await
                    .map_err(|e| other("connection", &e))?;
                conn.conn
                    .query(POSTGRES_NAMES, &[])
                    .await
                    .map_err(|e| other("query", &e))?
                    .iter()
                    .map(|r| {
                        (
                            r.get(0),
                            r.get(1),
                            r.get::<_, Option<bool>>(2) == Some(true),
                        )
                    })
                    .collect()
            }
            Db::MySql(p, _) => {
                use mysql_async::prelude::Queryable;
                let conn = p
                    .connect_direct()
                    .await
                    .map_err(|e| other("connection", &e))?;
                let mut c = conn.conn.lock().await;
                c.query::<(String, Option<String>, Option<String>), _>(MYSQL_NAMES)
                    .await
                    .map_err(|e| other("query", &e))?
                    .into_iter()
                    .map(|(s, t, kind)| (s, t, kind.is_some_and(|k| k.ends_with("VIEW"))))
                    .collect()
            }
            Db::Sqlite(path) => {
                let mut rows = vec![("main".to_string(), None, false)];
                for (name, view) in super::sqlite::names(path)
                    .await
                    .map_err(|e| other("query", &e))?
                {
                    rows.push(("main".to_string(), Some(name), view));
                }
                rows
            }
        };
        let mut schemas: std::collections::BTreeMap<String, Vec<Relation>> = Default::default();
        for (schema, relation, view) in rows {
            let relations = schemas.entry(schema).or_default();
            if let Some(name) = relation {
                relations.push(Relation { name, view });
            }
        }
        Ok(schemas
            .into_iter()
            .map(|(s, mut r)| {
                r.sort_by(|a, b| a.name.cmp(&b.name));
                (s, r)
            })
            .collect())
    }
}

/// PostgreSQL's schemas and relations that can be read as tables: tables, partitioned tables,
/// views, materialized views and foreign tables (not the system's, TOAST or temporary
/// schemas).
const POSTGRES_NAMES: &str = "SELECT n.nspname::text, c.relname::text, c.relkind IN ('v', 'm') \
    FROM pg_catalog.pg_namespace n \
    LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relkind IN ('r', 'p', 'v', 'm', 'f') \
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_(toast|temp_)'";

/// MySQL's and MariaDB's databases (but the system's) and their tables and views.
const MYSQL_NAMES: &str = "SELECT s.SCHEMA_NAME, t.TABLE_NAME, t.TABLE_TYPE \
    FROM INFORMATION_SCHEMA.SCHEMATA s \
    LEFT JOIN INFORMATION_SCHEMA.TABLES t ON t.TABLE_SCHEMA = s.SCHEMA_NAME \
    WHERE s.SCHEMA_NAME NOT IN ('information_schema', 'mysql', 'performance_schema', 'sys')";

/// The database's spelling of the name `wanted` among `have` (the names of `catalog`'s
/// schemas, or of one schema's tables): the exact name, else the one that differs only in
/// case (None: neither); several such are refused by name.
pub fn spelling<'a>(
    catalog: &str,
    what: &str,
    wanted: &str,
    have: impl IntoIterator<Item = &'a String>,
) -> Result<Option<String>> {
    let have: Vec<&String> = have.into_iter().collect();
    if let Some(exact) = have.iter().find(|h| h.as_str() == wanted) {
        return Ok(Some((*exact).clone()));
    }
    let folded: Vec<&&String> = have
        .iter()
        .filter(|h| h.eq_ignore_ascii_case(wanted))
        .collect();
    match folded.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some((**one).clone())),
        many => Err(Error::Invalid(format!(
            "{catalog}: {what} {wanted} matches {} in the database: name it exactly, quoted with backticks",
            many.iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The options under the driver's names (its port key differs), TLS verified unless told.
fn driver_params(
    values: &HashMap<String, String>,
    port_key: &str,
    default_tls: &str,
) -> HashMap<String, String> {
    let mut params = HashMap::new();
    for (ours, theirs) in [
        ("host", "host"),
        ("port", port_key),
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
        .or_insert_with(|| default_tls.into());
    params
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
    names: Mutex<Option<Names>>,
    /// The database the catalog is limited to (MySQL lists every database it may read).
    database: Mutex<Option<String>>,
}

/// Schemas and their tables and views, in the database's own spelling.
pub type Names = Vec<(String, Vec<Relation>)>;

/// A table or view of a foreign catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct Relation {
    /// As the database spells it.
    pub name: String,
    /// A view or materialized view (read as a table all the same).
    pub view: bool,
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
            database: Mutex::new(None),
        }))
    }

    /// Schemas, tables and views of the database as it has them now.
    pub async fn list(&self) -> Result<Names> {
        self.0.relist().await
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
                if connection.kind == ConnectionType::Mysql
                    && let Some(db) = def.options.get("database")
                    && let Ok(mut d) = self.database.lock()
                {
                    *d = Some(db.resolve()?);
                }
                Pool::open(&connection, Some(&def)).await
            })
            .await
    }

    /// The database's own spelling of `schema` (and of `table` in it): an exact match, else
    /// the one that differs only in case; several such are refused by name. Names are listed
    /// once and listed again when one is not found (a table created in the
    /// database since).
    async fn spelled(&self, schema: &str, table: Option<&str>) -> Result<(String, Option<String>)> {
        let cached = self.names.lock().ok().and_then(|n| n.clone());
        if let Some(names) = cached
            && let (Some(s), t) = Self::spelled_in(&self.catalog, &names, schema, table)?
            && (t.is_some() || table.is_none())
        {
            return Ok((s, t));
        }
        // Never listed, or a name the last list lacks: list now.
        match Self::spelled_in(&self.catalog, &self.relist().await?, schema, table)? {
            (Some(s), t) => Ok((s, t)),
            (None, _) => Err(Error::NotFound(format!(
                "schema {schema} not found in the foreign catalog {} (SHOW SCHEMAS IN {} lists them)",
                self.catalog, self.catalog
            ))),
        }
    }

    /// [`Self::spelled`] in `names`: the schema (None: not there) and the table.
    fn spelled_in(
        catalog: &str,
        names: &Names,
        schema: &str,
        table: Option<&str>,
    ) -> Result<(Option<String>, Option<String>)> {
        let Some(schema_name) = spelling(catalog, "schema", schema, names.iter().map(|(s, _)| s))?
        else {
            return Ok((None, None));
        };
        let table_name = match table {
            None => None,
            Some(t) => {
                let tables = names
                    .iter()
                    .filter(|(s, _)| s == &schema_name)
                    .flat_map(|(_, t)| t.iter().map(|r| &r.name));
                spelling(catalog, "table", t, tables)?
            }
        };
        Ok((Some(schema_name), table_name))
    }

    /// The schemas and relations as the database has them now (kept for the next lookups).
    async fn relist(&self) -> Result<Names> {
        let mut names = self
            .pool()
            .await?
            .names()
            .await
            .map_err(|e| e.context(format!("foreign catalog {}", self.catalog)))?;
        if let Some(db) = self.database.lock().ok().and_then(|d| d.clone()) {
            // The catalog's database as the server spells it (in another case on a server
            // that folds names, `lower_case_table_names`).
            let kept = spelling(&self.catalog, "database", &db, names.iter().map(|(s, _)| s))?;
            names.retain(|(s, _)| Some(s) == kept.as_ref());
        }
        if let Ok(mut n) = self.names.lock() {
            *n = Some(names.clone());
        }
        Ok(names)
    }

    fn listed(&self) -> Names {
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
            .map(|(_, t)| t.into_iter().map(|r| r.name).collect())
            .unwrap_or_default()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
        let external = |e: Error| DataFusionError::External(Box::new(e));
        let key = [
            self.catalog.catalog.clone(),
            self.schema.clone(),
            name.to_string(),
        ];
        if let Some(provider) = crate::catalog::opened_foreign(&key) {
            return Ok(Some(provider));
        }
        let full = format!("{}.{}.{name}", self.catalog.catalog, self.schema);
        let (schema, table) = self
            .catalog
            .spelled(&self.schema, Some(name))
            .await
            .map_err(|e| external(e.context(&full)))?;
        let Some(table) = table else {
            return Err(external(Error::NotFound(format!(
                "table {full} not found in its database (SHOW TABLES IN {}.{schema} lists them)",
                self.catalog.catalog
            ))));
        };
        let pool = self.catalog.pool().await.map_err(external)?;
        let provider: Arc<dyn TableProvider> = Arc::new(
            pool.table(&schema, &table)
                .await
                .map_err(|e| external(e.context(&full)))?,
        );
        crate::catalog::keep_foreign(&key, &provider);
        Ok(Some(provider))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.table_names().iter().any(|t| t == name)
    }
}

/// The database's scan, closed to the physical optimizer's filter pushdown: the filters the
/// database runs are those [`Checked`] let through when the plan was made (DataFusion would
/// otherwise offer a `FilterExec`'s whole predicate, string ordering included, to the
/// provider, which takes any filter it can write as SQL, and drop the `FilterExec`).
///
/// Its errors name the table and its connection, secrets blanked.
#[derive(Debug)]
struct EngineFilters(
    Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    Arc<Named>,
);

impl datafusion::physical_plan::DisplayAs for EngineFilters {
    fn fmt_as(
        &self,
        _: datafusion::physical_plan::DisplayFormatType,
        f: &mut std::fmt::Formatter,
    ) -> std::fmt::Result {
        write!(f, "EngineFilters")
    }
}

impl datafusion::physical_plan::ExecutionPlan for EngineFilters {
    fn name(&self) -> &str {
        "EngineFilters"
    }

    fn properties(&self) -> &Arc<datafusion::physical_plan::PlanProperties> {
        self.0.properties()
    }

    fn apply_expressions(
        &self,
        _: &mut dyn FnMut(
            &Arc<dyn datafusion::physical_expr::PhysicalExpr>,
        ) -> datafusion::error::Result<
            datafusion::common::tree_node::TreeNodeRecursion,
        >,
    ) -> datafusion::error::Result<datafusion::common::tree_node::TreeNodeRecursion> {
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    }

    fn children(&self) -> Vec<&Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        vec![&self.0]
    }

    /// Nothing between the database's scan and this node: its batches are conformed here
    /// first (a repartition would check their types before).
    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
    ) -> datafusion::error::Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        match children.pop() {
            Some(child) if children.is_empty() => {
                Ok(Arc::new(EngineFilters(child, self.1.clone())))
            }
            _ => datafusion::common::internal_err!("EngineFilters has one child"),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<datafusion::execution::TaskContext>,
    ) -> datafusion::error::Result<datafusion::execution::SendableRecordBatchStream> {
        let what = self.1.clone();
        let rows = self
            .0
            .execute(partition, context)
            .map_err(|e| what.failed(e))?;
        // Batches in the plan's types: SQLite's reader decodes a column whose first value
        // is text as text whatever its declared type; cast strictly (a value that does not
        // convert is an error, never a NULL).
        let schema = self.0.schema();
        let what = self.1.clone();
        let conform = schema.clone();
        Ok(Box::pin(
            datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(
                schema,
                futures::StreamExt::map(rows, move |batch| {
                    let batch = batch.map_err(|e| what.failed(e))?;
                    conformed(batch, &conform).map_err(|e| what.failed(e))
                }),
            ),
        ))
    }
}

/// `batch` with its columns in `schema`'s types (strict casts), where they differ.
fn conformed(
    batch: datafusion::arrow::array::RecordBatch,
    schema: &datafusion::arrow::datatypes::SchemaRef,
) -> datafusion::error::Result<datafusion::arrow::array::RecordBatch> {
    let same = batch.num_columns() == schema.fields().len()
        && batch
            .schema()
            .fields()
            .iter()
            .zip(schema.fields())
            .all(|(a, b)| a.data_type() == b.data_type());
    if same {
        return Ok(batch);
    }
    if batch.num_columns() != schema.fields().len() {
        return Err(DataFusionError::Execution(format!(
            "the database returned {} columns where {} were asked for",
            batch.num_columns(),
            schema.fields().len()
        )));
    }
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            crate::engine::types::cast_strict(c, f.data_type())
                .map_err(|e| DataFusionError::Execution(format!("column {}: {e}", f.name())))
        })
        .collect::<datafusion::error::Result<Vec<_>>>()?;
    let options =
        datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(datafusion::arrow::array::RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &options,
    )?)
}

/// A database's table with every filter checked again by the engine: the database runs the
/// filters it can (fewer rows cross the wire) under its own collation and comparison rules,
/// so only those that can keep more rows than the engine would, never fewer, are sent
/// (`=`, `IN` and `LIKE` on strings: a case-insensitive collation matches more); ordering
/// comparisons of strings, `<>` and NOT on strings stay in the engine.
///
/// A PostgreSQL or MySQL table's reads all run in one snapshot ([`SnapshotReads`]).
#[derive(Debug)]
struct Checked {
    inner: Arc<dyn TableProvider>,
    reads: Option<Arc<dyn SnapshotReads>>,
    what: Arc<Named>,
    /// A PostgreSQL table's pool, schema and name, for [`lossy_column`].
    postgres: Option<(Arc<PostgresConnectionPool>, String, String)>,
}

/// A column of a database table (its name and the database's type) that the engine reads but
/// not exactly, which a copy must refuse: a PostgreSQL range (read as its two bounds, not
/// their inclusiveness), bit string or geometric shape (read as bytes). Asked of the database
/// when a copy needs it (a query reads such columns as the reader maps them).
pub async fn lossy_column(provider: &Arc<dyn TableProvider>) -> Result<Option<(String, String)>> {
    let Some(checked) = provider.downcast_ref::<Checked>() else {
        return Ok(None);
    };
    let Some((pool, schema, table)) = &checked.postgres else {
        return Ok(None);
    };
    let lossy = postgres_lossy(pool, schema, table).await.map_err(|e| {
        Error::Other(checked.what.secrets.scrub(format!(
            "{}: reading its column types: {e}",
            checked.what.name
        )))
    })?;
    Ok(lossy.into_iter().next())
}

/// The columns of a PostgreSQL relation (`$1`, quoted and qualified) whose type the
/// PostgreSQL reader maps to something else than its values: ranges and multiranges, bit
/// strings, geometric types and PostGIS' (and arrays of them), with their types as
/// PostgreSQL writes them.
const POSTGRES_LOSSY: &str = "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
     FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
     LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A' \
     WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped \
     AND (COALESCE(e.typtype, t.typtype) IN ('r', 'm') \
     OR COALESCE(e.typname, t.typname) IN ('bit', 'varbit', 'line', 'lseg', 'box', 'path', \
     'polygon', 'circle', 'geometry', 'geography')) ORDER BY a.attnum";

/// [`POSTGRES_LOSSY`] for `schema.table`.
async fn postgres_lossy(
    pool: &Arc<PostgresConnectionPool>,
    schema: &str,
    table: &str,
) -> std::result::Result<Vec<(String, String)>, Box<dyn std::error::Error + Send + Sync>> {
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let conn = pool.connect_direct().await?;
    let rows = conn
        .conn
        .query(
            POSTGRES_LOSSY,
            &[&format!("{}.{}", quote(schema), quote(table))],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// A database table as errors of its reads name it.
struct Named {
    name: String,
    secrets: Secrets,
}

impl std::fmt::Debug for Named {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl Named {
    /// `e` of a read of the table, naming it, secrets blanked.
    fn failed(&self, e: DataFusionError) -> DataFusionError {
        DataFusionError::Execution(self.secrets.scrub(format!(
            "{}: {}",
            self.name,
            e.message().trim()
        )))
    }
}

/// The snapshot a database table's reads ran in, as the database names it (PostgreSQL's
/// `txid_current_snapshot()`, MariaDB's binary log position), once one has run; None for other
/// tables and databases.
pub fn snapshot_of(provider: &Arc<dyn TableProvider>) -> Option<String> {
    provider
        .downcast_ref::<Checked>()?
        .reads
        .as_ref()?
        .snapshot_name()
}

/// End the snapshot transaction of a database table's reads, every read of it having run;
/// the snapshot's name, as [`snapshot_of`].
pub fn finish_reads(provider: &Arc<dyn TableProvider>) -> Option<String> {
    provider.downcast_ref::<Checked>()?.reads.as_ref()?.finish()
}

#[async_trait::async_trait]
impl TableProvider for Checked {
    fn schema(&self) -> datafusion::arrow::datatypes::SchemaRef {
        self.inner.schema()
    }

    fn table_type(&self) -> datafusion::datasource::TableType {
        self.inner.table_type()
    }

    async fn scan(
        &self,
        state: &dyn datafusion::catalog::Session,
        projection: Option<&Vec<usize>>,
        filters: &[EngineExpr],
        limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        // No column wanted (count(*)): the provider would still send one; read the first and
        // keep none of it, only the row count.
        let scan = async |projection: Option<&Vec<usize>>| match &self.reads {
            Some(reads) => reads.clone().scan(projection, filters, limit).await,
            None => {
                let scan = self
                    .inner
                    .scan(state, projection, filters, limit)
                    .await
                    .map_err(|e| self.what.failed(e))?;
                Ok(Arc::new(EngineFilters(scan, self.what.clone()))
                    as Arc<dyn datafusion::physical_plan::ExecutionPlan>)
            }
        };
        // (SQLite's reader counts rows with no column.)
        let counts_alone = self
            .inner
            .downcast_ref::<super::sqlite::SqliteTable>()
            .is_some();
        if projection.is_some_and(|p| p.is_empty())
            && !self.inner.schema().fields().is_empty()
            && !counts_alone
        {
            let one = scan(Some(&vec![0])).await?;
            let none: Vec<(Arc<dyn datafusion::physical_expr::PhysicalExpr>, String)> = vec![];
            return Ok(Arc::new(
                datafusion::physical_plan::projection::ProjectionExec::try_new(none, one)?,
            ));
        }
        scan(projection).await
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&EngineExpr],
    ) -> datafusion::error::Result<Vec<TableProviderFilterPushDown>> {
        let schema = self.inner.schema();
        let inner = self.inner.supports_filters_pushdown(filters)?;
        Ok(filters
            .iter()
            .zip(inner)
            .map(|(f, theirs)| match theirs {
                TableProviderFilterPushDown::Unsupported => {
                    TableProviderFilterPushDown::Unsupported
                }
                _ if compares_strings_loosely(f, &schema) || !plain_filter(f) => {
                    TableProviderFilterPushDown::Unsupported
                }
                _ => TableProviderFilterPushDown::Inexact,
            })
            .collect())
    }
}

/// Whether a filter means the same in the database as in the engine: columns, constants,
/// comparisons, AND/OR/NOT, IS [NOT] NULL, IN and BETWEEN. Functions, arithmetic and casts of
/// columns stay in the engine: the database would round, overflow and convert by its own
/// rules (PostgreSQL rounds on `CAST(2.7 AS INT)`, Databricks truncates), and it knows none
/// of tidemark's functions (`a + 1` is `__add(a, 1)`).
fn plain_filter(f: &EngineExpr) -> bool {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::logical_expr::Operator;
    // A comparison's operands are values, not predicates: `(name = 'bob') = (id < 0)` would
    // turn a loose string comparison into a negation.
    let value = |e: &EngineExpr| match e {
        EngineExpr::Column(_) | EngineExpr::Literal(..) => true,
        EngineExpr::Cast(c) => matches!(*c.expr, EngineExpr::Literal(..)),
        EngineExpr::TryCast(c) => matches!(*c.expr, EngineExpr::Literal(..)),
        _ => false,
    };
    let mut plain = true;
    let _ = f.apply(|e| {
        let ok = match e {
            EngineExpr::Column(_)
            | EngineExpr::Literal(..)
            | EngineExpr::Not(_)
            | EngineExpr::IsNull(_)
            | EngineExpr::IsNotNull(_)
            | EngineExpr::Alias(_) => true,
            EngineExpr::InList(l) => value(&l.expr),
            EngineExpr::Between(b) => value(&b.expr),
            EngineExpr::Like(l) => value(&l.expr) && value(&l.pattern),
            EngineExpr::BinaryExpr(b) => match b.op {
                Operator::And | Operator::Or => true,
                Operator::Eq
                | Operator::NotEq
                | Operator::Lt
                | Operator::LtEq
                | Operator::Gt
                | Operator::GtEq => value(&b.left) && value(&b.right),
                _ => false,
            },
            EngineExpr::Cast(c) => matches!(*c.expr, EngineExpr::Literal(..)),
            EngineExpr::TryCast(c) => matches!(*c.expr, EngineExpr::Literal(..)),
            _ => false,
        };
        if ok {
            Ok(TreeNodeRecursion::Continue)
        } else {
            plain = false;
            Ok(TreeNodeRecursion::Stop)
        }
    });
    plain
}

/// Whether a filter compares strings in a way a database's collation could answer with fewer
/// rows than the engine: anything but `=`, `IN` and `LIKE` on a string column, or any of them
/// under NOT.
fn compares_strings_loosely(f: &EngineExpr, schema: &datafusion::arrow::datatypes::Schema) -> bool {
    use datafusion::arrow::datatypes::DataType;
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::logical_expr::Operator;
    let is_string = |e: &EngineExpr| match e {
        EngineExpr::Column(c) => schema.field_with_name(&c.name).is_ok_and(|f| {
            matches!(
                f.data_type(),
                DataType::Utf8
                    | DataType::LargeUtf8
                    | DataType::Utf8View
                    | DataType::Dictionary(..)
            )
        }),
        _ => false,
    };
    let touches_string = |e: &EngineExpr| {
        let mut found = false;
        let _ = e.apply(|n| {
            if is_string(n) {
                found = true;
                return Ok(TreeNodeRecursion::Stop);
            }
            Ok(TreeNodeRecursion::Continue)
        });
        found
    };
    let mut loose = false;
    let _ = f.apply(|n| {
        let bad = match n {
            EngineExpr::Not(inner) => touches_string(inner),
            EngineExpr::Like(l) => l.negated && touches_string(n),
            EngineExpr::InList(l) => l.negated && touches_string(n),
            EngineExpr::BinaryExpr(b) => {
                !matches!(b.op, Operator::Eq | Operator::And | Operator::Or)
                    && (touches_string(&b.left) || touches_string(&b.right))
            }
            EngineExpr::Between(_) | EngineExpr::ScalarFunction(_) | EngineExpr::Case(_) => {
                touches_string(n)
            }
            _ => false,
        };
        if bad {
            loose = true;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    loose
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::foreign::OptionValue;

    #[test]
    fn secrets_are_blanked_out_of_error_texts_longest_first() {
        // SAFETY: variables of this test's own names, read only by this test.
        unsafe {
            std::env::set_var("TIDEMARK_SECRET_SCRUBTEST_PASS", "hunter2");
            std::env::set_var("TIDEMARK_SECRET_SCRUBTEST_TOKEN", "hunter2-long");
        }
        let secret = |key: &str| OptionValue::Secret {
            scope: "scrubtest".into(),
            key: key.into(),
        };
        let connection = Connection::new(
            "pg",
            ConnectionType::Postgresql,
            vec![
                ("host".into(), OptionValue::Text("hunter".into())),
                ("user".into(), secret("token")),
                ("password".into(), secret("pass")),
            ],
            None,
        )
        .unwrap();
        let secrets = Secrets::of(&connection);
        assert_eq!(
            secrets.scrub("role hunter2-long, password hunter2 at hunter"),
            "role ***, password *** at hunter"
        );
        assert_eq!(Secrets::default().scrub("hunter2"), "hunter2");
    }
}
