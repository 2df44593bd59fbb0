//! Headroom on a cloud of 10,000 compute-node trees (the core placement bench's compute
//! nodes without their SR-IOV functions and sharing pools: two NUMA cells with VCPU, PCPU
//! and MEMORY_MB, local DISK_GB on four in five, AVX2 on half, CUSTOM_GOLD on a tenth):
//! servers of a flavor placed one by one with the scheduler's choice and claimed through
//! admission, up to a cap; a flavor only the gold nodes (which supply DISK_GB, so their
//! trait counts) can take; and with one tree drained.
//!
//! Run: `cargo bench -p kubeplace-policy --bench headroom`.

use std::hint::black_box;
use std::time::Instant;

use criterion::Criterion;
use kubeplace_api::manifest::parse_stream;
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_policy::scheduling::{HeadroomRound, headroom};
use kubeplace_policy::store::{Change, Store};

const TREES: usize = 10_000;

fn cloud_yaml(trees: usize) -> String {
    let mut y = String::new();
    let rp = |y: &mut String, name: &str, parent: Option<&str>, inv: &str, traits: &[&str]| {
        let parent = parent.map_or(String::new(), |p| format!("  parent: {p}\n"));
        let traits = if traits.is_empty() {
            String::new()
        } else {
            format!("  traits: [{}]\n", traits.join(", "))
        };
        y.push_str(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: {name}}}\nspec:\n{parent}  inventories: {inv}\n{traits}---\n"
        ));
    };
    for i in 0..trees {
        let cn = format!("cn{i:06}");
        let mut traits = vec!["COMPUTE_NODE"];
        if i % 2 == 0 {
            traits.push("HW_CPU_X86_AVX2");
        }
        if i % 10 == 3 {
            traits.push("CUSTOM_GOLD");
        }
        let disk = if i % 5 != 0 {
            "{DISK_GB: {total: 2000}}"
        } else {
            "{}"
        };
        rp(&mut y, &cn, None, disk, &traits);
        for cell in 0..2 {
            rp(
                &mut y,
                &format!("{cn}-numa{cell}"),
                Some(&cn),
                "{VCPU: {total: 32, allocationRatio: 4.0}, PCPU: {total: 16}, MEMORY_MB: {total: 131072, allocationRatio: 1.5}}",
                &[],
            );
        }
    }
    y.push_str("apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: m1.small}\nspec: {vcpus: 1, memoryMb: 2048, diskGb: 20}\n---\n");
    y.push_str("apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: gold.xl}\nspec: {vcpus: 64, memoryMb: 65536, diskGb: 20, extraSpecs: {\"trait:CUSTOM_GOLD\": required}}\n---\n");
    y
}

fn main() {
    let mut c = Criterion::default().sample_size(10).configure_from_args();
    let started = Instant::now();
    let changes: Vec<Change> = parse_stream("bench.yaml", &cloud_yaml(TREES))
        .expect("bench YAML parses")
        .into_iter()
        .filter_map(|d| d.object().and_then(Result::ok))
        .map(|o| Change::Put(Box::new(o)))
        .collect();
    let mut store = Store::default();
    store.apply_changes(changes);
    let weighers = Weighers::default();
    eprintln!(
        "10k: {} providers loaded in {:.0} ms",
        store.index().len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    let mut group = c.benchmark_group("headroom/10k");
    for (flavor, cap) in [
        ("m1.small", 1),
        ("m1.small", 10),
        ("m1.small", 100),
        ("gold.xl", 10),
    ] {
        let h = headroom(&store, &weighers, flavor, &[], cap).expect("flavor exists");
        eprintln!(
            "10k {flavor} cap {cap}: {} fit, capped {}",
            h.fits, h.capped
        );
        group.bench_function(format!("{flavor}/cap={cap}"), |b| {
            b.iter(|| {
                black_box(
                    headroom(&store, &weighers, flavor, &[], cap)
                        .expect("flavor exists")
                        .fits,
                )
            })
        });
    }
    let without = vec!["cn000003".to_string()];
    group.bench_function("m1.small/cap=10/without-one-tree", |b| {
        b.iter(|| {
            black_box(
                headroom(&store, &weighers, "m1.small", &without, 10)
                    .expect("known")
                    .fits,
            )
        })
    });
    // What the operator's background rounds cost: the copy made once per round, then each
    // Flavor counted in it (its claims taken back after).
    group.bench_function("round/copy", |b| {
        b.iter(|| black_box(HeadroomRound::new(&store, &weighers).flavors().len()))
    });
    let mut round = HeadroomRound::new(&store, &weighers);
    for (flavor, cap) in [("m1.small", 10), ("m1.small", 100), ("gold.xl", 10)] {
        group.bench_function(format!("round/{flavor}/cap={cap}"), |b| {
            b.iter(|| black_box(round.count(flavor, cap).expect("flavor exists").servers))
        });
    }
    group.finish();
    c.final_summary();
}
