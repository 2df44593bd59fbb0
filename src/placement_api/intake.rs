//! A request's body, read only once its caller is known: at most [`MAX_BODY`] bytes, all
//! of it within [`BODY_DEADLINE`], and all bodies together within [`BODIES_IN_FLIGHT`], so
//! a slow or stalled sender holds no memory or task for long and many senders no more than
//! the server can spare.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode, header};
use hyper::body::Body;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::wire::ApiError;
use crate::serving::http::{BodyError, read_body as read_limited};

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

/// Room is counted in KiB.
const ROOM_UNIT: usize = 1024;

/// The room all bodies being read and answered share.
pub(crate) struct BodyRoom {
    room: Arc<Semaphore>,
    total: usize,
}

/// A body's share of the room, given back when the request ends.
pub(crate) struct BodyShare {
    _permit: Option<OwnedSemaphorePermit>,
}

impl BodyRoom {
    pub(crate) fn new(total: usize) -> BodyRoom {
        BodyRoom {
            room: Arc::new(Semaphore::new(total.div_ceil(ROOM_UNIT))),
            total,
        }
    }

    /// Room for the body the headers announce (its `Content-Length`, else the most a body
    /// may be), waited for up to `wait`; a 503 with `Retry-After` when none is freed in time.
    pub(crate) async fn take(
        &self,
        headers: &HeaderMap,
        max: usize,
        wait: Duration,
    ) -> Result<BodyShare, ApiError> {
        if !has_body(headers) {
            return Ok(BodyShare { _permit: None });
        }
        let bytes = declared_length(headers).map_or(max, |n| n.min(max as u64) as usize);
        let units = bytes.div_ceil(ROOM_UNIT).max(1) as u32;
        match tokio::time::timeout(wait, self.room.clone().acquire_many_owned(units)).await {
            Ok(Ok(permit)) => Ok(BodyShare {
                _permit: Some(permit),
            }),
            _ => {
                let mut e = ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "the server is already reading {} MiB of request bodies, the most it holds at once; retry in a second",
                        self.total / (1024 * 1024)
                    ),
                );
                e.retry_after = Some(1);
                Err(e)
            }
        }
    }
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// Whether a request announces a body: a `Content-Length` other than 0, or a
/// `Transfer-Encoding`.
pub(crate) fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

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
    use http_body_util::{Full, StreamBody};
    use hyper::body::Frame;

    #[tokio::test]
    async fn bodies_share_a_bounded_room() {
        let room = BodyRoom::new(3 * 1024 * 1024);
        let wait = Duration::from_millis(50);
        // Requests without a body take no room.
        let _none = room.take(&headers(None), MAX_BODY, wait).await.unwrap();
        let first = room
            .take(&headers(Some("2097152")), MAX_BODY, wait)
            .await
            .unwrap();
        // A body announced without a length counts as the largest taken: no room for it.
        let mut chunked = HeaderMap::new();
        chunked.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        let e = room.take(&chunked, MAX_BODY, wait).await.err().unwrap();
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.retry_after, Some(1));
        assert!(e.detail.contains("3 MiB"), "{}", e.detail);
        // One MiB is left, and a second 2 MiB body waits for it...
        let _small = room
            .take(&headers(Some("1048576")), MAX_BODY, wait)
            .await
            .unwrap();
        assert!(
            room.take(&headers(Some("2097152")), MAX_BODY, wait)
                .await
                .is_err()
        );
        // ...until the first is done.
        drop(first);
        room.take(&headers(Some("2097152")), MAX_BODY, wait)
            .await
            .unwrap();
    }

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

    #[test]
    fn what_announces_a_body() {
        assert!(!has_body(&headers(None)));
        assert!(!has_body(&headers(Some("0"))));
        assert!(has_body(&headers(Some("12"))));
        let mut h = HeaderMap::new();
        h.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        assert!(has_body(&h));
    }
}
