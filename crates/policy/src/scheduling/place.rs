//! Placing servers: each chosen Allocation is admitted like any other before it counts.

use kubeplace_api::{Allocation, Object, Server, allocation_name};

use crate::admission::admit_and_store;
use crate::store::Store;

use super::plan::{Weighing, allocation_matches, plan_weighed};
use kubeplace_api::Kind;
use kubeplace_core::placement::weighers::Weighers;

/// Places every server that holds no allocation (or one its flavor no longer matches), one
/// at a time in creation order, each seeing the ones placed before it. Each chosen
/// Allocation is put in the store and returned, for the caller to write. Allocations that
/// admission would refuse (capacity changed under the decision) are skipped; the server is
/// tried again on the next pass. `weighers` says how candidates are weighed.
pub fn schedule_pending(store: &mut Store, weighers: &Weighers) -> Vec<Allocation> {
    let mut servers: Vec<Server> = store
        .list(Kind::Server)
        .filter_map(|o| match o {
            Object::Server(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    servers.sort_by(|a, b| {
        let created = |s: &Server| s.metadata.creation_timestamp.as_ref().map(|t| t.0);
        created(a)
            .cmp(&created(b))
            .then_with(|| allocation_name(a).cmp(&allocation_name(b)))
    });
    let weighing = Weighing::of(store, weighers);
    servers
        .iter()
        .filter_map(|server| place_weighed(store, server, &weighing))
        .collect()
}

/// Whether [`schedule_pending`] would place a server: a waiting one (see [`is_waiting`])
/// that fits somewhere now. Servers that fit nowhere are tried again on every pass, and
/// trying them changes nothing. Each is asked alone, over the store as it is: when none
/// fits so, [`schedule_pending`] places none either, since each server there sees only the
/// placements made before it.
pub fn any_placeable_server(store: &Store, weighers: &Weighers) -> bool {
    let waiting: Vec<&Server> = store
        .list(Kind::Server)
        .filter_map(|o| match o {
            Object::Server(server) if is_waiting(store, server) => Some(server),
            _ => None,
        })
        .collect();
    if waiting.is_empty() {
        return false;
    }
    let weighing = Weighing::of(store, weighers);
    waiting
        .iter()
        .any(|server| plan_weighed(store, server, &weighing).is_ok())
}

/// A server not being deleted that holds no allocation, or one its flavor no longer matches.
pub(crate) fn is_waiting(store: &Store, server: &Server) -> bool {
    server.metadata.deletion_timestamp.is_none() && allocation_matches(store, server) != Some(true)
}

/// Places one server that holds no allocation (or one its flavor no longer matches): the
/// chosen Allocation goes through admission, as any Allocation does, and into the store.
/// Returns it, or `None` when the server needs nothing, fits nowhere, or admission refused.
pub fn place(store: &mut Store, weighers: &Weighers, server: &Server) -> Option<Allocation> {
    let weighing = Weighing::of(store, weighers);
    place_weighed(store, server, &weighing)
}

fn place_weighed(store: &mut Store, server: &Server, weighing: &Weighing) -> Option<Allocation> {
    if !is_waiting(store, server) {
        return None;
    }
    let allocation = plan_weighed(store, server, weighing).ok()?;
    admit_and_store(store, Object::Allocation(allocation.clone()))
        .allowed
        .then_some(allocation)
}
