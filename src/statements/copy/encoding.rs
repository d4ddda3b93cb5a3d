//! How a copy that decodes rows writes them again: Parquet writer settings per column, chosen
//! from what the source's own files show (compression, dictionary, delta encoding), and the
//! batch size to read. Whole files ([`super::whole_file`]) are not re-encoded at all.

use std::path::Path;

use deltalake::DeltaTable;

use super::whole_file::unmapped;

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
        // An add path from delta-rs is already URL-decoded.
        let file = std::fs::File::open(root.join(&path)).ok()?;
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

/// Parquet writer settings for rows with no Parquet file to learn from (the CSV and JSON
/// files COPY INTO loads), chosen from the first batch a writer gets by the rules of
/// [`decode_settings`]: Snappy; no dictionary for a top-level column whose sample holds more
/// distinct values than half its values (ids, times, measures), and such integer, date and
/// timestamp columns delta-encoded when the sample packs to half its plain size or less.
/// Samples of fewer than 256 values keep the writer's defaults.
pub fn sampled_settings(
    batch: &datafusion::arrow::array::RecordBatch,
) -> datafusion::parquet::file::properties::WriterProperties {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::DataType;
    use datafusion::parquet::basic::{Compression, Encoding};
    use datafusion::parquet::file::properties::WriterProperties;
    use datafusion::parquet::schema::types::ColumnPath;
    let mut props = WriterProperties::builder()
        .set_created_by(format!("tidemark {}", env!("CARGO_PKG_VERSION")))
        .set_compression(Compression::SNAPPY);
    let rows = batch.num_rows().min(ENCODING_SAMPLE);
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        let column = column.slice(0, rows);
        let values = column.len() - column.null_count();
        if values < 256 {
            continue;
        }
        // Integers as Parquet stores them (4 or 8 bytes), for the delta encoding's sample.
        let integers: Option<(usize, Vec<i64>)> = {
            let as_i64 = datafusion::arrow::compute::cast(&column, &DataType::Int64).ok();
            let width = match field.data_type() {
                DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Date32 => Some(4),
                DataType::Int64 | DataType::Timestamp(..) => Some(8),
                _ => None,
            };
            match (width, as_i64) {
                (Some(w), Some(a)) => Some((
                    w,
                    a.as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                        .iter()
                        .flatten()
                        .collect(),
                )),
                _ => None,
            }
        };
        let distinct = match (&integers, field.data_type()) {
            (Some((_, v)), _) => v.iter().collect::<std::collections::HashSet<_>>().len(),
            (None, DataType::Float64) => column
                .as_primitive::<datafusion::arrow::datatypes::Float64Type>()
                .iter()
                .flatten()
                .map(f64::to_bits)
                .collect::<std::collections::HashSet<_>>()
                .len(),
            (None, DataType::Utf8) => column
                .as_string::<i32>()
                .iter()
                .flatten()
                .collect::<std::collections::HashSet<_>>()
                .len(),
            (None, DataType::Utf8View) => column
                .as_string_view()
                .iter()
                .flatten()
                .collect::<std::collections::HashSet<_>>()
                .len(),
            // Other types keep the writer's choice.
            _ => continue,
        };
        if distinct * 2 <= values {
            continue;
        }
        let path = ColumnPath::new(vec![field.name().clone()]);
        props = props.set_column_dictionary_enabled(path.clone(), false);
        if let Some((width, v)) = integers
            && delta_packed_bytes(&v, width) * 2 <= v.len() * width
        {
            props = props.set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
        }
    }
    props.build()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_keeps_dictionaries_where_values_repeat_and_delta_encodes_steady_integers() {
        use std::sync::Arc;

        use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
        use datafusion::parquet::basic::Encoding;
        use datafusion::parquet::schema::types::ColumnPath;
        let n = 8192;
        let batch = RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..n)) as datafusion::arrow::array::ArrayRef,
            ),
            (
                "customer",
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("customer_{}", i % 50)),
                )),
            ),
            (
                "amount",
                Arc::new(Float64Array::from_iter_values(
                    (0..n).map(|i| (i * 7919 % 100_003) as f64 / 100.0),
                )),
            ),
            (
                "hash",
                Arc::new(Int64Array::from_iter_values(
                    (0..n).map(|i| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64),
                )),
            ),
        ])
        .unwrap();
        let props = sampled_settings(&batch);
        let col = |name: &str| ColumnPath::new(vec![name.to_string()]);
        assert!(!props.dictionary_enabled(&col("id")));
        assert_eq!(
            props.encoding(&col("id")),
            Some(Encoding::DELTA_BINARY_PACKED)
        );
        assert!(props.dictionary_enabled(&col("customer")));
        assert!(!props.dictionary_enabled(&col("amount")));
        assert_eq!(props.encoding(&col("amount")), None);
        // Unique but scattered: no dictionary, and plain (delta packing would not pay).
        assert!(!props.dictionary_enabled(&col("hash")));
        assert_eq!(props.encoding(&col("hash")), None);
        // Too small a sample to tell: the writer's defaults.
        let small = sampled_settings(&batch.slice(0, 100));
        assert!(small.dictionary_enabled(&col("id")));
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
}
