//! `array[i]` as Databricks SQL reads it: 0-based, and `[INVALID_ARRAY_INDEX]` out of range (a
//! negative index included). DataFusion's own `[]` is 1-based and counts negative indexes from
//! the end, so `arr[0]` would be NULL and `arr[1]` the first element: a silent wrong answer for
//! SQL written for Databricks. Maps keep `map[key]`; struct fields keep `s['field']`.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DFSchema, Result, plan_err};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawFieldAccessExpr};
use datafusion::logical_expr::{Expr, ExprSchemable, GetFieldAccess, ScalarUDF};

/// Plans `list[i]` 0-based; everything else is left to DataFusion's planners.
#[derive(Debug)]
pub struct ZeroBasedSubscript;

impl ExprPlanner for ZeroBasedSubscript {
    fn plan_field_access(
        &self,
        access: RawFieldAccessExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawFieldAccessExpr>> {
        let RawFieldAccessExpr { expr, field_access } = access;
        let GetFieldAccess::ListIndex { key } = field_access else {
            return Ok(PlannerResult::Original(RawFieldAccessExpr {
                expr,
                field_access,
            }));
        };
        match expr.get_type(schema) {
            Ok(DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _)) => {
                let udf = std::sync::Arc::new(ScalarUDF::from(super::ElementAt::new(true)));
                Ok(PlannerResult::Planned(Expr::ScalarFunction(
                    ScalarFunction::new_udf(udf, vec![expr, *key]),
                )))
            }
            Ok(_) => Ok(PlannerResult::Original(RawFieldAccessExpr {
                expr,
                field_access: GetFieldAccess::ListIndex { key },
            })),
            // Never DataFusion's 1-based reading by default.
            Err(e) => plan_err!("cannot tell whether {expr}[{key}] indexes an array or a map: {e}"),
        }
    }
}
