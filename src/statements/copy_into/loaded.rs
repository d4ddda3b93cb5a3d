//! Which files a table has loaded. COPY INTO records each file it loads as a `txn` action
//! (application id `tidemark.copy_into:<file URL>`) in the very commit that adds the file's
//! rows: the table's own log is the record (no side state that can disagree with it),
//! checkpoints keep it, and two loads of one file that race are two commits of one
//! application id, which the second one's conflict check refuses.
//!
//! delta-rs answers for one application id at a time, replaying the log each time; a load
//! asks about every file it sees, so the ids are read here in one pass: the last checkpoint's
//! `txn` column, then the commits after it.

use std::collections::HashSet;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use deltalake::DeltaTable;
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::object_store::{ObjectStore, ObjectStoreExt};
use futures::{StreamExt, TryStreamExt};

use crate::catalog::log;
use crate::error::{Error, Result};

/// The application id of a loaded file's `txn` action.
pub(super) const APP_PREFIX: &str = "tidemark.copy_into:";

/// The URLs of the files `table` (at its loaded version) has loaded.
pub(super) async fn loaded(table: &DeltaTable, name: &str) -> Result<HashSet<String>> {
    let Some(version) = table.version() else {
        return Ok(HashSet::new());
    };
    let snapshot = table.snapshot()?;
    let config = snapshot.metadata().configuration();
    if config
        .keys()
        .any(|k| k.eq_ignore_ascii_case("delta.setTransactionRetentionDuration"))
    {
        return Err(Error::Invalid(format!(
            "COPY INTO {name}: the table expires its transaction records (delta.setTransactionRetentionDuration), and COPY INTO keeps which files it loaded in them: unset the property to load files exactly once"
        )));
    }
    if snapshot
        .protocol()
        .writer_features()
        .is_some_and(|f| f.iter().any(|f| f.as_ref() == "v2Checkpoint"))
    {
        return Err(Error::Invalid(format!(
            "COPY INTO {name}: the table uses v2 checkpoints, which tidemark does not read its load records from; load into a table tidemark created"
        )));
    }
    let store = table.log_store().object_store(None);
    let mut ids = HashSet::new();
    // A checkpoint newer than the snapshot (another process's) serves too: a file it records
    // is loaded, and what was loaded after the snapshot is the commit's conflict check's.
    let from = match last_checkpoint(store.as_ref()).await? {
        Some((at, parts)) => {
            checkpoint_ids(&store, at, parts, &mut ids).await?;
            at + 1
        }
        None => 0,
    };
    let commits: Vec<Vec<String>> = futures::stream::iter(from..=version)
        .map(|v| {
            let store = store.clone();
            async move {
                let path = Path::from(log::commit_in_table(v));
                let bytes = read(store.as_ref(), &path).await?;
                commit_ids(&bytes, v)
            }
        })
        .buffer_unordered(16)
        .try_collect()
        .await
        .map_err(|e: Error| {
            e.context(format!("COPY INTO {name}: reading which files it loaded"))
        })?;
    ids.extend(commits.into_iter().flatten());
    Ok(ids
        .into_iter()
        .filter_map(|id| id.strip_prefix(APP_PREFIX).map(str::to_string))
        .collect())
}

/// One object of the table's store, whole.
async fn read(store: &dyn ObjectStore, path: &Path) -> Result<bytes::Bytes> {
    let failed = |e: deltalake::logstore::object_store::Error| {
        Error::Other(format!("cannot read {path}: {e}"))
    };
    store
        .get(path)
        .await
        .map_err(failed)?
        .bytes()
        .await
        .map_err(failed)
}

/// The version and part count `_last_checkpoint` names, if any.
async fn last_checkpoint(store: &dyn ObjectStore) -> Result<Option<(u64, u64)>> {
    let path = Path::from(format!("{}/_last_checkpoint", log::DIR));
    let bytes = match store.get(&path).await {
        Ok(found) => found.bytes().await,
        Err(deltalake::logstore::object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => Err(e),
    }
    .map_err(|e| Error::Other(format!("cannot read {path}: {e}")))?;
    let json: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Other(format!("_delta_log/_last_checkpoint: {e}")))?;
    let version = json.get("version").and_then(|v| v.as_u64());
    let parts = json.get("parts").and_then(|v| v.as_u64()).unwrap_or(1);
    Ok(version.map(|v| (v, parts)))
}

/// The application ids in checkpoint `at` (all its parts).
async fn checkpoint_ids(
    store: &std::sync::Arc<dyn ObjectStore>,
    at: u64,
    parts: u64,
    ids: &mut HashSet<String>,
) -> Result<()> {
    for part in 1..=parts {
        let name = if parts == 1 {
            log::file_name(at, "checkpoint.parquet")
        } else {
            log::file_name(at, &format!("checkpoint.{part:010}.{parts:010}.parquet"))
        };
        let path = Path::from(format!("{}/{name}", log::DIR));
        let bytes = read(store.as_ref(), &path).await?;
        let failed = |e: datafusion::parquet::errors::ParquetError| {
            Error::Other(format!("{}/{name}: {e}", log::DIR))
        };
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(failed)?;
        let Ok(txn) = builder.schema().index_of("txn") else {
            continue;
        };
        let mask = ProjectionMask::roots(builder.parquet_schema(), [txn]);
        let batches = builder.with_projection(mask).build().map_err(failed)?;
        for batch in batches {
            let batch = batch?;
            let Some(txn) = batch.column(0).as_struct_opt() else {
                return Err(Error::Other(format!(
                    "{}/{name}: its txn column is not a struct",
                    log::DIR
                )));
            };
            let Some(app) = txn.column_by_name("appId") else {
                continue;
            };
            let app = datafusion::arrow::compute::cast(app, &DataType::Utf8)?;
            let app = app.as_string::<i32>();
            for row in 0..batch.num_rows() {
                if txn.is_valid(row) && app.is_valid(row) {
                    ids.insert(app.value(row).to_string());
                }
            }
        }
    }
    Ok(())
}

/// The application ids in one commit file.
fn commit_ids(bytes: &[u8], version: u64) -> Result<Vec<String>> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Error::Other(format!("commit {version} is not UTF-8: {e}")))?;
    let mut out = vec![];
    for line in text.lines().filter(|l| l.contains("\"txn\"")) {
        let action: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| Error::Other(format!("commit {version}: {e}")))?;
        if let Some(app) = action
            .get("txn")
            .and_then(|t| t.get("appId"))
            .and_then(|a| a.as_str())
        {
            out.push(app.to_string());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_application_ids_of_a_commit() {
        let commit = br#"{"commitInfo":{"operation":"WRITE","note":"txn"}}
{"txn":{"appId":"tidemark.copy_into:file:///d/a.csv","version":1}}
{"add":{"path":"x.parquet"}}
{"txn":{"appId":"other","version":7}}
"#;
        assert_eq!(
            super::commit_ids(commit, 3).unwrap(),
            vec!["tidemark.copy_into:file:///d/a.csv", "other"]
        );
    }
}
