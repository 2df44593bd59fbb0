//! `capabilities:` — matched against the host's capabilities by the
//! ComputeCapabilitiesFilter.

use super::string;
use crate::extra_specs::definition::DefinitionSpec as D;

/// Capabilities with a single value.
const FLAT: [&str; 34] = [
    "id",
    "uuid",
    "service_id",
    "host",
    "vcpus",
    "memory_mb",
    "local_gb",
    "vcpus_used",
    "memory_mb_used",
    "local_gb_used",
    "hypervisor_type",
    "hypervisor_version",
    "hypervisor_hostname",
    "free_ram_mb",
    "free_disk_gb",
    "current_workload",
    "running_vms",
    "disk_available_least",
    "host_ip",
    "mapped",
    "cpu_allocation_ratio",
    "ram_allocation_ratio",
    "disk_allocation_ratio",
    "total_usable_ram_mb",
    "total_usable_disk_gb",
    "disk_mb_used",
    "free_disk_mb",
    "vcpus_total",
    "num_instances",
    "num_io_ops",
    "failed_builds",
    "aggregates",
    "cell_uuid",
    "updated",
];

/// Capabilities with nested fields, reached with `:field` suffixes.
const NESTED: [&str; 11] = [
    "cpu_info",
    "metrics",
    "stats",
    "numa_topology",
    "supported_hv_specs",
    "pci_device_pools",
    "nodename",
    "pci_stats",
    "supported_instances",
    "limits",
    "instances",
];

/// The value operators of the ComputeCapabilitiesFilter, for the value documentation.
const VALUE_DOC: &str = "a value, or an operator and operand: `=`, `==`, `!=`, `>=`, `<=` (numbers), `s==`, `s!=`, `s>=`, `s>`, `s<=`, `s<` (strings), `<in>` (substring), `<all-in>` (all of several), `<or>` (alternatives), e.g. `>= 4` or `<in> avx2`";

pub(super) fn definitions() -> Vec<D> {
    let flat = FLAT.iter().map(|c| {
        D::new(
            &format!("capabilities:{c}"),
            &format!(
                "Only hosts whose `{c}` capability, as the compute service reports it, satisfies the value pass the ComputeCapabilitiesFilter."
            ),
            string(),
        )
        .value_doc(VALUE_DOC)
    });
    let nested = NESTED.iter().map(|c| {
        D::new(
            &format!("capabilities:{c}{{filter}}"),
            &format!(
                "Only hosts whose `{c}` capability (or the field of it that the `:`-separated path selects) satisfies the value pass the ComputeCapabilitiesFilter."
            ),
            string(),
        )
        .param("filter", r"(:[a-zA-Z0-9_]+)*", "a path into the capability, each step written `:field`")
        .value_doc(VALUE_DOC)
    });
    flat.chain(nested).collect()
}
