//! `CREATE TABLE t [DEEP] CLONE s [VERSION AS OF n | TIMESTAMP AS OF ts]`: a new table whose
//! version 0 is the source's snapshot: its protocol, schema, partitioning, properties and
//! comment, and its data files linked (or copied; on an object store, copied by the store)
//! under the same relative paths with their statistics. One commit; files copied before a
//! failed commit are removed. `SHALLOW CLONE`
//! is refused: its log would name the source's files by absolute path.

use std::collections::HashMap;

use deltalake::kernel::Action;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::protocol::{DeltaOperation, SaveMode};

use crate::catalog::{Place, check_writable_table};
use crate::engine::bind::Travel;
use crate::engine::{Output, Session};
use crate::error::{Error, Result};
use crate::parser::{AsOf, CloneTable};

/// `CREATE TABLE ... CLONE`.
pub async fn clone_table(session: &Session, c: CloneTable) -> Result<Output> {
    let target = session.table_name(&c.name)?;
    let source = session.object_name(&c.source)?;
    if c.shallow {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "SHALLOW CLONE of {source} is not supported: its log would name {source}'s files by absolute path, which a VACUUM of {source} deletes under it and other readers resolve differently; write DEEP CLONE (links or copies the files)"
            ),
        ));
    }
    check_writable_table(&target, false)?;
    let wh = session.warehouse();
    if !wh.schema_exists(&target.catalog, &target.schema) {
        return Err(wh.missing_table_error(&target));
    }
    if wh.table_exists(&target) {
        if c.if_not_exists && !c.or_replace {
            return Ok(Output::empty());
        }
        return Err(Error::AlreadyExists(if c.or_replace {
            format!(
                "CREATE OR REPLACE TABLE {target} ... CLONE over an existing table is not supported yet: DROP TABLE {target} first"
            )
        } else {
            format!("table {target} already exists (IF NOT EXISTS keeps it)")
        }));
    }
    if wh.view_exists(&source) {
        return Err(Error::Invalid(format!(
            "{source} is a view: CLONE copies a table"
        )));
    }
    if !wh.table_exists(&source) {
        return Err(wh.missing_table_error(&source));
    }
    if let Some(url) = wh.schema_location(&target.catalog, &target.schema) {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "CLONE into schema {}.{}, whose tables live at {}, is not supported yet: CREATE TABLE {target} AS SELECT * FROM {source}",
                target.catalog,
                target.schema,
                crate::catalog::external::shown(&url)
            ),
        ));
    }
    if let Some(url) = wh.external_location(&source) {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!(
                "CLONE of {source}, an external table (at {}), is not supported yet: copy it with CREATE TABLE ... AS SELECT * FROM {source}",
                crate::catalog::external::shown(&url)
            ),
        ));
    }
    let mut t = wh.open(&source).await?;
    let at = match c.as_of {
        Some(AsOf::Version(v)) => Some(Travel::Version(v as i64)),
        Some(AsOf::Timestamp(e)) => Some(Travel::Timestamp(e)),
        None => None,
    };
    if let Some(at) = at {
        session.travel(&mut t, &source, at).await?;
    }
    let snapshot = t.snapshot()?;
    // Features whose state lives outside the schema and files (domain metadata, row ids,
    // commit timestamps tied to the source's versions) would be wrong in a copy.
    let features: Vec<String> = snapshot
        .protocol()
        .writer_features()
        .map(|f| f.iter().map(|x| x.to_string()).collect())
        .unwrap_or_default();
    if let Some(f) = features.iter().find(|f| {
        matches!(
            f.as_str(),
            "domainMetadata"
                | "rowTracking"
                | "clustering"
                | "inCommitTimestamp"
                | "identityColumns"
        )
    }) {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!("DEEP CLONE of {source}, a table with the {f} feature, is not supported yet"),
        ));
    }
    if let Some((k, _)) = c.properties.iter().find(|(k, _)| k.starts_with("delta.")) {
        return Err(Error::Invalid(format!(
            "CLONE ... TBLPROPERTIES takes custom keys; set {k} after cloning with ALTER TABLE {target} SET TBLPROPERTIES (it checks what the property needs)"
        )));
    }
    if !crate::statements::copy::whole_file::unmapped(&t) {
        return Err(Error::class(
            "UNSUPPORTED_FEATURE",
            format!("DEEP CLONE of {source}, a table with column mapping, is not supported yet"),
        ));
    }
    let mut adds = vec![];
    for view in snapshot.log_data().iter() {
        #[allow(deprecated)] // the Add action is exactly what the clone commits
        let add = view.add_action();
        if add.deletion_vector.is_some() {
            return Err(Error::class(
                "UNSUPPORTED_FEATURE",
                format!(
                    "DEEP CLONE of {source}, whose files have deletion vectors, is not supported yet (OPTIMIZE {source} rewrites them away)"
                ),
            ));
        }
        adds.push(add);
    }
    // The source's metadata as the new table's: a new id, name and creation time.
    let mut metadata = serde_json::to_value(snapshot.metadata())
        .map_err(|e| Error::Other(format!("cannot read {source}'s metadata: {e}")))?;
    metadata["id"] = uuid::Uuid::new_v4().to_string().into();
    metadata["name"] = target.table.clone().into();
    metadata["createdTime"] = chrono::Utc::now().timestamp_millis().into();
    if let Some(conf) = metadata["configuration"].as_object_mut() {
        for (k, v) in &c.properties {
            conf.insert(k.clone(), v.clone().into());
        }
    }
    let metadata: deltalake::kernel::Metadata = serde_json::from_value(metadata)
        .map_err(|e| Error::Other(format!("cannot write {target}'s metadata: {e}")))?;
    let protocol = snapshot.protocol().clone();

    let (count, bytes, made) = match (wh.table_path(&source)?, wh.table_path(&target)?) {
        (Place::Local(source_root), Place::Local(target_root)) => {
            // The table's directory (create_builder makes it and checks no view has the
            // name); a directory with anything in it is another table's, being made.
            wh.create_builder(&target).await?;
            if std::fs::read_dir(&target_root).is_ok_and(|mut d| d.next().is_some()) {
                return Err(Error::AlreadyExists(format!(
                    "cannot clone into {target}: its directory ({}) is not empty (another session creating it?)",
                    target_root.display()
                )));
            }
            let mut created = vec![];
            match copy_files(
                &source_root,
                &target_root,
                &adds,
                session.settings().hard_links,
                &mut created,
            ) {
                Ok((count, bytes)) => (count, bytes, Made::Local(target_root, created)),
                Err(e) => {
                    remove(&target_root, &created);
                    return Err(e.context(format!("cannot clone {source} into {target}")));
                }
            }
        }
        _ => {
            wh.create_builder(&target).await?;
            let made = wh.handle(&target).await?;
            let (count, bytes, keys) = copy_objects(&t, &made, &adds)
                .await
                .map_err(|e| e.context(format!("cannot clone {source} into {target}")))?;
            (count, bytes, Made::Store(made, keys))
        }
    };
    let now = chrono::Utc::now().timestamp_millis();
    let mut actions = vec![
        Action::Protocol(protocol.clone()),
        Action::Metadata(metadata.clone()),
    ];
    actions.extend(adds.into_iter().map(|mut a| {
        a.modification_time = now;
        a.data_change = true;
        Action::Add(a)
    }));
    let table = wh.handle(&target).await?;
    let operation = DeltaOperation::Create {
        mode: SaveMode::ErrorIfExists,
        location: table.table_url().clone(),
        protocol,
        metadata,
    };
    let committed = CommitBuilder::from(CommitProperties::default().with_max_retries(0))
        .with_actions(actions)
        .build(None, table.log_store(), operation)
        .await;
    if let Err(e) = committed {
        // Only the files this clone made: a table another session committed stays.
        made.remove().await;
        return Err(Error::from(e).context(format!("cannot clone {source} into {target}")));
    }
    let size: i64 = snapshot.log_data().iter().map(|f| f.size()).sum();
    Ok(super::super::counts(&[
        ("source_table_size", size),
        ("source_num_of_files", count as i64),
        ("num_removed_files", 0),
        ("num_copied_files", count as i64),
        ("removed_files_size", 0),
        ("copied_files_size", bytes as i64),
    ]))
}

/// The files a clone made: local paths, or keys of the target's store.
enum Made {
    Local(std::path::PathBuf, Vec<std::path::PathBuf>),
    Store(
        deltalake::DeltaTable,
        Vec<deltalake::logstore::object_store::path::Path>,
    ),
}

impl Made {
    /// Remove them after a failed commit. On a store, a clone of the same name by another
    /// process writes the same keys (the same files of the same source), so they stay when
    /// the target has a version now: they are that table's.
    async fn remove(&self) {
        match self {
            Made::Local(root, created) => remove(root, created),
            Made::Store(table, keys) => remove_keys(table, keys).await,
        }
    }
}

/// Remove the keys a clone copied into `table`'s place, unless a table was committed there
/// meanwhile (another clone of the name, whose files they are too).
async fn remove_keys(
    table: &deltalake::DeltaTable,
    keys: &[deltalake::logstore::object_store::path::Path],
) {
    use deltalake::logstore::object_store::ObjectStoreExt;
    let store = table.log_store().object_store(None);
    let first =
        deltalake::logstore::object_store::path::Path::from("_delta_log/00000000000000000000.json");
    if matches!(
        store.head(&first).await,
        Err(deltalake::logstore::object_store::Error::NotFound { .. })
    ) {
        for key in keys {
            let _ = store.delete(key).await;
        }
    }
}

/// A clone's files copied on an object store, under the same relative paths: by the store
/// itself within one bucket, else streamed. Returns the count, the bytes and the keys made
/// (in the target's store); a target place already holding a file is refused first.
async fn copy_objects(
    source: &deltalake::DeltaTable,
    target: &deltalake::DeltaTable,
    adds: &[deltalake::kernel::Add],
) -> Result<(
    usize,
    u64,
    Vec<deltalake::logstore::object_store::path::Path>,
)> {
    use deltalake::logstore::object_store::path::Path as Key;
    use futures::{StreamExt, TryStreamExt};
    let shown = crate::catalog::external::shown;
    let there: Vec<_> = target
        .log_store()
        .object_store(None)
        .list(None)
        .try_collect()
        .await
        .map_err(|e| Error::Other(format!("cannot list {}: {e}", shown(target.table_url()))))?;
    if let Some(o) = there.iter().find(|o| {
        o.location
            .filename()
            .is_some_and(|n| !n.starts_with('.') && !n.starts_with("_tidemark"))
    }) {
        return Err(Error::AlreadyExists(format!(
            "its place ({}) already holds {} (another session creating it?)",
            shown(target.table_url()),
            o.location
        )));
    }
    let route = crate::statements::copy::whole_file::Route::between(source, target)?;
    let mut jobs = vec![];
    let mut keys = vec![];
    let mut bytes = 0u64;
    for add in adds {
        let rel = Key::from_url_path(&add.path)
            .map_err(|e| Error::Other(format!("{}: {e}", add.path)))?;
        jobs.push(route.copy(&rel, &rel, format!("cannot copy {}", add.path)));
        keys.push(rel);
        bytes += add.size as u64;
    }
    let copied: Result<Vec<()>> = futures::stream::iter(jobs).buffered(8).try_collect().await;
    if let Err(e) = copied {
        remove_keys(target, &keys).await;
        return Err(e);
    }
    Ok((adds.len(), bytes, keys))
}

/// Remove the files a failed clone made, and the partition directories they leave empty.
fn remove(root: &std::path::Path, created: &[std::path::PathBuf]) {
    for f in created {
        let _ = std::fs::remove_file(f);
    }
    for f in created {
        // Only empty directories below the table's go (remove_dir refuses others).
        let mut dir = f.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(root) && *d != root) {
            if std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }
}

/// Link (or copy) each file under the same relative path, noting each file made in
/// `created`; returns the count and bytes.
fn copy_files(
    source_root: &std::path::Path,
    target_root: &std::path::Path,
    adds: &[deltalake::kernel::Add],
    hard_links: bool,
    created: &mut Vec<std::path::PathBuf>,
) -> Result<(usize, u64)> {
    let mut bytes = 0u64;
    let mut dirs: HashMap<std::path::PathBuf, ()> = HashMap::new();
    for add in adds {
        let rel = add.path.clone();
        let from = source_root.join(&rel);
        let to = target_root.join(&rel);
        if let Some(parent) = to.parent()
            && dirs.insert(parent.to_path_buf(), ()).is_none()
        {
            std::fs::create_dir_all(parent)?;
        }
        let linked = hard_links && std::fs::hard_link(&from, &to).is_ok();
        if !linked {
            crate::statements::copy::whole_file::copy_new(&from, &to)?;
        }
        created.push(to);
        bytes += add.size as u64;
    }
    Ok((adds.len(), bytes))
}
