//! The grammar of Databricks' Lakehouse Federation statements:
//!
//! ```sql
//! CREATE CONNECTION [IF NOT EXISTS] c TYPE postgresql | mysql | sqlite
//!   OPTIONS (host 'db', port '5432', user 'me', password secret('scope', 'key')) [COMMENT '..']
//! CREATE FOREIGN CATALOG [IF NOT EXISTS] pg USING CONNECTION c [OPTIONS (database 'shop')]
//! DROP CONNECTION [IF EXISTS] c
//! SHOW CONNECTIONS
//! DESCRIBE CONNECTION c
//! ```

use super::*;
use crate::catalog::foreign::OptionValue;

/// One of the statements above, or None (the parser is where it was).
pub(in crate::parser) fn connection_statement(p: &mut Parser) -> Result<Option<Statement>> {
    if parse_words(p, &["CREATE", "CONNECTION"]) {
        let if_not_exists = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
        let name = one_part(p, "connection")?;
        expect_word(p, "TYPE")?;
        let kind = match p.next_token().token {
            Token::Word(w) => w.value,
            _ => {
                p.prev_token();
                return Err(error_here(
                    p,
                    "expected a connection type: postgresql, mysql or sqlite",
                ));
            }
        };
        let options = if parse_word(p, "OPTIONS") {
            options(p)?
        } else {
            vec![]
        };
        let comment = comment(p)?;
        return Ok(Some(Statement::CreateConnection(Box::new(
            CreateConnection {
                name,
                if_not_exists,
                kind,
                options,
                comment,
            },
        ))));
    }
    if parse_words(p, &["CREATE", "FOREIGN", "CATALOG"]) {
        let if_not_exists = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
        let name = one_part(p, "catalog")?;
        expect_word(p, "USING")?;
        expect_word(p, "CONNECTION")?;
        let connection = one_part(p, "connection")?;
        let options = if parse_word(p, "OPTIONS") {
            options(p)?
        } else {
            vec![]
        };
        let comment = comment(p)?;
        return Ok(Some(Statement::CreateForeignCatalog(Box::new(
            CreateForeignCatalog {
                name,
                if_not_exists,
                connection,
                options,
                comment,
            },
        ))));
    }
    if parse_words(p, &["DROP", "CONNECTION"]) {
        let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = one_part(p, "connection")?;
        return Ok(Some(Statement::DropConnection { name, if_exists }));
    }
    if parse_words(p, &["SHOW", "CONNECTIONS"]) {
        return Ok(Some(Statement::ShowConnections));
    }
    // `DESCRIBE connection` alone describes a table of that name.
    if matches!(p.peek_nth_token(2).token, Token::Word(_))
        && (parse_words(p, &["DESCRIBE", "CONNECTION"]) || parse_words(p, &["DESC", "CONNECTION"]))
    {
        parse_word(p, "EXTENDED");
        let name = one_part(p, "connection")?;
        return Ok(Some(Statement::DescribeConnection { name }));
    }
    if parse_words(p, &["ALTER", "CONNECTION"]) {
        return Err(error_here(
            p,
            "ALTER CONNECTION is not supported: DROP CONNECTION and CREATE CONNECTION again (its foreign catalogs stay)",
        ));
    }
    Ok(None)
}

/// A one-part name (a connection's, a catalog's), lower case.
fn one_part(p: &mut Parser, what: &str) -> Result<String> {
    let name = object_name(p)?;
    match name.0.as_slice() {
        [datafusion::sql::sqlparser::ast::ObjectNamePart::Identifier(part)] => {
            Ok(part.value.to_lowercase())
        }
        _ => Err(error_here(
            p,
            format!("a {what} name has one part, found {name}"),
        )),
    }
}

/// `(key value, ...)`: values are strings or `secret('scope', 'key')` (`=` between is allowed).
fn options(p: &mut Parser) -> Result<Vec<(String, OptionValue)>> {
    p.expect_token(&Token::LParen).map_err(pe)?;
    let out = comma_separated(p, |p| {
        let key = match p.next_token().token {
            Token::Word(w) => w.value,
            Token::SingleQuotedString(s) => s,
            _ => {
                p.prev_token();
                return Err(error_here(p, "expected an option name"));
            }
        };
        let _ = p.consume_token(&Token::Eq);
        let value = match p.next_token().token {
            Token::SingleQuotedString(s) => OptionValue::Text(s),
            Token::Number(n, _) => OptionValue::Text(n),
            Token::Word(w) if w.value.eq_ignore_ascii_case("secret") => {
                p.expect_token(&Token::LParen).map_err(pe)?;
                let scope = p.parse_literal_string().map_err(pe)?;
                p.expect_token(&Token::Comma).map_err(pe)?;
                let key = p.parse_literal_string().map_err(pe)?;
                p.expect_token(&Token::RParen).map_err(pe)?;
                OptionValue::Secret { scope, key }
            }
            _ => {
                p.prev_token();
                return Err(error_here(
                    p,
                    format!("expected a value for {key}: a string or secret('scope', 'key')"),
                ));
            }
        };
        Ok((key, value))
    })?;
    p.expect_token(&Token::RParen).map_err(pe)?;
    Ok(out)
}

fn comment(p: &mut Parser) -> Result<Option<String>> {
    if parse_word(p, "COMMENT") {
        return Ok(Some(p.parse_literal_string().map_err(pe)?));
    }
    Ok(None)
}
