//! Pods and ResourceClaims labelled `kubeplace.io/reservation-for` (registered with
//! `--mirror-cluster`, selected by that label): the mirror leaves such objects out, since a
//! Server's claim already counts what they hold, so one is admitted only as the reservation
//! kubeplace itself makes for that Server.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionResponse, Operation as K8sOperation};
use kubeplace_api::cluster_source::{Pod, ResourceClaim};
use kubeplace_policy::admission::Refusal;
use kubeplace_policy::mirror::{
    RESERVATION_LABEL, reservation_claim_problem, reservation_pod_problem,
};

use super::review::{Answer, NOT_SYNCED, Webhook, denied, invalid, read_object, read_review};

/// The path's plural, and the kind counted in the metrics.
pub(crate) const PLURAL: &str = "reservations";
pub(crate) const KIND: &str = "Reservation";

/// Whether an object carries the reservation label.
fn labelled(object: Option<&DynamicObject>) -> bool {
    object
        .and_then(|o| o.metadata.labels.as_ref())
        .is_some_and(|l| l.contains_key(RESERVATION_LABEL))
}

impl Webhook {
    /// Answers a review of a pod or ResourceClaim labelled a reservation.
    pub(super) async fn answer_reservation(&self, body: &[u8]) -> Answer {
        let answer = |verdict, response| Answer::new(KIND, verdict, response);
        let request = match read_review(body) {
            Ok(request) => request,
            Err((message, uid)) => return answer("invalid", invalid(message, uid)),
        };
        let response = AdmissionResponse::from(&request);
        // Only an object that becomes a reservation here is judged: made so, or labelled
        // so by this change. A reservation changed otherwise (its status, its deletion)
        // stays one.
        let becomes = match request.operation {
            K8sOperation::Create => true,
            K8sOperation::Update => !labelled(request.old_object.as_ref()),
            _ => false,
        };
        if !becomes || !labelled(request.object.as_ref()) {
            return answer("allowed", response);
        }
        if !self.wait_until_synced().await {
            return answer("denied", denied(response, Refusal::Unavailable, NOT_SYNCED));
        }
        let problem = {
            let store = crate::locks::read(&self.store);
            match request.kind.kind.as_str() {
                "Pod" => read_object::<Pod>(request.object.as_ref(), "Pod")
                    .map(|pod| pod.and_then(|p| reservation_pod_problem(&store, &p))),
                "ResourceClaim" => {
                    read_object::<ResourceClaim>(request.object.as_ref(), "ResourceClaim")
                        .map(|claim| claim.and_then(|c| reservation_claim_problem(&store, &c)))
                }
                other => Err(format!(
                    "kubeplace judges pods and ResourceClaims labelled {RESERVATION_LABEL}, not {other}"
                )),
            }
        };
        match problem {
            Ok(None) => answer("allowed", response),
            Ok(Some(problem)) | Err(problem) => answer(
                "denied",
                denied(
                    response,
                    Refusal::Denied,
                    format!(
                        "{} {:?} is not a reservation kubeplace makes: {problem}",
                        request.kind.kind, request.name
                    ),
                ),
            ),
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
    use kubeplace_policy::store::Store;

    fn review(operation: &str, object: Value, old: Value) -> Vec<u8> {
        let gvk = json!({"group": "", "version": "v1", "kind": "Pod"});
        let gvr = json!({"group": "", "version": "v1", "resource": "pods"});
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "review-1", "kind": gvk, "resource": gvr,
                "requestKind": gvk, "requestResource": gvr,
                "name": "p", "namespace": "shop", "operation": operation,
                "userInfo": {"username": "someone"},
                "object": object, "oldObject": old, "dryRun": false, "options": null,
            }
        }))
        .unwrap()
    }

    fn pod(labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p", "namespace": "shop", "labels": labels},
               "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})
    }

    /// A pod labelled a reservation for a Server that holds nothing is refused, naming the
    /// label; a pod without the label, or one that already was a reservation, is not judged.
    #[tokio::test]
    async fn only_kubeplace_makes_reservations() {
        let (_ready, ready) = watch::channel(true);
        let webhook = Webhook::new(
            Arc::new(RwLock::new(Store::default())),
            ready,
            Arc::new(Metrics::new()),
        );
        let labelled = pod(json!({RESERVATION_LABEL: "web"}));
        let answer = |body: Vec<u8>| {
            let webhook = &webhook;
            async move {
                let r = webhook.review(PLURAL, &body).await.response.unwrap();
                (r.allowed, r.result.message)
            }
        };
        let (allowed, message) = answer(review("CREATE", labelled.clone(), Value::Null)).await;
        assert!(!allowed);
        assert!(
            message.contains("Pod \"p\" is not a reservation kubeplace makes")
                && message.contains("kubeplace.io/reservation-for=\"web\""),
            "{message}"
        );
        assert!(
            answer(review("CREATE", pod(json!({})), Value::Null))
                .await
                .0
        );
        assert!(
            answer(review("UPDATE", labelled.clone(), labelled.clone()))
                .await
                .0
        );
        // Labelled by an update: judged as a creation is.
        assert!(!answer(review("UPDATE", labelled, pod(json!({})))).await.0);
    }
}
