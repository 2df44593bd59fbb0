use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CandidateAllocationStatus, Condition, NumaClaim};

/// A server: a consumer that asks for a flavor and an image, is placed on providers, and
/// whose driver metadata is rendered from its service profile.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kubeplace.io",
    derive = "PartialEq",
    version = "v1alpha1",
    kind = "Server",
    plural = "servers",
    shortname = "srv",
    category = "kubeplace",
    namespaced,
    status = "ServerStatus",
    doc = "A server: a flavor and an image to place, flavor metadata for its service profile; its status holds the allocation it was given.",
    printcolumn(
        name = "Flavor",
        type_ = "string",
        json_path = ".spec.flavor",
        description = "The flavor"
    ),
    printcolumn(
        name = "Image",
        type_ = "string",
        json_path = ".spec.image",
        description = "The image"
    ),
    printcolumn(
        name = "Host",
        type_ = "string",
        json_path = ".status.host",
        description = "The root provider the server landed on"
    ),
    printcolumn(
        name = "Scheduled",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Scheduled\")].reason",
        description = "Whether and why the server is placed"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ServerSpec {
    /// The name of the Flavor. Changing it resizes the server: it is placed again.
    pub flavor: String,
    /// The name of the Image. Changing it rebuilds the server where it is; the change is
    /// refused when the new image requires traits the server's providers lack.
    pub image: String,
    /// Per-server flavor metadata handed to the service profile's template as `meta`; only the
    /// profile's `allowedMetaKeys` may be set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flavor_meta: BTreeMap<String, String>,
    /// Which of the flavor's service profiles to use; by default the first enabled one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_profile: Option<String>,
    /// The availability zone to place the server in: an Aggregate's `availabilityZone`, or
    /// `nova` for hosts in no zone's aggregate. Absent: any zone. Read when the server is
    /// placed (and placed again by a resize); a placed server does not move when it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_zone: Option<String>,
    /// The ServerGroup of the namespace the server belongs to, placed by its policy. Set
    /// when the server is created; it cannot change, as in Nova.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// Where the server was placed and what its driver receives.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    /// The consumer uuid of the server's allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<String>,
    /// The name of the Allocation object that holds the server's resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_name: Option<String>,
    /// The root provider (compute node) the server landed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The providers and amounts the server holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocation: Vec<CandidateAllocationStatus>,
    /// For a server with a NUMA topology: each guest cell's host cell, pinned host CPUs per
    /// vCPU, emulator CPU and page size (its Allocation's `spec.numa`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<NumaClaim>,
    /// The service profile whose template was rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_profile: Option<String>,
    /// The service profile's metadata rendered for this server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_object")]
    pub rendered_metadata: Option<serde_json::Value>,
    /// `Scheduled` (reasons `Scheduled`, `Pending`, `NoValidHost`, `TraitConflict`,
    /// `FlavorNotFound`, `ImageNotFound`, `InvalidRequest`) and, when a service profile
    /// applies, `MetadataRendered` (`Rendered`, `RenderFailed`, `NoServiceProfile`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

fn free_form_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "The rendered document, as a mapping.",
        "x-kubernetes-preserve-unknown-fields": true
    })
}
