//! Whether a claim, or a write of several, stays within its projects' quotas.

use std::fmt;

use kubeplace_core::quota::{Exceeded, LimitKey, Usage, servers_within, within};

use super::{Charge, Governing, Pending, governing};
use crate::store::Store;

/// A claim its project's quota does not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaRefusal {
    pub project: String,
    pub quota: String,
    pub exceeded: Exceeded,
}

impl fmt::Display for QuotaRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "quota of project {:?} ({}) exceeded: {}",
            self.project, self.quota, self.exceeded
        )
    }
}

/// What these projects' counted claims hold together.
pub fn used_by(store: &Store, projects: &[String]) -> Usage {
    let mut usage = Usage::default();
    for project in projects {
        usage.add(&store.charges().usage(project));
    }
    usage
}

/// What a governed group of projects uses now: the store's counted claims and the pending
/// ones.
fn group_usage(store: &Store, pending: &Pending, g: &Governing) -> Usage {
    let mut usage = used_by(store, &g.projects);
    for p in g
        .projects
        .iter()
        .filter_map(|project| pending.usage(project))
    {
        usage.add(p);
    }
    usage
}

/// Whether the claim named `claim`, charging `new` (none: not charged), stays within its
/// project's quota beside the claims the store counts and those `pending` (which leave
/// the claim out). `versions` are what the claim may charge now: the store's version,
/// and the one on its way when the ledger holds one (the API server may yet fail to store
/// it). The claim's own charge is replaced, not added to, and only growth is judged: growth
/// from the least of its versions, so a version that never lands cannot open room.
pub fn check_claim(
    store: &Store,
    pending: &Pending,
    claim: &str,
    versions: &[Option<&Charge>],
    new: Option<&Charge>,
) -> Result<(), QuotaRefusal> {
    let Some(new) = new else { return Ok(()) };
    let Some(g) = governing(store, &new.project) else {
        return Ok(());
    };
    // The group without this claim, and whether its consumer is charged there anyway.
    let mut base = Usage::default();
    let mut consumer_elsewhere = false;
    for project in &g.projects {
        let (usage, elsewhere) = store.charges().usage_without(project, claim, &new.consumer);
        base.add(&usage);
        consumer_elsewhere |= elsewhere || pending.charges_consumer(project, &new.consumer);
        if let Some(p) = pending.usage(project) {
            base.add(p);
        }
    }
    let in_group: Vec<Option<&Charge>> = versions
        .iter()
        .map(|v| v.filter(|c| g.projects.contains(&c.project)))
        .collect();
    let mut before = base.clone();
    if !in_group.is_empty() && in_group.iter().all(Option::is_some) {
        let least = |class: &str| {
            in_group
                .iter()
                .map(|v| v.map_or(0, |c| c.resources.get(class).copied().unwrap_or(0)))
                .min()
                .unwrap_or(0)
        };
        let classes: std::collections::BTreeSet<&String> = in_group
            .iter()
            .flatten()
            .flat_map(|c| c.resources.keys())
            .collect();
        for class in classes {
            *before.resources.entry(class.clone()).or_insert(0) += least(class);
        }
        if !consumer_elsewhere
            && in_group
                .iter()
                .flatten()
                .all(|c| c.consumer == new.consumer)
        {
            before.servers += 1;
        }
    }
    let mut after = base;
    after.add(&Usage {
        resources: new.resources.clone(),
        servers: i64::from(!consumer_elsewhere),
    });
    within(&g.limits, &before, &after).map_err(|exceeded| QuotaRefusal {
        project: new.project.clone(),
        quota: g.quota.clone(),
        exceeded,
    })
}

/// Whether a write of several claims, taking the store from `before` to `after`, keeps
/// every project it charges within its quota: each governed group is judged on the whole
/// write, so a move that hands a consumer's holding to a `MIGRATION` consumer charges
/// only what grows. Where `before` already shows the write (its writer's own store), what
/// it grew from is unknown: the state it leaves must be within every limit.
pub fn check_write<'c>(
    before: &Store,
    after: &Store,
    shown: bool,
    pending: &Pending,
    claims: impl IntoIterator<Item = &'c str>,
) -> Result<(), QuotaRefusal> {
    let mut projects: Vec<String> = Vec::new();
    for claim in claims {
        for store in [before, after] {
            if let Some(c) = store.charges().of_claim(claim)
                && !projects.contains(&c.project)
            {
                projects.push(c.project.clone());
            }
        }
    }
    let mut judged: Vec<String> = Vec::new();
    for project in projects {
        let Some(g) = governing(after, &project) else {
            continue;
        };
        if judged.contains(&g.quota) {
            continue;
        }
        judged.push(g.quota.clone());
        let will = group_usage(after, pending, &g);
        let was = if shown {
            Usage::default()
        } else {
            group_usage(before, pending, &g)
        };
        within(&g.limits, &was, &will).map_err(|exceeded| QuotaRefusal {
            project: project.clone(),
            quota: g.quota.clone(),
            exceeded,
        })?;
    }
    Ok(())
}

/// How many more servers charging `each` a project may create under its quota, and the
/// limit that stops the next; none when no quota limits it.
pub fn headroom_within(
    store: &Store,
    project: &str,
    each: &Usage,
) -> Option<(i64, LimitKey, String)> {
    let g = governing(store, project)?;
    let used = used_by(store, &g.projects);
    servers_within(&g.limits, &used, each).map(|(n, key)| (n, key, g.quota))
}
