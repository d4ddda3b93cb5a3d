//! The session time zone (`SET TIME ZONE`), as Databricks applies it: a TIMESTAMP is an
//! instant, read from text and shown, truncated and taken apart in the session's zone.
//!
//! The zone is DataFusion's `execution.time_zone`: TIMESTAMP literals and casts, `now()` and
//! `to_timestamp` carry it as their Arrow time zone, and Arrow's kernels (`hour`, `CAST(ts AS
//! DATE)`, `date_trunc`, ...) compute in the zone of their input. Delta tables store UTC, so
//! [`SessionZone`] relabels the TIMESTAMP columns of every scan to the session's zone before
//! the plan is typed: the same instants (a relabel changes no value), now in the session's
//! zone. Under UTC, the default, nothing changes.

use std::str::FromStr;
use std::sync::Arc;

use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::DFSchema;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::expr::{Cast, TryCast};
use datafusion::logical_expr::{
    Expr, ExprSchemable, LogicalPlan, Projection, cast, projection_schema,
};
use datafusion::optimizer::AnalyzerRule;

use crate::error::{Error, Result};

/// The zone name DataFusion is given for a zone a user names: `UTC` for every spelling of
/// UTC, `+hh:mm` for offsets (Java's `GMT+1`, `UTC-08:00`, its short ids `EST`...), else an
/// IANA name (`America/Los_Angeles`). An unknown zone is an error naming it.
pub fn normalize(zone: &str) -> Result<String> {
    let trimmed = zone.trim();
    let named = crate::engine::spark::java_zone(trimmed).unwrap_or_else(|| trimmed.to_string());
    if is_utc(&named) {
        return Ok("UTC".into());
    }
    match Tz::from_str(&named) {
        Ok(_) => Ok(named),
        Err(_) => Err(Error::class(
            "INVALID_CONF_VALUE",
            format!(
                "'{zone}' is not a time zone: name a region ('America/Los_Angeles', \
                 'Europe/Berlin'), an offset ('+05:30', 'GMT-8') or 'UTC'"
            ),
        )),
    }
}

/// The machine's zone for `SET TIME ZONE LOCAL`: `TZ`, else the system's
/// (`/etc/timezone`, the target of `/etc/localtime`), else UTC.
pub fn local() -> String {
    let from_env = std::env::var("TZ")
        .ok()
        .map(|z| z.trim_start_matches(':').to_string());
    let from_file = || {
        std::fs::read_to_string("/etc/timezone")
            .ok()
            .map(|s| s.trim().to_string())
    };
    let from_link = || {
        std::fs::read_link("/etc/localtime").ok().and_then(|p| {
            let p = p.to_string_lossy().to_string();
            p.split_once("zoneinfo/").map(|(_, z)| z.to_string())
        })
    };
    [from_env, from_file(), from_link()]
        .into_iter()
        .flatten()
        .find_map(|z| normalize(&z).ok())
        .unwrap_or_else(|| "UTC".into())
}

/// Whether a zone name is UTC (or an offset of zero).
pub fn is_utc(zone: &str) -> bool {
    matches!(
        zone.trim().to_lowercase().as_str(),
        "utc"
            | "etc/utc"
            | "gmt"
            | "etc/gmt"
            | "z"
            | "zulu"
            | "universal"
            | "etc/universal"
            | "uct"
            | "etc/uct"
            | "+00:00"
            | "-00:00"
            | "+00"
            | "utc+0"
            | "gmt+0"
            | "utc+00:00"
            | "gmt+00:00"
    )
}

/// The session's zone when it is not UTC (None: UTC, nothing to relabel).
pub fn session_zone(config: &ConfigOptions) -> Option<Arc<str>> {
    config
        .execution
        .time_zone
        .as_deref()
        .filter(|z| !is_utc(z))
        .map(Arc::from)
}

/// `t` with every zoned timestamp in it (nested ones too) in `zone`; None when nothing in it
/// changes.
pub fn relabeled(t: &DataType, zone: &Arc<str>) -> Option<DataType> {
    match t {
        DataType::Timestamp(unit, Some(z)) if z != zone => {
            Some(DataType::Timestamp(*unit, Some(zone.clone())))
        }
        DataType::List(f) => relabeled_field(f, zone).map(DataType::List),
        DataType::LargeList(f) => relabeled_field(f, zone).map(DataType::LargeList),
        DataType::FixedSizeList(f, n) => {
            relabeled_field(f, zone).map(|f| DataType::FixedSizeList(f, *n))
        }
        DataType::Map(f, sorted) => relabeled_field(f, zone).map(|f| DataType::Map(f, *sorted)),
        DataType::Struct(fields) => {
            let new: Vec<Option<FieldRef>> =
                fields.iter().map(|f| relabeled_field(f, zone)).collect();
            if new.iter().all(Option::is_none) {
                return None;
            }
            Some(DataType::Struct(
                new.into_iter()
                    .zip(fields.iter())
                    .map(|(n, f)| n.unwrap_or_else(|| f.clone()))
                    .collect(),
            ))
        }
        _ => None,
    }
}

fn relabeled_field(f: &FieldRef, zone: &Arc<str>) -> Option<FieldRef> {
    relabeled(f.data_type(), zone).map(|t| Arc::new(Field::clone(f).with_data_type(t)) as FieldRef)
}

/// The analyzer rule that puts every scan's TIMESTAMP columns in the session's zone (see
/// the module's documentation). It runs first, before types are coerced.
#[derive(Debug, Default)]
pub struct SessionZone;

impl AnalyzerRule for SessionZone {
    fn analyze(
        &self,
        plan: LogicalPlan,
        config: &ConfigOptions,
    ) -> datafusion::common::Result<LogicalPlan> {
        let Some(zone) = session_zone(config) else {
            return Ok(plan);
        };
        let mut any = false;
        plan.apply_with_subqueries(|node| {
            if let LogicalPlan::TableScan(scan) = node {
                any |= scan
                    .projected_schema
                    .fields()
                    .iter()
                    .any(|f| relabeled(f.data_type(), &zone).is_some());
            }
            node.apply_expressions(|e| {
                e.apply(|e| {
                    any |= to_ntz(e).is_some();
                    Ok(TreeNodeRecursion::Continue)
                })
            })?;
            Ok(TreeNodeRecursion::Continue)
        })?;
        if !any {
            return Ok(plan);
        }
        plan.transform_up_with_subqueries(|node| {
            if let LogicalPlan::TableScan(scan) = &node {
                let schema = scan.projected_schema.clone();
                if !schema
                    .fields()
                    .iter()
                    .any(|f| relabeled(f.data_type(), &zone).is_some())
                {
                    return Ok(Transformed::no(node));
                }
                let exprs = schema
                    .iter()
                    .map(|(qualifier, field)| {
                        let column = Expr::Column(datafusion::common::Column::new(
                            qualifier.cloned(),
                            field.name(),
                        ));
                        match relabeled(field.data_type(), &zone) {
                            Some(t) => {
                                cast(column, t).alias_qualified(qualifier.cloned(), field.name())
                            }
                            None => column,
                        }
                    })
                    .collect();
                let projection = Projection::try_new(exprs, Arc::new(node))?;
                return Ok(Transformed::yes(LogicalPlan::Projection(projection)));
            }
            let node = local_times(node)?;
            // Above a relabeled scan, types change: the node's schema follows. (A projection
            // keeps the names it was planned with: Spark names `CAST(a AS DATE)` `a`, which
            // `Projection::try_new` would take for a duplicate of `a`.)
            match node {
                LogicalPlan::Projection(Projection { expr, input, .. }) => {
                    let schema = projection_schema(&input, &expr)?;
                    Projection::try_new_with_schema(expr, input, schema)
                        .map(|p| Transformed::yes(LogicalPlan::Projection(p)))
                }
                other => other.recompute_schema().map(Transformed::yes),
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "tidemark_session_zone"
    }
}

/// A cast to a zone-less timestamp (TIMESTAMP_NTZ): the expression cast and the unit.
fn to_ntz(e: &Expr) -> Option<(&Expr, datafusion::arrow::datatypes::TimeUnit)> {
    let (expr, field) = match e {
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => (expr, field),
        _ => return None,
    };
    match field.data_type() {
        DataType::Timestamp(unit, None) => Some((expr, *unit)),
        _ => None,
    }
}

/// `node` with its casts of zoned timestamps to TIMESTAMP_NTZ taking the wall-clock time in
/// the zone (Spark's cast; the engine's keeps the time UTC reads).
fn local_times(node: LogicalPlan) -> datafusion::common::Result<LogicalPlan> {
    let mut schema = DFSchema::empty();
    for input in node.inputs() {
        schema.merge(input.schema());
    }
    // An output expression keeps its name (the nodes above refer to it by name).
    let outputs = matches!(
        node,
        LogicalPlan::Projection(_) | LogicalPlan::Aggregate(_) | LogicalPlan::Window(_)
    );
    node.map_expressions(|e| {
        let name = e.qualified_name();
        let t = e.transform_up(|e| {
            let Some((inner, unit)) = to_ntz(&e) else {
                return Ok(Transformed::no(e));
            };
            match inner.get_type(&schema) {
                Ok(DataType::Timestamp(_, Some(_))) => {
                    let local = datafusion::functions::datetime::expr_fn::to_local_time(vec![
                        inner.clone(),
                    ]);
                    Ok(Transformed::yes(cast(
                        local,
                        DataType::Timestamp(unit, None),
                    )))
                }
                _ => Ok(Transformed::no(e)),
            }
        })?;
        if outputs && t.transformed && t.data.qualified_name() != name {
            return Ok(t.update_data(|e| e.alias_qualified(name.0, name.1)));
        }
        Ok(t)
    })
    .map(|t| t.data)
}
