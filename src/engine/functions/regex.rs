//! Spark's regular-expression functions DataFusion lacks: `split(str, regex [, limit])` and
//! `regexp_extract_all(str, regex [, group])`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, ListBuilder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::{exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// The arguments as strings (and an optional integer), row by row.
fn strings(v: &ColumnarValue, n: usize) -> datafusion::error::Result<ArrayRef> {
    Ok(datafusion::arrow::compute::cast(
        &v.to_array(n)?,
        &DataType::Utf8,
    )?)
}

fn integers(v: Option<&ColumnarValue>, n: usize) -> datafusion::error::Result<Option<ArrayRef>> {
    v.map(|v| {
        Ok(datafusion::arrow::compute::cast(
            &v.to_array(n)?,
            &DataType::Int64,
        )?)
    })
    .transpose()
}

/// Compile a pattern, reusing the last one for a run of equal patterns.
struct Patterns(Option<(String, regex::Regex)>);

impl Patterns {
    fn get(&mut self, name: &str, p: &str) -> datafusion::error::Result<&regex::Regex> {
        if self.0.as_ref().is_none_or(|(q, _)| q != p) {
            let re = match regex::Regex::new(p) {
                Ok(re) => re,
                Err(e) => {
                    return exec_err!("{name}: the pattern {p:?} is not a regular expression: {e}");
                }
            };
            self.0 = Some((p.to_string(), re));
        }
        Ok(&self.0.as_ref().expect("set above").1)
    }
}

fn list_type() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)))
}

fn coerce(name: &str, args: &[DataType]) -> datafusion::error::Result<Vec<DataType>> {
    match args.len() {
        2 => Ok(vec![DataType::Utf8, DataType::Utf8]),
        3 => Ok(vec![DataType::Utf8, DataType::Utf8, DataType::Int64]),
        _ => plan_err!("{name} takes (str, regex [, n])"),
    }
}

/// Which of the two functions.
#[derive(Debug, PartialEq, Eq, Hash, Clone, Copy)]
enum Kind {
    Split,
    ExtractAll,
}

/// `split` or `regexp_extract_all`: (str, regex [, n]) to an array of strings, row by row.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct RegexList {
    kind: Kind,
    signature: Signature,
}

impl RegexList {
    /// Java's `String.split(regex, limit)`, as Spark: a limit above 0 makes at most that
    /// many parts (the last holds the rest); otherwise every part, trailing empty ones
    /// included.
    pub(super) fn split() -> Self {
        RegexList {
            kind: Kind::Split,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// Group `n` (1 when not given; 0 is the whole match) of every match, `''` for a group
    /// that took no part; a group past the pattern's last is an error, as in Spark.
    pub(super) fn extract_all() -> Self {
        RegexList {
            kind: Kind::ExtractAll,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for RegexList {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Split => "split",
            Kind::ExtractAll => "regexp_extract_all",
        }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, args: &[DataType]) -> datafusion::error::Result<Vec<DataType>> {
        coerce(self.name(), args)
    }
    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(list_type())
    }
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let n = args.number_rows;
        let text = strings(&args.args[0], n)?;
        let pattern = strings(&args.args[1], n)?;
        let third = integers(args.args.get(2), n)?;
        let (text, pattern) = (
            datafusion::arrow::array::as_string_array(&text),
            datafusion::arrow::array::as_string_array(&pattern),
        );
        let third = third.as_ref().map(|l| {
            datafusion::arrow::array::as_primitive_array::<datafusion::arrow::datatypes::Int64Type>(
                l,
            )
        });
        let mut out = ListBuilder::new(StringBuilder::new());
        let mut patterns = Patterns(None);
        for i in 0..n {
            if text.is_null(i) || pattern.is_null(i) || third.is_some_and(|l| l.is_null(i)) {
                out.append(false);
                continue;
            }
            let (s, p) = (text.value(i), pattern.value(i));
            let parts = match self.kind {
                Kind::Split => split(s, p, third.map(|l| l.value(i)).unwrap_or(-1), &mut patterns)?,
                Kind::ExtractAll => {
                    extract(s, p, third.map(|l| l.value(i)).unwrap_or(1), &mut patterns)?
                }
            };
            for part in parts {
                out.values().append_value(part);
            }
            out.append(true);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
    }
}

fn split<'a>(
    s: &'a str,
    p: &str,
    limit: i64,
    patterns: &mut Patterns,
) -> datafusion::error::Result<Vec<&'a str>> {
    if s.is_empty() {
        // Java: splitting nothing gives one empty part.
        return Ok(vec![s]);
    }
    if p.is_empty() {
        // Java splits between every character (no empty first part).
        let chars: Vec<&str> = s
            .char_indices()
            .map(|(j, c)| &s[j..j + c.len_utf8()])
            .collect();
        if limit > 0 && chars.len() > limit as usize {
            let cut = chars[..limit as usize - 1].iter().map(|c| c.len()).sum();
            let mut head = chars[..limit as usize - 1].to_vec();
            head.push(&s[cut..]);
            return Ok(head);
        }
        return Ok(chars);
    }
    let re = patterns.get("split", p)?;
    Ok(if limit > 0 {
        re.splitn(s, limit as usize).collect()
    } else {
        re.split(s).collect()
    })
}

fn extract<'a>(
    s: &'a str,
    p: &str,
    idx: i64,
    patterns: &mut Patterns,
) -> datafusion::error::Result<Vec<&'a str>> {
    let re = patterns.get("regexp_extract_all", p)?;
    let groups = re.captures_len() as i64 - 1;
    if idx < 0 || idx > groups {
        return exec_err!(
            "[INVALID_PARAMETER_VALUE.REGEX_GROUP_INDEX] regexp_extract_all: the pattern has {groups} group(s), and the group index is {idx}"
        );
    }
    Ok(re
        .captures_iter(s)
        .map(|caps| caps.get(idx as usize).map(|m| m.as_str()).unwrap_or(""))
        .collect())
}
