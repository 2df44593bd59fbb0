//! A request that panics fails alone: what it changed is undone, its 500 says nothing of the
//! panic, and the API goes on answering; an undo that cannot be done stops the API instead.

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use kubeplace_api::Kind;
use kubeplace_policy::store::{ObjectKey, Store};
use serde_json::{Value, json};

use super::api::{PlacementApi, Soundness};
use super::caller::Caller;
use super::request::call::Call;
use super::request::ctx::Ctx;
use super::request::version;
use super::request::wire::{ApiError, INTERNAL_DETAIL, Reply, UNSOUND_DETAIL};
use kubeplace_policy::placement_records::{Guard, State};

/// An API with one provider, `cn1`; its uuid.
fn api() -> (PlacementApi, String) {
    let api = PlacementApi::new(Store::default(), "admin".into());
    let (status, created) = call(
        &api,
        "POST",
        "/resource_providers",
        Some(json!({"name": "cn1"})),
    );
    assert_eq!(status, StatusCode::OK, "{created}");
    let uuid = created["uuid"].as_str().unwrap().to_string();
    (api, uuid)
}

fn request(method: &str, path: &str, body: Option<Value>) -> Request<Bytes> {
    Request::builder()
        .method(method)
        .uri(path)
        .header("x-auth-token", "admin")
        .header("openstack-api-version", "placement 1.39")
        .header("content-type", "application/json")
        .body(body.map(|b| Bytes::from(b.to_string())).unwrap_or_default())
        .unwrap()
}

fn body_of(reply: Reply) -> (StatusCode, Option<String>, Value) {
    let status = reply.status();
    let id = reply
        .headers()
        .get("x-openstack-request-id")
        .map(|v| v.to_str().unwrap().to_string());
    let bytes = futures::executor::block_on(reply.into_body().collect())
        .unwrap()
        .to_bytes();
    let json = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    (status, id, json)
}

fn call(api: &PlacementApi, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let (status, _, json) = body_of(api.answer_request(request(method, path, body)));
    (status, json)
}

/// Runs `work` as a request's work (as the router would), under the request's guard.
fn guarded(api: &PlacementApi, work: impl FnOnce() -> Result<Reply, ApiError>) -> Reply {
    let call = Call::new(
        request("PUT", "/traits/CUSTOM_SECRET_INPUT", None)
            .into_parts()
            .0,
        Bytes::from_static("body with é".as_bytes()),
        Caller::Unrestricted(None),
    );
    let ctx = Ctx {
        mv: version::MAX,
        request_id: api.next_request_id(),
    };
    api.guarded(&ctx, &call, work)
}

#[test]
fn a_write_that_panics_is_undone_and_the_api_goes_on() {
    let (api, uuid) = api();
    let (_, before) = call(&api, "GET", &format!("/resource_providers/{uuid}"), None);
    let reply = guarded(&api, || {
        api.write(|s| {
            s.bump(&uuid)?;
            s.add_custom_trait("CUSTOM_HALF_WRITTEN")?;
            let key = ObjectKey::cluster(Kind::ResourceProvider, "cn1");
            s.delete(&key)?;
            let cut = "aééé";
            // A byte index inside a character, as the panic this guards against.
            let _ = &cut[..2];
            unreachable!("slicing inside a character panics")
        })
    });
    let (status, header_id, body) = body_of(reply);
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    let e = &body["errors"][0];
    assert_eq!(e["status"], 500);
    assert_eq!(e["title"], "Internal Server Error");
    assert!(
        e["detail"]
            .as_str()
            .unwrap()
            .ends_with(&format!(" {INTERNAL_DETAIL}  ")),
        "{e}"
    );
    assert_eq!(e["request_id"].as_str(), header_id.as_deref());
    let text = body.to_string();
    for leaked in ["char boundary", "aééé", "SECRET", "panicked"] {
        assert!(!text.contains(leaked), "{leaked:?} in {text}");
    }
    // As before the request: the provider, its generation, the registry.
    let (status, after) = call(&api, "GET", &format!("/resource_providers/{uuid}"), None);
    assert_eq!(status, StatusCode::OK);
    assert_eq!(after, before);
    let (_, traits) = call(&api, "GET", "/traits?name=startswith:CUSTOM_", None);
    assert_eq!(traits["traits"], json!([]));
    assert!(!api.store.is_poisoned() && !api.book.is_poisoned());
    assert!(api.healthy());
    // And writes go on.
    let (status, _) = call(&api, "PUT", "/traits/CUSTOM_AFTER", None);
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = call(
        &api,
        "PUT",
        &format!("/resource_providers/{uuid}/traits"),
        Some(json!({"traits": ["CUSTOM_AFTER"], "resource_provider_generation": 0})),
    );
    assert_eq!(status, StatusCode::OK);
}

/// Log lines written while `f` runs on this thread.
fn logged(f: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let bytes = lines.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn the_panic_and_the_request_are_logged_under_the_request_id() {
    let (api, _) = api();
    let mut answered = None;
    let log = logged(|| {
        answered = Some(guarded(&api, || {
            api.read(|_| -> Result<Reply, ApiError> { panic!("the panic's own text") })
        }));
    });
    let (_, id, _) = body_of(answered.unwrap());
    let id = id.unwrap();
    assert!(log.contains("ERROR"), "{log}");
    for expected in [
        id.as_str(),
        "the panic's own text",
        "src/placement_api/panic_tests.rs",
        "/traits/CUSTOM_SECRET_INPUT",
        "body with é",
    ] {
        assert!(log.contains(expected), "{expected:?} not in {log}");
    }
}

#[test]
fn a_read_that_panics_fails_alone() {
    let (api, _) = api();
    let reply = guarded(&api, || {
        api.read(|_| -> Result<Reply, ApiError> { panic!("a read's panic with its input") })
    });
    let (status, _, body) = body_of(reply);
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!body.to_string().contains("input"), "{body}");
    assert!(api.healthy());
    assert_eq!(
        call(&api, "GET", "/resource_providers", None).0,
        StatusCode::OK
    );
}

#[test]
fn a_failed_write_that_cannot_be_undone_stops_the_api() {
    let (api, uuid) = api();
    let shared = api.soundness();
    // Someone else's panic poisons the store's lock while a write is being undone.
    let journal = {
        let book = api.book.write().unwrap();
        let store = api.store.write().unwrap();
        let mut state = State::new(Guard::Write(store), Guard::Write(book), api.backing);
        state.bump(&uuid).unwrap();
        state.into_journal()
    };
    let store = api.store.clone();
    let _ = std::thread::spawn(move || {
        let _held = store.write().unwrap();
        panic!("poisoning the store's lock");
    })
    .join();
    let e = api.undo_or_lose(&journal).unwrap_err();
    assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(!api.healthy() && !shared.is_sound());
    let (status, body) = call(&api, "GET", "/resource_providers", None);
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.to_string().contains(UNSOUND_DETAIL), "{body}");
    // Version discovery still answers.
    assert_eq!(call(&api, "GET", "/", None).0, StatusCode::OK);
}

#[test]
fn a_lock_poisoned_elsewhere_stops_the_api_rather_than_be_ignored() {
    let (api, _) = api();
    let store = api.store.clone();
    let _ = std::thread::spawn(move || {
        let _held = store.write().unwrap();
        panic!("poisoning the store's lock");
    })
    .join();
    let (status, _) = call(&api, "GET", "/resource_providers", None);
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(!api.healthy());
}

#[test]
fn an_api_can_report_to_a_flag_of_the_caller() {
    let flag = Soundness::new();
    let api = PlacementApi::new(Store::default(), "admin".into()).reporting_to(flag.clone());
    assert!(api.healthy() && flag.is_sound());
    let _ = api.lose_soundness("test");
    assert!(!flag.is_sound());
    // Another API's flag is untouched.
    assert!(PlacementApi::new(Store::default(), "admin".into()).healthy());
}
