use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A condition in the shape Kubernetes tooling expects (`kubectl wait --for=condition=…`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The aspect this condition reports on, e.g. `Valid`, `Schedulable`, `Applied`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A one-word, CamelCase reason a program can match on, e.g. `NoCandidates`.
    pub reason: String,
    /// A sentence for people explaining the reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the status last changed, RFC 3339. Set by the operator; absent in `kubeplace apply` output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// The `metadata.generation` this condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// A condition with status `True` or `False` and no timestamp.
    pub fn new(type_: &str, ok: bool, reason: &str, message: impl Into<String>) -> Self {
        Condition {
            type_: type_.to_string(),
            status: if ok { "True" } else { "False" }.to_string(),
            reason: reason.to_string(),
            message: message.into(),
            last_transition_time: None,
            observed_generation: None,
        }
    }
}

/// Looks up a condition by type.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}
