//! Running one statement and printing its rows as they come: to stdout or the `\o` file (the
//! spinner cleared on the first write), stopped by Ctrl-C, a closed pipe being no failure.

use super::print::{PrintOptions, Printer, print_batches};
use crate::engine::{Reply, Session};
use crate::error::Error;
use std::io::Write;
use std::time::Instant;

/// Why a statement printed no (whole) result.
pub(super) enum Failure {
    /// The statement failed (or was cancelled).
    Statement(Error),
    /// Its result could not be written.
    Output(std::io::Error),
}

/// Where results go: stdout, or the file of `\o FILE`. Buffered; flushed per batch. The
/// statement's progress line goes away before the first byte of its result is written.
pub(super) struct Sink<'a>(
    std::io::BufWriter<Box<dyn Write + 'a>>,
    Option<indicatif::ProgressBar>,
);

impl<'a> Sink<'a> {
    pub(super) fn new(
        file: &'a mut Option<std::fs::File>,
        bar: Option<indicatif::ProgressBar>,
    ) -> Self {
        let target: Box<dyn Write + 'a> = match file {
            Some(f) => Box::new(f),
            None => Box::new(std::io::stdout()),
        };
        Sink(std::io::BufWriter::with_capacity(1 << 16, target), bar)
    }
}

impl Write for Sink<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(bar) = self.1.take() {
            bar.finish_and_clear();
        }
        self.0.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Run one statement and print its result as it comes: a query's batches are written as the
/// engine produces them, so memory stays flat in the row count. A closed pipe (`| head`)
/// ends the printing quietly and stops the query.
pub(super) async fn run_and_print(
    session: &mut Session,
    output: &mut Option<std::fs::File>,
    sql: &str,
    print: &PrintOptions,
    started: Instant,
    spinner: Option<indicatif::ProgressBar>,
    check: &mut Check,
) -> Result<(), Failure> {
    use futures::StreamExt;
    let mut reply = crate::statements::run_streaming(session, sql)
        .await
        .map_err(Failure::Statement)?;
    // A query's first rows (or its end) are in hand before the check, as a statement's whole
    // result is: what it asked the store by then spares the check its request.
    let mut first = None;
    if *check == Check::Due
        && let Reply::Rows(rows) = &mut reply
    {
        match rows.stream.next().await {
            Some(Err(e)) => return Err(Failure::Statement(e.into())),
            item => first = Some(item),
        }
    }
    // Nothing is printed before the warehouse is known to answer: a statement may have taken
    // a store that does not answer for an empty warehouse (`DROP SCHEMA IF EXISTS` on a
    // missing bucket would print `OK`, then the error).
    check.ask(session).await.map_err(Failure::Statement)?;
    let mut sink = Sink::new(output, spinner.clone());
    let printed = match reply {
        Reply::Done(out) => print_batches(
            &mut sink,
            &out.schema,
            &out.batches,
            print,
            Some(started.elapsed()),
        ),
        Reply::Rows(mut rows) => {
            let mut printer = Printer::new(&mut sink, rows.schema.clone(), print);
            loop {
                let next = match first.take() {
                    Some(item) => item,
                    None => rows.stream.next().await,
                };
                match next {
                    None => break printer.finish(Some(started.elapsed())),
                    Some(Err(e)) => return Err(Failure::Statement(e.into())),
                    Some(Ok(batch)) => {
                        if let Err(e) = printer.batch(&batch) {
                            break Err(e);
                        }
                        if let Some(bar) = &spinner {
                            bar.set_position(printer.rows() as u64);
                        }
                    }
                }
            }
        }
    };
    reader_gone_is_fine(printed.and_then(|()| sink.flush())).map_err(Failure::Output)
}

/// Whether the warehouse is to be checked before a statement's result is printed (see
/// [`Session::check_warehouse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    /// Known to answer already.
    No,
    /// To be checked once the statement has run (a query: once its first rows are in hand),
    /// before its result is printed.
    Due,
    /// Checked for this statement: the store answers.
    Passed,
    /// Checked for this statement: it does not (the statement's error says so).
    Failed,
}

impl Check {
    /// Ask whether the warehouse answers when that is due, and note the answer: never twice
    /// for one statement.
    pub(super) async fn ask(&mut self, session: &Session) -> crate::error::Result<()> {
        if *self != Check::Due {
            return Ok(());
        }
        let answers = session.check_warehouse().await;
        *self = if answers.is_ok() {
            Check::Passed
        } else {
            Check::Failed
        };
        answers
    }
}

/// A closed pipe is no failure: `| head` is an ordinary reader.
pub(super) fn reader_gone_is_fine(printed: std::io::Result<()>) -> std::io::Result<()> {
    match printed {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Completes on Ctrl-C or SIGTERM.
pub(super) async fn interrupted() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
