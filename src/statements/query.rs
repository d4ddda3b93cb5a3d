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
    let state = session.ctx().state();
    let plan = state
        .statement_to_plan(DFStatement::Statement(Box::new(stmt.clone())))
        .await?;
    Ok(session.ctx().execute_logical_plan(plan).await?)
}

/// Plan a query into a DataFrame; the returned guard keeps time-travel snapshots alive.
pub async fn query_dataframe(
    session: &Session,
    query: Query,
) -> Result<(datafusion::dataframe::DataFrame, crate::engine::bind::Bound)> {
    let mut stmt = Sql::Query(Box::new(query));
    let bound = session.bind(&mut stmt, &[]).await?;
    let state = session.ctx().state();
    let plan = state
        .statement_to_plan(DFStatement::Statement(Box::new(stmt)))
        .await?;
    Ok((session.ctx().execute_logical_plan(plan).await?, bound))
}
