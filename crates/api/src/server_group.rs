use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// How a server group's members are spread over hosts: Nova's server group policies.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ServerGroupPolicy {
    /// Every member on one host; a member that cannot go there is not placed.
    #[serde(rename = "affinity")]
    Affinity,
    /// No two members on one host (or at most `maxServerPerHost`).
    #[serde(rename = "anti-affinity")]
    AntiAffinity,
    /// Members go to the host holding most of them when they can, elsewhere when not.
    #[serde(rename = "soft-affinity")]
    SoftAffinity,
    /// Members go to the host holding fewest of them.
    #[serde(rename = "soft-anti-affinity")]
    SoftAntiAffinity,
}

impl ServerGroupPolicy {
    /// The policy as Nova and manifests write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerGroupPolicy::Affinity => "affinity",
            ServerGroupPolicy::AntiAffinity => "anti-affinity",
            ServerGroupPolicy::SoftAffinity => "soft-affinity",
            ServerGroupPolicy::SoftAntiAffinity => "soft-anti-affinity",
        }
    }
}

/// A server group, as Nova has them: Servers of the namespace that name it in `spec.group`
/// are placed by its policy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kubeplace.io",
    derive = "PartialEq",
    version = "v1alpha1",
    kind = "ServerGroup",
    plural = "servergroups",
    shortname = "sg",
    category = "kubeplace",
    namespaced,
    status = "ServerGroupStatus",
    doc = "A server group: its members (Servers naming it) are placed together or apart by its policy, as Nova's server groups.",
    printcolumn(
        name = "Policy",
        type_ = "string",
        json_path = ".spec.policy",
        description = "How members are spread over hosts"
    ),
    printcolumn(
        name = "Members",
        type_ = "integer",
        json_path = ".status.memberCount",
        description = "Servers naming the group"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ServerGroupSpec {
    /// `affinity`, `anti-affinity`, `soft-affinity` or `soft-anti-affinity`.
    pub policy: ServerGroupPolicy,
    /// With `anti-affinity`: how many members one host may hold (Nova's
    /// `max_server_per_host` rule); 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_server_per_host: Option<i64>,
}

/// Where the members are.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerGroupStatus {
    /// Servers naming the group.
    #[serde(default)]
    pub member_count: i64,
    /// Hosts holding placed members, with how many each holds, at most 20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<ServerGroupHost>,
    /// `Valid`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A host and the group's members on it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerGroupHost {
    pub host: String,
    pub members: i64,
}
