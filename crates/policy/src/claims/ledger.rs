//! The decision point at admission: claims decided one after another, each seeing the
//! claims decided before it, also those the store does not show yet.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kubeplace_api::{Kind, Object};

use crate::admission::{Operation, PendingUsage, Verdict, admit_with_pending};
use crate::store::Store;
use crate::translate::takes;

/// A claim admitted a moment ago: what it takes, per provider and class.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingClaim {
    /// The Allocation's name.
    pub name: String,
    /// The Allocation's uid as the API server gave it, when known.
    pub uid: Option<String>,
    /// Amount per provider and resource class.
    pub takes: BTreeMap<(String, String), i64>,
    /// When it was admitted.
    pub admitted_at: Instant,
}

/// Claims admitted but not yet in the store. The API server stores an object a few
/// milliseconds after admission and the watch delivers it later still; until then the
/// ledger holds the capacity the claim took. A claim the API server never stores (another
/// admission step refused it, or the write failed) holds it until `hold` has passed: for
/// that long a later claim may be refused that would have fitted, never the other way.
#[derive(Debug, Clone)]
pub struct Ledger {
    pending: Vec<PendingClaim>,
    hold: Duration,
}

impl Ledger {
    /// A ledger that holds an unseen claim's capacity for at most `hold`.
    pub fn new(hold: Duration) -> Ledger {
        Ledger {
            pending: Vec::new(),
            hold,
        }
    }

    /// The claims still pending.
    pub fn pending(&self) -> &[PendingClaim] {
        &self.pending
    }

    /// Decides one write of an object: for an Allocation, against the store and every claim
    /// pending; other kinds as admission always does. An admitted Allocation is remembered
    /// unless `dry_run` (the API server will not store it).
    pub fn decide(
        &mut self,
        operation: Operation,
        object: &Object,
        old: Option<&Object>,
        store: &Store,
        now: Instant,
        dry_run: bool,
    ) -> Verdict {
        self.forget_seen(store, now);
        let pending = match object {
            Object::Allocation(_) => self.usage(store, object.name()),
            _ => PendingUsage::default(),
        };
        let verdict = admit_with_pending(operation, object, old, store, &pending);
        if let (Object::Allocation(a), true, false, true) = (
            object,
            verdict.allowed,
            dry_run,
            operation != Operation::Delete,
        ) {
            self.pending.retain(|p| p.name != object.name());
            self.pending.push(PendingClaim {
                name: object.name().to_string(),
                uid: a.metadata.uid.clone(),
                takes: takes(a),
                admitted_at: now,
            });
        }
        verdict
    }

    /// Drops the claims the store now shows as they were admitted, and those held too long.
    fn forget_seen(&mut self, store: &Store, now: Instant) {
        let hold = self.hold;
        self.pending.retain(|p| {
            let seen = match store.get_cluster(Kind::Allocation, &p.name) {
                Some(Object::Allocation(a)) => {
                    takes(a) == p.takes
                        && (p.uid.is_none() || a.metadata.uid == p.uid)
                        // A refusal by `settle` is a verdict too: the claim no longer waits.
                        && (store.index().allocations(&p.name).is_some()
                            || store.refusal(&p.name).is_some()
                            || crate::translate::is_refused(a))
                }
                // Stored and deleted again before this look.
                _ => p.uid.as_deref().is_some_and(|uid| store.claim_deleted(uid)),
            };
            !seen && now.saturating_duration_since(p.admitted_at) < hold
        });
    }

    /// What the pending claims take beyond what the store counts for them, leaving out the
    /// claim named `deciding` (its own earlier version is replaced, not added to).
    fn usage(&self, store: &Store, deciding: &str) -> PendingUsage {
        let mut usage = PendingUsage::default();
        for claim in self.pending.iter().filter(|p| p.name != deciding) {
            let counted = store.index().allocations(&claim.name);
            for ((provider, class), amount) in &claim.takes {
                let already: i64 = counted
                    .map(|c| {
                        c.items
                            .iter()
                            .filter(|(p, k, _)| p == provider && k == class)
                            .map(|(_, _, n)| n)
                            .sum()
                    })
                    .unwrap_or(0);
                // A claim that shrinks frees nothing until the store shows it.
                usage.add(provider, class, (amount - already).max(0));
            }
        }
        usage
    }
}
