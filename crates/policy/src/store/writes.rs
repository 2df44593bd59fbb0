//! PlacementWrites as the store shows them: a write of several objects is recorded as one
//! object before any of its objects changes, and from the moment the store sees that
//! record it shows every change of the write, however far its objects' own watch events
//! have come. So no reader sees a write half done:
//!
//! - a write's record **opens** it: each object it changes shows as the write leaves it
//!   (*overlaid*), until that object's own event, marked with the write's name
//!   ([`WRITE_ANNOTATION`]), arrives; other events of the object meanwhile (a status
//!   written, an older version) are older than the write and are not taken;
//! - an event marked by a write the store has not seen yet (its record is on another watch
//!   stream, a little behind) is **held** until the record arrives, for at most
//!   [`HELD_AT_MOST`];
//! - deleting the record **closes** the write.
//!
//! A write's name carries the time it was decided ([`write_name`]): an event marked by a
//! write older than [`HELD_AT_MOST`] that the store never saw is of a write long closed,
//! and is taken at once.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kubeplace_api::{
    Kind, Object, PlacementWrite, PlacementWriteSpec, WRITE_ANNOTATION, WriteChange, WrittenVersion,
};

use super::{Change, ObjectKey};

/// How a refusal over an unfinished PlacementWrite ends: what callers match to retry.
pub const BUSY_RETRY: &str = "retry once it is finished";

/// Longest an event marked by an unseen write is held: far longer than one watch stream
/// trails another.
pub const HELD_AT_MOST: Duration = Duration::from_secs(10);

/// Longest an object shows a write's change while its own event has not arrived (the write
/// skipped it, or it was deleted meanwhile).
const OVERLAID_AT_MOST: Duration = Duration::from_secs(30);

/// How many closed writes' names the store remembers.
const CLOSED_KEPT: usize = 4096;

/// One object a write changes, read from its record.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedChange {
    pub key: ObjectKey,
    /// The version decided on; none for a creation.
    pub before: Option<WrittenVersion>,
    /// The object as the write leaves it; none for a deletion.
    pub after: Option<Object>,
}

/// The changes a write's record lists, or what is wrong with it: only providers and
/// Allocations, each once, each `after` an object of its kind and name marked with the
/// write's name, a deletion naming the version it deletes.
pub fn planned(write: &PlacementWrite) -> Result<Vec<PlannedChange>, String> {
    let name = write.metadata.name.as_deref().unwrap_or("");
    if write.spec.changes.is_empty() {
        return Err("spec.changes is empty; a write changes at least one object".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut changes = Vec::with_capacity(write.spec.changes.len());
    for (i, change) in write.spec.changes.iter().enumerate() {
        let at = format!("spec.changes[{i}]");
        let kind = match Kind::from_name(&change.kind) {
            Some(k @ (Kind::Allocation | Kind::ResourceProvider)) => k,
            _ => {
                return Err(format!(
                    "{at}.kind {:?} is not written by Placement writes; use Allocation or ResourceProvider",
                    change.kind
                ));
            }
        };
        let key = ObjectKey::cluster(kind, &change.name);
        if !seen.insert(key.clone()) {
            return Err(format!(
                "{at}: the {kind} {:?} is changed twice; list each object once",
                change.name
            ));
        }
        let after = match &change.after {
            None => None,
            Some(value) => {
                let object = Object::from_value(kind, value.clone()).map_err(|e| {
                    format!(
                        "{at}.after is not a {kind}: field {}: {}",
                        e.path, e.message
                    )
                })?;
                if object.name() != change.name {
                    return Err(format!(
                        "{at}.after is named {:?}, not {:?}; an after is the object it changes",
                        object.name(),
                        change.name
                    ));
                }
                if mark_of(&object) != Some(name) {
                    return Err(format!(
                        "{at}.after lacks annotation {WRITE_ANNOTATION}: {name:?}; every object a write leaves is marked with it"
                    ));
                }
                Some(object)
            }
        };
        if after.is_none() && change.before.is_none() {
            return Err(format!(
                "{at} has neither before nor after; a deletion names the version it deletes"
            ));
        }
        changes.push(PlannedChange {
            key,
            before: change.before.clone(),
            after,
        });
    }
    Ok(changes)
}

/// The write an object was last written by, if it was written by one.
pub fn mark_of(object: &Object) -> Option<&str> {
    object.annotation(WRITE_ANNOTATION)
}

/// A write's name: when it was decided (milliseconds since the epoch) and a number of the
/// writer's own, so names never repeat.
pub fn write_name(decided: SystemTime, nonce: u64) -> String {
    let millis = decided
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    format!("w-{millis:x}-{nonce:016x}")
}

/// When a write was decided, from its name.
pub fn decided_at(name: &str) -> Option<SystemTime> {
    let millis = name.strip_prefix("w-")?.split('-').next()?;
    let millis = u64::from_str_radix(millis, 16).ok()?;
    UNIX_EPOCH.checked_add(Duration::from_millis(millis))
}

/// What the store keeps about writes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Writes {
    /// Open writes by name: the keys each changes.
    open: BTreeMap<String, Vec<ObjectKey>>,
    /// The write each key of an open write belongs to.
    busy: BTreeMap<ObjectKey, String>,
    /// Names of the writes closed last, newest at the back.
    closed: VecDeque<String>,
    /// Keys showing a write's change whose own event has not arrived: the write, and since.
    overlaid: BTreeMap<ObjectKey, (String, Instant)>,
    /// Watch changes marked by a write not seen yet, oldest first: the change, the write's
    /// name, and since when it is held.
    held: Vec<(Change, String, Instant)>,
}

impl Writes {
    /// The write that holds a key: open and changing it, or its change shown and its
    /// object's own event not arrived.
    pub(crate) fn on(&self, key: &ObjectKey) -> Option<&str> {
        self.busy
            .get(key)
            .or_else(|| self.overlaid.get(key).map(|(w, _)| w))
            .map(String::as_str)
    }

    pub(crate) fn is_open(&self, name: &str) -> bool {
        self.open.contains_key(name)
    }

    pub(crate) fn is_closed(&self, name: &str) -> bool {
        self.closed.iter().any(|c| c == name)
    }

    pub(crate) fn is_overlaid(&self, key: &ObjectKey) -> bool {
        self.overlaid.contains_key(key)
    }

    /// Whether a change marked by `mark` waits for its write's record: the write is neither
    /// open nor closed here, and recent.
    pub(crate) fn waits(&self, mark: &str, now: SystemTime) -> bool {
        // Most marks are of writes long closed: the cheap test first.
        let recent = decided_at(mark).is_some_and(|at| {
            now.duration_since(at)
                .map_or(true, |age| age < HELD_AT_MOST)
        });
        recent && !self.open.contains_key(mark) && !self.is_closed(mark)
    }

    /// Whether a change of `key` waits behind one held.
    pub(crate) fn holds_key(&self, key: &ObjectKey) -> Option<&str> {
        self.held
            .iter()
            .find_map(|(change, mark, _)| (change.key() == *key).then_some(mark.as_str()))
    }

    pub(crate) fn hold(&mut self, change: Change, mark: String) {
        self.held.push((change, mark, Instant::now()));
    }

    /// Takes the held changes of a write (now seen), and those held too long, in order.
    pub(crate) fn release(&mut self, write: Option<&str>) -> Vec<Change> {
        let now = Instant::now();
        let (go, stay): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.held)
                .into_iter()
                .partition(|(_, mark, since)| {
                    Some(mark.as_str()) == write || now.duration_since(*since) >= HELD_AT_MOST
                });
        self.held = stay;
        go.into_iter().map(|(change, _, _)| change).collect()
    }

    /// Drops the changes held for a write.
    pub(crate) fn drop_held(&mut self, write: &str) {
        self.held.retain(|(_, mark, _)| mark != write);
    }

    /// Whether some held change is due (held too long).
    pub(crate) fn any_due(&self) -> bool {
        let now = Instant::now();
        self.held
            .iter()
            .any(|(_, _, since)| now.duration_since(*since) >= HELD_AT_MOST)
    }

    pub(crate) fn open(&mut self, name: &str, keys: Vec<ObjectKey>) {
        for key in &keys {
            self.busy.insert(key.clone(), name.to_string());
        }
        self.open.insert(name.to_string(), keys);
    }

    pub(crate) fn close(&mut self, name: &str) {
        if let Some(keys) = self.open.remove(name) {
            for key in keys {
                if self.busy.get(&key).is_some_and(|w| w == name) {
                    self.busy.remove(&key);
                }
            }
        }
        if !self.closed.iter().any(|c| c == name) {
            if self.closed.len() == CLOSED_KEPT {
                self.closed.pop_front();
            }
            self.closed.push_back(name.to_string());
        }
    }

    pub(crate) fn overlay(&mut self, key: ObjectKey, write: &str) {
        self.overlaid
            .insert(key, (write.to_string(), Instant::now()));
    }

    /// Whether a put of `object` under `key` is taken: not while the key shows a write's
    /// change and the object is not that write's own (an older version, a status written
    /// meanwhile). The write's own ends the overlay.
    pub(crate) fn takes_put(&mut self, key: &ObjectKey, object: &Object) -> bool {
        let Some((write, since)) = self.overlaid.get(key) else {
            return true;
        };
        if mark_of(object) == Some(write.as_str()) || since.elapsed() >= OVERLAID_AT_MOST {
            self.overlaid.remove(key);
            return true;
        }
        false
    }

    /// A write's answer put in the store: the write's own object ends the overlay.
    pub(crate) fn put_directly(&mut self, key: &ObjectKey, object: &Object) {
        if self
            .overlaid
            .get(key)
            .is_some_and(|(write, _)| mark_of(object) == Some(write.as_str()))
        {
            self.overlaid.remove(key);
        }
    }

    /// A deletion of `key` ends its overlay (the object is gone whatever the write did).
    pub(crate) fn deleted(&mut self, key: &ObjectKey) {
        self.overlaid.remove(key);
    }
}

/// A write of several objects as its record: each change with the version it was decided
/// on and the object as it leaves it, marked with the write's name `name`; `writer` is the
/// replica that decided it. The changes as planned, too.
pub fn record(
    name: &str,
    writer: &str,
    changes: &[(ObjectKey, Option<Object>, Option<Object>)],
) -> (PlacementWrite, Vec<PlannedChange>) {
    let planned: Vec<PlannedChange> = changes
        .iter()
        .map(|(key, before, after)| PlannedChange {
            key: key.clone(),
            before: before.as_ref().map(|b| WrittenVersion {
                uid: b.meta().uid.clone(),
                resource_version: b.meta().resource_version.clone(),
                generation: b.meta().generation,
            }),
            after: after.as_ref().map(|a| marked(a, name)),
        })
        .collect();
    let mut record = PlacementWrite::new(
        name,
        PlacementWriteSpec {
            writer: writer.to_string(),
            changes: planned
                .iter()
                .map(|c| WriteChange {
                    kind: c.key.kind.to_string(),
                    name: c.key.name.clone(),
                    before: c.before.clone(),
                    after: c.after.as_ref().map(recorded),
                })
                .collect(),
        },
    );
    record.metadata.labels = Some(
        [(
            "app.kubernetes.io/managed-by".to_string(),
            "kubeplace".to_string(),
        )]
        .into(),
    );
    (record, planned)
}

/// An object as a record keeps it: metadata and spec, without its status and what the API
/// server sets.
fn recorded(object: &Object) -> serde_json::Value {
    let mut value = object.to_value();
    if let Some(fields) = value.as_object_mut() {
        fields.remove("status");
        if let Some(meta) = fields
            .get_mut("metadata")
            .and_then(serde_json::Value::as_object_mut)
        {
            for field in [
                "resourceVersion",
                "managedFields",
                "creationTimestamp",
                "generation",
            ] {
                meta.remove(field);
            }
        }
    }
    value
}

/// An object marked as written by `write`.
fn marked(object: &Object, write: &str) -> Object {
    let mut object = object.clone();
    object
        .meta_mut()
        .annotations
        .get_or_insert_with(Default::default)
        .insert(WRITE_ANNOTATION.to_string(), write.to_string());
    object
}

/// Whether `object`, sent to be stored, is write `write`'s own change `change`: marked by
/// it, and as the write leaves it; for a deletion, marked before it goes, its spec as it is
/// (`current`).
pub fn is_own_change(
    write: &str,
    change: &PlannedChange,
    object: &Object,
    current: Option<&Object>,
) -> bool {
    mark_of(object) == Some(write)
        && match &change.after {
            Some(after) => after.same_spec(object),
            None => current.is_none_or(|c| c.same_spec(object)),
        }
}

/// Why a change of an object an unfinished write holds is refused.
pub fn held_message(key: &ObjectKey, write: &str) -> String {
    format!(
        "{} {:?} is being changed by PlacementWrite {write}, which is not finished yet; {}",
        key.kind, key.name, BUSY_RETRY
    )
}

/// What applying one change of a write does next, given the object as the cluster has it
/// now: each step is made from the version read, and a step that fails on a newer version
/// is worked out again from that one, so the writer and the leader can both apply a write,
/// in any order, any number of times.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing left to do; the object as the write left it, when it is there.
    Done(Option<Object>),
    /// Create the object.
    Create(Object),
    /// Replace the object (from the resourceVersion it carries).
    Replace(Object),
    /// Mark the object with the write before deleting it, so that a reader who has not
    /// seen the write yet holds the deletion until it has.
    Mark(Object),
    /// Delete the object, if it is still this uid at this resourceVersion.
    Delete {
        uid: Option<String>,
        resource_version: Option<String>,
    },
}

/// The next step of applying `change` of write `write`, the object being `current` (none:
/// absent). `mark_deletion`: readers may not have seen the write yet.
pub fn next_step(
    write: &str,
    change: &PlannedChange,
    current: Option<&Object>,
    mark_deletion: bool,
) -> Step {
    let same_object = |current: &Object| {
        change
            .before
            .as_ref()
            .and_then(|b| b.uid.as_deref())
            .is_none_or(|uid| current.meta().uid.as_deref() == Some(uid))
    };
    match (&change.after, current) {
        (Some(_), Some(current)) if mark_of(current) == Some(write) => {
            Step::Done(Some(current.clone()))
        }
        // Deleted since: the write's change of it is moot.
        (Some(_), None) if change.before.is_some() => Step::Done(None),
        (Some(after), None) => Step::Create(after.clone()),
        // Deleted and made again since: another object now, not the write's.
        (Some(_), Some(current)) if !same_object(current) => Step::Done(None),
        (Some(after), Some(current)) => {
            let mut body = after.clone();
            body.meta_mut().resource_version = current.meta().resource_version.clone();
            body.meta_mut().uid = current.meta().uid.clone();
            Step::Replace(body)
        }
        (None, None) => Step::Done(None),
        (None, Some(current)) if !same_object(current) => Step::Done(None),
        (None, Some(current)) if mark_deletion && mark_of(current) != Some(write) => {
            let mut body = current.clone();
            body.meta_mut()
                .annotations
                .get_or_insert_with(Default::default)
                .insert(WRITE_ANNOTATION.to_string(), write.to_string());
            Step::Mark(body)
        }
        (None, Some(current)) => Step::Delete {
            uid: current.meta().uid.clone(),
            resource_version: current.meta().resource_version.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    use crate::test_objects::object;

    /// An Allocation of `vcpus` on cn1 for `consumer`, at resourceVersion `rv`, marked by
    /// `write` when given.
    fn allocation(name: &str, consumer: u32, vcpus: i64, rv: u64, write: Option<&str>) -> Object {
        let mut a = object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: {name}\n  uid: uid-{name}\n  resourceVersion: \"{rv}\"\nspec:\n  consumer: 00000000-0000-0000-0000-{consumer:012}\n  allocations:\n  - provider: cn1\n    resources:\n      VCPU: {vcpus}\n"
        ));
        if let Some(w) = write {
            a.meta_mut()
                .annotations
                .get_or_insert_with(Default::default)
                .insert(WRITE_ANNOTATION.to_string(), w.to_string());
        }
        a
    }

    fn record(name: &str, rv: u64, changes: Vec<(&Object, Option<&Object>)>) -> Object {
        let changes: Vec<serde_json::Value> = changes
            .into_iter()
            .map(|(key, after)| {
                let mut change =
                    serde_json::json!({"kind": key.kind().as_str(), "name": key.name()});
                if let Some(after) = after {
                    change["after"] = after.to_value();
                }
                if key.meta().uid.is_some()
                    && after.is_none_or(|a| a.meta().resource_version.is_none())
                {
                    change["before"] = serde_json::json!({"uid": key.meta().uid, "generation": 1});
                }
                change
            })
            .collect();
        Object::from_value(
            Kind::PlacementWrite,
            serde_json::json!({
                "apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementWrite",
                "metadata": {"name": name, "resourceVersion": rv.to_string()},
                "spec": {"writer": "test", "changes": changes},
            }),
        )
        .unwrap()
    }

    fn store() -> Store {
        let mut store = Store::default();
        store.apply(object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn1\nspec:\n  inventories:\n    VCPU:\n      total: 4\n",
        ));
        store
    }

    fn used(store: &Store) -> i64 {
        store.index().used("cn1", "VCPU")
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey::cluster(Kind::Allocation, name)
    }

    fn put(o: &Object) -> Change {
        Change::Put(Box::new(o.clone()))
    }

    /// A move of `a` (consumer 1) to `b` (consumer 2): `b` created, `a` deleted.
    fn a_move(write: &str, rv: u64) -> (Object, Object, Object) {
        let a = allocation("a", 1, 2, 10, None);
        let mut b = allocation("b", 2, 2, 0, Some(write));
        b.meta_mut().resource_version = None;
        b.meta_mut().uid = None;
        let record = record(write, rv, vec![(&b, Some(&b)), (&a, None)]);
        (a, b, record)
    }

    #[test]
    fn a_write_shows_whole_from_its_record_and_older_events_do_not_undo_it() {
        let write = write_name(SystemTime::now(), 1);
        let (a, _, record) = a_move(&write, 20);
        let mut store = store();
        store.apply_changes([put(&a)]);
        assert_eq!(used(&store), 2);
        store.apply_changes([put(&record)]);
        assert!(store.get(&key("a")).is_none(), "the deletion shows");
        assert!(store.get(&key("b")).is_some(), "the creation shows");
        assert_eq!(used(&store), 2, "moved, not doubled nor dropped");
        assert_eq!(store.write_on(&key("b")), Some(write.as_str()));
        // Events older than the write (a's status written before it) change nothing.
        store.apply_changes([put(&allocation("a", 1, 2, 15, None))]);
        assert!(store.get(&key("a")).is_none());
        // The write's own events arrive; then its record goes.
        let mut real_b = allocation("b", 2, 2, 21, Some(&write));
        real_b.meta_mut().uid = Some("uid-b".into());
        store.apply_changes([put(&real_b), Change::Delete(key("a"))]);
        assert_eq!(store.get(&key("b")), Some(&real_b));
        store.apply_changes([Change::Delete(ObjectKey::cluster(
            Kind::PlacementWrite,
            &write,
        ))]);
        assert_eq!(store.write_on(&key("b")), None);
        assert_eq!(used(&store), 2);
    }

    #[test]
    fn an_unmarked_event_of_an_object_a_write_changes_is_not_taken_until_the_write_is_in() {
        let write = write_name(SystemTime::now(), 2);
        let a = allocation("a", 1, 2, 10, None);
        let grown = {
            let mut g = allocation("a", 1, 3, 10, Some(&write));
            g.meta_mut().resource_version = None;
            g
        };
        let other = allocation("z", 9, 1, 11, None);
        let record = record(
            &write,
            20,
            vec![
                (&grown, Some(&grown)),
                (
                    &other,
                    Some(&{
                        let mut o = allocation("z", 9, 1, 0, Some(&write));
                        o.meta_mut().resource_version = None;
                        o
                    }),
                ),
            ],
        );
        let mut store = store();
        store.apply_changes([put(&a), put(&other)]);
        store.apply_changes([put(&record)]);
        assert_eq!(used(&store), 4);
        // The leader writes a's status after the write was recorded: a newer version, but
        // not the write's own. It is not taken: a would show its old spec.
        store.apply_changes([put(&allocation("a", 1, 2, 25, None))]);
        assert_eq!(used(&store), 4, "{:?}", store.get(&key("a")));
        store.apply_changes([put(&allocation("a", 1, 3, 26, Some(&write)))]);
        assert_eq!(
            store
                .get(&key("a"))
                .and_then(|o| o.meta().resource_version.clone())
                .as_deref(),
            Some("26")
        );
        assert_eq!(used(&store), 4);
    }

    #[test]
    fn events_marked_by_a_write_not_seen_yet_wait_for_its_record() {
        let write = write_name(SystemTime::now(), 3);
        let (a, _, record) = a_move(&write, 20);
        let mut store = store();
        store.apply_changes([put(&a)]);
        // The write's own events come first, on their streams: b made, a marked then
        // deleted. None shows: half a move.
        store.apply_changes([
            put(&allocation("b", 2, 2, 21, Some(&write))),
            put(&allocation("a", 1, 2, 22, Some(&write))),
            Change::Delete(key("a")),
        ]);
        assert!(store.get(&key("b")).is_none(), "held");
        assert_eq!(store.get(&key("a")), Some(&a), "held");
        store.apply_changes([put(&record)]);
        assert!(store.get(&key("a")).is_none());
        assert_eq!(
            store
                .get(&key("b"))
                .and_then(|o| o.meta().resource_version.clone())
                .as_deref(),
            Some("21"),
            "the held event, taken once the record came"
        );
        assert_eq!(used(&store), 2);
        assert_eq!(store.write_on(&key("b")), Some(write.as_str()));
    }

    /// A replica starting while a write is open lists each kind on its own: the record may
    /// come before the objects it changes, or after.
    #[test]
    fn a_write_open_at_start_shows_whole_whichever_list_comes_first() {
        let write = write_name(SystemTime::now(), 6);
        let (a, _, record) = a_move(&write, 20);
        // Half made when the writer died: b created, a not deleted yet.
        let b = allocation("b", 2, 2, 21, Some(&write));
        let record_first = {
            let mut store = store();
            store.apply_listed([put(&record)]);
            store.apply_listed([put(&a), put(&b)]);
            store
        };
        let objects_first = {
            let mut store = store();
            store.apply_listed([put(&a), put(&b)]);
            store.apply_listed([put(&record)]);
            store
        };
        for store in [record_first, objects_first] {
            assert!(store.get(&key("a")).is_none(), "a deleted by the write");
            assert!(store.get(&key("b")).is_some());
            assert_eq!(used(&store), 2);
        }
        // One made again under a's name later (another uid) is not held back.
        let mut store = store();
        store.apply_listed([put(&record)]);
        let mut again = allocation("a", 1, 1, 30, None);
        again.meta_mut().uid = Some("uid-a-again".into());
        store.apply_changes([put(&again)]);
        assert_eq!(store.get(&key("a")), Some(&again));
    }

    #[test]
    fn a_list_holds_nothing_and_an_old_mark_is_taken_at_once() {
        let fresh = write_name(SystemTime::now(), 4);
        let old = write_name(SystemTime::now() - HELD_AT_MOST * 2, 5);
        let mut store = store();
        store.apply_listed([put(&allocation("b", 2, 2, 21, Some(&fresh)))]);
        assert!(store.get(&key("b")).is_some(), "a list is a snapshot");
        store.apply_changes([put(&allocation("c", 3, 1, 22, Some(&old)))]);
        assert!(store.get(&key("c")).is_some(), "a write long closed");
        store.apply_changes([put(&allocation("d", 4, 1, 23, Some(&fresh)))]);
        assert!(
            store.get(&key("d")).is_none(),
            "a recent one not seen yet: held"
        );
    }

    #[test]
    fn steps_are_worked_out_from_the_object_as_it_is() {
        let write = "w-1-1";
        let a = allocation("a", 1, 2, 10, None);
        let b = allocation("b", 2, 2, 0, Some(write));
        let create = PlannedChange {
            key: key("b"),
            before: None,
            after: Some(b.clone()),
        };
        assert_eq!(
            next_step(write, &create, None, true),
            Step::Create(b.clone())
        );
        let stored = allocation("b", 2, 2, 30, Some(write));
        assert_eq!(
            next_step(write, &create, Some(&stored), true),
            Step::Done(Some(stored.clone()))
        );
        let delete = PlannedChange {
            key: key("a"),
            before: Some(WrittenVersion {
                uid: Some("uid-a".into()),
                resource_version: Some("10".into()),
                generation: Some(1),
            }),
            after: None,
        };
        let Step::Mark(marked) = next_step(write, &delete, Some(&a), true) else {
            panic!("marked first")
        };
        assert_eq!(mark_of(&marked), Some(write));
        assert_eq!(
            next_step(write, &delete, Some(&marked), true),
            Step::Delete {
                uid: Some("uid-a".into()),
                resource_version: Some("10".into())
            }
        );
        assert!(
            matches!(
                next_step(write, &delete, Some(&a), false),
                Step::Delete { .. }
            ),
            "readers have seen it"
        );
        assert_eq!(next_step(write, &delete, None, true), Step::Done(None));
        let mut again = a.clone();
        again.meta_mut().uid = Some("another".into());
        assert_eq!(
            next_step(write, &delete, Some(&again), true),
            Step::Done(None),
            "made again since: not the write's"
        );
        let grow = PlannedChange {
            key: key("a"),
            before: delete.before.clone(),
            after: Some(allocation("a", 1, 3, 0, Some(write))),
        };
        let newer = allocation("a", 1, 2, 12, None);
        let Step::Replace(body) = next_step(write, &grow, Some(&newer), true) else {
            panic!("replaced")
        };
        assert_eq!(
            body.meta().resource_version.as_deref(),
            Some("12"),
            "from the version read"
        );
        assert_eq!(
            next_step(write, &grow, None, true),
            Step::Done(None),
            "deleted since"
        );
    }

    #[test]
    fn a_name_tells_when_the_write_was_decided() {
        let at = UNIX_EPOCH + Duration::from_millis(1_790_000_000_123);
        let name = write_name(at, 7);
        assert_eq!(decided_at(&name), Some(at));
        assert_ne!(name, write_name(at, 8));
        assert_eq!(decided_at("pw-1"), None);
    }

    #[test]
    fn only_recent_unseen_writes_wait() {
        let mut writes = Writes::default();
        let now = SystemTime::now();
        let recent = write_name(now - Duration::from_secs(1), 1);
        let old = write_name(now - HELD_AT_MOST - Duration::from_secs(1), 2);
        assert!(writes.waits(&recent, now));
        assert!(!writes.waits(&old, now), "long closed");
        assert!(!writes.waits("not-a-write-name", now));
        writes.open(&recent, vec![]);
        assert!(!writes.waits(&recent, now), "open: seen");
        writes.close(&recent);
        assert!(!writes.waits(&recent, now), "closed: seen");
    }
}
