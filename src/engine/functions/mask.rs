//! `mask(str [, upperChar [, lowerChar [, digitChar [, otherChar]]]])`, as Databricks masks:
//! each upper-case letter becomes `upperChar` ('X'), each lower-case letter `lowerChar` ('x'),
//! each decimal digit `digitChar` ('n') and any other character `otherChar` (NULL: kept). A
//! NULL replacement keeps its class of characters as they are. Letters and digits are Java's
//! (`Character.isUpperCase`, `isLowerCase`, `isDigit`): Unicode's, so `Ä` is upper case.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Mask {
    signature: Signature,
}

impl Mask {
    pub(super) fn new() -> Self {
        let forms = (1..=5)
            .map(|n| TypeSignature::Exact(vec![DataType::Utf8; n]))
            .collect();
        Mask {
            signature: Signature::one_of(forms, Volatility::Immutable),
        }
    }
}

/// The replacement for each class: upper, lower, digit, other (None keeps the character).
const DEFAULTS: [Option<char>; 4] = [Some('X'), Some('x'), Some('n'), None];

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
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.to_array(n))
            .collect::<Result<_>>()?;
        let texts = arrays[0].as_string::<i32>();
        let mut out = StringBuilder::with_capacity(n, texts.value_data().len());
        for row in 0..n {
            if texts.is_null(row) {
                out.append_null();
                continue;
            }
            let mut with = DEFAULTS;
            for (k, a) in arrays[1..].iter().enumerate() {
                let a = a.as_string::<i32>();
                with[k] = if a.is_null(row) {
                    None
                } else {
                    let mut chars = a.value(row).chars();
                    match (chars.next(), chars.next()) {
                        (Some(c), None) => Some(c),
                        _ => {
                            return exec_err!(
                                "mask: the replacement '{}' is not one character",
                                a.value(row)
                            );
                        }
                    }
                };
            }
            let masked: String = texts
                .value(row)
                .chars()
                .map(|c| {
                    let class = if c.is_uppercase() {
                        0
                    } else if c.is_lowercase() {
                        1
                    } else if is_digit(c) {
                        2
                    } else {
                        3
                    };
                    with[class].unwrap_or(c)
                })
                .collect();
            out.append_value(masked);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// Java's `Character.isDigit`: Unicode's decimal digits (general category Nd).
fn is_digit(c: char) -> bool {
    static ND: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"^\p{Nd}$").expect("a valid pattern"));
    c.is_ascii_digit() || (!c.is_ascii() && ND.is_match(c.encode_utf8(&mut [0; 4])))
}
