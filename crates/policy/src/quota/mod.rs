//! Project quotas, decided with the claims.
//!
//! A claim is charged to a project: a Server's Allocation to the Server's namespace, an
//! Allocation written through the Placement API (or by hand with the annotation) to its
//! consumer's project. Consumers of type `MIGRATION` (the source side of a move) and those
//! without a project are not charged, so a move never counts twice.
//!
//! A project is governed by the ProjectQuota whose namespace or `spec.projectId` names it,
//! its limits falling back to the DefaultProjectQuota's name by name; a project without a
//! ProjectQuota by the DefaultProjectQuota alone. The claims ledger, admission and `settle`
//! judge every claim against capacity and quota in the same step ([`check_claim`],
//! [`check_write`]), so there is no window between a check and the claim.

mod decide;
mod governing;

pub use crate::store::charges::{Charge, Charges, Pending, charge_of};
pub use decide::{QuotaRefusal, check_claim, check_write, headroom_within, used_by};
pub use governing::{Governing, governing, project_quota, quota_projects};
