//! One table described: `SHOW CREATE TABLE` (a statement that re-creates it), `SHOW
//! TBLPROPERTIES`, `SHOW COLUMNS` and `DESCRIBE DETAIL`, with Databricks' column names.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Int32Array, Int64Array, ListBuilder, MapBuilder, RecordBatch, StringArray,
    StringBuilder, TimestampMillisecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use deltalake::DeltaTable;
use deltalake::kernel::{DataType as DeltaType, MetadataValue, StructField};

use super::strings;
use datafusion::sql::sqlparser::ast::ObjectName;

use crate::catalog::{SAMPLES, TableName, backquoted, quote_ident};
use crate::engine::{Output, Session, name_parts};
use crate::error::{Error, Result};
use crate::parser::{OnTable, TableAction};
use crate::statements::ddl::GENERATION_KEY;
use crate::statements::table::{COMMENT_KEY, DEFAULT_KEY};

/// Run one of the describing statements on `table`.
pub async fn execute(
    session: &Session,
    name: &ObjectName,
    table: &TableName,
    action: TableAction,
) -> Result<Output> {
    let temporary = match name_parts(name)?.as_slice() {
        [one] => session.temp_view(one).map(|v| (one.to_lowercase(), v)),
        _ => None,
    };
    let view = match temporary {
        Some((one, v)) => Some((format!("CREATE TEMPORARY VIEW {}", quote_ident(&one)), v)),
        None => (session.warehouse().view(table)?).map(|v| (format!("CREATE VIEW {table}"), v)),
    };
    if let Some((head, view)) = view {
        return match action {
            TableAction::ShowCreate => {
                let mut sql = head;
                if !view.columns.is_empty() {
                    let columns: Vec<String> =
                        view.columns.iter().map(|c| column_name(c)).collect();
                    sql.push_str(&format!(" ({})", columns.join(", ")));
                }
                if let Some(c) = &view.comment {
                    sql.push_str(&format!(" COMMENT {}", literal(c)));
                }
                sql.push_str(&format!(" AS {}", as_typed(&view.effective_sql(), true)));
                Ok(strings("createtab_stmt", vec![sql]))
            }
            _ => Err(Error::Invalid(format!(
                "{table} is a view: {} describes tables (DESCRIBE {table} lists its columns)",
                OnTable {
                    table: name.clone(),
                    action
                }
            ))),
        };
    }
    if table.catalog == SAMPLES {
        return Err(Error::Invalid(format!(
            "{table} is one of tidemark's built-in sample tables, not a Delta table (DESCRIBE {table} lists its columns)"
        )));
    }
    let t = session.warehouse().open(table).await?;
    match action {
        TableAction::ShowCreate => Ok(strings(
            "createtab_stmt",
            vec![create_statement(
                table,
                &t,
                session.warehouse().external_location(table),
            )?],
        )),
        TableAction::ShowProperties { key } => properties(table, &t, key),
        TableAction::ShowColumns => {
            let names = t
                .snapshot()?
                .schema()
                .fields()
                .map(|f| f.name().clone())
                .collect();
            Ok(strings("col_name", names))
        }
        TableAction::DescribeDetail => detail(session, table, &t).await,
        TableAction::ShowPartitions { partition } => {
            partitions(session, table, &t, partition).await
        }
        other => Err(Error::Other(format!(
            "not a describing statement: {other:?}"
        ))),
    }
}

/// `SHOW PARTITIONS t [PARTITION (c = v, ...)]`: the table's partitions (those the spec
/// names), a column per partition column with its type, in order.
async fn partitions(
    session: &Session,
    table: &TableName,
    t: &DeltaTable,
    spec: Vec<(
        datafusion::sql::sqlparser::ast::Ident,
        datafusion::sql::sqlparser::ast::Expr,
    )>,
) -> Result<Output> {
    let columns: Vec<String> = t.snapshot()?.metadata().partition_columns().to_vec();
    if columns.is_empty() {
        return Err(Error::class(
            "INVALID_PARTITION_OPERATION.PARTITION_SCHEMA_IS_EMPTY",
            format!("SHOW PARTITIONS is not allowed on {table}, which is not partitioned"),
        ));
    }
    let predicate = crate::statements::ddl::on_table::partition_predicate(
        table,
        &columns,
        spec,
        &format!("SHOW PARTITIONS {table} PARTITION"),
        "name partition columns only",
    )?;
    // Always quoted: a column named `current_date` or `null` is a column here.
    let list: Vec<String> = columns.iter().map(|c| backquoted(c)).collect();
    let list = list.join(", ");
    let from: Vec<String> = [&table.catalog, &table.schema, &table.table]
        .iter()
        .map(|p| backquoted(p))
        .collect();
    let filter = predicate.map(|p| format!(" WHERE {p}")).unwrap_or_default();
    let sql = format!(
        "SELECT DISTINCT {list} FROM {}{filter} ORDER BY {list}",
        from.join(".")
    );
    let query = crate::parser::query_text(&sql)?;
    let (df, _bound) = crate::statements::query::query_dataframe(session, query).await?;
    let schema = Arc::new(df.schema().as_arrow().clone());
    let batches = df.collect().await?;
    Ok(Output { schema, batches })
}

/// The CREATE TABLE statement that makes a table like `t`: columns with their types, NOT NULL,
/// DEFAULT, generation expressions and comments; USING DELTA; partitioning; an external
/// table's LOCATION; the comment; the table properties (CHECK constraints are
/// `delta.constraints.*` properties, as Databricks shows them).
fn create_statement(
    table: &TableName,
    t: &DeltaTable,
    location: Option<url::Url>,
) -> Result<String> {
    let snapshot = t.snapshot()?;
    let metadata = snapshot.metadata();
    // What tidemark's CREATE TABLE cannot make yet: no statement rather than one that makes
    // another table.
    let unmade = snapshot.schema().fields().find_map(|f| {
        f.metadata().keys().find_map(|k| {
            (k.starts_with("delta.identity.") || k == "delta.invariants")
                .then(|| format!("column {} has '{k}'", f.name()))
        })
    });
    if let Some(why) = unmade {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "SHOW CREATE TABLE {table}: {why}, which CREATE TABLE does not make yet (DESCRIBE DETAIL {table} and SHOW TBLPROPERTIES {table} describe the table)"
            ),
        ));
    }
    let columns: Vec<String> = snapshot
        .schema()
        .fields()
        .map(|f| format!("  {}", column_sql(f)))
        .collect();
    let mut out = format!(
        "CREATE TABLE {table} (\n{})\nUSING DELTA",
        columns.join(",\n")
    );
    let partitions = metadata.partition_columns();
    if !partitions.is_empty() {
        let names: Vec<String> = partitions.iter().map(|p| quote_ident(p)).collect();
        out.push_str(&format!("\nPARTITIONED BY ({})", names.join(", ")));
    }
    if let Some(url) = location {
        let shown = crate::catalog::external::shown(&url);
        out.push_str(&format!("\nLOCATION {}", literal(&shown)));
    }
    if let Some(c) = metadata.description() {
        out.push_str(&format!("\nCOMMENT {}", literal(c)));
    }
    // The protocol versions follow from the table's features (the constraints among the
    // properties set them up again); SHOW TBLPROPERTIES lists them.
    let props = own_properties(metadata);
    if !props.is_empty() {
        let props: Vec<String> = props
            .iter()
            .map(|(k, v)| format!("  {} = {}", literal(k), literal(v)))
            .collect();
        out.push_str(&format!("\nTBLPROPERTIES (\n{})", props.join(",\n")));
    }
    Ok(out)
}

/// One column of a CREATE TABLE.
fn column_sql(f: &StructField) -> String {
    let mut out = format!("{} {}", column_name(f.name()), sql_type(f.data_type()));
    if !f.is_nullable() {
        out.push_str(" NOT NULL");
    }
    let text = |k: &str| match f.metadata().get(k) {
        Some(MetadataValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    if let Some(g) = text(GENERATION_KEY) {
        out.push_str(&format!(" GENERATED ALWAYS AS ({})", as_typed(&g, false)));
    }
    if let Some(d) = text(DEFAULT_KEY) {
        out.push_str(&format!(" DEFAULT {}", as_typed(&d, false)));
    }
    if let Some(c) = text(COMMENT_KEY) {
        out.push_str(&format!(" COMMENT {}", literal(&c)));
    }
    out
}

/// A Delta type as Databricks SQL writes it (`BIGINT`, `DECIMAL(10,2)`, `ARRAY<STRING>`,
/// `MAP<STRING, INT>`, `STRUCT<a: INT, b: STRING>`).
fn sql_type(t: &DeltaType) -> String {
    match t {
        DeltaType::Primitive(p) => {
            let name = serde_json::to_value(p)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| format!("{p:?}"));
            match name.as_str() {
                "long" => "BIGINT".into(),
                "integer" => "INT".into(),
                "short" => "SMALLINT".into(),
                "byte" => "TINYINT".into(),
                other => other.to_uppercase(),
            }
        }
        DeltaType::Array(a) => format!("ARRAY<{}>", sql_type(&a.element_type)),
        DeltaType::Map(m) => format!(
            "MAP<{}, {}>",
            sql_type(&m.key_type),
            sql_type(&m.value_type)
        ),
        DeltaType::Struct(s) => {
            let fields: Vec<String> = s
                .fields()
                .map(|f| {
                    let null = if f.is_nullable() { "" } else { " NOT NULL" };
                    format!(
                        "{}: {}{null}",
                        column_name(f.name()),
                        sql_type(f.data_type())
                    )
                })
                .collect();
            format!("STRUCT<{}>", fields.join(", "))
        }
        DeltaType::Variant(_) => "VARIANT".into(),
    }
}

/// A column name as CREATE TABLE reads it back: back-quoted unless plain, and always when it
/// is a word that starts a table constraint there (`check`, `primary`, ...).
fn column_name(name: &str) -> String {
    const CONSTRAINT_WORDS: &[&str] = &[
        "CHECK",
        "CONSTRAINT",
        "FOREIGN",
        "FULLTEXT",
        "INDEX",
        "KEY",
        "LIKE",
        "PERIOD",
        "PRIMARY",
        "SPATIAL",
        "UNIQUE",
    ];
    if CONSTRAINT_WORDS.contains(&name.to_uppercase().as_str()) {
        backquoted(name)
    } else {
        quote_ident(name)
    }
}

/// A table's own properties, sorted: its configuration without the protocol versions (a
/// CREATE TABLE may have left a stale copy of them there; the protocol's are the truth).
fn own_properties(metadata: &deltalake::kernel::Metadata) -> Vec<(String, String)> {
    let mut props: Vec<(String, String)> = metadata
        .configuration()
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "delta.minReaderVersion" | "delta.minWriterVersion"
            )
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    props.sort();
    props
}

/// `s` as an SQL string literal.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// SQL tidemark stored (printed from the syntax tree, strings as they are) as a statement
/// reads it back: a backslash in a string literal doubled, since statements unescape them.
fn as_typed(sql: &str, query: bool) -> String {
    use datafusion::sql::sqlparser::ast::{Expr, Value, VisitMut, visit_expressions_mut};
    fn doubled<T: VisitMut + std::fmt::Display>(mut tree: T) -> String {
        let _ = visit_expressions_mut(&mut tree, |e| {
            if let Expr::Value(v) = e
                && let Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) = &mut v.value
            {
                *s = s.replace('\\', "\\\\");
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        tree.to_string()
    }
    if !sql.contains('\\') {
        return sql.to_string();
    }
    let printed = if query {
        crate::parser::query_text(sql).map(doubled)
    } else {
        crate::parser::expr_text(sql).map(doubled)
    };
    printed.unwrap_or_else(|_| sql.to_string())
}

/// The table's properties as Databricks lists them: its configuration, then the protocol
/// versions and features. With a key: that one (a key the table does not have says so, as in
/// Databricks).
fn properties(table: &TableName, t: &DeltaTable, key: Option<String>) -> Result<Output> {
    let snapshot = t.snapshot()?;
    let protocol = snapshot.protocol();
    // The protocol's versions, not a stale copy a CREATE TABLE left among the properties.
    let mut rows = own_properties(snapshot.metadata());
    rows.push((
        "delta.minReaderVersion".into(),
        protocol.min_reader_version().to_string(),
    ));
    rows.push((
        "delta.minWriterVersion".into(),
        protocol.min_writer_version().to_string(),
    ));
    for f in features(t)? {
        rows.push((format!("delta.feature.{f}"), "supported".into()));
    }
    if let Some(key) = key {
        let value = rows
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| format!("Table {table} does not have property: {key}"));
        rows = vec![(key, value)];
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("value", DataType::Utf8, false),
    ]));
    let (keys, values): (Vec<String>, Vec<String>) = rows.into_iter().unzip();
    Ok(Output::batch(RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(keys)) as ArrayRef,
            Arc::new(StringArray::from(values)),
        ],
    )?))
}

/// The table features a table uses: those its protocol names, or, for a protocol without
/// feature lists, those its versions imply.
fn features(t: &DeltaTable) -> Result<Vec<String>> {
    let protocol = t.snapshot()?.protocol();
    let mut out: Vec<String> = vec![];
    for f in protocol.reader_features().into_iter().flatten() {
        out.push(f.to_string());
    }
    for f in protocol.writer_features().into_iter().flatten() {
        out.push(f.to_string());
    }
    if out.is_empty() {
        let writer = protocol.min_writer_version();
        let implied: &[(i32, &str)] = &[
            (2, "appendOnly"),
            (2, "invariants"),
            (3, "checkConstraints"),
            (4, "changeDataFeed"),
            (4, "generatedColumns"),
            (5, "columnMapping"),
            (6, "identityColumns"),
        ];
        out = implied
            .iter()
            .filter(|(v, _)| writer >= *v)
            .map(|(_, f)| f.to_string())
            .collect();
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// `DESCRIBE DETAIL t`: one row, Databricks' columns.
async fn detail(session: &Session, table: &TableName, t: &DeltaTable) -> Result<Output> {
    use futures::TryStreamExt;
    let snapshot = t.snapshot()?;
    let metadata = snapshot.metadata();
    let last: Vec<deltalake::kernel::CommitInfo> = t.history(Some(1)).try_collect().await?;
    let files = snapshot.log_data();
    let size: i64 = files.iter().map(|f| f.size()).sum();
    let location = match session.warehouse().external_location(table) {
        Some(url) => crate::catalog::external::shown(&url),
        None => session.warehouse().table_path(table)?.to_string(),
    };
    let list = |values: &[String]| -> ArrayRef {
        let mut b = ListBuilder::new(StringBuilder::new());
        for v in values {
            b.values().append_value(v);
        }
        b.append(true);
        Arc::new(b.finish())
    };
    let mut props = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    let mut config: Vec<(&String, &String)> = metadata.configuration().iter().collect();
    config.sort();
    for (k, v) in config {
        props.keys().append_value(k);
        props.values().append_value(v);
    }
    props.append(true)?;
    let props = props.finish();
    let protocol = snapshot.protocol();
    let ts = |v: Option<i64>| -> ArrayRef {
        Arc::new(TimestampMillisecondArray::from(vec![v]).with_timezone("UTC"))
    };
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("format", Arc::new(StringArray::from(vec!["delta"]))),
        ("id", Arc::new(StringArray::from(vec![metadata.id()]))),
        ("name", Arc::new(StringArray::from(vec![table.to_string()]))),
        (
            "description",
            Arc::new(StringArray::from(vec![metadata.description()])),
        ),
        ("location", Arc::new(StringArray::from(vec![location]))),
        ("createdAt", ts(metadata.created_time())),
        ("lastModified", ts(last.first().and_then(|i| i.timestamp))),
        ("partitionColumns", list(metadata.partition_columns())),
        ("clusteringColumns", list(&[])),
        (
            "numFiles",
            Arc::new(Int64Array::from(vec![files.num_files() as i64])),
        ),
        ("sizeInBytes", Arc::new(Int64Array::from(vec![size]))),
        ("properties", Arc::new(props)),
        (
            "minReaderVersion",
            Arc::new(Int32Array::from(vec![protocol.min_reader_version()])),
        ),
        (
            "minWriterVersion",
            Arc::new(Int32Array::from(vec![protocol.min_writer_version()])),
        ),
        ("tableFeatures", list(&features(t)?)),
    ];
    let fields: Vec<Field> = columns
        .iter()
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
        .collect();
    let arrays = columns.into_iter().map(|(_, a)| a).collect();
    Ok(Output::batch(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        arrays,
    )?))
}

/// The rows `DESCRIBE EXTENDED t` adds after the columns, as Databricks: a blank row, then
/// `# Detailed Table Information` and one row per detail (DESCRIBE DETAIL's, by name).
pub(crate) async fn extended_rows(
    session: &Session,
    table: &TableName,
    is_view: bool,
) -> Result<Vec<super::ColumnRow>> {
    let row = |k: &str, v: String| (k.to_string(), v, false, None, None);
    let mut rows = vec![
        row("", String::new()),
        row("# Detailed Table Information", String::new()),
        row("Catalog", table.catalog.clone()),
        row("Database", table.schema.clone()),
        row("Table", table.table.clone()),
    ];
    if is_view || table.catalog == crate::catalog::SAMPLES {
        rows.push(row("Type", if is_view { "VIEW" } else { "SAMPLE" }.into()));
        return Ok(rows);
    }
    // EXTERNAL: a table at a LOCATION of its own, whose data DROP TABLE keeps.
    let external = session
        .warehouse()
        .table_path(table)
        .is_ok_and(|dir| crate::catalog::external::read_link(&dir).is_some_and(|l| !l.managed));
    rows.push(row(
        "Type",
        if external { "EXTERNAL" } else { "MANAGED" }.into(),
    ));
    rows.push(row("Provider", "delta".into()));
    let t = session.warehouse().open(table).await?;
    let details = detail(session, table, &t).await?;
    for batch in &details.batches {
        for (i, field) in batch.schema().fields().iter().enumerate() {
            let column = batch.column(i);
            if column.is_empty() {
                continue;
            }
            let text = datafusion::arrow::util::display::array_value_to_string(column, 0)?;
            rows.push(row(field.name(), text));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::sql_type;
    use deltalake::kernel::{ArrayType, DataType, MapType, PrimitiveType, StructField, StructType};

    #[test]
    fn delta_types_are_written_as_databricks_sql() {
        let decimal = DataType::decimal(10, 2).unwrap();
        assert_eq!(sql_type(&decimal), "DECIMAL(10,2)");
        assert_eq!(sql_type(&DataType::LONG), "BIGINT");
        assert_eq!(sql_type(&DataType::TIMESTAMP_NTZ), "TIMESTAMP_NTZ");
        let array = DataType::Array(Box::new(ArrayType::new(DataType::STRING, true)));
        assert_eq!(sql_type(&array), "ARRAY<STRING>");
        let map = DataType::Map(Box::new(MapType::new(
            DataType::STRING,
            DataType::Primitive(PrimitiveType::Integer),
            true,
        )));
        assert_eq!(sql_type(&map), "MAP<STRING, INT>");
        let s = StructType::try_new(vec![
            StructField::new("a", DataType::INTEGER, false),
            StructField::new("B c", DataType::STRING, true),
        ])
        .unwrap();
        assert_eq!(
            sql_type(&DataType::Struct(Box::new(s))),
            "STRUCT<a: INT NOT NULL, `B c`: STRING>"
        );
    }
}
