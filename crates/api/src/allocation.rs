use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// Placement's project for consumers it did not learn one for (its
/// `incomplete_consumer_project_id` default); the same zero uuid serves as the user. Not
/// charged by quotas.
pub const UNKNOWN_PROJECT: &str = "00000000-0000-0000-0000-000000000000";

/// The annotations that keep a Placement consumer's attributes on its Allocation objects:
/// its project (which quotas charge), user and type (`MIGRATION` is never charged).
pub const PROJECT_ANNOTATION: &str = "placement.kubeplace.io/project-id";
/// See [`PROJECT_ANNOTATION`].
pub const USER_ANNOTATION: &str = "placement.kubeplace.io/user-id";
/// See [`PROJECT_ANNOTATION`].
pub const CONSUMER_TYPE_ANNOTATION: &str = "placement.kubeplace.io/consumer-type";
/// The consumer's generation, moved by every write of its allocations through the API
/// (an Allocation's `metadata.generation` moves only when its spec changes).
pub const CONSUMER_GENERATION_ANNOTATION: &str = "placement.kubeplace.io/consumer-generation";

/// A consumer's claim on resource providers, as Placement's allocations for one consumer.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kubeplace.io",
    derive = "PartialEq",
    version = "v1alpha1",
    kind = "Allocation",
    plural = "allocations",
    shortname = "alloc",
    category = "kubeplace",
    status = "AllocationStatus",
    doc = "A consumer's allocations: amounts of resource classes claimed from named resource providers.",
    printcolumn(
        name = "Consumer",
        type_ = "string",
        json_path = ".spec.consumer",
        description = "The consumer's uuid"
    ),
    printcolumn(
        name = "Applied",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Applied\")].status",
        description = "Whether every provider and resource class was found"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct AllocationSpec {
    /// The uuid of the consumer (an instance, a volume, …) holding these resources.
    pub consumer: String,
    /// One entry per provider the consumer takes resources from.
    #[serde(default)]
    pub allocations: Vec<ProviderAllocation>,
    /// The NUMA cells, CPUs and pages a server with a NUMA topology holds, as kubeplace's
    /// scheduler chose them. No host CPU is pinned by two claims and no cell's pages are
    /// held past its pools: the claims ledger decides these with the capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<NumaClaim>,
}

/// A guest's NUMA cells on a host's cells.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NumaClaim {
    /// One entry per guest cell, in guest cell order.
    pub cells: Vec<NumaCellClaim>,
}

/// One guest cell on one host cell.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NumaCellClaim {
    /// The guest cell's number.
    pub guest_cell: u32,
    /// The ResourceProvider of the host cell (with the trait `HW_NUMA_ROOT`).
    pub provider: String,
    /// The host cell's NUMA node number.
    pub host_cell: u32,
    /// The guest cell's memory, MiB.
    #[serde(rename = "memoryMiB")]
    pub memory_mib: u64,
    /// The page size backing it, KiB, when the guest asked for one.
    #[serde(
        default,
        rename = "pageSizeKiB",
        skip_serializing_if = "Option::is_none"
    )]
    pub page_size_kib: Option<u64>,
    /// Unpinned vCPUs of the cell (they float over the host cell's shared CPUs).
    #[serde(default)]
    pub shared_vcpus: u64,
    /// Each pinned vCPU's host CPU, by vCPU number.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "cpu_by_vcpu")]
    pub pinning: BTreeMap<u32, u32>,
    /// The host CPU the emulator threads run on (`hw:emulator_threads_policy=isolate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator_cpus: Option<String>,
    /// Every host CPU the guest cell holds for itself, as a CPU list: its pinned CPUs, the
    /// emulator's, and with thread policy `isolate` their sibling threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_cpus: Option<String>,
}

/// The resources taken from one provider.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderAllocation {
    /// The name of the ResourceProvider.
    pub provider: String,
    /// Amount per resource class, e.g. `{VCPU: 2, MEMORY_MB: 2048}`.
    pub resources: BTreeMap<String, i64>,
}

/// Whether the allocation is counted against its providers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllocationStatus {
    /// `Applied`: whether the claim counts against its providers. `True` when every
    /// provider exists, has inventory of every class claimed and had the capacity when the
    /// claim was decided (reason `ExceedsCapacity` if an inventory was reduced below what is
    /// allocated since); `False` with reason `OverCapacity` for a claim refused because
    /// earlier claims had taken the capacity (it does not count), or `ProviderNotFound` or
    /// `NoInventory`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A map from vCPU number (a key of digits) to host CPU, in a form the API server's
/// structural schemas accept (no `patternProperties`).
fn cpu_by_vcpu(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "Each pinned vCPU's host CPU, by vCPU number.",
        "additionalProperties": {"type": "integer", "format": "uint32", "minimum": 0}
    })
}
