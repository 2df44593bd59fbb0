use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// A host aggregate as Nova keeps one: a Placement aggregate (its uuid, which
/// ResourceProviders list in `spec.aggregates`) and the metadata Nova's scheduler reads from
/// it: an availability zone, the tenants (namespaces) its hosts are kept for, and traits a
/// request must require to use its hosts.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kubeplace.io",
    derive = "PartialEq",
    version = "v1alpha1",
    kind = "Aggregate",
    plural = "aggregates",
    shortname = "agg",
    category = "kubeplace",
    status = "AggregateStatus",
    doc = "A host aggregate: a Placement aggregate uuid that providers join, with Nova's metadata (availability zone, tenant isolation, required traits).",
    printcolumn(
        name = "UUID",
        type_ = "string",
        json_path = ".spec.uuid",
        description = "The Placement aggregate uuid providers list"
    ),
    printcolumn(
        name = "Zone",
        type_ = "string",
        json_path = ".spec.availabilityZone",
        description = "The availability zone of its hosts"
    ),
    printcolumn(
        name = "Hosts",
        type_ = "integer",
        json_path = ".status.hosts",
        description = "Root providers in the aggregate"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct AggregateSpec {
    /// The aggregate's uuid: a ResourceProvider joins by listing it in `spec.aggregates`
    /// (a compute node's root provider, as Nova mirrors host aggregates).
    pub uuid: String,
    /// The availability zone of the hosts in the aggregate (Nova's `availability_zone`
    /// metadata). A Server asking for this zone is placed on them only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_zone: Option<String>,
    /// Namespaces whose Servers may use the aggregate's hosts (Nova's `filter_tenant_id`
    /// metadata, with namespaces for projects): no other namespace's Server is placed on
    /// them. Empty: every namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<String>,
    /// With `tenants`: those namespaces' Servers are placed only on hosts of aggregates that
    /// list them (Nova's `limit_tenants_to_placement_aggregate`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confine_tenants: bool,
    /// Traits a request must require to use the aggregate's hosts (Nova's
    /// `trait:NAME=required` metadata with `enable_isolated_aggregate_filtering`): hosts kept
    /// for the flavors and images that ask for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_traits: Vec<String>,
    /// Weigher multipliers for the aggregate's hosts, in place of the operator's
    /// `--weighers` (Nova's `ram_weight_multiplier`, `cpu_weight_multiplier` and
    /// `disk_weight_multiplier` metadata). A host in several aggregates that set one takes
    /// the smallest.
    #[serde(default, skip_serializing_if = "WeigherMultipliers::is_empty")]
    pub weigher_multipliers: WeigherMultipliers,
}

/// Multipliers by weigher; an absent one leaves the operator's setting.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WeigherMultipliers {
    /// The spread weigher's (the smallest share of capacity a placement leaves free).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
    /// The RAM weigher's (free MEMORY_MB on the host); negative packs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram: Option<f64>,
    /// The CPU weigher's (free VCPU on the host); negative packs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<f64>,
    /// The disk weigher's (free DISK_GB on the host); negative packs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<f64>,
    /// The instances weigher's (consumers holding allocations on the host); positive
    /// packs, as Nova's `num_instances_weight_multiplier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<f64>,
}

impl WeigherMultipliers {
    /// Whether it sets none.
    pub fn is_empty(&self) -> bool {
        self == &WeigherMultipliers::default()
    }
}

/// What the aggregate holds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AggregateStatus {
    /// Root providers (hosts) whose tree is in the aggregate.
    #[serde(default)]
    pub hosts: i64,
    /// Those hosts' names, sorted, at most 20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_names: Vec<String>,
    /// `Valid`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
