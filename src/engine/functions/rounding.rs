//! Spark's rounding to a scale that DataFusion lacks: `bround(x, d)` (half to even, banker's
//! rounding), `ceil(x, d)` and `floor(x, d)` (to `d` digits after the point; `d` may be
//! negative), exact on DECIMALs and integers; and `conv(num, from_base, to_base)`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, Float64Array};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Float64Type};
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Mode {
    HalfUp,
    HalfEven,
    Ceil,
    Floor,
}

/// `bround`, the two-argument `ceil`/`floor` (the SQL rewrite calls these names), `round` of
/// DECIMALs and integers (Spark's result type: `round(2.345, 2)` is `2.35`, not `2.350`;
/// other types go to `round`, datafusion-spark's, unchanged), and `conv`.
pub fn udfs(round: Option<Arc<ScalarUDF>>) -> Vec<ScalarUDF> {
    [
        (Mode::HalfEven, "bround", None),
        (Mode::Ceil, CEIL_TO, None),
        (Mode::Floor, FLOOR_TO, None),
        (Mode::HalfUp, "round", round),
    ]
    .into_iter()
    .map(|(mode, name, fallback)| {
        ScalarUDF::from(RoundTo {
            mode,
            name,
            fallback,
            signature: Signature::variadic_any(Volatility::Immutable),
        })
    })
    .chain([
        ScalarUDF::from(Conv {
            signature: Signature::any(3, Volatility::Immutable),
        }),
        ScalarUDF::from(RaiseError::new()),
    ])
    .collect()
}

pub const CEIL_TO: &str = "__ceil_to";
pub const FLOOR_TO: &str = "__floor_to";

#[derive(Debug, PartialEq, Eq, Hash)]
struct RoundTo {
    mode: Mode,
    name: &'static str,
    /// The function of the same name for the types this one leaves (round's, for floats).
    fallback: Option<Arc<ScalarUDF>>,
    signature: Signature,
}

/// The type ceil/floor round a float in: Spark's DECIMAL for it (the others round floats).
fn float_as_decimal(t: &DataType, mode: Mode) -> DataType {
    match (t, mode) {
        (DataType::Float64, Mode::Ceil | Mode::Floor) => DataType::Decimal128(30, 15),
        (DataType::Float32 | DataType::Float16, Mode::Ceil | Mode::Floor) => {
            DataType::Decimal128(14, 7)
        }
        _ => t.clone(),
    }
}

/// The scale argument: a constant integer (0 when there is none).
fn scale_of(args: &[ColumnarValue]) -> Result<i32> {
    let Some(arg) = args.get(1) else {
        return Ok(0);
    };
    match arg {
        ColumnarValue::Scalar(s) => match s.cast_to(&DataType::Int32)? {
            ScalarValue::Int32(Some(d)) => Ok(d),
            _ => exec_err!("the scale must be a constant integer"),
        },
        ColumnarValue::Array(_) => exec_err!("the scale must be a constant integer"),
    }
}

fn decimal_in(t: &DataType) -> Option<(u8, i8)> {
    match t {
        DataType::Decimal128(p, s) => Some((*p, *s)),
        DataType::Int8 | DataType::UInt8 => Some((3, 0)),
        DataType::Int16 | DataType::UInt16 => Some((5, 0)),
        DataType::Int32 | DataType::UInt32 => Some((10, 0)),
        DataType::Int64 | DataType::UInt64 => Some((20, 0)),
        _ => None,
    }
}

impl ScalarUDFImpl for RoundTo {
    fn name(&self) -> &str {
        self.name
    }

    fn schema_name(&self, args: &[datafusion::logical_expr::Expr]) -> Result<String> {
        let shown = match self.mode {
            Mode::HalfUp => "round",
            Mode::HalfEven => "bround",
            Mode::Ceil => "ceil",
            Mode::Floor => "floor",
        };
        let args: Vec<String> = args.iter().map(|a| a.schema_name().to_string()).collect();
        Ok(format!("{shown}({})", args.join(", ")))
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        plan_err!("{} needs its arguments", self.name)
    }

    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> Result<datafusion::arrow::datatypes::FieldRef> {
        if !(1..=2).contains(&args.arg_fields.len()) {
            return plan_err!("{}() takes a number and a scale", self.name);
        }
        let t = args.arg_fields[0].data_type();
        if let Some(fallback) = &self.fallback
            && (t.is_integer() || t.is_null())
        {
            return fallback.return_field_from_args(args);
        }
        // Spark's ceil/floor to a scale take DECIMALs: a DOUBLE is a DECIMAL(30,15) first.
        let t = &float_as_decimal(t, self.mode);
        let d = match args.scalar_arguments.get(1) {
            None => 0,
            Some(Some(s)) => match s.cast_to(&DataType::Int32)? {
                ScalarValue::Int32(Some(d)) => d,
                _ => return plan_err!("{}: the scale must be a constant integer", self.name),
            },
            _ => return plan_err!("{}: the scale must be a constant integer", self.name),
        };
        let out = match decimal_in(t) {
            // Spark's type: the digits before the point and one more for a carry (`ceil(9.9)`
            // is 10), and min(s, d) after it (none for a negative d).
            Some((p, s)) => {
                let (p, s) = (p as i32, s as i32);
                let whole = p - s + 1;
                if d < 0 {
                    DataType::Decimal128(whole.max(1 - d).min(38) as u8, 0)
                } else {
                    let scale = s.min(d);
                    DataType::Decimal128((whole + scale).min(38) as u8, scale as i8)
                }
            }
            None if t.is_floating() || t.is_null() => DataType::Float64,
            None => {
                return plan_err!(
                    "{} takes a number, not {}",
                    self.name,
                    crate::engine::types::type_name(t)
                );
            }
        };
        Ok(Arc::new(datafusion::arrow::datatypes::Field::new(
            self.name, out, true,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if let Some(fallback) = &self.fallback
            && (args.args[0].data_type().is_integer() || args.args[0].data_type().is_null())
        {
            return fallback.invoke_with_args(args);
        }
        let n = args.number_rows;
        let d = scale_of(&args.args)?;
        let x = args.args[0].to_array(n)?;
        let x = match float_as_decimal(x.data_type(), self.mode) {
            t if &t == x.data_type() => x,
            t => datafusion::arrow::compute::cast(&x, &t)?,
        };
        let out = args.return_field.data_type().clone();
        let result: ArrayRef = match (&out, decimal_in(x.data_type())) {
            (DataType::Decimal128(p, s), Some((p0, s0))) => {
                let x = datafusion::arrow::compute::cast(&x, &DataType::Decimal128(p0.max(1), s0))?;
                let x = x.as_primitive::<Decimal128Type>();
                let mut values = Vec::with_capacity(n);
                for v in x.iter() {
                    values.push(match v {
                        None => None,
                        Some(v) => Some(
                            round_unscaled(v, s0 as i32, d, *s as i32, self.mode)
                                .filter(|r| r.unsigned_abs() < 10u128.pow(*p as u32))
                                .ok_or_else(
                                || {
                                    DataFusionError::Execution(format!(
                                        "[NUMERIC_VALUE_OUT_OF_RANGE] {}: the result does not fit DECIMAL({p}, {s})",
                                        self.name
                                    ))
                                },
                            )?,
                        ),
                    });
                }
                Arc::new(Decimal128Array::from(values).with_precision_and_scale(*p, *s)?)
            }
            _ => {
                let x = datafusion::arrow::compute::cast(&x, &DataType::Float64)?;
                let x = x.as_primitive::<Float64Type>();
                let r: Float64Array = x
                    .iter()
                    .map(|v| v.map(|v| round_double(v, d, self.mode)))
                    .collect();
                Arc::new(r)
            }
        };
        super::shaped_like(&args.args, result)
    }
}

/// A DOUBLE rounded as Spark rounds it: its shortest decimal text (what Java prints) rounded
/// exactly, so `bround(2.675D, 2)` is 2.68 although the binary value is a little below.
fn round_double(v: f64, d: i32, mode: Mode) -> f64 {
    if !v.is_finite() || v.abs() >= 1e20 && d >= 0 {
        // No fraction left to round at this size.
        return v;
    }
    let text = format!("{v}");
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    // Past 30 digits of fraction only whether any digit is not 0 matters (a tie or not).
    let frac = if frac.len() > 30 {
        let sticky = frac[30..].bytes().any(|b| b != b'0');
        format!("{}{}", &frac[..30], if sticky { "1" } else { "0" })
    } else {
        frac.to_string()
    };
    let digits = format!("{int}{frac}");
    match digits.parse::<i128>() {
        Ok(unscaled) => {
            let s = frac.len() as i32;
            let out = d.clamp(0, 31);
            round_unscaled(unscaled, s, d, out, mode).map_or(v, |r| r as f64 / 10f64.powi(out))
        }
        Err(_) => v,
    }
}

/// `v` (unscaled, at scale `s`) rounded to `d` digits after the point, as unscaled at scale
/// `out` (None: out of range).
fn round_unscaled(v: i128, s: i32, d: i32, out: i32, mode: Mode) -> Option<i128> {
    let drop = s - d;
    let rounded = if drop <= 0 {
        v
    } else {
        let unit = 10i128.checked_pow(drop as u32)?;
        let (q, r) = (v / unit, v % unit);
        let up = match mode {
            Mode::Ceil => r > 0,
            Mode::Floor => r < 0,
            Mode::HalfUp => r.abs() >= unit - r.abs(),
            Mode::HalfEven => {
                let (r, rest) = (r.abs(), unit - r.abs());
                r > rest || (r == rest && q % 2 != 0)
            }
        };
        let q = if !up {
            q
        } else if mode == Mode::Floor || (matches!(mode, Mode::HalfEven | Mode::HalfUp) && v < 0) {
            q - 1
        } else {
            q + 1
        };
        // q counts units of 10^(s - d): as a value at scale d.
        return rescale(q, d, out);
    };
    rescale(rounded, s, out)
}

/// `v` at scale `from` as scale `to` (exact: `to` is at least the digits `v` has).
fn rescale(v: i128, from: i32, to: i32) -> Option<i128> {
    if to >= from {
        v.checked_mul(10i128.checked_pow((to - from) as u32)?)
    } else {
        let unit = 10i128.checked_pow((from - to) as u32)?;
        (v % unit == 0).then_some(v / unit)
    }
}

/// `conv(num, from_base, to_base)`: `num` (a string of digits of `from_base`, 2 to 36, maybe
/// negative) in `to_base`; as Spark, through unsigned 64-bit arithmetic (`conv('-1', 10, 10)`
/// is 18446744073709551615), signed when `to_base` is negative. A number past 64 bits is an
/// error ([ARITHMETIC_OVERFLOW], ANSI mode), NULL for an invalid digit or base.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Conv {
    signature: Signature,
}

fn conv_one(num: &str, from: i64, to: i64) -> Result<Option<String>> {
    if !(2..=36).contains(&from) || !(2..=36).contains(&to.unsigned_abs()) {
        return Ok(None);
    }
    let num = num.trim();
    let (negative, digits) = match num.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, num),
    };
    let mut value: u64 = 0;
    let mut any = false;
    for c in digits.chars() {
        let Some(d) = c.to_digit(36).filter(|d| i64::from(*d) < from) else {
            // Spark stops at the first character that is no digit.
            break;
        };
        any = true;
        value = value
            .checked_mul(from as u64)
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or_else(|| {
                DataFusionError::Execution(format!(
                    "[ARITHMETIC_OVERFLOW] conv(): '{num}' does not fit 64 bits"
                ))
            })?;
    }
    if !any && digits.is_empty() {
        return Ok(None);
    }
    let value = if negative {
        value.wrapping_neg()
    } else {
        value
    };
    let (mut magnitude, sign) = if to < 0 && (value as i64) < 0 {
        ((value as i64).unsigned_abs(), "-")
    } else {
        (value, "")
    };
    let base = to.unsigned_abs();
    let mut out = vec![];
    loop {
        let d = (magnitude % base) as u32;
        out.push(
            std::char::from_digit(d, 36)
                .unwrap_or('0')
                .to_ascii_uppercase(),
        );
        magnitude /= base;
        if magnitude == 0 {
            break;
        }
    }
    out.reverse();
    Ok(Some(format!(
        "{sign}{}",
        out.into_iter().collect::<String>()
    )))
}

impl ScalarUDFImpl for Conv {
    fn name(&self) -> &str {
        "conv"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let num = datafusion::arrow::compute::cast(&args.args[0].to_array(n)?, &DataType::Utf8)?;
        let num = num.as_string::<i32>();
        let from = datafusion::arrow::compute::cast(&args.args[1].to_array(n)?, &DataType::Int64)?;
        let from = from.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        let to = datafusion::arrow::compute::cast(&args.args[2].to_array(n)?, &DataType::Int64)?;
        let to = to.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        let mut out = datafusion::arrow::array::StringBuilder::with_capacity(n, n * 8);
        for i in 0..n {
            if num.is_null(i) || from.is_null(i) || to.is_null(i) {
                out.append_null();
                continue;
            }
            out.append_option(conv_one(num.value(i), from.value(i), to.value(i))?);
        }
        let result: ArrayRef = Arc::new(out.finish());
        super::shaped_like(&args.args, result)
    }
}

/// `raise_error(message)`: fails the query with `message` where it is evaluated (only the rows
/// a CASE picks), `[USER_RAISED_EXCEPTION]` unless the message names its own class. Volatile,
/// so that planning never evaluates it ahead of the rows.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct RaiseError {
    signature: Signature,
}

impl RaiseError {
    pub fn new() -> Self {
        RaiseError {
            signature: Signature::any(1, Volatility::Volatile),
        }
    }
}

impl ScalarUDFImpl for RaiseError {
    fn name(&self) -> &str {
        "raise_error"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Null)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let messages =
            datafusion::arrow::compute::cast(&args.args[0].to_array(n)?, &DataType::Utf8)?;
        let messages = messages.as_string::<i32>();
        if let Some(m) = (0..n)
            .map(|i| messages.is_valid(i).then(|| messages.value(i)))
            .next()
        {
            let m = m.unwrap_or("NULL");
            return Err(DataFusionError::Execution(if m.starts_with('[') {
                m.to_string()
            } else {
                format!("[USER_RAISED_EXCEPTION] {m}")
            }));
        }
        Ok(ColumnarValue::Scalar(ScalarValue::Null))
    }
}
