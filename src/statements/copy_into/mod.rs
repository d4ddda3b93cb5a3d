//! `COPY INTO target FROM 'path' FILEFORMAT = ...`: Databricks' idempotent file loader. Each
//! file is loaded once, ever: the commit that adds a file's rows also records the file
//! ([`loaded`]), a file already recorded is skipped even if it changed since (unless
//! `COPY_OPTIONS ('force' = 'true')`), and a run stopped before its commit (killed, Ctrl-C, a
//! bad value) leaves nothing recorded and nothing visible, so the next run loads it once.
//!
//! The recipe: list the files → drop those loaded → read the rest (`engine::files`) → meet
//! the target's columns (by name, or by position for headerless CSV) → write → one commit.

mod loaded;

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::Column;
use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::{Expr as DfExpr, cast, col};
use deltalake::DeltaTable;
use deltalake::kernel::Transaction;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::protocol::SaveMode;

use super::copy::uncommitted::Uncommitted;
use super::retry;
use super::table::{DEFAULT_KEY, arrow_schema, plain_appends, with_target_columns};
use crate::catalog::TableName;
use crate::engine::files::{self, Format, Listing, ReadOptions, Reader, SourceFile};
use crate::engine::progress::CopyProgress;
use crate::engine::routines::Scratch;
use crate::engine::{Output, Session};
use crate::error::{Error, Result};
use crate::parser::{CopyColumns, CopyInto};

/// What `COPY_OPTIONS` may say.
struct CopyOptions {
    /// Load every file found, loaded before or not.
    force: bool,
    /// Add the files' new columns to the target.
    merge_schema: bool,
}

/// What one load did.
#[derive(Default)]
struct Loaded {
    rows: u64,
}

/// What a load commit records besides the files' `txn` actions.
#[derive(serde::Serialize)]
struct LoadMetadata<'a> {
    source: &'a str,
    files: usize,
    force: bool,
}

/// The key of [`LoadMetadata`] in the commit.
const META_KEY: &str = "tidemark.copyInto";

/// Run the statement: one row of counts.
pub async fn execute(session: &Session, c: CopyInto) -> Result<Output> {
    let table = session.table_name(&c.target)?;
    let done = retry::on_conflict(retry::WHOLE_STATEMENT, || attempt(session, &c, &table))
        .await
        .map_err(|e| match e {
            e @ (Error::Conflict(_) | Error::Cancelled) => e,
            e if e.is_conflict() => e,
            e => e.context(format!("COPY INTO {table}")),
        })?;
    Ok(super::counts(&[
        ("num_affected_rows", done.rows as i64),
        ("num_inserted_rows", done.rows as i64),
        ("num_skipped_corrupt_files", 0),
    ]))
}

/// One attempt, on the target's state as it is now.
async fn attempt(session: &Session, c: &CopyInto, table: &TableName) -> Result<Loaded> {
    let format = Format::parse(&c.format)?;
    let copy = copy_options(&c.copy_options)?;
    let options = ReadOptions::parse(Reader::CopyInto, Some(format), &c.format_options, &c.from)?;
    if !matches!(c.columns, CopyColumns::ByName) && (format != Format::Csv || options.header) {
        return Err(Error::Invalid(
            "BY POSITION and a column list match the columns of headerless CSV files: FILEFORMAT = CSV without 'header' = 'true' (files with names are matched by name)".into(),
        ));
    }
    crate::catalog::check_writable_table(table, true)?;
    let t = session.warehouse().open_for_write(table).await?;

    let listing = list(c, &options)?;
    let mut found = files::filter_names(listing.files, &options);
    if !copy.force {
        let loaded = loaded::loaded(&t, &table.to_string()).await?;
        let mut urls = Vec::with_capacity(found.len());
        for f in &found {
            urls.push(f.url()?.to_string());
        }
        let mut urls = urls.into_iter();
        found.retain(|_| !urls.next().is_some_and(|u| loaded.contains(&u)));
    }
    if found.is_empty() {
        return Ok(Loaded::default());
    }

    let target = arrow_schema(&t)?;
    let zone = crate::engine::zone::session_zone(session.ctx().state().config_options());
    let mut schema = session.file_schema("COPY INTO", &found, &options).await?;
    // Text columns of CSV files loaded by name: those that fill numbers and times the CSV
    // reader parses as it reads.
    let parsed = (options.format == Format::Csv
        && options.schema.is_none()
        && !options.infer_types
        && c.select.is_none()
        && matches!(c.columns, CopyColumns::ByName))
    .then(|| parsed_as_read(&schema, &target));
    if let Some(p) = &parsed {
        schema = p.clone();
    }
    let (rows, _scratch, _bound) = read(session, c, &found, &options, schema).await?;
    // tidemark's own writer casts each column (naming it on a bad value); delta-rs' writer
    // needs the rows in the target's types.
    let plain = plain_appends(&t)? && !copy.merge_schema;
    let rows = meet_target(
        rows,
        &target,
        &c.columns,
        table,
        copy.merge_schema,
        !plain,
        zone.as_ref(),
    )?;
    let props = commit_properties(c, &found, copy.force)?;
    write(session, &t, table, rows, plain, copy.merge_schema, props)
        .await
        .map_err(|e| match &parsed {
            Some(read_as) => named_column(e, read_as),
            None => e,
        })
}

/// The CSV reader's error for a value it cannot parse, naming the column of `read_as` (the
/// files' columns as the reader read them; it gives the position) and the type it was read
/// as; its line numbers count from where its part of a file began, so they are left out.
/// Other errors as they are.
fn named_column(e: Error, read_as: &Schema) -> Error {
    static VALUE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?s)Parser error: Error while parsing value '(.*)' as type '[^']*' for column (\d+) at line \d+\. Row data: '(.*)'$").unwrap()
    });
    static TIME: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?s)Parser error: Error parsing column (\d+) at line \d+: (?:Parser error: )?(.*)$",
        )
        .unwrap()
    });
    let text = e.to_string();
    let field = |i: &str| {
        i.parse::<usize>()
            .ok()
            .filter(|&i| i < read_as.fields().len())
            .map(|i| read_as.field(i))
    };
    let (name, said) = if let Some(at) = VALUE.captures(&text)
        && let Some(f) = field(&at[2])
    {
        let row: String = at[3].chars().take(200).collect();
        let more = if row.len() < at[3].len() { "..." } else { "" };
        (
            f.name(),
            format!(
                "the text '{}' does not read as {} (in the row {row}{more})",
                &at[1],
                crate::engine::types::type_name(f.data_type())
            ),
        )
    } else if let Some(at) = TIME.captures(&text)
        && let Some(f) = field(&at[1])
    {
        (f.name(), at[2].to_string())
    } else {
        return e;
    };
    Error::Type(format!("column '{name}' cannot be written: {said}"))
}

fn copy_options(pairs: &[(String, String)]) -> Result<CopyOptions> {
    let mut o = CopyOptions {
        force: false,
        merge_schema: false,
    };
    let mut seen = std::collections::HashSet::new();
    for (k, v) in pairs {
        if !seen.insert(k.to_ascii_lowercase()) {
            return Err(Error::Invalid(format!("COPY_OPTIONS {k} is given twice")));
        }
        let flag = match v.to_ascii_lowercase().as_str() {
            "true" => true,
            "false" => false,
            _ => {
                return Err(Error::Type(format!(
                    "COPY_OPTIONS {k} is true or false, found '{v}'"
                )));
            }
        };
        match k.to_ascii_lowercase().as_str() {
            "force" => o.force = flag,
            "mergeschema" => o.merge_schema = flag,
            _ => {
                return Err(Error::Invalid(format!(
                    "unknown COPY_OPTIONS {k}: COPY INTO takes 'force' and 'mergeSchema'"
                )));
            }
        }
    }
    Ok(o)
}

/// The FILES named inside the object-store directory `base`.
fn store_files(
    who: &str,
    base: &url::Url,
    names: &[String],
    options: &ReadOptions,
) -> Result<Listing> {
    for name in names {
        let parts: Vec<&str> = name.split('/').filter(|p| !p.is_empty()).collect();
        if name.starts_with('/') || parts.iter().any(|p| *p == ".." || *p == ".") {
            return Err(Error::Invalid(format!(
                "{who}: FILES names files inside {}, and '{name}' is not one (no absolute path, no ..)",
                crate::catalog::external::shown(base)
            )));
        }
    }
    let mut files = vec![];
    for (url, file) in files::store_files(who, base, names)? {
        match file {
            Some(f) => files.push(f),
            None if options.ignore_missing => {}
            None => {
                return Err(Error::class(
                    "PATH_NOT_FOUND",
                    format!(
                        "{who}: file does not exist: {}",
                        crate::catalog::external::shown(&url)
                    ),
                ));
            }
        }
    }
    files.sort_by(|a, b| a.url.cmp(&b.url));
    files.dedup_by(|a, b| a.url == b.url);
    Ok(Listing { files })
}

/// The files FROM, FILES and PATTERN name.
fn list(c: &CopyInto, options: &ReadOptions) -> Result<Listing> {
    const WHO: &str = "COPY INTO";
    if let Some(names) = &c.files {
        if names.len() > 1000 {
            return Err(Error::Invalid(format!(
                "COPY INTO takes at most 1000 FILES, found {}: use PATTERN",
                names.len()
            )));
        }
        if let Some(base) = files::store_url(WHO, &c.from)? {
            return store_files(WHO, &base, names, options);
        }
        let base = files::local_path(WHO, &c.from)?;
        if base.is_file() {
            return Err(Error::Invalid(format!(
                "COPY INTO: FILES are named relative to a directory, and {} is a file",
                c.from
            )));
        }
        let mut found = vec![];
        for name in names {
            let relative = std::path::Path::new(name);
            if relative.is_absolute()
                || relative
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err(Error::Invalid(format!(
                    "COPY INTO: FILES names files inside {}, and '{name}' is not one (no absolute path, no ..)",
                    c.from
                )));
            }
            let path = base.join(name);
            match files::file(WHO, &path)? {
                Some(f) => found.push(f),
                None if options.ignore_missing => {}
                None => {
                    return Err(Error::class(
                        "PATH_NOT_FOUND",
                        format!("COPY INTO: file does not exist: {}", path.display()),
                    ));
                }
            }
        }
        let mut files = found;
        files.sort_by(|a, b| a.url.cmp(&b.url));
        files.dedup_by(|a, b| a.url == b.url);
        return Ok(Listing { files });
    }
    match &c.pattern {
        Some(p) => {
            let glob = format!(
                "{}/{}",
                c.from.trim_end_matches('/'),
                p.trim_start_matches('/')
            );
            files::list(WHO, &glob, options.walk())
        }
        None => files::list(WHO, &c.from, options.walk()),
    }
}

/// The new files' rows, through the statement's SELECT if it has one, and what must live
/// while they are read.
async fn read(
    session: &Session,
    c: &CopyInto,
    found: &[SourceFile],
    options: &ReadOptions,
    schema: SchemaRef,
) -> Result<(DataFrame, Scratch, Option<crate::engine::bind::Bound>)> {
    let files = session.file_table(found, schema, options)?;
    let mut scratch = Scratch::default();
    let Some(items) = &c.select else {
        return Ok((session.ctx().read_table(files)?, scratch, None));
    };
    let name = session.register_for_statement(files, &mut scratch)?;
    let items: Vec<String> = items.iter().map(|i| i.to_string()).collect();
    let query = crate::parser::query_text(&format!("SELECT {} FROM {name}", items.join(", ")))?;
    let (df, bound) = super::query::query_dataframe(session, query).await?;
    Ok((df, scratch, Some(bound)))
}

/// The CSV columns `text` (all STRING) with the numbers and dates of the target columns they
/// fill read as such by the CSV reader: it parses them as the cast from text after the read
/// would (Arrow's same parsers, empty fields NULL either way), without building the text
/// first. Other types stay text and are cast after the read: decimals and booleans (the CSV
/// reader's rules for them are not the cast's), and timestamps (the cast reads the plain
/// ones several times faster than the reader's general parser, and drops a zone written
/// after a TIMESTAMP_NTZ as Spark does).
fn parsed_as_read(text: &Schema, target: &Schema) -> SchemaRef {
    use datafusion::arrow::datatypes::Field;
    let fields: Vec<Field> = text
        .fields()
        .iter()
        .map(|f| {
            let filled = target
                .fields()
                .iter()
                .find(|t| t.name().eq_ignore_ascii_case(f.name()));
            let read_as = filled.and_then(|t| match t.data_type() {
                d @ (DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Float32
                | DataType::Float64
                | DataType::Date32) => Some(d.clone()),
                _ => None,
            });
            match read_as {
                Some(d) if f.data_type() == &DataType::Utf8 => f.as_ref().clone().with_data_type(d),
                _ => f.as_ref().clone(),
            }
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, text.metadata().clone()))
}

/// The rows as the target's columns: each source column cast to the type of the target
/// column it fills (by name in any case, or by position); a target column no source column
/// fills is left to the writer (its DEFAULT or NULL).
fn meet_target(
    rows: DataFrame,
    target: &datafusion::arrow::datatypes::Schema,
    columns: &CopyColumns,
    table: &TableName,
    merge_schema: bool,
    cast_here: bool,
    zone: Option<&Arc<str>>,
) -> Result<DataFrame> {
    let given: Vec<String> = rows
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let names = super::column_names(target.fields());
    let fills: Vec<Option<String>> = match columns {
        CopyColumns::ByName => given
            .iter()
            .map(|g| {
                let found = names.iter().find(|n| n.eq_ignore_ascii_case(g)).cloned();
                if found.is_none() && !merge_schema {
                    return Err(Error::NotFound(format!(
                        "the files' column '{g}' is not a column of {table} ({}): add it (ALTER TABLE {table} ADD COLUMN), let the load add it (COPY_OPTIONS ('mergeSchema' = 'true')), or pick and name the columns (FROM (SELECT ... FROM 'path'))",
                        names.join(", "),
                    )));
                }
                Ok(found)
            })
            .collect::<Result<_>>()?,
        CopyColumns::ByPosition | CopyColumns::Listed(_) => {
            let into: Vec<String> = match columns {
                CopyColumns::Listed(l) => l
                    .iter()
                    .map(|c| {
                        names
                            .iter()
                            .find(|n| n.eq_ignore_ascii_case(&c.value))
                            .cloned()
                            .ok_or_else(|| {
                                Error::NotFound(format!(
                                    "column '{}' not found in {table}{}",
                                    c.value,
                                    crate::catalog::suggest(&c.value.to_lowercase(), &names)
                                ))
                            })
                    })
                    .collect::<Result<_>>()?,
                _ => names.clone(),
            };
            if into.len() != given.len() {
                return Err(Error::Invalid(format!(
                    "the files have {} columns and COPY INTO fills {} columns of {table} ({}) by position",
                    given.len(),
                    into.len(),
                    into.join(", ")
                )));
            }
            into.into_iter().map(Some).collect()
        }
    };
    let mut seen = std::collections::HashSet::new();
    for f in fills.iter().flatten() {
        if !seen.insert(f) {
            return Err(Error::Invalid(format!(
                "COPY INTO fills column '{f}' of {table} twice"
            )));
        }
    }
    for f in target.fields() {
        if !f.is_nullable() && !seen.contains(f.name()) && !f.metadata().contains_key(DEFAULT_KEY) {
            return Err(Error::Invalid(format!(
                "column '{}' of {table} is NOT NULL, and the files do not fill it (it has no DEFAULT)",
                f.name()
            )));
        }
    }
    let exprs: Vec<DfExpr> = given
        .iter()
        .zip(&fills)
        .map(|(g, fill)| {
            let source = col(Column::from_name(g));
            // Under another session zone, text (or a wall-clock time) bound for a TIMESTAMP
            // names a time in that zone: cast here, as the zone reads it.
            if let (Some(zone), Some(name)) = (zone, fill) {
                let to = target
                    .field_with_name(name)
                    .expect("a target column")
                    .data_type();
                let from = rows.schema().field_with_unqualified_name(g)?.data_type();
                let wall_clock = matches!(from, DataType::Timestamp(_, None))
                    && matches!(to, DataType::Timestamp(_, Some(_)));
                if wall_clock || crate::engine::zone::read_via(from, to, zone).is_some() {
                    let read = cast(source, to.clone());
                    let read = crate::engine::zone::zone_casts(read, rows.schema(), zone)?.data;
                    return Ok(read.alias(name));
                }
                // Times nested in a STRUCT, ARRAY or MAP: Arrow's cast reads text and
                // wall-clock times bound for a timestamp zoned `zone` in that zone.
                if to.is_nested()
                    && from != to
                    && let Some(zoned) = crate::engine::zone::relabeled(to, zone)
                {
                    return Ok(cast(cast(source, zoned), to.clone()).alias(name));
                }
            }
            Ok(match fill {
                Some(name) if cast_here => {
                    let to = target
                        .field_with_name(name)
                        .expect("a target column")
                        .data_type();
                    let from = rows.schema().field_with_unqualified_name(g)?.data_type();
                    // The engine's cast would wrap a value into a one-element list.
                    if to.is_nested() && !from.is_nested() && !from.is_null() {
                        return Err(Error::Type(format!(
                            "column '{name}' of {table} is {}, and the files give a {} for it",
                            crate::engine::types::type_name(to),
                            crate::engine::types::type_name(from)
                        )));
                    }
                    cast(source, to.clone()).alias(name)
                }
                Some(name) => source.alias(name),
                None => source,
            })
        })
        .collect::<Result<_>>()?;
    Ok(rows.select(exprs)?)
}

/// The commit's properties: a `txn` action per file (its modification time as the version),
/// and what was loaded.
fn commit_properties(c: &CopyInto, found: &[SourceFile], force: bool) -> Result<CommitProperties> {
    let txns = found
        .iter()
        .map(|f| {
            Ok(Transaction::new(
                format!("{}{}", loaded::APP_PREFIX, f.url()?),
                f.modified_ms,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let meta = serde_json::to_value(LoadMetadata {
        source: &c.from,
        files: found.len(),
        force,
    })
    .map_err(|e| Error::Other(e.to_string()))?;
    Ok(CommitProperties::default()
        .with_application_transactions(txns)
        .with_metadata(vec![(META_KEY.to_string(), meta)]))
}

/// Write the rows and commit them with the files' records, all or nothing.
async fn write(
    session: &Session,
    t: &DeltaTable,
    table: &TableName,
    rows: DataFrame,
    plain: bool,
    merge_schema: bool,
    props: CommitProperties,
) -> Result<Loaded> {
    let progress = CopyProgress::start(
        session.settings().progress.as_ref(),
        &format!("COPY INTO {table}"),
        0,
    );
    // Files this load writes go away if it stops before its commit.
    let uncommitted = Uncommitted::new(
        session.warehouse().data_dir(table)?,
        Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let target = uncommitted.table(t);
    let rows_written = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = {
        let (rows, bar) = (rows_written.clone(), progress.counter());
        Arc::new(move |n: u64| {
            rows.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            bar(n);
        })
    };
    let rows = crate::statements::table::storable(rows)?;
    if plain {
        let writer = || Ok(deltalake::writer::RecordBatchWriter::for_table(&target)?);
        let adds = crate::statements::writer::write_with(
            writer,
            Some(rows),
            &[],
            None,
            Some(crate::statements::copy::encoding::sampled_settings),
            &progress,
        )
        .await?;
        for add in &adds {
            let stats = add.get_stats().ok().flatten();
            let n = stats.map(|s| s.num_records as u64).unwrap_or(0);
            rows_written.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
        fail::fail_point!("copy_into::before_commit", |_| std::process::abort());
        let (actions, operation) = crate::statements::append_commit(adds);
        crate::statements::upkeep::commit_actions(&target, actions, operation, props).await?;
    } else {
        // Through delta-rs' writer: it checks constraints, computes generated columns and
        // adds the files' new columns (mergeSchema).
        let input = with_target_columns(session, rows, t).await?;
        let input = crate::engine::functions::counted(input, move |n| count(n))?;
        let mut write = target
            .clone()
            .write(vec![])
            .with_input_plan(input.into_unoptimized_plan())
            .with_session_state(Arc::new(session.ctx().state()))
            .with_save_mode(SaveMode::Append)
            .with_table_name(table.table.clone());
        if merge_schema {
            write = write.with_schema_mode(deltalake::operations::write::SchemaMode::Merge);
        }
        fail::fail_point!("copy_into::before_commit", |_| std::process::abort());
        crate::statements::upkeep::commit(write, props).await?;
    }
    Ok(Loaded {
        rows: rows_written.load(std::sync::atomic::Ordering::Relaxed),
    })
}
