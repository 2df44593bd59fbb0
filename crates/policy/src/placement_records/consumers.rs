//! A consumer's attributes that Placement keeps beside its allocations: project, user,
//! consumer type and generation. Over a cluster they are annotations on the consumer's
//! Allocation objects, so every replica and every restart reads the same.

use kubeplace_api::Allocation;

/// The type Placement shows for a consumer written without one (before 1.38).
pub const UNKNOWN_CONSUMER_TYPE: &str = "unknown";

pub use kubeplace_api::{
    CONSUMER_GENERATION_ANNOTATION, CONSUMER_TYPE_ANNOTATION, PROJECT_ANNOTATION, UNKNOWN_PROJECT,
    USER_ANNOTATION,
};

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
