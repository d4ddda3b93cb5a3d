//! Spark's statistical aggregates DataFusion lacks: `skewness` and `kurtosis` (Spark's central
//! moments, updated and merged by its formulas), `mode` (the most frequent value; the smallest
//! of those tied, so the answer never depends on the order rows arrive in), and `DISTINCT` for
//! any aggregate that has no DISTINCT of its own (`corr(DISTINCT a, b)`): the distinct rows of
//! the arguments are collected and fed to the aggregate once, at the end.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type, Int64Type};
use datafusion::arrow::row::{OwnedRow, RowConverter, SortField};
use datafusion::common::utils::SingleRowListArrayBuilder;
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};

/// The aggregates this module defines.
pub(super) fn udafs() -> Vec<AggregateUDF> {
    vec![
        AggregateUDF::from(Moments::new(false)),
        AggregateUDF::from(Moments::new(true)),
        AggregateUDF::from(Mode::new()),
    ]
}

/// The prefix of the DISTINCT form of an aggregate (see [`Distinct`]).
pub const DISTINCT_PREFIX: &str = "__distinct_";

/// The aggregates that get a DISTINCT form: DataFusion's statistical ones (which take
/// DISTINCT and ignore it, or refuse it) and this module's.
pub const DISTINCT_OF: &[&str] = &[
    "corr",
    "covar_pop",
    "covar_samp",
    "var_samp",
    "var_pop",
    "stddev_samp",
    "stddev_pop",
    "skewness",
    "kurtosis",
    "try_sum",
    "mode",
    "percentile",
    "percentile_approx",
    "regr_avgx",
    "regr_avgy",
    "regr_count",
    "regr_intercept",
    "regr_r2",
    "regr_slope",
    "regr_sxx",
    "regr_sxy",
    "regr_syy",
];

/// `skewness(x)` / `kurtosis(x)` as DOUBLE: NULL without rows or when every value is the same.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Moments {
    kurtosis: bool,
    signature: Signature,
}

impl Moments {
    fn new(kurtosis: bool) -> Self {
        Moments {
            kurtosis,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for Moments {
    fn name(&self) -> &str {
        if self.kurtosis {
            "kurtosis"
        } else {
            "skewness"
        }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        match args {
            [t] if t.is_numeric() || t.is_null() => Ok(vec![DataType::Float64]),
            [t] => plan_err!("{}() takes a number, not {t}", self.name()),
            _ => plan_err!("{}() takes one argument", self.name()),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(["n", "avg", "m2", "m3", "m4"]
            .iter()
            .map(|f| {
                Arc::new(Field::new(
                    format!("{}_{f}", args.name),
                    DataType::Float64,
                    true,
                ))
            })
            .collect())
    }
    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(MomentsAcc {
            kurtosis: self.kurtosis,
            m: [0.0; 5],
        }))
    }
}

/// n, avg, m2, m3, m4.
#[derive(Debug)]
struct MomentsAcc {
    kurtosis: bool,
    m: [f64; 5],
}

impl MomentsAcc {
    fn add(&mut self, x: f64) {
        let [n, avg, m2, m3, m4] = self.m;
        let n = n + 1.0;
        let delta = x - avg;
        let delta_n = delta / n;
        let avg = avg + delta_n;
        let m2 = m2 + delta * (delta - delta_n);
        let delta2 = delta * delta;
        let delta_n2 = delta_n * delta_n;
        let m3 = m3 - 3.0 * delta_n * m2 + delta * (delta2 - delta_n2);
        let m4 = m4 - 4.0 * delta_n * m3 - 6.0 * delta_n2 * m2
            + delta * (delta * delta2 - delta_n * delta_n2);
        self.m = [n, avg, m2, m3, m4];
    }

    fn merge(&mut self, other: [f64; 5]) {
        let [n1, avg1, m2_1, m3_1, m4_1] = self.m;
        let [n2, avg2, m2_2, m3_2, m4_2] = other;
        let n = n1 + n2;
        let delta = avg2 - avg1;
        let delta_n = if n == 0.0 { 0.0 } else { delta / n };
        let avg = avg1 + delta_n * n2;
        let m2 = m2_1 + m2_2 + delta * delta_n * n1 * n2;
        let m3 = m3_1
            + m3_2
            + delta_n * delta_n * delta * n1 * n2 * (n1 - n2)
            + 3.0 * delta_n * (n1 * m2_2 - n2 * m2_1);
        let m4 = m4_1
            + m4_2
            + delta_n * delta_n * delta_n * delta * n1 * n2 * (n1 * n1 - n1 * n2 + n2 * n2)
            + 6.0 * delta_n * delta_n * (n1 * n1 * m2_2 + n2 * n2 * m2_1)
            + 4.0 * delta_n * (n1 * m3_2 - n2 * m3_1);
        self.m = [n, avg, m2, m3, m4];
    }
}

impl Accumulator for MomentsAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = cast(&values[0], &DataType::Float64)?;
        for x in values.as_primitive::<Float64Type>().iter().flatten() {
            self.add(x);
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let columns: Vec<_> = states
            .iter()
            .map(|s| s.as_primitive::<Float64Type>())
            .collect();
        for row in 0..states[0].len() {
            if columns.iter().any(|c| c.is_null(row)) {
                continue;
            }
            let mut other = [0.0; 5];
            for (o, c) in other.iter_mut().zip(&columns) {
                *o = c.value(row);
            }
            self.merge(other);
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(self
            .m
            .iter()
            .map(|v| ScalarValue::Float64(Some(*v)))
            .collect())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let [n, _, m2, m3, m4] = self.m;
        if n == 0.0 || m2 == 0.0 {
            return Ok(ScalarValue::Float64(None));
        }
        Ok(ScalarValue::Float64(Some(if self.kurtosis {
            n * m4 / (m2 * m2) - 3.0
        } else {
            n.sqrt() * m3 / (m2 * m2 * m2).sqrt()
        })))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// `mode(x)`: the most frequent non-NULL value (the smallest of those tied), NULL without one.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Mode {
    signature: Signature,
}

impl Mode {
    fn new() -> Self {
        Mode {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for Mode {
    fn name(&self) -> &str {
        "mode"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(args[0].clone())
    }
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let value = args.input_fields[0].data_type().clone();
        Ok(vec![
            Arc::new(Field::new_list(
                format!("{}_values", args.name),
                Field::new_list_field(value, true),
                true,
            )),
            Arc::new(Field::new_list(
                format!("{}_counts", args.name),
                Field::new_list_field(DataType::Int64, true),
                true,
            )),
        ])
    }
    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(ModeAcc {
            data_type: args.expr_fields[0].data_type().clone(),
            counts: HashMap::new(),
        }))
    }
}

#[derive(Debug)]
struct ModeAcc {
    data_type: DataType,
    counts: HashMap<ScalarValue, i64>,
}

impl Accumulator for ModeAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let v = &values[0];
        for i in 0..v.len() {
            if v.is_valid(i) {
                *self
                    .counts
                    .entry(ScalarValue::try_from_array(v, i)?)
                    .or_default() += 1;
            }
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let (values, counts) = (states[0].as_list::<i32>(), states[1].as_list::<i32>());
        for row in 0..values.len() {
            if values.is_null(row) || counts.is_null(row) {
                continue;
            }
            let (v, c) = (values.value(row), counts.value(row));
            let c = c.as_primitive::<Int64Type>();
            for i in 0..v.len() {
                *self
                    .counts
                    .entry(ScalarValue::try_from_array(&v, i)?)
                    .or_default() += c.value(i);
            }
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let (values, counts): (Vec<ScalarValue>, Vec<ScalarValue>) = self
            .counts
            .iter()
            .map(|(v, c)| (v.clone(), ScalarValue::Int64(Some(*c))))
            .unzip();
        Ok(vec![
            ScalarValue::List(ScalarValue::new_list_nullable(&values, &self.data_type)),
            ScalarValue::List(ScalarValue::new_list_nullable(&counts, &DataType::Int64)),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let best = self.counts.iter().max_by(|(va, ca), (vb, cb)| {
            ca.cmp(cb)
                .then_with(|| vb.partial_cmp(va).unwrap_or(std::cmp::Ordering::Equal))
        });
        match best {
            Some((v, _)) => Ok(v.clone()),
            None => ScalarValue::try_from(&self.data_type),
        }
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.counts.keys().map(|k| k.size() + 8).sum::<usize>()
    }
}

/// `name(DISTINCT args)` for an aggregate without a DISTINCT of its own: the distinct rows of
/// its arguments, fed to it once at the end. Registered as `__distinct_<name>`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Distinct {
    name: String,
    inner: Arc<AggregateUDF>,
}

impl Distinct {
    /// The DISTINCT form of `inner`, which the SQL calls `name`.
    pub(super) fn new(name: &str, inner: Arc<AggregateUDF>) -> Self {
        Distinct {
            name: format!("{DISTINCT_PREFIX}{name}"),
            inner,
        }
    }
}

impl AggregateUDFImpl for Distinct {
    fn name(&self) -> &str {
        &self.name
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.inner().coerce_types(args)
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        self.inner.return_type(args)
    }
    fn return_field(&self, args: &[FieldRef]) -> Result<FieldRef> {
        self.inner.return_field(args)
    }
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(args
            .input_fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                Arc::new(Field::new_list(
                    format!("{}_distinct_{i}", args.name),
                    Field::new_list_field(f.data_type().clone(), true),
                    true,
                ))
            })
            .collect())
    }
    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let inner = self.inner.accumulator(AccumulatorArgs {
            is_distinct: false,
            ..args.clone()
        })?;
        let converter = RowConverter::new(
            args.expr_fields
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )?;
        Ok(Box::new(DistinctAcc {
            inner,
            converter,
            seen: HashSet::new(),
            rows: vec![],
        }))
    }
}

struct DistinctAcc {
    inner: Box<dyn Accumulator>,
    converter: RowConverter,
    seen: HashSet<OwnedRow>,
    /// The distinct rows in the order they first came (the aggregate sees them so).
    rows: Vec<OwnedRow>,
}

impl std::fmt::Debug for DistinctAcc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DistinctAcc({} rows)", self.rows.len())
    }
}

impl DistinctAcc {
    fn add(&mut self, columns: &[ArrayRef]) -> Result<()> {
        let rows = self.converter.convert_columns(columns)?;
        for row in rows.iter() {
            let row = row.owned();
            if self.seen.insert(row.clone()) {
                self.rows.push(row);
            }
        }
        Ok(())
    }

    /// The distinct rows as columns.
    fn columns(&self) -> Result<Vec<ArrayRef>> {
        Ok(self
            .converter
            .convert_rows(self.rows.iter().map(|r| r.row()))?)
    }
}

impl Accumulator for DistinctAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(values)
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists: Vec<&ListArray> = states.iter().map(|s| s.as_list::<i32>()).collect();
        for row in 0..states[0].len() {
            if lists.iter().any(|l| l.is_null(row)) {
                continue;
            }
            let columns: Vec<ArrayRef> = lists.iter().map(|l| l.value(row)).collect();
            self.add(&columns)?;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let columns = self.columns()?;
        Ok(columns
            .into_iter()
            .map(|c| {
                ScalarValue::List(Arc::new(
                    SingleRowListArrayBuilder::new(c).build_list_array(),
                ))
            })
            .collect())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        if !self.rows.is_empty() {
            let columns = self.columns()?;
            self.inner.update_batch(&columns)?;
            self.rows.clear();
            self.seen.clear();
        }
        self.inner.evaluate()
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self.inner.size()
            + self.converter.size()
            + 2 * self
                .rows
                .iter()
                .map(|r| r.as_ref().len() + 24)
                .sum::<usize>()
    }
}
