//! Databricks function spellings that neither DataFusion nor `datafusion-spark` registers,
//! rewritten in the syntax tree before planning into expressions DataFusion runs with
//! Databricks' semantics: `year(d)` is `CAST(date_part('year', CAST(d AS DATE)) AS INT)`,
//! `iff(c, a, b)` a CASE, `count_if(p)` a count of a CASE, `to_date(s, 'yyyy-MM-dd')` the
//! engine's `to_date` with the pattern translated, `range(n)` a table of column `id`. Each
//! rewrite re-parses SQL built from the arguments' own printed form, so an argument is
//! always one parenthesised expression, never text pasted into another's.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Query, SelectItem, SetExpr, TableFactor,
    Value, VisitorMut,
};

use crate::error::{Error, Result};

/// The alias of the engine's `range` inside the rewrite of `range(...)`.
const ENGINE_RANGE: &str = "__tidemark_range";

/// The names this module spells with the engine's functions: built-ins, though the engine
/// does not list them.
pub const SPELLED: &[&str] = &[
    "bigint",
    "binary",
    "boolean",
    "decimal",
    "double",
    "float",
    "int",
    "smallint",
    "string",
    "tinyint",
    "getdate",
    "curdate",
    "add_months",
    "approx_count_distinct",
    "count_if",
    "current_catalog",
    "current_user",
    "user",
    "session_user",
    "assert_true",
    "monotonically_increasing_id",
    "make_timestamp_ntz",
    "try_make_timestamp",
    "convert_timezone",
    "current_schema",
    "current_database",
    "date_add",
    "dateadd",
    "date_part",
    "datepart",
    "date_sub",
    "datediff",
    "date_diff",
    "day",
    "dayofmonth",
    "dayofweek",
    "dayofyear",
    "decode",
    "explode",
    "explode_outer",
    "posexplode",
    "posexplode_outer",
    "from_unixtime",
    "iff",
    "last_day",
    "max_by",
    "min_by",
    "month",
    "quarter",
    "regexp_extract",
    "to_date",
    "to_timestamp",
    "unix_timestamp",
    "to_unix_timestamp",
    "weekofyear",
    "year",
    "timestampadd",
    "timestampdiff",
    "range",
    "startswith",
    "endswith",
    "isnull",
    "isnotnull",
    "equal_null",
    "zeroifnull",
    "nullifzero",
    "locate",
    "sort_array",
    "every",
    "some",
    "any",
    "variance",
];

/// Aggregates whose DataFusion implementation takes DISTINCT and ignores it, besides those
/// with a DISTINCT form of tidemark's own ([`super::functions::DISTINCT_OF`]): refused with
/// DISTINCT, as those are over a window.
const IGNORE_DISTINCT: &[&str] = &[
    "covar",
    "approx_percentile_cont",
    "first_value",
    "last_value",
    "nth_value",
];

/// A call's argument list when it says DISTINCT (and has no other clause inside).
fn distinct_list(
    f: &datafusion::sql::sqlparser::ast::Function,
) -> Option<&datafusion::sql::sqlparser::ast::FunctionArgumentList> {
    match &f.args {
        FunctionArguments::List(l)
            if matches!(
                l.duplicate_treatment,
                Some(datafusion::sql::sqlparser::ast::DuplicateTreatment::Distinct)
            ) && l.clauses.is_empty() =>
        {
            Some(l)
        }
        _ => None,
    }
}

/// The rewriter; `catalog` and `schema` answer `current_catalog()` / `current_schema()`.
pub struct SparkSpellings<'a> {
    pub catalog: &'a str,
    pub schema: &'a str,
    pub error: Option<Error>,
    /// Per query being visited, its select items as written (see `pre_visit_query`).
    pub headers: Vec<Vec<Option<String>>>,
    /// Inline tables named so far (an unnamed one gets a name of its own).
    pub inline_tables: usize,
    /// Queries whose columns are named elsewhere, by address: a subquery in FROM (its alias
    /// names them) and the rows of an INSERT (the table's columns).
    pub named_elsewhere: std::collections::HashSet<usize>,
}

/// A query's address, to know it again while visiting.
fn address(query: &Query) -> usize {
    std::ptr::from_ref(query) as usize
}

/// A query that is a VALUES list (`VALUES (1, 'a')`, a CTE or CTAS of one, the first of a
/// UNION of them) has columns `col1`, `col2`, ... as in Databricks: the list becomes `SELECT *
/// FROM (VALUES ...) AS __inline_table_N(col1, ...)` (its ORDER BY and LIMIT stay outside).
fn name_values_columns(body: &mut SetExpr, named: &mut usize) {
    use datafusion::sql::sqlparser::ast::Statement;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    match body {
        SetExpr::Values(_) => {}
        // A set operation's columns are named by its first input.
        SetExpr::SetOperation { left, .. } => return name_values_columns(left, named),
        _ => return,
    }
    let Ok(mut parsed) = Parser::parse_sql(&GenericDialect {}, "SELECT * FROM (VALUES (1)) AS t")
    else {
        return;
    };
    let Some(Statement::Query(mut shell)) = parsed.pop() else {
        return;
    };
    let SetExpr::Select(select) = shell.body.as_mut() else {
        return;
    };
    let Some(TableFactor::Derived {
        subquery, alias, ..
    }) = select.from.first_mut().map(|f| &mut f.relation)
    else {
        return;
    };
    std::mem::swap(subquery.body.as_mut(), body);
    *alias = None;
    name_inline_table_columns(subquery, alias, named);
    std::mem::swap(shell.body.as_mut(), body);
}

/// An inline table's columns named as Databricks names them, `col1`, `col2`, ... (the engine
/// would say `column1`), unless the statement names them (`AS t(a, b)`).
fn name_inline_table_columns(
    subquery: &Query,
    alias: &mut Option<datafusion::sql::sqlparser::ast::TableAlias>,
    named: &mut usize,
) {
    use datafusion::sql::sqlparser::ast::{Ident, TableAlias, TableAliasColumnDef};
    let SetExpr::Values(values) = subquery.body.as_ref() else {
        return;
    };
    if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
        return;
    }
    // A row written as one tuple (`VALUES (('a', 10))`) is that tuple's columns.
    let Some(width) = values.rows.first().map(|r| match r.content.as_slice() {
        [Expr::Tuple(items)] => items.len(),
        content => content.len(),
    }) else {
        return;
    };
    let columns = (1..=width)
        .map(|i| TableAliasColumnDef::from_name(format!("col{i}")))
        .collect();
    *named += 1;
    match alias {
        Some(a) => a.columns = columns,
        None => {
            *alias = Some(TableAlias {
                explicit: true,
                name: Ident::new(format!("__inline_table_{named}")),
                columns,
                at: None,
            })
        }
    }
}

impl VisitorMut for SparkSpellings<'_> {
    type Break = ();

    /// Remember how each select item reads, so a rewritten one keeps it as its column name
    /// (`year(d)`, not the `date_part(...)` it became).
    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if !self.named_elsewhere.contains(&address(query)) {
            name_values_columns(query.body.as_mut(), &mut self.inline_tables);
        }
        if let Err(e) = monotonic_ids_where_numbered(query)
            .and_then(|()| group_by_modifiers(query.body.as_mut()))
            .and_then(|()| order_by_all(query))
        {
            self.error = Some(e);
            return ControlFlow::Break(());
        }
        spark_query_shapes(query);
        let items = match query.body.as_ref() {
            SetExpr::Select(select) => select
                .projection
                .iter()
                .map(|item| match item {
                    SelectItem::UnnamedExpr(e) => Some(e.to_string()),
                    _ => None,
                })
                .collect(),
            _ => vec![],
        };
        self.headers.push(items);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let items = self.headers.pop().unwrap_or_default();
        if let SetExpr::Select(select) = query.body.as_mut() {
            for (item, before) in select.projection.iter_mut().zip(items) {
                if let (SelectItem::UnnamedExpr(e), Some(before)) = (&*item, before)
                    && e.to_string() != before
                {
                    // Databricks names explode's column `col` (the item is explode's call itself).
                    let call = match e {
                        Expr::Nested(inner) => inner.as_ref(),
                        other => other,
                    };
                    let exploded = before.to_lowercase().starts_with("explode(")
                        && matches!(call, Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("unnest"));
                    let name = if exploded { "col".to_string() } else { before };
                    *item = SelectItem::ExprWithAlias {
                        expr: e.clone(),
                        alias: datafusion::sql::sqlparser::ast::Ident::with_quote('`', name),
                    };
                }
            }
            name_clashing_casts(&mut select.projection);
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match rewrite(expr, self.catalog, self.schema) {
            Ok(Some(new)) => *expr = new,
            Ok(None) => {}
            Err(e) => {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    /// The rows of an INSERT take the table's column names, not VALUES' own.
    fn pre_visit_statement(
        &mut self,
        statement: &mut datafusion::sql::sqlparser::ast::Statement,
    ) -> ControlFlow<()> {
        if let datafusion::sql::sqlparser::ast::Statement::Insert(insert) = statement
            && let Some(source) = &insert.source
        {
            self.named_elsewhere.insert(address(source));
        }
        ControlFlow::Continue(())
    }

    /// `range(n)` / `range(a, b[, step])` in FROM: Databricks names its column `id`. An
    /// inline table (`FROM VALUES (1, 'a')`) without column names has `col1`, `col2`, ...
    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Derived {
            subquery, alias, ..
        } = factor
        {
            name_inline_table_columns(subquery, alias, &mut self.inline_tables);
            self.named_elsewhere.insert(address(subquery));
            return ControlFlow::Continue(());
        }
        let TableFactor::Table {
            name,
            alias,
            args: Some(args),
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        // The engine's own `range` inside the rewrite carries an alias of its own: left as is.
        if name.to_string().to_lowercase() != "range"
            || alias.as_ref().is_some_and(|a| a.name.value == ENGINE_RANGE)
        {
            return ControlFlow::Continue(());
        }
        // Spark's range takes BIGINTs (`range(6 + cos(3))` is range(5)) and a fourth argument,
        // the number of partitions, which means nothing here. Dates and intervals (the
        // engine's own ranges) are left as they are.
        let list: Vec<String> = args
            .args
            .iter()
            .take(if args.args.len() == 4 {
                3
            } else {
                args.args.len()
            })
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(
                    e @ (Expr::TypedString(..) | Expr::Interval(_) | Expr::Cast { .. }),
                )) => e.to_string(),
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => format!("CAST(({e}) AS BIGINT)"),
                other => other.to_string(),
            })
            .collect();
        let sql = format!(
            "SELECT value AS id FROM range({}) AS {ENGINE_RANGE}",
            list.join(", ")
        );
        let alias = alias
            .clone()
            .unwrap_or_else(|| datafusion::sql::sqlparser::ast::TableAlias {
                explicit: true,
                name: datafusion::sql::sqlparser::ast::Ident::new("range"),
                columns: vec![],
                at: None,
            });
        match parse_query(&sql) {
            Ok(q) => {
                *factor = TableFactor::Derived {
                    lateral: false,
                    subquery: Box::new(q),
                    alias: Some(alias),
                    sample: None,
                };
                ControlFlow::Continue(())
            }
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

use crate::parser::{expr_text as parse_expr, query_text as parse_query};

/// `SELECT id, CAST(id AS BIGINT)`: the engine names a cast after the column it casts, so
/// the two items would clash ("unique expression names"). Databricks names a cast by its
/// text; such a cast gets that text as its alias. So do scalar subqueries, when several.
fn name_clashing_casts(items: &mut [SelectItem]) {
    fn engine_name(e: &Expr) -> Option<String> {
        match e {
            Expr::Identifier(i) => Some(i.value.to_lowercase()),
            Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.to_lowercase()),
            Expr::Cast { expr, .. } | Expr::Nested(expr) => engine_name(expr),
            _ => None,
        }
    }
    let names: Vec<Option<String>> = items
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(e) => engine_name(e),
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_lowercase()),
            _ => None,
        })
        .collect();
    for (i, item) in items.iter_mut().enumerate() {
        let SelectItem::UnnamedExpr(e @ Expr::Cast { .. }) = &*item else {
            continue;
        };
        let clashes = names[i].as_ref().is_some_and(|n| {
            names
                .iter()
                .enumerate()
                .any(|(j, m)| j != i && m.as_ref() == Some(n))
        });
        if clashes {
            *item = SelectItem::ExprWithAlias {
                expr: e.clone(),
                alias: datafusion::sql::sqlparser::ast::Ident::with_quote('`', e.to_string()),
            };
        }
    }
    // The engine names every scalar subquery `(<subquery>)`: two of them would clash. Each is
    // named by its text instead.
    let subqueries = items
        .iter()
        .filter(|i| matches!(i, SelectItem::UnnamedExpr(Expr::Subquery(_))))
        .count();
    if subqueries > 1 {
        for item in items.iter_mut() {
            if let SelectItem::UnnamedExpr(e @ Expr::Subquery(_)) = &*item {
                *item = SelectItem::ExprWithAlias {
                    expr: e.clone(),
                    alias: datafusion::sql::sqlparser::ast::Ident::with_quote('`', e.to_string()),
                };
            }
        }
    }
}

/// A string literal in SQL.
pub(super) fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A Spark datetime pattern argument (a string literal) as the engine's chrono format, quoted.
fn chrono_pattern(function: &str, e: &Expr) -> Result<String> {
    let Expr::Value(v) = e else {
        return Err(Error::Invalid(format!(
            "{function}: the format must be a string literal, found {e}"
        )));
    };
    let (Value::SingleQuotedString(p) | Value::DoubleQuotedString(p)) = &v.value else {
        return Err(Error::Invalid(format!(
            "{function}: the format must be a string literal, found {e}"
        )));
    };
    let chrono = super::functions::spark_to_chrono(p)
        .map_err(|e| Error::Invalid(format!("{function}: {e}")))?;
    Ok(quoted(&super::functions::parsing_offsets(&chrono)))
}

/// Whether a chrono format (quoted) reads a zone or an offset (`%z`, `%:z`, `%Z`, ...).
fn names_a_zone(chrono: &str) -> bool {
    let mut chars = chrono.chars();
    while let Some(c) = chars.next() {
        // A specifier, past its modifiers (`%%` is a literal percent sign).
        if c == '%' && matches!(chars.find(|c| !matches!(c, ':' | '#')), Some('z' | 'Z')) {
            return true;
        }
    }
    false
}

/// Spark's spellings of query clauses DataFusion knows by other names: `MINUS` is `EXCEPT`,
/// `SEMI JOIN`/`ANTI JOIN` are `LEFT SEMI`/`LEFT ANTI`, and `SORT BY` (an order within each
/// partition; tidemark's result is one partition) is `ORDER BY`.
fn spark_query_shapes(query: &mut Query) {
    use datafusion::sql::sqlparser::ast::{JoinOperator, OrderBy, OrderByKind, SetOperator};
    fn body(set: &mut SetExpr) {
        match set {
            SetExpr::SetOperation {
                op, left, right, ..
            } => {
                if *op == SetOperator::Minus {
                    *op = SetOperator::Except;
                }
                body(left);
                body(right);
            }
            // `VALUES (('a', 10))`: a row written as one parenthesised tuple is that tuple's
            // columns, as Spark reads it.
            SetExpr::Values(values) => {
                for row in &mut values.rows {
                    if let [Expr::Tuple(items)] = row.content.as_slice() {
                        row.content = items.clone();
                    }
                }
            }
            SetExpr::Select(select) => {
                for from in &mut select.from {
                    for join in &mut from.joins {
                        join.join_operator = match std::mem::replace(
                            &mut join.join_operator,
                            JoinOperator::CrossJoin(
                                datafusion::sql::sqlparser::ast::JoinConstraint::None,
                            ),
                        ) {
                            JoinOperator::Semi(c) => JoinOperator::LeftSemi(c),
                            JoinOperator::Anti(c) => JoinOperator::LeftAnti(c),
                            other => other,
                        };
                    }
                }
            }
            _ => {}
        }
    }
    body(query.body.as_mut());
    if query.order_by.is_none()
        && let SetExpr::Select(select) = query.body.as_mut()
        && !select.sort_by.is_empty()
    {
        query.order_by = Some(OrderBy {
            kind: OrderByKind::Expressions(std::mem::take(&mut select.sort_by)),
            interpolate: None,
        });
    }
}

/// `GROUP BY a, b WITH ROLLUP | WITH CUBE | GROUPING SETS (...)` as the `ROLLUP(a, b)`,
/// `CUBE(a, b)` and `GROUPING SETS (...)` DataFusion plans (its planner dropped the modifiers:
/// no subtotal rows, a silent wrong answer). Other modifiers are refused by name.
fn group_by_modifiers(body: &mut SetExpr) -> Result<()> {
    use datafusion::sql::sqlparser::ast::{GroupByExpr, GroupByWithModifier};
    match body {
        SetExpr::Select(select) => match &mut select.group_by {
            GroupByExpr::Expressions(exprs, modifiers) if !modifiers.is_empty() => {
                // `GROUP BY 1, 2 WITH ROLLUP`: positions name select items (DataFusion reads
                // them only at the top of GROUP BY, not inside ROLLUP).
                let item = |e: &Expr| -> Expr {
                    if let Expr::Value(v) = e
                        && let Value::Number(n, _) = &v.value
                        && let Ok(i) = n.parse::<usize>()
                        && let Some(
                            SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. },
                        ) = i.checked_sub(1).and_then(|i| select.projection.get(i))
                    {
                        return x.clone();
                    }
                    e.clone()
                };
                let grouped: Vec<Vec<Expr>> = exprs.iter().map(|e| vec![item(e)]).collect();
                let new = match modifiers.as_slice() {
                    [GroupByWithModifier::Rollup] => Expr::Rollup(grouped),
                    [GroupByWithModifier::Cube] => Expr::Cube(grouped),
                    [GroupByWithModifier::GroupingSets(sets)] => sets.clone(),
                    _ => {
                        return Err(Error::class(
                            "UNSUPPORTED_FEATURE",
                            format!(
                                "GROUP BY ... {}: not supported",
                                modifiers
                                    .iter()
                                    .map(|m| m.to_string())
                                    .collect::<Vec<_>>()
                                    .join(" ")
                            ),
                        ));
                    }
                };
                select.group_by = GroupByExpr::Expressions(vec![new], vec![]);
                Ok(())
            }
            GroupByExpr::All(modifiers) if !modifiers.is_empty() => Err(Error::class(
                "UNSUPPORTED_FEATURE",
                "GROUP BY ALL with WITH ROLLUP, WITH CUBE or GROUPING SETS is not supported",
            )),
            _ => Ok(()),
        },
        SetExpr::SetOperation { left, right, .. } => {
            group_by_modifiers(left)?;
            group_by_modifiers(right)
        }
        _ => Ok(()),
    }
}

/// Databricks' `ORDER BY ALL [ASC|DESC] [NULLS FIRST|LAST]`: by every item of the select
/// list, left to right, each with those options; written as `ORDER BY 1, 2, ...`. A select
/// item named `all` is ordered by instead (Spark's rule); a list with `*` is refused.
fn order_by_all(query: &mut Query) -> Result<()> {
    use datafusion::sql::sqlparser::ast::{OrderByExpr, OrderByKind, Value};
    let Some(order_by) = &mut query.order_by else {
        return Ok(());
    };
    let OrderByKind::All(options) = &order_by.kind else {
        return Ok(());
    };
    let mut body = query.body.as_ref();
    while let SetExpr::SetOperation { left, .. } = body {
        body = left.as_ref();
    }
    let items = match body {
        SetExpr::Select(select) => &select.projection,
        _ => {
            return Err(Error::class(
                "UNSUPPORTED_FEATURE",
                "ORDER BY ALL is supported after SELECT (and set operations of SELECTs) only: name the columns",
            ));
        }
    };
    let star = items.iter().any(|i| {
        matches!(
            i,
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
        )
    });
    if star {
        // (The engine's own ORDER BY ALL over `*` reads names unquoted: a mixed-case column
        // would not be found, or another one would.)
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            "ORDER BY ALL after SELECT * is not supported: name the columns, or ORDER BY 1, 2, ...",
        ));
    }
    // A select item named `all` is what `ORDER BY all` names, as in Spark.
    let named_all = items.iter().any(|i| match i {
        SelectItem::UnnamedExpr(Expr::Identifier(id)) => id.value.eq_ignore_ascii_case("all"),
        SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => parts
            .last()
            .is_some_and(|id| id.value.eq_ignore_ascii_case("all")),
        SelectItem::ExprWithAlias { alias, .. } => alias.value.eq_ignore_ascii_case("all"),
        _ => false,
    });
    let options = *options;
    if named_all {
        order_by.kind = OrderByKind::Expressions(vec![OrderByExpr {
            expr: Expr::Identifier(datafusion::sql::sqlparser::ast::Ident::with_quote(
                '`', "all",
            )),
            options,
            with_fill: None,
        }]);
        return Ok(());
    }
    let by = (1..=items.len())
        .map(|i| OrderByExpr {
            expr: Expr::value(Value::Number(i.to_string(), false)),
            options,
            with_fill: None,
        })
        .collect();
    order_by.kind = OrderByKind::Expressions(by);
    Ok(())
}

/// `monotonically_increasing_id()` is the row's number in its select list (row_number() over
/// the query's rows), so it is refused where that would not be Spark's id: outside a select
/// list (WHERE, GROUP BY, HAVING, VALUES), and in a CTE read more than once (each read numbers
/// its rows again, in the order they arrive: a self-join would pair other rows).
fn monotonic_ids_where_numbered(query: &Query) -> Result<()> {
    const NAME: &str = "monotonically_increasing_id";
    fn calls<T: datafusion::sql::sqlparser::ast::Visit>(node: &T) -> bool {
        datafusion::sql::sqlparser::ast::visit_expressions(node, |e| match e {
            Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case(NAME) => {
                ControlFlow::Break(())
            }
            _ => ControlFlow::Continue(()),
        })
        .is_break()
    }
    fn reads<T: datafusion::sql::sqlparser::ast::Visit>(node: &T, alias: &str) -> usize {
        let mut n = 0;
        let _ = datafusion::sql::sqlparser::ast::visit_relations(node, |name| {
            if name.0.len() == 1
                && name
                    .to_string()
                    .trim_matches('`')
                    .eq_ignore_ascii_case(alias)
            {
                n += 1;
            }
            ControlFlow::<()>::Continue(())
        });
        n
    }
    let refuse = |where_: &str| {
        Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "{NAME}() {where_} is not supported: here it numbers the rows of a select list; \
                 compute it in a select list and save the result first (CREATE TABLE ... AS)"
            ),
        ))
    };
    if let Some(with) = &query.with {
        // A CTE numbers rows when it calls the function or reads a CTE that does.
        let mut numbering: Vec<String> = vec![];
        for cte in &with.cte_tables {
            if calls(&cte.query) || numbering.iter().any(|a| reads(&cte.query, a) > 0) {
                numbering.push(cte.alias.name.value.clone());
            }
        }
        for alias in &numbering {
            let n = reads(query, alias);
            if n > 1 {
                return refuse(&format!("in the CTE {alias}, read {n} times,"));
            }
        }
    }
    match query.body.as_ref() {
        SetExpr::Select(select) => {
            if select.selection.as_ref().is_some_and(calls) {
                return refuse("in WHERE");
            }
            if select.having.as_ref().is_some_and(calls) {
                return refuse("in HAVING");
            }
            if calls(&select.group_by) {
                return refuse("in GROUP BY");
            }
            if select
                .from
                .iter()
                .any(|t| t.joins.iter().any(|j| calls(&j.join_operator)))
            {
                return refuse("in a join's condition");
            }
        }
        SetExpr::Values(values) if calls(values) => return refuse("in VALUES"),
        _ => {}
    }
    Ok(())
}

/// The rewrite of one function call, if it is one of the spellings handled here.
fn rewrite(expr: &Expr, catalog: &str, schema: &str) -> Result<Option<Expr>> {
    if let Some(new) = super::collation::rewrite(expr)? {
        return Ok(Some(new));
    }
    // `CAST(x AS DECIMAL)` without a precision is DECIMAL(10,0), as in Databricks (DataFusion
    // reads DECIMAL(38,10): `CAST('1.7' AS DECIMAL)` was 1.7000000000, not 2).
    if let Expr::Cast {
        data_type:
            datafusion::sql::sqlparser::ast::DataType::Decimal(info)
            | datafusion::sql::sqlparser::ast::DataType::Numeric(info)
            | datafusion::sql::sqlparser::ast::DataType::Dec(info),
        ..
    } = expr
        && *info == datafusion::sql::sqlparser::ast::ExactNumberInfo::None
    {
        let mut cast = expr.clone();
        if let Expr::Cast { data_type, .. } = &mut cast {
            *data_type = datafusion::sql::sqlparser::ast::DataType::Decimal(
                datafusion::sql::sqlparser::ast::ExactNumberInfo::PrecisionAndScale(10, 0),
            );
        }
        return Ok(Some(cast));
    }
    // `CAST(x AS BINARY)`: the engine's planner knows the type only as BYTEA.
    if let Expr::Cast {
        data_type: datafusion::sql::sqlparser::ast::DataType::Binary(None),
        ..
    } = expr
    {
        let mut cast = expr.clone();
        if let Expr::Cast { data_type, .. } = &mut cast {
            *data_type = datafusion::sql::sqlparser::ast::DataType::Bytea;
        }
        return Ok(Some(cast));
    }
    if let Expr::Function(f) = expr
        && let Some(g) = listagg(f)?
    {
        return Ok(Some(Expr::Function(g)));
    }
    // ceil(x, d) / floor(x, d): to d digits (sqlparser reads the scale into the expression).
    if let Expr::Ceil { expr: x, field } | Expr::Floor { expr: x, field } = expr
        && let datafusion::sql::sqlparser::ast::CeilFloorKind::Scale(d) = field
    {
        let f = if matches!(expr, Expr::Ceil { .. }) {
            super::functions::CEIL_TO
        } else {
            super::functions::FLOOR_TO
        };
        return Ok(Some(parse_expr(&format!("{f}({x}, {d})"))?));
    }
    // `acc.sum` in a lambda's body, `acc` a parameter: a field of the parameter (DataFusion
    // reads the dotted name as a column).
    if let Expr::Lambda(lambda) = expr {
        let params: Vec<String> = lambda
            .params
            .iter()
            .map(|p| p.name.value.to_lowercase())
            .collect();
        let mut lambda = lambda.clone();
        let mut failed = None;
        let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(&mut *lambda.body, |e| {
            if let Expr::CompoundIdentifier(parts) = e
                && parts.len() > 1
                && params.contains(&parts[0].value.to_lowercase())
            {
                let mut text = parts[0].to_string();
                for field in &parts[1..] {
                    text = format!("get_field({text}, {})", quoted(&field.value));
                }
                match parse_expr(&text) {
                    Ok(new) => *e = new,
                    Err(err) => {
                        failed = Some(err);
                        return ControlFlow::Break(());
                    }
                }
            }
            ControlFlow::Continue(())
        });
        if let Some(err) = failed {
            return Err(err);
        }
        return Ok(Some(Expr::Lambda(lambda)).filter(|l| l != expr));
    }
    if let Expr::Extract {
        field: datafusion::sql::sqlparser::ast::DateTimeField::Epoch,
        expr: x,
        ..
    } = expr
    {
        return Ok(Some(Expr::Nested(Box::new(parse_expr(&epoch_seconds(
            &format!("({x})"),
        ))?))));
    }
    // extract(SECOND FROM ts): the seconds with their fraction, DECIMAL(8,6) as Spark's
    // (DataFusion's drops the fraction; `second(ts)` stays whole).
    if let Expr::Extract {
        field:
            datafusion::sql::sqlparser::ast::DateTimeField::Second
            | datafusion::sql::sqlparser::ast::DateTimeField::Seconds,
        expr: x,
        ..
    } = expr
    {
        return Ok(Some(Expr::Nested(Box::new(parse_expr(
            &seconds_with_fraction(x),
        )?))));
    }
    // extract(HOUR FROM '2024-01-01 10:00:00+02:00'): Spark reads the text as a TIMESTAMP
    // (the engine's date_part takes no text; SECOND and EPOCH are read above).
    if let Expr::Extract {
        field,
        syntax,
        expr: x,
    } = expr
        && matches!(x.as_ref(), Expr::Value(v) if matches!(v.value, Value::SingleQuotedString(_) | Value::DoubleQuotedString(_)))
    {
        let read = parse_expr(&format!("{}({x})", super::functions::TO_TIMESTAMP))?;
        return Ok(Some(Expr::Extract {
            field: field.clone(),
            syntax: syntax.clone(),
            expr: Box::new(read),
        }));
    }
    // `s RLIKE p` / `s REGEXP p`: DataFusion's planner has no such operator.
    if let Expr::RLike {
        negated,
        expr: s,
        pattern,
        ..
    } = expr
    {
        let not = if *negated { "NOT " } else { "" };
        return Ok(Some(Expr::Nested(Box::new(parse_expr(&format!(
            "{not}regexp_like(({s}), ({pattern}))"
        ))?))));
    }
    // struct(a, b AS x, 1): Spark names the fields after the columns (`a`), the aliases
    // (`x`), else `col<position>` (DataFusion named them c0, c1, ...).
    if let Expr::Struct { values, fields } = expr
        && fields.is_empty()
        && !values.is_empty()
    {
        let mut named = vec![];
        for (i, v) in values.iter().enumerate() {
            let (name, value) = match v {
                Expr::Named { expr, name } => (name.value.clone(), expr.as_ref()),
                Expr::Identifier(id) => (id.value.clone(), v),
                Expr::CompoundIdentifier(parts) => {
                    (parts.last().map(|p| p.value.clone()).unwrap_or_default(), v)
                }
                _ => (format!("col{}", i + 1), v),
            };
            named.push(format!("{}, ({value})", quoted(&name)));
        }
        return Ok(Some(Expr::Nested(Box::new(parse_expr(&format!(
            "named_struct({})",
            named.join(", ")
        ))?))));
    }
    // UTF8_BINARY, UTF8_LCASE and the RTRIM forms: rewritten with the comparison or call
    // they are in (UTF8_BINARY, how strings compare anyway, is dropped at the end).
    if super::collation::kept(expr) {
        return Ok(None);
    }
    if let Expr::Collate { collation, .. } = expr {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "COLLATE {collation}: collations are not supported (strings compare byte by byte, as UTF8_BINARY)"
            ),
        ));
    }
    // `map('k', 1).k`, `named_struct(...).f`: a map's key or a struct's field by name
    // (DataFusion's planner takes a dot only after a column).
    if let Expr::CompoundFieldAccess { root, access_chain } = expr
        && !matches!(
            root.as_ref(),
            Expr::Identifier(_) | Expr::CompoundIdentifier(_)
        )
        && access_chain.iter().any(|a| {
            matches!(
                a,
                datafusion::sql::sqlparser::ast::AccessExpr::Dot(Expr::Identifier(_))
            )
        })
    {
        use datafusion::sql::sqlparser::ast::AccessExpr;
        let mut text = format!("({root})");
        for access in access_chain {
            text = match access {
                AccessExpr::Dot(Expr::Identifier(id)) => {
                    format!("get_field({text}, {})", quoted(&id.value))
                }
                AccessExpr::Dot(other) => format!("({text}).{other}"),
                AccessExpr::Subscript(sub) => format!("({text})[{sub}]"),
            };
        }
        return Ok(Some(Expr::Nested(Box::new(parse_expr(&text)?))));
    }
    let Expr::Function(f) = expr else {
        return Ok(None);
    };
    if f.name.0.len() != 1 || !matches!(f.parameters, FunctionArguments::None) {
        return Ok(None);
    }
    let name = f.name.to_string().to_lowercase();
    // `corr(DISTINCT a, b)`, `skewness(DISTINCT x)`, ...: the aggregate over the distinct rows
    // of its arguments (DataFusion's take DISTINCT and ignore it, or refuse it).
    if distinct_list(f).is_some() && f.over.is_none() && f.within_group.is_empty() {
        let canonical = match name.as_str() {
            "variance" => "var_samp",
            "var" => "var_samp",
            "stddev" | "std" => "stddev_samp",
            "approx_percentile" => "percentile_approx",
            "covar" => "covar_samp",
            other => other,
        };
        if super::functions::DISTINCT_OF.contains(&canonical) {
            let mut g = f.clone();
            g.name = datafusion::sql::sqlparser::ast::ObjectName::from(vec![
                datafusion::sql::sqlparser::ast::Ident::new(format!(
                    "{}{canonical}",
                    super::functions::DISTINCT_PREFIX
                )),
            ]);
            if let FunctionArguments::List(l) = &mut g.args {
                l.duplicate_treatment = None;
            }
            return Ok(Some(Expr::Function(g)));
        }
    }
    // Spark's percentile_cont of an array of percentages, and percentile_disc (the smallest
    // value whose share of values at or below it reaches p: percentile_approx's exact answer).
    if matches!(name.as_str(), "percentile_cont" | "percentile_disc")
        && f.over.is_none()
        && let [order] = f.within_group.as_slice()
        && order.options.asc != Some(false)
        && let Some([p]) = plain_args(&f.args).as_deref()
        && (name == "percentile_disc" || matches!(p, Expr::Array(_) | Expr::Function(_)))
    {
        let x = &order.expr;
        let sql = if name == "percentile_disc" {
            format!("percentile_approx(({x}), ({p}))")
        } else {
            format!("percentile(({x}), ({p}))")
        };
        return with_clauses(f, &sql, None);
    }
    // DataFusion's statistical aggregates take DISTINCT and ignore it: refused, never a
    // different answer.
    if let FunctionArguments::List(l) = &f.args
        && matches!(
            l.duplicate_treatment,
            Some(datafusion::sql::sqlparser::ast::DuplicateTreatment::Distinct)
        )
        && (IGNORE_DISTINCT.contains(&name.as_str())
            || super::functions::DISTINCT_OF.contains(&name.as_str()))
    {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "{name}(DISTINCT ...) is not supported: aggregate DISTINCT values in a subquery first (SELECT {name}(x) FROM (SELECT DISTINCT x ...))"
            ),
        ));
    }
    // DISTINCT forms spelled with the engine's aggregates: Spark's array_agg is collect_list,
    // and with DISTINCT collect_set (datafusion-spark's: NULLs skipped, `[]` for a group
    // without values), collect_list(DISTINCT) too; count_if and try_avg.
    if let Some(l) = distinct_list(f)
        && f.within_group.is_empty()
        && let [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] = l.args.as_slice()
    {
        match name.as_str() {
            "array_agg" | "collect_list" => {
                return with_clauses(f, &format!("collect_set(({x}))"), None);
            }
            // The distinct values of the condition that are true: 1 when any row is.
            "count_if" => {
                return with_clauses(
                    f,
                    &format!("count(DISTINCT CASE WHEN ({x}) THEN true END)"),
                    None,
                );
            }
            "try_avg" => return with_clauses(f, &format!("avg(DISTINCT ({x}))"), None),
            _ => {}
        }
    }
    // count(DISTINCT a, b): the distinct rows in which no argument is NULL.
    if name == "count"
        && let Some(l) = distinct_list(f)
        && l.args.len() > 1
        && let Some(items) = l
            .args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(format!("({e})")),
                _ => None,
            })
            .collect::<Option<Vec<String>>>()
    {
        let present: Vec<String> = items.iter().map(|i| format!("{i} IS NOT NULL")).collect();
        let fields: Vec<String> = items
            .iter()
            .enumerate()
            .map(|(i, e)| format!("'c{i}', {e}"))
            .collect();
        return with_clauses(
            f,
            &format!(
                "count(DISTINCT CASE WHEN {} THEN named_struct({}) END)",
                present.join(" AND "),
                fields.join(", ")
            ),
            None,
        );
    }
    // Window ranking functions take no arguments; Spark accepts and ignores them (the
    // window's ORDER BY ranks).
    if f.over.is_some()
        && matches!(
            name.as_str(),
            "percent_rank" | "cume_dist" | "rank" | "dense_rank" | "row_number"
        )
        && matches!(&f.args, FunctionArguments::List(l) if !l.args.is_empty())
    {
        let mut g = f.clone();
        g.args = FunctionArguments::List(datafusion::sql::sqlparser::ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![],
            clauses: vec![],
        });
        return Ok(Some(Expr::Function(g)));
    }
    let Some(exprs) = plain_args(&f.args) else {
        return Ok(None);
    };
    let args: Vec<String> = exprs.iter().map(|e| format!("({e})")).collect();
    let scalar = f.over.is_none() && f.filter.is_none() && f.within_group.is_empty();
    // timestampadd(HOUR, n, ts) and timestampdiff(DAY, a, b), also spelled dateadd/date_add
    // and datediff/date_diff with three arguments: the unit keyword becomes a string.
    if scalar
        && let [Expr::Identifier(u), _, _] = exprs.as_slice()
        && u.quote_style.is_none()
    {
        let f = match name.as_str() {
            "timestampadd" | "dateadd" | "date_add" => Some("timestampadd"),
            "timestampdiff" | "datediff" | "date_diff" => Some("timestampdiff"),
            _ => None,
        };
        if let Some(f) = f {
            return Ok(Some(parse_expr(&format!(
                "{f}({}, {}, {})",
                quoted(&u.value.to_uppercase()),
                args[1],
                args[2]
            ))?));
        }
    }
    let aggregate = f.within_group.is_empty();
    let part = |p: &str, x: &str| format!("CAST(date_part('{p}', CAST({x} AS DATE)) AS INT)");
    let sql = match (name.as_str(), args.as_slice()) {
        ("year", [x]) if scalar => part("year", x),
        ("month", [x]) if scalar => part("month", x),
        ("day" | "dayofmonth", [x]) if scalar => part("day", x),
        ("quarter", [x]) if scalar => part("quarter", x),
        ("dayofyear", [x]) if scalar => part("doy", x),
        ("weekofyear", [x]) if scalar => part("week", x),
        // 1 = Sunday ... 7 = Saturday: Spark's `dow` (datafusion-spark's date_part).
        ("dayofweek", [x]) if scalar => part("dow", x),
        // Databricks' cast functions: `int(x)` is `CAST(x AS INT)`, and so on.
        (
            "bigint" | "binary" | "boolean" | "decimal" | "double" | "float" | "int" | "smallint"
            | "string" | "tinyint",
            [x],
        ) if scalar => {
            let ty = match name.as_str() {
                "decimal" => "DECIMAL(10, 0)",
                "binary" => "BYTEA",
                other => other,
            };
            format!("CAST({x} AS {})", ty.to_uppercase())
        }
        ("getdate", []) if scalar => "current_timestamp()".to_string(),
        ("curdate", []) if scalar => "current_date()".to_string(),
        ("current_catalog", []) if scalar => quoted(catalog),
        ("current_schema" | "current_database", []) if scalar => quoted(schema),
        // The user tidemark runs as (Databricks: the signed-in user).
        ("current_user" | "user" | "session_user", []) if scalar => quoted(&user_name()),
        // Spark numbers each partition's rows from partition << 33; here the query's rows are
        // numbered from 0 in the order they reach the projection: unique and increasing, the
        // same ids each time a CTE is read, starting again at 0 in each statement.
        ("monotonically_increasing_id", []) if scalar => {
            "(CAST(row_number() OVER () AS BIGINT) - 1)".to_string()
        }
        // NULL when true; otherwise (FALSE or NULL) the query fails, with Spark's message.
        ("assert_true", [c]) if scalar => format!(
            "CASE WHEN coalesce({c}, false) THEN NULL ELSE raise_error({}) END",
            // Spark prints a binary operation in parentheses: '(1 > 2)' is not true!
            quoted(&match exprs[0] {
                Expr::BinaryOp { .. } => format!("'({})' is not true!", exprs[0]),
                e => format!("'{e}' is not true!"),
            })
        ),
        ("assert_true", [c, message]) if scalar => {
            format!("CASE WHEN coalesce({c}, false) THEN NULL ELSE raise_error({message}) END")
        }
        ("iff", [c, a, b]) if scalar => format!("CASE WHEN {c} THEN {a} ELSE {b} END"),
        // Map lambdas `(k, v) -> ...` over the map's entries, the map read once (a key made
        // twice by transform_keys is [DUPLICATED_MAP_KEY], as in Databricks).
        ("transform_values" | "transform_keys" | "map_filter", [m, _])
            if scalar && matches!(exprs[1], Expr::Lambda(_)) =>
        {
            let body = entry_lambda_body(&name, exprs[1])?;
            let e = ENTRY;
            let entries = format!("map_entries({m})");
            let (key, value) = (
                format!("get_field({e}, 'key')"),
                format!("get_field({e}, 'value')"),
            );
            match name.as_str() {
                "transform_values" => format!(
                    "map_from_entries(transform({entries}, {e} -> named_struct('key', {key}, 'value', {body})))"
                ),
                // A NULL key is Databricks' [NULL_MAP_KEY] (the map's keys cannot hold one).
                "transform_keys" => format!(
                    "map_from_entries(transform({entries}, {e} -> named_struct('key', coalesce({body}, raise_error('[NULL_MAP_KEY] transform_keys(): the function gave a NULL key; a map key cannot be NULL')), 'value', {value})))"
                ),
                _ => format!("map_from_entries(filter({entries}, {e} -> {body}))"),
            }
        }
        // NULL for a day that does not exist (DataFusion's is an error).
        ("make_date", [y, m, d]) if scalar => safe_date(y, m, d),
        // A day, hour, minute or second that does not exist is NULL, as in Databricks SQL (a
        // Databricks Runtime cluster with ANSI on raises DATETIME_FIELD_OUT_OF_BOUNDS).
        ("make_timestamp" | "try_make_timestamp", [y, mo, d, h, mi, sec]) if scalar => {
            // The fields read in the session's zone: as a wall-clock time, then an instant.
            format!(
                "CAST(arrow_cast(arrow_cast({}, 'Timestamp(Microsecond, Some(\"UTC\"))'), 'Timestamp(Microsecond, None)') AS TIMESTAMP)",
                make_timestamp(&safe_date(y, mo, d), h, mi, sec)
            )
        }
        // The fields as a wall-clock time, in no zone (not read in the session's).
        ("make_timestamp_ntz", [y, mo, d, h, mi, sec]) if scalar => format!(
            "arrow_cast(arrow_cast({}, 'Timestamp(Microsecond, Some(\"UTC\"))'), 'Timestamp(Microsecond, None)')",
            make_timestamp(&safe_date(y, mo, d), h, mi, sec)
        ),
        // The wall-clock time `ts` in zone `from` as a wall-clock time in zone `to`.
        ("convert_timezone", [_, _, ts]) if scalar => format!(
            "from_utc_timestamp(to_utc_timestamp(CAST({ts} AS TIMESTAMP_NTZ), {}), {})",
            zone_arg(exprs[0]),
            zone_arg(exprs[1])
        ),
        ("convert_timezone", [_, ts]) if scalar => format!(
            "from_utc_timestamp(to_utc_timestamp(CAST({ts} AS TIMESTAMP_NTZ), current_timezone()), {})",
            zone_arg(exprs[0])
        ),
        ("make_timestamp" | "try_make_timestamp", [y, mo, d, h, mi, sec, _]) if scalar => format!(
            "to_utc_timestamp({}, {})",
            make_timestamp(&safe_date(y, mo, d), h, mi, sec),
            zone_arg(exprs[6])
        ),
        ("from_utc_timestamp" | "to_utc_timestamp", [t, _]) if scalar => {
            format!("{name}({t}, {})", zone_arg(exprs[1]))
        }
        ("months_between", [a, b]) if scalar => months_between(a, b, true),
        ("months_between", [a, b, round]) if scalar => match exprs[2] {
            Expr::Value(v) if matches!(v.value, Value::Boolean(false)) => {
                months_between(a, b, false)
            }
            Expr::Value(v) if matches!(v.value, Value::Boolean(true)) => months_between(a, b, true),
            _ => format!(
                "CASE WHEN {round} THEN {} ELSE {} END",
                months_between(a, b, true),
                months_between(a, b, false)
            ),
        },
        ("try_to_timestamp", [x]) if scalar => {
            format!("{}({x})", super::functions::TRY_TO_TIMESTAMP)
        }
        ("try_to_timestamp", [x, _]) if scalar => format!(
            "{}to_timestamp_micros({x}, {})",
            super::functions::TRY_PREFIX,
            chrono_pattern("try_to_timestamp", exprs[1])?
        ),
        // 0 = Monday ... 6 = Sunday.
        ("weekday", [d]) if scalar => {
            format!("CAST(date_part('isodow', CAST({d} AS DATE)) - 1 AS INT)")
        }
        // A TIME literal: its hour, minute, second and text as those of a timestamp that day.
        ("hour" | "minute" | "second", [_]) if scalar && time_literal(exprs[0]).is_some() => {
            format!(
                "{name}(CAST('1970-01-01 {}' AS TIMESTAMP))",
                time_literal(exprs[0]).unwrap_or_default()
            )
        }
        ("date_format", [_, f]) if scalar && time_literal(exprs[0]).is_some() => format!(
            "date_format(CAST('1970-01-01 {}' AS TIMESTAMP), {f})",
            time_literal(exprs[0]).unwrap_or_default()
        ),
        // Spark's unit names; an unknown one is NULL (DataFusion's is an error).
        ("date_trunc", [_, x]) if scalar && string_literal(exprs[0]).is_some() => {
            let unit = string_literal(exprs[0]).unwrap_or_default().to_uppercase();
            match unit.as_str() {
                "YEAR" | "YYYY" | "YY" => format!("date_trunc('year', {x})"),
                "QUARTER" => format!("date_trunc('quarter', {x})"),
                "MONTH" | "MM" | "MON" => format!("date_trunc('month', {x})"),
                "WEEK" => format!("date_trunc('week', {x})"),
                "DAY" | "DD" => format!("date_trunc('day', {x})"),
                "HOUR" => format!("date_trunc('hour', {x})"),
                "MINUTE" => format!("date_trunc('minute', {x})"),
                "SECOND" => format!("date_trunc('second', {x})"),
                "MILLISECOND" => format!("date_trunc('millisecond', {x})"),
                "MICROSECOND" => format!("date_trunc('microsecond', {x})"),
                _ => "CAST(NULL AS TIMESTAMP)".to_string(),
            }
        }
        ("trunc", [_, _])
            if scalar
                && string_literal(exprs[1]).is_some_and(|u| {
                    !matches!(
                        u.to_uppercase().as_str(),
                        "YEAR" | "YYYY" | "YY" | "QUARTER" | "MONTH" | "MM" | "MON" | "WEEK"
                    )
                }) =>
        {
            "CAST(NULL AS DATE)".to_string()
        }
        // Spark's trunc takes a timestamp or a date string as its date.
        ("trunc", [d, u]) if scalar && string_literal(exprs[1]).is_some() => {
            format!("trunc(CAST({d} AS DATE), {u})")
        }
        // Spark names the fields after the arrays' columns, else "0", "1", ...
        ("arrays_zip", _) if scalar && !args.is_empty() => {
            let fields: Vec<String> = exprs
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let name = match e {
                        Expr::Identifier(id) => id.value.clone(),
                        Expr::CompoundIdentifier(parts) => {
                            parts.last().map(|p| p.value.clone()).unwrap_or_default()
                        }
                        _ => i.to_string(),
                    };
                    format!("{}, get_field(__z, '{}')", quoted(&name), i + 1)
                })
                .collect();
            format!(
                "transform(arrays_zip({}), __z -> named_struct({}))",
                args.join(", "),
                fields.join(", ")
            )
        }
        ("sentences", [text, ..]) if scalar && args.len() <= 3 => format!(
            "transform(filter(split({text}, '[.!?]+'), __s -> regexp_like(__s, '[\\p{{L}}\\p{{N}}]')), \
             __s -> regexp_extract_all(__s, '[\\p{{L}}\\p{{N}}]+(?:''[\\p{{L}}\\p{{N}}]+)*', 0))"
        ),
        // Spark's log(x) is the natural logarithm (DataFusion's is base 10), log(b, x) is
        // ln(x) / ln(b), and every logarithm of a number out of its domain is NULL.
        ("ln" | "log", [x]) if scalar => {
            format!("CASE WHEN {x} <= 0 THEN NULL ELSE ln(CAST({x} AS DOUBLE)) END")
        }
        // log(1, x) divides by ln(1) = 0, which Spark computes as Java does: ±Infinity, NaN.
        ("log", [b, x]) if scalar => format!(
            "CASE WHEN {b} <= 0 OR {x} <= 0 THEN NULL \
             WHEN {b} = 1 THEN CASE WHEN {x} = 1 THEN CAST('NaN' AS DOUBLE) WHEN {x} > 1 THEN CAST('Infinity' AS DOUBLE) ELSE CAST('-Infinity' AS DOUBLE) END \
             ELSE ln(CAST({x} AS DOUBLE)) / ln(CAST({b} AS DOUBLE)) END"
        ),
        ("log10" | "log2", [x]) if scalar => {
            format!("CASE WHEN {x} <= 0 THEN NULL ELSE {name}(CAST({x} AS DOUBLE)) END")
        }
        ("log1p", [x]) if scalar => format!(
            "CASE WHEN {x} <= -1 THEN NULL ELSE {}(CAST({x} AS DOUBLE)) END",
            super::functions::LOG1P
        ),
        // The square root of a negative number is NaN (DataFusion's is an error).
        ("sqrt", [x]) if scalar => format!(
            "sqrt(CASE WHEN {x} < 0 THEN CAST('NaN' AS DOUBLE) ELSE CAST({x} AS DOUBLE) END)"
        ),
        // NULL outside 0..20 (and for a number no INT holds).
        ("factorial", [x]) if scalar => {
            format!("CASE WHEN {x} BETWEEN 0 AND 20 THEN factorial(TRY_CAST({x} AS INT)) END")
        }
        ("grouping_id", _) if scalar && !args.is_empty() => {
            format!("CAST(grouping({}) AS BIGINT)", args.join(", "))
        }
        // Every match (DataFusion's replaces the first unless told 'g').
        ("regexp_replace", [s, p, r]) if scalar => {
            let r = match exprs[2] {
                Expr::Value(v) => match &v.value {
                    Value::SingleQuotedString(text) | Value::DoubleQuotedString(text) => {
                        quoted(&java_replacement(text, exprs[1])?)
                    }
                    _ => r.clone(),
                },
                // A computed replacement is passed as it is: its `$n` and `\\` are read by
                // Rust's rules, not Java's (README).
                _ => r.clone(),
            };
            format!("regexp_replace({s}, {p}, {r}, 'g')")
        }
        ("startswith", [a, b]) if scalar => format!("starts_with({a}, {b})"),
        ("lcase", [x]) if scalar => format!("lower({x})"),
        // To a number of digits (DataFusion's ceil/floor take none).
        ("ceil" | "ceiling", [x, d]) if scalar => {
            format!("{}({x}, {d})", super::functions::CEIL_TO)
        }
        ("floor", [x, d]) if scalar => format!("{}({x}, {d})", super::functions::FLOOR_TO),
        ("ucase", [x]) if scalar => format!("upper({x})"),
        ("space", [n]) if scalar => format!("space(CAST({n} AS INT))"),
        ("e", []) if scalar => "CAST(2.718281828459045 AS DOUBLE)".to_string(),
        ("positive", [x]) if scalar => format!("(+{x})"),
        ("sign", [x]) if scalar => format!("signum({x})"),
        ("rint", [x]) if scalar => format!("rint(CAST({x} AS DOUBLE))"),
        // Spark's conversion functions.
        // (tidemark's TIMESTAMP cast: numbers are seconds, the session zone applies).
        ("timestamp", [x]) if scalar => format!("{}({x})", super::functions::TO_TIMESTAMP),
        ("date", [x]) if scalar => format!("CAST({x} AS DATE)"),
        // Spark reads a string argument as a timestamp.
        ("hour" | "minute" | "second", [x])
            if scalar
                && matches!(exprs[0], Expr::Value(v) if matches!(v.value, Value::SingleQuotedString(_) | Value::DoubleQuotedString(_))) =>
        {
            format!("{name}({}({x}))", super::functions::TO_TIMESTAMP)
        }
        // A day name that is none is an error (ANSI mode), not NULL.
        ("next_day", [d, w]) if scalar => {
            const DAYS: [&str; 21] = [
                "MO",
                "MON",
                "MONDAY",
                "TU",
                "TUE",
                "TUESDAY",
                "WE",
                "WED",
                "WEDNESDAY",
                "TH",
                "THU",
                "THURSDAY",
                "FR",
                "FRI",
                "FRIDAY",
                "SA",
                "SAT",
                "SATURDAY",
                "SU",
                "SUN",
                "SUNDAY",
            ];
            match exprs[1] {
                Expr::Value(v) => match &v.value {
                    Value::SingleQuotedString(t) | Value::DoubleQuotedString(t)
                        if !DAYS.contains(&t.to_uppercase().as_str()) =>
                    {
                        return Err(Error::class(
                            "ILLEGAL_DAY_OF_WEEK",
                            format!(
                                "next_day(): '{t}' is not a day of the week (MO, MON, MONDAY, TU, ...)"
                            ),
                        ));
                    }
                    _ => format!("next_day(CAST({d} AS DATE), {w})"),
                },
                _ => {
                    let days: Vec<String> = DAYS.iter().map(|d| quoted(d)).collect();
                    format!(
                        "CASE WHEN {w} IS NULL OR upper({w}) IN ({}) THEN next_day(CAST({d} AS DATE), {w}) \
                         ELSE raise_error(concat('[ILLEGAL_DAY_OF_WEEK] not a day of the week: ', {w})) END",
                        days.join(", ")
                    )
                }
            }
        }
        ("date_from_unix_date", [n]) if scalar => format!("CAST(CAST({n} AS INT) AS DATE)"),
        ("unix_date", [d]) if scalar => format!("CAST(CAST({d} AS DATE) AS INT)"),
        // -1 past the threshold.
        ("levenshtein", [a, b, t]) if scalar => {
            format!(
                "CASE WHEN {t} IS NULL THEN NULL WHEN levenshtein({a}, {b}) > {t} THEN -1 ELSE levenshtein({a}, {b}) END"
            )
        }
        // The first match of the whole pattern, NULL when none (or empty).
        ("regexp_substr", [s, p]) if scalar => {
            format!("nullif(regexp_match({s}, concat('(', {p}, ')'))[0], '')")
        }
        // Inclusive, counting down when stop < start.
        ("sequence", [a, b]) if scalar => {
            format!("generate_series({a}, {b}, CASE WHEN {a} <= {b} THEN 1 ELSE -1 END)")
        }
        // A number step that goes away from stop is an error, as in Databricks (the engine's
        // series is empty); a step of 0 gives [start] when start is stop.
        ("sequence", [a, b, step])
            if scalar
                && matches!(exprs[2], Expr::Value(_) | Expr::UnaryOp { .. })
                && !matches!(exprs[2], Expr::Value(v) if !matches!(v.value, Value::Number(..))) =>
        {
            format!(
                "CASE WHEN {step} = 0 AND {a} = {b} THEN generate_series({a}, {b}, 1) \
                 WHEN {step} = 0 OR ({step} > 0 AND {a} > {b}) OR ({step} < 0 AND {a} < {b}) \
                 THEN raise_error(concat('[ILLEGAL_SEQUENCE_BOUNDARIES] sequence(): the step ', CAST({step} AS STRING), ' never reaches the stop')) \
                 ELSE generate_series({a}, {b}, {step}) END"
            )
        }
        ("sequence", [a, b, step]) if scalar => format!("generate_series({a}, {b}, {step})"),
        ("map_contains_key", [m, k]) if scalar => {
            format!("CASE WHEN {k} IS NULL THEN NULL ELSE array_has(map_keys({m}), {k}) END")
        }
        // A key in both maps is [DUPLICATED_MAP_KEY], as in Databricks.
        ("map_concat", [a, b]) if scalar => format!(
            "CASE WHEN {a} IS NULL OR {b} IS NULL THEN NULL ELSE map_from_arrays(array_concat(map_keys({a}), map_keys({b})), array_concat(map_values({a}), map_values({b}))) END"
        ),
        ("endswith", [a, b]) if scalar => format!("ends_with({a}, {b})"),
        ("isnull", [x]) if scalar => format!("({x} IS NULL)"),
        ("isnotnull", [x]) if scalar => format!("({x} IS NOT NULL)"),
        ("equal_null", [a, b]) if scalar => format!("({a} IS NOT DISTINCT FROM {b})"),
        ("zeroifnull", [x]) if scalar => format!("coalesce({x}, CAST(0 AS INT))"),
        ("nullifzero", [x]) if scalar => format!("nullif({x}, CAST(0 AS INT))"),
        // Spark's two-argument forms take the characters to trim first.
        ("ltrim", [chars, s]) if scalar => format!("trim(LEADING {chars} FROM {s})"),
        ("rtrim", [chars, s]) if scalar => format!("trim(TRAILING {chars} FROM {s})"),
        // position(substr, str[, pos]) and locate: where substr starts in str (1-based, 0
        // when absent), searching from pos. DataFusion's position(a, b) reads the arguments
        // the other way round.
        ("position" | "locate" | "charindex", [sub, s]) if scalar => {
            format!("CAST(strpos({s}, {sub}) AS INT)")
        }
        ("position" | "locate" | "charindex", [sub, s, pos]) if scalar => format!(
            "CAST(CASE WHEN {pos} IS NULL THEN 0 WHEN {sub} IS NULL OR {s} IS NULL THEN NULL \
             WHEN {pos} < 1 THEN 0 WHEN {sub} = '' THEN 1 \
             WHEN strpos(substr({s}, {pos}), {sub}) = 0 THEN 0 \
             ELSE strpos(substr({s}, {pos}), {sub}) + {pos} - 1 END AS INT)"
        ),
        // Spark's array_position: 0 when absent, NULL for a NULL element (DataFusion's: NULL
        // when absent, and it finds a NULL element).
        ("array_position", [a, e]) if scalar => format!(
            "CASE WHEN {e} IS NULL OR {a} IS NULL THEN NULL \
             ELSE coalesce(CAST(array_indexof({a}, {e}) AS BIGINT), 0) END"
        ),
        // Spark's arrays_overlap: true on a common non-NULL element; else NULL when both are
        // non-empty and one holds a NULL (DataFusion's matched NULL with NULL).
        ("arrays_overlap", [a, b]) if scalar => format!(
            "CASE WHEN {a} IS NULL OR {b} IS NULL THEN NULL \
             WHEN cardinality(array_intersect({a}, {b})) > \
                  CASE WHEN array_indexof(array_intersect({a}, {b}), NULL) IS NULL THEN 0 ELSE 1 END THEN true \
             WHEN cardinality({a}) > 0 AND cardinality({b}) > 0 \
                  AND (array_indexof({a}, NULL) IS NOT NULL OR array_indexof({b}, NULL) IS NOT NULL) THEN NULL \
             ELSE false END"
        ),
        // Every occurrence (DataFusion's array_remove removes the first only).
        ("array_remove", [a, e]) if scalar => format!("array_remove_all({a}, {e})"),
        // Spark's argument order: the array first (DataFusion's takes the element first).
        ("array_prepend", [a, e]) if scalar => {
            format!("CASE WHEN {a} IS NULL THEN NULL ELSE list_prepend({e}, {a}) END")
        }
        // NULL elements last (DataFusion's default puts them first).
        ("array_sort", [a]) if scalar => format!("array_sort({a}, 'ASC', 'NULLS LAST')"),
        // With a comparator lambda: tidemark's higher-order sort (DataFusion's takes none).
        ("array_sort", [a, _]) if scalar && matches!(exprs[1], Expr::Lambda(_)) => {
            format!("{}({a}, {})", super::functions::SORT_BY, exprs[1])
        }
        ("sort_array", [a]) if scalar => format!("array_sort({a}, 'ASC', 'NULLS FIRST')"),
        ("sort_array", [a, asc]) if scalar => format!(
            "CASE WHEN {asc} THEN array_sort({a}, 'ASC', 'NULLS FIRST') ELSE array_sort({a}, 'DESC', 'NULLS LAST') END"
        ),
        // One row per element (DataFusion's unnest); the select item is named `col`.
        ("explode", [a]) if scalar => format!("unnest({a})"),
        // Spark casts the date arguments (strings, timestamps) to DATE.
        ("datediff", [end, start]) if scalar => {
            format!("date_diff(CAST({end} AS DATE), CAST({start} AS DATE))")
        }
        ("date_add" | "dateadd", [d, n]) if scalar => {
            format!("date_add(CAST({d} AS DATE), CAST({n} AS INT))")
        }
        ("date_sub", [d, n]) if scalar => format!("date_sub(CAST({d} AS DATE), CAST({n} AS INT))"),
        ("add_months", [d, n]) if scalar => {
            format!("add_months(CAST({d} AS DATE), CAST({n} AS INT))")
        }
        ("last_day", [d]) if scalar => format!("last_day(CAST({d} AS DATE))"),
        // decode(bytes, 'UTF-8') / encode(text, 'UTF-8'): text from and to its UTF-8 bytes
        // (bytes that are not UTF-8 are an error, not replaced).
        ("decode", [b, _])
            if scalar
                && string_literal(exprs[1])
                    .is_some_and(|c| matches!(c.to_uppercase().as_str(), "UTF-8" | "UTF8")) =>
        {
            format!("CAST({b} AS STRING)")
        }
        ("encode", [t, _])
            if scalar
                && string_literal(exprs[1])
                    .is_some_and(|c| matches!(c.to_uppercase().as_str(), "UTF-8" | "UTF8")) =>
        {
            format!("CAST({t} AS BYTEA)")
        }
        ("decode", [e, rest @ ..]) if scalar && rest.len() >= 2 => decode(e, rest),
        ("to_date", [s]) if scalar => format!("CAST({s} AS DATE)"),
        ("to_date", [s, _]) if scalar => format!(
            "CAST(to_timestamp_micros({s}, {}) AS DATE)",
            chrono_pattern("to_date", exprs[1])?
        ),
        // Spark's date_part has no epoch: seconds since 1970 as a DOUBLE, as DataFusion's.
        ("date_part" | "datepart", [field, x])
            if scalar && field.to_lowercase().contains("'epoch'") =>
        {
            epoch_seconds(x)
        }
        // date_part('SECOND', ts): with the fraction, as extract(SECOND FROM ts).
        ("date_part" | "datepart", [_, _])
            if scalar
                && string_literal(exprs[0]).is_some_and(|f| {
                    matches!(
                        f.to_uppercase().as_str(),
                        "SECOND" | "S" | "SEC" | "SECONDS" | "SECS"
                    )
                }) =>
        {
            seconds_with_fraction(exprs[1])
        }
        // (`to_timestamp_ltz`: Databricks' name for it, a TIMESTAMP being an LTZ.)
        ("to_timestamp" | "to_timestamp_ltz", [s, _]) if scalar => format!(
            "to_timestamp_micros({s}, {})",
            chrono_pattern(&name, exprs[1])?
        ),
        ("to_timestamp_ltz", [x]) if scalar => format!("{}({x})", super::functions::TO_TIMESTAMP),
        ("to_timestamp_ntz", [x]) if scalar => format!("CAST({x} AS TIMESTAMP_NTZ)"),
        // The wall-clock time the format reads, in no zone.
        ("to_timestamp_ntz", [s, _]) if scalar => {
            let pattern = chrono_pattern("to_timestamp_ntz", exprs[1])?;
            if names_a_zone(&pattern) {
                return Err(Error::Invalid(format!(
                    "to_timestamp_ntz: the format {} reads a time zone, which a TIMESTAMP_NTZ has none of: use to_timestamp for an instant, or leave the zone out of the format",
                    exprs[1]
                )));
            }
            format!("{}({s}, {pattern})", super::functions::TO_TIMESTAMP_NTZ)
        }
        ("to_unix_timestamp", [x]) if scalar => whole_seconds(&format!("CAST({x} AS TIMESTAMP)")),
        ("to_unix_timestamp", [s, _]) if scalar => whole_seconds(&format!(
            "to_timestamp_micros({s}, {})",
            chrono_pattern("to_unix_timestamp", exprs[1])?
        )),
        ("unix_timestamp", []) if scalar => whole_seconds("now()"),
        ("unix_timestamp", [x]) if scalar => whole_seconds(&format!("CAST({x} AS TIMESTAMP)")),
        ("unix_timestamp", [s, _]) if scalar => whole_seconds(&format!(
            "to_timestamp_micros({s}, {})",
            chrono_pattern("unix_timestamp", exprs[1])?
        )),
        ("from_unixtime", [n]) if scalar => {
            format!("date_format(to_timestamp_seconds({n}), 'yyyy-MM-dd HH:mm:ss')")
        }
        ("from_unixtime", [n, fmt]) if scalar => {
            format!("date_format(to_timestamp_seconds({n}), {fmt})")
        }
        // Spark returns '' when the pattern does not match; group 0 is the whole match.
        ("regexp_extract", [s, re]) if scalar => regexp_extract(s, re, "1"),
        ("regexp_extract", [s, re, idx]) if scalar => regexp_extract(s, re, idx),
        // Aggregates keep their FILTER and OVER.
        ("count_if", [p]) if aggregate => {
            return with_clauses(f, &format!("count(CASE WHEN {p} THEN 1 END)"), None);
        }
        ("approx_count_distinct", [x]) if aggregate => {
            let counted = with_clauses(f, &format!("approx_distinct({x})"), None)?;
            return Ok(counted.map(|e| Expr::Cast {
                kind: datafusion::sql::sqlparser::ast::CastKind::Cast,
                expr: Box::new(e),
                data_type: datafusion::sql::sqlparser::ast::DataType::BigInt(None),
                array: false,
                format: None,
            }));
        }
        ("every", [p]) if aggregate => return with_clauses(f, &format!("bool_and({p})"), None),
        // The x of the n rows with the largest (smallest) y, largest (smallest) first.
        ("max_by" | "min_by", [x, y, n]) if aggregate && f.over.is_none() => {
            let order = if name == "max_by" { "DESC" } else { "ASC" };
            let agg = with_clauses(
                f,
                &format!("array_agg({x} ORDER BY {y} {order})"),
                Some(&format!("{y} IS NOT NULL")),
            )?;
            let Some(agg) = agg else { return Ok(None) };
            return Ok(Some(Expr::Nested(Box::new(parse_expr(&format!(
                "array_slice({agg}, 1, {n})"
            ))?))));
        }
        // Spark's first/last, with ignoreNulls as a second argument (a literal).
        ("first" | "last", [x]) if aggregate => {
            return with_clauses(f, &format!("{name}_value({x})"), None);
        }
        ("first" | "last" | "first_value" | "last_value", [x, _]) if aggregate => {
            let ignore = match exprs[1] {
                Expr::Value(v) => match v.value {
                    Value::Boolean(b) => b,
                    _ => return Ok(None),
                },
                _ => return Ok(None),
            };
            let base = name.trim_end_matches("_value");
            let nulls = if ignore { " IGNORE NULLS" } else { "" };
            return with_clauses(f, &format!("{base}_value({x}){nulls}"), None);
        }
        ("some" | "any", [p]) if aggregate => {
            return with_clauses(f, &format!("bool_or({p})"), None);
        }
        ("variance", [x]) if aggregate => return with_clauses(f, &format!("var_samp({x})"), None),
        // Spark's array_agg is collect_list: NULLs skipped, `[]` for no values.
        // Its overflow is an error here, not NULL.
        ("try_avg", [x]) if aggregate => return with_clauses(f, &format!("avg({x})"), None),
        ("array_agg", [x]) if aggregate => {
            return with_clauses(f, &format!("collect_list({x})"), None);
        }
        // The x of the row with the largest (smallest) y; rows whose y is NULL never count.
        ("max_by", [x, y]) if aggregate && f.over.is_none() => {
            let sql = format!("first_value({x} ORDER BY {y} DESC)");
            return with_clauses(f, &sql, Some(&format!("{y} IS NOT NULL")));
        }
        ("min_by", [x, y]) if aggregate && f.over.is_none() => {
            let sql = format!("first_value({x} ORDER BY {y} ASC)");
            return with_clauses(f, &sql, Some(&format!("{y} IS NOT NULL")));
        }
        _ => return Ok(None),
    };
    reads_once(&name, &exprs, &sql)?;
    Ok(Some(Expr::Nested(Box::new(parse_expr(&sql)?))))
}

/// A rewrite may name an argument more than once (`CASE WHEN a IS NULL ... a ...`): each is
/// an evaluation, and an argument that gives another value each time would mix values. Such
/// an argument is refused where `sql` names it more often than the call did.
fn reads_once(name: &str, exprs: &[&Expr], sql: &str) -> Result<()> {
    let given: String = exprs.iter().map(|e| format!("{e}\u{0}")).collect();
    for e in exprs.iter().filter(|e| volatile(e)) {
        let text = e.to_string();
        if sql.matches(&text).count() > given.matches(&text).count() {
            return Err(Error::class(
                "UNSUPPORTED_FEATURE",
                format!(
                    "{name}(): its argument {e} gives another value at each evaluation (rand(), uuid(), ...) and {name} here reads it more than once; compute it in a subquery first: SELECT {name}(x, ...) FROM (SELECT {e} AS x ...)"
                ),
            ));
        }
    }
    Ok(())
}

/// Functions whose every call gives another value.
const VOLATILE: &[&str] = &[
    "rand", "random", "randn", "uniform", "randstr", "uuid", "shuffle",
];

/// Whether `e` calls a function of [`VOLATILE`].
fn volatile(e: &Expr) -> bool {
    datafusion::sql::sqlparser::ast::visit_expressions(e, |x| match x {
        Expr::Function(f)
            if f.name.0.last().is_some_and(|n| {
                VOLATILE.contains(&n.to_string().to_lowercase().trim_matches('`'))
            }) =>
        {
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// The lambda parameter a map lambda's rewrite runs over: one entry `{key, value}`.
const ENTRY: &str = "__tidemark_entry";

/// The body of a map lambda `(k, v) -> body` with `k` and `v` read from the entry
/// ([`ENTRY`]); a nested lambda that names a parameter `k` or `v` again is refused.
fn entry_lambda_body(function: &str, lambda: &Expr) -> Result<String> {
    let Expr::Lambda(l) = lambda else {
        return Err(Error::Other(format!("{function}: not a lambda")));
    };
    let params: Vec<String> = l
        .params
        .iter()
        .map(|p| p.name.value.to_lowercase())
        .collect();
    let [k, v] = params.as_slice() else {
        return Err(Error::class(
            "WRONG_NUM_ARGS",
            format!(
                "{function}() takes a lambda of two parameters, the key and the value: (k, v) -> ..."
            ),
        ));
    };
    let mut body = (*l.body).clone();
    let mut shadowed = false;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(&mut body, |e| {
        match e {
            Expr::Lambda(inner)
                if inner
                    .params
                    .iter()
                    .any(|p| [k, v].contains(&&p.name.value.to_lowercase())) =>
            {
                shadowed = true;
                return ControlFlow::Break(());
            }
            Expr::Identifier(id) if id.quote_style.is_none() || id.quote_style == Some('`') => {
                let name = id.value.to_lowercase();
                let field = if &name == k {
                    "key"
                } else if &name == v {
                    "value"
                } else {
                    return ControlFlow::Continue(());
                };
                if let Ok(new) = parse_expr(&format!("get_field({ENTRY}, '{field}')")) {
                    *e = new;
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    });
    if shadowed {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "{function}(): a lambda inside it that names its parameters again is not supported"
            ),
        ));
    }
    Ok(body.to_string())
}

/// A string literal's text.
pub(super) fn string_literal(e: &Expr) -> Option<String> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// The text of a `TIME '...'` literal.
fn time_literal(e: &Expr) -> Option<String> {
    match e {
        Expr::TypedString(t)
            if matches!(
                t.data_type,
                datafusion::sql::sqlparser::ast::DataType::Time(..)
            ) =>
        {
            match &t.value.value {
                Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(s.clone()),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A zone argument as the engine reads it: Java's spellings (`GMT+1`, `UTC-05:30`, and the
/// short ids `PST`, `EST`, ... Spark accepts) as offsets or region names; anything else as
/// written.
fn zone_arg(e: &Expr) -> String {
    let Some(zone) = string_literal(e) else {
        return format!("({e})");
    };
    quoted(&java_zone(&zone).unwrap_or(zone))
}

pub(crate) fn java_zone(zone: &str) -> Option<String> {
    let upper = zone.trim().to_uppercase();
    for prefix in ["GMT", "UTC", "UT"] {
        if let Some(rest) = upper.strip_prefix(prefix) {
            if rest.is_empty() {
                return Some("+00:00".into());
            }
            let (sign, rest) = rest.split_at_checked(1)?;
            if sign != "+" && sign != "-" {
                return None;
            }
            let (h, m) = match rest.split_once(':') {
                Some((h, m)) => (h.parse::<u32>().ok()?, m.parse::<u32>().ok()?),
                None if rest.len() <= 2 => (rest.parse::<u32>().ok()?, 0),
                None if rest.len() == 4 => (rest[..2].parse().ok()?, rest[2..].parse().ok()?),
                None => return None,
            };
            return (h <= 18 && m < 60).then(|| format!("{sign}{h:02}:{m:02}"));
        }
    }
    // java.time.ZoneId.SHORT_IDS.
    let id = match upper.as_str() {
        "EST" => "-05:00",
        "MST" => "-07:00",
        "HST" => "-10:00",
        "ACT" => "Australia/Darwin",
        "AET" => "Australia/Sydney",
        "AGT" => "America/Argentina/Buenos_Aires",
        "ART" => "Africa/Cairo",
        "AST" => "America/Anchorage",
        "BET" => "America/Sao_Paulo",
        "BST" => "Asia/Dhaka",
        "CAT" => "Africa/Harare",
        "CNT" => "America/St_Johns",
        "CST" => "America/Chicago",
        "CTT" => "Asia/Shanghai",
        "EAT" => "Africa/Addis_Ababa",
        "ECT" => "Europe/Paris",
        "IET" => "America/Indiana/Indianapolis",
        "IST" => "Asia/Kolkata",
        "JST" => "Asia/Tokyo",
        "MIT" => "Pacific/Apia",
        "NET" => "Asia/Yerevan",
        "NST" => "Pacific/Auckland",
        "PLT" => "Asia/Karachi",
        "PNT" => "America/Phoenix",
        "PRT" => "America/Puerto_Rico",
        "PST" => "America/Los_Angeles",
        "SST" => "Pacific/Guadalcanal",
        "VST" => "Asia/Ho_Chi_Minh",
        _ => return None,
    };
    Some(id.to_string())
}

/// make_date(y, m, d), NULL for a day that does not exist.
fn safe_date(y: &str, m: &str, d: &str) -> String {
    let part = |x: &str, n: usize| format!("lpad(CAST(CAST({x} AS INT) AS STRING), {n}, '0')");
    format!(
        "CASE WHEN {y} BETWEEN 1 AND 9999 AND {m} BETWEEN 1 AND 12 AND {d} BETWEEN 1 AND 31 \
         THEN TRY_CAST(concat({}, '-', {}, '-', {}) AS DATE) ELSE CAST(NULL AS DATE) END",
        part(y, 4),
        part(m, 2),
        part(d, 2)
    )
}

/// make_timestamp's time of day on `date`: NULL out of range; second 60 is the next minute.
fn make_timestamp(date: &str, h: &str, mi: &str, sec: &str) -> String {
    format!(
        "CASE WHEN {h} BETWEEN 0 AND 23 AND {mi} BETWEEN 0 AND 59 AND {sec} >= 0 AND {sec} <= 60 \
         THEN {}(CAST(CAST({date} AS INT) AS DECIMAL(20, 6)) * 86400 + {h} * 3600 + {mi} * 60 + CAST({sec} AS DECIMAL(8, 6))) END",
        super::functions::TO_TIMESTAMP
    )
}

/// Spark's months_between(a, b): whole months when the days of month are the same (or both
/// the last), else with the difference in seconds over a 31-day month; rounded to 8 digits
/// (half up) unless `round` is false.
fn months_between(a: &str, b: &str, round: bool) -> String {
    let (ta, tb) = (
        format!("CAST({a} AS TIMESTAMP)"),
        format!("CAST({b} AS TIMESTAMP)"),
    );
    let part = |p: &str, t: &str| format!("CAST(date_part('{p}', {t}) AS BIGINT)");
    let months = format!(
        "(({} - {}) * 12 + {} - {})",
        part("year", &ta),
        part("year", &tb),
        part("month", &ta),
        part("month", &tb)
    );
    let last = |t: &str| format!("(CAST({t} AS DATE) = last_day(CAST({t} AS DATE)))");
    let in_day = |t: &str| {
        format!(
            "{}(unix_micros({t}) - unix_micros(CAST(CAST({t} AS DATE) AS TIMESTAMP)) - pmod(unix_micros({t}), 1000000), 1000000)",
            super::functions::INT_DIVIDE
        )
    };
    let seconds = format!(
        "(({} - {}) * 86400 + {} - {})",
        part("day", &ta),
        part("day", &tb),
        in_day(&ta),
        in_day(&tb)
    );
    let diff = format!(
        "CASE WHEN {} = {} OR ({} AND {}) THEN CAST({months} AS DOUBLE) \
         ELSE CAST({months} AS DOUBLE) + CAST({seconds} AS DOUBLE) / CAST(2678400 AS DOUBLE) END",
        part("day", &ta),
        part("day", &tb),
        last(&ta),
        last(&tb)
    );
    if round {
        format!("floor(({diff}) * CAST(1e8 AS DOUBLE) + CAST(0.5 AS DOUBLE)) / CAST(1e8 AS DOUBLE)")
    } else {
        diff
    }
}

/// A call's arguments when all are plain expressions (no names, no `*`, no clauses).
fn plain_args(args: &FunctionArguments) -> Option<Vec<&Expr>> {
    match args {
        FunctionArguments::None => Some(vec![]),
        FunctionArguments::List(l) if l.clauses.is_empty() && l.duplicate_treatment.is_none() => l
            .args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// A replacement string of Java's `Matcher.replaceAll` (what Spark's regexp_replace takes:
/// `$n` a group, `\c` the character c) as the Rust regex replacement the engine runs (`${n}`,
/// `$$`). A group number takes as many digits as still name a group of `pattern` (a literal;
/// otherwise one digit), as Java reads it.
fn java_replacement(text: &str, pattern: &Expr) -> Result<String> {
    let groups = match pattern {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(p) | Value::DoubleQuotedString(p) => {
                regex::Regex::new(p).ok().map(|re| re.captures_len() - 1)
            }
            _ => None,
        },
        _ => None,
    };
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                match chars[i + 1] {
                    '$' => out.push_str("$$"),
                    c => out.push(c),
                }
                i += 2;
            }
            '$' if chars.get(i + 1).is_some_and(|c| c.is_ascii_digit()) => {
                let mut n = chars[i + 1].to_digit(10).unwrap_or(0) as usize;
                let mut j = i + 2;
                while let (Some(d), Some(g)) = (chars.get(j).and_then(|c| c.to_digit(10)), groups) {
                    let more = n * 10 + d as usize;
                    if more > g {
                        break;
                    }
                    n = more;
                    j += 1;
                }
                out.push_str(&format!("${{{n}}}"));
                i = j;
            }
            '$' if chars.get(i + 1) == Some(&'{') => {
                let end = chars[i..].iter().position(|c| *c == '}').map(|p| p + i);
                let Some(end) = end else {
                    return Err(Error::Invalid(format!(
                        "regexp_replace: the replacement {text:?} has an unclosed group name"
                    )));
                };
                out.extend(&chars[i..=end]);
                i = end + 1;
            }
            '$' => {
                return Err(Error::Invalid(format!(
                    "regexp_replace: illegal group reference in the replacement {text:?} (write \\$ for a dollar sign)"
                )));
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Spark's `decode(e, search, result, ..., [default])`, which compares NULL-safely:
/// `decode(NULL, NULL, 'a')` is 'a'.
fn decode(e: &str, rest: &[String]) -> String {
    let mut sql = String::from("CASE");
    for pair in rest.chunks(2) {
        if let [search, result] = pair {
            sql.push_str(&format!(
                " WHEN {e} IS NOT DISTINCT FROM {search} THEN {result}"
            ));
        }
    }
    if rest.len() % 2 == 1 {
        sql.push_str(&format!(" ELSE {}", rest[rest.len() - 1]));
    }
    sql.push_str(" END");
    sql
}

/// Seconds since 1970 of timestamp `ts`, as a DOUBLE with its fraction (DataFusion's epoch;
/// Spark's date_part has none).
fn epoch_seconds(ts: &str) -> String {
    format!("(CAST(unix_micros(CAST({ts} AS TIMESTAMP)) AS DOUBLE) / 1000000.0)")
}

/// The seconds of timestamp `x` within its minute, with their fraction: DECIMAL(8,6), as
/// Spark's `extract(SECOND FROM ts)` and `date_part('SECOND', ts)` (a text, a DATE or NULL
/// read as a TIMESTAMP; the seconds as the session's zone reads them). An INTERVAL is
/// refused, as before.
fn seconds_with_fraction(x: &Expr) -> String {
    format!(
        "CAST(CAST(date_part('microsecond', CAST(({x}) AS TIMESTAMP)) AS DECIMAL(14, 0)) / 1000000 AS DECIMAL(8, 6))"
    )
}

/// Whole seconds since 1970 of timestamp `ts`, rounded down as Spark's `unix_timestamp`
/// (-1 for 23:59:59.5 on 1969-12-31), in exact integer arithmetic.
fn whole_seconds(ts: &str) -> String {
    let micros = format!("unix_micros({ts})");
    format!(
        "{}({micros} - pmod({micros}, 1000000), 1000000)",
        super::functions::INT_DIVIDE
    )
}

fn regexp_extract(s: &str, re: &str, idx: &str) -> String {
    let idx_is_zero = idx.trim_matches(|c| c == '(' || c == ')').trim() == "0";
    let (pattern, group) = if idx_is_zero {
        (format!("concat('(', {re}, ')')"), "1".to_string())
    } else {
        (re.to_string(), idx.to_string())
    };
    format!(
        "CASE WHEN {s} IS NULL OR {re} IS NULL THEN NULL \
         ELSE coalesce(array_element(regexp_match({s}, {pattern}), {group}), '') END"
    )
}

/// `sql` (one aggregate call) with the FILTER and OVER of `f`, and `extra` added to the
/// filter.
fn with_clauses(
    f: &datafusion::sql::sqlparser::ast::Function,
    sql: &str,
    extra: Option<&str>,
) -> Result<Option<Expr>> {
    if let Some(exprs) = plain_args(&f.args) {
        let name = f.name.to_string().to_lowercase();
        reads_once(&name, &exprs, &format!("{sql} {}", extra.unwrap_or("")))?;
    }
    let Expr::Function(mut g) = parse_expr(sql)? else {
        return Err(Error::Other(format!("not a function call: {sql}")));
    };
    g.over = f.over.clone();
    // `first(x) IGNORE NULLS OVER (...)`: the clause stays (a rewrite may also set it).
    if g.null_treatment.is_none() {
        g.null_treatment = f.null_treatment;
    }
    g.filter = match (&f.filter, extra) {
        (Some(existing), Some(extra)) => Some(Box::new(parse_expr(&format!(
            "({existing}) AND ({extra})"
        ))?)),
        (Some(existing), None) => Some(existing.clone()),
        (None, Some(extra)) => Some(Box::new(parse_expr(extra)?)),
        (None, None) => None,
    };
    Ok(Some(Expr::Function(g)))
}

/// The name of the user this process runs as: `$USER` (or `$LOGNAME`), else the system's
/// account of the effective user id (cron may set neither variable).
fn user_name() -> String {
    for var in ["USER", "LOGNAME"] {
        if let Ok(v) = std::env::var(var)
            && !v.is_empty()
        {
            return v;
        }
    }
    #[cfg(unix)]
    {
        let mut buf = vec![0 as libc::c_char; 4096];
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: getpwuid_r writes only into `pwd` and `buf` (of the length given) and sets
        // `found` to `&pwd` or NULL; the name is read before either goes out of scope.
        let rc = unsafe {
            libc::getpwuid_r(
                libc::geteuid(),
                &mut pwd,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        if rc == 0 && !found.is_null() && !pwd.pw_name.is_null() {
            // SAFETY: a non-NULL pw_name points at a NUL-terminated string inside `buf`.
            let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
            return name.to_string_lossy().into_owned();
        }
    }
    "unknown".into()
}

/// `listagg([DISTINCT] x [, delimiter]) [WITHIN GROUP (ORDER BY ...)]` and `string_agg` spelled
/// so: the engine's `string_agg(x, delimiter ORDER BY ...)`, the delimiter '' when not given
/// (Databricks': none). None for a call the engine takes as it is.
fn listagg(
    f: &datafusion::sql::sqlparser::ast::Function,
) -> Result<Option<datafusion::sql::sqlparser::ast::Function>> {
    use datafusion::sql::sqlparser::ast::FunctionArgumentClause;
    let name = f.name.to_string().to_lowercase();
    if name != "listagg" && name != "string_agg" {
        return Ok(None);
    }
    let FunctionArguments::List(list) = &f.args else {
        return Ok(None);
    };
    let plain = list.args.len() == 2 && f.within_group.is_empty() && name == "string_agg";
    if plain || list.args.is_empty() || list.args.len() > 2 {
        return Ok(None);
    }
    if !f.within_group.is_empty()
        && list
            .clauses
            .iter()
            .any(|c| matches!(c, FunctionArgumentClause::OrderBy(_)))
    {
        return Err(Error::Invalid(format!(
            "{name}: ORDER BY both inside the call and in WITHIN GROUP; keep one"
        )));
    }
    let mut g = f.clone();
    g.name = datafusion::sql::sqlparser::ast::ObjectName::from(vec![
        datafusion::sql::sqlparser::ast::Ident::new("string_agg"),
    ]);
    let mut args = list.clone();
    if args.args.len() == 1 {
        args.args
            .push(FunctionArg::Unnamed(FunctionArgExpr::Expr(parse_expr(
                "''",
            )?)));
    }
    if !f.within_group.is_empty() {
        args.clauses
            .push(FunctionArgumentClause::OrderBy(f.within_group.clone()));
        g.within_group = vec![];
    }
    g.args = FunctionArguments::List(args);
    Ok(Some(g))
}

/// `current_user`, `user` and `session_user` written without parentheses, where no column of
/// that name exists (Spark resolves a column first, then the function): the unquoted
/// identifier `name` at `at` (line, column), where the engine says which it could not resolve,
/// becomes the user's name, a bare select item named `name()` (Databricks names all three
/// `current_user()`, and may give two columns one name). None without `at`: another identifier
/// of that name may be a column of a table in its own scope. Whether any was replaced.
pub fn bare_user_function(
    stmt: &mut datafusion::sql::sqlparser::ast::Statement,
    name: &str,
    at: Option<(u64, u64)>,
) -> bool {
    // Without the engine's pointer (GROUP BY, ORDER BY, HAVING) the identifier it could not
    // resolve is unknown, and another of that name may be a column in its own scope.
    let Some((line, column)) = at else {
        return false;
    };
    if !matches!(name, "current_user" | "user" | "session_user") {
        return false;
    }
    let is_it = |e: &Expr| {
        matches!(e, Expr::Identifier(i)
            if i.quote_style.is_none()
                && i.value.eq_ignore_ascii_case(name)
                && i.span.start.line == line
                && i.span.start.column == column)
    };
    struct Items<'a>(&'a dyn Fn(&Expr) -> bool, &'a str);
    impl VisitorMut for Items<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            fn body(set: &mut SetExpr, items: &Items) {
                match set {
                    SetExpr::Select(select) => {
                        for item in &mut select.projection {
                            if let SelectItem::UnnamedExpr(e) = item
                                && (items.0)(e)
                            {
                                *item = SelectItem::ExprWithAlias {
                                    expr: e.clone(),
                                    alias: datafusion::sql::sqlparser::ast::Ident::with_quote(
                                        '`',
                                        format!("{}()", items.1),
                                    ),
                                };
                            }
                        }
                    }
                    SetExpr::SetOperation { left, right, .. } => {
                        body(left, items);
                        body(right, items);
                    }
                    _ => {}
                }
            }
            body(query.body.as_mut(), self);
            ControlFlow::Continue(())
        }
    }
    let _ = datafusion::sql::sqlparser::ast::VisitMut::visit(stmt, &mut Items(&is_it, name));
    let mut any = false;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(stmt, |e| {
        if is_it(e) {
            *e = Expr::value(Value::SingleQuotedString(user_name()));
            any = true;
        }
        ControlFlow::<()>::Continue(())
    });
    any
}
