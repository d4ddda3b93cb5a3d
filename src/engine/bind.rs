//! Binding a parsed statement to the session before DataFusion plans it: table names become
//! three-part warehouse names (with "did you mean" errors), `VERSION AS OF` pins a snapshot,
//! and variable references become typed literals (a column of the same name wins).

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, Ident, ObjectName, ObjectNamePart, Query, SelectItem, TableFactor,
    TableVersion, Value, VisitMut, VisitorMut,
};

mod literals;
mod view;

use literals::{DatabricksTimestamps, DoubleLiterals};

use super::routines::{Calls, ScalarBinder};
use super::sample::SampleRewriter;
use super::types::{display_exact, scalar_to_sql};
use super::{Session, Variables, name_parts};
use crate::catalog::{SAMPLES, SCRATCH, TableName, samples};
use crate::error::{Error, Result};

/// Evaluate the constant string argument of `IDENTIFIER()`: literals, variables and `||`.
pub fn const_string(expr: &Expr, vars: &Variables) -> Result<String> {
    let value = const_value(expr, vars)?;
    match value {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Ok(s),
        v if v.is_null() => Err(Error::Type("the name is NULL".into())),
        v => Err(Error::Type(format!(
            "expected a STRING naming an object, found a {} value ({})",
            super::types::type_name(&v.data_type()),
            display_exact(&v)
        ))),
    }
}

fn const_value(expr: &Expr, vars: &Variables) -> Result<ScalarValue> {
    match expr {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
                Ok(ScalarValue::Utf8(Some(s.clone())))
            }
            Value::Number(n, _) => Ok(n
                .parse::<i64>()
                .map(|i| ScalarValue::Int64(Some(i)))
                .unwrap_or(ScalarValue::Utf8(Some(n.clone())))),
            Value::Null => Ok(ScalarValue::Null),
            // `IDENTIFIER(:tbl)`, Databricks' way to name a table by a parameter: the
            // declared variable `tbl` (`tidemark --var tbl=...`), as the marker reads elsewhere.
            Value::Placeholder(p) if p.starts_with(':') => {
                let name = &p[1..];
                vars.get(name)
                    .map(|v| v.value.clone())
                    .ok_or_else(|| unbound(name))
            }
            other => Err(not_constant(&other.to_string())),
        },
        Expr::Identifier(i) => vars.lookup_bare(&i.value).ok_or_else(|| {
            Error::class(
                "UNRESOLVED_VARIABLE",
                format!(
                    "'{}' is not a variable; IDENTIFIER() takes literals, variables and ||",
                    i.value
                ),
            )
        }),
        Expr::CompoundIdentifier(parts) => {
            let parts: Vec<String> = parts.iter().map(|p| p.value.clone()).collect();
            vars.lookup_qualified(&parts)?
                .ok_or_else(|| not_constant(&parts.join(".")))
        }
        Expr::Nested(e) => const_value(e, vars),
        Expr::Cast {
            expr, data_type, ..
        } => {
            let v = const_value(expr, vars)?;
            let target = super::types::sql_to_arrow(data_type)?;
            match v.data_type() == target {
                true => Ok(v),
                false if matches!(target, datafusion::arrow::datatypes::DataType::Utf8) => {
                    Ok(ScalarValue::Utf8(if v.is_null() {
                        None
                    } else {
                        Some(as_text(&v))
                    }))
                }
                false => v
                    .cast_to(&target)
                    .map_err(|e| Error::Type(format!("cannot cast {v} to {data_type}: {e}"))),
            }
        }
        Expr::BinaryOp {
            left,
            op: BinaryOperator::StringConcat,
            right,
        } => {
            let l = const_value(left, vars)?;
            let r = const_value(right, vars)?;
            if l.is_null() || r.is_null() {
                return Ok(ScalarValue::Utf8(None));
            }
            Ok(ScalarValue::Utf8(Some(format!(
                "{}{}",
                as_text(&l),
                as_text(&r)
            ))))
        }
        other => Err(not_constant(&other.to_string())),
    }
}

fn as_text(v: &ScalarValue) -> String {
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => s.clone(),
        other => display_exact(other),
    }
}

fn not_constant(what: &str) -> Error {
    Error::Invalid(format!(
        "IDENTIFIER() needs a constant string expression (string literals, variables and ||), found: {what}"
    ))
}

/// What binding registered for the statement; dropping it removes what it registered.
pub struct Bound {
    /// Whether a table is read at a pinned version (`VERSION|TIMESTAMP AS OF`).
    pins: bool,
    /// Every warehouse table the statement reads.
    pub tables: Vec<TableName>,
    /// Session variable references replaced by their values.
    pub variables: usize,
    /// Temporary views the statement names, left by name ([`Session::bind_view_query`]).
    pub temp_views: Vec<String>,
    /// Temporary functions the statement calls.
    pub temp_functions: Vec<String>,
    /// The providers registered for the statement (pinned snapshots, `table_changes`),
    /// dropped with it.
    scratch: super::routines::Scratch,
    /// Each table read (or its pinned snapshot's scratch name) and its schema, for the
    /// spellings of its columns.
    schemas: Vec<TableSchema>,
    /// Column names left as written because the statement's tables spell them two ways.
    pub ambiguous: Vec<(String, Vec<String>)>,
}

impl Bound {
    /// Whether the statement reads a table at a pinned version (`VERSION|TIMESTAMP AS OF`).
    pub fn pins_versions(&self) -> bool {
        self.pins
    }
}

/// Where a time-travel clause points: a version, or the time an expression gives.
pub(crate) enum Travel {
    Version(i64),
    Timestamp(Box<Expr>),
}

/// Collects the relations of a statement and rewrites them to three-part names.
/// A table a statement reads: its name, time-travel version and scratch name, and where
/// the statement names it (line, column; 0 when unknown).
type Found = (TableName, Option<TableVersion>, Option<String>, (u64, u64));

struct RelationBinder<'a> {
    session: &'a Session,
    /// The CTE names in scope, one set per enclosing query.
    ctes: Vec<HashSet<String>>,
    found: Vec<Found>,
    error: Option<Error>,
    /// Views put in place of their names so far (a view reading itself never ends).
    views: usize,
    /// Put views' queries in place of their names (false: qualify a view's name and leave
    /// it, as a view's own query is stored).
    expand_views: bool,
    /// Temporary views the statement names (left by name when not expanding).
    temp_views: Vec<String>,
}

impl VisitorMut for RelationBinder<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let names = query.with.iter().flat_map(|w| &w.cte_tables);
        self.ctes
            .push(names.map(|c| c.alias.name.value.to_lowercase()).collect());
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.ctes.pop();
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table {
            name,
            args: None,
            version,
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        let parts = match name_parts(name) {
            Ok(p) => p,
            Err(e) => {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        };
        if parts.len() == 1
            && self
                .ctes
                .iter()
                .any(|c| c.contains(&parts[0].to_lowercase()))
        {
            return ControlFlow::Continue(());
        }
        if parts
            .iter()
            .any(|p| p.eq_ignore_ascii_case("information_schema"))
            // A snapshot pinned by an earlier pass over the statement.
            || parts.first().is_some_and(|p| p == SCRATCH)
        {
            return ControlFlow::Continue(());
        }
        let table = match TableName::resolve(&parts, &self.session.catalog, &self.session.schema) {
            Ok(t) => t,
            Err(e) => {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        };
        match self.view(&parts, &table) {
            Ok(Some((view_name, _))) if !self.expand_views => {
                if parts.len() == 1 && self.session.temp_view(&parts[0]).is_some() {
                    self.temp_views.push(view_name);
                } else {
                    *name = three_parts(&table);
                }
                return ControlFlow::Continue(());
            }
            Ok(Some((name, view))) => {
                if let Err(e) = self.expand(factor, name, view) {
                    self.error = Some(e);
                    return ControlFlow::Break(());
                }
                return ControlFlow::Continue(());
            }
            Ok(None) => {}
            Err(e) => {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        }
        let at = {
            use datafusion::sql::sqlparser::ast::Spanned;
            let start = name.span().start;
            (start.line, start.column)
        };
        let pinned = version.take().map(|v| {
            let scratch = format!("v{}_{}", self.found.len(), uuid::Uuid::new_v4().simple());
            *name = ObjectName(vec![
                ObjectNamePart::Identifier(Ident::new(SCRATCH)),
                ObjectNamePart::Identifier(Ident::new("pinned")),
                ObjectNamePart::Identifier(Ident::new(scratch.clone())),
            ]);
            (v, scratch)
        });
        if pinned.is_none() {
            *name = three_parts(&table);
        }
        let (version, scratch) = match pinned {
            Some((v, s)) => (Some(v), Some(s)),
            None => (None, None),
        };
        self.found.push((table, version, scratch, at));
        ControlFlow::Continue(())
    }
}

/// Columns known by name only (their type unknown: `Null`).
fn untyped(columns: &[String]) -> datafusion::arrow::datatypes::SchemaRef {
    Arc::new(datafusion::arrow::datatypes::Schema::new(
        columns
            .iter()
            .map(|c| {
                datafusion::arrow::datatypes::Field::new(
                    c,
                    datafusion::arrow::datatypes::DataType::Null,
                    true,
                )
            })
            .collect::<Vec<_>>(),
    ))
}

/// A table a statement reads (or its pinned snapshot's scratch name) and its schema.
type TableSchema = (
    TableName,
    Option<String>,
    datafusion::arrow::datatypes::SchemaRef,
);

/// The tables `node` reads, each with its schema and the names that qualify its columns, and
/// whether every relation it reads has columns known here (a table function's are not).
fn relations<T: VisitMut>(
    node: &mut T,
    schemas: &[TableSchema],
) -> (Vec<super::spelling::Relation>, bool) {
    struct Tables<'a> {
        schemas: &'a [TableSchema],
        found: Vec<super::spelling::Relation>,
        ctes: HashSet<String>,
        unknown: bool,
    }
    impl VisitorMut for Tables<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            if let Some(with) = &query.with {
                self.ctes.extend(
                    with.cte_tables
                        .iter()
                        .map(|c| c.alias.name.value.to_lowercase()),
                );
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
            let (name, alias) = match factor {
                TableFactor::Table {
                    name,
                    alias,
                    args: None,
                    ..
                } => (name, alias),
                // Queries whose columns are respelled with the rest of the statement.
                TableFactor::Derived { .. }
                | TableFactor::NestedJoin { .. }
                | TableFactor::Pivot { .. }
                | TableFactor::Unpivot { .. } => return ControlFlow::Continue(()),
                TableFactor::UNNEST { alias: Some(a), .. } if !a.columns.is_empty() => {
                    return ControlFlow::Continue(());
                }
                _ => {
                    self.unknown = true;
                    return ControlFlow::Continue(());
                }
            };
            let Ok(parts) = name_parts(name) else {
                self.unknown = true;
                return ControlFlow::Continue(());
            };
            if let [one] = parts.as_slice()
                && self.ctes.contains(&one.to_lowercase())
            {
                return ControlFlow::Continue(());
            }
            let found = match parts.as_slice() {
                [s, _, pinned] if s == SCRATCH => self
                    .schemas
                    .iter()
                    .find(|(_, scratch, _)| scratch.as_deref() == Some(pinned.as_str())),
                [c, s, t] => self.schemas.iter().find(|(n, scratch, _)| {
                    scratch.is_none()
                        && n.catalog.eq_ignore_ascii_case(c)
                        && n.schema.eq_ignore_ascii_case(s)
                        && n.table.eq_ignore_ascii_case(t)
                }),
                _ => None,
            };
            match found {
                Some((table, _, schema)) => self.found.push(super::spelling::Relation {
                    name: parts.iter().map(|p| p.to_lowercase()).collect(),
                    qualifiers: super::spelling::table_qualifiers(
                        table,
                        alias.as_ref().map(|a| &a.name),
                    ),
                    schema: schema.clone(),
                }),
                None => self.unknown = true,
            }
            ControlFlow::Continue(())
        }
    }
    let mut tables = Tables {
        schemas,
        found: vec![],
        ctes: HashSet::new(),
        unknown: false,
    };
    let _ = node.visit(&mut tables);
    (tables.found, !tables.unknown)
}

/// A table's name in three back-quoted parts.
fn three_parts(table: &TableName) -> ObjectName {
    ObjectName(vec![
        ObjectNamePart::Identifier(Ident::with_quote('`', table.catalog.clone())),
        ObjectNamePart::Identifier(Ident::with_quote('`', table.schema.clone())),
        ObjectNamePart::Identifier(Ident::with_quote('`', table.table.clone())),
    ])
}

/// Replaces variable references with literals.
struct VariableBinder<'a> {
    vars: &'a Variables,
    columns: &'a HashSet<String>,
    error: Option<Error>,
    /// Variable references replaced.
    replaced: usize,
    /// Parameters of the lambdas being visited (`x -> x + 1`): names there, not variables.
    lambda_params: Vec<String>,
}

impl VisitorMut for VariableBinder<'_> {
    type Break = ();

    /// `SELECT v` shows the variable's name as the column name, not its value.
    fn pre_visit_select(
        &mut self,
        select: &mut datafusion::sql::sqlparser::ast::Select,
    ) -> ControlFlow<()> {
        let named: Vec<String> = select
            .projection
            .iter()
            .filter_map(|item| match item {
                SelectItem::UnnamedExpr(Expr::Identifier(i)) => Some(i.value.to_lowercase()),
                SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_lowercase()),
                _ => None,
            })
            .collect();
        for item in select.projection.iter_mut() {
            let alias = match item {
                SelectItem::UnnamedExpr(Expr::Identifier(i))
                    if !self.columns.contains(&i.value.to_lowercase())
                        && self.vars.lookup_bare(&i.value).is_some() =>
                {
                    Some(i.clone())
                }
                SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
                    let names: Vec<String> = parts.iter().map(|p| p.value.clone()).collect();
                    match (self.vars.lookup_qualified(&names), parts.last()) {
                        // `SELECT v, session.v`: the column keeps `v`, the variable is named
                        // as written (output names must differ).
                        (Ok(Some(_)), Some(last)) if named.contains(&last.value.to_lowercase()) => {
                            Some(Ident::with_quote('`', names.join(".")))
                        }
                        (Ok(Some(_)), last) => last.cloned(),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let (Some(alias), SelectItem::UnnamedExpr(e)) = (alias, &*item) {
                *item = SelectItem::ExprWithAlias {
                    expr: e.clone(),
                    alias,
                };
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Lambda(l) = expr {
            self.lambda_params
                .extend(l.params.iter().map(|p| p.name.value.clone()));
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Lambda(l) = expr {
            let n = self.lambda_params.len().saturating_sub(l.params.len());
            self.lambda_params.truncate(n);
            return ControlFlow::Continue(());
        }
        // A named parameter marker `:name` (Databricks'): the session variable `name`
        // (`tidemark --var name=value` declares one); a declared variable only, never a loop
        // row's column of that name.
        if let Some(name) = named_marker(expr).map(str::to_string) {
            match self.vars.get(&name) {
                Some(v) => {
                    *expr = scalar_to_sql(&v.value);
                    self.replaced += 1;
                }
                None => {
                    self.error = Some(unbound(&name));
                    return ControlFlow::Break(());
                }
            }
            return ControlFlow::Continue(());
        }
        match expr {
            Expr::Identifier(i)
                if !self.columns.contains(&i.value.to_lowercase())
                    && !self
                        .lambda_params
                        .iter()
                        .any(|p| p.eq_ignore_ascii_case(&i.value)) =>
            {
                if let Some(v) = self.vars.lookup_bare(&i.value) {
                    *expr = scalar_to_sql(&v);
                    self.replaced += 1;
                }
            }
            Expr::CompoundIdentifier(parts) => {
                let names: Vec<String> = parts.iter().map(|p| p.value.clone()).collect();
                match self.vars.lookup_qualified(&names) {
                    Ok(Some(v)) => {
                        *expr = scalar_to_sql(&v);
                        self.replaced += 1;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        self.error = Some(e);
                        return ControlFlow::Break(());
                    }
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Collects the names a query gives its columns: SELECT aliases (they shadow variables in
/// ORDER BY etc.) and the column lists of table aliases and CTEs (`AS t(v)`, `WITH c(v)`).
struct AliasCollector<'a>(&'a mut HashSet<String>);

impl VisitorMut for AliasCollector<'_> {
    type Break = ();
    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.0.extend(
                    cte.alias
                        .columns
                        .iter()
                        .map(|c| c.name.value.to_lowercase()),
                );
            }
        }
        ControlFlow::Continue(())
    }
    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let alias = match factor {
            TableFactor::Table { alias, .. }
            | TableFactor::Derived { alias, .. }
            | TableFactor::TableFunction { alias, .. }
            | TableFactor::Function { alias, .. }
            | TableFactor::UNNEST { alias, .. }
            | TableFactor::NestedJoin { alias, .. } => alias.as_ref(),
            _ => None,
        };
        if let Some(alias) = alias {
            self.0
                .extend(alias.columns.iter().map(|c| c.name.value.to_lowercase()));
        }
        ControlFlow::Continue(())
    }
    fn pre_visit_select(
        &mut self,
        select: &mut datafusion::sql::sqlparser::ast::Select,
    ) -> ControlFlow<()> {
        for item in &select.projection {
            if let SelectItem::ExprWithAlias { alias, .. } = item {
                self.0.insert(alias.value.to_lowercase());
            }
        }
        ControlFlow::Continue(())
    }
}

/// A named parameter marker `:name` with no declared variable to read.
fn unbound(name: &str) -> Error {
    Error::class(
        "UNBOUND_SQL_PARAMETER",
        format!(
            "parameter :{name} has no value: run tidemark with --var {name}=VALUE, or DECLARE VARIABLE {name} first"
        ),
    )
}

/// The name of a named parameter marker (`:name`), if `e` is one.
fn named_marker(e: &Expr) -> Option<&str> {
    match e {
        Expr::Value(v) => match &v.value {
            datafusion::sql::sqlparser::ast::Value::Placeholder(p) => p.strip_prefix(':'),
            _ => None,
        },
        _ => None,
    }
}

/// Refuse a named parameter marker in what a table stores (a column DEFAULT, a generated
/// column, a CHECK constraint): Delta keeps the expression's text, so every later writer would
/// read the marker in its own session, and other Delta writers cannot read it at all.
pub fn refuse_markers(what: &str, expr: &Expr) -> Result<()> {
    let mut found = None;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(expr, |e: &Expr| {
        if let Some(name) = named_marker(e) {
            found = Some(name.to_string());
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    match found {
        None => Ok(()),
        Some(name) => Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "parameter marker :{name} in {what}: the table stores the expression, not the value; write the value itself"
            ),
        )),
    }
}

/// Whether `node` holds a named parameter marker (`:name`).
fn has_named_marker<T: VisitMut>(node: &mut T) -> bool {
    let mut found = false;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(node, |e: &mut Expr| {
        if named_marker(e).is_some() {
            found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found
}

impl Session {
    /// Bind every table reference and variable in `node` (a query, statement or expression).
    /// `extra_columns` are columns in scope besides those of the referenced tables (e.g. the
    /// target of an UPDATE).
    pub async fn bind<T: VisitMut>(&self, node: &mut T, extra_columns: &[String]) -> Result<Bound> {
        self.bind_scoped(node, &untyped(extra_columns), &[]).await
    }

    /// [`Session::bind`] of an expression over a table's columns (an UPDATE's or DELETE's
    /// condition), their types known: a struct field is spelled as the table spells it and a
    /// MAP key after a dot read as written, as in queries.
    pub async fn bind_over<T: VisitMut>(
        &self,
        node: &mut T,
        schema: &datafusion::arrow::datatypes::SchemaRef,
    ) -> Result<Bound> {
        self.bind_scoped(node, schema, &[]).await
    }

    /// [`Session::bind`], with the columns of relations the statement names but does not read
    /// as a table (a MERGE's target and source, an UPDATE's table): each with the names that
    /// qualify it, so `o.id` takes `o`'s spelling of `id` where another relation spells it
    /// otherwise.
    pub async fn bind_scoped<T: VisitMut>(
        &self,
        node: &mut T,
        extra: &datafusion::arrow::datatypes::SchemaRef,
        scopes: &[(Vec<String>, datafusion::arrow::datatypes::SchemaRef)],
    ) -> Result<Bound> {
        let extra_columns: Vec<String> = extra.fields().iter().map(|f| f.name().clone()).collect();
        let extra_columns = extra_columns.as_slice();
        // Variables to bind, or parameter markers `:name` to bind (or refuse) by name.
        let want_columns = !self.vars.is_empty() || has_named_marker(node);
        let (mut bound, mut columns) = self
            .bind_tables(node, extra_columns, want_columns, true, &[])
            .await?;
        if want_columns {
            let _ = node.visit(&mut AliasCollector(&mut columns));
            let mut vb = VariableBinder {
                vars: &self.vars,
                columns: &columns,
                error: None,
                replaced: 0,
                lambda_params: vec![],
            };
            let _ = node.visit(&mut vb);
            if let Some(e) = vb.error {
                return Err(e);
            }
            bound.variables = vb.replaced;
        }
        let (relations, all_known) = relations(node, &bound.schemas);
        if all_known {
            // The scopes' columns, each qualified by its names; the extra ones by none.
            let qualified: Vec<(Vec<Vec<String>>, datafusion::arrow::datatypes::SchemaRef)> =
                scopes
                    .iter()
                    .map(|(names, schema)| {
                        let names = names.iter().map(|n| vec![n.to_lowercase()]).collect();
                        (names, schema.clone())
                    })
                    .chain([(vec![], extra.clone())])
                    .collect();
            bound.ambiguous = super::spelling::respell(node, &relations, &qualified)?;
        }
        super::spelling::qualify_wildcards(node, &relations);
        Ok(bound)
    }

    /// A view's query as it is stored: tables and views named in three parts, views left by
    /// name (read when the view is read, as they are then), temporary views by their one-part
    /// name (listed in [`Bound::temp_views`]), session variables by name (a temporary view reads
    /// them when it is read).
    pub async fn bind_view_query<T: VisitMut>(&self, node: &mut T) -> Result<Bound> {
        Ok(self.bind_tables(node, &[], false, false, &[]).await?.0)
    }

    /// Every step of binding but variables; with `want_columns`, the column names in scope.
    async fn bind_tables<T: VisitMut>(
        &self,
        node: &mut T,
        extra_columns: &[String],
        want_columns: bool,
        expand_views: bool,
        stack: &[String],
    ) -> Result<(Bound, HashSet<String>)> {
        // Samples first: the rewrites below put subqueries in place of some tables (Spark's
        // `range(n)`), which would leave their TABLESAMPLE behind.
        let mut sampler = SampleRewriter::default();
        let _ = node.visit(&mut sampler);
        if let Some(e) = sampler.error {
            return Err(e);
        }
        self.rewrite_syntax(node)?;
        self.rewrite_pivots(node).await?;
        let calls = match expand_views {
            true => Calls::Compile,
            false => Calls::Qualify,
        };
        // Views and table functions are queries put in place of names, and each can hold
        // the other: expand both until no call of a table function is left.
        let mut temp_functions = vec![];
        let mut registered = super::routines::Scratch::default();
        let mut found: Vec<Found> = vec![];
        let mut temp_views = vec![];
        let mut views = 0;
        loop {
            let table_calls = self.bind_table_functions(node, calls, stack).await?;
            temp_functions.extend(table_calls.temporary);
            registered.absorb(table_calls.registered);
            let mut rb = RelationBinder {
                session: self,
                ctes: vec![],
                found: vec![],
                error: None,
                views,
                expand_views,
                temp_views: vec![],
            };
            let _ = node.visit(&mut rb);
            if let Some(e) = rb.error {
                return Err(e);
            }
            for f in rb.found {
                if !found.iter().any(|g| g.0 == f.0 && g.2 == f.2) {
                    found.push(f);
                }
            }
            temp_views.extend(rb.temp_views);
            let more_views = rb.views > views;
            views = rb.views;
            if !expand_views || !more_views || !self.calls_table_functions(node) {
                break;
            }
        }
        let mut scalars = ScalarBinder {
            session: self,
            stack: vec![],
            calls,
            temporary: vec![],
            error: None,
        };
        let _ = node.visit(&mut scalars);
        if let Some(e) = scalars.error {
            return Err(e);
        }
        temp_functions.extend(scalars.temporary);
        let mut bound = Bound {
            pins: false,
            scratch: registered,
            tables: vec![],
            variables: 0,
            temp_views,
            temp_functions,
            schemas: vec![],
            ambiguous: vec![],
        };
        let mut columns: HashSet<String> = extra_columns.iter().map(|c| c.to_lowercase()).collect();
        for (table, version, scratch, (line, col)) in found {
            // A database's table: the database answers for it (and has no versions).
            if self.warehouse.is_foreign(&table.catalog) {
                if version.is_some() {
                    return Err(Error::Invalid(format!(
                        "{table} is a table of a foreign database: it has no versions to travel to (VERSION AS OF, TIMESTAMP AS OF)"
                    )));
                }
                if (want_columns || expand_views)
                    && let Some(t) = self.foreign_table(&table).await?
                {
                    let schema = t.schema();
                    columns.extend(schema.fields().iter().map(|f| f.name().to_lowercase()));
                    bound.schemas.push((table.clone(), None, schema));
                }
                continue;
            }
            if !self.warehouse.table_exists(&table) {
                let e = self.warehouse.missing_table_error(&table);
                return Err(if line > 0 && col > 0 {
                    Error::At {
                        error: Box::new(e),
                        line: line as usize,
                        col: col as usize,
                    }
                } else {
                    e
                });
            }
            if let (Some(version), Some(scratch)) = (version, scratch) {
                let provider = self.pinned_provider(&table, version).await?;
                let schema = provider.schema();
                columns.extend(schema.fields().iter().map(|f| f.name().to_lowercase()));
                bound
                    .schemas
                    .push((table.clone(), Some(scratch.clone()), schema));
                self.catalogs
                    .scratch_schema()
                    .register_table(scratch.clone(), provider)?;
                bound.scratch.add(self, scratch);
                bound.pins = true;
            } else if want_columns || expand_views {
                let schema = self.table_schema(&table).await?;
                columns.extend(schema.fields().iter().map(|f| f.name().to_lowercase()));
                bound.schemas.push((table.clone(), None, schema));
            }
            bound.tables.push(table);
        }
        Ok((bound, columns))
    }

    /// `PIVOT` over a table, rewritten with the table's columns (see [`super::pivot`]). A name
    /// that a CTE of the statement takes is not the table's: left unknown (and refused).
    async fn rewrite_pivots<T: VisitMut>(&self, node: &mut T) -> Result<()> {
        let Some(sources) = super::pivot::sources(node) else {
            return Ok(());
        };
        struct Ctes(HashSet<String>);
        impl VisitorMut for Ctes {
            type Break = ();
            fn pre_visit_query(
                &mut self,
                q: &mut datafusion::sql::sqlparser::ast::Query,
            ) -> ControlFlow<()> {
                if let Some(with) = &q.with {
                    for cte in &with.cte_tables {
                        self.0.insert(cte.alias.name.value.to_lowercase());
                    }
                }
                ControlFlow::Continue(())
            }
        }
        let mut ctes = Ctes(HashSet::new());
        let _ = node.visit(&mut ctes);
        let mut columns = std::collections::HashMap::new();
        for name in sources {
            let written = name.to_string();
            if name.0.len() == 1 && ctes.0.contains(&written.trim_matches('`').to_lowercase()) {
                continue;
            }
            let Ok(table) = self.table_name(&name) else {
                continue;
            };
            if !self.warehouse.table_exists(&table) {
                continue;
            }
            if let Ok(c) = self.table_columns(&table).await {
                columns.insert(written, c);
            }
        }
        super::pivot::rewrite(node, &columns)
    }

    /// The rewrites of syntax every statement and function body gets before it is bound:
    /// exact numeric literals, `:` JSON paths, Spark's spellings of functions.
    pub(crate) fn rewrite_syntax<T: VisitMut>(&self, node: &mut T) -> Result<()> {
        let _ = node.visit(&mut DoubleLiterals);
        let _ = node.visit(&mut DatabricksTimestamps);
        let mut colon = super::json::ColonPaths { error: None };
        let _ = node.visit(&mut colon);
        if let Some(e) = colon.error {
            return Err(e);
        }
        let mut generators = super::lateral::Generators::default();
        let _ = node.visit(&mut generators);
        if let Some(e) = generators.error {
            return Err(e);
        }
        let mut spellings = super::spark::SparkSpellings {
            catalog: &self.catalog,
            schema: &self.schema,
            error: None,
            headers: vec![],
            inline_tables: 0,
            named_elsewhere: Default::default(),
        };
        let _ = node.visit(&mut spellings);
        if let Some(e) = spellings.error {
            return Err(e);
        }
        // The spellings write casts to TIMESTAMP of their own: Databricks' TIMESTAMP too.
        let _ = node.visit(&mut DatabricksTimestamps);
        super::collation::check_none_left(node)
    }

    /// The column names a query's tables and aliases bring into scope (lower-cased): a name
    /// among them is a column, not a variable or parameter.
    pub(crate) async fn columns_in_scope<T: VisitMut + Clone>(
        &self,
        node: &T,
        stack: &[String],
    ) -> Result<HashSet<String>> {
        let mut copy = node.clone();
        let (_bound, mut columns) =
            Box::pin(self.bind_tables(&mut copy, &[], true, true, stack)).await?;
        let _ = copy.visit(&mut AliasCollector(&mut columns));
        Ok(columns)
    }

    /// Column names of a table (lower-cased).
    pub async fn table_columns(&self, table: &TableName) -> Result<Vec<String>> {
        let schema = self.table_schema(table).await?;
        Ok(schema
            .fields()
            .iter()
            .map(|f| f.name().to_lowercase())
            .collect())
    }

    /// A warehouse table's schema, as its log has it.
    async fn table_schema(
        &self,
        table: &TableName,
    ) -> Result<datafusion::arrow::datatypes::SchemaRef> {
        if table.catalog == SAMPLES {
            return Ok(samples::sample_batches(&table.table)
                .map(|(s, _)| s)
                .unwrap_or_else(|| Arc::new(datafusion::arrow::datatypes::Schema::empty())));
        }
        let t = self.warehouse.open(table).await?;
        Ok(t.snapshot()?.snapshot().arrow_schema())
    }

    /// A provider over a table as of a version or timestamp.
    async fn pinned_provider(
        &self,
        table: &TableName,
        version: TableVersion,
    ) -> Result<Arc<dyn datafusion::catalog::TableProvider>> {
        let mut t = self.warehouse.open(table).await?;
        let at = match version {
            TableVersion::VersionAsOf(e) | TableVersion::ForSystemTimeAsOf(e) if matches!(&e, Expr::Value(v) if matches!(v.value, Value::Number(..))) =>
            {
                let Expr::Value(v) = &e else { unreachable!() };
                let Value::Number(n, _) = &v.value else {
                    unreachable!()
                };
                let n: i64 = n.parse().map_err(|_| {
                    Error::Invalid(format!("VERSION AS OF needs a version number, found {n}"))
                })?;
                Travel::Version(n)
            }
            TableVersion::TimestampAsOf(e) | TableVersion::ForSystemTimeAsOf(e) => {
                Travel::Timestamp(Box::new(e))
            }
            other => {
                return Err(Error::Invalid(format!(
                    "unsupported time travel clause: {other}"
                )));
            }
        };
        self.travel(&mut t, table, at).await?;
        crate::catalog::provider_for(&t).await
    }

    /// Load `t` (the table `table`) as of a version or a time. A version past the newest is
    /// an error, and so is a time before the table existed (delta-rs would load version 0).
    pub(crate) async fn travel(
        &self,
        t: &mut deltalake::DeltaTable,
        table: &TableName,
        at: Travel,
    ) -> Result<()> {
        match at {
            Travel::Version(n) => {
                let latest = t.version().unwrap_or(0) as i64;
                if n < 0 || n > latest {
                    return Err(Error::NotFound(format!(
                        "{table} has no version {n} (versions 0 to {latest}; see DESCRIBE HISTORY {table})"
                    )));
                }
                t.load_version(n as u64).await?;
            }
            Travel::Timestamp(e) => {
                let value = Box::pin(self.eval_scalar(&e)).await?;
                let value = super::zone::scalar_for(
                    value,
                    &super::types::timestamp_utc(),
                    self.ctx().copied_config().options(),
                );
                let ts = value.cast_to(&super::types::timestamp_utc()).map_err(|_| {
                    Error::Type(format!("TIMESTAMP AS OF needs a timestamp, found {value}"))
                })?;
                let ScalarValue::TimestampMicrosecond(Some(us), _) = ts else {
                    return Err(Error::Type(
                        "TIMESTAMP AS OF needs a non-NULL timestamp".into(),
                    ));
                };
                let dt = chrono::DateTime::from_timestamp_micros(us)
                    .ok_or_else(|| Error::Type("timestamp out of range".into()))?;
                // delta-rs falls back to version 0 for times before the table existed.
                let infos: Vec<deltalake::kernel::CommitInfo> =
                    futures::TryStreamExt::try_collect(t.history(None)).await?;
                let created = infos.iter().filter_map(|i| i.timestamp).min();
                if created.is_some_and(|c| dt.timestamp_millis() < c) {
                    return Err(Error::NotFound(format!(
                        "{table} has no version at or before {dt}: it was created at {}",
                        chrono::DateTime::from_timestamp_millis(created.unwrap_or(0))
                            .unwrap_or_default()
                    )));
                }
                // Past the newest commit is an error, as in Delta: a later commit could still
                // land before that time, and the same query would then read other rows.
                let newest = infos.iter().filter_map(|i| i.timestamp).max();
                if let Some(newest) = newest.filter(|n| dt.timestamp_millis() > *n) {
                    let newest =
                        chrono::DateTime::from_timestamp_millis(newest).unwrap_or_default();
                    return Err(Error::class(
                        "DELTA_TIMESTAMP_GREATER_THAN_COMMIT",
                        format!(
                            "TIMESTAMP AS OF {dt} on {table} is after its latest version, committed at {newest}: use a time at or before it (or VERSION AS OF, see DESCRIBE HISTORY {table})"
                        ),
                    ));
                }
                t.load_with_datetime(dt).await.map_err(|e| {
                    Error::NotFound(format!("{table} has no version at or before {dt}: {e}"))
                })?;
            }
        }
        Ok(())
    }

    /// Evaluate a constant expression (variables and scalar subqueries allowed) to one value.
    /// Planned as `SELECT <expr>` through the statement planner, which loads the tables a
    /// subquery names (an expression planned on its own sees no warehouse table).
    pub async fn eval_scalar(&self, expr: &Expr) -> Result<ScalarValue> {
        use datafusion::sql::sqlparser::ast::{SetExpr, Statement as Sql};
        let mut stmt = self
            .ctx
            .state()
            .sql_to_statement("SELECT NULL", &datafusion::config::Dialect::Databricks)?;
        if let datafusion::sql::parser::Statement::Statement(s) = &mut stmt
            && let Sql::Query(q) = s.as_mut()
            && let SetExpr::Select(select) = q.body.as_mut()
        {
            select.projection = vec![SelectItem::UnnamedExpr(expr.clone())];
        }
        let datafusion::sql::parser::Statement::Statement(mut sql) = stmt else {
            return Err(Error::Other("SELECT did not parse as a query".into()));
        };
        let _bound = self.bind(sql.as_mut(), &[]).await?;
        let plan = self
            .ctx
            .state()
            .statement_to_plan(datafusion::sql::parser::Statement::Statement(sql))
            .await?;
        self.one_value(plan).await
    }

    /// Evaluate a planned constant expression (e.g. `mark - INTERVAL 1 HOUR`) to one value.
    pub async fn eval_expr(&self, e: datafusion::logical_expr::Expr) -> Result<ScalarValue> {
        let plan = datafusion::logical_expr::LogicalPlanBuilder::empty(true)
            .project(vec![e])?
            .build()?;
        self.one_value(plan).await
    }

    /// The first value of the first column a plan produces: the one constant evaluator.
    async fn one_value(&self, plan: datafusion::logical_expr::LogicalPlan) -> Result<ScalarValue> {
        let batches = self.ctx.execute_logical_plan(plan).await?.collect().await?;
        let batch = batches
            .into_iter()
            .find(|b| b.num_rows() > 0)
            .ok_or_else(|| Error::Other("expression produced no value".into()))?;
        Ok(ScalarValue::try_from_array(batch.column(0), 0)?)
    }
}
