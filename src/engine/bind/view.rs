//! Views in the statements the binder reads: a view's name replaced by its query (a
//! temporary view of the session for a one-part name, else one of the warehouse).

use datafusion::sql::sqlparser::ast::{Ident, TableAlias, TableAliasColumnDef, TableFactor};

use super::RelationBinder;
use crate::catalog::{TableName, View};
use crate::error::{Error, Result};

/// Views one statement reads, at most (a view cannot be created reading itself, but one can
/// be replaced to).
const MAX_VIEWS: usize = 1000;

impl RelationBinder<'_> {
    /// The view a name refers to: a temporary view of the session (one-part names only; it
    /// hides a table of the same name, as in Databricks), else a view of the warehouse.
    pub(super) fn view(
        &self,
        parts: &[String],
        table: &TableName,
    ) -> Result<Option<(String, View)>> {
        if let [name] = parts
            && let Some(v) = self.session.temp_view(name)
        {
            return Ok(Some((name.to_lowercase(), v)));
        }
        Ok(self
            .session
            .warehouse
            .view(table)?
            .map(|v| (table.table.clone(), v)))
    }

    /// `factor` (naming a view) replaced by the view's query, under the view's name or the
    /// statement's alias for it.
    pub(super) fn expand(
        &mut self,
        factor: &mut TableFactor,
        name: String,
        view: View,
    ) -> Result<()> {
        self.views += 1;
        if self.views > MAX_VIEWS {
            return Err(Error::Invalid(format!(
                "reading view {name}, the statement reads more than {MAX_VIEWS} views: does a view read itself? (SHOW CREATE TABLE shows each view's query)"
            )));
        }
        let TableFactor::Table { alias, version, .. } = factor else {
            return Ok(());
        };
        if version.is_some() {
            return Err(Error::Invalid(format!(
                "{name} is a view: it has no versions to travel to (time travel reads tables)"
            )));
        }
        // A view made with `*` reads the columns its query had then.
        let sql = view.effective_sql();
        let query = datafusion::sql::sqlparser::parser::Parser::new(&crate::parser::DIALECT)
            .try_with_sql(&sql)?
            .parse_query()
            .map_err(|e| {
                Error::Other(format!("view {name}: its stored query does not parse: {e}"))
            })?;
        let mut alias = alias.take().unwrap_or(TableAlias {
            explicit: true,
            name: Ident::new(name),
            columns: vec![],
            at: None,
        });
        if alias.columns.is_empty() {
            alias.columns = view
                .columns
                .iter()
                .map(|c| TableAliasColumnDef::from_name(c.as_str()))
                .collect();
        }
        *factor = TableFactor::Derived {
            lateral: false,
            subquery: query,
            alias: Some(alias),
            sample: None,
        };
        Ok(())
    }
}
