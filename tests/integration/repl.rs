//! The REPL at a terminal (driven through a pseudo-terminal by `support/repl.py`):
//! multi-line statements, Tab completion of table names (a foreign catalog's too), Ctrl-C cancelling the running
//! statement while the shell stays, Ctrl-D leaving, history kept in the home directory.

use crate::common::{repo, warehouse};

#[cfg(unix)]
#[test]
fn the_repl_works_at_a_terminal() {
    let (d, wh) = warehouse();
    let home = d.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = std::process::Command::new("python3")
        .arg(repo().join("tests/integration/support/repl.py"))
        .arg(assert_cmd::cargo::cargo_bin("tidemark"))
        .arg(&wh)
        .arg(&home)
        .output()
        .expect("python3 runs the terminal driver");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{screen}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        screen.contains("AS walruses FROM lite.main.walrus_sightings")
            && screen.contains("walrus_sightings WHERE species")
            && screen.contains("AS yaks FROM lite.main.yak_counts"),
        "Tab completed a foreign catalog's tables and columns: {screen}"
    );
    assert!(
        screen.contains("|     42 |"),
        "multi-line statement: {screen}"
    );
    assert!(
        screen.contains("SELECT id FROM zebra_stats"),
        "Tab completed the table name: {screen}"
    );
    assert!(
        screen.contains("|       101 |") && screen.contains("|       102 |"),
        "typed-ahead statements ran: {screen}"
    );
    assert!(
        screen.contains("           -> "),
        "continuation prompt: {screen}"
    );
    assert!(
        screen.contains("ahead_one") && screen.find("ahead_one") < screen.find("ahead_two"),
        "in order: {screen}"
    );
    assert!(
        screen.contains("|         105 |") && !screen.contains(": error:"),
        "an unfinished statement waited for its end, and nothing failed: {screen}"
    );
    assert!(
        screen.contains("statement cancelled"),
        "Ctrl-C cancels: {screen}"
    );
    let after_cancel = screen
        .split("AFTER CANCEL:")
        .nth(1)
        .and_then(|s| s.split("JOB AGAIN:").next())
        .unwrap_or_default();
    assert!(
        after_cancel.contains("src_a") && !after_cancel.contains("dst_a"),
        "a cancelled FOR EACH committed nothing: {after_cancel}"
    );
    assert!(
        screen.contains("| 1000 | 2000 |  2000 |  3000 |"),
        "the job run again copied every row once and advanced both marks: {screen}"
    );
    assert!(
        screen.trim_end().ends_with("EXIT 0"),
        "Ctrl-D leaves with 0: {screen}"
    );
    let history = std::fs::read_to_string(home.join(".tidemark_history")).expect("history file");
    assert!(
        history.contains("SELECT 'still here' AS shell;"),
        "{history}"
    );
}
