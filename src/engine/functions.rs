//! Functions tidemark adds to DataFusion's, where Databricks users would otherwise get a
//! different answer: `date_format` with Spark's datetime patterns (DataFusion's own
//! `date_format` takes strftime patterns and returned `yyyy-MM-dd` as text), a checked
//! DECIMAL `sum`, `element_at` on arrays and maps (DataFusion's is maps only), and `arr[i]`
//! 0-based.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::{DataFusionError, ScalarValue, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

mod arithmetic;
pub use arithmetic::{AnsiArithmetic, INT_DIVIDE, checked_calls};
mod lambda;
pub use lambda::SORT_BY;
mod format;
mod percentile;
mod statistics;
pub use statistics::{DISTINCT_OF, DISTINCT_PREFIX};
mod rounding;
pub use rounding::{CEIL_TO, FLOOR_TO};
mod regex;
mod spark_time;
pub use spark_time::{TO_TIMESTAMP, TRY_TO_TIMESTAMP};
mod subscript;
pub use subscript::ZeroBasedSubscript;
mod guards;
mod spark_casts;
pub use guards::AsNullable;
pub use spark_casts::{
    FloatDecimalComparisons, LikeOperands, SparkCasts, cast_array as spark_cast_array,
    floats_compared_as_doubles, spark_casts,
};
mod array_insert;
mod byte_length;
mod map_cast;
mod mask;
mod murmur;
mod number_format;
mod type_of;
pub use map_cast::CAST_MAP;

/// A function of one argument computed array by array: `f` of the argument as an array, a
/// scalar again when the argument was one.
fn each_array(
    args: &ScalarFunctionArgs,
    f: impl Fn(&ArrayRef) -> datafusion::error::Result<ArrayRef>,
) -> datafusion::error::Result<ColumnarValue> {
    let out = f(&args.args[0].to_array(args.number_rows)?)?;
    Ok(match args.args[0] {
        ColumnarValue::Scalar(_) => ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?),
        ColumnarValue::Array(_) => ColumnarValue::Array(out),
    })
}

/// A function that takes BINARY but fails on the view type the Parquet reader gives a stored
/// BINARY column (`hex(b)`: "hex got an unexpected argument type: BinaryView"): its BINARY
/// argument given as plain BINARY, a number (or an untyped NULL) as a BIGINT, a partition
/// column's dictionary as its values.
#[derive(Debug, PartialEq, Eq, Hash)]
struct PlainBinary {
    inner: Arc<ScalarUDF>,
    signature: Signature,
}

impl ScalarUDFImpl for PlainBinary {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, args: &[DataType]) -> datafusion::error::Result<Vec<DataType>> {
        fn plain(t: &DataType) -> DataType {
            match t {
                DataType::BinaryView => DataType::Binary,
                DataType::Dictionary(_, v) => plain(v),
                DataType::Null => DataType::Int64,
                t if t.is_numeric() => DataType::Int64,
                t => t.clone(),
            }
        }
        Ok(args.iter().map(plain).collect())
    }
    fn return_type(&self, args: &[DataType]) -> datafusion::error::Result<DataType> {
        self.inner.return_type(args)
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        self.inner.invoke_with_args(args)
    }
}

/// Register tidemark's functions on a session context.
pub fn register(ctx: &datafusion::prelude::SessionContext) {
    ctx.register_udf(ScalarUDF::from(type_of::TypeOf::new()));
    ctx.register_udf(ScalarUDF::from(murmur::Murmur3::new()));
    ctx.register_udf(ScalarUDF::from(mask::Mask::new()));
    ctx.register_udf(ScalarUDF::from(array_insert::ArrayInsert::new()));
    for f in byte_length::ByteLength::udfs() {
        ctx.register_udf(f);
    }
    if let Ok(hex) = datafusion::execution::FunctionRegistry::udf(ctx, "hex") {
        ctx.register_udf(ScalarUDF::from(PlainBinary {
            inner: hex,
            signature: Signature::user_defined(Volatility::Immutable),
        }));
    }
    ctx.register_udf(ScalarUDF::from(number_format::ToChar::new()));
    for f in number_format::ToNumber::udfs() {
        ctx.register_udf(f);
    }
    ctx.register_udf(ScalarUDF::from(map_cast::CastMap::new()));
    for f in arithmetic::udfs() {
        ctx.register_udf(f);
    }
    let round = datafusion::execution::FunctionRegistry::udf(ctx, "round").ok();
    for f in rounding::udfs(round) {
        ctx.register_udf(f);
    }
    for f in lambda::functions() {
        ctx.register_higher_order_function(f);
    }
    let config = ctx.copied_config();
    let config = config.options();
    ctx.register_udf(ScalarUDF::from(spark_time::TimestampAdd::new(config)));
    ctx.register_udf(ScalarUDF::from(spark_time::ToTimestamp::new(false, config)));
    ctx.register_udf(ScalarUDF::from(spark_time::ToTimestamp::new(true, config)));
    ctx.register_udf(ScalarUDF::from(spark_time::TimestampDiff::new(config)));
    ctx.register_udf(ScalarUDF::from(regex::RegexList::split()));
    ctx.register_udf(ScalarUDF::from(regex::RegexList::extract_all()));
    ctx.register_udaf(datafusion::logical_expr::AggregateUDF::from(
        percentile::PercentileApprox::new(false),
    ));
    ctx.register_udaf(datafusion::logical_expr::AggregateUDF::from(
        percentile::PercentileApprox::new(true),
    ));
    ctx.register_udf(log1p());
    ctx.register_udf(format::udf());
    for name in ["to_timestamp_micros"] {
        if let Ok(inner) = datafusion::execution::FunctionRegistry::udf(ctx, name) {
            ctx.register_udf(ScalarUDF::from(TryOf::new(inner)));
        }
    }
    for f in guards::udfs(ctx) {
        ctx.register_udf(f);
    }
    ctx.register_udf(ScalarUDF::from(DateFormat::new()));
    ctx.register_udf(ScalarUDF::from(ToTimestampNtz {
        inner: ScalarUDF::from(
            datafusion::functions::datetime::to_timestamp::ToTimestampMicrosFunc::new_with_config(
                &datafusion::config::ConfigOptions::default(),
            ),
        ),
    }));
    ctx.register_udf(ScalarUDF::from(CurrentTimezone {
        signature: Signature::nullary(Volatility::Stable),
    }));
    ctx.register_udf(ScalarUDF::from(ElementAt::new(false)));
    ctx.register_udf(ScalarUDF::from(ElementAt::try_element_at()));
    // Spark's `concat` and `reverse` take arrays too (the string functions read an array as
    // its text: `reverse(array(1, 2))` was `]2 ,1[`).
    for (name, arrays) in [
        (
            "concat",
            datafusion::functions_nested::concat::array_concat_udf(),
        ),
        (
            "reverse",
            datafusion::functions_nested::reverse::array_reverse_udf(),
        ),
    ] {
        if let Ok(strings) = datafusion::execution::FunctionRegistry::udf(ctx, name) {
            ctx.register_udf(ScalarUDF::from(StringsOrArrays {
                name,
                strings,
                arrays,
                signature: Signature::user_defined(Volatility::Immutable),
            }));
        }
    }
    // DataFusion's avg over datafusion-spark's: it keeps DECIMAL averages exact (Databricks'
    // avg of DECIMALs is a DECIMAL), has DISTINCT and retracts for sliding windows.
    ctx.register_udaf(
        datafusion::functions_aggregate::average::avg_udaf()
            .as_ref()
            .clone(),
    );
    ctx.register_udaf(datafusion::logical_expr::AggregateUDF::from(
        CheckedSum::new(),
    ));
    for f in statistics::udafs() {
        ctx.register_udaf(f);
    }
    // Last: the DISTINCT forms wrap the aggregates registered above.
    for name in DISTINCT_OF {
        if let Ok(inner) = datafusion::execution::FunctionRegistry::udaf(ctx, name) {
            ctx.register_udaf(datafusion::logical_expr::AggregateUDF::from(
                statistics::Distinct::new(name, inner),
            ));
        }
    }
}

/// `__log1p(x)`: ln(1 + x), exact for x near 0 (Spark's `log1p`; the SQL rewrite makes it
/// NULL for x <= -1).
pub const LOG1P: &str = "__log1p";

fn log1p() -> ScalarUDF {
    datafusion::logical_expr::create_udf(
        LOG1P,
        vec![DataType::Float64],
        DataType::Float64,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            let n = args.iter().find_map(|a| match a {
                ColumnarValue::Array(a) => Some(a.len()),
                _ => None,
            });
            let x = args[0].to_array(n.unwrap_or(1))?;
            let out: datafusion::arrow::array::Float64Array = x
                .as_primitive::<datafusion::arrow::datatypes::Float64Type>()
                .unary(f64::ln_1p);
            Ok(match n {
                Some(_) => ColumnarValue::Array(Arc::new(out)),
                None => ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?),
            })
        }),
    )
}

/// `__try_<f>(...)`: f, with NULL for the rows where f fails (Spark's `try_` functions, such as
/// `try_to_timestamp(s, pattern)`). The batch is computed whole; only when that fails is it
/// computed row by row.
#[derive(Debug, PartialEq, Eq, Hash)]
struct TryOf {
    name: String,
    inner: Arc<ScalarUDF>,
}

pub const TRY_PREFIX: &str = "__try_";

impl TryOf {
    fn new(inner: Arc<ScalarUDF>) -> Self {
        TryOf {
            name: format!("{TRY_PREFIX}{}", inner.name()),
            inner,
        }
    }
}

impl ScalarUDFImpl for TryOf {
    fn name(&self) -> &str {
        &self.name
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn coerce_types(&self, types: &[DataType]) -> datafusion::error::Result<Vec<DataType>> {
        self.inner.inner().coerce_types(types)
    }
    fn return_type(&self, types: &[DataType]) -> datafusion::error::Result<DataType> {
        self.inner.return_type(types)
    }
    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> datafusion::error::Result<datafusion::arrow::datatypes::FieldRef> {
        let field = self.inner.return_field_from_args(args)?;
        Ok(Arc::new(field.as_ref().clone().with_nullable(true)))
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let n = args.number_rows;
        if let Ok(v) = self.inner.invoke_with_args(args.clone()) {
            return Ok(v);
        }
        let columns = args
            .args
            .iter()
            .map(|a| a.to_array(n))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let out_type = args.return_field.data_type().clone();
        let mut rows: Vec<ScalarValue> = Vec::with_capacity(n);
        for i in 0..n {
            let one = ScalarFunctionArgs {
                args: columns
                    .iter()
                    .map(|c| ScalarValue::try_from_array(c, i).map(ColumnarValue::Scalar))
                    .collect::<datafusion::error::Result<Vec<_>>>()?,
                number_rows: 1,
                ..args.clone()
            };
            rows.push(match self.inner.invoke_with_args(one) {
                Ok(ColumnarValue::Scalar(s)) => s,
                Ok(ColumnarValue::Array(a)) => ScalarValue::try_from_array(&a, 0)?,
                Err(_) => ScalarValue::try_from(&out_type)?,
            });
        }
        if rows.is_empty() {
            return Ok(ColumnarValue::Array(
                datafusion::arrow::array::new_empty_array(&out_type),
            ));
        }
        Ok(ColumnarValue::Array(ScalarValue::iter_to_array(rows)?))
    }
}

/// `sum()` that fails on overflow, as Databricks does (ARITHMETIC_OVERFLOW). DataFusion's
/// sum adds Decimal128 and Int64 values with wrapping arithmetic: the sum of two
/// 99999999999999999999999999999999.000000 values, or of two 5E18 BIGINTs, came out
/// negative. DECIMAL and BIGINT sums, plain, grouped, DISTINCT and over sliding window
/// frames, run on checked accumulators here; every other type goes to DataFusion's own sum.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedSum {
    inner: datafusion::functions_aggregate::sum::Sum,
}

impl CheckedSum {
    fn new() -> Self {
        CheckedSum {
            inner: datafusion::functions_aggregate::sum::Sum::new(),
        }
    }
}

/// The type of a sum the checked accumulators take over.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Total {
    Decimal(u8, i8),
    BigInt,
}

impl Total {
    fn of(args: &datafusion::logical_expr::function::AccumulatorArgs) -> Option<Total> {
        match args.return_field.data_type() {
            DataType::Decimal128(p, s) => Some(Total::Decimal(*p, *s)),
            DataType::Int64 => Some(Total::BigInt),
            _ => None,
        }
    }

    /// The non-NULL values of `values` (of this sum's type), widened.
    fn values(self, values: &ArrayRef) -> Vec<i128> {
        match self {
            Total::Decimal(..) => values
                .as_primitive::<datafusion::arrow::datatypes::Decimal128Type>()
                .iter()
                .flatten()
                .collect(),
            Total::BigInt => values
                .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                .iter()
                .flatten()
                .map(i128::from)
                .collect(),
        }
    }

    /// `v` as a value of the sum's type, or the overflow error.
    fn scalar(self, v: Option<i128>) -> datafusion::error::Result<ScalarValue> {
        match self {
            Total::Decimal(precision, scale) => {
                let limit = 10i128.pow(precision as u32);
                if v.is_some_and(|v| v >= limit || v <= -limit) {
                    return Err(self.overflow());
                }
                Ok(ScalarValue::Decimal128(v, precision, scale))
            }
            Total::BigInt => Ok(ScalarValue::Int64(
                v.map(|v| i64::try_from(v).map_err(|_| self.overflow()))
                    .transpose()?,
            )),
        }
    }

    /// The error of a sum beyond its result type.
    fn overflow(self) -> datafusion::error::DataFusionError {
        let (ty, wider) = match self {
            Total::Decimal(p, s) => (format!("DECIMAL({p}, {s})"), "a wider DECIMAL or DOUBLE"),
            Total::BigInt => ("BIGINT".to_string(), "DECIMAL(38, 0) or DOUBLE"),
        };
        datafusion::error::DataFusionError::Execution(format!(
            "[ARITHMETIC_OVERFLOW] sum() overflows {ty}: cast the column to {wider} before summing"
        ))
    }
}

/// The checked accumulator for a DECIMAL or BIGINT sum, DISTINCT or not.
fn checked_sum(
    args: &datafusion::logical_expr::function::AccumulatorArgs,
) -> Option<Box<dyn datafusion::logical_expr::Accumulator>> {
    if matches!(
        args.return_field.data_type(),
        DataType::Interval(datafusion::arrow::datatypes::IntervalUnit::MonthDayNano)
    ) && !args.is_distinct
    {
        return Some(Box::new(IntervalSum::default()));
    }
    let total = Total::of(args)?;
    Some(if args.is_distinct {
        Box::new(DistinctDecimalSum {
            values: std::collections::HashSet::new(),
            total,
        })
    } else {
        Box::new(DecimalSum {
            sum: None,
            count: 0,
            overflowed: false,
            total,
        })
    })
}

/// A sum of INTERVALs whose months, days or nanoseconds leave their range fails
/// (ARITHMETIC_OVERFLOW), as in Databricks; DataFusion's wrapped around (two intervals of
/// 100,000,000 years summed to -1894967296 months).
#[derive(Debug, Default)]
struct IntervalSum {
    months: i128,
    days: i128,
    nanos: i128,
    count: i64,
}

impl IntervalSum {
    fn add(&mut self, values: &ArrayRef, sign: i128) {
        let values =
            values.as_primitive::<datafusion::arrow::datatypes::IntervalMonthDayNanoType>();
        for v in values.iter().flatten() {
            self.months += sign * i128::from(v.months);
            self.days += sign * i128::from(v.days);
            self.nanos += sign * i128::from(v.nanoseconds);
            self.count += if sign < 0 { -1 } else { 1 };
        }
    }

    fn total(&self) -> datafusion::error::Result<ScalarValue> {
        if self.count == 0 {
            return Ok(ScalarValue::IntervalMonthDayNano(None));
        }
        match (
            i32::try_from(self.months),
            i32::try_from(self.days),
            i64::try_from(self.nanos),
        ) {
            (Ok(months), Ok(days), Ok(nanoseconds)) => Ok(ScalarValue::IntervalMonthDayNano(Some(
                datafusion::arrow::datatypes::IntervalMonthDayNano {
                    months,
                    days,
                    nanoseconds,
                },
            ))),
            _ => Err(DataFusionError::Execution(
                "[ARITHMETIC_OVERFLOW] sum() of intervals overflowed the INTERVAL range".into(),
            )),
        }
    }
}

impl datafusion::logical_expr::Accumulator for IntervalSum {
    fn update_batch(&mut self, values: &[ArrayRef]) -> datafusion::error::Result<()> {
        self.add(&values[0], 1);
        Ok(())
    }
    fn retract_batch(&mut self, values: &[ArrayRef]) -> datafusion::error::Result<()> {
        self.add(&values[0], -1);
        Ok(())
    }
    fn supports_retract_batch(&self) -> bool {
        true
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> datafusion::error::Result<()> {
        self.add(&states[0], 1);
        Ok(())
    }
    fn state(&mut self) -> datafusion::error::Result<Vec<ScalarValue>> {
        Ok(vec![self.total()?])
    }
    fn evaluate(&mut self) -> datafusion::error::Result<ScalarValue> {
        self.total()
    }
    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// A checked total, or the overflow error.
fn checked_total(
    sum: Option<i128>,
    overflowed: bool,
    total: Total,
) -> datafusion::error::Result<ScalarValue> {
    if overflowed {
        return Err(total.overflow());
    }
    total.scalar(sum)
}

impl datafusion::logical_expr::AggregateUDFImpl for CheckedSum {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn return_type(&self, args: &[DataType]) -> datafusion::error::Result<DataType> {
        if matches!(args, [DataType::Null]) {
            return Ok(DataType::Int64);
        }
        self.inner.return_type(args)
    }
    fn coerce_types(&self, args: &[DataType]) -> datafusion::error::Result<Vec<DataType>> {
        // A column of NULLs sums to NULL, as a BIGINT.
        if matches!(args, [DataType::Null]) {
            return Ok(vec![DataType::Int64]);
        }
        self.inner.coerce_types(args)
    }
    fn accumulator(
        &self,
        args: datafusion::logical_expr::function::AccumulatorArgs,
    ) -> datafusion::error::Result<Box<dyn datafusion::logical_expr::Accumulator>> {
        if args.is_distinct && matches!(args.return_field.data_type(), DataType::Interval(_)) {
            return Err(DataFusionError::Plan(
                "[UNSUPPORTED_FEATURE] sum(DISTINCT ...) of intervals is not supported: sum the DISTINCT values in a subquery".into(),
            ));
        }
        match checked_sum(&args) {
            Some(acc) => Ok(acc),
            None => self.inner.accumulator(args),
        }
    }
    fn state_fields(
        &self,
        args: datafusion::logical_expr::function::StateFieldsArgs,
    ) -> datafusion::error::Result<Vec<datafusion::arrow::datatypes::FieldRef>> {
        self.inner.state_fields(args)
    }
    fn groups_accumulator_supported(
        &self,
        args: datafusion::logical_expr::function::AccumulatorArgs,
    ) -> bool {
        if matches!(args.return_field.data_type(), DataType::Interval(_)) {
            return false;
        }
        match Total::of(&args) {
            Some(Total::BigInt) => !args.is_distinct,
            Some(Total::Decimal(..)) => false,
            None => self.inner.groups_accumulator_supported(args),
        }
    }
    fn create_groups_accumulator(
        &self,
        args: datafusion::logical_expr::function::AccumulatorArgs,
    ) -> datafusion::error::Result<Box<dyn datafusion::logical_expr::GroupsAccumulator>> {
        match Total::of(&args) {
            Some(Total::BigInt) => Ok(Box::new(BigIntGroupSums::default())),
            _ => self.inner.create_groups_accumulator(args),
        }
    }
    fn create_sliding_accumulator(
        &self,
        args: datafusion::logical_expr::function::AccumulatorArgs,
    ) -> datafusion::error::Result<Box<dyn datafusion::logical_expr::Accumulator>> {
        match checked_sum(&args) {
            Some(acc) => Ok(acc),
            None => self.inner.create_sliding_accumulator(args),
        }
    }
    fn reverse_expr(&self) -> datafusion::logical_expr::ReversedUDAF {
        datafusion::logical_expr::ReversedUDAF::Identical
    }
    fn order_sensitivity(&self) -> datafusion::logical_expr::utils::AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }
    fn value_from_stats(
        &self,
        args: &datafusion::logical_expr::StatisticsArgs,
    ) -> Option<ScalarValue> {
        self.inner.value_from_stats(args)
    }
    fn default_value(&self, data_type: &DataType) -> datafusion::error::Result<ScalarValue> {
        self.inner.default_value(data_type)
    }
    fn set_monotonicity(&self, data_type: &DataType) -> datafusion::logical_expr::SetMonotonicity {
        self.inner.set_monotonicity(data_type)
    }
    fn documentation(&self) -> Option<&datafusion::logical_expr::Documentation> {
        self.inner.documentation()
    }
}

/// A DECIMAL or BIGINT sum in checked 128-bit arithmetic; a total beyond the result type is
/// an error. Partial sums travel in the result type (a BIGINT partial sum beyond it fails
/// there, as Databricks' does); a DECIMAL one that overflowed 128 bits travels as `i128::MAX`,
/// which no DECIMAL(38) holds, so the final check still fails. Retractable, for sliding
/// window frames (an overflow of 128 bits on the way is kept as an error).
#[derive(Debug)]
struct DecimalSum {
    sum: Option<i128>,
    /// Non-NULL values in the frame (a frame of NULLs sums to NULL, not 0).
    count: i64,
    overflowed: bool,
    total: Total,
}

impl DecimalSum {
    fn add(&mut self, values: &ArrayRef, sign: i128) {
        if self.total == Total::BigInt {
            // BIGINTs summed in 128 bits cannot overflow it: one pass the compiler vectorizes.
            let values = values.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
            let (n, batch) = if values.null_count() == 0 {
                let sum: i128 = values.values().iter().map(|v| i128::from(*v)).sum();
                (values.len() as i64, sum)
            } else {
                let sum: i128 = values.iter().flatten().map(i128::from).sum();
                ((values.len() - values.null_count()) as i64, sum)
            };
            self.count += if sign < 0 { -n } else { n };
            let total = self.sum.unwrap_or(0);
            match batch.checked_mul(sign).and_then(|v| total.checked_add(v)) {
                Some(t) => self.sum = Some(t),
                None => self.overflowed = true,
            }
            return;
        }
        for v in self.total.values(values) {
            self.count += if sign < 0 { -1 } else { 1 };
            if v == i128::MAX {
                self.overflowed = true;
            }
            let total = self.sum.unwrap_or(0);
            match v.checked_mul(sign).and_then(|v| total.checked_add(v)) {
                Some(t) => self.sum = Some(t),
                None => self.overflowed = true,
            }
        }
    }
}

/// A column of NULLs (the NULL type) as a column of the sum's type.
fn typed(values: &ArrayRef) -> datafusion::error::Result<ArrayRef> {
    Ok(if values.data_type().is_null() {
        datafusion::arrow::array::new_null_array(&DataType::Int64, values.len())
    } else {
        values.clone()
    })
}

impl datafusion::logical_expr::Accumulator for DecimalSum {
    fn update_batch(&mut self, values: &[ArrayRef]) -> datafusion::error::Result<()> {
        self.add(&typed(&values[0])?, 1);
        Ok(())
    }
    fn retract_batch(&mut self, values: &[ArrayRef]) -> datafusion::error::Result<()> {
        self.add(&typed(&values[0])?, -1);
        Ok(())
    }
    fn supports_retract_batch(&self) -> bool {
        true
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> datafusion::error::Result<()> {
        self.add(&states[0], 1);
        Ok(())
    }
    fn state(&mut self) -> datafusion::error::Result<Vec<ScalarValue>> {
        // No values: a NULL partial sum, which the merge does not count (a 0 would make
        // the sum of NULLs 0).
        let sum = if self.count > 0 { self.sum } else { None };
        Ok(vec![match self.total {
            Total::Decimal(precision, scale) if self.overflowed => {
                ScalarValue::Decimal128(Some(i128::MAX), precision, scale)
            }
            Total::Decimal(precision, scale) => ScalarValue::Decimal128(sum, precision, scale),
            Total::BigInt => checked_total(sum, self.overflowed, self.total)?,
        }])
    }
    fn evaluate(&mut self) -> datafusion::error::Result<ScalarValue> {
        let sum = if self.count > 0 { self.sum } else { None };
        checked_total(sum, self.overflowed, self.total)
    }
    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// `sum(DISTINCT d)` of a DECIMAL or BIGINT: the distinct values, summed in checked
/// arithmetic at the end. Its state is the list of values, as DataFusion's own distinct sum
/// keeps it.
#[derive(Debug)]
struct DistinctDecimalSum {
    values: std::collections::HashSet<i128>,
    total: Total,
}

impl datafusion::logical_expr::Accumulator for DistinctDecimalSum {
    fn update_batch(&mut self, values: &[ArrayRef]) -> datafusion::error::Result<()> {
        self.values.extend(self.total.values(&typed(&values[0])?));
        Ok(())
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> datafusion::error::Result<()> {
        let lists = states[0].as_list::<i32>();
        for list in lists.iter().flatten() {
            self.update_batch(&[list])?;
        }
        Ok(())
    }
    fn state(&mut self) -> datafusion::error::Result<Vec<ScalarValue>> {
        let values = self
            .values
            .iter()
            .map(|v| self.total.scalar(Some(*v)))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let dt = self.total.scalar(None)?.data_type();
        Ok(vec![ScalarValue::List(ScalarValue::new_list_nullable(
            &values, &dt,
        ))])
    }
    fn evaluate(&mut self) -> datafusion::error::Result<ScalarValue> {
        if self.values.is_empty() {
            return self.total.scalar(None);
        }
        let mut total = 0i128;
        let mut overflowed = false;
        for v in &self.values {
            match total.checked_add(*v) {
                Some(t) => total = t,
                None => overflowed = true,
            }
        }
        checked_total(Some(total), overflowed, self.total)
    }
    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.values.len() * 16
    }
}

/// Grouped BIGINT sums in checked arithmetic: a sum that leaves BIGINT fails, as
/// Databricks' does. The state is the partial sum (NULL: no values yet), as DataFusion's.
#[derive(Debug, Default)]
struct BigIntGroupSums {
    sums: Vec<i64>,
    seen: Vec<bool>,
}

impl BigIntGroupSums {
    fn add(
        &mut self,
        values: &ArrayRef,
        groups: &[usize],
        filter: Option<&datafusion::arrow::array::BooleanArray>,
        total_num_groups: usize,
    ) -> datafusion::error::Result<()> {
        self.sums.resize(total_num_groups, 0);
        self.seen.resize(total_num_groups, false);
        let values = values.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        for (i, &g) in groups.iter().enumerate() {
            if values.is_null(i) || filter.is_some_and(|f| !f.is_valid(i) || !f.value(i)) {
                continue;
            }
            self.sums[g] = self.sums[g]
                .checked_add(values.value(i))
                .ok_or_else(|| Total::BigInt.overflow())?;
            self.seen[g] = true;
        }
        Ok(())
    }
}

impl datafusion::logical_expr::GroupsAccumulator for BigIntGroupSums {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&datafusion::arrow::array::BooleanArray>,
        total_num_groups: usize,
    ) -> datafusion::error::Result<()> {
        self.add(
            &typed(&values[0])?,
            group_indices,
            opt_filter,
            total_num_groups,
        )
    }
    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> datafusion::error::Result<()> {
        self.add(&values[0], group_indices, None, total_num_groups)
    }
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&datafusion::arrow::array::BooleanArray>,
    ) -> datafusion::error::Result<Vec<ArrayRef>> {
        let values = values[0].as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        let kept: datafusion::arrow::array::Int64Array = values
            .iter()
            .enumerate()
            .map(|(i, v)| match opt_filter {
                Some(f) if !f.is_valid(i) || !f.value(i) => None,
                _ => v,
            })
            .collect();
        Ok(vec![Arc::new(kept)])
    }
    fn evaluate(
        &mut self,
        emit_to: datafusion::logical_expr::EmitTo,
    ) -> datafusion::error::Result<ArrayRef> {
        let sums = emit_to.take_needed(&mut self.sums);
        let seen = emit_to.take_needed(&mut self.seen);
        Ok(Arc::new(datafusion::arrow::array::Int64Array::new(
            sums.into(),
            Some(datafusion::arrow::buffer::NullBuffer::from(seen)),
        )))
    }
    fn state(
        &mut self,
        emit_to: datafusion::logical_expr::EmitTo,
    ) -> datafusion::error::Result<Vec<ArrayRef>> {
        Ok(vec![self.evaluate(emit_to)?])
    }
    fn size(&self) -> usize {
        self.sums.capacity() * 8 + self.seen.capacity()
    }
}

/// Translate a Spark/Databricks datetime pattern (`yyyy-MM-dd HH:mm:ss.SSS`) into a chrono
/// format string. Letters Spark gives a meaning chrono cannot express are an error naming
/// the letter: never text that looks like a date but is not one.
pub fn spark_to_chrono(pattern: &str) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // Quoted text; '' is a literal quote.
            if chars.get(i + 1) == Some(&'\'') {
                out.push('\'');
                i += 2;
                continue;
            }
            let mut j = i + 1;
            loop {
                match chars.get(j) {
                    None => return Err(format!("unterminated quote in pattern '{pattern}'")),
                    Some('\'') if chars.get(j + 1) == Some(&'\'') => {
                        out.push('\'');
                        j += 2;
                    }
                    Some('\'') => break,
                    Some('%') => {
                        out.push_str("%%");
                        j += 1;
                    }
                    Some(x) => {
                        out.push(*x);
                        j += 1;
                    }
                }
            }
            i = j + 1;
            continue;
        }
        if matches!(c, '[' | ']' | '#' | '{' | '}') {
            return Err(format!(
                "'{c}' in '{pattern}' (an optional section or reserved character) is not supported by date_format"
            ));
        }
        if !c.is_ascii_alphabetic() {
            if c == '%' {
                out.push_str("%%");
            } else {
                out.push(c);
            }
            i += 1;
            continue;
        }
        let mut n = 1;
        while chars.get(i + n) == Some(&c) {
            n += 1;
        }
        let spec = match (c, n) {
            ('y' | 'u', 2) => "%y",
            ('y' | 'u', 1 | 3 | 4) => "%Y",
            ('M' | 'L', 1) => "%-m",
            ('M' | 'L', 2) => "%m",
            ('M' | 'L', 3) => "%b",
            ('M' | 'L', 4) => "%B",
            ('d', 1) => "%-d",
            ('d', 2) => "%d",
            ('D', 1) => "%-j",
            ('D', 3) => "%j",
            ('H', 1) => "%-H",
            ('H', 2) => "%H",
            ('h', 1) => "%-I",
            ('h', 2) => "%I",
            ('m', 1) => "%-M",
            ('m', 2) => "%M",
            ('s', 1) => "%-S",
            ('s', 2) => "%S",
            ('S', 3) => "%3f",
            ('S', 6) => "%6f",
            ('S', 9) => "%9f",
            ('a', 1) => "%p",
            ('E', 1..=3) => "%a",
            ('E', 4) => "%A",
            ('z', 1..=3) => "%Z",
            // Offsets, which chrono has no letter for (X prints `Z` at a zero offset): marks
            // that `format_at` replaces with the value's own offset.
            ('Z', 1..=3) => OFFSET_MARKS[0],
            ('X', 1) => OFFSET_MARKS[1],
            ('X', 2) => OFFSET_MARKS[2],
            ('X', 3) => OFFSET_MARKS[3],
            ('x', 1) => OFFSET_MARKS[4],
            ('x', 2) => OFFSET_MARKS[5],
            ('x', 3) => OFFSET_MARKS[6],
            _ => {
                return Err(format!(
                    "pattern letter '{}' ({n} time{}) in '{pattern}' is not supported by date_format",
                    c,
                    if n == 1 { "" } else { "s" }
                ));
            }
        };
        out.push_str(spec);
        i += n;
    }
    Ok(out)
}

/// Stand-ins for Spark's offset letters in a translated pattern (Unicode private-use
/// characters, which chrono copies as text): `Z`, `X`, `XX`, `XXX`, `x`, `xx`, `xxx`.
const OFFSET_MARKS: [&str; 7] = [
    "\u{E000}", "\u{E001}", "\u{E002}", "\u{E003}", "\u{E004}", "\u{E005}", "\u{E006}",
];

/// A translated pattern for parsing: its offset letters read an offset (`+08`, `+0800`,
/// `+08:00`) as chrono parses them.
pub(crate) fn parsing_offsets(chrono: &str) -> String {
    let reads = ["%z", "%#z", "%z", "%:z", "%#z", "%z", "%:z"];
    let mut out = chrono.to_string();
    for (mark, read) in OFFSET_MARKS.iter().zip(reads) {
        out = out.replace(mark, read);
    }
    out
}

/// `t` formatted with a translated pattern, its offset letters filled in as Spark prints
/// them: `Z` +0800; `X` +08 (+0530 with minutes), `XX` +0800, `XXX` +08:00, each `Z` at a
/// zero offset; `x`, `xx`, `xxx` the same without the `Z`.
fn format_at<Z: chrono::TimeZone>(t: &chrono::DateTime<Z>, fmt: &str) -> String
where
    Z::Offset: std::fmt::Display,
{
    use chrono::Offset;
    let text = t.format(fmt).to_string();
    if !OFFSET_MARKS.iter().any(|m| text.contains(m)) {
        return text;
    }
    let secs = t.offset().fix().local_minus_utc();
    let sign = if secs < 0 { '-' } else { '+' };
    let (h, m) = (secs.abs() / 3600, secs.abs() % 3600 / 60);
    let short = if m == 0 {
        format!("{sign}{h:02}")
    } else {
        format!("{sign}{h:02}{m:02}")
    };
    let long = format!("{sign}{h:02}{m:02}");
    let colon = format!("{sign}{h:02}:{m:02}");
    let zulu = |s: &str| {
        if secs == 0 {
            "Z".to_string()
        } else {
            s.to_string()
        }
    };
    let fills = [
        long.clone(),
        zulu(&short),
        zulu(&long),
        zulu(&colon),
        short,
        long,
        colon,
    ];
    let mut out = text;
    for (mark, fill) in OFFSET_MARKS.iter().zip(fills) {
        out = out.replace(mark, &fill);
    }
    out
}

/// `date_format(ts, pattern)`: a timestamp, date or timestamp string formatted with a Spark
/// datetime pattern, in the session's time zone.
#[derive(Debug, PartialEq, Eq, Hash)]
struct DateFormat {
    signature: Signature,
}

impl DateFormat {
    fn new() -> Self {
        DateFormat {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for DateFormat {
    fn name(&self) -> &str {
        "date_format"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let n = args.number_rows;
        let [value, pattern] = args.args.as_slice() else {
            return exec_err!("date_format takes (timestamp, pattern)");
        };
        // In the session's zone: a date is its midnight there, a time shows as it reads there.
        let zone = args
            .config_options
            .execution
            .time_zone
            .clone()
            .unwrap_or_else(|| "UTC".into());
        let tz: datafusion::arrow::array::timezone::Tz =
            zone.parse()
                .map_err(|e: datafusion::arrow::error::ArrowError| {
                    DataFusionError::Execution(e.to_string())
                })?;
        let ts_type = DataType::Timestamp(TimeUnit::Microsecond, Some(zone.as_str().into()));
        let values: ArrayRef = match value {
            ColumnarValue::Array(a) => a.clone(),
            ColumnarValue::Scalar(s) => s.to_array_of_size(n.max(1))?,
        };
        let values = match values.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                crate::engine::types::cast_strict(&values, &ts_type)?
            }
            DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64 | DataType::Null => {
                datafusion::arrow::compute::cast(&values, &ts_type)?
            }
            other => {
                return exec_err!(
                    "date_format takes a TIMESTAMP, DATE or STRING, not {}",
                    crate::engine::types::type_name(other)
                );
            }
        };
        let patterns: ArrayRef = match pattern {
            ColumnarValue::Array(a) => a.clone(),
            ColumnarValue::Scalar(s) => s.to_array_of_size(1)?,
        };
        let patterns = datafusion::arrow::compute::cast(&patterns, &DataType::Utf8)?;
        let patterns = patterns.as_string::<i32>();
        let scalar_pattern = matches!(pattern, ColumnarValue::Scalar(_));
        let translated: Vec<Option<String>> = (0..patterns.len())
            .map(|i| {
                (!patterns.is_null(i))
                    .then(|| spark_to_chrono(patterns.value(i)))
                    .transpose()
            })
            .collect::<Result<_, String>>()
            .map_err(DataFusionError::Execution)?;
        let micros =
            values.as_primitive::<datafusion::arrow::datatypes::TimestampMicrosecondType>();
        let mut out = StringBuilder::with_capacity(n, n * 20);
        for row in 0..micros.len() {
            let fmt = if scalar_pattern {
                &translated[0]
            } else {
                &translated[row]
            };
            match (micros.is_null(row), fmt) {
                (false, Some(fmt)) => {
                    let Some(t) = chrono::DateTime::from_timestamp_micros(micros.value(row)) else {
                        out.append_null();
                        continue;
                    };
                    out.append_value(format_at(&t.with_timezone(&tz), fmt));
                }
                _ => out.append_null(),
            }
        }
        let result: ArrayRef = Arc::new(out.finish());
        Ok(match value {
            ColumnarValue::Scalar(_) if scalar_pattern => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?)
            }
            _ => ColumnarValue::Array(result),
        })
    }
}

/// Databricks' cast to TIMESTAMP (`TRY_CAST` when `is_try`) in the zone `zone`: a zone-less
/// time or a date is the wall clock there, as Spark's rule has it in skipped and repeated
/// hours.
pub(crate) fn to_timestamp_in(is_try: bool, zone: &str) -> ScalarUDF {
    let mut config = datafusion::config::ConfigOptions::new();
    config.execution.time_zone = Some(zone.to_string());
    ScalarUDF::from(spark_time::ToTimestamp::new(is_try, &config))
}

/// The text a cast to TIMESTAMP_NTZ reads: each value without the zone after its time, as
/// Spark reads `'2024-01-01 10:00:00+02:00'` (10:00; Arrow's cast would apply the offset and
/// give 08:00). The session's casts write `CAST(text AS TIMESTAMP_NTZ)` through it.
pub(crate) fn wall_clock_text() -> Arc<ScalarUDF> {
    static UDF: std::sync::OnceLock<Arc<ScalarUDF>> = std::sync::OnceLock::new();
    UDF.get_or_init(|| {
        Arc::new(ScalarUDF::from(WallClockText {
            signature: Signature::uniform(
                1,
                vec![DataType::Utf8, DataType::LargeUtf8, DataType::Utf8View],
                Volatility::Immutable,
            ),
        }))
    })
    .clone()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct WallClockText {
    signature: Signature,
}

impl ScalarUDFImpl for WallClockText {
    fn name(&self) -> &str {
        "__tidemark_wall_clock_text"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(args.first().cloned().unwrap_or(DataType::Utf8))
    }
    /// The argument's name: a cast through it is named as the cast it replaces (the plan's
    /// names, GROUPING SETS' among them, stay as they were).
    fn schema_name(
        &self,
        args: &[datafusion::logical_expr::Expr],
    ) -> datafusion::error::Result<String> {
        Ok(args
            .first()
            .map(|a| a.schema_name().to_string())
            .unwrap_or_default())
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let rows = if scalar { 1 } else { args.number_rows };
        let values = args.args[0].to_array(rows)?;
        let dropped = crate::engine::types::without_zones(&values)?;
        // The input's own type (a view of text stays one).
        let dropped = datafusion::arrow::compute::cast(&dropped, values.data_type())?;
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&dropped, 0)?)
        } else {
            ColumnarValue::Array(dropped)
        })
    }
}

/// The function `to_timestamp_ntz(text, format)` is written as: the engine's
/// `to_timestamp_micros` with no zone, whatever the session's (the text's wall-clock time,
/// which a zone's skipped or repeated hour does not touch).
pub const TO_TIMESTAMP_NTZ: &str = "__tidemark_to_timestamp_ntz";

#[derive(Debug, PartialEq, Eq, Hash)]
struct ToTimestampNtz {
    inner: ScalarUDF,
}

impl ScalarUDFImpl for ToTimestampNtz {
    fn name(&self) -> &str {
        TO_TIMESTAMP_NTZ
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Timestamp(TimeUnit::Microsecond, None))
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        self.inner.invoke_with_args(args)
    }
}

/// `current_timezone()`: the session's time zone (`SET TIME ZONE`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct CurrentTimezone {
    signature: Signature,
}

impl ScalarUDFImpl for CurrentTimezone {
    fn name(&self) -> &str {
        "current_timezone"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let zone = args
            .config_options
            .execution
            .time_zone
            .clone()
            .unwrap_or_else(|| "UTC".into());
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(zone))))
    }
}

/// `df` with its rows counted into `count` as they pass (for progress on writes that
/// delta-rs runs itself).
pub fn counted(
    df: datafusion::dataframe::DataFrame,
    count: impl Fn(u64) + Send + Sync + 'static,
) -> datafusion::error::Result<datafusion::dataframe::DataFrame> {
    watched(df, 0, move |_, rows| {
        count(rows as u64);
        Ok(())
    })
}

/// `df` with each batch's values of column `column` shown to `watch` as they pass (with the
/// batch's row count): the column goes through a volatile identity function, so that the
/// optimizer neither drops it nor moves it below a filter.
pub fn watched(
    df: datafusion::dataframe::DataFrame,
    column: usize,
    watch: impl Fn(&ColumnarValue, usize) -> datafusion::error::Result<()> + Send + Sync + 'static,
) -> datafusion::error::Result<datafusion::dataframe::DataFrame> {
    use datafusion::logical_expr::{ScalarUDF, col};
    let udf = ScalarUDF::new_from_impl(Watch {
        signature: Signature::any(1, Volatility::Volatile),
        id: uuid::Uuid::new_v4().as_u128(),
        watch: Arc::new(watch),
    });
    let exprs: Vec<datafusion::logical_expr::Expr> = df
        .schema()
        .columns()
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            if i == column {
                // The same qualified name: the schema stays exactly the input's (a join's two
                // `id`s stay told apart).
                let (relation, name) = (c.relation.clone(), c.name.clone());
                udf.call(vec![col(c)]).alias_qualified(relation, name)
            } else {
                col(c)
            }
        })
        .collect();
    df.select(exprs)
}

type WatchFn = dyn Fn(&ColumnarValue, usize) -> datafusion::error::Result<()> + Send + Sync;

/// The identity on its argument, showing what it sees to a watcher.
struct Watch {
    signature: Signature,
    id: u128,
    watch: Arc<WatchFn>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

impl PartialEq for Watch {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for Watch {}

impl std::hash::Hash for Watch {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

impl ScalarUDFImpl for Watch {
    fn name(&self) -> &str {
        "__tidemark_watch"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(args[0].clone())
    }
    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> datafusion::error::Result<datafusion::arrow::datatypes::FieldRef> {
        Ok(args.arg_fields[0].clone())
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        (self.watch)(&args.args[0], args.number_rows)?;
        Ok(args.args[0].clone())
    }
}

#[cfg(test)]
mod tests {
    use super::{format_at, spark_to_chrono};

    #[test]
    fn spark_patterns_become_chrono_formats() {
        let at = chrono::DateTime::from_timestamp_micros(1_735_787_045_123_456).unwrap();
        let f = |p: &str| format_at(&at, &spark_to_chrono(p).unwrap());
        assert_eq!(f("yyyy-MM-dd"), "2025-01-02");
        assert_eq!(f("yyyy-MM-dd HH:mm:ss.SSS"), "2025-01-02 03:04:05.123");
        assert_eq!(f("yyyyMMdd'T'HHmmss"), "20250102T030405");
        assert_eq!(f("d/M/yy h:m a"), "2/1/25 3:4 AM");
        assert_eq!(f("EEE, MMM d ''yy"), "Thu, Jan 2 '25");
        assert_eq!(f("EEEE MMMM"), "Thursday January");
        assert_eq!(f("100% D"), "100% 2");
        assert_eq!(f("SSSSSS"), "123456");
        assert_eq!(f("HH:mmXXX"), "03:04Z");
        assert_eq!(f("HHmm Z"), "0304 +0000");
        let tz: datafusion::arrow::array::timezone::Tz = "Asia/Kolkata".parse().unwrap();
        let g = |p: &str| format_at(&at.with_timezone(&tz), &spark_to_chrono(p).unwrap());
        assert_eq!(
            g("HH:mm X|XX|XXX|x|Z"),
            "08:34 +0530|+0530|+05:30|+0530|+0530"
        );
        let tz: datafusion::arrow::array::timezone::Tz = "-08:00".parse().unwrap();
        let g = |p: &str| format_at(&at.with_timezone(&tz), &spark_to_chrono(p).unwrap());
        assert_eq!(g("X XX XXX xxx"), "-08 -0800 -08:00 -08:00");
    }

    #[test]
    fn unknown_letters_are_errors_not_text() {
        for p in ["QQ", "yyyy-ww", "SS", "'open", "yyyy[-MM]", "ZZZZ"] {
            assert!(spark_to_chrono(p).is_err(), "{p}");
        }
    }
}

/// A function Spark spells the same for strings and for arrays: the array function when an
/// argument is an array, else the string one.
#[derive(Debug, PartialEq, Eq, Hash)]
struct StringsOrArrays {
    name: &'static str,
    strings: Arc<ScalarUDF>,
    arrays: Arc<ScalarUDF>,
    signature: Signature,
}

impl StringsOrArrays {
    fn pick(&self, types: &[DataType]) -> &ScalarUDF {
        let array = |t: &DataType| {
            matches!(
                t,
                DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _)
            )
        };
        if types.iter().any(array) {
            &self.arrays
        } else {
            &self.strings
        }
    }
}

impl ScalarUDFImpl for StringsOrArrays {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, types: &[DataType]) -> datafusion::error::Result<Vec<DataType>> {
        #[allow(deprecated)]
        datafusion::logical_expr::type_coercion::functions::data_types_with_scalar_udf(
            types,
            self.pick(types),
        )
    }

    fn return_type(&self, types: &[DataType]) -> datafusion::error::Result<DataType> {
        #[allow(deprecated)]
        self.pick(types).return_type(types)
    }

    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> datafusion::error::Result<datafusion::arrow::datatypes::FieldRef> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        self.pick(&types).return_field_from_args(args)
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let udf = self.pick(&types);
        if self.name != "concat" || std::ptr::eq(udf, self.strings.as_ref()) {
            return udf.invoke_with_args(args);
        }
        // Spark's concat of arrays is NULL when any argument is (DataFusion's array_concat
        // skips a NULL array).
        let n = args.number_rows;
        let inputs = args
            .args
            .iter()
            .map(|a| a.to_array(n))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let constant = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let result = udf.invoke_with_args(args)?.to_array(n)?;
        let mut nulls = result.logical_nulls();
        for input in &inputs {
            nulls = datafusion::arrow::buffer::NullBuffer::union(
                nulls.as_ref(),
                input.logical_nulls().as_ref(),
            );
        }
        let data = result.to_data().into_builder().nulls(nulls).build()?;
        let result = datafusion::arrow::array::make_array(data);
        Ok(if constant && n == 1 {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?)
        } else {
            ColumnarValue::Array(result)
        })
    }
}

/// A function's result as its arguments came: one value when every argument was one value
/// (a constant), else the column (always for an empty batch, which has no value to take).
pub(crate) fn shaped_like(
    args: &[ColumnarValue],
    result: ArrayRef,
) -> datafusion::error::Result<ColumnarValue> {
    let constant = args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
    Ok(if constant && !result.is_empty() {
        ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?)
    } else {
        ColumnarValue::Array(result)
    })
}

/// `element_at(array, i)`: the i-th element counting from 1 (from the end when negative); an
/// index past either end is Databricks' `[INVALID_ARRAY_INDEX_IN_ELEMENT_AT]` error (ANSI mode),
/// 0 is `[INVALID_INDEX_OF_ZERO]`. `element_at(map, key)`: the key's value, NULL when absent.
/// With `zero_based`, the `[ ]` operator on arrays: the i-th element counting from 0, any
/// other index `[INVALID_ARRAY_INDEX]` (the error Databricks SQL raises).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct ElementAt {
    signature: Signature,
    zero_based: bool,
    /// `try_element_at`: NULL for an index past either end.
    try_: bool,
}

impl ElementAt {
    pub(crate) fn new(zero_based: bool) -> ElementAt {
        ElementAt {
            signature: Signature::any(2, Volatility::Immutable),
            zero_based,
            try_: false,
        }
    }

    fn try_element_at() -> ElementAt {
        ElementAt {
            try_: true,
            ..ElementAt::new(false)
        }
    }
}

impl ScalarUDFImpl for ElementAt {
    fn name(&self) -> &str {
        if self.zero_based {
            "__tidemark_subscript"
        } else if self.try_ {
            "try_element_at"
        } else {
            "element_at"
        }
    }

    fn schema_name(
        &self,
        args: &[datafusion::logical_expr::Expr],
    ) -> datafusion::error::Result<String> {
        match (self.zero_based, args) {
            (true, [a, i]) => Ok(format!("{}[{}]", a.schema_name(), i.schema_name())),
            _ => Ok(format!(
                "{}({})",
                self.name(),
                args.iter()
                    .map(|a| a.schema_name().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> datafusion::error::Result<DataType> {
        match args.first() {
            Some(DataType::List(f)) => Ok(f.data_type().clone()),
            Some(DataType::Map(entries, _)) => match entries.data_type() {
                DataType::Struct(kv) if kv.len() == 2 => Ok(kv[1].data_type().clone()),
                other => datafusion::common::plan_err!("element_at: unexpected map {other}"),
            },
            Some(other) => datafusion::common::plan_err!(
                "element_at takes an ARRAY or a MAP, not {}",
                crate::engine::types::type_name(other)
            ),
            None => datafusion::common::plan_err!("element_at takes two arguments"),
        }
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        use datafusion::arrow::array::UInt32Builder;
        let n = args.number_rows;
        let container = args.args[0].to_array(n)?;
        let at = args.args[1].to_array(n)?;
        let mut take = UInt32Builder::with_capacity(n);
        let values = match container.data_type() {
            DataType::List(_) => {
                let list = container.as_list::<i32>();
                let index = datafusion::arrow::compute::cast(&at, &DataType::Int64)?;
                let index = index.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
                for row in 0..n {
                    if list.is_null(row) || index.is_null(row) {
                        take.append_null();
                        continue;
                    }
                    let (start, end) = (list.value_offsets()[row], list.value_offsets()[row + 1]);
                    let len = i64::from(end - start);
                    let i = index.value(row);
                    let position = match i {
                        i if self.zero_based => {
                            if i < 0 || i >= len {
                                return exec_err!(
                                    "[INVALID_ARRAY_INDEX] The index {i} is out of bounds. The array has {len} elements. Use the SQL function `get()` to tolerate accessing element at invalid index and return NULL instead."
                                );
                            }
                            i
                        }
                        0 => {
                            return exec_err!(
                                "[INVALID_INDEX_OF_ZERO] element_at: array indices start at 1 (-1 is the last element)"
                            );
                        }
                        i if i > 0 && i <= len => i - 1,
                        i if i < 0 && i >= -len => len + i,
                        _ if self.try_ => {
                            take.append_null();
                            continue;
                        }
                        i => {
                            return exec_err!(
                                "[INVALID_ARRAY_INDEX_IN_ELEMENT_AT] The index {i} is out of bounds: the array has {len} elements"
                            );
                        }
                    };
                    take.append_value((i64::from(start) + position) as u32);
                }
                list.values().clone()
            }
            DataType::Map(..) => {
                let map = container.as_map();
                let keys = map.keys();
                for row in 0..n {
                    if map.is_null(row) || at.is_null(row) {
                        take.append_null();
                        continue;
                    }
                    // Only a key the lookup value is exactly (1.5 never finds key 1).
                    let given = ScalarValue::try_from_array(&at, row)?;
                    let wanted = match given.cast_to(keys.data_type()) {
                        Ok(w)
                            if w.cast_to(&given.data_type())
                                .is_ok_and(|back| back == given) =>
                        {
                            w
                        }
                        _ => {
                            take.append_null();
                            continue;
                        }
                    };
                    let (start, end) = (map.value_offsets()[row], map.value_offsets()[row + 1]);
                    let mut found = None;
                    for k in start..end {
                        if ScalarValue::try_from_array(keys, k as usize)? == wanted {
                            found = Some(k as u32);
                        }
                    }
                    take.append_option(found);
                }
                map.values().clone()
            }
            other => return exec_err!("element_at takes an ARRAY or a MAP, not {other}"),
        };
        let result = datafusion::arrow::compute::take(values.as_ref(), &take.finish(), None)?;
        shaped_like(&args.args, result)
    }
}
