//! What DDL, DML and the copy share about a Delta table as tidemark stores it: its Arrow
//! schema, the metadata keys of column defaults and comments, the types Delta stores, the
//! statistics property of new tables, and whether a plain append may skip delta-rs' checks.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::Expr as DfExpr;
use datafusion::sql::sqlparser::ast::Expr;
use deltalake::DeltaTable;

use crate::engine::Session;
use crate::engine::types::{storage_type, type_name};
use crate::error::{Error, Result};

/// Column metadata key holding a column's DEFAULT expression (SQL text).
pub(crate) const DEFAULT_KEY: &str = "tidemark.default";
/// Column metadata key for comments (Spark's convention).
pub(crate) const COMMENT_KEY: &str = "comment";

/// Add the property that keeps a new table's statistics exact (see
/// `types::exact_stats_property`), unless the statement sets statistics columns itself.
pub(crate) fn keep_stats_exact(
    configuration: &mut HashMap<String, Option<String>>,
    fields: &[(String, datafusion::arrow::datatypes::DataType)],
    partition_columns: &[String],
) {
    let set_by_user = configuration.keys().any(|k| {
        k.eq_ignore_ascii_case("delta.dataSkippingStatsColumns")
            || k.eq_ignore_ascii_case("delta.dataSkippingNumIndexedCols")
    });
    if let (false, Some((k, v))) = (
        set_by_user,
        crate::engine::types::exact_stats_property(fields, partition_columns),
    ) {
        configuration.insert(k, Some(v));
    }
}

/// Project a DataFrame to Delta-storable types (Utf8 strings, µs timestamps), names as they are.
pub(crate) fn normalize_for_storage(
    df: datafusion::dataframe::DataFrame,
) -> Result<datafusion::dataframe::DataFrame> {
    use datafusion::prelude::{cast, col};
    let exprs: Vec<datafusion::logical_expr::Expr> = df
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let target = crate::engine::types::storage_type(f.data_type());
            let c = col(datafusion::common::Column::from_name(f.name()));
            let e = if &target == f.data_type() {
                c
            } else {
                cast(c, target)
            };
            e.alias(f.name())
        })
        .collect();
    Ok(df.select(exprs)?)
}

/// Arrow schema of a table as stored.
pub(crate) fn arrow_schema(t: &deltalake::DeltaTable) -> Result<Arc<Schema>> {
    Ok(t.snapshot()?.snapshot().arrow_schema())
}

/// A column's DEFAULT as a DataFusion expression of the column's type.
pub(crate) async fn default_expr(
    session: &Session,
    default_sql: &str,
    dt: &DataType,
) -> Result<DfExpr> {
    let value = default_value(session, default_sql, dt).await?;
    Ok(DfExpr::Literal(value, None))
}

/// Whether `e` is the keyword `DEFAULT` (unquoted) standing for a column's default value,
/// as in `VALUES (1, DEFAULT)` and `SET c = DEFAULT`.
pub(crate) fn is_default_keyword(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("DEFAULT"))
}

/// The expression a `DEFAULT` keyword stands for: the column's default, or NULL without one.
pub(crate) fn default_keyword_value(default_sql: Option<&str>) -> Result<Expr> {
    match default_sql {
        Some(sql) => crate::parser::expr_text(sql),
        None => Ok(Expr::value(datafusion::sql::sqlparser::ast::Value::Null)),
    }
}

pub(crate) async fn default_value(
    session: &Session,
    default_sql: &str,
    dt: &DataType,
) -> Result<datafusion::common::ScalarValue> {
    let expr = crate::parser::expr_text(default_sql)?;
    let value = session.eval_scalar(&expr).await?;
    value.cast_to(dt).map_err(|e| {
        Error::Type(format!(
            "DEFAULT {default_sql} cannot be cast to {}: {e}",
            type_name(dt)
        ))
    })
}

/// Cast columns to the types Delta stores (view strings to strings).
pub(crate) fn storable(df: DataFrame) -> Result<DataFrame> {
    let needs = df
        .schema()
        .fields()
        .iter()
        .any(|f| &storage_type(f.data_type()) != f.data_type());
    if needs {
        normalize_for_storage(df)
    } else {
        Ok(df)
    }
}

/// Whether a target with schema `target` reads a file of a source with schema `source` as it
/// is (Delta readers match a file's columns by name, and read a column the file lacks as
/// NULL): each source column is a target column of the same name and type; column comments
/// may differ, and a source column that is NOT NULL may be nullable in the target; any other
/// field metadata (column mapping, identity, generation) must match. A target column the
/// source lacks must be nullable, with no metadata but a comment.
pub(crate) fn reads_files_as_they_are(target: &SchemaRef, source: &SchemaRef) -> bool {
    let without_comment = |f: &datafusion::arrow::datatypes::Field| {
        let mut m = f.metadata().clone();
        m.remove(COMMENT_KEY);
        m
    };
    let find =
        |schema: &SchemaRef, name: &str| schema.fields().iter().find(|f| f.name() == name).cloned();
    source.fields().iter().all(|s| {
        find(target, s.name()).is_some_and(|t| {
            t.data_type() == s.data_type()
                && (t.is_nullable() || !s.is_nullable())
                && without_comment(&t) == without_comment(s)
        })
    }) && target.fields().iter().all(|t| {
        find(source, t.name()).is_some() || (t.is_nullable() && without_comment(t).is_empty())
    })
}

/// `rows` with every column of `target` the source lacks added, as its generation expression,
/// DEFAULT or NULL, in
/// the target's order (the source's own new columns last, for a schema merge).
pub(crate) async fn with_target_columns(
    session: &Session,
    rows: DataFrame,
    target: &DeltaTable,
) -> Result<DataFrame> {
    let tschema = arrow_schema(target)?;
    let given = crate::statements::column_names(rows.schema().fields());
    let find = |name: &str| given.iter().find(|g| g.eq_ignore_ascii_case(name));
    if tschema.fields().iter().all(|f| find(f.name()).is_some()) {
        return Ok(rows);
    }
    let mut exprs = vec![];
    for f in tschema.fields() {
        exprs.push(match find(f.name()) {
            Some(g) => {
                datafusion::prelude::col(datafusion::common::Column::from_name(g)).alias(f.name())
            }
            None => match (
                f.metadata().get(crate::statements::ddl::GENERATION_KEY),
                f.metadata().get(DEFAULT_KEY),
            ) {
                // A generated column computed from the row's other columns (an expression
                // DataFusion and Databricks compute alike; delta-rs checks it on write).
                (Some(g), _) => {
                    datafusion::logical_expr::cast(rows.parse_sql_expr(g)?, f.data_type().clone())
                }
                (None, Some(d)) => default_expr(session, d, f.data_type()).await?,
                (None, None) => DfExpr::Literal(ScalarValue::try_from(f.data_type())?, None),
            }
            .alias(f.name()),
        });
    }
    for g in &given {
        if !tschema
            .fields()
            .iter()
            .any(|f| f.name().eq_ignore_ascii_case(g))
        {
            exprs.push(datafusion::prelude::col(
                datafusion::common::Column::from_name(g),
            ));
        }
    }
    Ok(rows.select(exprs)?)
}

/// Whether files can be appended to `target` by tidemark's own writer: nothing in the table
/// asks a writer to check or compute values (CHECK constraints, invariants, generated columns,
/// column defaults), which only the full write path handles.
pub(crate) fn plain_appends(target: &DeltaTable) -> Result<bool> {
    let snapshot = target.snapshot()?;
    let metadata = snapshot.metadata();
    let constrained = metadata
        .configuration()
        .keys()
        .any(|k| k.starts_with("delta.constraints."));
    let computed = snapshot.schema().fields().any(|f| {
        f.metadata().keys().any(|k| {
            k == "delta.invariants"
                || k == crate::statements::ddl::GENERATION_KEY
                || k == DEFAULT_KEY
        })
    });
    Ok(!constrained && !computed)
}
