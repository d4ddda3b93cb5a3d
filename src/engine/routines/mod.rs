//! SQL functions (`CREATE FUNCTION`) where statements call them. The binder finds each call
//! of a user function: a scalar function's call is pointed at a DataFusion function compiled
//! from its body (`scalar.rs`), with named arguments put in place and defaults filled in; a
//! table function's call in FROM is replaced by its query with the arguments in place of its
//! parameters (`table.rs`).
//!
//! Names resolve as in Databricks: a one-part name is a built-in function, else the session's
//! temporary function, else a function of the current schema; `session.f` and
//! `system.session.f` name temporary functions, `s.f` and `c.s.f` persistent ones.

mod changes;
mod read_files;
mod scalar;
mod table;

pub(crate) use table::{Call, Callee, Scratch, passes_parameters};

use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArgOperator, ObjectName,
};

use super::Session;
use crate::catalog::{Function, Returns, TableName};
use crate::error::{Error, Result};

pub(crate) use scalar::{Calls, ScalarBinder, compile};

/// The built-in table functions tidemark answers itself (with the statement's session, at
/// bind time), not the engine.
fn own_table_function(name: &str) -> Option<Callee> {
    if name.eq_ignore_ascii_case(changes::TABLE_CHANGES) {
        Some(Callee::Changes)
    } else if name.eq_ignore_ascii_case(read_files::READ_FILES) {
        Some(Callee::ReadFiles)
    } else {
        None
    }
}

/// The catalog and schema of temporary functions, as Databricks names them.
pub(crate) const SESSION_SCHEMA: (&str, &str) = ("system", "session");

/// How deep functions may call functions (a cycle is refused when a function is created,
/// but files can change under a running session).
const MAX_DEPTH: usize = 32;

/// A user function a name resolved to.
#[derive(Debug, Clone)]
pub(crate) struct Routine {
    /// `catalog.schema.name` (`system.session.name` for a temporary function), lower case:
    /// the name the compiled function is registered under and messages use.
    pub qualified: String,
    pub temporary: bool,
    pub definition: Function,
}

impl Routine {
    pub fn is_table(&self) -> bool {
        matches!(self.definition.returns, Returns::Table(_))
    }

    /// The parameter list as written, for messages: `(a INT, b STRING)`.
    pub fn signature(&self) -> String {
        let params: Vec<String> = self
            .definition
            .params
            .iter()
            .map(|p| format!("{} {}", p.name, p.data_type))
            .collect();
        format!("{}({})", self.qualified, params.join(", "))
    }
}

impl Session {
    /// Whether `name` (one part) is a built-in scalar, aggregate or window function.
    pub(crate) fn is_builtin_function(&self, name: &str) -> bool {
        let state = self.ctx.state();
        let name = name.to_lowercase();
        !name.contains('.')
            && (super::spark::SPELLED.contains(&name.as_str())
                || state.scalar_functions().contains_key(&name)
                || state.aggregate_functions().contains_key(&name)
                || state.window_functions().contains_key(&name))
    }

    /// Whether `name` (one part) is a built-in table function (`range`, ...).
    pub(crate) fn is_builtin_table_function(&self, name: &str) -> bool {
        own_table_function(name).is_some()
            || self
                .ctx
                .state()
                .table_functions()
                .contains_key(&name.to_lowercase())
    }

    /// The user function `parts` names, if any (built-ins are the caller's to rule out).
    pub(crate) fn routine(&self, parts: &[String]) -> Result<Option<Routine>> {
        let lower: Vec<String> = parts.iter().map(|p| p.to_lowercase()).collect();
        let temporary = match lower.as_slice() {
            [name] => Some(name),
            [s, name] if s == SESSION_SCHEMA.1 => Some(name),
            [c, s, name] if c == SESSION_SCHEMA.0 && s == SESSION_SCHEMA.1 => Some(name),
            _ => None,
        };
        if let Some(name) = temporary
            && let Some(definition) = self.temp_function(name)
        {
            return Ok(Some(Routine {
                qualified: format!("{}.{}.{name}", SESSION_SCHEMA.0, SESSION_SCHEMA.1),
                temporary: true,
                definition,
            }));
        }
        // `system.session.f` names only temporary functions.
        if matches!(lower.as_slice(), [c, s, _] if c == SESSION_SCHEMA.0 && s == SESSION_SCHEMA.1) {
            return Ok(None);
        }
        let Ok(name) = TableName::resolve(parts, &self.catalog, &self.schema) else {
            return Ok(None);
        };
        Ok(self.warehouse.function(&name)?.map(|definition| Routine {
            qualified: name.to_string().to_lowercase(),
            temporary: false,
            definition,
        }))
    }

    /// The error for a qualified function name that names nothing.
    pub(crate) fn unresolved_routine(&self, name: &ObjectName) -> Error {
        let name = super::name_parts(name)
            .map(|p| p.join("."))
            .unwrap_or_else(|_| name.to_string());
        Error::class(
            "UNRESOLVED_ROUTINE",
            format!(
                "function {name} not found (searched the built-in and temporary functions and {}.{}; SHOW USER FUNCTIONS lists them)",
                self.catalog, self.schema
            ),
        )
    }
}

/// A call's arguments in parameter order: positional ones first, then named ones
/// (`p => value`) in their places, then each missing parameter's DEFAULT.
pub(crate) fn arguments(routine: &Routine, list: Vec<FunctionArg>) -> Result<Vec<Expr>> {
    let name = &routine.qualified;
    let params = &routine.definition.params;
    let mut slots: Vec<Option<Expr>> = vec![None; params.len()];
    let mut named = false;
    for (i, arg) in list.into_iter().enumerate() {
        let (slot, value) = match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) if !named => (i, e),
            FunctionArg::Unnamed(_) if named => {
                return Err(Error::Invalid(format!(
                    "function {name}: a positional argument follows a named one"
                )));
            }
            FunctionArg::Named {
                name: p,
                arg: FunctionArgExpr::Expr(e),
                operator: FunctionArgOperator::RightArrow | FunctionArgOperator::Equals,
            }
            | FunctionArg::ExprNamed {
                name: Expr::Identifier(p),
                arg: FunctionArgExpr::Expr(e),
                operator: FunctionArgOperator::RightArrow | FunctionArgOperator::Equals,
            } => {
                named = true;
                let Some(slot) = params
                    .iter()
                    .position(|x| x.name.eq_ignore_ascii_case(&p.value))
                else {
                    return Err(Error::class(
                        "UNRECOGNIZED_PARAMETER_NAME",
                        format!(
                            "function {} has no parameter {}",
                            routine.signature(),
                            p.value
                        ),
                    ));
                };
                (slot, e)
            }
            other => {
                return Err(Error::Invalid(format!(
                    "function {name}: argument {other} is not supported (write a value, or p => value)"
                )));
            }
        };
        if slot >= params.len() {
            return Err(Error::class(
                "WRONG_NUM_ARGS",
                format!(
                    "function {} takes {} argument(s), the call gives more",
                    routine.signature(),
                    params.len()
                ),
            ));
        }
        if slots[slot].is_some() {
            return Err(Error::class(
                "DUPLICATE_ROUTINE_PARAMETER_ASSIGNMENT",
                format!(
                    "function {name}: parameter {} is given twice",
                    params[slot].name
                ),
            ));
        }
        slots[slot] = Some(value);
    }
    slots
        .into_iter()
        .zip(params)
        .map(|(value, p)| match (value, &p.default) {
            (Some(v), _) => Ok(v),
            (None, Some(d)) => crate::parser::expr_text(d),
            (None, None) => Err(Error::class(
                "REQUIRED_PARAMETER_NOT_FOUND",
                format!(
                    "function {} needs a value for parameter {}",
                    routine.signature(),
                    p.name
                ),
            )),
        })
        .collect()
}

/// Parse a stored SQL type.
pub(crate) fn parse_type(sql: &str) -> Result<datafusion::arrow::datatypes::DataType> {
    super::types::sql_to_arrow(&crate::parser::type_text(sql)?)
}

/// Refuse a call that nests deeper than [`MAX_DEPTH`] or comes back to a function on the way.
pub(crate) fn check_cycle(stack: &[String], qualified: &str) -> Result<()> {
    if stack.iter().any(|s| s == qualified) {
        let mut path: Vec<&str> = stack.iter().map(String::as_str).collect();
        path.push(qualified);
        return Err(Error::class(
            "ROUTINE_RECURSION",
            format!(
                "function {qualified} calls itself ({}): SQL functions cannot be recursive",
                path.join(" -> ")
            ),
        ));
    }
    if stack.len() >= MAX_DEPTH {
        return Err(Error::Invalid(format!(
            "function {qualified}: functions call functions more than {MAX_DEPTH} deep"
        )));
    }
    Ok(())
}
