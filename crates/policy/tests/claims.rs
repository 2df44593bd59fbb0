//! Claims decided one at a time, and claims that bypassed that point settled afterwards:
//! whatever the interleaving, no provider counts more than its capacity.

use std::time::{Duration, Instant};

use kubeplace_api::manifest::parse_stream;
use kubeplace_api::{Kind, Object};
use proptest::prelude::*;

use kubeplace_policy::admission::Operation;
use kubeplace_policy::claims::{Ledger, settle};
use kubeplace_policy::scheduling::HeadroomFigures;
use kubeplace_policy::status::reconcile_all;
use kubeplace_policy::store::{Change, ObjectKey, Store};

fn object(yaml: &str) -> Object {
    parse_stream("t.yaml", yaml).unwrap()[0]
        .clone()
        .object()
        .unwrap()
        .unwrap()
}

fn provider(name: &str, vcpus: i64) -> Object {
    object(&format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: {name}\nspec:\n  inventories:\n    VCPU:\n      total: {vcpus}\n"
    ))
}

/// A claim of `vcpus` on `provider`, created at second `created` of the epoch.
fn claim(n: usize, provider: &str, vcpus: i64, created: i64) -> Object {
    let mut o = object(&format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: claim-{n}\nspec:\n  consumer: 00000000-0000-0000-0000-{n:012}\n  allocations:\n  - provider: {provider}\n    resources:\n      VCPU: {vcpus}\n"
    ));
    let time = jiff::Timestamp::from_second(created).unwrap();
    o.meta_mut().creation_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(time));
    o
}

fn used(store: &Store, provider: &str) -> i64 {
    store.index().used(provider, "VCPU")
}

fn applied(store: &Store, name: &str) -> Option<(String, String)> {
    match store.get_cluster(Kind::Allocation, name) {
        Some(Object::Allocation(a)) => a.status.as_ref().and_then(|s| {
            kubeplace_api::find_condition(&s.conditions, "Applied")
                .map(|c| (c.status.clone(), c.reason.clone()))
        }),
        _ => None,
    }
}

#[test]
fn the_ledger_sees_claims_the_store_does_not_show_yet() {
    let mut store = Store::default();
    store.apply(provider("cn1", 2));
    let mut ledger = Ledger::new(Duration::from_secs(30));
    let now = Instant::now();
    let mut allowed = 0;
    for n in 0..5 {
        let c = claim(n, "cn1", 1, 0);
        // None of them reaches the store: the watch is behind.
        if ledger
            .decide(Operation::Create, &c, None, &store, now, false)
            .allowed
        {
            allowed += 1;
        }
    }
    assert_eq!(allowed, 2, "two claims of 1 VCPU fit on 2");
    assert_eq!(ledger.pending().len(), 2);
    // Without the ledger, each alone would have been admitted.
    let lone =
        kubeplace_policy::admission::admit(Operation::Create, &claim(9, "cn1", 1, 0), None, &store);
    assert!(lone.allowed);
}

#[test]
fn a_dry_run_takes_nothing() {
    let mut store = Store::default();
    store.apply(provider("cn1", 1));
    let mut ledger = Ledger::new(Duration::from_secs(30));
    let now = Instant::now();
    let c = claim(0, "cn1", 1, 0);
    assert!(
        ledger
            .decide(Operation::Create, &c, None, &store, now, true)
            .allowed
    );
    assert!(ledger.pending().is_empty());
    let d = claim(1, "cn1", 1, 0);
    assert!(
        ledger
            .decide(Operation::Create, &d, None, &store, now, false)
            .allowed
    );
}

#[test]
fn a_claim_is_held_until_seen_or_until_its_hold_passes() {
    let mut store = Store::default();
    store.apply(provider("cn1", 1));
    let mut ledger = Ledger::new(Duration::from_secs(30));
    let t0 = Instant::now();
    let first = claim(0, "cn1", 1, 0);
    assert!(
        ledger
            .decide(Operation::Create, &first, None, &store, t0, false)
            .allowed
    );
    let second = claim(1, "cn1", 1, 0);
    let refused = ledger.decide(Operation::Create, &second, None, &store, t0, false);
    assert!(!refused.allowed);
    assert!(refused.message.contains("capacity"), "{}", refused.message);
    // The store shows the first: the ledger forgets it, and the store refuses the second.
    store.apply(first.clone());
    assert!(
        !ledger
            .decide(Operation::Create, &second, None, &store, t0, false)
            .allowed
    );
    assert!(ledger.pending().is_empty());
    // A claim never stored holds capacity for the hold only.
    let mut store = Store::default();
    store.apply(provider("cn1", 1));
    assert!(
        ledger
            .decide(Operation::Create, &first, None, &store, t0, false)
            .allowed
    );
    let later = t0 + Duration::from_secs(31);
    assert!(
        ledger
            .decide(Operation::Create, &second, None, &store, later, false)
            .allowed
    );
}

#[test]
fn a_claim_deleted_before_the_ledger_looked_holds_nothing() {
    let mut store = Store::default();
    store.apply(provider("cn1", 1));
    let mut ledger = Ledger::new(Duration::from_secs(30));
    let now = Instant::now();
    let mut first = claim(0, "cn1", 1, 0);
    first.meta_mut().uid = Some("uid-0".into());
    assert!(
        ledger
            .decide(Operation::Create, &first, None, &store, now, false)
            .allowed
    );
    // The watch delivers it and its deletion between two decisions.
    store.put(first.clone());
    store.delete(&ObjectKey::of(&first));
    let second = claim(1, "cn1", 1, 0);
    assert!(
        ledger
            .decide(Operation::Create, &second, None, &store, now, false)
            .allowed
    );
}

#[test]
fn claims_that_bypassed_admission_are_settled_oldest_first() {
    let mut store = Store::default();
    store.apply(provider("cn1", 4));
    // Six claims written straight into the store, newest first.
    for n in (0..6).rev() {
        store.put(claim(n, "cn1", 1, 100 + n as i64));
    }
    assert_eq!(used(&store, "cn1"), 6, "unsettled, they all count");
    let refused = settle(&mut store);
    let names: Vec<&str> = refused.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["claim-4", "claim-5"]);
    assert_eq!(used(&store, "cn1"), 4);
    reconcile_all(&mut store, &HeadroomFigures::default(), 5);
    for n in 0..4 {
        assert_eq!(
            applied(&store, &format!("claim-{n}")),
            Some(("True".into(), "Applied".into()))
        );
    }
    for n in 4..6 {
        assert_eq!(
            applied(&store, &format!("claim-{n}")),
            Some(("False".into(), "OverCapacity".into()))
        );
    }
    // Settling again changes nothing; the verdicts are in the statuses.
    assert!(settle(&mut store).is_empty());
    assert_eq!(used(&store, "cn1"), 4);
}

#[test]
fn a_verdict_in_the_status_survives_a_restart_and_an_inventory_shrink() {
    let mut store = Store::default();
    store.apply(provider("cn1", 3));
    for n in 0..4 {
        store.put(claim(n, "cn1", 1, n as i64));
    }
    reconcile_all(&mut store, &HeadroomFigures::default(), 5);
    assert_eq!(used(&store, "cn1"), 3);
    // A new replica reads the objects with their statuses, in any order.
    let mut objects: Vec<Object> = store.keys().filter_map(|k| store.get(k).cloned()).collect();
    objects.reverse();
    let mut fresh = Store::default();
    for o in objects {
        fresh.put(o);
    }
    assert_eq!(used(&fresh, "cn1"), 3, "the refused claim does not count");
    assert!(settle(&mut fresh).is_empty());
    // The inventory shrinks below what is allocated: counted claims stay counted.
    fresh.apply(provider("cn1", 1));
    assert!(settle(&mut fresh).is_empty());
    assert_eq!(used(&fresh, "cn1"), 3);
    reconcile_all(&mut fresh, &HeadroomFigures::default(), 5);
    assert_eq!(
        applied(&fresh, "claim-0"),
        Some(("True".into(), "ExceedsCapacity".into()))
    );
    // And no new claim fits.
    let mut ledger = Ledger::new(Duration::from_secs(30));
    let new = claim(7, "cn1", 1, 9);
    assert!(
        !ledger
            .decide(Operation::Create, &new, None, &fresh, Instant::now(), false)
            .allowed
    );
}

/// One step of a cluster's life, as the property test plays it.
#[derive(Debug, Clone)]
enum Step {
    /// A claim through the webhook's decision point; the store sees it only when `Deliver`
    /// comes, or never.
    Admit {
        n: usize,
        provider: usize,
        vcpus: i64,
    },
    /// A claim written around the decision point, straight into the store.
    Bypass {
        n: usize,
        provider: usize,
        vcpus: i64,
    },
    /// The watch delivers the oldest claim admitted but not yet in the store.
    Deliver,
    /// A claim is deleted.
    Release { n: usize },
    /// A provider's inventory changes.
    Resize { provider: usize, vcpus: i64 },
    /// The leader settles and writes statuses.
    Settle,
    /// Another replica takes over: it rebuilds its store from the objects (statuses
    /// included) and starts with an empty ledger.
    Failover,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..12usize, 0..2usize, 1..3i64).prop_map(|(n, provider, vcpus)| Step::Admit { n, provider, vcpus }),
        2 => (0..12usize, 0..2usize, 1..3i64).prop_map(|(n, provider, vcpus)| Step::Bypass { n, provider, vcpus }),
        4 => Just(Step::Deliver),
        1 => (0..12usize).prop_map(|n| Step::Release { n }),
        1 => (0..2usize, 0..6i64).prop_map(|(provider, vcpus)| Step::Resize { provider, vcpus }),
        2 => Just(Step::Settle),
        1 => Just(Step::Failover),
    ]
}

const PROVIDERS: [&str; 2] = ["cn1", "cn2"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// After the leader settles, every provider counts at most its capacity, unless its
    /// inventory shrank after claims were counted on it.
    #[test]
    fn no_interleaving_oversubscribes(steps in proptest::collection::vec(step(), 1..60)) {
        let mut store = Store::default();
        // What each provider may count: its capacity, or what it counted when its inventory
        // was reduced below that (Placement allows it; nothing new fits until usage falls).
        let mut bound = [4i64, 4];
        for (i, p) in PROVIDERS.iter().enumerate() {
            store.apply(provider(p, bound[i]));
        }
        let mut ledger = Ledger::new(Duration::from_secs(30));
        let mut in_flight: Vec<Object> = Vec::new();
        let now = Instant::now();
        let mut clock = 0i64;
        for step in steps {
            clock += 1;
            match step {
                Step::Admit { n, provider, vcpus } => {
                    let c = claim(n, PROVIDERS[provider], vcpus, clock);
                    let key = ObjectKey::of(&c);
                    let old = store.get(&key).cloned();
                    let op = if old.is_some() { Operation::Update } else { Operation::Create };
                    if ledger.decide(op, &c, old.as_ref(), &store, now, false).allowed {
                        in_flight.push(c);
                    }
                }
                Step::Bypass { n, provider, vcpus } => {
                    store.put(claim(n, PROVIDERS[provider], vcpus, clock));
                }
                Step::Deliver => {
                    if !in_flight.is_empty() {
                        let c = in_flight.remove(0);
                        store.apply(c);
                    }
                }
                Step::Release { n } => {
                    store.delete(&ObjectKey::cluster(Kind::Allocation, &format!("claim-{n}")));
                }
                Step::Resize { provider, vcpus } => {
                    let mut view = store.clone();
                    settle(&mut view);
                    bound[provider] = vcpus.max(view.index().used(PROVIDERS[provider], "VCPU"));
                    store.apply(self::provider(PROVIDERS[provider], vcpus));
                }
                Step::Settle => {
                    reconcile_all(&mut store, &HeadroomFigures::default(), 3);
                }
                Step::Failover => {
                    let objects: Vec<Object> =
                        store.keys().filter_map(|k| store.get(k).cloned()).collect();
                    store = Store::default();
                    store.apply_changes(objects.into_iter().map(|o| Change::Put(Box::new(o))));
                    ledger = Ledger::new(Duration::from_secs(30));
                    // A new leader settles before it decides anything.
                    reconcile_all(&mut store, &HeadroomFigures::default(), 3);
                }
            }
            let mut view = store.clone();
            settle(&mut view);
            for (i, p) in PROVIDERS.iter().enumerate() {
                let used = view.index().used(p, "VCPU");
                prop_assert!(used <= bound[i], "{p} counts {used} of {}", bound[i]);
            }
        }
        // Every claim the store holds either counts or says why it does not.
        reconcile_all(&mut store, &HeadroomFigures::default(), 3);
        for key in store.keys() {
            if let Some(Object::Allocation(a)) = store.get(key) {
                let status = a.status.as_ref();
                prop_assert!(status.is_some_and(|s| kubeplace_api::find_condition(&s.conditions, "Applied").is_some()), "{key:?} has no verdict");
            }
        }
    }
}

#[test]
fn a_large_store_reconciled_on_every_core_settles_where_one_walk_would() {
    // Enough objects for reconcile_all to compute their statuses on several threads: 1,100
    // providers of 4 VCPUs and 1,100 claims, every tenth of them too large to fit.
    let mut store = Store::default();
    for n in 0..1_100 {
        let name = format!("cn{n:04}");
        store.apply(provider(&name, 4));
        let vcpus = if n % 10 == 0 { 8 } else { 2 };
        store.apply(claim(n, &name, vcpus, 1_700_000_000 + n as i64));
    }
    reconcile_all(&mut store, &HeadroomFigures::default(), 5);
    // Every status is the one computed for it alone, one object after the other.
    let figures = HeadroomFigures::default();
    let world = kubeplace_policy::status::World::new(&store, &figures);
    let keys: Vec<ObjectKey> = store.keys().cloned().collect();
    assert!(keys.len() >= 2_200);
    for key in &keys {
        let object = store.get(key).unwrap();
        let desired = kubeplace_policy::status::desired_status(object, &world);
        assert_eq!(object.status(), Some(desired), "{key:?}");
    }
    assert_eq!(
        applied(&store, "claim-10").map(|(status, _)| status),
        Some("False".into())
    );
    assert_eq!(
        applied(&store, "claim-11").map(|(status, _)| status),
        Some("True".into())
    );
}

/// kube-scheduler's allocation of a device is decided at the ledger: refused while a
/// claim holds the device (counted, or admitted a moment ago), held once admitted.
#[test]
fn a_device_kube_scheduler_allocates_is_decided_beside_every_claim() {
    let mut store = Store::default();
    store.apply(object(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: gpu.example.com.node-a.gpu-0\n  annotations:\n    kubeplace.io/mirrored-from: ResourceSlice/node-a-gpus\nspec:\n  inventories:\n    CUSTOM_GPU: {total: 1}\n",
    ));
    let claim = |name: &str, uid: &str| -> kubeplace_api::cluster_source::ResourceClaim {
        serde_saphyr::from_str(&format!(
            "metadata: {{name: {name}, namespace: ml, uid: {uid}}}\nspec: {{}}\nstatus:\n  allocation:\n    devices:\n      results:\n      - {{request: r, driver: gpu.example.com, pool: node-a, device: gpu-0}}\n"
        ))
        .unwrap()
    };
    let now = Instant::now();
    let first = kubeplace_policy::mirror::claim_allocation(
        &claim("a", "9d1c4c52-0000-4000-8000-000000000001"),
        &store,
    )
    .expect("a device the store has");
    let second = kubeplace_policy::mirror::claim_allocation(
        &claim("b", "9d1c4c52-0000-4000-8000-000000000002"),
        &store,
    )
    .unwrap();
    let mut ledger = Ledger::new(Duration::from_secs(30));
    assert!(
        ledger
            .decide_device_claim(&first, &store, now, false)
            .allowed
    );
    let refused = ledger.decide_device_claim(&second, &store, now, false);
    assert!(
        !refused.allowed && refused.message.contains("CUSTOM_GPU"),
        "{}",
        refused.message
    );
    // Shown by the mirror and then deleted (the pod went): the device is free again.
    store.apply(Object::Allocation(first.clone()));
    store.delete(&ObjectKey::of(&Object::Allocation(first.clone())));
    assert!(
        ledger
            .decide_device_claim(&second, &store, now, false)
            .allowed
    );
    // A claim of kubeplace's on the device, seen by the store, refuses it too.
    let mut ledger = Ledger::new(Duration::from_secs(30));
    store.apply(object(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: server\nspec:\n  consumer: 00000000-0000-0000-0000-000000000009\n  allocations:\n  - provider: gpu.example.com.node-a.gpu-0\n    resources: {CUSTOM_GPU: 1}\n",
    ));
    assert!(
        !ledger
            .decide_device_claim(&first, &store, now, false)
            .allowed
    );
    // A device the store has no provider for is not kubeplace's to decide.
    assert!(
        kubeplace_policy::mirror::claim_allocation(
            &claim("c", "9d1c4c52-0000-4000-8000-000000000003"),
            &Store::default()
        )
        .is_none()
    );
}

/// On a device DRA shares, kube-scheduler's allocations are decided by what they consume:
/// shares that fit beside a Server's are admitted, one that would take more than is left is
/// refused naming the capacity's class.
#[test]
fn shares_of_a_shared_device_are_decided_by_what_they_consume() {
    let mut store = Store::default();
    store.apply(object(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: vgpu.example.com.node-a.vgpu-0\n  annotations:\n    kubeplace.io/mirrored-from: ResourceSlice/node-a-vgpus\n    kubeplace.io/device-capacity: '{\"CUSTOM_VGPU_MEMORY_MB\": [\"memory\", \"Mi\"]}'\nspec:\n  inventories:\n    CUSTOM_VGPU_MEMORY_MB: {total: 40960}\n",
    ));
    store.apply(object(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: server\nspec:\n  consumer: 00000000-0000-0000-0000-000000000009\n  allocations:\n  - provider: vgpu.example.com.node-a.vgpu-0\n    resources: {CUSTOM_VGPU_MEMORY_MB: 20480}\n",
    ));
    let share = |name: &str, uid: &str, memory: &str| {
        let claim: kubeplace_api::cluster_source::ResourceClaim = serde_saphyr::from_str(&format!(
            "metadata: {{name: {name}, namespace: ml, uid: {uid}}}\nspec: {{}}\nstatus:\n  allocation:\n    devices:\n      results:\n      - {{request: r, driver: vgpu.example.com, pool: node-a, device: vgpu-0, shareID: 6ba7b810-9dad-41d1-80b4-00c04fd430c8, consumedCapacity: {{memory: {memory}}}}}\n"
        ))
        .unwrap();
        kubeplace_policy::mirror::claim_allocation(&claim, &store).expect("a device the store has")
    };
    let now = Instant::now();
    let mut ledger = Ledger::new(Duration::from_secs(30));
    let first = share("a", "9d1c4c52-0000-4000-8000-000000000001", "10Gi");
    assert_eq!(
        first.spec.allocations[0].resources["CUSTOM_VGPU_MEMORY_MB"],
        10240
    );
    assert!(
        ledger
            .decide_device_claim(&first, &store, now, false)
            .allowed
    );
    // 10 GiB left beside the Server's 20 and the first share: 10 GiB and 1 byte is too much
    // (a part of a MiB consumed counts whole).
    let over = share("b", "9d1c4c52-0000-4000-8000-000000000002", "10737418241");
    let refused = ledger.decide_device_claim(&over, &store, now, false);
    assert!(
        !refused.allowed && refused.message.contains("CUSTOM_VGPU_MEMORY_MB"),
        "{}",
        refused.message
    );
    let fits = share("c", "9d1c4c52-0000-4000-8000-000000000003", "10Gi");
    assert!(
        ledger
            .decide_device_claim(&fits, &store, now, false)
            .allowed
    );
}
