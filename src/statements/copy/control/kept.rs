//! A control table kept open between a job's batches of advances.
//!
//! After its own commit this process knows the table's files exactly (those it had, less those
//! it removed, plus those it wrote), so the next batch needs no replay of the log: it reads
//! the few files whose `source_table` statistics admit the batch's names, straight from
//! Parquet, and puts its commit at the next version itself. That put is refused when any other
//! writer committed since; the batch is then a conflict, run again on the table opened anew.
//! Replaying the log for every batch cost more the bigger the control table was (delta-rs
//! replays every file's entry, and the entries of every commit since the last checkpoint, for
//! each scan and after each commit), so that the job's cost per table grew with the number of
//! tables.
//!
//! A table whose files cannot be read that way (partitions, deletion vectors, a file whose
//! columns are not exactly the table's, a protocol feature that asks more of a commit, CHECK
//! constraints) is kept as delta-rs' state instead, brought up to date before each batch.
//!
//! (The checks of a first open, that the table may be written, were made by the batch that
//! kept it; a write the store refuses later is still an error.)

use std::collections::HashMap;
use std::sync::Mutex;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use deltalake::DeltaTable;
use deltalake::kernel::Remove;
use deltalake::logstore::object_store::{ObjectMeta, ObjectStoreExt};

use super::ByRow;
use crate::catalog::TableName;
use crate::engine::Session;
use crate::error::{Error, Result};
use crate::statements::rewrite::{self, Layout};

/// One file of a control table kept with its files.
struct File {
    /// The file's path as the log names it (its remove must name it so).
    path: String,
    size: i64,
    /// The file's `source_table` statistics (None: it may hold any name).
    low: Option<String>,
    high: Option<String>,
}

impl File {
    fn remove(&self) -> Remove {
        Remove {
            path: self.path.clone(),
            data_change: true,
            deletion_timestamp: Some(chrono::Utc::now().timestamp_millis()),
            extended_file_metadata: Some(true),
            size: Some(self.size),
            partition_values: Some(HashMap::new()),
            deletion_vector: None,
            tags: None,
            base_row_id: None,
            default_row_commit_version: None,
        }
    }
}

/// Whether a file's path names it the same decoded and percent-encoded (delta-rs gives the
/// decoded name, which a remove must spell as the add did).
fn plain_path(path: &str) -> bool {
    path.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

/// A control table as this process last left it.
pub(super) struct Kept {
    /// delta-rs' state of the table, at `version` or before: the version it was opened at,
    /// when this process's own advances followed (they changed no schema, protocol or
    /// store); brought up to date by delta-rs when `files` is None.
    table: DeltaTable,
    version: u64,
    /// What the store said of version `version`'s commit file when it was kept.
    commit: ObjectMeta,
    /// The table's files at `version`, when they can be read and replaced without delta-rs.
    files: Option<Vec<File>>,
}

/// What [`Kept::advance`] did.
pub(super) enum Advanced {
    /// The batch is applied (or changed no row), and the table as it is to be kept (None:
    /// the next batch opens it).
    Done(Option<Kept>),
    /// The batch is for delta-rs' state of the table, current, which is returned.
    Not(DeltaTable),
}

/// Kept control tables, by URL.
static KEPT: Mutex<Option<HashMap<String, Kept>>> = Mutex::new(None);

/// Keep `table` (delta-rs' state, at the version this process just committed or read) for
/// the next batch.
pub(super) async fn keep(url: String, table: DeltaTable) {
    if let Some(kept) = Kept::of(table).await {
        put(url, kept);
    }
}

/// Keep `kept` for the next batch.
pub(super) fn put(url: String, kept: Kept) {
    if let Ok(mut all) = KEPT.lock() {
        let all = all.get_or_insert_with(Default::default);
        if all.len() >= 1024
            && let Some(old) = all.keys().next().cloned()
        {
            all.remove(&old);
        }
        all.insert(url, kept);
    }
}

/// The kept control table at `url`, when the commit it was kept at is still the very file it
/// was (a table dropped and made again at its place by another process is opened anew);
/// None otherwise.
///
/// Kept with its files, it is the table's state now only while no commit follows that one:
/// after another writer's (or this process's own UPDATE of the control table between two
/// jobs) it is handed to delta-rs to bring up to date. (A batch that found no row to change
/// in a state that was not the latest would lose its advance.)
pub(super) async fn take(url: &str) -> Option<Kept> {
    let mut kept = KEPT.lock().ok()?.as_mut()?.remove(url)?;
    let now = commit_meta(&kept.table, kept.version).await.ok()??;
    let same =
        now.size == kept.commit.size && now.e_tag.is_some() && now.e_tag == kept.commit.e_tag;
    if !same {
        return None;
    }
    // (A HEAD that fails otherwise than by finding nothing says nothing: opened anew.)
    if kept.files.is_some()
        && commit_meta(&kept.table, kept.version + 1)
            .await
            .ok()?
            .is_some()
    {
        kept.files = None;
    }
    Some(kept)
}

/// What the store says now of the commit file of `table`'s version `version`: None when
/// there is none, an error when the store could not say.
async fn commit_meta(
    table: &DeltaTable,
    version: u64,
) -> std::result::Result<Option<ObjectMeta>, deltalake::ObjectStoreError> {
    let path = deltalake::Path::from(crate::catalog::log::commit_in_table(version));
    match table.object_store().head(&path).await {
        Ok(meta) => Ok(Some(meta)),
        Err(deltalake::ObjectStoreError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

impl Kept {
    /// `table` kept: with its files when [`direct_files`] can have them.
    async fn of(table: DeltaTable) -> Option<Kept> {
        let version = table.version()?;
        let commit = commit_meta(&table, version).await.ok()??;
        let files = direct_files(&table);
        Some(Kept {
            table,
            version,
            commit,
            files,
        })
    }

    /// Apply `change` to the table's rows: here when its files are kept and the files it
    /// touches read as the table's columns, else by handing delta-rs' state back. A commit
    /// by another writer since this process's last makes it a conflict.
    pub(super) async fn advance(
        mut self,
        session: &Session,
        name: &TableName,
        change: &ByRow<'_>,
        layout: &Layout,
    ) -> Result<Advanced> {
        let Some(files) = self.files.take() else {
            let mut table = self.table;
            if table.update_incremental(None).await.is_err() {
                // (Its log cleaned up since, say: opened anew.)
                table = session.warehouse().open_for_write(name).await?;
            }
            return Ok(Advanced::Not(table));
        };
        let schema: SchemaRef =
            deltalake::writer::RecordBatchWriter::for_table(&self.table)?.arrow_schema();
        let mut read = vec![];
        for file in files.iter().filter(|f| change.may_hold(&f.low, &f.high)) {
            match self.read(file, &schema).await? {
                Some(rows) => read.push((file.remove(), rows)),
                None => {
                    // Not a file this reader gives the table's columns for: delta-rs reads it.
                    let table = session.warehouse().open_for_write(name).await?;
                    return Ok(Advanced::Not(table));
                }
            }
        }
        let Some(done) = rewrite::rewrite_files(&self.table, change, read, layout).await? else {
            self.files = Some(files);
            return Ok(Advanced::Done(Some(self)));
        };
        let removed: Vec<String> = done
            .removes
            .iter()
            .filter_map(|a| match a {
                deltalake::kernel::Action::Remove(r) => Some(r.path.clone()),
                _ => None,
            })
            .collect();
        let added: Vec<File> = done.adds.iter().map(added_file).collect();
        let bytes = rewrite::update_commit(done, change.predicate(), self.version)?;
        fail::fail_point!("rewrite::before_commit");
        // Tests kill the process here: its new files are written, not committed.
        fail::fail_point!("copy::before_direct_advance", |_| std::process::abort());
        let log_store = self.table.log_store();
        use deltalake::table::config::TablePropertiesExt;
        let delta_interval = self
            .table
            .snapshot()?
            .table_config()
            .checkpoint_interval()
            .get();
        let version =
            match super::super::history::commit_past(&log_store, self.version + 1, &bytes, |_| {
                false
            })
            .await?
            {
                Ok(v) => v,
                Err(theirs) => {
                    // The new files are in no commit: deleted (the batch runs again).
                    let store = self.table.object_store();
                    for file in &added {
                        let _ = store
                            .delete(&deltalake::Path::from(file.path.as_str()))
                            .await;
                    }
                    return Err(Error::Conflict(format!(
                        "version {theirs} of {name} was committed by another writer"
                    )));
                }
            };
        let mut files = files;
        files.retain(|f| !removed.contains(&f.path));
        let plain = added.iter().all(|f| plain_path(&f.path));
        files.extend(added);
        // The table's upkeep, which needs delta-rs' state (kept then): tidemark's checkpoint
        // or, for a table too big for it, Delta's every `delta.checkpointInterval` commits (as
        // delta-rs' own commit would), and a file named in a way this reader does not keep:
        // the table as delta-rs opens it from now on.
        let ours = crate::statements::upkeep::checkpoint_due(&log_store, version).await;
        let deltas = (version + 1).is_multiple_of(delta_interval);
        if ours || deltas || !plain {
            let Ok(table) = session.warehouse().open_for_write(name).await else {
                return Ok(Advanced::Done(None));
            };
            if ours {
                crate::statements::upkeep::maintain(&table).await;
            } else if deltas {
                // Best effort, as the upkeep is: the commit stands whatever happens after it.
                let _ = deltalake::checkpoints::create_checkpoint(&table, None).await;
            }
            return Ok(Advanced::Done(Kept::of(table).await));
        }
        // (Not found, or not known: the next batch opens the table.)
        let Ok(Some(commit)) = commit_meta(&self.table, version).await else {
            return Ok(Advanced::Done(None));
        };
        self.version = version;
        self.commit = commit;
        self.files = Some(files);
        Ok(Advanced::Done(Some(self)))
    }

    /// The live rows of `file` in the table's columns (`schema`), read straight from its
    /// Parquet; None when a column is missing or stored in another type than the table's.
    async fn read(&self, file: &File, schema: &SchemaRef) -> Result<Option<Vec<RecordBatch>>> {
        use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        let store = self.table.object_store();
        let location = deltalake::Path::from(file.path.as_str());
        let bytes = store
            .get(&location)
            .await
            .map_err(deltalake::DeltaTableError::from)?
            .bytes()
            .await
            .map_err(deltalake::DeltaTableError::from)?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .and_then(|b| b.build())
            .map_err(deltalake::DeltaTableError::from)?;
        let mut out = vec![];
        for batch in reader {
            let batch = batch.map_err(deltalake::DeltaTableError::from)?;
            let mut columns = Vec::with_capacity(schema.fields().len());
            for field in schema.fields() {
                let Some(column) = batch.column_by_name(field.name()) else {
                    return Ok(None);
                };
                if column.data_type() == field.data_type() {
                    columns.push(column.clone());
                } else if same_values(column.data_type(), field.data_type()) {
                    columns.push(datafusion::arrow::compute::cast(column, field.data_type())?);
                } else {
                    return Ok(None);
                }
            }
            out.push(RecordBatch::try_new(schema.clone(), columns)?);
        }
        Ok(Some(out))
    }
}

/// Whether values stored as `stored` are the same values as `table` holds them, only
/// differently spelled in Arrow: strings (plain, large, views, dictionaries of them) and
/// timestamps of the same unit, both of an instant (a file's UTC is "UTC" or "+00:00").
fn same_values(stored: &DataType, table: &DataType) -> bool {
    fn string(t: &DataType) -> bool {
        match t {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
            DataType::Dictionary(_, v) => string(v),
            _ => false,
        }
    }
    match (stored, table) {
        (DataType::Timestamp(a, Some(x)), DataType::Timestamp(b, Some(y))) => {
            let utc = |z: &str| matches!(z, "UTC" | "+00:00" | "Z");
            a == b && utc(x) && utc(y)
        }
        _ => string(stored) && string(table),
    }
}

/// A file this process wrote, as kept.
fn added_file(add: &deltalake::kernel::Add) -> File {
    let stats = add.get_stats().ok().flatten();
    let bound = |values: Option<&HashMap<String, deltalake::protocol::ColumnValueStat>>| {
        values?
            .get("source_table")?
            .as_value()?
            .as_str()
            .map(str::to_string)
    };
    File {
        path: add.path.clone(),
        size: add.size,
        low: bound(stats.as_ref().map(|s| &s.min_values)),
        high: bound(stats.as_ref().map(|s| &s.max_values)),
    }
}

/// The files of `t`, when every change of its rows can be read and committed without
/// delta-rs: tidemark's own rewrite applies (no CHECK constraints, generated columns,
/// invariants, column mapping or change data feed), no partitions, no deletion vectors, an
/// append-only flag off, only protocol features that ask nothing of a plain commit of adds and
/// removes, and names that read the same decoded.
fn direct_files(t: &DeltaTable) -> Option<Vec<File>> {
    if !rewrite::applies(t).ok()? || rewrite::has_checks(t).ok()? {
        return None;
    }
    let snapshot = t.snapshot().ok()?;
    // What delta-rs checks before each of its commits: the features it writes.
    deltalake::kernel::transaction::PROTOCOL
        .can_write_to(snapshot)
        .ok()?;
    let append_only = snapshot
        .metadata()
        .configuration()
        .get("delta.appendOnly")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if append_only
        || !snapshot.metadata().partition_columns().is_empty()
        || !super::super::history::compaction_keeps_protocol(snapshot.protocol())
    {
        return None;
    }
    let mut files = vec![];
    for f in snapshot.log_data().iter() {
        if f.deletion_vector_descriptor().is_some() || !plain_path(f.path().as_ref()) {
            return None;
        }
        files.push(File {
            path: f.path().to_string(),
            size: f.size(),
            low: super::source_bound(f.min_values()),
            high: super::source_bound(f.max_values()),
        });
    }
    Some(files)
}

#[cfg(test)]
mod tests {
    use super::same_values;
    use datafusion::arrow::datatypes::{DataType, TimeUnit};

    #[test]
    fn only_other_spellings_of_the_same_values_are_read_as_the_tables() {
        let utf8 = DataType::Utf8;
        let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::LargeUtf8));
        assert!(same_values(&DataType::Utf8View, &utf8));
        assert!(same_values(&dict, &utf8));
        assert!(same_values(&utf8, &DataType::LargeUtf8));
        let ts = |unit, tz: Option<&str>| DataType::Timestamp(unit, tz.map(Into::into));
        let table = ts(TimeUnit::Microsecond, Some("UTC"));
        assert!(same_values(
            &ts(TimeUnit::Microsecond, Some("+00:00")),
            &table
        ));
        // Another unit (Spark's INT96 is read as nanoseconds), no zone, another zone: no.
        assert!(!same_values(&ts(TimeUnit::Nanosecond, Some("UTC")), &table));
        assert!(!same_values(&ts(TimeUnit::Microsecond, None), &table));
        assert!(!same_values(
            &ts(TimeUnit::Microsecond, Some("+01:00")),
            &table
        ));
        assert!(!same_values(&DataType::Int32, &DataType::Int64));
        assert!(!same_values(&DataType::Int64, &utf8));
        assert!(!same_values(&DataType::Binary, &utf8));
    }
}
