//! `CAST(x AS <type with a MAP>)`, which DataFusion's SQL types lack: Arrow's cast of the value
//! (evaluated once) to the Arrow type, then every map in the result checked for keys that
//! became equal (`'1'` and `'01'` as INT): those are `[DUPLICATED_MAP_KEY]`, as Databricks
//! raises for any map with a repeated key (Arrow's cast keeps both, a map no reader expects).
//! The SQL cast is rewritten to `tidemark_cast_map(x, '<arrow type>')` when bound.

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, GenericListArray, MapArray, OffsetSizeTrait,
};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::{cast_with_options, filter};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// The function's name, as the binder writes it.
pub const CAST_MAP: &str = "tidemark_cast_map";

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct CastMap {
    signature: Signature,
}

impl CastMap {
    pub(super) fn new() -> Self {
        CastMap {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

/// The target type named by the second argument.
fn target(arg: Option<&Option<&ScalarValue>>) -> datafusion::error::Result<DataType> {
    match arg {
        Some(Some(ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)))) => {
            DataType::from_str(s).or_else(|e| plan_err!("{CAST_MAP}: type {s}: {e}"))
        }
        _ => plan_err!("{CAST_MAP} takes the target type as a constant string"),
    }
}

impl ScalarUDFImpl for CastMap {
    fn name(&self) -> &str {
        CAST_MAP
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> datafusion::error::Result<DataType> {
        datafusion::common::internal_err!("{CAST_MAP}'s type comes from its second argument")
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> datafusion::error::Result<FieldRef> {
        let to = target(args.scalar_arguments.get(1))?;
        let from = args.arg_fields[0].data_type();
        if !from.is_null() && !datafusion::arrow::compute::can_cast_types(from, &to) {
            return plan_err!(
                "cannot cast {} to {}",
                crate::engine::types::type_name(from),
                crate::engine::types::type_name(&to)
            );
        }
        Ok(Arc::new(Field::new(self.name(), to, true)))
    }
    fn schema_name(
        &self,
        args: &[datafusion::logical_expr::Expr],
    ) -> datafusion::error::Result<String> {
        // Named after the value, as DataFusion names a CAST (and Spark does).
        match args.first() {
            Some(value) => Ok(value.schema_name().to_string()),
            None => Ok(self.name().to_string()),
        }
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let to = args.return_field.data_type();
        // A constant is cast once (one row), whatever the batch's size.
        let (value, constant) = match &args.args[0] {
            ColumnarValue::Scalar(v) => (v.to_array_of_size(1)?, true),
            ColumnarValue::Array(a) => (a.clone(), false),
        };
        let cast = cast_with_options(
            &value,
            to,
            &datafusion::common::format::DEFAULT_CAST_OPTIONS,
        )?;
        check_keys(&cast)?;
        Ok(if constant {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&cast, 0)?)
        } else {
            ColumnarValue::Array(cast)
        })
    }
}

/// `[DUPLICATED_MAP_KEY]` if a map anywhere in `array` (nested in lists, structs and maps
/// too) holds a key twice. Only values a valid row reaches are looked at: a sliced list keeps
/// its whole child array, and a NULL row may cover entries that are not part of the result.
fn check_keys(array: &ArrayRef) -> datafusion::error::Result<()> {
    match array.data_type() {
        DataType::Map(_, _) => {
            let map = array.as_map();
            unique_keys(map)?;
            let o = map.value_offsets();
            let entries: ArrayRef = Arc::new(map.entries().clone());
            let entries = reached(
                &entries,
                map.nulls(),
                (0..map.len()).map(|i| (o[i] as usize, o[i + 1] as usize)),
            )?;
            let entries = entries.as_struct();
            check_keys(entries.column(0))?;
            check_keys(entries.column(1))
        }
        DataType::List(_) => check_keys(&list_reached(array.as_list::<i32>())?),
        DataType::LargeList(_) => check_keys(&list_reached(array.as_list::<i64>())?),
        DataType::FixedSizeList(_, _) => {
            let list = array.as_fixed_size_list();
            let n = list.value_length() as usize;
            check_keys(&reached(
                list.values(),
                list.nulls(),
                (0..list.len()).map(|i| {
                    let start = list.value_offset(i) as usize;
                    (start, start + n)
                }),
            )?)
        }
        DataType::Struct(_) => {
            let valid = match array.nulls() {
                Some(nulls) if nulls.null_count() > 0 => {
                    filter(array, &BooleanArray::new(nulls.inner().clone(), None))?
                }
                _ => array.clone(),
            };
            valid.as_struct().columns().iter().try_for_each(check_keys)
        }
        _ => Ok(()),
    }
}

/// The values of a list's valid rows, in order.
fn list_reached<O: OffsetSizeTrait>(
    list: &GenericListArray<O>,
) -> datafusion::error::Result<ArrayRef> {
    let o = list.value_offsets();
    reached(
        list.values(),
        list.nulls(),
        (0..list.len()).map(|i| (o[i].as_usize(), o[i + 1].as_usize())),
    )
}

/// The values of `child` that the valid rows' ranges cover, in order.
fn reached(
    child: &ArrayRef,
    nulls: Option<&NullBuffer>,
    ranges: impl Iterator<Item = (usize, usize)>,
) -> datafusion::error::Result<ArrayRef> {
    let mut mask = vec![false; child.len()];
    for (row, (start, end)) in ranges.enumerate() {
        if nulls.is_none_or(|n| n.is_valid(row)) {
            mask[start..end].fill(true);
        }
    }
    if mask.iter().all(|m| *m) {
        return Ok(child.clone());
    }
    Ok(filter(child, &BooleanArray::from(mask))?)
}

/// `[DUPLICATED_MAP_KEY]` if one of the maps of `map` holds a key twice (a NULL map has none).
fn unique_keys(map: &MapArray) -> datafusion::error::Result<()> {
    let keys = map.keys();
    if keys.is_empty() {
        return Ok(());
    }
    let converter = RowConverter::new(vec![SortField::new(keys.data_type().clone())])?;
    let rows = converter.convert_columns(std::slice::from_ref(keys))?;
    let offsets = map.value_offsets();
    let mut seen = HashSet::new();
    for i in 0..map.len() {
        if map.is_null(i) {
            continue;
        }
        seen.clear();
        for k in offsets[i] as usize..offsets[i + 1] as usize {
            if !seen.insert(rows.row(k)) {
                let shown = ArrayFormatter::try_new(keys.as_ref(), &FormatOptions::default())?
                    .value(k)
                    .to_string();
                return exec_err!(
                    "[DUPLICATED_MAP_KEY] Duplicate map key {shown} was found, please check the input data (a cast made two keys of one map equal)"
                );
            }
        }
    }
    Ok(())
}
