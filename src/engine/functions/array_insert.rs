//! `array_insert(array, index, elem)`, as Databricks inserts: `index` counts from 1 at the
//! front, or from -1 at the back (-1 appends); an index past either end pads the array with
//! NULLs (`array_insert(array('a', 'b', 'c'), 5, 'z')` is `[a, b, c, NULL, z]`, with -5
//! `[z, NULL, a, b, c]`); 0 is `[INVALID_INDEX_OF_ZERO]`. A NULL array or index is NULL; a NULL
//! element is inserted.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListArray, MutableArrayData};
use datafusion::arrow::buffer::{NullBuffer, OffsetBuffer};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type};
use datafusion::common::{Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// Spark's largest array (`ByteArrayMethods.MAX_ROUNDED_ARRAY_LENGTH`).
const MAX_LENGTH: i64 = i32::MAX as i64 - 15;

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct ArrayInsert {
    signature: Signature,
}

impl ArrayInsert {
    pub(super) fn new() -> Self {
        ArrayInsert {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

/// The element type of a list type.
fn element(t: &DataType) -> Option<&Field> {
    match t {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => Some(f),
        _ => None,
    }
}

impl ScalarUDFImpl for ArrayInsert {
    fn name(&self) -> &str {
        "array_insert"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let [array, index, elem] = args else {
            return plan_err!(
                "array_insert takes three arguments: array_insert(array, index, elem)"
            );
        };
        let Some(field) = element(array) else {
            return plan_err!(
                "[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] array_insert: the first argument must \
                 be an ARRAY, not {}",
                crate::engine::types::type_name(array)
            );
        };
        if !(index.is_integer() || index == &DataType::Null) {
            return plan_err!(
                "[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] array_insert: the index must be an \
                 INT, not {}",
                crate::engine::types::type_name(index)
            );
        }
        // The element and the array's elements meet at their common type; text and a
        // number do not (Spark finds no wider type without promoting to STRING).
        let text =
            |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        let common = if elem == &DataType::Null || elem == field.data_type() {
            field.data_type().clone()
        } else if text(elem) != text(field.data_type()) {
            return plan_err!(
                "[DATATYPE_MISMATCH.ARRAY_FUNCTION_DIFF_TYPES] array_insert: the element is {} \
                 and the array's elements are {}",
                crate::engine::types::type_name(elem),
                crate::engine::types::type_name(field.data_type())
            );
        } else {
            datafusion::logical_expr::type_coercion::binary::comparison_coercion(
                field.data_type(),
                elem,
            )
            .ok_or_else(|| {
                datafusion::common::DataFusionError::Plan(format!(
                    "[DATATYPE_MISMATCH.ARRAY_FUNCTION_DIFF_TYPES] array_insert: the element is \
                     {} and the array's elements are {}",
                    crate::engine::types::type_name(elem),
                    crate::engine::types::type_name(field.data_type())
                ))
            })?
        };
        Ok(vec![
            DataType::List(Arc::new(Field::new(field.name(), common.clone(), true))),
            DataType::Int64,
            common,
        ])
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        let Some(field) = element(&args[0]) else {
            return plan_err!("array_insert: the first argument must be an ARRAY");
        };
        Ok(DataType::List(Arc::new(Field::new(
            field.name(),
            field.data_type().clone(),
            true,
        ))))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.to_array(n))
            .collect::<Result<_>>()?;
        let lists = arrays[0].as_list::<i32>();
        let indexes = arrays[1].as_primitive::<Int64Type>();
        let elems = &arrays[2];
        let values = lists.values().to_data();
        let elem_data = elems.to_data();
        let mut out = MutableArrayData::new(vec![&values, &elem_data], true, values.len() + n);
        let mut offsets: Vec<i32> = Vec::with_capacity(n + 1);
        offsets.push(0);
        let mut valid = Vec::with_capacity(n);
        let mut length: i64 = 0;
        for row in 0..n {
            if lists.is_null(row) || indexes.is_null(row) {
                valid.push(false);
                offsets.push(length as i32);
                continue;
            }
            let index = indexes.value(row);
            if index == 0 {
                return exec_err!(
                    "[INVALID_INDEX_OF_ZERO] array_insert: the index 0 is invalid; an index \
                     counts from 1 at the front or from -1 at the back"
                );
            }
            let start = lists.value_offsets()[row] as usize;
            let end = lists.value_offsets()[row + 1] as usize;
            let len = (end - start) as i64;
            // In i128: an index of i64::MIN has no negation in i64.
            let grown = (i128::from(len) + 1).max(i128::from(index).abs());
            if grown > i128::from(MAX_LENGTH) || i128::from(length) + grown > i128::from(i32::MAX) {
                return exec_err!(
                    "[COLLECTION_SIZE_LIMIT_EXCEEDED] array_insert: the index {index} would make \
                     an array of {grown} elements, more than an array (or a batch of them) can \
                     hold"
                );
            }
            let grown = grown as i64;
            if index > 0 {
                let at = index - 1;
                if at <= len {
                    out.try_extend(0, start, start + at as usize)?;
                    out.try_extend(1, row, row + 1)?;
                    out.try_extend(0, start + at as usize, end)?;
                } else {
                    out.try_extend(0, start, end)?;
                    out.try_extend_nulls((at - len) as usize)?;
                    out.try_extend(1, row, row + 1)?;
                }
            } else {
                let back = -index;
                if back <= len + 1 {
                    let at = (len + 1 - back) as usize;
                    out.try_extend(0, start, start + at)?;
                    out.try_extend(1, row, row + 1)?;
                    out.try_extend(0, start + at, end)?;
                } else {
                    out.try_extend(1, row, row + 1)?;
                    out.try_extend_nulls((back - len - 1) as usize)?;
                    out.try_extend(0, start, end)?;
                }
            }
            length += grown;
            valid.push(true);
            offsets.push(length as i32);
        }
        let field = match args.return_field.data_type() {
            DataType::List(f) => f.clone(),
            other => return exec_err!("array_insert: unexpected result type {other}"),
        };
        let result: ArrayRef = Arc::new(ListArray::try_new(
            field,
            OffsetBuffer::new(offsets.into()),
            datafusion::arrow::array::make_array(out.freeze()),
            Some(NullBuffer::from(valid)),
        )?);
        Ok(if all_scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?)
        } else {
            ColumnarValue::Array(result)
        })
    }
}
