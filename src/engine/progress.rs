//! Progress on a terminal: a bar for copies that run longer than a second, and a live view of
//! running loop iterations. Nothing is drawn when output is piped (indicatif hides itself when
//! stderr is not a terminal, and the session only asks for progress on a terminal).

use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Shown only once the work has run this long.
const DELAY: Duration = Duration::from_secs(1);

fn reveal_later(bar: &ProgressBar) {
    let bar = bar.clone();
    tokio::spawn(async move {
        tokio::time::sleep(DELAY).await;
        if !bar.is_finished() {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            bar.enable_steady_tick(Duration::from_millis(120));
        }
    });
}

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

/// A count as people read it on a progress line: `950`, `12.5k`, `8.6M`, `1.2G`.
pub fn compact(n: f64) -> String {
    let n = if n.is_finite() { n.max(0.0) } else { 0.0 };
    for (unit, scale) in [("G", 1e9), ("M", 1e6), ("k", 1e3)] {
        // 999,950 is `1.0M`, not `1000.0k`.
        if n >= scale * 0.99995 {
            return format!("{:.1}{unit}", n / scale);
        }
    }
    format!("{n:.0}")
}

/// Rows copied so far by one COPY INCREMENTAL.
pub struct CopyProgress(Option<ProgressBar>);

impl CopyProgress {
    /// A bar for `total` rows, drawn after a second if `enabled`.
    pub fn start(enabled: bool, label: &str, total: u64) -> Self {
        if !enabled {
            return CopyProgress(None);
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {msg} [{bar:30}] {human_pos}/{human_len} rows ({rate} rows/s, {elapsed})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .with_key("rate", |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&compact(state.per_sec()));
            })
            .progress_chars("=> "),
        );
        bar.set_message(label.to_string());
        reveal_later(&bar);
        CopyProgress(Some(bar))
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
            b.finish_and_clear();
        }
    }
}

/// A line per running loop iteration plus an overall bar.
#[derive(Clone)]
pub struct LoopProgress(Option<(MultiProgress, ProgressBar)>);

impl LoopProgress {
    /// Progress over `total` iterations, drawn after a second if `enabled`.
    pub fn start(enabled: bool, total: u64) -> Self {
        if !enabled {
            return LoopProgress(None);
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::hidden());
        let overall = multi.add(ProgressBar::new(total));
        overall.set_style(
            ProgressStyle::with_template(
                "{spinner} {human_pos}/{human_len} iterations done [{bar:30}] {elapsed}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        let (m, o) = (multi.clone(), overall.clone());
        tokio::spawn(async move {
            tokio::time::sleep(DELAY).await;
            if !o.is_finished() {
                m.set_draw_target(ProgressDrawTarget::stderr());
                o.enable_steady_tick(Duration::from_millis(120));
            }
        });
        LoopProgress(Some((multi, overall)))
    }

    /// A line for a running iteration; dropping the guard removes it and counts it done.
    pub fn iteration(&self, label: String) -> IterationLine {
        match &self.0 {
            None => IterationLine(None),
            Some((multi, overall)) => {
                let line = multi.insert_before(overall, ProgressBar::new_spinner());
                line.set_style(
                    ProgressStyle::with_template("  {spinner} {msg} ({elapsed})")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                line.set_message(label);
                line.enable_steady_tick(Duration::from_millis(120));
                IterationLine(Some((multi.clone(), line, overall.clone())))
            }
        }
    }

    /// Clear the display.
    pub fn finish(&self) {
        if let Some((_, overall)) = &self.0 {
            overall.finish_and_clear();
        }
    }
}

/// One running iteration's line.
pub struct IterationLine(Option<(MultiProgress, ProgressBar, ProgressBar)>);

impl Drop for IterationLine {
    fn drop(&mut self) {
        if let Some((multi, line, overall)) = &self.0 {
            line.finish_and_clear();
            multi.remove(line);
            overall.inc(1);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rates_read_as_people_write_them() {
        assert_eq!(super::compact(8_613_213.883_2), "8.6M");
        assert_eq!(super::compact(950.4), "950");
        assert_eq!(super::compact(12_500.0), "12.5k");
        assert_eq!(super::compact(f64::NAN), "0");
        assert_eq!(super::compact(999_950.0), "1.0M");
    }
}
