//! INSERT, UPDATE, DELETE and MERGE on warehouse tables, each one Delta commit returning its
//! row counts. Values are cast to the column types (errors name the column), omitted
//! columns take their DEFAULT, NOT NULL is enforced before anything is written.

use std::collections::HashMap;
use std::sync::Arc;

mod merge;
mod subqueries;
pub use merge::*;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, new_null_array};
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::DFSchema;
use datafusion::logical_expr::Expr as DfExpr;
use datafusion::prelude::cast;
use datafusion::sql::sqlparser::ast::{
    Assignment, AssignmentTarget, Delete, Expr, ExprWithAlias, FromTable, Insert, ObjectName,
    Query, SetExpr, TableFactor, TableObject, Update,
};
use deltalake::DeltaTable;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::protocol::SaveMode;

use super::counts;
use super::table::DEFAULT_KEY;
use super::table::{default_keyword_value, default_value, is_default_keyword};
use crate::catalog::TableName;
use crate::engine::types::type_name;
use crate::engine::{Output, Session};
use crate::error::{Error, Result};
use crate::parser::InsertMode;

/// Open a table for writing (never the samples catalog).
async fn open_writable(session: &Session, table: &TableName) -> Result<DeltaTable> {
    crate::catalog::check_writable_table(table, false)?;
    session.warehouse().open_for_write(table).await
}

/// The values of the generated columns an INSERT does not give (`generated`: name and
/// expression), computed from the row's given columns.
async fn generated_values(
    session: &Session,
    batch: &RecordBatch,
    mapped: &[String],
    target: &datafusion::arrow::datatypes::Schema,
    generated: &[(String, String)],
) -> Result<HashMap<String, ArrayRef>> {
    let mut out = HashMap::new();
    if generated.is_empty() {
        return Ok(out);
    }
    let zone = crate::engine::zone::session_zone(session.ctx().copied_config().options());
    let mut fields = vec![];
    let mut columns = vec![];
    for (i, name) in mapped.iter().enumerate() {
        if let Some(f) = target.fields().iter().find(|f| f.name() == name) {
            columns.push(cast_column(
                batch.column(i),
                name,
                f.data_type(),
                zone.as_ref(),
            )?);
            fields.push(datafusion::arrow::datatypes::Field::new(
                name,
                f.data_type().clone(),
                true,
            ));
        }
    }
    let given = RecordBatch::try_new(
        std::sync::Arc::new(datafusion::arrow::datatypes::Schema::new(fields)),
        columns,
    )?;
    let df = session.ctx().read_batch(given)?;
    let mut exprs = vec![];
    for (name, g) in generated {
        // Its columns as the table spells them (the expression may write them in any case).
        let mut e = crate::parser::expr_text(g)?;
        // Every column of the table is a column here, never a session variable of its name.
        let _b = session
            .bind(&mut e, &super::column_names(target.fields()))
            .await?;
        exprs.push(df.parse_sql_expr(&e.to_string())?.alias(name));
    }
    let selected = df.select(exprs)?;
    let schema = std::sync::Arc::new(selected.schema().as_arrow().clone());
    let batches = selected.collect().await?;
    let computed = datafusion::arrow::compute::concat_batches(&schema, &batches)?;
    for (i, (name, _)) in generated.iter().enumerate() {
        // Stored as its column's type (`y BIGINT GENERATED ALWAYS AS (x * 2)` of an INT `x`
        // computes an INT).
        let value = match target.fields().iter().find(|f| f.name() == name) {
            Some(f) => cast_column(computed.column(i), name, f.data_type(), None)?,
            None => computed.column(i).clone(),
        };
        out.insert(name.clone(), value);
    }
    Ok(out)
}

/// Column defaults stored in the table's schema metadata.
fn column_defaults(t: &DeltaTable) -> Result<HashMap<String, String>> {
    let schema = t.snapshot()?.schema();
    Ok(schema
        .fields()
        .filter_map(|f| match f.metadata().get(DEFAULT_KEY) {
            Some(deltalake::kernel::MetadataValue::String(s)) => {
                Some((f.name().clone(), s.clone()))
            }
            _ => None,
        })
        .collect())
}

/// Cast one column of inserted values, naming the column and the bad value on failure.
fn cast_column(
    values: &ArrayRef,
    column: &str,
    to: &DataType,
    zone: Option<&Arc<str>>,
) -> Result<ArrayRef> {
    // Text, a zone-less timestamp or a date read in the session's zone when it is not UTC
    // (a table stores UTC): the instant the session names.
    let cast = || match zone.and_then(|z| crate::engine::zone::read_via(values.data_type(), to, z))
    {
        Some(zoned) => crate::engine::types::cast_strict(values, &zoned)
            .and_then(|v| crate::engine::types::cast_strict(&v, to)),
        None => crate::engine::types::cast_strict(values, to),
    };
    cast().map_err(|e| {
        Error::Type(format!(
            "cannot insert a {} value into column '{column}' of type {}: {e}",
            type_name(values.data_type()),
            type_name(to)
        ))
    })
}

/// `INSERT INTO|OVERWRITE [TABLE] t [(cols)] {VALUES ...|query}`.
pub async fn insert(session: &Session, insert: Insert) -> Result<Output> {
    super::clauses::insert(&insert)?;
    let TableObject::TableName(name) = &insert.table else {
        return Err(Error::Invalid(
            "INSERT INTO a table function is not supported".into(),
        ));
    };
    let Some(mut source) = insert.source else {
        return Err(Error::Invalid("INSERT needs VALUES or a query".into()));
    };
    let mut columns: Vec<String> = insert
        .columns
        .iter()
        .map(|c| c.to_string().trim_matches('`').to_lowercase())
        .chain(insert.after_columns.iter().map(|c| c.value.to_lowercase()))
        .collect();
    let mut partition = None;
    if let Some(partitions) = &insert.partitioned {
        partition =
            Some(static_partitions(session, name, partitions, &mut columns, &mut source).await?);
    }
    if let Some(c) = repeated(columns.iter().map(String::as_str)) {
        return Err(Error::class(
            "COLUMN_ALREADY_EXISTS",
            format!("INSERT INTO {name} names column '{c}' more than once"),
        ));
    }
    let how = match (insert.overwrite, partition) {
        // INSERT OVERWRITE t PARTITION (p = v): only that partition's rows are replaced.
        (true, Some(p)) => How::ReplaceWhere(Box::new(crate::parser::expr_text(&p)?)),
        (true, None) => How::Overwrite,
        (false, _) => How::Append,
    };
    insert_rows(session, name, Columns::Listed(columns), *source, how).await
}

/// The first name given more than once.
pub(super) fn repeated<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = std::collections::HashSet::new();
    names.into_iter().find(|n| !seen.insert(*n))
}

/// `INSERT INTO t PARTITION (p = v, ...) [(cols)] query`: the query's columns fill the listed
/// columns (else every column but the partition's, in the table's order), and each `p` is
/// `v`, as Spark reads it. A partition column without a value (a dynamic partition) is
/// refused by name. Returns the predicate that selects the partition's rows (what INSERT
/// OVERWRITE replaces).
async fn static_partitions(
    session: &Session,
    name: &ObjectName,
    partitions: &[Expr],
    columns: &mut Vec<String>,
    source: &mut Box<Query>,
) -> Result<String> {
    let table = session.table_name(name)?;
    let mut values = vec![];
    for p in partitions {
        match p {
            Expr::BinaryOp {
                left,
                op: datafusion::sql::sqlparser::ast::BinaryOperator::Eq,
                right,
            } => {
                let column = match left.as_ref() {
                    Expr::Identifier(i) => i.value.to_lowercase(),
                    other => {
                        return Err(Error::Invalid(format!(
                            "INSERT INTO {table} PARTITION (...): '{other}' is not a column name"
                        )));
                    }
                };
                values.push((column, right.to_string()));
            }
            other => {
                return Err(Error::class(
                    "UNSUPPORTED_FEATURE",
                    format!(
                        "INSERT INTO {table} PARTITION ({other}): a partition column without a value (a dynamic partition) is not supported; give it a value (PARTITION ({other} = ...)) or list it as a column of the query"
                    ),
                ));
            }
        }
    }
    let t = open_writable(session, &table).await?;
    let partitioned: Vec<String> = t.snapshot()?.metadata().partition_columns().to_vec();
    if let Some((c, _)) = values
        .iter()
        .find(|(c, _)| !partitioned.iter().any(|p| p.eq_ignore_ascii_case(c)))
    {
        return Err(Error::class(
            "NON_PARTITION_COLUMN",
            format!(
                "INSERT INTO {table} PARTITION (...): '{c}' is not a partition column of {table}{}; give its value in the query",
                match partitioned.is_empty() {
                    true => " (it has none)".to_string(),
                    false => format!(" (they are {})", partitioned.join(", ")),
                }
            ),
        ));
    }
    if columns.is_empty() {
        let schema = super::table::arrow_schema(&t)?;
        *columns = schema
            .fields()
            .iter()
            .map(|f| f.name().to_lowercase())
            .filter(|c| !values.iter().any(|(p, _)| p == c))
            .collect();
    }
    let constants: Vec<String> = values.iter().map(|(_, v)| format!("({v})")).collect();
    let predicate: Vec<String> = values
        .iter()
        .map(|(c, v)| {
            format!(
                "({} IS NOT DISTINCT FROM ({v}))",
                crate::catalog::quote_ident(c)
            )
        })
        .collect();
    columns.extend(values.into_iter().map(|(c, _)| c));
    **source = crate::parser::query_text(&format!(
        "SELECT __rows.*, {} FROM ({source}) AS __rows",
        constants.join(", ")
    ))?;
    Ok(predicate.join(" AND "))
}

/// `INSERT INTO|OVERWRITE t BY NAME query`, `INSERT INTO t REPLACE WHERE predicate query`.
pub async fn insert_by(session: &Session, insert: crate::parser::Insert) -> Result<Output> {
    let crate::parser::Insert {
        table,
        overwrite,
        mode,
        query,
    } = insert;
    if matches!(mode, InsertMode::ByName) && matches!(query.body.as_ref(), SetExpr::Values(_)) {
        return Err(Error::Invalid(format!(
            "INSERT ... BY NAME into {table} takes a query with named columns, and VALUES names none: list the columns instead (INSERT INTO t (a, b) VALUES ...)"
        )));
    }
    let (columns, how) = match mode {
        InsertMode::ByName if overwrite => (Columns::ByName, How::Overwrite),
        InsertMode::ByName => (Columns::ByName, How::Append),
        InsertMode::ReplaceWhere(p) => (Columns::Listed(vec![]), How::ReplaceWhere(p)),
    };
    insert_rows(session, &table, columns, *query, how).await
}

/// Which of the table's columns an INSERT's values fill.
#[derive(Clone)]
enum Columns {
    /// These, in order; all of them when empty.
    Listed(Vec<String>),
    /// Those the query's columns are named after.
    ByName,
}

/// What an INSERT does with the rows already in the table.
#[derive(Clone)]
enum How {
    Append,
    Overwrite,
    /// Replace the rows this predicate selects; every new row must satisfy it.
    ReplaceWhere(Box<Expr>),
}

/// Cast the source's rows to the table's columns, fill the rest with their defaults, check
/// NOT NULL and commit, all or nothing. An append goes after other writers' commits (delta-rs'
/// conflict check); an overwrite removes the files it read, so it is never committed over
/// another commit: delta-rs lets a removal through after a concurrent OPTIMIZE removed the same
/// files (`dataChange` false), which would leave the compacted copy of the old rows in the
/// table. It runs again on the new state instead.
async fn insert_rows(
    session: &Session,
    name: &ObjectName,
    columns: Columns,
    source: Query,
    how: How,
) -> Result<Output> {
    // One call of the attempt (its future is large: two calls would double the statement's,
    // and scripts nest statements).
    let append = matches!(how, How::Append);
    let mut retry = super::retry::Retry::up_to(super::retry::WHOLE_STATEMENT);
    loop {
        let props = if append {
            CommitProperties::default()
        } else {
            super::upkeep::never_over_another()
        };
        let (columns, source, how) = (columns.clone(), source.clone(), how.clone());
        match insert_once(session, name, columns, source, how, props).await {
            Err(e) if !append => retry.again(e).await?,
            done => return done,
        }
    }
}

/// One attempt at [`insert_rows`], committed with `props`.
async fn insert_once(
    session: &Session,
    name: &ObjectName,
    columns: Columns,
    source: Query,
    how: How,
    props: CommitProperties,
) -> Result<Output> {
    let table = session.table_name(name)?;
    let t = open_writable(session, &table).await?;
    let target = super::table::arrow_schema(&t)?;
    let defaults = column_defaults(&t)?;
    // Listed columns as the table spells them (names are case-insensitive).
    let names = super::column_names(target.fields());
    let columns = match columns {
        Columns::Listed(c) => Columns::Listed(
            c.iter()
                .map(|c| {
                    super::spelled(c, &names).ok_or_else(|| {
                        Error::NotFound(format!(
                            "column '{c}' not found in {table}{}",
                            crate::catalog::suggest(c, &names)
                        ))
                    })
                })
                .collect::<Result<_>>()?,
        ),
        Columns::ByName => Columns::ByName,
    };
    let listed = match &columns {
        Columns::Listed(c) => c.clone(),
        Columns::ByName => vec![],
    };
    let (rows, produced) = source_batches(session, source, &target, &listed, &defaults).await?;
    let width = produced.fields().len();
    let mapped: Vec<String> = match columns {
        Columns::ByName => by_name(&table, &target, &produced)?,
        // As Databricks: without a column list every column needs a value (no silent NULLs).
        Columns::Listed(c) if c.is_empty() => {
            if width != target.fields().len() {
                return Err(Error::class(
                    "INSERT_COLUMN_ARITY_MISMATCH",
                    format!(
                        "INSERT into {table} gives {width} values per row but the table has {} columns ({}): give a value for each, list the columns to fill, or INSERT ... BY NAME (the others take their DEFAULT or NULL)",
                        target.fields().len(),
                        super::column_names(target.fields()).join(", ")
                    ),
                ));
            }
            target
                .fields()
                .iter()
                .take(width)
                .map(|f| f.name().clone())
                .collect()
        }
        Columns::Listed(c) => {
            if width != c.len() {
                return Err(Error::Invalid(format!(
                    "INSERT into {table} lists {} columns but gives {width} values per row",
                    c.len()
                )));
            }
            c
        }
    };
    let mut out = Vec::with_capacity(rows.len());
    let empty_as_null = crate::catalog::string_partition_columns(&t)?;
    let mut default_cache: HashMap<String, datafusion::common::ScalarValue> = HashMap::new();
    let generated: Vec<(String, String)> = target
        .fields()
        .iter()
        .filter(|f| !mapped.contains(f.name()))
        .filter_map(|f| {
            f.metadata()
                .get(super::ddl::GENERATION_KEY)
                .map(|g| (f.name().clone(), g.clone()))
        })
        .collect();
    let zone = crate::engine::zone::session_zone(session.ctx().copied_config().options());
    for batch in &rows {
        let n = batch.num_rows();
        let computed = generated_values(session, batch, &mapped, &target, &generated).await?;
        let mut arrays = Vec::with_capacity(target.fields().len());
        for field in target.fields() {
            let array = match mapped.iter().position(|c| c == field.name()) {
                Some(i) => cast_column(
                    batch.column(i),
                    field.name(),
                    field.data_type(),
                    zone.as_ref(),
                )?,
                None if computed.contains_key(field.name()) => cast_column(
                    &computed[field.name()],
                    field.name(),
                    field.data_type(),
                    zone.as_ref(),
                )?,
                None => match defaults.get(field.name()) {
                    Some(d) => {
                        if !default_cache.contains_key(field.name()) {
                            let v = default_value(session, d, field.data_type()).await?;
                            default_cache.insert(field.name().clone(), v);
                        }
                        default_cache[field.name()].to_array_of_size(n)?
                    }
                    None => new_null_array(field.data_type(), n),
                },
            };
            let array = if empty_as_null.contains(field.name()) {
                crate::engine::types::empty_string_as_null(&array)?
            } else {
                array
            };
            if !field.is_nullable() && array.null_count() > 0 {
                let first = (0..n).find(|&r| array.is_null(r)).unwrap_or(0);
                return Err(Error::Type(format!(
                    "column '{}' of {table} is NOT NULL, but row {} of the INSERT gives it NULL{}",
                    field.name(),
                    first + 1,
                    if mapped.contains(field.name()) {
                        ""
                    } else {
                        " (the column was not given and has no DEFAULT)"
                    }
                )));
            }
            arrays.push(array);
        }
        out.push(RecordBatch::try_new(target.clone(), arrays)?);
    }
    let n: usize = out.iter().map(|b| b.num_rows()).sum();
    let overwrites = !matches!(how, How::Append);
    let (mode, replace_where) = match how {
        How::Append if n == 0 => return Ok(inserted(0)),
        How::Append => (SaveMode::Append, None),
        How::Overwrite => (SaveMode::Overwrite, None),
        How::ReplaceWhere(predicate) => (
            SaveMode::Overwrite,
            Some(replace_predicate(session, &table, &target, *predicate, &out).await?),
        ),
    };
    let mut write = t
        .write(out)
        .with_session_state(Arc::new(session.ctx().state()))
        .with_save_mode(mode);
    if let Some(predicate) = replace_where {
        write = write.with_replace_where(predicate);
    }
    // Tests hold an overwrite here, the table read, while another process compacts it.
    if overwrites {
        crate::hold_at("dml::before_overwrite").await;
    }
    super::upkeep::commit(write, props)
        .await
        .map_err(|e| Error::from(e).context(format!("cannot insert into {table}")))?;
    Ok(inserted(n))
}

/// Plan a `REPLACE WHERE` predicate on the table's columns and check that every new row
/// satisfies it (the rows it replaces are those it selects; a NULL does not satisfy it).
async fn replace_predicate(
    session: &Session,
    table: &TableName,
    target: &SchemaRef,
    mut predicate: Expr,
    rows: &[RecordBatch],
) -> Result<DfExpr> {
    let _b = session.bind_over(&mut predicate, target).await?;
    let shown = predicate.to_string();
    let df_schema = DFSchema::try_from(target.as_ref().clone())?;
    let predicate = logical_expr(session, predicate, &df_schema)?;
    let physical = session
        .ctx()
        .create_physical_expr(predicate.clone(), &df_schema)?;
    let mut before = 0;
    for batch in rows {
        let kept = physical.evaluate(batch)?.into_array(batch.num_rows())?;
        let kept = datafusion::arrow::array::as_boolean_array(&kept);
        if let Some(r) = (0..kept.len()).find(|&r| !kept.is_valid(r) || !kept.value(r)) {
            return Err(Error::Invalid(format!(
                "cannot insert into {table}: row {} of the query does not satisfy REPLACE WHERE {shown}; the rows it replaces are those the predicate selects, so every new row must satisfy it",
                before + r + 1
            )));
        }
        before += batch.num_rows();
    }
    Ok(predicate)
}

fn inserted(n: usize) -> Output {
    counts(&[
        ("num_affected_rows", n as i64),
        ("num_inserted_rows", n as i64),
    ])
}

/// The table columns an `INSERT ... BY NAME` query's columns fill, in the query's order.
fn by_name(table: &TableName, target: &Schema, produced: &Schema) -> Result<Vec<String>> {
    let names = super::column_names(target.fields());
    let mut mapped: Vec<String> = Vec::with_capacity(produced.fields().len());
    for f in produced.fields() {
        let Some(c) = super::spelled(f.name(), &names) else {
            return Err(Error::NotFound(format!(
                "INSERT ... BY NAME: the query's column '{}' is not a column of {table}{} (name the query's columns after the table's with AS)",
                f.name(),
                crate::catalog::suggest(f.name(), &names)
            )));
        };
        if mapped.contains(&c) {
            return Err(Error::Invalid(format!(
                "INSERT ... BY NAME: the query gives column '{c}' of {table} twice"
            )));
        }
        mapped.push(c);
    }
    Ok(mapped)
}

/// Run the INSERT's source (VALUES or a query) and collect its rows.
async fn source_batches(
    session: &Session,
    mut source: Query,
    target: &Schema,
    columns: &[String],
    defaults: &HashMap<String, String>,
) -> Result<(Vec<RecordBatch>, SchemaRef)> {
    // VALUES rows are planned against the target's column types, so '2025-01-01' lands in a
    // TIMESTAMP column and mixed literal types in one column still unify.
    if let SetExpr::Values(values) = source.body.as_mut() {
        fill_defaults(values, target, columns, defaults)?;
        let _bound = session.bind(values, &[]).await?;
        let batches = values_batches(session, values, target, columns).await?;
        let schema = match batches.first() {
            Some(b) => b.schema(),
            None => Arc::new(Schema::empty()),
        };
        return Ok((batches, schema));
    }
    let (df, _bound) = super::query::query_dataframe(session, source).await?;
    let df = crate::engine::progress::counted_rows(df)?;
    // The columns come from the query's schema: a query with no rows is checked too.
    let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
    Ok((df.collect().await?, schema))
}

/// Replace each `DEFAULT` among the VALUES with its column's default (NULL without one).
fn fill_defaults(
    values: &mut datafusion::sql::sqlparser::ast::Values,
    target: &Schema,
    columns: &[String],
    defaults: &HashMap<String, String>,
) -> Result<()> {
    for row in values.rows.iter_mut() {
        for (i, e) in row.iter_mut().enumerate() {
            if !is_default_keyword(e) {
                continue;
            }
            let column = match columns.get(i) {
                Some(c) => Some(c.clone()),
                None if columns.is_empty() => target.fields().get(i).map(|f| f.name().clone()),
                None => None,
            };
            let Some(column) = column else {
                return Err(Error::Invalid(format!(
                    "DEFAULT is value {} of its VALUES row, past the table's columns",
                    i + 1
                )));
            };
            *e = default_keyword_value(defaults.get(&column).map(String::as_str))?;
        }
    }
    Ok(())
}

/// Evaluate each VALUES row's expressions one column at a time.
async fn values_batches(
    session: &Session,
    values: &datafusion::sql::sqlparser::ast::Values,
    target: &Schema,
    columns: &[String],
) -> Result<Vec<RecordBatch>> {
    let zone = crate::engine::zone::session_zone(session.ctx().copied_config().options());
    let width = values.rows.first().map(|r| r.len()).unwrap_or(0);
    if let Some((i, r)) = values
        .rows
        .iter()
        .enumerate()
        .find(|(_, r)| r.len() != width)
    {
        return Err(Error::Invalid(format!(
            "VALUES row {} has {} values but row 1 has {width}",
            i + 1,
            r.len()
        )));
    }
    let state = session.ctx().state();
    let empty = DFSchema::empty();
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(width);
    let mut fields = Vec::with_capacity(width);
    for col in 0..width {
        let target_field = if columns.is_empty() {
            target.fields().get(col).cloned()
        } else {
            columns
                .get(col)
                .and_then(|c| target.field_with_name(c).ok().map(|f| Arc::new(f.clone())))
        };
        let mut scalars = Vec::with_capacity(values.rows.len());
        for row in &values.rows {
            let e = state.create_logical_expr_from_sql_expr(
                ExprWithAlias {
                    expr: row[col].clone(),
                    alias: None,
                },
                &empty,
            )?;
            let v = session.eval_expr(e).await?;
            scalars.push(v);
        }
        let name = target_field
            .as_ref()
            .map(|f| f.name().clone())
            .unwrap_or_else(|| format!("column{}", col + 1));
        let array = match &target_field {
            Some(f) => {
                let mut cast_values = Vec::with_capacity(scalars.len());
                for (r, v) in scalars.into_iter().enumerate() {
                    let c = if v.is_null() {
                        datafusion::common::ScalarValue::try_from(f.data_type())?
                    } else {
                        let arr = v.to_array()?;
                        let casted = cast_column(&arr, f.name(), f.data_type(), zone.as_ref())
                            .map_err(|e| e.context(format!("VALUES row {}", r + 1)))?;
                        datafusion::common::ScalarValue::try_from_array(&casted, 0)?
                    };
                    cast_values.push(c);
                }
                datafusion::common::ScalarValue::iter_to_array(cast_values)?
            }
            None => datafusion::common::ScalarValue::iter_to_array(scalars)?,
        };
        fields.push(datafusion::arrow::datatypes::Field::new(
            name,
            array.data_type().clone(),
            true,
        ));
        arrays.push(array);
    }
    if width == 0 {
        return Ok(vec![]);
    }
    Ok(vec![RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        arrays,
    )?])
}

/// Plan a SQL expression against a table's columns, with constants folded and types
/// coerced: delta-rs records the predicate as text and cannot print unfolded casts.
fn logical_expr(session: &Session, expr: Expr, schema: &DFSchema) -> Result<DfExpr> {
    use datafusion::optimizer::simplify_expressions::ExprSimplifier;
    let planned = session
        .ctx()
        .state()
        .create_logical_expr_from_sql_expr(ExprWithAlias { expr, alias: None }, schema)?;
    // A FLOAT or DOUBLE compared with a DECIMAL as DOUBLEs, as in queries.
    let planned = crate::engine::functions::floats_compared_as_doubles(planned, schema)?.data;
    // Typed, text and zone-less values read in the session's zone, as in queries.
    let zone = crate::engine::zone::session_zone(session.ctx().copied_config().options());
    let planned = crate::engine::zone::typed(planned, schema, zone.as_ref())?;
    // The table's TIMESTAMP columns are read here as stored, in UTC: what computes on them
    // (hour(ts), CAST(ts AS DATE), date_trunc) would not follow the zone.
    if let Some(zone) = &zone
        && let Some(what) = crate::engine::zone::utc_computation(&planned, schema, zone)
    {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "under SET TIME ZONE '{zone}', {what} would compute on a TIMESTAMP column in UTC, not in the session's zone; run the statement under SET TIME ZONE 'UTC' (comparing the column with a TIMESTAMP names the same instant in any zone)"
            ),
        ));
    }
    let schema = Arc::new(schema.clone());
    let context = datafusion::logical_expr::simplify::SimplifyContext::builder()
        .with_schema(schema)
        .with_current_time()
        .build();
    Ok(ExprSimplifier::new(context).simplify(planned)?)
}
fn assignment_column(a: &Assignment) -> Result<String> {
    match &a.target {
        AssignmentTarget::ColumnName(n) => {
            let parts = crate::engine::name_parts(n)?;
            Ok(parts.last().cloned().unwrap_or_default().to_lowercase())
        }
        AssignmentTarget::Tuple(_) => Err(Error::Invalid(
            "SET (a, b) = ... is not supported; assign columns one by one".into(),
        )),
    }
}

fn single_table(
    t: &datafusion::sql::sqlparser::ast::TableWithJoins,
) -> Result<&datafusion::sql::sqlparser::ast::ObjectName> {
    match &t.relation {
        TableFactor::Table { name, .. } if t.joins.is_empty() => Ok(name),
        _ => Err(Error::Invalid(
            "UPDATE/DELETE take one table (use MERGE to combine tables)".into(),
        )),
    }
}

/// The names a statement's one table goes by: its alias, then its own name.
fn names_of(t: &datafusion::sql::sqlparser::ast::TableWithJoins, table: &TableName) -> Vec<String> {
    let mut names = vec![];
    if let TableFactor::Table { alias: Some(a), .. } = &t.relation {
        names.push(a.name.value.clone());
    }
    names.push(table.table.clone());
    names
}

/// `x.c` read as the column `c` of the changed table, where `x` is a name it goes by in the
/// statement (`UPDATE orders AS o SET o.total = o.qty * 2 WHERE o.id = 1`, as the Databricks
/// reference writes it); not inside subqueries, where such a name is the outer row's
/// (refused there by [`subqueries::inline`]).
fn unqualified(expr: &mut Expr, names: &[String], columns: &[String]) {
    use datafusion::sql::sqlparser::ast::{VisitMut, VisitorMut};
    struct Strip<'a> {
        names: &'a [String],
        columns: &'a [String],
        depth: usize,
    }
    impl VisitorMut for Strip<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, _: &mut Query) -> std::ops::ControlFlow<()> {
            self.depth += 1;
            std::ops::ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut Query) -> std::ops::ControlFlow<()> {
            self.depth -= 1;
            std::ops::ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, e: &mut Expr) -> std::ops::ControlFlow<()> {
            if self.depth == 0
                && let Expr::CompoundIdentifier(parts) = e
                && let [q, c] = parts.as_slice()
                && self.names.iter().any(|n| n.eq_ignore_ascii_case(&q.value))
                // A struct column named like the table (`s.field`) stays a field of it.
                && self.columns.iter().any(|col| col.eq_ignore_ascii_case(&c.value))
                && !self.columns.iter().any(|col| col.eq_ignore_ascii_case(&q.value))
            {
                *e = Expr::Identifier(c.clone());
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let _ = expr.visit(&mut Strip {
        names,
        columns,
        depth: 0,
    });
}

/// The column names of `table`, as its schema has them.
async fn table_columns(session: &Session, table: &TableName) -> Result<Vec<String>> {
    let t = session.warehouse().open(table).await?;
    Ok(super::column_names(
        super::table::arrow_schema(&t)?.fields(),
    ))
}

/// `UPDATE t SET c = e, ... [WHERE p]`.
pub async fn update(session: &Session, update: Update) -> Result<Output> {
    super::clauses::update(&update)?;
    let table = session.table_name(single_table(&update.table)?)?;
    let names = names_of(&update.table, &table);
    let mut update = update;
    let columns = table_columns(session, &table).await?;
    if let Some(w) = update.selection.as_mut() {
        unqualified(w, &names, &columns);
    }
    for a in update.assignments.iter_mut() {
        unqualified(&mut a.value, &names, &columns);
    }
    let n = super::retry::on_conflict(super::retry::WHOLE_STATEMENT, || {
        let update = update.clone();
        let table = table.clone();
        let names = names.clone();
        async move {
            // Subqueries run on each attempt: a retry after a conflict reads them again.
            let mut update = update;
            if let Some(w) = update.selection.as_mut() {
                subqueries::inline(session, w, &names).await?;
            }
            let t = open_writable(session, &table).await?;
            let schema = super::table::arrow_schema(&t)?;
            let columns = super::column_names(schema.fields());
            let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
            let empty_as_null = crate::catalog::string_partition_columns(&t)?;
            let defaults = column_defaults(&t)?;
            let mut sets = vec![];
            for mut a in update.assignments {
                let col = assignment_column(&a)?;
                let col = super::spelled(&col, &columns).ok_or_else(|| {
                    Error::NotFound(format!(
                        "column '{col}' not found in {table}{}",
                        crate::catalog::suggest(&col, &columns)
                    ))
                })?;
                let field = schema.field_with_name(&col)?;
                if is_default_keyword(&a.value) {
                    a.value = default_keyword_value(defaults.get(&col).map(String::as_str))?;
                }
                let _b = session.bind_over(&mut a.value, &schema).await?;
                let e = cast(
                    logical_expr(session, a.value, &df_schema)?,
                    field.data_type().clone(),
                );
                let e = if empty_as_null.contains(&col) {
                    datafusion::prelude::nullif(e, datafusion::prelude::lit(""))
                } else {
                    e
                };
                if sets.iter().any(|(c, _)| *c == col) {
                    return Err(conflicting_set(&col));
                }
                sets.push((col, e));
            }
            // Generated columns follow the columns they read: each is its expression over
            // the row's new values (every SET reads the old row, so the assigned values stand
            // in for their columns).
            for field in schema.fields() {
                let Some(g) = field.metadata().get(super::ddl::GENERATION_KEY) else {
                    continue;
                };
                if sets.iter().any(|(c, _)| c == field.name()) {
                    continue;
                }
                let mut parsed = crate::parser::expr_text(g)?;
                let _b = session.bind_over(&mut parsed, &schema).await?;
                let e = logical_expr(session, parsed, &df_schema)?;
                let e = datafusion::common::tree_node::TreeNode::transform(e, |e| {
                    if let datafusion::logical_expr::Expr::Column(c) = &e
                        && let Some((_, new)) = sets.iter().find(|(s, _)| s == &c.name)
                    {
                        return Ok(datafusion::common::tree_node::Transformed::yes(new.clone()));
                    }
                    Ok(datafusion::common::tree_node::Transformed::no(e))
                })?
                .data;
                sets.push((field.name().clone(), cast(e, field.data_type().clone())));
            }
            let predicate = match update.selection {
                Some(mut w) => {
                    let _b = session.bind_over(&mut w, &schema).await?;
                    Some(logical_expr(session, w, &df_schema)?)
                }
                None => None,
            };
            if super::rewrite::applies(&t)? {
                let change = super::rewrite::Change::Update(sets);
                let (_, n) = super::rewrite::rewrite(session, &t, predicate, change).await?;
                return Ok(n as i64);
            }
            crate::catalog::refuse_logged_empty_partitions(
                &t,
                &table.to_string(),
                "UPDATE",
                false,
            )?;
            let mut builder = t
                .update()
                .with_session_state(Arc::new(session.ctx().state()));
            for (col, e) in sets {
                builder = builder.with_update(col, e);
            }
            if let Some(p) = predicate {
                builder = builder.with_predicate(p);
            }
            let (_, metrics) = super::upkeep::commit(builder, super::upkeep::never_over_another())
                .await
                .map_err(Error::from)?;
            Ok(metrics.num_updated_rows as i64)
        }
    })
    .await
    .map_err(|e| e.context(format!("cannot update {table}")))?;
    Ok(counts(&[("num_affected_rows", n)]))
}

/// `DELETE FROM t [WHERE p]`.
pub async fn delete(session: &Session, delete: Delete) -> Result<Output> {
    super::clauses::delete(&delete)?;
    let from = match &delete.from {
        FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
    };
    let [target] = from.as_slice() else {
        return Err(Error::Invalid("DELETE takes one table".into()));
    };
    if delete.using.is_some() {
        return Err(Error::Invalid(
            "DELETE ... USING is not supported; use MERGE INTO ... WHEN MATCHED THEN DELETE".into(),
        ));
    }
    let table = session.table_name(single_table(target)?)?;
    let names = names_of(target, &table);
    let mut selection = delete.selection;
    if let Some(w) = selection.as_mut() {
        unqualified(w, &names, &table_columns(session, &table).await?);
    }
    let n = delete_where(session, &table, selection, &names).await?;
    Ok(counts(&[("num_affected_rows", n), ("num_deleted_rows", n)]))
}

/// Delete the rows of `table` where `selection` holds (all of them without one), in one
/// commit on the state read (a conflict runs it again). Returns the rows deleted.
/// `names` are the names the table goes by in the statement (for subqueries in `selection`,
/// which run on each attempt).
pub(crate) async fn delete_where(
    session: &Session,
    table: &TableName,
    selection: Option<Expr>,
    names: &[String],
) -> Result<i64> {
    super::retry::on_conflict(super::retry::WHOLE_STATEMENT, || {
        let mut selection = selection.clone();
        let table = table.clone();
        async move {
            if let Some(w) = selection.as_mut() {
                subqueries::inline(session, w, names).await?;
            }
            let t = open_writable(session, &table).await?;
            let schema = super::table::arrow_schema(&t)?;
            let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
            let predicate = match selection {
                Some(mut w) => {
                    let _b = session.bind_over(&mut w, &schema).await?;
                    Some(logical_expr(session, w, &df_schema)?)
                }
                None => None,
            };
            if super::rewrite::applies(&t)? {
                let change = super::rewrite::Change::Delete;
                let (_, n) = super::rewrite::rewrite(session, &t, predicate, change).await?;
                return Ok(n as i64);
            }
            crate::catalog::refuse_logged_empty_partitions(
                &t,
                &table.to_string(),
                "DELETE",
                false,
            )?;
            let mut builder = t
                .delete()
                .with_session_state(Arc::new(session.ctx().state()));
            if let Some(p) = predicate {
                builder = builder.with_predicate(p);
            }
            let (_, metrics) = super::upkeep::commit(builder, super::upkeep::never_over_another())
                .await
                .map_err(Error::from)?;
            Ok(metrics.num_deleted_rows.unwrap_or(0) as i64)
        }
    })
    .await
    .map_err(|e| e.context(format!("cannot delete from {table}")))
}

/// The session's state, reading strings as the `Utf8` arrays the table stores rather than as
/// string views: delta-rs' MERGE and OPTIMIZE write the types their scan of the table yields
/// into the new files' Arrow schema, and Python's `deltalake` cannot filter string views there.
pub(crate) fn without_view_types(session: &Session) -> Arc<datafusion::execution::SessionState> {
    let mut state = session.ctx().state();
    state
        .config_mut()
        .options_mut()
        .execution
        .parquet
        .schema_force_view_types = false;
    Arc::new(state)
}

/// Two assignments of one column in one SET (Databricks' DELTA_CONFLICT_SET_COLUMN): which one
/// wins is not defined, so neither is taken.
pub(super) fn conflicting_set(column: &str) -> Error {
    Error::class(
        "DELTA_CONFLICT_SET_COLUMN",
        format!(
            "there is a conflict from these SET columns: column '{column}' is set more than once"
        ),
    )
}
