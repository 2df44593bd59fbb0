//! Devices kube-scheduler allocates (`resourceclaims/status`, registered with
//! `--mirror-cluster`): an allocation of a device the mirror shows is decided at the claims
//! ledger, beside the Servers' claims, so a device a Server holds (or was given a moment
//! ago) is not given to a pod too. kubeplace's own reservation claims are admitted when
//! they name only devices their Server's claim holds.

use std::collections::BTreeSet;
use std::time::Instant;

use kube::core::admission::{AdmissionResponse, Operation as K8sOperation};
use kubeplace_api::Object;
use kubeplace_api::cluster_source::ResourceClaim;
use kubeplace_policy::admission::Refusal;
use kubeplace_policy::mirror::{
    DeviceId, allocated_devices, claim_allocation, device_list, is_reservation_of_a_server,
    reservation_allocation_problem,
};

use super::review::{Answer, NOT_SYNCED, Webhook, denied, invalid, read_object, read_review};

/// The path's plural, and the kind counted in the metrics.
pub(crate) const PLURAL: &str = "resourceclaims";
pub(crate) const KIND: &str = "ResourceClaim";

impl Webhook {
    /// Answers a review of a ResourceClaim's status.
    pub(super) async fn answer_device_claim(&self, body: &[u8], forwarded: bool) -> Answer {
        let answer = |verdict, response| Answer::new(KIND, verdict, response);
        let request = match read_review(body) {
            Ok(request) => request,
            Err((message, uid)) => return answer("invalid", invalid(message, uid)),
        };
        let response = AdmissionResponse::from(&request);
        let (claim, old) = match (
            read_object::<ResourceClaim>(request.object.as_ref(), KIND),
            read_object::<ResourceClaim>(request.old_object.as_ref(), KIND),
        ) {
            (Ok(Some(claim)), Ok(old)) => (claim, old),
            (Ok(None), _) => return answer("allowed", response),
            (Err(e), _) | (_, Err(e)) => {
                return answer("denied", denied(response, Refusal::Invalid, e));
            }
        };
        let now = allocated_devices(&claim);
        let before = old.as_ref().map(allocated_devices).unwrap_or_default();
        // Only a device newly allocated is a claim on it; a release or any other change of
        // the status takes nothing.
        let added: BTreeSet<DeviceId> = now.difference(&before).cloned().collect();
        if request.operation == K8sOperation::Delete || added.is_empty() {
            return answer("allowed", response);
        }
        if !self.wait_until_synced().await {
            return answer("denied", denied(response, Refusal::Unavailable, NOT_SYNCED));
        }
        if is_reservation_of_a_server(&claim.metadata) {
            return self.reservation(&claim, &added, response);
        }
        if let Some(routed) = self.routed(KIND, PLURAL, body, forwarded, &response).await {
            return routed;
        }
        let decided = {
            let mut claims = crate::locks::lock(&self.claims);
            let store = crate::locks::read(&self.store);
            match claim_allocation(&claim, &store) {
                None => None,
                Some(held) => {
                    let verdict =
                        claims.decide_device_claim(&held, &store, Instant::now(), request.dry_run);
                    Some((held, verdict))
                }
            }
        };
        let verdict = match decided {
            Some((held, verdict)) if verdict.allowed && !request.dry_run => {
                Some(self.recorded(&Object::Allocation(held), verdict).await)
            }
            Some((_, verdict)) => Some(verdict),
            None => None,
        };
        if let Some(v) = &verdict
            && !request.dry_run
        {
            self.metrics.claim(KIND, (!v.allowed).then_some(v.refusal));
        }
        match verdict {
            Some(v) if !v.allowed => answer(
                "denied",
                denied(
                    response,
                    v.refusal,
                    format!(
                        "kubeplace holds {} for another claim: {}",
                        device_list(&added),
                        v.message
                    ),
                ),
            ),
            _ => answer("allowed", response),
        }
    }

    /// A Server's reservation claim names only devices the Server's counted claim holds.
    fn reservation(
        &self,
        claim: &ResourceClaim,
        added: &BTreeSet<DeviceId>,
        response: AdmissionResponse,
    ) -> Answer {
        let problem =
            reservation_allocation_problem(&crate::locks::read(&self.store), claim, added);
        match problem {
            None => Answer::new(KIND, "allowed", response),
            Some(problem) => {
                Answer::new(KIND, "denied", denied(response, Refusal::Denied, problem))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, RwLock};

    use serde_json::{Value, json};
    use tokio::sync::watch;

    use super::*;
    use crate::metrics::Metrics;
    use kubeplace_api::ServerRef;
    use kubeplace_api::manifest::parse_stream;
    use kubeplace_policy::mirror::RESERVATION_LABEL;
    use kubeplace_policy::store::Store;

    const DRIVER: &str = "gpu.example.com";

    /// A mirrored Node with two devices, and Server `ml/trainer` whose claim holds `gpu-0`.
    fn webhook() -> Webhook {
        let mut store = Store::default();
        let mut yaml = String::from(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: node-a\n  annotations: {kubeplace.io/mirrored-from: Node/node-a}\nspec:\n  inventories: {VCPU: {total: 8}}\n",
        );
        for device in ["gpu-0", "gpu-1"] {
            yaml.push_str(&format!(
                "---\napiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: {DRIVER}.node-a.{device}\n  annotations:\n    kubeplace.io/mirrored-from: ResourceSlice/node-a-gpus\n    kubeplace.io/device-driver: {DRIVER}\n    kubeplace.io/device-pool: node-a\n    kubeplace.io/device-name: {device}\nspec:\n  parent: node-a\n  inventories: {{CUSTOM_GPU: {{total: 1}}}}\n"
            ));
        }
        let server = ServerRef {
            namespace: "ml".into(),
            name: "trainer".into(),
        };
        yaml.push_str(&format!(
            "---\napiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {{name: trainer, namespace: ml, uid: uid-trainer}}\nspec: {{flavor: f, image: i}}\n---\napiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: {}\n  labels: {{kubeplace.io/server-namespace: ml, kubeplace.io/server-name: trainer}}\nspec:\n  consumer: 00000000-0000-4000-8000-000000000001\n  allocations:\n  - provider: {DRIVER}.node-a.gpu-0\n    resources: {{CUSTOM_GPU: 1}}\n",
            server.allocation_name()
        ));
        for doc in parse_stream("t.yaml", &yaml).unwrap() {
            store.apply(doc.object().unwrap().unwrap());
        }
        let (_ready, ready) = watch::channel(true);
        Webhook::new(
            Arc::new(RwLock::new(store)),
            ready,
            Arc::new(Metrics::new()),
        )
    }

    /// A status update of ResourceClaim `ml/name` allocating `devices`, as kube-scheduler
    /// sends it; `labels` and `owners` as the claim carries them.
    fn review(name: &str, uid: &str, devices: &[&str], labels: Value, owners: Value) -> Vec<u8> {
        let meta = json!({"name": name, "namespace": "ml", "uid": uid, "labels": labels,
                          "ownerReferences": owners});
        let old = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": meta, "spec": {}});
        let mut new = old.clone();
        new["status"] = json!({"allocation": {"devices": {"results": devices.iter().map(|d| json!(
            {"request": "r", "driver": DRIVER, "pool": "node-a", "device": d})).collect::<Vec<_>>()}}});
        let gvk = json!({"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"});
        let gvr =
            json!({"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"});
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "review-1", "kind": gvk, "resource": gvr, "subResource": "status",
                "requestKind": gvk, "requestResource": gvr,
                "name": name, "namespace": "ml", "operation": "UPDATE",
                "userInfo": {"username": "system:kube-scheduler"},
                "object": new, "oldObject": old, "dryRun": false, "options": null,
            }
        }))
        .unwrap()
    }

    async fn answer(webhook: &Webhook, body: &[u8]) -> (bool, String) {
        let response = webhook
            .review(PLURAL, body)
            .await
            .response
            .expect("a response");
        (response.allowed, response.result.message)
    }

    /// A device a Server holds is refused to a pod's claim, naming it; a free one is
    /// admitted and then held against the next claim.
    #[tokio::test]
    async fn kube_schedulers_allocations_are_decided_beside_the_servers_claims() {
        let webhook = webhook();
        let pod = |name: &str, uid: &str, device: &str| {
            review(name, uid, &[device], json!({}), json!([]))
        };
        let (allowed, message) = answer(
            &webhook,
            &pod("a", "9d1c4c52-0000-4000-8000-00000000000a", "gpu-0"),
        )
        .await;
        assert!(!allowed);
        assert!(
            message.contains("kubeplace holds gpu.example.com/node-a/gpu-0 for another claim"),
            "{message}"
        );
        let (allowed, message) = answer(
            &webhook,
            &pod("b", "9d1c4c52-0000-4000-8000-00000000000b", "gpu-1"),
        )
        .await;
        assert!(allowed, "{message}");
        let (allowed, _) = answer(
            &webhook,
            &pod("c", "9d1c4c52-0000-4000-8000-00000000000c", "gpu-1"),
        )
        .await;
        assert!(!allowed, "gpu-1 was given a moment ago");
        // A device the mirror does not show is not kubeplace's to decide.
        let (allowed, _) = answer(
            &webhook,
            &pod("d", "9d1c4c52-0000-4000-8000-00000000000d", "gpu-9"),
        )
        .await;
        assert!(allowed);
    }

    /// A reservation claim names only devices its Server's claim holds.
    #[tokio::test]
    async fn a_reservation_claim_names_only_its_servers_devices() {
        let webhook = webhook();
        let labels = json!({RESERVATION_LABEL: "trainer"});
        let owners = json!([{"apiVersion": "kubeplace.io/v1alpha1", "kind": "Server",
                             "name": "trainer", "uid": "uid-trainer", "controller": true}]);
        let uid = "9d1c4c52-0000-4000-8000-0000000000ff";
        let own = review("r", uid, &["gpu-0"], labels.clone(), owners.clone());
        assert!(answer(&webhook, &own).await.0);
        let (allowed, message) =
            answer(&webhook, &review("r", uid, &["gpu-1"], labels, owners)).await;
        assert!(!allowed);
        assert!(
            message.contains("Server ml/trainer names gpu.example.com/node-a/gpu-1"),
            "{message}"
        );
    }

    /// What cannot be read is answered so, never admitted.
    #[tokio::test]
    async fn an_unreadable_review_is_refused() {
        let webhook = webhook();
        let (allowed, message) = answer(&webhook, b"{not json").await;
        assert!(!allowed);
        assert!(message.contains("not an AdmissionReview"), "{message}");
        let mut body: Value = serde_json::from_slice(&review(
            "a",
            "9d1c4c52-0000-4000-8000-00000000000a",
            &["gpu-1"],
            json!({}),
            json!([]),
        ))
        .unwrap();
        body["request"]["object"]["status"]["allocation"]["devices"]["results"] = json!("many");
        let (allowed, message) = answer(&webhook, &serde_json::to_vec(&body).unwrap()).await;
        assert!(!allowed);
        assert!(
            message.contains("the ResourceClaim cannot be read"),
            "{message}"
        );
    }
}
