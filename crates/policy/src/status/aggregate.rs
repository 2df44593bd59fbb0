//! Aggregate status: the hosts (root providers) in it.

use kubeplace_api::{Aggregate, AggregateStatus, Condition};

use super::World;

/// Host names a status lists at most.
pub const HOST_NAMES_MAX: usize = 20;

pub(super) fn status(a: &Aggregate, world: &World<'_>, generation: Option<i64>) -> AggregateStatus {
    let hosts = world.store.index().roots_in_aggregate(&a.spec.uuid);
    AggregateStatus {
        hosts: hosts.len() as i64,
        host_names: hosts.into_iter().take(HOST_NAMES_MAX).collect(),
        conditions: vec![Condition::new("Valid", true, "Admitted", "")],
        observed_generation: generation,
    }
}
