//! COPY INCREMENTAL: copy the rows of one pinned source snapshot above a watermark into a
//! target, exactly once. [`attempt`] is the recipe, one module per step:
//!
//! 1. [`resolve`]: names, the pinned [`source`], the control row, the watermark, the target
//!    and what this pair's last run committed ([`metadata`]); every check, before any write.
//! 2. [`start`]: where the run starts (SINCE, the control row, a repair, the target's mark).
//! 3. [`plan`]: which rows are new, the new mark, and the strategy that writes them. A DRY
//!    RUN stops here and reports the plan.
//! 4. [`write`]: the rows as new files of the target ([`whole_file`] links files whole).
//! 5. [`commit`]: one Delta commit with the `txn` action and the run's metadata.
//! 6. [`record`]: the control row advanced; the run appended to the [`history`].
//! 7. [`compact`]: the target's small files merged, once it has many (auto compaction).
//!
//! [`unchanged`] answers "nothing new" from two log names before any of it. A run that lost a
//! race for its commit runs again from step 1 on fresh state.

pub mod control;
pub mod history;
pub(crate) mod uncommitted;
pub mod whole_file;

mod commit;
mod compact;
pub(crate) mod encoding;
mod metadata;
mod plan;
mod record;
mod resolve;
mod source;
mod start;
mod unchanged;
mod write;

use std::sync::atomic::Ordering;
use std::time::Instant;

use control::ControlRow;
use history::RunRecord;

use crate::engine::progress::CopyProgress;
use crate::engine::types::display_exact;
use crate::engine::{Output, Session};
use crate::error::Result;
use crate::parser::CopyIncremental;

/// What one run did, for the result row and the history table.
#[derive(Debug, Clone)]
pub struct CopyReport {
    pub record: RunRecord,
}

/// Run the statement: one result row, one history row (a DRY RUN's only where the warehouse
/// can be written).
pub async fn execute(session: &mut Session, c: CopyIncremental) -> Result<Output> {
    let report = run(session, &c).await?;
    Ok(Output::batch(
        history::to_batch(&[report.record])?.project(&RESULT_COLUMNS)?,
    ))
}

/// Columns of the history schema shown as COPY's result.
const RESULT_COLUMNS: [usize; 11] = [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];

/// Run one copy and record it in the history (failures included). Errors are returned after
/// being recorded.
pub async fn run(session: &Session, c: &CopyIncremental) -> Result<CopyReport> {
    run_with_row(session, c, None).await
}

/// [`run`], with the control row already read (the one-statement job reads the control table
/// once, up front, instead of once per copy). Retries after a conflict read it again.
pub async fn run_with_row(
    session: &Session,
    c: &CopyIncremental,
    mut known_row: Option<ControlRow>,
) -> Result<CopyReport> {
    let clock = Instant::now();
    if !c.dry_run {
        history::prefetch(session);
    }
    let mut record = RunRecord {
        run_id: uuid::Uuid::new_v4().to_string(),
        started_at_us: now_us(),
        source: c.source.to_string(),
        target: c.target.to_string(),
        ..Default::default()
    };
    // A run dropped before it ends (Ctrl-C, SIGTERM) is still recorded, as `cancelled`.
    let mut cancelled = RecordIfCancelled {
        session: (!c.dry_run).then(|| session.clone()),
        record: record.clone(),
        _live: super::Live::new(),
    };
    let mut retry = super::retry::Retry::up_to(super::retry::WHOLE_STATEMENT);
    let result = loop {
        // Per attempt: an attempt that lost the race for its commit did not commit.
        record.commit_started.store(false, Ordering::SeqCst);
        // A retry works again: it takes a slot of the job first (the last attempt lent its
        // slot while it waited for a commit).
        super::group_commit::hold_slot().await;
        match attempt(session, c, known_row.take(), &mut record).await {
            Err(e) => {
                if let Err(e) = retry.again(e).await {
                    break Err(e);
                }
            }
            Ok(committed) => break Ok(committed),
        }
    };
    cancelled.session = None;
    record.finished_at_us = record.started_at_us + clock.elapsed().as_micros() as i64;
    match result {
        Ok(committed) => {
            if !c.dry_run {
                history::append(session, std::slice::from_ref(&record)).await?;
                if let Some(committed) = committed {
                    let (target, version, name) = *committed;
                    compact_target(session, &target, version, &name).await;
                }
            } else if session.warehouse().root().is_dir()
                && session.warehouse().check_writable(None).is_ok()
            {
                // Recorded too, when the warehouse can be written (a dry run also serves a
                // read-only one).
                let _ = history::append(session, std::slice::from_ref(&record)).await;
            }
            Ok(CopyReport { record })
        }
        Err(e) => {
            let e = e.context(format!("COPY INCREMENTAL {} INTO {}", c.source, c.target));
            if !c.dry_run {
                record.status = "failed".into();
                record.error = Some(e.to_string());
                // The run's own error matters more than a failure to record it.
                let _ = history::append(session, std::slice::from_ref(&record)).await;
            }
            Err(e)
        }
    }
}

/// Step 7, after the run is recorded: best effort, a failure is a warning (a conflict with
/// another writer not even that: a later run tries again). Boxed, and made in a frame of its
/// own: OPTIMIZE's future is large, and only one run in many needs it.
fn compact_target<'a>(
    session: &'a Session,
    target: &'a deltalake::DeltaTable,
    version: u64,
    name: &'a crate::catalog::TableName,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        if let Err(e) = compact::after_copy(session, target, version, name).await
            && !e.is_conflict()
        {
            eprintln!(
                "warning: could not compact {name} (the copy is committed and recorded; ALTER TABLE {name} SET TBLPROPERTIES ('{}' = 'false') stops trying): {e}",
                compact::PROPERTY
            );
        }
    })
}

/// A copy's target as the run read it, the version the run committed, and its name (boxed: it
/// is held while the run is recorded).
type Committed = Box<(deltalake::DeltaTable, u64, crate::catalog::TableName)>;

/// One attempt at the copy: resolve → start point → plan → (DRY RUN: stop) → write → commit →
/// record. `record` learns what each step found, so that a failure is recorded with it.
/// Returns the target as the run read it, the version it committed and its name (None: no
/// commit).
async fn attempt(
    session: &Session,
    c: &CopyIncremental,
    known_row: Option<ControlRow>,
    record: &mut RunRecord,
) -> Result<Option<Committed>> {
    // Tests hold a job's copy here, its control row read when the job began.
    crate::hold_at("copy::before_resolve").await;
    let names = resolve::Names::of(session, c)?;
    record.source = names.source.to_string();
    record.target = names.target.to_string();
    let mut known_row = known_row;
    if unchanged::applies(c, &names) {
        if let (Some(ctl), None) = (&c.control, &known_row) {
            let ctl = session.table_name(ctl)?;
            known_row = Some(control::find(session, &ctl, &names.source, &names.target).await?);
        }
        if let Some(run) = unchanged::check(session, c, &names, known_row.as_ref()).await {
            record.note_unchanged(run);
            return Ok(None);
        }
    }

    let r = resolve::resolve(session, c, names, known_row).await?;
    record.source_version = r.source.version();
    record.watermark_column = Some(r.wm.clone());
    let start = start::start_point(r.since.as_ref(), r.control_mark.as_ref(), r.last.as_ref());
    record.previous_mark = start.value().map(display_exact);
    let mut plan = plan::plan(session, &r, &start, c.lookback.as_ref(), c.dry_run).await?;
    if plan.seen.is_none() {
        // Everything read (a database's rows are in memory, or streamed with the write).
        record.source_snapshot = r.source.finish_reads();
    }
    record.null_watermark_rows = plan.null_rows;
    record.new_mark = plan.new_mark.as_ref().map(display_exact);
    record.rows_copied = plan.rows;
    fail::fail_point!("copy::after_read", |_| std::process::abort());
    if c.dry_run {
        record.status = "dry_run".into();
        record.target_version = r.target_version();
        return Ok(None);
    }

    let mut committed = None;
    record.target_version = match plan.strategy {
        plan::Strategy::NothingNew => r.target_version(),
        _ => {
            // What the next run compares the source with to know it unchanged.
            let source_commit = r.source.commit_file();
            let props =
                commit::properties(&r, &start, &plan, &record.run_id, source_commit.clone());
            let target = commit::target(session, &r, &plan).await?;
            commit::check_txn(&r).await?;
            let progress = CopyProgress::start(
                session.settings().progress.as_ref(),
                &format!("{} -> {}", r.names.source, r.names.target),
                // A source read once counts its rows as they stream: no total up front.
                if plan.seen.is_some() {
                    0
                } else {
                    plan.rows as u64
                },
            );
            // Files this copy writes go away if it stops (Ctrl-C, an error) before its commit.
            let uncommitted = uncommitted::Uncommitted::new(
                r.names.target_dir.clone(),
                record.commit_started.clone(),
            )
            .expecting(r.target_commit.clone());
            let to = write::Destination {
                table: uncommitted.table(&target),
                uncommitted: &uncommitted,
                props: &props,
                progress: &progress,
            };
            let written = match write::write(session, &r, &plan, &to).await {
                Ok(written) => written,
                Err(e) => return Err(uncommitted.conflict_if_replaced(e).await),
            };
            record.source_snapshot = r.source.finish_reads();
            if plan.seen.is_some() {
                // A source read once: its rows and mark are known now that they are written.
                plan.note_written()?;
                record.new_mark = plan.new_mark.as_ref().map(display_exact);
                record.rows_copied = plan.rows;
            }
            if plan.rows == 0 && r.target.is_some() {
                // Nothing new after all (a streamed read found no row): no commit.
                r.target_version()
            } else {
                let props = match plan.seen {
                    Some(_) => commit::properties(&r, &start, &plan, &record.run_id, source_commit),
                    None => props.clone(),
                };
                let version = match commit::commit(&to.table, written, props).await {
                    Ok(version) => version,
                    Err(e) => return Err(uncommitted.conflict_if_replaced(e).await),
                };
                progress.inc((plan.rows as u64).saturating_sub(progress.position()));
                committed = version.map(|v| Box::new((target, v as u64, r.names.target.clone())));
                version
            }
        }
    };

    record::advance_control_row(session, &r, &start, &plan).await?;
    record.status = if plan.rows > 0 {
        "succeeded".into()
    } else {
        "nothing_new".into()
    };
    Ok(committed)
}

impl RunRecord {
    /// A run the shortcut found to have nothing new.
    fn note_unchanged(&mut self, run: unchanged::Unchanged) {
        self.source_version = Some(run.source_version);
        self.watermark_column = Some(run.watermark_column);
        self.previous_mark = Some(run.mark.clone());
        self.new_mark = Some(run.mark);
        self.null_watermark_rows = run.null_rows;
        self.rows_copied = 0;
        self.target_version = Some(run.target_version);
        self.status = "nothing_new".into();
    }
}

/// Records a run as `cancelled` in the history when dropped while still armed: the append
/// runs as a task of its own, which the shell waits for before it exits.
struct RecordIfCancelled {
    session: Option<Session>,
    record: RunRecord,
    /// Counts this run among those a cancelled shell waits for.
    _live: super::Live,
}

impl Drop for RecordIfCancelled {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut record = std::mem::take(&mut self.record);
        record.status = "cancelled".into();
        record.error = Some(
            if record.commit_started.load(Ordering::SeqCst) {
                "cancelled (Ctrl-C or SIGTERM) during or after its target commit: the rows may be in the target; the next run repairs the control row and copies nothing twice"
            } else {
                "cancelled (Ctrl-C or SIGTERM) before its commit: nothing was committed, and the files it had written were removed (on an object store they stay, unreferenced: no reader sees them)"
            }
            .into(),
        );
        record.finished_at_us = now_us();
        super::after_cancel(runtime.spawn(async move {
            let _ = history::append(&session, std::slice::from_ref(&record)).await;
        }));
    }
}

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}
