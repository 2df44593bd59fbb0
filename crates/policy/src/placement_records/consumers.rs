//! A consumer's attributes that Placement keeps beside its allocations: project, user,
//! consumer type and generation. Over a cluster they are annotations on the consumer's
//! Allocation objects, so every replica and every restart reads the same.

use kubeplace_api::Allocation;

/// Placement's project for consumers it did not learn one for (its
/// `incomplete_consumer_project_id` default); the same zero uuid serves as the user.
pub const UNKNOWN_PROJECT: &str = "00000000-0000-0000-0000-000000000000";

/// The type Placement shows for a consumer written without one (before 1.38).
pub const UNKNOWN_CONSUMER_TYPE: &str = "unknown";

/// The annotations that keep a consumer's attributes on its Allocation objects.
pub const PROJECT_ANNOTATION: &str = "placement.kubeplace.io/project-id";
/// See [`PROJECT_ANNOTATION`].
pub const USER_ANNOTATION: &str = "placement.kubeplace.io/user-id";
/// See [`PROJECT_ANNOTATION`].
pub const CONSUMER_TYPE_ANNOTATION: &str = "placement.kubeplace.io/consumer-type";
/// The consumer's generation, moved by every write of its allocations through the API
/// (an Allocation's `metadata.generation` moves only when its spec changes).
pub const CONSUMER_GENERATION_ANNOTATION: &str = "placement.kubeplace.io/consumer-generation";

/// A consumer's attributes Placement keeps beside its allocations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumer {
    pub project_id: String,
    pub user_id: String,
    pub consumer_type: String,
    pub generation: u64,
}

/// A consumer's attributes from its Allocation objects: the annotations of the first that
/// has them, and `generation`.
pub(crate) fn consumer_of(objects: &[Allocation], generation: u64) -> Consumer {
    let annotation = |key: &str| {
        objects.iter().find_map(|a| {
            a.metadata
                .annotations
                .as_ref()
                .and_then(|m| m.get(key))
                .cloned()
        })
    };
    Consumer {
        project_id: annotation(PROJECT_ANNOTATION).unwrap_or_else(|| UNKNOWN_PROJECT.to_string()),
        user_id: annotation(USER_ANNOTATION).unwrap_or_else(|| UNKNOWN_PROJECT.to_string()),
        consumer_type: annotation(CONSUMER_TYPE_ANNOTATION)
            .unwrap_or_else(|| "INSTANCE".to_string()),
        generation,
    }
}

/// A consumer's attributes from its Allocation objects over a cluster: its generation is
/// theirs (summed, for a consumer with several): the one the API wrote, else
/// `metadata.generation` (an Allocation made with kubectl); none without objects.
pub(crate) fn consumer_from_objects(objects: &[Allocation]) -> Option<Consumer> {
    if objects.is_empty() {
        return None;
    }
    let generation = objects
        .iter()
        .map(|a| {
            a.metadata
                .annotations
                .as_ref()
                .and_then(|m| m.get(CONSUMER_GENERATION_ANNOTATION))
                .and_then(|g| g.parse::<u64>().ok())
                .unwrap_or_else(|| a.metadata.generation.unwrap_or(1).max(0) as u64)
        })
        .sum();
    Some(consumer_of(objects, generation))
}
