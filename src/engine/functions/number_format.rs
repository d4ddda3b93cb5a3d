//! `to_char(expr, fmt)` (and `to_varchar`) as Databricks picks by the value's type: a DATE or
//! TIMESTAMP formatted with a datetime pattern (as `date_format`), BINARY as `'base64'`,
//! `'hex'` or `'utf-8'`, and anything else as a number with a number format; `to_number(text,
//! fmt)` and `try_to_number(text, fmt)` read one.
//!
//! A format is `[PR-wrapped] [MI | S] [$] digits [. digits] [$] [MI | S | PR]`: `0` and `9` are
//! digits (a run that starts with `0` before the point pads with zeros, else with spaces), `,`
//! or `G` a thousands separator, `.` or `D` the point, `$` the dollar sign, `S` a sign always
//! shown, `MI` a minus shown for a negative number (a space otherwise), `PR` angle brackets
//! around a negative number. Letters are read in either case. The rules are Spark's
//! `ToNumberParser`, which Databricks runs: formatting does not round (a value with more digits
//! than the format has is the format with `#` for each digit), a negative number formatted
//! without `S`, `MI` or `PR` loses its sign, and parsing gives a DECIMAL whose precision and
//! scale are the format's digits.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Decimal128Builder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef};
use datafusion::common::{Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// Digits of a format: `exact` when the run started with `0` before the point (parsing wants
/// exactly that many digits then, formatting pads with zeros).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Piece {
    Digits { n: usize, exact: bool },
    Separator,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A run of digits and thousands separators, left to right.
    Group(Vec<Piece>),
    Point,
    Dollar,
    /// `S`: `+` or `-`.
    Sign,
    /// `MI`: `-` or a space.
    Minus,
    /// `PR`'s `<` (always first) and `>`.
    Open,
    Close,
    Invalid(char),
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Group(_) => "digit sequence".into(),
            Token::Point => ". or D".into(),
            Token::Dollar => "$".into(),
            Token::Sign => "S".into(),
            Token::Minus => "MI".into(),
            Token::Open | Token::Close => "PR".into(),
            Token::Invalid(c) => format!("character '{c}'"),
        }
    }
}

/// Whether a token may stand in one place of a format.
type Accepts = fn(&Token) -> bool;

/// A number format, read and checked.
#[derive(Debug, Clone)]
struct Format {
    text: String,
    tokens: Vec<Token>,
    precision: usize,
    scale: usize,
}

fn digits(pieces: &[Piece]) -> usize {
    pieces
        .iter()
        .map(|p| match p {
            Piece::Digits { n, .. } => *n,
            Piece::Separator => 0,
        })
        .sum()
}

impl Format {
    fn parse(text: &str) -> std::result::Result<Format, String> {
        let invalid = |sub: &str, detail: String| {
            format!("[INVALID_FORMAT.{sub}] The format '{text}' is invalid: {detail}")
        };
        if text.is_empty() {
            return Err(invalid("EMPTY", "it is empty".into()));
        }
        let chars: Vec<char> = text.to_uppercase().chars().collect();
        let mut flat: Vec<Token> = vec![];
        let mut pieces: Vec<Piece> = vec![];
        let mut reached_point = false;
        let mut i = 0;
        let flush = |pieces: &mut Vec<Piece>, flat: &mut Vec<Token>| {
            if !pieces.is_empty() {
                flat.push(Token::Group(std::mem::take(pieces)));
            }
        };
        while i < chars.len() {
            match chars[i] {
                c @ ('0' | '9') => {
                    let start = i;
                    i += 1;
                    while i < chars.len() && matches!(chars[i], '0' | '9') {
                        i += 1;
                    }
                    pieces.push(Piece::Digits {
                        n: i - start,
                        exact: c == '0' && !reached_point,
                    });
                    continue;
                }
                ',' | 'G' => {
                    pieces.push(Piece::Separator);
                    i += 1;
                    continue;
                }
                _ => {}
            }
            flush(&mut pieces, &mut flat);
            let next = chars.get(i + 1).copied();
            match (chars[i], next) {
                ('.' | 'D', _) => {
                    flat.push(Token::Point);
                    reached_point = true;
                }
                ('$', _) => flat.push(Token::Dollar),
                ('S', _) => flat.push(Token::Sign),
                ('M', Some('I')) => {
                    flat.push(Token::Minus);
                    i += 1;
                }
                ('P', Some('R')) => {
                    flat.insert(0, Token::Open);
                    flat.push(Token::Close);
                    i += 1;
                }
                (c, _) => flat.push(Token::Invalid(c)),
            }
            i += 1;
        }
        flush(&mut pieces, &mut flat);
        let tokens = flat;

        let position = |t: &Token| tokens.iter().position(|x| x == t);
        let first_group = tokens.iter().position(|t| matches!(t, Token::Group(_)));
        let Some(first_group) = first_group else {
            return Err(invalid(
                "WRONG_NUM_DIGIT",
                "it has no digits (0 or 9)".into(),
            ));
        };
        let point = position(&Token::Point);
        if let Some(dollar) = position(&Token::Dollar) {
            if first_group < dollar {
                return Err(invalid(
                    "CUR_MUST_BEFORE_DIGIT",
                    "the currency sign must come before the digits".into(),
                ));
            }
            if point.is_some_and(|p| p < dollar) {
                return Err(invalid(
                    "CUR_MUST_BEFORE_DEC",
                    "the currency sign must come before the decimal point".into(),
                ));
            }
        }
        for (k, t) in tokens.iter().enumerate() {
            let Token::Group(pieces) = t else { continue };
            let before_point = point.is_none_or(|p| k < p);
            let has_separator = pieces.contains(&Piece::Separator);
            if before_point {
                let bad = pieces.iter().enumerate().any(|(j, p)| {
                    *p == Piece::Separator
                        && (j == 0
                            || j == pieces.len() - 1
                            || pieces[j - 1] == Piece::Separator
                            || pieces[j + 1] == Piece::Separator)
                });
                if bad {
                    return Err(invalid(
                        "CONT_THOUSANDS_SEPS",
                        "a thousands separator must have digits on both sides".into(),
                    ));
                }
            } else if has_separator {
                return Err(invalid(
                    "THOUSANDS_SEPS_MUST_BEFORE_DEC",
                    "thousands separators may not follow the decimal point".into(),
                ));
            }
        }
        for once in [
            Token::Point,
            Token::Sign,
            Token::Minus,
            Token::Dollar,
            Token::Close,
        ] {
            if tokens.iter().filter(|t| **t == once).count() > 1 {
                return Err(invalid(
                    "WRONG_NUM_TOKEN",
                    format!("'{}' may appear only once", once.describe()),
                ));
            }
        }
        // The order: [<] [MI | S] [$] digits [.] [digits] [$] [MI | S | >].
        let slots: [&[Accepts]; 8] = [
            &[|t| *t == Token::Open],
            &[|t| *t == Token::Minus, |t| *t == Token::Sign],
            &[|t| *t == Token::Dollar],
            &[|t| matches!(t, Token::Group(_))],
            &[|t| *t == Token::Point],
            &[|t| matches!(t, Token::Group(_))],
            &[|t| *t == Token::Dollar],
            &[
                |t| *t == Token::Minus,
                |t| *t == Token::Sign,
                |t| *t == Token::Close,
            ],
        ];
        let mut at = 0;
        for slot in slots {
            if at < tokens.len() && slot.iter().any(|accepts| accepts(&tokens[at])) {
                at += 1;
            }
        }
        if at < tokens.len() {
            return Err(invalid(
                "UNEXPECTED_TOKEN",
                format!("found the unexpected {}", tokens[at].describe()),
            ));
        }
        let precision: usize = tokens
            .iter()
            .map(|t| match t {
                Token::Group(p) => digits(p),
                _ => 0,
            })
            .sum();
        let scale: usize = match point {
            Some(p) => tokens[p..]
                .iter()
                .map(|t| match t {
                    Token::Group(p) => digits(p),
                    _ => 0,
                })
                .sum(),
            None => 0,
        };
        if precision > 38 {
            return Err(invalid(
                "WRONG_NUM_DIGIT",
                format!("it has {precision} digits; a DECIMAL holds at most 38"),
            ));
        }
        Ok(Format {
            text: text.to_string(),
            tokens,
            precision,
            scale,
        })
    }

    /// Digits of the format before and after its point.
    fn digits_around_point(&self) -> (usize, usize) {
        let (mut before, mut after, mut reached) = (0, 0, false);
        for t in &self.tokens {
            match t {
                Token::Group(p) if reached => after += digits(p),
                Token::Group(p) => before += digits(p),
                Token::Point => reached = true,
                _ => {}
            }
        }
        (before, after)
    }

    /// `value` (its digits as plain text, `-` first when negative) formatted.
    fn format(&self, plain: &str) -> String {
        let negative = plain.starts_with('-');
        let (int, frac) = plain.split_once('.').unwrap_or((plain, ""));
        let mut int: String = int.trim_start_matches(['-', '0']).to_string();
        let mut frac: String = frac.trim_end_matches('0').to_string();
        let (n_before, n_after) = self.digits_around_point();
        if int.len() > n_before || frac.len() > n_after {
            int = "#".repeat(n_before);
            frac = "#".repeat(n_after);
        }
        let before: Vec<char> = " "
            .repeat(n_before - int.len())
            .chars()
            .chain(int.chars())
            .collect();
        let after: Vec<char> = frac
            .chars()
            .chain("0".repeat(n_after - frac.len()).chars())
            .collect();
        let (mut bi, mut ai) = (0, 0);
        let mut out: Vec<char> = vec![];
        let mut reached = false;
        for t in &self.tokens {
            match t {
                Token::Group(pieces) => {
                    for piece in pieces {
                        match *piece {
                            Piece::Digits { n, exact } if !reached => {
                                for _ in 0..n {
                                    match before[bi] {
                                        ' ' if exact => out.push('0'),
                                        ' ' => push_space(&mut out),
                                        c => out.push(c),
                                    }
                                    bi += 1;
                                }
                            }
                            Piece::Digits { n, .. } => {
                                for _ in 0..n {
                                    out.push(after[ai]);
                                    ai += 1;
                                }
                            }
                            Piece::Separator => {
                                if out.last().is_some_and(|c| c.is_ascii_digit()) {
                                    out.push(',');
                                } else {
                                    push_space(&mut out);
                                }
                            }
                        }
                    }
                }
                Token::Point => {
                    if let Some(last) = out.last_mut()
                        && *last == ' '
                    {
                        *last = '0';
                    }
                    out.push('.');
                    reached = true;
                }
                Token::Dollar => out.push('$'),
                Token::Sign => {
                    strip_lone_point(&mut out);
                    push_moving_left(&mut out, if negative { '-' } else { '+' });
                }
                Token::Minus => {
                    if negative {
                        strip_lone_point(&mut out);
                        push_moving_left(&mut out, '-');
                    } else {
                        out.push(' ');
                    }
                }
                Token::Open => {
                    if negative {
                        out.push('<');
                    }
                }
                Token::Close => {
                    strip_lone_point(&mut out);
                    if negative {
                        push_moving_left(&mut out, '>');
                    } else {
                        out.push(' ');
                        out.push(' ');
                    }
                }
                Token::Invalid(_) => {}
            }
        }
        strip_lone_point(&mut out);
        let s: String = out.into_iter().collect();
        if s.is_empty() || s == "+" || s == "-" {
            "0".into()
        } else {
            s
        }
    }

    /// `input` read by the format: the unscaled value at the format's scale, None when it does
    /// not match.
    fn parse_input(&self, input: &str) -> Option<i128> {
        let chars: Vec<char> = input.chars().collect();
        let (mut before, mut after) = (String::new(), String::new());
        let (mut reached, mut opened, mut closed, mut negate) = (false, false, false, false);
        let mut i = 0;
        for t in &self.tokens {
            let c = chars.get(i).copied();
            match t {
                Token::Group(pieces) => {
                    // Digit counts of the input's groups, last group first.
                    let mut sizes: Vec<usize> = vec![];
                    let mut current = 0;
                    loop {
                        match chars.get(i) {
                            Some(ch) if ch.is_whitespace() => {}
                            Some(ch) if ch.is_ascii_digit() => {
                                current += 1;
                                if reached {
                                    after.push(*ch);
                                } else {
                                    before.push(*ch);
                                }
                            }
                            Some(',') => {
                                sizes.insert(0, current);
                                current = 0;
                            }
                            _ => {
                                sizes.insert(0, current);
                                break;
                            }
                        }
                        i += 1;
                    }
                    let expected: Vec<(usize, bool)> = pieces
                        .iter()
                        .rev()
                        .filter_map(|p| match *p {
                            Piece::Digits { n, exact } => Some((n, exact)),
                            Piece::Separator => None,
                        })
                        .collect();
                    if sizes.len() > expected.len() {
                        return None;
                    }
                    for (k, (n, exact)) in expected.iter().enumerate() {
                        let actual = sizes.get(k).copied().unwrap_or(0);
                        if (*exact && actual != *n) || actual > *n {
                            return None;
                        }
                    }
                }
                Token::Point => {
                    if c == Some('.') {
                        reached = true;
                        i += 1;
                    }
                }
                Token::Dollar => match c {
                    Some('$') => i += 1,
                    Some(_) => return None,
                    None => {}
                },
                Token::Sign => match c {
                    Some('+') => i += 1,
                    Some('-') => {
                        negate = !negate;
                        i += 1;
                    }
                    _ => {}
                },
                Token::Minus => {
                    if c == Some('-') {
                        negate = !negate;
                        i += 1;
                    }
                }
                Token::Open => {
                    if c == Some('<') {
                        if opened {
                            return None;
                        }
                        opened = true;
                        i += 1;
                    }
                }
                Token::Close => {
                    if c == Some('>') {
                        if !opened {
                            return None;
                        }
                        closed = true;
                        negate = !negate;
                        i += 1;
                    }
                }
                Token::Invalid(_) => return None,
            }
        }
        if i < chars.len() || opened != closed || (before.is_empty() && after.is_empty()) {
            return None;
        }
        while after.len() < self.scale {
            after.push('0');
        }
        let digits = format!("{before}{after}");
        let v: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        Some(if negate { -v } else { v })
    }
}

/// A space, moved left past a sign or `<` just written (the sign stays next to the digits).
fn push_space(out: &mut Vec<char>) {
    out.push(' ');
    let mut i = out.len() - 1;
    while i >= 1 && matches!(out[i - 1], '+' | '-' | '<') && out[i] == ' ' {
        out.swap(i - 1, i);
        i -= 1;
    }
}

/// `c`, moved left past the spaces before it.
fn push_moving_left(out: &mut Vec<char>, c: char) {
    out.push(c);
    let mut i = out.len() - 1;
    while i >= 1 && out[i - 1] == ' ' && out[i] == c {
        out.swap(i - 1, i);
        i -= 1;
    }
}

/// A point with no digit after it becomes a space.
fn strip_lone_point(out: &mut [char]) {
    if let Some(i) = out.iter().position(|c| *c == '.')
        && (i == out.len() - 1 || out[i + 1] == ' ')
    {
        out[i] = ' ';
    }
}

/// The format argument: a constant string.
fn format_of(function: &str, arg: Option<&ScalarValue>) -> Result<Format> {
    match arg {
        Some(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
        ) => Format::parse(s).or_else(|e| plan_err!("{function}: {e}")),
        _ => plan_err!(
            "{function}: the format must be a constant string such as '999.99', not a column or \
             an expression over one"
        ),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Mode {
    /// `to_number(text, fmt)`: a mismatch is an error.
    ToNumber,
    /// `try_to_number(text, fmt)`: a mismatch is NULL.
    TryToNumber,
}

/// `to_number` and `try_to_number`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct ToNumber {
    mode: Mode,
    signature: Signature,
}

impl ToNumber {
    pub(super) fn udfs() -> Vec<datafusion::logical_expr::ScalarUDF> {
        [Mode::ToNumber, Mode::TryToNumber]
            .into_iter()
            .map(|mode| {
                datafusion::logical_expr::ScalarUDF::from(ToNumber {
                    mode,
                    signature: Signature::any(2, Volatility::Immutable),
                })
            })
            .collect()
    }
}

impl ScalarUDFImpl for ToNumber {
    fn name(&self) -> &str {
        match self.mode {
            Mode::ToNumber => "to_number",
            Mode::TryToNumber => "try_to_number",
        }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        datafusion::common::internal_err!("return_field_from_args is used")
    }
    /// A DECIMAL of the format's digits, so the format must be known as the query is planned.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let Some(v) = args.scalar_arguments[1] else {
            return plan_err!(
                "{}: the format must be a string literal such as '999.99' (its digits make the \
                 result's type), not a column or an expression",
                self.name()
            );
        };
        let t = if v.is_null() {
            DataType::Decimal128(38, 18)
        } else {
            let format = format_of(self.name(), Some(v))?;
            DataType::Decimal128(format.precision.max(1) as u8, format.scale as i8)
        };
        let input = args.arg_fields[0].data_type();
        if matches!(
            input,
            DataType::List(_) | DataType::Struct(_) | DataType::Map(_, _) | DataType::Binary
        ) {
            return plan_err!(
                "[DATATYPE_MISMATCH] {} takes a STRING, not {}",
                self.name(),
                crate::engine::types::type_name(input)
            );
        }
        Ok(Arc::new(Field::new(self.name(), t, true)))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let out_type = args.return_field.data_type().clone();
        let format = match &args.args[1] {
            ColumnarValue::Scalar(s) if s.is_null() => {
                return Ok(ColumnarValue::Scalar(ScalarValue::try_from(&out_type)?));
            }
            ColumnarValue::Scalar(s) => format_of(self.name(), Some(s))?,
            ColumnarValue::Array(_) => format_of(self.name(), None)?,
        };
        let input = args.args[0].to_array(n)?;
        // A number is read as its text, as Spark's implicit cast to STRING.
        let text = match input.data_type() {
            DataType::Utf8 => input.clone(),
            _ => crate::engine::functions::spark_cast_array(
                &input,
                &DataType::Utf8,
                &Default::default(),
            )
            .unwrap_or_else(|| datafusion::arrow::compute::cast(&input, &DataType::Utf8))?,
        };
        let text = text.as_string::<i32>();
        let mut b = Decimal128Builder::with_capacity(n).with_data_type(out_type);
        for i in 0..n {
            if text.is_null(i) {
                b.append_null();
                continue;
            }
            match format.parse_input(text.value(i)) {
                Some(v) => b.append_value(v),
                None if self.mode == Mode::TryToNumber => b.append_null(),
                None => {
                    return exec_err!(
                        "[INVALID_FORMAT.MISMATCH_INPUT] to_number: the input '{}' does not \
                         match the format '{}' (try_to_number gives NULL instead)",
                        text.value(i),
                        format.text
                    );
                }
            }
        }
        let out: ArrayRef = Arc::new(b.finish());
        Ok(match &args.args[0] {
            ColumnarValue::Scalar(_) => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
            }
            ColumnarValue::Array(_) => ColumnarValue::Array(out),
        })
    }
}

/// What `to_char` does with a value of a type.
enum Kind {
    Datetime,
    Bytes,
    Number,
}

fn kind(t: &DataType) -> Option<Kind> {
    match t {
        DataType::Date32 | DataType::Date64 | DataType::Timestamp(_, _) => Some(Kind::Datetime),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => Some(Kind::Bytes),
        DataType::Null | DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            Some(Kind::Number)
        }
        t if t.is_numeric() => Some(Kind::Number),
        DataType::Dictionary(_, v) => kind(v),
        _ => None,
    }
}

/// The name of a BINARY format, as Spark reads it (trimmed, any case).
fn bytes_format(fmt: &str) -> Result<&'static str> {
    match fmt.trim().to_lowercase().as_str() {
        "base64" => Ok("base64"),
        "hex" => Ok("hex"),
        "utf-8" => Ok("utf-8"),
        _ => plan_err!(
            "[INVALID_PARAMETER_VALUE.BINARY_FORMAT] to_char: a BINARY value is formatted with \
             'base64', 'hex' or 'utf-8', not '{fmt}'"
        ),
    }
}

/// `to_char(expr, fmt)` and `to_varchar(expr, fmt)`: the engine's own `to_char` takes chrono's
/// patterns (it printed `'yyyy/MM/dd'` as written).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct ToChar {
    signature: Signature,
}

impl ToChar {
    pub(super) fn new() -> Self {
        ToChar {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ToChar {
    fn name(&self) -> &str {
        "to_char"
    }
    fn aliases(&self) -> &[String] {
        static ALIASES: std::sync::LazyLock<Vec<String>> =
            std::sync::LazyLock::new(|| vec!["to_varchar".to_string()]);
        &ALIASES
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }
    /// The format is checked as the query is planned when it is a literal (a constant
    /// expression is checked once computed).
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let input = args.arg_fields[0].data_type();
        let Some(k) = kind(input) else {
            return plan_err!(
                "[DATATYPE_MISMATCH] to_char takes a number, a DATE or TIMESTAMP, or BINARY, \
                 not {}",
                crate::engine::types::type_name(input)
            );
        };
        if let Some(Some(fmt)) = args.scalar_arguments[1].map(text_of) {
            match k {
                Kind::Datetime => {}
                Kind::Bytes => {
                    bytes_format(&fmt)?;
                }
                Kind::Number => {
                    Format::parse(&fmt).or_else(|e| plan_err!("to_char: {e}"))?;
                }
            }
        }
        Ok(Arc::new(Field::new(self.name(), DataType::Utf8, true)))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let fmt = match &args.args[1] {
            ColumnarValue::Scalar(s) if s.is_null() => {
                return Ok(ColumnarValue::Scalar(ScalarValue::Utf8(None)));
            }
            ColumnarValue::Scalar(s) => text_of(s).unwrap_or_default(),
            ColumnarValue::Array(_) => {
                return plan_err!(
                    "to_char: the format must be a constant string such as '999.99' or \
                     'yyyy-MM-dd', not a column or an expression over one"
                );
            }
        };
        let n = args.number_rows;
        let input = args.args[0].to_array(n)?;
        let out: ArrayRef = match kind(input.data_type()) {
            Some(Kind::Datetime) => {
                let formatted = ScalarUDFImpl::invoke_with_args(
                    &super::DateFormat::new(),
                    ScalarFunctionArgs {
                        args: vec![
                            ColumnarValue::Array(input.clone()),
                            ColumnarValue::Scalar(ScalarValue::Utf8(Some(fmt))),
                        ],
                        arg_fields: args.arg_fields.clone(),
                        number_rows: n,
                        return_field: args.return_field.clone(),
                        config_options: args.config_options.clone(),
                    },
                )?;
                formatted.to_array(n)?
            }
            Some(Kind::Bytes) => Arc::new(bytes_to_char(&input, bytes_format(&fmt)?)?),
            Some(Kind::Number) => {
                let format = Format::parse(&fmt).or_else(|e| plan_err!("to_char: {e}"))?;
                Arc::new(to_char(&format, &input)?)
            }
            None => return plan_err!("to_char: a value of this type cannot be formatted"),
        };
        Ok(match &args.args[0] {
            ColumnarValue::Scalar(_) => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
            }
            ColumnarValue::Array(_) => ColumnarValue::Array(out),
        })
    }
}

/// A string scalar's text (None for NULL or another type).
fn text_of(v: &ScalarValue) -> Option<String> {
    match v {
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => s.clone(),
        _ => None,
    }
}

/// BINARY values as text: base64 (no line breaks), upper-case hex, or UTF-8 (a byte sequence
/// that is not UTF-8 replaced by U+FFFD, as Java decodes it).
fn bytes_to_char(input: &ArrayRef, how: &str) -> Result<datafusion::arrow::array::StringArray> {
    let bytes = datafusion::arrow::compute::cast(input, &DataType::Binary)?;
    let bytes = bytes.as_binary::<i32>();
    let mut out = StringBuilder::with_capacity(bytes.len(), bytes.value_data().len() * 2);
    for i in 0..bytes.len() {
        if bytes.is_null(i) {
            out.append_null();
            continue;
        }
        let b = bytes.value(i);
        match how {
            "hex" => out.append_value(b.iter().map(|x| format!("{x:02X}")).collect::<String>()),
            "base64" => out.append_value(base64(b)),
            _ => out.append_value(String::from_utf8_lossy(b)),
        }
    }
    Ok(out.finish())
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.len();
        let v = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= n {
                out.push(ALPHABET[((v >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Each number as its plain digits, then formatted. A DOUBLE is read as DECIMAL(30, 15) and a
/// FLOAT as DECIMAL(14, 7), as Spark casts them for `to_char`.
fn to_char(format: &Format, input: &ArrayRef) -> Result<datafusion::arrow::array::StringArray> {
    let decimal_type = match input.data_type() {
        DataType::Decimal128(p, s) => DataType::Decimal128(*p, *s),
        DataType::Float64 => DataType::Decimal128(30, 15),
        DataType::Float32 | DataType::Float16 => DataType::Decimal128(14, 7),
        DataType::Decimal256(_, _)
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Null => DataType::Decimal128(38, 18),
        _ => DataType::Decimal128(38, 0),
    };
    // A DOUBLE by its shortest text (Java's Double.toString, as Spark's cast reads it: 1234567.89
    // is 1234567.890000000000000, not arrow's 1234567.889999999...); a value too large, NaN or
    // text that is no number is an error (ANSI), not NULL.
    let strict = datafusion::arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    let as_decimal = match crate::engine::functions::spark_cast_array(input, &decimal_type, &strict)
    {
        Some(cast) => cast?,
        None => datafusion::arrow::compute::cast_with_options(input, &decimal_type, &strict)?,
    };
    let decimals = as_decimal.as_primitive::<Decimal128Type>();
    let scale = match decimal_type {
        DataType::Decimal128(_, s) => s as u32,
        _ => 0,
    };
    let mut out = StringBuilder::with_capacity(input.len(), input.len() * format.text.len());
    for i in 0..input.len() {
        if decimals.is_null(i) {
            out.append_null();
            continue;
        }
        out.append_value(format.format(&plain(decimals.value(i), scale)));
    }
    Ok(out.finish())
}

/// An unscaled value at `scale` as plain decimal text (`-12.50`).
fn plain(v: i128, scale: u32) -> String {
    let digits = v.unsigned_abs().to_string();
    let sign = if v < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let scale = scale as usize;
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(v: &str, f: &str) -> String {
        Format::parse(f).unwrap().format(v)
    }

    /// The examples of the Databricks reference for to_char.
    #[test]
    fn formats_as_the_databricks_reference_shows() {
        assert_eq!(fmt("454", "999"), "454");
        assert_eq!(fmt("454", "000.00"), "454.00");
        assert_eq!(fmt("12454", "99,999"), "12,454");
        assert_eq!(fmt("78.12", "$99.99"), "$78.12");
        assert_eq!(fmt("-12454.8", "99,999.9S"), "12,454.8-");
        assert_eq!(fmt("12454.8", "99,999.9S"), "12,454.8+");
    }

    #[test]
    fn pads_signs_and_overflows_as_spark() {
        assert_eq!(fmt("12", "0000"), "0012");
        assert_eq!(fmt("12", "9999"), "  12");
        assert_eq!(fmt("-12", "S9999"), "  -12");
        assert_eq!(fmt("-12", "9999MI"), "  12-");
        assert_eq!(fmt("-12", "9999PR"), "  <12>");
        assert_eq!(fmt("12", "9999PR"), "  12  ");
        assert_eq!(fmt("12345", "999"), "###");
        assert_eq!(fmt("1.5", "9.9"), "1.5");
        assert_eq!(fmt("1.25", "9.9"), "#.#");
        assert_eq!(fmt("0.5", "9.99"), "0.50");
        // Zero's digits are all leading zeros, dropped as Spark drops them.
        assert_eq!(fmt("0", "999"), "   ");
        assert_eq!(fmt("0", "0.00"), "0.00");
    }

    #[test]
    fn parses_as_spark() {
        let p = |s: &str, f: &str| Format::parse(f).unwrap().parse_input(s);
        assert_eq!(p("454", "999"), Some(454));
        assert_eq!(p("454.00", "000.00"), Some(45400));
        assert_eq!(p("12,454", "99,999"), Some(12454));
        assert_eq!(p("$78.12", "$99.99"), Some(7812));
        assert_eq!(p("12,454.8-", "99,999.9S"), Some(-124548));
        assert_eq!(p("<12>", "99PR"), Some(-12));
        assert_eq!(p("45", "000"), None);
        assert_eq!(p("1234", "999"), None);
        assert_eq!(p("", "999"), None);
        assert_eq!(p("12a", "999"), None);
    }

    #[test]
    fn refuses_invalid_formats() {
        for (f, class) in [
            ("", "EMPTY"),
            ("$", "WRONG_NUM_DIGIT"),
            ("9$", "CUR_MUST_BEFORE_DIGIT"),
            ("9,,9", "CONT_THOUSANDS_SEPS"),
            (",99", "CONT_THOUSANDS_SEPS"),
            ("9.9,9", "THOUSANDS_SEPS_MUST_BEFORE_DEC"),
            ("9.9.9", "WRONG_NUM_TOKEN"),
            ("9x", "UNEXPECTED_TOKEN"),
        ] {
            let e = Format::parse(f).unwrap_err();
            assert!(e.contains(class), "{f}: {e}");
        }
    }

    #[test]
    fn base64_pads_as_the_standard_alphabet() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"AB"), "QUI=");
        assert_eq!(base64(b"Spark"), "U3Bhcms=");
        assert_eq!(base64(b"abc"), "YWJj");
    }
}
