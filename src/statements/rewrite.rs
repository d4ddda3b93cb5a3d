//! UPDATE and DELETE by rewriting the files that hold matching rows, through tidemark's own
//! reader and writer: the rows are read as every other statement reads them (an empty
//! partition value is NULL, deletion vectors applied) and written in the table's own types.
//! delta-rs' UPDATE and DELETE read the matched files through a scan that turns strings into
//! string views and write those types into the new files' Arrow schema, where Python's
//! `deltalake` then cannot filter them. CHECK constraints are checked on the rewritten rows
//! before anything is written. Tables whose writes must compute values or check invariants
//! (generated columns, `delta.invariants`), column-mapped tables and tables with a change
//! data feed keep delta-rs' own path, which handles those.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::common::Column;
use datafusion::logical_expr::Expr as DfExpr;
use datafusion::prelude::{col, lit, when};
use deltalake::DeltaTable;
use deltalake::kernel::Action;
use deltalake::kernel::transaction::CommitBuilder;
use deltalake::protocol::DeltaOperation;

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
    let snapshot = t.snapshot()?;
    let metadata = snapshot.metadata();
    let config = metadata.configuration();
    let cdf = config
        .get("delta.enableChangeDataFeed")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let mapped = config
        .get("delta.columnMapping.mode")
        .is_some_and(|m| !m.eq_ignore_ascii_case("none"));
    let computed = snapshot.schema().fields().any(|f| {
        f.metadata()
            .keys()
            .any(|k| k == "delta.invariants" || k == "delta.generationExpression")
    });
    Ok(!cdf && !mapped && !computed)
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
    let matched = matching_files(session, t, predicate.as_ref()).await?;
    let changed: u64 = matched.values().sum();
    if changed == 0 {
        return Ok((None, 0));
    }
    let snapshot = t.snapshot()?;
    let root = decoded(t.log_store().root_url().path());
    let mut removes = vec![];
    let mut paths = vec![];
    for file in snapshot.log_data().iter() {
        let path = file.path().to_string();
        if matched.contains_key(&format!("{}/{path}", root.trim_end_matches('/'))) {
            removes.push(Action::Remove(file.remove_action(true)));
            paths.push(path);
        }
    }
    if removes.len() != matched.len() {
        return Err(Error::Other(format!(
            "{} files hold matching rows but {} of them are in the table's log",
            matched.len(),
            removes.len()
        )));
    }
    let hit = match &predicate {
        Some(p) => p.clone().is_true(),
        None => lit(true),
    };
    let rows = super::copy_incremental::files_df(session, t, paths).await?;
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
    check_constraints(session, t, &rows, &set).await?;
    let progress = CopyProgress::start(false, "", 0);
    let adds =
        super::copy_incremental::write_partitioned(t, Some(rows), &[], None, &progress).await?;
    let metrics = serde_json::json!({
        match change { Change::Delete => "num_deleted_rows", Change::Update(_) => "num_updated_rows" }: changed,
        "num_added_files": adds.len(),
        "num_removed_files": removes.len(),
    });
    let mut actions: Vec<Action> = adds.into_iter().map(Action::Add).collect();
    actions.extend(removes);
    let predicate = match &predicate {
        Some(p) => Some(deltalake::delta_datafusion::expr::fmt_expr_to_sql(p)?),
        None => None,
    };
    let operation = match change {
        Change::Delete => DeltaOperation::Delete { predicate },
        Change::Update(_) => DeltaOperation::Update { predicate },
    };
    let props = super::upkeep::commit_properties()
        .with_metadata([("operationMetrics".to_string(), metrics)]);
    let finalized = CommitBuilder::from(props)
        .with_actions(actions)
        .build(Some(snapshot), t.log_store(), operation)
        .await?;
    let mut t = t.clone();
    t.state = Some(finalized.snapshot());
    super::upkeep::after_commit(&t).await;
    Ok((Some(t), changed))
}

/// The files of `t` holding rows that match `predicate`, by URL (decoded), with how many.
async fn matching_files(
    session: &Session,
    t: &DeltaTable,
    predicate: Option<&DfExpr>,
) -> Result<HashMap<String, u64>> {
    let provider = t
        .table_provider()
        .with_file_column(FILE_COLUMN)
        .with_session(crate::catalog::copy_scan_settings())
        .await?;
    let provider = crate::catalog::exact_reads(t, provider)?;
    let mut df = session.ctx.read_table(provider)?;
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
    let mut found = HashMap::new();
    for batch in df.collect().await? {
        let files = batch.column(0).as_string::<i32>();
        let counts = batch.column(1).as_primitive::<Int64Type>();
        for i in 0..batch.num_rows() {
            if files.is_valid(i) {
                let url = url::Url::parse(files.value(i))
                    .map_err(|e| Error::Other(format!("file {}: {e}", files.value(i))))?;
                found.insert(decoded(url.path()), counts.value(i) as u64);
            }
        }
    }
    Ok(found)
}

/// The NOT NULL columns among `set` hold no NULL in `rows`, and every CHECK constraint of
/// `t` holds for them (a constraint that is NULL for a row holds, as delta-rs checks appends).
async fn check_constraints(
    session: &Session,
    t: &DeltaTable,
    rows: &datafusion::dataframe::DataFrame,
    set: &[&str],
) -> Result<()> {
    let snapshot = t.snapshot()?;
    for field in snapshot.schema().fields() {
        if field.is_nullable() || !set.contains(&field.name().as_str()) {
            continue;
        }
        let nulls = rows
            .clone()
            .filter(col(Column::from_name(field.name())).is_null())?
            .count()
            .await?;
        if nulls > 0 {
            return Err(Error::Invalid(format!(
                "column '{}' is NOT NULL but {nulls} updated row(s) would set it to NULL; nothing was written",
                field.name()
            )));
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
            .ctx
            .state()
            .create_logical_expr(&sql, rows.schema())?;
        let violated = rows
            .clone()
            .filter(datafusion::prelude::not(check))?
            .count()
            .await?;
        if violated > 0 {
            return Err(Error::Invalid(format!(
                "CHECK constraint {name} ({sql}) is violated by {violated} row(s) of the result; nothing was written"
            )));
        }
    }
    Ok(())
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
    let schema = deltalake::kernel::StructType::try_new(
        snapshot.schema().fields().cloned().chain(fields.clone()),
    )
    .map_err(|e| Error::Invalid(format!("the new schema: {e}")))?;
    let metadata = (snapshot.metadata().clone().with_schema(&schema))
        .map_err(|e| Error::Invalid(format!("the new schema: {e}")))?;
    let partitions = metadata.partition_columns().to_vec();
    let config = metadata.configuration().clone();
    let mut arrow = super::ddl::arrow_schema(t)?.fields().to_vec();
    arrow.extend(arrow_fields.into_iter().map(Arc::new));
    let arrow = Arc::new(datafusion::arrow::datatypes::Schema::new(arrow));

    let provider = crate::catalog::copy_source_provider(t).await?;
    let rows = session.ctx.read_table(provider)?;
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
    let progress = CopyProgress::start(false, "", 0);
    let adds =
        super::copy_incremental::write_with(writer, Some(rows), &[], None, &progress).await?;
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
        add.stats = (add.stats)
            .map(|s| crate::catalog::filter_column_stats(&s, |c| indexed.iter().any(|i| i == c)));
        actions.push(Action::Add(add));
    }
    actions.extend(removes);
    let props = super::upkeep::commit_properties()
        .with_metadata([("operationMetrics".to_string(), metrics)]);
    let finalized = CommitBuilder::from(props)
        .with_actions(actions)
        .build(
            Some(snapshot),
            t.log_store(),
            DeltaOperation::AddColumn { fields },
        )
        .await?;
    let mut t = t.clone();
    t.state = Some(finalized.snapshot());
    super::upkeep::after_commit(&t).await;
    Ok(t)
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
        return list
            .split(',')
            .map(|c| {
                let c = c.trim();
                let top = c.split('.').next().unwrap_or(c);
                top.trim_matches('`').to_string()
            })
            .collect();
    }
    let n = config
        .get("delta.dataSkippingNumIndexedCols")
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(32);
    let columns = schema
        .fields()
        .map(|f| f.name().clone())
        .filter(|c| !partitions.contains(c));
    if n < 0 {
        columns.collect()
    } else {
        columns.take(n as usize).collect()
    }
}
