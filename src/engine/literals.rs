//! Integer literals typed as Databricks types them: `1` is an INT, and only a number past INT's
//! range (`3000000000`) a BIGINT. DataFusion's SQL planner makes every integer literal a BIGINT,
//! so `typeof(1)` said `bigint`, `CREATE TABLE t AS SELECT 1 AS id` made a BIGINT column, and
//! `1 << 31` was 2147483648 where Databricks computes -2147483648 (and `2147483647 + 1`
//! overflows INT there). [`int_literals`] narrows each BIGINT literal that fits in an INT before
//! types are coerced, so that coercion widens it wherever it meets a BIGINT (`big_col + 1` is
//! still a BIGINT).
//!
//! Left as they are: a LIMIT's and OFFSET's counts (DataFusion reads them as BIGINTs), a
//! column of VALUES where some row's number needs a BIGINT (Spark types that column BIGINT),
//! `count`'s argument, the literals of a recursive query (its work table is typed as planned),
//! and the plans of writes DataFusion plans itself (their values are cast to the table's
//! columns already).

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, Union, Values};

/// `plan` (as the SQL planner made it) with its integer literals typed as Databricks types
/// them. Done on the plan, not by an analyzer rule, so that the schema a DataFrame reports is
/// the one its batches have.
pub fn int_literals(plan: LogicalPlan) -> datafusion::common::Result<LogicalPlan> {
    if matches!(
        plan,
        LogicalPlan::Dml(_) | LogicalPlan::Copy(_) | LogicalPlan::Ddl(_)
    ) {
        return Ok(plan);
    }
    // A recursive query's work table is typed by its first term as planned: its literals stay
    // BIGINTs.
    let mut recursive = false;
    plan.apply_with_subqueries(|p| {
        recursive |= matches!(p, LogicalPlan::RecursiveQuery(_));
        Ok(if recursive {
            datafusion::common::tree_node::TreeNodeRecursion::Stop
        } else {
            datafusion::common::tree_node::TreeNodeRecursion::Continue
        })
    })?;
    if recursive {
        return Ok(plan);
    }
    plan.transform_up_with_subqueries(|node| match node {
        // DataFusion reads a LIMIT's counts as BIGINTs; an extension plans its own.
        LogicalPlan::Limit(_) | LogicalPlan::Extension(_) => Ok(Transformed::no(node)),
        LogicalPlan::Values(v) => values(v),
        // Typed by its first input again, as the SQL planner made it; coercion then
        // widens it to what every input gives.
        LogicalPlan::Union(u) => Ok(Transformed::yes(LogicalPlan::Union(
            Union::try_new_with_loose_types(u.inputs)?,
        ))),
        node => {
            let outputs = matches!(
                node,
                LogicalPlan::Projection(_) | LogicalPlan::Aggregate(_) | LogicalPlan::Window(_)
            );
            let mut schema = DFSchema::empty();
            for input in node.inputs() {
                schema.merge(input.schema());
            }
            let t = node.map_expressions(|e| {
                let name = e.qualified_name();
                let mut t = e.transform_down(narrowed)?;
                // A lambda's parameters are typed by the arrays it is given, which may
                // have changed here or below.
                if t.data
                    .exists(|e| Ok(matches!(e, Expr::HigherOrderFunction(_))))?
                {
                    t = t.transform_data(|e| e.resolve_lambda_variables(&schema))?;
                }
                if outputs && t.transformed && t.data.qualified_name() != name {
                    return Ok(t.update_data(|e| e.alias_qualified(name.0, name.1)));
                }
                Ok(t)
            })?;
            // A node whose schema follows its expressions or its inputs' (an input may
            // have changed below).
            let follows = matches!(
                t.data,
                LogicalPlan::Projection(_)
                    | LogicalPlan::Filter(_)
                    | LogicalPlan::Window(_)
                    | LogicalPlan::Aggregate(_)
                    | LogicalPlan::Join(_)
                    | LogicalPlan::SubqueryAlias(_)
                    | LogicalPlan::Distinct(_)
                    | LogicalPlan::Unnest(_)
            );
            if follows {
                Ok(Transformed::yes(t.data.recompute_schema()?))
            } else {
                Ok(t)
            }
        }
    })
    .map(|t| t.data)
}

/// The INT a BIGINT literal fits in.
fn int_of(e: &Expr) -> Option<i32> {
    match e {
        Expr::Literal(ScalarValue::Int64(Some(v)), None) => i32::try_from(*v).ok(),
        _ => None,
    }
}

/// `e` with its BIGINT literals that fit in an INT made INTs, except `count`'s argument
/// (`count(*)` is `count(1)` as a BIGINT, which DataFusion's plans of it look for).
fn narrowed(e: Expr) -> datafusion::common::Result<Transformed<Expr>> {
    use datafusion::common::tree_node::TreeNodeRecursion;
    let counts = |name: &str| name.eq_ignore_ascii_case("count");
    Ok(match e {
        Expr::AggregateFunction(ref f) if counts(f.func.name()) => {
            Transformed::new(e, false, TreeNodeRecursion::Jump)
        }
        Expr::WindowFunction(ref f) if counts(f.fun.name()) => {
            Transformed::new(e, false, TreeNodeRecursion::Jump)
        }
        e => match int_of(&e) {
            Some(v) => Transformed::yes(Expr::Literal(ScalarValue::Int32(Some(v)), None)),
            None => Transformed::no(e),
        },
    })
}

/// VALUES with their integer literals made INTs, column by column: a column changes when every
/// row then has one type (`VALUES (1), (3000000000)` stays BIGINT, as Spark types it).
fn values(v: Values) -> datafusion::common::Result<Transformed<LogicalPlan>> {
    let empty = DFSchema::empty();
    let width = v.schema.fields().len();
    let mut rows = v.values;
    let mut fields: Vec<_> = (0..width)
        .map(|c| {
            let (q, f) = v.schema.qualified_field(c);
            (q.cloned(), f.clone())
        })
        .collect();
    let mut changed = false;
    for (c, (_, field)) in fields.iter_mut().enumerate() {
        let mut cells = Vec::with_capacity(rows.len());
        let mut any = false;
        for row in &rows {
            let t = row[c].clone().transform_down(narrowed)?;
            any |= t.transformed;
            cells.push(t.data);
        }
        if !any {
            continue;
        }
        let nulls = |e: &Expr| matches!(e, Expr::Literal(s, _) if s.is_null());
        let mut types = cells
            .iter()
            .filter(|e| !nulls(e))
            .map(|e| e.get_type(&empty))
            .collect::<datafusion::common::Result<Vec<_>>>()?;
        types.dedup();
        let [t] = types.as_slice() else {
            continue;
        };
        if t == field.data_type() {
            continue;
        }
        let null = ScalarValue::try_from(t)?;
        for (row, cell) in rows.iter_mut().zip(cells) {
            row[c] = if nulls(&cell) {
                Expr::Literal(null.clone(), None)
            } else {
                cell
            };
        }
        *field = Arc::new(field.as_ref().clone().with_data_type(t.clone()));
        changed = true;
    }
    let schema = if changed {
        Arc::new(
            DFSchema::new_with_metadata(fields, v.schema.metadata().clone())?
                .with_functional_dependencies(v.schema.functional_dependencies().clone())?,
        )
    } else {
        v.schema
    };
    Ok(Transformed::new_transformed(
        LogicalPlan::Values(Values {
            schema,
            values: rows,
        }),
        changed,
    ))
}
