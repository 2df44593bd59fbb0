//! Request bodies, bounded in the bytes that arrive. A body is copied into one buffer frame
//! by frame as it is read, and each frame is let go at once: a sender that cuts its body
//! into one-byte frames makes the server hold its bytes, not a network buffer for each frame.
//! The bound counts those bytes, whatever length the headers announced. All bodies a server
//! reads at once share a [`BodyRoom`], so many senders hold no more than it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, header};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why a request's body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the request body is larger than {} MiB", .max / (1024 * 1024))]
    TooLarge { max: usize },
    #[error("cannot read the request body: {0}")]
    Unreadable(Box<dyn std::error::Error + Send + Sync>),
}

/// Reads a body of at most `max` bytes. One whose announced length (hyper's size hint holds
/// its `Content-Length`) is over `max` is refused before any of it is read; any other is
/// refused as soon as more than `max` bytes have arrived.
pub(crate) async fn read_body<B>(body: B, max: usize) -> Result<Bytes, BodyError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if body.size_hint().lower() > max as u64 {
        return Err(BodyError::TooLarge { max });
    }
    let mut body = std::pin::pin!(body);
    // Grown as bytes arrive: never from the announced length alone.
    let mut read: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Unreadable(e.into()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if read.len() + data.len() > max {
            return Err(BodyError::TooLarge { max });
        }
        read.extend_from_slice(&data);
    }
    read.shrink_to_fit();
    Ok(Bytes::from(read))
}

/// Whether a request announces a body: a `Content-Length` other than 0, or a
/// `Transfer-Encoding`.
pub fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

/// The length a request's headers announce for its body.
pub fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// Room is counted in KiB.
const ROOM_UNIT: usize = 1024;

/// The room all bodies a server reads at once share.
pub(crate) struct BodyRoom {
    room: Arc<Semaphore>,
    total: usize,
}

/// A body's share of the room, given back when dropped.
pub(crate) struct BodyShare {
    _permit: Option<OwnedSemaphorePermit>,
}

/// No room was freed for a body in time.
#[derive(Debug, thiserror::Error)]
#[error(
    "the server is already reading {} MiB of request bodies, the most it holds at once; retry in a second",
    .total / (1024 * 1024)
)]
pub(crate) struct NoRoom {
    pub total: usize,
}

impl BodyRoom {
    pub(crate) fn new(total: usize) -> BodyRoom {
        BodyRoom {
            room: Arc::new(Semaphore::new(total.div_ceil(ROOM_UNIT))),
            total,
        }
    }

    /// Room for the body the headers announce (its `Content-Length`, else the most a body
    /// may be), waited for up to `wait`.
    pub(crate) async fn take(
        &self,
        headers: &HeaderMap,
        max: usize,
        wait: Duration,
    ) -> Result<BodyShare, NoRoom> {
        if !has_body(headers) {
            return Ok(BodyShare { _permit: None });
        }
        let bytes = declared_length(headers).map_or(max, |n| n.min(max as u64) as usize);
        let units = bytes.div_ceil(ROOM_UNIT).max(1) as u32;
        match tokio::time::timeout(wait, self.room.clone().acquire_many_owned(units)).await {
            Ok(Ok(permit)) => Ok(BodyShare {
                _permit: Some(permit),
            }),
            _ => Err(NoRoom { total: self.total }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream;
    use http_body_util::{Full, StreamBody};
    use hyper::body::Frame;

    #[tokio::test]
    async fn bodies_share_a_bounded_room() {
        let max = 4 * 1024 * 1024;
        let room = BodyRoom::new(3 * 1024 * 1024);
        let wait = Duration::from_millis(50);
        // Requests without a body take no room.
        let _none = room.take(&headers(None), max, wait).await.unwrap();
        let first = room
            .take(&headers(Some("2097152")), max, wait)
            .await
            .unwrap();
        // A body announced without a length counts as the largest taken: no room for it.
        let mut chunked = HeaderMap::new();
        chunked.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        let e = room.take(&chunked, max, wait).await.err().unwrap();
        assert!(e.to_string().contains("3 MiB"), "{e}");
        // One MiB is left, and a second 2 MiB body waits for it...
        let _small = room
            .take(&headers(Some("1048576")), max, wait)
            .await
            .unwrap();
        assert!(
            room.take(&headers(Some("2097152")), max, wait)
                .await
                .is_err()
        );
        // ...until the first is done.
        drop(first);
        room.take(&headers(Some("2097152")), max, wait)
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
    async fn a_body_within_the_limit_is_read_whole() {
        let body = Full::new(Bytes::from_static(b"{}"));
        assert_eq!(
            read_body(body, 16).await.unwrap(),
            Bytes::from_static(b"{}")
        );
    }

    #[tokio::test]
    async fn a_body_longer_than_the_limit_stops_at_it() {
        let chunks = stream::iter(
            (0..10)
                .map(|_| Ok::<_, std::io::Error>(Frame::data(Bytes::from_static(b"0123456789")))),
        );
        let e = read_body(StreamBody::new(chunks), 16).await.unwrap_err();
        assert!(matches!(e, BodyError::TooLarge { max: 16 }), "{e}");
    }

    /// A body whose frames are one-byte slices of one large buffer, as hyper's frames are
    /// slices of its network buffer; it notes whether a frame given before is still held
    /// when the next is asked for.
    struct Slices {
        buffer: Bytes,
        next: usize,
        end: usize,
        held: Arc<std::sync::atomic::AtomicBool>,
    }

    impl hyper::body::Body for Slices {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            if self.next > 0 && !self.buffer.is_unique() {
                self.held.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            if self.next == self.end {
                return std::task::Poll::Ready(None);
            }
            let i = self.next;
            self.next += 1;
            std::task::Poll::Ready(Some(Ok(Frame::data(self.buffer.slice(i..i + 1)))))
        }
    }

    #[tokio::test]
    async fn one_byte_frames_hold_their_bytes_not_their_buffers() {
        let held = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let body = Slices {
            buffer: Bytes::from(vec![b'x'; 64 * 1024]),
            next: 0,
            end: 1000,
            held: held.clone(),
        };
        let read = read_body(body, 1 << 20).await.unwrap();
        assert_eq!(read.len(), 1000);
        assert!(
            !held.load(std::sync::atomic::Ordering::Relaxed),
            "a frame's buffer was still held when the next frame was read"
        );
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
