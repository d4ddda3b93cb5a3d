//! The one error type of tidemark: every failure a user can meet, told apart by kind so the
//! shell can print what went wrong, where, and how to fix it.

use std::fmt;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every user-facing failure. Messages say what, where and how to fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SQL that does not parse; `line`/`col` are 1-based within the statement text.
    #[error("{message}")]
    Parse {
        message: String,
        line: usize,
        col: usize,
    },
    /// A catalog, schema, table, column or variable that does not exist.
    #[error("{0}")]
    NotFound(String),
    /// An object that already exists where a new one was asked for.
    #[error("{0}")]
    AlreadyExists(String),
    /// A value of the wrong type, or a cast that cannot succeed.
    #[error("{0}")]
    Type(String),
    /// A write lost a race with another writer; running the statement again is safe.
    #[error(
        "{0} (another writer changed the table at the same time; the statement changed nothing and can be run again)"
    )]
    Conflict(String),
    /// A statement that is valid SQL but not allowed here (read-only catalog, ...).
    #[error("{0}")]
    Invalid(String),
    /// A Databricks-style error class such as `VARIABLE_ALREADY_EXISTS`.
    #[error("[{class}] {message}")]
    Class {
        class: &'static str,
        message: String,
    },
    /// Some iterations of a loop failed; `output` holds the per-iteration results.
    #[error("{message}")]
    Iterations {
        message: String,
        output: Box<crate::output::Output>,
    },
    /// The statement was cancelled (Ctrl-C, SIGTERM).
    #[error("cancelled")]
    Cancelled,
    /// Filesystem trouble (full disk, permissions, ...).
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// An error from the query engine.
    #[error("{}", clean_datafusion(.0))]
    DataFusion(Box<datafusion::error::DataFusionError>),
    /// An error from the Delta Lake layer.
    #[error("{}", describe_delta(.0))]
    Delta(Box<deltalake::DeltaTableError>),
    /// Something else, with its context.
    #[error("{0}")]
    Other(String),
    /// `SIGNAL` in a script: a condition the script raised itself.
    #[error("[{}] {message} (SQLSTATE: {sqlstate})", condition.as_deref().map(str::to_uppercase).unwrap_or_else(|| "USER_RAISED_EXCEPTION".into()))]
    Signal {
        condition: Option<String>,
        sqlstate: String,
        message: String,
    },
    /// An error at a 1-based position of the statement (a name the engine does not know, a
    /// value of the wrong type), found after parsing.
    #[error("{error}")]
    At {
        error: Box<Error>,
        line: usize,
        col: usize,
    },
}

impl Error {
    /// A Databricks-style classed error.
    pub fn class(class: &'static str, message: impl Into<String>) -> Self {
        Error::Class {
            class,
            message: message.into(),
        }
    }

    /// A parse error at a 1-based position in the statement.
    pub fn parse(message: impl Into<String>, line: usize, col: usize) -> Self {
        Error::Parse {
            message: message.into(),
            line,
            col,
        }
    }

    /// Position inside the statement text, when the error has one.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            Error::Parse { line, col, .. } | Error::At { line, col, .. } => Some((*line, *col)),
            _ => None,
        }
    }

    /// Prefix the message with context ("cannot insert into main.default.t: ...").
    pub fn context(self, what: impl fmt::Display) -> Self {
        match self {
            Error::Parse { message, line, col } => Error::Parse {
                message: format!("{what}: {message}"),
                line,
                col,
            },
            Error::Class { class, message } => Error::Class {
                class,
                message: format!("{what}: {message}"),
            },
            Error::Conflict(m) => Error::Conflict(format!("{what}: {m}")),
            Error::Cancelled => Error::Cancelled,
            Error::At { error, line, col } => Error::At {
                error: Box::new(error.context(what)),
                line,
                col,
            },
            other => Error::Other(format!("{what}: {other}")),
        }
    }

    /// The error without the position it was found at.
    pub fn root(&self) -> &Error {
        match self {
            Error::At { error, .. } => error.root(),
            other => other,
        }
    }

    /// True when the failure came from a concurrent writer and a retry may succeed.
    pub fn is_conflict(&self) -> bool {
        match self {
            Error::Conflict(_) => true,
            Error::Delta(e) => is_delta_conflict(e),
            Error::At { error, .. } => error.is_conflict(),
            _ => false,
        }
    }
}

impl From<datafusion::error::DataFusionError> for Error {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        use datafusion::error::DataFusionError as D;
        match e {
            D::SQL(p, _) => parser_error(&p),
            D::External(inner) => match inner.downcast::<deltalake::DeltaTableError>() {
                Ok(d) => Error::from(*d),
                Err(inner) => match inner.downcast::<Error>() {
                    Ok(t) => *t,
                    Err(inner) => Error::DataFusion(Box::new(D::External(inner))),
                },
            },
            D::Context(ctx, inner) => Error::from(*inner).context(ctx),
            // The engine's pointer into the statement (with `collect_spans`).
            D::Diagnostic(diagnostic, inner) => match diagnostic.span {
                Some(span) if span.start.line > 0 && span.start.column > 0 => Error::At {
                    error: Box::new(Error::from(*inner)),
                    line: span.start.line as usize,
                    col: span.start.column as usize,
                },
                _ => Error::from(*inner),
            },
            other => {
                // A SQL function's argument of the wrong type: the engine wraps the
                // function's own message in two of its own.
                let text = other.to_string();
                if let Some((_, inner)) = text.split_once("[DATATYPE_MISMATCH] ")
                    && text.contains("user-defined coercion failed")
                {
                    let inner = inner.split(". No function matches").next().unwrap_or(inner);
                    return Error::class("DATATYPE_MISMATCH", inner.to_string());
                }
                Error::DataFusion(Box::new(other))
            }
        }
    }
}

impl From<deltalake::DeltaTableError> for Error {
    fn from(e: deltalake::DeltaTableError) -> Self {
        if is_delta_conflict(&e) {
            return Error::Conflict(describe_delta(&e));
        }
        match e {
            deltalake::DeltaTableError::Arrow { source } => Error::Type(source.to_string()),
            other => Error::Delta(Box::new(other)),
        }
    }
}

impl From<datafusion::arrow::error::ArrowError> for Error {
    fn from(e: datafusion::arrow::error::ArrowError) -> Self {
        Error::Type(e.to_string())
    }
}

impl From<datafusion::sql::sqlparser::parser::ParserError> for Error {
    fn from(e: datafusion::sql::sqlparser::parser::ParserError) -> Self {
        parser_error(&e)
    }
}

/// Turn a sqlparser error into a positioned parse error ("... at Line: 2, Column: 7").
pub fn parser_error(e: &datafusion::sql::sqlparser::parser::ParserError) -> Error {
    use datafusion::sql::sqlparser::parser::ParserError as P;
    let raw = match e {
        P::TokenizerError(m) | P::ParserError(m) => m.clone(),
        P::RecursionLimitExceeded => {
            return Error::parse(
                "statement is nested too deeply (recursion limit exceeded)",
                1,
                1,
            );
        }
    };
    let (message, line, col) = split_location(&raw);
    Error::parse(format!("syntax error: {message}"), line, col)
}

/// Split sqlparser's " at Line: L, Column: C" suffix off a message.
fn split_location(raw: &str) -> (String, usize, usize) {
    if let Some(idx) = raw.rfind(" at Line: ") {
        let tail = &raw[idx + " at Line: ".len()..];
        let mut parts = tail.split(", Column: ");
        let line = parts.next().and_then(|l| l.trim().parse().ok());
        let col = parts.next().and_then(|c| {
            c.trim()
                .trim_end_matches(|ch: char| !ch.is_ascii_digit())
                .parse()
                .ok()
        });
        if let (Some(line), Some(col)) = (line, col) {
            return (raw[..idx].to_string(), line, col);
        }
    }
    (raw.to_string(), 1, 1)
}

/// Whether a Delta error is a lost commit race.
fn is_delta_conflict(e: &deltalake::DeltaTableError) -> bool {
    use deltalake::DeltaTableError as D;
    use deltalake::kernel::transaction::TransactionError as T;
    match e {
        D::Transaction { source } => matches!(
            source,
            T::CommitConflict(_) | T::MaxCommitAttempts(_) | T::VersionAlreadyExists(_)
        ),
        D::VersionAlreadyExists(_) => true,
        _ => false,
    }
}

/// Delta errors, shortened to what a user needs.
fn describe_delta(e: &deltalake::DeltaTableError) -> String {
    e.to_string()
}

/// DataFusion errors without the internal prefixes that say nothing to a user.
fn clean_datafusion(e: &datafusion::error::DataFusionError) -> String {
    let s = e.strip_backtrace();
    for prefix in [
        "Error during planning: ",
        "Execution error: ",
        "External error: ",
        "Schema error: ",
    ] {
        if let Some(rest) = s.strip_prefix(prefix) {
            return rest.to_string();
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_sqlparser_location() {
        let (m, l, c) =
            split_location("Expected: end of statement, found: x at Line: 2, Column: 7");
        assert_eq!(
            (m.as_str(), l, c),
            ("Expected: end of statement, found: x", 2, 7)
        );
    }
}
