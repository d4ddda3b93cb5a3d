//! The machine formats: CSV and JSON (lines or one array) batch by batch, with map keys as
//! strings and write errors kept for the printer to report.

use arrow::csv::WriterBuilder as CsvWriterBuilder;
use arrow::error::ArrowError;
use arrow::json::WriterBuilder as JsonWriterBuilder;
use arrow::json::writer::JsonFormat;
use arrow::record_batch::RecordBatch;
use std::io::{self, Write};
use std::sync::Arc;

/// Writes one batch as delimited text, with the header line if `header`.
pub(super) fn write_csv(
    out: &mut dyn Write,
    batch: &RecordBatch,
    delimiter: u8,
    header: bool,
) -> io::Result<()> {
    let mut tracked = Tracked(out, None);
    let mut writer = CsvWriterBuilder::new()
        .with_header(header)
        .with_delimiter(delimiter)
        .build(&mut tracked);
    let result = nested_as_text(batch).and_then(|b| writer.write(&b));
    drop(writer);
    result.map_err(|e| match tracked.1 {
        Some(kind) => io::Error::new(kind, e),
        None => arrow_err(e),
    })
}

/// CSV has no nested values: lists, structs and maps are written as the table format shows
/// them (`[a, b]`, `{k: v}`), as one text field.
fn nested_as_text(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    use arrow::array::{Array, ArrayRef, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    let schema = batch.schema();
    if !schema.fields().iter().any(|f| f.data_type().is_nested()) {
        return Ok(batch.clone());
    }
    let mut fields = vec![];
    let mut columns: Vec<ArrayRef> = vec![];
    for (f, c) in schema.fields().iter().zip(batch.columns()) {
        if f.data_type().is_nested() {
            let text = ArrayFormatter::try_new(c.as_ref(), &FormatOptions::default())?;
            let values: StringArray = (0..c.len())
                .map(|i| c.is_valid(i).then(|| text.value(i).to_string()))
                .collect();
            columns.push(Arc::new(values));
            fields.push(Field::new(f.name(), DataType::Utf8, true));
        } else {
            columns.push(c.clone());
            fields.push(f.as_ref().clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

/// Remembers the first I/O error kind, since arrow's CSV writer turns I/O
/// errors into strings and callers need e.g. `BrokenPipe` to stop quietly.
pub(super) struct Tracked<'a>(&'a mut dyn Write, Option<io::ErrorKind>);

impl Write for Tracked<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let result = self.0.write(buf);
        if let Err(e) = &result {
            self.1 = self.1.or(Some(e.kind()));
        }
        result
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Writes one batch as JSON (array or line-delimited, per `F`) keeping null keys explicit.
pub(super) fn write_json<F: JsonFormat>(
    out: &mut dyn Write,
    batch: &RecordBatch,
) -> io::Result<()> {
    let mut writer = JsonWriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, F>(out);
    writer
        .write(&string_map_keys(batch).map_err(arrow_err)?)
        .map_err(arrow_err)?;
    writer.finish().map_err(arrow_err)
}

/// JSON object keys are strings: maps keyed by numbers, dates or other types are written
/// with their keys as text (`{"1": "a"}`), at any depth.
pub(super) fn string_map_keys(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    use arrow::datatypes::{DataType, Field, Fields};
    fn keyed(dt: &DataType) -> DataType {
        let field =
            |f: &Arc<Field>| Arc::new(f.as_ref().clone().with_data_type(keyed(f.data_type())));
        match dt {
            DataType::Map(entries, sorted) => {
                let DataType::Struct(kv) = entries.data_type() else {
                    return dt.clone();
                };
                let kv: Fields = kv
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        if i == 0 {
                            Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8))
                        } else {
                            field(f)
                        }
                    })
                    .collect();
                DataType::Map(
                    Arc::new(
                        entries
                            .as_ref()
                            .clone()
                            .with_data_type(DataType::Struct(kv)),
                    ),
                    *sorted,
                )
            }
            DataType::Struct(fields) => DataType::Struct(fields.iter().map(field).collect()),
            DataType::List(f) => DataType::List(field(f)),
            DataType::LargeList(f) => DataType::LargeList(field(f)),
            DataType::FixedSizeList(f, n) => DataType::FixedSizeList(field(f), *n),
            other => other.clone(),
        }
    }
    let schema = batch.schema();
    if schema
        .fields()
        .iter()
        .all(|f| &keyed(f.data_type()) == f.data_type())
    {
        return Ok(batch.clone());
    }
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (f, c) in schema.fields().iter().zip(batch.columns()) {
        let to = keyed(f.data_type());
        columns.push(if &to == f.data_type() {
            c.clone()
        } else {
            arrow::compute::cast(c, &to)?
        });
        fields.push(f.as_ref().clone().with_data_type(to));
    }
    RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns)
}

/// Converts arrow errors to `io::Error`, unwrapping wrapped I/O errors.
pub(super) fn arrow_err(e: ArrowError) -> io::Error {
    match e {
        ArrowError::IoError(_, e) => e,
        e => io::Error::other(e),
    }
}
