//! Persistent views: a view is a file next to its schema's tables,
//! `<catalog>/<schema>/<name>.view.json`, holding its query with every table name already
//! resolved (three parts), so it reads the same tables from any session, process or cron run.
//! Written whole and renamed into place, so a reader sees the old definition or the new one.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{TableName, Warehouse};
use crate::error::{Error, Result};

/// File name suffix of a view definition.
const SUFFIX: &str = ".view.json";

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
}

impl Warehouse {
    /// Where the view `name` is (or would be) defined.
    fn view_path(&self, name: &TableName) -> Result<PathBuf> {
        let table = self.table_path(name)?;
        let mut file = table.into_os_string();
        file.push(SUFFIX);
        Ok(PathBuf::from(file))
    }

    /// The view `name`, if there is one.
    pub fn view(&self, name: &TableName) -> Result<Option<View>> {
        let Ok(path) = self.view_path(name) else {
            return Ok(None);
        };
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                Error::Other(format!(
                    "view {name} ({}) cannot be read: {e}; drop it (DROP VIEW {name}) and create it again",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::Other(format!(
                "view {name} ({}) cannot be read: {e}",
                path.display()
            ))),
        }
    }

    /// Whether `name` is a view.
    pub fn view_exists(&self, name: &TableName) -> bool {
        self.view_path(name).is_ok_and(|p| p.is_file())
    }

    /// Write the view `name` (replacing one of that name).
    pub fn put_view(&self, name: &TableName, view: &View) -> Result<()> {
        let path = self.view_path(name)?;
        let dir = path.parent().expect("a view file is in a schema directory");
        self.check_writable(Some(dir))?;
        let tmp = dir.join(format!(
            ".{}.{}.tmp",
            name.table,
            uuid::Uuid::new_v4().simple()
        ));
        let bytes = serde_json::to_vec_pretty(view)
            .map_err(|e| Error::Other(format!("view {name}: {e}")))?;
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })?;
        Ok(())
    }

    /// Remove the view `name`; false when there is none.
    pub fn remove_view(&self, name: &TableName) -> Result<bool> {
        let path = self.view_path(name)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::Other(format!(
                "cannot drop view {name} ({}): {e}",
                path.display()
            ))),
        }
    }

    /// The views of a schema, sorted.
    pub fn views(&self, catalog: &str, schema: &str) -> Vec<String> {
        let Ok(dir) = self.schema_path(catalog, schema) else {
            return vec![];
        };
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| {
                        let name = e.file_name().to_string_lossy().to_string();
                        name.strip_suffix(SUFFIX)
                            .filter(|n| !n.starts_with('.'))
                            .map(str::to_string)
                    })
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}
