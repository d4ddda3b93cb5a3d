//! The warehouse: a directory of `<catalog>/<schema>/<table>/` Delta tables, its naming rules,
//! and the DataFusion catalog providers that open tables lazily (start-up never scans it).

pub mod log;
mod log_cache;
pub use log_cache::{forget_listings, written_here};
mod log_disk;
pub mod place;
pub use place::Place;
pub mod samples;
pub mod store;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod catalogs;
pub use catalogs::*;

mod providers;
pub use providers::*;

mod definitions;
pub mod external;
pub mod foreign;
pub mod kernel;
pub use definitions::{Function, Param, Returns, View};

use deltalake::DeltaTable;
use url::Url;

use crate::error::{Error, Result};

/// The built-in read-only catalog of sample tables.
pub const SAMPLES: &str = "samples";
/// The catalog reserved for tidemark's own tables (run history).
pub const SYSTEM: &str = "system";
/// The default catalog and schema: they always exist (their directories appear on first write).
pub const MAIN: &str = "main";
pub const DEFAULT_SCHEMA: &str = "default";
/// Hidden in-memory catalog holding per-statement helpers (time-travel snapshots).
pub const SCRATCH: &str = "__tidemark";

/// A fully resolved three-part table name, lower-cased (names are case-insensitive).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableName {
    pub catalog: String,
    pub schema: String,
    pub table: String,
}

impl TableName {
    /// Build from parts, lower-casing them.
    pub fn new(catalog: &str, schema: &str, table: &str) -> Self {
        TableName {
            catalog: catalog.to_lowercase(),
            schema: schema.to_lowercase(),
            table: table.to_lowercase(),
        }
    }

    /// Resolve a one-, two- or three-part name against the current catalog and schema.
    pub fn resolve(parts: &[String], current_catalog: &str, current_schema: &str) -> Result<Self> {
        match parts {
            [t] => Ok(TableName::new(current_catalog, current_schema, t)),
            [s, t] => Ok(TableName::new(current_catalog, s, t)),
            [c, s, t] => Ok(TableName::new(c, s, t)),
            _ => Err(Error::Invalid(format!(
                "'{}' is not a table name: use table, schema.table or catalog.schema.table",
                parts.join(".")
            ))),
        }
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}.{}",
            quote_ident(&self.catalog),
            quote_ident(&self.schema),
            quote_ident(&self.table)
        )
    }
}

/// A name in back-quotes, always (a column named `current_date` or `null` stays a name).
pub fn backquoted(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// Quote a name with back-quotes only when it needs them.
pub fn quote_ident(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_string()
    } else {
        backquoted(name)
    }
}

/// Split a possibly back-quoted, dot-separated name ("a.`b.c`.d") into parts.
pub fn split_qualified(name: &str) -> Result<Vec<String>> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = name.trim().chars().peekable();
    let mut quoted_part = false;
    while let Some(c) = chars.next() {
        match c {
            '`' => {
                quoted_part = true;
                loop {
                    match chars.next() {
                        Some('`') if chars.peek() == Some(&'`') => {
                            chars.next();
                            cur.push('`');
                        }
                        Some('`') => break,
                        Some(ch) => cur.push(ch),
                        None => {
                            return Err(Error::Invalid(format!(
                                "unterminated back-quote in name '{name}'"
                            )));
                        }
                    }
                }
            }
            '.' => {
                if cur.is_empty() && !quoted_part {
                    return Err(Error::Invalid(format!("empty name part in '{name}'")));
                }
                parts.push(std::mem::take(&mut cur));
                quoted_part = false;
            }
            c if c.is_whitespace() && !quoted_part => {
                return Err(Error::Invalid(format!(
                    "'{name}' is not a valid name: it contains whitespace (back-quote names with special characters)"
                )));
            }
            c => cur.push(c),
        }
    }
    if cur.is_empty() && !quoted_part {
        return Err(Error::Invalid(format!("'{name}' is not a valid name")));
    }
    parts.push(cur);
    Ok(parts)
}

/// Checks a name part before it becomes a directory: no separators, no dot-files, bounded length.
fn check_part(kind: &str, name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > 255
        || name.starts_with('.')
        || name.contains(['/', '\\', '\0'])
    {
        return Err(Error::Invalid(format!(
            "invalid {kind} name '{}': names must be 1-255 bytes without '/', '\\' or a leading '.'",
            name.chars().take(80).collect::<String>()
        )));
    }
    Ok(())
}

/// The warehouse root and how names map to paths.
#[derive(Debug)]
pub struct Warehouse {
    root: Place,
    /// The object store every table is opened with.
    store: Arc<store::WarehouseStore>,
}

impl Warehouse {
    /// A warehouse rooted at `root` (created lazily on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        kernel::install();
        let root = root.into();
        let root = std::path::absolute(&root).unwrap_or(root);
        Warehouse {
            root: Place::Local(root),
            store: Default::default(),
        }
    }

    /// A warehouse on the object store at `url` (`s3://bucket/prefix`); must be called
    /// inside the runtime.
    pub fn on_store(url: &Url) -> Result<Self> {
        kernel::install();
        Ok(Warehouse {
            root: Place::on_store(url)?,
            store: Default::default(),
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Place {
        &self.root
    }

    /// Whether tidemark may write in `dir` (the warehouse root when None), asked of the
    /// operating system itself: a probe file created and removed at once. Permissions, a
    /// read-only mount or an immutable directory are then one clear error, found before a
    /// statement writes anything (delta-rs' Parquet writer panics on them mid-write). A
    /// directory that does not exist yet passes: creating it reports its own error.
    pub fn check_writable(&self, dir: Option<&Place>) -> Result<()> {
        // On an object store the first write's probe asks the store (see
        // [`external::check_safe_commits`]).
        let Some(dir) = dir.unwrap_or(&self.root).local() else {
            return Ok(());
        };
        // Asked of the kernel (may this process make files here?), not tried with a file made
        // and deleted: a job checks every target, and on ext4 each file deleted makes the
        // next files' inode search longer for a minute.
        match may_make_files(dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                Err(Error::Invalid(format!(
                    "cannot write in {}: {e}; nothing was changed (the warehouse or table is \
                     read-only for this user: run tidemark as a user who may write there, or \
                     use a writable warehouse)",
                    dir.display()
                )))
            }
            Err(e) => Err(Error::Invalid(format!(
                "cannot write in {}: {e}; nothing was changed",
                dir.display()
            ))),
        }
    }

    /// Open a table a statement is about to write: it must exist, and its directory and log
    /// must be writable for this user (see [`Warehouse::check_writable`]).
    pub async fn open_for_write(&self, name: &TableName) -> Result<DeltaTable> {
        let t = self.open(name).await?;
        self.check_table_writable(name)?;
        external::check_safe_commits(&t).await?;
        Ok(t)
    }

    /// Whether an existing table's directory and log are writable for this user (a table on
    /// an object store: see [`external::check_safe_commits`]).
    pub fn check_table_writable(&self, name: &TableName) -> Result<()> {
        let Some(dir) = self.data_dir(name)? else {
            return Ok(());
        };
        self.check_writable(Some(&Place::Local(log::dir(&dir))))?;
        self.check_writable(Some(&Place::Local(dir)))
    }

    /// Directory of a catalog.
    pub fn catalog_path(&self, catalog: &str) -> Result<Place> {
        check_part("catalog", catalog)?;
        self.check_store_name("catalog", catalog)?;
        // `_connections` and the like are the warehouse's own.
        if catalog.starts_with('_') {
            return Err(Error::Invalid(format!(
                "a catalog name cannot start with _ ('{catalog}'): those are the warehouse's own"
            )));
        }
        Ok(self.root.join(catalog))
    }

    /// Directory of a schema.
    pub fn schema_path(&self, catalog: &str, schema: &str) -> Result<Place> {
        check_part("schema", schema)?;
        self.check_store_name("schema", schema)?;
        if self.is_foreign(catalog) {
            return Err(self.foreign_error(catalog, &format!("{catalog}.{schema}")));
        }
        Ok(self.catalog_path(catalog)?.join(schema))
    }

    /// Directory of a table.
    pub fn table_path(&self, name: &TableName) -> Result<Place> {
        check_part("table", &name.table)?;
        self.check_store_name("table", &name.table)?;
        Ok(self
            .schema_path(&name.catalog, &name.schema)?
            .join(&name.table))
    }

    /// On a store, a name must be a key part as it is (delta-rs and the store's own escaping
    /// of characters such as `%`, `#` or `~` would put a table and its name at different keys).
    fn check_store_name(&self, kind: &str, name: &str) -> Result<()> {
        if self.root.local().is_some() {
            return Ok(());
        }
        let plain = |c: char| c.is_alphanumeric() || "_-.=+@$ ,;:!'()&".contains(c);
        match name.chars().find(|c| !plain(*c)) {
            None => Ok(()),
            Some(c) => Err(Error::Invalid(format!(
                "invalid {kind} name '{name}' in a warehouse on an object store: {c:?} would be escaped in the store's keys (use letters, digits, '_', '-' and '.')"
            ))),
        }
    }

    /// URL of a table, as delta-rs wants it: its directory, or an external table's location.
    pub fn table_url(&self, name: &TableName) -> Result<Url> {
        let path = self.table_path(name)?;
        if let Some(url) = self.table_link(name, &path) {
            return Ok(url);
        }
        path.url()
    }

    /// Where table `name` (at `path`) links to. Never asked of tidemark's own tables: nothing
    /// can link from the `system` catalog (one read less per run on a store).
    fn table_link(&self, name: &TableName, path: &Place) -> Option<Url> {
        if name.catalog == SYSTEM {
            return None;
        }
        external::link(path)
    }

    /// The local directory holding a table's data and log: its directory in the warehouse, an
    /// external table's local location, or None for a table on an object store.
    pub fn data_dir(&self, name: &TableName) -> Result<Option<PathBuf>> {
        let path = self.table_path(name)?;
        let url = match self.table_link(name, &path) {
            Some(url) => url,
            // A name on a store has no local directory, wherever its schema's tables live.
            None if path.local().is_none() => return Ok(None),
            // A table not made yet, in a schema whose tables live elsewhere: its place is
            // chosen when it is made (no local directory to write into before that).
            None => match self.schema_location(&name.catalog, &name.schema) {
                Some(_) if !path.has_version() => return Ok(None),
                _ => return Ok(path.local().map(Path::to_path_buf)),
            },
        };
        Ok(if external::is_remote(&url) {
            None
        } else {
            url.to_file_path().ok()
        })
    }

    /// Where the tables of a schema made with a MANAGED LOCATION live (None: in the
    /// warehouse directory).
    pub fn schema_location(&self, catalog: &str, schema: &str) -> Option<Url> {
        external::link(&self.schema_path(catalog, schema).ok()?)
    }

    /// Where the schemas of a catalog made with a MANAGED LOCATION live.
    pub fn catalog_location(&self, catalog: &str) -> Option<Url> {
        external::link(&self.catalog_path(catalog).ok()?)
    }

    /// The directory of a table about to be created. In a schema with a MANAGED LOCATION the
    /// table lives at `<location>/<table>`, linked from its name as a managed table (its data
    /// goes with it); a location that already holds a table is refused, naming the way to
    /// register it.
    pub async fn prepare_new_table(&self, name: &TableName) -> Result<()> {
        let dir = self.table_path(name)?;
        // On a store a table's directory comes with its first file.
        if let Some(path) = dir.local() {
            std::fs::create_dir_all(path)?;
        }
        // A link already there: an external table being created, or a create stopped half-way
        // (its location's table, if that create committed, is taken up again).
        if external::link(&dir).is_some() || dir.has_version() {
            return Ok(());
        }
        let Some(base) = self.schema_location(&name.catalog, &name.schema) else {
            return Ok(());
        };
        // A place of its own: a name made again after a DROP, or renamed away, never meets
        // another table's files.
        let url = external::child(
            &base,
            &format!(
                "{}-{}",
                name.table,
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            ),
        );
        let refuse = |e: Error| {
            dir.remove_empty_dir();
            e
        };
        external::check_empty(&url).await.map_err(refuse)?;
        // Another process creating this name at this moment wrote its link first: this
        // create goes to its place, where only one of the two commits.
        external::write_creating_link(&dir, &url, true).map(|_| ())
    }

    /// After a create of `name` succeeded: a link made for it names the table now.
    pub fn finish_create(&self, name: &TableName) -> Result<()> {
        external::finish_link(&self.table_path(name)?)
    }

    /// After a create of `name` failed: a link made for it goes if its location holds no
    /// table (the next create starts over), and names the table if another process made it.
    pub async fn forget_failed_create(&self, name: &TableName) {
        let Ok(dir) = self.table_path(name) else {
            return;
        };
        // Only a link this process wrote: another process's create may commit there yet.
        let Some(url) = external::read_link(&dir)
            .filter(|l| l.creating && external::is_mine(l))
            .map(|l| l.url)
        else {
            return;
        };
        match external::holds_table(&url).await {
            Ok(false) => {
                let _ = dir.join(external::LINK).remove_file();
                // Only an empty directory: another create may be using it.
                dir.remove_empty_dir();
            }
            Ok(true) => {
                let _ = external::finish_link(&dir);
            }
            Err(_) => {}
        }
    }

    /// The location an external table links to (None: a managed table).
    pub fn external_location(&self, name: &TableName) -> Option<Url> {
        self.table_link(name, &self.table_path(name).ok()?)
    }

    /// Whether a directory holds a Delta table: a log with a version in it (see
    /// [`log::has_version`]), or a link to one elsewhere (an external table).
    pub fn is_table_dir(path: &Place) -> bool {
        external::names_table(path) || path.has_version()
    }

    /// [`Warehouse::is_table_dir`], with a store that does not answer an error.
    fn try_is_table_dir(path: &Place) -> Result<bool> {
        if path.local().is_some() {
            return Ok(Self::is_table_dir(path));
        }
        Ok(external::try_names_table(path)? || path.try_has_version()?)
    }

    /// Every place the warehouse links to: external and managed tables' locations and the
    /// MANAGED LOCATIONs of catalogs and schemas, each with what links it ("table c.s.t").
    pub fn links(&self) -> Vec<(String, Url)> {
        let mut found = vec![];
        for catalog in self.root.list(true) {
            let Ok(cdir) = self.catalog_path(&catalog) else {
                continue;
            };
            if let Some(url) = external::link(&cdir) {
                found.push((format!("catalog {catalog}"), url));
            }
            for schema in cdir.list(true) {
                let sdir = cdir.join(&schema);
                if let Some(url) = external::link(&sdir) {
                    found.push((format!("schema {catalog}.{schema}"), url));
                }
                for table in sdir.list(true) {
                    let tdir = sdir.join(&table);
                    if let Some(url) = external::read_link(&tdir)
                        .filter(|l| !l.creating)
                        .map(|l| l.url)
                    {
                        found.push((format!("table {catalog}.{schema}.{table}"), url));
                    }
                }
            }
        }
        found
    }

    /// A new LOCATION must be a place of its own: not in the warehouse directory, and not
    /// overlapping a place another name links to (two names for one table would each keep
    /// their own copy record: a copy through the second would copy every row again).
    pub fn check_new_location(&self, url: &Url) -> Result<()> {
        let overlaps_root = match self.root.local() {
            Some(root) => {
                let root = external::real_path(root);
                url.to_file_path()
                    .is_ok_and(|path| path.starts_with(&root) || root.starts_with(&path))
            }
            None => external::overlaps(url, &self.root.url()?),
        };
        if overlaps_root {
            return Err(Error::Invalid(format!(
                "LOCATION '{}' overlaps the warehouse {} {}: an external table lives outside it (leave LOCATION out for a table of the warehouse)",
                external::shown(url),
                if self.root.local().is_some() {
                    "directory"
                } else {
                    "at"
                },
                self.root
            )));
        }
        if let Some((what, theirs)) = self
            .links()
            .into_iter()
            .find(|(_, theirs)| external::overlaps(url, theirs))
        {
            return Err(Error::AlreadyExists(format!(
                "LOCATION '{}' overlaps {} of {what}: each place has one name (use {what}, or another location)",
                external::shown(url),
                external::shown(&theirs)
            )));
        }
        Ok(())
    }

    /// Catalog names on disk (plus the built-in ones), sorted.
    pub fn catalogs(&self) -> Vec<String> {
        self.try_catalogs()
            .unwrap_or_else(|_| with_builtins(vec![], [MAIN, SAMPLES, SYSTEM]))
    }

    /// [`Warehouse::catalogs`], with a store that does not answer an error (SHOW CATALOGS
    /// must not list fewer than there are).
    pub fn try_catalogs(&self) -> Result<Vec<String>> {
        Ok(with_builtins(
            self.root.try_list(true)?,
            [MAIN, SAMPLES, SYSTEM],
        ))
    }

    /// Schema names of a catalog, sorted.
    pub fn schemas(&self, catalog: &str) -> Vec<String> {
        self.try_schemas(catalog).unwrap_or_default()
    }

    /// [`Warehouse::schemas`], with a store that does not answer an error.
    pub fn try_schemas(&self, catalog: &str) -> Result<Vec<String>> {
        if catalog == SAMPLES {
            return Ok(vec!["wanderbricks".into()]);
        }
        let names = match self.catalog_path(catalog) {
            Ok(p) => p.try_list(true)?,
            Err(_) => vec![],
        };
        Ok(if catalog == MAIN {
            with_builtins(names, [DEFAULT_SCHEMA])
        } else {
            names
        })
    }

    /// Table names of a schema, sorted.
    pub fn tables(&self, catalog: &str, schema: &str) -> Vec<String> {
        self.try_tables(catalog, schema).unwrap_or_default()
    }

    /// [`Warehouse::tables`], with a store that does not answer an error (SHOW TABLES must not
    /// list fewer than there are).
    pub fn try_tables(&self, catalog: &str, schema: &str) -> Result<Vec<String>> {
        if catalog == SAMPLES {
            return Ok(if schema == "wanderbricks" {
                samples::TABLES.iter().map(|s| s.to_string()).collect()
            } else {
                vec![]
            });
        }
        let Ok(dir) = self.schema_path(catalog, schema) else {
            return Ok(vec![]);
        };
        let mut tables = vec![];
        for t in dir.try_list(true)? {
            if Self::try_is_table_dir(&dir.join(&t))? {
                tables.push(t);
            }
        }
        Ok(tables)
    }

    /// Whether a catalog exists (built-ins always do).
    pub fn catalog_exists(&self, catalog: &str) -> bool {
        catalog == SAMPLES
            || catalog == SYSTEM
            || catalog == MAIN
            || self.catalog_path(catalog).is_ok_and(|p| p.is_dir())
    }

    /// Whether a schema exists.
    pub fn schema_exists(&self, catalog: &str, schema: &str) -> bool {
        if catalog == SAMPLES {
            return schema == "wanderbricks";
        }
        (catalog == MAIN && schema == DEFAULT_SCHEMA)
            || self.schema_path(catalog, schema).is_ok_and(|p| p.is_dir())
    }

    /// Whether a table exists.
    pub fn table_exists(&self, name: &TableName) -> bool {
        if name.catalog == SAMPLES {
            return name.schema == "wanderbricks" && samples::TABLES.contains(&name.table.as_str());
        }
        self.table_path(name).is_ok_and(|p| Self::is_table_dir(&p))
    }

    /// Explain why `name` does not resolve, suggesting the closest existing names.
    pub fn missing_table_error(&self, name: &TableName) -> Error {
        if self.is_foreign(&name.catalog) {
            return self.foreign_error(&name.catalog, &name.to_string());
        }
        if !self.catalog_exists(&name.catalog) {
            return Error::NotFound(format!(
                "catalog '{}' not found{} (create it with CREATE CATALOG {})",
                name.catalog,
                suggest(&name.catalog, &self.catalogs()),
                quote_ident(&name.catalog)
            ));
        }
        if !self.schema_exists(&name.catalog, &name.schema) {
            return Error::NotFound(format!(
                "schema '{}.{}' not found{} (create it with CREATE SCHEMA {}.{})",
                name.catalog,
                name.schema,
                suggest(&name.schema, &self.schemas(&name.catalog)),
                quote_ident(&name.catalog),
                quote_ident(&name.schema)
            ));
        }
        if self.view_exists(name) {
            return Error::Invalid(format!(
                "{name} is a view, not a table: a view is read-only and has no Delta log (write to the tables it reads; SHOW CREATE TABLE {name} shows its query)"
            ));
        }
        Error::NotFound(format!(
            "table '{name}' not found{}",
            suggest(&name.table, &self.tables(&name.catalog, &name.schema))
        ))
    }

    /// Open the latest version of a warehouse table, with a helpful error when it is missing.
    /// Within [`one_version_per_table`], a table opened before is the version opened then.
    pub async fn open(&self, name: &TableName) -> Result<DeltaTable> {
        check_writable_table(name, false)?;
        if !self.table_exists(name) {
            return Err(self.missing_table_error(name));
        }
        if let Some(opened) = OPENED.try_with(|o| o.get(name)).ok().flatten() {
            return Ok(opened);
        }
        let table = self.load_latest(name).await?;
        let _ = OPENED.try_with(|o| o.keep(name, &table));
        Ok(table)
    }

    async fn load_latest(&self, name: &TableName) -> Result<DeltaTable> {
        let mut table = self.handle(name).await?;
        if let Some(url) = self.external_location(name) {
            table.load().await.map_err(|e| {
                Error::from(e).context(format!(
                    "cannot open {name} at {} (its LOCATION)",
                    external::shown(&url)
                ))
            })?;
        } else {
            table.load().await?;
        }
        Ok(table)
    }

    /// A CREATE of `name` (its directory made first) that commits without retries: a create
    /// that finds version 0 taken must fail, not commit a second CREATE (a new table id) on
    /// top of the other writer's table.
    pub async fn create_builder(
        &self,
        name: &TableName,
    ) -> Result<deltalake::operations::create::CreateBuilder> {
        if self.view_exists(name) {
            return Err(Error::AlreadyExists(format!(
                "cannot create table {name}: a view of that name exists (DROP VIEW {name} first)"
            )));
        }
        self.prepare_new_table(name).await?;
        let handle = self.handle(name).await?;
        if let Err(e) = external::check_safe_commits(&handle).await {
            self.forget_failed_create(name).await;
            return Err(e);
        }
        Ok(handle
            .create()
            .with_table_name(name.table.clone())
            .with_commit_properties(
                deltalake::kernel::transaction::CommitProperties::default().with_max_retries(0),
            ))
    }

    /// A handle on a (possibly not yet existing) table location, for creating it.
    pub async fn handle(&self, name: &TableName) -> Result<DeltaTable> {
        let url = self.table_url(name)?;
        if external::is_remote(&url) {
            // The store's own handler (credentials and endpoint from the environment).
            return Ok(external::builder(&url)?.build()?);
        }
        Ok(deltalake::DeltaTableBuilder::from_url(url.clone())?
            .with_storage_backend(self.store.clone(), url)
            .build()?)
    }
}

tokio::task_local! {
    /// The tables opened so far by the statement being bound and planned.
    static OPENED: Opened;
}

#[derive(Default)]
struct Opened {
    tables: std::sync::Mutex<std::collections::HashMap<TableName, DeltaTable>>,
    /// By catalog, schema and table as the statement names them (a database may hold
    /// names that differ only in case).
    foreign: std::sync::Mutex<
        std::collections::HashMap<[String; 3], Arc<dyn datafusion::catalog::TableProvider>>,
    >,
}

impl Opened {
    fn get(&self, name: &TableName) -> Option<DeltaTable> {
        self.tables.lock().ok()?.get(name).cloned()
    }

    fn keep(&self, name: &TableName, table: &DeltaTable) {
        if let Ok(mut opened) = self.tables.lock() {
            opened.entry(name.clone()).or_insert_with(|| table.clone());
        }
    }
}

/// A foreign table's provider made before in this [`one_version_per_table`] (the binder's,
/// for the planner: the database asked for its columns once).
pub(crate) fn opened_foreign(
    name: &[String; 3],
) -> Option<Arc<dyn datafusion::catalog::TableProvider>> {
    OPENED
        .try_with(|o| o.foreign.lock().ok()?.get(name).cloned())
        .ok()
        .flatten()
}

/// Keep a foreign table's provider for the rest of this [`one_version_per_table`].
pub(crate) fn keep_foreign(
    name: &[String; 3],
    provider: &Arc<dyn datafusion::catalog::TableProvider>,
) {
    let _ = OPENED.try_with(|o| {
        if let Ok(mut opened) = o.foreign.lock() {
            opened
                .entry(name.clone())
                .or_insert_with(|| provider.clone());
        }
    });
}

/// Run `work` (a statement's binding and planning) with each table it opens read once: the
/// binder reads a table's schema and the planner its provider from the same version, one log
/// replay instead of two, and never two versions of one table in one plan when another
/// writer commits in between. Not for work that writes: a table written within would be read
/// as it was before.
pub fn one_version_per_table<F: Future>(
    work: F,
) -> std::pin::Pin<Box<impl Future<Output = F::Output>>> {
    // On the heap: a statement's binding and planning is a deep future.
    Box::pin(OPENED.scope(Opened::default(), work))
}

/// Whether this process (its effective user) may make files in `dir`: write and search
/// permission, on a file system mounted writable.
fn may_make_files(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `path` is a valid NUL-terminated string for the call's duration.
    let answer = unsafe {
        libc::faccessat(
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::W_OK | libc::X_OK,
            libc::AT_EACCESS,
        )
    };
    if answer == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The one check that a statement may write table `name`: never a sample (read-only), and
/// with `system_too` never the `system` catalog either (tidemark's own tables, which a COPY
/// target or a user's table would mix with).
pub fn check_writable_table(name: &TableName, system_too: bool) -> Result<()> {
    if name.catalog == SAMPLES {
        return Err(read_only(name));
    }
    if system_too && name.catalog == SYSTEM {
        return Err(Error::Invalid(format!(
            "cannot write {name}: catalog '{SYSTEM}' is reserved for tidemark's own tables (use your own catalog, e.g. main.default.{})",
            quote_ident(&name.table)
        )));
    }
    Ok(())
}

/// The error for writing to the read-only samples catalog.
fn read_only(name: &TableName) -> Error {
    Error::Invalid(format!(
        "catalog '{SAMPLES}' is read-only: cannot write {name} (copy it into your own catalog, e.g. CREATE TABLE main.default.{} AS SELECT * FROM {name})",
        quote_ident(&name.table)
    ))
}

/// `names` with the built-in ones it lacks, sorted.
fn with_builtins<const N: usize>(mut names: Vec<String>, builtins: [&str; N]) -> Vec<String> {
    for builtin in builtins {
        if !names.iter().any(|n| n == builtin) {
            names.push(builtin.to_string());
        }
    }
    names.sort();
    names
}

/// ", did you mean 'x'?" when one of `candidates` is close to `wanted`.
pub fn suggest(wanted: &str, candidates: &[String]) -> String {
    let best = candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(wanted, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d);
    match best {
        Some((_, c)) => format!(", did you mean '{c}'?"),
        None if !candidates.is_empty() && candidates.len() <= 12 => {
            format!(" (existing: {})", candidates.join(", "))
        }
        None => String::new(),
    }
}

#[cfg(test)]
mod stats_list_tests {
    #[test]
    fn stats_column_lists_name_their_top_level_columns() {
        assert_eq!(
            super::stats_column_roots("`id`, `a.b`.c ,Name, s.x, `q``t`"),
            ["id", "a.b", "name", "s", "q`t"]
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_back_quoted_names() {
        assert_eq!(split_qualified("a.`b.c`.d").unwrap(), vec!["a", "b.c", "d"]);
        assert_eq!(split_qualified("`x``y`").unwrap(), vec!["x`y"]);
        assert!(split_qualified("a..b").is_err());
        assert!(split_qualified("x; DROP TABLE y").is_err());
    }

    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(quote_ident("orders"), "orders");
        assert_eq!(quote_ident("Weird name"), "`Weird name`");
    }

    #[test]
    fn suggests_close_names() {
        assert_eq!(
            suggest("ordrs", &["orders".into(), "users".into()]),
            ", did you mean 'orders'?"
        );
    }
}
