use super::*;

fn find(key: &str) -> Option<&'static str> {
    Registry::in_tree().find(key).map(|d| d.key.as_str())
}

#[test]
fn in_tree_registry_has_nova_34s_525_definitions() {
    let r = Registry::in_tree();
    assert_eq!(r.len(), 525);
    let count = |ns: &str| r.definitions().iter().filter(|d| d.namespace == ns).count();
    assert_eq!(count("hw"), 37);
    assert_eq!(count("hw_rng"), 3);
    assert_eq!(count("hw_video"), 1);
    assert_eq!(count("quota"), 31);
    assert_eq!(count("capabilities"), 45);
    assert_eq!(count("vmware"), 2);
    assert_eq!(count("os"), 1);
    assert_eq!(count("accel"), 1);
    assert_eq!(count("pci_passthrough"), 1);
    assert_eq!(count("aggregate_instance_extra_specs"), 1);
    assert_eq!(count("resources"), 22);
    assert_eq!(count("trait"), 378);
    assert_eq!(count(""), 2);
    let mut keys: Vec<&str> = r.definitions().iter().map(|d| d.key.as_str()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 525, "keys are unique");
}

#[test]
fn literal_patterned_and_family_lookups() {
    assert_eq!(find("hw:cpu_policy"), Some("hw:cpu_policy"));
    assert_eq!(find("hw:numa_cpus.0"), Some("hw:numa_cpus.{num}"));
    assert_eq!(find("hw:numa_mem.17"), Some("hw:numa_mem.{num}"));
    assert_eq!(
        find("hw:numa_cpusX0"),
        None,
        "the '.' is literal, unlike Nova's regex"
    );
    assert_eq!(find("hw:numa_cpus."), None);
    assert_eq!(
        find("capabilities:cpu_info"),
        Some("capabilities:cpu_info{filter}")
    );
    assert_eq!(
        find("capabilities:cpu_info:features"),
        Some("capabilities:cpu_info{filter}")
    );
    assert_eq!(find("capabilities:cpu_info:"), None);
    assert_eq!(
        find("capabilities:stats:a:b"),
        Some("capabilities:stats{filter}")
    );
    assert_eq!(
        find("capabilities:vcpus_used"),
        Some("capabilities:vcpus_used")
    );
    assert_eq!(
        find("aggregate_instance_extra_specs:ssd"),
        Some("aggregate_instance_extra_specs:{key}")
    );
    assert_eq!(
        find("aggregate_instance_extra_specs:a:b"),
        Some("aggregate_instance_extra_specs:{key}")
    );
    assert_eq!(find("aggregate_instance_extra_specs:"), None);
    assert_eq!(find("resources:VCPU"), Some("resources{group}:VCPU"));
    assert_eq!(
        find("resources1:SRIOV_NET_VF"),
        Some("resources{group}:SRIOV_NET_VF")
    );
    assert_eq!(
        find("resources_NIC-a:CUSTOM_X"),
        Some("resources{group}:CUSTOM_{resource}")
    );
    assert_eq!(find("resources:CUSTOM_"), None);
    assert_eq!(find("resources:VCPUS"), None);
    assert_eq!(
        find(&format!("resources{}:VCPU", "a".repeat(64))),
        Some("resources{group}:VCPU")
    );
    assert_eq!(find(&format!("resources{}:VCPU", "a".repeat(65))), None);
    assert_eq!(
        find("trait:HW_CPU_X86_AVX2"),
        Some("trait{group}:HW_CPU_X86_AVX2")
    );
    assert_eq!(
        find("traits:HW_CPU_X86_AVX2"),
        Some("trait{group}:HW_CPU_X86_AVX2"),
        "group \"s\""
    );
    assert_eq!(
        find("trait1:CUSTOM_GOLD"),
        Some("trait{group}:CUSTOM_{trait}")
    );
    assert_eq!(find("trait:custom_gold"), None);
    assert_eq!(find("group_policy"), Some("group_policy"));
    assert_eq!(find("hide_hypervisor_id"), Some("hide_hypervisor_id"));
    assert_eq!(find("hw:cpu_pollllicy"), None);
    assert_eq!(find("acme:cache_ways"), None);
}

#[test]
fn namespaces_as_nova_knows_them() {
    let r = Registry::in_tree();
    assert!(r.knows_namespace_of("hw:nope"));
    assert!(r.knows_namespace_of("trait5:NOPE"));
    assert!(r.knows_namespace_of("resources_x:NOPE"));
    assert!(!r.knows_namespace_of("acme:x"));
    assert!(!r.knows_namespace_of("no_namespace"));
    assert!(!r.knows_namespace_of("resources.1:VCPU"));
}

#[test]
fn suggestions() {
    let r = Registry::in_tree();
    assert_eq!(
        r.suggest("hw:cpu_pollllicy").as_deref(),
        Some("hw:cpu_policy")
    );
    assert_eq!(r.suggest("hw_cpu_policy").as_deref(), Some("hw:cpu_policy"));
    assert_eq!(
        r.suggest("trait:HW_CPU_X86_AVX3").as_deref(),
        Some("trait:HW_CPU_X86_AVX")
    );
    assert_eq!(
        r.suggest("resources1:VCPUS").as_deref(),
        Some("resources1:VCPU")
    );
    assert_eq!(r.suggest("completely:different"), None);
}

#[test]
fn custom_registries() {
    let (r, rejected) = Registry::custom([
        (
            "a".to_string(),
            DefinitionSpec::new("acme:cache_ways", "d", int_range(1, 11)),
        ),
        (
            "b".to_string(),
            DefinitionSpec::new(
                "acme:numa_cache.{node}",
                "d",
                enumeration(&["shared", "dedicated"]),
            )
            .param("node", "[0-9]+", ""),
        ),
        (
            "c".to_string(),
            DefinitionSpec::new("{vendor}:flag", "d", boolean()).param("vendor", "[a-z]+", ""),
        ),
        (
            "bad".to_string(),
            DefinitionSpec::new("acme:{x}", "d", string()),
        ),
    ]);
    assert_eq!(r.len(), 3);
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].name, "bad");
    assert_eq!(
        r.find("acme:cache_ways").map(|d| d.key.as_str()),
        Some("acme:cache_ways")
    );
    assert_eq!(
        r.find("acme:numa_cache.3").map(|d| d.key.as_str()),
        Some("acme:numa_cache.{node}")
    );
    assert_eq!(
        r.find("zeta:flag").map(|d| d.key.as_str()),
        Some("{vendor}:flag")
    );
    assert!(r.find("acme:numa_cache.x").is_none());
}
