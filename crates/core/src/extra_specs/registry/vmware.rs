//! `vmware:` — options of the VMware virt driver.

use super::string;
use crate::extra_specs::definition::DefinitionSpec as D;

const VMWARE: &[&str] = &["vmware"];

pub(super) fn definitions() -> Vec<D> {
    vec![
        D::new(
            "vmware:hw_version",
            "The VMware virtual hardware version the guest is created with, so that guests land on hosts able to run it when host versions differ.",
            string(),
        )
        .value_doc("a hardware version such as vmx-13")
        .drivers(VMWARE),
        D::new(
            "vmware:storage_policy",
            "The storage policy new guests are created with; ignored unless storage policy-based management is enabled.",
            string(),
        )
        .value_doc("a storage policy name")
        .drivers(VMWARE),
    ]
}
