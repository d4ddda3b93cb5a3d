//! Scalar SQL functions: each call is pointed at a DataFusion function compiled from the
//! body (planned once over a batch of the parameters, then evaluated batch by batch), so an
//! argument is evaluated once however often the body names its parameter.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::DFSchema;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::physical_plan::PhysicalExpr;
use datafusion::sql::sqlparser::ast::{
    Expr, ExprWithAlias, FunctionArg, FunctionArgExpr, FunctionArgumentList, FunctionArguments,
    Ident, ObjectName, ObjectNamePart, VisitMut, VisitorMut,
};

use super::{Routine, arguments, check_cycle, parse_type};
use crate::catalog::Returns;
use crate::engine::types::type_name;
use crate::engine::{Session, name_parts};
use crate::error::{Error, Result};

/// What the binder does with a call of a user function.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Calls {
    /// Compile and register the function, and point the call at it (a statement to run).
    Compile,
    /// Name the function in three parts and leave it (a definition to store: a view or a
    /// function's body resolves names as of its creation).
    Qualify,
}

/// Finds the calls of user scalar functions in a statement.
pub(crate) struct ScalarBinder<'a> {
    pub session: &'a Session,
    /// The functions being compiled, outermost first (a call back to one is recursion).
    pub stack: Vec<String>,
    pub calls: Calls,
    /// Temporary functions the statement calls.
    pub temporary: Vec<String>,
    pub error: Option<Error>,
}

impl VisitorMut for ScalarBinder<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Function(f) = expr else {
            return ControlFlow::Continue(());
        };
        match self.bind_call(f) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

impl ScalarBinder<'_> {
    fn bind_call(&mut self, f: &mut datafusion::sql::sqlparser::ast::Function) -> Result<()> {
        let mut parts = name_parts(&f.name)?;
        // A back-quoted `c.s.f` (how a bound call names its compiled function) is resolved
        // like c.s.f: a function dropped since is not called by its old registration.
        if let [one] = parts.as_slice()
            && one.contains('.')
        {
            parts = one.split('.').map(str::to_string).collect();
        }
        if parts.len() == 1 && self.session.is_builtin_function(&parts[0]) {
            return Ok(());
        }
        let Some(routine) = self.session.routine(&parts)? else {
            if parts.len() > 1 {
                return Err(self.session.unresolved_routine(&f.name));
            }
            return Ok(());
        };
        let name = &routine.qualified;
        if routine.is_table() {
            return Err(Error::Invalid(format!(
                "{name} is a table function: call it in FROM (SELECT * FROM {name}(...))"
            )));
        }
        if f.over.is_some()
            || f.filter.is_some()
            || f.null_treatment.is_some()
            || !f.within_group.is_empty()
        {
            return Err(Error::Invalid(format!(
                "{name} is a SQL function: it takes no OVER, FILTER or WITHIN GROUP"
            )));
        }
        if routine.temporary {
            self.temporary.push(name.clone());
        }
        let args = match &f.args {
            FunctionArguments::None => vec![],
            FunctionArguments::List(list)
                if list.duplicate_treatment.is_none() && list.clauses.is_empty() =>
            {
                list.args.clone()
            }
            _ => {
                return Err(Error::Invalid(format!(
                    "{name} is a SQL function: it takes plain arguments (no DISTINCT, ORDER BY or query)"
                )));
            }
        };
        if self.calls == Calls::Qualify {
            f.name = qualified_name(name);
            return Ok(());
        }
        let args = arguments(&routine, args)?;
        check_cycle(&self.stack, name)?;
        let udf = compile(self.session, &routine, &self.stack)?;
        self.session.ctx().register_udf(udf);
        f.name = ObjectName(vec![ObjectNamePart::Identifier(Ident::with_quote(
            '`',
            name.clone(),
        ))]);
        f.args = FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|e| FunctionArg::Unnamed(FunctionArgExpr::Expr(e)))
                .collect(),
            clauses: vec![],
        });
        Ok(())
    }
}

/// `c.s.f` as a three-part name.
pub(super) fn qualified_name(qualified: &str) -> ObjectName {
    ObjectName(
        qualified
            .splitn(3, '.')
            .map(|p| ObjectNamePart::Identifier(Ident::with_quote('`', p)))
            .collect(),
    )
}

/// Compile a scalar function's body over its parameters.
pub(crate) fn compile(session: &Session, routine: &Routine, stack: &[String]) -> Result<ScalarUDF> {
    let definition = &routine.definition;
    let name = &routine.qualified;
    let Returns::Scalar(returns) = &definition.returns else {
        return Err(Error::Invalid(format!("{name} is a table function")));
    };
    // TIMESTAMP parameters and results in the session's zone, as every TIMESTAMP a query
    // reads.
    let zone = crate::engine::zone::session_zone(session.ctx().copied_config().options());
    let in_zone = |t: datafusion::arrow::datatypes::DataType| match &zone {
        Some(z) => crate::engine::zone::relabeled(&t, z).unwrap_or(t),
        None => t,
    };
    let mut fields = Vec::with_capacity(definition.params.len());
    for p in &definition.params {
        fields.push(Field::new(
            p.name.to_lowercase(),
            in_zone(parse_type(&p.data_type)?),
            true,
        ));
    }
    let schema: SchemaRef = Arc::new(Schema::new(fields));
    let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
    let mut body = crate::parser::expr_text(&definition.body)?;
    let short = name.rsplit('.').next().unwrap_or(name).to_string();
    let mut shape = BodyShape {
        function: &short,
        params: &definition.params,
        error: None,
    };
    let _ = body.visit(&mut shape);
    if let Some(e) = shape.error {
        return Err(e.context(format!("function {name}")));
    }
    session.rewrite_syntax(&mut body)?;
    let mut inner = ScalarBinder {
        session,
        stack: stack.iter().cloned().chain([name.clone()]).collect(),
        calls: Calls::Compile,
        temporary: vec![],
        error: None,
    };
    let _ = body.visit(&mut inner);
    if let Some(e) = inner.error {
        return Err(match e {
            // A cycle's message already names every function on the way.
            e @ Error::Class {
                class: "ROUTINE_RECURSION",
                ..
            } => e,
            e => e.context(format!("function {name}")),
        });
    }
    let planned = session
        .ctx()
        .state()
        .create_logical_expr_from_sql_expr(
            ExprWithAlias {
                expr: body,
                alias: None,
            },
            &df_schema,
        )
        .map_err(|e| body_error(routine, e.into()))?;
    // An empty type: the body's own (CREATE FUNCTION without RETURNS).
    let returns = match returns.as_str() {
        "" => datafusion::logical_expr::ExprSchemable::get_type(&planned, &df_schema)?,
        text => in_zone(parse_type(text)?),
    };
    let volatile = definition.not_deterministic || planned.is_volatile();
    let planned = datafusion::prelude::cast(planned, returns.clone());
    // Typed now, so that casts into and out of TIMESTAMP follow the session's zone as a
    // query's do (the body is planned outside a query, without the analyzer's rules).
    let planned = match &zone {
        Some(z) => crate::engine::zone::typed(planned, &df_schema, Some(z))?,
        // Casts as Spark defines them (a TIMESTAMP or DOUBLE as text, ...), as in a query.
        None => crate::engine::functions::spark_casts(planned, &df_schema)?.data,
    };
    let body = session
        .ctx()
        .create_physical_expr(planned, &df_schema)
        .map_err(|e| body_error(routine, e.into()))?;
    Ok(ScalarUDF::new_from_impl(SqlScalarFunction {
        name: name.clone(),
        key: serde_json::to_string(definition).unwrap_or_default(),
        params: definition
            .params
            .iter()
            .map(|p| p.name.clone())
            .zip(schema.fields().iter().map(|f| f.data_type().clone()))
            .collect(),
        returns,
        schema,
        body,
        signature: Signature::user_defined(if volatile {
            Volatility::Volatile
        } else {
            Volatility::Immutable
        }),
    }))
}

/// A body that does not plan: a name that is not a parameter is the likely cause.
fn body_error(routine: &Routine, e: Error) -> Error {
    let text = e.to_string();
    if text.contains("No field named") || text.contains("not found") {
        let params: Vec<&str> = routine
            .definition
            .params
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        return Error::Invalid(format!(
            "function {}: its body names something that is not one of its parameters ({}): {text}",
            routine.qualified,
            if params.is_empty() {
                "it has none".to_string()
            } else {
                params.join(", ")
            }
        ));
    }
    e.context(format!("function {}", routine.qualified))
}

/// Checks a scalar body: no subqueries; `f.p` (a parameter qualified by the function's
/// name) becomes `p`.
struct BodyShape<'a> {
    function: &'a str,
    params: &'a [crate::catalog::Param],
    error: Option<Error>,
}

impl VisitorMut for BodyShape<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match expr {
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => {
                self.error = Some(Error::class(
                    "UNSUPPORTED_FEATURE",
                    "a scalar SQL function's body cannot read tables (a subquery) yet: make it a table function (RETURNS TABLE), or a view",
                ));
                return ControlFlow::Break(());
            }
            Expr::CompoundIdentifier(parts)
                if parts.len() == 2
                    && parts[0].value.eq_ignore_ascii_case(self.function)
                    && self
                        .params
                        .iter()
                        .any(|p| p.name.eq_ignore_ascii_case(&parts[1].value)) =>
            {
                *expr = Expr::Identifier(parts[1].clone());
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// A compiled scalar SQL function.
#[derive(Debug)]
struct SqlScalarFunction {
    name: String,
    /// The definition it was compiled from: two are the same function when these are equal.
    key: String,
    params: Vec<(String, DataType)>,
    returns: DataType,
    schema: SchemaRef,
    body: Arc<dyn PhysicalExpr>,
    signature: Signature,
}

impl PartialEq for SqlScalarFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.key == other.key
    }
}

impl Eq for SqlScalarFunction {}

impl std::hash::Hash for SqlScalarFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        self.key.hash(state);
    }
}

impl ScalarUDFImpl for SqlScalarFunction {
    fn name(&self) -> &str {
        &self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(self.returns.clone())
    }

    /// Each argument cast to its parameter's type where Databricks casts implicitly
    /// (numbers to numbers, strings to and from simple types, dates to timestamps); any
    /// other type is an error naming the parameter.
    fn coerce_types(&self, args: &[DataType]) -> datafusion::error::Result<Vec<DataType>> {
        if args.len() != self.params.len() {
            return datafusion::common::plan_err!(
                "function {} takes {} argument(s), found {}",
                self.name,
                self.params.len(),
                args.len()
            );
        }
        args.iter()
            .zip(&self.params)
            .enumerate()
            .map(|(i, (from, (param, to)))| {
                if implicit(from, to) {
                    Ok(to.clone())
                } else {
                    datafusion::common::plan_err!(
                        "[DATATYPE_MISMATCH] function {}: argument {} ({param} {}) cannot take a {} value; CAST it",
                        self.name,
                        i + 1,
                        type_name(to),
                        type_name(from)
                    )
                }
            })
            .collect()
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let n = args.number_rows;
        let columns = args
            .args
            .iter()
            .map(|a| a.to_array(n))
            .collect::<datafusion::error::Result<Vec<ArrayRef>>>()?;
        let batch = RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(n)),
        )?;
        self.body.evaluate(&batch)
    }
}

/// Whether Databricks passes a `from` value to a `to` parameter without an explicit CAST.
fn implicit(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    let simple = |t: &DataType| !t.is_nested();
    let numeric = |t: &DataType| t.is_numeric();
    let text = |t: &DataType| matches!(t, Utf8 | LargeUtf8 | Utf8View);
    let integral = |t: &DataType| t.is_integer();
    match (from, to) {
        (a, b) if a == b => true,
        (Null, _) => true,
        (Dictionary(_, v), to) => implicit(v, to),
        // A fraction is not dropped without a CAST (1.5 into an INT parameter).
        (a, b) if numeric(a) && numeric(b) => b.is_floating() || !integral(b) || integral(a),
        (a, b) if text(a) && simple(b) => true,
        (a, b) if simple(a) && text(b) => true,
        (Date32 | Date64 | Timestamp(_, _), Timestamp(_, _)) => true,
        (List(a) | LargeList(a), List(b) | LargeList(b)) => implicit(a.data_type(), b.data_type()),
        (Struct(a), Struct(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b.iter())
                    .all(|(x, y)| implicit(x.data_type(), y.data_type()))
        }
        _ => false,
    }
}
