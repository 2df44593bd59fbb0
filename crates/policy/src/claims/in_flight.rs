//! The claims a leader admitted that the API server may not show yet, as a record another
//! replica can read: the leader keeps it on its Lease, and answers a claim `allowed` only once
//! the record holding it is written there. A replica that takes the Lease over reads its
//! predecessor's record in the same object it takes, so it counts every claim its predecessor
//! admitted from its first decision on, without waiting out how long such a claim could still
//! be on its way.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::ledger::{Ledger, PendingClaim};
use crate::store::charges::Charge;
use crate::store::{ObjectKey, Store};
use kubeplace_api::Kind;

/// The record: claims and writes of several objects admitted and not yet shown by the
/// leader's store.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InFlight {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<RecordedClaim>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<RecordedWrite>,
    /// How far the leader's store had come when the record was taken: every claim it
    /// stopped recording was seen at or before this point. A successor whose store has come
    /// as far counts every claim its predecessor admitted, without listing them. Absent in
    /// records written before this was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_through: Option<SeenThrough>,
}

/// A point in the watches of the kinds a claim is counted from: the newest resourceVersion
/// of Allocations and of PlacementWrite records a store has taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenThrough {
    pub allocations: u64,
    pub writes: u64,
}

impl SeenThrough {
    /// How far `store` has come: the newest version of each kind it holds or was brought,
    /// by its watch or put in directly.
    pub fn of(store: &Store) -> SeenThrough {
        SeenThrough {
            allocations: store.taken_through(Kind::Allocation),
            writes: store.taken_through(Kind::PlacementWrite),
        }
    }

    /// Whether `store`'s watches have brought, in order, every change up to this point.
    pub fn reached_by(&self, store: &Store) -> bool {
        store.watched_through(Kind::Allocation) >= self.allocations
            && store.watched_through(Kind::PlacementWrite) >= self.writes
    }
}

/// One claim admitted: the Allocation's version and what it takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedClaim {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Provider, resource class and amount.
    pub takes: Vec<(String, String, i64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charge: Option<RecordedCharge>,
    /// Milliseconds since it was admitted, when the record was written.
    pub age_ms: u64,
}

/// What a claim charges its project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedCharge {
    pub project: String,
    pub consumer: String,
    pub resources: BTreeMap<String, i64>,
}

/// A write of several objects admitted: its name and the objects it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedWrite {
    pub name: String,
    /// Kind and name of each object it changes.
    pub objects: Vec<(String, String)>,
    pub age_ms: u64,
}

/// Why a record could not be read.
#[derive(Debug, thiserror::Error)]
#[error("the record of claims in flight is not readable: {0}")]
pub struct UnreadableRecord(String);

impl InFlight {
    /// The record as text, for an annotation.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A record read back from its text.
    pub fn from_text(text: &str) -> Result<InFlight, UnreadableRecord> {
        serde_json::from_str(text).map_err(|e| UnreadableRecord(e.to_string()))
    }

    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.writes.is_empty()
    }
}

fn age(admitted_at: Instant, now: Instant) -> u64 {
    now.saturating_duration_since(admitted_at).as_millis() as u64
}

impl Ledger {
    /// What this ledger holds, as a record: the claims and writes admitted here that the
    /// store does not show yet.
    pub fn in_flight(&self, now: Instant) -> InFlight {
        InFlight {
            claims: self
                .pending
                .iter()
                .map(|p| RecordedClaim {
                    name: p.name.clone(),
                    uid: p.uid.clone(),
                    generation: p.generation,
                    takes: p
                        .takes
                        .iter()
                        .map(|((provider, class), amount)| {
                            (provider.clone(), class.clone(), *amount)
                        })
                        .collect(),
                    charge: p.charge.as_ref().map(|c| RecordedCharge {
                        project: c.project.clone(),
                        consumer: c.consumer.clone(),
                        resources: c.resources.clone(),
                    }),
                    age_ms: age(p.admitted_at, now),
                })
                .collect(),
            writes: self
                .writes
                .iter()
                .map(|w| RecordedWrite {
                    name: w.name.clone(),
                    objects: w
                        .changes
                        .iter()
                        .map(|c| (c.key.kind.to_string(), c.key.name.clone()))
                        .collect(),
                    age_ms: age(w.admitted_at, now),
                })
                .collect(),
            seen_through: None,
        }
    }

    /// Holds a predecessor's claims and writes in flight as if admitted here, each for what
    /// is left of its hold: until the store shows it, or it has waited as long as a claim
    /// admitted here would.
    pub fn adopt(&mut self, record: InFlight, now: Instant) {
        let since = |age_ms: u64| {
            now.checked_sub(Duration::from_millis(age_ms))
                .unwrap_or(now)
        };
        for claim in record.claims {
            self.hold_claim(PendingClaim {
                name: claim.name,
                uid: claim.uid,
                generation: claim.generation,
                takes: claim
                    .takes
                    .into_iter()
                    .map(|(provider, class, amount)| ((provider, class), amount))
                    .collect(),
                charge: claim.charge.map(|c| Charge {
                    project: c.project,
                    consumer: c.consumer,
                    resources: c.resources,
                }),
                admitted_at: since(claim.age_ms),
            });
        }
        for write in record.writes {
            let keys = write
                .objects
                .iter()
                .filter_map(|(kind, name)| {
                    kubeplace_api::Kind::from_name(kind).map(|k| ObjectKey::cluster(k, name))
                })
                .collect();
            self.hold_adopted_write(write.name, keys, since(write.age_ms));
        }
    }

    /// Takes back a claim admitted here whose `allowed` could not be given (its record was
    /// not written): the API server will not store it.
    pub fn withdraw(&mut self, name: &str, uid: Option<&str>, generation: Option<i64>) {
        if let Some(at) = self
            .pending
            .iter()
            .rposition(|p| p.name == name && p.uid.as_deref() == uid && p.generation == generation)
        {
            self.pending.remove(at);
        }
    }

    /// Takes back a write of several objects admitted here whose `allowed` could not be
    /// given, and the claims it holds.
    pub fn withdraw_write(&mut self, name: &str) {
        if let Some(at) = self.writes.iter().position(|w| w.name == name) {
            let write = self.writes.remove(at);
            let claims: Vec<&str> = write
                .changes
                .iter()
                .filter(|c| c.key.kind == kubeplace_api::Kind::Allocation)
                .map(|c| c.key.name.as_str())
                .collect();
            self.pending
                .retain(|p| !(claims.contains(&p.name.as_str()) && p.uid.is_none()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::test_objects::object;
    use kubeplace_api::Object;

    fn store() -> Store {
        let mut store = Store::default();
        store.put(object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: cn1}\nspec: {inventories: {VCPU: {total: 4}}}\n",
        ));
        store
    }

    fn claim(name: &str, vcpu: i64) -> Object {
        let mut o = object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {{name: {name}, uid: u-{name}, generation: 1}}\nspec:\n  consumer: 00000000-0000-0000-0000-00000000000{vcpu}\n  allocations:\n  - provider: cn1\n    resources: {{VCPU: {vcpu}}}\n"
        ));
        o.meta_mut().uid = Some(format!("u-{name}"));
        o
    }

    /// A successor that adopts the record refuses what its predecessor's claims hold,
    /// although its store does not show them; its own ledger alone would not.
    #[test]
    fn a_successor_counts_the_claims_its_predecessor_recorded() {
        let store = store();
        let now = Instant::now();
        let mut leader = Ledger::new(Duration::from_secs(30));
        let verdict = leader.decide(
            crate::admission::Operation::Create,
            &claim("a", 3),
            None,
            &store,
            now,
            false,
        );
        assert!(verdict.allowed, "{}", verdict.message);
        let record = InFlight::from_text(&leader.in_flight(now).to_text()).unwrap();
        assert_eq!(record.claims.len(), 1);
        let mut fresh = Ledger::new(Duration::from_secs(30));
        let alone = fresh.decide(
            crate::admission::Operation::Create,
            &claim("b", 2),
            None,
            &store,
            now,
            true,
        );
        assert!(alone.allowed, "without the record the claim fits");
        let mut successor = Ledger::new(Duration::from_secs(30));
        successor.adopt(record, now);
        let refused = successor.decide(
            crate::admission::Operation::Create,
            &claim("b", 2),
            None,
            &store,
            now,
            false,
        );
        assert!(
            !refused.allowed,
            "the predecessor's claim holds 3 of 4 VCPUs"
        );
        // A claim whose `allowed` could not be given frees what it held.
        successor.withdraw("a", Some("u-a"), Some(1));
        let fits = successor.decide(
            crate::admission::Operation::Create,
            &claim("b", 2),
            None,
            &store,
            now,
            false,
        );
        assert!(fits.allowed, "{}", fits.message);
    }

    #[test]
    fn an_adopted_claim_waits_no_longer_than_its_hold_from_when_it_was_admitted() {
        let store = store();
        let now = Instant::now();
        let record = InFlight {
            claims: vec![RecordedClaim {
                name: "a".into(),
                uid: Some("u-a".into()),
                generation: Some(1),
                takes: vec![("cn1".into(), "VCPU".into(), 4)],
                charge: None,
                age_ms: 29_000,
            }],
            ..InFlight::default()
        };
        let mut successor = Ledger::new(Duration::from_secs(30));
        successor.adopt(record, now);
        let later = now + Duration::from_secs(2);
        let verdict = successor.decide(
            crate::admission::Operation::Create,
            &claim("b", 1),
            None,
            &store,
            later,
            true,
        );
        assert!(verdict.allowed, "held 31 s in all: let go");
    }

    /// The record stays within what a Lease's annotations hold: past its bytes, a claim
    /// waits (refused, to retry) for those on their way.
    #[test]
    fn the_record_is_bounded_in_bytes() {
        let mut store = store();
        store.put(object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: cn1}\nspec: {inventories: {VCPU: {total: 100000}}}\n",
        ));
        let now = Instant::now();
        let mut ledger = Ledger::with_max_holds(Duration::from_secs(30), 100_000);
        let mut refused = None;
        for i in 0..5000 {
            let v = ledger.decide(
                crate::admission::Operation::Create,
                &claim(&format!("c{i}"), 1),
                None,
                &store,
                now,
                false,
            );
            if !v.allowed {
                refused = Some(v);
                break;
            }
        }
        let refused = refused.expect("refused before 5,000 claims");
        assert_eq!(refused.refusal, crate::admission::Refusal::Unavailable);
        let text = ledger.in_flight(now).to_text();
        assert!(text.len() <= 200 * 1024, "{} bytes", text.len());
        assert!(
            ledger.record_bytes() >= text.len() / 2,
            "the estimate is of the record"
        );
    }

    #[test]
    fn a_bad_record_is_an_error_not_a_panic() {
        assert!(InFlight::from_text("{").is_err());
        assert!(InFlight::from_text("{\"claims\": 3}").is_err());
        assert_eq!(InFlight::from_text("{}").unwrap(), InFlight::default());
    }

    #[test]
    fn the_point_a_store_has_come_to_travels_with_the_record() {
        let mut record = InFlight::default();
        assert_eq!(record.to_text(), "{}", "nothing to say: nothing written");
        record.seen_through = Some(SeenThrough {
            allocations: 41,
            writes: 7,
        });
        let back = InFlight::from_text(&record.to_text()).unwrap();
        assert_eq!(back, record);
        let older = InFlight::from_text(r#"{"claims":[]}"#).unwrap();
        assert_eq!(older.seen_through, None, "a record kept without the point");
    }

    #[test]
    fn a_store_reaches_a_point_only_through_its_watches() {
        let mut store = Store::default();
        let mut claim = claim("a", 1);
        claim.meta_mut().resource_version = Some("12".into());
        store.put(claim);
        store.note_watched(Kind::Allocation, 9);
        let point = SeenThrough::of(&store);
        assert_eq!(
            point,
            SeenThrough {
                allocations: 12,
                writes: 0
            },
            "what was put in directly counts for where the store has come"
        );
        assert!(
            !point.reached_by(&store),
            "an object put in directly says nothing of the changes before it"
        );
        store.note_watched(Kind::Allocation, 12);
        assert!(point.reached_by(&store));
        let further = SeenThrough {
            allocations: 12,
            writes: 3,
        };
        assert!(
            !further.reached_by(&store),
            "each kind's watch must come as far"
        );
        store.note_watched(Kind::PlacementWrite, 3);
        assert!(further.reached_by(&store));
    }
}
