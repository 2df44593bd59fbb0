//! One inventory of DRA devices on a real node: 8 pods (each with a ResourceClaim that
//! kube-scheduler allocates) and 8 Servers (each asking for one device) start together on a
//! pool of 4 devices, against two kubeplace replicas with `--mirror-cluster`, and the
//! leader is SIGKILLed in the middle. At no moment is a device held twice (by two claims,
//! or by a claim and a Server); in the end the 4 devices are held, and the losers wait:
//! pods Pending, Servers `Scheduled=False`. Run alone, as root, like `mirror.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::claims::{deciding_leader, replica_with, round_robin};
use crate::Operator;
use crate::support::{self, ControlPlane, Node};
use kubeplace_policy::mirror::resource_slice::device_provider_name;

const DRIVER: &str = "race.e2e.kubeplace.io";
const NS: &str = "race";
const EACH: usize = 8;
const DEVICES: usize = 4;
const CONFIG: &str = "kubeplace-devices";

/// Who holds each device now: a pod's claim (`claim:NAME`) or a Server (`server:NAME`, by
/// its Allocation and its reservation claim alike). A device with two holders is an error.
fn holders(cp: &ControlPlane, node: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut held: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (claim, result) in claim_results(cp, NS) {
        let holder = match claim["metadata"]["labels"]["kubeplace.io/reservation-for"].as_str() {
            Some(server) => format!("server:{server}"),
            None => format!("claim:{}", claim["metadata"]["name"].as_str().unwrap_or("")),
        };
        let device = result["device"].as_str().unwrap_or("").to_string();
        held.entry(device).or_default().insert(holder);
    }
    let by_provider: BTreeMap<String, String> = (0..DEVICES)
        .map(|i| {
            let device = format!("race-{i}");
            (device_provider_name(DRIVER, node, &device), device)
        })
        .collect();
    let allocations: Value =
        serde_json::from_str(&cp.kubectl(&["get", "allocations", "-o", "json"]).stdout)
            .unwrap_or(Value::Null);
    for a in allocations["items"].as_array().into_iter().flatten() {
        let Some(server) = a["metadata"]["labels"]["kubeplace.io/server-name"].as_str() else {
            continue;
        };
        for pa in a["spec"]["allocations"].as_array().into_iter().flatten() {
            if let Some(device) = pa["provider"].as_str().and_then(|p| by_provider.get(p)) {
                held.entry(device.clone())
                    .or_default()
                    .insert(format!("server:{server}"));
            }
        }
    }
    held
}

fn jsonpath(cp: &ControlPlane, kind: &str, name: &str, path: &str) -> String {
    namespaced_field(cp, kind, NS, name, path)
}

/// Deletes every pod of `namespace` at once (no grace period: a test's pods hold nothing
/// worth stopping gently), not waiting for the kubelet.
pub(super) fn delete_pods_now(cp: &ControlPlane, namespace: &str) {
    cp.kubectl(&[
        "delete",
        "pods",
        "--all",
        "-n",
        namespace,
        "--grace-period=0",
        "--force",
    ])
    .ok();
}

/// Deletes every ResourceClaim of `namespace`, not waiting for them to go.
pub(super) fn delete_claims(cp: &ControlPlane, namespace: &str) {
    cp.kubectl(&[
        "delete",
        "resourceclaims",
        "--all",
        "-n",
        namespace,
        "--wait=false",
    ])
    .ok();
}

/// A field of a namespaced object by JSONPath (`.status.phase`); empty when it is absent.
pub(super) fn namespaced_field(
    cp: &ControlPlane,
    kind: &str,
    namespace: &str,
    name: &str,
    path: &str,
) -> String {
    cp.kubectl(&[
        "get",
        kind,
        name,
        "-n",
        namespace,
        "-o",
        &format!("jsonpath={{{path}}}"),
    ])
    .stdout
    .trim()
    .to_string()
}

#[test]
fn pods_and_servers_racing_for_four_devices_never_share_one() {
    let node = Node::start(env!("CARGO_BIN_EXE_kubeplace").as_ref());
    let cp: &ControlPlane = &node;
    super::install_crds(cp);
    let node_name = cp
        .kubectl(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"])
        .ok()
        .trim()
        .to_string();

    let (replicas, leader) = mirroring_replicas(cp, CONFIG);

    let devices: String = (0..DEVICES)
        .map(|i| format!("{{name: race-{i}}}"))
        .collect::<Vec<_>>()
        .join(", ");
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n---\n\
             apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: e2e-race}}\n\
             spec:\n  selectors:\n  - cel: {{expression: 'device.driver == \"{DRIVER}\"'}}\n---\n\
             apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {node_name}-race}}\n\
             spec:\n  driver: {DRIVER}\n  nodeName: {node_name}\n  pool: {{name: {node_name}, generation: 1, resourceSliceCount: 1}}\n\
             \x20 devices: [{devices}]\n---\n\
             apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: race.device}}\n\
             spec: {{vcpus: 1, memoryMb: 1, extraSpecs: {{'resources:VCPU': '0', 'resources:MEMORY_MB': '0', 'resources:CUSTOM_E2E_RACE': '1'}}}}\n---\n\
             apiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata: {{name: race-image}}\nspec: {{properties: {{os_distro: ubuntu}}}}\n"
        ),
    )
    .ok();
    let started = Instant::now();
    loop {
        let count = cp
            .kubectl(&[
                "get",
                "flavor",
                "race.device",
                "-o",
                "jsonpath={.status.candidateCount}",
            ])
            .stdout;
        if count.trim() == DEVICES.to_string() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the devices never became candidates: {count:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // 8 pods with a claim each and 8 Servers, all at once; the leader killed halfway.
    let stop = AtomicBool::new(false);
    let created = AtomicUsize::new(0);
    let twice: Mutex<Vec<BTreeMap<String, BTreeSet<String>>>> = Mutex::new(Vec::new());
    let samples = AtomicUsize::new(0);
    let killed_at = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let held = holders(cp, &node_name);
                if held.values().any(|h| h.len() > 1) {
                    twice.lock().unwrap().push(held);
                }
                samples.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let mut racers = Vec::new();
        for i in 0..EACH {
            let created = &created;
            racers.push(s.spawn(move || {
                cp.kubectl_stdin(&["create", "-f", "-"], &pod_with_claim(&i.to_string()))
                    .ok();
                created.fetch_add(1, Ordering::Relaxed);
            }));
            racers.push(s.spawn(move || {
                cp.kubectl_stdin(&["create", "-f", "-"], &server(&i.to_string()))
                    .ok();
                created.fetch_add(1, Ordering::Relaxed);
            }));
        }
        let killer = s.spawn(|| {
            while created.load(Ordering::Relaxed) < EACH {
                std::thread::sleep(Duration::from_millis(10));
            }
            replicas[leader].process.kill();
            started.elapsed()
        });
        for r in racers {
            r.join().unwrap();
        }
        let killed_at = killer.join().unwrap();
        // Until the other replica decides and the 4 devices are held and stay so.
        let deadline = Instant::now() + Duration::from_secs(150);
        let mut full_since: Option<Instant> = None;
        while Instant::now() < deadline {
            let took_over = replicas[1 - leader]
                .process
                .output()
                .contains("deciding claims");
            let held = holders(cp, &node_name).len();
            match (held == DEVICES && took_over, full_since) {
                (true, Some(since)) if since.elapsed() > Duration::from_secs(5) => break,
                (true, None) => full_since = Some(Instant::now()),
                (false, _) => full_since = None,
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        stop.store(true, Ordering::Relaxed);
        sampler.join().unwrap();
        killed_at
    });

    let held = holders(cp, &node_name);
    let pods_won: Vec<String> = (0..EACH)
        .filter(|i| {
            !jsonpath(
                cp,
                "resourceclaim",
                &format!("race-claim-{i}"),
                ".status.allocation.devices.results[0].device",
            )
            .is_empty()
        })
        .map(|i| format!("race-pod-{i}"))
        .collect();
    let servers_won: Vec<String> = (0..EACH)
        .filter(|i| {
            jsonpath(
                cp,
                "server",
                &format!("race-server-{i}"),
                ".status.conditions[?(@.type==\"Scheduled\")].status",
            ) == "True"
        })
        .map(|i| format!("race-server-{i}"))
        .collect();
    let survivor = &replicas[1 - leader];
    let log = survivor.process.output();
    eprintln!(
        "devices: {} pods and {} servers won {DEVICES} devices; leader killed {killed_at:?} after the start; {} samples; holders {held:?}",
        pods_won.len(),
        servers_won.len(),
        samples.load(Ordering::Relaxed)
    );
    // How often kube-scheduler's allocation was refused at the ledger (it then tries again).
    let refused = cp
        .kubectl(&[
            "get",
            "events",
            "-n",
            NS,
            "--field-selector",
            "reason=FailedScheduling",
            "-o",
            "jsonpath={.items[*].message}",
        ])
        .stdout
        .matches("kubeplace holds")
        .count();
    eprintln!("devices: kube-scheduler's allocations refused by kubeplace's ledger: {refused}");
    let twice = twice.into_inner().unwrap();
    assert!(
        twice.is_empty(),
        "a device was held twice at some moment: {:?}",
        twice.first()
    );
    assert!(
        log.contains("deciding claims"),
        "the surviving replica never took over"
    );
    assert_eq!(
        held.len(),
        DEVICES,
        "every device is held in the end: {held:?}"
    );
    assert_eq!(
        pods_won.len() + servers_won.len(),
        DEVICES,
        "pods {pods_won:?}, servers {servers_won:?}"
    );
    // The losers wait, saying why.
    for i in 0..EACH {
        let pod = format!("race-pod-{i}");
        if !pods_won.contains(&pod) {
            assert_eq!(
                jsonpath(
                    cp,
                    "pod",
                    &pod,
                    ".status.conditions[?(@.type==\"PodScheduled\")].status"
                ),
                "False",
                "{pod} waits"
            );
        }
        let server = format!("race-server-{i}");
        if !servers_won.contains(&server) {
            let reason = jsonpath(
                cp,
                "server",
                &server,
                ".status.conditions[?(@.type==\"Scheduled\")].reason",
            );
            assert!(!reason.is_empty(), "{server} waits with no reason");
        }
    }
    // Every Server that won shows kube-scheduler its device: a reservation claim allocated
    // to the device its Allocation holds.
    for server in &servers_won {
        let name = server.trim_start_matches("race-server-");
        let claim = format!("kubeplace-reservation-race-server-{name}");
        let device = jsonpath(
            cp,
            "resourceclaim",
            &claim,
            ".status.allocation.devices.results[0].device",
        );
        assert!(
            held.get(&device)
                .is_some_and(|h| h.contains(&format!("server:{server}"))),
            "{claim} names {device:?}; holders {held:?}"
        );
    }

    // Servers first, then pods: kube-scheduler gives no pod a device a Server holds.
    delete_pods_now(cp, NS);
    delete_claims(cp, NS);
    cp.kubectl(&["delete", "servers", "--all", "-n", NS, "--timeout=60s"])
        .ok();
    wait_for(cp, &node_name, 60, "every device free", |held| {
        held.is_empty()
    });
    for i in 0..DEVICES {
        cp.kubectl_stdin(&["create", "-f", "-"], &server(&format!("first-{i}")))
            .ok();
    }
    wait_for(
        cp,
        &node_name,
        90,
        "the Servers holding every device",
        |held| held.len() == DEVICES && held.values().all(|h| h.len() == 1),
    );
    wait_for_claims(cp, DEVICES);
    for i in 0..DEVICES {
        cp.kubectl_stdin(
            &["create", "-f", "-"],
            &pod_with_claim(&format!("late-{i}")),
        )
        .ok();
    }
    // kube-scheduler has had its look: every late pod waits, no device is held twice.
    let look = Instant::now();
    while look.elapsed() < Duration::from_secs(10) {
        let held = holders(cp, &node_name);
        assert!(
            held.values().all(|h| h.len() == 1),
            "a pod was given a Server's device: {held:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for i in 0..DEVICES {
        let pod = format!("race-pod-late-{i}");
        assert_eq!(
            jsonpath(
                cp,
                "pod",
                &pod,
                ".status.conditions[?(@.type==\"PodScheduled\")].status"
            ),
            "False",
            "{pod} waits while the Servers hold every device"
        );
    }
    eprintln!("devices: with the Servers holding every device, {DEVICES} pods wait");
    delete_pods_now(cp, NS);
    cp.kubectl(&["delete", "servers", "--all", "-n", NS, "--wait=false"])
        .ok();
}

/// Two replicas with `--mirror-cluster` behind one webhook address (registered as
/// `config`): claims, and devices kube-scheduler allocates, decided by the leader's
/// ledger. The replicas, and which of them leads.
pub(super) fn mirroring_replicas(cp: &ControlPlane, config_name: &str) -> ([Operator; 2], usize) {
    // Two replicas behind one webhook address; claims, and devices kube-scheduler
    // allocates, decided by the leader's ledger.
    let certs = kubeplace::serving::certs::self_signed("127.0.0.1").unwrap();
    let cert = cp.kubeconfig.with_file_name(format!("{config_name}.crt"));
    let key = cp.kubeconfig.with_file_name(format!("{config_name}.key"));
    let ca = cp
        .kubeconfig
        .with_file_name(format!("{config_name}-ca.crt"));
    std::fs::write(&cert, &certs.cert_pem).unwrap();
    std::fs::write(&key, &certs.key_pem).unwrap();
    std::fs::write(&ca, &certs.ca_pem).unwrap();
    let ports = [support::free_port(), support::free_port()];
    let (proxy, _) = round_robin(ports.to_vec());
    let base = kubeplace::webhook::config::base_url("127.0.0.1", proxy);
    let mut config =
        kubeplace::webhook::config::webhook_configuration(config_name, &base, &certs.ca_pem);
    let webhooks = config.webhooks.get_or_insert_with(Vec::new);
    webhooks.retain(|w| w.name == "allocations.kubeplace.io");
    webhooks.push(kubeplace::webhook::config::device_claims_webhook(
        &base,
        &certs.ca_pem,
    ));
    webhooks.push(kubeplace::webhook::config::reservations_webhook(
        &base,
        &certs.ca_pem,
    ));
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &serde_json::to_string(&config).unwrap(),
    )
    .ok();
    let mirror = [
        "--mirror-cluster",
        "--headroom-interval=1",
        "--reservation-image=localhost/kubeplace-pause:1",
    ];
    let replicas = [
        replica_with(
            cp,
            &format!("{config_name}-a"),
            (&cert, &key, &ca),
            config_name,
            (ports[0], support::free_port()),
            &mirror,
        )
        .0,
        replica_with(
            cp,
            &format!("{config_name}-b"),
            (&cert, &key, &ca),
            config_name,
            (ports[1], support::free_port()),
            &mirror,
        )
        .0,
    ];
    let leader = deciding_leader(&[&replicas[0], &replicas[1]]);
    (replicas, leader)
}

/// A Server asking for one device.
fn server(name: &str) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {{name: race-server-{name}, namespace: {NS}}}\nspec: {{flavor: race.device, image: race-image}}\n"
    )
}

/// A pod with a ResourceClaim of one device of its own.
fn pod_with_claim(name: &str) -> String {
    claim_and_pod(
        NS,
        &format!("race-claim-{name}"),
        &format!("race-pod-{name}"),
        "{deviceClassName: e2e-race}",
    )
}

/// A ResourceClaim asking for one device (`exactly`, as YAML) and a pause pod using it.
pub(super) fn claim_and_pod(namespace: &str, claim: &str, pod: &str, exactly: &str) -> String {
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: {claim}, namespace: {namespace}}}\n\
         spec:\n  devices:\n    requests:\n    - {{name: device, exactly: {exactly}}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {{name: {pod}, namespace: {namespace}}}\n\
         spec:\n  resourceClaims: [{{name: device, resourceClaimName: {claim}}}]\n\
         \x20 terminationGracePeriodSeconds: 0\n\
         \x20 containers:\n  - {{name: c, image: localhost/kubeplace-pause:1, resources: {{claims: [{{name: device}}]}}}}\n"
    )
}

/// Every allocation result of every ResourceClaim in `namespace` now, with its claim.
pub(super) fn claim_results(cp: &ControlPlane, namespace: &str) -> Vec<(Value, Value)> {
    let claims: Value = serde_json::from_str(
        &cp.kubectl(&["get", "resourceclaims", "-n", namespace, "-o", "json"])
            .stdout,
    )
    .unwrap_or(Value::Null);
    let mut out = Vec::new();
    for claim in claims["items"].as_array().into_iter().flatten() {
        for result in claim["status"]["allocation"]["devices"]["results"]
            .as_array()
            .into_iter()
            .flatten()
        {
            out.push((claim.clone(), result.clone()));
        }
    }
    out
}

/// Waits until the holders satisfy `done`.
fn wait_for(
    cp: &ControlPlane,
    node: &str,
    seconds: u64,
    what: &str,
    done: impl Fn(&BTreeMap<String, BTreeSet<String>>) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        let held = holders(cp, node);
        if done(&held) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {seconds}s; holders {held:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Waits until `count` reservation claims are allocated.
fn wait_for_claims(cp: &ControlPlane, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = cp
            .kubectl(&[
                "get",
                "resourceclaims",
                "-n",
                NS,
                "-l",
                "kubeplace.io/reservation-for",
                "-o",
                "jsonpath={range .items[*]}{.status.allocation.devices.results[0].device}{\"\\n\"}{end}",
            ])
            .stdout;
        let allocated = out.lines().filter(|l| !l.trim().is_empty()).count();
        if allocated == count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{allocated} of {count} reservation claims allocated"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}
