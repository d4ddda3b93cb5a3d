//! `typeof(expr)`: the Databricks name of a value's type, in lower case (`int`,
//! `decimal(10,2)`, `array<string>`), as Databricks prints it.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct TypeOf {
    signature: Signature,
}

impl TypeOf {
    pub(super) fn new() -> Self {
        TypeOf {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for TypeOf {
    fn name(&self) -> &str {
        "typeof"
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
        // A partition column's dictionary encoding is how delta-rs reads it, not its type.
        let mut t = args.arg_fields[0].data_type();
        while let DataType::Dictionary(_, v) = t {
            t = v;
        }
        let name = crate::engine::types::type_name(t)
            .to_lowercase()
            .replace(": ", ":");
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(name))))
    }
}
