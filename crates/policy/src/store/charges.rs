//! What each project's counted claims hold: the store keeps it beside the provider index,
//! changed in the same step as the index's count of a claim, so the two always agree.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kubeplace_api::{
    Allocation, CONSUMER_TYPE_ANNOTATION, PROJECT_ANNOTATION, ProjectQuota, UNKNOWN_PROJECT,
    allocation_server,
};
use kubeplace_core::quota::Usage;

/// The consumer type of a move's source side, which holds what the consumer leaves.
const MIGRATION: &str = "MIGRATION";

/// A claim's charge: the project it counts against, its consumer, and its amounts per class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub project: String,
    pub consumer: String,
    pub resources: BTreeMap<String, i64>,
}

/// The charge of an Allocation, if it is charged: a Server's to its namespace, any other to
/// its consumer's project annotation. Not charged: `MIGRATION` consumers, and claims with
/// no project (none given, or Placement's unknown-project placeholder).
pub fn charge_of(a: &Allocation) -> Option<Charge> {
    let annotation = |key: &str| {
        a.metadata
            .annotations
            .as_ref()
            .and_then(|m| m.get(key))
            .map(String::as_str)
    };
    if annotation(CONSUMER_TYPE_ANNOTATION) == Some(MIGRATION) {
        return None;
    }
    let project = match allocation_server(a) {
        Some(server) => server.namespace,
        None => annotation(PROJECT_ANNOTATION)
            .filter(|p| !p.is_empty() && *p != UNKNOWN_PROJECT)?
            .to_string(),
    };
    let mut resources = BTreeMap::new();
    for pa in &a.spec.allocations {
        for (class, amount) in &pa.resources {
            *resources.entry(class.clone()).or_insert(0) += amount.max(&0);
        }
    }
    Some(Charge {
        project,
        consumer: a.spec.consumer.clone(),
        resources,
    })
}

/// The projects a ProjectQuota governs: its namespace's, and its `spec.projectId`.
pub fn quota_projects(q: &ProjectQuota) -> Vec<String> {
    let namespace = q.metadata.namespace.clone().unwrap_or_default();
    let mut projects = vec![namespace.clone()];
    if let Some(id) = q.spec.project_id.as_ref().filter(|id| **id != namespace) {
        projects.push(id.clone());
    }
    projects
}

/// The charges of the claims the index counts, by claim and by project.
#[derive(Debug, Clone, Default)]
pub struct Charges {
    by_claim: HashMap<String, Charge>,
    by_project: HashMap<String, ProjectCharges>,
}

#[derive(Debug, Clone, Default)]
struct ProjectCharges {
    resources: BTreeMap<String, i64>,
    /// Consumers charged, with how many claims each.
    consumers: HashMap<String, u32>,
}

impl Charges {
    /// Sets a claim's charge (none: it is not counted, or not charged).
    pub fn set(&mut self, claim: &str, charge: Option<Charge>) {
        if let Some(old) = self.by_claim.remove(claim) {
            let project = self.by_project.entry(old.project.clone()).or_default();
            for (class, n) in &old.resources {
                if let Some(total) = project.resources.get_mut(class) {
                    *total -= n;
                    if *total == 0 {
                        project.resources.remove(class);
                    }
                }
            }
            if let Some(count) = project.consumers.get_mut(&old.consumer) {
                *count -= 1;
                if *count == 0 {
                    project.consumers.remove(&old.consumer);
                }
            }
            if project.consumers.is_empty() && project.resources.is_empty() {
                self.by_project.remove(&old.project);
            }
        }
        if let Some(new) = charge {
            let project = self.by_project.entry(new.project.clone()).or_default();
            for (class, n) in &new.resources {
                *project.resources.entry(class.clone()).or_insert(0) += n;
            }
            *project.consumers.entry(new.consumer.clone()).or_insert(0) += 1;
            self.by_claim.insert(claim.to_string(), new);
        }
    }

    /// A counted claim's charge.
    pub fn of_claim(&self, claim: &str) -> Option<&Charge> {
        self.by_claim.get(claim)
    }

    /// What a project's counted claims hold; `servers` counts its consumers.
    pub fn usage(&self, project: &str) -> Usage {
        self.by_project
            .get(project)
            .map(|p| Usage {
                resources: p.resources.clone(),
                servers: p.consumers.len() as i64,
            })
            .unwrap_or_default()
    }

    /// [`Charges::usage`] leaving out one claim, and whether its consumer is charged to the
    /// project by another.
    pub fn usage_without(&self, project: &str, claim: &str, consumer: &str) -> (Usage, bool) {
        let mut usage = self.usage(project);
        let mut others = self
            .by_project
            .get(project)
            .and_then(|p| p.consumers.get(consumer))
            .copied()
            .unwrap_or(0);
        if let Some(own) = self.by_claim.get(claim).filter(|c| c.project == project) {
            for (class, n) in &own.resources {
                *usage.resources.entry(class.clone()).or_insert(0) -= n;
            }
            let own_consumer = self
                .by_project
                .get(project)
                .and_then(|p| p.consumers.get(&own.consumer))
                .copied()
                .unwrap_or(0);
            if own_consumer == 1 {
                usage.servers -= 1;
            }
            if own.consumer == consumer {
                others = others.saturating_sub(1);
            }
        }
        (usage, others > 0)
    }

    /// Whether a consumer is charged to a project by a counted claim.
    pub fn charges_consumer(&self, project: &str, consumer: &str) -> bool {
        self.by_project
            .get(project)
            .is_some_and(|p| p.consumers.contains_key(consumer))
    }

    /// The projects with counted claims.
    pub fn projects(&self) -> impl Iterator<Item = &str> {
        self.by_project.keys().map(String::as_str)
    }
}

/// What claims decided a moment ago, that the store does not count yet, add to projects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pending {
    usage: BTreeMap<String, Usage>,
    consumers: BTreeSet<(String, String)>,
}

impl Pending {
    /// Adds a pending claim's charge beyond what the store counts for it.
    pub fn add(&mut self, counted: &Charges, claim: &str, charge: &Charge) {
        let already = counted
            .of_claim(claim)
            .filter(|c| c.project == charge.project);
        let usage = self.usage.entry(charge.project.clone()).or_default();
        for (class, n) in &charge.resources {
            let was = already.and_then(|c| c.resources.get(class)).unwrap_or(&0);
            // A claim that shrinks frees nothing until the store shows it.
            *usage.resources.entry(class.clone()).or_insert(0) += (n - was).max(0);
        }
        if !counted.charges_consumer(&charge.project, &charge.consumer)
            && self
                .consumers
                .insert((charge.project.clone(), charge.consumer.clone()))
        {
            usage.servers += 1;
        }
    }

    /// Adds what claims decided together (one write) charged before their decision, beyond
    /// what the store charges for them now: until the API server has the write, each
    /// project counts the most of before and after for them, whole.
    pub fn add_held_before(&mut self, counted: &Charges, claims: &[&str], before: &[&Charge]) {
        let mut held: BTreeMap<(&str, &str), i64> = BTreeMap::new();
        for charge in before {
            for (class, n) in &charge.resources {
                *held.entry((&charge.project, class)).or_insert(0) += n;
            }
        }
        for claim in claims {
            if let Some(shown) = counted.of_claim(claim) {
                for (class, n) in &shown.resources {
                    if let Some(at) = held.get_mut(&(shown.project.as_str(), class.as_str())) {
                        *at -= n;
                    }
                }
            }
        }
        for ((project, class), n) in held {
            let usage = self.usage.entry(project.to_string()).or_default();
            *usage.resources.entry(class.to_string()).or_insert(0) += n.max(0);
        }
        for charge in before {
            if !counted.charges_consumer(&charge.project, &charge.consumer)
                && self
                    .consumers
                    .insert((charge.project.clone(), charge.consumer.clone()))
            {
                self.usage
                    .entry(charge.project.clone())
                    .or_default()
                    .servers += 1;
            }
        }
    }

    /// What pending claims add to a project.
    pub fn usage(&self, project: &str) -> Option<&Usage> {
        self.usage.get(project)
    }

    /// Whether a pending claim charges this consumer to this project.
    pub fn charges_consumer(&self, project: &str, consumer: &str) -> bool {
        self.consumers
            .contains(&(project.to_string(), consumer.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn charge(project: &str, consumer: &str, vcpu: i64) -> Charge {
        Charge {
            project: project.into(),
            consumer: consumer.into(),
            resources: BTreeMap::from([("VCPU".to_string(), vcpu)]),
        }
    }

    #[test]
    fn usage_follows_claims_set_replaced_and_removed() {
        let mut c = Charges::default();
        c.set("a", Some(charge("shop", "c1", 2)));
        c.set("b", Some(charge("shop", "c2", 3)));
        assert_eq!(c.usage("shop").resources["VCPU"], 5);
        assert_eq!(c.usage("shop").servers, 2);
        c.set("a", Some(charge("lab", "c1", 4)));
        assert_eq!(c.usage("shop").resources["VCPU"], 3);
        assert_eq!(c.usage("lab").servers, 1);
        c.set("b", None);
        assert_eq!(c.usage("shop"), Usage::default());
        assert_eq!(c.projects().collect::<Vec<_>>(), ["lab"]);
    }

    #[test]
    fn pending_adds_only_what_the_store_does_not_count() {
        let mut counted = Charges::default();
        counted.set("a", Some(charge("shop", "c1", 2)));
        let mut p = Pending::default();
        p.add(&counted, "a", &charge("shop", "c1", 5));
        p.add(&counted, "b", &charge("shop", "c2", 1));
        p.add(&counted, "b2", &charge("shop", "c2", 1));
        let u = p.usage("shop").unwrap();
        assert_eq!((u.resources["VCPU"], u.servers), (3 + 1 + 1, 1));
    }
}
