//! Properties of candidate search on random clouds and queries: whatever the engine
//! returns obeys Placement's rules, unrelated providers never take candidates away, and
//! skipping trees or only counting never changes the answer.

use std::collections::{BTreeMap, BTreeSet};

use kubeplace_core::placement::candidates::{
    Walk, allocation_candidates, count_candidates, counted_candidates, counted_candidates_walking,
    counted_candidates_with, try_allocation_candidates, try_counted_candidates,
};
use kubeplace_core::placement::explain::explain;
use kubeplace_core::placement::ids::ProviderId;
use kubeplace_core::placement::microversion::Microversion;
use kubeplace_core::placement::provider_tree::{ConsumerAllocations, ProviderRecord};
use kubeplace_core::placement::query::parse_candidates_query;
use kubeplace_core::placement::{Inventory, ProviderIndex};
use proptest::prelude::*;

const TRAITS: [&str; 4] = ["CUSTOM_A", "CUSTOM_B", "CUSTOM_C", "HW_CPU_X86_AVX2"];
const CLASSES: [&str; 3] = ["VCPU", "MEMORY_MB", "SRIOV_NET_VF"];

#[derive(Debug, Clone)]
struct Node {
    parent: Option<usize>,
    inventories: Vec<(usize, i64, i64, i64)>, // class, total, max_unit, step
    used: Vec<(usize, i64)>,
    traits: Vec<usize>,
}

fn node(parent_limit: usize) -> impl Strategy<Value = Node> {
    (
        proptest::option::of(0..parent_limit.max(1)),
        proptest::collection::vec((0..CLASSES.len(), 1i64..8, 1i64..8, 1i64..3), 0..3),
        proptest::collection::vec((0..CLASSES.len(), 0i64..6), 0..2),
        proptest::collection::vec(0..TRAITS.len(), 0..3),
    )
        .prop_map(move |(parent, inventories, used, traits)| Node {
            parent: if parent_limit == 0 { None } else { parent },
            inventories,
            used,
            traits,
        })
}

fn cloud() -> impl Strategy<Value = Vec<Node>> {
    (1usize..10).prop_flat_map(|n| (0..n).map(node).collect::<Vec<_>>())
}

#[derive(Debug, Clone)]
struct Query {
    unnumbered: Vec<(usize, i64)>,
    required: Vec<usize>,
    forbidden: Vec<usize>,
    granular: Vec<Vec<(usize, i64)>>,
    granular_required: Vec<Option<usize>>,
    isolate: bool,
    limit: Option<usize>,
}

fn query() -> impl Strategy<Value = Query> {
    (
        proptest::collection::vec((0..CLASSES.len(), 1i64..4), 0..3),
        proptest::collection::vec(0..TRAITS.len(), 0..2),
        proptest::collection::vec(0..TRAITS.len(), 0..2),
        proptest::collection::vec(
            proptest::collection::vec((0..CLASSES.len(), 1i64..3), 1..2),
            0..3,
        ),
        proptest::collection::vec(proptest::option::of(0..TRAITS.len()), 3),
        any::<bool>(),
        proptest::option::of(1usize..4),
    )
        .prop_map(
            |(unnumbered, required, forbidden, granular, granular_required, isolate, limit)| {
                Query {
                    unnumbered,
                    required,
                    forbidden,
                    granular,
                    granular_required,
                    isolate,
                    limit,
                }
            },
        )
}

fn name(i: usize) -> String {
    format!("rp{i}")
}

fn build(nodes: &[Node]) -> ProviderIndex {
    let mut idx = ProviderIndex::default();
    for (i, n) in nodes.iter().enumerate() {
        idx.upsert_provider(ProviderRecord {
            name: name(i),
            uuid: kubeplace_core::placement::derived_provider_uuid(&name(i)),
            placement_name: None,
            parent: n.parent.map(name),
            inventories: n
                .inventories
                .iter()
                .map(|(c, total, max, step)| {
                    (
                        CLASSES[*c].to_string(),
                        Inventory {
                            max_unit: *max,
                            step_size: *step,
                            ..Inventory::with_total(*total)
                        },
                    )
                })
                .collect(),
            traits: n.traits.iter().map(|t| TRAITS[*t].to_string()).collect(),
            aggregates: BTreeSet::new(),
        });
        for (k, (c, u)) in n.used.iter().enumerate() {
            let key = format!("{i}-{k}");
            idx.upsert_allocations(
                &key,
                ConsumerAllocations {
                    consumer: key.clone(),
                    items: vec![(name(i), CLASSES[*c].to_string(), *u)],
                },
            );
        }
    }
    idx
}

fn query_string(q: &Query) -> Option<String> {
    let mut parts = Vec::new();
    let res = |r: &[(usize, i64)]| {
        let m: BTreeMap<&str, i64> = r.iter().map(|(c, a)| (CLASSES[*c], *a)).collect();
        m.iter()
            .map(|(c, a)| format!("{c}:{a}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    if !q.unnumbered.is_empty() {
        parts.push(format!("resources={}", res(&q.unnumbered)));
        let req: BTreeSet<&str> = q.required.iter().map(|t| TRAITS[*t]).collect();
        let forb: BTreeSet<&str> = q
            .forbidden
            .iter()
            .map(|t| TRAITS[*t])
            .filter(|t| !req.contains(t))
            .collect();
        let traits: Vec<String> = req
            .iter()
            .map(|t| t.to_string())
            .chain(forb.iter().map(|t| format!("!{t}")))
            .collect();
        if !traits.is_empty() {
            parts.push(format!("required={}", traits.join(",")));
        }
    }
    for (i, g) in q.granular.iter().enumerate() {
        parts.push(format!("resources{}={}", i + 1, res(g)));
        if let Some(t) = q.granular_required[i] {
            parts.push(format!("required{}={}", i + 1, TRAITS[t]));
        }
    }
    if parts.is_empty() {
        return None;
    }
    if q.granular.len() > 1 {
        parts.push(format!(
            "group_policy={}",
            if q.isolate { "isolate" } else { "none" }
        ));
    }
    if let Some(l) = q.limit {
        parts.push(format!("limit={l}"));
    }
    Some(parts.join("&"))
}

/// Checks every rule on every candidate; returns the candidates as comparable strings.
fn check(nodes: &[Node], idx: &ProviderIndex, q: &Query, qs: &str) -> Vec<String> {
    let parsed =
        parse_candidates_query(qs, Microversion::LATEST).expect("generated queries are valid");
    let set = allocation_candidates(idx, &parsed);
    if let Some(l) = q.limit {
        assert!(set.candidates.len() <= l, "limit {l} exceeded");
    }
    let traits_of = |p: &str| -> BTreeSet<&str> {
        let i: usize = p[2..].parse().unwrap();
        nodes[i].traits.iter().map(|t| TRAITS[*t]).collect()
    };
    let mut out = Vec::new();
    for c in &set.candidates {
        let named = set.named(idx, c);
        // Capacity, max_unit and step on the summed amounts.
        for (p, class, amount) in &named {
            let inv = idx
                .inventory(p, class)
                .expect("candidate uses an existing inventory");
            let used = idx.used(p, class);
            assert!(
                used + amount <= inv.capacity(),
                "{p} {class}: {used}+{amount} over {}",
                inv.capacity()
            );
            assert!(*amount <= inv.max_unit);
        }
        // Forbidden traits are on no provider of the unnumbered group; required ones are on some.
        let mapping: BTreeMap<&str, Vec<String>> = set
            .mappings(c)
            .map(|(s, ps)| (s, ps.iter().map(|p| named_of(idx, *p)).collect()))
            .collect();
        if let Some(ps) = mapping.get("") {
            let pooled: BTreeSet<&str> = ps.iter().flat_map(|p| traits_of(p)).collect();
            for t in &q.required {
                assert!(
                    pooled.contains(TRAITS[*t]),
                    "required {} missing from {ps:?}",
                    TRAITS[*t]
                );
            }
            for t in &q.forbidden {
                if !q.required.contains(t) {
                    for p in ps {
                        assert!(
                            !traits_of(p).contains(TRAITS[*t]),
                            "{p} has forbidden {}",
                            TRAITS[*t]
                        );
                    }
                }
            }
        }
        for (i, t) in q
            .granular_required
            .iter()
            .enumerate()
            .take(q.granular.len())
        {
            let ps = &mapping[(i + 1).to_string().as_str()];
            assert_eq!(ps.len(), 1, "a numbered group uses one provider");
            if let Some(t) = t {
                assert!(traits_of(&ps[0]).contains(TRAITS[*t]));
            }
        }
        if q.isolate && q.granular.len() > 1 {
            let distinct: BTreeSet<&String> = (1..=q.granular.len())
                .map(|i| &mapping[i.to_string().as_str()][0])
                .collect();
            assert_eq!(distinct.len(), q.granular.len(), "isolate broken");
        }
        let mut s: Vec<String> = named
            .iter()
            .map(|(p, cl, a)| format!("{p}:{cl}={a}"))
            .collect();
        s.sort();
        out.push(format!("{} {:?}", s.join(" "), mapping));
    }
    out
}

fn named_of(idx: &ProviderIndex, p: ProviderId) -> String {
    idx.providers()
        .into_iter()
        .map(|r| r.name)
        .find(|n| idx.id(n) == Some(p))
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn candidates_obey_placement_rules(nodes in cloud(), q in query()) {
        let idx = build(&nodes);
        if let Some(qs) = query_string(&q) {
            check(&nodes, &idx, &q, &qs);
        }
    }

    #[test]
    fn an_unrelated_provider_never_removes_a_candidate(nodes in cloud(), q in query(), extra in node(0)) {
        let Some(qs) = query_string(&Query { limit: None, ..q.clone() }) else { return Ok(()) };
        let q = Query { limit: None, ..q };
        let before: BTreeSet<String> = check(&nodes, &build(&nodes), &q, &qs).into_iter().collect();
        let mut more = nodes.clone();
        more.push(extra);
        let after: BTreeSet<String> = check(&more, &build(&more), &q, &qs).into_iter().collect();
        prop_assert!(before.is_subset(&after), "lost: {:?}", before.difference(&after).collect::<Vec<_>>());
    }
}

// Pruned search against the full walk, on clouds with sharing providers and aggregates.

const AGGS: [&str; 3] = [
    "00000000-0000-4000-8000-000000000001",
    "00000000-0000-4000-8000-000000000002",
    "00000000-0000-4000-8000-000000000003",
];
const SHARES: &str = "MISC_SHARES_VIA_AGGREGATE";

#[derive(Debug, Clone)]
struct SharedNode {
    node: Node,
    aggregates: Vec<usize>,
    shares: bool,
}

fn shared_cloud() -> impl Strategy<Value = Vec<SharedNode>> {
    (1usize..16).prop_flat_map(|n| {
        (0..n)
            .map(|i| {
                (
                    node(i),
                    proptest::collection::vec(0..AGGS.len(), 0..3),
                    proptest::bool::weighted(0.25),
                )
                    .prop_map(|(node, aggregates, shares)| SharedNode {
                        node,
                        aggregates,
                        shares,
                    })
            })
            .collect::<Vec<_>>()
    })
}

fn build_shared(nodes: &[SharedNode]) -> ProviderIndex {
    let plain: Vec<Node> = nodes.iter().map(|n| n.node.clone()).collect();
    let mut idx = build(&plain);
    for (i, n) in nodes.iter().enumerate() {
        let mut r = idx.provider(&name(i)).unwrap();
        r.aggregates = n.aggregates.iter().map(|a| AGGS[*a].to_string()).collect();
        if n.shares {
            r.traits.insert(SHARES.to_string());
        }
        idx.upsert_provider(r);
    }
    idx
}

/// One request group: resources, required and forbidden traits, aggregates.
#[derive(Debug, Clone)]
struct GroupSpec {
    resources: Vec<(usize, i64)>,
    required: Option<usize>,
    /// Required any-of sets (`in:`), 1.39+.
    any_of: Vec<Vec<usize>>,
    forbidden: Option<usize>,
    member_of: Option<usize>,
    forbidden_aggregate: Option<usize>,
    in_tree: Option<usize>,
}

fn group_spec(resourceless: bool) -> impl Strategy<Value = GroupSpec> {
    (
        proptest::collection::vec((0..CLASSES.len(), 1i64..3), usize::from(!resourceless)..3),
        proptest::option::weighted(0.3, 0..TRAITS.len()),
        prop_oneof![
            3 => Just(Vec::new()),
            1 => proptest::collection::vec(proptest::collection::vec(0..TRAITS.len(), 1..4), 1..4),
        ],
        proptest::option::weighted(0.3, 0..TRAITS.len()),
        proptest::option::weighted(0.2, 0..AGGS.len()),
        proptest::option::weighted(0.1, 0..AGGS.len()),
        proptest::option::weighted(0.1, 0usize..16),
    )
        .prop_map(
            |(resources, required, any_of, forbidden, member_of, forbidden_aggregate, in_tree)| {
                GroupSpec {
                    resources,
                    required,
                    any_of,
                    forbidden,
                    member_of,
                    forbidden_aggregate,
                    in_tree,
                }
            },
        )
}

#[derive(Debug, Clone)]
struct SharedQuery {
    microversion: u16,
    unnumbered: GroupSpec,
    granular: Vec<GroupSpec>,
    isolate: bool,
    root_required: Option<(usize, bool)>,
    same_subtree: bool,
    limit: Option<usize>,
}

fn shared_query() -> impl Strategy<Value = SharedQuery> {
    (
        prop_oneof![Just(28u16), Just(29), Just(36), Just(39), 28u16..40],
        group_spec(false),
        // Often the unnumbered group alone, which is counted in closed form.
        prop_oneof![
            Just(Vec::new()),
            proptest::collection::vec(group_spec(true), 1..3),
        ],
        any::<bool>(),
        proptest::option::weighted(0.35, (0..TRAITS.len(), any::<bool>())),
        proptest::bool::weighted(0.2),
        proptest::option::of(1usize..6),
    )
        .prop_map(
            |(microversion, unnumbered, granular, isolate, root_required, same_subtree, limit)| {
                SharedQuery {
                    microversion,
                    unnumbered,
                    granular,
                    isolate,
                    root_required,
                    same_subtree,
                    limit,
                }
            },
        )
}

/// The query at its microversion: only parameters that microversion accepts, so that most
/// generated queries reach the search.
fn shared_query_string(q: &SharedQuery, nodes: &[SharedNode]) -> String {
    let mv = q.microversion;
    let subtree = q.same_subtree && q.granular.len() >= 2 && mv >= 36;
    let mut parts = Vec::new();
    let mut group = |suffix: &str, g: &GroupSpec, may_be_resourceless: bool| {
        let resources: BTreeMap<&str, i64> = if g.resources.is_empty() && !may_be_resourceless {
            [("VCPU", 1)].into()
        } else {
            g.resources.iter().map(|(c, a)| (CLASSES[*c], *a)).collect()
        };
        if !resources.is_empty() {
            let r: Vec<String> = resources.iter().map(|(c, a)| format!("{c}:{a}")).collect();
            parts.push(format!("resources{suffix}={}", r.join(",")));
        }
        let any_of: Vec<BTreeSet<&str>> = if mv >= 39 {
            g.any_of
                .iter()
                .map(|set| set.iter().map(|t| TRAITS[*t]).collect())
                .collect()
        } else {
            Vec::new()
        };
        let req: BTreeSet<&str> = g.required.iter().map(|t| TRAITS[*t]).collect();
        let forbidden: BTreeSet<&str> = g
            .forbidden
            .iter()
            .map(|t| TRAITS[*t])
            .filter(|t| !req.contains(t))
            .filter(|t| any_of.iter().all(|set| !set.contains(t)))
            .collect();
        let traits: Vec<String> = req
            .iter()
            .map(|t| t.to_string())
            .chain(forbidden.iter().map(|t| format!("!{t}")))
            .collect();
        if !traits.is_empty() {
            parts.push(format!("required{suffix}={}", traits.join(",")));
        }
        for set in &any_of {
            let names: Vec<&str> = set.iter().copied().collect();
            parts.push(format!("required{suffix}=in:{}", names.join(",")));
        }
        if let Some(a) = g.member_of {
            parts.push(format!("member_of{suffix}={}", AGGS[a]));
        }
        if let Some(a) = g
            .forbidden_aggregate
            .filter(|_| mv >= 32 && g.member_of.is_none())
        {
            parts.push(format!("member_of{suffix}=!{}", AGGS[a]));
        }
        if let Some(n) = g.in_tree.filter(|n| *n < nodes.len() && mv >= 31) {
            parts.push(format!(
                "in_tree{suffix}={}",
                kubeplace_core::placement::derived_provider_uuid(&name(n))
            ));
        }
    };
    group("", &q.unnumbered, false);
    for (i, g) in q.granular.iter().enumerate() {
        group(&(i + 1).to_string(), g, subtree && i < 2);
    }
    if !q.granular.is_empty() {
        parts.push(format!(
            "group_policy={}",
            if q.isolate { "isolate" } else { "none" }
        ));
    }
    if let Some((t, forbid)) = q.root_required.filter(|_| mv >= 35) {
        parts.push(format!(
            "root_required={}{}",
            if forbid { "!" } else { "" },
            TRAITS[t]
        ));
    }
    if subtree {
        parts.push("same_subtree=1,2".to_string());
    }
    if let Some(l) = q.limit {
        parts.push(format!("limit={l}"));
    }
    parts.join("&")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn pruned_search_and_counting_equal_the_full_walk(
        nodes in shared_cloud(),
        q in shared_query(),
        walk_first in 0usize..3,
    ) {
        let idx = build_shared(&nodes);
        let qs = shared_query_string(&q, &nodes);
        // Some combinations are refused at some microversions; those have no search to check.
        let Ok(parsed) = parse_candidates_query(&qs, Microversion(q.microversion)) else {
            return Ok(());
        };
        let (full_count, full) =
            counted_candidates_walking(&idx, &parsed, usize::MAX, false, 0, false);
        prop_assert_eq!(full_count, full.candidates.len());
        let (count, pruned) =
            counted_candidates_walking(&idx, &parsed, usize::MAX, true, walk_first, false);
        prop_assert_eq!(count, full_count);
        prop_assert_eq!(&pruned.candidates, &full.candidates, "{}", qs);
        prop_assert_eq!(&pruned.summary_trees, &full.summary_trees);
        prop_assert_eq!(&pruned.summary_only, &full.summary_only);
        let default = allocation_candidates(&idx, &parsed);
        prop_assert_eq!(&default.candidates, &full.candidates);
        prop_assert_eq!(count_candidates(&idx, &parsed), full_count, "{}", qs);
        for keep in [0, 1, 2] {
            let (count, kept) = counted_candidates(&idx, &parsed, keep);
            prop_assert_eq!(count, full_count);
            let first = &full.candidates[..keep.min(full.candidates.len())];
            prop_assert_eq!(kept.candidates.as_slice(), first);
        }
        // Counting trees in closed form, with or without skipping trees, against walking
        // every combination.
        for (prune, walk_first) in [(false, 0), (true, walk_first)] {
            for keep in [0, 1, 3] {
                let (count, kept) =
                    counted_candidates_walking(&idx, &parsed, keep, prune, walk_first, true);
                prop_assert_eq!(count, full_count, "{} keep={} prune={}", qs, keep, prune);
                let first = &full.candidates[..keep.min(full.candidates.len())];
                prop_assert_eq!(kept.candidates.as_slice(), first, "{}", qs);
                let (plain_count, _) =
                    counted_candidates_walking(&idx, &parsed, keep, prune, walk_first, false);
                prop_assert_eq!(plain_count, full_count, "{}", qs);
            }
        }
    }
}

/// The unnumbered group alone at 1.29+, with up to five required sets (four `in:` sets and
/// a required trait): the queries whose trees are counted in closed form.
fn unnumbered_query() -> impl Strategy<Value = SharedQuery> {
    (
        prop_oneof![Just(39u16), 29u16..40],
        group_spec(false),
        proptest::collection::vec(proptest::collection::vec(0..TRAITS.len(), 1..4), 0..5),
        proptest::option::weighted(0.3, (0..TRAITS.len(), any::<bool>())),
        proptest::option::weighted(0.3, 1usize..50),
    )
        .prop_map(
            |(microversion, mut unnumbered, any_of, root_required, limit)| {
                unnumbered.any_of = any_of;
                SharedQuery {
                    microversion,
                    unnumbered,
                    granular: Vec::new(),
                    isolate: false,
                    root_required,
                    same_subtree: false,
                    limit,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn closed_form_count_equals_walking_every_combination(
        nodes in shared_cloud(),
        q in unnumbered_query(),
        walk_first in 0usize..3,
    ) {
        let idx = build_shared(&nodes);
        let qs = shared_query_string(&q, &nodes);
        let Ok(parsed) = parse_candidates_query(&qs, Microversion(q.microversion)) else {
            return Ok(());
        };
        let (full_count, full) =
            counted_candidates_walking(&idx, &parsed, usize::MAX, false, 0, false);
        for prune in [false, true] {
            for keep in [0, 1] {
                let (count, kept) =
                    counted_candidates_walking(&idx, &parsed, keep, prune, walk_first, true);
                prop_assert_eq!(count, full_count, "{} keep={} prune={}", qs, keep, prune);
                let first = &full.candidates[..keep.min(full.candidates.len())];
                prop_assert_eq!(kept.candidates.as_slice(), first, "{}", qs);
            }
        }
    }
}

// Wide trees: compute nodes whose NUMA cells hold many small device providers, asked for
// several numbered groups at once, with same_subtree over the cells. Building the parts
// group by group and abandoning hopeless prefixes must give the candidates of trying every
// combination, in the same order, and a limit must keep the first of them.

#[derive(Debug, Clone)]
struct WideTree {
    /// Per cell, per device: CUSTOM_ACCEL total, and whether it has CUSTOM_A.
    cells: Vec<Vec<(i64, bool)>>,
    vcpu_on_root: bool,
}

fn wide_cloud() -> impl Strategy<Value = Vec<WideTree>> {
    proptest::collection::vec(
        (
            proptest::collection::vec(
                proptest::collection::vec((1i64..3, proptest::bool::weighted(0.3)), 0..5),
                1..3,
            ),
            any::<bool>(),
        )
            .prop_map(|(cells, vcpu_on_root)| WideTree {
                cells,
                vcpu_on_root,
            }),
        1..4,
    )
}

fn build_wide(trees: &[WideTree]) -> ProviderIndex {
    let mut idx = ProviderIndex::default();
    let record = |name: String, parent: Option<String>, inv: &[(&str, i64)], traits: &[&str]| {
        ProviderRecord {
            uuid: kubeplace_core::placement::derived_provider_uuid(&name),
            placement_name: None,
            name,
            parent,
            inventories: inv
                .iter()
                .map(|(c, t)| (c.to_string(), Inventory::with_total(*t)))
                .collect(),
            traits: traits.iter().map(|t| t.to_string()).collect(),
            aggregates: BTreeSet::new(),
        }
    };
    for (n, t) in trees.iter().enumerate() {
        let cn = format!("cn{n}");
        let root_inv: &[(&str, i64)] = if t.vcpu_on_root { &[("VCPU", 8)] } else { &[] };
        idx.upsert_provider(record(cn.clone(), None, root_inv, &[]));
        for (c, devices) in t.cells.iter().enumerate() {
            let numa = format!("{cn}-numa{c}");
            let cell_inv: &[(&str, i64)] = if t.vcpu_on_root { &[] } else { &[("VCPU", 8)] };
            idx.upsert_provider(record(
                numa.clone(),
                Some(cn.clone()),
                cell_inv,
                &["HW_NUMA_ROOT"],
            ));
            for (d, (total, a)) in devices.iter().enumerate() {
                let traits: &[&str] = if *a { &["CUSTOM_A"] } else { &[] };
                idx.upsert_provider(record(
                    format!("{numa}-dev{d}"),
                    Some(numa.clone()),
                    &[("CUSTOM_ACCEL", *total)],
                    traits,
                ));
            }
        }
    }
    idx
}

#[derive(Debug, Clone)]
struct WideQuery {
    /// Per numbered group: CUSTOM_ACCEL amount, whether it requires CUSTOM_A.
    groups: Vec<(i64, bool)>,
    vcpu: bool,
    isolate: bool,
    same_subtree: bool,
    limit: Option<usize>,
}

fn wide_query() -> impl Strategy<Value = WideQuery> {
    (
        proptest::collection::vec((1i64..3, proptest::bool::weighted(0.25)), 1..5),
        any::<bool>(),
        any::<bool>(),
        proptest::bool::weighted(0.4),
        proptest::option::of(1usize..20),
    )
        .prop_map(|(groups, vcpu, isolate, same_subtree, limit)| WideQuery {
            groups,
            vcpu,
            isolate,
            same_subtree,
            limit,
        })
}

fn wide_query_string(q: &WideQuery) -> String {
    let mut parts = Vec::new();
    if q.vcpu {
        parts.push("resources=VCPU:1".to_string());
    }
    for (i, (amount, a)) in q.groups.iter().enumerate() {
        parts.push(format!("resources{}=CUSTOM_ACCEL:{amount}", i + 1));
        if *a {
            parts.push(format!("required{}=CUSTOM_A", i + 1));
        }
    }
    let policy = if q.isolate { "isolate" } else { "none" };
    parts.push(format!("group_policy={policy}"));
    if q.same_subtree {
        parts.push("required_N=HW_NUMA_ROOT".to_string());
        let members: Vec<String> = (1..=q.groups.len()).map(|i| i.to_string()).collect();
        parts.push(format!("same_subtree=_N,{}", members.join(",")));
    }
    if let Some(l) = q.limit {
        parts.push(format!("limit={l}"));
    }
    parts.join("&")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn wide_trees_backtracking_equals_trying_every_combination(
        trees in wide_cloud(),
        q in wide_query(),
        walk_first in 0usize..3,
    ) {
        let idx = build_wide(&trees);
        let qs = wide_query_string(&q);
        let parsed = parse_candidates_query(&qs, Microversion::LATEST).expect("valid query");
        let unlimited_qs = wide_query_string(&WideQuery { limit: None, ..q.clone() });
        let unlimited =
            parse_candidates_query(&unlimited_qs, Microversion::LATEST).expect("valid query");
        let every = Walk {
            prune: false,
            closed_form: false,
            backtrack: false,
            budget: u64::MAX,
            ..Walk::default()
        };
        let (full_count, full) = counted_candidates_with(&idx, &unlimited, usize::MAX, every);
        prop_assert_eq!(full_count, full.candidates.len());
        prop_assert!(full.exhausted.is_none());
        for prune in [false, true] {
            for closed_form in [false, true] {
                let walk = Walk {
                    prune,
                    walk_before_pruning: walk_first,
                    closed_form,
                    ..Walk::default()
                };
                let (count, got) = counted_candidates_with(&idx, &unlimited, usize::MAX, walk);
                prop_assert_eq!(count, full_count, "{}", unlimited_qs);
                prop_assert_eq!(&got.candidates, &full.candidates, "{}", unlimited_qs);
                prop_assert_eq!(&got.summary_trees, &full.summary_trees);
                // Stopped by the limit: the first candidates of the whole answer.
                let (count, limited) = counted_candidates_with(&idx, &parsed, usize::MAX, walk);
                let n = q.limit.unwrap_or(usize::MAX).min(full_count);
                prop_assert_eq!(count, n, "{}", qs);
                prop_assert_eq!(&limited.candidates[..], &full.candidates[..n], "{}", qs);
            }
        }
        // Only counted: numbered groups counted without trying their combinations where
        // that is exact, and walked where not.
        for closed_form in [false, true] {
            let walk = Walk { closed_form, walk_before_pruning: walk_first, ..Walk::default() };
            let (count, set) = counted_candidates_with(&idx, &unlimited, 0, walk);
            prop_assert_eq!(count, full_count, "{} closed_form={}", unlimited_qs, closed_form);
            prop_assert!(set.exhausted.is_none());
            let (count, _) = counted_candidates_with(&idx, &parsed, 0, walk);
            prop_assert_eq!(count, q.limit.unwrap_or(usize::MAX).min(full_count), "{}", qs);
        }
        // What callers get.
        let default = try_allocation_candidates(&idx, &parsed).expect("small answers fit the budget");
        let n = q.limit.unwrap_or(usize::MAX).min(full_count);
        prop_assert_eq!(&default.candidates[..], &full.candidates[..n], "{}", qs);
        let (count, _) = try_counted_candidates(&idx, &unlimited, 0).expect("fits the budget");
        prop_assert_eq!(count, full_count);
    }
}

// Explain against the search: the survivors it counts are the candidates the search
// returns, every provider and tree is lost at exactly one step or kept, and the trees it
// keeps hold every tree that anchors a candidate.

fn explained(
    idx: &ProviderIndex,
    parsed: &kubeplace_core::placement::query::CandidatesQuery,
    qs: &str,
) -> Result<(), TestCaseError> {
    let e = explain(idx, parsed);
    let set = allocation_candidates(idx, parsed);
    let count = count_candidates(idx, parsed);
    prop_assert!(!e.budget_exhausted);
    prop_assert_eq!(e.returned, count, "{}\n{}", qs, e.text());
    prop_assert_eq!(e.returned, set.candidates.len(), "{}\n{}", qs, e.text());
    prop_assert_eq!(e.returned == 0, set.candidates.is_empty());
    prop_assert_eq!(e.candidates - e.cut_by_limit, e.returned);
    for g in &e.groups {
        let lost: usize = g.lost.iter().map(|s| s.count).sum();
        prop_assert_eq!(lost + g.left, g.providers, "{}\n{}", qs, e.text());
        prop_assert!(g.lost.iter().all(|s| s.count > 0));
    }
    let lost: usize = e.trees.lost.iter().map(|s| s.count).sum();
    prop_assert_eq!(
        lost + e.trees.with_candidates,
        e.trees.trees,
        "a tree with candidates was lost in the funnel: {}\n{}",
        qs,
        e.text()
    );
    prop_assert_eq!(e.trees.with_candidates == 0, e.candidates == 0);
    let summary = e.summary(3);
    prop_assert!(summary.len() <= 3);
    prop_assert_eq!(
        summary.is_empty(),
        lost == 0 && e.trees.trees > 0,
        "{:?}",
        summary
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn explain_agrees_with_the_search(nodes in shared_cloud(), q in shared_query()) {
        let idx = build_shared(&nodes);
        let qs = shared_query_string(&q, &nodes);
        let Ok(parsed) = parse_candidates_query(&qs, Microversion(q.microversion)) else {
            return Ok(());
        };
        explained(&idx, &parsed, &qs)?;
    }

    #[test]
    fn explain_agrees_on_wide_trees(trees in wide_cloud(), q in wide_query()) {
        let idx = build_wide(&trees);
        let qs = wide_query_string(&q);
        let parsed = parse_candidates_query(&qs, Microversion::LATEST).expect("valid query");
        explained(&idx, &parsed, &qs)?;
    }
}
