//! Claims: where it is decided whether an Allocation counts against its providers.
//!
//! Two steps keep every provider within capacity, whoever writes the claim:
//! - [`Ledger`] is the decision point at admission. Claims are decided one at a time, each
//!   against the store plus the claims decided before it that the store does not show yet
//!   (admitted a moment ago, still on their way through the API server and the watch).
//! - [`settle`] is the safety net for claims that bypassed that point (the webhook was down
//!   or not called, an object was restored from a backup): claims without a verdict for
//!   their current generation are decided in creation order against those already counted;
//!   a claim that does not fit is refused (`Applied=False`, reason `OverCapacity`) and does
//!   not count. A verdict, once in the status, holds: an inventory that shrinks below what is
//!   allocated leaves the counted claims counted (Placement allows that), and no new claim
//!   fits until usage falls.

mod in_flight;
mod ledger;
mod settle;
mod writes;

pub use in_flight::{
    InFlight, RecordedCharge, RecordedClaim, RecordedWrite, SeenThrough, UnreadableRecord,
};
pub use ledger::{Ledger, MAX_HOLDS, PendingClaim};
pub use settle::{any_undecided, record_admitted, settle};

#[cfg(test)]
mod quota_tests;
