//! What a statement returns: a schema and its rows. A leaf: the error type (a loop's failed
//! iterations carry their result table) and the engine both use it.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{Schema, SchemaRef};

/// What a statement returns: a schema and its rows (possibly none).
#[derive(Debug, Clone)]
pub struct Output {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
}

impl Output {
    /// A statement with nothing to show (DDL).
    pub fn empty() -> Self {
        Output {
            schema: Arc::new(Schema::empty()),
            batches: vec![],
        }
    }

    /// One batch.
    pub fn batch(batch: RecordBatch) -> Self {
        Output {
            schema: batch.schema(),
            batches: vec![batch],
        }
    }

    /// Total rows.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }
}
