//! The shortcut of a copy with nothing to do, decided from two log names without reading
//! either table's files: the target's newest commit is this pair's last run, the source is
//! still at the version and table id that run read, and this run starts at that run's mark.

use super::control::{self, ControlRow};
use super::metadata;
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
    let (target_version, meta) = metadata::newest_commit(names.target_dir.as_deref()?)?;
    if meta.app_id != names.app() {
        return None;
    }
    let source = deltalake::kernel::Snapshot::try_new(
        session
            .warehouse()
            .handle(&names.source)
            .await
            .ok()?
            .log_store()
            .as_ref(),
        None,
    )
    .await
    .ok()?;
    let source_version = source.version() as i64;
    if meta.source_version != Some(source_version)
        || meta.source_id.as_deref() != Some(source.metadata().id())
    {
        return None;
    }
    let wanted = requested_watermark(c, control_row).ok()??;
    let null_rows = meta.null_rows?;
    if !wanted.eq_ignore_ascii_case(&meta.watermark_column) {
        return None;
    }
    let (_, wm_type) = find_column(
        &source.arrow_schema(),
        &meta.watermark_column,
        &names.source,
    )
    .ok()?;
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
