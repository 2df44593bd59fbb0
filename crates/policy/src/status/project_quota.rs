//! ProjectQuota and DefaultProjectQuota status: usage against each limit.

use std::collections::BTreeMap;

use kubeplace_api::{
    Condition, DefaultProjectQuota, DefaultProjectQuotaStatus, ProjectQuota, ProjectQuotaStatus,
    QuotaUsage,
};
use kubeplace_core::quota::{Limits, UNLIMITED};

use super::World;
use crate::quota::{governing, project_quota, quota_projects};

fn valid(spec: &BTreeMap<String, i64>) -> Condition {
    let problems = Limits::problems(spec);
    if problems.is_empty() {
        Condition::new("Valid", true, "Admitted", "")
    } else {
        let message = problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        Condition::new("Valid", false, "InvalidLimits", message)
    }
}

pub(super) fn status(
    q: &ProjectQuota,
    world: &World<'_>,
    generation: Option<i64>,
) -> ProjectQuotaStatus {
    let store = world.store;
    let projects = quota_projects(q);
    let namespace = projects[0].clone();
    let mut status = ProjectQuotaStatus {
        project_id: projects.last().cloned(),
        observed_generation: generation,
        ..Default::default()
    };
    let mut condition = valid(&q.spec.limits);
    // The quota that governs its namespace: this one, unless another got there first.
    let governs = project_quota(store, &namespace).is_some_and(|g| {
        (&g.metadata.namespace, &g.metadata.name) == (&q.metadata.namespace, &q.metadata.name)
    });
    if !governs {
        condition = Condition::new(
            "Valid",
            false,
            "Duplicate",
            format!("another ProjectQuota governs project {namespace:?}; this one limits nothing"),
        );
    }
    if let Some(g) = governs.then(|| governing(store, &namespace)).flatten() {
        let used = crate::quota::used_by(store, &g.projects);
        status.usage = g
            .limits
            .0
            .iter()
            .map(|(key, limit)| {
                (
                    key.to_string(),
                    QuotaUsage {
                        limit: *limit,
                        used: used.of(key),
                    },
                )
            })
            .collect();
        let summary: Vec<String> = status
            .usage
            .iter()
            .map(|(key, u)| match u.limit {
                UNLIMITED => format!("{key} {} (no limit)", u.used),
                limit => format!("{key} {}/{limit}", u.used),
            })
            .collect();
        status.summary = (!summary.is_empty()).then(|| summary.join(", "));
    }
    status.conditions = vec![condition];
    status
}

pub(super) fn status_default(
    d: &DefaultProjectQuota,
    world: &World<'_>,
    generation: Option<i64>,
) -> DefaultProjectQuotaStatus {
    let store = world.store;
    let condition = if d.metadata.name.as_deref() == Some(kubeplace_api::DEFAULT_PROJECT_QUOTA_NAME)
    {
        valid(&d.spec.limits)
    } else {
        Condition::new(
            "Valid",
            false,
            "NotTheDefault",
            "only the DefaultProjectQuota named \"default\" limits anything",
        )
    };
    DefaultProjectQuotaStatus {
        projects: store
            .charges()
            .projects()
            .filter(|p| project_quota(store, p).is_none())
            .count() as i64,
        conditions: vec![condition],
        observed_generation: generation,
    }
}
