//! `mask(str [, upperChar [, lowerChar [, digitChar [, otherChar]]]])`, as Databricks masks:
//! each upper-case letter becomes `upperChar` ('X'), each lower-case letter `lowerChar` ('x'),
//! each decimal digit `digitChar` ('n') and any other character `otherChar` (NULL: kept). A
//! NULL replacement keeps its class of characters as they are.
//!
//! Spark walks the string as Java does, one UTF-16 unit at a time, and classes each unit by its
//! general category (`Character.getType`): only Lu is upper case, Ll lower case and Nd a digit.
//! So `Ⓐ` (So), `Ⅻ` (Nl), `ǅ` (Lt) and `ª` (Lo) are other characters, and a character outside
//! the Basic Multilingual Plane (`😀`, `𝐀`) is two surrogate units, each masked as "other".
//! The replacements must be constants, as Spark requires.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, AsArray, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Mask {
    signature: Signature,
}

impl Mask {
    pub(super) fn new() -> Self {
        Mask {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

/// The replacement for each class: upper, lower, digit, other (None keeps the character).
const DEFAULTS: [Option<char>; 4] = [Some('X'), Some('x'), Some('n'), None];
const NAMES: [&str; 4] = ["upperChar", "lowerChar", "digitChar", "otherChar"];

impl ScalarUDFImpl for Mask {
    fn name(&self) -> &str {
        "mask"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }
    /// Text, and a NULL replacement left a NULL literal (a cast of it would read as an
    /// expression, not a constant).
    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        if args.is_empty() || args.len() > 5 {
            return plan_err!(
                "mask takes 1 to 5 arguments: mask(str [, upperChar, lowerChar, digitChar, \
                 otherChar]), not {}",
                args.len()
            );
        }
        Ok(args
            .iter()
            .enumerate()
            .map(|(k, t)| {
                if k > 0 && t == &DataType::Null {
                    DataType::Null
                } else {
                    DataType::Utf8
                }
            })
            .collect())
    }
    /// A literal replacement is checked as the query is planned; one computed from constants
    /// (`upper('y')`) once computed, and a column's is refused where the call runs.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        for (k, arg) in args.scalar_arguments.iter().enumerate().skip(1) {
            if let Some(ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s))) = arg {
                replacement(s, k - 1)?;
            }
        }
        Ok(Arc::new(Field::new(self.name(), DataType::Utf8, true)))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let mut with = DEFAULTS;
        for (k, arg) in args.args[1..].iter().enumerate() {
            with[k] = match arg {
                ColumnarValue::Scalar(ScalarValue::Utf8(None) | ScalarValue::Null) => None,
                ColumnarValue::Scalar(ScalarValue::Utf8(Some(s))) => Some(replacement(s, k)?),
                _ => return non_foldable(k),
            };
        }
        let n = args.number_rows;
        let texts = args.args[0].to_array(n)?;
        let texts = texts.as_string::<i32>();
        let mut out = StringBuilder::with_capacity(n, texts.value_data().len());
        let mut masked = String::new();
        for row in 0..n {
            if texts.is_null(row) {
                out.append_null();
                continue;
            }
            masked.clear();
            for c in texts.value(row).chars() {
                match with[class(c)] {
                    None => masked.push(c),
                    // Outside the BMP: two surrogate units, each replaced.
                    Some(r) if c.len_utf16() == 2 => {
                        masked.push(r);
                        masked.push(r);
                    }
                    Some(r) => masked.push(r),
                }
            }
            out.append_value(&masked);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

fn non_foldable<T>(k: usize) -> Result<T> {
    plan_err!(
        "[DATATYPE_MISMATCH.NON_FOLDABLE_INPUT] mask: {} must be a constant string (a literal \
         or NULL), not a column or an expression over one",
        NAMES[k]
    )
}

/// A replacement string's character: it must be one character, and (as Spark takes its first
/// UTF-16 unit) one inside the Basic Multilingual Plane.
fn replacement(s: &str, k: usize) -> Result<char> {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.len_utf16() == 1 => Ok(c),
        (Some(_), None) => exec_err!(
            "mask: the {} '{s}' is outside the Basic Multilingual Plane; Databricks would \
             write half of it (one UTF-16 unit), so use a character up to U+FFFF",
            NAMES[k]
        ),
        _ => exec_err!(
            "[DATATYPE_MISMATCH.INPUT_SIZE_NOT_ONE] mask: the {} '{s}' is not one character",
            NAMES[k]
        ),
    }
}

/// Java's `Character.getType` class of a character: 0 upper (Lu), 1 lower (Ll), 2 decimal digit
/// (Nd), 3 anything else, including every character outside the BMP (surrogate units in Java).
fn class(c: char) -> usize {
    static CATEGORIES: LazyLock<[regex::Regex; 3]> = LazyLock::new(|| {
        [r"^\p{Lu}$", r"^\p{Ll}$", r"^\p{Nd}$"].map(|p| regex::Regex::new(p).expect("valid"))
    });
    if c.is_ascii() {
        return match c {
            'A'..='Z' => 0,
            'a'..='z' => 1,
            '0'..='9' => 2,
            _ => 3,
        };
    }
    if c.len_utf16() == 2 {
        return 3;
    }
    let mut buf = [0; 4];
    let text = c.encode_utf8(&mut buf);
    CATEGORIES
        .iter()
        .position(|re| re.is_match(text))
        .unwrap_or(3)
}
