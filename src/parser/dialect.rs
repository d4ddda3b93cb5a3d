//! tidemark's SQL dialect: sqlparser's Databricks dialect (which the parser also recognises as
//! Databricks where it asks), plus the Spark operators it leaves out: `a div b` (integer
//! division) and the shifts `a << n`, `a >> n` (at Spark's precedence), and `IS [NOT]
//! DISTINCT FROM` at the precedence of a comparison.

use std::any::TypeId;

use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr};
use datafusion::sql::sqlparser::dialect::{DatabricksDialect, Dialect, Precedence};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

#[derive(Debug, Default)]
pub struct Tidemark;

const DATABRICKS: DatabricksDialect = DatabricksDialect {};

impl Dialect for Tidemark {
    fn dialect(&self) -> TypeId {
        TypeId::of::<DatabricksDialect>()
    }
    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        DATABRICKS.is_delimited_identifier_start(ch)
    }
    fn is_identifier_start(&self, ch: char) -> bool {
        DATABRICKS.is_identifier_start(ch)
    }
    fn is_identifier_part(&self, ch: char) -> bool {
        DATABRICKS.is_identifier_part(ch)
    }
    fn supports_numeric_prefix(&self) -> bool {
        DATABRICKS.supports_numeric_prefix()
    }
    fn supports_filter_during_aggregation(&self) -> bool {
        DATABRICKS.supports_filter_during_aggregation()
    }
    fn supports_group_by_expr(&self) -> bool {
        DATABRICKS.supports_group_by_expr()
    }
    fn supports_table_versioning(&self) -> bool {
        DATABRICKS.supports_table_versioning()
    }
    fn supports_lambda_functions(&self) -> bool {
        DATABRICKS.supports_lambda_functions()
    }
    fn supports_select_wildcard_except(&self) -> bool {
        DATABRICKS.supports_select_wildcard_except()
    }
    /// `ORDER BY ALL` (Databricks has it; rewritten into ordinals before planning).
    fn supports_order_by_all(&self) -> bool {
        true
    }
    fn require_interval_qualifier(&self) -> bool {
        DATABRICKS.require_interval_qualifier()
    }
    fn supports_struct_literal(&self) -> bool {
        DATABRICKS.supports_struct_literal()
    }
    fn supports_nested_comments(&self) -> bool {
        DATABRICKS.supports_nested_comments()
    }
    fn supports_group_by_with_modifier(&self) -> bool {
        DATABRICKS.supports_group_by_with_modifier()
    }
    fn supports_values_as_table_factor(&self) -> bool {
        DATABRICKS.supports_values_as_table_factor()
    }
    fn supports_optimize_table(&self) -> bool {
        DATABRICKS.supports_optimize_table()
    }
    fn supports_bang_not_operator(&self) -> bool {
        DATABRICKS.supports_bang_not_operator()
    }
    fn supports_cte_without_as(&self) -> bool {
        DATABRICKS.supports_cte_without_as()
    }
    fn supports_select_item_multi_column_alias(&self) -> bool {
        DATABRICKS.supports_select_item_multi_column_alias()
    }
    /// `a << n` and `a >> n`, Spark's shifts.
    /// `MAP<STRING, INT>` as a type (Databricks' spelling; sqlparser's Databricks dialect
    /// does not parse it).
    fn supports_map_literal_with_angle_brackets(&self) -> bool {
        true
    }

    fn supports_bitwise_shift_operators(&self) -> bool {
        true
    }
    /// Spark ranks the shifts below `+`/`-` and above `&`, `^` and `|` (sqlparser put them
    /// with `^`: `1 << 2 & 3` read as `1 << (2 & 3)`).
    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        match parser.peek_token_ref().token {
            Token::ShiftLeft | Token::ShiftRight => {
                Some(Ok(self.prec_value(Precedence::PlusMinus) - 1))
            }
            _ => None,
        }
    }
    /// `a div b`, at the precedence of `*` and `/` (the parser ranks DIV there).
    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        // `a IS [NOT] DISTINCT FROM b AND c` is `(a IS [NOT] DISTINCT FROM b) AND c`; the
        // right side is a value expression, comparisons included (Spark's grammar), but not
        // AND, OR, NOT or LIKE (sqlparser read all of `b AND c` as the right side).
        for (words, negated) in [
            (&[Keyword::IS, Keyword::DISTINCT, Keyword::FROM][..], false),
            (
                &[Keyword::IS, Keyword::NOT, Keyword::DISTINCT, Keyword::FROM][..],
                true,
            ),
        ] {
            if parser.parse_keywords(words) {
                let right = parser.parse_subexpr(self.prec_value(Precedence::Like));
                return Some(right.map(|right| {
                    let (l, r) = (Box::new(expr.clone()), Box::new(right));
                    if negated {
                        Expr::IsNotDistinctFrom(l, r)
                    } else {
                        Expr::IsDistinctFrom(l, r)
                    }
                }));
            }
        }
        if !parser.parse_keyword(Keyword::DIV) {
            return None;
        }
        Some(
            parser
                .parse_subexpr(precedence)
                .map(|right| Expr::BinaryOp {
                    left: Box::new(expr.clone()),
                    op: BinaryOperator::MyIntegerDivide,
                    right: Box::new(right),
                }),
        )
    }
}
