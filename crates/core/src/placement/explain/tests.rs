//! Explain, rule by rule, on small hand-built trees.

use super::*;
use crate::placement::Inventory;
use crate::placement::microversion::Microversion;
use crate::placement::provider_tree::{ConsumerAllocations, ProviderRecord};
use crate::placement::query::parse_candidates_query;

fn rp(
    index: &mut ProviderIndex,
    name: &str,
    parent: Option<&str>,
    inv: &[(&str, i64)],
    traits: &[&str],
) {
    index.upsert_provider(ProviderRecord {
        name: name.into(),
        uuid: crate::placement::derived_provider_uuid(name),
        placement_name: None,
        parent: parent.map(Into::into),
        inventories: inv
            .iter()
            .map(|(c, t)| (c.to_string(), Inventory::with_total(*t)))
            .collect(),
        traits: traits.iter().map(|t| t.to_string()).collect(),
        aggregates: Default::default(),
    });
}

fn used(index: &mut ProviderIndex, name: &str, class: &str, n: i64) {
    let key = format!("{name}-{class}");
    index.upsert_allocations(
        &key,
        ConsumerAllocations {
            consumer: key.clone(),
            items: vec![(name.into(), class.into(), n)],
        },
    );
}

/// Three compute nodes: cn1 with AVX2 and 8 VCPU (6 used), cn2 with 8 VCPU and GOLD,
/// cn3 with 16 VCPU; each with a NIC child offering VFs.
fn cloud() -> ProviderIndex {
    let mut i = ProviderIndex::default();
    rp(
        &mut i,
        "cn1",
        None,
        &[("VCPU", 8), ("MEMORY_MB", 4096)],
        &["HW_CPU_X86_AVX2"],
    );
    rp(
        &mut i,
        "cn2",
        None,
        &[("VCPU", 8), ("MEMORY_MB", 4096)],
        &["CUSTOM_GOLD"],
    );
    rp(
        &mut i,
        "cn3",
        None,
        &[("VCPU", 16), ("MEMORY_MB", 4096)],
        &[],
    );
    for cn in ["cn1", "cn2", "cn3"] {
        rp(
            &mut i,
            &format!("{cn}-nic"),
            Some(cn),
            &[("SRIOV_NET_VF", 4)],
            &["CUSTOM_PHYSNET_A"],
        );
    }
    used(&mut i, "cn1", "VCPU", 6);
    i
}

fn ask(i: &ProviderIndex, q: &str) -> Explanation {
    explain(i, &parse_candidates_query(q, Microversion::LATEST).unwrap())
}

fn messages(steps: &[Step]) -> Vec<String> {
    steps.iter().map(|s| s.message.clone()).collect()
}

#[test]
fn each_provider_is_lost_at_its_first_rule() {
    let e = ask(&cloud(), "resources=VCPU:4&required=!CUSTOM_GOLD");
    let g = &e.groups[0];
    assert_eq!(g.providers, 6);
    assert_eq!(
        messages(&g.lost),
        [
            "with forbidden trait CUSTOM_GOLD: 1 provider",
            "no inventory of VCPU: 3 providers",
            "no room for VCPU:4 (largest free 2): 1 provider",
        ]
    );
    assert_eq!(g.left, 1);
    assert_eq!(e.trees.trees, 3);
    // cn2's VCPU is on a provider the forbidden trait lost: no provider is left there;
    // cn1 is the one without room.
    assert_eq!(
        messages(&e.trees.lost),
        [
            "no provider for the unnumbered group: 1 tree",
            "no room for VCPU:4 for the unnumbered group (largest free 2): 1 tree"
        ]
    );
    assert_eq!(
        e.summary(3),
        [
            "no provider for the unnumbered group: 1 tree (of its providers, with forbidden trait CUSTOM_GOLD: 1 provider)",
            "no room for VCPU:4 for the unnumbered group (largest free 2): 1 tree"
        ]
    );
    assert_eq!(
        (e.trees.with_candidates, e.candidates, e.returned),
        (1, 1, 1)
    );
}

#[test]
fn unnumbered_required_traits_are_judged_per_tree() {
    let e = ask(&cloud(), "resources=VCPU:1&required=HW_CPU_X86_AVX2");
    assert_eq!(e.groups[0].left, 3);
    assert_eq!(
        messages(&e.trees.lost),
        ["no provider supplying the unnumbered group with required trait HW_CPU_X86_AVX2: 2 trees"]
    );
    assert_eq!(e.returned, 1);
}

#[test]
fn numbered_groups_isolate_and_limit() {
    // Two VF groups isolated: each tree has one NIC, so no tree can serve both.
    let e = ask(
        &cloud(),
        "resources=VCPU:1&resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1&group_policy=isolate",
    );
    assert_eq!(e.groups.len(), 3);
    assert_eq!(e.groups[1].left, 3);
    assert_eq!(
        messages(&e.groups[1].lost),
        ["no inventory of SRIOV_NET_VF: 3 providers"]
    );
    assert_eq!(e.trees.lost.len(), 1);
    assert_eq!(e.trees.lost[0].loss, Loss::GroupsCombined);
    assert_eq!(e.trees.lost[0].count, 3);
    assert_eq!(e.returned, 0);
    // Without isolate both land on one NIC; the limit cuts all but two.
    let e = ask(
        &cloud(),
        "resources=VCPU:1&resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1&group_policy=none&limit=2",
    );
    assert_eq!((e.candidates, e.cut_by_limit, e.returned), (3, 1, 2));
    assert!(
        e.text()
            .contains("Candidates: 3; limit 2 cuts 1; returned 2"),
        "{}",
        e.text()
    );
}

#[test]
fn root_required_and_unknown_names() {
    let e = ask(
        &cloud(),
        "resources=VCPU:1&root_required=HW_CPU_X86_AVX2,!CUSTOM_GOLD",
    );
    assert_eq!(
        messages(&e.trees.lost),
        ["root without root_required trait HW_CPU_X86_AVX2: 2 trees"]
    );
    let e = ask(&cloud(), "resources=CUSTOM_NOWHERE:1");
    assert_eq!(
        messages(&e.groups[0].lost),
        ["no inventory of CUSTOM_NOWHERE: 6 providers"]
    );
    assert_eq!(e.returned, 0);
}

#[test]
fn summary_is_bounded_and_names_the_group_behind_a_tree_loss() {
    let e = ask(
        &cloud(),
        "resources=VCPU:4&resources1=SRIOV_NET_VF:1&required1=CUSTOM_PHYSNET_B",
    );
    let lines = e.summary(3);
    assert!(lines.len() <= 3);
    assert!(
        lines.iter().any(|l| l.contains("no provider for group 1")
            && l.contains("lacking required trait CUSTOM_PHYSNET_B")),
        "{lines:?}"
    );
    assert_eq!(e.summary(1).len(), 1);
}

#[test]
fn summary_keeps_the_nearest_miss_however_few_trees_it_is() {
    // cn1 alone has AVX2 and has 2 VCPU free; the others lack AVX2 on a provider that
    // supplies VCPU. The one tree that has the trait but no room is what to fix.
    let mut i = cloud();
    for n in 4..9 {
        rp(&mut i, &format!("cn{n}"), None, &[("VCPU", 8)], &[]);
    }
    let e = ask(&i, "resources=VCPU:4&required=HW_CPU_X86_AVX2");
    assert_eq!(
        e.summary(1),
        ["no room for VCPU:4 for the unnumbered group (largest free 2): 1 tree"]
    );
    assert_eq!(
        e.summary(3),
        [
            "no provider supplying the unnumbered group with required trait HW_CPU_X86_AVX2: 7 trees",
            "no room for VCPU:4 for the unnumbered group (largest free 2): 1 tree"
        ]
    );
}
