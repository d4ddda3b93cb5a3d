//! The one policy for work that lost a race for a Delta commit (a copy, a control-row update,
//! UPDATE, DELETE, MERGE, a history append): run it again on fresh state, a bounded number of
//! times, after a short pause that grows and carries jitter, so that racing processes spread
//! out instead of colliding again.

use std::time::Duration;

use crate::error::{Error, Result};

/// How many times work that lost a race is run again: a small write (a control row, a
/// history row) often; a copy or a DML statement, which redoes all its work, fewer times.
pub(crate) const SMALL_WRITE: u32 = 30;
pub(crate) const WHOLE_STATEMENT: u32 = 10;

/// The retries of one piece of work.
pub(crate) struct Retry {
    tries: u32,
    limit: u32,
}

impl Retry {
    /// At most `limit` retries.
    pub(crate) fn up_to(limit: u32) -> Self {
        Retry { tries: 0, limit }
    }

    /// After a failed attempt: Ok (after a pause) when it is to run again, else the error to
    /// give up with.
    pub(crate) async fn again(&mut self, e: Error) -> Result<()> {
        if !e.is_conflict() {
            return Err(e);
        }
        if self.tries >= self.limit {
            // Final: not a conflict any more, so that work around this one (a copy around
            // its control-row update) does not run it all again.
            return Err(Error::Other(format!(
                "{e} (gave up after {} retries)",
                self.limit
            )));
        }
        self.tries += 1;
        tokio::time::sleep(pause(self.tries)).await;
        // On fresh state: the logs of tables on a store are listed again, not answered from
        // this statement's listings.
        crate::catalog::forget_listings();
        Ok(())
    }
}

/// Run `attempt` until it succeeds, fails with anything but a conflict, or has lost `limit`
/// races more.
pub(crate) async fn on_conflict<T, F, Fut>(limit: u32, mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut retry = Retry::up_to(limit);
    loop {
        match attempt().await {
            Err(e) => retry.again(e).await?,
            done => return done,
        }
    }
}

/// The pause before retry `tries`: 10 ms more per retry up to 100 ms, plus up to 50 ms of
/// jitter.
fn pause(tries: u32) -> Duration {
    let jitter = (uuid::Uuid::new_v4().as_u128() % 50) as u64;
    Duration::from_millis(10 * u64::from(tries.min(10)) + jitter)
}
