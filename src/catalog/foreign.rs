//! Connections and foreign catalogs (Databricks' Lakehouse Federation): a connection is a
//! database server and how to log in (`<warehouse>/_connections/<name>.json`), a foreign
//! catalog is a catalog name over one database of a connection (`<warehouse>/<catalog>/
//! _foreign.json`). Credentials are stored only as `secret('scope', 'key')` references,
//! resolved when a connection is opened (see [`secret`]); a literal password is refused.

mod connect;
mod snapshot;
mod sqlite;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use connect::{
    ForeignCatalogProvider, Names, Pool, Relation, finish_reads, lossy_column, snapshot_of,
    spelling,
};
pub use snapshot::{alone, statement};

use super::{Place, Warehouse};
use crate::error::{Error, Result};

/// The database a connection reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnectionType {
    Postgresql,
    Mysql,
    Sqlite,
}

impl ConnectionType {
    /// The type `TYPE name` names; Databricks' other connection types by name.
    pub fn parse(name: &str) -> Result<ConnectionType> {
        match name.to_ascii_lowercase().as_str() {
            "postgresql" | "postgres" => Ok(ConnectionType::Postgresql),
            "mysql" | "mariadb" => Ok(ConnectionType::Mysql),
            "sqlite" => Ok(ConnectionType::Sqlite),
            other => Err(Error::Invalid(format!(
                "connection type {other} is not supported: tidemark connects to postgresql, mysql (MariaDB too) and sqlite"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ConnectionType::Postgresql => "postgresql",
            ConnectionType::Mysql => "mysql",
            ConnectionType::Sqlite => "sqlite",
        }
    }

    /// The options a connection of this type takes, and which are required.
    fn options(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            ConnectionType::Postgresql => (
                &[
                    "host",
                    "port",
                    "user",
                    "password",
                    "database",
                    "sslmode",
                    "read_connections",
                ],
                &["host", "user"],
            ),
            ConnectionType::Mysql => (
                &[
                    "host",
                    "port",
                    "user",
                    "password",
                    "database",
                    "sslmode",
                    "read_connections",
                ],
                &["host", "user"],
            ),
            ConnectionType::Sqlite => (&["path"], &["path"]),
        }
    }
}

/// The most connections one read of a PostgreSQL or MySQL table may use (`read_connections`).
pub const MAX_READ_CONNECTIONS: usize = 16;

/// Connections one read of a large PostgreSQL table uses unless told.
pub const READ_CONNECTIONS: usize = 4;

/// An option's value: text, or a reference to a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptionValue {
    Text(String),
    Secret { scope: String, key: String },
}

impl OptionValue {
    /// The value, a secret resolved.
    pub fn resolve(&self) -> Result<String> {
        match self {
            OptionValue::Text(t) => Ok(t.clone()),
            OptionValue::Secret { scope, key } => secret(scope, key),
        }
    }

    /// As SQL, a secret as its reference (never its value).
    pub fn shown(&self) -> String {
        match self {
            OptionValue::Text(t) => format!("'{}'", t.replace('\'', "''")),
            OptionValue::Secret { scope, key } => format!(
                "secret('{}', '{}')",
                scope.replace('\'', "''"),
                key.replace('\'', "''")
            ),
        }
    }
}

/// `CREATE CONNECTION`'s definition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Connection {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ConnectionType,
    pub options: BTreeMap<String, OptionValue>,
    #[serde(default)]
    pub comment: Option<String>,
}

impl Connection {
    /// A connection from its statement's parts: options checked against its type, a literal
    /// password refused.
    pub fn new(
        name: &str,
        kind: ConnectionType,
        options: Vec<(String, OptionValue)>,
        comment: Option<String>,
    ) -> Result<Connection> {
        let (allowed, required) = kind.options();
        let mut map = BTreeMap::new();
        for (key, value) in options {
            let k = key.to_ascii_lowercase();
            if !allowed.contains(&k.as_str()) {
                return Err(Error::Invalid(format!(
                    "connection {name}: a {} connection takes the options {}, not {key}",
                    kind.name(),
                    allowed.join(", ")
                )));
            }
            if k == "read_connections" && matches!(value, OptionValue::Secret { .. }) {
                return Err(Error::Invalid(format!(
                    "connection {name}: read_connections is a number ('4'), not a secret"
                )));
            }
            if k == "password" && matches!(value, OptionValue::Text(_)) {
                return Err(Error::Invalid(format!(
                    "connection {name}: a password is stored only as a secret: write password secret('scope', 'key') and set TIDEMARK_SECRET_SCOPE_KEY (or the secrets file, see the README)"
                )));
            }
            if let OptionValue::Text(text) = &value {
                check_value(name, kind, &k, text)?;
            }
            if map.insert(k, value).is_some() {
                return Err(Error::Invalid(format!(
                    "connection {name}: option {key} is given twice"
                )));
            }
        }
        if let Some(missing) = required.iter().find(|r| !map.contains_key(**r)) {
            return Err(Error::Invalid(format!(
                "connection {name}: a {} connection needs the option {missing}",
                kind.name()
            )));
        }
        Ok(Connection {
            name: name.to_string(),
            kind,
            options: map,
            comment,
        })
    }
}

/// A literal option value as the driver will take it: a port is a number, a TLS mode one the
/// driver verifies, and names carry no spaces, `=`, quotes or backslashes (PostgreSQL's
/// driver joins them into one `key=value` string, where they would add settings).
fn check_value(name: &str, kind: ConnectionType, key: &str, value: &str) -> Result<()> {
    let bad = |why: String| {
        Err(Error::Invalid(format!(
            "connection {name}: option {key} {why}"
        )))
    };
    match key {
        "port" if value.parse::<u16>().is_err() => {
            bad(format!("is a port number, found '{value}'"))
        }
        "read_connections"
            if !value
                .parse::<usize>()
                .is_ok_and(|n| (1..=MAX_READ_CONNECTIONS).contains(&n)) =>
        {
            bad(format!(
                "is how many connections read one large table, 1 to {MAX_READ_CONNECTIONS}, found '{value}'"
            ))
        }
        "sslmode" => {
            let allowed: &[&str] = match kind {
                ConnectionType::Postgresql => &["disable", "require", "verify-ca", "verify-full"],
                _ => &["disabled", "required"],
            };
            if allowed.contains(&value) {
                Ok(())
            } else {
                bad(format!(
                    "is one of {} (lower case), found '{value}'",
                    allowed.join(", ")
                ))
            }
        }
        "host" | "user" | "database"
            if value.is_empty()
                || value.contains(|c: char| c.is_whitespace() || "='\"\\".contains(c)) =>
        {
            bad(format!(
                "'{value}' is empty or holds a space, =, a quote or a backslash"
            ))
        }
        _ => Ok(()),
    }
}

/// `CREATE FOREIGN CATALOG`'s definition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ForeignCatalog {
    pub connection: String,
    /// `database` (PostgreSQL, MySQL).
    pub options: BTreeMap<String, OptionValue>,
    #[serde(default)]
    pub comment: Option<String>,
}

/// The file in a catalog directory that makes it a foreign catalog.
const FOREIGN_FILE: &str = "_foreign.json";
/// The directory of connections in the warehouse.
const CONNECTIONS_DIR: &str = "_connections";

impl Warehouse {
    fn connection_path(&self, name: &str) -> Result<Place> {
        super::check_part("connection", name)?;
        Ok(self
            .root
            .join(CONNECTIONS_DIR)
            .join(&format!("{}.json", name.to_lowercase())))
    }

    /// The connection `name`, if there is one.
    pub fn connection(&self, name: &str) -> Result<Option<Connection>> {
        read_json(&self.connection_path(name)?, &format!("connection {name}"))
    }

    /// Every connection, by name.
    pub fn connections(&self) -> Result<Vec<Connection>> {
        let names: Vec<String> = self
            .root
            .join(CONNECTIONS_DIR)
            .list(false)
            .into_iter()
            .filter_map(|n| n.strip_suffix(".json").map(str::to_string))
            .collect();
        let mut out = vec![];
        for n in names {
            if let Some(c) = self.connection(&n)? {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// Write a connection (replacing one of its name).
    pub fn put_connection(&self, c: &Connection) -> Result<()> {
        write_json(&self.connection_path(&c.name)?, c, self)
    }

    /// Remove the connection `name`; false when there is none.
    pub fn remove_connection(&self, name: &str) -> Result<bool> {
        remove(&self.connection_path(name)?)
    }

    /// The foreign catalog `catalog`, if it is one.
    pub fn foreign_catalog(&self, catalog: &str) -> Result<Option<ForeignCatalog>> {
        let Ok(dir) = self.catalog_path(catalog) else {
            return Ok(None);
        };
        read_json(
            &dir.join(FOREIGN_FILE),
            &format!("foreign catalog {catalog}"),
        )
    }

    /// Whether `catalog` is a foreign catalog.
    pub fn is_foreign(&self, catalog: &str) -> bool {
        // The built-in catalogs never are (CREATE FOREIGN CATALOG refuses their names).
        if [super::MAIN, super::SYSTEM, super::SAMPLES].contains(&catalog) {
            return false;
        }
        self.catalog_path(catalog)
            .is_ok_and(|d| d.join(FOREIGN_FILE).is_file())
    }

    /// Make the new catalog `catalog` a foreign one.
    pub fn put_foreign_catalog(&self, catalog: &str, def: &ForeignCatalog) -> Result<()> {
        let dir = self.catalog_path(catalog)?;
        write_json(&dir.join(FOREIGN_FILE), def, self)
    }

    /// The foreign catalogs over connection `name`.
    pub fn catalogs_using(&self, name: &str) -> Vec<String> {
        self.catalogs()
            .into_iter()
            .filter(|c| {
                self.foreign_catalog(c)
                    .ok()
                    .flatten()
                    .is_some_and(|f| f.connection.eq_ignore_ascii_case(name))
            })
            .collect()
    }

    /// The error for a write into (or a Delta operation on) the foreign catalog `catalog`.
    pub fn foreign_error(&self, catalog: &str, what: &str) -> Error {
        let connection = self
            .foreign_catalog(catalog)
            .ok()
            .flatten()
            .map(|f| f.connection)
            .unwrap_or_default();
        Error::Invalid(format!(
            "{what}: {catalog} is a foreign catalog (connection {connection}): its tables are read (SELECT, JOIN, INSERT INTO a warehouse table SELECT ... FROM it, the source of COPY INCREMENTAL), never written"
        ))
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Place, what: &str) -> Result<Option<T>> {
    let Some(bytes) = path
        .read()
        .map_err(|e| Error::Other(format!("{what} cannot be read: {e}")))?
    else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::Other(format!("{what} ({path}) cannot be read: {e}")))
}

/// Written whole: a reader sees the old file or the new one.
fn write_json<T: Serialize>(path: &Place, value: &T, warehouse: &Warehouse) -> Result<()> {
    warehouse.check_writable(None)?;
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| Error::Other(e.to_string()))?;
    path.write(bytes)
}

fn remove(path: &Place) -> Result<bool> {
    path.remove_file()
}

/// The environment variable that holds `secret(scope, key)`.
pub fn secret_variable(scope: &str, key: &str) -> String {
    let part = |s: &str| {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect::<String>()
    };
    format!("TIDEMARK_SECRET_{}_{}", part(scope), part(key))
}

/// The secrets file: `TIDEMARK_SECRETS_FILE`, else `~/.tidemark/secrets.json`.
fn secrets_file() -> Option<PathBuf> {
    std::env::var_os("TIDEMARK_SECRETS_FILE")
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".tidemark").join("secrets.json")))
}

/// `secret(scope, key)`: the environment variable [`secret_variable`] names, else the key of
/// the scope in the secrets file (`{"scope": {"key": "value"}}`), which only its owner may
/// read.
pub fn secret(scope: &str, key: &str) -> Result<String> {
    let variable = secret_variable(scope, key);
    if let Ok(v) = std::env::var(&variable) {
        return Ok(v);
    }
    let missing = || {
        Error::NotFound(format!(
            "secret('{scope}', '{key}') is not set: export {variable}=..., or add it to the secrets file ({}) as {{\"{scope}\": {{\"{key}\": \"...\"}}}}",
            secrets_file()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "TIDEMARK_SECRETS_FILE".into())
        ))
    };
    let Some(path) = secrets_file() else {
        return Err(missing());
    };
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(missing()),
        Err(e) => {
            return Err(Error::Other(format!(
                "secrets file {}: {e}",
                path.display()
            )));
        }
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path)?.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(Error::Invalid(format!(
                "secrets file {} may be read by others (mode {:o}): chmod 600 {}",
                path.display(),
                mode & 0o777,
                path.display()
            )));
        }
    }
    let json: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        Error::Invalid(format!(
            "secrets file {} is not JSON ({{\"scope\": {{\"key\": \"value\"}}}}): {e}",
            path.display()
        ))
    })?;
    json.get(scope)
        .and_then(|s| s.get(key))
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .ok_or_else(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_password_is_refused_and_options_are_checked() {
        let text = |s: &str| OptionValue::Text(s.into());
        let e = Connection::new(
            "pg",
            ConnectionType::Postgresql,
            vec![
                ("host".into(), text("h")),
                ("user".into(), text("u")),
                ("password".into(), text("p")),
            ],
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("stored only as a secret"), "{e}");
        let e = Connection::new(
            "pg",
            ConnectionType::Postgresql,
            vec![("host".into(), text("h"))],
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("needs the option user"), "{e}");
        let e = Connection::new(
            "s",
            ConnectionType::Sqlite,
            vec![("file".into(), text("x"))],
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("takes the options path, not file"), "{e}");
        assert_eq!(
            secret_variable("prod-db", "pg.pass"),
            "TIDEMARK_SECRET_PROD_DB_PG_PASS"
        );
        assert_eq!(
            OptionValue::Secret {
                scope: "s".into(),
                key: "k".into()
            }
            .shown(),
            "secret('s', 'k')"
        );
    }
}
