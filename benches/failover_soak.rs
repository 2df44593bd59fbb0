//! A soak of failover: two `kubeplace run` replicas on the real control plane of the
//! end-to-end tests (tests/support), under mixed Nova-like traffic, while the leader is
//! SIGKILLed every two minutes (and started again), kube-apiserver is restarted once (at a
//! third of the run) and etcd once (at two thirds).
//!
//! Traffic, all at once:
//! - four Placement clients, each sending to either replica's Placement API as a Service
//!   would (the other one when a replica does not answer): claims (`PUT /allocations`),
//!   candidate reads, moves to a migration record (`POST /allocations`) and deletes, retried
//!   as Nova's report client retries (`placement.concurrent_update`, four tries);
//! - one Placement client reshaping: a new compute's custom inventory with an allocation on
//!   it moved into a child provider (`POST /reshaper`);
//! - one client of the API server (kubectl's path) creating and deleting Allocations and
//!   Servers.
//!
//! It reports operations by kind and outcome; after each kill, how long writes waited
//! (p50/p99/max of the writes answered after it); at the end, once the writes are done,
//! oversubscribed providers (usage over capacity, read from the API server's objects; must
//! be 0), acknowledged writes lost or half made (a claim answered 204 that is not there, a
//! delete or move whose source still holds, a move whose target holds nothing, a reshape
//! not found whole; must be 0), open PlacementWrite records; and each replica's resident
//! memory and open file descriptors every 30 s.
//!
//! `cargo bench --bench failover_soak` runs one hour; `KUBEPLACE_SOAK_SECONDS` makes it
//! shorter (the kill interval stays two minutes unless `KUBEPLACE_SOAK_KILL_EVERY` says
//! otherwise, in seconds); `KUBEPLACE_SOAK_LOGS=DIR` keeps every replica's log there.
//! `KUBEPLACE_SOAK_HELD=N` holds the cloud at a steady size: each Placement client claims
//! only while it holds fewer than N consumers (as a cloud whose servers are deleted as fast
//! as they are made), so that memory after warm-up is read at a constant number of objects;
//! without it the consumers held grow through the run.

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kubeplace_api::Kind;
use serde_json::{Value, json};

const LEASE: &str = "kubeplace-soak";
const NS: &str = "soak";
/// The compute every claim goes to: large enough never to be full.
const HOST: &str = "soak-host";
const PLACEMENT_CLIENTS: usize = 4;
/// Between one client's operations.
const PACE: Duration = Duration::from_millis(40);

fn seconds_from_env(name: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

/// One replica slot: its ports and configuration name stay the same across restarts.
struct Replica {
    slot: usize,
    webhook_port: u16,
    metrics_port: u16,
    api_port: u16,
    process: Option<support::Process>,
    /// How many times it was started: each start logs to a file of its own.
    starts: u32,
}

impl Replica {
    fn new(slot: usize) -> Replica {
        Replica {
            slot,
            webhook_port: support::free_port(),
            metrics_port: support::free_port(),
            api_port: support::free_port(),
            process: None,
            starts: 0,
        }
    }

    fn config_name(&self) -> String {
        format!("kubeplace-soak-{}", self.slot)
    }

    fn start(&mut self, cp: &support::ControlPlane) {
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
            "--drain-seconds=0",
            &format!("--lease-name={LEASE}"),
            &format!("--webhook-config-name={}", self.config_name()),
            &format!("--webhook-addr=127.0.0.1:{}", self.webhook_port),
            &format!("--metrics-addr=127.0.0.1:{}", self.metrics_port),
            &format!("--placement-addr=127.0.0.1:{}", self.api_port),
        ]);
        self.starts += 1;
        self.process = Some(cp.spawn(
            cmd,
            &format!("kubeplace-soak-{}-{}", self.slot, self.starts),
        ));
        let ready = (0..240).any(|_| {
            std::thread::sleep(Duration::from_millis(250));
            self.get("/readyz").is_some_and(|r| r.contains(" 200 "))
        });
        assert!(ready, "replica {} never became ready", self.slot);
    }

    fn get(&self, path: &str) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.metrics_port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
        let mut reply = String::new();
        s.read_to_string(&mut reply).ok()?;
        Some(reply)
    }

    fn leading(&self) -> bool {
        self.get("/metrics")
            .is_some_and(|m| m.lines().any(|l| l.trim() == "kubeplace_leader 1"))
    }

    /// Resident memory (KiB) and open file descriptors.
    fn footprint(&self) -> Footprint {
        let pid = self.process.as_ref()?.pid;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let rss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
        Some((rss, fds))
    }
}

/// A replica's resident memory (KiB) and open file descriptors, when it runs.
type Footprint = Option<(u64, usize)>;

/// What the replicas hold, every 30 s: the consumers with an allocation the clients were
/// told is made, which replica leads, and each replica's footprint.
struct Sample {
    at: u64,
    held: usize,
    leader: Option<usize>,
    replicas: [Footprint; 2],
}

/// One operation as its client saw it.
#[derive(Clone)]
struct Op {
    kind: &'static str,
    sent: Instant,
    answered: Instant,
    outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Ok,
    /// Still refused as one to retry after the client's own retries.
    Retryable,
    /// Refused as if the cloud were full.
    NoRoom,
    /// Anything else, with the status and Placement's error code.
    Other(u16, String),
    /// No answer (connections refused on both replicas, or cut mid-answer): not known
    /// whether it was made.
    Unknown,
}

/// What the acknowledged writes should leave: per consumer, the VCPU it holds on HOST
/// (0 for none); consumers whose last write's outcome is unknown are left out.
#[derive(Default)]
struct Expected {
    consumers: BTreeMap<String, Option<u64>>,
    /// Reshaped computes: (root, child, consumer).
    reshaped: Vec<(String, String, String)>,
}

/// A Placement client that stays with one replica while it answers and goes to the other
/// when it does not, as a client's kept connection through a Service does.
struct Placement {
    ports: [u16; 2],
    token: String,
    /// The replica this client sends to.
    current: AtomicU64,
}

impl Placement {
    fn new(ports: [u16; 2], token: String, first: u64) -> Placement {
        Placement {
            ports,
            token,
            current: AtomicU64::new(first % 2),
        }
    }

    /// One request; `None` when neither replica answered it whole.
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, Value)> {
        let first = self.current.load(Ordering::Relaxed) as usize;
        for i in [first, 1 - first] {
            let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.ports[i])) else {
                continue;
            };
            self.current.store(i as u64, Ordering::Relaxed);
            s.set_read_timeout(Some(Duration::from_secs(30))).ok();
            let body = body.map(Value::to_string).unwrap_or_default();
            let sent = write!(
                s,
                "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nOpenStack-API-Version: placement 1.39\r\nX-Auth-Token: {}\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                self.token,
                body.len()
            );
            if sent.is_err() {
                continue;
            }
            let mut reply = String::new();
            if s.read_to_string(&mut reply).is_err() || reply.is_empty() {
                // Sent, and no whole answer: made or not, nobody can say.
                return None;
            }
            let status = reply
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let json = reply
                .split_once("\r\n\r\n")
                .and_then(|(_, b)| serde_json::from_str(b).ok())
                .unwrap_or(Value::Null);
            return Some((status, json));
        }
        None
    }

    /// A write, retried as Nova's report client retries: up to four tries on
    /// `placement.concurrent_update`, each after a short random pause.
    fn write(&self, method: &str, path: &str, body: &Value, ok: u16) -> Outcome {
        let mut outcome = Outcome::Unknown;
        for attempt in 0..4u64 {
            std::thread::sleep(Duration::from_millis(attempt * 300));
            outcome = match self.call(method, path, Some(body)) {
                None => return Outcome::Unknown,
                Some((s, _)) if s == ok => return Outcome::Ok,
                Some((s, v)) => classify(s, &v),
            };
            if outcome != Outcome::Retryable {
                return outcome;
            }
        }
        outcome
    }
}

fn classify(status: u16, answer: &Value) -> Outcome {
    let code = answer["errors"][0]["code"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let detail = answer["errors"][0]["detail"].as_str().unwrap_or("");
    match (status, code.as_str()) {
        (409, "placement.concurrent_update") | (429, _) | (503, _) => Outcome::Retryable,
        (409, _) if detail.contains("Unable to allocate") => Outcome::NoRoom,
        _ => Outcome::Other(status, code),
    }
}

fn uuid(prefix: u32, n: u64) -> String {
    format!("{prefix:08x}-0000-4000-8000-{n:012}")
}

/// A Placement client's loop: claims, reads, moves and deletes until `stop`.
fn placement_client(
    id: u32,
    api: Arc<Placement>,
    host: String,
    expected: Arc<Mutex<Expected>>,
    stop: Arc<AtomicBool>,
) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut mine: Vec<String> = Vec::new();
    let held_at_most = std::env::var("KUBEPLACE_SOAK_HELD")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let sent = Instant::now();
        let (kind, outcome) = match n % 8 {
            1 | 2 | 5 if mine.len() < held_at_most => {
                let consumer = uuid(0x50a00000 + id, n);
                let body = json!({"allocations": {&host: {"resources": {"VCPU": 1}}},
                    "project_id": "soak", "user_id": "soak",
                    "consumer_generation": null, "consumer_type": "INSTANCE"});
                let outcome = api.write("PUT", &format!("/allocations/{consumer}"), &body, 204);
                let mut e = expected.lock().unwrap();
                match outcome {
                    Outcome::Ok => {
                        e.consumers.insert(consumer.clone(), Some(1));
                        mine.push(consumer);
                    }
                    Outcome::Unknown => {
                        e.consumers.remove(&consumer);
                    }
                    _ => {
                        e.consumers.insert(consumer, None);
                    }
                }
                ("claim", outcome)
            }
            3 => {
                let outcome = match api.call(
                    "GET",
                    "/allocation_candidates?resources=VCPU:1&limit=10",
                    None,
                ) {
                    Some((200, v))
                        if v["allocation_requests"]
                            .as_array()
                            .is_some_and(|a| !a.is_empty()) =>
                    {
                        Outcome::Ok
                    }
                    Some((200, _)) => Outcome::NoRoom,
                    Some((s, v)) => classify(s, &v),
                    None => Outcome::Unknown,
                };
                ("candidates", outcome)
            }
            4 | 7 if !mine.is_empty() => {
                let source = mine.remove(0);
                let target = uuid(0x3e000000 + id, n);
                let outcome = move_to(&api, &host, &source, &target);
                let mut e = expected.lock().unwrap();
                match outcome {
                    Outcome::Ok => {
                        e.consumers.insert(source, Some(0));
                        e.consumers.insert(target.clone(), Some(1));
                        mine.push(target);
                    }
                    Outcome::Unknown => {
                        e.consumers.remove(&source);
                    }
                    _ => mine.push(source),
                }
                ("move", outcome)
            }
            0 | 6 if mine.len() > 4 => {
                let consumer = mine.remove(0);
                let outcome = api.write(
                    "DELETE",
                    &format!("/allocations/{consumer}"),
                    &Value::Null,
                    204,
                );
                let mut e = expected.lock().unwrap();
                match outcome {
                    Outcome::Ok => {
                        e.consumers.insert(consumer, Some(0));
                    }
                    Outcome::Unknown => {
                        e.consumers.remove(&consumer);
                    }
                    _ => mine.push(consumer),
                }
                ("delete", outcome)
            }
            _ => {
                std::thread::sleep(PACE);
                continue;
            }
        };
        ops.push(Op {
            kind,
            sent,
            answered: Instant::now(),
            outcome,
        });
        std::thread::sleep(PACE);
    }
    ops
}

/// Moves `source`'s allocations to `target` as Nova moves an instance's to its migration
/// record: read both generations, then one `POST /allocations`; retried from the read.
fn move_to(api: &Placement, host: &str, source: &str, target: &str) -> Outcome {
    let mut outcome = Outcome::Unknown;
    for attempt in 0..4u64 {
        std::thread::sleep(Duration::from_millis(attempt * 300));
        let Some((200, read)) = api.call("GET", &format!("/allocations/{source}"), None) else {
            return Outcome::Unknown;
        };
        let body = json!({
            source: {"allocations": {}, "project_id": "soak", "user_id": "soak",
                     "consumer_generation": read["consumer_generation"], "consumer_type": "INSTANCE"},
            target: {"allocations": {host: {"resources": {"VCPU": 1}}}, "project_id": "soak",
                     "user_id": "soak", "consumer_generation": null, "consumer_type": "MIGRATION"},
        });
        outcome = match api.call("POST", "/allocations", Some(&body)) {
            None => return Outcome::Unknown,
            Some((204, _)) => return Outcome::Ok,
            Some((s, v)) => classify(s, &v),
        };
        if outcome != Outcome::Retryable {
            return outcome;
        }
    }
    outcome
}

/// The reshaping client: each round a new compute with 4 CUSTOM_SOAK, one consumer of 1,
/// then the inventory and the allocation moved into a new child.
fn reshaper(api: Arc<Placement>, expected: Arc<Mutex<Expected>>, stop: Arc<AtomicBool>) -> Vec<Op> {
    let mut ops = Vec::new();
    let _ = api.write("PUT", "/resource_classes/CUSTOM_SOAK", &Value::Null, 201);
    let mut n = 0u64;
    let inventory = json!({"total": 4, "reserved": 0, "min_unit": 1, "max_unit": 4, "step_size": 1, "allocation_ratio": 1.0});
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let (root, child, consumer) = (
            uuid(0x7e000000, n),
            uuid(0x7c000000, n),
            uuid(0x7a000000, n),
        );
        let sent = Instant::now();
        // The compute, its inventory and a claim on it: each step done before the next.
        let setup = [
            (
                "POST",
                "/resource_providers".to_string(),
                json!({"name": format!("soak-reshape-{n}"), "uuid": root}),
                200,
            ),
            (
                "PUT",
                format!("/resource_providers/{root}/inventories"),
                json!({"resource_provider_generation": 0, "inventories": {"CUSTOM_SOAK": inventory}}),
                200,
            ),
            (
                "PUT",
                format!("/allocations/{consumer}"),
                json!({"allocations": {&root: {"resources": {"CUSTOM_SOAK": 1}}}, "project_id": "soak",
                    "user_id": "soak", "consumer_generation": null, "consumer_type": "INSTANCE"}),
                204,
            ),
            (
                "POST",
                "/resource_providers".to_string(),
                json!({"name": format!("soak-reshape-{n}-child"), "uuid": child, "parent_provider_uuid": root}),
                200,
            ),
        ];
        let mut failed = None;
        for (method, path, body, ok) in &setup {
            let outcome = api.write(method, path, body, *ok);
            if outcome != Outcome::Ok {
                failed = Some(outcome);
                break;
            }
        }
        let outcome = match failed {
            Some(o) => {
                ops.push(Op {
                    kind: "reshape setup",
                    sent,
                    answered: Instant::now(),
                    outcome: o,
                });
                std::thread::sleep(PACE);
                continue;
            }
            None => reshape(&api, &root, &child, &consumer, &inventory),
        };
        if outcome == Outcome::Ok {
            expected
                .lock()
                .unwrap()
                .reshaped
                .push((root, child, consumer));
        }
        ops.push(Op {
            kind: "reshape",
            sent,
            answered: Instant::now(),
            outcome,
        });
        std::thread::sleep(PACE * 5);
    }
    ops
}

fn reshape(api: &Placement, root: &str, child: &str, consumer: &str, inventory: &Value) -> Outcome {
    let mut outcome = Outcome::Unknown;
    for attempt in 0..4u64 {
        std::thread::sleep(Duration::from_millis(attempt * 300));
        let generation = |uuid: &str| {
            api.call("GET", &format!("/resource_providers/{uuid}"), None)
                .filter(|(s, _)| *s == 200)
                .map(|(_, v)| v["generation"].clone())
        };
        let (Some(g_root), Some(g_child)) = (generation(root), generation(child)) else {
            return Outcome::Unknown;
        };
        let Some((200, read)) = api.call("GET", &format!("/allocations/{consumer}"), None) else {
            return Outcome::Unknown;
        };
        let body = json!({
            "inventories": {
                root: {"resource_provider_generation": g_root, "inventories": {}},
                child: {"resource_provider_generation": g_child, "inventories": {"CUSTOM_SOAK": inventory}},
            },
            "allocations": {consumer: {"allocations": {child: {"resources": {"CUSTOM_SOAK": 1}}},
                "project_id": "soak", "user_id": "soak",
                "consumer_generation": read["consumer_generation"], "consumer_type": "INSTANCE"}},
        });
        outcome = match api.call("POST", "/reshaper", Some(&body)) {
            None => return Outcome::Unknown,
            Some((204, _)) => return Outcome::Ok,
            Some((s, v)) => classify(s, &v),
        };
        if outcome != Outcome::Retryable {
            return outcome;
        }
    }
    outcome
}

/// kubectl's path: Allocations and Servers created and deleted through the API server.
async fn through_api_server(client: kube::Client, stop: Arc<AtomicBool>) -> Vec<Op> {
    let allocations: Api<DynamicObject> =
        Api::all_with(client.clone(), &Kind::Allocation.api_resource());
    let servers: Api<DynamicObject> =
        Api::namespaced_with(client, NS, &Kind::Server.api_resource());
    let mut ops = Vec::new();
    let mut n = 0u64;
    let api_error = |e: kube::Error| match e {
        kube::Error::Api(s) if s.code == 409 || s.code == 429 => Outcome::Retryable,
        kube::Error::Api(s) if s.code == 403 && s.message.contains("Unable to allocate") => {
            Outcome::NoRoom
        }
        kube::Error::Api(s) => Outcome::Other(s.code, s.reason),
        _ => Outcome::Unknown,
    };
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let sent = Instant::now();
        let (kind, outcome) = if n % 2 == 0 {
            let name = format!("soak-k-{n}");
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "kubeplace.io/v1alpha1", "kind": "Allocation",
                "metadata": {"name": name, "labels": {"soak": "1"}},
                "spec": {"consumer": uuid(0x6b000000, n),
                         "allocations": [{"provider": HOST, "resources": {"VCPU": 1}}]}
            }))
            .unwrap();
            let outcome = allocations
                .create(&PostParams::default(), &object)
                .await
                .map_or_else(api_error, |_| Outcome::Ok);
            if n % 6 == 0 {
                let _ = allocations
                    .delete(&format!("soak-k-{}", n - 4), &DeleteParams::default())
                    .await;
            }
            ("kubectl Allocation", outcome)
        } else {
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "kubeplace.io/v1alpha1", "kind": "Server",
                "metadata": {"name": format!("soak-s-{n}"), "namespace": NS},
                "spec": {"flavor": "soak.small", "image": "soak-image"}
            }))
            .unwrap();
            let outcome = servers
                .create(&PostParams::default(), &object)
                .await
                .map_or_else(api_error, |_| Outcome::Ok);
            if n > 20 {
                let _ = servers
                    .delete(&format!("soak-s-{}", n - 20), &DeleteParams::default())
                    .await;
            }
            ("kubectl Server", outcome)
        };
        ops.push(Op {
            kind,
            sent,
            answered: Instant::now(),
            outcome,
        });
        tokio::time::sleep(PACE * 3).await;
    }
    ops
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

const CLOUD: &str = r#"
apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata: {name: soak-host}
spec:
  inventories:
    VCPU: {total: 1000000}
    MEMORY_MB: {total: 100000000}
---
apiVersion: kubeplace.io/v1alpha1
kind: Flavor
metadata: {name: soak.small}
spec: {vcpus: 1, memoryMb: 64}
---
apiVersion: kubeplace.io/v1alpha1
kind: Image
metadata: {name: soak-image}
spec: {properties: {os_distro: ubuntu}}
---
apiVersion: v1
kind: Namespace
metadata: {name: soak}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: soak, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: soak-placement}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: soak, namespace: default}]
"#;

fn main() {
    let length = seconds_from_env("KUBEPLACE_SOAK_SECONDS", 3600);
    let kill_every = seconds_from_env("KUBEPLACE_SOAK_KILL_EVERY", 120);
    let cp = support::ControlPlane::private();
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
    let mut replicas = [Replica::new(0), Replica::new(1)];
    for r in &mut replicas {
        r.start(&cp);
    }
    cp.kubectl_stdin(&["apply", "-f", "-"], CLOUD).ok();
    let token = cp
        .kubectl(&[
            "create",
            "token",
            "soak",
            "-n",
            "default",
            "--audience",
            "kubeplace-placement",
            "--duration=24h",
        ])
        .ok()
        .trim()
        .to_string();
    let host = (0..240)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(250));
            let out = cp.kubectl(&[
                "get",
                "resourceprovider",
                HOST,
                "-o",
                "jsonpath={.status.uuid}",
            ]);
            Some(out.stdout.trim().to_string()).filter(|u| !u.is_empty())
        })
        .expect("the host's uuid");

    let ports = [replicas[0].api_port, replicas[1].api_port];
    let expected = Arc::new(Mutex::new(Expected::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients: Vec<std::thread::JoinHandle<Vec<Op>>> = (0..PLACEMENT_CLIENTS as u32)
        .map(|id| {
            let api = Arc::new(Placement::new(ports, token.clone(), u64::from(id)));
            let (host, expected, stop) = (host.clone(), expected.clone(), stop.clone());
            std::thread::spawn(move || placement_client(id, api, host, expected, stop))
        })
        .collect();
    {
        let api = Arc::new(Placement::new(ports, token.clone(), 1));
        let (expected, stop) = (expected.clone(), stop.clone());
        clients.push(std::thread::spawn(move || reshaper(api, expected, stop)));
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let kubectl = runtime.spawn(through_api_server(
        cp.kube_client(runtime.handle()),
        stop.clone(),
    ));

    let started = Instant::now();
    let mut faults: Vec<(String, Instant)> = Vec::new();
    let mut footprints: Vec<Sample> = Vec::new();
    let (mut apiserver_restarted, mut etcd_restarted) = (false, false);
    let mut next_kill = started + kill_every;
    let mut next_sample = started;
    while started.elapsed() < length {
        let now = Instant::now();
        if now >= next_sample {
            let e = expected.lock().unwrap();
            let held = e.consumers.values().filter(|w| **w == Some(1)).count() + e.reshaped.len();
            drop(e);
            footprints.push(Sample {
                at: started.elapsed().as_secs(),
                held,
                leader: replicas.iter().position(Replica::leading),
                replicas: [replicas[0].footprint(), replicas[1].footprint()],
            });
            next_sample = now + Duration::from_secs(30);
        }
        // The restarts come halfway between two kills, so that each fault's cost is its own.
        if !apiserver_restarted
            && started.elapsed() >= length / 3
            && now + kill_every / 2 >= next_kill
            && now + kill_every / 2 < next_kill + Duration::from_secs(1)
        {
            eprintln!("soak: restarting kube-apiserver at {:?}", started.elapsed());
            faults.push(("kube-apiserver killed and started".into(), Instant::now()));
            cp.restart_apiserver(true);
            apiserver_restarted = true;
        }
        if !etcd_restarted
            && started.elapsed() >= length * 2 / 3
            && now + kill_every / 2 >= next_kill
            && now + kill_every / 2 < next_kill + Duration::from_secs(1)
        {
            eprintln!("soak: restarting etcd at {:?}", started.elapsed());
            faults.push(("etcd killed and started".into(), Instant::now()));
            cp.restart_etcd(true);
            etcd_restarted = true;
        }
        if now >= next_kill {
            if let Some(leader) = replicas.iter().position(Replica::leading) {
                // As a Service drops a dead pod's endpoint: its webhook configuration goes.
                cp.kubectl(&[
                    "delete",
                    "validatingwebhookconfiguration",
                    &replicas[leader].config_name(),
                ])
                .ok();
                std::thread::sleep(Duration::from_secs(1));
                eprintln!("soak: killing replica {leader} at {:?}", started.elapsed());
                faults.push((
                    format!("leader (replica {leader}) SIGKILLed"),
                    Instant::now(),
                ));
                if let Some(p) = replicas[leader].process.take() {
                    p.kill();
                }
                std::thread::sleep(Duration::from_secs(5));
                replicas[leader].start(&cp);
            }
            next_kill = Instant::now() + kill_every;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    let mut ops: Vec<Op> = clients
        .into_iter()
        .flat_map(|c| c.join().expect("a client"))
        .collect();
    ops.extend(runtime.block_on(kubectl).expect("the kubectl client"));
    // Let open writes finish and the replicas settle before the objects are read.
    std::thread::sleep(Duration::from_secs(20));

    println!(
        "## Failover soak: {:?}, a leader kill every {kill_every:?} ({} kills), kube-apiserver and etcd restarted once",
        length,
        faults
            .iter()
            .filter(|(f, _)| f.starts_with("leader"))
            .count()
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average at the end: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!();
    println!("| operation | outcome | count |");
    println!("|---|---|---|");
    let mut by: BTreeMap<(&str, String), usize> = BTreeMap::new();
    for op in &ops {
        *by.entry((op.kind, format!("{:?}", op.outcome)))
            .or_default() += 1;
    }
    for ((kind, outcome), count) in &by {
        println!("| {kind} | {outcome} | {count} |");
    }
    println!();
    println!(
        "| at minute | fault | writes on their way at the fault or sent in the 10 s after | p50 ms | p99 ms | max ms |"
    );
    println!("|---|---|---|---|---|---|");
    for (what, k) in &faults {
        let mut waits: Vec<Duration> = ops
            .iter()
            .filter(|o| {
                o.kind != "candidates" && o.answered >= *k && o.sent < *k + Duration::from_secs(10)
            })
            .map(|o| o.answered - o.sent)
            .collect();
        waits.sort();
        println!(
            "| {:.1} | {what} | {} | {:.0} | {:.0} | {:.0} |",
            k.duration_since(started).as_secs_f64() / 60.0,
            waits.len(),
            percentile(&waits, 0.5).as_secs_f64() * 1e3,
            percentile(&waits, 0.99).as_secs_f64() * 1e3,
            waits.last().copied().unwrap_or_default().as_secs_f64() * 1e3
        );
    }

    // What the API server holds now.
    let listed: Value =
        serde_json::from_str(cp.kubectl(&["get", "allocations", "-o", "json"]).ok())
            .unwrap_or(Value::Null);
    let providers: Value =
        serde_json::from_str(cp.kubectl(&["get", "resourceproviders", "-o", "json"]).ok())
            .unwrap_or(Value::Null);
    let mut held: BTreeMap<String, BTreeMap<(String, String), u64>> = BTreeMap::new();
    let mut used: BTreeMap<(String, String), u64> = BTreeMap::new();
    for a in listed["items"].as_array().into_iter().flatten() {
        let consumer = a["spec"]["consumer"].as_str().unwrap_or("").to_string();
        for part in a["spec"]["allocations"].as_array().into_iter().flatten() {
            let provider = part["provider"].as_str().unwrap_or("").to_string();
            for (class, amount) in part["resources"].as_object().into_iter().flatten() {
                let amount = amount.as_u64().unwrap_or(0);
                *held
                    .entry(consumer.clone())
                    .or_default()
                    .entry((provider.clone(), class.clone()))
                    .or_default() += amount;
                *used.entry((provider.clone(), class.clone())).or_default() += amount;
            }
        }
    }
    let mut uuid_of: BTreeMap<String, String> = BTreeMap::new();
    let mut oversubscribed = Vec::new();
    for p in providers["items"].as_array().into_iter().flatten() {
        let name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
        uuid_of.insert(
            p["status"]["uuid"].as_str().unwrap_or("").to_string(),
            name.clone(),
        );
        for (class, inv) in p["spec"]["inventories"].as_object().into_iter().flatten() {
            let total = inv["total"].as_f64().unwrap_or(0.0);
            let reserved = inv["reserved"].as_f64().unwrap_or(0.0);
            let ratio = inv["allocationRatio"].as_f64().unwrap_or(1.0);
            let capacity = ((total - reserved) * ratio) as u64;
            let usage = used
                .get(&(name.clone(), class.clone()))
                .copied()
                .unwrap_or(0);
            if usage > capacity {
                oversubscribed.push(format!("{name} {class}: {usage} of {capacity}"));
            }
        }
    }
    let expected = expected.lock().unwrap();
    let vcpu_on_host = |consumer: &str| -> u64 {
        held.get(consumer)
            .and_then(|h| h.get(&(HOST.to_string(), "VCPU".to_string())))
            .copied()
            .unwrap_or(0)
    };
    let mut lost = Vec::new();
    for (consumer, want) in &expected.consumers {
        if let Some(want) = want
            && vcpu_on_host(consumer) != *want
        {
            lost.push(format!(
                "{consumer}: holds {} VCPU, {want} acknowledged",
                vcpu_on_host(consumer)
            ));
        }
    }
    for (root, child, consumer) in &expected.reshaped {
        let on = held.get(consumer.as_str()).cloned().unwrap_or_default();
        let names: Vec<String> = on.keys().map(|(p, _)| p.clone()).collect();
        let child_name = uuid_of.get(child).cloned().unwrap_or_default();
        let root_name = uuid_of.get(root).cloned().unwrap_or_default();
        if names != vec![child_name.clone()] || root_name.is_empty() {
            lost.push(format!(
                "reshaped {consumer}: on {names:?}, not only on {child_name:?}"
            ));
        }
    }
    let open_writes = cp
        .kubectl(&["get", "placementwrites", "-o", "name"])
        .stdout
        .lines()
        .count();
    println!();
    println!(
        "oversubscribed providers: {} {oversubscribed:?}",
        oversubscribed.len()
    );
    println!(
        "acknowledged writes lost or half made: {} of {} consumers and {} reshapes checked {:?}",
        lost.len(),
        expected.consumers.values().filter(|w| w.is_some()).count(),
        expected.reshaped.len(),
        lost.iter().take(5).collect::<Vec<_>>()
    );
    println!("open PlacementWrite records: {open_writes}");
    println!();
    println!(
        "| minute | consumers held | replica 0 RSS MiB | fds | replica 1 RSS MiB | fds | leader KiB per 1,000 held |"
    );
    println!("|---|---|---|---|---|---|---|");
    for s in footprints.iter().step_by(2) {
        let cell = |i: usize| match &s.replicas[i] {
            Some((rss, fds)) => {
                let mark = if s.leader == Some(i) { " (leader)" } else { "" };
                (
                    format!("{:.0}{mark}", *rss as f64 / 1024.0),
                    fds.to_string(),
                )
            }
            None => ("—".into(), "—".into()),
        };
        // The leader keeps the ledger and the kept answers: its memory over what it holds
        // says whether memory grows with the objects or with time.
        let per = match s.leader.and_then(|l| s.replicas[l]) {
            Some((rss, _)) if s.held > 0 => format!("{:.0}", rss as f64 * 1000.0 / s.held as f64),
            _ => "—".into(),
        };
        let (a, b) = (cell(0), cell(1));
        println!(
            "| {} | {} | {} | {} | {} | {} | {per} |",
            s.at / 60,
            s.held,
            a.0,
            a.1,
            b.0,
            b.1
        );
    }
    for r in &mut replicas {
        if let Some(p) = r.process.take() {
            p.stop(Duration::from_secs(10));
        }
    }
    // The replicas' logs, kept where KUBEPLACE_SOAK_LOGS says.
    if let Some(keep) = std::env::var_os("KUBEPLACE_SOAK_LOGS") {
        let keep = std::path::PathBuf::from(keep);
        std::fs::create_dir_all(&keep).ok();
        for entry in std::fs::read_dir(&cp.dir).into_iter().flatten().flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with("kubeplace-soak-") {
                std::fs::copy(entry.path(), keep.join(&name)).ok();
            }
        }
    }
    cp.shutdown();
}
