//! The grammar of Databricks' two INSERT forms sqlparser lacks: `INSERT INTO [TABLE] t BY NAME
//! query` (the query's column names pick the table's columns) and `INSERT INTO [TABLE] t
//! REPLACE WHERE predicate query` (replace the rows the predicate selects). Every other INSERT
//! goes to sqlparser.

use super::*;

/// One of the statements above, or None (the parser is where it was).
pub(in crate::parser) fn insert_statement(p: &mut Parser) -> Result<Option<Statement>> {
    if !is_word(&p.peek_token().token, "INSERT") {
        return Ok(None);
    }
    // Only the head is tried: once BY NAME or REPLACE WHERE is read, an error in the query
    // is that query's own error, not a reason to hand the statement to sqlparser.
    let head = p
        .maybe_parse(|p| {
            p.next_token();
            let overwrite = if parse_word(p, "OVERWRITE") {
                true
            } else if parse_word(p, "INTO") {
                false
            } else {
                return p.expected("INTO or OVERWRITE", p.peek_token());
            };
            parse_word(p, "TABLE");
            let table = p.parse_object_name(false)?;
            let mode = if parse_words(p, &["BY", "NAME"]) {
                InsertMode::ByName
            } else if is_word(&p.peek_token().token, "REPLACE")
                && is_word(&p.peek_nth_token(1).token, "WHERE")
            {
                p.next_token();
                p.next_token();
                InsertMode::ReplaceWhere(Box::new(p.parse_expr()?))
            } else {
                return p.expected("BY NAME or REPLACE WHERE", p.peek_token());
            };
            Ok((table, overwrite, mode))
        })
        .map_err(pe)?;
    let Some((table, overwrite, mode)) = head else {
        return Ok(None);
    };
    if overwrite && matches!(mode, InsertMode::ReplaceWhere(_)) {
        return Err(Error::Invalid(
            "INSERT OVERWRITE ... REPLACE WHERE: write INSERT INTO t REPLACE WHERE predicate query (it overwrites the rows the predicate selects)".into(),
        ));
    }
    let query = p.parse_query().map_err(pe)?;
    Ok(Some(Statement::Insert(Box::new(Insert {
        table,
        overwrite,
        mode,
        query,
    }))))
}
