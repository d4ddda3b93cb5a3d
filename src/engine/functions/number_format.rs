//! Databricks' number formats: `to_char(number, fmt)` (reached through the rewrite of
//! `to_char`/`to_varchar` when `fmt` is a number format), `to_number(text, fmt)` and
//! `try_to_number(text, fmt)`.
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

/// The engine's name of `to_char` of a number.
pub const TO_CHAR_NUMBER: &str = "__tidemark_to_char_number";

/// Whether `fmt` reads as a number format (what `to_char` formats a number with) rather than a
/// datetime pattern: only digits, separators, the point, `$` and the sign letters, and at least
/// one digit.
pub fn is_number_format(fmt: &str) -> bool {
    let upper = fmt.to_uppercase();
    let rest = upper.replace("MI", "").replace("PR", "");
    rest.chars().any(|c| c == '0' || c == '9')
        && rest
            .chars()
            .all(|c| matches!(c, '0' | '9' | ',' | 'G' | '.' | 'D' | '$' | 'S'))
}

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
            "{function}: the format must be a constant string such as '999.99' (not NULL, a column \
             or an expression over one)"
        ),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Mode {
    /// `to_char(number, fmt)`.
    ToChar,
    /// `to_number(text, fmt)`: a mismatch is an error.
    ToNumber,
    /// `try_to_number(text, fmt)`: a mismatch is NULL.
    TryToNumber,
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct NumberFormat {
    mode: Mode,
    signature: Signature,
}

impl NumberFormat {
    pub(super) fn udfs() -> Vec<datafusion::logical_expr::ScalarUDF> {
        [Mode::ToChar, Mode::ToNumber, Mode::TryToNumber]
            .into_iter()
            .map(|mode| {
                datafusion::logical_expr::ScalarUDF::from(NumberFormat {
                    mode,
                    signature: Signature::any(2, Volatility::Immutable),
                })
            })
            .collect()
    }

    fn function(&self) -> &'static str {
        match self.mode {
            Mode::ToChar => "to_char",
            Mode::ToNumber => "to_number",
            Mode::TryToNumber => "try_to_number",
        }
    }
}

impl ScalarUDFImpl for NumberFormat {
    fn name(&self) -> &str {
        match self.mode {
            Mode::ToChar => TO_CHAR_NUMBER,
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
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let format = format_of(self.function(), args.scalar_arguments[1])?;
        let input = args.arg_fields[0].data_type();
        let t = match self.mode {
            Mode::ToChar => {
                if !(input.is_numeric() || input == &DataType::Null) {
                    return plan_err!(
                        "[DATATYPE_MISMATCH] to_char with the number format '{}' takes a number, \
                         not {}",
                        format.text,
                        crate::engine::types::type_name(input)
                    );
                }
                DataType::Utf8
            }
            Mode::ToNumber | Mode::TryToNumber => {
                if !matches!(
                    input,
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
                ) {
                    return plan_err!(
                        "[DATATYPE_MISMATCH] {} takes a STRING, not {}",
                        self.function(),
                        crate::engine::types::type_name(input)
                    );
                }
                DataType::Decimal128(format.precision.max(1) as u8, format.scale as i8)
            }
        };
        Ok(Arc::new(Field::new(self.name(), t, true)))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let format = match &args.args[1] {
            ColumnarValue::Scalar(s) => format_of(self.function(), Some(s))?,
            ColumnarValue::Array(_) => format_of(self.function(), None)?,
        };
        let n = args.number_rows;
        let input = args.args[0].to_array(n)?;
        let out: ArrayRef = match self.mode {
            Mode::ToChar => Arc::new(to_char(&format, &input)?),
            Mode::ToNumber | Mode::TryToNumber => {
                let text = datafusion::arrow::compute::cast(&input, &DataType::Utf8)?;
                let text = text.as_string::<i32>();
                let mut b = Decimal128Builder::with_capacity(n)
                    .with_precision_and_scale(format.precision.max(1) as u8, format.scale as i8)?;
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
                                "[INVALID_FORMAT.MISMATCH_INPUT] to_number: the input '{}' does \
                                 not match the format '{}' (try_to_number gives NULL instead)",
                                text.value(i),
                                format.text
                            );
                        }
                    }
                }
                Arc::new(b.finish())
            }
        };
        Ok(match &args.args[0] {
            ColumnarValue::Scalar(_) => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
            }
            ColumnarValue::Array(_) => ColumnarValue::Array(out),
        })
    }
}

/// Each number as its plain digits, then formatted. A DOUBLE is read as DECIMAL(30, 15) and a
/// FLOAT as DECIMAL(14, 7), as Spark casts them for `to_char`.
fn to_char(format: &Format, input: &ArrayRef) -> Result<datafusion::arrow::array::StringArray> {
    let decimal_type = match input.data_type() {
        DataType::Decimal128(p, s) => DataType::Decimal128(*p, *s),
        DataType::Float64 => DataType::Decimal128(30, 15),
        DataType::Float32 | DataType::Float16 => DataType::Decimal128(14, 7),
        DataType::Decimal256(_, _) => DataType::Decimal128(38, 18),
        _ => DataType::Decimal128(38, 0),
    };
    let as_decimal = datafusion::arrow::compute::cast(input, &decimal_type)?;
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
    fn number_formats_are_told_from_datetime_patterns() {
        assert!(is_number_format("999.99"));
        assert!(is_number_format("$99,999.9mi"));
        assert!(is_number_format("S0000"));
        assert!(!is_number_format("yyyy-MM-dd"));
        assert!(!is_number_format("HH:mm"));
        assert!(!is_number_format("hex"));
    }
}
