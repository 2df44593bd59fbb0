//! Devices kube-scheduler allocates (`resourceclaims/status`, registered with
//! `--mirror-cluster`): an allocation of a device the mirror shows is decided at the claims
//! ledger, beside the Servers' claims, so a device a Server holds (or was given a moment
//! ago) is not given to a pod too. kubeplace's own reservation claims are admitted when
//! they name only devices their Server's claim holds.

use std::collections::BTreeSet;
use std::time::Instant;

use kube::core::admission::{AdmissionResponse, Operation as K8sOperation};
use kubeplace_api::ServerRef;
use kubeplace_api::cluster_source::ResourceClaim;
use kubeplace_policy::mirror::{
    DeviceId, RESERVATION_LABEL, allocated_devices, claim_allocation, devices_held_by,
    is_reservation_of_a_server,
};

use super::{Answer, Webhook, denied, invalid, read_review};

/// The path's plural, and the kind counted in the metrics.
pub(crate) const PLURAL: &str = "resourceclaims";
pub(crate) const KIND: &str = "ResourceClaim";

fn named(devices: &BTreeSet<DeviceId>) -> String {
    devices
        .iter()
        .map(|d| format!("{}/{}/{}", d.driver, d.pool, d.device))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Webhook {
    /// Answers a review of a ResourceClaim's status.
    pub(super) async fn answer_device_claim(&self, body: &[u8], forwarded: bool) -> Answer {
        let answer = |verdict: &'static str, response: AdmissionResponse| Answer {
            kind: KIND.to_string(),
            verdict,
            response,
        };
        let request = match read_review(body) {
            Ok(request) => request,
            Err((message, uid)) => return answer("invalid", invalid(message, uid)),
        };
        let response = AdmissionResponse::from(&request);
        let read =
            |o: Option<&kube::core::DynamicObject>| -> Result<Option<ResourceClaim>, String> {
                o.map(|o| {
                    serde_json::to_value(o)
                        .and_then(serde_json::from_value)
                        .map_err(|e| format!("the ResourceClaim cannot be read: {e}"))
                })
                .transpose()
            };
        let (claim, old) = match (
            read(request.object.as_ref()),
            read(request.old_object.as_ref()),
        ) {
            (Ok(Some(claim)), Ok(old)) => (claim, old),
            (Ok(None), _) => return answer("allowed", response),
            (Err(e), _) | (_, Err(e)) => return answer("denied", denied(response, e)),
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
            return answer(
                "denied",
                denied(
                    response,
                    "kubeplace is starting and has not listed every object yet; try again in a few seconds",
                ),
            );
        }
        if is_reservation_of_a_server(&claim.metadata) {
            return self.reservation(&claim, &added, response);
        }
        if let Some(routed) = self.routed(KIND, PLURAL, body, forwarded, &response).await {
            return routed;
        }
        let verdict = {
            let mut claims = crate::locks::lock(&self.claims);
            let store = crate::locks::read(&self.store);
            match claim_allocation(&claim, &store) {
                None => None,
                Some(held) => {
                    Some(claims.decide_device_claim(&held, &store, Instant::now(), request.dry_run))
                }
            }
        };
        match verdict {
            Some(v) if !v.allowed => answer(
                "denied",
                denied(
                    response,
                    format!(
                        "kubeplace holds {} for another claim: {}",
                        named(&added),
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
        let server = ServerRef {
            namespace: claim.metadata.namespace.clone().unwrap_or_default(),
            name: claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(RESERVATION_LABEL))
                .cloned()
                .unwrap_or_default(),
        };
        let held = devices_held_by(&crate::locks::read(&self.store), &server);
        let foreign: BTreeSet<DeviceId> = added.difference(&held).cloned().collect();
        if foreign.is_empty() {
            return Answer {
                kind: KIND.to_string(),
                verdict: "allowed",
                response,
            };
        }
        Answer {
            kind: KIND.to_string(),
            verdict: "denied",
            response: denied(
                response,
                format!(
                    "a reservation of Server {}/{} names {}, which its claim does not hold; it may name only its Server's devices",
                    server.namespace,
                    server.name,
                    named(&foreign)
                ),
            ),
        }
    }
}
