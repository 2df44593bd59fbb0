//! Validation under each mode, with in-tree and custom definitions.

use super::registry::{boolean, enumeration, int_range};
use super::*;

fn strict(specs: &[(&str, &str)]) -> SpecReport {
    check_extra_specs(
        specs.iter().copied(),
        ValidationMode::Strict,
        &Validators::in_tree_only(),
    )
}

fn one(key: &str, value: &str) -> Status {
    check_spec(
        key,
        value,
        &Validators::in_tree_only(),
        ValidationMode::Strict,
    )
    .status
}

#[test]
fn every_namespace_valid_and_invalid() {
    let cases: &[(&str, &str, Status)] = &[
        ("hw:cpu_policy", "dedicated", Status::Valid),
        ("hw:cpu_policy", "Dedicated", Status::InvalidValue),
        ("hw:cpu_realtime", "YES", Status::Valid),
        ("hw:cpu_realtime", "yess", Status::InvalidValue),
        ("hw:cpu_realtime_mask", "^0-1", Status::Valid),
        ("hw:cpu_realtime_mask", "0-1,", Status::InvalidValue),
        ("hw:numa_nodes", "2", Status::Valid),
        ("hw:numa_nodes", "0", Status::InvalidValue),
        ("hw:numa_cpus.1", "2-3,^2", Status::Valid),
        ("hw:numa_cpus.1", "a", Status::InvalidValue),
        ("hw:numa_mem.0", "1024", Status::Valid),
        ("hw:numa_mem.0", "0", Status::InvalidValue),
        ("hw:mem_page_size", "2MB", Status::Valid),
        ("hw:mem_page_size", "1GiB", Status::Valid),
        ("hw:mem_page_size", "huge", Status::InvalidValue),
        ("hw:pmem", "GOLD,SMALL", Status::Valid),
        ("hw:pmem", "a b", Status::InvalidValue),
        ("hw:redirected_usb_ports", "15", Status::Valid),
        ("hw:redirected_usb_ports", "16", Status::InvalidValue),
        ("hw:serial_port_count", "0", Status::Valid),
        ("hw:serial_port_count", "-1", Status::InvalidValue),
        ("hw:tpm_version", "2.0", Status::Valid),
        ("hw:tpm_version", "2", Status::InvalidValue),
        ("hw_rng:allowed", "False", Status::Valid),
        ("hw_rng:rate_bytes", "-5", Status::InvalidValue),
        ("hw_video:ram_max_mb", "64", Status::Valid),
        ("hw_video:ram_max_mb", "64MB", Status::InvalidValue),
        ("os:secure_boot", "required", Status::Valid),
        ("os:secure_boot", "optional", Status::InvalidValue),
        ("pci_passthrough:alias", "a1:2, b2:1", Status::Valid),
        ("pci_passthrough:alias", "a1", Status::InvalidValue),
        ("accel:device_profile", "", Status::Valid),
        ("quota:cpu_quota", "-1", Status::Valid),
        ("quota:cpu_shares", "-1", Status::InvalidValue),
        ("quota:vif_shares_level", "custom", Status::Valid),
        ("quota:vif_shares_level", "Custom", Status::InvalidValue),
        ("vmware:hw_version", "vmx-13", Status::Valid),
        ("capabilities:hypervisor_type", "s== QEMU", Status::Valid),
        ("capabilities:cpu_info:features", "<in> avx2", Status::Valid),
        ("aggregate_instance_extra_specs:ssd", "true", Status::Valid),
        ("resources:VCPU", "0", Status::Valid),
        ("resources1:CUSTOM_LLC", "4", Status::Valid),
        ("resources:VCPU", "-1", Status::InvalidValue),
        ("resources:VCPU", "one", Status::InvalidValue),
        ("trait:HW_CPU_X86_AVX2", "forbidden", Status::Valid),
        ("trait:HW_CPU_X86_AVX2", "preferred", Status::InvalidValue),
        ("group_policy", "isolate", Status::Valid),
        ("group_policy", "spread", Status::InvalidValue),
        ("hide_hypervisor_id", "true", Status::Deprecated),
        ("hide_hypervisor_id", "maybe", Status::InvalidValue),
        ("hw:cpu_pollllicy", "dedicated", Status::UnknownKey),
        ("hw:numa_cpusX0", "0", Status::UnknownKey),
        ("acme:cache_ways", "4", Status::UnknownKey),
        ("no_namespace", "x", Status::UnknownKey),
        ("hw/cpu", "x", Status::BadSyntax),
    ];
    for (k, v, status) in cases {
        assert_eq!(one(k, v), *status, "{k}={v:?}");
    }
}

#[test]
fn a_rejection_lists_every_bad_spec_with_reasons_and_suggestions() {
    let report = strict(&[
        ("hw:cpu_pollllicy", "dedicated"),
        ("hw:cpu_policy", "deddddicated"),
        ("hw:numa_nodes", "0"),
        ("hw:mem_page_size", "large"),
    ]);
    assert_eq!(report.problems.len(), 3);
    let text: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        text[0],
        "extraSpecs[\"hw:cpu_pollllicy\"]=\"dedicated\": no in-tree or custom definition matches this key; use an in-tree key (kubeplace extra-specs docs lists them) or define this one with an ExtraSpecDefinition (did you mean \"hw:cpu_policy\"?)"
    );
    assert_eq!(
        text[1],
        "extraSpecs[\"hw:cpu_policy\"]=\"deddddicated\": \"deddddicated\" is not an accepted value; accepted values (exact, case-sensitive): dedicated, shared, mixed (did you mean \"dedicated\"?)"
    );
    assert_eq!(
        text[2],
        "extraSpecs[\"hw:numa_nodes\"]=\"0\": 0 is below the minimum of 1; expected a whole number of at least 1"
    );
}

#[test]
fn modes() {
    let specs = [
        ("hw:cpu_policy", "dedicated"),
        ("acme:x", "1"),
        ("hw:numa_nodes", "x"),
    ];
    let v = Validators::in_tree_only();
    let strict = check_extra_specs(specs.iter().copied(), ValidationMode::Strict, &v);
    assert_eq!(strict.problems.len(), 2);
    assert!(strict.warnings.is_empty());
    let permissive = check_extra_specs(specs.iter().copied(), ValidationMode::Permissive, &v);
    assert_eq!(
        permissive.problems.len(),
        1,
        "a bad value of a known key still rejects"
    );
    assert_eq!(permissive.problems[0].key, "hw:numa_nodes");
    assert_eq!(permissive.warnings.len(), 1);
    assert!(permissive.warnings[0].contains("acme:x"));
    assert!(permissive.warnings[0].ends_with("admitted because the validation mode is permissive"));
    let off = check_extra_specs(specs.iter().copied(), ValidationMode::Off, &v);
    assert_eq!(off, SpecReport::default());
    let off_syntax = check_extra_specs([("hw/cpu", "x")], ValidationMode::Off, &v);
    assert_eq!(
        off_syntax.problems.len(),
        1,
        "Nova's API schema holds in every mode"
    );
}

#[test]
fn deprecated_keys_warn_in_strict_and_permissive() {
    for mode in [ValidationMode::Strict, ValidationMode::Permissive] {
        let r = check_extra_specs(
            [("hide_hypervisor_id", "true")],
            mode,
            &Validators::in_tree_only(),
        );
        assert!(r.problems.is_empty());
        assert_eq!(
            r.warnings,
            vec!["extraSpecs[\"hide_hypervisor_id\"] is deprecated; use hw:hide_hypervisor_id instead".to_string()]
        );
    }
    let off = check_extra_specs(
        [("hide_hypervisor_id", "true")],
        ValidationMode::Off,
        &Validators::in_tree_only(),
    );
    assert!(off.warnings.is_empty(), "off logs nothing");
}

#[test]
fn custom_definitions_have_lower_precedence() {
    let (custom, rejected) = Registry::custom([
        (
            "acme-ways".to_string(),
            DefinitionSpec::new("acme:cache_ways", "d", int_range(1, 11)),
        ),
        (
            "acme-cache".to_string(),
            DefinitionSpec::new(
                "acme:numa_cache.{node}",
                "d",
                enumeration(&["shared", "dedicated"]),
            )
            .param("node", "[0-9]+", ""),
        ),
        // Shadowed: the in-tree boolean wins over this enum.
        (
            "shadow".to_string(),
            DefinitionSpec::new("hw:cpu_realtime", "d", enumeration(&["always"])),
        ),
        (
            "old".to_string(),
            DefinitionSpec::new("acme:old", "d", boolean()).deprecated(Some("acme:new")),
        ),
        (
            "widget".to_string(),
            DefinitionSpec::new("hw:acme_widget", "d", boolean()),
        ),
    ]);
    assert!(rejected.is_empty());
    let v = Validators::with_custom(&custom);
    let status = |k: &str, val: &str| check_spec(k, val, &v, ValidationMode::Strict);
    assert_eq!(status("acme:cache_ways", "4").status, Status::Valid);
    assert_eq!(
        status("acme:cache_ways", "4").origin.as_deref(),
        Some("acme-ways")
    );
    assert_eq!(status("acme:cache_ways", "12").status, Status::InvalidValue);
    assert_eq!(status("acme:numa_cache.1", "shared").status, Status::Valid);
    assert_eq!(
        status("acme:numa_cache.1", "private").status,
        Status::InvalidValue
    );
    assert_eq!(status("hw:cpu_realtime", "true").status, Status::Valid);
    assert_eq!(
        status("hw:cpu_realtime", "true").origin.as_deref(),
        Some("in-tree")
    );
    assert_eq!(
        status("hw:cpu_realtime", "always").status,
        Status::InvalidValue
    );
    assert_eq!(status("acme:old", "yes").status, Status::Deprecated);
    assert_eq!(
        status("acme:cache_wayz", "4")
            .problem
            .unwrap()
            .suggestion
            .as_deref(),
        Some("acme:cache_ways")
    );
    // A near miss of a custom key beats a farther in-tree one.
    assert_eq!(
        status("hw:acme_widgets", "1")
            .problem
            .unwrap()
            .suggestion
            .as_deref(),
        Some("hw:acme_widget")
    );
    // Without the custom definitions the same keys are unknown.
    let bare = check_spec(
        "acme:cache_ways",
        "4",
        &Validators::in_tree_only(),
        ValidationMode::Strict,
    );
    assert_eq!(bare.status, Status::UnknownKey);
}

#[test]
fn unknown_placement_keys_explain_themselves() {
    let o = check_spec(
        "resources.1:VCPU",
        "1",
        &Validators::in_tree_only(),
        ValidationMode::Strict,
    );
    assert!(o.problem.unwrap().why.contains("group suffix \".1\""));
    let o = check_spec(
        "resources:VCPUS",
        "1",
        &Validators::in_tree_only(),
        ValidationMode::Strict,
    );
    let p = o.problem.unwrap();
    assert!(p.why.contains("neither a standard resource class"), "{p}");
    assert_eq!(p.suggestion.as_deref(), Some("resources:VCPU"));
    let o = check_spec(
        "trait:HW_CPU_X86_AVX3",
        "required",
        &Validators::in_tree_only(),
        ValidationMode::Strict,
    );
    assert_eq!(
        o.problem.unwrap().suggestion.as_deref(),
        Some("trait:HW_CPU_X86_AVX")
    );
}

#[test]
fn namespace_knowledge_for_nova_parity() {
    let v = Validators::in_tree_only();
    assert!(check_spec("hw:nope", "1", &v, ValidationMode::Strict).in_tree_namespace);
    assert!(!check_spec("acme:nope", "1", &v, ValidationMode::Strict).in_tree_namespace);
}

#[test]
fn only_the_first_unknown_keys_of_a_flavor_get_a_suggestion() {
    // Each suggestion compares the key with every trait; thousands of near-miss keys in one
    // flavor must not cost thousands of such searches.
    let keys: Vec<String> = (0..MAX_SUGGESTIONS + 4)
        .map(|i| format!("trait:HW_CPU_X86_AVX2X{i}"))
        .collect();
    let specs: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), "required")).collect();
    let report = strict(&specs);
    assert_eq!(report.problems.len(), specs.len());
    let suggested = report
        .problems
        .iter()
        .filter(|p| p.suggestion.is_some())
        .count();
    assert_eq!(suggested, MAX_SUGGESTIONS);
    assert!(report.problems[0].suggestion.is_some());
    assert!(report.problems.last().unwrap().suggestion.is_none());
}
