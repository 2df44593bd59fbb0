//! A review routed by the path it was sent to: a ResourceClaim's devices, a reservation pod
//! or claim, or one of kubeplace's kinds, each answered by its own room; and counted.

use std::time::Instant;

use kube::core::DynamicObject;
use kube::core::admission::AdmissionReview;

use super::review::{ADMISSION_API_VERSION, Answer, Webhook};
use super::{device_claims, reservations};

impl Webhook {
    /// Reviews one request body sent to `/validate/<plural>`. Never fails: whatever cannot
    /// be read is denied with a message saying why.
    ///
    /// The store follows the API server through watches, a few milliseconds behind. A
    /// denial is therefore reviewed once more after [`Webhook::recheck_after`], so an
    /// object that refers to one created just before it (an Allocation right after its
    /// provider) is judged against a store that has caught up.
    pub async fn review(&self, plural: &str, body: &[u8]) -> AdmissionReview<DynamicObject> {
        self.review_from(plural, body, false).await
    }

    /// [`Webhook::review`], for a review another replica passed on when `forwarded`.
    pub async fn review_from(
        &self,
        plural: &str,
        body: &[u8],
        forwarded: bool,
    ) -> AdmissionReview<DynamicObject> {
        let started = Instant::now();
        let answer = self.answer(plural, body, forwarded).await;
        self.metrics
            .admission(&answer.kind, answer.verdict, started.elapsed());
        let mut review = answer.response.into_review();
        // The API server expects the version it sent; only v1 is served.
        review.types.api_version = ADMISSION_API_VERSION.into();
        review
    }

    async fn answer(&self, plural: &str, body: &[u8], forwarded: bool) -> Answer {
        if plural == device_claims::PLURAL {
            return self.answer_device_claim(body, forwarded).await;
        }
        if plural == reservations::PLURAL {
            return self.answer_reservation(body).await;
        }
        self.answer_kind(plural, body, forwarded).await
    }
}
