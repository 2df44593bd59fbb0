use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// A Nova flavor: the size of a server and, through extra specs, where it may run.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kubeplace.io",
    derive = "PartialEq",
    version = "v1alpha1",
    kind = "Flavor",
    plural = "flavors",
    shortname = "flv",
    category = "kubeplace",
    status = "FlavorStatus",
    doc = "A Nova flavor: vCPUs, RAM, disk and extra specs; its status holds the placement request and candidates.",
    printcolumn(
        name = "vCPUs",
        type_ = "integer",
        json_path = ".spec.vcpus",
        description = "Virtual CPUs"
    ),
    printcolumn(
        name = "RAM",
        type_ = "integer",
        json_path = ".spec.memoryMb",
        description = "Memory in MiB"
    ),
    printcolumn(
        name = "Disk",
        type_ = "integer",
        json_path = ".spec.diskGb",
        description = "Root disk in GiB"
    ),
    printcolumn(
        name = "Candidates",
        type_ = "integer",
        json_path = ".status.candidateCount",
        description = "Allocation candidates for this flavor"
    ),
    printcolumn(
        name = "Headroom",
        type_ = "integer",
        json_path = ".status.headroom.servers",
        description = "Servers of this flavor that still fit (at least, when capped)"
    ),
    printcolumn(
        name = "Stopped By",
        type_ = "string",
        json_path = ".status.headroom.stoppedBy",
        description = "Why one more server of this flavor would not fit",
        priority = 1
    ),
    printcolumn(
        name = "Valid",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status",
        description = "Whether the extra specs are valid"
    ),
    printcolumn(
        name = "Schedulable",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Schedulable\")].reason",
        description = "Whether any provider can host the flavor",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct FlavorSpec {
    /// Virtual CPUs; requested as `VCPU`, or `PCPU` with `hw:cpu_policy=dedicated`.
    #[schemars(range(min = 1, max = 2147483647))]
    pub vcpus: i64,
    /// Memory in MiB, requested as `MEMORY_MB`.
    #[schemars(range(min = 1, max = 2147483647))]
    pub memory_mb: i64,
    /// Root disk in GiB; with ephemeral and swap it is requested as `DISK_GB`.
    #[serde(default)]
    #[schemars(range(min = 0, max = 2147483647))]
    pub disk_gb: i64,
    /// Ephemeral disk in GiB.
    #[serde(default)]
    #[schemars(range(min = 0, max = 2147483647))]
    pub ephemeral_gb: i64,
    /// Swap in MiB.
    #[serde(default)]
    #[schemars(range(min = 0, max = 2147483647))]
    pub swap_mb: i64,
    /// Free text shown to users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 65535))]
    pub description: Option<String>,
    /// Whether every project may use the flavor.
    #[serde(default = "default_true")]
    pub is_public: bool,
    /// Extra specs, key to value, as `openstack flavor set --property` sets them: `hw:cpu_policy`,
    /// `trait:HW_CPU_X86_AVX2=required`, `resources:VCPU=0`, `resources1:SRIOV_NET_VF=1`, … Keys
    /// use `[a-zA-Z0-9-_:. ]` and are at most 255 characters; values are at most 255 characters.
    /// How strictly they are checked is set by the annotation `kubeplace.io/extra-spec-validation`
    /// (`strict`, the default; `permissive`; `off`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra_specs: BTreeMap<String, String>,
    /// Names of ServiceProfile objects whose metadata templates serve this flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_profiles: Vec<String>,
}

fn default_true() -> bool {
    true
}

/// The placement request derived from the flavor and where it fits.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorStatus {
    /// The request Nova would send to Placement for this flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<PlacementRequestStatus>,
    /// How many allocation candidates the current providers offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_count: Option<i64>,
    /// The first candidates in Placement's order, at most 10.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<CandidateStatus>,
    /// How many more servers of this flavor fit now. Counted apart from the other fields,
    /// in the background, so it may lag a change by up to the operator's headroom interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<HeadroomStatus>,
    /// `Valid` (extra specs) and `Schedulable` (reasons `Candidates`, `NoCandidates`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Servers of a flavor that still fit: placed one at a time with the scheduler's own
/// choice and claimed as any Allocation is, on a copy of the cloud, until one does not fit.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeadroomStatus {
    /// How many fit.
    pub servers: i64,
    /// Counting stopped at the cap (`--headroom-cap`): at least `servers` fit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capped: bool,
    /// Why one more would not fit, when counting was not capped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// For each namespace with a ProjectQuota (at most 20): how many of them it may still
    /// create, within its quota and the cloud's room both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub within_quota: Vec<QuotaRoom>,
}

/// How many more servers of a flavor a project's quota allows.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotaRoom {
    /// The namespace (or Placement project) the quota governs.
    pub project: String,
    /// The quota that limits it: `ProjectQuota NAMESPACE/NAME` or `DefaultProjectQuota default`.
    pub quota: String,
    /// Servers the quota allows beside what the project holds (no more than fit in the cloud
    /// when the cloud's room is known).
    pub servers: i64,
    /// The limit that stops the next one: `servers` or `class:<RESOURCE_CLASS>`.
    pub limited_by: String,
}

/// A placement request, group by group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementRequestStatus {
    /// The request as Placement's `GET /allocation_candidates` query string.
    pub query: String,
    /// The request groups; the unnumbered group has an empty suffix.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<RequestGroupStatus>,
    /// `none` or `isolate`, when the request has more than one numbered group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_policy: Option<String>,
}

/// One request group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestGroupStatus {
    /// The group suffix (`1`, `_NIC`, …); empty for the unnumbered group.
    #[serde(default)]
    pub suffix: String,
    /// Amount per resource class.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, i64>,
    /// Traits the providers must have.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<String>,
    /// Traits the providers must not have.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbidden: Vec<String>,
}

/// One allocation candidate: which providers would supply what.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CandidateStatus {
    /// Providers and the amounts each would supply.
    pub allocations: Vec<CandidateAllocationStatus>,
}

/// A provider's share of a candidate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CandidateAllocationStatus {
    /// The ResourceProvider's name.
    pub provider: String,
    /// Amount per resource class.
    pub resources: BTreeMap<String, i64>,
}
