//! The decision point at admission: claims decided one after another, each seeing the
//! claims decided before it, also those the store does not show yet.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kubeplace_api::{Kind, Object};

use crate::admission::{Operation, PendingUsage, Verdict, admit, admit_with_pending};
use crate::store::{ObjectKey, Store};
use crate::translate::takes;

/// A claim admitted a moment ago: what it takes, per provider and class.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingClaim {
    /// The Allocation's name.
    pub name: String,
    /// The Allocation's uid as the API server gave it, when known.
    pub uid: Option<String>,
    /// The `metadata.generation` the API server gave this version, when known: versions of
    /// one object are told apart, and in order, by it.
    pub generation: Option<i64>,
    /// Amount per provider and resource class.
    pub takes: BTreeMap<(String, String), i64>,
    /// What it charges to its project, if anything.
    pub charge: Option<crate::quota::Charge>,
    /// When it was admitted.
    pub admitted_at: Instant,
}

/// Claims admitted but not yet in the store. The API server stores an object a few
/// milliseconds after admission and the watch delivers it later still; until then the
/// ledger holds the capacity the claim took. A claim the API server never stores (another
/// admission step refused it, or the write failed) holds it until `hold` has passed: for
/// that long a later claim may be refused that would have fitted, never the other way.
///
/// What reviews that never become objects can hold is bounded: at most [`VERSIONS_HELD`]
/// holds per Allocation name (a review repeated as it was decided replaces its hold), and
/// at most `max_holds` in all, the oldest dropped first. A hold dropped early leaves the claim to `settle`, which
/// refuses it later should it not fit.
#[derive(Debug, Clone)]
pub struct Ledger {
    /// Oldest first.
    pub(super) pending: Vec<PendingClaim>,
    /// PlacementWrites admitted here that the store has not seen yet, oldest first.
    pub(super) writes: Vec<super::writes::PendingWrite>,
    pub(super) hold: Duration,
    max_holds: usize,
}

/// Holds kept at most by [`Ledger::new`]: far more than the claims a cluster admits in the
/// moment before the watch delivers them.
pub const MAX_HOLDS: usize = 1024;

/// Bytes the record of what the ledger holds may take ([`Ledger::in_flight`]), about: the
/// leader keeps it on its Lease, whose annotations hold 256 KiB in all. Past it, claims wait
/// for those on their way (refused, to retry in a moment).
pub const RECORD_BYTES: usize = 160 * 1024;

impl Ledger {
    /// A ledger that holds an unseen claim's capacity for at most `hold`, and at most
    /// [`MAX_HOLDS`] claims at once.
    pub fn new(hold: Duration) -> Ledger {
        Ledger::with_max_holds(hold, MAX_HOLDS)
    }

    /// [`Ledger::new`], holding at most `max_holds` claims (at least one) at once.
    pub fn with_max_holds(hold: Duration, max_holds: usize) -> Ledger {
        Ledger {
            pending: Vec::new(),
            writes: Vec::new(),
            hold,
            max_holds: max_holds.max(1),
        }
    }

    /// The claims still pending.
    pub fn pending(&self) -> &[PendingClaim] {
        &self.pending
    }

    /// About how many bytes [`Ledger::in_flight`]'s record of what is held takes.
    pub fn record_bytes(&self) -> usize {
        let claims: usize = self
            .pending
            .iter()
            .map(|p| {
                let takes: usize = p
                    .takes
                    .keys()
                    .map(|(provider, class)| provider.len() + class.len() + 32)
                    .sum();
                let charge = p.charge.as_ref().map_or(0, |c| {
                    c.project.len()
                        + c.consumer.len()
                        + c.resources.keys().map(|k| k.len() + 24).sum::<usize>()
                        + 48
                });
                p.name.len() + p.uid.as_ref().map_or(0, String::len) + takes + charge + 64
            })
            .sum();
        let writes: usize = self
            .writes
            .iter()
            .map(|w| {
                w.name.len()
                    + w.changes
                        .iter()
                        .map(|c| c.key.name.len() + 32)
                        .sum::<usize>()
                    + 48
            })
            .sum();
        claims + writes
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
        if matches!(object, Object::Allocation(_) | Object::PlacementWrite(_))
            && operation != Operation::Delete
            && !dry_run
            && self.record_bytes() > RECORD_BYTES
        {
            return Verdict::refused(
                crate::admission::Refusal::Unavailable,
                format!(
                    "{} claims admitted a moment ago are still on their way to the store; retry in a moment",
                    self.pending.len()
                ),
            );
        }
        if let Object::PlacementWrite(write) = object {
            return match (operation, old) {
                (Operation::Create, _) => self.decide_write(write, store, now, dry_run),
                // Its status, labels: not the write.
                (_, Some(old)) if old.same_spec(object) => {
                    admit(operation, object, Some(old), store)
                }
                _ => Verdict::rejected(format!(
                    "PlacementWrite {:?} is made as it was decided; its spec is not changed",
                    object.name()
                )),
            };
        }
        if let Some(verdict) = self.held_by_pending_write(object) {
            return verdict;
        }
        let pending = match object {
            Object::Allocation(_) => self.usage(store, &[object.name()]),
            _ => PendingUsage::default(),
        };
        let verdict = admit_with_pending(operation, object, old, store, &pending);
        if let (Object::Allocation(a), true, false, true) = (
            object,
            verdict.allowed,
            dry_run,
            operation != Operation::Delete,
        ) {
            // A write's own change of its object replaces that object's earlier versions,
            // as the write's claims do: no other change of it is decided meanwhile.
            let hold = if crate::store::writes::mark_of(object).is_some() {
                Ledger::hold_written_claim
            } else {
                Ledger::hold_claim
            };
            hold(
                self,
                PendingClaim {
                    name: object.name().to_string(),
                    uid: a.metadata.uid.clone(),
                    generation: a.metadata.generation,
                    takes: takes(a),
                    charge: crate::quota::charge_of(a),
                    admitted_at: now,
                },
            );
        }
        verdict
    }

    /// Decides a device allocation written to a ResourceClaim (by kube-scheduler), as the
    /// mirror will hold it (made by `mirror::claim_allocation`): against the store and
    /// every claim pending, so a device a Server's claim took a moment ago is not given to a
    /// pod too, nor the other way round. An admitted one is held until the mirror shows it,
    /// unless `dry_run`.
    pub fn decide_device_claim(
        &mut self,
        claim: &kubeplace_api::Allocation,
        store: &Store,
        now: Instant,
        dry_run: bool,
    ) -> Verdict {
        self.forget_seen(store, now);
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        let pending = self.usage(store, &[name]);
        let verdict = crate::admission::admit_device_claim(claim, store, &pending);
        if verdict.allowed && !dry_run {
            self.hold_claim(PendingClaim {
                name: name.to_string(),
                uid: claim.metadata.uid.clone(),
                generation: claim.metadata.generation,
                takes: takes(claim),
                charge: crate::quota::charge_of(claim),
                admitted_at: now,
            });
        }
        verdict
    }

    /// What the claims admitted here and not yet shown by the store hold beside it, for a
    /// claim of `name` decided at this point by other means than a review: the Placement
    /// API's own writes on this replica, which go into the store at once. Deciding them
    /// against the store alone would let one take room a claim admitted a moment ago holds
    /// (the store shows both once the watch brings that claim), and its own review would
    /// then refuse it, so one of the two won when both fitted, or neither did.
    pub fn beside(&mut self, store: &Store, name: &str, now: Instant) -> PendingUsage {
        self.forget_seen(store, now);
        self.usage(store, &[name])
    }

    /// Holds an admitted claim's capacity beside the versions of its name still on their
    /// way: the API server stores them in the order decided, so the store may show an
    /// older one after a newer (A, then B, then A again). The same decision repeated (a
    /// review sent again) holds once, and one name keeps at most [`VERSIONS_HELD`].
    pub(super) fn hold_claim(&mut self, claim: PendingClaim) {
        if let Some(at) = self.pending.iter().rposition(|p| p.name == claim.name)
            && self.pending[at].takes == claim.takes
            && self.pending[at].charge == claim.charge
        {
            self.pending.remove(at);
        }
        if self.pending.iter().filter(|p| p.name == claim.name).count() >= VERSIONS_HELD
            && let Some(oldest) = self.pending.iter().position(|p| p.name == claim.name)
        {
            self.pending.remove(oldest);
        }
        if self.pending.len() >= self.max_holds {
            let over = self.pending.len() + 1 - self.max_holds;
            self.pending.drain(..over);
        }
        self.pending.push(claim);
    }

    /// Holds a claim a write of several objects makes, in place of any earlier version of
    /// its name: no other change of the object is decided until the store shows the write.
    pub(super) fn hold_written_claim(&mut self, claim: PendingClaim) {
        self.pending.retain(|p| p.name != claim.name);
        self.hold_claim(claim);
    }

    /// Drops the claims the store now shows, and those held too long. A version with a
    /// uid and generation is seen once the store shows its object at that generation or a
    /// later one (or deleted); one without is seen when the store shows it as it was
    /// decided, oldest first per name (a version is not taken as seen while an older one of
    /// its name is not, so A, B, A again is not taken for A alone).
    fn forget_seen(&mut self, store: &Store, now: Instant) {
        let hold = self.hold;
        self.writes.retain(|w| {
            !store.knows_write(&w.name) && now.saturating_duration_since(w.admitted_at) < hold
        });
        let mut waiting: Vec<String> = Vec::new();
        self.pending.retain(|p| {
            if now.saturating_duration_since(p.admitted_at) >= hold {
                return false;
            }
            let shown = match store.get_cluster(Kind::Allocation, &p.name) {
                Some(Object::Allocation(a)) => Some(a),
                _ => None,
            };
            let deleted = p.uid.as_deref().is_some_and(|uid| store.claim_deleted(uid));
            if let (Some(uid), Some(generation)) = (&p.uid, p.generation) {
                let seen = deleted
                    || shown.is_some_and(|a| {
                        a.metadata.uid.as_ref() == Some(uid)
                            && a.metadata.generation.is_some_and(|g| g >= generation)
                    });
                return !seen;
            }
            if waiting.contains(&p.name) {
                return true;
            }
            let seen = match shown {
                Some(a) => {
                    takes(a) == p.takes
                        && crate::quota::charge_of(a) == p.charge
                        && (p.uid.is_none() || a.metadata.uid == p.uid)
                        // A refusal by `settle` is a verdict too: the claim no longer waits.
                        && (store.index().allocations(&p.name).is_some()
                            || store.refusal(&p.name).is_some()
                            || crate::translate::is_refused(a))
                }
                // Stored and deleted again before this look.
                None => deleted,
            };
            if !seen {
                waiting.push(p.name.clone());
            }
            !seen
        });
    }

    /// What the pending claims take and charge beyond what the store counts for them,
    /// leaving out the claims named in `deciding` (their own earlier versions are replaced,
    /// not added to). A name with several versions on their way counts the most of each.
    ///
    /// A claim this replica's Placement API decided and has not committed shows in the
    /// store as decided, but the API server still holds the version before. Until the
    /// commit, the claims of that write count the most of both, per provider and class
    /// (and per project), taken over the write whole since its claims change together: room
    /// a release, shrink or move decided here would free is not given to another claim
    /// before the API server has freed it.
    pub(super) fn usage(&self, store: &Store, deciding: &[&str]) -> PendingUsage {
        let mut usage = PendingUsage::default();
        if let [name] = deciding {
            usage.deciding = self
                .pending
                .iter()
                .filter(|p| p.name == *name)
                .map(|p| p.charge.clone())
                .collect();
        }
        let mut by_name: BTreeMap<&str, Vec<&PendingClaim>> = BTreeMap::new();
        for claim in self
            .pending
            .iter()
            .filter(|p| !deciding.contains(&p.name.as_str()))
        {
            by_name.entry(&claim.name).or_default().push(claim);
        }
        for name in self.add_held_before(store, deciding, &by_name, &mut usage) {
            by_name.remove(name);
        }
        for (name, versions) in by_name {
            for charge in most_per_project(versions.iter().filter_map(|v| v.charge.clone())) {
                usage.charges.add(store.charges(), name, &charge);
            }
            let mut takes: BTreeMap<&(String, String), i64> = BTreeMap::new();
            for version in &versions {
                for (at, amount) in &version.takes {
                    let most = takes.entry(at).or_insert(0);
                    *most = (*most).max(*amount);
                }
            }
            let counted = store.index().allocations(name);
            for ((provider, class), amount) in takes {
                // A claim that shrinks frees nothing until the store shows it.
                usage.add(
                    provider,
                    class,
                    (amount - counted.map_or(0, |c| c.amount(provider, class))).max(0),
                );
            }
        }
        usage
    }

    /// Adds what the claims of each write decided here held before it, beyond what the store
    /// counts for them now; writes whose record is admitted, or that hold a claim being
    /// decided, are left out.
    ///
    /// A claim of such a write may also have versions admitted a moment ago and still on
    /// their way (`pending`): the API server holds one of them or the version before, never
    /// two at once, so the claim counts the most of those. Returns the claims counted here,
    /// whose versions on their way are not to be counted again.
    fn add_held_before<'s>(
        &self,
        store: &'s Store,
        deciding: &[&str],
        pending: &BTreeMap<&str, Vec<&PendingClaim>>,
        usage: &mut PendingUsage,
    ) -> Vec<&'s str> {
        let mut counted = Vec::new();
        let mut writes: BTreeMap<u64, Vec<(&str, Option<&kubeplace_api::Allocation>)>> =
            BTreeMap::new();
        for (name, before, write) in store.claims_decided_here() {
            writes.entry(write).or_default().push((name, before));
        }
        for claims in writes.values() {
            if claims
                .iter()
                .any(|(name, _)| deciding.contains(name) || self.admitted_write_on(store, name))
            {
                continue;
            }
            let mut held: Taken = BTreeMap::new();
            let mut charged: Vec<crate::quota::Charge> = Vec::new();
            for (name, before) in claims {
                let versions = pending.get(*name).map_or(&[][..], Vec::as_slice);
                let mut most = before.map(takes).unwrap_or_default();
                for version in versions {
                    for (at, amount) in &version.takes {
                        let m = most.entry(at.clone()).or_insert(0);
                        *m = (*m).max(*amount);
                    }
                }
                for (at, amount) in most {
                    *held.entry(at).or_insert(0) += amount;
                }
                let charges = before
                    .and_then(crate::quota::charge_of)
                    .into_iter()
                    .chain(versions.iter().filter_map(|v| v.charge.clone()));
                charged.extend(most_per_project(charges));
            }
            for ((provider, class), amount) in &held {
                let shown: i64 = claims
                    .iter()
                    .map(|(name, _)| {
                        store
                            .index()
                            .allocations(name)
                            .map_or(0, |c| c.amount(provider, class))
                    })
                    .sum();
                usage.add(provider, class, (amount - shown).max(0));
            }
            let names: Vec<&str> = claims.iter().map(|(name, _)| *name).collect();
            usage.charges.add_held_before(
                store.charges(),
                &names,
                &charged.iter().collect::<Vec<_>>(),
            );
            counted.extend(names);
        }
        counted
    }

    /// Whether a claim this replica decided belongs to a write of several objects whose
    /// record is admitted: the record is the decision and its objects follow it, so from
    /// then on they count as the store shows them.
    fn admitted_write_on(&self, store: &Store, name: &str) -> bool {
        let key = ObjectKey::cluster(Kind::Allocation, name);
        let in_ledger = || {
            self.writes
                .iter()
                .any(|w| w.changes.iter().any(|c| c.key == key))
        };
        let seen_by_store = || {
            store.write_on(&key).is_some()
                || store
                    .get(&key)
                    .and_then(crate::store::writes::mark_of)
                    .is_some_and(|write| store.knows_write(write))
        };
        in_ledger() || seen_by_store()
    }
}

/// What a claim takes, per provider and resource class.
type Taken = BTreeMap<(String, String), i64>;

/// The most that versions of one claim charge, per project and class: one charge a project.
fn most_per_project(
    charges: impl Iterator<Item = crate::quota::Charge>,
) -> Vec<crate::quota::Charge> {
    let mut most: BTreeMap<String, crate::quota::Charge> = BTreeMap::new();
    for charge in charges {
        match most.get_mut(&charge.project) {
            None => {
                most.insert(charge.project.clone(), charge);
            }
            Some(at) => {
                for (class, n) in charge.resources {
                    let m = at.resources.entry(class).or_insert(0);
                    *m = (*m).max(n);
                }
            }
        }
    }
    most.into_values().collect()
}

/// Versions of one Allocation name held at most.
pub const VERSIONS_HELD: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_objects::object;

    fn store_with_vcpus(vcpus: i64) -> Store {
        let mut store = Store::default();
        store.apply(object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn1\nspec:\n  inventories:\n    VCPU:\n      total: {vcpus}\n"
        )));
        store
    }

    /// A claim of one VCPU on cn1, named `name`.
    fn claim(name: &str) -> Object {
        object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: {name}\nspec:\n  consumer: 00000000-0000-0000-0000-000000000001\n  allocations:\n  - provider: cn1\n    resources:\n      VCPU: 1\n"
        ))
    }

    fn admitted(ledger: &mut Ledger, store: &Store, name: &str, now: Instant) -> bool {
        ledger
            .decide(Operation::Create, &claim(name), None, store, now, false)
            .allowed
    }

    /// A review repeated (say, forged, and never stored) holds one claim's capacity, not one
    /// per review.
    #[test]
    fn a_newer_review_of_the_same_name_replaces_its_hold() {
        let store = store_with_vcpus(2);
        let mut ledger = Ledger::new(Duration::from_secs(30));
        let now = Instant::now();
        for _ in 0..5 {
            assert!(admitted(&mut ledger, &store, "forged", now));
        }
        assert_eq!(ledger.pending().len(), 1);
        assert!(admitted(&mut ledger, &store, "real", now));
        assert!(!admitted(&mut ledger, &store, "one-too-many", now));
    }

    /// A release this replica's Placement API decided frees nothing for others until it
    /// is committed: the API server still holds the claim, and the commit may fail.
    #[test]
    fn a_release_decided_here_frees_room_once_committed() {
        let mut store = store_with_vcpus(2);
        for name in ["a", "b"] {
            store.apply(claim(name));
        }
        let mut ledger = Ledger::new(Duration::from_secs(30));
        let now = Instant::now();
        let key = ObjectKey::cluster(Kind::Allocation, "a");
        let before = store.get(&key).cloned();
        store.delete(&key);
        store.hold_decided([(&key, before.as_ref())]);
        assert!(!admitted(&mut ledger, &store, "c", now));
        store.release_decided([&key]);
        assert!(admitted(&mut ledger, &store, "c", now));
    }

    /// A move decided here (one claim released, another made, in one write) holds its room
    /// once, not twice: its claims change together or not at all.
    #[test]
    fn a_move_decided_here_holds_its_room_once() {
        let mut store = store_with_vcpus(3);
        for name in ["instance", "other"] {
            store.apply(claim(name));
        }
        let mut ledger = Ledger::new(Duration::from_secs(30));
        let now = Instant::now();
        let (from, to) = (
            ObjectKey::cluster(Kind::Allocation, "instance"),
            ObjectKey::cluster(Kind::Allocation, "migration"),
        );
        let before = store.get(&from).cloned();
        store.delete(&from);
        store.apply(claim("migration"));
        store.hold_decided([(&from, before.as_ref()), (&to, None)]);
        assert!(admitted(&mut ledger, &store, "third", now));
        assert!(!admitted(&mut ledger, &store, "fourth", now));
    }

    /// Reviews of ever new names hold at most `max_holds` claims: the oldest holds go first,
    /// and a claim that fits beside the newest ones is admitted.
    #[test]
    fn holds_are_capped_and_the_oldest_dropped_first() {
        let store = store_with_vcpus(4);
        let mut ledger = Ledger::with_max_holds(Duration::from_secs(30), 3);
        let now = Instant::now();
        for i in 0..10 {
            admitted(&mut ledger, &store, &format!("forged-{i}"), now);
        }
        let held: Vec<&str> = ledger.pending().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(held, ["forged-7", "forged-8", "forged-9"]);
        assert!(admitted(&mut ledger, &store, "real", now));
        assert_eq!(ledger.pending().len(), 3);
        assert_eq!(Ledger::new(Duration::from_secs(30)).max_holds, MAX_HOLDS);
    }
}
