//! Quotas decided by the claims ledger: exact under claims racing ahead of the watch, moves
//! that do not charge twice, and any interleaving with failovers and limit changes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kubeplace_api::{Kind, Object, WRITE_ANNOTATION};

use crate::admission::Operation;
use crate::claims::Ledger;
use crate::store::{Change, ObjectKey, Store};
use crate::test_objects::object;
use kubeplace_api::{CONSUMER_TYPE_ANNOTATION, PROJECT_ANNOTATION};

/// One provider far larger than any quota: only quotas refuse.
fn roomy() -> Store {
    let mut store = Store::default();
    store.apply(object(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn1\nspec:\n  inventories:\n    VCPU:\n      total: 100000\n",
    ));
    store
}

fn quota(namespace: &str, vcpu: i64, servers: i64) -> Object {
    object(&format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ProjectQuota\nmetadata:\n  name: limits\n  namespace: {namespace}\nspec:\n  limits:\n    class:VCPU: {vcpu}\n    servers: {servers}\n"
    ))
}

/// A claim of `vcpu` VCPU by consumer `n` of `project`, of `consumer_type`, marked by
/// `write` when one makes it.
fn claim(
    name: &str,
    n: u32,
    project: &str,
    consumer_type: &str,
    vcpu: i64,
    write: Option<&str>,
) -> Object {
    let mut o = object(&format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: {name}\nspec:\n  consumer: 00000000-0000-0000-0000-{n:012}\n  allocations:\n  - provider: cn1\n    resources:\n      VCPU: {vcpu}\n"
    ));
    let annotations = o
        .meta_mut()
        .annotations
        .get_or_insert_with(Default::default);
    annotations.insert(PROJECT_ANNOTATION.into(), project.into());
    annotations.insert(CONSUMER_TYPE_ANNOTATION.into(), consumer_type.into());
    if let Some(w) = write {
        annotations.insert(WRITE_ANNOTATION.into(), w.into());
    }
    o
}

/// A PlacementWrite record of `creates` (as they are left) and `deletes`.
fn write(store: &Store, name: &str, creates: &[Object], deletes: &[&str]) -> Object {
    let mut changes: Vec<serde_json::Value> = creates
        .iter()
        .map(|o| {
            let before = store
                .get_cluster(Kind::Allocation, o.name())
                .map(|c| serde_json::json!({"generation": c.meta().generation}));
            let mut change =
                serde_json::json!({"kind": "Allocation", "name": o.name(), "after": o.to_value()});
            if let Some(before) = before {
                change["before"] = before;
            }
            change
        })
        .collect();
    for d in deletes {
        let current = store.get_cluster(Kind::Allocation, d).unwrap();
        changes.push(serde_json::json!({"kind": "Allocation", "name": d,
            "before": {"generation": current.meta().generation}}));
    }
    Object::from_value(
        Kind::PlacementWrite,
        serde_json::json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementWrite",
            "metadata": {"name": name}, "spec": {"writer": "t", "changes": changes}}),
    )
    .unwrap()
}

fn decide(ledger: &mut Ledger, store: &Store, o: &Object) -> crate::admission::Verdict {
    decide_over(ledger, store, o, store.get(&ObjectKey::of(o)))
}

/// Decides a write of `o` where the API server holds `old` (it may be ahead of the store).
fn decide_over(
    ledger: &mut Ledger,
    store: &Store,
    o: &Object,
    old: Option<&Object>,
) -> crate::admission::Verdict {
    let op = if old.is_some() {
        Operation::Update
    } else {
        Operation::Create
    };
    ledger.decide(op, o, old, store, Instant::now(), false)
}

/// Delivers a write as the watches do: its record, its objects, then its record's deletion.
fn deliver_write(store: &mut Store, record: Object, creates: Vec<Object>, deletes: &[&str]) {
    let key = ObjectKey::of(&record);
    store.apply_changes([Change::Put(Box::new(record))]);
    store.apply_changes(
        creates.into_iter().map(|o| Change::Put(Box::new(o))).chain(
            deletes
                .iter()
                .map(|d| Change::Delete(ObjectKey::cluster(Kind::Allocation, d))),
        ),
    );
    store.apply_changes([Change::Delete(key)]);
}

/// 64 claims of one VCPU decided one after another before the watch delivers any of
/// them, against `class:VCPU: 10`: exactly 10 are admitted, and each refusal names the
/// limit, the usage and the amount asked.
#[test]
fn claims_racing_the_watch_get_exactly_the_limit() {
    let mut store = roomy();
    store.apply(quota("shop", 10, -1));
    let mut ledger = Ledger::new(Duration::from_secs(30));
    let mut refusals = Vec::new();
    let admitted = (0..64)
        .filter(|n| {
            let v = decide(
                &mut ledger,
                &store,
                &claim(&format!("c{n}"), *n, "shop", "INSTANCE", 1, None),
            );
            if !v.allowed {
                refusals.push(v.message);
            }
            v.allowed
        })
        .count();
    assert_eq!(admitted, 10);
    assert!(
        refusals[0].contains("class:VCPU is limited to 10; 10 in use, 1 more asked")
            && refusals[0].contains("ProjectQuota shop/limits"),
        "{}",
        refusals[0]
    );
    // Another project is not charged for shop's claims.
    let other = claim("o1", 99, "lab", "INSTANCE", 50, None);
    assert!(decide(&mut ledger, &store, &other).allowed);
}

/// The `servers` limit counts consumers: a consumer's claim replaced is not a new server.
#[test]
fn servers_count_consumers_not_claims() {
    let mut store = roomy();
    store.apply(quota("shop", -1, 2));
    store.apply(claim("c1", 1, "shop", "INSTANCE", 1, None));
    store.apply(claim("c2", 2, "shop", "INSTANCE", 1, None));
    let mut ledger = Ledger::new(Duration::from_secs(30));
    assert!(
        decide(
            &mut ledger,
            &store,
            &claim("c1", 1, "shop", "INSTANCE", 4, None)
        )
        .allowed
    );
    let v = decide(
        &mut ledger,
        &store,
        &claim("c3", 3, "shop", "INSTANCE", 1, None),
    );
    assert!(
        !v.allowed && v.message.contains("servers is limited to 2"),
        "{}",
        v.message
    );
    // A migration consumer is never a server of the project.
    assert!(
        decide(
            &mut ledger,
            &store,
            &claim("m1", 4, "shop", "MIGRATION", 1, None)
        )
        .allowed
    );
}

/// A move hands the source allocation to a MIGRATION consumer and gives the instance the
/// new flavor's: only the growth is charged, so a same-size migration at the limit passes
/// and a resize beyond it does not.
#[test]
fn a_move_charges_only_what_grows() {
    let mut store = roomy();
    store.apply(quota("shop", 4, -1));
    store.apply(claim("c1", 1, "shop", "INSTANCE", 4, None));
    let mut ledger = Ledger::new(Duration::from_secs(30));
    let same = [
        claim("m1", 2, "shop", "MIGRATION", 4, Some("w1")),
        claim("c1", 1, "shop", "INSTANCE", 4, Some("w1")),
    ];
    let record = write(&store, "w1", &same, &[]);
    let v = decide(&mut ledger, &store, &record);
    assert!(v.allowed, "{}", v.message);
    deliver_write(&mut store, record, same.to_vec(), &[]);
    assert_eq!(store.charges().usage("shop").resources["VCPU"], 4);
    // Confirmed: the migration's allocation goes.
    store.apply_changes([Change::Delete(ObjectKey::cluster(Kind::Allocation, "m1"))]);
    let bigger = [
        claim("m2", 3, "shop", "MIGRATION", 4, Some("w2")),
        claim("c1", 1, "shop", "INSTANCE", 6, Some("w2")),
    ];
    let v = decide(&mut ledger, &store, &write(&store, "w2", &bigger, &[]));
    assert!(
        !v.allowed && v.message.contains("4 in use, 2 more asked"),
        "{}",
        v.message
    );
}

/// A claim this replica's Placement API moves to another project while a version the
/// webhook admitted a moment ago is still on its way counts once, the most of its
/// versions, in its old project and on its provider: the API server holds one of them,
/// never two.
#[test]
fn a_claim_decided_here_over_versions_on_their_way_counts_once() {
    let mut store = Store::default();
    store.apply(object(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn1\nspec:\n  inventories:\n    VCPU:\n      total: 7\n",
    ));
    store.apply(quota("shop", 6, -1));
    let mut ledger = Ledger::new(Duration::from_secs(30));
    // Two versions of c6 admitted: the first never stored (its write failed), the second
    // stored and delivered.
    let first = claim("c6", 6, "shop", "INSTANCE", 1, None);
    assert!(decide(&mut ledger, &store, &first).allowed);
    let second = claim("c6", 6, "shop", "INSTANCE", 3, None);
    assert!(decide_over(&mut ledger, &store, &second, None).allowed);
    store.apply_changes([Change::Put(Box::new(second))]);
    // The Placement API here moves c6 to another project, beside what is on its way.
    let key = ObjectKey::cluster(Kind::Allocation, "c6");
    let before = store.get(&key).cloned();
    let pending = ledger.beside(&store, "c6", Instant::now());
    let moved = claim("c6", 6, "lab", "INSTANCE", 1, None);
    assert!(crate::admission::admit_and_store_beside(&mut store, moved, &pending).allowed);
    store.hold_decided([(&key, before.as_ref())]);
    // shop may still hold 3 for c6, and cn1 3 VCPU of 7: 4 more is over both.
    let over = decide(
        &mut ledger,
        &store,
        &claim("c0", 0, "shop", "INSTANCE", 4, None),
    );
    assert!(
        !over.allowed && over.message.contains("3 in use, 4 more asked"),
        "{}",
        over.message
    );
    let fits = decide(
        &mut ledger,
        &store,
        &claim("c0", 0, "shop", "INSTANCE", 3, None),
    );
    assert!(fits.allowed, "{}", fits.message);
}

mod interleavings {
    use super::*;
    use proptest::prelude::*;

    const PROJECTS: [&str; 2] = ["shop", "lab"];

    #[derive(Debug, Clone)]
    enum Step {
        Claim {
            n: u32,
            project: usize,
            vcpu: i64,
        },
        Deliver,
        Drop,
        Release {
            n: u32,
        },
        Limit {
            project: usize,
            vcpu: i64,
            servers: i64,
        },
        Failover,
        Move {
            n: u32,
            vcpu: i64,
        },
        Confirm {
            n: u32,
        },
        /// This replica's Placement API decides a claim beside the ledger and shows it in
        /// the store at once, before its review.
        Local {
            n: u32,
            project: usize,
            vcpu: i64,
        },
        /// The review of the oldest claim decided by the Placement API.
        Review,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u32..12, 0usize..2, 1i64..4)
                .prop_map(|(n, project, vcpu)| Step::Claim { n, project, vcpu }),
            3 => Just(Step::Deliver),
            1 => Just(Step::Drop),
            2 => (0u32..12).prop_map(|n| Step::Release { n }),
            1 => (0usize..2, 0i64..12, 0i64..6)
                .prop_map(|(project, vcpu, servers)| Step::Limit { project, vcpu, servers }),
            1 => Just(Step::Failover),
            2 => (0u32..12, 1i64..5).prop_map(|(n, vcpu)| Step::Move { n, vcpu }),
            1 => (0u32..12).prop_map(|n| Step::Confirm { n }),
            3 => (0u32..12, 0usize..2, 1i64..4)
                .prop_map(|(n, project, vcpu)| Step::Local { n, project, vcpu }),
            3 => Just(Step::Review),
        ]
    }

    /// What the API server holds: every admitted claim not dropped, by name: its project,
    /// whether it is charged (not a migration) and its VCPU.
    type Truth = BTreeMap<String, (String, bool, i64)>;

    fn usage(truth: &Truth, project: &str) -> (i64, i64) {
        truth
            .values()
            .filter(|(p, charged, _)| p == project && *charged)
            .fold((0, 0), |(v, s), (_, _, n)| (v + n, s + 1))
    }

    /// What a claim holds, as the truth keeps it.
    fn held(o: &Object) -> (String, bool, i64) {
        let Object::Allocation(a) = o else {
            unreachable!("claims only")
        };
        let c = crate::quota::charge_of(a);
        let vcpu = a.spec.allocations[0].resources["VCPU"];
        let project = a.metadata.annotations.as_ref().unwrap()[PROJECT_ANNOTATION].clone();
        (project, c.is_some(), vcpu)
    }

    /// An admitted change may leave a project over a limit only where it did not grow.
    fn within(before: (i64, i64), after: (i64, i64), limit: (i64, i64)) -> bool {
        (after.0 <= limit.0 || after.0 <= before.0) && (after.1 <= limit.1 || after.1 <= before.1)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Claims, moves, releases, limit changes and leader failovers in any order, with
        /// the watch delivering admitted claims late (or never, for a write the API server
        /// failed): every admitted change leaves each project within its limits wherever it
        /// grew the project's usage, so with limits never lowered below usage, usage never
        /// exceeds them.
        #[test]
        fn charged_usage_stays_within_every_limit(steps in proptest::collection::vec(step(), 1..60)) {
            let mut store = roomy();
            let mut limits: BTreeMap<String, (i64, i64)> = BTreeMap::new();
            for p in PROJECTS {
                store.apply(quota(p, 6, 3));
                limits.insert(p.to_string(), (6, 3));
            }
            let mut ledger = Ledger::new(Duration::from_secs(30));
            let mut truth = Truth::new();
            // Admitted and not delivered yet, oldest first.
            let mut in_flight: Vec<(Object, ())> = Vec::new();
            let mut lowered = false;
            let mut writes = 0;
            // Decided by the Placement API and not reviewed yet, oldest first: the claim, what
            // the API server holds of its name, and how many limit changes came before it.
            let mut local: Vec<(Object, Option<Object>, usize)> = Vec::new();
            let mut limit_changes = 0;
            // Its writer undoes a claim the cluster refused: the store shows what it did before.
            let undo = |store: &mut Store, o: &Object, before: Option<Object>| {
                let key = ObjectKey::of(o);
                store.release_decided([&key]);
                match before {
                    Some(b) => { store.put(b); }
                    None => { store.delete(&key); }
                }
            };
            for step in steps {
                match step {
                    Step::Claim { n, project, vcpu } => {
                        let name = format!("c{n}");
                        if local.iter().any(|(o, _, _)| o.name() == name) {
                            continue;
                        }
                        let project = PROJECTS[project];
                        let o = claim(&name, n, project, "INSTANCE", vcpu, None);
                        // The API server passes the object as it holds it, ahead of the watch.
                        let old = in_flight
                            .iter()
                            .rev()
                            .map(|(l, _)| l)
                            .find(|l| l.name() == name)
                            .or_else(|| store.get_cluster(Kind::Allocation, &name))
                            .cloned();
                        if decide_over(&mut ledger, &store, &o, old.as_ref()).allowed {
                            let before = usage(&truth, project);
                            truth.insert(name, (project.to_string(), true, vcpu));
                            prop_assert!(within(before, usage(&truth, project), limits[project]),
                                "{project}: {before:?} -> {:?} over {:?}", usage(&truth, project), limits[project]);
                            in_flight.push((o, ()));
                        }
                    }
                    Step::Deliver => {
                        if !in_flight.is_empty() {
                            let (o, _) = in_flight.remove(0);
                            store.apply_changes([Change::Put(Box::new(o))]);
                        }
                    }
                    Step::Drop => {
                        // The API server failed the write: the name holds what the claims
                        // still on their way, or else the store, say.
                        if !in_flight.is_empty() {
                            let (o, _) = in_flight.remove(0);
                            let name = o.name().to_string();
                            let now = in_flight
                                .iter()
                                .rev()
                                .find(|(l, _)| l.name() == name)
                                .map(|(l, _)| l)
                                .or_else(|| store.get_cluster(Kind::Allocation, &name))
                                .map(held);
                            match now {
                                Some(h) => { truth.insert(name, h); }
                                None => { truth.remove(&name); }
                            }
                        }
                    }
                    Step::Release { n } => {
                        let name = format!("c{n}");
                        let stored = store.get_cluster(Kind::Allocation, &name).is_some();
                        if stored
                            && !in_flight.iter().any(|(o, _)| o.name() == name)
                            && !local.iter().any(|(o, _, _)| o.name() == name)
                        {
                            store.apply_changes([Change::Delete(ObjectKey::cluster(Kind::Allocation, &name))]);
                            truth.remove(&name);
                        }
                    }
                    Step::Limit { project, vcpu, servers } => {
                        let p = PROJECTS[project];
                        // Below what the project may hold: claims on their way may land or
                        // fail, so each name counts its largest version.
                        let mut possible = truth.clone();
                        let versions = in_flight
                            .iter()
                            .map(|(o, _)| o)
                            .chain(store.list(Kind::Allocation));
                        for o in versions {
                            let h = held(o);
                            let e = possible.entry(o.name().to_string()).or_insert(h.clone());
                            if h.0 == p && h.1 && (e.0 != p || !e.1 || h.2 > e.2) {
                                *e = h;
                            }
                        }
                        // Claims the Placement API decided may yet be admitted.
                        for (o, _, _) in &local {
                            let h = held(o);
                            if h.0 == p && h.1 {
                                let e = possible.entry(o.name().to_string()).or_insert(h.clone());
                                if e.0 != p || !e.1 || h.2 > e.2 {
                                    *e = h;
                                }
                            }
                        }
                        let (used_vcpu, used_servers) = usage(&possible, p);
                        lowered |= vcpu < used_vcpu || servers < used_servers;
                        store.apply_changes([Change::Put(Box::new(quota(p, vcpu, servers)))]);
                        limits.insert(p.to_string(), (vcpu, servers));
                        limit_changes += 1;
                    }
                    Step::Failover => {
                        // A new leader decides once its store has caught up with the API server.
                        // Claims the old leader's Placement API decided and never sent are
                        // lost with it.
                        for (o, before, _) in local.drain(..) {
                            undo(&mut store, &o, before);
                        }
                        for (o, _) in in_flight.drain(..) {
                            store.apply_changes([Change::Put(Box::new(o))]);
                        }
                        ledger = Ledger::new(Duration::from_secs(30));
                    }
                    Step::Move { n, vcpu } => {
                        let (name, migration) = (format!("c{n}"), format!("m{n}"));
                        let held = truth.get(&name).cloned();
                        let busy = in_flight.iter().map(|(o, _)| o).chain(local.iter().map(|(o, _, _)| o))
                            .any(|o| o.name() == name || o.name() == migration)
                            || truth.contains_key(&migration);
                        let Some((project, true, old)) = held else { continue };
                        if busy || store.get_cluster(Kind::Allocation, &name).is_none() {
                            continue;
                        }
                        writes += 1;
                        let w = format!("w{writes}");
                        let creates = vec![
                            claim(&migration, 1000 + n, &project, "MIGRATION", old, Some(&w)),
                            claim(&name, n, &project, "INSTANCE", vcpu, Some(&w)),
                        ];
                        let record = write(&store, &w, &creates, &[]);
                        if decide(&mut ledger, &store, &record).allowed {
                            let before = usage(&truth, &project);
                            truth.insert(migration, (project.clone(), false, old));
                            truth.insert(name, (project.clone(), true, vcpu));
                            prop_assert!(within(before, usage(&truth, &project), limits[&project]));
                            deliver_write(&mut store, record, creates, &[]);
                        }
                    }
                    Step::Confirm { n } => {
                        let migration = format!("m{n}");
                        if store.get_cluster(Kind::Allocation, &migration).is_some() {
                            store.apply_changes([Change::Delete(ObjectKey::cluster(Kind::Allocation, &migration))]);
                            truth.remove(&migration);
                        }
                    }
                    Step::Local { n, project, vcpu } => {
                        let name = format!("c{n}");
                        let key = ObjectKey::cluster(Kind::Allocation, &name);
                        let busy = in_flight.iter().map(|(o, _)| o).chain(local.iter().map(|(o, _, _)| o))
                            .any(|o| o.name() == name);
                        if busy {
                            continue;
                        }
                        let o = claim(&name, n, PROJECTS[project], "INSTANCE", vcpu, None);
                        let before = store.get(&key).cloned();
                        let pending = ledger.beside(&store, &name, Instant::now());
                        if crate::admission::admit_and_store_beside(&mut store, o.clone(), &pending).allowed {
                            store.hold_decided([(&key, before.as_ref())]);
                            local.push((o, before, limit_changes));
                        }
                    }
                    Step::Review => {
                        if local.is_empty() {
                            continue;
                        }
                        let (o, before, limits_then) = local.remove(0);
                        let name = o.name().to_string();
                        if decide_over(&mut ledger, &store, &o, before.as_ref()).allowed {
                            let (project, _, vcpu) = held(&o);
                            let was = usage(&truth, &project);
                            truth.insert(name, (project.clone(), true, vcpu));
                            prop_assert!(within(was, usage(&truth, &project), limits[&project]),
                                "{project}: {was:?} -> {:?} over {:?}", usage(&truth, &project), limits[&project]);
                            store.release_decided([&ObjectKey::of(&o)]);
                            in_flight.push((o, ()));
                        } else {
                            // Decided beside every claim admitted before it, and counted by
                            // every claim admitted after: only a limit changed since refuses
                            // it.
                            prop_assert!(limits_then < limit_changes,
                                "the review of {name} refused what the Placement API decided");
                            undo(&mut store, &o, before);
                        }
                    }
                }
                if !lowered {
                    for p in PROJECTS {
                        let (used, limit) = (usage(&truth, p), limits[p]);
                        prop_assert!(used.0 <= limit.0 && used.1 <= limit.1, "{p}: {used:?} over {limit:?}");
                        // Nor does the store show more, with the claims decided here.
                        let shown = store.charges().usage(p);
                        let shown = (shown.resources.get("VCPU").copied().unwrap_or(0), shown.servers);
                        prop_assert!(shown.0 <= limit.0 && shown.1 <= limit.1, "{p}: the store shows {shown:?} over {limit:?}");
                    }
                }
            }
            // Delivered at last, the store charges what the API server holds.
            for (o, before, _) in local.drain(..) {
                undo(&mut store, &o, before);
            }
            for (o, _) in in_flight.drain(..) {
                store.apply_changes([Change::Put(Box::new(o))]);
            }
            for p in PROJECTS {
                let charged = store.charges().usage(p);
                prop_assert_eq!(
                    (charged.resources.get("VCPU").copied().unwrap_or(0), charged.servers),
                    usage(&truth, p)
                );
            }
        }
    }
}
