//! How an error reads on stderr: `origin:line:col: error: message`, the message without the
//! engine's repeated prefixes and with whole paths, and, when the error points into the
//! statement, the line with a caret under the spot (psql's `LINE n:`).

use std::path::Path;

use crate::error::Error;
use crate::parser::is_near_miss;
use crate::parser::splitter::Pos;

/// The error's text for stderr, ending with a newline. `pos` is where the statement starts
/// in its origin; `sql` is its text, if there is one.
pub(super) fn describe(
    e: &Error,
    pos: Pos,
    origin: &str,
    sql: Option<&str>,
    warehouse: &Path,
) -> String {
    let message = tidy(&e.to_string(), warehouse);
    // A position found after parsing comes from the syntax tree the engine planned; a part
    // that tidemark rewrote has positions of another text. Keep it only where the statement
    // there reads as a name the message mentions.
    let at = e
        .position()
        .filter(|&(line, col)| match e {
            Error::Parse { .. } => true,
            _ => sql.is_some_and(|sql| mentions_word_at(sql, line, col, &message)),
        })
        .or_else(|| sql.and_then(|sql| mismatched_operator(sql, &message)));
    let (line, col) = match at {
        Some((l, c)) if l <= 1 => (pos.line, pos.col + c.saturating_sub(1)),
        Some((l, c)) => (pos.line + l - 1, c),
        None => (pos.line, pos.col),
    };
    let mut out = format!("{origin}:{line}:{col}: error: {message}\n");
    if let (Some(sql), Some((l, c))) = (sql, at)
        && let Some(text) = sql.lines().nth(l.saturating_sub(1))
    {
        let text: String = text
            .chars()
            .map(|ch| if ch == '\t' { ' ' } else { ch })
            .collect();
        let label = format!("LINE {line}: ");
        let indent = label.chars().count() + c.saturating_sub(1);
        out.push_str(&format!("{label}{text}\n{}^\n", " ".repeat(indent)));
    }
    out
}

/// Where a type mismatch is, for the engine's coercion errors, which carry no position
/// ("Cannot coerce arithmetic expression Int64 + Utf8 ..."): the one expression of the
/// statement with that operator. With none or several, nothing is pointed at.
fn mismatched_operator(sql: &str, message: &str) -> Option<(usize, usize)> {
    use datafusion::sql::sqlparser::ast::{Expr, Spanned, visit_expressions};
    use datafusion::sql::sqlparser::parser::Parser;
    use std::ops::ControlFlow;
    let rest = [
        "Cannot coerce arithmetic expression ",
        "Cannot infer common argument type for comparison operation ",
        "Cannot infer common argument type for logical boolean operation ",
    ]
    .iter()
    .find_map(|lead| message.find(lead).map(|i| &message[i + lead.len()..]))?;
    // "<type> <op> <type>": the operator is the second word.
    let op = rest.split_whitespace().nth(1)?;
    let statements = Parser::parse_sql(&crate::parser::DIALECT, sql).ok()?;
    let mut found = vec![];
    let _ = visit_expressions(&statements, |e| {
        if let Expr::BinaryOp { op: o, .. } = e
            && o.to_string().eq_ignore_ascii_case(op)
        {
            found.push(e.span().start);
        }
        ControlFlow::<()>::Continue(())
    });
    match found.as_slice() {
        [start] if start.line > 0 && start.column > 0 => {
            Some((start.line as usize, start.column as usize))
        }
        _ => None,
    }
}

/// Whether the statement at `line`/`col` starts a word the message names.
fn mentions_word_at(sql: &str, line: usize, col: usize, message: &str) -> bool {
    let Some(text) = sql.lines().nth(line.saturating_sub(1)) else {
        return false;
    };
    let word: String = text
        .chars()
        .skip(col.saturating_sub(1))
        .skip_while(|c| matches!(c, '`' | '"'))
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    !word.is_empty() && message.to_lowercase().contains(&word.to_lowercase())
}

/// The message without a prefix said twice in a row ("Parquet error: Parquet error: ..."),
/// with paths under the warehouse whole (object stores print them without the leading `/`),
/// and without the engine's "did you mean" when it names something unlike the name typed.
pub(super) fn tidy(message: &str, warehouse: &Path) -> String {
    let mut parts: Vec<&str> = vec![];
    for part in message.split(": ") {
        if parts.last() != Some(&part) {
            parts.push(part);
        }
    }
    let mut text = parts.join(": ");
    if let Ok(root) = std::path::absolute(warehouse) {
        let root = root.display().to_string();
        let root = root.trim_end_matches('/');
        if let Some(relative) = root.strip_prefix('/').filter(|r| !r.is_empty()) {
            let mut fixed = String::with_capacity(text.len());
            let mut rest = text.as_str();
            while let Some(i) = rest.find(relative) {
                let before = rest[..i].chars().next_back();
                let after = rest[i + relative.len()..].chars().next();
                // Only a whole path: at a word's start, and ending where a path part ends.
                let whole = before.is_none_or(|c| c.is_whitespace() || "'\"`(".contains(c))
                    && after.is_none_or(|c| c == '/' || c.is_whitespace() || "'\"`):,".contains(c));
                fixed.push_str(&rest[..i]);
                if whole {
                    fixed.push('/');
                }
                fixed.push_str(relative);
                rest = &rest[i + relative.len()..];
            }
            fixed.push_str(rest);
            text = fixed;
        }
    }
    far_suggestions_dropped(&text)
}

/// "Invalid function 'foo'.\nDid you mean 'log'?" says nothing useful: the suggestion stays
/// only when it is a near miss of the name typed.
fn far_suggestions_dropped(text: &str) -> String {
    let (Some((_, name)), Some((hint, guess))) = (
        quoted_after(text, "Invalid function '"),
        quoted_after(text, "Did you mean '"),
    ) else {
        return text.to_string();
    };
    if is_near_miss(name, guess) {
        return text.to_string();
    }
    // Past the guess and its closing quote (ASCII, so a char boundary).
    let end = hint + "Did you mean '".len() + guess.len() + 1;
    format!(
        "{}{}",
        text[..hint].trim_end(),
        text[end..].trim_start_matches('?')
    )
}

/// Where `lead` starts in `text`, and the text quoted after it (up to the next `'`).
fn quoted_after<'a>(text: &'a str, lead: &str) -> Option<(usize, &'a str)> {
    let start = text.find(lead)?;
    let inner = &text[start + lead.len()..];
    Some((start, &inner[..inner.find('\'')?]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: usize, col: usize) -> Pos {
        Pos { line, col }
    }

    #[test]
    fn repeated_prefixes_and_relative_paths_are_tidied() {
        let wh = Path::new("/tmp/wh");
        assert_eq!(
            tidy(
                "Parquet error: Parquet error: bad file tmp/wh/main/t/x.parquet",
                wh
            ),
            "Parquet error: bad file /tmp/wh/main/t/x.parquet"
        );
        assert_eq!(tidy("at /tmp/wh/main", wh), "at /tmp/wh/main");
        // Only whole paths: a name that merely contains the root's text is left alone.
        assert_eq!(
            tidy("No field named xtmp/wh_2", wh),
            "No field named xtmp/wh_2"
        );
        assert_eq!(
            tidy("Invalid function 'foo'.\nDid you mean 'log'?", wh),
            "Invalid function 'foo'."
        );
        assert_eq!(
            tidy("Invalid function 'uper'.\nDid you mean 'upper'?", wh),
            "Invalid function 'uper'.\nDid you mean 'upper'?"
        );
    }

    #[test]
    fn a_type_mismatch_points_at_its_only_operator() {
        let e =
            Error::Other("Cannot coerce arithmetic expression Int64 + Utf8 to valid types".into());
        let got = describe(
            &e,
            at(1, 1),
            "<command 1>",
            Some("SELECT id,\n  1 + 'a' FROM t"),
            Path::new("/wh"),
        );
        assert_eq!(
            got,
            "<command 1>:2:3: error: Cannot coerce arithmetic expression Int64 + Utf8 to valid types\nLINE 2:   1 + 'a' FROM t\n          ^\n"
        );
        // Two candidates: nothing is pointed at.
        let got = describe(
            &e,
            at(1, 1),
            "<command 1>",
            Some("SELECT 1 + 'a', 2 + 3"),
            Path::new("/wh"),
        );
        assert!(!got.contains("LINE"), "{got}");
    }

    #[test]
    fn errors_after_parsing_point_at_the_name() {
        let e = Error::At {
            error: Box::new(Error::NotFound("No field named idd.".into())),
            line: 2,
            col: 3,
        };
        let sql = "SELECT *\n  idd > 1";
        let got = describe(&e, at(4, 1), "job.sql", Some(sql), Path::new("/wh"));
        assert_eq!(
            got,
            "job.sql:5:3: error: No field named idd.\nLINE 5:   idd > 1\n          ^\n"
        );
        // A position that does not fall on the name is not shown.
        let got = describe(
            &e,
            at(4, 1),
            "job.sql",
            Some("SELECT x\n  y"),
            Path::new("/wh"),
        );
        assert_eq!(got, "job.sql:4:1: error: No field named idd.\n");
    }
}
