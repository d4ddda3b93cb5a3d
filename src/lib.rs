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

/// Statement splitting and parsing with no session (what the shell's prompt uses to know
/// whether a statement is complete).
pub mod sql {
    pub use crate::parser::{IdentifierResolver, Statement, SyntaxOnly, parse, splitter};
}
