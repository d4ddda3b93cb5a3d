//! SQL functions: `CREATE [OR REPLACE] [TEMPORARY] FUNCTION`, `DROP [TEMPORARY] FUNCTION`,
//! `DESCRIBE FUNCTION [EXTENDED]` and `SHOW [USER|SYSTEM|ALL] FUNCTIONS`. A function's body is
//! bound when it is created (tables and functions named in three parts, so it reads the same
//! objects from any schema) and checked by compiling it (scalar) or planning it (table) with
//! its parameters; calls are bound by `engine::routines`. Persistent functions live in the
//! warehouse (`catalog::definitions`), temporary ones in the session.

use crate::engine::types::type_text;
use datafusion::sql::sqlparser::ast::{
    FunctionArg, FunctionArgExpr, ObjectName, Query, SetExpr, TableFactor, TableWithJoins,
};

use crate::catalog::{Function, Param, Returns, TableName, check_writable_table};
use crate::engine::routines::{Call, Callee, Routine, SESSION_SCHEMA, compile, passes_parameters};
use crate::engine::types::{sql_to_arrow, type_name};
use crate::engine::{Output, Session, name_parts};
use crate::error::{Error, Result};
use crate::parser::{CreateFunction, FunctionBody, FunctionKind, FunctionReturns};

/// Where a function is created: a temporary function's one-part name, or a schema's.
enum Place {
    Temporary(String),
    Schema(TableName),
}

/// `CREATE FUNCTION`.
pub async fn create(session: &Session, c: CreateFunction) -> Result<Output> {
    if c.or_replace && c.if_not_exists {
        return Err(Error::Invalid(
            "CREATE OR REPLACE FUNCTION ... IF NOT EXISTS: choose one (replace it, or keep one that exists)".into(),
        ));
    }
    let place = place(session, &c.name, c.temporary)?;
    let (shown, exists) = match &place {
        Place::Temporary(n) => (
            format!("{}.{}.{n}", SESSION_SCHEMA.0, SESSION_SCHEMA.1),
            session.temp_function(n).is_some(),
        ),
        Place::Schema(n) => (n.to_string(), session.warehouse().function(n)?.is_some()),
    };
    if exists && !c.or_replace {
        if c.if_not_exists {
            return Ok(Output::empty());
        }
        return Err(Error::class(
            "ROUTINE_ALREADY_EXISTS",
            format!(
                "function {shown} already exists (CREATE OR REPLACE FUNCTION replaces it; IF NOT EXISTS keeps it)"
            ),
        ));
    }
    let params = parameters(session, &c).await?;
    let param_names: Vec<String> = params.iter().map(|p| p.name.to_lowercase()).collect();
    let persistent = matches!(place, Place::Schema(_));
    let (body, returns) = match (c.body, c.returns) {
        (FunctionBody::Expr(mut e), FunctionReturns::Scalar(t)) => {
            let bound = session.bind_view_query(e.as_mut()).await?;
            if persistent {
                refuse_temporary(session, &shown, &bound, e.as_ref(), &param_names, false).await?;
            }
            let returns = t.map(|t| type_text(&t)).unwrap_or_default();
            (e.to_string(), Returns::Scalar(returns))
        }
        (FunctionBody::Query(_), FunctionReturns::Scalar(_)) => {
            return Err(Error::class(
                "UNSUPPORTED_FEATURE",
                format!(
                    "function {shown}: a scalar function's body is an expression; a body that is a query needs RETURNS TABLE (a scalar function cannot read tables yet)"
                ),
            ));
        }
        (FunctionBody::Query(mut q), FunctionReturns::Table(columns)) => {
            let bound = session.bind_view_query(q.as_mut()).await?;
            if persistent {
                let probe = Routine {
                    qualified: shown.to_lowercase(),
                    temporary: false,
                    definition: Function {
                        params: params.clone(),
                        returns: Returns::Table(vec![]),
                        body: q.to_string(),
                        comment: None,
                        not_deterministic: false,
                    },
                };
                let passing = passes_parameters(&probe)?;
                refuse_temporary(session, &shown, &bound, q.as_ref(), &param_names, passing)
                    .await?;
            }
            let mut declared = Vec::with_capacity(columns.len());
            for (name, t) in &columns {
                sql_to_arrow(t)?;
                declared.push((name.value.to_lowercase(), type_text(t)));
            }
            (q.to_string(), Returns::Table(declared))
        }
        (FunctionBody::Expr(_), FunctionReturns::Table(_)) => {
            return Err(Error::Invalid(format!(
                "function {shown} RETURNS TABLE: its body is a query (RETURN SELECT ...)"
            )));
        }
    };
    let mut routine = Routine {
        qualified: shown.to_lowercase(),
        temporary: !persistent,
        definition: Function {
            params,
            returns,
            body,
            comment: c.comment,
            not_deterministic: c.not_deterministic,
        },
    };
    check(session, &mut routine).await?;
    match place {
        Place::Temporary(name) => session.set_temp_function(&name, routine.definition),
        Place::Schema(name) => session
            .warehouse()
            .put_function(&name, &routine.definition)?,
    }
    Ok(Output::empty())
}

/// Where `name` is created.
fn place(session: &Session, name: &ObjectName, temporary: bool) -> Result<Place> {
    let parts: Vec<String> = name_parts(name)?.iter().map(|p| p.to_lowercase()).collect();
    if temporary {
        let one = match parts.as_slice() {
            [one] => one,
            [s, one] if s == SESSION_SCHEMA.1 => one,
            [c, s, one] if c == SESSION_SCHEMA.0 && s == SESSION_SCHEMA.1 => one,
            _ => {
                return Err(Error::Invalid(format!(
                    "a temporary function has a one-part name (or session.name), found '{name}'"
                )));
            }
        };
        if session.is_builtin_function(one) || session.is_builtin_table_function(one) {
            return Err(Error::class(
                "ROUTINE_ALREADY_EXISTS",
                format!(
                    "cannot create temporary function {one}: a built-in function has that name (choose another name)"
                ),
            ));
        }
        return Ok(Place::Temporary(one.clone()));
    }
    let table = session.object_name(name)?;
    check_writable_table(&table, true)?;
    let wh = session.warehouse();
    if !wh.schema_exists(&table.catalog, &table.schema) {
        return Err(wh.missing_table_error(&table));
    }
    Ok(Place::Schema(table))
}

/// The parameters, checked: distinct names, known types, defaults that are constants of
/// the parameter's type and come last.
async fn parameters(session: &Session, c: &CreateFunction) -> Result<Vec<Param>> {
    let mut out: Vec<Param> = Vec::with_capacity(c.params.len());
    for p in &c.params {
        let name = p.name.value.to_lowercase();
        if out.iter().any(|o| o.name == name) {
            return Err(Error::class(
                "DUPLICATE_ROUTINE_PARAMETER_NAMES",
                format!("function {}: parameter {name} is listed twice", c.name),
            ));
        }
        let dt = sql_to_arrow(&p.data_type)?;
        let default = match &p.default {
            Some(d) => {
                let value = session.eval_scalar(d).await?;
                if !value.is_null() {
                    crate::engine::types::cast_value(&value, &dt).map_err(|e| {
                        Error::class(
                            "DATATYPE_MISMATCH",
                            format!(
                                "function {}: the DEFAULT of parameter {name} ({d}) is not a {}: {e}",
                                c.name,
                                type_name(&dt)
                            ),
                        )
                    })?;
                }
                Some(d.to_string())
            }
            None if out.iter().any(|o| o.default.is_some()) => {
                return Err(Error::Invalid(format!(
                    "function {}: parameter {name} follows one with a DEFAULT, so it needs one too",
                    c.name
                )));
            }
            None => None,
        };
        out.push(Param {
            name,
            data_type: type_text(&p.data_type),
            default,
            comment: p.comment.clone(),
        });
    }
    Ok(out)
}

/// A persistent function reads no session variables, temporary views or temporary
/// functions (other sessions do not have them).
async fn refuse_temporary<T: datafusion::sql::sqlparser::ast::VisitMut + Clone>(
    session: &Session,
    shown: &str,
    bound: &crate::engine::bind::Bound,
    body: &T,
    params: &[String],
    passing: bool,
) -> Result<()> {
    let what = if let Some(v) = bound.temp_views.first() {
        format!("temporary view {v}")
    } else if let Some(f) = bound.temp_functions.first() {
        format!("temporary function {f}")
    } else {
        let mut copy = body.clone();
        match session.bind(&mut copy, params).await {
            Ok(b) if b.variables == 0 => return Ok(()),
            Ok(_) => "session variables".to_string(),
            // Parameters passed to a table function the body calls: it binds only once
            // called; session variables are not looked for then.
            Err(_) if passing => return Ok(()),
            Err(e) => return Err(e),
        }
    };
    Err(Error::class(
        "INVALID_TEMP_OBJ_REFERENCE",
        format!(
            "persistent function {shown} reads {what}: other sessions do not have it; make the function TEMPORARY, or pass the value as a parameter"
        ),
    ))
}

/// Compile a scalar function (filling in the type it returns when RETURNS was left out), or
/// plan a table function with NULL arguments (filling in its columns when RETURNS TABLE
/// lists none). Either refuses recursion.
async fn check(session: &Session, routine: &mut Routine) -> Result<()> {
    if !routine.is_table() {
        let udf = compile(session, routine, &[])?;
        let returns = udf.return_type(&[])?;
        if let Returns::Scalar(t) = &mut routine.definition.returns
            && t.is_empty()
        {
            *t = type_name(&returns);
        }
        return Ok(());
    }
    if passes_parameters(routine)? {
        // Its query's tables depend on the arguments (table_changes('t', since)): it is
        // planned when called.
        return match &routine.definition.returns {
            Returns::Table(declared) if declared.is_empty() => Err(Error::Invalid(format!(
                "function {}: its query passes parameters to table functions, so it is planned when called; list the columns it returns (RETURNS TABLE (c TYPE, ...))",
                routine.qualified
            ))),
            _ => Ok(()),
        };
    }
    let args = routine
        .definition
        .params
        .iter()
        .map(|p| {
            let e = crate::parser::expr_text(&format!("CAST(NULL AS {})", p.data_type))?;
            Ok(FunctionArg::Unnamed(FunctionArgExpr::Expr(e)))
        })
        .collect::<Result<Vec<_>>>()?;
    let call = Call {
        callee: Callee::Sql(routine.clone()),
        args,
        alias: None,
    };
    let (factor, _calls) = session.table_call(call, &[]).await?;
    let query = select_star(factor);
    let (df, _bound) = super::super::query::query_dataframe(session, query).await?;
    let fields = df.schema().fields();
    let Returns::Table(declared) = &mut routine.definition.returns else {
        return Ok(());
    };
    if declared.is_empty() {
        *declared = fields
            .iter()
            .map(|f| (f.name().to_lowercase(), type_name(f.data_type())))
            .collect();
    }
    Ok(())
}

/// `SELECT * FROM factor`.
fn select_star(factor: TableFactor) -> Query {
    let mut query = crate::parser::query_text("SELECT * FROM t").expect("a query");
    if let SetExpr::Select(select) = query.body.as_mut() {
        select.from = vec![TableWithJoins {
            relation: factor,
            joins: vec![],
        }];
    }
    query
}

/// `DROP [TEMPORARY] FUNCTION [IF EXISTS] f`.
pub fn drop(
    session: &Session,
    name: &ObjectName,
    temporary: bool,
    if_exists: bool,
) -> Result<Output> {
    match place(session, name, temporary) {
        Ok(Place::Temporary(one)) => {
            if session.drop_temp_function(&one) || if_exists {
                return Ok(Output::empty());
            }
            Err(Error::class(
                "ROUTINE_NOT_FOUND",
                format!("temporary function {one} not found (SHOW USER FUNCTIONS lists them)"),
            ))
        }
        Ok(Place::Schema(table)) => {
            if session.warehouse().remove_function(&table)? || if_exists {
                return Ok(Output::empty());
            }
            let hint = match name_parts(name)?.as_slice() {
                [one] if session.temp_function(one).is_some() => {
                    format!(" ({one} is a temporary function: DROP TEMPORARY FUNCTION {one})")
                }
                _ => String::new(),
            };
            Err(Error::class(
                "ROUTINE_NOT_FOUND",
                format!("function {table} not found{hint}"),
            ))
        }
        Err(_) if if_exists && temporary => Ok(Output::empty()),
        Err(e) => Err(e),
    }
}

/// `DESCRIBE FUNCTION [EXTENDED] f`: one row per line of its description.
pub fn describe(session: &Session, name: &ObjectName, extended: bool) -> Result<Output> {
    let parts = name_parts(name)?;
    let mut lines = vec![];
    if let [one] = parts.as_slice()
        && (session.is_builtin_function(one) || session.is_builtin_table_function(one))
    {
        let one = one.to_lowercase();
        lines.push(format!("Function: {one}"));
        lines.push("Type: built-in".into());
        let state = session.ctx().state();
        let doc = state
            .scalar_functions()
            .get(&one)
            .and_then(|f| f.documentation().cloned())
            .or_else(|| {
                state
                    .aggregate_functions()
                    .get(&one)
                    .and_then(|f| f.documentation().cloned())
            })
            .or_else(|| {
                state
                    .window_functions()
                    .get(&one)
                    .and_then(|f| f.documentation().cloned())
            });
        if let Some(doc) = doc {
            lines.push(format!("Usage: {}", doc.description));
            lines.push(format!("Syntax: {}", doc.syntax_example));
            if extended && let Some(example) = &doc.sql_example {
                lines.push(format!("Example: {example}"));
            }
        }
        return Ok(super::super::show::strings("function_desc", lines));
    }
    let Some(routine) = session.routine(&parts)? else {
        return Err(session.unresolved_routine(name));
    };
    let d = &routine.definition;
    lines.push(format!("Function: {}", routine.qualified));
    lines.push(format!(
        "Type: {}{}",
        if routine.is_table() {
            "TABLE"
        } else {
            "SCALAR"
        },
        if routine.temporary {
            " (temporary)"
        } else {
            ""
        }
    ));
    for (i, p) in d.params.iter().enumerate() {
        let mut line = format!(
            "{} {} {}",
            if i == 0 { "Input:" } else { "      " },
            p.name,
            p.data_type
        );
        if let Some(default) = &p.default {
            line.push_str(&format!(" DEFAULT {default}"));
        }
        if let Some(c) = &p.comment {
            line.push_str(&format!(" '{c}'"));
        }
        lines.push(line);
    }
    if d.params.is_empty() {
        lines.push("Input: ()".into());
    }
    match &d.returns {
        Returns::Scalar(t) => lines.push(format!("Returns: {t}")),
        Returns::Table(columns) => {
            for (i, (c, t)) in columns.iter().enumerate() {
                lines.push(format!(
                    "{} {c} {t}",
                    if i == 0 { "Returns:" } else { "        " }
                ));
            }
        }
    }
    if let Some(c) = &d.comment {
        lines.push(format!("Comment: {c}"));
    }
    if extended {
        lines.push(format!("Deterministic: {}", !d.not_deterministic));
        lines.push(format!(
            "Data Access: {}",
            if routine.is_table() {
                "READS SQL DATA"
            } else {
                "CONTAINS SQL"
            }
        ));
        lines.push(format!("Body: {}", d.body));
    }
    Ok(super::super::show::strings("function_desc", lines))
}

/// `SHOW [USER|SYSTEM|ALL] FUNCTIONS [IN [c.]s] [[LIKE] 'pattern']`: the functions' names,
/// sorted; a pattern takes `*` for any text and `|` between alternatives, as in Databricks.
pub fn show(
    session: &Session,
    kind: FunctionKind,
    within: Option<&ObjectName>,
    like: Option<&str>,
) -> Result<Output> {
    let parts: Vec<String> = match within {
        Some(n) => name_parts(n)?.iter().map(|p| p.to_lowercase()).collect(),
        None => vec![],
    };
    let (catalog, schema) = super::super::show::schema_in(session, &parts, "FUNCTIONS")?;
    let wh = session.warehouse();
    if !wh.schema_exists(&catalog, &schema) {
        return Err(wh.missing_table_error(&TableName::new(&catalog, &schema, "_")));
    }
    let mut names = vec![];
    if kind != FunctionKind::System {
        names.extend(
            session
                .temp_functions()
                .into_iter()
                .map(|f| format!("{}.{}.{f}", SESSION_SCHEMA.0, SESSION_SCHEMA.1)),
        );
        names.extend(
            wh.functions(&catalog, &schema)
                .into_iter()
                .map(|f| format!("{catalog}.{schema}.{f}")),
        );
    }
    if kind != FunctionKind::User {
        let state = session.ctx().state();
        let builtin = state
            .scalar_functions()
            .keys()
            .chain(state.aggregate_functions().keys())
            .chain(state.window_functions().keys())
            .chain(state.table_functions().keys())
            .filter(|n| !n.starts_with("__") && !n.contains('.'))
            .cloned();
        names.extend(builtin);
        // Built-ins tidemark spells with the engine's functions (`year`, `int`, ...).
        names.extend(crate::engine::spark::SPELLED.iter().map(|n| n.to_string()));
    }
    names.sort();
    names.dedup();
    if let Some(pattern) = like {
        names.retain(|n| {
            let short = n.rsplit('.').next().unwrap_or(n);
            super::super::show::matches_pattern(pattern, short)
                || super::super::show::matches_pattern(pattern, n)
        });
    }
    Ok(super::super::show::strings("function", names))
}
