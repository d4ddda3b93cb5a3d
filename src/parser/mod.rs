//! The one parser of tidemark: it resolves `IDENTIFIER(...)` at the token level, handles
//! tidemark's own statements, and hands every other statement to sqlparser untouched.

pub mod ast;
pub mod splitter;
pub mod syntax;

use datafusion::sql::sqlparser::ast::{Expr, Ident, ObjectName, ObjectNamePart};
use datafusion::sql::sqlparser::dialect::DatabricksDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, Word};

pub use ast::*;

use crate::catalog::split_qualified;
use crate::error::{Error, Result};

/// The SQL dialect tidemark speaks (Databricks: back-quoted names, `VERSION AS OF`, ...).
pub const DIALECT: DatabricksDialect = DatabricksDialect {};

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
    let mut tokens = substitute_identifiers(tokens, resolver)?;
    if first_is(0, "MERGE") {
        tokens = expand_merge_stars(tokens);
    }
    if first_is(0, "CREATE") {
        tokens = create_table_using(tokens)?;
    }
    let mut p = Parser::new(&DIALECT).with_tokens_with_locations(tokens);
    let stmt = parse_statement(&mut p)?;
    if p.peek_token().token != Token::EOF {
        let t = p.peek_token();
        return Err(Error::parse(
            format!(
                "syntax error: expected end of statement, found: {}",
                t.token
            ),
            t.span.start.line as usize,
            t.span.start.column as usize,
        ));
    }
    Ok(stmt)
}

/// Tokenize with positions.
fn tokenize(sql: &str) -> Result<Vec<TokenWithSpan>> {
    Tokenizer::new(&DIALECT, sql)
        .tokenize_with_location()
        .map_err(|e| {
            Error::parse(
                format!("syntax error: {}", e.message),
                e.location.line as usize,
                e.location.column as usize,
            )
        })
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
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let is_table = significant
        .iter()
        .take(6)
        .any(|&i| is_word(&tokens[i].token, "TABLE"));
    if !is_table {
        return Ok(tokens);
    }
    let mut depth = 0i32;
    for (k, &i) in significant.iter().enumerate() {
        match &tokens[i].token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            t if depth == 0 && (is_word(t, "AS") || is_word(t, "SELECT") || is_word(t, "WITH")) => {
                break;
            }
            t if depth == 0 && is_word(t, "USING") => {
                let Some(&f) = significant.get(k + 1) else {
                    break;
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
                tokens[i].token =
                    Token::Whitespace(datafusion::sql::sqlparser::tokenizer::Whitespace::Space);
                tokens[f].token =
                    Token::Whitespace(datafusion::sql::sqlparser::tokenizer::Whitespace::Space);
                break;
            }
            _ => {}
        }
    }
    Ok(tokens)
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

/// Error at the parser's next token.
fn error_here(p: &Parser, message: impl Into<String>) -> Error {
    let t = p.peek_token();
    Error::parse(
        format!("syntax error: {}, found: {}", message.into(), t.token),
        t.span.start.line as usize,
        t.span.start.column as usize,
    )
}

/// Consume an unquoted word (any word, keyword or not) if it is next.
fn parse_word(p: &mut Parser, w: &str) -> bool {
    if is_word(&p.peek_token().token, w) {
        p.next_token();
        true
    } else {
        false
    }
}

fn parse_words(p: &mut Parser, words: &[&str]) -> bool {
    let all = words
        .iter()
        .enumerate()
        .all(|(i, w)| is_word(&p.peek_nth_token(i).token, w));
    if all {
        for _ in words {
            p.next_token();
        }
    }
    all
}

fn expect_word(p: &mut Parser, w: &str) -> Result<()> {
    if parse_word(p, w) {
        Ok(())
    } else {
        Err(error_here(p, format!("expected {w}")))
    }
}

fn pe(e: ParserError) -> Error {
    crate::error::parser_error(&e)
}

fn object_name(p: &mut Parser) -> Result<ObjectName> {
    p.parse_object_name(false).map_err(pe)
}

/// A variable name: `x`, `session.x` or `system.session.x`.
fn variable_name(p: &mut Parser) -> Result<String> {
    let name = object_name(p)?;
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(Ident { value, .. }) => value.to_lowercase(),
            other => other.to_string(),
        })
        .collect();
    match parts.as_slice() {
        [n] => Ok(n.clone()),
        [s, n] if s == "session" => Ok(n.clone()),
        [a, s, n] if a == "system" && s == "session" => Ok(n.clone()),
        _ => Err(Error::class(
            "INVALID_VARIABLE_NAME",
            format!(
                "'{name}' is not a session variable name (use name, session.name or system.session.name)"
            ),
        )),
    }
}

/// Dispatch on the leading keywords.
fn parse_statement(p: &mut Parser) -> Result<Statement> {
    let w0 = p.peek_token().token;
    if is_word(&w0, "USE") {
        p.next_token();
        let kind = if parse_word(p, "CATALOG") {
            UseKind::Catalog
        } else if parse_word(p, "SCHEMA") || parse_word(p, "DATABASE") {
            UseKind::Schema
        } else {
            UseKind::Plain
        };
        return Ok(Statement::Use {
            kind,
            name: object_name(p)?,
        });
    }
    if is_word(&w0, "SHOW") {
        let what = if is_word(&p.peek_nth_token(1).token, "CATALOGS") {
            ShowWhat::Catalogs
        } else if is_word(&p.peek_nth_token(1).token, "SCHEMAS")
            || is_word(&p.peek_nth_token(1).token, "DATABASES")
        {
            ShowWhat::Schemas
        } else if is_word(&p.peek_nth_token(1).token, "TABLES") {
            ShowWhat::Tables
        } else {
            return Ok(Statement::Sql(Box::new(p.parse_statement().map_err(pe)?)));
        };
        p.next_token();
        p.next_token();
        let within = if parse_word(p, "IN") || parse_word(p, "FROM") {
            Some(object_name(p)?)
        } else {
            None
        };
        return Ok(Statement::Show { what, within });
    }
    if is_word(&w0, "DESCRIBE") || is_word(&w0, "DESC") {
        p.next_token();
        let history = parse_word(p, "HISTORY");
        if !history {
            parse_word(p, "TABLE");
        }
        return Ok(Statement::Describe {
            table: object_name(p)?,
            history,
        });
    }
    if is_word(&w0, "OPTIMIZE") {
        p.next_token();
        parse_word(p, "TABLE");
        return Ok(Statement::Optimize {
            table: object_name(p)?,
        });
    }
    if is_word(&w0, "VACUUM") {
        p.next_token();
        parse_word(p, "TABLE");
        let table = object_name(p)?;
        let mut retain_hours = None;
        if parse_word(p, "RETAIN") {
            let t = p.next_token();
            let n: f64 = match &t.token {
                Token::Number(n, _) => n
                    .parse()
                    .map_err(|_| error_here(p, "expected a number of hours"))?,
                _ => return Err(error_here(p, "expected a number of hours after RETAIN")),
            };
            expect_word(p, "HOURS")?;
            retain_hours = Some(n);
        }
        let dry_run = parse_words(p, &["DRY", "RUN"]);
        return Ok(Statement::Vacuum {
            table,
            retain_hours,
            dry_run,
        });
    }
    if parse_words(p, &["CREATE", "CATALOG"]) {
        let if_not_exists = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
        return Ok(Statement::CreateCatalog {
            name: object_name(p)?,
            if_not_exists,
        });
    }
    if parse_words(p, &["DROP", "CATALOG"]) {
        let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = object_name(p)?;
        let cascade = parse_word(p, "CASCADE");
        if !cascade {
            parse_word(p, "RESTRICT");
        }
        return Ok(Statement::DropCatalog {
            name,
            if_exists,
            cascade,
        });
    }
    if is_word(&w0, "ALTER") && is_word(&p.peek_nth_token(1).token, "TABLE") {
        let start = p.index();
        p.next_token();
        p.next_token();
        let table = object_name(p)?;
        if parse_words(p, &["ADD", "CONSTRAINT"]) {
            let name = p.parse_identifier().map_err(pe)?;
            if !parse_word(p, "CHECK") {
                return Err(pe(ParserError::ParserError(format!(
                    "expected CHECK (condition) after ADD CONSTRAINT {name}, found {}",
                    p.peek_token()
                ))));
            }
            p.expect_token(&Token::LParen).map_err(pe)?;
            let check = p.parse_expr().map_err(pe)?;
            p.expect_token(&Token::RParen).map_err(pe)?;
            return Ok(Statement::AddConstraint { table, name, check });
        }
        if parse_words(p, &["DROP", "CONSTRAINT"]) {
            let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
            let name = p.parse_identifier().map_err(pe)?;
            return Ok(Statement::DropConstraint {
                table,
                name,
                if_exists,
            });
        }
        if parse_word(p, "ADD") {
            if !parse_word(p, "COLUMNS") {
                parse_word(p, "COLUMN");
            }
            let paren = p.consume_token(&Token::LParen);
            let columns = p
                .parse_comma_separated(|p| p.parse_column_def())
                .map_err(pe)?;
            if paren {
                p.expect_token(&Token::RParen).map_err(pe)?;
            }
            return Ok(Statement::AddColumns { table, columns });
        }
        if parse_words(p, &["SET", "TBLPROPERTIES"]) {
            return Ok(Statement::SetProperties {
                table,
                properties: parse_properties(p)?,
            });
        }
        // Anything else: let sqlparser parse it (the engine reports what is unsupported).
        while p.index() > start {
            p.prev_token();
        }
    }
    if is_word(&w0, "DECLARE") {
        p.next_token();
        let or_replace = p.parse_keywords(&[Keyword::OR, Keyword::REPLACE]);
        if !parse_word(p, "VARIABLE") {
            parse_word(p, "VAR");
        }
        let name = variable_name(p)?;
        let next = p.peek_token().token;
        let data_type = if next == Token::EOF || next == Token::Eq || is_word(&next, "DEFAULT") {
            None
        } else {
            Some(p.parse_data_type().map_err(pe)?)
        };
        let default = if parse_word(p, "DEFAULT") || p.consume_token(&Token::Eq) {
            Some(p.parse_expr().map_err(pe)?)
        } else {
            None
        };
        return Ok(Statement::Declare {
            or_replace,
            name,
            data_type,
            default,
        });
    }
    if is_word(&w0, "SET")
        && (is_word(&p.peek_nth_token(1).token, "VAR")
            || is_word(&p.peek_nth_token(1).token, "VARIABLE"))
    {
        p.next_token();
        p.next_token();
        if p.consume_token(&Token::LParen) {
            let names = comma_separated(p, variable_name)?;
            p.expect_token(&Token::RParen).map_err(pe)?;
            p.expect_token(&Token::Eq).map_err(pe)?;
            p.expect_token(&Token::LParen).map_err(pe)?;
            let query = p.parse_query().map_err(pe)?;
            p.expect_token(&Token::RParen).map_err(pe)?;
            return Ok(Statement::SetVariablesFromQuery { names, query });
        }
        let assignments = comma_separated(p, |p| {
            let name = variable_name(p)?;
            p.expect_token(&Token::Eq).map_err(pe)?;
            if parse_word(p, "DEFAULT") {
                Ok((name, None))
            } else {
                Ok((name, Some(p.parse_expr().map_err(pe)?)))
            }
        })?;
        return Ok(Statement::SetVariables { assignments });
    }
    if parse_words(p, &["DROP", "TEMPORARY", "VARIABLE"])
        || parse_words(p, &["DROP", "TEMPORARY", "VAR"])
    {
        let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        return Ok(Statement::DropVariable {
            name: variable_name(p)?,
            if_exists,
        });
    }
    if parse_words(p, &["COPY", "INCREMENTAL"]) {
        return parse_copy(p);
    }
    if is_word(&p.peek_token().token, "COPY")
        && let Token::Word(w) = &p.peek_nth_token(1).token
        && w.quote_style.is_none()
        && is_near_miss(&w.value, "INCREMENTAL")
    {
        p.next_token();
        return Err(error_here(p, "expected INCREMENTAL after COPY"));
    }
    Ok(Statement::Sql(Box::new(p.parse_statement().map_err(pe)?)))
}

fn comma_separated<T>(
    p: &mut Parser,
    mut f: impl FnMut(&mut Parser) -> Result<T>,
) -> Result<Vec<T>> {
    let mut out = vec![f(p)?];
    while p.consume_token(&Token::Comma) {
        out.push(f(p)?);
    }
    Ok(out)
}

/// `('k' = 'v', ...)`.
fn parse_properties(p: &mut Parser) -> Result<Vec<(String, String)>> {
    p.expect_token(&Token::LParen).map_err(pe)?;
    let props = comma_separated(p, |p| {
        let key = property_text(p)?;
        let _ = p.consume_token(&Token::Eq);
        let value = property_text(p)?;
        Ok((key, value))
    })?;
    p.expect_token(&Token::RParen).map_err(pe)?;
    Ok(props)
}

fn property_text(p: &mut Parser) -> Result<String> {
    let t = p.next_token();
    match t.token {
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Ok(s),
        Token::Number(n, _) => Ok(n),
        Token::Word(w) => {
            // dotted keys like delta.appendOnly
            let mut s = w.value;
            while p.consume_token(&Token::Period) {
                match p.next_token().token {
                    Token::Word(w) => {
                        s.push('.');
                        s.push_str(&w.value);
                    }
                    _ => return Err(error_here(p, "expected a property name")),
                }
            }
            Ok(s)
        }
        _ => {
            p.prev_token();
            Err(error_here(p, "expected a property key or value"))
        }
    }
}

/// `COPY INCREMENTAL ...` after the two leading words.
fn parse_copy(p: &mut Parser) -> Result<Statement> {
    if parse_words(p, &["USING", "CONTROL", "TABLE"]) {
        let control = object_name(p)?;
        let mut c = CopyUsingControl {
            control,
            filter: None,
            concurrency: None,
            dry_run: false,
        };
        loop {
            if c.filter.is_none() && p.parse_keyword(Keyword::WHERE) {
                c.filter = Some(p.parse_expr().map_err(pe)?);
            } else if c.concurrency.is_none() && parse_word(p, "CONCURRENCY") {
                c.concurrency = Some(positive(p)?);
            } else if !c.dry_run && parse_words(p, &["DRY", "RUN"]) {
                c.dry_run = true;
            } else {
                break;
            }
        }
        return Ok(Statement::CopyUsingControl(Box::new(c)));
    }
    parse_word(p, "FROM");
    let source = object_name(p)?;
    expect_word(p, "INTO")?;
    let target = object_name(p)?;
    let mut c = CopyIncremental {
        source,
        target,
        watermark: None,
        since: None,
        control: None,
        merge_on: vec![],
        lookback: None,
        dry_run: false,
    };
    loop {
        if c.watermark.is_none() && parse_word(p, "WATERMARK") {
            c.watermark = Some(object_name(p)?);
        } else if c.since.is_none() && parse_word(p, "SINCE") {
            c.since = Some(p.parse_expr().map_err(pe)?);
        } else if c.control.is_none() && parse_words(p, &["CONTROL", "TABLE"]) {
            c.control = Some(object_name(p)?);
        } else if c.merge_on.is_empty() && parse_words(p, &["MERGE", "ON"]) {
            p.expect_token(&Token::LParen).map_err(pe)?;
            c.merge_on = comma_separated(p, object_name)?;
            p.expect_token(&Token::RParen).map_err(pe)?;
        } else if c.lookback.is_none() && parse_word(p, "LOOKBACK") {
            c.lookback = Some(p.parse_expr().map_err(pe)?);
        } else if !c.dry_run && parse_words(p, &["DRY", "RUN"]) {
            c.dry_run = true;
        } else {
            break;
        }
    }
    Ok(Statement::CopyIncremental(Box::new(c)))
}

fn positive(p: &mut Parser) -> Result<u64> {
    let t = p.peek_token();
    match p.parse_literal_uint() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::parse(
            format!(
                "syntax error: expected a positive integer, found: {}",
                t.token
            ),
            t.span.start.line as usize,
            t.span.start.column as usize,
        )),
    }
}

/// `FOR EACH v IN (q) [CONCURRENCY n] DO ... END FOR` and `FOR [v AS] q DO ... END FOR`.
fn parse_for(
    sql: &str,
    tokens: Vec<TokenWithSpan>,
    resolver: &dyn IdentifierResolver,
) -> Result<Statement> {
    // Find the DO that opens the body: the first unquoted DO outside parentheses.
    let mut depth = 0i64;
    let mut do_idx = None;
    for (i, t) in tokens.iter().enumerate() {
        match &t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            tok if depth == 0 && is_word(tok, "DO") => {
                do_idx = Some(i);
                break;
            }
            _ => {}
        }
    }
    let Some(do_idx) = do_idx else {
        return Err(Error::parse("syntax error: FOR loop without DO", 1, 1));
    };
    // The body ends at the final END FOR.
    let tail: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_) | Token::EOF))
        .collect();
    let n = tail.len();
    if n < 2
        || !is_word(&tokens[tail[n - 2]].token, "END")
        || !is_word(&tokens[tail[n - 1]].token, "FOR")
    {
        let last = tail
            .last()
            .map(|&i| tokens[i].span.end)
            .unwrap_or(datafusion::sql::sqlparser::tokenizer::Location { line: 1, column: 1 });
        return Err(Error::parse(
            "syntax error: FOR loop body must end with END FOR",
            last.line as usize,
            last.column as usize,
        ));
    }
    let end_idx = tail[n - 2];

    let mut head: Vec<TokenWithSpan> = tokens[..do_idx].to_vec();
    head.push(TokenWithSpan::wrap(Token::EOF));
    let head = substitute_identifiers(head, resolver)?;
    let mut p = Parser::new(&DIALECT).with_tokens_with_locations(head);
    expect_word(&mut p, "FOR")?;
    let (var, query, concurrency, parallel) = if parse_word(&mut p, "EACH") {
        let var = p.parse_identifier().map_err(pe)?.value.to_lowercase();
        p.expect_keyword(Keyword::IN).map_err(pe)?;
        p.expect_token(&Token::LParen).map_err(pe)?;
        let query = p.parse_query().map_err(pe)?;
        p.expect_token(&Token::RParen).map_err(pe)?;
        let concurrency = if parse_word(&mut p, "CONCURRENCY") {
            Some(positive(&mut p)?)
        } else {
            None
        };
        (Some(var), query, concurrency, true)
    } else {
        let is_as = matches!(p.peek_nth_token(1).token, Token::Word(ref w) if w.value.eq_ignore_ascii_case("AS"));
        let var = if is_as {
            let v = p.parse_identifier().map_err(pe)?.value.to_lowercase();
            p.next_token();
            Some(v)
        } else {
            None
        };
        (var, p.parse_query().map_err(pe)?, None, false)
    };
    if p.peek_token().token != Token::EOF {
        return Err(error_here(&p, "expected DO"));
    }

    // Body text between DO and END FOR, split into statements with their positions.
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(sql.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let offset = |loc: datafusion::sql::sqlparser::tokenizer::Location| -> usize {
        let ls = line_starts
            .get(loc.line.saturating_sub(1) as usize)
            .copied()
            .unwrap_or(0);
        let line = &sql[ls..];
        ls + line
            .char_indices()
            .nth(loc.column.saturating_sub(1) as usize)
            .map(|(i, _)| i)
            .unwrap_or(line.len())
    };
    let body_start = offset(tokens[do_idx].span.end);
    let body_end = offset(tokens[end_idx].span.start);
    let body_text = &sql[body_start..body_end];
    let base = tokens[do_idx].span.end;
    let split = splitter::split(body_text);
    let mut body = Vec::new();
    let mut pieces: Vec<splitter::Located> = split.pieces;
    if !split.rest.trim().is_empty() {
        pieces.push(splitter::Located {
            piece: splitter::Piece::Sql(split.rest.trim().to_string()),
            pos: split.rest_pos,
        });
    }
    for located in pieces {
        let (line, col) = if located.pos.line == 1 {
            (
                base.line as usize,
                base.column as usize + located.pos.col - 1,
            )
        } else {
            (base.line as usize + located.pos.line - 1, located.pos.col)
        };
        let splitter::Piece::Sql(text) = located.piece else {
            return Err(Error::parse(
                "meta-commands are not allowed inside a FOR body",
                line,
                col,
            ));
        };
        // Check the syntax now; names are resolved per iteration.
        if let Err(e) = parse(&text, &SyntaxOnly) {
            let (l, c) = e.position().unwrap_or((1, 1));
            let (l, c) = if l == 1 {
                (line, col + c - 1)
            } else {
                (line + l - 1, c)
            };
            return Err(Error::parse(e.to_string(), l, c));
        }
        body.push(BodyStatement {
            sql: text,
            line,
            col,
        });
    }
    if body.is_empty() {
        return Err(Error::parse(
            "syntax error: FOR loop body is empty",
            base.line as usize,
            base.column as usize,
        ));
    }
    Ok(Statement::ForEach(Box::new(ForEach {
        var,
        query,
        concurrency,
        parallel,
        body,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(sql: &str) -> Statement {
        parse(sql, &SyntaxOnly).unwrap_or_else(|e| panic!("{sql}: {e}"))
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
            "DECLARE OR REPLACE VARIABLE x INT DEFAULT 5",
            "SET VAR a = 1, b = DEFAULT",
            "SET VAR (a, b) = (SELECT 1, 2)",
            "DROP TEMPORARY VARIABLE IF EXISTS x",
            "USE CATALOG main",
            "SHOW TABLES IN main.default",
            "DESCRIBE HISTORY t",
            "VACUUM t RETAIN 168 HOURS DRY RUN",
            "FOR EACH r IN (SELECT * FROM t) CONCURRENCY 4 DO SELECT r.a; SELECT 2; END FOR",
        ] {
            let s = p(sql);
            assert_eq!(p(&s.to_string()), s, "{sql}");
        }
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
