//! Flavor status: the placement request derived from it.

use crate::api::{Condition, Flavor, FlavorStatus, PlacementRequestStatus, RequestGroupStatus};
use crate::extra_specs::{Validators, check_extra_specs};
use crate::placement::request::{FlavorShape, Request};

use super::{World, capped};

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

/// The Valid condition: the extra specs checked again against the definitions now in the
/// store, since adding or deleting an ExtraSpecDefinition can change the verdict.
fn valid_condition(f: &Flavor, world: &World) -> Condition {
    let mode = match crate::admission::validation_mode(f) {
        Ok(m) => m,
        Err(e) => return Condition::new("Valid", false, "InvalidValidationMode", e),
    };
    let report = check_extra_specs(
        f.spec
            .extra_specs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
        mode,
        &Validators::with_custom(&world.custom_definitions),
    );
    if report.problems.is_empty() {
        Condition::new(
            "Valid",
            true,
            "ExtraSpecsValid",
            capped(report.warnings).join("; "),
        )
    } else {
        let problems: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
        Condition::new(
            "Valid",
            false,
            "ExtraSpecsInvalid",
            capped(problems).join("; "),
        )
    }
}

pub(super) fn status(f: &Flavor, world: &World, generation: Option<i64>) -> FlavorStatus {
    FlavorStatus {
        request: Some(request_status(&flavor_request(f))),
        candidate_count: None,
        candidates: Vec::new(),
        conditions: vec![valid_condition(f, world)],
        observed_generation: generation,
    }
}
