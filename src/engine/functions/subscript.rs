//! `array[i]` as Databricks reads it: 0-based, and NULL out of range (a negative index
//! included). DataFusion's own `[]` is 1-based and counts negative indexes from the end, so
//! `arr[0]` would be NULL and `arr[1]` the first element: a silent wrong answer for SQL
//! written for Databricks. Maps keep `map[key]`; struct fields keep `s['field']`.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DFSchema, Result};
use datafusion::functions_nested::expr_fn::array_element;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawFieldAccessExpr};
use datafusion::logical_expr::{ExprSchemable, GetFieldAccess, lit, when};

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
        let is_list = matches!(
            expr.get_type(schema),
            Ok(DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _))
        );
        if !is_list {
            return Ok(PlannerResult::Original(RawFieldAccessExpr {
                expr,
                field_access: GetFieldAccess::ListIndex { key },
            }));
        }
        // DataFusion's position i + 1; 0 (NULL) for a negative i.
        let key = *key;
        let position = when(key.clone().gt_eq(lit(0i64)), key + lit(1i64)).otherwise(lit(0i64))?;
        Ok(PlannerResult::Planned(array_element(expr, position)))
    }
}
