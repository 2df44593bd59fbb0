//! Nova's own Placement client against `kubeplace placement serve`:
//! `hack/nova-report-client.py` drives `nova.scheduler.client.report.SchedulerReportClient`
//! as nova-compute, nova-scheduler, nova-conductor and nova-api do (provider trees, a
//! reshape, allocation candidates from a flavor, claims, a refused claim, the conflicts
//! Nova tells apart, a migration's move, shared storage, deletes, quota usages) and prints
//! one JSON line per step with what Nova got and what real Placement 16 gives.
//!
//! Nova lives in a virtualenv made by `hack/nova-venv.sh` (CI runs it before
//! `cargo test`); without it this test fails and says how to make it.

#[path = "support/nova.rs"]
mod nova;
mod placement_server;
#[path = "support/real_placement.rs"]
mod real_placement;

use placement_server::Server;
use serde_json::{Value, json};

#[test]
fn nova_report_client_uses_kubeplace_as_placement() {
    let python = nova::nova_python();
    let s = Server::start(&[]);
    let (success, steps, stderr) = nova::run_client(&python, &s.url(), "admin");
    let failed: Vec<&Value> = steps
        .iter()
        .map(|(_, v)| v)
        .filter(|v| v["ok"] != true)
        .collect();
    assert!(
        failed.is_empty(),
        "steps where Nova got other than Placement 16 gives: {failed:#?}\nstderr: {stderr}"
    );
    assert!(success, "the client failed: {stderr}");
    let got = |name: &str| -> &Value {
        &steps
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no step {name:?} in {steps:#?}"))
            .1["got"]
    };
    // Each step the script has; a run that stops early is a failure.
    assert_eq!(steps.len(), 47, "{steps:#?}");

    let cn1 = "c0a80001-0000-4000-8000-0000000000c1";
    let vm_a = "9a000000-0000-4000-8000-0000000000a1";
    // Of three computes, only cn1 is gold without the forbidden trait.
    assert_eq!(
        got("get_allocation_candidates")["candidates"],
        json!([{cn1: {"DISK_GB": 20, "MEMORY_MB": 8192, "VCPU": 4}}])
    );
    assert_eq!(got("claim_resources"), &json!(true));
    assert_eq!(
        got("get_allocs_for_consumer")["allocations"],
        json!({cn1: {"DISK_GB": 20, "MEMORY_MB": 8192, "VCPU": 4}})
    );
    // Conflicts Nova tells apart by Placement's codes and words: a provider another
    // worker created first is read back, a stale consumer or provider generation and an
    // inventory in use are refused as such.
    assert_eq!(
        got("create_resource_provider race")["uuid"],
        "c0a80001-0000-4000-8000-0000000000c2"
    );
    assert_eq!(
        got("put_allocations stale consumer generation"),
        "AllocationUpdateFailed"
    );
    assert_eq!(
        got("inventory change on a stale generation, then redriven")["first"],
        "ResourceProviderUpdateConflict"
    );
    assert_eq!(got("inventory in use"), "InventoryInUse");
    // The second instance's candidate went stale when the first claimed: Nova must see
    // the refusal, and nothing is allocated to it.
    assert_eq!(got("claim_resources over capacity"), &json!(false));
    assert_eq!(
        got("get_allocs_for_consumer after the refused claim"),
        &json!({})
    );
    assert_eq!(got("get_allocation_candidates when full"), &json!([]));
    // The PCI device comes from the nested child, in its own request group.
    assert_eq!(
        got("get_allocation_candidates nested")["mappings"],
        json!({"": [cn1], "1": ["c0a80001-0000-4000-8000-0000000000d1"]})
    );
    // Quota usages are the sum of the two claims (4 + 1 cores, 8192 + 1024 MB).
    assert_eq!(
        got("get_usages_counts_for_quota"),
        &json!({"project": {"cores": 5, "ram": 9216}, "user": {"cores": 5, "ram": 9216}})
    );
    assert_eq!(
        got("move_allocations")["migration"],
        json!({cn1: {"DISK_GB": 20, "MEMORY_MB": 8192, "VCPU": 4}})
    );
    assert_eq!(got("move_allocations")["instance"], json!({}));
    // VGPU inventory and the allocation on it move to a child provider in one reshape.
    assert_eq!(
        got("update_from_provider_tree reshape")["allocations"],
        json!({
            "c0a80001-0000-4000-8000-0000000000c3": {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1},
            "c0a80001-0000-4000-8000-0000000000d3": {"VGPU": 1}
        })
    );
    assert_eq!(
        got("get_usages_counts_for_quota after deletes"),
        &json!({"project": {"cores": 0, "ram": 0}, "user": {"cores": 0, "ram": 0}})
    );

    // A disk too big for cn1 comes from the storage pool shared with cn1's aggregate.
    assert_eq!(
        got("claim_resources shared disk")["allocations"],
        json!({
            "5a000000-0000-4000-8000-000000000001": {"DISK_GB": 500},
            cn1: {"MEMORY_MB": 512, "VCPU": 1}
        })
    );

    // What Nova wrote is what the server holds, read without Nova.
    let usages = s
        .call(
            "GET",
            &format!("/resource_providers/{cn1}/usages"),
            Some("1.39"),
            None,
        )
        .expect(200)
        .json();
    assert_eq!(
        usages["usages"],
        json!({"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 0})
    );
    let traits = s
        .call(
            "GET",
            &format!("/resource_providers/{cn1}/traits"),
            Some("1.39"),
            None,
        )
        .expect(200)
        .json();
    let mut names: Vec<&str> = traits["traits"]
        .as_array()
        .expect("traits")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["COMPUTE_NODE", "CUSTOM_GOLD", "HW_CPU_X86_AVX2"]);
    let consumer = s
        .call("GET", &format!("/allocations/{vm_a}"), Some("1.39"), None)
        .expect(200)
        .json();
    assert_eq!(
        consumer["project_id"],
        "6f1d0e52-0000-4000-8000-00000000000a"
    );
    assert_eq!(
        consumer["allocations"]["5a000000-0000-4000-8000-000000000001"]["resources"],
        json!({"DISK_GB": 500})
    );
}

/// Nova's test_update_from_provider_tree_reshape, through its report client, against
/// kubeplace and against real Placement 16: every step reads the same tree and
/// allocations, and the reshape that would take inventory from under allocations still on
/// it fails as Placement fails it, with `placement.inventory.inuse` (Nova's resource
/// tracker reads the code).
#[test]
fn nova_reshape_scenario_answers_as_placement() {
    let python = nova::nova_python();
    let placement = real_placement::RealPlacement::start();
    let (control_ok, control, control_err) = nova::run_reshape(&python, &placement.url, "admin");
    assert!(
        control_ok,
        "the scenario fails on real Placement: {control_err}"
    );
    let s = Server::start(&[]);
    let (ok, steps, stderr) = nova::run_reshape(&python, &s.url(), "admin");
    let names: Vec<&str> = steps.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        control.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        "stderr: {stderr}"
    );
    for ((name, got), (_, want)) in steps.iter().zip(&control) {
        assert_eq!(got["got"], want["got"], "step {name:?}");
    }
    assert!(ok, "{stderr}");
    let refused = &steps
        .iter()
        .find(|(n, _)| n == "reshape leaving allocations on removed inventory")
        .expect("the refused reshape's step")
        .1["got"];
    assert_eq!(
        refused,
        &json!({"raised": "ReshapeFailed", "code": "placement.inventory.inuse", "inventory.inuse in message": true})
    );
}
