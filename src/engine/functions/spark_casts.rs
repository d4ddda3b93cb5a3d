//! Casts whose result Databricks defines otherwise than Arrow's kernels compute it, planned as
//! Spark computes them ([`spark_casts`], run after types are coerced, so the casts the engine
//! adds, `concat('at ', ts)` or `ts LIKE '2024%'`, are covered too):
//!
//! * a TIMESTAMP as text is `yyyy-MM-dd HH:mm:ss[.f]` in its zone (the session's), without
//!   the zone (Arrow wrote `2024-01-01T10:00:00Z`, or `+02:00`);
//! * a DOUBLE or FLOAT as text is Java's `Double.toString`: `1.0E10`, `1.0E-5`, `123.0`
//!   (Arrow wrote `10000000000.0` and `0.00001`);
//! * a DOUBLE or FLOAT as a DECIMAL is the decimal of its shortest text, rounded half up
//!   (`1.005` is 1.01 as DECIMAL(5,2); Arrow rounded the binary value, 1.00499..., to 1.00);
//! * a TIMESTAMP as a number counts seconds since 1970 (Arrow gave microseconds), rounded down
//!   to whole seconds for an integer type.

use std::sync::Arc;

use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::{
    DataType, Float32Type, Float64Type, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, exec_err};
use datafusion::logical_expr::expr::{Cast, TryCast};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

/// A function of one argument that the cast rewrites call: a name, a result type and what it
/// computes on an array. A function, not casts and arithmetic, so that a plan analysed twice
/// is not rewritten twice.
#[derive(Debug)]
struct ArrayFunction {
    name: &'static str,
    returns: DataType,
    signature: Signature,
    f: fn(&ArrayRef) -> datafusion::error::Result<ArrayRef>,
}

/// One function per name: equal by name (a function pointer's address is not an identity).
impl PartialEq for ArrayFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for ArrayFunction {}

impl std::hash::Hash for ArrayFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ArrayFunction {
    fn call(
        name: &'static str,
        returns: DataType,
        f: fn(&ArrayRef) -> datafusion::error::Result<ArrayRef>,
        arg: Expr,
    ) -> Expr {
        let udf = ScalarUDF::from(ArrayFunction {
            name,
            returns,
            signature: Signature::any(1, Volatility::Immutable),
            f,
        });
        Arc::new(udf).call(vec![arg])
    }
}

impl ScalarUDFImpl for ArrayFunction {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _types: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(self.returns.clone())
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        super::each_array(&args, self.f)
    }
}

/// `__spark_text(x)`: a TIMESTAMP, DOUBLE or FLOAT as Spark's CAST to STRING writes it.
const SPARK_TEXT: &str = "__spark_text";

/// `__spark_decimal_text(x)`: a DOUBLE or FLOAT as [`plain_text`], for a cast to DECIMAL.
const DECIMAL_TEXT: &str = "__spark_decimal_text";

/// A DOUBLE or FLOAT array as the plain text of each value's shortest form as a DOUBLE
/// (`1.005`, never `1.005e0`; Rust's `{}`), which a cast to DECIMAL rounds half up. A FLOAT
/// is widened first, as Spark does (`0.1F` is `0.10000000149011612`). A value below any
/// DECIMAL's last digit (10^-38) is `0`: its plain text would be too long to parse.
fn plain_text(input: &ArrayRef) -> datafusion::error::Result<ArrayRef> {
    let text = |v: f64| match v.abs() < 1e-39 && v.is_finite() {
        true => "0".to_string(),
        false => format!("{v}"),
    };
    let out: datafusion::arrow::array::StringArray = match input.data_type() {
        DataType::Float64 => input
            .as_primitive::<Float64Type>()
            .iter()
            .map(|v| v.map(text))
            .collect(),
        DataType::Float32 => input
            .as_primitive::<Float32Type>()
            .iter()
            .map(|v| v.map(|v| text(v as f64)))
            .collect(),
        other => return exec_err!("{DECIMAL_TEXT} takes DOUBLE or FLOAT, not {other}"),
    };
    Ok(Arc::new(out))
}

fn text_of(input: &ArrayRef) -> datafusion::error::Result<ArrayRef> {
    let mut out = StringBuilder::with_capacity(input.len(), input.len() * 20);
    let mut push = |v: Option<String>| match v {
        Some(s) => out.append_value(s),
        None => out.append_null(),
    };
    match input.data_type() {
        DataType::Float64 => {
            for v in input.as_primitive::<Float64Type>().iter() {
                push(v.map(|v| java_float(v, format!("{v}"), format!("{v:e}"))));
            }
        }
        DataType::Float32 => {
            for v in input.as_primitive::<Float32Type>().iter() {
                push(v.map(|v| java_float(v as f64, format!("{v}"), format!("{v:e}"))));
            }
        }
        DataType::Timestamp(unit, tz) => {
            let tz: Option<Tz> = match tz {
                Some(tz) => Some(tz.parse()?),
                None => None,
            };
            let (values, per_second): (Vec<Option<i64>>, i64) = match unit {
                TimeUnit::Second => (
                    input.as_primitive::<TimestampSecondType>().iter().collect(),
                    1,
                ),
                TimeUnit::Millisecond => (
                    input
                        .as_primitive::<TimestampMillisecondType>()
                        .iter()
                        .collect(),
                    1_000,
                ),
                TimeUnit::Microsecond => (
                    input
                        .as_primitive::<TimestampMicrosecondType>()
                        .iter()
                        .collect(),
                    1_000_000,
                ),
                TimeUnit::Nanosecond => (
                    input
                        .as_primitive::<TimestampNanosecondType>()
                        .iter()
                        .collect(),
                    1_000_000_000,
                ),
            };
            for v in values {
                push(match v {
                    Some(v) => Some(timestamp_text(v, per_second, tz.as_ref())?),
                    None => None,
                });
            }
        }
        t if nested(t) => return nested_text(input),
        other => return exec_err!("{SPARK_TEXT} takes TIMESTAMP, DOUBLE or FLOAT, not {other}"),
    }
    Ok(Arc::new(out.finish()))
}

/// A type whose text Spark writes otherwise than the engine's cast: [`text_of`]'s.
fn spark_text(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Timestamp(..) | DataType::Float32 | DataType::Float64
    ) || nested(t)
}

/// An ARRAY, STRUCT or MAP type, whose text Spark writes itself.
fn nested(t: &DataType) -> bool {
    matches!(
        t,
        DataType::List(_)
            | DataType::LargeList(_)
            | DataType::FixedSizeList(..)
            | DataType::Struct(_)
            | DataType::Map(..)
    )
}

/// An ARRAY, STRUCT or MAP array as Spark's CAST to STRING writes it: `[1, null, 3]`,
/// `{1, a}` (a STRUCT's values, not its names), `{k1 -> v1, k2 -> v2}`, each element as its
/// own cast to STRING (a TIMESTAMP or DOUBLE as [`text_of`]).
fn nested_text(input: &ArrayRef) -> datafusion::error::Result<ArrayRef> {
    use datafusion::arrow::array::{ListArray, StringArray};
    // Every element's text (NULL as `null`), and each row's range of them.
    let element_text = |a: &ArrayRef| -> datafusion::error::Result<Vec<String>> {
        let text = element_texts(a)?;
        Ok((0..text.len())
            .map(|i| match text.is_null(i) {
                true => "null".to_string(),
                false => text.value(i).to_string(),
            })
            .collect())
    };
    let mut out = StringBuilder::with_capacity(input.len(), input.len() * 16);
    // Each row of a list or map: NULL, or the text of its range of elements.
    let each_range = |array: &dyn Array,
                      offsets: &[i32],
                      out: &mut StringBuilder,
                      text: &dyn Fn(std::ops::Range<usize>) -> String| {
        for row in 0..array.len() {
            match array.is_null(row) {
                true => out.append_null(),
                false => out.append_value(text(offsets[row] as usize..offsets[row + 1] as usize)),
            }
        }
    };
    let lists = |list: &ListArray, out: &mut StringBuilder| -> datafusion::error::Result<()> {
        let values = element_text(list.values())?;
        let text = |r: std::ops::Range<usize>| format!("[{}]", values[r].join(", "));
        each_range(list, list.value_offsets(), out, &text);
        Ok(())
    };
    match input.data_type() {
        DataType::List(_) => lists(input.as_list::<i32>(), &mut out)?,
        DataType::LargeList(_) | DataType::FixedSizeList(..) => {
            let field = match input.data_type() {
                DataType::LargeList(f) | DataType::FixedSizeList(f, _) => f.clone(),
                _ => unreachable!(),
            };
            let list = datafusion::arrow::compute::cast(input, &DataType::List(field))?;
            lists(list.as_list::<i32>(), &mut out)?
        }
        DataType::Struct(_) => {
            let st = input.as_struct();
            let fields: Vec<Vec<String>> = st
                .columns()
                .iter()
                .map(element_text)
                .collect::<datafusion::error::Result<_>>()?;
            for row in 0..st.len() {
                if st.is_null(row) {
                    out.append_null();
                    continue;
                }
                let shown: Vec<&str> = fields.iter().map(|f| f[row].as_str()).collect();
                out.append_value(format!("{{{}}}", shown.join(", ")));
            }
        }
        DataType::Map(..) => {
            let map = input.as_map();
            let keys = element_text(map.keys())?;
            let values = element_text(map.values())?;
            let text = |r: std::ops::Range<usize>| {
                let pairs: Vec<String> =
                    r.map(|i| format!("{} -> {}", keys[i], values[i])).collect();
                format!("{{{}}}", pairs.join(", "))
            };
            each_range(map, map.value_offsets(), &mut out, &text);
        }
        other => return exec_err!("{SPARK_TEXT}: {other} is not an ARRAY, STRUCT or MAP"),
    }
    let text: StringArray = out.finish();
    Ok(Arc::new(text))
}

/// The elements of a nested value as text: Spark's for what it writes otherwise, the
/// engine's cast for the rest (integers, DECIMALs, DATEs, BOOLEANs, text).
fn element_texts(a: &ArrayRef) -> datafusion::error::Result<datafusion::arrow::array::StringArray> {
    let text = match spark_text(a.data_type()) {
        true => text_of(a)?,
        false => datafusion::arrow::compute::cast(a, &DataType::Utf8)?,
    };
    Ok(text.as_string::<i32>().clone())
}

/// Java's `Double.toString` (and `Float.toString`) from Rust's shortest forms of the same
/// value, `plain` (`{}`) and `sci` (`{:e}`): plain between 10^-3 and 10^7, else
/// `d.dddE±n`; always a digit after the point.
fn java_float(v: f64, plain: String, sci: String) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let a = v.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        return if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        };
    }
    let Some((mantissa, exponent)) = sci.split_once('e') else {
        return sci;
    };
    if mantissa.contains('.') {
        format!("{mantissa}E{exponent}")
    } else {
        format!("{mantissa}.0E{exponent}")
    }
}

/// A timestamp of `per_second` units since 1970 as Spark writes it: `yyyy-MM-dd HH:mm:ss`,
/// then the fraction of a second without trailing zeros, in `tz` (else as it is).
fn timestamp_text(v: i64, per_second: i64, tz: Option<&Tz>) -> datafusion::error::Result<String> {
    use chrono::{TimeZone, Timelike};
    let seconds = v.div_euclid(per_second);
    let nanos = (v.rem_euclid(per_second) * (1_000_000_000 / per_second)) as u32;
    let Some(utc) = chrono::DateTime::from_timestamp(seconds, nanos) else {
        return exec_err!("timestamp {v} is out of range");
    };
    let local = match tz {
        Some(tz) => tz.from_utc_datetime(&utc.naive_utc()).naive_local(),
        None => utc.naive_utc(),
    };
    let mut text = local.format("%Y-%m-%d %H:%M:%S").to_string();
    let fraction = local.nanosecond();
    if fraction > 0 {
        let digits = format!("{fraction:09}");
        text.push('.');
        text.push_str(digits.trim_end_matches('0'));
    }
    Ok(text)
}

/// The casts in `e` (typed against `schema`) that Spark defines otherwise, as Spark computes
/// them (see the module's documentation).
pub fn spark_casts(e: Expr, schema: &DFSchema) -> datafusion::common::Result<Transformed<Expr>> {
    e.transform_up(|e| {
        let (inner, to) = match &e {
            Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => {
                (expr.as_ref(), field.data_type().clone())
            }
            _ => return Ok(Transformed::no(e)),
        };
        let Ok(from) = inner.get_type(schema) else {
            return Ok(Transformed::no(e));
        };
        let float = matches!(from, DataType::Float32 | DataType::Float64);
        let text = matches!(
            to,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        );
        if let Some(refused) = refused_binary_cast(&from, &to) {
            return datafusion::common::plan_err!("{refused}");
        }
        let rewritten = match (&from, &to) {
            (t, _) if text && spark_text(t) => {
                let t = ArrayFunction::call(SPARK_TEXT, DataType::Utf8, text_of, inner.clone());
                retarget(&e, t, &to)
            }
            (_, DataType::Decimal128(..) | DataType::Decimal256(..)) if float => {
                let t =
                    ArrayFunction::call(DECIMAL_TEXT, DataType::Utf8, plain_text, inner.clone());
                retarget(&e, t, &to)
            }
            (from, DataType::Timestamp(_, None)) if text_type(from) => {
                let t = ArrayFunction::call(
                    TIMESTAMP_TEXT,
                    DataType::Utf8,
                    timestamp_texts,
                    inner.clone(),
                );
                retarget(&e, t, &to)
            }
            (from, DataType::Date32) if text_type(from) => {
                let t = match &e {
                    Expr::TryCast(_) => ArrayFunction::call(
                        TRY_DATE_TEXT,
                        DataType::Utf8,
                        try_date_text,
                        inner.clone(),
                    ),
                    _ => ArrayFunction::call(DATE_TEXT, DataType::Utf8, date_text, inner.clone()),
                };
                retarget(&e, t, &to)
            }
            (DataType::Timestamp(..), _) if to.is_floating() => {
                let seconds = ArrayFunction::call(
                    "__timestamp_seconds_double",
                    DataType::Float64,
                    exact_seconds,
                    inner.clone(),
                );
                retarget(&e, seconds, &to)
            }
            (DataType::Timestamp(..), _) if to.is_integer() => {
                let seconds = ArrayFunction::call(
                    "__timestamp_seconds",
                    DataType::Int64,
                    whole_seconds,
                    inner.clone(),
                );
                retarget(&e, seconds, &to)
            }
            _ => return Ok(Transformed::no(e)),
        };
        Ok(Transformed::yes(rewritten))
    })
}

/// `__spark_date_text(s)`: text for a cast to DATE, as Spark's cast reads it (see
/// [`spark_date`]); other text is an error.
const DATE_TEXT: &str = "__spark_date_text";

/// `__spark_timestamp_text(s)`: text for a cast to TIMESTAMP_NTZ (see
/// [`spark_timestamp_text`]).
const TIMESTAMP_TEXT: &str = "__spark_timestamp_text";

/// `__spark_try_date_text(s)`: the same for `try_cast`, other text NULL.
const TRY_DATE_TEXT: &str = "__spark_try_date_text";

/// Text, or a dictionary of text (a partition column).
fn text_type(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => text_type(v),
        _ => false,
    }
}

/// Each text as `yyyy-mm-dd` where Spark's cast reads a date in it; None (or an error, when
/// `strict`) where it does not: the engine's own reading accepts more (`20240517`).
fn dates_as_text(input: &ArrayRef, strict: bool) -> datafusion::error::Result<ArrayRef> {
    let text = datafusion::arrow::compute::cast(input, &DataType::Utf8)?;
    let mut out = StringBuilder::with_capacity(text.len(), text.len() * 10);
    for v in text.as_string::<i32>().iter() {
        match v.map(|s| (s, spark_date(s))) {
            None => out.append_null(),
            Some((_, Some(date))) => out.append_value(date),
            Some((s, None)) if strict => {
                return exec_err!(
                    "[CAST_INVALID_INPUT] The value '{s}' of the type \"STRING\" cannot be cast to \"DATE\" because it is malformed. Correct the value as per the syntax (yyyy-[m]m-[d]d, optionally followed by a time), or use try_cast to tolerate malformed input and return NULL instead"
                );
            }
            Some((_, None)) => out.append_null(),
        }
    }
    Ok(Arc::new(out.finish()))
}

fn date_text(input: &ArrayRef) -> datafusion::error::Result<ArrayRef> {
    dates_as_text(input, true)
}

fn try_date_text(input: &ArrayRef) -> datafusion::error::Result<ArrayRef> {
    dates_as_text(input, false)
}

/// Each text as the engine's parser reads the timestamp Spark's cast reads in it (for a cast
/// to TIMESTAMP or TIMESTAMP_NTZ): see [`spark_timestamp_text`].
pub(super) fn timestamp_texts(input: &ArrayRef) -> datafusion::error::Result<ArrayRef> {
    let text = datafusion::arrow::compute::cast(input, &DataType::Utf8)?;
    let out: datafusion::arrow::array::StringArray = text
        .as_string::<i32>()
        .iter()
        .map(|v| v.map(spark_timestamp_text))
        .collect();
    Ok(Arc::new(out))
}

/// `s` trimmed, its date in Spark's forms written `yyyy-mm-dd` and a time without seconds
/// (`10:00`, `9:5`) written with them, so that the engine's parser reads what Spark's cast
/// reads; other text as it is (trimmed), for the parser to refuse.
fn spark_timestamp_text(s: &str) -> String {
    let s = spark_trim(s);
    let (date, rest) = match s.find([' ', 'T']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let Some(date) = spark_date(date) else {
        return s.to_string();
    };
    let Some(rest) = rest else {
        return date;
    };
    // [h]h:[m]m, then seconds, a fraction or a zone as they are.
    fn field(t: &str) -> Option<(&str, &str)> {
        let n = t.bytes().take_while(u8::is_ascii_digit).count();
        (1..=2).contains(&n).then(|| (&t[..n], &t[n..]))
    }
    let Some((hour, after)) = field(rest) else {
        return s.to_string();
    };
    let Some((minute, after)) = after.strip_prefix(':').and_then(field) else {
        return s.to_string();
    };
    let (second, after) = match after.strip_prefix(':').and_then(field) {
        Some((second, after)) => (second, after),
        None if after.starts_with(':') => return s.to_string(),
        None => ("0", after),
    };
    let two = |t: &str| format!("{t:0>2}");
    format!(
        "{date}T{}:{}:{}{after}",
        two(hour),
        two(minute),
        two(second)
    )
}

/// Text without the white space and control characters around it, as Spark trims a value it
/// casts.
fn spark_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// The date Spark's cast reads in `s`, as `yyyy-mm-dd`: trimmed, `yyyy`, `yyyy-[m]m`,
/// `yyyy-[m]m-[d]d`, the last followed by a space or a `T` and anything (a time of day).
/// None for other text or a day that does not exist.
fn spark_date(s: &str) -> Option<String> {
    let s = spark_trim(s);
    let (date, time) = match s.find([' ', 'T']) {
        Some(i) => (&s[..i], true),
        None => (s, false),
    };
    let number = |t: &str, digits: std::ops::RangeInclusive<usize>| {
        (digits.contains(&t.len()) && t.bytes().all(|b| b.is_ascii_digit()))
            .then(|| t.parse::<u32>().ok())
            .flatten()
    };
    let mut parts = date.split('-');
    let year = number(parts.next()?, 4..=4)?;
    let month = parts.next().map(|m| number(m, 1..=2));
    let day = parts.next().map(|d| number(d, 1..=2));
    if parts.next().is_some() || (time && day.is_none()) {
        return None;
    }
    let date = chrono::NaiveDate::from_ymd_opt(
        year as i32,
        month.unwrap_or(Some(1))?,
        day.unwrap_or(Some(1))?,
    )?;
    Some(date.format("%Y-%m-%d").to_string())
}

/// A TIMESTAMP array's values since 1970 and its units per second.
fn units(input: &ArrayRef) -> datafusion::error::Result<(ArrayRef, i64)> {
    let DataType::Timestamp(unit, _) = input.data_type() else {
        return exec_err!("a TIMESTAMP was expected, found {}", input.data_type());
    };
    let per_second: i64 = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    Ok((
        datafusion::arrow::compute::cast(input, &DataType::Int64)?,
        per_second,
    ))
}

/// `__timestamp_seconds(ts)`: whole seconds since 1970, rounded down (Spark's floorDiv, also
/// before 1970).
fn whole_seconds(input: &ArrayRef) -> datafusion::error::Result<ArrayRef> {
    let (raw, per_second) = units(input)?;
    let raw = raw.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
    Ok(Arc::new(
        raw.unary::<_, datafusion::arrow::datatypes::Int64Type>(|v| v.div_euclid(per_second)),
    ))
}

/// `__timestamp_seconds_double(ts)`: seconds since 1970, with their fraction.
fn exact_seconds(input: &ArrayRef) -> datafusion::error::Result<ArrayRef> {
    let (raw, per_second) = units(input)?;
    let raw = raw.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
    Ok(Arc::new(
        raw.unary::<_, Float64Type>(|v| v as f64 / per_second as f64),
    ))
}

/// `value` cast to `to` as the original cast (or TRY_CAST) `e` did.
fn retarget(e: &Expr, value: Expr, to: &DataType) -> Expr {
    match e {
        Expr::TryCast(_) => Expr::TryCast(TryCast::new(Box::new(value), to.clone())),
        _ => Expr::Cast(Cast::new(Box::new(value), to.clone())),
    }
}

/// Databricks' (ANSI) refusal of a cast from `from` to `to` that makes BINARY of a number (at
/// any depth), for the casts a statement plans and those tidemark makes (an INSERT's values).
fn refused_binary_cast(from: &DataType, to: &DataType) -> Option<String> {
    numbers_to_binary(from, to).then(|| {
        format!(
            "[DATATYPE_MISMATCH.CAST_WITHOUT_SUGGESTION] cannot cast {} to {}: only STRING and \
             BINARY values cast to BINARY",
            crate::engine::types::type_name(from),
            crate::engine::types::type_name(to)
        )
    })
}

/// Whether a cast from `from` to `to` makes BINARY of something Databricks (ANSI) does not cast
/// to BINARY, at any depth (a STRUCT field, an ARRAY element, a MAP value): the engine's cast
/// of a number gave its little-endian bytes.
fn numbers_to_binary(from: &DataType, to: &DataType) -> bool {
    use DataType as T;
    match (from, to) {
        (_, T::Binary | T::LargeBinary | T::BinaryView) => !casts_to_binary(from),
        (T::Dictionary(_, v), _) => numbers_to_binary(v, to),
        (
            T::List(a)
            | T::LargeList(a)
            | T::FixedSizeList(a, _)
            | T::ListView(a)
            | T::LargeListView(a),
            T::List(b)
            | T::LargeList(b)
            | T::FixedSizeList(b, _)
            | T::ListView(b)
            | T::LargeListView(b),
        ) => numbers_to_binary(a.data_type(), b.data_type()),
        (T::Struct(a), T::Struct(b)) => a
            .iter()
            .zip(b.iter())
            .any(|(a, b)| numbers_to_binary(a.data_type(), b.data_type())),
        (T::Map(a, _), T::Map(b, _)) => numbers_to_binary(a.data_type(), b.data_type()),
        _ => false,
    }
}

/// Whether Databricks (ANSI) casts a value of type `from` to BINARY: text and bytes only.
fn casts_to_binary(from: &DataType) -> bool {
    match from {
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_)
        | DataType::Null => true,
        DataType::Dictionary(_, v) => casts_to_binary(v),
        _ => false,
    }
}

/// The analyzer rule that plans [`spark_casts`] in every statement, after types are coerced.
#[derive(Debug, Default)]
pub struct SparkCasts;

impl datafusion::optimizer::AnalyzerRule for SparkCasts {
    fn analyze(
        &self,
        plan: datafusion::logical_expr::LogicalPlan,
        _config: &datafusion::config::ConfigOptions,
    ) -> datafusion::common::Result<datafusion::logical_expr::LogicalPlan> {
        crate::engine::zone::rewrite_expressions(plan, spark_casts)
    }

    fn name(&self) -> &str {
        "tidemark_spark_casts"
    }
}

/// `x LIKE p` (ILIKE, RLIKE's regexp_like aside) over a value that is not text reads the
/// value as text, as Spark's implicit cast does (`ts LIKE '2024-01%'`, `id LIKE '12%'`); the
/// engine's coercion refused it. An ARRAY, STRUCT or MAP stays refused, as in Spark (BINARY is
/// left to the engine). Runs before coercion: the cast it adds is then Spark's text
/// ([`SparkCasts`]).
#[derive(Debug, Default)]
pub struct LikeOperands;

impl datafusion::optimizer::AnalyzerRule for LikeOperands {
    fn analyze(
        &self,
        plan: datafusion::logical_expr::LogicalPlan,
        _config: &datafusion::config::ConfigOptions,
    ) -> datafusion::common::Result<datafusion::logical_expr::LogicalPlan> {
        crate::engine::zone::rewrite_expressions(plan, |e, schema| {
            e.transform_up(|e| {
                let Expr::Like(mut like) = e else {
                    return Ok(Transformed::no(e));
                };
                let texts = |t: &DataType| match t {
                    DataType::Dictionary(_, v) => v.is_string() || v.is_null(),
                    t => t.is_string() || t.is_null(),
                };
                let mut changed = false;
                for side in [&mut like.expr, &mut like.pattern] {
                    if let Ok(t) = side.get_type(schema)
                        && !texts(&t)
                        && !t.is_nested()
                        && !matches!(
                            t,
                            DataType::Binary | DataType::LargeBinary | DataType::BinaryView
                        )
                    {
                        let value = std::mem::replace(
                            side.as_mut(),
                            Expr::Literal(datafusion::common::ScalarValue::Null, None),
                        );
                        **side = Expr::Cast(Cast::new(Box::new(value), DataType::Utf8));
                        changed = true;
                    }
                }
                Ok(if changed {
                    Transformed::yes(Expr::Like(like))
                } else {
                    Transformed::no(Expr::Like(like))
                })
            })
        })
    }

    fn name(&self) -> &str {
        "tidemark_like_operands"
    }
}

/// A FLOAT or DOUBLE compared with a DECIMAL is compared as DOUBLEs, as Spark's decimal
/// precision rule does (`=`, `<`, ..., BETWEEN, IN, `CASE x WHEN`). The engine cast the float to
/// DECIMAL(30,15) instead: `0.1D + 0.2D = 0.3` was true (false in Databricks), `1e-20D > 0.0`
/// false, and a NaN, an infinity or 1e20 in a DOUBLE column failed `WHERE d > 4.5` ("too large
/// to store in a Decimal128").
#[derive(Debug)]
pub struct FloatDecimalComparisons;

impl datafusion::optimizer::AnalyzerRule for FloatDecimalComparisons {
    fn analyze(
        &self,
        plan: datafusion::logical_expr::LogicalPlan,
        _config: &datafusion::config::ConfigOptions,
    ) -> datafusion::common::Result<datafusion::logical_expr::LogicalPlan> {
        crate::engine::zone::rewrite_expressions(plan, floats_compared_as_doubles)
    }

    fn name(&self) -> &str {
        "tidemark_float_decimal_comparisons"
    }
}

/// `e` with each comparison of a FLOAT or DOUBLE with a DECIMAL made between DOUBLEs (see
/// [`FloatDecimalComparisons`]); UPDATE and DELETE conditions, planned as expressions on
/// their own, go through it too.
pub fn floats_compared_as_doubles(
    e: Expr,
    schema: &DFSchema,
) -> datafusion::common::Result<Transformed<Expr>> {
    fn double(e: Box<Expr>) -> Box<Expr> {
        Box::new(Expr::Cast(Cast::new(e, DataType::Float64)))
    }
    e.transform_up(|e| {
        let ty = |e: &Expr| e.get_type(schema).ok();
        Ok(match e {
            Expr::BinaryExpr(mut b)
                if {
                    use datafusion::logical_expr::Operator::*;
                    matches!(
                        b.op,
                        Eq | NotEq | Lt | LtEq | Gt | GtEq | IsDistinctFrom | IsNotDistinctFrom
                    )
                } =>
            {
                match (ty(&b.left), ty(&b.right)) {
                    (Some(l), Some(r)) if l.is_floating() && r.is_decimal() => {
                        b.right = double(b.right);
                        Transformed::yes(Expr::BinaryExpr(b))
                    }
                    (Some(l), Some(r)) if l.is_decimal() && r.is_floating() => {
                        b.left = double(b.left);
                        Transformed::yes(Expr::BinaryExpr(b))
                    }
                    _ => Transformed::no(Expr::BinaryExpr(b)),
                }
            }
            Expr::Between(mut b) => {
                let types = [ty(&b.expr), ty(&b.low), ty(&b.high)];
                let any_float = types.iter().flatten().any(DataType::is_floating);
                let any_decimal = types.iter().flatten().any(DataType::is_decimal);
                if any_float && any_decimal {
                    for (side, t) in [&mut b.expr, &mut b.low, &mut b.high]
                        .into_iter()
                        .zip(types)
                    {
                        if t.as_ref().is_some_and(DataType::is_decimal) {
                            let value = std::mem::replace(
                                side,
                                Box::new(Expr::Literal(
                                    datafusion::common::ScalarValue::Null,
                                    None,
                                )),
                            );
                            *side = double(value);
                        }
                    }
                    Transformed::yes(Expr::Between(b))
                } else {
                    Transformed::no(Expr::Between(b))
                }
            }
            Expr::InList(mut l) => {
                let types: Vec<Option<DataType>> = std::iter::once(&*l.expr)
                    .chain(l.list.iter())
                    .map(ty)
                    .collect();
                let any_float = types.iter().flatten().any(DataType::is_floating);
                let any_decimal = types.iter().flatten().any(DataType::is_decimal);
                if any_float && any_decimal {
                    if types[0].as_ref().is_some_and(DataType::is_decimal) {
                        let value = std::mem::replace(
                            &mut l.expr,
                            Box::new(Expr::Literal(datafusion::common::ScalarValue::Null, None)),
                        );
                        l.expr = double(value);
                    }
                    for (item, t) in l.list.iter_mut().zip(types.into_iter().skip(1)) {
                        if t.as_ref().is_some_and(DataType::is_decimal) {
                            let value = std::mem::replace(
                                item,
                                Expr::Literal(datafusion::common::ScalarValue::Null, None),
                            );
                            *item = *double(Box::new(value));
                        }
                    }
                    Transformed::yes(Expr::InList(l))
                } else {
                    Transformed::no(Expr::InList(l))
                }
            }
            Expr::Case(mut c) if c.expr.is_some() => {
                let operand = c.expr.as_deref().and_then(ty);
                let whens: Vec<Option<DataType>> =
                    c.when_then_expr.iter().map(|(w, _)| ty(w)).collect();
                let types = || std::iter::once(&operand).chain(whens.iter()).flatten();
                if types().any(DataType::is_floating) && types().any(DataType::is_decimal) {
                    if operand.as_ref().is_some_and(DataType::is_decimal) {
                        c.expr = c.expr.take().map(double);
                    }
                    for ((w, _), t) in c.when_then_expr.iter_mut().zip(&whens) {
                        if t.as_ref().is_some_and(DataType::is_decimal) {
                            let value = std::mem::replace(
                                w,
                                Box::new(Expr::Literal(
                                    datafusion::common::ScalarValue::Null,
                                    None,
                                )),
                            );
                            *w = double(value);
                        }
                    }
                    Transformed::yes(Expr::Case(c))
                } else {
                    Transformed::no(Expr::Case(c))
                }
            }
            other => Transformed::no(other),
        })
    })
}

/// An array cast Spark defines otherwise ([`spark_casts`]' rules for the casts a statement
/// plans, here for those tidemark makes itself: an INSERT's values into their columns, ...);
/// None for every other cast.
pub fn cast_array(
    values: &ArrayRef,
    to: &DataType,
    options: &datafusion::arrow::compute::CastOptions,
) -> Option<Result<ArrayRef, datafusion::arrow::error::ArrowError>> {
    use datafusion::arrow::compute::cast_with_options;
    let from = values.data_type();
    let text = matches!(
        to,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    );
    let arrow = |e: datafusion::error::DataFusionError| {
        datafusion::arrow::error::ArrowError::CastError(e.to_string())
    };
    if let Some(refused) = refused_binary_cast(from, to) {
        return Some(Err(datafusion::arrow::error::ArrowError::CastError(
            refused,
        )));
    }
    match from {
        t if text && spark_text(t) => Some(
            text_of(values)
                .map_err(arrow)
                .and_then(|t| cast_with_options(&t, to, options)),
        ),
        DataType::Float32 | DataType::Float64
            if matches!(to, DataType::Decimal128(..) | DataType::Decimal256(..)) =>
        {
            let plain = match plain_text(values) {
                Ok(p) => p,
                Err(e) => return Some(Err(arrow(e))),
            };
            Some(cast_with_options(&plain, to, options))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn java(v: f64) -> String {
        java_float(v, format!("{v}"), format!("{v:e}"))
    }

    #[test]
    fn doubles_as_java_writes_them() {
        assert_eq!(java(1e10), "1.0E10");
        assert_eq!(java(1e-5), "1.0E-5");
        assert_eq!(java(123456789.123), "1.23456789123E8");
        assert_eq!(java(1e7), "1.0E7");
        assert_eq!(java(9999999.0), "9999999.0");
        assert_eq!(java(0.001), "0.001");
        assert_eq!(java(0.0001), "1.0E-4");
        assert_eq!(java(123.0), "123.0");
        assert_eq!(java(-1.5), "-1.5");
        assert_eq!(java(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(java(0.0), "0.0");
        assert_eq!(java(-0.0), "-0.0");
        assert_eq!(java(f64::NAN), "NaN");
        assert_eq!(java(f64::NEG_INFINITY), "-Infinity");
        let f = 12345678f32;
        assert_eq!(
            java_float(f as f64, format!("{f}"), format!("{f:e}")),
            "1.2345678E7"
        );
    }

    #[test]
    fn timestamps_as_spark_writes_them() {
        let la: Tz = "America/Los_Angeles".parse().unwrap();
        // 2021-03-14 10:30:00 UTC.
        let us = 1_615_717_800_000_000;
        assert_eq!(
            timestamp_text(us, 1_000_000, None).unwrap(),
            "2021-03-14 10:30:00"
        );
        assert_eq!(
            timestamp_text(us, 1_000_000, Some(&la)).unwrap(),
            "2021-03-14 03:30:00"
        );
        assert_eq!(
            timestamp_text(us + 500_000, 1_000_000, None).unwrap(),
            "2021-03-14 10:30:00.5"
        );
        assert_eq!(
            timestamp_text(-1, 1_000_000, None).unwrap(),
            "1969-12-31 23:59:59.999999"
        );
    }

    /// Timestamps as Spark's cast reads them, written for the engine's parser.
    #[test]
    fn timestamps_as_spark_reads_them() {
        for (text, written) in [
            (" 2024-05-17 10:00 ", "2024-05-17T10:00:00"),
            ("2024-05-17T9:5", "2024-05-17T09:05:00"),
            ("2024-05-17 10:00:01.5+02:00", "2024-05-17T10:00:01.5+02:00"),
            ("2024-05-17 10:00Z", "2024-05-17T10:00:00Z"),
            ("2024-5-7", "2024-05-07"),
            ("2024-05-17", "2024-05-17"),
            ("2024-05-17 x", "2024-05-17 x"),
            ("2024-05-17 10:", "2024-05-17 10:"),
            ("2024-05-17 10:00:", "2024-05-17 10:00:"),
            ("nonsense", "nonsense"),
        ] {
            assert_eq!(spark_timestamp_text(text), written, "{text:?}");
        }
    }

    /// The forms of a date Spark's cast from text reads, and what it refuses.
    #[test]
    fn dates_as_spark_reads_them() {
        for (text, date) in [
            (" 2024-05-17 ", Some("2024-05-17")),
            ("2024-05-17 10:00", Some("2024-05-17")),
            ("2024-05-17T10:00:00Z", Some("2024-05-17")),
            ("2024-5-7", Some("2024-05-07")),
            ("2024-05", Some("2024-05-01")),
            ("2024", Some("2024-01-01")),
            ("\t2024-05-17\n", Some("2024-05-17")),
            ("2024-02-30", None),
            ("2024-05 10:00", None),
            ("24-05-17", None),
            ("2024/05/17", None),
            ("2024-05-17x", None),
            ("20240517", None),
            ("2024-05-17t10:00", None),
            ("", None),
        ] {
            assert_eq!(spark_date(text).as_deref(), date, "{text:?}");
        }
    }
}
