//! Where a run starts: the rules between SINCE, the control row and the mark the target's last
//! committed run recorded. A pure function of the three, so that the difference between a
//! backfill (a control row set on purpose) and a repair (a run that died after its commit,
//! before it advanced the control row) is stated once and unit-tested.

use datafusion::common::ScalarValue;

use super::metadata::LastRun;

/// The point above which a run copies rows.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum StartPoint {
    /// Every row: a first run, or a control row holding NULL with nothing to repair.
    Beginning,
    /// `SINCE v`: rows above `v`; rows at it are not looked for.
    Since(ScalarValue),
    /// The control row's mark: the last run's, or one set on purpose (a backfill).
    Control(ScalarValue),
    /// The mark the target's last run committed, which the control row never recorded (that
    /// run died, or lost a race, before advancing it).
    Repaired(ScalarValue),
    /// The mark the target's last run committed (a copy without a control table).
    LastRun(ScalarValue),
}

impl StartPoint {
    /// The value rows must be above (None: every row with a watermark).
    pub(super) fn value(&self) -> Option<&ScalarValue> {
        match self {
            StartPoint::Beginning => None,
            StartPoint::Since(v)
            | StartPoint::Control(v)
            | StartPoint::Repaired(v)
            | StartPoint::LastRun(v) => Some(v),
        }
    }

    /// Whether the start is a mark some run reached: rows at it (ties, and rows that arrive at
    /// the mark later) may be missing from the target and are looked for.
    pub(super) fn is_a_mark(&self) -> bool {
        !matches!(self, StartPoint::Beginning | StartPoint::Since(_))
    }
}

/// Where a run starts. `since`: the SINCE value, in the watermark's type. `control`: the
/// control row's `last_watermark` in the watermark's type (a NULL value for a NULL mark), None
/// without a control table. `last_run`: what the target's last run of this pair committed.
pub(super) fn start_point(
    since: Option<&ScalarValue>,
    control: Option<&ScalarValue>,
    last_run: Option<&LastRun>,
) -> StartPoint {
    if let Some(since) = since {
        return StartPoint::Since(since.clone());
    }
    let committed = last_run.and_then(|r| r.mark.clone());
    match (control, last_run, committed) {
        (Some(m), Some(r), Some(mark)) if repairs(m, r, &mark) => StartPoint::Repaired(mark),
        (Some(m), _, _) if m.is_null() => StartPoint::Beginning,
        (Some(m), _, _) => StartPoint::Control(m.clone()),
        (None, _, Some(mark)) => StartPoint::LastRun(mark),
        (None, _, None) => StartPoint::Beginning,
    }
}

/// Whether `control` would be honoured as a value set on purpose (a backfill): it is not the
/// mark `last` committed, and no repair recognises it.
pub(super) fn reads_as_backfill(control: &ScalarValue, last: &LastRun) -> bool {
    let repaired = matches!(
        start_point(None, Some(control), Some(last)),
        StartPoint::Repaired(_)
    );
    !repaired && last.mark.as_ref() != Some(control)
}

/// Whether the control row still holds what the last committed run saw or started from, below
/// that run's mark: the run died (or lost a race) before advancing it, so the target's mark is
/// the truth. Any other value was set on purpose (a backfill) and is honoured.
fn repairs(control: &ScalarValue, last: &LastRun, mark: &ScalarValue) -> bool {
    if control.is_null() {
        // A first run (the row was NULL then too) that committed and never advanced it.
        return last.control.is_none();
    }
    (last.control.as_ref() == Some(control) || last.previous.as_ref() == Some(control))
        && mark > control
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(i: i64) -> ScalarValue {
        ScalarValue::Int64(Some(i))
    }

    fn run(control: Option<i64>, previous: Option<i64>, mark: Option<i64>) -> LastRun {
        LastRun {
            control: control.map(int),
            previous: previous.map(int),
            mark: mark.map(int),
            ..Default::default()
        }
    }

    const NULL: ScalarValue = ScalarValue::Int64(None);

    #[test]
    fn only_a_value_no_run_explains_reads_as_a_backfill() {
        // The last run saw 5, started at 5, reached 9.
        let last = run(Some(5), Some(5), Some(9));
        assert!(!reads_as_backfill(&int(9), &last), "its own mark");
        assert!(!reads_as_backfill(&int(5), &last), "a repair");
        assert!(
            reads_as_backfill(&int(2), &last),
            "a backfill, or a stale read"
        );
        assert!(reads_as_backfill(&NULL, &last), "a reset, or a stale read");
    }

    #[test]
    fn since_wins_over_the_control_row_and_the_target() {
        let last = run(Some(5), Some(5), Some(9));
        assert_eq!(
            start_point(Some(&int(2)), Some(&int(5)), Some(&last)),
            StartPoint::Since(int(2))
        );
        assert!(!StartPoint::Since(int(2)).is_a_mark());
    }

    #[test]
    fn a_first_run_copies_everything() {
        assert_eq!(start_point(None, None, None), StartPoint::Beginning);
        assert_eq!(start_point(None, Some(&NULL), None), StartPoint::Beginning);
        assert_eq!(StartPoint::Beginning.value(), None);
    }

    #[test]
    fn a_run_that_died_after_its_commit_is_repaired_from_the_target() {
        // It saw 5, committed up to 9, and died before the control row said 9.
        let died = run(Some(5), Some(5), Some(9));
        assert_eq!(
            start_point(None, Some(&int(5)), Some(&died)),
            StartPoint::Repaired(int(9))
        );
        // A concurrent run of this copy started from 5 and recorded its start point there.
        let raced = run(Some(3), Some(5), Some(9));
        assert_eq!(
            start_point(None, Some(&int(5)), Some(&raced)),
            StartPoint::Repaired(int(9))
        );
        // A first run from a NULL control row that committed and died.
        let first = run(None, None, Some(9));
        assert_eq!(
            start_point(None, Some(&NULL), Some(&first)),
            StartPoint::Repaired(int(9))
        );
        assert!(StartPoint::Repaired(int(9)).is_a_mark());
    }

    #[test]
    fn a_control_row_set_on_purpose_is_honoured() {
        let last = run(Some(5), Some(5), Some(9));
        // Lowered to backfill.
        assert_eq!(
            start_point(None, Some(&int(2)), Some(&last)),
            StartPoint::Control(int(2))
        );
        // Raised to skip.
        assert_eq!(
            start_point(None, Some(&int(20)), Some(&last)),
            StartPoint::Control(int(20))
        );
        // Reset to NULL after runs that had a control row: a full reload.
        assert_eq!(
            start_point(None, Some(&NULL), Some(&last)),
            StartPoint::Beginning
        );
        // Already advanced: the usual case.
        assert_eq!(
            start_point(None, Some(&int(9)), Some(&last)),
            StartPoint::Control(int(9))
        );
        // The control row still holds what the last run saw, and that run found nothing new.
        let idle = run(Some(9), Some(9), Some(9));
        assert_eq!(
            start_point(None, Some(&int(9)), Some(&idle)),
            StartPoint::Control(int(9))
        );
    }

    #[test]
    fn without_a_control_table_the_target_remembers() {
        let last = run(None, Some(1), Some(9));
        assert_eq!(
            start_point(None, None, Some(&last)),
            StartPoint::LastRun(int(9))
        );
        let empty = run(None, None, None);
        assert_eq!(start_point(None, None, Some(&empty)), StartPoint::Beginning);
    }
}
