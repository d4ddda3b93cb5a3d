//! Views and SQL functions: each is a file next to its schema's tables,
//! `<catalog>/<schema>/<name>.view.json` or `<name>.function.json`, holding its SQL with every
//! table (and function) name already resolved to three parts, so it reads the same objects
//! from any session, process or cron run. Written whole and renamed into place, so a reader
//! sees the old definition or the new one.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{Place, TableName, Warehouse, check_part};
use crate::error::{Error, Result};

/// A view's definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct View {
    /// The query, every relation named in three parts.
    pub sql: String,
    /// Column names given in `CREATE VIEW v (a, b)`; empty: the query's own.
    #[serde(default)]
    pub columns: Vec<String>,
    #[serde(default)]
    pub comment: Option<String>,
    /// The query's columns when the view was made, for a query with `*`: the view reads
    /// these (a column added to its table later is not the view's, as with Databricks'
    /// schema binding); empty: the query's columns as it plans when read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bound_columns: Vec<String>,
}

impl View {
    /// The query the view reads: its stored query, or for a view made with `*` the columns it
    /// had then ([`View::bound_columns`]) selected from it.
    pub fn effective_sql(&self) -> String {
        if self.bound_columns.is_empty() {
            return self.sql.clone();
        }
        format!(
            "SELECT {} FROM ({}) AS __view_columns",
            self.bound_columns
                .iter()
                .map(|c| super::backquoted(c))
                .collect::<Vec<_>>()
                .join(", "),
            self.sql
        )
    }
}

/// A SQL function's definition (`CREATE FUNCTION f(p TYPE, ...) RETURNS ... RETURN ...`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Function {
    pub params: Vec<Param>,
    /// What it returns: one value of a type, or a table.
    pub returns: Returns,
    /// The body: an expression (scalar) or a query (table), objects named in three parts.
    pub body: String,
    #[serde(default)]
    pub comment: Option<String>,
    /// Declared `NOT DETERMINISTIC`: never folded into a constant.
    #[serde(default)]
    pub not_deterministic: bool,
}

/// One parameter of a [`Function`]; types and defaults as SQL text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub data_type: String,
    #[serde(default)]
    pub default: Option<String>,
    #[serde(default)]
    pub comment: Option<String>,
}

/// What a [`Function`] returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Returns {
    /// A value of this SQL type.
    Scalar(String),
    /// A table of these columns (name, SQL type).
    Table(Vec<(String, String)>),
}

/// The kinds of definition files.
trait Definition: Serialize + DeserializeOwned {
    /// File name suffix.
    const SUFFIX: &'static str;
    /// What the user calls it, for messages.
    const KIND: &'static str;
    /// The statement that drops one.
    const DROP: &'static str;
}

impl Definition for View {
    const SUFFIX: &'static str = ".view.json";
    const KIND: &'static str = "view";
    const DROP: &'static str = "DROP VIEW";
}

impl Definition for Function {
    const SUFFIX: &'static str = ".function.json";
    const KIND: &'static str = "function";
    const DROP: &'static str = "DROP FUNCTION";
}

impl Warehouse {
    /// Where the definition of `name` is (or would be).
    fn definition_path<D: Definition>(&self, name: &TableName) -> Result<Place> {
        check_part("table", &name.table)?;
        self.check_store_name("table", &name.table)?;
        Ok(self
            .schema_path(&name.catalog, &name.schema)?
            .join(&format!("{}{}", name.table, D::SUFFIX)))
    }

    fn definition<D: Definition>(&self, name: &TableName) -> Result<Option<D>> {
        let Ok(path) = self.definition_path::<D>(name) else {
            return Ok(None);
        };
        let bytes = path
            .read()
            .map_err(|e| Error::Other(format!("{} {name} cannot be read: {e}", D::KIND)))?;
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            Error::Other(format!(
                "{} {name} ({path}) cannot be read: {e}; drop it ({} {name}) and create it again",
                D::KIND,
                D::DROP
            ))
        })
    }

    fn put_definition<D: Definition>(&self, name: &TableName, definition: &D) -> Result<()> {
        let path = self.definition_path::<D>(name)?;
        // main.default exists before anything is written to it.
        self.check_writable(path.parent().as_ref())?;
        let bytes = serde_json::to_vec_pretty(definition)
            .map_err(|e| Error::Other(format!("{} {name}: {e}", D::KIND)))?;
        path.write(bytes)
    }

    fn remove_definition<D: Definition>(&self, name: &TableName) -> Result<bool> {
        let path = self.definition_path::<D>(name)?;
        path.remove_file()
            .map_err(|e| Error::Other(format!("cannot drop {} {name}: {e}", D::KIND)))
    }

    fn definitions<D: Definition>(&self, catalog: &str, schema: &str) -> Vec<String> {
        let Ok(dir) = self.schema_path(catalog, schema) else {
            return vec![];
        };
        dir.list(false)
            .into_iter()
            .filter_map(|n| n.strip_suffix(D::SUFFIX).map(str::to_string))
            .collect()
    }

    /// The view `name`, if there is one.
    pub fn view(&self, name: &TableName) -> Result<Option<View>> {
        self.definition(name)
    }

    /// Whether `name` is a view.
    pub fn view_exists(&self, name: &TableName) -> bool {
        self.definition_path::<View>(name)
            .is_ok_and(|p| p.is_file())
    }

    /// Write the view `name` (replacing one of that name).
    pub fn put_view(&self, name: &TableName, view: &View) -> Result<()> {
        self.put_definition(name, view)
    }

    /// Remove the view `name`; false when there is none.
    pub fn remove_view(&self, name: &TableName) -> Result<bool> {
        self.remove_definition::<View>(name)
    }

    /// The views of a schema, sorted.
    pub fn views(&self, catalog: &str, schema: &str) -> Vec<String> {
        self.definitions::<View>(catalog, schema)
    }

    /// The SQL function `name`, if there is one.
    pub fn function(&self, name: &TableName) -> Result<Option<Function>> {
        self.definition(name)
    }

    /// Write the SQL function `name` (replacing one of that name).
    pub fn put_function(&self, name: &TableName, function: &Function) -> Result<()> {
        self.put_definition(name, function)
    }

    /// Remove the SQL function `name`; false when there is none.
    pub fn remove_function(&self, name: &TableName) -> Result<bool> {
        self.remove_definition::<Function>(name)
    }

    /// The SQL functions of a schema, sorted.
    pub fn functions(&self, catalog: &str, schema: &str) -> Vec<String> {
        self.definitions::<Function>(catalog, schema)
    }
}
