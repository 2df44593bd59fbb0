//! Servers: placement, capacity, rebuild, resize, flavor metadata and templates, through
//! the same admission and reconcile code `kubeplace apply` and the operator run.

use kubeplace::cli::apply::{Validate, apply_documents};
use kubeplace_api::manifest::parse_stream;
use kubeplace_api::{Kind, Object};
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_policy::admission::{Operation, admit};
use kubeplace_policy::scheduling::{self as scheduler, HeadroomFigures, release};
use kubeplace_policy::status::reconcile_all;
use kubeplace_policy::store::{ObjectKey, Store};
use proptest::prelude::*;
use serde_json::Value;

/// `kubeplace apply` of the YAML after the Namespace `ns` the servers live in; the
/// Namespace's item is left out of the report, so items are the YAML's own.
fn run(yaml: &str) -> (kubeplace::cli::apply::Report, Store) {
    let namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n---\n";
    let (mut report, store) = apply_documents(
        parse_stream("test.yaml", &format!("{namespace}{yaml}")).expect("test YAML parses"),
        Validate::Strict,
    );
    let namespace = report.items.remove(0);
    assert!(namespace.admission.allowed);
    report.summary.admitted -= 1;
    (report, store)
}

fn node(name: &str, vcpu: i64, traits: &[&str]) -> String {
    let traits: String = traits.iter().map(|t| format!("\n  - {t}")).collect();
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: {name}\nspec:\n  inventories:\n    VCPU:\n      total: {vcpu}\n    MEMORY_MB:\n      total: 8192\n  traits:\n  - COMPUTE_NODE{traits}\n---\n"
    )
}

fn flavor(name: &str, vcpus: i64, extra: &str) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: {name}\nspec:\n  vcpus: {vcpus}\n  memoryMb: 512\n{extra}---\n"
    )
}

/// An Image requiring these traits.
fn image(name: &str, traits: &[&str]) -> String {
    let keys: Vec<String> = traits.iter().map(|t| format!("trait:{t}")).collect();
    let properties: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), "required")).collect();
    image_with(name, &properties)
}

/// An Image with these properties.
fn image_with(name: &str, properties: &[(&str, &str)]) -> String {
    let props: String = properties
        .iter()
        .map(|(k, v)| format!("\n    {k}: {v:?}"))
        .collect();
    let props = if props.is_empty() {
        " {}".to_string()
    } else {
        props
    };
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata:\n  name: {name}\nspec:\n  properties:{props}\n---\n"
    )
}

fn server(name: &str, flavor: &str, image: &str, extra: &str) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata:\n  name: {name}\n  namespace: ns\nspec:\n  flavor: {flavor}\n  image: {image}\n{extra}---\n"
    )
}

fn server_status(store: &Store, name: &str) -> Value {
    let key = ObjectKey {
        kind: Kind::Server,
        namespace: "ns".into(),
        name: name.into(),
    };
    store.get(&key).expect("server stored").status_value()
}

fn scheduled(store: &Store, name: &str) -> String {
    server_status(store, name)["conditions"][0]["reason"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn servers_fill_the_cloud_and_the_rest_wait() {
    let mut yaml =
        node("cn1", 4, &[]) + &node("cn2", 4, &[]) + &flavor("f2", 2, "") + &image("img", &[]);
    for i in 0..5 {
        yaml += &server(&format!("s{i}"), "f2", "img", "");
    }
    let (report, store) = run(&yaml);
    assert_eq!(report.summary.rejected, 0);
    let reasons: Vec<String> = (0..5)
        .map(|i| scheduled(&store, &format!("s{i}")))
        .collect();
    assert_eq!(
        reasons,
        vec![
            "Scheduled",
            "Scheduled",
            "Scheduled",
            "Scheduled",
            "NoValidHost"
        ]
    );
    // The one left waiting says why, with counts: each node has 0 of 4 VCPU free.
    let why = server_status(&store, "s4")["conditions"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        why.ends_with(": no room for VCPU:2 for the unnumbered group (largest free 0): 2 trees"),
        "{why}"
    );
    // Spread: the first two servers land on different nodes.
    assert_ne!(
        server_status(&store, "s0")["host"],
        server_status(&store, "s1")["host"]
    );
    assert_eq!(store.index().used("cn1", "VCPU"), 4);
    assert_eq!(store.index().used("cn2", "VCPU"), 4);
}

#[test]
fn deleting_a_server_frees_its_capacity_for_a_waiting_server() {
    let yaml = node("cn1", 2, &[])
        + &flavor("f2", 2, "")
        + &image("img", &[])
        + &server("a", "f2", "img", "")
        + &server("b", "f2", "img", "");
    let (_, mut store) = run(&yaml);
    assert_eq!(scheduled(&store, "b"), "NoValidHost");
    // What the leader does when `kubectl delete server a` sets its deletion timestamp.
    let key_a = ObjectKey {
        kind: Kind::Server,
        namespace: "ns".into(),
        name: "a".into(),
    };
    let Some(Object::Server(mut a)) = store.get(&key_a).cloned() else {
        panic!("server a stored")
    };
    a.metadata.finalizers = Some(vec![release::ALLOCATION_FINALIZER.to_string()]);
    a.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-11-22T00:00:00Z".parse().unwrap(),
    ));
    store.put(Object::Server(a));
    let releases = release::releases(&store);
    assert_eq!(releases.delete_allocations, vec!["server.ns.a".to_string()]);
    assert_eq!(releases.remove_finalizer.len(), 1);
    assert_eq!(
        releases
            .add_finalizer
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        vec!["b"],
        "the live server gets the finalizer"
    );
    release::forget_allocations(&mut store, &releases);
    assert_eq!(store.index().used("cn1", "VCPU"), 0);
    // The waiting server is placed in the same pass, and a is not placed again.
    let placed = scheduler::schedule_pending(&mut store, &Weighers::default());
    let names: Vec<&str> = placed
        .iter()
        .map(|a| a.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(names, vec!["server.ns.b"]);
    reconcile_all(&mut store, &HeadroomFigures::default(), 5);
    assert_eq!(scheduled(&store, "b"), "Scheduled");
    assert_eq!(store.index().used("cn1", "VCPU"), 2);
}

#[test]
fn a_server_can_lose_its_finalizer_after_its_flavor_is_gone() {
    let yaml = node("cn1", 2, &[]) + &flavor("f2", 2, "") + &image("img", &[]);
    let (_, mut store) = run(&(yaml + &server("a", "f2", "img", "")));
    store.delete(&ObjectKey::cluster(Kind::Flavor, "f2"));
    let key = ObjectKey {
        kind: Kind::Server,
        namespace: "ns".into(),
        name: "a".into(),
    };
    let old = store.get(&key).cloned().unwrap();
    let Object::Server(mut changed) = old.clone() else {
        panic!("a server")
    };
    changed.metadata.finalizers = Some(vec![release::ALLOCATION_FINALIZER.to_string()]);
    let verdict = admit(
        Operation::Update,
        &Object::Server(changed.clone()),
        Some(&old),
        &store,
    );
    assert!(verdict.allowed, "{}", verdict.message);
    // A change of the spec is judged as ever.
    changed.spec.image = "other".into();
    let verdict = admit(
        Operation::Update,
        &Object::Server(changed),
        Some(&old),
        &store,
    );
    assert!(!verdict.allowed);
    assert!(
        verdict
            .message
            .contains("spec.flavor: Flavor \"f2\" does not exist"),
        "{}",
        verdict.message
    );
}

/// A flavor and image that make no guest Nova would boot are refused at create, resize and
/// rebuild, with Nova's reason; a pair that does is admitted.
#[test]
fn a_flavor_and_image_nova_would_not_boot_are_refused_with_novas_reason() {
    let extra = |specs: &[(&str, &str)]| {
        let lines: String = specs
            .iter()
            .map(|(k, v)| format!("    {k}: {v:?}\n"))
            .collect();
        format!("  extraSpecs:\n{lines}")
    };
    let base = node("cn1", 8, &[])
        + &flavor("plain", 2, "")
        + &flavor("two-cells", 4, &extra(&[("hw:numa_nodes", "2")]))
        + &flavor("shared", 2, &extra(&[("hw:cpu_policy", "shared")]))
        + &image_with("img", &[])
        + &image_with("one-cell", &[("hw_numa_nodes", "1")])
        + &image_with("wants-pinning", &[("hw_cpu_policy", "dedicated")]);
    let verdict = |yaml: &str| {
        let (report, _) = run(yaml);
        report.items.last().unwrap().admission.clone()
    };
    // A flavor whose cells leave a vCPU out boots with no image: refused on its own.
    let unassigned = flavor(
        "unassigned",
        4,
        &extra(&[
            ("hw:numa_nodes", "2"),
            ("hw:numa_cpus.0", "0,1"),
            ("hw:numa_mem.0", "256"),
            ("hw:numa_cpus.1", "2"),
            ("hw:numa_mem.1", "256"),
        ]),
    );
    let refused = verdict(&unassigned);
    assert!(
        !refused.allowed
            && refused.message.contains("whatever the image")
            && refused.message.contains("ImageNUMATopologyCPUsUnassigned")
            && refused.message.contains("vCPUs 3"),
        "{}",
        refused.message
    );
    let refused = verdict(&(base.clone() + &server("s", "two-cells", "one-cell", "")));
    assert!(!refused.allowed);
    assert!(
        refused.message.contains(
            "flavor \"two-cells\" with image \"one-cell\" makes no guest Nova would boot"
        ) && refused.message.contains("ImageNUMATopologyForbidden"),
        "{}",
        refused.message
    );
    assert!(verdict(&(base.clone() + &server("s", "two-cells", "img", ""))).allowed);
    let refused = verdict(&(base.clone() + &server("s", "shared", "wants-pinning", "")));
    assert!(
        !refused.allowed && refused.message.contains("ImageCPUPinningForbidden"),
        "{}",
        refused.message
    );
    assert!(verdict(&(base.clone() + &server("s", "plain", "wants-pinning", ""))).allowed);
    // Resize and rebuild are judged by the pair they choose.
    let running = base.clone() + &server("s", "plain", "one-cell", "");
    let resized = verdict(&(running.clone() + &server("s", "two-cells", "one-cell", "")));
    assert!(
        !resized.allowed && resized.message.contains("ImageNUMATopologyForbidden"),
        "{}",
        resized.message
    );
    let rebuilt = verdict(
        &(base.clone()
            + &server("s", "shared", "img", "")
            + &server("s", "shared", "wants-pinning", "")),
    );
    assert!(
        !rebuilt.allowed && rebuilt.message.contains("ImageCPUPinningForbidden"),
        "{}",
        rebuilt.message
    );
}

#[test]
fn rebuild_keeps_the_allocation_or_is_rejected_naming_the_traits() {
    let base = node("cn1", 8, &["HW_CPU_X86_AVX2"])
        + &flavor("f1", 1, "")
        + &image("plain", &[])
        + &image("avx", &["HW_CPU_X86_AVX2"])
        + &image("avx512", &["HW_CPU_X86_AVX512F"])
        + &server("s", "f1", "plain", "");
    let ok = base.clone() + &server("s", "f1", "avx", "");
    let (report, store) = run(&ok);
    assert!(report.items.last().unwrap().admission.allowed);
    assert_eq!(scheduled(&store, "s"), "Scheduled");
    assert_eq!(
        store.index().used("cn1", "VCPU"),
        1,
        "the allocation stays, not doubled"
    );
    let bad = base + &server("s", "f1", "avx512", "");
    let (report, store) = run(&bad);
    let verdict = &report.items.last().unwrap().admission;
    assert!(!verdict.allowed);
    assert!(verdict.message.contains("rebuild rejected: image \"avx512\" requires HW_CPU_X86_AVX512F which the server's providers (cn1) lack"), "{}", verdict.message);
    // The rejected update left the server as it was.
    let key = ObjectKey {
        kind: Kind::Server,
        namespace: "ns".into(),
        name: "s".into(),
    };
    let Some(Object::Server(s)) = store.get(&key) else {
        panic!("server kept")
    };
    assert_eq!(s.spec.image, "plain");
}

#[test]
fn an_image_that_comes_to_require_a_missing_trait_marks_the_server_rebuild_rejected() {
    let yaml = node("cn1", 4, &[])
        + &flavor("f1", 1, "")
        + &image("img", &[])
        + &server("s", "f1", "img", "");
    let (_, store) = run(&yaml);
    assert_eq!(scheduled(&store, "s"), "Scheduled");
    // The image is edited after the server landed: no rebuild was ever checked.
    let (report, store) = run(&(yaml + &image("img", &["CUSTOM_FPGA"])));
    assert_eq!(report.summary.rejected, 0);
    let status = server_status(&store, "s");
    assert_eq!(status["conditions"][0]["reason"], "RebuildRejected");
    assert_eq!(status["conditions"][0]["status"], "False");
    assert_eq!(
        status["conditions"][0]["message"],
        "image \"img\" requires CUSTOM_FPGA which the providers of Allocation server.ns.s lack; the server keeps that allocation"
    );
    assert_eq!(status["host"], "cn1", "the allocation is kept");
    assert_eq!(store.index().used("cn1", "VCPU"), 1);
}

#[test]
fn a_server_whose_provider_goes_keeps_its_allocation_and_says_so() {
    // A mirrored Node, as the operator's --mirror-cluster reads it.
    let cn1 = "apiVersion: v1\nkind: Node\nmetadata: {name: cn1}\nstatus: {capacity: {cpu: '4', memory: 8Gi}}\n---\n";
    let yaml =
        cn1.to_string() + &flavor("f1", 1, "") + &image("img", &[]) + &server("s", "f1", "img", "");
    let (_, mut store) = run(&yaml);
    assert_eq!(scheduled(&store, "s"), "Scheduled");
    // The Node is deleted: its provider goes from the store.
    store.apply_changes([kubeplace_policy::store::Change::Unmirror(
        ObjectKey::cluster(Kind::ResourceProvider, "cn1"),
    )]);
    reconcile_all(&mut store, &HeadroomFigures::default(), 5);
    let status = server_status(&store, "s");
    assert_eq!(
        status["conditions"][0]["reason"], "ProviderGone",
        "{status}"
    );
    assert_eq!(status["conditions"][0]["status"], "False");
    assert_eq!(
        status["conditions"][0]["message"],
        "provider cn1 of Allocation server.ns.s no longer exists; the server keeps that allocation until it is deleted or resized"
    );
    assert!(
        store
            .get(&ObjectKey::cluster(Kind::Allocation, "server.ns.s"))
            .is_some(),
        "the allocation is kept"
    );
}

#[test]
fn resize_places_the_server_again_without_counting_it_twice() {
    let yaml = node("cn1", 4, &[])
        + &flavor("f2", 2, "")
        + &flavor("f4", 4, "")
        + &image("img", &[])
        + &server("s", "f2", "img", "")
        + &server("s", "f4", "img", "");
    let (report, store) = run(&yaml);
    assert_eq!(report.summary.rejected, 0);
    assert_eq!(scheduled(&store, "s"), "Scheduled");
    // 4 VCPU fit only because the old 2 are released, not added.
    assert_eq!(store.index().used("cn1", "VCPU"), 4);
    assert_eq!(
        server_status(&store, "s")["allocation"][0]["resources"]["VCPU"],
        4
    );
}

#[test]
fn image_traits_join_the_flavor_request() {
    let yaml = node("cn1", 8, &[])
        + &node("cn2", 8, &["HW_CPU_X86_AVX2"])
        + &flavor("f1", 1, "")
        + &image("avx", &["HW_CPU_X86_AVX2"])
        + &server("s", "f1", "avx", "");
    let (_, store) = run(&yaml);
    assert_eq!(server_status(&store, "s")["host"], "cn2");
}

const PROFILE: &str = "apiVersion: kubeplace.io/v1alpha1\nkind: ServiceProfile\nmetadata:\n  name: lb\nspec:\n  driver: z23\n  allowedMetaKeys: [whitelist]\n  metadata: |\n    protect: true\n    whitelist: {{ meta.whitelist | split(\",\") | map(\"trim\") | list | tojson }}\n---\n";

#[test]
fn flavor_metadata_keys_are_checked_and_rendered() {
    let base = node("cn1", 8, &[])
        + PROFILE
        + &flavor("lb", 1, "  serviceProfiles: [lb]\n")
        + &image("img", &[]);
    let (report, store) = run(&(base.clone()
        + &server(
            "ok",
            "lb",
            "img",
            "  flavorMeta:\n    whitelist: \"10.0.0.1, 10.0.0.2\"\n",
        )));
    assert_eq!(report.summary.rejected, 0);
    let status = server_status(&store, "ok");
    assert_eq!(
        status["renderedMetadata"],
        serde_json::json!({"protect": true, "whitelist": ["10.0.0.1", "10.0.0.2"]})
    );
    let (report, _) =
        run(&(base + &server("bad", "lb", "img", "  flavorMeta:\n    blacklist: x\n")));
    let verdict = &report.items.last().unwrap().admission;
    assert!(
        verdict
            .message
            .contains("spec.flavorMeta[\"blacklist\"] is not allowed; allowed: whitelist"),
        "{}",
        verdict.message
    );
}

#[test]
fn a_failed_render_is_a_condition_not_a_crash() {
    let profile = PROFILE.replace("meta.whitelist | split", "meta.whitelist.nope | split");
    let yaml = node("cn1", 8, &[])
        + &profile
        + &flavor("lb", 1, "  serviceProfiles: [lb]\n")
        + &image("img", &[])
        + &server("s", "lb", "img", "  flavorMeta:\n    whitelist: a\n");
    let (report, store) = run(&yaml);
    assert_eq!(report.summary.rejected, 0);
    let status = server_status(&store, "s");
    assert_eq!(status["conditions"][1]["reason"], "RenderFailed");
    assert_eq!(status["conditions"][0]["reason"], "Scheduled");
}

#[test]
fn a_template_that_does_not_parse_is_rejected_with_its_line() {
    let bad = PROFILE.replace("protect: true", "protect: {% if %}");
    let (report, _) = run(&bad);
    let verdict = &report.items[0].admission;
    assert!(!verdict.allowed);
    assert!(
        verdict
            .message
            .contains("spec.metadata is not a valid template: line 1"),
        "{}",
        verdict.message
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn capacity_is_never_oversubscribed(
        nodes in proptest::collection::vec(1i64..16, 1..5),
        flavors in proptest::collection::vec(1i64..8, 1..4),
        servers in proptest::collection::vec((0usize..4, any::<bool>()), 1..30),
    ) {
        let mut yaml = String::new();
        for (i, vcpu) in nodes.iter().enumerate() {
            yaml += &node(&format!("cn{i}"), *vcpu, if i % 2 == 0 { &["HW_CPU_X86_AVX2"] } else { &[] });
        }
        for (i, v) in flavors.iter().enumerate() {
            yaml += &flavor(&format!("f{i}"), *v, "");
        }
        yaml += &image("plain", &[]);
        yaml += &image("avx", &["HW_CPU_X86_AVX2"]);
        for (i, (f, avx)) in servers.iter().enumerate() {
            yaml += &server(&format!("s{i}"), &format!("f{}", f % flavors.len()), if *avx { "avx" } else { "plain" }, "");
        }
        let (report, store) = run(&yaml);
        prop_assert_eq!(report.summary.rejected, 0);
        let mut placed_vcpus = 0;
        for (i, _) in nodes.iter().enumerate() {
            let name = format!("cn{i}");
            let used = store.index().used(&name, "VCPU");
            let capacity = store.index().inventory(&name, "VCPU").unwrap().capacity();
            prop_assert!(used <= capacity, "{} uses {} of {}", name, used, capacity);
            placed_vcpus += used;
        }
        let mut expected = 0;
        for (i, (f, avx)) in servers.iter().enumerate() {
            let status = server_status(&store, &format!("s{i}"));
            let reason = status["conditions"][0]["reason"].as_str().unwrap();
            prop_assert!(reason == "Scheduled" || reason == "NoValidHost", "{}", reason);
            if reason == "Scheduled" {
                expected += flavors[f % flavors.len()];
                if *avx {
                    let host = status["host"].as_str().unwrap();
                    let idx: usize = host[2..].parse().unwrap();
                    prop_assert!(idx % 2 == 0, "an AVX2 image landed on {}", host);
                }
            }
        }
        prop_assert_eq!(placed_vcpus, expected);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 30, ..ProptestConfig::default() })]

    /// Headroom is what creating servers one by one then places: `fits` of them are
    /// Scheduled and the next waits with NoValidHost; after draining a node likewise on
    /// the nodes left (servers of one flavor fill nodes alike however they are arranged,
    /// so the drained store compares with one built without the node).
    #[test]
    fn headroom_is_the_number_of_servers_then_placed(
        nodes in proptest::collection::vec(1i64..12, 1..4),
        vcpus in 1i64..5,
        already in 0usize..4,
        drain_first in any::<bool>(),
    ) {
        let mut cloud = String::new();
        for (i, vcpu) in nodes.iter().enumerate() {
            cloud += &node(&format!("cn{i}"), *vcpu, &[]);
        }
        cloud += &flavor("f", vcpus, "");
        cloud += &image("img", &[]);
        for i in 0..already {
            cloud += &server(&format!("old{i}"), "f", "img", "");
        }
        let (_, store) = run(&cloud);
        let without: Vec<String> = if drain_first && nodes.len() > 1 {
            vec!["cn0".to_string()]
        } else {
            Vec::new()
        };
        let h = scheduler::headroom(&store, &Weighers::default(), "f", &without, 100).unwrap();
        prop_assert!(!h.capped);
        // Undrained, the Flavor's status (counted by `kubeplace apply`) says the same.
        if without.is_empty() {
            let Some(Object::Flavor(f)) = store.get_cluster(Kind::Flavor, "f") else {
                panic!("flavor f is stored");
            };
            let shown = f.status.as_ref().and_then(|s| s.headroom.clone());
            prop_assert_eq!(shown.map(|s| s.servers), Some(h.fits as i64));
        }
        // The same cloud, drained by hand, with `fits + 1` more servers created one by one.
        let mut yaml = String::new();
        for (i, vcpu) in nodes.iter().enumerate() {
            if !without.contains(&format!("cn{i}")) {
                yaml += &node(&format!("cn{i}"), *vcpu, &[]);
            }
        }
        yaml += &flavor("f", vcpus, "");
        yaml += &image("img", &[]);
        for i in 0..already {
            yaml += &server(&format!("old{i}"), "f", "img", "");
        }
        for i in 0..=h.fits {
            yaml += &server(&format!("new{i:03}"), "f", "img", "");
        }
        let (_, after) = run(&yaml);
        let placed = (0..=h.fits)
            .filter(|i| scheduled(&after, &format!("new{i:03}")) == "Scheduled")
            .count();
        prop_assert_eq!(placed, h.fits, "{:?}", h);
        prop_assert_eq!(scheduled(&after, &format!("new{:03}", h.fits)), "NoValidHost");
    }
}

/// A run of providers in a file is packed for the search once, after the run; a server
/// after it sees every provider before it, also those after an earlier server, and a child
/// that joined a tree after servers were placed on it.
#[test]
fn servers_between_runs_of_providers_see_every_provider_before_them() {
    let child = "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn1-numa1\nspec:\n  parent: cn1\n  inventories:\n    VCPU:\n      total: 2\n---\n";
    let yaml = node("cn1", 2, &[])
        + &flavor("f2", 2, "")
        + &image("img", &[])
        + &server("s0", "f2", "img", "")
        + &node("cn2", 2, &[])
        + &server("s1", "f2", "img", "")
        + &node("cn3", 2, &[])
        + &node("cn4", 2, &[])
        + &server("s2", "f2", "img", "")
        + &server("s3", "f2", "img", "")
        + &server("s4", "f2", "img", "")
        + child
        + &server("s5", "f2", "img", "");
    let (report, store) = run(&yaml);
    assert_eq!(report.summary.rejected, 0);
    let host = |name: &str| server_status(&store, name)["host"].clone();
    assert_eq!(host("s0"), "cn1");
    assert_eq!(host("s1"), "cn2");
    let mut last_two = [host("s2"), host("s3")].map(|h| h.as_str().unwrap().to_string());
    last_two.sort();
    assert_eq!(last_two, ["cn3", "cn4"]);
    assert_eq!(scheduled(&store, "s4"), "NoValidHost");
    assert_eq!(scheduled(&store, "s5"), "Scheduled");
    assert_eq!(host("s5"), "cn1");
    assert_eq!(store.index().used("cn1-numa1", "VCPU"), 2);
}

/// Reconciling stops once no claim's verdict moved: another round over what `kubeplace
/// apply` leaves changes no status, for the example cloud (every kind, its claims, servers
/// placed) and for a cloud where a server waits for room.
#[test]
fn apply_leaves_every_status_at_its_fixed_point() {
    let docs =
        kubeplace_api::manifest::read_paths(&["examples/cloud".into()], &mut std::io::empty())
            .expect("the example cloud reads");
    let (report, mut store) = apply_documents(docs, Validate::Strict);
    assert_eq!(report.summary.rejected, 0);
    assert_eq!(reconcile_all(&mut store, &HeadroomFigures::default(), 5), 0);

    let mut yaml = node("cn1", 2, &[]) + &flavor("f2", 2, "") + &image("img", &[]);
    for i in 0..3 {
        yaml += &server(&format!("s{i}"), "f2", "img", "");
    }
    let (_, mut store) = run(&yaml);
    assert_eq!(scheduled(&store, "s2"), "NoValidHost");
    assert_eq!(reconcile_all(&mut store, &HeadroomFigures::default(), 5), 0);
}
