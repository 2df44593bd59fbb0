//! Read-through on a cache miss. Objects sent in one `kubectl apply` reach the API server one
//! after the other, and the webhook's store follows it through watches, a little behind: a
//! Server can be reviewed before its Flavor, created a moment earlier, is in the store. When
//! admission denies an object that names objects missing from the store, the webhook asks the
//! API server whether they exist; for those that do, it waits until the watches deliver them
//! and reviews again. It never writes them into the store itself: only the watches do, so the
//! store keeps the API server's order of changes (an object deleted meanwhile stays deleted).

use std::time::Duration;

use kube::Client;
use kube::core::DynamicObject;

use kubeplace_api::{Kind, Object};
use kubeplace_policy::store::Store;

/// How often the store is looked at while waiting for the watches.
pub(crate) const POLL: Duration = Duration::from_millis(25);

/// The objects that `object` names and admission looks up, which the store lacks: a
/// Server's Flavor, Image and ServiceProfile (its own or its flavor's), an Allocation's
/// providers.
pub(crate) fn missing_references(object: &Object, store: &Store) -> Vec<(Kind, String)> {
    let mut named: Vec<(Kind, String)> = Vec::new();
    match object {
        Object::Server(server) => {
            named.push((Kind::Flavor, server.spec.flavor.clone()));
            named.push((Kind::Image, server.spec.image.clone()));
            if let Some(p) = &server.spec.service_profile {
                named.push((Kind::ServiceProfile, p.clone()));
            }
            if let Some(Object::Flavor(f)) = store.get_cluster(Kind::Flavor, &server.spec.flavor) {
                named.extend(
                    f.spec
                        .service_profiles
                        .iter()
                        .map(|p| (Kind::ServiceProfile, p.clone())),
                );
            }
        }
        Object::Allocation(allocation) => named.extend(
            allocation
                .spec
                .allocations
                .iter()
                .map(|a| (Kind::ResourceProvider, a.provider.clone())),
        ),
        _ => {}
    }
    named.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    named.dedup();
    named.retain(|(kind, name)| !name.is_empty() && store.get_cluster(*kind, name).is_none());
    named
}

/// Which of `missing` the API server has now (a read of each; an error counts as absent, so
/// the denial stands as admission gave it).
pub(crate) async fn existing(client: &Client, missing: &[(Kind, String)]) -> Vec<(Kind, String)> {
    let mut found = Vec::new();
    for (kind, name) in missing {
        let api: kube::Api<DynamicObject> =
            kube::Api::all_with(client.clone(), &kind.api_resource());
        if let Ok(Some(_)) = api.get_opt(name).await {
            found.push((*kind, name.clone()));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeplace_api::manifest::parse_stream;

    fn store(yaml: &str) -> Store {
        let mut store = Store::default();
        for doc in parse_stream("t.yaml", yaml).unwrap() {
            store.put(doc.object().unwrap().unwrap());
        }
        store
    }

    fn object(yaml: &str) -> Object {
        parse_stream("t.yaml", yaml).unwrap()[0]
            .clone()
            .object()
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_servers_and_an_allocations_references_missing_from_the_store() {
        let server = object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata: {name: s, namespace: ns}\nspec: {flavor: lb, image: img}\n",
        );
        assert_eq!(
            missing_references(&server, &Store::default()),
            [(Kind::Flavor, "lb".into()), (Kind::Image, "img".into())]
        );
        // Once the flavor is there, its service profile is looked up too.
        let with_flavor = store(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: lb}\nspec: {vcpus: 1, memoryMb: 64, serviceProfiles: [ddos]}\n",
        );
        assert_eq!(
            missing_references(&server, &with_flavor),
            [
                (Kind::Image, "img".into()),
                (Kind::ServiceProfile, "ddos".into())
            ]
        );
        let allocation = object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {name: a}\nspec:\n  consumer: 5c8ed9b0-7a1f-4a3e-9a59-3f4c1f6e2b11\n  allocations:\n  - {provider: cn1, resources: {VCPU: 1}}\n  - {provider: cn1, resources: {MEMORY_MB: 1}}\n",
        );
        assert_eq!(
            missing_references(&allocation, &Store::default()),
            [(Kind::ResourceProvider, "cn1".into())]
        );
        let flavor = object(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: f}\nspec: {vcpus: 1, memoryMb: 64}\n",
        );
        assert_eq!(missing_references(&flavor, &Store::default()), []);
    }
}
