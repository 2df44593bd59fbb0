//! `pci_passthrough:` — PCI devices passed through to the guest.

use super::{LIBVIRT, pattern};
use crate::extra_specs::definition::DefinitionSpec as D;

pub(super) fn definitions() -> Vec<D> {
    vec![
        D::new(
            "pci_passthrough:alias",
            "PCI devices to pass through, as ALIAS:COUNT pairs separated by commas, where each ALIAS is a PCI alias from the compute configuration.",
            pattern(r"[^:]+:[0-9]+(?:\s*,\s*[^:]+:[0-9]+)*"),
        )
        .value_doc("comma-separated ALIAS:COUNT pairs")
        .drivers(LIBVIRT),
    ]
}
