//! Step 1 of a copy: resolve every name and read every state the run depends on, and check
//! all of it before anything is written: the source pinned at one snapshot, the control row,
//! the watermark column and its type, the MERGE ON keys, the target and whether it can take
//! the source's columns, and this pair's last committed run.

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::ScalarValue;
use deltalake::DeltaTable;

use super::control::{self, ControlRow};
use super::metadata::{self, LastRun, ReadCommit, app_id};
use super::source::Source;
use crate::catalog::{TableName, suggest};
use crate::engine::types::{storage_type, type_name};
use crate::engine::{Session, name_parts};
use crate::error::{Error, Result};
use crate::parser::CopyIncremental;

/// The source and target of a copy, resolved against the session and checked.
#[derive(Debug, Clone)]
pub(super) struct Names {
    pub source: TableName,
    pub target: TableName,
    /// The target's directory.
    /// The target's local directory (None: on an object store).
    pub target_dir: Option<std::path::PathBuf>,
}

impl Names {
    pub(super) fn of(session: &Session, c: &CopyIncremental) -> Result<Names> {
        let source = session.table_name(&c.source)?;
        let target = session.table_name(&c.target)?;
        if source == target {
            return Err(Error::Invalid(format!(
                "source and target are the same table ({source})"
            )));
        }
        crate::catalog::check_writable_table(&target, true)?;
        if !session
            .warehouse()
            .schema_exists(&target.catalog, &target.schema)
        {
            return Err(session.warehouse().missing_table_error(&target));
        }
        let target_dir = session.warehouse().data_dir(&target)?;
        Ok(Names {
            source,
            target,
            target_dir,
        })
    }

    /// The application id of this pair's `txn` actions.
    pub(super) fn app(&self) -> String {
        app_id(&self.source, &self.target)
    }
}

/// Everything a copy reads before it plans.
pub(super) struct Resolved {
    pub names: Names,
    pub app: String,
    pub source: Source,
    pub control_row: Option<ControlRow>,
    /// The control row's mark in the watermark's type (a NULL value for a NULL mark).
    pub control_mark: Option<ScalarValue>,
    /// The SINCE value in the watermark's type.
    pub since: Option<ScalarValue>,
    /// The watermark column, as the source names it, and its type (a partition column's plain
    /// type, not its dictionary encoding).
    pub wm: String,
    pub wm_type: DataType,
    pub merge_keys: Vec<String>,
    /// The target at its newest version (None: the copy creates it).
    pub target: Option<DeltaTable>,
    /// Whether the source has columns the target lacks (appends merge them in).
    pub new_columns: bool,
    /// This pair's last run number in the target (0: none) and what that run committed.
    pub last_run: i64,
    pub last: Option<LastRun>,
    /// The commit of the target's version as the run read it: the copy commits only while it
    /// is still there unchanged (checked before the write and again just before its commit is
    /// put, whatever strategy writes it).
    pub target_commit: Option<ReadCommit>,
}

impl Resolved {
    pub(super) fn target_version(&self) -> Option<i64> {
        self.target
            .as_ref()
            .and_then(|t| t.version())
            .map(|v| v as i64)
    }
}

/// Resolve a copy of `names`, its control row already read when `control_row` is Some.
pub(super) async fn resolve(
    session: &Session,
    c: &CopyIncremental,
    names: Names,
    control_row: Option<ControlRow>,
) -> Result<Resolved> {
    // The target's log is replayed on another worker while this one reads the source's and
    // the control's.
    let target_task = {
        let warehouse = session.warehouse().clone();
        let name = names.target.clone();
        tokio::spawn(async move {
            if warehouse.table_exists(&name) {
                let t = warehouse.open(&name).await?;
                let newest = ReadCommit::of(&t, &name).await;
                Ok::<_, Error>(Some((t, newest)))
            } else {
                Ok(None)
            }
        })
    };
    let source = Source::open(session, &names.source).await?;
    let control_row = match (&c.control, control_row) {
        (Some(_), Some(row)) => Some(row),
        (Some(ctl), None) => {
            let ctl = session.table_name(ctl)?;
            Some(control::find(session, &ctl, &names.source, &names.target).await?)
        }
        (None, _) => None,
    };
    let (wm, wm_type) = watermark(c, control_row.as_ref(), &source.schema, &names.source)?;
    let merge_keys = merge_keys(c, &source.schema, &names.source)?;
    let (target, newest) = match target_task
        .await
        .map_err(|e| Error::Other(format!("opening {}: {e}", names.target)))??
    {
        Some((t, newest)) => (Some(t), newest),
        None => (None, None),
    };
    let new_columns = match &target {
        Some(t) => new_columns(&source.schema, t, &names)?,
        None => false,
    };
    if new_columns && !merge_keys.is_empty() {
        return Err(Error::Invalid(format!(
            "source {} has columns the target {} lacks; MERGE ON copies need them added first (ALTER TABLE ... ADD COLUMNS)",
            names.source, names.target
        )));
    }
    let app = names.app();
    let (last_run, last) = match &target {
        Some(t) => {
            metadata::last_run(t, newest.as_ref().map(|n| &n.bytes[..]), &app, &wm_type).await?
        }
        None => (0, None),
    };
    // Under SINCE the control row plays no part in where the run starts.
    let mark_of = |row: &ControlRow| {
        control::convert(
            &row.mark,
            &wm_type,
            &format!("last_watermark of {}", row.table),
        )
    };
    let mut control_row = control_row;
    let mut control_mark = control_row
        .as_ref()
        .filter(|_| c.since.is_none())
        .map(mark_of)
        .transpose()?;
    // A control value the target's last run neither reached nor started from is honoured as
    // a backfill; but it may only be older than that run (read before the target was, or by
    // the job before this copy began): it is read again, now that the target is open, so that
    // a run that raced this one is not copied a second time.
    if let (Some(ctl), Some(mark), Some(l)) = (&c.control, &control_mark, &last)
        && super::start::reads_as_backfill(mark, l)
    {
        let ctl = session.table_name(ctl)?;
        let row = control::find(session, &ctl, &names.source, &names.target).await?;
        control_mark = Some(mark_of(&row)?);
        control_row = Some(row);
    }
    let since = match &c.since {
        Some(since) => Some(control::convert_since(
            &crate::engine::zone::scalar_for(
                session.eval_scalar(since).await?,
                &wm_type,
                session.ctx().copied_config().options(),
            ),
            &wm_type,
        )?),
        None => None,
    };
    Ok(Resolved {
        names,
        app,
        source,
        control_row,
        control_mark,
        since,
        wm,
        wm_type,
        merge_keys,
        target,
        new_columns,
        last_run,
        last,
        target_commit: newest,
    })
}

/// The watermark column and its type, checked against the source and the control row.
fn watermark(
    c: &CopyIncremental,
    row: Option<&ControlRow>,
    schema: &SchemaRef,
    source: &TableName,
) -> Result<(String, DataType)> {
    let Some(requested) = requested_watermark(c, row)? else {
        return Err(Error::Invalid(
            "no watermark column: add WATERMARK <column>, or a control table whose row has watermark_column".into(),
        ));
    };
    let (wm, wm_type) = find_column(schema, &requested, source)?;
    // A partition column reads dictionary-encoded: its mark is a plain value of its type.
    let wm_type = match wm_type {
        DataType::Dictionary(_, values) => *values,
        other => other,
    };
    if !supported_watermark(&wm_type) {
        return Err(Error::Type(format!(
            "watermark column '{wm}' of {source} is {}; a watermark must be a TIMESTAMP, DATE, integer, DECIMAL or STRING column",
            type_name(&wm_type)
        )));
    }
    if let Some(row) = row
        && !control::can_hold(&wm_type, &row.mark_type)
    {
        return Err(Error::Type(format!(
            "control table {}: last_watermark is {} but watermark '{wm}' of {source} is {}; a {} column cannot hold it exactly (use a {} column)",
            row.table,
            type_name(&row.mark_type),
            type_name(&wm_type),
            type_name(&row.mark_type),
            type_name(&storage_type(&wm_type))
        )));
    }
    Ok((wm, wm_type))
}

/// The watermark column a run asks for: WATERMARK, else the control row's `watermark_column`.
pub(super) fn requested_watermark(
    c: &CopyIncremental,
    row: Option<&ControlRow>,
) -> Result<Option<String>> {
    Ok(
        match (&c.watermark, row.and_then(|r| r.watermark_column.clone())) {
            (Some(w), _) => Some(name_parts(w)?.last().cloned().unwrap_or_default()),
            (None, w) => w,
        },
    )
}

/// The MERGE ON keys, as the source names them.
fn merge_keys(c: &CopyIncremental, schema: &SchemaRef, source: &TableName) -> Result<Vec<String>> {
    c.merge_on
        .iter()
        .map(|k| {
            let k = name_parts(k)?.last().cloned().unwrap_or_default();
            find_column(schema, &k, source)
                .map(|(n, _)| n)
                .map_err(|_| {
                    Error::NotFound(format!("MERGE ON key '{k}' is not a column of {source}"))
                })
        })
        .collect()
}

/// Whether the source has columns the target lacks; an error when a column both have is of
/// another type in the target.
fn new_columns(source: &SchemaRef, target: &DeltaTable, names: &Names) -> Result<bool> {
    let tschema = crate::statements::table::arrow_schema(target)?;
    let mut new = false;
    for f in source.fields() {
        match tschema
            .fields()
            .iter()
            .find(|g| g.name().eq_ignore_ascii_case(f.name()))
        {
            Some(g) if !crate::engine::types::same_stored_type(g.data_type(), f.data_type()) => {
                return Err(Error::Type(format!(
                    "column '{}' is {} in source {} but {} in target {}: change the target's type or copy into a new target",
                    f.name(),
                    type_name(f.data_type()),
                    names.source,
                    type_name(g.data_type()),
                    names.target
                )));
            }
            Some(_) => {}
            None => new = true,
        }
    }
    Ok(new)
}

/// Find a column by case-insensitive name.
pub(super) fn find_column(
    schema: &SchemaRef,
    name: &str,
    table: &TableName,
) -> Result<(String, DataType)> {
    schema
        .fields()
        .iter()
        .find(|f| f.name().eq_ignore_ascii_case(name))
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .ok_or_else(|| {
            let names = crate::statements::column_names(schema.fields());
            // suggest() lists the columns when none is close; otherwise list them here.
            let hint = match suggest(name, &names) {
                h if h.is_empty() || h.starts_with(", did") => {
                    format!("{h} (columns: {})", names.join(", "))
                }
                h => h,
            };
            Error::NotFound(format!(
                "watermark column '{name}' not found in {table}{hint}"
            ))
        })
}

fn supported_watermark(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Timestamp(_, _)
            | DataType::Date32
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Decimal128(_, _)
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
    )
}
