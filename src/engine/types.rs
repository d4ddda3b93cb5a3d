//! SQL type names <-> Arrow types <-> Delta types, in one place, so a `TIMESTAMP` means
//! the same thing in CREATE TABLE, DECLARE, CAST and the copy's watermark.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{
    self as sql, ExactNumberInfo, Expr, TimezoneInfo, Value, ValueWithSpan,
};

use crate::error::{Error, Result};

/// Delta's TIMESTAMP: microseconds, UTC-zoned.
pub fn timestamp_utc() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// Map a SQL type (Databricks names) to the Arrow type a Delta table stores.
pub fn sql_to_arrow(t: &sql::DataType) -> Result<DataType> {
    use sql::DataType as S;
    Ok(match t {
        S::String(_)
        | S::Varchar(_)
        | S::Text
        | S::Char(_)
        | S::CharVarying(_)
        | S::Nvarchar(_) => DataType::Utf8,
        S::Int(_) | S::Integer(_) | S::Int4(_) => DataType::Int32,
        S::BigInt(_) | S::Int8(_) | S::Int64 => DataType::Int64,
        S::SmallInt(_) | S::Int2(_) | S::Int16 => DataType::Int16,
        S::TinyInt(_) => DataType::Int8,
        S::Float(_) | S::Real | S::Float4 | S::Float32 => DataType::Float32,
        S::Double(_) | S::DoublePrecision | S::Float8 | S::Float64 => DataType::Float64,
        S::Boolean | S::Bool => DataType::Boolean,
        S::Date => DataType::Date32,
        S::Timestamp(_, TimezoneInfo::WithoutTimeZone) | S::TimestampNtz(_) => {
            DataType::Timestamp(TimeUnit::Microsecond, None)
        }
        S::Timestamp(_, _) => timestamp_utc(),
        S::Binary(_) | S::Bytea | S::Varbinary(_) | S::Blob(_) => DataType::Binary,
        S::Decimal(info) | S::Numeric(info) | S::Dec(info) => match info {
            ExactNumberInfo::None => DataType::Decimal128(10, 0),
            ExactNumberInfo::Precision(p) => DataType::Decimal128(*p as u8, 0),
            ExactNumberInfo::PrecisionAndScale(p, s) => DataType::Decimal128(*p as u8, *s as i8),
        },
        S::Array(sql::ArrayElemTypeDef::AngleBracket(inner))
        | S::Array(sql::ArrayElemTypeDef::Parenthesis(inner))
        | S::Array(sql::ArrayElemTypeDef::SquareBracket(inner, _)) => {
            DataType::List(Arc::new(Field::new("element", sql_to_arrow(inner)?, true)))
        }
        S::Struct(fields, _) => {
            let mut out = vec![];
            for (i, f) in fields.iter().enumerate() {
                let name = f
                    .field_name
                    .as_ref()
                    .map(|n| n.value.clone())
                    .ok_or_else(|| Error::Type(format!("STRUCT field {} has no name", i + 1)))?;
                out.push(Field::new(name, sql_to_arrow(&f.field_type)?, true));
            }
            DataType::Struct(out.into())
        }
        S::Map(key, value) => {
            let entries = Field::new(
                "key_value",
                DataType::Struct(
                    vec![
                        Field::new("key", sql_to_arrow(key)?, false),
                        Field::new("value", sql_to_arrow(value)?, true),
                    ]
                    .into(),
                ),
                false,
            );
            DataType::Map(Arc::new(entries), false)
        }
        S::Custom(name, args) => {
            let n = name.to_string().to_uppercase();
            match n.as_str() {
                "LONG" => DataType::Int64,
                "SHORT" => DataType::Int16,
                "BYTE" => DataType::Int8,
                "TIMESTAMP_LTZ" => timestamp_utc(),
                "TIMESTAMP_NTZ" => DataType::Timestamp(TimeUnit::Microsecond, None),
                _ => {
                    return Err(Error::Type(format!(
                        "unknown type {name}{}: use STRING, INT, BIGINT, DOUBLE, DECIMAL(p,s), BOOLEAN, DATE, TIMESTAMP or TIMESTAMP_NTZ",
                        if args.is_empty() {
                            String::new()
                        } else {
                            format!("({})", args.join(", "))
                        }
                    )));
                }
            }
        }
        other => {
            return Err(Error::Type(format!(
                "type {other} is not supported in tables and variables"
            )));
        }
    })
}

/// The Databricks SQL name of an Arrow type, for DESCRIBE and messages.
pub fn type_name(t: &DataType) -> String {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "STRING".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::Float32 => "FLOAT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Date32 => "DATE".into(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP".into(),
        DataType::Timestamp(_, None) => "TIMESTAMP_NTZ".into(),
        DataType::Decimal128(p, s) => format!("DECIMAL({p},{s})"),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "BINARY".into(),
        DataType::Null => "VOID".into(),
        // A partition column as delta-rs reads it: its values' type.
        DataType::Dictionary(_, v) => type_name(v),
        DataType::List(f) | DataType::LargeList(f) | DataType::ListView(f) => {
            format!("ARRAY<{}>", type_name(f.data_type()))
        }
        DataType::Struct(fields) => format!(
            "STRUCT<{}>",
            fields
                .iter()
                .map(|f| format!("{}: {}", f.name(), type_name(f.data_type())))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => format!(
                "MAP<{}, {}>",
                type_name(kv[0].data_type()),
                type_name(kv[1].data_type())
            ),
            other => other.to_string(),
        },
        other => other.to_string(),
    }
}

/// The one strict cast: a value that does not fit the type is an error, never NULL (Arrow's
/// plain `cast` turns it into NULL, a silent wrong answer).
pub fn cast_strict(
    values: &datafusion::arrow::array::ArrayRef,
    to: &DataType,
) -> std::result::Result<datafusion::arrow::array::ArrayRef, datafusion::arrow::error::ArrowError> {
    if values.data_type() == to {
        return Ok(values.clone());
    }
    // Arrow would wrap a scalar into a one-element list ('[a, b]' becoming ['[a, b]']).
    if to.is_nested() && !values.data_type().is_nested() && !values.data_type().is_null() {
        return Err(datafusion::arrow::error::ArrowError::CastError(format!(
            "cannot cast {} to {}",
            type_name(values.data_type()),
            type_name(to)
        )));
    }
    let strict = datafusion::arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    // A TIMESTAMP or DOUBLE as text, a DOUBLE as a DECIMAL: as Spark casts them.
    if let Some(cast) = crate::engine::functions::spark_cast_array(values, to, &strict) {
        return cast;
    }
    // Text bound for a UTC timestamp is read as a zone-less one (which Arrow reads as UTC:
    // the same instants) and labelled UTC, sparing a zone lookup for every value.
    if let (
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View,
        DataType::Timestamp(unit, Some(zone)),
    ) = (values.data_type(), to)
        && crate::engine::zone::is_utc(zone)
    {
        let naive = text_to_naive(values, *unit, &strict)?;
        return labelled(&naive, zone);
    }
    // A zone-less timestamp bound for a UTC one: Arrow's cast reads it as a wall-clock time in
    // UTC, the same number; labelled without a zone lookup for every value.
    if let (DataType::Timestamp(from, None), DataType::Timestamp(unit, Some(zone))) =
        (values.data_type(), to)
        && from == unit
        && crate::engine::zone::is_utc(zone)
    {
        return labelled(values, zone);
    }
    // Text bound for a TIMESTAMP_NTZ is its wall-clock time: a zone after it is dropped, as
    // Spark reads it (Arrow's cast would apply it).
    if let (
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View,
        DataType::Timestamp(unit, None),
    ) = (values.data_type(), to)
    {
        return text_to_naive(&without_zones(values)?, *unit, &strict);
    }
    // A zoned timestamp becomes a zone-less one as its wall-clock time in its zone (the
    // session's), as Spark casts TIMESTAMP to TIMESTAMP_NTZ; Arrow keeps UTC's.
    if let (DataType::Timestamp(_, Some(zone)), DataType::Timestamp(_, None)) =
        (values.data_type(), to)
    {
        let local = wall_clock(values, zone)?;
        return datafusion::arrow::compute::cast_with_options(&local, to, &strict);
    }
    datafusion::arrow::compute::cast_with_options(values, to, &strict)
}

/// Text that names a time and then a zone (`+02:00`, `Z`, ` America/New_York`, after the
/// time as Arrow's parser reads it) without the zone: the wall-clock time, which is what
/// Spark reads as a TIMESTAMP_NTZ. None when there is no zone to drop (a zone that does not
/// read is left for the parser's error).
pub fn wall_clock_text(s: &str) -> Option<&str> {
    let bytes = s.as_bytes();
    if bytes.len() <= 11 || !matches!(bytes[10], b'T' | b't' | b' ') {
        return None;
    }
    let end = 11
        + bytes[11..]
            .iter()
            .take_while(|b| b.is_ascii_digit() || matches!(b, b':' | b'.'))
            .count();
    let zone = s[end..].trim_start();
    if zone.is_empty() {
        return None;
    }
    // (`Z` right after the time, as Arrow's parser takes it.)
    let known = s[end..].eq_ignore_ascii_case("z")
        || zone
            .parse::<datafusion::arrow::array::timezone::Tz>()
            .is_ok();
    known.then(|| &s[..end])
}

/// Text values with the zone after each time dropped ([`wall_clock_text`]); the values
/// themselves when none has one.
pub fn without_zones(
    values: &datafusion::arrow::array::ArrayRef,
) -> std::result::Result<datafusion::arrow::array::ArrayRef, datafusion::arrow::error::ArrowError> {
    use datafusion::arrow::array::{Array, AsArray, StringArray};
    let text = datafusion::arrow::compute::cast(values, &DataType::Utf8)?;
    let strings = text.as_string::<i32>();
    if !strings
        .iter()
        .flatten()
        .any(|s| wall_clock_text(s).is_some())
    {
        return Ok(values.clone());
    }
    let dropped: StringArray = strings
        .iter()
        .map(|v| v.map(|s| wall_clock_text(s).unwrap_or(s)))
        .collect();
    debug_assert_eq!(dropped.len(), values.len());
    Ok(Arc::new(dropped))
}

/// Text as zone-less timestamps of `unit`, as Arrow's cast reads it (a zone in the text is
/// applied: the UTC time). Microseconds written the plain way (`2024-01-01 10:00:00`, with
/// `T` or a fraction) are read by [`plain_micros`]; if any value is written otherwise, the
/// whole array goes through Arrow's cast.
fn text_to_naive(
    values: &datafusion::arrow::array::ArrayRef,
    unit: TimeUnit,
    strict: &datafusion::arrow::compute::CastOptions,
) -> std::result::Result<datafusion::arrow::array::ArrayRef, datafusion::arrow::error::ArrowError> {
    use datafusion::arrow::array::{Array, AsArray, TimestampMicrosecondArray};
    let arrow = || {
        datafusion::arrow::compute::cast_with_options(
            values,
            &DataType::Timestamp(unit, None),
            strict,
        )
    };
    if unit != TimeUnit::Microsecond || values.data_type() != &DataType::Utf8 {
        return arrow();
    }
    let text = values.as_string::<i32>();
    let mut micros = Vec::with_capacity(text.len());
    for i in 0..text.len() {
        if text.is_null(i) {
            micros.push(0);
            continue;
        }
        match plain_micros(text.value(i).as_bytes()) {
            Some(us) => micros.push(us),
            None => return arrow(),
        }
    }
    Ok(Arc::new(TimestampMicrosecondArray::new(
        micros.into(),
        text.nulls().cloned(),
    )))
}

/// Microseconds since 1970 (UTC) of text written `YYYY-MM-DD HH:MM:SS` (`T` or `t` between,
/// and up to nine digits of a fraction after a `.`), and nothing else: the value Arrow's
/// parser gives it (a fraction finer than a microsecond dropped, as its cast does). None for
/// any other text, and for a date or time that does not exist, which Arrow then reads or
/// refuses itself.
pub fn plain_micros(s: &[u8]) -> Option<i64> {
    if s.len() < 19 || s.len() == 20 || s.len() > 29 {
        return None;
    }
    let digit = |i: usize| {
        let d = s[i].wrapping_sub(b'0');
        (d < 10).then_some(d as i64)
    };
    let two = |i: usize| Some(digit(i)? * 10 + digit(i + 1)?);
    if s[4] != b'-'
        || s[7] != b'-'
        || !matches!(s[10], b' ' | b'T' | b't')
        || s[13] != b':'
        || s[16] != b':'
    {
        return None;
    }
    let year = two(0)? * 100 + two(2)?;
    let (month, day) = (two(5)?, two(8)?);
    let (hour, minute, second) = (two(11)?, two(14)?, two(17)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    if day == 0 || day > month_days || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut micros_in_second = 0;
    if s.len() > 19 {
        if s[19] != b'.' {
            return None;
        }
        let mut nanos = 0;
        for i in 20..s.len() {
            nanos = nanos * 10 + digit(i)?;
        }
        micros_in_second = nanos * 10i64.pow((29 - s.len()) as u32) / 1000;
    }
    // Days since 1970-01-01 in the proleptic Gregorian calendar (a year from March on).
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * m + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second;
    Some(seconds * 1_000_000 + micros_in_second)
}

/// The zone-less timestamps `naive` as the same numbers labelled `zone`.
fn labelled(
    naive: &datafusion::arrow::array::ArrayRef,
    zone: &Arc<str>,
) -> std::result::Result<datafusion::arrow::array::ArrayRef, datafusion::arrow::error::ArrowError> {
    let DataType::Timestamp(unit, _) = naive.data_type() else {
        return Err(datafusion::arrow::error::ArrowError::CastError(format!(
            "{} is not a timestamp",
            naive.data_type()
        )));
    };
    let data = naive
        .to_data()
        .into_builder()
        .data_type(DataType::Timestamp(*unit, Some(zone.clone())))
        .build()?;
    Ok(datafusion::arrow::array::make_array(data))
}

/// A zoned timestamp array as zone-less microseconds: each instant's wall-clock time in `zone`.
fn wall_clock(
    values: &datafusion::arrow::array::ArrayRef,
    zone: &str,
) -> std::result::Result<datafusion::arrow::array::ArrayRef, datafusion::arrow::error::ArrowError> {
    use chrono::{Offset, TimeZone};
    use datafusion::arrow::array::{AsArray, TimestampMicrosecondArray};
    use datafusion::arrow::datatypes::TimestampMicrosecondType;
    let tz: datafusion::arrow::array::timezone::Tz = zone.parse()?;
    let micros = datafusion::arrow::compute::cast(
        values,
        &DataType::Timestamp(TimeUnit::Microsecond, Some(zone.into())),
    )?;
    let micros = micros.as_primitive::<TimestampMicrosecondType>();
    let local: TimestampMicrosecondArray = micros
        .iter()
        .map(|v| {
            v.map(|us| {
                let at = chrono::DateTime::from_timestamp_micros(us).unwrap_or_default();
                let offset = tz.offset_from_utc_datetime(&at.naive_utc()).fix();
                us + offset.local_minus_utc() as i64 * 1_000_000
            })
        })
        .collect();
    Ok(std::sync::Arc::new(local))
}

/// [`cast_strict`] for one value; NULL stays NULL, of the new type.
pub fn cast_value(
    value: &ScalarValue,
    to: &DataType,
) -> std::result::Result<ScalarValue, datafusion::arrow::error::ArrowError> {
    if &value.data_type() == to {
        return Ok(value.clone());
    }
    let cast = cast_strict(&value.to_array()?, to)?;
    ScalarValue::try_from_array(&cast, 0)
        .map_err(|e| datafusion::arrow::error::ArrowError::CastError(e.to_string()))
}

/// The type a value is stored as in a Delta table (strings as Utf8, timestamps as microseconds).
pub fn storage_type(t: &DataType) -> DataType {
    match t {
        DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
        DataType::BinaryView | DataType::LargeBinary => DataType::Binary,
        DataType::Timestamp(_, Some(_)) => timestamp_utc(),
        DataType::Timestamp(_, None) => DataType::Timestamp(TimeUnit::Microsecond, None),
        DataType::Null => DataType::Utf8,
        // delta-rs reads partition columns dictionary-encoded; Delta stores the values.
        DataType::Dictionary(_, values) => storage_type(values),
        other => other.clone(),
    }
}

/// Whether a column of type `a` and one of type `b` hold the same values once stored: equal
/// storage types, ignoring what Arrow adds beside the values (the name and nullability of a
/// list's element field, field metadata), at every nesting level.
pub fn same_stored_type(a: &DataType, b: &DataType) -> bool {
    match (storage_type(a), storage_type(b)) {
        (
            DataType::List(x) | DataType::LargeList(x),
            DataType::List(y) | DataType::LargeList(y),
        ) => same_stored_type(x.data_type(), y.data_type()),
        (DataType::Struct(x), DataType::Struct(y)) => {
            x.len() == y.len()
                && x.iter().zip(y.iter()).all(|(f, g)| {
                    f.name() == g.name() && same_stored_type(f.data_type(), g.data_type())
                })
        }
        (DataType::Map(x, _), DataType::Map(y, _)) => {
            same_stored_type(x.data_type(), y.data_type())
        }
        (x, y) => x == y,
    }
}

/// Convert an Arrow field to a Delta field.
pub fn arrow_to_delta(field: &Field) -> Result<deltalake::kernel::StructField> {
    use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
    let f = Field::new(
        field.name(),
        storage_type(field.data_type()),
        field.is_nullable(),
    );
    let kernel: deltalake::kernel::StructField = (&f)
        .try_into_kernel()
        .map_err(|e| Error::Type(format!("column '{}': {e}", field.name())))?;
    Ok(kernel)
}

/// A SQL type as text the parser reads back: `MAP<K, V>` where sqlparser writes ClickHouse's
/// `Map(K, V)`, at any depth.
pub fn type_text(t: &sql::DataType) -> String {
    use sql::{ArrayElemTypeDef as A, DataType as S};
    match t {
        S::Map(k, v) => format!("MAP<{}, {}>", type_text(k), type_text(v)),
        S::Array(A::AngleBracket(inner)) => format!("ARRAY<{}>", type_text(inner)),
        S::Struct(fields, _) => format!(
            "STRUCT<{}>",
            fields
                .iter()
                .map(|f| match &f.field_name {
                    Some(n) => format!("{n}: {}", type_text(&f.field_type)),
                    None => type_text(&f.field_type),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// A SQL expression that evaluates to exactly `value` (used to inline variables).
pub fn scalar_to_sql(value: &ScalarValue) -> Expr {
    let v = |x: Value| {
        Expr::Value(ValueWithSpan {
            value: x,
            span: datafusion::sql::sqlparser::tokenizer::Span::empty(),
        })
    };
    let cast = |e: Expr, t: &DataType| Expr::Cast {
        kind: sql::CastKind::Cast,
        expr: Box::new(e),
        data_type: sql_type_of(t),
        array: false,
        format: None,
    };
    if value.is_null() {
        return cast(v(Value::Null), &value.data_type());
    }
    match value {
        ScalarValue::Boolean(Some(b)) => v(Value::Boolean(*b)),
        ScalarValue::Int8(_)
        | ScalarValue::Int16(_)
        | ScalarValue::Int32(_)
        | ScalarValue::UInt8(_)
        | ScalarValue::UInt16(_)
        | ScalarValue::UInt32(_) => cast(
            v(Value::Number(value.to_string(), false)),
            &value.data_type(),
        ),
        ScalarValue::Int64(Some(i)) => v(Value::Number(i.to_string(), false)),
        ScalarValue::Float64(Some(f)) => cast(
            v(Value::SingleQuotedString(format!("{f:?}"))),
            &DataType::Float64,
        ),
        ScalarValue::Float32(Some(f)) => cast(
            v(Value::SingleQuotedString(format!("{f:?}"))),
            &DataType::Float32,
        ),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => v(Value::SingleQuotedString(s.clone())),
        other => cast(
            v(Value::SingleQuotedString(display_exact(other))),
            &other.data_type(),
        ),
    }
}

/// Text that casts back to exactly `value` (full sub-second precision, explicit zone).
pub fn display_exact(value: &ScalarValue) -> String {
    use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
    match value.to_array() {
        Ok(arr) => {
            let opts = FormatOptions::default();
            match ArrayFormatter::try_new(arr.as_ref(), &opts) {
                Ok(f) => f.value(0).to_string(),
                Err(_) => value.to_string(),
            }
        }
        Err(_) => value.to_string(),
    }
}

/// The SQL type that names an Arrow type in a CAST.
fn sql_type_of(t: &DataType) -> sql::DataType {
    use sql::DataType as S;
    match t {
        DataType::Int8 => S::TinyInt(None),
        DataType::Int16 | DataType::UInt8 => S::SmallInt(None),
        DataType::Int32 | DataType::UInt16 => S::Int(None),
        DataType::Int64 | DataType::UInt32 | DataType::UInt64 => S::BigInt(None),
        DataType::Float32 => S::Float(sql::ExactNumberInfo::None),
        DataType::Float64 => S::Double(sql::ExactNumberInfo::None),
        DataType::Boolean => S::Boolean,
        DataType::Date32 | DataType::Date64 => S::Date,
        DataType::Timestamp(_, Some(_)) => S::Timestamp(Some(6), TimezoneInfo::WithTimeZone),
        DataType::Timestamp(_, None) => S::Timestamp(Some(6), TimezoneInfo::WithoutTimeZone),
        DataType::Decimal128(p, s) => {
            S::Decimal(ExactNumberInfo::PrecisionAndScale(*p as u64, *s as i64))
        }
        DataType::Binary => S::Bytea,
        _ => S::String(None),
    }
}

/// Whether a column of this type is, or holds, a DECIMAL wider than 15 digits: more than a
/// float64 keeps exactly.
pub fn has_wide_decimal(t: &DataType) -> bool {
    match t {
        DataType::Decimal128(p, _) | DataType::Decimal256(p, _) => *p > 15,
        DataType::Struct(_)
        | DataType::List(_)
        | DataType::LargeList(_)
        | DataType::Map(_, _)
        | DataType::FixedSizeList(_, _) => format!("{t:?}").contains("Decimal"),
        _ => false,
    }
}

/// The table property that keeps Delta statistics exact: delta-rs writes DECIMAL statistics
/// through a double, which holds 15 significant digits, so `9007199254740993.00` was logged as
/// `...994.0` and file skipping then dropped the file holding it. Tables with wider decimals
/// list their other skippable columns (numbers, dates, timestamps, strings; not partition
/// columns, which Delta refuses there) in `delta.dataSkippingStatsColumns`, back-quoted; the
/// wide decimals get no statistics (absent statistics are never wrong). None when every
/// column is exact.
pub fn exact_stats_property(
    fields: &[(String, DataType)],
    partition_columns: &[String],
) -> Option<(String, String)> {
    if !fields.iter().any(|(_, t)| has_wide_decimal(t)) {
        return None;
    }
    let skippable = |t: &DataType| {
        t.is_integer()
            || t.is_floating()
            || matches!(
                t,
                DataType::Decimal128(_, _)
                    | DataType::Date32
                    | DataType::Date64
                    | DataType::Timestamp(_, _)
                    | DataType::Utf8
                    | DataType::LargeUtf8
                    | DataType::Utf8View
            )
    };
    let kept: Vec<String> = fields
        .iter()
        .filter(|(n, t)| !has_wide_decimal(t) && skippable(t) && !partition_columns.contains(n))
        .map(|(n, _)| crate::catalog::backquoted(n))
        .collect();
    if kept.is_empty() {
        return Some(("delta.dataSkippingNumIndexedCols".into(), "0".into()));
    }
    Some(("delta.dataSkippingStatsColumns".into(), kept.join(",")))
}

fn is_string(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => is_string(v),
        _ => false,
    }
}

/// `column` with its empty strings as NULL (see `catalog::string_partition_columns`).
pub fn empty_string_as_null(
    column: &datafusion::arrow::array::ArrayRef,
) -> Result<datafusion::arrow::array::ArrayRef> {
    use datafusion::arrow::array::{Array, BooleanArray, StringArray};
    use datafusion::arrow::compute::{cast, nullif};
    if !is_string(column.data_type()) {
        return Ok(column.clone());
    }
    let text = cast(column, &DataType::Utf8)?;
    let text = text
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| Error::Other("a string column did not cast to text".into()))?;
    if !text.iter().any(|v| v == Some("")) {
        return Ok(column.clone());
    }
    let empty: BooleanArray = text.iter().map(|v| Some(v == Some(""))).collect();
    Ok(cast(&nullif(text, &empty)?, column.data_type())?)
}

/// Rows with their `columns` passed through `empty_string_as_null`.
pub fn empty_strings_as_null_in(
    batch: &datafusion::arrow::array::RecordBatch,
    columns: &[String],
) -> Result<datafusion::arrow::array::RecordBatch> {
    if columns.is_empty() {
        return Ok(batch.clone());
    }
    let schema = batch.schema();
    let arrays = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, a)| {
            if columns.iter().any(|c| c.eq_ignore_ascii_case(f.name())) {
                empty_string_as_null(a)
            } else {
                Ok(a.clone())
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(datafusion::arrow::array::RecordBatch::try_new(
        schema, arrays,
    )?)
}

/// A DataFrame with its `columns` as `NULLIF(col, '')` (see `catalog::string_partition_columns`).
pub fn empty_strings_as_null_df(
    df: datafusion::dataframe::DataFrame,
    columns: &[String],
) -> Result<datafusion::dataframe::DataFrame> {
    use datafusion::prelude::{col, lit, nullif};
    if columns.is_empty() {
        return Ok(df);
    }
    let exprs: Vec<_> = df
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let c = col(datafusion::common::Column::from_name(f.name()));
            if columns.iter().any(|p| p.eq_ignore_ascii_case(f.name())) {
                nullif(c, lit("")).alias(f.name())
            } else {
                c
            }
        })
        .collect();
    Ok(df.select(exprs)?)
}

#[cfg(test)]
mod tests {
    use super::{plain_micros, wall_clock_text};

    /// The fast reading of plain timestamps gives Arrow's value for every text it takes, and
    /// leaves every other text (or a time that does not exist) to Arrow.
    #[test]
    fn plain_timestamps_read_as_arrow_reads_them() {
        use datafusion::arrow::compute::{CastOptions, cast_with_options};
        use datafusion::arrow::datatypes::{DataType, TimeUnit};
        let arrow = |s: &str| {
            let text: datafusion::arrow::array::ArrayRef =
                std::sync::Arc::new(datafusion::arrow::array::StringArray::from(vec![s]));
            let strict = CastOptions {
                safe: false,
                ..Default::default()
            };
            cast_with_options(
                &text,
                &DataType::Timestamp(TimeUnit::Microsecond, None),
                &strict,
            )
            .ok()
            .map(|a| {
                use datafusion::arrow::array::AsArray;
                a.as_primitive::<datafusion::arrow::datatypes::TimestampMicrosecondType>()
                    .value(0)
            })
        };
        let mut taken = 0;
        let mut texts: Vec<String> = [
            "1970-01-01 00:00:00",
            "1969-12-31 23:59:59.999999",
            "1969-12-31T23:59:59.9999999",
            "0001-01-01 00:00:00",
            "0000-03-01 00:00:00",
            "9999-12-31 23:59:59.999999999",
            "2024-02-29 12:34:56.5",
            "2023-02-29 12:34:56",
            "1900-02-29 00:00:00",
            "2000-02-29 00:00:00",
            "2024-13-01 00:00:00",
            "2024-00-10 00:00:00",
            "2024-04-31 00:00:00",
            "2024-01-01 24:00:00",
            "2024-01-01 23:60:00",
            "2024-01-01 23:59:60",
            "2024-01-01t10:00:00",
            "2024-01-01 10:00:00.",
            "2024-01-01 10:00:00Z",
            "2024-01-01 10:00:00+02:00",
            "2024-01-01 10:00",
            "2024-1-01 10:00:00",
            "+024-01-01 10:00:00",
            "2024-01-01 10:00:00.1234567890",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Every day of four years (a leap year among them), at a time with a fraction.
        let mut day = chrono::NaiveDate::from_ymd_opt(1999, 1, 1).unwrap();
        while day.year() < 2003 {
            texts.push(format!("{day} 13:14:15.016017"));
            day = day.succ_opt().unwrap();
        }
        use chrono::Datelike;
        for text in &texts {
            if let Some(us) = plain_micros(text.as_bytes()) {
                taken += 1;
                assert_eq!(Some(us), arrow(text), "{text}");
            }
        }
        assert!(taken > 1_400, "{taken}");
    }

    #[test]
    fn a_zone_after_the_time_is_dropped_and_nothing_else() {
        for (text, wall) in [
            ("2024-01-01 10:00:00+02:00", "2024-01-01 10:00:00"),
            ("2024-01-01T10:00:00.123456Z", "2024-01-01T10:00:00.123456"),
            ("2024-01-01T10:00:00-0500", "2024-01-01T10:00:00"),
            ("2024-01-01 10:00 America/New_York", "2024-01-01 10:00"),
            ("2024-01-01 10:00:00 +02:00", "2024-01-01 10:00:00"),
        ] {
            assert_eq!(wall_clock_text(text), Some(wall), "{text}");
        }
        for text in [
            "2024-01-01",
            "2024-01-01 10:00:00",
            "2024-01-01T10:00:00.5",
            "2024-01-01 10:00:00 nowhere",
            "20240101 10:00:00+02:00",
            "2024-01-01 10:00:00 Z",
        ] {
            assert_eq!(wall_clock_text(text), None, "{text}");
        }
    }
}
