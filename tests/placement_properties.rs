//! Properties of candidate search on random clouds and queries: whatever the engine
//! returns obeys Placement's rules, and unrelated providers never take candidates away.

use std::collections::{BTreeMap, BTreeSet};

use kubeplace::placement::candidates::allocation_candidates;
use kubeplace::placement::microversion::Microversion;
use kubeplace::placement::provider_tree::{ConsumerAllocations, ProviderRecord};
use kubeplace::placement::query::parse_candidates_query;
use kubeplace::placement::{Inventory, ProviderIndex};
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
            uuid: kubeplace::placement::derived_provider_uuid(&name(i)),
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
        let mapping: BTreeMap<&str, Vec<String>> = c
            .mappings
            .iter()
            .map(|(s, ps)| (s.as_str(), ps.iter().map(|p| named_of(idx, *p)).collect()))
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

fn named_of(idx: &ProviderIndex, p: u32) -> String {
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
