//! `accel:` — accelerators managed by Cyborg.

use super::string;
use crate::extra_specs::definition::DefinitionSpec as D;

pub(super) fn definitions() -> Vec<D> {
    vec![
        D::new(
            "accel:device_profile",
            "The Cyborg device profile whose accelerators the guest gets; a device profile describes accelerators the way a flavor describes a server.",
            string(),
        )
        .value_doc("a device profile name"),
    ]
}
