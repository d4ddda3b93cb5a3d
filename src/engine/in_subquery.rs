//! `x [NOT] IN (SELECT ...)` with SQL's three values wherever the engine's own plan would give
//! two, and IN and EXISTS in a select list.
//!
//! `5 NOT IN (SELECT k ...)` is NULL, not true, when some `k` is NULL, and `x IN (SELECT k ...)`
//! is NULL, not false, when `x` is NULL (and the subquery has rows) or some `k` is NULL and none
//! matches. The engine turns a NOT IN of a WHERE into an anti join that knows this only when
//! the subquery reads no outer column and `x` is a column of the outer row (then one join key,
//! and one NULL in the subquery empties the result, which is right only for an uncorrelated
//! subquery); an IN or NOT IN under NOT, OR, IS NULL, CASE... becomes a "mark" join whose mark
//! is true or false, never NULL. The rule below keeps what the engine gets right and rewrites
//! the rest with EXISTS, whose two values are all there are. What matters of a predicate
//! depends on where it stands in the WHERE:
//!
//! - where only its true rows count (a conjunct, or under AND and OR only): an IN as it is (a
//!   semi or mark join is exact there); a NOT IN as `NOT EXISTS (... k = x) AND NOT EXISTS (...
//!   k IS NULL) AND (x IS NOT NULL OR NOT EXISTS (...))`, each part a join the engine plans by
//!   hash or over at most one row;
//! - under one NOT, where only its false rows count: the same, negated;
//! - anywhere else (IS NULL, CASE, a comparison): `CASE WHEN EXISTS (... k = x) THEN true WHEN
//!   EXISTS (... k IS NULL) OR (x IS NULL AND EXISTS (...)) THEN NULL ELSE false END`.
//!
//! In a select list, which the engine does not plan IN and EXISTS in, they are counts of the
//! subquery's rows, as scalar subqueries it joins. A correlated subquery whose rows come from
//! an aggregate without GROUP BY (`SELECT max(k) ... WHERE k.g = o.g`) always has one row, but
//! the engine's decorrelation loses it for a group without rows: refused where that changes
//! the answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, Result, ScalarValue, plan_err};
use datafusion::config::ConfigOptions;
use datafusion::functions::expr_fn::coalesce;
use datafusion::functions_aggregate::count::count_all;
use datafusion::logical_expr::expr::{Exists, InSubquery};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::{conjunction, disjunction, split_conjunction_owned};
use datafusion::logical_expr::{
    BinaryExpr, Expr, ExprSchemable, Filter, LogicalPlan, LogicalPlanBuilder, Operator, Projection,
    Subquery, when,
};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule (after type coercion: `x` and the subquery's column share a type).
#[derive(Debug)]
pub struct ThreeValuedInSubqueries;

impl AnalyzerRule for ThreeValuedInSubqueries {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|plan| match plan {
            LogicalPlan::Filter(filter) if has_predicate_subquery(&filter.predicate) => {
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

fn has_predicate_subquery(e: &Expr) -> bool {
    e.exists(|e| Ok(matches!(e, Expr::InSubquery(_) | Expr::Exists(_))))
        .unwrap_or(false)
}

/// What a subquery's plan is made of, for the cases the engine's decorrelation mishandles.
struct Shape {
    correlated: bool,
    /// An aggregate without GROUP BY: one row always, which decorrelation may lose.
    single_row_aggregate: bool,
    /// That row's value is NULL for a group without rows (the column is a bare MIN, MAX,
    /// SUM or AVG): losing the row loses no match.
    null_when_empty: bool,
    /// An aggregate, LIMIT or window: adding a condition over its rows is not the same as
    /// adding it inside. (DISTINCT is: EXISTS of distinct rows is EXISTS of the rows.)
    shaped: bool,
}

fn shape(subquery: &Subquery) -> Shape {
    // Down from the subquery's rows to an aggregate without GROUP BY, through what keeps its
    // one row. A HAVING stops the search: it usually drops an empty group's row (`HAVING
    // count(*) > 1`), as the engine does, though not always (`HAVING count(*) >= 0`).
    let mut top = subquery.subquery.as_ref();
    let mut column = None;
    let single = loop {
        match top {
            LogicalPlan::Projection(p) => {
                column = p.expr.first().map(|e| match e {
                    Expr::Alias(a) => a.expr.as_ref().clone(),
                    e => e.clone(),
                });
                top = p.input.as_ref();
            }
            LogicalPlan::SubqueryAlias(a) => top = a.input.as_ref(),
            LogicalPlan::Sort(s) => top = s.input.as_ref(),
            LogicalPlan::Distinct(d) => top = d.input().as_ref(),
            LogicalPlan::Aggregate(a) if a.group_expr.is_empty() => break Some(a),
            _ => break None,
        }
    };
    let null_when_empty = single.is_some_and(|a| {
        // The first column is one of the aggregate's values, and every aggregate is NULL
        // over no rows.
        let bare = matches!(column, Some(Expr::Column(_)) | None);
        let all_null = a.aggr_expr.iter().all(|e| {
            let e = match e {
                Expr::Alias(a) => a.expr.as_ref(),
                e => e,
            };
            matches!(e, Expr::AggregateFunction(f)
                if matches!(f.func.name(), "max" | "min" | "sum" | "avg" | "mean"))
        });
        bare && all_null
    });
    let mut shaped = false;
    let _ = subquery.subquery.apply(|p| {
        if matches!(
            p,
            LogicalPlan::Aggregate(_) | LogicalPlan::Limit(_) | LogicalPlan::Window(_)
        ) {
            shaped = true;
        }
        Ok(TreeNodeRecursion::Continue)
    });
    Shape {
        correlated: !subquery.outer_ref_columns.is_empty(),
        single_row_aggregate: single.is_some(),
        null_when_empty,
        shaped,
    }
}

fn refused() -> Result<Transformed<Expr>> {
    plan_err!(
        "[UNSUPPORTED_SUBQUERY_EXPRESSION_CATEGORY] an IN or EXISTS subquery that refers to the outer query and aggregates without GROUP BY (SELECT max(k) FROM s WHERE s.g = t.g) is not supported here: for a group without rows the engine would lose the aggregate's one row and answer wrongly. Compare with a scalar subquery instead: x = (SELECT max(k) FROM s WHERE s.g = t.g)"
    )
}

/// Where an expression stands in a WHERE: what of its values decides which rows pass.
#[derive(Clone, Copy, PartialEq)]
enum Stand {
    /// Only its true rows count (under AND and OR only).
    True,
    /// Only its false rows count (under one NOT).
    False,
    /// All three values count.
    Exact,
}

fn rewrite_filter(filter: Filter) -> Result<Transformed<LogicalPlan>> {
    let schema = Arc::clone(filter.input.schema());
    let mut changed = false;
    let mut conjuncts = Vec::new();
    for conjunct in split_conjunction_owned(filter.predicate) {
        // NOT (x IN ...) standing alone is a NOT IN, as the engine reads it too.
        let conjunct = match conjunct {
            Expr::Not(inner) if matches!(*inner, Expr::InSubquery(_)) => {
                let Expr::InSubquery(s) = *inner else {
                    unreachable!()
                };
                Expr::InSubquery(InSubquery {
                    negated: !s.negated,
                    ..s
                })
            }
            other => other,
        };
        // A NOT IN standing alone over a column of the outer row, against an uncorrelated
        // subquery: the engine's null-aware anti join, right as it is.
        if let Expr::InSubquery(s) = &conjunct
            && s.negated
            && s.subquery.outer_ref_columns.is_empty()
            && let Expr::Column(c) = strip_casts(&s.expr)
            // The engine asks the column whether it can be NULL, not the expression.
            && schema.qualified_field_from_column(c)?.1.is_nullable() == s.expr.nullable(&schema)?
        {
            conjuncts.push(conjunct);
            continue;
        }
        let rewritten = within(conjunct, Stand::True, &schema)?;
        changed |= rewritten.transformed;
        conjuncts.push(rewritten.data);
    }
    let predicate = conjunction(conjuncts).expect("a filter has a predicate");
    let filter = LogicalPlan::Filter(Filter::try_new(predicate, filter.input)?);
    Ok(if changed {
        Transformed::yes(filter)
    } else {
        Transformed::no(filter)
    })
}

/// `e`, standing as `stand` says, with its IN subqueries giving what counts there.
fn within(e: Expr, stand: Stand, schema: &DFSchema) -> Result<Transformed<Expr>> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::And | Operator::Or) =>
        {
            let l = within(*left, stand, schema)?;
            let r = within(*right, stand, schema)?;
            let changed = l.transformed || r.transformed;
            let e = Expr::BinaryExpr(BinaryExpr::new(Box::new(l.data), op, Box::new(r.data)));
            Ok(if changed {
                Transformed::yes(e)
            } else {
                Transformed::no(e)
            })
        }
        Expr::Not(inner) => {
            let flipped = match stand {
                Stand::True => Stand::False,
                Stand::False => Stand::True,
                Stand::Exact => Stand::Exact,
            };
            Ok(within(*inner, flipped, schema)?.update_data(|e| Expr::Not(Box::new(e))))
        }
        Expr::InSubquery(s) => in_subquery(s, stand, schema),
        Expr::Exists(x) => {
            let sh = shape(&x.subquery);
            if sh.correlated && sh.single_row_aggregate {
                return refused();
            }
            Ok(Transformed::no(Expr::Exists(x)))
        }
        // Anything else: its subqueries with all three values.
        e => e.transform_down(|e| match e {
            Expr::InSubquery(s) => in_subquery(s, Stand::Exact, schema)
                .map(|t| Transformed::new(t.data, t.transformed, TreeNodeRecursion::Jump)),
            Expr::Exists(x) => {
                let sh = shape(&x.subquery);
                if sh.correlated && sh.single_row_aggregate {
                    return refused();
                }
                Ok(Transformed::new(
                    Expr::Exists(x),
                    false,
                    TreeNodeRecursion::Jump,
                ))
            }
            e => Ok(Transformed::no(e)),
        }),
    }
}

/// One `x [NOT] IN (subquery)` standing as `stand` says.
fn in_subquery(s: InSubquery, stand: Stand, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let sh = shape(&s.subquery);
    // What is true exactly: an IN where true rows count, a NOT IN where false rows do (both
    // mean "a row equals x", which a semi or mark join answers).
    let exact_as_is = match stand {
        Stand::True => !s.negated,
        Stand::False => s.negated,
        Stand::Exact => false,
    };
    if sh.correlated && sh.single_row_aggregate {
        // A lost row of NULL is still no match where true rows count; a lost count of 0 is not.
        if !(exact_as_is && sh.null_when_empty) {
            return refused();
        }
    }
    if exact_as_is {
        return Ok(Transformed::no(Expr::InSubquery(s)));
    }
    let Some(parts) = Parts::of(&s, schema)? else {
        return Ok(Transformed::no(Expr::InSubquery(s)));
    };
    // Conditions added over a correlated LIMIT, aggregate or window are not conditions inside
    // it, and the engine's own plan would lose or misread the NULLs: refused.
    if sh.correlated && sh.shaped {
        return plan_err!(
            "[UNSUPPORTED_SUBQUERY_EXPRESSION_CATEGORY] a NOT IN (or an IN under NOT, IS NULL, CASE, ...) over a subquery that refers to the outer query and aggregates, limits or uses a window function is not supported: its NULLs would be misread. Write it as a NOT EXISTS (SELECT ... WHERE k = x) with the NULL cases spelled out, or join the aggregated rows"
        );
    }
    let rewritten = match stand {
        // `x NOT IN` where true rows count, `x IN` where false rows do: true exactly when the
        // NOT IN is.
        Stand::True | Stand::False => {
            let not_in = parts.not_in_true()?;
            if s.negated {
                not_in
            } else {
                Expr::Not(Box::new(not_in))
            }
        }
        Stand::Exact => {
            let is_in = parts.three_valued()?;
            if s.negated {
                Expr::Not(Box::new(is_in))
            } else {
                is_in
            }
        }
    };
    Ok(Transformed::yes(rewritten))
}

fn strip_casts(e: &Expr) -> &Expr {
    match e {
        Expr::Cast(c) => strip_casts(&c.expr),
        e => e,
    }
}

/// The subquery's rows as their one column under a new name, and that column: a condition
/// between it and the outer row never compares a table with itself (`b.x = b.x` when both
/// read `b`). (The engine's decorrelation adds the columns its conditions on the outer row
/// need to this projection.)
fn renamed(plan: &LogicalPlan) -> Result<(LogicalPlan, Expr)> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!("__tidemark_in_{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let k = Expr::Column(Column::from(plan.schema().qualified_field(0)));
    let plan = LogicalPlanBuilder::from(plan.clone())
        .project(vec![k.alias(&name)])?
        .build()?;
    Ok((plan, Expr::Column(Column::new_unqualified(name))))
}

/// What is compared: `x` as the subquery sees it (its columns as outer references), the
/// subquery's rows under a name of their own and their column `k`.
struct Parts {
    /// `x` in the outer query.
    here: Expr,
    x: Expr,
    x_nullable: bool,
    plan: LogicalPlan,
    k: Expr,
    k_nullable: bool,
    correlated: bool,
}

/// A left side the rule leaves to the engine: an outer reference of an outer query's (nested
/// correlation) or a subquery of its own.
fn unusual_left(x: &Expr) -> Result<bool> {
    x.exists(|e| {
        Ok(matches!(
            e,
            Expr::OuterReferenceColumn(..)
                | Expr::ScalarSubquery(_)
                | Expr::InSubquery(_)
                | Expr::Exists(_)
        ))
    })
}

impl Parts {
    /// None where the rule leaves the expression alone: an unusual left side
    /// ([`unusual_left`]) or nothing that can be NULL.
    fn of(s: &InSubquery, schema: &DFSchema) -> Result<Option<Parts>> {
        if unusual_left(&s.expr)? {
            return Ok(None);
        }
        let (plan, k) = renamed(&s.subquery.subquery)?;
        let k_nullable = plan.schema().field(0).is_nullable();
        let x_nullable = s.expr.nullable(schema)?;
        if !x_nullable && !k_nullable {
            return Ok(None);
        }
        Ok(Some(Parts {
            here: s.expr.as_ref().clone(),
            x: outer(s.expr.as_ref().clone(), schema)?,
            x_nullable,
            plan,
            k,
            k_nullable,
            correlated: !s.subquery.outer_ref_columns.is_empty(),
        }))
    }

    /// EXISTS of the rows where `condition` holds (at most one row read where the condition
    /// reads no outer column and the subquery none either).
    fn exists(&self, condition: Option<Expr>, by_outer: bool) -> Result<Expr> {
        let mut builder = LogicalPlanBuilder::from(self.plan.clone());
        if let Some(c) = condition {
            builder = builder.filter(c)?;
        }
        if !by_outer && !self.correlated {
            builder = builder.limit(0, Some(1))?;
        }
        let plan = Arc::new(builder.build()?);
        Ok(Expr::Exists(Exists {
            subquery: Subquery {
                outer_ref_columns: plan.all_out_ref_exprs(),
                subquery: plan,
                spans: Default::default(),
            },
            negated: false,
        }))
    }

    /// True exactly when `x NOT IN (subquery)` is: no row equals `x`, none is NULL, and `x`
    /// is not NULL unless there are no rows.
    fn not_in_true(&self) -> Result<Expr> {
        let not = |e: Expr| Expr::Not(Box::new(e));
        let mut parts = vec![not(
            self.exists(Some(self.k.clone().eq(self.x.clone())), true)?
        )];
        if self.k_nullable {
            parts.push(not(self.exists(Some(self.k.clone().is_null()), false)?));
        }
        if self.x_nullable {
            parts.push(
                self.here
                    .clone()
                    .is_not_null()
                    .or(not(self.exists(None, false)?)),
            );
        }
        Ok(conjunction(parts).expect("one part at least"))
    }

    /// `x IN (subquery)` with its three values.
    fn three_valued(&self) -> Result<Expr> {
        let found = self.exists(Some(self.k.clone().eq(self.x.clone())), true)?;
        when(found, boolean(Some(true)))
            .when(self.unknown()?, boolean(None))
            .otherwise(boolean(Some(false)))
    }

    /// Where no row equals `x`, whether the IN is NULL: a NULL among the rows, or a NULL `x`
    /// against some rows.
    fn unknown(&self) -> Result<Expr> {
        let mut unknown = Vec::new();
        if self.k_nullable {
            unknown.push(self.exists(Some(self.k.clone().is_null()), false)?);
        }
        if self.x_nullable {
            unknown.push(self.here.clone().is_null().and(self.exists(None, false)?));
        }
        Ok(disjunction(unknown).expect("x or k can be NULL"))
    }
}

fn boolean(b: Option<bool>) -> Expr {
    Expr::Literal(ScalarValue::Boolean(b), None)
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

/// IN and EXISTS in a select list, which the engine plans only in a WHERE: as counts of the
/// subquery's rows, scalar subqueries it joins (a correlated count of no rows is 0).
fn rewrite_projection(projection: Projection) -> Result<Transformed<LogicalPlan>> {
    let schema = Arc::clone(projection.input.schema());
    let names = NamePreserver::new_for_projection();
    let mut exprs = Vec::with_capacity(projection.expr.len());
    let mut changed = false;
    for e in projection.expr {
        let name = names.save(&e);
        let rewritten = e.transform_down(|e| match e {
            Expr::Exists(x) => {
                let sh = shape(&x.subquery);
                if sh.correlated && sh.shaped {
                    return Ok(Transformed::new(
                        Expr::Exists(x),
                        false,
                        TreeNodeRecursion::Jump,
                    ));
                }
                let rows = count_where(&x.subquery.subquery, None)?;
                Ok(Transformed::new(
                    if x.negated {
                        rows.eq(zero())
                    } else {
                        rows.gt(zero())
                    },
                    true,
                    TreeNodeRecursion::Jump,
                ))
            }
            Expr::InSubquery(s) => counted_in(s, &schema)
                .map(|t| Transformed::new(t.data, t.transformed, TreeNodeRecursion::Jump)),
            e => Ok(Transformed::no(e)),
        })?;
        changed |= rewritten.transformed;
        exprs.push(name.restore(rewritten.data));
    }
    let projection = LogicalPlan::Projection(Projection::try_new(exprs, projection.input)?);
    Ok(if changed {
        Transformed::yes(projection)
    } else {
        Transformed::no(projection)
    })
}

fn zero() -> Expr {
    Expr::Literal(ScalarValue::Int64(Some(0)), None)
}

/// The number of `plan`'s rows where `condition` holds (all of them without one), as a scalar
/// subquery.
fn count_where(plan: &LogicalPlan, condition: Option<Expr>) -> Result<Expr> {
    let mut builder = LogicalPlanBuilder::from(plan.clone());
    if let Some(c) = condition {
        builder = builder.filter(c)?;
    }
    let plan = Arc::new(
        builder
            .aggregate(
                Vec::<Expr>::new(),
                vec![count_all().alias("__tidemark_rows")],
            )?
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
    let sh = shape(&s.subquery);
    if unusual_left(&s.expr)? || (sh.correlated && sh.shaped) {
        return Ok(Transformed::no(Expr::InSubquery(s)));
    }
    let (plan, k) = renamed(&s.subquery.subquery)?;
    let x = outer(s.expr.as_ref().clone(), schema)?;
    let found = count_where(&plan, Some(k.clone().eq(x)))?.gt(zero());
    let mut unknown = Vec::new();
    if plan.schema().field(0).is_nullable() {
        unknown.push(count_where(&plan, Some(k.is_null()))?.gt(zero()));
    }
    if s.expr.nullable(schema)? {
        let rows = count_where(&plan, None)?.gt(zero());
        unknown.push(s.expr.as_ref().clone().is_null().and(rows));
    }
    let mut is_in = when(found, boolean(Some(true)));
    if let Some(unknown) = disjunction(unknown) {
        is_in = is_in.when(unknown, boolean(None));
    }
    let is_in = is_in.otherwise(boolean(Some(false)))?;
    Ok(Transformed::yes(if s.negated {
        Expr::Not(Box::new(is_in))
    } else {
        is_in
    }))
}
