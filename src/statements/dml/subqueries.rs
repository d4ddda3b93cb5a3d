//! Subqueries in the WHERE of UPDATE and DELETE (`WHERE c < (SELECT min(x) FROM s)`, `WHERE
//! c NOT IN (SELECT ...)`, `WHERE EXISTS (SELECT ...)`): delta-rs evaluates the predicate file
//! by file and runs no subquery, so each one that does not refer to the table being changed is
//! run first, once, and stands in the predicate as its value: a scalar, a list of values, or
//! true/false. A subquery that refers to the changed table (a correlated one) is refused with
//! the MERGE that does the same.

use std::ops::ControlFlow;

use datafusion::arrow::array::Array;
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{Expr, Query, SetExpr, Visit, VisitMut, Visitor, VisitorMut};

use crate::engine::Session;
use crate::error::{Error, Result};

/// The most values an `IN (subquery)` may stand for in the predicate.
const MAX_VALUES: usize = 100_000;

/// Replace the subqueries of `predicate` by their values; `names` are the names the changed
/// table goes by in the statement (its alias and its own name), which a correlated subquery
/// refers to.
pub(super) async fn inline(
    session: &Session,
    predicate: &mut Expr,
    names: &[String],
) -> Result<()> {
    // Innermost first is not needed: a subquery runs whole, with its own subqueries.
    let mut found = Collect::default();
    let _ = Visit::visit(&*predicate, &mut found);
    if found.subqueries.is_empty() {
        return Ok(());
    }
    let mut values = Vec::with_capacity(found.subqueries.len());
    for query in &found.subqueries {
        if refers_to(query, names) {
            return Err(Error::class(
                "UNSUPPORTED_FEATURE",
                format!(
                    "a subquery that refers to the table being changed ({}) is not supported in UPDATE or DELETE: write it as MERGE INTO {} USING (<the subquery's rows>) ON <the condition> WHEN MATCHED THEN UPDATE SET ... | DELETE",
                    names.first().map(String::as_str).unwrap_or("the target"),
                    names.last().map(String::as_str).unwrap_or("the target"),
                ),
            ));
        }
        let run = async {
            let (df, _bound) =
                crate::statements::query::query_dataframe(session, query.clone()).await?;
            Ok::<_, Error>(df.collect().await?)
        };
        let batches = run.await.map_err(|e| {
            e.context(format!(
                "the subquery ({query}) runs on its own before the change (a column of the changed table cannot be named in it: use MERGE INTO for that)"
            ))
        })?;
        let mut rows = vec![];
        for b in &batches {
            if b.num_columns() != 1 {
                return Err(Error::Invalid(format!(
                    "a subquery in a WHERE gives one column, this one gives {}: {query}",
                    b.num_columns()
                )));
            }
            let column = b.column(0);
            for i in 0..column.len() {
                rows.push(ScalarValue::try_from_array(column, i)?);
                if rows.len() > MAX_VALUES {
                    return Err(Error::class(
                        "UNSUPPORTED_FEATURE",
                        format!(
                            "the subquery gives more than {MAX_VALUES} values, too many to stand in an UPDATE or DELETE predicate: use MERGE INTO ... USING (subquery) ON ... instead"
                        ),
                    ));
                }
            }
        }
        values.push(rows);
    }
    let mut replace = Replace {
        values: values.into_iter(),
        error: None,
    };
    let _ = VisitMut::visit(predicate, &mut replace);
    match replace.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The subqueries of an expression, outermost only, in visiting order.
#[derive(Default)]
struct Collect {
    subqueries: Vec<Query>,
    /// Inside a collected subquery: its own subqueries run with it.
    depth: usize,
}

fn subquery_of(e: &Expr) -> Option<&Query> {
    match e {
        Expr::Subquery(q)
        | Expr::InSubquery { subquery: q, .. }
        | Expr::Exists { subquery: q, .. } => Some(q),
        _ => None,
    }
}

impl Visitor for Collect {
    type Break = ();
    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        if let Some(q) = subquery_of(e) {
            if self.depth == 0 {
                self.subqueries.push(q.clone());
            }
            self.depth += 1;
        }
        ControlFlow::Continue(())
    }
    fn post_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        if subquery_of(e).is_some() {
            self.depth -= 1;
        }
        ControlFlow::Continue(())
    }
}

/// Whether a subquery names the changed table's alias or name as a qualifier (`t1.oid`).
fn refers_to(query: &Query, names: &[String]) -> bool {
    let mut found = false;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(query, |e| {
        if let Expr::CompoundIdentifier(parts) = e
            && parts.len() > 1
            && names
                .iter()
                .any(|n| parts[parts.len() - 2].value.eq_ignore_ascii_case(n))
            && !defines(query, &parts[parts.len() - 2].value)
        {
            found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found
}

/// Whether the subquery's own FROM names a relation `name` (then `name.c` is its own).
fn defines(query: &Query, name: &str) -> bool {
    let mut found = false;
    let _ = datafusion::sql::sqlparser::ast::visit_relations(query, |r| {
        if r.0
            .last()
            .and_then(|p| p.as_ident())
            .is_some_and(|i| i.value.eq_ignore_ascii_case(name))
        {
            found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    if let SetExpr::Select(select) = query.body.as_ref() {
        for from in &select.from {
            for factor in
                std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation))
            {
                let alias = match factor {
                    datafusion::sql::sqlparser::ast::TableFactor::Table { alias, .. }
                    | datafusion::sql::sqlparser::ast::TableFactor::Derived { alias, .. } => alias,
                    _ => &None,
                };
                if alias
                    .as_ref()
                    .is_some_and(|a| a.name.value.eq_ignore_ascii_case(name))
                {
                    found = true;
                }
            }
        }
    }
    found
}

/// Puts each outermost subquery's value in its place, in the order [`Collect`] found them.
struct Replace {
    values: std::vec::IntoIter<Vec<ScalarValue>>,
    error: Option<Error>,
}

impl VisitorMut for Replace {
    type Break = ();
    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if subquery_of(e).is_none() {
            return ControlFlow::Continue(());
        }
        let Some(rows) = self.values.next() else {
            self.error = Some(Error::Other("a subquery's value is missing".into()));
            return ControlFlow::Break(());
        };
        match value_of(e, rows) {
            Ok(new) => {
                *e = new;
                ControlFlow::Continue(())
            }
            Err(err) => {
                self.error = Some(err);
                ControlFlow::Break(())
            }
        }
    }
}

/// The expression a subquery's rows stand for.
fn value_of(e: &Expr, rows: Vec<ScalarValue>) -> Result<Expr> {
    let sql = match e {
        Expr::Exists { negated, .. } => if rows.is_empty() == *negated {
            "true"
        } else {
            "false"
        }
        .to_string(),
        Expr::Subquery(_) => match rows.as_slice() {
            [] => "NULL".to_string(),
            [v] => literal(v)?,
            _ => {
                return Err(Error::class(
                    "SCALAR_SUBQUERY_TOO_MANY_ROWS",
                    format!("the scalar subquery {e} gives {} rows, not one", rows.len()),
                ));
            }
        },
        Expr::InSubquery { expr, negated, .. } => {
            if rows.is_empty() {
                // Nothing is IN an empty set, and everything (NULL too) is NOT IN it.
                if *negated { "true" } else { "false" }.to_string()
            } else {
                let list = rows.iter().map(literal).collect::<Result<Vec<_>>>()?;
                let not = if *negated { "NOT " } else { "" };
                format!("({expr}) {not}IN ({})", list.join(", "))
            }
        }
        _ => return Ok(e.clone()),
    };
    Ok(Expr::Nested(Box::new(crate::parser::expr_text(&sql)?)))
}

/// A value as SQL that reads back as exactly that value (as session variables are written),
/// for the types a subquery may stand as here.
fn literal(v: &ScalarValue) -> Result<String> {
    if v.is_null() {
        return Ok("NULL".into());
    }
    match v {
        ScalarValue::UInt64(Some(u)) => Ok(u.to_string()),
        ScalarValue::Boolean(_)
        | ScalarValue::Int8(_)
        | ScalarValue::Int16(_)
        | ScalarValue::Int32(_)
        | ScalarValue::Int64(_)
        | ScalarValue::UInt8(_)
        | ScalarValue::UInt16(_)
        | ScalarValue::UInt32(_)
        | ScalarValue::Float32(_)
        | ScalarValue::Float64(_)
        | ScalarValue::Decimal128(..)
        | ScalarValue::Utf8(_)
        | ScalarValue::LargeUtf8(_)
        | ScalarValue::Utf8View(_)
        | ScalarValue::Date32(_)
        | ScalarValue::TimestampMicrosecond(_, Some(_)) => {
            Ok(crate::engine::types::scalar_to_sql(v).to_string())
        }
        other => Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "a subquery value of type {} in an UPDATE or DELETE predicate is not supported yet: use MERGE INTO ... USING (subquery) ON ...",
                crate::engine::types::type_name(&other.data_type())
            ),
        )),
    }
}
