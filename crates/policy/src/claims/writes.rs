//! PlacementWrites decided with the claims: a write of several objects (a move, a reshape)
//! is decided whole when its record is created, against the store and every claim decided
//! before it, as one claim is. From then on it is the write's: its objects' own changes,
//! marked by it, are let through as decided, and any other change of them waits until the
//! write is finished.

use std::time::Instant;

use kubeplace_api::{Object, PlacementWrite};

use super::{Ledger, PendingClaim};
use crate::admission::{Operation, READ_AGAIN, Refusal, Verdict, admit, admit_with_pending};
use crate::store::writes::{PlannedChange, held_message, is_own_change, planned};
use crate::store::{ObjectKey, Store};
use crate::translate::takes;

/// A write admitted here that the store has not seen yet.
#[derive(Debug, Clone)]
pub(crate) struct PendingWrite {
    pub name: String,
    pub changes: Vec<PlannedChange>,
    pub admitted_at: Instant,
}

fn refused(refusal: Refusal, message: String) -> Verdict {
    Verdict::refused(refusal, message)
}

fn allowed() -> Verdict {
    Verdict::allowed()
}

/// Whether the store's object is still the one the change was decided on: the same uid and
/// spec generation (its status may have been written since), absent for a creation, or
/// already as the write leaves it (the writer's own store shows its decision at once).
fn decided_on(current: Option<&Object>, change: &PlannedChange) -> bool {
    if let (Some(current), Some(after)) = (current, &change.after)
        && current.same_spec(after)
    {
        return true;
    }
    match (&change.before, current) {
        (None, None) => true,
        (None, Some(_)) => false,
        // Gone already: what a deletion wants; anything else was deleted under it.
        (Some(_), None) => change.after.is_none(),
        (Some(version), Some(current)) => {
            version
                .uid
                .as_deref()
                .is_none_or(|uid| current.meta().uid.as_deref() == Some(uid))
                && current.meta().generation == version.generation
        }
    }
}

impl Ledger {
    /// Decides a PlacementWrite's record: every object it changes is free (no other write
    /// holds it, no claim of it is on its way), still the version it was decided on, and
    /// the state it leaves — all of its changes at once — fits every provider, with the
    /// claims pending here. Admitted, the capacity its Allocations take is held as claims'.
    pub(super) fn decide_write(
        &mut self,
        write: &PlacementWrite,
        store: &Store,
        now: Instant,
        dry_run: bool,
    ) -> Verdict {
        let name = write.metadata.name.as_deref().unwrap_or("");
        let changes = match planned(write) {
            Ok(changes) => changes,
            Err(problem) => {
                return refused(
                    Refusal::Invalid,
                    format!("PlacementWrite {name:?} is invalid: {problem}"),
                );
            }
        };
        // The same record asked about again (each webhook of a configuration that names
        // several, or the API server trying a call again): the answer it had. Its own claims,
        // held since, are not someone else's claims on their way.
        if self
            .writes
            .iter()
            .any(|w| w.name == name && w.changes == changes)
        {
            return allowed();
        }
        let mut shown = false;
        for change in &changes {
            let what = format!("{} {:?}", change.key.kind, change.key.name);
            let other = store
                .write_on(&change.key)
                .filter(|w| *w != name)
                .or_else(|| self.pending_write_on(&change.key, name));
            if let Some(other) = other {
                return refused(Refusal::Busy, held_message(&change.key, other));
            }
            // A claim of it admitted a moment ago that the store does not show: the write
            // may rest on an older version. Not so where the store shows the write's own
            // decision (the writer's store, which decided it over that claim).
            let shows_decision = match (&change.after, store.get(&change.key)) {
                (Some(after), Some(current)) => current.same_spec(after),
                (None, None) => true,
                _ => false,
            };
            shown |= shows_decision
                && change.key.kind == kubeplace_api::Kind::Allocation
                && change.after.is_some();
            if !shows_decision
                && change.key.kind == kubeplace_api::Kind::Allocation
                && self.pending.iter().any(|p| p.name == change.key.name)
            {
                return refused(
                    Refusal::Stale,
                    format!(
                        "{what} was changed a moment ago and the change is not in view yet; {READ_AGAIN}"
                    ),
                );
            }
            if !decided_on(store.get(&change.key), change) {
                return refused(
                    Refusal::Stale,
                    format!("{what} changed since the write was decided; {READ_AGAIN}"),
                );
            }
        }
        // The state the write leaves, all of its changes in, judged as one.
        let mut after = store.clone();
        for change in &changes {
            match &change.after {
                Some(object) => {
                    after.put(object.clone());
                }
                None => {
                    after.delete(&change.key);
                }
            }
        }
        // Quotas judged on the write whole: a move charges only what grows.
        let claims: Vec<&str> = changes
            .iter()
            .filter(|c| c.key.kind == kubeplace_api::Kind::Allocation)
            .map(|c| c.key.name.as_str())
            .collect();
        let pending = self.usage(store, &claims);
        if let Err(refusal) =
            crate::quota::check_write(store, &after, shown, &pending.charges, claims)
        {
            return refused(
                Refusal::OverQuota,
                format!("PlacementWrite {name:?}: {refusal}"),
            );
        }
        for change in &changes {
            let verdict = match &change.after {
                Some(object @ Object::Allocation(_)) => {
                    let pending = self.usage(&after, &[object.name()]);
                    admit_with_pending(Operation::Create, object, None, &after, &pending)
                }
                Some(object) => admit(Operation::Update, object, store.get(&change.key), &after),
                None => continue,
            };
            if !verdict.allowed {
                return verdict;
            }
        }
        if !dry_run {
            for change in &changes {
                if let Some(Object::Allocation(a)) = &change.after {
                    self.hold_written_claim(PendingClaim {
                        name: change.key.name.clone(),
                        uid: None,
                        generation: None,
                        takes: takes(a),
                        charge: crate::quota::charge_of(a),
                        admitted_at: now,
                    });
                }
            }
            self.writes.push(PendingWrite {
                name: name.to_string(),
                changes,
                admitted_at: now,
            });
        }
        allowed()
    }

    /// Holds a write a predecessor admitted (read from its record of writes in flight): its
    /// objects held until the store shows the write; a change marked by the write is taken
    /// as its own.
    pub(super) fn hold_adopted_write(
        &mut self,
        name: String,
        keys: Vec<ObjectKey>,
        admitted_at: Instant,
    ) {
        self.writes.push(PendingWrite {
            name,
            changes: keys
                .into_iter()
                .map(|key| PlannedChange {
                    key,
                    before: None,
                    after: None,
                })
                .collect(),
            admitted_at,
        });
    }

    /// A write admitted here, not in the store's view yet, that changes `key`; `except` is
    /// left out.
    fn pending_write_on(&self, key: &ObjectKey, except: &str) -> Option<&str> {
        self.writes
            .iter()
            .find(|w| w.name != except && w.changes.iter().any(|c| c.key == *key))
            .map(|w| w.name.as_str())
    }

    /// For an object a write admitted here changes (the store not showing that write yet):
    /// allowed when it is the write's own, as the write leaves it (or marked before its
    /// deletion); refused otherwise. None when no such write holds it.
    pub(super) fn held_by_pending_write(&self, object: &Object) -> Option<Verdict> {
        let key = ObjectKey::of(object);
        let (write, change) = self.writes.iter().find_map(|w| {
            w.changes
                .iter()
                .find(|c| c.key == key)
                .map(|c| (w.name.as_str(), c))
        })?;
        // The store has not seen the write: its objects are as they were before it.
        Some(if is_own_change(write, change, object, None) {
            allowed()
        } else {
            refused(Refusal::Busy, held_message(&key, write))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeplace_api::{Kind, WRITE_ANNOTATION};
    use std::time::Duration;

    use crate::test_objects::object;

    fn allocation(name: &str, consumer: u32, vcpus: i64, write: Option<&str>) -> Object {
        let mut a = object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: {name}\nspec:\n  consumer: 00000000-0000-0000-0000-{consumer:012}\n  allocations:\n  - provider: cn1\n    resources:\n      VCPU: {vcpus}\n"
        ));
        if let Some(w) = write {
            a.meta_mut()
                .annotations
                .get_or_insert_with(Default::default)
                .insert(WRITE_ANNOTATION.to_string(), w.to_string());
        }
        a
    }

    /// A full provider: 4 VCPU, `a` holding 4.
    fn full() -> Store {
        let mut store = Store::default();
        store.apply(object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn1\nspec:\n  inventories:\n    VCPU:\n      total: 4\n",
        ));
        store.apply(allocation("a", 1, 4, None));
        store
    }

    /// A write `name`: `creates` made, `deletes` deleted (as the store has them).
    fn write(store: &Store, name: &str, creates: &[Object], deletes: &[&str]) -> Object {
        let mut changes: Vec<serde_json::Value> = creates
            .iter()
            .map(|o| serde_json::json!({"kind": "Allocation", "name": o.name(), "after": o.to_value()}))
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

    fn decide(ledger: &mut Ledger, store: &Store, o: &Object) -> Verdict {
        ledger.decide(Operation::Create, o, None, store, Instant::now(), false)
    }

    #[test]
    fn a_move_on_a_full_provider_is_decided_whole() {
        let store = full();
        let mut ledger = Ledger::new(Duration::from_secs(30));
        let b = allocation("b", 2, 4, Some("w1"));
        let verdict = decide(
            &mut ledger,
            &store,
            &write(&store, "w1", std::slice::from_ref(&b), &["a"]),
        );
        assert!(verdict.allowed, "{}", verdict.message);
        // Half of it alone would not fit: b beside a.
        let half = allocation("c", 3, 4, Some("w2"));
        let verdict = decide(&mut ledger, &store, &write(&store, "w2", &[half], &[]));
        assert!(!verdict.allowed);
        // The write's own objects go through as decided; anything else of them waits.
        assert!(decide(&mut ledger, &store, &b).allowed);
        let other = allocation("b", 2, 1, None);
        let verdict = decide(&mut ledger, &store, &other);
        assert!(
            !verdict.allowed && verdict.message.contains("w1"),
            "{}",
            verdict.message
        );
        // And another write of them is refused too.
        let again = allocation("b", 2, 1, Some("w3"));
        let verdict = decide(&mut ledger, &store, &write(&store, "w3", &[again], &[]));
        assert!(
            !verdict.allowed && verdict.refusal == Refusal::Busy,
            "{}",
            verdict.message
        );
    }

    /// The API server asks each webhook of its configuration, and may ask again: a record
    /// decided here is decided the same way the second time, on a leader whose store does not
    /// show the write (a Placement API on another replica wrote it).
    #[test]
    fn the_same_record_asked_again_gets_the_same_answer() {
        let store = full();
        let mut ledger = Ledger::new(Duration::from_secs(30));
        let b = allocation("b", 2, 4, Some("w1"));
        let record = write(&store, "w1", std::slice::from_ref(&b), &["a"]);
        assert!(decide(&mut ledger, &store, &record).allowed);
        let again = decide(&mut ledger, &store, &record);
        assert!(again.allowed, "{}", again.message);
        // Another record of the same objects still waits for it.
        let other = write(&store, "w2", &[allocation("b", 2, 4, Some("w2"))], &["a"]);
        let verdict = decide(&mut ledger, &store, &other);
        assert!(
            !verdict.allowed && verdict.refusal == Refusal::Busy,
            "{}",
            verdict.message
        );
    }

    #[test]
    fn a_write_decided_on_an_older_version_is_refused() {
        let mut store = full();
        let mut ledger = Ledger::new(Duration::from_secs(30));
        let record = write(&store, "w1", &[allocation("b", 2, 4, Some("w1"))], &["a"]);
        // a changed since the write read it.
        store.apply(allocation("a", 1, 3, None));
        let verdict = decide(&mut ledger, &store, &record);
        assert!(
            !verdict.allowed && verdict.message.contains("changed since"),
            "{}",
            verdict.message
        );
        // A record naming an unwritable kind is refused as invalid.
        let mut bad = record.clone();
        if let Object::PlacementWrite(w) = &mut bad {
            w.spec.changes[0].kind = "Flavor".into();
        }
        let verdict = decide(&mut ledger, &store, &bad);
        assert!(
            !verdict.allowed && verdict.message.contains("Flavor"),
            "{}",
            verdict.message
        );
    }
}
