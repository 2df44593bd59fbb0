use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// The name of the one DefaultProjectQuota that counts.
pub const DEFAULT_PROJECT_QUOTA_NAME: &str = "default";

/// Limits for every project without a ProjectQuota of its own, and for the names a
/// ProjectQuota leaves out: Nova's registered limits.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kubeplace.io",
    derive = "PartialEq",
    version = "v1alpha1",
    kind = "DefaultProjectQuota",
    plural = "defaultprojectquotas",
    shortname = "dpq",
    category = "kubeplace",
    status = "DefaultProjectQuotaStatus",
    doc = "The limits of every project without its own ProjectQuota, and of the names a ProjectQuota leaves out (Nova's registered limits). Only the one named \"default\" exists.",
    printcolumn(
        name = "Projects",
        type_ = "integer",
        json_path = ".status.projects",
        description = "Projects holding claims that it governs"
    ),
    printcolumn(
        name = "Valid",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status",
        description = "Whether the limits are well formed"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DefaultProjectQuotaSpec {
    /// Limits by Nova's unified-limits names, as a ProjectQuota's.
    #[serde(default)]
    pub limits: BTreeMap<String, i64>,
}

/// What the default governs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DefaultProjectQuotaStatus {
    /// Projects holding claims without a ProjectQuota of their own.
    #[serde(default)]
    pub projects: i64,
    /// `Valid`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
