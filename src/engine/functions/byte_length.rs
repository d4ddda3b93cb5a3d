//! `octet_length(x)` and `bit_length(x)` as Spark computes them: the bytes (or bits) of a
//! STRING's UTF-8 or of a BINARY value, as an INT. The engine's own take text only, so
//! `octet_length(binary_col)` was an error; anything else is read as its text, as Spark casts
//! it (`octet_length(123)` is 3).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct ByteLength {
    name: &'static str,
    signature: Signature,
}

impl ByteLength {
    /// `octet_length` and `bit_length`.
    pub(super) fn udfs() -> Vec<datafusion::logical_expr::ScalarUDF> {
        ["octet_length", "bit_length"]
            .into_iter()
            .map(|name| {
                datafusion::logical_expr::ScalarUDF::from(ByteLength {
                    name,
                    signature: Signature::user_defined(Volatility::Immutable),
                })
            })
            .collect()
    }
}

impl ScalarUDFImpl for ByteLength {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        fn plain(t: &DataType) -> DataType {
            match t {
                DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::BinaryView => t.clone(),
                DataType::Dictionary(_, v) => plain(v),
                _ => DataType::Utf8,
            }
        }
        match args {
            [one] => Ok(vec![plain(one)]),
            _ => plan_err!(
                "{} takes one argument, a STRING or BINARY value, not {}",
                self.name,
                args.len()
            ),
        }
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int32)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = args.args.as_slice() else {
            return plan_err!("{} takes one argument", self.name);
        };
        let scalar = matches!(value, ColumnarValue::Scalar(_));
        let array = value.to_array(args.number_rows)?;
        let lengths = match self.name {
            "bit_length" => datafusion::arrow::compute::kernels::length::bit_length(&array)?,
            _ => datafusion::arrow::compute::kernels::length::length(&array)?,
        };
        let lengths = datafusion::arrow::compute::cast(&lengths, &DataType::Int32)?;
        Ok(match scalar {
            true => ColumnarValue::Scalar(datafusion::common::ScalarValue::try_from_array(
                &lengths, 0,
            )?),
            false => ColumnarValue::Array(lengths),
        })
    }
}
