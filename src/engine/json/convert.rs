//! `to_json` and `from_json`: values to JSON text through Arrow's JSON writer, JSON text to
//! typed values through Arrow's JSON reader, one row at a time so that one text that does not
//! fit is NULL without failing the others.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::well_formed;

/// Register `to_json` and `from_json`.
pub(super) fn register(ctx: &datafusion::prelude::SessionContext) {
    ctx.register_udf(ScalarUDF::from(ToJson {
        signature: Signature::any(1, Volatility::Immutable),
    }));
    ctx.register_udf(ScalarUDF::from(FromJson {
        signature: Signature::any(2, Volatility::Immutable),
    }));
}

/// `to_json(struct | array | map)`: the value as JSON text (NULL fields left out, as Spark's
/// default); NULL for NULL.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ToJson {
    signature: Signature,
}

impl ScalarUDFImpl for ToJson {
    fn name(&self) -> &str {
        "to_json"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> datafusion::error::Result<DataType> {
        match args {
            [
                DataType::Struct(_)
                | DataType::List(_)
                | DataType::LargeList(_)
                | DataType::Map(..),
            ] => Ok(DataType::Utf8),
            [other] => datafusion::common::plan_err!(
                "to_json takes a STRUCT, ARRAY or MAP, not {} (to_json(named_struct('v', x)))",
                crate::engine::types::type_name(other)
            ),
            _ => datafusion::common::plan_err!(
                "to_json takes one argument (options are not supported)"
            ),
        }
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        use datafusion::arrow::datatypes::{Field, Schema};
        let n = args.number_rows;
        let values = args.args[0].to_array(n)?;
        let field = Field::new("v", values.data_type().clone(), true);
        let batch = datafusion::arrow::array::RecordBatch::try_new(
            Arc::new(Schema::new(vec![field])),
            vec![values.clone()],
        )?;
        let mut text = Vec::new();
        {
            let mut writer = datafusion::arrow::json::LineDelimitedWriter::new(&mut text);
            writer.write(&batch)?;
            writer.finish()?;
        }
        let text = String::from_utf8(text)
            .map_err(|e| datafusion::error::DataFusionError::Execution(format!("to_json: {e}")))?;
        let mut out = StringBuilder::with_capacity(n, text.len());
        for (i, line) in text.lines().take(n).enumerate() {
            let inner = line
                .strip_prefix(r#"{"v":"#)
                .and_then(|l| l.strip_suffix('}'));
            match inner {
                Some(v) if !values.is_null(i) => out.append_value(v),
                _ => out.append_null(),
            }
        }
        let result: ArrayRef = Arc::new(out.finish());
        crate::engine::functions::shaped_like(&args.args, result)
    }
}

/// `from_json(json, schema)`: the JSON text read as the type `schema` names (`'a INT, b
/// STRING'`, `'STRUCT<...>'`, `'ARRAY<...>'`, `'MAP<...>'`); a text that does not fit is NULL, as in Spark's
/// default (PERMISSIVE) mode.
#[derive(Debug, PartialEq, Eq, Hash)]
struct FromJson {
    signature: Signature,
}

/// The type a `from_json` schema string names.
fn schema_type(schema: &str) -> datafusion::error::Result<DataType> {
    let parse = |text: &str| {
        datafusion::sql::sqlparser::parser::Parser::new(&crate::parser::DIALECT)
            .try_with_sql(text)
            .and_then(|mut p| {
                let t = p.parse_data_type()?;
                p.expect_token(&datafusion::sql::sqlparser::tokenizer::Token::EOF)?;
                Ok(t)
            })
    };
    let sql = match parse(schema) {
        Ok(t @ (datafusion::sql::sqlparser::ast::DataType::Struct(..)
        | datafusion::sql::sqlparser::ast::DataType::Array(_)
        | datafusion::sql::sqlparser::ast::DataType::Map(..))) => t,
        // `a INT, b STRING`: the fields of a struct.
        _ => parse(&format!("STRUCT<{schema}>")).map_err(|e| {
            datafusion::error::DataFusionError::Plan(format!(
                "from_json: the schema {schema:?} is not a type nor a list of fields ('a INT, b STRING'): {e}"
            ))
        })?,
    };
    crate::engine::types::sql_to_arrow(&sql)
        .map_err(|e| datafusion::error::DataFusionError::Plan(format!("from_json: {e}")))
}

impl ScalarUDFImpl for FromJson {
    fn name(&self) -> &str {
        "from_json"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> datafusion::error::Result<DataType> {
        datafusion::common::internal_err!("from_json's type comes from its schema argument")
    }

    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> datafusion::error::Result<datafusion::arrow::datatypes::FieldRef> {
        let schema = match args.scalar_arguments.get(1) {
            Some(Some(
                ScalarValue::Utf8(Some(s))
                | ScalarValue::Utf8View(Some(s))
                | ScalarValue::LargeUtf8(Some(s)),
            )) => s,
            _ => {
                return datafusion::common::plan_err!(
                    "from_json takes a constant schema string as its second argument ('a INT, b STRING')"
                );
            }
        };
        Ok(Arc::new(datafusion::arrow::datatypes::Field::new(
            self.name(),
            schema_type(schema)?,
            true,
        )))
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        use datafusion::arrow::datatypes::{Field, Schema};
        let n = args.number_rows;
        let json = datafusion::arrow::compute::cast(&args.args[0].to_array(n)?, &DataType::Utf8)?;
        let json = json.as_string::<i32>();
        let target = args.return_field.data_type().clone();
        // Each row decoded as `{"v": <text>}` on its own: one that does not fit is NULL
        // without failing the others.
        let schema = Arc::new(Schema::new(vec![Field::new("v", target.clone(), true)]));
        let mut rows: Vec<ArrayRef> = Vec::with_capacity(n);
        for i in 0..n {
            let decoded = (!json.is_null(i))
                .then(|| decode_one(&schema, json.value(i)))
                .flatten();
            rows.push(match decoded {
                Some(a) => a,
                None => datafusion::arrow::array::new_null_array(&target, 1),
            });
        }
        let refs: Vec<&dyn Array> = rows.iter().map(|a| a.as_ref()).collect();
        let result = if refs.is_empty() {
            datafusion::arrow::array::new_empty_array(&target)
        } else {
            datafusion::arrow::compute::concat(&refs)?
        };
        crate::engine::functions::shaped_like(&args.args, result)
    }
}

/// One JSON text decoded as column `v` of `schema`; None when it does not fit.
fn decode_one(schema: &datafusion::arrow::datatypes::SchemaRef, text: &str) -> Option<ArrayRef> {
    if !well_formed(text) {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    if !fits(&value, schema.field(0).data_type()) {
        return None;
    }
    let wrapped = format!("{{\"v\":{text}}}\n");
    let mut decoder = datafusion::arrow::json::ReaderBuilder::new(schema.clone())
        .with_coerce_primitive(true)
        .build_decoder()
        .ok()?;
    decoder.decode(wrapped.as_bytes()).ok()?;
    let batch = decoder.flush().ok()??;
    (batch.num_rows() == 1).then(|| batch.column(0).clone())
}

/// Whether a JSON value reads as `dt` without a guess: integers only from integers in range
/// (Arrow's reader would truncate 1.5 to 1), numbers only from numbers, dates and times from
/// strings; a STRING takes any scalar, as Spark's.
fn fits(value: &serde_json::Value, dt: &DataType) -> bool {
    use serde_json::Value as J;
    let int = |min: i128, max: i128| {
        value
            .as_i64()
            .map(i128::from)
            .or(value.as_u64().map(i128::from))
            .is_some_and(|v| (min..=max).contains(&v))
    };
    match (value, dt) {
        (J::Null, _) => true,
        (_, DataType::Int8) => int(i8::MIN.into(), i8::MAX.into()),
        (_, DataType::Int16) => int(i16::MIN.into(), i16::MAX.into()),
        (_, DataType::Int32) => int(i32::MIN.into(), i32::MAX.into()),
        (_, DataType::Int64) => int(i64::MIN.into(), i64::MAX.into()),
        (_, DataType::Float32 | DataType::Float64 | DataType::Decimal128(..)) => value.is_number(),
        (_, DataType::Boolean) => value.is_boolean(),
        (_, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => {
            !(value.is_object() || value.is_array())
        }
        (_, DataType::Date32 | DataType::Timestamp(..)) => value.is_string(),
        (J::Array(items), DataType::List(f) | DataType::LargeList(f)) => {
            items.iter().all(|v| fits(v, f.data_type()))
        }
        (J::Object(map), DataType::Struct(fields)) => fields
            .iter()
            .all(|f| map.get(f.name()).is_none_or(|v| fits(v, f.data_type()))),
        (J::Object(map), DataType::Map(entries, _)) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                map.values().all(|v| fits(v, kv[1].data_type()))
            }
            _ => false,
        },
        (
            _,
            DataType::List(_) | DataType::LargeList(_) | DataType::Struct(_) | DataType::Map(..),
        ) => false,
        _ => true,
    }
}
