//! Flavor admission: sizes, the validation mode, and the extra specs under it.

use super::Review;
use crate::store::Store;
use crate::translate::{check_flavor_extra_specs, validation_mode};
use kubeplace_api::Flavor;
use kubeplace_api::Kind;

pub(super) fn review(f: &Flavor, store: &Store, review: &mut Review) {
    for (field, value, min) in [
        ("vcpus", f.spec.vcpus, 1),
        ("memoryMb", f.spec.memory_mb, 1),
        ("diskGb", f.spec.disk_gb, 0),
        ("ephemeralGb", f.spec.ephemeral_gb, 0),
        ("swapMb", f.spec.swap_mb, 0),
    ] {
        if value < min || value > i32::MAX as i64 {
            review.problem(format!(
                "spec.{field} is {value}; it must be between {min} and 2147483647"
            ));
        }
    }
    let mode = match validation_mode(f) {
        Ok(mode) => mode,
        Err(e) => {
            review.problem(e);
            return;
        }
    };
    let (custom, _) = store.custom_definitions();
    let report = check_flavor_extra_specs(f, mode, &custom);
    for p in report.problems {
        review.problem(format!("spec.{p}"));
    }
    for w in report.warnings {
        review.warn(format!("spec.{w}"));
    }
    for sp in &f.spec.service_profiles {
        if store.get_cluster(Kind::ServiceProfile, sp).is_none() {
            review.warn(format!(
                "spec.serviceProfiles: ServiceProfile {sp:?} does not exist yet"
            ));
        }
    }
}
