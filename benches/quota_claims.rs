//! Claims decided with quotas on, offline: the claims ledger over a store of [`TREES`]
//! compute nodes and [`CLAIMS`] claims spread over [`PROJECTS`] projects, deciding
//! [`DECIDED`] new claims one after another (each delivered to the store after its
//! decision, as the watch does), once with no quota and once with a ProjectQuota for every
//! project and a DefaultProjectQuota. Then headroom over the same cloud: the count alone,
//! and with what one project's quota allows.
//!
//! Run with `cargo bench --bench quota_claims`; `KUBEPLACE_BENCH_TREES=N` sets the number
//! of compute nodes. It prints a markdown table.

use std::time::{Duration, Instant};

use kubeplace_api::{Kind, Object};
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_policy::admission::Operation;
use kubeplace_policy::claims::Ledger;
use kubeplace_policy::scheduling::headroom::headroom;
use kubeplace_policy::store::Store;

const TREES: usize = 10_000;
const PROJECTS: usize = 1_000;
const CLAIMS: usize = 10_000;
const DECIDED: usize = 20_000;

fn object(kind: Kind, value: serde_json::Value) -> Object {
    Object::from_value(kind, value).expect("a well-formed object")
}

fn claim(name: &str, n: usize, host: usize, project: usize) -> Object {
    object(
        Kind::Allocation,
        serde_json::json!({
            "apiVersion": "kubeplace.io/v1alpha1", "kind": "Allocation",
            "metadata": {"name": name, "annotations": {
                "placement.kubeplace.io/project-id": format!("p{project}"),
                "placement.kubeplace.io/consumer-type": "INSTANCE"}},
            "spec": {"consumer": format!("00000000-0000-4000-8000-{n:012}"),
                     "allocations": [{"provider": format!("cn{host}"),
                                      "resources": {"VCPU": 1, "MEMORY_MB": 512}}]}
        }),
    )
}

fn cloud(trees: usize, quotas: bool) -> Store {
    let mut store = Store::default();
    store.defer_repacks();
    for i in 0..trees {
        store.put(object(
            Kind::ResourceProvider,
            serde_json::json!({
                "apiVersion": "kubeplace.io/v1alpha1", "kind": "ResourceProvider",
                "metadata": {"name": format!("cn{i}")},
                "spec": {"inventories": {"VCPU": {"total": 64}, "MEMORY_MB": {"total": 262144}},
                         "traits": ["COMPUTE_NODE"]}
            }),
        ));
    }
    store.put(object(
        Kind::Flavor,
        serde_json::json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "Flavor",
                           "metadata": {"name": "b.small"}, "spec": {"vcpus": 1, "memoryMb": 512}}),
    ));
    if quotas {
        for p in 0..PROJECTS {
            store.put(object(
                Kind::ProjectQuota,
                serde_json::json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "ProjectQuota",
                    "metadata": {"name": "limits", "namespace": format!("ns{p}")},
                    "spec": {"projectId": format!("p{p}"),
                             "limits": {"class:VCPU": 1_000_000, "class:MEMORY_MB": -1, "servers": 100_000}}}),
            ));
        }
        store.put(object(
            Kind::DefaultProjectQuota,
            serde_json::json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "DefaultProjectQuota",
                "metadata": {"name": "default"}, "spec": {"limits": {"servers": 100_000}}}),
        ));
    }
    for i in 0..CLAIMS {
        store.put(claim(&format!("c{i}"), i, i % trees, i % PROJECTS));
    }
    store.finish_repacks();
    store
}

/// Decision times of [`DECIDED`] claims, sorted.
fn decide_all(store: &mut Store) -> Vec<Duration> {
    let mut ledger = Ledger::new(Duration::from_secs(30));
    let trees = store.index().len().max(1);
    let mut times = Vec::with_capacity(DECIDED);
    for i in 0..DECIDED {
        let n = CLAIMS + i;
        let o = claim(&format!("c{n}"), n, (n * 7) % trees, n % PROJECTS);
        let started = Instant::now();
        let verdict = ledger.decide(Operation::Create, &o, None, store, Instant::now(), false);
        times.push(started.elapsed());
        assert!(verdict.allowed, "{}", verdict.message);
        store.put(o);
    }
    times.sort();
    times
}

fn at(times: &[Duration], q: f64) -> f64 {
    times[((times.len() as f64 * q) as usize).min(times.len() - 1)].as_secs_f64() * 1e6
}

fn main() {
    let trees = std::env::var("KUBEPLACE_BENCH_TREES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(TREES);
    println!(
        "Claims decided by the ledger: {trees} compute nodes, {CLAIMS} claims over {PROJECTS} projects, {DECIDED} decided\n"
    );
    println!("| quotas | median µs | p99 µs | max µs |");
    println!("|---|---|---|---|");
    let mut medians = Vec::new();
    for quotas in [false, true] {
        let mut store = cloud(trees, quotas);
        let times = decide_all(&mut store);
        medians.push(at(&times, 0.5));
        println!(
            "| {} | {:.1} | {:.1} | {:.1} |",
            if quotas {
                format!("{PROJECTS} ProjectQuotas + default")
            } else {
                "none".into()
            },
            at(&times, 0.5),
            at(&times, 0.99),
            times.last().unwrap().as_secs_f64() * 1e6
        );
    }
    println!(
        "\nWith quotas / without, median: {:.2}×\n",
        medians[1] / medians[0]
    );
    let store = cloud(trees, true);
    println!("| headroom of b.small, cap 1000 | ms |");
    println!("|---|---|");
    let started = Instant::now();
    let h = headroom(&store, &Weighers::default(), "b.small", &[], 1000).expect("counted");
    let count = started.elapsed();
    println!(
        "| the cloud's room ({} fit) | {:.1} |",
        h.fits,
        count.as_secs_f64() * 1e3
    );
    let started = Instant::now();
    let h = h.within_quota_of(&store, "p7");
    let quota = started.elapsed();
    println!(
        "| within project p7's quota ({} servers) | {:.3} |",
        h.within_quota.map_or(-1, |q| q.servers),
        quota.as_secs_f64() * 1e3
    );
    let flavor = match store.get_cluster(Kind::Flavor, "b.small") {
        Some(Object::Flavor(f)) => f.clone(),
        _ => unreachable!("the bench's flavor"),
    };
    let started = Instant::now();
    let rooms = kubeplace_policy::scheduling::headroom::quota_rooms(&store, &flavor, Some(1000));
    println!(
        "| a Flavor status's quota rooms ({} listed of {PROJECTS} quotas) | {:.3} |",
        rooms.len(),
        started.elapsed().as_secs_f64() * 1e3
    );
}
