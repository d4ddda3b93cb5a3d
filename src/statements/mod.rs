//! Statement execution: one file per family of statements, each with one entry point that
//! takes the parsed statement and the session and returns record batches.

pub mod clauses;
pub mod copy;
pub mod copy_into;
pub mod ddl;
pub mod dml;
pub mod for_each;
pub mod group_commit;
pub mod maintenance;
pub mod query;
pub(crate) mod retry;
pub mod rewrite;
pub mod script;
pub mod show;
pub(crate) mod table;
pub mod upkeep;
pub mod variables;
pub(crate) mod writer;

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::sql::sqlparser::ast::Statement as Sql;

use crate::engine::{Output, Reply, Session};
use crate::error::{Error, Result};
use crate::parser::Statement;

/// Parse and run one statement.
pub fn run<'a>(
    session: &'a mut Session,
    sql: &'a str,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Output>> + Send + 'a>> {
    // Boxed: FOR EACH bodies run statements, so execution is recursive. Send: loop iterations
    // run as tasks on every worker.
    Box::pin(async move {
        let stmt = session.parse(sql)?;
        execute(session, stmt).await
    })
}

/// Parse and run one statement; a query's rows come as a stream.
pub async fn run_streaming(session: &mut Session, sql: &str) -> Result<Reply> {
    let stmt = session.parse(sql)?;
    execute_streaming(session, stmt).await
}

/// Run one parsed statement (its reads of one database's tables in one snapshot).
pub async fn execute(session: &mut Session, stmt: Statement) -> Result<Output> {
    crate::catalog::foreign::statement(Box::pin(execute_one(session, stmt))).await
}

async fn execute_one(session: &mut Session, stmt: Statement) -> Result<Output> {
    session.warehouse().root().begin_statement();
    if stmt.writes_tables() {
        session.warehouse().check_writable(None)?;
    }
    match stmt {
        Statement::Sql(s) => execute_sql(session, *s).await,
        Statement::Use { kind, name } => ddl::use_(session, kind, &name),
        Statement::Show { what, within, like } => {
            show::show(session, what, within.as_ref(), like.as_deref()).await
        }
        Statement::CreateConnection(c) => ddl::connection::create_connection(session, *c).await,
        Statement::CreateForeignCatalog(c) => {
            ddl::connection::create_foreign_catalog(session, *c).await
        }
        Statement::DropConnection { name, if_exists } => {
            ddl::connection::drop_connection(session, &name, if_exists)
        }
        Statement::ShowConnections => ddl::connection::show_connections(session),
        Statement::DescribeConnection { name } => {
            ddl::connection::describe_connection(session, &name)
        }
        Statement::OnTable(t) => ddl::on_table::execute(session, *t).await,
        Statement::Insert(i) => dml::insert_by(session, *i).await,
        Statement::CloneTable(c) => Box::pin(ddl::clone::clone_table(session, *c)).await,
        Statement::Script(c) => script::execute(session, *c).await,
        Statement::ExecuteImmediate { sql, into, using } => {
            script::execute_immediate(session, *sql, into, using).await
        }
        Statement::CreateFunction(c) => ddl::function::create(session, *c).await,
        Statement::DropFunction {
            temporary,
            if_exists,
            name,
        } => ddl::function::drop(session, &name, temporary, if_exists),
        Statement::DescribeFunction { name, extended } => {
            ddl::function::describe(session, &name, extended)
        }
        Statement::ShowFunctions { kind, within, like } => {
            ddl::function::show(session, kind, within.as_ref(), like.as_deref())
        }
        Statement::DescribeQuery { query } => Box::pin(show::describe_query(session, *query)).await,
        Statement::Describe {
            table,
            history,
            extended,
        } => {
            if history {
                show::describe_history(session, &table).await
            } else {
                show::describe(session, &table, extended).await
            }
        }
        Statement::CreateCatalog {
            name,
            if_not_exists,
            location,
        } => ddl::create_catalog(session, &name, if_not_exists, location.as_deref()),
        Statement::CreateSchemaAt {
            name,
            if_not_exists,
            location,
        } => ddl::create_schema(
            session,
            &datafusion::sql::sqlparser::ast::SchemaName::Simple(name),
            if_not_exists,
            Some(&location),
        ),
        Statement::DropCatalog {
            name,
            if_exists,
            cascade,
        } => Box::pin(ddl::drop_catalog(session, &name, if_exists, cascade)).await,
        Statement::AddColumns { table, columns } => {
            ddl::add_columns(session, &table, columns).await
        }
        Statement::AddConstraint { table, name, check } => {
            ddl::add_constraint(session, &table, &name.value, &check).await
        }
        Statement::DropConstraint {
            table,
            name,
            if_exists,
        } => ddl::drop_constraint(session, &table, &name.value, if_exists).await,
        Statement::SetProperties { table, properties } => {
            ddl::set_properties(session, &table, properties).await
        }
        Statement::Optimize {
            table,
            predicate,
            zorder,
        } => maintenance::optimize(session, &table, predicate, zorder).await,
        Statement::Vacuum {
            table,
            retain_hours,
            dry_run,
        } => maintenance::vacuum(session, &table, retain_hours, dry_run).await,
        Statement::Declare {
            or_replace,
            name,
            data_type,
            default,
        } => variables::declare(session, or_replace, &name, data_type.as_ref(), default).await,
        Statement::SetVariables { assignments } => variables::set(session, assignments).await,
        Statement::SetVariablesFromQuery { names, query } => {
            variables::set_from_query(session, names, *query).await
        }
        Statement::DropVariable { name, if_exists } => variables::drop(session, &name, if_exists),
        Statement::CopyIncremental(c) => Box::pin(copy::execute(session, *c)).await,
        Statement::CopyInto(c) => copy_into::execute(session, *c).await,
        Statement::CopyUsingControl(c) => for_each::copy_using_control(session, *c).await,
        Statement::ForEach(f) => for_each::execute(session, *f).await,
    }
}

/// Run one parsed statement; a query's rows are not collected but streamed.
pub async fn execute_streaming(session: &mut Session, stmt: Statement) -> Result<Reply> {
    crate::catalog::foreign::statement(Box::pin(stream_one(session, stmt))).await
}

async fn stream_one(session: &mut Session, stmt: Statement) -> Result<Reply> {
    session.warehouse().root().begin_statement();
    let mut stmt = stmt;
    if let Statement::Sql(s) = &mut stmt {
        with_before_dml(s)?;
    }
    match stmt {
        Statement::Sql(s) if matches!(*s, Sql::Query(_)) => {
            clauses::queries(&s)?;
            let Sql::Query(q) = *s else {
                unreachable!("matched as a query")
            };
            Ok(Reply::Rows(Box::new(query::stream(session, *q).await?)))
        }
        other => Ok(Reply::Done(execute_one(session, other).await?)),
    }
}

/// `WITH c AS (...) INSERT INTO t SELECT ... FROM c` (a common table expression before the
/// INSERT, as Databricks writes it) as `INSERT INTO t WITH c AS (...) SELECT ...`; before
/// UPDATE, DELETE or MERGE, refused by name (DataFusion's "not implemented").
fn with_before_dml(stmt: &mut Sql) -> Result<()> {
    use datafusion::sql::sqlparser::ast::SetExpr;
    let Sql::Query(q) = stmt else {
        return Ok(());
    };
    let Some(with) = q.with.clone() else {
        return Ok(());
    };
    let what = match q.body.as_ref() {
        SetExpr::Insert(Sql::Insert(insert)) => {
            let mut insert = insert.clone();
            if let Some(source) = insert.source.as_mut() {
                match source.with.as_mut() {
                    // The statement's own names first: the INSERT's query may read them.
                    Some(inner) => {
                        let mut tables = with.cte_tables;
                        tables.append(&mut inner.cte_tables);
                        inner.cte_tables = tables;
                        inner.recursive |= with.recursive;
                    }
                    None => source.with = Some(with),
                }
            }
            *stmt = Sql::Insert(insert);
            return Ok(());
        }
        SetExpr::Update(_) => "UPDATE",
        SetExpr::Delete(_) => "DELETE",
        SetExpr::Merge(_) => "MERGE",
        _ => return Ok(()),
    };
    Err(Error::class(
        "UNSUPPORTED_FEATURE",
        format!(
            "WITH ... {what}: a common table expression before {what} is not supported; write its query as a subquery where the {what} reads it (MERGE INTO t USING (query) s ...)"
        ),
    ))
}

/// Standard SQL statements: queries go to DataFusion, writes to Delta.
async fn execute_sql(session: &mut Session, mut stmt: Sql) -> Result<Output> {
    with_before_dml(&mut stmt)?;
    clauses::queries(&stmt)?;
    match stmt {
        Sql::Query(_) | Sql::Explain { .. } | Sql::ExplainTable { .. } => {
            query::run(session, stmt).await
        }
        // Each in a frame of its own: scripts nest statements, and a statement's frame is as
        // large as its largest arm's.
        Sql::Insert(insert) => Box::pin(dml::insert(session, insert)).await,
        Sql::Update(update) => Box::pin(dml::update(session, update)).await,
        Sql::Delete(delete) => Box::pin(dml::delete(session, delete)).await,
        Sql::Merge(merge) => Box::pin(dml::merge(session, merge)).await,
        Sql::CreateTable(create) => Box::pin(ddl::create_table(session, create)).await,
        Sql::CreateView(create) => ddl::view::create(session, create).await,
        s @ Sql::CreateSchema { .. } => {
            let (name, if_not_exists) = clauses::create_schema(&s)?;
            ddl::create_schema(session, name, if_not_exists, None)
        }
        s @ Sql::Drop { .. } => {
            let d = clauses::drop(&s)?;
            Box::pin(ddl::drop(
                session,
                d.object_type,
                d.if_exists,
                d.names,
                d.cascade,
            ))
            .await
        }
        Sql::Set(ref set) if sets_time_zone(set) => set_time_zone(session, set).await,
        // `SET x = v` on a declared variable (the form SQL scripts use) assigns it.
        Sql::Set(ref set) if let Some(assignment) = declared_assignment(session, set) => {
            assign(session, assignment).await
        }
        Sql::Set(ref set) if let Some(on) = retention_check(set) => {
            set_retention_check(session, on)
        }
        Sql::Set(ref set) if let Some(refused) = unavailable_setting(set) => Err(refused),
        Sql::Set(ref set) if is_ansi_mode(set) => Ok(Output::empty()),
        Sql::Set(_) | Sql::ShowVariable { .. } => query::run(session, stmt).await,
        Sql::StartTransaction { .. } | Sql::Commit { .. } | Sql::Rollback { .. } => {
            Err(Error::Invalid(
                "transactions are not supported: every statement commits on its own, atomically"
                    .into(),
            ))
        }
        other => Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "{} is not supported by tidemark (see \\help for the statements it runs)",
                statement_name(&other)
            ),
        )),
    }
}

/// `SET TIME ZONE 'zone' | LOCAL | INTERVAL ...` (and `SET TIMEZONE = ..`, Spark's
/// `spark.sql.session.timeZone`): the session's zone, DataFusion's `execution.time_zone`.
async fn set_time_zone(
    session: &mut Session,
    set: &datafusion::sql::sqlparser::ast::Set,
) -> Result<Output> {
    use datafusion::sql::sqlparser::ast::{Expr, Set, Value};
    let value = match set {
        // `local` is `SET LOCAL TIME ZONE` (PostgreSQL's scope), not the LOCAL zone.
        Set::SetTimeZone { value, .. } => Some(value),
        Set::SingleAssignment { values, .. } if values.len() == 1 => Some(&values[0]),
        _ => {
            return Err(Error::Invalid(
                "SET TIME ZONE takes one zone: 'America/Los_Angeles', '+05:30', LOCAL or an INTERVAL"
                    .into(),
            ));
        }
    };
    let zone = match value {
        None => crate::engine::zone::local(),
        Some(Expr::Identifier(i)) if i.value.eq_ignore_ascii_case("LOCAL") => {
            crate::engine::zone::local()
        }
        Some(Expr::Value(v)) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
                crate::engine::zone::normalize(s)?
            }
            other => crate::engine::zone::normalize(&other.to_string())?,
        },
        Some(e @ Expr::Interval(_)) => interval_zone(session, e).await?,
        Some(other) => crate::engine::zone::normalize(&other.to_string())?,
    };
    session
        .ctx()
        .sql(&format!("SET datafusion.execution.time_zone = '{zone}'"))
        .await?;
    Ok(Output::empty())
}

/// The offset an `INTERVAL` names (`INTERVAL '-08:00' HOUR TO MINUTE`, `INTERVAL 1 HOUR`),
/// as `+hh:mm`: whole minutes within 18 hours, as Spark takes it.
async fn interval_zone(
    session: &Session,
    interval: &datafusion::sql::sqlparser::ast::Expr,
) -> Result<String> {
    use datafusion::common::ScalarValue;
    use datafusion::sql::sqlparser::ast::{DateTimeField, Expr, Value};
    // `INTERVAL '-08:00' HOUR TO MINUTE`, which the engine does not evaluate: the offset as
    // written.
    if let Expr::Interval(i) = interval
        && matches!(i.leading_field, Some(DateTimeField::Hour))
        && matches!(i.last_field, Some(DateTimeField::Minute))
        && let Expr::Value(v) = i.value.as_ref()
        && let Value::SingleQuotedString(text) = &v.value
    {
        let t = text.trim();
        let (sign, rest) = match t.strip_prefix('-') {
            Some(r) => ('-', r),
            None => ('+', t.strip_prefix('+').unwrap_or(t)),
        };
        if let Some((h, m)) = rest.split_once(':')
            && let (Ok(h), Ok(m)) = (h.parse::<u32>(), m.parse::<u32>())
            && m < 60
            && h * 60 + m <= 18 * 60
        {
            return crate::engine::zone::normalize(&format!("{sign}{h:02}:{m:02}"));
        }
        return Err(Error::class(
            "INVALID_CONF_VALUE",
            format!(
                "SET TIME ZONE {interval}: a zone offset is whole minutes between -18 and +18 hours"
            ),
        ));
    }
    let batches = session
        .ctx()
        .sql(&format!("SELECT {interval}"))
        .await?
        .collect()
        .await?;
    let value = batches
        .first()
        .filter(|b| b.num_rows() == 1)
        .map(|b| ScalarValue::try_from_array(b.column(0), 0))
        .transpose()?;
    let nanos: Option<i128> = match value {
        Some(ScalarValue::IntervalMonthDayNano(Some(v))) if v.months == 0 => {
            Some(v.days as i128 * 86_400_000_000_000 + v.nanoseconds as i128)
        }
        Some(ScalarValue::IntervalDayTime(Some(v))) => {
            Some(v.days as i128 * 86_400_000_000_000 + v.milliseconds as i128 * 1_000_000)
        }
        Some(ScalarValue::DurationMicrosecond(Some(v))) => Some(v as i128 * 1000),
        _ => None,
    };
    let minute = 60_000_000_000_i128;
    match nanos {
        Some(n) if n % minute == 0 && n.abs() <= 18 * 60 * minute => {
            let m = n / minute;
            let sign = if m < 0 { '-' } else { '+' };
            Ok(crate::engine::zone::normalize(&format!(
                "{sign}{:02}:{:02}",
                m.abs() / 60,
                m.abs() % 60
            ))?)
        }
        _ => Err(Error::class(
            "INVALID_CONF_VALUE",
            format!(
                "SET TIME ZONE {interval}: a zone offset is whole minutes between -18 and +18 hours"
            ),
        )),
    }
}

/// `SET x = v` where `x` is a declared variable: its name and value.
fn declared_assignment(
    session: &Session,
    set: &datafusion::sql::sqlparser::ast::Set,
) -> Option<(String, datafusion::sql::sqlparser::ast::Expr)> {
    use datafusion::sql::sqlparser::ast::Set;
    let Set::SingleAssignment {
        scope: None,
        hivevar: false,
        variable,
        values,
    } = set
    else {
        return None;
    };
    let name = setting_key(variable);
    match values.as_slice() {
        [value] if variable.0.len() == 1 && session.vars().contains(&name) => {
            Some((name, value.clone()))
        }
        _ => None,
    }
}

/// [`variables::set`] of one assignment, in a frame of its own (scripts nest statements, and a
/// statement's frame is as large as its largest arm's).
fn assign(
    session: &mut Session,
    (name, value): (String, datafusion::sql::sqlparser::ast::Expr),
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Output>> + Send + '_>> {
    Box::pin(variables::set(session, vec![(name, Some(value))]))
}

/// The key of Delta's guard against a VACUUM that keeps less than the table's retention.
const RETENTION_CHECK: &str = "spark.databricks.delta.retentiondurationcheck.enabled";

/// `SET spark.databricks.delta.retentionDurationCheck.enabled = true|false`: its value.
fn retention_check(set: &datafusion::sql::sqlparser::ast::Set) -> Option<Result<bool>> {
    use datafusion::sql::sqlparser::ast::Set;
    let Set::SingleAssignment {
        variable, values, ..
    } = set
    else {
        return None;
    };
    if setting_key(variable).to_lowercase() != RETENTION_CHECK {
        return None;
    }
    let value = match values.as_slice() {
        [v] => v.to_string().trim_matches('\'').to_lowercase(),
        _ => String::new(),
    };
    Some(match value.as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::Invalid(format!(
            "SET {RETENTION_CHECK} takes true or false, not {}",
            values
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    })
}

/// Turn the VACUUM retention guard on or off for this session.
fn set_retention_check(session: &mut Session, on: Result<bool>) -> Result<Output> {
    let settings = crate::engine::Settings {
        retention_check: on?,
        ..(*session.settings()).clone()
    };
    session.set_settings(Arc::new(settings));
    Ok(Output::empty())
}

/// `SET ANSI_MODE = true` (or `spark.sql.ansi.enabled`): how tidemark always runs.
fn is_ansi_mode(set: &datafusion::sql::sqlparser::ast::Set) -> bool {
    use datafusion::sql::sqlparser::ast::Set;
    matches!(set, Set::SingleAssignment { variable, .. }
        if matches!(setting_key(variable).to_lowercase().as_str(), "ansi_mode" | "spark.sql.ansi.enabled"))
}

/// A setting's key as written, without quotes (`` `datafusion.x` `` is `datafusion.x`).
fn setting_key(name: &datafusion::sql::sqlparser::ast::ObjectName) -> String {
    name.0
        .iter()
        .map(|p| match p.as_ident() {
            Some(i) => i.value.clone(),
            None => p.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// The error for a `SET key = value` tidemark has no such setting for (Spark's and
/// Databricks' other parameters; DataFusion's `datafusion.*` settings and the time zone
/// pass), or for `ANSI_MODE = false`, which tidemark cannot honour.
fn unavailable_setting(set: &datafusion::sql::sqlparser::ast::Set) -> Option<Error> {
    use datafusion::sql::sqlparser::ast::Set;
    let Set::SingleAssignment {
        variable, values, ..
    } = set
    else {
        return None;
    };
    let key = setting_key(variable);
    let lower = key.to_lowercase();
    if lower.starts_with("datafusion.") || sets_time_zone(set) {
        return None;
    }
    if is_ansi_mode(set) {
        let on = matches!(values.as_slice(), [v] if v.to_string().trim_matches('\'').eq_ignore_ascii_case("true"));
        return (!on).then(|| {
            Error::class(
                "CONFIG_NOT_AVAILABLE",
                format!(
                    "{key} = {}: tidemark always runs with ANSI semantics (Databricks SQL's default: an overflow or a cast that fails is an error; try_cast and try_add give NULL)",
                    values.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
                ),
            )
        });
    }
    Some(Error::class(
        "CONFIG_NOT_AVAILABLE",
        format!(
            "Configuration {key} is not available: tidemark takes SET TIME ZONE (or spark.sql.session.timeZone), SET ANSI_MODE = true, session variables (SET VAR x = ...) and DataFusion's settings (SET datafusion.execution.batch_size = 8192)"
        ),
    ))
}

fn sets_time_zone(set: &datafusion::sql::sqlparser::ast::Set) -> bool {
    use datafusion::sql::sqlparser::ast::Set;
    match set {
        Set::SetTimeZone { .. } => true,
        Set::SingleAssignment { variable, .. } => matches!(
            setting_key(variable).to_lowercase().as_str(),
            "timezone" | "time.zone" | "time_zone" | "spark.sql.session.timezone"
        ),
        _ => false,
    }
}

/// A statement's kind as SQL words, from its syntax-tree variant (`CreateView` is
/// `CREATE VIEW`; `ALTER TABLE` adds its first operation): every statement sqlparser parses,
/// including those a later release adds, is refused by its name.
fn statement_name(stmt: &Sql) -> String {
    fn words(debug: &str) -> String {
        let variant: String = debug
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let mut out = String::new();
        for (i, c) in variant.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                out.push(' ');
            }
            out.push(c.to_ascii_uppercase());
        }
        out
    }
    let name = words(&format!("{stmt:?}"));
    match stmt {
        Sql::AlterTable(a) => match a.operations.first() {
            Some(op) => format!("{name} ... {}", words(&format!("{op:?}"))),
            None => name,
        },
        _ => name,
    }
}

/// A one-row result of named counts, like Databricks' DML output.
/// The names of a schema's columns, in order.
pub fn column_names(fields: &datafusion::arrow::datatypes::Fields) -> Vec<String> {
    fields.iter().map(|f| f.name().clone()).collect()
}

/// A table's own spelling of the column `name`: names are case-insensitive, as in Spark, so
/// `customerid` names a column `CustomerID` (an exact match first).
pub fn spelled<'a>(name: &str, columns: impl IntoIterator<Item = &'a String>) -> Option<String> {
    let mut found = None;
    for c in columns {
        if c == name {
            return Some(c.clone());
        }
        if found.is_none() && c.to_lowercase() == name.to_lowercase() {
            found = Some(c.clone());
        }
    }
    found
}

pub fn counts(pairs: &[(&str, i64)]) -> Output {
    let fields: Vec<Field> = pairs
        .iter()
        .map(|(n, _)| Field::new(*n, DataType::Int64, false))
        .collect();
    let cols: Vec<ArrayRef> = pairs
        .iter()
        .map(|(_, v)| Arc::new(Int64Array::from(vec![*v])) as ArrayRef)
        .collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .expect("counts batch matches its schema");
    Output::batch(batch)
}

/// Work a cancelled statement leaves to finish (its history rows), awaited by the shell.
static AFTER_CANCEL: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>> =
    std::sync::Mutex::new(Vec::new());

/// Copies in progress: an aborted task drops its copy only at its next poll, on a worker
/// thread, so the shell waits for this count to fall to zero too.
static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many copies of this process are in progress.
pub(crate) fn live_copies() -> usize {
    LIVE.load(std::sync::atomic::Ordering::SeqCst)
}

/// Counts one copy in progress while it lives.
pub(crate) struct Live;

impl Live {
    pub(crate) fn new() -> Self {
        LIVE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Live
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Hand a task to the shell to wait for after a cancellation.
pub(crate) fn after_cancel(task: tokio::task::JoinHandle<()>) {
    if let Ok(mut tasks) = AFTER_CANCEL.lock() {
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }
}

/// Wait (at most `limit`) until the copies of a cancelled statement are gone and what they
/// left to do (their history rows) is done.
pub async fn finish_cancelled(limit: std::time::Duration) {
    let wait = async {
        loop {
            // Read before taking the tasks: a copy hands over its task before it stops
            // counting as live, so "none live" read first means every task is taken here.
            let live = LIVE.load(std::sync::atomic::Ordering::SeqCst);
            let tasks = match AFTER_CANCEL.lock() {
                Ok(mut tasks) => std::mem::take(&mut *tasks),
                Err(_) => return,
            };
            let idle = tasks.is_empty();
            futures::future::join_all(tasks).await;
            if idle && live == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    let _ = tokio::time::timeout(limit, wait).await;
}

/// A spawned task that is stopped when its owner is dropped (Ctrl-C drops the statement's
/// future; a plain task would run on and commit after the user was told it stopped).
pub(crate) struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = std::result::Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

/// The actions and the operation of a commit that appends `adds` (as delta-rs' own append
/// records it), for the commits tidemark builds itself.
pub(crate) fn append_commit(
    adds: Vec<deltalake::kernel::Add>,
) -> (
    Vec<deltalake::kernel::Action>,
    deltalake::protocol::DeltaOperation,
) {
    let operation = deltalake::protocol::DeltaOperation::Write {
        mode: deltalake::protocol::SaveMode::Append,
        partition_by: None,
        predicate: None,
    };
    let actions = adds
        .into_iter()
        .map(deltalake::kernel::Action::Add)
        .collect();
    (actions, operation)
}
