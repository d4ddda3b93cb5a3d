//! The shortcut of a copy with nothing to do, decided from a few log names without reading
//! either table's files: the target's newest commit is this pair's last run, the source is
//! still at the very commit that run read (the same file, and no next version; for runs that
//! did not record the file, the same version and table id), and this run starts at that
//! run's mark. On an object store that is five requests.

use super::control::{self, ControlRow};
use datafusion::arrow::datatypes::DataType;

use super::metadata::{self, RunMetadata};
use super::resolve::{Names, find_column, requested_watermark};
use crate::catalog::SAMPLES;
use crate::engine::Session;
use crate::parser::CopyIncremental;

/// A run found to have nothing new, for the history.
pub(super) struct Unchanged {
    pub source_version: i64,
    pub watermark_column: String,
    pub mark: String,
    pub null_rows: i64,
    pub target_version: i64,
}

/// Whether the shortcut may answer for this statement at all: a plain run from the recorded
/// mark into a target it appends to.
pub(super) fn applies(c: &CopyIncremental, names: &Names) -> bool {
    c.since.is_none()
        && c.lookback.is_none()
        && c.merge_on.is_empty()
        && !c.dry_run
        && names.source.catalog != SAMPLES
}

/// The run, when it has nothing to do. Any doubt (an error included) answers None, and the
/// full run decides.
pub(super) async fn check(
    session: &Session,
    c: &CopyIncremental,
    names: &Names,
    control_row: Option<&ControlRow>,
) -> Option<Unchanged> {
    if session.warehouse().is_foreign(&names.source.catalog)
        || !session.warehouse().table_exists(&names.source)
    {
        return None;
    }
    let (target_version, meta) = match names.target_dir.as_deref() {
        Some(dir) => metadata::newest_commit(dir).await?,
        None => {
            let target = session.warehouse().handle(&names.target).await.ok()?;
            metadata::newest_commit_in(target.log_store().object_store(None).as_ref()).await?
        }
    };
    if meta.app_id != names.app() {
        return None;
    }
    let source = session.warehouse().handle(&names.source).await.ok()?;
    let (source_version, wm_type) = match by_name(&source, &meta).await {
        Seen::Same(wm_type) => (meta.source_version?, wm_type),
        Seen::Changed => return None,
        Seen::Unknown => by_snapshot(&source, &meta, names).await?,
    };
    let wanted = requested_watermark(c, control_row).ok()??;
    let null_rows = meta.null_rows?;
    if !wanted.eq_ignore_ascii_case(&meta.watermark_column) {
        return None;
    }
    let mark = meta.new_mark.as_ref()?.value(&wm_type)?;
    // With a control row, it must already hold the mark: any other value is a backfill or a
    // repair, which the full run handles.
    if let Some(row) = control_row
        && control::convert(&mark, &row.mark_type, "new mark").ok() != Some(row.mark.clone())
    {
        return None;
    }
    Some(Unchanged {
        source_version,
        watermark_column: meta.watermark_column,
        mark: crate::engine::types::display_exact(&mark),
        null_rows,
        target_version: target_version as i64,
    })
}

/// What the source's log says of the version the last run read.
enum Seen {
    /// Still the newest, with the watermark's type.
    Same(DataType),
    Changed,
    /// The last run did not record enough to tell by name.
    Unknown,
}

/// Two names of the source's log: the commit the last run read must be the very file it saw,
/// and the next version must not exist. No commit is read.
async fn by_name(source: &deltalake::DeltaTable, meta: &RunMetadata) -> Seen {
    let (Some(version), Some(seen), Some(wm_type)) = (
        meta.source_version,
        meta.source_commit.as_ref(),
        meta.watermark_type.as_deref(),
    ) else {
        return Seen::Unknown;
    };
    let Ok(wm_type) = wm_type.parse::<DataType>() else {
        return Seen::Unknown;
    };
    let store = source.log_store().object_store(None);
    let Ok(version) = u64::try_from(version) else {
        return Seen::Changed;
    };
    match metadata::commit_file(store.as_ref(), version).await {
        Ok(Some(now)) if now.same(seen) => {}
        _ => return Seen::Changed,
    }
    match metadata::commit_file(store.as_ref(), version + 1).await {
        Ok(None) => Seen::Same(wm_type),
        _ => Seen::Changed,
    }
}

/// The source's snapshot: its version and table id must be the last run's.
async fn by_snapshot(
    source: &deltalake::DeltaTable,
    meta: &RunMetadata,
    names: &Names,
) -> Option<(i64, DataType)> {
    let source = deltalake::kernel::Snapshot::try_new(source.log_store().as_ref(), None)
        .await
        .ok()?;
    let source_version = source.version() as i64;
    if meta.source_version != Some(source_version)
        || meta.source_id.as_deref() != Some(source.metadata().id())
    {
        return None;
    }
    let (_, wm_type) = find_column(
        &source.arrow_schema(),
        &meta.watermark_column,
        &names.source,
    )
    .ok()?;
    Some((source_version, wm_type))
}
