//! Catalogs, schemas and tables: CREATE, DROP, ALTER and USE. Catalogs and schemas are
//! directories; tables are Delta tables created through delta-rs.

use std::collections::HashMap;
use std::sync::Arc;

mod alter;
pub(super) mod clone;
pub(super) mod connection;
pub(super) mod function;
pub(super) mod on_table;
pub(super) mod view;
pub use alter::*;

use datafusion::arrow::datatypes::Field;
use datafusion::dataframe::DataFrame;
use datafusion::sql::sqlparser::ast::{
    ColumnDef, ColumnOption, CreateTable, CreateTableOptions, Expr, GeneratedAs,
    GeneratedExpressionMode, HiveDistributionStyle, Ident, ObjectName, ObjectType, SchemaName,
    SqlOption,
};
use deltalake::kernel::StructField;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::protocol::SaveMode;

use super::table::{COMMENT_KEY, DEFAULT_KEY, keep_stats_exact, normalize_for_storage};
use crate::catalog::{SAMPLES, SYSTEM, TableName, external, quote_ident};
use crate::engine::types::{arrow_to_delta, sql_to_arrow};
use crate::engine::{Output, Session, name_parts};
use crate::error::{Error, Result};
use crate::parser::UseKind;

/// `USE CATALOG c`, `USE SCHEMA s`, `USE c.s`.
pub fn use_(session: &mut Session, kind: UseKind, name: &ObjectName) -> Result<Output> {
    let parts: Vec<String> = name_parts(name)?.iter().map(|p| p.to_lowercase()).collect();
    let (catalog, schema) = match (kind, parts.as_slice()) {
        (UseKind::Catalog, [c]) => (c.clone(), "default".to_string()),
        (UseKind::Schema | UseKind::Plain, [s]) => {
            (session.current_catalog().to_string(), s.clone())
        }
        (UseKind::Schema | UseKind::Plain, [c, s]) => (c.clone(), s.clone()),
        _ => {
            return Err(Error::Invalid(format!(
                "USE expects catalog, schema or catalog.schema, found '{name}'"
            )));
        }
    };
    if !session.warehouse().catalog_exists(&catalog) {
        return Err(session
            .warehouse()
            .missing_table_error(&TableName::new(&catalog, &schema, "_")));
    }
    if kind != UseKind::Catalog && !session.warehouse().schema_exists(&catalog, &schema) {
        return Err(session
            .warehouse()
            .missing_table_error(&TableName::new(&catalog, &schema, "_")));
    }
    session.set_current(catalog, schema);
    Ok(Output::empty())
}

fn check_writable_catalog(catalog: &str) -> Result<()> {
    if catalog == SAMPLES {
        return Err(Error::Invalid(format!("catalog '{SAMPLES}' is read-only")));
    }
    Ok(())
}

/// `CREATE CATALOG [IF NOT EXISTS] c [MANAGED LOCATION 'url']`: with a location, its schemas'
/// tables live under `url/<schema>/<table>`.
pub fn create_catalog(
    session: &Session,
    name: &ObjectName,
    if_not_exists: bool,
    location: Option<&str>,
) -> Result<Output> {
    let parts = name_parts(name)?;
    let [catalog] = parts.as_slice() else {
        return Err(Error::Invalid(format!(
            "a catalog name has one part, found '{name}'"
        )));
    };
    let catalog = catalog.to_lowercase();
    check_writable_catalog(&catalog)?;
    let path = session.warehouse().catalog_path(&catalog)?;
    if path.is_dir() || catalog == SYSTEM {
        if if_not_exists {
            return Ok(Output::empty());
        }
        return Err(Error::AlreadyExists(format!(
            "catalog '{catalog}' already exists (use CREATE CATALOG IF NOT EXISTS)"
        )));
    }
    let url = location.map(external::parse_location).transpose()?;
    if let Some(url) = &url {
        session.warehouse().check_new_location(url)?;
    }
    // On a store the catalog keeps a marker of its own: it outlives its schemas.
    path.make_dir()?;
    path.join("default").make_dir()?;
    if let Some(url) = url {
        external::write_link(&path, &url, false)?;
        external::write_link(
            &path.join("default"),
            &external::child(&url, "default"),
            false,
        )?;
    }
    Ok(Output::empty())
}

/// `DROP CATALOG [IF EXISTS] c [CASCADE]`.
pub async fn drop_catalog(
    session: &Session,
    name: &ObjectName,
    if_exists: bool,
    cascade: bool,
) -> Result<Output> {
    let parts = name_parts(name)?;
    let [catalog] = parts.as_slice() else {
        return Err(Error::Invalid(format!(
            "a catalog name has one part, found '{name}'"
        )));
    };
    let catalog = catalog.to_lowercase();
    if catalog == SAMPLES || catalog == SYSTEM {
        return Err(Error::Invalid(format!(
            "catalog '{catalog}' is built in and cannot be dropped"
        )));
    }
    let path = session.warehouse().catalog_path(&catalog)?;
    if !path.is_dir() {
        if if_exists {
            return Ok(Output::empty());
        }
        return Err(session
            .warehouse()
            .missing_table_error(&TableName::new(&catalog, "_", "_")));
    }
    let has_tables = session
        .warehouse()
        .schemas(&catalog)
        .iter()
        .any(|s| !session.warehouse().tables(&catalog, s).is_empty())
        || (!cascade && holds_anything_on_store(&path, 2)?);
    if has_tables && !cascade {
        return Err(Error::Invalid(format!(
            "catalog '{catalog}' is not empty: use DROP CATALOG {} CASCADE to drop it with its tables",
            quote_ident(&catalog)
        )));
    }
    let schemas = session.warehouse().schemas(&catalog);
    let managed = located_tables(session, &catalog, &schemas);
    path.remove_dir_all()?;
    session.forget_foreign(&catalog);
    delete_located(managed).await?;
    Ok(Output::empty())
}

/// Whether a directory of a warehouse on a store holds anything `depth` levels down (a
/// schema's tables at 1, a catalog's at 2), asked so that a store that does not answer is an
/// error: a DROP without CASCADE must not take a failed listing for an empty schema. A local
/// directory is not asked (its listing does not fail that way).
fn holds_anything_on_store(place: &crate::catalog::Place, depth: usize) -> Result<bool> {
    if place.local().is_some() {
        return Ok(false);
    }
    let dirs = place.try_list(true)?;
    if depth <= 1 {
        // The warehouse's own files (`_tidemark_location`) are not the schema's.
        let files = place.try_list(false)?;
        return Ok(!dirs.is_empty() || files.iter().any(|f| !f.starts_with('_')));
    }
    for d in dirs {
        if holds_anything_on_store(&place.join(&d), depth - 1)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Resolve a schema name (`s` or `c.s`) in the current catalog.
fn schema_of(session: &Session, name: &ObjectName) -> Result<(String, String)> {
    let parts: Vec<String> = name_parts(name)?.iter().map(|p| p.to_lowercase()).collect();
    match parts.as_slice() {
        [s] => Ok((session.current_catalog().to_string(), s.clone())),
        [c, s] => Ok((c.clone(), s.clone())),
        _ => Err(Error::Invalid(format!(
            "a schema name is schema or catalog.schema, found '{name}'"
        ))),
    }
}

/// The tables of these schemas of `catalog` whose data goes with their names and lives at a
/// location (a schema's MANAGED LOCATION): what a DROP ... CASCADE deletes there.
fn located_tables(session: &Session, catalog: &str, schemas: &[String]) -> Vec<url::Url> {
    let wh = session.warehouse();
    let mut found = vec![];
    for schema in schemas {
        for table in wh.tables(catalog, schema) {
            let Ok(dir) = wh.table_path(&TableName::new(catalog, schema, &table)) else {
                continue;
            };
            if let Some(url) = external::read_link(&dir)
                .filter(|l| l.managed)
                .map(|l| l.url)
            {
                found.push(url);
            }
        }
    }
    found
}

/// Delete the data of dropped managed tables at their locations (their names are gone).
async fn delete_located(urls: Vec<url::Url>) -> Result<()> {
    for url in urls {
        external::delete_all(&url).await.map_err(|e| {
            e.context(format!(
                "the name is dropped, and its data at {} is not all deleted (delete it with the store's tools)",
                external::shown(&url)
            ))
        })?;
    }
    Ok(())
}

/// `CREATE SCHEMA [IF NOT EXISTS] [c.]s`; with `location` (`[MANAGED] LOCATION 'url'`) its
/// tables live under `url/<table>`, as they do in a catalog with a location.
pub fn create_schema(
    session: &Session,
    name: &SchemaName,
    if_not_exists: bool,
    location: Option<&str>,
) -> Result<Output> {
    let SchemaName::Simple(name) = name else {
        return Err(Error::Invalid(
            "CREATE SCHEMA ... AUTHORIZATION is not supported".into(),
        ));
    };
    let (catalog, schema) = schema_of(session, name)?;
    check_writable_catalog(&catalog)?;
    if !session.warehouse().catalog_exists(&catalog) {
        return Err(session
            .warehouse()
            .missing_table_error(&TableName::new(&catalog, &schema, "_")));
    }
    let path = session.warehouse().schema_path(&catalog, &schema)?;
    if path.is_dir() {
        if if_not_exists {
            return Ok(Output::empty());
        }
        return Err(Error::AlreadyExists(format!(
            "schema '{catalog}.{schema}' already exists (use CREATE SCHEMA IF NOT EXISTS)"
        )));
    }
    let url = match location {
        // tidemark's own tables never live elsewhere (nothing reads a link there).
        Some(_) if catalog == SYSTEM => {
            return Err(Error::Invalid(format!(
                "CREATE SCHEMA {catalog}.{schema} MANAGED LOCATION: catalog '{SYSTEM}' holds tidemark's own tables, which live in the warehouse (leave MANAGED LOCATION out, or use a catalog of your own)"
            )));
        }
        Some(l) => {
            let url = external::parse_location(l)?;
            session.warehouse().check_new_location(&url)?;
            Some(url)
        }
        None => session
            .warehouse()
            .catalog_location(&catalog)
            .map(|c| external::child(&c, &schema)),
    };
    path.make_dir()?;
    if let Some(url) = url {
        external::write_link(&path, &url, false)?;
    }
    Ok(Output::empty())
}

/// `DROP TABLE|SCHEMA [IF EXISTS] name [CASCADE]`.
pub async fn drop(
    session: &Session,
    object_type: ObjectType,
    if_exists: bool,
    names: &[ObjectName],
    cascade: bool,
) -> Result<Output> {
    for name in names {
        match object_type {
            ObjectType::Table => {
                let table = session.table_name(name)?;
                crate::catalog::check_writable_table(&table, false)?;
                // A create that committed and stopped before naming its table: named now,
                // then dropped as the table it is.
                if !session.warehouse().table_exists(&table)
                    && let Ok(dir) = session.warehouse().table_path(&table)
                    && let Some(l) = external::try_read_link(&dir)?.filter(|l| l.creating)
                    && external::holds_table(&l.url).await?
                {
                    external::finish_link(&dir)?;
                }
                if !session.warehouse().table_exists(&table) {
                    if session.warehouse().view_exists(&table) {
                        return Err(Error::Invalid(format!(
                            "{table} is a view, not a table: use DROP VIEW {table}"
                        )));
                    }
                    // A name left by a create stopped half-way (its place holds no table):
                    // dropped, so that the name can be created anywhere again.
                    let dir = session.warehouse().table_path(&table)?;
                    if let Some(l) = external::try_read_link(&dir)?.filter(|l| l.creating)
                        && !external::holds_table(&l.url).await?
                    {
                        dir.remove_dir_all()?;
                        continue;
                    }
                    if if_exists {
                        continue;
                    }
                    return Err(session.warehouse().missing_table_error(&table));
                }
                // An external table's name goes, its data stays at its location; a managed
                // table's data at its schema's location goes with it.
                let dir = session.warehouse().table_path(&table)?;
                // A link the store cannot give now: nothing is dropped (a managed table's
                // data would be left without its name).
                let managed = external::try_read_link(&dir)
                    .map_err(|e| {
                        e.context(format!("cannot read {table}'s link; nothing was dropped"))
                    })?
                    .filter(|l| l.managed)
                    .map(|l| l.url);
                dir.remove_dir_all()?;
                delete_located(managed.into_iter().collect()).await?;
            }
            ObjectType::View => view::drop(session, name, if_exists)?,
            ObjectType::Schema | ObjectType::Database => {
                let (catalog, schema) = schema_of(session, name)?;
                check_writable_catalog(&catalog)?;
                if !session.warehouse().schema_exists(&catalog, &schema) {
                    if if_exists {
                        continue;
                    }
                    return Err(session
                        .warehouse()
                        .missing_table_error(&TableName::new(&catalog, &schema, "_")));
                }
                let mut tables = session.warehouse().tables(&catalog, &schema);
                tables.extend(session.warehouse().views(&catalog, &schema));
                tables.extend(session.warehouse().functions(&catalog, &schema));
                let place = session.warehouse().schema_path(&catalog, &schema)?;
                if tables.is_empty() && !cascade && holds_anything_on_store(&place, 1)? {
                    tables.push(String::new());
                }
                if !tables.is_empty() && !cascade {
                    return Err(Error::Invalid(format!(
                        "schema '{catalog}.{schema}' has {} table(s), view(s) or function(s): use DROP SCHEMA {}.{} CASCADE to drop them too",
                        tables.len(),
                        quote_ident(&catalog),
                        quote_ident(&schema)
                    )));
                }
                let managed = located_tables(session, &catalog, std::slice::from_ref(&schema));
                session
                    .warehouse()
                    .schema_path(&catalog, &schema)?
                    .remove_dir_all()?;
                delete_located(managed).await?;
            }
            other => return Err(Error::Invalid(format!("DROP {other} is not supported"))),
        }
    }
    Ok(Output::empty())
}

/// A column definition turned into an Arrow field plus Delta metadata (default, comment).
pub fn column_field(col: &ColumnDef) -> Result<(Field, HashMap<String, String>)> {
    // As written: Delta keeps a name's case (Databricks does), and names match without it.
    let name = col.name.value.clone();
    let data_type =
        sql_to_arrow(&col.data_type).map_err(|e| e.context(format!("column '{name}'")))?;
    let mut nullable = true;
    let mut meta = HashMap::new();
    for opt in &col.options {
        match &opt.option {
            ColumnOption::NotNull => nullable = false,
            ColumnOption::Null => nullable = true,
            ColumnOption::Default(e) => {
                check_default(&name, e)?;
                meta.insert(DEFAULT_KEY.to_string(), e.to_string());
            }
            ColumnOption::Comment(c) => {
                meta.insert(COMMENT_KEY.to_string(), c.clone());
            }
            // Delta's generated column: its expression in the column's metadata, computed (or
            // checked, when given) by every write.
            ColumnOption::Generated {
                generated_as: GeneratedAs::Always | GeneratedAs::ExpStored,
                sequence_options: None,
                generation_expr: Some(e),
                generation_expr_mode: None | Some(GeneratedExpressionMode::Stored),
                ..
            } => {
                crate::engine::bind::refuse_markers(
                    &format!("the generation expression of column '{name}'"),
                    e,
                )?;
                // Its column names are spelled as the table's once all columns are known
                // ([`stored_names`]).
                meta.insert(GENERATION_KEY.to_string(), e.to_string());
            }
            ColumnOption::Generated {
                generation_expr: None,
                ..
            } => {
                return Err(Error::class(
                    "UNSUPPORTED_FEATURE",
                    format!("column '{name}': IDENTITY columns are not supported"),
                ));
            }
            other => {
                return Err(Error::Invalid(format!(
                    "column '{name}': option {other} is not supported"
                )));
            }
        }
    }
    Ok((Field::new(name, data_type, nullable), meta))
}

/// A column name in an expression a table stores (a generated column's, a CHECK constraint's)
/// as the table spells it: delta-rs resolves the names of such expressions exactly, Spark
/// without case. Lower-case plain names stay bare; others are back-quoted.
pub(crate) fn stored_name(i: &mut Ident, columns: &[String]) {
    i.value = super::spelled(&i.value, columns).unwrap_or_else(|| i.value.to_lowercase());
    let plain = i
        .value
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !i.value.starts_with(|c: char| c.is_ascii_digit());
    i.quote_style = if plain { None } else { Some('`') };
}

/// `PARTITIONED BY` columns as the new table's columns (`names`) spell them; one it lacks is
/// refused, naming `of` (what the columns are of).
fn spelled_partitions(partitions: &[String], names: &[String], of: &str) -> Result<Vec<String>> {
    partitions
        .iter()
        .map(|p| {
            super::spelled(p, names).ok_or_else(|| {
                Error::NotFound(format!("partition column '{p}' is not a column of {of}"))
            })
        })
        .collect()
}

/// The columns of an expression a table stores, spelled as the table spells them.
fn stored_names(text: &str, columns: &[String]) -> Result<String> {
    let mut e = crate::parser::expr_text(text)?;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(&mut e, |x| {
        match x {
            Expr::Identifier(i) => stored_name(i, columns),
            Expr::CompoundIdentifier(parts) => {
                if let Some(first) = parts.first_mut() {
                    stored_name(first, columns)
                }
            }
            _ => {}
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    Ok(e.to_string())
}

/// A column DEFAULT is a constant expression: Delta stores its text and every writer
/// (Databricks' too) computes it on insert, so it may not read a column, a session variable,
/// a parameter marker or a subquery (Databricks' INVALID_DEFAULT_VALUE).
pub(crate) fn check_default(column: &str, e: &Expr) -> Result<()> {
    use std::ops::ControlFlow;
    crate::engine::bind::refuse_markers(&format!("the DEFAULT of column '{column}'"), e)?;
    // Names a lambda binds (`transform(a, x -> x + 1)`) are not columns.
    let mut params: Vec<String> = vec![];
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(e, |x: &Expr| {
        if let Expr::Lambda(l) = x {
            params.extend(l.params.iter().map(|p| p.name.value.to_lowercase()));
        }
        ControlFlow::<()>::Continue(())
    });
    let mut problem = None;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(e, |x: &Expr| {
        problem = match x {
            Expr::Identifier(i) if !params.contains(&i.value.to_lowercase()) => Some((
                "INVALID_DEFAULT_VALUE.NOT_CONSTANT",
                format!("it reads '{}', a column or variable", i.value),
            )),
            Expr::CompoundIdentifier(parts) => Some((
                "INVALID_DEFAULT_VALUE.NOT_CONSTANT",
                format!(
                    "it reads '{}', a column or variable",
                    parts
                        .iter()
                        .map(|p| p.value.as_str())
                        .collect::<Vec<_>>()
                        .join(".")
                ),
            )),
            // Each row of an INSERT would get its own value, or all one (as DataFusion
            // plans a default once): not a constant either way.
            Expr::Function(f)
                if ["rand", "random", "randn", "uuid", "shuffle"]
                    .contains(&f.name.to_string().to_lowercase().as_str()) =>
            {
                Some((
                    "INVALID_DEFAULT_VALUE.NOT_CONSTANT",
                    format!("{} is not deterministic", f.name),
                ))
            }
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => Some((
                "INVALID_DEFAULT_VALUE.SUBQUERY_EXPRESSION",
                "it holds a subquery".to_string(),
            )),
            _ => None,
        };
        match problem {
            Some(_) => ControlFlow::Break(()),
            None => ControlFlow::Continue(()),
        }
    });
    match problem {
        None => Ok(()),
        Some((class, why)) => Err(Error::class(
            class,
            format!(
                "DEFAULT {e} of column '{column}': {why}; a default must be a constant expression (literals, and functions of them such as current_timestamp())"
            ),
        )),
    }
}

/// Delta's column metadata key for a generation expression.
pub const GENERATION_KEY: &str = "delta.generationExpression";

/// What a generation expression may use. delta-rs computes generated columns on every write
/// with DataFusion's own functions, so only what DataFusion and Databricks compute alike is
/// allowed: columns, literals, `+ - *`, comparisons, `AND OR NOT`, `CASE`, `IS [NOT] NULL`,
/// casts to numbers and dates, and these functions.
const GENERATION_FUNCTIONS: &[&str] = &["lower", "upper", "abs", "coalesce", "date_trunc"];

/// Check the generated columns of a new table: each expression uses only what
/// [`GENERATION_FUNCTIONS`] allows, reads only the table's other, plain columns, and has the
/// column's type in DataFusion (which computes it).
async fn check_generated_columns(
    columns: &[ColumnDef],
    fields: &[(Field, HashMap<String, String>)],
) -> Result<()> {
    use datafusion::sql::sqlparser::ast::{BinaryOperator as B, DataType as T, Visit, Visitor};
    use std::ops::ControlFlow;
    let generated: Vec<&str> = fields
        .iter()
        .filter(|(_, m)| m.contains_key(GENERATION_KEY))
        .map(|(f, _)| f.name().as_str())
        .collect();
    if generated.is_empty() {
        return Ok(());
    }
    struct Allowed<'a> {
        plain: Vec<String>,
        problem: Option<String>,
        generated: &'a [&'a str],
    }
    impl Visitor for Allowed<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            let problem = match e {
                Expr::Identifier(i) => {
                    let n = i.value.clone();
                    if self.generated.iter().any(|g| g.eq_ignore_ascii_case(&n)) {
                        Some(format!("it reads generated column '{n}'"))
                    } else if !self.plain.iter().any(|p| p.eq_ignore_ascii_case(&n)) {
                        Some(format!("'{n}' is not a column of the table"))
                    } else {
                        None
                    }
                }
                Expr::Value(_) | Expr::Nested(_) | Expr::IsNull(_) | Expr::IsNotNull(_) => None,
                Expr::Case { .. } | Expr::UnaryOp { .. } => None,
                Expr::BinaryOp { op, .. } => (!matches!(
                    op,
                    B::Plus
                        | B::Minus
                        | B::Multiply
                        | B::Eq
                        | B::NotEq
                        | B::Lt
                        | B::LtEq
                        | B::Gt
                        | B::GtEq
                        | B::And
                        | B::Or
                ))
                .then(|| format!("operator {op}")),
                Expr::Cast { data_type, .. } => (!matches!(
                    data_type,
                    T::Int(_)
                        | T::Integer(_)
                        | T::BigInt(_)
                        | T::SmallInt(_)
                        | T::TinyInt(_)
                        | T::Double(_)
                        | T::Float(_)
                        | T::Decimal(_)
                        | T::Date
                ))
                .then(|| format!("a cast to {data_type}")),
                Expr::Function(f) => {
                    let name = f.name.to_string().to_lowercase();
                    (!GENERATION_FUNCTIONS.contains(&name.as_str()))
                        .then(|| format!("function {name}"))
                }
                other => Some(format!("'{other}'")),
            };
            if let Some(p) = problem {
                self.problem = Some(p);
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let plain: Vec<String> = fields
        .iter()
        .filter(|(_, m)| !m.contains_key(GENERATION_KEY))
        .map(|(f, _)| f.name().clone())
        .collect();
    let schema = datafusion::arrow::datatypes::Schema::new(
        fields.iter().map(|(f, _)| f.clone()).collect::<Vec<_>>(),
    );
    let ctx = datafusion::prelude::SessionContext::new();
    ctx.register_batch(
        "t",
        datafusion::arrow::array::RecordBatch::new_empty(Arc::new(schema)),
    )?;
    for (col, (field, meta)) in columns.iter().zip(fields) {
        let Some(text) = meta.get(GENERATION_KEY) else {
            continue;
        };
        let expr = crate::parser::expr_text(text)?;
        let mut allowed = Allowed {
            plain: plain.clone(),
            problem: None,
            generated: &generated,
        };
        let _ = expr.visit(&mut allowed);
        if let Some(p) = allowed.problem {
            return Err(Error::class(
                "UNSUPPORTED_FEATURE",
                format!(
                    "generated column '{}' ({text}): {p} is not allowed. delta-rs computes generated columns on every write with DataFusion's functions, and only what it computes as Databricks does is allowed: columns, literals, + - *, comparisons, AND/OR/NOT, CASE, IS NULL, casts to numbers and DATE, and {}",
                    field.name(),
                    GENERATION_FUNCTIONS.join(", ")
                ),
            ));
        }
        let computed = ctx
            .sql(&format!("SELECT {text} FROM t"))
            .await
            .map_err(|e| {
                Error::Invalid(format!(
                    "generated column '{}' ({text}) cannot be computed: {e}",
                    field.name()
                ))
            })?;
        let t = computed.schema().field(0).data_type().clone();
        if !crate::engine::types::same_stored_type(&t, field.data_type()) {
            return Err(Error::Type(format!(
                "generated column '{}' is {} but its expression ({text}) is {} in DataFusion, which computes it on writes: cast it (GENERATED ALWAYS AS (CAST(... AS {})))",
                field.name(),
                crate::engine::types::type_name(field.data_type()),
                crate::engine::types::type_name(&t),
                col.data_type
            )));
        }
    }
    Ok(())
}

/// A Delta field with metadata.
pub fn delta_field(field: &Field, meta: &HashMap<String, String>) -> Result<StructField> {
    let f = arrow_to_delta(field)?;
    Ok(f.with_metadata(meta.iter().map(|(k, v)| {
        (
            k.clone(),
            deltalake::kernel::MetadataValue::String(v.clone()),
        )
    })))
}

fn option_text(e: &Expr) -> String {
    match e {
        Expr::Value(v) => match &v.value {
            datafusion::sql::sqlparser::ast::Value::SingleQuotedString(s)
            | datafusion::sql::sqlparser::ast::Value::DoubleQuotedString(s) => s.clone(),
            other => other.to_string(),
        },
        other => other.to_string(),
    }
}

fn sql_options(opts: &[SqlOption]) -> Result<Vec<(String, String)>> {
    opts.iter()
        .map(|o| match o {
            SqlOption::KeyValue { key, value } => Ok((
                key.to_string().trim_matches('\'').to_string(),
                option_text(value),
            )),
            other => Err(Error::Invalid(format!(
                "table option {other} is not supported"
            ))),
        })
        .collect()
}

/// `CREATE [OR REPLACE] TABLE [IF NOT EXISTS] t (...)` and `CREATE TABLE t AS query`, in the
/// warehouse or, with `LOCATION 'url'`, an external table: one made there, or (without columns
/// or query) the Delta table already there registered under the name.
pub async fn create_table(session: &Session, create: CreateTable) -> Result<Output> {
    super::clauses::create_table(&create)?;
    let table = session.table_name(&create.name)?;
    let location = create.location.clone().or_else(|| {
        create
            .hive_formats
            .as_ref()
            .and_then(|h| h.location.clone())
    });
    let Some(location) = location else {
        return create_table_here(session, create, table, false).await;
    };
    crate::catalog::check_writable_table(&table, true)?;
    if !session
        .warehouse()
        .schema_exists(&table.catalog, &table.schema)
    {
        return Err(session.warehouse().missing_table_error(&table));
    }
    let url = external::parse_location(&location)?;
    if session.warehouse().table_exists(&table) || session.warehouse().view_exists(&table) {
        if create.if_not_exists {
            return Ok(Output::empty());
        }
        return Err(Error::AlreadyExists(format!(
            "cannot create {table} at LOCATION '{}': {table} already exists{}",
            external::shown(&url),
            if create.or_replace {
                " (CREATE OR REPLACE ... LOCATION is not supported: DROP TABLE first, which keeps an external table's data)"
            } else {
                ""
            }
        )));
    }
    let dir = session.warehouse().table_path(&table)?;
    session.warehouse().check_writable(dir.parent().as_ref())?;
    session.warehouse().check_new_location(&url)?;
    let found = external::holds_table(&url).await?;
    let defines = !create.columns.is_empty() || create.query.is_some();
    match (found, defines) {
        // SHOW CREATE TABLE's statement, run again: the table there, as described.
        (true, true) if create.query.is_none() => {
            described_there(&create, &url, &table).await?;
            external::write_link(&dir, &url, false)?;
            return Ok(Output::empty());
        }
        (true, true) => {
            return Err(Error::AlreadyExists(format!(
                "LOCATION '{}' already holds a Delta table: leave out the columns and query to register it as {table} (CREATE TABLE {table} LOCATION '...')",
                external::shown(&url)
            )));
        }
        (true, false) => {
            external::write_link(&dir, &url, false)?;
            return Ok(Output::empty());
        }
        (false, false) => {
            return Err(Error::NotFound(format!(
                "LOCATION '{}' holds no Delta table: give {table}'s columns (or AS query) to create one there",
                external::shown(&url)
            )));
        }
        (false, true) => external::check_empty(&url).await?,
    }
    // The name links to the location first (a link of a table being created: not a table
    // until the create commits), so every step below writes there; a failed create leaves no
    // name behind.
    external::check_safe_commits(&external::handle_at(&url)?).await?;
    if let Some(theirs) = external::write_creating_link(&dir, &url, false)?
        && theirs.url != url
    {
        return Err(Error::Conflict(format!(
            "cannot create {table} at LOCATION '{}': another process is creating {table} at {} at this moment, or a create stopped half-way left the name; nothing was changed (if no other process is creating it, DROP TABLE {table} removes the name)",
            external::shown(&url),
            external::shown(&theirs.url)
        )));
    }
    let made = create_table_here(session, create, table.clone(), true).await;
    if made.is_err() {
        session.warehouse().forget_failed_create(&table).await;
    }
    made
}

/// A CREATE TABLE with columns for the table already at `url`: registered only if it
/// describes that table (its columns and types, partitioning, comment and the properties it
/// gives); else an error naming the first difference (nothing is changed at the location).
async fn described_there(create: &CreateTable, url: &url::Url, table: &TableName) -> Result<()> {
    let mut t = external::handle_at(url)?;
    t.load().await?;
    let there = super::table::arrow_schema(&t)?;
    let snapshot = t.snapshot()?;
    let metadata = snapshot.metadata();
    let place = external::shown(url);
    let differs = |what: String| {
        Error::AlreadyExists(format!(
            "LOCATION '{place}' holds a Delta table, and {what}: give its columns as they are (SHOW CREATE TABLE shows them once registered), or leave the columns out to register it as it is (CREATE TABLE {table} LOCATION '...')"
        ))
    };
    let given: Vec<(String, datafusion::arrow::datatypes::DataType)> = create
        .columns
        .iter()
        .map(|c| column_field(c).map(|(f, _)| (f.name().to_lowercase(), f.data_type().clone())))
        .collect::<Result<_>>()?;
    let has: Vec<(String, datafusion::arrow::datatypes::DataType)> = there
        .fields()
        .iter()
        .map(|f| (f.name().to_lowercase(), f.data_type().clone()))
        .collect();
    if given != has {
        let show = |c: &[(String, datafusion::arrow::datatypes::DataType)]| {
            c.iter()
                .map(|(n, t)| format!("{n} {}", crate::engine::types::type_name(t)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(differs(format!(
            "its columns are ({}), not ({})",
            show(&has),
            show(&given)
        )));
    }
    let partitions: Vec<String> = match &create.hive_distribution {
        HiveDistributionStyle::PARTITIONED { columns } => columns
            .iter()
            .map(|c| c.name.value.to_lowercase())
            .collect(),
        _ => vec![],
    };
    let partitioned: Vec<String> = metadata
        .partition_columns()
        .iter()
        .map(|c| c.to_lowercase())
        .collect();
    if !partitions.is_empty() && partitions != partitioned {
        return Err(differs(format!(
            "it is partitioned by ({})",
            metadata.partition_columns().join(", ")
        )));
    }
    if let Some(c) = &create.comment
        && metadata.description() != Some(comment_text(c).as_str())
    {
        return Err(differs("its comment differs".into()));
    }
    if let CreateTableOptions::TableProperties(opts) = &create.table_options {
        let config = metadata.configuration();
        for (k, v) in sql_options(opts)? {
            if config.get(&k) != Some(&v) {
                return Err(differs(format!("its property '{k}' is not '{v}'")));
            }
        }
    }
    Ok(())
}

/// [`create_table`] at the name's place (`linked`: a new external table's location, which
/// must not hold a table yet).
async fn create_table_here(
    session: &Session,
    create: CreateTable,
    table: TableName,
    linked: bool,
) -> Result<Output> {
    crate::catalog::check_writable_table(&table, false)?;
    if !session
        .warehouse()
        .schema_exists(&table.catalog, &table.schema)
    {
        return Err(session.warehouse().missing_table_error(&table));
    }
    if session.warehouse().view_exists(&table) {
        return Err(Error::AlreadyExists(format!(
            "cannot create table {table}: a view of that name exists (DROP VIEW {table} first)"
        )));
    }
    let exists = !linked && session.warehouse().table_exists(&table);
    if exists && !create.or_replace {
        if create.if_not_exists {
            return Ok(Output::empty());
        }
        return Err(Error::AlreadyExists(format!(
            "table {table} already exists (use CREATE OR REPLACE TABLE to replace it, or IF NOT EXISTS)"
        )));
    }
    let mut partition_columns: Vec<String> = match &create.hive_distribution {
        HiveDistributionStyle::PARTITIONED { columns } => columns
            .iter()
            .map(|c| c.name.value.to_lowercase())
            .collect(),
        _ => vec![],
    };
    if let Some(p) = &create.partition_by {
        partition_columns.extend(partition_expr_columns(p)?);
    }
    let properties = match &create.table_options {
        CreateTableOptions::TableProperties(opts)
        | CreateTableOptions::Options(opts)
        | CreateTableOptions::With(opts) => sql_options(opts)?,
        CreateTableOptions::None => vec![],
        other => {
            return Err(Error::Invalid(format!(
                "table options {other} are not supported"
            )));
        }
    };
    let mut configuration: HashMap<String, Option<String>> =
        properties.into_iter().map(|(k, v)| (k, Some(v))).collect();
    check_constraint_properties(&table, &mut configuration, create.query.is_some())?;

    if let Some(query) = create.query {
        let comment = create.comment.as_ref().map(comment_text);
        return create_table_as(
            session,
            &table,
            create.columns.clone(),
            *query,
            exists,
            partition_columns,
            configuration,
            comment,
        )
        .await;
    }
    if create.columns.is_empty() {
        return Err(Error::Invalid(format!(
            "CREATE TABLE {table} needs columns or AS query"
        )));
    }
    if let Some(c) = create.constraints.first() {
        return Err(Error::Invalid(format!(
            "CREATE TABLE {table}: table constraint {c} is not supported; add CHECK constraints after creating the table with ALTER TABLE {table} ADD CONSTRAINT name CHECK (condition)"
        )));
    }
    let mut fields = Vec::new();
    let mut typed = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // `PARTITIONED BY (age INT)`: a typed partition column that is not in the column list is
    // a column of its own, after the others (Hive's form, as Databricks reads it).
    let mut columns = create.columns.clone();
    if let HiveDistributionStyle::PARTITIONED {
        columns: partitions,
    } = &create.hive_distribution
    {
        for c in partitions {
            let listed = columns
                .iter()
                .any(|d| d.name.value.eq_ignore_ascii_case(&c.name.value));
            if !listed && c.data_type != datafusion::sql::sqlparser::ast::DataType::Unspecified {
                columns.push(c.clone());
            }
        }
    }
    let mut defined = vec![];
    // Names keep their case, but not in a table with generated columns: delta-rs' writes to
    // such a table name every column through DataFusion's `col`, which lower-cases it, and
    // could not write `Id` at all.
    let generated = columns.iter().any(|c| {
        c.options
            .iter()
            .any(|o| matches!(o.option, ColumnOption::Generated { .. }))
    });
    let names: Vec<String> = columns
        .iter()
        .map(|c| match generated {
            true => c.name.value.to_lowercase(),
            false => c.name.value.clone(),
        })
        .collect();
    for (col, name) in columns.iter().zip(&names) {
        let (field, mut meta) = column_field(col)?;
        let field = field.with_name(name);
        if let Some(g) = meta.get_mut(GENERATION_KEY) {
            *g = stored_names(g, &names)?;
        }
        if let Some(d) = meta.get(DEFAULT_KEY) {
            // Computed now, as ALTER COLUMN SET DEFAULT does: a default that cannot be a value
            // of its column is refused here, not at the first INSERT.
            super::table::default_value(session, d, field.data_type())
                .await
                .map_err(|e| e.context(format!("column '{}'", field.name())))?;
        }
        typed.push((field.name().clone(), field.data_type().clone()));
        // Names are case-insensitive: `id` and `ID` are one column.
        if !seen.insert(field.name().to_lowercase()) {
            return Err(Error::class(
                "COLUMN_ALREADY_EXISTS",
                format!("column '{}' is defined twice", field.name()),
            ));
        }
        fields.push(delta_field(&field, &meta)?);
        defined.push((field, meta));
    }
    check_generated_columns(&columns, &defined).await?;
    let partition_columns = spelled_partitions(&partition_columns, &names, &table.to_string())?;
    keep_stats_exact(&mut configuration, &typed, &partition_columns);
    check_constraint_columns(session, &configuration, &typed)?;
    let mut builder = session
        .warehouse()
        .create_builder(&table)
        .await?
        .with_columns(fields)
        .with_partition_columns(partition_columns)
        .with_configuration(configuration)
        // Custom keys (owner, team, ...) are allowed, as in Databricks.
        .with_raise_if_key_not_exists(false)
        .with_save_mode(if exists {
            SaveMode::Overwrite
        } else {
            SaveMode::ErrorIfExists
        });
    if let Some(c) = &create.comment {
        builder = builder.with_comment(comment_text(c));
    }
    if let Err(e) = builder.await {
        if !exists {
            session.warehouse().forget_failed_create(&table).await;
        }
        return Err(Error::from(e).context(format!("cannot create {table}")));
    }
    session.warehouse().finish_create(&table)?;
    Ok(Output::empty())
}

/// CHECK constraints given as `delta.constraints.<name>` properties (as SHOW CREATE TABLE
/// prints them): each must parse as a condition, and the table gets the protocol that makes
/// every writer check them (writer version 3). A CREATE TABLE AS would have to check its rows
/// first: refused, with the way to do it.
fn check_constraint_properties(
    table: &TableName,
    configuration: &mut HashMap<String, Option<String>>,
    with_query: bool,
) -> Result<()> {
    let checks: Vec<(String, String)> = configuration
        .iter()
        .filter(|(k, _)| k.starts_with("delta.constraints."))
        .map(|(k, v)| (k.clone(), v.clone().unwrap_or_default()))
        .collect();
    if checks.is_empty() {
        return Ok(());
    }
    if with_query {
        return Err(Error::Invalid(format!(
            "CREATE TABLE {table} AS with CHECK constraints ('{}'): create the table with its columns, then INSERT INTO {table} SELECT ...",
            checks[0].0
        )));
    }
    for (k, check) in &checks {
        let parsed = datafusion::sql::sqlparser::parser::Parser::new(&crate::parser::DIALECT)
            .try_with_sql(check)
            .and_then(|mut p| {
                let e = p.parse_expr()?;
                p.expect_token(&datafusion::sql::sqlparser::tokenizer::Token::EOF)?;
                Ok(e)
            });
        if let Err(e) = parsed {
            return Err(Error::Invalid(format!(
                "table property '{k}' = '{check}' is not a condition: {e}"
            )));
        }
    }
    let writer = configuration
        .get("delta.minWriterVersion")
        .and_then(|v| v.as_deref())
        .and_then(|v| v.parse::<i32>().ok());
    if writer.is_none_or(|v| v < 3) {
        configuration.insert("delta.minWriterVersion".into(), Some("3".into()));
    }
    Ok(())
}

/// The CHECK constraints among a new table's properties name columns of the table.
fn check_constraint_columns(
    session: &Session,
    configuration: &HashMap<String, Option<String>>,
    typed: &[(String, datafusion::arrow::datatypes::DataType)],
) -> Result<()> {
    let columns =
        datafusion::common::DFSchema::try_from(datafusion::arrow::datatypes::Schema::new(
            typed
                .iter()
                .map(|(n, t)| Field::new(n, t.clone(), true))
                .collect::<Vec<_>>(),
        ))?;
    for (k, v) in configuration {
        if let (true, Some(check)) = (k.starts_with("delta.constraints."), v) {
            session.ctx().parse_sql_expr(check, &columns).map_err(|e| {
                Error::Invalid(format!(
                    "table property '{k}' = '{check}' does not hold over the table's columns: {e}"
                ))
            })?;
        }
    }
    Ok(())
}

fn comment_text(c: &datafusion::sql::sqlparser::ast::CommentDef) -> String {
    use datafusion::sql::sqlparser::ast::CommentDef;
    match c {
        CommentDef::WithEq(s) | CommentDef::WithoutEq(s) => s.clone(),
    }
}

fn partition_expr_columns(e: &Expr) -> Result<Vec<String>> {
    match e {
        Expr::Identifier(i) => Ok(vec![i.value.to_lowercase()]),
        Expr::Nested(e) => partition_expr_columns(e),
        Expr::Tuple(items) => items
            .iter()
            .map(partition_expr_columns)
            .collect::<Result<Vec<_>>>()
            .map(|v| v.concat()),
        other => Err(Error::Invalid(format!(
            "PARTITIONED BY takes column names, found {other}"
        ))),
    }
}

/// The query's columns under the names and types `CREATE TABLE t (a INT, b STRING) AS query`
/// declares (cast as CAST does: a value that does not fit fails); none declared, as they are.
fn as_declared(df: DataFrame, table: &TableName, columns: &[ColumnDef]) -> Result<DataFrame> {
    if columns.is_empty() {
        return Ok(df);
    }
    let found = df.schema().fields().len();
    if found != columns.len() {
        return Err(Error::class(
            "CREATE_TABLE_COLUMN_DESCRIPTOR_MISMATCH",
            format!(
                "CREATE TABLE {table} declares {} column(s) but its query gives {found}",
                columns.len()
            ),
        ));
    }
    let mut exprs = vec![];
    for (c, (qualifier, field)) in columns.iter().zip(df.schema().iter()) {
        if let Some(opt) = c.options.first() {
            return Err(Error::class(
                "UNSUPPORTED_FEATURE",
                format!(
                    "CREATE TABLE {table} (...) AS query: column option {} of '{}' is not supported with a query; create the table first, then INSERT the query's rows",
                    opt.option, c.name.value
                ),
            ));
        }
        let ty = sql_to_arrow(&c.data_type)
            .map_err(|e| e.context(format!("column '{}'", c.name.value)))?;
        let column =
            datafusion::prelude::Expr::Column(datafusion::common::Column::from((qualifier, field)));
        exprs.push(datafusion::prelude::cast(column, ty).alias(c.name.value.clone()));
    }
    Ok(df.select(exprs)?)
}

/// Every column of `df` nullable ([`crate::engine::functions::AsNullable`]): a table made from
/// a query has no NOT NULL columns, as Delta makes it.
fn as_nullable(df: DataFrame) -> Result<DataFrame> {
    if df.schema().fields().iter().all(|f| f.is_nullable()) {
        return Ok(df);
    }
    let udf = Arc::new(crate::engine::functions::AsNullable::udf());
    let exprs: Vec<datafusion::prelude::Expr> = df
        .schema()
        .iter()
        .map(|(qualifier, field)| {
            let column = datafusion::prelude::Expr::Column(datafusion::common::Column::from((
                qualifier, field,
            )));
            if field.is_nullable() {
                column
            } else {
                udf.call(vec![column]).alias(field.name())
            }
        })
        .collect();
    Ok(df.select(exprs)?)
}

/// `CREATE [OR REPLACE] TABLE t AS query`: the query's rows and schema, streamed into Delta.
#[allow(clippy::too_many_arguments)]
async fn create_table_as(
    session: &Session,
    table: &TableName,
    columns: Vec<ColumnDef>,
    query: datafusion::sql::sqlparser::ast::Query,
    exists: bool,
    partition_columns: Vec<String>,
    configuration: HashMap<String, Option<String>>,
    comment: Option<String>,
) -> Result<Output> {
    let (df, _bound) = super::query::query_dataframe(session, query).await?;
    let df = as_declared(df, table, &columns)?;
    let df = crate::engine::progress::counted_rows(df)?;
    let df = as_nullable(normalize_for_storage(df)?)?;
    let names = super::column_names(df.schema().fields());
    let partition_columns = spelled_partitions(
        &partition_columns,
        &names,
        &format!("the query (its columns: {})", names.join(", ")),
    )?;
    // Empty strings in STRING partition columns are stored as NULL (see
    // `catalog::string_partition_columns`).
    let string_partitions: Vec<String> = partition_columns
        .iter()
        .filter(|c| {
            df.schema().fields().iter().any(|f| {
                f.name().eq_ignore_ascii_case(c)
                    && crate::engine::types::storage_type(f.data_type()).is_string()
            })
        })
        .cloned()
        .collect();
    let df = crate::engine::types::empty_strings_as_null_df(df, &string_partitions)?;
    let mut configuration = configuration;
    let typed: Vec<(String, datafusion::arrow::datatypes::DataType)> = df
        .schema()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    keep_stats_exact(&mut configuration, &typed, &partition_columns);
    // Replacing needs the loaded table: the overwrite commit removes the files of the
    // version it replaces (an unloaded handle wrote no `remove` actions, and the old rows
    // stayed visible).
    let handle = if exists {
        let t = session.warehouse().open_for_write(table).await?;
        replaceable_as(&t, table, &partition_columns, &configuration)?;
        // The overwrite keeps the table's description: a new one would be dropped.
        if comment.is_some() && t.snapshot()?.metadata().description() != comment.as_deref() {
            return Err(Error::class(
                "UNSUPPORTED_FEATURE",
                format!(
                    "CREATE OR REPLACE TABLE {table} ... COMMENT ... AS cannot change the table's comment in the same commit: replace the table, then COMMENT ON TABLE {table} IS '...'"
                ),
            ));
        }
        t
    } else {
        session.warehouse().prepare_new_table(table).await?;
        let handle = session.warehouse().handle(table).await?;
        if let Err(e) = external::check_safe_commits(&handle).await {
            session.warehouse().forget_failed_create(table).await;
            return Err(e);
        }
        handle
    };
    let state = session.ctx().state();
    let mut write = handle
        .write(vec![])
        .with_input_plan(df.into_unoptimized_plan())
        .with_session_state(Arc::new(state))
        .with_table_name(table.table.clone())
        .with_save_mode(if exists {
            SaveMode::Overwrite
        } else {
            SaveMode::ErrorIfExists
        })
        .with_configuration(configuration);
    if exists {
        write = write.with_schema_mode(deltalake::operations::write::SchemaMode::Overwrite);
    }
    if !partition_columns.is_empty() {
        write = write.with_partition_columns(partition_columns);
    }
    if let Some(c) = comment {
        write = write.with_description(c);
    }
    // A create that finds the table made meanwhile fails (no retry as an append to it); a
    // replacement that finds another commit since it read the table fails too (delta-rs lets
    // its removal of the old files through after a concurrent OPTIMIZE removed them, which
    // would leave the compacted copy of the old rows in the table): nothing changes, and
    // running it again replaces what is there then.
    let props = CommitProperties::default().with_max_retries(0);
    let written = match super::upkeep::commit(write, props).await {
        Ok(written) => written,
        Err(e) => {
            if !exists {
                session.warehouse().forget_failed_create(table).await;
            }
            return Err(Error::from(e).context(format!("cannot create {table}")));
        }
    };
    session.warehouse().finish_create(table)?;
    let n = added_rows(&written).await? as i64;
    Ok(super::counts(&[
        ("num_affected_rows", n),
        ("num_inserted_rows", n),
    ]))
}

/// Whether `CREATE OR REPLACE TABLE t AS` can replace `t` in one commit. delta-rs' overwrite
/// keeps the table's metadata and swaps only the schema, so a replacement that asks for other
/// partitioning or properties, or a table with constraints, generated or mapped columns that
/// would go on applying to the new rows, is refused (nothing changes) rather than half-done.
fn replaceable_as(
    t: &deltalake::DeltaTable,
    table: &TableName,
    partition_columns: &[String],
    configuration: &HashMap<String, Option<String>>,
) -> Result<()> {
    let snapshot = t.snapshot()?;
    let metadata = snapshot.metadata();
    let existing = metadata.configuration();
    let refuse = |what: String| {
        Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "CREATE OR REPLACE TABLE {table} AS: {what}, which an overwrite cannot change in one commit; DROP TABLE {table} first, then create it"
            ),
        ))
    };
    let current: Vec<String> = metadata
        .partition_columns()
        .iter()
        .map(|c| c.to_lowercase())
        .collect();
    let asked: Vec<String> = partition_columns.iter().map(|c| c.to_lowercase()).collect();
    if current != asked {
        return refuse(format!(
            "the table is partitioned by ({}) and the statement asks for ({})",
            current.join(", "),
            partition_columns.join(", ")
        ));
    }
    for (k, v) in configuration {
        if existing.get(k) != v.as_ref() {
            return refuse(format!("the table property '{k}' would change"));
        }
    }
    if let Some(k) = existing.keys().find(|k| {
        k.starts_with("delta.constraints.")
            || *k == "delta.columnMapping.mode" && existing.get(*k).is_some_and(|m| m != "none")
            || (k.starts_with("delta.dataSkipping") && !configuration.contains_key(*k))
    }) {
        return refuse(format!("the table has '{k}'"));
    }
    if snapshot
        .schema()
        .fields()
        .any(|f| f.metadata().contains_key("delta.generationExpression"))
    {
        return refuse("the table has generated columns".into());
    }
    Ok(())
}

/// The rows the table's newest commit wrote, from the write's own metrics (the query ran
/// once; counting it again would run it twice and could disagree with what was written).
async fn added_rows(t: &deltalake::DeltaTable) -> Result<u64> {
    use futures::TryStreamExt;
    let infos: Vec<deltalake::kernel::CommitInfo> = t.history(Some(1)).try_collect().await?;
    Ok(infos
        .first()
        .and_then(|i| i.info.get("operationMetrics"))
        .and_then(|m| m.get("num_added_rows"))
        .and_then(|n| n.as_u64())
        .unwrap_or(0))
}
