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

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, new_null_array};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Field, Schema, i256};
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
            format!("__{}", op.word())
        };
        Checked {
            op,
            try_,
            name,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// The operand types the operator computes in: Spark's. DECIMAL with DECIMAL or an
    /// integer is DECIMAL arithmetic (an integer as the DECIMAL that holds its type); `/`
    /// between integers, floats and NULLs is DOUBLE division; the rest is DataFusion's.
    fn operands(&self, l: &DataType, r: &DataType) -> Result<(DataType, DataType)> {
        if self.op == Op::IntDivide {
            if !(integer(l) || l.is_null()) || !(integer(r) || r.is_null()) {
                return Err(DataFusionError::Plan(format!(
                    "{INT_DIVIDE} takes integers, not {l} and {r}"
                )));
            }
            return Ok((DataType::Int64, DataType::Int64));
        }
        if let Some((l, r)) = decimal_operands(l, r) {
            return Ok((l, r));
        }
        let inexact = |t: &DataType| integer(t) || float(t) || t.is_null() || decimal(t);
        if self.op == Op::Divide && inexact(l) && inexact(r) {
            return Ok((DataType::Float64, DataType::Float64));
        }
        let (l, r) = BinaryTypeCoercer::new(l, &self.op.operator(), r).get_input_types()?;
        Ok((l, r))
    }
}

fn decimal(t: &DataType) -> bool {
    matches!(t, DataType::Decimal128(..))
}

/// The DECIMAL that holds every value of an integer type (Spark's `DecimalType.forType`).
fn decimal_of(t: &DataType) -> Option<(u8, i8)> {
    Some(match t {
        DataType::Decimal128(p, s) => (*p, *s),
        DataType::Int8 | DataType::UInt8 => (3, 0),
        DataType::Int16 | DataType::UInt16 => (5, 0),
        DataType::Int32 | DataType::UInt32 => (10, 0),
        DataType::Int64 => (20, 0),
        DataType::UInt64 => (20, 0),
        _ => return None,
    })
}

/// Both operands as DECIMALs, when one is a DECIMAL and the other a DECIMAL, an integer or
/// NULL.
fn decimal_operands(l: &DataType, r: &DataType) -> Option<(DataType, DataType)> {
    if !(decimal(l) || decimal(r)) {
        return None;
    }
    let as_decimal = |t: &DataType, other: &DataType| -> Option<DataType> {
        let (p, s) = if t.is_null() {
            decimal_of(other)?
        } else {
            decimal_of(t)?
        };
        Some(DataType::Decimal128(p, s))
    };
    Some((as_decimal(l, r)?, as_decimal(r, l)?))
}

/// Spark's result type of a DECIMAL operation (with `allowPrecisionLoss`, its default): the
/// exact type when it fits 38 digits, else 38 digits keeping the integer part and at least 6
/// (or the exact scale, if smaller) digits of fraction.
fn spark_decimal(op: Op, (p1, s1): (u8, i8), (p2, s2): (u8, i8)) -> (u8, i8) {
    let (p1, s1, p2, s2) = (p1 as i32, s1 as i32, p2 as i32, s2 as i32);
    let (p, s) = match op {
        Op::Add | Op::Subtract => {
            let s = s1.max(s2);
            ((p1 - s1).max(p2 - s2) + s + 1, s)
        }
        Op::Multiply => (p1 + p2 + 1, s1 + s2),
        Op::Divide | Op::IntDivide => {
            let s = 6.max(s1 + p2 + 1);
            (p1 - s1 + s2 + s, s)
        }
    };
    if p <= 38 {
        (p as u8, s as i8)
    } else {
        let whole = p - s;
        (38, (38 - whole).max(s.min(6)) as i8)
    }
}

fn ten(n: i32) -> i256 {
    i256::from_i128(10).wrapping_pow(n as u32)
}

/// `n / d` rounded half away from zero (Spark's HALF_UP); None when `d` is 0.
fn divide_half_up(n: i256, d: i256) -> Option<i256> {
    let q = n.checked_div(d)?;
    let r = n.checked_rem(d)?;
    let twice = r.wrapping_abs().checked_mul(i256::from_i128(2))?;
    Some(if twice >= d.wrapping_abs() {
        if n.is_negative() != d.is_negative() {
            q.wrapping_sub(i256::ONE)
        } else {
            q.wrapping_add(i256::ONE)
        }
    } else {
        q
    })
}

/// `v` at scale `from` as scale `to`, rounding half up.
fn rescale(v: i256, from: i32, to: i32) -> Option<i256> {
    if to >= from {
        v.checked_mul(ten(to - from))
    } else {
        divide_half_up(v, ten(from - to))
    }
}

/// One DECIMAL operation on unscaled values at scales `s1`, `s2`, as scale `s` (None: out of
/// range or a division by zero).
fn decimal_op(op: Op, a: i128, s1: i32, b: i128, s2: i32, s: i32) -> Option<i256> {
    let (a, b) = (i256::from_i128(a), i256::from_i128(b));
    match op {
        Op::Add | Op::Subtract => {
            let common = s1.max(s2);
            let (a, b) = (rescale(a, s1, common)?, rescale(b, s2, common)?);
            let v = if op == Op::Add {
                a.checked_add(b)?
            } else {
                a.checked_sub(b)?
            };
            rescale(v, common, s)
        }
        Op::Multiply => rescale(a.checked_mul(b)?, s1 + s2, s),
        Op::Divide | Op::IntDivide => {
            // a / b at scale s: a * 10^(s - s1 + s2) / b.
            let k = s - s1 + s2;
            if k >= 0 {
                divide_half_up(a.checked_mul(ten(k))?, b)
            } else {
                divide_half_up(a, b.checked_mul(ten(-k))?)
            }
        }
    }
}

/// `try_add`, `try_subtract`, `try_multiply` and `try_divide`, and [`INT_DIVIDE`].
pub fn udfs() -> Vec<ScalarUDF> {
    [Op::Add, Op::Subtract, Op::Multiply, Op::Divide]
        .into_iter()
        .flat_map(|op| [Checked::new(op, true), Checked::new(op, false)])
        .chain([Checked::new(Op::IntDivide, false)])
        .map(ScalarUDF::from)
        .chain([ScalarUDF::from(DecimalDiv::new())])
        .collect()
}

/// `__decimal_div(a, b)`: Spark's `a div b` of DECIMALs (an integer beside one is the DECIMAL
/// of its type), exact: both brought to one scale in 256 bits and divided, truncating toward
/// zero. A zero divisor is `[DIVIDE_BY_ZERO]`, a quotient past BIGINT `[ARITHMETIC_OVERFLOW]`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct DecimalDiv {
    signature: Signature,
}

const DECIMAL_DIV: &str = "__decimal_div";

impl DecimalDiv {
    fn new() -> Self {
        DecimalDiv {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

/// An exact operand of `div` as a DECIMAL128 (integers as the DECIMAL of their type).
fn as_decimal(t: &DataType) -> Result<DataType> {
    Ok(match t {
        DataType::Decimal128(..) => t.clone(),
        DataType::Int8 | DataType::UInt8 => DataType::Decimal128(3, 0),
        DataType::Int16 | DataType::UInt16 => DataType::Decimal128(5, 0),
        DataType::Int32 | DataType::UInt32 => DataType::Decimal128(10, 0),
        DataType::Int64 | DataType::UInt64 | DataType::Null => DataType::Decimal128(20, 0),
        other => {
            return Err(DataFusionError::Plan(format!(
                "[DATATYPE_MISMATCH] div takes numbers, not {other}"
            )));
        }
    })
}

impl ScalarUDFImpl for DecimalDiv {
    fn name(&self) -> &str {
        DECIMAL_DIV
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        let args: Vec<String> = args.iter().map(|a| a.schema_name().to_string()).collect();
        Ok(args.join(" div "))
    }
    fn coerce_types(&self, types: &[DataType]) -> Result<Vec<DataType>> {
        types.iter().map(as_decimal).collect()
    }
    fn return_type(&self, _types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let (a, b) = (args.args[0].to_array(n)?, args.args[1].to_array(n)?);
        let (DataType::Decimal128(_, sa), DataType::Decimal128(_, sb)) =
            (a.data_type().clone(), b.data_type().clone())
        else {
            return Err(DataFusionError::Internal(format!(
                "{DECIMAL_DIV} of {} and {}",
                a.data_type(),
                b.data_type()
            )));
        };
        let (a, b) = (
            a.as_primitive::<Decimal128Type>(),
            b.as_primitive::<Decimal128Type>(),
        );
        let scale = sa.max(sb) as i32;
        let (fa, fb) = (ten(scale - sa as i32), ten(scale - sb as i32));
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            if a.is_null(i) || b.is_null(i) {
                out.push(None);
                continue;
            }
            let x = i256::from_i128(a.value(i)).wrapping_mul(fa);
            let y = i256::from_i128(b.value(i)).wrapping_mul(fb);
            if y == i256::ZERO {
                return Err(DataFusionError::Execution(
                    "[DIVIDE_BY_ZERO] Division by zero. Use try_divide to get NULL instead".into(),
                ));
            }
            let q = x.wrapping_div(y);
            let Some(q) = q.to_i128().and_then(|q| i64::try_from(q).ok()) else {
                return Err(DataFusionError::Execution(
                    "[ARITHMETIC_OVERFLOW] div: the quotient is out of the BIGINT range".into(),
                ));
            };
            out.push(Some(q));
        }
        Ok(ColumnarValue::Array(Arc::new(
            datafusion::arrow::array::Int64Array::from(out),
        )))
    }
}

/// `a + b`, `a - b`, `a * b` and `a / b` in `e` as calls of the checked operators by name
/// (`__add(a, b)`), for SQL that another planner reads: delta-rs plans MERGE's conditions
/// and values itself, with DataFusion's operators.
pub fn checked_calls<V: datafusion::sql::sqlparser::ast::VisitMut>(e: &mut V) {
    use datafusion::sql::sqlparser::ast::{
        Expr as Sql, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList,
        FunctionArguments, Ident, ObjectName, ObjectNamePart,
    };
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(e, |e| {
        if let Sql::BinaryOp { left, op, right } = e {
            let word = match op {
                BinaryOperator::Plus => Op::Add.word(),
                BinaryOperator::Minus => Op::Subtract.word(),
                BinaryOperator::Multiply => Op::Multiply.word(),
                BinaryOperator::Divide => Op::Divide.word(),
                _ => return std::ops::ControlFlow::<()>::Continue(()),
            };
            let arg = |x: &Sql| FunctionArg::Unnamed(FunctionArgExpr::Expr(x.clone()));
            // An integer literal operand is typed by its digits next to a DECIMAL, as the
            // planner types it (a third argument says which operand, and its digits).
            let digits = |x: &Sql| match x {
                Sql::Value(v) => match &v.value {
                    datafusion::sql::sqlparser::ast::Value::Number(n, _)
                        if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
                    {
                        Some(n.trim_start_matches('0').len().max(1))
                    }
                    _ => None,
                },
                _ => None,
            };
            let mut args = vec![arg(left), arg(right)];
            let hint = match (digits(left), digits(right)) {
                (Some(d), None) => Some(format!("L{d}")),
                (None, Some(d)) => Some(format!("R{d}")),
                _ => None,
            };
            if let Some(hint) = hint {
                args.push(FunctionArg::Unnamed(FunctionArgExpr::Expr(Sql::Value(
                    datafusion::sql::sqlparser::ast::Value::SingleQuotedString(hint).into(),
                ))));
            }
            *e = Sql::Function(Function {
                name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(format!(
                    "__{word}"
                )))]),
                uses_odbc_syntax: false,
                parameters: FunctionArguments::None,
                args: FunctionArguments::List(FunctionArgumentList {
                    duplicate_treatment: None,
                    args,
                    clauses: vec![],
                }),
                filter: None,
                null_treatment: None,
                over: None,
                within_group: vec![],
            });
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
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
        Ok(match args.as_slice() {
            [l, r, ..] if !(self.try_ || self.op == Op::IntDivide) => {
                format!("{l} {} {r}", self.op.operator())
            }
            _ => format!("{}({})", self.name, args.join(", ")),
        })
    }

    fn coerce_types(&self, types: &[DataType]) -> Result<Vec<DataType>> {
        let (l, r, hinted) = match types {
            [l, r] => (l, r, false),
            [l, r, DataType::Utf8] if !self.try_ => (l, r, true),
            _ => (&DataType::Null, &DataType::Null, false),
        };
        if types.len() != 2 && !hinted {
            return Err(DataFusionError::Plan(format!(
                "[WRONG_NUM_ARGS] {}() takes two arguments, got {}",
                self.name,
                types.len()
            )));
        }
        let mut out = self.coerce_pair(l, r)?;
        if hinted {
            // The literal's own type stays: its digits (the hint) make its DECIMAL.
            for (given, coerced) in [l, r].into_iter().zip(out.iter_mut()) {
                if integer(given) && decimal(coerced) {
                    *coerced = given.clone();
                }
            }
            out.push(DataType::Utf8);
        }
        Ok(out)
    }

    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> Result<datafusion::arrow::datatypes::FieldRef> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let hint = literal_hint(args.scalar_arguments.get(2).copied().flatten());
        let (l, r) = hinted_types(&types[0], &types[1], hint);
        Ok(Arc::new(Field::new(
            self.name(),
            self.result_type(&[l, r])?,
            true,
        )))
    }

    fn return_type(&self, types: &[DataType]) -> Result<DataType> {
        self.result_type(types)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        self.invoke(args)
    }
}

/// The third argument of a checked operator MERGE calls: which operand is an integer
/// literal (`L`/`R`) and its digits.
fn literal_hint(v: Option<&ScalarValue>) -> Option<(bool, u8)> {
    let ScalarValue::Utf8(Some(h)) = v? else {
        return None;
    };
    let digits = h.get(1..)?.parse::<u8>().ok()?.clamp(1, 38);
    match h.as_bytes().first()? {
        b'L' => Some((true, digits)),
        b'R' => Some((false, digits)),
        _ => None,
    }
}

/// The operand types with a hinted integer literal as the DECIMAL of its digits, when the
/// other operand is a DECIMAL.
fn hinted_types(l: &DataType, r: &DataType, hint: Option<(bool, u8)>) -> (DataType, DataType) {
    match hint {
        Some((true, d)) if integer(l) && decimal(r) => (DataType::Decimal128(d, 0), r.clone()),
        Some((false, d)) if integer(r) && decimal(l) => (l.clone(), DataType::Decimal128(d, 0)),
        _ => (l.clone(), r.clone()),
    }
}

impl Checked {
    fn coerce_pair(&self, l: &DataType, r: &DataType) -> Result<Vec<DataType>> {
        let (l, r) = self.operands(l, r).map_err(|e| {
            DataFusionError::Plan(format!(
                "[DATATYPE_MISMATCH] {}() cannot {} {l} and {r}: {e}",
                self.name,
                self.op.word()
            ))
        })?;
        Ok(vec![l, r])
    }
}

impl Checked {
    fn result_type(&self, types: &[DataType]) -> Result<DataType> {
        let (l, r) = self.operands(&types[0], &types[1])?;
        if let (DataType::Decimal128(p1, s1), DataType::Decimal128(p2, s2)) = (&l, &r) {
            let (p, s) = spark_decimal(self.op, (*p1, *s1), (*p2, *s2));
            return Ok(DataType::Decimal128(p, s));
        }
        BinaryTypeCoercer::new(&l, &self.op.operator(), &r).get_result_type()
    }

    fn invoke(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        if !self.try_
            && let Some(result) = self.bigint(&args.args[0], &args.args[1], n)
        {
            return Ok(ColumnarValue::Array(result?));
        }
        let l = args.args[0].to_array(n)?;
        let r = args.args[1].to_array(n)?;
        let hint = match args.args.get(2) {
            Some(ColumnarValue::Scalar(h)) => literal_hint(Some(h)),
            _ => None,
        };
        let (lt, rt) = hinted_types(l.data_type(), r.data_type(), hint);
        let l = if &lt == l.data_type() {
            l
        } else {
            datafusion::arrow::compute::cast(&l, &lt)?
        };
        let r = if &rt == r.data_type() {
            r
        } else {
            datafusion::arrow::compute::cast(&r, &rt)?
        };
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
        super::shaped_like(&args.args, result)
    }
}

/// `f` over the operands' values, a loop per shape so that each is vectorized: the values and
/// whether each overflowed.
fn each(
    a: &Side<'_>,
    b: &Side<'_>,
    n: usize,
    f: impl Fn(i64, i64) -> (i64, bool),
) -> (Vec<i64>, Vec<bool>) {
    let (values, overflow): (Vec<i64>, Vec<bool>) = match (a, b) {
        (Side::Column(x, _), Side::Column(y, _)) => {
            x.iter().zip(y.iter()).map(|(x, y)| f(*x, *y)).unzip()
        }
        (Side::Column(x, _), Side::Value(y)) => {
            let y = y.unwrap_or(0);
            x.iter().map(|x| f(*x, y)).unzip()
        }
        (Side::Value(x), Side::Column(y, _)) => {
            let x = x.unwrap_or(0);
            y.iter().map(|y| f(x, *y)).unzip()
        }
        (Side::Value(x), Side::Value(y)) => {
            let (v, o) = f(x.unwrap_or(0), y.unwrap_or(0));
            (vec![v; n], vec![o; n])
        }
    };
    (values, overflow)
}

/// A BIGINT operand: a column's values and NULLs, or one value.
enum Side<'a> {
    Column(&'a [i64], Option<&'a datafusion::arrow::buffer::NullBuffer>),
    Value(Option<i64>),
}

impl Checked {
    /// `+ - *` of two BIGINTs (the common case: columns and integer literals), in one pass
    /// that the compiler vectorizes: wrapping arithmetic, with overflow found from the signs
    /// (add, subtract) or the widened product, only where both values are there. None: not
    /// this case.
    fn bigint(&self, l: &ColumnarValue, r: &ColumnarValue, n: usize) -> Option<Result<ArrayRef>> {
        use datafusion::arrow::array::Int64Array;
        use datafusion::arrow::buffer::NullBuffer;
        use datafusion::arrow::datatypes::Int64Type;
        if !matches!(self.op, Op::Add | Op::Subtract | Op::Multiply)
            || l.data_type() != DataType::Int64
            || r.data_type() != DataType::Int64
        {
            return None;
        }
        fn side(c: &ColumnarValue) -> Option<(Side<'_>, bool)> {
            Some(match c {
                ColumnarValue::Array(a) => {
                    let a = a.as_primitive::<Int64Type>();
                    (Side::Column(a.values(), a.nulls()), false)
                }
                ColumnarValue::Scalar(ScalarValue::Int64(v)) => (Side::Value(*v), v.is_none()),
                _ => return None,
            })
        }
        let (a, a_null) = side(l)?;
        let (b, b_null) = side(r)?;
        if matches!((&a, &b), (Side::Value(_), Side::Value(_))) || a_null || b_null {
            return None;
        }
        let nulls = match (&a, &b) {
            (Side::Column(_, x), Side::Column(_, y)) => NullBuffer::union(*x, *y),
            (Side::Column(_, x), _) | (_, Side::Column(_, x)) => x.cloned(),
            _ => None,
        };
        let (values, overflow) = match self.op {
            Op::Add => each(&a, &b, n, |x, y| {
                let v = x.wrapping_add(y);
                (v, ((x ^ v) & (y ^ v)) < 0)
            }),
            Op::Subtract => each(&a, &b, n, |x, y| {
                let v = x.wrapping_sub(y);
                (v, ((x ^ y) & (x ^ v)) < 0)
            }),
            _ => each(&a, &b, n, |x, y| {
                let wide = i128::from(x) * i128::from(y);
                (wide as i64, wide != i128::from(wide as i64))
            }),
        };
        let overflowed = match &nulls {
            None => overflow.iter().any(|o| *o),
            Some(valid) => overflow
                .iter()
                .enumerate()
                .any(|(i, o)| *o && valid.is_valid(i)),
        };
        if overflowed {
            return Some(Err(DataFusionError::Execution(format!(
                "[ARITHMETIC_OVERFLOW] {} overflows BIGINT: cast an operand to a wider type, or use try_{} to get NULL instead",
                self.op.word(),
                self.op.word()
            ))));
        }
        Some(Ok(Arc::new(Int64Array::new(values.into(), nulls))))
    }

    /// The operator over two equally long arrays, or the Databricks error.
    fn apply(&self, l: &ArrayRef, r: &ArrayRef, out: &DataType) -> Result<ArrayRef> {
        let mut r = r.clone();
        if matches!(self.op, Op::Divide | Op::IntDivide) && r.data_type().is_numeric() {
            // -0.0 is a zero too (compared as numbers, not bits).
            let divisors = datafusion::arrow::compute::cast(&r, &DataType::Float64)?;
            let divisors = divisors.as_primitive::<datafusion::arrow::datatypes::Float64Type>();
            let zeros: BooleanArray = (0..divisors.len())
                .map(|i| Some(divisors.is_valid(i) && divisors.value(i) == 0.0 && l.is_valid(i)))
                .collect();
            if zeros.true_count() > 0 {
                if !self.try_ {
                    // A zero divisor fails only where the dividend is not NULL, as in Databricks.
                    return Err(DataFusionError::Execution(
                        "[DIVIDE_BY_ZERO] Division by zero. Use try_divide to get NULL instead"
                            .into(),
                    ));
                }
                r = datafusion::arrow::compute::nullif(&r, &zeros)?;
            }
        }
        let r = &r;
        if let (
            Some((DataType::Decimal128(_, s1), DataType::Decimal128(_, s2))),
            DataType::Decimal128(p, s),
        ) = (decimal_operands(l.data_type(), r.data_type()), out)
        {
            let (lt, rt) = self.operands(l.data_type(), r.data_type())?;
            let (l, r) = (
                datafusion::arrow::compute::cast(l, &lt)?,
                datafusion::arrow::compute::cast(r, &rt)?,
            );
            let (l, r) = (
                l.as_primitive::<Decimal128Type>(),
                r.as_primitive::<Decimal128Type>(),
            );
            let limit = i256::from_i128(10i128.pow(*p as u32));
            let mut values = Vec::with_capacity(l.len());
            for i in 0..l.len() {
                if l.is_null(i) || r.is_null(i) {
                    values.push(None);
                    continue;
                }
                let v = decimal_op(
                    self.op,
                    l.value(i),
                    s1 as i32,
                    r.value(i),
                    s2 as i32,
                    *s as i32,
                )
                .filter(|v| v.wrapping_abs() < limit)
                .and_then(|v| v.to_i128());
                match v {
                    Some(v) => values.push(Some(v)),
                    None if self.try_ => values.push(None),
                    None => {
                        return Err(DataFusionError::Execution(format!(
                            "[NUMERIC_VALUE_OUT_OF_RANGE] the result of {} does not fit DECIMAL({p}, {s}): cast an operand to a wider DECIMAL or DOUBLE, or use try_{} to get NULL instead",
                            self.op.word(),
                            self.op.word()
                        )));
                    }
                }
            }
            let result = datafusion::arrow::array::Decimal128Array::from(values)
                .with_precision_and_scale(*p, *s)?;
            return Ok(Arc::new(result));
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
            checked: [
                Op::Add,
                Op::Subtract,
                Op::Multiply,
                Op::Divide,
                Op::IntDivide,
            ]
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

/// An integer literal as the DECIMAL of exactly its digits; any other expression as it is.
fn literal_decimal(e: Expr) -> Expr {
    let v = match &e {
        Expr::Literal(ScalarValue::Int64(Some(v)), _) => *v as i128,
        Expr::Literal(ScalarValue::Int32(Some(v)), _) => *v as i128,
        _ => return e,
    };
    let digits = v.unsigned_abs().checked_ilog10().map_or(1, |d| d + 1) as u8;
    Expr::Literal(ScalarValue::Decimal128(Some(v), digits, 0), None)
}

impl AnsiArithmetic {
    fn call(&self, op: Op, l: Expr, r: Expr) -> Expr {
        Expr::ScalarFunction(ScalarFunction::new_udf(
            self.checked[&op].clone(),
            vec![l, r],
        ))
    }

    /// Spark's `a div b`: the quotient truncated toward zero, a BIGINT. Integers divide as
    /// integers; DECIMALs exactly ([`DecimalDiv`]); floats as the truncated DOUBLE quotient. A zero divisor and a quotient
    /// past BIGINT are errors.
    fn plan_div(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        let (Ok(lt), Ok(rt)) = (expr.left.get_type(schema), expr.right.get_type(schema)) else {
            return Ok(PlannerResult::Original(expr));
        };
        let whole = |t: &DataType| integer(t) || t.is_null();
        let exact = |t: &DataType| whole(t) || decimal(t);
        let number = |t: &DataType| exact(t) || float(t);
        let planned = if whole(&lt) && whole(&rt) {
            self.call(Op::IntDivide, expr.left, expr.right)
        } else if exact(&lt) && exact(&rt) {
            let (a, b) = (literal_decimal(expr.left), literal_decimal(expr.right));
            Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::new(ScalarUDF::from(DecimalDiv::new())),
                vec![a, b],
            ))
        } else if number(&lt) && number(&rt) {
            let quotient = self.call(Op::Divide, expr.left, expr.right);
            Expr::Cast(datafusion::logical_expr::Cast::new(
                Box::new(datafusion::functions::math::trunc().call(vec![quotient])),
                DataType::Int64,
            ))
        } else {
            return Ok(PlannerResult::Original(expr));
        };
        Ok(PlannerResult::Planned(planned))
    }
}

impl ExprPlanner for AnsiArithmetic {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        if expr.op == BinaryOperator::MyIntegerDivide {
            return self.plan_div(expr, schema);
        }
        // Spark's shifts keep the left operand's type (an INT column stays INT) and take the
        // distance modulo its width: datafusion-spark's shiftleft/shiftright. An integer
        // literal is a BIGINT here (an INT in Databricks), so `1 << 31` is 2147483648.
        let shift = match expr.op {
            BinaryOperator::PGBitwiseShiftLeft => {
                Some(datafusion_spark::function::bitwise::shiftleft())
            }
            BinaryOperator::PGBitwiseShiftRight => {
                Some(datafusion_spark::function::bitwise::shiftright())
            }
            _ => None,
        };
        if let Some(udf) = shift {
            return Ok(PlannerResult::Planned(Expr::ScalarFunction(
                ScalarFunction::new_udf(udf, vec![expr.left, expr.right]),
            )));
        }
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
        // An integer literal next to a DECIMAL is the DECIMAL of its digits, as Spark types
        // it (`1.0 / 3` is DECIMAL(2,1) / DECIMAL(1,0), not / DECIMAL(20,0)).
        let (left, right) = if decimal(&lt) || decimal(&rt) {
            (literal_decimal(expr.left), literal_decimal(expr.right))
        } else {
            (expr.left, expr.right)
        };
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(self.checked[&op].clone(), vec![left, right]),
        )))
    }
}
