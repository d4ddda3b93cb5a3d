//! `FOR EACH row IN (query) [CONCURRENCY n] DO ... END FOR`, the sequential scripting form
//! `FOR [v AS] query DO ... END FOR`, and the one-statement job
//! `COPY INCREMENTAL USING CONTROL TABLE`. The query runs once, up front; each iteration gets
//! its own copy of the session variables; a failing iteration does not stop the others.

use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::sql::sqlparser::ast::{ExprWithAlias, Ident, ObjectName, ObjectNamePart};
use futures::StreamExt;

use super::AbortOnDrop;
use super::copy::control::{self, ControlRow};
use crate::engine::progress::LoopProgress;
use crate::engine::{LoopRow, Output, Session};
use crate::error::{Error, Result};
use crate::parser::{CopyIncremental, CopyUsingControl, ForEach};

/// A copy's previous and new mark, as text.
type Marks = (Option<String>, Option<String>);

/// What one iteration did.
#[derive(Debug, Clone)]
struct IterationResult {
    started_at_us: i64,
    duration_ms: i64,
    rows_affected: i64,
    /// For a dry run: the rows the copy would copy.
    rows_to_copy: Option<i64>,
    /// For a copy of the control-table job: the mark before and after it.
    marks: Option<Marks>,
    error: Option<String>,
    /// What happened, in one word: `succeeded`, `failed`, `not_run`, or a copy's own status
    /// (`nothing_new`, `dry_run`), or `skipped` for a paused control row.
    status: String,
}

impl IterationResult {
    /// The result of a `what` whose task ended without returning (a panic, an abort).
    fn stopped(what: &str, e: tokio::task::JoinError) -> Self {
        IterationResult {
            started_at_us: chrono::Utc::now().timestamp_micros(),
            duration_ms: 0,
            rows_affected: 0,
            rows_to_copy: None,
            marks: None,
            error: Some(format!("the {what} stopped unexpectedly: {e}")),
            status: "failed".into(),
        }
    }
}

/// Rows affected by a statement's output (DML counts, rows copied), else its row count.
fn affected(out: &Output) -> i64 {
    for name in ["num_affected_rows", "rows_copied"] {
        if let Ok(i) = out.schema.index_of(name) {
            return out
                .batches
                .iter()
                .filter_map(|b| {
                    b.column(i)
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .map(|a| a.iter().flatten().sum::<i64>())
                })
                .sum();
        }
    }
    0
}

/// Split the loop query's result into rows of (column, value).
pub(super) fn rows_of(batches: &[RecordBatch]) -> Result<Vec<Vec<(String, ScalarValue)>>> {
    let mut rows = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            let mut row = Vec::with_capacity(b.num_columns());
            for (i, f) in b.schema().fields().iter().enumerate() {
                row.push((
                    f.name().to_lowercase(),
                    ScalarValue::try_from_array(b.column(i), r)?,
                ));
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Run the body statements of one iteration in `session`, stopping at the first error.
async fn run_body(session: &mut Session, body: &[crate::parser::BodyStatement]) -> IterationResult {
    let started = chrono::Utc::now().timestamp_micros();
    let clock = Instant::now();
    let mut rows = 0;
    let mut error = None;
    for stmt in body {
        match super::run(session, &stmt.sql).await {
            Ok(out) => rows += affected(&out),
            Err(e) => {
                error = Some(format!("line {}:{}: {e}", stmt.line, stmt.col));
                break;
            }
        }
    }
    IterationResult {
        started_at_us: started,
        duration_ms: clock.elapsed().as_millis() as i64,
        rows_to_copy: None,
        marks: None,
        rows_affected: rows,
        status: if error.is_some() {
            "failed"
        } else {
            "succeeded"
        }
        .into(),
        error,
    }
}

/// The per-iteration result table: iteration, the row's columns, status, timing, error.
fn result_table(rows_batches: &[RecordBatch], results: &[IterationResult]) -> Result<Output> {
    let mut fields = vec![Field::new("iteration", DataType::Int64, false)];
    let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(
        (1..=results.len() as i64).collect::<Vec<_>>(),
    ))];
    if let Some(first) = rows_batches.first() {
        let all = datafusion::arrow::compute::concat_batches(&first.schema(), rows_batches)?;
        for (i, f) in all.schema().fields().iter().enumerate() {
            fields.push(Field::new(f.name(), f.data_type().clone(), true));
            columns.push(all.column(i).clone());
        }
    }
    fields.extend([
        Field::new("status", DataType::Utf8, false),
        Field::new(
            "started_at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("duration_ms", DataType::Int64, false),
        Field::new("rows_affected", DataType::Int64, false),
        Field::new("error", DataType::Utf8, true),
    ]);
    columns.push(Arc::new(StringArray::from(
        results
            .iter()
            .map(|r| r.status.as_str())
            .collect::<Vec<_>>(),
    )));
    columns.push(Arc::new(
        TimestampMicrosecondArray::from(
            results.iter().map(|r| r.started_at_us).collect::<Vec<_>>(),
        )
        .with_timezone("UTC"),
    ));
    columns.push(Arc::new(Int64Array::from(
        results.iter().map(|r| r.duration_ms).collect::<Vec<_>>(),
    )));
    columns.push(Arc::new(Int64Array::from(
        results.iter().map(|r| r.rows_affected).collect::<Vec<_>>(),
    )));
    columns.push(Arc::new(StringArray::from(
        results.iter().map(|r| r.error.clone()).collect::<Vec<_>>(),
    )));
    if results.iter().any(|r| r.rows_to_copy.is_some()) {
        fields.push(Field::new("rows_to_copy", DataType::Int64, true));
        columns.push(Arc::new(Int64Array::from(
            results.iter().map(|r| r.rows_to_copy).collect::<Vec<_>>(),
        )));
    }
    if results.iter().any(|r| r.marks.is_some()) {
        let mark = |pick: fn(&Marks) -> Option<String>| {
            let values: Vec<Option<String>> = results
                .iter()
                .map(|r| r.marks.as_ref().and_then(pick))
                .collect();
            Arc::new(StringArray::from(values)) as ArrayRef
        };
        fields.push(Field::new("previous_mark", DataType::Utf8, true));
        columns.push(mark(|m| m.0.clone()));
        fields.push(Field::new("new_mark", DataType::Utf8, true));
        columns.push(mark(|m| m.1.clone()));
    }
    Ok(Output::batch(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?))
}

/// Fail the statement when any iteration failed, still handing back the result table.
fn finish(output: Output, results: &[IterationResult]) -> Result<Output> {
    let failed = results.iter().filter(|r| r.status == "failed").count();
    if failed == 0 {
        return Ok(output);
    }
    let first = results
        .iter()
        .position(|r| r.status == "failed")
        .unwrap_or(0);
    Err(Error::Iterations {
        message: format!(
            "{failed} of {} iterations failed; first failure, iteration {}: {}",
            results.len(),
            first + 1,
            results[first].error.as_deref().unwrap_or("")
        ),
        output: Box::new(output),
    })
}

/// `FOR EACH ... DO ... END FOR` (parallel) and `FOR [v AS] query DO ... END FOR` (sequential).
pub async fn execute(session: &mut Session, f: ForEach) -> Result<Output> {
    let (df, _bound) = super::query::query_dataframe(session, *f.query.clone()).await?;
    let batches = df.collect().await?;
    let rows = rows_of(&batches)?;
    let mut results = Vec::with_capacity(rows.len());
    if !f.parallel {
        // Scripting form: in the session itself, so SET VAR persists across iterations.
        for row in rows {
            session.vars_mut().push_row(LoopRow {
                name: f.var.clone(),
                columns: row,
            });
            let r = run_body(session, &f.body).await;
            session.vars_mut().pop_row();
            let failed = r.error.clone();
            results.push(r);
            if let Some(e) = failed {
                let out = result_table(
                    &batches,
                    &pad(&results, batches.iter().map(|b| b.num_rows()).sum()),
                )?;
                return Err(Error::Iterations {
                    message: format!("iteration {} failed: {e}", results.len()),
                    output: Box::new(out),
                });
            }
        }
        return finish(result_table(&batches, &results)?, &results);
    }
    let n = f.concurrency.unwrap_or(1) as usize;
    let body = Arc::new(f.body);
    let progress = LoopProgress::start(session.settings().progress.as_ref(), rows.len() as u64);
    let quiet = quiet_settings(session);
    let mut indexed: Vec<(usize, IterationResult)> =
        futures::stream::iter(rows.into_iter().enumerate())
            .map(|(i, row)| {
                let mut s = session.clone();
                s.set_settings(quiet.clone());
                let body = body.clone();
                let name = f.var.clone();
                let line = progress.clone();
                // A task per iteration: iterations run on every core, not interleaved on one.
                let label = iteration_label(i, &row);
                let task = AbortOnDrop(tokio::spawn(async move {
                    let _line = line.iteration(label);
                    s.vars_mut().push_row(LoopRow { name, columns: row });
                    run_body(&mut s, &body).await
                }));
                async move {
                    let r = task
                        .await
                        .unwrap_or_else(|e| IterationResult::stopped("iteration", e));
                    (i, r)
                }
            })
            .buffer_unordered(n.max(1))
            .collect()
            .await;
    progress.finish();
    indexed.sort_by_key(|(i, _)| *i);
    results.extend(indexed.into_iter().map(|(_, r)| r));
    finish(result_table(&batches, &results)?, &results)
}

/// Settings for loop iterations: the loop draws the progress, not each statement.
fn quiet_settings(session: &Session) -> Arc<crate::engine::Settings> {
    Arc::new(crate::engine::Settings {
        progress: None,
        ..(*session.settings()).clone()
    })
}

/// Results for iterations that did not run (after a failure in the sequential form).
fn pad(results: &[IterationResult], total: usize) -> Vec<IterationResult> {
    let mut v = results.to_vec();
    while v.len() < total {
        v.push(IterationResult {
            started_at_us: 0,
            duration_ms: 0,
            rows_to_copy: None,
            marks: None,
            rows_affected: 0,
            error: None,
            status: "not_run".into(),
        });
    }
    v
}

/// A name stored in a control row as an object name (validated, never pasted into SQL).
fn stored_name(raw: &str) -> Result<ObjectName> {
    let parts = crate::catalog::split_qualified(raw)?;
    Ok(ObjectName(
        parts
            .into_iter()
            .map(|p| ObjectNamePart::Identifier(Ident::with_quote('`', p)))
            .collect(),
    ))
}

/// Copies started per slot of a job: those beyond the slots wait for one, or wait in a group
/// commit with their work done.
const WAITING_PER_SLOT: usize = 32;

/// `COPY INCREMENTAL USING CONTROL TABLE ctl [WHERE p] [CONCURRENCY n] [DRY RUN]`.
pub async fn copy_using_control(session: &mut Session, c: CopyUsingControl) -> Result<Output> {
    let ctl = session.table_name(&c.control)?;
    let Selected {
        batches,
        known,
        paused,
        has_active,
    } = selected(session, &c, &ctl).await?;
    let rows = rows_of(&batches)?;
    let n = c.concurrency.unwrap_or(4) as usize;
    let progress = LoopProgress::start(session.settings().progress.as_ref(), rows.len() as u64);
    let quiet = quiet_settings(session);
    // n copies work at once; more wait in group commits, their slots lent to the next ones.
    let slots = Arc::new(tokio::sync::Semaphore::new(n.max(1)));
    let mut indexed: Vec<(usize, IterationResult)> =
        futures::stream::iter(rows.into_iter().zip(known).enumerate())
            .map(|(i, (row, known_row))| {
                let mut s = session.clone();
                s.set_settings(quiet.clone());
                let line = progress.clone();
                let ctl_name = c.control.clone();
                let dry_run = c.dry_run;
                let paused = has_active && paused[i];
                let slots = slots.clone();
                // A task per copy: copies run on every core, not interleaved on one.
                let task = AbortOnDrop(tokio::spawn(async move {
                    let copy = copy_row(&s, i, &row, known_row, ctl_name, dry_run, paused, &line);
                    (i, super::group_commit::in_slot(slots, copy).await)
                }));
                async move {
                    task.await
                        .unwrap_or_else(|e| (i, IterationResult::stopped("copy", e)))
                }
            })
            .buffer_unordered(n.max(1) * WAITING_PER_SLOT)
            .collect()
            .await;
    progress.finish();
    indexed.sort_by_key(|(i, _)| *i);
    let results: Vec<IterationResult> = indexed.into_iter().map(|(_, r)| r).collect();
    finish(result_table(&batches, &results)?, &results)
}

/// The control rows a one-statement job copies (WHERE applied), each with its row as read
/// (None for a pair named by several rows) and whether it is paused (`active = false`).
struct Selected {
    /// `source_table`, `target_table` and `watermark_column` of each row.
    batches: Vec<datafusion::arrow::array::RecordBatch>,
    known: Vec<Option<ControlRow>>,
    paused: Vec<bool>,
    has_active: bool,
}

async fn selected(
    session: &Session,
    c: &CopyUsingControl,
    ctl: &crate::catalog::TableName,
) -> Result<Selected> {
    let all = control::read_all(session, ctl).await?;
    let counts = control::pair_counts(session, &all);
    let mut df = session.ctx().read_batches(all)?;
    if let Some(mut pred) = c.filter.clone() {
        let columns = super::column_names(df.schema().fields());
        let _b = session.bind(&mut pred, &columns).await?;
        let schema = DFSchema::try_from(df.schema().as_arrow().clone())?;
        let e = session.ctx().state().create_logical_expr_from_sql_expr(
            ExprWithAlias {
                expr: pred,
                alias: None,
            },
            &schema,
        )?;
        df = df.filter(e)?;
    }
    // Paused rows (`active = false`) are shown as `skipped`, not dropped from the result.
    let has_active = match df.schema().as_arrow().field_with_name("active") {
        Ok(f) if f.data_type() == &DataType::Boolean => true,
        Ok(f) => {
            return Err(Error::Type(format!(
                "control table {ctl}: column 'active' is {}; it must be BOOLEAN (true copies the row, false pauses it)",
                crate::engine::types::type_name(f.data_type())
            )));
        }
        Err(_) => false,
    };
    let keep: Vec<&str> = ["source_table", "target_table", "watermark_column"]
        .into_iter()
        .filter(|c| df.schema().as_arrow().field_with_name(c).is_ok())
        .collect();
    let mut full = df.collect().await?;
    if let Some((i, n)) = c.shard {
        full = full
            .iter()
            .map(|b| {
                let mine: BooleanArray = (0..b.num_rows())
                    .map(|r| Some(shard_of(session, b, r, n) == i))
                    .collect();
                datafusion::arrow::compute::filter_record_batch(b, &mine)
            })
            .collect::<std::result::Result<_, _>>()?;
    }
    // Each copy gets its row from this one read of the control table (a pair named by
    // several rows gets none: its copy then reports them).
    let mut known: Vec<Option<ControlRow>> = vec![];
    let mut paused: Vec<bool> = vec![];
    for b in &full {
        let active = b
            .column_by_name("active")
            .and_then(|a| a.as_any().downcast_ref::<BooleanArray>().cloned());
        for r in 0..b.num_rows() {
            paused.push(
                active
                    .as_ref()
                    .is_some_and(|a| a.is_valid(r) && !a.value(r)),
            );
            let row = control::row_at(ctl, b, r).ok().flatten().filter(|row| {
                control::pair_of(session, &row.source_value, row.target_value.as_deref())
                    .is_some_and(|pair| counts.get(&pair) == Some(&1))
            });
            known.push(row);
        }
    }
    let batches = full
        .iter()
        .map(|b| {
            let idx: Vec<usize> = keep
                .iter()
                .filter_map(|k| b.schema().index_of(k).ok())
                .collect();
            b.project(&idx)
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(Selected {
        batches,
        known,
        paused,
        has_active,
    })
}

/// The shard of `n` that copies row `r` of a control table: a stable hash (64-bit FNV-1a,
/// the same on every machine and release) of its target table's full name, so that every
/// row naming a target lands in the same shard, modulo `n`. A row whose target does not
/// resolve is placed by its names as stored (its error is then reported by one shard).
fn shard_of(session: &Session, b: &RecordBatch, r: usize, n: u64) -> u64 {
    let text = |c: &str| control::string_at(b, c, r).ok().flatten();
    let (source, target) = (text("source_table"), text("target_table"));
    let key = match source
        .as_deref()
        .and_then(|s| control::pair_of(session, s, target.as_deref()))
    {
        Some((_, Some(target))) => target.to_string(),
        Some((source, None)) if target.is_none() => source.to_string(),
        _ => format!(
            "{}\u{0}{}",
            source.unwrap_or_default(),
            target.unwrap_or_default()
        ),
    };
    crate::fnv1a(key.as_bytes()) % n
}

/// One control row's copy, as the job's result reports it.
#[allow(clippy::too_many_arguments)]
async fn copy_row(
    s: &Session,
    i: usize,
    row: &[(String, ScalarValue)],
    known_row: Option<ControlRow>,
    ctl_name: datafusion::sql::sqlparser::ast::ObjectName,
    dry_run: bool,
    paused: bool,
    line: &LoopProgress,
) -> IterationResult {
    let started = chrono::Utc::now().timestamp_micros();
    let clock = Instant::now();
    if paused {
        let skipped = IterationResult {
            started_at_us: started,
            duration_ms: 0,
            rows_to_copy: None,
            marks: None,
            rows_affected: 0,
            error: None,
            status: "skipped".into(),
        };
        return skipped;
    }
    let text = |name: &str| {
        row.iter()
            .find(|(c, _)| c == name)
            .and_then(|(_, v)| match v {
                ScalarValue::Utf8(s) | ScalarValue::Utf8View(s) | ScalarValue::LargeUtf8(s) => {
                    s.clone()
                }
                _ => None,
            })
    };
    let src = text("source_table").unwrap_or_default();
    let _line = line.iteration(format!(
        "{src} -> {}",
        text("target_table").unwrap_or_default()
    ));
    let result = async {
        let source = stored_name(&src)
            .map_err(|e| e.context(format!("control row {} (source_table '{src}')", i + 1)))?;
        let tgt = text("target_table").ok_or_else(|| {
            Error::Invalid(format!(
                "control row {} (source_table '{src}') has no target_table",
                i + 1
            ))
        })?;
        let target = stored_name(&tgt)
            .map_err(|e| e.context(format!("control row {} (target_table '{tgt}')", i + 1)))?;
        let copy = CopyIncremental {
            source,
            target,
            watermark: None,
            since: None,
            control: Some(ctl_name),
            merge_on: vec![],
            lookback: None,
            dry_run,
        };
        super::copy::run_with_row(s, &copy, known_row).await
    }
    .await;
    match result {
        Ok(rep) => IterationResult {
            started_at_us: started,
            duration_ms: clock.elapsed().as_millis() as i64,
            // A dry run affects nothing: its would-be count is in `rows_to_copy`.
            rows_affected: if dry_run { 0 } else { rep.record.rows_copied },
            rows_to_copy: dry_run.then_some(rep.record.rows_copied),
            marks: Some((
                rep.record.previous_mark.clone(),
                rep.record.new_mark.clone(),
            )),
            error: None,
            status: rep.record.status.clone(),
        },
        Err(e) => IterationResult {
            started_at_us: started,
            duration_ms: clock.elapsed().as_millis() as i64,
            rows_to_copy: None,
            marks: None,
            rows_affected: 0,
            error: Some(e.to_string()),
            status: "failed".into(),
        },
    }
}

/// What a running iteration's progress line says it works on: `source -> target` for a
/// control-table row, else its first values (`iteration 3: id=7, name=orders`).
fn iteration_label(i: usize, row: &[(String, ScalarValue)]) -> String {
    let value = |name: &str| {
        row.iter()
            .find(|(c, _)| c.eq_ignore_ascii_case(name))
            .map(|(_, v)| crate::engine::types::display_exact(v))
    };
    if let (Some(source), Some(target)) = (value("source_table"), value("target_table")) {
        return format!("iteration {}: {source} -> {target}", i + 1);
    }
    let shown: Vec<String> = row
        .iter()
        .take(3)
        .map(|(c, v)| {
            let mut text = crate::engine::types::display_exact(v);
            if text.chars().count() > 30 {
                text = text.chars().take(29).collect::<String>() + "…";
            }
            format!("{c}={text}")
        })
        .collect();
    format!("iteration {}: {}", i + 1, shown.join(", "))
}
