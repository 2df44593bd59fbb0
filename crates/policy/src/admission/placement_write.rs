//! PlacementWrite admission: a record whose changes can be read. Whether the write fits
//! (capacity, the versions it was decided on) is decided with the claims, where
//! every claim is (the claims ledger).

use super::Review;
use crate::store::writes::planned;
use kubeplace_api::PlacementWrite;

pub(super) fn review(write: &PlacementWrite, review: &mut Review) {
    if let Err(problem) = planned(write) {
        review.problem(problem);
    }
}
