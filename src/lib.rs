//! tidemark: an SQL shell on Apache DataFusion over a Delta Lake warehouse, with session
//! variables, `IDENTIFIER()`, and exactly-once `COPY INCREMENTAL` / `FOR EACH`.

pub mod catalog;
pub mod engine;
pub mod error;
pub mod output;
pub mod parser;
pub mod shell;
pub mod statements;

pub use engine::{Output, Session, Settings};
pub use error::{Error, Result};
