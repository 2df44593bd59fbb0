//! Headroom on a cloud of 10,000 compute-node trees (the core placement bench's compute
//! nodes without their SR-IOV functions and sharing pools: two NUMA cells with VCPU, PCPU
//! and MEMORY_MB, local DISK_GB on four in five, AVX2 on half, CUSTOM_GOLD on a tenth):
//! servers of a flavor placed one by one with the scheduler's choice and claimed through
//! admission, up to a cap; a flavor only the gold nodes (which supply DISK_GB, so their
//! trait counts) can take; and with one tree drained.
//!
//! The same cloud with every cell described (`HW_NUMA_ROOT`, 32 CPUs in cores of two
//! threads, 1 GiB pages) for flavors with a NUMA topology (pinned, hugepages) next to a
//! plain one.
//!
//! Run: `cargo bench -p kubeplace-policy --bench headroom`.

use std::hint::black_box;
use std::time::Instant;

use criterion::Criterion;
use kubeplace_api::manifest::parse_stream;
use kubeplace_core::placement::candidates::try_allocation_candidates;
use kubeplace_core::placement::microversion::Microversion;
use kubeplace_core::placement::query::parse_candidates_query;
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_policy::scheduling::{HeadroomRound, headroom};
use kubeplace_policy::store::{Change, Store};

const TREES: usize = 10_000;

fn cloud_yaml(trees: usize) -> String {
    cloud_yaml_with(trees, false)
}

/// The cloud with its cells described: each cell a `HW_NUMA_ROOT` provider with 32 CPUs in
/// 16 cores of two threads (each CPU shared and dedicated) and 16 of its 128 GiB in 1 GiB
/// pages; and flavors with a NUMA topology.
fn cloud_yaml_with_cells(trees: usize) -> String {
    cloud_yaml_with(trees, true)
        + "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: nfv.pinned}\nspec: {vcpus: 4, memoryMb: 8192, extraSpecs: {\"hw:cpu_policy\": dedicated}}\n---\n"
        + "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: nfv.huge}\nspec: {vcpus: 2, memoryMb: 4096, extraSpecs: {\"hw:mem_page_size\": 1GB}}\n---\n"
}

fn cell_detail(first_cpu: usize) -> String {
    let siblings: Vec<String> = (0..16)
        .map(|core| format!("\"{},{}\"", first_cpu + core, first_cpu + core + 16))
        .collect();
    format!(
        "  numaCell: {{cpus: \"{}-{}\", siblings: [{}], memoryMib: 131072, pages: [{{sizeKiB: 1048576, total: 16}}]}}\n",
        first_cpu,
        first_cpu + 31,
        siblings.join(", ")
    )
}

fn cloud_yaml_with(trees: usize, cells_described: bool) -> String {
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
            let traits: &[&str] = if cells_described {
                &["HW_NUMA_ROOT"]
            } else {
                &[]
            };
            rp(
                &mut y,
                &format!("{cn}-numa{cell}"),
                Some(&cn),
                "{VCPU: {total: 32, allocationRatio: 4.0}, PCPU: {total: 16}, MEMORY_MB: {total: 131072, allocationRatio: 1.5}}",
                traits,
            );
            if cells_described {
                // The detail goes under the provider's spec, before the document ends.
                let end = y.len() - "---\n".len();
                y.insert_str(end, &cell_detail(cell * 32));
            }
        }
    }
    y.push_str("apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: m1.small}\nspec: {vcpus: 1, memoryMb: 2048, diskGb: 20}\n---\n");
    y.push_str("apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: gold.xl}\nspec: {vcpus: 64, memoryMb: 65536, diskGb: 20, extraSpecs: {\"trait:CUSTOM_GOLD\": required}}\n---\n");
    y
}

/// One row per flavor and cap: a one-off headroom count over `store`, copy included.
fn bench_headroom(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    cloud: &str,
    store: &Store,
    weighers: &Weighers,
    rows: &[(&str, usize)],
) {
    for &(flavor, cap) in rows {
        let h = headroom(store, weighers, flavor, &[], cap).expect("flavor exists");
        eprintln!(
            "{cloud} {flavor} cap {cap}: {} fit, capped {}",
            h.fits, h.capped
        );
        group.bench_function(format!("{flavor}/cap={cap}"), |b| {
            b.iter(|| {
                black_box(
                    headroom(store, weighers, flavor, &[], cap)
                        .expect("flavor exists")
                        .fits,
                )
            })
        });
    }
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
    bench_headroom(
        &mut group,
        "10k",
        &store,
        &weighers,
        &[
            ("m1.small", 1),
            ("m1.small", 10),
            ("m1.small", 100),
            ("gold.xl", 10),
        ],
    );
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

    // The same cloud with every cell described: flavors with a NUMA topology are fitted on
    // each candidate host's cells, and their CPUs and pages recorded; a plain flavor is not.
    let changes: Vec<Change> = parse_stream("bench.yaml", &cloud_yaml_with_cells(TREES))
        .expect("bench YAML parses")
        .into_iter()
        .filter_map(|d| d.object().and_then(Result::ok))
        .map(|o| Change::Put(Box::new(o)))
        .collect();
    let mut cells = Store::default();
    cells.apply_changes(changes);
    // How many hosts one placement fits: the distinct trees of the scheduler's candidates.
    let query = parse_candidates_query(
        "resources=PCPU:4,MEMORY_MB:8192&root_required=!COMPUTE_STATUS_DISABLED&limit=1000",
        Microversion::LATEST,
    )
    .expect("the query parses");
    let set = try_allocation_candidates(cells.index(), &query).expect("within budget");
    let hosts: std::collections::BTreeSet<String> = set
        .candidates
        .iter()
        .filter_map(|c| {
            let named = set.named(cells.index(), c);
            cells.index().root_of(&named[0].0).ok()
        })
        .collect();
    eprintln!(
        "10k-cells nfv.pinned: {} candidates over {} hosts per placement",
        set.candidates.len(),
        hosts.len()
    );
    let mut group = c.benchmark_group("headroom/10k-cells");
    bench_headroom(
        &mut group,
        "10k-cells",
        &cells,
        &weighers,
        &[
            ("m1.small", 10),
            ("nfv.pinned", 10),
            ("nfv.pinned", 100),
            ("nfv.huge", 10),
        ],
    );
    group.finish();
    c.final_summary();
}
