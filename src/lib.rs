//! tidemark: an SQL shell on Apache DataFusion over a Delta Lake warehouse, with session
//! variables, `IDENTIFIER()`, and exactly-once `COPY INCREMENTAL` / `FOR EACH`.
//!
//! The library is what the `tidemark` binary and the integration tests use: a [`Session`]
//! over a warehouse, [`run`] for SQL text, the [`shell`], and [`sql`] (splitting and parsing
//! without a session). Everything else is the crate's own.

mod catalog;
mod engine;
mod error;
mod output;
mod parser;
pub mod shell;
mod statements;

pub use catalog::external::is_store_scheme;
pub use engine::progress::View as ProgressView;
pub use engine::{Output, Session, Settings};
pub use error::{Error, Result};
pub use statements::run;

/// Tests hold a statement at fail point `name`: set to `return(ms)`, for that many
/// milliseconds; set to `return(until:PATH)`, until the file PATH exists (at most ten minutes),
/// so that a test can change the world while the statement waits and then let it go on (the
/// file `PATH.held` tells it the statement is waiting). An
/// asynchronous wait, during which Ctrl-C and SIGTERM are seen.
#[cfg(feature = "failpoints")]
pub(crate) async fn hold_at(name: &str) {
    let hold = (|| -> Option<String> {
        fail::fail_point!(name, |arg: Option<String>| arg);
        None
    })();
    let Some(hold) = hold else { return };
    if let Some(path) = hold.strip_prefix("until:") {
        let _ = std::fs::write(format!("{path}.held"), "");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
        while !std::path::Path::new(path).exists() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    } else if let Ok(ms) = hold.parse() {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}

/// Without fail points, nothing.
#[cfg(not(feature = "failpoints"))]
pub(crate) async fn hold_at(_: &str) {}

/// 64-bit FNV-1a: a stable hash, the same on every machine and in every release (shards of a
/// job, the names of kept log directories, the stagger of tables' checkpoints).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Statement splitting and parsing with no session (what the shell's prompt uses to know
/// whether a statement is complete).
pub mod sql {
    pub use crate::parser::{IdentifierResolver, Statement, SyntaxOnly, parse, splitter};
}
