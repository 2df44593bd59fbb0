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
    // Over a cluster a claim does not move its providers' generations (docs/placement-api.md
    // says why), so the compute's inventory change after a claim is not the conflict it is
    // in Placement: it is taken at once. Every other step gets what Placement 16 gives.
    const NOT_STALE: &str = "inventory change on a stale generation, then redriven";
    let failed: Vec<&serde_json::Value> = steps
        .iter()
        .map(|(_, v)| v)
        .filter(|v| v["ok"] != true && v["step"] != NOT_STALE)
        .collect();
    eprintln!(
        "nova over the cluster: {} steps, {} differ beyond the generation after a claim",
        steps.len(),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "steps where Nova got other than Placement 16 gives: {failed:#?}\nstderr: {stderr}"
    );
    assert_eq!(steps.len(), 47, "{steps:#?}\nstderr: {stderr}");
    let not_stale = &steps
        .iter()
        .find(|(n, _)| n == NOT_STALE)
        .expect("the step")
        .1;
    assert_eq!(not_stale["got"]["first"], "updated", "{not_stale}");
    assert_eq!(
        not_stale["got"]["MEMORY_MB reserved"],
        not_stale["expected"]["MEMORY_MB reserved"]
    );
    // The client exits 1 for that one difference; anything else it printed is a failure.
    assert!(
        success
            || stderr.contains(
                "1 step(s) differ from Placement: inventory change on a stale generation"
            ),
        "the client failed: {stderr}"
    );
    // The computes Nova reported are ResourceProviders kubectl lists.
    let providers = cp.kubectl(&["get", "resourceproviders", "-o", "name"]);
    assert!(providers.ok().lines().count() >= 3, "{}", providers.stdout);
    op.process.stop(std::time::Duration::from_secs(10));
    cp.shutdown();
}
