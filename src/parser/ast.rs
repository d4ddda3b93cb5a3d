//! tidemark's own statements. Each prints back as SQL (`Display`), so `parse(x.to_string())`
//! round-trips and tests cover the grammar.

use std::fmt;

use datafusion::sql::sqlparser::ast::{
    DataType, Expr, Ident, ObjectName, Query, Statement as SqlStatement,
};

/// One parsed statement: standard SQL handed to the engine, or one of tidemark's own.
// Statements are parsed one at a time and moved rarely: variant size does not matter here.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// Standard SQL (SELECT, DML, DDL) with every `IDENTIFIER()` already resolved.
    Sql(Box<SqlStatement>),
    /// `USE [CATALOG|SCHEMA|DATABASE] name`.
    Use { kind: UseKind, name: ObjectName },
    /// `SHOW CATALOGS`, `SHOW SCHEMAS [IN c]`, `SHOW TABLES|VIEWS [IN [c.]s]`, each with an
    /// optional `[LIKE] 'pattern'`.
    Show {
        what: ShowWhat,
        within: Option<ObjectName>,
        like: Option<String>,
    },
    /// `DESCRIBE [TABLE] [EXTENDED] t` or `DESCRIBE HISTORY t`.
    Describe {
        table: ObjectName,
        history: bool,
        extended: bool,
    },
    /// `DESCRIBE [QUERY] query`: the columns a query returns, planned and not run.
    DescribeQuery { query: Box<Query> },
    /// A statement on one existing table: `ALTER TABLE ... RENAME TO | ALTER COLUMN`,
    /// `TRUNCATE`, `RESTORE`, `COMMENT ON`, `SHOW CREATE TABLE | TBLPROPERTIES | COLUMNS`,
    /// `DESCRIBE DETAIL`.
    OnTable(Box<OnTable>),
    /// `INSERT INTO|OVERWRITE [TABLE] t BY NAME query`, `INSERT INTO [TABLE] t REPLACE WHERE
    /// predicate query` (the forms sqlparser lacks; every other INSERT is `Sql`).
    Insert(Box<Insert>),
    /// `CREATE [OR REPLACE] TABLE [IF NOT EXISTS] t [SHALLOW|DEEP] CLONE s [VERSION|TIMESTAMP AS OF]`.
    CloneTable(Box<CloneTable>),
    /// `[label:] BEGIN ... END [label]`: a compound statement (SQL scripting).
    Script(Box<crate::parser::script::Compound>),
    /// `EXECUTE IMMEDIATE sql [INTO v, ...] [USING e [AS name], ...]`.
    ExecuteImmediate {
        sql: Box<Expr>,
        into: Vec<String>,
        using: Vec<(Expr, Option<String>)>,
    },
    /// `CREATE [OR REPLACE] [TEMPORARY] FUNCTION [IF NOT EXISTS] f(...) RETURNS ... RETURN ...`.
    CreateFunction(Box<CreateFunction>),
    /// `DROP [TEMPORARY] FUNCTION [IF EXISTS] f`.
    DropFunction {
        temporary: bool,
        if_exists: bool,
        name: ObjectName,
    },
    /// `DESCRIBE FUNCTION [EXTENDED] f`.
    DescribeFunction { name: ObjectName, extended: bool },
    /// `SHOW [USER|SYSTEM|ALL] FUNCTIONS [IN schema] [[LIKE] 'pattern']`.
    ShowFunctions {
        kind: FunctionKind,
        within: Option<ObjectName>,
        like: Option<String>,
    },
    /// `CREATE CONNECTION [IF NOT EXISTS] c TYPE t OPTIONS (...) [COMMENT '..']`.
    CreateConnection(Box<CreateConnection>),
    /// `CREATE FOREIGN CATALOG [IF NOT EXISTS] c USING CONNECTION conn [OPTIONS (...)]`.
    CreateForeignCatalog(Box<CreateForeignCatalog>),
    /// `DROP CONNECTION [IF EXISTS] c`.
    DropConnection { name: String, if_exists: bool },
    /// `SHOW CONNECTIONS`.
    ShowConnections,
    /// `DESCRIBE CONNECTION c`.
    DescribeConnection { name: String },
    /// `CREATE CATALOG [IF NOT EXISTS] c`.
    CreateCatalog {
        name: ObjectName,
        if_not_exists: bool,
        /// `MANAGED LOCATION 'url'`: where its schemas' tables live.
        location: Option<String>,
    },
    /// `CREATE SCHEMA|DATABASE [IF NOT EXISTS] [c.]s [MANAGED] LOCATION 'url'`: a schema
    /// whose tables live under `url`.
    CreateSchemaAt {
        name: ObjectName,
        if_not_exists: bool,
        location: String,
    },
    /// `DROP CATALOG [IF EXISTS] c [CASCADE]`.
    DropCatalog {
        name: ObjectName,
        if_exists: bool,
        cascade: bool,
    },
    /// `ALTER TABLE t ADD COLUMN[S] (col type [DEFAULT e] [COMMENT '..'], ...)`.
    AddColumns {
        table: ObjectName,
        columns: Vec<datafusion::sql::sqlparser::ast::ColumnDef>,
    },
    /// `ALTER TABLE t ADD CONSTRAINT name CHECK (condition)`.
    AddConstraint {
        table: ObjectName,
        name: datafusion::sql::sqlparser::ast::Ident,
        check: datafusion::sql::sqlparser::ast::Expr,
    },
    /// `ALTER TABLE t DROP CONSTRAINT [IF EXISTS] name`.
    DropConstraint {
        table: ObjectName,
        name: datafusion::sql::sqlparser::ast::Ident,
        if_exists: bool,
    },
    /// `ALTER TABLE t SET TBLPROPERTIES ('k' = 'v', ...)`.
    SetProperties {
        table: ObjectName,
        properties: Vec<(String, String)>,
    },
    /// `OPTIMIZE t [WHERE partition predicate] [ZORDER BY (c, ...)]`.
    Optimize {
        table: ObjectName,
        predicate: Option<datafusion::sql::sqlparser::ast::Expr>,
        /// Columns to Z-order by (each a path: more than one part names a nested field);
        /// empty: bin-packing.
        zorder: Vec<Vec<String>>,
    },
    /// `VACUUM t [RETAIN n HOURS] [DRY RUN]`.
    Vacuum {
        table: ObjectName,
        retain_hours: Option<f64>,
        dry_run: bool,
    },
    /// `DECLARE [OR REPLACE] [VARIABLE] name [type] [{DEFAULT | =} expr]`.
    Declare {
        or_replace: bool,
        name: String,
        data_type: Option<DataType>,
        default: Option<Expr>,
    },
    /// `SET VAR a = e [, b = DEFAULT]`.
    SetVariables {
        assignments: Vec<(String, Option<Expr>)>,
    },
    /// `SET VAR (a, b) = (query)`.
    SetVariablesFromQuery {
        names: Vec<String>,
        query: Box<Query>,
    },
    /// `DROP TEMPORARY VARIABLE [IF EXISTS] name`.
    DropVariable { name: String, if_exists: bool },
    /// `COPY INCREMENTAL src INTO tgt ...`.
    CopyIncremental(Box<CopyIncremental>),
    /// `COPY INTO t FROM 'path' FILEFORMAT = f ...`: Databricks' idempotent file loader.
    CopyInto(Box<CopyInto>),
    /// `COPY INCREMENTAL USING CONTROL TABLE ctl [WHERE p] [SHARD i OF n] [CONCURRENCY n]
    /// [DRY RUN]`.
    CopyUsingControl(Box<CopyUsingControl>),
    /// `FOR EACH var IN (query) [CONCURRENCY n] DO ... END FOR` or `FOR [var AS] query DO ... END FOR`.
    ForEach(Box<ForEach>),
}

impl Statement {
    /// Whether the statement writes to the warehouse (creates, changes or drops tables,
    /// schemas or catalogs; a DRY RUN does not). A FOR EACH is not: its body's statements answer for themselves.
    pub fn writes_tables(&self) -> bool {
        use datafusion::sql::sqlparser::ast::Statement as Sql;
        match self {
            Statement::Sql(s) => matches!(
                s.as_ref(),
                Sql::Insert(_)
                    | Sql::Update(_)
                    | Sql::Delete(_)
                    | Sql::Merge(_)
                    | Sql::CreateTable(_)
                    | Sql::CreateView(_)
                    | Sql::CreateSchema { .. }
                    | Sql::Drop { .. }
            ),
            Statement::CreateCatalog { .. }
            | Statement::CreateSchemaAt { .. }
            | Statement::DropCatalog { .. }
            | Statement::AddColumns { .. }
            | Statement::AddConstraint { .. }
            | Statement::DropConstraint { .. }
            | Statement::SetProperties { .. }
            | Statement::Optimize { .. } => true,
            Statement::Vacuum { dry_run, .. } => !dry_run,
            Statement::OnTable(t) => t.action.writes(),
            Statement::Insert(_) => true,
            Statement::CloneTable(_) => true,
            // Their statements answer for themselves.
            Statement::Script(_) | Statement::ExecuteImmediate { .. } => false,
            Statement::CreateFunction(f) => !f.temporary,
            Statement::DropFunction { temporary, .. } => !temporary,
            Statement::DescribeFunction { .. } | Statement::ShowFunctions { .. } => false,
            Statement::CopyIncremental(c) => !c.dry_run,
            Statement::CopyUsingControl(c) => !c.dry_run,
            Statement::CopyInto(_) => true,
            Statement::CreateConnection(_)
            | Statement::CreateForeignCatalog(_)
            | Statement::DropConnection { .. } => true,
            Statement::ShowConnections | Statement::DescribeConnection { .. } => false,
            Statement::Use { .. }
            | Statement::Show { .. }
            | Statement::Describe { .. }
            | Statement::DescribeQuery { .. }
            | Statement::Declare { .. }
            | Statement::SetVariables { .. }
            | Statement::SetVariablesFromQuery { .. }
            | Statement::DropVariable { .. }
            | Statement::ForEach(_) => false,
        }
    }
}

/// A statement on one existing table.
#[derive(Debug, Clone, PartialEq)]
pub struct OnTable {
    pub table: ObjectName,
    pub action: TableAction,
}

/// What a statement on one table does.
#[derive(Debug, Clone, PartialEq)]
pub enum TableAction {
    /// `ALTER TABLE t RENAME TO u`.
    RenameTo(ObjectName),
    /// `ALTER TABLE t ALTER COLUMN c ...`, `COMMENT ON COLUMN t.c IS ...`.
    AlterColumn { column: Ident, change: ColumnChange },
    /// `TRUNCATE TABLE t [PARTITION (c = v, ...)]`.
    Truncate { partition: Vec<(Ident, Expr)> },
    /// `RESTORE [TABLE] t [TO] VERSION AS OF n | TIMESTAMP AS OF e`.
    Restore(AsOf),
    /// `COMMENT ON TABLE t IS 'text' | NULL`.
    Comment(Option<String>),
    /// `SHOW CREATE TABLE t`.
    ShowCreate,
    /// `SHOW TBLPROPERTIES t [(key)]`.
    ShowProperties { key: Option<String> },
    /// `SHOW COLUMNS IN t`.
    ShowColumns,
    /// `SHOW PARTITIONS t [PARTITION (c = v, ...)]`.
    ShowPartitions { partition: Vec<(Ident, Expr)> },
    /// `DESCRIBE DETAIL t`.
    DescribeDetail,
}

impl TableAction {
    /// Whether the action commits to the table (or moves it).
    pub fn writes(&self) -> bool {
        match self {
            TableAction::RenameTo(_)
            | TableAction::AlterColumn { .. }
            | TableAction::Truncate { .. }
            | TableAction::Restore(_)
            | TableAction::Comment(_) => true,
            TableAction::ShowCreate
            | TableAction::ShowProperties { .. }
            | TableAction::ShowColumns
            | TableAction::ShowPartitions { .. }
            | TableAction::DescribeDetail => false,
        }
    }
}

/// `ALTER COLUMN`'s changes.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnChange {
    SetDefault(Box<Expr>),
    DropDefault,
    SetNotNull,
    DropNotNull,
    /// `COMMENT 'text'`; None (from `COMMENT ON COLUMN ... IS NULL`) removes it.
    Comment(Option<String>),
}

/// The version `RESTORE` goes back to.
#[derive(Debug, Clone, PartialEq)]
pub enum AsOf {
    Version(u64),
    Timestamp(Box<Expr>),
}

/// `s` as an SQL string literal.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

impl fmt::Display for OnTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.table;
        match &self.action {
            TableAction::RenameTo(to) => write!(f, "ALTER TABLE {t} RENAME TO {to}"),
            TableAction::AlterColumn {
                column,
                change: ColumnChange::Comment(None),
            } => write!(f, "COMMENT ON COLUMN {t}.{column} IS NULL"),
            TableAction::AlterColumn { column, change } => {
                write!(f, "ALTER TABLE {t} ALTER COLUMN {column} ")?;
                match change {
                    ColumnChange::SetDefault(e) => write!(f, "SET DEFAULT {e}"),
                    ColumnChange::DropDefault => write!(f, "DROP DEFAULT"),
                    ColumnChange::SetNotNull => write!(f, "SET NOT NULL"),
                    ColumnChange::DropNotNull => write!(f, "DROP NOT NULL"),
                    ColumnChange::Comment(c) => {
                        write!(f, "COMMENT {}", quoted(c.as_deref().unwrap_or_default()))
                    }
                }
            }
            TableAction::Truncate { partition } | TableAction::ShowPartitions { partition } => {
                if matches!(self.action, TableAction::Truncate { .. }) {
                    write!(f, "TRUNCATE TABLE {t}")?;
                } else {
                    write!(f, "SHOW PARTITIONS {t}")?;
                }
                if !partition.is_empty() {
                    let parts: Vec<String> = partition
                        .iter()
                        .map(|(c, v)| format!("{c} = {v}"))
                        .collect();
                    write!(f, " PARTITION ({})", parts.join(", "))?;
                }
                Ok(())
            }
            TableAction::Restore(AsOf::Version(v)) => {
                write!(f, "RESTORE TABLE {t} TO VERSION AS OF {v}")
            }
            TableAction::Restore(AsOf::Timestamp(e)) => {
                write!(f, "RESTORE TABLE {t} TO TIMESTAMP AS OF {e}")
            }
            TableAction::Comment(c) => write!(
                f,
                "COMMENT ON TABLE {t} IS {}",
                c.as_deref().map_or("NULL".into(), quoted)
            ),
            TableAction::ShowCreate => write!(f, "SHOW CREATE TABLE {t}"),
            TableAction::ShowProperties { key } => {
                write!(f, "SHOW TBLPROPERTIES {t}")?;
                if let Some(k) = key {
                    write!(f, " ({})", quoted(k))?;
                }
                Ok(())
            }
            TableAction::ShowColumns => write!(f, "SHOW COLUMNS IN {t}"),
            TableAction::DescribeDetail => write!(f, "DESCRIBE DETAIL {t}"),
        }
    }
}

/// What `USE` switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UseKind {
    Catalog,
    Schema,
    /// `USE name` / `USE c.s`: a schema, or catalog.schema.
    Plain,
}

/// What `SHOW` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShowWhat {
    Catalogs,
    Schemas,
    Tables,
    Views,
}

/// `COPY INCREMENTAL` options (SPEC §4).
#[derive(Debug, Clone, PartialEq)]
pub struct CopyIncremental {
    pub source: ObjectName,
    pub target: ObjectName,
    pub watermark: Option<ObjectName>,
    pub since: Option<Expr>,
    pub control: Option<ObjectName>,
    pub merge_on: Vec<ObjectName>,
    pub lookback: Option<Expr>,
    pub dry_run: bool,
}

/// The one-statement job over a control table.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyUsingControl {
    pub control: ObjectName,
    pub filter: Option<Expr>,
    /// `SHARD i OF n`: this worker's share of the rows (i from 0 to n - 1).
    pub shard: Option<(u64, u64)>,
    pub concurrency: Option<u64>,
    pub dry_run: bool,
}

/// A loop over the rows of a query.
#[derive(Debug, Clone, PartialEq)]
pub struct ForEach {
    /// Loop variable; `None` in the scripting form without `var AS`.
    pub var: Option<String>,
    pub query: Box<Query>,
    pub concurrency: Option<u64>,
    /// `true` for the parallel `FOR EACH` form, `false` for the sequential scripting form.
    pub parallel: bool,
    /// Body statements as source text, parsed per iteration (names depend on the row).
    pub body: Vec<BodyStatement>,
}

/// One statement of a loop body with its offset in the enclosing statement.
#[derive(Debug, Clone, PartialEq)]
pub struct BodyStatement {
    pub sql: String,
    /// 1-based line and column of the statement within the FOR statement's text.
    pub line: usize,
    pub col: usize,
}

fn names(v: &[ObjectName]) -> String {
    v.iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for CopyIncremental {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "COPY INCREMENTAL FROM {} INTO {}",
            self.source, self.target
        )?;
        if let Some(w) = &self.watermark {
            write!(f, " WATERMARK {w}")?;
        }
        if let Some(s) = &self.since {
            write!(f, " SINCE {s}")?;
        }
        if let Some(c) = &self.control {
            write!(f, " CONTROL TABLE {c}")?;
        }
        if !self.merge_on.is_empty() {
            write!(f, " MERGE ON ({})", names(&self.merge_on))?;
        }
        if let Some(l) = &self.lookback {
            write!(f, " LOOKBACK {l}")?;
        }
        if self.dry_run {
            write!(f, " DRY RUN")?;
        }
        Ok(())
    }
}

impl fmt::Display for CopyUsingControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "COPY INCREMENTAL USING CONTROL TABLE {}", self.control)?;
        if let Some(w) = &self.filter {
            write!(f, " WHERE {w}")?;
        }
        if let Some((i, n)) = self.shard {
            write!(f, " SHARD {i} OF {n}")?;
        }
        if let Some(n) = self.concurrency {
            write!(f, " CONCURRENCY {n}")?;
        }
        if self.dry_run {
            write!(f, " DRY RUN")?;
        }
        Ok(())
    }
}

impl fmt::Display for ForEach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.parallel {
            write!(
                f,
                "FOR EACH {} IN ({})",
                self.var.as_deref().unwrap_or("row"),
                self.query
            )?;
            if let Some(n) = self.concurrency {
                write!(f, " CONCURRENCY {n}")?;
            }
        } else {
            write!(f, "FOR ")?;
            if let Some(v) = &self.var {
                write!(f, "{v} AS ")?;
            }
            write!(f, "{}", self.query)?;
        }
        write!(f, " DO")?;
        for s in &self.body {
            write!(f, " {};", s.sql)?;
        }
        write!(f, " END FOR")
    }
}

impl fmt::Display for Statement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Statement::Sql(s) => write!(f, "{s}"),
            Statement::Use { kind, name } => match kind {
                UseKind::Catalog => write!(f, "USE CATALOG {name}"),
                UseKind::Schema => write!(f, "USE SCHEMA {name}"),
                UseKind::Plain => write!(f, "USE {name}"),
            },
            Statement::Show { what, within, like } => {
                let w = match what {
                    ShowWhat::Catalogs => "CATALOGS",
                    ShowWhat::Schemas => "SCHEMAS",
                    ShowWhat::Tables => "TABLES",
                    ShowWhat::Views => "VIEWS",
                };
                write!(f, "SHOW {w}")?;
                if let Some(n) = within {
                    write!(f, " IN {n}")?;
                }
                if let Some(p) = like {
                    write!(f, " LIKE '{}'", p.replace('\'', "''"))?;
                }
                Ok(())
            }
            Statement::DescribeQuery { query } => write!(f, "DESCRIBE QUERY {query}"),
            Statement::Describe {
                table,
                history,
                extended,
            } => {
                write!(
                    f,
                    "DESCRIBE {}{}{table}",
                    if *history { "HISTORY " } else { "TABLE " },
                    if *extended { "EXTENDED " } else { "" }
                )
            }
            Statement::CreateCatalog {
                name,
                if_not_exists,
                location,
            } => {
                write!(
                    f,
                    "CREATE CATALOG {}{name}",
                    if *if_not_exists { "IF NOT EXISTS " } else { "" }
                )?;
                if let Some(l) = location {
                    write!(f, " MANAGED LOCATION '{}'", l.replace('\'', "''"))?;
                }
                Ok(())
            }
            Statement::CreateSchemaAt {
                name,
                if_not_exists,
                location,
            } => write!(
                f,
                "CREATE SCHEMA {}{name} MANAGED LOCATION '{}'",
                if *if_not_exists { "IF NOT EXISTS " } else { "" },
                location.replace('\'', "''")
            ),
            Statement::DropCatalog {
                name,
                if_exists,
                cascade,
            } => write!(
                f,
                "DROP CATALOG {}{name}{}",
                if *if_exists { "IF EXISTS " } else { "" },
                if *cascade { " CASCADE" } else { "" }
            ),
            Statement::AddColumns { table, columns } => {
                let cols: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
                write!(f, "ALTER TABLE {table} ADD COLUMNS ({})", cols.join(", "))
            }
            Statement::AddConstraint { table, name, check } => {
                write!(
                    f,
                    "ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({check})"
                )
            }
            Statement::DropConstraint {
                table,
                name,
                if_exists,
            } => write!(
                f,
                "ALTER TABLE {table} DROP CONSTRAINT {}{name}",
                if *if_exists { "IF EXISTS " } else { "" }
            ),
            Statement::SetProperties { table, properties } => {
                let props: Vec<String> = properties
                    .iter()
                    .map(|(k, v)| {
                        format!("'{}' = '{}'", k.replace('\'', "''"), v.replace('\'', "''"))
                    })
                    .collect();
                write!(
                    f,
                    "ALTER TABLE {table} SET TBLPROPERTIES ({})",
                    props.join(", ")
                )
            }
            Statement::OnTable(t) => write!(f, "{t}"),
            Statement::Insert(i) => write!(f, "{i}"),
            Statement::CloneTable(c) => write!(f, "{c}"),
            Statement::Script(c) => write!(f, "{c}"),
            Statement::ExecuteImmediate { sql, into, using } => {
                write!(f, "EXECUTE IMMEDIATE {sql}")?;
                if !into.is_empty() {
                    write!(f, " INTO {}", into.join(", "))?;
                }
                if !using.is_empty() {
                    let args: Vec<String> = using
                        .iter()
                        .map(|(e, n)| match n {
                            Some(n) => format!("{e} AS {n}"),
                            None => e.to_string(),
                        })
                        .collect();
                    write!(f, " USING {}", args.join(", "))?;
                }
                Ok(())
            }
            Statement::CreateFunction(c) => write!(f, "{c}"),
            Statement::DropFunction {
                temporary,
                if_exists,
                name,
            } => write!(
                f,
                "DROP {}FUNCTION {}{name}",
                if *temporary { "TEMPORARY " } else { "" },
                if *if_exists { "IF EXISTS " } else { "" }
            ),
            Statement::DescribeFunction { name, extended } => write!(
                f,
                "DESCRIBE FUNCTION {}{name}",
                if *extended { "EXTENDED " } else { "" }
            ),
            Statement::ShowFunctions { kind, within, like } => {
                let kind = match kind {
                    FunctionKind::All => "",
                    FunctionKind::User => "USER ",
                    FunctionKind::System => "SYSTEM ",
                };
                write!(f, "SHOW {kind}FUNCTIONS")?;
                if let Some(w) = within {
                    write!(f, " IN {w}")?;
                }
                if let Some(l) = like {
                    write!(f, " LIKE '{}'", l.replace('\'', "''"))?;
                }
                Ok(())
            }
            Statement::Optimize {
                table,
                predicate,
                zorder,
            } => {
                write!(f, "OPTIMIZE {table}")?;
                if let Some(p) = predicate {
                    write!(f, " WHERE {p}")?;
                }
                if !zorder.is_empty() {
                    let columns: Vec<String> = zorder
                        .iter()
                        .map(|c| {
                            c.iter()
                                .map(|part| format!("`{}`", part.replace('`', "``")))
                                .collect::<Vec<_>>()
                                .join(".")
                        })
                        .collect();
                    write!(f, " ZORDER BY ({})", columns.join(", "))?;
                }
                Ok(())
            }
            Statement::Vacuum {
                table,
                retain_hours,
                dry_run,
            } => {
                write!(f, "VACUUM {table}")?;
                if let Some(h) = retain_hours {
                    write!(f, " RETAIN {h} HOURS")?;
                }
                if *dry_run {
                    write!(f, " DRY RUN")?;
                }
                Ok(())
            }
            Statement::Declare { .. }
            | Statement::SetVariables { .. }
            | Statement::SetVariablesFromQuery { .. }
            | Statement::DropVariable { .. } => self.fmt_variable_statement(f),
            Statement::CopyIncremental(c) => write!(f, "{c}"),
            Statement::CopyInto(c) => write!(f, "{c}"),
            Statement::CreateConnection(c) => write!(f, "{c}"),
            Statement::CreateForeignCatalog(c) => write!(f, "{c}"),
            Statement::DropConnection { name, if_exists } => write!(
                f,
                "DROP CONNECTION {}{name}",
                if *if_exists { "IF EXISTS " } else { "" }
            ),
            Statement::ShowConnections => write!(f, "SHOW CONNECTIONS"),
            Statement::DescribeConnection { name } => write!(f, "DESCRIBE CONNECTION {name}"),
            Statement::CopyUsingControl(c) => write!(f, "{c}"),
            Statement::ForEach(l) => write!(f, "{l}"),
        }
    }
}

impl Statement {
    /// DECLARE, SET VAR and DROP TEMPORARY VARIABLE as SQL.
    fn fmt_variable_statement(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Statement::Declare {
                or_replace,
                name,
                data_type,
                default,
            } => {
                write!(
                    f,
                    "DECLARE {}VARIABLE {name}",
                    if *or_replace { "OR REPLACE " } else { "" }
                )?;
                if let Some(t) = data_type {
                    write!(f, " {t}")?;
                }
                if let Some(d) = default {
                    write!(f, " DEFAULT {d}")?;
                }
                Ok(())
            }
            Statement::SetVariables { assignments } => {
                let parts: Vec<String> = assignments
                    .iter()
                    .map(|(n, e)| match e {
                        Some(e) => format!("{n} = {e}"),
                        None => format!("{n} = DEFAULT"),
                    })
                    .collect();
                write!(f, "SET VAR {}", parts.join(", "))
            }
            Statement::SetVariablesFromQuery { names, query } => {
                write!(f, "SET VAR ({}) = ({query})", names.join(", "))
            }
            Statement::DropVariable { name, if_exists } => {
                write!(
                    f,
                    "DROP TEMPORARY VARIABLE {}{name}",
                    if *if_exists { "IF EXISTS " } else { "" }
                )
            }
            other => unreachable!("not a variable statement: {other:?}"),
        }
    }
}

/// An INSERT whose rows meet the table by name or replace what a predicate selects.
#[derive(Debug, Clone, PartialEq)]
pub struct Insert {
    pub table: ObjectName,
    pub overwrite: bool,
    pub mode: InsertMode,
    pub query: Box<Query>,
}

/// How an [`Insert`]'s rows meet the table.
#[derive(Debug, Clone, PartialEq)]
pub enum InsertMode {
    /// Each column of the query fills the table's column of the same name.
    ByName,
    /// The rows the predicate selects are replaced by the query's, in one commit.
    ReplaceWhere(Box<Expr>),
}

impl fmt::Display for Insert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let into = if self.overwrite { "OVERWRITE" } else { "INTO" };
        write!(f, "INSERT {into} {} ", self.table)?;
        match &self.mode {
            InsertMode::ByName => write!(f, "BY NAME")?,
            InsertMode::ReplaceWhere(p) => write!(f, "REPLACE WHERE {p}")?,
        }
        write!(f, " {}", self.query)
    }
}

/// Which functions `SHOW FUNCTIONS` lists.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FunctionKind {
    /// Built-in and user functions.
    All,
    /// SQL functions users created (temporary ones and the schema's).
    User,
    /// Built-in functions.
    System,
}

/// `CREATE FUNCTION`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateFunction {
    pub or_replace: bool,
    pub temporary: bool,
    pub if_not_exists: bool,
    pub name: ObjectName,
    pub params: Vec<FunctionParam>,
    pub returns: FunctionReturns,
    pub comment: Option<String>,
    pub not_deterministic: bool,
    pub body: FunctionBody,
}

/// A parameter of a SQL function.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionParam {
    pub name: Ident,
    pub data_type: DataType,
    pub default: Option<Expr>,
    pub comment: Option<String>,
}

/// What a SQL function returns.
#[derive(Debug, Clone, PartialEq)]
pub enum FunctionReturns {
    /// One value of this type (None: the body's type).
    Scalar(Option<DataType>),
    /// A table of these columns (empty: the query's).
    Table(Vec<(Ident, DataType)>),
}

/// A SQL function's body.
#[derive(Debug, Clone, PartialEq)]
pub enum FunctionBody {
    Expr(Box<Expr>),
    Query(Box<Query>),
}

impl fmt::Display for CreateFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quote = |s: &str| format!("'{}'", s.replace('\'', "''"));
        write!(
            f,
            "CREATE {}{}FUNCTION {}{}(",
            if self.or_replace { "OR REPLACE " } else { "" },
            if self.temporary { "TEMPORARY " } else { "" },
            if self.if_not_exists {
                "IF NOT EXISTS "
            } else {
                ""
            },
            self.name
        )?;
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{} {}", p.name, p.data_type)?;
            if let Some(d) = &p.default {
                write!(f, " DEFAULT {d}")?;
            }
            if let Some(c) = &p.comment {
                write!(f, " COMMENT {}", quote(c))?;
            }
        }
        write!(f, ")")?;
        match &self.returns {
            FunctionReturns::Scalar(Some(t)) => write!(f, " RETURNS {t}")?,
            FunctionReturns::Scalar(None) => {}
            FunctionReturns::Table(columns) => {
                write!(f, " RETURNS TABLE")?;
                if !columns.is_empty() {
                    let columns: Vec<String> =
                        columns.iter().map(|(n, t)| format!("{n} {t}")).collect();
                    write!(f, " ({})", columns.join(", "))?;
                }
            }
        }
        if let Some(c) = &self.comment {
            write!(f, " COMMENT {}", quote(c))?;
        }
        if self.not_deterministic {
            write!(f, " NOT DETERMINISTIC")?;
        }
        match &self.body {
            FunctionBody::Expr(e) => write!(f, " RETURN {e}"),
            FunctionBody::Query(q) => write!(f, " RETURN {q}"),
        }
    }
}

/// `CREATE TABLE t [SHALLOW|DEEP] CLONE s`.
#[derive(Debug, Clone, PartialEq)]
pub struct CloneTable {
    pub or_replace: bool,
    pub if_not_exists: bool,
    pub name: ObjectName,
    pub shallow: bool,
    pub source: ObjectName,
    pub as_of: Option<AsOf>,
    pub properties: Vec<(String, String)>,
}

impl fmt::Display for CloneTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CREATE {}TABLE {}{} {} CLONE {}",
            if self.or_replace { "OR REPLACE " } else { "" },
            if self.if_not_exists {
                "IF NOT EXISTS "
            } else {
                ""
            },
            self.name,
            if self.shallow { "SHALLOW" } else { "DEEP" },
            self.source
        )?;
        match &self.as_of {
            Some(AsOf::Version(v)) => write!(f, " VERSION AS OF {v}")?,
            Some(AsOf::Timestamp(t)) => write!(f, " TIMESTAMP AS OF {t}")?,
            None => {}
        }
        if !self.properties.is_empty() {
            let props: Vec<String> = self
                .properties
                .iter()
                .map(|(k, v)| format!("{} = {}", quoted(k), quoted(v)))
                .collect();
            write!(f, " TBLPROPERTIES ({})", props.join(", "))?;
        }
        Ok(())
    }
}

/// `COPY INTO target [BY POSITION | (cols)] FROM 'path' | (SELECT items FROM 'path')
/// FILEFORMAT = f [FILES = (...) | PATTERN = 'glob'] [FORMAT_OPTIONS (...)] [COPY_OPTIONS (...)]`.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyInto {
    pub target: ObjectName,
    pub columns: CopyColumns,
    /// The SELECT list of `FROM (SELECT ... FROM 'path')`.
    pub select: Option<Vec<datafusion::sql::sqlparser::ast::SelectItem>>,
    pub from: String,
    /// As written (`CSV`, `json`, ...).
    pub format: String,
    /// File names relative to `from`.
    pub files: Option<Vec<String>>,
    /// A glob relative to `from`.
    pub pattern: Option<String>,
    pub format_options: Vec<(String, String)>,
    pub copy_options: Vec<(String, String)>,
}

/// How a [`CopyInto`]'s source columns meet the target's.
#[derive(Debug, Clone, PartialEq)]
pub enum CopyColumns {
    /// By name (the default).
    ByName,
    /// By position, every column the target has (headerless CSV).
    ByPosition,
    /// By position, into these columns (headerless CSV).
    Listed(Vec<datafusion::sql::sqlparser::ast::Ident>),
}

impl fmt::Display for CopyInto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "COPY INTO {}", self.target)?;
        match &self.columns {
            CopyColumns::ByName => {}
            CopyColumns::ByPosition => write!(f, " BY POSITION")?,
            CopyColumns::Listed(c) => {
                let c: Vec<String> = c.iter().map(|c| c.to_string()).collect();
                write!(f, " ({})", c.join(", "))?;
            }
        }
        match &self.select {
            Some(items) => {
                let items: Vec<String> = items.iter().map(|i| i.to_string()).collect();
                write!(
                    f,
                    " FROM (SELECT {} FROM {})",
                    items.join(", "),
                    quoted(&self.from)
                )?;
            }
            None => write!(f, " FROM {}", quoted(&self.from))?,
        }
        write!(f, " FILEFORMAT = {}", self.format)?;
        if let Some(files) = &self.files {
            let files: Vec<String> = files.iter().map(|s| quoted(s)).collect();
            write!(f, " FILES = ({})", files.join(", "))?;
        }
        if let Some(p) = &self.pattern {
            write!(f, " PATTERN = {}", quoted(p))?;
        }
        let options = |o: &[(String, String)]| {
            o.iter()
                .map(|(k, v)| format!("{} = {}", quoted(k), quoted(v)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !self.format_options.is_empty() {
            write!(f, " FORMAT_OPTIONS ({})", options(&self.format_options))?;
        }
        if !self.copy_options.is_empty() {
            write!(f, " COPY_OPTIONS ({})", options(&self.copy_options))?;
        }
        Ok(())
    }
}

/// `CREATE CONNECTION`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateConnection {
    pub name: String,
    pub if_not_exists: bool,
    /// As written (`postgresql`, ...).
    pub kind: String,
    pub options: Vec<(String, crate::catalog::foreign::OptionValue)>,
    pub comment: Option<String>,
}

/// `CREATE FOREIGN CATALOG`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateForeignCatalog {
    pub name: String,
    pub if_not_exists: bool,
    pub connection: String,
    pub options: Vec<(String, crate::catalog::foreign::OptionValue)>,
    pub comment: Option<String>,
}

fn fmt_options(
    f: &mut fmt::Formatter<'_>,
    options: &[(String, crate::catalog::foreign::OptionValue)],
) -> fmt::Result {
    if options.is_empty() {
        return Ok(());
    }
    let o: Vec<String> = options
        .iter()
        .map(|(k, v)| format!("{k} {}", v.shown()))
        .collect();
    write!(f, " OPTIONS ({})", o.join(", "))
}

impl fmt::Display for CreateConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CREATE CONNECTION {}{} TYPE {}",
            if self.if_not_exists {
                "IF NOT EXISTS "
            } else {
                ""
            },
            self.name,
            self.kind
        )?;
        fmt_options(f, &self.options)?;
        if let Some(c) = &self.comment {
            write!(f, " COMMENT {}", quoted(c))?;
        }
        Ok(())
    }
}

impl fmt::Display for CreateForeignCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CREATE FOREIGN CATALOG {}{} USING CONNECTION {}",
            if self.if_not_exists {
                "IF NOT EXISTS "
            } else {
                ""
            },
            self.name,
            self.connection
        )?;
        fmt_options(f, &self.options)?;
        if let Some(c) = &self.comment {
            write!(f, " COMMENT {}", quoted(c))?;
        }
        Ok(())
    }
}
