//! `os:` — guest firmware and operating system features.

use super::{LIBVIRT, enumeration};
use crate::extra_specs::definition::DefinitionSpec as D;

pub(super) fn definitions() -> Vec<D> {
    vec![
        D::new(
            "os:secure_boot",
            "Whether the guest boots with UEFI Secure Boot: `required` turns it on, `disabled` keeps it off.",
            enumeration(&["disabled", "required"]),
        )
        .value_doc("the Secure Boot setting")
        .drivers(LIBVIRT),
    ]
}
