//! Image admission: Nova's image properties with their types, and `trait:` properties,
//! which take only `required` and a valid trait name.

use super::Review;
use kubeplace_api::Image;
use kubeplace_core::extra_specs::image_properties::check_image_properties;

pub(super) fn review(image: &Image, review: &mut Review) {
    let (problems, warnings) = check_image_properties(
        image
            .spec
            .properties
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    for p in problems {
        review.problem(format!("spec.{p}"));
    }
    for w in warnings {
        review.warn(format!("spec.{w}"));
    }
}
