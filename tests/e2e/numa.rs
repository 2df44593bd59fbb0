//! NUMA claims racing through kubectl against two replicas, the leader SIGKILLed in the
//! middle: pinned host CPUs and 1 GiB pages of one cell are never held by two claims at
//! any moment, and exactly what the cell has is given out.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kubeplace_core::numa::{CpuSet, parse_cpu_set};
use serde_json::Value;

use super::claims::{AllocationReplicas, allocation_replicas, settled};
use super::support::exclusive_lock;
use super::{ControlPlane, crds_installed, eventually};

const PREFIX: &str = "e2e-numa-";
/// The webhook registration of the two replicas.
const CONFIG: &str = "kubeplace-numa";
/// Claims, half pinning one of two CPUs, half taking two of four 1 GiB pages.
const CLAIMS: usize = 24;

/// Two hosts of one cell each: `cpus` with four dedicated CPUs (Placement counts 4 PCPU),
/// `pages` with four 1 GiB pages.
fn cloud() -> String {
    let root = |name: &str| {
        format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: {name}\nspec:\n  traits: [COMPUTE_NODE]\n---\n"
        )
    };
    root("e2e-numa-cpus")
        + "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: e2e-numa-cpus-n0\nspec:\n  parent: e2e-numa-cpus\n  inventories:\n    PCPU: {total: 4}\n    MEMORY_MB: {total: 8192}\n  traits: [HW_NUMA_ROOT]\n  numaCell:\n    cpus: 0-3\n---\n"
        + &root("e2e-numa-pages")
        + "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: e2e-numa-pages-n0\nspec:\n  parent: e2e-numa-pages\n  inventories:\n    VCPU: {total: 16}\n    MEMORY_MB: {total: 8192}\n  traits: [HW_NUMA_ROOT]\n  numaCell:\n    cpus: 0-15\n    memoryMib: 8192\n    pages:\n    - {sizeKiB: 1048576, total: 4}\n"
}

/// Claim `i`: an even one pins vCPU 0 to CPU `i / 2 % 2` of the `cpus` cell; an odd one
/// takes 2 GiB in 1 GiB pages of the `pages` cell.
fn claim(i: usize) -> String {
    let consumer = format!("00000000-0000-4000-8000-{:012}", 5000 + i);
    let head = format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: {PREFIX}{i}\nspec:\n  consumer: {consumer}\n"
    );
    if i % 2 == 0 {
        let cpu = i / 2 % 2;
        head + &format!(
            "  allocations:\n  - provider: e2e-numa-cpus-n0\n    resources: {{PCPU: 1, MEMORY_MB: 256}}\n  numa:\n    cells:\n    - {{guestCell: 0, provider: e2e-numa-cpus-n0, hostCell: 0, memoryMiB: 256, pinning: {{\"0\": {cpu}}}, heldCpus: \"{cpu}\"}}\n"
        )
    } else {
        head + "  allocations:\n  - provider: e2e-numa-pages-n0\n    resources: {VCPU: 1, MEMORY_MB: 2048}\n  numa:\n    cells:\n    - {guestCell: 0, provider: e2e-numa-pages-n0, hostCell: 0, memoryMiB: 2048, pageSizeKiB: 1048576, sharedVcpus: 1}\n"
    }
}

/// What the claims the API server holds, and that were not refused, hold at this moment:
/// CPUs of the `cpus` cell held twice, and 1 GiB pages of the `pages` cell in all.
fn held_now(cp: &ControlPlane) -> (CpuSet, u64) {
    let out = cp.kubectl(&["get", "allocations", "-o", "json"]);
    let list: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
    let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
    let mut pages = 0;
    for item in list["items"].as_array().into_iter().flatten() {
        let name = item["metadata"]["name"].as_str().unwrap_or("");
        if !name.starts_with(PREFIX) {
            continue;
        }
        let refused = item["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Applied" && c["status"] == "False");
        if refused {
            continue;
        }
        for cell in item["spec"]["numa"]["cells"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(cpus) = cell["heldCpus"].as_str() {
                for cpu in parse_cpu_set(cpus).unwrap() {
                    *seen.entry(cpu).or_default() += 1;
                }
            }
            if cell["pageSizeKiB"] == 1048576 {
                pages += cell["memoryMiB"].as_u64().unwrap() / 1024;
            }
        }
    }
    let twice = seen
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(cpu, _)| cpu)
        .collect();
    (twice, pages)
}

/// Creates claim `i` until it is admitted or refused for room (a moment without a leader
/// refuses it as unavailable, and the caller tries again); whether it was admitted.
fn create(cp: &ControlPlane, i: usize) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = cp.kubectl_stdin(&["create", "-f", "-"], &claim(i));
        if run.success {
            return true;
        }
        if run.stderr.contains("already held") || run.stderr.contains("pages of 1048576") {
            return false;
        }
        if run.stderr.contains("AlreadyExists") || run.stderr.contains("already exists") {
            // An earlier try was stored though its answer was lost.
            return true;
        }
        assert!(
            Instant::now() < deadline,
            "claim {i} neither admitted nor refused for room: {}",
            run.stderr
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn pinned_cpus_and_hugepages_are_never_held_twice_through_two_replicas_and_a_killed_leader() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    let AllocationReplicas {
        replicas: [a, b],
        leader,
        connections,
        ..
    } = allocation_replicas(cp, CONFIG);
    cp.kubectl_stdin(&["apply", "-f", "-"], &cloud()).ok();
    for cell in ["e2e-numa-cpus-n0", "e2e-numa-pages-n0"] {
        let root = cell.trim_end_matches("-n0");
        eventually(
            cp,
            &[
                "get",
                "resourceprovider",
                cell,
                "-o",
                "jsonpath={.status.root}",
            ],
            root,
        );
    }
    let leading = if leader == 0 { &a } else { &b };
    let following = if leader == 0 { &b } else { &a };
    let stop = AtomicBool::new(false);
    let samples = Mutex::new(Vec::new());
    let admitted: Vec<bool> = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                samples.lock().unwrap().push(held_now(cp));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        // Half the claims race at once and the leader is killed among them; the other
        // half race once the other replica has taken over.
        let wave = |range: std::ops::Range<usize>, kill: bool| -> Vec<bool> {
            std::thread::scope(|w| {
                let racers: Vec<_> = range.map(|i| w.spawn(move || create(cp, i))).collect();
                if kill {
                    std::thread::sleep(Duration::from_millis(150));
                    leading.process.kill();
                }
                racers.into_iter().map(|r| r.join().unwrap()).collect()
            })
        };
        let mut admitted = wave(0..CLAIMS / 2, true);
        admitted.extend(wave(CLAIMS / 2..CLAIMS, false));
        let count = admitted.iter().filter(|a| **a).count();
        settled(cp, PREFIX, count);
        std::thread::sleep(Duration::from_secs(2));
        stop.store(true, Ordering::Relaxed);
        sampler.join().unwrap();
        admitted
    });
    let samples = samples.into_inner().unwrap();
    let verdicts = settled(cp, PREFIX, admitted.iter().filter(|a| **a).count());
    let counted = |parity: usize| {
        verdicts
            .iter()
            .filter(|(name, status, _)| {
                status == "True"
                    && name
                        .trim_start_matches(PREFIX)
                        .parse::<usize>()
                        .is_ok_and(|i| i % 2 == parity)
            })
            .count()
    };
    let (pinned, paged) = (counted(0), counted(1));
    let log = following.process.output();
    let per_replica: Vec<usize> = connections
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    let mut names: Vec<String> = (0..CLAIMS).map(|i| format!("{PREFIX}{i}")).collect();
    names.splice(
        0..0,
        ["delete", "allocation", "--ignore-not-found", "--wait=false"].map(String::from),
    );
    cp.kubectl(&names.iter().map(String::as_str).collect::<Vec<_>>())
        .ok();
    cp.kubectl(&[
        "delete",
        "resourceprovider",
        "e2e-numa-cpus-n0",
        "e2e-numa-pages-n0",
        "--ignore-not-found",
    ])
    .ok();
    cp.kubectl(&[
        "delete",
        "resourceprovider",
        "e2e-numa-cpus",
        "e2e-numa-pages",
        "--ignore-not-found",
    ])
    .ok();
    following.process.stop(Duration::from_secs(10));
    // The webhook registration goes with the replicas: the tests after this one share the
    // API server.
    cp.kubectl(&[
        "delete",
        "validatingwebhookconfiguration",
        CONFIG,
        "--ignore-not-found",
    ])
    .ok();
    eprintln!(
        "NUMA race: {} of {CLAIMS} claims admitted ({pinned} pinning, {paged} with 1 GiB pages counted), {} samples, webhook connections per replica {per_replica:?}",
        admitted.iter().filter(|a| **a).count(),
        samples.len()
    );
    assert!(
        log.contains("deciding claims"),
        "the surviving replica never took over the claims:\n{log}"
    );
    assert_eq!(pinned, 2, "one claim per CPU of two: {verdicts:?}");
    assert_eq!(paged, 2, "two claims of two of four pages: {verdicts:?}");
    assert_eq!(
        admitted.iter().filter(|a| **a).count(),
        4,
        "only what the cells hold was admitted: {admitted:?}"
    );
    let bad: Vec<&(CpuSet, u64)> = samples
        .iter()
        .filter(|(twice, pages)| !twice.is_empty() || *pages > 4)
        .collect();
    assert!(
        bad.is_empty(),
        "a CPU held twice or pages past the pool at some moment: {bad:?}"
    );
    assert!(samples.len() > 10, "sampled throughout: {}", samples.len());
}
