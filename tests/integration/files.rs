//! Files as sources: `COPY INTO` loads each file once, ever (rewritten files, killed runs,
//! racing processes), Python's `deltalake` reads what it wrote, and `read_files` reads the
//! Parquet files Spark wrote as Delta readers do.

use std::path::Path;
use std::process::Command;

use crate::common::{ok, run, warehouse};

/// `n` CSV files of `rows` rows each in `dir`, ids numbered across them.
fn csv_files(dir: &Path, first: usize, n: usize, rows: usize) {
    std::fs::create_dir_all(dir).unwrap();
    for f in first..first + n {
        let mut text = String::from("id,file,v\n");
        for r in 0..rows {
            text.push_str(&format!("{},{f},{}\n", f * rows + r, r % 7));
        }
        std::fs::write(dir.join(format!("f{f:03}.csv")), text).unwrap();
    }
}

fn load(dir: &Path) -> String {
    format!(
        "COPY INTO t FROM '{}' FILEFORMAT = CSV FORMAT_OPTIONS ('header' = 'true')",
        dir.display()
    )
}

/// `count(*), count(DISTINCT id)` of t.
fn counts(wh: &Path) -> String {
    ok(wh, "SELECT count(*), count(DISTINCT id) FROM t")
        .lines()
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_file_is_loaded_once_even_when_rewritten_and_again_with_force() {
    let (d, wh) = warehouse();
    let src = d.path().join("in");
    csv_files(&src, 0, 3, 10);
    ok(&wh, "CREATE TABLE t (id BIGINT, file INT, v INT)");
    assert_eq!(
        ok(&wh, &load(&src)),
        "num_affected_rows,num_inserted_rows,num_skipped_corrupt_files\n30,30,0\n"
    );
    // Rewritten in place (new rows) and a new file: only the new file is loaded.
    std::fs::write(src.join("f000.csv"), "id,file,v\n1000,0,1\n").unwrap();
    csv_files(&src, 3, 1, 10);
    assert!(ok(&wh, &load(&src)).ends_with("10,10,0\n"));
    assert_eq!(counts(&wh), "40,40");
    assert!(ok(&wh, &load(&src)).ends_with("0,0,0\n"));
    // force: every file found, as it is now.
    let forced = format!("{} COPY_OPTIONS ('force' = 'true')", load(&src));
    assert!(ok(&wh, &forced).ends_with("31,31,0\n"));
    assert_eq!(counts(&wh), "71,41");
}

#[test]
fn a_killed_load_leaves_nothing_and_the_next_run_loads_each_file_once() {
    let (d, wh) = warehouse();
    let src = d.path().join("in");
    csv_files(&src, 0, 5, 100);
    ok(&wh, "CREATE TABLE t (id BIGINT, file INT, v INT)");
    // Killed with its files written and its commit not made.
    let out = Command::new(assert_cmd::cargo::cargo_bin("tidemark"))
        .arg(&wh)
        .args(["-c", &load(&src)])
        .env("FAILPOINTS", "copy_into::before_commit=return")
        .output()
        .unwrap();
    assert!(!out.status.success(), "the fail point aborts the process");
    assert_eq!(counts(&wh), "0,0");
    assert!(ok(&wh, &load(&src)).ends_with("500,500,0\n"));
    assert!(ok(&wh, &load(&src)).ends_with("0,0,0\n"));
    assert_eq!(counts(&wh), "500,500");
}

#[test]
fn racing_loads_of_one_directory_load_each_file_once() {
    let (d, wh) = warehouse();
    let src = d.path().join("in");
    csv_files(&src, 0, 12, 50);
    ok(&wh, "CREATE TABLE t (id BIGINT, file INT, v INT)");
    // Four processes load the same files at once; two hold their written files a moment
    // before committing, so that commits meet.
    let racing: Vec<_> = (0..4)
        .map(|i| {
            Command::new(assert_cmd::cargo::cargo_bin("tidemark"))
                .arg(&wh)
                .args(["--format", "csv", "-c", &load(&src)])
                .env(
                    "FAILPOINTS",
                    if i % 2 == 0 {
                        "copy_into::before_commit=sleep(400)"
                    } else {
                        ""
                    },
                )
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut loaded = 0;
    for child in racing {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "a racing load failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let row = stdout.lines().nth(1).unwrap_or_default();
        loaded += row
            .split(',')
            .next()
            .unwrap_or("0")
            .parse::<usize>()
            .unwrap();
    }
    assert_eq!(
        loaded, 600,
        "the racing loads reported 600 rows between them"
    );
    assert_eq!(counts(&wh), "600,600");
}

#[test]
fn python_reads_a_table_loaded_by_copy_into() {
    let (d, wh) = warehouse();
    let src = d.path().join("in");
    csv_files(&src, 0, 2, 3);
    ok(&wh, "CREATE TABLE t (id BIGINT, file INT, v INT)");
    ok(&wh, &load(&src));
    let out = crate::interop::run_py(&format!(
        "from deltalake import DeltaTable\n\
         t = DeltaTable({p:?})\n\
         print(sorted(r['id'] for r in t.to_pyarrow_table().to_pylist()))\n\
         print(t.history(1)[0]['operation'])\n",
        p = wh.join("main/default/t").display().to_string()
    ));
    assert_eq!(out.trim(), "[0, 1, 2, 3, 4, 5]\nWRITE");
}

/// Tables Spark wrote (one commit, no partitions): the Parquet files under the table read by
/// `read_files`, and loaded by COPY INTO, hold the rows the Delta table holds.
#[test]
fn read_files_and_copy_into_read_spark_parquet_as_delta_readers_do() {
    let tables = [
        "data-reader-primitives",
        "data-reader-array-primitives",
        "data-reader-nested-struct",
        "data-reader-date-types-utc",
        "data-reader-date-types-Pst",
        "decimal-various-scale-precision",
    ];
    let mut failures = vec![];
    for name in tables {
        let tmp = tempfile::tempdir().unwrap();
        let dir = crate::golden::unpack(name, tmp.path()).join("delta");
        let wh = tmp.path().join("wh");
        let table = wh.join("main/default/src");
        std::fs::create_dir_all(&table).unwrap();
        copy_dir(&dir, &table);
        let files = format!("read_files('{}', format => 'parquet')", dir.display());
        let checks = [
            format!("SELECT count(*) FROM (SELECT * FROM src EXCEPT ALL SELECT * FROM {files})"),
            format!("SELECT count(*) FROM (SELECT * FROM {files} EXCEPT ALL SELECT * FROM src)"),
        ];
        let mut stmts = vec![
            "CREATE TABLE loaded AS SELECT * FROM src WHERE false".to_string(),
            format!(
                "COPY INTO loaded FROM '{}' FILEFORMAT = PARQUET",
                dir.display()
            ),
            "SELECT count(*) FROM (SELECT * FROM src EXCEPT ALL SELECT * FROM loaded)".to_string(),
            "SELECT count(*) FROM (SELECT * FROM loaded EXCEPT ALL SELECT * FROM src)".to_string(),
        ];
        stmts.splice(0..0, checks);
        for sql in &stmts {
            let out = run(&wh, sql);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let fine = out.status.success()
                && (!sql.starts_with("SELECT") || stdout.lines().nth(1) == Some("0"));
            if !fine {
                failures.push(format!(
                    "{name}: {sql}\n{stdout}{}",
                    String::from_utf8_lossy(&out.stderr)
                ));
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn partition_directories_are_refused_unless_read_without_their_column() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = crate::golden::unpack("basic-decimal-table", tmp.path()).join("delta");
    let wh = tmp.path().join("wh");
    let files = |opts: &str| {
        format!(
            "SELECT count(*) FROM read_files('{}', format => 'parquet'{opts})",
            dir.display()
        )
    };
    let out = run(&wh, &files(""));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is a partition directory (part="),
        "{err}"
    );
    let n = ok(&wh, &files(", partitionColumns => ''"));
    assert_ne!(n.lines().nth(1), Some("0"), "{n}");
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn a_large_csv_file_is_inferred_from_every_record_across_its_chunks() {
    let (d, wh) = warehouse();
    // 5 MB: more than the first chunk and the 4 MiB chunks after it. A quoted value with a
    // line break, a DOUBLE only in the last record, a column empty but in the middle.
    let mut text = String::from("id,v,note,sometimes\n");
    for i in 0..400_000 {
        let sometimes = if i == 200_000 { "true" } else { "" };
        text.push_str(&format!("{i},{},\"a\nb\",{sometimes}\n", i % 1000));
    }
    text.push_str("400000,1.5,last,\n");
    let dir = d.path().join("big");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("big.csv"), text).unwrap();
    let out = ok(
        &wh,
        &format!(
            "SELECT typeof(id), typeof(v), typeof(sometimes), count(*), sum(v), count(sometimes) FROM read_files('{}', format => 'csv', header => true) GROUP BY ALL",
            dir.display()
        ),
    );
    assert!(
        out.contains("bigint,double,boolean,400001,199800001.5,1"),
        "{out}"
    );
}

#[test]
fn a_csv_file_with_its_own_quote_character_and_line_breaks_in_values_is_inferred_compressed_or_not()
{
    let (d, wh) = warehouse();
    // 2.7 MB quoted with ': every value's line break and its " are letters inside the quotes,
    // so no chunk may end at them. A DOUBLE only in the last record. The same file gzipped
    // is decompressed in small pieces and cut the same way.
    let mut text = String::from("id,v,note\n");
    for i in 0..150_000 {
        text.push_str(&format!("{i},{},'say \"a\nb'\n", i % 1000));
    }
    text.push_str("150000,1.5,'last'\n");
    let dir = d.path().join("quoted");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("q.csv"), &text).unwrap();
    std::fs::write(dir.join("copy.csv"), &text).unwrap();
    let gzip = std::process::Command::new("gzip")
        .arg(dir.join("copy.csv"))
        .status()
        .unwrap();
    assert!(gzip.success());
    for file in ["q.csv", "copy.csv.gz"] {
        let out = ok(
            &wh,
            &format!(
                "SELECT typeof(id), typeof(v), count(*), sum(v), count_if(note = 'say \"a' || chr(10) || 'b') FROM read_files('{}', format => 'csv', header => true, quote => '''') GROUP BY ALL",
                dir.join(file).display()
            ),
        );
        assert!(
            out.contains("bigint,double,150001,74925001.5,150000"),
            "{file}: {out}"
        );
    }
}

#[test]
fn the_files_a_checkpoint_covers_are_known_once_the_commits_before_it_are_gone() {
    let (d, wh) = warehouse();
    let src = d.path().join("in");
    csv_files(&src, 0, 20, 5);
    ok(&wh, "CREATE TABLE t (id BIGINT, file INT, v INT)");
    // One file a commit: versions 1 to 20, the table checkpointed once or twice (every 10
    // commits from version 10 on, shifted by a hash of its place).
    for f in 0..20 {
        let one = format!(
            "COPY INTO t FROM '{}' FILEFORMAT = CSV FILES = ('f{f:03}.csv') FORMAT_OPTIONS ('header' = 'true')",
            src.display()
        );
        assert!(ok(&wh, &one).ends_with("5,5,0\n"));
    }
    let log = wh.join("main/default/t/_delta_log");
    let checkpoint = *crate::common::checkpoint_versions(&log)
        .last()
        .expect("the table was checkpointed");
    // As the log's clean-up leaves it after the retention: the commits before the checkpoint
    // gone, so the loads they recorded are known from the checkpoint alone.
    for v in 0..checkpoint {
        let commit = log.join(format!("{v:020}.json"));
        std::fs::remove_file(&commit).unwrap();
        let _ = std::fs::remove_file(log.join(format!("{v:020}.crc")));
    }
    assert_eq!(counts(&wh), "100,100");
    assert!(ok(&wh, &load(&src)).ends_with("0,0,0\n"));
    csv_files(&src, 20, 1, 5);
    assert!(ok(&wh, &load(&src)).ends_with("5,5,0\n"));
    assert_eq!(counts(&wh), "105,105");
}
