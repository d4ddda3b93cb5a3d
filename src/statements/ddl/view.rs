//! Views: `CREATE [OR REPLACE] [TEMP|TEMPORARY] VIEW [IF NOT EXISTS] v [(cols)] [COMMENT '..']
//! AS query`, `DROP VIEW [IF EXISTS] v` (`SHOW VIEWS` is in `show.rs`). A view's query is bound
//! when it is created (every table name in three parts, so it reads the same tables whatever
//! the reader's current schema) and put in place of the view's name by the binder
//! (`engine::bind`) in every statement that reads it. Persistent views live in the warehouse
//! (`catalog::views`); temporary views in the session.

use datafusion::sql::sqlparser::ast::{CreateView, ObjectName};

use crate::catalog::{View, check_writable_table};
use crate::engine::{Output, Session, name_parts};
use crate::error::{Error, Result};

/// `CREATE VIEW`.
pub async fn create(session: &Session, create: CreateView) -> Result<Output> {
    let c = super::super::clauses::create_view(create)?;
    let parts = name_parts(&c.name)?;
    let columns: Vec<String> = c.columns.clone();
    let mut query = c.query;
    if c.temporary {
        let [name] = parts.as_slice() else {
            return Err(Error::Invalid(format!(
                "a temporary view has a one-part name, found '{}'",
                c.name
            )));
        };
        if session.temp_view(name).is_some() && !c.or_replace {
            if c.if_not_exists {
                return Ok(Output::empty());
            }
            return Err(Error::AlreadyExists(format!(
                "temporary view {name} already exists (use CREATE OR REPLACE TEMP VIEW)"
            )));
        }
        // Tables resolve now; session variables when the view is read. A script block's
        // own variable is gone (or another's of its name is back) by then: refused.
        if let Some(locals) = session.vars().only_locals() {
            let mut probe = session.clone();
            *probe.vars_mut() = locals;
            let mut copy = query.clone();
            if probe.bind(&mut copy, &[]).await?.variables > 0 {
                return Err(Error::class(
                    "INVALID_TEMP_OBJ_REFERENCE",
                    format!(
                        "temporary view {name} reads a variable the script block declared, which is gone when the block ends: use a session variable (DECLARE it before BEGIN), or write the value in the query"
                    ),
                ));
            }
        }
        bind(session, &mut query, name).await?;
        let planned = check_columns(session, &query, &columns, name).await?;
        let view = View {
            bound_columns: bound_columns(&query, planned),
            sql: query.to_string(),
            columns,
            comment: c.comment,
        };
        session.set_temp_view(name, view);
        return Ok(Output::empty());
    }
    let name = session.object_name(&c.name)?;
    check_writable_table(&name, true)?;
    let wh = session.warehouse();
    if !wh.schema_exists(&name.catalog, &name.schema) {
        return Err(wh.missing_table_error(&name));
    }
    if wh.table_exists(&name) {
        return Err(Error::AlreadyExists(format!(
            "cannot create view {name}: a table of that name exists"
        )));
    }
    if wh.view_exists(&name) && !c.or_replace {
        if c.if_not_exists {
            return Ok(Output::empty());
        }
        return Err(Error::AlreadyExists(format!(
            "view {name} already exists (use CREATE OR REPLACE VIEW to replace it, or IF NOT EXISTS)"
        )));
    }
    if references_variables(session, &query).await? {
        return Err(Error::class(
            "INVALID_TEMP_OBJ_REFERENCE",
            format!(
                "view {name} reads session variables: a persistent view cannot (other sessions do not have them); use a TEMPORARY view, or write the values in the query"
            ),
        ));
    }
    let temporary = bind(session, &mut query, &name.to_string()).await?;
    if let Some(t) = temporary.first() {
        return Err(Error::class(
            "INVALID_TEMP_OBJ_REFERENCE",
            format!(
                "view {name} reads {t}: a persistent view cannot (other sessions do not have it); make {name} TEMPORARY too, or read tables and persistent functions"
            ),
        ));
    }
    let planned = check_columns(session, &query, &columns, &name.to_string()).await?;
    let view = View {
        bound_columns: bound_columns(&query, planned),
        sql: query.to_string(),
        columns,
        comment: c.comment,
    };
    wh.put_view(&name, &view)?;
    Ok(Output::empty())
}

/// The query plans, and a column list names each of its columns. Returns the query's
/// column names.
async fn check_columns(
    session: &Session,
    query: &datafusion::sql::sqlparser::ast::Query,
    columns: &[String],
    name: &str,
) -> Result<Vec<String>> {
    let (df, _bound) = super::super::query::query_dataframe(session, query.clone()).await?;
    let n = df.schema().fields().len();
    if !columns.is_empty() && columns.len() != n {
        return Err(Error::Invalid(format!(
            "view {name} names {} column(s) and its query returns {n}",
            columns.len()
        )));
    }
    Ok(df
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect())
}

/// The columns a view with `*` in its query keeps reading ([`View::bound_columns`]): the
/// query's columns now, when their names are distinct; none for a query without `*`, whose
/// columns do not change with its tables'.
fn bound_columns(
    query: &datafusion::sql::sqlparser::ast::Query,
    planned: Vec<String>,
) -> Vec<String> {
    use datafusion::sql::sqlparser::ast::{SelectItem, SetExpr, Visit, Visitor};
    struct Stars(bool);
    impl Visitor for Stars {
        type Break = ();
        fn pre_visit_query(
            &mut self,
            q: &datafusion::sql::sqlparser::ast::Query,
        ) -> std::ops::ControlFlow<()> {
            fn has(body: &SetExpr) -> bool {
                match body {
                    SetExpr::Select(s) => s.projection.iter().any(|i| {
                        matches!(
                            i,
                            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
                        )
                    }),
                    SetExpr::SetOperation { left, right, .. } => has(left) || has(right),
                    SetExpr::Query(q) => has(&q.body),
                    _ => false,
                }
            }
            if has(&q.body) {
                self.0 = true;
                return std::ops::ControlFlow::Break(());
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut stars = Stars(false);
    let _ = query.visit(&mut stars);
    let distinct: std::collections::HashSet<&String> = planned.iter().collect();
    if !stars.0 || distinct.len() != planned.len() {
        return vec![];
    }
    planned
}

/// Whether a query reads session variables (binding it replaces some).
async fn references_variables(
    session: &Session,
    query: &datafusion::sql::sqlparser::ast::Query,
) -> Result<bool> {
    let mut bound = query.clone();
    Ok(session.bind(&mut bound, &[]).await?.variables > 0)
}

/// The view's query, bound: time travel is refused (its pinned snapshot lives only as long as
/// one statement).
async fn bind(
    session: &Session,
    query: &mut datafusion::sql::sqlparser::ast::Query,
    name: &str,
) -> Result<Vec<String>> {
    let bound = session.bind_view_query(query).await?;
    if bound.pins_versions() {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!("view {name}: a view cannot read a table VERSION|TIMESTAMP AS OF yet"),
        ));
    }
    Ok(bound
        .temp_views
        .iter()
        .map(|v| format!("temporary view {v}"))
        .chain(
            bound
                .temp_functions
                .iter()
                .map(|f| format!("temporary function {f}")),
        )
        .collect())
}

/// `DROP VIEW [IF EXISTS] v`: a temporary view first (for a one-part name), else the
/// warehouse's.
pub fn drop(session: &Session, name: &ObjectName, if_exists: bool) -> Result<()> {
    let parts = name_parts(name)?;
    if let [one] = parts.as_slice()
        && session.drop_temp_view(one)
    {
        return Ok(());
    }
    let table = session.object_name(name)?;
    check_writable_table(&table, true)?;
    if session.warehouse().remove_view(&table)? {
        return Ok(());
    }
    if session.warehouse().table_exists(&table) {
        return Err(Error::Invalid(format!(
            "{table} is a table, not a view: use DROP TABLE {table}"
        )));
    }
    if if_exists {
        return Ok(());
    }
    Err(Error::NotFound(format!("view '{table}' not found")))
}
