//! SQL scripting: Databricks' compound statements (`[label:] BEGIN ... END [label]`) parsed
//! into a tree the interpreter (`statements::script`) walks. Control statements (IF, CASE,
//! WHILE, REPEAT, LOOP, FOR, LEAVE, ITERATE, SIGNAL, RESIGNAL, handlers, conditions) are
//! parsed here; every other statement stays text with its position, checked for syntax now
//! and parsed when it runs (names and `IDENTIFIER()` resolve then, as in loop bodies).

use datafusion::sql::sqlparser::tokenizer::{Location, Token, TokenWithSpan};

use super::{SyntaxOnly, is_word, parse};
use crate::error::{Error, Result};

mod display;

/// A `BEGIN ... END` block.
#[derive(Debug, Clone, PartialEq)]
pub struct Compound {
    pub label: Option<String>,
    pub items: Vec<Item>,
}

/// One statement of a block, with its 1-based position in the whole compound statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub kind: ItemKind,
    pub line: usize,
    pub col: usize,
}

/// What an [`Item`] is. Expressions and queries are kept as text (parsed when they run).
#[derive(Debug, Clone, PartialEq)]
pub enum ItemKind {
    /// Any other statement.
    Sql(String),
    /// `DECLARE [OR REPLACE] [VARIABLE] v [type] [DEFAULT e]`: a variable of the block.
    Declare(String),
    /// `DECLARE name CONDITION [FOR SQLSTATE 'xxxxx']`.
    Condition {
        name: String,
        sqlstate: Option<String>,
    },
    /// `DECLARE {CONTINUE|EXIT} HANDLER FOR conditions action`.
    Handler {
        exit: bool,
        conditions: Vec<Condition>,
        action: Box<Item>,
    },
    Block(Compound),
    If {
        branches: Vec<(String, Vec<Item>)>,
        otherwise: Option<Vec<Item>>,
    },
    Case {
        operand: Option<String>,
        whens: Vec<(String, Vec<Item>)>,
        otherwise: Option<Vec<Item>>,
    },
    While {
        label: Option<String>,
        condition: String,
        body: Vec<Item>,
    },
    Repeat {
        label: Option<String>,
        body: Vec<Item>,
        until: String,
    },
    Loop {
        label: Option<String>,
        body: Vec<Item>,
    },
    For {
        label: Option<String>,
        var: Option<String>,
        query: String,
        body: Vec<Item>,
    },
    Leave(String),
    Iterate(String),
    /// `SIGNAL {condition | SQLSTATE 'xxxxx'} [SET MESSAGE_TEXT = expr]`.
    Signal {
        condition: Option<String>,
        sqlstate: Option<String>,
        message: Option<String>,
    },
    /// `RESIGNAL [SET MESSAGE_TEXT = expr]`, in a handler.
    Resignal {
        message: Option<String>,
    },
}

/// What a handler handles.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    SqlException,
    NotFound,
    SqlState(String),
    /// A declared condition, or an error class (`DIVIDE_BY_ZERO`).
    Named(String),
}

/// Whether the statement opens a compound statement: `BEGIN` (not `BEGIN TRANSACTION`) or
/// `label: BEGIN`.
pub fn is_compound(tokens: &[TokenWithSpan]) -> bool {
    let t: Vec<&Token> = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::EOF))
        .collect();
    match t.as_slice() {
        [b, next, ..] if is_word(b, "BEGIN") => {
            !(is_word(next, "TRANSACTION") || is_word(next, "WORK"))
        }
        [l, Token::Colon, b, ..] => matches!(l, Token::Word(_)) && is_word(b, "BEGIN"),
        _ => false,
    }
}

/// Parse a whole compound statement.
pub fn parse_compound(sql: &str, tokens: Vec<TokenWithSpan>) -> Result<Compound> {
    let toks: Vec<TokenWithSpan> = tokens
        .into_iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
        .collect();
    let mut p = ScriptParser {
        sql,
        line_starts: std::iter::once(0)
            .chain(sql.match_indices('\n').map(|(i, _)| i + 1))
            .collect(),
        toks,
        i: 0,
        labels: vec![],
    };
    let label = p.label();
    let block = p.block(label)?;
    if p.i < p.toks.len() {
        return Err(p.error("expected the end of the statement after END"));
    }
    Ok(block)
}

struct ScriptParser<'a> {
    sql: &'a str,
    line_starts: Vec<usize>,
    toks: Vec<TokenWithSpan>,
    i: usize,
    /// The labels in scope, innermost last, and whether each names a loop.
    labels: Vec<(String, bool)>,
}

impl ScriptParser<'_> {
    fn word_at(&self, i: usize) -> Option<String> {
        match self.toks.get(i).map(|t| &t.token) {
            Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_uppercase()),
            _ => None,
        }
    }

    fn is(&self, i: usize, w: &str) -> bool {
        self.word_at(i).is_some_and(|x| x == w)
    }

    fn at(&self, w: &str) -> bool {
        self.is(self.i, w)
    }

    fn eat(&mut self, w: &str) -> bool {
        if self.at(w) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, w: &str) -> Result<()> {
        if self.eat(w) {
            Ok(())
        } else {
            Err(self.error(&format!("expected {w}")))
        }
    }

    fn location(&self, i: usize) -> Location {
        match self.toks.get(i) {
            Some(t) => t.span.start,
            None => self
                .toks
                .last()
                .map(|t| t.span.end)
                .unwrap_or(Location { line: 1, column: 1 }),
        }
    }

    fn error(&self, message: &str) -> Error {
        let found = match self.toks.get(self.i) {
            Some(t) => t.token.to_string(),
            None => "end of statement".into(),
        };
        let at = self.location(self.i);
        Error::parse(
            format!("syntax error: {message}, found: {found}"),
            at.line as usize,
            at.column as usize,
        )
    }

    fn offset(&self, loc: Location) -> usize {
        let start = self
            .line_starts
            .get(loc.line.saturating_sub(1) as usize)
            .copied()
            .unwrap_or(0);
        let line = &self.sql[start..];
        start
            + line
                .char_indices()
                .nth(loc.column.saturating_sub(1) as usize)
                .map(|(i, _)| i)
                .unwrap_or(line.len())
    }

    /// The text of tokens `a..b`.
    fn text(&self, a: usize, b: usize) -> String {
        if a >= b {
            return String::new();
        }
        let start = self.offset(self.toks[a].span.start);
        let end = self.offset(self.toks[b - 1].span.end);
        self.sql[start..end].trim().to_string()
    }

    /// `label:` before a block or loop.
    fn label(&mut self) -> Option<String> {
        let starts = ["BEGIN", "WHILE", "REPEAT", "LOOP", "FOR"];
        if let Some(Token::Word(w)) = self.toks.get(self.i).map(|t| &t.token)
            && self.toks.get(self.i + 1).map(|t| &t.token) == Some(&Token::Colon)
            && starts.iter().any(|s| self.is(self.i + 2, s))
        {
            let label = w.value.to_lowercase();
            self.i += 2;
            return Some(label);
        }
        None
    }

    /// `END [label]` after a block or loop whose label is `label`.
    fn end_label(&mut self, label: &Option<String>) -> Result<()> {
        if let (Some(l), Some(Token::Word(w))) = (label, self.toks.get(self.i).map(|t| &t.token))
            && w.value.eq_ignore_ascii_case(l)
        {
            self.i += 1;
        }
        Ok(())
    }

    /// `BEGIN items END [label]`, the parser at BEGIN.
    fn block(&mut self, label: Option<String>) -> Result<Compound> {
        self.expect("BEGIN")?;
        let items = self.scoped(&label, false, |p| p.items_in(&["END"], true))?;
        self.expect("END")?;
        self.end_label(&label)?;
        Ok(Compound { label, items })
    }

    /// `parse` with `label` in scope.
    fn scoped<T>(
        &mut self,
        label: &Option<String>,
        is_loop: bool,
        parse: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        if let Some(l) = label {
            self.labels.push((l.clone(), is_loop));
        }
        let out = parse(self);
        if label.is_some() {
            self.labels.pop();
        }
        out
    }

    /// Statements up to one of `ends` (not consumed), each followed by `;`.
    fn items(&mut self, ends: &[&str]) -> Result<Vec<Item>> {
        self.items_in(ends, false)
    }

    /// [`Self::items`]; `block`: the statements of a BEGIN ... END, which may start with
    /// declarations.
    fn items_in(&mut self, ends: &[&str], block: bool) -> Result<Vec<Item>> {
        let mut items: Vec<Item> = vec![];
        loop {
            if self.at("DECLARE")
                && (!block
                    || items.iter().any(|i| {
                        !matches!(
                            i.kind,
                            ItemKind::Declare(_)
                                | ItemKind::Condition { .. }
                                | ItemKind::Handler { .. }
                        )
                    }))
            {
                return Err(self.error(
                    "DECLARE goes at the start of a BEGIN ... END block, before its statements",
                ));
            }
            if self.i >= self.toks.len() {
                return Err(self.error(&format!(
                    "the block is not closed: expected {}",
                    ends.join(" or ")
                )));
            }
            if ends.iter().any(|e| self.at(e)) {
                return Ok(items);
            }
            items.push(self.item()?);
            if self.i >= self.toks.len() {
                return Err(self.error(&format!(
                    "the block is not closed: expected ; and {}",
                    ends.join(" or ")
                )));
            }
            if self.toks.get(self.i).map(|t| &t.token) == Some(&Token::SemiColon) {
                self.i += 1;
            } else if !ends.iter().any(|e| self.at(e)) {
                return Err(self.error("expected ; after the statement"));
            }
        }
    }

    /// One statement of a list.
    fn item(&mut self) -> Result<Item> {
        let at = self.location(self.i);
        let (line, col) = (at.line as usize, at.column as usize);
        let item = |kind| Item { kind, line, col };
        let label = self.label();
        let first = self.word_at(self.i).unwrap_or_default();
        if label.is_some() && !["BEGIN", "WHILE", "REPEAT", "LOOP", "FOR"].contains(&first.as_str())
        {
            return Err(self.error("a label names a block or a loop"));
        }
        let second = self.word_at(self.i + 1).unwrap_or_default();
        Ok(match first.as_str() {
            "BEGIN" if !matches!(second.as_str(), "TRANSACTION" | "WORK") => {
                item(ItemKind::Block(self.block(label)?))
            }
            "DECLARE" if matches!(second.as_str(), "CONTINUE" | "EXIT") => {
                self.i += 2;
                self.expect("HANDLER")?;
                self.expect("FOR")?;
                let mut conditions = vec![self.condition()?];
                while self.toks.get(self.i).map(|t| &t.token) == Some(&Token::Comma) {
                    self.i += 1;
                    conditions.push(self.condition()?);
                }
                let action = Box::new(self.item()?);
                item(ItemKind::Handler {
                    exit: second == "EXIT",
                    conditions,
                    action,
                })
            }
            "DECLARE" if self.is(self.i + 2, "CONDITION") => {
                let name = self.text(self.i + 1, self.i + 2).to_lowercase();
                self.i += 3;
                let mut sqlstate = None;
                if self.eat("FOR") {
                    self.expect("SQLSTATE")?;
                    self.eat("VALUE");
                    sqlstate = Some(self.string()?);
                }
                item(ItemKind::Condition { name, sqlstate })
            }
            "DECLARE" => item(ItemKind::Declare(self.statement()?)),
            "IF" => {
                self.i += 1;
                let mut branches = vec![];
                let condition = self.expression(&["THEN"])?;
                self.expect("THEN")?;
                branches.push((condition, self.items(&["ELSEIF", "ELSE", "END"])?));
                while self.eat("ELSEIF") {
                    let condition = self.expression(&["THEN"])?;
                    self.expect("THEN")?;
                    branches.push((condition, self.items(&["ELSEIF", "ELSE", "END"])?));
                }
                let otherwise = if self.eat("ELSE") {
                    Some(self.items(&["END"])?)
                } else {
                    None
                };
                self.expect("END")?;
                self.expect("IF")?;
                item(ItemKind::If {
                    branches,
                    otherwise,
                })
            }
            "CASE" => {
                self.i += 1;
                let operand = if self.at("WHEN") {
                    None
                } else {
                    Some(self.expression(&["WHEN"])?)
                };
                let mut whens = vec![];
                while self.eat("WHEN") {
                    let value = self.expression(&["THEN"])?;
                    self.expect("THEN")?;
                    whens.push((value, self.items(&["WHEN", "ELSE", "END"])?));
                }
                if whens.is_empty() {
                    return Err(self.error("expected WHEN"));
                }
                let otherwise = if self.eat("ELSE") {
                    Some(self.items(&["END"])?)
                } else {
                    None
                };
                self.expect("END")?;
                self.expect("CASE")?;
                item(ItemKind::Case {
                    operand,
                    whens,
                    otherwise,
                })
            }
            "WHILE" => {
                self.i += 1;
                let condition = self.expression(&["DO"])?;
                self.expect("DO")?;
                let body = self.scoped(&label, true, |p| p.items(&["END"]))?;
                self.expect("END")?;
                self.expect("WHILE")?;
                self.end_label(&label)?;
                item(ItemKind::While {
                    label,
                    condition,
                    body,
                })
            }
            "REPEAT" if self.toks.get(self.i + 1).map(|t| &t.token) != Some(&Token::LParen) => {
                self.i += 1;
                let body = self.scoped(&label, true, |p| p.items(&["UNTIL"]))?;
                self.expect("UNTIL")?;
                let until = self.expression(&["END"])?;
                self.expect("END")?;
                self.expect("REPEAT")?;
                self.end_label(&label)?;
                item(ItemKind::Repeat { label, body, until })
            }
            "LOOP" => {
                self.i += 1;
                let body = self.scoped(&label, true, |p| p.items(&["END"]))?;
                self.expect("END")?;
                self.expect("LOOP")?;
                self.end_label(&label)?;
                item(ItemKind::Loop { label, body })
            }
            "FOR" if second != "EACH" => {
                self.i += 1;
                let var = if self.is(self.i + 1, "AS") {
                    let v = self.text(self.i, self.i + 1).to_lowercase();
                    self.i += 2;
                    Some(v)
                } else {
                    None
                };
                let query = self.expression(&["DO"])?;
                self.expect("DO")?;
                let body = self.scoped(&label, true, |p| p.items(&["END"]))?;
                self.expect("END")?;
                self.expect("FOR")?;
                self.end_label(&label)?;
                item(ItemKind::For {
                    label,
                    var,
                    query,
                    body,
                })
            }
            "LEAVE" | "ITERATE" => {
                self.i += 1;
                let Some(Token::Word(w)) = self.toks.get(self.i).map(|t| &t.token) else {
                    return Err(self.error(&format!("expected the label {first} names")));
                };
                let target = w.value.to_lowercase();
                match self.labels.iter().rev().find(|(l, _)| *l == target) {
                    None => {
                        return Err(self.error(&format!(
                            "{first} {target}: no enclosing block or loop has that label"
                        )));
                    }
                    Some((_, false)) if first == "ITERATE" => {
                        return Err(self.error(&format!(
                            "ITERATE {target}: {target} labels a block; ITERATE goes on with a loop"
                        )));
                    }
                    _ => {}
                }
                self.i += 1;
                item(match first.as_str() {
                    "LEAVE" => ItemKind::Leave(target),
                    _ => ItemKind::Iterate(target),
                })
            }
            "SIGNAL" => {
                self.i += 1;
                let (condition, sqlstate) = if self.eat("SQLSTATE") {
                    self.eat("VALUE");
                    (None, Some(self.string()?))
                } else {
                    let Some(Token::Word(w)) = self.toks.get(self.i).map(|t| &t.token) else {
                        return Err(
                            self.error("expected a condition or SQLSTATE 'xxxxx' after SIGNAL")
                        );
                    };
                    let name = w.value.to_lowercase();
                    self.i += 1;
                    (Some(name), None)
                };
                let message = self.message()?;
                item(ItemKind::Signal {
                    condition,
                    sqlstate,
                    message,
                })
            }
            "RESIGNAL" => {
                self.i += 1;
                let message = self.message()?;
                item(ItemKind::Resignal { message })
            }
            "GET" if second == "DIAGNOSTICS" => {
                return Err(Error::class(
                    "UNSUPPORTED_FEATURE",
                    format!(
                        "GET DIAGNOSTICS is not supported yet (line {line}, column {col}); a handler can RESIGNAL the error"
                    ),
                ));
            }
            _ => item(ItemKind::Sql(self.statement()?)),
        })
    }

    /// One condition a handler handles.
    fn condition(&mut self) -> Result<Condition> {
        if self.eat("SQLEXCEPTION") {
            return Ok(Condition::SqlException);
        }
        if self.is(self.i, "NOT") && self.is(self.i + 1, "FOUND") {
            self.i += 2;
            return Ok(Condition::NotFound);
        }
        if self.eat("SQLSTATE") {
            self.eat("VALUE");
            return Ok(Condition::SqlState(self.string()?));
        }
        match self.toks.get(self.i).map(|t| &t.token) {
            Some(Token::Word(w)) => {
                let name = w.value.to_lowercase();
                self.i += 1;
                Ok(Condition::Named(name))
            }
            _ => Err(self.error("expected SQLEXCEPTION, NOT FOUND, SQLSTATE '...' or a condition")),
        }
    }

    /// `[SET MESSAGE_TEXT = expr]`.
    fn message(&mut self) -> Result<Option<String>> {
        if !self.eat("SET") {
            return Ok(None);
        }
        self.expect("MESSAGE_TEXT")?;
        if self.toks.get(self.i).map(|t| &t.token) != Some(&Token::Eq) {
            return Err(self.error("expected ="));
        }
        self.i += 1;
        Ok(Some(self.expression(&[])?))
    }

    fn string(&mut self) -> Result<String> {
        match self.toks.get(self.i).map(|t| &t.token) {
            Some(Token::SingleQuotedString(s)) => {
                let s = s.clone();
                self.i += 1;
                Ok(s)
            }
            _ => Err(self.error("expected a quoted SQLSTATE")),
        }
    }

    /// Move past an expression or statement: up to one of `stops` at its own level, a `;`,
    /// or an END that closes no CASE of its own.
    fn scan(&mut self, stops: &[&str]) {
        let mut parens = 0usize;
        let mut cases = 0usize;
        while self.i < self.toks.len() {
            match &self.toks[self.i].token {
                Token::LParen => parens += 1,
                Token::RParen => parens = parens.saturating_sub(1),
                Token::SemiColon if parens == 0 && cases == 0 => break,
                t if is_word(t, "CASE") => cases += 1,
                t if parens == 0 && cases == 0 && stops.iter().any(|s| is_word(t, s)) => break,
                t if is_word(t, "END") => {
                    if cases == 0 {
                        break;
                    }
                    cases -= 1;
                }
                _ => {}
            }
            self.i += 1;
        }
    }

    /// An expression (or a query, FOR's head) up to one of `stops`, checked for syntax.
    fn expression(&mut self, stops: &[&str]) -> Result<String> {
        let start = self.i;
        self.scan(stops);
        if self.i == start {
            return Err(self.error("expected an expression"));
        }
        let text = self.text(start, self.i);
        if let Err(e) = super::user_expr_text(&text)
            && super::query_text(&text).is_err()
        {
            return Err(self.relocate(e, start));
        }
        Ok(text)
    }

    /// A plain statement: up to `;` or the END of its list, checked for syntax.
    fn statement(&mut self) -> Result<String> {
        let start = self.i;
        if self.is(start, "FOR") && self.is(start + 1, "EACH") {
            // A FOR EACH loop's own body holds `;`s: up to its END FOR.
            let mut depth = 0usize;
            while self.i < self.toks.len() {
                if self.at("FOR") && self.i > start && !self.is(self.i - 1, "END") {
                    depth += 1;
                }
                if self.at("END") && self.is(self.i + 1, "FOR") {
                    if depth == 0 {
                        self.i += 2;
                        break;
                    }
                    depth -= 1;
                }
                self.i += 1;
            }
        } else {
            self.scan(&[]);
        }
        if self.i == start {
            return Err(self.error("expected a statement"));
        }
        let text = self.text(start, self.i);
        if let Err(e) = parse(&text, &SyntaxOnly) {
            return Err(self.relocate(e, start));
        }
        Ok(text)
    }

    /// An error found in the text starting at token `start`, at its place in the script.
    fn relocate(&self, e: Error, start: usize) -> Error {
        let base = self.location(start);
        let (l, c) = e.position().unwrap_or((1, 1));
        let (line, col) = if l == 1 {
            (base.line as usize, base.column as usize + c - 1)
        } else {
            (base.line as usize + l - 1, c)
        };
        Error::parse(strip_position(&e.to_string()), line, col)
    }
}

/// A message without the "at Line: x, Column: y" sqlparser may add.
fn strip_position(message: &str) -> String {
    match message.find(" at Line: ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}
