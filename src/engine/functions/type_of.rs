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
        let name = crate::engine::types::type_name(args.arg_fields[0].data_type())
            .to_lowercase()
            .replace(": ", ":");
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(name))))
    }
}
