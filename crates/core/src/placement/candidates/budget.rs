//! The search's budget of work: [`SEARCH_BUDGET`] steps, the error a search that spends
//! them all answers ([`BudgetExhausted`]), the steps left as a walk spends them, and the
//! [`Stop`] a caller ends a search with before its budget does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Steps of work one search may take: trees visited, combinations of group parts tried,
/// parts of the unnumbered group built, options looked at when checking that a partial
/// combination can still be completed, and, per candidate kept, one per allocation and
/// mapped provider. Counting steps rather than time keeps answers deterministic. A search
/// that uses it all takes well under a second and a few hundred MiB; building all 720,000
/// candidates of a plain query over 100,000 compute nodes takes about 5 million.
pub const SEARCH_BUDGET: u64 = 10_000_000;

/// Memory the candidates one search keeps may hold. A plain query's candidate holds about
/// 200 bytes, so the 720,000 candidates of a plain query over 100,000 compute nodes fit; a
/// query of fifty groups holds about 5 KiB a candidate, so about 35,000 of them do.
pub const MAX_KEPT_BYTES: usize = 192 << 20;

/// A search used its whole budget of work, or of memory, before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the allocation candidate search stopped at its budget of {budget} steps (and {} MiB of \
     candidates) after finding {found} candidates; ask with a limit, or with fewer or \
     narrower request groups",
    MAX_KEPT_BYTES >> 20
)]
pub struct BudgetExhausted {
    /// The budget, in steps (see [`SEARCH_BUDGET`]).
    pub budget: u64,
    /// Candidates found before it ran out.
    pub found: usize,
}

/// Ends a search from outside it, as a server does when the request it answers is
/// cancelled or runs past its deadline. A stopped search ends as one whose budget ran out,
/// within [`STOP_CHECK_EVERY`] steps; the caller knows from [`Stop::is_stopped`] which it was.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// A stop not yet asked for.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Asks every search holding this stop (or a clone of it) to end.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`Stop::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Steps between two looks at a search's [`Stop`]: a few microseconds of work, so a
/// stopped search ends at once while the look costs nothing beside the steps.
pub const STOP_CHECK_EVERY: u64 = 4096;

/// What is left of a search's budget.
#[derive(Default)]
pub(super) struct Steps {
    pub(super) left: u64,
    /// Set when the search stopped for want of steps (or was stopped).
    pub(super) ran_out: bool,
    pub(super) stop: Option<Stop>,
    /// Steps to spend before the next look at `stop`.
    pub(super) until_look: u64,
}

impl Steps {
    /// `budget` steps to spend, ending early when `stop` is asked for.
    pub(super) fn new(budget: u64, stop: Option<Stop>) -> Steps {
        Steps {
            left: budget,
            ran_out: false,
            stop,
            until_look: STOP_CHECK_EVERY,
        }
    }

    /// Takes `n` steps; false (and noted) when the budget has run out or the search has
    /// been stopped.
    pub(super) fn spend(&mut self, n: u64) -> bool {
        if self.left < n {
            self.left = 0;
            self.ran_out = true;
            return false;
        }
        self.left -= n;
        if let Some(stop) = &self.stop {
            if self.until_look > n {
                self.until_look -= n;
            } else {
                self.until_look = STOP_CHECK_EVERY;
                if stop.is_stopped() {
                    self.left = 0;
                    self.ran_out = true;
                    return false;
                }
            }
        }
        true
    }
}
