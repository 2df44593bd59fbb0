use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Condition, SortedMap};

/// A resource provider: a compute node, a NUMA cell, a NIC's physical function,
/// a shared storage pool — anything with inventory that workloads consume.
/// Providers form trees through `parent`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kubeplace.io",
    derive = "PartialEq",
    version = "v1alpha1",
    kind = "ResourceProvider",
    plural = "resourceproviders",
    shortname = "rp",
    category = "kubeplace",
    status = "ResourceProviderStatus",
    doc = "A Placement resource provider with inventories, traits and aggregates; providers form trees through spec.parent.",
    printcolumn(
        name = "Root",
        type_ = "string",
        json_path = ".status.root",
        description = "The root provider of this provider's tree"
    ),
    printcolumn(
        name = "Parent",
        type_ = "string",
        json_path = ".spec.parent",
        description = "The parent provider, empty for a root"
    ),
    printcolumn(
        name = "UUID",
        type_ = "string",
        json_path = ".status.uuid",
        description = "The provider's uuid",
        priority = 1
    ),
    printcolumn(
        name = "Usages",
        type_ = "string",
        json_path = ".status.usages",
        description = "Amount in use per resource class"
    ),
    printcolumn(
        name = "VCPU",
        type_ = "integer",
        json_path = ".status.effectiveInventories.VCPU.total",
        description = "VCPU inventory total (after provider configs)",
        priority = 1
    ),
    printcolumn(
        name = "RAM",
        type_ = "integer",
        json_path = ".status.effectiveInventories.MEMORY_MB.total",
        description = "MEMORY_MB inventory total in MiB (after provider configs)",
        priority = 1
    ),
    printcolumn(
        name = "Disk",
        type_ = "integer",
        json_path = ".status.effectiveInventories.DISK_GB.total",
        description = "DISK_GB inventory total in GiB (after provider configs)",
        priority = 1
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the provider is part of a well-formed tree"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceProviderSpec {
    /// The provider's uuid. When absent, kubeplace derives a stable UUIDv5 from the object's name,
    /// so the same manifest always gives the same uuid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The name of the parent ResourceProvider. Absent for the root of a tree (a compute node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Inventories keyed by resource class (`VCPU`, `MEMORY_MB`, `DISK_GB`, `SRIOV_NET_VF`,
    /// `CUSTOM_*`, …). Fields left out take Placement's defaults.
    #[serde(default, skip_serializing_if = "SortedMap::is_empty")]
    pub inventories: SortedMap<String, Inventory>,
    /// Traits of this provider: standard os-traits names (`HW_CPU_X86_AVX2`, `COMPUTE_NODE`,
    /// `MISC_SHARES_VIA_AGGREGATE`) or `CUSTOM_*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traits: Vec<String>,
    /// Uuids of the aggregates this provider is a member of. A provider with the
    /// `MISC_SHARES_VIA_AGGREGATE` trait shares its inventory with the trees in its aggregates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregates: Vec<String>,
}

/// One resource class's inventory, with Placement's fields and defaults.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.reserved <= self.total").message("reserved must not exceed total"),
    validation = Rule::new("self.minUnit <= self.maxUnit").message("minUnit must not exceed maxUnit"),
    validation = Rule::new("self.allocationRatio > 0.0").message("allocationRatio must be greater than 0")
)]
pub struct Inventory {
    /// The amount of the resource the provider has (at least 1, as in Placement).
    #[schemars(range(min = 1, max = 2147483647))]
    pub total: i64,
    /// The amount held back for the host's own use; never allocated to consumers.
    #[serde(default)]
    #[schemars(range(min = 0, max = 2147483647))]
    pub reserved: i64,
    /// The smallest amount a single allocation may ask for.
    #[serde(default = "default_one")]
    #[schemars(range(min = 1, max = 2147483647))]
    pub min_unit: i64,
    /// The largest amount a single allocation may ask for.
    #[serde(default = "default_max_unit")]
    #[schemars(range(min = 1, max = 2147483647))]
    pub max_unit: i64,
    /// Allocations must be a multiple of this amount.
    #[serde(default = "default_one")]
    #[schemars(range(min = 1, max = 2147483647))]
    pub step_size: i64,
    /// Overcommit factor: capacity is `(total - reserved) * allocationRatio`.
    #[serde(default = "default_ratio")]
    pub allocation_ratio: f64,
}

fn default_one() -> i64 {
    1
}

fn default_max_unit() -> i64 {
    i32::MAX as i64
}

fn default_ratio() -> f64 {
    1.0
}

impl Inventory {
    /// An inventory of `total` with every other field at Placement's default.
    pub fn with_total(total: i64) -> Self {
        Inventory {
            total,
            reserved: 0,
            min_unit: 1,
            max_unit: default_max_unit(),
            step_size: 1,
            allocation_ratio: 1.0,
        }
    }
}

/// What kubeplace observed of a provider: its place in a tree and its effective state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceProviderStatus {
    /// The uuid in use: `spec.uuid`, or the one derived from the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The name of the root provider of this provider's tree (itself for a root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// Inventories after provider configs are merged in.
    #[serde(default, skip_serializing_if = "SortedMap::is_empty")]
    pub effective_inventories: SortedMap<String, Inventory>,
    /// Traits after provider configs are merged in, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effective_traits: Vec<String>,
    /// Amount in use per resource class, summed over every Allocation against this provider.
    #[serde(default, skip_serializing_if = "SortedMap::is_empty")]
    pub usages: SortedMap<String, i64>,
    /// Names of the ProviderConfigs whose entries apply to this provider.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied_provider_configs: Vec<String>,
    /// `Ready`: the provider is part of a well-formed tree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
