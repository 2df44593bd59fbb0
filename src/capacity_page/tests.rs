use kubeplace_api::manifest::parse_stream;
use kubeplace_policy::store::Store;

use super::{PageLimits, reason, render};

fn store(yaml: &str) -> Store {
    let mut store = Store::default();
    for doc in parse_stream("test.yaml", yaml).expect("YAML") {
        if let Some(object) = doc.object() {
            store.apply(object.expect("an object"));
        }
    }
    store
}

const CLOUD: &str = r#"
apiVersion: kubeplace.io/v1alpha1
kind: Aggregate
metadata: {name: zone-a}
spec: {uuid: aaaaaaaa-0000-4000-8000-000000000001, availabilityZone: az1}
---
apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata: {name: cn1}
spec:
  inventories: {VCPU: {total: 10}}
  aggregates: [aaaaaaaa-0000-4000-8000-000000000001]
---
apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata:
  name: cn2
  annotations: {placement.kubeplace.io/name: "<script>alert(1)</script>"}
spec:
  inventories: {VCPU: {total: 4}}
---
apiVersion: kubeplace.io/v1alpha1
kind: Allocation
metadata: {name: c1}
spec:
  consumer: 11111111-0000-4000-8000-000000000001
  allocations:
  - {provider: cn1, resources: {VCPU: 9}}
---
apiVersion: kubeplace.io/v1alpha1
kind: Server
metadata: {name: stuck, namespace: p1}
spec: {flavor: large, image: img}
status:
  conditions:
  - {type: Scheduled, status: 'False', reason: NoValidHost, message: "no host has 64 VCPU & more"}
"#;

#[test]
fn the_page_shows_each_zone_the_hottest_hosts_and_who_waits_with_every_name_escaped() {
    let page = render(&store(CLOUD), PageLimits { rows: 10 }, "now").unwrap();
    // Two zones: az1 (cn1) and the default one (cn2).
    assert!(page.contains(r#"data-zone="az1""#), "{page}");
    assert!(page.contains(r#"data-zone="nova""#), "{page}");
    // cn1 is 90% used: hot, and first among the hottest.
    assert!(
        page.contains(r#"<tr class="hot-host" data-host="cn1" data-rank="1">"#),
        "{page}"
    );
    assert!(
        page.contains(
            r#"<div class="bar hot" data-class="VCPU" data-used="9" data-capacity="10">"#
        ),
        "{page}"
    );
    assert!(page.contains(r#"data-server="p1/stuck" data-reason="NoValidHost""#));
    assert!(page.contains("no host has 64 VCPU &amp; more"), "{page}");
    // A name is text, never markup.
    assert!(!page.contains("<script>"), "{page}");
    assert!(page.contains("&lt;script&gt;"), "{page}");
    // Self-contained: nothing is fetched from elsewhere (the icon is an empty data URL,
    // so that a browser does not ask for /favicon.ico).
    for fetched in ["src=", "@import", "url("] {
        assert!(!page.contains(fetched), "{fetched} in {page}");
    }
    assert_eq!(page.matches("href=").count(), 1, "{page}");
    assert!(
        page.contains(r#"<link rel="icon" href="data:,">"#),
        "{page}"
    );
}

#[test]
fn rows_are_limited_and_the_rest_counted() {
    let page = render(&store(CLOUD), PageLimits { rows: 1 }, "now").unwrap();
    assert_eq!(page.matches(r#"class="hot-host""#).count(), 1, "{page}");
    assert!(page.contains("(1 of 2, by the largest share"), "{page}");
    let every = render(&store(CLOUD), PageLimits { rows: 0 }, "now").unwrap();
    assert_eq!(every.matches(r#"class="hot-host""#).count(), 2, "{every}");
}

#[test]
fn an_empty_cloud_says_so() {
    let page = render(&Store::default(), PageLimits { rows: 10 }, "now").unwrap();
    assert!(page.contains("No resource providers."), "{page}");
    assert!(page.contains("Every server is placed."), "{page}");
}

#[test]
fn a_reason_without_the_request_it_restates() {
    assert_eq!(
        reason(
            "NoValidHost: no provider tree can host m1 (resources=VCPU:1): no room for VCPU:1: 3 trees"
        ),
        "no room for VCPU:1: 3 trees"
    );
    assert_eq!(reason("QuotaExceeded"), "QuotaExceeded");
}
