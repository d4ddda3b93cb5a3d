//! Backslash meta-commands, shared by the REPL, `-f` scripts and stdin. One enum of kinds
//! drives all three uses: its names parse a line, its usage and description make `\?`, and
//! the shell dispatches on the parsed `Command`.

use std::str::FromStr;

use super::print::{Expanded, Format};

/// One parsed meta-command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Quit,
    /// `\?` or `\h [NAME]`: meta-commands and statements, or one statement's syntax.
    Help(Option<String>),
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
    /// `\o [FILE]`: send results to FILE, or back to stdout.
    Output(Option<String>),
    /// `\e`: edit the last statement in `$EDITOR`, then run it.
    Edit,
    /// `\format [NAME]`.
    Format(Option<Format>),
    /// `\x [on|off|auto]`: expanded display (toggles without an argument).
    Expanded(Option<Expanded>),
    /// `\pset null TEXT`: how NULL is shown.
    NullDisplay(String),
    /// `\timing [on|off]`.
    Timing(Option<bool>),
    /// `\maxrows N` (0 = no cap).
    MaxRows(usize),
    /// `\vars`: show session variables.
    Variables,
}

/// The kinds of meta-command, in the order `\?` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Quit,
    Help,
    Describe,
    ListTables,
    ListSchemas,
    ListCatalogs,
    Include,
    Output,
    Edit,
    Format,
    Expanded,
    Pset,
    Timing,
    MaxRows,
    Variables,
}

impl Kind {
    pub const ALL: [Kind; 15] = [
        Kind::Quit,
        Kind::Help,
        Kind::Describe,
        Kind::ListTables,
        Kind::ListSchemas,
        Kind::ListCatalogs,
        Kind::Include,
        Kind::Output,
        Kind::Edit,
        Kind::Format,
        Kind::Expanded,
        Kind::Pset,
        Kind::Timing,
        Kind::MaxRows,
        Kind::Variables,
    ];

    /// The names it answers to (the first is the one help shows).
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Kind::Quit => &["\\q", "\\quit", "\\exit"],
            Kind::Help => &["\\?", "\\h", "\\help"],
            Kind::Describe => &["\\d"],
            Kind::ListTables => &["\\dt"],
            Kind::ListSchemas => &["\\dn"],
            Kind::ListCatalogs => &["\\l"],
            Kind::Include => &["\\i", "\\include"],
            Kind::Output => &["\\o", "\\out"],
            Kind::Edit => &["\\e", "\\edit"],
            Kind::Format => &["\\format", "\\f"],
            Kind::Expanded => &["\\x"],
            Kind::Pset => &["\\pset"],
            Kind::Timing => &["\\timing"],
            Kind::MaxRows => &["\\maxrows"],
            Kind::Variables => &["\\vars"],
        }
    }

    /// How it is written, for help.
    pub fn usage(self) -> &'static str {
        match self {
            Kind::Quit => "\\q",
            Kind::Help => "\\? | \\h [NAME]",
            Kind::Describe => "\\d [NAME]",
            Kind::ListTables => "\\dt [SCHEMA]",
            Kind::ListSchemas => "\\dn [CATALOG]",
            Kind::ListCatalogs => "\\l",
            Kind::Include => "\\i FILE",
            Kind::Output => "\\o [FILE]",
            Kind::Edit => "\\e",
            Kind::Format => "\\format [NAME]",
            Kind::Expanded => "\\x [on|off|auto]",
            Kind::Pset => "\\pset null TEXT",
            Kind::Timing => "\\timing [on|off]",
            Kind::MaxRows => "\\maxrows N",
            Kind::Variables => "\\vars",
        }
    }

    /// What it does, for help.
    pub fn about(self) -> &'static str {
        match self {
            Kind::Quit => "quit (also `exit` or `quit` on a line of their own, or Ctrl-D)",
            Kind::Help => "this help, or the syntax of statement NAME (\\h COPY INCREMENTAL)",
            Kind::Describe => "list tables of the current schema, or describe table NAME",
            Kind::ListTables => "list tables (of the current or given schema)",
            Kind::ListSchemas => "list schemas (of the current or given catalog)",
            Kind::ListCatalogs => "list catalogs",
            Kind::Include => "run the statements of FILE (relative to the including file)",
            Kind::Output => "send results to FILE (created or emptied); without FILE, to stdout",
            Kind::Edit => "edit the last statement in $EDITOR (else vi), then run it",
            Kind::Format => {
                "show or set the output format: table, csv, tsv, json, ndjson, markdown"
            }
            Kind::Expanded => "one line per column (auto: when a table is wider than the terminal)",
            Kind::Pset => "show NULL as TEXT (default NULL; a value reading TEXT is quoted)",
            Kind::Timing => "toggle (or set) printing how long each statement took",
            Kind::MaxRows => "cap table output at N rows (0 = no cap)",
            Kind::Variables => "show the session variables",
        }
    }

    fn find(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.names().contains(&name))
    }
}

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
        let Some(kind) = Kind::find(name) else {
            let near = Kind::ALL
                .iter()
                .flat_map(|k| k.names())
                .find(|n| strsim::levenshtein(n, name) == 1);
            return Err(match near {
                Some(n) => {
                    format!("unknown meta-command '{name}', did you mean {n}? (\\? lists them)")
                }
                None => format!("unknown meta-command '{name}' (\\? lists them)"),
            });
        };
        Ok(match kind {
            Kind::Quit => Command::Quit,
            Kind::Help => Command::Help(arg),
            Kind::Describe => Command::Describe(arg),
            Kind::ListTables => Command::ListTables(arg),
            Kind::ListSchemas => Command::ListSchemas(arg),
            Kind::ListCatalogs => Command::ListCatalogs,
            Kind::Include => Command::Include(arg.ok_or("\\i needs a file name")?),
            Kind::Output => Command::Output(arg),
            Kind::Edit => Command::Edit,
            Kind::Format => Command::Format(arg.map(|a| a.parse()).transpose()?),
            Kind::Expanded => Command::Expanded(match arg.as_deref().map(str::to_lowercase) {
                Some(a) if a == "auto" => Some(Expanded::Auto),
                _ => flag(&arg)?.map(|on| if on { Expanded::On } else { Expanded::Off }),
            }),
            Kind::Pset => match arg
                .as_deref()
                .and_then(|a| a.split_once(char::is_whitespace))
            {
                Some((option, value)) if option.eq_ignore_ascii_case("null") => {
                    Command::NullDisplay(unquote(value.trim()))
                }
                _ => return Err("\\pset takes `null TEXT` (\\format and \\x set the rest)".into()),
            },
            Kind::Timing => Command::Timing(flag(&arg)?),
            Kind::MaxRows => Command::MaxRows(
                arg.ok_or("\\maxrows needs a number")?
                    .parse()
                    .map_err(|_| "\\maxrows needs a number".to_string())?,
            ),
            Kind::Variables => Command::Variables,
        })
    }
}

/// `'text'` is `text` (psql's quoting of `\pset` values); `''` is the empty string.
fn unquote(value: &str) -> String {
    match value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        Some(inner) => inner.replace("''", "'"),
        None => value.to_string(),
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
        assert_eq!(
            "\\x auto".parse(),
            Ok(Command::Expanded(Some(Expanded::Auto)))
        );
        assert_eq!("\\x".parse(), Ok(Command::Expanded(None)));
        assert_eq!(
            "\\pset null '(null)'".parse(),
            Ok(Command::NullDisplay("(null)".into()))
        );
        assert_eq!(
            "\\pset null ''".parse(),
            Ok(Command::NullDisplay(String::new()))
        );
        assert_eq!(
            "\\h copy incremental".parse(),
            Ok(Command::Help(Some("copy incremental".into())))
        );
        assert_eq!("\\o".parse(), Ok(Command::Output(None)));
        assert!("\\nope".parse::<Command>().is_err());
        let typo = "\\dd".parse::<Command>().unwrap_err();
        assert!(typo.contains("did you mean \\d?"), "{typo}");
    }

    /// Every name parses to its own kind, and no name is given to two kinds.
    #[test]
    fn every_kind_parses_by_each_of_its_names() {
        let mut seen = std::collections::HashSet::new();
        for kind in Kind::ALL {
            for name in kind.names() {
                assert!(seen.insert(*name), "{name} names two kinds");
                assert_eq!(Kind::find(name), Some(kind));
            }
        }
    }
}
