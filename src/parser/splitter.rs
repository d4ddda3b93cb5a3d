//! Splits SQL text into statements and backslash meta-commands.
//!
//! One reader shared by the REPL, `-f FILE` scripts and stdin, so that every
//! input path agrees on where a statement ends and where it started (for error
//! messages). It is a single linear pass over chars that understands quotes,
//! nested comments and scripting block bodies (`BEGIN ... END`,
//! `FOR ... DO ... END FOR`, `IF ... END IF`, `CASE ... END`, ...), so that a `;`
//! inside any of them does not end the statement. It never panics.

/// A piece of input: one SQL statement (without its terminating `;`) or one backslash meta-command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// An SQL statement, trimmed, comments inside kept, without the final `;`.
    Sql(String),
    /// A whole meta-command line such as `\d main.default.t`, trimmed.
    Meta(String),
}

/// Where a piece starts in its input: 1-based line and column (column counted in chars).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    /// 1-based line number (lines separated by `\n`).
    pub line: usize,
    /// 1-based column, counted in chars.
    pub col: usize,
}

/// A piece together with its start position, so errors can point at the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The statement or meta-command.
    pub piece: Piece,
    /// Position of its first non-whitespace, non-comment char.
    pub pos: Pos,
}

/// Result of splitting: complete pieces plus any unfinished trailing text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// Complete pieces, in input order.
    pub pieces: Vec<Located>,
    /// Unfinished trailing text ("" when nothing is pending).
    pub rest: String,
    /// Where `rest` starts (end of input when `rest` is empty).
    pub rest_pos: Pos,
}

/// Split `input`. `rest` holds trailing text that is not complete yet (no terminating `;`, or inside an open quote/comment/block); it is "" (after trimming whitespace and comments-only text) when nothing is pending.
pub fn split(input: &str) -> Split {
    Scanner::new(input).run()
}

/// True when `input` contains at least one complete piece and nothing pending.
pub fn is_complete(input: &str) -> bool {
    let s = split(input);
    !s.pieces.is_empty() && s.rest.is_empty()
}

/// Kind of an open block; decides which `END <word>` closes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Begin,
    Do,
    If,
    Loop,
    Repeat,
    CaseStmt,
    CaseExpr,
}

/// First word of the statement currently being read in a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lead {
    None,
    For,
    While,
    Declare,
    Other,
}

/// Per-body state of the statement currently being read.
#[derive(Debug, Clone, Copy)]
struct Body {
    /// Nothing significant read yet in this statement (next word is a statement start).
    fresh: bool,
    lead: Lead,
    parens: usize,
}

impl Body {
    fn new(fresh: bool) -> Self {
        Body {
            fresh,
            lead: Lead::None,
            parens: 0,
        }
    }
}

/// An open block and the state of the statement inside it.
#[derive(Debug, Clone, Copy)]
struct Frame {
    kind: Kind,
    body: Body,
}

/// Lazily converts char indices to line/column; requests must be non-decreasing.
struct PosCursor {
    idx: usize,
    line: usize,
    col: usize,
}

impl PosCursor {
    fn at(&mut self, chars: &[char], target: usize) -> Pos {
        let target = target.min(chars.len());
        while self.idx < target {
            if chars[self.idx] == '\n' {
                self.line += 1;
                self.col = 1;
            } else {
                self.col += 1;
            }
            self.idx += 1;
        }
        Pos {
            line: self.line,
            col: self.col,
        }
    }
}

fn is_ws(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The single-pass state machine behind [`split`].
struct Scanner {
    chars: Vec<char>,
    i: usize,
    cursor: PosCursor,
    pieces: Vec<Located>,
    /// Start index and position of the statement being read at top level.
    stmt: Option<(usize, Pos)>,
    /// An unterminated block comment at a statement boundary.
    open_comment: Option<(usize, Pos)>,
    base: Body,
    stack: Vec<Frame>,
}

impl Scanner {
    fn new(input: &str) -> Self {
        Scanner {
            chars: input.chars().collect(),
            i: 0,
            cursor: PosCursor {
                idx: 0,
                line: 1,
                col: 1,
            },
            pieces: Vec::new(),
            stmt: None,
            open_comment: None,
            base: Body::new(true),
            stack: Vec::new(),
        }
    }

    fn peek(&self, j: usize) -> Option<char> {
        self.chars.get(j).copied()
    }

    fn body(&mut self) -> &mut Body {
        match self.stack.last_mut() {
            Some(f) => &mut f.body,
            None => &mut self.base,
        }
    }

    fn run(mut self) -> Split {
        let n = self.chars.len();
        while self.i < n {
            let i = self.i;
            let c = self.chars[i];
            let next = self.peek(i + 1);
            if is_ws(c) {
                self.i += 1;
            } else if c == '-' && next == Some('-') {
                self.i = self.skip_line_comment(i);
            } else if c == '/' && next == Some('*') {
                let (end, closed) = self.skip_block_comment(i);
                if !closed && self.stmt.is_none() && self.stack.is_empty() {
                    let pos = self.cursor.at(&self.chars, i);
                    self.open_comment = Some((i, pos));
                }
                self.i = end;
            } else if c == '\\' && self.stmt.is_none() && self.stack.is_empty() {
                self.meta(i);
            } else if c == ';' {
                self.semicolon(i);
                self.i += 1;
            } else if c == '\'' || c == '"' || c == '`' {
                self.significant(i);
                let b = self.body();
                if b.fresh {
                    b.lead = Lead::Other;
                }
                b.fresh = false;
                self.i = self.skip_quote(i, false);
            } else if is_word_char(c) {
                self.significant(i);
                self.word(i);
            } else {
                self.significant(i);
                let b = self.body();
                if b.fresh {
                    b.lead = Lead::Other;
                }
                b.fresh = false;
                match c {
                    '(' => b.parens += 1,
                    ')' => b.parens = b.parens.saturating_sub(1),
                    _ => {}
                }
                self.i += 1;
            }
        }
        self.finish()
    }

    /// Records the start of a top-level statement at its first significant char.
    fn significant(&mut self, i: usize) {
        if self.stmt.is_none() {
            let pos = self.cursor.at(&self.chars, i);
            self.stmt = Some((i, pos));
            self.open_comment = None;
        }
    }

    fn finish(mut self) -> Split {
        let n = self.chars.len();
        let start = self.stmt.or(self.open_comment);
        let (rest, rest_pos) = match start {
            Some((s, pos)) => (
                self.chars[s..]
                    .iter()
                    .collect::<String>()
                    .trim()
                    .to_string(),
                pos,
            ),
            None => (String::new(), self.cursor.at(&self.chars, n)),
        };
        Split {
            pieces: self.pieces,
            rest,
            rest_pos,
        }
    }

    /// Returns the index of the `\n` ending a `--` comment (or end of input).
    fn skip_line_comment(&self, i: usize) -> usize {
        let mut j = i;
        while j < self.chars.len() && self.chars[j] != '\n' {
            j += 1;
        }
        j
    }

    /// Skips a (nested) block comment; returns the end index and whether it was closed.
    fn skip_block_comment(&self, i: usize) -> (usize, bool) {
        let mut depth = 0usize;
        let mut j = i;
        while j < self.chars.len() {
            let (c, next) = (self.chars[j], self.peek(j + 1));
            if c == '/' && next == Some('*') {
                depth += 1;
                j += 2;
            } else if c == '*' && next == Some('/') {
                depth -= 1;
                j += 2;
                if depth == 0 {
                    return (j, true);
                }
            } else {
                j += 1;
            }
        }
        (self.chars.len(), false)
    }

    /// Skips a quoted string/identifier starting at `i`; returns the index after it.
    fn skip_quote(&self, i: usize, raw: bool) -> usize {
        let q = self.chars[i];
        let mut j = i + 1;
        while j < self.chars.len() {
            let c = self.chars[j];
            if c == q {
                if self.peek(j + 1) == Some(q) {
                    j += 2;
                    continue;
                }
                return j + 1;
            }
            j += if c == '\\' && q != '`' && !raw { 2 } else { 1 };
        }
        self.chars.len()
    }

    /// Skips whitespace and comments from `j`; returns the next significant index.
    fn skip_trivia(&self, mut j: usize) -> usize {
        while j < self.chars.len() {
            let (c, next) = (self.chars[j], self.peek(j + 1));
            if is_ws(c) {
                j += 1;
            } else if c == '-' && next == Some('-') {
                j = self.skip_line_comment(j);
            } else if c == '/' && next == Some('*') {
                j = self.skip_block_comment(j).0;
            } else {
                break;
            }
        }
        j
    }

    /// End index of the word starting at `i` (`i` itself when there is none).
    fn word_end(&self, i: usize) -> usize {
        let mut j = i;
        while j < self.chars.len() && is_word_char(self.chars[j]) {
            j += 1;
        }
        j
    }

    /// Upper-cased word in `s..e` if it is short enough to be a keyword.
    fn keyword(&self, s: usize, e: usize) -> Option<String> {
        (e > s && e - s <= 12).then(|| {
            self.chars[s..e]
                .iter()
                .collect::<String>()
                .to_ascii_uppercase()
        })
    }

    /// The next significant word after `j` (skipping trivia) and its end index.
    fn next_word(&self, j: usize) -> (Option<String>, usize) {
        let s = self.skip_trivia(j);
        let e = self.word_end(s);
        (self.keyword(s, e), e)
    }

    /// Reads a meta-command line starting at the backslash `i`.
    fn meta(&mut self, i: usize) {
        let end = self.skip_line_comment(i);
        let text: String = self.chars[i..end].iter().collect();
        let pos = self.cursor.at(&self.chars, i);
        self.pieces.push(Located {
            piece: Piece::Meta(text.trim().to_string()),
            pos,
        });
        self.open_comment = None;
        self.i = end;
    }

    fn semicolon(&mut self, i: usize) {
        // A CASE expression cannot contain `;`: close any left open so the
        // statement still ends here.
        while matches!(self.stack.last(), Some(f) if f.kind == Kind::CaseExpr) {
            self.stack.pop();
        }
        if let Some(f) = self.stack.last_mut() {
            f.body = Body::new(true);
            return;
        }
        self.base = Body::new(true);
        if let Some((s, pos)) = self.stmt.take() {
            let text: String = self.chars[s..i].iter().collect();
            let text = text.trim();
            if !text.is_empty() {
                self.pieces.push(Located {
                    piece: Piece::Sql(text.to_string()),
                    pos,
                });
            }
        }
    }

    fn push(&mut self, kind: Kind, fresh: bool) {
        self.stack.push(Frame {
            kind,
            body: Body::new(fresh),
        });
    }

    /// Handles a word starting at `i`: block openers/closers and labels.
    fn word(&mut self, i: usize) {
        let end = self.word_end(i);
        self.i = end;
        // Raw string literal r'...' / R"...": backslashes are not escapes.
        if end == i + 1
            && matches!(self.chars[i], 'r' | 'R')
            && matches!(self.peek(end), Some('\'' | '"'))
        {
            let b = self.body();
            if b.fresh {
                b.lead = Lead::Other;
            }
            b.fresh = false;
            self.i = self.skip_quote(end, true);
            return;
        }
        // `t.end` or `x.case` is a name, not a keyword.
        let kw = if i > 0 && self.chars[i - 1] == '.' {
            None
        } else {
            self.keyword(i, end)
        };
        let kw = kw.as_deref().unwrap_or("");
        let in_block = !self.stack.is_empty();
        let b = *self.body();
        let fresh = b.fresh;
        {
            let body = self.body();
            body.fresh = false;
            if fresh {
                body.lead = match kw {
                    "FOR" => Lead::For,
                    "WHILE" => Lead::While,
                    "DECLARE" => Lead::Declare,
                    _ => Lead::Other,
                };
            }
        }
        // A label (`lbl: LOOP`, colon right after the word) keeps the statement start.
        if fresh
            && !matches!(kw, "BEGIN" | "END")
            && self.peek(end) == Some(':')
            && !matches!(self.peek(end + 1), Some(':' | '='))
        {
            self.i = end + 1;
            *self.body() = Body::new(true);
            return;
        }
        match kw {
            "BEGIN" if fresh || (in_block && b.lead == Lead::Declare && b.parens == 0) => {
                let (next, _) = self.next_word(end);
                let s = self.skip_trivia(end);
                let plain = self.peek(s) == Some(';')
                    || matches!(next.as_deref(), Some("TRANSACTION" | "WORK"));
                if !plain {
                    self.push(Kind::Begin, true);
                }
            }
            "DO" if matches!(b.lead, Lead::For | Lead::While) && b.parens == 0 => {
                self.body().lead = Lead::Other;
                self.push(Kind::Do, true);
            }
            "IF" if fresh => self.push(Kind::If, false),
            "LOOP" if fresh => self.push(Kind::Loop, true),
            "REPEAT" if fresh => self.push(Kind::Repeat, true),
            "CASE" => self.push(
                if fresh {
                    Kind::CaseStmt
                } else {
                    Kind::CaseExpr
                },
                false,
            ),
            "THEN" | "ELSE" => {
                if let Some(f) = self.stack.last_mut()
                    && matches!(f.kind, Kind::If | Kind::CaseStmt)
                {
                    f.body = Body::new(true);
                }
            }
            "END" => self.end(end),
            _ => {}
        }
    }

    /// Closes a block at `END [IF|FOR|WHILE|LOOP|REPEAT|CASE]`.
    fn end(&mut self, end: usize) {
        let (next, next_end) = self.next_word(end);
        let wanted: &[Kind] = match next.as_deref() {
            Some("IF") => &[Kind::If],
            Some("FOR" | "WHILE") => &[Kind::Do],
            Some("LOOP") => &[Kind::Loop],
            Some("REPEAT") => &[Kind::Repeat],
            Some("CASE") => &[Kind::CaseStmt, Kind::CaseExpr],
            _ => &[],
        };
        if let Some(p) = self.stack.iter().rposition(|f| wanted.contains(&f.kind)) {
            self.stack.truncate(p);
            self.i = next_end;
        } else {
            self.stack.pop();
        }
    }
}

#[cfg(test)]
mod tests;
