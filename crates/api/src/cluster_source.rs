//! The cluster's own objects that the mirror reads (core `v1` Nodes and Pods, and
//! `resource.k8s.io/v1` ResourceSlices, ResourceClaims and DeviceClasses), and the mark
//! on the providers and Allocations mirrored from them.

use std::fmt;

pub use k8s_openapi::api::core::v1::{
    Container, Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
};
pub use k8s_openapi::api::resource::v1::{
    CapacityRequestPolicy, Device, DeviceClass, DeviceRequestAllocationResult, ResourceClaim,
    ResourceSlice,
};
pub use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use crate::Object;

/// The annotation on every mirrored object: what it was mirrored from, as
/// `Node/NAME`, `Pod/NAMESPACE/NAME`, `ResourceSlice/NAME` or `ResourceClaim/NAMESPACE/NAME`.
/// Mirrored objects live in the store only; nothing writes them to the API server.
pub const MIRRORED_FROM_ANNOTATION: &str = "kubeplace.io/mirrored-from";

/// A kind of the cluster the mirror reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SourceKind {
    Node,
    Pod,
    ResourceSlice,
    ResourceClaim,
    DeviceClass,
}

impl SourceKind {
    /// Every kind the mirror reads, in the order they are best listed (classes before the
    /// slices that read them, slices before the claims on their devices).
    pub const ALL: [SourceKind; 5] = [
        SourceKind::DeviceClass,
        SourceKind::Node,
        SourceKind::ResourceSlice,
        SourceKind::Pod,
        SourceKind::ResourceClaim,
    ];

    /// `kind` as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Node => "Node",
            SourceKind::Pod => "Pod",
            SourceKind::ResourceSlice => "ResourceSlice",
            SourceKind::ResourceClaim => "ResourceClaim",
            SourceKind::DeviceClass => "DeviceClass",
        }
    }

    /// `apiVersion` the kind is read as.
    pub fn api_version(self) -> &'static str {
        match self {
            SourceKind::Node | SourceKind::Pod => "v1",
            _ => "resource.k8s.io/v1",
        }
    }

    /// The kind a manifest names, if the mirror reads it.
    pub fn from_name(name: &str) -> Option<SourceKind> {
        SourceKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether objects of the kind live in a namespace.
    pub fn is_namespaced(self) -> bool {
        matches!(self, SourceKind::Pod | SourceKind::ResourceClaim)
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One object of the cluster the mirror reads.
#[derive(Debug, Clone, PartialEq)]
pub enum ClusterSource {
    Node(Box<Node>),
    Pod(Box<Pod>),
    ResourceSlice(Box<ResourceSlice>),
    ResourceClaim(Box<ResourceClaim>),
    DeviceClass(Box<DeviceClass>),
}

/// Why a body does not read as its kind: the dotted path of the field and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field {path}: {message}")]
pub struct SourceError {
    pub path: String,
    pub message: String,
}

impl ClusterSource {
    /// Reads a body of the given kind.
    pub fn from_value(kind: SourceKind, value: Value) -> Result<ClusterSource, SourceError> {
        fn typed<T: serde::de::DeserializeOwned>(value: Value) -> Result<Box<T>, SourceError> {
            serde_path_to_error::deserialize(value)
                .map(Box::new)
                .map_err(|e| SourceError {
                    path: e.path().to_string(),
                    message: e.inner().to_string(),
                })
        }
        Ok(match kind {
            SourceKind::Node => ClusterSource::Node(typed(value)?),
            SourceKind::Pod => ClusterSource::Pod(typed(value)?),
            SourceKind::ResourceSlice => ClusterSource::ResourceSlice(typed(value)?),
            SourceKind::ResourceClaim => ClusterSource::ResourceClaim(typed(value)?),
            SourceKind::DeviceClass => ClusterSource::DeviceClass(typed(value)?),
        })
    }

    /// The object of a body read by the plain readers, as [`ClusterSource::from_value`]
    /// reads the same body as JSON; `None` on any failure, which is read again for its message.
    pub fn from_plain_untracked(
        kind: SourceKind,
        body: &kubeplace_core::yaml_plain::PlainNode<'_>,
    ) -> Option<ClusterSource> {
        use serde::Deserialize;
        Some(match kind {
            SourceKind::Node => ClusterSource::Node(Deserialize::deserialize(body).ok()?),
            SourceKind::Pod => ClusterSource::Pod(Deserialize::deserialize(body).ok()?),
            SourceKind::ResourceSlice => {
                ClusterSource::ResourceSlice(Deserialize::deserialize(body).ok()?)
            }
            SourceKind::ResourceClaim => {
                ClusterSource::ResourceClaim(Deserialize::deserialize(body).ok()?)
            }
            SourceKind::DeviceClass => {
                ClusterSource::DeviceClass(Deserialize::deserialize(body).ok()?)
            }
        })
    }

    /// The object's kind.
    pub fn kind(&self) -> SourceKind {
        match self {
            ClusterSource::Node(_) => SourceKind::Node,
            ClusterSource::Pod(_) => SourceKind::Pod,
            ClusterSource::ResourceSlice(_) => SourceKind::ResourceSlice,
            ClusterSource::ResourceClaim(_) => SourceKind::ResourceClaim,
            ClusterSource::DeviceClass(_) => SourceKind::DeviceClass,
        }
    }

    /// The object's metadata.
    pub fn meta(&self) -> &crate::ObjectMeta {
        match self {
            ClusterSource::Node(o) => &o.metadata,
            ClusterSource::Pod(o) => &o.metadata,
            ClusterSource::ResourceSlice(o) => &o.metadata,
            ClusterSource::ResourceClaim(o) => &o.metadata,
            ClusterSource::DeviceClass(o) => &o.metadata,
        }
    }

    /// Where it lives: its kind, namespace (empty for cluster-scoped kinds) and name.
    pub fn key(&self) -> SourceKey {
        let meta = self.meta();
        SourceKey {
            kind: self.kind(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

/// Where a cluster object lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceKey {
    pub kind: SourceKind,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for SourceKey {
    /// As the [`MIRRORED_FROM_ANNOTATION`] names it: `Pod/default/web-0`, `Node/node1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

impl Object {
    /// What the object was mirrored from (its [`MIRRORED_FROM_ANNOTATION`]), if it was.
    pub fn mirrored_from(&self) -> Option<&str> {
        self.annotation(MIRRORED_FROM_ANNOTATION)
    }

    /// Whether the object was mirrored from the cluster rather than written.
    pub fn is_mirrored(&self) -> bool {
        self.mirrored_from().is_some()
    }
}
