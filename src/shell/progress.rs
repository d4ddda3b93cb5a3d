//! Progress drawn on the terminal (stderr): the engine's [`View`] as indicatif bars, shown
//! only once the work has run a second. Nothing is drawn when output is piped (the shell
//! gives the session a view only on a terminal).

use std::sync::Arc;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::engine::progress::{Bar, Iterations, View};

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

/// The terminal's view of progress.
pub struct Terminal;

impl View for Terminal {
    fn copy(&self, label: &str, total: u64) -> Arc<dyn Bar> {
        // A total of 0 is not known up front (files to load, a database read once): count up.
        let (length, template) = match total {
            0 => (
                None,
                "{spinner} {msg} {human_pos} rows ({rate} rows/s, {elapsed})",
            ),
            n => (
                Some(n),
                "{spinner} {msg} [{bar:30}] {human_pos}/{human_len} rows ({rate} rows/s, {elapsed})",
            ),
        };
        let bar = ProgressBar::with_draw_target(length, ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template(template)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .with_key(
                    "rate",
                    |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = w.write_str(&compact(state.per_sec()));
                    },
                )
                .progress_chars("=> "),
        );
        bar.set_message(label.to_string());
        reveal_later(&bar);
        Arc::new(CopyBar(bar))
    }

    fn iterations(&self, total: u64) -> Arc<dyn Iterations> {
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
        Arc::new(LoopBars { multi, overall })
    }
}

struct CopyBar(ProgressBar);

impl Bar for CopyBar {
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }

    fn position(&self) -> u64 {
        self.0.position()
    }

    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

struct LoopBars {
    multi: MultiProgress,
    overall: ProgressBar,
}

impl Iterations for LoopBars {
    fn running(&self, label: String) -> Box<dyn Send + Sync> {
        let line = self
            .multi
            .insert_before(&self.overall, ProgressBar::new_spinner());
        line.set_style(
            ProgressStyle::with_template("  {spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        line.set_message(label);
        line.enable_steady_tick(Duration::from_millis(120));
        Box::new(IterationLine {
            multi: self.multi.clone(),
            line,
            overall: self.overall.clone(),
        })
    }

    fn finish(&self) {
        self.overall.finish_and_clear();
    }
}

/// One running iteration's line.
struct IterationLine {
    multi: MultiProgress,
    line: ProgressBar,
    overall: ProgressBar,
}

impl Drop for IterationLine {
    fn drop(&mut self) {
        self.line.finish_and_clear();
        self.multi.remove(&self.line);
        self.overall.inc(1);
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
