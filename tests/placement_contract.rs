//! Placement's contract where clients read more than statuses: the same requests sent to
//! real Placement 16 (`hack/placement-serve.py`, the virtualenv of `hack/placement-venv.sh`)
//! and to `kubeplace placement serve`, the answers compared as clients read them.

mod placement_server;
#[path = "support/real_placement.rs"]
mod real_placement;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use placement_server::Server;
use real_placement::RealPlacement;
use serde_json::{Value, json};

/// An answer as a client reads it: its status, its `Location` and the body's text.
#[derive(Debug)]
struct Reply {
    status: u16,
    location: Option<String>,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The keys of the object at `pointer`, in the order the body writes them.
    fn keys_at(&self, pointer: &str) -> Vec<String> {
        let written: Written = serde_json::from_str(&self.body).expect("JSON");
        let mut at = &written;
        for key in pointer.split('/').filter(|k| !k.is_empty()) {
            at = match at {
                Written::Object(fields) => {
                    &fields
                        .iter()
                        .find(|(k, _)| k == key)
                        .unwrap_or_else(|| panic!("no {key} in {}", self.body))
                        .1
                }
                Written::Other => panic!("{pointer} is not in {}", self.body),
            };
        }
        match at {
            Written::Object(fields) => fields.iter().map(|(k, _)| k.clone()).collect(),
            Written::Other => panic!("{pointer} is not an object in {}", self.body),
        }
    }
}

/// A JSON value's objects with their keys in the order written.
enum Written {
    Object(Vec<(String, Written)>),
    Other,
}

impl<'de> serde::Deserialize<'de> for Written {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Written;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Written, A::Error> {
                let mut fields = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Written>()? {
                    fields.push((k, v));
                }
                Ok(Written::Object(fields))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Written, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Written::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Written, E> {
                Ok(Written::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Written, E> {
                Ok(Written::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Written, E> {
                Ok(Written::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Written, E> {
                Ok(Written::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Written, E> {
                Ok(Written::Other)
            }
            fn visit_unit<E>(self) -> Result<Written, E> {
                Ok(Written::Other)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// One request to `url` (`http://HOST:PORT`) with exactly these headers (and a `Host`
/// naming the address, unless they give one).
fn send(
    url: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let body = body.unwrap_or("");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let location = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("location")
            .then(|| value.trim().to_string())
    });
    Reply {
        status,
        location,
        body: body.to_string(),
    }
}

/// A call as Placement's clients make it: the admin token (with the roles Placement's
/// noauth2 needs for the reshaper), a microversion, a JSON body.
fn call(url: &str, method: &str, path: &str, mv: &str, body: Option<&Value>) -> Reply {
    let version = format!("placement {mv}");
    let text = body.map(Value::to_string);
    let mut headers = vec![
        ("X-Auth-Token", "admin"),
        ("X-Roles", "admin,member,reader,service"),
        ("OpenStack-API-Version", version.as_str()),
        ("Accept", "application/json"),
    ];
    if text.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    send(url, method, path, &headers, text.as_deref())
}

/// Both servers, fresh: real Placement first, then kubeplace.
struct Both {
    placement: RealPlacement,
    kubeplace: Server,
}

impl Both {
    fn start(kubeplace_args: &[&str]) -> Both {
        Both {
            placement: RealPlacement::start(),
            kubeplace: Server::start(kubeplace_args),
        }
    }

    /// Both with the same `[placement]` options: Placement's as `KEY=VALUE`, kubeplace's
    /// as its flags.
    fn start_with_options(placement: &[&str], kubeplace_args: &[&str]) -> Both {
        Both {
            placement: RealPlacement::start_with_options(placement),
            kubeplace: Server::start(kubeplace_args),
        }
    }

    fn urls(&self) -> [(&'static str, String); 2] {
        [
            ("Placement", self.placement.url.clone()),
            ("kubeplace", self.kubeplace.url()),
        ]
    }

    /// The same call to both; each one's answer.
    fn call(&self, method: &str, path: &str, mv: &str, body: Option<&Value>) -> [Reply; 2] {
        self.urls()
            .map(|(_, url)| call(&url, method, path, mv, body))
    }

    /// The same call to both, which must answer 2xx.
    #[track_caller]
    fn ok(&self, method: &str, path: &str, mv: &str, body: Option<&Value>) -> [Reply; 2] {
        let replies = self.call(method, path, mv, body);
        for ((who, _), r) in self.urls().iter().zip(&replies) {
            assert!(
                (200..300).contains(&r.status),
                "{who}: {method} {path}: {} {}",
                r.status,
                r.body
            );
        }
        replies
    }
}

const CN: &str = "c0a80001-0000-4000-8000-00000000cc01";
const CN_GPU: &str = "c0a80001-0000-4000-8000-00000000cc11";
const VM: &str = "9a000000-0000-4000-8000-00000000cc01";
const PROJECT: &str = "6f1d0e52-0000-4000-8000-00000000cc0a";

fn inventory(total: i64) -> Value {
    json!({"total": total})
}

/// A compute node with VGPU inventory, a child that will take it, and an instance holding
/// VCPU and VGPU on the compute node.
fn vgpu_cloud(both: &Both) {
    both.ok(
        "POST",
        "/resource_providers",
        "1.39",
        Some(&json!({"name": "cn", "uuid": CN})),
    );
    both.ok(
        "POST",
        "/resource_providers",
        "1.39",
        Some(&json!({"name": "cn_gpu", "uuid": CN_GPU, "parent_provider_uuid": CN})),
    );
    both.ok(
        "PUT",
        &format!("/resource_providers/{CN}/inventories"),
        "1.39",
        Some(&json!({"resource_provider_generation": 0,
                     "inventories": {"VCPU": inventory(8), "VGPU": inventory(4)}})),
    );
    both.ok(
        "PUT",
        &format!("/allocations/{VM}"),
        "1.39",
        Some(
            &json!({"allocations": {CN: {"resources": {"VCPU": 2, "VGPU": 1}}},
                     "project_id": PROJECT, "user_id": PROJECT,
                     "consumer_generation": null, "consumer_type": "INSTANCE"}),
        ),
    );
}

/// What a client reads of the cloud: each provider's generation and inventories, the
/// consumer's generation and allocations.
fn cloud_view(url: &str) -> Value {
    let provider = |uuid: &str| {
        let r = call(
            url,
            "GET",
            &format!("/resource_providers/{uuid}/inventories"),
            "1.39",
            None,
        )
        .json();
        json!({"generation": r["resource_provider_generation"],
               "inventories": r["inventories"].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>())})
    };
    let consumer = call(url, "GET", &format!("/allocations/{VM}"), "1.39", None).json();
    json!({"cn": provider(CN), "cn_gpu": provider(CN_GPU),
           "consumer generation": consumer["consumer_generation"],
           "allocations": consumer["allocations"]})
}

/// A reshape that takes the VGPU inventory from the compute node while the instance's
/// VGPU stays there is inventory in use, as in Placement (the allocations are judged
/// against the old and new inventories together, the inventories last); nothing changes.
/// The reshape that moves the allocation too leaves the same generations as Placement's.
#[test]
fn reshape_refuses_inventory_in_use_and_moves_generations_as_placement() {
    let both = Both::start(&[]);
    vgpu_cloud(&both);
    let [before_p, before_k] = both.urls().map(|(_, url)| cloud_view(&url));
    assert_eq!(before_p, before_k);
    let reshape = |allocation_on: &str, cn_generation: &Value, gpu_generation: &Value| {
        json!({
            "inventories": {
                CN: {"resource_provider_generation": cn_generation, "inventories": {"VCPU": inventory(8)}},
                CN_GPU: {"resource_provider_generation": gpu_generation, "inventories": {"VGPU": inventory(4)}},
            },
            "allocations": {VM: {
                "allocations": if allocation_on == CN {
                    json!({CN: {"resources": {"VCPU": 2, "VGPU": 1}}})
                } else {
                    json!({CN: {"resources": {"VCPU": 2}}, CN_GPU: {"resources": {"VGPU": 1}}})
                },
                "project_id": PROJECT, "user_id": PROJECT,
                "consumer_generation": before_p["consumer generation"],
                "consumer_type": "INSTANCE"}},
        })
    };
    let left = reshape(
        CN,
        &before_p["cn"]["generation"],
        &before_p["cn_gpu"]["generation"],
    );
    for ((who, url), r) in
        both.urls()
            .iter()
            .zip(both.call("POST", "/reshaper", "1.39", Some(&left)))
    {
        assert_eq!(r.status, 409, "{who}: {}", r.body);
        assert_eq!(
            r.json()["errors"][0]["code"],
            "placement.inventory.inuse",
            "{who}: {}",
            r.body
        );
        assert_eq!(
            cloud_view(url),
            before_p,
            "{who}: the refused reshape changed something"
        );
    }
    let moved = reshape(
        CN_GPU,
        &before_p["cn"]["generation"],
        &before_p["cn_gpu"]["generation"],
    );
    both.ok("POST", "/reshaper", "1.39", Some(&moved));
    let [after_p, after_k] = both.urls().map(|(_, url)| cloud_view(&url));
    assert_eq!(after_k, after_p);
    // An older microversion (1.30, the reshaper's first) judges it the same way.
    let back = json!({
        "inventories": {
            CN: {"resource_provider_generation": after_p["cn"]["generation"],
                 "inventories": {"VCPU": inventory(8), "VGPU": inventory(4)}},
            CN_GPU: {"resource_provider_generation": after_p["cn_gpu"]["generation"], "inventories": {}},
        },
        "allocations": {VM: {
            "allocations": {CN: {"resources": {"VCPU": 2}}, CN_GPU: {"resources": {"VGPU": 1}}},
            "project_id": PROJECT, "user_id": PROJECT,
            "consumer_generation": after_p["consumer generation"]}},
    });
    for ((who, _), r) in both
        .urls()
        .iter()
        .zip(both.call("POST", "/reshaper", "1.30", Some(&back)))
    {
        assert_eq!(r.status, 409, "{who}: {}", r.body);
        assert_eq!(
            r.json()["errors"][0]["code"],
            "placement.inventory.inuse",
            "{who}"
        );
    }
}

/// A reshape that empties a consumer and gives a provider no inventories moves the
/// generations as Placement's: the provider the consumer left once for that, once for its
/// inventories (and no interim step for a provider given none).
#[test]
fn reshape_emptying_a_consumer_moves_generations_as_placement() {
    let both = Both::start(&[]);
    vgpu_cloud(&both);
    let before = cloud_view(&both.placement.url);
    let moved = json!({
        "inventories": {
            CN: {"resource_provider_generation": before["cn"]["generation"], "inventories": {"VCPU": inventory(8)}},
            CN_GPU: {"resource_provider_generation": before["cn_gpu"]["generation"], "inventories": {"VGPU": inventory(4)}},
        },
        "allocations": {VM: {
            "allocations": {CN: {"resources": {"VCPU": 2}}, CN_GPU: {"resources": {"VGPU": 1}}},
            "project_id": PROJECT, "user_id": PROJECT,
            "consumer_generation": before["consumer generation"], "consumer_type": "INSTANCE"}},
    });
    both.ok("POST", "/reshaper", "1.39", Some(&moved));
    let after = cloud_view(&both.placement.url);
    assert_eq!(cloud_view(&both.kubeplace.url()), after);
    let emptied = json!({
        "inventories": {
            CN: {"resource_provider_generation": after["cn"]["generation"],
                 "inventories": {"VCPU": inventory(8), "VGPU": inventory(4)}},
            CN_GPU: {"resource_provider_generation": after["cn_gpu"]["generation"], "inventories": {}},
        },
        "allocations": {VM: {
            "allocations": {},
            "project_id": PROJECT, "user_id": PROJECT,
            "consumer_generation": after["consumer generation"], "consumer_type": "INSTANCE"}},
    });
    both.ok("POST", "/reshaper", "1.39", Some(&emptied));
    let [p, k] = both.urls().map(|(_, url)| cloud_view(&url));
    assert_eq!(k, p);
}

/// Three providers whose uuids sort otherwise than they are written.
const P_A: &str = "aaaaaaaa-0000-4000-8000-0000000000a1";
const P_B: &str = "bbbbbbbb-0000-4000-8000-0000000000b1";
const P_C: &str = "cccccccc-0000-4000-8000-0000000000c1";
const VM2: &str = "9a000000-0000-4000-8000-00000000cc02";

fn three_providers(both: &Both) {
    for (name, uuid) in [("a", P_A), ("b", P_B), ("c", P_C)] {
        both.ok(
            "POST",
            "/resource_providers",
            "1.39",
            Some(&json!({"name": name, "uuid": uuid})),
        );
        both.ok(
            "PUT",
            &format!("/resource_providers/{uuid}/inventories"),
            "1.39",
            Some(&json!({"resource_provider_generation": 0,
                         "inventories": {"VCPU": inventory(64), "MEMORY_MB": inventory(65536)}})),
        );
    }
}

/// A body's `allocations` object with its providers in the order given (a JSON object's
/// keys in that order, which `json!` would sort).
fn allocations_in_order(providers: &[(&str, i64)]) -> String {
    let entries: Vec<String> = providers
        .iter()
        .map(|(uuid, vcpu)| {
            format!(r#""{uuid}": {{"resources": {{"VCPU": {vcpu}, "MEMORY_MB": 128}}}}"#)
        })
        .collect();
    format!("{{{}}}", entries.join(", "))
}

/// Both servers' `allocations` keys of a consumer at `mv`, which must be equal; they are
/// returned.
#[track_caller]
fn providers_listed(both: &Both, consumer: &str, mv: &str) -> Vec<String> {
    let [p, k] = both.ok("GET", &format!("/allocations/{consumer}"), mv, None);
    let (p, k) = (p.keys_at("/allocations"), k.keys_at("/allocations"));
    assert_eq!(
        k, p,
        "GET /allocations/{consumer} at {mv}: kubeplace lists {k:?}, Placement {p:?}"
    );
    k
}

/// A consumer's providers come back in the order they were written, whatever their uuids'
/// order, through PUT, POST /allocations and the reshaper, at every microversion that
/// shows them; a rewrite lists them in its own order.
#[test]
fn a_consumers_providers_come_back_in_the_order_written() {
    let both = Both::start(&[]);
    three_providers(&both);
    let raw = |method: &str, path: &str, mv: &str, body: String| {
        for (who, url) in both.urls() {
            let version = format!("placement {mv}");
            let r = send(
                &url,
                method,
                path,
                &[
                    ("X-Auth-Token", "admin"),
                    ("X-Roles", "admin,member,reader,service"),
                    ("OpenStack-API-Version", &version),
                    ("Content-Type", "application/json"),
                ],
                Some(&body),
            );
            assert!(
                (200..300).contains(&r.status),
                "{who}: {method} {path} {body}: {} {}",
                r.status,
                r.body
            );
        }
    };
    let put = |order: &[(&str, i64)], generation: Value, mv: &str| {
        raw(
            "PUT",
            &format!("/allocations/{VM}"),
            mv,
            format!(
                r#"{{"allocations": {}, "project_id": "{PROJECT}", "user_id": "{PROJECT}", "consumer_generation": {generation}}}"#,
                allocations_in_order(order)
            ),
        )
    };
    put(&[(P_C, 1), (P_A, 2), (P_B, 3)], Value::Null, "1.28");
    for mv in ["1.0", "1.12", "1.28", "1.38", "1.39"] {
        assert_eq!(providers_listed(&both, VM, mv), [P_C, P_A, P_B], "at {mv}");
    }
    // A rewrite is listed in its own order.
    put(&[(P_B, 3), (P_A, 2)], json!(1), "1.28");
    assert_eq!(providers_listed(&both, VM, "1.39"), [P_B, P_A]);
    // Several consumers at once, each in its own order.
    raw(
        "POST",
        "/allocations",
        "1.28",
        format!(
            r#"{{"{VM2}": {{"allocations": {}, "project_id": "{PROJECT}", "user_id": "{PROJECT}", "consumer_generation": null}},
                "{VM}": {{"allocations": {}, "project_id": "{PROJECT}", "user_id": "{PROJECT}", "consumer_generation": 2}}}}"#,
            allocations_in_order(&[(P_B, 1), (P_C, 1), (P_A, 1)]),
            allocations_in_order(&[(P_A, 1), (P_C, 1)]),
        ),
    );
    assert_eq!(providers_listed(&both, VM2, "1.39"), [P_B, P_C, P_A]);
    assert_eq!(providers_listed(&both, VM, "1.39"), [P_A, P_C]);
    // A reshape writes the consumer in its body's order too.
    let generation = |uuid: &str| {
        both.ok("GET", &format!("/resource_providers/{uuid}"), "1.39", None)[0].json()["generation"]
            .clone()
    };
    raw(
        "POST",
        "/reshaper",
        "1.39",
        format!(
            r#"{{"inventories": {{"{P_A}": {{"resource_provider_generation": {}, "inventories": {{"VCPU": {{"total": 64}}, "MEMORY_MB": {{"total": 65536}}}}}}}},
                "allocations": {{"{VM}": {{"allocations": {}, "project_id": "{PROJECT}", "user_id": "{PROJECT}", "consumer_generation": 3, "consumer_type": "INSTANCE"}}}}}}"#,
            generation(P_A),
            allocations_in_order(&[(P_C, 1), (P_B, 1), (P_A, 1)]),
        ),
    );
    assert_eq!(providers_listed(&both, VM, "1.39"), [P_C, P_B, P_A]);
    // Before 1.12 a list of providers, in its order.
    raw(
        "PUT",
        &format!("/allocations/{VM2}"),
        "1.0",
        format!(
            r#"{{"allocations": [{{"resource_provider": {{"uuid": "{P_C}"}}, "resources": {{"VCPU": 1}}}},
                                {{"resource_provider": {{"uuid": "{P_A}"}}, "resources": {{"VCPU": 1}}}}]}}"#
        ),
    );
    assert_eq!(providers_listed(&both, VM2, "1.0"), [P_C, P_A]);
}

/// Aggregates in each form Placement takes for a uuid (no hyphens as `uuid4().hex` writes
/// them, upper case, braced, a urn, hyphens elsewhere).
const AGGREGATES_AS_GIVEN: [&str; 5] = [
    "0a1b2c3d4e5f40718293a4b5c6d7e8f9",
    "0A1B2C3D-4E5F-4071-8293-A4B5C6D7E8F0",
    "{0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f1}",
    "urn:uuid:0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f2",
    "0a1b-2c3d-4e5f-4071-8293-a4b5-c6d7-e8f3",
];

/// Aggregates come back as the strings they were given, in every form Placement takes, at
/// every microversion of the aggregates API (the list form before 1.19, the object form
/// with the provider's generation after); `member_of` matches the string as given only.
#[test]
fn aggregates_come_back_as_given() {
    let both = Both::start(&[]);
    for (name, uuid) in [("a", P_A), ("b", P_B)] {
        both.ok(
            "POST",
            "/resource_providers",
            "1.39",
            Some(&json!({"name": name, "uuid": uuid})),
        );
    }
    let same = |replies: [Reply; 2], what: &str| {
        let [p, k] = replies;
        assert_eq!(
            k.status, p.status,
            "{what}: kubeplace {}, Placement {}",
            k.body, p.body
        );
        assert_eq!(k.json(), p.json(), "{what}");
        k.json()
    };
    // The list form (1.1 to 1.18): the answer and a read back.
    let path_a = format!("/resource_providers/{P_A}/aggregates");
    let set = same(
        both.ok(
            "PUT",
            &path_a,
            "1.1",
            Some(&json!(AGGREGATES_AS_GIVEN[..2])),
        ),
        "PUT at 1.1",
    );
    assert_eq!(set["aggregates"], json!(AGGREGATES_AS_GIVEN[..2]));
    // Placement lists a provider's aggregates in the order of a Python set: they are
    // compared as a set, the rest of the answer as it is.
    let sorted = |r: &Reply| {
        let mut v = r.json();
        let mut listed: Vec<String> = serde_json::from_value(v["aggregates"].take()).unwrap();
        listed.sort();
        (listed, v)
    };
    let as_set = |given: &[&str]| {
        let mut v: Vec<String> = given.iter().map(|s| s.to_string()).collect();
        v.sort();
        v
    };
    for mv in ["1.1", "1.18", "1.19", "1.39"] {
        let [p, k] = both.ok("GET", &path_a, mv, None);
        assert_eq!(sorted(&k), sorted(&p), "GET at {mv}");
        assert_eq!(
            sorted(&k).0,
            as_set(&AGGREGATES_AS_GIVEN[..2]),
            "GET at {mv}"
        );
    }
    // The object form (1.19 on), every form at once.
    let path_b = format!("/resource_providers/{P_B}/aggregates");
    let set = same(
        both.ok(
            "PUT",
            &path_b,
            "1.19",
            Some(&json!({"aggregates": AGGREGATES_AS_GIVEN, "resource_provider_generation": 0})),
        ),
        "PUT at 1.19",
    );
    assert_eq!(set["aggregates"], json!(AGGREGATES_AS_GIVEN));
    let [p, k] = both.ok("GET", &path_b, "1.39", None);
    assert_eq!(sorted(&k), sorted(&p), "GET at 1.39");
    assert_eq!(sorted(&k).0, as_set(&AGGREGATES_AS_GIVEN));
    // member_of compares the strings: the hyphenless one matches as given, its hyphenated
    // form names another aggregate.
    let uuids = |r: Value| -> Vec<String> {
        r["resource_providers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["uuid"].as_str().unwrap().to_string())
            .collect()
    };
    let hex = AGGREGATES_AS_GIVEN[0];
    let query = format!("/resource_providers?member_of={hex}");
    let got = same(both.ok("GET", &query, "1.3", None), "member_of as given");
    assert_eq!(uuids(got), [P_A, P_B].map(String::from));
    let dashed = "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9";
    let query = format!("/resource_providers?member_of=in:{dashed}");
    let got = same(both.ok("GET", &query, "1.3", None), "member_of hyphenated");
    assert_eq!(uuids(got), Vec::<String>::new());
    // What Placement refuses, kubeplace refuses: 31 digits, a stray character.
    for bad in [
        "0a1b2c3d4e5f40718293a4b5c6d7e8f",
        "0a1b2c3d4e5f40718293a4b5c6d7e8fg",
    ] {
        let [p, k] = both.call(
            "PUT",
            &path_b,
            "1.39",
            Some(&json!({"aggregates": [bad], "resource_provider_generation": 1})),
        );
        assert_eq!(
            (k.status, p.status),
            (400, 400),
            "{bad}: {} / {}",
            k.body,
            p.body
        );
    }
}

/// A manifest's provider may list aggregates in any form Placement takes: admission (as
/// `kubeplace apply` runs it) takes it, and `serve -f` answers them as written.
#[test]
fn aggregates_as_given_in_a_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cloud.yaml");
    let listed: Vec<String> = AGGREGATES_AS_GIVEN
        .iter()
        .map(|a| format!("'{a}'"))
        .collect();
    std::fs::write(
        &file,
        format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: a\nspec:\n  uuid: {P_A}\n  aggregates: [{}]\n",
            listed.join(", ")
        ),
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let (ok, out, err) = kubeplace(&["apply", "-f", file]);
    assert!(ok, "apply: {out}{err}");
    let served = Server::start(&["-f", file]);
    let r = call(
        &served.url(),
        "GET",
        &format!("/resource_providers/{P_A}/aggregates"),
        "1.39",
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let mut got: Vec<String> = serde_json::from_value(r.json()["aggregates"].clone()).unwrap();
    got.sort();
    let mut want: Vec<String> = AGGREGATES_AS_GIVEN.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(got, want);
    let hex = AGGREGATES_AS_GIVEN[0];
    let r = call(
        &served.url(),
        "GET",
        &format!("/resource_providers?member_of={hex}"),
        "1.3",
        None,
    );
    assert_eq!(r.json()["resource_providers"][0]["uuid"], P_A, "{}", r.body);
}

/// Runs `kubeplace ARGS`; whether it succeeded, its stdout and its stderr.
fn kubeplace(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(args)
        .env_remove("OS_TOKEN")
        .output()
        .expect("kubeplace runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Aggregates in any form Placement takes survive `import --to-file` and `serve -f` as the
/// strings they were.
#[test]
fn aggregates_as_given_survive_a_file_import() {
    let placement = RealPlacement::start();
    let url = placement.url.as_str();
    let r = call(
        url,
        "POST",
        "/resource_providers",
        "1.39",
        Some(&json!({"name": "a", "uuid": P_A})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = call(
        url,
        "PUT",
        &format!("/resource_providers/{P_A}/aggregates"),
        "1.39",
        Some(&json!({"aggregates": AGGREGATES_AS_GIVEN, "resource_provider_generation": 0})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cloud.yaml");
    let file = file.to_str().unwrap();
    let (ok, out, err) = kubeplace(&[
        "placement",
        "import",
        "--from",
        url,
        "--token",
        "admin",
        "--to-file",
        file,
    ]);
    assert!(ok, "import: {out}{err}");
    let served = Server::start(&["-f", file]);
    let path = format!("/resource_providers/{P_A}/aggregates");
    let [want, got] = [url.to_string(), served.url()].map(|u| {
        let r = call(&u, "GET", &path, "1.39", None);
        assert_eq!(r.status, 200, "{}", r.body);
        let mut listed: Vec<String> =
            serde_json::from_value(r.json()["aggregates"].clone()).unwrap();
        listed.sort();
        listed
    });
    assert_eq!(got, want);
}

/// Custom names Placement holds that no provider uses: a trait, a resource class.
const UNUSED_TRAIT: &str = "CUSTOM_NO_PROVIDER_HAS_IT";
const UNUSED_CLASS: &str = "CUSTOM_NO_INVENTORY_OF_IT";
const USED_TRAIT: &str = "CUSTOM_ON_A_PROVIDER";

/// A custom trait and a resource class that exist in Placement but on no provider go
/// through `import --to-file` (YAML and JSON) in the registry ConfigMap, as a cluster keeps
/// them; `serve -f` then answers what Placement answers for queries and reads naming them,
/// and `placement candidates -f` answers 200 as Placement does. A second import writes
/// nothing.
#[test]
fn custom_names_no_provider_uses_survive_a_file_import() {
    let placement = RealPlacement::start();
    let url = placement.url.as_str();
    // Created out of name order: the file keeps the order they were created in.
    for (path, mv) in [
        (format!("/traits/{USED_TRAIT}"), "1.39"),
        (format!("/traits/{UNUSED_TRAIT}"), "1.39"),
        (format!("/resource_classes/{UNUSED_CLASS}"), "1.7"),
    ] {
        let r = call(url, "PUT", &path, mv, None);
        assert_eq!(r.status, 201, "PUT {path}: {}", r.body);
    }
    let r = call(
        url,
        "POST",
        "/resource_providers",
        "1.39",
        Some(&json!({"name": "a", "uuid": P_A})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    for (path, body) in [
        (
            format!("/resource_providers/{P_A}/inventories"),
            json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}),
        ),
        (
            format!("/resource_providers/{P_A}/traits"),
            json!({"resource_provider_generation": 1, "traits": [USED_TRAIT]}),
        ),
    ] {
        let r = call(url, "PUT", &path, "1.39", Some(&body));
        assert_eq!(r.status, 200, "PUT {path}: {}", r.body);
    }
    let reads = [
        "/traits?name=startswith:CUSTOM_".to_string(),
        format!("/traits/{UNUSED_TRAIT}"),
        format!("/resource_classes/{UNUSED_CLASS}"),
        format!("/allocation_candidates?resources=VCPU:1&required={UNUSED_TRAIT}"),
        format!("/allocation_candidates?resources=VCPU:1&required=!{UNUSED_TRAIT}"),
        format!("/allocation_candidates?resources={UNUSED_CLASS}:1"),
        format!("/resource_providers?required={UNUSED_TRAIT}"),
    ];
    let answers = |url: &str| -> Vec<(u16, Value)> {
        reads
            .iter()
            .map(|path| {
                let r = call(url, "GET", path, "1.39", None);
                (r.status, r.json())
            })
            .collect()
    };
    let want = answers(url);
    assert_eq!(want[3].0, 200, "{:?}", want[3]);
    assert_eq!(
        want[0].1["traits"],
        json!([USED_TRAIT, UNUSED_TRAIT]),
        "Placement lists custom traits as created"
    );
    let dir = tempfile::tempdir().unwrap();
    for (format, name) in [("yaml", "cloud.yaml"), ("json", "cloud.json")] {
        let file = dir.path().join(name);
        let file = file.to_str().unwrap();
        let import = [
            "placement",
            "import",
            "--from",
            url,
            "--token",
            "admin",
            "--to-file",
            file,
            "-o",
            format,
        ];
        let (ok, out, err) = kubeplace(&import);
        assert!(ok, "import ({format}): {out}{err}");
        let served = Server::start(&["-f", file]);
        let got = answers(&served.url());
        for ((path, got), want) in reads.iter().zip(&got).zip(&want) {
            assert_eq!(got, want, "{format}: GET {path}");
        }
        for query in [
            format!("resources=VCPU:1&required={UNUSED_TRAIT}"),
            format!("resources={UNUSED_CLASS}:1"),
        ] {
            let (ok, out, err) = kubeplace(&[
                "placement",
                "candidates",
                "-f",
                file,
                "--query",
                &query,
                "-o",
                "json",
            ]);
            assert!(ok, "candidates -f {query}: {out}{err}");
            let body: Value = serde_json::from_str(&out).expect("JSON");
            assert_eq!(body["allocation_requests"], json!([]), "{query}: {out}");
        }
        let (ok, out, err) = kubeplace(&import);
        assert!(
            ok && err.contains("up to date"),
            "second import: {out}{err}"
        );
    }
}

/// Trait lists in Placement's order: standard traits before custom ones, and custom ones in
/// the order they were created (a trait deleted and created again goes last), in a
/// provider's traits, provider summaries at 1.17 and 1.39 and `GET /traits` with and
/// without `startswith:`; by name in the answer to setting them and in
/// `GET /traits?name=in:`, where Placement looks the names up. Custom resource classes are
/// listed in the order they were created too.
#[test]
fn trait_lists_put_standard_traits_first_then_custom_ones_as_created() {
    let both = Both::start(&[]);
    for name in ["CUSTOM_Z", "CUSTOM_B", "CUSTOM_GONE", "CUSTOM_A"] {
        both.ok("PUT", &format!("/traits/{name}"), "1.39", None);
    }
    both.ok("DELETE", "/traits/CUSTOM_Z", "1.39", None);
    both.ok("PUT", "/traits/CUSTOM_Z", "1.39", None);
    both.ok("DELETE", "/traits/CUSTOM_GONE", "1.39", None);
    for name in ["CUSTOM_ZETA", "CUSTOM_ALPHA"] {
        both.ok("PUT", &format!("/resource_classes/{name}"), "1.7", None);
    }
    both.ok(
        "POST",
        "/resource_providers",
        "1.39",
        Some(&json!({"name": "a", "uuid": P_A})),
    );
    both.ok(
        "PUT",
        &format!("/resource_providers/{P_A}/inventories"),
        "1.39",
        Some(&json!({"resource_provider_generation": 0, "inventories": {"VCPU": inventory(4)}})),
    );
    let traits = json!({"resource_provider_generation": 1,
                        "traits": ["CUSTOM_B", "CUSTOM_Z", "HW_NUMA_ROOT", "CUSTOM_A"]});
    let same = |[p, k]: [Reply; 2], what: &str| {
        assert_eq!(k.json(), p.json(), "{what}");
        k.json()
    };
    same(
        both.ok(
            "PUT",
            &format!("/resource_providers/{P_A}/traits"),
            "1.39",
            Some(&traits),
        ),
        "PUT traits",
    );
    let as_created = json!(["HW_NUMA_ROOT", "CUSTOM_B", "CUSTOM_A", "CUSTOM_Z"]);
    let got = same(
        both.ok(
            "GET",
            &format!("/resource_providers/{P_A}/traits"),
            "1.39",
            None,
        ),
        "GET a provider's traits",
    );
    assert_eq!(got["traits"], as_created);
    same(
        both.ok(
            "GET",
            "/traits?name=in:CUSTOM_B,HW_NUMA_ROOT,CUSTOM_A",
            "1.39",
            None,
        ),
        "GET /traits?name=in:",
    );
    let got = same(
        both.ok("GET", "/traits?name=startswith:CUSTOM_", "1.39", None),
        "GET /traits?name=startswith:",
    );
    assert_eq!(got["traits"], json!(["CUSTOM_B", "CUSTOM_A", "CUSTOM_Z"]));
    // Every trait: Placement's standard ones are in an order of its own (a Python set's),
    // so only the custom ones' order is compared, and that the standard ones come first.
    let [p, k] = both.ok("GET", "/traits", "1.39", None);
    let custom_part = |r: &Reply| -> Vec<String> {
        let all: Vec<String> = serde_json::from_value(r.json()["traits"].clone()).unwrap();
        let first_custom = all.iter().position(|t| t.starts_with("CUSTOM_")).unwrap();
        assert!(
            all[first_custom..].iter().all(|t| t.starts_with("CUSTOM_")),
            "{all:?}"
        );
        all[first_custom..].to_vec()
    };
    assert_eq!(custom_part(&k), custom_part(&p), "GET /traits");
    let [p, k] = both.ok("GET", "/resource_classes", "1.7", None);
    let custom_classes = |r: &Reply| -> Vec<String> {
        r.json()["resource_classes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str().filter(|n| n.starts_with("CUSTOM_")))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        custom_classes(&k),
        custom_classes(&p),
        "GET /resource_classes"
    );
    assert_eq!(custom_classes(&k), ["CUSTOM_ZETA", "CUSTOM_ALPHA"]);
    for mv in ["1.17", "1.39"] {
        let [p, k] = both.ok("GET", "/allocation_candidates?resources=VCPU:1", mv, None);
        let summary = |r: &Reply| r.json()["provider_summaries"][P_A]["traits"].clone();
        assert_eq!(summary(&k), summary(&p), "summaries at {mv}");
        assert_eq!(summary(&k), as_created, "summaries at {mv}");
    }
}

/// `Location` follows how the caller reached the server: the `Host` it named (without the
/// port its scheme implies), and, only where the proxy's headers are believed, `Forwarded`
/// (its first entry) over `X-Forwarded-Proto`/`-Host`, and `X-Forwarded-Prefix`. Compared
/// with real Placement with `[oslo_middleware] enable_proxy_headers_parsing` off and on.
#[test]
fn location_follows_how_the_caller_reached_the_server() {
    let cases: &[&[(&str, &str)]] = &[
        &[("Host", "placement.example:8778")],
        &[("Host", "placement.example:80")],
        &[
            ("Host", "placement.example:443"),
            ("X-Forwarded-Proto", "https"),
        ],
        &[
            ("Host", "10.0.0.5:8778"),
            ("X-Forwarded-Proto", "https"),
            ("X-Forwarded-Host", "api.example"),
            ("X-Forwarded-Prefix", "/placement"),
        ],
        &[
            ("Host", "10.0.0.5:8778"),
            ("X-Forwarded-Proto", "http"),
            (
                "Forwarded",
                "for=192.0.2.60;proto=https;host=api.example:443, proto=http;host=inner",
            ),
        ],
        &[
            ("Host", "10.0.0.5:8778"),
            ("X-Forwarded-Proto", "https"),
            ("Forwarded", "for=192.0.2.60"),
        ],
        &[
            ("Host", "10.0.0.5:8778"),
            ("Forwarded", "Proto=HTTPS;Host=api.example:443"),
        ],
    ];
    for trusted in [false, true] {
        let placement = if trusted {
            RealPlacement::start_with_proxy_headers()
        } else {
            RealPlacement::start()
        };
        let kubeplace = Server::start(if trusted {
            &["--placement-proxy-headers"]
        } else {
            &[]
        });
        let urls = [placement.url.clone(), kubeplace.url()];
        for (i, case) in cases.iter().enumerate() {
            let uuid = format!("c0a80001-0000-4000-8000-0000000010{i:02}");
            let body = json!({"name": format!("origin-{i}"), "uuid": uuid}).to_string();
            let trait_path = format!("/traits/CUSTOM_ORIGIN_{i}");
            let answers: Vec<[(u16, Option<String>); 2]> = urls
                .iter()
                .map(|url| {
                    let mut headers = vec![
                        ("X-Auth-Token", "admin"),
                        ("OpenStack-API-Version", "placement 1.19"),
                        ("Content-Type", "application/json"),
                    ];
                    headers.extend_from_slice(case);
                    let made = send(url, "POST", "/resource_providers", &headers, Some(&body));
                    let put = send(url, "PUT", &trait_path, &headers, None);
                    [(made.status, made.location), (put.status, put.location)]
                })
                .collect();
            assert_eq!(
                answers[0], answers[1],
                "Placement, then kubeplace, proxy headers believed: {trusted}, headers {case:?}"
            );
            assert_eq!(answers[1][0].0, 201, "{:?}", answers[1]);
            assert!(
                answers[1][1]
                    .1
                    .as_deref()
                    .is_some_and(|l| l.ends_with(&trait_path)),
                "{:?}",
                answers[1]
            );
        }
    }
}

/// Three hosts, each with two NUMA cells of 4 VCPU: two candidates a host for one VCPU.
fn three_hosts_of_two_cells(both: &Both) {
    for (h, host) in ["a", "b", "c"].iter().enumerate() {
        let root = format!("c0a80001-0000-4000-8000-0000000ee{h}00");
        both.ok(
            "POST",
            "/resource_providers",
            "1.39",
            Some(&json!({"name": format!("host-{host}"), "uuid": root})),
        );
        for cell in 0..2 {
            let uuid = format!("c0a80001-0000-4000-8000-0000000ee{h}0{}", cell + 1);
            both.ok(
                "POST",
                "/resource_providers",
                "1.39",
                Some(
                    &json!({"name": format!("host-{host}-cell{cell}"), "uuid": uuid,
                             "parent_provider_uuid": root}),
                ),
            );
            both.ok(
                "PUT",
                &format!("/resource_providers/{uuid}/inventories"),
                "1.39",
                Some(&json!({"resource_provider_generation": 0,
                             "inventories": {"VCPU": inventory(4)}})),
            );
        }
    }
}

/// The roots an answer's candidates are on, and the roots it summarises.
fn hosts_of(reply: &Reply) -> (Vec<String>, std::collections::BTreeSet<String>) {
    let body = reply.json();
    let root = |rp: &str| rp[..rp.len() - 2].to_string() + "00";
    let chosen = body["allocation_requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| root(r["allocations"].as_object().unwrap().keys().next().unwrap()))
        .collect();
    let summarised = body["provider_summaries"]
        .as_object()
        .unwrap()
        .keys()
        .map(|rp| root(rp))
        .collect();
    (chosen, summarised)
}

/// Placement's `[placement]` options for choosing candidates, set the same way on both:
/// a cap of 3 depth-first takes two hosts' candidates, breadth-first one of each host; the
/// summaries are the chosen hosts' trees; randomized, a limit of 1 is a sample that (over
/// 60 asks) lands on every host, where without it every ask gets the same first host.
#[test]
fn the_candidate_options_choose_as_placements_do() {
    let count_hosts = |chosen: &[String]| {
        chosen
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    for (strategy, hosts) in [("depth-first", 2), ("breadth-first", 3)] {
        let both = Both::start_with_options(
            &[
                "max_allocation_candidates=3",
                &format!("allocation_candidates_generation_strategy={strategy}"),
            ],
            &[
                "--max-allocation-candidates=3",
                &format!("--allocation-candidates-generation-strategy={strategy}"),
            ],
        );
        three_hosts_of_two_cells(&both);
        for (who, reply) in ["Placement", "kubeplace"].iter().zip(both.ok(
            "GET",
            "/allocation_candidates?resources=VCPU:1",
            "1.39",
            None,
        )) {
            let (chosen, summarised) = hosts_of(&reply);
            assert_eq!(chosen.len(), 3, "{who} {strategy}: {}", reply.body);
            assert_eq!(count_hosts(&chosen), hosts, "{who} {strategy}: {chosen:?}");
            let trees: std::collections::BTreeSet<String> = chosen.iter().cloned().collect();
            assert_eq!(
                summarised, trees,
                "{who} {strategy}: summaries of the chosen trees"
            );
        }
    }
    for randomize in [false, true] {
        let both = Both::start_with_options(
            &[&format!("randomize_allocation_candidates={randomize}")],
            if randomize {
                &["--randomize-allocation-candidates"]
            } else {
                &[]
            },
        );
        three_hosts_of_two_cells(&both);
        for who in 0..2 {
            let mut seen = Vec::new();
            for _ in 0..60 {
                let reply = &both.ok(
                    "GET",
                    "/allocation_candidates?resources=VCPU:1&limit=1",
                    "1.39",
                    None,
                )[who];
                let (chosen, summarised) = hosts_of(reply);
                assert_eq!(chosen.len(), 1, "{}", reply.body);
                assert_eq!(summarised.len(), 1, "only the chosen tree: {}", reply.body);
                seen.push(chosen[0].clone());
            }
            let want = if randomize { 3 } else { 1 };
            assert_eq!(
                count_hosts(&seen),
                want,
                "randomize={randomize}, server {who}: {seen:?}"
            );
        }
    }
}
