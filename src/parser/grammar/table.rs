//! The grammar of statements on one existing table: the `ALTER TABLE` forms tidemark runs
//! (ADD COLUMNS, ADD/DROP CONSTRAINT, SET TBLPROPERTIES, RENAME TO, ALTER COLUMN), `TRUNCATE`,
//! `RESTORE`, `COMMENT ON`, `SHOW CREATE TABLE | TBLPROPERTIES | COLUMNS` and
//! `DESCRIBE DETAIL`. Other ALTER TABLE forms go to sqlparser, and the engine refuses them by
//! name.

use super::*;

/// One of the statements above, or None (the parser is where it was).
pub(in crate::parser) fn table_statement(p: &mut Parser) -> Result<Option<Statement>> {
    let w0 = p.peek_token().token;
    let on = |table, action| {
        Ok(Some(Statement::OnTable(Box::new(OnTable {
            table,
            action,
        }))))
    };
    if is_word(&w0, "ALTER") && is_word(&p.peek_nth_token(1).token, "TABLE") {
        return alter_table(p);
    }
    if is_word(&w0, "CREATE")
        && let Some(clone) = clone_table(p)?
    {
        return Ok(Some(clone));
    }
    if parse_word(p, "TRUNCATE") {
        parse_word(p, "TABLE");
        let table = object_name(p)?;
        let partition = partition_spec(p)?;
        return on(table, TableAction::Truncate { partition });
    }
    if parse_word(p, "RESTORE") {
        parse_word(p, "TABLE");
        let table = object_name(p)?;
        parse_word(p, "TO");
        let as_of = if parse_words(p, &["VERSION", "AS", "OF"]) {
            AsOf::Version(version(p)?)
        } else if parse_words(p, &["TIMESTAMP", "AS", "OF"]) {
            AsOf::Timestamp(Box::new(p.parse_expr().map_err(pe)?))
        } else {
            return Err(error_here(
                p,
                "expected VERSION AS OF n or TIMESTAMP AS OF timestamp",
            ));
        };
        return on(table, TableAction::Restore(as_of));
    }
    if is_word(&w0, "COMMENT") && is_word(&p.peek_nth_token(1).token, "ON") {
        p.next_token();
        p.next_token();
        let column = parse_word(p, "COLUMN");
        if !column && !parse_word(p, "TABLE") {
            return Err(error_here(
                p,
                "expected TABLE or COLUMN after COMMENT ON (tidemark keeps comments on tables and columns)",
            ));
        }
        let mut name = object_name(p)?;
        expect_word(p, "IS")?;
        let comment = if parse_word(p, "NULL") {
            None
        } else {
            Some(p.parse_literal_string().map_err(pe)?)
        };
        if !column {
            return on(name, TableAction::Comment(comment));
        }
        let column = match name.0.pop() {
            Some(ObjectNamePart::Identifier(c)) if !name.0.is_empty() => c,
            _ => return Err(error_here(p, "expected COMMENT ON COLUMN table.column")),
        };
        let change = ColumnChange::Comment(comment);
        return on(name, TableAction::AlterColumn { column, change });
    }
    if is_word(&w0, "SHOW") {
        let w1 = p.peek_nth_token(1).token;
        if is_word(&w1, "CREATE") && is_word(&p.peek_nth_token(2).token, "TABLE") {
            parse_words(p, &["SHOW", "CREATE", "TABLE"]);
            return on(object_name(p)?, TableAction::ShowCreate);
        }
        if is_word(&w1, "PARTITIONS") {
            parse_words(p, &["SHOW", "PARTITIONS"]);
            let table = object_name(p)?;
            let partition = partition_spec(p)?;
            return on(table, TableAction::ShowPartitions { partition });
        }
        if is_word(&w1, "TBLPROPERTIES") {
            parse_words(p, &["SHOW", "TBLPROPERTIES"]);
            let table = object_name(p)?;
            let key = if p.consume_token(&Token::LParen) {
                let key = property_text(p)?;
                p.expect_token(&Token::RParen).map_err(pe)?;
                Some(key)
            } else {
                None
            };
            return on(table, TableAction::ShowProperties { key });
        }
        if is_word(&w1, "COLUMNS") {
            parse_words(p, &["SHOW", "COLUMNS"]);
            if !parse_word(p, "IN") {
                expect_word(p, "FROM")?;
            }
            let mut table = object_name(p)?;
            if parse_word(p, "IN") || parse_word(p, "FROM") {
                let mut schema = object_name(p)?;
                if table.0.len() != 1 {
                    return Err(error_here(
                        p,
                        "SHOW COLUMNS IN schema.table takes no second schema",
                    ));
                }
                schema.0.append(&mut table.0);
                table = schema;
            }
            return on(table, TableAction::ShowColumns);
        }
    }
    // (`DESCRIBE detail` and `DESCRIBE detail.t` describe tables.)
    if (is_word(&w0, "DESCRIBE") || is_word(&w0, "DESC"))
        && is_word(&p.peek_nth_token(1).token, "DETAIL")
        && matches!(p.peek_nth_token(2).token, Token::Word(_))
    {
        p.next_token();
        p.next_token();
        return on(object_name(p)?, TableAction::DescribeDetail);
    }
    Ok(None)
}

/// `[PARTITION (c = v, ...)]` after a table name (empty without it).
fn partition_spec(p: &mut Parser) -> Result<Vec<(Ident, Expr)>> {
    if !parse_word(p, "PARTITION") {
        return Ok(vec![]);
    }
    p.expect_token(&Token::LParen).map_err(pe)?;
    let spec = comma_separated(p, |p| {
        let column = p.parse_identifier().map_err(pe)?;
        p.expect_token(&Token::Eq).map_err(pe)?;
        Ok((column, p.parse_expr().map_err(pe)?))
    })?;
    p.expect_token(&Token::RParen).map_err(pe)?;
    Ok(spec)
}

/// `ALTER TABLE t ...`: tidemark's forms, else None with the parser back at `ALTER`.
fn alter_table(p: &mut Parser) -> Result<Option<Statement>> {
    let start = p.index();
    p.next_token();
    p.next_token();
    let table = object_name(p)?;
    let on = |table, action| {
        Ok(Some(Statement::OnTable(Box::new(OnTable {
            table,
            action,
        }))))
    };
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
        return Ok(Some(Statement::AddConstraint { table, name, check }));
    }
    if parse_words(p, &["DROP", "CONSTRAINT"]) {
        let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = p.parse_identifier().map_err(pe)?;
        return Ok(Some(Statement::DropConstraint {
            table,
            name,
            if_exists,
        }));
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
        return Ok(Some(Statement::AddColumns { table, columns }));
    }
    if parse_words(p, &["SET", "TBLPROPERTIES"]) {
        return Ok(Some(Statement::SetProperties {
            table,
            properties: parse_properties(p)?,
        }));
    }
    if parse_words(p, &["RENAME", "TO"]) {
        return on(table, TableAction::RenameTo(object_name(p)?));
    }
    let alter = is_word(&p.peek_token().token, "ALTER") || is_word(&p.peek_token().token, "CHANGE");
    // `ALTER COLUMN c <change>` (the COLUMN keyword is optional after ALTER and CHANGE).
    if alter && !is_word(&p.peek_nth_token(1).token, "COLUMNS") {
        p.next_token();
        parse_word(p, "COLUMN");
        let column = p.parse_identifier().map_err(pe)?;
        if let Some(change) = column_change(p)? {
            return on(table, TableAction::AlterColumn { column, change });
        }
    }
    // Anything else: let sqlparser parse it (the engine reports what is unsupported).
    while p.index() > start {
        p.prev_token();
    }
    Ok(None)
}

/// What `ALTER COLUMN c` changes; None for a change tidemark does not make (TYPE, FIRST, ...:
/// sqlparser parses those, and the engine refuses them by name).
fn column_change(p: &mut Parser) -> Result<Option<ColumnChange>> {
    Ok(Some(if parse_words(p, &["SET", "DEFAULT"]) {
        ColumnChange::SetDefault(Box::new(p.parse_expr().map_err(pe)?))
    } else if parse_words(p, &["DROP", "DEFAULT"]) {
        ColumnChange::DropDefault
    } else if parse_words(p, &["SET", "NOT", "NULL"]) {
        ColumnChange::SetNotNull
    } else if parse_words(p, &["DROP", "NOT", "NULL"]) {
        ColumnChange::DropNotNull
    } else if parse_word(p, "COMMENT") {
        ColumnChange::Comment(Some(p.parse_literal_string().map_err(pe)?))
    } else {
        return Ok(None);
    }))
}

/// A table version: a non-negative integer.
fn version(p: &mut Parser) -> Result<u64> {
    match p.next_token().token {
        Token::Number(n, _) => n
            .parse()
            .ok()
            .ok_or_else(|| error_here(p, "expected a table version (0, 1, ...)")),
        _ => {
            p.prev_token();
            Err(error_here(p, "expected a table version (0, 1, ...)"))
        }
    }
}

/// `CREATE [OR REPLACE] TABLE [IF NOT EXISTS] t [SHALLOW | DEEP] CLONE source [VERSION AS OF n |
/// TIMESTAMP AS OF ts] [TBLPROPERTIES (...)]`, or None (the parser is where it was).
fn clone_table(p: &mut Parser) -> Result<Option<Statement>> {
    let head = p
        .maybe_parse(|p| {
            p.next_token();
            let or_replace = parse_words(p, &["OR", "REPLACE"]);
            if !parse_word(p, "TABLE") {
                return p.expected("TABLE", p.peek_token());
            }
            let if_not_exists = parse_words(p, &["IF", "NOT", "EXISTS"]);
            let name = p.parse_object_name(false)?;
            let shallow = parse_word(p, "SHALLOW");
            if !shallow {
                parse_word(p, "DEEP");
            }
            if !parse_word(p, "CLONE") {
                return p.expected("CLONE", p.peek_token());
            }
            Ok((or_replace, if_not_exists, name, shallow))
        })
        .map_err(pe)?;
    let Some((or_replace, if_not_exists, name, shallow)) = head else {
        return Ok(None);
    };
    let source = object_name(p)?;
    let as_of = if parse_words(p, &["VERSION", "AS", "OF"]) {
        Some(AsOf::Version(version(p)?))
    } else if parse_words(p, &["TIMESTAMP", "AS", "OF"]) {
        Some(AsOf::Timestamp(Box::new(p.parse_expr().map_err(pe)?)))
    } else {
        None
    };
    let properties = if parse_word(p, "TBLPROPERTIES") {
        parse_properties(p)?
    } else {
        vec![]
    };
    if is_word(&p.peek_token().token, "LOCATION") {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            "CREATE TABLE ... CLONE ... LOCATION is not supported: a clone is a table of the warehouse",
        ));
    }
    Ok(Some(Statement::CloneTable(Box::new(CloneTable {
        or_replace,
        if_not_exists,
        name,
        shallow,
        source,
        as_of,
        properties,
    }))))
}
