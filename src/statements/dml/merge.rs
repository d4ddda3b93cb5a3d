//! MERGE INTO: a source joined to a warehouse table, its WHEN clauses (with Databricks'
//! `UPDATE SET *` and `INSERT *`) turned into delta-rs' merge builder, in one commit.

use super::super::counts;
use super::super::table::default_value;
use super::*;
use crate::engine::{Output, Session};
use crate::error::{Error, Result};
use crate::parser::MERGE_STAR;
use datafusion::arrow::datatypes::Schema;
use datafusion::sql::sqlparser::ast::{
    Assignment, Ident, Merge, MergeAction, MergeClauseKind, MergeInsertKind, Query, SetExpr,
    TableFactor,
};
use deltalake::DeltaTable;
use deltalake::operations::merge;

/// `MERGE INTO t USING s ON ... WHEN ...`.
pub async fn merge(session: &Session, merge: Merge) -> Result<Output> {
    super::super::clauses::merge(&merge)?;
    let TableFactor::Table { name, alias, .. } = &merge.table else {
        return Err(Error::Invalid("MERGE INTO needs a table".into()));
    };
    let table = session.table_name(name)?;
    let target_alias = alias
        .as_ref()
        .map(|a| a.name.value.clone())
        .unwrap_or_else(|| table.table.clone());
    let (source_query, source_alias) = merge_source(&merge)?;
    let metrics = super::super::retry::on_conflict(super::super::retry::WHOLE_STATEMENT, || {
        let merge = merge.clone();
        let table = table.clone();
        let source_query = source_query.clone();
        let source_alias = source_alias.clone();
        let target_alias = target_alias.clone();
        async move {
            let t = open_writable(session, &table).await?;
            crate::catalog::refuse_logged_empty_partitions(
                &t,
                &table.to_string(),
                "MERGE",
                super::super::rewrite::applies(&t)?,
            )?;
            let target_schema = super::super::table::arrow_schema(&t)?;
            // delta-rs plans MERGE's conditions and values itself, reading text and zone-less
            // times into a TIMESTAMP column in UTC: under another session zone that would be
            // another instant than a query means.
            if let Some(zone) =
                crate::engine::zone::session_zone(session.ctx().copied_config().options())
                && let Some(f) = target_schema
                    .fields()
                    .iter()
                    .find(|f| crate::engine::zone::relabeled(f.data_type(), &zone).is_some())
            {
                return Err(Error::class(
                    "UNSUPPORTED_FEATURE",
                    format!(
                        "MERGE into {table} under SET TIME ZONE '{zone}': its TIMESTAMP column '{}' would read text and zone-less times in UTC; run the MERGE under SET TIME ZONE 'UTC' (a time with its offset, TIMESTAMP '2024-01-01 10:00:00+09:00', names the same instant anywhere)",
                        f.name()
                    ),
                ));
            }
            let target_cols = super::super::column_names(target_schema.fields());
            let defaults = insert_defaults(session, &t, &target_schema).await?;
            let empty_as_null = crate::catalog::string_partition_columns(&t)?;
            let (source, _bound) =
                super::super::query::query_dataframe(session, source_query).await?;
            let source = crate::engine::progress::counted_rows(source)?;
            let source_cols = super::super::column_names(source.schema().fields());
            // `o.id` and `s.id` each as their own relation spells the name.
            let source_schema = std::sync::Arc::new(source.schema().as_arrow().clone());
            let scopes = [
                (vec![target_alias.clone()], target_schema.clone()),
                (vec![source_alias.clone()], source_schema.clone()),
            ];
            let scope = std::sync::Arc::new(datafusion::arrow::datatypes::Schema::new(
                target_schema
                    .fields()
                    .iter()
                    .chain(source_schema.fields().iter())
                    .cloned()
                    .collect::<Vec<_>>(),
            ));
            let mut on = *merge.on;
            let _b = session.bind_scoped(&mut on, &scope, &scopes).await?;
            // delta-rs plans the conditions and values itself: arithmetic as Databricks'.
            crate::engine::functions::checked_calls(&mut on);
            let mut builder = t
                .merge(source, on.to_string())
                .with_source_alias(source_alias.clone())
                .with_target_alias(target_alias.clone())
                .with_session_state(without_view_types(session));
            let generated: Vec<(String, String)> = target_schema
                .fields()
                .iter()
                .filter_map(|f| {
                    f.metadata()
                        .get(super::super::ddl::GENERATION_KEY)
                        .map(|g| (f.name().clone(), g.clone()))
                })
                .collect();
            let clauses = Clauses {
                target_cols: &target_cols,
                source_cols: &source_cols,
                source_alias: &source_alias,
                target_alias: &target_alias,
                target_schema: &target_schema,
                defaults: &defaults,
                generated: &generated,
                empty_as_null: &empty_as_null,
            };
            for mut clause in merge.clauses {
                let _b = session.bind_scoped(&mut clause, &scope, &scopes).await?;
                crate::engine::functions::checked_calls(&mut clause);
                builder = clauses.add(builder, clause)?;
            }
            let (_, m) =
                super::super::upkeep::commit(builder, super::super::upkeep::never_over_another())
                    .await
                    .map_err(Error::from)?;
            Ok(m)
        }
    })
    .await
    .map_err(|e| e.context(format!("cannot merge into {table}")))?;
    let affected = metrics.num_target_rows_inserted
        + metrics.num_target_rows_updated
        + metrics.num_target_rows_deleted;
    Ok(counts(&[
        ("num_affected_rows", affected as i64),
        ("num_updated_rows", metrics.num_target_rows_updated as i64),
        ("num_deleted_rows", metrics.num_target_rows_deleted as i64),
        ("num_inserted_rows", metrics.num_target_rows_inserted as i64),
    ]))
}

/// The MERGE source as a query, and the name it goes by in the statement.
fn merge_source(merge: &Merge) -> Result<(Query, String)> {
    Ok(match &merge.source {
        TableFactor::Table { name, alias, .. } => {
            let alias = alias
                .as_ref()
                .map(|a| a.name.value.clone())
                .unwrap_or_else(|| {
                    crate::engine::name_parts(name)
                        .ok()
                        .and_then(|p| p.last().cloned())
                        .unwrap_or("source".into())
                });
            // `SELECT * FROM <the source>`, built as a tree: the name is never pasted as text.
            let mut query =
                *datafusion::sql::sqlparser::parser::Parser::new(&crate::parser::DIALECT)
                    .try_with_sql("SELECT * FROM source")?
                    .parse_query()?;
            // The whole table reference (time travel, a sample ...) but its alias, which
            // names the source in the MERGE instead.
            let mut relation = merge.source.clone();
            if let TableFactor::Table { alias, .. } = &mut relation {
                *alias = None;
            }
            if let SetExpr::Select(select) = query.body.as_mut() {
                select.from[0].relation = relation;
            }
            (query, alias)
        }
        TableFactor::Derived {
            subquery, alias, ..
        } => (
            (**subquery).clone(),
            alias
                .as_ref()
                .map(|a| a.name.value.clone())
                .unwrap_or("source".into()),
        ),
        other => {
            return Err(Error::Invalid(format!(
                "MERGE source {other} is not supported"
            )));
        }
    })
}

/// What a MERGE's clauses are built with.
struct Clauses<'a> {
    target_cols: &'a [String],
    source_cols: &'a [String],
    source_alias: &'a str,
    target_alias: &'a str,
    target_schema: &'a Schema,
    /// Each DEFAULT column's value, for columns an INSERT leaves out.
    defaults: &'a [(String, String)],
    /// Each generated column's expression, for the UPDATEs that leave it out.
    generated: &'a [(String, String)],
    /// STRING partition columns, which store an empty string as NULL.
    empty_as_null: &'a [String],
}

impl Clauses<'_> {
    /// `builder` with one WHEN clause more.
    fn add(
        &self,
        builder: merge::MergeBuilder,
        clause: datafusion::sql::sqlparser::ast::MergeClause,
    ) -> Result<merge::MergeBuilder> {
        self.refuse_missing_side(&clause)?;
        let pred = clause.predicate.map(|p| p.to_string());
        Ok(match (clause.clause_kind, clause.action) {
            (MergeClauseKind::Matched, MergeAction::Update(u)) => {
                builder.when_matched_update(self.update(pred, &u.assignments)?)?
            }
            (MergeClauseKind::Matched, MergeAction::Delete { .. }) => {
                builder.when_matched_delete(delete(pred))?
            }
            (
                MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget,
                MergeAction::Insert(i),
            ) => {
                let mut sets = merge_insert(
                    &i.columns,
                    &i.kind,
                    self.target_cols,
                    self.source_cols,
                    self.source_alias,
                )?;
                // Columns the INSERT leaves out take their DEFAULT, as in INSERT.
                for (c, d) in self.defaults {
                    if !sets.iter().any(|(s, _)| s == c) {
                        sets.push((c.clone(), d.clone()));
                    }
                }
                let sets = self.null_if_empty(self.fill_defaults(sets));
                builder.when_not_matched_insert(|mut b| {
                    if let Some(p) = pred {
                        b = b.predicate(p);
                    }
                    for (c, e) in sets {
                        b = b.set(c, e);
                    }
                    b
                })?
            }
            (MergeClauseKind::NotMatchedBySource, MergeAction::Update(u)) => {
                builder.when_not_matched_by_source_update(self.update(pred, &u.assignments)?)?
            }
            (MergeClauseKind::NotMatchedBySource, MergeAction::Delete { .. }) => {
                builder.when_not_matched_by_source_delete(delete(pred))?
            }
            (kind, action) => {
                return Err(Error::Invalid(format!(
                    "WHEN {kind} THEN {action} is not a valid MERGE clause"
                )));
            }
        })
    }

    /// A `WHEN NOT MATCHED BY SOURCE` clause has no source row and a `WHEN NOT MATCHED [BY
    /// TARGET]` clause no target row: Databricks refuses a clause that reads a column of the
    /// side it lacks, where delta-rs read it as NULL (`WHEN NOT MATCHED BY SOURCE THEN UPDATE
    /// SET n = s.x` set `n` to NULL).
    fn refuse_missing_side(
        &self,
        clause: &datafusion::sql::sqlparser::ast::MergeClause,
    ) -> Result<()> {
        use datafusion::sql::sqlparser::ast::{Expr, visit_expressions};
        use std::ops::ControlFlow;
        let (alias, missing, present, kind, side) = match clause.clause_kind {
            MergeClauseKind::NotMatchedBySource => (
                self.source_alias,
                self.source_cols,
                self.target_cols,
                "WHEN NOT MATCHED BY SOURCE",
                "source",
            ),
            MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget => (
                self.target_alias,
                self.target_cols,
                self.source_cols,
                "WHEN NOT MATCHED",
                "target",
            ),
            _ => return Ok(()),
        };
        let has = |cols: &[String], name: &str| cols.iter().any(|c| c.eq_ignore_ascii_case(name));
        // A lambda's parameters are not columns (`exists(arr, x -> x > 1)`).
        let mut params: Vec<String> = vec![];
        let mut lambdas = |e: &Expr| {
            if let Expr::Lambda(l) = e {
                params.extend(l.params.iter().map(|p| p.name.value.to_lowercase()));
            }
            ControlFlow::<()>::Continue(())
        };
        let _ = visit_expressions(&clause.predicate, &mut lambdas);
        let _ = visit_expressions(&clause.action, &mut lambdas);
        let mut read = |e: &Expr| match e {
            Expr::CompoundIdentifier(parts)
                if parts.len() >= 2 && parts[0].value.eq_ignore_ascii_case(alias) =>
            {
                ControlFlow::Break(e.to_string())
            }
            Expr::Identifier(i)
                if has(missing, &i.value)
                    && !has(present, &i.value)
                    && !params.contains(&i.value.to_lowercase()) =>
            {
                ControlFlow::Break(e.to_string())
            }
            _ => ControlFlow::Continue(()),
        };
        let found = match visit_expressions(&clause.predicate, &mut read) {
            ControlFlow::Break(name) => Some(name),
            ControlFlow::Continue(()) => match visit_expressions(&clause.action, &mut read) {
                ControlFlow::Break(name) => Some(name),
                ControlFlow::Continue(()) => None,
            },
        };
        match found {
            Some(name) => Err(Error::class(
                "DELTA_MERGE_UNRESOLVED_EXPRESSION",
                format!(
                    "cannot resolve {name} in a {kind} clause: such a clause has no {side} row, so it may read only the {} ({}); nothing was merged",
                    if side == "source" {
                        "target's columns"
                    } else {
                        "source's columns"
                    },
                    if side == "source" {
                        self.target_alias
                    } else {
                        self.source_alias
                    },
                ),
            )),
            None => Ok(()),
        }
    }

    /// An UPDATE clause (matched or not matched by source): its condition and SET list.
    fn update(
        &self,
        pred: Option<String>,
        assignments: &[Assignment],
    ) -> Result<impl FnOnce(merge::UpdateBuilder) -> merge::UpdateBuilder + use<>> {
        let mut sets = self.null_if_empty(self.fill_defaults(merge_assignments(
            assignments,
            self.target_cols,
            self.source_cols,
            self.source_alias,
        )?));
        // Generated columns follow the columns they read: their expression over the row's
        // new values (each SET reads the old row; assigned values stand in for their columns).
        let assigned = sets.clone();
        for (g, text) in self.generated {
            if assigned.iter().any(|(c, _)| c == g) {
                continue;
            }
            let mut e = crate::parser::expr_text(text)?;
            let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(&mut e, |e| {
                if let Expr::Identifier(i) = e {
                    *e = match assigned
                        .iter()
                        .find(|(c, _)| c.eq_ignore_ascii_case(&i.value))
                    {
                        // The assigned value as the column stores it.
                        Some((c, v)) => {
                            let typed = match self.target_schema.field_with_name(c) {
                                Ok(f) => format!(
                                    "arrow_cast(({v}), '{}')",
                                    f.data_type().to_string().replace('\'', "''")
                                ),
                                Err(_) => format!("({v})"),
                            };
                            crate::parser::expr_text(&typed).unwrap_or_else(|_| e.clone())
                        }
                        None => {
                            let spelled = super::super::spelled(&i.value, self.target_cols)
                                .unwrap_or_else(|| i.value.clone());
                            Expr::CompoundIdentifier(vec![
                                Ident::new(self.target_alias),
                                Ident::with_quote('`', spelled),
                            ])
                        }
                    };
                }
                std::ops::ControlFlow::<()>::Continue(())
            });
            sets.push((g.clone(), e.to_string()));
        }
        Ok(move |mut b: merge::UpdateBuilder| {
            if let Some(p) = pred {
                b = b.predicate(p);
            }
            for (c, e) in sets {
                b = b.update(c, e);
            }
            b
        })
    }

    /// Each `DEFAULT` keyword set to its column's default (NULL without one).
    fn fill_defaults(&self, sets: Vec<(String, String)>) -> Vec<(String, String)> {
        sets.into_iter()
            .map(|(c, e)| {
                if !e.eq_ignore_ascii_case("DEFAULT") {
                    return (c, e);
                }
                let d = self.defaults.iter().find(|(d, _)| *d == c);
                let value = d.map_or_else(|| "NULL".to_string(), |(_, v)| v.clone());
                (c, value)
            })
            .collect()
    }

    fn null_if_empty(&self, sets: Vec<(String, String)>) -> Vec<(String, String)> {
        sets.into_iter()
            .map(|(c, e)| {
                if self.empty_as_null.contains(&c) {
                    let wrapped = format!("nullif({e}, '')");
                    (c, wrapped)
                } else {
                    (c, e)
                }
            })
            .collect()
    }
}

/// A DELETE clause (matched or not matched by source) and its condition.
fn delete(pred: Option<String>) -> impl FnOnce(merge::DeleteBuilder) -> merge::DeleteBuilder {
    move |mut b| {
        if let Some(p) = pred {
            b = b.predicate(p);
        }
        b
    }
}

/// Each DEFAULT column's value as an SQL literal, evaluated once per statement.
pub(super) async fn insert_defaults(
    session: &Session,
    t: &DeltaTable,
    schema: &Schema,
) -> Result<Vec<(String, String)>> {
    let mut out = vec![];
    for (col, sql) in column_defaults(t)? {
        let Ok(field) = schema.field_with_name(&col) else {
            continue;
        };
        let value = default_value(session, &sql, field.data_type()).await?;
        out.push((col, crate::engine::types::scalar_to_sql(&value).to_string()));
    }
    Ok(out)
}

pub(super) fn source_column(
    col: &str,
    source_cols: &[String],
    source_alias: &str,
) -> Result<String> {
    // The source's own spelling: the target's `CustomerID` is the source's `customerid`.
    let Some(spelled) = super::super::spelled(col, source_cols) else {
        return Err(Error::NotFound(format!(
            "MERGE ... * needs column '{col}' in the source{}",
            crate::catalog::suggest(col, source_cols)
        )));
    };
    Ok(format!(
        "{}.{}",
        crate::catalog::quote_ident(source_alias),
        crate::catalog::quote_ident(&spelled)
    ))
}

/// A column a MERGE sets, as the target spells it; a name the target lacks is refused (delta-rs
/// would skip it, and an INSERT would store NULL in the column meant).
fn target_column(col: &str, target_cols: &[String]) -> Result<String> {
    super::super::spelled(col, target_cols).ok_or_else(|| {
        Error::NotFound(format!(
            "column '{col}' is not a column of the MERGE target{}",
            crate::catalog::suggest(col, target_cols)
        ))
    })
}

/// `UPDATE SET a = e, ...` or `UPDATE SET *` as (column, SQL expression) pairs.
pub(super) fn merge_assignments(
    assignments: &[Assignment],
    target_cols: &[String],
    source_cols: &[String],
    source_alias: &str,
) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for a in assignments {
        let col = assignment_column(a)?;
        if col == MERGE_STAR {
            for c in target_cols {
                out.push((c.clone(), source_column(c, source_cols, source_alias)?));
            }
        } else {
            out.push((target_column(&col, target_cols)?, a.value.to_string()));
        }
    }
    if let Some(c) = super::repeated(out.iter().map(|(c, _)| c.as_str())) {
        return Err(super::conflicting_set(c));
    }
    Ok(out)
}

/// `INSERT (cols) VALUES (exprs)` or `INSERT *` as (column, SQL expression) pairs.
pub(super) fn merge_insert(
    columns: &[datafusion::sql::sqlparser::ast::ObjectName],
    kind: &MergeInsertKind,
    target_cols: &[String],
    source_cols: &[String],
    source_alias: &str,
) -> Result<Vec<(String, String)>> {
    let MergeInsertKind::Values(values) = kind else {
        return Err(Error::Invalid(
            "INSERT ROW is not supported; use INSERT * or INSERT (cols) VALUES (...)".into(),
        ));
    };
    let names: Vec<String> = columns
        .iter()
        .map(|c| c.to_string().trim_matches('`').to_lowercase())
        .collect();
    if names.len() == 1 && names[0] == MERGE_STAR {
        return target_cols
            .iter()
            .map(|c| Ok((c.clone(), source_column(c, source_cols, source_alias)?)))
            .collect();
    }
    let [row] = values.rows.as_slice() else {
        return Err(Error::Invalid(
            "MERGE INSERT takes exactly one VALUES row".into(),
        ));
    };
    let names = if names.is_empty() {
        target_cols.to_vec()
    } else {
        names
            .iter()
            .map(|c| target_column(c, target_cols))
            .collect::<Result<_>>()?
    };
    if let Some(c) = super::repeated(names.iter().map(String::as_str)) {
        return Err(Error::class(
            "COLUMN_ALREADY_EXISTS",
            format!("MERGE INSERT names column '{c}' more than once"),
        ));
    }
    if names.len() != row.len() {
        return Err(Error::Invalid(format!(
            "MERGE INSERT lists {} columns but {} values",
            names.len(),
            row.len()
        )));
    }
    Ok(names
        .into_iter()
        .zip(row.iter().map(|e| e.to_string()))
        .collect())
}
