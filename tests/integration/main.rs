//! tidemark's integration tests, in one binary (every extra test target re-links DataFusion).

mod cli;
mod clouds;
mod common;
mod compat;
mod concurrency;
mod copy;
mod ddl;
mod differential;
mod disk;
mod files;
mod for_each;
mod foreign;
mod foreign_copy;
mod fuzz;
mod golden;
mod hostile;
mod interop;
mod kill;
mod object_store;
mod readers;
mod repl;
mod servers;
mod slt;
mod trust;
mod tutorial;
