//! Queries (SELECT, EXPLAIN, DataFusion SET/SHOW): bound to the warehouse, planned and run by
//! DataFusion.

use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{Query, Statement as Sql};

use crate::engine::headers;
use crate::engine::{Output, RowStream, Session};
use crate::error::Result;

/// Plan and run a query, collecting its rows.
pub async fn run(session: &Session, mut stmt: Sql) -> Result<Output> {
    let df = dataframe(session, &mut stmt).await?;
    let schema = df.schema().inner().clone();
    let batches = df.collect().await?;
    Ok(Output { schema, batches })
}

/// Plan a query and start it: its rows come as they are computed, under column names that
/// read like the expressions in its select list.
pub async fn stream(session: &Session, query: Query) -> Result<RowStream> {
    let written = headers::Written::of(&query);
    let (df, bound) = query_dataframe(session, query).await?;
    let df = written.rename(df)?;
    let schema = df.schema().inner().clone();
    let stream = df.execute_stream().await?;
    Ok(RowStream {
        schema,
        stream,
        _bound: bound,
    })
}

/// Bind and plan a statement into a DataFrame (not executed yet).
pub async fn dataframe(
    session: &Session,
    stmt: &mut Sql,
) -> Result<datafusion::dataframe::DataFrame> {
    let (plan, _bound) = crate::catalog::one_version_per_table(async {
        let bound = session.bind(stmt, &[]).await?;
        let plan = Box::pin(plan(session, stmt.clone()))
            .await
            .map_err(|e| explained(e, &bound))?;
        Ok::<_, crate::error::Error>((plan, bound))
    })
    .await?;
    Ok(session.ctx().execute_logical_plan(plan).await?)
}

/// A planning error about a missing column that is one of the names the statement's tables
/// spell two ways, said as such.
fn explained(e: crate::error::Error, bound: &crate::engine::bind::Bound) -> crate::error::Error {
    crate::engine::spelling::ambiguous_error(&e.to_string(), &bound.ambiguous).unwrap_or(e)
}

/// Plan a query into a DataFrame; the returned guard keeps time-travel snapshots alive.
pub async fn query_dataframe(
    session: &Session,
    query: Query,
) -> Result<(datafusion::dataframe::DataFrame, crate::engine::bind::Bound)> {
    let written = headers::Written::of(&query);
    let mut stmt = Sql::Query(Box::new(query));
    let (plan, bound) = crate::catalog::one_version_per_table(async {
        let bound = session.bind(&mut stmt, &[]).await?;
        crate::hold_at("query::bound").await;
        let plan = Box::pin(plan(session, stmt))
            .await
            .map_err(|e| explained(e, &bound))?;
        Ok::<_, crate::error::Error>((plan, bound))
    })
    .await?;
    let df = session.ctx().execute_logical_plan(plan).await?;
    Ok((written.aliases(df)?, bound))
}

/// The engine's plan of a statement. The engine names an unnamed `CAST(x AS t)` like `x`
/// itself, as Spark does, but refuses two select items of one name, so `SELECT a, CAST(a AS
/// INT)` and `SELECT CAST(x AS STRING) FROM t ORDER BY x` (ordering adds `x` beside it) were
/// refused ("Projections require unique expression names", apache/datafusion#13558, #4478).
/// Such a statement is planned again with each unnamed cast in a select list named: after its
/// column, as Spark names it (so `ORDER BY x` orders by the cast, as in Spark), or, where
/// another item of the list has that name (or a `*` may), as written (`CAST(a AS INT)`).
///
/// `current_user` (and `user`, `session_user`) without parentheses is a column where one of that
/// name exists, else the function, as in Spark. A `*` among a function's arguments
/// (`hash(*)`, `concat_ws('|', *)`) stands for the columns the function reads.
async fn plan(session: &Session, stmt: Sql) -> Result<datafusion::logical_expr::LogicalPlan> {
    let state = session.ctx().state();
    let again = stmt.clone();
    let planned = match state
        .statement_to_plan(DFStatement::Statement(Box::new(stmt)))
        .await
    {
        Err(e) if e.to_string().contains("require unique expression names") => {
            let mut named = again;
            if !name_casts(&mut named) {
                return Err(e.into());
            }
            state
                .statement_to_plan(DFStatement::Statement(Box::new(named)))
                .await?
        }
        Err(e) if let Some(name) = missing_user_column(&e.to_string()) => {
            let mut called = again;
            let at = e
                .diagnostic()
                .and_then(|d| d.span)
                .map(|span| (span.start.line, span.start.column));
            if !crate::engine::spark::bare_user_function(&mut called, name, at) {
                return Err(e.into());
            }
            Box::pin(plan(session, called)).await?
        }
        other => other?,
    };
    let planned = expand_argument_wildcards(planned)?;
    refuse_binary_listagg(&planned)?;
    Ok(as_coerced(&state, planned)?)
}

/// A query's plan with each column cast to the type its rows will have. Until the analyzer
/// coerces types, a UNION or CASE is typed by its first branch, so whatever reads the schema
/// (a CTAS's Delta schema, DESCRIBE of a query or a view) saw INT where the rows were BIGINT
/// (a CTAS recorded an INT column over BIGINT files: unreadable). The plan itself stays
/// unanalyzed: tidemark's own analyzer rules (session zone, wall clocks) must run once.
fn as_coerced(
    state: &datafusion::execution::SessionState,
    plan: datafusion::logical_expr::LogicalPlan,
) -> datafusion::common::Result<datafusion::logical_expr::LogicalPlan> {
    use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, cast};
    if !matches!(
        plan,
        LogicalPlan::Projection(_)
            | LogicalPlan::Union(_)
            | LogicalPlan::Sort(_)
            | LogicalPlan::Limit(_)
            | LogicalPlan::Distinct(_)
            | LogicalPlan::Aggregate(_)
            | LogicalPlan::Filter(_)
            | LogicalPlan::SubqueryAlias(_)
    ) {
        return Ok(plan);
    }
    let analyzed =
        state
            .analyzer()
            .execute_and_check(plan.clone(), state.config_options(), |_, _| {})?;
    let (before, after) = (plan.schema(), analyzed.schema());
    if before.fields().len() != after.fields().len()
        || before
            .fields()
            .iter()
            .zip(after.fields())
            .all(|(a, b)| a.data_type() == b.data_type())
    {
        return Ok(plan);
    }
    let exprs: Vec<Expr> = before
        .iter()
        .zip(after.fields())
        .map(|((qualifier, field), to)| {
            let column = Expr::Column(datafusion::common::Column::from((qualifier, field)));
            if field.data_type() == to.data_type() {
                column
            } else {
                cast(column, to.data_type().clone())
                    .alias_qualified(qualifier.cloned(), field.name())
            }
        })
        .collect();
    LogicalPlanBuilder::from(plan).project(exprs)?.build()
}

/// `listagg`/`string_agg` of BINARY values is BINARY in Databricks; the engine's string_agg
/// would give a STRING (or fail on bytes that are not UTF-8), so it is refused by name.
fn refuse_binary_listagg(plan: &datafusion::logical_expr::LogicalPlan) -> Result<()> {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::logical_expr::expr::WindowFunctionDefinition;
    use datafusion::logical_expr::{Expr, ExprSchemable};
    let mut refused = None;
    plan.apply_with_subqueries(|node| {
        let [input] = node.inputs()[..] else {
            return Ok(TreeNodeRecursion::Continue);
        };
        node.apply_expressions(|top| {
            top.apply(|e| {
                // As an aggregate or over a window.
                let arg = match e {
                    Expr::AggregateFunction(f) if f.func.name() == "string_agg" => {
                        f.params.args.first()
                    }
                    Expr::WindowFunction(w) => match &w.fun {
                        WindowFunctionDefinition::AggregateUDF(f) if f.name() == "string_agg" => {
                            w.params.args.first()
                        }
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(arg) = arg
                    && let Ok(t) = arg.get_type(input.schema())
                    && matches!(
                        t,
                        datafusion::arrow::datatypes::DataType::Binary
                            | datafusion::arrow::datatypes::DataType::LargeBinary
                            | datafusion::arrow::datatypes::DataType::BinaryView
                    )
                {
                    refused = Some(crate::error::Error::class(
                        "DATATYPE_MISMATCH",
                        "listagg/string_agg of BINARY values is not supported: Databricks \
                         gives BINARY, which this engine's string_agg cannot build; write \
                         unhex(listagg(hex(x))) for the bytes, or cast x to STRING",
                    ));
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    })?;
    refused.map_or(Ok(()), Err)
}

/// The function name in "No field named current_user." (or `user`, `session_user`): the whole
/// name the engine could not resolve, not a longer one that starts with it (`username`).
fn missing_user_column(error: &str) -> Option<&'static str> {
    let (_, rest) = error.split_once("No field named ")?;
    let missing: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    ["current_user", "session_user", "user"]
        .into_iter()
        .find(|name| *name == missing)
}

/// Each `*` among a scalar function's arguments replaced by the columns a `SELECT *` of the
/// same place would give (a USING join's column once; `t.*` one table's; EXCEPT applied): the
/// engine's planner leaves it for the physical planner, which refuses it ("Physical plan does
/// not support logical expression Wildcard"). Under GROUP BY it is refused by name.
#[allow(deprecated)] // Expr::Wildcard: the planner still makes it for a function's `*`
fn expand_argument_wildcards(
    plan: datafusion::logical_expr::LogicalPlan,
) -> datafusion::common::Result<datafusion::logical_expr::LogicalPlan> {
    use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
    use datafusion::logical_expr::utils::{expand_qualified_wildcard, expand_wildcard};
    use datafusion::logical_expr::{Expr, LogicalPlan};
    fn has_argument_wildcard(node: &LogicalPlan) -> bool {
        let mut found = false;
        let _ = node.apply_expressions(|top| {
            top.apply(|e| {
                if let Expr::ScalarFunction(f) = e
                    && f.args.iter().any(|a| matches!(a, Expr::Wildcard { .. }))
                {
                    found = true;
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            })
        });
        found
    }
    plan.transform_up_with_subqueries(|node| {
        if !has_argument_wildcard(&node) {
            return Ok(Transformed::no(node));
        }
        let [mut source] = node.inputs()[..] else {
            return Ok(Transformed::no(node));
        };
        // The window functions of a select list (and QUALIFY's filter over them) are computed
        // below it; `*` is the columns they read, as in Spark, not those they add.
        while let LogicalPlan::Window(datafusion::logical_expr::Window { input, .. })
        | LogicalPlan::Filter(datafusion::logical_expr::Filter { input, .. }) = source
        {
            source = input.as_ref();
        }
        let source = source.clone();
        let source = &source;
        if matches!(source, LogicalPlan::Aggregate(_)) {
            return datafusion::common::plan_err!(
                "a * among a function's arguments (hash(*), concat_ws(',', *)) in a query with \
                 GROUP BY or aggregates is not supported: name the columns"
            );
        }
        let keeps_names = matches!(
            node,
            LogicalPlan::Projection(_) | LogicalPlan::Aggregate(_) | LogicalPlan::Window(_)
        );
        let expanded = node.map_expressions(|top| {
            let name = top.schema_name().to_string();
            let new = top.transform_up(|e| match e {
                Expr::ScalarFunction(mut f)
                    if f.args.iter().any(|a| matches!(a, Expr::Wildcard { .. })) =>
                {
                    let mut args = Vec::with_capacity(f.args.len());
                    for a in f.args {
                        match a {
                            Expr::Wildcard { qualifier, options } => {
                                let columns = match &qualifier {
                                    None => {
                                        expand_wildcard(source.schema(), source, Some(&options))?
                                    }
                                    Some(q) => expand_qualified_wildcard(
                                        q,
                                        source.schema(),
                                        Some(&options),
                                    )?,
                                };
                                if columns.is_empty() {
                                    return datafusion::common::plan_err!(
                                        "{}: the * among its arguments stands for no columns",
                                        f.func.name()
                                    );
                                }
                                args.extend(columns);
                            }
                            other => args.push(other),
                        }
                    }
                    f.args = args;
                    Ok(Transformed::yes(Expr::ScalarFunction(f)))
                }
                other => Ok(Transformed::no(other)),
            })?;
            // The node keeps the column name it had (`hash(*)`), which the nodes above it
            // refer to.
            Ok(if new.transformed && keeps_names {
                new.update_data(|e| e.alias(name))
            } else {
                new
            })
        })?;
        if expanded.transformed {
            expanded.map_data(|p| p.recompute_schema())
        } else {
            Ok(expanded)
        }
    })
    .map(|t| t.data)
}

/// Name each unnamed cast of the select lists of a query statement (in set operations,
/// parentheses and derived tables too), as [`plan`] says; whether any was.
fn name_casts(stmt: &mut Sql) -> bool {
    use datafusion::sql::sqlparser::ast::{
        Expr, Ident, SelectItem, SetExpr, TableFactor, TableWithJoins,
    };
    /// The column a cast reads, when it reads one directly.
    fn cast_column(e: &Expr) -> Option<&Ident> {
        match e {
            Expr::Cast { expr, .. } => match expr.as_ref() {
                Expr::Identifier(i) => Some(i),
                Expr::CompoundIdentifier(parts) => parts.last(),
                _ => None,
            },
            _ => None,
        }
    }
    /// The name an item of a select list has (None for a wildcard: any names).
    fn item_name(item: &SelectItem) -> Option<String> {
        match item {
            SelectItem::UnnamedExpr(Expr::Identifier(i)) => Some(i.value.to_lowercase()),
            SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
                parts.last().map(|i| i.value.to_lowercase())
            }
            SelectItem::UnnamedExpr(e) => Some(
                cast_column(e)
                    .map(|i| i.value.to_lowercase())
                    .unwrap_or_else(|| e.to_string()),
            ),
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_lowercase()),
            _ => None,
        }
    }
    /// Whether a cast is somewhere inside `e` (the engine names a cast like what it casts).
    fn has_cast(e: &Expr) -> bool {
        datafusion::sql::sqlparser::ast::visit_expressions(e, |x| match x {
            Expr::Cast { .. } => std::ops::ControlFlow::Break(()),
            _ => std::ops::ControlFlow::Continue(()),
        })
        .is_break()
    }
    fn query(q: &mut Query) -> bool {
        body(&mut q.body)
    }
    fn from(t: &mut TableWithJoins) -> bool {
        let mut any = factor(&mut t.relation);
        for j in &mut t.joins {
            any |= factor(&mut j.relation);
        }
        any
    }
    fn factor(f: &mut TableFactor) -> bool {
        match f {
            TableFactor::Derived { subquery, .. } => query(subquery),
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => from(table_with_joins),
            _ => false,
        }
    }
    fn body(b: &mut SetExpr) -> bool {
        match b {
            SetExpr::Select(select) => {
                let names: Vec<Option<String>> = select.projection.iter().map(item_name).collect();
                let wildcard = names.iter().any(Option::is_none);
                let mut any = false;
                for (i, item) in select.projection.iter_mut().enumerate() {
                    if let SelectItem::UnnamedExpr(e @ Expr::Cast { .. }) = item {
                        let own = names[i].as_ref();
                        let alone =
                            !wildcard && names.iter().filter(|n| n.as_ref() == own).count() == 1;
                        let alias = match cast_column(e) {
                            Some(column) if alone => column.clone(),
                            _ => Ident::with_quote('`', e.to_string()),
                        };
                        *item = SelectItem::ExprWithAlias {
                            expr: e.clone(),
                            alias,
                        };
                        any = true;
                    } else if let SelectItem::UnnamedExpr(e) = item
                        && has_cast(e)
                    {
                        // A cast inside (`CAST(1 AS BIGINT) + 1` beside `1 + 1`): as written.
                        let alias = Ident::with_quote('`', e.to_string());
                        *item = SelectItem::ExprWithAlias {
                            expr: e.clone(),
                            alias,
                        };
                        any = true;
                    }
                }
                // Items of one name (`SELECT NULL, NULL`, `INSERT INTO t SELECT 1, NULL,
                // NULL`, `SELECT a, a`): Spark gives two columns of that name, the engine
                // refuses them; each later one is named with a suffix (`NULL_1`).
                if !wildcard {
                    let names: Vec<Option<String>> =
                        select.projection.iter().map(item_name).collect();
                    let mut taken: std::collections::HashSet<String> =
                        names.iter().flatten().cloned().collect();
                    let mut seen = std::collections::HashSet::new();
                    for (item, name) in select.projection.iter_mut().zip(names) {
                        let Some(name) = name else { continue };
                        if seen.insert(name.clone()) {
                            continue;
                        }
                        let unique = (1..)
                            .map(|k| format!("{name}_{k}"))
                            .find(|n| !taken.contains(n))
                            .unwrap_or_default();
                        taken.insert(unique.clone());
                        let expr = match item {
                            SelectItem::UnnamedExpr(e) => e.clone(),
                            SelectItem::ExprWithAlias { expr, .. } => expr.clone(),
                            _ => continue,
                        };
                        *item = SelectItem::ExprWithAlias {
                            expr,
                            alias: Ident::with_quote('`', unique),
                        };
                        any = true;
                    }
                }
                for t in &mut select.from {
                    any |= from(t);
                }
                any
            }
            SetExpr::SetOperation { left, right, .. } => body(left) | body(right),
            SetExpr::Query(q) => query(q),
            _ => false,
        }
    }
    match stmt {
        Sql::Query(q) => query(q),
        _ => false,
    }
}
