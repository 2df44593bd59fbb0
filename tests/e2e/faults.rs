//! Faults in the middle of a burst of applies, on a control plane of the test's own:
//! kube-apiserver restarted, etcd killed and restarted, the operator killed and started
//! again, while servers are created and deleted. Nothing applied is lost, no deleted
//! server is left behind, every status settles, and a fresh operator started
//! afterwards finds nothing to write: the statuses are what a fresh start computes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::support::ControlPlane;
use super::{Operator, private_with_crds};

const NS: &str = "faults";
/// Batches applied in the burst; each is one compute node and two servers, and deletes
/// one server of two batches before.
const BATCHES: usize = 24;
/// Servers left after the burst.
const SERVERS_LEFT: usize = 2 * BATCHES - (BATCHES - 2);

const BASE: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: faults
---
apiVersion: kubeplace.io/v1alpha1
kind: Flavor
metadata:
  name: fault.small
spec:
  vcpus: 1
  memoryMb: 512
  extraSpecs:
    trait:CUSTOM_FAULT: required
---
apiVersion: kubeplace.io/v1alpha1
kind: Image
metadata:
  name: fault-image
spec:
  properties: {os_distro: ubuntu}
"#;

fn batch(i: usize) -> String {
    format!(
        r#"apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata:
  name: fault-cn-{i}
spec:
  inventories:
    VCPU: {{total: 4}}
    MEMORY_MB: {{total: 4096}}
  traits: [COMPUTE_NODE, CUSTOM_FAULT]
---
apiVersion: kubeplace.io/v1alpha1
kind: Flavor
metadata:
  name: fault.f{i}
spec:
  vcpus: 2
  memoryMb: 1024
  extraSpecs:
    trait:CUSTOM_FAULT: required
---
apiVersion: kubeplace.io/v1alpha1
kind: Server
metadata:
  name: fault-s{i}-a
  namespace: {NS}
spec:
  flavor: fault.small
  image: fault-image
---
apiVersion: kubeplace.io/v1alpha1
kind: Server
metadata:
  name: fault-s{i}-b
  namespace: {NS}
spec:
  flavor: fault.small
  image: fault-image
"#
    )
}

/// `kubectl apply` of `manifest`, tried again until it succeeds, as a client riding out
/// an outage would; the attempts it took.
fn apply_until_done(cp: &ControlPlane, manifest: &str) -> usize {
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let run = cp.kubectl_stdin(&["apply", "-f", "-"], manifest);
        if run.success {
            return attempts;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl apply kept failing: {}",
            run.stderr
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `kubectl delete server NAME --wait=false`, tried again until the API server takes it;
/// the attempts it took.
fn delete_until_done(cp: &ControlPlane, server: &str) -> usize {
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let run = cp.kubectl(&["delete", "server", server, "-n", NS, "--wait=false"]);
        if run.success {
            return attempts;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl delete kept failing: {}",
            run.stderr
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Every kubeplace object's status, by kind and name.
fn statuses(cp: &ControlPlane) -> Vec<(String, Value)> {
    let out = cp.kubectl(&[
        "get",
        "resourceproviders,flavors,images,servers,allocations",
        "-A",
        "-o",
        "json",
    ]);
    let list: Value = serde_json::from_str(out.ok()).expect("kubectl prints JSON");
    let mut all: Vec<(String, Value)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| {
            (
                format!(
                    "{} {}/{}",
                    o["kind"].as_str().unwrap_or(""),
                    o["metadata"]["namespace"].as_str().unwrap_or(""),
                    o["metadata"]["name"].as_str().unwrap_or("")
                ),
                o["status"].clone(),
            )
        })
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// The sum of a counter family over its labels, as the operator exports it.
fn counter_sum(op: &Operator, family: &str) -> f64 {
    op.http_get("/metrics")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(family) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until the operator has written no status for `quiet`. The operators here count
/// Flavor headroom every second (`--headroom-interval=1`), so that quiet also means every
/// count is current.
fn idle(op: &Operator, quiet: Duration) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last = counter_sum(op, "kubeplace_status_writes_total");
    let mut since = Instant::now();
    while since.elapsed() < quiet {
        assert!(Instant::now() < deadline, "the operator never went idle");
        std::thread::sleep(Duration::from_millis(250));
        let now = counter_sum(op, "kubeplace_status_writes_total");
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
}

#[test]
fn faults_mid_burst_lose_nothing_and_statuses_match_a_fresh_start() {
    let cp = private_with_crds();
    let operator = Operator::start(
        &cp,
        "kubeplace-faults",
        &["--leader-elect=false", "--headroom-interval=1"],
    );
    apply_until_done(&cp, BASE);

    // The burst runs in its own thread; the faults come while it applies.
    let applied = AtomicUsize::new(0);
    let retried = AtomicUsize::new(0);
    let wait_for = |n: usize| {
        while applied.load(Ordering::SeqCst) < n {
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let operator = std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..BATCHES {
                let mut attempts = apply_until_done(&cp, &batch(i));
                // A server of two batches ago is deleted: its finalizer must give its
                // capacity back, whoever leads and whatever is down at that moment.
                if i >= 2 {
                    attempts += delete_until_done(&cp, &format!("fault-s{}-b", i - 2));
                }
                retried.fetch_add(attempts - 1 - usize::from(i >= 2), Ordering::SeqCst);
                applied.fetch_add(1, Ordering::SeqCst);
            }
        });
        wait_for(BATCHES / 4);
        cp.restart_apiserver(false);
        wait_for(BATCHES / 2);
        cp.restart_etcd(true);
        wait_for(3 * BATCHES / 4);
        operator.process.kill();
        let operator = Operator::start(
            &cp,
            "kubeplace-faults-2",
            &["--leader-elect=false", "--headroom-interval=1"],
        );
        wait_for(BATCHES);
        operator
    });
    eprintln!(
        "faults: {BATCHES} batches applied, {} attempts refused along the way",
        retried.load(Ordering::SeqCst)
    );

    // Nothing is lost: every object is there, every server placed, every usage counted.
    let count = |kind: &str| {
        cp.kubectl(&["get", kind, "-A", "-o", "name"])
            .ok()
            .lines()
            .filter(|l| l.contains("fault"))
            .count()
    };
    assert_eq!(count("resourceproviders"), BATCHES);
    assert_eq!(count("flavors"), BATCHES + 1);
    // Deleted servers are gone once their finalizer released them.
    let deadline = Instant::now() + Duration::from_secs(120);
    while count("servers") != SERVERS_LEFT {
        assert!(
            Instant::now() < deadline,
            "{} servers, {SERVERS_LEFT} expected: deleted ones are stuck",
            count("servers")
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let scheduled = || {
        cp.kubectl(&[
            "get",
            "servers",
            "-n",
            NS,
            "-o",
            r#"jsonpath={range .items[*]}{.status.conditions[?(@.type=="Scheduled")].status}{"\n"}{end}"#,
        ])
        .ok()
        .lines()
        .filter(|l| *l == "True")
        .count()
        .to_string()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while scheduled() != SERVERS_LEFT.to_string() {
        assert!(
            Instant::now() < deadline,
            "{} of {SERVERS_LEFT} servers placed:\n{}",
            scheduled(),
            operator.process.output()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Each server holds one Allocation (cluster-scoped, named after the server).
    let allocations = cp
        .kubectl(&[
            "get",
            "allocations",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}"#,
        ])
        .ok()
        .lines()
        .count();
    assert_eq!(allocations, SERVERS_LEFT);
    let used = || -> i64 {
        cp.kubectl(&[
            "get",
            "resourceproviders",
            "-o",
            r#"jsonpath={range .items[*]}{.status.usages.VCPU}{"\n"}{end}"#,
        ])
        .ok()
        .lines()
        .filter_map(|l| l.trim().parse::<i64>().ok())
        .sum()
    };
    // A pass writes its statuses concurrently: a server can show Scheduled a moment before
    // its host's usages do.
    let deadline = Instant::now() + Duration::from_secs(30);
    while used() != SERVERS_LEFT as i64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        used(),
        SERVERS_LEFT as i64,
        "VCPU counted over the providers"
    );

    // A fresh operator computes the same statuses: it writes none.
    idle(&operator, Duration::from_secs(3));
    assert!(
        operator.process.stop(Duration::from_secs(10)),
        "the operator did not stop on SIGTERM"
    );
    let before = statuses(&cp);
    let fresh = Operator::start(
        &cp,
        "kubeplace-faults-fresh",
        &["--leader-elect=false", "--headroom-interval=1"],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while fresh
        .metric("kubeplace_reconcile_pass_duration_seconds_count")
        .unwrap_or(0.0)
        < 1.0
    {
        assert!(Instant::now() < deadline, "the fresh operator made no pass");
        std::thread::sleep(Duration::from_millis(250));
    }
    let written = counter_sum(&fresh, "kubeplace_status_writes_total");
    let after = statuses(&cp);
    let differ: Vec<&String> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b != a)
        .map(|(b, _)| &b.0)
        .collect();
    assert_eq!(before.len(), after.len());
    assert!(differ.is_empty(), "a fresh start changed: {differ:?}");
    assert_eq!(written, 0.0, "a fresh start rewrote statuses");
    fresh.process.stop(Duration::from_secs(10));
    cp.shutdown();
}
