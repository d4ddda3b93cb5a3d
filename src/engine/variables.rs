//! Session variables (`DECLARE`, `SET VAR`) and loop-row bindings of `FOR EACH`, with the
//! Databricks lookup rules. A copy of this store is what each loop iteration gets.

use std::collections::BTreeMap;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::Expr;

use crate::error::{Error, Result};

/// One declared variable.
#[derive(Debug, Clone)]
pub struct Variable {
    pub data_type: DataType,
    pub value: ScalarValue,
    /// The DEFAULT expression, re-evaluated by `SET VAR x = DEFAULT`.
    pub default: Option<Expr>,
}

/// The row a loop variable stands for.
#[derive(Debug, Clone)]
pub struct LoopRow {
    pub name: Option<String>,
    pub columns: Vec<(String, ScalarValue)>,
}

/// All names an expression may refer to besides columns.
#[derive(Debug, Clone, Default)]
pub struct Variables {
    vars: BTreeMap<String, Variable>,
    rows: Vec<LoopRow>,
    /// Variables a running script block declared (dropped when the block ends).
    locals: std::collections::BTreeSet<String>,
}

impl Variables {
    /// Declared variable by name.
    pub fn get(&self, name: &str) -> Option<&Variable> {
        self.vars.get(&name.to_lowercase())
    }

    /// Whether a declared variable exists.
    pub fn contains(&self, name: &str) -> bool {
        self.vars.contains_key(&name.to_lowercase())
    }

    /// Declare (or replace) a variable.
    pub fn declare(&mut self, name: &str, var: Variable) {
        self.vars.insert(name.to_lowercase(), var);
    }

    /// Assign a value to an existing variable, cast to its type by the caller.
    pub fn assign(&mut self, name: &str, value: ScalarValue) -> Result<()> {
        match self.vars.get_mut(&name.to_lowercase()) {
            Some(v) => {
                v.value = value;
                Ok(())
            }
            None => Err(unresolved(name)),
        }
    }

    /// Drop a variable; false when it did not exist.
    pub fn drop_var(&mut self, name: &str) -> bool {
        self.locals.remove(&name.to_lowercase());
        self.vars.remove(&name.to_lowercase()).is_some()
    }

    /// Whether a variable is a script block's own.
    pub fn is_local(&self, name: &str) -> bool {
        self.locals.contains(&name.to_lowercase())
    }

    /// Mark a variable as a script block's own.
    pub fn mark_local(&mut self, name: &str) {
        self.locals.insert(name.to_lowercase());
    }

    /// The script blocks' own variables only (none when no script runs).
    pub fn only_locals(&self) -> Option<Variables> {
        if self.locals.is_empty() {
            return None;
        }
        Some(Variables {
            vars: self
                .vars
                .iter()
                .filter(|(n, _)| self.locals.contains(*n))
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect(),
            rows: vec![],
            locals: self.locals.clone(),
        })
    }

    /// Declared variables in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Variable)> {
        self.vars.iter()
    }

    /// Bind a loop row (innermost last).
    pub fn push_row(&mut self, row: LoopRow) {
        self.rows.push(row);
    }

    /// Remove the innermost loop row.
    pub fn pop_row(&mut self) {
        self.rows.pop();
    }

    /// Whether anything could be referenced by a bare or qualified name.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty() && self.rows.is_empty()
    }

    /// A bare name: a loop row's column (innermost first), else a declared variable.
    pub fn lookup_bare(&self, name: &str) -> Option<ScalarValue> {
        let name = name.to_lowercase();
        for row in self.rows.iter().rev() {
            if let Some((_, v)) = row
                .columns
                .iter()
                .find(|(c, _)| c.eq_ignore_ascii_case(&name))
            {
                return Some(v.clone());
            }
        }
        self.vars.get(&name).map(|v| v.value.clone())
    }

    /// A qualified name: `loopvar.col`, `session.x` or `system.session.x`.
    /// `Ok(None)` means "not a variable reference" (e.g. `t.col`).
    pub fn lookup_qualified(&self, parts: &[String]) -> Result<Option<ScalarValue>> {
        let lower: Vec<String> = parts.iter().map(|p| p.to_lowercase()).collect();
        match lower.as_slice() {
            [v, col] => {
                if let Some(row) = self
                    .rows
                    .iter()
                    .rev()
                    .find(|r| r.name.as_deref() == Some(v.as_str()))
                {
                    return match row
                        .columns
                        .iter()
                        .find(|(c, _)| c.eq_ignore_ascii_case(col))
                    {
                        Some((_, val)) => Ok(Some(val.clone())),
                        None => Err(Error::class(
                            "UNRESOLVED_COLUMN",
                            format!(
                                "loop variable '{v}' has no column '{col}' (columns: {})",
                                row.columns
                                    .iter()
                                    .map(|(c, _)| c.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        )),
                    };
                }
                if v == "session" {
                    return self
                        .get(col)
                        .map(|x| Some(x.value.clone()))
                        .ok_or_else(|| unresolved(col));
                }
                Ok(None)
            }
            [s, sess, name] if s == "system" && sess == "session" => self
                .get(name)
                .map(|x| Some(x.value.clone()))
                .ok_or_else(|| unresolved(name)),
            _ => Ok(None),
        }
    }

    /// Whether a name is a loop variable (so `name.col` refers to it).
    pub fn is_loop_var(&self, name: &str) -> bool {
        self.rows.iter().any(|r| {
            r.name
                .as_deref()
                .is_some_and(|n| n.eq_ignore_ascii_case(name))
        })
    }
}

/// The UNRESOLVED_VARIABLE error.
pub fn unresolved(name: &str) -> Error {
    Error::class(
        "UNRESOLVED_VARIABLE",
        format!("variable '{name}' is not declared (declare it with DECLARE VARIABLE {name} ...)"),
    )
}
