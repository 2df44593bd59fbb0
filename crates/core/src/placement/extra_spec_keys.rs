//! The extra specs that become part of a placement request: `resources{group}:{class}`,
//! `trait{group}:{trait}` and `group_policy`.

use crate::placement::{check_resource_class, check_trait};

/// A placement-related extra spec, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PlacementKey {
    /// `resources{group}:{class}=N`; an empty group is the unnumbered one.
    Resources {
        group: String,
        class: String,
        amount: i64,
    },
    /// `trait{group}:{trait}=required|forbidden`.
    Trait {
        group: String,
        name: String,
        required: bool,
    },
    /// `group_policy=none|isolate`.
    GroupPolicy(String),
}

/// Parses a key in the placement namespaces; `None` when the key is in another namespace,
/// `Some(Err(why))` when it is one of them but malformed.
pub(crate) fn parse_placement_key(key: &str, value: &str) -> Option<Result<PlacementKey, String>> {
    if key == "group_policy" {
        return Some(match value {
            "none" | "isolate" => Ok(PlacementKey::GroupPolicy(value.to_string())),
            _ => Err("group_policy takes none or isolate".to_string()),
        });
    }
    let (prefix, rest) = key.split_once(':')?;
    let (namespace, group) = if let Some(g) = prefix.strip_prefix("resources") {
        ("resources", g)
    } else if let Some(g) = prefix.strip_prefix("trait") {
        ("trait", g)
    } else {
        return None;
    };
    Some(parse_group(group).and_then(|group| match namespace {
        "resources" => {
            check_resource_class(rest).map_err(|e| e.to_string())?;
            let amount: i64 = crate::text::parse_int(value)
                .and_then(|n| i64::try_from(n.0).ok())
                .filter(|n| *n >= 0)
                .ok_or_else(|| format!("the amount must be a whole number of 0 or more (0 removes the class); got {value:?}"))?;
            Ok(PlacementKey::Resources { group, class: rest.to_string(), amount })
        }
        _ => {
            check_trait(rest).map_err(|e| e.to_string())?;
            let required = match value {
                "required" => true,
                "forbidden" => false,
                _ => return Err("a trait takes required or forbidden".to_string()),
            };
            Ok(PlacementKey::Trait { group, name: rest.to_string(), required })
        }
    }))
}

/// Granular group suffixes are `[a-zA-Z0-9_-]{1,64}`; empty is the unnumbered group.
fn parse_group(group: &str) -> Result<String, String> {
    let ok = group.len() <= 64
        && group
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(group.to_string())
    } else {
        Err(format!(
            "the group suffix {group:?} must be 1 to 64 characters of a-z, A-Z, 0-9, '_' and '-'"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_resources_and_traits() {
        assert_eq!(
            parse_placement_key("resources:VCPU", "0"),
            Some(Ok(PlacementKey::Resources {
                group: "".into(),
                class: "VCPU".into(),
                amount: 0
            }))
        );
        assert_eq!(
            parse_placement_key("resources1:SRIOV_NET_VF", "2"),
            Some(Ok(PlacementKey::Resources {
                group: "1".into(),
                class: "SRIOV_NET_VF".into(),
                amount: 2
            }))
        );
        assert_eq!(
            parse_placement_key("trait_NIC:CUSTOM_PHYSNET_A", "forbidden"),
            Some(Ok(PlacementKey::Trait {
                group: "_NIC".into(),
                name: "CUSTOM_PHYSNET_A".into(),
                required: false
            }))
        );
        assert_eq!(parse_placement_key("hw:cpu_policy", "dedicated"), None);
        assert_eq!(
            parse_placement_key("group_policy", "isolate"),
            Some(Ok(PlacementKey::GroupPolicy("isolate".into())))
        );
    }

    #[test]
    fn rejects_bad_values_with_what_is_accepted() {
        assert_eq!(
            parse_placement_key("trait:HW_CPU_X86_AVX2", "Required"),
            Some(Err("a trait takes required or forbidden".into()))
        );
        assert!(
            parse_placement_key("resources:VCPU", "-1")
                .unwrap()
                .unwrap_err()
                .contains("0 or more")
        );
        assert!(
            parse_placement_key("resources:VCPU", "two")
                .unwrap()
                .is_err()
        );
        assert!(
            parse_placement_key("resources:vcpu", "1")
                .unwrap()
                .unwrap_err()
                .contains("A-Z")
        );
        assert!(
            parse_placement_key("trait:CUSTOM_", "required")
                .unwrap()
                .is_err()
        );
        assert!(
            parse_placement_key("group_policy", "spread")
                .unwrap()
                .is_err()
        );
        assert!(
            parse_placement_key("resources.1:VCPU", "1")
                .unwrap()
                .unwrap_err()
                .contains("group suffix")
        );
    }
}
