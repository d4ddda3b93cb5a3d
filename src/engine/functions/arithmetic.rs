//! Arithmetic as Databricks does it (ANSI mode, its default). DataFusion adds, subtracts and
//! multiplies integers with wrapping arithmetic (`127Y + 1Y` was `-128`), divides integers
//! into integers (`3 / 2` was `1`, Databricks says `1.5`) and kept a DECIMAL result that
//! outgrew its precision (`99999999999999999999999999999999999999 + 1`). SQL's operators
//! between numbers are planned as checked functions instead ([`AnsiArithmetic`]):
//!
//! * integer and DECIMAL `+ - *` fail with `[ARITHMETIC_OVERFLOW]` instead of wrapping, and a
//!   DECIMAL result beyond its type's precision with `[NUMERIC_VALUE_OUT_OF_RANGE]`;
//! * integer `/` divides as DOUBLE, and a division of numbers by zero fails with
//!   `[DIVIDE_BY_ZERO]`.
//!
//! `try_add`, `try_subtract`, `try_multiply` and `try_divide` are the same functions with NULL
//! where the operator fails. The checked operators keep the operator's column name (`a + b`).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, new_null_array};
use datafusion::arrow::compute::kernels::cmp::eq;
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::{DFSchema, DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, Operator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr as PhysicalBinary, Column};
use datafusion::sql::sqlparser::ast::BinaryOperator;

/// The four operators with a checked form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Add,
    Subtract,
    Multiply,
    Divide,
    /// Integer division, truncating (what `/` did between integers; tidemark's own SQL).
    IntDivide,
}

impl Op {
    fn operator(self) -> Operator {
        match self {
            Op::Add => Operator::Plus,
            Op::Subtract => Operator::Minus,
            Op::Multiply => Operator::Multiply,
            Op::Divide | Op::IntDivide => Operator::Divide,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Subtract => "subtract",
            Op::Multiply => "multiply",
            Op::Divide | Op::IntDivide => "divide",
        }
    }
}

/// `a <op> b` that fails where Databricks fails (or, for `try_*`, is NULL there).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Checked {
    op: Op,
    /// `try_*`: NULL instead of an error.
    try_: bool,
    name: String,
    signature: Signature,
}

impl Checked {
    fn new(op: Op, try_: bool) -> Self {
        let name = if op == Op::IntDivide {
            INT_DIVIDE.to_string()
        } else if try_ {
            format!("try_{}", op.word())
        } else {
            format!("__checked_{}", op.word())
        };
        Checked {
            op,
            try_,
            name,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// The operand types DataFusion's operator would see, with integers divided as DOUBLE.
    fn operands(&self, l: &DataType, r: &DataType) -> Result<(DataType, DataType)> {
        if self.op == Op::IntDivide {
            if !(integer(l) || l.is_null()) || !(integer(r) || r.is_null()) {
                return Err(DataFusionError::Plan(format!(
                    "{INT_DIVIDE} takes integers, not {l} and {r}"
                )));
            }
            return Ok((DataType::Int64, DataType::Int64));
        }
        if self.op == Op::Divide && integer(l) && integer(r) {
            return Ok((DataType::Float64, DataType::Float64));
        }
        let (l, r) = BinaryTypeCoercer::new(l, &self.op.operator(), r).get_input_types()?;
        Ok((l, r))
    }
}

/// `try_add`, `try_subtract`, `try_multiply` and `try_divide`, and [`INT_DIVIDE`].
pub fn udfs() -> Vec<ScalarUDF> {
    [Op::Add, Op::Subtract, Op::Multiply, Op::Divide]
        .into_iter()
        .map(|op| ScalarUDF::from(Checked::new(op, true)))
        .chain([ScalarUDF::from(Checked::new(Op::IntDivide, false))])
        .collect()
}

/// `__int_divide(a, b)`: integers divided as integers, truncating (for SQL tidemark writes,
/// such as whole seconds from microseconds); a zero divisor fails.
pub const INT_DIVIDE: &str = "__int_divide";

fn integer(t: &DataType) -> bool {
    t.is_integer()
}

fn checked_result(t: &DataType) -> bool {
    t.is_integer() || matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..))
}

fn float(t: &DataType) -> bool {
    matches!(t, DataType::Float16 | DataType::Float32 | DataType::Float64)
}

impl ScalarUDFImpl for Checked {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The operator's own column name (`a + b`) for the checked operators; `try_add(a, b)`.
    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        let args: Vec<String> = args.iter().map(|a| a.schema_name().to_string()).collect();
        Ok(if self.try_ || self.op == Op::IntDivide {
            format!("{}({})", self.name, args.join(", "))
        } else {
            format!("{} {} {}", args[0], self.op.operator(), args[1])
        })
    }

    fn coerce_types(&self, types: &[DataType]) -> Result<Vec<DataType>> {
        let [l, r] = types else {
            return Err(DataFusionError::Plan(format!(
                "[WRONG_NUM_ARGS] {}() takes two arguments, got {}",
                self.name,
                types.len()
            )));
        };
        let (l, r) = self.operands(l, r).map_err(|e| {
            DataFusionError::Plan(format!(
                "[DATATYPE_MISMATCH] {}() cannot {} {l} and {r}: {e}",
                self.name,
                self.op.word()
            ))
        })?;
        Ok(vec![l, r])
    }

    fn return_type(&self, types: &[DataType]) -> Result<DataType> {
        let (l, r) = self.operands(&types[0], &types[1])?;
        BinaryTypeCoercer::new(&l, &self.op.operator(), &r).get_result_type()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let l = args.args[0].to_array(n)?;
        let r = args.args[1].to_array(n)?;
        let out = args.return_field.data_type().clone();
        let result = match self.apply(&l, &r, &out) {
            Ok(a) => a,
            Err(e) if !self.try_ => return Err(e),
            // Row by row, to find the rows that fail: they become NULL.
            Err(_) => {
                let rows = (0..l.len())
                    .map(|i| {
                        self.apply(&l.slice(i, 1), &r.slice(i, 1), &out)
                            .unwrap_or_else(|_| new_null_array(&out, 1))
                    })
                    .collect::<Vec<_>>();
                let rows: Vec<&dyn Array> = rows.iter().map(|a| a.as_ref()).collect();
                if rows.is_empty() {
                    new_null_array(&out, 0)
                } else {
                    datafusion::arrow::compute::concat(&rows)?
                }
            }
        };
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?)
        } else {
            ColumnarValue::Array(result)
        })
    }
}

impl Checked {
    /// The operator over two equally long arrays, or the Databricks error.
    fn apply(&self, l: &ArrayRef, r: &ArrayRef, out: &DataType) -> Result<ArrayRef> {
        if matches!(self.op, Op::Divide | Op::IntDivide) && r.data_type().is_numeric() {
            let zero = ScalarValue::new_zero(r.data_type())?.to_scalar()?;
            let zeros = eq(r, &zero)?;
            // A zero divisor fails only where the dividend is not NULL, as in Databricks.
            if (0..zeros.len()).any(|i| zeros.is_valid(i) && zeros.value(i) && l.is_valid(i)) {
                return Err(DataFusionError::Execution(
                    "[DIVIDE_BY_ZERO] Division by zero. Use try_divide to get NULL instead".into(),
                ));
            }
        }
        let (l, r) = if l.data_type() == r.data_type() && float(l.data_type()) {
            (l.clone(), r.clone())
        } else {
            let (lt, rt) = self.operands(l.data_type(), r.data_type())?;
            (
                datafusion::arrow::compute::cast(l, &lt)?,
                datafusion::arrow::compute::cast(r, &rt)?,
            )
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("l", l.data_type().clone(), true),
            Field::new("r", r.data_type().clone(), true),
        ]));
        let batch = RecordBatch::try_new(schema.clone(), vec![l.clone(), r.clone()])?;
        let expr = PhysicalBinary::new(
            Arc::new(Column::new("l", 0)),
            self.op.operator(),
            Arc::new(Column::new("r", 1)),
        )
        .with_fail_on_overflow(true);
        let result = expr
            .evaluate(&batch)
            .map_err(|e| self.overflow(e, &l, &r))?
            .into_array(batch.num_rows())?;
        let result = if result.data_type() == out {
            result
        } else {
            datafusion::arrow::compute::cast(&result, out)?
        };
        if let DataType::Decimal128(precision, scale) = out {
            let values = result.as_primitive::<Decimal128Type>();
            if values.validate_decimal_precision(*precision).is_err() {
                return Err(DataFusionError::Execution(format!(
                    "[NUMERIC_VALUE_OUT_OF_RANGE] the result of {} does not fit DECIMAL({precision}, {scale}): cast an operand to a wider DECIMAL or DOUBLE, or use try_{} to get NULL instead",
                    self.op.word(),
                    self.op.word()
                )));
            }
        }
        Ok(result)
    }

    fn overflow(&self, e: DataFusionError, l: &ArrayRef, _r: &ArrayRef) -> DataFusionError {
        let text = e.to_string();
        if text.contains("Overflow") || text.contains("overflow") {
            DataFusionError::Execution(format!(
                "[ARITHMETIC_OVERFLOW] {} overflows {}: cast an operand to a wider type, or use try_{} to get NULL instead",
                self.op.word(),
                crate::engine::types::type_name(l.data_type()),
                self.op.word()
            ))
        } else {
            e
        }
    }
}

/// Plans `+ - * /` between numbers as the checked functions, at SQL planning, so that
/// types (`3 / 2` is a DOUBLE) are known to everything planned above them.
#[derive(Debug)]
pub struct AnsiArithmetic {
    checked: std::collections::HashMap<Op, Arc<ScalarUDF>>,
}

impl Default for AnsiArithmetic {
    fn default() -> Self {
        Self::new()
    }
}

impl AnsiArithmetic {
    pub fn new() -> Self {
        AnsiArithmetic {
            checked: [Op::Add, Op::Subtract, Op::Multiply, Op::Divide]
                .into_iter()
                .map(|op| (op, Arc::new(ScalarUDF::from(Checked::new(op, false)))))
                .collect(),
        }
    }
}

/// A type the checked operators take: integers and DECIMALs (and NULL); for division, any
/// number.
fn checked_operand(op: Op, t: &DataType) -> bool {
    checked_result(t) || t.is_null() || (op == Op::Divide && float(t))
}

impl ExprPlanner for AnsiArithmetic {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        let op = match expr.op {
            BinaryOperator::Plus => Op::Add,
            BinaryOperator::Minus => Op::Subtract,
            BinaryOperator::Multiply => Op::Multiply,
            BinaryOperator::Divide => Op::Divide,
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let (Ok(lt), Ok(rt)) = (expr.left.get_type(schema), expr.right.get_type(schema)) else {
            return Ok(PlannerResult::Original(expr));
        };
        if !(checked_operand(op, &lt) && checked_operand(op, &rt)) || (lt.is_null() && rt.is_null())
        {
            return Ok(PlannerResult::Original(expr));
        }
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(self.checked[&op].clone(), vec![expr.left, expr.right]),
        )))
    }
}
