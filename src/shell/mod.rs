//! The shell: one input reader for the REPL, `-f` files, `-c` commands and stdin. It splits
//! input into statements and meta-commands, runs them, prints results, and reports errors as
//! `origin:line:col: message`. It knows nothing of Delta.

pub(crate) mod command;
mod help;
mod helper;
pub(crate) mod print;
mod progress;
mod report;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

mod stream;
use stream::*;

pub use command::Command;
pub use print::Format;
use print::{PrintOptions, print_batches};
pub use progress::Terminal;

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
    /// `\o FILE`: results go to this file instead of stdout.
    output: Option<std::fs::File>,
    /// The last statement run, for `\e`.
    last_sql: Option<String>,
    /// Whether the warehouse has been checked (see [`Session::check_warehouse`]).
    pub warehouse_checked: bool,
}

impl Shell {
    /// A shell over a session.
    pub fn new(session: Session, print: PrintOptions, continue_on_error: bool) -> Self {
        let current = Arc::new(Mutex::new((
            session.current_catalog().to_string(),
            session.current_schema().to_string(),
        )));
        Shell {
            session,
            print,
            continue_on_error,
            failed: false,
            current,
            include_depth: 0,
            output: None,
            last_sql: None,
            warehouse_checked: false,
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
        let sql = match piece {
            Piece::Meta(line) => return Box::pin(self.meta(line, pos, origin)).await,
            Piece::Sql(sql) => sql,
        };
        self.last_sql = Some(sql.clone());
        let started = Instant::now();
        let print = self.print_now();
        crate::engine::progress::reset_rows();
        let spinner = self.spinner(sql);
        // A cancelled statement leaves the variables as they were (a script's block-local
        // ones would otherwise stay, hiding the session's).
        let variables = self.session.vars().clone();
        let mut check = if self.warehouse_checked {
            Check::No
        } else {
            Check::Due
        };
        let outcome = {
            let run = run_and_print(
                &mut self.session,
                &mut self.output,
                sql,
                &print,
                started,
                spinner.clone(),
                &mut check,
            );
            tokio::select! {
                r = run => r,
                _ = interrupted() => Err(Failure::Statement(Error::Cancelled)),
            }
        };
        if let Some(bar) = spinner {
            bar.finish_and_clear();
        }
        if matches!(outcome, Err(Failure::Statement(Error::Cancelled))) {
            *self.session.vars_mut() = variables;
        }
        self.sync_current();
        // Until the warehouse's store has answered, a statement's outcome may be what it made
        // of a store that does not answer: that is the cause to name. (A statement that ran
        // was checked before its result was printed.)
        let outcome = match outcome {
            // A cancelled statement stops the run as it is (no request that could hang).
            Err(Failure::Statement(Error::Cancelled)) => outcome,
            Err(Failure::Statement(_)) => match check.ask(&self.session).await {
                Ok(()) => outcome,
                Err(e) => Err(Failure::Statement(e)),
            },
            other => other,
        };
        // Asked again after the next statement while the store has not answered (a run that
        // goes on after errors); it is not asked twice for one statement.
        if check == Check::Passed {
            self.warehouse_checked = true;
        }
        match outcome {
            Ok(()) => Ok(()),
            Err(Failure::Output(e)) => {
                // The statement ran, but its result did not reach the output: a failure.
                eprintln!(
                    "{origin}:{}:{}: error: cannot write the result: {e}",
                    pos.line, pos.col
                );
                self.failed = true;
                Err(Stop::Failed)
            }
            Err(Failure::Statement(Error::Cancelled)) => {
                // Cancelled copies record themselves in the history; let that finish.
                crate::statements::finish_cancelled(std::time::Duration::from_secs(10)).await;
                eprintln!("{origin}:{}:{}: cancelled", pos.line, pos.col);
                self.failed = true;
                Err(Stop::Interrupted)
            }
            Err(Failure::Statement(e)) => {
                if let Error::Iterations { output, .. } = &e
                    && let Err(e) = self.show(output, None)
                {
                    eprintln!("error: cannot write the result: {e}");
                }
                self.report(&e, pos, origin, Some(sql));
                self.failed = true;
                Err(Stop::Failed)
            }
        }
    }

    /// A line on stderr that shows, once a statement has run for a second on a terminal,
    /// what runs, for how long and (for a query) how many rows it has produced. Copies and
    /// loops draw their own progress.
    fn spinner(&self, sql: &str) -> Option<indicatif::ProgressBar> {
        // Drawn only where progress is shown (a terminal).
        self.session.settings().progress.as_ref()?;
        let first: String = sql.split_whitespace().next().unwrap_or("").to_uppercase();
        if matches!(first.as_str(), "COPY" | "FOR") {
            return None;
        }
        let mut label: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
        if label.chars().count() > 50 {
            label = label.chars().take(49).collect::<String>() + "…";
        }
        let bar =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::hidden());
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} {rows}({elapsed})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner())
                .with_key(
                    "rows",
                    |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                        // Rows printed (a query) or produced for a write (CTAS, INSERT, MERGE).
                        let rows = state.pos().max(crate::engine::progress::rows_so_far());
                        if rows > 0 {
                            let _ = write!(w, "{} rows ", progress::compact(rows as f64));
                        }
                    },
                ),
        );
        bar.set_message(label);
        let shown = bar.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            if !shown.is_finished() {
                shown.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                shown.enable_steady_tick(std::time::Duration::from_millis(120));
            }
        });
        Some(bar)
    }

    /// The print options for the next result, with the terminal's width as it is now.
    fn print_now(&self) -> PrintOptions {
        let mut print = self.print.clone();
        print.zone =
            crate::engine::zone::session_zone(self.session.ctx().copied_config().options());
        if self.output.is_some() && print.terminal_cap {
            // The 40-row cap is for a screen; a file gets every row.
            print.max_rows = None;
        }
        print.width = match (&self.output, print.width) {
            (None, Some(_)) => console::Term::stdout()
                .size_checked()
                .map(|(_, cols)| cols as usize),
            _ => None,
        };
        print
    }

    fn sync_current(&self) {
        if let Ok(mut g) = self.current.lock() {
            *g = (
                self.session.current_catalog().to_string(),
                self.session.current_schema().to_string(),
            );
        }
    }

    /// Print an error as `origin:line:col: message` on stderr, then (when the error points
    /// into the statement) the line with a caret under the spot, as psql does.
    fn report(&self, e: &Error, pos: Pos, origin: &str, sql: Option<&str>) {
        eprint!(
            "{}",
            report::describe(
                e,
                pos,
                origin,
                sql,
                self.session
                    .warehouse()
                    .root()
                    .local()
                    .unwrap_or(std::path::Path::new("")),
            )
        );
    }

    /// Print a finished result; an error is one the result could not be written with.
    fn show(&mut self, out: &Output, elapsed: Option<std::time::Duration>) -> std::io::Result<()> {
        let print = self.print_now();
        let mut sink = Sink::new(&mut self.output, None);
        let printed = print_batches(&mut sink, &out.schema, &out.batches, &print, elapsed)
            .and_then(|()| sink.flush());
        reader_gone_is_fine(printed)
    }

    /// Run a meta-command.
    async fn meta(&mut self, line: &str, pos: Pos, origin: &str) -> Result<(), Stop> {
        let fail = |shell: &mut Self, message: String| {
            eprintln!("{origin}:{}:{}: error: {message}", pos.line, pos.col);
            shell.failed = true;
            Err(Stop::Failed)
        };
        let cmd: Command = match line.parse() {
            Ok(c) => c,
            Err(e) => return fail(self, e),
        };
        let sql = match cmd {
            Command::Quit => return Err(Stop::Quit),
            Command::Help(None) => {
                print!("{}", help::overview());
                return Ok(());
            }
            Command::Help(Some(name)) => {
                return match help::statement(&name) {
                    Ok(text) => {
                        print!("{text}");
                        Ok(())
                    }
                    Err(e) => fail(self, e),
                };
            }
            Command::Output(None) => {
                self.output = None;
                return Ok(());
            }
            Command::Output(Some(file)) => {
                let path = resolve_include(origin, &file);
                return match std::fs::File::create(&path) {
                    Ok(f) => {
                        self.output = Some(f);
                        Ok(())
                    }
                    Err(e) => fail(
                        self,
                        format!("cannot write results to {}: {e}", path.display()),
                    ),
                };
            }
            Command::Edit => {
                return match self.edit() {
                    Ok(Some(text)) => Box::pin(self.run_text(&text, "<edit>")).await,
                    Ok(None) => Ok(()),
                    Err(e) => fail(self, e),
                };
            }
            c @ (Command::Expanded(_)
            | Command::NullDisplay(_)
            | Command::Format(_)
            | Command::Timing(_)
            | Command::MaxRows(_)) => {
                self.set_display(c);
                return Ok(());
            }
            Command::Variables => {
                self.print_variables();
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
                    return fail(self, "\\i nested too deeply".into());
                }
                let path = resolve_include(origin, &file);
                return match read_script(&path) {
                    Ok(text) => {
                        self.include_depth += 1;
                        let r = Box::pin(self.run_text(&text, &path.display().to_string())).await;
                        self.include_depth -= 1;
                        r
                    }
                    Err(e) => fail(self, e),
                };
            }
        };
        // The listing commands are SQL statements; run them as such.
        self.run_piece(&Piece::Sql(sql), pos, origin).await
    }

    /// `\x`, `\pset null`, `\format`, `\timing`, `\maxrows`: how results are shown.
    fn set_display(&mut self, cmd: Command) {
        match cmd {
            Command::Expanded(set) => {
                self.print.expanded = set.unwrap_or(match self.print.expanded {
                    print::Expanded::Off => print::Expanded::On,
                    _ => print::Expanded::Off,
                });
                if !self.print.quiet {
                    let state = match self.print.expanded {
                        print::Expanded::Off => "off",
                        print::Expanded::On => "on",
                        print::Expanded::Auto => "used automatically",
                    };
                    eprintln!("Expanded display is {state}.");
                }
            }
            Command::NullDisplay(text) => {
                if !self.print.quiet {
                    eprintln!("Null display is \"{text}\".");
                }
                self.print.null = text;
            }
            Command::Format(None) => {
                println!("{}", self.print.format);
            }
            Command::Format(Some(f)) => {
                self.print.format = f;
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
            }
            Command::MaxRows(n) => {
                self.print.max_rows = if n == 0 { None } else { Some(n) };
                self.print.terminal_cap = false;
            }
            _ => {}
        }
    }

    /// The session variables with their types and values.
    fn print_variables(&self) {
        let mut lines = vec![];
        for (name, v) in self.session.vars().iter() {
            lines.push(format!(
                "{name} {} = {}",
                crate::engine::types::type_name(&v.data_type),
                crate::engine::types::display_exact(&v.value)
            ));
        }
        for l in lines {
            println!("{l}");
        }
    }

    /// `\e`: the last statement edited in `$VISUAL`/`$EDITOR` (else `vi`); `None` when the
    /// edit left nothing.
    fn edit(&mut self) -> Result<Option<String>, String> {
        if !std::io::stdin().is_terminal() {
            return Err("\\e needs a terminal".into());
        }
        // A new file of our own (never one another user made first), readable by us only.
        let path = std::env::temp_dir().join(format!(
            "tidemark-edit-{}.sql",
            uuid::Uuid::new_v4().simple()
        ));
        let last = self.last_sql.clone().unwrap_or_default();
        let text = if last.trim().is_empty() {
            String::new()
        } else {
            format!("{};\n", last.trim_end())
        };
        let mut open = std::fs::OpenOptions::new();
        open.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
        open.open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let editor = std::env::var("VISUAL")
            .or_else(|_| std::env::var("EDITOR"))
            .unwrap_or_else(|_| "vi".into());
        let mut words = editor.split_whitespace();
        let program = words.next().unwrap_or("vi");
        let status = std::process::Command::new(program)
            .args(words)
            .arg(&path)
            .status()
            .map_err(|e| format!("cannot start the editor '{editor}': {e} (set $EDITOR)"));
        let edited = std::fs::read_to_string(&path);
        let _ = std::fs::remove_file(&path);
        match status? {
            s if s.success() => {}
            s => {
                return Err(format!(
                    "the editor '{editor}' failed ({s}); nothing was run"
                ));
            }
        }
        let edited = edited.map_err(|e| format!("cannot read the edited statement: {e}"))?;
        Ok(Some(edited).filter(|t| !t.trim().is_empty()))
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
            self.session.warehouse().clone(),
            self.session.catalogs().clone(),
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
                self.session.warehouse().root()
            );
        }
        // psql's way: each line is read with a prompt, an unfinished statement gets the
        // continuation prompt, and the statement runs once complete (pasted and typed-ahead
        // lines are read in turn, so every statement in them runs, in order).
        let mut pending = String::new();
        loop {
            let first = format!(
                "{}.{}> ",
                self.session.current_catalog(),
                self.session.current_schema()
            );
            let prompt = if pending.is_empty() {
                first
            } else {
                format!("{:>width$}", "-> ", width = first.chars().count())
            };
            match editor.readline(&prompt) {
                Ok(line) => {
                    if pending.is_empty() && line.trim().is_empty() {
                        continue;
                    }
                    if pending.is_empty()
                        && matches!(
                            line.trim()
                                .trim_end_matches(';')
                                .trim()
                                .to_lowercase()
                                .as_str(),
                            "exit" | "quit"
                        )
                    {
                        break;
                    }
                    pending.push_str(&line);
                    pending.push('\n');
                    let split = splitter::split(&pending);
                    let only_comments = split.pieces.is_empty()
                        && split
                            .rest
                            .lines()
                            .all(|l| l.trim().is_empty() || l.trim_start().starts_with("--"));
                    if only_comments {
                        pending.clear();
                        continue;
                    }
                    if split.pieces.is_empty() {
                        continue;
                    }
                    // The complete statements run now; an unfinished one after them waits.
                    // (`rest` is the unfinished text, trimmed: it ends the trimmed input.)
                    let input = if split.rest.trim().is_empty() {
                        std::mem::take(&mut pending)
                    } else {
                        let body = pending.trim_end();
                        if !body.ends_with(split.rest.as_str()) {
                            // Not where it was expected: run nothing until it is complete.
                            continue;
                        }
                        let cut = body.len() - split.rest.len();
                        let done = pending[..cut].to_string();
                        pending = pending[cut..].to_string();
                        done
                    };
                    let _ = editor.add_history_entry(without_secrets(input.trim_end()).as_ref());
                    if let Some(h) = &history {
                        let _ = editor.append_history(h);
                    }
                    self.failed = false;
                    match self.run_text(&input, "<input>").await {
                        Err(Stop::Quit) => break,
                        Err(Stop::Interrupted) => {
                            eprintln!(
                                "(statement cancelled: commits it had finished, such as FOR EACH iterations or copies that completed, stay; a copy stopped before its commit removed the files it had written, and one stopped during it is repaired by its next run)"
                            )
                        }
                        _ => {}
                    }
                }
                // Ctrl-C at the prompt drops the unfinished statement, as in psql.
                Err(rustyline::error::ReadlineError::Interrupted) => pending.clear(),
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

/// `line` as the history keeps it: a literal value given to a credential option (`password
/// 'x'`, refused by CREATE CONNECTION, which points to `secret()`) is kept as `'***'`.
fn without_secrets(line: &str) -> std::borrow::Cow<'_, str> {
    static CREDENTIAL: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?i)\b(password|passwd|pwd|token|secret_key|access_key|client_secret)(\s*=?\s*)'(?:[^']|'')*'",
        )
        .expect("a valid pattern")
    });
    CREDENTIAL.replace_all(line, "$1$2'***'")
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
        terminal_cap: max_rows.is_none() && tty,
        // The same on a terminal and in scripts (psql's habit): `--quiet` turns them off.
        quiet,
        timing,
        null: "NULL".into(),
        expanded: print::Expanded::Off,
        // Measured again before each result (see `Shell::print_now`).
        width: tty.then_some(80),
        zone: None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn history_keeps_no_literal_credential() {
        let line = "CREATE CONNECTION c TYPE postgresql OPTIONS (host 'h', user 'u', password 'it''s s3cret')";
        assert_eq!(
            super::without_secrets(line),
            "CREATE CONNECTION c TYPE postgresql OPTIONS (host 'h', user 'u', password '***')"
        );
        let line = "CREATE CONNECTION c TYPE postgresql OPTIONS (password secret('s', 'k'))";
        assert_eq!(super::without_secrets(line), line);
    }
}
