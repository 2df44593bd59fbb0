//! Which traits a Node's labels give its provider: a table of rules, the defaults below
//! (Node Feature Discovery's CPU flags, the architecture, kubeplace's own `CUSTOM_*` label)
//! and the rules an operator adds in a file of the same format.
//!
//! A kubelet may label its own Node, so a label is not trusted with a trait that changes how
//! Placement or kubeplace treat the provider ([`RESERVED_TRAITS`]): no rule gives one.

use std::collections::{BTreeMap, BTreeSet};

use kubeplace_core::placement::check_trait;
use serde::Deserialize;

/// One rule: a label (its key, with `{name}` standing for any part of it), an optional
/// value it must have, and the trait it gives (with `{name}` and `{value}` filled in,
/// upper-cased, every character other than a letter or digit made `_`). A trait that comes
/// out neither standard nor `CUSTOM_*` is not given: a rule may name a family
/// (`HW_CPU_X86_{name}`) of which only the standard members count.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraitRule {
    pub label: String,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(rename = "trait")]
    pub trait_: String,
}

/// The file of rules (`--mirror-traits`): `traits:` and a list of rules.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    traits: Vec<TraitRule>,
}

/// The traits that change how a provider is used rather than what it offers, which no rule
/// gives: a Node labelled into sharing its inventory with every tree of its aggregates, into
/// a NUMA cell, or out of being disabled would take what its labels cannot vouch for.
/// `COMPUTE_NODE` and `COMPUTE_STATUS_DISABLED` are the mirror's own to set, from the object
/// being a Node and from the Node being cordoned or tainted.
pub const RESERVED_TRAITS: [&str; 4] = [
    "COMPUTE_NODE",
    "COMPUTE_STATUS_DISABLED",
    "HW_NUMA_ROOT",
    "MISC_SHARES_VIA_AGGREGATE",
];

fn is_reserved(trait_: &str) -> bool {
    RESERVED_TRAITS.contains(&trait_)
}

/// Why a file of rules was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraitTableError {
    #[error("not a list of trait rules: {0}")]
    Format(String),
    #[error("rule {index} (label {label:?}): {why}")]
    Rule {
        index: usize,
        label: String,
        why: String,
    },
}

/// The default table, in the format of an operator's file.
pub const DEFAULT_RULES: &str = r#"traits:
# Node Feature Discovery's CPU flags; only the standard traits of each family are given.
- {label: "feature.node.kubernetes.io/cpu-cpuid.{name}", value: "true", trait: "HW_CPU_X86_{name}"}
- {label: "feature.node.kubernetes.io/cpu-cpuid.{name}", value: "true", trait: "HW_CPU_AARCH64_{name}"}
- {label: "feature.node.kubernetes.io/cpu-hardware_multithreading", value: "true", trait: "HW_CPU_HYPERTHREADING"}
- {label: "feature.node.kubernetes.io/cpu-security.sgx.enabled", value: "true", trait: "HW_CPU_X86_SGX"}
- {label: "feature.node.kubernetes.io/cpu-security.sev.enabled", value: "true", trait: "HW_CPU_X86_AMD_SEV"}
- {label: "feature.node.kubernetes.io/cpu-security.sev.es.enabled", value: "true", trait: "HW_CPU_X86_AMD_SEV_ES"}
- {label: "feature.node.kubernetes.io/cpu-security.sev.snp.enabled", value: "true", trait: "HW_CPU_X86_AMD_SEV_SNP"}
- {label: "feature.node.kubernetes.io/cpu-security.tdx.enabled", value: "true", trait: "HW_CPU_X86_INTEL_TDX"}
- {label: "feature.node.kubernetes.io/network-sriov.capable", value: "true", trait: "HW_NIC_SRIOV"}
# The architecture the kubelet reports.
- {label: "kubernetes.io/arch", value: "amd64", trait: "HW_ARCH_X86_64"}
- {label: "kubernetes.io/arch", value: "amd64", trait: "COMPUTE_ARCH_X86_64"}
- {label: "kubernetes.io/arch", value: "arm64", trait: "HW_ARCH_AARCH64"}
- {label: "kubernetes.io/arch", value: "arm64", trait: "COMPUTE_ARCH_AARCH64"}
- {label: "kubernetes.io/arch", value: "ppc64le", trait: "HW_ARCH_PPC64LE"}
- {label: "kubernetes.io/arch", value: "ppc64le", trait: "COMPUTE_ARCH_PPC64LE"}
- {label: "kubernetes.io/arch", value: "s390x", trait: "HW_ARCH_S390X"}
- {label: "kubernetes.io/arch", value: "s390x", trait: "COMPUTE_ARCH_S390X"}
- {label: "kubernetes.io/arch", value: "riscv64", trait: "COMPUTE_ARCH_RISCV64"}
# A custom trait, by hand: `kubectl label node n1 trait.kubeplace.io/CUSTOM_GOLD=true`.
# Only CUSTOM_*: a standard trait by label takes a rule of the operator's own.
- {label: "trait.kubeplace.io/CUSTOM_{name}", value: "true", trait: "CUSTOM_{name}"}
"#;

/// The rules in force: the defaults, then an operator's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraitTable {
    rules: Vec<TraitRule>,
}

impl Default for TraitTable {
    fn default() -> Self {
        TraitTable {
            rules: read_rules(DEFAULT_RULES).expect("the default rules are well-formed"),
        }
    }
}

impl TraitTable {
    /// The defaults followed by the rules of an operator's file (YAML or JSON).
    pub fn with_rules(text: &str) -> Result<TraitTable, TraitTableError> {
        let mut table = TraitTable::default();
        table.rules.extend(read_rules(text)?);
        Ok(table)
    }

    /// The rules in force, defaults first.
    pub fn rules(&self) -> &[TraitRule] {
        &self.rules
    }

    /// The traits a Node with these labels has.
    pub fn traits(&self, labels: &BTreeMap<String, String>) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for rule in &self.rules {
            let (prefix, suffix) = rule
                .label
                .split_once("{name}")
                .unwrap_or((rule.label.as_str(), ""));
            let pattern = rule.label.contains("{name}");
            let matches = |key: &str| -> Option<String> {
                if !pattern {
                    return (key == rule.label).then(String::new);
                }
                let middle = key.strip_prefix(prefix)?.strip_suffix(suffix)?;
                (!middle.is_empty()).then(|| middle.to_string())
            };
            // A rule with a fixed key is one lookup; a pattern reads the labels after its prefix.
            let candidates: Vec<(&String, &String)> = if pattern {
                labels
                    .range(prefix.to_string()..)
                    .take_while(|(k, _)| k.starts_with(prefix))
                    .collect()
            } else {
                labels.get_key_value(&rule.label).into_iter().collect()
            };
            for (key, value) in candidates {
                let Some(name) = matches(key) else { continue };
                if rule.value.as_ref().is_some_and(|v| v != value) {
                    continue;
                }
                let name_part = trait_part(&name);
                let trait_ = rule
                    .trait_
                    .replace("{name}", &name_part)
                    .replace("{value}", &trait_part(value));
                if check_trait(&trait_).is_ok() && !is_reserved(&trait_) {
                    out.insert(trait_);
                }
            }
        }
        out
    }
}

/// A part of a trait's name: upper-cased, every other character `_`.
pub(crate) fn trait_part(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn read_rules(text: &str) -> Result<Vec<TraitRule>, TraitTableError> {
    let file: RulesFile =
        serde_saphyr::from_str(text).map_err(|e| TraitTableError::Format(e.to_string()))?;
    for (index, rule) in file.traits.iter().enumerate() {
        let refuse = |why: String| TraitTableError::Rule {
            index,
            label: rule.label.clone(),
            why,
        };
        if rule.label.is_empty() {
            return Err(refuse("the label is empty".into()));
        }
        if rule.label.matches("{name}").count() > 1 {
            return Err(refuse(
                "{name} may stand for one part of the label only".into(),
            ));
        }
        if rule.trait_.contains("{name}") && !rule.label.contains("{name}") {
            return Err(refuse(
                "the trait uses {name}, which the label does not have".into(),
            ));
        }
        // A trait with no placeholder must be one as written.
        if !rule.trait_.contains('{') {
            check_trait(&rule.trait_).map_err(|e| refuse(e.to_string()))?;
            if is_reserved(&rule.trait_) {
                return Err(refuse(format!(
                    "trait {:?} is not given from a label: it changes how the provider is used, and a Node may label itself (reserved: {})",
                    rule.trait_,
                    RESERVED_TRAITS.join(", ")
                )));
            }
        } else if !(rule.trait_.starts_with("CUSTOM_")
            || rule.trait_.starts_with("HW_")
            || rule.trait_.starts_with("COMPUTE_")
            || rule.trait_.starts_with("{"))
        {
            return Err(refuse(format!(
                "trait {:?} can only come out as a standard trait or CUSTOM_*",
                rule.trait_
            )));
        }
    }
    Ok(file.traits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_defaults_read_nfd_flags_and_the_architecture() {
        let table = TraitTable::default();
        let traits = table.traits(&labels(&[
            ("feature.node.kubernetes.io/cpu-cpuid.AVX2", "true"),
            ("feature.node.kubernetes.io/cpu-cpuid.AESNI", "true"),
            ("feature.node.kubernetes.io/cpu-cpuid.SSE42", "true"),
            ("feature.node.kubernetes.io/cpu-cpuid.AVX512F", "false"),
            // Not a standard trait of either family: not given.
            ("feature.node.kubernetes.io/cpu-cpuid.CMPXCHG8", "true"),
            (
                "feature.node.kubernetes.io/cpu-hardware_multithreading",
                "true",
            ),
            ("kubernetes.io/arch", "amd64"),
            ("kubernetes.io/os", "linux"),
            ("trait.kubeplace.io/CUSTOM_GOLD", "true"),
            ("trait.kubeplace.io/not-a-trait", "true"),
        ]));
        let traits: Vec<&str> = traits.iter().map(String::as_str).collect();
        assert_eq!(
            traits,
            [
                "COMPUTE_ARCH_X86_64",
                "CUSTOM_GOLD",
                "HW_ARCH_X86_64",
                "HW_CPU_HYPERTHREADING",
                "HW_CPU_X86_AESNI",
                "HW_CPU_X86_AVX2",
                "HW_CPU_X86_SSE42",
            ]
        );
        let arm = table.traits(&labels(&[
            ("kubernetes.io/arch", "arm64"),
            ("feature.node.kubernetes.io/cpu-cpuid.ASIMD", "true"),
        ]));
        assert!(arm.contains("HW_CPU_AARCH64_ASIMD") && arm.contains("HW_ARCH_AARCH64"));
    }

    #[test]
    fn a_label_gives_only_custom_traits_and_never_a_reserved_one() {
        let node = labels(&[
            ("trait.kubeplace.io/MISC_SHARES_VIA_AGGREGATE", "true"),
            ("trait.kubeplace.io/HW_NUMA_ROOT", "true"),
            ("trait.kubeplace.io/COMPUTE_STATUS_DISABLED", "true"),
            ("trait.kubeplace.io/COMPUTE_NODE", "true"),
            ("trait.kubeplace.io/HW_CPU_X86_AVX2", "true"),
            ("trait.kubeplace.io/CUSTOM_GOLD", "true"),
            ("trait.kubeplace.io/CUSTOM_", "true"),
        ]);
        let traits: Vec<String> = TraitTable::default().traits(&node).into_iter().collect();
        assert_eq!(traits, ["CUSTOM_GOLD"]);

        // The operator's rule for standard traits by label gives them, but still none of the
        // reserved ones, whatever the pattern makes of the label.
        let table = TraitTable::with_rules(
            "traits:\n- {label: 'trait.kubeplace.io/{name}', value: 'true', trait: '{name}'}\n- {label: example.com/role, trait: '{value}'}\n- {label: example.com/cell, trait: 'HW_NUMA_{value}'}\n",
        )
        .unwrap();
        let mut node = node;
        node.insert(
            "example.com/role".into(),
            "misc-shares-via-aggregate".into(),
        );
        node.insert("example.com/cell".into(), "root".into());
        let traits: Vec<String> = table.traits(&node).into_iter().collect();
        assert_eq!(traits, ["CUSTOM_GOLD", "HW_CPU_X86_AVX2"]);
    }

    #[test]
    fn an_operators_rule_naming_a_reserved_trait_is_refused() {
        for reserved in RESERVED_TRAITS {
            let e = TraitTable::with_rules(&format!(
                "traits:\n- {{label: example.com/tier, trait: CUSTOM_GOLD}}\n- {{label: example.com/share, value: 'yes', trait: {reserved}}}\n"
            ))
            .unwrap_err();
            let text = e.to_string();
            assert!(
                text.starts_with("rule 1 (label \"example.com/share\"): trait \"")
                    && text.contains(reserved)
                    && text.contains("is not given from a label"),
                "{text}"
            );
        }
    }

    #[test]
    fn an_operator_adds_rules_with_placeholders() {
        let table = TraitTable::with_rules(
            "traits:\n- {label: topology.kubernetes.io/zone, trait: 'CUSTOM_ZONE_{value}'}\n- {label: example.com/tier, value: gold, trait: CUSTOM_GOLD}\n",
        )
        .unwrap();
        let traits = table.traits(&labels(&[
            ("topology.kubernetes.io/zone", "eu-west-1a"),
            ("example.com/tier", "silver"),
        ]));
        assert_eq!(
            traits.into_iter().collect::<Vec<_>>(),
            ["CUSTOM_ZONE_EU_WEST_1A"]
        );
    }

    #[test]
    fn a_bad_file_is_refused_with_the_rule_named() {
        let e = TraitTable::with_rules("traits:\n- {label: a, trait: CUSTOM_gold}\n").unwrap_err();
        assert!(e.to_string().starts_with("rule 0 (label \"a\"):"), "{e}");
        let e =
            TraitTable::with_rules("traits:\n- {label: a, trait: 'CUSTOM_{name}'}\n").unwrap_err();
        assert!(e.to_string().contains("does not have"), "{e}");
        let e = TraitTable::with_rules("rules: []\n").unwrap_err();
        assert!(matches!(e, TraitTableError::Format(_)), "{e}");
        let e =
            TraitTable::with_rules("traits:\n- {label: a, trait: 'GOLD_{value}'}\n").unwrap_err();
        assert!(e.to_string().contains("CUSTOM_"), "{e}");
    }
}
