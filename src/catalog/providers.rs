//! How a table is read: the DataFusion providers wrapped where delta-rs' own reading would give
//! a wrong answer (empty partition strings, DECIMAL statistics logged through float64, a LIMIT
//! its metadata-only scan ignores), and the settings a copy's source scan uses.

use super::*;
use crate::error::{Error, Result};
use datafusion::arrow::datatypes::DataType;
use datafusion::catalog::TableProvider;
use deltalake::DeltaTable;
use std::sync::Arc;

/// Open a table and build its DataFusion provider.
pub async fn provider_for(table: &DeltaTable) -> Result<Arc<dyn TableProvider>> {
    let provider: Arc<dyn TableProvider> = Arc::new(ExactLimit(table.table_provider().await?));
    exact_reads(table, provider)
}

/// The provider a copy reads its source through: strings come out as the `Utf8` arrays the
/// target's Parquet writer takes, not as string views (faster to filter, but each one would
/// be cast back before it is written). Filters still reach the Parquet reader.
pub async fn copy_source_provider(table: &DeltaTable) -> Result<Arc<dyn TableProvider>> {
    let provider = table
        .table_provider()
        .with_session(copy_scan_settings())
        .await?;
    exact_reads(table, Arc::new(ExactLimit(provider)))
}

/// The provider every read of `table` goes through, wrapped where delta-rs' own reading
/// would give a wrong answer; other tables, the common case, keep their provider as it is.
///
/// - Empty partition values. The Delta protocol reads an empty partition value as NULL, for
///   every type ("An empty string for any type translates to a null partition value");
///   Python's deltalake, Spark and Sail do, and other writers log `""` (tidemark writes
///   NULL). delta-rs reads it as `''`. Such STRING partition columns come out through
///   `NULLIF(col, '')`, and filters on them are applied above the scan (its partition pruning
///   would take `''` for a value).
/// - Decimal statistics. delta-rs-based writers (Python's deltalake, polars) log DECIMAL
///   statistics through float64: `9007199254740993.00` as `9007199254740994.0`, so file
///   skipping on a DECIMAL wider than 15 digits can drop the file holding the row. Filters on
///   such columns are applied above the scan, unless the table's
///   `delta.dataSkippingStatsColumns` leaves them out (as tables tidemark creates do).
pub fn exact_reads(
    table: &DeltaTable,
    provider: Arc<dyn TableProvider>,
) -> Result<Arc<dyn TableProvider>> {
    let provider: Arc<dyn TableProvider> = if provider.is::<ExactLimit>() {
        provider
    } else {
        Arc::new(ExactLimit(provider))
    };
    let empty = logged_empty_partitions(table)?;
    let mut above = empty.clone();
    above.extend(inexact_stats_columns(table)?);
    above.extend(nan_columns(table)?);
    if above.is_empty() {
        return Ok(provider);
    }
    Ok(Arc::new(ExactReads {
        inner: provider,
        empty,
        above,
    }))
}

/// The STRING partition columns for which some file of `table` logs an empty string (which
/// the protocol reads as NULL; tidemark itself logs NULL).
pub fn logged_empty_partitions(table: &DeltaTable) -> Result<Vec<String>> {
    let mut empty: Vec<String> = vec![];
    let string_partitions = string_partition_columns(table)?;
    if string_partitions.is_empty() {
        return Ok(empty);
    }
    for file in table.snapshot()?.log_data().iter() {
        for (k, v) in file.partition_values_map() {
            if v.as_deref() == Some("") && string_partitions.contains(&k) && !empty.contains(&k) {
                empty.push(k);
            }
        }
        if empty.len() == string_partitions.len() {
            break;
        }
    }
    Ok(empty)
}

/// Refuse a write that runs on delta-rs' own scan of `table` (MERGE, and UPDATE/DELETE of
/// tables tidemark does not rewrite itself) when the table logs empty partition strings:
/// that scan reads them as `''` where every other read gives NULL, so its conditions would
/// match other rows. One UPDATE stores them as NULL (tidemark's own rewrite reads them so).
pub fn refuse_logged_empty_partitions(
    table: &DeltaTable,
    name: &str,
    statement: &str,
    rewritable: bool,
) -> Result<()> {
    let empty = logged_empty_partitions(table)?;
    let Some(first) = empty.first() else {
        return Ok(());
    };
    let q = quote_ident(first);
    let way_out = if rewritable {
        format!(
            "Store them as NULL once with `UPDATE {name} SET {q} = NULL WHERE {q} IS NULL`, \
             then run the {statement} again"
        )
    } else {
        "tidemark cannot rewrite this kind of table itself; have the writer that logged them \
         store NULL"
            .to_string()
    };
    Err(Error::Invalid(format!(
        "{statement} on {name}: its log holds empty strings as values of partition column(s) {} \
         (another writer's; the Delta protocol reads them as NULL, and the engine {statement} \
         runs on would read them as ''); nothing was changed. {way_out}",
        empty.join(", ")
    )))
}

/// The DECIMAL columns wider than 15 digits whose file statistics may have been written
/// through float64 (see [`exact_reads`]): all of them, unless the table's
/// `delta.dataSkippingStatsColumns` leaves them out.
pub fn inexact_stats_columns(table: &DeltaTable) -> Result<Vec<String>> {
    let snapshot = table.snapshot()?;
    let listed: Option<Vec<String>> = snapshot
        .metadata()
        .configuration()
        .get("delta.dataSkippingStatsColumns")
        .map(|v| stats_column_roots(v));
    let schema = snapshot.snapshot().arrow_schema();
    Ok(schema
        .fields()
        .iter()
        .filter(|f| {
            crate::engine::types::has_wide_decimal(f.data_type())
                && listed
                    .as_ref()
                    .is_none_or(|l| l.contains(&f.name().to_lowercase()))
        })
        .map(|f| f.name().clone())
        .collect())
}

/// The FLOAT and DOUBLE columns of `table`: delta-rs' writers (tidemark's, Python
/// `deltalake`, polars) leave NaN out of their logged bounds, so a file of 1.5 and NaN says
/// its values lie in [1.5, 1.5] and would be skipped for `x > 2` (NaN is above every number in
/// Spark). Filters on them are applied above the scan, without skipping files.
fn nan_columns(table: &DeltaTable) -> Result<Vec<String>> {
    Ok(table
        .snapshot()?
        .snapshot()
        .arrow_schema()
        .fields()
        .iter()
        .filter(|f| f.data_type().is_floating())
        .map(|f| f.name().clone())
        .collect())
}

/// The top-level columns a `delta.dataSkippingStatsColumns` list names, lower-cased: entries
/// are comma-separated paths whose parts may be back-quoted (`` `a.b`.c `` is column `a.b`).
pub fn stats_column_roots(list: &str) -> Vec<String> {
    let mut roots = vec![];
    let (mut root, mut in_quotes, mut done) = (String::new(), false, false);
    let mut chars = list.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' if in_quotes && chars.peek() == Some(&'`') => {
                chars.next();
                if !done {
                    root.push('`');
                }
            }
            '`' => in_quotes = !in_quotes,
            ',' if !in_quotes => {
                roots.push(root.trim().to_lowercase());
                (root, done) = (String::new(), false);
            }
            '.' if !in_quotes => done = true,
            c if !done => root.push(c),
            _ => {}
        }
    }
    if !root.trim().is_empty() {
        roots.push(root.trim().to_lowercase());
    }
    roots
}

/// The STRING partition columns of a table. Rows written into one of them store an empty
/// string as NULL, as Spark does: the protocol reads an empty partition value as NULL, and a
/// reader that does not (polars) would otherwise see `''` where others see NULL.
pub fn string_partition_columns(table: &DeltaTable) -> Result<Vec<String>> {
    fn is_string(t: &DataType) -> bool {
        match t {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
            DataType::Dictionary(_, v) => is_string(v),
            _ => false,
        }
    }
    let snapshot = table.snapshot()?;
    let schema = snapshot.snapshot().arrow_schema();
    Ok(snapshot
        .metadata()
        .partition_columns()
        .iter()
        .filter(|c| {
            schema
                .field_with_name(c)
                .is_ok_and(|f| is_string(f.data_type()))
        })
        .cloned()
        .collect())
}

/// A file's statistics (Delta's JSON) with the per-column values kept only for the columns
/// `keep` accepts; statistics that do not parse are returned as they are.
pub fn filter_column_stats(stats: &str, keep: impl Fn(&str) -> bool) -> String {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(stats) else {
        return stats.to_string();
    };
    for key in ["minValues", "maxValues", "nullCount"] {
        if let Some(serde_json::Value::Object(m)) = v.get_mut(key) {
            m.retain(|c, _| keep(c));
        }
    }
    v.to_string()
}

/// A provider whose `empty` columns read `''` as NULL and whose filters on `above` columns
/// are applied above the scan (see [`exact_reads`]).
#[derive(Debug)]
struct ExactReads {
    inner: Arc<dyn TableProvider>,
    empty: Vec<String>,
    above: Vec<String>,
}

impl ExactReads {
    fn touches(&self, e: &datafusion::logical_expr::Expr) -> bool {
        e.column_refs().iter().any(|c| self.above.contains(&c.name))
    }
}

#[async_trait::async_trait]
impl TableProvider for ExactReads {
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
        filters: &[datafusion::logical_expr::Expr],
        limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        use datafusion::logical_expr::{col, lit, when};
        let filters: Vec<_> = filters
            .iter()
            .filter(|f| !self.touches(f))
            .cloned()
            .collect();
        let plan = self.inner.scan(state, projection, &filters, limit).await?;
        let out = plan.schema();
        let df_schema = datafusion::common::DFSchema::try_from(out.as_ref().clone())?;
        let mut exprs = vec![];
        for f in out.fields() {
            let c = col(datafusion::common::Column::from_name(f.name()));
            let e = if self.empty.contains(f.name()) {
                let null = datafusion::common::ScalarValue::try_from(f.data_type())?;
                when(c.clone().eq(lit("")), lit(null)).otherwise(c)?
            } else {
                c
            };
            exprs.push((state.create_physical_expr(e, &df_schema)?, f.name().clone()));
        }
        Ok(Arc::new(
            datafusion::physical_plan::projection::ProjectionExec::try_new(exprs, plan)?,
        ))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&datafusion::logical_expr::Expr],
    ) -> datafusion::error::Result<Vec<datafusion::logical_expr::TableProviderFilterPushDown>> {
        use datafusion::logical_expr::TableProviderFilterPushDown as P;
        let theirs: Vec<&datafusion::logical_expr::Expr> = filters
            .iter()
            .filter(|f| !self.touches(f))
            .copied()
            .collect();
        let mut answers = self.inner.supports_filters_pushdown(&theirs)?.into_iter();
        Ok(filters
            .iter()
            .map(|f| {
                if self.touches(f) {
                    P::Unsupported
                } else {
                    answers.next().unwrap_or(P::Unsupported)
                }
            })
            .collect())
    }

    fn statistics(&self) -> Option<datafusion::common::Statistics> {
        None
    }
}

/// The settings delta-rs takes a copy's scan configuration from (see `copy_source_provider`).
pub fn copy_scan_settings() -> Arc<datafusion::execution::SessionState> {
    let config = datafusion::prelude::SessionConfig::new()
        .set_bool(
            "datafusion.execution.parquet.schema_force_view_types",
            false,
        )
        .set_bool("datafusion.execution.parquet.pushdown_filters", true)
        // Spark's INT96 timestamps read at microseconds, as the session reads them.
        .set_str("datafusion.execution.parquet.coerce_int96", "us");
    Arc::new(
        datafusion::execution::SessionStateBuilder::new()
            .with_config(config)
            .build(),
    )
}

/// Wraps delta-rs' provider where its reading would give a wrong answer, on every table:
///
/// - A pushed-down LIMIT is always honoured: its metadata-only scan (used when no column is
///   read, e.g. `SELECT 1 FROM t LIMIT 1`) ignores `fetch`.
/// - Every filter stays above the scan, which still skips files with it. delta-rs answers a
///   filter that reads only partition columns itself, and the engine then drops it, but
///   delta-rs keeps every file for a filter its pruning cannot read: `a = 2 AND NULL` (what
///   `a NOT IN (1, NULL)` and `b = NULL` become, a filter of no column at all) and
///   `p NOT IN ('a', NULL)` on a partition column returned rows where Databricks returns none,
///   and a volatile filter (`rand() < 0.5`) kept all files or none.
/// - Filters on FLOAT and DOUBLE columns go no further than [`NanSafeScan`].
///
/// The files' column bounds are made inexact for every plan of the session, this scan's
/// included, by [`InexactFileBounds`].
#[derive(Debug)]
struct ExactLimit(Arc<dyn TableProvider>);

/// A scan of a table with FLOAT or DOUBLE columns, under which the engine's plan-time filters
/// on those columns go no further: the Parquet reader skips row groups and pages on bounds
/// that leave NaN out (a row group of 1.5 and NaN says its largest value is 1.5, so
/// `x > 5`, and the dynamic filter of `ORDER BY x DESC LIMIT n`, skipped the NaN, which is
/// above every number in Spark). Filters on other columns pass down as before.
#[derive(Debug)]
struct NanSafeScan {
    scan: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    /// The columns (by position) filters may be pushed below on.
    exact: std::collections::HashSet<usize>,
}

impl NanSafeScan {
    /// `scan` wrapped where its schema has a FLOAT or DOUBLE column.
    fn over(
        scan: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    ) -> Arc<dyn datafusion::physical_plan::ExecutionPlan> {
        let schema = scan.schema();
        if !schema.fields().iter().any(|f| f.data_type().is_floating()) {
            return scan;
        }
        let exact = (0..schema.fields().len())
            .filter(|i| !schema.field(*i).data_type().is_floating())
            .collect();
        Arc::new(NanSafeScan { scan, exact })
    }
}

impl datafusion::physical_plan::DisplayAs for NanSafeScan {
    fn fmt_as(
        &self,
        _: datafusion::physical_plan::DisplayFormatType,
        f: &mut std::fmt::Formatter,
    ) -> std::fmt::Result {
        write!(f, "NanSafeScan")
    }
}

impl datafusion::physical_plan::ExecutionPlan for NanSafeScan {
    fn name(&self) -> &str {
        "NanSafeScan"
    }

    fn properties(&self) -> &Arc<datafusion::physical_plan::PlanProperties> {
        self.scan.properties()
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

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn children(&self) -> Vec<&Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        vec![&self.scan]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
    ) -> datafusion::error::Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        match (children.pop(), children.is_empty()) {
            (Some(scan), true) => Ok(Arc::new(NanSafeScan {
                scan,
                exact: self.exact.clone(),
            })),
            _ => datafusion::common::internal_err!("NanSafeScan has one child"),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<datafusion::execution::TaskContext>,
    ) -> datafusion::error::Result<datafusion::execution::SendableRecordBatchStream> {
        self.scan.execute(partition, context)
    }

    fn child_stats_requests(
        &self,
        partition: Option<usize>,
    ) -> Vec<datafusion::physical_plan::statistics::ChildStats> {
        vec![datafusion::physical_plan::statistics::ChildStats::At(
            partition,
        )]
    }

    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<datafusion::common::Statistics>],
        _args: &datafusion::physical_plan::statistics::StatisticsArgs,
    ) -> datafusion::error::Result<Arc<datafusion::common::Statistics>> {
        Ok(input_stats.first().cloned().unwrap_or_else(|| {
            Arc::new(datafusion::common::Statistics::new_unknown(
                &self.scan.schema(),
            ))
        }))
    }

    fn gather_filters_for_pushdown(
        &self,
        _phase: datafusion::physical_plan::filter_pushdown::FilterPushdownPhase,
        parent_filters: Vec<Arc<dyn datafusion::physical_expr::PhysicalExpr>>,
        _config: &datafusion::config::ConfigOptions,
    ) -> datafusion::error::Result<datafusion::physical_plan::filter_pushdown::FilterDescription>
    {
        use datafusion::physical_plan::filter_pushdown::{
            ChildFilterDescription, FilterDescription,
        };
        Ok(FilterDescription::new().with_child(
            ChildFilterDescription::from_child_with_allowed_indices(
                &parent_filters,
                self.exact.clone(),
                &self.scan,
            )?,
        ))
    }
}

/// [`inexact_file_bounds`] for every plan of a session: delta-rs' own scans too (MERGE's, and
/// UPDATE's and DELETE's of tables it rewrites itself), which read a NaN as the file's bound
/// and wrote that back.
#[derive(Debug)]
pub struct InexactFileBounds;

impl datafusion::physical_optimizer::PhysicalOptimizerRule for InexactFileBounds {
    fn optimize(
        &self,
        plan: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        _config: &datafusion::config::ConfigOptions,
    ) -> datafusion::error::Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        inexact_file_bounds(plan)
    }

    fn name(&self) -> &str {
        "tidemark_inexact_file_bounds"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with every file's column bounds (min and max) marked inexact. The engine's Parquet
/// reader reads a column whose file statistics say min = max with no NULLs as that one value,
/// but a Delta log's statistics are not exact: a `NaN` is left out of a DOUBLE's bounds by
/// delta-rs' writers (a file of 1.5 and NaN read back as 1.5, 1.5 under a filter, and CREATE
/// TABLE AS stored that), DECIMALs logged through float64, strings cut short by Spark. Files
/// are still skipped on them.
fn inexact_file_bounds(
    plan: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) -> datafusion::error::Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
    use datafusion::common::Statistics;
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::datasource::physical_plan::{FileGroup, FileScanConfig};
    use datafusion::datasource::source::DataSourceExec;
    fn loosened(stats: &Statistics) -> Option<Arc<Statistics>> {
        let exact = stats
            .column_statistics
            .iter()
            .any(|c| c.min_value.is_exact() == Some(true) || c.max_value.is_exact() == Some(true));
        if !exact {
            return None;
        }
        let mut stats = stats.clone();
        for c in &mut stats.column_statistics {
            c.min_value = c.min_value.clone().to_inexact();
            c.max_value = c.max_value.clone().to_inexact();
        }
        Some(Arc::new(stats))
    }
    plan.transform_up(|node| {
        let Some(config) = node
            .downcast_ref::<DataSourceExec>()
            .and_then(|e| e.data_source().downcast_ref::<FileScanConfig>())
        else {
            return Ok(Transformed::no(node));
        };
        let mut changed = false;
        let mut config = config.clone();
        config.file_groups = config
            .file_groups
            .iter()
            .map(|group| {
                let files = group
                    .iter()
                    .map(|f| {
                        let mut f = f.clone();
                        if let Some(s) = f.statistics.as_deref().and_then(loosened) {
                            f.statistics = Some(s);
                            changed = true;
                        }
                        f
                    })
                    .collect();
                let loose = FileGroup::new(files);
                match group.file_statistics(None) {
                    Some(s) => {
                        loose.with_statistics(loosened(s).unwrap_or_else(|| Arc::new(s.clone())))
                    }
                    None => loose,
                }
            })
            .collect();
        if !changed {
            return Ok(Transformed::no(node));
        }
        Ok(Transformed::yes(DataSourceExec::from_data_source(config)))
    })
    .map(|t| t.data)
}

#[async_trait::async_trait]
impl TableProvider for ExactLimit {
    fn schema(&self) -> datafusion::arrow::datatypes::SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> datafusion::datasource::TableType {
        self.0.table_type()
    }

    async fn scan(
        &self,
        state: &dyn datafusion::catalog::Session,
        projection: Option<&Vec<usize>>,
        filters: &[datafusion::logical_expr::Expr],
        limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        if projection.is_some_and(|p| p.is_empty()) && !self.0.schema().fields().is_empty() {
            // Read one real column, then drop it: the row count is right, LIMIT included.
            let plan = self.0.scan(state, Some(&vec![0]), filters, limit).await?;
            let empty: Vec<(Arc<dyn datafusion::physical_expr::PhysicalExpr>, String)> = vec![];
            return Ok(Arc::new(
                datafusion::physical_plan::projection::ProjectionExec::try_new(empty, plan)?,
            ));
        }
        Ok(NanSafeScan::over(
            self.0.scan(state, projection, filters, limit).await?,
        ))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&datafusion::logical_expr::Expr],
    ) -> datafusion::error::Result<Vec<datafusion::logical_expr::TableProviderFilterPushDown>> {
        use datafusion::logical_expr::TableProviderFilterPushDown as P;
        Ok(self
            .0
            .supports_filters_pushdown(filters)?
            .into_iter()
            .map(|answer| match answer {
                P::Exact => P::Inexact,
                other => other,
            })
            .collect())
    }

    fn statistics(&self) -> Option<datafusion::common::Statistics> {
        self.0.statistics()
    }
}
