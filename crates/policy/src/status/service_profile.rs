//! ServiceProfile status.

use kubeplace_api::{Condition, ServiceProfile, ServiceProfileStatus};

pub(super) fn status(_sp: &ServiceProfile, generation: Option<i64>) -> ServiceProfileStatus {
    ServiceProfileStatus {
        conditions: vec![Condition::new("Valid", true, "Admitted", "")],
        observed_generation: generation,
    }
}
