use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// An operator-defined flavor extra spec: the key it matches, what values it takes,
/// and its documentation. In-tree definitions take precedence over these.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kubeplace.io",
    derive = "PartialEq",
    version = "v1alpha1",
    kind = "ExtraSpecDefinition",
    plural = "extraspecdefinitions",
    shortname = "esd",
    category = "kubeplace",
    status = "ExtraSpecDefinitionStatus",
    doc = "An operator-defined flavor extra spec validator: key pattern, value type and bounds, and documentation.",
    printcolumn(
        name = "Key",
        type_ = "string",
        json_path = ".spec.key",
        description = "The extra spec key pattern"
    ),
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = ".spec.value.type",
        description = "The value type"
    ),
    printcolumn(
        name = "Support",
        type_ = "string",
        json_path = ".spec.supportStatus",
        description = "Support status"
    ),
    printcolumn(
        name = "Valid",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status",
        description = "Whether the definition is usable"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ExtraSpecDefinitionSpec {
    /// The key, with `{name}` placeholders for parameters, e.g. `acme:cache_ways` or
    /// `acme:numa_cache.{node}`. A namespace is the part before the first `:`.
    #[schemars(length(min = 1, max = 255))]
    pub key: String,
    /// What the extra spec does, for the generated documentation.
    pub description: String,
    /// `supported` (default), `experimental` or `deprecated`. Deprecated keys are
    /// admitted with a warning.
    #[serde(default)]
    pub support_status: SupportStatus,
    /// For a deprecated key, the key to use instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
    /// The values the extra spec accepts.
    pub value: ExtraSpecValue,
    /// The placeholders of `key`, each with the pattern its text must match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<ExtraSpecParameter>,
    /// Virt drivers the extra spec works with (documentation only, never enforced).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub virt_drivers: Vec<String>,
    /// Other extra specs this one needs set (documentation only, never enforced).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
}

/// Support status of an extra spec.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SupportStatus {
    /// Supported.
    #[default]
    Supported,
    /// Works but may change.
    Experimental,
    /// Still accepted, with a warning; see `replacement`.
    Deprecated,
}

/// The value an extra spec accepts.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.min) || !has(self.max) || self.min <= self.max").message("min must not exceed max"),
    validation = Rule::new("self.type == 'integer' || (!has(self.min) && !has(self.max))").message("min and max apply only to type integer"),
    validation = Rule::new("self.type == 'string' || (!has(self.pattern) && !has(self.enum))").message("pattern and enum apply only to type string")
)]
pub struct ExtraSpecValue {
    /// `string`, `integer` or `boolean` (Nova's spellings of true and false).
    #[serde(rename = "type")]
    pub type_: ExtraSpecValueType,
    /// What the value means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Smallest integer accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    /// Largest integer accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    /// A regular expression the whole string must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The exact strings accepted (case-sensitive).
    #[serde(default, rename = "enum", skip_serializing_if = "Vec::is_empty")]
    pub enum_: Vec<String>,
}

/// Value types of an extra spec.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ExtraSpecValueType {
    /// Any string, optionally restricted by `pattern` or `enum`.
    String,
    /// A base-10 integer, optionally bounded by `min` and `max`.
    Integer,
    /// `true`/`false` and Nova's other spellings (`1`, `yes`, `on`, …).
    Boolean,
}

/// A placeholder in an extra spec key.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtraSpecParameter {
    /// The placeholder's name, as written between braces in `key`.
    pub name: String,
    /// A regular expression the placeholder's text must match, e.g. `[0-9]+`.
    pub pattern: String,
    /// What the placeholder stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Whether the definition is in use.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtraSpecDefinitionStatus {
    /// `Valid`; `Shadowed` when an in-tree definition already covers the key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
