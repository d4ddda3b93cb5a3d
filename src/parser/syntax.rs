//! The syntax of every statement tidemark runs, as `\h NAME` shows it. The parser in this
//! folder accepts exactly these forms (plus DataFusion's query syntax); a test parses every
//! example below, so the help cannot drift from the parser.

/// One statement's help entry.
pub struct Syntax {
    /// Its name, as `\h` matches it (`COPY INCREMENTAL`).
    pub name: &'static str,
    /// What it does, one line.
    pub about: &'static str,
    /// Its grammar.
    pub grammar: &'static str,
    /// A statement that parses.
    pub example: &'static str,
}

pub const STATEMENTS: &[Syntax] = &[
    Syntax {
        name: "COPY INCREMENTAL",
        about: "copy the rows of a Delta table newer than a watermark into another, exactly once",
        grammar: "COPY INCREMENTAL [FROM] source INTO target
    [ WATERMARK column ]            -- a column name or IDENTIFIER(expr)
    [ SINCE expr ]                  -- start after this value, overriding stored state
    [ CONTROL TABLE table ]         -- read and advance last_watermark there
    [ MERGE ON ( key [, ...] ) ]    -- upsert the newest row per key instead of appending
    [ LOOKBACK expr ]               -- also re-check rows this far below the mark
    [ DRY RUN ]                     -- report what would be copied; change no table",
        example: "COPY INCREMENTAL sales.orders INTO lake.orders WATERMARK updated_at CONTROL TABLE ops.watermarks",
    },
    Syntax {
        name: "COPY INCREMENTAL USING CONTROL TABLE",
        about: "run one copy per row of a control table, several at a time",
        grammar: "COPY INCREMENTAL USING CONTROL TABLE table
    [ WHERE predicate ]             -- only the control rows that match
    [ SHARD i OF n ]                -- this worker's share (i from 0): n workers copy all
    [ CONCURRENCY n ]               -- copies at a time (default 4)
    [ DRY RUN ]",
        example: "COPY INCREMENTAL USING CONTROL TABLE ops.watermarks WHERE active CONCURRENCY 8",
    },
    Syntax {
        name: "COPY INTO",
        about: "load CSV, JSON or Parquet files into a table, each file once, ever",
        grammar: "COPY INTO table [ BY POSITION | ( column [, ...] ) ]   -- by position: headerless CSV
    FROM 'path' | FROM ( SELECT items FROM 'path' )       -- a directory, a file or a glob
    FILEFORMAT = CSV | JSON | PARQUET
    [ FILES = ( 'name' [, ...] ) | PATTERN = 'glob' ]      -- relative to the path
    [ FORMAT_OPTIONS ( 'header' = 'true', 'sep' = ';', ... ) ]
    [ COPY_OPTIONS ( 'force' = 'true', 'mergeSchema' = 'true' ) ]
SELECT ... FROM read_files( 'path' [, format => 'csv', header => true, schema => 'a INT, ...', ... ] )",
        example: "COPY INTO lake.orders FROM '/data/drop/orders' FILEFORMAT = CSV FORMAT_OPTIONS ('header' = 'true')",
    },
    Syntax {
        name: "CREATE CONNECTION",
        about: "a database server and how to log in (credentials only as secrets)",
        grammar: "CREATE CONNECTION [ IF NOT EXISTS ] name TYPE postgresql | mysql | sqlite
    OPTIONS ( host 'h', port 'p', user 'u', password secret('scope', 'key'), sslmode 'm' )
    [ COMMENT 'text' ]                        -- sqlite: OPTIONS ( path '/file.db' )
CREATE FOREIGN CATALOG [ IF NOT EXISTS ] catalog USING CONNECTION name [ OPTIONS ( database 'db' ) ]
DROP CONNECTION [ IF EXISTS ] name;  SHOW CONNECTIONS;  DESCRIBE CONNECTION name",
        example: "CREATE CONNECTION shop_pg TYPE postgresql OPTIONS (host 'db', port '5432', user 'me', password secret('shop', 'pg'))",
    },
    Syntax {
        name: "FOR EACH",
        about: "run statements once per row of a query, several rows at a time",
        grammar: "FOR EACH row IN ( query ) [ CONCURRENCY n ]
DO
    statement; [ statement; ... ]   -- row.col or col is the row's value
END FOR

FOR [ var AS ] query DO statement; [ ... ] END FOR   -- Databricks scripting: one at a time",
        example: "FOR EACH r IN (SELECT * FROM ops.watermarks) CONCURRENCY 4 DO COPY INCREMENTAL IDENTIFIER(r.source_table) INTO IDENTIFIER(r.target_table) WATERMARK IDENTIFIER(r.watermark_column) CONTROL TABLE ops.watermarks; END FOR",
    },
    Syntax {
        name: "SELECT",
        about: "query tables (DataFusion's SELECT with Databricks functions)",
        grammar: "[ WITH name AS ( query ) [, ...] ]
SELECT [ DISTINCT ] expr [ AS alias ] [, ...]
    [ FROM table [ VERSION AS OF n | TIMESTAMP AS OF 'ts' ] [ TABLESAMPLE (n ROWS | p PERCENT) ] [ JOIN ... ] ]
    [ WHERE predicate ] [ GROUP BY ... ] [ HAVING ... ] [ QUALIFY ... ]
    [ ORDER BY ... ] [ LIMIT n ] [ OFFSET n ]",
        example: "SELECT id, count(*) FROM range(10) GROUP BY id ORDER BY id LIMIT 3",
    },
    Syntax {
        name: "INSERT",
        about: "append (or overwrite with) rows",
        grammar: "INSERT { INTO | OVERWRITE } [ TABLE ] table [ ( column [, ...] ) ] { VALUES ( { expr | DEFAULT } [, ...] ) [, ...] | query }
INSERT { INTO | OVERWRITE } [ TABLE ] table BY NAME query   -- columns matched by name
INSERT INTO [ TABLE ] table REPLACE WHERE predicate query   -- replace the rows it selects",
        example: "INSERT INTO t (id, name) VALUES (1, 'a'), (2, 'b')",
    },
    Syntax {
        name: "UPDATE",
        about: "change rows in place (one commit)",
        grammar: "UPDATE table [ [ AS ] alias ] SET column = expr [, ...] [ WHERE predicate ]",
        example: "UPDATE t SET name = upper(name) WHERE id > 1",
    },
    Syntax {
        name: "DELETE",
        about: "remove rows (one commit)",
        grammar: "DELETE FROM table [ [ AS ] alias ] [ WHERE predicate ]",
        example: "DELETE FROM t WHERE id > 1",
    },
    Syntax {
        name: "MERGE",
        about: "upsert a source into a table",
        grammar: "MERGE INTO target [ [ AS ] t ] USING source [ [ AS ] s ] ON condition
    WHEN MATCHED [ AND cond ] THEN { UPDATE SET * | UPDATE SET col = expr [, ...] | DELETE }
    WHEN NOT MATCHED [ BY TARGET ] [ AND cond ] THEN { INSERT * | INSERT ( cols ) VALUES ( exprs ) }
    WHEN NOT MATCHED BY SOURCE [ AND cond ] THEN { UPDATE SET ... | DELETE }",
        example: "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    },
    Syntax {
        name: "CREATE TABLE",
        about: "create a Delta table, empty or from a query",
        grammar: "CREATE [ OR REPLACE ] TABLE [ IF NOT EXISTS ] table
    ( column type [ NOT NULL ] [ DEFAULT expr ] [ COMMENT 'text' ] [, ...] )
    [ USING DELTA ] [ PARTITIONED BY ( column [, ...] ) ] [ TBLPROPERTIES ( 'key' = 'value' [, ...] ) ]
CREATE [ OR REPLACE ] TABLE table [ PARTITIONED BY ( ... ) ] AS query
CREATE TABLE [ IF NOT EXISTS ] table [ DEEP ] CLONE source [ VERSION AS OF n | TIMESTAMP AS OF 'ts' ]
    [ TBLPROPERTIES ( ... ) ]        -- a copy of the source's files and metadata",
        example: "CREATE TABLE IF NOT EXISTS t (id BIGINT NOT NULL, name STRING DEFAULT 'x') PARTITIONED BY (name)",
    },
    Syntax {
        name: "CREATE SCHEMA",
        about: "create a schema (a folder of tables)",
        grammar: "CREATE { SCHEMA | DATABASE } [ IF NOT EXISTS ] [ catalog. ]schema",
        example: "CREATE SCHEMA IF NOT EXISTS main.ops",
    },
    Syntax {
        name: "CREATE CATALOG",
        about: "create a catalog (a folder of schemas)",
        grammar: "CREATE CATALOG [ IF NOT EXISTS ] catalog",
        example: "CREATE CATALOG IF NOT EXISTS lake",
    },
    Syntax {
        name: "DROP",
        about: "drop a table, view, schema or catalog",
        grammar: "DROP TABLE [ IF EXISTS ] table
DROP VIEW [ IF EXISTS ] view
DROP { SCHEMA | DATABASE } [ IF EXISTS ] schema [ CASCADE ]
DROP CATALOG [ IF EXISTS ] catalog [ CASCADE ]",
        example: "DROP TABLE IF EXISTS t",
    },
    Syntax {
        name: "CREATE VIEW",
        about: "name a query; persistent views live in the warehouse, temporary ones in the session",
        grammar: "CREATE [ OR REPLACE ] [ TEMP | TEMPORARY ] VIEW [ IF NOT EXISTS ] view
    [ ( column [, ...] ) ] [ COMMENT 'text' ] AS query",
        example: "CREATE OR REPLACE VIEW eu_orders AS SELECT * FROM orders WHERE region = 'eu'",
    },
    Syntax {
        name: "ALTER TABLE",
        about: "add columns or constraints, set properties, rename, change a column",
        grammar: "ALTER TABLE table ADD COLUMN[S] ( column type [ DEFAULT expr ] [, ...] )
ALTER TABLE table ADD CONSTRAINT name CHECK ( condition )
ALTER TABLE table DROP CONSTRAINT [ IF EXISTS ] name
ALTER TABLE table SET TBLPROPERTIES ( 'key' = 'value' [, ...] )
ALTER TABLE table RENAME TO [ schema. ]new_name
ALTER TABLE table { ALTER | CHANGE } [ COLUMN ] column
    { SET DEFAULT expr | DROP DEFAULT | SET NOT NULL | DROP NOT NULL | COMMENT 'text' }",
        example: "ALTER TABLE t ALTER COLUMN id SET NOT NULL",
    },
    Syntax {
        name: "TRUNCATE TABLE",
        about: "remove every row, or a partition's (one commit)",
        grammar: "TRUNCATE TABLE table [ PARTITION ( column = value [, ...] ) ]",
        example: "TRUNCATE TABLE t",
    },
    Syntax {
        name: "RESTORE TABLE",
        about: "make a table read as it did at an older version (one commit)",
        grammar: "RESTORE [ TABLE ] table [ TO ] { VERSION AS OF n | TIMESTAMP AS OF timestamp }",
        example: "RESTORE TABLE t TO VERSION AS OF 3",
    },
    Syntax {
        name: "COMMENT ON",
        about: "set or remove a table's or column's comment",
        grammar: "COMMENT ON TABLE table IS { 'text' | NULL }
COMMENT ON COLUMN table.column IS { 'text' | NULL }",
        example: "COMMENT ON TABLE t IS 'orders, copied nightly'",
    },
    Syntax {
        name: "DESCRIBE",
        about: "a table's columns, its commit history, or its details",
        grammar: "DESCRIBE [ TABLE ] [ EXTENDED ] table
DESCRIBE HISTORY table
DESCRIBE DETAIL table",
        example: "DESCRIBE HISTORY t",
    },
    Syntax {
        name: "SHOW",
        about: "list catalogs, schemas, tables, columns, partitions or properties; a table's CREATE",
        grammar: "SHOW CATALOGS [ [ LIKE ] 'pattern' ]
SHOW { SCHEMAS | DATABASES } [ { IN | FROM } catalog ] [ [ LIKE ] 'pattern' ]
SHOW TABLES [ { IN | FROM } [ catalog. ]schema ] [ [ LIKE ] 'pattern' ]
SHOW VIEWS [ { IN | FROM } [ catalog. ]schema ] [ [ LIKE ] 'pattern' ]
SHOW COLUMNS { IN | FROM } table [ { IN | FROM } schema ]
SHOW PARTITIONS table [ PARTITION ( column = value [, ...] ) ]
SHOW TBLPROPERTIES table [ ( key ) ]
SHOW CREATE TABLE table
SHOW [ USER | SYSTEM | ALL ] FUNCTIONS [ { IN | FROM } schema ] [ [ LIKE ] 'pattern' ]",
        example: "SHOW TABLES IN main.default",
    },
    Syntax {
        name: "CREATE FUNCTION",
        about: "a SQL function: scalar (RETURN expr) or table (RETURNS TABLE ... RETURN query)",
        grammar: "CREATE [ OR REPLACE ] [ TEMPORARY ] FUNCTION [ IF NOT EXISTS ] name
    ( [ param type [ DEFAULT expr ] [ COMMENT 'text' ] [, ...] ] )
    { [ RETURNS type ] | RETURNS TABLE [ ( column type [, ...] ) ] }
    [ COMMENT 'text' ] [ [ NOT ] DETERMINISTIC ] [ LANGUAGE SQL ]
    RETURN { expr | query }
DROP [ TEMPORARY ] FUNCTION [ IF EXISTS ] name
DESCRIBE FUNCTION [ EXTENDED ] name
SHOW [ USER | SYSTEM | ALL ] FUNCTIONS [ { IN | FROM } schema ] [ [ LIKE ] 'pattern' ]",
        example: "CREATE OR REPLACE FUNCTION add_tax(amount DECIMAL(10,2), rate DECIMAL(4,3) DEFAULT 0.2) RETURNS DECIMAL(12,2) RETURN amount * (1 + rate)",
    },
    Syntax {
        name: "BEGIN",
        about: "a compound statement (SQL scripting): variables, loops, conditions, handlers",
        grammar: "[ label: ] BEGIN
    [ DECLARE name type [ DEFAULT expr ]; ... ]
    [ DECLARE name CONDITION [ FOR SQLSTATE 'xxxxx' ]; ... ]
    [ DECLARE { CONTINUE | EXIT } HANDLER FOR { SQLEXCEPTION | SQLSTATE 'xxxxx' | condition } [, ...] statement; ... ]
    statement; ...
END [ label ]
statements: any statement, SET VAR, nested BEGIN ... END,
    IF cond THEN ... [ ELSEIF cond THEN ... ] [ ELSE ... ] END IF
    CASE [ expr ] WHEN value THEN ... [ ELSE ... ] END CASE
    [ label: ] WHILE cond DO ... END WHILE [ label ]
    [ label: ] REPEAT ... UNTIL cond END REPEAT [ label ]
    [ label: ] LOOP ... END LOOP [ label ]
    [ label: ] FOR [ var AS ] query DO ... END FOR [ label ]
    LEAVE label | ITERATE label
    SIGNAL { condition | SQLSTATE 'xxxxx' } [ SET MESSAGE_TEXT = expr ] | RESIGNAL",
        example: "BEGIN DECLARE n INT DEFAULT 0; WHILE n < 3 DO SET VAR n = n + 1; END WHILE; SELECT n; END",
    },
    Syntax {
        name: "EXECUTE IMMEDIATE",
        about: "run a statement given as a string, its parameters bound as values",
        grammar: "EXECUTE IMMEDIATE sql_string [ INTO var [, ...] ] [ USING expr [ AS name ] [, ...] ]
    -- ? takes the next unnamed USING value, :name the one named name",
        example: "EXECUTE IMMEDIATE 'SELECT count(*) FROM t WHERE id > ?' USING 10",
    },
    Syntax {
        name: "USE",
        about: "set the current catalog and schema",
        grammar: "USE CATALOG catalog
USE { SCHEMA | DATABASE } schema
USE [ catalog. ]schema",
        example: "USE main.default",
    },
    Syntax {
        name: "OPTIMIZE",
        about: "compact a table's small files",
        grammar: "OPTIMIZE table [ WHERE partition_predicate ] [ ZORDER BY ( column [, ...] ) ]",
        example: "OPTIMIZE events WHERE day >= DATE '2024-01-01' ZORDER BY (user_id)",
    },
    Syntax {
        name: "VACUUM",
        about: "remove files no version within the retention reads",
        grammar: "VACUUM table [ RETAIN n HOURS ] [ DRY RUN ]",
        example: "VACUUM t RETAIN 168 HOURS DRY RUN",
    },
    Syntax {
        name: "DECLARE VARIABLE",
        about: "declare a session variable",
        grammar: "DECLARE [ OR REPLACE ] [ VARIABLE ] name [ type ] [ { DEFAULT | = } expr ]",
        example: "DECLARE OR REPLACE VARIABLE since TIMESTAMP DEFAULT current_timestamp()",
    },
    Syntax {
        name: "SET VAR",
        about: "assign session variables",
        grammar: "SET { VAR | VARIABLE } name = { expr | DEFAULT } [, ...]
SET { VAR | VARIABLE } ( name [, ...] ) = ( query )",
        example: "SET VAR since = DEFAULT",
    },
    Syntax {
        name: "SET TIME ZONE",
        about: "set the session's time zone: TIMESTAMPs read, show and split into fields in it",
        grammar: "SET TIME ZONE { 'zone' | LOCAL | INTERVAL offset }
SET TIMEZONE = 'zone'",
        example: "SET TIME ZONE 'America/Los_Angeles'",
    },
    Syntax {
        name: "DROP TEMPORARY VARIABLE",
        about: "drop a session variable",
        grammar: "DROP TEMPORARY VARIABLE [ IF EXISTS ] name",
        example: "DROP TEMPORARY VARIABLE IF EXISTS since",
    },
    Syntax {
        name: "EXPLAIN",
        about: "show a query's plan",
        grammar: "EXPLAIN [ ANALYZE ] [ VERBOSE ] query",
        example: "EXPLAIN SELECT * FROM range(3)",
    },
];

/// The entries `\h NAME` shows: the one named exactly, else those whose name starts with
/// the words given (`\h CREATE` shows every CREATE).
pub fn lookup(name: &str) -> Vec<&'static Syntax> {
    let wanted = name
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_uppercase();
    if let Some(exact) = STATEMENTS.iter().find(|s| s.name == wanted) {
        return vec![exact];
    }
    STATEMENTS
        .iter()
        .filter(|s| {
            s.name.starts_with(&wanted)
                && s.name[wanted.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| c == ' ')
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::{SyntaxOnly, parse};

    /// Every example in the help parses: the help describes the parser that runs.
    #[test]
    fn every_example_parses() {
        for s in STATEMENTS {
            if let Err(e) = parse(s.example, &SyntaxOnly) {
                panic!("{}: {} does not parse: {e}", s.name, s.example);
            }
        }
    }

    #[test]
    fn lookup_by_name_and_by_first_words() {
        assert_eq!(lookup("copy  incremental").len(), 1);
        assert_eq!(lookup("copy").len(), 3);
        assert_eq!(lookup("create").len(), 6);
        assert_eq!(lookup("for each")[0].name, "FOR EACH");
        assert!(lookup("grant").is_empty());
        assert!(lookup("SE").is_empty());
    }
}
