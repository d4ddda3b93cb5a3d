//! `json_array_length(text)` and `json_object_keys(text)`: the shape of a JSON document's
//! outermost array or object, NULL when the text is not one (or is not JSON at all). Keys come
//! in the document's order, as Databricks gives them.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Int32Builder, ListBuilder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Register both functions.
pub(super) fn register(ctx: &datafusion::prelude::SessionContext) {
    for keys in [false, true] {
        ctx.register_udf(ScalarUDF::from(Shape {
            keys,
            signature: Signature::string(1, Volatility::Immutable),
        }));
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Shape {
    /// `json_object_keys`; else `json_array_length`.
    keys: bool,
    signature: Signature,
}

/// The element count of a JSON array.
struct Count;

impl<'de> Visitor<'de> for Count {
    type Value = i32;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<i32, A::Error> {
        let mut n = 0;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            n += 1;
        }
        Ok(n)
    }
}

/// The keys of a JSON object, in order.
struct Keys;

impl<'de> Visitor<'de> for Keys {
    type Value = Vec<String>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<String>, A::Error> {
        let mut keys = vec![];
        while let Some(k) = map.next_key::<String>()? {
            map.next_value::<IgnoredAny>()?;
            keys.push(k);
        }
        Ok(keys)
    }
}

/// `visitor` over the value `text` starts with (as Databricks, text after it is not read).
fn read<'a, V: Visitor<'a>>(text: &'a str, visitor: V) -> Option<V::Value> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_any(visitor).ok()
}

impl ScalarUDFImpl for Shape {
    fn name(&self) -> &str {
        if self.keys {
            "json_object_keys"
        } else {
            "json_array_length"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(if self.keys {
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
        } else {
            DataType::Int32
        })
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let n = args.number_rows;
        let text = datafusion::arrow::compute::cast(&args.args[0].to_array(n)?, &DataType::Utf8)?;
        let text = text
            .as_any()
            .downcast_ref::<datafusion::arrow::array::StringArray>();
        let Some(text) = text else {
            return datafusion::common::exec_err!("{} takes a STRING", self.name());
        };
        let result: ArrayRef = if self.keys {
            let mut out = ListBuilder::new(StringBuilder::new());
            for t in text.iter() {
                match t.and_then(|t| read(t, Keys)) {
                    Some(keys) => {
                        for k in keys {
                            out.values().append_value(k);
                        }
                        out.append(true);
                    }
                    None => out.append(false),
                }
            }
            Arc::new(out.finish())
        } else {
            let mut out = Int32Builder::with_capacity(n);
            for t in text.iter() {
                out.append_option(t.and_then(|t| read(t, Count)));
            }
            Arc::new(out.finish())
        };
        crate::engine::functions::shaped_like(&args.args, result)
    }
}
