//! Claims per second and claim latency through the one decision point, in a cluster: the
//! real control plane of the end-to-end tests (tests/support), `kubeplace run` with leader
//! election and the Placement API, and claims made two ways:
//! - Allocations created through the API server (the path of `kubectl create`: the API
//!   server, the admission webhook's decision at the leader, etcd);
//! - `PUT /allocations/{consumer}` on the Placement API (the API's checks, then the same
//!   Allocation write).
//!
//! Each way: one client in sequence (latency p50/p99) and 8 clients at once (claims/s).
//! Run with `cargo bench --bench cluster_claims`; it prints a table.

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, PostParams};
use kubeplace_api::Kind;
use serde_json::{Value, json};

const SEQUENTIAL: usize = 200;
const CLIENTS: usize = 8;
const CONCURRENT: usize = 400;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn http(port: u16, method: &str, path: &str, token: &str, body: &Value) -> u16 {
    let body = body.to_string();
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("the API listens");
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nOpenStack-API-Version: placement 1.39\r\nX-Auth-Token: {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("request sent");
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok();
    reply
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn allocation(name: &str, consumer: &str, provider: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kubeplace.io/v1alpha1",
        "kind": "Allocation",
        "metadata": {"name": name},
        "spec": {"consumer": consumer,
                 "allocations": [{"provider": provider, "resources": {"VCPU": 1}}]}
    }))
    .expect("an Allocation")
}

/// Runs `claim(i)` for `n` claims from `clients` threads; the latencies and the wall time.
fn drive(
    n: usize,
    clients: usize,
    claim: Arc<dyn Fn(usize) -> bool + Send + Sync>,
) -> (Vec<Duration>, Duration, usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let next = next.clone();
            let failed = failed.clone();
            let claim = claim.clone();
            std::thread::spawn(move || {
                let mut lat = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return lat;
                    }
                    let t = Instant::now();
                    if !claim(i) {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    lat.push(t.elapsed());
                }
            })
        })
        .collect();
    let mut all: Vec<Duration> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("a client"))
        .collect();
    let wall = started.elapsed();
    all.sort();
    (all, wall, failed.load(Ordering::Relaxed))
}

fn row(what: &str, clients: usize, (lat, wall, failed): (Vec<Duration>, Duration, usize)) {
    println!(
        "| {what} | {clients} | {} | {:.0} | {:.1} | {:.1} | {failed} |",
        lat.len(),
        lat.len() as f64 / wall.as_secs_f64(),
        percentile(&lat, 0.5).as_secs_f64() * 1e3,
        percentile(&lat, 0.99).as_secs_f64() * 1e3,
    );
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let cp = support::cluster();
    cp.kubectl(&["apply", "-f", "crds/"]).ok();
    cp.kubectl(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=60s",
        "crd/allocations.kubeplace.io",
        "crd/resourceproviders.kubeplace.io",
    ])
    .ok();
    let webhook_port = support::free_port();
    let metrics_port = support::free_port();
    let api_port = support::free_port();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"));
    cmd.args([
        "run",
        "--kubeconfig",
        cp.kubeconfig.to_str().expect("a path"),
        "--self-signed",
        "--webhook-host",
        "127.0.0.1",
        "--namespace",
        "default",
        &format!("--webhook-addr=127.0.0.1:{webhook_port}"),
        &format!("--metrics-addr=127.0.0.1:{metrics_port}"),
        &format!("--placement-addr=127.0.0.1:{api_port}"),
    ]);
    let operator = cp.spawn(cmd, "kubeplace-bench");
    let deciding = (0..240).any(|_| {
        std::thread::sleep(Duration::from_millis(500));
        operator.output().contains("deciding claims")
    });
    assert!(
        deciding,
        "the operator never decided claims:\n{}",
        operator.output()
    );
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: bench-host\nspec:\n  inventories:\n    VCPU: {total: 100000}\n",
    )
    .ok();
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: bench, namespace: default}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: bench-placement}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: ServiceAccount, name: bench, namespace: default}]\n",
    )
    .ok();
    let token = cp
        .kubectl(&[
            "create",
            "token",
            "bench",
            "-n",
            "default",
            "--audience",
            "kubeplace-placement",
        ])
        .ok()
        .trim()
        .to_string();
    let uuid = (0..120)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(250));
            let out = cp.kubectl(&[
                "get",
                "resourceprovider",
                "bench-host",
                "-o",
                "jsonpath={.status.uuid}",
            ]);
            Some(out.stdout.trim().to_string()).filter(|u| !u.is_empty())
        })
        .expect("the host's uuid");

    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let client = cp.kube_client(runtime.handle());
    let handle = runtime.handle().clone();
    let api: Api<DynamicObject> = Api::all_with(client, &Kind::Allocation.api_resource());
    let through_api_server = |offset: usize| -> Arc<dyn Fn(usize) -> bool + Send + Sync> {
        let api = api.clone();
        let handle = handle.clone();
        Arc::new(move |i| {
            let n = offset + i;
            let object = allocation(
                &format!("bench-{n}"),
                &format!("88888888-8888-4888-8888-{n:012}"),
                "bench-host",
            );
            handle
                .block_on(api.create(&PostParams::default(), &object))
                .is_ok()
        })
    };
    let through_placement = |offset: usize| -> Arc<dyn Fn(usize) -> bool + Send + Sync> {
        let token = token.clone();
        let uuid = uuid.clone();
        Arc::new(move |i| {
            let n = offset + i;
            let body = json!({"allocations": {&uuid: {"resources": {"VCPU": 1}}},
                              "project_id": "p", "user_id": "u",
                              "consumer_generation": null, "consumer_type": "INSTANCE"});
            http(
                api_port,
                "PUT",
                &format!("/allocations/99999999-9999-4999-8999-{n:012}"),
                &token,
                &body,
            ) == 204
        })
    };
    // Warm both paths (connections, the review cache of the token).
    drive(20, 1, through_api_server(900_000));
    drive(20, 1, through_placement(900_000));

    println!("| claims through | clients | claims | claims/s | p50 ms | p99 ms | failed |");
    println!("|---|---|---|---|---|---|---|");
    row(
        "API server + webhook (kubectl's path)",
        1,
        drive(SEQUENTIAL, 1, through_api_server(0)),
    );
    row(
        "API server + webhook (kubectl's path)",
        CLIENTS,
        drive(CONCURRENT, CLIENTS, through_api_server(100_000)),
    );
    row(
        "Placement API PUT /allocations",
        1,
        drive(SEQUENTIAL, 1, through_placement(0)),
    );
    row(
        "Placement API PUT /allocations",
        CLIENTS,
        drive(CONCURRENT, CLIENTS, through_placement(100_000)),
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\n{} cores; load average at the end: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    operator.kill();
}
