//! `RANGE BETWEEN n PRECEDING AND ...` over a DATE order key counts days, as in Spark
//! (`count(*) OVER (ORDER BY d RANGE BETWEEN 1 PRECEDING AND CURRENT ROW)` counts the rows of
//! that day and the day before). DataFusion cast the integer offset to an interval of
//! nanoseconds, so the frame held only the current day's rows: a running count came out. The
//! offsets are rewritten into `INTERVAL n DAY` before types are coerced
//! ([`DateRangeFrames`]).

use datafusion::arrow::datatypes::{DataType, IntervalMonthDayNano};
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::{
    Expr, ExprSchemable, LogicalPlan, WindowFrameBound, WindowFrameUnits,
};
use datafusion::optimizer::AnalyzerRule;

#[derive(Debug, Default)]
pub struct DateRangeFrames;

impl AnalyzerRule for DateRangeFrames {
    fn analyze(
        &self,
        plan: LogicalPlan,
        _config: &ConfigOptions,
    ) -> datafusion::common::Result<LogicalPlan> {
        super::zone::rewrite_expressions(plan, |e, schema| {
            e.transform_up(|e| {
                let Expr::WindowFunction(mut w) = e else {
                    return Ok(Transformed::no(e));
                };
                let frame = &w.params.window_frame;
                let date_key = frame.units == WindowFrameUnits::Range
                    && w.params.order_by.len() == 1
                    && matches!(
                        w.params.order_by[0].expr.get_type(schema),
                        Ok(DataType::Date32 | DataType::Date64)
                    );
                if !date_key {
                    return Ok(Transformed::no(Expr::WindowFunction(w)));
                }
                let start = days(&frame.start_bound)?;
                let end = days(&frame.end_bound)?;
                if start.is_none() && end.is_none() {
                    return Ok(Transformed::no(Expr::WindowFunction(w)));
                }
                let frame = &mut w.params.window_frame;
                if let Some(b) = start {
                    frame.start_bound = b;
                }
                if let Some(b) = end {
                    frame.end_bound = b;
                }
                Ok(Transformed::yes(Expr::WindowFunction(w)))
            })
        })
    }

    fn name(&self) -> &str {
        "tidemark_date_range_frames"
    }
}

/// An integer offset of a frame bound as the same number of days; None for any other bound.
fn days(bound: &WindowFrameBound) -> datafusion::common::Result<Option<WindowFrameBound>> {
    let (value, preceding) = match bound {
        WindowFrameBound::Preceding(v) => (v, true),
        WindowFrameBound::Following(v) => (v, false),
        WindowFrameBound::CurrentRow => return Ok(None),
    };
    // The SQL planner keeps a RANGE offset as its text (`1`, or `1 DAY` for an interval).
    let n = match value {
        ScalarValue::Utf8(Some(text)) => match text.trim().parse::<i32>() {
            Ok(n) => n,
            Err(_) => return Ok(None),
        },
        v if !v.is_null() && v.data_type().is_integer() => match v.cast_to(&DataType::Int32)? {
            ScalarValue::Int32(Some(n)) => n,
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    let interval = ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano::new(0, n, 0)));
    Ok(Some(match preceding {
        true => WindowFrameBound::Preceding(interval),
        false => WindowFrameBound::Following(interval),
    }))
}
