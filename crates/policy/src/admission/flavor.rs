//! Flavor admission: sizes, the validation mode, the extra specs under it, and NUMA specs
//! no image could make bootable.

use std::collections::BTreeMap;

use super::Review;
use crate::store::Store;
use crate::translate::{check_flavor_extra_specs, validation_mode};
use kubeplace_api::Flavor;
use kubeplace_api::Kind;
use kubeplace_core::numa::guest_topology;

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
    let specs_valid = report.problems.is_empty();
    for p in report.problems {
        review.problem(format!("spec.{p}"));
    }
    // What Nova's API admits and its boot then refuses whatever the image: refused now.
    let no_image = BTreeMap::new();
    if specs_valid
        && let Err(e) = guest_topology(crate::translate::guest_source(f, &no_image))
        && e.no_image_helps()
    {
        let key = e.flavor_key().unwrap_or("hw:numa_nodes");
        let value = f
            .spec
            .extra_specs
            .get(key)
            .map_or(String::new(), |v| format!("={v:?}"));
        review.problem(format!(
            "spec.extraSpecs[{key:?}]{value} makes no guest Nova would boot, whatever the image: {e} (Nova: {})",
            e.nova_name()
        ));
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
