//! `monotonically_increasing_id()`: a BIGINT that grows from row to row and is never given
//! twice in one process, as Spark promises (unique and increasing, not consecutive). Spark
//! puts the partition's number in the upper bits; here each batch takes the next run of
//! numbers from one counter, so a query's ids are unique across its partitions too.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use datafusion::arrow::array::Int64Array;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// The next id to give.
static NEXT: AtomicI64 = AtomicI64::new(0);

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct MonotonicId {
    signature: Signature,
}

impl MonotonicId {
    pub(super) fn new() -> Self {
        MonotonicId {
            signature: Signature::nullary(Volatility::Volatile),
        }
    }
}

impl ScalarUDFImpl for MonotonicId {
    fn name(&self) -> &str {
        "monotonically_increasing_id"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows as i64;
        let first = NEXT.fetch_add(n, Ordering::Relaxed);
        Ok(ColumnarValue::Array(Arc::new(
            Int64Array::from_iter_values(first..first + n),
        )))
    }
}
