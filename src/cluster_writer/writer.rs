//! Committing the API's writes to the cluster: each object a write changed becomes a
//! create, replace or delete on the API server, made from the resourceVersion the write was
//! decided on, so a concurrent change anywhere (another replica, kubectl) makes it fail with
//! Placement's 409 `placement.concurrent_update` instead of being overwritten. Allocations
//! pass the admission webhook on the way, where every claim is decided.
//!
//! A write that changes several objects (moving a consumer's allocations, a reshape) is
//! recorded whole first and then applied (`whole_writes.rs`): all or nothing, across
//! crashes too.
//!
//! The custom trait and resource class registries are kept in a ConfigMap
//! (`kubeplace-placement-registry` in the operator's namespace), so they survive restarts
//! and every replica learns them. A write saves only the names it created or deleted, from
//! the ConfigMap's current resourceVersion, so replicas saving at once keep each other's.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams, Preconditions};
use std::collections::BTreeMap;

use kubeplace_api::{Kind, Object};
use kubeplace_policy::admission::Refusal;
use kubeplace_policy::store::ObjectKey;

use super::error::{WriteError, Written};
use crate::metrics::{WriteMetrics, WriteOutcome};
use kubeplace_policy::placement_records::{
    CustomNameSet, RegistryChange, apply_registry_changes, registry_lines,
};

/// How many times saving the registries is tried while other replicas save theirs.
const REGISTRY_ATTEMPTS: usize = 20;
/// The ConfigMap that keeps the custom registries.
pub const REGISTRY_CONFIGMAP: &str = "kubeplace-placement-registry";
/// How many times a write is retried over changes of the status alone.
const STATUS_RETRIES: usize = 5;
/// The field manager of the API's writes.
pub(crate) const FIELD_MANAGER: &str = "kubeplace-placement";

/// Where writes go.
pub struct Cluster {
    client: Client,
    runtime: tokio::runtime::Handle,
    namespace: String,
    /// Who records writes of several objects (the replica's identity).
    pub(crate) writer: String,
    /// Each commit's outcome.
    counted: WriteMetrics,
}

/// What a commit made.
#[derive(Debug, Default)]
pub(crate) struct Committed {
    /// The objects as the API server stored them.
    pub objects: Vec<Object>,
    /// The PlacementWrite recorded, applied whole and deleted, for a write of several
    /// objects finished here.
    pub finished_write: Option<String>,
}

impl Cluster {
    /// Writes through `client` on `runtime`; the registries live in `namespace`.
    pub fn new(client: Client, runtime: tokio::runtime::Handle, namespace: String) -> Cluster {
        Cluster {
            client,
            runtime,
            namespace,
            writer: "kubeplace".to_string(),
            counted: WriteMetrics::default(),
        }
    }

    /// Counts each commit's outcome into `metrics` (the operator's, registered).
    pub fn counting_in(mut self, metrics: WriteMetrics) -> Cluster {
        self.counted = metrics;
        self
    }

    /// Records writes of several objects as written by `identity`.
    pub fn writing_as(mut self, identity: &str) -> Cluster {
        self.writer = identity.to_string();
        self
    }

    pub(crate) fn api(&self, kind: Kind) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &kind.api_resource())
    }

    /// Commits a write's changes (key, before, after): one object as one request to the API
    /// server; several as one recorded write (`Cluster::commit_whole`), all or nothing.
    /// The objects as written.
    pub(crate) fn commit(
        &self,
        changes: &[(ObjectKey, Option<Object>, Option<Object>)],
    ) -> Result<Committed, WriteError> {
        let committed = self.commit_uncounted(changes);
        if !changes.is_empty() {
            self.counted.count(match &committed {
                Ok(_) => WriteOutcome::Written,
                Err(WriteError::Refused { refusal, .. }) => WriteOutcome::Refused(*refusal),
                Err(WriteError::KeptChanging(_)) => WriteOutcome::KeptChanging,
                Err(WriteError::Unavailable(_)) => WriteOutcome::Unavailable,
                Err(WriteError::Internal) => WriteOutcome::Internal,
            });
        }
        committed
    }

    fn commit_uncounted(
        &self,
        changes: &[(ObjectKey, Option<Object>, Option<Object>)],
    ) -> Result<Committed, WriteError> {
        match changes {
            [] => Ok(Committed::default()),
            [(key, before, after)] => self
                .runtime
                .block_on(self.step(key, before.as_ref(), after.as_ref()))
                .map(|written| Committed {
                    objects: written.into_iter().collect(),
                    finished_write: None,
                }),
            _ => self.runtime.block_on(self.commit_whole(changes)),
        }
    }

    /// One change; a conflict that only the status or metadata caused (the leader writes
    /// statuses, which moves the resourceVersion but not `metadata.generation`) is retried
    /// from the current resourceVersion, a change of the spec is Placement's 409.
    async fn step(
        &self,
        key: &ObjectKey,
        before: Option<&Object>,
        after: Option<&Object>,
    ) -> Result<Option<Object>, WriteError> {
        let mut version = before.and_then(|b| b.meta().resource_version.clone());
        for _ in 0..STATUS_RETRIES {
            match self.try_step(key, before, after, version.clone()).await {
                Err(kube::Error::Api(s)) if s.code == 409 && before.is_some() => {
                    let api = self.api(key.kind);
                    let current = api
                        .get_opt(&key.name)
                        .await
                        .map_err(|e| refused_by_api_server(key.kind, e))?;
                    let same_spec = current.as_ref().is_some_and(|c| {
                        c.metadata.generation == before.and_then(|b| b.meta().generation)
                    });
                    if !same_spec {
                        return Err(refused_by_api_server(key.kind, kube::Error::Api(s)));
                    }
                    version = current.and_then(|c| c.metadata.resource_version);
                }
                other => return other.map_err(|e| refused_by_api_server(key.kind, e)),
            }
        }
        Err(WriteError::KeptChanging(format!(
            "the {} {} kept changing while it was written; retry",
            key.kind, key.name
        )))
    }

    async fn try_step(
        &self,
        key: &ObjectKey,
        before: Option<&Object>,
        after: Option<&Object>,
        version: Option<String>,
    ) -> Result<Option<Object>, kube::Error> {
        let api = self.api(key.kind);
        match (before, after) {
            (Some(before), None) => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        resource_version: version,
                        uid: before.meta().uid.clone(),
                    }),
                    ..Default::default()
                };
                match api.delete(&key.name, &params).await {
                    // Gone already: what the write wanted.
                    Ok(_) => Ok(None),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
                    Err(e) => Err(e),
                }
            }
            (before, Some(after)) => {
                let mut body = after.clone();
                body.meta_mut().resource_version = version;
                let dynamic =
                    to_dynamic(&body).map_err(|e| kube::Error::Service(e.to_string().into()))?;
                let params = PostParams {
                    field_manager: Some(FIELD_MANAGER.to_string()),
                    ..Default::default()
                };
                let stored = match before {
                    Some(_) => api.replace(&key.name, &params, &dynamic).await?,
                    None => api.create(&params, &dynamic).await?,
                };
                let object = crate::cache::to_object(key.kind, &stored)
                    .map_err(|e| kube::Error::Service(e.to_string().into()))?;
                Ok(Some(object))
            }
            (None, None) => Ok(None),
        }
    }

    /// An object as the API server has it now; none when absent.
    pub(crate) async fn read(&self, key: &ObjectKey) -> Result<Option<Object>, String> {
        match self.api(key.kind).get_opt(&key.name).await {
            Ok(Some(found)) => crate::cache::to_object(key.kind, &found)
                .map(Some)
                .map_err(|e| format!("the {} {} cannot be read: {e}", key.kind, key.name)),
            Ok(None) => Ok(None),
            Err(e) => Err(format!("the {} {} cannot be read: {e}", key.kind, key.name)),
        }
    }

    /// The objects as the API server has them now (none: absent); those that cannot be
    /// read are left out.
    pub(crate) fn read_back(&self, keys: &[ObjectKey]) -> Vec<(ObjectKey, Option<Object>)> {
        self.runtime.block_on(async {
            let mut found = Vec::new();
            for key in keys {
                match self.read(key).await {
                    Ok(object) => found.push((key.clone(), object)),
                    Err(e) => {
                        tracing::warn!(error = %e, "could not read an object back after a failed write")
                    }
                }
            }
            found
        })
    }

    /// The custom traits and resource classes kept in the cluster.
    pub(crate) fn load_registries(&self) -> Result<(CustomNameSet, CustomNameSet), String> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let found = self
            .runtime
            .block_on(api.get_opt(REGISTRY_CONFIGMAP))
            .map_err(|e| format!("reading ConfigMap {REGISTRY_CONFIGMAP}: {e}"))?;
        Ok(registry_sets(found.as_ref()))
    }

    /// Adds and removes names in the registries kept in the cluster. Each attempt reads the
    /// ConfigMap and writes it back from the resourceVersion it read, so names another
    /// replica saved in between are kept: its write makes this one conflict and try again.
    pub(crate) fn save_registry_changes(
        &self,
        changes: &[RegistryChange],
    ) -> Result<(), WriteError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let unavailable = |e: kube::Error| {
            WriteError::Unavailable(format!(
                "the registry of custom traits and resource classes could not be saved in ConfigMap {REGISTRY_CONFIGMAP}: {e}"
            ))
        };
        for _ in 0..REGISTRY_ATTEMPTS {
            let found = self
                .runtime
                .block_on(api.get_opt(REGISTRY_CONFIGMAP))
                .map_err(unavailable)?;
            let (mut traits, mut classes) = registry_sets(found.as_ref());
            apply_registry_changes(&mut traits, &mut classes, changes, false);
            let body = ConfigMap {
                metadata: kube::api::ObjectMeta {
                    name: Some(REGISTRY_CONFIGMAP.to_string()),
                    namespace: Some(self.namespace.clone()),
                    resource_version: found
                        .as_ref()
                        .and_then(|c| c.metadata.resource_version.clone()),
                    ..Default::default()
                },
                data: Some(BTreeMap::from([
                    ("traits".to_string(), registry_lines(&traits)),
                    ("resourceClasses".to_string(), registry_lines(&classes)),
                ])),
                ..Default::default()
            };
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..Default::default()
            };
            let written = match found {
                Some(_) => self
                    .runtime
                    .block_on(api.replace(REGISTRY_CONFIGMAP, &params, &body)),
                None => self.runtime.block_on(api.create(&params, &body)),
            };
            match written {
                Ok(_) => return Ok(()),
                // Another replica wrote first (or created it first): read again.
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => return Err(unavailable(e)),
            }
        }
        Err(WriteError::KeptChanging(format!(
            "ConfigMap {REGISTRY_CONFIGMAP} kept changing under {REGISTRY_ATTEMPTS} attempts to save the registry; retry."
        )))
    }
}

/// The names kept in the registry ConfigMap, traits and resource classes, each in the order
/// of its lines: the order they were created.
fn registry_sets(found: Option<&ConfigMap>) -> (CustomNameSet, CustomNameSet) {
    let data = found.and_then(|c| c.data.as_ref());
    let set = |key: &str| -> CustomNameSet {
        data.and_then(|d| d.get(key))
            .map(|v| {
                v.lines()
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    (set("traits"), set("resourceClasses"))
}

/// An object as the dynamic client sends it.
pub(crate) fn to_dynamic(object: &Object) -> Result<DynamicObject, String> {
    let mut value = object.to_value();
    if let Some(m) = value.as_object_mut() {
        m.remove("status");
    }
    whole_numbers_as_integers(&mut value);
    serde_json::from_value(value)
        .map_err(|e| format!("object {} could not be encoded: {e}", object.name()))
}

/// Writes `1.0` as `1`. The API server compares an update with the stored object as it
/// decoded them, where a number stored as `1` is an integer and `1.0` sent is a float: an
/// allocation ratio of 1.0 sent back unchanged would count as a change of the spec and move
/// `metadata.generation` (and with it Placement's generation).
fn whole_numbers_as_integers(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(fields) => fields.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

/// What the API server's refusal of a step means, read from the Status' code and reason (the
/// webhook's, as the API server passed it on, or the API server's own).
pub(crate) fn refused_by_api_server(kind: Kind, e: kube::Error) -> WriteError {
    let written = if kind == Kind::Allocation {
        Written::Claim
    } else {
        Written::Provider
    };
    let kube::Error::Api(s) = e else {
        return WriteError::Unavailable(format!("the write could not be made in the cluster: {e}"));
    };
    let Some(refusal) = Refusal::of_status(s.code, &s.reason) else {
        return WriteError::Unavailable(format!(
            "the write could not be made in the cluster: {}",
            s.message
        ));
    };
    let detail = match (refusal, written) {
        (Refusal::Stale, _) => format!(
            "Another writer changed the {kind} first ({}); read it again and retry.",
            s.message
        ),
        (Refusal::Busy, _) => format!(
            "Another writer is changing the {kind} ({}); read it again and retry.",
            s.message
        ),
        (Refusal::Unavailable, _) => format!(
            "Claims cannot be decided just now ({}); retry in a moment.",
            s.message
        ),
        (_, Written::Claim) => format!("Unable to allocate inventory: {}", s.message),
        (_, Written::Provider) => s.message.clone(),
    };
    WriteError::Refused {
        refusal,
        written,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::{registry_sets, whole_numbers_as_integers};
    use serde_json::json;

    #[test]
    fn the_registry_is_read_in_the_order_of_its_lines() {
        let map = k8s_openapi::api::core::v1::ConfigMap {
            data: Some(
                [
                    (
                        "traits".to_string(),
                        "CUSTOM_Z\n\nCUSTOM_A\nCUSTOM_M\n".to_string(),
                    ),
                    (
                        "resourceClasses".to_string(),
                        "CUSTOM_B\nCUSTOM_A".to_string(),
                    ),
                ]
                .into(),
            ),
            ..Default::default()
        };
        let (traits, classes) = registry_sets(Some(&map));
        assert_eq!(
            traits.iter().collect::<Vec<_>>(),
            ["CUSTOM_Z", "CUSTOM_A", "CUSTOM_M"]
        );
        assert_eq!(classes.iter().collect::<Vec<_>>(), ["CUSTOM_B", "CUSTOM_A"]);
        let (traits, classes) = registry_sets(None);
        assert!(traits.is_empty() && classes.is_empty());
    }

    #[test]
    fn whole_numbers_are_sent_as_the_api_server_stores_them() {
        let mut v = json!({"a": 1.0, "b": [2.0, 1.5], "c": {"d": 16.0, "e": -3.0}, "f": 7});
        whole_numbers_as_integers(&mut v);
        assert_eq!(
            v.to_string(),
            r#"{"a":1,"b":[2,1.5],"c":{"d":16,"e":-3},"f":7}"#
        );
    }
}
