//! Claims per second and claim latency through the one decision point, in a cluster: the
//! real control plane of the end-to-end tests (tests/support), `kubeplace run` with leader
//! election and the Placement API, and claims made two ways:
//! - Allocations created through the API server (the path of `kubectl create`: the API
//!   server, the admission webhook's decision at the leader, etcd);
//! - `PUT /allocations/{consumer}` on the Placement API (the API's checks, then the same
//!   Allocation write).
//!
//! Beside them, in the same run, real Placement 16 (the virtualenv of
//! `hack/placement-venv.sh`, served by `hack/placement-serve.py`: one process, a thread a
//! request) takes the same `PUT /allocations` claims on a provider of the same inventory, on
//! SQLite and, when Debian's MariaDB is installed (`apt-get install mariadb-server`; its
//! server is started in a temporary directory), on MariaDB.
//!
//! Each way: one client in sequence (latency p50/p99) and 8 clients at once (claims/s).
//! Run with `cargo bench --bench cluster_claims`; it prints a table.

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

#[path = "../tests/support/real_placement.rs"]
mod real_placement;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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

/// A MariaDB server of its own in a temporary directory, stopped when dropped.
struct MariaDb {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl MariaDb {
    /// Starts Debian's MariaDB with an empty database `placement`; `None` when it is not
    /// installed.
    fn start() -> Option<MariaDb> {
        let installed = std::process::Command::new("mariadb-install-db")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            return None;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let data = dir.path().join("data");
        let ok = std::process::Command::new("mariadb-install-db")
            .args([
                "--no-defaults",
                "--user=root",
                "--auth-root-authentication-method=normal",
            ])
            .arg(format!("--datadir={}", data.display()))
            .output()
            .expect("mariadb-install-db runs");
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
        let socket = dir.path().join("mysqld.sock");
        let child = std::process::Command::new("mariadbd")
            .args([
                "--no-defaults",
                "--user=root",
                "--skip-networking",
                "--innodb-flush-log-at-trx-commit=2",
            ])
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!(
                "--pid-file={}",
                dir.path().join("mysqld.pid").display()
            ))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("mariadbd starts");
        let db = MariaDb { child, dir };
        let created = (0..120).any(|_| {
            std::thread::sleep(Duration::from_millis(250));
            std::process::Command::new("mariadb")
                .args(["--no-defaults", "-u", "root"])
                .arg(format!("--socket={}", db.socket().display()))
                .args(["-e", "CREATE DATABASE IF NOT EXISTS placement"])
                .output()
                .is_ok_and(|o| o.status.success())
        });
        assert!(
            created,
            "MariaDB did not start in {}",
            db.dir.path().display()
        );
        Some(db)
    }

    fn socket(&self) -> std::path::PathBuf {
        self.dir.path().join("mysqld.sock")
    }

    /// The database's SQLAlchemy URL, through PyMySQL.
    fn url(&self) -> String {
        format!(
            "mysql+pymysql://root@localhost/placement?unix_socket={}",
            self.socket().display()
        )
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Claims of 1 VCPU on a provider of real Placement, `PUT /allocations/{consumer}`.
fn real_placement_rows(what: &str, placement: &real_placement::RealPlacement) {
    let url = placement.url.clone();
    let uuid = "77777777-7777-4777-8777-777777777777";
    real_placement::ok(
        &url,
        "POST",
        "/resource_providers",
        Some(&json!({"name": "bench-host", "uuid": uuid})),
    );
    real_placement::ok(
        &url,
        "PUT",
        &format!("/resource_providers/{uuid}/inventories"),
        Some(&json!({"resource_provider_generation": 0,
                     "inventories": {"VCPU": {"total": 100000}}})),
    );
    let port: u16 = url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port");
    let claims = |offset: usize| -> Arc<dyn Fn(usize) -> u16 + Send + Sync> {
        Arc::new(move |i| {
            let n = offset + i;
            let body = json!({"allocations": {uuid: {"resources": {"VCPU": 1}}},
                              "project_id": "p", "user_id": "u",
                              "consumer_generation": null, "consumer_type": "INSTANCE"});
            http(
                port,
                "PUT",
                &format!("/allocations/66666666-6666-4666-8666-{n:012}"),
                "admin",
                &body,
            )
        })
    };
    drive(40, CLIENTS, claims(900_000));
    row(what, 1, drive(SEQUENTIAL, 1, claims(0)));
    row(what, CLIENTS, drive(CONCURRENT, CLIENTS, claims(100_000)));
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

/// Runs `claim(i)` (its HTTP status) for `n` claims from `clients` threads; the latencies,
/// the wall time and the statuses other than 201 and 204, counted.
fn drive(
    n: usize,
    clients: usize,
    claim: Arc<dyn Fn(usize) -> u16 + Send + Sync>,
) -> (Vec<Duration>, Duration, BTreeMap<u16, usize>) {
    let next = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(Mutex::new(BTreeMap::new()));
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
                    let status = claim(i);
                    if status != 201 && status != 204 {
                        *failed.lock().expect("the tally").entry(status).or_insert(0) += 1;
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
    let failed = failed.lock().expect("the tally").clone();
    (all, wall, failed)
}

fn row(
    what: &str,
    clients: usize,
    (lat, wall, failed): (Vec<Duration>, Duration, BTreeMap<u16, usize>),
) {
    let total: usize = failed.values().sum();
    let failed = if total == 0 {
        "0".to_string()
    } else {
        let each: Vec<String> = failed.iter().map(|(s, n)| format!("{n}×{s}")).collect();
        format!("{total} ({})", each.join(", "))
    };
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
    let through_api_server = |offset: usize| -> Arc<dyn Fn(usize) -> u16 + Send + Sync> {
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
                .map_or_else(
                    |e| match e {
                        kube::Error::Api(s) => s.code,
                        _ => 0,
                    },
                    |_| 201,
                )
        })
    };
    let through_placement = |offset: usize| -> Arc<dyn Fn(usize) -> u16 + Send + Sync> {
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
            )
        })
    };
    // Warm both paths (connections, the review cache of the token), with as many clients
    // as the rate is measured with: each opens its own connections.
    drive(40, CLIENTS, through_api_server(900_000));
    drive(40, CLIENTS, through_placement(900_000));

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
    operator.kill();
    real_placement_rows(
        "real Placement 16, SQLite, PUT /allocations",
        &real_placement::RealPlacement::start(),
    );
    match MariaDb::start() {
        Some(db) => real_placement_rows(
            "real Placement 16, MariaDB, PUT /allocations",
            &real_placement::RealPlacement::start_on(Some(&db.url())),
        ),
        None => println!(
            "| real Placement 16, MariaDB | – | MariaDB is not installed (apt-get install mariadb-server) | | | | |"
        ),
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\n{} cores; load average at the end: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}
