//! Claims racing for the last capacity through kubectl, against two replicas: exactly as
//! many win as fit, the provider never counts more than its capacity, and claims written
//! while no webhook guarded them are settled oldest first and the losers do not count.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::support::{self, exclusive_lock};
use super::{ControlPlane, Operator, crds_installed, eventually};

pub(super) fn provider(name: &str, vcpus: i64) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: {name}\nspec:\n  inventories:\n    VCPU: {{total: {vcpus}}}\n"
    )
}

pub(super) fn allocation(name: &str, n: usize, provider: &str) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: {name}\nspec:\n  consumer: 00000000-0000-4000-8000-{n:012}\n  allocations:\n  - provider: {provider}\n    resources: {{VCPU: 1}}\n"
    )
}

/// The VCPU usage a provider's status shows, 0 before it shows any.
pub(super) fn usage(cp: &ControlPlane, provider: &str) -> i64 {
    cp.kubectl(&[
        "get",
        "resourceprovider",
        provider,
        "-o",
        "jsonpath={.status.usages.VCPU}",
    ])
    .stdout
    .trim()
    .parse()
    .unwrap_or(0)
}

/// Each Allocation whose name starts with `prefix`, with its Applied condition's status and
/// reason (empty until the leader writes them).
pub(super) fn verdicts(cp: &ControlPlane, prefix: &str) -> Vec<(String, String, String)> {
    let out = cp.kubectl(&[
        "get",
        "allocations",
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Applied")].status} {.status.conditions[?(@.type=="Applied")].reason}{"\n"}{end}"#,
    ]);
    out.stdout
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(|l| {
            let mut f = l.split_whitespace().map(str::to_string);
            (
                f.next().unwrap_or_default(),
                f.next().unwrap_or_default(),
                f.next().unwrap_or_default(),
            )
        })
        .collect()
}

/// Waits until every Allocation of `prefix` has a verdict, and returns them.
pub(super) fn settled(
    cp: &ControlPlane,
    prefix: &str,
    count: usize,
) -> Vec<(String, String, String)> {
    for _ in 0..120 {
        let v = verdicts(cp, prefix);
        if v.len() == count && v.iter().all(|(_, status, _)| !status.is_empty()) {
            return v;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("no verdict for every claim: {:?}", verdicts(cp, prefix));
}

fn cleanup(cp: &ControlPlane, prefix: &str, count: usize, host: &str) {
    let names: Vec<String> = (0..count).map(|i| format!("{prefix}{i}")).collect();
    let mut args = vec!["delete", "allocation", "--ignore-not-found", "--wait=false"];
    args.extend(names.iter().map(String::as_str));
    cp.kubectl(&args).ok();
    cp.kubectl(&["delete", "resourceprovider", host, "--ignore-not-found"])
        .ok();
}

/// A TCP proxy on 127.0.0.1 that hands each connection to the next backend in turn, as a
/// Service spreads connections over the pods behind it; returns its port and a count of
/// connections per backend.
pub(super) fn round_robin(backends: Vec<u16>) -> (u16, Arc<Vec<AtomicUsize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let counts: Arc<Vec<AtomicUsize>> =
        Arc::new(backends.iter().map(|_| AtomicUsize::new(0)).collect());
    let seen = counts.clone();
    std::thread::spawn(move || {
        for (n, client) in listener.incoming().enumerate() {
            let Ok(client) = client else { continue };
            let i = n % backends.len();
            seen[i].fetch_add(1, Ordering::Relaxed);
            let Ok(server) = TcpStream::connect(("127.0.0.1", backends[i])) else {
                continue;
            };
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let (mut c, mut s) = (client, server);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c, &mut s);
                let _ = s.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s2, &mut c2);
                let _ = c2.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (port, counts)
}

/// A replica with the shared serving certificate, as pods behind one Service run; it
/// tells the others to reach it at its own port, checked against `ca`.
pub(super) fn replica_on(
    cp: &ControlPlane,
    name: &str,
    certs: (&Path, &Path, &Path),
    config: &str,
    webhook_port: u16,
    placement_port: u16,
) -> (Operator, u16) {
    replica_with(cp, name, certs, config, (webhook_port, placement_port), &[])
}

/// [`replica_on`], with more flags.
pub(super) fn replica_with(
    cp: &ControlPlane,
    name: &str,
    (cert, key, ca): (&Path, &Path, &Path),
    config: &str,
    (webhook_port, placement_port): (u16, u16),
    extra: &[&str],
) -> (Operator, u16) {
    let metrics_port = support::free_port();
    let mut args: Vec<String> = vec![
        "run".into(),
        format!("--kubeconfig={}", cp.kubeconfig.display()),
        format!("--tls-cert-file={}", cert.display()),
        format!("--tls-key-file={}", key.display()),
        format!("--webhook-addr=127.0.0.1:{webhook_port}"),
        format!("--metrics-addr=127.0.0.1:{metrics_port}"),
        "--namespace=default".into(),
        "--lease-name=e2e-claims".into(),
        format!("--claims-address=127.0.0.1:{webhook_port}"),
        "--claims-server-name=127.0.0.1".into(),
        format!("--ca-file={}", ca.display()),
        format!("--placement-addr=127.0.0.1:{placement_port}"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    (
        Operator::launch(cp, name, args, metrics_port, config),
        webhook_port,
    )
}

/// Two replicas behind one webhook address for Allocations (registered as `config_name`),
/// each deciding the claims that reach it through the leader's ledger: the replicas, which
/// of them leads, and how many connections each received.
pub(super) fn allocation_replicas(cp: &ControlPlane, config_name: &str) -> AllocationReplicas {
    let certs = kubeplace::serving::certs::self_signed("127.0.0.1").unwrap();
    let file = |suffix: &str| {
        cp.kubeconfig
            .with_file_name(format!("{config_name}{suffix}"))
    };
    let (cert, key, ca) = (file(".crt"), file(".key"), file("-ca.crt"));
    std::fs::write(&cert, &certs.cert_pem).unwrap();
    std::fs::write(&key, &certs.key_pem).unwrap();
    std::fs::write(&ca, &certs.ca_pem).unwrap();
    let ports = [support::free_port(), support::free_port()];
    let (proxy, connections) = round_robin(ports.to_vec());
    let mut config = kubeplace::webhook::config::webhook_configuration(
        config_name,
        &kubeplace::webhook::config::base_url("127.0.0.1", proxy),
        &certs.ca_pem,
    );
    config
        .webhooks
        .get_or_insert_with(Vec::new)
        .retain(|w| w.name == "allocations.kubeplace.io");
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &serde_json::to_string(&config).unwrap(),
    )
    .ok();
    let files: (&Path, &Path, &Path) = (&cert, &key, &ca);
    let api_ports = [support::free_port(), support::free_port()];
    let replica = |i: usize, side: &str| {
        replica_on(
            cp,
            &format!("{config_name}-{side}"),
            files,
            config_name,
            ports[i],
            api_ports[i],
        )
        .0
    };
    let replicas = [replica(0, "a"), replica(1, "b")];
    let leader = deciding_leader(&[&replicas[0], &replicas[1]]);
    AllocationReplicas {
        replicas,
        leader,
        connections,
        api_ports,
    }
}

/// What [`allocation_replicas`] starts.
pub(super) struct AllocationReplicas {
    pub replicas: [Operator; 2],
    /// Which of them leads.
    pub leader: usize,
    /// Webhook connections each received.
    pub connections: Arc<Vec<AtomicUsize>>,
    /// Each one's Placement API port.
    pub api_ports: [u16; 2],
}

/// Waits until one of the replicas leads and decides claims; its position.
pub(super) fn deciding_leader(replicas: &[&Operator]) -> usize {
    for _ in 0..120 {
        if let Some(i) = replicas
            .iter()
            .position(|r| r.process.output().contains("deciding claims"))
        {
            return i;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("no replica started deciding claims");
}

#[test]
fn twenty_racing_kubectl_claims_on_two_replicas_never_oversubscribe() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    const HOST: &str = "e2e-claims-host";
    const PREFIX: &str = "e2e-race-";
    const CONFIG: &str = "kubeplace-claims";
    const CLAIMS: usize = 20;
    // Two replicas behind one address, each deciding the claims that reach it.
    let AllocationReplicas {
        replicas: [a, b],
        leader,
        connections,
        api_ports,
    } = allocation_replicas(cp, CONFIG);
    cp.kubectl_stdin(&["apply", "-f", "-"], &provider(HOST, 4))
        .ok();
    eventually(
        cp,
        &[
            "get",
            "resourceprovider",
            HOST,
            "-o",
            "jsonpath={.status.root}",
        ],
        HOST,
    );
    let stop = AtomicBool::new(false);
    let samples = Mutex::new(Vec::new());
    let created: Vec<bool> = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let u = usage(cp, HOST);
                samples.lock().unwrap().push(u);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let racers: Vec<_> = (0..CLAIMS)
            .map(|i| {
                s.spawn(move || {
                    let run = cp.kubectl_stdin(
                        &["create", "-f", "-"],
                        &allocation(&format!("{PREFIX}{i}"), i, HOST),
                    );
                    if !run.success && !run.stderr.contains("capacity") {
                        eprintln!("claim {i}: {}", run.stderr.trim());
                    }
                    run.success
                })
            })
            .collect();
        let created: Vec<bool> = racers.into_iter().map(|r| r.join().unwrap()).collect();
        let admitted = created.iter().filter(|c| **c).count();
        settled(cp, PREFIX, admitted);
        // Keep sampling a moment after the statuses settle.
        std::thread::sleep(Duration::from_secs(2));
        stop.store(true, Ordering::Relaxed);
        sampler.join().unwrap();
        created
    });
    let admitted = created.iter().filter(|c| **c).count();
    let verdicts = settled(cp, PREFIX, admitted);
    let applied = verdicts.iter().filter(|(_, s, _)| s == "True").count();
    let refused_after = verdicts
        .iter()
        .filter(|(_, s, r)| s == "False" && r == "OverCapacity")
        .count();
    let final_usage = usage(cp, HOST);
    let samples = samples.into_inner().unwrap();
    let per_replica: Vec<usize> = connections
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    cleanup(cp, PREFIX, CLAIMS, HOST);
    eprintln!(
        "claims: {admitted} admitted, {applied} counted, {refused_after} refused after admission; webhook connections per replica {per_replica:?}; usage samples {}; leader {leader}",
        samples.len()
    );
    assert_eq!(applied, 4, "claims counted: {verdicts:?}");
    // Only the leader decides: the follower passes every claim to it, so no more are
    // admitted than fit.
    assert_eq!(
        admitted, 4,
        "claims admitted by kubectl create: {created:?}"
    );
    assert!(
        per_replica.iter().all(|n| *n > 0),
        "both replicas received reviews: {per_replica:?}"
    );

    assert_eq!(
        applied + refused_after,
        admitted,
        "every stored claim has a verdict: {verdicts:?}"
    );
    assert_eq!(final_usage, 4);
    assert!(
        samples.iter().all(|u| *u <= 4),
        "the provider counted more than its capacity at some moment: {samples:?}"
    );

    // Every kind of claimer at once, on both replicas: Servers placed by the leader,
    // Allocations from kubectl, and Placement API clients on each replica's API.
    mixed_race(cp, &a, &b, api_ports);

    // The leader SIGKILLed in the middle of a burst: claims are refused until another
    // replica leads and has seen every claim decided before, then decided by it; never
    // more than fit.
    const KILL_HOST: &str = "e2e-kill-host";
    const KILL_PREFIX: &str = "e2e-kill-";
    const KILL_CLAIMS: usize = 50;
    cp.kubectl_stdin(&["apply", "-f", "-"], &provider(KILL_HOST, 6))
        .ok();
    eventually(
        cp,
        &[
            "get",
            "resourceprovider",
            KILL_HOST,
            "-o",
            "jsonpath={.status.root}",
        ],
        KILL_HOST,
    );
    let (leading, following) = if leader == 0 { (&a, &b) } else { (&b, &a) };
    let following_api = api_ports[1 - leader];
    let writer = super::placement_api::token(cp, "placement-writer");
    let kill_uuid = cp
        .kubectl(&[
            "get",
            "resourceprovider",
            KILL_HOST,
            "-o",
            "jsonpath={.status.uuid}",
        ])
        .ok()
        .trim()
        .to_string();
    let mut api_won: Vec<usize> = Vec::new();
    let stop = AtomicBool::new(false);
    let samples = Mutex::new(Vec::new());
    let created: Vec<bool> = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                samples.lock().unwrap().push(usage(cp, KILL_HOST));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let mut created = Vec::new();
        for i in 0..KILL_CLAIMS {
            if i == 2 {
                leading.process.kill();
            }
            // Every third claim through the surviving replica's Placement API, the others
            // with kubectl.
            let won = if i % 3 == 2 {
                let body = serde_json::json!({
                    "allocations": {&kill_uuid: {"resources": {"VCPU": 1}}},
                    "project_id": "p", "user_id": "u",
                    "consumer_generation": null, "consumer_type": "INSTANCE"});
                let status = super::placement_api::call(
                    following_api,
                    "PUT",
                    &format!("/allocations/00000000-0000-4000-8000-{:012}", 1000 + i),
                    Some(&writer),
                    Some(&body),
                )
                .0;
                if status == 204 {
                    api_won.push(i);
                }
                false
            } else {
                cp.kubectl_stdin(
                    &["create", "-f", "-"],
                    &allocation(&format!("{KILL_PREFIX}{i}"), 1000 + i, KILL_HOST),
                )
                .success
            };
            created.push(won);
            std::thread::sleep(Duration::from_millis(800));
        }
        let admitted = created.iter().filter(|c| **c).count();
        settled(cp, KILL_PREFIX, admitted);
        std::thread::sleep(Duration::from_secs(2));
        stop.store(true, Ordering::Relaxed);
        sampler.join().unwrap();
        created
    });
    let admitted = created.iter().filter(|c| **c).count();
    let verdicts = settled(cp, KILL_PREFIX, admitted);
    let applied = verdicts.iter().filter(|(_, s, _)| s == "True").count();
    let samples = samples.into_inner().unwrap();
    // The last claim may have come through the API a moment ago: its usage is written by
    // the next pass.
    let mut final_usage = usage(cp, KILL_HOST);
    for _ in 0..60 {
        if final_usage == 6 {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
        final_usage = usage(cp, KILL_HOST);
    }
    let log = following.process.output();
    cleanup(cp, KILL_PREFIX, KILL_CLAIMS, KILL_HOST);
    a.stop_and_unregister(cp);
    b.process.stop(Duration::from_secs(10));
    let api_names: Vec<String> = (0..KILL_CLAIMS)
        .map(|i| format!("00000000-0000-4000-8000-{:012}", 1000 + i))
        .collect();
    let mut args = vec!["delete", "allocation", "--ignore-not-found", "--wait=false"];
    args.extend(api_names.iter().map(String::as_str));
    cp.kubectl(&args).ok();
    let first_after_kill = created
        .iter()
        .enumerate()
        .skip(2)
        .filter(|(_, c)| **c)
        .map(|(i, _)| i)
        .chain(api_won.iter().copied().filter(|i| *i >= 2))
        .min();
    eprintln!(
        "leader killed: {admitted} kubectl and {} API claims of {KILL_CLAIMS} admitted, {applied} kubectl claims counted, first admitted after the kill: claim {first_after_kill:?}",
        api_won.len()
    );
    assert!(
        log.contains("deciding claims"),
        "the other replica never took over the claims:\n{log}"
    );
    assert_eq!(
        admitted + api_won.len(),
        6,
        "exactly what fits was admitted: kubectl {created:?}, API {api_won:?}"
    );
    assert_eq!(applied, admitted, "{verdicts:?}");
    assert_eq!(final_usage, 6);
    assert!(
        samples.iter().all(|u| *u <= 6),
        "the provider counted more than its capacity at some moment: {samples:?}"
    );
}

#[test]
fn claims_written_without_the_webhook_are_settled_oldest_first() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    const HOST: &str = "e2e-bypass-host";
    const PREFIX: &str = "e2e-bypass-";
    // No operator runs, so no webhook guards these writes: all six are stored.
    cp.kubectl_stdin(&["apply", "-f", "-"], &provider(HOST, 4))
        .ok();
    let claims: Vec<String> = (0..6)
        .map(|i| allocation(&format!("{PREFIX}{i}"), 100 + i, HOST))
        .collect();
    cp.kubectl_stdin(&["create", "-f", "-"], &claims.join("---\n"))
        .ok();
    let operator = Operator::start(cp, "kubeplace-bypass", &["--leader-elect=false"]);
    let verdicts = settled(cp, PREFIX, 6);
    eventually(
        cp,
        &[
            "get",
            "resourceprovider",
            HOST,
            "-o",
            "jsonpath={.status.usages.VCPU}",
        ],
        "4",
    );
    let events = cp
        .kubectl(&[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name={PREFIX}5"),
            "-o",
            "jsonpath={.items[*].reason}",
        ])
        .stdout;
    cleanup(cp, PREFIX, 6, HOST);
    operator.stop_and_unregister(cp);
    let refused: Vec<&str> = verdicts
        .iter()
        .filter(|(_, s, r)| s == "False" && r == "OverCapacity")
        .map(|(n, _, _)| n.as_str())
        .collect();
    let applied = verdicts.iter().filter(|(_, s, _)| s == "True").count();
    assert_eq!(applied, 4, "{verdicts:?}");
    // Created in one request, in the same second: the names break the tie.
    assert_eq!(
        refused,
        [format!("{PREFIX}4"), format!("{PREFIX}5")],
        "{verdicts:?}"
    );
    assert!(
        events.contains("OverCapacity"),
        "no Warning Event: {events:?}"
    );
}

const MIXED_HOST: &str = "e2e-mixed-host";
const MIXED_NS: &str = "e2e-mixed";
const MIXED_EACH: usize = 6;
const MIXED_CAPACITY: i64 = 6;

const MIXED_CLOUD: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: e2e-mixed}
---
apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata:
  name: e2e-mixed-host
spec:
  inventories:
    VCPU: {total: 6}
    MEMORY_MB: {total: 65536}
  traits: [COMPUTE_NODE, CUSTOM_E2E_MIXED]
---
apiVersion: kubeplace.io/v1alpha1
kind: Flavor
metadata:
  name: e2e.mixed
spec:
  vcpus: 1
  memoryMb: 64
  extraSpecs:
    trait:CUSTOM_E2E_MIXED: required
---
apiVersion: kubeplace.io/v1alpha1
kind: Image
metadata:
  name: e2e-mixed-image
spec:
  properties: {os_distro: ubuntu}
"#;

/// Servers, kubectl Allocations and Placement API claims race for 6 VCPU on two replicas:
/// exactly 6 win, counted usage never exceeds 6.
fn mixed_race(cp: &ControlPlane, a: &Operator, b: &Operator, api_ports: [u16; 2]) {
    use super::placement_api::{ACCESS, call, token, wait_for_api};
    use serde_json::json;
    cp.kubectl_stdin(&["apply", "-f", "-"], ACCESS).ok();
    let writer = token(cp, "placement-writer");
    wait_for_api(api_ports[0], a);
    wait_for_api(api_ports[1], b);
    cp.kubectl_stdin(&["apply", "-f", "-"], MIXED_CLOUD).ok();
    eventually(
        cp,
        &[
            "get",
            "resourceprovider",
            MIXED_HOST,
            "-o",
            "jsonpath={.status.root}",
        ],
        MIXED_HOST,
    );
    let found = (0..60).find_map(|_| {
        let (_, list) = call(
            api_ports[0],
            "GET",
            &format!("/resource_providers?name={MIXED_HOST}"),
            Some(&writer),
            None,
        );
        let uuid = list["resource_providers"][0]["uuid"]
            .as_str()
            .map(str::to_string);
        if uuid.is_none() {
            std::thread::sleep(Duration::from_millis(500));
        }
        uuid
    });
    let host_uuid = found.expect("the API shows the host");
    let stop = AtomicBool::new(false);
    let samples = Mutex::new(Vec::new());
    let (api_wins, kubectl_wins) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                samples.lock().unwrap().push(usage(cp, MIXED_HOST));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let servers: Vec<_> = (0..MIXED_EACH)
            .map(|i| {
                s.spawn(move || {
                    cp.kubectl_stdin(
                        &["create", "-f", "-"],
                        &format!(
                            "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata:\n  name: mixed-{i}\n  namespace: {MIXED_NS}\nspec:\n  flavor: e2e.mixed\n  image: e2e-mixed-image\n"
                        ),
                    )
                    .ok();
                })
            })
            .collect();
        let kubectl: Vec<_> = (0..MIXED_EACH)
            .map(|i| {
                s.spawn(move || {
                    let run = cp.kubectl_stdin(
                        &["create", "-f", "-"],
                        &allocation(&format!("e2e-mixed-{i}"), 2000 + i, MIXED_HOST),
                    );
                    if !run.success && !run.stderr.contains("capacity") {
                        eprintln!("kubectl claim {i}: {}", run.stderr.trim());
                    }
                    run.success
                })
            })
            .collect();
        let api: Vec<_> = (0..MIXED_EACH)
            .map(|i| {
                let writer = writer.clone();
                let host_uuid = host_uuid.clone();
                s.spawn(move || {
                    let body = json!({"allocations": {host_uuid: {"resources": {"VCPU": 1}}},
                                      "project_id": "p", "user_id": "u",
                                      "consumer_generation": null, "consumer_type": "INSTANCE"});
                    let consumer = format!("77777777-7777-4777-8777-{i:012}");
                    // kubectl takes a moment to start: let the three kinds of claimer
                    // arrive together.
                    std::thread::sleep(Duration::from_millis(300 + 120 * i as u64));
                    let (status, answer) = call(
                        api_ports[i % 2],
                        "PUT",
                        &format!("/allocations/{consumer}"),
                        Some(&writer),
                        Some(&body),
                    );
                    if status != 204 && status != 409 {
                        eprintln!("API claim {i}: {status} {answer}");
                    }
                    status == 204
                })
            })
            .collect();
        for t in servers {
            t.join().unwrap();
        }
        let kubectl_wins = kubectl
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter(|won| *won)
            .count();
        let api_wins = api
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter(|won| *won)
            .count();
        // Servers are placed by the leader after they are created: wait until the host is
        // full (18 claims of 1 VCPU for 6) and every claim has settled.
        for _ in 0..120 {
            let placed = placed_servers(cp);
            if usage(cp, MIXED_HOST) == MIXED_CAPACITY
                && placed + kubectl_wins + api_wins >= MIXED_CAPACITY as usize
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        // Keep sampling a moment: nothing more may be placed.
        std::thread::sleep(Duration::from_secs(3));
        stop.store(true, Ordering::Relaxed);
        sampler.join().unwrap();
        (api_wins, kubectl_wins)
    });
    let placed = placed_servers(cp);
    let final_usage = usage(cp, MIXED_HOST);
    let samples = samples.into_inner().unwrap();
    eprintln!(
        "mixed race: {placed} servers placed, {kubectl_wins} kubectl claims admitted, {api_wins} API claims won; {} usage samples",
        samples.len()
    );
    // Servers first (the leader removes their finalizers); the namespace then goes in the
    // background (this control plane runs no namespace controller).
    cp.kubectl(&[
        "delete",
        "servers",
        "--all",
        "-n",
        MIXED_NS,
        "--timeout=60s",
    ])
    .ok();
    cp.kubectl(&["delete", "namespace", MIXED_NS, "--wait=false"])
        .ok();
    let names: Vec<String> = (0..MIXED_EACH).map(|i| format!("e2e-mixed-{i}")).collect();
    let mut args = vec!["delete", "allocation", "--ignore-not-found"];
    args.extend(names.iter().map(String::as_str));
    let consumers: Vec<String> = (0..MIXED_EACH)
        .map(|i| format!("77777777-7777-4777-8777-{i:012}"))
        .collect();
    args.extend(consumers.iter().map(String::as_str));
    cp.kubectl(&args).ok();
    assert_eq!(
        placed + kubectl_wins + api_wins,
        MIXED_CAPACITY as usize,
        "exactly the capacity's worth of claims won"
    );
    assert!(
        api_wins > 0 || kubectl_wins > 0 || placed > 0,
        "some claimer won"
    );
    assert_eq!(final_usage, MIXED_CAPACITY);
    assert!(
        samples.iter().all(|u| *u <= MIXED_CAPACITY),
        "the host counted more than its capacity at some moment: {samples:?}"
    );
}

/// How many of the race's Servers the leader placed on the host.
fn placed_servers(cp: &ControlPlane) -> usize {
    cp.kubectl(&[
        "get",
        "servers",
        "-n",
        MIXED_NS,
        "-o",
        "jsonpath={range .items[*]}{.status.host}{\"\\n\"}{end}",
    ])
    .stdout
    .lines()
    .filter(|l| l.trim() == MIXED_HOST)
    .count()
}
