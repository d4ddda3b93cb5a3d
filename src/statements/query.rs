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
    let _bound = session.bind(stmt, &[]).await?;
    let plan = Box::pin(plan(session, stmt.clone())).await?;
    Ok(session.ctx().execute_logical_plan(plan).await?)
}

/// Plan a query into a DataFrame; the returned guard keeps time-travel snapshots alive.
pub async fn query_dataframe(
    session: &Session,
    query: Query,
) -> Result<(datafusion::dataframe::DataFrame, crate::engine::bind::Bound)> {
    let mut stmt = Sql::Query(Box::new(query));
    let bound = session.bind(&mut stmt, &[]).await?;
    let plan = Box::pin(plan(session, stmt)).await?;
    Ok((session.ctx().execute_logical_plan(plan).await?, bound))
}

/// The engine's plan of a statement. The engine names an unnamed `CAST(x AS t)` like `x`
/// itself, so `SELECT CAST(i AS STRING) FROM t ORDER BY i` and `SELECT a, CAST(a AS INT)`
/// were refused ("Projections require unique expression names", apache/datafusion#13558,
/// #4478). Such a statement is planned again with each unnamed cast in a select list named
/// as written (`CAST(i AS STRING)`, the name Databricks gives it); statements the engine
/// plans keep the engine's names.
async fn plan(session: &Session, stmt: Sql) -> Result<datafusion::logical_expr::LogicalPlan> {
    let state = session.ctx().state();
    let again = stmt.clone();
    match state
        .statement_to_plan(DFStatement::Statement(Box::new(stmt)))
        .await
    {
        Err(e) if e.to_string().contains("require unique expression names") => {
            let mut named = again;
            if !name_casts(&mut named) {
                return Err(e.into());
            }
            Ok(state
                .statement_to_plan(DFStatement::Statement(Box::new(named)))
                .await?)
        }
        other => Ok(other?),
    }
}

/// Name each unnamed cast of the select lists of a query statement as written (in set
/// operations, parentheses and derived tables too); whether any was.
fn name_casts(stmt: &mut Sql) -> bool {
    use datafusion::sql::sqlparser::ast::{
        Expr, Ident, SelectItem, SetExpr, TableFactor, TableWithJoins,
    };
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
                let mut any = false;
                for item in &mut select.projection {
                    if let SelectItem::UnnamedExpr(e @ Expr::Cast { .. }) = item {
                        let alias = Ident::with_quote('`', e.to_string());
                        *item = SelectItem::ExprWithAlias {
                            expr: e.clone(),
                            alias,
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
