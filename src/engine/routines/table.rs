//! Table SQL functions: a call in FROM is replaced by the function's query, each parameter
//! by its argument cast to the parameter's type (a column of the query's tables of the same
//! name wins, as in Databricks; `f.p` names the parameter), under the declared column names
//! and types.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, Ident, ObjectName, ObjectNamePart, TableAlias, TableFactor, VisitMut,
    VisitorMut,
};

use super::scalar::qualified_name;
use super::{Calls, Routine, arguments, check_cycle};
use crate::catalog::Returns;
use crate::engine::{Session, name_parts};
use crate::error::{Error, Result};

/// The name a call is parked under until its query is ready.
const PLACEHOLDER: &str = "__tidemark_table_call_";

/// One call of a table function found in FROM that the binder answers.
pub(crate) struct Call {
    pub callee: Callee,
    pub args: Vec<FunctionArg>,
    pub alias: Option<TableAlias>,
}

/// Which function a [`Call`] calls.
pub(crate) enum Callee {
    /// A SQL table function.
    Sql(Routine),
    /// `table_changes`.
    Changes,
    /// `read_files`.
    ReadFiles,
}

/// What binding the table functions of a statement left to clean up and check.
#[derive(Default)]
pub(crate) struct TableCalls {
    /// Temporary functions called.
    pub temporary: Vec<String>,
    /// Providers registered for the statement (dropped with it).
    pub registered: Scratch,
}

/// Providers registered in the scratch schema for one statement: dropped with this, on
/// every path (an error after registering included).
#[derive(Default)]
pub(crate) struct Scratch {
    session: Option<Session>,
    names: Vec<String>,
}

impl Scratch {
    pub(crate) fn add(&mut self, session: &Session, name: String) {
        self.session.get_or_insert_with(|| session.clone());
        self.names.push(name);
    }

    /// The one name registered, no longer dropped by this guard (the caller's to drop).
    pub(crate) fn release(mut self) -> String {
        self.session = None;
        self.names.pop().unwrap_or_default()
    }

    pub(crate) fn absorb(&mut self, mut other: Scratch) {
        if self.session.is_none() {
            self.session = other.session.take();
        }
        self.names.append(&mut other.names);
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(session) = &self.session {
            let schema = session.catalogs.scratch_schema();
            for name in &self.names {
                let _ = schema.deregister_table(name);
            }
        }
    }
}

/// Finds the calls (replacing each with a placeholder), or with [`Calls::Qualify`] names
/// their functions in three parts.
struct FindCalls<'a> {
    session: &'a Session,
    calls: Calls,
    found: Vec<Call>,
    temporary: Vec<String>,
    error: Option<Error>,
}

impl VisitorMut for FindCalls<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        match self.find(factor) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

impl FindCalls<'_> {
    fn find(&mut self, factor: &mut TableFactor) -> Result<()> {
        let TableFactor::Table {
            name,
            args: Some(_),
            version,
            ..
        } = factor
        else {
            return Ok(());
        };
        let parts = name_parts(name)?;
        let own = match parts.as_slice() {
            [one] => super::own_table_function(one),
            _ => None,
        };
        if parts.len() == 1 && own.is_none() && self.session.is_builtin_table_function(&parts[0]) {
            return Ok(());
        }
        if let Some(callee) = own {
            if version.is_some() {
                return Err(Error::Invalid(format!(
                    "{} takes no VERSION or TIMESTAMP AS OF{}",
                    parts[0],
                    if matches!(callee, Callee::Changes) {
                        ": give the versions as its arguments"
                    } else {
                        ""
                    }
                )));
            }
            if self.calls == Calls::Compile {
                self.park(factor, callee);
            }
            return Ok(());
        }
        let Some(routine) = self.session.routine(&parts)? else {
            return Err(self.session.unresolved_routine(name));
        };
        let qualified = routine.qualified.clone();
        if !routine.is_table() {
            return Err(Error::Invalid(format!(
                "{qualified} is a scalar function: call it in an expression (SELECT {qualified}(...)); FROM takes table functions (RETURNS TABLE)"
            )));
        }
        if version.is_some() {
            return Err(Error::Invalid(format!(
                "{qualified} is a table function: it has no versions to travel to"
            )));
        }
        if routine.temporary {
            self.temporary.push(qualified.clone());
        }
        if self.calls == Calls::Qualify {
            *name = qualified_name(&qualified);
            return Ok(());
        }
        self.park(factor, Callee::Sql(routine));
        Ok(())
    }

    /// Take the call out of `factor`, leaving a placeholder for its query.
    fn park(&mut self, factor: &mut TableFactor, callee: Callee) {
        let TableFactor::Table { args, alias, .. } = factor else {
            return;
        };
        let placeholder = format!("{PLACEHOLDER}{}", self.found.len());
        self.found.push(Call {
            callee,
            args: args.take().map(|a| a.args).unwrap_or_default(),
            alias: alias.take(),
        });
        *factor = TableFactor::Table {
            name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(placeholder))]),
            alias: None,
            args: None,
            with_hints: vec![],
            version: None,
            with_ordinality: false,
            partitions: vec![],
            json_path: None,
            sample: None,
            index_hints: vec![],
        };
    }
}

/// Puts each call's query in place of its placeholder.
struct PutCalls(Vec<Option<TableFactor>>);

impl VisitorMut for PutCalls {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table {
            name, args: None, ..
        } = factor
            && let [ObjectNamePart::Identifier(i)] = name.0.as_slice()
            && i.quote_style.is_none()
            && let Some(k) = i.value.strip_prefix(PLACEHOLDER)
            && let Ok(k) = k.parse::<usize>()
            && let Some(query) = self.0.get_mut(k).and_then(Option::take)
        {
            *factor = query;
        }
        ControlFlow::Continue(())
    }
}

/// Replaces a table function's parameters with its arguments. In the arguments of a table
/// function the body calls, a name is a parameter even if a column has it (they cannot read
/// columns).
struct Parameters<'a> {
    function: &'a str,
    /// Lower-cased parameter name, and the expression that stands for it.
    values: Vec<(String, Expr)>,
    columns: &'a HashSet<String>,
    /// How many table function calls' arguments the visit is inside.
    in_call: usize,
    /// Replace parameters in those arguments only.
    calls_only: bool,
}

fn is_call(factor: &TableFactor) -> bool {
    matches!(factor, TableFactor::Table { args: Some(_), .. })
}

impl VisitorMut for Parameters<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if is_call(factor) {
            self.in_call += 1;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if is_call(factor) {
            self.in_call -= 1;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if self.calls_only && self.in_call == 0 {
            return ControlFlow::Continue(());
        }
        let param = match expr {
            Expr::Identifier(i)
                if self.in_call > 0 || !self.columns.contains(&i.value.to_lowercase()) =>
            {
                Some(i.value.to_lowercase())
            }
            Expr::CompoundIdentifier(parts)
                if parts.len() == 2 && parts[0].value.eq_ignore_ascii_case(self.function) =>
            {
                Some(parts[1].value.to_lowercase())
            }
            _ => None,
        };
        if let Some(p) = param
            && let Some((_, value)) = self.values.iter().find(|(n, _)| *n == p)
        {
            *expr = value.clone();
        }
        ControlFlow::Continue(())
    }
}

/// Whether a statement calls a table function that is not built in.
struct AnyCall<'a>(&'a Session, bool);

impl VisitorMut for AnyCall<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table {
            name,
            args: Some(_),
            ..
        } = factor
            && !matches!(name_parts(name).as_deref(), Ok([one])
                if self.0.is_builtin_table_function(one)
                    && super::own_table_function(one).is_none())
        {
            self.1 = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

/// Whether a table function's query passes its parameters to table functions it calls
/// (then it can only be planned once the arguments are known).
pub(crate) fn passes_parameters(routine: &Routine) -> Result<bool> {
    let body = crate::parser::query_text(&routine.definition.body)?;
    let mut marked = body.clone();
    let short = routine.qualified.rsplit('.').next().unwrap_or_default();
    let none = HashSet::new();
    let _ = marked.visit(&mut Parameters {
        function: short,
        values: routine
            .definition
            .params
            .iter()
            .map(|p| {
                (
                    p.name.to_lowercase(),
                    Expr::value(datafusion::sql::sqlparser::ast::Value::Null),
                )
            })
            .collect(),
        columns: &none,
        in_call: 0,
        calls_only: true,
    });
    Ok(marked != body)
}

impl Session {
    /// Whether `node` still calls a table function that is not built in (one a view's query
    /// brought in).
    pub(crate) fn calls_table_functions<T: VisitMut>(&self, node: &mut T) -> bool {
        let mut any = AnyCall(self, false);
        let _ = node.visit(&mut any);
        any.1
    }

    /// Each call of a user table function in `node`'s FROM clauses replaced by its query
    /// (with [`Calls::Qualify`], its name qualified). Returns the temporary functions called.
    pub(crate) async fn bind_table_functions<T: VisitMut>(
        &self,
        node: &mut T,
        calls: Calls,
        stack: &[String],
    ) -> Result<TableCalls> {
        let mut find = FindCalls {
            session: self,
            calls,
            found: vec![],
            temporary: vec![],
            error: None,
        };
        let _ = node.visit(&mut find);
        if let Some(e) = find.error {
            return Err(e);
        }
        let mut out = TableCalls {
            temporary: find.temporary,
            registered: Scratch::default(),
        };
        if find.found.is_empty() {
            return Ok(out);
        }
        let mut queries = Vec::with_capacity(find.found.len());
        for call in find.found {
            let (factor, more) = Box::pin(self.table_call(call, stack)).await?;
            out.temporary.extend(more.temporary);
            out.registered.absorb(more.registered);
            queries.push(Some(factor));
        }
        let _ = node.visit(&mut PutCalls(queries));
        Ok(out)
    }

    /// One call's query, under the call's alias (or the function's name).
    pub(crate) async fn table_call(
        &self,
        call: Call,
        stack: &[String],
    ) -> Result<(TableFactor, TableCalls)> {
        let Call {
            callee,
            args,
            alias,
        } = call;
        let routine = match callee {
            Callee::Changes | Callee::ReadFiles => {
                let (factor, name) = match callee {
                    Callee::Changes => self.table_changes(args, alias).await?,
                    _ => self.read_files(args, alias).await?,
                };
                let mut calls = TableCalls::default();
                calls.registered.add(self, name);
                return Ok((factor, calls));
            }
            Callee::Sql(routine) => routine,
        };
        let name = routine.qualified.clone();
        check_cycle(stack, &name)?;
        let definition = &routine.definition;
        let args = arguments(&routine, args)?;
        let mut body = crate::parser::query_text(&definition.body)?;
        let inner: Vec<String> = stack.iter().cloned().chain([name.clone()]).collect();
        let short = name.rsplit('.').next().unwrap_or(&name).to_string();
        // Each argument is evaluated here, in the caller's scope (its variables, not the
        // body's columns), and goes into the body as a value of the parameter's type.
        let mut values = Vec::with_capacity(args.len());
        for (p, arg) in definition.params.iter().zip(args) {
            let value = self.eval_scalar(&arg).await.map_err(|e| {
                e.context(format!(
                    "{name}: the argument for {} must be a constant expression ({arg})",
                    p.name
                ))
            })?;
            let data_type = super::parse_type(&p.data_type)?;
            let value = crate::engine::zone::scalar_for(
                value,
                &data_type,
                self.ctx().copied_config().options(),
            );
            let value = if value.is_null() {
                datafusion::common::ScalarValue::try_from(&data_type)?
            } else {
                crate::engine::types::cast_value(&value, &data_type).map_err(|e| {
                    Error::class(
                        "DATATYPE_MISMATCH",
                        format!(
                            "{name}: argument {arg} cannot be a {} for parameter {}: {e}",
                            p.data_type, p.name
                        ),
                    )
                })?
            };
            let literal = crate::engine::types::scalar_to_sql(&value);
            let cast = format!("CAST(({literal}) AS {})", planner_type(&p.data_type));
            values.push((p.name.to_lowercase(), crate::parser::expr_text(&cast)?));
        }
        // The columns in scope, with the parameters that table functions in the body take
        // as arguments in place (the body's own table functions are expanded to find them).
        let none = HashSet::new();
        let mut arguments_only = body.clone();
        let _ = arguments_only.visit(&mut Parameters {
            function: &short,
            values: values.clone(),
            columns: &none,
            in_call: 0,
            calls_only: true,
        });
        let columns = self.columns_in_scope(&arguments_only, &inner).await?;
        let _ = body.visit(&mut Parameters {
            function: &short,
            values,
            columns: &columns,
            in_call: 0,
            calls_only: false,
        });
        let calls = self
            .bind_table_functions(&mut body, Calls::Compile, &inner)
            .await?;
        let Returns::Table(declared) = &definition.returns else {
            return Err(Error::Invalid(format!("{name} is a scalar function")));
        };
        let subquery = if declared.is_empty() {
            body
        } else {
            let names: Vec<String> = declared
                .iter()
                .map(|(c, _)| crate::catalog::quote_ident(c))
                .collect();
            let casts: Vec<String> = declared
                .iter()
                .zip(&names)
                .map(|((_, t), c)| format!("CAST({c} AS {}) AS {c}", planner_type(t)))
                .collect();
            crate::parser::query_text(&format!(
                "SELECT {} FROM ({body}) AS __tidemark_body({})",
                casts.join(", "),
                names.join(", ")
            ))?
        };
        let alias = alias.unwrap_or(TableAlias {
            explicit: true,
            name: Ident::new(short),
            columns: vec![],
            at: None,
        });
        let factor = TableFactor::Derived {
            lateral: false,
            subquery: Box::new(subquery),
            alias: Some(alias),
            sample: None,
        };
        Ok((factor, calls))
    }
}

/// A stored SQL type as the engine must read it to mean what Databricks means: TIMESTAMP is an
/// instant (UTC, microseconds), TIMESTAMP_NTZ a zone-less time; these casts are written after
/// the binder's own rewrite of TIMESTAMP has run.
fn planner_type(sql: &str) -> String {
    match super::parse_type(sql) {
        Ok(datafusion::arrow::datatypes::DataType::Timestamp(_, Some(_))) => {
            "TIMESTAMP(6) WITH TIME ZONE".into()
        }
        Ok(datafusion::arrow::datatypes::DataType::Timestamp(_, None)) => "TIMESTAMP(6)".into(),
        _ => sql.to_string(),
    }
}
