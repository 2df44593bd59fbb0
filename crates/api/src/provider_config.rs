use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// Nova's provider config file as a resource: custom inventories and traits added
/// to providers identified by uuid, name or `$COMPUTE_NODE`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kubeplace.io",
    derive = "PartialEq",
    version = "v1alpha1",
    kind = "ProviderConfig",
    plural = "providerconfigs",
    shortname = "pc",
    category = "kubeplace",
    status = "ProviderConfigStatus",
    doc = "A Nova provider config file: CUSTOM_ inventories and traits merged into the providers it identifies.",
    printcolumn(
        name = "Schema",
        type_ = "string",
        json_path = ".spec.meta.schemaVersion",
        description = "The provider config schema version"
    ),
    printcolumn(
        name = "Matched",
        type_ = "integer",
        json_path = ".status.matchedProviderCount",
        description = "How many providers the entries apply to"
    ),
    printcolumn(
        name = "Conflicts",
        type_ = "integer",
        json_path = ".status.conflictCount",
        description = "How many entries conflict with provider specs or other configs"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigSpec {
    /// The file's `meta` section.
    pub meta: ProviderConfigMeta,
    /// One entry per provider to configure.
    #[serde(default)]
    pub providers: Vec<ProviderConfigEntry>,
}

/// The file's `meta` section.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigMeta {
    /// `"$Major.$minor"` as a string, e.g. `"1.0"`. Any 1.x loads; fields a newer minor
    /// adds are ignored with a warning.
    #[schemars(regex(pattern = r"^1\.(0|[1-9][0-9]*)$"))]
    pub schema_version: String,
}

/// One provider to configure.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigEntry {
    /// Which provider this entry applies to.
    pub identification: ProviderIdentification,
    /// Inventories to add to the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventories: Option<ProviderConfigInventories>,
    /// Traits to add to the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traits: Option<ProviderConfigTraits>,
}

/// Exactly one of `uuid` or `name`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.uuid) != has(self.name)").message("set exactly one of uuid or name"))]
pub struct ProviderIdentification {
    /// The provider's uuid, or `$COMPUTE_NODE` for every root provider with the
    /// `COMPUTE_NODE` trait that no other entry names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The provider's name (the ResourceProvider's `metadata.name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The `inventories` section.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigInventories {
    /// A list of one-entry maps, resource class → inventory, as in Nova's file.
    /// Only `CUSTOM_*` resource classes.
    #[serde(default)]
    pub additional: Vec<BTreeMap<String, ProviderConfigInventory>>,
}

/// An inventory in a provider config; `total` is required, the rest take Placement's defaults.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigInventory {
    /// The amount of the resource.
    pub total: i64,
    /// Held back from consumers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<i64>,
    /// Smallest single allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_unit: Option<i64>,
    /// Largest single allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unit: Option<i64>,
    /// Allocations are multiples of this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_size: Option<i64>,
    /// Overcommit factor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_ratio: Option<f64>,
}

/// The `traits` section.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigTraits {
    /// Traits to add. Only `CUSTOM_*` traits.
    #[serde(default)]
    pub additional: Vec<String>,
}

/// Which providers the config reached and what went wrong.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigStatus {
    /// Names of the providers the entries apply to, sorted, at most 50.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matched_providers: Vec<String>,
    /// How many providers the entries apply to (the list above is capped).
    #[serde(default)]
    pub matched_provider_count: i64,
    /// Identifications that name no existing provider, at most 50.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmatched: Vec<String>,
    /// Conflicts found while merging, one sentence each, at most 50.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// How many conflicts there are (the list above is capped).
    #[serde(default)]
    pub conflict_count: i64,
    /// `Applied`: every entry merged without conflict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
