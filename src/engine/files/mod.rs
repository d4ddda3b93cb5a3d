//! Files read as a table, for `read_files(...)` and `COPY INTO`: a path (a file, a directory,
//! or a glob; `listing.rs`), Spark's reader options by name (`options.rs`), and one schema
//! across the files (here). Every option is applied or refused by name; a malformed record
//! stops the read (Spark's FAILFAST), never becomes a silent NULL. Local paths and `s3://`
//! URLs (read through the bucket's store, registered with the engine); other object stores
//! are refused by name.

mod listing;
mod options;
mod records;

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::TableProvider;
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::execution::object_store::ObjectStoreUrl;

pub(crate) use listing::{
    Glob, Listing, SourceFile, file, filter_names, list, local_path, store_files, store_url,
};
pub(crate) use options::{Format, ReadOptions, Reader, Walk};

use futures::StreamExt;

use super::Session;
use super::types::type_name;
use crate::error::{Error, Result};

/// Files whose columns are read at once (a header or a footer each: their reads overlap).
const FILES_AT_ONCE: usize = 8;

impl Session {
    /// The columns of `files` read with `options`: as given, else inferred from every file
    /// (CSV files must agree on their columns; JSON and Parquet files are merged by name).
    pub(crate) async fn file_schema(
        &self,
        who: &str,
        files: &[SourceFile],
        options: &ReadOptions,
    ) -> Result<SchemaRef> {
        if let Some(s) = &options.schema {
            if options.format == Format::Csv && options.header {
                self.check_headers(who, files, s, options).await?;
            }
            return Ok(s.clone());
        }
        let state = self.ctx.state();
        // Several files at once (their reads overlap), merged in their order.
        // (Collected first: a stream over a closure would not be `Send` for every lifetime.)
        let reads: Vec<_> = files
            .iter()
            .map(|f| self.file_columns(f, options, &state))
            .collect();
        // (Two when every record is read, as JSON's are: each holds a chunk of megabytes, a
        // JSON file on a store all of it.)
        let whole = options.format != Format::Parquet
            && (options.infer_types || options.format == Format::Json);
        let mut inferred_all = futures::stream::iter(reads)
            .buffered(if whole { 2 } else { FILES_AT_ONCE })
            .zip(futures::stream::iter(files));
        let mut merged: Option<(Vec<Field>, &SourceFile)> = None;
        while let Some((inferred, file)) = inferred_all.next().await {
            let schema = inferred?.map_err(|e| {
                Error::Invalid(format!(
                    "{who}: cannot read {} as {}: {e}",
                    file.shown(),
                    options.format.name()
                ))
            })?;
            let fields: Vec<Field> = schema
                .fields()
                .iter()
                .enumerate()
                .map(|(i, f)| normalized(f, i, options))
                .collect();
            merged = Some(match merged {
                None => (fields, file),
                Some((have, first)) => (merge(who, have, first, fields, file, options)?, first),
            });
        }
        // A column with no value in any file is a STRING (after the merge: a file where it is
        // empty takes another file's type).
        let mut fields: Vec<Field> = merged
            .map(|(f, _)| f)
            .unwrap_or_default()
            .into_iter()
            .map(|f| f.clone().with_data_type(without_null(f.data_type())))
            .collect();
        if options.format == Format::Json {
            // As Spark infers them: by name.
            fields.sort_by(|a, b| a.name().cmp(b.name()));
        }
        Ok(Arc::new(Schema::new(fields)))
    }

    /// The columns of one file as `options` read them (the file's own error inside).
    async fn file_columns(
        &self,
        file: &SourceFile,
        options: &ReadOptions,
        state: &datafusion::execution::SessionState,
    ) -> Result<datafusion::error::Result<SchemaRef>> {
        let compression = compression_of(&file.text()).1;
        Ok(match options.format {
            Format::Csv => {
                let format = options.csv_format(options.infer_types, compression);
                self.infer_csv(file, format).await
            }
            _ => {
                let store = self.files_store(file)?;
                let format = options.file_format(self, options.infer_types, compression);
                let meta = object_meta(file)?;
                format
                    .infer_schema(state, &store, std::slice::from_ref(&meta))
                    .await
            }
        })
    }

    /// CSV columns are read by position: with a header, each file's must name the given
    /// columns, in their order (else values would land in the wrong columns).
    async fn check_headers(
        &self,
        who: &str,
        files: &[SourceFile],
        schema: &Schema,
        options: &ReadOptions,
    ) -> Result<()> {
        let wanted: Vec<String> = schema
            .fields()
            .iter()
            .map(|f| f.name().to_lowercase())
            .collect();
        let headers: Vec<_> = files
            .iter()
            .map(|file| {
                let compression = compression_of(&file.text()).1;
                self.infer_csv(file, options.csv_format(false, compression))
            })
            .collect();
        let mut headers = futures::stream::iter(headers)
            .buffered(FILES_AT_ONCE)
            .zip(futures::stream::iter(files));
        while let Some((header, file)) = headers.next().await {
            let header = header
                .map_err(|e| Error::Invalid(format!("{who}: cannot read {}: {e}", file.shown())))?;
            let names: Vec<String> = header
                .fields()
                .iter()
                .map(|f| f.name().to_lowercase())
                .collect();
            if names != wanted {
                return Err(Error::Invalid(format!(
                    "{who}: the header of {} names ({}), and the columns given are ({}): CSV columns are read by position, so name them in the file's order",
                    file.shown(),
                    names.join(", "),
                    wanted.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// The object store a file is read through: the local file system, or its bucket's
    /// store (registered with the engine on first use, so that its tables read it too).
    fn files_store(
        &self,
        file: &SourceFile,
    ) -> Result<Arc<dyn deltalake::logstore::object_store::ObjectStore>> {
        let env = self.ctx.runtime_env();
        if file.url.scheme() == "file" {
            return Ok(env.object_store(ObjectStoreUrl::local_filesystem())?);
        }
        let base =
            ObjectStoreUrl::parse(format!("{}://{}", file.url.scheme(), file.url.authority()))?;
        if let Ok(store) = env.object_store(&base) {
            return Ok(store);
        }
        let (store, _) = crate::catalog::external::root_store(&file.url)?;
        env.register_object_store(base.as_ref(), store.clone());
        Ok(store)
    }

    /// `table` registered for one statement (the guard drops it): the name FROM reads it by.
    pub(crate) fn register_for_statement(
        &self,
        table: Arc<dyn TableProvider>,
        guard: &mut super::routines::Scratch,
    ) -> Result<String> {
        let name = format!("files_{}", uuid::Uuid::new_v4().simple());
        self.catalogs
            .scratch_schema()
            .register_table(name.clone(), table)?;
        guard.add(self, name.clone());
        Ok(format!("{}.pinned.{name}", crate::catalog::SCRATCH))
    }

    /// A table reading `files` as `schema`.
    pub(crate) fn file_table(
        &self,
        files: &[SourceFile],
        schema: SchemaRef,
        options: &ReadOptions,
    ) -> Result<Arc<dyn TableProvider>> {
        if files.is_empty() {
            return Ok(Arc::new(datafusion::datasource::empty::EmptyTable::new(
                schema,
            )));
        }
        let urls = files
            .iter()
            .map(|f| {
                self.files_store(f)?;
                Ok(ListingTableUrl::try_new(f.url()?, None)?)
            })
            .collect::<Result<Vec<_>>>()?;
        let compression = one_compression(files, options.format)?;
        let schema = in_session_zone(schema, options.format, &self.ctx.state());
        let (schema, wall_clocks) = wall_clocks_as_text(schema, options);
        let listing = ListingOptions::new(options.file_format(self, false, compression))
            .with_file_extension("");
        // CSV columns are read by position: the schema's names are the header's or `_cN`.
        let config = ListingTableConfig::new_with_multi_paths(urls)
            .with_listing_options(listing)
            .with_schema(schema);
        let table: Arc<dyn TableProvider> = Arc::new(ListingTable::try_new(config)?);
        if wall_clocks.is_empty() {
            return Ok(table);
        }
        // The TIMESTAMP_NTZ columns, read as text, as their wall-clock times.
        use datafusion::logical_expr::{Expr, LogicalPlanBuilder, cast};
        let scan = LogicalPlanBuilder::scan(
            "files",
            datafusion::datasource::provider_as_source(table.clone()),
            None,
        )?;
        let read = table.schema();
        let columns = read.fields().iter().map(|f| {
            let column = Expr::Column(datafusion::common::Column::new_unqualified(f.name()));
            match wall_clocks.get(f.name()) {
                Some(ntz) => cast(
                    super::functions::wall_clock_text().call(vec![column]),
                    ntz.clone(),
                )
                .alias(f.name()),
                None => column,
            }
        });
        let plan = scan.project(columns.collect::<Vec<_>>())?.build()?;
        Ok(Arc::new(datafusion::catalog::view::ViewTable::new(
            plan, None,
        )))
    }
}

/// `schema` with the TIMESTAMP_NTZ columns of a given schema (`schema => '..'`) read as text,
/// and those columns' types, for CSV and JSON: Arrow's readers apply a zone written after a
/// time, where Spark drops it, so the text is read and cast after
/// ([`super::functions::wall_clock_text`]). (A TIMESTAMP_NTZ inside a JSON struct or array is
/// read by the reader. COPY INTO's own typed read of a TIMESTAMP, zone-less then labelled
/// UTC, applies zones on purpose: it gives no schema.)
fn wall_clocks_as_text(
    schema: SchemaRef,
    options: &ReadOptions,
) -> (SchemaRef, std::collections::HashMap<String, DataType>) {
    let mut wall_clocks = std::collections::HashMap::new();
    if options.format == Format::Parquet || options.schema.is_none() {
        return (schema, wall_clocks);
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Timestamp(_, None) => {
                wall_clocks.insert(f.name().clone(), f.data_type().clone());
                f.as_ref().clone().with_data_type(DataType::Utf8)
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    if wall_clocks.is_empty() {
        return (schema, wall_clocks);
    }
    let schema = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    (schema, wall_clocks)
}

impl Session {
    /// The columns of the CSV file `file` as `format` reads them (from every record, or with
    /// no inference the header only): its bytes decompressed, cut into chunks of whole
    /// records (`records.rs`; the engine's own splitter knows only `"` quotes), each chunk read
    /// by a reader of its own and the types merged.
    async fn infer_csv(
        &self,
        file: &SourceFile,
        format: datafusion::datasource::file_format::csv::CsvFormat,
    ) -> datafusion::error::Result<SchemaRef> {
        use datafusion::error::DataFusionError;
        use deltalake::logstore::object_store::ObjectStoreExt;
        use futures::{StreamExt, TryStreamExt};
        let limit = format
            .options()
            .schema_infer_max_rec
            .unwrap_or(datafusion::datasource::file_format::DEFAULT_SCHEMA_INFER_MAX_RECORD);
        // The header alone (no inference) is in the first few KiB.
        let first = if limit == 0 {
            HEADER_BYTES
        } else {
            records::FIRST
        };
        let bytes = match file.local() {
            Some(path) => local_chunks(path, first).await?,
            None => {
                let store = self
                    .files_store(file)
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
                let meta = object_meta(file).map_err(|e| DataFusionError::External(Box::new(e)))?;
                store
                    .get(&meta.location)
                    .await?
                    .into_stream()
                    .map_err(DataFusionError::from)
                    .boxed()
            }
        };
        let o = format.options();
        let compression = FileCompressionType::from(o.compression);
        let syntax = records::Syntax {
            delimiter: o.delimiter,
            quote: o.quote,
            escape: o.escape,
            comment: o.comment,
            terminator: o.terminator,
        };
        let records = records::whole_records(compression.convert_stream(bytes)?, syntax, first);
        let (schema, _) = format
            .infer_schema_from_stream(&self.ctx.state(), limit, records)
            .await?;
        Ok(Arc::new(schema))
    }
}

/// The bytes read first from a CSV file whose header alone is wanted.
const HEADER_BYTES: usize = 4 << 10;

/// The bytes of the local file at `path`, read in chunks of `first` bytes, then 4 MiB (the
/// engine's store reads a local file 8 KiB at a time, each read a hop to a blocking thread:
/// several times slower for a large file).
async fn local_chunks(
    path: std::path::PathBuf,
    first: usize,
) -> datafusion::error::Result<
    futures::stream::BoxStream<'static, datafusion::error::Result<bytes::Bytes>>,
> {
    use datafusion::error::DataFusionError;
    use futures::StreamExt;
    const CHUNK: usize = 4 << 20;
    let blocking = |e: tokio::task::JoinError| DataFusionError::External(Box::new(e));
    let file = tokio::task::spawn_blocking(move || std::fs::File::open(path))
        .await
        .map_err(blocking)??;
    let chunks = futures::stream::try_unfold((Some(file), first), move |(file, size)| async move {
        let Some(mut file) = file else {
            return Ok(None);
        };
        let (file, chunk) = tokio::task::spawn_blocking(move || {
            use std::io::Read;
            let mut chunk = Vec::with_capacity(size);
            let read = (&mut file).take(size as u64).read_to_end(&mut chunk);
            read.map(|_| (file, chunk))
        })
        .await
        .map_err(blocking)??;
        let more = (chunk.len() == size).then_some(file);
        Ok((!chunk.is_empty()).then(|| (bytes::Bytes::from(chunk), (more, CHUNK))))
    });
    Ok(chunks.boxed())
}

/// `schema` as the readers must parse it: CSV and JSON text for a TIMESTAMP without an
/// offset names a time in the session's zone (as Databricks reads it), so those columns are
/// read in that zone. The instants are the same whatever the label; Parquet stores instants.
fn in_session_zone(
    schema: SchemaRef,
    format: Format,
    state: &datafusion::execution::SessionState,
) -> SchemaRef {
    let Some(zone) = super::zone::session_zone(state.config_options()) else {
        return schema;
    };
    if format == Format::Parquet {
        return schema;
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match super::zone::relabeled(f.data_type(), &zone) {
            // Nested ones too (a JSON struct's or array's times).
            Some(t) => f.as_ref().clone().with_data_type(t),
            None => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// A path without its compression extension, and the compression that names
/// (`orders.csv.gz`: `orders.csv`, gzip).
fn compression_of(path: &str) -> (&str, FileCompressionType) {
    let lower = path.to_ascii_lowercase();
    for (ext, c) in [
        (".gz", FileCompressionType::GZIP),
        (".bz2", FileCompressionType::BZIP2),
        (".xz", FileCompressionType::XZ),
        (".zst", FileCompressionType::ZSTD),
    ] {
        if lower.ends_with(ext) {
            return (&path[..path.len() - ext.len()], c);
        }
    }
    (path, FileCompressionType::UNCOMPRESSED)
}

/// The one compression of the files (Parquet compresses inside the file).
fn one_compression(files: &[SourceFile], format: Format) -> Result<FileCompressionType> {
    if format == Format::Parquet {
        return Ok(FileCompressionType::UNCOMPRESSED);
    }
    let mut found: Option<(FileCompressionType, &SourceFile)> = None;
    for f in files {
        let c = compression_of(&f.text()).1;
        match &found {
            Some((have, first)) if *have != c => {
                return Err(Error::Invalid(format!(
                    "{} and {} are compressed differently: read them separately",
                    first.shown(),
                    f.shown()
                )));
            }
            Some(_) => {}
            None => found = Some((c, f)),
        }
    }
    Ok(found.map_or(FileCompressionType::UNCOMPRESSED, |(c, _)| c))
}

fn object_meta(file: &SourceFile) -> Result<deltalake::logstore::object_store::ObjectMeta> {
    use deltalake::logstore::object_store::path::Path as Key;
    let location = match file.local() {
        Some(path) => Key::from_absolute_path(&path),
        None => Key::from_url_path(file.url.path()),
    }
    .map_err(|e| Error::Invalid(format!("{}: {e}", file.shown())))?;
    Ok(deltalake::logstore::object_store::ObjectMeta {
        location,
        last_modified: chrono::DateTime::from_timestamp_millis(file.modified_ms)
            .unwrap_or_default(),
        size: file.size,
        e_tag: None,
        version: None,
    })
}

/// An inferred column as tidemark shows it: a CSV file's unnamed columns `_c0`, `_c1`, ...;
/// a CSV timestamp a TIMESTAMP (UTC, microseconds).
fn normalized(f: &Field, i: usize, options: &ReadOptions) -> Field {
    let name = if options.format == Format::Csv && !options.header {
        format!("_c{i}")
    } else {
        f.name().clone()
    };
    let data_type = match f.data_type() {
        DataType::Timestamp(_, None) if options.format == Format::Csv => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        other => other.clone(),
    };
    Field::new(name, data_type, true)
}

/// The columns of two files as one: CSV files must have the same columns in the same order;
/// JSON and Parquet files are merged by name. Types widen as Spark's do (an integer column
/// with fractions is a DOUBLE; in CSV and JSON, any other disagreement is a STRING).
fn merge(
    who: &str,
    mut have: Vec<Field>,
    first: &SourceFile,
    fields: Vec<Field>,
    file: &SourceFile,
    options: &ReadOptions,
) -> Result<Vec<Field>> {
    let names = |f: &[Field]| f.iter().map(|f| f.name().clone()).collect::<Vec<_>>();
    if options.format == Format::Csv && names(&have) != names(&fields) {
        return Err(Error::Invalid(format!(
            "{who}: the CSV files have different columns: {} has ({}), {} has ({}); read them separately",
            first.shown(),
            names(&have).join(", "),
            file.shown(),
            names(&fields).join(", ")
        )));
    }
    for f in fields {
        let found = have
            .iter()
            .position(|h| h.name().eq_ignore_ascii_case(f.name()));
        match found {
            None => have.push(f),
            Some(i) if have[i].name() != f.name() => {
                return Err(Error::Invalid(format!(
                    "{who}: column {} of {} and column {} of {} differ only in case",
                    have[i].name(),
                    first.shown(),
                    f.name(),
                    file.shown()
                )));
            }
            Some(i) => {
                let wider =
                    widen(have[i].data_type(), f.data_type(), options.format).ok_or_else(|| {
                        Error::Type(format!(
                            "{who}: column {} is {} in {} but {} in {}",
                            f.name(),
                            type_name(have[i].data_type()),
                            first.shown(),
                            type_name(f.data_type()),
                            file.shown()
                        ))
                    })?;
                have[i] = Field::new(f.name(), wider, true);
            }
        }
    }
    Ok(have)
}

/// `t` with every NULL type (a column or field with no value) a STRING.
fn without_null(t: &DataType) -> DataType {
    match t {
        DataType::Null => DataType::Utf8,
        DataType::List(f) => DataType::List(Arc::new(
            f.as_ref()
                .clone()
                .with_data_type(without_null(f.data_type())),
        )),
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| {
                    f.as_ref()
                        .clone()
                        .with_data_type(without_null(f.data_type()))
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

fn widen(a: &DataType, b: &DataType, format: Format) -> Option<DataType> {
    use DataType::*;
    Some(match (a, b) {
        _ if a == b => a.clone(),
        (Null, t) | (t, Null) => t.clone(),
        (Int64, Float64) | (Float64, Int64) if format != Format::Parquet => Float64,
        (List(x), List(y)) if format == Format::Json => {
            let item = widen(x.data_type(), y.data_type(), format)?;
            List(Arc::new(x.as_ref().clone().with_data_type(item)))
        }
        (Struct(x), Struct(y)) if format == Format::Json => {
            let mut fields: Vec<Field> = x.iter().map(|f| f.as_ref().clone()).collect();
            for f in y.iter() {
                match fields.iter().position(|h| h.name() == f.name()) {
                    Some(i) => {
                        let t = widen(fields[i].data_type(), f.data_type(), format)?;
                        fields[i] = fields[i].clone().with_data_type(t);
                    }
                    None => fields.push(f.as_ref().clone()),
                }
            }
            fields.sort_by(|a, b| a.name().cmp(b.name()));
            Struct(fields.into())
        }
        (Date32, Timestamp(u, z)) | (Timestamp(u, z), Date32) if format == Format::Csv => {
            Timestamp(*u, z.clone())
        }
        _ if format == Format::Parquet => return None,
        _ => Utf8,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_widen_as_spark_does() {
        use DataType::*;
        assert_eq!(widen(&Int64, &Float64, Format::Csv), Some(Float64));
        assert_eq!(widen(&Int64, &Boolean, Format::Json), Some(Utf8));
        assert_eq!(widen(&Int64, &Utf8, Format::Parquet), None);
        assert_eq!(widen(&Null, &Int64, Format::Json), Some(Int64));
    }
}
