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
//! Two tables of one statement may spell a name two ways (`a.ID`, `b.Id`): a reference
//! qualified by its table takes that table's spelling; an unqualified one is refused by name,
//! as it cannot be told apart.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::sql::sqlparser::ast::{
    AccessExpr, ExceptSelectItem, ExcludeSelectItem, Expr, Ident, JoinConstraint, JoinOperator,
    ObjectName, ObjectNamePart, OneOrManyWithParens, Query, RenameSelectItem, Select, SelectItem,
    TableFactor, TableWithJoins, VisitMut, VisitorMut, WildcardAdditionalOptions,
};

use crate::error::{Error, Result};

/// A relation a statement reads, as far as its columns' spellings go.
pub struct Relation {
    /// The names it can be qualified by, lower-cased (`[o]`, `[default, o]`, ...).
    pub qualifiers: Vec<Vec<String>>,
    pub schema: SchemaRef,
}

/// How a name is spelled in the statement's tables and aliases.
#[derive(Default)]
struct Spellings {
    /// Column names by their lower case: the one spelling, or every spelling when the
    /// tables disagree.
    columns: HashMap<String, Vec<String>>,
    /// Whether the spelling comes from a table (else from an alias).
    from_table: HashSet<String>,
    /// Struct field names, the same way.
    fields: HashMap<String, Vec<String>>,
}

impl Spellings {
    fn table_column(&mut self, name: &str) {
        let lower = name.to_lowercase();
        if !self.from_table.contains(&lower) {
            self.columns.remove(&lower);
            self.from_table.insert(lower.clone());
        }
        let known = self.columns.entry(lower).or_default();
        if !known.iter().any(|k| k == name) {
            known.push(name.to_string());
        }
    }

    fn alias(&mut self, name: &str) {
        self.columns
            .entry(name.to_lowercase())
            .or_insert_with(|| vec![name.to_string()]);
    }

    fn fields_of(&mut self, ty: &DataType) {
        match ty {
            DataType::Struct(fields) => {
                for f in fields {
                    let known = self.fields.entry(f.name().to_lowercase()).or_default();
                    if !known.iter().any(|k| k == f.name()) {
                        known.push(f.name().clone());
                    }
                    self.fields_of(f.data_type());
                }
            }
            DataType::List(f)
            | DataType::LargeList(f)
            | DataType::ListView(f)
            | DataType::LargeListView(f)
            | DataType::FixedSizeList(f, _)
            | DataType::Map(f, _) => self.fields_of(f.data_type()),
            DataType::Dictionary(_, v) => self.fields_of(v),
            _ => {}
        }
    }

    /// Whether respelling changes anything: some name is spelled other than in lower case.
    fn any_upper(&self) -> bool {
        let upper = |m: &HashMap<String, Vec<String>>| {
            m.iter()
                .any(|(lower, spelled)| spelled.len() > 1 || spelled[0] != *lower)
        };
        upper(&self.columns) || upper(&self.fields)
    }
}

/// Respell the column names of `node` (see the module's documentation). `relations` are the
/// tables it reads; `extra` are columns in scope besides theirs (an UPDATE's target), each
/// qualified by the names given with it.
pub fn respell<T: VisitMut>(
    node: &mut T,
    relations: &[Relation],
    extra: &[(Vec<Vec<String>>, Vec<String>)],
) -> Result<()> {
    let mut spellings = Spellings::default();
    for r in relations {
        for f in r.schema.fields() {
            spellings.table_column(f.name());
            spellings.fields_of(f.data_type());
        }
    }
    for (_, columns) in extra {
        for c in columns {
            spellings.table_column(c);
        }
    }
    let mut names = Names::default();
    let _ = node.visit(&mut names);
    for a in &names.aliases {
        spellings.alias(a);
    }
    if !spellings.any_upper() {
        return Ok(());
    }
    // The names a column may be qualified by, with the columns behind them where known.
    let mut qualified: HashMap<Vec<String>, Option<Vec<String>>> = HashMap::new();
    let mut known = |path: Vec<String>, columns: Option<Vec<String>>| {
        qualified
            .entry(path)
            .and_modify(|c| {
                if *c != columns {
                    *c = None
                }
            })
            .or_insert(columns);
    };
    for r in relations {
        let columns: Vec<String> = r.schema.fields().iter().map(|f| f.name().clone()).collect();
        for q in &r.qualifiers {
            known(q.clone(), Some(columns.clone()));
        }
    }
    for (qualifiers, columns) in extra {
        for q in qualifiers {
            known(q.clone(), Some(columns.clone()));
        }
    }
    // Other relations (CTEs, subqueries, aliases of the tables above): qualifiers whose
    // columns this pass does not know.
    for r in &names.relations {
        qualified.entry(vec![r.clone()]).or_insert(None);
    }
    let mut respeller = Respeller {
        spellings: &spellings,
        qualified: &qualified,
        fields_at: HashSet::new(),
        error: None,
    };
    let _ = node.visit(&mut respeller);
    match respeller.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The names a statement defines: column aliases (select items, table and CTE column lists,
/// lambda parameters, UNPIVOT's columns) and relation aliases and CTE names.
#[derive(Default)]
struct Names {
    aliases: Vec<String>,
    relations: Vec<String>,
}

impl VisitorMut for Names {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.relations.push(cte.alias.name.value.to_lowercase());
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
        if let Some(alias) = factor_alias(factor) {
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
    spellings: &'a Spellings,
    qualified: &'a HashMap<Vec<String>, Option<Vec<String>>>,
    /// The field names after a `.` of a value (`(expr).field`), by address: fields, not columns.
    fields_at: HashSet<*const Expr>,
    error: Option<Error>,
}

impl Respeller<'_> {
    /// A name in the column namespace, respelled (or refused: the tables spell it two ways).
    fn column(&mut self, ident: &mut Ident) {
        let lower = ident.value.to_lowercase();
        match self.spellings.columns.get(&lower).map(Vec::as_slice) {
            None => {}
            Some([one]) => set(ident, one),
            Some(many) if self.error.is_none() => {
                self.error = Some(ambiguous(&ident.value, many));
            }
            Some(_) => {}
        }
    }

    /// A struct field's name, respelled where the statement's tables spell it one way.
    fn field(&mut self, ident: &mut Ident) {
        let lower = ident.value.to_lowercase();
        match self.spellings.fields.get(&lower).map(Vec::as_slice) {
            None => {}
            Some([one]) => set(ident, one),
            Some(many) if self.error.is_none() => {
                self.error = Some(Error::class(
                    "AMBIGUOUS_REFERENCE",
                    format!(
                        "the field name '{}' is spelled {} in the structs this statement reads; Spark's names are case-insensitive, so tidemark cannot tell which is meant: read the field with its exact spelling through a view of one table",
                        ident.value,
                        spelled(many)
                    ),
                ));
            }
            Some(_) => {}
        }
    }

    /// `a.b.c`: the qualifier its first parts are (left as they are), the column, the fields.
    fn compound(&mut self, parts: &mut [Ident]) {
        let lower: Vec<String> = parts.iter().map(|p| p.value.to_lowercase()).collect();
        // The longest qualifier the statement knows, leaving a column after it.
        let qualifier = (1..parts.len())
            .rev()
            .find(|&k| self.qualified.contains_key(&lower[..k]));
        let (column_at, columns) = match qualifier {
            Some(k) => (k, self.qualified.get(&lower[..k]).cloned().flatten()),
            None => (0, None),
        };
        let (column, fields) = parts[column_at..].split_at_mut(1);
        match columns
            .as_ref()
            .and_then(|cs| cs.iter().find(|c| c.to_lowercase() == lower[column_at]))
        {
            Some(spelled) => set(&mut column[0], spelled),
            None => self.column(&mut column[0]),
        }
        for f in fields {
            self.field(f);
        }
    }
}

fn set(ident: &mut Ident, spelling: &str) {
    if ident.value != spelling || ident.quote_style.is_none() {
        ident.value = spelling.to_string();
        ident.quote_style = Some('`');
    }
}

fn spelled(many: &[String]) -> String {
    let quoted: Vec<String> = many.iter().map(|m| format!("`{m}`")).collect();
    quoted.join(" and ")
}

fn ambiguous(name: &str, many: &[String]) -> Error {
    Error::class(
        "AMBIGUOUS_REFERENCE",
        format!(
            "the column name '{name}' is spelled {} in the tables this statement reads; Spark's names are case-insensitive, so tidemark cannot tell which is meant: qualify it with its table (t.{name})",
            spelled(many)
        ),
    )
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
            self.column(i);
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
            self.column(first_element);
            additional_elements.iter_mut().for_each(|i| self.column(i));
        }
        match &mut options.opt_rename {
            Some(RenameSelectItem::Single(r)) => {
                self.column(&mut r.ident);
                self.column(&mut r.alias);
            }
            Some(RenameSelectItem::Multiple(rs)) => {
                for r in rs {
                    self.column(&mut r.ident);
                    self.column(&mut r.alias);
                }
            }
            None => {}
        }
        if let Some(replace) = &mut options.opt_replace {
            for r in &mut replace.items {
                self.column(&mut r.column_name);
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
        self.done()
    }

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
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
            Expr::Identifier(i) if self.fields_at.contains(&at) => self.field(i),
            Expr::Identifier(i) => self.column(i),
            Expr::CompoundIdentifier(parts) => self.compound(parts),
            Expr::CompoundFieldAccess { access_chain, .. } => {
                for a in access_chain {
                    if let AccessExpr::Dot(e) = a {
                        match e {
                            Expr::Identifier(_) => {
                                self.fields_at.insert(e as *const Expr);
                            }
                            Expr::CompoundIdentifier(parts) => {
                                parts.iter_mut().for_each(|p| self.field(p));
                            }
                            _ => {}
                        }
                    }
                }
            }
            Expr::Lambda(l) => {
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
