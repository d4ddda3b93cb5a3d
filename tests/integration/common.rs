//! Helpers shared by the integration tests: a temp warehouse, the binary, result checks.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;

/// The tidemark binary under test.
pub fn tidemark(warehouse: &Path) -> Command {
    let mut cmd = Command::cargo_bin("tidemark").expect("binary is built by cargo test");
    cmd.arg(warehouse)
        .env_remove("TIDEMARK_WAREHOUSE")
        .env("NO_COLOR", "1");
    cmd
}

/// Run SQL via `-c` and return the output.
pub fn run(warehouse: &Path, sql: &str) -> Output {
    tidemark(warehouse)
        .args(["--format", "csv", "-c", sql])
        .output()
        .expect("run tidemark")
}

/// Run SQL via `-c`, assert success, return stdout.
pub fn ok(warehouse: &Path, sql: &str) -> String {
    let out = run(warehouse, sql);
    assert!(
        out.status.success(),
        "tidemark -c {sql:?} failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Run several statements in one process (csv output), asserting success.
pub fn sql(wh: &Path, stmts: &[&str]) -> String {
    let mut cmd = tidemark(wh);
    cmd.args(["--format", "csv"]);
    for s in stmts {
        cmd.args(["-c", s]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{stmts:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The versions of the single-file checkpoints in the Delta log at `log`, oldest first
/// (tidemark shifts each table's checkpoints by a hash of its place: which multiples of ten
/// they fall on is the table's own).
pub fn checkpoint_versions(log: &Path) -> Vec<u64> {
    let mut versions: Vec<u64> = std::fs::read_dir(log)
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".checkpoint.parquet")?.parse().ok()
        })
        .collect();
    versions.sort_unstable();
    versions
}

/// A fresh warehouse directory.
pub fn warehouse() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("wh");
    (dir, path)
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A number from the environment (iteration counts and seeds of the randomized suites).
pub fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// A Python interpreter with the `deltalake` package, if the test environment has one.
pub fn python() -> Option<String> {
    let candidates = [
        std::env::var("TIDEMARK_PYTHON").ok(),
        Some(repo().join(".peers/bin/python").display().to_string()),
        Some("python3".to_string()),
    ];
    candidates.into_iter().flatten().find(|p| {
        std::process::Command::new(p)
            .args(["-c", "import deltalake, pyarrow"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// splitmix64: a small, seedable, reproducible random source for the randomized suites.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A table's active files, from its JSON commits in order (none of the tables below is
/// checkpointed past a removed commit), and the operations of its commits.
pub fn active_files_and_operations(table: &Path) -> (usize, Vec<String>) {
    let log = table.join("_delta_log");
    let mut commits: Vec<String> = std::fs::read_dir(&log)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.len() == 25 && n.ends_with(".json"))
        .collect();
    commits.sort();
    let mut files = std::collections::HashSet::new();
    let mut operations = vec![];
    for name in commits {
        for line in std::fs::read_to_string(log.join(name)).unwrap().lines() {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(add) = action.get("add") {
                files.insert(add["path"].as_str().unwrap().to_string());
            } else if let Some(remove) = action.get("remove") {
                assert!(files.remove(remove["path"].as_str().unwrap()));
            } else if let Some(info) = action.get("commitInfo") {
                operations.push(info["operation"].as_str().unwrap_or("").to_string());
            }
        }
    }
    (files.len(), operations)
}
