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

/// Tests hold a statement at fail point `name` when it is set to `return(ms)`: an asynchronous
/// wait, during which Ctrl-C and SIGTERM are seen.
#[cfg(feature = "failpoints")]
pub(crate) async fn hold_at(name: &str) {
    let hold = (|| -> Option<u64> {
        fail::fail_point!(name, |ms: Option<String>| ms.and_then(|m| m.parse().ok()));
        None
    })();
    if let Some(ms) = hold {
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
