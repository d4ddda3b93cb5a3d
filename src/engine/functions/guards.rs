//! Built-ins whose DataFusion (or datafusion-spark) form answers some inputs otherwise than
//! Databricks does, wrapped to give Databricks' answer there and the built-in's elsewhere:
//!
//! * `size(NULL)` is NULL: Databricks runs ANSI, where `spark.sql.legacy.sizeOfNull` is off
//!   (datafusion-spark's `size` gives the legacy -1);
//! * `lpad`, `rpad`, `left` and `right` with a length below 1 give `''` (DataFusion's `left`
//!   and `right` read a negative length as PostgreSQL does, "all but the last n", and its
//!   `lpad` of a negative length read from a column panicked);
//! * `format_string`'s `%f` rounds a DOUBLE half up from its shortest decimal form, as
//!   Java's `Formatter` (datafusion-spark's rounded its binary value half to even);
//! * `flatten` of an array holding a NULL array is NULL (DataFusion's skipped the NULL:
//!   `flatten(array(array(1), NULL))` was `[1]`).
//!
//! Also two built-ins written whole: `initcap` (words start after spaces only, as Spark's) and
//! `__nullable`, which CREATE TABLE ... AS uses to make every column nullable.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::{cast, nullif};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl};

/// What the wrapper changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Guard {
    /// NULL where the first argument is NULL.
    NullOfNull,
    /// The second argument (a length) at least 0.
    NoNegativeLength,
    /// `%f` arguments rounded half up first, as Java's `Formatter` rounds them.
    JavaFixed,
    /// NULL where the first argument, an array, is NULL or holds a NULL.
    NullOfNullElement,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Guarded {
    inner: Arc<ScalarUDF>,
    guard: Guard,
}

/// The wrapped built-ins, to register over the originals (each under its own name).
pub fn udfs(registry: &dyn datafusion::execution::FunctionRegistry) -> Vec<ScalarUDF> {
    let mut out = vec![InitCap::udf()];
    for (name, guard) in [
        ("size", Guard::NullOfNull),
        ("lpad", Guard::NoNegativeLength),
        ("rpad", Guard::NoNegativeLength),
        ("left", Guard::NoNegativeLength),
        ("right", Guard::NoNegativeLength),
        ("format_string", Guard::JavaFixed),
        ("flatten", Guard::NullOfNullElement),
    ] {
        if let Ok(inner) = registry.udf(name) {
            out.push(ScalarUDF::from(Guarded { inner, guard }));
        }
    }
    out
}

impl ScalarUDFImpl for Guarded {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }
    fn signature(&self) -> &datafusion::logical_expr::Signature {
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
        Ok(match self.guard {
            Guard::NullOfNull | Guard::NullOfNullElement => {
                Arc::new(field.as_ref().clone().with_nullable(true))
            }
            Guard::NoNegativeLength | Guard::JavaFixed => field,
        })
    }
    fn invoke_with_args(
        &self,
        mut args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        match self.guard {
            Guard::NullOfNull => {
                let n = args.number_rows;
                let input = args.args[0].clone();
                let out = self.inner.invoke_with_args(args)?;
                match input {
                    ColumnarValue::Scalar(s) if s.is_null() => Ok(ColumnarValue::Scalar(
                        ScalarValue::try_from(out.data_type())?,
                    )),
                    ColumnarValue::Scalar(_) => Ok(out),
                    ColumnarValue::Array(a) => {
                        let Some(nulls) = a.logical_nulls() else {
                            return Ok(out);
                        };
                        let out = out.to_array(n)?;
                        let is_null =
                            datafusion::arrow::array::BooleanArray::new(!nulls.inner(), None);
                        Ok(ColumnarValue::Array(nullif(&out, &is_null)?))
                    }
                }
            }
            Guard::NullOfNullElement => {
                let n = args.number_rows;
                let input = args.args[0].clone();
                let out = self.inner.invoke_with_args(args)?;
                let scalar = matches!(input, ColumnarValue::Scalar(_));
                let input = input.to_array(n)?;
                let out = out.to_array(n)?;
                let Some(is_null) = null_or_holding_null(&input) else {
                    return Ok(ColumnarValue::Array(out));
                };
                let out = nullif(&out, &is_null)?;
                Ok(if scalar {
                    ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
                } else {
                    ColumnarValue::Array(out)
                })
            }
            Guard::NoNegativeLength => {
                if let Some(length) = args.args.get_mut(1) {
                    *length = at_least_zero(length)?;
                }
                self.inner.invoke_with_args(args)
            }
            Guard::JavaFixed => {
                super::format::java_fixed_arguments(&mut args)?;
                self.inner.invoke_with_args(args)
            }
        }
    }
}

/// For each row of a list array: whether it is NULL or holds a NULL element; None for
/// another type.
fn null_or_holding_null(a: &dyn Array) -> Option<datafusion::arrow::array::BooleanArray> {
    fn rows(
        a: &dyn Array,
        element: impl Fn(usize) -> Option<usize>,
    ) -> datafusion::arrow::array::BooleanArray {
        (0..a.len())
            .map(|i| Some(a.is_null(i) || element(i).is_some_and(|nulls| nulls > 0)))
            .collect()
    }
    let nulls_in = |v: Arc<dyn Array>| v.logical_null_count();
    Some(match a.data_type() {
        DataType::List(_) => {
            let l = a.as_list::<i32>();
            rows(a, |i| l.is_valid(i).then(|| nulls_in(l.value(i))))
        }
        DataType::LargeList(_) => {
            let l = a.as_list::<i64>();
            rows(a, |i| l.is_valid(i).then(|| nulls_in(l.value(i))))
        }
        DataType::FixedSizeList(..) => {
            let l = a.as_fixed_size_list();
            rows(a, |i| l.is_valid(i).then(|| nulls_in(l.value(i))))
        }
        _ => return None,
    })
}

/// An integer argument with its negative values made 0, in its own type.
fn at_least_zero(v: &ColumnarValue) -> datafusion::error::Result<ColumnarValue> {
    Ok(match v {
        ColumnarValue::Scalar(s) => {
            let ty = s.data_type();
            match s.cast_to(&DataType::Int64)? {
                ScalarValue::Int64(Some(n)) if n < 0 => {
                    ColumnarValue::Scalar(ScalarValue::Int64(Some(0)).cast_to(&ty)?)
                }
                _ => v.clone(),
            }
        }
        ColumnarValue::Array(a) => {
            let ty = a.data_type().clone();
            if !ty.is_integer() {
                return Ok(v.clone());
            }
            let wide = cast(a, &DataType::Int64)?;
            let clamped = wide
                .as_primitive::<Int64Type>()
                .unary::<_, Int64Type>(|n| n.max(0));
            ColumnarValue::Array(cast(&clamped, &ty)?)
        }
    })
}

/// `__nullable(x)`: x, typed as nullable. A table made by `CREATE TABLE ... AS` has nullable
/// columns, as Delta makes them (Databricks' `1 AS a` gives a column later rows may set to
/// NULL), where the query's schema says NOT NULL of a literal or a NOT NULL source column.
/// Volatile, so that the optimizer keeps it (a folded literal would be NOT NULL again).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct AsNullable {
    signature: datafusion::logical_expr::Signature,
}

/// The name of [`AsNullable`].
pub const AS_NULLABLE: &str = "__nullable";

impl AsNullable {
    pub fn udf() -> ScalarUDF {
        ScalarUDF::from(AsNullable {
            signature: datafusion::logical_expr::Signature::any(
                1,
                datafusion::logical_expr::Volatility::Volatile,
            ),
        })
    }
}

impl ScalarUDFImpl for AsNullable {
    fn name(&self) -> &str {
        AS_NULLABLE
    }
    fn signature(&self) -> &datafusion::logical_expr::Signature {
        &self.signature
    }
    fn return_type(&self, types: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(types[0].clone())
    }
    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> datafusion::error::Result<datafusion::arrow::datatypes::FieldRef> {
        let input = &args.arg_fields[0];
        Ok(Arc::new(
            input
                .as_ref()
                .clone()
                .with_name(AS_NULLABLE)
                .with_nullable(true),
        ))
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        Ok(args.args[0].clone())
    }
}

/// `initcap(s)` as Spark's: the string in lower case, with its first letter and every letter
/// after a space in upper case (DataFusion's started a word after any character that is not
/// a letter or digit: `hello-world` became `Hello-World`, Databricks gives `Hello-world`).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct InitCap {
    signature: datafusion::logical_expr::Signature,
}

impl InitCap {
    pub fn udf() -> ScalarUDF {
        ScalarUDF::from(InitCap {
            signature: datafusion::logical_expr::Signature::string(
                1,
                datafusion::logical_expr::Volatility::Immutable,
            ),
        })
    }
}

/// Spark's title case of one string.
fn title_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut start = true;
    for c in s.chars() {
        if start {
            out.extend(c.to_uppercase());
        } else {
            out.extend(c.to_lowercase());
        }
        start = c == ' ';
    }
    out
}

impl ScalarUDFImpl for InitCap {
    fn name(&self) -> &str {
        "initcap"
    }
    fn signature(&self) -> &datafusion::logical_expr::Signature {
        &self.signature
    }
    fn return_type(&self, _types: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        super::each_array(&args, |input| {
            let out: datafusion::arrow::array::StringArray = cast(input, &DataType::Utf8)?
                .as_string::<i32>()
                .iter()
                .map(|v| v.map(title_case))
                .collect();
            Ok(Arc::new(out) as datafusion::arrow::array::ArrayRef)
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn title_case_starts_words_after_spaces_only() {
        assert_eq!(
            super::title_case("hello-world foo_bar"),
            "Hello-world Foo_bar"
        );
        assert_eq!(super::title_case("o'NEIL  mcDONALD"), "O'neil  Mcdonald");
        assert_eq!(super::title_case("sPark sql"), "Spark Sql");
        assert_eq!(super::title_case(""), "");
    }
}
