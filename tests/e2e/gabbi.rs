//! Placement's own gabbi files against `kubeplace run`'s Placement API over the real
//! control plane: each file's state, built in real Placement, is written through the API
//! (every write an object in the cluster), the file is run against it, and kubeplace is
//! emptied through the API before the next. Real Placement run the same way is the control.
//! Every test it passes passes here, or fails only on an error detail's wording, or is a
//! difference of the API over a cluster that docs/placement-api.md names (*Over a cluster*).

use std::process::Command;

use serde_json::Value;

use super::placement_api::{ACCESS, token, wait_for_api};
use super::support::{self, exclusive_lock};
use super::{Operator, crds_installed};

/// The files of Placement's resources: providers, inventories, traits, aggregates, resource
/// classes, allocations, candidates, usages and the reshaper (not the HTTP-level, CORS and
/// policy files, served alike by `placement serve`, which tests/placement_gabbi.rs runs).
const FILES: &[&str] = &[
    "aggregate.yaml",
    "allocation-bad-class.yaml",
    "allocation-candidates.yaml",
    "allocation-candidates-member-of.yaml",
    "allocation-candidates-root-required.yaml",
    "allocations.yaml",
    "allocations-1.28.yaml",
    "allocations-post.yaml",
    "granular.yaml",
    "inventory.yaml",
    "reshaper.yaml",
    "resource-classes.yaml",
    "resource-provider.yaml",
    "resource-provider-aggregates.yaml",
    "shared-resources.yaml",
    "traits.yaml",
    "usage.yaml",
    "with-allocations.yaml",
];

/// Tests real Placement passes that the API over a cluster answers otherwise, by file and
/// name, each for a reason docs/placement-api.md gives under *Over a cluster*.
const OVER_A_CLUSTER: &[(&str, &str)] = &[
    // Kubernetes RBAC decides who may call, not Placement's roles: every request carries
    // the writer's token here, so the tests of a non-admin caller are not refused.
    ("reshaper.yaml", "reshaper requires admin not user"),
    ("resource-classes.yaml", "non admin forbidden"),
    ("resource-provider.yaml", "non admin forbidden"),
];

#[test]
fn placements_own_gabbi_files_pass_against_the_api_over_the_cluster() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let writer = token(cp, "placement-writer");
    let port = support::free_port();
    let addr = format!("--placement-addr=127.0.0.1:{port}");
    let op = Operator::start(
        cp,
        "kubeplace-gabbi",
        &["--leader-elect=false", addr.as_str()],
    );
    wait_for_api(port, &op);
    let out_file = std::env::temp_dir().join(format!(
        "kubeplace-gabbi-cluster-{}.json",
        std::process::id()
    ));
    let root = env!("CARGO_MANIFEST_DIR");
    let run = Command::new("python3")
        .arg(format!("{root}/hack/gabbi/run.py"))
        .args(["--kubeplace-port", &port.to_string()])
        .args(["--kubeplace-token", &writer])
        .arg("--out")
        .arg(&out_file)
        .arg("--files")
        .args(FILES)
        .output()
        .expect("python3 runs hack/gabbi/run.py");
    // The operator and its webhook configuration go first, whatever the run found: other
    // tests register one of the same name.
    let log = op.process.output();
    op.stop_and_unregister(cp);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "hack/gabbi/run.py failed:\n{stdout}\n{}\n{log}",
        String::from_utf8_lossy(&run.stderr),
    );
    let results: Value =
        serde_json::from_slice(&std::fs::read(&out_file).expect("the results")).expect("JSON");
    eprintln!("{stdout}");
    let mut judged = 0usize;
    let mut unexpected = Vec::new();
    let mut known_seen = Vec::new();
    for file in results["files"].as_array().expect("files") {
        let name = file["file"].as_str().unwrap_or_default();
        assert!(
            file.get("replay_error_kubeplace").is_none(),
            "{name}: the state could not be written: {}",
            file["replay_error_kubeplace"]
        );
        let tests = file["tests"].as_array().expect("tests");
        assert!(
            !tests.is_empty(),
            "{name}: no test of it ran (it could not be loaded or its run failed): {}",
            serde_json::to_string(file).unwrap_or_default()
        );
        for test in tests {
            if test["control"] != "pass" {
                continue;
            }
            judged += 1;
            if test["kubeplace"] == "pass" || test["class"] == "WORDING" {
                continue;
            }
            let title = test["name"].as_str().unwrap_or_default();
            if OVER_A_CLUSTER.contains(&(name, title)) {
                known_seen.push((name, title));
            } else {
                unexpected.push(format!(
                    "(\"{name}\", \"{title}\"), // {} {} (Placement {})",
                    test["method"].as_str().unwrap_or_default(),
                    test["kubeplace_status"],
                    test["control_status"]
                ));
            }
        }
    }
    assert!(
        unexpected.is_empty(),
        "tests Placement passes that the API over the cluster fails, not known differences:\n{}",
        unexpected.join("\n")
    );
    let fixed: Vec<_> = OVER_A_CLUSTER
        .iter()
        .filter(|k| !known_seen.contains(k))
        .collect();
    assert!(
        fixed.is_empty(),
        "differences over a cluster that no longer differ; take them out: {fixed:?}"
    );
    assert!(judged > 400, "only {judged} tests were judged");
    // Kept when a check fails: hack/gabbi/triage.py sorts what is in it.
    let _ = std::fs::remove_file(&out_file);
}
