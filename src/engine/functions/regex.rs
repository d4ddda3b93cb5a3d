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

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Split {
    signature: Signature,
}

impl Split {
    pub(super) fn new() -> Self {
        Split {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for Split {
    fn name(&self) -> &str {
        "split"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, args: &[DataType]) -> datafusion::error::Result<Vec<DataType>> {
        coerce("split", args)
    }
    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(list_type())
    }
    /// Java's `String.split(regex, limit)`, as Spark: a limit above 0 makes at most that many
    /// parts (the last holds the rest); otherwise every part, trailing empty ones included.
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let n = args.number_rows;
        let text = strings(&args.args[0], n)?;
        let pattern = strings(&args.args[1], n)?;
        let limit = integers(args.args.get(2), n)?;
        let (text, pattern) = (
            datafusion::arrow::array::as_string_array(&text),
            datafusion::arrow::array::as_string_array(&pattern),
        );
        let limit = limit.as_ref().map(|l| {
            datafusion::arrow::array::as_primitive_array::<datafusion::arrow::datatypes::Int64Type>(
                l,
            )
        });
        let mut out = ListBuilder::new(StringBuilder::new());
        let mut patterns = Patterns(None);
        for i in 0..n {
            if text.is_null(i) || pattern.is_null(i) || limit.is_some_and(|l| l.is_null(i)) {
                out.append(false);
                continue;
            }
            let (s, p) = (text.value(i), pattern.value(i));
            let limit = limit.map(|l| l.value(i)).unwrap_or(-1);
            let parts: Vec<&str> = if p.is_empty() {
                // Java splits between every character (no empty first part).
                let chars: Vec<&str> = s
                    .char_indices()
                    .map(|(j, c)| &s[j..j + c.len_utf8()])
                    .collect();
                if limit > 0 && chars.len() > limit as usize {
                    let cut = chars[..limit as usize - 1].iter().map(|c| c.len()).sum();
                    let mut head = chars[..limit as usize - 1].to_vec();
                    head.push(&s[cut..]);
                    head
                } else {
                    chars
                }
            } else {
                let re = patterns.get("split", p)?;
                if limit > 0 {
                    re.splitn(s, limit as usize).collect()
                } else {
                    re.split(s).collect()
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

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct ExtractAll {
    signature: Signature,
}

impl ExtractAll {
    pub(super) fn new() -> Self {
        ExtractAll {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ExtractAll {
    fn name(&self) -> &str {
        "regexp_extract_all"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, args: &[DataType]) -> datafusion::error::Result<Vec<DataType>> {
        coerce("regexp_extract_all", args)
    }
    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(list_type())
    }
    /// Group `idx` (1 when not given; 0 is the whole match) of every match, `''` for a group
    /// that took no part; a group past the pattern's last is an error, as in Spark.
    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let n = args.number_rows;
        let text = strings(&args.args[0], n)?;
        let pattern = strings(&args.args[1], n)?;
        let group = integers(args.args.get(2), n)?;
        let (text, pattern) = (
            datafusion::arrow::array::as_string_array(&text),
            datafusion::arrow::array::as_string_array(&pattern),
        );
        let group = group.as_ref().map(|l| {
            datafusion::arrow::array::as_primitive_array::<datafusion::arrow::datatypes::Int64Type>(
                l,
            )
        });
        let mut out = ListBuilder::new(StringBuilder::new());
        let mut patterns = Patterns(None);
        for i in 0..n {
            if text.is_null(i) || pattern.is_null(i) || group.is_some_and(|g| g.is_null(i)) {
                out.append(false);
                continue;
            }
            let re = patterns.get("regexp_extract_all", pattern.value(i))?;
            let idx = group.map(|g| g.value(i)).unwrap_or(1);
            let groups = re.captures_len() as i64 - 1;
            if idx < 0 || idx > groups {
                return exec_err!(
                    "[INVALID_PARAMETER_VALUE.REGEX_GROUP_INDEX] regexp_extract_all: the pattern has {groups} group(s), and the group index is {idx}"
                );
            }
            for caps in re.captures_iter(text.value(i)) {
                out.values()
                    .append_value(caps.get(idx as usize).map(|m| m.as_str()).unwrap_or(""));
            }
            out.append(true);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
    }
}
