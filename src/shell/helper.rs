//! rustyline glue: multi-line input until a statement is complete, and tab completion of
//! keywords and catalog/schema/table names (read from the warehouse on Tab, never at start-up).

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Helper};

use crate::catalog::Warehouse;

/// Keywords offered by completion.
const KEYWORDS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP BY",
    "ORDER BY",
    "LIMIT",
    "INSERT INTO",
    "INSERT OVERWRITE",
    "VALUES",
    "UPDATE",
    "SET",
    "DELETE FROM",
    "MERGE INTO",
    "USING",
    "WHEN MATCHED THEN",
    "WHEN NOT MATCHED THEN",
    "CREATE TABLE",
    "CREATE OR REPLACE TABLE",
    "CREATE SCHEMA",
    "CREATE CATALOG",
    "IF NOT EXISTS",
    "DROP TABLE",
    "DROP SCHEMA",
    "ALTER TABLE",
    "ADD COLUMN",
    "SET TBLPROPERTIES",
    "DESCRIBE",
    "DESCRIBE HISTORY",
    "SHOW TABLES",
    "SHOW SCHEMAS",
    "SHOW CATALOGS",
    "USE",
    "OPTIMIZE",
    "VACUUM",
    "DECLARE",
    "VARIABLE",
    "SET VAR",
    "DROP TEMPORARY VARIABLE",
    "IDENTIFIER",
    "COPY INCREMENTAL",
    "INTO",
    "WATERMARK",
    "SINCE",
    "CONTROL TABLE",
    "MERGE ON",
    "LOOKBACK",
    "DRY RUN",
    "FOR EACH",
    "IN",
    "CONCURRENCY",
    "DO",
    "END FOR",
    "VERSION AS OF",
    "TIMESTAMP AS OF",
    "AND",
    "OR",
    "NOT",
    "NULL",
    "TRUE",
    "FALSE",
    "CAST",
    "AS",
    "JOIN",
    "ON",
    "DISTINCT",
];

/// Shared state the completer needs.
pub struct ShellHelper {
    warehouse: Arc<Warehouse>,
    /// Current catalog and schema, updated by the shell after each statement.
    pub current: Arc<Mutex<(String, String)>>,
}

impl ShellHelper {
    /// A helper over `warehouse`.
    pub fn new(warehouse: Arc<Warehouse>, current: Arc<Mutex<(String, String)>>) -> Self {
        ShellHelper { warehouse, current }
    }

    fn names(&self) -> Vec<String> {
        let (cat, sch) = self.current.lock().map(|g| g.clone()).unwrap_or_default();
        let mut out = self.warehouse.tables(&cat, &sch);
        for c in self.warehouse.catalogs() {
            out.push(c.clone());
            for s in self.warehouse.schemas(&c) {
                out.push(format!("{c}.{s}"));
                if c == cat {
                    out.push(s.clone());
                }
                for t in self.warehouse.tables(&c, &s) {
                    out.push(format!("{c}.{s}.{t}"));
                    if c == cat {
                        out.push(format!("{s}.{t}"));
                    }
                }
            }
        }
        out
    }
}

impl Completer for ShellHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let start = line[..pos]
            .rfind(|c: char| c.is_whitespace() || c == '(' || c == ',')
            .map(|i| i + 1)
            .unwrap_or(0);
        let word = &line[start..pos];
        if word.is_empty() {
            return Ok((pos, vec![]));
        }
        let upper = word.to_uppercase();
        let lower = word.to_lowercase();
        // Keywords come back in the case the word was typed in.
        let lower_typed = word.chars().any(|c| c.is_ascii_lowercase());
        let mut out: Vec<Pair> = KEYWORDS
            .iter()
            .filter(|k| k.starts_with(&upper))
            .map(|k| {
                let k = if lower_typed {
                    k.to_lowercase()
                } else {
                    k.to_string()
                };
                Pair {
                    display: k.clone(),
                    replacement: k,
                }
            })
            .collect();
        out.extend(
            self.names()
                .into_iter()
                .filter(|n| n.starts_with(&lower))
                .map(|n| Pair {
                    display: n.clone(),
                    replacement: n,
                }),
        );
        out.dedup_by(|a, b| a.replacement == b.replacement);
        Ok((start, out))
    }
}

/// Enter always ends the line: the shell collects lines until a statement is complete and
/// shows the continuation prompt meanwhile.
impl Validator for ShellHelper {
    fn validate(&self, _ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(ValidationResult::Valid(None))
    }
}

impl Hinter for ShellHelper {
    type Hint = String;
}

impl Highlighter for ShellHelper {
    fn highlight<'l>(&self, line: &'l str, _pos: usize) -> Cow<'l, str> {
        Cow::Borrowed(line)
    }
}

impl Helper for ShellHelper {}
