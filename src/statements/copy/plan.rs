//! Step 2 of a copy: from the resolved state and the start point, which rows are new, the new
//! mark, and the [`Strategy`] that writes them. Statistics answer where they can be trusted (a
//! file whose every row is above the start is counted, not read); the rows answer otherwise.
//! A DRY RUN reports this plan and stops.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Column, ScalarValue};
use datafusion::dataframe::DataFrame;
use datafusion::functions_aggregate::expr_fn::{count, max};
use datafusion::functions_aggregate::min_max::MaxAccumulator;
use datafusion::logical_expr::{Accumulator, ColumnarValue};
use datafusion::logical_expr::{Expr as DfExpr, ExprFunctionExt, col, lit};

use super::resolve::Resolved;
use super::start::StartPoint;
use super::whole_file::{self, FilePlan, SourceFile};
use crate::engine::Session;
use crate::engine::types::type_name;
use crate::error::Result;
use crate::statements::table::{plain_appends, reads_files_as_they_are, storable};

/// How a copy writes its rows.
pub(super) enum Strategy {
    /// No row to copy into an existing target: no commit.
    NothingNew,
    /// Source files linked whole, straddling files decoded and filtered; tidemark's writer.
    WholeFiles(FilePlan),
    /// Rows decoded and written by tidemark's writer, one per partition of the plan.
    Append,
    /// Through delta-rs' writer, which checks constraints and computes columns; `merge_schema`
    /// adds the source's new columns to the target.
    CheckedAppend { merge_schema: bool },
    /// MERGE on the keys: each key ends at its latest row.
    Upsert,
}

/// What a copy will do, before it writes anything.
pub(super) struct CopyPlan {
    pub strategy: Strategy,
    /// New rows: those above the start, plus the window's rows the target lacks.
    pub rows: i64,
    pub new_mark: Option<ScalarValue>,
    /// Source rows with a NULL watermark (never copied).
    pub null_rows: i64,
    /// Rows at (or LOOKBACK below) the start point that the target lacks.
    pub window: Vec<RecordBatch>,
    /// The rows to write (above the start; an upsert's whole window), as the source has them.
    pub rows_df: DataFrame,
    /// The predicate "above the start point".
    pub above: DfExpr,
    /// The source files that may hold rows at the new mark (recorded for the next run).
    pub mark_files: Option<Vec<String>>,
    /// A source read once (a database): `rows_df` counts its rows and finds their largest
    /// watermark as the writer reads them; `rows` and `new_mark` are known after the write.
    pub seen: Option<Arc<Seen>>,
}

/// The rows a streamed copy wrote and their largest watermark, as the writer read them: the
/// mark and the rows of one query, so one snapshot of the database.
pub(super) struct Seen {
    rows: AtomicI64,
    max: Mutex<MaxAccumulator>,
}

impl Seen {
    fn new(wm_type: &DataType) -> Result<Seen> {
        Ok(Seen {
            rows: AtomicI64::new(0),
            max: Mutex::new(MaxAccumulator::try_new(wm_type)?),
        })
    }

    fn see(&self, values: &ColumnarValue, rows: usize) -> datafusion::error::Result<()> {
        // Tests slow a copy from a database here, to stop the server in its midst.
        fail::fail_point!("copy::database_batch");
        let values = values.to_array(rows)?;
        self.max
            .lock()
            .map_err(|_| datafusion::error::DataFusionError::Internal("poisoned".into()))?
            .update_batch(&[values])?;
        self.rows.fetch_add(rows as i64, Ordering::SeqCst);
        Ok(())
    }
}

impl CopyPlan {
    /// A streamed copy's rows and new mark, once written.
    pub(super) fn note_written(&mut self) -> Result<()> {
        let Some(seen) = &self.seen else {
            return Ok(());
        };
        self.rows += seen.rows.load(Ordering::SeqCst);
        let max = seen
            .max
            .lock()
            .map_err(|_| crate::error::Error::Other("a copy's watermark was lost".into()))?
            .evaluate()?;
        if !max.is_null() {
            self.new_mark = Some(max);
        }
        Ok(())
    }
}

/// Plan a copy from `start`.
pub(super) async fn plan(
    session: &Session,
    r: &Resolved,
    start: &StartPoint,
    lookback: Option<&datafusion::sql::sqlparser::ast::Expr>,
    dry_run: bool,
) -> Result<CopyPlan> {
    let mut scan = r.source.scan(session)?;
    let w = wm_col(&r.wm);
    let from = start.value();
    let above = match from {
        Some(s) => w.clone().gt(lit(s.clone())),
        None => w.clone().is_not_null(),
    };
    // The source's files and their statistics, read once for every decision below.
    let files = r.source.files(&r.wm, &r.wm_type)?;
    let null_rows = match files.as_deref().and_then(whole_file::null_count) {
        Some(n) => n,
        None => scan.clone().filter(w.clone().is_null())?.count().await? as i64,
    };
    // A full load of a source without NULL watermarks copies every row: no filter to evaluate
    // (not for a source read once: a row with a NULL watermark may arrive after the count).
    let mut rows_df = if from.is_none() && null_rows == 0 && !r.source.reads_once() {
        scan.clone()
    } else {
        scan.clone().filter(above.clone())?
    };
    // The source is at the very version the last run copied from, and this run starts where
    // that one ended: nothing above the mark or at it can be missing. No query needed.
    let unchanged = r.since.is_none()
        && lookback.is_none()
        && r.source.version().is_some()
        && r.source.id().is_some()
        && r.last.as_ref().is_some_and(|l| {
            l.source_version == r.source.version()
                && l.source_id == r.source.id()
                && l.mark.as_ref() == from
        });
    let lower = lower_bound(session, r, start, lookback).await?;
    if r.source.reads_once() && !dry_run {
        if streams(r)? {
            let (from, lower) = (from.cloned(), lower.clone());
            let start = Start { from, lower, above };
            return streamed(session, r, scan, rows_df, start, null_rows).await;
        }
        // Everything the plan reads at or above the window's bottom, read in one query and
        // planned from memory: its rows, mark and window are of one snapshot.
        let wanted = match (&lower, from) {
            (Some(lo), Some(_)) => w.clone().gt_eq(lit(lo.clone())),
            _ => above.clone(),
        };
        let read = scan.filter(wanted)?;
        let schema = std::sync::Arc::new(read.schema().as_arrow().clone());
        let batches = read.collect().await?;
        let table = datafusion::datasource::MemTable::try_new(schema, vec![batches])?;
        scan = session.ctx().read_table(Arc::new(table))?;
        rows_df = scan.clone().filter(above.clone())?;
    }
    let mut window = Window::default();
    if let (Some(lo), Some(s)) = (&lower, from)
        && !unchanged
        && !ties_unchanged(r, lookback, &lower, from, files.as_deref())
    {
        if !r.merge_keys.is_empty() {
            // An upsert is idempotent: re-apply the window, so each key ends at its latest
            // row. The window rows the target lacks say whether the window holds anything
            // new: a run with none commits nothing.
            rows_df = scan.clone().filter(w.clone().gt_eq(lit(lo.clone())))?;
        }
        window = missing_in_window(session, r, &scan, lo, s).await?;
    }
    let stats = match &files {
        Some(files)
            if !unchanged
                && r.merge_keys.is_empty()
                && r.source.plans_by_file(&r.wm_type)?
                // Files named by absolute paths (a shallow clone's) are read as the table
                // reads them, never copied whole.
                && files.iter().all(|f| !whole_file::absolute(&f.add.path)) =>
        {
            Some(whole_file::plan(
                files,
                r.source.root(),
                &r.wm,
                &r.wm_type,
                from,
            ))
        }
        _ => None,
    };
    let counted = if unchanged {
        Some((None, 0))
    } else {
        match &stats {
            Some(fp) => counted_from_statistics(session, r, fp, &above, from).await?,
            None => None,
        }
    };
    let (new_max, above_rows) = match counted {
        Some(counted) => counted,
        None => max_and_count(scan.clone().filter(above.clone())?, &w).await?,
    };
    let new_mark = new_max.or_else(|| from.cloned());
    let rows = above_rows + window.rows;
    let mark_files = match (&files, &new_mark) {
        (Some(files), Some(m)) if r.merge_keys.is_empty() => {
            whole_file::files_holding(files, m).filter(|f| f.len() <= 64)
        }
        _ => None,
    };
    let strategy = strategy(session, r, rows, stats)?;
    Ok(CopyPlan {
        strategy,
        rows,
        new_mark,
        null_rows,
        window: window.batches,
        rows_df,
        above,
        mark_files,
        seen: None,
    })
}

/// Whether a source read once streams into the target: a plain append (no keys, nothing to
/// check or compute, no new columns), so its rows need not be known before they are written.
fn streams(r: &Resolved) -> Result<bool> {
    Ok(r.merge_keys.is_empty()
        && !r.new_columns
        && match &r.target {
            Some(t) => plain_appends(t)?,
            None => true,
        })
}

/// The plan of a source read once that streams: one query for the rows above the start,
/// counted and their largest watermark found as the writer reads them (see [`Seen`]); the
/// window's rows, all at or below the start, from a query of their own.
async fn streamed(
    session: &Session,
    r: &Resolved,
    scan: DataFrame,
    rows_df: DataFrame,
    start: Start,
    null_rows: i64,
) -> Result<CopyPlan> {
    let window = match (&start.lower, &start.from) {
        (Some(lo), Some(s)) => missing_in_window(session, r, &scan, lo, s).await?,
        _ => Window::default(),
    };
    let seen = Arc::new(Seen::new(&r.wm_type)?);
    let index = rows_df
        .schema()
        .index_of_column_by_name(None, &r.wm)
        .ok_or_else(|| crate::error::Error::Other(format!("no column {}", r.wm)))?;
    let watcher = seen.clone();
    let rows_df = crate::engine::functions::watched(rows_df, index, move |v, n| watcher.see(v, n))?;
    Ok(CopyPlan {
        strategy: Strategy::Append,
        rows: window.rows,
        new_mark: start.from,
        null_rows,
        window: window.batches,
        rows_df,
        above: start.above,
        mark_files: None,
        seen: Some(seen),
    })
}

/// Where a run starts: its start point, the bottom of its window, and "above the start".
struct Start {
    from: Option<ScalarValue>,
    lower: Option<ScalarValue>,
    above: DfExpr,
}

/// The bottom of the window of rows at the start point that may be missing from the target:
/// LOOKBACK below the start, else the start itself when it is a mark some run reached.
async fn lower_bound(
    session: &Session,
    r: &Resolved,
    start: &StartPoint,
    lookback: Option<&datafusion::sql::sqlparser::ast::Expr>,
) -> Result<Option<ScalarValue>> {
    Ok(match (start.value(), lookback) {
        (Some(s), Some(l)) => {
            let v = session.eval_scalar(l).await?;
            let lowered = session
                .eval_expr(lit(s.clone()) - lit(v))
                .await
                .map_err(|e| {
                    e.context(format!(
                        "LOOKBACK {l} does not apply to a {} watermark",
                        type_name(&r.wm_type)
                    ))
                })?;
            Some(super::control::convert(&lowered, &r.wm_type, "LOOKBACK")?)
        }
        (Some(s), None) if start.is_a_mark() => Some(s.clone()),
        _ => None,
    })
}

/// Ties: rows at the mark can only be missing from the target if a file that may hold the
/// mark is new since the run that recorded it (files never change; deletion vectors are
/// excluded). Then the window query is skipped.
fn ties_unchanged(
    r: &Resolved,
    lookback: Option<&datafusion::sql::sqlparser::ast::Expr>,
    lower: &Option<ScalarValue>,
    from: Option<&ScalarValue>,
    files: Option<&[SourceFile]>,
) -> bool {
    r.merge_keys.is_empty()
        && r.since.is_none()
        && lookback.is_none()
        && lower.as_ref() == from
        && match (files, from, &r.last) {
            (Some(files), Some(s), Some(last)) if last.mark.as_ref() == Some(s) => {
                match (&last.mark_files, whole_file::files_holding(files, s)) {
                    (Some(before), Some(now)) => now.iter().all(|p| before.contains(p)),
                    _ => false,
                }
            }
            _ => false,
        }
}

/// The window's rows the target lacks.
#[derive(Default)]
struct Window {
    batches: Vec<RecordBatch>,
    rows: i64,
}

/// The source rows in `[lo, s]` that the target does not hold (as multisets: a row the source
/// has twice and the target once is missing once).
async fn missing_in_window(
    session: &Session,
    r: &Resolved,
    scan: &DataFrame,
    lo: &ScalarValue,
    s: &ScalarValue,
) -> Result<Window> {
    let w = wm_col(&r.wm);
    let in_window = w
        .clone()
        .gt_eq(lit(lo.clone()))
        .and(w.lt_eq(lit(s.clone())));
    let Some(t) = &r.target else {
        if r.merge_keys.is_empty() {
            return Ok(Window::default());
        }
        // A new target lacks every window row the upsert applies: all are new.
        let rows = scan.clone().filter(in_window)?.count().await? as i64;
        return Ok(Window {
            batches: vec![],
            rows,
        });
    };
    let source_columns = crate::statements::column_names(r.source.schema.fields());
    let tdf = session
        .ctx()
        .read_table(crate::catalog::provider_for(t).await?)?
        .filter(in_window.clone())?;
    let tcols = crate::statements::column_names(tdf.schema().fields());
    let proj: Vec<DfExpr> = source_columns
        .iter()
        .map(|c| match tcols.iter().find(|t| t.eq_ignore_ascii_case(c)) {
            Some(t) => col(Column::from_name(t)).alias(c),
            None => lit(ScalarValue::Null).alias(c),
        })
        .collect();
    // The target stores an empty string in a STRING partition column as NULL: compare the
    // source's window as the target holds it.
    let sdf = crate::engine::types::empty_strings_as_null_df(
        storable(scan.clone().filter(in_window)?)?,
        &crate::catalog::string_partition_columns(t)?,
    )?;
    let cast_as_source: Vec<DfExpr> = sdf
        .schema()
        .fields()
        .iter()
        .map(|f| {
            datafusion::prelude::cast(col(Column::from_name(f.name())), f.data_type().clone())
                .alias(f.name())
        })
        .collect();
    let tdf = tdf.select(proj)?.select(cast_as_source)?;
    let batches = multiset_minus(sdf, tdf, &source_columns)?.collect().await?;
    let rows = batches.iter().map(|b| b.num_rows() as i64).sum();
    Ok(Window { batches, rows })
}

/// (new mark, rows above the start) from the files' statistics and footers; None when the
/// rows themselves must say.
async fn counted_from_statistics(
    session: &Session,
    r: &Resolved,
    fp: &FilePlan,
    above: &DfExpr,
    from: Option<&ScalarValue>,
) -> Result<Option<(Option<ScalarValue>, i64)>> {
    let decoded = if fp.decode.is_empty() {
        0
    } else {
        let paths: Vec<String> = fp.decode.iter().map(|f| f.add.path.clone()).collect();
        let rows = r.source.files_df(session, paths).await?;
        rows.filter(above.clone())?.count().await? as i64
    };
    let candidates = fp.max_candidates();
    // Footers: files on the local file system, ranged reads on a store.
    let footers = match (r.source.root(), r.source.delta()) {
        (Some(root), _) => whole_file::footer_max(root, &candidates, &r.wm, &r.wm_type),
        (None, Some(t)) => whole_file::store_footer_max(t, &candidates, &r.wm, &r.wm_type).await,
        (None, None) => None,
    };
    let best = match footers {
        // The largest watermark overall is the largest above the start, if above it.
        Some(m) => m.filter(|m| from.is_none_or(|s| m > s)),
        None => {
            let paths = candidates.iter().map(|f| f.add.path.clone()).collect();
            let candidates = r.source.files_df(session, paths).await?;
            max_and_count(candidates.filter(above.clone())?, &wm_col(&r.wm))
                .await?
                .0
        }
    };
    Ok(match (best, fp.whole_rows() + decoded) {
        // Statistics that count no row where a footer holds one above the start disagree
        // with the data: the rows themselves decide.
        (Some(_), 0) => None,
        counted => Some(counted),
    })
}

/// The strategy for `rows` new rows.
fn strategy(
    session: &Session,
    r: &Resolved,
    rows: i64,
    stats: Option<FilePlan>,
) -> Result<Strategy> {
    if rows == 0 && r.target.is_some() {
        return Ok(Strategy::NothingNew);
    }
    if !r.merge_keys.is_empty() {
        return Ok(Strategy::Upsert);
    }
    // Whole files are committed as they are when the target reads them as they are: files
    // committed whole are never checked, so only into targets with nothing to check or compute
    // (CHECK constraints, invariants, defaults). A partitioned target takes files of one
    // partition value each, placed by it; the source's files mix them.
    let takes_files_whole = |t: &deltalake::DeltaTable| -> Result<bool> {
        let Some(stored) = r.source.stored_schema()? else {
            return Ok(false);
        };
        Ok(
            reads_files_as_they_are(&crate::statements::table::arrow_schema(t)?, &stored)
                && plain_appends(t)?
                && t.snapshot()?.metadata().partition_columns().is_empty(),
        )
    };
    // Links and local copies when both tables are on the local file system; copies by the
    // store itself within one store; a stream of each file's bytes between stores.
    if let Some(fp) = stats
        && session.settings().whole_files
        && !r.new_columns
        && match &r.target {
            Some(t) => takes_files_whole(t)?,
            None => true,
        }
    {
        return Ok(Strategy::WholeFiles(fp));
    }
    let plain = match &r.target {
        Some(t) => plain_appends(t)?,
        // A target the copy creates has nothing to check.
        None => true,
    };
    Ok(if !r.new_columns && plain {
        Strategy::Append
    } else {
        Strategy::CheckedAppend {
            merge_schema: r.new_columns,
        }
    })
}

pub(super) fn wm_col(name: &str) -> DfExpr {
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
