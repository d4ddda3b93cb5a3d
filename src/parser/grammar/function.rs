//! The grammar of SQL functions: `CREATE [OR REPLACE] [TEMP|TEMPORARY] FUNCTION [IF NOT
//! EXISTS] f(p TYPE [DEFAULT e] [COMMENT '..'], ...) {RETURNS TYPE | RETURNS TABLE [(c TYPE,
//! ...)]} [characteristics] RETURN {expr | query}`, `DROP [TEMPORARY] FUNCTION [IF EXISTS] f`,
//! `DESCRIBE FUNCTION [EXTENDED] f` and `SHOW [USER|SYSTEM|ALL] FUNCTIONS [IN schema] [[LIKE]
//! 'pattern']`.

use super::*;
use datafusion::sql::sqlparser::ast::DataType;

/// One of the statements above, or None (the parser is where it was).
pub(in crate::parser) fn function_statement(p: &mut Parser) -> Result<Option<Statement>> {
    let at = |i: usize, w: &str| is_word(&p.peek_nth_token(i).token, w);
    if at(0, "CREATE") {
        let mut i = 1;
        let or_replace = at(1, "OR") && at(2, "REPLACE");
        if or_replace {
            i = 3;
        }
        let temporary = at(i, "TEMP") || at(i, "TEMPORARY");
        if temporary {
            i += 1;
        }
        if !at(i, "FUNCTION") {
            return Ok(None);
        }
        for _ in 0..=i {
            p.next_token();
        }
        return create_function(p, or_replace, temporary).map(Some);
    }
    if at(0, "DROP")
        && (at(1, "FUNCTION") || (at(1, "TEMPORARY") || at(1, "TEMP")) && at(2, "FUNCTION"))
    {
        p.next_token();
        let temporary = parse_word(p, "TEMPORARY") || parse_word(p, "TEMP");
        p.next_token();
        let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        return Ok(Some(Statement::DropFunction {
            temporary,
            if_exists,
            name: object_name(p)?,
        }));
    }
    if (at(0, "DESCRIBE") || at(0, "DESC"))
        && at(1, "FUNCTION")
        && matches!(p.peek_nth_token(2).token, Token::Word(_))
    {
        p.next_token();
        p.next_token();
        let extended =
            matches!(p.peek_nth_token(1).token, Token::Word(_)) && parse_word(p, "EXTENDED");
        return Ok(Some(Statement::DescribeFunction {
            name: object_name(p)?,
            extended,
        }));
    }
    let kind = if at(0, "SHOW") && at(1, "FUNCTIONS") {
        Some(FunctionKind::All)
    } else if at(0, "SHOW") && at(2, "FUNCTIONS") {
        match p.peek_nth_token(1).token {
            t if is_word(&t, "USER") => Some(FunctionKind::User),
            t if is_word(&t, "SYSTEM") => Some(FunctionKind::System),
            t if is_word(&t, "ALL") => Some(FunctionKind::All),
            _ => None,
        }
    } else {
        None
    };
    let Some(kind) = kind else {
        return Ok(None);
    };
    while !parse_word(p, "FUNCTIONS") {
        p.next_token();
    }
    let within = if parse_word(p, "IN") || parse_word(p, "FROM") {
        Some(object_name(p)?)
    } else {
        None
    };
    let like = super::show_pattern(p)?;
    Ok(Some(Statement::ShowFunctions { kind, within, like }))
}

/// What follows `CREATE [OR REPLACE] [TEMPORARY] FUNCTION`.
fn create_function(p: &mut Parser, or_replace: bool, temporary: bool) -> Result<Statement> {
    let if_not_exists = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = object_name(p)?;
    if is_word(&p.peek_token().token, "AS") || is_word(&p.peek_token().token, "USING") {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "CREATE FUNCTION {name} AS 'class' (a JVM function) is not supported: write a SQL function, CREATE FUNCTION {name}(x INT) RETURNS INT RETURN x + 1"
            ),
        ));
    }
    p.expect_token(&Token::LParen).map_err(pe)?;
    let mut params = vec![];
    if !p.consume_token(&Token::RParen) {
        params = comma_separated(p, parameter)?;
        p.expect_token(&Token::RParen).map_err(pe)?;
    }
    let mut returns = FunctionReturns::Scalar(None);
    if parse_word(p, "RETURNS") {
        returns = if parse_word(p, "TABLE") {
            let mut columns = vec![];
            if p.consume_token(&Token::LParen) {
                columns = comma_separated(p, |p| {
                    let name = p.parse_identifier().map_err(pe)?;
                    let data_type = data_type(p)?;
                    if parse_word(p, "COMMENT") {
                        comment(p)?;
                    }
                    Ok((name, data_type))
                })?;
                p.expect_token(&Token::RParen).map_err(pe)?;
            }
            FunctionReturns::Table(columns)
        } else {
            FunctionReturns::Scalar(Some(data_type(p)?))
        };
    }
    let mut function_comment = None;
    let mut not_deterministic = false;
    loop {
        if parse_word(p, "LANGUAGE") {
            let language = p.parse_identifier().map_err(pe)?;
            if !language.value.eq_ignore_ascii_case("SQL") {
                return Err(Error::class(
                    "UNSUPPORTED_FEATURE",
                    format!(
                        "CREATE FUNCTION {name} LANGUAGE {language}: only SQL functions are supported (LANGUAGE SQL ... RETURN expr)"
                    ),
                ));
            }
        } else if parse_word(p, "DETERMINISTIC") {
            not_deterministic = false;
        } else if parse_words(p, &["NOT", "DETERMINISTIC"]) {
            not_deterministic = true;
        } else if parse_word(p, "COMMENT") {
            function_comment = Some(comment(p)?);
        } else if parse_words(p, &["CONTAINS", "SQL"])
            || parse_words(p, &["READS", "SQL", "DATA"])
            || parse_words(p, &["SQL", "SECURITY", "DEFINER"])
        {
            // What the body may do and whose rights it runs with: a statement can only
            // read, and it reads with the session's rights.
        } else {
            break;
        }
    }
    if !parse_word(p, "RETURN") {
        return Err(error_here(
            p,
            "expected RETURN followed by the function's expression or query",
        ));
    }
    let query_next = is_word(&p.peek_token().token, "SELECT")
        || is_word(&p.peek_token().token, "WITH")
        || is_word(&p.peek_token().token, "VALUES")
        || is_word(&p.peek_token().token, "FROM");
    let body = if matches!(returns, FunctionReturns::Table(_)) || query_next {
        FunctionBody::Query(p.parse_query().map_err(pe)?)
    } else {
        FunctionBody::Expr(Box::new(p.parse_expr().map_err(pe)?))
    };
    Ok(Statement::CreateFunction(Box::new(CreateFunction {
        or_replace,
        temporary,
        if_not_exists,
        name,
        params,
        returns,
        comment: function_comment,
        not_deterministic,
        body,
    })))
}

/// `name TYPE [DEFAULT expr] [COMMENT '..']`.
fn parameter(p: &mut Parser) -> Result<FunctionParam> {
    let name = p.parse_identifier().map_err(pe)?;
    let data_type = data_type(p)?;
    let mut default = None;
    let mut param_comment = None;
    loop {
        if parse_word(p, "DEFAULT") {
            default = Some(p.parse_expr().map_err(pe)?);
        } else if parse_word(p, "COMMENT") {
            param_comment = Some(comment(p)?);
        } else {
            break;
        }
    }
    Ok(FunctionParam {
        name,
        data_type,
        default,
        comment: param_comment,
    })
}

fn data_type(p: &mut Parser) -> Result<DataType> {
    p.parse_data_type().map_err(pe)
}

fn comment(p: &mut Parser) -> Result<String> {
    match p.next_token().token {
        Token::SingleQuotedString(s) => Ok(s),
        _ => {
            p.prev_token();
            Err(error_here(p, "expected a quoted comment"))
        }
    }
}
