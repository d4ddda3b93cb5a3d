//! Progress as the engine reports it: rows counted as a write produces them, and the bars of
//! long copies and loops, through a [`View`] that whoever shows progress provides (the shell,
//! on a terminal). The engine itself draws nothing and knows nothing of terminals.

use std::sync::Arc;

/// Rows the running statement has produced for its write so far (CTAS, INSERT ... SELECT,
/// MERGE): what the shell's progress line shows for statements without a bar of their own.
static ROWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Start counting a new statement's rows.
pub fn reset_rows() {
    ROWS.store(0, std::sync::atomic::Ordering::Relaxed);
}

/// Rows counted since the statement began.
pub fn rows_so_far() -> u64 {
    ROWS.load(std::sync::atomic::Ordering::Relaxed)
}

/// `df` with its rows counted for the progress line as they pass.
pub fn counted_rows(
    df: datafusion::dataframe::DataFrame,
) -> datafusion::error::Result<datafusion::dataframe::DataFrame> {
    super::functions::counted(df, |n| {
        ROWS.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    })
}

/// What shows progress: given to the session by the shell (see `shell::progress`).
pub trait View: Send + Sync {
    /// A bar for a copy of `total` rows (0: not known up front).
    fn copy(&self, label: &str, total: u64) -> Arc<dyn Bar>;
    /// A view of `total` loop iterations.
    fn iterations(&self, total: u64) -> Arc<dyn Iterations>;
}

/// A bar counting up to a total.
pub trait Bar: Send + Sync {
    fn inc(&self, n: u64);
    fn position(&self) -> u64;
    /// Done: remove it.
    fn finish(&self);
}

/// Running loop iterations.
pub trait Iterations: Send + Sync {
    /// A line for a running iteration, removed and counted done when dropped.
    fn running(&self, label: String) -> Box<dyn Send + Sync>;
    fn finish(&self);
}

/// Rows copied so far by one COPY INCREMENTAL.
pub struct CopyProgress(Option<Arc<dyn Bar>>);

impl CopyProgress {
    /// A bar for `total` rows, when progress is shown.
    pub fn start(view: Option<&Arc<dyn View>>, label: &str, total: u64) -> Self {
        CopyProgress(view.map(|v| v.copy(label, total)))
    }

    /// Rows counted so far.
    pub fn position(&self) -> u64 {
        self.0.as_ref().map(|b| b.position()).unwrap_or(0)
    }

    /// `n` more rows copied.
    pub fn inc(&self, n: u64) {
        if let Some(b) = &self.0 {
            b.inc(n);
        }
    }

    /// A counter for another task to add rows to (the bar stays with this value).
    pub fn counter(&self) -> impl Fn(u64) + Send + Sync + 'static {
        let bar = self.0.clone();
        move |n| {
            if let Some(b) = &bar {
                b.inc(n);
            }
        }
    }
}

impl Drop for CopyProgress {
    fn drop(&mut self) {
        if let Some(b) = &self.0 {
            b.finish();
        }
    }
}

/// A line per running loop iteration plus an overall count.
#[derive(Clone)]
pub struct LoopProgress(Option<Arc<dyn Iterations>>);

impl LoopProgress {
    /// Progress over `total` iterations, when progress is shown.
    pub fn start(view: Option<&Arc<dyn View>>, total: u64) -> Self {
        LoopProgress(view.map(|v| v.iterations(total)))
    }

    /// A line for a running iteration; dropping the guard removes it and counts it done.
    pub fn iteration(&self, label: String) -> Option<Box<dyn Send + Sync>> {
        self.0.as_ref().map(|i| i.running(label))
    }

    /// Clear the display.
    pub fn finish(&self) {
        if let Some(i) = &self.0 {
            i.finish();
        }
    }
}
