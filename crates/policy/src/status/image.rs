//! Image status: the traits it requires of hosts, and which flavors can boot it.

use kubeplace_api::{Condition, Image, ImageFlavorStatus, ImageStatus, Object};
use kubeplace_core::placement::request::TraitConflict;

use super::{World, capped};
use crate::translate::{required_traits, server_request};
use kubeplace_api::Kind;

pub(super) fn status(i: &Image, world: &World<'_>, generation: Option<i64>) -> ImageStatus {
    let traits = required_traits(i);
    let mut flavors = Vec::new();
    let mut conflicts = Vec::new();
    let mut any_candidates = false;
    for object in world.store.list(Kind::Flavor) {
        let Object::Flavor(f) = object else { continue };
        let name = object.name().to_string();
        match server_request(f, i) {
            Err(TraitConflict(t)) => {
                conflicts.push(format!("{name} forbids {t}"));
                flavors.push(ImageFlavorStatus {
                    flavor: name,
                    candidate_count: 0,
                    trait_conflict: Some(t),
                });
            }
            Ok(request) => {
                let count = world
                    .placement(&request)
                    .as_ref()
                    .as_ref()
                    .map_or(0, |p| p.count) as i64;
                any_candidates |= count > 0;
                flavors.push(ImageFlavorStatus {
                    flavor: name,
                    candidate_count: count,
                    trait_conflict: None,
                });
            }
        }
    }
    let flavor_count = flavors.len();
    let schedulable = if any_candidates {
        Condition::new("Schedulable", true, "Candidates", "")
    } else if flavor_count > 0 && conflicts.len() == flavor_count {
        Condition::new(
            "Schedulable",
            false,
            "TraitConflict",
            format!(
                "every flavor forbids a trait the image requires: {}",
                conflicts.join("; ")
            ),
        )
    } else if flavor_count == 0 {
        Condition::new(
            "Schedulable",
            false,
            "NoFlavors",
            "no flavor exists to boot the image with",
        )
    } else {
        Condition::new(
            "Schedulable",
            false,
            "NoCandidates",
            "no flavor has allocation candidates with the image's traits",
        )
    };
    ImageStatus {
        required_traits: traits,
        flavors: capped(flavors),
        conditions: vec![Condition::new("Valid", true, "Admitted", ""), schedulable],
        observed_generation: generation,
    }
}
