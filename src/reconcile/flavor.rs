//! Flavor status: the placement request derived from it.

use crate::api::{Condition, Flavor, FlavorStatus, PlacementRequestStatus, RequestGroupStatus};
use crate::placement::request::{FlavorShape, Request};

/// The core request of a flavor.
pub fn flavor_request(f: &Flavor) -> Request {
    Request::from_flavor(&FlavorShape {
        vcpus: f.spec.vcpus,
        memory_mb: f.spec.memory_mb,
        disk_gb: f.spec.disk_gb,
        ephemeral_gb: f.spec.ephemeral_gb,
        swap_mb: f.spec.swap_mb,
        extra_specs: f.spec.extra_specs.clone(),
    })
}

/// A request as it is shown in status.
pub fn request_status(r: &Request) -> PlacementRequestStatus {
    PlacementRequestStatus {
        query: r.to_query(),
        groups: r
            .groups
            .iter()
            .map(|(suffix, g)| RequestGroupStatus {
                suffix: suffix.clone(),
                resources: g.resources.clone(),
                required: g.required.iter().cloned().collect(),
                forbidden: g.forbidden.iter().cloned().collect(),
            })
            .collect(),
        group_policy: r.group_policy.clone(),
    }
}

pub(super) fn status(f: &Flavor, generation: Option<i64>) -> FlavorStatus {
    FlavorStatus {
        request: Some(request_status(&flavor_request(f))),
        candidate_count: None,
        candidates: Vec::new(),
        conditions: vec![Condition::new("Valid", true, "Admitted", "")],
        observed_generation: generation,
    }
}
