//! The `tidemark` binary: arguments, the order of `-c`/`-f` inputs, and exit codes.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};
use tidemark::shell::{self, Format, Shell, Stop};
use tidemark::{Session, Settings};

/// An SQL shell over a Delta Lake warehouse, with exactly-once incremental copies.
#[derive(Debug, Parser)]
#[command(name = "tidemark", version, about, long_about = None)]
struct Args {
    /// Warehouse directory (<catalog>/<schema>/<table>/ Delta tables).
    #[arg(env = "TIDEMARK_WAREHOUSE", default_value = "./warehouse")]
    warehouse: PathBuf,

    /// Run SQL (repeatable; runs in the order given, with -f).
    #[arg(short = 'c', long = "command", value_name = "SQL")]
    commands: Vec<String>,

    /// Run a SQL script (repeatable; runs in the order given, with -c).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    files: Vec<PathBuf>,

    /// Declare the session variable NAME, a STRING holding VALUE, before the first statement
    /// (repeatable): scripts read it as `NAME`, `session.NAME` or the parameter `:NAME`.
    #[arg(short = 'v', long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,

    /// Output format.
    #[arg(long, value_enum)]
    format: Option<Format>,

    /// Cap table output at N rows (0 = no cap; default 40 on a terminal).
    #[arg(long, value_name = "N")]
    max_rows: Option<usize>,

    /// Print only results and errors (no banner, row counts or OK lines).
    #[arg(short, long)]
    quiet: bool,

    /// Print how long each statement took.
    #[arg(long)]
    timing: bool,

    /// Keep running a script after a failed statement (exit code is still 1).
    #[arg(long)]
    continue_on_error: bool,

    /// Never hard-link source files in whole-file copies; always copy bytes.
    #[arg(long)]
    no_hard_links: bool,

    /// Never copy source files whole: decode and rewrite every copied row.
    #[arg(long)]
    no_whole_file_copies: bool,

    /// Write decoded copies with plain and dictionary encodings only (no delta-encoded
    /// integers), for Parquet readers older than Spark 3.3's.
    #[arg(long)]
    plain_encodings: bool,
}

/// Inputs in command-line order.
enum Input {
    Command(usize, String),
    File(PathBuf),
}

fn ordered_inputs(matches: &ArgMatches, args: &Args) -> Vec<Input> {
    let mut items: Vec<(usize, Input)> = vec![];
    if let Some(idx) = matches.indices_of("commands") {
        for (n, (i, c)) in idx.zip(args.commands.iter()).enumerate() {
            items.push((i, Input::Command(n + 1, c.clone())));
        }
    }
    if let Some(idx) = matches.indices_of("files") {
        for (i, f) in idx.zip(args.files.iter()) {
            items.push((i, Input::File(f.clone())));
        }
    }
    items.sort_by_key(|(i, _)| *i);
    items.into_iter().map(|(_, x)| x).collect()
}

/// No transparent huge pages for this process (and what it starts): every Delta commit read
/// reserves a JSON decoder of a few MiB, and backed by huge pages each reservation after a
/// purge faulted in and zeroed a fresh 2 MiB page (a 200-table job peaked at 3.6x the memory,
/// `docs/benchmarks.md`). jemalloc does not ask for them by default; this also covers hosts
/// whose kernel gives them unasked (`transparent_hugepage=always`).
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_THP_DISABLE takes integer arguments and touches no memory of
    // ours; a kernel without it returns an error, which changes nothing.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// jemalloc, for every allocation of the process: glibc's malloc spent a third of a
/// many-table job's CPU time in its own bookkeeping, and mimalloc's fast path stalled more
/// and more on cold memory as a job went on (a 10,000-table job took 10.6 times a
/// 1,000-table one with it, 9.4 times with jemalloc: `docs/benchmarks.md`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    no_huge_pages();
    #[cfg(feature = "failpoints")]
    let _scenario = fail::FailScenario::setup();
    let matches = Args::command().get_matches();
    let args = match Args::from_arg_matches(&matches) {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(matches, args));
    // Exit without tearing the runtime down: every statement has finished and committed, and
    // joining the idle worker threads and freeing the caches would add milliseconds to every
    // short run.
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    std::process::exit(code.into())
}

/// `--var NAME=VALUE`: the session variable NAME, a STRING holding VALUE.
fn declare(session: &mut Session, var: &str) -> Result<(), String> {
    let Some((name, value)) = var.split_once('=') else {
        return Err("expected NAME=VALUE".into());
    };
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "'{name}' is not a variable name (letters, digits and _, not starting with a digit)"
        ));
    }
    session.declare_string(name, value);
    Ok(())
}

/// The warehouse the argument names: an object-store URL, or a directory. A URL tidemark does not serve
/// is refused (`gs://bucket/wh` would otherwise be a local directory named `gs:`), and so is a
/// path that exists but is not a directory.
fn warehouse_dir(arg: &std::path::Path) -> Result<Where, String> {
    let text = arg.to_string_lossy();
    let path = match text.split_once("://") {
        Some((scheme, _)) if scheme.eq_ignore_ascii_case("file") => url::Url::parse(&text)
            .ok()
            .and_then(|u| u.to_file_path().ok())
            .ok_or_else(|| {
                format!("warehouse '{text}' is not a local file URL: write file:///absolute/path")
            })?,
        Some((scheme, _)) if tidemark::is_store_scheme(scheme) => {
            return Ok(Where::Store(text.to_string()));
        }
        Some((scheme, _))
            if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            return Err(format!(
                "warehouse {scheme}://...: {scheme}:// warehouses are not supported; tidemark serves a local directory (its path, or file:///path) or a prefix on an object store (s3://bucket/path, az://container/path, abfss://container@account.dfs.core.windows.net/path, gs://bucket/path)"
            ));
        }
        _ => arg.to_path_buf(),
    };
    if path.exists() && !path.is_dir() {
        return Err(format!(
            "warehouse '{}' is not a directory: give a directory (it is created on the first write)",
            path.display()
        ));
    }
    if path.is_dir()
        && let Err(e) = std::fs::read_dir(&path)
    {
        return Err(format!(
            "warehouse '{}' cannot be read ({e}): give a directory this user may read",
            path.display()
        ));
    }
    Ok(Where::Local(path))
}

/// Where the warehouse is.
enum Where {
    Local(PathBuf),
    /// An object store URL (`s3://bucket/prefix`).
    Store(String),
}

async fn run(matches: ArgMatches, args: Args) -> u8 {
    let interactive_out = std::io::stdout().is_terminal();
    let settings = Settings {
        whole_files: !args.no_whole_file_copies,
        hard_links: !args.no_hard_links,
        delta_encoding: !args.plain_encodings,
        progress: (interactive_out && !args.quiet).then(|| {
            std::sync::Arc::new(tidemark::shell::Terminal)
                as std::sync::Arc<dyn tidemark::ProgressView>
        }),
        ..Settings::default()
    };
    let warehouse = match warehouse_dir(&args.warehouse) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let session = match warehouse {
        Where::Local(path) => Session::new(path, settings),
        Where::Store(url) => match Session::on_store(&url, settings) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        },
    };
    let print = shell::default_print(args.format, args.max_rows, args.quiet, args.timing);
    let mut sh = Shell::new(session, print, args.continue_on_error);
    for var in &args.vars {
        if let Err(e) = declare(&mut sh.session, var) {
            eprintln!("error: --var {var}: {e}");
            return 1;
        }
    }
    let inputs = ordered_inputs(&matches, &args);
    if inputs.is_empty() && std::io::stdin().is_terminal() {
        // An interactive session learns at once that its warehouse does not answer.
        if let Err(e) = sh.session.check_warehouse().await {
            eprintln!("error: {e}");
            return 1;
        }
        sh.warehouse_checked = true;
    }
    let outcome = if !inputs.is_empty() {
        let mut outcome = Ok(());
        for input in inputs {
            outcome = match input {
                Input::Command(n, sql) => sh.run_text(&sql, &format!("<command {n}>")).await,
                Input::File(path) => match shell::read_script(&path) {
                    Ok(text) => sh.run_text(&text, &path.display().to_string()).await,
                    Err(e) => {
                        eprintln!("error: {e}");
                        sh.failed = true;
                        Err(Stop::Failed)
                    }
                },
            };
            if outcome.is_err() && !(outcome == Err(Stop::Failed) && args.continue_on_error) {
                break;
            }
        }
        outcome
    } else if !std::io::stdin().is_terminal() {
        let mut bytes = vec![];
        match std::io::stdin().read_to_end(&mut bytes) {
            Ok(_) => match shell::decode(bytes, "<stdin>") {
                Ok(text) => sh.run_text(&text, "<stdin>").await,
                Err(e) => {
                    eprintln!("{e}");
                    sh.failed = true;
                    Err(Stop::Failed)
                }
            },
            Err(e) => {
                eprintln!("error: cannot read stdin: {e}");
                sh.failed = true;
                Err(Stop::Failed)
            }
        }
    } else {
        sh.repl().await;
        Ok(())
    };
    match outcome {
        Err(Stop::Interrupted) => 130,
        _ if sh.failed => 1,
        _ => 0,
    }
}
