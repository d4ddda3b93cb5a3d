//! Database servers of the tests' own: PostgreSQL and MariaDB from Debian's packages, each in
//! a throwaway data directory on a free port of 127.0.0.1 with every statement logged (as the
//! servers' own users when the tests run as root), stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A PostgreSQL server of its own: initdb into a temp dir, started on a free port of
/// 127.0.0.1 with every statement logged; stopped when dropped.
pub(crate) struct Postgres {
    dir: tempfile::TempDir,
    pub(crate) port: u16,
    as_postgres: bool,
}

impl Postgres {
    pub(crate) fn bin(name: &str) -> String {
        let lib = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|d| d.flatten().map(|e| e.path()).max())
            .map(|p| p.join("bin").join(name));
        match lib {
            Some(p) if p.exists() => p.display().to_string(),
            _ => name.to_string(),
        }
    }

    pub(crate) fn command(&self, name: &str) -> Command {
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", &Self::bin(name)]);
            c
        } else {
            Command::new(Self::bin(name))
        }
    }

    pub(crate) fn start() -> Postgres {
        let dir = tempfile::tempdir().unwrap();
        let as_postgres = unsafe { libc_geteuid() } == 0;
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let pg = Postgres {
            dir,
            port,
            as_postgres,
        };
        let data = pg.dir.path().join("data");
        if as_postgres {
            let st = Command::new("chown")
                .args(["-R", "postgres", &pg.dir.path().display().to_string()])
                .status()
                .unwrap();
            assert!(st.success());
        }
        let out = pg
            .command("initdb")
            .args([
                "-D",
                &data.display().to_string(),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
            ])
            .output()
            .expect("initdb (Debian's postgresql package)");
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Password authentication over TCP, so the connection's secret is used for real.
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n",
        )
        .unwrap();
        pg.start_server();
        pg.psql("CREATE ROLE shopper LOGIN PASSWORD 's3cret-pw'", "postgres");
        pg.psql("CREATE DATABASE shop OWNER shopper", "postgres");
        pg
    }

    /// Start the server on its data directory (again, after [`Postgres::kill`]).
    pub(crate) fn start_server(&self) {
        // A server in another time zone than UTC: timestamptz filters must not shift.
        let opts = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c log_statement=all -c logging_collector=off -c timezone=America/New_York",
            self.port,
            self.dir.path().display()
        );
        let log = self.log().display().to_string();
        self.pg_ctl(&["-l", &log, "-o", &opts, "-w", "start"]);
    }

    /// Stop the server at once, as a crash would (`pg_ctl stop -m immediate`).
    pub(crate) fn kill(&self) {
        self.pg_ctl(&["-m", "immediate", "-w", "stop"]);
    }

    /// `pg_ctl` on the data directory, asserted to succeed.
    fn pg_ctl(&self, args: &[&str]) {
        let out = self.pg_ctl_output(args);
        assert!(
            out.status.success(),
            "pg_ctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn pg_ctl_output(&self, args: &[&str]) -> std::process::Output {
        self.command("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(args)
            .output()
            .unwrap()
    }

    /// A psql session of its own, reading statements from its stdin (a transaction kept open
    /// across other work).
    pub(crate) fn session(&self, db: &str) -> std::process::Child {
        self.client(db)
            .arg("-q")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    pub(crate) fn log(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// psql on database `db` as the superuser, stopping at the first error.
    fn client(&self, db: &str) -> Command {
        let mut c = self.command("psql");
        c.args([
            "-h",
            &self.dir.path().display().to_string(),
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
            "-d",
            db,
            "-v",
            "ON_ERROR_STOP=1",
        ]);
        c
    }

    pub(crate) fn psql(&self, sql: &str, db: &str) {
        let out = self.client(db).args(["-c", sql]).output().unwrap();
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.pg_ctl_output(&["-m", "immediate", "stop"]);
    }
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// A MariaDB server of its own, like [`Postgres`]: a throwaway data directory, a free port of
/// 127.0.0.1, every statement logged.
pub(crate) struct MariaDb {
    dir: tempfile::TempDir,
    pub(crate) port: u16,
    child: std::process::Child,
}

impl MariaDb {
    pub(crate) fn start() -> MariaDb {
        let dir = tempfile::tempdir().unwrap();
        let root = unsafe { libc_geteuid() } == 0;
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let data = dir.path().join("data");
        let path = |p: &Path| p.display().to_string();
        if root {
            let st = Command::new("chown")
                .args(["-R", "mysql", &path(dir.path())])
                .status()
                .unwrap();
            assert!(st.success());
        }
        let mut install = Command::new("mariadb-install-db");
        install.args([
            "--no-defaults",
            &format!("--datadir={}", path(&data)),
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ]);
        if root {
            install.arg("--user=mysql");
        }
        let out = install
            .output()
            .expect("mariadb-install-db (Debian's mariadb-server)");
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut server = Command::new("mariadbd");
        server
            .args([
                "--no-defaults",
                &format!("--datadir={}", path(&data)),
                &format!("--socket={}", path(&dir.path().join("sock"))),
                &format!("--port={port}"),
                "--bind-address=127.0.0.1",
                "--general-log=1",
                // A binary log, whose position a consistent snapshot reports.
                &format!("--log-bin={}", path(&dir.path().join("binlog"))),
                "--server-id=1",
                &format!("--log-error={}", path(&dir.path().join("error.log"))),
                &format!(
                    "--general-log-file={}",
                    path(&dir.path().join("general.log"))
                ),
                &format!("--pid-file={}", path(&dir.path().join("pid"))),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        if root {
            server.arg("--user=mysql");
        }
        let child = server.spawn().expect("mariadbd (Debian's mariadb-server)");
        let mut db = MariaDb { dir, port, child };
        let mut up = false;
        for _ in 0..600 {
            if db.client("SELECT 1").status.success() {
                up = true;
                break;
            }
            if let Ok(Some(status)) = db.child.try_wait() {
                panic!(
                    "mariadbd exited ({status}):\n{}",
                    std::fs::read_to_string(db.dir.path().join("error.log")).unwrap_or_default()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert!(
            up,
            "mariadbd did not answer in 60 s:\n{}",
            std::fs::read_to_string(db.dir.path().join("error.log")).unwrap_or_default()
        );
        db.sql("CREATE DATABASE shop; CREATE USER 'shopper'@'127.0.0.1' IDENTIFIED BY 'm4ria-pw'; GRANT ALL ON shop.* TO 'shopper'@'127.0.0.1';");
        db
    }

    pub(crate) fn client(&self, sql: &str) -> std::process::Output {
        Command::new("mariadb")
            .args([
                "--no-defaults",
                &format!("--socket={}", self.dir.path().join("sock").display()),
                "-u",
                "root",
                "-e",
                sql,
            ])
            .output()
            .unwrap()
    }

    pub(crate) fn sql(&self, sql: &str) {
        let out = self.client(sql);
        assert!(
            out.status.success(),
            "mariadb {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub(crate) fn log(&self) -> PathBuf {
        self.dir.path().join("general.log")
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
