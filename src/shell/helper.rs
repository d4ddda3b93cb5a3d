//! rustyline glue: tab completion of keywords (tidemark's own included), catalog/schema/table
//! names, the columns of the tables the line names (all read from the warehouse on Tab, never
//! at start-up), and file paths after `\i` and `\o`.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Helper};

use crate::catalog::{Warehouse, WarehouseCatalogs};

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
    "COPY INCREMENTAL",
    "USING CONTROL TABLE",
    "COPY INTO",
    "CREATE CONNECTION",
    "CREATE FOREIGN CATALOG",
    "USING CONNECTION",
    "SHOW CONNECTIONS",
    "DESCRIBE CONNECTION",
    "FILEFORMAT",
    "FORMAT_OPTIONS",
    "COPY_OPTIONS",
    "PATTERN",
    "READ_FILES",
    "INTO",
    "IN",
    "DO",
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

/// The longest Tab waits for a foreign catalog's database to list its names or a table's
/// columns; past it, the names as last listed are offered.
const FOREIGN_WAIT: std::time::Duration = std::time::Duration::from_millis(1500);

/// Shared state the completer needs.
pub struct ShellHelper {
    warehouse: Arc<Warehouse>,
    /// The engine's catalogs: foreign ones list their names through their connections.
    catalogs: Arc<WarehouseCatalogs>,
    /// The shell's runtime, where foreign catalogs' connections live.
    runtime: tokio::runtime::Handle,
    /// What Tab is still waiting for from a database (a catalog's names, a table's columns):
    /// one request each at a time, however often Tab is pressed.
    asked: Arc<Mutex<std::collections::HashSet<String>>>,
    /// Current catalog and schema, updated by the shell after each statement.
    pub current: Arc<Mutex<(String, String)>>,
}

impl ShellHelper {
    /// A helper over `warehouse` (made inside the shell's runtime).
    pub fn new(
        warehouse: Arc<Warehouse>,
        catalogs: Arc<WarehouseCatalogs>,
        current: Arc<Mutex<(String, String)>>,
    ) -> Self {
        ShellHelper {
            warehouse,
            catalogs,
            runtime: tokio::runtime::Handle::current(),
            asked: Default::default(),
            current,
        }
    }

    /// `work` run on the shell's runtime (the shell waits for Tab's answer), for at most
    /// [`FOREIGN_WAIT`]; None past it, if it fails, or while an earlier request of the same
    /// `key` is still running (it is not asked twice).
    fn on_runtime<T: Send + 'static>(
        &self,
        key: String,
        work: impl Future<Output = Option<T>> + Send + 'static,
    ) -> Option<T> {
        if !self
            .asked
            .lock()
            .map(|mut asked| asked.insert(key.clone()))
            .unwrap_or(false)
        {
            return None;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let asked = self.asked.clone();
        self.runtime.spawn(async move {
            let answer = work.await;
            if let Ok(mut asked) = asked.lock() {
                asked.remove(&key);
            }
            let _ = tx.send(answer);
        });
        rx.recv_timeout(FOREIGN_WAIT).ok().flatten()
    }

    /// A foreign catalog's schemas and their tables and views, lower case: as its database
    /// has them now, else (no answer in time) as last listed.
    fn foreign_names(&self, catalog: &str) -> Vec<(String, Vec<String>)> {
        use datafusion::catalog::CatalogProvider;
        let Some(provider) = self.catalogs.foreign(catalog) else {
            return vec![];
        };
        let listing = provider.clone();
        let names = self
            .on_runtime(format!("names of {catalog}"), async move {
                listing.list().await.ok()
            })
            .map(|names| {
                names
                    .into_iter()
                    .map(|(s, relations)| (s, relations.into_iter().map(|r| r.name).collect()))
                    .collect::<Vec<(String, Vec<String>)>>()
            })
            .unwrap_or_else(|| {
                provider
                    .schema_names()
                    .into_iter()
                    .map(|s| {
                        let tables = provider
                            .schema(&s)
                            .map(|schema| schema.table_names())
                            .unwrap_or_default();
                        (s, tables)
                    })
                    .collect()
            });
        names
            .into_iter()
            .map(|(s, tables)| {
                (
                    s.to_lowercase(),
                    tables.into_iter().map(|t| t.to_lowercase()).collect(),
                )
            })
            .collect()
    }

    /// The columns of a foreign catalog's table, from its database (none past
    /// [`FOREIGN_WAIT`]).
    fn foreign_columns(&self, name: &crate::catalog::TableName) -> Vec<String> {
        use datafusion::catalog::CatalogProvider;
        let Some(provider) = self.catalogs.foreign(&name.catalog) else {
            return vec![];
        };
        let (schema, table) = (name.schema.clone(), name.table.clone());
        self.on_runtime(format!("columns of {name}"), async move {
            let table = provider.schema(&schema)?.table(&table).await.ok()??;
            Some(
                table
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect::<Vec<_>>(),
            )
        })
        .unwrap_or_default()
    }

    /// The columns of the warehouse tables the text names after FROM, JOIN, UPDATE, INTO
    /// or TABLE (each table's schema read from its log, on a thread of its own: Tab is
    /// pressed inside the shell's runtime).
    fn columns(&self, text: &str) -> Vec<String> {
        let (cat, sch) = self.current.lock().map(|g| g.clone()).unwrap_or_default();
        let words: Vec<&str> = text
            .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')' || c == ';')
            .filter(|w| !w.is_empty())
            .collect();
        let mut names = vec![];
        let mut foreign = vec![];
        for pair in words.windows(2) {
            if ["FROM", "JOIN", "UPDATE", "INTO", "TABLE"]
                .iter()
                .any(|k| pair[0].eq_ignore_ascii_case(k))
                && let Ok(parts) = crate::catalog::split_qualified(pair[1])
                && let Ok(name) = crate::catalog::TableName::resolve(&parts, &cat, &sch)
            {
                if self.warehouse.is_foreign(&name.catalog) {
                    foreign.push(name);
                } else if self.warehouse.table_exists(&name) {
                    names.push(name);
                }
            }
        }
        let mut found: Vec<String> = foreign
            .iter()
            .flat_map(|n| self.foreign_columns(n))
            .collect();
        if names.is_empty() {
            return found;
        }
        let warehouse = self.warehouse.clone();
        let delta = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return vec![];
            };
            runtime.block_on(async {
                let mut columns = vec![];
                for name in names {
                    if let Ok(table) = warehouse.open(&name).await
                        && let Ok(snapshot) = table.snapshot()
                    {
                        columns.extend(snapshot.schema().fields().map(|f| f.name().clone()));
                    }
                }
                columns
            })
        })
        .join()
        .unwrap_or_default();
        found.extend(delta);
        found
    }

    /// Catalog, schema and table names to offer for `word` (lower case): a foreign
    /// catalog's from its database, listed when the word is in that catalog.
    fn names(&self, word: &str) -> Vec<String> {
        let (cat, sch) = self.current.lock().map(|g| g.clone()).unwrap_or_default();
        let mut out = self.warehouse.tables(&cat, &sch);
        for c in self.warehouse.catalogs() {
            out.push(c.clone());
            if self.warehouse.is_foreign(&c) {
                if c != cat && !word.starts_with(&format!("{c}.")) {
                    continue;
                }
                for (s, tables) in self.foreign_names(&c) {
                    out.push(format!("{c}.{s}"));
                    if c == cat {
                        out.push(s.clone());
                    }
                    for t in tables {
                        out.push(format!("{c}.{s}.{t}"));
                        if c == cat {
                            out.push(format!("{s}.{t}"));
                            if s == sch {
                                out.push(t);
                            }
                        }
                    }
                }
                continue;
            }
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
        ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let head = line[..pos].trim_start();
        if ["\\i ", "\\include ", "\\o ", "\\out "]
            .iter()
            .any(|m| head.starts_with(m))
        {
            return rustyline::completion::FilenameCompleter::new().complete(line, pos, ctx);
        }
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
            .chain(crate::parser::OWN_KEYWORDS)
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
            self.names(&lower)
                .into_iter()
                .filter(|n| n.starts_with(&lower))
                .map(|n| Pair {
                    display: n.clone(),
                    replacement: n,
                }),
        );
        let columns: Vec<Pair> = self
            .columns(line)
            .into_iter()
            .filter(|c| c.to_lowercase().starts_with(&lower))
            .map(|c| Pair {
                display: c.clone(),
                replacement: c,
            })
            .collect();
        // Where an expression starts (after SELECT, WHERE, a comma...), a column of the
        // tables the line names is what is meant: offered alone, so Tab completes it.
        let before = line[..start].trim_end();
        let expression_starts = before.ends_with([',', '(', '=', '<', '>'])
            || before
                .rsplit(|c: char| c.is_whitespace())
                .next()
                .is_some_and(|w| {
                    [
                        "SELECT", "WHERE", "AND", "OR", "BY", "ON", "SET", "HAVING", "NOT",
                    ]
                    .iter()
                    .any(|k| w.eq_ignore_ascii_case(k))
                });
        if expression_starts && !columns.is_empty() {
            return Ok((start, columns));
        }
        out.extend(columns);
        out.sort_by(|a, b| a.replacement.cmp(&b.replacement));
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
