//! Databricks' collations where tidemark can honour them exactly: `UTF8_BINARY` (how strings
//! compare anyway) is dropped once no other collation meets it; `UTF8_LCASE` (case-insensitive) in
//! comparisons and in the string functions that match text (`instr`, `locate`, `position`,
//! `replace`, `split`, `split_part`, `str_to_map`, `translate`, the trims, `contains`,
//! `startswith`, `endswith`), rewritten to compare lower-cased or case-insensitive patterns;
//! and the `_RTRIM` forms in comparisons (trailing spaces ignored). A collation anywhere else
//! is refused by name, never ignored.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, TrimWhereField,
    VisitMut, VisitorMut,
};

use crate::error::{Error, Result};
use crate::parser::expr_text as parse_expr;

/// The collations this module rewrites.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Collation {
    /// How strings compare anyway: dropped at the end, unless beside another collation.
    Binary,
    Lcase,
    BinaryRtrim,
    LcaseRtrim,
}

fn collation(e: &Expr) -> Option<(Collation, &Expr)> {
    let Expr::Collate { expr, collation } = e else {
        return None;
    };
    let c = match collation.to_string().to_uppercase().as_str() {
        "UTF8_BINARY" => Collation::Binary,
        "UTF8_LCASE" => Collation::Lcase,
        "UTF8_BINARY_RTRIM" => Collation::BinaryRtrim,
        "UTF8_LCASE_RTRIM" => Collation::LcaseRtrim,
        _ => return None,
    };
    Some((c, expr))
}

/// Whether the Spark rewrites leave this COLLATE for its parent to rewrite.
pub(crate) fn kept(e: &Expr) -> bool {
    collation(e).is_some()
}

/// An expression without its COLLATE, and the collation it had.
fn strip(e: &Expr) -> (Option<Collation>, String) {
    match collation(e) {
        Some((c, inner)) => (Some(c), format!("({inner})")),
        None => (None, format!("({e})")),
    }
}

use super::spark::quoted;

/// A string literal's text, with or without a COLLATE.
fn literal(e: &Expr) -> Option<String> {
    super::spark::string_literal(collation(e).map(|(_, inner)| inner).unwrap_or(e))
}

/// The characters that are `c` in lower case: `c`, and its upper-case forms whose lower case
/// is `c`'s (not `S` for `ß`, nor `I` for `ı`).
fn case_variants(c: char) -> Vec<char> {
    let lower: String = c.to_lowercase().collect();
    let mut out = vec![c];
    for v in c.to_lowercase().chain(c.to_uppercase()) {
        if !out.contains(&v) && v.to_lowercase().collect::<String>() == lower {
            out.push(v);
        }
    }
    out
}

/// The characters of `s` in both cases, each once.
fn both_cases(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        for v in case_variants(c) {
            if !out.contains(v) {
                out.push(v);
            }
        }
    }
    out
}

/// `s` with every case-insensitive occurrence of `what` (a literal) written as `what`.
fn normalized(s: &str, what: &str) -> String {
    format!(
        "regexp_replace({s}, {}, {}, 'g')",
        quoted(&format!("(?i){}", regex::escape(what))),
        quoted(&what.replace('$', "$$"))
    )
}

fn mismatch(e: &Expr) -> Error {
    Error::class(
        "COLLATION_MISMATCH",
        format!("{e}: the operands have different explicit collations"),
    )
}

fn refused(what: &str) -> Error {
    Error::class(
        "UNSUPPORTED_FEATURE",
        format!(
            "COLLATE UTF8_LCASE in {what} is not supported: tidemark honours it in comparisons and in instr, locate, position, replace, split, split_part, str_to_map, translate, trim, ltrim, rtrim, contains, startswith and endswith (literal patterns); compare lower(x) instead"
        ),
    )
}

/// The rewrite of `e` when a collation it rewrites is one of its operands.
pub(crate) fn rewrite(e: &Expr) -> Result<Option<Expr>> {
    match e {
        Expr::BinaryOp { left, op, right }
            if matches!(
                op,
                BinaryOperator::Eq
                    | BinaryOperator::NotEq
                    | BinaryOperator::Lt
                    | BinaryOperator::LtEq
                    | BinaryOperator::Gt
                    | BinaryOperator::GtEq
            ) =>
        {
            let ((cl, l), (cr, r)) = (strip(left), strip(right));
            let Some(c) = cl.or(cr) else {
                return Ok(None);
            };
            if cl.is_some() && cr.is_some() && cl != cr {
                return Err(mismatch(e));
            }
            let side = |x: &str| match c {
                Collation::Binary => x.to_string(),
                Collation::Lcase => format!("lower({x})"),
                Collation::BinaryRtrim => format!("rtrim({x})"),
                Collation::LcaseRtrim => format!("lower(rtrim({x}))"),
            };
            Ok(Some(Expr::Nested(Box::new(parse_expr(&format!(
                "{} {op} {}",
                side(&l),
                side(&r)
            ))?))))
        }
        Expr::Trim {
            expr,
            trim_where,
            trim_what: Some(what),
            trim_characters: None,
        } if collation(expr).is_some() || collation(what).is_some() => {
            let kinds: Vec<Collation> = [expr.as_ref(), what.as_ref()]
                .iter()
                .filter_map(|x| collation(x).map(|(c, _)| c))
                .collect();
            if kinds.windows(2).any(|w| w[0] != w[1]) {
                return Err(mismatch(e));
            }
            if kinds.iter().all(|c| *c == Collation::Binary) {
                return Ok(None);
            }
            let lcase = kinds.iter().all(|c| *c == Collation::Lcase);
            let Some(chars) = literal(what).filter(|_| lcase) else {
                return Err(refused("TRIM with characters that are not a literal"));
            };
            let (_, s) = strip(expr);
            let place = match trim_where {
                Some(TrimWhereField::Leading) => "LEADING ",
                Some(TrimWhereField::Trailing) => "TRAILING ",
                _ => "BOTH ",
            };
            Ok(Some(parse_expr(&format!(
                "trim({place}{} FROM {s})",
                quoted(&both_cases(&chars))
            ))?))
        }
        Expr::Function(f) => {
            let FunctionArguments::List(list) = &f.args else {
                return Ok(None);
            };
            let args: Option<Vec<&Expr>> = list
                .args
                .iter()
                .map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                    _ => None,
                })
                .collect();
            let Some(args) = args else { return Ok(None) };
            let collations: Vec<Collation> = args
                .iter()
                .filter_map(|a| collation(a).map(|(c, _)| c))
                .collect();
            if collations.is_empty() {
                return Ok(None);
            }
            let name = f.name.to_string().to_lowercase();
            if collations.windows(2).any(|w| w[0] != w[1]) {
                return Err(mismatch(e));
            }
            if collations.iter().all(|c| *c == Collation::Binary) {
                return Ok(None);
            }
            if collations.iter().any(|c| *c != Collation::Lcase) {
                return Err(Error::class(
                    "UNSUPPORTED_FEATURE",
                    format!("an RTRIM collation in {name}() is not supported: only in comparisons"),
                ));
            }
            let plain: Vec<String> = args.iter().map(|a| strip(a).1).collect();
            let lit = |i: usize| literal(args[i]);
            let sql = match (name.as_str(), plain.as_slice()) {
                ("instr", [s, sub]) => format!("CAST(strpos(lower({s}), lower({sub})) AS INT)"),
                ("locate" | "position" | "charindex", [sub, s]) => {
                    format!("CAST(strpos(lower({s}), lower({sub})) AS INT)")
                }
                ("contains", [a, b]) => format!("contains(lower({a}), lower({b}))"),
                ("startswith", [a, b]) => format!("starts_with(lower({a}), lower({b}))"),
                ("endswith", [a, b]) => format!("ends_with(lower({a}), lower({b}))"),
                ("replace", [s, _, _]) => match lit(1) {
                    Some(search) if search.is_empty() => s.clone(),
                    Some(search) => match lit(2) {
                        Some(with) => format!(
                            "regexp_replace({s}, {}, {}, 'g')",
                            quoted(&format!("(?i){}", regex::escape(&search))),
                            quoted(&with.replace('$', "$$"))
                        ),
                        None => return Err(refused("replace() with a computed replacement")),
                    },
                    None => return Err(refused("replace() with a computed pattern")),
                },
                ("split", [s, p, rest @ ..]) if rest.len() <= 1 => match lit(1) {
                    Some(pattern) => {
                        let limit = rest.first().map(|l| format!(", {l}")).unwrap_or_default();
                        format!("split({s}, {}{limit})", quoted(&format!("(?i){pattern}")))
                    }
                    None => return Err(refused(&format!("split() with the pattern {p}"))),
                },
                ("split_part", [s, _, n]) => match lit(1) {
                    Some(d) => format!("split_part({}, {}, {n})", normalized(s, &d), quoted(&d)),
                    None => return Err(refused("split_part() with a computed delimiter")),
                },
                ("str_to_map", [s, _, _]) => match (lit(1), lit(2)) {
                    (Some(pd), Some(kd)) => format!(
                        "str_to_map({}, {}, {})",
                        normalized(&normalized(s, &pd), &kd),
                        quoted(&pd),
                        quoted(&kd)
                    ),
                    _ => return Err(refused("str_to_map() with computed delimiters")),
                },
                ("translate", [s, _, _]) => match (lit(1), lit(2)) {
                    (Some(from), Some(to)) => {
                        let to: Vec<char> = to.chars().collect();
                        let (mut mapped, mut targets, mut dropped) =
                            (String::new(), String::new(), String::new());
                        for (i, c) in from.chars().enumerate() {
                            for v in case_variants(c) {
                                if mapped.contains(v) || dropped.contains(v) {
                                    continue;
                                }
                                match to.get(i) {
                                    Some(t) => {
                                        mapped.push(v);
                                        targets.push(*t);
                                    }
                                    None => dropped.push(v),
                                }
                            }
                        }
                        format!(
                            "translate({s}, {}, {})",
                            quoted(&format!("{mapped}{dropped}")),
                            quoted(&targets)
                        )
                    }
                    _ => return Err(refused("translate() with computed characters")),
                },
                ("ltrim" | "rtrim", [_, s]) => match lit(0) {
                    Some(chars) => format!(
                        "trim({} {} FROM {s})",
                        if name == "ltrim" {
                            "LEADING"
                        } else {
                            "TRAILING"
                        },
                        quoted(&both_cases(&chars))
                    ),
                    None => return Err(refused(&format!("{name}() with computed characters"))),
                },
                _ => return Err(refused(&format!("{name}()"))),
            };
            Ok(Some(Expr::Nested(Box::new(parse_expr(&sql)?))))
        }
        _ => Ok(None),
    }
}

/// After the rewrites: a `COLLATE UTF8_BINARY` left is dropped (strings compare so anyway);
/// any other COLLATE left is refused by name.
pub(crate) fn check_none_left<T: VisitMut>(node: &mut T) -> Result<()> {
    struct Find(Option<String>);
    impl VisitorMut for Find {
        type Break = ();
        fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            if let Some((Collation::Binary, inner)) = collation(e) {
                *e = Expr::Nested(Box::new(inner.clone()));
                return ControlFlow::Continue(());
            }
            if let Expr::Collate { collation, .. } = e {
                self.0 = Some(collation.to_string());
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let mut find = Find(None);
    let _ = node.visit(&mut find);
    match find.0 {
        Some(c) => Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "COLLATE {c} here is not supported (UTF8_BINARY is how strings compare; UTF8_LCASE and the RTRIM forms work in comparisons and in the string functions that match text)"
            ),
        )),
        None => Ok(()),
    }
}
