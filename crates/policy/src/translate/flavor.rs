//! Flavors: the core placement request a flavor asks for, and how strictly its extra
//! specs are checked.

use kubeplace_api::{EXTRA_SPEC_VALIDATION_ANNOTATION, Flavor};
use kubeplace_core::extra_specs::registry::Registry;
use kubeplace_core::extra_specs::{SpecReport, ValidationMode, Validators, check_extra_specs};
use kubeplace_core::placement::request::{FlavorShape, Request};

/// The core request of a flavor.
pub(crate) fn flavor_request(f: &Flavor) -> Request {
    Request::from_flavor(&FlavorShape {
        vcpus: f.spec.vcpus,
        memory_mb: f.spec.memory_mb,
        disk_gb: f.spec.disk_gb,
        ephemeral_gb: f.spec.ephemeral_gb,
        swap_mb: f.spec.swap_mb,
        extra_specs: f.spec.extra_specs.clone(),
    })
}

/// The flavor's validation mode, or the error for an unknown one.
pub(crate) fn validation_mode(f: &Flavor) -> Result<ValidationMode, String> {
    match f
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXTRA_SPEC_VALIDATION_ANNOTATION))
    {
        None => Ok(ValidationMode::default()),
        Some(v) => v
            .parse()
            .map_err(|e| format!("annotation {EXTRA_SPEC_VALIDATION_ANNOTATION}: {e}")),
    }
}

/// The flavor's extra specs checked in `mode` against Nova's definitions and the custom ones.
pub(crate) fn check_flavor_extra_specs(
    f: &Flavor,
    mode: ValidationMode,
    custom: &Registry,
) -> SpecReport {
    check_extra_specs(
        f.spec
            .extra_specs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
        mode,
        &Validators::with_custom(custom),
    )
}
