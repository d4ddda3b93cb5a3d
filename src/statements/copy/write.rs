//! Step 3 of a copy: write the planned rows, one function per [`Strategy`]. tidemark's own
//! writers (whole files, plain appends) return new files for the commit step to commit;
//! delta-rs' writer and MERGE commit themselves, with the run's commit properties.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::Column;
use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::{Expr as DfExpr, ExprFunctionExt, col, lit};
use deltalake::DeltaTable;
use deltalake::kernel::Add;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::protocol::SaveMode;

use super::encoding::{self, DecodeSettings};
use super::plan::{CopyPlan, Strategy, wm_col};
use super::resolve::Resolved;
use super::uncommitted::Uncommitted;
use super::whole_file::{self, FilePlan};
use crate::engine::Session;
use crate::engine::progress::CopyProgress;
use crate::engine::types::{empty_strings_as_null_df, empty_strings_as_null_in};
use crate::error::{Error, Result};
use crate::statements::table::{storable, with_target_columns};
use crate::statements::upkeep;

/// What a writer leaves for the commit step.
pub(super) enum Written {
    /// New files of the target, not committed yet.
    Files(Vec<Add>),
    /// Committed already (delta-rs' writer and MERGE commit as they write).
    Committed(DeltaTable),
}

/// Where and how a copy writes.
pub(super) struct Destination<'a> {
    /// The target, its object store noting the files written (see [`Uncommitted`]).
    pub table: DeltaTable,
    pub uncommitted: &'a Uncommitted,
    pub props: &'a CommitProperties,
    pub progress: &'a CopyProgress,
}

/// Write `plan`'s rows into `to`.
pub(super) async fn write(
    session: &Session,
    r: &Resolved,
    plan: &CopyPlan,
    to: &Destination<'_>,
) -> Result<Written> {
    // Empty strings in the target's STRING partition columns are stored as NULL (see
    // `catalog::string_partition_columns`).
    let partitions = crate::catalog::string_partition_columns(&to.table)?;
    let window = plan
        .window
        .iter()
        .map(|b| empty_strings_as_null_in(b, &partitions))
        .collect::<Result<Vec<_>>>()?;
    let rows = || empty_strings_as_null_df(storable(plan.rows_df.clone())?, &partitions);
    Ok(match &plan.strategy {
        Strategy::NothingNew => Written::Files(vec![]),
        Strategy::WholeFiles(files) => {
            Written::Files(whole_files(session, r, plan, files, &window, to).await?)
        }
        Strategy::Append => {
            let settings = decode_settings(session, r, &to.table);
            let adds = write_partitioned(&to.table, Some(rows()?), &window, settings, to.progress);
            Written::Files(adds.await?)
        }
        Strategy::CheckedAppend { merge_schema } => {
            let mut input = storable(plan.rows_df.clone())?;
            if !window.is_empty() {
                input = input.union(session.ctx().read_batches(window)?)?;
            }
            let input = with_target_columns(session, input, &to.table).await?;
            let input = empty_strings_as_null_df(input, &partitions)?;
            Written::Committed(checked_append(session, r, input, *merge_schema, to).await?)
        }
        Strategy::Upsert => Written::Committed(upsert(session, r, rows()?, to).await?),
    })
}

/// Link the whole files into the target, decode the straddling ones: the files to commit.
async fn whole_files(
    session: &Session,
    r: &Resolved,
    plan: &CopyPlan,
    files: &FilePlan,
    window: &[RecordBatch],
    to: &Destination<'_>,
) -> Result<Vec<Add>> {
    let Some(source) = r.source.delta() else {
        return Err(Error::Other(format!(
            "{} has no files to copy whole",
            r.names.source
        )));
    };
    let inexact = crate::catalog::inexact_stats_columns(source)?;
    let mut adds = match (r.source.root(), r.names.target_dir.as_deref()) {
        (Some(source_root), Some(target_root)) => whole_file::link_files(
            source_root,
            target_root,
            &files.whole,
            session.settings().hard_links,
            &inexact,
        )?,
        _ => whole_file::copy_objects(source, &to.table, &files.whole, &inexact).await?,
    };
    for add in &adds {
        to.uncommitted.note(&add.path);
    }
    to.progress.inc(files.whole_rows() as u64);
    let decoded = if files.decode.is_empty() {
        None
    } else {
        let paths: Vec<String> = files.decode.iter().map(|f| f.add.path.clone()).collect();
        let rows = r.source.files_df(session, paths).await?;
        Some(rows.filter(plan.above.clone())?)
    };
    adds.extend(write_partitioned(&to.table, decoded, window, None, to.progress).await?);
    Ok(adds)
}

/// How decoded rows are read and encoded for a Delta source (samples a source file).
fn decode_settings(session: &Session, r: &Resolved, target: &DeltaTable) -> Option<DecodeSettings> {
    let (source, root) = (r.source.delta()?, r.source.root()?);
    Some(encoding::decode_settings(
        source,
        target,
        root,
        session.settings().delta_encoding,
    ))
}

/// Append through delta-rs' writer, which checks constraints and computes columns.
async fn checked_append(
    session: &Session,
    r: &Resolved,
    input: DataFrame,
    merge_schema: bool,
    to: &Destination<'_>,
) -> Result<DeltaTable> {
    // delta-rs runs this write: count its rows as they pass.
    let input = crate::engine::functions::counted(input, to.progress.counter())?;
    let settings = decode_settings(session, r, &to.table);
    let state = session.ctx().state();
    let state = match &settings {
        Some(s) => datafusion::execution::SessionStateBuilder::new_from_existing(state.clone())
            .with_config(state.config().clone().with_batch_size(s.batch_rows))
            .build(),
        None => state,
    };
    let mut write = to
        .table
        .clone()
        .write(vec![])
        .with_input_plan(input.into_unoptimized_plan())
        .with_session_state(Arc::new(state))
        .with_save_mode(SaveMode::Append)
        .with_table_name(r.names.target.table.clone());
    if merge_schema {
        write = write.with_schema_mode(deltalake::operations::write::SchemaMode::Merge);
    }
    if let Some(s) = settings {
        write = write.with_writer_properties(s.writer);
    }
    Ok(upkeep::commit(write, to.props.clone()).await?)
}

/// MERGE the latest source row of each key into the target.
async fn upsert(
    session: &Session,
    r: &Resolved,
    rows: DataFrame,
    to: &Destination<'_>,
) -> Result<DeltaTable> {
    let t = to.table.clone();
    let rewritable = crate::statements::rewrite::applies(&t)?;
    crate::catalog::refuse_logged_empty_partitions(
        &t,
        &r.names.target.to_string(),
        "MERGE",
        rewritable,
    )?;
    let input = latest_per_key(rows, &r.merge_keys, &r.wm)?;
    // Matched rows take the source's columns; inserted rows also the target's own, as their
    // DEFAULT or NULL.
    let updated = crate::statements::column_names(input.schema().fields());
    let input = with_target_columns(session, input, &t).await?;
    let inserted = crate::statements::column_names(input.schema().fields());
    let on = r
        .merge_keys
        .iter()
        .map(|k| col(Column::new(Some("target"), k)).eq(col(Column::new(Some("source"), k))))
        .reduce(DfExpr::and)
        .expect("at least one key");
    // Tests hold a MERGE ON copy here while another writer commits.
    fail::fail_point!("copy::before_merge");
    let merge = t
        .merge(input, on)
        .with_source_alias("source")
        .with_target_alias("target")
        .with_session_state(Arc::new(session.ctx().state()))
        .when_matched_update(|mut u| {
            for c in &updated {
                u = u.update(c.as_str(), col(Column::new(Some("source"), c)));
            }
            u
        })?
        .when_not_matched_insert(|mut i| {
            for c in &inserted {
                i = i.set(c.as_str(), col(Column::new(Some("source"), c)));
            }
            i
        })?;
    // As UPDATE and DELETE: never over another commit; a conflict reruns the whole copy on the
    // new state (`concurrency::a_merge_copy_never_*`).
    let props = to.props.clone().with_max_retries(0);
    let (t, _) = upkeep::commit(merge, props).await?;
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

/// Write a query's rows (and extra batches) as new files of `target`, one writer per partition
/// of the plan so that decoding and encoding use every core. Returns the files, uncommitted.
async fn write_partitioned(
    target: &DeltaTable,
    rows: Option<DataFrame>,
    extra: &[RecordBatch],
    settings: Option<DecodeSettings>,
    progress: &CopyProgress,
) -> Result<Vec<Add>> {
    let writer = || -> Result<deltalake::writer::RecordBatchWriter> {
        let w = deltalake::writer::RecordBatchWriter::for_table(target)?;
        Ok(match &settings {
            Some(s) => w.with_writer_properties(s.writer.clone()),
            None => w,
        })
    };
    let batch_rows = settings.as_ref().map(|s| s.batch_rows);
    crate::statements::writer::write_with(writer, rows, extra, batch_rows, None, progress).await
}
