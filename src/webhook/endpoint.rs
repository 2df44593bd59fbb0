//! The webhook's endpoint: `POST /validate/<plural>` with an AdmissionReview, read within
//! the body limit and the request deadline, and `GET /healthz`. Bodies are bounded in the
//! bytes that arrive, and all the reviews being read share [`REVIEWS_IN_FLIGHT`] bytes: a
//! client that reaches the webhook without a client certificate (none is asked for without
//! `--webhook-client-ca`) makes it hold no more than that, however many bodies it drips.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use http::{Method, Request, StatusCode};
use hyper::body::Incoming;

use kube::core::admission::AdmissionResponse;
use kubeplace_policy::admission::Refusal;

use super::review::{ADMISSION_API_VERSION, MAX_BODY, REQUEST_TIMEOUT, Webhook, denied, invalid};
use crate::serving::body::{BodyRoom, read_body};
use crate::serving::http::{Reply, json, text};

/// Bytes of AdmissionReviews read at once, by every webhook of the process: twenty of the
/// largest, thousands of real ones.
pub(crate) const REVIEWS_IN_FLIGHT: usize = 64 * 1024 * 1024;

static ROOM: LazyLock<BodyRoom> = LazyLock::new(|| BodyRoom::new(REVIEWS_IN_FLIGHT));

fn review_reply(review: &impl serde::Serialize) -> Reply {
    match serde_json::to_vec(review) {
        Ok(body) => json(StatusCode::OK, body),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Answers a request to the webhook: `POST /validate/<plural>` with an AdmissionReview,
/// and `GET /healthz`.
pub async fn handle(webhook: Arc<Webhook>, request: Request<Incoming>) -> Reply {
    let path = request.uri().path().to_string();
    if path == "/healthz" {
        return text(StatusCode::OK, "ok\n");
    }
    let Some(plural) = path.strip_prefix("/validate/").map(str::to_string) else {
        return text(
            StatusCode::NOT_FOUND,
            "kubeplace's webhook serves /validate/<plural>\n",
        );
    };
    let resource = match kubeplace_api::Kind::from_plural(&plural) {
        Some(kind) => kind.as_str(),
        None if plural == super::device_claims::PLURAL => super::device_claims::KIND,
        None if plural == super::reservations::PLURAL => super::reservations::KIND,
        None => {
            return text(
                StatusCode::NOT_FOUND,
                format!("kubeplace serves no kind at /validate/{plural}\n"),
            );
        }
    };
    if request.method() != Method::POST {
        return text(StatusCode::METHOD_NOT_ALLOWED, "POST an AdmissionReview\n");
    }
    // A review that cannot be answered in time, or whose body cannot be read, is refused
    // in a response of the request's uid where the body names it (the API server takes no
    // other), as one to retry when only time is short.
    let refuse = |refusal: Refusal, message: String, uid: Option<String>| {
        webhook
            .metrics()
            .admission(resource, "invalid", Duration::ZERO);
        let mut response = invalid(message, uid);
        if refusal != Refusal::Invalid {
            response = denied_again(response, refusal);
        }
        let mut review = response.into_review();
        review.types.api_version = ADMISSION_API_VERSION.into();
        review_reply(&review)
    };
    let forwarded = request
        .headers()
        .contains_key(super::claims_route::FORWARDED_HEADER);
    let started = tokio::time::Instant::now();
    let deadline = started + REQUEST_TIMEOUT;
    let late = || {
        format!(
            "the request took longer than {} s",
            REQUEST_TIMEOUT.as_secs()
        )
    };
    let _share = match tokio::time::timeout_at(
        deadline,
        ROOM.take(request.headers(), MAX_BODY, REQUEST_TIMEOUT),
    )
    .await
    {
        Ok(Ok(share)) => share,
        Ok(Err(full)) => return refuse(Refusal::Unavailable, full.to_string(), None),
        Err(_) => return refuse(Refusal::Unavailable, late(), None),
    };
    let body =
        match tokio::time::timeout_at(deadline, read_body(request.into_body(), MAX_BODY)).await {
            Ok(Ok(body)) => body,
            Ok(Err(e)) => return refuse(Refusal::Invalid, e.to_string(), None),
            Err(_) => return refuse(Refusal::Unavailable, late(), None),
        };
    match tokio::time::timeout_at(deadline, webhook.review_from(&plural, &body, forwarded)).await {
        Ok(review) => review_reply(&review),
        Err(_) => refuse(Refusal::Unavailable, late(), request_uid(&body)),
    }
}

/// The uid of the review a body carries, read without the rest of it.
fn request_uid(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Review {
        request: Option<Request>,
    }
    #[derive(serde::Deserialize)]
    struct Request {
        uid: String,
    }
    serde_json::from_slice::<Review>(body)
        .ok()?
        .request
        .map(|r| r.uid)
}

/// A refusal made as [`invalid`] made again as one of `refusal`'s kind.
fn denied_again(response: AdmissionResponse, refusal: Refusal) -> AdmissionResponse {
    let message = response.result.message.clone();
    denied(response, refusal, message)
}
