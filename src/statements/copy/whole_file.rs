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
    root: &Path,
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
    let mut best: Option<ScalarValue> = None;
    for f in files {
        if f.add.deletion_vector.is_some() {
            return None;
        }
        let (_, max) = footer_range(source_root, &f.add.path, wm, dt)?;
        if let Some(m) = max
            && best.as_ref().is_none_or(|b| m > *b)
        {
            best = Some(m);
        }
    }
    Some(best)
}

/// The exact (min, max) of the watermark in one Parquet file, from its footer (None for a
/// file of NULLs only); `None` when the footer cannot say exactly.
fn footer_range(
    root: &Path,
    path: &str,
    wm: &str,
    dt: &DataType,
) -> Option<(Option<ScalarValue>, Option<ScalarValue>)> {
    use datafusion::parquet::basic::{LogicalType, TimeUnit as PqUnit};
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
    use datafusion::parquet::file::statistics::Statistics;
    let file = std::fs::File::open(root.join(percent_decode(path))).ok()?;
    let reader = SerializedFileReader::new(file).ok()?;
    let meta = reader.metadata();
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

/// Rows per row group of the files a decoding copy writes.
const ROW_GROUP_ROWS: usize = 256 * 1024;

/// Bytes of decoded rows (as Arrow holds them, by the source's Parquet metadata) a decoding
/// copy reads per batch: larger batches than DataFusion's 8,192 rows cut per-batch work by a
/// twentieth on narrow rows, bounded so that wide rows keep batches small.
const BATCH_BYTES: usize = 4 << 20;

/// How a copy decodes and re-encodes a source's rows.
#[derive(Clone, Debug)]
pub struct DecodeSettings {
    pub writer: datafusion::parquet::file::properties::WriterProperties,
    /// Rows per batch read: [`BATCH_BYTES`] of the source's rows, 8,192 to 65,536.
    pub batch_rows: usize,
}

/// Parquet writer settings for rows decoded from `source` into `target`: Snappy (as delta-rs
/// and Spark write) for the columns it shrank in the source, and dictionary encoding only for
/// the columns where it pays in the source. A column whose source dictionary overflowed (the
/// writer fell back to plain pages) or holds more than half as many entries as the chunk has
/// values (unique ids, timestamps, measures, free text) is written without one: building a
/// dictionary that overflows and is dropped costs a fifth of the CPU of a decoded copy. Such
/// integer columns are delta-encoded when a sample of the source's values packs to half their
/// size or less (a quarter of the CPU again).
pub fn decode_settings(
    source: &DeltaTable,
    target: &DeltaTable,
    root: &Path,
    delta_encoding: bool,
) -> DecodeSettings {
    use datafusion::parquet::basic::{Compression, Encoding, Type};
    use datafusion::parquet::column::page::Page;
    use datafusion::parquet::file::properties::WriterProperties;
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
    let mut props = WriterProperties::builder()
        .set_created_by(format!("tidemark {}", env!("CARGO_PKG_VERSION")))
        .set_compression(Compression::SNAPPY)
        // A row group is buffered whole before it is written, once per writer: a quarter of
        // the default keeps a copy's memory small when every core writes.
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS));
    let mut batch_rows = 8192;
    // The largest file: the best sample of each column's cardinality.
    let largest = source.snapshot().ok().and_then(|s| {
        s.log_data()
            .iter()
            .map(|v| {
                #[allow(deprecated)]
                let add = v.add_action();
                (add.size, add.path.clone())
            })
            .max()
    });
    let reader = largest.and_then(|(_, path)| {
        let file = std::fs::File::open(root.join(percent_decode(&path))).ok()?;
        SerializedFileReader::new(file).ok()
    });
    if let Some(reader) = reader
        && reader.metadata().num_row_groups() > 0
        && let Ok(rg) = reader.get_row_group(0)
    {
        let meta = reader.metadata().row_group(0);
        // Encoded sizes undercount what dictionary- or run-encoded columns take decoded.
        let mut row_bytes = 0;
        for (i, chunk) in meta.columns().iter().enumerate() {
            let column = chunk.column_path().clone();
            let values = chunk.num_values().max(1) as usize;
            let dictionary = match chunk.dictionary_page_offset() {
                None => None,
                Some(_) => match rg
                    .get_column_page_reader(i)
                    .and_then(|mut pages| pages.get_next_page())
                {
                    Ok(Some(Page::DictionaryPage {
                        num_values, buf, ..
                    })) => Some((num_values as usize, buf.len())),
                    _ => None,
                },
            };
            row_bytes += match chunk.column_type() {
                Type::BOOLEAN => 1,
                Type::INT32 | Type::FLOAT => 4,
                Type::INT64 | Type::DOUBLE => 8,
                Type::INT96 => 12,
                Type::FIXED_LEN_BYTE_ARRAY => chunk.column_descr().type_length().max(1) as usize,
                Type::BYTE_ARRAY => {
                    let plain = chunk.uncompressed_size().max(0) as usize / values;
                    let unencoded = chunk
                        .unencoded_byte_array_data_bytes()
                        .map_or(0, |b| b.max(0) as usize / values);
                    let entry = dictionary.map_or(0, |(n, bytes)| bytes / n.max(1));
                    4 + plain.max(unencoded).max(entry)
                }
            };
            // Snappy that saved under 3% of a sizeable chunk in the source (random measures,
            // hashes, ids already compressed) is not worth its CPU: stored uncompressed.
            if chunk.compression() != Compression::UNCOMPRESSED
                && chunk.uncompressed_size() >= 64 * 1024
                && chunk.compressed_size() * 100 >= chunk.uncompressed_size() * 97
            {
                props = props.set_column_compression(column.clone(), Compression::UNCOMPRESSED);
            }
            if chunk.num_values() == 0
                || (chunk.dictionary_page_offset().is_some() && dictionary.is_none())
            {
                continue;
            }
            // Data pages written plain next to dictionary ones: the dictionary overflowed.
            let overflowed = chunk.page_encoding_stats_mask().is_some_and(|mask| {
                mask.encodings()
                    .any(|e| !matches!(e, Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY))
            });
            let dictionary_pays = match dictionary {
                Some((n, _)) => n * 2 <= values && !overflowed,
                // Written plain: no sign either way.
                None => false,
            };
            if dictionary_pays {
                continue;
            }
            if dictionary.is_some() {
                props = props.set_column_dictionary_enabled(column.clone(), false);
            }
            // Integers that move in small steps (ids, event times, dates) take a few bits a
            // value delta-encoded, where plain and Snappy take 4-8 bytes and most of the CPU.
            if delta_encoding
                && let Some(width) = integer_width(source, target, &column)
                && let Ok(reader) = rg.get_column_reader(i)
                && delta_packed_ratio(reader, width).is_some_and(|r| r <= 0.5)
            {
                props = props
                    .set_column_dictionary_enabled(column.clone(), false)
                    .set_column_encoding(column, Encoding::DELTA_BINARY_PACKED);
            }
        }
        batch_rows = (BATCH_BYTES / row_bytes.max(1)).clamp(8192, 65536);
    }
    DecodeSettings {
        writer: props.build(),
        batch_rows,
    }
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

/// The width in bytes (4 or 8) of a Parquet column that both tables store as a Parquet
/// integer under its own name: integer types, dates and timestamps, top-level, no column
/// mapping. None otherwise, including decimals (stored as fixed-size bytes when wide).
fn integer_width(
    source: &DeltaTable,
    target: &DeltaTable,
    column: &datafusion::parquet::schema::types::ColumnPath,
) -> Option<usize> {
    use deltalake::kernel::{DataType, PrimitiveType};
    let [name] = column.parts() else {
        return None;
    };
    let width = |t: &DeltaTable| -> Option<usize> {
        if !unmapped(t) {
            return None;
        }
        match t.snapshot().ok()?.schema().field(name)?.data_type() {
            DataType::Primitive(
                PrimitiveType::Byte
                | PrimitiveType::Short
                | PrimitiveType::Integer
                | PrimitiveType::Date,
            ) => Some(4),
            DataType::Primitive(
                PrimitiveType::Long | PrimitiveType::Timestamp | PrimitiveType::TimestampNtz,
            ) => Some(8),
            _ => None,
        }
    };
    width(source)?;
    width(target)
}

/// Values sampled from an integer column to choose its encoding.
const ENCODING_SAMPLE: usize = 64 * 1024;

/// The size under `DELTA_BINARY_PACKED` of up to [`ENCODING_SAMPLE`] values of an integer
/// column written `width` bytes wide, as a fraction of their plain size; None for other
/// columns and for samples too small to tell (under 256 values).
fn delta_packed_ratio(
    column: datafusion::parquet::column::reader::ColumnReader,
    width: usize,
) -> Option<f64> {
    use datafusion::parquet::column::reader::ColumnReader;
    let values = match column {
        ColumnReader::Int64ColumnReader(mut r) => {
            let (mut values, mut levels) = (Vec::new(), Vec::new());
            r.read_records(ENCODING_SAMPLE, Some(&mut levels), None, &mut values)
                .ok()?;
            values
        }
        ColumnReader::Int32ColumnReader(mut r) => {
            let (mut values, mut levels) = (Vec::new(), Vec::new());
            r.read_records(ENCODING_SAMPLE, Some(&mut levels), None, &mut values)
                .ok()?;
            values.into_iter().map(i64::from).collect()
        }
        _ => return None,
    };
    (values.len() >= 256)
        .then(|| delta_packed_bytes(&values, width) as f64 / (values.len() * width) as f64)
}

/// The bytes `values` take under `DELTA_BINARY_PACKED` as parquet writes a column `width`
/// bytes wide: blocks of four miniblocks of 32 values (INT32) or 64 (INT64), each block with
/// its minimum delta and each miniblock bit-packed at its own width.
fn delta_packed_bytes(values: &[i64], width: usize) -> usize {
    let mini = if width == 8 { 64 } else { 32 };
    let deltas: Vec<i128> = values
        .windows(2)
        .map(|w| i128::from(w[1]) - i128::from(w[0]))
        .collect();
    deltas
        .chunks(4 * mini)
        .map(|block| {
            let min = block.iter().copied().min().unwrap_or(0);
            let packed: usize = block
                .chunks(mini)
                .map(|m| {
                    let spread = m.iter().map(|d| (d - min) as u128).max().unwrap_or(0);
                    let bits = (128 - spread.leading_zeros()).min(64) as usize;
                    mini * bits / 8
                })
                .sum();
            // The minimum as a zigzag varint, then the miniblocks' widths.
            let zigzag = ((min << 1) ^ (min >> 127)) as u128;
            let varint = (128 - zigzag.leading_zeros() as usize).div_ceil(7).max(1);
            varint + 4 + packed
        })
        .sum()
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
        let rel = percent_decode(&f.add.path);
        let from = source_root.join(&rel);
        let file_name = Path::new(&rel)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("part.parquet");
        let name = format!("tm-{batch}-{i:05}-{file_name}");
        let to = target_root.join(&name);
        let linked = hard_links && std::fs::hard_link(&from, &to).is_ok();
        if !linked {
            copy_new(&from, &to)?;
        }
        adds.push(Add {
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
        });
    }
    Ok(adds)
}

/// Remove files linked for a commit that did not happen (best effort: they are unreferenced).
pub fn unlink(target_root: &Path, adds: &[Add]) {
    for a in adds {
        let _ = std::fs::remove_file(target_root.join(&a.path));
    }
}

/// Byte-copy into a file that must not exist yet.
fn copy_new(from: &Path, to: &Path) -> Result<()> {
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

/// Add paths are URL-encoded relative paths.
fn percent_decode(p: &str) -> String {
    let bytes = p.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(
                std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"),
                16,
            )
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_percent_escapes() {
        assert_eq!(percent_decode("a%20b.parquet"), "a b.parquet");
        assert_eq!(percent_decode("plain.parquet"), "plain.parquet");
    }

    #[test]
    fn delta_packing_pays_for_small_steps_only() {
        let ids: Vec<i64> = (1_000_000..1_065_536).collect();
        assert!(delta_packed_bytes(&ids, 8) * 100 < ids.len() * 8);
        let times: Vec<i64> = (0..4096)
            .map(|i| 1_704_067_200_000_000 + i * 1_000_000 + i % 7)
            .collect();
        assert!(delta_packed_bytes(&times, 8) * 4 < times.len() * 8);
        // Full-range values (hashes) gain nothing: delta packing would cost more than plain.
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        let hashes: Vec<i64> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as i64
            })
            .collect();
        assert!(delta_packed_bytes(&hashes, 8) >= hashes.len() * 8);
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
