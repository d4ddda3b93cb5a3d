//! Column names read as Spark reads them: without regard to case, each written as its table
//! spells it.
//!
//! DataFusion lower-cases unquoted names and then matches them exactly, so `SELECT customerid`
//! and even `` SELECT `CustomerID` `` missed a column `CustomerID` that Spark, or a copy of a
//! SQL Server table, wrote (Spark's `spark.sql.caseSensitive` is false: `CUSTOMERID`,
//! `customerid` and `` `CustomerID` `` all name it). Before planning, every name in a statement
//! that names a column (a column reference, a field of a struct, a select alias, a column alias,
//! a lambda parameter, `USING (...)`, `* EXCEPT (...)`) is respelled, back-quoted, the one way
//! the statement's tables spell it (or, for a name no table has, as its first alias writes it).
//! Every name that is the same but for case becomes the same name, so the engine's exact
//! matching resolves exactly what the case-blind matching of Spark resolves.
//!
//! A struct field is respelled as the column's type spells it (never a MAP key: `m.key` looks
//! the key up as written, as in Spark). What the rewrite cannot know, it leaves as written, as
//! before it: a name two tables spell two ways (`a.ID`, `b.Id`) unless qualified by its table,
//! and every name of a statement that reads a relation whose columns are unknown here (a table
//! function such as `read_files`, `table_changes`): respelling a name that such a relation may
//! hold could make it resolve to another scope's column.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::sql::sqlparser::ast::{
    AccessExpr, ExceptSelectItem, ExcludeSelectItem, Expr, Ident, JoinConstraint, JoinOperator,
    ObjectName, ObjectNamePart, OneOrManyWithParens, Query, RenameSelectItem, Select, SelectItem,
    SetExpr, TableFactor, TableWithJoins, VisitMut, VisitorMut, WildcardAdditionalOptions,
};

use crate::error::Result;

/// A relation a statement reads, as far as its columns' spellings go.
pub struct Relation {
    /// Its name in the statement's FROM clause (after binding), lower-cased.
    pub name: Vec<String>,
    /// The names it can be qualified by, lower-cased (`[o]`, `[default, o]`, ...).
    pub qualifiers: Vec<Vec<String>>,
    pub schema: SchemaRef,
}

/// The relations of one SELECT's FROM clause, for a name two tables of the statement spell
/// two ways: where only one of these has it, it is that one's (as Spark resolves it, from the
/// innermost scope out).
struct Scope {
    schemas: Vec<SchemaRef>,
    /// A relation whose columns are not known here (a subquery, a CTE) is among them.
    opaque: bool,
}

/// How a name is spelled in the statement's tables and aliases.
#[derive(Default)]
struct Spellings {
    /// Column names by their lower case: the one spelling, or every spelling when the
    /// tables disagree.
    columns: HashMap<String, Vec<String>>,
    /// Whether the spelling comes from a table (else from an alias).
    from_table: HashSet<String>,
    /// A column's type, where every table that has the name agrees on it.
    types: HashMap<String, Option<DataType>>,
}

impl Spellings {
    fn table_column(&mut self, name: &str, ty: Option<&DataType>) {
        let lower = name.to_lowercase();
        if !self.from_table.contains(&lower) {
            self.columns.remove(&lower);
            self.from_table.insert(lower.clone());
        }
        let known = self.columns.entry(lower.clone()).or_default();
        if !known.iter().any(|k| k == name) {
            known.push(name.to_string());
        }
        let one = known.len() == 1;
        self.types
            .entry(lower)
            .and_modify(|t| {
                if !one || t.as_ref() != ty {
                    *t = None
                }
            })
            .or_insert_with(|| ty.cloned());
    }

    fn alias(&mut self, name: &str) {
        self.columns
            .entry(name.to_lowercase())
            .or_insert_with(|| vec![name.to_string()]);
    }
}

/// The field of a struct (or of the structs of an array, which Spark reads as an array of the
/// field) named `name` in any case: its spelling and type.
fn field_of(ty: &DataType, name: &str) -> Option<(String, DataType)> {
    match ty {
        DataType::Struct(fields) => {
            let exact = fields.iter().find(|f| f.name() == name);
            let found = exact.or_else(|| {
                fields
                    .iter()
                    .find(|f| f.name().to_lowercase() == name.to_lowercase())
            })?;
            Some((found.name().clone(), found.data_type().clone()))
        }
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            field_of(f.data_type(), name)
        }
        DataType::Dictionary(_, v) => field_of(v, name),
        _ => None,
    }
}

/// Respell the column names of `node` (see the module's documentation). `relations` are the
/// tables it reads; `extra` are columns in scope besides theirs (an UPDATE's target), each
/// qualified by the names given with it.
pub fn respell<T: VisitMut>(
    node: &mut T,
    relations: &[Relation],
    extra: &[(Vec<Vec<String>>, SchemaRef)],
) -> Result<Vec<(String, Vec<String>)>> {
    let mut spellings = Spellings::default();
    for r in relations {
        for f in r.schema.fields() {
            spellings.table_column(f.name(), Some(f.data_type()));
        }
    }
    for (_, schema) in extra {
        for f in schema.fields() {
            let ty = Some(f.data_type()).filter(|t| **t != DataType::Null);
            spellings.table_column(f.name(), ty);
        }
    }
    let mut names = Names::default();
    let _ = node.visit(&mut names);
    for a in &names.aliases {
        spellings.alias(a);
    }
    if spellings.columns.is_empty() {
        return Ok(vec![]);
    }
    // The names a column may be qualified by, with the columns behind them where known.
    let mut qualified: HashMap<Vec<String>, Option<SchemaRef>> = HashMap::new();
    for r in relations {
        for q in &r.qualifiers {
            qualified
                .entry(q.clone())
                .and_modify(|c| {
                    if c.as_ref() != Some(&r.schema) {
                        *c = None
                    }
                })
                .or_insert_with(|| Some(r.schema.clone()));
        }
    }
    for (qualifiers, schema) in extra {
        for q in qualifiers {
            qualified.insert(q.clone(), Some(schema.clone()));
        }
    }
    // Other relations (CTEs, subqueries, aliases of the tables above): qualifiers whose
    // columns this pass does not know.
    for r in &names.relations {
        qualified.entry(vec![r.clone()]).or_insert(None);
    }
    for r in &names.opaque {
        qualified.insert(vec![r.clone()], None);
    }
    let mut respeller = Respeller {
        relations,
        scopes: vec![],
        marks: vec![],
        params: vec![],
        error: None,
        spellings: &spellings,
        qualified: &qualified,
        fields_at: HashSet::new(),
        ambiguous: vec![],
    };
    let _ = node.visit(&mut respeller);
    match respeller.error {
        Some(e) => Err(e),
        None => Ok(respeller.ambiguous),
    }
}

/// The error for a name the engine did not find that two tables of the statement spell two
/// ways (left as written, it matched neither).
pub fn ambiguous_error(missing: &str, ambiguous: &[(String, Vec<String>)]) -> Option<crate::Error> {
    let (name, many) = ambiguous
        .iter()
        .find(|(name, _)| missing.contains(&format!("No field named {}", name.to_lowercase())))?;
    let spelled: Vec<String> = many.iter().map(|m| format!("`{m}`")).collect();
    Some(crate::Error::class(
        "AMBIGUOUS_REFERENCE",
        format!(
            "the column name '{name}' is spelled {} in the tables this statement reads; names are case-insensitive, as in Spark, so tidemark cannot tell which is meant: qualify it with its table (t.{name})",
            spelled.join(" and ")
        ),
    ))
}

/// The names a statement defines: column aliases (select items, table and CTE column lists,
/// lambda parameters, UNPIVOT's columns) and relation aliases and CTE names.
#[derive(Default)]
struct Names {
    aliases: Vec<String>,
    relations: Vec<String>,
    /// Relations whose columns are not a table's (CTEs, subqueries, table functions, and
    /// aliases of them): a qualifier so named is theirs, even where a table goes by it too.
    opaque: Vec<String>,
    ctes: Vec<String>,
}

impl VisitorMut for Names {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.relations.push(cte.alias.name.value.to_lowercase());
                self.opaque.push(cte.alias.name.value.to_lowercase());
                self.ctes.push(cte.alias.name.value.to_lowercase());
                self.aliases
                    .extend(cte.alias.columns.iter().map(|c| c.name.value.clone()));
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        for item in &select.projection {
            match item {
                SelectItem::ExprWithAlias { alias, .. } => self.aliases.push(alias.value.clone()),
                SelectItem::ExprWithAliases { aliases, .. } => {
                    self.aliases.extend(aliases.iter().map(|a| a.value.clone()))
                }
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let reads_table = match factor {
            TableFactor::Table {
                name, args: None, ..
            } => !matches!(name.0.as_slice(),
                [ObjectNamePart::Identifier(i)] if self.ctes.contains(&i.value.to_lowercase())),
            _ => false,
        };
        if let Some(alias) = factor_alias(factor) {
            if !reads_table {
                self.opaque.push(alias.name.value.to_lowercase());
            }
            self.relations.push(alias.name.value.to_lowercase());
            self.aliases
                .extend(alias.columns.iter().map(|c| c.name.value.clone()));
        }
        if let TableFactor::Unpivot { name, .. } = factor {
            self.aliases.push(name.value.clone());
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Lambda(l) = expr {
            self.aliases
                .extend(l.params.iter().map(|p| p.name.value.clone()));
        }
        ControlFlow::Continue(())
    }
}

fn factor_alias(
    factor: &mut TableFactor,
) -> Option<&mut datafusion::sql::sqlparser::ast::TableAlias> {
    match factor {
        TableFactor::Table { alias, .. }
        | TableFactor::Derived { alias, .. }
        | TableFactor::TableFunction { alias, .. }
        | TableFactor::Function { alias, .. }
        | TableFactor::UNNEST { alias, .. }
        | TableFactor::NestedJoin { alias, .. }
        | TableFactor::Pivot { alias, .. }
        | TableFactor::Unpivot { alias, .. } => alias.as_mut(),
        _ => None,
    }
}

struct Respeller<'a> {
    relations: &'a [Relation],
    /// The parameters of the lambdas the visit is inside (lower-cased): they shadow columns.
    params: Vec<String>,
    /// A name no table of its scope can be told apart by (Spark's AMBIGUOUS_REFERENCE).
    error: Option<crate::Error>,
    /// The FROM clauses the visit is inside, innermost last.
    scopes: Vec<Scope>,
    /// How many scopes each query the visit is inside found open when it began.
    marks: Vec<usize>,
    spellings: &'a Spellings,
    qualified: &'a HashMap<Vec<String>, Option<SchemaRef>>,
    /// The names after a `.` of a value (`(expr).field`), by address: fields of a value whose
    /// type is not known here, left as written.
    fields_at: HashSet<*const Expr>,
    /// Names left as written because the statement's tables spell them two ways.
    ambiguous: Vec<(String, Vec<String>)>,
}

impl Respeller<'_> {
    /// A name that defines a column (an alias), respelled where the statement spells it one
    /// way.
    fn column(&mut self, ident: &mut Ident) {
        match self
            .spellings
            .columns
            .get(&ident.value.to_lowercase())
            .map(Vec::as_slice)
        {
            Some([one]) => set(ident, one),
            Some(many) if many.len() > 1 => self.left(ident, many),
            _ => {}
        }
    }

    /// A name that reads a column: as [`Self::column`], and where the statement's tables spell
    /// it two ways, as the innermost FROM clause that has it spells it.
    fn reference(&mut self, ident: &mut Ident) {
        let lower = ident.value.to_lowercase();
        let Some(many) = self
            .spellings
            .columns
            .get(&lower)
            .filter(|m| m.len() > 1)
            .cloned()
        else {
            return self.column(ident);
        };
        // A lambda's parameter, named as it was defined.
        if self.params.contains(&lower) {
            return self.column(ident);
        }
        let mut unclear = false;
        for scope in self.scopes.iter().rev() {
            let mut found: Vec<&String> = vec![];
            for schema in &scope.schemas {
                for f in schema.fields() {
                    if f.name().to_lowercase() == lower && !found.contains(&f.name()) {
                        found.push(f.name());
                    }
                }
            }
            match found.as_slice() {
                [one] if !scope.opaque => {
                    let one = (*one).clone();
                    return set(ident, &one);
                }
                [] if !scope.opaque => continue,
                _ => {
                    unclear = true;
                    break;
                }
            }
        }
        // Two of its scope's relations may hold it (two tables spelling it two ways, or a
        // table beside a subquery or CTE whose columns are not known here): left as
        // written, the engine would pick one by case, or an outer one, without a word.
        if unclear && self.error.is_none() {
            let spelled: Vec<String> = many.iter().map(|m| format!("`{m}`")).collect();
            self.error = Some(crate::Error::class(
                "AMBIGUOUS_REFERENCE",
                format!(
                    "the column name '{}' is spelled {} in the tables this statement reads, and more than one relation of its FROM clause may hold it; names are case-insensitive, as in Spark, so tidemark cannot tell which is meant: qualify it with its table or alias (t.{})",
                    ident.value,
                    spelled.join(" and "),
                    ident.value
                ),
            ));
        }
        self.left(ident, &many)
    }

    /// A name left as written: the statement's tables spell it two ways.
    fn left(&mut self, ident: &Ident, many: &[String]) {
        if !self.ambiguous.iter().any(|(n, _)| n == &ident.value) {
            self.ambiguous.push((ident.value.clone(), many.to_vec()));
        }
    }

    /// The relations of a FROM clause.
    fn scope(&self, from: &[TableWithJoins]) -> Scope {
        let mut scope = Scope {
            schemas: vec![],
            opaque: false,
        };
        fn add(r: &Respeller<'_>, factor: &TableFactor, scope: &mut Scope) {
            match factor {
                TableFactor::Table {
                    name, args: None, ..
                } => {
                    let parts: Option<Vec<String>> = name
                        .0
                        .iter()
                        .map(|p| p.as_ident().map(|i| i.value.to_lowercase()))
                        .collect();
                    match parts.and_then(|p| r.relations.iter().find(|rel| rel.name == p)) {
                        Some(rel) => scope.schemas.push(rel.schema.clone()),
                        None => scope.opaque = true,
                    }
                }
                TableFactor::NestedJoin {
                    table_with_joins, ..
                } => {
                    add(r, &table_with_joins.relation, scope);
                    for j in &table_with_joins.joins {
                        add(r, &j.relation, scope);
                    }
                }
                _ => scope.opaque = true,
            }
        }
        for t in from {
            add(self, &t.relation, &mut scope);
            for j in &t.joins {
                add(self, &j.relation, &mut scope);
            }
        }
        scope
    }

    /// `a.b.c`: the qualifier its first parts are (left as they are), the column, the fields
    /// (as the column's type spells them).
    fn compound(&mut self, parts: &mut [Ident]) {
        let lower: Vec<String> = parts.iter().map(|p| p.value.to_lowercase()).collect();
        // The longest qualifier the statement knows, leaving a column after it.
        let qualifier = (1..parts.len())
            .rev()
            .find(|&k| self.qualified.contains_key(&lower[..k]));
        let (column_at, schema) = match qualifier {
            Some(k) => (k, self.qualified.get(&lower[..k]).cloned().flatten()),
            None => (0, None),
        };
        let (column, fields) = parts[column_at..].split_at_mut(1);
        let column = &mut column[0];
        let mut ty = match &schema {
            Some(schema) => {
                let field = schema
                    .fields()
                    .iter()
                    .find(|f| f.name() == &column.value)
                    .or_else(|| {
                        schema
                            .fields()
                            .iter()
                            .find(|f| f.name().to_lowercase() == lower[column_at])
                    });
                match field {
                    Some(f) => {
                        set(column, f.name());
                        Some(f.data_type().clone()).filter(|t| *t != DataType::Null)
                    }
                    None => None,
                }
            }
            // A CTE's or subquery's column, of a name the tables spell two ways: as written
            // (the relation's own columns were respelled, or not, alike).
            None if qualifier.is_some()
                && self
                    .spellings
                    .columns
                    .get(&lower[column_at])
                    .is_some_and(|m| m.len() > 1) =>
            {
                if column.quote_style.is_none() {
                    column.quote_style = Some('`');
                }
                None
            }
            // No table's columns behind the qualifier (a CTE, a subquery): its columns are
            // the statement's, respelled alike.
            None => {
                self.reference(column);
                self.spellings
                    .types
                    .get(&lower[column_at])
                    .cloned()
                    .flatten()
            }
        };
        for f in fields {
            // A MAP's key after a dot is looked up as written (keys are case-sensitive);
            // the engine would lower-case it unquoted.
            if let Some(DataType::Map(entries, _)) = &ty {
                if f.quote_style.is_none() {
                    f.quote_style = Some('`');
                }
                ty = match entries.data_type() {
                    DataType::Struct(kv) if kv.len() == 2 => Some(kv[1].data_type().clone()),
                    _ => None,
                };
                continue;
            }
            let Some((spelled, inner)) = ty.as_ref().and_then(|t| field_of(t, &f.value)) else {
                break;
            };
            set(f, &spelled);
            ty = Some(inner);
        }
    }
}

/// `ident` as `spelling`, back-quoted; left as written where the engine reads it so already
/// (an unquoted name it lower-cases into the spelling), so lower-case statements stay as typed.
fn set(ident: &mut Ident, spelling: &str) {
    let reads = match ident.quote_style {
        None => ident.value.to_lowercase() == spelling,
        Some(_) => ident.value == spelling,
    };
    if !reads {
        ident.value = spelling.to_string();
        ident.quote_style = Some('`');
    }
}

fn join_constraint(op: &mut JoinOperator) -> Option<&mut JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::CrossJoin(c)
        | JoinOperator::Semi(c)
        | JoinOperator::LeftSemi(c)
        | JoinOperator::RightSemi(c)
        | JoinOperator::Anti(c)
        | JoinOperator::LeftAnti(c)
        | JoinOperator::RightAnti(c)
        | JoinOperator::StraightJoin(c) => Some(c),
        _ => None,
    }
}

impl Respeller<'_> {
    fn joins(&mut self, tables: &mut [TableWithJoins]) {
        for t in tables {
            for j in &mut t.joins {
                if let Some(JoinConstraint::Using(names)) = join_constraint(&mut j.join_operator) {
                    for n in names.iter_mut() {
                        self.object_name(n);
                    }
                }
            }
        }
    }

    fn object_name(&mut self, name: &mut ObjectName) {
        if let [ObjectNamePart::Identifier(i)] = name.0.as_mut_slice() {
            self.reference(i);
        }
    }

    fn wildcard(&mut self, options: &mut WildcardAdditionalOptions) {
        match &mut options.opt_exclude {
            Some(ExcludeSelectItem::Single(n)) => self.object_name(n),
            Some(ExcludeSelectItem::Multiple(ns)) => {
                ns.iter_mut().for_each(|n| self.object_name(n))
            }
            None => {}
        }
        if let Some(ExceptSelectItem {
            first_element,
            additional_elements,
        }) = &mut options.opt_except
        {
            self.reference(first_element);
            additional_elements
                .iter_mut()
                .for_each(|i| self.reference(i));
        }
        match &mut options.opt_rename {
            Some(RenameSelectItem::Single(r)) => {
                self.reference(&mut r.ident);
                self.column(&mut r.alias);
            }
            Some(RenameSelectItem::Multiple(rs)) => {
                for r in rs {
                    self.reference(&mut r.ident);
                    self.column(&mut r.alias);
                }
            }
            None => {}
        }
        if let Some(replace) = &mut options.opt_replace {
            for r in &mut replace.items {
                self.reference(&mut r.column_name);
            }
        }
    }
}

impl VisitorMut for Respeller<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(with) = &mut query.with {
            for cte in &mut with.cte_tables {
                for c in &mut cte.alias.columns {
                    self.column(&mut c.name);
                }
            }
        }
        self.marks.push(self.scopes.len());
        // After a set operation, ORDER BY names the first branch's columns: respelled in its
        // scope now, and left alone when the visit reaches them.
        if matches!(query.body.as_ref(), SetExpr::SetOperation { .. }) && query.order_by.is_some() {
            let mut first = query.body.as_ref();
            while let SetExpr::SetOperation { left, .. } = first {
                first = left;
            }
            let scope = match first {
                SetExpr::Select(select) => Some(self.scope(&select.from)),
                _ => None,
            };
            let pushed = scope.is_some();
            self.scopes.extend(scope);
            if let Some(order_by) = &mut query.order_by {
                let _ = order_by.visit(&mut *self);
                let _ = datafusion::sql::sqlparser::ast::visit_expressions(order_by, |e: &Expr| {
                    if matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
                        self.fields_at.insert(e as *const Expr);
                    }
                    ControlFlow::<()>::Continue(())
                });
            }
            if pushed {
                self.scopes.pop();
            }
        }
        self.done()
    }

    /// A query's SELECT scopes stay until its end, so its ORDER BY reads its SELECT's FROM
    /// clause (the last branch's, after a set operation).
    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        if let Some(mark) = self.marks.pop() {
            self.scopes.truncate(mark);
        }
        self.done()
    }

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        // A set operation's earlier branch is no scope of this one.
        if let Some(&mark) = self.marks.last() {
            self.scopes.truncate(mark);
        }
        let scope = self.scope(&select.from);
        self.scopes.push(scope);
        for item in &mut select.projection {
            match item {
                SelectItem::ExprWithAlias { alias, .. } => self.column(alias),
                SelectItem::ExprWithAliases { aliases, .. } => {
                    aliases.iter_mut().for_each(|a| self.column(a))
                }
                SelectItem::Wildcard(options) | SelectItem::QualifiedWildcard(_, options) => {
                    self.wildcard(options)
                }
                SelectItem::UnnamedExpr(_) => {}
            }
        }
        self.joins(&mut select.from);
        self.done()
    }

    fn post_visit_select(&mut self, _: &mut Select) -> ControlFlow<()> {
        self.done()
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Lambda(l) = expr {
            let n = self.params.len().saturating_sub(l.params.len());
            self.params.truncate(n);
        }
        self.done()
    }

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::NestedJoin {
            table_with_joins, ..
        } = factor
        {
            self.joins(std::slice::from_mut(table_with_joins));
        }
        if let TableFactor::Unpivot { name, .. } = factor {
            self.column(name);
        }
        if let Some(alias) = factor_alias(factor) {
            for c in &mut alias.columns {
                self.column(&mut c.name);
            }
        }
        self.done()
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let at = expr as *const Expr;
        match expr {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) if self.fields_at.contains(&at) => {}
            Expr::Identifier(i) => self.reference(i),
            Expr::CompoundIdentifier(parts) => self.compound(parts),
            Expr::CompoundFieldAccess { access_chain, .. } => {
                for a in access_chain {
                    if let AccessExpr::Dot(e) = a
                        && matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
                    {
                        self.fields_at.insert(e as *const Expr);
                    }
                }
            }
            Expr::Lambda(l) => {
                self.params
                    .extend(l.params.iter().map(|p| p.name.value.to_lowercase()));
                let params = match &mut l.params {
                    OneOrManyWithParens::One(p) => std::slice::from_mut(p),
                    OneOrManyWithParens::Many(ps) => ps.as_mut_slice(),
                };
                for p in params {
                    self.column(&mut p.name);
                }
            }
            _ => {}
        }
        self.done()
    }
}

impl Respeller<'_> {
    fn done(&self) -> ControlFlow<()> {
        match self.error {
            Some(_) => ControlFlow::Break(()),
            None => ControlFlow::Continue(()),
        }
    }
}

/// `t.*` and `default.t.*` where `t` is a warehouse table read without an alias: the engine
/// knows it by the three-part name binding gave it and refused the shorter one ("Invalid
/// qualifier t"), though it takes `t.x`. Each such qualifier is written in full.
pub fn qualify_wildcards<T: VisitMut>(node: &mut T, relations: &[Relation]) {
    struct Wildcards<'a> {
        relations: &'a [Relation],
        /// CTE names and relation aliases: a qualifier that is one of them is left.
        taken: Vec<String>,
    }
    impl VisitorMut for Wildcards<'_> {
        type Break = ();
        fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
            for item in &mut select.projection {
                let SelectItem::QualifiedWildcard(
                    datafusion::sql::sqlparser::ast::SelectItemQualifiedWildcardKind::ObjectName(
                        name,
                    ),
                    _,
                ) = item
                else {
                    continue;
                };
                let Some(parts) = name
                    .0
                    .iter()
                    .map(|p| p.as_ident().map(|i| i.value.to_lowercase()))
                    .collect::<Option<Vec<String>>>()
                else {
                    continue;
                };
                if parts.len() == 1 && self.taken.contains(&parts[0]) {
                    continue;
                }
                let mut full: Vec<&Relation> = self
                    .relations
                    .iter()
                    .filter(|r| r.qualifiers.contains(&parts) && r.name != parts)
                    .collect();
                // One table read twice (in a subquery too) is one name.
                full.dedup_by(|a, b| a.name == b.name);
                if let [r] = full.as_slice() {
                    *name = ObjectName(
                        r.name
                            .iter()
                            .map(|p| ObjectNamePart::Identifier(Ident::with_quote('`', p)))
                            .collect(),
                    );
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut names = Names::default();
    let _ = node.visit(&mut names);
    let mut w = Wildcards {
        relations,
        taken: names.relations,
    };
    let _ = node.visit(&mut w);
}

/// The qualifiers a warehouse table goes by: its alias, else its name in one to three parts.
pub fn table_qualifiers(
    table: &crate::catalog::TableName,
    alias: Option<&Ident>,
) -> Vec<Vec<String>> {
    match alias {
        Some(a) => vec![vec![a.value.to_lowercase()]],
        None => vec![
            vec![table.table.clone()],
            vec![table.schema.clone(), table.table.clone()],
            vec![
                table.catalog.clone(),
                table.schema.clone(),
                table.table.clone(),
            ],
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::sql::sqlparser::ast::Statement;
    use datafusion::sql::sqlparser::dialect::DatabricksDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn relation(name: &str, columns: &[&str]) -> Relation {
        Relation {
            name: vec!["main".into(), "default".into(), name.into()],
            qualifiers: vec![vec![name.into()]],
            schema: std::sync::Arc::new(Schema::new(
                columns
                    .iter()
                    .map(|c| Field::new(*c, DataType::Int64, true))
                    .collect::<Vec<_>>(),
            )),
        }
    }

    fn respelled(sql: &str, relations: &[Relation]) -> String {
        let mut stmt: Statement = Parser::parse_sql(&DatabricksDialect {}, sql)
            .unwrap()
            .remove(0);
        respell(&mut stmt, relations, &[]).unwrap();
        stmt.to_string()
    }

    #[test]
    fn names_are_spelled_as_their_tables_spell_them() {
        let t = [relation("t", &["id", "CustomerID"])];
        // A lower-case statement over lower-case names is left as typed.
        let sql = "SELECT id, x AS y FROM main.default.t WHERE id > 1 ORDER BY y";
        assert_eq!(respelled(sql, &t), sql);
        assert_eq!(
            respelled(
                "SELECT customerid, ID AS CUSTOMERID FROM main.default.t ORDER BY CustomerId",
                &t
            ),
            "SELECT `CustomerID`, ID AS `CustomerID` FROM main.default.t ORDER BY `CustomerID`"
        );
        // Two tables that spell a name two ways: each FROM clause its own.
        let two = [relation("a", &["ID"]), relation("b", &["id"])];
        assert_eq!(
            respelled(
                "SELECT id FROM main.default.a UNION ALL SELECT ID FROM main.default.b",
                &two
            ),
            // (`ID` unquoted is read as `id`: left as typed.)
            "SELECT `ID` FROM main.default.a UNION ALL SELECT ID FROM main.default.b"
        );
    }
}
