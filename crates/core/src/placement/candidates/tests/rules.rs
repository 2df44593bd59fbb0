//! Placement's rules, one by one.

use std::collections::BTreeSet;

use super::{AGG, AGG2, Cloud, numa_node};
use crate::placement::Inventory;
use crate::placement::ids::ProviderId;

#[test]
fn unnumbered_group_spreads_over_one_tree() {
    let c = numa_node(Cloud::new(), "cn1", &["COMPUTE_NODE"]);
    let got = c.ask("resources=VCPU:1,MEMORY_MB:512,DISK_GB:10");
    assert_eq!(got.len(), 4, "{got:?}"); // VCPU from either cell × MEMORY from either cell
    assert!(got.contains(&"cn1-numa0:MEMORY_MB=512 cn1-numa1:VCPU=1 cn1:DISK_GB=10".to_string()));
}

#[test]
fn traits_count_only_on_providers_that_supply_resources() {
    let c = numa_node(Cloud::new(), "cn1", &["CUSTOM_GOLD"]);
    // The root has the trait but supplies nothing here.
    assert!(c.ask("resources=VCPU:1&required=CUSTOM_GOLD").is_empty());
    // Once it supplies DISK_GB, its trait counts for the whole candidate.
    assert_eq!(
        c.ask("resources=VCPU:1,DISK_GB:1&required=CUSTOM_GOLD")
            .len(),
        2
    );
    // Forbidden the same way: a root with the trait that supplies nothing does not exclude.
    assert_eq!(c.ask("resources=VCPU:1&required=!CUSTOM_GOLD").len(), 2);
    assert!(
        c.ask("resources=VCPU:1,DISK_GB:1&required=!CUSTOM_GOLD")
            .is_empty()
    );
}

#[test]
fn forbidden_trait_excludes_only_the_providers_that_have_it() {
    let c = numa_node(Cloud::new(), "cn1", &[]).rp(
        "cn1-numa1",
        Some("cn1"),
        &[("VCPU", 4), ("MEMORY_MB", 1024)],
        &["CUSTOM_RESERVED"],
        &[],
    );
    assert_eq!(
        c.ask("resources=VCPU:1&required=!CUSTOM_RESERVED"),
        vec!["cn1-numa0:VCPU=1"]
    );
    // any-of: either trait will do.
    let c = c.rp("cn1-numa0", Some("cn1"), &[("VCPU", 4)], &["CUSTOM_A"], &[]);
    assert_eq!(
        c.ask("resources=VCPU:1&required=in:CUSTOM_A,CUSTOM_RESERVED")
            .len(),
        2
    );
    assert_eq!(
        c.ask("resources=VCPU:1&required=in:CUSTOM_A,CUSTOM_RESERVED&required=!CUSTOM_RESERVED"),
        vec!["cn1-numa0:VCPU=1"]
    );
}

#[test]
fn numbered_group_traits_apply_to_its_provider() {
    let c = numa_node(Cloud::new(), "cn1", &[])
        .rp(
            "pf-a",
            Some("cn1-numa0"),
            &[("SRIOV_NET_VF", 4)],
            &["CUSTOM_PHYSNET_A"],
            &[],
        )
        .rp(
            "pf-b",
            Some("cn1-numa1"),
            &[("SRIOV_NET_VF", 4)],
            &["CUSTOM_PHYSNET_B"],
            &[],
        );
    let got = c.ask("resources=VCPU:1&resources1=SRIOV_NET_VF:1&required1=CUSTOM_PHYSNET_B");
    assert_eq!(
        got,
        vec![
            "cn1-numa0:VCPU=1 pf-b:SRIOV_NET_VF=1",
            "cn1-numa1:VCPU=1 pf-b:SRIOV_NET_VF=1"
        ]
    );
}

#[test]
fn isolate_and_none() {
    let c = Cloud::new()
        .rp("cn1", None, &[("VCPU", 8)], &[], &[])
        .rp("pf-a", Some("cn1"), &[("SRIOV_NET_VF", 1)], &[], &[])
        .rp("pf-b", Some("cn1"), &[("SRIOV_NET_VF", 2)], &[], &[]);
    let q = "resources=VCPU:1&resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1&group_policy=";
    let isolate = c.ask(&format!("{q}isolate"));
    assert_eq!(isolate.len(), 2, "{isolate:?}"); // a+b and b+a (different mappings)
    let none = c.ask(&format!("{q}none"));
    // With none, both groups may land on pf-b (2 fit), never both on pf-a (1 does not).
    assert_eq!(none.len(), 3, "{none:?}");
    assert!(none.contains(&"cn1:VCPU=1 pf-b:SRIOV_NET_VF=2".to_string()));
}

#[test]
fn identical_allocations_with_different_mappings_are_separate() {
    let c = Cloud::new()
        .rp("cn1", None, &[("VCPU", 8)], &[], &[])
        .rp("pf-a", Some("cn1"), &[("SRIOV_NET_VF", 4)], &[], &[])
        .rp("pf-b", Some("cn1"), &[("SRIOV_NET_VF", 4)], &[], &[]);
    let set = c.set(
        "resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1&group_policy=isolate",
        39,
    );
    assert_eq!(set.candidates.len(), 2);
    assert_eq!(set.candidates[0].allocations, set.candidates[1].allocations);
    assert_ne!(set.candidates[0].mappings, set.candidates[1].mappings);
}

#[test]
fn root_required_looks_at_the_root_only() {
    let c = numa_node(
        numa_node(Cloud::new(), "cn1", &["COMPUTE_NODE", "CUSTOM_GOLD"]),
        "cn2",
        &["COMPUTE_NODE"],
    )
    .rp(
        "cn2-numa0",
        Some("cn2"),
        &[("VCPU", 4), ("MEMORY_MB", 1024)],
        &["CUSTOM_GOLD"],
        &[],
    );
    let gold = c.ask("resources=VCPU:1&root_required=CUSTOM_GOLD");
    assert!(gold.iter().all(|g| g.starts_with("cn1-")), "{gold:?}");
    let not_gold = c.ask("resources=VCPU:1&root_required=!CUSTOM_GOLD");
    assert!(
        not_gold.iter().all(|g| g.starts_with("cn2-")) && not_gold.len() == 2,
        "{not_gold:?}"
    );
}

#[test]
fn member_of_provider_or_root_in_unnumbered_group_provider_only_in_numbered() {
    let c = Cloud::new()
        .rp("cn1", None, &[], &[], &[AGG])
        .rp("cn1-numa0", Some("cn1"), &[("VCPU", 4)], &[], &[])
        .rp("cn2", None, &[], &[], &[])
        .rp("cn2-numa0", Some("cn2"), &[("VCPU", 4)], &[], &[AGG]);
    assert_eq!(c.ask(&format!("resources=VCPU:1&member_of={AGG}")).len(), 2);
    assert_eq!(
        c.ask(&format!("resources1=VCPU:1&member_of1={AGG}")),
        vec!["cn2-numa0:VCPU=1"]
    );
    // Forbidding the aggregate drops a provider when it or its root is in it.
    assert!(
        c.ask(&format!("resources=VCPU:1&member_of=!{AGG}"))
            .is_empty()
    );
    assert_eq!(
        c.ask(&format!("resources=VCPU:1&member_of=in:{AGG},{AGG2}"))
            .len(),
        2
    );
    assert!(
        c.ask(&format!("resources=VCPU:1&member_of={AGG2}"))
            .is_empty()
    );
}

#[test]
fn sharing_providers_serve_linked_trees() {
    let c = Cloud::new()
        .rp("cn1", None, &[], &["COMPUTE_NODE"], &[])
        .rp("cn1-numa0", Some("cn1"), &[("VCPU", 4)], &[], &[AGG]) // a nested member links the tree
        .rp("cn2", None, &[("VCPU", 4)], &[], &[])
        .rp(
            "nfs",
            None,
            &[("DISK_GB", 1000)],
            &["MISC_SHARES_VIA_AGGREGATE", "STORAGE_DISK_SSD"],
            &[AGG],
        );
    assert_eq!(
        c.ask("resources=VCPU:1,DISK_GB:10"),
        vec!["cn1-numa0:VCPU=1 nfs:DISK_GB=10"]
    );
    // The sharing provider's traits count in the unnumbered group.
    assert_eq!(
        c.ask("resources=VCPU:1,DISK_GB:10&required=STORAGE_DISK_SSD")
            .len(),
        1
    );
    // A sharing provider can be a candidate on its own.
    assert_eq!(c.ask("resources=DISK_GB:10"), vec!["nfs:DISK_GB=10"]);
    // in_tree drops sharing providers from the unnumbered group.
    let cn1 = crate::placement::derived_provider_uuid("cn1");
    assert!(
        c.ask(&format!("resources=VCPU:1,DISK_GB:10&in_tree={cn1}"))
            .is_empty()
    );
    assert_eq!(
        c.ask(&format!("resources=VCPU:1&in_tree={cn1}")),
        vec!["cn1-numa0:VCPU=1"]
    );
}

#[test]
fn two_sharing_providers_can_form_one_candidate() {
    let c = Cloud::new()
        .rp(
            "nfs",
            None,
            &[("DISK_GB", 1000)],
            &["MISC_SHARES_VIA_AGGREGATE"],
            &[AGG],
        )
        .rp(
            "ip-pool",
            None,
            &[("IPV4_ADDRESS", 10)],
            &["MISC_SHARES_VIA_AGGREGATE"],
            &[AGG],
        );
    assert_eq!(
        c.ask("resources=DISK_GB:1,IPV4_ADDRESS:1"),
        vec!["ip-pool:IPV4_ADDRESS=1 nfs:DISK_GB=1"]
    );
}

#[test]
fn capacity_min_max_and_step() {
    let c = Cloud::new()
        .rp("cn1", None, &[], &[], &[])
        .inv(
            "cn1",
            "VCPU",
            Inventory {
                allocation_ratio: 0.57,
                ..Inventory::with_total(100)
            },
        )
        .inv(
            "cn1",
            "MEMORY_MB",
            Inventory {
                min_unit: 256,
                step_size: 256,
                max_unit: 4096,
                ..Inventory::with_total(8192)
            },
        )
        .used("cn1", "MEMORY_MB", 7168);
    assert!(c.ask("resources=VCPU:57").is_empty());
    assert_eq!(c.ask("resources=VCPU:56").len(), 1);
    assert_eq!(c.ask("resources=MEMORY_MB:1024").len(), 1);
    assert!(
        c.ask("resources=MEMORY_MB:1280").is_empty(),
        "over capacity"
    );
    assert!(
        c.ask("resources=MEMORY_MB:128").is_empty(),
        "below min_unit"
    );
    assert!(c.ask("resources=MEMORY_MB:300").is_empty(), "not a step");
}

#[test]
fn usage_above_capacity_takes_the_provider_out() {
    let c = Cloud::new()
        .rp("cn1", None, &[("VCPU", 4)], &[], &[])
        .used("cn1", "VCPU", 6);
    assert!(c.ask("resources=VCPU:1").is_empty());
}

#[test]
fn limit_and_summaries() {
    let c = numa_node(numa_node(Cloud::new(), "cn1", &[]), "cn2", &[]);
    let all = c.set("resources=VCPU:1", 39);
    assert_eq!(all.candidates.len(), 4);
    assert_eq!(all.summary_trees.len(), 2);
    let one = c.set("resources=VCPU:1&limit=1", 39);
    assert_eq!(one.candidates.len(), 1);
    assert_eq!(
        one.summary_trees.len(),
        1,
        "summaries shrink to the kept trees"
    );
    let old = c.set("resources=VCPU:1", 28);
    let only = old
        .summary_only
        .expect("before 1.29 only used providers are summarised");
    assert_eq!(only.len(), 4);
}

#[test]
fn before_1_29_one_provider_per_tree() {
    let c = numa_node(Cloud::new(), "cn1", &[]);
    assert_eq!(
        c.ask_at("resources=VCPU:1,DISK_GB:1", 28).len(),
        0,
        "spreading over a tree needs 1.29"
    );
    assert_eq!(
        c.ask_at("resources=VCPU:1,MEMORY_MB:1", 28).len(),
        2,
        "one cell supplying both is fine"
    );
}

#[test]
fn same_subtree() {
    let c = Cloud::new()
        .rp("cn1", None, &[], &[], &[])
        .rp("numa0", Some("cn1"), &[("VCPU", 4)], &["HW_NUMA_ROOT"], &[])
        .rp("numa0-pf", Some("numa0"), &[("SRIOV_NET_VF", 4)], &[], &[])
        .rp("numa1", Some("cn1"), &[("VCPU", 4)], &["HW_NUMA_ROOT"], &[])
        .rp("numa1-pf", Some("numa1"), &[("SRIOV_NET_VF", 4)], &[], &[]);
    let got = c.ask("resources_CPU=VCPU:1&resources_NIC=SRIOV_NET_VF:1&same_subtree=_CPU,_NIC&group_policy=none");
    assert_eq!(
        got,
        vec![
            "numa0-pf:SRIOV_NET_VF=1 numa0:VCPU=1",
            "numa1-pf:SRIOV_NET_VF=1 numa1:VCPU=1"
        ]
    );
    // A resourceless group names the subtree root.
    let got = c.ask("resources_NIC=SRIOV_NET_VF:1&required_NUMA=HW_NUMA_ROOT&same_subtree=_NIC,_NUMA&group_policy=none");
    assert_eq!(
        got,
        vec!["numa0-pf:SRIOV_NET_VF=1", "numa1-pf:SRIOV_NET_VF=1"]
    );
}

#[test]
fn unknown_names_give_no_candidates() {
    let c = numa_node(Cloud::new(), "cn1", &[]);
    assert!(c.ask("resources=CUSTOM_NEVER_SEEN:1").is_empty());
    assert!(
        c.ask("resources=VCPU:1&required=CUSTOM_NEVER_SEEN")
            .is_empty()
    );
    assert_eq!(
        c.ask("resources=VCPU:1&required=!CUSTOM_NEVER_SEEN").len(),
        2
    );
    assert!(
        c.ask("resources=VCPU:1&in_tree=6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a09")
            .is_empty()
    );
}

#[test]
fn broken_trees_are_left_out() {
    let c = Cloud::new().rp("orphan", Some("missing"), &[("VCPU", 4)], &[], &[]);
    assert!(c.ask("resources=VCPU:1").is_empty());
    let trees: BTreeSet<ProviderId> = c
        .set("resources=VCPU:1", 39)
        .summary_trees
        .into_iter()
        .collect();
    assert!(trees.is_empty());
}

#[test]
fn a_group_without_resources_needs_a_required_trait_or_aggregate() {
    let c = Cloud::new().rp("cn1", None, &[("VCPU", 4)], &["HW_NUMA_ROOT"], &[]);
    assert_eq!(
        c.ask("resources_A=VCPU:1&required_B=HW_NUMA_ROOT&same_subtree=_A,_B&group_policy=none")
            .len(),
        1
    );
    assert!(
        c.ask("resources_A=VCPU:1&required_B=!CUSTOM_X&same_subtree=_A,_B&group_policy=none")
            .is_empty()
    );
}

#[test]
fn before_1_29_summaries_cover_every_used_provider_of_the_kept_trees() {
    let c = Cloud::new()
        .rp("cn1", None, &[], &[], &[])
        .rp("cn1-numa0", Some("cn1"), &[("VCPU", 2)], &[], &[])
        .rp("cn1-numa1", Some("cn1"), &[("VCPU", 16)], &[], &[]);
    let set = c.set("resources=VCPU:1&limit=1", 28);
    assert_eq!(set.candidates.len(), 1);
    assert_eq!(
        set.summary_only.unwrap().len(),
        2,
        "both cells were used by some candidate"
    );
}
