//! The cluster mirror: Nodes, Pods, ResourceSlices, ResourceClaims and DeviceClasses read
//! as ResourceProviders and Allocations, so candidates, usages, headroom, explain and the
//! Placement API count what the cluster already runs.
//!
//! Mirrored objects carry [`MIRRORED_FROM_ANNOTATION`] and live in the store only: nothing
//! writes them or their statuses to the API server, and no write through admission or the
//! Placement API changes them. [`Mirror`] keeps what each cluster object became and gives
//! the store's changes as they move. One file per source kind: `node.rs`, `pod.rs`,
//! `resource_slice.rs`, `resource_claim.rs`, `device_class/` (selectors compiled and
//! evaluated within budgets); `node_reach.rs` the Nodes a device on no one Node reaches;
//! `traits.rs` the label table; `quantity.rs` Kubernetes quantities.
//!
//! Picking a device's DeviceClass evaluates CEL and may take up to a budget's time, so an
//! operator can pick apart from the mirror: [`Mirror::device_classes`] and
//! [`Mirror::picking`] give what picking needs, [`DeviceClasses::pick`] and
//! [`Picking::pick_all`] pick (no lock held), and [`Mirror::observe_picked`] and
//! [`Mirror::adopt`] take the picks. [`Mirror::observe`] picks as it goes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use kubeplace_api::cluster_source::{
    ClusterSource, DeviceClass, DeviceRequestAllocationResult, MIRRORED_FROM_ANNOTATION,
    ResourceClaim, ResourceSlice, SourceKey, SourceKind,
};
use kubeplace_api::{
    Allocation, AllocationSpec, AllocationStatus, Condition, Object, ObjectMeta, ResourceProvider,
};
use kubeplace_core::placement::derived_provider_uuid;

use crate::store::{Change, ObjectKey};
use crate::translate::APPLIED;
use kubeplace_api::{CONSUMER_TYPE_ANNOTATION, PROJECT_ANNOTATION};
use node_reach::Reach;

mod device_class;
mod device_reservation;
mod node;
mod node_reach;
mod pod;
pub mod quantity;
mod reservation;
mod resource_claim;
pub mod resource_slice;
pub mod traits;

pub use device_class::{
    COST_BUDGET, ClassProblem, DeviceClasses, SelectorProblem, SlicePicks, TIME_BUDGET,
};
pub use device_reservation::{
    DeviceId, DeviceReservation, ReservedDevice, allocated_devices, consumed_by, device_list,
    device_of, device_reservations, reservation_allocation_problem, reservation_claim_problem,
    reservation_of, same_amounts,
};
pub use node::COMPUTE_STATUS_DISABLED;
pub use pod::POD_CONSUMER_TYPE;
pub use reservation::{
    RESERVATION_LABEL, Reservation, is_reservation, is_reservation_of_a_server,
    reservation_pod_problem, reservations,
};
pub use resource_claim::{CLAIM_CONSUMER_TYPE, claim_allocation};
pub use traits::{DEFAULT_RULES, TraitRule, TraitTable, TraitTableError};

/// The reason of a mirrored Allocation's `Applied` condition: a fact of the cluster,
/// counted as it is, never weighed as a claim.
pub const MIRRORED: &str = "Mirrored";

/// Why a cluster object cannot be mirrored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorError {
    #[error("field {field}: {source}")]
    Quantity {
        field: String,
        source: quantity::QuantityError,
    },
    #[error("field {0} is missing")]
    Missing(String),
}

impl MirrorError {
    /// The refusal of a document that cannot be mirrored, located at its file, line and
    /// document number, as a manifest's other errors are.
    pub fn located(
        &self,
        origin: &kubeplace_api::manifest::Origin,
        source: &ClusterSource,
        name: &str,
    ) -> String {
        format!(
            "{}:{}: document {}: {} {name:?} cannot be mirrored: {self}",
            origin.file,
            origin.line,
            origin.document,
            source.kind()
        )
    }
}

/// What one cluster object's change did: the store's changes, what the object is
/// mirrored as now (or why it is not mirrored; then it is mirrored as nothing), and the
/// problems of DeviceClasses found on the way (each reported once).
#[derive(Debug)]
pub struct Observed {
    pub changes: Vec<Change>,
    pub outcome: Result<Vec<ObjectKey>, MirrorError>,
    pub problems: Vec<ClassProblem>,
}

/// What the cluster's objects became. Pods are not kept (each maps alone); slices and
/// claims are, since a DeviceClass's change renames their resource class and a slice's
/// shared devices change what the claims on them hold; Nodes' providers are, since a
/// slice's devices on no one Node join the aggregates of the Nodes they reach.
#[derive(Debug, Default)]
pub struct Mirror {
    traits: TraitTable,
    classes: DeviceClasses,
    slices: BTreeMap<String, Arc<ResourceSlice>>,
    claims: BTreeMap<(String, String), ResourceClaim>,
    /// How a claim holds each device of the slices, by provider name: one of its resource
    /// class, or what it consumes of a shared device's counted capacities.
    devices: HashMap<String, resource_slice::Holding>,
    /// Each Node's provider as mirrored (with the aggregates of the pools reaching it) and
    /// its labels.
    nodes: BTreeMap<String, (ResourceProvider, BTreeMap<String, String>)>,
    /// The aggregates each slice's devices on no one Node share, with the Nodes they reach.
    reaches: BTreeMap<String, Vec<(String, Reach)>>,
    /// What each cluster object seen is mirrored as.
    produced: HashMap<SourceKey, Vec<ObjectKey>>,
    /// How many cluster objects produce each mirrored object (a device two slices of one
    /// pool both list, while a driver moves it between them): it goes when the last does.
    owners: HashMap<ObjectKey, u32>,
}

impl Mirror {
    /// An empty mirror giving Nodes traits by `traits`.
    pub fn new(traits: TraitTable) -> Mirror {
        Mirror {
            traits,
            ..Mirror::default()
        }
    }

    /// A cluster object created or changed; a ResourceSlice's devices' classes are picked
    /// here.
    pub fn observe(&mut self, source: &ClusterSource) -> Observed {
        self.observe_with(source, None)
    }

    /// [`Mirror::observe`] of a ResourceSlice whose devices' classes were picked apart, with
    /// the classes [`Mirror::device_classes`] gave. Picks made with classes that have
    /// changed since are made again here.
    pub fn observe_picked(&mut self, source: &ClusterSource, picks: SlicePicks) -> Observed {
        self.observe_with(source, Some(picks))
    }

    /// The DeviceClasses devices are picked by now, to pick a slice's devices with apart
    /// from the mirror (cheap: the compiled classes are shared).
    pub fn device_classes(&self) -> DeviceClasses {
        self.classes.clone()
    }

    /// What picking every device again after DeviceClasses change needs: the classes and
    /// the slices (shared, not copied).
    pub fn picking(&self) -> Picking {
        Picking {
            base: self.classes.id(),
            classes: self.classes.clone(),
            slices: self.slices.clone(),
        }
    }

    /// Takes DeviceClasses changed apart from the mirror and the picks made with them
    /// ([`Picking::pick_all`]): every slice and claim is mirrored again. Not taken (`None`)
    /// when the mirror's classes changed since [`Mirror::picking`]; then the class changes,
    /// observed, pick here. Once taken, the DeviceClass changes it was made from are
    /// recorded with [`Mirror::note_adopted`], not observed.
    pub fn adopt(&mut self, picked: Picked) -> Option<Observed> {
        if picked.base != self.classes.id() {
            return None;
        }
        let mut observed = Observed {
            changes: Vec::new(),
            outcome: Ok(Vec::new()),
            problems: Vec::new(),
        };
        if picked.classes.id() != self.classes.id() {
            self.classes = picked.classes;
            self.redo_devices(picked.picks, &mut observed.changes, &mut observed.problems);
        }
        Some(observed)
    }

    /// Records that a DeviceClass [`Mirror::adopt`] took is `present` (created or changed)
    /// or not (deleted): what [`Mirror::seen`] lists. Its classes are left as adopted.
    pub fn note_adopted(&mut self, key: &SourceKey, present: bool) {
        if present {
            self.produced.insert(key.clone(), Vec::new());
        } else {
            self.produced.remove(key);
        }
    }

    fn observe_with(&mut self, source: &ClusterSource, given: Option<SlicePicks>) -> Observed {
        let key = source.key();
        let from = key.to_string();
        let mut changes = Vec::new();
        let mut problems = Vec::new();
        let made: Result<Vec<Object>, MirrorError> = match source {
            ClusterSource::Node(n) => match node::provider(n, &from, &self.traits) {
                Ok(mut rp) => {
                    let labels = n.metadata.labels.clone().unwrap_or_default();
                    rp.spec.aggregates = self.pools_reaching(&key.name, &labels);
                    self.nodes.insert(key.name.clone(), (rp.clone(), labels));
                    Ok(vec![Object::ResourceProvider(rp)])
                }
                Err(e) => {
                    self.nodes.remove(&key.name);
                    Err(e)
                }
            },
            ClusterSource::Pod(p) => {
                pod::allocation(p, &from).map(|a| a.into_iter().map(Object::Allocation).collect())
            }
            ClusterSource::ResourceSlice(s) => {
                let picks = match given {
                    Some(picks) if picks.classes_id() == self.classes.id() => picks,
                    _ => self.pick(s, &mut problems),
                };
                let mut kept = (**s).clone();
                // Nothing reads managedFields; kept they would be most of the slice.
                kept.metadata.managed_fields = None;
                let old = self.slices.insert(key.name.clone(), Arc::new(kept));
                let moved = self.rehold(old.as_deref(), Some((s, &picks)));
                self.redo_claims_on(&moved, &mut changes);
                self.reach(&key.name, resource_slice::reaches(s), &mut changes);
                self.slice_objects(s, &picks, &from)
            }
            ClusterSource::ResourceClaim(c) => {
                let mut kept = (**c).clone();
                kept.metadata.managed_fields = None;
                self.claims
                    .insert((key.namespace.clone(), key.name.clone()), kept);
                Ok(self.claim_objects(c, &from))
            }
            ClusterSource::DeviceClass(c) => {
                if let Some(found) = self.classes.put(c) {
                    problems.extend(found);
                    self.redo_devices(HashMap::new(), &mut changes, &mut problems);
                }
                Ok(Vec::new())
            }
        };
        let outcome = match made {
            Ok(objects) => {
                let keys = objects.iter().map(ObjectKey::of).collect();
                self.produce(key, objects, &mut changes);
                Ok(keys)
            }
            Err(e) => {
                self.produce(key, Vec::new(), &mut changes);
                Err(e)
            }
        };
        Observed {
            changes,
            outcome,
            problems,
        }
    }

    /// A cluster object deleted: what it was mirrored as goes.
    pub fn forget(&mut self, key: &SourceKey) -> Vec<Change> {
        let mut changes = Vec::new();
        match key.kind {
            SourceKind::ResourceSlice => {
                let old = self.slices.remove(&key.name);
                let moved = self.rehold(old.as_deref(), None);
                self.redo_claims_on(&moved, &mut changes);
                self.reach(&key.name, Vec::new(), &mut changes);
            }
            SourceKind::ResourceClaim => {
                self.claims
                    .remove(&(key.namespace.clone(), key.name.clone()));
            }
            SourceKind::DeviceClass => {
                if self.classes.remove(&key.name) {
                    // A class gone leaves nothing to report: its problems went with it.
                    self.redo_devices(HashMap::new(), &mut changes, &mut Vec::new());
                }
            }
            SourceKind::Node => {
                self.nodes.remove(&key.name);
            }
            SourceKind::Pod => {}
        }
        self.produce(key.clone(), Vec::new(), &mut changes);
        self.produced.remove(key);
        changes
    }

    /// The cluster objects of a kind the mirror has seen: after a list, those not in it are
    /// [forgotten](Mirror::forget).
    pub fn seen(&self, kind: SourceKind) -> Vec<SourceKey> {
        let mut keys: Vec<SourceKey> = self
            .produced
            .keys()
            .filter(|k| k.kind == kind)
            .cloned()
            .collect();
        keys.sort();
        keys
    }

    /// How many objects the mirror keeps in the store.
    pub fn mirrored_count(&self) -> usize {
        self.owners.len()
    }

    /// The classes of a slice's devices, picked here; the problems found added to
    /// `problems`.
    fn pick(&self, s: &ResourceSlice, problems: &mut Vec<ClassProblem>) -> SlicePicks {
        let picks = self.classes.pick(s);
        problems.extend(picks.problems.iter().cloned());
        picks
    }

    fn slice_objects(
        &self,
        s: &ResourceSlice,
        picks: &SlicePicks,
        from: &str,
    ) -> Result<Vec<Object>, MirrorError> {
        resource_slice::providers(s, picks, from)
            .map(|rps| rps.into_iter().map(Object::ResourceProvider).collect())
    }

    fn claim_objects(&self, c: &ResourceClaim, from: &str) -> Vec<Object> {
        resource_claim::allocation(c, &self.classes, &self.devices, from)
            .into_iter()
            .map(Object::Allocation)
            .collect()
    }

    /// The aggregates of the pools whose devices on no one Node reach a Node.
    fn pools_reaching(&self, node: &str, labels: &BTreeMap<String, String>) -> Vec<String> {
        let mut aggregates: Vec<String> = self
            .reaches
            .values()
            .flatten()
            .filter(|(_, reach)| reach.reaches(node, labels))
            .map(|(aggregate, _)| aggregate.clone())
            .collect();
        aggregates.sort();
        aggregates.dedup();
        aggregates
    }

    /// Records what a slice's devices on no one Node reach; when that moved, the Nodes
    /// whose aggregates changed are mirrored again.
    fn reach(&mut self, slice: &str, reaches: Vec<(String, Reach)>, changes: &mut Vec<Change>) {
        let old = if reaches.is_empty() {
            self.reaches.remove(slice)
        } else {
            self.reaches.insert(slice.to_string(), reaches.clone())
        };
        if old.unwrap_or_default() == reaches {
            return;
        }
        let moved: Vec<(String, Vec<String>)> = self
            .nodes
            .iter()
            .map(|(name, (rp, labels))| (name, rp, self.pools_reaching(name, labels)))
            .filter(|(_, rp, aggregates)| rp.spec.aggregates != *aggregates)
            .map(|(name, _, aggregates)| (name.clone(), aggregates))
            .collect();
        for (name, aggregates) in moved {
            let Some((rp, _)) = self.nodes.get_mut(&name) else {
                continue;
            };
            rp.spec.aggregates = aggregates;
            let provider = rp.clone();
            let key = SourceKey {
                kind: SourceKind::Node,
                namespace: String::new(),
                name,
            };
            self.produce(key, vec![Object::ResourceProvider(provider)], changes);
        }
    }

    /// Replaces how claims hold a slice's devices (`old`'s) with `new`'s; the devices whose
    /// holding moved.
    fn rehold(
        &mut self,
        old: Option<&ResourceSlice>,
        new: Option<(&ResourceSlice, &SlicePicks)>,
    ) -> BTreeSet<String> {
        // What the old slice's devices hold is in the table already: read, not evaluated again.
        let before: BTreeMap<String, resource_slice::Holding> = old
            .into_iter()
            .flat_map(|s| {
                let spec = &s.spec;
                spec.devices.iter().flatten().map(|d| {
                    resource_slice::device_provider_name(&spec.driver, &spec.pool.name, &d.name)
                })
            })
            .filter_map(|name| Some((name.clone(), self.devices.get(&name)?.clone())))
            .collect();
        let after = new
            .map(|(s, picks)| resource_slice::device_holdings(s, picks))
            .unwrap_or_default();
        if before == after {
            return BTreeSet::new();
        }
        for device in before.keys() {
            self.devices.remove(device);
        }
        let mut moved: BTreeSet<String> = before.keys().cloned().collect();
        for (device, holding) in after {
            moved.insert(device.clone());
            self.devices.insert(device, holding);
        }
        moved
    }

    /// Mirrors again the claims allocated on any of `devices` (providers' names).
    fn redo_claims_on(&mut self, devices: &BTreeSet<String>, changes: &mut Vec<Change>) {
        if devices.is_empty() {
            return;
        }
        self.redo_claims_where(
            |r| {
                devices.contains(&resource_slice::device_provider_name(
                    &r.driver, &r.pool, &r.device,
                ))
            },
            changes,
        );
    }

    /// Mirrors again the claims with an allocation result that `named` picks.
    fn redo_claims_where(
        &mut self,
        named: impl Fn(&DeviceRequestAllocationResult) -> bool,
        changes: &mut Vec<Change>,
    ) {
        let claims: Vec<(SourceKey, Vec<Object>)> = self
            .claims
            .iter()
            .filter(|(_, c)| allocation_results(c).any(&named))
            .map(|((namespace, name), c)| {
                let key = SourceKey {
                    kind: SourceKind::ResourceClaim,
                    namespace: namespace.clone(),
                    name: name.clone(),
                };
                let objects = self.claim_objects(c, &key.to_string());
                (key, objects)
            })
            .collect();
        for (key, objects) in claims {
            self.produce(key, objects, changes);
        }
    }

    /// Mirrors every slice and claim again: a DeviceClass came, changed or went, and any
    /// device's resource class may have moved with it. A slice's devices are picked here
    /// unless `given` has picks for it as it is, made with the classes as they are.
    fn redo_devices(
        &mut self,
        mut given: HashMap<String, (Arc<ResourceSlice>, SlicePicks)>,
        changes: &mut Vec<Change>,
        problems: &mut Vec<ClassProblem>,
    ) {
        let picks: Vec<SlicePicks> = self
            .slices
            .iter()
            .map(|(name, s)| match given.remove(name) {
                Some((picked, picks))
                    if Arc::ptr_eq(&picked, s) && picks.classes_id() == self.classes.id() =>
                {
                    picks
                }
                _ => self.pick(s, problems),
            })
            .collect();
        self.devices = self
            .slices
            .values()
            .zip(&picks)
            .flat_map(|(s, picks)| resource_slice::device_holdings(s, picks))
            .collect();
        let slices: Vec<(SourceKey, Result<Vec<Object>, MirrorError>)> = self
            .slices
            .iter()
            .zip(&picks)
            .map(|((name, s), picks)| {
                let key = SourceKey {
                    kind: SourceKind::ResourceSlice,
                    namespace: String::new(),
                    name: name.clone(),
                };
                let objects = self.slice_objects(s, picks, &key.to_string());
                (key, objects)
            })
            .collect();
        for (key, objects) in slices {
            self.produce(key, objects.unwrap_or_default(), changes);
        }
        self.redo_claims_where(|_| true, changes);
    }

    /// Makes `objects` what `source` is mirrored as: puts each, and takes away what it
    /// no longer produces once no other source produces it either.
    fn produce(&mut self, source: SourceKey, objects: Vec<Object>, changes: &mut Vec<Change>) {
        let keys: Vec<ObjectKey> = objects.iter().map(ObjectKey::of).collect();
        let before = self
            .produced
            .insert(source, keys.clone())
            .unwrap_or_default();
        for old in before.iter().filter(|k| !keys.contains(k)) {
            if let Some(n) = self.owners.get_mut(old) {
                *n -= 1;
                if *n == 0 {
                    self.owners.remove(old);
                    changes.push(Change::Unmirror(old.clone()));
                }
            }
        }
        for (key, object) in keys.iter().zip(objects) {
            if !before.contains(key) {
                *self.owners.entry(key.clone()).or_default() += 1;
            }
            changes.push(Change::Put(Box::new(object)));
        }
    }
}

/// DeviceClasses and slices taken from the mirror ([`Mirror::picking`]) to change the classes
/// and pick every device again apart from it.
#[derive(Debug)]
pub struct Picking {
    base: u64,
    classes: DeviceClasses,
    slices: BTreeMap<String, Arc<ResourceSlice>>,
}

impl Picking {
    /// A DeviceClass created or changed (compiled here); the problems of its selectors.
    pub fn put_class(&mut self, class: &DeviceClass) -> Vec<ClassProblem> {
        self.classes.put(class).unwrap_or_default()
    }

    /// A DeviceClass deleted.
    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
    }

    /// The DeviceClasses' names.
    pub fn class_names(&self) -> Vec<String> {
        self.classes.names().map(str::to_string).collect()
    }

    /// Whether the classes changed since they were taken.
    pub fn changed(&self) -> bool {
        self.classes.id() != self.base
    }

    /// Picks the class of every slice's devices with the classes as they are now: what
    /// [`Mirror::adopt`] takes. The problems found are in [`Picked::problems`].
    pub fn pick_all(self) -> Picked {
        let mut problems = Vec::new();
        let picks = self
            .slices
            .into_iter()
            .map(|(name, slice)| {
                let picks = self.classes.pick(&slice);
                problems.extend(picks.problems.iter().cloned());
                (name, (slice, picks))
            })
            .collect();
        Picked {
            base: self.base,
            classes: self.classes,
            picks,
            problems,
        }
    }
}

/// DeviceClasses changed apart from the mirror and every slice's devices picked with them.
#[derive(Debug)]
pub struct Picked {
    base: u64,
    classes: DeviceClasses,
    picks: HashMap<String, (Arc<ResourceSlice>, SlicePicks)>,
    pub problems: Vec<ClassProblem>,
}

/// The results of a claim's allocation, none while it is not allocated.
pub fn allocation_results(
    claim: &ResourceClaim,
) -> impl Iterator<Item = &DeviceRequestAllocationResult> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
}

/// The metadata of a mirrored object.
fn mirrored_meta(name: &str, from: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        annotations: Some(BTreeMap::from([(
            MIRRORED_FROM_ANNOTATION.to_string(),
            from.to_string(),
        )])),
        generation: Some(1),
        ..ObjectMeta::default()
    }
}

/// The resource class of an extended resource (`example.com/widget` →
/// `CUSTOM_EXAMPLE_COM_WIDGET`); `None` for Kubernetes' own names.
fn extended_class(resource: &str) -> Option<String> {
    if !resource.contains('/') || resource.starts_with("kubernetes.io/") {
        return None;
    }
    Some(format!("CUSTOM_{}", traits::trait_part(resource)))
}

/// A pod's or claim's consumer: its uid (else a uuid derived from where it lives, for
/// objects read from files), its namespace as the project, and its type.
struct Consumer {
    uuid: String,
    project: String,
    type_: &'static str,
}

impl Consumer {
    fn of(meta: &ObjectMeta, kind: &str, type_: &'static str) -> Consumer {
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let uuid = meta.uid.clone().unwrap_or_else(|| {
            derived_provider_uuid(&format!(
                "{kind}/{namespace}/{}",
                meta.name.as_deref().unwrap_or("")
            ))
        });
        Consumer {
            uuid,
            project: namespace,
            type_,
        }
    }
}

/// A mirrored Allocation, `PREFIX.CONSUMER`, already decided: it is counted as the
/// cluster's fact it is, and a later claim that does not fit is the one refused.
fn mirrored_allocation(
    prefix: &str,
    consumer: &Consumer,
    from: &str,
    spec: AllocationSpec,
) -> Allocation {
    let mut metadata = mirrored_meta(&format!("{prefix}.{}", consumer.uuid), from);
    let annotations = metadata.annotations.get_or_insert_with(Default::default);
    annotations.insert(PROJECT_ANNOTATION.to_string(), consumer.project.clone());
    annotations.insert(
        CONSUMER_TYPE_ANNOTATION.to_string(),
        consumer.type_.to_string(),
    );
    Allocation {
        metadata,
        spec,
        status: Some(AllocationStatus {
            conditions: vec![Condition::new(APPLIED, true, MIRRORED, from)],
            observed_generation: Some(1),
        }),
    }
}

#[cfg(test)]
mod tests;
