//! Unit tests of the splitter: statements, comments, quotes, meta-commands, positions.

use super::*;

fn sqls(input: &str) -> Vec<String> {
    split(input)
        .pieces
        .into_iter()
        .map(|l| match l.piece {
            Piece::Sql(s) => s,
            Piece::Meta(m) => format!("META:{m}"),
        })
        .collect()
}

fn pos(line: usize, col: usize) -> Pos {
    Pos { line, col }
}

#[test]
fn quotes_in_a_for_header_keep_the_block() {
    let input = "FOR EACH r IN (SELECT 'a.b' AS s) DO\n  SELECT 1;\nEND FOR;\nSELECT 2;";
    assert_eq!(
        sqls(input),
        vec![
            "FOR EACH r IN (SELECT 'a.b' AS s) DO\n  SELECT 1;\nEND FOR",
            "SELECT 2"
        ]
    );
}

#[test]
fn simple_statements() {
    assert_eq!(sqls("SELECT 1; SELECT 2;"), ["SELECT 1", "SELECT 2"]);
    let s = split("SELECT 1;\n  SELECT 2  ");
    assert_eq!(s.rest, "SELECT 2");
    assert_eq!(s.rest_pos, pos(2, 3));
}

#[test]
fn empty_statements_dropped() {
    assert_eq!(sqls(";;  ; -- c\n; /* x */ ;SELECT 1;;"), ["SELECT 1"]);
    let s = split("  ;\n -- only comment\n/* c */  ");
    assert!(s.pieces.is_empty());
    assert_eq!(s.rest, "");
    assert_eq!(s.rest_pos, pos(3, 10));
}

#[test]
fn quotes_with_semicolons() {
    assert_eq!(
        sqls("SELECT 'a;b', \"c;d\", `e;f`; SELECT 2;"),
        ["SELECT 'a;b', \"c;d\", `e;f`", "SELECT 2"]
    );
}

#[test]
fn escaped_quotes() {
    assert_eq!(
        sqls("SELECT 'it''s;x'; SELECT 2;"),
        ["SELECT 'it''s;x'", "SELECT 2"]
    );
    assert_eq!(
        sqls(r"SELECT 'it\'s;x'; SELECT 2;"),
        [r"SELECT 'it\'s;x'", "SELECT 2"]
    );
    assert_eq!(
        sqls("SELECT `a``;b` FROM t; SELECT 2;"),
        ["SELECT `a``;b` FROM t", "SELECT 2"]
    );
    assert_eq!(
        sqls(r"SELECT 'a\\'; SELECT 2;"),
        [r"SELECT 'a\\'", "SELECT 2"]
    );
    assert_eq!(
        sqls(r"SELECT r'C:\'; SELECT 2;"),
        [r"SELECT r'C:\'", "SELECT 2"]
    );
}

#[test]
fn comments_with_semicolons_and_quotes() {
    let input = "SELECT 1 -- a; 'b\n, 2; /* x; \"y */ SELECT 3;";
    assert_eq!(sqls(input), ["SELECT 1 -- a; 'b\n, 2", "SELECT 3"]);
    assert_eq!(
        sqls("SELECT 1 /* it's; */ + 1;"),
        ["SELECT 1 /* it's; */ + 1"]
    );
}

#[test]
fn nested_block_comments() {
    assert_eq!(
        sqls("/* a /* b; */ still; */ SELECT 1; SELECT 2;"),
        ["SELECT 1", "SELECT 2"]
    );
    let s = split("SELECT 1; /* open /* inner */ ;");
    assert_eq!(s.pieces.len(), 1);
    assert_eq!(s.rest, "/* open /* inner */ ;");
    assert_eq!(s.rest_pos, pos(1, 11));
}

#[test]
fn lone_close_comment_is_text() {
    assert_eq!(
        sqls("SELECT 2 */ 1; SELECT 3;"),
        ["SELECT 2 */ 1", "SELECT 3"]
    );
}

#[test]
fn for_each_block() {
    let input = "FOR EACH r IN (SELECT id FROM t) CONCURRENCY 4 DO\n  INSERT INTO a VALUES (1);\n  DELETE FROM b;\nEND FOR;\nSELECT 1;";
    let s = sqls(input);
    assert_eq!(s.len(), 2);
    assert!(s[0].starts_with("FOR EACH") && s[0].ends_with("END FOR"));
    assert_eq!(s[1], "SELECT 1");
}

#[test]
fn nested_for() {
    let input = "for a in (select 1) do for b in (select 2) do select 1; select 2; end for; select 3; end for; select 4;";
    let s = sqls(input);
    assert_eq!(s.len(), 2, "{s:?}");
    assert!(s[0].ends_with("end for; select 3; end for"));
    assert_eq!(s[1], "select 4");
}

#[test]
fn while_and_do_as_name() {
    assert_eq!(
        sqls("WHILE x < 3 DO SET x = x + 1; END WHILE; SELECT 1;").len(),
        2
    );
    // DO outside FOR/WHILE does not open a block.
    assert_eq!(
        sqls("MERGE INTO t USING s ON a WHEN MATCHED THEN DO NOTHING; SELECT do FROM t;"),
        [
            "MERGE INTO t USING s ON a WHEN MATCHED THEN DO NOTHING",
            "SELECT do FROM t"
        ]
    );
    // A parenthesised `do` column inside a FOR header is not the loop DO.
    assert_eq!(
        sqls("FOR r IN (SELECT do FROM t) DO SELECT 1; END FOR; SELECT 2;").len(),
        2
    );
}

#[test]
fn begin_end_with_case() {
    let input = "BEGIN\n  DECLARE x INT;\n  SELECT CASE WHEN x = 1 THEN 'a;' ELSE 'b' END;\n  SET x = 2;\nEND;\nSELECT 9;";
    let s = sqls(input);
    assert_eq!(s.len(), 2, "{s:?}");
    assert!(s[0].starts_with("BEGIN") && s[0].ends_with("END"));
    assert_eq!(s[1], "SELECT 9");
}

#[test]
fn nested_begin_if_loop_case_statement() {
    let input = "lbl: BEGIN\n BEGIN SELECT 1; END;\n IF x THEN SELECT 2; ELSEIF y THEN SELECT 3; ELSE SELECT 4; END IF;\n \
                 l2: LOOP SELECT 5; LEAVE l2; END LOOP l2;\n REPEAT SET x = x + 1; UNTIL x > 3 END REPEAT;\n \
                 CASE x WHEN 1 THEN SELECT 6; ELSE SELECT 7; END CASE;\n \
                 DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN SELECT 8; END;\n\
                 END lbl; SELECT 10;";
    let s = sqls(input);
    assert_eq!(s.len(), 2, "{s:?}");
    assert!(s[0].ends_with("END lbl"));
    assert_eq!(s[1], "SELECT 10");
}

#[test]
fn begin_transaction_is_plain() {
    assert_eq!(
        sqls("BEGIN; SELECT 1; COMMIT;"),
        ["BEGIN", "SELECT 1", "COMMIT"]
    );
    assert_eq!(
        sqls("begin transaction; select 1;"),
        ["begin transaction", "select 1"]
    );
    assert_eq!(sqls("BEGIN WORK; SELECT 1;"), ["BEGIN WORK", "SELECT 1"]);
    assert_eq!(
        sqls("SELECT begin, end FROM t; SELECT 2;"),
        ["SELECT begin, end FROM t", "SELECT 2"]
    );
}

#[test]
fn unclosed_case_does_not_swallow_file() {
    assert_eq!(
        sqls("SELECT CASE WHEN 1 THEN 2; SELECT 3;"),
        ["SELECT CASE WHEN 1 THEN 2", "SELECT 3"]
    );
    assert_eq!(sqls("SELECT t.end, x.case FROM t; SELECT 3;").len(), 2);
}

#[test]
fn meta_commands() {
    let s = split("SELECT 1;\n\\d main.default.t\n  \\x on  \nSELECT 2;\n\\q");
    let got: Vec<_> = s.pieces.iter().map(|l| (l.piece.clone(), l.pos)).collect();
    assert_eq!(
        got,
        vec![
            (Piece::Sql("SELECT 1".into()), pos(1, 1)),
            (Piece::Meta("\\d main.default.t".into()), pos(2, 1)),
            (Piece::Meta("\\x on".into()), pos(3, 3)),
            (Piece::Sql("SELECT 2".into()), pos(4, 1)),
            (Piece::Meta("\\q".into()), pos(5, 1)),
        ]
    );
    assert_eq!(s.rest, "");
    assert!(is_complete("\\dt"));
}

#[test]
fn backslash_inside_statement() {
    assert_eq!(sqls("SELECT 1\n\\d t\n;"), ["SELECT 1\n\\d t"]);
    assert_eq!(sqls("BEGIN\n\\x\nEND;"), ["BEGIN\n\\x\nEND"]);
}

#[test]
fn positions_multiline() {
    let s = split("-- header\n\n   /* c */ SELECT\n 1;  SELECT 2;\n\tSELECT 'é';  SELECT 3");
    let p: Vec<Pos> = s.pieces.iter().map(|l| l.pos).collect();
    assert_eq!(p, vec![pos(3, 12), pos(4, 6), pos(5, 2)]);
    assert_eq!(s.rest, "SELECT 3");
    assert_eq!(s.rest_pos, pos(5, 15));
}

#[test]
fn unterminated_string_in_rest() {
    let s = split("SELECT 1; SELECT 'abc;\n def; ");
    assert_eq!(sqls("SELECT 1; SELECT 'abc;\n def; "), ["SELECT 1"]);
    assert_eq!(s.rest, "SELECT 'abc;\n def;");
    assert_eq!(s.rest_pos, pos(1, 11));
    assert!(!is_complete("SELECT 1; SELECT 'abc;"));
}

#[test]
fn is_complete_cases() {
    assert!(is_complete("SELECT 1;"));
    assert!(is_complete("SELECT 1; -- trailing comment"));
    assert!(is_complete("SELECT 1;\n  "));
    assert!(!is_complete(""));
    assert!(!is_complete("   \n"));
    assert!(!is_complete("-- just a comment"));
    assert!(!is_complete("SELECT 1"));
    assert!(!is_complete("SELECT 1; SELECT"));
    assert!(!is_complete("SELECT 1; /* open"));
    assert!(!is_complete("BEGIN SELECT 1;"));
    assert!(!is_complete("BEGIN SELECT 1; END"));
    assert!(is_complete("BEGIN SELECT 1; END;"));
    assert!(!is_complete("FOR r IN (SELECT 1) DO SELECT 2;"));
    assert!(is_complete("FOR r IN (SELECT 1) DO SELECT 2; END FOR;"));
}

#[test]
fn crlf_input() {
    let s = split("SELECT 1;\r\n\\d t\r\nSELECT\r\n  2;\r\n");
    let got: Vec<_> = s.pieces.iter().map(|l| (l.piece.clone(), l.pos)).collect();
    assert_eq!(
        got,
        vec![
            (Piece::Sql("SELECT 1".into()), pos(1, 1)),
            (Piece::Meta("\\d t".into()), pos(2, 1)),
            (Piece::Sql("SELECT\r\n  2".into()), pos(3, 1)),
        ]
    );
    assert_eq!(s.rest, "");
}

#[test]
fn never_panics_on_odd_input() {
    let inputs = [
        "'",
        "\"",
        "`",
        "/*",
        "*/",
        "--",
        "\\",
        "r'",
        "r",
        "'\\",
        "END",
        "END FOR;",
        "END IF",
        "CASE",
        "BEGIN",
        "lbl:",
        ":",
        "a::b;",
        "ünïcödé ;😀; '😀",
        "/* /* */",
        ");(;",
        "\u{feff}SELECT 1;",
        "DO; FOR DO END;",
    ];
    for s in inputs {
        let _ = split(s);
        let _ = is_complete(s);
    }
    assert_eq!(sqls("\u{feff}SELECT 1;"), ["SELECT 1"]);
    assert_eq!(
        sqls("SELECT '😀;'; SELECT 'é';"),
        ["SELECT '😀;'", "SELECT 'é'"]
    );
    // Large input stays fast (linear).
    let big = "SELECT 1 /* c */ -- x\n;".repeat(20_000);
    assert_eq!(split(&big).pieces.len(), 20_000);
    let deep = "BEGIN ".repeat(10_000);
    assert!(!is_complete(&deep));
}

#[test]
fn pseudo_random_fuzz() {
    let alphabet: Vec<char> = "';\"`-/*\\\n\r ()rR:.aBeGiNdOfEnDcAsEiFé😀"
        .chars()
        .collect();
    let words = [
        "BEGIN ", "END ", "FOR ", "DO ", "CASE ", "IF ", "THEN ", "LOOP ", "WHILE ", "x: ",
    ];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..3000 {
        let mut s = String::new();
        for _ in 0..(seed % 40) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            if seed.is_multiple_of(3) {
                s.push_str(words[(seed >> 8) as usize % words.len()]);
            } else {
                s.push(alphabet[(seed >> 8) as usize % alphabet.len()]);
            }
        }
        let r = split(&s);
        assert!(r.rest.len() <= s.len());
    }
}
