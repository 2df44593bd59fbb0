//! The admission webhook under load, on loopback: `kubeplace run` against the real control
//! plane of the end-to-end tests (tests/support), its webhook registered with a self-signed
//! CA, and AdmissionReviews POSTed straight to its HTTPS port as kube-apiserver sends them,
//! over TLS checked against the CA the operator registered.
//!
//! The load is open-loop: request `i` of a run at `r` requests/s is due at `i / r` seconds
//! after the start and is sent then, whether or not earlier ones were answered (on an idle
//! keep-alive connection, or a new one when none is idle). A request's latency runs from the
//! moment it was due to the end of its answer, so time spent queued behind slow answers is
//! counted. Each rate runs for [`SECONDS`] seconds.
//!
//! The requests cycle through [`fixtures`]: Flavor creates and an update (extra specs
//! validated, one against the operator's ExtraSpecDefinitions), Server creates (flavor, image
//! and service-profile metadata checked), a ResourceProvider update (inventories checked
//! against the provider's usages) and an Allocation create with `dryRun: true` (the claim
//! is decided against capacity but not held, as for `kubectl create --dry-run=server`).
//! Every one is allowed: a denial is reviewed again 250 ms later (the store may lag the
//! API server), which would measure that wait rather than the webhook.
//!
//! Two stores: the example cloud (examples/cloud/), then the example cloud plus a cloud of
//! [`TREES`] compute-node trees (those of benches/placement-vs-real.py: two NUMA cells and
//! one or two SR-IOV functions each, ten sharing disk pools; 4.5 providers a tree). The trees
//! are created through the API server with the operator stopped and its webhook
//! unregistered, so admission does not pace the bulk load; the operator is then started
//! again, lists them, and writes their statuses. One run at 500 requests/s is made while it
//! writes them; the others once it has computed, written and been told of nothing for
//! [`SETTLED`]. Then one trait is taken from one compute node through the API server, and
//! the bench times until the Flavors requiring it show fewer candidates (see
//! [`trait_change`]); the change starts a headroom round, and the rates are run again while
//! it counts. The operator's logs are kept under `$CARGO_TARGET_TMPDIR/webhook_load/`.
//!
//! With the trees come [`FLAVORS`] Flavors and [`SERVERS`] Servers (created the same way, so
//! the operator places every Server when it starts); after the statuses settle it prints the
//! writes per object and the operator's resident and peak memory.
//!
//! With `KUBEPLACE_BENCH_APPLY=live` the trees, Flavors and Servers are instead created
//! as a user applies a cloud: the operator running, its webhook reviewing every create;
//! the bench then reports how long after the last create was answered every status had
//! settled (the headroom round after it included), the status writes per object created,
//! and the operator's memory.
//!
//! Run with `cargo bench --bench webhook_load`; `KUBEPLACE_BENCH_TREES=N` sets the number of
//! trees, `KUBEPLACE_BENCH_FLAVORS=N` and `KUBEPLACE_BENCH_SERVERS=N` the Flavors and Servers,
//! `KUBEPLACE_BENCH_STATUS_WRITES=N` the operator's `--status-writes-in-flight` (32).
//! It prints markdown tables.

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

#[path = "cluster/mod.rs"]
mod cluster;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cluster::{
    CREATE_CONCURRENCY, counter, create_all, http_get, loadavg, memory_mib, object, tree_cloud,
};
use futures::StreamExt;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use kube::api::{Api, DynamicObject};
use kubeplace_api::Kind;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::net::TcpStream as AsyncTcpStream;
use tokio::sync::Semaphore;
use tokio_rustls::TlsConnector;

/// Requests per second of each run.
const RATES: [u64; 3] = [100, 500, 2000];
/// How long each rate runs.
const SECONDS: u64 = 10;
/// Compute-node trees of the large cloud (`KUBEPLACE_BENCH_TREES` overrides).
const TREES: usize = 10_000;
/// Flavors and Servers created with the trees (`KUBEPLACE_BENCH_FLAVORS`,
/// `KUBEPLACE_BENCH_SERVERS` override).
const FLAVORS: usize = 1_000;
const SERVERS: usize = 1_000;
/// A request not answered in this long counts as an error (the webhook configuration gives
/// the API server 10 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections the generator keeps open at most; a request waits for one beyond that.
const MAX_CONNECTIONS: usize = 256;
/// How long the operator must have written no status before the load starts.
const SETTLED: Duration = Duration::from_secs(5);
/// The ValidatingWebhookConfiguration the operator registers.
const WEBHOOK_CONFIG: &str = "kubeplace-bench";

/// One kind of request in the mix: the path, and the AdmissionReview's request without
/// its uid (serialized once; each request adds its own uid in front).
struct Fixture {
    what: &'static str,
    plural: &'static str,
    request_tail: String,
}

fn fixture(
    what: &'static str,
    op: &str,
    object: Value,
    old: Option<Value>,
    dry_run: bool,
) -> Fixture {
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let plural = Kind::from_name(&kind).expect("a kubeplace kind").plural();
    let namespace = object["metadata"]["namespace"].clone();
    let resource = json!({"group": "kubeplace.io", "version": "v1alpha1", "resource": plural});
    let gvk = json!({"group": "kubeplace.io", "version": "v1alpha1", "kind": kind});
    let mut request = json!({
        "kind": gvk, "resource": resource, "requestKind": gvk, "requestResource": resource,
        "name": object["metadata"]["name"], "operation": op,
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": object, "oldObject": old.unwrap_or(Value::Null),
        "dryRun": dry_run, "options": null,
    });
    if !namespace.is_null() {
        request["namespace"] = namespace;
    }
    let text = request.to_string();
    Fixture {
        what,
        plural,
        request_tail: text[1..].to_string(),
    }
}

impl Fixture {
    fn body(&self, uid: &str) -> Bytes {
        Bytes::from(format!(
            "{{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{{\"uid\":\"{uid}\",{}}}",
            self.request_tail
        ))
    }
}

/// The mix, every one allowed against the example cloud (with or without the trees).
fn fixtures() -> Vec<Fixture> {
    let cn1 = json!({
        "uuid": "c0a80001-0000-4000-8000-000000000001",
        "inventories": {"DISK_GB": {"total": 1000, "reserved": 50}},
        "traits": ["COMPUTE_NODE", "HW_CPU_X86_AVX2", "HW_CPU_X86_AVX512F",
                   "HW_CPU_HYPERTHREADING", "COMPUTE_VOLUME_MULTI_ATTACH"],
        "aggregates": ["6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a01"],
    });
    let mut cn1_more_disk = cn1.clone();
    cn1_more_disk["inventories"]["DISK_GB"]["total"] = json!(1200);
    let sriov = json!({
        "vcpus": 4, "memoryMb": 8192, "diskGb": 20,
        "extraSpecs": {"hw:cpu_policy": "dedicated",
                       "resources1:SRIOV_NET_VF": "1", "trait1:CUSTOM_PHYSNET_DATA": "required",
                       "resources2:SRIOV_NET_VF": "1", "trait2:CUSTOM_PHYSNET_DATA": "required",
                       "group_policy": "isolate"},
    });
    let mut sriov_more_memory = sriov.clone();
    sriov_more_memory["memoryMb"] = json!(16384);
    let mut web = object(
        "Server",
        "web-9",
        json!({"flavor": "m1.small", "image": "ubuntu-24.04"}),
    );
    web["metadata"]["namespace"] = json!("shop");
    let mut lb = object(
        "Server",
        "lb-9",
        json!({"flavor": "lb.ddos", "image": "ubuntu-24.04",
               "flavorMeta": {"whitelist": "1.2.3.4, 8.8.8.8"}}),
    );
    lb["metadata"]["namespace"] = json!("shop");
    vec![
        fixture(
            "Flavor create (traits)",
            "CREATE",
            object(
                "Flavor",
                "c2.avx2",
                json!({"vcpus": 8, "memoryMb": 16384, "diskGb": 40,
                       "extraSpecs": {"trait:HW_CPU_X86_AVX2": "required",
                                      "trait:CUSTOM_GOLD": "forbidden",
                                      "hw:mem_page_size": "large", "hw:numa_nodes": "1"}}),
            ),
            None,
            false,
        ),
        fixture(
            "Flavor create (operator's definitions)",
            "CREATE",
            object(
                "Flavor",
                "r2.cache",
                json!({"vcpus": 2, "memoryMb": 4096, "diskGb": 20,
                       "extraSpecs": {"resources:CUSTOM_LLC": "4", "acme:cache_ways": "4"}}),
            ),
            None,
            false,
        ),
        fixture(
            "Flavor update",
            "UPDATE",
            object("Flavor", "n1.sriov-pinned", sriov_more_memory),
            Some(object("Flavor", "n1.sriov-pinned", sriov)),
            false,
        ),
        fixture("Server create", "CREATE", web, None, false),
        fixture("Server create (service profile)", "CREATE", lb, None, false),
        fixture(
            "ResourceProvider update",
            "UPDATE",
            object("ResourceProvider", "cn1", cn1_more_disk),
            Some(object("ResourceProvider", "cn1", cn1)),
            false,
        ),
        fixture(
            "Allocation create, dry run",
            "CREATE",
            object(
                "Allocation",
                "bench-claim",
                json!({"consumer": "77777777-7777-4777-8777-777777777777",
                       "allocations": [{"provider": "cn1-numa0",
                                        "resources": {"VCPU": 1, "MEMORY_MB": 512}}]}),
            ),
            None,
            true,
        ),
    ]
}

/// HTTPS connections to the webhook, kept alive and reused as the API server does.
struct Pool {
    port: u16,
    connector: TlsConnector,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
    slots: Semaphore,
    opened: std::sync::atomic::AtomicUsize,
}

impl Pool {
    fn new(port: u16, ca_pem: &[u8]) -> Pool {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            roots.add(cert.expect("a PEM certificate")).expect("a CA");
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        Pool {
            port,
            connector: TlsConnector::from(Arc::new(config)),
            idle: Mutex::new(Vec::new()),
            slots: Semaphore::new(MAX_CONNECTIONS),
            opened: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, String> {
        let tcp = AsyncTcpStream::connect(("127.0.0.1", self.port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        tcp.set_nodelay(true).ok();
        let name = ServerName::try_from("127.0.0.1").expect("a server name");
        let tls = self
            .connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| format!("HTTP handshake: {e}"))?;
        tokio::spawn(conn);
        self.opened
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(sender)
    }

    /// POSTs `body` to `path`; the status and the body of the answer.
    async fn post(&self, path: &str, body: Bytes) -> Result<(StatusCode, Bytes), String> {
        let _slot = self.slots.acquire().await.map_err(|e| e.to_string())?;
        let reused = self.idle.lock().expect("pool").pop();
        let mut sender = match reused {
            Some(mut s) => match s.ready().await {
                Ok(()) => s,
                // The webhook closed it: a new one.
                Err(_) => self.connect().await?,
            },
            None => self.connect().await?,
        };
        let request = Request::post(path)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        self.idle.lock().expect("pool").push(sender);
        Ok((status, body))
    }
}

/// How one request ended.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Outcome {
    Allowed,
    NotAllowed,
    BadStatus,
    Failed,
    TimedOut,
}

/// Sends one review and judges the answer: 200, the uid echoed, allowed.
async fn one(
    pool: Arc<Pool>,
    fixture: Arc<Vec<Fixture>>,
    i: usize,
    due: tokio::time::Instant,
) -> (usize, Duration, Outcome) {
    let f = &fixture[i % fixture.len()];
    let uid = format!("bench-{i:08}");
    let path = format!("/validate/{}", f.plural);
    let sent = pool.post(&path, f.body(&uid));
    let outcome = match tokio::time::timeout_at(due + REQUEST_TIMEOUT, sent).await {
        Err(_) => Outcome::TimedOut,
        Ok(Err(_)) => Outcome::Failed,
        Ok(Ok((status, _))) if status != StatusCode::OK => Outcome::BadStatus,
        Ok(Ok((_, body))) => {
            let review: Value = serde_json::from_slice(&body).unwrap_or_default();
            let response = &review["response"];
            if response["uid"] == uid.as_str() && response["allowed"] == true {
                Outcome::Allowed
            } else {
                Outcome::NotAllowed
            }
        }
    };
    (i % fixture.len(), due.elapsed(), outcome)
}

/// One run's results.
struct Run {
    rate: u64,
    sent: usize,
    latencies: Vec<Duration>,
    by_fixture: Vec<Vec<Duration>>,
    errors: BTreeMap<Outcome, usize>,
    wall: Duration,
    /// The webhook's own mean time per review (its admission_duration_seconds histogram):
    /// from the body read to the answer built, without TLS, HTTP or queueing.
    own_mean: Duration,
}

/// Sends `rate` requests a second for `seconds`, each when it is due.
async fn drive(pool: Arc<Pool>, fixtures: Arc<Vec<Fixture>>, rate: u64, seconds: u64) -> Run {
    let n = (rate * seconds) as usize;
    let start = tokio::time::Instant::now() + Duration::from_millis(20);
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let due = start + Duration::from_nanos(i as u64 * 1_000_000_000 / rate);
        tokio::time::sleep_until(due).await;
        tasks.push(tokio::spawn(one(pool.clone(), fixtures.clone(), i, due)));
    }
    let mut run = Run {
        rate,
        sent: n,
        latencies: Vec::with_capacity(n),
        by_fixture: vec![Vec::new(); fixtures.len()],
        errors: BTreeMap::new(),
        wall: Duration::ZERO,
        own_mean: Duration::ZERO,
    };
    for task in tasks {
        let (f, latency, outcome) = task.await.expect("a request task");
        if outcome == Outcome::Allowed {
            run.latencies.push(latency);
            run.by_fixture[f].push(latency);
        } else {
            *run.errors.entry(outcome).or_default() += 1;
        }
    }
    run.wall = start.elapsed();
    run.latencies.sort();
    for l in &mut run.by_fixture {
        l.sort();
    }
    run
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

fn print_runs(cloud: &str, runs: &[Run], fixtures: &[Fixture]) {
    println!(
        "\n| store | rate (req/s) | sent | answered, allowed | errors | p50 ms | p99 ms | max ms | achieved (req/s) | webhook's own mean ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in runs {
        let errors: usize = r.errors.values().sum();
        let detail = if errors == 0 {
            "0".to_string()
        } else {
            format!("{errors} ({:?})", r.errors)
        };
        println!(
            "| {cloud} | {} | {} | {} | {detail} | {} | {} | {} | {:.0} | {:.3} |",
            r.rate,
            r.sent,
            r.latencies.len(),
            ms(percentile(&r.latencies, 0.5)),
            ms(percentile(&r.latencies, 0.99)),
            ms(r.latencies.last().copied().unwrap_or_default()),
            r.latencies.len() as f64 / r.wall.as_secs_f64(),
            r.own_mean.as_secs_f64() * 1e3,
        );
    }
    let rates = runs
        .iter()
        .map(|r| r.rate.to_string())
        .collect::<Vec<_>>()
        .join(" / ");
    println!("\n| store | request | p50 ms at {rates} req/s | p99 ms at {rates} req/s |");
    println!("|---|---|---|---|");
    for (i, f) in fixtures.iter().enumerate() {
        let at = |p: f64| {
            runs.iter()
                .map(|r| ms(percentile(&r.by_fixture[i], p)))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        println!("| {cloud} | {} | {} | {} |", f.what, at(0.5), at(0.99));
    }
}

/// A running `kubeplace run` and its ports.
/// Status writes the operator keeps in flight (`KUBEPLACE_BENCH_STATUS_WRITES`, default 32).
fn status_writes_in_flight() -> u16 {
    std::env::var("KUBEPLACE_BENCH_STATUS_WRITES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32)
}

struct Operator {
    process: support::Process,
    webhook_port: u16,
    metrics_port: u16,
}

impl Operator {
    /// Keeps its log (the control plane's directory is removed at exit) where cargo keeps
    /// files of benches, and says where.
    fn keep_log(&self, name: &str) {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("webhook_load");
        let kept = dir.join(format!("{name}.log"));
        if std::fs::create_dir_all(&dir).is_ok() && std::fs::copy(&self.process.log, &kept).is_ok()
        {
            eprintln!("the operator's log: {}", kept.display());
        }
    }

    /// Starts it (no leader election: it decides claims itself) and waits until it is ready.
    fn start(cp: &support::ControlPlane, name: &str) -> Operator {
        let webhook_port = support::free_port();
        let metrics_port = support::free_port();
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"));
        cmd.args([
            "run",
            "--kubeconfig",
            cp.kubeconfig.to_str().expect("a path"),
            "--self-signed",
            "--webhook-host",
            "127.0.0.1",
            "--webhook-config-name",
            WEBHOOK_CONFIG,
            "--namespace",
            "default",
            "--leader-elect=false",
            "--drain-seconds=0",
            &format!("--status-writes-in-flight={}", status_writes_in_flight()),
            // A line per reconcile pass, also those that write nothing, in the kept log.
            "--log-level=info,kubeplace::controllers::reconciler=debug",
            &format!("--webhook-addr=127.0.0.1:{webhook_port}"),
            &format!("--metrics-addr=127.0.0.1:{metrics_port}"),
        ]);
        let process = cp.spawn(cmd, name);
        eprintln!("{name}: pid {}, log {}", process.pid, process.log.display());
        let ready = (0..1200).any(|_| {
            let ok = http_get(metrics_port, "/readyz").is_some_and(|r| r.contains(" 200 "));
            if !ok {
                std::thread::sleep(Duration::from_millis(250));
            }
            ok
        });
        assert!(
            ready,
            "the operator never became ready:\n{}",
            process.output()
        );
        Operator {
            process,
            webhook_port,
            metrics_port,
        }
    }

    /// Waits until it has computed some statuses and then, for [`SETTLED`], computed none,
    /// written none (a pass counts its writes when they are all done) and received no watch
    /// event (each status written comes back as one); the statuses it wrote.
    fn settle(&self) -> f64 {
        self.settle_after_rounds(0.0).0
    }

    /// [`Self::settle`], also waiting until `rounds` headroom rounds have ended in all and
    /// none is counting; also when the operator last made progress.
    fn settle_after_rounds(&self, rounds: f64) -> (f64, Instant) {
        let rounds_done = || {
            counter(self.metrics_port, "kubeplace_headroom_rounds_total") >= rounds
                && counter(self.metrics_port, "kubeplace_headroom_counting") == 0.0
        };
        let progress = || {
            (
                counter(self.metrics_port, "kubeplace_reconciles_total"),
                counter(self.metrics_port, "kubeplace_status_writes_total"),
                counter(self.metrics_port, "kubeplace_watch_events_total"),
            )
        };
        let mut last = progress();
        let mut quiet_since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let now = progress();
            if now != last || now.0 == 0.0 {
                last = now;
                quiet_since = Instant::now();
            } else if quiet_since.elapsed() >= SETTLED && rounds_done() {
                return (now.1, quiet_since);
            }
        }
    }
}

/// The CA the operator registered in its webhook configuration (PEM).
fn registered_ca(cp: &support::ControlPlane) -> Vec<u8> {
    let encoded = (0..120)
        .find_map(|_| {
            let out = cp.kubectl(&[
                "get",
                "validatingwebhookconfiguration",
                WEBHOOK_CONFIG,
                "-o",
                "jsonpath={.webhooks[0].clientConfig.caBundle}",
            ]);
            if out.success && !out.stdout.trim().is_empty() {
                return Some(out.stdout.trim().to_string());
            }
            std::thread::sleep(Duration::from_millis(250));
            None
        })
        .expect("the webhook configuration's caBundle");
    base64_decode(&encoded)
}

/// Standard base64 (the caBundle field) to bytes.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = text.bytes().filter(|c| *c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut n = 0u32;
        for (i, d) in chunk.iter().enumerate() {
            n |= u32::from(*d) << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

/// `flavors` Flavors (1–4 vCPUs, every third needing AVX2 through a trait extra spec) and
/// `servers` Servers of them in namespace `shop`, with the example cloud's image.
fn flavors_and_servers(flavors: usize, servers: usize) -> Vec<Value> {
    let mut docs = Vec::with_capacity(flavors + servers);
    for f in 0..flavors {
        let mut spec = json!({"vcpus": 1 + f % 4, "memoryMb": 1024 * (1 + f % 4), "diskGb": 10});
        if f % 3 == 0 {
            spec["extraSpecs"] = json!({"trait:HW_CPU_X86_AVX2": "required"});
        }
        docs.push(object("Flavor", &format!("bench.f{f:04}"), spec));
    }
    for i in 0..servers {
        let mut server = object(
            "Server",
            &format!("bench-s{i:04}"),
            json!({"flavor": format!("bench.f{:04}", i % flavors.max(1)), "image": "ubuntu-24.04"}),
        );
        server["metadata"]["namespace"] = json!("shop");
        docs.push(server);
    }
    docs
}

/// CPU seconds (user and system) each of the operator, kube-apiserver and etcd has used,
/// from /proc (clock ticks of 1/100 s).
fn cpu_seconds(operator: u32) -> [f64; 3] {
    let of_pid = |pid: &str| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The fields after the command's closing parenthesis; utime and stime are the 12th
        // and 13th of them.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        let tick = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (tick(11) + tick(12)) / 100.0
    };
    let by_name = |name: &str| -> f64 {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == name)
            })
            .map(|pid| of_pid(&pid))
            .sum()
    };
    [
        of_pid(&operator.to_string()),
        by_name("kube-apiserver"),
        by_name("etcd"),
    ]
}

/// Runs every rate against the operator's webhook and prints the tables.
fn measure(
    runtime: &tokio::runtime::Runtime,
    operator: &Operator,
    ca: &[u8],
    cloud: &str,
    rates: &[u64],
) {
    let pool = Arc::new(Pool::new(operator.webhook_port, ca));
    let fixtures = Arc::new(fixtures());
    let before = loadavg();
    let runs: Vec<Run> = runtime.block_on(async {
        // Warm up: connections, and every fixture answered once (and found allowed).
        let warm = drive(pool.clone(), fixtures.clone(), 100, 2).await;
        assert!(
            !warm.errors.contains_key(&Outcome::NotAllowed),
            "the webhook did not allow every request of the mix: {:?}",
            warm.errors
        );
        let mut runs = Vec::new();
        for &rate in rates {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let own = |what: &str| {
                counter(
                    operator.metrics_port,
                    &format!("kubeplace_admission_duration_seconds_{what}"),
                )
            };
            let (sum, count) = (own("sum"), own("count"));
            let mut run = drive(pool.clone(), fixtures.clone(), rate, SECONDS).await;
            let reviews = own("count") - count;
            if reviews > 0.0 {
                run.own_mean = Duration::from_secs_f64((own("sum") - sum) / reviews);
            }
            runs.push(run);
        }
        runs
    });
    print_runs(cloud, &runs, &fixtures);
    println!(
        "\nload average (1, 5, 15 min) at the start {before}, at the end {}; {} connections opened",
        loadavg(),
        pool.opened.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// The provider whose trait is taken away, and the trait: a tree with AVX2 (every even one),
/// which every third Flavor requires, and with disk of its own (not every fifth), so that
/// the compute node is in its candidates and its traits count for them.
const CHANGED_PROVIDER: &str = "cn000002";
const CHANGED_TRAIT: &str = "HW_CPU_X86_AVX2";

/// Takes AVX2 away from one compute node through the API server (the webhook admits the
/// change) and watches the Flavors: how long until the first and the last Flavor requiring
/// AVX2 show fewer candidates in `status.candidateCount`, and whether any other Flavor's
/// count moved.
async fn trait_change(client: kube::Client) {
    use kube::api::{ListParams, Patch, PatchParams, WatchEvent, WatchParams};
    let flavors: Api<DynamicObject> = Api::all_with(client.clone(), &Kind::Flavor.api_resource());
    let count = |o: &DynamicObject| o.data["status"]["candidateCount"].as_i64();
    // The bench's own Flavors: the example cloud's ask for more than AVX2.
    let needs_trait = |o: &DynamicObject| {
        o.metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("bench.f"))
            && o.data["spec"]["extraSpecs"]
                .get(format!("trait:{CHANGED_TRAIT}"))
                .is_some()
    };
    let listed = flavors.list(&ListParams::default()).await.expect("Flavors");
    let before: BTreeMap<String, (Option<i64>, bool)> = listed
        .items
        .iter()
        .map(|o| {
            (
                o.metadata.name.clone().unwrap_or_default(),
                (count(o), needs_trait(o)),
            )
        })
        .collect();
    let affected = before.values().filter(|(_, needs)| *needs).count();
    let version = listed.metadata.resource_version.unwrap_or_default();
    let mut events = flavors
        .watch(&WatchParams::default().timeout(290), &version)
        .await
        .expect("a watch of Flavors")
        .boxed();
    let providers: Api<DynamicObject> =
        Api::all_with(client, &Kind::ResourceProvider.api_resource());
    let started = Instant::now();
    providers
        .patch(
            CHANGED_PROVIDER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"traits": ["COMPUTE_NODE"]}})),
        )
        .await
        .expect("the trait change was admitted");
    let admitted = started.elapsed();
    let (mut first, mut last) = (None, None);
    let mut changed: BTreeMap<String, (Option<i64>, Option<i64>)> = BTreeMap::new();
    let deadline = Duration::from_secs(120);
    while let Ok(Some(event)) =
        tokio::time::timeout(deadline.saturating_sub(started.elapsed()), events.next()).await
    {
        let Ok(WatchEvent::Modified(o)) = event else {
            continue;
        };
        let name = o.metadata.name.clone().unwrap_or_default();
        let Some((was, needs)) = before.get(&name) else {
            continue;
        };
        if count(&o) == *was {
            changed.remove(&name);
            continue;
        }
        changed.insert(name, (*was, count(&o)));
        if *needs {
            first.get_or_insert(started.elapsed());
        }
        let affected_changed = changed
            .keys()
            .filter(|n| before.get(*n).is_some_and(|(_, needs)| *needs))
            .count();
        if affected_changed == affected {
            last = Some(started.elapsed());
            break;
        }
    }
    let others = changed
        .keys()
        .filter(|n| before.get(*n).is_some_and(|(_, needs)| !*needs))
        .count();
    let fewer_by_one = changed
        .values()
        .filter(|(was, now)| matches!((was, now), (Some(a), Some(b)) if a - b >= 1))
        .count();
    let secs = |d: Option<Duration>| {
        d.map_or("not within 120 s".into(), |d| {
            format!("{:.2} s", d.as_secs_f64())
        })
    };
    println!(
        "\nOne trait change ({CHANGED_TRAIT} taken from {CHANGED_PROVIDER} through the API server, admitted in {:.0} ms): \
         of the {affected} Flavors requiring it, the first showed fewer candidates {} after the change was sent, \
         the last {}; {} of them changed, {fewer_by_one} to a smaller count; other Flavors changed: {others}",
        admitted.as_secs_f64() * 1e3,
        secs(first),
        secs(last),
        changed.len() - others,
    );
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let trees = std::env::var("KUBEPLACE_BENCH_TREES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(TREES);
    let _ = rustls::crypto::ring::default_provider().install_default();
    println!(
        "{} cores; load average at the start: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        loadavg()
    );
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

    let operator = Operator::start(cp, "kubeplace-load");
    let ca = registered_ca(cp);
    // The example cloud goes through the webhook, as `kubectl apply` would send it.
    cp.kubectl(&["apply", "-f", "examples/cloud/00-namespaces.yaml"])
        .ok();
    let applied = (0..40).any(|_| {
        let out = cp.kubectl(&["apply", "-f", "examples/cloud/"]);
        if !out.success {
            std::thread::sleep(Duration::from_millis(500));
        }
        out.success
    });
    assert!(applied, "examples/cloud/ was not admitted");
    operator.settle();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    measure(&runtime, &operator, &ca, "example cloud", &RATES);

    let flavors = std::env::var("KUBEPLACE_BENCH_FLAVORS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(FLAVORS);
    let servers = std::env::var("KUBEPLACE_BENCH_SERVERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(SERVERS);
    let mut docs = tree_cloud(trees);
    let providers = docs.len();
    docs.extend(flavors_and_servers(flavors, servers));
    let objects = docs.len();
    let client = cp.kube_client(runtime.handle());
    let live = std::env::var("KUBEPLACE_BENCH_APPLY").is_ok_and(|v| v == "live");
    let (operator, ca) = if live {
        // As a user applies a cloud to a running operator: every create reviewed by its
        // webhook, its statuses written meanwhile.
        let writes_before = counter(operator.metrics_port, "kubeplace_status_writes_total");
        let cpu_before = cpu_seconds(operator.process.pid);
        let started = Instant::now();
        let failed = runtime.block_on(create_all(client.clone(), docs));
        let created_in = started.elapsed();
        assert_eq!(failed, 0, "{failed} objects could not be created");
        let last_write = Instant::now();
        // Headroom too: a round that starts after the last create (one counting now ends
        // first) must have ended.
        let rounds = counter(operator.metrics_port, "kubeplace_headroom_rounds_total")
            + counter(operator.metrics_port, "kubeplace_headroom_counting")
            + 1.0;
        let (writes, settled) = operator.settle_after_rounds(rounds);
        let writes = writes - writes_before;
        let settled_after = settled.saturating_duration_since(last_write);
        let (rss, peak) = memory_mib(operator.process.pid);
        let cpu = cpu_seconds(operator.process.pid);
        let used = |i: usize| cpu[i] - cpu_before[i];
        println!(
            "\n{trees} trees, {providers} ResourceProviders, {flavors} Flavors, {servers} Servers, \
             created through the API server with the operator running and its webhook reviewing each: \
             {objects} objects in {:.1} s ({:.0}/s, {CREATE_CONCURRENCY} at a time); every status had \
             settled {:.1} s after the last create was answered, {writes:.0} status writes in all \
             ({:.2} for each object created); the operator's memory then: {rss:.0} MiB resident, \
             {peak:.0} MiB at its peak; CPU seconds used from the first create until then: \
             operator {:.1}, kube-apiserver {:.1}, etcd {:.1}",
            created_in.as_secs_f64(),
            objects as f64 / created_in.as_secs_f64(),
            settled_after.as_secs_f64(),
            writes / objects as f64,
            used(0),
            used(1),
            used(2),
        );
        (operator, ca)
    } else {
        // The trees, created with no webhook in the way.
        operator.process.stop(Duration::from_secs(10));
        operator.keep_log("example-cloud");
        cp.kubectl(&[
            "delete",
            "validatingwebhookconfiguration",
            WEBHOOK_CONFIG,
            "--ignore-not-found",
        ])
        .ok();
        let started = Instant::now();
        let failed = runtime.block_on(create_all(client.clone(), docs));
        let created_in = started.elapsed();
        assert_eq!(failed, 0, "{failed} objects could not be created");

        let started = Instant::now();
        let operator = Operator::start(cp, "kubeplace-load-trees");
        let ready_in = started.elapsed();
        let ca = registered_ca(cp);
        // Once: while the operator writes the statuses of the trees it has just listed.
        measure(
            &runtime,
            &operator,
            &ca,
            &format!("example cloud + {trees} trees, statuses being written"),
            &[RATES[1]],
        );
        let writes = operator.settle();
        let settled_in = started.elapsed();
        let (rss, peak) = memory_mib(operator.process.pid);
        println!(
            "\n{trees} trees, {providers} ResourceProviders, {flavors} Flavors, {servers} Servers: \
             {objects} objects created in {:.1} s ({:.0}/s, {CREATE_CONCURRENCY} at a time); \
             the operator was ready {:.1} s after its start and had written its {writes:.0} statuses \
             ({:.2} for each object created) {:.1} s after it; its memory then: {rss:.0} MiB resident, {peak:.0} MiB at its peak",
            created_in.as_secs_f64(),
            objects as f64 / created_in.as_secs_f64(),
            ready_in.as_secs_f64(),
            writes / objects as f64,
            settled_in.as_secs_f64() - SETTLED.as_secs_f64(),
        );
        (operator, ca)
    };
    measure(
        &runtime,
        &operator,
        &ca,
        &format!("example cloud + {trees} trees"),
        &RATES,
    );
    let rounds = counter(operator.metrics_port, "kubeplace_headroom_rounds_total");
    runtime.block_on(trait_change(client));
    // The change starts a headroom round (it changed a provider): the load while it counts.
    let counting = loop {
        if counter(operator.metrics_port, "kubeplace_headroom_counting") == 1.0 {
            break true;
        }
        if counter(operator.metrics_port, "kubeplace_headroom_rounds_total") > rounds {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if counting {
        measure(
            &runtime,
            &operator,
            &ca,
            &format!("example cloud + {trees} trees, headroom being counted"),
            &RATES,
        );
        println!(
            "\nstill counting headroom at the end of that load: {}",
            counter(operator.metrics_port, "kubeplace_headroom_counting") == 1.0
        );
    } else {
        println!("\nthe headroom round after the change ended before a load could start");
    }
    operator.process.kill();
    operator.keep_log(if live { "trees-live" } else { "trees" });
}
