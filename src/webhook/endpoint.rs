//! The webhook's endpoint: `POST /validate/<plural>` with an AdmissionReview, read within
//! the body limit and the request deadline, and `GET /healthz`. Bodies are bounded in the
//! bytes that arrive, and all the reviews being read share [`REVIEWS_IN_FLIGHT`] bytes: a
//! client that reaches the webhook without a client certificate (none is asked for without
//! `--webhook-client-ca`) makes it hold no more than that, however many bodies it drips.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use http::{Method, Request, StatusCode};
use hyper::body::Incoming;

use super::{ADMISSION_API_VERSION, MAX_BODY, REQUEST_TIMEOUT, Webhook, invalid};
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
    let refuse = |message: String| {
        webhook
            .metrics()
            .admission(resource, "invalid", Duration::ZERO);
        let mut review = invalid(message, None).into_review();
        review.types.api_version = ADMISSION_API_VERSION.into();
        review_reply(&review)
    };
    let forwarded = request
        .headers()
        .contains_key(super::claims_route::FORWARDED_HEADER);
    let work = async {
        let _share = ROOM
            .take(request.headers(), MAX_BODY, REQUEST_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        let body = read_body(request.into_body(), MAX_BODY)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(webhook.review_from(&plural, &body, forwarded).await)
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, work).await {
        Ok(Ok(review)) => review_reply(&review),
        Ok(Err(message)) => refuse(message),
        Err(_) => refuse(format!(
            "the request took longer than {} s",
            REQUEST_TIMEOUT.as_secs()
        )),
    }
}
