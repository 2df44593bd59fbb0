//! The wire format: JSON replies, Placement's error body and the headers every answer
//! carries.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use hyper::body::{Body, Frame, SizeHint};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use kubeplace_core::placement::response::{Buffers, CandidatesPart, ListPart};

use super::ctx::Ctx;
use crate::cluster_writer::{WriteError, Written};
use kubeplace_policy::admission::Refusal;

/// A response with its whole body.
pub(crate) type Reply = Response<ReplyBody>;

/// A reply's body: one buffer, or the parts of a large answer written apart, sent one after
/// the other rather than copied into one buffer first, then the parts still being made (a
/// large list, [`ReplyBody::streamed`]). Its length is known, so it goes out with a
/// `Content-Length`.
#[derive(Debug, Default)]
pub struct ReplyBody {
    parts: VecDeque<Bytes>,
    /// Parts made on another thread while the ones before are sent.
    more: Option<mpsc::Receiver<Bytes>>,
    left: u64,
}

/// How many parts made ahead wait to be sent: enough to keep the connection busy, few
/// enough that a slow caller does not make the server hold the whole answer.
const PARTS_AHEAD: usize = 4;

impl ReplyBody {
    /// A body of the parts, in order.
    pub fn from_parts(parts: impl IntoIterator<Item = Bytes>) -> Self {
        let parts: VecDeque<Bytes> = parts.into_iter().filter(|p| !p.is_empty()).collect();
        let left = parts.iter().map(|p| p.len() as u64).sum();
        ReplyBody {
            parts,
            more: None,
            left,
        }
    }

    /// A body of `len` bytes whose parts `next` makes one by one on a thread of its own,
    /// each sent as soon as it is made: sending the first parts overlaps making the later
    /// ones. `next` says `None` when there is no part left, and is not called again once
    /// the caller goes away. The parts must add up to `len`: if they fall short, the
    /// connection is cut rather than the answer passed as whole. Where no thread can be
    /// started, `next` is handed back.
    pub(crate) fn streamed<F>(len: u64, next: F) -> Result<Self, F>
    where
        F: FnMut() -> Option<Bytes> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(PARTS_AHEAD);
        // `next` goes to the thread once it has started, so that it is still here if it
        // cannot start.
        let (give, take) = std::sync::mpsc::sync_channel::<F>(1);
        let started = std::thread::Builder::new()
            .name("placement-answer".into())
            .spawn(move || {
                let Ok(mut next) = take.recv() else {
                    return;
                };
                while let Some(part) = next() {
                    if !part.is_empty() && tx.blocking_send(part).is_err() {
                        return;
                    }
                }
            });
        match started {
            Ok(_) => {
                // The thread waits for it; were it gone, the parts fall short (see above).
                let _ = give.send(next);
                Ok(ReplyBody {
                    parts: VecDeque::new(),
                    more: Some(rx),
                    left: len,
                })
            }
            Err(_) => Err(next),
        }
    }

    /// A body of parts written in buffers from [`SpareParts`], each kept again once sent.
    pub(crate) fn from_kept_parts(parts: Vec<Vec<u8>>) -> Self {
        ReplyBody::from_parts(parts.into_iter().map(|p| Bytes::from_owner(SparePart(p))))
    }
}

/// A part of a provider list as sent: a part kept for later answers is shared with them, a
/// part written for this one alone goes back to the kept buffers once sent.
pub(crate) fn list_part(part: ListPart) -> Bytes {
    match part {
        ListPart::Kept(kept) => Bytes::from_owner(kept),
        ListPart::Written(written) => Bytes::from_owner(SparePart(written)),
    }
}

/// A part of a candidates answer as sent: a part kept for later answers is shared with
/// them, a part written for this one alone goes back to the kept buffers once sent.
pub(crate) fn candidates_part(part: CandidatesPart) -> Bytes {
    match part {
        CandidatesPart::Requests(kept) => Bytes::from_owner(kept),
        CandidatesPart::Summaries(kept) => Bytes::from_owner(kept),
        CandidatesPart::Written(written) => Bytes::from_owner(SparePart(written)),
    }
}

/// A buffer an answer's part is made in, kept for the next part once sent. The operator
/// gives freed memory back to the system at once, so a fresh buffer for every part of a
/// large answer made the kernel map and zero its pages each time (a quarter of the time of
/// listing 45,000 providers over a cluster).
struct SparePart(Vec<u8>);

/// Buffers kept for the parts to come, and their bytes.
static SPARE_PARTS: Mutex<(Vec<Vec<u8>>, usize)> = Mutex::new((Vec::new(), 0));

/// How many bytes of buffers are kept: all the parts of one large answer written whole
/// (72,000 allocation candidates are 34 MB) with room for a streamed one beside it. Only
/// buffers between these sizes are kept: a part is about 1 MiB, an odd larger one is not
/// kept, nor the few bytes around the parts.
const SPARE_BYTES_KEPT: usize = 48 << 20;
const SPARE_PART_MIN: usize = 64 << 10;
const SPARE_PART_MAX: usize = 4 << 20;

/// The kept buffers, for answers written in parts elsewhere.
pub(crate) struct SpareParts;

impl Buffers for SpareParts {
    fn take(&self, capacity: usize) -> Vec<u8> {
        let mut buffer = {
            let mut spare = SPARE_PARTS.lock().unwrap_or_else(PoisonError::into_inner);
            let (buffers, bytes) = &mut *spare;
            let buffer = buffers.pop().unwrap_or_default();
            *bytes -= buffer.capacity();
            buffer
        };
        buffer.reserve(capacity);
        buffer
    }
}

impl AsRef<[u8]> for SparePart {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for SparePart {
    fn drop(&mut self) {
        let mut buffer = std::mem::take(&mut self.0);
        let capacity = buffer.capacity();
        if !(SPARE_PART_MIN..=SPARE_PART_MAX).contains(&capacity) {
            return;
        }
        buffer.clear();
        let mut spare = SPARE_PARTS.lock().unwrap_or_else(PoisonError::into_inner);
        let (buffers, bytes) = &mut *spare;
        if *bytes + capacity <= SPARE_BYTES_KEPT {
            *bytes += capacity;
            buffers.push(buffer);
        }
    }
}

impl From<Bytes> for ReplyBody {
    fn from(bytes: Bytes) -> Self {
        ReplyBody::from_parts([bytes])
    }
}

impl From<Vec<u8>> for ReplyBody {
    fn from(bytes: Vec<u8>) -> Self {
        ReplyBody::from(Bytes::from(bytes))
    }
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let part = match self.parts.pop_front() {
            Some(p) => Some(p),
            None => match self.more.as_mut().map(|rx| rx.poll_recv(cx)) {
                Some(Poll::Pending) => return Poll::Pending,
                Some(Poll::Ready(p)) => p,
                None => None,
            },
        };
        match &part {
            Some(p) => self.left = self.left.saturating_sub(p.len() as u64),
            None => self.more = None,
        }
        Poll::Ready(part.map(|p| Ok(Frame::data(p))))
    }

    fn is_end_stream(&self) -> bool {
        self.parts.is_empty() && (self.more.is_none() || self.left == 0)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

/// Placement's error codes (from 1.23), the ones kubeplace answers with.
pub(crate) mod code {
    pub const UNDEFINED: &str = "placement.undefined_code";
    pub const CONCURRENT_UPDATE: &str = "placement.concurrent_update";
    pub const INVENTORY_INUSE: &str = "placement.inventory.inuse";
    pub const DUPLICATE_NAME: &str = "placement.duplicate_name";
    pub const PROVIDER_INUSE: &str = "placement.resource_provider.inuse";
    pub const PROVIDER_PARENT: &str = "placement.resource_provider.cannot_delete_parent";
    pub const PROVIDER_NOT_FOUND: &str = "placement.resource_provider.not_found";
}

/// An error answer: status, detail, and Placement's error code.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub detail: String,
    pub code: &'static str,
    /// The methods a 405 lists in `Allow`.
    pub allow: Option<String>,
    /// Seconds a 503 tells the caller to wait in `Retry-After`.
    pub retry_after: Option<u32>,
    /// The object a write of several objects, not finished yet, holds: the request may
    /// wait for it and be decided again.
    pub held: Option<Box<kubeplace_policy::store::ObjectKey>>,
    /// A claim refused, and the kind of refusal: counted with the webhook's refusals.
    pub refused_claim: Option<Refusal>,
}

impl ApiError {
    /// An error with Placement's default code, `placement.undefined_code`.
    pub(crate) fn new(status: StatusCode, detail: impl Into<String>) -> ApiError {
        ApiError {
            status,
            detail: detail.into(),
            code: code::UNDEFINED,
            allow: None,
            retry_after: None,
            held: None,
            refused_claim: None,
        }
    }

    /// The same error with another code.
    pub(crate) fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = code;
        self
    }

    pub(crate) fn bad_request(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, detail)
    }

    pub(crate) fn not_found(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, detail)
    }

    pub(crate) fn conflict(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, detail)
    }

    /// A generation that is not the current one.
    pub(crate) fn stale(what: &str, sent: i64, current: u64) -> ApiError {
        ApiError::conflict(format!(
            "{what} generation {sent} is not the current one ({current}); read it again and retry"
        ))
        .with_code(code::CONCURRENT_UPDATE)
    }

    /// A refused write as Placement answers it, every kind of refusal mapped here once: what
    /// time mends (an object another write holds, a version changed since, nothing deciding
    /// claims just now) is Placement's 409 `placement.concurrent_update`, which its clients
    /// retry; a claim that does not fit, or is over quota or invalid, is Placement's 409 for
    /// a claim that cannot be made; an invalid provider write is a 400; a mirrored object or
    /// one that is not written here, a 409.
    pub(crate) fn refused(refusal: Refusal, of: Written, detail: String) -> ApiError {
        let error = match (refusal, of) {
            (r, _) if r.is_retryable() => {
                ApiError::conflict(detail).with_code(code::CONCURRENT_UPDATE)
            }
            (Refusal::Invalid, Written::Provider) => ApiError::bad_request(detail),
            _ => ApiError::conflict(detail),
        };
        ApiError {
            refused_claim: (of == Written::Claim).then_some(refusal),
            ..error
        }
    }

    /// The API stopped answering: an internal error left its state in doubt.
    pub(crate) fn unsound() -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, UNSOUND_DETAIL)
    }

    /// A request that failed on a fault of the server. The detail is fixed: what went wrong
    /// (and the request that met it) is in the server's log under the request id.
    pub(crate) fn internal() -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL_DETAIL)
    }
}

/// A malformed query's 400, with Placement's code for what is wrong.
impl From<kubeplace_core::placement::query::QueryError> for ApiError {
    fn from(e: kubeplace_core::placement::query::QueryError) -> ApiError {
        ApiError::bad_request(e.detail).with_code(e.code.as_str())
    }
}

/// A write the cluster did not take, as Placement answers it.
impl From<WriteError> for ApiError {
    fn from(e: WriteError) -> ApiError {
        match e {
            WriteError::Refused {
                refusal,
                written,
                detail,
            } => ApiError::refused(refusal, written, detail),
            WriteError::KeptChanging(detail) => {
                ApiError::conflict(detail).with_code(code::CONCURRENT_UPDATE)
            }
            WriteError::Unavailable(detail) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, detail)
            }
            WriteError::Internal => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                WriteError::Internal.to_string(),
            ),
        }
    }
}

/// The detail of a 500: the same for every fault, so no answer carries the server's internals
/// or a request's input back.
pub(crate) const INTERNAL_DETAIL: &str = "kubeplace met an internal error while answering this request and did not complete it; the server's log has the details under this request_id.";

/// The detail of every answer after an internal error that could not be undone.
pub(crate) const UNSOUND_DETAIL: &str = "kubeplace stopped answering after an internal error it could not undo, so as not to answer from a state it cannot vouch for; restart it.";

impl From<kubeplace_policy::placement_records::RecordError> for ApiError {
    /// Placement's status and error code for each failure of its records.
    fn from(e: kubeplace_policy::placement_records::RecordError) -> ApiError {
        use kubeplace_policy::placement_records::RecordError as E;
        match e {
            E::NoProviderWithUuid(_) | E::NoProviderNamed(_) => ApiError::not_found(e.to_string()),
            E::StaleGeneration { sent, current } => {
                ApiError::stale("resource provider", sent, current)
            }
            E::ProviderRefused(refusal, _) => {
                ApiError::refused(refusal, Written::Provider, e.to_string())
            }
            E::AllocationRefused(refusal, _) => {
                ApiError::refused(refusal, Written::Claim, e.to_string())
            }
            E::Mirrored { .. } => {
                ApiError::refused(Refusal::Mirrored, Written::Provider, e.to_string())
            }
            E::Busy { ref key, .. } => {
                let held = Some(Box::new(key.clone()));
                ApiError {
                    held,
                    ..ApiError::conflict(e.to_string()).with_code(code::CONCURRENT_UPDATE)
                }
            }
            E::ReadOnly => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }
}

/// A request id in Placement's `req-<uuid>` form, unique within the process.
pub(crate) fn request_id(n: u64) -> String {
    static STARTED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed: &u64 = STARTED.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    format!(
        "req-{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (seed >> 32) as u32,
        (seed >> 16) as u16,
        (seed >> 4) & 0xfff,
        (n >> 48) & 0xfff,
        n & 0xffff_ffff_ffff
    )
}

/// A JSON reply.
pub(crate) fn json_reply(status: StatusCode, body: &impl serde::Serialize) -> Reply {
    json_bytes_reply(status, serde_json::to_vec(body).unwrap_or_default())
}

/// A reply of JSON already written.
pub(crate) fn json_bytes_reply(status: StatusCode, bytes: impl Into<ReplyBody>) -> Reply {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(bytes.into())
        .unwrap_or_default()
}

/// A reply with no body (204, or 201 before a body was returned).
pub(crate) fn empty(status: StatusCode) -> Reply {
    Response::builder()
        .status(status)
        .body(ReplyBody::default())
        .unwrap_or_default()
}

/// Adds a `Location` header.
pub(crate) fn located(mut reply: Reply, location: &str) -> Reply {
    if let Ok(v) = HeaderValue::from_str(location) {
        reply.headers_mut().insert(header::LOCATION, v);
    }
    reply
}

/// Adds the request id header, which every answer carries (errors answered before a version
/// is known included, as Placement's request id middleware wraps everything else).
pub(crate) fn with_request_id(mut reply: Reply, request_id: &str) -> Reply {
    if let Ok(v) = HeaderValue::from_str(request_id) {
        reply.headers_mut().insert("x-openstack-request-id", v);
    }
    reply
}

/// Adds the headers every answer carries: the version served (with `Vary`), the request
/// id, and from 1.15 `Cache-Control` and `Last-Modified` on answers with a JSON body.
pub(crate) fn finish(ctx: &Ctx, reply: Reply) -> Reply {
    let mut reply = with_request_id(reply, &ctx.request_id);
    let h = reply.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("placement {}", ctx.mv)) {
        h.insert("openstack-api-version", v);
    }
    h.insert(
        header::VARY,
        HeaderValue::from_static("openstack-api-version"),
    );
    let has_body = h.contains_key(header::CONTENT_TYPE);
    if has_body && reply.status() == StatusCode::OK {
        reply = fresh(ctx, reply);
    }
    reply
}

/// From 1.15, `Cache-Control: no-cache` and a `Last-Modified` of now: every 200 with a body
/// has them, and the answers without a body Placement gives them to (a trait's).
pub(crate) fn fresh(ctx: &Ctx, mut reply: Reply) -> Reply {
    if ctx.mv.0 < 15 {
        return reply;
    }
    let now = jiff::fmt::rfc2822::DateTimePrinter::new()
        .timestamp_to_rfc9110_string(&jiff::Timestamp::now())
        .ok()
        .and_then(|s| HeaderValue::from_str(&s).ok());
    let h = reply.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(now) = now {
        h.insert(header::LAST_MODIFIED, now);
    }
    reply
}

/// What webob puts before the detail of each status, which Placement keeps.
fn explanation(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => {
            "The server could not comply with the request since it is either malformed or otherwise incorrect."
        }
        403 => "Access was denied to this resource.",
        404 => "The resource could not be found.",
        405 => "The method specified is not allowed for this resource.",
        406 => {
            "The resource could not be generated that was acceptable to your browser (content of type application/json."
        }
        408 => "The server has waited too long for the request to be sent by the client.",
        409 => "There was a conflict when trying to complete your request.",
        413 => "The request is larger than the server is willing or able to process.",
        415 => "The request media type is not supported by this server.",
        503 => "The server is currently unavailable. Please try again at a later time.",
        _ => "The server has either erred or is incapable of performing the requested operation.",
    }
}

/// Placement's error body: `{"errors": [{status, title, detail, request_id, code}]}`,
/// `code` from 1.23; the detail is webob's explanation of the status, then ours.
pub(crate) fn error(ctx: &Ctx, e: ApiError) -> Reply {
    let mut entry = json!({
        "status": e.status.as_u16(),
        "title": e.status.canonical_reason().unwrap_or("Error"),
        "detail": format!("{}\n\n {}  ", explanation(e.status), e.detail),
        "request_id": ctx.request_id,
    });
    if ctx.mv.0 >= 23 {
        entry["code"] = Value::from(e.code);
    }
    let body = json!({"errors": [entry]});
    let mut reply = finish(ctx, json_reply(e.status, &body));
    reply.extensions_mut().insert(ErrorBody(body));
    if let Some(allow) = e.allow
        && let Ok(v) = HeaderValue::from_str(&allow)
    {
        reply.headers_mut().insert(header::ALLOW, v);
    }
    if let Some(seconds) = e.retry_after {
        reply
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    reply
}

/// A version header that is not served: no version headers, and on a 406 the range served
/// (`max` is the newest version) in the entry.
pub(crate) fn version_error(request_id: &str, e: ApiError, max: &str) -> Reply {
    let mut entry = json!({
        "status": e.status.as_u16(),
        "title": e.status.canonical_reason().unwrap_or("Error"),
        "detail": format!("{}\n\n Invalid microversion: {}  ", explanation(e.status), e.detail),
        "request_id": request_id,
    });
    if e.status == StatusCode::NOT_ACCEPTABLE {
        entry["max_version"] = Value::from(max);
        entry["min_version"] = Value::from("1.0");
    }
    let body = json!({"errors": [entry]});
    let mut reply = with_request_id(json_reply(e.status, &body), request_id);
    reply.extensions_mut().insert(ErrorBody(body));
    reply
}

/// An error answer's body, kept beside its JSON so that it can be written otherwise for a
/// caller that asks for HTML (see accept.rs).
#[derive(Clone)]
pub(crate) struct ErrorBody(pub Value);

/// 401 (no token) or 429 (too many new tokens), shaped as the authentication in front of
/// Placement shapes them.
pub(crate) fn auth_error(status: StatusCode, message: &str) -> Reply {
    json_reply(
        status,
        &json!({"message": message,
                "code": format!("{} {}", status.as_u16(), status.canonical_reason().unwrap_or("")),
                "title": status.canonical_reason().unwrap_or("Error")}),
    )
}

/// A refusal shaped as keystonemiddleware shapes its own (`{"error": {"code", "title",
/// "message"}}`): a Keystone token that is missing or not taken (401), or Keystone not
/// reachable (503).
pub(crate) fn keystone_error(status: StatusCode, message: &str) -> Reply {
    json_reply(
        status,
        &json!({"error": {"code": status.as_u16(),
                          "title": status.canonical_reason().unwrap_or("Error"),
                          "message": message}}),
    )
}

/// Marks a reply as the last on its connection: sent before the request's body was read
/// (or while it was still arriving), so the connection cannot carry another request.
pub(crate) fn closing(mut reply: Reply) -> Reply {
    reply
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_writer::refused_by_api_server;
    use http_body_util::BodyExt;

    /// A streamed body of these parts.
    fn streamed_parts(parts: Vec<Vec<u8>>) -> ReplyBody {
        let len = parts.iter().map(|p| p.len() as u64).sum();
        let mut parts = parts.into_iter();
        ReplyBody::streamed(len, move || parts.next().map(Bytes::from))
            .unwrap_or_else(|_| panic!("no thread to make the parts on"))
    }

    /// A body made on another thread is its parts in order, and says its length first.
    #[tokio::test]
    async fn a_streamed_body_is_its_parts_in_order_with_its_length_known_first() {
        let parts: Vec<Vec<u8>> = (0..50).map(|i| format!("part {i};").into_bytes()).collect();
        let whole = parts.concat();
        let body = streamed_parts(parts);
        assert_eq!(body.size_hint().exact(), Some(whole.len() as u64));
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(&got[..], &whole[..]);
    }

    /// However many parts are dropped, the buffers kept are within their bytes and of the
    /// sizes kept, and a buffer handed out for a part is empty with the room asked for.
    #[test]
    fn kept_buffers_stay_within_their_bytes() {
        let parts: Vec<Vec<u8>> = (0..80)
            .map(|i| {
                let mut part = SpareParts.take(1 << 20);
                assert!(part.is_empty() && part.capacity() >= 1 << 20);
                part.resize(1000 + i, b'x');
                part
            })
            .chain([vec![b'y'; 10], vec![b'z'; SPARE_PART_MAX + 1]])
            .collect();
        drop(ReplyBody::from_kept_parts(parts));
        let spare = SPARE_PARTS.lock().unwrap();
        let (buffers, bytes) = &*spare;
        assert_eq!(*bytes, buffers.iter().map(Vec::capacity).sum::<usize>());
        assert!(*bytes <= SPARE_BYTES_KEPT, "{bytes} bytes kept");
        assert!(
            buffers
                .iter()
                .all(|b| b.is_empty() && (SPARE_PART_MIN..=SPARE_PART_MAX).contains(&b.capacity()))
        );
    }

    /// The buffers of one streamed answer, once sent, make the next answer's parts and
    /// carry nothing of the first into it.
    #[tokio::test]
    async fn a_spare_part_starts_empty() {
        for round in 0..3 {
            let parts: Vec<Vec<u8>> = (0..20)
                .map(|i| vec![b'a' + round; 1000 + 100 * i])
                .collect();
            let whole = parts.concat();
            let body = streamed_parts(parts);
            let got = body.collect().await.unwrap().to_bytes();
            assert_eq!(&got[..], &whole[..], "round {round}");
            drop(got);
        }
    }

    /// Each kind of refusal, made by the webhook and passed on by the API server as a Status,
    /// reaches a Placement client as Placement answers it: what time mends as 409
    /// `placement.concurrent_update` (which Nova's report client retries), a claim that cannot
    /// be made as 409 without a code, an invalid provider as 400.
    #[test]
    fn every_webhook_refusal_reaches_a_placement_client_as_its_kind() {
        for refusal in Refusal::ALL {
            // What the API server answers the writer with, from the webhook's denial (whose
            // code and reason are the refusal's: the webhook's own tests hold it to that).
            let status = kube::core::Status {
                code: refusal.code(),
                reason: refusal.reason().to_string(),
                message: "admission webhook \"x.kubeplace.io\" denied the request: why".into(),
                ..kube::core::Status::failure("", "")
            };
            for kind in [
                kubeplace_api::Kind::Allocation,
                kubeplace_api::Kind::ResourceProvider,
            ] {
                let e = ApiError::from(refused_by_api_server(
                    kind,
                    kube::Error::Api(Box::new(status.clone())),
                ));
                let placement = (e.status.as_u16(), e.code);
                let expected = match (refusal, kind) {
                    (r, _) if r.is_retryable() => (409, code::CONCURRENT_UPDATE),
                    (Refusal::Invalid, kubeplace_api::Kind::ResourceProvider) => {
                        (400, code::UNDEFINED)
                    }
                    _ => (409, code::UNDEFINED),
                };
                assert_eq!(placement, expected, "{refusal:?} on {kind}: {}", e.detail);
                if kind == kubeplace_api::Kind::Allocation && !refusal.is_retryable() {
                    assert!(
                        e.detail.starts_with("Unable to allocate inventory"),
                        "{}",
                        e.detail
                    );
                }
            }
        }
    }

    /// A refusal the API server makes on its own: an object changed since it was read is a
    /// 409 to read again; a missing grant is the server's fault, a 503.
    #[test]
    fn the_api_servers_own_refusals_are_answered_by_their_kind() {
        let status = |code: u16, reason: &str| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                reason: reason.into(),
                ..kube::core::Status::failure("m", reason)
            }))
        };
        let e = ApiError::from(refused_by_api_server(
            kubeplace_api::Kind::Allocation,
            status(409, "Conflict"),
        ));
        assert_eq!(e.code, code::CONCURRENT_UPDATE);
        let e = ApiError::from(refused_by_api_server(
            kubeplace_api::Kind::Allocation,
            status(403, "Forbidden"),
        ));
        assert_eq!(e.status.as_u16(), 503);
    }
}
