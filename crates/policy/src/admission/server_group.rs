//! ServerGroup admission: Nova's rules for a group's policy and its `max_server_per_host`.

use super::Review;
use kubeplace_api::{ServerGroup, ServerGroupPolicy};

pub(super) fn review(group: &ServerGroup, old: Option<&ServerGroup>, review: &mut Review) {
    let spec = &group.spec;
    if let Some(n) = spec.max_server_per_host {
        if spec.policy != ServerGroupPolicy::AntiAffinity {
            review.problem(format!(
                "spec.maxServerPerHost is set with policy {}; it applies to anti-affinity only (Nova's max_server_per_host rule)",
                spec.policy.as_str()
            ));
        } else if n < 1 {
            review.problem(format!(
                "spec.maxServerPerHost is {n}; it must be at least 1"
            ));
        }
    }
    if let Some(old) = old
        && old.spec != group.spec
    {
        review.problem(
            "spec cannot change: a server group's policy and rules are fixed when it is created, as in Nova; create a new group",
        );
    }
}
