//! The watermark control table of COPY INCREMENTAL: finding a copy's row, checking that its
//! `last_watermark` can hold the source's watermark losslessly, and advancing it as a typed
//! value with compare-and-set, so concurrent runs never regress or lose an advance.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Expr as DfExpr, col, lit};

use crate::catalog::{TableName, split_qualified};
use crate::engine::Session;
use crate::engine::types::type_name;
use crate::error::{Error, Result};
use crate::statements::group_commit::Registry;

mod kept;

/// The row of the control table that drives one copy.
#[derive(Debug, Clone)]
pub struct ControlRow {
    pub table: TableName,
    /// `source_table` exactly as stored (the update matches on it).
    pub source_value: String,
    /// `target_table` as stored, when the column exists.
    pub target_value: Option<String>,
    pub watermark_column: Option<String>,
    /// `last_watermark` as stored, in the control column's type.
    pub mark: ScalarValue,
    pub mark_type: DataType,
}

/// Resolve a name stored in a control row ("cat.schema.table", "schema.table", back-quotes).
pub fn resolve_stored_name(session: &Session, raw: &str) -> Result<TableName> {
    let parts = split_qualified(raw)?;
    TableName::resolve(&parts, session.current_catalog(), session.current_schema())
}

pub fn string_at(batch: &RecordBatch, column: &str, row: usize) -> Result<Option<String>> {
    let Some(arr) = batch.column_by_name(column) else {
        return Ok(None);
    };
    if arr.is_null(row) {
        return Ok(None);
    }
    // (A partition column is read as a dictionary of strings.)
    let value = match ScalarValue::try_from_array(arr, row)? {
        ScalarValue::Dictionary(_, value) => *value,
        value => value,
    };
    match value {
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => Ok(s),
        other => Err(Error::Type(format!(
            "control column '{column}' must be a STRING, found {}",
            type_name(&other.data_type())
        ))),
    }
}

/// The columns of a control table the job reads by name.
const CONTROL_COLUMNS: &[&str] = &[
    "source_table",
    "target_table",
    "watermark_column",
    "last_watermark",
    "active",
];

/// Read every row of a control table.
pub async fn read_all(session: &Session, table: &TableName) -> Result<Vec<RecordBatch>> {
    let t = session.warehouse().open(table).await?;
    let provider = crate::catalog::provider_for(&t).await?;
    let schema = provider.schema();
    // The job reads and advances these columns by their lower-case names: a column spelled
    // otherwise (`Active`) would be missed, and a paused row copied.
    for f in schema.fields() {
        let lower = f.name().to_lowercase();
        if CONTROL_COLUMNS.contains(&lower.as_str()) && *f.name() != lower {
            return Err(Error::Invalid(format!(
                "control table {table}: its column '{}' must be spelled in lower case ('{lower}'), as the job reads it; make the table again with lower-case names",
                f.name()
            )));
        }
    }
    for required in ["source_table", "last_watermark"] {
        if schema.field_with_name(required).is_err() {
            return Err(Error::Invalid(format!(
                "{table} is not a control table: it has no '{required}' column (a control table has source_table, target_table, watermark_column, last_watermark)"
            )));
        }
    }
    let batches = session.ctx().read_table(provider)?.collect().await?;
    Ok(batches)
}

/// The control row at `row` of `batch` (a batch of [`read_all`]); None when its
/// `source_table` is NULL.
pub fn row_at(table: &TableName, batch: &RecordBatch, row: usize) -> Result<Option<ControlRow>> {
    let Some(source_value) = string_at(batch, "source_table", row)? else {
        return Ok(None);
    };
    let mark_arr = batch
        .column_by_name("last_watermark")
        .ok_or_else(|| Error::Invalid(format!("{table} has no 'last_watermark' column")))?;
    Ok(Some(ControlRow {
        table: table.clone(),
        source_value,
        target_value: string_at(batch, "target_table", row)?,
        watermark_column: string_at(batch, "watermark_column", row)?,
        mark: ScalarValue::try_from_array(mark_arr, row)?,
        mark_type: mark_arr.data_type().clone(),
    }))
}

/// How many rows of a control table name each (source, target) pair, by resolved names.
pub fn pair_counts(
    session: &Session,
    batches: &[RecordBatch],
) -> std::collections::HashMap<(TableName, Option<TableName>), usize> {
    let mut counts = std::collections::HashMap::new();
    for batch in batches {
        for row in 0..batch.num_rows() {
            let Ok(Some(src)) = string_at(batch, "source_table", row) else {
                continue;
            };
            let tgt = string_at(batch, "target_table", row).ok().flatten();
            if let Some(pair) = pair_of(session, &src, tgt.as_deref()) {
                *counts.entry(pair).or_insert(0) += 1;
            }
        }
    }
    counts
}

/// The (source, target) pair named by stored `source_table` and `target_table` values, as
/// resolved table names; None when the source does not resolve.
pub fn pair_of(
    session: &Session,
    source: &str,
    target: Option<&str>,
) -> Option<(TableName, Option<TableName>)> {
    let src = resolve_stored_name(session, source).ok()?;
    Some((
        src,
        target.and_then(|t| resolve_stored_name(session, t).ok()),
    ))
}

/// Find the control row for `source` -> `target`: exactly one must match.
pub async fn find(
    session: &Session,
    table: &TableName,
    source: &TableName,
    target: &TableName,
) -> Result<ControlRow> {
    let batches = read_all(session, table).await?;
    let mut matches = Vec::new();
    for batch in &batches {
        let has_target = batch.column_by_name("target_table").is_some();
        for row in 0..batch.num_rows() {
            let Some(src) = string_at(batch, "source_table", row)? else {
                continue;
            };
            if resolve_stored_name(session, &src).ok().as_ref() != Some(source) {
                continue;
            }
            let tgt = string_at(batch, "target_table", row)?;
            if has_target {
                match &tgt {
                    Some(t) if resolve_stored_name(session, t).ok().as_ref() == Some(target) => {}
                    _ => continue,
                }
            }
            matches.extend(row_at(table, batch, row)?);
        }
    }
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => Err(Error::NotFound(format!(
            "control table {table} has no row for source_table = '{source}'{}: add one with INSERT INTO {table} VALUES (...)",
            if batches
                .iter()
                .any(|b| b.column_by_name("target_table").is_some())
            {
                format!(" and target_table = '{target}'")
            } else {
                String::new()
            }
        ))),
        n => Err(Error::Invalid(format!(
            "control table {table} has {n} rows for source_table = '{source}' and target '{target}': keep exactly one"
        ))),
    }
}

/// Whether a control column of type `ctl` holds every watermark of type `src` exactly.
pub fn can_hold(src: &DataType, ctl: &DataType) -> bool {
    use DataType::*;
    match (src, ctl) {
        (_, Utf8 | LargeUtf8 | Utf8View) => true,
        (Timestamp(_, _), Timestamp(u, _)) => matches!(
            u,
            datafusion::arrow::datatypes::TimeUnit::Microsecond
                | datafusion::arrow::datatypes::TimeUnit::Nanosecond
        ),
        (Date32, Date32 | Timestamp(_, _)) => true,
        (Int8 | Int16 | Int32 | Int64, Int64) => true,
        (Int8 | Int16 | Int32, Int32) => true,
        (Int8 | Int16, Int16) => true,
        (Int8, Int8) => true,
        // Every digit on both sides of the point fits.
        (Decimal128(p, s), Decimal128(p2, s2)) => {
            s2 >= s && (*p2 as i16 - *s2 as i16) >= (*p as i16 - *s as i16)
        }
        (Int8 | Int16 | Int32 | Int64, Decimal128(p, s)) => {
            let digits = match src {
                Int8 => 3,
                Int16 => 5,
                Int32 => 10,
                _ => 19,
            };
            (*p as i16 - *s as i16) >= digits
        }
        (a, b) => a == b,
    }
}

/// A SINCE value in the watermark's type, with the meaning `CAST(value AS <type>)` has in
/// Databricks: a number is seconds since the epoch for a TIMESTAMP (Arrow would read it as
/// microseconds and start 1970-01-21 for `1735689600`), and is no DATE at all.
pub fn convert_since(value: &ScalarValue, to: &DataType) -> Result<ScalarValue> {
    use datafusion::arrow::datatypes::TimeUnit;
    let numeric = value.data_type().is_numeric();
    match to {
        DataType::Timestamp(unit, _) if numeric && !value.is_null() => {
            let per_second = match unit {
                TimeUnit::Second => 1i128,
                TimeUnit::Millisecond => 1_000,
                TimeUnit::Microsecond => 1_000_000,
                TimeUnit::Nanosecond => 1_000_000_000,
            };
            // Exact for integers and decimals: scaled as a DECIMAL(38, s) of seconds.
            let seconds = convert(value, &DataType::Decimal128(38, 9), "SINCE")?;
            let ScalarValue::Decimal128(Some(nanos_scaled), _, _) = seconds else {
                return Err(Error::Type(format!(
                    "SINCE: {value} is not a number of seconds"
                )));
            };
            let units = nanos_scaled
                .checked_mul(per_second)
                .map(|x| x / 1_000_000_000)
                .and_then(|x| i64::try_from(x).ok())
                .ok_or_else(|| {
                    Error::Type(format!(
                        "SINCE: {value} seconds is outside the range of {}",
                        type_name(to)
                    ))
                })?;
            let ts = ScalarValue::Int64(Some(units));
            convert(&ts, to, "SINCE")
        }
        DataType::Date32 | DataType::Date64 if numeric && !value.is_null() => {
            Err(Error::Type(format!(
                "SINCE: a number ({value}) is not a DATE; write DATE'2025-01-01' or a string such as '2025-01-01'"
            )))
        }
        _ => convert(value, to, "SINCE"),
    }
}

/// Convert a mark between the source watermark type and the control column type.
pub fn convert(value: &ScalarValue, to: &DataType, what: &str) -> Result<ScalarValue> {
    if &value.data_type() == to {
        return Ok(value.clone());
    }
    if value.is_null() {
        return Ok(ScalarValue::try_from(to)?);
    }
    // A watermark kept as text keeps its zone (`2024-01-02T00:00:00Z`, not Spark's
    // `2024-01-02 00:00:00`, which a session in another zone would read as another instant).
    if to.is_string() && matches!(value.data_type(), DataType::Timestamp(_, Some(_))) {
        return value.cast_to(to).map_err(|e| {
            Error::Type(format!(
                "{what}: cannot convert {value} to {}: {e}",
                type_name(to)
            ))
        });
    }
    crate::engine::types::cast_value(value, to).map_err(|e| {
        Error::Type(format!(
            "{what}: cannot convert {value} to {}: {e}",
            type_name(to)
        ))
    })
}

/// One pending advance of a control row.
pub struct Advance {
    row: ControlRow,
    /// The values the row may hold for the advance to apply.
    expected: Vec<ScalarValue>,
    new: ScalarValue,
}

/// The most rows an advance writes into one file of a control table.
const CONTROL_FILE_ROWS: usize = 512;

/// Queued advances per control table: iterations of one job advance their rows in shared
/// commits instead of racing each other.
static ADVANCES: Registry<Advance> = Registry::new();

/// Advance `last_watermark` to `new` (in the control column's type), only where it still
/// holds one of `expected` (compare-and-set: a value someone else set is left alone).
pub async fn advance(
    session: &Session,
    row: &ControlRow,
    expected: &[ScalarValue],
    new: &ScalarValue,
) -> Result<()> {
    let item = Advance {
        row: row.clone(),
        expected: expected.to_vec(),
        new: new.clone(),
    };
    ADVANCES
        .group(&row.table)
        .submit(item, |batch| apply_advances(session, &row.table, batch))
        .await
        .map_err(|e| e.context(format!("cannot advance last_watermark in {}", row.table)))
}

/// One rewrite for a batch: each row still holding one of an advance's expected values takes
/// its new value (compare-and-set), retried on conflicts with other processes. Worked out row
/// by row ([`ByRow`]), on the table as this process's last batch left it ([`kept`]: after the
/// first batch, with no replay of its log); a control table with CHECK constraints, or one
/// tidemark's rewrite does not serve, gets the same change as one UPDATE with a CASE.
async fn apply_advances(session: &Session, table: &TableName, batch: Vec<Advance>) -> Result<()> {
    let by_row = ByRow::of(&batch);
    // Rows sorted by name in files of a few hundred: the next batch of advances (rows near
    // these in the job's order) rewrites one or two such files, not the whole control table.
    let mut sort_by = vec!["source_table".to_string()];
    if batch.iter().any(|a| a.row.target_value.is_some()) {
        sort_by.push("target_table".to_string());
    }
    let layout = crate::statements::rewrite::Layout {
        sort_by,
        rows_per_file: CONTROL_FILE_ROWS,
    };
    let url = session.warehouse().table_url(table)?.to_string();
    crate::statements::retry::on_conflict(crate::statements::retry::SMALL_WRITE, || async {
        let t = match kept::take(&url).await {
            Some(kept) => {
                fail::fail_point!("copy::during_control_update", |_| std::process::abort());
                match kept.advance(session, table, &by_row, &layout).await? {
                    kept::Advanced::Done(kept) => {
                        if let Some(kept) = kept {
                            kept::put(url.clone(), kept);
                        }
                        return Ok(());
                    }
                    kept::Advanced::Not(t) => t,
                }
            }
            None => {
                let t = session.warehouse().open_for_write(table).await?;
                fail::fail_point!("copy::during_control_update", |_| std::process::abort());
                t
            }
        };
        use crate::statements::rewrite;
        let after = if rewrite::applies(&t)? && !rewrite::has_checks(&t)? {
            rewrite::rewrite_rows(session, &t, &by_row, by_row.predicate(), &layout)
                .await?
                .0
        } else if rewrite::applies(&t)? {
            let (pred, value) = as_update(&batch)?;
            // Through tidemark's own rewrite where it applies (plain string types in the new
            // file), else delta-rs' UPDATE.
            let set = vec![("last_watermark".to_string(), value)];
            rewrite::rewrite_laid_out(
                session,
                &t,
                Some(pred),
                rewrite::Change::Update(set),
                Some(&layout),
            )
            .await?
            .0
        } else {
            let (pred, value) = as_update(&batch)?;
            let update = t
                .clone()
                .update()
                .with_predicate(pred)
                .with_update("last_watermark", value)
                .with_session_state(Arc::new(session.ctx().state()));
            let done = crate::statements::upkeep::commit(
                update,
                crate::statements::upkeep::never_over_another(),
            )
            .await?;
            Some(done.0)
        };
        kept::keep(url.clone(), after.unwrap_or(t)).await;
        Ok(())
    })
    .await
}

/// A batch of advances as an UPDATE: the rows it is for (`<row i still holds old i> OR ...`)
/// and `last_watermark`'s new value (`CASE WHEN <row i still holds old i> THEN new i ... END`).
fn as_update(batch: &[Advance]) -> Result<(DfExpr, DfExpr)> {
    let mut conds = Vec::with_capacity(batch.len());
    for a in batch {
        let mut c: DfExpr = col("source_table").eq(lit(a.row.source_value.clone()));
        if let Some(tv) = &a.row.target_value {
            c = c.and(col("target_table").eq(lit(tv.clone())));
        }
        let holds = a
            .expected
            .iter()
            .map(|old| {
                if old.is_null() {
                    col("last_watermark").is_null()
                } else {
                    col("last_watermark").eq(DfExpr::Literal(old.clone(), None))
                }
            })
            .collect::<Vec<_>>();
        let holds = any_of(holds).unwrap_or_else(|| lit(false));
        c = c.and(holds);
        conds.push((c, DfExpr::Literal(a.new.clone(), None)));
    }
    let (first, rest) = conds
        .split_first()
        .ok_or_else(|| Error::Other("a batch of advances with none in it".into()))?;
    let mut cases = datafusion::logical_expr::when(first.0.clone(), first.1.clone());
    for (c, v) in rest {
        cases = cases.when(c.clone(), v.clone());
    }
    let value = cases.otherwise(col("last_watermark"))?;
    let pred = any_of(conds.into_iter().map(|(c, _)| c).collect())
        .expect("a batch has one advance or more");
    Ok((pred, value))
}

/// A batch of advances applied row by row: what [`as_update`]'s CASE computes, without
/// planning it. Planning and evaluating a CASE of a few dozen branches for every commit of
/// the batch cost more than the rest of the copies did, and choosing the files by the
/// predicate made the Delta kernel test every file's statistics against every branch.
struct ByRow<'a> {
    /// The advances of each stored `source_table`, in the batch's order (the CASE's: the
    /// first that applies to a row wins).
    by_source: std::collections::HashMap<&'a str, Vec<&'a Advance>>,
}

impl<'a> ByRow<'a> {
    fn of(batch: &'a [Advance]) -> Self {
        let mut by_source: std::collections::HashMap<&str, Vec<&Advance>> = Default::default();
        for a in batch {
            by_source
                .entry(a.row.source_value.as_str())
                .or_default()
                .push(a);
        }
        ByRow { by_source }
    }

    /// The rows the batch is for, as the commit records them (DESCRIBE HISTORY shows it):
    /// `source_table IN (...)`, the names sorted. (The full condition, with the values each
    /// row must still hold, would cost more to write out than the advance itself.)
    fn predicate(&self) -> String {
        let mut names: Vec<&str> = self.by_source.keys().copied().collect();
        names.sort_unstable();
        let quoted: Vec<String> = names
            .iter()
            .map(|n| format!("'{}'", n.replace('\'', "''")))
            .collect();
        format!("source_table IN ({})", quoted.join(", "))
    }

    /// Whether a file whose `source_table` statistics are `low` and `high` may hold a row of
    /// the batch (a file without them may hold any).
    fn may_hold(&self, low: &Option<String>, high: &Option<String>) -> bool {
        let (Some(low), Some(high)) = (low, high) else {
            return true;
        };
        self.by_source
            .keys()
            .any(|name| low.as_str() <= *name && *name <= high.as_str())
    }
}

impl crate::statements::rewrite::RowChange for ByRow<'_> {
    /// Whether a file's `source_table` statistics admit one of the batch's names (a file
    /// without them may hold any).
    fn may_touch(&self, file: &deltalake::kernel::LogicalFileView) -> bool {
        self.may_hold(
            &source_bound(file.min_values()),
            &source_bound(file.max_values()),
        )
    }

    /// `rows` with the advances applied, and how many rows changed; None when none did.
    fn apply(&self, rows: &RecordBatch) -> Result<Option<(RecordBatch, u64)>> {
        use datafusion::arrow::compute::cast;
        let column = |name: &str| {
            rows.schema()
                .index_of(name)
                .map_err(|_| Error::Invalid(format!("the control table has no '{name}' column")))
        };
        let sources = cast(rows.column(column("source_table")?), &DataType::Utf8)?;
        let sources = sources.as_string::<i32>();
        let targets = match rows.schema().index_of("target_table") {
            Ok(i) => Some(cast(rows.column(i), &DataType::Utf8)?),
            Err(_) => None,
        };
        let targets = targets.as_ref().map(|t| t.as_string::<i32>());
        let at = column("last_watermark")?;
        let marks = rows.column(at);
        let mut news: Vec<Option<ScalarValue>> = vec![None; rows.num_rows()];
        let mut changed = 0;
        for (i, new) in news.iter_mut().enumerate() {
            if sources.is_null(i) {
                continue;
            }
            let Some(advances) = self.by_source.get(sources.value(i)) else {
                continue;
            };
            let mark = ScalarValue::try_from_array(marks, i)?;
            for a in advances {
                let target_holds = match &a.row.target_value {
                    None => true,
                    Some(t) => targets.is_some_and(|ts| ts.is_valid(i) && ts.value(i) == t),
                };
                if target_holds && a.holds(&mark, marks.data_type())? {
                    *new = Some(a.new.cast_to(marks.data_type())?);
                    changed += 1;
                    break;
                }
            }
        }
        if changed == 0 {
            return Ok(None);
        }
        let values = news
            .into_iter()
            .enumerate()
            .map(|(i, new)| match new {
                Some(v) => Ok(v),
                None => Ok(ScalarValue::try_from_array(marks, i)?),
            })
            .collect::<Result<Vec<_>>>()?;
        let mut columns = rows.columns().to_vec();
        columns[at] = cast(&ScalarValue::iter_to_array(values)?, marks.data_type())?;
        Ok(Some((
            RecordBatch::try_new(rows.schema(), columns)?,
            changed,
        )))
    }
}

impl Advance {
    /// Whether a row whose `last_watermark` is `mark` (of type `ty`) still holds one of the
    /// values this advance expects (SQL's `=`, and IS NULL for an expected NULL).
    fn holds(&self, mark: &ScalarValue, ty: &DataType) -> Result<bool> {
        for old in &self.expected {
            if old.is_null() {
                if mark.is_null() {
                    return Ok(true);
                }
            } else if !mark.is_null() && *mark == old.cast_to(ty)? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The `source_table` value of a file's min or max statistics, when they have one.
fn source_bound(stats: Option<delta_kernel::expressions::Scalar>) -> Option<String> {
    use delta_kernel::expressions::Scalar;
    use deltalake::kernel::StructDataExt;
    let Scalar::Struct(values) = stats? else {
        return None;
    };
    match values.value(values.index_of("source_table")?)? {
        Scalar::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// `a OR b OR ...` as a balanced tree (None for no terms). Planning walks an expression
/// recursively at every level (types, coercion, simplification), so a chain of the batch's
/// 50-odd advances cost the square of its length, a tree of it about its length: the batches
/// grow a little with the control table, and the chain made the job's cost per table grow.
fn any_of(mut terms: Vec<DfExpr>) -> Option<DfExpr> {
    match terms.len() {
        0 => None,
        1 => terms.pop(),
        n => {
            let right = terms.split_off(n / 2);
            Some(any_of(terms)?.or(any_of(right)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statements::rewrite::RowChange;

    fn ts(v: Option<i64>) -> ScalarValue {
        ScalarValue::TimestampMicrosecond(v, Some("UTC".into()))
    }

    fn advance(source: &str, target: Option<&str>, expected: &[Option<i64>], new: i64) -> Advance {
        Advance {
            row: ControlRow {
                table: TableName::new("main", "s", "ctl"),
                source_value: source.into(),
                target_value: target.map(Into::into),
                watermark_column: None,
                mark: ts(None),
                mark_type: ts(None).data_type(),
            },
            expected: expected.iter().map(|v| ts(*v)).collect(),
            new: ts(Some(new)),
        }
    }

    fn control_rows(rows: &[(Option<&str>, &str, Option<i64>)]) -> RecordBatch {
        use datafusion::arrow::array::{StringArray, TimestampMicrosecondArray};
        let sources = StringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>());
        let targets = StringArray::from(rows.iter().map(|r| Some(r.1)).collect::<Vec<_>>());
        let marks = TimestampMicrosecondArray::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())
            .with_timezone("UTC");
        RecordBatch::try_from_iter([
            ("source_table", Arc::new(sources) as _),
            ("target_table", Arc::new(targets) as _),
            ("last_watermark", Arc::new(marks) as _),
        ])
        .unwrap()
    }

    fn marks(batch: &RecordBatch) -> Vec<Option<i64>> {
        use datafusion::arrow::datatypes::TimestampMicrosecondType;
        let marks = batch.column_by_name("last_watermark").unwrap();
        marks
            .as_primitive::<TimestampMicrosecondType>()
            .iter()
            .collect()
    }

    /// The advances applied row by row do what the UPDATE's CASE does: a row takes the new
    /// value of the first advance of its source (and target, when the advance names one)
    /// whose expected values it still holds, NULL included; other rows keep theirs.
    #[test]
    fn advances_by_row_set_what_the_case_would() {
        let batch = [
            advance("a", Some("x"), &[Some(10)], 20),
            advance("b", None, &[None, Some(3)], 30),
            advance("c", Some("x"), &[Some(4)], 40),
            advance("a", Some("x"), &[Some(10)], 99),
            advance("d", Some("x"), &[Some(1), Some(2)], 50),
        ];
        let rows = control_rows(&[
            (Some("a"), "x", Some(10)),
            (Some("a"), "y", Some(10)),
            (Some("b"), "x", None),
            (Some("c"), "x", Some(5)),
            (None, "x", Some(1)),
            (Some("d"), "x", Some(2)),
            (Some("A"), "x", Some(10)),
        ]);
        let (after, changed) = ByRow::of(&batch).apply(&rows).unwrap().unwrap();
        assert_eq!(changed, 3);
        assert_eq!(
            marks(&after),
            [
                Some(20),
                Some(10),
                Some(30),
                Some(5),
                Some(1),
                Some(50),
                Some(10)
            ]
        );
        assert_eq!(after.schema(), rows.schema());
        // A row a concurrent run already moved on is left alone: nothing changes.
        let moved = control_rows(&[(Some("a"), "x", Some(15)), (Some("c"), "x", Some(5))]);
        assert!(ByRow::of(&batch).apply(&moved).unwrap().is_none());
    }

    /// Depth of an OR tree (a term that is not an OR counts 1).
    fn depth(e: &DfExpr) -> usize {
        match e {
            DfExpr::BinaryExpr(b) if b.op == datafusion::logical_expr::Operator::Or => {
                1 + depth(&b.left).max(depth(&b.right))
            }
            _ => 1,
        }
    }

    #[test]
    fn any_of_is_a_balanced_or_of_every_term() {
        assert!(any_of(vec![]).is_none());
        let terms: Vec<DfExpr> = (0..50).map(|i| col("x").eq(lit(i))).collect();
        let tree = any_of(terms.clone()).unwrap();
        assert_eq!(depth(&tree), 7, "50 terms: 6 levels of OR over the terms");
        let mut kept = vec![];
        let mut stack = vec![&tree];
        while let Some(e) = stack.pop() {
            match e {
                DfExpr::BinaryExpr(b) if b.op == datafusion::logical_expr::Operator::Or => {
                    stack.push(&b.right);
                    stack.push(&b.left);
                }
                term => kept.push(term.clone()),
            }
        }
        assert_eq!(kept, terms, "every term once, in order");
        assert_eq!(any_of(vec![lit(true)]), Some(lit(true)));
    }
}
