//! Spark's `format_number(x, d)` and `format_number(x, pattern)`: a number as text the way
//! Java's `DecimalFormat` writes it (what Spark calls): grouped by thousands and rounded half
//! to even to `d` places, or by a pattern of `#`, `0`, `,` and `.` with literal text before
//! and after (`'EUR ,###.-'`). Exact on DECIMALs and integers; a DOUBLE is written from its
//! shortest decimal form.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

pub(super) fn udf() -> ScalarUDF {
    ScalarUDF::from(FormatNumber {
        signature: Signature::any(2, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct FormatNumber {
    signature: Signature,
}

/// How a number is written: literal text around it, grouping size, the fraction's minimum and
/// maximum digits, the integer's minimum digits, and whether the point always shows.
#[derive(Debug, Clone, PartialEq)]
struct Pattern {
    prefix: String,
    suffix: String,
    grouping: Option<usize>,
    min_int: usize,
    min_frac: usize,
    max_frac: usize,
    point_always: bool,
}

impl Pattern {
    fn places(d: i64) -> Pattern {
        Pattern {
            prefix: String::new(),
            suffix: String::new(),
            grouping: Some(3),
            min_int: 1,
            min_frac: d as usize,
            max_frac: d as usize,
            point_always: false,
        }
    }

    fn parse(p: &str) -> Result<Pattern> {
        // Percent, per mille, currency signs, quoted text, a negative subpattern and an
        // exponent after the digits change what is written: refused rather than copied.
        if let Some(c) = p
            .chars()
            .find(|c| matches!(c, '%' | '‰' | '\'' | ';' | '¤'))
        {
            return exec_err!(
                "format_number: the pattern '{p}' uses '{c}', which tidemark does not write yet (patterns of # 0 , . with plain text around them are)"
            );
        }
        let is_number = |c: char| matches!(c, '#' | '0' | ',' | '.');
        let start = p.find(is_number);
        let Some(start) = start else {
            return exec_err!("format_number: the pattern '{p}' has no digits (#, 0)");
        };
        let end = p[start..]
            .find(|c: char| !is_number(c))
            .map_or(p.len(), |e| start + e);
        let number = &p[start..end];
        if p[end..].starts_with('E') {
            return exec_err!(
                "format_number: the pattern '{p}' has an exponent (E), which tidemark does not write yet"
            );
        }
        let (int, frac) = match number.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (number, None),
        };
        if frac.is_some_and(|f| f.contains(['.', ','])) {
            return exec_err!("format_number: the pattern '{p}' is not one Spark reads");
        }
        let grouping = int.rfind(',').map(|i| int.len() - i - 1).filter(|g| *g > 0);
        let frac = frac.unwrap_or("");
        Ok(Pattern {
            prefix: p[..start].to_string(),
            suffix: p[end..].to_string(),
            grouping,
            min_int: int.chars().filter(|c| *c == '0').count(),
            min_frac: frac.chars().filter(|c| *c == '0').count(),
            max_frac: frac.chars().filter(|c| matches!(c, '0' | '#')).count(),
            point_always: number.contains('.') && frac.is_empty(),
        })
    }

    /// `digits` (an optional `-`, digits, an optional `.` and digits) written by the pattern.
    fn write(&self, digits: &str) -> String {
        let (negative, digits) = match digits.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, digits),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        let (int, frac) = round_half_even(int, frac, self.max_frac);
        let frac = frac.trim_end_matches('0');
        let frac = if frac.len() < self.min_frac {
            format!("{frac:0<width$}", width = self.min_frac)
        } else {
            frac.to_string()
        };
        let int = int.trim_start_matches('0');
        let int = if int.len() < self.min_int {
            format!("{int:0>width$}", width = self.min_int)
        } else {
            int.to_string()
        };
        // Java writes at least one digit.
        let int = if int.is_empty() && frac.is_empty() {
            "0".to_string()
        } else {
            int
        };
        let grouped = match self.grouping {
            Some(g) => {
                let chars: Vec<char> = int.chars().collect();
                let mut out = String::new();
                for (i, c) in chars.iter().enumerate() {
                    if i > 0 && (chars.len() - i).is_multiple_of(g) {
                        out.push(',');
                    }
                    out.push(*c);
                }
                out
            }
            None => int,
        };
        // Java writes a negative number that rounds to zero as -0.00.
        let mut out = String::new();
        if negative {
            out.push('-');
        }
        out.push_str(&self.prefix);
        out.push_str(&grouped);
        if !frac.is_empty() || self.point_always {
            out.push('.');
        }
        out.push_str(&frac);
        out.push_str(&self.suffix);
        out
    }
}

/// Digits rounded to `places` after the point, half to even (Java's DecimalFormat).
fn round_half_even(int: &str, frac: &str, places: usize) -> (String, String) {
    if frac.len() <= places {
        return (int.to_string(), frac.to_string());
    }
    let (kept, dropped) = frac.split_at(places);
    let first = dropped.as_bytes()[0] - b'0';
    let rest_nonzero = dropped[1..].bytes().any(|b| b != b'0');
    let last_odd = kept
        .bytes()
        .last()
        .or_else(|| int.bytes().last())
        .is_some_and(|b| (b - b'0') % 2 == 1);
    let up = first > 5 || (first == 5 && (rest_nonzero || last_odd));
    let mut all: Vec<u8> = format!("{int}{kept}").into_bytes();
    if up {
        let mut i = all.len();
        loop {
            if i == 0 {
                all.insert(0, b'1');
                break;
            }
            i -= 1;
            if all[i] == b'9' {
                all[i] = b'0';
            } else {
                all[i] += 1;
                break;
            }
        }
    }
    let split = all.len() - kept.len();
    let text = String::from_utf8(all).unwrap_or_default();
    (text[..split].to_string(), text[split..].to_string())
}

/// The exact decimal digits of a number value, None for NULL (and for NaN / infinity, which
/// Java writes as symbols).
fn digits(v: &ScalarValue, places: usize) -> Option<String> {
    if v.is_null() {
        return None;
    }
    Some(match v {
        ScalarValue::Float64(Some(f)) => float_digits(*f, places)?,
        ScalarValue::Float32(Some(f)) => float_digits(f64::from(*f), places)?,
        other => other.to_string(),
    })
}

/// A double's shortest decimal digits, as Java writes them.
fn format_float(f: f64) -> Option<String> {
    if !f.is_finite() {
        return None;
    }
    Some(format!("{f}"))
}

/// The digits to round a double by to `places`: its shortest digits, unless they end exactly
/// halfway at that place; then its binary value decides, as in Java's DecimalFormat (2.675 is
/// 2.67499999999999982236431605997495353221893310546875: 2.67).
fn float_digits(f: f64, places: usize) -> Option<String> {
    let shortest = format_float(f)?;
    let frac = shortest.split_once('.').map_or("", |(_, f)| f);
    if frac.len() == places + 1 && frac.ends_with('5') {
        let exact = format!("{f:.80}");
        return Some(
            exact
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string(),
        );
    }
    Some(shortest)
}

impl ScalarUDFImpl for FormatNumber {
    fn name(&self) -> &str {
        "format_number"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        if !(args[0].is_numeric() || args[0].is_null()) {
            return plan_err!("format_number() takes a number, not {}", args[0]);
        }
        if !(args[1].is_integer()
            || args[1].is_null()
            || matches!(
                args[1],
                DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
            ))
        {
            return plan_err!(
                "format_number(x, d): d is a number of decimal places or a pattern, not {}",
                args[1]
            );
        }
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let x: ArrayRef = args.args[0].to_array(n)?;
        let d: ArrayRef = args.args[1].to_array(n)?;
        let mut out = StringBuilder::new();
        let mut last: Option<(ScalarValue, Pattern)> = None;
        for i in 0..n {
            let dv = ScalarValue::try_from_array(&d, i)?;
            let pattern = match &last {
                Some((v, p)) if *v == dv => Some(p.clone()),
                _ => {
                    let p = match &dv {
                        v if v.is_null() => None,
                        ScalarValue::Utf8(Some(s))
                        | ScalarValue::Utf8View(Some(s))
                        | ScalarValue::LargeUtf8(Some(s)) => {
                            if s.is_empty() {
                                // Spark: an empty pattern is the plain grouped number.
                                Some(Pattern::parse("#,###,###,###,###,###,##0.###")?)
                            } else {
                                Some(Pattern::parse(s)?)
                            }
                        }
                        v => match v.cast_to(&DataType::Int64)? {
                            ScalarValue::Int64(Some(d)) if d >= 0 => Some(Pattern::places(d)),
                            _ => None,
                        },
                    };
                    if let Some(p) = &p {
                        last = Some((dv.clone(), p.clone()));
                    }
                    p
                }
            };
            let value = ScalarValue::try_from_array(&x, i)?;
            match pattern {
                Some(p) => match digits(&value, p.max_frac) {
                    Some(digits) => out.append_value(p.write(&digits)),
                    None => out.append_null(),
                },
                None => out.append_null(),
            }
        }
        let array: ArrayRef = Arc::new(out.finish());
        Ok(
            if args
                .args
                .iter()
                .all(|a| matches!(a, ColumnarValue::Scalar(_)))
            {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
            } else {
                ColumnarValue::Array(array)
            },
        )
    }
}

/// `format_string(fmt, ...)` (datafusion-spark's) with the DOUBLEs its `%f` conversions
/// write rounded first as Java's `Formatter` rounds them: half up from the shortest decimal
/// form (`format_string('%.2f', 1.005)` is `1.01`, `'%.1f'` of `0.25` is `0.3`;
/// datafusion-spark rounded the binary value, half to even). Each `%f` of a constant format
/// gets a copy of its argument so rounded, added after the others; the format then names
/// every conversion's argument by its index (`%2$s`), so the other conversions keep theirs.
/// DECIMALs are left to the function (Spark's `%f` of a DECIMAL is not settled here).
pub(super) fn java_fixed_arguments(args: &mut ScalarFunctionArgs) -> Result<()> {
    let (fmt, text) = match args.args.first() {
        Some(ColumnarValue::Scalar(s)) => match s.try_as_str() {
            Some(Some(f)) => (f.to_string(), s.data_type()),
            _ => return Ok(()),
        },
        _ => return Ok(()),
    };
    let Some(specs) = conversions(&fmt) else {
        return Ok(());
    };
    // A conversion past the last argument is the function's error to report (the copies
    // added below must never stand in for a missing argument).
    let given = args.args.len() - 1;
    if !specs.iter().any(|s| s.conversion == "f") || specs.iter().any(|s| s.arg >= given) {
        return Ok(());
    }
    let mut out = String::with_capacity(fmt.len() + 8);
    let mut at = 0;
    for spec in &specs {
        out.push_str(&fmt[at..spec.start]);
        at = spec.end;
        let mut arg = spec.arg;
        let value = args.args.get(arg + 1);
        if spec.conversion == "f"
            && let Some(value) = value
            && let Some(rounded) = half_up(value, spec.precision.unwrap_or(6))?
        {
            let field = args.arg_fields[arg + 1]
                .as_ref()
                .clone()
                .with_data_type(rounded.data_type());
            args.arg_fields.push(Arc::new(field));
            args.args.push(rounded);
            arg = args.args.len() - 2;
        }
        let precision = spec.precision.map(|p| format!(".{p}")).unwrap_or_default();
        out.push_str(&format!(
            "%{}${}{}{precision}{}",
            arg + 1,
            spec.flags,
            spec.width,
            spec.conversion
        ));
    }
    out.push_str(&fmt[at..]);
    args.args[0] = ColumnarValue::Scalar(ScalarValue::Utf8(Some(out)).cast_to(&text)?);
    Ok(())
}

/// A conversion of a Java format string that takes an argument.
#[derive(Debug, PartialEq)]
struct Spec {
    /// Where it is in the format (bytes, from its `%` to past its conversion).
    start: usize,
    end: usize,
    /// Its argument, 0-based: `%2$s` names it, `%<s` takes the previous conversion's, the
    /// others take the next in order.
    arg: usize,
    flags: String,
    width: String,
    precision: Option<usize>,
    /// `f`, `s`, ... (`tY` for a date part).
    conversion: String,
}

/// The conversions of a Java format string that take an argument (`%%` and `%n` take none);
/// None for a format this does not read through (the function then reports it).
fn conversions(fmt: &str) -> Option<Vec<Spec>> {
    let b = fmt.as_bytes();
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        &fmt[start..*i]
    };
    let (mut out, mut i, mut next, mut last) = (vec![], 0, 0usize, None::<usize>);
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        // An argument index (`2$`) or a width: digits either way.
        let mut explicit = None;
        let before = i;
        let n = digits(&mut i);
        if !n.is_empty() && b.get(i) == Some(&b'$') {
            explicit = n.parse::<usize>().ok();
            i += 1;
        } else {
            i = before;
        }
        let (mut flags, mut previous) = (String::new(), false);
        while i < b.len() && b"-#+ 0,(<".contains(&b[i]) {
            match b[i] {
                b'<' => previous = true,
                c => flags.push(c as char),
            }
            i += 1;
        }
        let width = digits(&mut i).to_string();
        let precision = if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i).parse::<usize>().ok()
        } else {
            None
        };
        let &c = b.get(i)?;
        if !c.is_ascii_alphabetic() && c != b'%' {
            return None;
        }
        i += 1;
        if c == b'%' || c == b'n' {
            continue;
        }
        let mut conversion = (c as char).to_string();
        if c == b't' || c == b'T' {
            let &part = b.get(i).filter(|p| p.is_ascii_alphabetic())?;
            conversion.push(part as char);
            i += 1;
        }
        // `<` takes the previous argument, whatever index is written with it (Java).
        let arg = match (explicit, previous) {
            (_, true) => last?,
            (Some(0), _) => return None,
            (Some(n), _) => n - 1,
            (None, false) => {
                next += 1;
                next - 1
            }
        };
        last = Some(arg);
        out.push(Spec {
            start,
            end: i,
            arg,
            flags,
            width,
            precision,
            conversion,
        });
    }
    Some(out)
}

/// A DOUBLE or FLOAT argument with each value rounded half up to `places` from its shortest
/// decimal form, as a DOUBLE the function's `%f` then writes to those places exactly (a
/// negative value that rounds to zero stays negative: `-0.00`, as Java writes it); a value
/// whose rounded form has more than 15 digits, NaN or an infinity is left as it is. None for
/// another type.
fn half_up(value: &ColumnarValue, places: usize) -> Result<Option<ColumnarValue>> {
    use datafusion::arrow::array::{AsArray, Float64Array};
    use datafusion::arrow::datatypes::{Float32Type, Float64Type};
    let one = |f: f64| float_half_up(f, places).unwrap_or(f);
    Ok(match value {
        ColumnarValue::Scalar(ScalarValue::Float64(f)) => {
            Some(ColumnarValue::Scalar(ScalarValue::Float64(f.map(one))))
        }
        ColumnarValue::Scalar(ScalarValue::Float32(f)) => Some(ColumnarValue::Scalar(
            ScalarValue::Float64(f.map(|f| one(f64::from(f)))),
        )),
        ColumnarValue::Array(a) if a.data_type() == &DataType::Float64 => {
            let out: Float64Array = a.as_primitive::<Float64Type>().unary(one);
            Some(ColumnarValue::Array(Arc::new(out)))
        }
        ColumnarValue::Array(a) if a.data_type() == &DataType::Float32 => {
            let out: Float64Array = a.as_primitive::<Float32Type>().unary(|f| one(f64::from(f)));
            Some(ColumnarValue::Array(Arc::new(out)))
        }
        _ => None,
    })
}

/// A double's shortest decimal form rounded half up to `places`, as the nearest double;
/// None when that is not exact enough to be written back to `places` (15 digits or more),
/// or the value is NaN or infinite.
fn float_half_up(f: f64, places: usize) -> Option<f64> {
    if !f.is_finite() {
        return None;
    }
    let text = format!("{}", f.abs());
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let mut unscaled: i128 = 0;
    let kept = frac.bytes().chain(std::iter::repeat(b'0')).take(places);
    for d in int.bytes().chain(kept) {
        unscaled = unscaled
            .checked_mul(10)?
            .checked_add(i128::from(d - b'0'))?;
    }
    if frac.as_bytes().get(places).is_some_and(|d| *d >= b'5') {
        unscaled += 1;
    }
    if unscaled >= 1_000_000_000_000_000 {
        return None;
    }
    let digits = unscaled.to_string();
    let (whole, fraction) = match digits.len() > places {
        true => digits.split_at(digits.len() - places),
        false => ("0", digits.as_str()),
    };
    let rounded: f64 = format!("{whole}.{fraction:0>places$}0").parse().ok()?;
    Some(if f.is_sign_negative() {
        -rounded
    } else {
        rounded
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_java_writes_them() {
        let places = |d| Pattern::places(d);
        assert_eq!(places(4).write("12332.123456"), "12,332.1235");
        assert_eq!(places(0).write("12332.5"), "12,332");
        assert_eq!(places(0).write("12333.5"), "12,334");
        assert_eq!(places(2).write("-0.001"), "-0.00");
        assert_eq!(places(2).write("999.995"), "1,000.00");
        assert_eq!(places(1).write("5"), "5.0");
        let p = |s| Pattern::parse(s).unwrap();
        assert_eq!(p("#.###").write("12332.123456"), "12332.123");
        assert_eq!(p("EUR ,###.-").write("12332.123456"), "EUR 12,332.-");
        assert_eq!(p("00000.00").write("12.5"), "00012.50");
        assert_eq!(p("#,##0.00").write("-1234.5"), "-1,234.50");
        assert_eq!(p("#.##").write("0"), "0");
        assert_eq!(p("#.##").write("0.001"), "0");
        assert!(Pattern::parse("0.00%").is_err());
        assert_eq!(
            places(2).write(&float_digits(1e23, 2).unwrap()),
            "100,000,000,000,000,000,000,000.00"
        );
        assert_eq!(places(2).write(&float_digits(2.675, 2).unwrap()), "2.67");
        assert_eq!(places(1).write(&float_digits(0.25, 1).unwrap()), "0.2");
    }

    #[test]
    fn format_string_arguments_round_as_java_formats_them() {
        let shown = |f: &str| -> Vec<(usize, String, Option<usize>)> {
            conversions(f)
                .unwrap()
                .into_iter()
                .map(|s| {
                    (
                        s.arg,
                        format!("{}{}{}", s.flags, s.width, s.conversion),
                        s.precision,
                    )
                })
                .collect()
        };
        assert_eq!(
            shown("%s: %.2f%% %<,.1f %3$e %n %-8d %tY"),
            vec![
                (0, "s".into(), None),
                (1, "f".into(), Some(2)),
                (1, ",f".into(), Some(1)),
                (2, "e".into(), None),
                (2, "-8d".into(), None),
                (3, "tY".into(), None)
            ]
        );
        let spec = &conversions("a %08.3f b").unwrap()[0];
        assert!(conversions("%<s").is_none() && conversions("100%").is_none());
        assert_eq!(conversions("%s %2$<s").unwrap()[1].arg, 0);
        assert_eq!(
            (spec.start, spec.end, &spec.flags[..], &spec.width[..]),
            (2, 8, "0", "8")
        );
        assert_eq!(float_half_up(1.005, 2), Some(1.01));
        assert_eq!(float_half_up(0.25, 1), Some(0.3));
        assert_eq!(float_half_up(-2.5, 0), Some(-3.0));
        assert_eq!(float_half_up(0.1 + 0.2, 2), Some(0.3));
        assert_eq!(float_half_up(1e-7, 6), Some(0.0));
        assert!(float_half_up(-1e-7, 6).is_some_and(|z| z == 0.0 && z.is_sign_negative()));
        assert_eq!(float_half_up(0.0, 2), Some(0.0));
        assert_eq!(float_half_up(123456.785, 2), Some(123456.79));
        assert_eq!(float_half_up(0.1, 20), None);
        assert_eq!(float_half_up(1e300, 2), None);
        assert_eq!(float_half_up(f64::NAN, 2), None);
    }
}
