//! A request's view of the records, in memory and over a cluster, without HTTP.

use std::sync::RwLock;

use super::*;
use kubeplace_api::manifest::parse_stream;

const CLOUD: &str = "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: cn1}\nspec:\n  uuid: 6f3a3a5e-1d8c-4f0e-9a43-0c6c1b2f8a11\n  inventories:\n    VCPU: {total: 4}\n  traits: [CUSTOM_GOLD]\n";

fn store() -> Store {
    let mut store = Store::default();
    for doc in parse_stream("t.yaml", CLOUD).unwrap() {
        store.put(doc.object().unwrap().unwrap());
    }
    store
}

fn claim(name: &str, consumer: &str, vcpu: i64) -> Allocation {
    let yaml = format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {{name: {name}}}\nspec:\n  consumer: {consumer}\n  allocations:\n  - provider: cn1\n    resources: {{VCPU: {vcpu}}}\n"
    );
    match parse_stream("a.yaml", &yaml).unwrap().remove(0).object() {
        Some(Ok(Object::Allocation(a))) => a,
        other => panic!("{other:?}"),
    }
}

/// A request's state over the locks, for writing or for reading.
fn locked<'a>(
    store: &'a RwLock<Store>,
    book: &'a RwLock<Book>,
    backing: Backing,
    write: bool,
) -> State<'a> {
    if write {
        State::new(
            Guard::Write(store.write().unwrap()),
            Guard::Write(book.write().unwrap()),
            backing,
        )
    } else {
        State::new(
            Guard::Read(store.read().unwrap()),
            Guard::Read(book.read().unwrap()),
            backing,
        )
    }
}

const UUID: &str = "6f3a3a5e-1d8c-4f0e-9a43-0c6c1b2f8a11";
const CONSUMER: &str = "0d5c2f5e-3b7a-4c61-8f0e-2a9b1c3d4e5f";

#[test]
fn in_memory_generations_move_and_a_failed_write_puts_them_back() {
    let store = RwLock::new(store());
    let book = RwLock::new(Book::new(&store.read().unwrap(), Backing::Memory));
    let mut state = locked(&store, &book, Backing::Memory, true);
    assert_eq!(state.generation(UUID), 0);
    state.check_generation(UUID, 0).unwrap();
    state.bump(UUID).unwrap();
    state.bump(UUID).unwrap();
    assert_eq!(state.generation(UUID), 2);
    assert_eq!(
        state.check_generation(UUID, 0),
        Err(RecordError::StaleGeneration {
            sent: 0,
            current: 2
        })
    );
    let journal = state.into_journal();
    assert_eq!(journal.generations_before, vec![(UUID.to_string(), None)]);
    let mut state = locked(&store, &book, Backing::Memory, true);
    state
        .restore_generations(&journal.generations_before)
        .unwrap();
    assert_eq!(state.generation(UUID), 0);
}

#[test]
fn a_claim_over_capacity_is_refused_and_leaves_nothing_behind() {
    let store = RwLock::new(store());
    let book = RwLock::new(Book::new(&store.read().unwrap(), Backing::Memory));
    let mut state = locked(&store, &book, Backing::Memory, true);
    state.write_allocation(claim("a1", CONSUMER, 3)).unwrap();
    assert_eq!(state.consumer_allocations(CONSUMER).len(), 1);
    let refused = state
        .write_allocation(claim("a2", CONSUMER, 2))
        .unwrap_err();
    assert!(
        matches!(&refused, RecordError::AllocationRefused(crate::admission::Refusal::NoRoom, m) if m.contains("VCPU")),
        "{refused}"
    );
    assert!(
        refused
            .to_string()
            .starts_with("Unable to allocate inventory: ")
    );
    assert_eq!(state.store().index().used("cn1", "VCPU"), 3);
    assert_eq!(state.consumer_allocations(CONSUMER).len(), 1);
    let journal = state.into_journal();
    // Only the admitted claim changed the store.
    assert_eq!(journal.changes.len(), 1, "{:?}", journal.changes);
}

#[test]
fn a_read_lock_never_writes_and_unknown_providers_are_named() {
    let store = RwLock::new(store());
    let book = RwLock::new(Book::new(&store.read().unwrap(), Backing::Memory));
    let mut state = locked(&store, &book, Backing::Memory, false);
    assert_eq!(state.bump(UUID), Err(RecordError::ReadOnly));
    assert_eq!(
        state.write_allocation(claim("a1", CONSUMER, 1)),
        Err(RecordError::ReadOnly)
    );
    assert_eq!(state.store().index().used("cn1", "VCPU"), 0);
    assert_eq!(
        state.provider_name("00000000-0000-4000-8000-000000000000"),
        Err(RecordError::NoProviderWithUuid(
            "00000000-0000-4000-8000-000000000000".to_string()
        ))
    );
    assert_eq!(
        state.record("cn9").unwrap_err().to_string(),
        "No resource provider named \"cn9\" found"
    );
    // The custom trait the seeded provider uses counts as created.
    assert!(state.trait_exists("CUSTOM_GOLD"));
    assert!(state.trait_exists("HW_CPU_X86_AVX2"));
    assert!(!state.trait_exists("CUSTOM_SILVER"));
}

#[test]
fn over_a_cluster_a_provider_write_carries_the_generation_the_api_server_will_give() {
    let mut seeded = store();
    if let Some(Object::ResourceProvider(rp)) = seeded.get_cluster(Kind::ResourceProvider, "cn1") {
        let mut rp = rp.clone();
        rp.metadata.generation = Some(3);
        seeded.put(Object::ResourceProvider(rp));
    }
    let store = RwLock::new(seeded);
    let book = RwLock::new(Book::new(&store.read().unwrap(), Backing::Cluster));
    let mut state = locked(&store, &book, Backing::Cluster, true);
    assert_eq!(state.generation(UUID), 2, "metadata.generation less one");
    let mut rp = state.provider_object("cn1").unwrap();
    state.write_provider(rp.clone()).unwrap();
    assert_eq!(state.generation(UUID), 2, "the same spec keeps it");
    rp.spec.traits.push("HW_CPU_X86_AVX2".to_string());
    state.write_provider(rp.clone()).unwrap();
    assert_eq!(state.generation(UUID), 3, "a new spec moves it");
    rp.spec.parent = Some("cn1".to_string());
    let refused = state.write_provider(rp).unwrap_err();
    assert!(
        matches!(refused, RecordError::ProviderRefused(..)),
        "{refused}"
    );
}

/// Commits a request's state as the API server would keep it: the store as written.
fn decided(state: &mut State<'_>) {
    state.record_generations().unwrap();
}

#[test]
fn over_a_cluster_claims_and_removals_move_generations_as_placement_and_they_never_go_back() {
    let store = RwLock::new(store());
    let book = RwLock::new(Book::new(&store.read().unwrap(), Backing::Cluster));
    let generation = |store: &RwLock<Store>| {
        let state = locked(store, &book, Backing::Cluster, false);
        state.generation(UUID)
    };
    assert_eq!(generation(&store), 0);
    // A claim moves the provider's generation; its Allocation carries the record.
    {
        let mut state = locked(&store, &book, Backing::Cluster, true);
        state.write_allocation(claim("a", CONSUMER, 1)).unwrap();
        state.bump(UUID).unwrap();
        decided(&mut state);
    }
    assert_eq!(generation(&store), 1);
    let a = store
        .read()
        .unwrap()
        .get_cluster(Kind::Allocation, "a")
        .cloned()
        .unwrap();
    assert_eq!(
        a.meta().annotations.as_ref().unwrap()
            [crate::store::generations::PROVIDER_GENERATIONS_ANNOTATION],
        "cn1=1@1"
    );
    // A second claim, by another consumer.
    {
        let mut state = locked(&store, &book, Backing::Cluster, true);
        state
            .write_allocation(claim("b", "1d5c2f5e-3b7a-4c61-8f0e-2a9b1c3d4e5f", 1))
            .unwrap();
        state.bump(UUID).unwrap();
        decided(&mut state);
    }
    assert_eq!(generation(&store), 2);
    // Removing the Allocation that holds the highest record does not take the generation
    // back: the provider keeps it.
    {
        let mut state = locked(&store, &book, Backing::Cluster, true);
        state
            .delete(&ObjectKey::cluster(Kind::Allocation, "b"))
            .unwrap();
        decided(&mut state);
        let journal = state.into_journal();
        assert!(
            journal
                .changes
                .iter()
                .any(|(k, _, _)| k.kind == Kind::ResourceProvider),
            "the provider is written with its record"
        );
    }
    assert_eq!(generation(&store), 2);
    // A provider write that leaves the spec as it was still moves it once.
    {
        let mut state = locked(&store, &book, Backing::Cluster, true);
        let rp = state.provider_object("cn1").unwrap();
        state.write_provider(rp).unwrap();
        state.bump(UUID).unwrap();
        decided(&mut state);
    }
    assert_eq!(generation(&store), 3);
    // A spec change moves it once, and the records move with it.
    {
        let mut state = locked(&store, &book, Backing::Cluster, true);
        let mut rp = state.provider_object("cn1").unwrap();
        rp.spec.traits.push("HW_CPU_X86_AVX2".to_string());
        state.write_provider(rp).unwrap();
        state.bump(UUID).unwrap();
        decided(&mut state);
    }
    assert_eq!(generation(&store), 4);
}

/// A claim the webhook admitted a moment ago holds its room against the API's own claims
/// before the store shows it: the API's claim that would take that room is refused at
/// once, so the store never shows both (one over capacity) until a review refuses one.
#[test]
fn the_apis_claims_are_decided_beside_the_claims_admitted_and_not_yet_shown() {
    use crate::admission::Operation;
    use crate::claims::Ledger;
    use std::time::{Duration, Instant};
    let store = RwLock::new(store());
    let book = RwLock::new(Book::new(&store.read().unwrap(), Backing::Cluster));
    let mut ledger = Ledger::new(Duration::from_secs(30));
    let admitted = ledger.decide(
        Operation::Create,
        &Object::Allocation(claim("by-kubectl", CONSUMER, 3)),
        None,
        &store.read().unwrap(),
        Instant::now(),
        false,
    );
    assert!(admitted.allowed, "{}", admitted.message);

    // Decided against the store alone, the API's claim of 2 of the 4 would be taken.
    let mut alone = locked(&store, &book, Backing::Cluster, true);
    let other = "7b0c2f5e-3b7a-4c61-8f0e-2a9b1c3d4e5f";
    alone.write_allocation(claim(other, other, 2)).unwrap();
    drop(alone);
    store
        .write()
        .unwrap()
        .delete(&ObjectKey::cluster(Kind::Allocation, other));

    let mut state = locked(&store, &book, Backing::Cluster, true).beside_ledger(&mut ledger);
    match state.write_allocation(claim(other, other, 2)) {
        Err(RecordError::AllocationRefused(_, message)) => {
            assert!(message.contains("capacity"), "{message}")
        }
        answer => panic!("the API's claim was not refused: {answer:?}"),
    }
    // One that fits beside the admitted claim is taken.
    state.write_allocation(claim(other, other, 1)).unwrap();
    assert!(state.store().get_cluster(Kind::Allocation, other).is_some());
}
