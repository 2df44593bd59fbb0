//! ProjectQuota and DefaultProjectQuota admission: limits in Nova's unified-limits names,
//! and one quota per project.

use std::collections::BTreeMap;

use super::Review;
use crate::quota::quota_projects;
use crate::store::Store;
use kubeplace_api::{DEFAULT_PROJECT_QUOTA_NAME, DefaultProjectQuota, Kind, Object, ProjectQuota};
use kubeplace_core::quota::Limits;

/// Placement's bound on a project id.
const PROJECT_ID_MAX: usize = 255;

fn review_limits(limits: &BTreeMap<String, i64>, review: &mut Review) {
    for problem in Limits::problems(limits) {
        review.problem(format!("spec.limits: {problem}"));
    }
}

pub(super) fn review(q: &ProjectQuota, store: &Store, review: &mut Review) {
    review_limits(&q.spec.limits, review);
    if let Some(id) = &q.spec.project_id
        && (id.is_empty() || id.chars().count() > PROJECT_ID_MAX)
    {
        review.problem(format!(
            "spec.projectId {id:?} has {} characters; a project id has 1 to {PROJECT_ID_MAX} (leave it out to govern the namespace's name)",
            id.chars().count()
        ));
    }
    let me = (q.metadata.namespace.as_deref(), q.metadata.name.as_deref());
    let mine = quota_projects(q);
    for other in store.list(Kind::ProjectQuota) {
        let Object::ProjectQuota(other) = other else {
            continue;
        };
        if (
            other.metadata.namespace.as_deref(),
            other.metadata.name.as_deref(),
        ) == me
        {
            continue;
        }
        if let Some(shared) = quota_projects(other).into_iter().find(|p| mine.contains(p)) {
            review.problem(format!(
                "project {shared:?} is governed by ProjectQuota {}/{} already; a project has one quota (change that one, or give this one another spec.projectId)",
                other.metadata.namespace.as_deref().unwrap_or(""),
                other.metadata.name.as_deref().unwrap_or("")
            ));
        }
    }
}

pub(super) fn review_default(d: &DefaultProjectQuota, review: &mut Review) {
    let name = d.metadata.name.as_deref().unwrap_or("");
    if name != DEFAULT_PROJECT_QUOTA_NAME {
        review.problem(format!(
            "metadata.name is {name:?}; the one DefaultProjectQuota is named {DEFAULT_PROJECT_QUOTA_NAME:?}"
        ));
    }
    review_limits(&d.spec.limits, review);
}
