//! The grammar of Databricks' `COPY INTO`, the idempotent file loader:
//!
//! ```sql
//! COPY INTO target [BY POSITION | (col, ...)]
//!   FROM 'path' | FROM (SELECT items FROM 'path')
//!   FILEFORMAT = CSV | JSON | PARQUET
//!   [FILES = ('name', ...) | PATTERN = 'glob']
//!   [FORMAT_OPTIONS ('key' = 'value', ...)]
//!   [COPY_OPTIONS ('force' = 'true', 'mergeSchema' = 'true')]
//! ```
//!
//! `VALIDATE` and `WITH (CREDENTIAL | ENCRYPTION)` are refused by name.

use super::*;

/// `COPY INTO ...`, or None (the parser is where it was).
pub(in crate::parser) fn copy_into_statement(p: &mut Parser) -> Result<Option<Statement>> {
    if !(is_word(&p.peek_token().token, "COPY") && is_word(&p.peek_nth_token(1).token, "INTO")) {
        return Ok(None);
    }
    p.next_token();
    p.next_token();
    let target = p.parse_object_name(false).map_err(pe)?;
    let columns = if parse_words(p, &["BY", "POSITION"]) {
        CopyColumns::ByPosition
    } else if p.consume_token(&Token::LParen) {
        let c = comma_separated(p, |p| p.parse_identifier().map_err(pe))?;
        p.expect_token(&Token::RParen).map_err(pe)?;
        CopyColumns::Listed(c)
    } else {
        CopyColumns::ByName
    };
    expect_word(p, "FROM")?;
    let (select, from) = if p.consume_token(&Token::LParen) {
        expect_word(p, "SELECT")?;
        let items = p.parse_projection().map_err(pe)?;
        expect_word(p, "FROM")?;
        let from = path(p)?;
        if !p.consume_token(&Token::RParen) {
            return Err(error_here(
                p,
                "COPY INTO's SELECT reads the files as they are: no alias, WHERE, GROUP BY or JOIN after its FROM 'path' (filter and join after loading)",
            ));
        }
        (Some(items), from)
    } else {
        (None, path(p)?)
    };
    if is_word(&p.peek_token().token, "WITH") {
        return Err(error_here(
            p,
            "COPY INTO ... WITH (CREDENTIAL | ENCRYPTION) is not supported: tidemark reads local files with the permissions of its own process",
        ));
    }
    expect_word(p, "FILEFORMAT")?;
    p.expect_token(&Token::Eq).map_err(pe)?;
    let format = match p.next_token().token {
        Token::Word(w) => w.value,
        _ => {
            p.prev_token();
            return Err(error_here(
                p,
                "expected a file format: CSV, JSON or PARQUET",
            ));
        }
    };
    let mut c = CopyInto {
        target,
        columns,
        select,
        from,
        format,
        files: None,
        pattern: None,
        format_options: vec![],
        copy_options: vec![],
    };
    let (mut format_options, mut copy_options) = (false, false);
    while let Token::Word(w) = &p.peek_token().token {
        let clause = w.value.to_uppercase();
        match clause.as_str() {
            "VALIDATE" => {
                return Err(error_here(
                    p,
                    "COPY INTO ... VALIDATE is not supported: read the files with SELECT * FROM read_files(...) to check them, or COPY INTO a scratch table",
                ));
            }
            "FILES" | "PATTERN" if c.files.is_some() || c.pattern.is_some() => {
                return Err(error_here(
                    p,
                    "COPY INTO takes FILES or PATTERN, once, not both",
                ));
            }
            "FILES" => {
                p.next_token();
                p.expect_token(&Token::Eq).map_err(pe)?;
                p.expect_token(&Token::LParen).map_err(pe)?;
                c.files = Some(comma_separated(p, path)?);
                p.expect_token(&Token::RParen).map_err(pe)?;
            }
            "PATTERN" => {
                p.next_token();
                p.expect_token(&Token::Eq).map_err(pe)?;
                c.pattern = Some(path(p)?);
            }
            "FORMAT_OPTIONS" if !format_options => {
                p.next_token();
                format_options = true;
                c.format_options = parse_properties(p)?;
            }
            "COPY_OPTIONS" if !copy_options => {
                p.next_token();
                copy_options = true;
                c.copy_options = parse_properties(p)?;
            }
            "FORMAT_OPTIONS" | "COPY_OPTIONS" => {
                return Err(error_here(p, format!("{clause} is given twice")));
            }
            _ => break,
        }
    }
    Ok(Some(Statement::CopyInto(Box::new(c))))
}

/// A path or file name: a string literal.
fn path(p: &mut Parser) -> Result<String> {
    match p.next_token().token {
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Ok(s),
        _ => {
            p.prev_token();
            Err(error_here(
                p,
                "expected a path as a string literal ('/data/orders')",
            ))
        }
    }
}
