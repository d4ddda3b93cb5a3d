//! UPDATE and DELETE by rewriting the files that hold matching rows, through tidemark's own
//! reader and writer: the rows are read as every other statement reads them (an empty
//! partition value is NULL, deletion vectors applied) and written in the table's own types.
//! delta-rs' UPDATE and DELETE read the matched files through a scan that turns strings into
//! string views and write those types into the new files' Arrow schema, where Python's
//! `deltalake` then cannot filter them. NOT NULL and CHECK constraints are checked on the
//! rows as they are written. Tables whose writes must compute values or check invariants
//! (generated columns, `delta.invariants`), column-mapped tables and tables with a change
//! data feed keep delta-rs' own path, which handles those.
//!
//! A rewrite commits only on the table state it read: any commit in between (another
//! UPDATE, an OPTIMIZE, an append) makes it a conflict, run again on the new state.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::common::Column;
use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::Expr as DfExpr;
use datafusion::prelude::{col, lit, when};
use deltalake::DeltaTable;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{Action, LogicalFileView};
use deltalake::protocol::DeltaOperation;

use super::writer::VIOLATION_COLUMN;
use crate::engine::Session;
use crate::engine::progress::CopyProgress;
use crate::error::{Error, Result};

/// The synthetic column naming each row's file in the matching scan.
const FILE_COLUMN: &str = "__tidemark_file";

/// What a rewrite does to the rows that match.
pub enum Change {
    /// Set these columns (already cast to their types) to these values.
    Update(Vec<(String, DfExpr)>),
    Delete,
}

/// Whether tidemark rewrites this table's files itself (see the module documentation).
pub fn applies(t: &DeltaTable) -> Result<bool> {
    Ok(kept_on_delta_rs(t)?.is_none())
}

/// Why a table keeps delta-rs' own write path, if it does.
pub fn kept_on_delta_rs(t: &DeltaTable) -> Result<Option<&'static str>> {
    let snapshot = t.snapshot()?;
    let config = snapshot.metadata().configuration();
    if config
        .get("delta.enableChangeDataFeed")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Ok(Some("a change data feed"));
    }
    if config
        .get("delta.columnMapping.mode")
        .is_some_and(|m| !m.eq_ignore_ascii_case("none"))
    {
        return Ok(Some("column mapping"));
    }
    // Nested fields too: the schema as the log writes it.
    let schema = serde_json::to_string(snapshot.schema().as_ref()).unwrap_or_default();
    if schema.contains(&format!("\"{}\"", super::ddl::GENERATION_KEY)) {
        return Ok(Some("generated columns"));
    }
    if schema.contains("\"delta.invariants\"") {
        return Ok(Some("column invariants"));
    }
    Ok(None)
}

/// How a rewrite lays out the rows it writes: sorted by these columns and cut into files of
/// at most this many rows. A small table updated a few rows at a time (a control table) then
/// has files that each cover a narrow range of the sort key, so that the next rewrite reads
/// and writes only the files its rows are in (file skipping on the key's statistics), not
/// the whole table.
pub struct Layout {
    pub sort_by: Vec<String>,
    pub rows_per_file: usize,
}

/// Rewrite the files of `t` holding rows that match `predicate` (all rows without one),
/// applying `change`, in one Delta commit. Returns the new table state (None when nothing
/// matched and nothing was committed) and the number of rows changed.
pub async fn rewrite(
    session: &Session,
    t: &DeltaTable,
    predicate: Option<DfExpr>,
    change: Change,
) -> Result<(Option<DeltaTable>, u64)> {
    rewrite_laid_out(session, t, predicate, change, None).await
}

/// [`rewrite`], writing the rows as `layout` says (as they come when None).
pub async fn rewrite_laid_out(
    session: &Session,
    t: &DeltaTable,
    predicate: Option<DfExpr>,
    change: Change,
    layout: Option<&Layout>,
) -> Result<(Option<DeltaTable>, u64)> {
    let matched = matching_files(session, t, predicate.as_ref()).await?;
    let changed: u64 = matched.iter().map(|m| m.rows).sum();
    if changed == 0 {
        return Ok((None, 0));
    }
    let snapshot = t.snapshot()?;
    let root = scan_root(t);
    let mut removes = vec![];
    let mut found = std::collections::HashSet::new();
    for file in snapshot.log_data().iter() {
        let path = format!("{}/{}", root.trim_end_matches('/'), file.path());
        if matched.iter().any(|m| m.decoded == path) {
            removes.push(Action::Remove(file.remove_action(true)));
            found.insert(path);
        }
    }
    if removes.len() != matched.len() {
        let missing = matched
            .iter()
            .find(|m| !found.contains(&m.decoded))
            .map_or("", |m| m.decoded.as_str());
        return Err(Error::Other(format!(
            "{} files hold matching rows but {} of them are in the table's log (not in it: \
             {missing}; the table's root: {root})",
            matched.len(),
            removes.len(),
        )));
    }
    let hit = match &predicate {
        Some(p) => p.clone().is_true(),
        None => lit(true),
    };
    // The matched files, by the very URLs the scan named them with.
    let provider = t
        .table_provider()
        .with_file_paths(matched.iter().map(|m| m.url.clone()))
        .with_session(crate::catalog::copy_scan_settings())
        .await?;
    let rows = session
        .ctx()
        .read_table(crate::catalog::exact_reads(t, provider)?)?;
    let rows = match &change {
        Change::Delete => rows.filter(datafusion::prelude::not(hit))?,
        Change::Update(sets) => {
            let exprs = rows
                .schema()
                .fields()
                .iter()
                .map(|f| {
                    let keep = col(Column::from_name(f.name()));
                    Ok(match sets.iter().find(|(c, _)| c == f.name()) {
                        Some((_, value)) => when(hit.clone(), value.clone())
                            .otherwise(keep)?
                            .alias(f.name()),
                        None => keep,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            rows.select(exprs)?
        }
    };
    let set: Vec<&str> = match &change {
        Change::Update(sets) => sets.iter().map(|(c, _)| c.as_str()).collect(),
        Change::Delete => vec![],
    };
    let rows = with_violations(session, t, rows, &set)?;
    let progress = CopyProgress::start(None, "", 0);
    let writer = || Ok(deltalake::writer::RecordBatchWriter::for_table(t)?);
    let adds = match layout {
        None => super::writer::write_with(writer, Some(rows), &[], None, None, &progress).await?,
        Some(layout) => {
            let order = layout
                .sort_by
                .iter()
                .map(|c| col(Column::from_name(c)).sort(true, true))
                .collect();
            let batches = rows.sort(order)?.collect().await?;
            for batch in &batches {
                super::writer::stop_on_violation(batch)?;
            }
            write_in_files(t, &batches, layout.rows_per_file).await?
        }
    };
    let predicate = match &predicate {
        Some(p) => Some(deltalake::delta_datafusion::expr::fmt_expr_to_sql(p)?),
        None => None,
    };
    let kind = match change {
        Change::Delete => Kind::Delete,
        Change::Update(_) => Kind::Update,
    };
    let t = commit_rewrite(t, adds, removes, changed, kind, predicate).await?;
    Ok((Some(t), changed))
}

/// What a rewrite's commit records it did.
#[derive(Clone, Copy)]
enum Kind {
    Update,
    Delete,
}

/// Write `batches` (sorted as they are to be laid out) into files of at most `rows_per_file`
/// rows each, uncommitted. No rows, no file.
async fn write_in_files(
    t: &DeltaTable,
    batches: &[RecordBatch],
    rows_per_file: usize,
) -> Result<Vec<deltalake::kernel::Add>> {
    let Some(first) = batches.first() else {
        return Ok(vec![]);
    };
    let progress = CopyProgress::start(None, "", 0);
    let writer = || Ok(deltalake::writer::RecordBatchWriter::for_table(t)?);
    let all = datafusion::arrow::compute::concat_batches(&first.schema(), batches)?;
    let step = rows_per_file.max(1);
    let mut adds = vec![];
    for start in (0..all.num_rows()).step_by(step) {
        let part = all.slice(start, step.min(all.num_rows() - start));
        adds.extend(super::writer::write_with(writer, None, &[part], None, None, &progress).await?);
    }
    Ok(adds)
}

/// Commit a rewrite: the new files added, the files they replace removed, on the very state
/// that was read (see [`no_commit_between`]).
async fn commit_rewrite(
    t: &DeltaTable,
    adds: Vec<deltalake::kernel::Add>,
    removes: Vec<Action>,
    changed: u64,
    kind: Kind,
    predicate: Option<String>,
) -> Result<DeltaTable> {
    let (actions, operation, metrics) = described(kind, adds, removes, changed, predicate);
    // Tests hold a rewrite here while another writer commits.
    fail::fail_point!("rewrite::before_commit");
    let props = no_commit_between(metrics);
    Ok(super::upkeep::commit_actions(t, actions, operation, props).await?)
}

/// A rewrite's commit: its actions, its operation and the operation metrics it records.
fn described(
    kind: Kind,
    adds: Vec<deltalake::kernel::Add>,
    removes: Vec<Action>,
    changed: u64,
    predicate: Option<String>,
) -> (Vec<Action>, DeltaOperation, serde_json::Value) {
    let metrics = serde_json::json!({
        match kind { Kind::Delete => "num_deleted_rows", Kind::Update => "num_updated_rows" }: changed,
        "num_added_files": adds.len(),
        "num_removed_files": removes.len(),
    });
    let mut actions: Vec<Action> = adds.into_iter().map(Action::Add).collect();
    actions.extend(removes);
    let operation = match kind {
        Kind::Delete => DeltaOperation::Delete { predicate },
        Kind::Update => DeltaOperation::Update { predicate },
    };
    (actions, operation, metrics)
}

/// The log file of an UPDATE that `done` is, read at `read_version` (its `commitInfo`
/// records what [`commit_rewrite`]'s does), for a writer that puts it at the next version
/// itself.
pub fn update_commit(
    done: Rewritten,
    predicate: String,
    read_version: u64,
) -> Result<bytes::Bytes> {
    let (actions, operation, metrics) = described(
        Kind::Update,
        done.adds,
        done.removes,
        done.changed,
        Some(predicate),
    );
    let info = HashMap::from([
        ("operationMetrics".to_string(), metrics),
        ("readVersion".to_string(), serde_json::json!(read_version)),
        ("isBlindAppend".to_string(), serde_json::json!(false)),
    ]);
    deltalake::kernel::transaction::CommitData::new(actions, operation, info, vec![])
        .get_bytes()
        .map_err(|e| Error::from(deltalake::DeltaTableError::from(e)))
}

/// A change worked out in Rust, row by row, instead of planned as a query: for rewrites too
/// small and frequent for planning (a job's advances of its control rows, a few dozen a
/// commit, cost more to plan and evaluate as one CASE than the rest of their copies did).
pub trait RowChange: Sync {
    /// Whether a file may hold rows the change touches, by the file's statistics: a file it
    /// says no to is neither read nor rewritten.
    fn may_touch(&self, file: &LogicalFileView) -> bool;
    /// A batch of a file's rows as they are to be written and how many of them changed;
    /// None when none did.
    fn apply(&self, rows: &RecordBatch) -> Result<Option<(RecordBatch, u64)>>;
}

/// Apply `change` to the rows of `t` (an UPDATE), rewriting only the files whose rows
/// change, laid out as `layout` says, in one commit. Returns the new table state (None when
/// no row changed and nothing was committed) and the number of rows changed. For a table
/// [`applies`] to and without CHECK constraints ([`has_checks`]): NOT NULL is checked here.
/// `predicate` says which rows the change is for, as SQL, for the commit's record.
pub async fn rewrite_rows(
    session: &Session,
    t: &DeltaTable,
    change: &impl RowChange,
    predicate: String,
    layout: &Layout,
) -> Result<(Option<DeltaTable>, u64)> {
    let snapshot = t.snapshot()?;
    let root = scan_root(t);
    let candidates: Vec<(String, LogicalFileView)> = snapshot
        .log_data()
        .iter()
        .filter(|f| change.may_touch(f))
        .map(|f| (format!("{}/{}", root.trim_end_matches('/'), f.path()), f))
        .collect();
    if candidates.is_empty() {
        return Ok((None, 0));
    }
    let provider = t
        .table_provider()
        .with_file_column(FILE_COLUMN)
        .with_file_paths(
            candidates
                .iter()
                .map(|(_, f)| f.object_store_path().to_string()),
        )
        .with_session(crate::catalog::copy_scan_settings())
        .await?;
    let provider = crate::catalog::exact_reads(t, provider)?;
    // Each file's rows, by the file's path as the log has it.
    let mut per_file: HashMap<String, Vec<RecordBatch>> = HashMap::new();
    for mut batch in session.ctx().read_table(provider)?.collect().await? {
        let at = batch.schema().index_of(FILE_COLUMN)?;
        let files = datafusion::arrow::compute::cast(
            batch.column(at),
            &datafusion::arrow::datatypes::DataType::Utf8,
        )?;
        batch.remove_column(at);
        let files = files.as_string::<i32>();
        let mut names: Vec<&str> = vec![];
        for i in 0..files.len() {
            if files.is_null(i) {
                return Err(Error::Other(format!(
                    "a row of {root} was read without the name of its file"
                )));
            }
            if !names.contains(&files.value(i)) {
                names.push(files.value(i));
            }
        }
        let one = names.len() == 1;
        for name in names {
            let rows = if one {
                batch.clone()
            } else {
                let mask = datafusion::arrow::compute::kernels::cmp::eq(
                    files,
                    &datafusion::arrow::array::StringArray::new_scalar(name),
                )?;
                datafusion::arrow::compute::filter_record_batch(&batch, &mask)?
            };
            let url =
                url::Url::parse(name).map_err(|e| Error::Other(format!("file {name}: {e}")))?;
            per_file.entry(decoded(url.path())).or_default().push(rows);
        }
    }
    let mut files = Vec::with_capacity(candidates.len());
    for (path, file) in &candidates {
        // No row of a file that is not here is live (all deleted): nothing of it changes.
        if let Some(batches) = per_file.remove(path) {
            files.push((file.remove_action(true), batches));
        }
    }
    if let Some(path) = per_file.keys().next() {
        return Err(Error::Other(format!(
            "the scan read rows of {path}, a file the rewrite did not choose (the table's \
             root: {root})"
        )));
    }
    let Some(done) = rewrite_files(t, change, files, layout).await? else {
        return Ok((None, 0));
    };
    let changed = done.changed;
    let t = commit_rewrite(
        t,
        done.adds,
        done.removes,
        changed,
        Kind::Update,
        Some(predicate),
    )
    .await?;
    Ok((Some(t), changed))
}

/// The files a [`RowChange`] writes in place of the files whose rows it changes, not yet
/// committed.
pub struct Rewritten {
    pub adds: Vec<deltalake::kernel::Add>,
    pub removes: Vec<Action>,
    /// Rows changed.
    pub changed: u64,
}

/// Apply `change` to `files` (each one's remove action and its live rows) and write the rows
/// of the files where some row changes into new files of `t`, laid out as `layout` says,
/// checking NOT NULL; None when no row changed. Nothing is committed.
pub async fn rewrite_files(
    t: &DeltaTable,
    change: &impl RowChange,
    files: Vec<(deltalake::kernel::Remove, Vec<RecordBatch>)>,
    layout: &Layout,
) -> Result<Option<Rewritten>> {
    let mut removes = vec![];
    let mut written = vec![];
    let mut changed = 0;
    for (remove, batches) in files {
        let mut rows = Vec::with_capacity(batches.len());
        let mut in_file = 0;
        for batch in batches {
            match change.apply(&batch)? {
                Some((new, n)) => {
                    in_file += n;
                    rows.push(new);
                }
                None => rows.push(batch),
            }
        }
        if in_file > 0 {
            changed += in_file;
            removes.push(Action::Remove(remove));
            written.extend(rows);
        }
    }
    if changed == 0 {
        return Ok(None);
    }
    for field in t.snapshot()?.schema().fields() {
        if !field.is_nullable()
            && written.iter().any(|b| {
                b.column_by_name(field.name())
                    .is_some_and(|c| c.null_count() > 0)
            })
        {
            return Err(Error::Invalid(format!(
                "column '{}' is NOT NULL but an updated row sets it to NULL; nothing was written",
                field.name()
            )));
        }
    }
    let sorted = sorted_by(&written, &layout.sort_by)?;
    let adds = write_in_files(t, &[sorted], layout.rows_per_file).await?;
    Ok(Some(Rewritten {
        adds,
        removes,
        changed,
    }))
}

/// `batches` as one, sorted by `columns` (ascending, NULL first, as the laid-out rewrite
/// sorts).
fn sorted_by(batches: &[RecordBatch], columns: &[String]) -> Result<RecordBatch> {
    use datafusion::arrow::compute::{
        SortColumn, SortOptions, lexsort_to_indices, take_record_batch,
    };
    let schema = batches
        .first()
        .map(|b| b.schema())
        .ok_or_else(|| Error::Other("nothing to sort".into()))?;
    let all = datafusion::arrow::compute::concat_batches(&schema, batches)?;
    let keys = columns
        .iter()
        .map(|c| {
            Ok(SortColumn {
                values: all.column(all.schema().index_of(c)?).clone(),
                options: Some(SortOptions {
                    descending: false,
                    nulls_first: true,
                }),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if keys.is_empty() {
        return Ok(all);
    }
    let order = lexsort_to_indices(&keys, None)?;
    Ok(take_record_batch(&all, &order)?)
}

/// Whether `t` has CHECK constraints (which [`rewrite_rows`] does not evaluate).
pub fn has_checks(t: &DeltaTable) -> Result<bool> {
    Ok(t.snapshot()?
        .metadata()
        .configuration()
        .keys()
        .any(|k| k.starts_with("delta.constraints.")))
}

/// One file holding matching rows: its URL as the scan names it, decoded, and how many.
struct Matched {
    url: String,
    decoded: String,
    rows: u64,
}

/// The files of `t` holding rows that match `predicate` (all rows without one).
async fn matching_files(
    session: &Session,
    t: &DeltaTable,
    predicate: Option<&DfExpr>,
) -> Result<Vec<Matched>> {
    let provider = t
        .table_provider()
        .with_file_column(FILE_COLUMN)
        .with_session(crate::catalog::copy_scan_settings())
        .await?;
    let provider = crate::catalog::exact_reads(t, provider)?;
    let mut df = session.ctx().read_table(provider)?;
    if let Some(p) = predicate {
        df = df.filter(p.clone())?;
    }
    let file = col(Column::from_name(FILE_COLUMN));
    let df = df.aggregate(
        vec![
            datafusion::prelude::cast(file, datafusion::arrow::datatypes::DataType::Utf8)
                .alias("file"),
        ],
        vec![datafusion::functions_aggregate::count::count_all().alias("n")],
    )?;
    let mut found = vec![];
    for batch in df.collect().await? {
        let files = batch.column(0).as_string::<i32>();
        let counts = batch.column(1).as_primitive::<Int64Type>();
        for i in 0..batch.num_rows() {
            if files.is_valid(i) {
                let url = files.value(i).to_string();
                let parsed =
                    url::Url::parse(&url).map_err(|e| Error::Other(format!("file {url}: {e}")))?;
                found.push(Matched {
                    decoded: decoded(parsed.path()),
                    url,
                    rows: counts.value(i) as u64,
                });
            }
        }
    }
    Ok(found)
}

/// Commit properties for a rewrite: it read the whole state of the files it replaces, so
/// any commit that lands between its read and its own makes it fail as a conflict (run
/// again on the new state), rather than being let through by delta-rs' conflict checker,
/// which does not see an OPTIMIZE's removes, nor any added file when there is no predicate.
fn no_commit_between(metrics: serde_json::Value) -> CommitProperties {
    super::upkeep::never_over_another().with_metadata([("operationMetrics".to_string(), metrics)])
}

/// `rows` with [`VIOLATION_COLUMN`]: for a row that breaks a rule, which rule (a NOT NULL
/// column among `set` holding NULL, or a CHECK constraint of `t` that is not true: false or
/// NULL, as Delta's writers and this process's appends check it), else NULL. Computed in the same evaluation as the values
/// written, so `SET x = random()` is checked on the values it writes.
fn with_violations(
    session: &Session,
    t: &DeltaTable,
    rows: DataFrame,
    set: &[&str],
) -> Result<DataFrame> {
    let snapshot = t.snapshot()?;
    let mut rules: Vec<(DfExpr, String)> = vec![];
    for field in snapshot.schema().fields() {
        if !field.is_nullable() && set.contains(&field.name().as_str()) {
            rules.push((
                col(Column::from_name(field.name())).is_null(),
                format!(
                    "column '{}' is NOT NULL but an updated row sets it to NULL",
                    field.name()
                ),
            ));
        }
    }
    let mut constraints: Vec<(String, String)> = snapshot
        .metadata()
        .configuration()
        .iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix("delta.constraints.")?;
            Some((name.to_string(), v.clone()))
        })
        .collect();
    constraints.sort();
    for (name, sql) in constraints {
        let check = session
            .ctx()
            .state()
            .create_logical_expr(&sql, rows.schema())?;
        rules.push((
            check.is_not_true(),
            format!("CHECK constraint {name} ({sql}) is violated by a row of the result"),
        ));
    }
    let Some(((first, first_rule), rest)) = rules.split_first() else {
        return Ok(rows);
    };
    let mut which = when(first.clone(), lit(first_rule.clone()));
    for (rule, text) in rest {
        which = which.when(rule.clone(), lit(text.clone()));
    }
    let which = which.otherwise(lit(datafusion::common::ScalarValue::Utf8(None)))?;
    Ok(rows.with_column(VIOLATION_COLUMN, which)?)
}

/// The table's root as its scan names files: a local table's directory with its symbolic
/// links resolved (a warehouse reached through a link, `/data -> /mnt/disk`), else the path of
/// its URL.
fn scan_root(t: &DeltaTable) -> String {
    let url = t.log_store().root_url().clone();
    let real = url
        .to_file_path()
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .and_then(|p| url::Url::from_directory_path(p).ok());
    decoded(real.as_ref().unwrap_or(&url).path())
}

fn decoded(path: &str) -> String {
    percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned()
}

/// `ALTER TABLE t ADD COLUMN ... DEFAULT` on a table with rows, in one commit: the new schema,
/// and every file rewritten with the new columns filled by `values` (expressions of the
/// columns' types, by name). A reader never sees the columns without their values.
pub async fn add_columns_with_values(
    session: &Session,
    t: &DeltaTable,
    fields: Vec<deltalake::kernel::StructField>,
    arrow_fields: Vec<datafusion::arrow::datatypes::Field>,
    values: Vec<(String, DfExpr)>,
) -> Result<DeltaTable> {
    use deltalake::kernel::MetadataExt;
    let snapshot = t.snapshot()?;
    let refuse = |why: &str| {
        Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "ALTER TABLE ... ADD COLUMN ... DEFAULT on a table with rows and {why} is not \
                 supported; nothing was changed. Add the column without DEFAULT, then fill it \
                 with UPDATE"
            ),
        )
    };
    if let Some(why) = kept_on_delta_rs(t)? {
        return Err(refuse(why));
    }
    // A new TIMESTAMP_NTZ column needs the table feature, which only delta-rs' own ADD
    // COLUMN adds to the protocol.
    let ntz = |f: &datafusion::arrow::datatypes::Field| {
        format!("{:?}", f.data_type()).contains("Timestamp(Microsecond, None)")
    };
    if arrow_fields.iter().any(ntz) {
        let features = snapshot.protocol().writer_features();
        let has = features.is_some_and(|f| {
            f.iter()
                .any(|x| x.to_string().eq_ignore_ascii_case("timestampNtz"))
        });
        if !has {
            return Err(refuse("a new TIMESTAMP_NTZ column"));
        }
    }
    let schema = deltalake::kernel::StructType::try_new(
        snapshot.schema().fields().cloned().chain(fields.clone()),
    )
    .map_err(|e| Error::Invalid(format!("the new schema: {e}")))?;
    let metadata = (snapshot.metadata().clone().with_schema(&schema))
        .map_err(|e| Error::Invalid(format!("the new schema: {e}")))?;
    let partitions = metadata.partition_columns().to_vec();
    let config = metadata.configuration().clone();
    let mut arrow = super::table::arrow_schema(t)?.fields().to_vec();
    arrow.extend(arrow_fields.into_iter().map(Arc::new));
    let arrow = Arc::new(datafusion::arrow::datatypes::Schema::new(arrow));

    let provider = crate::catalog::copy_source_provider(t).await?;
    let rows = session.ctx().read_table(provider)?;
    let mut exprs: Vec<DfExpr> = rows
        .schema()
        .fields()
        .iter()
        .map(|f| col(Column::from_name(f.name())))
        .collect();
    exprs.extend(values.into_iter().map(|(name, e)| e.alias(name)));
    let rows = rows.select(exprs)?;

    let url = t.log_store().root_url().to_string();
    let writer = || {
        Ok(deltalake::writer::RecordBatchWriter::try_new(
            &url,
            arrow.clone(),
            Some(partitions.clone()),
            None,
        )?)
    };
    let progress = CopyProgress::start(None, "", 0);
    let adds = super::writer::write_with(writer, Some(rows), &[], None, None, &progress).await?;
    let indexed = stats_columns(&config, &schema, &partitions);
    let mut actions: Vec<Action> = vec![Action::Metadata(metadata)];
    let removes: Vec<Action> = snapshot
        .log_data()
        .iter()
        .map(|f| Action::Remove(f.remove_action(true)))
        .collect();
    let metrics = serde_json::json!({
        "num_added_files": adds.len(),
        "num_removed_files": removes.len(),
    });
    for mut add in adds {
        add.stats = (add.stats).map(|s| {
            crate::catalog::filter_column_stats(&s, |c| indexed.contains(&c.to_lowercase()))
        });
        actions.push(Action::Add(add));
    }
    actions.extend(removes);
    let operation = DeltaOperation::AddColumn { fields };
    let props = no_commit_between(metrics);
    Ok(super::upkeep::commit_actions(t, actions, operation, props).await?)
}

/// The columns whose statistics the table's settings ask writers for (the writer used for a
/// new schema collects its own default set): `delta.dataSkippingStatsColumns`, or else the
/// first `delta.dataSkippingNumIndexedCols` (32 unless set; -1 for all) non-partition columns.
fn stats_columns(
    config: &HashMap<String, String>,
    schema: &deltalake::kernel::StructType,
    partitions: &[String],
) -> Vec<String> {
    if let Some(list) = config.get("delta.dataSkippingStatsColumns") {
        return crate::catalog::stats_column_roots(list);
    }
    let n = config
        .get("delta.dataSkippingNumIndexedCols")
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(32);
    let columns = schema
        .fields()
        .map(|f| f.name().to_lowercase())
        .filter(|c| !partitions.iter().any(|p| p.eq_ignore_ascii_case(c)));
    if n < 0 {
        columns.collect()
    } else {
        columns.take(n as usize).collect()
    }
}
