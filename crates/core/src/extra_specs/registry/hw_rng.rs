//! `hw_rng:` — the guest's virtual random number generator.

use super::{LIBVIRT, boolean, int_min};
use crate::extra_specs::definition::DefinitionSpec as D;

pub(super) fn definitions() -> Vec<D> {
    vec![
        D::new(
            "hw_rng:allowed",
            "Whether images may configure a virtual random number generator; set to false to refuse them one. Guests have one by default.",
            boolean(),
        )
        .value_doc("false to refuse RNG devices")
        .drivers(LIBVIRT),
        D::new(
            "hw_rng:rate_bytes",
            "How many bytes of host entropy the guest may read in each period.",
            int_min(0),
        )
        .value_doc("bytes per period")
        .drivers(LIBVIRT)
        .needs(&["hw_rng:rate_period"]),
        D::new(
            "hw_rng:rate_period",
            "The length, in milliseconds, of the period that hw_rng:rate_bytes applies to.",
            int_min(0),
        )
        .value_doc("milliseconds")
        .drivers(LIBVIRT)
        .needs(&["hw_rng:rate_bytes"]),
    ]
}
