//! The order Placement lists traits in where it reads them in the order of their rows
//! (`GET /traits`, a provider's traits, the traits of provider summaries): the standard
//! traits, written at its first start, then the custom ones in the order they were created.

use std::collections::HashMap;

/// The custom traits in the order they were created, as a rank per name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraitRows {
    created: HashMap<Box<str>, u32>,
}

impl TraitRows {
    /// The rows of `created`, custom traits in the order they were created (other names
    /// are left out).
    pub fn new<'a>(created: impl IntoIterator<Item = &'a str>) -> TraitRows {
        let mut rows = TraitRows::default();
        for name in created.into_iter().filter(|n| is_custom(n)) {
            let next = rows.created.len() as u32;
            rows.created.entry(name.into()).or_insert(next);
        }
        rows
    }

    /// Where `name` goes: standard traits first, by name (Placement's own order of them is
    /// a Python set's, which changes with its hash seed); then custom ones in the order
    /// they were created; then custom ones no registry holds (a provider's, written
    /// without the API), by name.
    pub fn key<'a>(&self, name: &'a str) -> (bool, u32, &'a str) {
        if !is_custom(name) {
            return (false, 0, name);
        }
        let row = self.created.get(name).copied().unwrap_or(u32::MAX);
        (true, row, name)
    }

    /// Sorts `names` into this order.
    pub fn sort<S: AsRef<str>>(&self, names: &mut [S]) {
        names.sort_by(|a, b| self.key(a.as_ref()).cmp(&self.key(b.as_ref())));
    }
}

fn is_custom(name: &str) -> bool {
    name.starts_with("CUSTOM_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_traits_then_custom_ones_as_created_then_unregistered_ones() {
        let rows = TraitRows::new(["CUSTOM_Z", "HW_NUMA_ROOT", "CUSTOM_B", "CUSTOM_Z"]);
        let mut traits = vec![
            "CUSTOM_A",
            "CUSTOM_B",
            "HW_NUMA_ROOT",
            "CUSTOM_Z",
            "COMPUTE_NODE",
            "CUSTOMER",
            "CUSTOM_0",
        ];
        rows.sort(&mut traits);
        assert_eq!(
            traits,
            [
                "COMPUTE_NODE",
                "CUSTOMER",
                "HW_NUMA_ROOT",
                "CUSTOM_Z",
                "CUSTOM_B",
                "CUSTOM_0",
                "CUSTOM_A",
            ]
        );
    }

    #[test]
    fn rows_differ_when_the_creation_order_does() {
        assert_ne!(
            TraitRows::new(["CUSTOM_A", "CUSTOM_B"]),
            TraitRows::new(["CUSTOM_B", "CUSTOM_A"])
        );
        assert_eq!(TraitRows::new(["CUSTOM_A"]), TraitRows::new(["CUSTOM_A"]));
    }
}
