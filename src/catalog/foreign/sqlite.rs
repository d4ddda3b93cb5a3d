//! A SQLite file's tables, read by tidemark itself: each column typed from its declaration by
//! SQLite's affinity rules, rows streamed in batches from a read-only connection of the scan's
//! own, and every value checked against its column's type as it is read.
//!
//! The provider of `datafusion-table-providers` typed every column by the first row's value
//! (a NULL there made the column NULL in every row) and built the whole result as one batch
//! in memory (a large table took as much memory as its rows).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Float64Builder, Int64Builder, RecordBatch,
    RecordBatchOptions, StringBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::DataFusionError;
use datafusion::datasource::TableType;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use rusqlite::types::ValueRef;

/// Rows per batch of a scan.
const BATCH_ROWS: usize = 8192;

/// A batch ends early once its text and bytes reach this size (wide rows: memory stays
/// bounded, and a column's offsets within 32 bits).
const BATCH_BYTES: usize = 64 << 20;

/// Batches a scan reads ahead of its consumer.
const AHEAD: usize = 2;

/// How long a read waits for a writer's lock on the file.
const BUSY: std::time::Duration = std::time::Duration::from_secs(5);

/// One column as tidemark reads it.
#[derive(Debug, Clone)]
struct Spec {
    /// The declared type, as written (`INTEGER`, `varchar(20)`, or empty).
    declared: String,
    /// Whether the column holds only values of its type's own kind (declared INT, REAL or TEXT,
    /// or found so when the statement began): then filters on it may be sent to SQLite, which
    /// compares such values as the engine does, and a value of another kind the read meets is
    /// an error (a sent filter may pass over it instead).
    plain: bool,
}

/// A table (or view) of a SQLite file.
#[derive(Debug)]
pub(super) struct SqliteTable {
    path: PathBuf,
    table: String,
    schema: SchemaRef,
    specs: Vec<Spec>,
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A read-only connection to the file at `path`.
fn connect(path: &Path) -> rusqlite::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY)?;
    Ok(conn)
}

/// Whether the file at `path` opens as a SQLite database (read-only; a file of another kind
/// is refused here rather than at the first read).
pub(super) async fn check(path: &Path) -> Result<(), String> {
    names(path).await.map(|_| ())
}

/// The file's tables and views, a view marked `true`; not SQLite's own (`sqlite_` names,
/// which users cannot create).
pub(super) async fn names(path: &Path) -> Result<Vec<(String, bool)>, String> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let conn = connect(&path)?;
        let mut stmt = conn.prepare(
            "SELECT name, type = 'view' FROM sqlite_master \
             WHERE type IN ('table', 'view') AND lower(substr(name, 1, 7)) <> 'sqlite_'",
        )?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())
}

impl SqliteTable {
    /// The table `table` of the file at `path`, its columns typed by their declarations:
    /// INT → BIGINT, CHAR/CLOB/TEXT → STRING, REAL/FLOA/DOUB → DOUBLE,
    /// BOOL → BOOLEAN. A declaration that leaves the kind of value open (NUMERIC, DECIMAL,
    /// DATE, BLOB, none) is typed by the values the column holds (one pass over the table):
    /// any bytes BINARY, else any text STRING, any real DOUBLE, integers only BIGINT
    /// (exact past 2^53), no values STRING.
    pub(super) async fn open(path: &Path, table: &str) -> Result<SqliteTable, String> {
        let (path, name) = (path.to_path_buf(), table.to_string());
        tokio::task::spawn_blocking(move || Self::open_now(path, name))
            .await
            .map_err(|e| e.to_string())?
    }

    fn open_now(path: PathBuf, table: String) -> Result<SqliteTable, String> {
        let conn = connect(&path).map_err(|e| e.to_string())?;
        // Generated columns too (hidden 2 and 3); not a virtual table's hidden ones (1).
        let mut declared: Vec<(String, String)> = vec![];
        {
            let mut stmt = conn
                .prepare(
                    "SELECT name, coalesce(type, '') FROM pragma_table_xinfo(?1) WHERE hidden <> 1",
                )
                .map_err(|e| e.to_string())?;
            let rows = stmt
                .query_map([&table], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                })
                .map_err(|e| e.to_string())?;
            for row in rows {
                declared.push(row.map_err(|e| e.to_string())?);
            }
        }
        if declared.is_empty() {
            return Err(format!("SQLite table {table} has no columns to read"));
        }
        let mut fields = vec![];
        let mut specs = vec![];
        let mut open = vec![];
        for (name, kind) in &declared {
            let upper = kind.to_uppercase();
            let has = |part: &str| upper.contains(part);
            let (data_type, plain) = if has("INT") {
                (DataType::Int64, true)
            } else if has("CHAR") || has("CLOB") || has("TEXT") {
                (DataType::Utf8, true)
            } else if has("REAL") || has("FLOA") || has("DOUB") {
                (DataType::Float64, true)
            } else if has("BOOL") {
                // NUMERIC affinity: 'true' stays text, which SQLite compares unlike the engine.
                (DataType::Boolean, false)
            } else {
                open.push(fields.len());
                (DataType::Null, false)
            };
            fields.push(Field::new(name, data_type, true));
            specs.push(Spec {
                declared: kind.clone(),
                plain,
            });
        }
        if !open.is_empty() {
            let kinds = open
                .iter()
                .map(|&i| {
                    format!(
                        "coalesce(group_concat(DISTINCT typeof({})), '')",
                        quoted(fields[i].name())
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            let held: Vec<String> = conn
                .query_row(
                    &format!("SELECT {kinds} FROM {}", quoted(&table)),
                    [],
                    |r| (0..open.len()).map(|j| r.get::<_, String>(j)).collect(),
                )
                .map_err(|e| e.to_string())?;
            for (&i, classes) in open.iter().zip(held) {
                let has = |class: &str| classes.split(',').any(|c| c == class);
                let only = |allowed: &[&str]| {
                    classes
                        .split(',')
                        .all(|c| c.is_empty() || c == "null" || allowed.contains(&c))
                };
                let (data_type, plain) = if has("blob") {
                    (DataType::Binary, false)
                } else if has("text") {
                    (DataType::Utf8, only(&["text"]))
                } else if has("real") {
                    (DataType::Float64, only(&["real", "integer"]))
                } else if has("integer") {
                    (DataType::Int64, only(&["integer"]))
                } else {
                    (DataType::Utf8, false)
                };
                fields[i] = fields[i].clone().with_data_type(data_type);
                specs[i].plain = plain;
            }
        }
        // A column compared under a collation the file's application defines (SQLite knows
        // only BINARY, NOCASE and RTRIM) cannot be compared here: the query would fail, and
        // that collation's equal values are its own. Filters on it stay the engine's.
        for (field, spec) in fields.iter().zip(specs.iter_mut()) {
            if spec.plain {
                let name = quoted(field.name());
                let compared = format!(
                    "SELECT 1 FROM {} WHERE {name} = {name} LIMIT 0",
                    quoted(&table)
                );
                spec.plain = conn.prepare(&compared).is_ok();
            }
        }
        Ok(SqliteTable {
            path,
            table,
            schema: Arc::new(Schema::new(fields)),
            specs,
        })
    }

    /// `filter` in SQLite's SQL, when SQLite keeps every row the engine would; else None.
    ///
    /// Only a small grammar is written, here rather than by DataFusion's unparser (whose string
    /// escaping takes `''` and `\'` in a value as already escaped): AND and OR of comparisons
    /// (`=`, `<`, `<=`, `>`, `>=`), `IN` lists, BETWEEN and IS [NOT] NULL whose operands are
    /// plain columns of integers or text and integer or text constants. Text is compared only
    /// by `=` and `IN` (a column's built-in collation may match more rows, never fewer; a
    /// column under another collation is not plain), of the same kind
    /// on both sides. Nothing else is sent: no LIKE (SQLite's ignores case, and stops at a NUL),
    /// no negation, no numbers with a fraction (SQLite parses their text on its own terms), no
    /// booleans, functions or casts.
    fn sql_of(&self, filter: &Expr) -> Option<String> {
        use datafusion::logical_expr::Operator;
        match filter {
            Expr::BinaryExpr(b) if matches!(b.op, Operator::And | Operator::Or) => {
                let op = if b.op == Operator::And { "AND" } else { "OR" };
                Some(format!(
                    "({} {op} {})",
                    self.sql_of(&b.left)?,
                    self.sql_of(&b.right)?
                ))
            }
            Expr::BinaryExpr(b) => {
                let op = match b.op {
                    Operator::Eq => "=",
                    Operator::Lt => "<",
                    Operator::LtEq => "<=",
                    Operator::Gt => ">",
                    Operator::GtEq => ">=",
                    _ => return None,
                };
                let (left, right) = (self.operand(&b.left)?, self.operand(&b.right)?);
                (left.text == right.text && (op == "=" || !left.text))
                    .then(|| format!("({} {op} {})", left.sql, right.sql))
            }
            Expr::InList(l) if !l.negated && !l.list.is_empty() => {
                let column = self.operand(&l.expr)?;
                let items = l
                    .list
                    .iter()
                    .map(|i| {
                        self.operand(i)
                            .filter(|i| i.text == column.text)
                            .map(|i| i.sql)
                    })
                    .collect::<Option<Vec<_>>>()?;
                Some(format!("({} IN ({}))", column.sql, items.join(", ")))
            }
            Expr::Between(b) if !b.negated => {
                let (x, low, high) = (
                    self.operand(&b.expr)?,
                    self.operand(&b.low)?,
                    self.operand(&b.high)?,
                );
                (!x.text && !low.text && !high.text)
                    .then(|| format!("({} BETWEEN {} AND {})", x.sql, low.sql, high.sql))
            }
            Expr::IsNull(x) => Some(format!("({} IS NULL)", self.column(x)?.sql)),
            Expr::IsNotNull(x) => Some(format!("({} IS NOT NULL)", self.column(x)?.sql)),
            _ => None,
        }
    }

    /// A plain column of integers or text, quoted.
    fn column(&self, e: &Expr) -> Option<Operand> {
        let Expr::Column(c) = e else { return None };
        let i = self.schema.index_of(&c.name).ok()?;
        let text = match self.schema.field(i).data_type() {
            DataType::Int64 => false,
            DataType::Utf8 => true,
            _ => return None,
        };
        self.specs[i].plain.then(|| Operand {
            sql: quoted(&c.name),
            text,
        })
    }

    /// A plain column, or an integer or text constant written as SQLite reads it.
    fn operand(&self, e: &Expr) -> Option<Operand> {
        use datafusion::common::ScalarValue;
        let Expr::Literal(value, _) = e else {
            return self.column(e);
        };
        let (sql, text) = match value {
            ScalarValue::Int8(Some(n)) => (n.to_string(), false),
            ScalarValue::Int16(Some(n)) => (n.to_string(), false),
            ScalarValue::Int32(Some(n)) => (n.to_string(), false),
            ScalarValue::Int64(Some(n)) => (n.to_string(), false),
            ScalarValue::Utf8(Some(t))
            | ScalarValue::LargeUtf8(Some(t))
            | ScalarValue::Utf8View(Some(t))
                if !t.contains('\0') =>
            {
                (format!("'{}'", t.replace('\'', "''")), true)
            }
            _ => return None,
        };
        Some(Operand { sql, text })
    }
}

/// A column or constant of a filter sent to SQLite.
struct Operand {
    sql: String,
    text: bool,
}

#[async_trait::async_trait]
impl TableProvider for SqliteTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> datafusion::error::Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match self.sql_of(f) {
                Some(_) => TableProviderFilterPushDown::Inexact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        let columns: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let schema = Arc::new(self.schema.project(&columns)?);
        let specs = columns.iter().map(|&i| self.specs[i].clone()).collect();
        let list = if columns.is_empty() {
            "NULL".to_string()
        } else {
            columns
                .iter()
                .map(|&i| quoted(self.schema.field(i).name()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut sql = format!("SELECT {list} FROM {}", quoted(&self.table));
        let conditions: Vec<String> = filters.iter().filter_map(|f| self.sql_of(f)).collect();
        if !conditions.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&conditions.join(" AND "));
        }
        // A limit only where every row SQLite returns is a row of the result (the engine checks
        // the filters again, and could drop some of a limited set).
        if let (Some(n), true) = (limit, filters.is_empty()) {
            sql.push_str(&format!(" LIMIT {n}"));
        }
        Ok(Arc::new(SqliteScan::new(
            self.path.clone(),
            sql,
            schema,
            specs,
        )))
    }
}

/// The read of one SQL statement's rows, in batches.
#[derive(Debug)]
struct SqliteScan {
    path: PathBuf,
    sql: String,
    schema: SchemaRef,
    specs: Vec<Spec>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl SqliteScan {
    fn new(path: PathBuf, sql: String, schema: SchemaRef, specs: Vec<Spec>) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        SqliteScan {
            path,
            sql,
            schema,
            specs,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

impl DisplayAs for SqliteScan {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "SqliteScan: {}", self.sql)
    }
}

impl ExecutionPlan for SqliteScan {
    fn name(&self) -> &str {
        "SqliteScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
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

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            datafusion::common::internal_err!("SqliteScan has no children")
        }
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> datafusion::error::Result<SendableRecordBatchStream> {
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let (tx, rx) = tokio::sync::mpsc::channel::<datafusion::error::Result<RecordBatch>>(AHEAD);
        let (path, sql, schema, specs) = (
            &self.path,
            self.sql.clone(),
            self.schema.clone(),
            self.specs.clone(),
        );
        let conn = connect(path).map_err(|e| DataFusionError::Execution(e.to_string()))?;
        // Dropping the stream (a LIMIT met, a statement cancelled) interrupts the read, also
        // while SQLite scans for rows a filter keeps: at once when the read is under way, and
        // within a thousand of SQLite's steps when the stream went before the read began
        // (an interrupt then finds no statement to stop).
        let stop = Interrupt(conn.get_interrupt_handle());
        let listened = tx.clone();
        conn.progress_handler(1000, Some(move || listened.is_closed()));
        // The rows are read on a blocking thread of their own, a few batches ahead.
        tokio::task::spawn_blocking(move || {
            // A panic too ends the stream with an error, never as if the rows had run out.
            let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                read(&conn, &sql, &schema, &specs, &tx)
            }));
            let failed = match read {
                Ok(Ok(())) => return,
                Ok(Err(e)) => e,
                Err(panic) => format!(
                    "the read stopped: {}",
                    panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("internal error")
                ),
            };
            let _ = tx.blocking_send(Err(DataFusionError::Execution(failed)));
        });
        // The stream holds `stop` for as long as it lives.
        let batches = futures::stream::unfold((rx, stop), |(mut rx, stop)| async move {
            rx.recv().await.map(|b| (b, (rx, stop)))
        });
        let counted = futures::StreamExt::map(batches, move |b| {
            if let Ok(b) = &b {
                baseline.record_output(b.num_rows());
                baseline.output_batches().add(1);
            }
            b
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            counted,
        )))
    }
}

/// Read the rows of `sql` into batches of `schema` and send them; stops early when nobody
/// listens any more (a send fails, or the dropped stream interrupted the connection).
fn read(
    conn: &rusqlite::Connection,
    sql: &str,
    schema: &SchemaRef,
    specs: &[Spec],
    tx: &tokio::sync::mpsc::Sender<datafusion::error::Result<RecordBatch>>,
) -> Result<(), String> {
    let mut stmt = conn.prepare(sql).map_err(|e| e.to_string())?;
    let mut rows = stmt.query([]).map_err(|e| e.to_string())?;
    let mut columns: Vec<Builder> = schema
        .fields()
        .iter()
        .map(|f| Builder::new(f.data_type()))
        .collect();
    let mut n = 0;
    let flush = |columns: &mut Vec<Builder>, n: usize| -> Result<bool, String> {
        let arrays: Vec<ArrayRef> = columns.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new_with_options(
            schema.clone(),
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(n)),
        )
        .map_err(|e| e.to_string())?;
        Ok(tx.blocking_send(Ok(batch)).is_ok())
    };
    let mut bytes = 0;
    while let Some(row) = rows.next().map_err(|e| e.to_string())? {
        for (i, column) in columns.iter_mut().enumerate() {
            let value = row.get_ref(i).map_err(|e| e.to_string())?;
            if let ValueRef::Text(t) | ValueRef::Blob(t) = value {
                bytes += t.len();
            }
            column.push(value, specs[i].plain).map_err(|held| {
                let field = schema.field(i);
                format!(
                    "column {} (declared '{}', read as {}) holds {held}: correct the value in the database, or read the column through a SQLite view that converts it",
                    field.name(),
                    specs[i].declared,
                    crate::engine::types::type_name(field.data_type())
                )
            })?;
        }
        n += 1;
        if n == BATCH_ROWS || bytes >= BATCH_BYTES {
            if !flush(&mut columns, n)? {
                return Ok(());
            }
            (n, bytes) = (0, 0);
        }
    }
    if n > 0 {
        flush(&mut columns, n)?;
    }
    Ok(())
}

/// Interrupts a SQLite read when dropped (a no-op once the read has ended).
struct Interrupt(rusqlite::InterruptHandle);

impl Drop for Interrupt {
    fn drop(&mut self) {
        self.0.interrupt();
    }
}

/// A column being read.
enum Builder {
    Int(Int64Builder),
    Real(Float64Builder),
    Text(StringBuilder),
    Bytes(BinaryBuilder),
    Bool(BooleanBuilder),
}

/// How an error shows a value that does not fit its column.
fn shown(value: ValueRef) -> String {
    match value {
        ValueRef::Null => "NULL".into(),
        ValueRef::Integer(i) => format!("the integer {i}"),
        ValueRef::Real(f) => format!("the number {f}"),
        ValueRef::Text(t) => {
            let t = String::from_utf8_lossy(t);
            let cut: String = t.chars().take(40).collect();
            let more = if cut.len() < t.len() { "..." } else { "" };
            format!("the text '{cut}{more}'")
        }
        ValueRef::Blob(b) => format!("a BLOB of {} bytes", b.len()),
    }
}

impl Builder {
    fn new(data_type: &DataType) -> Builder {
        match data_type {
            DataType::Int64 => Builder::Int(Int64Builder::new()),
            DataType::Float64 => Builder::Real(Float64Builder::new()),
            DataType::Binary => Builder::Bytes(BinaryBuilder::new()),
            DataType::Boolean => Builder::Bool(BooleanBuilder::new()),
            _ => Builder::Text(StringBuilder::new()),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Int(b) => Arc::new(b.finish()),
            Builder::Real(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Bytes(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
        }
    }

    /// Append `value`, converted exactly to the column's type; a value that does not convert
    /// (or, in a `plain` column, a value of another kind) is an error showing it.
    fn push(&mut self, value: ValueRef, plain: bool) -> Result<(), String> {
        let refused = || Err(shown(value));
        match (self, value) {
            (Builder::Int(b), ValueRef::Null) => b.append_null(),
            (Builder::Real(b), ValueRef::Null) => b.append_null(),
            (Builder::Text(b), ValueRef::Null) => b.append_null(),
            (Builder::Bytes(b), ValueRef::Null) => b.append_null(),
            (Builder::Bool(b), ValueRef::Null) => b.append_null(),
            (Builder::Int(b), ValueRef::Integer(i)) => b.append_value(i),
            (Builder::Int(b), ValueRef::Real(f)) if !plain => match exact_integer(f) {
                Some(i) => b.append_value(i),
                None => return refused(),
            },
            (Builder::Int(b), ValueRef::Text(t)) if !plain => {
                match std::str::from_utf8(t)
                    .ok()
                    .and_then(|t| t.trim().parse().ok())
                {
                    Some(i) => b.append_value(i),
                    None => return refused(),
                }
            }
            (Builder::Real(b), ValueRef::Real(f)) => b.append_value(f),
            // Exact only within a double's 53 bits.
            (Builder::Real(b), ValueRef::Integer(i)) if (i as f64) as i64 == i && i != i64::MAX => {
                b.append_value(i as f64)
            }
            (Builder::Real(b), ValueRef::Text(t)) if !plain => {
                match std::str::from_utf8(t)
                    .ok()
                    .and_then(|t| t.trim().parse().ok())
                {
                    Some(f) => b.append_value(f),
                    None => return refused(),
                }
            }
            (Builder::Text(b), ValueRef::Text(t)) => match std::str::from_utf8(t) {
                Ok(s) => b.append_value(s),
                Err(_) => return Err(format!("{}, which is not UTF-8", shown(value))),
            },
            (Builder::Text(b), ValueRef::Integer(i)) if !plain => b.append_value(i.to_string()),
            (Builder::Text(b), ValueRef::Real(f)) if !plain => b.append_value(real_text(f)),
            (Builder::Text(b), ValueRef::Blob(t)) if !plain => match std::str::from_utf8(t) {
                Ok(s) => b.append_value(s),
                Err(_) => return refused(),
            },
            (Builder::Bytes(b), ValueRef::Blob(t) | ValueRef::Text(t)) => b.append_value(t),
            (Builder::Bool(b), ValueRef::Integer(i)) => b.append_value(i != 0),
            (Builder::Bool(b), ValueRef::Real(f)) if f == 0.0 || f == 1.0 => {
                b.append_value(f == 1.0)
            }
            (Builder::Bool(b), ValueRef::Text(t)) => {
                match std::str::from_utf8(t).map(|t| t.trim().to_ascii_lowercase()) {
                    Ok(t) if ["true", "t", "yes", "y", "on", "1"].contains(&t.as_str()) => {
                        b.append_value(true)
                    }
                    Ok(t) if ["false", "f", "no", "n", "off", "0"].contains(&t.as_str()) => {
                        b.append_value(false)
                    }
                    _ => return refused(),
                }
            }
            _ => return refused(),
        }
        Ok(())
    }
}

/// A real number as text, as SQLite shows one: with a point (`3.0`), every digit kept.
fn real_text(f: f64) -> String {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{f:.1}")
    } else {
        format!("{f:?}")
    }
}

/// `f` as an integer when it is one exactly.
fn exact_integer(f: f64) -> Option<i64> {
    // -2^63 is exact in a double; 2^63 is past i64::MAX.
    (f.fract() == 0.0 && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f))
        .then_some(f as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_back(
        data_type: DataType,
        plain: bool,
        values: &[ValueRef],
    ) -> Result<ArrayRef, String> {
        let mut b = Builder::new(&data_type);
        for v in values {
            b.push(*v, plain)?;
        }
        Ok(b.finish())
    }

    #[test]
    fn values_convert_exactly_or_are_refused_by_what_they_hold() {
        use datafusion::arrow::array::{Array, AsArray};
        use datafusion::arrow::datatypes::{Float64Type, Int64Type};
        let ints = read_back(
            DataType::Int64,
            false,
            &[
                ValueRef::Integer(i64::MAX),
                ValueRef::Real(3.0),
                ValueRef::Text(b" 7 "),
                ValueRef::Null,
            ],
        )
        .unwrap();
        let ints = ints.as_primitive::<Int64Type>();
        assert_eq!(ints.value(0), i64::MAX);
        assert_eq!(
            (ints.value(1), ints.value(2), ints.is_null(3)),
            (3, 7, true)
        );
        let err = read_back(DataType::Int64, false, &[ValueRef::Real(3.5)]).unwrap_err();
        assert_eq!(err, "the number 3.5");
        // In a plain column another kind is refused, even one that would convert.
        assert!(read_back(DataType::Int64, true, &[ValueRef::Text(b"7")]).is_err());
        assert!(read_back(DataType::Utf8, true, &[ValueRef::Integer(5)]).is_err());
        assert!(read_back(DataType::Utf8, true, &[ValueRef::Blob(b"x")]).is_err());
        let text = read_back(
            DataType::Utf8,
            false,
            &[
                ValueRef::Integer(5),
                ValueRef::Real(2.5),
                ValueRef::Real(3.0),
            ],
        )
        .unwrap();
        assert_eq!(text.as_string::<i32>().value(0), "5");
        assert_eq!(text.as_string::<i32>().value(1), "2.5");
        assert_eq!(text.as_string::<i32>().value(2), "3.0");
        // Doubles hold integers exactly to 2^53 only.
        let reals = read_back(DataType::Float64, true, &[ValueRef::Integer(1 << 53)]).unwrap();
        assert_eq!(
            reals.as_primitive::<Float64Type>().value(0),
            9007199254740992.0
        );
        assert!(read_back(DataType::Float64, true, &[ValueRef::Integer((1 << 53) + 1)]).is_err());
        let err = read_back(DataType::Boolean, false, &[ValueRef::Text(b"maybe")]).unwrap_err();
        assert_eq!(err, "the text 'maybe'");
        let long = "x".repeat(100);
        let err =
            read_back(DataType::Int64, false, &[ValueRef::Text(long.as_bytes())]).unwrap_err();
        assert_eq!(err, format!("the text '{}...'", "x".repeat(40)));
    }

    /// A scan nobody reads any more stops at once, also while SQLite looks for rows its filter
    /// keeps and has none to send: its connection lets go of the file, so a writer can lock it.
    #[test]
    fn a_dropped_scan_stops_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("endless.db");
        let writer = rusqlite::Connection::open(&path).unwrap();
        writer
            .execute_batch("CREATE TABLE one (x INTEGER); INSERT INTO one VALUES (1);")
            .unwrap();
        // Counts up for ever and keeps no row; reading `one` holds the file's shared lock.
        let endless = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) \
                       SELECT r.n FROM r, one WHERE r.n < 0";
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)]));
        let spec = Spec {
            declared: "INTEGER".into(),
            plain: true,
        };
        let scan = SqliteScan::new(path.clone(), endless.into(), schema, vec![spec]);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let waited = runtime.block_on(async {
            let mut stream = scan.execute(0, Arc::new(TaskContext::default())).unwrap();
            let waited = tokio::time::timeout(
                std::time::Duration::from_millis(300),
                futures::StreamExt::next(&mut stream),
            )
            .await;
            waited.is_err()
        });
        // (A read that goes on must fail the test, not hang it at the runtime's end.)
        runtime.shutdown_background();
        assert!(waited, "the endless scan sent something");
        // With the read still going, the exclusive lock waits out the busy timeout and fails.
        writer
            .busy_timeout(std::time::Duration::from_secs(10))
            .unwrap();
        let locked = writer.execute_batch("BEGIN EXCLUSIVE; COMMIT;");
        assert!(locked.is_ok(), "{locked:?}");
    }
}
