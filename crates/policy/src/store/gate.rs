//! The store's gate: every way a watch change is held back, in one place. The watches bring
//! each object's events on a stream of its kind, a moment behind the writes that made them,
//! while a write of this process puts its decision in the store at once; a change that
//! arrives after the store has moved past it must not undo what readers already see. Each
//! mechanism below keeps one kind of late change out, for a while:
//!
//! | mechanism | what it holds back | until | at most |
//! |---|---|---|---|
//! | deletion held | events of an object a write deleted (its status written meanwhile) | the deletion's own event, or the object put again | 30 s ([`DELETION_HELD`]) |
//! | decided here | every event of an object a write of this process decided and has not committed | the write committed or undone ([`Store::release_decided`]) | the write's commit |
//! | held for a record | events marked by a PlacementWrite whose record has not arrived (another stream), and later events of the same object | the record arrives | 10 s ([`writes::HELD_AT_MOST`]) |
//! | overlaid | events of an object showing an open write's change, other than the write's own | the write's own event | 30 s |
//! | set aside | a mirrored object under a name a written object holds | the written one is deleted | — |
//!
//! The checks of a watch change, in order ([`Gate::judge`]): a mirrored change is set aside
//! or brings one back; a change of an object decided here is skipped; a change the store is
//! past (an older version, the deletion of an earlier object of the name) is skipped; a
//! PlacementWrite's record opens its write and its deletion closes it; a change marked by a
//! write not seen yet, or of an object with a change held, is held; a put older than an
//! overlaid write's change is skipped; a put of an object whose deletion is held is skipped;
//! anything else is taken. A relist ([`Store::apply_relist`]) keeps what the list cannot know
//! of: objects written after it, mirrored ones, and ones showing a write's decision.

use std::collections::BTreeMap;
use std::time::Instant;

use kubeplace_api::{Kind, Object};

use super::writes::{self, Writes};
use super::{Change, ObjectKey, Store};

/// How long a deletion is held at most: far longer than the watch takes to bring it.
pub(super) const DELETION_HELD: std::time::Duration = std::time::Duration::from_secs(30);

/// Every watch change held back, and why.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gate {
    /// Objects a write deleted here whose deletion the watch has not brought yet.
    deletions: BTreeMap<ObjectKey, HeldDeletion>,
    /// Objects a write of this process has decided and not committed yet, by how many such
    /// writes: watch events of them are older than the decision, or its own answer (put by
    /// the writer), so a reader never sees the decision half undone by a late event.
    decided: BTreeMap<ObjectKey, Decided>,
    /// How many writes [`Store::hold_decided`] numbered.
    decided_writes: u64,
    /// Open PlacementWrites, what they hold, and changes held for their records.
    pub(super) writes: Writes,
    /// Mirrored objects whose name a written object holds: the written one stands in their
    /// place until it is deleted.
    aside: BTreeMap<ObjectKey, Object>,
}

/// An object writes of this process decided and have not committed.
#[derive(Debug, Clone)]
struct Decided {
    /// How many.
    writes: u32,
    /// The object before the first of them: what the API server holds until one commits.
    before: Option<Object>,
    /// The first of them, by number: a write's objects change together or not at all.
    write: u64,
}

/// A deletion held: since when, and of which object (its uid) when only that one is
/// deleted; none, every version of the name.
#[derive(Debug, Clone)]
struct HeldDeletion {
    since: Instant,
    uid: Option<String>,
}

/// What the gate decides of one watch change ([`Gate::judge`]).
#[derive(Debug)]
pub(super) enum Verdict {
    /// Not taken: the store is past it, it only moved what is set aside, or it is older than
    /// what a write shows.
    Skip,
    /// Held for a write's record; taken when it arrives.
    Held,
    /// Taken as it is.
    Take(Change),
    /// A PlacementWrite's record: its write opens.
    Open(Box<Object>),
    /// A PlacementWrite's deletion: its write closes.
    Close(ObjectKey),
    /// A mirrored object goes.
    Unmirror(ObjectKey),
}

impl Gate {
    /// What becomes of a watch change, the store holding `current` under its key; `live`:
    /// watch events, not a list (in a list nothing waits for a write not seen yet).
    pub(super) fn judge(
        &mut self,
        change: Change,
        current: Option<&Object>,
        live: bool,
    ) -> Verdict {
        let change = match self.set_aside(change, current) {
            Some(Change::Unmirror(key)) => return Verdict::Unmirror(key),
            Some(change) => change,
            None => return Verdict::Skip,
        };
        let key = change.key();
        if self.decided.contains_key(&key) || change.is_past(current) {
            return Verdict::Skip;
        }
        match change {
            Change::Put(object) if key.kind == Kind::PlacementWrite => Verdict::Open(object),
            Change::Put(object) => {
                let marked = writes::mark_of(&object)
                    .filter(|mark| live && self.writes.waits(mark, std::time::SystemTime::now()))
                    .map(str::to_string);
                if let Some(mark) =
                    marked.or_else(|| self.writes.holds_key(&key).map(str::to_string))
                {
                    self.writes.hold(Change::Put(object), mark);
                    return Verdict::Held;
                }
                if !self.writes.takes_put(&key, &object) || self.deletion_held(&key, &object) {
                    return Verdict::Skip;
                }
                Verdict::Take(Change::Put(object))
            }
            Change::Delete(_) | Change::DeleteOf { .. } if key.kind == Kind::PlacementWrite => {
                Verdict::Close(key)
            }
            delete => {
                if let Some(mark) = self.writes.holds_key(&key).map(str::to_string) {
                    self.writes.hold(delete, mark);
                    return Verdict::Held;
                }
                self.writes.deleted(&key);
                Verdict::Take(delete)
            }
        }
    }

    /// A watch or mirror change as the store takes it: `None` when it only moves what is set
    /// aside. A mirrored put over a written object is set aside; a written put over a
    /// mirrored object sets that one aside; an unmirror of an object set aside forgets it.
    fn set_aside(&mut self, change: Change, current: Option<&Object>) -> Option<Change> {
        match change {
            Change::Put(object) => {
                let key = ObjectKey::of(&object);
                match (object.is_mirrored(), current) {
                    (true, Some(held)) if !held.is_mirrored() => {
                        self.aside.insert(key, *object);
                        None
                    }
                    (false, Some(held)) if held.is_mirrored() => {
                        self.aside.insert(key, held.clone());
                        Some(Change::Put(object))
                    }
                    _ => Some(Change::Put(object)),
                }
            }
            Change::Unmirror(key) => {
                if self.aside.remove(&key).is_some() {
                    return None;
                }
                current
                    .is_some_and(|o| o.is_mirrored())
                    .then_some(Change::Unmirror(key))
            }
            delete => Some(delete),
        }
    }

    /// The mirrored object set aside under `key`, taken back: its written one is deleted.
    pub(super) fn take_aside(&mut self, key: &ObjectKey) -> Option<Object> {
        self.aside.remove(key)
    }

    /// Holds the deletion of the object of `uid` only (any object of the name with none).
    pub(super) fn hold_deletion(&mut self, key: ObjectKey, uid: Option<String>, now: Instant) {
        self.deletions
            .retain(|_, held| now.duration_since(held.since) < DELETION_HELD);
        self.deletions.insert(key, HeldDeletion { since: now, uid });
    }

    /// Lets events of the object be taken again.
    pub(super) fn release_deletion(&mut self, key: &ObjectKey) {
        self.deletions.remove(key);
    }

    /// Whether a put of `object` under `key` is of an object whose deletion is held.
    pub(super) fn deletion_held(&self, key: &ObjectKey, object: &Object) -> bool {
        self.deletions.get(key).is_some_and(|held| {
            held.since.elapsed() < DELETION_HELD
                && held
                    .uid
                    .as_deref()
                    .is_none_or(|uid| object.meta().uid.as_deref() == Some(uid))
        })
    }

    /// Whether any deletion is held.
    pub(super) fn holds_deletions(&self) -> bool {
        !self.deletions.is_empty()
    }

    /// Whether the object shows a decision its own event has not brought yet.
    pub(super) fn holds_back(&self, key: &ObjectKey) -> bool {
        self.writes.is_overlaid(key) || self.decided.contains_key(key)
    }

    /// Whether a change of the object waits for a PlacementWrite's record.
    pub(super) fn holds_for_record(&self, key: &ObjectKey) -> bool {
        self.writes.holds_key(key).is_some()
    }
}

/// What a relist changed ([`Store::apply_relist`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Relisted {
    /// Listed objects taken.
    pub taken: usize,
    /// Objects of the kind removed: not listed, and nothing says the list could not know of
    /// them.
    pub removed: usize,
    /// The providers whose provider config outcome moved.
    pub moved: Vec<String>,
}

impl Store {
    /// Replaces the objects of `kind` by a list of them, taken a moment ago: what is not
    /// listed goes, unless the list could not know of it (an object mirrored from the
    /// cluster's own kinds, never in the API server; one showing a write's decision whose
    /// own event is still to come; one stored at a later resourceVersion than any listed, so
    /// written after the list); a listed object goes in unless the store holds a newer
    /// version of it. The gate judges each as it judges a list.
    pub fn apply_relist(&mut self, kind: Kind, listed: Vec<Object>) -> Relisted {
        let keep: std::collections::BTreeSet<ObjectKey> =
            listed.iter().map(ObjectKey::of).collect();
        let newest_listed = listed
            .iter()
            .filter_map(|o| super::resource_version(o.meta()))
            .max();
        let written_since = |o: &Object| {
            matches!(
                (newest_listed, super::resource_version(o.meta())),
                (Some(listed), Some(held)) if held > listed
            )
        };
        let gone: Vec<Change> = self
            .iter_shared()
            .filter(|(k, o)| {
                k.kind == kind
                    && !keep.contains(*k)
                    && !o.is_mirrored()
                    && !written_since(o)
                    && !self.holds_back(k)
            })
            .map(|(k, _)| Change::Delete(k.clone()))
            .collect();
        let listed: Vec<Object> = listed
            .into_iter()
            .filter(|o| {
                !self
                    .get(&ObjectKey::of(o))
                    .is_some_and(|held| super::newer_or_same(held, o) && held != o)
            })
            .collect();
        let (taken, removed) = (listed.len(), gone.len());
        let moved = self.apply_listed(
            gone.into_iter()
                .chain(listed.into_iter().map(|o| Change::Put(Box::new(o)))),
        );
        Relisted {
            taken,
            removed,
            moved,
        }
    }

    /// Holds the deletion of an object a write made (over a cluster: committed, or about to
    /// be): until the watch brings the deletion, or [`DELETION_HELD`] passes, watch events
    /// of the object ([`Store::apply_changes`]) are not taken.
    pub fn hold_deletion(&mut self, key: ObjectKey, now: Instant) {
        self.gate.hold_deletion(key, None, now);
    }

    /// [`Store::hold_deletion`] of the object `deleted`: with a uid, only that object's late
    /// events are held, and an object made under its name since is taken (and leaves the
    /// hold in place: a write decided and undone puts and removes it again).
    pub fn hold_deletion_of_object(&mut self, key: ObjectKey, deleted: &Object, now: Instant) {
        self.gate
            .hold_deletion(key, deleted.meta().uid.clone(), now);
    }

    /// Lets watch events of the object be taken again (the deletion was not made).
    pub fn release_deletion(&mut self, key: &ObjectKey) {
        self.gate.release_deletion(key);
    }

    /// Objects a write of this process decided and has not committed: the store shows the
    /// decision, which the API server may yet refuse.
    pub fn decided_here(&self) -> impl Iterator<Item = &ObjectKey> {
        self.gate.decided.keys()
    }

    /// The Allocations writes of this process decided and have not committed, each with
    /// the version the API server held before the decision (none: it held none) and the
    /// write it belongs to (the same number for the claims of one write).
    pub fn claims_decided_here(
        &self,
    ) -> impl Iterator<Item = (&str, Option<&kubeplace_api::Allocation>, u64)> {
        self.gate
            .decided
            .iter()
            .filter(|(key, _)| key.kind == Kind::Allocation)
            .map(|(key, decided)| {
                let before = match &decided.before {
                    Some(Object::Allocation(a)) => Some(a),
                    _ => None,
                };
                (key.name.as_str(), before, decided.write)
            })
    }

    /// Keeps watch events of the objects one write of this process decided from being
    /// taken until [`Store::release_decided`]; each key comes with its object before the
    /// decision.
    pub fn hold_decided<'k>(
        &mut self,
        keys: impl IntoIterator<Item = (&'k ObjectKey, Option<&'k Object>)>,
    ) {
        let gate = &mut self.gate;
        gate.decided_writes += 1;
        let write = gate.decided_writes;
        for (key, before) in keys {
            gate.decided
                .entry(key.clone())
                .or_insert_with(|| Decided {
                    writes: 0,
                    before: before.cloned(),
                    write,
                })
                .writes += 1;
        }
    }

    /// The write committed (its objects put as written) or undone: watch events of them
    /// are taken again.
    pub fn release_decided<'k>(&mut self, keys: impl IntoIterator<Item = &'k ObjectKey>) {
        for key in keys {
            if let Some(decided) = self.gate.decided.get_mut(key) {
                decided.writes -= 1;
                if decided.writes == 0 {
                    self.gate.decided.remove(key);
                }
            }
        }
    }

    /// The write that holds an object: open and changing it, or its change shown while the
    /// object's own event has not arrived. Other writes of the object wait for it.
    pub fn write_on(&self, key: &ObjectKey) -> Option<&str> {
        self.gate.writes.on(key)
    }

    /// Whether the object shows a write's decision that its own event has not brought yet
    /// (a write of several objects, or one this process decided): a list of its kind that
    /// lacks it does not delete it.
    pub fn holds_back(&self, key: &ObjectKey) -> bool {
        self.gate.holds_back(key)
    }

    /// Whether a watch change of the object is held for a PlacementWrite's record that has
    /// not arrived: the store does not show it yet, whatever the watch has brought since.
    pub fn holds_for_record(&self, key: &ObjectKey) -> bool {
        self.gate.holds_for_record(key)
    }

    /// An open write's record.
    pub fn open_write(&self, name: &str) -> Option<&kubeplace_api::PlacementWrite> {
        if !self.gate.writes.is_open(name) {
            return None;
        }
        match self.get_cluster(Kind::PlacementWrite, name) {
            Some(Object::PlacementWrite(w)) => Some(w),
            _ => None,
        }
    }

    /// Closes a write this process made and finished: its objects as written are in the
    /// store already (each put with [`Store::put`]), so its record, should its events come
    /// later, opens nothing, and events of its objects held for it are dropped.
    pub fn close_finished_write(&mut self, name: &str) {
        self.gate.writes.close(name);
        self.gate.writes.drop_held(name);
    }

    /// Whether the store has seen the write: open, or closed lately.
    pub fn knows_write(&self, name: &str) -> bool {
        self.gate.writes.is_open(name) || self.gate.writes.is_closed(name)
    }

    /// The mirrored object set aside under a written one's name, if any.
    pub fn mirrored_aside(&self, key: &ObjectKey) -> Option<&Object> {
        self.gate.aside.get(key)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{Change, ObjectKey, Store};
    use crate::test_objects::object;
    use kubeplace_api::Kind;

    fn provider(vcpu: i64, mirrored: bool) -> Change {
        let annotation = if mirrored {
            "annotations: {kubeplace.io/mirrored-from: Node/n1}"
        } else {
            "{}"
        };
        let meta = if mirrored {
            format!("{{name: n1, {annotation}}}")
        } else {
            "{name: n1}".to_string()
        };
        Change::Put(Box::new(object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {meta}\nspec: {{inventories: {{VCPU: {{total: {vcpu}}}}}}}\n"
        ))))
    }

    fn total(store: &Store) -> Option<i64> {
        store.index().inventory("n1", "VCPU").map(|i| i.total)
    }

    #[test]
    fn a_written_provider_stands_in_place_of_the_mirrored_one_in_either_order() {
        let key = ObjectKey::cluster(Kind::ResourceProvider, "n1");
        // Written first: the Node's provider waits aside.
        let mut store = Store::default();
        store.apply_changes([provider(4, false), provider(8, true)]);
        assert_eq!(total(&store), Some(4));
        // The Node changes meanwhile; its deletion of the written one brings it back as it is now.
        store.apply_changes([provider(16, true)]);
        store.apply_changes([Change::Delete(key.clone())]);
        assert_eq!(total(&store), Some(16));
        assert!(store.get(&key).unwrap().is_mirrored());
        // Mirrored first: a written one takes its place; the Node goes meanwhile.
        store.apply_changes([provider(2, false)]);
        assert_eq!(total(&store), Some(2));
        store.apply_changes([Change::Unmirror(key.clone())]);
        assert_eq!(total(&store), Some(2), "the written one stays");
        store.apply_changes([Change::Delete(key.clone())]);
        assert_eq!(total(&store), None, "nothing comes back");
        // An unmirror never takes a written object.
        store.apply_changes([provider(2, false), Change::Unmirror(key.clone())]);
        assert_eq!(total(&store), Some(2));
        // Deleted directly (the Placement API, offline), the mirrored one comes back too.
        store.apply_changes([provider(8, true)]);
        store.delete(&key);
        assert_eq!(total(&store), Some(8));
    }

    mod relists {
        use proptest::prelude::*;

        use crate::store::{Change, ObjectKey, Store, resource_version};
        use crate::test_objects::object;
        use kubeplace_api::{Kind, Object};

        /// Provider `n{name}` at resourceVersion `rv` (none: mirrored from a Node, which
        /// the API server never holds) with `vcpu`.
        fn provider(name: usize, rv: Option<u64>, vcpu: i64) -> Object {
            let meta = match rv {
                Some(rv) => format!("{{name: n{name}, resourceVersion: \"{rv}\"}}"),
                None => format!(
                    "{{name: n{name}, annotations: {{kubeplace.io/mirrored-from: Node/n{name}}}}}"
                ),
            };
            object(&format!(
                "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {meta}\nspec: {{inventories: {{VCPU: {{total: {vcpu}}}}}}}\n"
            ))
        }

        /// What the store holds under each of six names, and what a list of them says.
        fn case()
        -> impl Strategy<Value = (Vec<Option<Object>>, Vec<Option<Object>>, Option<Object>)>
        {
            let held =
                prop::collection::vec(prop::option::of((prop::option::of(1u64..20), 1i64..4)), 6);
            let listed = prop::collection::vec(prop::option::of((1u64..20, 1i64..4)), 6);
            let other = prop::option::of(1i64..4);
            (held, listed, other).prop_map(|(held, listed, other)| {
                let held = held
                    .into_iter()
                    .enumerate()
                    .map(|(i, h)| h.map(|(rv, v)| provider(i, rv, v)))
                    .collect();
                let listed = listed
                    .into_iter()
                    .enumerate()
                    .map(|(i, l)| l.map(|(rv, v)| provider(i, Some(rv), v)))
                    .collect();
                let other = other.map(|v| {
                    object(&format!(
                        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: f, resourceVersion: \"1\"}}\nspec: {{vcpus: {v}, memoryMb: 512}}\n"
                    ))
                });
                (held, listed, other)
            })
        }

        proptest! {
            /// A relist leaves its kind as listed, except what the list could not know of:
            /// mirrored objects, objects written after the list (at a later
            /// resourceVersion than any listed), and listed objects the store holds a newer
            /// version of; other kinds are untouched.
            #[test]
            fn a_relist_keeps_exactly_what_the_list_could_not_know((held, listed, other) in case()) {
                let mut store = Store::default();
                store.apply_changes(
                    held.iter().flatten().chain(other.iter())
                        .map(|o| Change::Put(Box::new(o.clone()))),
                );
                let newest = listed.iter().flatten()
                    .filter_map(|o| resource_version(o.meta()))
                    .max();
                let relisted =
                    store.apply_relist(Kind::ResourceProvider, listed.iter().flatten().cloned().collect());
                let mut removed = 0;
                for i in 0..6 {
                    let key = ObjectKey::cluster(Kind::ResourceProvider, &format!("n{i}"));
                    let rv = |o: &Object| resource_version(o.meta());
                    let expected = match (&held[i], &listed[i]) {
                        (Some(h), Some(l)) if rv(h).is_some_and(|h| Some(h) >= rv(l)) => Some(h),
                        (_, Some(l)) => Some(l),
                        (Some(h), None) if h.is_mirrored() => Some(h),
                        (Some(h), None) if matches!((rv(h), newest), (Some(h), Some(n)) if h > n) => Some(h),
                        (Some(_), None) => {
                            removed += 1;
                            None
                        }
                        (None, None) => None,
                    };
                    prop_assert_eq!(store.get(&key), expected, "n{}", i);
                }
                prop_assert_eq!(relisted.removed, removed);
                prop_assert_eq!(store.get_cluster(Kind::Flavor, "f"), other.as_ref());
            }
        }

        /// An object showing a write's decision stays through a list that lacks it.
        #[test]
        fn a_relist_keeps_an_object_decided_here() {
            let mut store = Store::default();
            let decided = provider(0, Some(5), 1);
            let key = ObjectKey::of(&decided);
            store.put(decided.clone());
            store.hold_decided([(&key, None)]);
            let relisted = store.apply_relist(Kind::ResourceProvider, Vec::new());
            assert_eq!(relisted.removed, 0);
            assert_eq!(store.get(&key), Some(&decided));
        }
    }
}
