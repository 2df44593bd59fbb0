//! The import's plan against what is there (the cluster, or the file written before): what
//! would contradict it (a provider's uuid held by another object, a consumer's allocations
//! in other Allocation objects, objects admission would refuse), each desired object's
//! step (create, replace, or the same already), the custom names to register, and the
//! order the writes go in (a tree level at a time, then the Allocations).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kubeplace_api::provider_name::{NAME_ANNOTATION, placement_name};
use kubeplace_api::{Kind, Object, ObjectMeta, ResourceProvider};
use serde_json::{Value, json};

use super::desired::Desired;
use crate::admission::admit_and_store_in_order;
use crate::placement_records::CustomNameSet;
use crate::placement_records::{
    CONSUMER_TYPE_ANNOTATION, PROJECT_ANNOTATION, Registry, RegistryChange, USER_ANNOTATION,
};
use crate::store::{Change, ObjectKey, Store};

/// What a write does to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Create,
    Replace,
    Same,
}

impl Step {
    /// The verb a dry run says, none for an object already as it should be.
    pub fn verb(self) -> Option<&'static str> {
        match self {
            Step::Create => Some("create"),
            Step::Replace => Some("replace"),
            Step::Same => None,
        }
    }
}

/// What is there that a desired object cannot be written over.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Conflict {
    #[error("{object}: the cluster's ResourceProvider {owner:?} already has its uuid")]
    UuidTaken { object: String, owner: String },
    #[error(
        "{object}: the cluster's ResourceProvider {name:?} has uuid {uuid}; delete or rename it first"
    )]
    OtherUuid {
        object: String,
        name: String,
        uuid: String,
    },
    #[error(
        "{object}: the cluster holds its allocations in other Allocation objects ({}); delete them first",
        .others.join(", ")
    )]
    AllocationsElsewhere { object: String, others: Vec<String> },
    #[error("{object}: {message}")]
    Admission { object: String, message: String },
}

/// The uuid a provider object goes by: its spec's, or the one derived from its name.
fn provider_uuid(rp: &ResourceProvider) -> String {
    rp.spec.uuid.clone().unwrap_or_else(|| {
        kubeplace_core::placement::derived_provider_uuid(rp.metadata.name.as_deref().unwrap_or(""))
    })
}

/// An object as messages name it: a provider by its Placement name and uuid, an Allocation
/// by its consumer.
pub fn describe(o: &Object) -> String {
    match o {
        Object::ResourceProvider(rp) => format!(
            "provider {:?} ({})",
            placement_name(rp),
            rp.spec.uuid.as_deref().unwrap_or_default()
        ),
        Object::Allocation(a) => format!("consumer {}", a.spec.consumer),
        o => format!(
            "{} {}",
            o.kind().as_str(),
            o.meta().name.as_deref().unwrap_or("")
        ),
    }
}

/// Why the desired objects cannot be written among `among` (what they land beside: the
/// cluster's objects; nothing, for a file replaced whole): contradictions first, and when
/// there are none, what admission refuses over `among` with the desired objects written
/// in order (what import replaces is admitted again as an update).
pub fn refusals(desired: &Desired, among: &HashMap<ObjectKey, Object>) -> Vec<Conflict> {
    let refusals = contradictions(desired, among);
    if !refusals.is_empty() {
        return refusals;
    }
    admission_refusals(among.values().cloned().collect(), desired)
}

/// Objects there that say otherwise than Placement on something import does not
/// overwrite: a provider's uuid, a consumer whose allocations live in another object.
pub fn contradictions(desired: &Desired, existing: &HashMap<ObjectKey, Object>) -> Vec<Conflict> {
    let mut refusals = Vec::new();
    let mut uuid_owner: HashMap<String, &str> = HashMap::new();
    let mut consumer_objects: HashMap<&str, Vec<&str>> = HashMap::new();
    for o in existing.values() {
        match o {
            Object::ResourceProvider(rp) => {
                let uuid = provider_uuid(rp);
                uuid_owner.insert(uuid, rp.metadata.name.as_deref().unwrap_or_default());
            }
            Object::Allocation(a) => consumer_objects
                .entry(a.spec.consumer.as_str())
                .or_default()
                .push(a.metadata.name.as_deref().unwrap_or_default()),
            _ => {}
        }
    }
    for o in &desired.objects {
        let name = o.meta().name.as_deref().unwrap_or_default();
        match o {
            Object::ResourceProvider(rp) => {
                let uuid = rp.spec.uuid.clone().unwrap_or_default();
                if let Some(owner) = uuid_owner.get(&uuid).filter(|n| **n != name) {
                    refusals.push(Conflict::UuidTaken {
                        object: describe(o),
                        owner: owner.to_string(),
                    });
                }
                if let Some(Object::ResourceProvider(old)) = existing.get(&ObjectKey::of(o)) {
                    let old_uuid = provider_uuid(old);
                    if old_uuid != uuid {
                        refusals.push(Conflict::OtherUuid {
                            object: describe(o),
                            name: name.to_string(),
                            uuid: old_uuid,
                        });
                    }
                }
            }
            Object::Allocation(a) => {
                let others: Vec<String> = consumer_objects
                    .get(a.spec.consumer.as_str())
                    .into_iter()
                    .flatten()
                    .filter(|n| **n != name)
                    .map(|n| n.to_string())
                    .collect();
                if !others.is_empty() {
                    refusals.push(Conflict::AllocationsElsewhere {
                        object: describe(o),
                        others,
                    });
                }
            }
            _ => {}
        }
    }
    refusals
}

/// Objects admission would refuse, over `base` with the desired objects written in order.
fn admission_refusals(base: Vec<Object>, desired: &Desired) -> Vec<Conflict> {
    let mut store = Store::default();
    store.apply_changes(base.into_iter().map(|o| Change::Put(Box::new(o))));
    let mut refusals = Vec::new();
    for o in &desired.objects {
        let verdict = admit_and_store_in_order(&mut store, o.clone());
        if !verdict.allowed {
            refusals.push(Conflict::Admission {
                object: describe(o),
                message: verdict.message,
            });
        }
    }
    refusals
}

/// The managed part of an object: what import writes and compares.
fn managed(o: &Object) -> Value {
    match o {
        Object::ResourceProvider(rp) => {
            let mut spec = rp.spec.clone();
            spec.traits.sort();
            spec.aggregates.sort();
            json!({
                "name": placement_name(rp),
                "spec": serde_json::to_value(&spec).unwrap_or_default(),
            })
        }
        Object::Allocation(a) => {
            let ann = |k: &str| {
                a.metadata
                    .annotations
                    .as_ref()
                    .and_then(|m| m.get(k))
                    .cloned()
            };
            let mut spec = a.spec.clone();
            spec.allocations.sort_by(|x, y| x.provider.cmp(&y.provider));
            json!({
                "spec": serde_json::to_value(&spec).unwrap_or_default(),
                "project": ann(PROJECT_ANNOTATION),
                "user": ann(USER_ANNOTATION),
                "type": ann(CONSUMER_TYPE_ANNOTATION),
            })
        }
        _ => Value::Null,
    }
}

/// The custom names already registered where the objects go (the cluster's registry).
#[derive(Debug, Clone, Default)]
pub struct Registered {
    pub traits: CustomNameSet,
    pub classes: CustomNameSet,
}

/// What an import writes: each desired object's step, the custom names to register, and
/// the objects there that Placement does not have.
#[derive(Debug, Clone)]
pub struct Plan {
    /// One per desired object, in its order.
    pub steps: Vec<Step>,
    pub names: Vec<RegistryChange>,
    /// Objects there no desired object is, by key.
    pub others: Vec<ObjectKey>,
}

/// The plan of an import of `desired` over `existing`; `registered` the custom names where
/// the objects go keeps, `None` where nothing keeps names (a file).
pub fn plan(
    desired: &Desired,
    existing: &HashMap<ObjectKey, Object>,
    registered: Option<&Registered>,
) -> Plan {
    let steps = desired
        .objects
        .iter()
        .map(|o| match existing.get(&ObjectKey::of(o)) {
            None => Step::Create,
            Some(old) if managed(old) == managed(o) => Step::Same,
            Some(_) => Step::Replace,
        })
        .collect();
    let names = match registered {
        None => Vec::new(),
        Some(registered) => desired
            .custom_traits
            .iter()
            .filter(|t| !registered.traits.contains(*t))
            .map(|t| RegistryChange::added(Registry::Traits, t))
            .chain(
                desired
                    .custom_classes
                    .iter()
                    .filter(|c| !registered.classes.contains(*c))
                    .map(|c| RegistryChange::added(Registry::ResourceClasses, c)),
            )
            .collect(),
    };
    let wanted: BTreeSet<ObjectKey> = desired.objects.iter().map(ObjectKey::of).collect();
    let mut others: Vec<ObjectKey> = existing
        .keys()
        .filter(|k| !wanted.contains(*k))
        .cloned()
        .collect();
    others.sort();
    Plan {
        steps,
        names,
        others,
    }
}

impl Plan {
    /// The counts of the plan, for people.
    pub fn summary(&self, desired: &Desired) -> String {
        let count = |kind: Kind, step: Step| {
            desired
                .objects
                .iter()
                .zip(&self.steps)
                .filter(|(o, s)| o.kind() == kind && **s == step)
                .count()
        };
        format!(
            "providers: {} to create, {} to replace, {} unchanged; consumers: {} to create, {} to replace, {} unchanged; custom names to register: {}",
            count(Kind::ResourceProvider, Step::Create),
            count(Kind::ResourceProvider, Step::Replace),
            count(Kind::ResourceProvider, Step::Same),
            count(Kind::Allocation, Step::Create),
            count(Kind::Allocation, Step::Replace),
            count(Kind::Allocation, Step::Same),
            self.names.len(),
        )
    }

    /// The objects to write, by level: providers a tree level at a time (parents exist
    /// before their children), then the Allocations. A replace keeps the object's other
    /// metadata there and carries its resourceVersion.
    pub fn writes(
        &self,
        desired: &Desired,
        existing: &HashMap<ObjectKey, Object>,
    ) -> BTreeMap<Level, Vec<Object>> {
        // Depth of each provider object, from its parent chain within the desired objects.
        let mut depth: HashMap<&str, usize> = HashMap::new();
        let mut levels: BTreeMap<Level, Vec<Object>> = BTreeMap::new();
        for (o, s) in desired.objects.iter().zip(&self.steps) {
            let level = match o {
                Object::ResourceProvider(rp) => {
                    let d = rp
                        .spec
                        .parent
                        .as_deref()
                        .and_then(|p| depth.get(p))
                        .map_or(0, |d| d + 1);
                    depth.insert(o.meta().name.as_deref().unwrap_or_default(), d);
                    Level::Providers(d)
                }
                _ => Level::Allocations,
            };
            if *s == Step::Same {
                continue;
            }
            let mut o = o.clone();
            if let Some(old) = existing.get(&ObjectKey::of(&o)) {
                merge_metadata(&mut o, old.meta());
            }
            levels.entry(level).or_default().push(o);
        }
        levels
    }
}

/// Where a write goes in the import's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Providers this deep in their trees (roots 0).
    Providers(usize),
    /// After every provider.
    Allocations,
}

/// `o`'s metadata for a replace of `old`: the annotations import manages from `o`, the
/// others and the labels from `old`, and `old`'s resourceVersion.
fn merge_metadata(o: &mut Object, old: &ObjectMeta) {
    let managed = [
        NAME_ANNOTATION,
        PROJECT_ANNOTATION,
        USER_ANNOTATION,
        CONSUMER_TYPE_ANNOTATION,
    ];
    let new_annotations = o.meta().annotations.clone().unwrap_or_default();
    let mut annotations = old.annotations.clone().unwrap_or_default();
    annotations.retain(|k, _| !managed.contains(&k.as_str()));
    annotations.extend(new_annotations);
    let meta = o.meta_mut();
    meta.annotations = (!annotations.is_empty()).then_some(annotations);
    meta.labels = old.labels.clone();
    meta.resource_version = old.resource_version.clone();
}

/// The custom names no desired object uses (a manifest cannot carry them).
pub fn unused_names(desired: &Desired) -> Vec<&str> {
    let mut used = BTreeSet::new();
    for o in &desired.objects {
        match o {
            Object::ResourceProvider(rp) => {
                used.extend(rp.spec.inventories.keys().map(String::as_str));
                used.extend(rp.spec.traits.iter().map(String::as_str));
            }
            Object::Allocation(a) => {
                for pa in &a.spec.allocations {
                    used.extend(pa.resources.keys().map(String::as_str));
                }
            }
            _ => {}
        }
    }
    desired
        .custom_classes
        .iter()
        .chain(&desired.custom_traits)
        .map(String::as_str)
        .filter(|n| !used.contains(n))
        .collect()
}
