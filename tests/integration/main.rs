//! tidemark's integration tests, in one binary (every extra test target re-links DataFusion).

mod cli;
mod common;
mod copy;
mod slt;
mod tutorial;
