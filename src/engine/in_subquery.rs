//! `x [NOT] IN (SELECT ...)` with SQL's three values wherever the engine's own plan would give
//! two.
//!
//! `5 NOT IN (SELECT k ...)` is NULL, not true, when some `k` is NULL, and `x IN (SELECT k ...)`
//! is NULL, not false, when `x` is NULL or some `k` is NULL and none matches. The engine turns
//! a NOT IN of a WHERE into an anti join that knows this only when the subquery reads no outer
//! column and `x` reads the outer row (then one join key, and one NULL in the subquery empties
//! the result, which is right only for an uncorrelated subquery); an IN or NOT IN under NOT,
//! OR, IS NULL, CASE... becomes a "mark" join whose mark is true or false, never NULL. So
//! `WHERE 5 NOT IN (SELECT k ...)`, `WHERE x NOT IN (SELECT k ... WHERE t.g > o.g)`,
//! `WHERE x NOT IN (...) OR y` and `WHERE (x IN (...)) IS NULL` returned rows Databricks does
//! not. The rule below leaves the cases the engine gets right as they are and rewrites the
//! others with EXISTS, whose two values are all there is:
//!
//! - a NOT IN standing alone in a WHERE (a conjunct, where NULL and false both drop the row):
//!   `NOT EXISTS (SELECT * FROM (subquery) WHERE k = x OR k IS NULL OR x IS NULL)`;
//! - an IN or NOT IN anywhere else in a WHERE: `CASE WHEN EXISTS (... WHERE k = x) THEN true
//!   WHEN EXISTS (... WHERE k IS NULL OR x IS NULL) THEN NULL ELSE false END` (negated for NOT
//!   IN).
//!
//! An IN standing alone in a WHERE is a semi join, right as it is; so is anything over columns
//! that cannot be NULL.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, Result, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::functions::expr_fn::coalesce;
use datafusion::functions_aggregate::count::count_all;
use datafusion::logical_expr::expr::{Exists, InSubquery};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::{conjunction, disjunction, split_conjunction_owned};
use datafusion::logical_expr::{
    Expr, ExprSchemable, Filter, LogicalPlan, LogicalPlanBuilder, Projection, Subquery, when,
};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule (after type coercion: `x` and the subquery's column share a type).
#[derive(Debug)]
pub struct ThreeValuedInSubqueries;

impl AnalyzerRule for ThreeValuedInSubqueries {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|plan| match plan {
            LogicalPlan::Filter(filter) if has_in_subquery(&filter.predicate) => {
                rewrite_filter(filter)
            }
            LogicalPlan::Projection(projection)
                if projection.expr.iter().any(has_predicate_subquery) =>
            {
                rewrite_projection(projection)
            }
            plan => Ok(Transformed::no(plan)),
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "tidemark_three_valued_in_subqueries"
    }
}

fn has_in_subquery(e: &Expr) -> bool {
    e.exists(|e| Ok(matches!(e, Expr::InSubquery(_))))
        .unwrap_or(false)
}

fn has_predicate_subquery(e: &Expr) -> bool {
    e.exists(|e| Ok(matches!(e, Expr::InSubquery(_) | Expr::Exists(_))))
        .unwrap_or(false)
}

/// IN and EXISTS in a select list, which the engine plans only in a WHERE: as counts of the
/// subquery's rows, scalar subqueries it joins (a correlated count of no rows is 0).
fn rewrite_projection(projection: Projection) -> Result<Transformed<LogicalPlan>> {
    let schema = Arc::clone(projection.input.schema());
    let names = NamePreserver::new_for_projection();
    let mut exprs = Vec::with_capacity(projection.expr.len());
    for e in projection.expr {
        let name = names.save(&e);
        let rewritten = e.transform_up(|e| match e {
            Expr::Exists(x) => {
                let rows = count_where(&x.subquery.subquery, None)?;
                Ok(Transformed::yes(if x.negated {
                    rows.eq(zero())
                } else {
                    rows.gt(zero())
                }))
            }
            Expr::InSubquery(s) => counted_in(s, &schema),
            e => Ok(Transformed::no(e)),
        })?;
        exprs.push(name.restore(rewritten.data));
    }
    Ok(Transformed::yes(LogicalPlan::Projection(
        Projection::try_new(exprs, projection.input)?,
    )))
}

fn zero() -> Expr {
    Expr::Literal(ScalarValue::Int64(Some(0)), None)
}

/// The number of the subquery's rows where `condition` holds (all of them without one), as a
/// scalar subquery.
fn count_where(plan: &LogicalPlan, condition: Option<Expr>) -> Result<Expr> {
    let mut builder = LogicalPlanBuilder::from(plan.clone());
    if let Some(c) = condition {
        builder = builder.filter(c)?;
    }
    let plan = Arc::new(
        builder
            .aggregate(Vec::<Expr>::new(), vec![count_all()])?
            .build()?,
    );
    let count = Expr::ScalarSubquery(Subquery {
        outer_ref_columns: plan.all_out_ref_exprs(),
        subquery: plan,
        spans: Default::default(),
    });
    Ok(coalesce(vec![count, zero()]))
}

/// An IN or NOT IN of a select list with its three values, from counts: a match makes it
/// true; else a NULL in the subquery, or a NULL `x` against a subquery with rows, NULL; else
/// false.
fn counted_in(s: InSubquery, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let unusual = s.expr.exists(|e| {
        Ok(matches!(
            e,
            Expr::OuterReferenceColumn(..)
                | Expr::ScalarSubquery(_)
                | Expr::InSubquery(_)
                | Expr::Exists(_)
        ))
    })?;
    if unusual {
        return Ok(Transformed::no(Expr::InSubquery(s)));
    }
    let plan = s.subquery.subquery.as_ref();
    let k = Expr::Column(Column::from(plan.schema().qualified_field(0)));
    let x = outer(s.expr.as_ref().clone(), schema)?;
    let found = count_where(plan, Some(k.clone().eq(x)))?.gt(zero());
    let mut unknown = Vec::new();
    if plan.schema().field(0).is_nullable() {
        unknown.push(count_where(plan, Some(k.is_null()))?.gt(zero()));
    }
    if s.expr.nullable(schema)? {
        let rows = count_where(plan, None)?.gt(zero());
        unknown.push(s.expr.as_ref().clone().is_null().and(rows));
    }
    let mut is_in = when(found, Expr::Literal(ScalarValue::Boolean(Some(true)), None));
    if let Some(unknown) = disjunction(unknown) {
        is_in = is_in.when(unknown, Expr::Literal(ScalarValue::Boolean(None), None));
    }
    let is_in = is_in.otherwise(Expr::Literal(ScalarValue::Boolean(Some(false)), None))?;
    Ok(Transformed::yes(if s.negated {
        Expr::Not(Box::new(is_in))
    } else {
        is_in
    }))
}

/// `e` as a subquery of its plan sees it: its columns as outer references.
fn outer(e: Expr, schema: &DFSchema) -> Result<Expr> {
    Ok(e.transform(|e| match e {
        Expr::Column(c) => {
            let (_, field) = schema.qualified_field_from_column(&c)?;
            Ok(Transformed::yes(Expr::OuterReferenceColumn(
                Arc::clone(field),
                c,
            )))
        }
        e => Ok(Transformed::no(e)),
    })?
    .data)
}

fn rewrite_filter(filter: Filter) -> Result<Transformed<LogicalPlan>> {
    let schema = Arc::clone(filter.input.schema());
    let mut changed = false;
    let mut conjuncts = Vec::new();
    for conjunct in split_conjunction_owned(filter.predicate) {
        let conjunct = match conjunct {
            Expr::Not(inner) if matches!(*inner, Expr::InSubquery(ref s) if !s.negated) => {
                let Expr::InSubquery(s) = *inner else {
                    unreachable!()
                };
                Expr::InSubquery(InSubquery { negated: true, ..s })
            }
            other => other,
        };
        let rewritten = match conjunct {
            // A semi join: right with two values.
            Expr::InSubquery(s) if !s.negated => Transformed::no(Expr::InSubquery(s)),
            Expr::InSubquery(s) => standing_not_in(s, &schema)?,
            other => other.transform_up(|e| match e {
                Expr::InSubquery(s) => three_valued(s, &schema),
                e => Ok(Transformed::no(e)),
            })?,
        };
        changed |= rewritten.transformed;
        conjuncts.push(rewritten.data);
    }
    let predicate = conjunction(conjuncts).expect("a filter has a predicate");
    let filter = Filter::try_new(predicate, filter.input)?;
    Ok(if changed {
        Transformed::yes(LogicalPlan::Filter(filter))
    } else {
        Transformed::no(LogicalPlan::Filter(filter))
    })
}

/// What is compared: `x`, the subquery's plan and its column, with `x` as the subquery sees
/// it (its columns as outer references). None where the rule leaves the expression alone.
struct Parts {
    x: Expr,
    plan: LogicalPlan,
    k: Expr,
}

fn parts(s: &InSubquery, schema: &DFSchema) -> Result<Option<Parts>> {
    // An outer reference of an outer query's (nested correlation) or a subquery inside `x`:
    // left to the engine.
    let unusual = s.expr.exists(|e| {
        Ok(matches!(
            e,
            Expr::OuterReferenceColumn(..)
                | Expr::ScalarSubquery(_)
                | Expr::InSubquery(_)
                | Expr::Exists(_)
        ))
    })?;
    if unusual {
        return Ok(None);
    }
    let plan = s.subquery.subquery.as_ref().clone();
    let k = Expr::Column(Column::from(plan.schema().qualified_field(0)));
    let x_nullable = s.expr.nullable(schema)?;
    let k_nullable = plan.schema().field(0).is_nullable();
    if !x_nullable && !k_nullable {
        return Ok(None);
    }
    let x = outer(s.expr.as_ref().clone(), schema)?;
    Ok(Some(Parts { x, plan, k }))
}

/// The subquery's rows kept by `condition`, as an EXISTS.
fn exists_where(plan: &LogicalPlan, condition: Expr, negated: bool) -> Result<Expr> {
    let plan = Arc::new(
        LogicalPlanBuilder::from(plan.clone())
            .filter(condition)?
            .build()?,
    );
    Ok(Expr::Exists(Exists {
        subquery: Subquery {
            outer_ref_columns: plan.all_out_ref_exprs(),
            subquery: plan,
            spans: Default::default(),
        },
        negated,
    }))
}

/// A NOT IN that is a conjunct of a WHERE: the engine's null-aware anti join is right for an
/// uncorrelated subquery against a value of the outer row; otherwise NOT EXISTS of any row
/// that makes the NOT IN other than true.
fn standing_not_in(s: InSubquery, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let reads_outer_row = s.expr.exists(|e| Ok(matches!(e, Expr::Column(_))))?;
    if s.subquery.outer_ref_columns.is_empty() && reads_outer_row {
        return Ok(Transformed::no(Expr::InSubquery(s)));
    }
    let Some(Parts { x, plan, k }) = parts(&s, schema)? else {
        return Ok(Transformed::no(Expr::InSubquery(s)));
    };
    let blocks = k.clone().eq(x.clone()).or(k.is_null()).or(x.is_null());
    Ok(Transformed::yes(exists_where(&plan, blocks, true)?))
}

/// An IN or NOT IN inside another expression, with its three values.
fn three_valued(s: InSubquery, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Some(Parts { x, plan, k }) = parts(&s, schema)? else {
        return Ok(Transformed::no(Expr::InSubquery(s)));
    };
    let found = exists_where(&plan, k.clone().eq(x.clone()), false)?;
    let unknown = exists_where(&plan, k.is_null().or(x.is_null()), false)?;
    let is_in = when(found, Expr::Literal(ScalarValue::Boolean(Some(true)), None))
        .when(unknown, Expr::Literal(ScalarValue::Boolean(None), None))
        .otherwise(Expr::Literal(ScalarValue::Boolean(Some(false)), None))?;
    Ok(Transformed::yes(if s.negated {
        Expr::Not(Box::new(is_in))
    } else {
        is_in
    }))
}
