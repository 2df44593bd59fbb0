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
    /// The image's disk format (Glance's `disk_format`). When given, servers booted from
    /// it go only to hosts whose root provider has the trait `COMPUTE_IMAGE_TYPE_<FORMAT>`
    /// (Nova's `query_placement_for_image_type_support`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_format: Option<DiskFormat>,
}

/// A Glance disk format that os-traits has a `COMPUTE_IMAGE_TYPE_*` trait for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DiskFormat {
    Aki,
    Ami,
    Ari,
    Iso,
    Ploop,
    Qcow2,
    Raw,
    Vdi,
    Vhd,
    Vhdx,
    Vmdk,
}

impl DiskFormat {
    /// The trait a compute host has when it can boot this format.
    pub fn support_trait(self) -> String {
        let name = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_ascii_uppercase))
            .unwrap_or_default();
        format!("COMPUTE_IMAGE_TYPE_{name}")
    }
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
