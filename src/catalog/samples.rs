//! The built-in, read-only `samples` catalog with one schema, `wanderbricks`: a small
//! vacation-rental marketplace (users, hosts, properties, bookings) modelled on Databricks'
//! `samples.wanderbricks`, so every shell has something to query without a warehouse.
//!
//! Tables are generated on first use by a hand-written splitmix64 generator seeded with
//! constants, using integer arithmetic only, so the data is identical on every run and
//! machine. `created_at` (`joined_at` for hosts) is an insert-time column: non-decreasing
//! with the id, spread over 2023-01-01..2025-06-30, with a few deliberate ties.

use std::fmt;
use std::sync::{Arc, OnceLock};

use arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array,
    Int64Array, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use datafusion::catalog::{CatalogProvider, SchemaProvider, Session, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_plan::ExecutionPlan;

/// Sample table names, sorted; the only tables `wanderbricks` knows.
pub const TABLES: &[&str] = &["bookings", "hosts", "properties", "users"];

/// Column lists in the shell's own SQL type names, parsed by [`schema`].
const BOOKINGS: &str = "booking_id BIGINT NOT NULL, user_id BIGINT, property_id BIGINT, \
    check_in DATE, check_out DATE, guests_count INT, total_amount DECIMAL(12,2), status STRING, \
    created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL";
const HOSTS: &str = "host_id BIGINT NOT NULL, name STRING, email STRING, country STRING, \
    is_superhost BOOLEAN, rating DOUBLE, joined_at TIMESTAMP NOT NULL";
const PROPERTIES: &str = "property_id BIGINT NOT NULL, host_id BIGINT, title STRING, \
    property_type STRING, city STRING, country STRING, bedrooms INT, base_price DECIMAL(10,2), \
    max_guests INT, created_at TIMESTAMP NOT NULL";
const USERS: &str = "user_id BIGINT NOT NULL, name STRING, email STRING, country STRING, \
    city STRING, user_type STRING, is_verified BOOLEAN, created_at TIMESTAMP NOT NULL";

/// Row counts, fixed so tests and docs can rely on them.
const N_USERS: usize = 5_000;
const N_HOSTS: usize = 1_000;
const N_PROPERTIES: usize = 3_000;
const N_BOOKINGS: usize = 8_000;
/// Rows per record batch: 8,000 bookings fit in 4 batches.
const BATCH_ROWS: usize = 2_048;
/// 2023-01-01T00:00:00Z and 2025-07-01T00:00:00Z in Unix seconds: the insert-time window.
const START_SECS: i64 = 1_672_531_200;
const END_SECS: i64 = 1_751_328_000;
const US_PER_SEC: i64 = 1_000_000;
const US_PER_DAY: i64 = 86_400 * US_PER_SEC;
/// Timezone the Delta warehouse attaches to TIMESTAMP columns.
const UTC: &str = "UTC";

#[rustfmt::skip]
const FIRST: &[&str] = &["Ana", "Ben", "Chloe", "David", "Elena", "Farid", "Grace", "Hiro",
    "Isabel", "Jonas", "Kofi", "Laura", "Mateo", "Nina", "Omar", "Priya", "Quentin", "Rosa",
    "Sven", "Tara", "Umar", "Valentina", "Wei", "Yara"];
#[rustfmt::skip]
const LAST: &[&str] = &["Almeida", "Brown", "Chen", "Dubois", "Eriksson", "Fischer", "Garcia",
    "Hansen", "Ito", "Jensen", "Kim", "Lopez", "Martin", "Novak", "Okafor", "Patel", "Rossi",
    "Silva", "Tanaka", "Usman", "Varga", "Williams", "Young", "Zhang"];
/// Cities paired with their countries so the two columns always agree.
#[rustfmt::skip]
const CITIES: &[(&str, &str)] = &[("New York", "United States"),
    ("San Francisco", "United States"), ("Miami", "United States"), ("Toronto", "Canada"),
    ("Vancouver", "Canada"), ("Mexico City", "Mexico"), ("London", "United Kingdom"),
    ("Edinburgh", "United Kingdom"), ("Paris", "France"), ("Nice", "France"),
    ("Barcelona", "Spain"), ("Madrid", "Spain"), ("Lisbon", "Portugal"), ("Rome", "Italy"),
    ("Florence", "Italy"), ("Berlin", "Germany"), ("Amsterdam", "Netherlands"),
    ("Tokyo", "Japan"), ("Kyoto", "Japan"), ("Sydney", "Australia"),
    ("Cape Town", "South Africa"), ("Rio de Janeiro", "Brazil"), ("Bangkok", "Thailand")];
/// (property_type, title word, min bedrooms, max bedrooms, base nightly price in dollars).
#[rustfmt::skip]
const KINDS: &[(&str, &str, u64, u64, i64)] = &[("apartment", "Apartment", 1, 3, 80),
    ("house", "House", 2, 5, 150), ("villa", "Villa", 3, 6, 300), ("cabin", "Cabin", 1, 3, 95),
    ("condo", "Condo", 1, 3, 110), ("loft", "Loft", 1, 2, 120),
    ("cottage", "Cottage", 1, 3, 105)];
#[rustfmt::skip]
const ADJECTIVES: &[&str] = &["Cozy", "Sunny", "Modern", "Charming", "Spacious", "Quiet",
    "Rustic", "Elegant", "Bright", "Historic"];

/// splitmix64: a tiny portable PRNG, so the samples need no `rand` and never drift.
struct Rng(u64);

impl Rng {
    /// Next raw 64-bit output.
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// An integer in `0..n` (`n > 0`); modulo bias is irrelevant for sample data.
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// True with probability `pct` percent.
    fn pct(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    /// A random duration below `max_secs`, in microseconds.
    fn micros(&mut self, max_secs: u64) -> i64 {
        self.below(max_secs * US_PER_SEC as u64) as i64
    }
    /// A random element of a non-empty slice.
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// One generated cell; it gets its arrow type from the schema when columns are assembled.
/// Integers cover BIGINT, INT, DATE (days), DECIMAL (cents) and TIMESTAMP (microseconds).
#[derive(Debug)]
enum V {
    I(i64),
    S(String),
    B(bool),
    F(f64),
    Null,
}
use V::{B, F, I, Null, S};

impl V {
    /// None for NULL; any other cell means generator and schema disagree (a bug here).
    fn null<T>(&self) -> Option<T> {
        match self {
            Null => None,
            _ => panic!("sample cell {self:?} does not fit its column"),
        }
    }
    /// The cell as BIGINT/INT/DATE/DECIMAL/TIMESTAMP.
    fn int(&self) -> Option<i64> {
        let I(x) = self else { return self.null() };
        Some(*x)
    }
    /// The cell as STRING.
    fn text(&self) -> Option<&str> {
        let S(x) = self else { return self.null() };
        Some(x.as_str())
    }
    /// The cell as BOOLEAN.
    fn flag(&self) -> Option<bool> {
        let B(x) = self else { return self.null() };
        Some(*x)
    }
    /// The cell as DOUBLE.
    fn real(&self) -> Option<f64> {
        let F(x) = self else { return self.null() };
        Some(*x)
    }
}

/// A text cell from a static string.
fn s(text: &str) -> V {
    S(text.to_string())
}

/// Insert-time column: one jittered slot per row keeps it strictly increasing inside the
/// window (whole-second gaps plus a microsecond part); every 613th row copies its
/// predecessor so a handful of ties exist.
fn created_at(rng: &mut Rng, n: usize) -> Vec<i64> {
    let slot = (END_SECS - START_SECS) / n as i64;
    let mut out: Vec<i64> = Vec::with_capacity(n);
    for i in 0..n {
        let secs = START_SECS + i as i64 * slot + rng.below(slot as u64) as i64;
        let us = secs * US_PER_SEC + rng.micros(1);
        let at = if i % 613 == 307 { out[i - 1] } else { us };
        out.push(at);
    }
    out
}

/// How many parents (of `parents` in total) existed when child `i` (of `children`) was
/// inserted, given both are spread evenly over the same window; at least one.
fn so_far(i: usize, parents: usize, children: usize) -> u64 {
    (i * parents / children).max(1) as u64
}

/// A random person's display name and an email derived from it and the row id.
fn person(rng: &mut Rng, id: i64, domain: &str) -> (V, V) {
    let (first, last) = (rng.pick(FIRST), rng.pick(LAST));
    let (f, l) = (first.to_ascii_lowercase(), last.to_ascii_lowercase());
    let email = format!("{f}.{l}{id}@{domain}");
    (S(format!("{first} {last}")), S(email))
}

/// `users`: marketplace accounts, mostly guests.
fn users() -> Vec<Vec<V>> {
    let mut rng = Rng(0x5EED_0001);
    let created = created_at(&mut rng, N_USERS);
    let mut rows = Vec::with_capacity(N_USERS);
    for (id, at) in (1_i64..).zip(created) {
        let (name, email) = person(&mut rng, id, "example.com");
        let (city, country) = rng.pick(CITIES);
        let kind = if rng.pct(12) { "host" } else { "guest" };
        let vetted = rng.pct(72);
        rows.push(vec![
            I(id),
            name,
            email,
            s(country),
            s(city),
            s(kind),
            B(vetted),
            I(at),
        ]);
    }
    rows
}

/// `hosts`: people who list properties; brand-new hosts have no rating yet (NULL).
fn hosts() -> Vec<Vec<V>> {
    let mut rng = Rng(0x5EED_0002);
    let joined = created_at(&mut rng, N_HOSTS);
    let mut rows = Vec::with_capacity(N_HOSTS);
    for (id, at) in (1_i64..).zip(joined) {
        let (name, email) = person(&mut rng, id, "hosts.example.com");
        let country = s(rng.pick(CITIES).1);
        let rated = !rng.pct(6);
        let hundredths = 350 + rng.below(151) as i64; // 3.50 ..= 5.00
        let star = rated && hundredths >= 480 && rng.pct(70); // superhost
        let rating = hundredths as f64 / 100.0;
        let rating = if rated { F(rating) } else { Null };
        rows.push(vec![I(id), name, email, country, B(star), rating, I(at)]);
    }
    rows
}

/// `properties`: listings, each owned by a host who had joined by (roughly) then.
fn properties() -> Vec<Vec<V>> {
    let mut rng = Rng(0x5EED_0003);
    let created = created_at(&mut rng, N_PROPERTIES);
    let mut rows = Vec::with_capacity(N_PROPERTIES);
    for (i, at) in created.into_iter().enumerate() {
        let id = i as i64 + 1;
        let host = 1 + rng.below(so_far(i, N_HOSTS, N_PROPERTIES)) as i64;
        let (kind, word, lo, hi, base) = rng.pick(KINDS);
        let rooms = (lo + rng.below(hi - lo + 1)) as i64;
        let (city, country) = rng.pick(CITIES);
        let title = S(format!("{} {word} in {city}", rng.pick(ADJECTIVES)));
        let dollars = base + rooms * 25 + rng.below(60) as i64;
        let cents = dollars * 100 - rng.below(2) as i64; // half the prices end in .99
        let guests = rooms * 2 + rng.below(2) as i64;
        rows.push(vec![
            I(id),
            I(host),
            title,
            s(kind),
            s(city),
            s(country),
            I(rooms),
            I(cents),
            I(guests),
            I(at),
        ]);
    }
    rows
}

/// `bookings`: stays booked by users at properties that existed when the booking was made;
/// amounts follow the property's price, status and updated_at follow the stay's timeline
/// as of the end of the window.
fn bookings() -> Vec<Vec<V>> {
    let props = properties();
    let mut rng = Rng(0x5EED_0004);
    let (end_us, end_day) = (END_SECS * US_PER_SEC, END_SECS / 86_400);
    let created = created_at(&mut rng, N_BOOKINGS);
    let mut rows = Vec::with_capacity(N_BOOKINGS);
    for (i, made) in created.into_iter().enumerate() {
        let id = i as i64 + 1;
        let user = 1 + rng.below(so_far(i, N_USERS, N_BOOKINGS)) as i64;
        let prop = &props[rng.below(so_far(i, N_PROPERTIES, N_BOOKINGS)) as usize];
        let [pid, price, cap] = [0usize, 7, 8].map(|j| prop[j].int().unwrap());
        let day_in = made / US_PER_DAY + 1 + rng.below(120) as i64;
        let max_nights = if rng.pct(20) { 21 } else { 7 };
        let nights = 1 + rng.below(max_nights) as i64;
        let day_out = day_in + nights;
        let guests = 1 + rng.below(cap as u64) as i64;
        let total = price * nights * 112 / 100 + price / 4; // + 12% service fee and cleaning
        let roll = rng.below(100);
        let checkout_us = day_out * US_PER_DAY + 11 * 3_600 * US_PER_SEC;
        let (status, updated) = if roll < 8 {
            ("cancelled", made + 1 + rng.micros(72 * 3_600))
        } else if day_out < end_day {
            ("completed", checkout_us + rng.micros(8 * 3_600)) // closed after check-out
        } else if roll < 20 {
            ("pending", made)
        } else {
            ("confirmed", made + 1 + rng.micros(2 * 3_600))
        };
        let updated = updated.min(end_us - 1).max(made);
        rows.push(vec![
            I(id),
            I(user),
            I(pid),
            I(day_in),
            I(day_out),
            I(guests),
            I(total),
            s(status),
            I(made),
            I(updated),
        ]);
    }
    rows
}

/// The warehouse's TIMESTAMP type.
fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into()))
}

/// Parses a `name TYPE [NOT NULL], ...` column list into an arrow schema.
fn schema(ddl: &str) -> SchemaRef {
    let fields: Vec<Field> = ddl
        .split(", ")
        .map(|spec| {
            let mut words = spec.split_whitespace();
            let (name, sql_type) = (words.next().unwrap(), words.next().unwrap());
            let data_type = match sql_type {
                "BIGINT" => DataType::Int64,
                "INT" => DataType::Int32,
                "STRING" => DataType::Utf8,
                "BOOLEAN" => DataType::Boolean,
                "DOUBLE" => DataType::Float64,
                "DATE" => DataType::Date32,
                "TIMESTAMP" => ts_type(),
                "DECIMAL(10,2)" => DataType::Decimal128(10, 2),
                "DECIMAL(12,2)" => DataType::Decimal128(12, 2),
                other => panic!("sample schema uses unknown type {other}"),
            };
            Field::new(name, data_type, !spec.ends_with("NOT NULL"))
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// Erases an array's concrete type.
fn col<A: Array + 'static>(array: A) -> ArrayRef {
    Arc::new(array)
}

/// Turns generated rows into one arrow column per schema field.
fn columns(schema: &Schema, rows: &[Vec<V>]) -> Vec<ArrayRef> {
    let cells = |j: usize| rows.iter().map(move |row| &row[j]);
    let ints = |j: usize| cells(j).map(V::int);
    let small = |j: usize| ints(j).map(|v| v.map(|x| x as i32));
    let fields = schema.fields().iter().enumerate();
    fields
        .map(|(j, field)| match field.data_type() {
            DataType::Int64 => col(ints(j).collect::<Int64Array>()),
            DataType::Int32 => col(small(j).collect::<Int32Array>()),
            DataType::Date32 => col(small(j).collect::<Date32Array>()),
            DataType::Utf8 => col(cells(j).map(V::text).collect::<StringArray>()),
            DataType::Boolean => col(cells(j).map(V::flag).collect::<BooleanArray>()),
            DataType::Float64 => col(cells(j).map(V::real).collect::<Float64Array>()),
            DataType::Timestamp(..) => {
                let micros: TimestampMicrosecondArray = ints(j).collect();
                col(micros.with_timezone(UTC))
            }
            DataType::Decimal128(p, s) => {
                let cents: Decimal128Array = ints(j).map(|v| v.map(i128::from)).collect();
                col(cents
                    .with_precision_and_scale(*p, *s)
                    .expect("valid decimal type"))
            }
            other => panic!("no sample column has type {other}"),
        })
        .collect()
}

/// Build one sample table's batches (exposed for tests and for COPY sources): None if unknown name.
/// Each table is generated once per process and then shared; clones only copy `Arc`s.
pub fn sample_batches(table: &str) -> Option<(SchemaRef, Vec<RecordBatch>)> {
    static BUILT: [OnceLock<(SchemaRef, Vec<RecordBatch>)>; 4] = [const { OnceLock::new() }; 4];
    let name = table.to_ascii_lowercase();
    let idx = TABLES.iter().position(|t| *t == name)?;
    Some(BUILT[idx].get_or_init(|| build(&name)).clone())
}

/// Generates one sample table (a name from [`TABLES`]) from scratch.
fn build(table: &str) -> (SchemaRef, Vec<RecordBatch>) {
    let (ddl, rows) = match table {
        "bookings" => (BOOKINGS, bookings()),
        "hosts" => (HOSTS, hosts()),
        "properties" => (PROPERTIES, properties()),
        "users" => (USERS, users()),
        _ => unreachable!("{table} is not a sample table"),
    };
    let schema = schema(ddl);
    let full = RecordBatch::try_new(schema.clone(), columns(&schema, &rows))
        .expect("sample columns match their schema");
    let n = full.num_rows();
    let batches = (0..n)
        .step_by(BATCH_ROWS)
        .map(|at| full.slice(at, BATCH_ROWS.min(n - at)));
    (schema, batches.collect())
}

/// The `samples` catalog provider (read-only). Schema names: ["wanderbricks"].
#[derive(Debug, Default)]
pub struct SamplesCatalog {
    /// Created on first lookup and shared, so generated tables stay cached across queries.
    schema: OnceLock<Arc<Wanderbricks>>,
}

impl CatalogProvider for SamplesCatalog {
    /// The single schema.
    fn schema_names(&self) -> Vec<String> {
        vec!["wanderbricks".to_string()]
    }

    /// The shared `wanderbricks` schema, any letter case.
    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        if !name.eq_ignore_ascii_case("wanderbricks") {
            return None;
        }
        let schema: Arc<dyn SchemaProvider> = self.schema.get_or_init(Default::default).clone();
        Some(schema)
    }
    // register_schema / deregister_schema keep the trait's "not supported" defaults.
}

/// The `wanderbricks` schema: table_names(), table(name) async returning a datafusion MemTable
/// (behind a read-only wrapper) built on first request and cached, table_exist(name).
#[derive(Debug, Default)]
pub struct Wanderbricks {
    /// One lazily built table per entry of [`TABLES`], same order.
    tables: [OnceLock<Arc<dyn TableProvider>>; 4],
}

#[async_trait::async_trait]
impl SchemaProvider for Wanderbricks {
    /// All sample tables, without building any.
    fn table_names(&self) -> Vec<String> {
        TABLES.iter().map(|t| t.to_string()).collect()
    }

    /// The table, generated on the first request and cached for later ones.
    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
        let name = name.to_ascii_lowercase();
        let Some(idx) = TABLES.iter().position(|t| *t == name) else {
            return Ok(None);
        };
        let slot = &self.tables[idx];
        if let Some(table) = slot.get() {
            return Ok(Some(Arc::clone(table)));
        }
        let (schema, batches) = sample_batches(&name).expect("every listed table has rows");
        let mem = MemTable::try_new(schema, vec![batches])?;
        let table: Arc<dyn TableProvider> = Arc::new(ReadOnly(mem));
        // A concurrent first request may have won the race; both built identical data.
        Ok(Some(Arc::clone(slot.get_or_init(|| table))))
    }

    /// Answers without generating data, so listing tables stays free.
    async fn table_type(&self, name: &str) -> Result<Option<TableType>> {
        Ok(self.table_exist(name).then_some(TableType::Base))
    }

    /// Case-insensitive membership in [`TABLES`].
    fn table_exist(&self, name: &str) -> bool {
        TABLES.contains(&name.to_ascii_lowercase().as_str())
    }
}

/// Exposes only scans of a MemTable, so INSERT/UPDATE/DELETE/TRUNCATE on samples fail
/// (trait defaults) instead of silently mutating the shared cached data. Its Debug is
/// short so printing the catalog never dumps rows.
struct ReadOnly(MemTable);

impl fmt::Debug for ReadOnly {
    /// Never dumps rows.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReadOnly(MemTable)")
    }
}

#[async_trait::async_trait]
impl TableProvider for ReadOnly {
    /// The sample table's schema.
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }

    /// A base table, like warehouse tables.
    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// Delegates to the MemTable (projection and limit included).
    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.0.scan(state, projection, filters, limit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use arrow::compute::concat_batches;
    use arrow::datatypes::{Date32Type, Int64Type, TimestampMicrosecondType as Ts};
    use datafusion::prelude::SessionContext;

    /// One table as a single batch.
    fn full(table: &str) -> RecordBatch {
        let (schema, batches) = sample_batches(table).unwrap();
        concat_batches(&schema, &batches).unwrap()
    }

    /// A TIMESTAMP column's microseconds.
    fn micros(batch: &RecordBatch, name: &str) -> Vec<i64> {
        let column = batch.column_by_name(name).unwrap();
        column.as_primitive::<Ts>().values().to_vec()
    }

    /// Sizes, 1-4 batches, case-insensitive names, identical rebuilds.
    #[test]
    fn row_counts_batching_and_determinism() {
        let expected = [N_BOOKINGS, N_HOSTS, N_PROPERTIES, N_USERS];
        for (t, n) in TABLES.iter().zip(expected) {
            let (schema, batches) = sample_batches(&t.to_uppercase()).unwrap();
            assert!((1..=4).contains(&batches.len()), "{t}");
            assert!(batches.iter().all(|b| b.schema() == schema));
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            assert_eq!(rows, n, "{t}");
            assert!(build(t) == (schema, batches), "{t} is not deterministic");
        }
        assert!(sample_batches("reviews").is_none());
    }

    /// Insert-time columns are sorted, tied somewhere, and inside the window.
    #[test]
    fn insert_time_is_non_decreasing_with_ties() {
        for t in TABLES {
            let b = full(t);
            let name = if *t == "hosts" {
                "joined_at"
            } else {
                "created_at"
            };
            let field = b.schema().field_with_name(name).unwrap().clone();
            assert!(!field.is_nullable() && field.data_type() == &ts_type());
            let v = micros(&b, name);
            assert!(v.windows(2).all(|w| w[0] <= w[1]), "{t}: not sorted");
            assert!(v.windows(2).any(|w| w[0] == w[1]), "{t}: no tie");
            assert!(v[0] >= START_SECS * US_PER_SEC);
            assert!(v[v.len() - 1] < END_SECS * US_PER_SEC);
        }
    }

    /// NOT NULL holds, and bookings are updated after creation and end after they start.
    #[test]
    fn not_null_columns_and_bookings_timeline() {
        for t in TABLES {
            let b = full(t);
            assert!(!b.schema().field(0).is_nullable(), "{t}: id is NOT NULL");
            for (f, c) in b.schema().fields().iter().zip(b.columns()) {
                assert!(f.is_nullable() || c.null_count() == 0, "{t}.{}", f.name());
            }
        }
        let b = full("bookings");
        let (created, updated) = (micros(&b, "created_at"), micros(&b, "updated_at"));
        assert!(created.iter().zip(&updated).all(|(c, u)| c <= u));
        let days = |j: usize| b.column(j).as_primitive::<Date32Type>().values().to_vec();
        let (ins, outs) = (days(3), days(4));
        assert!(ins.iter().zip(&outs).all(|(i, o)| i < o));
    }

    /// End to end through DataFusion: lookup, caching, a join, and refused writes.
    #[tokio::test]
    async fn catalog_is_lazy_cached_queryable_and_read_only() {
        let cat = Arc::new(SamplesCatalog::default());
        assert_eq!(cat.schema_names(), vec!["wanderbricks"]);
        assert!(cat.schema("other").is_none());
        let schema = cat.schema("WanderBricks").unwrap();
        assert!(schema.table_exist("BOOKINGS") && !schema.table_exist("reviews"));
        assert_eq!(schema.table_names(), TABLES.to_vec());
        let a = schema.table("Users").await.unwrap().unwrap();
        let b = schema.table("users").await.unwrap().unwrap();
        assert!(Arc::ptr_eq(&a, &b), "tables are cached");
        assert!(schema.table("reviews").await.unwrap().is_none());
        let other = Arc::new(Wanderbricks::default());
        assert!(cat.register_schema("x", other).is_err());

        let ctx = SessionContext::new();
        ctx.register_catalog("samples", cat);
        let sql = "SELECT count(*) FROM samples.wanderbricks.bookings b \
                   JOIN samples.wanderbricks.properties p USING (property_id)";
        let rows = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let count = rows[0].column(0).as_primitive::<Int64Type>().value(0);
        assert_eq!(count, N_BOOKINGS as i64);

        let insert = "INSERT INTO samples.wanderbricks.hosts \
                      SELECT * FROM samples.wanderbricks.hosts";
        let failed = match ctx.sql(insert).await {
            Err(_) => true,
            Ok(df) => df.collect().await.is_err(),
        };
        assert!(failed, "samples must be read-only");
    }
}
