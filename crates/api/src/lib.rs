//! The custom resource types of `kubeplace.io/v1alpha1`, one file per kind.
//!
//! These are the API as Kubernetes sees it: serde and schemars types that the CRDs are
//! generated from. The core has its own model types; `kubeplace-policy`'s `translate`
//! turns one into the other.

// kube's derive takes one `printcolumn(...)` per column, which clippy mistakes for
// repeated attributes.
#![allow(clippy::duplicated_attributes)]
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod cluster_source;
pub mod fields;
pub mod manifest;
pub mod provider_name;

mod aggregate;
mod allocation;
mod conditions;
mod default_project_quota;
mod extra_spec_definition;
mod flavor;
mod image;
mod kind;
mod object;
mod placement_write;
mod project_quota;
mod provider_config;
mod resource_provider;
mod server;
mod server_group;
mod server_ref;
mod service_profile;
mod sorted_map;

pub use aggregate::*;
pub use allocation::*;
pub use conditions::*;
pub use default_project_quota::*;
pub use extra_spec_definition::*;
pub use flavor::*;
pub use image::*;
/// Every object's metadata, as the API server keeps it.
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
pub use kind::Kind;
pub use object::*;
pub use placement_write::*;
pub use project_quota::*;
pub use provider_config::*;
pub use resource_provider::*;
pub use server::*;
pub use server_group::*;
pub use server_ref::{
    SERVER_NAME_LABEL, SERVER_NAMESPACE_LABEL, ServerRef, allocation_name, allocation_server,
    consumer_uuid,
};
pub use service_profile::*;
pub use sorted_map::{Entry as SortedMapEntry, SortedMap};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// The API group of every kubeplace kind.
pub const GROUP: &str = "kubeplace.io";
/// The one served version.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` as written in manifests.
pub const API_VERSION: &str = "kubeplace.io/v1alpha1";

/// Annotation that selects how strictly a Flavor's extra specs are checked.
pub const EXTRA_SPEC_VALIDATION_ANNOTATION: &str = "kubeplace.io/extra-spec-validation";

/// Every CRD kubeplace defines, in a stable order (the order of `kubeplace crds`).
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    vec![
        ResourceProvider::crd(),
        Allocation::crd(),
        ProviderConfig::crd(),
        ExtraSpecDefinition::crd(),
        Flavor::crd(),
        Image::crd(),
        ServiceProfile::crd(),
        Server::crd(),
        Aggregate::crd(),
        ServerGroup::crd(),
        PlacementWrite::crd(),
        ProjectQuota::crd(),
        DefaultProjectQuota::crd(),
    ]
}
