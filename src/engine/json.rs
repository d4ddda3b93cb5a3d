//! JSON strings as Databricks reads and writes them: `get_json_object(json, '$.a.b[0]')`,
//! `to_json`, `from_json` and the `:` path operator (`raw:store.fruit[0].type`, rewritten by the binder into a call of
//! [`JSON_PATH`]). Values are found in the text itself, never through a parsed number: a
//! number comes back exactly as written (`12345678901234567890.10` keeps its digits), an object
//! or array as its compact text, a string unquoted, a JSON `null` as NULL. Malformed JSON and
//! paths that find nothing are NULL, as in Spark.

mod convert;
mod shape;

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{ScalarValue, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// The function the `:` operator becomes: `(json, steps)`, the steps encoded by
/// [`encode_steps`].
pub const JSON_PATH: &str = "__tidemark_json_path";

/// Register the JSON functions.
pub fn register(ctx: &datafusion::prelude::SessionContext) {
    ctx.register_udf(ScalarUDF::from(JsonFunction::new(Kind::GetJsonObject)));
    ctx.register_udf(ScalarUDF::from(JsonFunction::new(Kind::Path)));
    convert::register(ctx);
    shape::register(ctx);
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// An object's field; `exact`: the name's case must match.
    Key { name: String, exact: bool },
    /// An array's element.
    Index(usize),
    /// Every element of an array.
    Wildcard,
}

/// Steps as the second argument of [`JSON_PATH`]: a JSON array of strings, `k<name>` (any
/// case), `K<name>` (exact case), `i<n>`, `*`.
pub fn encode_steps(steps: &[Step]) -> String {
    let steps: Vec<String> = steps
        .iter()
        .map(|s| match s {
            Step::Key { name, exact: false } => format!("k{name}"),
            Step::Key { name, exact: true } => format!("K{name}"),
            Step::Index(i) => format!("i{i}"),
            Step::Wildcard => "*".to_string(),
        })
        .collect();
    serde_json::to_string(&steps).unwrap_or_default()
}

fn decode_steps(text: &str) -> Option<Vec<Step>> {
    let steps: Vec<String> = serde_json::from_str(text).ok()?;
    steps
        .iter()
        .map(|step| match step.split_at_checked(1)? {
            ("k", name) => Some(Step::Key {
                name: name.to_string(),
                exact: false,
            }),
            ("K", name) => Some(Step::Key {
                name: name.to_string(),
                exact: true,
            }),
            ("i", n) => n.parse().ok().map(Step::Index),
            ("*", "") => Some(Step::Wildcard),
            _ => None,
        })
        .collect()
}

/// Rewrites the `:` operator (`raw:a.b[0]`, `raw:['A']`, `raw:a[*]`) into a call of
/// [`JSON_PATH`]: DataFusion's planner has no JSON access of its own.
pub struct ColonPaths {
    pub error: Option<crate::error::Error>,
}

impl datafusion::sql::sqlparser::ast::VisitorMut for ColonPaths {
    type Break = ();

    /// A select item that is a path is named after the path's last field, as Databricks
    /// names it (`raw:store.bicycle` is `bicycle`); as written when that name is taken.
    fn pre_visit_select(
        &mut self,
        select: &mut datafusion::sql::sqlparser::ast::Select,
    ) -> std::ops::ControlFlow<()> {
        use datafusion::sql::sqlparser::ast::{Expr, Ident, JsonPathElem, SelectItem, Value};
        let last_field = |item: &SelectItem| -> Option<String> {
            let SelectItem::UnnamedExpr(Expr::JsonAccess { path, .. }) = item else {
                return None;
            };
            path.path.iter().rev().find_map(|p| match p {
                JsonPathElem::Dot { key, .. } => Some(key.clone()),
                JsonPathElem::Bracket {
                    key: Expr::Value(v),
                }
                | JsonPathElem::ColonBracket {
                    key: Expr::Value(v),
                } => match &v.value {
                    Value::SingleQuotedString(k) | Value::DoubleQuotedString(k) => Some(k.clone()),
                    _ => None,
                },
                _ => None,
            })
        };
        // Every other item's name, as far as it is written: a path keeps its expression's
        // name when its field's name is taken (a select list cannot repeat a name here).
        let names: Vec<Option<String>> = select
            .projection
            .iter()
            .map(|item| match item {
                SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_lowercase()),
                SelectItem::UnnamedExpr(Expr::Identifier(i)) => Some(i.value.to_lowercase()),
                SelectItem::UnnamedExpr(Expr::CompoundIdentifier(p)) => {
                    p.last().map(|i| i.value.to_lowercase())
                }
                other => last_field(other).map(|n| n.to_lowercase()),
            })
            .collect();
        for (i, item) in select.projection.iter_mut().enumerate() {
            let Some(name) = last_field(item).or_else(|| match item {
                // A path without a named field (`raw:[0]`) keeps its written name.
                SelectItem::UnnamedExpr(e @ Expr::JsonAccess { .. }) => Some(e.to_string()),
                _ => None,
            }) else {
                continue;
            };
            let lower = name.to_lowercase();
            let taken = names
                .iter()
                .enumerate()
                .any(|(j, n)| j != i && n.as_deref() == Some(lower.as_str()));
            // A taken name leaves the item named as written (`raw:a.x`).
            if let SelectItem::UnnamedExpr(e) = &*item {
                let alias = if taken { e.to_string() } else { name };
                *item = SelectItem::ExprWithAlias {
                    expr: e.clone(),
                    alias: Ident::with_quote('`', alias),
                };
            }
        }
        std::ops::ControlFlow::Continue(())
    }

    fn post_visit_expr(
        &mut self,
        expr: &mut datafusion::sql::sqlparser::ast::Expr,
    ) -> std::ops::ControlFlow<()> {
        use datafusion::sql::sqlparser::ast::{Expr, JsonPathElem, Value};
        let Expr::JsonAccess { value, path } = expr else {
            return std::ops::ControlFlow::Continue(());
        };
        let mut steps = vec![];
        for elem in &path.path {
            let step = match elem {
                JsonPathElem::Dot { key, .. } => Some(Step::Key {
                    name: key.clone(),
                    exact: false,
                }),
                JsonPathElem::Bracket { key } | JsonPathElem::ColonBracket { key } => match key {
                    Expr::Value(v) => match &v.value {
                        Value::SingleQuotedString(k) | Value::DoubleQuotedString(k) => {
                            Some(Step::Key {
                                name: k.clone(),
                                exact: true,
                            })
                        }
                        Value::Number(n, _) => n.parse().ok().map(Step::Index),
                        _ => None,
                    },
                    Expr::Wildcard(_) => Some(Step::Wildcard),
                    _ => None,
                },
            };
            let Some(step) = step else {
                self.error = Some(crate::error::Error::Invalid(format!(
                    "JSON path {path}: a bracket takes a quoted field name, an index (0, 1, ...) or *"
                )));
                return std::ops::ControlFlow::Break(());
            };
            steps.push(step);
        }
        let call = datafusion::sql::sqlparser::parser::Parser::new(&crate::parser::DIALECT)
            .try_with_sql(&format!("{JSON_PATH}(NULL, NULL)"))
            .and_then(|mut p| p.parse_expr());
        let Ok(Expr::Function(mut f)) = call else {
            return std::ops::ControlFlow::Continue(());
        };
        if let datafusion::sql::sqlparser::ast::FunctionArguments::List(list) = &mut f.args {
            use datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr};
            list.args = vec![
                FunctionArg::Unnamed(FunctionArgExpr::Expr((**value).clone())),
                FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(
                    Value::SingleQuotedString(encode_steps(&steps)).into(),
                ))),
            ];
        }
        *expr = Expr::Function(f);
        std::ops::ControlFlow::Continue(())
    }
}

/// A JSONPath as `get_json_object` takes it (Spark's subset): `$`, then `.name`,
/// `['name']` / `["name"]`, `[n]`, `[*]`; names match exactly. None for a path it cannot read
/// (the function then returns NULL, as Spark's).
pub fn parse_json_path(path: &str) -> Option<Vec<Step>> {
    let mut rest = path.trim().strip_prefix('$')?;
    let mut steps = vec![];
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let name = &r[..end];
            if name.is_empty() {
                return None;
            }
            steps.push(if name == "*" {
                Step::Wildcard
            } else {
                Step::Key {
                    name: name.to_string(),
                    exact: true,
                }
            });
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = if r.starts_with(['\'', '"']) {
                let quote = &r[..1];
                let close = r[1..].find(quote)? + 1;
                let name = &r[1..close];
                steps.push(Step::Key {
                    name: name.to_string(),
                    exact: true,
                });
                close + 1
            } else {
                let close = r.find(']')?;
                let inner = r[..close].trim();
                steps.push(if inner == "*" {
                    Step::Wildcard
                } else {
                    Step::Index(inner.parse().ok()?)
                });
                close
            };
            rest = r[end..].strip_prefix(']')?;
        } else {
            return None;
        }
    }
    Some(steps)
}

/// What is found at `steps` in `json`: one value's text, several (under a wildcard), or
/// nothing. Err when a name matches several fields in different case (Databricks' error).
fn find<'a>(json: &'a str, steps: &[Step]) -> Result<Vec<&'a str>, String> {
    let mut current = vec![json.trim()];
    for step in steps {
        let mut next = vec![];
        for value in current {
            match step {
                Step::Key { name, exact } => {
                    let Some(fields) = object_fields(value) else {
                        continue;
                    };
                    let exact_hit = fields.iter().find(|(k, _)| k == name);
                    if *exact || exact_hit.is_some() {
                        next.extend(exact_hit.map(|(_, v)| *v));
                        continue;
                    }
                    let hits: Vec<&(String, &str)> = fields
                        .iter()
                        .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                        .collect();
                    if hits.len() > 1 {
                        return Err(format!(
                            "the JSON path names field '{name}', and the object has {} fields of that name in different case: use ['{}'] with the exact case",
                            hits.len(),
                            hits[0].0
                        ));
                    }
                    next.extend(hits.first().map(|(_, v)| *v));
                }
                Step::Index(i) => {
                    if let Some(items) = array_items(value) {
                        next.extend(items.get(*i).copied());
                    }
                }
                Step::Wildcard => {
                    if let Some(items) = array_items(value) {
                        next.extend(items);
                    }
                }
            }
        }
        current = next;
    }
    Ok(current)
}

/// The value at `text[start..]` (after whitespace): where it ends.
fn value_end(text: &str, start: usize) -> Option<usize> {
    let b = text.as_bytes();
    match *b.get(start)? {
        b'"' => string_end(b, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            while i < b.len() {
                match b[i] {
                    b'"' => {
                        i = string_end(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = text[start..]
                .find([',', '}', ']', ' ', '\t', '\n', '\r'])
                .unwrap_or(text.len() - start);
            (len > 0).then_some(start + len)
        }
    }
}

/// The end of the string starting at `b[start]` (a quote), past its closing quote.
fn string_end(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

fn skip_ws(text: &str, mut i: usize) -> usize {
    while text.as_bytes().get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// An object's fields (names unescaped) with their values' text; None if `value` is not one.
fn object_fields(value: &str) -> Option<Vec<(String, &str)>> {
    if !value.starts_with('{') {
        return None;
    }
    let mut out = vec![];
    let mut i = skip_ws(value, 1);
    if value.as_bytes().get(i) == Some(&b'}') {
        return Some(out);
    }
    loop {
        let key_end = string_end(value.as_bytes(), i)?;
        let key: String = serde_json::from_str(&value[i..key_end]).ok()?;
        i = skip_ws(value, key_end);
        if value.as_bytes().get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(value, i + 1);
        let end = value_end(value, start)?;
        out.push((key, &value[start..end]));
        i = skip_ws(value, end);
        match value.as_bytes().get(i) {
            Some(b',') => i = skip_ws(value, i + 1),
            Some(b'}') => return Some(out),
            _ => return None,
        }
    }
}

/// An array's elements' text; None if `value` is not one.
fn array_items(value: &str) -> Option<Vec<&str>> {
    if !value.starts_with('[') {
        return None;
    }
    let mut out = vec![];
    let mut i = skip_ws(value, 1);
    if value.as_bytes().get(i) == Some(&b']') {
        return Some(out);
    }
    loop {
        let end = value_end(value, i)?;
        out.push(&value[i..end]);
        i = skip_ws(value, end);
        match value.as_bytes().get(i) {
            Some(b',') => i = skip_ws(value, i + 1),
            Some(b']') => return Some(out),
            _ => return None,
        }
    }
}

/// JSON text without the whitespace between its tokens.
fn compact(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in value.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

/// One found value as the functions return it: a string unquoted, `null` as NULL, anything
/// else as its compact text.
fn as_result(value: &str) -> Option<String> {
    match value.as_bytes().first()? {
        b'"' => serde_json::from_str(value).ok(),
        b'n' if value == "null" => None,
        _ => Some(compact(value)),
    }
}

/// Whether `json` is well-formed JSON (checked once, without building its values).
pub(super) fn well_formed(json: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(json).is_ok()
}

/// The result of a path over one JSON text. `unwrap_single`: a wildcard that finds one value
/// returns it (`get_json_object`, as Spark); the `:` operator always returns an array then.
fn extract(json: &str, steps: &[Step], unwrap_single: bool) -> Result<Option<String>, String> {
    if !well_formed(json) {
        return Ok(None);
    }
    let found = find(json, steps)?;
    let wildcard = steps.contains(&Step::Wildcard);
    Ok(match (wildcard, found.as_slice()) {
        (_, []) => None,
        (false, [one]) => as_result(one),
        (true, [one]) if unwrap_single => as_result(one),
        (_, many) => Some(format!(
            "[{}]",
            many.iter()
                .map(|v| compact(v))
                .collect::<Vec<_>>()
                .join(",")
        )),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    /// `get_json_object(json, '$.path')`.
    GetJsonObject,
    /// The `:` operator.
    Path,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonFunction {
    kind: Kind,
    signature: Signature,
}

impl JsonFunction {
    fn new(kind: Kind) -> Self {
        JsonFunction {
            kind,
            signature: Signature::string(2, Volatility::Immutable),
        }
    }

    fn steps(&self, path: &str) -> Result<Option<Vec<Step>>, String> {
        match self.kind {
            Kind::GetJsonObject => Ok(parse_json_path(path)),
            Kind::Path => decode_steps(path)
                .map(Some)
                .ok_or_else(|| format!("malformed JSON path steps {path:?}")),
        }
    }
}

impl ScalarUDFImpl for JsonFunction {
    fn name(&self) -> &str {
        match self.kind {
            Kind::GetJsonObject => "get_json_object",
            Kind::Path => JSON_PATH,
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let n = args.number_rows;
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.to_array(n))
            .collect::<datafusion::error::Result<_>>()?;
        let strings = |a: &ArrayRef| -> datafusion::error::Result<ArrayRef> {
            Ok(datafusion::arrow::compute::cast(a, &DataType::Utf8)?)
        };
        let (json, path) = (strings(&arrays[0])?, strings(&arrays[1])?);
        let (json, path) = (json.as_string::<i32>(), path.as_string::<i32>());
        // A constant path (the usual case) is read once.
        let constant = match &args.args[1] {
            ColumnarValue::Scalar(
                ScalarValue::Utf8(Some(p))
                | ScalarValue::Utf8View(Some(p))
                | ScalarValue::LargeUtf8(Some(p)),
            ) => Some(self.steps(p)),
            _ => None,
        };
        let mut out = StringBuilder::with_capacity(n, n * 8);
        for i in 0..n {
            if json.is_null(i) || path.is_null(i) {
                out.append_null();
                continue;
            }
            let steps = match &constant {
                Some(s) => s.clone(),
                None => self.steps(path.value(i)),
            };
            let steps = match steps {
                Ok(Some(s)) => s,
                Ok(None) => {
                    out.append_null();
                    continue;
                }
                Err(e) => return exec_err!("{e}"),
            };
            match extract(json.value(i), &steps, self.kind == Kind::GetJsonObject) {
                Ok(v) => out.append_option(v),
                Err(e) => return exec_err!("{e}"),
            }
        }
        let result: ArrayRef = Arc::new(out.finish());
        crate::engine::functions::shaped_like(&args.args, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STORE: &str = r#"{"store":{"fruit":[{"weight":8,"type":"apple"},{"weight":9,"type":"pear"}],
        "basket":[[1,2,{"b":"y","a":"x"}],[3,4],[5,6]],"bicycle":{"price":19.95,"color":"red"}},
        "owner":"amy","zip code":"94025","fb:testid":"1234","big":12345678901234567890.10,"n":null}"#;

    fn get(json: &str, path: &str) -> Option<String> {
        extract(json, &parse_json_path(path)?, true).unwrap()
    }

    #[test]
    fn get_json_object_as_the_databricks_reference_shows_it() {
        assert_eq!(get(r#"{"a":"b"}"#, "$.a").as_deref(), Some("b"));
        assert_eq!(get(r#"{"a":{"b":"c"}}"#, "$.a.b").as_deref(), Some("c"));
        assert_eq!(
            get(r#"{"items":["apple","pear"]}"#, "$.items[0]").as_deref(),
            Some("apple")
        );
        assert_eq!(
            get(r#"{"first name":"Ada"}"#, r#"$["first name"]"#).as_deref(),
            Some("Ada")
        );
        assert_eq!(
            get(r#"{"ids":{"a.b":"42"}}"#, r#"$.ids["a.b"]"#).as_deref(),
            Some("42")
        );
        assert_eq!(
            get(STORE, "$.store.fruit[*].type").as_deref(),
            Some(r#"["apple","pear"]"#)
        );
        assert_eq!(
            get(STORE, "$.store.bicycle").as_deref(),
            Some(r#"{"price":19.95,"color":"red"}"#)
        );
        // Numbers exactly as written; JSON null, a missing field, bad JSON and bad paths NULL.
        assert_eq!(
            get(STORE, "$.big").as_deref(),
            Some("12345678901234567890.10")
        );
        assert_eq!(get(STORE, "$.n"), None);
        assert_eq!(get(STORE, "$.nope"), None);
        assert_eq!(get(r#"{"a":1"#, "$.a"), None);
        assert_eq!(get(STORE, "store"), None);
        assert_eq!(get(STORE, "$.Owner"), None);
        // A wildcard finding one value gives that value.
        assert_eq!(get(r#"{"a":[{"b":1}]}"#, "$.a[*].b").as_deref(), Some("1"));
    }

    #[test]
    fn the_colon_path_matches_names_in_any_case_unless_bracketed() {
        let key = |n: &str| Step::Key {
            name: n.into(),
            exact: false,
        };
        let exact = |n: &str| Step::Key {
            name: n.into(),
            exact: true,
        };
        let path = |steps: Vec<Step>| extract(STORE, &steps, false).unwrap();
        assert_eq!(path(vec![key("OWNER")]).as_deref(), Some("amy"));
        assert_eq!(path(vec![exact("OWNER")]), None);
        assert_eq!(path(vec![key("Zip Code")]).as_deref(), Some("94025"));
        assert_eq!(
            path(vec![
                key("store"),
                key("basket"),
                Step::Wildcard,
                Step::Index(0)
            ])
            .as_deref(),
            Some("[1,3,5]")
        );
        assert_eq!(
            path(vec![
                key("store"),
                key("fruit"),
                Step::Index(1),
                key("type")
            ])
            .as_deref(),
            Some("pear")
        );
        assert_eq!(
            path(vec![
                key("store"),
                key("basket"),
                Step::Index(0),
                Step::Index(2)
            ])
            .as_deref(),
            Some(r#"{"b":"y","a":"x"}"#)
        );
        let ambiguous = extract(r#"{"a":1,"A":2}"#, &[key("a")], false);
        assert_eq!(
            ambiguous.unwrap().as_deref(),
            Some("1"),
            "an exact match wins"
        );
        assert!(extract(r#"{"a":1,"A":2}"#, &[key("b"), key("x")], false).is_ok());
        assert!(extract(r#"{"ab":1,"aB":2}"#, &[key("AB")], false).is_err());
        let steps = vec![key("a\\nb\n"), exact("c\\"), Step::Index(3), Step::Wildcard];
        assert_eq!(decode_steps(&encode_steps(&steps)), Some(steps));
    }
}
