//! Candidate search on generated clouds of 1k, 10k and 100k compute-node trees: index
//! build time and memory per provider, and query times.
//!
//! Each tree is a compute node (COMPUTE_NODE, some with local DISK_GB, AVX2 on half,
//! CUSTOM_GOLD on a tenth) with two NUMA cells (VCPU, PCPU, MEMORY_MB) and one or two SR-IOV
//! physical functions; ten sharing DISK_GB pools serve the trees through ten aggregates.
//!
//! Wide trees: 4 compute nodes, each with 2 NUMA cells (VCPU, HW_NUMA_ROOT) holding 8,
//! 16 or 64 one-unit CUSTOM_ACCEL device providers in all (a quarter with CUSTOM_FAST),
//! asked for VCPU and 1, 4 or 8 numbered groups of one device, isolate or none, with and
//! without limit=1000, and with same_subtree keeping the devices in one cell; each query
//! without a limit is also only counted (`count` rows).
//!
//! Each query is also explained (`explain` rows: the explain funnels and a count of every
//! candidate), beside the plain search.
//!
//! Run: `cargo bench --bench placement` (add `-- 10k/` to build and run one size only, e.g.
//! `-- 10k/explain`, `-- wide` for the wide trees only).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use criterion::{BatchSize, BenchmarkId, Criterion};
use kubeplace_core::placement::candidates::{
    Walk, allocation_candidates, count_candidates, counted_candidates_with,
    try_allocation_candidates, try_counted_candidates, try_counted_candidates_with,
};
use kubeplace_core::placement::explain::explain;
use kubeplace_core::placement::microversion::Microversion;
use kubeplace_core::placement::provider_tree::{ConsumerAllocations, ProviderRecord};
use kubeplace_core::placement::query::parse_candidates_query;
use kubeplace_core::placement::{Inventory, ProviderIndex};

/// Counts live heap bytes, to report the index's memory per provider.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn agg(i: usize) -> String {
    format!("00000000-0000-4000-8000-{:012}", i % 10)
}

fn inv(total: i64, ratio: f64) -> Inventory {
    Inventory {
        allocation_ratio: ratio,
        ..Inventory::with_total(total)
    }
}

/// Every provider record of a cloud of `trees` compute nodes.
pub fn cloud(trees: usize) -> Vec<ProviderRecord> {
    let mut out = Vec::with_capacity(trees * 5 + 10);
    for s in 0..10 {
        out.push(ProviderRecord {
            name: format!("pool-{s}"),
            uuid: kubeplace_core::placement::derived_provider_uuid(&format!("pool-{s}")),
            inventories: [("DISK_GB".to_string(), inv(100_000, 1.0))].into(),
            traits: [
                "MISC_SHARES_VIA_AGGREGATE".to_string(),
                "STORAGE_DISK_SSD".to_string(),
            ]
            .into(),
            aggregates: [agg(s)].into(),
            ..Default::default()
        });
    }
    for i in 0..trees {
        let cn = format!("cn{i:06}");
        let mut traits = vec!["COMPUTE_NODE".to_string()];
        if i % 2 == 0 {
            traits.push("HW_CPU_X86_AVX2".into());
        }
        if i % 10 == 3 {
            traits.push("CUSTOM_GOLD".into());
        }
        if i % 3 == 0 {
            traits.push("CUSTOM_A".into());
        }
        if i % 3 == 1 {
            traits.push("CUSTOM_B".into());
        }
        let mut inventories = std::collections::BTreeMap::new();
        if i % 5 != 0 {
            inventories.insert("DISK_GB".to_string(), inv(2_000, 1.0));
        }
        out.push(ProviderRecord {
            name: cn.clone(),
            uuid: kubeplace_core::placement::derived_provider_uuid(&cn),
            inventories,
            traits: traits.into_iter().collect(),
            aggregates: [agg(i)].into(),
            ..Default::default()
        });
        for cell in 0..2 {
            let numa = format!("{cn}-numa{cell}");
            out.push(ProviderRecord {
                name: numa.clone(),
                uuid: kubeplace_core::placement::derived_provider_uuid(&numa),
                parent: Some(cn.clone()),
                inventories: [
                    ("VCPU".to_string(), inv(32, 4.0)),
                    ("PCPU".to_string(), inv(16, 1.0)),
                    ("MEMORY_MB".to_string(), inv(131_072, 1.5)),
                ]
                .into(),
                ..Default::default()
            });
            if cell == 0 || i % 2 == 1 {
                let pf = format!("{numa}-pf0");
                out.push(ProviderRecord {
                    name: pf.clone(),
                    uuid: kubeplace_core::placement::derived_provider_uuid(&pf),
                    parent: Some(numa),
                    inventories: [("SRIOV_NET_VF".to_string(), inv(8, 1.0))].into(),
                    traits: [
                        "HW_NIC_SRIOV".to_string(),
                        format!("CUSTOM_PHYSNET_{}", i % 4),
                    ]
                    .into(),
                    ..Default::default()
                });
            }
        }
    }
    out
}

fn build(records: &[ProviderRecord]) -> ProviderIndex {
    let mut idx = ProviderIndex::default();
    for r in records {
        idx.upsert_provider(r.clone());
    }
    idx
}

const QUERIES: [(&str, &str); 6] = [
    ("plain", "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10"),
    (
        "required-forbidden",
        "resources=VCPU:1,MEMORY_MB:512&required=HW_CPU_X86_AVX2,!CUSTOM_GOLD",
    ),
    (
        "any-of",
        "resources=VCPU:1,MEMORY_MB:512&required=in:CUSTOM_A,CUSTOM_B",
    ),
    (
        "isolate-two-groups",
        "resources=VCPU:1&resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1&group_policy=isolate",
    ),
    // CUSTOM_GOLD is on a tenth of the compute nodes, which supply no VCPU or MEMORY_MB:
    // no candidate, and the trees that could give one are few.
    (
        "rare-forbidden",
        "resources=VCPU:1,MEMORY_MB:512&required=CUSTOM_GOLD,!HW_CPU_X86_AVX2",
    ),
    // The same with DISK_GB, which the gold compute nodes (i % 5 == 3) supply.
    (
        "rare-forbidden-disk",
        "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10&required=CUSTOM_GOLD,!HW_CPU_X86_AVX2",
    ),
];

/// Limits to run each query with: none, 50, and for the forbidden-trait queries with
/// candidates or none also 1000 (Nova's default max_placement_results).
fn limits(name: &str) -> Vec<Option<usize>> {
    let mut v = vec![None, Some(50)];
    if name == "required-forbidden" || name == "rare-forbidden-disk" {
        v.push(Some(1000));
    }
    v
}

fn sizes() -> Vec<(usize, &'static str)> {
    vec![(1_000, "1k"), (10_000, "10k"), (100_000, "100k")]
}

/// A wide cloud: 4 compute nodes of 2 NUMA cells with `devices` device providers in all.
fn wide_cloud(devices: usize) -> Vec<ProviderRecord> {
    let record = |name: String, parent: Option<String>, inv: &[(&str, i64)], traits: &[&str]| {
        ProviderRecord {
            uuid: kubeplace_core::placement::derived_provider_uuid(&name),
            name,
            parent,
            inventories: inv
                .iter()
                .map(|(c, t)| (c.to_string(), Inventory::with_total(*t)))
                .collect(),
            traits: traits.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        }
    };
    let mut out = Vec::new();
    for n in 0..4 {
        let cn = format!("cn{n}");
        out.push(record(
            cn.clone(),
            None,
            &[("DISK_GB", 1000)],
            &["COMPUTE_NODE"],
        ));
        for cell in 0..2 {
            let numa = format!("{cn}-numa{cell}");
            out.push(record(
                numa.clone(),
                Some(cn.clone()),
                &[("VCPU", 32), ("MEMORY_MB", 65536)],
                &["HW_NUMA_ROOT"],
            ));
            for d in 0..devices / 2 {
                let traits: &[&str] = if d % 4 == 0 { &["CUSTOM_FAST"] } else { &[] };
                out.push(record(
                    format!("{numa}-dev{d:02}"),
                    Some(numa.clone()),
                    &[("CUSTOM_ACCEL", 1)],
                    traits,
                ));
            }
        }
    }
    out
}

/// The wide rows' queries: (name, query without limit).
fn wide_queries() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for groups in [1, 4, 8] {
        let mut q = "resources=VCPU:1".to_string();
        for i in 1..=groups {
            q.push_str(&format!("&resources{i}=CUSTOM_ACCEL:1"));
        }
        for policy in ["isolate", "none"] {
            out.push((
                format!("{groups}g-{policy}"),
                format!("{q}&group_policy={policy}"),
            ));
        }
        let members: Vec<String> = (1..=groups).map(|i| i.to_string()).collect();
        out.push((
            format!("{groups}g-isolate-same-subtree"),
            format!(
                "{q}&group_policy=isolate&required_N=HW_NUMA_ROOT&same_subtree=_N,{}",
                members.join(",")
            ),
        ));
    }
    out
}

/// Wide-tree rows. Searches that run out of budget are timed once, not by criterion.
fn wide(c: &mut Criterion) {
    for devices in [8, 16, 64] {
        let index = build(&wide_cloud(devices));
        let mut group = c.benchmark_group(format!("placement/wide-{devices}"));
        group
            .warm_up_time(std::time::Duration::from_millis(300))
            .measurement_time(std::time::Duration::from_secs(1));
        for (name, q) in wide_queries() {
            for limit in [None, Some(1000)] {
                let qs = match limit {
                    Some(l) => format!("{q}&limit={l}"),
                    None => q.clone(),
                };
                let id = match limit {
                    Some(l) => format!("{name}/limit={l}"),
                    None => name.clone(),
                };
                let query = parse_candidates_query(&qs, Microversion::LATEST).expect("valid query");
                let started = Instant::now();
                let outcome = try_allocation_candidates(&index, &query);
                let once = started.elapsed().as_secs_f64() * 1e3;
                match outcome {
                    Ok(set) => {
                        eprintln!(
                            "wide-{devices} {id}: {} candidates{}",
                            set.candidates.len(),
                            if set.exhausted.is_some() {
                                " (budget)"
                            } else {
                                ""
                            }
                        );
                        group.bench_with_input(
                            BenchmarkId::new("candidates", &id),
                            &query,
                            |b, q| {
                                b.iter(|| {
                                    black_box(allocation_candidates(&index, q).candidates.len())
                                })
                            },
                        );
                    }
                    Err(e) => eprintln!("wide-{devices} {id}: {once:.0} ms, {e}"),
                }
                if limit.is_some() {
                    continue;
                }
                // Counted only (a Flavor's candidateCount): numbered groups are counted
                // without trying their combinations where that is exact.
                let started = Instant::now();
                match try_counted_candidates(&index, &query, 0) {
                    Ok((n, _)) => {
                        eprintln!("wide-{devices} {id}: counted {n}");
                        group.bench_with_input(BenchmarkId::new("count", &id), &query, |b, q| {
                            b.iter(|| black_box(count_candidates(&index, q)))
                        });
                    }
                    Err(e) => eprintln!(
                        "wide-{devices} {id}: counting took {:.0} ms, {e}",
                        started.elapsed().as_secs_f64() * 1e3
                    ),
                }
                // The same count walking every candidate, as before numbered groups were
                // counted in closed form.
                let walking = Walk {
                    closed_form: false,
                    walk_before_pruning: 0,
                    ..Walk::default()
                };
                let started = Instant::now();
                match try_counted_candidates_with(&index, &query, 0, walking) {
                    Ok(_) => {
                        group.bench_with_input(
                            BenchmarkId::new("count-walked", &id),
                            &query,
                            |b, q| {
                                b.iter(|| {
                                    black_box(counted_candidates_with(&index, q, 0, walking).0)
                                })
                            },
                        );
                    }
                    Err(e) => eprintln!(
                        "wide-{devices} {id}: counting by walking took {:.0} ms, {e}",
                        started.elapsed().as_secs_f64() * 1e3
                    ),
                }
            }
        }
        group.finish();
    }
}

fn main() {
    let mut c = Criterion::default().sample_size(10).configure_from_args();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // A size named in the filter (`-- 10k/explain`) builds that cloud only, and no wide rows.
    let picked: Vec<(usize, &str)> = sizes()
        .into_iter()
        .filter(|(_, label)| args.iter().any(|a| a.contains(&format!("{label}/"))))
        .collect();
    if picked.is_empty() {
        wide(&mut c);
    }
    let only_wide = args.iter().any(|a| a.contains("wide"));
    let sizes = if picked.is_empty() { sizes() } else { picked };
    for (trees, label) in sizes.into_iter().filter(|_| !only_wide) {
        let records = cloud(trees);
        let before = LIVE.load(Ordering::Relaxed);
        let started = Instant::now();
        let index = build(&records);
        let build_time = started.elapsed();
        let bytes = LIVE.load(Ordering::Relaxed) - before;
        eprintln!(
            "{label}: {} providers, index built in {:.1} ms, {} bytes per provider",
            index.len(),
            build_time.as_secs_f64() * 1e3,
            bytes / index.len()
        );
        let mut group = c.benchmark_group(format!("placement/{label}"));
        if trees <= 10_000 {
            group.bench_function("build-index", |b| b.iter(|| black_box(build(&records))));
            // Every provider put again as it was (what a relist of the watched objects
            // does), into an index whose orders a search has made.
            let plain = parse_candidates_query(QUERIES[0].1, Microversion::LATEST).expect("valid");
            let searched = index.clone();
            black_box(allocation_candidates(&searched, &plain).candidates.len());
            group.bench_function("put-every-provider-again", |b| {
                b.iter_batched_ref(
                    || searched.clone(),
                    |index| {
                        for r in &records {
                            index.upsert_provider(r.clone());
                        }
                    },
                    BatchSize::LargeInput,
                )
            });
        }
        for (name, q) in QUERIES {
            let unlimited = parse_candidates_query(q, Microversion::LATEST).expect("valid query");
            eprintln!(
                "{label} {name}: {} candidates",
                count_candidates(&index, &unlimited)
            );
            for limit in limits(name) {
                let qs = match limit {
                    Some(l) => format!("{q}&limit={l}"),
                    None => q.to_string(),
                };
                let query = parse_candidates_query(&qs, Microversion::LATEST).expect("valid query");
                let id = match limit {
                    Some(l) => format!("{name}/limit={l}"),
                    None => name.to_string(),
                };
                group.bench_with_input(BenchmarkId::new("candidates", &id), &query, |b, q| {
                    b.iter(|| black_box(allocation_candidates(&index, q).candidates.len()))
                });
                if limit.is_none() {
                    group.bench_with_input(BenchmarkId::new("count", &id), &query, |b, q| {
                        b.iter(|| black_box(count_candidates(&index, q)))
                    });
                }
                // Explain beside the search it explains: its funnels plus a full count.
                group.bench_with_input(BenchmarkId::new("explain", &id), &query, |b, q| {
                    b.iter(|| black_box(explain(&index, q).returned))
                });
                // As the scheduler asks it, with its pre-filter (no disabled host) added.
                if trees == 10_000 {
                    let prefiltered = parse_candidates_query(
                        &format!("{qs}&root_required=!COMPUTE_STATUS_DISABLED"),
                        Microversion::LATEST,
                    )
                    .expect("valid query");
                    for (row, run) in [
                        ("explain-prefiltered", true),
                        ("candidates-prefiltered", false),
                    ] {
                        group.bench_with_input(BenchmarkId::new(row, &id), &prefiltered, |b, q| {
                            b.iter(|| {
                                if run {
                                    black_box(explain(&index, q).returned)
                                } else {
                                    black_box(allocation_candidates(&index, q).candidates.len())
                                }
                            })
                        });
                    }
                }
            }
        }
        // The closed-form counts again where no two trees are alike: each compute node's
        // first NUMA cell at a usage of its own, so that no count can be reused.
        let mut varied = index.clone();
        for i in 0..trees {
            let numa = format!("cn{i:06}-numa0");
            varied.upsert_allocations(
                &numa,
                ConsumerAllocations {
                    consumer: numa.clone(),
                    items: vec![(numa.clone(), "MEMORY_MB".to_string(), 1 + i as i64)],
                },
            );
        }
        for (name, q) in QUERIES
            .iter()
            .filter(|(n, _)| ["plain", "rare-forbidden-disk"].contains(n))
        {
            let query = parse_candidates_query(q, Microversion::LATEST).expect("valid query");
            eprintln!(
                "{label} {name}, every tree at its own usage: {} candidates",
                count_candidates(&varied, &query)
            );
            group.bench_with_input(BenchmarkId::new("count-varied", name), &query, |b, q| {
                b.iter(|| black_box(count_candidates(&varied, q)))
            });
        }
        group.finish();
    }
    c.final_summary();
}
