//! Which quota governs a project, and with which limits.

use kubeplace_api::{DEFAULT_PROJECT_QUOTA_NAME, Kind, Object, ProjectQuota};

pub use crate::store::charges::quota_projects;
use kubeplace_core::quota::Limits;

use crate::store::Store;

/// The quota that governs a project: its name for messages, the projects it pools, and
/// its limits (a ProjectQuota's over the default's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Governing {
    /// `ProjectQuota NAMESPACE/NAME` or `DefaultProjectQuota default`.
    pub quota: String,
    /// The projects whose charges count together: a ProjectQuota's namespace and project
    /// id; the one project, under the default.
    pub projects: Vec<String>,
    pub limits: Limits,
}

/// The DefaultProjectQuota's limits, when there is one.
fn default_limits(store: &Store) -> Option<Limits> {
    match store.get_cluster(Kind::DefaultProjectQuota, DEFAULT_PROJECT_QUOTA_NAME) {
        Some(Object::DefaultProjectQuota(d)) => Some(Limits::lenient(&d.spec.limits)),
        _ => None,
    }
}

/// The ProjectQuota governing a project: the first, in namespace and name order, whose
/// namespace or project id names it (admission lets only one govern a project).
pub fn project_quota<'s>(store: &'s Store, project: &str) -> Option<&'s ProjectQuota> {
    store
        .quotas_of(project)
        .find_map(|key| match store.get(key) {
            Some(Object::ProjectQuota(q)) => Some(q),
            _ => None,
        })
}

/// What governs a project; none when no quota does.
pub fn governing(store: &Store, project: &str) -> Option<Governing> {
    let default = default_limits(store);
    match project_quota(store, project) {
        Some(q) => Some(Governing {
            quota: format!(
                "ProjectQuota {}/{}",
                q.metadata.namespace.as_deref().unwrap_or(""),
                q.metadata.name.as_deref().unwrap_or("")
            ),
            projects: quota_projects(q),
            limits: match &default {
                Some(d) => Limits::lenient(&q.spec.limits).over(d),
                None => Limits::lenient(&q.spec.limits),
            },
        }),
        None => default.map(|limits| Governing {
            quota: format!("DefaultProjectQuota {DEFAULT_PROJECT_QUOTA_NAME}"),
            projects: vec![project.to_string()],
            limits,
        }),
    }
}
