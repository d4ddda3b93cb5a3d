//! COPY INCREMENTAL: copy the rows of one pinned source snapshot above a watermark into a
//! target, exactly once. Resolve (names, snapshot, start point) -> plan (a DataFusion plan)
//! -> commit (one Delta commit carrying a `txn` action and the mark) -> record (control row,
//! history).

use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::{Column, ScalarValue};
use datafusion::dataframe::DataFrame;
use datafusion::functions_aggregate::expr_fn::{count, max};
use datafusion::logical_expr::{Expr as DfExpr, ExprFunctionExt, col, lit};
use deltalake::DeltaTable;
use deltalake::kernel::Transaction;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::protocol::SaveMode;
use futures::TryStreamExt;
use serde_json::json;

use super::control::{self, ControlRow};
use super::history::{self, RunRecord};
use super::uncommitted::Uncommitted;
use super::{AbortOnDrop, whole_file};
use crate::catalog::{SAMPLES, TableName, read_only, suggest};
use crate::engine::progress::CopyProgress;
use crate::engine::types::{display_exact, storage_type, type_name};
use crate::engine::{Output, Session, name_parts};
use crate::error::{Error, Result};
use crate::parser::CopyIncremental;

/// Key of tidemark's entry in a target commit's metadata.
const META_KEY: &str = "tidemark";
/// How many times a copy that lost a race is re-run from a fresh snapshot.
const RACE_RETRIES: usize = 10;

/// What one run did, for the result row and the history table.
#[derive(Debug, Clone)]
pub struct CopyReport {
    pub record: RunRecord,
}

/// Run the statement: one result row, one history row (a DRY RUN's only where the warehouse
/// can be written).
pub async fn execute(session: &mut Session, c: CopyIncremental) -> Result<Output> {
    let report = run(session, &c).await?;
    Ok(Output::batch(
        history::to_batch(&[report.record])?.project(&RESULT_COLUMNS)?,
    ))
}

/// Columns of the history schema shown as COPY's result.
const RESULT_COLUMNS: [usize; 11] = [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];

/// Run one copy and record it in the history (failures included). Errors are returned after
/// being recorded.
pub async fn run(session: &Session, c: &CopyIncremental) -> Result<CopyReport> {
    run_with_row(session, c, None).await
}

/// [`run`], with the control row already read (the one-statement job reads the control table
/// once, up front, instead of once per copy). Retries after a conflict read it again.
pub async fn run_with_row(
    session: &Session,
    c: &CopyIncremental,
    mut known_row: Option<ControlRow>,
) -> Result<CopyReport> {
    let started = now_us();
    let clock = Instant::now();
    if !c.dry_run {
        history::prefetch(session);
    }
    let mut record = RunRecord {
        run_id: uuid::Uuid::new_v4().to_string(),
        started_at_us: started,
        source: c.source.to_string(),
        target: c.target.to_string(),
        ..Default::default()
    };
    // A run dropped before it ends (Ctrl-C, SIGTERM) is still recorded, as `cancelled`.
    let mut cancelled = RecordIfCancelled {
        session: (!c.dry_run).then(|| session.clone()),
        record: record.clone(),
        _live: super::Live::new(),
    };
    let mut tries = 0;
    let result = loop {
        // Per attempt: an attempt that lost the race for its commit did not commit.
        record
            .commit_started
            .store(false, std::sync::atomic::Ordering::SeqCst);
        match copy_once(session, c, known_row.take(), &mut record).await {
            Err(e) if e.is_conflict() && tries < RACE_RETRIES => {
                tries += 1;
                let jitter = (uuid::Uuid::new_v4().as_u128() % 50) as u64;
                tokio::time::sleep(std::time::Duration::from_millis(20 * tries as u64 + jitter))
                    .await;
            }
            other => break other,
        }
    };
    cancelled.session = None;
    record.finished_at_us = record.started_at_us + clock.elapsed().as_micros() as i64;
    match result {
        Ok(()) => {
            if c.dry_run {
                // Recorded too, when the warehouse can be written (a dry run also serves a
                // read-only one).
                if session.warehouse.root().is_dir()
                    && session.warehouse.check_writable(None).is_ok()
                {
                    let _ = history::append(session, std::slice::from_ref(&record)).await;
                }
            } else {
                history::append(session, std::slice::from_ref(&record)).await?;
            }
            Ok(CopyReport { record })
        }
        Err(e) => {
            let e = e.context(format!("COPY INCREMENTAL {} INTO {}", c.source, c.target));
            if !c.dry_run {
                record.status = "failed".into();
                record.error = Some(e.to_string());
                // The run's own error matters more than a failure to record it.
                let _ = history::append(session, std::slice::from_ref(&record)).await;
            }
            Err(e)
        }
    }
}

/// Records a run as `cancelled` in the history when dropped while still armed: the append
/// runs as a task of its own, which the shell waits for before it exits.
struct RecordIfCancelled {
    session: Option<Session>,
    record: RunRecord,
    /// Counts this run among those a cancelled shell waits for.
    _live: super::Live,
}

impl Drop for RecordIfCancelled {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut record = std::mem::take(&mut self.record);
        record.status = "cancelled".into();
        record.error = Some(
            if record
                .commit_started
                .load(std::sync::atomic::Ordering::SeqCst)
            {
                "cancelled (Ctrl-C or SIGTERM) during or after its target commit: the rows may be in the target; the next run repairs the control row and copies nothing twice"
            } else {
                "cancelled (Ctrl-C or SIGTERM) before its commit: nothing was committed, and the files it had written were removed"
            }
            .into(),
        );
        record.finished_at_us = now_us();
        super::after_cancel(runtime.spawn(async move {
            let _ = history::append(&session, std::slice::from_ref(&record)).await;
        }));
    }
}

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// A source pinned at one snapshot.
struct Source {
    /// The Delta table, pinned at `version` (None for the built-in samples).
    table: Option<DeltaTable>,
    provider: Arc<dyn TableProvider>,
    version: Option<i64>,
    schema: SchemaRef,
}

async fn open_source(session: &Session, name: &TableName) -> Result<Source> {
    if name.catalog == SAMPLES {
        let schema = session
            .ctx
            .catalog(SAMPLES)
            .and_then(|c| c.schema(&name.schema))
            .ok_or_else(|| session.warehouse.missing_table_error(name))?;
        let provider = schema
            .table(&name.table)
            .await?
            .ok_or_else(|| session.warehouse.missing_table_error(name))?;
        let schema = provider.schema();
        return Ok(Source {
            table: None,
            provider,
            version: None,
            schema,
        });
    }
    if !session.warehouse.table_exists(name) {
        let path = session.warehouse.table_path(name)?;
        if path.exists() {
            return Err(Error::Invalid(format!(
                "{name} is not a Delta table (no _delta_log at {})",
                path.display()
            )));
        }
        return Err(session.warehouse.missing_table_error(name));
    }
    let t = session.warehouse.open(name).await?;
    let provider = crate::catalog::copy_source_provider(&t).await?;
    let schema = provider.schema();
    let version = t.version().map(|v| v as i64);
    Ok(Source {
        table: Some(t),
        provider,
        version,
        schema,
    })
}

/// The application id of the `txn` action for a source/target pair.
pub fn app_id(source: &TableName, target: &TableName) -> String {
    format!("tidemark-copy:{source}->{target}")
}

/// A mark as exact JSON: integers for timestamps (µs) and dates (days), never formatted text.
fn mark_json(v: &ScalarValue) -> serde_json::Value {
    match v {
        ScalarValue::TimestampMicrosecond(Some(x), _) => json!({"us": x}),
        ScalarValue::TimestampNanosecond(Some(x), _) => json!({"ns": x}),
        ScalarValue::TimestampMillisecond(Some(x), _) => json!({"us": x * 1000}),
        ScalarValue::TimestampSecond(Some(x), _) => json!({"us": x * 1_000_000}),
        ScalarValue::Date32(Some(d)) => json!({"days": d}),
        ScalarValue::Int8(Some(i)) => json!({"int": i}),
        ScalarValue::Int16(Some(i)) => json!({"int": i}),
        ScalarValue::Int32(Some(i)) => json!({"int": i}),
        ScalarValue::Int64(Some(i)) => json!({"int": i}),
        // Exact: the digits as text (a JSON number would go through a double).
        ScalarValue::Decimal128(Some(_), _, _) => json!({"dec": display_exact(v)}),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => json!({"str": s}),
        _ => serde_json::Value::Null,
    }
}

/// Read a mark written by [`mark_json`] back as a value of type `dt`.
fn mark_from_json(v: &serde_json::Value, dt: &DataType) -> Option<ScalarValue> {
    // Timestamps keep their instant number; the zone (or none, for NTZ) is the watermark's.
    let tz = match dt {
        DataType::Timestamp(_, tz) => tz.clone(),
        _ => Some("UTC".into()),
    };
    let raw = if let Some(us) = v.get("us").and_then(|x| x.as_i64()) {
        ScalarValue::TimestampMicrosecond(Some(us), tz)
    } else if let Some(ns) = v.get("ns").and_then(|x| x.as_i64()) {
        ScalarValue::TimestampNanosecond(Some(ns), tz)
    } else if let Some(d) = v.get("days").and_then(|x| x.as_i64()) {
        ScalarValue::Date32(Some(d as i32))
    } else if let Some(i) = v.get("int").and_then(|x| x.as_i64()) {
        ScalarValue::Int64(Some(i))
    } else if let Some(s) = v
        .get("str")
        .or_else(|| v.get("dec"))
        .and_then(|x| x.as_str())
    {
        ScalarValue::Utf8(Some(s.to_string()))
    } else {
        return None;
    };
    raw.cast_to(dt).ok()
}

/// The last mark this pair committed to the target, from its commit metadata.
#[derive(Debug, Clone)]
struct Recorded {
    /// The control row's `last_watermark` the run saw (None without a control row).
    control: Option<ScalarValue>,
    /// The start point the run copied from.
    previous: Option<ScalarValue>,
    mark: Option<ScalarValue>,
    /// The source version the run read.
    source_version: Option<i64>,
    /// The source's Delta table id (a table dropped and created again starts its versions
    /// over).
    source_id: Option<String>,
    /// The source files that could hold rows at `mark`, when the run recorded them.
    mark_files: Option<Vec<String>>,
}

async fn recorded_mark(
    t: &DeltaTable,
    app: &str,
    wm_type: &DataType,
) -> Result<(i64, Option<Recorded>)> {
    let state = t.snapshot()?;
    let run = state
        .transaction_version(t.log_store().as_ref(), app)
        .await?
        .unwrap_or(0);
    if run == 0 {
        return Ok((0, None));
    }
    // The run's commit is almost always among the newest: look at a few, then more.
    let latest = t.version().unwrap_or(0) as usize + 1;
    let mut seen = 0;
    for limit in [8usize, 128, 2048] {
        let infos: Vec<deltalake::kernel::CommitInfo> =
            t.history(Some(limit)).try_collect().await?;
        for info in infos.iter().skip(seen) {
            let Some(meta) = info.info.get(META_KEY) else {
                continue;
            };
            if meta.get("app_id").and_then(|v| v.as_str()) != Some(app)
                || meta.get("run").and_then(|v| v.as_i64()) != Some(run)
            {
                continue;
            }
            let mark_of = |key: &str| meta.get(key).and_then(|v| mark_from_json(v, wm_type));
            let recorded = Recorded {
                control: mark_of("control_mark"),
                previous: mark_of("previous_mark"),
                mark: mark_of("new_mark"),
                source_version: meta.get("source_version").and_then(|v| v.as_i64()),
                source_id: meta
                    .get("source_id")
                    .and_then(|v| v.as_str())
                    .map(String::from),
                mark_files: meta.get("mark_files").and_then(|v| {
                    v.as_array()?
                        .iter()
                        .map(|p| p.as_str().map(String::from))
                        .collect()
                }),
            };
            return Ok((run, Some(recorded)));
        }
        seen = infos.len();
        if limit >= latest {
            break;
        }
    }
    Ok((run, None))
}

/// Find a column by case-insensitive name.
fn find_column(schema: &SchemaRef, name: &str, table: &TableName) -> Result<(String, DataType)> {
    schema
        .fields()
        .iter()
        .find(|f| f.name().eq_ignore_ascii_case(name))
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .ok_or_else(|| {
            let names = super::column_names(schema.fields());
            // suggest() lists the columns when none is close; otherwise list them here.
            let hint = match suggest(name, &names) {
                h if h.is_empty() || h.starts_with(", did") => {
                    format!("{h} (columns: {})", names.join(", "))
                }
                h => h,
            };
            Error::NotFound(format!(
                "watermark column '{name}' not found in {table}{hint}"
            ))
        })
}

fn supported_watermark(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Timestamp(_, _)
            | DataType::Date32
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Decimal128(_, _)
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
    )
}

fn wm_col(name: &str) -> DfExpr {
    col(Column::from_name(name))
}

/// Rows of `left` not in `right`, as multisets (each right row cancels one equal left row).
fn multiset_minus(left: DataFrame, right: DataFrame, columns: &[String]) -> Result<DataFrame> {
    use datafusion::functions_window::expr_fn::row_number;
    let keys: Vec<DfExpr> = columns.iter().map(|c| col(Column::from_name(c))).collect();
    let number = |df: DataFrame, tag: &str| -> Result<DataFrame> {
        let rn = row_number()
            .partition_by(keys.clone())
            .build()?
            .alias(format!("__rn_{tag}"));
        let mut cols: Vec<DfExpr> = keys.clone();
        cols.push(rn);
        let df = df.select(cols)?;
        if tag == "r" {
            let renamed: Vec<DfExpr> = columns
                .iter()
                .map(|c| col(Column::from_name(c)).alias(format!("__r_{c}")))
                .chain(std::iter::once(col("__rn_r")))
                .collect();
            return Ok(df.select(renamed)?);
        }
        Ok(df)
    };
    let l = number(left, "l")?;
    let r = number(right, "r")?;
    let mut on: Vec<DfExpr> = columns
        .iter()
        .map(|c| {
            datafusion::logical_expr::binary_expr(
                col(Column::from_name(c)),
                datafusion::logical_expr::Operator::IsNotDistinctFrom,
                col(Column::from_name(format!("__r_{c}"))),
            )
        })
        .collect();
    on.push(col("__rn_l").eq(col("__rn_r")));
    let joined = l.join_on(r, datafusion::logical_expr::JoinType::LeftAnti, on)?;
    Ok(joined.select(keys)?)
}

/// Cast columns to the types Delta stores (view strings to strings).
fn storable(df: DataFrame) -> Result<DataFrame> {
    let needs = df
        .schema()
        .fields()
        .iter()
        .any(|f| &storage_type(f.data_type()) != f.data_type());
    if needs {
        super::ddl::normalize_for_storage(df)
    } else {
        Ok(df)
    }
}

/// One attempt at the copy. Conflicts bubble up and the caller retries from a fresh snapshot.
async fn copy_once(
    session: &Session,
    c: &CopyIncremental,
    known_row: Option<ControlRow>,
    record: &mut RunRecord,
) -> Result<()> {
    let source_name = session.table_name(&c.source)?;
    let target_name = session.table_name(&c.target)?;
    record.source = source_name.to_string();
    record.target = target_name.to_string();
    if source_name == target_name {
        return Err(Error::Invalid(format!(
            "source and target are the same table ({source_name})"
        )));
    }
    if target_name.catalog == SAMPLES {
        return Err(read_only(&target_name));
    }
    if target_name.catalog == crate::catalog::SYSTEM {
        return Err(Error::Invalid(format!(
            "cannot copy into {target_name}: catalog '{}' is reserved for tidemark's own tables (copy into your own catalog, e.g. main.default.{})",
            crate::catalog::SYSTEM,
            crate::catalog::quote_ident(&target_name.table)
        )));
    }
    if !session
        .warehouse
        .schema_exists(&target_name.catalog, &target_name.schema)
    {
        return Err(session.warehouse.missing_table_error(&target_name));
    }

    // Nothing new since the last run: known from the source's version and the target's newest
    // commit, without replaying either log.
    let mut known_row = known_row;
    if c.since.is_none()
        && c.lookback.is_none()
        && c.merge_on.is_empty()
        && !c.dry_run
        && source_name.catalog != SAMPLES
    {
        if let Some(ctl) = &c.control
            && known_row.is_none()
        {
            let ctl = session.table_name(ctl)?;
            known_row = Some(control::find(session, &ctl, &source_name, &target_name).await?);
        }
        if nothing_new(
            session,
            c,
            &source_name,
            &target_name,
            known_row.as_ref(),
            record,
        )
        .await
        .unwrap_or(false)
        {
            return Ok(());
        }
    }

    // Resolve: source snapshot, control row, watermark column, target state. The target's
    // log is replayed on another worker while this one reads the source's and the control's.
    let target_task = {
        let warehouse = session.warehouse.clone();
        let name = target_name.clone();
        tokio::spawn(async move {
            if warehouse.table_exists(&name) {
                warehouse.open(&name).await.map(Some)
            } else {
                Ok(None)
            }
        })
    };
    let source = open_source(session, &source_name).await?;
    record.source_version = source.version;
    let control_row: Option<ControlRow> = match &c.control {
        Some(_) if known_row.is_some() => known_row,
        Some(ctl) => {
            let ctl = session.table_name(ctl)?;
            Some(control::find(session, &ctl, &source_name, &target_name).await?)
        }
        None => None,
    };
    let Some(wm_requested) = requested_watermark(c, control_row.as_ref())? else {
        return Err(Error::Invalid(
            "no watermark column: add WATERMARK <column>, or a control table whose row has watermark_column".into(),
        ));
    };
    let (wm, wm_type) = find_column(&source.schema, &wm_requested, &source_name)?;
    // A partition column reads dictionary-encoded: its mark is a plain value of its type.
    let wm_type = match wm_type {
        DataType::Dictionary(_, values) => *values,
        other => other,
    };
    record.watermark_column = Some(wm.clone());
    if !supported_watermark(&wm_type) {
        return Err(Error::Type(format!(
            "watermark column '{wm}' of {source_name} is {}; a watermark must be a TIMESTAMP, DATE, integer, DECIMAL or STRING column",
            type_name(&wm_type)
        )));
    }
    if let Some(row) = &control_row
        && !control::can_hold(&wm_type, &row.mark_type)
    {
        return Err(Error::Type(format!(
            "control table {}: last_watermark is {} but watermark '{wm}' of {source_name} is {}; a {} column cannot hold it exactly (use a {} column)",
            row.table,
            type_name(&row.mark_type),
            type_name(&wm_type),
            type_name(&row.mark_type),
            type_name(&storage_type(&wm_type))
        )));
    }
    let merge_keys: Vec<String> = c
        .merge_on
        .iter()
        .map(|k| {
            let k = name_parts(k)?.last().cloned().unwrap_or_default();
            find_column(&source.schema, &k, &source_name)
                .map(|(n, _)| n)
                .map_err(|_| {
                    Error::NotFound(format!(
                        "MERGE ON key '{k}' is not a column of {source_name}"
                    ))
                })
        })
        .collect::<Result<_>>()?;

    let target = target_task
        .await
        .map_err(|e| Error::Other(format!("opening {target_name}: {e}")))??;
    let mut new_columns = false;
    if let Some(t) = &target {
        let tschema = super::ddl::arrow_schema(t)?;
        for f in source.schema.fields() {
            match tschema
                .fields()
                .iter()
                .find(|g| g.name().eq_ignore_ascii_case(f.name()))
            {
                Some(g) if g.data_type() != &storage_type(f.data_type()) => {
                    return Err(Error::Type(format!(
                        "column '{}' is {} in source {source_name} but {} in target {target_name}: change the target's type or copy into a new target",
                        f.name(),
                        type_name(f.data_type()),
                        type_name(g.data_type())
                    )));
                }
                Some(_) => {}
                None => new_columns = true,
            }
        }
    }
    let app = app_id(&source_name, &target_name);
    let (last_run, recorded) = match &target {
        Some(t) => recorded_mark(t, &app, &wm_type).await?,
        None => (0, None),
    };

    // Start point: SINCE, else the control row (repaired if a run died after its target
    // commit), else the target's own recorded mark, else a full load.
    let mut control_mark: Option<ScalarValue> = None;
    let (start, from_state): (Option<ScalarValue>, bool) = if let Some(since) = &c.since {
        let v = session.eval_scalar(since).await?;
        (Some(control::convert_since(&v, &wm_type)?), false)
    } else if let Some(row) = &control_row {
        let m = control::convert(
            &row.mark,
            &wm_type,
            &format!("last_watermark of {}", row.table),
        )?;
        control_mark = Some(m.clone());
        match &recorded {
            // The control row still holds what the last committed run saw or started from:
            // that run died (or lost a race) before advancing it. Repair from the target.
            // Any other value was set on purpose (a backfill) and is honoured.
            Some(r)
                if (r.control.as_ref() == Some(&m) || r.previous.as_ref() == Some(&m))
                    && r.mark.as_ref().is_some_and(|x| x > &m) =>
            {
                (r.mark.clone(), true)
            }
            Some(r) if m.is_null() && r.control.is_none() && r.mark.is_some() => {
                (r.mark.clone(), true)
            }
            _ => (
                if m.is_null() { None } else { Some(m) },
                !control_row.as_ref().is_some_and(|r| r.mark.is_null()),
            ),
        }
    } else if let Some(r) = &recorded {
        (r.mark.clone(), r.mark.is_some())
    } else {
        (None, false)
    };
    record.previous_mark = start.as_ref().map(display_exact);
    // The source is at the very version the last run copied from, and this run starts where
    // that one ended: nothing above the mark or at it can be missing. No query needed.
    let source_id = source.table.as_ref().and_then(table_id);
    let unchanged = c.since.is_none()
        && c.lookback.is_none()
        && source.version.is_some()
        && source_id.is_some()
        && recorded.as_ref().is_some_and(|r| {
            r.source_version == source.version && r.source_id == source_id && r.mark == start
        });

    // Plan: rows above the start point from the pinned snapshot, plus rows in the window at
    // (or LOOKBACK below) the mark that the target lacks.
    let scan = session.ctx.read_table(source.provider.clone())?;
    let w = wm_col(&wm);
    let above_pred = match &start {
        Some(s) => w.clone().gt(DfExpr::Literal(s.clone(), None)),
        None => w.clone().is_not_null(),
    };
    let lower = match (&start, &c.lookback, from_state) {
        (Some(s), Some(l), _) => {
            let v = session.eval_scalar(l).await?;
            let lowered = super::variables::eval_logical(
                session,
                DfExpr::Literal(s.clone(), None) - DfExpr::Literal(v.clone(), None),
            )
            .await
            .map_err(|e| {
                e.context(format!(
                    "LOOKBACK {l} does not apply to a {} watermark",
                    type_name(&wm_type)
                ))
            })?;
            Some(control::convert(&lowered, &wm_type, "LOOKBACK")?)
        }
        (Some(s), None, true) => Some(s.clone()),
        _ => None,
    };
    // The source's files and their statistics, read once for every decision below.
    let files = match &source.table {
        Some(t) => Some(whole_file::source_files(t, &wm, &wm_type)?),
        None => None,
    };
    let source_root = session.warehouse.table_path(&source_name)?;
    let null_rows = match files.as_deref().and_then(whole_file::null_count) {
        Some(n) => n,
        None => scan.clone().filter(w.clone().is_null())?.count().await? as i64,
    };
    record.null_watermark_rows = null_rows;

    let source_columns = super::column_names(source.schema.fields());
    let mut window_batches: Vec<RecordBatch> = vec![];
    // A full load of a source without NULL watermarks copies every row: no filter to evaluate.
    let mut copy_df = if start.is_none() && null_rows == 0 {
        scan.clone()
    } else {
        scan.clone().filter(above_pred.clone())?
    };
    // Ties: rows at the mark can only be missing from the target if a file that may hold the
    // mark is new since the run that recorded it (files never change; deletion vectors are
    // excluded). Otherwise the window query is skipped.
    let ties_unchanged = merge_keys.is_empty()
        && c.since.is_none()
        && c.lookback.is_none()
        && lower == start
        && match (&files, &start, &recorded) {
            (Some(files), Some(s), Some(r)) if r.mark.as_ref() == Some(s) => {
                match (&r.mark_files, whole_file::files_holding(files, s)) {
                    (Some(before), Some(now)) => now.iter().all(|p| before.contains(p)),
                    _ => false,
                }
            }
            _ => false,
        };
    let mut new_target_window_rows = 0i64;
    if let (Some(lo), Some(s), false) = (&lower, &start, unchanged || ties_unchanged) {
        let in_window = w
            .clone()
            .gt_eq(DfExpr::Literal(lo.clone(), None))
            .and(w.clone().lt_eq(DfExpr::Literal(s.clone(), None)));
        if !merge_keys.is_empty() {
            // An upsert is idempotent: re-apply the window, so each key ends at its latest
            // row. The window rows the target lacks (counted below) say whether the window
            // holds anything new: a run with none commits nothing.
            copy_df = scan
                .clone()
                .filter(w.clone().gt_eq(DfExpr::Literal(lo.clone(), None)))?;
        }
        if target.is_none() && !merge_keys.is_empty() {
            // A new target lacks every window row the upsert applies: all are new.
            new_target_window_rows = scan.clone().filter(in_window.clone())?.count().await? as i64;
        }
        if let Some(t) = &target {
            let tprov = crate::catalog::provider_for(t).await?;
            let tdf = session.ctx.read_table(tprov)?.filter(in_window.clone())?;
            let tcols = super::column_names(tdf.schema().fields());
            let proj: Vec<DfExpr> = source_columns
                .iter()
                .map(|c| match tcols.iter().find(|t| t.eq_ignore_ascii_case(c)) {
                    Some(t) => col(Column::from_name(t)).alias(c),
                    None => lit(ScalarValue::Null).alias(c),
                })
                .collect();
            // The target stores an empty string in a STRING partition column as NULL: compare
            // the source's window as the target holds it.
            let sdf = crate::engine::types::empty_strings_as_null_df(
                storable(scan.clone().filter(in_window)?)?,
                &crate::catalog::string_partition_columns(t)?,
            )?;
            let tdf = tdf.select(proj)?;
            let tdf = tdf.select(
                sdf.schema()
                    .fields()
                    .iter()
                    .map(|f| {
                        datafusion::prelude::cast(
                            col(Column::from_name(f.name())),
                            f.data_type().clone(),
                        )
                        .alias(f.name())
                    })
                    .collect::<Vec<_>>(),
            )?;
            window_batches = multiset_minus(sdf, tdf, &source_columns)?.collect().await?;
        }
    }
    let window_rows: i64 = window_batches
        .iter()
        .map(|b| b.num_rows() as i64)
        .sum::<i64>()
        + new_target_window_rows;

    // Whole files: a Delta source appended into a target of the same schema.
    // Which files hold rows to copy, from their statistics (when those can be trusted for the
    // watermark): it counts the rows and finds the new mark without reading the column.
    let stats_plan = match (&source.table, &files) {
        _ if unchanged => None,
        (Some(st), Some(files))
            if merge_keys.is_empty()
                && whole_file::supports(&wm_type)
                && st.snapshot()?.metadata().partition_columns().is_empty()
                && whole_file::unmapped(st) =>
        {
            Some(whole_file::plan(
                files,
                &source_root,
                &wm,
                &wm_type,
                start.as_ref(),
            ))
        }
        _ => None,
    };
    // Whole files are committed as they are when the target reads them as they are.
    let file_plan = match (&stats_plan, &source.table) {
        (Some(_), Some(st))
            if session.settings.whole_files
                && !new_columns
                && match &target {
                    // Files committed whole are never checked: only into targets with nothing
                    // to check or compute (CHECK constraints, invariants, defaults).
                    // A partitioned target takes files of one partition value each, placed
                    // by it; the source's files mix them.
                    Some(t) => {
                        reads_files_as_they_are(
                            &super::ddl::arrow_schema(t)?,
                            &source_arrow_schema(st)?,
                        ) && plain_appends(t)?
                            && t.snapshot()?.metadata().partition_columns().is_empty()
                    }
                    None => true,
                } =>
        {
            stats_plan.as_ref()
        }
        _ => None,
    };
    // (new mark, rows) from the statistics; None when the rows themselves must say.
    let counted = match (&stats_plan, &source.table) {
        _ if unchanged => Some((None, 0)),
        (Some(fp), Some(st)) => {
            let decoded = if fp.decode.is_empty() {
                0
            } else {
                let paths: Vec<String> = fp.decode.iter().map(|f| f.add.path.clone()).collect();
                files_df(session, st, paths)
                    .await?
                    .filter(above_pred.clone())?
                    .count()
                    .await? as i64
            };
            let candidates = fp.max_candidates();
            let best = match whole_file::footer_max(&source_root, &candidates, &wm, &wm_type) {
                // The largest watermark overall is the largest above the start, if above it.
                Some(m) => m.filter(|m| start.as_ref().is_none_or(|s| m > s)),
                None => {
                    let paths = candidates.iter().map(|f| f.add.path.clone()).collect();
                    let candidates = files_df(session, st, paths).await?;
                    max_and_count(candidates.filter(above_pred.clone())?, &w)
                        .await?
                        .0
                }
            };
            match (best, fp.whole_rows() + decoded) {
                // Statistics that count no row where a footer holds one above the start
                // disagree with the data: the rows themselves decide.
                (Some(_), 0) => None,
                counted => Some(counted),
            }
        }
        _ => None,
    };
    let (new_max, above_rows) = match counted {
        Some(counted) => counted,
        None => max_and_count(scan.clone().filter(above_pred.clone())?, &w).await?,
    };
    let new_mark = match (&new_max, &start) {
        (Some(m), _) => Some(m.clone()),
        (None, s) => s.clone(),
    };
    record.new_mark = new_mark.as_ref().map(display_exact);
    fail::fail_point!("copy::after_read", |_| std::process::abort());

    // New rows: those above the start, plus the window's rows the target lacks. An upsert
    // re-applies its whole window, but rows already in the target are not new.
    let rows_to_copy = above_rows + window_rows;
    record.rows_copied = rows_to_copy;
    if c.dry_run {
        record.status = "dry_run".into();
        record.target_version = target.as_ref().and_then(|t| t.version()).map(|v| v as i64);
        return Ok(());
    }

    // Commit: one Delta commit with the rows, the txn action and the mark.
    let mut target_version = target.as_ref().and_then(|t| t.version());
    if rows_to_copy > 0 || target.is_none() {
        if target.is_some() {
            session.warehouse.check_table_writable(&target_name)?;
        }
        let run = last_run + 1;
        let mark_files = match (&files, &new_mark) {
            (Some(files), Some(m)) if merge_keys.is_empty() => {
                whole_file::files_holding(files, m).filter(|f| f.len() <= 64)
            }
            _ => None,
        };
        let meta = json!({
            "app_id": app,
            "run": run,
            "run_id": record.run_id,
            "source": source_name.to_string(),
            "source_version": source.version,
            "source_id": source_id,
            "watermark_column": wm,
            "previous_mark": start.as_ref().map(mark_json),
            // What the control row held when this run started: a later run that finds the
            // control row still there knows this commit's mark was never recorded in it.
            "control_mark": control_mark.as_ref().map(mark_json),
            "new_mark": new_mark.as_ref().map(mark_json),
            // The source files that may hold rows at the new mark: the next run need not look
            // for ties at the mark unless another file may hold some.
            "mark_files": mark_files,
            "rows": rows_to_copy,
            // Source rows with a NULL watermark at source_version (a run that finds the source
            // there again reports them without reading it).
            "null_rows": null_rows,
            // What was read: source files linked whole, and files decoded and filtered.
            "whole_files": file_plan.as_ref().map(|p| p.whole.len()),
            "decoded_files": file_plan.as_ref().map(|p| p.decode.len()),
        });
        let props = super::upkeep::commit_properties()
            .with_application_transaction(Transaction::new(&app, run))
            .with_metadata(vec![(META_KEY.to_string(), meta)]);
        // Exactly once: nobody may have committed this pair's run since we read the state.
        if let Some(t) = &target {
            let mut fresh = t.clone();
            fresh.update_state().await?;
            let now = fresh
                .snapshot()?
                .transaction_version(fresh.log_store().as_ref(), &app)
                .await?
                .unwrap_or(0);
            if now != last_run {
                return Err(Error::Conflict(format!(
                    "another run of this copy committed run {now} first"
                )));
            }
        }
        let state = Arc::new(session.ctx.state());
        let progress = CopyProgress::start(
            session.settings.progress,
            &format!("{source_name} -> {target_name}"),
            rows_to_copy as u64,
        );
        // A new target is created (empty) in a commit of its own first, so the data commit
        // always meets an existing table and its txn check: two first runs cannot both land.
        let target = match target.clone() {
            Some(t) => t,
            None => {
                let fields = match (&file_plan, &source.table) {
                    // Whole files are read as they are: the source's exact schema.
                    (Some(_), Some(st)) => st.snapshot()?.schema().fields().cloned().collect(),
                    _ => storable(copy_df.clone())?
                        .schema()
                        .fields()
                        .iter()
                        .map(|f| crate::engine::types::arrow_to_delta(f))
                        .collect::<Result<Vec<_>>>()?,
                };
                create_target(session, &target_name, fields).await?
            }
        };
        // Files this copy writes go away if it stops (Ctrl-C, an error) before its commit.
        let uncommitted = Uncommitted::new(
            session.warehouse.table_path(&target_name)?,
            record.commit_started.clone(),
        );
        let target = uncommitted.table(&target);
        // Empty strings in the target's STRING partition columns are stored as NULL (see
        // `catalog::string_partition_columns`).
        let string_partitions = crate::catalog::string_partition_columns(&target)?;
        let empty_as_null =
            |df: DataFrame| crate::engine::types::empty_strings_as_null_df(df, &string_partitions);
        let window_batches = window_batches
            .iter()
            .map(|b| crate::engine::types::empty_strings_as_null_in(b, &string_partitions))
            .collect::<Result<Vec<_>>>()?;
        // How decoded rows are read and encoded (samples a source file: only when decoding).
        let decode_settings = || {
            source.table.as_ref().map(|st| {
                whole_file::decode_settings(
                    st,
                    &target,
                    &source_root,
                    session.settings.delta_encoding,
                )
            })
        };
        let committed = if let (Some(fp), Some(st)) = (&file_plan, &source.table) {
            fast_commit(
                session,
                st,
                &source_root,
                &target_name,
                target.clone(),
                fp,
                above_pred.clone(),
                &window_batches,
                props,
                &progress,
                &uncommitted,
            )
            .await?
        } else if merge_keys.is_empty() && !new_columns && plain_appends(&target)? {
            let settings = decode_settings();
            let rows = Some(empty_as_null(storable(copy_df.clone())?)?);
            let adds =
                write_partitioned(&target, rows, &window_batches, settings, &progress).await?;
            commit_adds(&target, adds, props).await?
        } else if merge_keys.is_empty() {
            let mut input = storable(copy_df.clone())?;
            if !window_batches.is_empty() {
                let extra = session.ctx.read_batches(window_batches.clone())?;
                input = input.union(extra)?;
            }
            input = empty_as_null(with_target_columns(session, input, &target).await?)?;
            // delta-rs runs this write (constraints, new columns): count its rows as they pass.
            input = crate::engine::functions::counted(input, progress.counter())?;
            let settings = decode_settings();
            let state = match &settings {
                Some(s) => Arc::new(
                    datafusion::execution::SessionStateBuilder::new_from_existing((*state).clone())
                        .with_config(state.config().clone().with_batch_size(s.batch_rows))
                        .build(),
                ),
                None => state,
            };
            let mut write = target
                .clone()
                .write(vec![])
                .with_input_plan(input.into_unoptimized_plan())
                .with_session_state(state)
                .with_save_mode(SaveMode::Append)
                .with_table_name(target_name.table.clone())
                .with_commit_properties(props);
            if new_columns {
                write = write.with_schema_mode(deltalake::operations::write::SchemaMode::Merge);
            }
            if let Some(s) = settings {
                write = write.with_writer_properties(s.writer);
            }
            write.await?
        } else {
            let t = target.clone();
            let rewritable = super::rewrite::applies(&t)?;
            crate::catalog::refuse_logged_empty_partitions(
                &t,
                &target_name.to_string(),
                "MERGE",
                rewritable,
            )?;
            let input =
                latest_per_key(empty_as_null(storable(copy_df.clone())?)?, &merge_keys, &wm)?;
            if new_columns {
                return Err(Error::Invalid(format!(
                    "source {source_name} has columns the target {target_name} lacks; MERGE ON copies need them added first (ALTER TABLE ... ADD COLUMNS)"
                )));
            }
            // Matched rows take the source's columns; inserted rows also the target's own,
            // as their DEFAULT or NULL.
            let cols = super::column_names(input.schema().fields());
            let input = with_target_columns(session, input, &t).await?;
            let cols2 = super::column_names(input.schema().fields());
            let mut on: Option<DfExpr> = None;
            for k in &merge_keys {
                let e = col(Column::new(Some("target"), k)).eq(col(Column::new(Some("source"), k)));
                on = Some(match on {
                    Some(o) => o.and(e),
                    None => e,
                });
            }
            // Tests hold a MERGE ON copy here while another writer commits.
            fail::fail_point!("copy::before_merge");
            let (t, _) = t
                .merge(input, on.expect("at least one key"))
                .with_source_alias("source")
                .with_target_alias("target")
                .with_session_state(state)
                // As UPDATE and DELETE: never over another commit; a conflict reruns the
                // whole copy on the new state (`concurrency::a_merge_copy_never_*`).
                .with_commit_properties(props.with_max_retries(0))
                .when_matched_update(|mut u| {
                    for c in &cols {
                        u = u.update(c.as_str(), col(Column::new(Some("source"), c)));
                    }
                    u
                })?
                .when_not_matched_insert(|mut i| {
                    for c in &cols2 {
                        i = i.set(c.as_str(), col(Column::new(Some("source"), c)));
                    }
                    i
                })?
                .await?;
            t
        };
        progress.inc((rows_to_copy as u64).saturating_sub(progress.position()));
        drop(progress);
        target_version = committed.version();
        super::upkeep::after_commit(&committed).await;
        fail::fail_point!("copy::after_target_commit", |_| std::process::abort());
    }
    record.target_version = target_version.map(|v| v as i64);

    // Record: advance the control row as a typed value (compare-and-set on what we read).
    if let (Some(row), Some(mark)) = (&control_row, &new_mark) {
        let new_ctl = control::convert(mark, &row.mark_type, "new mark")?;
        if new_ctl != row.mark {
            // Compare-and-set: the row may still hold what this run saw, or the start point a
            // concurrent run of this copy committed and recorded meanwhile.
            let mut expected = vec![row.mark.clone()];
            if let Some(s) = &start {
                expected.push(control::convert(s, &row.mark_type, "start point")?);
            }
            control::advance(session, row, &expected, &new_ctl).await?;
        }
    }
    record.status = if rows_to_copy > 0 {
        "succeeded".into()
    } else {
        "nothing_new".into()
    };
    Ok(())
}

/// The watermark column a run asks for: WATERMARK, else the control row's `watermark_column`.
fn requested_watermark(c: &CopyIncremental, row: Option<&ControlRow>) -> Result<Option<String>> {
    Ok(
        match (&c.watermark, row.and_then(|r| r.watermark_column.clone())) {
            (Some(w), _) => Some(name_parts(w)?.last().cloned().unwrap_or_default()),
            (None, w) => w,
        },
    )
}

/// The newest commit of a table and its tidemark metadata, read straight from the log
/// directory. None when the newest version has no JSON commit or was not written by tidemark.
fn newest_tidemark_commit(table_dir: &std::path::Path) -> Option<(u64, serde_json::Value)> {
    let log = table_dir.join("_delta_log");
    // The commits after the last checkpoint, by name; else every name in the directory.
    let probed = crate::catalog::store::probe_log_from_checkpoint(&log).and_then(|names| {
        names
            .iter()
            .filter_map(|n| n.strip_suffix(".json")?.parse::<u64>().ok())
            .max()
    });
    let (version, true) = (match probed {
        Some(v) => Some((v, true)),
        None => newest_in_directory(&log),
    })?
    else {
        return None;
    };
    let bytes = std::fs::read(log.join(format!("{version:020}.json"))).ok()?;
    bytes.split(|b| *b == b'\n').find_map(|line| {
        let action: serde_json::Value = serde_json::from_slice(line).ok()?;
        Some((version, action.get("commitInfo")?.get(META_KEY)?.clone()))
    })
}

/// The newest version named in a log directory, and whether it has a JSON commit.
fn newest_in_directory(log: &std::path::Path) -> Option<(u64, bool)> {
    let mut newest: Option<(u64, bool)> = None;
    for entry in std::fs::read_dir(log).ok()? {
        let name = entry.ok()?.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((digits, rest)) = name.split_at_checked(20) else {
            continue;
        };
        let Ok(v) = digits.parse::<u64>() else {
            continue;
        };
        let is_json = rest == ".json";
        if !is_json && !rest.starts_with('.') {
            continue;
        }
        newest = match newest {
            Some((n, j)) if n > v || (n == v && j) => Some((n, j)),
            _ => Some((v, is_json)),
        };
    }
    newest
}

/// Whether this run has nothing to do, decided without reading either table's files: the
/// target's newest commit is this pair's last run, the source is still at the version and table
/// id that run read, and this run starts at that run's mark. Then the run is recorded as
/// nothing new. Any doubt (an error included) answers false, and the full run decides.
async fn nothing_new(
    session: &Session,
    c: &CopyIncremental,
    source_name: &TableName,
    target_name: &TableName,
    control_row: Option<&ControlRow>,
    record: &mut RunRecord,
) -> Result<bool> {
    let (Ok(target_dir), true) = (
        session.warehouse.table_path(target_name),
        session.warehouse.table_exists(source_name),
    ) else {
        return Ok(false);
    };
    let Some((target_version, meta)) = newest_tidemark_commit(&target_dir) else {
        return Ok(false);
    };
    let app = app_id(source_name, target_name);
    if meta.get("app_id").and_then(|v| v.as_str()) != Some(app.as_str()) {
        return Ok(false);
    }
    let source = deltalake::kernel::Snapshot::try_new(
        session
            .warehouse
            .handle(source_name)
            .await?
            .log_store()
            .as_ref(),
        None,
    )
    .await?;
    let source_version = source.version() as i64;
    if meta.get("source_version").and_then(|v| v.as_i64()) != Some(source_version)
        || meta.get("source_id").and_then(|v| v.as_str()) != Some(source.metadata().id())
    {
        return Ok(false);
    }
    let Some(wm) = meta.get("watermark_column").and_then(|v| v.as_str()) else {
        return Ok(false);
    };
    let Some(wanted) = requested_watermark(c, control_row)? else {
        return Ok(false);
    };
    let (Some(null_rows), true) = (
        meta.get("null_rows").and_then(|v| v.as_i64()),
        wanted.eq_ignore_ascii_case(wm),
    ) else {
        return Ok(false);
    };
    let (_, wm_type) = find_column(&source.arrow_schema(), wm, source_name)?;
    let Some(mark) = meta
        .get("new_mark")
        .and_then(|v| mark_from_json(v, &wm_type))
    else {
        return Ok(false);
    };
    // With a control row, it must already hold the mark: any other value is a backfill or a
    // repair, which the full run handles.
    if let Some(row) = control_row
        && control::convert(&mark, &row.mark_type, "new mark").ok() != Some(row.mark.clone())
    {
        return Ok(false);
    }
    record.source_version = Some(source_version);
    record.watermark_column = Some(wm.to_string());
    record.previous_mark = Some(display_exact(&mark));
    record.new_mark = record.previous_mark.clone();
    record.null_watermark_rows = null_rows;
    record.rows_copied = 0;
    record.target_version = Some(target_version as i64);
    record.status = "nothing_new".into();
    Ok(true)
}

/// The source table's schema as stored (what its Parquet files hold).
fn source_arrow_schema(t: &DeltaTable) -> Result<SchemaRef> {
    super::ddl::arrow_schema(t)
}

/// Create an empty target; if another run created it first, start over on its state.
async fn create_target(
    session: &Session,
    name: &TableName,
    fields: Vec<deltalake::kernel::StructField>,
) -> Result<DeltaTable> {
    use deltalake::kernel::engine::arrow_conversion::TryIntoArrow;
    let fields = fields
        .into_iter()
        .map(without_column_mapping)
        .collect::<Result<Vec<_>>>()?;
    let mut configuration = std::collections::HashMap::new();
    let typed: Vec<(String, DataType)> = fields
        .iter()
        .filter_map(|f| {
            let arrow: std::result::Result<datafusion::arrow::datatypes::Field, _> =
                f.try_into_arrow();
            arrow
                .ok()
                .map(|a| (a.name().clone(), a.data_type().clone()))
        })
        .collect();
    super::ddl::keep_stats_exact(&mut configuration, &typed, &[]);
    session
        .warehouse
        .create_builder(name)
        .await?
        .with_columns(fields)
        .with_configuration(configuration)
        .await
        .map_err(|e| {
            if session.warehouse.table_exists(name) {
                Error::Conflict(format!("{name} was created by another run"))
            } else {
                Error::from(e)
            }
        })
}

/// A source field as a column of a target without column mapping: its logical name, without
/// the source's physical names and ids (at every nesting level). A column-mapped source's
/// rows are read by logical name, so the target needs no mapping of its own.
fn without_column_mapping(
    field: deltalake::kernel::StructField,
) -> Result<deltalake::kernel::StructField> {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::Object(meta)) = map.get_mut("metadata") {
                    meta.retain(|k, _| {
                        !k.starts_with("delta.columnMapping.") && k != "parquet.field.id"
                    });
                }
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut json = serde_json::to_value(&field)
        .map_err(|e| Error::Other(format!("column {}: {e}", field.name)))?;
    strip(&mut json);
    serde_json::from_value(json).map_err(|e| Error::Other(format!("column {}: {e}", field.name)))
}

/// A Delta table's id (its metadata action's `id`).
fn table_id(t: &DeltaTable) -> Option<String> {
    Some(t.snapshot().ok()?.metadata().id().to_string())
}

/// A file's path as the log writes it: a relative URL, each segment percent-encoded (delta-rs
/// joins a selected path to the table's URL, so `a b%c.parquet`, as Spark names files, must
/// arrive as `a%20b%25c.parquet`).
fn url_path(decoded: &str) -> String {
    let mut url = url::Url::parse("file:///").expect("a valid URL");
    if let Ok(mut segments) = url.path_segments_mut() {
        segments.clear().extend(decoded.split('/'));
    }
    url.path().trim_start_matches('/').to_string()
}

/// A DataFrame over some files of the pinned source snapshot.
async fn files_df(session: &Session, t: &DeltaTable, paths: Vec<String>) -> Result<DataFrame> {
    let provider = t
        .table_provider()
        .with_file_paths(paths.iter().map(|p| url_path(p)))
        .with_session(crate::catalog::copy_scan_settings())
        .await?;
    let provider = crate::catalog::exact_reads(t, provider)?;
    Ok(session.ctx.read_table(provider)?)
}

/// Commit whole files (linked), straddling files (decoded and filtered) and window rows in
/// one Delta commit carrying `props` (the txn action and the mark).
#[allow(clippy::too_many_arguments)]
async fn fast_commit(
    session: &Session,
    source: &DeltaTable,
    source_root: &std::path::Path,
    target_name: &TableName,
    target: DeltaTable,
    plan: &whole_file::FilePlan,
    above_pred: DfExpr,
    window_batches: &[RecordBatch],
    props: CommitProperties,
    progress: &CopyProgress,
    uncommitted: &Uncommitted,
) -> Result<DeltaTable> {
    let target_dir = session.warehouse.table_path(target_name)?;
    let linked = whole_file::link_files(
        source_root,
        &target_dir,
        &plan.whole,
        session.settings.hard_links,
        &crate::catalog::inexact_stats_columns(source)?,
    )?;
    for add in &linked {
        uncommitted.note(&add.path);
    }
    let result = commit_files(
        session,
        source,
        &target,
        plan,
        &linked,
        above_pred,
        window_batches,
        props,
        progress,
    )
    .await;
    // No unlink on error here: a commit can fail after its log entry landed (its checkpoint,
    // a full disk), and then the linked files are the table's. `uncommitted` removes them
    // when the copy stops before its commit began.
    result
}

/// Write the decoded rows and commit them with the linked files, in one commit.
#[allow(clippy::too_many_arguments)]
async fn commit_files(
    session: &Session,
    source: &DeltaTable,
    target: &DeltaTable,
    plan: &whole_file::FilePlan,
    linked: &[deltalake::kernel::Add],
    above_pred: DfExpr,
    window_batches: &[RecordBatch],
    props: CommitProperties,
    progress: &CopyProgress,
) -> Result<DeltaTable> {
    let mut adds = linked.to_vec();
    progress.inc(plan.whole_rows() as u64);
    let decoded = if plan.decode.is_empty() {
        None
    } else {
        let paths: Vec<String> = plan.decode.iter().map(|f| f.add.path.clone()).collect();
        Some(files_df(session, source, paths).await?.filter(above_pred)?)
    };
    adds.extend(write_partitioned(target, decoded, window_batches, None, progress).await?);
    commit_adds(target, adds, props).await
}

/// Write a query's rows (and extra batches) as new files of `target`, one writer per partition
/// of the plan so that decoding and encoding use every core. Returns the files, uncommitted.
async fn write_partitioned(
    target: &DeltaTable,
    rows: Option<DataFrame>,
    extra: &[RecordBatch],
    settings: Option<whole_file::DecodeSettings>,
    progress: &CopyProgress,
) -> Result<Vec<deltalake::kernel::Add>> {
    let writer = || -> Result<deltalake::writer::RecordBatchWriter> {
        let w = deltalake::writer::RecordBatchWriter::for_table(target)?;
        Ok(match &settings {
            Some(s) => w.with_writer_properties(s.writer.clone()),
            None => w,
        })
    };
    let batch_rows = settings.as_ref().map(|s| s.batch_rows);
    write_with(writer, rows, extra, batch_rows, progress).await
}

/// [`write_partitioned`] with the writers `writer` makes (all for the same schema).
pub(crate) async fn write_with(
    writer: impl Fn() -> Result<deltalake::writer::RecordBatchWriter>,
    rows: Option<DataFrame>,
    extra: &[RecordBatch],
    batch_rows: Option<usize>,
    progress: &CopyProgress,
) -> Result<Vec<deltalake::kernel::Add>> {
    use deltalake::writer::DeltaWriter;
    // Each batch as the target stores it: its columns by name (any case), in its types, NULL
    // for a target column the source lacks.
    let schema = writer()?.arrow_schema();
    let conform = move |batch: RecordBatch| -> Result<RecordBatch> {
        let given = batch.schema();
        let cols = schema
            .fields()
            .iter()
            .map(|f| {
                let found = given
                    .fields()
                    .iter()
                    .position(|g| g.name().eq_ignore_ascii_case(f.name()));
                Ok(match found {
                    Some(i) => datafusion::arrow::compute::cast(batch.column(i), f.data_type())?,
                    None => {
                        datafusion::arrow::array::new_null_array(f.data_type(), batch.num_rows())
                    }
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(RecordBatch::try_new(schema.clone(), cols)?)
    };
    let streams = match rows {
        Some(df) => {
            let mut task = df.task_ctx();
            if let Some(n) = batch_rows {
                let config = task.session_config().clone().with_batch_size(n);
                task = task.with_session_config(config);
            }
            let plan = df.create_physical_plan().await?;
            datafusion::physical_plan::execute_stream_partitioned(plan, Arc::new(task))?
        }
        None => vec![],
    };
    let mut tasks = vec![];
    for mut stream in streams {
        let (mut w, conform, count) = (writer()?, conform.clone(), progress.counter());
        tasks.push(AbortOnDrop(tokio::spawn(async move {
            let mut wrote = false;
            while let Some(batch) = stream.try_next().await? {
                if batch.num_rows() > 0 {
                    super::rewrite::stop_on_violation(&batch)?;
                    count(batch.num_rows() as u64);
                    w.write(conform(batch)?).await?;
                    wrote = true;
                }
            }
            Ok::<_, Error>(if wrote { w.flush().await? } else { vec![] })
        })));
    }
    let mut adds = vec![];
    if !extra.is_empty() {
        let mut w = writer()?;
        for batch in extra {
            w.write(conform(batch.clone())?).await?;
        }
        adds.extend(w.flush().await?);
    }
    for task in tasks {
        let written = task
            .await
            .map_err(|e| Error::Other(format!("writing the copy: {e}")))??;
        adds.extend(written);
    }
    Ok(adds)
}

/// Whether a target with schema `target` reads a file of a source with schema `source` as it
/// is (Delta readers match a file's columns by name, and read a column the file lacks as
/// NULL): each source column is a target column of the same name and type; column comments
/// may differ, and a source column that is NOT NULL may be nullable in the target; any other
/// field metadata (column mapping, identity, generation) must match. A target column the
/// source lacks must be nullable, with no metadata but a comment.
fn reads_files_as_they_are(target: &SchemaRef, source: &SchemaRef) -> bool {
    let without_comment = |f: &datafusion::arrow::datatypes::Field| {
        let mut m = f.metadata().clone();
        m.remove(super::ddl::COMMENT_KEY);
        m
    };
    let find =
        |schema: &SchemaRef, name: &str| schema.fields().iter().find(|f| f.name() == name).cloned();
    source.fields().iter().all(|s| {
        find(target, s.name()).is_some_and(|t| {
            t.data_type() == s.data_type()
                && (t.is_nullable() || !s.is_nullable())
                && without_comment(&t) == without_comment(s)
        })
    }) && target.fields().iter().all(|t| {
        find(source, t.name()).is_some() || (t.is_nullable() && without_comment(t).is_empty())
    })
}

/// `rows` with every column of `target` the source lacks added, as its DEFAULT or NULL, in
/// the target's order (the source's own new columns last, for a schema merge).
async fn with_target_columns(
    session: &Session,
    rows: DataFrame,
    target: &DeltaTable,
) -> Result<DataFrame> {
    let tschema = super::ddl::arrow_schema(target)?;
    let given = super::column_names(rows.schema().fields());
    let find = |name: &str| given.iter().find(|g| g.eq_ignore_ascii_case(name));
    if tschema.fields().iter().all(|f| find(f.name()).is_some()) {
        return Ok(rows);
    }
    let mut exprs = vec![];
    for f in tschema.fields() {
        exprs.push(match find(f.name()) {
            Some(g) => {
                datafusion::prelude::col(datafusion::common::Column::from_name(g)).alias(f.name())
            }
            None => match f.metadata().get(super::ddl::DEFAULT_KEY) {
                Some(d) => super::dml::default_expr(session, d, f.data_type()).await?,
                None => DfExpr::Literal(ScalarValue::try_from(f.data_type())?, None),
            }
            .alias(f.name()),
        });
    }
    for g in &given {
        if !tschema
            .fields()
            .iter()
            .any(|f| f.name().eq_ignore_ascii_case(g))
        {
            exprs.push(datafusion::prelude::col(
                datafusion::common::Column::from_name(g),
            ));
        }
    }
    Ok(rows.select(exprs)?)
}

/// Whether files can be appended to `target` by tidemark's own writer: nothing in the table
/// asks a writer to check or compute values (CHECK constraints, invariants, generated columns,
/// column defaults), which only the full write path handles.
fn plain_appends(target: &DeltaTable) -> Result<bool> {
    let snapshot = target.snapshot()?;
    let metadata = snapshot.metadata();
    let constrained = metadata
        .configuration()
        .keys()
        .any(|k| k.starts_with("delta.constraints."));
    let computed = snapshot.schema().fields().any(|f| {
        f.metadata().keys().any(|k| {
            k == "delta.invariants"
                || k == "delta.generationExpression"
                || k == super::ddl::DEFAULT_KEY
        })
    });
    Ok(!constrained && !computed)
}

/// Commit new files to `target` as one append.
async fn commit_adds(
    target: &DeltaTable,
    adds: Vec<deltalake::kernel::Add>,
    props: CommitProperties,
) -> Result<DeltaTable> {
    // Tests hold a copy here, its files written and not committed (`return(ms)`: an
    // asynchronous wait, during which Ctrl-C and SIGTERM are seen).
    let hold = (|| -> Option<u64> {
        fail::fail_point!("copy::before_commit", |ms| ms.and_then(|m| m.parse().ok()));
        None
    })();
    if let Some(ms) = hold {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    let (actions, operation) = super::append_commit(adds);
    let finalized = deltalake::kernel::transaction::CommitBuilder::from(props)
        .with_actions(actions)
        .build(Some(target.snapshot()?), target.log_store(), operation)
        .await?;
    let mut t = target.clone();
    t.state = Some(finalized.snapshot());
    Ok(t)
}

/// Per key, the source row with the highest watermark.
fn latest_per_key(df: DataFrame, keys: &[String], wm: &str) -> Result<DataFrame> {
    use datafusion::functions_window::expr_fn::row_number;
    let cols: Vec<DfExpr> = df
        .schema()
        .fields()
        .iter()
        .map(|f| col(Column::from_name(f.name())))
        .collect();
    let rn = row_number()
        .partition_by(keys.iter().map(|k| col(Column::from_name(k))).collect())
        .order_by(vec![wm_col(wm).sort(false, false)])
        .build()?
        .alias("__tidemark_rn");
    let numbered = df.select(
        cols.iter()
            .cloned()
            .chain(std::iter::once(rn))
            .collect::<Vec<_>>(),
    )?;
    Ok(numbered
        .filter(col("__tidemark_rn").eq(lit(1u64)))?
        .select(cols)?)
}

/// The maximum watermark (None when no row) and the row count of `df`.
async fn max_and_count(df: DataFrame, w: &DfExpr) -> Result<(Option<ScalarValue>, i64)> {
    let batches = df
        .aggregate(
            vec![],
            vec![max(w.clone()).alias("m"), count(lit(1)).alias("n")],
        )?
        .collect()
        .await?;
    let Some(b) = batches.iter().find(|b| b.num_rows() > 0) else {
        return Ok((None, 0));
    };
    let m = match ScalarValue::try_from_array(b.column(0), 0)? {
        ScalarValue::Dictionary(_, v) => *v,
        m => m,
    };
    let n = match ScalarValue::try_from_array(b.column(1), 0)? {
        ScalarValue::Int64(Some(n)) => n,
        _ => 0,
    };
    Ok((if m.is_null() { None } else { Some(m) }, n))
}

#[cfg(test)]
mod tests {
    use super::newest_tidemark_commit;

    #[test]
    fn selected_paths_are_percent_encoded_as_in_the_log() {
        assert_eq!(super::url_path("a b%c.parquet"), "a%20b%25c.parquet");
        assert_eq!(super::url_path("p=x/part-0.parquet"), "p=x/part-0.parquet");
        assert_eq!(super::url_path("p=a%2Fb/f.parquet"), "p=a%252Fb/f.parquet");
    }

    #[test]
    fn the_newest_commit_is_found_by_name_or_in_the_directory() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("_delta_log");
        std::fs::create_dir_all(&log).unwrap();
        let commit = |v: u64, meta: &str| {
            let info = format!(r#"{{"commitInfo":{{"tidemark":{{"run":{meta}}}}}}}"#);
            std::fs::write(log.join(format!("{v:020}.json")), info + "\n").unwrap();
        };
        for v in 12..=25 {
            commit(v, &v.to_string());
        }
        std::fs::write(log.join("00000000000000000020.checkpoint.parquet"), b"p").unwrap();
        std::fs::write(log.join("_last_checkpoint"), br#"{"version":20,"size":1}"#).unwrap();
        let (v, meta) = newest_tidemark_commit(d.path()).unwrap();
        assert_eq!((v, meta["run"].as_i64()), (25, Some(25)));
        // A subdirectory turns probing off: the directory answers the same.
        std::fs::create_dir(log.join("_sidecars")).unwrap();
        let (v, _) = newest_tidemark_commit(d.path()).unwrap();
        assert_eq!(v, 25);
        // A newest commit not written by tidemark: none.
        std::fs::remove_dir(log.join("_sidecars")).unwrap();
        std::fs::write(
            log.join("00000000000000000026.json"),
            b"{\"commitInfo\":{}}\n",
        )
        .unwrap();
        assert!(newest_tidemark_commit(d.path()).is_none());
    }
}
