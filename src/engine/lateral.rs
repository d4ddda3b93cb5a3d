//! Spark's generators: `LATERAL VIEW [OUTER] explode|posexplode(...) t AS c, ...` and
//! `posexplode`, `explode_outer`, `posexplode_outer` in the select list, written with the
//! engine's `unnest` (one row per element; several unnests in one select list go in step).
//!
//! `FROM rel LATERAL VIEW g(e) t AS c` becomes `FROM (SELECT rel.*, <g's columns> FROM rel)
//! AS rel`: the relation keeps its name, and `t.c` is read as `rel.c`. OUTER keeps a row for
//! an empty or NULL array, with NULLs, as Spark does.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, LateralView, Query, SelectItem,
    SetExpr, TableAlias, TableFactor, TableWithJoins, VisitMut, VisitorMut,
};

use crate::error::{Error, Result};

/// The rewriter.
#[derive(Default)]
pub struct Generators {
    pub error: Option<Error>,
    /// Generators in FROM named so far.
    unnamed: usize,
}

impl VisitorMut for Generators {
    type Break = ();

    /// A generator in FROM (`FROM explode(a) AS t(x)`, `LATERAL posexplode(...) AS p`): the
    /// subquery that selects it, under the same alias.
    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let (lateral, name, args, alias) = match factor {
            TableFactor::Table {
                name,
                args: Some(args),
                alias,
                ..
            } => (false, name, args.args.clone(), alias),
            TableFactor::Function {
                lateral,
                name,
                args,
                alias,
                with_ordinality: false,
            } => (*lateral, name, args.clone(), alias),
            _ => return ControlFlow::Continue(()),
        };
        let call = Expr::Function(datafusion::sql::sqlparser::ast::Function {
            name: name.clone(),
            uses_odbc_syntax: false,
            parameters: FunctionArguments::None,
            args: FunctionArguments::List(datafusion::sql::sqlparser::ast::FunctionArgumentList {
                duplicate_treatment: None,
                args,
                clauses: vec![],
            }),
            filter: None,
            null_treatment: None,
            over: None,
            within_group: vec![],
        });
        if name.0.len() != 1 || generator(&call).is_none() {
            return ControlFlow::Continue(());
        }
        // `explode(map) AS t(k, v)`: the map's keys and values.
        let names = match alias {
            Some(a) if a.columns.len() == 2 => {
                format!(" AS ({}, {})", a.columns[0].name, a.columns[1].name)
            }
            _ => String::new(),
        };
        // Each unnamed generator gets a name of its own, so two of them side by side
        // (`FROM explode(a), explode(b)`) keep their columns apart.
        self.unnamed += 1;
        let alias = alias.clone().or_else(|| {
            Some(TableAlias {
                explicit: true,
                name: Ident::new(format!("__generator_{}", self.unnamed)),
                columns: vec![],
                at: None,
            })
        });
        match crate::parser::query_text(&format!("SELECT {call}{names}")) {
            Ok(subquery) => {
                *factor = TableFactor::Derived {
                    lateral,
                    subquery: Box::new(subquery),
                    alias,
                    sample: None,
                };
                ControlFlow::Continue(())
            }
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let mut result = Ok(());
        if let SetExpr::Select(select) = query.body.as_mut() {
            result = select_list(&mut select.projection);
        }
        let lateral =
            matches!(query.body.as_ref(), SetExpr::Select(s) if !s.lateral_views.is_empty());
        if result.is_ok() && lateral {
            result = lateral_views(query);
        }
        match result {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

/// A generator call: its name (lower case) and its arguments (a named one, as Spark's
/// `explode(collection => a)`, by its value).
fn generator(e: &Expr) -> Option<(String, Vec<Expr>)> {
    let Expr::Function(f) = e else {
        return None;
    };
    let name = f.name.to_string().to_lowercase();
    if !matches!(
        name.as_str(),
        "explode"
            | "explode_outer"
            | "posexplode"
            | "posexplode_outer"
            | "inline"
            | "inline_outer"
            | "stack"
            | "json_tuple"
    ) {
        return None;
    }
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    let args = list
        .args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(a))
            | FunctionArg::Named {
                arg: FunctionArgExpr::Expr(a),
                ..
            }
            | FunctionArg::ExprNamed {
                arg: FunctionArgExpr::Expr(a),
                ..
            } => Some(a.clone()),
            _ => None,
        })
        .collect::<Option<Vec<Expr>>>()?;
    Some((name, args))
}

/// The columns a generator makes, as (expression, default name).
fn columns(name: &str, args: &[Expr], outer: bool, names: usize) -> Result<Vec<(String, String)>> {
    // json_tuple(json, 'a', 'b'): one row, the top-level fields a and b as strings (NULL when
    // absent), columns c0, c1, ...
    if name == "json_tuple" {
        let [json, fields @ ..] = args else {
            return Err(Error::class(
                "WRONG_NUM_ARGS",
                "json_tuple() takes a JSON string and the names of its fields",
            ));
        };
        if fields.is_empty() {
            return Err(Error::class(
                "WRONG_NUM_ARGS",
                "json_tuple() takes a JSON string and at least one field name",
            ));
        }
        return Ok(fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                (
                    format!(
                        "get_json_object(({json}), concat('$[\"', replace(({f}), '\"', '\\\"'), '\"]'))"
                    ),
                    format!("c{i}"),
                )
            })
            .collect());
    }
    let arg = match args {
        [arg] => Some(arg),
        _ => None,
    };
    let outer = outer || name.ends_with("_outer");
    let supported = matches!(name.trim_end_matches("_outer"), "explode" | "posexplode");
    let arg = match arg {
        Some(arg) => arg,
        None if supported => {
            return Err(Error::class(
                "WRONG_NUM_ARGS",
                format!("{name}() takes one argument, an array (or a map)"),
            ));
        }
        // Refused below by name.
        None => &Expr::value(datafusion::sql::sqlparser::ast::Value::Null),
    };
    let a = format!("({arg})");
    // OUTER: an empty or NULL array gives one row of NULLs.
    let array = if outer {
        format!("CASE WHEN cardinality({a}) > 0 THEN {a} ELSE array(NULL) END")
    } else {
        a.clone()
    };
    Ok(match name.trim_end_matches("_outer") {
        "explode" if names == 2 => {
            // OUTER: an empty or NULL map gives one row of NULLs.
            let part = |f: &str| match outer {
                true => format!(
                    "unnest(CASE WHEN cardinality({f}({a})) > 0 THEN {f}({a}) ELSE array(NULL) END)"
                ),
                false => format!("unnest({f}({a}))"),
            };
            vec![
                (part("map_keys"), "key".into()),
                (part("map_values"), "value".into()),
            ]
        }
        "explode" => vec![(format!("unnest({array})"), "col".into())],
        "posexplode" => vec![
            (
                format!(
                    "unnest(CASE WHEN {a} IS NULL OR cardinality({a}) = 0 THEN {} ELSE CAST(range(0, cardinality({a})) AS ARRAY<INT>) END)",
                    if outer {
                        "array(CAST(NULL AS INT))"
                    } else {
                        "NULL"
                    }
                ),
                "pos".into(),
            ),
            (format!("unnest({array})"), "col".into()),
        ],
        other => {
            return Err(Error::class(
                "UNSUPPORTED_FEATURE",
                format!(
                    "the generator {other}() is not supported yet (explode, explode_outer, posexplode and posexplode_outer are)"
                ),
            ));
        }
    })
}

/// `posexplode(a)` and the OUTER forms among the select items (explode itself is a Spark
/// spelling of unnest).
fn select_list(items: &mut Vec<SelectItem>) -> Result<()> {
    let mut out = Vec::with_capacity(items.len());
    for item in items.drain(..) {
        let (e, aliases) = match &item {
            SelectItem::UnnamedExpr(e) => (e, vec![]),
            SelectItem::ExprWithAlias { expr, alias } => (expr, vec![alias.clone()]),
            // `explode(map) AS (k, v)`.
            SelectItem::ExprWithAliases { expr, aliases } if generator(expr).is_some() => {
                (expr, aliases.clone())
            }
            _ => {
                out.push(item);
                continue;
            }
        };
        match generator(e) {
            Some((name, args)) if name != "explode" || aliases.len() == 2 || args.len() != 1 => {
                let cols = columns(&name, &args, false, aliases.len().max(1))?;
                if !aliases.is_empty() && aliases.len() != cols.len() {
                    return Err(Error::Invalid(format!(
                        "{name}() makes {} columns: name them with AS (a, b) in a LATERAL VIEW, or leave them named",
                        cols.len()
                    )));
                }
                for (i, (sql, default)) in cols.into_iter().enumerate() {
                    out.push(SelectItem::ExprWithAlias {
                        expr: crate::parser::expr_text(&sql)?,
                        alias: aliases
                            .get(i)
                            .cloned()
                            .unwrap_or_else(|| Ident::new(default)),
                    });
                }
            }
            _ => out.push(item),
        }
    }
    *items = out;
    Ok(())
}

/// The relation's own name: its alias, or the table's last name part.
fn relation_name(relation: &TableFactor) -> Option<Ident> {
    match relation {
        TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } => {
            Some(a.name.clone())
        }
        TableFactor::Table { name, .. } => name.0.last().and_then(|p| p.as_ident()).cloned(),
        _ => None,
    }
}

/// `FROM rel LATERAL VIEW ...` rewritten (see the module documentation).
fn lateral_views(query: &mut Query) -> Result<()> {
    let SetExpr::Select(select) = query.body.as_mut() else {
        return Ok(());
    };
    let views: Vec<LateralView> = std::mem::take(&mut select.lateral_views);
    let [TableWithJoins { relation, joins }] = select.from.as_mut_slice() else {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            "LATERAL VIEW after several FROM items is not supported yet: join them in a subquery first",
        ));
    };
    if !joins.is_empty() {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            "LATERAL VIEW after a JOIN is not supported yet: join in a subquery first (FROM (SELECT ... JOIN ...) t LATERAL VIEW ...)",
        ));
    }
    let Some(name) = relation_name(relation) else {
        return Err(Error::Invalid(
            "LATERAL VIEW: give the relation before it an alias (FROM (...) AS t LATERAL VIEW ...)"
                .into(),
        ));
    };
    let mut views_named: Vec<String> = vec![];
    let mut generated: Vec<Ident> = vec![];
    let mut current = relation.clone();
    // The relation under its own name, so `name.*` reads it however it was named.
    if let TableFactor::Table {
        alias: alias @ None,
        ..
    } = &mut current
    {
        *alias = Some(TableAlias {
            explicit: true,
            name: name.clone(),
            columns: vec![],
            at: None,
        });
    }
    for view in &views {
        let Some((g, arg)) = generator(&view.lateral_view) else {
            return Err(Error::Invalid(format!(
                "LATERAL VIEW takes a generator (explode, posexplode, ...), found {}",
                view.lateral_view
            )));
        };
        let mut args = arg;
        for arg in args.iter_mut() {
            requalify(arg, &views_named, &name);
        }
        let cols = columns(&g, &args, view.outer, view.lateral_col_alias.len())?;
        let aliases = &view.lateral_col_alias;
        if !aliases.is_empty() && aliases.len() != cols.len() {
            return Err(Error::Invalid(format!(
                "LATERAL VIEW {g}(): it makes {} column(s) and AS names {}",
                cols.len(),
                aliases.len()
            )));
        }
        let items: Vec<String> = cols
            .iter()
            .enumerate()
            .map(|(i, (sql, default))| {
                let alias = aliases
                    .get(i)
                    .map(|a| a.value.clone())
                    .unwrap_or_else(|| default.clone());
                format!("{sql} AS {}", crate::catalog::quote_ident(&alias))
            })
            .collect();
        let sql = format!(
            "SELECT {}.*, {} FROM t",
            crate::catalog::quote_ident(&name.value),
            items.join(", ")
        );
        let mut inner = crate::parser::query_text(&sql)?;
        if let SetExpr::Select(s) = inner.body.as_mut() {
            s.from = vec![TableWithJoins {
                relation: current,
                joins: vec![],
            }];
        }
        current = TableFactor::Derived {
            lateral: false,
            subquery: Box::new(inner),
            alias: Some(TableAlias {
                explicit: true,
                name: name.clone(),
                columns: vec![],
                at: None,
            }),
            sample: None,
        };
        views_named.push(view.lateral_view_name.to_string().to_lowercase());
        generated.extend(cols.iter().enumerate().map(|(i, (_, default))| {
            aliases
                .get(i)
                .cloned()
                .unwrap_or_else(|| Ident::new(default.clone()))
        }));
    }
    *relation = current;
    // `rel.*` is the relation's own columns, as in Spark (`*` has the generated ones too).
    if let Some((first, rest)) = generated.split_first() {
        for item in select.projection.iter_mut() {
            if let SelectItem::QualifiedWildcard(
                datafusion::sql::sqlparser::ast::SelectItemQualifiedWildcardKind::ObjectName(n),
                options,
            ) = item
                && n.0
                    .last()
                    .and_then(|p| p.as_ident())
                    .is_some_and(|i| i.value.eq_ignore_ascii_case(&name.value))
                && options.opt_except.is_none()
            {
                options.opt_except = Some(datafusion::sql::sqlparser::ast::ExceptSelectItem {
                    first_element: first.clone(),
                    additional_elements: rest.to_vec(),
                });
            }
        }
    }
    // `t.c` of a lateral view is the relation's column now.
    let _ = query.visit(&mut Requalify {
        views: &views_named,
        name: &name,
        depth: 0,
    });
    Ok(())
}

fn requalify(e: &mut Expr, views: &[String], name: &Ident) {
    let _ = e.visit(&mut Requalify {
        views,
        name,
        depth: 0,
    });
}

/// Reads a lateral view's qualified columns (`t.c`) as the relation's, in the query itself
/// (a subquery's own FROM may name something `t`).
struct Requalify<'a> {
    views: &'a [String],
    name: &'a Ident,
    depth: usize,
}

impl VisitorMut for Requalify<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if self.depth <= 1
            && let Expr::CompoundIdentifier(parts) = expr
            && parts.len() == 2
            && self.views.contains(&parts[0].value.to_lowercase())
        {
            parts[0] = self.name.clone();
        }
        ControlFlow::Continue(())
    }
}
