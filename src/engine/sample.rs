//! A table's clauses that DataFusion's planner would drop without a word: `TABLESAMPLE`,
//! rewritten into subqueries before planning or refused by name, and the rest (`WITH
//! ORDINALITY`, table and index hints, partition selection) refused by name.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Ident, Query, TableFactor, VisitorMut};

use crate::error::{Error, Result};

/// Turns `t TABLESAMPLE (n ROWS)` into `(SELECT * FROM t LIMIT n) AS t` and
/// `t TABLESAMPLE (p PERCENT)` into a subquery keeping each row with probability p/100
/// (DataFusion's planner would drop the clause without a word). Forms that cannot be
/// honoured (BUCKET, REPEATABLE seeds, samples of subqueries) are refused by name.
#[derive(Default)]
pub(super) struct SampleRewriter {
    pub(super) error: Option<Error>,
}

impl SampleRewriter {
    fn rewrite(&mut self, factor: &mut TableFactor) -> Result<()> {
        use datafusion::sql::sqlparser::ast::{
            TableAlias, TableSample, TableSampleKind, TableSampleUnit,
        };
        let refuse = |what: &str| {
            Error::class(
                "UNSUPPORTED_FEATURE",
                format!("TABLESAMPLE {what} is not supported: use (n ROWS) or (p PERCENT)"),
            )
        };
        let (sample, name) = match factor {
            TableFactor::Table { sample, name, .. } => match sample.take() {
                Some(s) => (s, name.clone()),
                None => return Ok(()),
            },
            TableFactor::Derived {
                sample: Some(_), ..
            } => {
                return Err(refuse("on a subquery"));
            }
            _ => return Ok(()),
        };
        let (TableSampleKind::BeforeTableAlias(s) | TableSampleKind::AfterTableAlias(s)) = sample;
        let TableSample {
            modifier: _,
            name: _, // BERNOULLI / SYSTEM / ROW: every form samples rows independently here
            quantity,
            seed,
            bucket,
            offset,
        } = *s;
        if seed.is_some() {
            return Err(refuse("REPEATABLE (seed)"));
        }
        if bucket.is_some() {
            return Err(refuse("(BUCKET x OUT OF y)"));
        }
        if offset.is_some() {
            return Err(refuse("OFFSET"));
        }
        let Some(quantity) = quantity else {
            return Err(refuse("without a quantity"));
        };
        let body = match quantity.unit {
            Some(TableSampleUnit::Rows) => {
                format!("SELECT * FROM __sample LIMIT {}", quantity.value)
            }
            Some(TableSampleUnit::Percent) => format!(
                "SELECT * FROM __sample WHERE random() * 100 < ({})",
                quantity.value
            ),
            None => {
                return Err(refuse(&format!(
                    "({}) without ROWS or PERCENT",
                    quantity.value
                )));
            }
        };
        let mut query = datafusion::sql::sqlparser::parser::Parser::new(&crate::parser::DIALECT)
            .try_with_sql(&body)?
            .parse_query()?;
        let alias = match factor {
            TableFactor::Table { alias, .. } => alias.take(),
            _ => None,
        };
        let alias = alias.unwrap_or_else(|| TableAlias {
            explicit: true,
            name: name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .cloned()
                .unwrap_or_else(|| Ident::new("sample")),
            columns: vec![],
            at: None,
        });
        if let datafusion::sql::sqlparser::ast::SetExpr::Select(select) = query.body.as_mut() {
            select.from[0].relation = factor.clone();
        }
        *factor = TableFactor::Derived {
            lateral: false,
            subquery: query,
            alias: Some(alias),
            sample: None,
        };
        Ok(())
    }
}

impl VisitorMut for SampleRewriter {
    type Break = ();

    /// `TABLESAMPLE` inside a CTE is refused: DataFusion plans a CTE once per reference, so
    /// two references would be two different samples (Databricks samples once).
    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        use datafusion::sql::sqlparser::ast::{Visit, Visitor};
        struct Sampled(bool);
        impl Visitor for Sampled {
            type Break = ();
            fn pre_visit_table_factor(&mut self, f: &TableFactor) -> ControlFlow<()> {
                // Any sample: PERCENT draws anew per reference, and ROWS (a LIMIT without an
                // order) may take other rows per reference.
                if let TableFactor::Table {
                    sample: Some(_), ..
                } = f
                {
                    self.0 = true;
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            }
        }
        let Some(with) = &query.with else {
            return ControlFlow::Continue(());
        };
        for cte in &with.cte_tables {
            let mut found = Sampled(false);
            let _ = cte.query.visit(&mut found);
            if found.0 {
                self.error = Some(Error::class(
                    "UNSUPPORTED_FEATURE",
                    format!(
                        "TABLESAMPLE inside the WITH clause `{}` is not supported: \
                         each reference to it would be another sample. Sample in the main \
                         query, or CREATE TABLE ... AS the sample first",
                        cte.alias.name
                    ),
                ));
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        match unplanned_clause(factor).map_or_else(|| self.rewrite(factor), Err) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

/// A clause of `factor` that the planner would ignore, as the error refusing it.
fn unplanned_clause(factor: &TableFactor) -> Option<Error> {
    let refused = |what: String| Some(Error::class("UNSUPPORTED_FEATURE", what));
    match factor {
        TableFactor::Function {
            name,
            with_ordinality: true,
            ..
        } => {
            return refused(format!(
                "{name}: WITH ORDINALITY (number the rows with row_number() OVER (), or posexplode) is not supported"
            ));
        }
        // PIVOT reads its source by name: a sample there would be another query.
        TableFactor::Pivot { table, .. } | TableFactor::Unpivot { table, .. }
            if matches!(
                table.as_ref(),
                TableFactor::Table {
                    sample: Some(_),
                    ..
                }
            ) =>
        {
            return refused(
                "TABLESAMPLE on the source of a PIVOT or UNPIVOT is not supported: sample in a view or a CREATE TABLE ... AS first".to_string(),
            );
        }
        _ => {}
    }
    let TableFactor::Table {
        name,
        with_hints,
        partitions,
        with_ordinality,
        json_path,
        index_hints,
        ..
    } = factor
    else {
        return None;
    };
    let what = if *with_ordinality {
        "WITH ORDINALITY (number the rows with row_number() OVER (), or posexplode)"
    } else if !with_hints.is_empty() {
        "table hints WITH (...)"
    } else if !index_hints.is_empty() {
        "index hints"
    } else if !partitions.is_empty() {
        "PARTITION (...) selection (filter on the partition columns instead)"
    } else if json_path.is_some() {
        "a JSON path after a table name"
    } else {
        return None;
    };
    refused(format!("{name}: {what} is not supported"))
}
