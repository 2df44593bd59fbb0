//! The rebuild pre-flight check: can a server keep its allocation with a new image?
//!
//! As Nova's conductor does it: the traits of every provider the consumer's allocation
//! uses are pooled, and any trait the new image requires that is not in the pool makes
//! the rebuild fail. The server stays where it is; nothing is rescheduled.

use std::collections::BTreeSet;

use super::ProviderIndex;

/// The image's required traits that the allocated providers lack, sorted. Providers that
/// no longer exist contribute no traits.
pub fn missing_traits<'a>(
    index: &ProviderIndex,
    allocated_providers: impl IntoIterator<Item = &'a str>,
    required: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let mut pool: BTreeSet<String> = BTreeSet::new();
    for p in allocated_providers {
        if let Some((_, traits)) = index.effective(p) {
            pool.extend(traits);
        }
    }
    let missing: BTreeSet<&str> = required
        .into_iter()
        .filter(|t| !pool.contains(*t))
        .collect();
    missing.into_iter().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::ProviderRecord;

    #[test]
    fn pools_traits_over_every_allocated_provider() {
        let mut idx = ProviderIndex::default();
        for (name, traits) in [
            ("cn1", vec!["HW_CPU_X86_AVX2"]),
            ("pf1", vec!["HW_NIC_SRIOV"]),
            ("pf2", vec!["HW_NIC_OFFLOAD_GENEVE"]),
        ] {
            idx.upsert_provider(ProviderRecord {
                name: name.into(),
                uuid: name.into(),
                traits: traits.into_iter().map(String::from).collect(),
                ..Default::default()
            });
        }
        // The server got its VF from pf1: an image needing GENEVE offload cannot keep it.
        assert_eq!(
            missing_traits(
                &idx,
                ["cn1", "pf1"],
                ["HW_CPU_X86_AVX2", "HW_NIC_OFFLOAD_GENEVE"]
            ),
            vec!["HW_NIC_OFFLOAD_GENEVE"]
        );
        assert!(
            missing_traits(
                &idx,
                ["cn1", "pf2"],
                ["HW_CPU_X86_AVX2", "HW_NIC_OFFLOAD_GENEVE"]
            )
            .is_empty()
        );
        assert_eq!(
            missing_traits(&idx, ["gone"], ["HW_CPU_X86_AVX2"]),
            vec!["HW_CPU_X86_AVX2"]
        );
    }
}
