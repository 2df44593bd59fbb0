//! The search's budget of work: [`SEARCH_BUDGET`] steps, the error a search that spends
//! them all answers ([`BudgetExhausted`]), and the steps left as a walk spends them.

/// Steps of work one search may take: trees visited, combinations of group parts tried,
/// parts of the unnumbered group built, options looked at when checking that a partial
/// combination can still be completed, and, per candidate kept, one per allocation and
/// mapped provider. Counting steps rather than time keeps answers deterministic. A search
/// that uses it all takes well under a second and a few hundred MiB; building all 720,000
/// candidates of a plain query over 100,000 compute nodes takes about 5 million.
pub const SEARCH_BUDGET: u64 = 10_000_000;

/// A search used its whole budget of work before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the allocation candidate search stopped at its budget of {budget} steps after finding \
     {found} candidates; ask with a limit, or with fewer or narrower request groups"
)]
pub struct BudgetExhausted {
    /// The budget, in steps (see [`SEARCH_BUDGET`]).
    pub budget: u64,
    /// Candidates found before it ran out.
    pub found: usize,
}

/// What is left of a search's budget.
#[derive(Default)]
pub(super) struct Steps {
    pub(super) left: u64,
    /// Set when the search stopped for want of steps.
    pub(super) ran_out: bool,
}

impl Steps {
    /// Takes `n` steps; false (and noted) when the budget has run out.
    pub(super) fn spend(&mut self, n: u64) -> bool {
        if self.left < n {
            self.left = 0;
            self.ran_out = true;
            return false;
        }
        self.left -= n;
        true
    }
}
