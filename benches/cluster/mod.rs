//! What the benches that run kubeplace over the real control plane share: the 10k-tree
//! cloud, created through the API server many at a time, and reading the operator's metrics
//! and memory.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use kubeplace_api::Kind;
use serde_json::{Value, json};

/// Creates in flight at once while loading the trees.
pub(crate) const CREATE_CONCURRENCY: usize = 32;

pub(crate) fn object(kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": kind,
           "metadata": {"name": name}, "spec": spec})
}

pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A plain HTTP GET on the operator's metrics port; the whole reply.
pub(crate) fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    Some(reply)
}

/// The sum of a counter's series in the operator's metrics.
pub(crate) fn counter(port: u16, name: &str) -> f64 {
    http_get(port, "/metrics")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |sum, n| sum + n)
}

/// The trees of benches/placement-vs-real.py: ten sharing disk pools, and per tree a compute
/// node with two NUMA cells and one or two SR-IOV functions.
pub(crate) fn tree_cloud(trees: usize) -> Vec<Value> {
    let agg = |i: usize| format!("00000000-0000-4000-8000-{:012}", i % 10);
    let inv = |total: i64, ratio: f64| json!({"total": total, "allocationRatio": ratio});
    let mut docs = Vec::with_capacity(trees * 9 / 2 + 10);
    for s in 0..10 {
        docs.push(object(
            "ResourceProvider",
            &format!("pool-{s}"),
            json!({"inventories": {"DISK_GB": inv(100_000, 1.0)},
                   "traits": ["MISC_SHARES_VIA_AGGREGATE", "STORAGE_DISK_SSD"],
                   "aggregates": [agg(s)]}),
        ));
    }
    for i in 0..trees {
        let cn = format!("cn{i:06}");
        let mut traits = vec!["COMPUTE_NODE"];
        if i % 2 == 0 {
            traits.push("HW_CPU_X86_AVX2");
        }
        if i % 10 == 3 {
            traits.push("CUSTOM_GOLD");
        }
        match i % 3 {
            0 => traits.push("CUSTOM_A"),
            1 => traits.push("CUSTOM_B"),
            _ => {}
        }
        let mut spec = json!({"traits": traits, "aggregates": [agg(i)]});
        if i % 5 != 0 {
            spec["inventories"] = json!({"DISK_GB": inv(2000, 1.0)});
        }
        docs.push(object("ResourceProvider", &cn, spec));
        for cell in 0..2 {
            let numa = format!("{cn}-numa{cell}");
            docs.push(object(
                "ResourceProvider",
                &numa,
                json!({"parent": cn,
                       "inventories": {"VCPU": inv(32, 4.0), "PCPU": inv(16, 1.0),
                                       "MEMORY_MB": inv(131_072, 1.5)}}),
            ));
            if cell == 0 || i % 2 == 1 {
                docs.push(object(
                    "ResourceProvider",
                    &format!("{numa}-pf0"),
                    json!({"parent": numa,
                           "inventories": {"SRIOV_NET_VF": inv(8, 1.0)},
                           "traits": ["HW_NIC_SRIOV", format!("CUSTOM_PHYSNET_{}", i % 4)]}),
                ));
            }
        }
    }
    docs
}

/// The operator's resident and peak memory, from /proc (`VmRSS`, `VmHWM`), in MiB.
pub(crate) fn memory_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Creates `docs` through the API server, [`CREATE_CONCURRENCY`] at a time; the failures.
pub(crate) async fn create_all(client: kube::Client, docs: Vec<Value>) -> usize {
    let total = docs.len();
    let started = Instant::now();
    let mut done = 0usize;
    let mut failed = 0usize;
    let mut results = futures::stream::iter(docs.into_iter().map(|doc| {
        let kind = doc["kind"]
            .as_str()
            .and_then(Kind::from_name)
            .expect("a kubeplace kind");
        let api: Api<DynamicObject> = match doc["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &kind.api_resource()),
            None => Api::all_with(client.clone(), &kind.api_resource()),
        };
        async move {
            let object: DynamicObject = serde_json::from_value(doc).expect("an object");
            // A create the API server could not take at once (it sheds load with 429) is
            // tried again a few times.
            for attempt in 0..5u32 {
                match api.create(&PostParams::default(), &object).await {
                    Ok(_) => return true,
                    Err(kube::Error::Api(e)) if e.code == 409 => return true,
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
                    }
                }
            }
            false
        }
    }))
    .buffer_unordered(CREATE_CONCURRENCY);
    while let Some(ok) = results.next().await {
        done += 1;
        if !ok {
            failed += 1;
        }
        if done % 5000 == 0 {
            eprintln!(
                "created {done} of {total} objects in {:.0?}",
                started.elapsed()
            );
        }
    }
    failed
}
