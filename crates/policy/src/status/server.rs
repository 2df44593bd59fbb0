//! Server status: the allocation it holds, and its service profile's rendered metadata.

use kubeplace_api::{CandidateAllocationStatus, Condition, Object, Server, ServerStatus};
use kubeplace_core::placement::rebuild::missing_traits;
use kubeplace_core::templates::{ServerContext, render};

use kubeplace_api::{allocation_name, consumer_uuid};

use super::World;
use crate::scheduling::{allocation_matches, flavor_and_image, plan};
use crate::translate::chosen_profile;
use kubeplace_api::Kind;

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
            // The host is the tree the server runs in, not a sharing provider it borrows from.
            let index = store.index();
            let shares = |p: &str| {
                index.effective(p).is_some_and(|(_, t)| {
                    t.contains(kubeplace_core::placement::trait_name::MISC_SHARES_VIA_AGGREGATE)
                })
            };
            status.host = a
                .spec
                .allocations
                .iter()
                .filter(|pa| !shares(&pa.provider))
                .chain(a.spec.allocations.iter())
                .find_map(|pa| index.root_of(&pa.provider).ok());
            // The image may have changed under the allocation without the webhook's
            // pre-flight check (an Image edited to require more, or a write that bypassed
            // admission): the server keeps its allocation, and the condition says so.
            let missing = match store.get_cluster(Kind::Image, &server.spec.image) {
                Some(Object::Image(image)) => {
                    let required = crate::translate::required_traits(image);
                    missing_traits(
                        index,
                        a.spec.allocations.iter().map(|pa| pa.provider.as_str()),
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
        _ => match flavor_and_image(store, server).and_then(|_| plan(store, server).map(|_| ())) {
            Err(u) => Condition::new("Scheduled", false, u.reason, u.message),
            Ok(()) => Condition::new(
                "Scheduled",
                false,
                "Pending",
                "a candidate is available; waiting for the scheduler",
            ),
        },
    };
    let rendered = match chosen_profile(store, server) {
        None => None,
        Some(profile) => Some({
            status.service_profile = Some(profile.clone());
            match store.get_cluster(Kind::ServiceProfile, &profile) {
                Some(Object::ServiceProfile(sp)) => {
                    let who = kubeplace_api::ServerRef::of(server);
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
                _ => Condition::new(
                    "MetadataRendered",
                    false,
                    "NoServiceProfile",
                    format!("ServiceProfile {profile:?} does not exist"),
                ),
            }
        }),
    };
    status.conditions = std::iter::once(scheduled).chain(rendered).collect();
    status
}
