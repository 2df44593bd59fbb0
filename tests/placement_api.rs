//! Placement's REST API as `kubeplace placement serve` answers it over HTTP: every served
//! endpoint, good and bad input, at several microversions. Expected codes and bodies were
//! read off real Placement 16.0.0 (docs/placement-api.md lists where kubeplace differs).

mod placement_server;

use std::time::{Duration, Instant};

use placement_server::{
    CN1, CN1_NUMA0, CN2, HEAVY_MV, LIGHT_SEARCH, Server, Slow, VM_A, accelerator_cloud,
    heavy_search, heavy_search_running, serve_exits,
};
use serde_json::{Value, json};

const LATEST: Option<&str> = Some("1.39");

fn uuids(list: &Value) -> Vec<String> {
    list["resource_providers"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|p| p["uuid"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn version_discovery_needs_no_token() {
    let s = Server::start(&[]);
    let a = s.raw("GET", "/", &[], None);
    a.expect(200);
    let v = a.json();
    assert_eq!(v["versions"][0]["min_version"], "1.0");
    assert_eq!(v["versions"][0]["max_version"], "1.39");
    assert_eq!(a.header("openstack-api-version"), Some("placement 1.0"));
    assert_eq!(a.header("vary"), Some("openstack-api-version"));
}

#[test]
fn microversion_header_latest_406_and_400() {
    let s = Server::start(&[]);
    let a = s.call("GET", "/resource_providers", Some("latest"), None);
    a.expect(200);
    assert_eq!(a.header("openstack-api-version"), Some("placement 1.39"));
    assert!(a.header("last-modified").is_some());
    assert_eq!(a.header("cache-control"), Some("no-cache"));
    let a = s.call("GET", "/resource_providers", Some("1.14"), None);
    assert_eq!(a.header("openstack-api-version"), Some("placement 1.14"));
    assert!(
        a.header("cache-control").is_none(),
        "cache headers start at 1.15"
    );
    // No header: 1.0. The legacy header is ignored, as Placement 16 ignores it.
    let a = s.raw(
        "GET",
        "/resource_providers",
        &[
            ("X-Auth-Token", "admin".into()),
            ("X-OpenStack-Placement-API-Version", "1.20".into()),
        ],
        None,
    );
    assert_eq!(a.header("openstack-api-version"), Some("placement 1.0"));
    let a = s.call("GET", "/resource_providers", Some("1.40"), None);
    a.expect(406);
    let e = &a.json()["errors"][0];
    assert_eq!(e["max_version"], "1.39");
    assert_eq!(e["min_version"], "1.0");
    assert!(
        e["detail"]
            .as_str()
            .unwrap()
            .contains("Unacceptable version header: 1.40")
    );
    s.call("GET", "/resource_providers", Some("2.0"), None)
        .expect(406);
    let a = s.call("GET", "/resource_providers", Some("1.x"), None);
    a.expect(400);
    assert!(a.error().0.contains("invalid version string: 1.x"));
}

#[test]
fn token_is_required_and_checked() {
    let s = Server::start(&["--token", "sesame"]);
    let a = s.raw("GET", "/resource_providers", &[], None);
    a.expect(401);
    assert_eq!(a.json()["title"], "Unauthorized");
    s.raw(
        "GET",
        "/resource_providers",
        &[("X-Auth-Token", "admin".into())],
        None,
    )
    .expect(403);
    s.raw(
        "GET",
        "/resource_providers",
        &[("X-Auth-Token", "sesame".into())],
        None,
    )
    .expect(200);
}

#[test]
fn unknown_paths_404_and_methods_405() {
    let s = Server::start(&[]);
    let a = s.call("GET", "/nope", LATEST, None);
    a.expect(404);
    assert_eq!(a.error().1.as_deref(), Some("placement.undefined_code"));
    let a = s.call("DELETE", "/resource_providers", LATEST, None);
    a.expect(405);
    assert_eq!(a.header("allow"), Some("GET, POST"));
    // A route that starts later is absent; a method that starts later is not allowed.
    s.call("GET", "/traits", Some("1.5"), None).expect(404);
    s.call("GET", "/allocation_candidates", Some("1.9"), None)
        .expect(404);
    let a = s.call(
        "DELETE",
        &format!("/resource_providers/{CN1}/inventories"),
        Some("1.4"),
        None,
    );
    a.expect(405);
    // No `code` before 1.23.
    let a = s.call("GET", "/nope", Some("1.22"), None);
    assert_eq!(a.error().1, None);
    // A path served from a later version is a 404 before it, a 405 for another method.
    s.call("POST", "/reshaper", Some("1.29"), Some(&json!({})))
        .expect(404);
    s.call("GET", "/reshaper", LATEST, None).expect(405);
    let a = s.call("POST", "/reshaper", LATEST, Some(&json!({})));
    a.expect(400);
    assert!(a.error().0.contains("inventories"), "{:?}", a.error());
}

#[test]
fn providers_create_show_list_update_delete() {
    let s = Server::seeded();
    // Before 1.20: 201, an empty body and Location.
    let a = s.call(
        "POST",
        "/resource_providers",
        Some("1.19"),
        Some(&json!({"name": "cn3"})),
    );
    a.expect(201);
    assert!(a.body.is_empty());
    let location = a.header("location").unwrap().to_string();
    assert!(location.starts_with(&s.url()), "{location}");
    let cn3 = location.rsplit('/').next().unwrap().to_string();
    // From 1.20: 200 and the provider.
    let a = s.call(
        "POST",
        "/resource_providers",
        LATEST,
        Some(&json!({"name": "cn3-numa0", "uuid": "d0000000-0000-4000-8000-000000000030", "parent_provider_uuid": cn3})),
    );
    a.expect(200);
    let v = a.json();
    assert_eq!(v["generation"], 0);
    assert_eq!(v["parent_provider_uuid"], cn3.as_str());
    assert_eq!(v["root_provider_uuid"], cn3.as_str());
    assert_eq!(v["links"].as_array().unwrap().len(), 6);
    // Duplicates.
    let a = s.call(
        "POST",
        "/resource_providers",
        LATEST,
        Some(&json!({"name": "cn3"})),
    );
    a.expect(409);
    assert_eq!(a.error().1.as_deref(), Some("placement.duplicate_name"));
    s.call(
        "POST",
        "/resource_providers",
        LATEST,
        Some(&json!({"name": "x", "uuid": CN1})),
    )
    .expect(409);
    // Bad bodies.
    let a = s.call(
        "POST",
        "/resource_providers",
        LATEST,
        Some(&json!({"nam": "x"})),
    );
    a.expect(400);
    assert!(a.error().0.contains("JSON does not validate"));
    let a = s.raw(
        "POST",
        "/resource_providers",
        &[
            ("X-Auth-Token", "admin".into()),
            ("OpenStack-API-Version", "placement 1.39".into()),
            ("Content-Type", "application/json".into()),
        ],
        Some("{\"name\":"),
    );
    a.expect(400);
    assert!(a.error().0.contains("Malformed JSON"));
    // A body without a Content-Type is a 400, one of another type a 415 (Placement's).
    let a = s.raw(
        "POST",
        "/resource_providers",
        &[("X-Auth-Token", "admin".into())],
        Some("name=x"),
    );
    a.expect(400);
    assert!(a.error().0.contains("Content-Type"), "{:?}", a.error());
    let a = s.raw(
        "POST",
        "/resource_providers",
        &[
            ("X-Auth-Token", "admin".into()),
            ("Content-Type", "text/plain".into()),
        ],
        Some("name=x"),
    );
    a.expect(415);
    // Checked before the provider is looked up: an unknown one without a body is a 415.
    let a = s.raw(
        "PUT",
        "/resource_providers/7850178f-1807-4512-b135-0b174985405b",
        &[("X-Auth-Token", "admin".into())],
        None,
    );
    a.expect(415);
    // A GET whose Accept takes no JSON is a 406; an error for a browser is HTML.
    let a = s.raw(
        "GET",
        "/resource_providers",
        &[
            ("X-Auth-Token", "admin".into()),
            ("Accept", "text/plain".into()),
        ],
        None,
    );
    a.expect(406);
    let a = s.raw(
        "GET",
        "/7850178f-1807-4512-b135-0b174985405b",
        &[
            ("X-Auth-Token", "admin".into()),
            ("Accept", "text/html".into()),
        ],
        None,
    );
    a.expect(404);
    assert!(
        a.header("content-type")
            .is_some_and(|t| t.starts_with("text/html")),
        "{a:?}"
    );
    // parent_provider_uuid is not a field before 1.14; an unknown parent is a 400.
    s.call(
        "POST",
        "/resource_providers",
        Some("1.13"),
        Some(&json!({"name": "y", "parent_provider_uuid": cn3})),
    )
    .expect(400);
    s.call(
        "POST",
        "/resource_providers",
        LATEST,
        Some(&json!({"name": "y", "parent_provider_uuid": "e0000000-0000-4000-8000-000000000000"})),
    )
    .expect(400);
    // Show: three links at 1.0, no tree fields before 1.14.
    let v = s
        .call(
            "GET",
            &format!("/resource_providers/{CN1}"),
            Some("1.0"),
            None,
        )
        .json();
    assert_eq!(v["links"].as_array().unwrap().len(), 3);
    assert!(v.get("root_provider_uuid").is_none());
    let v = s
        .call(
            "GET",
            &format!("/resource_providers/{CN1_NUMA0}"),
            LATEST,
            None,
        )
        .json();
    assert_eq!(v["root_provider_uuid"], CN1);
    s.call(
        "GET",
        "/resource_providers/e0000000-0000-4000-8000-000000000000",
        LATEST,
        None,
    )
    .expect(404);
    // List filters.
    let all = uuids(&s.call("GET", "/resource_providers", LATEST, None).json());
    assert_eq!(all.len(), 5);
    let l = uuids(
        &s.call("GET", "/resource_providers?name=cn2", LATEST, None)
            .json(),
    );
    assert_eq!(l, vec![CN2]);
    let l = uuids(
        &s.call(
            "GET",
            &format!("/resource_providers?in_tree={CN1_NUMA0}"),
            LATEST,
            None,
        )
        .json(),
    );
    assert_eq!(l, vec![CN1, CN1_NUMA0]);
    // cn1-numa0 has 6 of 8 VCPU free, cn2 4 of 4.
    let l = uuids(
        &s.call("GET", "/resource_providers?resources=VCPU:5", LATEST, None)
            .json(),
    );
    assert_eq!(l, vec![CN1_NUMA0]);
    let l = uuids(
        &s.call(
            "GET",
            "/resource_providers?required=COMPUTE_NODE,!CUSTOM_GOLD",
            LATEST,
            None,
        )
        .json(),
    );
    assert_eq!(l, vec![CN2]);
    let l = uuids(
        &s.call(
            "GET",
            "/resource_providers?member_of=6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a01",
            LATEST,
            None,
        )
        .json(),
    );
    assert_eq!(l, vec![CN1]);
    let a = s.call(
        "GET",
        "/resource_providers?required=CUSTOM_NOPE",
        LATEST,
        None,
    );
    a.expect(400);
    assert!(a.error().0.contains("No such trait(s): CUSTOM_NOPE"));
    // `required` is a filter from 1.18.
    s.call(
        "GET",
        "/resource_providers?required=COMPUTE_NODE",
        Some("1.17"),
        None,
    )
    .expect(400);
    // Update: rename, and parenting rules.
    let v = s
        .call(
            "PUT",
            &format!("/resource_providers/{cn3}"),
            LATEST,
            Some(&json!({"name": "cn3-renamed"})),
        )
        .expect(409)
        .json();
    assert!(
        v["errors"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("child providers")
    );
    let a = s.call(
        "PUT",
        &format!("/resource_providers/{CN2}"),
        LATEST,
        Some(&json!({"name": "cn2-renamed"})),
    );
    a.expect(200);
    assert_eq!(a.json()["name"], "cn2-renamed");
    assert_eq!(a.json()["generation"], 0, "a rename keeps the generation");
    // Re-parenting: refused before 1.37, a cycle refused always, allowed from 1.37.
    let a = s.call(
        "PUT",
        &format!("/resource_providers/{CN1_NUMA0}"),
        Some("1.36"),
        Some(&json!({"name": "cn1-numa0", "parent_provider_uuid": CN2})),
    );
    a.expect(400);
    assert!(a.error().0.contains("re-parenting"));
    s.call(
        "PUT",
        &format!("/resource_providers/{CN1}"),
        LATEST,
        Some(&json!({"name": "cn1", "parent_provider_uuid": CN1_NUMA0})),
    )
    .expect(400);
    let a = s.call(
        "PUT",
        &format!("/resource_providers/{CN1_NUMA0}"),
        LATEST,
        Some(&json!({"name": "cn1-numa0", "parent_provider_uuid": CN2})),
    );
    a.expect(200);
    assert_eq!(a.json()["root_provider_uuid"], CN2);
    let a = s.call(
        "PUT",
        &format!("/resource_providers/{CN1_NUMA0}"),
        LATEST,
        Some(&json!({"name": "cn1-numa0", "parent_provider_uuid": CN1})),
    );
    a.expect(200);
    assert_eq!(a.json()["root_provider_uuid"], CN1);
    s.call(
        "PUT",
        &format!("/resource_providers/{CN2}"),
        LATEST,
        Some(&json!({"name": "cn2", "parent_provider_uuid": cn3})),
    )
    .expect(200);
    // Delete: a parent and a provider with allocations are refused.
    let a = s.call(
        "DELETE",
        &format!("/resource_providers/{cn3}"),
        LATEST,
        None,
    );
    a.expect(409);
    assert_eq!(
        a.error().1.as_deref(),
        Some("placement.resource_provider.cannot_delete_parent")
    );
    let a = s.call(
        "DELETE",
        &format!("/resource_providers/{CN1_NUMA0}"),
        LATEST,
        None,
    );
    a.expect(409);
    assert_eq!(
        a.error().1.as_deref(),
        Some("placement.resource_provider.inuse")
    );
    s.call(
        "DELETE",
        &format!("/resource_providers/{CN2}"),
        LATEST,
        None,
    )
    .expect(204);
    s.call(
        "DELETE",
        &format!("/resource_providers/{CN2}"),
        LATEST,
        None,
    )
    .expect(404);
    s.call("GET", &format!("/resource_providers/{CN2}"), LATEST, None)
        .expect(404);
}

/// Creating a provider that exists (same uuid and name: two workers racing to create a
/// compute node's provider) is a uuid conflict, as Placement 16 reports it; Nova's report
/// client then reads the provider back, where a "name" conflict makes it fail.
#[test]
fn creating_an_existing_provider_is_a_uuid_conflict() {
    let s = Server::seeded();
    for mv in ["1.20", "1.39"] {
        let a = s.call(
            "POST",
            "/resource_providers",
            Some(mv),
            Some(&json!({"name": "cn1", "uuid": CN1})),
        );
        a.expect(409);
        let (detail, code) = a.error();
        assert!(
            detail.ends_with(&format!(
                "Conflicting resource provider uuid: {CN1} already exists.  "
            )),
            "{detail:?}"
        );
        assert_eq!(
            code.as_deref(),
            (mv == "1.39").then_some("placement.duplicate_name")
        );
    }
    // A taken uuid with a free name: the same conflict and code.
    let a = s.call(
        "POST",
        "/resource_providers",
        LATEST,
        Some(&json!({"name": "fresh", "uuid": CN1})),
    );
    a.expect(409);
    assert!(a.error().0.contains("resource provider uuid"), "{}", a.body);
    assert_eq!(a.error().1.as_deref(), Some("placement.duplicate_name"));
    // A taken name with a free (or no) uuid names the name.
    for body in [
        json!({"name": "cn1", "uuid": "d0000000-0000-4000-8000-0000000000ff"}),
        json!({"name": "cn1"}),
    ] {
        let a = s.call("POST", "/resource_providers", LATEST, Some(&body));
        a.expect(409);
        assert!(
            a.error()
                .0
                .contains("Conflicting resource provider name: cn1 already exists."),
            "{}",
            a.body
        );
    }
}

#[test]
fn inventories_generations_and_validation() {
    let s = Server::seeded();
    let path = format!("/resource_providers/{CN2}/inventories");
    let v = s.call("GET", &path, LATEST, None).expect(200).json();
    assert_eq!(v["resource_provider_generation"], 0);
    assert_eq!(v["inventories"]["VCPU"]["total"], 4);
    assert_eq!(v["inventories"]["VCPU"]["max_unit"], 2147483647);
    let put = |generation: i64, inventories: Value| {
        s.call(
            "PUT",
            &path,
            LATEST,
            Some(&json!({"resource_provider_generation": generation, "inventories": inventories})),
        )
    };
    let a = put(
        0,
        json!({"VCPU": {"total": 8, "allocation_ratio": 2.0}, "MEMORY_MB": {"total": 2048}}),
    );
    a.expect(200);
    assert_eq!(a.json()["resource_provider_generation"], 1);
    assert_eq!(a.json()["inventories"]["VCPU"]["allocation_ratio"], 2.0);
    // Stale generation.
    let a = put(0, json!({"VCPU": {"total": 8}}));
    a.expect(409);
    assert_eq!(a.error().1.as_deref(), Some("placement.concurrent_update"));
    // Unknown custom class, bad values.
    let a = put(1, json!({"CUSTOM_FPGA": {"total": 1}}));
    a.expect(400);
    assert!(a.error().0.contains("No such resource class CUSTOM_FPGA"));
    let a = put(1, json!({"VCPU": {"total": 4, "reserved": 5}}));
    a.expect(400);
    assert!(a.error().0.contains("reserved value is greater than total"));
    put(1, json!({"VCPU": {"total": 0}})).expect(400);
    put(1, json!({"VCPU": {"total": 4, "colour": 1}})).expect(400);
    // Create the class first, then use it.
    s.call("PUT", "/resource_classes/CUSTOM_FPGA", LATEST, None)
        .expect(201);
    put(
        1,
        json!({"VCPU": {"total": 8}, "MEMORY_MB": {"total": 2048}, "CUSTOM_FPGA": {"total": 2}}),
    )
    .expect(200);
    // One class.
    let one = format!("{path}/CUSTOM_FPGA");
    let v = s.call("GET", &one, LATEST, None).expect(200).json();
    assert_eq!(v["total"], 2);
    assert_eq!(v["resource_provider_generation"], 2);
    let a = s.call(
        "PUT",
        &one,
        LATEST,
        Some(&json!({"resource_provider_generation": 2, "total": 3})),
    );
    a.expect(200);
    assert_eq!(a.json()["total"], 3);
    assert_eq!(a.json()["resource_provider_generation"], 3);
    s.call("GET", &format!("{path}/DISK_GB"), LATEST, None)
        .expect(404);
    s.call(
        "PUT",
        &format!("{path}/PCPU"),
        LATEST,
        Some(&json!({"resource_provider_generation": 3, "total": 3})),
    )
    .expect(400);
    // POST one class.
    let a = s.call(
        "POST",
        &path,
        LATEST,
        Some(&json!({"resource_provider_generation": 3, "resource_class": "DISK_GB", "total": 10})),
    );
    a.expect(201);
    assert!(
        a.header("location")
            .unwrap()
            .ends_with("/inventories/DISK_GB")
    );
    s.call("DELETE", &one, LATEST, None).expect(204);
    s.call("DELETE", &one, LATEST, None).expect(404);
    // Inventory in use cannot go: cn1-numa0's VCPU holds 2.
    let used = format!("/resource_providers/{CN1_NUMA0}/inventories");
    let a = s.call("DELETE", &format!("{used}/VCPU"), LATEST, None);
    a.expect(409);
    let a = s.call(
        "PUT",
        &used,
        LATEST,
        Some(&json!({"resource_provider_generation": 0, "inventories": {"MEMORY_MB": {"total": 4096}}})),
    );
    a.expect(409);
    assert_eq!(a.error().1.as_deref(), Some("placement.inventory.inuse"));
    let a = s.call("DELETE", &used, LATEST, None);
    a.expect(409);
    assert_eq!(a.error().1.as_deref(), Some("placement.inventory.inuse"));
    // Shrinking below usage is allowed, as in Placement.
    s.call(
        "PUT",
        &used,
        LATEST,
        Some(&json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 1}, "MEMORY_MB": {"total": 4096}}})),
    )
    .expect(200);
    s.call("DELETE", &path, LATEST, None).expect(204);
    let v = s.call("GET", &path, LATEST, None).json();
    assert_eq!(v["inventories"], json!({}));
    assert_eq!(v["resource_provider_generation"], 6);
}

#[test]
fn traits_must_exist_before_use() {
    let s = Server::seeded();
    let path = format!("/resource_providers/{CN2}/traits");
    let v = s.call("GET", &path, LATEST, None).expect(200).json();
    assert_eq!(v["traits"], json!(["COMPUTE_NODE"]));
    let set = |generation: i64, traits: Value| {
        s.call(
            "PUT",
            &path,
            LATEST,
            Some(&json!({"resource_provider_generation": generation, "traits": traits})),
        )
    };
    let a = set(0, json!(["COMPUTE_NODE", "CUSTOM_SILVER"]));
    a.expect(400);
    assert!(a.error().0.contains("No such trait(s): CUSTOM_SILVER"));
    s.call("GET", "/traits/CUSTOM_SILVER", LATEST, None)
        .expect(404);
    s.call("PUT", "/traits/CUSTOM_SILVER", LATEST, None)
        .expect(201);
    s.call("PUT", "/traits/CUSTOM_SILVER", LATEST, None)
        .expect(204);
    s.call("GET", "/traits/CUSTOM_SILVER", LATEST, None)
        .expect(204);
    s.call("PUT", "/traits/SILVER", LATEST, None).expect(400);
    let a = set(0, json!(["COMPUTE_NODE", "CUSTOM_SILVER"]));
    a.expect(200);
    assert_eq!(a.json()["resource_provider_generation"], 1);
    let a = set(0, json!([]));
    a.expect(409);
    assert_eq!(a.error().1.as_deref(), Some("placement.concurrent_update"));
    // The registry.
    let v = s
        .call("GET", "/traits?name=startswith:CUSTOM_", LATEST, None)
        .json();
    assert_eq!(v["traits"], json!(["CUSTOM_GOLD", "CUSTOM_SILVER"]));
    let v = s
        .call(
            "GET",
            "/traits?associated=true&name=in:CUSTOM_SILVER,HW_CPU_X86_AVX2,HW_CPU_X86_SSE",
            LATEST,
            None,
        )
        .json();
    assert_eq!(v["traits"], json!(["CUSTOM_SILVER", "HW_CPU_X86_AVX2"]));
    let v = s.call("GET", "/traits", LATEST, None).json();
    assert!(v["traits"].as_array().unwrap().len() > 300);
    s.call("GET", "/traits?name=CUSTOM_GOLD", LATEST, None)
        .expect(400);
    let a = s.call("DELETE", "/traits/CUSTOM_SILVER", LATEST, None);
    a.expect(409);
    assert!(a.error().0.contains("in use"));
    s.call("DELETE", "/traits/COMPUTE_NODE", LATEST, None)
        .expect(400);
    s.call("DELETE", &path, LATEST, None).expect(204);
    s.call("DELETE", "/traits/CUSTOM_SILVER", LATEST, None)
        .expect(204);
    s.call("DELETE", "/traits/CUSTOM_SILVER", LATEST, None)
        .expect(404);
    let v = s.call("GET", &path, LATEST, None).json();
    assert_eq!(v["traits"], json!([]));
    assert_eq!(v["resource_provider_generation"], 2);
}

#[test]
fn resource_classes_registry() {
    let s = Server::seeded();
    let v = s
        .call("GET", "/resource_classes", Some("1.2"), None)
        .expect(200)
        .json();
    let names: Vec<&str> = v["resource_classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[0], "VCPU");
    s.call("GET", "/resource_classes", Some("1.1"), None)
        .expect(404);
    s.call("PUT", "/resource_classes/CUSTOM_GPU", LATEST, None)
        .expect(201);
    s.call("PUT", "/resource_classes/CUSTOM_GPU", LATEST, None)
        .expect(204);
    let v = s
        .call("GET", "/resource_classes/CUSTOM_GPU", LATEST, None)
        .expect(200)
        .json();
    assert_eq!(v["links"][0]["href"], "/resource_classes/CUSTOM_GPU");
    s.call("PUT", "/resource_classes/GPU", LATEST, None)
        .expect(400);
    s.call(
        "POST",
        "/resource_classes",
        LATEST,
        Some(&json!({"name": "CUSTOM_GPU"})),
    )
    .expect(409);
    s.call(
        "POST",
        "/resource_classes",
        LATEST,
        Some(&json!({"name": "CUSTOM_NPU"})),
    )
    .expect(201);
    s.call("DELETE", "/resource_classes/VCPU", LATEST, None)
        .expect(400);
    s.call("DELETE", "/resource_classes/CUSTOM_NPU", LATEST, None)
        .expect(204);
    s.call("GET", "/resource_classes/CUSTOM_NPU", LATEST, None)
        .expect(404);
}

fn allocation_body(rp: &str, vcpu: i64, generation: Value) -> Value {
    json!({"allocations": {rp: {"resources": {"VCPU": vcpu}}},
           "project_id": "p1", "user_id": "u1",
           "consumer_generation": generation, "consumer_type": "INSTANCE"})
}

#[test]
fn allocations_claims_capacity_and_generations() {
    let s = Server::seeded();
    let vm_b = "9b000000-0000-4000-8000-00000000000b";
    let path = format!("/allocations/{vm_b}");
    // cn2: 4 VCPU.
    s.call(
        "PUT",
        &path,
        LATEST,
        Some(&allocation_body(CN2, 3, Value::Null)),
    )
    .expect(204);
    let v = s.call("GET", &path, LATEST, None).expect(200).json();
    assert_eq!(v["allocations"][CN2]["resources"]["VCPU"], 3);
    assert_eq!(v["allocations"][CN2]["generation"], 1);
    assert_eq!(v["consumer_generation"], 1);
    assert_eq!(v["project_id"], "p1");
    assert_eq!(v["consumer_type"], "INSTANCE");
    let v = s.call("GET", &path, Some("1.11"), None).json();
    assert!(v.get("project_id").is_none());
    // Over capacity: 409.
    let a = s.call(
        "PUT",
        &path,
        LATEST,
        Some(&allocation_body(CN2, 5, json!(1))),
    );
    a.expect(409);
    assert!(a.error().0.contains("Unable to allocate inventory"));
    // Another consumer cannot take what vm_b holds.
    let other = "9c000000-0000-4000-8000-00000000000c";
    s.call(
        "PUT",
        &format!("/allocations/{other}"),
        LATEST,
        Some(&allocation_body(CN2, 2, Value::Null)),
    )
    .expect(409);
    // Consumer generations.
    let a = s.call(
        "PUT",
        &path,
        LATEST,
        Some(&allocation_body(CN2, 1, Value::Null)),
    );
    a.expect(409);
    assert_eq!(a.error().1.as_deref(), Some("placement.concurrent_update"));
    assert!(a.error().0.contains("expected 1 but got null"));
    s.call(
        "PUT",
        &path,
        LATEST,
        Some(&allocation_body(CN2, 4, json!(1))),
    )
    .expect(204);
    // Required fields by version.
    let mut missing = allocation_body(CN2, 1, json!(2));
    missing
        .as_object_mut()
        .unwrap()
        .remove("consumer_generation");
    s.call("PUT", &path, Some("1.28"), Some(&missing))
        .expect(400);
    // Before 1.28 there is no consumer generation to send (nor a consumer type).
    let before_1_28 = json!({"allocations": {CN2: {"resources": {"VCPU": 1}}},
                             "project_id": "p1", "user_id": "u1"});
    s.call("PUT", &path, Some("1.27"), Some(&before_1_28))
        .expect(204);
    // Unknown provider, missing inventory, unknown class, bad amount.
    let nowhere = "e0000000-0000-4000-8000-000000000000";
    let a = s.call(
        "PUT",
        &path,
        LATEST,
        Some(&allocation_body(nowhere, 1, json!(3))),
    );
    a.expect(400);
    assert!(a.error().0.contains("that does not exist"));
    let no_vcpu = json!({"allocations": {CN1: {"resources": {"VCPU": 1}}},
                         "project_id": "p1", "user_id": "u1",
                         "consumer_generation": 3, "consumer_type": "INSTANCE"});
    s.call("PUT", &path, LATEST, Some(&no_vcpu)).expect(409);
    let custom = json!({"allocations": {CN2: {"resources": {"CUSTOM_NOPE": 1}}},
                        "project_id": "p1", "user_id": "u1",
                        "consumer_generation": 3, "consumer_type": "INSTANCE"});
    s.call("PUT", &path, LATEST, Some(&custom)).expect(400);
    s.call(
        "PUT",
        &path,
        LATEST,
        Some(&allocation_body(CN2, 0, json!(3))),
    )
    .expect(400);
    // A provider's view.
    let v = s
        .call(
            "GET",
            &format!("/resource_providers/{CN2}/allocations"),
            LATEST,
            None,
        )
        .expect(200)
        .json();
    assert_eq!(v["allocations"][vm_b]["resources"]["VCPU"], 1);
    let v = s
        .call(
            "GET",
            &format!("/resource_providers/{CN2}/usages"),
            LATEST,
            None,
        )
        .json();
    assert_eq!(
        v["usages"],
        json!({"VCPU": 1, "MEMORY_MB": 0, "DISK_GB": 0})
    );
    assert_eq!(v["resource_provider_generation"], 3);
    // The seeded consumer.
    let v = s
        .call("GET", &format!("/allocations/{VM_A}"), LATEST, None)
        .json();
    assert_eq!(
        v["allocations"][CN1_NUMA0]["resources"],
        json!({"VCPU": 2, "MEMORY_MB": 512})
    );
    // Delete, and an empty set at 1.28 removes too.
    s.call("DELETE", &path, LATEST, None).expect(204);
    s.call("DELETE", &path, LATEST, None).expect(404);
    let v = s.call("GET", &path, LATEST, None).expect(200).json();
    assert_eq!(v, json!({"allocations": {}}));
    let empty =
        json!({"allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": 1});
    s.call(
        "PUT",
        &format!("/allocations/{VM_A}"),
        Some("1.28"),
        Some(&empty),
    )
    .expect(204);
    let v = s
        .call(
            "GET",
            &format!("/resource_providers/{CN1_NUMA0}/usages"),
            LATEST,
            None,
        )
        .json();
    assert_eq!(v["usages"]["VCPU"], 0);
}

#[test]
fn allocations_in_the_old_forms() {
    let s = Server::seeded();
    let c = "9d000000-0000-4000-8000-00000000000d";
    let path = format!("/allocations/{c}");
    let list_form =
        json!({"allocations": [{"resource_provider": {"uuid": CN2}, "resources": {"VCPU": 1}}]});
    s.call("PUT", &path, Some("1.0"), Some(&list_form))
        .expect(204);
    // From 1.8 project and user are required; from 1.12 the object form.
    s.call("PUT", &path, Some("1.8"), Some(&list_form))
        .expect(400);
    s.call("PUT", &path, Some("1.12"), Some(&list_form))
        .expect(400);
    let dict_form = json!({"allocations": {CN2: {"resources": {"VCPU": 2}}}, "project_id": "p", "user_id": "u"});
    s.call("PUT", &path, Some("1.12"), Some(&dict_form))
        .expect(204);
    let v = s.call("GET", &path, Some("1.12"), None).json();
    assert_eq!(v["allocations"][CN2]["resources"]["VCPU"], 2);
    assert_eq!(v["project_id"], "p");
    assert!(v.get("consumer_generation").is_none());
    let empty = json!({"allocations": {}, "project_id": "p", "user_id": "u"});
    s.call("PUT", &path, Some("1.12"), Some(&empty)).expect(400);
}

/// An answer kept for a query is not sent once a trait the query names is gone, though the
/// trait's deletion changed no provider: the names are checked before a kept answer is.
#[test]
fn a_kept_answer_is_not_sent_for_a_trait_deleted_since() {
    let s = Server::seeded();
    s.call("PUT", "/traits/CUSTOM_GONE", LATEST, None)
        .expect(201);
    let paths = [
        "/allocation_candidates?resources=VCPU:1&required=!CUSTOM_GONE",
        "/resource_providers?required=!CUSTOM_GONE",
    ];
    for path in paths {
        let first = s.call("GET", path, LATEST, None);
        first.expect(200);
        assert_eq!(s.call("GET", path, LATEST, None).body, first.body, "{path}");
    }
    s.call("DELETE", "/traits/CUSTOM_GONE", LATEST, None)
        .expect(204);
    for path in paths {
        let gone = s.call("GET", path, LATEST, None);
        gone.expect(400);
        assert!(
            gone.error().0.contains("No such trait(s): CUSTOM_GONE"),
            "{path}"
        );
    }
}

#[test]
fn allocation_candidates_follow_claims_traits_and_classes() {
    let s = Server::seeded();
    let count = |q: &str| {
        s.call("GET", &format!("/allocation_candidates?{q}"), LATEST, None)
            .expect(200)
            .json()["allocation_requests"]
            .as_array()
            .unwrap()
            .len()
    };
    // cn1's tree (VCPU on cn1-numa0, DISK_GB on cn1, which has CUSTOM_GOLD) and cn2.
    let q = "resources=VCPU:4,DISK_GB:10";
    assert_eq!(count(q), 2);
    assert_eq!(count(&format!("{q}&required=CUSTOM_GOLD")), 1);
    assert_eq!(count(&format!("{q}&required=!CUSTOM_GOLD")), 1);
    // A claim through the API is seen by the next search.
    s.call(
        "PUT",
        "/allocations/9e000000-0000-4000-8000-00000000000e",
        LATEST,
        Some(&allocation_body(CN2, 1, Value::Null)),
    )
    .expect(204);
    assert_eq!(count(q), 1);
    let a = s.call(
        "GET",
        "/allocation_candidates?resources=VCPU:1&required=CUSTOM_NOPE",
        LATEST,
        None,
    );
    a.expect(400);
    assert!(a.error().0.contains("No such trait(s): CUSTOM_NOPE"));
    let a = s.call(
        "GET",
        "/allocation_candidates?resources=CUSTOM_NOPE:1",
        LATEST,
        None,
    );
    a.expect(400);
    assert!(a.error().0.contains("No such resource class CUSTOM_NOPE"));
    s.call(
        "GET",
        "/allocation_candidates?resources=VCPU:x",
        LATEST,
        None,
    )
    .expect(400);
    // The body's shape follows the version.
    let v = s
        .call(
            "GET",
            "/allocation_candidates?resources=VCPU:1",
            Some("1.16"),
            None,
        )
        .expect(200)
        .json();
    assert!(v["allocation_requests"][0].get("mappings").is_none());
    let v = s
        .call(
            "GET",
            "/allocation_candidates?resources=VCPU:1",
            Some("1.34"),
            None,
        )
        .json();
    assert!(v["allocation_requests"][0].get("mappings").is_some());
    // From 1.10: before 1.12 each request lists its providers; `limit` waits for 1.16.
    let old = s.call(
        "GET",
        "/allocation_candidates?resources=VCPU:1",
        Some("1.10"),
        None,
    );
    old.expect(200);
    let first = &old.json()["allocation_requests"][0]["allocations"][0];
    assert!(
        first["resource_provider"]["uuid"].is_string(),
        "{}",
        old.json()
    );
    assert_eq!(first["resources"]["VCPU"], 1);
    let dict = s.call(
        "GET",
        "/allocation_candidates?resources=VCPU:1",
        Some("1.12"),
        None,
    );
    assert!(dict.json()["allocation_requests"][0]["allocations"].is_object());
    s.call(
        "GET",
        "/allocation_candidates?resources=VCPU:1&limit=1",
        Some("1.15"),
        None,
    )
    .expect(400);
    s.call(
        "GET",
        "/allocation_candidates?resources=VCPU:1",
        Some("1.9"),
        None,
    )
    .expect(404);
}

#[test]
fn aggregates_of_a_provider() {
    let s = Server::seeded();
    let path = format!("/resource_providers/{CN2}/aggregates");
    let agg = "6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a02";
    let v = s.call("GET", &path, Some("1.1"), None).expect(200).json();
    assert_eq!(v, json!({"aggregates": []}));
    s.call("PUT", &path, Some("1.1"), Some(&json!([agg])))
        .expect(200);
    let v = s.call("GET", &path, LATEST, None).json();
    assert_eq!(
        v,
        json!({"aggregates": [agg], "resource_provider_generation": 0})
    );
    let a = s.call(
        "PUT",
        &path,
        LATEST,
        Some(&json!({"aggregates": [], "resource_provider_generation": 5})),
    );
    a.expect(409);
    let v = s
        .call(
            "PUT",
            &path,
            LATEST,
            Some(&json!({"aggregates": [], "resource_provider_generation": 0})),
        )
        .expect(200)
        .json();
    assert_eq!(
        v,
        json!({"aggregates": [], "resource_provider_generation": 1})
    );
    s.call(
        "PUT",
        &path,
        LATEST,
        Some(&json!({"aggregates": ["nope"], "resource_provider_generation": 1})),
    )
    .expect(400);
}

/// Claims racing from many connections never oversubscribe: every PUT is decided under
/// one lock that sees every earlier claim.
#[test]
fn concurrent_claims_never_oversubscribe() {
    let s = std::sync::Arc::new(Server::seeded());
    // cn2 has 4 VCPU; 16 consumers each ask for 1.
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let s = s.clone();
            std::thread::spawn(move || {
                let consumer = format!("9f000000-0000-4000-8000-{i:012}");
                s.call(
                    "PUT",
                    &format!("/allocations/{consumer}"),
                    LATEST,
                    Some(&allocation_body(CN2, 1, Value::Null)),
                )
                .status
            })
        })
        .collect();
    let statuses: Vec<u16> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 204).count(),
        4,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        12,
        "{statuses:?}"
    );
    let v = s
        .call(
            "GET",
            &format!("/resource_providers/{CN2}/usages"),
            LATEST,
            None,
        )
        .json();
    assert_eq!(v["usages"]["VCPU"], 4);
    assert_eq!(v["resource_provider_generation"], 4);
}

fn consumer_entry(allocations: Value, generation: Value) -> Value {
    json!({"allocations": allocations, "project_id": "p1", "user_id": "u1",
           "consumer_generation": generation, "consumer_type": "MIGRATION"})
}

/// `POST /allocations` moves resources between consumers atomically: all old allocations
/// of the consumers named go before the new ones are admitted, and a refusal leaves
/// everything as it was.
#[test]
fn post_allocations_moves_atomically() {
    let s = Server::seeded();
    s.call("POST", "/allocations", Some("1.12"), Some(&json!({})))
        .expect(404);
    s.call("POST", "/allocations", LATEST, Some(&json!({})))
        .expect(400);
    // cn1-numa0: 8 VCPU, VM_A holds 2; fill the rest.
    let filler = "9f100000-0000-4000-8000-000000000001";
    s.call(
        "PUT",
        &format!("/allocations/{filler}"),
        LATEST,
        Some(&allocation_body(CN1_NUMA0, 6, Value::Null)),
    )
    .expect(204);
    let target = "9f100000-0000-4000-8000-000000000002";
    // The provider is full: VM_A's 2 VCPU can move to target only in one request.
    let moved = json!({
        VM_A: consumer_entry(json!({}), json!(1)),
        target: consumer_entry(json!({CN1_NUMA0: {"resources": {"VCPU": 2}}}), Value::Null),
    });
    s.call("POST", "/allocations", LATEST, Some(&moved))
        .expect(204);
    let v = s
        .call("GET", &format!("/allocations/{target}"), LATEST, None)
        .json();
    assert_eq!(v["allocations"][CN1_NUMA0]["resources"]["VCPU"], 2);
    assert_eq!(v["consumer_type"], "MIGRATION");
    let v = s
        .call("GET", &format!("/allocations/{VM_A}"), LATEST, None)
        .json();
    assert_eq!(v, json!({"allocations": {}}));
    // All or nothing: the second consumer does not fit, so the first keeps its claim.
    let refused = json!({
        target: consumer_entry(json!({}), json!(1)),
        "9f100000-0000-4000-8000-000000000003":
            consumer_entry(json!({CN1_NUMA0: {"resources": {"VCPU": 3}}}), Value::Null),
    });
    let a = s.call("POST", "/allocations", LATEST, Some(&refused));
    a.expect(409);
    assert!(a.error().0.contains("Unable to allocate inventory"));
    let v = s
        .call("GET", &format!("/allocations/{target}"), LATEST, None)
        .json();
    assert_eq!(v["allocations"][CN1_NUMA0]["resources"]["VCPU"], 2);
    assert_eq!(v["consumer_generation"], 1);
    let v = s
        .call(
            "GET",
            &format!("/resource_providers/{CN1_NUMA0}/usages"),
            LATEST,
            None,
        )
        .json();
    assert_eq!(v["usages"]["VCPU"], 8);
    // A stale consumer generation refuses the whole request.
    let stale = json!({target: consumer_entry(json!({}), json!(7))});
    let a = s.call("POST", "/allocations", LATEST, Some(&stale));
    a.expect(409);
    assert_eq!(a.error().1.as_deref(), Some("placement.concurrent_update"));
}

/// `GET /usages` (1.9): a project's totals; from 1.38 by consumer type.
#[test]
fn project_usages_by_user_and_consumer_type() {
    let s = Server::seeded();
    let put = |consumer: &str, vcpu: i64, user: &str, kind: &str| {
        let body = json!({"allocations": {CN2: {"resources": {"VCPU": vcpu}}},
                          "project_id": "p1", "user_id": user,
                          "consumer_generation": null, "consumer_type": kind});
        s.call(
            "PUT",
            &format!("/allocations/{consumer}"),
            LATEST,
            Some(&body),
        )
        .expect(204);
    };
    put("9f200000-0000-4000-8000-000000000001", 1, "u1", "INSTANCE");
    put("9f200000-0000-4000-8000-000000000002", 2, "u2", "MIGRATION");
    let v = s
        .call("GET", "/usages?project_id=p1", Some("1.9"), None)
        .expect(200)
        .json();
    assert_eq!(v, json!({"usages": {"VCPU": 3}}));
    let v = s
        .call("GET", "/usages?project_id=p1&user_id=u2", Some("1.9"), None)
        .json();
    assert_eq!(v, json!({"usages": {"VCPU": 2}}));
    let v = s.call("GET", "/usages?project_id=p1", LATEST, None).json();
    assert_eq!(
        v,
        json!({"usages": {"INSTANCE": {"VCPU": 1, "consumer_count": 1},
                          "MIGRATION": {"VCPU": 2, "consumer_count": 1}}})
    );
    let v = s
        .call(
            "GET",
            "/usages?project_id=p1&consumer_type=all",
            LATEST,
            None,
        )
        .json();
    assert_eq!(
        v,
        json!({"usages": {"all": {"VCPU": 3, "consumer_count": 2}}})
    );
    // Seeded consumers belong to Placement's "incomplete consumer" project.
    let v = s
        .call(
            "GET",
            "/usages?project_id=00000000-0000-0000-0000-000000000000",
            Some("1.9"),
            None,
        )
        .json();
    assert_eq!(v, json!({"usages": {"VCPU": 2, "MEMORY_MB": 512}}));
    s.call("GET", "/usages?user_id=u1", LATEST, None)
        .expect(400);
    s.call(
        "GET",
        "/usages?project_id=p1&consumer_type=all",
        Some("1.37"),
        None,
    )
    .expect(400);
    s.call("GET", "/usages?project_id=p1", Some("1.8"), None)
        .expect(404);
}

/// The provider list and the candidates' summaries are written from JSON each provider
/// keeps between requests. After each kind of change, every list is byte for byte its
/// providers' own answers (`GET /resource_providers/{uuid}`, written anew each time) joined,
/// at each microversion whose entries differ, and every summary shows the provider's usages
/// and traits as their own paths answer them now.
#[test]
fn kept_answers_follow_every_change() {
    let s = Server::seeded();
    let check = |what: &str| {
        for mv in ["1.0", "1.1", "1.6", "1.11", "1.13", "1.14", "1.39"] {
            let list = s.call("GET", "/resource_providers", Some(mv), None);
            list.expect(200);
            let own: Vec<String> = uuids(&list.json())
                .iter()
                .map(|u| {
                    let path = format!("/resource_providers/{u}");
                    s.call("GET", &path, Some(mv), None)
                        .expect(200)
                        .body
                        .clone()
                })
                .collect();
            let joined = format!("{{\"resource_providers\":[{}]}}", own.join(","));
            assert_eq!(list.body, joined, "{what}: the list at {mv}");
        }
        for mv in ["1.27", "1.29", "1.39"] {
            let path = "/allocation_candidates?resources=VCPU:1";
            let v = s.call("GET", path, Some(mv), None).expect(200).json();
            let summaries = v["provider_summaries"].as_object().expect("summaries");
            assert!(!summaries.is_empty(), "{what} at {mv}");
            for (uuid, summary) in summaries {
                let usages = s
                    .call(
                        "GET",
                        &format!("/resource_providers/{uuid}/usages"),
                        LATEST,
                        None,
                    )
                    .json();
                let traits = s
                    .call(
                        "GET",
                        &format!("/resource_providers/{uuid}/traits"),
                        LATEST,
                        None,
                    )
                    .json();
                let resources = summary["resources"].as_object().expect("resources");
                for (class, r) in resources {
                    assert_eq!(
                        r["used"], usages["usages"][class],
                        "{what}: {uuid} {class} at {mv}"
                    );
                }
                // In the same order: Placement's, the standard traits first.
                assert_eq!(
                    summary["traits"], traits["traits"],
                    "{what}: {uuid} at {mv}"
                );
            }
        }
    };
    check("as seeded");
    check("asked again");
    let generation = |uuid: &str| {
        s.call("GET", &format!("/resource_providers/{uuid}"), LATEST, None)
            .json()["generation"]
            .clone()
    };
    let inventories = json!({"resource_provider_generation": generation(CN1_NUMA0),
        "inventories": {"VCPU": {"total": 16}, "MEMORY_MB": {"total": 4096}}});
    s.call(
        "PUT",
        &format!("/resource_providers/{CN1_NUMA0}/inventories"),
        LATEST,
        Some(&inventories),
    )
    .expect(200);
    check("an inventory changed");
    s.call(
        "PUT",
        &format!("/resource_providers/{CN2}"),
        LATEST,
        Some(&json!({"name": "cn2 \"renamed\""})),
    )
    .expect(200);
    check("a provider renamed to a name that is not an object name");
    let vm_b = "9b000000-0000-4000-8000-00000000000b";
    s.call(
        "PUT",
        &format!("/allocations/{vm_b}"),
        LATEST,
        Some(&allocation_body(CN2, 3, Value::Null)),
    )
    .expect(204);
    check("an allocation made");
    let traits = json!({"resource_provider_generation": generation(CN2),
        "traits": ["COMPUTE_NODE", "HW_CPU_X86_SSE"]});
    s.call(
        "PUT",
        &format!("/resource_providers/{CN2}/traits"),
        LATEST,
        Some(&traits),
    )
    .expect(200);
    check("traits changed");
    let aggregates = json!({"resource_provider_generation": generation(CN2),
        "aggregates": ["6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a02"]});
    s.call(
        "PUT",
        &format!("/resource_providers/{CN2}/aggregates"),
        LATEST,
        Some(&aggregates),
    )
    .expect(200);
    check("aggregates changed");
    let child = s.call(
        "POST",
        "/resource_providers",
        LATEST,
        Some(&json!({"name": "cn2-numa0", "parent_provider_uuid": CN2})),
    );
    child.expect(200);
    let child_uuid = child.json()["uuid"].as_str().unwrap().to_string();
    let child_inventories = json!({"resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 2}}});
    s.call(
        "PUT",
        &format!("/resource_providers/{child_uuid}/inventories"),
        LATEST,
        Some(&child_inventories),
    )
    .expect(200);
    check("a child created");
    s.call("DELETE", &format!("/allocations/{vm_b}"), LATEST, None)
        .expect(204);
    check("an allocation deleted");
    s.call(
        "DELETE",
        &format!("/resource_providers/{child_uuid}"),
        LATEST,
        None,
    )
    .expect(204);
    check("a provider deleted");
}

/// A list of thousands of providers is sent while it is made: it is as long as its
/// `Content-Length` says, it is what serde_json writes of it, and its entries are the
/// providers' own answers, at 1.39 (sent while made) and 1.13 (written whole), also after a
/// provider in it is replaced by another.
#[test]
fn a_large_list_is_sent_while_it_is_made() {
    // 6,300 providers: past the count from which a list is streamed.
    let cloud = accelerator_cloud("large-list", 2_100, 2);
    let s = Server::start(&["-f", cloud.to_str().unwrap()]);
    let check = |what: &str| {
        for mv in ["1.13", "1.39"] {
            let list = s.call("GET", "/resource_providers", Some(mv), None);
            list.expect(200);
            let length: usize = list.header("content-length").unwrap().parse().unwrap();
            assert_eq!(length, list.body.len(), "{what} at {mv}");
            let v = list.json();
            assert_eq!(
                serde_json::to_string(&v).unwrap(),
                list.body,
                "{what} at {mv}"
            );
            let entries = v["resource_providers"].as_array().unwrap();
            assert_eq!(entries.len(), 6_300, "{what} at {mv}");
            for entry in entries.iter().step_by(291).chain(entries.last()) {
                let uuid = entry["uuid"].as_str().unwrap();
                let own = s.call(
                    "GET",
                    &format!("/resource_providers/{uuid}"),
                    Some(mv),
                    None,
                );
                assert_eq!(
                    serde_json::to_string(entry).unwrap(),
                    own.body,
                    "{what} at {mv}"
                );
            }
        }
    };
    check("as loaded");
    let uuid_of = |name: &str| {
        let listed = s.call(
            "GET",
            &format!("/resource_providers?name={name}"),
            LATEST,
            None,
        );
        listed.json()["resource_providers"][0]["uuid"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let gone = uuid_of("cn5-fpga1");
    s.call(
        "DELETE",
        &format!("/resource_providers/{gone}"),
        LATEST,
        None,
    )
    .expect(204);
    let parent = uuid_of("cn5");
    let body = json!({"name": "cn5 FPGA \"one\"", "parent_provider_uuid": parent});
    s.call("POST", "/resource_providers", LATEST, Some(&body))
        .expect(200);
    let listed = s.call("GET", "/resource_providers", LATEST, None).json();
    let names: Vec<&str> = listed["resource_providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"cn5 FPGA \"one\"") && !names.contains(&"cn5-fpga1"));
    check("a provider replaced by another");
    let _ = std::fs::remove_file(cloud);
}

/// Lists that name a provider, a tree or an aggregate are made where the request was read
/// when they are short, and apart when the aggregate has more members than that allows:
/// either way each answer is the matching entries of the list of every provider, in its
/// order.
#[test]
fn named_lists_short_or_long_are_the_matching_entries_of_the_whole_list() {
    const WIDE: &str = "00000000-0000-4000-8000-00000000000a";
    const NARROW: &str = "00000000-0000-4000-8000-00000000000b";
    // 2,600 trees of a root and a child: the wide aggregate has 2,600 members (more than a
    // list may judge in place), the narrow one 13 (every 200th root).
    let mut docs = Vec::new();
    for t in 0..2_600 {
        let narrow = if t % 200 == 0 {
            format!(", {NARROW}")
        } else {
            String::new()
        };
        docs.push(format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: host{t}}}\nspec:\n  inventories:\n    VCPU: {{total: 8}}\n  aggregates: [{WIDE}{narrow}]\n"
        ));
        docs.push(format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: host{t}-nic}}\nspec:\n  parent: host{t}\n  inventories:\n    SRIOV_NET_VF: {{total: 4}}\n"
        ));
    }
    let path =
        std::env::temp_dir().join(format!("kubeplace-named-lists-{}.yaml", std::process::id()));
    std::fs::write(&path, docs.join("---\n")).expect("write the cloud");
    let s = Server::start(&["-f", path.to_str().unwrap()]);
    let all = s.call("GET", "/resource_providers", LATEST, None);
    all.expect(200);
    let all = all.json()["resource_providers"].as_array().unwrap().clone();
    assert_eq!(all.len(), 5_200);
    let uuid_of = |name: &str| {
        let entry = all.iter().find(|e| e["name"] == name).unwrap();
        entry["uuid"].as_str().unwrap().to_string()
    };
    let root = |e: &Value| {
        let name = e["name"].as_str().unwrap();
        name.strip_suffix("-nic").unwrap_or(name).to_string()
    };
    let is_root = |e: &Value| !e["name"].as_str().unwrap().ends_with("-nic");
    let number = |e: &Value| root(e)[4..].parse::<usize>().unwrap();
    let tree = uuid_of("host400");
    let nic = uuid_of("host7-nic");
    type Matches<'a> = Box<dyn Fn(&Value) -> bool + 'a>;
    let cases: Vec<(String, Matches)> = vec![
        (format!("member_of={WIDE}"), Box::new(is_root)),
        (
            format!("member_of={NARROW}"),
            Box::new(|e| is_root(e) && number(e) % 200 == 0),
        ),
        (
            format!("member_of=in:{NARROW},{WIDE}&resources=VCPU:8"),
            Box::new(is_root),
        ),
        (
            "name=host7-nic".into(),
            Box::new(|e| e["name"] == "host7-nic"),
        ),
        ("name=host9999".into(), Box::new(|_| false)),
        (
            format!("name=host7&member_of={NARROW}"),
            Box::new(|_| false),
        ),
        (
            format!("name=host400&member_of={NARROW}"),
            Box::new(|e| e["name"] == "host400"),
        ),
        (
            format!("in_tree={tree}"),
            Box::new(|e| root(e) == "host400"),
        ),
        (
            format!("in_tree={tree}&resources=SRIOV_NET_VF:1"),
            Box::new(|e| e["name"] == "host400-nic"),
        ),
        (
            format!("uuid={nic}"),
            Box::new(|e| e["name"] == "host7-nic"),
        ),
        (
            format!("uuid={}", nic.to_uppercase()),
            Box::new(|e| e["name"] == "host7-nic"),
        ),
        (format!("uuid={nic}&member_of={WIDE}"), Box::new(|_| false)),
        (
            "uuid=00000000-0000-4000-8000-0000000000ff".into(),
            Box::new(|_| false),
        ),
    ];
    for (query, matches) in &cases {
        let listed = s.call("GET", &format!("/resource_providers?{query}"), LATEST, None);
        listed.expect(200);
        let got = listed.json()["resource_providers"]
            .as_array()
            .unwrap()
            .clone();
        let want: Vec<Value> = all.iter().filter(|e| matches(e)).cloned().collect();
        assert_eq!(got.len(), want.len(), "{query}");
        assert!(
            got == want,
            "{query}: not the matching entries of the whole list"
        );
    }
    let _ = std::fs::remove_file(path);
}

/// A list asked for again is sent from the parts kept from the first answer only while
/// they are what would be written now: a provider moved within its tree (in the same
/// place of the list), renamed, or moved to another tree (and the one below it) keeps its
/// generation, and its entry shows what changed all the same.
#[test]
fn a_list_asked_again_shows_what_changed_since_even_where_no_generation_did() {
    // 150 trees of a root, a child and a grandchild: one part of the list, of about
    // 200 KB, kept after the first answer.
    let mut docs = Vec::new();
    for t in 0..150 {
        docs.push(format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: host{t}}}\nspec:\n  inventories:\n    VCPU: {{total: 8}}\n"
        ));
        docs.push(format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: host{t}-numa}}\nspec:\n  parent: host{t}\n"
        ));
        docs.push(format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: host{t}-vf}}\nspec:\n  parent: host{t}-numa\n  inventories:\n    SRIOV_NET_VF: {{total: 4}}\n"
        ));
    }
    let path =
        std::env::temp_dir().join(format!("kubeplace-lists-again-{}.yaml", std::process::id()));
    std::fs::write(&path, docs.join("---\n")).expect("write the cloud");
    let s = Server::start(&["-f", path.to_str().unwrap()]);
    let list = || {
        let r = s.call("GET", "/resource_providers", LATEST, None);
        r.expect(200);
        r
    };
    let first = list();
    assert!(first.body.len() > 100_000, "{} bytes", first.body.len());
    assert_eq!(list().body, first.body, "the same list, asked again");
    let entries = first.json()["resource_providers"]
        .as_array()
        .unwrap()
        .clone();
    let entry = |listed: &Value, name: &str| {
        listed["resource_providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap()
            .clone()
    };
    let before = first.json();
    let uuid = |name: &str| entry(&before, name)["uuid"].as_str().unwrap().to_string();
    // host3's VF moves from its NUMA node up to host3: it keeps its place in the list
    // (after host3-numa, a child of host3 too) and its generation. The entries of its tree
    // are written anew by the first list that shows them, a list of the tree.
    let vf3 = entry(&before, "host3-vf");
    s.call(
        "PUT",
        &format!("/resource_providers/{}", uuid("host3-vf")),
        LATEST,
        Some(&json!({"name": "host3-vf", "parent_provider_uuid": uuid("host3")})),
    )
    .expect(200);
    let tree3 = s.call(
        "GET",
        &format!("/resource_providers?in_tree={}", uuid("host3")),
        LATEST,
        None,
    );
    tree3.expect(200);
    assert_eq!(
        entry(&tree3.json(), "host3-vf")["parent_provider_uuid"],
        uuid("host3")
    );
    let moved_up = list();
    let listed = entry(&moved_up.json(), "host3-vf");
    assert_eq!(listed["parent_provider_uuid"], uuid("host3"));
    assert_eq!(listed["generation"], vf3["generation"]);
    // host5's VF is renamed: it keeps its uuid (derived from the name it was declared
    // with) and its generation.
    let vf5 = entry(&before, "host5-vf");
    s.call(
        "PUT",
        &format!("/resource_providers/{}", uuid("host5-vf")),
        LATEST,
        Some(&json!({"name": "host5-vf-a", "parent_provider_uuid": uuid("host5-numa")})),
    )
    .expect(200);
    let renamed = list().json();
    let listed = entry(&renamed, "host5-vf-a");
    assert_eq!(listed["uuid"], vf5["uuid"]);
    assert_eq!(listed["generation"], vf5["generation"]);
    // host7's NUMA node (and its NIC below it) moves under host9.
    let numa = entry(&before, "host7-numa");
    s.call(
        "PUT",
        &format!("/resource_providers/{}", uuid("host7-numa")),
        LATEST,
        Some(&json!({"name": "host7-numa", "parent_provider_uuid": uuid("host9")})),
    )
    .expect(200);
    // host9's tree, listed first, shows them (and their entries are written anew).
    let tree = s.call(
        "GET",
        &format!("/resource_providers?in_tree={}", uuid("host9")),
        LATEST,
        None,
    );
    tree.expect(200);
    assert_eq!(
        tree.json()["resource_providers"].as_array().unwrap().len(),
        5
    );
    let after_answer = list();
    let after = after_answer.json();
    let nic = entry(&after, "host7-vf");
    assert_eq!(nic["root_provider_uuid"], uuid("host9"));
    assert_eq!(nic["generation"], entry(&before, "host7-vf")["generation"]);
    let moved = entry(&after, "host7-numa");
    assert_eq!(moved["parent_provider_uuid"], uuid("host9"));
    assert_eq!(moved["root_provider_uuid"], uuid("host9"));
    // Placement counts a move as no change of a provider's generation.
    assert_eq!(moved["generation"], numa["generation"]);
    // Every other entry is as it was.
    let unchanged = |e: &&Value| {
        let name = e["name"].as_str().unwrap();
        !name.starts_with("host7-") && !["host3-vf", "host5-vf"].iter().any(|n| name.starts_with(n))
    };
    let was: Vec<&Value> = entries.iter().filter(unchanged).collect();
    let now: Vec<Value> = after["resource_providers"].as_array().unwrap().clone();
    let now: Vec<&Value> = now.iter().filter(unchanged).collect();
    assert!(was == now, "entries of unmoved providers changed");
    assert_eq!(
        list().body,
        after_answer.body,
        "the changed list, asked again"
    );
    // host11's traits written again as they are: Placement counts the write as a change of
    // host11's generation, though nothing else of it changed.
    let host11 = entry(&after, "host11");
    let sent = s.call(
        "PUT",
        &format!("/resource_providers/{}/traits", uuid("host11")),
        LATEST,
        Some(&json!({"traits": [], "resource_provider_generation": host11["generation"]})),
    );
    sent.expect(200);
    let generation = host11["generation"].as_u64().unwrap();
    assert_eq!(sent.json()["resource_provider_generation"], generation + 1);
    let rewritten = list();
    assert_eq!(
        entry(&rewritten.json(), "host11")["generation"],
        generation + 1,
        "the list asked again shows the generation moved"
    );
    let _ = std::fs::remove_file(path);
}

/// A list by uuid finds the providers whose uuid is the one asked for in any case, whether
/// some provider's uuid has upper-case letters or none has.
/// A candidates answer asked again is the same bytes, and follows every change since: a
/// claim that fills a host (its candidate and summary gone, the parts after it moved), a
/// claim that does not (its summary alone changed), both let go (the first answer again,
/// byte for byte), and a host deleted and created again under a new uuid (the new uuid
/// named, the old one nowhere).
#[test]
fn a_candidates_answer_asked_again_follows_claims_and_new_uuids() {
    // 600 hosts: parts of requests and of summaries of about 100 KB each, kept.
    let docs: Vec<String> = (0..600)
        .map(|t| format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: host{t:03}}}\nspec:\n  inventories:\n    VCPU: {{total: 8}}\n    MEMORY_MB: {{total: 4096}}\n"
        ))
        .collect();
    let path = std::env::temp_dir().join(format!(
        "kubeplace-candidates-again-{}.yaml",
        std::process::id()
    ));
    std::fs::write(&path, docs.join("---\n")).expect("write the cloud");
    let s = Server::start(&["-f", path.to_str().unwrap()]);
    let ask = || {
        let r = s.call(
            "GET",
            "/allocation_candidates?resources=VCPU:1",
            LATEST,
            None,
        );
        r.expect(200);
        r
    };
    let first = ask();
    assert!(first.body.len() > 150_000, "{} bytes", first.body.len());
    assert!(ask().body == first.body, "the same answer, asked again");
    let before = first.json();
    let named = |answer: &Value, uuid: &str| {
        let requests = answer["allocation_requests"].as_array().unwrap();
        let in_requests = requests
            .iter()
            .filter(|r| r["allocations"].get(uuid).is_some())
            .count();
        (in_requests, answer["provider_summaries"].get(uuid).cloned())
    };
    let uuid_of = |name: &str| {
        let list = s.call(
            "GET",
            &format!("/resource_providers?name={name}"),
            LATEST,
            None,
        );
        list.json()["resource_providers"][0]["uuid"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (host5, host7) = (uuid_of("host005"), uuid_of("host007"));
    let (vm_a, vm_b) = (
        "9c000000-0000-4000-8000-00000000000a",
        "9c000000-0000-4000-8000-00000000000b",
    );
    // host005 filled: gone from the answer, every other entry as before.
    s.call(
        "PUT",
        &format!("/allocations/{vm_a}"),
        LATEST,
        Some(&allocation_body(&host5, 8, Value::Null)),
    )
    .expect(204);
    let filled = ask().json();
    assert_eq!(named(&filled, &host5), (0, None));
    let mut without = before.clone();
    without["allocation_requests"]
        .as_array_mut()
        .unwrap()
        .retain(|r| r["allocations"].get(&host5).is_none());
    without["provider_summaries"]
        .as_object_mut()
        .unwrap()
        .remove(&host5);
    assert!(filled == without, "host005 filled");
    // One VCPU of host007 taken: its summary alone changes.
    s.call(
        "PUT",
        &format!("/allocations/{vm_b}"),
        LATEST,
        Some(&allocation_body(&host7, 1, Value::Null)),
    )
    .expect(204);
    let taken = ask().json();
    let mut want = without.clone();
    want["provider_summaries"][&host7]["resources"]["VCPU"]["used"] = json!(1);
    assert!(taken == want, "one VCPU of host007 taken");
    // Both let go: the first answer, byte for byte.
    for vm in [vm_a, vm_b] {
        s.call("DELETE", &format!("/allocations/{vm}"), LATEST, None)
            .expect(204);
    }
    assert!(ask().body == first.body, "both claims let go");
    // host009 deleted and created again: a new uuid, where the old one was.
    let old = uuid_of("host009");
    s.call(
        "DELETE",
        &format!("/resource_providers/{old}"),
        LATEST,
        None,
    )
    .expect(204);
    let created = s.call(
        "POST",
        "/resource_providers",
        LATEST,
        Some(&json!({"name": "host009", "uuid": "9d000000-0000-4000-8000-000000000009"})),
    );
    created.expect(200);
    let new = created.json()["uuid"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    let inventories = json!({"resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}}});
    s.call(
        "PUT",
        &format!("/resource_providers/{new}/inventories"),
        LATEST,
        Some(&inventories),
    )
    .expect(200);
    let again = ask();
    let answer = again.json();
    assert_eq!(named(&answer, &old), (0, None), "the old uuid is gone");
    assert_eq!(named(&answer, &new).0, 1, "the new uuid is a candidate");
    assert!(!again.body.contains(&old));
    assert_eq!(
        answer["allocation_requests"].as_array().unwrap().len(),
        600,
        "every host a candidate"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_list_by_uuid_matches_uuids_in_any_case() {
    const LOWER: &str = "0000000a-0000-4000-8000-00000000000a";
    const UPPER: &str = "0000000B-0000-4000-8000-00000000000B";
    let s = Server::start(&[]);
    let listed = |uuid: &str| -> Vec<String> {
        let r = s.call(
            "GET",
            &format!("/resource_providers?uuid={uuid}"),
            LATEST,
            None,
        );
        r.expect(200);
        r.json()["resource_providers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    };
    s.call(
        "POST",
        "/resource_providers",
        LATEST,
        Some(&json!({"name": "lower", "uuid": LOWER})),
    )
    .expect(200);
    // No uuid has an upper-case letter.
    assert_eq!(listed(LOWER), ["lower"]);
    assert_eq!(listed(&LOWER.to_uppercase()), ["lower"]);
    assert!(listed(&UPPER.to_lowercase()).is_empty());
    let upper = s.call(
        "POST",
        "/resource_providers",
        LATEST,
        Some(&json!({"name": "upper", "uuid": UPPER})),
    );
    upper.expect(200);
    let stored = upper.json()["uuid"].as_str().unwrap().to_string();
    // One has.
    for uuid in [UPPER.to_string(), UPPER.to_lowercase(), stored.clone()] {
        assert_eq!(listed(&uuid), ["upper"], "{uuid}");
    }
    assert_eq!(listed(&LOWER.to_uppercase()), ["lower"]);
    s.call(
        "DELETE",
        &format!("/resource_providers/{stored}"),
        LATEST,
        None,
    )
    .expect(204);
    // None has again.
    assert!(listed(&UPPER.to_lowercase()).is_empty());
    assert_eq!(listed(&LOWER.to_uppercase()), ["lower"]);
}

#[test]
fn a_list_shows_each_providers_own_generation_however_few_have_changed() {
    let s = Server::start(&[]);
    let uuids: Vec<String> = (0..6)
        .map(|i| {
            let created = s.call(
                "POST",
                "/resource_providers",
                LATEST,
                Some(&json!({"name": format!("gen-rp{i}")})),
            );
            created.expect(200);
            created.json()["uuid"].as_str().unwrap().to_string()
        })
        .collect();
    let bump = |uuid: &str, times: u64| {
        let own = s.call("GET", &format!("/resource_providers/{uuid}"), LATEST, None);
        let from = own.json()["generation"].as_u64().unwrap();
        for generation in from..from + times {
            let path = format!("/resource_providers/{uuid}/traits");
            let body = json!({"resource_provider_generation": generation, "traits": []});
            s.call("PUT", &path, LATEST, Some(&body)).expect(200);
        }
    };
    let check = |query: &str, expected: &[(usize, u64)]| {
        let listed = s.call("GET", &format!("/resource_providers{query}"), LATEST, None);
        listed.expect(200);
        let entries = listed.json()["resource_providers"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(entries.len(), expected.len(), "{query}");
        for (i, generation) in expected {
            let entry = entries
                .iter()
                .find(|e| e["uuid"] == uuids[*i].as_str())
                .unwrap_or_else(|| panic!("{query}: gen-rp{i} missing"));
            assert_eq!(entry["generation"], *generation, "{query}: gen-rp{i}");
            let own = s.call(
                "GET",
                &format!("/resource_providers/{}", uuids[*i]),
                LATEST,
                None,
            );
            assert_eq!(own.json()["generation"], *generation, "gen-rp{i} itself");
        }
    };
    let all = |generations: [u64; 6]| -> Vec<(usize, u64)> {
        generations.into_iter().enumerate().collect()
    };
    check("", &all([0; 6]));
    // Two of six changed: fewer than are listed.
    bump(&uuids[1], 2);
    bump(&uuids[4], 1);
    check("", &all([0, 2, 0, 0, 1, 0]));
    // As many changed as are listed, or more.
    check("?name=gen-rp1", &[(1, 2)]);
    check("?name=gen-rp0", &[(0, 0)]);
    for (i, uuid) in uuids.iter().enumerate().skip(2) {
        bump(uuid, 1 + i as u64 % 2);
    }
    check("", &all([0, 2, 1, 2, 2, 2]));
    check("?name=gen-rp4", &[(4, 2)]);
    // A provider deleted and made again under its uuid starts again at 0.
    s.call(
        "DELETE",
        &format!("/resource_providers/{}", uuids[1]),
        LATEST,
        None,
    )
    .expect(204);
    let again = json!({"name": "gen-rp1", "uuid": uuids[1]});
    s.call("POST", "/resource_providers", LATEST, Some(&again))
        .expect(200);
    check("", &all([0, 0, 1, 2, 2, 2]));
}

#[test]
fn provider_names_that_are_not_object_names_round_trip() {
    let s = Server::start(&[]);
    let name = "cn9:Open vSwitch agent:br-ex";
    let created = s.call(
        "POST",
        "/resource_providers",
        LATEST,
        Some(&json!({"name": name})),
    );
    created.expect(200);
    let uuid = created.json()["uuid"].as_str().unwrap().to_string();
    assert_eq!(created.json()["name"], name);
    let shown = s.call("GET", &format!("/resource_providers/{uuid}"), LATEST, None);
    assert_eq!(shown.json()["name"], name);
    let listed = s.call(
        "GET",
        "/resource_providers?name=cn9:Open%20vSwitch%20agent:br-ex",
        LATEST,
        None,
    );
    assert_eq!(uuids(&listed.json()), vec![uuid.clone()]);
    assert_eq!(listed.json()["resource_providers"][0]["name"], name);
    // The same name twice is Placement's duplicate, however it is stored.
    let again = s.call(
        "POST",
        "/resource_providers",
        LATEST,
        Some(&json!({"name": name})),
    );
    again.expect(409);
    assert_eq!(again.error().1.as_deref(), Some("placement.duplicate_name"));
    // A child names it as its parent by uuid; a rename to another such name keeps it found.
    let child = s.call(
        "POST",
        "/resource_providers",
        LATEST,
        Some(&json!({"name": "cn9_NUMA0", "parent_provider_uuid": uuid})),
    );
    child.expect(200);
    assert_eq!(child.json()["root_provider_uuid"], uuid.as_str());
    let child_uuid = child.json()["uuid"].as_str().unwrap().to_string();
    let renamed = s.call(
        "PUT",
        &format!("/resource_providers/{child_uuid}"),
        LATEST,
        Some(&json!({"name": "cn9_NUMA_0"})),
    );
    renamed.expect(200);
    assert_eq!(renamed.json()["name"], "cn9_NUMA_0");
    let listed = s.call("GET", "/resource_providers?name=cn9_NUMA0", LATEST, None);
    assert!(uuids(&listed.json()).is_empty(), "the old name is gone");
    let listed = s.call("GET", "/resource_providers?name=cn9_NUMA_0", LATEST, None);
    assert_eq!(uuids(&listed.json()), vec![child_uuid]);
}

#[test]
fn reshaper_moves_inventory_and_allocations_to_a_child_all_or_nothing() {
    let s = Server::start(&[]);
    let create = |name: &str, parent: Option<&str>| {
        let mut body = json!({"name": name});
        if let Some(p) = parent {
            body["parent_provider_uuid"] = json!(p);
        }
        let a = s.call("POST", "/resource_providers", LATEST, Some(&body));
        a.expect(200);
        a.json()["uuid"].as_str().unwrap().to_string()
    };
    let cn = create("cn-reshape", None);
    let gpu = create("cn-reshape_pgpu0", Some(&cn));
    s.call(
        "PUT",
        &format!("/resource_providers/{cn}/inventories"),
        LATEST,
        Some(&json!({"resource_provider_generation": 0,
                     "inventories": {"VCPU": {"total": 8}, "VGPU": {"total": 4}}})),
    )
    .expect(200);
    let vm = "5e5e5e5e-0000-4000-8000-000000000001";
    s.call(
        "PUT",
        &format!("/allocations/{vm}"),
        LATEST,
        Some(
            &json!({"allocations": {&cn: {"resources": {"VCPU": 2, "VGPU": 1}}},
                     "project_id": "p", "user_id": "u",
                     "consumer_generation": null, "consumer_type": "INSTANCE"}),
        ),
    )
    .expect(204);
    let generation = |uuid: &str| {
        s.call("GET", &format!("/resource_providers/{uuid}"), LATEST, None)
            .json()["generation"]
            .as_i64()
            .unwrap()
    };
    let reshape = |vcpu: i64, vm_generation: i64| {
        json!({
            "inventories": {
                &cn: {"resource_provider_generation": generation(&cn),
                      "inventories": {"VCPU": {"total": 8}}},
                &gpu: {"resource_provider_generation": generation(&gpu),
                       "inventories": {"VGPU": {"total": 4}}}
            },
            "allocations": {
                vm: {"allocations": {&cn: {"resources": {"VCPU": vcpu}},
                                     &gpu: {"resources": {"VGPU": 1}}},
                     "project_id": "p", "user_id": "u",
                     "consumer_generation": vm_generation, "consumer_type": "INSTANCE"}
            }
        })
    };
    // Not served before 1.30.
    s.call("POST", "/reshaper", Some("1.29"), Some(&reshape(2, 1)))
        .expect(404);
    // A stale consumer generation refuses the whole reshape: nothing moved.
    s.call("POST", "/reshaper", LATEST, Some(&reshape(2, 7)))
        .expect(409);
    // Allocations that do not fit refuse it after the inventories were changed: all of it
    // is put back.
    let generations = (generation(&cn), generation(&gpu));
    s.call("POST", "/reshaper", LATEST, Some(&reshape(9, 1)))
        .expect(409);
    assert_eq!(
        (generation(&cn), generation(&gpu)),
        generations,
        "a refused reshape moves no generation"
    );
    let unchanged = s.call("GET", &format!("/allocations/{vm}"), LATEST, None);
    assert_eq!(
        unchanged.json()["allocations"][&cn]["resources"],
        json!({"VCPU": 2, "VGPU": 1}),
        "{}",
        unchanged.json()
    );
    let inv = s.call(
        "GET",
        &format!("/resource_providers/{cn}/inventories"),
        LATEST,
        None,
    );
    assert!(
        inv.json()["inventories"]["VGPU"].is_object(),
        "{}",
        inv.json()
    );

    s.call("POST", "/reshaper", LATEST, Some(&reshape(2, 1)))
        .expect(204);
    let moved = s.call("GET", &format!("/allocations/{vm}"), LATEST, None);
    assert_eq!(
        moved.json()["allocations"][&cn]["resources"],
        json!({"VCPU": 2})
    );
    assert_eq!(
        moved.json()["allocations"][&gpu]["resources"],
        json!({"VGPU": 1})
    );
    assert_eq!(moved.json()["consumer_generation"], 2);
    let inv = s.call(
        "GET",
        &format!("/resource_providers/{cn}/inventories"),
        LATEST,
        None,
    );
    assert!(
        inv.json()["inventories"]["VGPU"].is_null(),
        "{}",
        inv.json()
    );
    let usages = s.call(
        "GET",
        &format!("/resource_providers/{gpu}/usages"),
        LATEST,
        None,
    );
    assert_eq!(usages.json()["usages"]["VGPU"], 1);
}

/// A claim of `resources` on the provider named `provider`, for a new consumer.
fn claim_on(s: &Server, provider: &str, consumer: &str, resources: Value) {
    let uuid = s
        .call(
            "GET",
            &format!("/resource_providers?name={provider}"),
            LATEST,
            None,
        )
        .expect(200)
        .json()["resource_providers"][0]["uuid"]
        .as_str()
        .unwrap()
        .to_string();
    s.call(
        "PUT",
        &format!("/allocations/{consumer}"),
        LATEST,
        Some(&json!({"allocations": {uuid: {"resources": resources}},
                     "project_id": "p", "user_id": "u", "consumer_generation": null,
                     "consumer_type": "INSTANCE"})),
    )
    .expect(204);
}

#[test]
fn kubeplace_explain_and_headroom_beside_placements_paths() {
    let s = Server::start(&["-f", "examples/cloud"]);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    // The explanation is the one `--explain -o json` gives, under the request's version.
    let q = "resources=VCPU:512,MEMORY_MB:1024&required=HW_CPU_X86_AVX2";
    let e = s
        .call("GET", &format!("/kubeplace/explain?{q}"), LATEST, None)
        .expect(200)
        .json();
    let cli = run(&[
        "placement",
        "candidates",
        "-f",
        "examples/cloud",
        "--query",
        q,
        "--explain",
        "-o",
        "json",
    ]);
    assert_eq!(e, cli["explain"]);
    assert_eq!(e["candidates"], 0);
    // Headroom over the served state is the CLI's over the same files.
    let h = s
        .call(
            "GET",
            "/kubeplace/headroom?flavor=m1.small&without=cn2&cap=50",
            LATEST,
            None,
        )
        .expect(200)
        .json();
    let cli = run(&[
        "placement",
        "headroom",
        "-f",
        "examples/cloud",
        "--flavor",
        "m1.small",
        "--without",
        "cn2",
        "--cap",
        "50",
        "-o",
        "json",
    ]);
    assert_eq!(h, cli);
    assert_eq!(h["fits"], 50, "{h}");
    // A claim through the API is counted by the next headroom.
    let fits = || {
        s.call("GET", "/kubeplace/headroom?flavor=m1.small", LATEST, None)
            .expect(200)
            .json()["fits"]
            .as_i64()
            .unwrap()
    };
    let before = fits();
    claim_on(
        &s,
        "cn3-numa0",
        "9e000000-0000-4000-8000-0000000000f1",
        json!({"MEMORY_MB": 8192}),
    );
    let after = fits();
    assert!(after < before, "{before} then {after}");
    // Bad input is named, with what is accepted.
    for (path, status, words) in [
        ("/kubeplace/headroom", 400, "flavor is required"),
        (
            "/kubeplace/headroom?flavor=nope",
            404,
            "flavor \"nope\" does not exist",
        ),
        (
            "/kubeplace/headroom?flavor=m1.small&cap=lots",
            400,
            "cap=\"lots\" is not a number",
        ),
        (
            "/kubeplace/headroom?flavor=m1.small&cap=0",
            400,
            "at least 1",
        ),
        // A cap past the bound is refused before counting, with the range.
        (
            "/kubeplace/headroom?flavor=m1.small&cap=100000000",
            400,
            "cap=\"100000000\" is not a number of servers in the accepted range: at least 1, at most 10000",
        ),
        (
            "/kubeplace/headroom?flavor=m1.small&cap=10001",
            400,
            "at most 10000",
        ),
        (
            format!(
                "/kubeplace/headroom?flavor=m1.small{}",
                "&without=cn9".repeat(101)
            )
            .as_str(),
            400,
            "without=\"cn9\" is one provider too many: headroom drains at most 100 providers",
        ),
        (
            "/kubeplace/headroom?flavor=m1.small&without=cn9",
            404,
            "provider \"cn9\"",
        ),
        (
            "/kubeplace/headroom?flavor=m1.small&size=2",
            400,
            "unknown parameter \"size\"",
        ),
        (
            "/kubeplace/explain?resources=VCPU:x",
            400,
            "resource VCPU asks for \"x\"",
        ),
    ] {
        let a = s.call("GET", path, LATEST, None);
        a.expect(status);
        let detail = a.json()["errors"][0]["detail"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(detail.contains(words), "{path}: {detail}");
    }
    s.call("POST", "/kubeplace/headroom?flavor=m1.small", LATEST, None)
        .expect(405);
    s.raw("GET", "/kubeplace/headroom?flavor=m1.small", &[], None)
        .expect(401);
}

// Safe to expose: input that is not what a route expects, slow or stalled senders, and the
// token `serve` accepts.

/// Path segments of characters that are not ASCII, some exactly 32 bytes long (a uuid's
/// length without hyphens), raw and percent-encoded, and malformed escapes.
fn odd_segments() -> Vec<String> {
    vec![
        format!("a{}b", "é".repeat(15)),
        format!("{}b", "€".repeat(10)) + "0",
        "\u{1F600}".repeat(8),
        format!("a{}b", "%C3%A9".repeat(15)),
        "%zz%".to_string(),
        "%C3".to_string(),
        "é".to_string(),
    ]
}

#[test]
fn multibyte_consumer_delete_fails_alone_and_the_api_goes_on() {
    let s = Server::seeded();
    // Raw UTF-8 in the path: 32 bytes once hyphens are left out, 17 characters.
    let consumer = format!("a{}b", "é".repeat(15));
    let a = s.call("DELETE", &format!("/allocations/{consumer}"), LATEST, None);
    a.expect(404);
    assert!(a.error().0.contains(&consumer), "{:?}", a.error());
    let encoded = format!("a{}b", "%C3%A9".repeat(15));
    s.call("DELETE", &format!("/allocations/{encoded}"), LATEST, None)
        .expect(404);
    // Every later request is answered as before: reads, and writes.
    let list = s.call("GET", "/resource_providers", LATEST, None);
    list.expect(200);
    assert_eq!(uuids(&list.json()).len(), 3);
    let vm_b = "9b000000-0000-4000-8000-00000000000b";
    s.call(
        "PUT",
        &format!("/allocations/{vm_b}"),
        LATEST,
        Some(&allocation_body(CN2, 1, Value::Null)),
    )
    .expect(204);
    s.call("PUT", "/traits/CUSTOM_AFTER", LATEST, None)
        .expect(201);
    s.call("DELETE", &format!("/allocations/{VM_A}"), LATEST, None)
        .expect(204);
}

#[test]
fn odd_path_segments_and_strings_never_get_a_500() {
    let s = Server::seeded();
    let templates = [
        "/resource_providers/{}",
        "/resource_providers/{}/inventories",
        "/resource_providers/{}/inventories/{}",
        "/resource_providers/{}/traits",
        "/resource_providers/{}/aggregates",
        "/resource_providers/{}/usages",
        "/resource_providers/{}/allocations",
        "/traits/{}",
        "/resource_classes/{}",
        "/allocations/{}",
    ];
    for segment in odd_segments() {
        for template in templates {
            let path = template.replace("{}", &segment);
            for method in ["GET", "PUT", "POST", "DELETE"] {
                let a = s.call(method, &path, LATEST, Some(&json!({})));
                assert!(a.status < 500, "{method} {path}: {} {}", a.status, a.body);
                assert!(
                    !a.body.contains("panicked") && !a.body.contains("char boundary"),
                    "{method} {path}: {}",
                    a.body
                );
            }
        }
        // The same characters in bodies and queries.
        let bodies = [
            (
                "PUT",
                format!("/allocations/{VM_A}"),
                json!({"allocations": {segment.clone(): {"resources": {"VCPU": 1}}}, "project_id": segment, "user_id": segment, "consumer_generation": 1, "consumer_type": segment}),
            ),
            (
                "POST",
                "/allocations".to_string(),
                json!({segment.clone(): {"allocations": {CN2: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": null, "consumer_type": "INSTANCE"}}),
            ),
            (
                "POST",
                "/resource_providers".to_string(),
                json!({"name": segment, "uuid": segment, "parent_provider_uuid": segment}),
            ),
            (
                "PUT",
                format!("/resource_providers/{CN1}/aggregates"),
                json!({"aggregates": [segment], "resource_provider_generation": 0}),
            ),
            (
                "PUT",
                format!("/resource_providers/{CN1}/traits"),
                json!({"traits": [segment], "resource_provider_generation": 0}),
            ),
            (
                "PUT",
                format!("/resource_providers/{CN2}/inventories"),
                json!({"inventories": {segment.clone(): {"total": 1}}, "resource_provider_generation": 0}),
            ),
            (
                "POST",
                "/reshaper".to_string(),
                json!({"inventories": {segment.clone(): {"inventories": {}, "resource_provider_generation": 0}}, "allocations": {segment.clone(): {"allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": null, "consumer_type": "INSTANCE"}}}),
            ),
        ];
        for (method, path, body) in bodies {
            let a = s.call(method, &path, LATEST, Some(&body));
            assert!(
                a.status < 500,
                "{method} {path} {body}: {} {}",
                a.status,
                a.body
            );
        }
        for query in [
            "resources",
            "required",
            "member_of",
            "in_tree",
            "name",
            "uuid",
        ] {
            let path = format!("/resource_providers?{query}={segment}");
            let a = s.call("GET", &path, LATEST, None);
            assert!(a.status < 500, "{path}: {} {}", a.status, a.body);
            let path = format!("/allocation_candidates?resources=VCPU:1&{query}={segment}");
            let a = s.call("GET", &path, LATEST, None);
            assert!(a.status < 500, "{path}: {} {}", a.status, a.body);
        }
    }
    // A project of 200 two-byte characters is 200 characters, within Placement's 255.
    let project = "é".repeat(200);
    s.call(
        "GET",
        &format!("/usages?project_id={project}"),
        LATEST,
        None,
    )
    .expect(200);
    let a = s.call(
        "GET",
        &format!("/usages?project_id={}", "é".repeat(256)),
        LATEST,
        None,
    );
    a.expect(400);
    assert!(
        a.error().0.contains("1 to 255 characters"),
        "{:?}",
        a.error()
    );
    s.call("GET", "/resource_providers", LATEST, None)
        .expect(200);
    s.call("PUT", "/traits/CUSTOM_STILL_WRITABLE", LATEST, None)
        .expect(201);
}

#[test]
fn a_body_without_a_token_is_refused_before_it_is_sent() {
    let s = Server::seeded();
    // 1 MB announced, a few bytes sent, the rest never comes: the server answers from the
    // headers and neither waits for nor reads the body.
    let mut slow = Slow::open(
        &s,
        &format!(
            "POST /resource_providers HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n",
            s.addr
        ),
    );
    let started = Instant::now();
    slow.send(b"{\"name\": \"");
    let a = slow
        .answer_within(Duration::from_secs(5))
        .expect("an answer before the body is sent");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    a.expect(401);
    assert_eq!(a.header("connection"), Some("close"));
    assert!(
        a.header("x-openstack-request-id")
            .is_some_and(|id| id.starts_with("req-"))
    );
    assert!(
        slow.closed_within(Duration::from_secs(3)),
        "the server keeps the connection open for the body"
    );
    // A wrong token: 403, as soon.
    let mut slow = Slow::open(
        &s,
        &format!(
            "PUT /traits/CUSTOM_X HTTP/1.1\r\nHost: {}\r\nX-Auth-Token: nope\r\nContent-Length: 1000000\r\n\r\n",
            s.addr
        ),
    );
    slow.send(b"{");
    slow.answer_within(Duration::from_secs(5))
        .expect("an answer before the body is sent")
        .expect(403);
}

#[test]
fn a_stalled_body_is_cut_at_the_deadline() {
    let s = Server::seeded();
    let mut slow = Slow::open(
        &s,
        &format!(
            "POST /resource_providers HTTP/1.1\r\nHost: {}\r\nX-Auth-Token: admin\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
            s.addr
        ),
    );
    let started = Instant::now();
    slow.send(b"{\"name\": ");
    let a = slow
        .answer_within(Duration::from_secs(30))
        .expect("an answer once the deadline passed");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(20),
        "{waited:?}"
    );
    a.expect(408);
    assert!(a.error().0.contains("within 10 s"), "{:?}", a.error());
    assert_eq!(a.header("connection"), Some("close"));
    assert!(slow.closed_within(Duration::from_secs(3)));
    // Nothing was created, and the server answers others.
    let list = s.call("GET", "/resource_providers", LATEST, None);
    assert_eq!(uuids(&list.json()).len(), 3);
}

#[test]
fn a_body_announced_over_the_limit_is_a_413_at_once() {
    let s = Server::seeded();
    let mut slow = Slow::open(
        &s,
        &format!(
            "POST /resource_providers HTTP/1.1\r\nHost: {}\r\nX-Auth-Token: admin\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            s.addr,
            4 * 1024 * 1024 + 1
        ),
    );
    let a = slow
        .answer_within(Duration::from_secs(5))
        .expect("an answer from the headers");
    a.expect(413);
    assert!(a.error().0.contains("4194304 bytes"), "{:?}", a.error());
}

#[test]
fn serve_refuses_an_empty_token_and_the_default_one_off_loopback() {
    let wait = Duration::from_secs(20);
    let (status, err) = serve_exits(&["--token", ""], wait).expect("serve --token '' exits");
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("--token is empty"), "{err}");
    let (status, err) =
        serve_exits(&["--listen", "0.0.0.0:0"], wait).expect("serve --listen 0.0.0.0:0 exits");
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("--token") && err.contains("admin") && err.contains("127.0.0.1"),
        "{err}"
    );
    // A token of one's own may listen anywhere.
    let s = Server::start(&["--token", "sesame"]);
    s.raw(
        "GET",
        "/resource_providers",
        &[("X-Auth-Token", "sesame".into())],
        None,
    )
    .expect(200);
    let out = serve_exits(
        &["--listen", "0.0.0.0:0", "--token", "sesame"],
        Duration::from_secs(2),
    )
    .expect_err("serve with a token of its own keeps running");
    assert!(out.contains("listening on http://0.0.0.0:"), "{out}");
}

#[test]
fn a_search_past_its_deadline_is_stopped_and_answered_503() {
    let cloud = accelerator_cloud("deadline", 4, 32);
    let s = Server::start(&["-f", cloud.to_str().unwrap(), "--search-deadline=1"]);
    let started = Instant::now();
    let a = s.call("GET", &heavy_search(), Some(HEAVY_MV), None);
    let stopped_after = started.elapsed();
    // Only a search still running at its deadline is answered so, and it is stopped then.
    a.expect(503);
    assert_eq!(a.header("retry-after"), Some("1"));
    let (detail, _) = a.error();
    assert!(detail.contains("deadline of 1 s"), "{detail}");
    assert!(
        stopped_after >= Duration::from_secs(1) && stopped_after < Duration::from_millis(2500),
        "answered after {stopped_after:?}"
    );
    // Light searches are not touched by the deadline.
    let a = s.call("GET", LIGHT_SEARCH, Some("1.39"), None);
    a.expect(200);
    assert_eq!(a.json()["allocation_requests"].as_array().unwrap().len(), 1);
    let _ = std::fs::remove_file(cloud);
}

#[test]
fn searches_beyond_the_limit_get_503_while_writes_go_on() {
    let cloud = accelerator_cloud("limit", 4, 32);
    let s = Server::start(&[
        "-f",
        cloud.to_str().unwrap(),
        "--max-searches=1",
        "--max-queued-searches=0",
        "--search-deadline=3",
    ]);
    let mut heavy = heavy_search_running(&s);
    // Another search is refused at once, saying why.
    let refused = s.call("GET", LIGHT_SEARCH, Some("1.39"), None);
    refused.expect(503);
    assert_eq!(refused.header("retry-after"), Some("1"));
    let (detail, _) = refused.error();
    assert!(
        detail.contains("1 searches are running and 0 waiting"),
        "{detail}"
    );
    // Meanwhile a write is decided without waiting for the search: the search holds no
    // lock.
    let started = Instant::now();
    s.call("PUT", "/traits/CUSTOM_WHILE_SEARCHING", Some("1.39"), None)
        .expect(201);
    let took = started.elapsed();
    assert!(
        heavy.answer_within(Duration::from_millis(1)).is_none(),
        "the heavy search ended before the write could be timed beside it"
    );
    assert!(took < Duration::from_millis(500), "the write took {took:?}");
    heavy
        .answer_within(Duration::from_secs(60))
        .expect("the heavy search's answer")
        .expect(503);
    // Its turn given back, the next search is answered.
    s.call("GET", LIGHT_SEARCH, Some("1.39"), None).expect(200);
    let _ = std::fs::remove_file(cloud);
}

#[test]
fn a_search_whose_caller_goes_away_is_stopped() {
    let cloud = accelerator_cloud("gone", 4, 32);
    let s = Server::start(&[
        "-f",
        cloud.to_str().unwrap(),
        "--max-searches=1",
        "--max-queued-searches=0",
    ]);
    // The heavy search starts, and its caller hangs up.
    let slow = heavy_search_running(&s);
    slow.stream
        .shutdown(std::net::Shutdown::Both)
        .expect("hang up");
    drop(slow);
    // The search stops with it and gives its turn back, where its budget would have kept it
    // running for more than 10 s.
    let hung_up = Instant::now();
    loop {
        let a = s.call("GET", LIGHT_SEARCH, Some("1.39"), None);
        if a.status == 200 {
            break;
        }
        a.expect(503);
        assert!(
            hung_up.elapsed() < Duration::from_secs(1),
            "the search went on after its caller hung up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(cloud);
}

/// Searches short enough to be answered where the request was read, and longer ones that
/// are tried there first and answered on a thread apart, answer what one search with the
/// whole budget answers (`kubeplace placement candidates` over the same files).
#[test]
fn short_and_long_searches_answer_as_the_command_does() {
    let cloud = accelerator_cloud("in-place", 1_500, 2);
    let file = cloud.to_str().unwrap();
    let s = Server::start(&["-f", file]);
    for query in [
        // A few steps: answered in place.
        "resources=VCPU:1&limit=5",
        "resources=VCPU:1&limit=100",
        "resources=VCPU:1,FPGA:3",
        // Thousands of trees to walk: tried in place, then answered apart.
        "resources=VCPU:1",
        "resources=VCPU:1&resources1=FPGA:1&resources2=FPGA:1&group_policy=isolate",
        // A large limit: apart at once.
        "resources=VCPU:1&limit=1000",
    ] {
        let answer = s.call(
            "GET",
            &format!("/allocation_candidates?{query}"),
            LATEST,
            None,
        );
        answer.expect(200);
        let command = std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
            .args(["placement", "candidates", "-f", file, "--query", query])
            .output()
            .expect("run kubeplace placement candidates");
        assert!(command.status.success(), "{query}");
        let expected: Value = serde_json::from_slice(&command.stdout).unwrap();
        assert_eq!(answer.json(), expected, "{query}");
        let found = expected["allocation_requests"].as_array().unwrap().len();
        let want = match query {
            "resources=VCPU:1&limit=5" => 5,
            "resources=VCPU:1,FPGA:3" => 0,
            "resources=VCPU:1&limit=100" => 100,
            "resources=VCPU:1&limit=1000" => 1_000,
            q if q.contains("isolate") => 3_000,
            _ => 1_500,
        };
        assert_eq!(found, want, "{query}");
    }
    let _ = std::fs::remove_file(cloud);
}

/// One log line a request (at INFO under `kubeplace::placement_api::access`): the request id
/// answered, the caller's global request id when it has Placement's form (ignored
/// otherwise, and never answered back), the route, status and microversion.
#[test]
fn each_request_is_logged_with_its_request_ids() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let server = placement_server::Server::start_logging(
        &[],
        &[("RUST_LOG", "warn,kubeplace::placement_api::access=info")],
        &log,
    );
    let global = "req-0f1e2d3c-4b5a-4968-8776-655443322110";
    let asked = |id: &str| {
        server.raw(
            "GET",
            "/resource_providers",
            &[
                ("X-Auth-Token", "admin".to_string()),
                ("OpenStack-API-Version", "placement 1.14".to_string()),
                ("X-OpenStack-Request-ID", id.to_string()),
            ],
            None,
        )
    };
    let kept = asked(global);
    let ignored = asked("not-a-request-id");
    let answered = |a: &placement_server::Answer| {
        a.header("x-openstack-request-id")
            .expect("a request id")
            .to_string()
    };
    let (kept_id, ignored_id) = (answered(&kept), answered(&ignored));
    assert_ne!(kept_id, global, "the caller's id is not answered back");
    assert!(kept_id.starts_with("req-"));
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    let line_of = |id: &str| {
        text.lines()
            .find(|l| {
                l.contains(&format!("request_id=\"{id}\""))
                    || l.contains(&format!("request_id={id}"))
            })
            .unwrap_or_else(|| panic!("no line for {id} in:\n{text}"))
            .to_string()
    };
    let first = line_of(&kept_id);
    for want in [
        "kubeplace::placement_api::access",
        "method=GET",
        "/resource_providers",
        "status=200",
        "placement 1.14",
        global,
    ] {
        assert!(first.contains(want), "{want} not in {first}");
    }
    let second = line_of(&ignored_id);
    assert!(
        second.contains("global_request_id=\"-\"") || second.contains("global_request_id=-"),
        "{second}"
    );
    assert!(!second.contains("not-a-request-id"), "{second}");
}

/// The capacity page over the served state (`serve` runs no controllers: the files'
/// statuses and allocations as they are); a claim through the API shows in the next one;
/// the token is needed, a caller that takes only JSON is told what the path answers with,
/// and a bad `rows` names what is accepted.
#[test]
fn the_capacity_page_is_served_behind_the_token() {
    let s = Server::start(&["-f", "examples/cloud"]);
    let browser = |path: &str, token: Option<&str>| {
        let mut headers = vec![(
            "Accept",
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8".to_string(),
        )];
        if let Some(t) = token {
            headers.push(("X-Auth-Token", t.to_string()));
        }
        s.raw("GET", path, &headers, None)
    };
    let served = browser("/kubeplace/capacity?rows=10", Some("admin"));
    served.expect(200);
    assert_eq!(
        served.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let cn2_disk = |page: &str| {
        let at = page
            .find(r#"<tr class="host" data-host="cn2">"#)
            .expect("cn2's row");
        let row = &page[at..at + page[at..].find("</tr>").unwrap()];
        let bar = row
            .find(r#"data-class="DISK_GB" data-used=""#)
            .expect("a DISK_GB bar");
        let used = &row[bar + r#"data-class="DISK_GB" data-used=""#.len()..];
        used[..used.find('"').unwrap()].parse::<i64>().unwrap()
    };
    let before = cn2_disk(&served.body);
    // A claim on cn2 through the API shows in the next page.
    claim_on(
        &s,
        "cn2",
        "9e000000-0000-4000-8000-0000000000c1",
        json!({"DISK_GB": 10}),
    );
    let after = browser("/kubeplace/capacity", Some("admin"));
    assert_eq!(cn2_disk(&after.body), before + 10);
    // No token, another token, JSON only, a bad parameter.
    assert_eq!(browser("/kubeplace/capacity", None).status, 401);
    assert_eq!(browser("/kubeplace/capacity", Some("nope")).status, 403);
    let json_only = s.raw(
        "GET",
        "/kubeplace/capacity",
        &[
            ("X-Auth-Token", "admin".to_string()),
            ("Accept", "application/json".to_string()),
        ],
        None,
    );
    assert_eq!(json_only.status, 406, "{}", json_only.body);
    assert!(json_only.body.contains("text/html"), "{}", json_only.body);
    let bad = s.call("GET", "/kubeplace/capacity?rows=many", LATEST, None);
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(
        bad.body
            .contains(r#"rows=\"many\" is not a number of rows"#),
        "{}",
        bad.body
    );
}
