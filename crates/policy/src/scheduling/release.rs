//! Releasing a deleted server's allocation.
//!
//! A server's Allocation is cluster-scoped and the Server is namespaced, so an owner
//! reference cannot tie them together. Instead every Server carries the finalizer
//! [`ALLOCATION_FINALIZER`]: when the Server is deleted, the leader deletes its Allocation
//! and then removes the finalizer, so `kubectl delete server` returns once the capacity is
//! free again. Allocations that still name a server which no longer exists (the finalizer
//! was removed by hand, or the server was deleted while its allocation was being written)
//! are deleted too.

use crate::store::{ObjectKey, Store};
use kubeplace_api::Kind;
use kubeplace_api::{Object, Server, ServerRef, allocation_server};

/// The finalizer that holds a Server until its Allocation is deleted.
pub const ALLOCATION_FINALIZER: &str = "kubeplace.io/allocation";

/// What the leader does to keep servers and their allocations in step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Releases {
    /// Live servers that do not carry the finalizer yet.
    pub add_finalizer: Vec<ServerRef>,
    /// Allocations to delete: of servers being deleted, or of servers that are gone.
    pub delete_allocations: Vec<String>,
    /// Servers being deleted whose finalizer can go once their allocation is deleted.
    pub remove_finalizer: Vec<ServerRef>,
}

impl Releases {
    pub fn is_empty(&self) -> bool {
        self.add_finalizer.is_empty()
            && self.delete_allocations.is_empty()
            && self.remove_finalizer.is_empty()
    }
}

fn has_finalizer(server: &Server) -> bool {
    server
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == ALLOCATION_FINALIZER))
}

/// What to do now, from the store alone.
pub fn releases(store: &Store) -> Releases {
    let mut out = Releases::default();
    for object in store.list(Kind::Server) {
        let Object::Server(server) = object else {
            continue;
        };
        let who = ServerRef::of(server);
        if server.metadata.deletion_timestamp.is_none() {
            if !has_finalizer(server) {
                out.add_finalizer.push(who);
            }
            continue;
        }
        let allocation = who.allocation_name();
        if store.get_cluster(Kind::Allocation, &allocation).is_some() {
            out.delete_allocations.push(allocation);
        }
        if has_finalizer(server) {
            out.remove_finalizer.push(who);
        }
    }
    for object in store.list(Kind::Allocation) {
        let Object::Allocation(allocation) = object else {
            continue;
        };
        if let Some(server) = allocation_server(allocation)
            && store.get(&ObjectKey::server(&server)).is_none()
        {
            out.delete_allocations
                .push(allocation.metadata.name.clone().unwrap_or_default());
        }
    }
    out.add_finalizer.sort();
    out.remove_finalizer.sort();
    out.delete_allocations.sort();
    out.delete_allocations.dedup();
    out
}

/// Takes the allocations to delete out of a store, so that servers placed in the same pass
/// see the freed capacity.
pub fn forget_allocations(store: &mut Store, releases: &Releases) {
    for name in &releases.delete_allocations {
        store.delete(&ObjectKey::cluster(Kind::Allocation, name));
    }
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

    const CLOUD: &str = "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: cn1}\nspec:\n  inventories:\n    VCPU: {total: 8}\n---\n";

    fn server(name: &str, meta: &str) -> String {
        format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata:\n  name: {name}\n  namespace: ns\n{meta}spec: {{flavor: f, image: i}}\n---\n"
        )
    }

    fn allocation(server: &str) -> String {
        format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: server.ns.{server}\n  labels:\n    kubeplace.io/server-namespace: ns\n    kubeplace.io/server-name: {server}\nspec:\n  consumer: 6f3c1a52-1d8e-4c2b-9a57-0f1e2d3c4b5a\n  allocations:\n  - provider: cn1\n    resources: {{VCPU: 2}}\n---\n"
        )
    }

    fn who(name: &str) -> ServerRef {
        ServerRef {
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_live_server_gets_the_finalizer_once() {
        let s = store(
            &(CLOUD.to_string()
                + &server("a", "")
                + &server("b", "  finalizers: [kubeplace.io/allocation]\n")),
        );
        let r = releases(&s);
        assert_eq!(r.add_finalizer, vec![who("a")]);
        assert!(r.delete_allocations.is_empty() && r.remove_finalizer.is_empty());
    }

    #[test]
    fn a_deleted_server_releases_its_allocation_then_its_finalizer() {
        let deleting = "  deletionTimestamp: \"2026-11-22T00:00:00Z\"\n  finalizers: [kubeplace.io/allocation, example.com/other]\n";
        let s = store(
            &(CLOUD.to_string()
                + &server("a", deleting)
                + &allocation("a")
                + &server("b", "  finalizers: [kubeplace.io/allocation]\n")
                + &allocation("b")),
        );
        let r = releases(&s);
        assert_eq!(r.delete_allocations, vec!["server.ns.a".to_string()]);
        assert_eq!(r.remove_finalizer, vec![who("a")]);
        assert!(r.add_finalizer.is_empty());
        let mut after = s.clone();
        forget_allocations(&mut after, &r);
        assert!(after.get_cluster(Kind::Allocation, "server.ns.a").is_none());
        assert!(after.get_cluster(Kind::Allocation, "server.ns.b").is_some());
        assert_eq!(
            after.index().allocations("server.ns.a"),
            None,
            "the freed usage leaves the index"
        );
    }

    #[test]
    fn an_allocation_of_a_server_that_is_gone_is_deleted_and_others_stay() {
        let foreign = "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: server.ns.imposter\n  labels:\n    kubeplace.io/server-namespace: ns\n    kubeplace.io/server-name: someone-else\nspec:\n  consumer: 6f3c1a52-1d8e-4c2b-9a57-0f1e2d3c4b5b\n  allocations:\n  - provider: cn1\n    resources: {VCPU: 1}\n---\n";
        let plain = "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {name: batch-job}\nspec:\n  consumer: 6f3c1a52-1d8e-4c2b-9a57-0f1e2d3c4b5c\n  allocations:\n  - provider: cn1\n    resources: {VCPU: 1}\n---\n";
        let s = store(&(CLOUD.to_string() + &allocation("gone") + foreign + plain));
        let r = releases(&s);
        // Only an allocation named and labelled for a server counts as the server's.
        assert_eq!(r.delete_allocations, vec!["server.ns.gone".to_string()]);
    }

    #[test]
    fn a_deleted_server_without_an_allocation_only_loses_its_finalizer() {
        let s = store(
            &(CLOUD.to_string()
                + &server(
                    "a",
                    "  deletionTimestamp: \"2026-11-22T00:00:00Z\"\n  finalizers: [kubeplace.io/allocation]\n",
                )),
        );
        let r = releases(&s);
        assert!(r.delete_allocations.is_empty());
        assert_eq!(r.remove_finalizer, vec![who("a")]);
    }
}
