//! Flavor status: the placement request derived from it, and where it fits.

use std::collections::BTreeMap;

use kubeplace_api::{
    CandidateAllocationStatus, CandidateStatus, Condition, Flavor, FlavorStatus, HeadroomStatus,
    PlacementRequestStatus, RequestGroupStatus,
};
use kubeplace_core::placement::ProviderIndex;
use kubeplace_core::placement::candidates::{BudgetExhausted, counted_candidates};
use kubeplace_core::placement::explain::explain;
use kubeplace_core::placement::microversion::Microversion;
use kubeplace_core::placement::query::parse_candidates_query;
use kubeplace_core::placement::request::Request;

use super::{World, capped};
use crate::scheduling::plan::EXPLAIN_LINES;
use crate::translate::check_flavor_extra_specs;
use crate::translate::flavor_request;

/// How many candidates a status lists (the count covers them all).
pub(crate) const STATUS_CANDIDATES: usize = 10;

/// A request as it is shown in status.
pub(crate) fn request_status(r: &Request) -> PlacementRequestStatus {
    PlacementRequestStatus {
        query: r.to_query(),
        groups: r
            .groups
            .iter()
            .map(|(suffix, g)| RequestGroupStatus {
                suffix: suffix.clone(),
                resources: g.resources.clone(),
                required: g.required.iter().cloned().collect(),
                forbidden: g.forbidden.iter().cloned().collect(),
            })
            .collect(),
        group_policy: r.group_policy.clone(),
    }
}

/// Where a request fits: the candidate count and the first few candidates, or why the
/// request is not one Placement would answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// Every candidate, or, when `exhausted` is set, those counted before the search ran
    /// out of budget (at least this many exist).
    pub count: usize,
    pub first: Vec<CandidateStatus>,
    /// Set when the search ran out of budget before counting them all.
    pub exhausted: Option<BudgetExhausted>,
    /// With no candidate, why: explain's few largest losses of provider trees.
    pub why: Vec<String>,
}

/// Runs a request against the index as Placement's latest microversion would.
pub fn place(index: &ProviderIndex, request: &Request) -> Result<Placement, String> {
    let query =
        parse_candidates_query(&request.to_query(), Microversion::LATEST).map_err(|e| e.detail)?;
    // Counting stops at the search budget (the status then says "at least"); the first
    // candidates are found long before.
    let (count, set) = counted_candidates(index, &query, STATUS_CANDIDATES);
    let exhausted = set.exhausted;
    let first = set
        .candidates
        .iter()
        .map(|c| {
            let mut per_provider: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
            for (p, class, amount) in set.named(index, c) {
                per_provider.entry(p).or_default().insert(class, amount);
            }
            CandidateStatus {
                allocations: per_provider
                    .into_iter()
                    .map(|(provider, resources)| CandidateAllocationStatus {
                        provider,
                        resources,
                    })
                    .collect(),
            }
        })
        .collect();
    // Explained only when nothing fits: one more bounded search, where it helps most.
    let why = if count == 0 && exhausted.is_none() {
        explain(index, &query).summary(EXPLAIN_LINES)
    } else {
        Vec::new()
    };
    Ok(Placement {
        count,
        first,
        exhausted,
        why,
    })
}

/// The Schedulable condition for a placement outcome.
pub fn schedulable(outcome: &Result<Placement, String>) -> Condition {
    match outcome {
        Ok(Placement {
            count,
            exhausted: Some(e),
            ..
        }) => {
            if *count > 0 {
                Condition::new(
                    "Schedulable",
                    true,
                    "CandidatesBeyondBudget",
                    format!("at least {count} allocation candidates; counting stopped: {e}"),
                )
            } else {
                Condition::new("Schedulable", false, "SearchBudgetExhausted", e.to_string())
            }
        }
        Ok(p) if p.count > 0 => Condition::new(
            "Schedulable",
            true,
            "Candidates",
            format!("{} allocation candidates", p.count),
        ),
        Ok(p) if p.why.is_empty() => Condition::new(
            "Schedulable",
            false,
            "NoCandidates",
            "no provider tree can satisfy the request",
        ),
        Ok(p) => Condition::new(
            "Schedulable",
            false,
            "NoCandidates",
            format!(
                "no provider tree can satisfy the request: {}",
                p.why.join("; ")
            ),
        ),
        Err(e) => Condition::new("Schedulable", false, "InvalidRequest", e.clone()),
    }
}

/// The Valid condition: the extra specs checked again against the definitions now in the
/// store, since adding or deleting an ExtraSpecDefinition can change the verdict.
fn valid_condition(f: &Flavor, world: &World<'_>) -> Condition {
    let mode = match crate::translate::validation_mode(f) {
        Ok(m) => m,
        Err(e) => return Condition::new("Valid", false, "InvalidValidationMode", e),
    };
    let report = check_flavor_extra_specs(f, mode, &world.custom_definitions);
    if report.problems.is_empty() {
        Condition::new(
            "Valid",
            true,
            "ExtraSpecsValid",
            capped(report.warnings).join("; "),
        )
    } else {
        let problems: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
        Condition::new(
            "Valid",
            false,
            "ExtraSpecsInvalid",
            capped(problems).join("; "),
        )
    }
}

pub(super) fn status(f: &Flavor, world: &World<'_>, generation: Option<i64>) -> FlavorStatus {
    let request = flavor_request(f);
    let outcome = world.placement(&request);
    let conditions = vec![valid_condition(f, world), schedulable(&outcome)];
    let (candidate_count, candidates) = match outcome.as_ref() {
        Ok(p) => (Some(p.count as i64), p.first.clone()),
        Err(_) => (Some(0), Vec::new()),
    };
    FlavorStatus {
        request: Some(request_status(&request)),
        candidate_count,
        candidates,
        headroom: f
            .metadata
            .name
            .as_deref()
            .and_then(|name| world.headroom.of(name, world.store))
            .map(|counted| HeadroomStatus {
                within_quota: crate::scheduling::headroom::quota_rooms(
                    world.store,
                    f,
                    Some(counted.servers),
                ),
                ..counted.clone()
            }),
        conditions,
        observed_generation: generation,
    }
}

#[cfg(test)]
mod tests {
    use crate::scheduling::{HeadroomFigures, record_headroom};
    use crate::status::{World, desired_status};
    use crate::store::Store;
    use kubeplace_api::manifest::parse_stream;
    use kubeplace_api::{Kind, Status};
    use kubeplace_core::placement::weighers::Weighers;

    #[test]
    fn the_status_shows_the_headroom_recorded_in_the_figures() {
        let mut store = Store::default();
        let yaml = "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: cn1}\nspec:\n  inventories:\n    VCPU: {total: 8}\n    MEMORY_MB: {total: 65536}\n---\napiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: f2}\nspec: {vcpus: 2, memoryMb: 512}\n";
        for doc in parse_stream("t.yaml", yaml).unwrap() {
            store.put(doc.object().unwrap().unwrap());
        }
        let flavor = store.get_cluster(Kind::Flavor, "f2").unwrap().clone();
        let headroom =
            |figures: &HeadroomFigures| match desired_status(&flavor, &World::new(&store, figures))
            {
                Status::Flavor(st) => st.headroom,
                other => panic!("not a flavor status: {other:?}"),
            };
        let mut figures = HeadroomFigures::default();
        assert_eq!(headroom(&figures), None, "nothing counted yet");
        record_headroom(&mut figures, &store, &Weighers::default(), 100);
        assert_eq!(headroom(&figures).map(|h| h.servers), Some(4));
        figures.turn_off();
        assert_eq!(headroom(&figures), None);
    }

    /// Flavors (and an Image over them) that ask Placement the same question share one
    /// search in a World, and each still gets the answer a search of its own gives.
    #[test]
    fn flavors_asking_the_same_share_one_search() {
        let mut store = Store::default();
        let mut yaml = String::from(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: cn1}\nspec:\n  inventories:\n    VCPU: {total: 8}\n    MEMORY_MB: {total: 65536}\n  traits: [HW_CPU_X86_AVX2]\n---\n\
             apiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata: {name: plain}\nspec: {properties: {}}\n---\n",
        );
        // Two of 2 VCPU (one named after a family), one of 4, one of 2 requiring AVX2, one
        // of 16 that fits nowhere.
        for (name, vcpus, extra) in [
            ("a.small", 2, ""),
            ("b.small", 2, ""),
            ("a.large", 4, ""),
            (
                "avx.small",
                2,
                ", extraSpecs: {\"trait:HW_CPU_X86_AVX2\": required}",
            ),
            ("huge", 16, ""),
        ] {
            yaml += &format!(
                "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: {name}}}\nspec: {{vcpus: {vcpus}, memoryMb: 512{extra}}}\n---\n"
            );
        }
        for doc in parse_stream("t.yaml", &yaml).unwrap() {
            store.put(doc.object().unwrap().unwrap());
        }
        let figures = HeadroomFigures::default();
        let world = World::new(&store, &figures);
        let mut counts = Vec::new();
        for f in ["a.small", "b.small", "a.large", "avx.small", "huge"] {
            let object = store.get_cluster(Kind::Flavor, f).unwrap();
            let Status::Flavor(st) = desired_status(object, &world) else {
                panic!("not a flavor status")
            };
            // The answer a World of its own gives.
            let Status::Flavor(alone) = desired_status(object, &World::new(&store, &figures))
            else {
                panic!("not a flavor status")
            };
            assert_eq!(st, alone, "{f}");
            counts.push(st.candidate_count.unwrap());
        }
        assert_eq!(counts, [1, 1, 1, 1, 0]);
        // Four distinct requests: the two 2-VCPU flavors without traits asked once.
        assert_eq!(world.placements.lock().unwrap().len(), 4);
        // The image requires nothing: its flavors' requests are theirs, already answered.
        let image = store.get_cluster(Kind::Image, "plain").unwrap();
        let Status::Image(st) = desired_status(image, &world) else {
            panic!("not an image status")
        };
        assert_eq!(st.flavors.len(), 5);
        assert_eq!(world.placements.lock().unwrap().len(), 4);
    }
}
