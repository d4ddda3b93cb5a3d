//! ALTER TABLE: ADD COLUMNS (existing rows read the DEFAULT), SET TBLPROPERTIES, and CHECK
//! constraints added and dropped.

use super::super::table::{DEFAULT_KEY, arrow_schema};
use super::super::upkeep::commit;
use super::*;
use crate::engine::{Output, Session};
use crate::error::{Error, Result};
use datafusion::arrow::datatypes::Field;
use datafusion::sql::sqlparser::ast::{ColumnDef, Expr, ObjectName};
use deltalake::kernel::transaction::CommitProperties;

/// `ALTER TABLE t ADD COLUMN[S] (...)`: existing rows read the DEFAULT, as in PostgreSQL.
pub async fn add_columns(
    session: &Session,
    name: &ObjectName,
    columns: Vec<ColumnDef>,
) -> Result<Output> {
    let table = session.table_name(name)?;
    let t = session.warehouse().open_for_write(&table).await?;
    let existing: Vec<String> = t
        .snapshot()?
        .schema()
        .fields()
        .map(|f| f.name().to_lowercase())
        .collect();
    let mut added: Vec<String> = vec![];
    let mut fields = Vec::new();
    let mut defaults = Vec::new();
    let mut typed_new = Vec::new();
    let mut not_null = Vec::new();
    // A table with generated columns keeps lower-case names (see `ddl::create_table`).
    let lower_case = t
        .snapshot()?
        .schema()
        .fields()
        .any(|f| f.metadata().contains_key(super::GENERATION_KEY));
    for col in &columns {
        let (field, meta) = column_field(col)?;
        let field = match lower_case {
            true => field.clone().with_name(field.name().to_lowercase()),
            false => field,
        };
        if meta.contains_key(super::GENERATION_KEY) {
            return Err(Error::class(
                "UNSUPPORTED_FEATURE",
                format!(
                    "ALTER TABLE {table} ADD COLUMNS: generated column '{}' (a table gets its generated columns when it is created, as in Databricks)",
                    field.name()
                ),
            ));
        }
        typed_new.push((field.name().clone(), field.data_type().clone()));
        // Names are case-insensitive: `ID` is the column `id`.
        let lower = field.name().to_lowercase();
        if existing.contains(&lower) {
            return Err(Error::AlreadyExists(format!(
                "column '{}' already exists in {table}",
                field.name()
            )));
        }
        if added.contains(&lower) {
            return Err(Error::class(
                "COLUMN_ALREADY_EXISTS",
                format!(
                    "ALTER TABLE {table} ADD COLUMNS names column '{}' twice",
                    field.name()
                ),
            ));
        }
        added.push(lower);
        if !field.is_nullable() && !meta.contains_key(DEFAULT_KEY) {
            return Err(Error::Invalid(format!(
                "cannot add NOT NULL column '{}' without a DEFAULT: existing rows would have no value",
                field.name()
            )));
        }
        if let Some(d) = meta.get(DEFAULT_KEY) {
            // Computed now, as CREATE TABLE and SET DEFAULT do: one that is not a value of the
            // column's type, or NULL for a NOT NULL column, changes nothing.
            let value = super::super::table::default_value(session, d, field.data_type())
                .await
                .map_err(|e| e.context(format!("column '{}'", field.name())))?;
            if value.is_null() && !field.is_nullable() {
                return Err(Error::Invalid(format!(
                    "cannot add NOT NULL column '{}' with DEFAULT {d}: the default is NULL",
                    field.name()
                )));
            }
            defaults.push((field.name().clone(), d.clone(), field.data_type().clone()));
        }
        // Delta adds columns as nullable; a NOT NULL one becomes NOT NULL once its rows hold
        // the default (below).
        if !field.is_nullable() {
            not_null.push(field.name().clone());
        }
        let nullable = Field::new(field.name(), field.data_type().clone(), true);
        fields.push(delta_field(&nullable, &meta)?);
    }
    let t = keep_new_columns_stats_exact(t, &typed_new).await?;
    if defaults.is_empty() || t.snapshot()?.log_data().num_files() == 0 {
        commit(
            t.add_columns().with_fields(fields),
            CommitProperties::default(),
        )
        .await?;
        return set_not_null(session, name, not_null).await;
    }
    // Existing rows get the DEFAULT in the same commit that adds the columns.
    let mut values = vec![];
    let mut arrow_fields = vec![];
    for (col, _) in &typed_new {
        let dt = typed_new
            .iter()
            .find(|(c, _)| c == col)
            .map(|(_, d)| d.clone());
        let dt = dt.unwrap_or(datafusion::arrow::datatypes::DataType::Null);
        let value = match defaults.iter().find(|(c, _, _)| c == col) {
            Some((_, default, dt)) => {
                super::super::table::default_expr(session, default, dt).await?
            }
            None => datafusion::logical_expr::Expr::Literal(
                datafusion::common::ScalarValue::try_from(&dt)?,
                None,
            ),
        };
        arrow_fields.push(Field::new(col, dt, true));
        values.push((col.clone(), value));
    }
    // On the state it read only: a commit in between (an append, an OPTIMIZE) is a conflict,
    // and the rewrite runs again on the new state.
    super::super::retry::on_conflict(super::super::retry::WHOLE_STATEMENT, || {
        let (table, fields, arrow_fields, values) = (&table, &fields, &arrow_fields, &values);
        async move {
            let t = session.warehouse().open(table).await?;
            super::super::rewrite::add_columns_with_values(
                session,
                &t,
                fields.clone(),
                arrow_fields.clone(),
                values.clone(),
            )
            .await
        }
    })
    .await?;
    set_not_null(session, name, not_null).await
}

/// The added columns declared NOT NULL made so, as `ALTER COLUMN c SET NOT NULL` does (their
/// rows hold the DEFAULT): one more commit, which checks the rows again.
async fn set_not_null(
    session: &Session,
    name: &ObjectName,
    columns: Vec<String>,
) -> Result<Output> {
    for column in columns {
        let change = crate::parser::OnTable {
            table: name.clone(),
            action: crate::parser::TableAction::AlterColumn {
                column: datafusion::sql::sqlparser::ast::Ident::new(column),
                change: crate::parser::ColumnChange::SetNotNull,
            },
        };
        Box::pin(super::on_table::execute(session, change)).await?;
    }
    Ok(Output::empty())
}

/// Before wide DECIMAL columns are added to a table that still collects statistics on every
/// column, list its present columns in `delta.dataSkippingStatsColumns` (see
/// `types::exact_stats_property`), so the new decimals never get inexact statistics. Its own
/// commit, made first: a crash before the columns are added leaves only a harmless property.
pub(super) async fn keep_new_columns_stats_exact(
    t: deltalake::DeltaTable,
    new: &[(String, datafusion::arrow::datatypes::DataType)],
) -> Result<deltalake::DeltaTable> {
    let snapshot = t.snapshot()?;
    let metadata = snapshot.metadata();
    let configured = metadata
        .configuration()
        .keys()
        .any(|k| k.starts_with("delta.dataSkipping"));
    if configured || crate::engine::types::exact_stats_property(new, &[]).is_none() {
        return Ok(t);
    }
    let mut all: Vec<(String, datafusion::arrow::datatypes::DataType)> = arrow_schema(&t)?
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    all.extend(new.iter().cloned());
    let partitions = metadata.partition_columns().to_vec();
    let Some((k, v)) = crate::engine::types::exact_stats_property(&all, &partitions) else {
        return Ok(t);
    };
    let set = t
        .set_tbl_properties()
        .with_properties([(k, v)].into_iter().collect());
    Ok(commit(set, CommitProperties::default()).await?)
}

/// `ALTER TABLE t SET TBLPROPERTIES (...)`.
pub async fn set_properties(
    session: &Session,
    name: &ObjectName,
    properties: Vec<(String, String)>,
) -> Result<Output> {
    let table = session.table_name(name)?;
    let t = session.warehouse().open_for_write(&table).await?;
    // Custom keys (owner, team, ...) are allowed, as in Databricks; a `delta.` key must be
    // one of Delta's (a misspelt one would silently do nothing).
    for (k, _) in &properties {
        let lower = k.to_lowercase();
        if lower.starts_with("delta.constraints.") {
            return Err(Error::Invalid(format!(
                "cannot set '{k}' on {table}: CHECK constraints are added with ALTER TABLE {table} ADD CONSTRAINT name CHECK (condition), which checks the rows first"
            )));
        }
        if lower.starts_with("delta.")
            && k.parse::<deltalake::table::config::TableProperty>()
                .is_err()
        {
            return Err(Error::Invalid(format!(
                "cannot set '{k}' on {table}: it is not a Delta table property (custom properties must not start with 'delta.')"
            )));
        }
    }
    let set = t
        .set_tbl_properties()
        .with_properties(properties.into_iter().collect())
        .with_raise_if_not_exists(false);
    commit(set, CommitProperties::default()).await?;
    Ok(Output::empty())
}

/// `ALTER TABLE t ADD CONSTRAINT name CHECK (condition)`: every existing row must pass, and
/// every later write is checked (Delta's `delta.constraints.<name>`).
pub async fn add_constraint(
    session: &Session,
    name: &ObjectName,
    constraint: &str,
    check: &Expr,
) -> Result<Output> {
    let table = session.table_name(name)?;
    crate::engine::bind::refuse_markers(&format!("CHECK constraint {constraint}"), check)?;
    let t = session.warehouse().open_for_write(&table).await?;
    let key = format!("delta.constraints.{}", constraint.to_lowercase());
    if let Some(existing) = t.snapshot()?.metadata().configuration().get(&key) {
        return Err(Error::AlreadyExists(format!(
            "{table} already has constraint {constraint} CHECK ({existing}): drop it first (ALTER TABLE {table} DROP CONSTRAINT {constraint})"
        )));
    }
    let columns: Vec<String> = t
        .snapshot()?
        .schema()
        .fields()
        .map(|f| f.name().clone())
        .collect();
    let add = t
        .add_constraint()
        .with_constraint(constraint.to_lowercase(), check_text(check, &columns)?);
    commit(add, CommitProperties::default())
        .await
        .map_err(|e| {
            Error::from(e).context(format!("cannot add constraint {constraint} to {table}"))
        })?;
    Ok(Output::empty())
}

/// A CHECK condition as delta-rs parses it (generic SQL, case-sensitive names): strings in
/// single quotes (tidemark's dialect reads `"x"` as a string, delta-rs as a column) and
/// column names lower-cased, as tidemark stores them. `[ ]` is refused: delta-rs reads
/// `arr[0]` 1-based where tidemark (as Databricks) reads it 0-based, so the condition would
/// mean one thing on some writes and another on others.
pub(super) fn check_text(check: &Expr, columns: &[String]) -> Result<String> {
    use datafusion::sql::sqlparser::ast::{Value, visit_expressions_mut};
    let mut cased = None;
    let mut name = |i: &mut datafusion::sql::sqlparser::ast::Ident| {
        super::stored_name(i, columns);
        if i.quote_style.is_some() {
            cased = Some(i.value.clone());
        }
    };
    let mut check = check.clone();
    let mut subscript = false;
    let mut division = false;
    let _ = visit_expressions_mut(&mut check, |e| {
        if let Expr::BinaryOp {
            left,
            op: datafusion::sql::sqlparser::ast::BinaryOperator::Divide,
            right,
        } = e
            && !(floating_cast(left) || floating_cast(right))
        {
            division = true;
        }
        if matches!(e, Expr::CompoundFieldAccess { access_chain, .. }
            if access_chain.iter().any(|a| matches!(a, datafusion::sql::sqlparser::ast::AccessExpr::Subscript(_))))
        {
            subscript = true;
        }
        match e {
            Expr::Value(v) => {
                if let Value::DoubleQuotedString(s) = &v.value {
                    v.value = Value::SingleQuotedString(s.clone());
                }
            }
            Expr::Identifier(i) => name(i),
            Expr::CompoundIdentifier(parts) => parts.iter_mut().for_each(&mut name),
            _ => {}
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    if let Some(c) = cased {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "CHECK ({check}): the name `{c}` needs quotes (upper-case letters, spaces or other signs), and delta-rs stores a quoted name in a CHECK constraint in double quotes, which Spark and Databricks read as a string; a CHECK constraint can name only lower-case columns of letters, digits and _ here (rename the column with Databricks, or check the rule in the job that writes)"
            ),
        ));
    }
    if subscript {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "CHECK ({check}): the [ ] operator in a CHECK constraint is not supported (delta-rs, which checks some writes, counts array elements from 1; tidemark counts from 0, as Databricks does); use array_contains, size or a map function"
            ),
        ));
    }
    if division {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "CHECK ({check}): `/` in a CHECK constraint must divide DOUBLEs, as in CAST(a AS DOUBLE) / b (delta-rs, which checks some writes, divides integers as integers and DECIMALs with other rounding than Databricks)"
            ),
        ));
    }
    Ok(check.to_string())
}

/// `CAST(x AS DOUBLE | FLOAT)` (or `x::double`).
fn floating_cast(e: &Expr) -> bool {
    use datafusion::sql::sqlparser::ast::DataType as T;
    let mut e = e;
    while let Expr::Nested(inner) = e {
        e = inner;
    }
    matches!(e, Expr::Cast { data_type, .. }
        if matches!(data_type, T::Double(_) | T::DoublePrecision | T::Float(_) | T::Float64 | T::Real | T::Float4 | T::Float8))
}

/// `ALTER TABLE t DROP CONSTRAINT [IF EXISTS] name`.
pub async fn drop_constraint(
    session: &Session,
    name: &ObjectName,
    constraint: &str,
    if_exists: bool,
) -> Result<Output> {
    let table = session.table_name(name)?;
    let t = session.warehouse().open_for_write(&table).await?;
    let drop = t
        .drop_constraints()
        .with_constraint(constraint.to_lowercase())
        .with_raise_if_not_exists(!if_exists);
    commit(drop, CommitProperties::default())
        .await
        .map_err(|e| {
            Error::from(e).context(format!("cannot drop constraint {constraint} of {table}"))
        })?;
    Ok(Output::empty())
}
