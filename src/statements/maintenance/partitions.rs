//! `OPTIMIZE t WHERE ...`: Databricks' predicate on partition columns, turned into the
//! partition filters delta-rs selects files by (`(column, op, value)`, ANDed, each value
//! written as Delta writes partition values). Anything else is refused by name, never
//! widened or narrowed silently.

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr, UnaryOperator};
use deltalake::{FilterOp, FilterValue};

use crate::engine::Session;
use crate::engine::types::type_name;
use crate::error::{Error, Result};

/// One partition filter, owning its column name and encoded value(s).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PartitionFilter {
    pub column: String,
    pub op: FilterOp,
    /// One value, or the list of `IN` / `NOT IN`; `""` with `=`/`!=` is IS [NOT] NULL.
    pub values: Vec<String>,
}

impl PartitionFilter {
    /// The borrowed form delta-rs' OPTIMIZE takes.
    pub fn literal(&self) -> deltalake::FilterLiteral<'_> {
        let value = match self.op {
            FilterOp::In | FilterOp::NotIn => {
                FilterValue::Set(self.values.iter().map(String::as_str).collect())
            }
            _ => FilterValue::Scalar(&self.values[0]),
        };
        (self.column.as_str(), self.op, value)
    }
}

/// The table's partition columns and their types, as `OPTIMIZE ... WHERE` sees them.
pub(crate) struct Partitioning<'a> {
    pub table: &'a str,
    /// (name as the table spells it, type)
    pub partition_columns: Vec<(String, DataType)>,
    /// Every column name of the table (for the error naming a non-partition column).
    pub columns: Vec<String>,
}

/// The filters a WHERE clause means, every one a comparison of a partition column with a
/// constant, joined by AND.
pub(crate) async fn filters(
    session: &Session,
    predicate: &Expr,
    on: &Partitioning<'_>,
) -> Result<Vec<PartitionFilter>> {
    let mut out = vec![];
    let mut pending = vec![predicate];
    while let Some(e) = pending.pop() {
        match e {
            Expr::Nested(inner) => pending.push(inner),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                pending.push(right);
                pending.push(left);
            }
            Expr::BinaryOp { left, op, right } => {
                let Some(op) = comparison(op) else {
                    let what = if *op == BinaryOperator::Or {
                        "OR (run one OPTIMIZE per alternative)".to_string()
                    } else {
                        format!("the operator {op}")
                    };
                    return Err(unsupported(on, &what));
                };
                // `column op constant`, or `constant op column` read the other way round.
                let (column, constant, op) = match (column_of(left), column_of(right)) {
                    (Some(c), None) => (c, right.as_ref(), op),
                    (None, Some(c)) => (c, left.as_ref(), flipped(op)),
                    _ => return Err(unsupported(on, &format!("`{e}`"))),
                };
                let (name, ty) = partition_column(on, column)?;
                let value = encoded(session, constant, &name, &ty, on).await?;
                out.push(PartitionFilter {
                    column: name,
                    op,
                    values: vec![value],
                });
            }
            Expr::IsNull(inner) | Expr::IsNotNull(inner) => {
                let (name, _) = partition_of(on, inner, e)?;
                let op = if matches!(e, Expr::IsNull(_)) {
                    FilterOp::Eq
                } else {
                    FilterOp::Ne
                };
                out.push(PartitionFilter {
                    column: name,
                    op,
                    values: vec![String::new()],
                });
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let (name, ty) = partition_of(on, expr, e)?;
                let mut values = Vec::with_capacity(list.len());
                for item in list {
                    values.push(encoded(session, item, &name, &ty, on).await?);
                }
                out.push(PartitionFilter {
                    column: name,
                    op: if *negated {
                        FilterOp::NotIn
                    } else {
                        FilterOp::In
                    },
                    values,
                });
            }
            Expr::Between {
                expr,
                negated: false,
                low,
                high,
            } => {
                let (name, ty) = partition_of(on, expr, e)?;
                for (bound, op) in [(low, FilterOp::Ge), (high, FilterOp::Le)] {
                    let value = encoded(session, bound, &name, &ty, on).await?;
                    out.push(PartitionFilter {
                        column: name.clone(),
                        op,
                        values: vec![value],
                    });
                }
            }
            _ => {
                let what = match e {
                    Expr::UnaryOp {
                        op: UnaryOperator::Not,
                        ..
                    } => "NOT".to_string(),
                    Expr::Between { negated: true, .. } => "NOT BETWEEN".to_string(),
                    other => format!("`{other}`"),
                };
                return Err(unsupported(on, &what));
            }
        }
    }
    Ok(out)
}

/// The comparison operators a partition filter has.
fn comparison(op: &BinaryOperator) -> Option<FilterOp> {
    Some(match op {
        BinaryOperator::Eq => FilterOp::Eq,
        BinaryOperator::NotEq => FilterOp::Ne,
        BinaryOperator::Lt => FilterOp::Lt,
        BinaryOperator::LtEq => FilterOp::Le,
        BinaryOperator::Gt => FilterOp::Gt,
        BinaryOperator::GtEq => FilterOp::Ge,
        _ => return None,
    })
}

/// `a op b` as `b op' a`.
fn flipped(op: FilterOp) -> FilterOp {
    match op {
        FilterOp::Lt => FilterOp::Gt,
        FilterOp::Le => FilterOp::Ge,
        FilterOp::Gt => FilterOp::Lt,
        FilterOp::Ge => FilterOp::Le,
        other => other,
    }
}

/// The column an expression names, if it is a bare column name (in parentheses or not).
fn column_of(e: &Expr) -> Option<&str> {
    match e {
        Expr::Identifier(i) => Some(&i.value),
        Expr::Nested(inner) => column_of(inner),
        _ => None,
    }
}

/// The partition column `side` of the condition `whole` names, or the error saying why not
/// (`whole` refused when `side` is no bare column).
fn partition_of(on: &Partitioning<'_>, side: &Expr, whole: &Expr) -> Result<(String, DataType)> {
    match column_of(side) {
        Some(column) => partition_column(on, column),
        None => Err(unsupported(on, &format!("`{whole}`"))),
    }
}

/// The partition column `name` means (case-insensitively), or the error saying why not.
fn partition_column(on: &Partitioning<'_>, name: &str) -> Result<(String, DataType)> {
    if let Some((n, t)) = on
        .partition_columns
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
    {
        return Ok((n.clone(), t.clone()));
    }
    let partitioned_by = if on.partition_columns.is_empty() {
        format!(
            "{} is not partitioned: run OPTIMIZE {} without WHERE",
            on.table, on.table
        )
    } else {
        let names: Vec<&str> = on
            .partition_columns
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        format!(
            "only its partition columns ({}) may be named",
            names.join(", ")
        )
    };
    if on.columns.iter().any(|c| c.eq_ignore_ascii_case(name)) {
        Err(Error::Invalid(format!(
            "OPTIMIZE {} WHERE names '{name}', which is not a partition column: {partitioned_by}",
            on.table
        )))
    } else {
        Err(Error::NotFound(format!(
            "OPTIMIZE {} WHERE names '{name}', which is not a column of {}: {partitioned_by}",
            on.table, on.table
        )))
    }
}

fn unsupported(on: &Partitioning<'_>, what: &str) -> Error {
    Error::class(
        "UNSUPPORTED_FEATURE",
        format!(
            "OPTIMIZE {} WHERE takes comparisons (=, <>, <, <=, >, >=, IN, BETWEEN, IS [NOT] NULL) of a partition column with a constant, joined by AND; {what} is not supported",
            on.table
        ),
    )
}

/// A constant as Delta writes a partition value of `ty`, the constant evaluated (variables
/// allowed) and converted to `ty` without loss; a value that does not convert exactly is an
/// error, never rounded into another partition's.
async fn encoded(
    session: &Session,
    constant: &Expr,
    column: &str,
    ty: &DataType,
    on: &Partitioning<'_>,
) -> Result<String> {
    let shown = constant.to_string();
    // Text against a timestamp reads in the session's time zone, as CAST does.
    let constant = match ty {
        DataType::Timestamp(_, tz) => &crate::parser::expr_text(&format!(
            "CAST(({constant}) AS {})",
            if tz.is_some() {
                "TIMESTAMP"
            } else {
                "TIMESTAMP_NTZ"
            }
        ))?,
        _ => constant,
    };
    let value = session.eval_scalar(constant).await.map_err(|e| {
        e.context(format!(
            "OPTIMIZE {} WHERE: the value compared with '{column}' must be a constant",
            on.table
        ))
    })?;
    let wrong = |why: &str| {
        Error::Type(format!(
            "OPTIMIZE {} WHERE: {shown} {why} partition column '{column}' ({})",
            on.table,
            type_name(ty)
        ))
    };
    if value.is_null() {
        return Err(wrong(
            "is NULL, which compares true with no partition (use IS NULL) of",
        ));
    }
    let cast = value
        .cast_to(ty)
        .map_err(|_| wrong("cannot be compared with"))?;
    if cast.is_null() || !exact(&value, &cast, ty) {
        return Err(wrong("is not exactly a value of"));
    }
    let text = match &cast {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => {
            if s.is_empty() {
                // Delta stores an empty string partition value as NULL.
                return Err(wrong("is the empty string, which Delta stores as NULL in"));
            }
            s.clone()
        }
        ScalarValue::TimestampMicrosecond(Some(us), _) => {
            let t = chrono::DateTime::from_timestamp_micros(*us)
                .ok_or_else(|| wrong("is out of range for"))?;
            t.naive_utc().format("%Y-%m-%d %H:%M:%S%.6f").to_string()
        }
        ScalarValue::Boolean(Some(_))
        | ScalarValue::Int8(Some(_))
        | ScalarValue::Int16(Some(_))
        | ScalarValue::Int32(Some(_))
        | ScalarValue::Int64(Some(_))
        | ScalarValue::Float32(Some(_))
        | ScalarValue::Float64(Some(_))
        | ScalarValue::Decimal128(Some(_), _, _)
        | ScalarValue::Date32(Some(_)) => {
            let array = cast.to_array()?;
            datafusion::arrow::util::display::array_value_to_string(&array, 0)?
        }
        _ => {
            return Err(Error::class(
                "UNSUPPORTED_FEATURE",
                format!(
                    "OPTIMIZE {} WHERE: partition column '{column}' is {}; filters on it are not supported",
                    on.table,
                    type_name(ty)
                ),
            ));
        }
    };
    Ok(text)
}

/// Whether `value`, converted to the column's type `ty` as `cast`, lost nothing: `1.5`
/// against an integer column, or a time of day against a date, is refused. Text is read as
/// the column's type, as Databricks reads it (`'2024-1-2'` is a DATE, `'1.5'` a DECIMAL
/// 1.50; timestamps are cast before, in the session's time zone), and compared in a wider
/// type where reading it could round (a decimal's digits past the column's scale).
fn exact(value: &ScalarValue, cast: &ScalarValue, ty: &DataType) -> bool {
    let text = matches!(
        value,
        ScalarValue::Utf8(_) | ScalarValue::LargeUtf8(_) | ScalarValue::Utf8View(_)
    );
    if !text {
        return cast.cast_to(&value.data_type()).ok().as_ref() == Some(value);
    }
    let wider = match ty {
        DataType::Decimal128(_, _) => DataType::Decimal256(76, 38),
        // Integers refuse fractions, dates read the day (as Databricks compares them).
        _ => return true,
    };
    match (value.cast_to(&wider), cast.cast_to(&wider)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The arrow type a partition column's values are compared in (Delta's timestamps are
/// microseconds).
pub(crate) fn comparable(ty: &DataType) -> DataType {
    match ty {
        DataType::Timestamp(_, tz) => DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
        DataType::Dictionary(_, value) => comparable(value),
        other => other.clone(),
    }
}
