//! `read_files(path [, option => value, ...])`: CSV, JSON or Parquet files as a table, as in
//! Databricks (a file, a directory read with its nested directories, or a glob; options by
//! name; one schema inferred across every file). The reading is `engine::files`'.

use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{
    FunctionArg, FunctionArgExpr, FunctionArgOperator, Ident, TableAlias, TableFactor,
};

use crate::engine::Session;
use crate::engine::files::{self, Format, ReadOptions, Reader};
use crate::error::{Error, Result};

/// The built-in's name.
pub(crate) const READ_FILES: &str = "read_files";

impl Session {
    /// The call's table, registered under a scratch name; returns the FROM item reading it
    /// and the name (dropped with the statement).
    pub(crate) async fn read_files(
        &self,
        args: Vec<FunctionArg>,
        alias: Option<TableAlias>,
    ) -> Result<(TableFactor, String)> {
        let mut args = args.into_iter();
        let path = match args.next() {
            Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(e))) => {
                match self.eval_scalar(&e).await? {
                    ScalarValue::Utf8(Some(s))
                    | ScalarValue::Utf8View(Some(s))
                    | ScalarValue::LargeUtf8(Some(s)) => s,
                    other => {
                        return Err(Error::Type(format!(
                            "read_files: the path is a STRING, found {other}"
                        )));
                    }
                }
            }
            _ => {
                return Err(Error::class(
                    "WRONG_NUM_ARGS",
                    "read_files takes a path, then options by name: read_files('/data/orders', format => 'csv', header => true)",
                ));
            }
        };
        let mut options = vec![];
        for arg in args {
            let (name, value) = match arg {
                FunctionArg::Named {
                    name,
                    arg: FunctionArgExpr::Expr(e),
                    operator: FunctionArgOperator::RightArrow | FunctionArgOperator::Equals,
                } => (name.value, e),
                other => {
                    return Err(Error::Invalid(format!(
                        "read_files takes its options by name (header => true), found {other}"
                    )));
                }
            };
            let value = self.eval_scalar(&value).await?;
            let text = match value {
                ScalarValue::Utf8(Some(s))
                | ScalarValue::Utf8View(Some(s))
                | ScalarValue::LargeUtf8(Some(s)) => s,
                v if v.is_null() => {
                    return Err(Error::Type(format!(
                        "read_files: option {name} cannot be NULL"
                    )));
                }
                v => v.to_string(),
            };
            options.push((name, text));
        }
        let format = detect_format(&path, &options)?;
        let options = ReadOptions::parse(Reader::ReadFiles, format, &options, &path)?;
        let listing = files::list(READ_FILES, &path, options.walk())?;
        let found = files::filter_names(listing.files, &options);
        if found.is_empty() && options.schema.is_none() {
            return Err(Error::class(
                "CF_EMPTY_DIR_FOR_SCHEMA_INFERENCE",
                format!(
                    "read_files: no file to read at {path}, so no columns to infer: give the columns (schema => 'a INT, b STRING') to read it as an empty table"
                ),
            ));
        }
        let schema = self.file_schema(READ_FILES, &found, &options).await?;
        let table = self.file_table(&found, schema, &options)?;
        let mut guard = super::Scratch::default();
        let name = self.register_for_statement(table, &mut guard)?;
        let scratch = guard.release();
        let query = crate::parser::query_text(&format!("SELECT * FROM {name}"))?;
        let factor = TableFactor::Derived {
            lateral: false,
            subquery: Box::new(query),
            alias: Some(alias.unwrap_or(TableAlias {
                explicit: true,
                name: Ident::new(READ_FILES),
                columns: vec![],
                at: None,
            })),
            sample: None,
        };
        Ok((factor, scratch))
    }
}

/// The files' format when no `format` option names it and the path's extension does not:
/// the one extension of the files found (as Databricks detects it).
fn detect_format(path: &str, options: &[(String, String)]) -> Result<Option<Format>> {
    let given = |key: &str| {
        options
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    };
    if given("format").is_some() || Format::of_extension(path.trim_end_matches('/')).is_some() {
        return Ok(None);
    }
    let how = files::Walk {
        ignore_partitions: given("partitionColumns").is_some_and(|v| v.is_empty())
            || given("recursiveFileLookup").is_some_and(|v| v.eq_ignore_ascii_case("true")),
    };
    let listing = files::list(READ_FILES, path, how)?;
    let mut formats = listing
        .files
        .iter()
        .map(|f| Format::of_extension(&f.text()));
    let Some(Some(first)) = formats.next() else {
        return Ok(None);
    };
    Ok(formats.all(|f| f == Some(first)).then_some(first))
}
