//! Statements that change one existing table without adding rows: `ALTER TABLE ... RENAME TO`,
//! `ALTER COLUMN` (DEFAULT, NOT NULL, COMMENT), `COMMENT ON TABLE|COLUMN`, `TRUNCATE TABLE` and
//! `RESTORE TABLE`. Each is one commit on the state it read (a commit that lands in between
//! makes it run again on the new state), or, for RENAME, one directory rename.

use datafusion::arrow::datatypes::DataType;
use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr, Ident, ObjectName, Value as SqlValue};
use deltalake::DeltaTable;
use deltalake::kernel::{Action, MetadataExt, MetadataValue, StructField, StructType};
use deltalake::protocol::DeltaOperation;

use super::super::retry::{WHOLE_STATEMENT, on_conflict};
use super::super::table::{COMMENT_KEY, DEFAULT_KEY, arrow_schema, default_value};
use super::super::{counts, upkeep};
use crate::catalog::{Place, TableName, check_writable_table};
use crate::engine::{Output, Session, name_parts};
use crate::error::{Error, Result};
use crate::parser::{AsOf, ColumnChange, OnTable, TableAction};

/// Run a statement on one table.
pub async fn execute(session: &Session, stmt: OnTable) -> Result<Output> {
    let table = if stmt.action.writes() {
        session.table_name(&stmt.table)?
    } else {
        session.object_name(&stmt.table)?
    };
    match stmt.action {
        TableAction::RenameTo(to) => rename(session, &table, &to).await,
        TableAction::AlterColumn { column, change } => {
            alter_column(session, &table, &column, change).await
        }
        TableAction::Truncate { partition } => truncate(session, &table, partition).await,
        TableAction::Restore(as_of) => restore(session, &table, as_of).await,
        TableAction::Comment(comment) => comment_table(session, &table, comment).await,
        TableAction::ShowCreate
        | TableAction::ShowProperties { .. }
        | TableAction::ShowColumns
        | TableAction::ShowPartitions { .. }
        | TableAction::DescribeDetail => {
            super::super::show::table::execute(session, &stmt.table, &table, stmt.action).await
        }
    }
}

/// `ALTER TABLE t RENAME TO u`: the table's directory renamed, within its catalog (as in
/// Databricks; an unqualified new name stays in the table's schema). Atomic on one file system.
/// A table that COPY INCREMENTAL has copied from or into keeps its name: the copy's record of
/// what it copied is kept under the pair's names.
async fn rename(session: &Session, table: &TableName, to: &ObjectName) -> Result<Output> {
    let parts = name_parts(to)?;
    let to = TableName::resolve(&parts, &table.catalog, &table.schema)?;
    check_writable_table(table, true)?;
    check_writable_table(&to, true)?;
    let wh = session.warehouse();
    if !wh.table_exists(table) {
        return Err(wh.missing_table_error(table));
    }
    if to.catalog != table.catalog {
        return Err(Error::Invalid(format!(
            "cannot rename {table} to {to}: a table stays in its catalog (RENAME TO may move it to another schema of '{}')",
            table.catalog
        )));
    }
    if !wh.schema_exists(&to.catalog, &to.schema) {
        return Err(Error::NotFound(format!(
            "cannot rename {table} to {to}: schema {}.{} does not exist (CREATE SCHEMA {}.{} first)",
            to.catalog, to.schema, to.catalog, to.schema
        )));
    }
    let (from_dir, to_dir) = match (wh.table_path(table)?, wh.table_path(&to)?) {
        (Place::Local(from), Place::Local(to)) => (from, to),
        _ => {
            return Err(Error::Invalid(format!(
                "cannot rename {table} to {to}: the warehouse is on an object store ({}), which cannot move a table's files in one step; nothing was changed (make the new name with CREATE TABLE {to} AS SELECT * FROM {table}, then DROP TABLE {table})",
                wh.root()
            )));
        }
    };
    if to_dir.exists() || wh.view_exists(&to) {
        return Err(Error::AlreadyExists(format!(
            "cannot rename {table} to {to}: {to} already exists"
        )));
    }
    if let Some(run) = copied(session, table).await? {
        return Err(Error::Invalid(format!(
            "cannot rename {table}: COPY INCREMENTAL {run} knows it by this name (its runs, watermark and exactly-once record are kept under the pair's names); a copy under the new name would start over and copy every row again"
        )));
    }
    if let Some(parent) = to_dir.parent() {
        wh.check_writable(Some(&Place::Local(parent.to_path_buf())))?;
        std::fs::create_dir_all(parent)?;
    }
    wh.check_writable(
        from_dir
            .parent()
            .map(|p| Place::Local(p.to_path_buf()))
            .as_ref(),
    )?;
    std::fs::rename(&from_dir, &to_dir).map_err(|e| {
        Error::Other(format!(
            "cannot rename {table} to {to} ({} to {}): {e}; nothing was changed",
            from_dir.display(),
            to_dir.display()
        ))
    })?;
    Ok(Output::empty())
}

/// A copy (`source INTO target`) the run history holds with `table` as its source or target.
async fn copied(session: &Session, table: &TableName) -> Result<Option<String>> {
    use datafusion::arrow::array::AsArray;
    use datafusion::logical_expr::{col, lit};
    let history = crate::statements::copy::history::table_name();
    if !session.warehouse().table_exists(&history) {
        return Ok(None);
    }
    let t = session.warehouse().open(&history).await?;
    let provider = crate::catalog::provider_for(&t).await?;
    let name = lit(table.to_string());
    let runs = session
        .ctx()
        .read_table(provider)?
        .filter(col("source").eq(name.clone()).or(col("target").eq(name)))?
        .select(vec![col("source"), col("target")])?
        .limit(0, Some(1))?
        .collect()
        .await?;
    Ok(runs.iter().find(|b| b.num_rows() > 0).map(|b| {
        let text = |i: usize| {
            datafusion::arrow::compute::cast(b.column(i), &DataType::Utf8)
                .map(|a| a.as_string::<i32>().value(0).to_string())
                .unwrap_or_default()
        };
        format!("{} INTO {}", text(0), text(1))
    }))
}

/// `ALTER TABLE t ALTER COLUMN c ...` and `COMMENT ON COLUMN t.c IS ...`: the column's entry in
/// the table's schema changed, in one metadata commit.
async fn alter_column(
    session: &Session,
    table: &TableName,
    column: &Ident,
    change: ColumnChange,
) -> Result<Output> {
    check_writable_table(table, true)?;
    let name = column.value.to_lowercase();
    on_conflict(WHOLE_STATEMENT, || {
        let (name, change) = (&name, &change);
        async move {
            let t = session.warehouse().open_for_write(table).await?;
            let snapshot = t.snapshot()?;
            let Some(field) = snapshot
                .schema()
                .fields()
                .find(|f| f.name().eq_ignore_ascii_case(name))
                .cloned()
            else {
                return Err(Error::NotFound(format!(
                    "{table} has no column '{name}' (DESCRIBE {table} lists its columns)"
                )));
            };
            let changed = changed_field(session, &t, table, field, change).await?;
            let schema = StructType::try_new(snapshot.schema().fields().map(|f| {
                if f.name() == changed.name() {
                    changed.clone()
                } else {
                    f.clone()
                }
            }))
            .map_err(deltalake::DeltaTableError::from)?;
            let metadata = (snapshot.metadata().clone().with_schema(&schema))
                .map_err(deltalake::DeltaTableError::from)?;
            let operation = DeltaOperation::UpdateFieldMetadata {
                fields: vec![changed],
            };
            commit_metadata(&t, metadata, operation).await
        }
    })
    .await
    .map_err(|e| e.context(format!("cannot alter column {name} of {table}")))?;
    Ok(Output::empty())
}

/// `field` with `change` made, after the checks it needs (a DEFAULT that casts to the
/// column's type; no NULL in the column for NOT NULL).
async fn changed_field(
    session: &Session,
    t: &DeltaTable,
    table: &TableName,
    mut field: StructField,
    change: &ColumnChange,
) -> Result<StructField> {
    let name = field.name().clone();
    let arrow = arrow_schema(t)?;
    let dt = arrow
        .field_with_name(&name)
        .map(|f| f.data_type().clone())
        .unwrap_or(DataType::Null);
    let text = |s: &str| MetadataValue::String(s.to_string());
    match change {
        ColumnChange::SetDefault(e) => {
            crate::statements::ddl::check_default(&name, e)?;
            let sql = e.to_string();
            default_value(session, &sql, &dt).await?;
            field.metadata.insert(DEFAULT_KEY.into(), text(&sql));
        }
        ColumnChange::DropDefault => {
            field.metadata.remove(DEFAULT_KEY);
        }
        ColumnChange::Comment(Some(c)) => {
            field.metadata.insert(COMMENT_KEY.into(), text(c));
        }
        ColumnChange::Comment(None) => {
            field.metadata.remove(COMMENT_KEY);
        }
        ColumnChange::DropNotNull => field.nullable = true,
        ColumnChange::SetNotNull => {
            let nulls = null_count(session, t, &name).await?;
            if nulls > 0 {
                return Err(Error::class(
                    "DELTA_NOT_NULL_CONSTRAINT_VIOLATED",
                    format!(
                        "column {name} of {table} holds {nulls} NULL value(s): set them first (UPDATE {table} SET {name} = ... WHERE {name} IS NULL)"
                    ),
                ));
            }
            field.nullable = false;
        }
    }
    Ok(field)
}

/// The NULLs in column `name` of `t` (the version opened), read as every query reads it.
async fn null_count(session: &Session, t: &DeltaTable, name: &str) -> Result<usize> {
    use datafusion::logical_expr::col;
    let provider = crate::catalog::provider_for(t).await?;
    let column = col(datafusion::common::Column::from_name(name));
    let rows = session
        .ctx()
        .read_table(provider)?
        .filter(column.is_null())?;
    Ok(rows.count().await?)
}

/// `COMMENT ON TABLE t IS 'text' | NULL`: the table's description.
async fn comment_table(
    session: &Session,
    table: &TableName,
    comment: Option<String>,
) -> Result<Output> {
    check_writable_table(table, true)?;
    on_conflict(WHOLE_STATEMENT, || {
        let comment = comment.clone();
        async move {
            let t = session.warehouse().open_for_write(table).await?;
            let metadata = t.snapshot()?.metadata().clone();
            let mut json =
                serde_json::to_value(&metadata).map_err(deltalake::DeltaTableError::from)?;
            json["description"] = comment.clone().map_or(serde_json::Value::Null, Into::into);
            let metadata =
                serde_json::from_value(json).map_err(deltalake::DeltaTableError::from)?;
            let operation = DeltaOperation::UpdateTableMetadata {
                metadata_update:
                    deltalake::operations::update_table_metadata::TableMetadataUpdate {
                        name: None,
                        description: comment,
                    },
            };
            commit_metadata(&t, metadata, operation).await
        }
    })
    .await
    .map_err(|e| e.context(format!("cannot comment on {table}")))?;
    Ok(Output::empty())
}

/// Commit a new metadata action on the state `t` read, never over another commit.
async fn commit_metadata(
    t: &DeltaTable,
    metadata: deltalake::kernel::Metadata,
    operation: DeltaOperation,
) -> Result<()> {
    let props = super::super::upkeep::never_over_another();
    upkeep::commit_actions(t, vec![Action::Metadata(metadata)], operation, props).await?;
    Ok(())
}

/// A `PARTITION (c = v, ...)` spec as the condition on `table`'s rows it names (None when
/// empty): each column a partition column of the table (`what` names the statement in the
/// error, `instead` says what to do for other conditions), a NULL or empty value `IS NULL`.
pub(crate) fn partition_predicate(
    table: &TableName,
    partitions: &[String],
    spec: Vec<(Ident, Expr)>,
    what: &str,
    instead: &str,
) -> Result<Option<Expr>> {
    let mut predicate: Option<Expr> = None;
    for (column, value) in spec {
        let name = column.value.to_lowercase();
        let Some(stored) = partitions.iter().find(|p| p.eq_ignore_ascii_case(&name)) else {
            return Err(Error::Invalid(format!(
                "{what}: '{name}' is not a partition column of {table} (its partition columns: {}); {instead}",
                if partitions.is_empty() {
                    "none".to_string()
                } else {
                    partitions.join(", ")
                }
            )));
        };
        let column = Expr::Identifier(Ident::with_quote('`', stored.clone()));
        // A NULL partition (and an empty string, which Delta stores as NULL) is `IS NULL`:
        // `= NULL` would match nothing.
        let null = match &value {
            Expr::Value(v) => match &v.value {
                SqlValue::Null => true,
                SqlValue::SingleQuotedString(s) => s.is_empty(),
                _ => false,
            },
            _ => false,
        };
        let eq = if null {
            Expr::IsNull(Box::new(column))
        } else {
            Expr::BinaryOp {
                left: Box::new(column),
                op: BinaryOperator::Eq,
                right: Box::new(value),
            }
        };
        predicate = Some(match predicate {
            Some(p) => Expr::BinaryOp {
                left: Box::new(p),
                op: BinaryOperator::And,
                right: Box::new(eq),
            },
            None => eq,
        });
    }
    Ok(predicate)
}

/// `TRUNCATE TABLE t [PARTITION (p = v, ...)]`: every row (of the partition) deleted, in one
/// commit. Only partition columns may name a partition, as in Databricks.
async fn truncate(
    session: &Session,
    table: &TableName,
    partition: Vec<(Ident, Expr)>,
) -> Result<Output> {
    check_writable_table(table, true)?;
    let predicate = if partition.is_empty() {
        None
    } else {
        let t = session.warehouse().open(table).await?;
        let partitions: Vec<String> = t.snapshot()?.metadata().partition_columns().to_vec();
        partition_predicate(
            table,
            &partitions,
            partition,
            &format!("TRUNCATE TABLE {table} PARTITION"),
            &format!("use DELETE FROM {table} WHERE ... for other conditions"),
        )?
    };
    super::super::dml::delete_where(
        session,
        table,
        predicate,
        std::slice::from_ref(&table.table),
    )
    .await?;
    Ok(Output::empty())
}

/// `RESTORE TABLE t TO VERSION AS OF n | TIMESTAMP AS OF ts`: one commit that makes the table
/// read as it did then (the versions in between stay in its history).
async fn restore(session: &Session, table: &TableName, as_of: AsOf) -> Result<Output> {
    check_writable_table(table, true)?;
    let at = match &as_of {
        AsOf::Version(v) => Restore::Version(*v),
        AsOf::Timestamp(e) => Restore::Time(timestamp(session, e).await?),
    };
    let (t, metrics) = on_conflict(WHOLE_STATEMENT, || async {
        let t = session.warehouse().open_for_write(table).await?;
        let latest = t.version().unwrap_or(0);
        let builder = match at {
            Restore::Version(v) if v > latest => {
                return Err(Error::NotFound(format!(
                    "{table} has no version {v}: its newest is {latest} (DESCRIBE HISTORY {table} lists them)"
                )));
            }
            Restore::Version(v) if v == latest => {
                return Err(Error::Invalid(format!(
                    "{table} is at version {v} already: nothing to restore"
                )));
            }
            Restore::Time(ts) => {
                // delta-rs would take a time before the table existed for its first version.
                let infos: Vec<deltalake::kernel::CommitInfo> =
                    futures::TryStreamExt::try_collect(t.history(None)).await?;
                let created = infos.iter().filter_map(|i| i.timestamp).min();
                if let Some(c) = created.filter(|c| ts.timestamp_millis() < *c) {
                    return Err(Error::NotFound(format!(
                        "{table} has no version at or before {ts}: it was created at {}",
                        chrono::DateTime::from_timestamp_millis(c).unwrap_or_default()
                    )));
                }
                t.restore().with_datetime_to_restore(ts)
            }
            Restore::Version(v) => t.restore().with_version_to_restore(v),
        };
        let props = super::super::upkeep::never_over_another();
        Ok(upkeep::commit(builder, props).await?)
    })
    .await
    .map_err(|e| e.context(format!("cannot restore {table}")))?;
    let snapshot = t.snapshot()?;
    let size: i64 = snapshot.log_data().iter().map(|f| f.size()).sum();
    Ok(counts(&[
        ("table_size_after_restore", size),
        (
            "num_of_files_after_restore",
            snapshot.log_data().num_files() as i64,
        ),
        ("num_removed_files", metrics.num_removed_file as i64),
        ("num_restored_files", metrics.num_restored_file as i64),
    ]))
}

/// Where a RESTORE goes.
#[derive(Clone, Copy)]
enum Restore {
    Version(u64),
    Time(chrono::DateTime<chrono::Utc>),
}

/// A constant expression as a point in time (a TIMESTAMP, or a string or DATE that casts to
/// one, as `TIMESTAMP AS OF` reads it in queries).
pub(super) async fn timestamp(
    session: &Session,
    e: &Expr,
) -> Result<chrono::DateTime<chrono::Utc>> {
    use datafusion::arrow::datatypes::TimeUnit;
    use datafusion::common::ScalarValue;
    let value = session.eval_scalar(e).await?;
    let dt = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    match crate::engine::types::cast_value(&value, &dt) {
        Ok(ScalarValue::TimestampMicrosecond(Some(us), _)) => {
            chrono::DateTime::from_timestamp_micros(us)
                .ok_or_else(|| Error::Type(format!("TIMESTAMP AS OF {e}: out of range")))
        }
        _ => Err(Error::Type(format!(
            "TIMESTAMP AS OF {e}: expected a timestamp, got {value}"
        ))),
    }
}
