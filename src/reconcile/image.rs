//! Image status: the traits it requires of hosts.

use crate::api::{Condition, Image, ImageStatus};

/// The traits an image requires: `trait:NAME=required` properties, sorted.
pub fn required_traits(image: &Image) -> Vec<String> {
    image
        .spec
        .properties
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix("trait:")
                .filter(|_| v == "required")
                .map(str::to_string)
        })
        .collect()
}

pub(super) fn status(i: &Image, generation: Option<i64>) -> ImageStatus {
    ImageStatus {
        required_traits: required_traits(i),
        conditions: vec![Condition::new("Valid", true, "Admitted", "")],
        observed_generation: generation,
    }
}
