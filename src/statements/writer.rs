//! tidemark's own Delta writer: a query's rows written as new files of a table, one writer per
//! partition of the plan so that decoding and encoding use every core, each batch conformed
//! to the table's schema by a strict cast. The files come back uncommitted, for the caller's
//! one commit (a copy's append, a rewrite of UPDATE or DELETE).

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::dataframe::DataFrame;
use deltalake::kernel::Add;
use futures::TryStreamExt;

use crate::engine::progress::CopyProgress;
use crate::error::{Error, Result};
use crate::statements::AbortOnDrop;

/// The column rewritten rows carry: which rule a row breaks, or NULL. The writer stops on
/// the first one (see [`write_with`]).
pub(crate) const VIOLATION_COLUMN: &str = "__tidemark_violation";

/// Parquet settings chosen from the first batch a writer gets (see
/// [`crate::statements::copy::encoding::sampled_settings`]).
pub(crate) type Sampled =
    fn(&RecordBatch) -> datafusion::parquet::file::properties::WriterProperties;

/// Write `rows` (and the `extra` batches) with the writers `writer` makes (all for the same
/// schema), `batch_rows` rows a batch, each writer's Parquet settings chosen by `sampled`
/// from its first batch where given; returns the files, uncommitted.
pub(crate) async fn write_with(
    writer: impl Fn() -> Result<deltalake::writer::RecordBatchWriter>,
    rows: Option<DataFrame>,
    extra: &[RecordBatch],
    batch_rows: Option<usize>,
    sampled: Option<Sampled>,
    progress: &CopyProgress,
) -> Result<Vec<Add>> {
    use deltalake::writer::DeltaWriter;
    // Each batch as the target stores it: its columns by name (any case), in its types, NULL
    // for a target column the source lacks.
    let schema = writer()?.arrow_schema();
    let conform = move |batch: RecordBatch| -> Result<RecordBatch> {
        let given = batch.schema();
        let cols = schema
            .fields()
            .iter()
            .map(|f| {
                let found = given
                    .fields()
                    .iter()
                    .position(|g| g.name().eq_ignore_ascii_case(f.name()));
                Ok(match found {
                    Some(i) => crate::engine::types::cast_strict(batch.column(i), f.data_type())
                        .map_err(|e| {
                            use datafusion::arrow::error::ArrowError;
                            // Arrow's own words, without its kind ("Parser error: ").
                            let said = match e {
                                ArrowError::ParseError(m) | ArrowError::CastError(m) => m,
                                e => e.to_string(),
                            };
                            Error::Type(format!("column '{}' cannot be written: {said}", f.name()))
                        })?,
                    None => {
                        datafusion::arrow::array::new_null_array(f.data_type(), batch.num_rows())
                    }
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(RecordBatch::try_new(schema.clone(), cols)?)
    };
    let streams = match rows {
        Some(df) => {
            let mut task = df.task_ctx();
            if let Some(n) = batch_rows {
                let config = task.session_config().clone().with_batch_size(n);
                task = task.with_session_config(config);
            }
            let plan = df.create_physical_plan().await?;
            datafusion::physical_plan::execute_stream_partitioned(plan, Arc::new(task))?
        }
        None => vec![],
    };
    let mut tasks = vec![];
    for mut stream in streams {
        let (mut w, conform, count) = (writer()?, conform.clone(), progress.counter());
        tasks.push(AbortOnDrop(tokio::spawn(async move {
            let mut wrote = false;
            while let Some(batch) = stream.try_next().await? {
                if batch.num_rows() > 0 {
                    stop_on_violation(&batch)?;
                    count(batch.num_rows() as u64);
                    let batch = conform(batch)?;
                    if !wrote && let Some(choose) = sampled {
                        w = w.with_writer_properties(choose(&batch));
                    }
                    w.write(batch).await?;
                    wrote = true;
                }
            }
            Ok::<_, Error>(if wrote { w.flush().await? } else { vec![] })
        })));
    }
    let mut adds = vec![];
    if !extra.is_empty() {
        let mut w = writer()?;
        for batch in extra {
            w.write(conform(batch.clone())?).await?;
        }
        adds.extend(w.flush().await?);
    }
    for task in tasks {
        let written = task
            .await
            .map_err(|e| Error::Other(format!("writing the copy: {e}")))??;
        adds.extend(written);
    }
    Ok(adds)
}

/// An error naming the rule the first violating row of `batch` breaks (see
/// [`VIOLATION_COLUMN`]); Ok for a batch without the column.
pub(crate) fn stop_on_violation(batch: &datafusion::arrow::array::RecordBatch) -> Result<()> {
    let Ok(i) = batch.schema().index_of(VIOLATION_COLUMN) else {
        return Ok(());
    };
    let column = datafusion::arrow::compute::cast(
        batch.column(i),
        &datafusion::arrow::datatypes::DataType::Utf8,
    )?;
    let rules = column.as_string::<i32>();
    match (0..rules.len()).find(|&r| rules.is_valid(r)) {
        Some(r) => Err(Error::Invalid(format!(
            "{}; nothing was written",
            rules.value(r)
        ))),
        None => Ok(()),
    }
}
