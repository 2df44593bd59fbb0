//! What the store counts beside the objects, changed in the same step as each object: which
//! Allocations the index counts against their providers and projects (a refused or deleted
//! claim does not count), the provider generations Allocations record, the Allocations of
//! each consumer and the ProjectQuotas of each project.

use std::sync::Arc;

use kubeplace_api::{Kind, Object, ResourceProvider};

use super::{ObjectKey, Store, charges};
use crate::translate::{consumer_allocations, is_refused, provider_record};

impl Store {
    /// Follows an object's replacement in what is kept beside the objects: what providers
    /// and Allocations say of generations, the keys by consumer, the quotas by project.
    pub(super) fn note_records(&mut self, old: Option<&Object>, new: Option<&Object>) {
        fn provider(o: Option<&Object>) -> Option<&ResourceProvider> {
            match o {
                Some(Object::ResourceProvider(rp)) => Some(rp),
                _ => None,
            }
        }
        if provider(old).is_some() || provider(new).is_some() {
            self.note_own_generation(provider(old), provider(new));
            return;
        }
        let quota = |o: Option<&Object>| matches!(o, Some(Object::ProjectQuota(_)));
        if quota(old) || quota(new) {
            let quotas = Arc::make_mut(&mut self.quotas);
            if let Some(o @ Object::ProjectQuota(q)) = old {
                for project in charges::quota_projects(q) {
                    if let Some(keys) = quotas.get_mut(&project) {
                        keys.remove(&ObjectKey::of(o));
                        if keys.is_empty() {
                            quotas.remove(&project);
                        }
                    }
                }
            }
            if let Some(o @ Object::ProjectQuota(q)) = new {
                for project in charges::quota_projects(q) {
                    quotas.entry(project).or_default().insert(ObjectKey::of(o));
                }
            }
            return;
        }
        let allocation = |o: Option<&Object>| matches!(o, Some(Object::Allocation(_)));
        if !(allocation(old) || allocation(new)) {
            return;
        }
        self.generations_epoch += 1;
        Arc::make_mut(&mut self.generation_records).replace(old, new);
        let consumers = Arc::make_mut(&mut self.by_consumer);
        if let Some(o @ Object::Allocation(a)) = old
            && let Some(keys) = consumers.get_mut(&a.spec.consumer)
        {
            keys.remove(&ObjectKey::of(o));
            if keys.is_empty() {
                consumers.remove(&a.spec.consumer);
            }
        }
        if let Some(o @ Object::Allocation(a)) = new {
            consumers
                .entry(a.spec.consumer.clone())
                .or_default()
                .insert(ObjectKey::of(o));
        }
    }

    pub(super) fn index_object(&mut self, object: &Object) {
        match object {
            Object::ResourceProvider(rp) => self.index_mut().upsert_provider(provider_record(rp)),
            Object::Allocation(a) => {
                let name = object.name();
                // A refusal holds for the generation it was made for.
                if self
                    .refused
                    .get(name)
                    .is_some_and(|(generation, _)| *generation != a.metadata.generation)
                {
                    self.refused.remove(name);
                }
                if is_refused(a) || self.refused.contains_key(name) {
                    self.stop_counting(name);
                } else {
                    self.count(name, a);
                }
            }
            _ => {}
        }
    }

    /// Stops counting an Allocation against its providers (while its claim is decided).
    pub(crate) fn uncount(&mut self, name: &str) {
        self.stop_counting(name);
    }

    /// Counts a claim against its providers and its project.
    pub(super) fn count(&mut self, name: &str, a: &kubeplace_api::Allocation) {
        self.index_mut()
            .upsert_allocations(name, consumer_allocations(a));
        Arc::make_mut(&mut self.charges).set(name, charges::charge_of(a));
    }

    /// Stops counting a claim against its providers and its project.
    pub(super) fn stop_counting(&mut self, name: &str) {
        self.index_mut().remove_allocations(name);
        if self.charges.of_claim(name).is_some() {
            Arc::make_mut(&mut self.charges).set(name, None);
        }
    }

    /// What each project's counted claims hold.
    pub fn charges(&self) -> &charges::Charges {
        &self.charges
    }

    /// The ProjectQuotas that govern a project, in key order.
    pub fn quotas_of(&self, project: &str) -> impl Iterator<Item = &ObjectKey> {
        self.quotas.get(project).into_iter().flatten()
    }

    /// Counts an Allocation against its providers again.
    pub(crate) fn recount(&mut self, name: &str) {
        let shared = self.get_shared(&ObjectKey::cluster(Kind::Allocation, name));
        if let Some(Object::Allocation(a)) = shared.as_deref() {
            self.count(name, a);
        }
    }

    /// Records that an Allocation's claim was refused, and why; it stops counting.
    pub(crate) fn refuse(&mut self, name: &str, why: String) {
        if let Some(Object::Allocation(a)) = self.get_cluster(Kind::Allocation, name) {
            let generation = a.metadata.generation;
            self.refused.insert(name.to_string(), (generation, why));
            self.stop_counting(name);
        }
    }

    /// Whether the Allocation with this uid was deleted (among the last few thousand).
    pub fn claim_deleted(&self, uid: &str) -> bool {
        self.deleted_claims.iter().rev().any(|u| u == uid)
    }

    /// Why an Allocation's claim was refused, when it was and its status does not say so yet.
    pub fn refusal(&self, name: &str) -> Option<&str> {
        self.refused.get(name).map(|(_, why)| why.as_str())
    }
}
