//! Hostile SQL: one table of attempts to break out of names, values and inputs. Each must end
//! with a clear error (exit 1, the message below) and leave every user table byte for byte as
//! it was. Only `system/` may change: failed copies are recorded in the run history.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{ok, tidemark, warehouse};

/// How an attempt reaches tidemark.
enum Input {
    /// `-c` arguments, in order.
    Commands(Vec<String>),
    /// A script on stdin.
    Stdin(Vec<u8>),
}

struct Attempt {
    what: &'static str,
    input: Input,
    /// A fragment of the error message.
    error: &'static str,
}

fn commands(cs: &[&str]) -> Input {
    Input::Commands(cs.iter().map(|c| c.to_string()).collect())
}

fn copy_row(target: &str) -> Input {
    commands(&[&format!(
        "COPY INCREMENTAL USING CONTROL TABLE ctl WHERE target_table = '{}'",
        target.replace('\'', "''")
    )])
}

fn attempts() -> Vec<Attempt> {
    let mut non_utf8 =
        b"INSERT INTO canary VALUES (9, 'before');\nINSERT INTO canary VALUES (3, '".to_vec();
    non_utf8.extend_from_slice(&[0xff, 0xfe, 0x80]);
    non_utf8.extend_from_slice(b"');\n");
    let mut huge = b"INSERT INTO canary VALUES (3, '".to_vec();
    huge.resize(huge.len() + (100 << 20), b'x');
    huge.extend_from_slice(b"');\n");
    let nested = format!(
        "INSERT INTO canary SELECT {}1{}, 'deep';\n",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    vec![
        Attempt {
            what: "semicolon and DROP in a control row's source_table",
            input: copy_row("t1"),
            error: "'src; DROP TABLE canary' is not a valid name",
        },
        Attempt {
            what: "quote, semicolon and comment in a control row's target_table",
            input: copy_row("t2'; DROP TABLE canary; --"),
            error: "is not a valid name",
        },
        Attempt {
            what: "SQL in a control row's watermark_column",
            input: copy_row("t3"),
            error: "watermark column 'ts; DROP TABLE canary' not found",
        },
        Attempt {
            what: "back-quotes closing early in a control row",
            input: copy_row("t4"),
            error: "not found",
        },
        Attempt {
            what: "a path out of the warehouse in a control row",
            input: copy_row("../../escape"),
            error: "empty name part",
        },
        Attempt {
            what: "a control row copying into tidemark's own history",
            input: copy_row("system.tidemark.copy_runs"),
            error: "reserved for tidemark's own tables",
        },
        Attempt {
            what: "a control row copying into the read-only samples",
            input: copy_row("samples.wanderbricks.users"),
            error: "read-only",
        },
        Attempt {
            what: "IDENTIFIER() of a variable holding a second statement",
            input: commands(&[
                "DECLARE v STRING DEFAULT 'canary; DROP TABLE canary'",
                "DROP TABLE IDENTIFIER(v)",
            ]),
            error: "is not a valid name",
        },
        Attempt {
            what: "IDENTIFIER() holding a WHERE clause and a statement",
            input: commands(&["DELETE FROM IDENTIFIER('canary WHERE 1=1; DROP TABLE canary')"]),
            error: "is not a valid name",
        },
        Attempt {
            what: "IDENTIFIER() closing its back-quotes early",
            input: commands(&["DROP TABLE IDENTIFIER('`canary`; DROP TABLE canary')"]),
            error: "not found",
        },
        Attempt {
            what: "IDENTIFIER() with an unterminated back-quote",
            input: commands(&["DROP TABLE IDENTIFIER('`canary``; DROP TABLE canary')"]),
            error: "unterminated back-quote",
        },
        Attempt {
            what: "IDENTIFIER() built by concatenation with a comment",
            input: commands(&["DROP TABLE IDENTIFIER('canary' || ' --')"]),
            error: "is not a valid name",
        },
        Attempt {
            what: "a back-quoted name with a path in it",
            input: commands(&["CREATE TABLE IDENTIFIER('`../../escape`') (id INT)"]),
            error: "invalid table name",
        },
        Attempt {
            what: "a loop row escaping IDENTIFIER()",
            input: commands(&[
                "FOR EACH r IN (SELECT 'canary; DROP TABLE canary' AS t) DO DELETE FROM IDENTIFIER(r.t); END FOR",
            ]),
            error: "is not a valid name",
        },
        Attempt {
            what: "a 300-byte table name",
            input: Input::Commands(vec![format!("CREATE TABLE {} (id INT)", "a".repeat(300))]),
            error: "names must be 1-255 bytes",
        },
        Attempt {
            what: "a 100,000-byte table name",
            input: Input::Commands(vec![format!("DELETE FROM {}", "b".repeat(100_000))]),
            error: "not found",
        },
        Attempt {
            what: "an unterminated string hiding a DROP",
            input: commands(&["DELETE FROM canary WHERE note = 'x; DROP TABLE canary"]),
            error: "Unterminated string literal",
        },
        Attempt {
            what: "an unterminated comment hiding a DROP",
            input: Input::Stdin(b"DELETE FROM canary /* ; DROP TABLE canary\n".to_vec()),
            error: "EOF while in a multi-line comment",
        },
        Attempt {
            what: "a copy of a table onto itself",
            input: commands(&["COPY INCREMENTAL canary INTO canary WATERMARK id"]),
            error: "same table",
        },
        Attempt {
            what: "non-UTF-8 bytes on stdin, after a valid INSERT",
            input: Input::Stdin(non_utf8),
            error: "not valid UTF-8",
        },
        Attempt {
            what: "a 100 MB statement",
            input: Input::Stdin(huge),
            error: "over the 16 MiB limit",
        },
        Attempt {
            what: "an expression nested 5,000 deep",
            input: Input::Stdin(nested.into_bytes()),
            error: "nested too deeply",
        },
    ]
}

/// Every file of the warehouse outside `system/`, with its size and modification time.
fn fingerprint(root: &Path) -> BTreeMap<String, (u64, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read warehouse dir") {
            let entry = entry.expect("dir entry");
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            if rel == "system" {
                continue;
            }
            let meta = entry.metadata().expect("metadata");
            if meta.is_dir() {
                stack.push(path);
            } else {
                out.insert(rel, (meta.len(), meta.modified().expect("mtime")));
            }
        }
    }
    out
}

#[test]
fn hostile_sql_is_refused_and_touches_nothing() {
    let (dir, wh) = warehouse();
    let ctl_rows = [
        ("src; DROP TABLE canary", "t1", "ts"),
        ("main.default.src", "t2'; DROP TABLE canary; --", "ts"),
        ("src", "t3", "ts; DROP TABLE canary"),
        ("`src`; DROP TABLE canary", "t4", "ts"),
        ("src", "../../escape", "ts"),
        ("src", "system.tidemark.copy_runs", "ts"),
        ("src", "samples.wanderbricks.users", "ts"),
    ];
    let values: Vec<String> = ctl_rows
        .iter()
        .map(|(s, t, w)| {
            let q = |x: &str| format!("'{}'", x.replace('\'', "''"));
            format!("({}, {}, {}, '1970-01-01')", q(s), q(t), q(w))
        })
        .collect();
    ok(
        &wh,
        &format!(
            "CREATE TABLE canary (id BIGINT, note STRING);
             INSERT INTO canary VALUES (1, 'alive'), (2, 'still here');
             CREATE TABLE src (id BIGINT, ts TIMESTAMP);
             INSERT INTO src VALUES (1, TIMESTAMP '2024-01-01 00:00:00');
             CREATE TABLE ctl (source_table STRING NOT NULL, target_table STRING NOT NULL,
                               watermark_column STRING NOT NULL, last_watermark TIMESTAMP NOT NULL);
             INSERT INTO ctl VALUES {};",
            values.join(", ")
        ),
    );
    let outside_before: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let before = fingerprint(&wh);
    let mut failures = vec![];
    for a in attempts() {
        let mut cmd = tidemark(&wh);
        cmd.args(["--format", "csv"]);
        let out = match &a.input {
            Input::Commands(cs) => {
                for c in cs {
                    cmd.args(["-c", c]);
                }
                cmd.output()
            }
            Input::Stdin(bytes) => cmd.write_stdin(bytes.clone()).output(),
        }
        .expect("run tidemark");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let short: String = stderr.chars().take(400).collect();
        if out.status.code() != Some(1) {
            failures.push(format!(
                "{}: exit {:?}, stderr {short}",
                a.what,
                out.status.code()
            ));
        } else if !stderr.contains(a.error) {
            failures.push(format!("{}: expected '{}' in: {short}", a.what, a.error));
        } else if !stderr.contains("error") {
            failures.push(format!("{}: no 'error' in: {short}", a.what));
        }
        let after = fingerprint(&wh);
        if after != before {
            let changed: Vec<_> = after
                .iter()
                .filter(|(k, v)| before.get(*k) != Some(v))
                .map(|(k, _)| k.clone())
                .chain(before.keys().filter(|k| !after.contains_key(*k)).cloned())
                .collect();
            failures.push(format!("{}: the warehouse changed: {changed:?}", a.what));
        }
    }
    let outside_after: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        outside_before, outside_after,
        "nothing is written beside the warehouse"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        ok(&wh, "SELECT id, note FROM canary ORDER BY id"),
        "id,note\n1,alive\n2,still here\n"
    );
}
