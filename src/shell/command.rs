//! Backslash meta-commands, shared by the REPL, `-f` scripts and stdin.

use std::str::FromStr;

use super::print::Format;

/// One parsed meta-command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Quit,
    Help,
    /// `\d` (tables of the current schema) or `\d NAME` (describe).
    Describe(Option<String>),
    /// `\dt [schema]`: list tables.
    ListTables(Option<String>),
    /// `\dn [catalog]`: list schemas.
    ListSchemas(Option<String>),
    /// `\l`: list catalogs.
    ListCatalogs,
    /// `\i FILE`: run a file.
    Include(String),
    /// `\format [NAME]`.
    Format(Option<Format>),
    /// `\timing [on|off]`.
    Timing(Option<bool>),
    /// `\maxrows N` (0 = no cap).
    MaxRows(usize),
    /// `\vars`: show session variables.
    Variables,
}

/// The help table: command, what it does.
pub const HELP: &[(&str, &str)] = &[
    ("\\q", "quit"),
    ("\\? or \\h", "show this help"),
    (
        "\\d [NAME]",
        "list tables of the current schema, or describe table NAME",
    ),
    (
        "\\dt [SCHEMA]",
        "list tables (of the current or given schema)",
    ),
    (
        "\\dn [CATALOG]",
        "list schemas (of the current or given catalog)",
    ),
    ("\\l", "list catalogs"),
    ("\\i FILE", "run the statements of FILE"),
    (
        "\\format [NAME]",
        "show or set the output format: table, csv, tsv, json, ndjson, markdown",
    ),
    (
        "\\timing [on|off]",
        "toggle (or set) printing how long each statement took",
    ),
    ("\\maxrows N", "cap table output at N rows (0 = no cap)"),
    ("\\vars", "show the session variables"),
];

impl FromStr for Command {
    type Err = String;

    fn from_str(line: &str) -> Result<Self, String> {
        let line = line.trim().trim_end_matches(';');
        let (name, arg) = match line.split_once(char::is_whitespace) {
            Some((n, a)) => (n, Some(a.trim().to_string()).filter(|a| !a.is_empty())),
            None => (line, None),
        };
        let flag = |a: &Option<String>| -> Result<Option<bool>, String> {
            match a.as_deref().map(str::to_lowercase).as_deref() {
                None => Ok(None),
                Some("on" | "true" | "1") => Ok(Some(true)),
                Some("off" | "false" | "0") => Ok(Some(false)),
                Some(other) => Err(format!("expected on or off, found '{other}'")),
            }
        };
        Ok(match name {
            "\\q" | "\\quit" | "\\exit" => Command::Quit,
            "\\?" | "\\h" | "\\help" => Command::Help,
            "\\d" => Command::Describe(arg),
            "\\dt" => Command::ListTables(arg),
            "\\dn" => Command::ListSchemas(arg),
            "\\l" => Command::ListCatalogs,
            "\\i" | "\\include" => Command::Include(arg.ok_or("\\i needs a file name")?),
            "\\format" | "\\f" => Command::Format(arg.map(|a| a.parse()).transpose()?),
            "\\timing" => Command::Timing(flag(&arg)?),
            "\\maxrows" => Command::MaxRows(
                arg.ok_or("\\maxrows needs a number")?
                    .parse()
                    .map_err(|_| "\\maxrows needs a number".to_string())?,
            ),
            "\\vars" => Command::Variables,
            other => return Err(format!("unknown meta-command '{other}' (\\? lists them)")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_meta_commands() {
        assert_eq!("\\q".parse(), Ok(Command::Quit));
        assert_eq!(
            "\\d main.default.t".parse(),
            Ok(Command::Describe(Some("main.default.t".into())))
        );
        assert_eq!(
            "\\format csv".parse(),
            Ok(Command::Format(Some(Format::Csv)))
        );
        assert_eq!("\\timing on".parse(), Ok(Command::Timing(Some(true))));
        assert!("\\nope".parse::<Command>().is_err());
    }
}
