//! Images: the traits an image requires of the hosts it boots on.

use kubeplace_api::Image;

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
