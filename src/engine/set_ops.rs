//! `EXCEPT ALL` and `INTERSECT ALL` as multisets, as Databricks computes them.
//!
//! DataFusion plans `a EXCEPT ALL b` as `a` anti-joined with `b` on every column, which drops
//! every copy of a row `b` holds once (`{1, 1, 1, 3} EXCEPT ALL {1, 1}` gave `{3}`, not
//! `{1, 3}`), and `a INTERSECT ALL b` as a semi-join, which keeps every copy in `a`
//! (`{1, 1, 1}`, not `{1, 1}`). [`MultisetSetOps`] numbers the copies of each row on both
//! sides (`row_number() OVER (PARTITION BY every column)`) and joins on the rows and their
//! numbers: the k-th copy of a row in `a` is kept (INTERSECT ALL) or dropped (EXCEPT ALL)
//! when `b` holds at least k copies.
//!
//! The joins the SQL planner makes for these set operations are the only semi- and anti-joins
//! in a plan before the optimizer runs (subqueries are still expressions then) with NULLs
//! equal to NULLs (a written `LEFT SEMI JOIN ... ON` compares NULLs as `=` does); a left side
//! made DISTINCT is EXCEPT or INTERSECT without ALL, whose answer the joins already give.

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, NullEquality};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::{
    Expr, ExprFunctionExt, Join, JoinType, LogicalPlan, LogicalPlanBuilder,
};
use datafusion::optimizer::AnalyzerRule;

/// The name of the copy number each side gets.
const COPY: &str = "__tidemark_copy";

#[derive(Debug, Default)]
pub struct MultisetSetOps;

impl AnalyzerRule for MultisetSetOps {
    fn analyze(
        &self,
        plan: LogicalPlan,
        _config: &ConfigOptions,
    ) -> datafusion::common::Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| match node {
            LogicalPlan::Join(j) if is_all_set_op(&j) => Ok(Transformed::yes(multiset(j)?)),
            other => Ok(Transformed::no(other)),
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "tidemark_multiset_set_ops"
    }
}

/// Whether `j` is the join the SQL planner made for `EXCEPT ALL` or `INTERSECT ALL`.
fn is_all_set_op(j: &Join) -> bool {
    matches!(j.join_type, JoinType::LeftSemi | JoinType::LeftAnti)
        && j.null_equality == NullEquality::NullEqualsNull
        && j.filter.is_none()
        && j.on.len() == j.left.schema().fields().len()
        && j.on.len() == j.right.schema().fields().len()
        && !matches!(j.left.as_ref(), LogicalPlan::Distinct(_))
        // Not one this rule made already (a plan analysed again).
        && !j.left.schema().fields().iter().any(|f| f.name() == COPY)
        && j.on.iter().all(|(l, r)| {
            matches!(l, Expr::Column(_)) && matches!(r, Expr::Column(_))
        })
}

/// The columns of a plan's output, each as a column expression.
fn columns(plan: &LogicalPlan) -> Vec<Expr> {
    plan.schema()
        .iter()
        .map(|(q, f)| Expr::Column(Column::from((q, f))))
        .collect()
}

/// `plan` with each row's copy number among the rows equal to it.
fn numbered(plan: Arc<LogicalPlan>) -> datafusion::common::Result<LogicalPlan> {
    let every = columns(&plan);
    let n = datafusion::functions_window::expr_fn::row_number()
        .partition_by(every)
        .build()?
        .alias(COPY);
    LogicalPlanBuilder::from(plan).window(vec![n])?.build()
}

/// The join `j` on the rows and their copy numbers, without the numbers.
fn multiset(j: Join) -> datafusion::common::Result<LogicalPlan> {
    let kept = columns(&j.left);
    let left = numbered(j.left)?;
    let right = numbered(j.right)?;
    let copy_of = |plan: &LogicalPlan| {
        plan.schema()
            .iter()
            .find(|(_, f)| f.name() == COPY)
            .map(|(q, f)| Column::from((q, f)))
            .expect("numbered plans have a copy number")
    };
    let (mut left_keys, mut right_keys): (Vec<Column>, Vec<Column>) =
        j.on.iter()
            .filter_map(|(l, r)| match (l, r) {
                (Expr::Column(l), Expr::Column(r)) => Some((l.clone(), r.clone())),
                _ => None,
            })
            .unzip();
    left_keys.push(copy_of(&left));
    right_keys.push(copy_of(&right));
    LogicalPlanBuilder::from(left)
        .join_detailed(
            right,
            j.join_type,
            (left_keys, right_keys),
            None,
            NullEquality::NullEqualsNull,
        )?
        .project(kept)?
        .build()
}
