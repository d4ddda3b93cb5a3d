//! Column names that read like the select list: `SELECT 1, upper(name), count(*)` shows
//! `1`, `upper(name)` and `count(*)` (as Databricks does), not the engine's `Int64(1)` or
//! `upper(t.name)`. The query is planned as written; only its result's columns are renamed,
//! by a projection on top, so no name inside the query (which ORDER BY, DISTINCT, NATURAL
//! joins and set operations resolve against) changes. A written name already taken by
//! another result column leaves the engine's.

use std::collections::HashSet;

use datafusion::common::Column;
use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::Expr as DfExpr;
use datafusion::sql::sqlparser::ast::{Expr, Query, SelectItem, SetExpr, SetQuantifier};

/// How the result's select list was written: per item, its text when it is an unnamed
/// expression, and where the wildcards are.
pub struct Written {
    items: Vec<Item>,
}

enum Item {
    /// An unnamed expression, as written.
    Expr(String),
    /// `*` or `t.*`: any number of columns.
    Wildcard,
    /// A column: the engine's name is the table's.
    Named,
    /// An aliased expression: the alias as written (the engine's name differs at most in
    /// case, where a column of the statement spells the name otherwise).
    Alias(String),
}

impl Written {
    /// The select list that makes `query`'s result (the first branch of a set operation;
    /// none for `BY NAME`, whose branches pair their columns by name).
    pub fn of(query: &Query) -> Self {
        fn items(body: &SetExpr) -> Vec<Item> {
            match body {
                SetExpr::Select(select) => select
                    .projection
                    .iter()
                    .map(|item| match item {
                        SelectItem::UnnamedExpr(Expr::Identifier(_))
                        | SelectItem::UnnamedExpr(Expr::CompoundIdentifier(_)) => Item::Named,
                        // Databricks names explode's column `col`, and a `:` path's after
                        // its last field (the binder aliases both).
                        SelectItem::UnnamedExpr(Expr::Function(f))
                            if f.name.to_string().eq_ignore_ascii_case("explode") =>
                        {
                            Item::Named
                        }
                        SelectItem::UnnamedExpr(Expr::JsonAccess { .. }) => Item::Named,
                        // Generators of several columns, each named by the generator.
                        SelectItem::UnnamedExpr(Expr::Function(f))
                            if [
                                "posexplode",
                                "posexplode_outer",
                                "explode_outer",
                                "json_tuple",
                                "inline",
                                "inline_outer",
                                "stack",
                            ]
                            .iter()
                            .any(|g| f.name.to_string().eq_ignore_ascii_case(g)) =>
                        {
                            Item::Wildcard
                        }
                        SelectItem::UnnamedExpr(e) => Item::Expr(e.to_string()),
                        SelectItem::ExprWithAlias { alias, .. } => Item::Alias(alias.value.clone()),
                        _ => Item::Wildcard,
                    })
                    .collect(),
                SetExpr::Query(q) => items(&q.body),
                SetExpr::SetOperation {
                    set_quantifier:
                        SetQuantifier::ByName | SetQuantifier::AllByName | SetQuantifier::DistinctByName,
                    ..
                } => vec![],
                SetExpr::SetOperation { left, .. } => items(left),
                _ => vec![],
            }
        }
        Written {
            items: items(&query.body),
        }
    }

    /// The written name of each of `columns` result columns, where one is known: items
    /// before the first wildcard count from the start, items after the last from the end.
    #[cfg(test)]
    fn names(&self, columns: usize) -> Vec<Option<String>> {
        self.written(columns)
            .into_iter()
            .map(|w| w.map(|(text, _)| text))
            .collect()
    }

    /// [`Self::names`], each with whether it is an alias.
    fn written(&self, columns: usize) -> Vec<Option<(String, bool)>> {
        let mut names = vec![None; columns];
        let wild: Vec<usize> = (0..self.items.len())
            .filter(|&i| matches!(self.items[i], Item::Wildcard))
            .collect();
        for (i, item) in self.items.iter().enumerate() {
            let (Item::Expr(text) | Item::Alias(text)) = item else {
                continue;
            };
            let position = match (wild.first(), wild.last()) {
                (None, _) => Some(i),
                (Some(&first), _) if i < first => Some(i),
                (_, Some(&last)) if i > last => columns.checked_sub(self.items.len() - i),
                _ => None,
            };
            if let Some(p) = position.filter(|&p| p < columns) {
                names[p] = Some((text.clone(), matches!(item, Item::Alias(_))));
            }
        }
        names
    }

    /// `df` with its columns renamed as written (a projection on top: rows and order stay).
    pub fn rename(&self, df: DataFrame) -> datafusion::error::Result<DataFrame> {
        let schema = df.schema().clone();
        // An alias renames only what differs from it in case (anything else is the
        // engine's own name for a column a binder put there).
        let names: Vec<Option<String>> = self
            .written(schema.fields().len())
            .into_iter()
            .enumerate()
            .map(|(i, w)| {
                let engine = schema.field(i).name();
                w.filter(|(n, alias)| {
                    !alias || (n != engine && n.to_lowercase() == engine.to_lowercase())
                })
                .map(|(n, _)| n)
            })
            .collect();
        if names.iter().all(Option::is_none) {
            return Ok(df);
        }
        let mut taken: HashSet<String> = schema
            .fields()
            .iter()
            .zip(&names)
            .filter(|(_, n)| n.is_none())
            .map(|(f, _)| f.name().to_lowercase())
            .collect();
        let exprs: Vec<DfExpr> = names
            .into_iter()
            .enumerate()
            .map(|(i, name)| {
                let (qualifier, field) = schema.qualified_field(i);
                let column = DfExpr::Column(Column::from((qualifier, field)));
                match name {
                    Some(n) if taken.insert(n.to_lowercase()) => column.alias(n),
                    _ => {
                        taken.insert(field.name().to_lowercase());
                        column
                    }
                }
            })
            .collect();
        df.select(exprs)
    }

    /// `df` with the select list's aliases as written: an alias respelled for the statement's
    /// sake (`customerid AS CustomerID` over a table's `customerid`) names its column as
    /// written, as in Spark.
    pub fn aliases(&self, df: DataFrame) -> datafusion::error::Result<DataFrame> {
        let only = Written {
            items: self
                .items
                .iter()
                .map(|i| match i {
                    Item::Expr(_) => Item::Named,
                    Item::Alias(a) => Item::Alias(a.clone()),
                    Item::Named => Item::Named,
                    Item::Wildcard => Item::Wildcard,
                })
                .collect(),
        };
        only.rename(df)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::DatabricksDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn names(sql: &str, columns: usize) -> Vec<Option<String>> {
        let stmts = Parser::parse_sql(&DatabricksDialect {}, sql).unwrap();
        let datafusion::sql::sqlparser::ast::Statement::Query(q) = &stmts[0] else {
            panic!("not a query")
        };
        Written::of(q).names(columns)
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    #[test]
    fn result_columns_are_named_as_written() {
        assert_eq!(
            names("SELECT 1, upper(name), count(*) FROM t", 3),
            vec![some("1"), some("upper(name)"), some("count(*)")]
        );
        // Columns keep their names, aliases are as written (`rename` takes them only where the
        // engine's name differs in case); wildcards: before from the start, after from the end.
        assert_eq!(
            names("SELECT a, x + 1 AS Y, a + 1, *, b * 2 FROM t", 7),
            vec![
                None,
                some("Y"),
                some("a + 1"),
                None,
                None,
                None,
                some("b * 2")
            ]
        );
        // The first branch of a set operation; no CTE or subquery; nothing for BY NAME.
        assert_eq!(
            names(
                "WITH c AS (SELECT 2) SELECT 1 FROM (SELECT 3) UNION ALL SELECT 4",
                1
            ),
            vec![some("1")]
        );
        assert_eq!(
            names(
                "SELECT x + 1 FROM a UNION ALL BY NAME SELECT x + 1 FROM a",
                1
            ),
            vec![None]
        );
    }
}
