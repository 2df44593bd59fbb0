//! Reconcile: pure functions from the store to each object's desired status.
//!
//! The controllers and `kubeplace apply` both call [`desired_status`] over a [`World`];
//! neither computes a status any other way.

mod aggregate;
mod allocation;
mod extra_spec_definition;
mod flavor;
mod image;
mod project_quota;
mod provider_config;
mod reach;
mod resource_provider;
mod server;
mod server_group;
mod service_profile;

pub use reach::Reach;

use crate::scheduling::headroom::HeadroomFigures;
use crate::store::{ObjectKey, Store};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use kubeplace_api::{Kind, Object, Status};
use kubeplace_core::extra_specs::Registry;
use kubeplace_core::provider_config::MergeResult;
use kubeplace_core::runs::{in_runs_streamed, threads_for};

/// Longest list a status carries; the full count is reported beside it.
pub(crate) const STATUS_LIST_CAP: usize = 50;

/// What every reconcile step reads: the store, the provider config merge over it, and the
/// Flavors' headroom as last counted.
pub struct World<'a> {
    pub store: &'a Store,
    pub merge: &'a MergeResult,
    /// Each Flavor's headroom as last counted, which its status shows.
    pub headroom: &'a HeadroomFigures,
    /// The ExtraSpecDefinitions in the store, compiled.
    pub custom_definitions: Registry,
    /// Where each request asked so far fits, by its query: Flavors and Images that ask
    /// Placement the same question (flavors of one size, an image that requires nothing)
    /// share one search, since the answer depends on the query and the index alone.
    placements: Mutex<HashMap<String, Arc<Result<flavor::Placement, String>>>>,
}

impl<'a> World<'a> {
    /// Computes the shared views once for a round of reconciles over `store`, with the
    /// headroom figures the Flavors' statuses show.
    pub fn new(store: &'a Store, headroom: &'a HeadroomFigures) -> World<'a> {
        World {
            store,
            merge: store.config_merge(),
            headroom,
            custom_definitions: store.custom_definitions().0,
            placements: Mutex::default(),
        }
    }

    /// Where a request fits ([`flavor::place`] over the store's index), searched once per
    /// distinct query however many objects ask it.
    pub(crate) fn placement(
        &self,
        request: &kubeplace_core::placement::request::Request,
    ) -> Arc<Result<flavor::Placement, String>> {
        let query = request.to_query();
        let known = |w: &Self| {
            w.placements
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&query)
                .cloned()
        };
        if let Some(known) = known(self) {
            return known;
        }
        // Searched without the lock: two threads asking at once both search, and the
        // answers are equal.
        let found = Arc::new(flavor::place(self.store.index(), request));
        self.placements
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(query)
            .or_insert(found)
            .clone()
    }
}

/// The status an object should have, given the world.
pub fn desired_status(object: &Object, world: &World<'_>) -> Status {
    let generation = object.meta().generation;
    match object {
        Object::ResourceProvider(rp) => {
            Status::ResourceProvider(resource_provider::status(rp, world, generation))
        }
        Object::Allocation(a) => Status::Allocation(allocation::status(a, world, generation)),
        Object::ProviderConfig(pc) => {
            Status::ProviderConfig(provider_config::status(pc, world, generation))
        }
        Object::ExtraSpecDefinition(d) => {
            Status::ExtraSpecDefinition(extra_spec_definition::status(d, generation))
        }
        Object::Flavor(f) => Status::Flavor(flavor::status(f, world, generation)),
        Object::Image(i) => Status::Image(image::status(i, world, generation)),
        Object::Server(s) => Status::Server(server::status(s, world, generation)),
        Object::ServiceProfile(sp) => {
            Status::ServiceProfile(service_profile::status(sp, generation))
        }
        Object::Aggregate(a) => Status::Aggregate(aggregate::status(a, world, generation)),
        Object::ServerGroup(g) => Status::ServerGroup(server_group::status(g, world, generation)),
        // What the leader reports while it finishes the write; nothing to compute.
        Object::PlacementWrite(w) => Status::PlacementWrite(w.status.clone().unwrap_or_default()),
        Object::ProjectQuota(q) => {
            Status::ProjectQuota(project_quota::status(q, world, generation))
        }
        Object::DefaultProjectQuota(d) => {
            Status::DefaultProjectQuota(project_quota::status_default(d, world, generation))
        }
    }
}

/// Objects from which [`reconcile_all`] computes statuses on several threads.
pub const STATUSES_APART_FROM: usize = 2_048;

/// Objects a thread takes at a time in [`reconcile_all`].
const STATUS_RUN: usize = 64;

/// Reconciles every object until no status changes (at most `max_rounds` rounds), Flavors
/// showing the `headroom` figures; returns the number of rounds that changed something.
pub fn reconcile_all(store: &mut Store, headroom: &HeadroomFigures, max_rounds: usize) -> usize {
    for round in 0..max_rounds {
        // Claims are decided before any status reads what they take.
        let refused = crate::claims::settle(store);
        let updates: Vec<Vec<(ObjectKey, Status)>> = {
            let world = World::new(store, headroom);
            let objects: Vec<(&ObjectKey, &Arc<Object>)> = store.iter_shared().collect();
            // Each status reads the world only: a large store's are computed on every core,
            // in short runs taken as threads finish, since a Flavor's status costs a thousand
            // providers'. The caller's thread computes too: one worker fewer than the cores.
            let workers = threads_for(objects.len(), STATUSES_APART_FROM).saturating_sub(1);
            let mut updates = Vec::new();
            in_runs_streamed(
                &objects,
                STATUS_RUN,
                workers,
                |run| {
                    run.iter()
                        .filter_map(|(k, o)| {
                            let status = desired_status(o, &world);
                            (!o.has_status(&status)).then(|| ((*k).clone(), status))
                        })
                        .collect::<Vec<_>>()
                },
                |run| {
                    updates.push(run);
                    ControlFlow::Continue(())
                },
            );
            updates
        };
        // Statuses are large: handed over where they were computed, not gathered first.
        let set = store.set_statuses(updates.into_iter().flatten());
        let changed = !set.is_empty();
        let claims_changed = set.contains(&Kind::Allocation);
        // A status reads specs, the index and the claims' refusals, never another object's
        // status (a Flavor reads its own last headroom, which a round keeps as it was): only a
        // claim's verdict (an Allocation's status, which the index counts) or a new refusal
        // can change what another round would compute.
        if !claims_changed && refused.is_empty() {
            return round + usize::from(changed);
        }
    }
    max_rounds
}

/// The first `STATUS_LIST_CAP` items of a list.
pub(crate) fn capped<T: Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    items.into_iter().take(STATUS_LIST_CAP).collect()
}
