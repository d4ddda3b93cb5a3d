//! `hash(expr, ...)`: Spark's 32-bit Murmur3 hash of its arguments (seed 42, each argument's
//! hash the seed of the next), as Databricks computes it, so that a bucket picked with
//! `pmod(hash(id), 16)` is the bucket Databricks picks. Spark hashes an INT, DATE, SMALLINT,
//! TINYINT or BOOLEAN as a 4-byte int, a BIGINT or TIMESTAMP as an 8-byte long, a FLOAT or
//! DOUBLE by its bits (-0.0 as 0.0), a DECIMAL of up to 18 digits as its unscaled long (a wider
//! one by its unscaled value's two's-complement bytes), text and binary by their bytes, and an
//! ARRAY or STRUCT element by element; a NULL leaves the hash as it was. A MAP is refused, as
//! Databricks refuses it.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int32Array, as_largestring_array, as_string_array,
};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, FieldRef, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use datafusion::common::{Result, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// Spark's seed for `hash`.
const SEED: u32 = 42;

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Murmur3 {
    signature: Signature,
}

impl Murmur3 {
    pub(super) fn new() -> Self {
        Murmur3 {
            signature: Signature::variadic_any(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for Murmur3 {
    fn name(&self) -> &str {
        "hash"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        if args.iter().any(has_map) {
            return plan_err!(
                "[DATATYPE_MISMATCH.HASH_MAP_TYPE] hash: an argument is or holds a MAP, and \
                 Databricks refuses to hash maps (equal maps may hash differently); hash \
                 map_entries(m) or sorted keys and values instead"
            );
        }
        Ok(DataType::Int32)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let mut hashes = vec![SEED; n];
        for arg in &args.args {
            let array = plain(arg.to_array(n)?)?;
            for (row, h) in hashes.iter_mut().enumerate() {
                *h = hash_at(array.as_ref(), row, *h)?;
            }
        }
        let out: Int32Array = hashes.into_iter().map(|h| Some(h as i32)).collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// Whether a value of type `t` is or holds a MAP.
fn has_map(t: &DataType) -> bool {
    match t {
        DataType::Map(_, _) => true,
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            has_map(f.data_type())
        }
        DataType::Struct(fields) => fields.iter().any(|f| has_map(f.data_type())),
        DataType::Dictionary(_, v) => has_map(v),
        _ => false,
    }
}

/// `t` with every dictionary encoding replaced by its value type, at any depth.
fn without_dictionaries(t: &DataType) -> DataType {
    let field = |f: &FieldRef| {
        Arc::new(
            f.as_ref()
                .clone()
                .with_data_type(without_dictionaries(f.data_type())),
        )
    };
    match t {
        DataType::Dictionary(_, v) => without_dictionaries(v),
        DataType::List(f) => DataType::List(field(f)),
        DataType::LargeList(f) => DataType::LargeList(field(f)),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(field(f), *n),
        DataType::Struct(fields) => DataType::Struct(fields.iter().map(field).collect()),
        other => other.clone(),
    }
}

/// A column with its dictionary-encoded parts (delta-rs' partition columns, at any depth) as
/// plain values: decoded once per batch, not once per row.
fn plain(array: ArrayRef) -> Result<ArrayRef> {
    let target = without_dictionaries(array.data_type());
    Ok(if &target == array.data_type() {
        array
    } else {
        datafusion::arrow::compute::cast(&array, &target)?
    })
}

/// The hash of `array`'s value at `i`, from `seed`.
fn hash_at(array: &dyn Array, i: usize, seed: u32) -> Result<u32> {
    if array.is_null(i) {
        return Ok(seed);
    }
    Ok(match array.data_type() {
        DataType::Null => seed,
        DataType::Boolean => hash_int(u32::from(array.as_boolean().value(i)), seed),
        DataType::Int8 => hash_int(array.as_primitive::<Int8Type>().value(i) as u32, seed),
        DataType::Int16 => hash_int(array.as_primitive::<Int16Type>().value(i) as u32, seed),
        DataType::Int32 => hash_int(array.as_primitive::<Int32Type>().value(i) as u32, seed),
        DataType::Date32 => hash_int(array.as_primitive::<Date32Type>().value(i) as u32, seed),
        DataType::Int64 => hash_long(array.as_primitive::<Int64Type>().value(i) as u64, seed),
        // Spark's timestamps are microseconds; other units are hashed as their microsecond
        // (`now()` is nanoseconds here).
        DataType::Timestamp(unit, _) => {
            let micros = match unit {
                TimeUnit::Second => {
                    array.as_primitive::<TimestampSecondType>().value(i) * 1_000_000
                }
                TimeUnit::Millisecond => {
                    array.as_primitive::<TimestampMillisecondType>().value(i) * 1_000
                }
                TimeUnit::Microsecond => array.as_primitive::<TimestampMicrosecondType>().value(i),
                TimeUnit::Nanosecond => array
                    .as_primitive::<TimestampNanosecondType>()
                    .value(i)
                    .div_euclid(1_000),
            };
            hash_long(micros as u64, seed)
        }
        DataType::Float32 => {
            let f = array.as_primitive::<Float32Type>().value(i);
            // Java's floatToIntBits: one NaN, and -0.0 hashed as 0.0.
            let bits = if f == 0.0 {
                0
            } else if f.is_nan() {
                0x7fc0_0000
            } else {
                f.to_bits()
            };
            hash_int(bits, seed)
        }
        DataType::Float64 => {
            let d = array.as_primitive::<Float64Type>().value(i);
            let bits = if d == 0.0 {
                0
            } else if d.is_nan() {
                0x7ff8_0000_0000_0000
            } else {
                d.to_bits()
            };
            hash_long(bits, seed)
        }
        DataType::Decimal128(p, _) => {
            let v = array.as_primitive::<Decimal128Type>().value(i);
            if *p <= 18 {
                hash_long(v as i64 as u64, seed)
            } else {
                hash_bytes(&java_big_integer_bytes(v), seed)
            }
        }
        DataType::Utf8 => hash_bytes(as_string_array(array).value(i).as_bytes(), seed),
        DataType::LargeUtf8 => hash_bytes(as_largestring_array(array).value(i).as_bytes(), seed),
        DataType::Utf8View => hash_bytes(array.as_string_view().value(i).as_bytes(), seed),
        DataType::Binary => hash_bytes(array.as_binary::<i32>().value(i), seed),
        DataType::LargeBinary => hash_bytes(array.as_binary::<i64>().value(i), seed),
        DataType::BinaryView => hash_bytes(array.as_binary_view().value(i), seed),
        DataType::List(_) => elements(array.as_list::<i32>().value(i).as_ref(), seed)?,
        DataType::LargeList(_) => elements(array.as_list::<i64>().value(i).as_ref(), seed)?,
        DataType::FixedSizeList(_, _) => {
            elements(array.as_fixed_size_list().value(i).as_ref(), seed)?
        }
        DataType::Struct(_) => {
            let mut h = seed;
            for field in array.as_struct().columns() {
                h = hash_at(field.as_ref(), i, h)?;
            }
            h
        }
        other => {
            return exec_err!(
                "hash: values of type {} cannot be hashed as Databricks hashes them",
                crate::engine::types::type_name(other)
            );
        }
    })
}

fn elements(values: &dyn Array, seed: u32) -> Result<u32> {
    let mut h = seed;
    for j in 0..values.len() {
        h = hash_at(values, j, h)?;
    }
    Ok(h)
}

/// `java.math.BigInteger.toByteArray()` of `v`: its two's-complement bytes, big-endian, in
/// as few bytes as hold the sign.
fn java_big_integer_bytes(v: i128) -> Vec<u8> {
    let bytes = v.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let (b, next) = (bytes[start], bytes[start + 1]);
        let redundant = (b == 0x00 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0);
        if !redundant {
            break;
        }
        start += 1;
    }
    bytes[start..].to_vec()
}

fn mix_k1(k1: u32) -> u32 {
    k1.wrapping_mul(0xcc9e_2d51)
        .rotate_left(15)
        .wrapping_mul(0x1b87_3593)
}

fn mix_h1(h1: u32, k1: u32) -> u32 {
    (h1 ^ k1)
        .rotate_left(13)
        .wrapping_mul(5)
        .wrapping_add(0xe654_6b64)
}

fn fmix(mut h1: u32, length: u32) -> u32 {
    h1 ^= length;
    h1 ^= h1 >> 16;
    h1 = h1.wrapping_mul(0x85eb_ca6b);
    h1 ^= h1 >> 13;
    h1 = h1.wrapping_mul(0xc2b2_ae35);
    h1 ^ (h1 >> 16)
}

fn hash_int(input: u32, seed: u32) -> u32 {
    fmix(mix_h1(seed, mix_k1(input)), 4)
}

fn hash_long(input: u64, seed: u32) -> u32 {
    let h1 = mix_h1(seed, mix_k1(input as u32));
    fmix(mix_h1(h1, mix_k1((input >> 32) as u32)), 8)
}

/// Spark's `hashUnsafeBytes`: whole 4-byte words little-endian, then each byte left over on
/// its own (as a signed byte), unlike the reference Murmur3's tail.
fn hash_bytes(bytes: &[u8], seed: u32) -> u32 {
    let aligned = bytes.len() - bytes.len() % 4;
    let mut h1 = seed;
    for word in bytes[..aligned].chunks_exact(4) {
        let w = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        h1 = mix_h1(h1, mix_k1(w));
    }
    for &b in &bytes[aligned..] {
        h1 = mix_h1(h1, mix_k1(b as i8 as i32 as u32));
    }
    fmix(h1, bytes.len() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_big_integer_bytes_are_minimal_twos_complement() {
        assert_eq!(java_big_integer_bytes(0), vec![0]);
        assert_eq!(java_big_integer_bytes(127), vec![0x7f]);
        assert_eq!(java_big_integer_bytes(128), vec![0x00, 0x80]);
        assert_eq!(java_big_integer_bytes(-1), vec![0xff]);
        assert_eq!(java_big_integer_bytes(-128), vec![0x80]);
        assert_eq!(java_big_integer_bytes(-129), vec![0xff, 0x7f]);
    }

    /// `hash(0)` and `hash(0L)` as Sail (Spark's algorithm) computes them; `functions.slt`
    /// checks the rest through SQL.
    #[test]
    fn spark_murmur3_values() {
        assert_eq!(hash_int(0, 42) as i32, 933_211_791);
        assert_eq!(hash_long(0, 42) as i32, -1_670_924_195);
    }
}
