use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// A Neutron-style service profile: a driver and the metadata handed to it, templated
/// with per-server flavor metadata.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kubeplace.io",
    derive = "PartialEq",
    version = "v1alpha1",
    kind = "ServiceProfile",
    plural = "serviceprofiles",
    shortname = "sp",
    category = "kubeplace",
    status = "ServiceProfileStatus",
    doc = "A service profile: a driver, a Jinja metadata template rendered per server, and the flavor metadata keys users may set.",
    printcolumn(
        name = "Driver",
        type_ = "string",
        json_path = ".spec.driver",
        description = "The driver the metadata is for"
    ),
    printcolumn(
        name = "Enabled",
        type_ = "boolean",
        json_path = ".spec.enabled",
        description = "Whether new servers may use the profile"
    ),
    printcolumn(
        name = "Valid",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status",
        description = "Whether the template parses"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceProfileSpec {
    /// The driver that receives the rendered metadata, e.g. `z23.lbaas.Driver`.
    pub driver: String,
    /// A Jinja template that renders to a YAML or JSON document; `meta` holds the server's
    /// flavor metadata.
    #[serde(default)]
    pub metadata: String,
    /// The `flavorMeta` keys a server may set with this profile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_meta_keys: Vec<String>,
    /// Whether new servers may use the profile.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Free text for operators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

fn default_true() -> bool {
    true
}

/// Whether the template is usable.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceProfileStatus {
    /// `Valid`: the template parses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
