//! `CREATE VIEW`'s clauses, honoured or refused by name (see the parent module).

use datafusion::sql::sqlparser::ast::ObjectName;

use super::first_present;
use crate::error::Result;

/// `CREATE [OR REPLACE] [TEMP] VIEW [IF NOT EXISTS] v [(cols)] [COMMENT '..'] AS query`: those
/// clauses are honoured; every other is refused by name.
pub fn create_view(c: datafusion::sql::sqlparser::ast::CreateView) -> Result<CreateViewParts> {
    let datafusion::sql::sqlparser::ast::CreateView {
        or_alter,
        or_replace,
        materialized,
        secure,
        name,
        name_before_not_exists: _,
        columns,
        query,
        options,
        cluster_by,
        comment,
        with_no_schema_binding,
        if_not_exists,
        temporary,
        copy_grants,
        to,
        params,
    } = c;
    first_present(
        "CREATE VIEW",
        &[
            (or_alter, "OR ALTER"),
            (materialized, "MATERIALIZED"),
            (secure, "SECURE"),
            (
                options != datafusion::sql::sqlparser::ast::CreateTableOptions::None,
                "view options or TBLPROPERTIES",
            ),
            (!cluster_by.is_empty(), "CLUSTER BY"),
            (with_no_schema_binding, "WITH NO SCHEMA BINDING"),
            (copy_grants, "COPY GRANTS"),
            (to.is_some(), "TO"),
            (params.is_some(), "ALGORITHM, DEFINER or SQL SECURITY"),
            (
                columns
                    .iter()
                    .any(|c| c.data_type.is_some() || c.options.is_some()),
                "types or options in the column list",
            ),
        ],
    )?;
    Ok(CreateViewParts {
        or_replace,
        temporary,
        if_not_exists,
        name,
        columns: columns.into_iter().map(|c| c.name.value).collect(),
        query: *query,
        comment,
    })
}

/// What `CREATE VIEW` does, once its clauses are checked.
pub struct CreateViewParts {
    pub or_replace: bool,
    pub temporary: bool,
    pub if_not_exists: bool,
    pub name: ObjectName,
    pub columns: Vec<String>,
    pub query: datafusion::sql::sqlparser::ast::Query,
    pub comment: Option<String>,
}
