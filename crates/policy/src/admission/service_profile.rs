//! ServiceProfile admission: a driver, and metadata keys users may set.

use std::collections::BTreeSet;

use super::Review;
use kubeplace_api::ServiceProfile;

pub(super) fn review(sp: &ServiceProfile, review: &mut Review) {
    if let Err(e) = kubeplace_core::templates::check(&sp.spec.metadata) {
        review.problem(format!("spec.metadata is not a valid template: {e}"));
    }
    if sp.spec.driver.trim().is_empty() {
        review.problem("spec.driver is empty; name the driver that receives the metadata");
    }
    let mut seen = BTreeSet::new();
    for key in &sp.spec.allowed_meta_keys {
        let ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            review.problem(format!("spec.allowedMetaKeys: {key:?} is not a name of a-z, A-Z, 0-9 and _ (templates refer to it as meta.{key})"));
        }
        if !seen.insert(key) {
            review.problem(format!("spec.allowedMetaKeys: {key:?} is listed twice"));
        }
    }
}
