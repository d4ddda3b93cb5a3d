//! `\?` and `\h NAME`: the meta-commands (from their enum) and the statements tidemark runs
//! (from the parser's syntax table).

use super::command::Kind;
use crate::parser::is_near_miss;
use crate::parser::syntax::{STATEMENTS, lookup};

/// `\?`: every meta-command and every statement, one line each.
pub(super) fn overview() -> String {
    let mut out = String::from("Meta-commands:\n");
    for kind in Kind::ALL {
        out.push_str(&format!("  {:<20} {}\n", kind.usage(), kind.about()));
    }
    out.push_str("\nStatements (\\h NAME shows one's syntax):\n");
    for s in STATEMENTS {
        out.push_str(&format!("  {:<36} {}\n", s.name, s.about));
    }
    out.push_str(
        "\nStatements end with ';'. Queries are DataFusion's SELECT with Spark/Databricks \
         functions; README.md has the details.\n",
    );
    out
}

/// `\h NAME`: the syntax of the statements NAME names, or an error saying what exists.
pub(super) fn statement(name: &str) -> Result<String, String> {
    let found = lookup(name);
    if found.is_empty() {
        let wanted = name.trim().to_uppercase();
        let near = STATEMENTS.iter().find(|s| {
            is_near_miss(&wanted, s.name)
                || is_near_miss(&wanted, s.name.split(' ').next().unwrap_or(s.name))
        });
        return Err(match near {
            Some(s) => format!(
                "no help for '{}', did you mean \\h {}?",
                name.trim(),
                s.name
            ),
            None => format!(
                "no help for '{}': tidemark does not run such a statement (\\h lists the ones it runs)",
                name.trim()
            ),
        });
    }
    let mut out = String::new();
    for s in found {
        out.push_str(&format!(
            "Command:     {}\nDescription: {}\nSyntax:\n{}\n\nExample:\n  {};\n\n",
            s.name, s.about, s.grammar, s.example
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_answers() {
        let all = overview();
        assert!(all.contains("\\x [on|off|auto]") && all.contains("COPY INCREMENTAL"));
        let copy = statement("copy incremental").unwrap();
        assert!(
            copy.contains("LOOKBACK expr") && !copy.contains("USING CONTROL"),
            "{copy}"
        );
        assert!(
            statement("MERGE")
                .unwrap()
                .contains("WHEN NOT MATCHED BY SOURCE")
        );
        assert!(
            statement("MERGEE")
                .unwrap_err()
                .contains("did you mean \\h MERGE?")
        );
        assert!(statement("GRANT").unwrap_err().contains("does not run"));
    }
}
