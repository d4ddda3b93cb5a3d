//! Step 5 of a copy: record it. The control row is advanced to the new mark as a typed value,
//! by compare-and-set on what the run read (the history row is appended by the caller, for
//! failed runs too).

use super::control;
use super::plan::CopyPlan;
use super::resolve::Resolved;
use super::start::StartPoint;
use crate::engine::Session;
use crate::error::Result;

/// Advance the control row to the plan's new mark, if it is not there yet.
pub(super) async fn advance_control_row(
    session: &Session,
    r: &Resolved,
    start: &StartPoint,
    plan: &CopyPlan,
) -> Result<()> {
    let (Some(row), Some(mark)) = (&r.control_row, &plan.new_mark) else {
        return Ok(());
    };
    let new = control::convert(mark, &row.mark_type, "new mark")?;
    if new == row.mark {
        return Ok(());
    }
    // Compare-and-set: the row may still hold what this run saw, or the start point a
    // concurrent run of this copy committed and recorded meanwhile.
    let mut expected = vec![row.mark.clone()];
    if let Some(s) = start.value() {
        expected.push(control::convert(s, &row.mark_type, "start point")?);
    }
    control::advance(session, row, &expected, &new).await
}
