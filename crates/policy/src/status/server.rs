//! Server status: the allocation it holds, and its service profile's rendered metadata.

use kubeplace_api::{
    Allocation, CandidateAllocationStatus, Condition, Kind, Object, Server, ServerRef,
    ServerStatus, allocation_name, consumer_uuid,
};
use kubeplace_core::placement::rebuild::missing_traits;
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_core::templates::{ServerContext, render};

use super::World;
use crate::scheduling::{allocation_matches, flavor_and_image, host, plan};
use crate::store::Store;
use crate::translate::required_traits;

pub(super) fn status(server: &Server, world: &World<'_>, generation: Option<i64>) -> ServerStatus {
    let store = world.store;
    let name = allocation_name(server);
    let held = match store.get_cluster(Kind::Allocation, &name) {
        Some(Object::Allocation(a)) => Some(a),
        _ => None,
    };
    let mut status = ServerStatus {
        consumer: Some(consumer_uuid(server)),
        observed_generation: generation,
        ..Default::default()
    };
    let scheduled = match (held, allocation_matches(store, server)) {
        (Some(a), Some(true)) => {
            status.allocation_name = Some(name.clone());
            status.allocation = a
                .spec
                .allocations
                .iter()
                .map(|pa| CandidateAllocationStatus {
                    provider: pa.provider.clone(),
                    resources: pa.resources.clone(),
                })
                .collect();
            status.host = host(store.index(), &a.spec.allocations);
            status.numa = a.spec.numa.clone();
            held_condition(store, server, a, &name)
        }
        _ => waiting_condition(store, server),
    };
    let rendered = store.chosen_profile(server).map(|profile| {
        status.service_profile = Some(profile.clone());
        render_metadata(store, server, &profile, &mut status)
    });
    status.conditions = std::iter::once(scheduled).chain(rendered).collect();
    status
}

/// Scheduled, for a server holding an allocation that matches its flavor. The image may have
/// changed under the allocation without the webhook's pre-flight check (an Image edited to
/// require more, or a write that bypassed admission): the server keeps its allocation, and
/// the condition says so.
fn held_condition(store: &Store, server: &Server, held: &Allocation, name: &str) -> Condition {
    // A provider gone under a held allocation (a mirrored Node deleted, a provider removed):
    // the server keeps its allocation, as Nova keeps an instance on a host that went away,
    // until it is deleted or resized; the condition says so.
    let gone: Vec<&str> = held
        .spec
        .allocations
        .iter()
        .map(|pa| pa.provider.as_str())
        .filter(|p| !store.index().contains(p))
        .collect();
    if !gone.is_empty() {
        return Condition::new(
            "Scheduled",
            false,
            "ProviderGone",
            format!(
                "provider {} of Allocation {name} no longer exists; the server keeps that allocation until it is deleted or resized",
                gone.join(", ")
            ),
        );
    }
    let missing = match store.get_cluster(Kind::Image, &server.spec.image) {
        Some(Object::Image(image)) => {
            let required = required_traits(image);
            missing_traits(
                store.index(),
                held.spec.allocations.iter().map(|pa| pa.provider.as_str()),
                required.iter().map(String::as_str),
            )
        }
        _ => Vec::new(),
    };
    if missing.is_empty() {
        Condition::new(
            "Scheduled",
            true,
            "Scheduled",
            format!("holds Allocation {name}"),
        )
    } else {
        Condition::new(
            "Scheduled",
            false,
            "RebuildRejected",
            format!(
                "image {:?} requires {} which the providers of Allocation {name} lack; the server keeps that allocation",
                server.spec.image,
                missing.join(", ")
            ),
        )
    }
}

/// Scheduled=False, for a server without a matching allocation: why it cannot be placed, or
/// that it waits for the scheduler.
fn waiting_condition(store: &Store, server: &Server) -> Condition {
    // Weighing orders the candidates and never rules one out: whether the server can be
    // placed, and why not, is the same under any weighers.
    let placed = |_| plan(store, &Weighers::default(), server).map(|_| ());
    match flavor_and_image(store, server).and_then(placed) {
        Err(u) => Condition::new("Scheduled", false, u.reason, u.message),
        Ok(()) => Condition::new(
            "Scheduled",
            false,
            "Pending",
            "a candidate is available; waiting for the scheduler",
        ),
    }
}

/// Renders the service profile's metadata template for the server into `status`, and the
/// MetadataRendered condition saying how that went.
fn render_metadata(
    store: &Store,
    server: &Server,
    profile: &str,
    status: &mut ServerStatus,
) -> Condition {
    let Some(Object::ServiceProfile(sp)) = store.get_cluster(Kind::ServiceProfile, profile) else {
        return Condition::new(
            "MetadataRendered",
            false,
            "NoServiceProfile",
            format!("ServiceProfile {profile:?} does not exist"),
        );
    };
    let who = ServerRef::of(server);
    let context = ServerContext {
        name: who.name,
        namespace: who.namespace,
        flavor: server.spec.flavor.clone(),
        image: server.spec.image.clone(),
        meta: server.spec.flavor_meta.clone(),
        allocation: status
            .allocation
            .iter()
            .map(|a| (a.provider.clone(), a.resources.clone()))
            .collect(),
    };
    match render(&sp.spec.metadata, &context) {
        Ok(doc) => {
            status.rendered_metadata = Some(doc);
            Condition::new(
                "MetadataRendered",
                true,
                "Rendered",
                format!("from ServiceProfile {profile}"),
            )
        }
        Err(e) => Condition::new(
            "MetadataRendered",
            false,
            "RenderFailed",
            format!("ServiceProfile {profile}: {e}"),
        ),
    }
}
