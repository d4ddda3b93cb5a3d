//! SHOW CATALOGS|SCHEMAS|TABLES, DESCRIBE and DESCRIBE HISTORY: the warehouse read as tables.
//! One table's SHOW CREATE TABLE, TBLPROPERTIES, COLUMNS and DESCRIBE DETAIL are in
//! `show/table.rs`.

pub(super) mod table;

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::sql::sqlparser::ast::{ObjectName, ObjectNamePart};
use futures::TryStreamExt;

use super::table::{COMMENT_KEY, DEFAULT_KEY};
use crate::catalog::{SAMPLES, TableName, samples};
use crate::engine::types::type_name;
use crate::engine::{Output, Session, name_parts};
use crate::error::{Error, Result};
use crate::parser::ShowWhat;

/// The schema `SHOW TABLES|VIEWS IN ...` names: `[catalog.]schema`, or the current one.
pub(crate) fn schema_in(
    session: &Session,
    parts: &[String],
    what: &str,
) -> Result<(String, String)> {
    Ok(match parts {
        [] => (
            session.current_catalog().to_string(),
            session.current_schema().to_string(),
        ),
        [s] => (session.current_catalog().to_string(), s.clone()),
        [c, s] => (c.clone(), s.clone()),
        _ => {
            return Err(Error::Invalid(format!(
                "SHOW {what} IN takes schema or catalog.schema, found '{}'",
                parts.join(".")
            )));
        }
    })
}

pub(crate) fn strings(name: &str, values: Vec<String>) -> Output {
    let schema = Arc::new(Schema::new(vec![Field::new(name, DataType::Utf8, false)]));
    let batch = RecordBatch::try_new(
        schema,
        vec![Arc::new(StringArray::from(values)) as ArrayRef],
    )
    .expect("one string column");
    Output::batch(batch)
}

/// `SHOW CATALOGS`, `SHOW SCHEMAS [IN c]`, `SHOW TABLES|VIEWS [IN [c.]s]`, each with an
/// optional `[LIKE] 'pattern'`, in Databricks' columns.
pub async fn show(
    session: &Session,
    what: ShowWhat,
    within: Option<&ObjectName>,
    like: Option<&str>,
) -> Result<Output> {
    let parts: Vec<String> = match within {
        Some(n) => name_parts(n)?.iter().map(|p| p.to_lowercase()).collect(),
        None => vec![],
    };
    let wanted = |name: &str| like.is_none_or(|p| matches_pattern(p, name));
    let wh = &session.warehouse();
    match what {
        ShowWhat::Views => show_views(session, within, like).await,
        ShowWhat::Catalogs => {
            let mut names = wh.try_catalogs()?;
            names.retain(|c| wanted(c));
            Ok(strings("catalog", names))
        }
        ShowWhat::Schemas => {
            let catalog = parts
                .first()
                .cloned()
                .unwrap_or_else(|| session.current_catalog().to_string());
            if !wh.catalog_exists(&catalog) {
                return Err(wh.missing_table_error(&TableName::new(&catalog, "_", "_")));
            }
            let mut names = match session.foreign_names(&catalog).await? {
                Some(names) => names.into_iter().map(|(s, _)| s).collect(),
                None => wh.try_schemas(&catalog)?,
            };
            names.retain(|s| wanted(s));
            Ok(strings("databaseName", names))
        }
        ShowWhat::Tables => {
            // As Databricks lists them: the schema's tables and views, then the session's
            // temporary views.
            let (catalog, mut schema) = schema_in(session, &parts, "TABLES")?;
            let mut names: Vec<String> = match session.foreign_names(&catalog).await? {
                Some(names) => {
                    let (spelled, relations) = foreign_schema(names, &catalog, within, &schema)?;
                    schema = spelled;
                    relations.into_iter().map(|r| r.name).collect()
                }
                None => {
                    if !wh.schema_exists(&catalog, &schema) {
                        return Err(wh.missing_table_error(&TableName::new(&catalog, &schema, "_")));
                    }
                    let mut names = wh.try_tables(&catalog, &schema)?;
                    names.extend(wh.views(&catalog, &schema));
                    names.sort();
                    names
                }
            };
            names.retain(|t| wanted(t));
            let mut rows: Vec<(String, String, bool)> = names
                .into_iter()
                .map(|t| (schema.clone(), t, false))
                .collect();
            rows.extend(
                session
                    .temp_views()
                    .into_iter()
                    .filter(|v| wanted(v))
                    .map(|v| (String::new(), v, true)),
            );
            relations(["database", "tableName", "isTemporary"], rows)
        }
    }
}

/// A listing of relations: schema, name, temporary.
fn relations(columns: [&str; 3], rows: Vec<(String, String, bool)>) -> Result<Output> {
    let schema = Arc::new(Schema::new(vec![
        Field::new(columns[0], DataType::Utf8, false),
        Field::new(columns[1], DataType::Utf8, false),
        Field::new(columns[2], DataType::Boolean, false),
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
            Arc::new(BooleanArray::from(
                rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            )),
        ],
    )?;
    Ok(Output::batch(batch))
}

/// Databricks' SHOW pattern: `*` any text, `|` between alternatives (each trimmed),
/// case-insensitive; every other character stands for itself.
pub(crate) fn matches_pattern(pattern: &str, name: &str) -> bool {
    let name: Vec<char> = name.chars().flat_map(char::to_lowercase).collect();
    pattern.split('|').any(|alt| {
        let alt: Vec<char> = alt.trim().chars().flat_map(char::to_lowercase).collect();
        glob(&alt, &name)
    })
}

/// `*` matches any text: a walk that goes back only to the last `*` seen (time in the product
/// of the lengths, whatever the pattern).
fn glob(p: &[char], s: &[char]) -> bool {
    let (mut pi, mut si) = (0, 0);
    // The last `*` and where in `s` its match ends for now.
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if let Some((sp, ss)) = star {
            // The last `*` takes one character more.
            star = Some((sp, ss + 1));
            pi = sp + 1;
            si = ss + 1;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// One DESCRIBE row: name, type, nullable, default, comment.
pub(crate) type ColumnRow = (String, String, bool, Option<String>, Option<String>);

/// `DESCRIBE [TABLE] t`: columns, types, nullability, defaults, comments.
pub async fn describe(session: &Session, name: &ObjectName, extended: bool) -> Result<Output> {
    let table = session.object_name(name)?;
    let view = match name_parts(name)?.as_slice() {
        [one] => session.temp_view(one),
        _ => None,
    }
    .or(session.warehouse().view(&table)?);
    let is_view = view.is_some();
    let mut rows: Vec<ColumnRow> = if let Some(view) = view {
        // A view's columns are its query's: planned, not run.
        let query = datafusion::sql::sqlparser::parser::Parser::new(&crate::parser::DIALECT)
            .try_with_sql(&view.effective_sql())?
            .parse_query()?;
        let (df, _bound) = super::query::query_dataframe(session, *query).await?;
        df.schema()
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                (
                    view.columns.get(i).unwrap_or(f.name()).clone(),
                    type_name(f.data_type()),
                    f.is_nullable(),
                    None,
                    None,
                )
            })
            .collect()
    } else if table.catalog == SAMPLES {
        let (schema, _) = samples::sample_batches(&table.table)
            .ok_or_else(|| session.warehouse().missing_table_error(&table))?;
        field_rows(schema.fields())
    } else {
        let t = session.warehouse().open(&table).await?;
        let arrow = super::table::arrow_schema(&t)?;
        let kernel = t.snapshot()?.schema();
        arrow
            .fields()
            .iter()
            .map(|f| {
                let meta = kernel
                    .field(f.name())
                    .map(|k| k.metadata().clone())
                    .unwrap_or_default();
                let text = |k: &str| match meta.get(k) {
                    Some(deltalake::kernel::MetadataValue::String(s)) => Some(s.clone()),
                    _ => None,
                };
                (
                    f.name().clone(),
                    type_name(f.data_type()),
                    f.is_nullable(),
                    text(DEFAULT_KEY),
                    text(COMMENT_KEY),
                )
            })
            .collect()
    };
    let columns = rows.len();
    if extended {
        rows.extend(table::extended_rows(session, &table, is_view).await?);
    }
    column_rows(&rows, columns)
}

/// `DESCRIBE [QUERY] query`: the columns the query returns, as DESCRIBE shows a table's; the
/// query is planned, not run.
pub async fn describe_query(
    session: &Session,
    query: datafusion::sql::sqlparser::ast::Query,
) -> Result<Output> {
    let (df, _bound) = super::query::query_dataframe(session, query).await?;
    let rows = field_rows(df.schema().fields());
    column_rows(&rows, rows.len())
}

/// DESCRIBE's rows of plain columns: name, type and nullability, no default or comment.
fn field_rows(fields: &datafusion::arrow::datatypes::Fields) -> Vec<ColumnRow> {
    fields
        .iter()
        .map(|f| {
            (
                f.name().clone(),
                type_name(f.data_type()),
                f.is_nullable(),
                None,
                None,
            )
        })
        .collect()
}

/// DESCRIBE's result: one row per column (the first `columns` rows), then extended rows.
fn column_rows(rows: &[ColumnRow], columns: usize) -> Result<Output> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("col_name", DataType::Utf8, false),
        Field::new("data_type", DataType::Utf8, false),
        Field::new("nullable", DataType::Boolean, true),
        Field::new("default", DataType::Utf8, true),
        Field::new("comment", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.0.clone()).collect::<Vec<_>>(),
            )) as ArrayRef,
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>(),
            )),
            Arc::new(BooleanArray::from(
                rows.iter()
                    .enumerate()
                    .map(|(i, r)| (i < columns).then_some(r.2))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.3.clone()).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.4.clone()).collect::<Vec<_>>(),
            )),
        ],
    )?;
    Ok(Output::batch(batch))
}

/// `DESCRIBE HISTORY t`: one row per commit, newest first.
pub async fn describe_history(session: &Session, name: &ObjectName) -> Result<Output> {
    let table = session.table_name(name)?;
    let t = session.warehouse().open(&table).await?;
    let latest = t.version().unwrap_or(0) as i64;
    let infos: Vec<deltalake::kernel::CommitInfo> = t.history(None).try_collect().await?;
    let n = infos.len();
    let json = |v: &Option<std::collections::HashMap<String, serde_json::Value>>| {
        v.as_ref().map(|m| {
            serde_json::to_string(&m.iter().collect::<std::collections::BTreeMap<_, _>>())
                .unwrap_or_default()
        })
    };
    let metrics: Vec<Option<String>> = infos
        .iter()
        .map(|i| {
            let m: std::collections::BTreeMap<&String, &serde_json::Value> = i
                .info
                .iter()
                .filter(|(k, _)| k.as_str() != "clientVersion")
                .collect();
            if m.is_empty() {
                None
            } else {
                serde_json::to_string(&m).ok()
            }
        })
        .collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("version", DataType::Int64, false),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
        Field::new("operation", DataType::Utf8, true),
        Field::new("operation_parameters", DataType::Utf8, true),
        Field::new("read_version", DataType::Int64, true),
        Field::new("is_blind_append", DataType::Boolean, true),
        Field::new("info", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(
                (0..n).map(|i| latest - i as i64).collect::<Vec<_>>(),
            )) as ArrayRef,
            Arc::new(
                TimestampMillisecondArray::from(
                    infos.iter().map(|i| i.timestamp).collect::<Vec<_>>(),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from(
                infos
                    .iter()
                    .map(|i| i.operation.clone())
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                infos
                    .iter()
                    .map(|i| json(&i.operation_parameters))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                infos
                    .iter()
                    .map(|i| i.read_version.map(|v| v as i64))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(BooleanArray::from(
                infos.iter().map(|i| i.is_blind_append).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(metrics)),
        ],
    )?;
    Ok(Output::batch(batch))
}

/// The relations of the schema a foreign catalog's `SHOW ... IN` names (`within`, else the
/// current schema `current`), and the database's spelling of that schema: its exact name
/// (as written, quoted or not), else the one schema that differs only in case; several such
/// are refused by name.
fn foreign_schema(
    names: crate::catalog::foreign::Names,
    catalog: &str,
    within: Option<&ObjectName>,
    current: &str,
) -> Result<(String, Vec<crate::catalog::foreign::Relation>)> {
    // As a query reads the name: unquoted in lower case (then the database's one spelling
    // of it in any case), quoted as written.
    let wanted = match within.and_then(|n| n.0.last()) {
        Some(ObjectNamePart::Identifier(i)) if i.quote_style.is_none() => {
            i.value.to_ascii_lowercase()
        }
        Some(ObjectNamePart::Identifier(i)) => i.value.clone(),
        Some(other) => return Err(Error::Invalid(format!("'{other}' is not a plain name"))),
        None => current.to_string(),
    };
    let spelled = crate::catalog::foreign::spelling(
        catalog,
        "schema",
        &wanted,
        names.iter().map(|(s, _)| s),
    )?
    .ok_or_else(|| {
        Error::NotFound(format!(
            "schema '{catalog}.{wanted}' not found in the foreign catalog {catalog} (SHOW SCHEMAS IN {catalog} lists them)"
        ))
    })?;
    Ok(names
        .into_iter()
        .find(|(s, _)| *s == spelled)
        .expect("a spelling is one of the names"))
}

/// `SHOW VIEWS [IN [catalog.]schema] [[LIKE] 'pattern']`: the schema's views and the
/// session's temporary ones.
async fn show_views(
    session: &Session,
    within: Option<&ObjectName>,
    like: Option<&str>,
) -> Result<Output> {
    let parts: Vec<String> = match within {
        Some(n) => name_parts(n)?.iter().map(|p| p.to_lowercase()).collect(),
        None => vec![],
    };
    let (catalog, schema) = schema_in(session, &parts, "VIEWS")?;
    let mut rows: Vec<(String, String, bool)> = match session.foreign_names(&catalog).await? {
        // A database's views and materialized views.
        Some(names) => {
            let (spelled, relations) = foreign_schema(names, &catalog, within, &schema)?;
            relations
                .into_iter()
                .filter(|r| r.view)
                .map(|r| (spelled.clone(), r.name, false))
                .collect()
        }
        None => {
            if !session.warehouse().schema_exists(&catalog, &schema) {
                return Err(session
                    .warehouse()
                    .missing_table_error(&TableName::new(&catalog, &schema, "_")));
            }
            session
                .warehouse()
                .views(&catalog, &schema)
                .into_iter()
                .map(|v| (schema.clone(), v, false))
                .collect()
        }
    };
    rows.extend(
        session
            .temp_views()
            .into_iter()
            .map(|v| (String::new(), v, true)),
    );
    rows.retain(|r| like.is_none_or(|p| matches_pattern(p, &r.1)));
    relations(["namespace", "viewName", "isTemporary"], rows)
}

#[cfg(test)]
mod tests {
    use super::matches_pattern;

    #[test]
    fn show_patterns_match_as_databricks_and_in_time_whatever_their_stars() {
        assert!(matches_pattern("sales*", "Sales_2024"));
        assert!(matches_pattern(" x | sal*s ", "SALES"));
        assert!(matches_pattern("*", ""));
        assert!(matches_pattern("a*b*c", "aXbYbZc"));
        assert!(!matches_pattern("a*b*c", "aXbYbZ"));
        assert!(!matches_pattern("sales", "sales2"));
        assert!(!matches_pattern("s_les", "sales"));
        // Many stars against a long name that fails late: a walk, not a search of every split.
        let name = "a".repeat(5_000);
        assert!(!matches_pattern(&format!("{}z", "*a".repeat(40)), &name));
        assert!(matches_pattern(&format!("{}*", "*a".repeat(40)), &name));
    }
}
