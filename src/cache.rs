//! The operator's cache: one store that the watches fill and that the webhook and the
//! reconciler read.

use std::sync::{Arc, RwLock};

use kube::api::DynamicObject;
use kubeplace_api::{Kind, Object};
use kubeplace_policy::store::Store;

/// The store every part of the operator reads: the watches write it, the webhook and the
/// reconciler read it.
pub type SharedStore = Arc<RwLock<Store>>;

/// Why an object from the API server could not be read as its kind.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ObjectError {
    #[error("{0}")]
    NotJson(#[from] serde_json::Error),
    #[error("field {path}: {message}")]
    Schema { path: String, message: String },
}

/// Reads a watched object as its kind.
pub(crate) fn to_object(kind: Kind, object: &DynamicObject) -> Result<Object, ObjectError> {
    let mut value = serde_json::to_value(object)?;
    // Nothing in kubeplace reads managedFields, and kept they would be most of what a large
    // cloud's objects take in memory: one tree of field names per manager per object.
    if let Some(meta) = value
        .get_mut("metadata")
        .and_then(serde_json::Value::as_object_mut)
    {
        meta.remove("managedFields");
    }
    Object::from_value(kind, value).map_err(|e| ObjectError::Schema {
        path: e.path.to_string(),
        message: e.message.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Watched objects are kept without managedFields; the rest of the metadata stays.
    #[test]
    fn watched_objects_are_kept_without_managed_fields() {
        let sent: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "kubeplace.io/v1alpha1",
            "kind": "ResourceProvider",
            "metadata": {
                "name": "cn1",
                "resourceVersion": "42",
                "labels": {"rack": "r1"},
                "managedFields": [{
                    "manager": "kubeplace",
                    "operation": "Apply",
                    "apiVersion": "kubeplace.io/v1alpha1",
                    "fieldsType": "FieldsV1",
                    "subresource": "status",
                    "fieldsV1": {"f:status": {"f:uuid": {}}},
                }],
            },
            "spec": {"inventories": {"VCPU": {"total": 4}}},
        }))
        .unwrap();
        let object = to_object(Kind::ResourceProvider, &sent).unwrap();
        assert_eq!(object.meta().managed_fields, None);
        assert_eq!(object.meta().resource_version.as_deref(), Some("42"));
        assert_eq!(
            object.meta().labels.as_ref().and_then(|l| l.get("rack")),
            Some(&"r1".to_string())
        );
    }
}
