//! Connections and foreign catalogs: `CREATE|DROP CONNECTION`, `SHOW CONNECTIONS`, `DESCRIBE
//! CONNECTION`, `CREATE FOREIGN CATALOG` (a foreign catalog is dropped with `DROP CATALOG`).
//! A foreign catalog is created only once its database answers; a connection's secrets must
//! resolve when it is created, and are never shown (only their `secret('scope', 'key')`).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};

use crate::catalog::foreign::{Connection, ConnectionType, ForeignCatalog, Pool};
use crate::catalog::{SAMPLES, SYSTEM};
use crate::engine::{Output, Session};
use crate::error::{Error, Result};
use crate::parser::{CreateConnection, CreateForeignCatalog};

/// `CREATE CONNECTION`.
pub async fn create_connection(session: &Session, c: CreateConnection) -> Result<Output> {
    let kind = ConnectionType::parse(&c.kind)?;
    let connection = Connection::new(&c.name, kind, c.options, c.comment)?;
    let wh = session.warehouse();
    if wh.connection(&c.name)?.is_some() {
        if c.if_not_exists {
            return Ok(Output::empty());
        }
        return Err(Error::AlreadyExists(format!(
            "connection {} already exists (DROP CONNECTION {} first, or CREATE CONNECTION IF NOT EXISTS)",
            c.name, c.name
        )));
    }
    // Its secrets must be there now, not at the first query.
    for value in connection.options.values() {
        value
            .resolve()
            .map_err(|e| e.context(format!("connection {}", c.name)))?;
    }
    if kind == ConnectionType::Sqlite {
        // Opened (and checked) now: it has no database to name later.
        Pool::open(&connection, None).await?;
    }
    wh.put_connection(&connection)?;
    Ok(Output::empty())
}

/// `CREATE FOREIGN CATALOG`: written once the database answers.
pub async fn create_foreign_catalog(session: &Session, c: CreateForeignCatalog) -> Result<Output> {
    let wh = session.warehouse();
    if [
        crate::catalog::MAIN,
        SAMPLES,
        SYSTEM,
        crate::catalog::SCRATCH,
    ]
    .contains(&c.name.as_str())
    {
        return Err(Error::Invalid(format!(
            "catalog '{}' is built in: name the foreign catalog otherwise",
            c.name
        )));
    }
    if wh.catalog_exists(&c.name) {
        if c.if_not_exists {
            return Ok(Output::empty());
        }
        return Err(Error::AlreadyExists(format!(
            "catalog '{}' already exists (use CREATE FOREIGN CATALOG IF NOT EXISTS, or another name)",
            c.name
        )));
    }
    let connection = wh.connection(&c.connection)?.ok_or_else(|| {
        Error::NotFound(format!(
            "connection {} not found (SHOW CONNECTIONS lists them)",
            c.connection
        ))
    })?;
    let mut options = std::collections::BTreeMap::new();
    for (k, v) in c.options {
        let k = k.to_ascii_lowercase();
        if k != "database" || connection.kind == ConnectionType::Sqlite {
            return Err(Error::Invalid(format!(
                "foreign catalog {}: {} takes {}",
                c.name,
                connection.kind.name(),
                if connection.kind == ConnectionType::Sqlite {
                    "no options (the connection names the file)".to_string()
                } else {
                    format!("OPTIONS (database '...'), not {k}")
                }
            )));
        }
        options.insert(k, v);
    }
    if connection.kind != ConnectionType::Sqlite && !options.contains_key("database") {
        return Err(Error::Invalid(format!(
            "foreign catalog {}: name the {} database, OPTIONS (database '...')",
            c.name,
            connection.kind.name()
        )));
    }
    let def = ForeignCatalog {
        connection: connection.name.clone(),
        options,
        comment: c.comment,
    };
    Pool::open(&connection, Some(&def))
        .await
        .map_err(|e| e.context(format!("foreign catalog {}", c.name)))?;
    wh.put_foreign_catalog(&c.name, &def)?;
    session.forget_foreign(&c.name);
    Ok(Output::empty())
}

/// `DROP CONNECTION`: refused while a foreign catalog uses it.
pub fn drop_connection(session: &Session, name: &str, if_exists: bool) -> Result<Output> {
    let wh = session.warehouse();
    if wh.connection(name)?.is_none() {
        if if_exists {
            return Ok(Output::empty());
        }
        return Err(Error::NotFound(format!(
            "connection {name} not found (SHOW CONNECTIONS lists them)"
        )));
    }
    let users = wh.catalogs_using(name);
    if !users.is_empty() {
        return Err(Error::Invalid(format!(
            "connection {name} is used by the foreign catalog{} {}: DROP CATALOG {} first",
            if users.len() > 1 { "s" } else { "" },
            users.join(", "),
            users.join(", ")
        )));
    }
    wh.remove_connection(name)?;
    Ok(Output::empty())
}

/// `SHOW CONNECTIONS`: name, type, comment.
pub fn show_connections(session: &Session) -> Result<Output> {
    let all = session.warehouse().connections()?;
    let schema = Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("connection_type", DataType::Utf8, false),
        Field::new("comment", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(
                all.iter().map(|c| c.name.clone()),
            )) as ArrayRef,
            Arc::new(StringArray::from_iter_values(
                all.iter().map(|c| c.kind.name()),
            )),
            Arc::new(StringArray::from(
                all.iter().map(|c| c.comment.clone()).collect::<Vec<_>>(),
            )),
        ],
    )?;
    Ok(Output::batch(batch))
}

/// `DESCRIBE CONNECTION`: its type, options (secrets as their references) and comment.
pub fn describe_connection(session: &Session, name: &str) -> Result<Output> {
    let wh = session.warehouse();
    let c = wh.connection(name)?.ok_or_else(|| {
        Error::NotFound(format!(
            "connection {name} not found (SHOW CONNECTIONS lists them)"
        ))
    })?;
    let mut rows: Vec<(String, String)> = vec![
        ("Connection Name".into(), c.name.clone()),
        ("Connection Type".into(), c.kind.name().into()),
    ];
    for (k, v) in &c.options {
        rows.push((k.clone(), v.shown()));
    }
    rows.push(("Comment".into(), c.comment.clone().unwrap_or_default()));
    rows.push((
        "Foreign Catalogs".into(),
        wh.catalogs_using(&c.name).join(", "),
    ));
    let schema = Arc::new(Schema::new(vec![
        Field::new("info_name", DataType::Utf8, false),
        Field::new("info_value", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.0.clone()),
            )) as ArrayRef,
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.1.clone()),
            )),
        ],
    )?;
    Ok(Output::batch(batch))
}
