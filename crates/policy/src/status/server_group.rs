//! ServerGroup status: how many servers name it, and the hosts of those placed.

use kubeplace_api::{Condition, ServerGroup, ServerGroupHost, ServerGroupStatus};

use super::World;

/// Hosts a status lists at most.
pub const HOSTS_MAX: usize = 20;

pub(super) fn status(
    g: &ServerGroup,
    world: &World<'_>,
    generation: Option<i64>,
) -> ServerGroupStatus {
    let namespace = g.metadata.namespace.as_deref().unwrap_or("default");
    let name = g.metadata.name.as_deref().unwrap_or("");
    let (count, per_host) =
        crate::scheduling::server_groups::member_hosts(world.store, namespace, name, None);
    ServerGroupStatus {
        member_count: count,
        hosts: per_host
            .into_iter()
            .take(HOSTS_MAX)
            .map(|(host, members)| ServerGroupHost { host, members })
            .collect(),
        conditions: vec![Condition::new("Valid", true, "Admitted", "")],
        observed_generation: generation,
    }
}
