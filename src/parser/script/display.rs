//! Compound statements print back as SQL (`parse(x.to_string())` round-trips).

use super::{Compound, Condition, Item, ItemKind};

impl std::fmt::Display for Compound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(l) = &self.label {
            write!(f, "{l}: ")?;
        }
        write!(f, "BEGIN ")?;
        write_items(f, &self.items)?;
        write!(f, "END")
    }
}

fn write_items(f: &mut std::fmt::Formatter<'_>, items: &[Item]) -> std::fmt::Result {
    for item in items {
        write!(f, "{}; ", item.kind)?;
    }
    Ok(())
}

impl std::fmt::Display for ItemKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let label = |l: &Option<String>| l.as_ref().map(|l| format!("{l}: ")).unwrap_or_default();
        match self {
            ItemKind::Sql(s) | ItemKind::Declare(s) => write!(f, "{s}"),
            ItemKind::Condition { name, sqlstate } => {
                write!(f, "DECLARE {name} CONDITION")?;
                if let Some(s) = sqlstate {
                    write!(f, " FOR SQLSTATE '{s}'")?;
                }
                Ok(())
            }
            ItemKind::Handler {
                exit,
                conditions,
                action,
            } => {
                let conditions: Vec<String> = conditions
                    .iter()
                    .map(|c| match c {
                        Condition::SqlException => "SQLEXCEPTION".to_string(),
                        Condition::NotFound => "NOT FOUND".to_string(),
                        Condition::SqlState(s) => format!("SQLSTATE '{s}'"),
                        Condition::Named(n) => n.clone(),
                    })
                    .collect();
                write!(
                    f,
                    "DECLARE {} HANDLER FOR {} {}",
                    if *exit { "EXIT" } else { "CONTINUE" },
                    conditions.join(", "),
                    action.kind
                )
            }
            ItemKind::Block(b) => write!(f, "{b}"),
            ItemKind::If {
                branches,
                otherwise,
            } => {
                for (i, (c, items)) in branches.iter().enumerate() {
                    write!(f, "{} {c} THEN ", if i == 0 { "IF" } else { "ELSEIF" })?;
                    write_items(f, items)?;
                }
                if let Some(items) = otherwise {
                    write!(f, "ELSE ")?;
                    write_items(f, items)?;
                }
                write!(f, "END IF")
            }
            ItemKind::Case {
                operand,
                whens,
                otherwise,
            } => {
                write!(f, "CASE ")?;
                if let Some(o) = operand {
                    write!(f, "{o} ")?;
                }
                for (v, items) in whens {
                    write!(f, "WHEN {v} THEN ")?;
                    write_items(f, items)?;
                }
                if let Some(items) = otherwise {
                    write!(f, "ELSE ")?;
                    write_items(f, items)?;
                }
                write!(f, "END CASE")
            }
            ItemKind::While {
                label: l,
                condition,
                body,
            } => {
                write!(f, "{}WHILE {condition} DO ", label(l))?;
                write_items(f, body)?;
                write!(f, "END WHILE")
            }
            ItemKind::Repeat {
                label: l,
                body,
                until,
            } => {
                write!(f, "{}REPEAT ", label(l))?;
                write_items(f, body)?;
                write!(f, "UNTIL {until} END REPEAT")
            }
            ItemKind::Loop { label: l, body } => {
                write!(f, "{}LOOP ", label(l))?;
                write_items(f, body)?;
                write!(f, "END LOOP")
            }
            ItemKind::For {
                label: l,
                var,
                query,
                body,
            } => {
                write!(f, "{}FOR ", label(l))?;
                if let Some(v) = var {
                    write!(f, "{v} AS ")?;
                }
                write!(f, "{query} DO ")?;
                write_items(f, body)?;
                write!(f, "END FOR")
            }
            ItemKind::Leave(l) => write!(f, "LEAVE {l}"),
            ItemKind::Iterate(l) => write!(f, "ITERATE {l}"),
            ItemKind::Signal {
                condition,
                sqlstate,
                message,
            } => {
                write!(f, "SIGNAL ")?;
                match (condition, sqlstate) {
                    (Some(c), _) => write!(f, "{c}")?,
                    (None, Some(s)) => write!(f, "SQLSTATE '{s}'")?,
                    (None, None) => {}
                }
                if let Some(m) = message {
                    write!(f, " SET MESSAGE_TEXT = {m}")?;
                }
                Ok(())
            }
            ItemKind::Resignal { message } => {
                write!(f, "RESIGNAL")?;
                if let Some(m) = message {
                    write!(f, " SET MESSAGE_TEXT = {m}")?;
                }
                Ok(())
            }
        }
    }
}
