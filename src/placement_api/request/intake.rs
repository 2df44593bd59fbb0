//! A request's body, read only once its caller is known: at most [`MAX_BODY`] bytes, all
//! of it within [`BODY_DEADLINE`], and all bodies together within [`BODIES_IN_FLIGHT`], so
//! a slow or stalled sender holds no memory or task for long and many senders no more than
//! the server can spare.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use hyper::body::Body;

use super::wire::ApiError;
use crate::serving::body::{self, BodyError, declared_length, read_body as read_limited};

/// The largest body read. Placement's largest bodies (a reshape, `POST /allocations` moving
/// many consumers) are tens of KiB; 4 MiB leaves room for a whole cloud's inventories in one
/// reshape and still bounds what one authenticated request can make the server hold.
pub(crate) const MAX_BODY: usize = 4 * 1024 * 1024;

/// How long the whole body may take to arrive, from the end of the headers: 4 MiB in 10 s
/// needs 400 KiB/s, which any client on a network that reaches the API has.
pub(crate) const BODY_DEADLINE: Duration = Duration::from_secs(10);

/// Bytes of bodies held at once by all requests: sixteen of the largest bodies, thousands of
/// real ones. A body waits for room (within its deadline), so many large bodies at once
/// cannot make the server hold more.
pub(crate) const BODIES_IN_FLIGHT: usize = 64 * 1024 * 1024;

/// The room all bodies being read and answered share.
pub(crate) struct BodyRoom(body::BodyRoom);

/// A body's share of the room, given back when the request ends.
pub(crate) type BodyShare = body::BodyShare;

impl BodyRoom {
    pub(crate) fn new(total: usize) -> BodyRoom {
        BodyRoom(body::BodyRoom::new(total))
    }

    /// Room for the body the headers announce (its `Content-Length`, else the most a body
    /// may be), waited for up to `wait`; a 503 with `Retry-After` when none is freed in time.
    pub(crate) async fn take(
        &self,
        headers: &HeaderMap,
        max: usize,
        wait: Duration,
    ) -> Result<BodyShare, ApiError> {
        self.0.take(headers, max, wait).await.map_err(|full| {
            let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, full.to_string());
            e.retry_after = Some(1);
            e
        })
    }
}

pub(crate) use body::has_body;

/// Reads a body of at most `max` bytes within `deadline`: 413 when it is larger (at once
/// when `Content-Length` says so), 408 when it is not all there in time, 400 when the
/// connection fails while it is read.
pub(crate) async fn read_body<B>(
    headers: &HeaderMap,
    body: B,
    max: usize,
    deadline: Duration,
) -> Result<Bytes, ApiError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is larger than {} bytes ({} MiB), the most this server reads",
                max,
                max / (1024 * 1024)
            ),
        )
    };
    let declared = declared_length(headers);
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    match tokio::time::timeout(deadline, read_limited(body, max)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(BodyError::TooLarge { .. })) => Err(too_large()),
        Ok(Err(BodyError::Unreadable(e))) => Err(ApiError::bad_request(format!(
            "the request body could not be read: {e}"
        ))),
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive whole within {} s; send the whole body within {} s of the headers",
                deadline.as_secs(),
                deadline.as_secs()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream::{self, StreamExt};
    use http::header;
    use http_body_util::{Full, StreamBody};
    use hyper::body::Frame;

    fn headers(length: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(n) = length {
            h.insert(header::CONTENT_LENGTH, n.parse().unwrap());
        }
        h
    }

    #[tokio::test]
    async fn a_body_within_the_limits_is_read_whole() {
        let body = Full::new(Bytes::from_static(b"{}"));
        let read = read_body(&headers(Some("2")), body, 16, BODY_DEADLINE).await;
        assert_eq!(read.unwrap(), Bytes::from_static(b"{}"));
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused_before_reading() {
        // A body that never ends: only the header can have refused it.
        let body = StreamBody::new(stream::pending::<Result<Frame<Bytes>, std::io::Error>>());
        let e = read_body(&headers(Some("17")), body, 16, BODY_DEADLINE)
            .await
            .unwrap_err();
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(e.detail.contains("16 bytes"), "{}", e.detail);
    }

    #[tokio::test]
    async fn a_body_longer_than_announced_stops_at_the_limit() {
        let chunks = stream::iter(
            (0..10)
                .map(|_| Ok::<_, std::io::Error>(Frame::data(Bytes::from_static(b"0123456789")))),
        );
        let e = read_body(&headers(None), StreamBody::new(chunks), 16, BODY_DEADLINE)
            .await
            .unwrap_err();
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_is_cut_at_the_deadline() {
        let first = stream::iter([Ok::<_, std::io::Error>(Frame::data(Bytes::from_static(
            b"{",
        )))]);
        let body = StreamBody::new(first.chain(stream::pending()));
        let started = tokio::time::Instant::now();
        let e = read_body(&headers(Some("100")), body, 1024, BODY_DEADLINE)
            .await
            .unwrap_err();
        assert_eq!(e.status, StatusCode::REQUEST_TIMEOUT);
        assert_eq!(started.elapsed(), BODY_DEADLINE);
        assert!(e.detail.contains("10 s"), "{}", e.detail);
    }
}
