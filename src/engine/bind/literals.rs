//! Literals and casts as Databricks reads them, rewritten before a statement is bound:
//! exponent and very long numbers are DOUBLEs, TIMESTAMP is an instant in UTC.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Expr, ObjectName, Value, VisitorMut};

/// Numeric literals with an exponent (`1e3`, `2.5E-50`) or more than 38 digits are DOUBLEs, as
/// in Databricks: the session reads literals with a point as exact DECIMALs, and DataFusion
/// would read these as decimals too (`1e3` with a negative scale, `1e-100` not at all).
pub(super) struct DoubleLiterals;

impl VisitorMut for DoubleLiterals {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Value(v) = expr
            && let Value::Number(n, _) = &v.value
            && (n.contains(['e', 'E']) || n.chars().filter(|c| c.is_ascii_digit()).count() > 38)
        {
            *expr = Expr::Cast {
                kind: datafusion::sql::sqlparser::ast::CastKind::Cast,
                expr: Box::new(Expr::Value(Value::SingleQuotedString(n.clone()).into())),
                data_type: datafusion::sql::sqlparser::ast::DataType::Double(
                    datafusion::sql::sqlparser::ast::ExactNumberInfo::None,
                ),
                array: false,
                format: None,
            };
        }
        ControlFlow::Continue(())
    }
}

/// `TIMESTAMP` in casts and typed literals (`CAST(x AS TIMESTAMP)`, `x::timestamp`,
/// `TIMESTAMP '2024-01-01 10:00'`) is Databricks' TIMESTAMP: an instant, in UTC (the session
/// zone), at microseconds, the type of tidemark's TIMESTAMP columns. The engine read it as
/// a zone-less nanosecond time. `TIMESTAMP_NTZ` (which the engine did not know) is the
/// zone-less one, at microseconds.
pub(super) struct DatabricksTimestamps;

fn databricks_timestamp(t: &mut datafusion::sql::sqlparser::ast::DataType) {
    use datafusion::sql::sqlparser::ast::{DataType as T, TimezoneInfo};
    let ntz = |name: &ObjectName| name.to_string().eq_ignore_ascii_case("TIMESTAMP_NTZ");
    *t = match t {
        T::Timestamp(_, TimezoneInfo::None | TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => {
            T::Timestamp(Some(6), TimezoneInfo::WithTimeZone)
        }
        T::Timestamp(_, TimezoneInfo::WithoutTimeZone) | T::TimestampNtz(_) => {
            T::Timestamp(Some(6), TimezoneInfo::WithoutTimeZone)
        }
        T::Custom(name, args) if args.is_empty() && ntz(name) => {
            T::Timestamp(Some(6), TimezoneInfo::WithoutTimeZone)
        }
        _ => return,
    };
}

impl VisitorMut for DatabricksTimestamps {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        use datafusion::sql::sqlparser::ast::{CastKind, DataType as T, TimezoneInfo};
        match expr {
            // A cast to TIMESTAMP reads numbers as seconds (the engine's cast would read them
            // as its own unit): the session's function does the cast.
            Expr::Cast {
                kind,
                expr: inner,
                data_type:
                    T::Timestamp(_, TimezoneInfo::None | TimezoneInfo::WithTimeZone | TimezoneInfo::Tz),
                format: None,
                ..
            } => {
                let function = match kind {
                    CastKind::TryCast | CastKind::SafeCast => {
                        crate::engine::functions::TRY_TO_TIMESTAMP
                    }
                    CastKind::Cast | CastKind::DoubleColon => {
                        crate::engine::functions::TO_TIMESTAMP
                    }
                };
                let call = format!("{function}(NULL)");
                if let Ok(Expr::Function(mut f)) = crate::parser::expr_text(&call) {
                    if let datafusion::sql::sqlparser::ast::FunctionArguments::List(list) =
                        &mut f.args
                    {
                        list.args = vec![datafusion::sql::sqlparser::ast::FunctionArg::Unnamed(
                            datafusion::sql::sqlparser::ast::FunctionArgExpr::Expr(
                                inner.as_ref().clone(),
                            ),
                        )];
                    }
                    *expr = Expr::Function(f);
                }
            }
            // A cast to a type with a MAP in it, which the engine's SQL types lack: Arrow's
            // cast to the same type, with maps whose keys became equal refused.
            Expr::Cast {
                kind: CastKind::Cast | CastKind::DoubleColon,
                expr: inner,
                data_type,
                format: None,
                ..
            } if has_map(data_type) => {
                if let Ok(arrow) = crate::engine::types::sql_to_arrow(data_type) {
                    let call = format!(
                        "{}(NULL, {})",
                        crate::engine::functions::CAST_MAP,
                        crate::engine::spark::quoted(&arrow.to_string())
                    );
                    if let Ok(Expr::Function(mut f)) = crate::parser::expr_text(&call)
                        && let datafusion::sql::sqlparser::ast::FunctionArguments::List(list) =
                            &mut f.args
                    {
                        list.args[0] = datafusion::sql::sqlparser::ast::FunctionArg::Unnamed(
                            datafusion::sql::sqlparser::ast::FunctionArgExpr::Expr(
                                inner.as_ref().clone(),
                            ),
                        );
                        *expr = Expr::Function(f);
                    }
                }
            }
            Expr::Cast { data_type, .. } => databricks_timestamp(data_type),
            Expr::TypedString(t) => databricks_timestamp(&mut t.data_type),
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Whether a SQL type has a MAP in it.
fn has_map(t: &datafusion::sql::sqlparser::ast::DataType) -> bool {
    use datafusion::sql::sqlparser::ast::{ArrayElemTypeDef as A, DataType as T};
    match t {
        T::Map(_, _) => true,
        T::Array(A::AngleBracket(inner) | A::Parenthesis(inner) | A::SquareBracket(inner, _)) => {
            has_map(inner)
        }
        T::Struct(fields, _) => fields.iter().any(|f| has_map(&f.field_type)),
        _ => false,
    }
}
