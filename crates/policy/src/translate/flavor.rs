//! Flavors: the core placement request a flavor asks for, and how strictly its extra
//! specs are checked.

use std::collections::BTreeMap;

use kubeplace_api::{EXTRA_SPEC_VALIDATION_ANNOTATION, Flavor};
use kubeplace_core::extra_specs::registry::Registry;
use kubeplace_core::extra_specs::{SpecReport, ValidationMode, Validators, check_extra_specs};
use kubeplace_core::numa::{GuestSource, guest_topology};
use kubeplace_core::placement::request::{FlavorShape, Request};

/// The core request of a flavor (booted from an image that says nothing of CPUs).
pub(crate) fn flavor_request(f: &Flavor) -> Request {
    flavor_request_with_image(f, &BTreeMap::new())
}

/// The core request of a flavor booted from an image with these properties: the CPU
/// pinning policies translated as Nova's scheduler does (`_translate_pinning_policies`).
pub(crate) fn flavor_request_with_image(f: &Flavor, image: &BTreeMap<String, String>) -> Request {
    let mut request = Request::from_flavor(&FlavorShape {
        vcpus: f.spec.vcpus,
        memory_mb: f.spec.memory_mb,
        disk_gb: f.spec.disk_gb,
        ephemeral_gb: f.spec.ephemeral_gb,
        swap_mb: f.spec.swap_mb,
        extra_specs: f.spec.extra_specs.clone(),
    });
    translate_pinning(&mut request, f, image);
    request
}

/// Nova's translation of CPU policies to Placement's classes, beyond the flavor's own
/// `hw:cpu_policy=dedicated` (which `Request::from_flavor` turns into PCPU): a dedicated
/// policy the image asks for, `mixed` (its pinned vCPUs as PCPU, the rest as VCPU), one more
/// PCPU for `hw:emulator_threads_policy=isolate`, and the thread policy as the trait
/// `HW_CPU_HYPERTHREADING` (forbidden for `isolate`, required for `require`); all in the
/// unnumbered group, as Nova adds them.
fn translate_pinning(request: &mut Request, f: &Flavor, image: &BTreeMap<String, String>) {
    let specs = &f.spec.extra_specs;
    let said = |flavor_key: &str, image_key: &str| {
        specs
            .get(flavor_key)
            .or_else(|| image.get(image_key))
            .map(String::as_str)
    };
    let unnumbered = request.groups.entry(String::new()).or_default();
    match said("hw:cpu_thread_policy", "hw_cpu_thread_policy") {
        Some("isolate") => {
            unnumbered.required.remove(HYPERTHREADING);
            unnumbered.forbidden.insert(HYPERTHREADING.to_string());
        }
        Some("require") => {
            unnumbered.forbidden.remove(HYPERTHREADING);
            unnumbered.required.insert(HYPERTHREADING.to_string());
        }
        _ => {}
    }
    let pcpus = match said("hw:cpu_policy", "hw_cpu_policy") {
        Some("dedicated") => f.spec.vcpus,
        Some("mixed") => {
            match guest_topology(guest_source(f, image)) {
                Ok(Some(guest)) => guest.cells.iter().map(|c| c.pcpuset.len() as i64).sum(),
                // Admission refuses such a pair; the request stays as the flavor's.
                _ => return,
            }
        }
        _ => return,
    };
    let emulator =
        i64::from(specs.get("hw:emulator_threads_policy").map(String::as_str) == Some("isolate"));
    let vcpus = f.spec.vcpus - pcpus;
    if !specs.contains_key("resources:VCPU") {
        // The flavor's size, asked as VCPU before the policy was known, is pinned now.
        unnumbered.resources.remove("VCPU");
    }
    if vcpus > 0 && pcpus > 0 && pcpus < f.spec.vcpus {
        unnumbered.resources.insert("VCPU".to_string(), vcpus);
    }
    if pcpus + emulator > 0 {
        unnumbered
            .resources
            .insert("PCPU".to_string(), pcpus + emulator);
    }
}

const HYPERTHREADING: &str = "HW_CPU_HYPERTHREADING";

/// What a server's guest is built from, as Nova's `numa_get_constraints` reads it: its
/// flavor's size and extra specs and its image's properties (none for a flavor alone).
pub(crate) fn guest_source<'a>(
    flavor: &'a Flavor,
    image: &'a BTreeMap<String, String>,
) -> GuestSource<'a> {
    GuestSource {
        vcpus: u32::try_from(flavor.spec.vcpus).unwrap_or(0),
        memory_mib: u64::try_from(flavor.spec.memory_mb).unwrap_or(0),
        extra_specs: &flavor.spec.extra_specs,
        image,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::object;
    use kubeplace_api::Object;

    fn flavor(vcpus: i64, specs: &str) -> Flavor {
        let yaml = format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: f\nspec:\n  vcpus: {vcpus}\n  memoryMb: 1024\n  extraSpecs: {{{specs}}}\n"
        );
        match object(&yaml) {
            Object::Flavor(f) => f,
            other => panic!("{other:?}"),
        }
    }

    fn query(f: &Flavor, image: &[(&str, &str)]) -> String {
        let image: BTreeMap<String, String> = image
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        flavor_request_with_image(f, &image).to_query()
    }

    // Each expectation follows Nova 34's translation of the same flavor and image
    // (`ResourceRequest._translate_pinning_policies`).
    #[test]
    fn pinning_policies_become_placement_classes_as_nova_translates_them() {
        let isolated_emulator = flavor(
            4,
            "hw:cpu_policy: dedicated, hw:emulator_threads_policy: isolate",
        );
        assert_eq!(
            query(&isolated_emulator, &[]),
            "resources=MEMORY_MB:1024,PCPU:5"
        );
        let mixed = flavor(4, "hw:cpu_policy: mixed, hw:cpu_dedicated_mask: \"^0\"");
        assert_eq!(query(&mixed, &[]), "resources=MEMORY_MB:1024,PCPU:3,VCPU:1");
        let plain = flavor(2, "");
        assert_eq!(
            query(
                &plain,
                &[
                    ("hw_cpu_policy", "dedicated"),
                    ("hw_cpu_thread_policy", "require")
                ]
            ),
            "resources=MEMORY_MB:1024,PCPU:2&required=HW_CPU_HYPERTHREADING"
        );
        assert_eq!(query(&plain, &[]), "resources=MEMORY_MB:1024,VCPU:2");
        // A flavor that names its CPU classes keeps them.
        let named = flavor(2, "\"resources:PCPU\": \"1\", \"resources:VCPU\": \"1\"");
        assert_eq!(query(&named, &[]), "resources=MEMORY_MB:1024,PCPU:1,VCPU:1");
        // A class another group names is not asked of the unnumbered group as well.
        let memory_apart = flavor(2, "\"resources1:MEMORY_MB\": \"512\"");
        assert_eq!(
            query(&memory_apart, &[]),
            "resources=VCPU:2&resources1=MEMORY_MB:512"
        );
        let cpu_apart = flavor(2, "\"resources1:VCPU\": \"1\"");
        assert_eq!(
            query(&cpu_apart, &[]),
            "resources=MEMORY_MB:1024&resources1=VCPU:1"
        );
    }
}
