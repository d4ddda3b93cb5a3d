//! The source of a copy, pinned at one snapshot: what the planner asks of it. A Delta table
//! answers with its version, table id, files and their statistics (so whole files can be
//! linked and counted without decoding); a built-in sample is a plain table provider that
//! answers only with its rows. A table of a foreign catalog (a database) has no snapshot that
//! outlives one statement: the planner reads it once per run ([`Source::reads_once`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::dataframe::DataFrame;
use deltalake::DeltaTable;

use super::whole_file::{self, SourceFile};
use crate::catalog::{SAMPLES, TableName};
use crate::engine::Session;
use crate::error::{Error, Result};

/// A source pinned at one snapshot.
pub(super) struct Source {
    pub name: TableName,
    provider: Arc<dyn TableProvider>,
    /// The schema its rows are read in.
    pub schema: SchemaRef,
    kind: Kind,
}

enum Kind {
    /// A Delta table of the warehouse, pinned at its version, with its directory.
    /// `root`: the table's local directory (None: on an object store).
    Delta {
        table: DeltaTable,
        root: Option<PathBuf>,
        /// The pinned version's commit file (see [`Source::commit_file`]).
        commit: Option<super::metadata::CommitFile>,
    },
    /// Rows and nothing else (the built-in samples).
    Rows,
    /// A table of a foreign catalog: each query is its own snapshot (a PostgreSQL table's
    /// are one snapshot).
    Database,
}

impl Source {
    /// Open `name` at its newest snapshot.
    pub(super) async fn open(session: &Session, name: &TableName) -> Result<Source> {
        if name.catalog == SAMPLES {
            let provider = session
                .ctx()
                .catalog(SAMPLES)
                .and_then(|c| c.schema(&name.schema))
                .ok_or_else(|| session.warehouse().missing_table_error(name))?
                .table(&name.table)
                .await?
                .ok_or_else(|| session.warehouse().missing_table_error(name))?;
            return Ok(Source {
                name: name.clone(),
                schema: provider.schema(),
                provider,
                kind: Kind::Rows,
            });
        }
        if session.warehouse().is_foreign(&name.catalog) {
            // A run records and ends its snapshot: one of its own, whatever else the
            // statement reads.
            let found = crate::catalog::foreign::alone(session.foreign_table(name)).await?;
            let provider = found.ok_or_else(|| {
                Error::NotFound(format!(
                    "table {name} not found in the database of foreign catalog {}",
                    name.catalog
                ))
            })?;
            if let Some((column, read_as)) =
                crate::catalog::foreign::lossy_column(&provider).await?
            {
                return Err(Error::Type(format!(
                    "column '{column}' of {name} is {read_as} in the database, which a Delta table cannot hold exactly: copy from a view of the table that casts or leaves out the column (CREATE VIEW in the database)"
                )));
            }
            let schema = storable_columns(name, provider.schema())?;
            return Ok(Source {
                name: name.clone(),
                schema,
                provider,
                kind: Kind::Database,
            });
        }
        let root = session.warehouse().data_dir(name)?;
        if !session.warehouse().table_exists(name) {
            if let Some(root) = root.as_ref().filter(|r| r.exists()) {
                return Err(Error::Invalid(format!(
                    "{name} is not a Delta table (no commit in {}; a table whose creation was interrupted is created again by its first write)",
                    crate::catalog::log::dir(root).display()
                )));
            }
            return Err(session.warehouse().missing_table_error(name));
        }
        let table = session.warehouse().open(name).await?;
        let provider = crate::catalog::copy_source_provider(&table).await?;
        // Read now, as the snapshot was: on a store the commit just read is answered from
        // memory with what the store said then (no request, and no later table's file).
        let commit = match table.version() {
            Some(v) => {
                super::metadata::read_commit_file(table.log_store().object_store(None).as_ref(), v)
                    .await
                    .ok()
                    .flatten()
            }
            None => None,
        };
        Ok(Source {
            name: name.clone(),
            schema: provider.schema(),
            provider,
            kind: Kind::Delta {
                table,
                root,
                commit,
            },
        })
    }

    /// All its rows, as of the pinned snapshot (a database table: as of each query), in the
    /// columns of [`Source::schema`].
    pub(super) fn scan(&self, session: &Session) -> Result<DataFrame> {
        let df = session.ctx().read_table(self.provider.clone())?;
        if df.schema().as_arrow() == self.schema.as_ref() {
            return Ok(df);
        }
        let columns = self
            .schema
            .fields()
            .iter()
            .map(|f| {
                datafusion::prelude::cast(
                    datafusion::prelude::col(datafusion::common::Column::from_name(f.name())),
                    f.data_type().clone(),
                )
                .alias(f.name())
            })
            .collect::<Vec<_>>();
        Ok(df.select(columns)?)
    }

    /// Whether each query of the source sees the source as it is then (a database table):
    /// a run reads it once, its rows and their mark from the same query.
    pub(super) fn reads_once(&self) -> bool {
        matches!(self.kind, Kind::Database)
    }

    /// The Delta table, if the source is one.
    pub(super) fn delta(&self) -> Option<&DeltaTable> {
        match &self.kind {
            Kind::Delta { table, .. } => Some(table),
            Kind::Rows | Kind::Database => None,
        }
    }

    /// The table's directory (Delta sources).
    pub(super) fn root(&self) -> Option<&Path> {
        match &self.kind {
            Kind::Delta { root, .. } => root.as_deref(),
            Kind::Rows | Kind::Database => None,
        }
    }

    /// The pinned version (Delta sources).
    pub(super) fn version(&self) -> Option<i64> {
        self.delta()?.version().map(|v| v as i64)
    }

    /// The Delta table id (its metadata action's `id`): a table dropped and created again
    /// starts its versions over under a new id.
    pub(super) fn id(&self) -> Option<String> {
        Some(self.delta()?.snapshot().ok()?.metadata().id().to_string())
    }

    /// The database's name of the snapshot the run's reads ran in (a PostgreSQL table, once
    /// read: `txid_current_snapshot()`, `xmin:xmax:xip,...`).
    pub(super) fn snapshot(&self) -> Option<String> {
        match &self.kind {
            Kind::Database => crate::catalog::foreign::snapshot_of(&self.provider),
            Kind::Delta { .. } | Kind::Rows => None,
        }
    }

    /// The run has read all it reads of the source: a database's snapshot transaction ends
    /// (its locks and its hold on the database's cleanup go with it). Returns the snapshot's
    /// name, as [`Source::snapshot`].
    pub(super) fn finish_reads(&self) -> Option<String> {
        match &self.kind {
            Kind::Database => crate::catalog::foreign::finish_reads(&self.provider),
            Kind::Delta { .. } | Kind::Rows => None,
        }
    }

    /// The file of the pinned version's commit, as it was read when the source was opened
    /// (Delta sources; None when it was not found).
    pub(super) fn commit_file(&self) -> Option<super::metadata::CommitFile> {
        match &self.kind {
            Kind::Delta { commit, .. } => commit.clone(),
            Kind::Rows | Kind::Database => None,
        }
    }

    /// The snapshot's files with their statistics for watermark `wm` (Delta sources), parsed
    /// once for every decision of the plan.
    pub(super) fn files(&self, wm: &str, wm_type: &DataType) -> Result<Option<Vec<SourceFile>>> {
        self.delta()
            .map(|t| whole_file::source_files(t, wm, wm_type))
            .transpose()
    }

    /// Whether statistics can plan the copy file by file: an unpartitioned Delta table without
    /// column mapping, with a watermark type whose statistics are exact enough.
    pub(super) fn plans_by_file(&self, wm_type: &DataType) -> Result<bool> {
        Ok(match self.delta() {
            Some(t) => {
                whole_file::supports(wm_type)
                    && t.snapshot()?.metadata().partition_columns().is_empty()
                    && whole_file::unmapped(t)
            }
            None => false,
        })
    }

    /// The schema its Parquet files hold (Delta sources).
    pub(super) fn stored_schema(&self) -> Result<Option<SchemaRef>> {
        self.delta()
            .map(crate::statements::table::arrow_schema)
            .transpose()
    }

    /// The rows of some of its files (by path as the log names them), of the pinned snapshot.
    pub(super) async fn files_df(
        &self,
        session: &Session,
        paths: Vec<String>,
    ) -> Result<DataFrame> {
        let t = self
            .delta()
            .ok_or_else(|| Error::Other(format!("{} has no files", self.name)))?;
        let provider = t
            .table_provider()
            .with_file_paths(paths.iter().map(|p| url_path(p)))
            .with_session(crate::catalog::copy_scan_settings())
            .await?;
        let provider = crate::catalog::exact_reads(t, provider)?;
        Ok(session.ctx().read_table(provider)?)
    }
}

/// A database table's columns as a Delta table stores them: unsigned integers widened to the
/// next signed type (`BIGINT UNSIGNED` to DECIMAL(20,0)), enums as their labels, every other
/// type Delta cannot hold exactly refused by column.
fn storable_columns(name: &TableName, schema: SchemaRef) -> Result<SchemaRef> {
    use datafusion::arrow::datatypes::{Field, Schema};
    fn storable(t: &DataType) -> Option<DataType> {
        Some(match t {
            DataType::UInt8 => DataType::Int16,
            DataType::UInt16 => DataType::Int32,
            DataType::UInt32 => DataType::Int64,
            DataType::UInt64 => DataType::Decimal128(20, 0),
            // MySQL's ENUM: its labels.
            DataType::Dictionary(_, v) if matches!(**v, DataType::Utf8 | DataType::LargeUtf8) => {
                DataType::Utf8
            }
            DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal128(_, _)
            | DataType::Date32
            | DataType::Timestamp(_, _)
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView => t.clone(),
            DataType::List(f) => DataType::List(Arc::new(
                f.as_ref().clone().with_data_type(storable(f.data_type())?),
            )),
            DataType::Struct(fields) => DataType::Struct(
                fields
                    .iter()
                    .map(|f| Some(f.as_ref().clone().with_data_type(storable(f.data_type())?)))
                    .collect::<Option<Vec<Field>>>()?
                    .into(),
            ),
            _ => return None,
        })
    }
    let fields = schema
        .fields()
        .iter()
        .map(|f| match storable(f.data_type()) {
            Some(t) => Ok(f.as_ref().clone().with_data_type(t)),
            None => Err(Error::Type(format!(
                "column '{}' of {name} is {} in the database, which a Delta table cannot hold exactly: copy from a view of the table that casts or leaves out the column (CREATE VIEW in the database)",
                f.name(),
                crate::engine::types::type_name(f.data_type())
            ))),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    )))
}

/// A file's path as the log writes it: a relative URL, each segment percent-encoded (delta-rs
/// joins a selected path to the table's URL, so `a b%c.parquet`, as Spark names files, must
/// arrive as `a%20b%25c.parquet`).
fn url_path(decoded: &str) -> String {
    let mut url = url::Url::parse("file:///").expect("a valid URL");
    if let Ok(mut segments) = url.path_segments_mut() {
        segments.clear().extend(decoded.split('/'));
    }
    url.path().trim_start_matches('/').to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn selected_paths_are_percent_encoded_as_in_the_log() {
        assert_eq!(super::url_path("a b%c.parquet"), "a%20b%25c.parquet");
        assert_eq!(super::url_path("p=x/part-0.parquet"), "p=x/part-0.parquet");
        assert_eq!(super::url_path("p=a%2Fb/f.parquet"), "p=a%252Fb/f.parquet");
    }
}
