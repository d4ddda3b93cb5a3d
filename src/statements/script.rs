//! SQL scripting: runs a compound statement (`parser::script`) in the session. Variables
//! a block declares are the block's: they hide a session variable of the same name until the
//! block ends, then are dropped (and the hidden one is back). Handlers catch the errors of the
//! block that declares them (and of the blocks inside it): CONTINUE goes on with the next
//! statement, EXIT leaves the block. An error no handler takes ends the script, pointing at
//! the statement that raised it. `EXECUTE IMMEDIATE` runs a statement from a string, its
//! `?` and `:name` parameters bound as values, never pasted into the text.

use std::collections::HashMap;

use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{Expr, Value, visit_expressions_mut};

use crate::engine::types::scalar_to_sql;
use crate::engine::{LoopRow, Output, Session};
use crate::error::{Error, Result};
use crate::parser::{Compound, Condition, Item, ItemKind, Statement};

/// How a statement ended, besides an error.
enum Flow {
    Next,
    Leave(String),
    Iterate(String),
    /// An EXIT handler of the block with this id ran: leave that block.
    Exit(usize),
    /// A handler of the block with this id failed: leave that block, which then raises the
    /// error to the blocks around it.
    Fail(usize, Box<Error>),
}

/// A handler a block declared.
#[derive(Clone)]
struct Handler {
    exit: bool,
    conditions: Vec<Condition>,
    action: Item,
}

/// One running block: its declared conditions and handlers.
struct Scope {
    id: usize,
    conditions: HashMap<String, Option<String>>,
    handlers: Vec<Handler>,
}

/// What the running script knows besides the session: the blocks running (innermost
/// last), errors being handled (for RESIGNAL) and the last result.
#[derive(Default)]
struct Script {
    scopes: Vec<Scope>,
    next_id: usize,
    /// Scopes whose handlers are out of reach: those of a handler running, and the blocks
    /// inside it (an error in a handler goes to the handlers around its block).
    hidden: Vec<std::ops::Range<usize>>,
    handling: Vec<Error>,
    last: Option<Output>,
}

/// Run a compound statement; its result is the last result a query in it gave.
pub async fn execute(session: &mut Session, compound: Compound) -> Result<Output> {
    let mut script = Script::default();
    match block(session, &mut script, &compound).await? {
        Flow::Next | Flow::Exit(_) => Ok(script.last.unwrap_or_else(Output::empty)),
        Flow::Fail(_, e) => Err(*e),
        Flow::Leave(l) | Flow::Iterate(l) => Err(Error::Invalid(format!(
            "LEAVE or ITERATE {l}: no enclosing block or loop has that label"
        ))),
    }
}

/// Run a block: its declarations, then its statements under its handlers.
fn block<'a>(
    session: &'a mut Session,
    script: &'a mut Script,
    compound: &'a Compound,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Flow>> + Send + 'a>> {
    Box::pin(async move {
        let id = script.next_id;
        script.next_id += 1;
        script.scopes.push(Scope {
            id,
            conditions: HashMap::new(),
            handlers: vec![],
        });
        let mut locals: Vec<Local> = vec![];
        let mut flow = Ok(Flow::Next);
        for item in &compound.items {
            let result = match &item.kind {
                ItemKind::Condition { name, sqlstate } => {
                    let scope = script.scopes.last_mut().expect("pushed above");
                    scope.conditions.insert(name.clone(), sqlstate.clone());
                    Ok(Flow::Next)
                }
                ItemKind::Handler {
                    exit,
                    conditions,
                    action,
                } => {
                    let scope = script.scopes.last_mut().expect("pushed above");
                    scope.handlers.push(Handler {
                        exit: *exit,
                        conditions: conditions.clone(),
                        action: action.as_ref().clone(),
                    });
                    Ok(Flow::Next)
                }
                ItemKind::Declare(sql) => declare(session, sql, &mut locals)
                    .await
                    .map(|_| Flow::Next)
                    .map_err(|e| at(e, item)),
                _ => run(session, script, item).await,
            };
            let result = match result {
                Err(e) => handle(session, script, e).await,
                Ok(f) => Ok(Some(f)),
            };
            match result {
                Ok(None | Some(Flow::Next)) => continue,
                Ok(Some(Flow::Leave(l))) if compound.label.as_deref() == Some(l.as_str()) => break,
                Ok(Some(Flow::Exit(x))) if x == id => break,
                Ok(Some(Flow::Fail(x, e))) if x == id => {
                    flow = Err(*e);
                    break;
                }
                Ok(Some(other)) => {
                    flow = Ok(other);
                    break;
                }
                Err(e) => {
                    flow = Err(e);
                    break;
                }
            }
        }
        for (name, hidden, hidden_local) in locals.into_iter().rev() {
            session.vars_mut().drop_var(&name);
            if let Some(v) = hidden {
                session.vars_mut().declare(&name, v);
                if hidden_local {
                    session.vars_mut().mark_local(&name);
                }
            }
        }
        script.scopes.pop();
        flow
    })
}

/// An error of a statement: the handler in reach that takes it (the innermost block's
/// first; there a handler for the error's condition or SQLSTATE before one for SQLEXCEPTION)
/// runs, then the script goes on with the next statement (CONTINUE: `Ok(None)`) or leaves
/// the handler's block (EXIT). No handler: the error.
async fn handle(session: &mut Session, script: &mut Script, e: Error) -> Result<Option<Flow>> {
    let reachable = |k: usize| !script.hidden.iter().any(|r| r.contains(&k));
    let mut chosen = None;
    'scopes: for k in (0..script.scopes.len()).rev().filter(|&k| reachable(k)) {
        for specific in [true, false] {
            for h in &script.scopes[k].handlers {
                let takes = h.conditions.iter().any(|c| {
                    (specific != matches!(c, Condition::SqlException)) && matches(script, c, &e)
                });
                if takes {
                    chosen = Some((k, h.clone()));
                    break 'scopes;
                }
            }
        }
    }
    let Some((k, handler)) = chosen else {
        return Err(e);
    };
    let id = script.scopes[k].id;
    // While the handler runs, its block's handlers and those of the blocks inside it are out
    // of reach (blocks the handler itself opens are not).
    let range = k..script.scopes.len();
    script.hidden.push(range.clone());
    script.handling.push(e);
    let done = run(session, script, &handler.action).await;
    script.handling.pop();
    if let Some(i) = script.hidden.iter().rposition(|r| *r == range) {
        script.hidden.remove(i);
    }
    let done = match done {
        Ok(flow) => flow,
        // An error in a handler (RESIGNAL among them) leaves the handler's block, which
        // raises it to the blocks around it.
        Err(e) => return Ok(Some(Flow::Fail(id, Box::new(e)))),
    };
    match done {
        Flow::Next if handler.exit => Ok(Some(Flow::Exit(id))),
        Flow::Next => Ok(None),
        other => Ok(Some(other)),
    }
}

/// A variable a block declared: its name, the variable of that name it hides, and whether
/// that one was an outer block's own.
type Local = (String, Option<crate::engine::Variable>, bool);

/// A variable of the block: it hides a session variable of its name until the block ends.
async fn declare(session: &mut Session, sql: &str, locals: &mut Vec<Local>) -> Result<()> {
    let Statement::Declare {
        name,
        data_type,
        default,
        ..
    } = session.parse(sql)?
    else {
        return Err(Error::Invalid(format!("not a variable declaration: {sql}")));
    };
    if locals.iter().any(|(n, _, _)| n.eq_ignore_ascii_case(&name)) {
        return Err(Error::class(
            "VARIABLE_ALREADY_EXISTS",
            format!("the block declares variable {name} twice"),
        ));
    }
    let hidden = session.vars().get(&name).cloned();
    let hidden_local = session.vars().is_local(&name);
    super::variables::declare(session, true, &name, data_type.as_ref(), default).await?;
    session.vars_mut().mark_local(&name);
    locals.push((name.to_lowercase(), hidden, hidden_local));
    Ok(())
}

/// Run the statements of a branch or loop body in order.
fn items<'a>(
    session: &'a mut Session,
    script: &'a mut Script,
    items: &'a [Item],
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Flow>> + Send + 'a>> {
    Box::pin(async move {
        for item in items {
            let flow = match run(session, script, item).await {
                Ok(flow) => flow,
                // The handler in reach takes it here: CONTINUE goes on with the next one.
                Err(e) => match handle(session, script, e).await? {
                    None => continue,
                    Some(flow) => flow,
                },
            };
            match flow {
                Flow::Next => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Next)
    })
}

/// One pass of the body of the loop labelled `label` (the `n`th): None to run it again,
/// `Some(flow)` to end the loop with `flow` (`Next` when it was left by LEAVE).
async fn pass(
    session: &mut Session,
    script: &mut Script,
    label: &Option<String>,
    body: &[Item],
    item: &Item,
    n: &mut u64,
) -> Result<Option<Flow>> {
    *n = count(*n, item)?;
    let flow = items(session, script, body).await?;
    let ours = |l: &str| label.as_deref() == Some(l);
    Ok(match flow {
        Flow::Next => None,
        Flow::Iterate(l) if ours(&l) => None,
        Flow::Leave(l) if ours(&l) => Some(Flow::Next),
        other => Some(other),
    })
}

/// Loops stop after this many iterations of one loop statement (a runaway `LOOP` without
/// LEAVE), with an error that says so.
const MAX_ITERATIONS: u64 = 10_000_000;

/// Run one statement.
fn run<'a>(
    session: &'a mut Session,
    script: &'a mut Script,
    item: &'a Item,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Flow>> + Send + 'a>> {
    Box::pin(async move {
        match &item.kind {
            ItemKind::Sql(sql) => {
                let stmt = session.parse(sql).map_err(|e| at(e, item))?;
                let query = matches!(&stmt, Statement::Sql(s)
                    if matches!(s.as_ref(), datafusion::sql::sqlparser::ast::Statement::Query(_)));
                let out = Box::pin(super::execute(session, stmt))
                    .await
                    .map_err(|e| at(e, item))?;
                if query {
                    script.last = Some(out);
                }
                Ok(Flow::Next)
            }
            ItemKind::Block(b) => block(session, script, b).await,
            ItemKind::Declare(_) | ItemKind::Condition { .. } | ItemKind::Handler { .. } => {
                Err(at(
                    Error::Invalid(
                        "DECLARE goes at the start of a BEGIN ... END block, before its statements"
                            .into(),
                    ),
                    item,
                ))
            }
            ItemKind::If {
                branches,
                otherwise,
            } => {
                for (condition, body) in branches {
                    if truth(session, condition, item).await? {
                        return items(session, script, body).await;
                    }
                }
                match otherwise {
                    Some(body) => items(session, script, body).await,
                    None => Ok(Flow::Next),
                }
            }
            ItemKind::Case {
                operand,
                whens,
                otherwise,
            } => {
                // The operand is evaluated once, then compared as a value.
                let operand = match operand {
                    Some(o) => {
                        let e = crate::parser::user_expr_text(o).map_err(|e| at(e, item))?;
                        let v = session.eval_scalar(&e).await.map_err(|e| at(e, item))?;
                        Some(scalar_to_sql(&v))
                    }
                    None => None,
                };
                for (value, body) in whens {
                    let value_expr =
                        crate::parser::user_expr_text(value).map_err(|e| at(e, item))?;
                    let test = match &operand {
                        Some(o) => datafusion::sql::sqlparser::ast::Expr::BinaryOp {
                            left: Box::new(datafusion::sql::sqlparser::ast::Expr::Nested(
                                Box::new(o.clone()),
                            )),
                            op: datafusion::sql::sqlparser::ast::BinaryOperator::Eq,
                            right: Box::new(datafusion::sql::sqlparser::ast::Expr::Nested(
                                Box::new(value_expr),
                            )),
                        },
                        None => value_expr,
                    };
                    if truth_of(session, &test, value, item).await? {
                        return items(session, script, body).await;
                    }
                }
                match otherwise {
                    Some(body) => items(session, script, body).await,
                    None => Err(at(
                        Error::class(
                            "CASE_NOT_FOUND",
                            "no WHEN of the CASE statement matched and it has no ELSE",
                        ),
                        item,
                    )),
                }
            }
            ItemKind::While {
                label,
                condition,
                body,
            } => {
                let mut n = 0u64;
                while truth(session, condition, item).await? {
                    if let Some(flow) = pass(session, script, label, body, item, &mut n).await? {
                        return Ok(flow);
                    }
                }
                Ok(Flow::Next)
            }
            ItemKind::Repeat { label, body, until } => {
                let mut n = 0u64;
                loop {
                    if let Some(flow) = pass(session, script, label, body, item, &mut n).await? {
                        return Ok(flow);
                    }
                    if truth(session, until, item).await? {
                        return Ok(Flow::Next);
                    }
                }
            }
            ItemKind::Loop { label, body } => {
                let mut n = 0u64;
                loop {
                    if let Some(flow) = pass(session, script, label, body, item, &mut n).await? {
                        return Ok(flow);
                    }
                }
            }
            ItemKind::For {
                label,
                var,
                query,
                body,
            } => {
                // Parsed by the session: IDENTIFIER() resolves with the variables of now.
                let q = match session.parse(query).map_err(|e| at(e, item))? {
                    Statement::Sql(s) => match *s {
                        datafusion::sql::sqlparser::ast::Statement::Query(q) => *q,
                        _ => {
                            return Err(at(
                                Error::Invalid("FOR ... AS takes a query".into()),
                                item,
                            ));
                        }
                    },
                    _ => return Err(at(Error::Invalid("FOR ... AS takes a query".into()), item)),
                };
                let (df, _bound) = super::query::query_dataframe(session, q)
                    .await
                    .map_err(|e| at(e, item))?;
                let batches = df.collect().await.map_err(|e| at(e.into(), item))?;
                let mut n = 0u64;
                for row in super::for_each::rows_of(&batches)? {
                    session.vars_mut().push_row(LoopRow {
                        name: var.clone(),
                        columns: row,
                    });
                    let done = pass(session, script, label, body, item, &mut n).await;
                    session.vars_mut().pop_row();
                    if let Some(flow) = done? {
                        return Ok(flow);
                    }
                }
                Ok(Flow::Next)
            }
            ItemKind::Leave(l) => Ok(Flow::Leave(l.clone())),
            ItemKind::Iterate(l) => Ok(Flow::Iterate(l.clone())),
            ItemKind::Signal {
                condition,
                sqlstate,
                message,
            } => {
                let state = match (condition, sqlstate) {
                    (Some(c), _) => match declared(script, c) {
                        Some(s) => s.unwrap_or_else(|| "45000".into()),
                        None => {
                            return Err(at(
                                Error::Invalid(format!(
                                    "SIGNAL {c}: no block declares the condition {c} (DECLARE {c} CONDITION FOR SQLSTATE '45000')"
                                )),
                                item,
                            ));
                        }
                    },
                    (None, Some(s)) => s.clone(),
                    (None, None) => "45000".into(),
                };
                let text = match message {
                    Some(m) => text_of(session, m, item).await?,
                    None => format!("unhandled user-defined exception (SQLSTATE {state})"),
                };
                Err(at(
                    Error::Signal {
                        condition: condition.clone(),
                        sqlstate: state,
                        message: text,
                    },
                    item,
                ))
            }
            ItemKind::Resignal { message } => {
                let Some(current) = script.handling.last() else {
                    return Err(at(
                        Error::Invalid(
                            "RESIGNAL outside a handler: there is no error to raise again".into(),
                        ),
                        item,
                    ));
                };
                match message {
                    None => Err(clone_error(current)),
                    Some(m) => {
                        let text = text_of(session, m, item).await?;
                        let (condition, sqlstate) = match current {
                            Error::Signal {
                                condition,
                                sqlstate,
                                ..
                            } => (condition.clone(), sqlstate.clone()),
                            _ => (None, "45000".to_string()),
                        };
                        Err(at(
                            Error::Signal {
                                condition,
                                sqlstate,
                                message: text,
                            },
                            item,
                        ))
                    }
                }
            }
        }
    })
}

fn count(n: u64, item: &Item) -> Result<u64> {
    if n >= MAX_ITERATIONS {
        return Err(at(
            Error::Invalid(format!(
                "the loop ran {MAX_ITERATIONS} times: does it LEAVE? (a loop that should run longer can run in batches)"
            )),
            item,
        ));
    }
    Ok(n + 1)
}

/// A condition of IF, WHILE, REPEAT or CASE: true, or not (NULL is not).
async fn truth(session: &Session, condition: &str, item: &Item) -> Result<bool> {
    let e = crate::parser::user_expr_text(condition).map_err(|e| at(e, item))?;
    truth_of(session, &e, condition, item).await
}

/// [`truth`] of a parsed condition (`condition` as written, for the error).
async fn truth_of(
    session: &Session,
    e: &datafusion::sql::sqlparser::ast::Expr,
    condition: &str,
    item: &Item,
) -> Result<bool> {
    match session.eval_scalar(e).await.map_err(|e| at(e, item))? {
        ScalarValue::Boolean(b) => Ok(b == Some(true)),
        v if v.is_null() => Ok(false),
        other => Err(at(
            Error::Type(format!(
                "the condition {condition} is a {} value, not a BOOLEAN",
                crate::engine::types::type_name(&other.data_type())
            )),
            item,
        )),
    }
}

/// A SIGNAL's message.
async fn text_of(session: &Session, message: &str, item: &Item) -> Result<String> {
    let e = crate::parser::user_expr_text(message).map_err(|e| at(e, item))?;
    Ok(
        match session.eval_scalar(&e).await.map_err(|e| at(e, item))? {
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)) => s,
            other => crate::engine::types::display_exact(&other),
        },
    )
}

/// The SQLSTATE a condition was declared with, innermost block first (`Some(None)`: a
/// condition declared without one).
fn declared(script: &Script, name: &str) -> Option<Option<String>> {
    script
        .scopes
        .iter()
        .rev()
        .find_map(|scope| scope.conditions.get(&name.to_lowercase()).cloned())
}

/// Whether a handler's condition takes the error.
fn matches(script: &Script, condition: &Condition, e: &Error) -> bool {
    if matches!(e, Error::Cancelled) {
        return false;
    }
    match condition {
        // Every error but warnings, "no data" and internal errors, as in Databricks.
        Condition::SqlException => !sqlstate(e).is_some_and(|s| {
            let class = s.get(..2).unwrap_or_default().to_uppercase();
            matches!(class.as_str(), "00" | "01" | "02" | "XX")
        }),
        Condition::NotFound => false,
        Condition::SqlState(s) => sqlstate(e).is_some_and(|x| x.eq_ignore_ascii_case(s)),
        Condition::Named(n) => match (declared(script, n), e.root()) {
            (Some(Some(state)), e) => sqlstate(e).is_some_and(|x| x.eq_ignore_ascii_case(&state)),
            (_, Error::Signal { condition, .. }) => condition.as_deref() == Some(n.as_str()),
            (_, Error::Class { class, .. }) => class.eq_ignore_ascii_case(n),
            (_, other) => message_class(other).is_some_and(|c| c.eq_ignore_ascii_case(n)),
        },
    }
}

/// The SQLSTATE of an error, where tidemark knows it.
fn sqlstate(e: &Error) -> Option<String> {
    match e.root() {
        Error::Signal { sqlstate, .. } => Some(sqlstate.clone()),
        Error::Class { class, .. } => {
            let state = match *class {
                "DIVIDE_BY_ZERO" => "22012",
                "ARITHMETIC_OVERFLOW" => "22003",
                "CAST_INVALID_INPUT" => "22018",
                "DATATYPE_MISMATCH" => "42K09",
                "UNRESOLVED_ROUTINE" => "42883",
                "UNRESOLVED_VARIABLE" => "42883",
                "ROUTINE_ALREADY_EXISTS" | "VARIABLE_ALREADY_EXISTS" => "42723",
                _ => return None,
            };
            Some(state.into())
        }
        other => match message_class(other)?.as_str() {
            "DIVIDE_BY_ZERO" => Some("22012".into()),
            "ARITHMETIC_OVERFLOW" | "NUMERIC_VALUE_OUT_OF_RANGE" => Some("22003".into()),
            _ => None,
        },
    }
}

/// The error class an engine error names in its message (`[DIVIDE_BY_ZERO] ...`, from
/// tidemark's functions), or DataFusion's own division by zero.
fn message_class(e: &Error) -> Option<String> {
    let text = e.to_string();
    if text.contains("Divide by zero") {
        return Some("DIVIDE_BY_ZERO".into());
    }
    let start = text.find('[')? + 1;
    let len = text[start..].find(']')?;
    let class = &text[start..start + len];
    (!class.is_empty() && class.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
        .then(|| class.to_string())
}

/// An error that happened in `item`, pointing at it (or inside it, where the error knows).
fn at(e: Error, item: &Item) -> Error {
    match e.position() {
        Some((l, c)) => {
            let (line, col) = if l == 1 {
                (item.line, item.col + c - 1)
            } else {
                (item.line + l - 1, c)
            };
            match e {
                Error::Parse { message, .. } => Error::parse(message, line, col),
                Error::At { error, .. } => Error::At { error, line, col },
                other => other,
            }
        }
        None => Error::At {
            error: Box::new(e),
            line: item.line,
            col: item.col,
        },
    }
}

/// RESIGNAL raises the handled error again (errors are not `Clone`: its message and kind).
fn clone_error(e: &Error) -> Error {
    match e {
        Error::Signal {
            condition,
            sqlstate,
            message,
        } => Error::Signal {
            condition: condition.clone(),
            sqlstate: sqlstate.clone(),
            message: message.clone(),
        },
        Error::Class { class, message } => Error::class(class, message.clone()),
        Error::At { error, line, col } => Error::At {
            error: Box::new(clone_error(error)),
            line: *line,
            col: *col,
        },
        other => Error::Other(other.to_string()),
    }
}

/// `EXECUTE IMMEDIATE sql [INTO v, ...] [USING e [AS name], ...]`.
pub async fn execute_immediate(
    session: &mut Session,
    sql: Expr,
    into: Vec<String>,
    using: Vec<(Expr, Option<String>)>,
) -> Result<Output> {
    let text = match session.eval_scalar(&sql).await? {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::Utf8View(Some(s))
        | ScalarValue::LargeUtf8(Some(s)) => s,
        other => {
            return Err(Error::Type(format!(
                "EXECUTE IMMEDIATE takes the statement as a STRING, found {other}"
            )));
        }
    };
    let mut positional = vec![];
    let mut named = HashMap::new();
    for (e, name) in using {
        let value = scalar_to_sql(&session.eval_scalar(&e).await?);
        match name {
            Some(n) => {
                named.insert(n.to_lowercase(), value);
            }
            None => positional.push(value),
        }
    }
    let mut stmt = session
        .parse(&text)
        .map_err(|e| e.context("EXECUTE IMMEDIATE"))?;
    if matches!(stmt, Statement::Script(_)) {
        return Err(Error::Invalid(
            "EXECUTE IMMEDIATE runs one statement, not a BEGIN ... END block".into(),
        ));
    }
    let mut used = 0usize;
    let mut error = None;
    if let Statement::Sql(s) = &mut stmt {
        let _ = visit_expressions_mut(s.as_mut(), |e: &mut Expr| {
            if let Expr::Value(v) = e
                && let Value::Placeholder(p) = &v.value
            {
                let value = if p == "?" {
                    used += 1;
                    positional.get(used - 1).cloned()
                } else {
                    named
                        .get(&p.trim_start_matches([':', '$']).to_lowercase())
                        .cloned()
                };
                match value {
                    Some(v) => *e = v,
                    None => {
                        error = Some(Error::class(
                            "UNBOUND_SQL_PARAMETER",
                            format!("EXECUTE IMMEDIATE: parameter {p} has no value in USING"),
                        ));
                        return std::ops::ControlFlow::Break(());
                    }
                }
            }
            std::ops::ControlFlow::Continue(())
        });
    } else if !positional.is_empty() || !named.is_empty() {
        return Err(Error::Invalid(
            "EXECUTE IMMEDIATE ... USING binds the parameters of SQL statements (queries, DML, DDL), not of tidemark's own".into(),
        ));
    }
    if let Some(e) = error {
        return Err(e);
    }
    if into.is_empty() {
        return Box::pin(super::execute(session, stmt)).await;
    }
    let Statement::Sql(s) = stmt else {
        return Err(Error::Invalid(
            "EXECUTE IMMEDIATE ... INTO takes a query".into(),
        ));
    };
    let datafusion::sql::sqlparser::ast::Statement::Query(query) = *s else {
        return Err(Error::Invalid(
            "EXECUTE IMMEDIATE ... INTO takes a query".into(),
        ));
    };
    super::variables::set_from_query(session, into, *query).await
}
