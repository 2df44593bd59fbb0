use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// A project's limits, as Nova's unified limits name them: the namespace's Servers, and the
/// Placement API consumers of its project, are charged against them when their claims are
/// decided.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kubeplace.io",
    derive = "PartialEq",
    version = "v1alpha1",
    kind = "ProjectQuota",
    plural = "projectquotas",
    shortname = "pq",
    category = "kubeplace",
    namespaced,
    status = "ProjectQuotaStatus",
    doc = "A project's quota: limits on its servers and resource classes, decided with every claim of the namespace's Servers and of its Placement project's consumers.",
    printcolumn(
        name = "Project",
        type_ = "string",
        json_path = ".status.projectId",
        description = "The Placement project id it governs beside the namespace"
    ),
    printcolumn(
        name = "Usage",
        type_ = "string",
        json_path = ".status.summary",
        description = "Usage against each limit"
    ),
    printcolumn(
        name = "Valid",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status",
        description = "Whether the limits are well formed and the quota is the project's only one"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProjectQuotaSpec {
    /// Limits by Nova's unified-limits names: `servers`, or `class:<RESOURCE_CLASS>`
    /// (`class:VCPU`, `class:MEMORY_MB`, `class:CUSTOM_GPU`), to an integer of at least 0,
    /// or -1 for no limit. A name left out takes the DefaultProjectQuota's limit, if any.
    #[serde(default)]
    pub limits: BTreeMap<String, i64>,
    /// The Placement project id whose API consumers the quota governs too; the namespace's
    /// name when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
}

/// What the project uses against each limit.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectQuotaStatus {
    /// The Placement project id governed beside the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// Per limit name: the limit in force (the quota's own or the default's) and the usage.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub usage: BTreeMap<String, QuotaUsage>,
    /// Usage against each limit in one line, as `kubectl get` shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// `Valid`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// One limit and what is charged against it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotaUsage {
    /// The limit; -1 for none.
    pub limit: i64,
    /// What the project's claims hold now.
    pub used: i64,
}
