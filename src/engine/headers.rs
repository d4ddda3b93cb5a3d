//! Column names that read like the select list: `SELECT 1, upper(name), count(*)` shows
//! `1`, `upper(name)` and `count(*)` (as Databricks does), not the engine's `Int64(1)` or
//! `upper(t.name)`. Only the result's own select list is named (the first branch of a set
//! operation), so the names inside the query, which NATURAL joins, `BY NAME` set operations
//! and outer references match on, stay the engine's. Each unnamed expression gets its own
//! text as an alias, unless that name is already taken in the same select list.

use std::collections::HashSet;

use datafusion::sql::sqlparser::ast::{Expr, Ident, Query, SelectItem, SetExpr, SetQuantifier};

/// Name the unnamed expressions of the select list that makes `query`'s result.
pub fn name_as_written(query: &mut Query) {
    name_body(query.body.as_mut());
}

fn name_body(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => name_items(&mut select.projection),
        SetExpr::Query(query) => name_body(query.body.as_mut()),
        // `BY NAME` pairs the branches' columns by name: the names stay as both sides have them.
        SetExpr::SetOperation {
            set_quantifier:
                SetQuantifier::ByName | SetQuantifier::AllByName | SetQuantifier::DistinctByName,
            ..
        } => {}
        SetExpr::SetOperation { left, .. } => name_body(left),
        _ => {}
    }
}

fn name_items(items: &mut [SelectItem]) {
    let mut taken: HashSet<String> = items
        .iter()
        .filter_map(|item| match item {
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_lowercase()),
            SelectItem::UnnamedExpr(Expr::Identifier(i)) => Some(i.value.to_lowercase()),
            SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
                parts.last().map(|i| i.value.to_lowercase())
            }
            _ => None,
        })
        .collect();
    for item in items.iter_mut() {
        let SelectItem::UnnamedExpr(expr) = item else {
            continue;
        };
        if matches!(
            expr,
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Wildcard(_)
        ) {
            continue;
        }
        let name = expr.to_string();
        if !taken.insert(name.to_lowercase()) {
            continue;
        }
        *item = SelectItem::ExprWithAlias {
            expr: expr.clone(),
            alias: Ident::with_quote('`', name),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::DatabricksDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn named(sql: &str) -> String {
        let mut stmts = Parser::parse_sql(&DatabricksDialect {}, sql).unwrap();
        let datafusion::sql::sqlparser::ast::Statement::Query(q) = &mut stmts[0] else {
            panic!("not a query")
        };
        name_as_written(q);
        q.to_string()
    }

    #[test]
    fn expressions_are_named_as_written() {
        assert_eq!(
            named("SELECT 1, upper(name), count(*) FROM t"),
            "SELECT 1 AS `1`, upper(name) AS `upper(name)`, count(*) AS `count(*)` FROM t"
        );
        // Columns, aliases and wildcards keep their names; a name already taken stays the
        // engine's.
        assert_eq!(
            named("SELECT a, t.b, x + 1 AS y, *, a + 1, a + 1 FROM t"),
            "SELECT a, t.b, x + 1 AS y, *, a + 1 AS `a + 1`, a + 1 FROM t"
        );
        // Only the result's select list: not CTEs or subqueries; the first branch of a set
        // operation, none of a BY NAME one.
        assert_eq!(
            named("WITH c AS (SELECT 2) SELECT 1, * FROM (SELECT 3) UNION ALL SELECT 4"),
            "WITH c AS (SELECT 2) SELECT 1 AS `1`, * FROM (SELECT 3) UNION ALL SELECT 4"
        );
        assert_eq!(
            named("SELECT x + 1 FROM a UNION ALL BY NAME SELECT x + 1 FROM a"),
            "SELECT x + 1 FROM a UNION ALL BY NAME SELECT x + 1 FROM a"
        );
    }
}
