//! Every clause the parser accepts is honoured or refused by name. sqlparser parses many
//! dialects' clauses into one syntax tree; the statements tidemark runs pass their nodes
//! through here, destructured with no `..`, so a clause tidemark does not implement is an
//! error naming it, and a field a new sqlparser release adds does not compile until someone
//! decides whether tidemark honours it.

use datafusion::sql::sqlparser::ast::{
    CreateTable, HiveDistributionStyle, HiveFormat, HiveIOFormat, Insert,
};

use crate::error::{Error, Result};

/// The error for a clause tidemark parses but does not run.
fn refused(statement: &str, clause: &str, hint: &str) -> Error {
    Error::class(
        "UNSUPPORTED_FEATURE",
        format!("{statement}: {clause} is not supported{hint}"),
    )
}

/// The first clause of `clauses` that is present, as an error.
fn first_present(statement: &str, clauses: &[(bool, &str)]) -> Result<()> {
    match clauses.iter().find(|(present, _)| *present) {
        Some((_, clause)) => Err(refused(statement, clause, "")),
        None => Ok(()),
    }
}

/// `CREATE TABLE`: columns, `PARTITIONED BY`, `USING DELTA`, `COMMENT`, `TBLPROPERTIES`,
/// `OPTIONS`, `AS query`, `OR REPLACE`, `IF NOT EXISTS` are honoured; every other clause is
/// refused by name.
pub fn create_table(c: &CreateTable) -> Result<()> {
    let CreateTable {
        or_replace: _,
        temporary,
        external,
        dynamic,
        global,
        if_not_exists: _,
        transient,
        volatile,
        iceberg,
        snapshot,
        name: _,
        columns: _,
        constraints: _, // refused with advice by `ddl::create_table`
        hive_distribution,
        hive_formats,
        table_options: _, // checked by `ddl::create_table`
        file_format,
        location,
        query: _,
        without_rowid,
        like,
        clone,
        version,
        comment: _,
        on_commit,
        on_cluster,
        primary_key,
        order_by,
        partition_by: _,
        cluster_by,
        clustered_by,
        inherits,
        partition_of,
        for_values,
        strict,
        copy_grants,
        enable_schema_evolution,
        change_tracking,
        data_retention_time_in_days,
        max_data_extension_time_in_days,
        default_ddl_collation,
        with_aggregation_policy,
        with_row_access_policy,
        with_storage_lifecycle_policy,
        with_tags,
        external_volume,
        base_location,
        catalog,
        catalog_sync,
        storage_serialization_policy,
        target_lag,
        warehouse,
        refresh_mode,
        initialize,
        require_user,
        diststyle,
        distkey,
        sortkey,
        backup,
    } = c;
    let stmt = "CREATE TABLE";
    let (row_format, serde_properties, storage, hive_location) = match hive_formats {
        Some(HiveFormat {
            row_format,
            serde_properties,
            storage,
            location,
        }) => (
            row_format.is_some(),
            serde_properties.is_some(),
            storage.as_ref(),
            location.as_ref(),
        ),
        None => (false, false, None, None),
    };
    if location.is_some() || hive_location.is_some() || *external {
        return Err(refused(
            stmt,
            "LOCATION (an external table)",
            ": tidemark keeps every table in its warehouse directory; leave LOCATION out, or read the Delta table at that path with COPY INCREMENTAL once external tables are supported",
        ));
    }
    match storage {
        None => {}
        Some(HiveIOFormat::Using { format }) if format.value.eq_ignore_ascii_case("delta") => {}
        Some(HiveIOFormat::Using { format }) => {
            return Err(refused(
                stmt,
                &format!("USING {format}"),
                ": every tidemark table is a Delta table (write USING DELTA or leave USING out)",
            ));
        }
        Some(HiveIOFormat::FileFormat { format }) => {
            return Err(refused(
                stmt,
                &format!("STORED AS {format}"),
                ": every tidemark table is a Delta table",
            ));
        }
        Some(HiveIOFormat::IOF { .. }) => {
            return Err(refused(
                stmt,
                "STORED AS INPUTFORMAT ... OUTPUTFORMAT",
                ": every tidemark table is a Delta table",
            ));
        }
    }
    if let HiveDistributionStyle::SKEWED { .. } = hive_distribution {
        return Err(refused(stmt, "SKEWED BY", ""));
    }
    first_present(
        stmt,
        &[
            (*temporary, "TEMPORARY"),
            (*dynamic, "DYNAMIC"),
            (global.is_some(), "GLOBAL/LOCAL"),
            (*transient, "TRANSIENT"),
            (*volatile, "VOLATILE"),
            (*iceberg, "ICEBERG"),
            (*snapshot, "SNAPSHOT"),
            (row_format, "ROW FORMAT"),
            (serde_properties, "WITH SERDEPROPERTIES"),
            (file_format.is_some(), "STORED AS"),
            (*without_rowid, "WITHOUT ROWID"),
            (like.is_some(), "LIKE"),
            (clone.is_some(), "CLONE"),
            (version.is_some(), "VERSION AS OF"),
            (on_commit.is_some(), "ON COMMIT"),
            (on_cluster.is_some(), "ON CLUSTER"),
            (primary_key.is_some(), "PRIMARY KEY"),
            (order_by.is_some(), "ORDER BY"),
            (cluster_by.is_some(), "CLUSTER BY (liquid clustering)"),
            (clustered_by.is_some(), "CLUSTERED BY (bucketing)"),
            (inherits.is_some(), "INHERITS"),
            (partition_of.is_some(), "PARTITION OF"),
            (for_values.is_some(), "FOR VALUES"),
            (*strict, "STRICT"),
            (*copy_grants, "COPY GRANTS"),
            (enable_schema_evolution.is_some(), "ENABLE_SCHEMA_EVOLUTION"),
            (change_tracking.is_some(), "CHANGE_TRACKING"),
            (
                data_retention_time_in_days.is_some(),
                "DATA_RETENTION_TIME_IN_DAYS",
            ),
            (
                max_data_extension_time_in_days.is_some(),
                "MAX_DATA_EXTENSION_TIME_IN_DAYS",
            ),
            (default_ddl_collation.is_some(), "DEFAULT_DDL_COLLATION"),
            (with_aggregation_policy.is_some(), "WITH AGGREGATION POLICY"),
            (with_row_access_policy.is_some(), "WITH ROW ACCESS POLICY"),
            (
                with_storage_lifecycle_policy.is_some(),
                "WITH STORAGE LIFECYCLE POLICY",
            ),
            (with_tags.is_some(), "WITH TAG"),
            (external_volume.is_some(), "EXTERNAL_VOLUME"),
            (base_location.is_some(), "BASE_LOCATION"),
            (catalog.is_some(), "CATALOG"),
            (catalog_sync.is_some(), "CATALOG_SYNC"),
            (
                storage_serialization_policy.is_some(),
                "STORAGE_SERIALIZATION_POLICY",
            ),
            (target_lag.is_some(), "TARGET_LAG"),
            (warehouse.is_some(), "WAREHOUSE"),
            (refresh_mode.is_some(), "REFRESH_MODE"),
            (initialize.is_some(), "INITIALIZE"),
            (*require_user, "REQUIRE USER"),
            (diststyle.is_some(), "DISTSTYLE"),
            (distkey.is_some(), "DISTKEY"),
            (sortkey.is_some(), "SORTKEY"),
            (backup.is_some(), "BACKUP"),
        ],
    )
}

/// `INSERT INTO|OVERWRITE [TABLE] t [(cols)] {VALUES|query}` is honoured; every other
/// clause is refused by name.
pub fn insert(i: &Insert) -> Result<()> {
    let Insert {
        insert_token: _,
        optimizer_hints: _, // hints only: they never change a result
        or,
        ignore,
        into: _,
        table: _,
        table_alias,
        columns: _,
        overwrite: _,
        source: _,
        assignments,
        partitioned,
        after_columns,
        has_table_keyword: _,
        on,
        returning,
        output,
        replace_into,
        priority,
        insert_alias,
        settings,
        format_clause,
        multi_table_insert_type,
        multi_table_into_clauses,
        multi_table_when_clauses,
        multi_table_else_clause,
    } = i;
    first_present(
        "INSERT",
        &[
            (or.is_some(), "INSERT OR ..."),
            (*ignore, "IGNORE"),
            (table_alias.is_some(), "a table alias"),
            (!assignments.is_empty(), "SET column = value"),
            (
                partitioned.is_some(),
                "PARTITION (...) (list the partition column's value in the row instead)",
            ),
            (!after_columns.is_empty(), "columns after PARTITION"),
            (
                on.is_some(),
                "ON CONFLICT / ON DUPLICATE KEY (use MERGE INTO)",
            ),
            (returning.is_some(), "RETURNING"),
            (output.is_some(), "OUTPUT"),
            (*replace_into, "REPLACE INTO (use MERGE INTO)"),
            (priority.is_some(), "a priority"),
            (insert_alias.is_some(), "AS alias"),
            (settings.is_some(), "SETTINGS"),
            (format_clause.is_some(), "FORMAT"),
            (
                multi_table_insert_type.is_some()
                    || !multi_table_into_clauses.is_empty()
                    || !multi_table_when_clauses.is_empty()
                    || multi_table_else_clause.is_some(),
                "multi-table INSERT",
            ),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::Statement as Sql;

    fn check(sql: &str) -> Result<()> {
        // Through tidemark's own parser: the whole statement must parse.
        let stmt = crate::parser::parse(sql, &crate::parser::SyntaxOnly)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        match stmt {
            crate::parser::Statement::Sql(s) => match *s {
                Sql::CreateTable(c) => create_table(&c),
                Sql::Insert(i) => insert(&i),
                other => panic!("not covered: {other}"),
            },
            other => panic!("not covered: {other}"),
        }
    }

    #[test]
    fn honoured_create_table_clauses_pass() {
        for sql in [
            "CREATE TABLE t (a INT) USING DELTA PARTITIONED BY (a) TBLPROPERTIES ('x' = '1')",
            "CREATE OR REPLACE TABLE t AS SELECT 1 AS a",
            "CREATE TABLE IF NOT EXISTS t (a INT)",
        ] {
            check(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }

    #[test]
    fn other_create_table_clauses_are_refused_by_name() {
        for (sql, named) in [
            ("CREATE TABLE t (a INT) LOCATION '/tmp/x'", "LOCATION"),
            ("CREATE EXTERNAL TABLE t (a INT)", "LOCATION"),
            ("CREATE TABLE t (a INT) STORED AS PARQUET", "STORED AS"),
            ("CREATE TEMPORARY TABLE t (a INT)", "TEMPORARY"),
            ("CREATE TABLE t LIKE s", "LIKE"),
        ] {
            let e = check(sql).expect_err(sql).to_string();
            assert!(e.contains(named), "{sql}: {e}");
            assert!(e.contains("not supported"), "{sql}: {e}");
        }
    }

    #[test]
    fn other_insert_clauses_are_refused_by_name() {
        check("INSERT INTO t VALUES (1)").unwrap();
        check("INSERT OVERWRITE TABLE t SELECT 1").unwrap();
        check("INSERT INTO t (a) SELECT 1").unwrap();
        for (sql, named) in [
            ("INSERT INTO t PARTITION (p = 1) VALUES (1)", "PARTITION"),
            (
                "INSERT INTO t VALUES (1) ON CONFLICT (a) DO NOTHING",
                "ON CONFLICT",
            ),
            ("INSERT INTO t VALUES (1) RETURNING a", "RETURNING"),
        ] {
            let e = check(sql).expect_err(sql).to_string();
            assert!(e.contains(named), "{sql}: {e}");
        }
    }
}
