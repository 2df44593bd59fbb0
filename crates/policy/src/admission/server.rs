//! Server admission: the flavor and image exist and make a guest Nova would boot (its NUMA,
//! pinning and page size specs agree), flavor metadata uses only the keys its service
//! profile allows, and a rebuild (a new image) fits the providers the server holds.

use super::Review;
use kubeplace_api::allocation_name;
use kubeplace_api::{Object, Server};
use kubeplace_core::numa::guest_topology;
use kubeplace_core::placement::rebuild::missing_traits;

use crate::store::Store;
use crate::translate::required_traits;
use kubeplace_api::Kind;

pub(super) fn review(server: &Server, old: Option<&Server>, store: &Store, review: &mut Review) {
    if let Some(old) = old
        && old.spec.group != server.spec.group
    {
        review.problem(format!(
            "spec.group cannot change (from {} to {}): a server joins its group when it is created, as in Nova; create a new server in the group",
            old.spec.group.as_deref().map_or("none".to_string(), |g| format!("{g:?}")),
            server.spec.group.as_deref().map_or("none".to_string(), |g| format!("{g:?}")),
        ));
    }
    let flavor = match store.get_cluster(Kind::Flavor, &server.spec.flavor) {
        Some(Object::Flavor(f)) => Some(f),
        _ => {
            review.problem(format!(
                "spec.flavor: Flavor {:?} does not exist",
                server.spec.flavor
            ));
            None
        }
    };
    let image = match store.get_cluster(Kind::Image, &server.spec.image) {
        Some(Object::Image(i)) => Some(i),
        _ => {
            review.problem(format!(
                "spec.image: Image {:?} does not exist",
                server.spec.image
            ));
            None
        }
    };
    if let (Some(f), Some(p)) = (flavor, &server.spec.service_profile)
        && !f.spec.service_profiles.contains(p)
    {
        review.problem(format!(
            "spec.serviceProfile {p:?} is not one of flavor {:?}'s service profiles ({})",
            server.spec.flavor,
            if f.spec.service_profiles.is_empty() {
                "it has none".to_string()
            } else {
                f.spec.service_profiles.join(", ")
            }
        ));
    }
    if flavor.is_some() {
        let profile = store.chosen_profile(server);
        let allowed: Vec<String> = match profile
            .as_deref()
            .map(|p| (p, store.get_cluster(Kind::ServiceProfile, p)))
        {
            Some((_, Some(Object::ServiceProfile(sp)))) => {
                if !sp.spec.enabled {
                    review.problem(format!(
                        "spec.serviceProfile: ServiceProfile {:?} is disabled",
                        profile.as_deref().unwrap_or("")
                    ));
                }
                sp.spec.allowed_meta_keys.clone()
            }
            Some((p, _)) => {
                review.problem(format!(
                    "spec.serviceProfile: ServiceProfile {p:?} does not exist"
                ));
                Vec::new()
            }
            None => Vec::new(),
        };
        for key in server.spec.flavor_meta.keys() {
            if !allowed.contains(key) {
                let accepted = if allowed.is_empty() {
                    match &profile {
                        Some(p) => format!("ServiceProfile {p:?} allows no keys"),
                        None => format!(
                            "flavor {:?} has no service profile, so no key is allowed",
                            server.spec.flavor
                        ),
                    }
                } else {
                    format!("allowed: {}", allowed.join(", "))
                };
                review.problem(format!(
                    "spec.flavorMeta[{key:?}] is not allowed; {accepted}"
                ));
            }
        }
    }
    // The guest the flavor and image make, as Nova builds it at boot, resize and rebuild:
    // a pair Nova refuses is refused here, with Nova's reason. Judged when either is chosen,
    // so a server admitted before stays admissible.
    let chosen_now = old
        .is_none_or(|o| o.spec.flavor != server.spec.flavor || o.spec.image != server.spec.image);
    if let (true, Some(f), Some(i)) = (chosen_now, flavor, image) {
        if let Err(e) = guest_topology(crate::translate::guest_source(f, &i.spec.properties)) {
            review.problem(format!(
                "flavor {:?} with image {:?} makes no guest Nova would boot: {e} (Nova: {}); change the flavor's extra specs or the image's properties, or choose others",
                server.spec.flavor,
                server.spec.image,
                e.nova_name()
            ));
        }
    }
    // A rebuild keeps the allocation: the new image must fit the providers already held.
    if let (Some(old), Some(image)) = (old, image)
        && old.spec.image != server.spec.image
        && let Some(held) = store.index().allocations(&allocation_name(server))
    {
        let providers: Vec<&str> = held.items.iter().map(|(p, _, _)| p.as_str()).collect();
        let required = required_traits(image);
        let missing = missing_traits(
            store.index(),
            providers.iter().copied(),
            required.iter().map(String::as_str),
        );
        if !missing.is_empty() {
            let mut hosts = providers.clone();
            hosts.sort_unstable();
            hosts.dedup();
            review.problem(format!(
                "rebuild rejected: image {:?} requires {} which the server's providers ({}) lack; rebuild with another image or resize instead",
                server.spec.image,
                missing.join(", "),
                hosts.join(", ")
            ));
        }
    }
}
