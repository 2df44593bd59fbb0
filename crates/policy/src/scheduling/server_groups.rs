//! Server groups, with Nova's rules: where a server may go, and which host it prefers,
//! given where the other members of its group already are.
//!
//! - `affinity`: once a member is placed, the others go to its host (the request gets
//!   `in_tree` of that host, so the search itself looks nowhere else);
//! - `anti-affinity`: a host holding `maxServerPerHost` members (1 by default) takes no
//!   more (Nova's `ServerGroupAntiAffinityFilter`, after Placement's candidates);
//! - `soft-affinity` / `soft-anti-affinity`: every host may be used; the one holding most
//!   (fewest) members is preferred over the spread weighing (Nova's soft weighers).

use std::collections::BTreeMap;

use kubeplace_api::{Kind, Object, Server, ServerGroup, ServerGroupPolicy, allocation_name};
use kubeplace_core::placement::ProviderIndex;

use crate::store::{ObjectKey, Store};

/// A server's group as its placement sees it: the policy and where the other members are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Members {
    pub group: String,
    pub policy: ServerGroupPolicy,
    /// Members one host may hold under anti-affinity.
    pub max_per_host: i64,
    /// Placed members other than the server, by host (root provider).
    pub per_host: BTreeMap<String, i64>,
}

/// A group a server names that its namespace does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ServerGroup {group:?} does not exist in namespace {namespace:?}")]
pub struct GroupNotFound {
    pub group: String,
    pub namespace: String,
}

/// The root of the tree a provider of a candidate is in, the sharing providers aside.
pub fn host_of<'a>(
    index: &ProviderIndex,
    providers: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let providers: Vec<&str> = providers.into_iter().collect();
    providers
        .iter()
        .filter(|p| !index.shares_via_aggregate(p))
        .chain(providers.iter())
        .find_map(|p| index.root_of(p).ok())
}

fn group_of<'a>(store: &'a Store, namespace: &str, name: &str) -> Option<&'a ServerGroup> {
    let key = ObjectKey {
        kind: Kind::ServerGroup,
        namespace: namespace.to_string(),
        name: name.to_string(),
    };
    match store.get(&key) {
        Some(Object::ServerGroup(g)) => Some(g),
        _ => None,
    }
}

/// The hosts of a group's placed members, `except` one server, by host.
pub fn member_hosts(
    store: &Store,
    namespace: &str,
    group: &str,
    except: Option<&str>,
) -> (i64, BTreeMap<String, i64>) {
    let mut count = 0;
    let mut per_host = BTreeMap::new();
    for o in store.list(Kind::Server) {
        let Object::Server(s) = o else { continue };
        if s.metadata.namespace.as_deref().unwrap_or("default") != namespace
            || s.spec.group.as_deref() != Some(group)
        {
            continue;
        }
        count += 1;
        if except.is_some() && s.metadata.name.as_deref() == except {
            continue;
        }
        if let Some(Object::Allocation(a)) =
            store.get_cluster(Kind::Allocation, &allocation_name(s))
            && let Some(host) = host_of(
                store.index(),
                a.spec.allocations.iter().map(|pa| pa.provider.as_str()),
            )
        {
            *per_host.entry(host).or_default() += 1;
        }
    }
    (count, per_host)
}

/// The server's group and where its other members are; `None` for a server in no group.
pub fn members(store: &Store, server: &Server) -> Result<Option<Members>, GroupNotFound> {
    let Some(name) = &server.spec.group else {
        return Ok(None);
    };
    let namespace = server.metadata.namespace.as_deref().unwrap_or("default");
    let Some(group) = group_of(store, namespace, name) else {
        return Err(GroupNotFound {
            group: name.clone(),
            namespace: namespace.to_string(),
        });
    };
    let (_, per_host) = member_hosts(store, namespace, name, server.metadata.name.as_deref());
    Ok(Some(Members {
        group: name.clone(),
        policy: group.spec.policy,
        max_per_host: group.spec.max_server_per_host.unwrap_or(1).max(1),
        per_host,
    }))
}

impl Members {
    fn on(&self, host: &str) -> i64 {
        self.per_host.get(host).copied().unwrap_or(0)
    }

    /// The host an affinity group's members are on (the one holding most; by name on a
    /// tie); `None` before the first is placed, and for other policies.
    pub fn affinity_host(&self) -> Option<&str> {
        if self.policy != ServerGroupPolicy::Affinity {
            return None;
        }
        self.per_host
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(h, _)| h.as_str())
    }

    /// Whether the server may go to `host`.
    pub fn allows(&self, host: &str) -> bool {
        match self.policy {
            ServerGroupPolicy::AntiAffinity => self.on(host) < self.max_per_host,
            ServerGroupPolicy::Affinity => self.affinity_host().is_none_or(|h| h == host),
            _ => true,
        }
    }

    /// How much the group prefers `host` (higher first), before the spread weighing.
    pub fn preference(&self, host: &str) -> i64 {
        match self.policy {
            ServerGroupPolicy::SoftAffinity => self.on(host),
            ServerGroupPolicy::SoftAntiAffinity => -self.on(host),
            _ => 0,
        }
    }

    /// The group in words, for messages: "web (anti-affinity, at most 1 per host)".
    pub fn describe(&self) -> String {
        match self.policy {
            ServerGroupPolicy::AntiAffinity => format!(
                "{} ({}, at most {} per host)",
                self.group,
                self.policy.as_str(),
                self.max_per_host
            ),
            p => format!("{} ({})", self.group, p.as_str()),
        }
    }
}
