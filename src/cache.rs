//! The operator's cache: one store that the watches fill and that the webhook and the
//! reconciler read.

use std::sync::{Arc, RwLock};

use kube::api::DynamicObject;
use kubeplace_api::{Kind, Object};
use kubeplace_policy::store::Store;

/// The store every part of the operator reads: the watches write it, the webhook and the
/// reconciler read it.
pub type SharedStore = Arc<RwLock<Store>>;

/// Reads a watched object as its kind.
pub(crate) fn to_object(kind: Kind, object: &DynamicObject) -> Result<Object, String> {
    let value = serde_json::to_value(object).map_err(|e| e.to_string())?;
    Object::from_value(kind, value).map_err(|e| format!("field {}: {}", e.path, e.message))
}

/// An object's resourceVersion as a number (etcd's revision, which grows with every write);
/// none when it has none or it is not a number.
pub(crate) fn resource_version(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<u64> {
    meta.resource_version.as_deref()?.parse().ok()
}
