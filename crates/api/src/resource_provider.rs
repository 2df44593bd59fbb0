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
    /// What a NUMA cell (a provider with the trait `HW_NUMA_ROOT`) has beyond its counts:
    /// its CPUs by use, thread siblings, socket, memory and page pools. Servers with a NUMA
    /// topology (pinned CPUs, hugepages, `hw:numa_nodes`) are fitted onto these cells as
    /// Nova's NUMATopologyFilter fits them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_cell: Option<NumaCell>,
}

/// A NUMA cell's detail. Every field is optional: without CPU lists the cell's dedicated
/// CPUs are as many as its `PCPU` inventory and its shared CPUs as many as its `VCPU`
/// inventory (numbered after the host's earlier cells), no siblings are known, and its
/// memory is its `MEMORY_MB` inventory in 4 KiB pages.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NumaCell {
    /// The cell's NUMA node number on its host. Default: its place among the host's cells
    /// ordered by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1023))]
    pub id: Option<u32>,
    /// CPUs for unpinned guests, as a CPU list (`0-3,8`; Nova's `cpu_shared_set` in this
    /// cell). With neither list, every CPU of `cpus` is both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_cpus: Option<String>,
    /// CPUs for pinned guests (Nova's `cpu_dedicated_set` in this cell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedicated_cpus: Option<String>,
    /// Every CPU of the cell, for a host that sets neither list apart: each is both shared
    /// and dedicated, as in Nova without `cpu_shared_set` and `cpu_dedicated_set`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// Thread siblings: one CPU list per core (`["0,8", "1,9"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub siblings: Vec<String>,
    /// The socket the cell is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<u32>,
    /// The cell's memory, MiB. Default: its `MEMORY_MB` inventory's total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub memory_mib: Option<u64>,
    /// Page pools by size. Default: the memory in 4 KiB pages; listing hugepages without the
    /// 4 KiB pool gives the memory the hugepages leave as 4 KiB pages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pages: Vec<NumaPagePool>,
}

/// The pages of one size in a NUMA cell.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NumaPagePool {
    /// The page size, KiB: 4, 2048 or 1048576 (4K, 2M, 1G), or another power of two.
    #[serde(rename = "sizeKiB")]
    #[schemars(range(min = 1))]
    pub size_kib: u64,
    /// Pages of this size the cell has.
    #[schemars(range(min = 0))]
    pub total: u64,
    /// Pages the host keeps for itself (Nova's `reserved_huge_pages`).
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub reserved: u64,
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
