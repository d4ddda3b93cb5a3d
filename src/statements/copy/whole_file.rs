//! The whole-file fast path of COPY INCREMENTAL: a source file whose statistics put every row
//! above the start point (no NULL watermark, no deletion vector, a schema the target reads as
//! it is) is not decoded at all. It is hard-linked (or byte-copied) into the target and
//! committed with its statistics; only files that straddle the mark are read and filtered.

use std::collections::HashMap;
use std::path::Path;

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;
use deltalake::DeltaTable;
use deltalake::kernel::Add;

use crate::error::{Error, Result};

/// One file of the pinned source snapshot and what its statistics say about the watermark.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub add: Add,
    pub min: Option<ScalarValue>,
    /// Upper bound of the file's watermark (stats are truncated to milliseconds).
    pub max_upper: Option<ScalarValue>,
    pub nulls: Option<i64>,
    pub rows: Option<i64>,
}

/// The snapshot's files with their statistics, parsed once for every use in a copy.
pub fn source_files(source: &DeltaTable, wm: &str, dt: &DataType) -> Result<Vec<SourceFile>> {
    let mut files = vec![];
    for view in source.snapshot()?.log_data().iter() {
        #[allow(deprecated)] // the Add action is exactly what is re-committed in the target
        let add = view.add_action();
        let stats: Option<serde_json::Value> = add
            .stats
            .as_deref()
            .and_then(|s| serde_json::from_str(s).ok());
        let get = |key: &str| {
            stats
                .as_ref()
                .and_then(|s| s.get(key))
                .and_then(|m| m.get(wm))
        };
        let min = get("minValues").and_then(|v| stat_value(v, dt));
        let max = get("maxValues").and_then(|v| stat_value(v, dt));
        let nulls = get("nullCount").and_then(|v| v.as_i64());
        let rows = stats
            .as_ref()
            .and_then(|s| s.get("numRecords"))
            .and_then(|v| v.as_i64());
        files.push(SourceFile {
            add,
            min,
            max_upper: max.as_ref().map(|m| shift(m, slack(dt))),
            nulls,
            rows,
        });
    }
    Ok(files)
}

/// NULL watermarks in the snapshot, from the files' statistics; None when a file lacks them
/// or has a deletion vector (then a query counts).
pub fn null_count(files: &[SourceFile]) -> Option<i64> {
    files.iter().try_fold(0, |total, f| {
        if f.add.deletion_vector.is_some() {
            return None;
        }
        Some(total + f.nulls?)
    })
}

/// Whether a log's file path is absolute (`s3://...`, `file:///...`, `/...`): not under the
/// table's root.
pub fn absolute(path: &str) -> bool {
    path.starts_with('/') || path.contains("://") || path.starts_with("file:")
}

/// Which source files to link whole and which to decode.
#[derive(Debug, Default)]
pub struct FilePlan {
    pub whole: Vec<SourceFile>,
    pub decode: Vec<SourceFile>,
}

impl FilePlan {
    /// Rows in whole files, from their statistics.
    pub fn whole_rows(&self) -> i64 {
        self.whole.iter().map(|f| f.rows.unwrap_or(0)).sum()
    }

    /// Files that may hold the highest watermark: their upper bound reaches the best lower
    /// bound of any file's maximum.
    pub fn max_candidates(&self) -> Vec<&SourceFile> {
        let all: Vec<&SourceFile> = self.whole.iter().chain(self.decode.iter()).collect();
        let Some(best) = all
            .iter()
            .filter_map(|f| f.max_upper.clone())
            .max_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal))
        else {
            return all;
        };
        all.into_iter()
            .filter(|f| match &f.max_upper {
                // A file's true maximum lies in [upper - slack, upper]; keep every file whose
                // upper bound is not below the smallest value the best file may hold.
                Some(u) => u >= &lower_of(&best),
                None => true,
            })
            .collect()
    }
}

/// How far a statistic may sit below the true value (Delta truncates timestamps to ms).
fn slack(dt: &DataType) -> i64 {
    match dt {
        DataType::Timestamp(TimeUnit::Microsecond, _) => 999,
        DataType::Timestamp(TimeUnit::Nanosecond, _) => 999_999,
        _ => 0,
    }
}

fn shift(v: &ScalarValue, by: i64) -> ScalarValue {
    match v {
        ScalarValue::TimestampMicrosecond(Some(x), tz) => {
            ScalarValue::TimestampMicrosecond(Some(x + by), tz.clone())
        }
        ScalarValue::TimestampNanosecond(Some(x), tz) => {
            ScalarValue::TimestampNanosecond(Some(x + by), tz.clone())
        }
        other => other.clone(),
    }
}

fn lower_of(upper: &ScalarValue) -> ScalarValue {
    let s = slack(&upper.data_type());
    shift(upper, -s)
}

/// Whether the fast path can serve this watermark type.
pub fn supports(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Timestamp(TimeUnit::Microsecond | TimeUnit::Nanosecond, _)
            | DataType::Date32
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
    )
}

/// A statistic as a value of the watermark's type.
fn stat_value(v: &serde_json::Value, dt: &DataType) -> Option<ScalarValue> {
    let raw = match v {
        serde_json::Value::String(s) => ScalarValue::Utf8(Some(s.clone())),
        serde_json::Value::Number(n) => ScalarValue::Int64(Some(n.as_i64()?)),
        _ => return None,
    };
    raw.cast_to(dt).ok().filter(|x| !x.is_null())
}

/// Sort the snapshot's files: whole (every row above `start`), decode (may hold rows above
/// `start`), or skipped (none can).
pub fn plan(
    files: &[SourceFile],
    root: Option<&Path>,
    wm: &str,
    dt: &DataType,
    start: Option<&ScalarValue>,
) -> FilePlan {
    let mut plan = FilePlan::default();
    for f in files {
        let (add, max_upper) = (&f.add, &f.max_upper);
        // No row can be above the start point: skip the file.
        if let (Some(s), Some(u)) = (start, max_upper)
            && u <= s
        {
            continue;
        }
        let all_above = match (start, &f.min) {
            (None, _) => true,
            (Some(s), Some(m)) => m > s,
            (Some(_), None) => false,
        };
        let mut all_above = all_above;
        // Statistics truncated to milliseconds leave the file holding the mark undecided;
        // its footer says exactly whether it holds rows above the start.
        if let Some(s) = start
            && !all_above
            && add.deletion_vector.is_none()
            && let Some(root) = root
            && let Some((min, max)) = footer_range(root, &add.path, wm, dt)
        {
            if max.as_ref().is_none_or(|m| m <= s) {
                continue;
            }
            all_above = min.as_ref().is_some_and(|m| m > s);
        }
        let whole = all_above
            && f.nulls == Some(0)
            && f.rows.is_some()
            && add.deletion_vector.is_none()
            && add.partition_values.is_empty();
        if whole {
            plan.whole.push(f.clone());
        } else {
            plan.decode.push(f.clone());
        }
    }
    plan
}

/// The exact largest watermark in `files`, from their Parquet footers: row-group statistics
/// are exact where Delta's JSON statistics are truncated to milliseconds, and reading a footer
/// costs a fraction of decoding the column. `None` when a file has a deletion vector or a
/// footer lacks an exact statistic of the expected type (then the caller reads the column);
/// `Some(None)` when the files hold no non-NULL watermark.
pub fn footer_max(
    source_root: &Path,
    files: &[&SourceFile],
    wm: &str,
    dt: &DataType,
) -> Option<Option<ScalarValue>> {
    if files.iter().any(|f| f.add.deletion_vector.is_some()) {
        return None;
    }
    let maxes = files
        .iter()
        .map(|f| footer_range(source_root, &f.add.path, wm, dt).map(|(_, max)| max))
        .collect::<Option<Vec<_>>>()?;
    Some(largest(maxes))
}

/// The largest of files' largest watermarks (None for a file of NULLs only).
fn largest(maxes: Vec<Option<ScalarValue>>) -> Option<ScalarValue> {
    maxes
        .into_iter()
        .flatten()
        .reduce(|best, m| if m > best { m } else { best })
}

/// The exact (min, max) of the watermark in one Parquet file, from its footer (None for a
/// file of NULLs only); `None` when the footer cannot say exactly.
fn footer_range(
    root: &Path,
    path: &str,
    wm: &str,
    dt: &DataType,
) -> Option<(Option<ScalarValue>, Option<ScalarValue>)> {
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
    // delta-rs hands out add paths already URL-decoded: the file's own name.
    let file = std::fs::File::open(root.join(path)).ok()?;
    let reader = SerializedFileReader::new(file).ok()?;
    range_in(reader.metadata(), wm, dt)
}

/// [`footer_max`] for a table on an object store: each candidate's footer read by a ranged
/// request (its size is known from the log), not its column.
pub async fn store_footer_max(
    table: &DeltaTable,
    files: &[&SourceFile],
    wm: &str,
    dt: &DataType,
) -> Option<Option<ScalarValue>> {
    use futures::{StreamExt, TryStreamExt};
    if files.iter().any(|f| f.add.deletion_vector.is_some()) {
        return None;
    }
    let store = table.log_store().object_store(None);
    // Eight footers at a time (a table whose files have no statistics has every file a
    // candidate); owned values only, for a future that crosses threads.
    let reads: Vec<_> = files
        .iter()
        .map(|f| {
            let (store, path, size) = (store.clone(), f.add.path.clone(), f.add.size);
            let (wm, dt) = (wm.to_string(), dt.clone());
            async move {
                let meta = store_footer(&store, &path, size).await.ok_or(())?;
                range_in(&meta, &wm, &dt).map(|(_, max)| max).ok_or(())
            }
        })
        .collect();
    // The first footer that cannot say ends the reads.
    let maxes = futures::stream::iter(reads)
        .buffered(8)
        .try_collect::<Vec<_>>()
        .await
        .ok()?;
    Some(largest(maxes))
}

/// The footer of the Parquet file at `path` (relative to `store`), `size` bytes long: its
/// last 8 KiB, which hold the footer of most files of few columns, and the footer's whole
/// length again when it is longer. None when it cannot be read or parsed.
async fn store_footer(
    store: &Store,
    path: &str,
    size: i64,
) -> Option<datafusion::parquet::file::metadata::ParquetMetaData> {
    use datafusion::parquet::errors::ParquetError;
    use datafusion::parquet::file::metadata::ParquetMetaDataReader;
    use deltalake::logstore::object_store::ObjectStoreExt;
    let key = Key::parse(path).ok()?;
    let size = u64::try_from(size).ok()?;
    let mut tail = size.min(8 * 1024);
    let mut reader = ParquetMetaDataReader::new();
    loop {
        let bytes = store.get_range(&key, size - tail..size).await.ok()?;
        match reader.try_parse_sized(&bytes, size) {
            Ok(()) => break,
            Err(ParquetError::NeedMoreData(needed)) if (needed as u64) > tail => {
                tail = size.min(needed as u64);
            }
            Err(_) => return None,
        }
    }
    reader.finish().ok()
}

/// The exact (min, max) of the watermark in a Parquet file's footer `meta`; `None` when it
/// cannot say exactly.
fn range_in(
    meta: &datafusion::parquet::file::metadata::ParquetMetaData,
    wm: &str,
    dt: &DataType,
) -> Option<(Option<ScalarValue>, Option<ScalarValue>)> {
    use datafusion::parquet::basic::{LogicalType, TimeUnit as PqUnit};
    use datafusion::parquet::file::statistics::Statistics;
    let schema = meta.file_metadata().schema_descr();
    let idx = (0..schema.num_columns()).find(|&i| {
        let c = schema.column(i);
        c.path().parts().len() == 1 && c.path().parts()[0] == wm
    })?;
    let unit_ok = match (dt, schema.column(idx).logical_type_ref()) {
        (DataType::Timestamp(TimeUnit::Microsecond, _), Some(LogicalType::Timestamp(t))) => {
            matches!(t.unit, PqUnit::MICROS)
        }
        (DataType::Timestamp(TimeUnit::Nanosecond, _), Some(LogicalType::Timestamp(t))) => {
            matches!(t.unit, PqUnit::NANOS)
        }
        (DataType::Timestamp(_, _), _) => false,
        _ => true,
    };
    if !unit_ok {
        return None;
    }
    let value = |v: i64| -> Option<ScalarValue> {
        Some(match dt {
            DataType::Timestamp(TimeUnit::Microsecond, tz) => {
                ScalarValue::TimestampMicrosecond(Some(v), tz.clone())
            }
            DataType::Timestamp(TimeUnit::Nanosecond, tz) => {
                ScalarValue::TimestampNanosecond(Some(v), tz.clone())
            }
            DataType::Date32 => ScalarValue::Date32(Some(i32::try_from(v).ok()?)),
            other => ScalarValue::Int64(Some(v)).cast_to(other).ok()?,
        })
    };
    let (mut lo, mut hi): (Option<ScalarValue>, Option<ScalarValue>) = (None, None);
    for rg in meta.row_groups() {
        let stats = rg.column(idx).statistics()?;
        if stats.null_count_opt() == Some(rg.num_rows() as u64) {
            continue; // only NULLs
        }
        let (min, max) = match stats {
            Statistics::Int64(s) if s.min_is_exact() && s.max_is_exact() => {
                (*s.min_opt()?, *s.max_opt()?)
            }
            Statistics::Int32(s) if s.min_is_exact() && s.max_is_exact() => {
                (i64::from(*s.min_opt()?), i64::from(*s.max_opt()?))
            }
            _ => return None,
        };
        let (min, max) = (value(min)?, value(max)?);
        if lo.as_ref().is_none_or(|l| min < *l) {
            lo = Some(min);
        }
        if hi.as_ref().is_none_or(|h| max > *h) {
            hi = Some(max);
        }
    }
    Some((lo, hi))
}

/// Whether a table stores its columns under their own names (no column mapping).
pub fn unmapped(t: &DeltaTable) -> bool {
    use delta_kernel::table_features::ColumnMappingMode;
    t.snapshot().is_ok_and(|s| {
        s.table_config()
            .column_mapping_mode
            .is_none_or(|m| m == ColumnMappingMode::None)
    })
}

/// Source files that may hold rows with watermark `v`, by their statistics; None when one of
/// them has a deletion vector (its rows can change without a new file).
pub fn files_holding(files: &[SourceFile], v: &ScalarValue) -> Option<Vec<String>> {
    let mut out = vec![];
    for f in files {
        let below = f.min.as_ref().is_some_and(|m| m > v);
        let above = f.max_upper.as_ref().is_some_and(|u| u < v);
        if below || above {
            continue;
        }
        if f.add.deletion_vector.is_some() {
            return None;
        }
        out.push(f.add.path.clone());
    }
    out.sort();
    Some(out)
}

/// Link (or copy) the whole files into the target directory under new, never-used names and
/// return their Add actions, statistics unchanged. A link shares the source file's inode, so
/// an existing destination is never opened for writing (that would truncate the source).
pub fn link_files(
    source_root: &Path,
    target_root: &Path,
    files: &[SourceFile],
    hard_links: bool,
    inexact_stats: &[String],
) -> Result<Vec<Add>> {
    let now = chrono::Utc::now().timestamp_millis();
    let batch = uuid::Uuid::new_v4().simple().to_string();
    let mut adds = Vec::with_capacity(files.len());
    for (i, f) in files.iter().enumerate() {
        // Already URL-decoded by delta-rs: the file's own name.
        let rel = f.add.path.clone();
        let from = source_root.join(&rel);
        let name = new_name(&batch, i, &rel);
        let to = target_root.join(&name);
        let linked = hard_links && std::fs::hard_link(&from, &to).is_ok();
        if !linked {
            copy_new(&from, &to)?;
        }
        adds.push(added(f, name, now, inexact_stats));
    }
    Ok(adds)
}

/// The name a whole file gets in the target: new, never used, ending with the source file's.
fn new_name(batch: &str, i: usize, rel: &str) -> String {
    let file_name = Path::new(rel)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("part.parquet");
    // Plain characters only: every store and every reader names the file alike.
    let plain: String = file_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("tm-{batch}-{i:05}-{plain}")
}

/// The Add action of a whole file copied to `name`, its statistics unchanged.
fn added(f: &SourceFile, name: String, now: i64, inexact_stats: &[String]) -> Add {
    Add {
        path: name,
        partition_values: HashMap::new(),
        size: f.add.size,
        modification_time: now,
        data_change: true,
        // Statistics that may have been rounded through float64 are not carried on.
        stats: match &f.add.stats {
            Some(s) if !inexact_stats.is_empty() => {
                Some(crate::catalog::filter_column_stats(s, |c| {
                    !inexact_stats.iter().any(|i| i == c)
                }))
            }
            other => other.clone(),
        },
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
        clustering_provider: None,
    }
}

/// [`link_files`] where a table is on an object store: within one store (one bucket) the
/// store copies each file itself, and no byte passes through tidemark; between stores (or
/// with the local file system) each file's bytes stream from one to the other, never decoded.
pub async fn copy_objects(
    source: &DeltaTable,
    target: &DeltaTable,
    files: &[SourceFile],
    inexact_stats: &[String],
) -> Result<Vec<Add>> {
    use futures::{StreamExt, TryStreamExt};
    let route = Route::between(source, target)?;
    let key = |rel: &str| Key::parse(rel).map_err(|e| Error::Other(format!("{rel}: {e}")));
    let now = chrono::Utc::now().timestamp_millis();
    let batch = uuid::Uuid::new_v4().simple().to_string();
    let mut jobs = Vec::with_capacity(files.len());
    let mut adds = Vec::with_capacity(files.len());
    for (i, f) in files.iter().enumerate() {
        let name = new_name(&batch, i, &f.add.path);
        jobs.push(route.copy(
            &key(&f.add.path)?,
            &key(&name)?,
            format!(
                "cannot copy {} of {} to {}",
                f.add.path,
                crate::catalog::external::shown(source.table_url()),
                crate::catalog::external::shown(target.table_url())
            ),
        ));
        adds.push(added(f, name, now, inexact_stats));
    }
    let _: Vec<()> = futures::stream::iter(jobs)
        .buffered(8)
        .try_collect()
        .await?;
    Ok(adds)
}

type Key = deltalake::logstore::object_store::path::Path;

/// How whole files go from one table's place to another's: within one bucket (for ADLS, one
/// container of one account) the store copies them itself, by keys from the bucket's root;
/// otherwise they stream between the tables' own stores, by keys relative to each table.
pub(crate) struct Route {
    same: bool,
    bucket: Store,
    stores: (Store, Store),
    tables: (Key, Key),
}

impl Route {
    pub(crate) fn between(source: &DeltaTable, target: &DeltaTable) -> Result<Route> {
        let (from_url, to_url) = (source.table_url(), target.table_url());
        let table = |url: &url::Url| {
            Key::from_url_path(url.path())
                .map_err(|e| Error::Other(format!("{}: {e}", crate::catalog::external::shown(url))))
        };
        Ok(Route {
            same: crate::catalog::external::is_remote(from_url)
                && crate::catalog::external::store_name(from_url)
                    == crate::catalog::external::store_name(to_url)
                && from_url.port() == to_url.port(),
            bucket: source.log_store().root_object_store(None),
            stores: (
                source.log_store().object_store(None),
                target.log_store().object_store(None),
            ),
            tables: (table(from_url)?, table(to_url)?),
        })
    }

    /// The copy of `from` (relative to the source table) to `to` (relative to the target).
    pub(crate) fn copy(
        &self,
        from: &Key,
        to: &Key,
        what: String,
    ) -> impl std::future::Future<Output = Result<()>> + use<> {
        let under = |table: &Key, rel: &Key| table.parts().chain(rel.parts()).collect::<Key>();
        let (stores, from, to) = if self.same {
            (
                (self.bucket.clone(), self.bucket.clone()),
                under(&self.tables.0, from),
                under(&self.tables.1, to),
            )
        } else {
            (self.stores.clone(), from.clone(), to.clone())
        };
        copy_object(stores, from, to, self.same, what)
    }
}

type Store = std::sync::Arc<dyn deltalake::logstore::object_store::ObjectStore>;

/// One whole file from `from` in the first store to `to` in the second: by the store itself
/// (`same`: one store), else streamed.
async fn copy_object(
    (from_store, to_store): (Store, Store),
    from: deltalake::logstore::object_store::path::Path,
    to: deltalake::logstore::object_store::path::Path,
    same: bool,
    what: String,
) -> Result<()> {
    use deltalake::logstore::object_store::ObjectStoreExt;
    use futures::TryStreamExt;
    use tokio::io::AsyncWriteExt;
    let failed = |e: deltalake::logstore::object_store::Error| Error::Other(format!("{what}: {e}"));
    // The store's own copy; one it refuses (S3 copies at most 5 GiB in one request) streams.
    let refused = if same {
        match from_store.copy(&from, &to).await {
            Ok(()) => return Ok(()),
            Err(e) => Some(e),
        }
    } else {
        None
    };
    let failed = |e: deltalake::logstore::object_store::Error| match &refused {
        Some(r) => Error::Other(format!("{what}: {e} (and the store's own copy: {r})")),
        None => failed(e),
    };
    let mut bytes = from_store.get(&from).await.map_err(failed)?.into_stream();
    let mut out = deltalake::logstore::object_store::buffered::BufWriter::new(to_store, to);
    let streamed = async {
        while let Some(chunk) = bytes.try_next().await.map_err(failed)? {
            out.write_all(&chunk).await?;
        }
        out.shutdown().await?;
        Ok::<_, Error>(())
    }
    .await;
    if streamed.is_err() {
        // No upload left half-made on the store.
        let _ = out.abort().await;
    }
    streamed
}

/// Byte-copy into a file that must not exist yet.
pub(crate) fn copy_new(from: &Path, to: &Path) -> Result<()> {
    let io = |e: std::io::Error| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("cannot copy {} to {}: {e}", from.display(), to.display()),
        ))
    };
    let mut src = std::fs::File::open(from).map_err(io)?;
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)
        .map_err(io)?;
    std::io::copy(&mut src, &mut dst).map_err(io)?;
    dst.sync_all().map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_files_get_plain_names_every_store_keeps_as_they_are() {
        assert_eq!(
            new_name("b", 7, "dir/part~1 x%2.snappy.parquet"),
            "tm-b-00007-part_1_x_2.snappy.parquet"
        );
        assert!(absolute("s3://b/t/p.parquet") && absolute("/t/p.parquet"));
        assert!(!absolute("part-0.parquet") && !absolute("d=1/part-0.parquet"));
    }

    #[test]
    fn timestamp_stats_are_widened_by_the_truncation() {
        let dt = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        let v = stat_value(&serde_json::json!("2024-01-01T00:00:00.001Z"), &dt).unwrap();
        assert_eq!(
            shift(&v, slack(&dt)),
            ScalarValue::TimestampMicrosecond(Some(1_704_067_200_001_999), Some("UTC".into()))
        );
    }
}
