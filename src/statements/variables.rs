//! `DECLARE`, `SET VAR` and `DROP TEMPORARY VARIABLE` with Databricks semantics: typed
//! variables, defaults cast to the declared type, and Databricks' error classes.

use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{DataType as SqlType, Expr, Query};

use crate::engine::types::{sql_to_arrow, storage_type, type_name};
use crate::engine::{Output, Session, Variable, variables::unresolved};
use crate::error::{Error, Result};

/// Cast a value to a variable's type, with Databricks' error class on failure.
fn cast_to(
    value: ScalarValue,
    dt: &datafusion::arrow::datatypes::DataType,
    name: &str,
) -> Result<ScalarValue> {
    if &value.data_type() == dt {
        return Ok(value);
    }
    if value.is_null() {
        return Ok(ScalarValue::try_from(dt)?);
    }
    crate::engine::types::cast_value(&value, dt).map_err(|e| {
        Error::class(
            "DATATYPE_MISMATCH",
            format!(
                "cannot assign a {} value to variable '{name}' of type {}: {e}",
                type_name(&value.data_type()),
                type_name(dt)
            ),
        )
    })
}

/// `DECLARE [OR REPLACE] [VARIABLE] name [type] [{DEFAULT | =} expr]`.
pub async fn declare(
    session: &mut Session,
    or_replace: bool,
    name: &str,
    data_type: Option<&SqlType>,
    default: Option<Expr>,
) -> Result<Output> {
    if session.vars().contains(name) && !or_replace {
        return Err(Error::class(
            "VARIABLE_ALREADY_EXISTS",
            format!(
                "variable '{name}' already exists (use DECLARE OR REPLACE VARIABLE {name} ...)"
            ),
        ));
    }
    let declared = data_type.map(sql_to_arrow).transpose()?;
    let value = match &default {
        Some(e) => Some(session.eval_scalar(e).await?),
        None => None,
    };
    let dt = match (&declared, &value) {
        (Some(t), _) => t.clone(),
        (None, Some(v)) if !v.is_null() => storage_type(&v.data_type()),
        (None, Some(_)) => datafusion::arrow::datatypes::DataType::Utf8,
        (None, None) => {
            return Err(Error::Invalid(format!(
                "DECLARE {name} needs a type or a DEFAULT value"
            )));
        }
    };
    if dt.is_nested() {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "variable '{name}': variables of type {} are not supported yet (scalar types are)",
                type_name(&dt)
            ),
        ));
    }
    let value = match value {
        Some(v) => cast_to(
            crate::engine::zone::scalar_for(v, &dt, session.ctx().copied_config().options()),
            &dt,
            name,
        )?,
        None => ScalarValue::try_from(&dt)?,
    };
    session.vars_mut().declare(
        name,
        Variable {
            data_type: dt,
            value,
            default,
        },
    );
    Ok(Output::empty())
}

/// `SET VAR a = e [, b = DEFAULT]`: every expression is evaluated before any is assigned.
pub async fn set(
    session: &mut Session,
    assignments: Vec<(String, Option<Expr>)>,
) -> Result<Output> {
    let mut seen = std::collections::HashSet::new();
    let mut values = Vec::with_capacity(assignments.len());
    for (name, expr) in &assignments {
        if !seen.insert(name.to_lowercase()) {
            return Err(Error::class(
                "DUPLICATE_ASSIGNMENTS",
                format!("variable '{name}' is assigned more than once"),
            ));
        }
        let var = session
            .vars()
            .get(name)
            .cloned()
            .ok_or_else(|| unresolved(name))?;
        let value = match expr.as_ref().or(var.default.as_ref()) {
            Some(e) => session.eval_scalar(e).await?,
            None => ScalarValue::try_from(&var.data_type)?,
        };
        let value = crate::engine::zone::scalar_for(
            value,
            &var.data_type,
            session.ctx().copied_config().options(),
        );
        values.push((name.clone(), cast_to(value, &var.data_type, name)?));
    }
    for (name, value) in values {
        session.vars_mut().assign(&name, value)?;
    }
    Ok(Output::empty())
}

/// `SET VAR (a, b) = (query)`: zero rows sets NULLs, more than one row is an error.
pub async fn set_from_query(
    session: &mut Session,
    names: Vec<String>,
    query: Query,
) -> Result<Output> {
    for n in &names {
        if !session.vars().contains(n) {
            return Err(unresolved(n));
        }
    }
    let (df, _bound) = super::query::query_dataframe(session, query).await?;
    let width = df.schema().fields().len();
    if width != names.len() {
        return Err(Error::class(
            "ASSIGNMENT_ARITY_MISMATCH",
            format!(
                "the query returns {width} columns but {} variables are assigned",
                names.len()
            ),
        ));
    }
    let batches = df.limit(0, Some(2))?.collect().await?;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    if rows > 1 {
        return Err(Error::class(
            "ROW_SUBQUERY_TOO_MANY_ROWS",
            "the query of SET VAR (...) = (query) returned more than one row".to_string(),
        ));
    }
    let mut values = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let var = session
            .vars()
            .get(name)
            .cloned()
            .ok_or_else(|| unresolved(name))?;
        let v = match batches.iter().find(|b| b.num_rows() > 0) {
            Some(b) => ScalarValue::try_from_array(b.column(i), 0)?,
            None => ScalarValue::try_from(&var.data_type)?,
        };
        values.push((name.clone(), cast_to(v, &var.data_type, name)?));
    }
    for (name, value) in values {
        session.vars_mut().assign(&name, value)?;
    }
    Ok(Output::empty())
}

/// `DROP TEMPORARY VARIABLE [IF EXISTS] name`.
pub fn drop(session: &mut Session, name: &str, if_exists: bool) -> Result<Output> {
    if !session.vars_mut().drop_var(name) && !if_exists {
        return Err(unresolved(name));
    }
    Ok(Output::empty())
}
