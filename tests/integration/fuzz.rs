//! A property-test harness (stable toolchain) for the statement splitter and tidemark's
//! parser: seeded from `sql/` and the tests, it mutates and recombines inputs and checks that
//! nothing panics or hangs. `TIDEMARK_FUZZ_ITERS=1000000 cargo test --release fuzz` runs a
//! long campaign; `TIDEMARK_FUZZ_SEED` replays one.

use std::time::{Duration, Instant};

use tidemark::sql::{self as parser, SyntaxOnly, splitter};

use crate::common::Rng;

const FRAGMENTS: &[&str] = &[
    "SELECT ",
    "FROM ",
    "WHERE ",
    " ; ",
    ";",
    "'",
    "''",
    "\"",
    "`",
    "--",
    "\n",
    "/*",
    "*/",
    "(",
    ")",
    ",",
    ".",
    "IDENTIFIER(",
    "catalog || '.' || schema",
    "COPY INCREMENTAL ",
    " INTO ",
    " WATERMARK ",
    " SINCE ",
    " CONTROL TABLE ",
    " MERGE ON (",
    " LOOKBACK ",
    " DRY RUN",
    "USING CONTROL TABLE ",
    " CONCURRENCY ",
    "FOR EACH r IN (",
    ") DO ",
    " END FOR",
    "FOR ",
    " AS ",
    " DO ",
    "BEGIN ",
    " END",
    "CASE WHEN ",
    " THEN ",
    " ELSE ",
    "DECLARE ",
    "OR REPLACE ",
    "VARIABLE ",
    "SET VAR ",
    " = ",
    "DEFAULT ",
    "DROP TEMPORARY VARIABLE ",
    "\\d ",
    "\\format csv\n",
    "\\i x\n",
    "x",
    "t.c",
    "1",
    "-1",
    "1e309",
    "'2024-01-01'",
    "é",
    "🦀",
    "\u{0}",
    "\r\n",
    "\\",
    "$$",
    "IF EXISTS ",
    "USE ",
    "SHOW TABLES ",
    "DESCRIBE HISTORY ",
    "VACUUM ",
    "RETAIN 1 HOURS",
];

fn seeds() -> Vec<String> {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![];
    for dir in ["sql/tutorial", "tests/slt"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
            for e in entries.flatten() {
                if let Ok(text) = std::fs::read_to_string(e.path()) {
                    out.push(text);
                }
            }
        }
    }
    assert!(!out.is_empty(), "fuzz seeds found");
    out
}

fn mutate(rng: &mut Rng, seeds: &[String]) -> String {
    let mut s: String = match rng.below(3) {
        0 => seeds[rng.below(seeds.len())].clone(),
        _ => (0..rng.below(40))
            .map(|_| FRAGMENTS[rng.below(FRAGMENTS.len())])
            .collect(),
    };
    for _ in 0..rng.below(8) {
        let chars: Vec<char> = s.chars().collect();
        let at = rng.below(chars.len() + 1);
        let (a, b) = chars.split_at(at.min(chars.len()));
        let mut a: String = a.iter().collect();
        let b: String = b.iter().collect();
        match rng.below(3) {
            0 => a.push_str(FRAGMENTS[rng.below(FRAGMENTS.len())]),
            1 => {
                a.pop();
            }
            _ => a.push_str(
                &seeds[rng.below(seeds.len())]
                    .chars()
                    .take(rng.below(200))
                    .collect::<String>(),
            ),
        }
        s = a + &b;
    }
    s
}

/// Split and parse every piece of `input`; must return (never panic) quickly.
fn exercise(input: &str) {
    let split = splitter::split(input);
    let _ = splitter::is_complete(input);
    for p in split
        .pieces
        .iter()
        .map(|l| &l.piece)
        .chain(std::iter::once(&splitter::Piece::Sql(split.rest.clone())))
    {
        if let splitter::Piece::Sql(sql) = p {
            let _ = parser::parse(sql, &SyntaxOnly);
        } else if let splitter::Piece::Meta(m) = p {
            let _ = m.parse::<tidemark::shell::Command>();
        }
    }
}

#[test]
fn splitter_and_parser_never_panic_or_hang() {
    let iters: usize = crate::common::env_number("TIDEMARK_FUZZ_ITERS").unwrap_or(3000);
    let seed: u64 = crate::common::env_number("TIDEMARK_FUZZ_SEED").unwrap_or(0x71DE_3A4C);
    let seeds = seeds();
    let mut rng = Rng(seed);
    for i in 0..iters {
        let case_seed = rng.next();
        let input = mutate(&mut Rng(case_seed), &seeds);
        let started = Instant::now();
        let result = std::panic::catch_unwind(|| exercise(&input));
        assert!(
            result.is_ok(),
            "panic on case {i} (replay with TIDEMARK_FUZZ_SEED={seed}, case seed {case_seed}): {input:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "case {i} took {:?} (seed {seed}): {input:?}",
            started.elapsed()
        );
    }
}

#[test]
fn deeply_nested_and_huge_inputs_are_errors_not_crashes() {
    let nested = format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000));
    let e = parser::parse(&nested, &SyntaxOnly).unwrap_err();
    assert!(e.to_string().contains("nested too deeply"), "{e}");
    let long_name = format!("SELECT * FROM {}", "a".repeat(100_000));
    assert!(
        parser::parse(&long_name, &SyntaxOnly).is_ok(),
        "a long name parses; the warehouse rejects it later"
    );
    let big = format!("SELECT '{}'", "x".repeat(20 << 20));
    assert_eq!(splitter::split(&format!("{big};")).pieces.len(), 1);
}
