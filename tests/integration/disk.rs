//! Disk trouble: a warehouse on a small tmpfs that fills up. The copy fails with a clear
//! error; with space again, the next run completes with nothing lost or duplicated.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::tidemark;

/// A tmpfs of `mb` megabytes, unmounted on drop.
struct Tmpfs {
    mnt: PathBuf,
    /// Keeps the mount point's parent directory alive.
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    fn new(mb: u32) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
            .arg(&mnt)
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "the disk test mounts a tmpfs and needs root (CI runs as root)"
        );
        Tmpfs { mnt, _dir: dir }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

fn sql(wh: &Path, flags: &[&str], stmt: &str) -> std::process::Output {
    tidemark(wh)
        .args(["--format", "csv"])
        .args(flags)
        .args(["-c", stmt])
        .output()
        .unwrap()
}

fn value(wh: &Path, q: &str) -> String {
    let out = sql(wh, &[], q);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_fails_clearly_and_the_next_run_completes() {
    let fs = Tmpfs::new(24);
    let wh = fs.mnt.join("wh");
    let setup = sql(
        &wh,
        &[],
        "CREATE TABLE src AS SELECT b.*, CAST(k.i AS BIGINT) AS k FROM samples.wanderbricks.bookings b CROSS JOIN (SELECT * FROM (VALUES (1), (2), (3), (4), (5), (6), (7), (8)) AS v(i)) k",
    );
    assert!(
        setup.status.success(),
        "{}",
        String::from_utf8_lossy(&setup.stderr)
    );
    // Leave almost no room, then copy through the decode path (which writes new files).
    let filler = fs.mnt.join("filler");
    let free = {
        let out = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&fs.mnt)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    std::fs::write(&filler, vec![1u8; (free - 64 * 1024) as usize]).unwrap();
    let copy = "COPY INCREMENTAL src INTO dst WATERMARK created_at";
    let out = sql(&wh, &["--no-whole-file-copies"], copy);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.to_lowercase().contains("no space left on device"),
        "a clear error: {err}"
    );
    // Space again: the next run completes exactly.
    std::fs::remove_file(&filler).unwrap();
    let out = sql(&wh, &["--no-whole-file-copies"], copy);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        value(&wh, "SELECT count(*) FROM dst"),
        value(&wh, "SELECT count(*) FROM src")
    );
    assert_eq!(
        value(
            &wh,
            "SELECT count(*) FROM (SELECT booking_id, k FROM dst GROUP BY 1, 2 HAVING count(*) > 1)"
        ),
        "0"
    );
    let out = sql(&wh, &["--no-whole-file-copies"], copy);
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing_new"));
}
