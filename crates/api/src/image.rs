use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// A Glance image's scheduling-relevant metadata.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kubeplace.io",
    derive = "PartialEq",
    version = "v1alpha1",
    kind = "Image",
    plural = "images",
    shortname = "img",
    category = "kubeplace",
    status = "ImageStatus",
    doc = "A Glance image's properties (hw_*, os_*, trait:NAME=required) and minimum disk and RAM.",
    printcolumn(
        name = "Min-Disk",
        type_ = "integer",
        json_path = ".spec.minDiskGb",
        description = "Minimum root disk in GiB"
    ),
    printcolumn(
        name = "Min-RAM",
        type_ = "integer",
        json_path = ".spec.minRamMb",
        description = "Minimum RAM in MiB"
    ),
    printcolumn(
        name = "Valid",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status",
        description = "Whether the properties are valid"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    /// Glance additional properties: `hw_*`, `os_*`, `img_*`, … and `trait:NAME` with the
    /// value `required`, which adds NAME to the unnumbered request group of any server booted
    /// from this image.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
    /// The smallest root disk, in GiB, the image boots from.
    #[serde(default)]
    #[schemars(range(min = 0, max = 2147483647))]
    pub min_disk_gb: i64,
    /// The least RAM, in MiB, the image boots with.
    #[serde(default)]
    #[schemars(range(min = 0, max = 2147483647))]
    pub min_ram_mb: i64,
}

/// What the image asks of the hosts it runs on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageStatus {
    /// Traits from `trait:NAME=required` properties, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_traits: Vec<String>,
    /// Each flavor with the number of allocation candidates it has together with this image
    /// (the image's traits joined to the flavor's request), at most 50.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors: Vec<ImageFlavorStatus>,
    /// `Valid`, and `Schedulable` (reasons `Candidates`, `NoCandidates`, `TraitConflict`, `NoFlavors`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// How one flavor fares with this image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageFlavorStatus {
    /// The Flavor's name.
    pub flavor: String,
    /// Allocation candidates for the flavor's request plus the image's required traits.
    pub candidate_count: i64,
    /// A trait the flavor forbids and the image requires, which makes the pair unschedulable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trait_conflict: Option<String>,
}
