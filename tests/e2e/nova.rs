//! Nova's own Placement client against `kubeplace run` on a control plane of its own:
//! the steps of `hack/nova-report-client.py` (provider trees, candidates from a flavor,
//! claims and a refused claim, conflicts, a migration's move, a reshape, shared storage,
//! quota usages), each checked against what real Placement 16 answers, with every write
//! stored as Kubernetes objects.

use super::placement_api::{ACCESS, token, wait_for_api};
use super::support::{self, nova};
use super::{Operator, private_with_crds};

#[test]
fn novas_report_client_uses_the_operators_placement_api() {
    let python = nova::nova_python();
    // The client's providers and consumers have fixed uuids: the cloud must start empty.
    let cp = private_with_crds();
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let writer = token(&cp, "placement-writer");
    let port = support::free_port();
    let op = Operator::start(
        &cp,
        "kubeplace-nova",
        &[
            "--leader-elect=false",
            &format!("--placement-addr=127.0.0.1:{port}"),
        ],
    );
    wait_for_api(port, &op);
    let (success, steps, stderr) =
        nova::run_client(&python, &format!("http://127.0.0.1:{port}"), &writer);
    let failed: Vec<&serde_json::Value> = steps
        .iter()
        .map(|(_, v)| v)
        .filter(|v| v["ok"] != true)
        .collect();
    eprintln!(
        "nova over the cluster: {} steps, {} differ from Placement 16",
        steps.len(),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "steps where Nova got other than Placement 16 gives: {failed:#?}\nstderr: {stderr}"
    );
    assert_eq!(steps.len(), 47, "{steps:#?}\nstderr: {stderr}");
    // An inventory change from a generation a claim made stale is refused and redriven,
    // as with Placement.
    let stale = &steps
        .iter()
        .find(|(n, _)| n == "inventory change on a stale generation, then redriven")
        .expect("the step")
        .1;
    assert_eq!(stale["got"], stale["expected"], "{stale}");
    assert!(success, "the client failed: {stderr}");
    // The computes Nova reported are ResourceProviders kubectl lists.
    let providers = cp.kubectl(&["get", "resourceproviders", "-o", "name"]);
    assert!(providers.ok().lines().count() >= 3, "{}", providers.stdout);
    op.process.stop(std::time::Duration::from_secs(10));
    cp.shutdown();
}
