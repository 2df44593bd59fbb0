//! Placement's REST API served by `kubeplace run` over the real control plane, timed side by
//! side with real Placement 16 and `kubeplace placement serve` of the same cloud.
//!
//! Creates the 10k-tree cloud (that of benches/placement-vs-real.py: 45,010
//! ResourceProviders) through the API server with no operator running, starts
//! `kubeplace run --placement-addr` on it (no leader election), waits until its Placement API
//! lists every provider and the operator has written every status and heard nothing for
//! [`SETTLED`], then runs `benches/placement-api-vs-real.py --queries-only --kubeplace-url …`
//! with a reader's token: each query is timed on Placement, on `kubeplace placement serve`
//! and on the operator, with the same client, and the operator's answers are checked
//! against `placement serve`'s. Reads over a cluster are served from the operator's watched
//! store; each request's token is checked with a TokenReview and SubjectAccessReview (the
//! answer is kept for a while, so a timed run does not wait on the API server).
//!
//! Run with `cargo bench --bench placement_api_cluster`; `KUBEPLACE_BENCH_TREES=N` sets the
//! number of trees, `PLACEMENT_VENV` and `KUBEPLACE_BENCH_PLACEMENT_STATE` (a directory for
//! Placement's loaded database, reused across runs) are passed on to the script.
//! `KUBEPLACE_BENCH_CPUS_APART=1` passes it `--cpus-apart` (its client on the first CPU, the
//! servers it starts on the others) and moves every thread of the operator onto those others
//! before the timing; the control plane's processes stay where they are.

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

#[path = "cluster/mod.rs"]
#[allow(dead_code)]
mod cluster;

use std::process::Command;
use std::time::{Duration, Instant};

use cluster::{counter, create_all, http_get, loadavg, memory_mib, tree_cloud};

/// Compute-node trees of the cloud (`KUBEPLACE_BENCH_TREES` overrides).
const TREES: usize = 10_000;

/// How long the operator must have written nothing and heard nothing before the timing.
const SETTLED: Duration = Duration::from_secs(5);

/// A service account that may read through the Placement API.
const READER: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: placement-bench-reader, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: placement-bench-reader}
rules:
- apiGroups: [kubeplace.io]
  resources: [placement]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: placement-bench-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: placement-bench-reader}
subjects: [{kind: ServiceAccount, name: placement-bench-reader, namespace: default}]
"#;

/// How many providers the Placement API on `port` lists, or `None` while it does not answer.
fn providers_listed(port: u16, token: &str) -> Option<usize> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    write!(
        s,
        "GET /resource_providers HTTP/1.0\r\nHost: 127.0.0.1\r\nX-Auth-Token: {token}\r\n\
         OpenStack-API-Version: placement 1.14\r\n\r\n"
    )
    .ok()?;
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).ok()?;
    let at = reply.windows(4).position(|w| w == b"\r\n\r\n")?;
    let body: serde_json::Value = serde_json::from_slice(&reply[at + 4..]).ok()?;
    Some(body["resource_providers"].as_array()?.len())
}

fn main() {
    let trees = std::env::var("KUBEPLACE_BENCH_TREES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(TREES);
    let cp = support::cluster();
    cp.kubectl(&["apply", "-f", "crds/"]).ok();
    cp.kubectl(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=60s",
        "crd",
        "--all",
    ])
    .ok();
    cp.kubectl_stdin(&["apply", "-f", "-"], READER).ok();
    let token = cp
        .kubectl(&[
            "create",
            "token",
            "placement-bench-reader",
            "--audience",
            "kubeplace-placement",
            "--duration=2h",
        ])
        .ok()
        .trim()
        .to_string();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let docs = tree_cloud(trees);
    let providers = docs.len();
    let started = Instant::now();
    let failed = runtime.block_on(create_all(cp.kube_client(runtime.handle()), docs));
    assert_eq!(failed, 0, "{failed} providers could not be created");
    println!(
        "{trees} trees: {providers} ResourceProviders created through the API server in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let placement_port = support::free_port();
    let metrics_port = support::free_port();
    let webhook_port = support::free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubeplace"));
    cmd.args([
        "run",
        "--kubeconfig",
        cp.kubeconfig.to_str().expect("a path"),
        "--self-signed",
        "--webhook-host",
        "127.0.0.1",
        "--webhook-config-name",
        "kubeplace-placement-bench",
        "--namespace",
        "default",
        "--leader-elect=false",
        "--drain-seconds=0",
        &format!("--webhook-addr=127.0.0.1:{webhook_port}"),
        &format!("--metrics-addr=127.0.0.1:{metrics_port}"),
        &format!("--placement-addr=127.0.0.1:{placement_port}"),
    ]);
    let operator = cp.spawn(cmd, "kubeplace-placement-bench");
    let started = Instant::now();
    let listed = (0..2400).any(|_| {
        let all = providers_listed(placement_port, &token) == Some(providers);
        if !all {
            std::thread::sleep(Duration::from_millis(250));
        }
        all
    });
    assert!(
        listed,
        "the Placement API never listed {providers} providers:\n{}",
        operator.output()
    );
    println!(
        "the operator's Placement API lists all {providers} after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Its statuses written (each comes back as a watch event) and nothing else arriving.
    let progress = || {
        (
            counter(metrics_port, "kubeplace_status_writes_total"),
            counter(metrics_port, "kubeplace_watch_events_total"),
        )
    };
    let mut last = progress();
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < SETTLED || http_get(metrics_port, "/readyz").is_none() {
        std::thread::sleep(Duration::from_millis(500));
        let now = progress();
        if now != last {
            last = now;
            quiet_since = Instant::now();
        }
    }
    let (rss, peak) = memory_mib(operator.pid);
    println!(
        "settled {:.1} s after the start ({:.0} status writes); the operator: {rss:.0} MiB \
         resident, {peak:.0} MiB at its peak; load average {}",
        started.elapsed().as_secs_f64(),
        last.0,
        loadavg()
    );

    let mut bench = Command::new("python3");
    bench
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/benches/placement-api-vs-real.py"
        ))
        .args(["--trees", &trees.to_string(), "--queries-only"])
        .args(["--kubeplace", env!("CARGO_BIN_EXE_kubeplace")])
        .args([
            "--kubeplace-url",
            &format!("http://127.0.0.1:{placement_port}"),
        ])
        .args(["--token", &token]);
    if let Ok(dir) = std::env::var("KUBEPLACE_BENCH_PLACEMENT_STATE") {
        bench.args(["--state-dir", &dir]);
    }
    if std::env::var("KUBEPLACE_BENCH_CPUS_APART").is_ok_and(|v| v == "1") {
        bench.arg("--cpus-apart");
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let moved = Command::new("taskset")
            .args(["-a", "-p", "-c", &format!("1-{}", cpus - 1)])
            .arg(operator.pid.to_string())
            .status()
            .expect("taskset runs");
        assert!(moved.success(), "taskset could not move the operator");
    }
    let passes = counter(metrics_port, "kubeplace_reconciles_total");
    let status = bench.status().expect("python3 runs the bench");
    let (rss, peak) = memory_mib(operator.pid);
    println!("the operator after the queries: {rss:.0} MiB resident, {peak:.0} MiB at its peak");
    // A pass over every status (the periodic one) during the timing shares the two cores
    // and the store with the API, and is said so.
    println!(
        "objects reconciled by the operator while the queries were timed: {}",
        counter(metrics_port, "kubeplace_reconciles_total") - passes
    );
    operator.kill();
    assert!(status.success(), "benches/placement-api-vs-real.py failed");
}
