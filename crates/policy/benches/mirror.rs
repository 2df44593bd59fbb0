//! The cluster mirror at 1,000 Nodes, each with a ResourceSlice of 8 devices and 10 bound
//! pods (8,000 device providers, 10,000 pod Allocations): how long the whole set takes to
//! mirror into a store (as `kubeplace apply` and a first list do), how long one Node's
//! change takes to reach the index (the mirror's share of a change reflected), and how many
//! bytes the store and the mirror keep per mirrored device and per pod (a counting
//! allocator: live bytes after each phase).
//!
//! Run: `cargo bench -p kubeplace-policy --bench mirror`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use kubeplace_api::cluster_source::{ClusterSource, SourceKind};
use kubeplace_policy::mirror::Mirror;
use kubeplace_policy::store::Store;
use serde_json::json;

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const NODES: usize = 1_000;
const DEVICES: usize = 8;
const PODS: usize = 10;

fn source(kind: SourceKind, value: serde_json::Value) -> ClusterSource {
    ClusterSource::from_value(kind, value).expect("a well-formed object")
}

fn node(i: usize, cpu: usize) -> ClusterSource {
    source(
        SourceKind::Node,
        json!({
            "metadata": {"name": format!("node{i:04}"), "uid": format!("00000000-0000-4000-8000-{i:012}"),
                "labels": {"kubernetes.io/arch": "amd64", "feature.node.kubernetes.io/cpu-cpuid.AVX2": "true",
                           "feature.node.kubernetes.io/cpu-cpuid.AESNI": "true", "topology.kubernetes.io/zone": "a"}},
            "status": {"capacity": {"cpu": cpu.to_string(), "memory": "256Gi", "ephemeral-storage": "1Ti", "pods": "110"},
                       "allocatable": {"cpu": format!("{}m", cpu * 1000 - 500), "memory": "250Gi", "ephemeral-storage": "900Gi", "pods": "110"}},
        }),
    )
}

fn slice(i: usize) -> ClusterSource {
    let devices: Vec<_> = (0..DEVICES)
        .map(|d| json!({"name": format!("gpu-{d}"), "attributes": {"mig-capable": {"bool": d % 2 == 0}, "model": {"string": "a100"}}}))
        .collect();
    source(
        SourceKind::ResourceSlice,
        json!({
            "metadata": {"name": format!("node{i:04}-gpu")},
            "spec": {"driver": "gpu.example.com", "nodeName": format!("node{i:04}"),
                     "pool": {"name": format!("node{i:04}"), "generation": 1, "resourceSliceCount": 1},
                     "devices": devices},
        }),
    )
}

fn pod(i: usize, p: usize) -> ClusterSource {
    source(
        SourceKind::Pod,
        json!({
            "metadata": {"name": format!("pod-{i}-{p}"), "namespace": "shop", "uid": format!("00000000-0000-4000-9000-{:012}", i * PODS + p)},
            "spec": {"nodeName": format!("node{i:04}"), "containers": [
                {"name": "a", "image": "x", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}]},
            "status": {"phase": "Running"},
        }),
    )
}

/// Mirrors every source into the store; the sources stay with the caller, so what is
/// counted after is what the store and the mirror keep.
fn mirror_all(mirror: &mut Mirror, store: &mut Store, sources: &[ClusterSource]) {
    let mut changes = Vec::new();
    for s in sources {
        changes.extend(mirror.observe(s).changes);
    }
    store.apply_changes(changes);
}

fn mib(bytes: isize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    let nodes: Vec<_> = (0..NODES).map(|i| node(i, 64)).collect();
    let slices: Vec<_> = (0..NODES).map(slice).collect();
    let pods: Vec<_> = (0..NODES)
        .flat_map(|i| (0..PODS).map(move |p| pod(i, p)))
        .collect();

    let base = LIVE.load(Ordering::Relaxed);
    let mut mirror = Mirror::default();
    let mut store = Store::default();
    let started = Instant::now();
    mirror_all(&mut mirror, &mut store, &nodes);
    let after_nodes = LIVE.load(Ordering::Relaxed);
    let t_nodes = started.elapsed();
    // Two DeviceClasses, so each device's class is picked by evaluating CEL selectors.
    let classes: Vec<ClusterSource> = [
        ("gpu", r#"device.driver == "gpu.example.com""#),
        ("mig-gpu", r#"device.driver == "gpu.example.com" && device.attributes["gpu.example.com"]["mig-capable"]"#),
    ]
    .iter()
    .map(|(name, expression)| {
        source(
            SourceKind::DeviceClass,
            json!({"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expression}}]}}),
        )
    })
    .collect();
    mirror_all(&mut mirror, &mut store, &classes);
    let started = Instant::now();
    mirror_all(&mut mirror, &mut store, &slices);
    let after_slices = LIVE.load(Ordering::Relaxed);
    let t_slices = started.elapsed();
    let started = Instant::now();
    mirror_all(&mut mirror, &mut store, &pods);
    let after_pods = LIVE.load(Ordering::Relaxed);
    let t_pods = started.elapsed();
    println!(
        "mirrored {NODES} Nodes in {t_nodes:.1?} ({:.1} KiB a Node), {} devices in {t_slices:.1?} ({:.2} KiB a device; their classes picked by 2 DeviceClasses' CEL selectors), {} pods in {t_pods:.1?} ({:.2} KiB a pod); {} objects, {:.1} MiB in all",
        (after_nodes - base) as f64 / 1024.0 / NODES as f64,
        NODES * DEVICES,
        (after_slices - after_nodes) as f64 / 1024.0 / (NODES * DEVICES) as f64,
        NODES * PODS,
        (after_pods - after_slices) as f64 / 1024.0 / (NODES * PODS) as f64,
        mirror.mirrored_count(),
        mib(after_pods - base),
    );

    // One Node's change (cordoned, then not) and one pod's arrival, each mirrored and applied
    // as a watch batch of one event applies it.
    let mut times = Vec::new();
    for round in 0..200 {
        let i = (round * 37) % NODES;
        let mut n = node(i, 64);
        if round % 2 == 0
            && let ClusterSource::Node(n) = &mut n
        {
            n.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
        }
        let started = Instant::now();
        let changes = mirror.observe(&n).changes;
        store.apply_changes(changes);
        times.push(started.elapsed());
    }
    times.sort();
    println!(
        "one Node's change at {NODES} Nodes, mirrored and in the index: median {:.1?}, p99 {:.1?}",
        times[times.len() / 2],
        times[times.len() * 99 / 100]
    );
    // What the classes picked: how many devices have each resource class.
    let mut picked: std::collections::BTreeMap<String, usize> = Default::default();
    for o in store.list(kubeplace_api::Kind::ResourceProvider) {
        if let kubeplace_api::Object::ResourceProvider(rp) = o
            && rp.spec.parent.is_some()
        {
            for class in rp.spec.inventories.keys() {
                *picked.entry(class.clone()).or_default() += 1;
            }
        }
    }
    println!("devices by resource class: {picked:?}");
    std::hint::black_box((&mirror, &store));
}
