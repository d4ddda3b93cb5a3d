//! `percentile_approx(col, p [, accuracy])` (alias `approx_percentile`): Spark's answer is one
//! of the column's values, the smallest whose share of values at or below it reaches `p`; `p`
//! may be an array (the answer is then an array). tidemark computes it exactly (Spark's
//! sketch is exact below `accuracy` rows and within 1/accuracy of rank above), keeping the
//! group's values in memory. Values are Arrow arrays, sorted once at the end.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListArray};
use datafusion::arrow::compute::{SortOptions, concat, filter, sort_to_indices, take};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};
use datafusion::physical_expr::expressions::Literal;

/// `percentile_approx`, or with `exact` Spark's `percentile(col, p [, frequency])`: the
/// exact percentile of a numeric column, interpolated between the two values around the
/// position `p * (n - 1)`, as a DOUBLE.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct PercentileApprox {
    exact: bool,
    signature: Signature,
    aliases: Vec<String>,
}

impl PercentileApprox {
    pub(super) fn new(exact: bool) -> Self {
        PercentileApprox {
            exact,
            signature: Signature::user_defined(Volatility::Immutable),
            aliases: if exact {
                vec![]
            } else {
                vec!["approx_percentile".into()]
            },
        }
    }
}

impl AggregateUDFImpl for PercentileApprox {
    fn name(&self) -> &str {
        if self.exact {
            "percentile"
        } else {
            "percentile_approx"
        }
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, args: &[DataType]) -> datafusion::error::Result<Vec<DataType>> {
        let (value, p) = match args {
            [v, p] | [v, p, _] => (v, p),
            _ if self.exact => {
                return plan_err!("percentile takes (col, percentage [, frequency])");
            }
            _ => return plan_err!("percentile_approx takes (col, percentage [, accuracy])"),
        };
        if self.exact && !(value.is_numeric() || value.is_null()) {
            return plan_err!("percentile: the column is a number, not {value}");
        }
        let ordered =
            value.is_numeric() || matches!(value, DataType::Date32 | DataType::Timestamp(_, _));
        if !self.exact && !ordered {
            return plan_err!("percentile_approx: the column is a number, DATE or TIMESTAMP");
        }
        let value = if self.exact {
            &DataType::Float64
        } else {
            value
        };
        let p = match p {
            DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _) => {
                DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true)))
            }
            _ => DataType::Float64,
        };
        let mut out = vec![value.clone(), p];
        if args.len() == 3 {
            out.push(DataType::Int64);
        }
        Ok(out)
    }
    fn return_type(&self, args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(match &args[1] {
            DataType::List(_) => {
                DataType::List(Arc::new(Field::new_list_field(args[0].clone(), true)))
            }
            _ => args[0].clone(),
        })
    }
    fn state_fields(&self, args: StateFieldsArgs) -> datafusion::error::Result<Vec<FieldRef>> {
        let value = args.input_fields[0].data_type().clone();
        Ok(vec![Arc::new(Field::new_list(
            format!("{}_values", args.name),
            Field::new_list_field(value, true),
            true,
        ))])
    }
    fn accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> datafusion::error::Result<Box<dyn Accumulator>> {
        let name = self.name();
        if args.is_distinct {
            return plan_err!(
                "{name}(DISTINCT ...) is not supported: DISTINCT the values in a subquery first"
            );
        }
        let Some(p) = args.exprs[1].downcast_ref::<Literal>() else {
            return plan_err!(
                "percentile_approx: the percentage is a constant (or an array of them)"
            );
        };
        let (percentages, list) = match p.value() {
            ScalarValue::List(l) => {
                let values = l.value(0);
                let values = datafusion::arrow::array::as_primitive_array::<
                    datafusion::arrow::datatypes::Float64Type,
                >(&values);
                (values.iter().collect::<Option<Vec<f64>>>(), true)
            }
            ScalarValue::Float64(v) => (v.map(|v| vec![v]), false),
            other => {
                return plan_err!("{name}: the percentage is a number, found {other}");
            }
        };
        let Some(percentages) = percentages else {
            return plan_err!("{name}: the percentage is NULL");
        };
        if let Some(p) = percentages.iter().find(|p| !(0.0..=1.0).contains(*p)) {
            return plan_err!("{name}: the percentage {p} is not between 0.0 and 1.0");
        }
        if let Some(a) = args.exprs.get(2).filter(|_| !self.exact) {
            match a.downcast_ref::<Literal>().map(|l| l.value()) {
                Some(ScalarValue::Int64(Some(a))) if *a > 0 => {}
                Some(ScalarValue::Int32(Some(a))) if *a > 0 => {}
                _ => {
                    return plan_err!(
                        "percentile_approx: the accuracy is a positive integer constant"
                    );
                }
            }
        }
        Ok(Box::new(Values {
            data_type: args.expr_fields[0].data_type().clone(),
            values: vec![],
            percentages,
            list,
            exact: self.exact,
            frequency: self.exact && args.exprs.len() == 3,
        }))
    }
}

#[derive(Debug)]
struct Values {
    data_type: DataType,
    values: Vec<ArrayRef>,
    percentages: Vec<f64>,
    list: bool,
    /// Interpolated (`percentile`), else one of the values (`percentile_approx`).
    exact: bool,
    /// A second column says how many times each value counts.
    frequency: bool,
}

impl Values {
    fn all(&self) -> datafusion::error::Result<ArrayRef> {
        if self.values.is_empty() {
            return Ok(datafusion::arrow::array::new_empty_array(&self.data_type));
        }
        let refs: Vec<&dyn Array> = self.values.iter().map(|a| a.as_ref()).collect();
        Ok(concat(&refs)?)
    }
}

impl Accumulator for Values {
    fn update_batch(&mut self, values: &[ArrayRef]) -> datafusion::error::Result<()> {
        let v = &values[0];
        if self.frequency {
            let freq = datafusion::arrow::compute::cast(&values[2], &DataType::Int64)?;
            let freq = freq.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
            let mut repeated: Vec<u32> = vec![];
            for i in 0..v.len() {
                if v.is_null(i) || freq.is_null(i) {
                    continue;
                }
                let f = freq.value(i);
                if f < 0 {
                    return exec_err!("percentile: the frequency {f} is negative");
                }
                repeated.extend(std::iter::repeat_n(i as u32, f as usize));
            }
            let indices = datafusion::arrow::array::UInt32Array::from(repeated);
            self.values.push(take(v, &indices, None)?);
            return Ok(());
        }
        let kept = datafusion::arrow::compute::is_not_null(v)?;
        self.values.push(filter(v, &kept)?);
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> datafusion::error::Result<()> {
        let lists = states[0]
            .as_any()
            .downcast_ref::<ListArray>()
            .ok_or_else(|| {
                datafusion::error::DataFusionError::Internal("percentile_approx state".into())
            })?;
        for i in 0..lists.len() {
            if lists.is_valid(i) {
                self.values.push(lists.value(i));
            }
        }
        Ok(())
    }

    fn state(&mut self) -> datafusion::error::Result<Vec<ScalarValue>> {
        let all = self.all()?;
        self.values = vec![all.clone()];
        Ok(vec![ScalarValue::List(Arc::new(
            datafusion::common::utils::SingleRowListArrayBuilder::new(all).build_list_array(),
        ))])
    }

    fn evaluate(&mut self) -> datafusion::error::Result<ScalarValue> {
        let all = self.all()?;
        let n = all.len();
        if n == 0 {
            // No values: NULL (an array of percentages too, as Spark).
            return Ok(match self.list {
                true => ScalarValue::try_from(&DataType::List(Arc::new(Field::new_list_field(
                    self.data_type.clone(),
                    true,
                ))))?,
                false => ScalarValue::try_from(&self.data_type)?,
            });
        }
        let picked: Vec<ScalarValue> = {
            let order = sort_to_indices(&all, Some(SortOptions::default()), None)?;
            let sorted = take(&all, &order, None)?;
            if self.exact {
                let sorted = datafusion::arrow::compute::cast(&sorted, &DataType::Float64)?;
                let v = sorted.as_primitive::<datafusion::arrow::datatypes::Float64Type>();
                self.percentages
                    .iter()
                    .map(|p| {
                        let position = (n - 1) as f64 * p;
                        let (lower, higher) = (position.floor(), position.ceil());
                        let (lo, hi) = (v.value(lower as usize), v.value(higher as usize));
                        let x = if lower == higher {
                            lo
                        } else {
                            (higher - position) * lo + (position - lower) * hi
                        };
                        ScalarValue::Float64(Some(x))
                    })
                    .collect()
            } else {
                self.percentages
                    .iter()
                    .map(|p| {
                        let rank = (p * n as f64).ceil() as usize;
                        ScalarValue::try_from_array(&sorted, rank.clamp(1, n) - 1)
                    })
                    .collect::<datafusion::error::Result<_>>()?
            }
        };
        if !self.list {
            return match picked.into_iter().next() {
                Some(v) => Ok(v),
                None => exec_err!("percentile_approx: no percentage"),
            };
        }
        Ok(ScalarValue::List(ScalarValue::new_list_nullable(
            &picked,
            &self.data_type,
        )))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self
                .values
                .iter()
                .map(|a| a.get_array_memory_size())
                .sum::<usize>()
    }
}
