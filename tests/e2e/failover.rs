//! Two operator replicas: one leads and writes status; when it dies without a word
//! (SIGKILL, no lease release), the other takes the lease over and writes instead.

use std::time::{Duration, Instant};

use super::support::exclusive_lock;
use super::{Operator, crds_installed, eventually_flavor};

const LEASE: &str = "e2e-failover";

fn flavor(name: &str) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: {name}\nspec:\n  vcpus: 1\n  memoryMb: 512\n"
    )
}

fn holder(cp: &super::ControlPlane) -> String {
    cp.kubectl(&[
        "get",
        "lease",
        LEASE,
        "-n",
        "default",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ])
    .stdout
    .trim()
    .to_string()
}

/// Waits until exactly one of the replicas reports `kubeplace_leader 1`, and returns it.
fn leader_of<'a>(replicas: &[&'a Operator], within: Duration) -> &'a Operator {
    let deadline = Instant::now() + within;
    loop {
        let leading: Vec<&&Operator> = replicas
            .iter()
            .filter(|r| r.metric("kubeplace_leader") == Some(1.0))
            .collect();
        if leading.len() == 1 {
            return leading[0];
        }
        assert!(
            Instant::now() < deadline,
            "{} replicas lead after {within:?}",
            leading.len()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Waits until some replica has written the flavor's status.
fn status_written(cp: &super::ControlPlane, flavor: &str) {
    eventually_flavor(cp, flavor, ".status.observedGeneration", "1");
}

fn status_writes(replica: &Operator) -> f64 {
    replica
        .metric(r#"kubeplace_status_writes_total{kind="Flavor"}"#)
        .unwrap_or(0.0)
}

#[test]
fn a_second_replica_takes_over_when_the_leader_dies() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    let _ = cp.kubectl(&[
        "delete",
        "lease",
        LEASE,
        "-n",
        "default",
        "--ignore-not-found",
    ]);
    let lease = format!("--lease-name={LEASE}");
    let a = Operator::start_named(cp, "kubeplace-replica-a", "kubeplace-replica-a", &[&lease]);
    let b = Operator::start_named(cp, "kubeplace-replica-b", "kubeplace-replica-b", &[&lease]);
    let first = leader_of(&[&a, &b], Duration::from_secs(30));
    let (leader, follower) = if std::ptr::eq(first, &a) {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(follower.metric("kubeplace_leader"), Some(0.0));
    let leader_identity = holder(cp);
    assert!(!leader_identity.is_empty(), "nobody holds the lease");
    // The leader writes the status of a new flavor; the follower writes nothing.
    cp.kubectl_stdin(&["apply", "-f", "-"], &flavor("e2e-failover-1"))
        .ok();
    status_written(cp, "e2e-failover-1");
    assert!(status_writes(&leader) >= 1.0);
    assert_eq!(status_writes(&follower), 0.0, "a follower wrote status");
    // The leader dies without releasing the lease. Its webhook goes with it; in a cluster
    // both replicas sit behind one Service, here each registered its own configuration.
    leader.process.kill();
    cp.kubectl(&[
        "delete",
        "validatingwebhookconfiguration",
        leader.webhook_config(),
    ])
    .ok();
    // The follower takes over once the lease has gone unrenewed for its duration (15 s).
    let took_over = leader_of(&[&follower], Duration::from_secs(60));
    assert!(std::ptr::eq(took_over, &follower));
    let new_identity = holder(cp);
    assert!(
        !new_identity.is_empty() && new_identity != leader_identity,
        "the lease is still held by {new_identity:?}"
    );
    cp.kubectl_stdin(&["apply", "-f", "-"], &flavor("e2e-failover-2"))
        .ok();
    status_written(cp, "e2e-failover-2");
    assert!(
        status_writes(&follower) >= 1.0,
        "the new leader wrote nothing"
    );
    cp.kubectl(&["delete", "flavor", "e2e-failover-1", "e2e-failover-2"])
        .ok();
    follower.stop_and_unregister(cp);
    cp.kubectl(&[
        "delete",
        "lease",
        LEASE,
        "-n",
        "default",
        "--ignore-not-found",
    ])
    .ok();
}
