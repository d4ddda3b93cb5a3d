//! Every clause the parser accepts is honoured or refused by name. sqlparser parses many
//! dialects' clauses into one syntax tree; the statements tidemark runs pass their nodes
//! through here, destructured with no `..`, so a clause tidemark does not implement is an
//! error naming it, and a field a new sqlparser release adds does not compile until someone
//! decides whether tidemark honours it.

use datafusion::sql::sqlparser::ast::{
    CreateTable, Delete, HiveDistributionStyle, HiveFormat, HiveIOFormat, Insert, Merge,
    MergeAction, MergeClause, MergeInsertExpr, MergeUpdateExpr, ObjectName, ObjectType, SchemaName,
    Statement, TableFactor, TableWithJoins, Update,
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
    let (row_format, serde_properties) = table_format(
        stmt,
        *external && location.is_none(),
        hive_formats,
        hive_distribution,
    )?;
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

/// The table's format and place: a Delta table (USING DELTA or nothing), in the warehouse or
/// at a LOCATION (`ddl::create_table`), no Hive storage clauses. Returns whether ROW FORMAT and
/// SERDEPROPERTIES appear.
fn table_format(
    stmt: &str,
    external_without_location: bool,
    hive_formats: &Option<HiveFormat>,
    hive_distribution: &HiveDistributionStyle,
) -> Result<(bool, bool)> {
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
    if external_without_location && hive_location.is_none() {
        return Err(refused(
            stmt,
            "EXTERNAL without LOCATION",
            ": an external table lives at a LOCATION (CREATE TABLE t ... LOCATION 's3://bucket/path')",
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
    Ok((row_format, serde_properties))
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
        partitioned: _, // static partition values: INSERT fills them in
        after_columns: _,
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

/// The table a statement writes: a name with an optional alias; every other clause of a
/// table reference (time travel, a sample, hints, partitions, arguments) is refused by name.
pub fn target_table(statement: &str, t: &TableFactor) -> Result<()> {
    let TableFactor::Table {
        name: _,
        alias,
        args,
        with_hints,
        version,
        with_ordinality,
        partitions,
        json_path,
        sample,
        index_hints,
    } = t
    else {
        return Err(refused(statement, "a target that is not a table", ""));
    };
    first_present(
        statement,
        &[
            (
                alias.as_ref().is_some_and(|a| !a.columns.is_empty()),
                "an alias with column names",
            ),
            (args.is_some(), "table arguments"),
            (!with_hints.is_empty(), "WITH (hints)"),
            (
                version.is_some(),
                "VERSION/TIMESTAMP AS OF on the table written (an old version is read-only)",
            ),
            (*with_ordinality, "WITH ORDINALITY"),
            (!partitions.is_empty(), "PARTITION (...) (use WHERE)"),
            (json_path.is_some(), "a JSON path"),
            (sample.is_some(), "TABLESAMPLE on the table written"),
            (!index_hints.is_empty(), "index hints"),
        ],
    )
}

/// One written table and no joins.
fn single_target(statement: &str, t: &TableWithJoins) -> Result<()> {
    let TableWithJoins { relation, joins } = t;
    if !joins.is_empty() {
        return Err(refused(
            statement,
            "a join",
            " (use MERGE to combine tables)",
        ));
    }
    target_table(statement, relation)
}

/// `UPDATE t SET ... [WHERE ...]`; `FROM`, `RETURNING`, `ORDER BY`, `LIMIT` ... are refused.
pub fn update(u: &Update) -> Result<()> {
    let Update {
        update_token: _,
        optimizer_hints: _, // hints only: they never change a result
        table,
        assignments: _,
        from,
        selection: _,
        returning,
        output,
        or,
        order_by,
        limit,
    } = u;
    single_target("UPDATE", table)?;
    first_present(
        "UPDATE",
        &[
            (from.is_some(), "UPDATE ... FROM (use MERGE INTO)"),
            (returning.is_some(), "RETURNING"),
            (output.is_some(), "OUTPUT"),
            (or.is_some(), "UPDATE OR ..."),
            (!order_by.is_empty(), "ORDER BY"),
            (limit.is_some(), "LIMIT"),
        ],
    )
}

/// `DELETE FROM t [WHERE ...]`; `USING`, `RETURNING`, `ORDER BY`, `LIMIT`, several tables ...
/// are refused.
pub fn delete(d: &Delete) -> Result<()> {
    use datafusion::sql::sqlparser::ast::FromTable;
    let Delete {
        delete_token: _,
        optimizer_hints: _,
        tables,
        from,
        using,
        selection: _,
        returning,
        output,
        order_by,
        limit,
    } = d;
    let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = from;
    match from.as_slice() {
        [one] => single_target("DELETE", one)?,
        _ => return Err(refused("DELETE", "several tables", "")),
    }
    first_present(
        "DELETE",
        &[
            (!tables.is_empty(), "DELETE t1, t2 FROM ..."),
            (
                using.is_some(),
                "DELETE ... USING (use MERGE INTO ... WHEN MATCHED THEN DELETE)",
            ),
            (returning.is_some(), "RETURNING"),
            (output.is_some(), "OUTPUT"),
            (!order_by.is_empty(), "ORDER BY"),
            (limit.is_some(), "LIMIT"),
        ],
    )
}

/// `MERGE INTO t USING s ON ... WHEN [NOT] MATCHED [BY SOURCE|TARGET] [AND ...] THEN ...`;
/// `OUTPUT`, `UPDATE ... WHERE`, `DELETE WHERE` and `INSERT ... WHERE` (Oracle) are refused.
pub fn merge(m: &Merge) -> Result<()> {
    let Merge {
        merge_token: _,
        optimizer_hints: _,
        into: _,
        table,
        source,
        on: _,
        clauses,
        output,
    } = m;
    target_table("MERGE", table)?;
    let renamed = |alias: &Option<datafusion::sql::sqlparser::ast::TableAlias>| {
        alias.as_ref().is_some_and(|a| !a.columns.is_empty())
    };
    match source {
        // Read as a query: its other clauses go through the planner.
        TableFactor::Table { alias, .. } => first_present(
            "MERGE",
            &[(renamed(alias), "a source alias with column names")],
        )?,
        TableFactor::Derived {
            lateral,
            subquery: _,
            alias,
            sample,
        } => first_present(
            "MERGE",
            &[
                (*lateral, "a LATERAL source"),
                (sample.is_some(), "TABLESAMPLE on a source subquery"),
                (
                    renamed(alias),
                    "a source alias with column names (name the columns in the subquery)",
                ),
            ],
        )?,
        _ => {
            return Err(refused(
                "MERGE",
                "a source that is not a table or a subquery",
                "",
            ));
        }
    }
    if output.is_some() {
        return Err(refused("MERGE", "OUTPUT", ""));
    }
    for c in clauses {
        let MergeClause {
            when_token: _,
            clause_kind: _,
            predicate: _,
            action,
        } = c;
        match action {
            MergeAction::Update(MergeUpdateExpr {
                update_token: _,
                assignments: _,
                update_predicate,
                delete_predicate,
            }) => first_present(
                "MERGE",
                &[
                    (
                        update_predicate.is_some(),
                        "UPDATE SET ... WHERE (put the condition in WHEN MATCHED AND ...)",
                    ),
                    (delete_predicate.is_some(), "UPDATE ... DELETE WHERE"),
                ],
            )?,
            MergeAction::Insert(MergeInsertExpr {
                insert_token: _,
                columns: _,
                kind_token: _,
                kind: _,
                insert_predicate,
            }) => first_present(
                "MERGE",
                &[(
                    insert_predicate.is_some(),
                    "INSERT ... WHERE (put the condition in WHEN NOT MATCHED AND ...)",
                )],
            )?,
            MergeAction::Delete { .. } => {}
        }
    }
    Ok(())
}

/// `CREATE SCHEMA [IF NOT EXISTS] name`; `WITH`, `OPTIONS`, `DEFAULT COLLATE`, `CLONE` and
/// `AUTHORIZATION` are refused.
pub fn create_schema(stmt: &Statement) -> Result<(&SchemaName, bool)> {
    let Statement::CreateSchema {
        schema_name,
        if_not_exists,
        with,
        options,
        default_collate_spec,
        clone,
    } = stmt
    else {
        return Err(refused("CREATE SCHEMA", "another statement", ""));
    };
    first_present(
        "CREATE SCHEMA",
        &[
            (
                !matches!(schema_name, SchemaName::Simple(_)),
                "AUTHORIZATION",
            ),
            (with.is_some(), "WITH (...)"),
            (options.is_some(), "OPTIONS (...)"),
            (default_collate_spec.is_some(), "DEFAULT COLLATE"),
            (clone.is_some(), "CLONE"),
        ],
    )?;
    Ok((schema_name, *if_not_exists))
}

/// `DROP {TABLE | SCHEMA | ...} [IF EXISTS] names [CASCADE | RESTRICT]` (RESTRICT is what
/// DROP does without CASCADE); `PURGE`, `TEMPORARY` and `ON table` are refused.
pub fn drop(stmt: &Statement) -> Result<Drop<'_>> {
    let Statement::Drop {
        object_type,
        if_exists,
        names,
        cascade,
        restrict,
        purge,
        temporary,
        table,
    } = stmt
    else {
        return Err(refused("DROP", "another statement", ""));
    };
    first_present(
        "DROP",
        &[
            (*cascade && *restrict, "CASCADE together with RESTRICT"),
            (*purge, "PURGE"),
            (*temporary, "TEMPORARY"),
            (table.is_some(), "ON table"),
        ],
    )?;
    Ok(Drop {
        object_type: *object_type,
        if_exists: *if_exists,
        names,
        cascade: *cascade,
    })
}

/// What `DROP` does, once its clauses are checked.
pub struct Drop<'a> {
    pub object_type: ObjectType,
    pub if_exists: bool,
    pub names: &'a [ObjectName],
    pub cascade: bool,
}

/// Every query in `stmt` (subqueries, CTEs, INSERT and MERGE sources included) uses only
/// clauses the engine runs. DataFusion's planner refuses most clauses it does not run, but
/// plans past these without a word: row locks (`FOR UPDATE`), `FOR XML/JSON`, `SETTINGS`,
/// `FORMAT`, `PREWHERE`, `CONNECT BY`, `SELECT INTO`, `SELECT AS STRUCT` and MySQL's select
/// modifiers.
pub fn queries(stmt: &Statement) -> Result<()> {
    use datafusion::sql::sqlparser::ast::{Visit, Visitor};
    use std::ops::ControlFlow;
    struct Check;
    impl Visitor for Check {
        type Break = Error;
        fn pre_visit_query(
            &mut self,
            q: &datafusion::sql::sqlparser::ast::Query,
        ) -> ControlFlow<Error> {
            match query(q) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => ControlFlow::Break(e),
            }
        }
    }
    match stmt.visit(&mut Check) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

fn query(q: &datafusion::sql::sqlparser::ast::Query) -> Result<()> {
    use datafusion::sql::sqlparser::ast::Query;
    let Query {
        with: _,
        body,
        order_by: _,
        limit_clause: _,
        fetch: _, // refused by the planner
        locks,
        for_clause,
        settings,
        format_clause,
        pipe_operators: _,
    } = q;
    first_present(
        "SELECT",
        &[
            (
                !locks.is_empty(),
                "FOR UPDATE / FOR SHARE (reads never lock)",
            ),
            (for_clause.is_some(), "FOR XML / FOR JSON"),
            (settings.is_some(), "SETTINGS"),
            (format_clause.is_some(), "FORMAT"),
        ],
    )?;
    set_expr(body)
}

/// The selects of a query body, through UNION / INTERSECT / EXCEPT.
fn set_expr(body: &datafusion::sql::sqlparser::ast::SetExpr) -> Result<()> {
    use datafusion::sql::sqlparser::ast::{Select, SetExpr};
    let select = match body {
        SetExpr::Select(select) => select,
        SetExpr::SetOperation { left, right, .. } => {
            set_expr(left)?;
            return set_expr(right);
        }
        _ => return Ok(()), // nested queries are visited on their own
    };
    let Select {
        select_token: _,
        optimizer_hints: _,
        distinct: _,
        select_modifiers,
        top: _, // refused by the planner
        top_before_distinct: _,
        projection: _,
        exclude,
        into,
        from: _,
        lateral_views: _, // refused by the planner
        prewhere,
        selection: _,
        connect_by,
        group_by: _,
        cluster_by: _, // refused by the planner
        distribute_by: _,
        sort_by: _, // refused by the planner
        having: _,
        named_window: _,
        qualify: _,
        window_before_qualify: _,
        value_table_mode,
        flavor: _,
    } = select.as_ref();
    first_present(
        "SELECT",
        &[
            (select_modifiers.is_some(), "MySQL select modifiers"),
            (exclude.is_some(), "EXCLUDE after the select list"),
            (
                into.is_some(),
                "SELECT ... INTO (use CREATE TABLE ... AS SELECT)",
            ),
            (prewhere.is_some(), "PREWHERE"),
            (!connect_by.is_empty(), "CONNECT BY"),
            (value_table_mode.is_some(), "SELECT AS STRUCT / AS VALUE"),
        ],
    )
}

mod view;
pub use view::create_view;

#[cfg(test)]
mod tests;
