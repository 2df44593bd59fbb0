use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// Marks an object written as part of a PlacementWrite, with the write's name: readers take
/// it as that write's, and the leader's admission lets it through as already decided.
pub const WRITE_ANNOTATION: &str = "placement.kubeplace.io/write";

/// One Placement API write that changes several objects (a move of allocations between
/// consumers, a reshape), recorded before any of them is changed. Its creation is the
/// write's commit point: the leader decides it whole, every replica shows all of its
/// changes from the moment it sees it, and whoever finds it open later (its writer, or the
/// leader once the writer is gone) finishes applying it and deletes it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kubeplace.io",
    derive = "PartialEq",
    version = "v1alpha1",
    kind = "PlacementWrite",
    plural = "placementwrites",
    shortname = "pw",
    category = "kubeplace",
    status = "PlacementWriteStatus",
    doc = "A Placement API write of several objects, open while it is applied: decided whole at its creation, finished by its writer or the leader, then deleted.",
    printcolumn(
        name = "Writer",
        type_ = "string",
        json_path = ".spec.writer",
        description = "The replica that decided it"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct PlacementWriteSpec {
    /// The replica that decided the write (its identity on the leader Lease).
    pub writer: String,
    /// The objects the write changes.
    pub changes: Vec<WriteChange>,
}

/// One object a write changes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteChange {
    /// `Allocation` or `ResourceProvider`.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The version the write was decided on; absent when the write creates the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<WrittenVersion>,
    /// The object as the write leaves it (metadata and spec); absent when the write deletes
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_object")]
    pub after: Option<serde_json::Value>,
}

/// Which version of an object a write was decided on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WrittenVersion {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Its `metadata.generation`: a version whose spec is the same (its status written
    /// since) is still the one decided on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}

/// What the leader reports while it finishes a write its writer left open.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementWriteStatus {
    /// `Applied` `False` with the reason a change could not be made yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

fn free_form_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "The object's metadata and spec, as written.",
        "x-kubernetes-preserve-unknown-fields": true
    })
}
