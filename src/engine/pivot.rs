//! `FROM t PIVOT (agg(x) [AS a], ... FOR col IN (v [AS n], ...))`, Databricks' pivot: one row
//! per group of the columns of `t` that neither an aggregate nor the pivot column names, and
//! per value and aggregate a column `n` (one aggregate) or `n_a`, the aggregate over the rows
//! whose pivot column is the value (NULL matching NULL, as Spark's `<=>`). Written as the
//! grouped query with `FILTER (WHERE col <=> v)` on each aggregate, so it needs the columns of
//! `t`: the source is a table (a subquery or a CTE is refused by name).

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, ObjectName, PivotValueSource, TableFactor, VisitMut, VisitorMut,
};

use crate::catalog::backquoted;
use crate::error::{Error, Result};

/// The tables pivoted in `node`; None when it has no PIVOT.
pub(crate) fn sources<T: VisitMut>(node: &mut T) -> Option<Vec<ObjectName>> {
    struct Find(Option<Vec<ObjectName>>);
    impl VisitorMut for Find {
        type Break = ();
        fn pre_visit_table_factor(&mut self, f: &mut TableFactor) -> ControlFlow<()> {
            if let TableFactor::Pivot { table, .. } = f {
                let found = self.0.get_or_insert_with(Vec::new);
                if let TableFactor::Table { name, .. } = table.as_ref() {
                    found.push(name.clone());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut find = Find(None);
    let _ = node.visit(&mut find);
    find.0
}

/// Rewrite every PIVOT in `node`; `columns` holds each pivoted table's columns, by the
/// table's name as written.
pub(crate) fn rewrite<T: VisitMut>(
    node: &mut T,
    columns: &HashMap<String, Vec<String>>,
) -> Result<()> {
    struct Rewrite<'a> {
        columns: &'a HashMap<String, Vec<String>>,
        error: Option<Error>,
    }
    impl VisitorMut for Rewrite<'_> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, f: &mut TableFactor) -> ControlFlow<()> {
            if !matches!(f, TableFactor::Pivot { .. }) {
                return ControlFlow::Continue(());
            }
            match pivot(f, self.columns) {
                Ok(new) => {
                    *f = new;
                    ControlFlow::Continue(())
                }
                Err(e) => {
                    self.error = Some(e);
                    ControlFlow::Break(())
                }
            }
        }
    }
    let mut r = Rewrite {
        columns,
        error: None,
    };
    let _ = node.visit(&mut r);
    match r.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn refused(what: &str) -> Error {
    Error::class(
        "UNSUPPORTED_FEATURE",
        format!("PIVOT {what} is not supported yet"),
    )
}

/// The source's column names an expression reads (lower case): a name's first part, or its
/// second when the first is the source's name (`t.info.amount` and `info.amount` read `info`).
/// A lambda's parameters are not columns.
fn read(e: &Expr, qualifiers: &[String], into: &mut HashSet<String>) {
    let mut params = HashSet::new();
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(e, |x| {
        if let Expr::Lambda(l) = x {
            params.extend(l.params.iter().map(|p| p.name.value.to_lowercase()));
        }
        ControlFlow::<()>::Continue(())
    });
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(e, |x| {
        let name = match x {
            Expr::Identifier(i) => Some(i.value.to_lowercase()),
            Expr::CompoundIdentifier(parts) => {
                let first = parts[0].value.to_lowercase();
                if parts.len() > 1 && qualifiers.contains(&first) {
                    Some(parts[1].value.to_lowercase())
                } else {
                    Some(first)
                }
            }
            _ => None,
        };
        if let Some(n) = name.filter(|n| !params.contains(n)) {
            into.insert(n);
        }
        ControlFlow::<()>::Continue(())
    });
}

/// A pivot value as Spark names its column: the value as a string.
fn value_text(e: &Expr) -> String {
    use datafusion::sql::sqlparser::ast::Value;
    match e {
        Expr::Value(x) => match &x.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s.clone(),
            Value::Null => "null".into(),
            other => other.to_string(),
        },
        Expr::TypedString(t) => match &t.value.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s.clone(),
            other => other.to_string(),
        },
        // A typed literal (`1L`) as the number it was written as.
        Expr::Cast { expr, .. } if matches!(expr.as_ref(), Expr::Value(_)) => value_text(expr),
        Expr::Nested(inner) => value_text(inner),
        other => other.to_string(),
    }
}

fn pivot(f: &TableFactor, columns: &HashMap<String, Vec<String>>) -> Result<TableFactor> {
    let TableFactor::Pivot {
        table,
        aggregate_functions,
        value_column,
        value_source,
        default_on_null,
        alias,
    } = f
    else {
        return Err(Error::Other("not a PIVOT".into()));
    };
    if default_on_null.is_some() {
        return Err(refused("DEFAULT ON NULL"));
    }
    let TableFactor::Table {
        name,
        alias: source_alias,
        args: None,
        with_hints,
        version: None,
        partitions,
        ..
    } = table.as_ref()
    else {
        return Err(refused(
            "over a subquery, a table function or a time-travel read (pivot a table, or create a view of the query first)",
        ));
    };
    if !with_hints.is_empty() || !partitions.is_empty() {
        return Err(refused("over a table with hints or partitions"));
    }
    let Some(all) = columns.get(&name.to_string()) else {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "PIVOT over {name} is not supported yet: only a table can be pivoted (not a CTE, a view or a temporary view)"
            ),
        ));
    };
    let PivotValueSource::List(values) = value_source else {
        return Err(refused("IN (ANY ...) or IN (subquery): list the values"));
    };
    // `FOR (name, age) IN (...)`: the columns of the tuple.
    let value_column: Vec<Expr> = match value_column.as_slice() {
        [Expr::Tuple(items)] => items.clone(),
        [Expr::Nested(inner)] => vec![inner.as_ref().clone()],
        other => other.to_vec(),
    };
    let value_column = &value_column;
    // The names the source goes by: its alias, else its table name.
    let source_name = match source_alias {
        Some(a) => a.name.value.clone(),
        None => name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(|i| i.value.clone())
            .unwrap_or_default(),
    };
    let qualifiers = vec![source_name.to_lowercase()];
    let mut used = HashSet::new();
    for a in aggregate_functions {
        read(&a.expr, &qualifiers, &mut used);
    }
    for v in value_column {
        read(v, &qualifiers, &mut used);
    }
    let groups: Vec<&String> = all.iter().filter(|c| !used.contains(*c)).collect();
    let mut items: Vec<String> = groups.iter().map(|g| backquoted(g)).collect();
    for v in values {
        let parts: Vec<&Expr> = match (&v.expr, value_column.len()) {
            (_, 1) => vec![&v.expr],
            (Expr::Tuple(items), n) if items.len() == n => items.iter().collect(),
            (other, n) => {
                return Err(Error::Invalid(format!(
                    "PIVOT ... FOR ({n} columns) IN (...): the value {other} is not a tuple of {n} values"
                )));
            }
        };
        let condition: Vec<String> = value_column
            .iter()
            .zip(&parts)
            .map(|(c, v)| format!("(({c}) IS NOT DISTINCT FROM ({v}))"))
            .collect();
        let condition = condition.join(" AND ");
        let value_name = match &v.alias {
            Some(a) => a.value.clone(),
            None => value_text(&v.expr),
        };
        for a in aggregate_functions {
            let Expr::Function(func) = &a.expr else {
                return Err(Error::Invalid(format!(
                    "PIVOT takes aggregate calls, found {}",
                    a.expr
                )));
            };
            let mut func = func.clone();
            func.filter = Some(Box::new(match func.filter.take() {
                Some(existing) => {
                    crate::parser::expr_text(&format!("({existing}) AND ({condition})"))?
                }
                None => crate::parser::expr_text(&condition)?,
            }));
            let column = if aggregate_functions.len() == 1 {
                value_name.clone()
            } else {
                let agg = match &a.alias {
                    Some(alias) => alias.value.clone(),
                    None => a.expr.to_string(),
                };
                format!("{value_name}_{agg}")
            };
            items.push(format!("{func} AS {}", backquoted(&column)));
        }
    }
    let from = match source_alias {
        Some(a) => format!("{name} AS {a}"),
        None => name.to_string(),
    };
    let group_by = if groups.is_empty() {
        String::new()
    } else {
        format!(
            " GROUP BY {}",
            groups
                .iter()
                .map(|g| backquoted(g))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let sql = format!("SELECT {} FROM {from}{group_by}", items.join(", "));
    Ok(TableFactor::Derived {
        lateral: false,
        subquery: Box::new(crate::parser::query_text(&sql)?),
        // Unaliased, the result keeps the source's name (`sales.year`, as in Spark).
        alias: alias.clone().or_else(|| {
            Some(datafusion::sql::sqlparser::ast::TableAlias {
                explicit: true,
                name: datafusion::sql::sqlparser::ast::Ident::new(source_name.clone()),
                columns: vec![],
                at: None,
            })
        }),
        sample: None,
    })
}
