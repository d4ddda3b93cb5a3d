//! The grammar of tidemark's own statements (and of its own readings of standard ones), on
//! sqlparser's parser: USE, SHOW, DESCRIBE, OPTIMIZE, VACUUM, CREATE/DROP CATALOG, session
//! variables, COPY INCREMENTAL and FOR loops; statements on one table in `grammar/table.rs`.

mod connection;
mod copy_into;
mod function;
mod insert;
mod table;

use super::*;
use crate::error::{Error, Result};
use datafusion::sql::sqlparser::ast::{Ident, ObjectName, ObjectNamePart};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

/// Error at the parser's next token.
pub(super) fn error_here(p: &Parser, message: impl Into<String>) -> Error {
    let t = p.peek_token();
    Error::parse(
        format!("syntax error: {}, found: {}", message.into(), t.token),
        t.span.start.line as usize,
        t.span.start.column as usize,
    )
}

/// Consume an unquoted word (any word, keyword or not) if it is next.
pub(super) fn parse_word(p: &mut Parser, w: &str) -> bool {
    if is_word(&p.peek_token().token, w) {
        p.next_token();
        true
    } else {
        false
    }
}

pub(super) fn parse_words(p: &mut Parser, words: &[&str]) -> bool {
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

pub(super) fn expect_word(p: &mut Parser, w: &str) -> Result<()> {
    if parse_word(p, w) {
        Ok(())
    } else {
        Err(error_here(p, format!("expected {w}")))
    }
}

pub(super) fn pe(e: ParserError) -> Error {
    crate::error::parser_error(&e)
}

pub(super) fn object_name(p: &mut Parser) -> Result<ObjectName> {
    p.parse_object_name(false).map_err(pe)
}

/// A variable name: `x`, `session.x` or `system.session.x`.
pub(super) fn variable_name(p: &mut Parser) -> Result<String> {
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

/// One statement: tidemark's own (or its own reading of a standard one), else sqlparser's.
pub(super) fn parse_statement(p: &mut Parser) -> Result<Statement> {
    for own in [
        connection::connection_statement,
        table::table_statement,
        insert::insert_statement,
        function::function_statement,
        execute_statement,
        session_statement,
        maintenance_statement,
        ddl_statement,
        variable_statement,
        copy_statement,
    ] {
        if let Some(stmt) = own(p)? {
            return Ok(stmt);
        }
    }
    Ok(Statement::Sql(Box::new(p.parse_statement().map_err(pe)?)))
}

/// SHOW's `[LIKE] 'pattern'`: LIKE needs its pattern; without LIKE a quoted pattern may follow.
pub(super) fn show_pattern(p: &mut Parser) -> Result<Option<String>> {
    let like = parse_word(p, "LIKE");
    let at = p.peek_token();
    match at.token {
        Token::SingleQuotedString(s) => {
            p.next_token();
            Ok(Some(s))
        }
        _ if like => Err(Error::parse(
            "LIKE needs a pattern in single quotes (`*` for any text, `|` between alternatives): SHOW TABLES LIKE 'sales_*'",
            at.span.start.line as usize,
            at.span.start.column as usize,
        )),
        _ => Ok(None),
    }
}

/// `USE`, `SHOW CATALOGS|SCHEMAS|TABLES|VIEWS`, `DESCRIBE [HISTORY]`.
pub(super) fn session_statement(p: &mut Parser) -> Result<Option<Statement>> {
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
        return Ok(Some(Statement::Use {
            kind,
            name: object_name(p)?,
        }));
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
        } else if is_word(&p.peek_nth_token(1).token, "VIEWS") {
            ShowWhat::Views
        } else {
            let statement = p.parse_statement().map_err(pe)?;
            // DataFusion's SHOW names a setting (`SHOW datafusion.execution.time_zone`, `SHOW
            // ALL`); Databricks' other SHOW statements would read as settings that do not exist.
            if let datafusion::sql::sqlparser::ast::Statement::ShowVariable { variable } =
                &statement
                && let Some(first) = variable.first()
                && !["datafusion", "all", "time", "timezone"]
                    .contains(&first.value.to_lowercase().as_str())
            {
                return Err(Error::class(
                    "UNSUPPORTED_FEATURE",
                    format!(
                        "SHOW {} ... is not supported: SHOW lists CATALOGS, SCHEMAS, TABLES, VIEWS, COLUMNS IN t, PARTITIONS t, FUNCTIONS, CONNECTIONS, CREATE TABLE t, TBLPROPERTIES t, or a setting (SHOW datafusion.execution.time_zone, SHOW ALL)",
                        first.value.to_uppercase()
                    ),
                ));
            }
            return Ok(Some(Statement::Sql(Box::new(statement))));
        };
        p.next_token();
        p.next_token();
        let within = if parse_word(p, "IN") || parse_word(p, "FROM") {
            Some(object_name(p)?)
        } else {
            None
        };
        let like = show_pattern(p)?;
        return Ok(Some(Statement::Show { what, within, like }));
    }
    if is_word(&w0, "DESCRIBE") || is_word(&w0, "DESC") {
        p.next_token();
        // `DESCRIBE [QUERY] query` (QUERY is optional in Databricks; `DESCRIBE query` is a
        // table of that name).
        let starts_query = |t: &Token| {
            is_word(t, "SELECT")
                || is_word(t, "WITH")
                || is_word(t, "VALUES")
                || *t == Token::LParen
        };
        if is_word(&p.peek_token().token, "QUERY") && starts_query(&p.peek_nth_token(1).token) {
            p.next_token();
        } else if is_word(&p.peek_token().token, "QUERY")
            && is_word(&p.peek_nth_token(1).token, "TABLE")
        {
            // `DESCRIBE QUERY TABLE t`: the query `TABLE t`, `SELECT * FROM t` (without
            // QUERY, DESCRIBE TABLE t describes the table).
            p.next_token();
            p.next_token();
            let table = p.parse_object_name(false).map_err(pe)?;
            return Ok(Some(Statement::DescribeQuery {
                query: Box::new(super::query_text(&format!("SELECT * FROM {table}"))?),
            }));
        }
        if starts_query(&p.peek_token().token) {
            return Ok(Some(Statement::DescribeQuery {
                query: p.parse_query().map_err(pe)?,
            }));
        }
        let history = parse_word(p, "HISTORY");
        if !history {
            parse_word(p, "TABLE");
        }
        let w = p.peek_token().token;
        let extended = !history
            && (is_word(&w, "EXTENDED") || is_word(&w, "FORMATTED"))
            && matches!(p.peek_nth_token(1).token, Token::Word(_));
        if extended {
            p.next_token();
        }
        return Ok(Some(Statement::Describe {
            table: object_name(p)?,
            history,
            extended,
        }));
    }
    Ok(None)
}

/// `OPTIMIZE` and `VACUUM`.
pub(super) fn maintenance_statement(p: &mut Parser) -> Result<Option<Statement>> {
    let w0 = p.peek_token().token;
    if is_word(&w0, "OPTIMIZE") {
        p.next_token();
        parse_word(p, "TABLE");
        let table = object_name(p)?;
        if is_word(&p.peek_token().token, "FULL") {
            return Err(Error::class(
                "UNSUPPORTED_FEATURE",
                format!(
                    "OPTIMIZE {table} FULL (reclustering all of a liquid-clustered table) is not supported: tidemark makes no clustered tables; OPTIMIZE {table} compacts its small files"
                ),
            ));
        }
        // Databricks' `WHERE` (partition columns only) and `ZORDER BY (c, ...)`, in that order.
        let predicate = if parse_word(p, "WHERE") {
            Some(p.parse_expr().map_err(pe)?)
        } else {
            None
        };
        let mut zorder = vec![];
        if parse_word(p, "ZORDER") {
            expect_word(p, "BY")?;
            let parenthesized = p.consume_token(&Token::LParen);
            zorder = p
                .parse_comma_separated(|p| {
                    // `c` or a nested field's path `c.f`.
                    let mut path = vec![p.parse_identifier()?.value];
                    while p.consume_token(&Token::Period) {
                        path.push(p.parse_identifier()?.value);
                    }
                    Ok(path)
                })
                .map_err(pe)?;
            if parenthesized {
                p.expect_token(&Token::RParen).map_err(pe)?;
            }
        }
        return Ok(Some(Statement::Optimize {
            table,
            predicate,
            zorder,
        }));
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
        return Ok(Some(Statement::Vacuum {
            table,
            retain_hours,
            dry_run,
        }));
    }
    Ok(None)
}

/// `CREATE|DROP CATALOG`, and `CREATE SCHEMA ... [MANAGED] LOCATION 'url'`.
pub(super) fn ddl_statement(p: &mut Parser) -> Result<Option<Statement>> {
    if parse_words(p, &["CREATE", "CATALOG"]) {
        let if_not_exists = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
        let name = object_name(p)?;
        let location = if parse_words(p, &["MANAGED", "LOCATION"]) {
            Some(p.parse_literal_string().map_err(pe)?)
        } else {
            None
        };
        return Ok(Some(Statement::CreateCatalog {
            name,
            if_not_exists,
            location,
        }));
    }
    // The schema forms with a location (sqlparser reads the others).
    let schema_word = |t: &Token| is_word(t, "SCHEMA") || is_word(t, "DATABASE");
    if is_word(&p.peek_token().token, "CREATE") && schema_word(&p.peek_nth_token(1).token) {
        let mut i = 2;
        let has_location = loop {
            match p.peek_nth_token(i).token {
                Token::EOF | Token::SemiColon => break false,
                ref t if is_word(t, "LOCATION") => break true,
                _ => i += 1,
            }
        };
        if has_location {
            p.next_token();
            p.next_token();
            let if_not_exists = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
            let name = object_name(p)?;
            parse_word(p, "MANAGED");
            expect_word(p, "LOCATION")?;
            let location = p.parse_literal_string().map_err(pe)?;
            return Ok(Some(Statement::CreateSchemaAt {
                name,
                if_not_exists,
                location,
            }));
        }
    }
    if parse_words(p, &["DROP", "CATALOG"]) {
        let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = object_name(p)?;
        let cascade = parse_word(p, "CASCADE");
        if !cascade {
            parse_word(p, "RESTRICT");
        }
        return Ok(Some(Statement::DropCatalog {
            name,
            if_exists,
            cascade,
        }));
    }
    Ok(None)
}

/// `EXECUTE IMMEDIATE sql [INTO v, ...] [USING e [AS name], ...]`.
pub(super) fn execute_statement(p: &mut Parser) -> Result<Option<Statement>> {
    if !(is_word(&p.peek_token().token, "EXECUTE")
        && is_word(&p.peek_nth_token(1).token, "IMMEDIATE"))
    {
        return Ok(None);
    }
    p.next_token();
    p.next_token();
    let sql = Box::new(p.parse_expr().map_err(pe)?);
    let mut into = vec![];
    if parse_word(p, "INTO") {
        into = comma_separated(p, variable_name)?;
    }
    let mut using = vec![];
    if parse_word(p, "USING") {
        using = comma_separated(p, |p| {
            let e = p.parse_expr().map_err(pe)?;
            let name = if parse_word(p, "AS") {
                Some(p.parse_identifier().map_err(pe)?.value)
            } else {
                None
            };
            Ok((e, name))
        })?;
    }
    Ok(Some(Statement::ExecuteImmediate { sql, into, using }))
}

/// `DECLARE`, `SET VAR` and `DROP TEMPORARY VARIABLE`.
pub(super) fn variable_statement(p: &mut Parser) -> Result<Option<Statement>> {
    let w0 = p.peek_token().token;
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
        return Ok(Some(Statement::Declare {
            or_replace,
            name,
            data_type,
            default,
        }));
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
            return Ok(Some(Statement::SetVariablesFromQuery { names, query }));
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
        return Ok(Some(Statement::SetVariables { assignments }));
    }
    if parse_words(p, &["DROP", "TEMPORARY", "VARIABLE"])
        || parse_words(p, &["DROP", "TEMPORARY", "VAR"])
    {
        let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        return Ok(Some(Statement::DropVariable {
            name: variable_name(p)?,
            if_exists,
        }));
    }
    Ok(None)
}

/// `COPY INCREMENTAL`, and a hint for a misspelled `INCREMENTAL`.
pub(super) fn copy_statement(p: &mut Parser) -> Result<Option<Statement>> {
    if parse_words(p, &["COPY", "INCREMENTAL"]) {
        return parse_copy(p).map(Some);
    }
    if let Some(c) = copy_into::copy_into_statement(p)? {
        return Ok(Some(c));
    }
    if is_word(&p.peek_token().token, "COPY")
        && let Token::Word(w) = &p.peek_nth_token(1).token
        && w.quote_style.is_none()
        && is_near_miss(&w.value, "INCREMENTAL")
    {
        p.next_token();
        return Err(error_here(p, "expected INCREMENTAL after COPY"));
    }
    Ok(None)
}

pub(super) fn comma_separated<T>(
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
pub(super) fn parse_properties(p: &mut Parser) -> Result<Vec<(String, String)>> {
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

pub(super) fn property_text(p: &mut Parser) -> Result<String> {
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
pub(super) fn parse_copy(p: &mut Parser) -> Result<Statement> {
    if parse_words(p, &["USING", "CONTROL", "TABLE"]) {
        let control = object_name(p)?;
        let mut c = CopyUsingControl {
            control,
            filter: None,
            shard: None,
            concurrency: None,
            dry_run: false,
        };
        loop {
            if c.filter.is_none() && p.parse_keyword(Keyword::WHERE) {
                c.filter = Some(p.parse_expr().map_err(pe)?);
            } else if c.shard.is_none() && parse_word(p, "SHARD") {
                let at = p.peek_token();
                let i = p.parse_literal_uint().map_err(pe)?;
                expect_word(p, "OF")?;
                let n = positive(p)?;
                if i >= n {
                    return Err(Error::parse(
                        format!(
                            "SHARD {i} OF {n}: shards count from 0, so the index must be below {n} (SHARD 0 OF {n} to SHARD {} OF {n})",
                            n - 1
                        ),
                        at.span.start.line as usize,
                        at.span.start.column as usize,
                    ));
                }
                c.shard = Some((i, n));
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

pub(super) fn positive(p: &mut Parser) -> Result<u64> {
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
/// The head is parsed now; the body is split into statements checked for syntax (names
/// resolve per iteration).
pub(super) fn parse_for(
    sql: &str,
    tokens: Vec<TokenWithSpan>,
    resolver: &dyn IdentifierResolver,
) -> Result<Statement> {
    let (do_idx, end_idx) = loop_bounds(&tokens)?;
    let (var, query, concurrency, parallel) = loop_head(tokens[..do_idx].to_vec(), resolver)?;
    let body = loop_body(sql, &tokens, do_idx, end_idx)?;
    Ok(Statement::ForEach(Box::new(ForEach {
        var,
        query,
        concurrency,
        parallel,
        body,
    })))
}

/// The positions of the DO that opens a loop's body and of its final END.
pub(super) fn loop_bounds(tokens: &[TokenWithSpan]) -> Result<(usize, usize)> {
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
    Ok((do_idx, end_idx))
}

/// A loop head: its variable, query, CONCURRENCY and whether it is FOR EACH (parallel).
type LoopHead = (
    Option<String>,
    Box<datafusion::sql::sqlparser::ast::Query>,
    Option<u64>,
    bool,
);

/// Parse the tokens before DO.
pub(super) fn loop_head(
    tokens: Vec<TokenWithSpan>,
    resolver: &dyn IdentifierResolver,
) -> Result<LoopHead> {
    let mut head = tokens;
    head.push(TokenWithSpan::wrap(Token::EOF));
    let head = substitute_identifiers(head, resolver)?;
    let mut p = Parser::new(&DIALECT).with_tokens_with_locations(head);
    expect_word(&mut p, "FOR")?;
    let parts = if parse_word(&mut p, "EACH") {
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
    Ok(parts)
}

/// The statements between DO and END FOR, with their positions in `sql`.
pub(super) fn loop_body(
    sql: &str,
    tokens: &[TokenWithSpan],
    do_idx: usize,
    end_idx: usize,
) -> Result<Vec<BodyStatement>> {
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
    Ok(body)
}
