//! Spark's higher-order array functions, on DataFusion's lambdas (`x -> x + 1`):
//! `transform(arr, x [, i] -> ...)`, `filter(arr, x [, i] -> ...)`, `exists(arr, x -> ...)`,
//! `forall(arr, x -> ...)`, `aggregate`/`reduce(arr, start, (acc, x) -> ... [, acc -> ...])`
//! and `array_sort(arr, (l, r) -> ...)`. The index `i` is 0-based, as in Databricks; `exists`
//! and `forall` are three-valued (NULL when a NULL decides).
//!
//! A lambda runs once per batch over all the arrays' elements together (each step of an
//! `aggregate` over the rows that still have an element), not once per element.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, BooleanBuilder, Int32Array, ListArray, UInt32Array,
    new_null_array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{cast, filter, nullif, take, take_arrays};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, HigherOrderFunctionArgs, HigherOrderReturnFieldArgs, HigherOrderSignature,
    HigherOrderUDF, HigherOrderUDFImpl, LambdaArgument, LambdaParametersProgress, ValueOrLambda,
    Volatility,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Transform,
    Filter,
    Exists,
    Forall,
    Aggregate,
    Sort,
}

/// One of Spark's higher-order array functions.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SparkLambda {
    kind: Kind,
    name: &'static str,
    aliases: Vec<String>,
    signature: HigherOrderSignature,
}

/// The functions, to register.
pub fn functions() -> Vec<Arc<HigherOrderUDF>> {
    [
        (Kind::Transform, "transform", vec![]),
        (Kind::Filter, "filter", vec![]),
        (Kind::Exists, "exists", vec![]),
        (Kind::Forall, "forall", vec![]),
        (Kind::Aggregate, "aggregate", vec!["reduce".to_string()]),
        (Kind::Sort, SORT_BY, vec![]),
    ]
    .into_iter()
    .map(|(kind, name, aliases)| {
        Arc::new(HigherOrderUDF::new_from_impl(SparkLambda {
            kind,
            name,
            aliases,
            signature: HigherOrderSignature::user_defined(Volatility::Immutable),
        }))
    })
    .collect()
}

/// `array_sort(arr, comparator)`: the SQL rewrite calls this name (`array_sort` itself is
/// DataFusion's plain function).
pub const SORT_BY: &str = "__array_sort_by";

fn plan_error(msg: String) -> DataFusionError {
    DataFusionError::Plan(msg)
}

/// The element field of a list type.
fn element(name: &str, t: &DataType) -> Result<FieldRef> {
    match t {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => Ok(f.clone()),
        DataType::Null => Ok(Arc::new(Field::new("item", DataType::Null, true))),
        other => Err(plan_error(format!(
            "[DATATYPE_MISMATCH] {name}() takes an ARRAY first, not {}",
            crate::engine::types::type_name(other)
        ))),
    }
}

fn field(name: &str, t: DataType) -> FieldRef {
    Arc::new(Field::new(name, t, true))
}

impl SparkLambda {
    /// The argument shape: (values before the lambdas, lambdas allowed).
    fn shape(&self) -> (usize, std::ops::RangeInclusive<usize>) {
        match self.kind {
            Kind::Aggregate => (2, 1..=2),
            _ => (1, 1..=1),
        }
    }

    fn check_shape<V, L>(&self, args: &[ValueOrLambda<V, L>]) -> Result<()> {
        let (values, lambdas) = self.shape();
        let ok = args.len() >= values
            && args[..values]
                .iter()
                .all(|a| matches!(a, ValueOrLambda::Value(_)))
            && lambdas.contains(&(args.len() - values))
            && args[values..]
                .iter()
                .all(|a| matches!(a, ValueOrLambda::Lambda(_)));
        if ok {
            return Ok(());
        }
        let usage = match self.kind {
            Kind::Transform | Kind::Filter => "(array, x -> ...) or (array, (x, i) -> ...)",
            Kind::Exists | Kind::Forall => "(array, x -> ...)",
            Kind::Aggregate => "(array, start, (acc, x) -> ... [, acc -> ...])",
            Kind::Sort => "(array, (left, right) -> ...)",
        };
        let name = if self.kind == Kind::Sort {
            "array_sort"
        } else {
            self.name
        };
        Err(plan_error(format!(
            "[WRONG_NUM_ARGS] {name}() takes {usage}"
        )))
    }
}

impl HigherOrderUDFImpl for SparkLambda {
    fn name(&self) -> &str {
        self.name
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &HigherOrderSignature {
        &self.signature
    }

    fn coerce_value_types(&self, types: &[DataType]) -> Result<Vec<DataType>> {
        let mut types = types.to_vec();
        if let Some(list) = types.first_mut() {
            let item = element(self.name, list)?;
            *list = DataType::List(item);
        }
        Ok(types)
    }

    fn lambda_parameters(
        &self,
        step: usize,
        fields: &[ValueOrLambda<FieldRef, Option<FieldRef>>],
    ) -> Result<LambdaParametersProgress> {
        self.check_shape(fields)?;
        let ValueOrLambda::Value(list) = &fields[0] else {
            unreachable!("checked by check_shape")
        };
        let item = element(self.name, list.data_type())?;
        let x = field("x", item.data_type().clone());
        let index = field("i", DataType::Int32);
        Ok(match self.kind {
            Kind::Transform | Kind::Filter => {
                LambdaParametersProgress::Complete(vec![vec![x, index]])
            }
            Kind::Exists | Kind::Forall => LambdaParametersProgress::Complete(vec![vec![x]]),
            Kind::Sort => LambdaParametersProgress::Complete(vec![vec![
                x.clone(),
                field("y", x.data_type().clone()),
            ]]),
            Kind::Aggregate => {
                let ValueOrLambda::Value(start) = &fields[1] else {
                    unreachable!("checked by check_shape")
                };
                let finish = fields.len() == 4;
                let merged = match &fields[2] {
                    ValueOrLambda::Lambda(Some(out)) => Some(out.data_type().clone()),
                    _ => None,
                };
                // The accumulator's type: the start value's, or the merge function's result
                // when that is wider (`aggregate(array(1.5), 0, (acc, x) -> acc + x)`).
                let known = fields[2..]
                    .iter()
                    .all(|f| matches!(f, ValueOrLambda::Lambda(Some(_))));
                let acc = match (step, merged) {
                    (0, _) | (_, None) if !known => start.data_type().clone(),
                    // A DECIMAL sum widens at every step: it runs at the widest precision.
                    (_, Some(DataType::Decimal128(_, scale))) => DataType::Decimal128(38, scale),
                    (_, Some(t)) => t,
                    (_, None) => start.data_type().clone(),
                };
                let merge = vec![field("acc", acc.clone()), x];
                if known || step >= 1 {
                    LambdaParametersProgress::Complete(if finish {
                        vec![merge, vec![field("acc", acc)]]
                    } else {
                        vec![merge]
                    })
                } else {
                    LambdaParametersProgress::Partial(if finish {
                        vec![Some(merge), None]
                    } else {
                        vec![Some(merge)]
                    })
                }
            }
        })
    }

    fn coerce_values_for_lambdas(
        &self,
        fields: &[ValueOrLambda<DataType, DataType>],
    ) -> Result<Option<Vec<DataType>>> {
        if self.kind != Kind::Aggregate {
            return Ok(None);
        }
        match fields {
            [
                ValueOrLambda::Value(list),
                ValueOrLambda::Value(_),
                ValueOrLambda::Lambda(merged),
                ..,
            ] => Ok(Some(vec![list.clone(), merged.clone()])),
            _ => Ok(None),
        }
    }

    fn return_field_from_args(&self, args: HigherOrderReturnFieldArgs) -> Result<FieldRef> {
        let fields = args.arg_fields;
        self.check_shape(fields)?;
        let ValueOrLambda::Value(list) = &fields[0] else {
            unreachable!("checked by check_shape")
        };
        let lambda = |i: usize| match &fields[i] {
            ValueOrLambda::Lambda(f) => f.data_type().clone(),
            ValueOrLambda::Value(f) => f.data_type().clone(),
        };
        let item = element(self.name, list.data_type())?;
        let t = match self.kind {
            Kind::Transform => DataType::List(field("element", lambda(1))),
            Kind::Filter | Kind::Sort => DataType::List(item),
            Kind::Exists | Kind::Forall => {
                let t = lambda(1);
                if !matches!(t, DataType::Boolean | DataType::Null) {
                    return Err(plan_error(format!(
                        "[DATATYPE_MISMATCH] the function of {}() must return BOOLEAN, not {}",
                        self.name,
                        crate::engine::types::type_name(&t)
                    )));
                }
                DataType::Boolean
            }
            Kind::Aggregate => {
                let ValueOrLambda::Value(start) = &fields[1] else {
                    unreachable!("checked by check_shape")
                };
                if lambda(2) != *start.data_type() {
                    return Err(plan_error(format!(
                        "[DATATYPE_MISMATCH] the merge function of {}() returns {} for an accumulator of {}: cast the start value to the type the merge returns",
                        self.name,
                        crate::engine::types::type_name(&lambda(2)),
                        crate::engine::types::type_name(start.data_type()),
                    )));
                }
                if fields.len() == 4 {
                    lambda(3)
                } else {
                    lambda(2)
                }
            }
        };
        if self.kind == Kind::Sort && !(lambda(1).is_integer() || lambda(1).is_null()) {
            return Err(plan_error(format!(
                "[DATATYPE_MISMATCH] the comparator of array_sort() must return an integer (negative, 0 or positive), not {}",
                crate::engine::types::type_name(&lambda(1))
            )));
        }
        if self.kind == Kind::Filter
            && lambda(1) != DataType::Boolean
            && lambda(1) != DataType::Null
        {
            return Err(plan_error(format!(
                "[DATATYPE_MISMATCH] the function of filter() must return BOOLEAN, not {}",
                crate::engine::types::type_name(&lambda(1))
            )));
        }
        Ok(field("", t))
    }

    fn invoke_with_args(&self, args: HigherOrderFunctionArgs) -> Result<ColumnarValue> {
        let scalar = args.args.iter().all(|a| {
            matches!(
                a,
                ValueOrLambda::Lambda(_) | ValueOrLambda::Value(ColumnarValue::Scalar(_))
            )
        });
        let n = if scalar { 1 } else { args.number_rows };
        let values: Vec<ArrayRef> = args
            .args
            .iter()
            .filter_map(|a| match a {
                ValueOrLambda::Value(v) => Some(v.to_array(n)),
                ValueOrLambda::Lambda(_) => None,
            })
            .collect::<Result<_>>()?;
        let lambdas: Vec<&LambdaArgument> = args
            .args
            .iter()
            .filter_map(|a| match a {
                ValueOrLambda::Lambda(l) => Some(l),
                ValueOrLambda::Value(_) => None,
            })
            .collect();
        let out = args.return_field.data_type().clone();
        let lists = Lists::new(&values[0])?;
        let result = match self.kind {
            Kind::Transform => lists.transform(lambdas[0], &out)?,
            Kind::Filter => lists.filter(lambdas[0])?,
            Kind::Exists => lists.any_all(lambdas[0], true)?,
            Kind::Forall => lists.any_all(lambdas[0], false)?,
            Kind::Aggregate => lists.aggregate(&values[1], lambdas[0], lambdas.get(1).copied())?,
            Kind::Sort => lists.sort(lambdas[0])?,
        };
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?)
        } else {
            ColumnarValue::Array(result)
        })
    }
}

/// A batch's arrays, their elements laid out flat.
struct Lists {
    list: ListArray,
    /// All rows' elements, row after row.
    values: ArrayRef,
    /// Row `r`'s elements are `values[starts[r]..starts[r + 1]]`.
    starts: Vec<usize>,
}

impl Lists {
    fn new(array: &ArrayRef) -> Result<Lists> {
        let array = match array.data_type() {
            DataType::List(_) => array.clone(),
            DataType::Null => {
                new_null_array(&DataType::new_list(DataType::Null, true), array.len())
            }
            DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
                cast(array, &DataType::List(f.clone()))?
            }
            other => {
                return Err(DataFusionError::Execution(format!(
                    "expected an ARRAY, got {other}"
                )));
            }
        };
        let list = array.as_list::<i32>().clone();
        let offsets = list.value_offsets();
        let first = offsets[0] as usize;
        let last = offsets[list.len()] as usize;
        let values = list.values().slice(first, last - first);
        let starts = offsets.iter().map(|o| *o as usize - first).collect();
        Ok(Lists {
            list,
            values,
            starts,
        })
    }

    fn rows(&self) -> usize {
        self.list.len()
    }

    fn range(&self, r: usize) -> std::ops::Range<usize> {
        if self.list.is_null(r) {
            return 0..0;
        }
        self.starts[r]..self.starts[r + 1]
    }

    /// For each element, its row (to spread the lambda's captured columns) and its index.
    fn rows_and_indices(&self) -> (UInt32Array, Int32Array) {
        let mut rows = Vec::with_capacity(self.values.len());
        let mut indices = Vec::with_capacity(self.values.len());
        for r in 0..self.rows() {
            for (i, _) in (self.starts[r]..self.starts[r + 1]).enumerate() {
                rows.push(r as u32);
                indices.push(i as i32);
            }
        }
        (UInt32Array::from(rows), Int32Array::from(indices))
    }

    /// The lambda over every element (`x`, and `i` its index).
    fn each(&self, lambda: &LambdaArgument) -> Result<ArrayRef> {
        let (rows, indices) = self.rows_and_indices();
        let indices: ArrayRef = Arc::new(indices);
        let x = || Ok(self.values.clone());
        let i = || Ok(indices.clone());
        lambda
            .evaluate(&[&x, &i], |captured| {
                Ok(take_arrays(captured, &rows, None)?)
            })?
            .into_array(self.values.len())
    }

    fn offsets(&self) -> OffsetBuffer<i32> {
        OffsetBuffer::new(
            self.starts
                .iter()
                .map(|s| *s as i32)
                .collect::<Vec<_>>()
                .into(),
        )
    }

    fn transform(&self, lambda: &LambdaArgument, out: &DataType) -> Result<ArrayRef> {
        let DataType::List(item) = out else {
            return Err(DataFusionError::Internal(format!(
                "transform returns a list, not {out}"
            )));
        };
        let mapped = self.each(lambda)?;
        let mapped = if mapped.data_type() == item.data_type() {
            mapped
        } else {
            cast(&mapped, item.data_type())?
        };
        Ok(Arc::new(ListArray::try_new(
            item.clone(),
            self.offsets(),
            mapped,
            self.list.nulls().cloned(),
        )?))
    }

    /// A predicate lambda over every element: BOOLEANs (a lambda typed NULL gives NULLs).
    fn each_test(&self, lambda: &LambdaArgument) -> Result<BooleanArray> {
        let tests = self.each(lambda)?;
        Ok(if tests.data_type() == &DataType::Null {
            BooleanArray::new_null(tests.len())
        } else {
            tests.as_boolean().clone()
        })
    }

    fn filter(&self, lambda: &LambdaArgument) -> Result<ArrayRef> {
        let keep = self.each_test(lambda)?;
        let keep: BooleanArray = keep.iter().map(|k| Some(k == Some(true))).collect();
        let mut lengths = Vec::with_capacity(self.rows());
        for r in 0..self.rows() {
            let range = self.starts[r]..self.starts[r + 1];
            lengths.push(range.filter(|&j| keep.value(j)).count());
        }
        self.relisted(lengths, filter(&self.values, &keep)?)
    }

    /// `values` as lists of `lengths`, with the input's NULL lists.
    fn relisted(
        &self,
        lengths: impl IntoIterator<Item = usize>,
        values: ArrayRef,
    ) -> Result<ArrayRef> {
        let DataType::List(item) = self.list.data_type() else {
            unreachable!("Lists holds a List")
        };
        Ok(Arc::new(ListArray::try_new(
            item.clone(),
            OffsetBuffer::from_lengths(lengths),
            values,
            self.list.nulls().cloned(),
        )?))
    }

    /// `exists` (`any`) or `forall`, three-valued.
    fn any_all(&self, lambda: &LambdaArgument, any: bool) -> Result<ArrayRef> {
        let tests = self.each_test(lambda)?;
        let mut out = BooleanBuilder::with_capacity(self.rows());
        for r in 0..self.rows() {
            if self.list.is_null(r) {
                out.append_null();
                continue;
            }
            let range = self.starts[r]..self.starts[r + 1];
            // `any`: a true decides; `forall`: a false does.
            if range
                .clone()
                .any(|j| tests.is_valid(j) && tests.value(j) == any)
            {
                out.append_value(any);
            } else if range.clone().any(|j| tests.is_null(j)) {
                out.append_null();
            } else {
                out.append_value(!any);
            }
        }
        Ok(Arc::new(out.finish()))
    }

    /// `aggregate(arr, start, merge [, finish])`: the merge runs once per position, over the
    /// rows whose arrays reach it. Rows are taken longest array first, so the rows still
    /// merging are always a prefix: each step costs the rows it merges, not the batch.
    fn aggregate(
        &self,
        start: &ArrayRef,
        merge: &LambdaArgument,
        finish: Option<&LambdaArgument>,
    ) -> Result<ArrayRef> {
        let len = |r: usize| self.range(r).len();
        let mut order: Vec<usize> = (0..self.rows()).collect();
        order.sort_by_key(|&r| std::cmp::Reverse(len(r)));
        let order_idx = UInt32Array::from(order.iter().map(|&r| r as u32).collect::<Vec<_>>());
        // The accumulators of the rows still merging, in `order`; the finished ones behind.
        let mut acc = take(start, &order_idx, None)?;
        let mut finished: Vec<ArrayRef> = vec![];
        let longest = order.first().map_or(0, |&r| len(r));
        for k in 0..longest {
            let active = order.partition_point(|&r| len(r) > k);
            if active < acc.len() {
                finished.push(acc.slice(active, acc.len() - active));
                acc = acc.slice(0, active);
            }
            let rows = order_idx.slice(0, active);
            let at: UInt32Array = order[..active]
                .iter()
                .map(|&r| (self.starts[r] + k) as u32)
                .collect();
            let x = take(&self.values, &at, None)?;
            let (acc_now, x_now) = (|| Ok(acc.clone()), || Ok(x.clone()));
            let merged = merge
                .evaluate(&[&acc_now, &x_now], |captured| {
                    Ok(take_arrays(captured, &rows, None)?)
                })?
                .into_array(active)?;
            acc = if merged.data_type() == acc.data_type() {
                merged
            } else {
                cast(&merged, acc.data_type())?
            };
        }
        finished.push(acc);
        finished.reverse();
        let pieces: Vec<&dyn Array> = finished.iter().map(|a| a.as_ref()).collect();
        let in_order = datafusion::arrow::compute::concat(&pieces)?;
        // Back to the rows' own order; a NULL array aggregates to NULL (before the finish,
        // which then never sees it).
        let mut position = vec![0u32; self.rows()];
        for (i, &r) in order.iter().enumerate() {
            position[r] = i as u32;
        }
        let acc = take(&in_order, &UInt32Array::from(position), None)?;
        let nulls = BooleanArray::from(
            (0..self.rows())
                .map(|r| self.list.is_null(r))
                .collect::<Vec<_>>(),
        );
        let acc = nullif(&acc, &nulls)?;
        match finish {
            Some(finish) => {
                let acc_now = || Ok(acc.clone());
                let done = finish
                    .evaluate(&[&acc_now], |captured| Ok(captured.to_vec()))?
                    .into_array(self.rows())?;
                Ok(nullif(&done, &nulls)?)
            }
            None => Ok(acc),
        }
    }

    /// `array_sort(arr, (l, r) -> int)`: each row's elements compared pairwise in one run of
    /// the comparator, then merge-sorted by those answers (an inconsistent comparator gives
    /// some order, never a crash).
    fn sort(&self, comparator: &LambdaArgument) -> Result<ArrayRef> {
        let mut order: Vec<u32> = Vec::with_capacity(self.values.len());
        for r in 0..self.rows() {
            let range = self.range(r);
            let m = range.len();
            if m < 2 {
                order.extend(range.map(|j| j as u32));
                continue;
            }
            let mut idx: Vec<usize> = (0..m).collect();
            if m <= PAIRWISE {
                // Every ordered pair of distinct elements in one run of the comparator.
                let (mut left, mut right) = (vec![], vec![]);
                for a in 0..m {
                    for b in (0..m).filter(|&b| b != a) {
                        left.push((range.start + a) as u32);
                        right.push((range.start + b) as u32);
                    }
                }
                let answers = self.compare(comparator, r, left, right)?;
                let at = |a: usize, b: usize| a * (m - 1) + if b < a { b } else { b - 1 };
                merge_sort(&mut idx, &|a, b| answers[at(a, b)] < 0);
            } else {
                // A long array: one pair at a time, as the sort asks (m log m of them).
                let failed = std::cell::RefCell::new(None);
                let less = |a: usize, b: usize| {
                    if failed.borrow().is_some() {
                        return false;
                    }
                    let pair = (
                        vec![(range.start + a) as u32],
                        vec![(range.start + b) as u32],
                    );
                    match self.compare(comparator, r, pair.0, pair.1) {
                        Ok(answer) => answer[0] < 0,
                        Err(e) => {
                            *failed.borrow_mut() = Some(e);
                            false
                        }
                    }
                };
                merge_sort(&mut idx, &less);
                if let Some(e) = failed.into_inner() {
                    return Err(e);
                }
            }
            order.extend(idx.into_iter().map(|i| (range.start + i) as u32));
        }
        let sorted = take(&self.values, &UInt32Array::from(order), None)?;
        self.relisted((0..self.rows()).map(|r| self.range(r).len()), sorted)
    }
}

/// Arrays up to this long are sorted from one run of the comparator over all their pairs.
const PAIRWISE: usize = 64;

impl Lists {
    /// The comparator's answers for the element pairs (`left[i]`, `right[i]`) of row `r`.
    fn compare(
        &self,
        comparator: &LambdaArgument,
        r: usize,
        left: Vec<u32>,
        right: Vec<u32>,
    ) -> Result<Vec<i64>> {
        let n = left.len();
        let l = take(&self.values, &UInt32Array::from(left), None)?;
        let rr = take(&self.values, &UInt32Array::from(right), None)?;
        let (l_now, r_now) = (|| Ok(l.clone()), || Ok(rr.clone()));
        let row = UInt32Array::from(vec![r as u32; n]);
        let answers = comparator
            .evaluate(&[&l_now, &r_now], |captured| {
                Ok(take_arrays(captured, &row, None)?)
            })?
            .into_array(n)?;
        let answers = cast(&answers, &DataType::Int64)?;
        let answers = answers.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        if answers.null_count() > 0 {
            return Err(DataFusionError::Execution(
                "[COMPARATOR_RETURNS_NULL] the comparator of array_sort() returned NULL: it must return a negative number, 0 or a positive number".into(),
            ));
        }
        Ok(answers.values().to_vec())
    }
}

/// A stable merge sort by `less` that terminates whatever `less` answers.
fn merge_sort(items: &mut [usize], less: &impl Fn(usize, usize) -> bool) {
    if items.len() < 2 {
        return;
    }
    let mid = items.len() / 2;
    merge_sort(&mut items[..mid], less);
    merge_sort(&mut items[mid..], less);
    let (mut a, mut b) = (0, mid);
    let mut merged = Vec::with_capacity(items.len());
    while a < mid && b < items.len() {
        if less(items[b], items[a]) {
            merged.push(items[b]);
            b += 1;
        } else {
            merged.push(items[a]);
            a += 1;
        }
    }
    merged.extend_from_slice(&items[a..mid]);
    merged.extend_from_slice(&items[b..]);
    items.copy_from_slice(&merged);
}
