//! One inventory of a Node's cores on a real node: 8 pods (each asking kube-scheduler for
//! one core) and 8 Servers (each of one core, held on the Node by a reservation pod) start
//! together, against two kubeplace replicas with `--mirror-cluster`, and the leader is
//! SIGKILLed in the middle. At no sample does the Node run more cores than it has; in the
//! end its free cores are taken, every placed Server's reservation runs, and the losers
//! wait: pods Pending (or refused by the kubelet), Servers `Scheduled=False`. Run alone, as
//! root, like `mirror.rs`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::devices::{delete_pods_now, mirroring_replicas};
use crate::support::{ControlPlane, Node};
use kubeplace_policy::mirror::quantity::in_thousandths;

const NS: &str = "cores";
const EACH: usize = 8;

/// What the Node runs: the cores (in millicores) of its Running pods, by pod; and the
/// phase of each pod of the race's namespace.
struct Running {
    millicores: i64,
    phases: Phases,
}

/// Each pod of the race's namespace: its name, phase and whether it is bound to the Node.
type Phases = Vec<(String, String, bool)>;

fn running(cp: &ControlPlane) -> Running {
    let pods: Value =
        serde_json::from_str(&cp.kubectl(&["get", "pods", "-A", "-o", "json"]).stdout)
            .unwrap_or(Value::Null);
    let mut millicores = 0;
    let mut phases = Vec::new();
    for pod in pods["items"].as_array().into_iter().flatten() {
        let phase = pod["status"]["phase"].as_str().unwrap_or("").to_string();
        if phase == "Running" {
            for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
                if let Some(cpu) = c["resources"]["requests"]["cpu"].as_str() {
                    millicores += in_thousandths(cpu).unwrap_or(0);
                }
            }
        }
        if pod["metadata"]["namespace"] == NS {
            let bound = pod["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| !n.is_empty());
            phases.push((
                pod["metadata"]["name"].as_str().unwrap_or("").to_string(),
                phase,
                bound,
            ));
        }
    }
    Running { millicores, phases }
}

fn server_scheduled(cp: &ControlPlane, name: &str) -> String {
    cp.kubectl(&[
        "get",
        "server",
        name,
        "-n",
        NS,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Scheduled\")].status}",
    ])
    .stdout
    .trim()
    .to_string()
}

#[test]
fn pods_and_servers_racing_for_a_nodes_cores_never_share_one() {
    let node = Node::start(env!("CARGO_BIN_EXE_kubeplace").as_ref());
    let cp: &ControlPlane = &node;
    super::install_crds(cp);
    let allocatable = cp
        .kubectl(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[0].status.allocatable.cpu}",
        ])
        .ok()
        .trim()
        .to_string();
    let allocatable = in_thousandths(&allocatable).expect("a quantity");
    let (replicas, leader) = mirroring_replicas(cp, "kubeplace-cores");
    // A Server's reservation pod has the flavor's memory as its limit: 32 MiB, room for a
    // container to start in (at 1 MiB the kernel killed the pod's first process at times).
    cp.kubectl_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n---\n\
             apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: cores.one}}\nspec: {{vcpus: 1, memoryMb: 32}}\n---\n\
             apiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata: {{name: cores-image}}\nspec: {{properties: {{os_distro: ubuntu}}}}\n"
        ),
    )
    .ok();
    // The Node's whole free cores, as the mirror counts them.
    let started = Instant::now();
    let free: usize = loop {
        let headroom = cp
            .kubectl(&[
                "get",
                "flavor",
                "cores.one",
                "-o",
                "jsonpath={.status.headroom.servers}",
            ])
            .stdout;
        if let Ok(n) = headroom.trim().parse::<usize>() {
            break n;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no headroom for cores.one: {headroom:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!((1..EACH).contains(&free), "free cores: {free}");

    let stop = AtomicBool::new(false);
    let created = AtomicUsize::new(0);
    let over: Mutex<Vec<(i64, Phases)>> = Mutex::new(Vec::new());
    let samples = AtomicUsize::new(0);
    let killed_at = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let now = running(cp);
                if now.millicores > allocatable {
                    over.lock().unwrap().push((now.millicores, now.phases));
                }
                samples.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let mut racers = Vec::new();
        for i in 0..EACH {
            let created = &created;
            racers.push(s.spawn(move || {
                cp.kubectl_stdin(
                    &["create", "-f", "-"],
                    &format!(
                        "apiVersion: v1\nkind: Pod\nmetadata: {{name: core-pod-{i}, namespace: {NS}}}\n\
                         spec:\n  terminationGracePeriodSeconds: 0\n  containers:\n  - {{name: c, image: localhost/kubeplace-pause:1, resources: {{requests: {{cpu: '1', memory: 1Mi}}}}}}\n"
                    ),
                )
                .ok();
                created.fetch_add(1, Ordering::Relaxed);
            }));
            racers.push(s.spawn(move || {
                cp.kubectl_stdin(
                    &["create", "-f", "-"],
                    &format!(
                        "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {{name: core-server-{i}, namespace: {NS}}}\nspec: {{flavor: cores.one, image: cores-image}}\n"
                    ),
                )
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
        // Until the other replica decides, the free cores are taken (pods Running and
        // Servers placed with their reservations Running), and it stays so.
        let deadline = Instant::now() + Duration::from_secs(180);
        let mut settled_since: Option<Instant> = None;
        while Instant::now() < deadline {
            let took_over = replicas[1 - leader]
                .process
                .output()
                .contains("deciding claims");
            let now = running(cp);
            let running_here = now
                .phases
                .iter()
                .filter(|(_, phase, _)| phase == "Running")
                .count();
            let placed = (0..EACH)
                .filter(|i| server_scheduled(cp, &format!("core-server-{i}")) == "True")
                .count();
            let waiting_bound = now
                .phases
                .iter()
                .any(|(_, phase, bound)| phase == "Pending" && *bound);
            // Every Running pod here is a pod of the race or a placed Server's reservation.
            let settled =
                took_over && running_here == free && placed <= running_here && !waiting_bound;
            match (settled, settled_since) {
                (true, Some(since)) if since.elapsed() > Duration::from_secs(5) => break,
                (true, None) => settled_since = Some(Instant::now()),
                (false, _) => settled_since = None,
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        stop.store(true, Ordering::Relaxed);
        sampler.join().unwrap();
        killed_at
    });

    let now = running(cp);
    let phase = |name: &str| {
        now.phases
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, p, _)| p.clone())
            .unwrap_or_default()
    };
    let pods_won: Vec<usize> = (0..EACH)
        .filter(|i| phase(&format!("core-pod-{i}")) == "Running")
        .collect();
    let servers_won: Vec<usize> = (0..EACH)
        .filter(|i| server_scheduled(cp, &format!("core-server-{i}")) == "True")
        .collect();
    let refused_by_kubelet = (0..EACH)
        .filter(|i| phase(&format!("core-pod-{i}")) == "Failed")
        .count();
    eprintln!(
        "cores: {} pods and {} servers won {free} free cores; {refused_by_kubelet} pods refused by the kubelet; leader killed {killed_at:?} after the start; {} samples",
        pods_won.len(),
        servers_won.len(),
        samples.load(Ordering::Relaxed)
    );
    let over = over.into_inner().unwrap();
    assert!(
        over.is_empty(),
        "the Node ran more than {allocatable}m at some moment: {:?}",
        over.first()
    );
    assert!(
        replicas[1 - leader]
            .process
            .output()
            .contains("deciding claims"),
        "the surviving replica never took over"
    );
    assert_eq!(
        pods_won.len() + servers_won.len(),
        free,
        "pods {pods_won:?}, servers {servers_won:?}: {:?}",
        now.phases
    );
    // Each placed Server's core is held on the Node by its Running reservation pod.
    for i in &servers_won {
        let pod = format!("kubeplace-reservation-core-server-{i}");
        assert_eq!(phase(&pod), "Running", "{pod}: {:?}", now.phases);
    }
    // The losers wait, saying why.
    for i in 0..EACH {
        if !servers_won.contains(&i) {
            assert_eq!(
                server_scheduled(cp, &format!("core-server-{i}")),
                "False",
                "core-server-{i} waits"
            );
        }
        if !pods_won.contains(&i) {
            let p = phase(&format!("core-pod-{i}"));
            assert!(
                p == "Pending" || p == "Failed",
                "core-pod-{i} is {p:?}, neither waiting nor refused"
            );
        }
    }
    delete_pods_now(cp, NS);
    cp.kubectl(&["delete", "servers", "--all", "-n", NS, "--wait=false"])
        .ok();
}
