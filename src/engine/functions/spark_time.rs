//! `timestampadd(unit, n, ts)` and `timestampdiff(unit, start, end)` (also spelled
//! `dateadd`/`datediff` with three arguments), as Spark computes them in UTC: units up to WEEK
//! count exact microseconds (a difference truncated toward zero); MONTH, QUARTER and YEAR go
//! by the calendar (adding clamps to the month's last day; a difference counts whole months,
//! so Jan 31 to Feb 28 is 0 months). The unit arrives as a string: the binder turns the
//! written keyword (`HOUR`) into one.

use std::sync::Arc;

use chrono::{DateTime, Months, NaiveDateTime};
use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{Array, ArrayRef, Int64Array, TimestampMicrosecondArray};
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// TIMESTAMP in the session's zone.
fn ts_type(zone: &Arc<str>) -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some(zone.clone()))
}

/// The session's zone, from the configuration a function is built or updated with.
fn zone_of(config: &datafusion::config::ConfigOptions) -> Arc<str> {
    Arc::from(config.execution.time_zone.as_deref().unwrap_or("UTC"))
}

/// The wall-clock time an instant reads in `zone`.
fn local(us: i64, zone: &Tz) -> Option<NaiveDateTime> {
    DateTime::from_timestamp_micros(us).map(|d| d.with_timezone(zone).naive_local())
}

/// The instant a wall-clock time in `zone` names: the earlier of two in a repeated hour, and
/// in a skipped one the time as far past the gap (`java.time`'s rule, which Spark follows).
fn instant(t: NaiveDateTime, zone: &Tz) -> Option<i64> {
    use chrono::TimeZone;
    match zone.from_local_datetime(&t) {
        chrono::LocalResult::Single(d) | chrono::LocalResult::Ambiguous(d, _) => {
            Some(d.timestamp_micros())
        }
        chrono::LocalResult::None => {
            // The offset before the gap, applied to the wall-clock time.
            let before = zone
                .from_local_datetime(&(t - chrono::Duration::days(1)))
                .earliest()?;
            let offset = chrono::Offset::fix(before.offset()).local_minus_utc() as i64;
            Some(t.and_utc().timestamp_micros() - offset * 1_000_000)
        }
    }
}

fn parse_zone(zone: &str) -> datafusion::error::Result<Tz> {
    zone.parse::<Tz>()
        .map_err(|e| datafusion::error::DataFusionError::Execution(e.to_string()))
}

/// A unit: microseconds per unit (a fixed length), days or months per unit (on the calendar
/// of the session's zone, as Spark adds them).
enum Unit {
    Micros(i64),
    Days(i64),
    Months(u32),
}

fn unit(name: &str) -> datafusion::error::Result<Unit> {
    Ok(match name.to_uppercase().as_str() {
        "MICROSECOND" => Unit::Micros(1),
        "MILLISECOND" => Unit::Micros(1_000),
        "SECOND" => Unit::Micros(1_000_000),
        "MINUTE" => Unit::Micros(60_000_000),
        "HOUR" => Unit::Micros(3_600_000_000),
        "DAY" | "DAYOFYEAR" => Unit::Days(1),
        "WEEK" => Unit::Days(7),
        "MONTH" => Unit::Months(1),
        "QUARTER" => Unit::Months(3),
        "YEAR" => Unit::Months(12),
        other => {
            return plan_err!(
                "unit {other} is not a datetime unit (MICROSECOND, MILLISECOND, SECOND, MINUTE, HOUR, DAY, DAYOFYEAR, WEEK, MONTH, QUARTER, YEAR)"
            );
        }
    })
}

/// The unit argument, which must be a constant.
fn unit_of(args: &ScalarFunctionArgs, name: &str) -> datafusion::error::Result<Unit> {
    match &args.args[0] {
        ColumnarValue::Scalar(ScalarValue::Utf8(Some(u)) | ScalarValue::Utf8View(Some(u))) => {
            unit(u)
        }
        _ => exec_err!("{name}: the unit is a keyword (HOUR, DAY, MONTH, ...)"),
    }
}

fn micros(
    v: &ColumnarValue,
    n: usize,
    zone: &Arc<str>,
) -> datafusion::error::Result<TimestampMicrosecondArray> {
    let a = v.to_array(n)?;
    let a = datafusion::arrow::compute::cast(&a, &ts_type(zone))?;
    Ok(datafusion::arrow::array::as_primitive_array::<
        datafusion::arrow::datatypes::TimestampMicrosecondType,
    >(&a)
    .clone())
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct TimestampAdd {
    signature: Signature,
    zone: Arc<str>,
}

impl TimestampAdd {
    pub(super) fn new(config: &datafusion::config::ConfigOptions) -> Self {
        TimestampAdd {
            signature: Signature::user_defined(Volatility::Immutable),
            zone: zone_of(config),
        }
    }
}

impl ScalarUDFImpl for TimestampAdd {
    fn name(&self) -> &str {
        "timestampadd"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, args: &[DataType]) -> datafusion::error::Result<Vec<DataType>> {
        if args.len() != 3 {
            return plan_err!("timestampadd takes (unit, quantity, timestamp)");
        }
        Ok(vec![DataType::Utf8, DataType::Int64, ts_type(&self.zone)])
    }
    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(ts_type(&self.zone))
    }
    fn with_updated_config(
        &self,
        config: &datafusion::config::ConfigOptions,
    ) -> Option<datafusion::logical_expr::ScalarUDF> {
        Some(Self::new(config).into())
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let n = args.number_rows;
        let unit = unit_of(&args, "timestampadd")?;
        let qty = args.args[1].to_array(n)?;
        let qty = datafusion::arrow::array::as_primitive_array::<
            datafusion::arrow::datatypes::Int64Type,
        >(&qty);
        let ts = micros(&args.args[2], n, &self.zone)?;
        let tz = parse_zone(&self.zone)?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            if qty.is_null(i) || ts.is_null(i) {
                out.push(None);
                continue;
            }
            let (q, t) = (qty.value(i), ts.value(i));
            let v = match unit {
                Unit::Micros(per) => q.checked_mul(per).and_then(|d| t.checked_add(d)),
                Unit::Days(per) => local(t, &tz).and_then(|d| {
                    let days = q.checked_mul(per)?;
                    instant(
                        d.checked_add_signed(chrono::Duration::try_days(days)?)?,
                        &tz,
                    )
                }),
                Unit::Months(per) => local(t, &tz).and_then(|d| {
                    let months = q.checked_mul(per as i64)?;
                    let shifted = if months >= 0 {
                        d.checked_add_months(Months::new(u32::try_from(months).ok()?))
                    } else {
                        d.checked_sub_months(Months::new(
                            u32::try_from(months.unsigned_abs()).ok()?,
                        ))
                    }?;
                    instant(shifted, &tz)
                }),
            };
            match v {
                Some(v) => out.push(Some(v)),
                None => {
                    return exec_err!(
                        "[DATETIME_OVERFLOW] timestampadd: the result is out of range"
                    );
                }
            }
        }
        let array = TimestampMicrosecondArray::from(out).with_timezone(self.zone.clone());
        Ok(ColumnarValue::Array(Arc::new(array) as ArrayRef))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct TimestampDiff {
    signature: Signature,
    zone: Arc<str>,
}

impl TimestampDiff {
    pub(super) fn new(config: &datafusion::config::ConfigOptions) -> Self {
        TimestampDiff {
            signature: Signature::user_defined(Volatility::Immutable),
            zone: zone_of(config),
        }
    }
}

/// Whole months from `a` to `b` (negative when b is earlier), as Java's
/// `LocalDateTime.until(b, MONTHS)` counts them (Spark's rule): the end date moves back a day
/// when its time of day is earlier than the start's (forward when later, going backwards),
/// then months are counted on (month * 32 + day).
fn months_between(a: NaiveDateTime, b: NaiveDateTime) -> i64 {
    use chrono::Datelike;
    let mut end = b.date();
    if end > a.date() && b.time() < a.time() {
        end = end.pred_opt().unwrap_or(end);
    } else if end < a.date() && b.time() > a.time() {
        end = end.succ_opt().unwrap_or(end);
    }
    let packed =
        |d: chrono::NaiveDate| (d.year() as i64 * 12 + d.month0() as i64) * 32 + d.day() as i64;
    (packed(end) - packed(a.date())) / 32
}
impl ScalarUDFImpl for TimestampDiff {
    fn name(&self) -> &str {
        "timestampdiff"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, args: &[DataType]) -> datafusion::error::Result<Vec<DataType>> {
        if args.len() != 3 {
            return plan_err!("timestampdiff takes (unit, start, end)");
        }
        Ok(vec![
            DataType::Utf8,
            ts_type(&self.zone),
            ts_type(&self.zone),
        ])
    }
    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Int64)
    }
    fn with_updated_config(
        &self,
        config: &datafusion::config::ConfigOptions,
    ) -> Option<datafusion::logical_expr::ScalarUDF> {
        Some(Self::new(config).into())
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let n = args.number_rows;
        let unit = unit_of(&args, "timestampdiff")?;
        let start = micros(&args.args[1], n, &self.zone)?;
        let end = micros(&args.args[2], n, &self.zone)?;
        let tz = parse_zone(&self.zone)?;
        let out: Int64Array = (0..n)
            .map(|i| {
                if start.is_null(i) || end.is_null(i) {
                    return None;
                }
                let (s, e) = (start.value(i), end.value(i));
                match unit {
                    // Spark counts every unit between the wall-clock times in the zone.
                    Unit::Micros(per) => {
                        let span = (local(e, &tz)? - local(s, &tz)?).num_microseconds()?;
                        Some(span / per)
                    }
                    Unit::Days(per) => {
                        let span = (local(e, &tz)? - local(s, &tz)?).num_microseconds()?;
                        Some(span / (per * 86_400_000_000))
                    }
                    Unit::Months(per) => {
                        Some(months_between(local(s, &tz)?, local(e, &tz)?) / per as i64)
                    }
                }
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out) as ArrayRef))
    }
}

/// `CAST(x AS TIMESTAMP)` as Databricks reads it (the binder writes it as this function): a
/// number is seconds since the epoch (a fraction keeps its microseconds, a DECIMAL exactly), a
/// string is parsed strictly (a bad one is an error, as in ANSI mode), a date or timestamp is
/// cast. `TRY_CAST` is the same function in its `try` form: NULL where the cast would fail.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct ToTimestamp {
    signature: Signature,
    try_: bool,
    zone: Arc<str>,
}

/// The function the binder writes `CAST(x AS TIMESTAMP)` as.
pub const TO_TIMESTAMP: &str = "__tidemark_timestamp";
/// ... and `TRY_CAST(x AS TIMESTAMP)`.
pub const TRY_TO_TIMESTAMP: &str = "__tidemark_try_timestamp";

impl ToTimestamp {
    pub(super) fn new(try_: bool, config: &datafusion::config::ConfigOptions) -> Self {
        ToTimestamp {
            signature: Signature::any(1, Volatility::Immutable),
            try_,
            zone: zone_of(config),
        }
    }

    /// Microseconds for `us`, or the overflow: NULL for TRY_CAST, else the error.
    fn checked(
        &self,
        us: Option<i64>,
        shown: &dyn std::fmt::Display,
    ) -> datafusion::error::Result<Option<i64>> {
        match us {
            Some(us) => Ok(Some(us)),
            None if self.try_ => Ok(None),
            None => exec_err!("[CAST_OVERFLOW] {shown} seconds is out of the TIMESTAMP range"),
        }
    }
}

impl ScalarUDFImpl for ToTimestamp {
    fn name(&self) -> &str {
        if self.try_ {
            TRY_TO_TIMESTAMP
        } else {
            TO_TIMESTAMP
        }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(ts_type(&self.zone))
    }
    fn with_updated_config(
        &self,
        config: &datafusion::config::ConfigOptions,
    ) -> Option<datafusion::logical_expr::ScalarUDF> {
        Some(Self::new(self.try_, config).into())
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        use datafusion::arrow::array::as_primitive_array;
        use datafusion::arrow::datatypes::{Decimal128Type, Float64Type, Int64Type};
        let n = args.number_rows;
        let mut values = args.args[0].to_array(n)?;
        // A dictionary (a partition column) is read as its values.
        if let DataType::Dictionary(_, v) = values.data_type() {
            let v = v.as_ref().clone();
            values = datafusion::arrow::compute::cast(&values, &v)?;
        }
        let t = values.data_type().clone();
        let mut out: Vec<Option<i64>> = Vec::with_capacity(n);
        if t.is_integer() {
            let secs = datafusion::arrow::compute::cast(&values, &DataType::Int64)?;
            for v in as_primitive_array::<Int64Type>(&secs).iter() {
                out.push(match v {
                    None => None,
                    Some(s) => self.checked(s.checked_mul(1_000_000), &s)?,
                });
            }
        } else if let DataType::Decimal128(_, scale) = t {
            let secs = as_primitive_array::<Decimal128Type>(&values);
            for v in secs.iter() {
                let Some(v) = v else {
                    out.push(None);
                    continue;
                };
                // Exact: the unscaled value moved to six decimals, truncated.
                let us = if scale <= 6 {
                    10i128
                        .checked_pow((6 - scale) as u32)
                        .and_then(|f| v.checked_mul(f))
                } else {
                    10i128.checked_pow((scale - 6) as u32).map(|f| v / f)
                };
                let us = us.and_then(|us| i64::try_from(us).ok());
                out.push(self.checked(us, &v)?);
            }
        } else if t.is_floating() || matches!(t, DataType::Decimal256(_, _)) {
            let secs = datafusion::arrow::compute::cast(&values, &DataType::Float64)?;
            for v in as_primitive_array::<Float64Type>(&secs).iter() {
                out.push(match v {
                    None => None,
                    Some(s) => {
                        let us = (s.is_finite() && (s * 1e6).abs() < i64::MAX as f64)
                            .then(|| (s * 1e6).trunc() as i64);
                        self.checked(us, &s)?
                    }
                });
            }
        } else if matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) {
            // As Spark reads it: trimmed, a time without seconds, ...
            let values = super::spark_casts::timestamp_texts(&values)?;
            let cast = if self.try_ {
                datafusion::arrow::compute::cast(&values, &ts_type(&self.zone))?
            } else {
                crate::engine::types::cast_strict(&values, &ts_type(&self.zone))
                    .map_err(|e| datafusion::error::DataFusionError::Execution(e.to_string()))?
            };
            return Ok(ColumnarValue::Array(cast));
        } else if matches!(
            t,
            DataType::Timestamp(_, None) | DataType::Date32 | DataType::Date64
        ) {
            // A wall-clock time (a date's midnight) in the session's zone: in a repeated hour
            // the earlier instant, in a skipped one the time past the gap (Spark's rule).
            use datafusion::arrow::datatypes::TimestampMicrosecondType;
            let tz = parse_zone(&self.zone)?;
            let naive = datafusion::arrow::compute::cast(
                &values,
                &DataType::Timestamp(TimeUnit::Microsecond, None),
            )?;
            for v in as_primitive_array::<TimestampMicrosecondType>(&naive).iter() {
                out.push(match v {
                    None => None,
                    Some(us) => {
                        let at = DateTime::from_timestamp_micros(us).map(|d| d.naive_utc());
                        self.checked(at.and_then(|t| instant(t, &tz)), &us)?
                    }
                });
            }
        } else if matches!(t, DataType::Boolean) {
            if self.try_ {
                out = vec![None; n];
            } else {
                return exec_err!("[DATATYPE_MISMATCH] cannot cast a BOOLEAN to TIMESTAMP");
            }
        } else {
            return Ok(ColumnarValue::Array(datafusion::arrow::compute::cast(
                &values,
                &ts_type(&self.zone),
            )?));
        }
        Ok(ColumnarValue::Array(Arc::new(
            TimestampMicrosecondArray::from(out).with_timezone(self.zone.clone()),
        )))
    }
}
