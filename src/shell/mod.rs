//! The shell: one input reader for the REPL, `-f` files, `-c` commands and stdin. It splits
//! input into statements and meta-commands, runs them, prints results, and reports errors as
//! `origin:line:col: message`. It knows nothing of Delta.

pub mod command;
pub mod helper;
pub mod print;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use command::{Command, HELP};
use print::{Format, PrintOptions, print_batches};

use crate::engine::{Output, Session};
use crate::error::Error;
use crate::parser::splitter::{self, Piece, Pos};

/// Why a run of statements stopped early.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    /// A statement failed and errors stop the script.
    Failed,
    /// `\q` was given.
    Quit,
    /// Ctrl-C / SIGTERM.
    Interrupted,
}

/// The interactive and batch front end over a session.
pub struct Shell {
    pub session: Session,
    pub print: PrintOptions,
    /// Keep going after a failed statement (scripts stop by default).
    pub continue_on_error: bool,
    /// Whether any statement failed.
    pub failed: bool,
    /// Current catalog/schema shared with the completer.
    current: Arc<Mutex<(String, String)>>,
    include_depth: usize,
}

impl Shell {
    /// A shell over a session.
    pub fn new(session: Session, print: PrintOptions, continue_on_error: bool) -> Self {
        let current = Arc::new(Mutex::new((
            session.catalog.clone(),
            session.schema.clone(),
        )));
        Shell {
            session,
            print,
            continue_on_error,
            failed: false,
            current,
            include_depth: 0,
        }
    }

    /// Run a whole text (a file, a `-c` argument or stdin). `origin` names it in errors.
    pub async fn run_text(&mut self, text: &str, origin: &str) -> Result<(), Stop> {
        let split = splitter::split(text);
        let mut pieces = split.pieces;
        if !split.rest.trim().is_empty() {
            pieces.push(splitter::Located {
                piece: Piece::Sql(split.rest.clone()),
                pos: split.rest_pos,
            });
        }
        for located in pieces {
            match self.run_piece(&located.piece, located.pos, origin).await {
                Ok(()) => {}
                Err(Stop::Failed) if self.continue_on_error => {}
                Err(stop) => return Err(stop),
            }
        }
        Ok(())
    }

    /// Run one statement or meta-command, printing its result or its error.
    async fn run_piece(&mut self, piece: &Piece, pos: Pos, origin: &str) -> Result<(), Stop> {
        let result = match piece {
            Piece::Meta(line) => return Box::pin(self.meta(line, pos, origin)).await,
            Piece::Sql(sql) => {
                let started = Instant::now();
                let result = self.run_cancellable(sql).await;
                result.map(|out| (out, started.elapsed()))
            }
        };
        match result {
            Ok((out, elapsed)) => {
                self.sync_current();
                if let Err(e) = self.show(&out, Some(elapsed)) {
                    // The statement ran, but its result did not reach the output: a failure.
                    eprintln!(
                        "{origin}:{}:{}: error: cannot write the result: {e}",
                        pos.line, pos.col
                    );
                    self.failed = true;
                    return Err(Stop::Failed);
                }
                Ok(())
            }
            Err(Error::Cancelled) => {
                eprintln!("{origin}:{}:{}: cancelled", pos.line, pos.col);
                self.failed = true;
                Err(Stop::Interrupted)
            }
            Err(e) => {
                self.sync_current();
                if let Error::Iterations { output, .. } = &e
                    && let Err(e) = self.show(output, None)
                {
                    eprintln!("error: cannot write the result: {e}");
                }
                self.report(&e, pos, origin);
                self.failed = true;
                Err(Stop::Failed)
            }
        }
    }

    /// Run a statement, cancelled by Ctrl-C or SIGTERM (the statement's future is dropped:
    /// Delta commits are atomic, so nothing is half-written).
    async fn run_cancellable(&mut self, sql: &str) -> Result<Output, Error> {
        let fut = self.session.run_sql(sql);
        tokio::select! {
            r = fut => r,
            _ = interrupted() => Err(Error::Cancelled),
        }
    }

    fn sync_current(&self) {
        if let Ok(mut g) = self.current.lock() {
            *g = (self.session.catalog.clone(), self.session.schema.clone());
        }
    }

    /// Print an error as `origin:line:col: message` on stderr.
    fn report(&self, e: &Error, pos: Pos, origin: &str) {
        let (line, col) = match e.position() {
            Some((l, c)) if l <= 1 => (pos.line, pos.col + c.saturating_sub(1)),
            Some((l, c)) => (pos.line + l - 1, c),
            None => (pos.line, pos.col),
        };
        eprintln!("{origin}:{line}:{col}: error: {e}");
    }

    /// Print a result; an error is one the result could not be written with (a closed pipe
    /// is not one: `| head` is an ordinary reader).
    fn show(&self, out: &Output, elapsed: Option<std::time::Duration>) -> std::io::Result<()> {
        let mut stdout = std::io::stdout().lock();
        let printed = print_batches(&mut stdout, &out.schema, &out.batches, &self.print, elapsed)
            .and_then(|()| stdout.flush());
        match printed {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            other => other,
        }
    }

    /// Run a meta-command.
    async fn meta(&mut self, line: &str, pos: Pos, origin: &str) -> Result<(), Stop> {
        let cmd: Command = match line.parse() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{origin}:{}:{}: error: {e}", pos.line, pos.col);
                self.failed = true;
                return Err(Stop::Failed);
            }
        };
        let sql = match cmd {
            Command::Quit => return Err(Stop::Quit),
            Command::Help => {
                println!("Meta-commands:");
                for (c, what) in HELP {
                    println!("  {c:<18} {what}");
                }
                println!("\nSQL statements end with ';'. See README.md for the SQL tidemark runs.");
                return Ok(());
            }
            Command::Describe(None) => "SHOW TABLES".to_string(),
            Command::Describe(Some(name)) => format!("DESCRIBE TABLE {name}"),
            Command::ListTables(None) => "SHOW TABLES".to_string(),
            Command::ListTables(Some(s)) => format!("SHOW TABLES IN {s}"),
            Command::ListSchemas(None) => "SHOW SCHEMAS".to_string(),
            Command::ListSchemas(Some(c)) => format!("SHOW SCHEMAS IN {c}"),
            Command::ListCatalogs => "SHOW CATALOGS".to_string(),
            Command::Include(file) => {
                if self.include_depth > 16 {
                    eprintln!(
                        "{origin}:{}:{}: error: \\i nested too deeply",
                        pos.line, pos.col
                    );
                    self.failed = true;
                    return Err(Stop::Failed);
                }
                let path = resolve_include(origin, &file);
                return match read_script(&path) {
                    Ok(text) => {
                        self.include_depth += 1;
                        let r = Box::pin(self.run_text(&text, &path.display().to_string())).await;
                        self.include_depth -= 1;
                        r
                    }
                    Err(e) => {
                        eprintln!("{origin}:{}:{}: error: {e}", pos.line, pos.col);
                        self.failed = true;
                        Err(Stop::Failed)
                    }
                };
            }
            Command::Format(None) => {
                println!("{}", self.print.format);
                return Ok(());
            }
            Command::Format(Some(f)) => {
                self.print.format = f;
                return Ok(());
            }
            Command::Timing(v) => {
                self.print.timing = v.unwrap_or(!self.print.timing);
                if self.print.timing {
                    // Asking for timings asks for the line that carries them.
                    self.print.quiet = false;
                }
                if !self.print.quiet {
                    eprintln!(
                        "Timing is {}.",
                        if self.print.timing { "on" } else { "off" }
                    );
                }
                return Ok(());
            }
            Command::MaxRows(n) => {
                self.print.max_rows = if n == 0 { None } else { Some(n) };
                return Ok(());
            }
            Command::Variables => {
                let mut lines = vec![];
                for (name, v) in self.session.vars.iter() {
                    lines.push(format!(
                        "{name} {} = {}",
                        crate::engine::types::type_name(&v.data_type),
                        crate::engine::types::display_exact(&v.value)
                    ));
                }
                for l in lines {
                    println!("{l}");
                }
                return Ok(());
            }
        };
        // The listing commands are SQL statements; run them as such.
        self.run_piece(&Piece::Sql(sql), pos, origin).await
    }

    /// The interactive loop.
    pub async fn repl(&mut self) {
        let config = rustyline::Config::builder()
            .auto_add_history(false)
            .completion_type(rustyline::CompletionType::List)
            .build();
        let mut editor: rustyline::Editor<helper::ShellHelper, rustyline::history::FileHistory> =
            match rustyline::Editor::with_config(config) {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("error: cannot start the line editor: {e}");
                    self.failed = true;
                    return;
                }
            };
        editor.set_helper(Some(helper::ShellHelper::new(
            self.session.warehouse.clone(),
            self.current.clone(),
        )));
        let history = history_path();
        if let Some(h) = &history {
            let _ = editor.load_history(h);
        }
        if !self.print.quiet {
            println!(
                "tidemark {} — warehouse {}\nType \\? for help, \\q or Ctrl-D to quit. Statements end with ';'.",
                env!("CARGO_PKG_VERSION"),
                self.session.warehouse.root().display()
            );
        }
        loop {
            let prompt = format!("{}.{}> ", self.session.catalog, self.session.schema);
            match editor.readline(&prompt) {
                Ok(input) => {
                    if input.trim().is_empty() {
                        continue;
                    }
                    let _ = editor.add_history_entry(input.as_str());
                    if let Some(h) = &history {
                        let _ = editor.append_history(h);
                    }
                    self.failed = false;
                    match self.run_text(&input, "<input>").await {
                        Err(Stop::Quit) => break,
                        Err(Stop::Interrupted) => {
                            eprintln!(
                                "(statement cancelled: the commit it was making was not made; commits it had finished, such as FOR EACH iterations or copies that completed, stay)"
                            )
                        }
                        _ => {}
                    }
                }
                Err(rustyline::error::ReadlineError::Interrupted) => continue,
                Err(rustyline::error::ReadlineError::Eof) => break,
                Err(e) => {
                    eprintln!("error: {e}");
                    break;
                }
            }
        }
        self.failed = false;
    }
}

/// Completes on Ctrl-C or SIGTERM.
async fn interrupted() {
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

/// `\i FILE` paths are relative to the including file.
fn resolve_include(origin: &str, file: &str) -> std::path::PathBuf {
    let p = Path::new(file);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    match Path::new(origin).parent() {
        Some(dir) if !origin.starts_with('<') && Path::new(origin).exists() => dir.join(p),
        _ => p.to_path_buf(),
    }
}

/// Read a script, with a clear error for missing files and non-UTF-8 bytes.
pub fn read_script(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    decode(bytes, &path.display().to_string())
}

/// UTF-8 text, or an error naming the first bad byte's line and column.
pub fn decode(bytes: Vec<u8>, origin: &str) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let prefix = String::from_utf8_lossy(&e.as_bytes()[..valid]).to_string();
        let line = prefix.matches('\n').count() + 1;
        let col = prefix.rsplit('\n').next().map(|l| l.chars().count() + 1).unwrap_or(1);
        format!("{origin}:{line}:{col}: error: input is not valid UTF-8 (byte offset {valid}); save the script as UTF-8")
    })
}

/// `~/.tidemark_history`.
fn history_path() -> Option<std::path::PathBuf> {
    dirs::home_dir().map(|h| h.join(".tidemark_history"))
}

/// Default print options for the environment: tables with a row cap on a terminal.
pub fn default_print(
    format: Option<Format>,
    max_rows: Option<usize>,
    quiet: bool,
    timing: bool,
) -> PrintOptions {
    let tty = std::io::stdout().is_terminal();
    PrintOptions {
        format: format.unwrap_or(Format::Table),
        max_rows: match max_rows {
            Some(0) => None,
            Some(n) => Some(n),
            None if tty => Some(40),
            None => None,
        },
        quiet: quiet || (!tty && !timing),
        timing,
    }
}
