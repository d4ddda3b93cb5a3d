//! `table_changes('t', start [, end])`: a table's change data feed (`delta.enableChangeDataFeed`)
//! between two versions or timestamps, inclusive, with Databricks' `_change_type`,
//! `_commit_version` and `_commit_timestamp` columns. Read by delta-rs' change-data scan,
//! registered for the statement like a pinned version.

use std::sync::Arc;

use datafusion::catalog::{Session as EngineSession, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::TableType;
use datafusion::logical_expr::{Expr as EngineExpr, TableProviderFilterPushDown};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::union::UnionExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, Ident, TableAlias, TableFactor,
};
use deltalake::delta_datafusion::DeltaCdfTableProvider;

use crate::catalog::{SCRATCH, TableName, quote_ident, split_qualified};
use crate::engine::Session;
use crate::engine::types::{timestamp_utc, type_name};
use crate::error::{Error, Result};

/// The built-in's name.
pub(crate) const TABLE_CHANGES: &str = "table_changes";

/// Where a range of changes starts or ends.
enum Bound {
    Version(u64),
    Timestamp(chrono::DateTime<chrono::Utc>),
}

impl Session {
    /// The call's provider, registered under a scratch name; returns the FROM item reading
    /// it and the name (dropped with the statement's other pinned snapshots).
    pub(crate) async fn table_changes(
        &self,
        args: Vec<FunctionArg>,
        alias: Option<TableAlias>,
    ) -> Result<(TableFactor, String)> {
        let exprs: Vec<Expr> = args
            .into_iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
                other => Err(Error::Invalid(format!(
                    "table_changes takes ('table', start [, end]), found argument {other}"
                ))),
            })
            .collect::<Result<_>>()?;
        let (name, start, end) = match exprs.as_slice() {
            [t, s] => (t, s, None),
            [t, s, e] => (t, s, Some(e)),
            _ => {
                return Err(Error::class(
                    "WRONG_NUM_ARGS",
                    "table_changes takes ('table', start [, end]): a table name, and versions or timestamps",
                ));
            }
        };
        let table = match self.eval_scalar(name).await? {
            ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => s,
            other => {
                return Err(Error::Type(format!(
                    "table_changes: the first argument names the table as a STRING, found {other}"
                )));
            }
        };
        let table = TableName::resolve(&split_qualified(&table)?, &self.catalog, &self.schema)?;
        if !self.warehouse.table_exists(&table) {
            return Err(self.warehouse.missing_table_error(&table));
        }
        let t = self.warehouse.open(&table).await?;
        let latest = t.version().unwrap_or(0) as u64;
        let start = self.change_bound(start, "start").await?;
        let end = match end {
            Some(e) => Some(self.change_bound(e, "end").await?),
            None => None,
        };
        let enabled = |config: &std::collections::HashMap<String, String>| {
            config
                .get("delta.enableChangeDataFeed")
                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        };
        let snapshot = t.snapshot()?;
        if !enabled(snapshot.metadata().configuration()) {
            return Err(Error::Invalid(format!(
                "table_changes: {table} does not record its changes; record them from now on with ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')"
            )));
        }
        let mut builder = t.clone().scan_cdf();
        match &start {
            Bound::Version(v) => {
                if *v > latest {
                    return Err(Error::NotFound(format!(
                        "table_changes: {table} has no version {v} (versions 0 to {latest})"
                    )));
                }
                let mut at_start = t.clone();
                at_start.load_version(*v).await?;
                if !enabled(at_start.snapshot()?.metadata().configuration()) {
                    return Err(Error::Invalid(format!(
                        "table_changes: {table} did not record its changes at version {v} (DESCRIBE HISTORY {table} shows when delta.enableChangeDataFeed was set)"
                    )));
                }
                builder = builder.with_starting_version(*v);
            }
            Bound::Timestamp(ts) => builder = builder.with_starting_timestamp(*ts),
        }
        match end {
            Some(Bound::Version(v)) if v > latest => {
                return Err(Error::NotFound(format!(
                    "table_changes: {table} has no version {v} (versions 0 to {latest})"
                )));
            }
            Some(Bound::Version(v)) => builder = builder.with_ending_version(v),
            Some(Bound::Timestamp(ts)) => builder = builder.with_ending_timestamp(ts),
            None => {}
        }
        let provider = DeltaCdfTableProvider::try_new(builder)
            .map_err(|e| Error::from(e).context(format!("table_changes({table})")))?;
        let columns: Vec<String> = provider
            .schema()
            .fields()
            .iter()
            .map(|f| match f.name().as_str() {
                // The commit's time as a TIMESTAMP, like every other instant tidemark shows.
                "_commit_timestamp" => {
                    "CAST(_commit_timestamp AS TIMESTAMP(6) WITH TIME ZONE) AS _commit_timestamp"
                        .to_string()
                }
                other => quote_ident(other),
            })
            .collect();
        let scratch = format!("changes_{}", uuid::Uuid::new_v4().simple());
        self.catalogs
            .scratch_schema()
            .register_table(scratch.clone(), Arc::new(Changes(provider)))?;
        let query = crate::parser::query_text(&format!(
            "SELECT {} FROM {SCRATCH}.pinned.{scratch}",
            columns.join(", ")
        ))?;
        let factor = TableFactor::Derived {
            lateral: false,
            subquery: Box::new(query),
            alias: Some(alias.unwrap_or(TableAlias {
                explicit: true,
                name: Ident::new(TABLE_CHANGES),
                columns: vec![],
                at: None,
            })),
            sample: None,
        };
        Ok((factor, scratch))
    }

    /// A version (an integer) or a timestamp (a TIMESTAMP, DATE or string).
    async fn change_bound(&self, e: &Expr, which: &str) -> Result<Bound> {
        let value = self.eval_scalar(e).await?;
        let bad = || {
            Error::Type(format!(
                "table_changes: the {which} is a version (BIGINT) or a TIMESTAMP, found a {} value ({value})",
                type_name(&value.data_type())
            ))
        };
        if value.is_null() {
            return Err(bad());
        }
        if value.data_type().is_integer() {
            let v = value.cast_to(&datafusion::arrow::datatypes::DataType::Int64)?;
            return match v {
                ScalarValue::Int64(Some(v)) if v >= 0 => Ok(Bound::Version(v as u64)),
                _ => Err(bad()),
            };
        }
        let value = crate::engine::zone::scalar_for(
            value.clone(),
            &timestamp_utc(),
            self.ctx().copied_config().options(),
        );
        match value.cast_to(&timestamp_utc()) {
            Ok(ScalarValue::TimestampMicrosecond(Some(us), _)) => {
                chrono::DateTime::from_timestamp_micros(us)
                    .map(Bound::Timestamp)
                    .ok_or_else(bad)
            }
            _ => Err(bad()),
        }
    }
}

/// delta-rs' change-data scan without the empty inputs its union can hold: a file group
/// list with no partitions breaks the engine's sort planning (`ORDER BY` failed its
/// distribution check).
#[derive(Debug)]
struct Changes(DeltaCdfTableProvider);

#[async_trait::async_trait]
impl TableProvider for Changes {
    fn schema(&self) -> datafusion::arrow::datatypes::SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        session: &dyn EngineSession,
        projection: Option<&Vec<usize>>,
        filters: &[EngineExpr],
        limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        let plan = self.0.scan(session, projection, filters, limit).await?;
        let schema = plan.schema();
        let plan = plan
            .transform_up(|p| {
                let Some(union) = p.downcast_ref::<UnionExec>() else {
                    return Ok(Transformed::no(p));
                };
                let kept: Vec<Arc<dyn ExecutionPlan>> = union
                    .inputs()
                    .iter()
                    .filter(|c| c.output_partitioning().partition_count() > 0)
                    .cloned()
                    .collect();
                if kept.len() == union.inputs().len() {
                    return Ok(Transformed::no(p));
                }
                if kept.is_empty() {
                    return Ok(Transformed::yes(Arc::new(EmptyExec::new(p.schema()))));
                }
                Ok(Transformed::yes(UnionExec::try_new(kept)?))
            })?
            .data;
        if plan.output_partitioning().partition_count() == 0 {
            return Ok(Arc::new(EmptyExec::new(schema)));
        }
        Ok(plan)
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&EngineExpr],
    ) -> datafusion::error::Result<Vec<TableProviderFilterPushDown>> {
        self.0.supports_filters_pushdown(filters)
    }
}
