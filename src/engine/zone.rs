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
    Expr, ExprSchemable, LogicalPlan, Projection, Union, cast, projection_schema, try_cast,
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

/// `value` as the session's zone reads it, when it becomes a timestamp of type `to`: text, a
/// zone-less timestamp or a date bound for a zoned TIMESTAMP (a table's UTC) is first the
/// instant the session's zone names. Anything else, or a value that does not read, is left
/// for the caller's cast (and its error).
pub fn scalar_for(
    value: datafusion::common::ScalarValue,
    to: &DataType,
    config: &ConfigOptions,
) -> datafusion::common::ScalarValue {
    let Some(zone) = session_zone(config) else {
        return value;
    };
    match read_via(&value.data_type(), to, &zone) {
        Some(zoned) => crate::engine::types::cast_value(&value, &zoned).unwrap_or(value),
        None => value,
    }
}

/// The type a value of type `from` is read as first on its way to `to` under the session's
/// zone `zone`: text, a zone-less timestamp or a date bound for a timestamp zoned otherwise
/// (a table's UTC) is the instant the session's zone names. None: it goes to `to` as it is.
pub fn read_via(from: &DataType, to: &DataType, zone: &Arc<str>) -> Option<DataType> {
    let readable = matches!(
        from,
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Timestamp(_, None)
            | DataType::Date32
            | DataType::Date64
    );
    match to {
        DataType::Timestamp(unit, Some(tz)) if readable && tz != zone => {
            Some(DataType::Timestamp(*unit, Some(zone.clone())))
        }
        _ => None,
    }
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

/// Whether a schema has a zoned timestamp that is not in `zone`.
fn relabels(schema: &DFSchema, zone: &Arc<str>) -> bool {
    schema
        .fields()
        .iter()
        .any(|f| relabeled(f.data_type(), zone).is_some())
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
                any |= relabels(&scan.projected_schema, &zone);
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        if !any {
            return Ok(plan);
        }
        plan.transform_up_with_subqueries(|node| {
            if let LogicalPlan::TableScan(scan) = &node {
                let schema = scan.projected_schema.clone();
                if !relabels(&schema, &zone) {
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
            // Above a relabeled scan, types change: the node's schema follows. (A projection
            // keeps the names it was planned with: Spark names `CAST(a AS DATE)` `a`, which
            // `Projection::try_new` would take for a duplicate of `a`.)
            match node {
                LogicalPlan::Projection(Projection { expr, input, .. }) => {
                    let schema = projection_schema(&input, &expr)?;
                    Projection::try_new_with_schema(expr, input, schema)
                        .map(|p| Transformed::yes(LogicalPlan::Projection(p)))
                }
                // (`recompute_schema` keeps a union's schema while its width is the same.)
                LogicalPlan::Union(u) => Union::try_new_with_loose_types(u.inputs)
                    .map(|u| Transformed::yes(LogicalPlan::Union(u))),
                other => other.recompute_schema().map(Transformed::yes),
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "tidemark_session_zone"
    }
}

/// `plan` with `rewrite` applied to every node's expressions (typed against the node's
/// inputs), an output expression (a projection's, an aggregate's, a window's) keeping its
/// name: the nodes above refer to it by name (an aggregate's FILTER is part of its name).
pub(crate) fn rewrite_expressions(
    plan: LogicalPlan,
    mut rewrite: impl FnMut(Expr, &DFSchema) -> datafusion::common::Result<Transformed<Expr>>,
) -> datafusion::common::Result<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| {
        let mut schema = DFSchema::empty();
        for input in node.inputs() {
            schema.merge(input.schema());
        }
        let outputs = matches!(
            node,
            LogicalPlan::Projection(_) | LogicalPlan::Aggregate(_) | LogicalPlan::Window(_)
        );
        let mut named = |e: Expr| {
            let name = e.qualified_name();
            let t = rewrite(e, &schema)?;
            if outputs && t.transformed && t.data.qualified_name() != name {
                return Ok(t.update_data(|e| e.alias_qualified(name.0, name.1)));
            }
            Ok(t)
        };
        node.map_expressions(|e| match e {
            // ROLLUP, CUBE, GROUPING SETS: each grouped expression keeps its name (an alias
            // around the set would make it one grouped value).
            Expr::GroupingSet(set) => {
                use datafusion::common::tree_node::TreeNodeIterator;
                use datafusion::logical_expr::GroupingSet;
                Ok(match set {
                    GroupingSet::Rollup(exprs) => exprs
                        .into_iter()
                        .map_until_stop_and_collect(&mut named)?
                        .update_data(GroupingSet::Rollup),
                    GroupingSet::Cube(exprs) => exprs
                        .into_iter()
                        .map_until_stop_and_collect(&mut named)?
                        .update_data(GroupingSet::Cube),
                    GroupingSet::GroupingSets(sets) => sets
                        .into_iter()
                        .map_until_stop_and_collect(|set| {
                            set.into_iter().map_until_stop_and_collect(&mut named)
                        })?
                        .update_data(GroupingSet::GroupingSets),
                }
                .update_data(Expr::GroupingSet))
            }
            e => named(e),
        })
    })
    .map(|t| t.data)
}

/// The analyzer rule that runs before types are coerced: the casts of text to TIMESTAMP_NTZ
/// the statement wrote read it as its wall-clock time ([`wall_clock_casts`]).
#[derive(Debug, Default)]
pub struct WrittenWallClocks;

impl AnalyzerRule for WrittenWallClocks {
    fn analyze(
        &self,
        plan: LogicalPlan,
        _config: &ConfigOptions,
    ) -> datafusion::common::Result<LogicalPlan> {
        if !casts_to_wall_clock(&plan)? {
            return Ok(plan);
        }
        rewrite_expressions(plan, |e, schema| wall_clock_casts(e, schema, true))
    }

    fn name(&self) -> &str {
        "tidemark_written_wall_clocks"
    }
}

/// The analyzer rule that runs after types are coerced: text cast to TIMESTAMP_NTZ read as
/// its wall-clock time ([`wall_clock_casts`]), and casts into and out of zoned timestamps as
/// Spark has them under the session's zone. A zoned timestamp becomes a
/// zone-less one (TIMESTAMP_NTZ, and a comparison with a DATE) as its wall-clock time in its
/// zone (the engine's cast keeps the time UTC reads); text, a zone-less timestamp or a date
/// becomes a timestamp zoned otherwise (a table's UTC) as the session's zone reads it.
#[derive(Debug, Default)]
pub struct SessionZoneCasts;

impl AnalyzerRule for SessionZoneCasts {
    fn analyze(
        &self,
        plan: LogicalPlan,
        config: &ConfigOptions,
    ) -> datafusion::common::Result<LogicalPlan> {
        let zone = session_zone(config);
        if zone.is_none() && !casts_to_wall_clock(&plan)? {
            return Ok(plan);
        }
        rewrite_expressions(plan, |e, schema| {
            let t = wall_clock_casts(e, schema, false)?;
            match &zone {
                Some(zone) => t.transform_data(|e| zone_casts(e, schema, zone)),
                None => Ok(t),
            }
        })
    }

    fn name(&self) -> &str {
        "tidemark_session_zone_casts"
    }
}

/// An expression planned outside a query (a DML condition or value, a SQL function's body)
/// typed against `schema`, with [`SessionZoneCasts`]' casts under the zone `zone`.
pub fn typed(
    expr: Expr,
    schema: &DFSchema,
    zone: Option<&Arc<str>>,
) -> datafusion::common::Result<Expr> {
    let shared = Arc::new(schema.clone());
    let mut coercion =
        datafusion::optimizer::analyzer::type_coercion::TypeCoercionRewriter::new(&shared);
    let expr = wall_clock_casts(expr, schema, true)?.data;
    let typed = expr.rewrite(&mut coercion)?.data;
    let typed = wall_clock_casts(typed, schema, false)?.data;
    let zoned = match zone {
        Some(zone) => zone_casts(typed, schema, zone)?.data,
        None => typed,
    };
    Ok(crate::engine::functions::spark_casts(zoned, schema)?.data)
}

/// Whether a cast to TIMESTAMP_NTZ (microseconds, zone-less) is anywhere in `plan`.
fn casts_to_wall_clock(plan: &LogicalPlan) -> datafusion::common::Result<bool> {
    let mut found = false;
    plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            found |= e.exists(|x| Ok(wall_clock_target(x).is_some()))?;
            Ok(if found {
                TreeNodeRecursion::Stop
            } else {
                TreeNodeRecursion::Continue
            })
        })
    })?;
    Ok(found)
}

/// The inner expression and the field of a cast (or TRY_CAST) to a zone-less timestamp.
fn wall_clock_target(e: &Expr) -> Option<(&Expr, &FieldRef)> {
    match e {
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field })
            if matches!(field.data_type(), DataType::Timestamp(_, None)) =>
        {
            Some((expr, field))
        }
        _ => None,
    }
}

/// The casts of text to a zone-less timestamp in `e` (typed against `schema`) through
/// [`wall_clock_text`](crate::engine::functions::wall_clock_text): a zone in the text is
/// dropped, not applied, as Spark reads text as a TIMESTAMP_NTZ. In any session zone.
///
/// `written`: `e` as planned from the statement, before types are coerced, where every such
/// cast is one the statement wrote (`CAST(s AS TIMESTAMP_NTZ)`, a literal, a value for a
/// TIMESTAMP_NTZ column). Otherwise (after coercion) a cast the engine added for a
/// function's argument is left as it is, unless another of its arguments is a TIMESTAMP_NTZ:
/// `date_trunc('HOUR', '10:30:00+02:00')` reads its text as a TIMESTAMP, the instant the
/// offset names, as Spark's does; a comparison with a TIMESTAMP_NTZ column, or `greatest` and
/// `nullif` with one, read it as one.
pub fn wall_clock_casts(
    e: Expr,
    schema: &DFSchema,
    written: bool,
) -> datafusion::common::Result<Transformed<Expr>> {
    let udf = crate::engine::functions::wall_clock_text();
    wall_clocks(e, schema, &udf, written, false)
}

fn wall_clocks(
    e: Expr,
    schema: &DFSchema,
    udf: &datafusion::logical_expr::ScalarUDF,
    written: bool,
    argument: bool,
) -> datafusion::common::Result<Transformed<Expr>> {
    // A function's text argument the engine cast to a timestamp of its own (`date_trunc`'s)
    // is an instant; where another argument is a TIMESTAMP_NTZ (`greatest`, `nullif`), the
    // text was cast to its type and is one too.
    let engine_arguments = match &e {
        Expr::ScalarFunction(f) if f.func.name() != udf.name() => !f.args.iter().any(|a| {
            let source = wall_clock_target(a).map_or(a, |(inner, _)| inner);
            matches!(source.get_type(schema), Ok(DataType::Timestamp(_, None)))
        }),
        _ => false,
    };
    e.map_children(|c| wall_clocks(c, schema, udf, written, engine_arguments))?
        .transform_data(|e| {
            let Some((inner, field)) = wall_clock_target(&e) else {
                return Ok(Transformed::no(e));
            };
            let text = matches!(
                inner.get_type(schema),
                Ok(DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
            );
            let done = matches!(inner, Expr::ScalarFunction(f) if f.func.name() == udf.name());
            if !text || done || (argument && !written) {
                return Ok(Transformed::no(e));
            }
            let read = udf.call(vec![inner.clone()]);
            let field = field.clone();
            Ok(Transformed::yes(match e {
                Expr::TryCast(_) => Expr::TryCast(TryCast::new_from_field(Box::new(read), field)),
                _ => Expr::Cast(Cast::new_from_field(Box::new(read), field)),
            }))
        })
}

/// [`SessionZoneCasts`] on one expression (typed against `schema`): DML conditions and values
/// planned outside a query get it too.
pub fn zone_casts(
    e: Expr,
    schema: &DFSchema,
    zone: &Arc<str>,
) -> datafusion::common::Result<Transformed<Expr>> {
    e.transform_up(|e| {
        let (inner, to, is_try) = match &e {
            Expr::Cast(Cast { expr, field }) => (expr, field.data_type().clone(), false),
            Expr::TryCast(TryCast { expr, field }) => (expr, field.data_type().clone(), true),
            _ => return Ok(Transformed::no(e)),
        };
        let Ok(from) = inner.get_type(schema) else {
            return Ok(Transformed::no(e));
        };
        let again = |x: Expr, t: DataType| if is_try { try_cast(x, t) } else { cast(x, t) };
        match (&from, &to) {
            (DataType::Timestamp(_, Some(_)), DataType::Timestamp(_, None)) => {
                let local =
                    datafusion::functions::datetime::expr_fn::to_local_time(vec![*inner.clone()]);
                Ok(Transformed::yes(again(local, to)))
            }
            // A wall-clock time (or a date's midnight) in the session's zone, through
            // tidemark's cast: the optimizer would move Arrow's cast onto a literal it is
            // compared with, in the other direction (as the wall clock UTC reads).
            (
                DataType::Timestamp(_, None) | DataType::Date32 | DataType::Date64,
                DataType::Timestamp(_, Some(_)),
            ) => {
                let read = crate::engine::functions::to_timestamp_in(is_try, zone)
                    .call(vec![*inner.clone()]);
                Ok(Transformed::yes(cast(read, to)))
            }
            _ => match read_via(&from, &to, zone) {
                Some(zoned) => Ok(Transformed::yes(cast(again(*inner.clone(), zoned), to))),
                None => Ok(Transformed::no(e)),
            },
        }
    })
}

/// Under the session's zone `zone`: the first part of `e` that computes from a TIMESTAMP read
/// in UTC (a table's column where a statement reads it as stored, as UPDATE and DELETE do):
/// a function's argument, or a cast to anything but another zoned timestamp. Comparisons and
/// zoned casts name instants, the same in any zone.
pub fn utc_computation(e: &Expr, schema: &DFSchema, zone: &Arc<str>) -> Option<String> {
    let mut found = None;
    let _ = e.apply(|x| {
        let args: Vec<&Expr> = match x {
            Expr::ScalarFunction(f) => f.args.iter().collect(),
            Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field })
                if !matches!(field.data_type(), DataType::Timestamp(_, Some(_))) =>
            {
                vec![expr.as_ref()]
            }
            _ => vec![],
        };
        for a in args {
            if let Ok(DataType::Timestamp(_, Some(tz))) = a.get_type(schema)
                && tz != *zone
            {
                found = Some(x.to_string());
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}
