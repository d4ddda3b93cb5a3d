//! The one parser of tidemark: it resolves `IDENTIFIER(...)` at the token level, handles
//! tidemark's own statements, and hands every other statement to sqlparser untouched.

pub mod ast;
pub mod script;
pub mod splitter;
pub mod syntax;

use datafusion::sql::sqlparser::ast::Expr;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, Word};

mod dialect;
mod grammar;
use grammar::*;

pub use ast::*;
pub use script::{Compound, Condition, Item, ItemKind};

use crate::catalog::split_qualified;
use crate::error::{Error, Result};

/// The SQL dialect tidemark speaks (Databricks: back-quoted names, `VERSION AS OF`, ...).
pub const DIALECT: dialect::Tidemark = dialect::Tidemark;

/// Turns the argument of `IDENTIFIER(...)` into the name it spells.
pub trait IdentifierResolver {
    /// Evaluate a constant string expression (literals, variables, `||`).
    fn resolve_identifier(&self, expr: &Expr) -> Result<String>;
}

/// A resolver for syntax checks only: every `IDENTIFIER()` becomes a placeholder name.
pub struct SyntaxOnly;

impl IdentifierResolver for SyntaxOnly {
    fn resolve_identifier(&self, _expr: &Expr) -> Result<String> {
        Ok("__identifier__".into())
    }
}

/// The longest statement accepted (the limit Databricks SQL sets): bulk data belongs in
/// tables and files, and a longer text only costs memory while it is parsed and planned.
pub const MAX_STATEMENT_BYTES: usize = 16 << 20;

/// Parse one statement (no trailing `;`).
pub fn parse(sql: &str, resolver: &dyn IdentifierResolver) -> Result<Statement> {
    if sql.len() > MAX_STATEMENT_BYTES {
        return Err(Error::Invalid(format!(
            "statement is {:.1} MiB, over the {} MiB limit for one statement: load bulk data from a table or Delta files (INSERT ... SELECT, COPY INCREMENTAL) instead of literals",
            sql.len() as f64 / (1 << 20) as f64,
            MAX_STATEMENT_BYTES >> 20
        )));
    }
    parse_inner(sql, resolver).map_err(|e| match e {
        // sqlparser gives no position for "found: EOF": point just past the statement.
        Error::Parse {
            message,
            line: 1,
            col: 1,
        } if message.ends_with("found: EOF") => {
            let trimmed = sql.trim_end();
            let line = trimmed.matches('\n').count() + 1;
            let col = trimmed
                .rsplit('\n')
                .next()
                .map(|l| l.chars().count() + 1)
                .unwrap_or(1);
            Error::Parse { message, line, col }
        }
        Error::Parse { message, line, col } => Error::Parse {
            message: with_keyword_hint(message),
            line,
            col,
        },
        other => other,
    })
}

/// Parse SQL text tidemark stored or wrote itself (a default, a view's query, a function's
/// body) as an expression.
pub(crate) fn expr_text(sql: &str) -> Result<Expr> {
    Ok(Parser::new(&DIALECT).try_with_sql(sql)?.parse_expr()?)
}

/// Parse an expression a user wrote (a script's condition, a SIGNAL's message): its string
/// literals read as in a statement (see [`spark_strings`]), and nothing may follow it.
pub(crate) fn user_expr_text(sql: &str) -> Result<Expr> {
    let tokens = tokenize(sql)?;
    let mut p = Parser::new(&DIALECT).with_tokens_with_locations(tokens);
    let e = p.parse_expr()?;
    expect_end(&p, "the end of the expression")?;
    Ok(e)
}

/// An error unless the parser is at the end of its tokens.
fn expect_end(p: &Parser, what: &str) -> Result<()> {
    if p.peek_token().token == Token::EOF {
        return Ok(());
    }
    let t = p.peek_token();
    Err(Error::parse(
        format!("syntax error: expected {what}, found: {}", t.token),
        t.span.start.line as usize,
        t.span.start.column as usize,
    ))
}

/// [`expr_text`] for a query.
pub(crate) fn query_text(sql: &str) -> Result<datafusion::sql::sqlparser::ast::Query> {
    Ok(*Parser::new(&DIALECT).try_with_sql(sql)?.parse_query()?)
}

/// [`expr_text`] for a data type.
pub(crate) fn type_text(sql: &str) -> Result<datafusion::sql::sqlparser::ast::DataType> {
    Ok(Parser::new(&DIALECT).try_with_sql(sql)?.parse_data_type()?)
}

/// A column list as `read_files` takes it (`'a INT, b STRING'`): names and types.
pub(crate) fn column_list_text(
    sql: &str,
) -> Result<Vec<(String, datafusion::sql::sqlparser::ast::DataType)>> {
    use datafusion::sql::sqlparser::tokenizer::Token;
    let mut p = Parser::new(&DIALECT).try_with_sql(sql)?;
    let mut out = vec![];
    loop {
        let name = p.parse_identifier()?.value;
        out.push((name, p.parse_data_type()?));
        if !p.consume_token(&Token::Comma) {
            break;
        }
    }
    p.expect_token(&Token::EOF)?;
    Ok(out)
}

/// tidemark's own keywords, for "did you mean" on a typo (`WATERMARKS`, `CONCURENCY`) and
/// for the shell's Tab completion.
pub const OWN_KEYWORDS: &[&str] = &[
    "INCREMENTAL",
    "WATERMARK",
    "SINCE",
    "CONTROL TABLE",
    "MERGE ON",
    "LOOKBACK",
    "DRY RUN",
    "CONCURRENCY",
    "FOR EACH",
    "END FOR",
    "IDENTIFIER",
];

/// A syntax error that found a near miss of one of tidemark's keywords says which.
fn with_keyword_hint(message: String) -> String {
    let Some((_, found)) = message.rsplit_once("found: ") else {
        return message;
    };
    let found = found.trim();
    // Short words are too near too many (`AND` is one letter from `END`).
    if found.len() < 4 || !found.chars().all(|c| c.is_ascii_alphabetic() || c == '_') {
        return message;
    }
    let hint = OWN_KEYWORDS.iter().find(|k| {
        let word = k.split(' ').next().unwrap_or(k);
        let joined = k.replace(' ', "");
        (word.len() >= 5 && is_near_miss(found, word))
            || (joined != *word
                && (found.eq_ignore_ascii_case(&joined) || is_near_miss(found, &joined)))
    });
    match hint {
        Some(k) => format!("{message} (did you mean {k}?)"),
        None => message,
    }
}

/// A typo of `wanted` rather than another word: at most a third of its letters differ.
pub(crate) fn is_near_miss(typed: &str, wanted: &str) -> bool {
    let distance = strsim::damerau_levenshtein(&typed.to_lowercase(), &wanted.to_lowercase());
    distance > 0 && distance <= (typed.chars().count() / 3).max(1)
}

fn parse_inner(sql: &str, resolver: &dyn IdentifierResolver) -> Result<Statement> {
    let tokens = tokenize(sql)?;
    let first = first_words(&tokens, 2);
    let first_is = |i: usize, w: &str| first.get(i).is_some_and(|x| x.eq_ignore_ascii_case(w));
    if first_is(0, "FOR") {
        return parse_for(sql, tokens, resolver);
    }
    if script::is_compound(&tokens) {
        return Ok(Statement::Script(Box::new(script::parse_compound(
            sql, tokens,
        )?)));
    }
    let mut tokens = substitute_identifiers(tokens, resolver)?;
    if first_is(0, "MERGE") {
        tokens = expand_merge_stars(tokens);
    }
    if first_is(0, "VALUES") {
        tokens = bare_values(tokens);
    }
    tokens = table_queries(tokens);
    let mut table_comment = None;
    if first_is(0, "CREATE") {
        tokens = create_table_using(tokens)?;
        table_comment = take_table_comment(&mut tokens);
    }
    let mut p = Parser::new(&DIALECT).with_tokens_with_locations(tokens);
    let mut stmt = parse_statement(&mut p)?;
    if let (Some(c), Statement::Sql(sql)) = (table_comment, &mut stmt) {
        use datafusion::sql::sqlparser::ast::{CommentDef, Statement as Sql};
        match sql.as_mut() {
            Sql::CreateTable(create) => create.comment = Some(CommentDef::WithoutEq(c)),
            Sql::CreateView(create) => create.comment = Some(c),
            _ => {}
        }
    }
    expect_end(&p, "end of statement")?;
    Ok(stmt)
}

/// Tokenize with positions, string literals read as Databricks reads them (see
/// [`spark_strings`]).
fn tokenize(sql: &str) -> Result<Vec<TokenWithSpan>> {
    let tokens = Tokenizer::new(&DIALECT, sql)
        .tokenize_with_location()
        .map_err(|e| {
            Error::parse(
                format!("syntax error: {}", e.message),
                e.location.line as usize,
                e.location.column as usize,
            )
        })?;
    spark_strings(tokens).map(spark_call_clauses)
}

/// `TABLE t` as a query (`TABLE t`, `INSERT INTO x TABLE t`, `CREATE TABLE x AS TABLE t`, `(TABLE
/// t)`, `... UNION TABLE t`): `SELECT * FROM t`, written before parsing because sqlparser
/// reads the words after a one-part name as part of it (`TABLE t LIMIT 5` lost its LIMIT).
fn table_queries(mut tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let word = |t: &Token, w: &str| is_word(t, w);
    let mut replace = vec![];
    for (k, &i) in significant.iter().enumerate() {
        if !word(&tokens[i].token, "TABLE") {
            continue;
        }
        let at = |p: usize| significant.get(p).map(|&i| &tokens[i].token);
        let before = k.checked_sub(1).and_then(at);
        let set_operator = |t: Option<&Token>| {
            t.is_some_and(|t| {
                ["UNION", "EXCEPT", "INTERSECT", "MINUS"]
                    .iter()
                    .any(|w| word(t, w))
            })
        };
        // The name after TABLE, and the token after it.
        let mut end = k + 1;
        while at(end + 1) == Some(&Token::Period) {
            end += 2;
        }
        let after = at(end + 1);
        let query_start = match before {
            None => true,
            // `FROM (TABLE t)`, `IN (TABLE t)`, not `CREATE TABLE x (table STRING)`.
            Some(Token::LParen) => {
                after == Some(&Token::RParen)
                    && k.checked_sub(2).and_then(at).is_none_or(|t| {
                        *t == Token::LParen
                            || set_operator(Some(t))
                            || ["FROM", "JOIN", "IN", "EXISTS", "AS"]
                                .iter()
                                .any(|w| word(t, w))
                    })
            }
            // `CREATE ... AS TABLE t`, not `SELECT a AS table FROM t`.
            Some(t) if word(t, "AS") => at(0).is_some_and(|f| word(f, "CREATE")),
            Some(t) if word(t, "ALL") || word(t, "DISTINCT") => {
                set_operator(k.checked_sub(2).and_then(at))
            }
            Some(t) => set_operator(Some(t)),
        };
        // INSERT INTO|OVERWRITE [TABLE] name [.name ...] TABLE t
        let after_insert = {
            let mut p = k;
            let mut name = false;
            while p >= 2
                && matches!(&tokens[significant[p - 1]].token, Token::Word(_))
                && !["INTO", "OVERWRITE", "TABLE"]
                    .iter()
                    .any(|w| word(&tokens[significant[p - 1]].token, w))
            {
                name = true;
                p -= 1;
                if p >= 2 && tokens[significant[p - 1]].token == Token::Period {
                    p -= 1;
                } else {
                    break;
                }
            }
            let mut q = p;
            if q >= 1 && word(&tokens[significant[q - 1]].token, "TABLE") {
                q -= 1;
            }
            name && q >= 2
                && ["INTO", "OVERWRITE"]
                    .iter()
                    .any(|w| word(&tokens[significant[q - 1]].token, w))
                && word(&tokens[significant[q - 2]].token, "INSERT")
        };
        let next_is_name = significant
            .get(k + 1)
            .is_some_and(|&j| matches!(tokens[j].token, Token::Word(_)));
        if (query_start || after_insert) && next_is_name {
            replace.push(i);
        }
    }
    for i in replace.into_iter().rev() {
        let span = tokens[i].span;
        let new = [
            Token::make_keyword("SELECT"),
            Token::Whitespace(datafusion::sql::sqlparser::tokenizer::Whitespace::Space),
            Token::Mul,
            Token::Whitespace(datafusion::sql::sqlparser::tokenizer::Whitespace::Space),
            Token::make_keyword("FROM"),
        ];
        tokens.splice(i..=i, new.into_iter().map(|t| TokenWithSpan::new(t, span)));
    }
    tokens
}

/// `VALUES 1, 2, 3`: Spark's rows of one column each, without parentheses, as `VALUES (1),
/// (2), (3)`.
fn bare_values(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_) | Token::SemiColon))
        .collect();
    let (Some(&values), Some(&next)) = (significant.first(), significant.get(1)) else {
        return tokens;
    };
    if tokens[next].token == Token::LParen {
        return tokens;
    }
    let last = *significant.last().unwrap_or(&next);
    let at = |t: &TokenWithSpan, token: Token| TokenWithSpan::new(token, t.span);
    let mut out = Vec::with_capacity(tokens.len() + 8);
    let mut depth = 0i32;
    for (i, t) in tokens.into_iter().enumerate() {
        match &t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        if i > values && i <= last && depth == 0 && t.token == Token::Comma {
            out.push(at(&t, Token::RParen));
            out.push(t.clone());
            out.push(at(&t, Token::LParen));
            continue;
        }
        let is_next = i == next;
        let is_last = i == last;
        if is_next {
            out.push(at(&t, Token::LParen));
        }
        out.push(t.clone());
        if is_last {
            out.push(at(&t, Token::RParen));
        }
    }
    out
}

/// Spark's clauses inside a call's parentheses that sqlparser does not read: `first(x IGNORE
/// NULLS)` / `RESPECT NULLS` (the ignoreNulls argument: `first(x, true)`), and `trim(BOTH
/// FROM s)` (spaces trimmed; the FROM dropped reads the same).
fn spark_call_clauses(mut tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let word = |tokens: &[TokenWithSpan], k: usize, w: &str| {
        significant
            .get(k)
            .is_some_and(|&i| is_word(&tokens[i].token, w))
    };
    // The function called at each open parenthesis.
    let mut calls: Vec<String> = vec![];
    for k in 0..significant.len() {
        let i = significant[k];
        match &tokens[i].token {
            Token::LParen => {
                let name = k
                    .checked_sub(1)
                    .map(|p| &tokens[significant[p]].token)
                    .and_then(|t| match t {
                        Token::Word(w) if w.quote_style.is_none() => Some(w.value.to_lowercase()),
                        _ => None,
                    })
                    .unwrap_or_default();
                if name == "trim"
                    && ["BOTH", "LEADING", "TRAILING"]
                        .iter()
                        .any(|w| word(&tokens, k + 1, w))
                    && word(&tokens, k + 2, "FROM")
                {
                    let from = significant[k + 2];
                    tokens[from].token =
                        Token::Whitespace(datafusion::sql::sqlparser::tokenizer::Whitespace::Space);
                }
                // extract(DAYOFWEEK_ISO FROM d): Monday 1 ... Sunday 7, the engine's ISODOW.
                if name == "extract" && word(&tokens, k + 1, "DAYOFWEEK_ISO") {
                    tokens[significant[k + 1]].token = Token::make_word("ISODOW", None);
                }
                calls.push(name);
            }
            Token::RParen => {
                calls.pop();
            }
            Token::Word(_)
                if (word(&tokens, k, "IGNORE") || word(&tokens, k, "RESPECT"))
                    && word(&tokens, k + 1, "NULLS")
                    && significant
                        .get(k + 2)
                        .is_some_and(|&j| tokens[j].token == Token::RParen)
                    && calls.last().is_some_and(|c| {
                        matches!(c.as_str(), "first" | "last" | "first_value" | "last_value")
                    }) =>
            {
                let ignore = word(&tokens, k, "IGNORE");
                tokens[i].token = Token::Comma;
                tokens[significant[k + 1]].token =
                    Token::make_word(if ignore { "true" } else { "false" }, None);
            }
            _ => {}
        }
    }
    tokens
}

/// String literals of a statement as Databricks reads them: backslash escapes unescaped
/// (`'\\d'` is `\d`, `'a\tb'` holds a tab, `'\u00e9'` is `é`; `\%` and `\_` keep their
/// backslash for LIKE; any other `\c` is `c`), and a raw string `r'...'` as written. Only the
/// statement text a user wrote is read so: SQL tidemark prints and parses again (stored views,
/// rewritten functions) keeps its strings as they are.
fn spark_strings(tokens: Vec<TokenWithSpan>) -> Result<Vec<TokenWithSpan>> {
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    for t in tokens {
        let raw_prefix = out.last().is_some_and(|prev| {
            matches!(&prev.token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("r"))
                && prev.span.end == t.span.start
        });
        let token = match t.token {
            raw @ (Token::SingleQuotedString(_) | Token::DoubleQuotedString(_)) if raw_prefix => {
                let start = out.pop().map(|p| p.span.start).unwrap_or(t.span.start);
                out.push(TokenWithSpan::new(
                    raw,
                    datafusion::sql::sqlparser::tokenizer::Span::new(start, t.span.end),
                ));
                continue;
            }
            Token::SingleQuotedString(s) | Token::DoubleQuotedString(s)
                if s.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1 =>
            {
                // Databricks reads `\'` as a quote inside the string, which then goes on.
                return Err(Error::parse(
                    "syntax error: a string literal ends with a single backslash, which Databricks reads as an escaped quote (the string would go on); write \\\\ for a backslash, or r'...' for a raw string",
                    t.span.start.line as usize,
                    t.span.start.column as usize,
                ));
            }
            Token::SingleQuotedString(s) => Token::SingleQuotedString(unescape(&s)),
            Token::DoubleQuotedString(s) => Token::DoubleQuotedString(unescape(&s)),
            // `127Y`, `10S`, `5L`, `1.5D`, `2F`, `1.5BD`: one word, or a number and a word.
            Token::Word(w) if w.quote_style.is_none() && suffixed(&w.value).is_some() => {
                let (number, ty) = suffixed(&w.value).unwrap_or_default();
                push_typed_number(&mut out, number, ty, t.span)?;
                continue;
            }
            Token::Word(w)
                if w.quote_style.is_none()
                    && literal_type(&w.value).is_some()
                    && matches!(out.last(), Some(prev) if matches!(prev.token, Token::Number(..)) && prev.span.end == t.span.start) =>
            {
                let prev = out.pop().expect("checked above");
                let Token::Number(number, _) = prev.token else {
                    unreachable!("checked above")
                };
                let ty = literal_type(&w.value).unwrap_or_default();
                let span =
                    datafusion::sql::sqlparser::tokenizer::Span::new(prev.span.start, t.span.end);
                push_typed_number(&mut out, &number, ty, span)?;
                continue;
            }
            other => other,
        };
        out.push(TokenWithSpan::new(token, t.span));
    }
    Ok(out)
}

/// The SQL type of a Spark numeric literal suffix (`Y` TINYINT, `S` SMALLINT, `L` BIGINT,
/// `F` FLOAT, `D` DOUBLE, `BD` DECIMAL: "" keeps the number as it is, exact).
fn literal_type(suffix: &str) -> Option<&'static str> {
    Some(match suffix.to_ascii_uppercase().as_str() {
        "Y" => "TINYINT",
        "S" => "SMALLINT",
        "L" => "BIGINT",
        "F" => "FLOAT",
        "D" => "DOUBLE",
        "BD" => "",
        _ => return None,
    })
}

/// A word that is a number with a Spark type suffix (`127Y`, `1e3D`): the number and type.
fn suffixed(word: &str) -> Option<(&str, &'static str)> {
    let cut = word.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, suffix) = word.split_at(cut);
    if number.is_empty() || !number.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    Some((number, literal_type(suffix)?))
}

/// Pushes `number` of type `ty` onto `out`; a unary minus just before it becomes part of the
/// literal, as Spark reads `-128Y` (CAST(128 AS TINYINT) would not fit).
fn push_typed_number(
    out: &mut Vec<TokenWithSpan>,
    number: &str,
    ty: &str,
    span: datafusion::sql::sqlparser::tokenizer::Span,
) -> Result<()> {
    let unsigned = number.trim_start_matches('-');
    if ty.is_empty()
        && unsigned.bytes().all(|b| b.is_ascii_digit())
        && unsigned.trim_start_matches('0').len() > 38
    {
        return Err(Error::parse(
            format!(
                "[INVALID_NUMERIC_LITERAL_RANGE] {number}BD has more than 38 digits, the most a DECIMAL holds"
            ),
            span.start.line as usize,
            span.start.column as usize,
        ));
    }
    use datafusion::sql::sqlparser::keywords::Keyword;
    let unary = matches!(out.last(), Some(m) if m.token == Token::Minus && m.span.end == span.start)
        && match out
            .iter()
            .rev()
            .skip(1)
            .map(|t| &t.token)
            .find(|t| !matches!(t, Token::Whitespace(_)))
        {
            None => true,
            // Only words after which a value starts (a column named `value` ends one).
            Some(Token::Word(w)) => {
                w.quote_style.is_none()
                    && matches!(
                        w.keyword,
                        Keyword::SELECT
                            | Keyword::WHERE
                            | Keyword::AND
                            | Keyword::OR
                            | Keyword::NOT
                            | Keyword::WHEN
                            | Keyword::THEN
                            | Keyword::ELSE
                            | Keyword::CASE
                            | Keyword::BY
                            | Keyword::ON
                            | Keyword::HAVING
                            | Keyword::RETURN
                            | Keyword::IN
                            | Keyword::IS
                            | Keyword::BETWEEN
                            | Keyword::LIKE
                            | Keyword::SET
                            | Keyword::VALUES
                            | Keyword::LIMIT
                            | Keyword::OFFSET
                            | Keyword::DISTINCT
                            | Keyword::ALL
                            | Keyword::DEFAULT
                    )
            }
            Some(
                Token::Number(..)
                | Token::RParen
                | Token::RBracket
                | Token::SingleQuotedString(_)
                | Token::DoubleQuotedString(_)
                | Token::Placeholder(_),
            ) => false,
            Some(_) => true,
        };
    let (number, span) = if unary {
        let minus = out.pop().expect("checked above");
        (
            format!("-{number}"),
            datafusion::sql::sqlparser::tokenizer::Span::new(minus.span.start, span.end),
        )
    } else {
        (number.to_string(), span)
    };
    out.extend(typed_number(&number, ty, span));
    Ok(())
}

/// `CAST(number AS ty)` as tokens (for an exact DECIMAL, the number alone where it has a
/// fraction, which the engine reads as a DECIMAL of its digits).
fn typed_number(
    number: &str,
    ty: &str,
    span: datafusion::sql::sqlparser::tokenizer::Span,
) -> Vec<TokenWithSpan> {
    let word = |w: &str| Token::make_word(w, None);
    let unsigned = number.trim_start_matches('-');
    let digits = unsigned.trim_start_matches('0').len().max(1);
    // `10BD` is a whole number; `1.5BD` and `1E-2BD` the engine reads exactly as written.
    let fraction = !unsigned.bytes().all(|b| b.is_ascii_digit());
    // A DOUBLE or FLOAT from the literal's text (through a DECIMAL, the last digit of a long
    // literal could round differently).
    let number = if matches!(ty, "DOUBLE" | "FLOAT") {
        Token::SingleQuotedString(number.to_string())
    } else {
        Token::Number(number.to_string(), false)
    };
    let tokens = if ty.is_empty() && fraction {
        vec![number]
    } else if ty.is_empty() {
        // `10BD`: DECIMAL(2,0), as Spark types it (the number alone would be a BIGINT).
        vec![
            word("CAST"),
            Token::LParen,
            number,
            word("AS"),
            word("DECIMAL"),
            Token::LParen,
            Token::Number(digits.to_string(), false),
            Token::Comma,
            Token::Number("0".into(), false),
            Token::RParen,
            Token::RParen,
        ]
    } else {
        vec![
            word("CAST"),
            Token::LParen,
            number,
            word("AS"),
            word(ty),
            Token::RParen,
        ]
    };
    tokens
        .into_iter()
        .map(|t| TokenWithSpan::new(t, span))
        .collect()
}

/// Spark's unescaping of a string literal's text.
fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' || i + 1 == chars.len() {
            out.push(c);
            i += 1;
            continue;
        }
        let next = chars[i + 1];
        let hex = |from: usize, n: usize| -> Option<char> {
            let digits: String = chars.get(from..from + n)?.iter().collect();
            char::from_u32(u32::from_str_radix(&digits, 16).ok()?)
        };
        let octal = || -> Option<char> {
            let d: Vec<u32> = chars
                .get(i + 1..i + 4)?
                .iter()
                .map(|c| c.to_digit(8))
                .collect::<Option<_>>()?;
            (d[0] <= 3).then(|| char::from_u32(d[0] * 64 + d[1] * 8 + d[2]))?
        };
        match next {
            'u' if hex(i + 2, 4).is_some() => {
                out.push(hex(i + 2, 4).unwrap_or_default());
                i += 6;
                continue;
            }
            '0'..='3' if octal().is_some() => {
                out.push(octal().unwrap_or_default());
                i += 4;
                continue;
            }
            '0' => out.push('\u{0}'),
            'b' => out.push('\u{8}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'Z' => out.push('\u{1A}'),
            '%' | '_' => {
                out.push('\\');
                out.push(next);
            }
            other => out.push(other),
        }
        i += 2;
    }
    out
}

/// The first `n` unquoted words of the statement.
fn first_words(tokens: &[TokenWithSpan], n: usize) -> Vec<String> {
    tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .take(n)
        .map(|t| match &t.token {
            Token::Word(w) if w.quote_style.is_none() => w.value.clone(),
            _ => String::new(),
        })
        .collect()
}

fn is_word(t: &Token, w: &str) -> bool {
    matches!(t, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w))
}

/// Replace every `IDENTIFIER(expr)` with the back-quoted name parts it evaluates to.
/// Nothing is pasted as text: the result is tokens, so a name can never escape into SQL.
pub fn substitute_identifiers(
    tokens: Vec<TokenWithSpan>,
    resolver: &dyn IdentifierResolver,
) -> Result<Vec<TokenWithSpan>> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        let next = tokens[i + 1..]
            .iter()
            .position(|t| !matches!(t.token, Token::Whitespace(_)));
        let opens = next.is_some_and(|n| tokens[i + 1 + n].token == Token::LParen);
        if is_word(&t.token, "IDENTIFIER") && opens {
            let open = i + 1 + next.unwrap_or(0);
            let mut depth = 0usize;
            let mut close = None;
            for (j, tok) in tokens.iter().enumerate().skip(open) {
                match tok.token {
                    Token::LParen => depth += 1,
                    Token::RParen => {
                        depth -= 1;
                        if depth == 0 {
                            close = Some(j);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let Some(close) = close else {
                return Err(Error::parse(
                    "syntax error: IDENTIFIER( is not closed",
                    t.span.start.line as usize,
                    t.span.start.column as usize,
                ));
            };
            let mut inner: Vec<TokenWithSpan> = tokens[open + 1..close].to_vec();
            inner.push(TokenWithSpan::wrap(Token::EOF));
            let at = (t.span.start.line as usize, t.span.start.column as usize);
            let expr = Parser::new(&DIALECT)
                .with_tokens_with_locations(inner)
                .parse_expr()
                .map_err(|e| crate::error::parser_error(&e))?;
            let name = resolver
                .resolve_identifier(&expr)
                .map_err(|e| Error::parse(format!("IDENTIFIER({expr}): {e}"), at.0, at.1))?;
            let parts = split_qualified(&name)
                .map_err(|e| Error::parse(format!("IDENTIFIER({expr}): {e}"), at.0, at.1))?;
            for (k, part) in parts.into_iter().enumerate() {
                if k > 0 {
                    out.push(TokenWithSpan::new(Token::Period, t.span));
                }
                out.push(TokenWithSpan::new(
                    Token::Word(Word {
                        value: part,
                        quote_style: Some('`'),
                        keyword: Keyword::NoKeyword,
                    }),
                    t.span,
                ));
            }
            i = close + 1;
        } else {
            out.push(t.clone());
            i += 1;
        }
    }
    Ok(out)
}

/// Marker column standing for `*` in `UPDATE SET *` / `INSERT *` of a MERGE.
pub const MERGE_STAR: &str = "__tidemark_star__";

/// `CREATE TABLE ... USING DELTA`: Databricks' table format clause, which sqlparser's
/// Databricks dialect does not parse. Every tidemark table is a Delta table, so `USING DELTA`
/// is dropped and any other format is refused by name. Only the table's own clauses are
/// looked at (before a top-level `AS`, `SELECT` or `WITH`: a join's `USING` is left alone).
fn create_table_using(mut tokens: Vec<TokenWithSpan>) -> Result<Vec<TokenWithSpan>> {
    let found = own_clauses(&tokens, &["TABLE"])
        .into_iter()
        .find(|&(i, _)| is_word(&tokens[i].token, "USING"));
    let Some((i, Some(f))) = found else {
        return Ok(tokens);
    };
    let format = match &tokens[f].token {
        Token::Word(w) => w.value.clone(),
        other => other.to_string(),
    };
    if !format.eq_ignore_ascii_case("delta") {
        let at = tokens[i].span.start;
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "CREATE TABLE: USING {format} is not supported: every tidemark table is a Delta table (write USING DELTA or leave USING out) (line {}, column {})",
                at.line, at.column
            ),
        ));
    }
    blank(&mut tokens, &[i, f]);
    Ok(tokens)
}

/// `CREATE TABLE`'s (or `CREATE VIEW`'s) own `COMMENT 'text'` clause, taken out of the tokens:
/// Databricks takes its clauses in any order, and sqlparser cannot parse a table COMMENT
/// together with TBLPROPERTIES, nor a view's before AS. Column comments (inside the column
/// list) and anything after a top-level `AS`/`SELECT`/`WITH` are left alone.
fn take_table_comment(tokens: &mut [TokenWithSpan]) -> Option<String> {
    let (i, text) = own_clauses(tokens, &["TABLE", "VIEW"])
        .into_iter()
        .find(|&(i, _)| is_word(&tokens[i].token, "COMMENT"))?;
    let text = text?;
    let Token::SingleQuotedString(comment) = &tokens[text].token else {
        return None;
    };
    let comment = comment.clone();
    blank(tokens, &[i, text]);
    Some(comment)
}

/// The tokens of a `CREATE TABLE|VIEW`'s own clauses (`objects`: which of the two), each with
/// the next significant token: those outside parentheses, before a top-level `AS`, `SELECT`
/// or `WITH`. Empty for another statement.
fn own_clauses(tokens: &[TokenWithSpan], objects: &[&str]) -> Vec<(usize, Option<usize>)> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let creates = significant
        .iter()
        .take(6)
        .any(|&i| objects.iter().any(|o| is_word(&tokens[i].token, o)));
    if !creates {
        return vec![];
    }
    let mut out = vec![];
    let mut depth = 0i32;
    for (k, &i) in significant.iter().enumerate() {
        match &tokens[i].token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            t if depth == 0 && (is_word(t, "AS") || is_word(t, "SELECT") || is_word(t, "WITH")) => {
                break;
            }
            _ if depth == 0 => out.push((i, significant.get(k + 1).copied())),
            _ => {}
        }
    }
    out
}

/// Tokens turned into spaces.
fn blank(tokens: &mut [TokenWithSpan], at: &[usize]) {
    for &i in at {
        tokens[i].token =
            Token::Whitespace(datafusion::sql::sqlparser::tokenizer::Whitespace::Space);
    }
}

/// Rewrite Databricks' `UPDATE SET *` and `INSERT *` (which sqlparser lacks) into marker
/// assignments that the MERGE executor expands to every target column.
fn expand_merge_stars(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let star = |t: &TokenWithSpan| {
        TokenWithSpan::new(
            Token::Word(Word {
                value: MERGE_STAR.into(),
                quote_style: None,
                keyword: Keyword::NoKeyword,
            }),
            t.span,
        )
    };
    let tok = |t: Token, at: &TokenWithSpan| TokenWithSpan::new(t, at.span);
    let mut replace: std::collections::HashMap<usize, Vec<TokenWithSpan>> = Default::default();
    for (k, &i) in significant.iter().enumerate() {
        if tokens[i].token != Token::Mul || k < 1 {
            continue;
        }
        let prev = &tokens[significant[k - 1]].token;
        let prev2 = k.checked_sub(2).map(|j| &tokens[significant[j]].token);
        let at = &tokens[i];
        if is_word(prev, "SET") && prev2.is_some_and(|t| is_word(t, "UPDATE")) {
            replace.insert(i, vec![star(at), tok(Token::Eq, at), star(at)]);
        } else if is_word(prev, "INSERT") {
            replace.insert(
                i,
                vec![
                    tok(Token::LParen, at),
                    star(at),
                    tok(Token::RParen, at),
                    tok(
                        Token::Word(Word {
                            value: "VALUES".into(),
                            quote_style: None,
                            keyword: Keyword::VALUES,
                        }),
                        at,
                    ),
                    tok(Token::LParen, at),
                    star(at),
                    tok(Token::RParen, at),
                ],
            );
        }
    }
    let mut out = Vec::with_capacity(tokens.len());
    for (i, t) in tokens.into_iter().enumerate() {
        match replace.remove(&i) {
            Some(v) => out.extend(v),
            None => out.push(t),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(sql: &str) -> Statement {
        parse(sql, &SyntaxOnly).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    #[test]
    fn string_literals_are_unescaped_as_databricks_does() {
        assert_eq!(unescape(r"(\\d+)-(\\d+)"), r"(\d+)-(\d+)");
        assert_eq!(unescape(r"(\d+)"), "(d+)");
        assert_eq!(unescape(r"a\tb\nc"), "a\tb\nc");
        assert_eq!(unescape(r"caf\u00e9 \101"), "café A");
        assert_eq!(unescape(r"50\% off\_x"), r"50\% off\_x");
        assert_eq!(unescape(r#"say \"hi\""#), r#"say "hi""#);
        assert_eq!(unescape(r"end\"), r"end\");
        let strings = |sql: &str| -> Vec<String> {
            tokenize(sql)
                .unwrap()
                .into_iter()
                .filter_map(|t| match t.token {
                    Token::SingleQuotedString(s) => Some(s),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(
            strings(r"SELECT '\\d', r'\\d', R'a\b', r 'x\n'"),
            vec![r"\d", r"\\d", r"a\b", "x\n"]
        );
        // Databricks reads `\'` as a quote inside the string: a string ending so is refused.
        for sql in [r"SELECT 'a\'", r"SELECT 'a\', 'b'", r#"SELECT "c:\""#] {
            let e = tokenize(sql).unwrap_err().to_string();
            assert!(e.contains("ends with a single backslash"), "{sql}: {e}");
        }
        assert_eq!(strings(r"SELECT 'a\\'"), vec![r"a\"]);
    }

    #[test]
    fn create_table_using_delta_is_a_delta_table_and_other_formats_are_refused() {
        for sql in [
            "CREATE TABLE t (a INT) USING DELTA",
            "CREATE OR REPLACE TABLE t (a INT) using delta PARTITIONED BY (a) COMMENT 'c'",
            "CREATE TABLE t USING DELTA AS SELECT * FROM a JOIN b USING (id)",
            "CREATE TABLE t AS SELECT * FROM a JOIN b USING (id)",
        ] {
            assert!(matches!(p(sql), Statement::Sql(_)), "{sql}");
        }
        for sql in [
            "CREATE TABLE t (a INT) USING PARQUET",
            "CREATE TABLE t USING csv AS SELECT 1",
        ] {
            let e = parse(sql, &SyntaxOnly).unwrap_err().to_string();
            assert!(
                e.contains("is not supported") && e.contains("USING"),
                "{sql}: {e}"
            );
        }
    }

    #[test]
    fn round_trips_extension_statements() {
        for sql in [
            "COPY INCREMENTAL FROM a.b.c INTO d.e WATERMARK created_at SINCE '2024-01-01' CONTROL TABLE cfg.w MERGE ON (id, k) LOOKBACK INTERVAL '1' HOUR DRY RUN",
            "COPY INCREMENTAL USING CONTROL TABLE cfg.w WHERE source_table <> 'x' CONCURRENCY 4 DRY RUN",
            "COPY INCREMENTAL USING CONTROL TABLE cfg.w SHARD 2 OF 4 CONCURRENCY 8",
            "DECLARE OR REPLACE VARIABLE x INT DEFAULT 5",
            "SET VAR a = 1, b = DEFAULT",
            "SET VAR (a, b) = (SELECT 1, 2)",
            "DROP TEMPORARY VARIABLE IF EXISTS x",
            "USE CATALOG main",
            "SHOW TABLES IN main.default",
            "DESCRIBE HISTORY t",
            "VACUUM t RETAIN 168 HOURS DRY RUN",
            "OPTIMIZE t",
            "OPTIMIZE s.t WHERE d >= '2024-01-01' AND d IN (1, 2) ZORDER BY (`a`, `b`.`c`)",
            "OPTIMIZE t ZORDER BY (`x y`)",
            "FOR EACH r IN (SELECT * FROM t) CONCURRENCY 4 DO SELECT r.a; SELECT 2; END FOR",
            "ALTER TABLE s.t RENAME TO u",
            "ALTER TABLE t ALTER COLUMN c SET DEFAULT 'it''s'",
            "ALTER TABLE t ALTER COLUMN c DROP DEFAULT",
            "ALTER TABLE t ALTER COLUMN c SET NOT NULL",
            "ALTER TABLE t ALTER COLUMN c DROP NOT NULL",
            "ALTER TABLE t ALTER COLUMN c COMMENT 'a ''b'''",
            "COMMENT ON COLUMN t.c IS NULL",
            "COMMENT ON TABLE t IS 'x'",
            "COMMENT ON TABLE t IS NULL",
            "TRUNCATE TABLE t PARTITION (p = 1, q = 'a')",
            "RESTORE TABLE t TO VERSION AS OF 3",
            "RESTORE TABLE t TO TIMESTAMP AS OF '2024-01-01'",
            "SHOW CREATE TABLE c.s.t",
            "SHOW TBLPROPERTIES t ('delta.appendOnly')",
            "SHOW COLUMNS IN s.t",
            "SHOW PARTITIONS s.t",
            "SHOW PARTITIONS t PARTITION (d = '2024-01-01', k = 1)",
            "SHOW VIEWS IN s",
            "DESCRIBE DETAIL t",
            "COPY INTO s.t FROM '/data/it''s' FILEFORMAT = CSV FILES = ('a.csv', 'b.csv') FORMAT_OPTIONS ('header' = 'true') COPY_OPTIONS ('force' = 'true')",
            "COPY INTO t (a, b) FROM '/d' FILEFORMAT = CSV PATTERN = '*.csv'",
            "COPY INTO t BY POSITION FROM '/d' FILEFORMAT = csv",
            "CREATE CONNECTION IF NOT EXISTS pg TYPE postgresql OPTIONS (host 'db', port '5432', user 'me', password secret('prod', 'pg')) COMMENT 'shop'",
            "CREATE FOREIGN CATALOG shop USING CONNECTION pg OPTIONS (database 'shop')",
            "DROP CONNECTION IF EXISTS pg",
            "SHOW CONNECTIONS",
            "DESCRIBE CONNECTION pg",
            "COPY INTO t FROM (SELECT _c0::INT AS id, upper(_c1) AS name FROM '/d') FILEFORMAT = CSV",
        ] {
            let s = p(sql);
            assert_eq!(p(&s.to_string()), s, "{sql}");
        }
    }

    #[test]
    fn describe_forms_and_schemas_named_like_keywords() {
        use super::ast::{OnTable, TableAction};
        let detail = |sql: &str| matches!(p(sql), Statement::OnTable(t) if matches!(*t, OnTable { action: TableAction::DescribeDetail, .. }));
        assert!(detail("DESCRIBE DETAIL t"));
        assert!(!detail("DESCRIBE detail"));
        assert!(!detail("DESCRIBE detail.t"));
        assert!(matches!(
            p("DESCRIBE extended.t"),
            Statement::Describe { .. }
        ));
        assert!(matches!(
            p("DESCRIBE HISTORY extended.t"),
            Statement::Describe { history: true, .. }
        ));
        assert!(matches!(
            p("DESCRIBE EXTENDED t"),
            Statement::Describe { extended: true, .. }
        ));
        assert!(
            matches!(p("SHOW COLUMNS FROM t IN s"), Statement::OnTable(t) if t.table.to_string() == "s.t")
        );
        for sql in [
            "DESCRIBE QUERY SELECT 1 AS a",
            "DESC SELECT 1 AS a",
            "DESCRIBE WITH x AS (SELECT 1 AS a) SELECT * FROM x",
            "DESCRIBE QUERY VALUES (1)",
            "DESCRIBE (SELECT 1)",
        ] {
            let s = p(sql);
            assert!(matches!(s, Statement::DescribeQuery { .. }), "{sql}");
            assert_eq!(p(&s.to_string()), s, "{sql}");
        }
        assert!(matches!(p("DESCRIBE query"), Statement::Describe { .. }));
        assert!(matches!(p("DESCRIBE query.t"), Statement::Describe { .. }));
    }

    #[test]
    fn identifier_is_substituted_as_quoted_parts() {
        struct Fixed;
        impl IdentifierResolver for Fixed {
            fn resolve_identifier(&self, _: &Expr) -> Result<String> {
                Ok("main.`x; DROP TABLE y`.t".into())
            }
        }
        let s = parse("SELECT * FROM IDENTIFIER(a || '.b')", &Fixed).unwrap();
        assert_eq!(s.to_string(), "SELECT * FROM `main`.`x; DROP TABLE y`.`t`");
    }

    #[test]
    fn parse_errors_carry_position() {
        let e = parse("SELECT 1\nFROM t WHERE", &SyntaxOnly).unwrap_err();
        assert_eq!(e.position().map(|p| p.0), Some(2));
        let e = parse("COPY INCREMENTAL a INTO b WATERMARK", &SyntaxOnly).unwrap_err();
        assert!(e.to_string().contains("syntax error"), "{e}");
    }

    #[test]
    fn for_body_errors_point_into_the_body() {
        let e = parse(
            "FOR EACH r IN (SELECT 1) DO\n  SELECT FROM WHERE;\nEND FOR",
            &SyntaxOnly,
        )
        .unwrap_err();
        assert_eq!(e.position().map(|p| p.0), Some(2), "{e}");
    }
}
