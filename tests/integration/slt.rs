//! Runs every `tests/slt/*.slt` file (sqllogictest) against an in-process session over a
//! fresh warehouse.

use std::path::PathBuf;

use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use sqllogictest::{DBOutput, DefaultColumnType};
use tidemark::{Session, Settings};

/// How a value is shown (Arrow's display when None).
pub(crate) type Display = Option<fn(&dyn datafusion::arrow::array::Array, usize) -> String>;

/// A session as a sqllogictest database.
pub(crate) struct Db {
    session: Session,
    _dir: tempfile::TempDir,
    display: Display,
}

impl Db {
    /// A session over a fresh warehouse of its own.
    pub(crate) fn fresh(display: Display) -> Db {
        let dir = tempfile::tempdir().expect("temp dir");
        let session = Session::new(dir.path().join("wh"), Settings::default());
        Db {
            session,
            _dir: dir,
            display,
        }
    }
}

#[async_trait::async_trait]
impl sqllogictest::AsyncDB for Db {
    type Error = tidemark::Error;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, tidemark::Error> {
        let out = tidemark::run(&mut self.session, sql).await?;
        if out.schema.fields().is_empty() {
            return Ok(DBOutput::StatementComplete(0));
        }
        let opts = FormatOptions::default().with_null("NULL");
        let mut rows = vec![];
        if let Some(display) = self.display {
            for batch in &out.batches {
                for r in 0..batch.num_rows() {
                    rows.push(
                        batch
                            .columns()
                            .iter()
                            .map(|c| match display(c.as_ref(), r) {
                                s if s.is_empty() => "(empty)".to_string(),
                                s => s,
                            })
                            .collect(),
                    );
                }
            }
            return Ok(DBOutput::Rows {
                types: vec![DefaultColumnType::Any; out.schema.fields().len()],
                rows,
            });
        }
        for batch in &out.batches {
            let formatters: Vec<ArrayFormatter> = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts))
                .collect::<Result<_, _>>()?;
            for r in 0..batch.num_rows() {
                rows.push(
                    formatters
                        .iter()
                        .map(|f| {
                            let s = f.value(r).to_string();
                            if s.is_empty() {
                                "(empty)".to_string()
                            } else {
                                s
                            }
                        })
                        .collect(),
                );
            }
        }
        Ok(DBOutput::Rows {
            types: vec![DefaultColumnType::Any; out.schema.fields().len()],
            rows,
        })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "tidemark"
    }

    async fn sleep(dur: std::time::Duration) {
        tokio::time::sleep(dur).await;
    }
}

fn slt_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/slt exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        // TIDEMARK_SLT=name runs only the files whose name holds it (while working on one).
        .filter(|p| match std::env::var("TIDEMARK_SLT") {
            Ok(only) => p.to_string_lossy().contains(&only),
            Err(_) => true,
        })
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictest_files() {
    let files = slt_files();
    assert!(!files.is_empty(), "no .slt files found");
    let mut failures = vec![];
    for file in files {
        let mut runner = sqllogictest::Runner::new(|| async { Ok(Db::fresh(None)) });
        runner.with_column_validator(sqllogictest::default_column_validator);
        if let Err(e) = runner.run_file_async(&file).await {
            failures.push(format!("{}:\n{e}", file.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "sqllogictest failures:\n{}",
        failures.join("\n\n")
    );
}
