//! Device reservations: what Servers hold of mirrored DRA devices, shown to kube-scheduler.
//! Beside its reservation pods, the leader keeps one ResourceClaim per Server that holds
//! devices ([`kubeplace_policy::mirror::device_reservations`]): in the Server's namespace,
//! owned by it, allocated by kubeplace to exactly those devices and reserved for the Server.
//! kube-scheduler takes an allocated device for in use, so it gives it to no pod; the
//! admission webhook decides the allocations it writes at the claims ledger, which closes
//! the moment before it sees the claim. A claim that does not match (the Server moved or
//! went) is deleted and made again.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{
    CapacityRequirements, DeviceClaim, DeviceRequest, ExactDeviceRequest, ResourceClaim,
    ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tracing::{info, warn};

use super::reservations::{Reservations, delete};
use kubeplace_api::{API_VERSION, GROUP};
use kubeplace_core::placement::derived_provider_uuid;
use kubeplace_policy::mirror::{
    DeviceReservation, RESERVATION_LABEL, allocated_devices, device_reservations,
};

impl Reservations {
    /// One comparison of the device reservations with the claims: claims made, allocated,
    /// or deleted.
    pub(super) async fn device_pass(&self) -> Result<(), kube::Error> {
        let wanted: BTreeMap<(String, String), DeviceReservation> = {
            let store = crate::locks::read(&self.store);
            device_reservations(&store)
                .into_iter()
                .map(|r| ((r.server.namespace.clone(), r.claim_name()), r))
                .collect()
        };
        let all: Api<ResourceClaim> = Api::all(self.client.clone());
        let claims = all
            .list(&ListParams::default().labels(RESERVATION_LABEL))
            .await?;
        let mut present = BTreeSet::new();
        for claim in claims {
            let namespace = claim.namespace().unwrap_or_default();
            let key = (namespace.clone(), claim.name_any());
            let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &namespace);
            match wanted.get(&key) {
                // Deleted (with its Server, or by hand): its devices are given back first.
                _ if claim.metadata.deletion_timestamp.is_some() => {
                    let_go(&api, &claim).await?;
                }
                Some(r) if r.owns(&claim) && allocated_devices(&claim).is_empty() => {
                    present.insert(key.clone());
                    self.allocate(&api, r).await;
                }
                Some(r) if r.owns(&claim) && r.is_allocated_as(&claim) => {
                    present.insert(key);
                }
                _ => {
                    info!(claim = %key.1, namespace = %namespace, "a reservation claim no Server's claim calls for is deleted");
                    let_go(&api, &claim).await?;
                    delete(&api, &key.1).await?;
                }
            }
        }
        for (key, r) in &wanted {
            if present.contains(key) {
                continue;
            }
            let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &key.0);
            match api.create(&PostParams::default(), &claim_for(r)).await {
                Ok(_) => self.allocate(&api, r).await,
                // The one being deleted is still there: made on a later pass.
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Writes the claim's allocation and the Server it is reserved for. Refused (the
    /// Server's claim moved meanwhile), the claim is left for the next pass to judge.
    async fn allocate(&self, api: &Api<ResourceClaim>, r: &DeviceReservation) {
        match api
            .patch_status(
                &r.claim_name(),
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status_for(r) })),
            )
            .await
        {
            Ok(_) => {
                info!(server = %r.server.name, namespace = %r.server.namespace, devices = r.devices.len(), "reservation claim allocated")
            }
            Err(e) => {
                warn!(error = %e, server = %r.server.name, namespace = %r.server.namespace, "a reservation claim could not be allocated; trying again")
            }
        }
    }
}

/// Held on every reservation claim until kubeplace has taken its allocation back. A claim
/// deleted while allocated (by the garbage collector, with its Server) frees its devices
/// without kube-scheduler noticing: pods waiting for them would wait for its next full
/// retry, up to five minutes. A claim whose allocation is taken back sends them back to
/// scheduling at once.
const RESERVATION_FINALIZER: &str = "kubeplace.io/reservation";

/// Takes a reservation claim's allocation back (kube-scheduler then looks again at the pods
/// waiting for devices) and lets it go: the finalizer is removed.
async fn let_go(api: &Api<ResourceClaim>, claim: &ResourceClaim) -> Result<(), kube::Error> {
    let name = claim.name_any();
    let gone = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404);
    if claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some())
    {
        let deallocate = json!({ "status": { "allocation": null, "reservedFor": null } });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(deallocate))
            .await
        {
            Ok(_) => info!(claim = %name, "a reservation claim's devices given back"),
            Err(e) if gone(&e) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    let finalizers = claim.metadata.finalizers.as_deref().unwrap_or_default();
    if let Some(at) = finalizers.iter().position(|f| f == RESERVATION_FINALIZER) {
        // Guarded by a test, so that a concurrent change of the list is not undone.
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "test", "path": format!("/metadata/finalizers/{at}"), "value": RESERVATION_FINALIZER},
            {"op": "remove", "path": format!("/metadata/finalizers/{at}")},
        ]))
        .expect("a well-formed JSON patch");
        match api
            .patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
        {
            Ok(_) => {}
            Err(e) if gone(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The name of the request for the `i`th device.
fn request_name(i: usize) -> String {
    format!("device-{i}")
}

/// The reservation's claim: one request of exactly one device per device held, of the
/// DeviceClass the device's resource class is named after.
fn claim_for(r: &DeviceReservation) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(r.claim_name()),
            namespace: Some(r.server.namespace.clone()),
            labels: Some(BTreeMap::from([(
                RESERVATION_LABEL.to_string(),
                r.server.name.clone(),
            )])),
            owner_references: Some(vec![OwnerReference {
                api_version: API_VERSION.to_string(),
                kind: "Server".to_string(),
                name: r.server.name.clone(),
                uid: r.server_uid.clone(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            finalizers: Some(vec![RESERVATION_FINALIZER.to_string()]),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(
                    r.devices
                        .iter()
                        .enumerate()
                        .map(|(i, d)| DeviceRequest {
                            name: request_name(i),
                            exactly: Some(ExactDeviceRequest {
                                device_class_name: d.device_class.clone(),
                                allocation_mode: Some("ExactCount".into()),
                                count: Some(1),
                                // A shared device: the share the Server's claim holds.
                                capacity: (!d.consumed.is_empty()).then(|| CapacityRequirements {
                                    requests: Some(
                                        d.consumed
                                            .iter()
                                            .map(|(k, v)| (k.clone(), Quantity(v.clone())))
                                            .collect(),
                                    ),
                                }),
                                ..ExactDeviceRequest::default()
                            }),
                            ..DeviceRequest::default()
                        })
                        .collect(),
                ),
                ..DeviceClaim::default()
            }),
        },
        status: None,
    }
}

/// The claim's status: its devices allocated, on their Node when they are on one, and
/// reserved for the Server.
fn status_for(r: &DeviceReservation) -> Value {
    let results: Vec<Value> = r
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut result = json!({"request": request_name(i), "driver": d.id.driver,
                                    "pool": d.id.pool, "device": d.id.device});
            if !d.consumed.is_empty() {
                // A share of a device DRA gives to several claims: what it consumes, and an
                // id of the share, the same for the same Server and device.
                result["consumedCapacity"] = json!(d.consumed);
                result["shareID"] = json!(derived_provider_uuid(&format!(
                    "{}/{}/{}/{}",
                    r.server_uid, d.id.driver, d.id.pool, d.id.device
                )));
            }
            result
        })
        .collect();
    let mut allocation = json!({ "devices": { "results": results } });
    if let Some(node) = r.devices.iter().find_map(|d| d.node.clone()) {
        allocation["nodeSelector"] = json!({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]});
    }
    json!({
        "allocation": allocation,
        "reservedFor": [{"apiGroup": GROUP, "resource": "servers", "name": r.server.name,
                         "uid": r.server_uid}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeplace_api::ServerRef;
    use kubeplace_policy::mirror::{DeviceId, ReservedDevice};

    fn reservation() -> DeviceReservation {
        DeviceReservation {
            server: ServerRef {
                namespace: "ml".into(),
                name: "trainer".into(),
            },
            server_uid: "u1".into(),
            devices: vec![ReservedDevice {
                id: DeviceId {
                    driver: "gpu.example.com".into(),
                    pool: "node-a".into(),
                    device: "gpu-1".into(),
                },
                device_class: "gpu".into(),
                node: Some("node-a".into()),
                consumed: BTreeMap::new(),
            }],
        }
    }

    /// The claim asks for one device of its class per device held, is owned by the Server,
    /// and its status names those devices on their Node, reserved for the Server.
    #[test]
    fn the_claim_names_the_servers_devices() {
        let r = reservation();
        let claim = claim_for(&r);
        let requests = claim
            .spec
            .devices
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!(
            requests[0].exactly.as_ref().unwrap().device_class_name,
            "gpu"
        );
        assert!(r.owns(&claim));
        let status = status_for(&r);
        assert_eq!(
            status["allocation"]["devices"]["results"][0]["device"],
            "gpu-1"
        );
        assert_eq!(
            status["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"]
                [0],
            "node-a"
        );
        assert_eq!(status["reservedFor"][0]["resource"], "servers");
        let mut allocated_claim = claim.clone();
        allocated_claim.status = serde_json::from_value(status).unwrap();
        assert_eq!(allocated_devices(&allocated_claim), r.devices());
        assert!(r.is_allocated_as(&allocated_claim));
        assert!(status_for(&r)["allocation"]["devices"]["results"][0]["shareID"].is_null());
    }

    /// On a shared device the claim asks for the Server's share and its allocation consumes
    /// it under a share id of the Server and device; a share written in another form of the
    /// same amount matches, another amount does not.
    #[test]
    fn a_share_of_a_device_is_requested_and_consumed() {
        let mut r = reservation();
        r.devices[0].consumed = BTreeMap::from([
            ("memory".to_string(), "10240Mi".to_string()),
            ("cores".to_string(), "25".to_string()),
        ]);
        let claim = claim_for(&r);
        let exactly = claim
            .spec
            .devices
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()[0]
            .exactly
            .clone()
            .unwrap();
        assert_eq!(
            exactly.capacity.unwrap().requests.unwrap()["memory"],
            Quantity("10240Mi".into())
        );
        let status = status_for(&r);
        let result = &status["allocation"]["devices"]["results"][0];
        assert_eq!(result["consumedCapacity"]["memory"], "10240Mi");
        assert_eq!(
            result["shareID"],
            status_for(&r)["allocation"]["devices"]["results"][0]["shareID"]
        );
        assert_eq!(result["shareID"].as_str().unwrap().len(), 36);
        let mut allocated = claim.clone();
        allocated.status = serde_json::from_value(status.clone()).unwrap();
        assert!(r.is_allocated_as(&allocated));
        let mut rewritten = status.clone();
        rewritten["allocation"]["devices"]["results"][0]["consumedCapacity"]["memory"] =
            json!("10Gi");
        allocated.status = serde_json::from_value(rewritten).unwrap();
        assert!(r.is_allocated_as(&allocated));
        let mut resized = status;
        resized["allocation"]["devices"]["results"][0]["consumedCapacity"]["memory"] =
            json!("20Gi");
        allocated.status = serde_json::from_value(resized).unwrap();
        assert!(!r.is_allocated_as(&allocated));
    }
}
