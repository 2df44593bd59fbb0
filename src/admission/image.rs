//! Image admission: `trait:` properties take only `required` and a valid trait name.

use super::Review;
use crate::api::Image;
use crate::placement::check_trait;

pub(super) fn review(image: &Image, review: &mut Review) {
    for (key, value) in &image.spec.properties {
        let Some(name) = key.strip_prefix("trait:") else {
            continue;
        };
        if let Err(e) = check_trait(name) {
            review.problem(format!("spec.properties[{key:?}]: {e}"));
        }
        if value != "required" {
            review.problem(format!(
                "spec.properties[{key:?}] is {value:?}; an image can only require a trait, so the value must be \"required\""
            ));
        }
    }
}
