//! The placement request model: request groups of resources and traits, and the
//! translation of a flavor (and an image) into one, as Nova's scheduler does.

use std::collections::{BTreeMap, BTreeSet};

use super::extra_spec_keys::{PlacementKey, parse_placement_key};

/// One request group; the unnumbered group has an empty suffix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestGroup {
    pub resources: BTreeMap<String, i64>,
    pub required: BTreeSet<String>,
    pub forbidden: BTreeSet<String>,
}

/// One `member_of` clause: the tree must be in any of these aggregates, or (`forbidden`)
/// in none of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberOf {
    pub aggregates: BTreeSet<String>,
    pub forbidden: bool,
}

/// A whole request: groups by suffix, the group policy, and what the scheduler's
/// pre-filters add (Nova's request filters): `member_of` clauses on the unnumbered group
/// and traits the root provider must have or lack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub groups: BTreeMap<String, RequestGroup>,
    pub group_policy: Option<String>,
    pub member_of: Vec<MemberOf>,
    pub root_required: BTreeSet<String>,
    pub root_forbidden: BTreeSet<String>,
    /// The uuid of a provider whose tree the unnumbered group must be in (`in_tree`).
    pub in_tree: Option<String>,
}

/// A flavor's sizes and extra specs, as the request is derived from them.
#[derive(Debug, Clone, Default)]
pub struct FlavorShape {
    pub vcpus: i64,
    pub memory_mb: i64,
    pub disk_gb: i64,
    pub ephemeral_gb: i64,
    pub swap_mb: i64,
    pub extra_specs: BTreeMap<String, String>,
}

/// A trait that the flavor forbids and the image requires: the pair cannot be scheduled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trait {0} is forbidden by the flavor and required by the image")]
pub struct TraitConflict(pub String);

impl Request {
    /// The request Nova builds from a flavor: the `resources*:`, `trait*:` and
    /// `group_policy` extra specs, then in the unnumbered group what the flavor's size asks
    /// for and no group names already (any amount, 0 included, in any group): VCPU (PCPU
    /// with `hw:cpu_policy=dedicated`) unless VCPU or PCPU is named, MEMORY_MB, and DISK_GB
    /// (root + ephemeral + swap rounded up to GiB). Malformed placement extra specs are
    /// skipped here; admission rejects them.
    pub fn from_flavor(flavor: &FlavorShape) -> Request {
        let mut request = Request::default();
        let named: BTreeSet<String> = flavor
            .extra_specs
            .iter()
            .filter_map(|(key, value)| match parse_placement_key(key, value) {
                Some(Ok(PlacementKey::Resources { class, .. })) => Some(class),
                _ => None,
            })
            .collect();
        let unnumbered = request.groups.entry(String::new()).or_default();
        let dedicated =
            flavor.extra_specs.get("hw:cpu_policy").map(String::as_str) == Some("dedicated");
        let cpu_class = if dedicated { "PCPU" } else { "VCPU" };
        let disk = flavor.disk_gb + flavor.ephemeral_gb + (flavor.swap_mb + 1023) / 1024;
        let cpus_named = named.contains("VCPU") || named.contains("PCPU");
        for (class, amount, is_named) in [
            (cpu_class, flavor.vcpus, cpus_named),
            ("MEMORY_MB", flavor.memory_mb, named.contains("MEMORY_MB")),
            ("DISK_GB", disk, named.contains("DISK_GB")),
        ] {
            if amount > 0 && !is_named {
                unnumbered.resources.insert(class.to_string(), amount);
            }
        }
        if flavor
            .extra_specs
            .get("hw:cpu_thread_policy")
            .map(String::as_str)
            == Some("isolate")
            && dedicated
        {
            unnumbered
                .forbidden
                .insert("HW_CPU_HYPERTHREADING".to_string());
        }
        for (key, value) in &flavor.extra_specs {
            match parse_placement_key(key, value) {
                Some(Ok(PlacementKey::Resources {
                    group,
                    class,
                    amount,
                })) => {
                    let g = request.groups.entry(group).or_default();
                    if amount == 0 {
                        g.resources.remove(&class);
                    } else {
                        g.resources.insert(class, amount);
                    }
                }
                Some(Ok(PlacementKey::Trait {
                    group,
                    name,
                    required,
                })) => {
                    let g = request.groups.entry(group).or_default();
                    if required {
                        g.required.insert(name);
                    } else {
                        g.forbidden.insert(name);
                    }
                }
                Some(Ok(PlacementKey::GroupPolicy(policy))) => request.group_policy = Some(policy),
                _ => {}
            }
        }
        request
    }

    /// Adds an image's required traits to the unnumbered group (the union of seed 004).
    pub fn with_image_traits<'a>(
        mut self,
        traits: impl IntoIterator<Item = &'a String>,
    ) -> Result<Request, TraitConflict> {
        let unnumbered = self.groups.entry(String::new()).or_default();
        for t in traits {
            if unnumbered.forbidden.contains(t) {
                return Err(TraitConflict(t.clone()));
            }
            unnumbered.required.insert(t.clone());
        }
        Ok(self)
    }

    /// The request as Placement's `GET /allocation_candidates` query string.
    pub fn to_query(&self) -> String {
        let mut parts = Vec::new();
        for (suffix, group) in &self.groups {
            if !group.resources.is_empty() {
                let r: Vec<String> = group
                    .resources
                    .iter()
                    .map(|(c, n)| format!("{c}:{n}"))
                    .collect();
                parts.push(format!("resources{suffix}={}", r.join(",")));
            }
            let traits: Vec<String> = group
                .required
                .iter()
                .cloned()
                .chain(group.forbidden.iter().map(|t| format!("!{t}")))
                .collect();
            if !traits.is_empty() {
                parts.push(format!("required{suffix}={}", traits.join(",")));
            }
        }
        for clause in &self.member_of {
            // An empty `!in:` forbids nothing: it is left out. An empty `in:` would allow
            // nothing; it is written, and the query is refused rather than widened.
            if clause.forbidden && clause.aggregates.is_empty() {
                continue;
            }
            let list: Vec<&str> = clause.aggregates.iter().map(String::as_str).collect();
            let bang = if clause.forbidden { "!" } else { "" };
            parts.push(format!("member_of={bang}in:{}", list.join(",")));
        }
        if let Some(uuid) = &self.in_tree {
            parts.push(format!("in_tree={uuid}"));
        }
        let root: Vec<String> = self
            .root_required
            .iter()
            .cloned()
            .chain(self.root_forbidden.iter().map(|t| format!("!{t}")))
            .collect();
        if !root.is_empty() {
            parts.push(format!("root_required={}", root.join(",")));
        }
        if let Some(policy) = &self.group_policy {
            parts.push(format!("group_policy={policy}"));
        }
        parts.join("&")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn sizes_become_resources() {
        let extra = specs(&[]);
        let flavor = FlavorShape {
            vcpus: 2,
            memory_mb: 4096,
            disk_gb: 20,
            ephemeral_gb: 5,
            swap_mb: 1025,
            extra_specs: extra,
        };
        let r = Request::from_flavor(&flavor);
        assert_eq!(r.to_query(), "resources=DISK_GB:27,MEMORY_MB:4096,VCPU:2");
    }

    #[test]
    fn extra_specs_override_and_add_groups() {
        let extra = specs(&[
            ("resources:VCPU", "0"),
            ("resources:CUSTOM_BAREMETAL_GOLD", "1"),
            ("trait:HW_CPU_X86_AVX2", "required"),
            ("trait:CUSTOM_GOLD", "forbidden"),
            ("resources1:SRIOV_NET_VF", "1"),
            ("trait1:CUSTOM_PHYSNET_A", "required"),
            ("group_policy", "isolate"),
            ("hw:cpu_policy", "shared"),
        ]);
        let flavor = FlavorShape {
            vcpus: 2,
            memory_mb: 512,
            extra_specs: extra,
            ..Default::default()
        };
        let r = Request::from_flavor(&flavor);
        assert_eq!(
            r.to_query(),
            "resources=CUSTOM_BAREMETAL_GOLD:1,MEMORY_MB:512&required=HW_CPU_X86_AVX2,!CUSTOM_GOLD\
             &resources1=SRIOV_NET_VF:1&required1=CUSTOM_PHYSNET_A&group_policy=isolate"
        );
    }

    #[test]
    fn dedicated_cpus_are_pcpu() {
        let extra = specs(&[
            ("hw:cpu_policy", "dedicated"),
            ("hw:cpu_thread_policy", "isolate"),
        ]);
        let flavor = FlavorShape {
            vcpus: 4,
            memory_mb: 512,
            extra_specs: extra,
            ..Default::default()
        };
        let r = Request::from_flavor(&flavor);
        assert_eq!(
            r.to_query(),
            "resources=MEMORY_MB:512,PCPU:4&required=!HW_CPU_HYPERTHREADING"
        );
    }

    #[test]
    fn image_traits_join_the_unnumbered_group() {
        let extra = specs(&[("trait:CUSTOM_GOLD", "forbidden")]);
        let flavor = FlavorShape {
            vcpus: 1,
            memory_mb: 512,
            extra_specs: extra,
            ..Default::default()
        };
        let avx = vec!["HW_CPU_X86_AVX2".to_string()];
        let r = Request::from_flavor(&flavor)
            .with_image_traits(&avx)
            .unwrap();
        assert!(r.groups[""].required.contains("HW_CPU_X86_AVX2"));
        let gold = vec!["CUSTOM_GOLD".to_string()];
        assert_eq!(
            Request::from_flavor(&flavor).with_image_traits(&gold),
            Err(TraitConflict("CUSTOM_GOLD".into()))
        );
    }

    #[test]
    fn pre_filters_become_member_of_and_root_required() {
        const A1: &str = "aaaaaaaa-0000-4000-8000-000000000001";
        const A2: &str = "aaaaaaaa-0000-4000-8000-000000000002";
        const A3: &str = "aaaaaaaa-0000-4000-8000-000000000003";
        let mut request = Request::from_flavor(&FlavorShape {
            vcpus: 1,
            ..Default::default()
        });
        request.member_of.push(MemberOf {
            aggregates: [A2.to_string(), A1.to_string()].into(),
            forbidden: false,
        });
        request.member_of.push(MemberOf {
            aggregates: [A3.to_string()].into(),
            forbidden: true,
        });
        request.member_of.push(MemberOf {
            aggregates: BTreeSet::new(),
            forbidden: true,
        });
        request
            .root_forbidden
            .insert("COMPUTE_STATUS_DISABLED".into());
        assert_eq!(
            request.to_query(),
            format!(
                "resources=VCPU:1&member_of=in:{A1},{A2}&member_of=!in:{A3}&root_required=!COMPUTE_STATUS_DISABLED"
            )
        );
        let parsed = super::super::query::parse_candidates_query(
            &request.to_query(),
            super::super::microversion::Microversion::LATEST,
        );
        assert!(parsed.is_ok(), "{parsed:?}");
        // A clause that allows no aggregate is kept, so the query is refused, not widened.
        request.member_of = vec![MemberOf {
            aggregates: BTreeSet::new(),
            forbidden: false,
        }];
        assert!(request.to_query().contains("member_of=in:"));
    }
}
