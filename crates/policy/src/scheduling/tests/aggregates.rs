//! Nova's pre-filters on a small cloud whose answers can be read off: three compute nodes,
//! cn-a in zone az1, cn-b in zone az2 and kept for the namespace `shop`, cn-c in no zone
//! and kept for requests that require CUSTOM_GOLD.

use crate::scheduling::aggregates::*;
use crate::scheduling::plan::plan;
use crate::store::Store;
use kubeplace_api::manifest::parse_stream;
use kubeplace_api::{Kind, Object, Server};
use kubeplace_core::placement::weighers::Weighers;

const AZ1: &str = "a0000000-0000-4000-8000-000000000001";
const AZ2: &str = "a0000000-0000-4000-8000-000000000002";
const SHOP: &str = "a0000000-0000-4000-8000-000000000003";
const GOLD: &str = "a0000000-0000-4000-8000-000000000004";

fn node(name: &str, aggregates: &[&str], traits: &[&str]) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: {name}}}\nspec:\n  inventories:\n    VCPU: {{total: 8}}\n    MEMORY_MB: {{total: 8192}}\n  aggregates: [{}]\n  traits: [COMPUTE_NODE{}]\n---\n",
        aggregates.join(", "),
        traits.iter().map(|t| format!(", {t}")).collect::<String>()
    )
}

fn aggregate(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Aggregate\nmetadata: {{name: {name}}}\nspec: {spec}\n---\n"
    )
}

fn cloud(extra: &str) -> Store {
    let yaml = node("cn-a", &[AZ1], &[])
        + &node("cn-b", &[AZ2, SHOP], &[])
        + &node("cn-c", &[GOLD], &["CUSTOM_GOLD"])
        + &aggregate("az1", &format!("{{uuid: {AZ1}, availabilityZone: az1}}"))
        + &aggregate("az2", &format!("{{uuid: {AZ2}, availabilityZone: az2}}"))
        + &aggregate("shop-hosts", &format!("{{uuid: {SHOP}, tenants: [shop]}}"))
        + &aggregate(
            "gold-hosts",
            &format!("{{uuid: {GOLD}, requiredTraits: [CUSTOM_GOLD]}}"),
        )
        + "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: small}\nspec: {vcpus: 1, memoryMb: 512}\n---\n"
        + "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: gold}\nspec: {vcpus: 1, memoryMb: 512, extraSpecs: {'trait:CUSTOM_GOLD': required}}\n---\n"
        + "apiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata: {name: img}\nspec: {}\n---\n"
        + extra;
    let mut store = Store::default();
    for doc in parse_stream("t.yaml", &yaml).unwrap() {
        store.put(doc.object().unwrap().unwrap());
    }
    store
}

fn server(namespace: &str, flavor: &str, zone: Option<&str>) -> Server {
    let zone = zone
        .map(|z| format!("\n  availabilityZone: {z}"))
        .unwrap_or_default();
    let yaml = format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {{name: s, namespace: {namespace}}}\nspec:\n  flavor: {flavor}\n  image: img{zone}\n"
    );
    match parse_stream("s.yaml", &yaml)
        .unwrap()
        .remove(0)
        .object()
        .unwrap()
        .unwrap()
    {
        Object::Server(s) => s,
        other => panic!("not a server: {other:?}"),
    }
}

/// The hosts the server could land on: placed again and again with each chosen host
/// made disabled, until nothing is left.
fn hosts_for(mut store: Store, s: &Server) -> Result<Vec<String>, String> {
    let mut hosts = Vec::new();
    loop {
        match plan(&store, &Weighers::default(), s) {
            Ok(a) => {
                let host = a.spec.allocations[0].provider.clone();
                let Some(Object::ResourceProvider(mut rp)) =
                    store.get_cluster(Kind::ResourceProvider, &host).cloned()
                else {
                    panic!("no provider {host}");
                };
                rp.spec.traits.push(DISABLED_TRAIT.to_string());
                store.put(Object::ResourceProvider(rp));
                hosts.push(host);
            }
            Err(u) if hosts.is_empty() => return Err(format!("{}: {}", u.reason, u.message)),
            Err(u) => {
                assert_eq!(u.reason, "NoValidHost", "{}", u.message);
                hosts.sort();
                return Ok(hosts);
            }
        }
    }
}

#[test]
fn a_server_of_no_zone_and_no_kept_namespace_goes_only_where_nothing_keeps_it_out() {
    // cn-b is kept for shop, cn-c for gold requests.
    assert_eq!(
        hosts_for(cloud(""), &server("web", "small", None)),
        Ok(vec!["cn-a".into()])
    );
}

#[test]
fn the_kept_namespace_also_uses_its_hosts() {
    assert_eq!(
        hosts_for(cloud(""), &server("shop", "small", None)),
        Ok(vec!["cn-a".into(), "cn-b".into()])
    );
}

#[test]
fn a_zone_limits_the_hosts_to_its_aggregates() {
    assert_eq!(
        hosts_for(cloud(""), &server("shop", "small", Some("az2"))),
        Ok(vec!["cn-b".into()])
    );
    assert_eq!(
        hosts_for(cloud(""), &server("shop", "small", Some("az1"))),
        Ok(vec!["cn-a".into()])
    );
    // cn-b is in az2 but kept for shop: nothing in az2 for another namespace.
    let other = hosts_for(cloud(""), &server("web", "small", Some("az2"))).unwrap_err();
    assert!(other.starts_with("NoValidHost"), "{other}");
    assert!(
        other.contains(SHOP),
        "the loss names the aggregate: {other}"
    );
}

#[test]
fn the_default_zone_is_every_host_in_no_other_zone() {
    // cn-c is in no zone's aggregate: the default zone, and kept for gold requests.
    assert_eq!(
        hosts_for(cloud(""), &server("web", "gold", Some(DEFAULT_ZONE))),
        Ok(vec!["cn-c".into()])
    );
}

#[test]
fn an_unknown_zone_names_the_zones_there_are() {
    let e = hosts_for(cloud(""), &server("web", "small", Some("az9"))).unwrap_err();
    assert_eq!(
        e,
        "AvailabilityZoneNotFound: no Aggregate has availability zone \"az9\"; the zones are az1, az2, nova"
    );
}

#[test]
fn isolated_hosts_take_only_requests_with_their_traits() {
    // gold requires CUSTOM_GOLD: only cn-c has it, and cn-c takes it.
    assert_eq!(
        hosts_for(cloud(""), &server("web", "gold", None)),
        Ok(vec!["cn-c".into()])
    );
}

#[test]
fn a_confined_namespace_goes_only_to_its_aggregates() {
    let confined = aggregate(
        "shop-confined",
        &format!("{{uuid: {SHOP}, tenants: [shop], confineTenants: true}}"),
    );
    let mut store = cloud("");
    store.put(
        parse_stream("c.yaml", &confined)
            .unwrap()
            .remove(0)
            .object()
            .unwrap()
            .unwrap(),
    );
    // The same uuid as shop-hosts: both list shop, one confines it.
    assert_eq!(
        hosts_for(store, &server("shop", "small", None)),
        Ok(vec!["cn-b".into()])
    );
}

#[test]
fn a_disabled_host_is_left_alone_and_hosts_of_an_aggregate_are_listed() {
    let mut store = cloud("");
    let Some(Object::ResourceProvider(mut rp)) =
        store.get_cluster(Kind::ResourceProvider, "cn-a").cloned()
    else {
        panic!("cn-a");
    };
    rp.spec.traits.push(DISABLED_TRAIT.to_string());
    store.put(Object::ResourceProvider(rp));
    let e = hosts_for(store.clone(), &server("web", "small", None)).unwrap_err();
    assert!(e.contains(DISABLED_TRAIT), "{e}");
    assert_eq!(
        store.index().roots_in_aggregate(AZ2),
        vec!["cn-b".to_string()]
    );
    assert_eq!(
        store
            .index()
            .roots_in_aggregate("a0000000-0000-4000-8000-00000000000f"),
        Vec::<String>::new()
    );
}
