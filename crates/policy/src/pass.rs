//! What a reconcile pass decides before it plans statuses, in the order it decides it:
//! deleted servers give their claims back, claims that reached the store without passing
//! admission are settled, and waiting servers are placed.

use kubeplace_api::Allocation;

use crate::claims;
use crate::scheduling::release::{self, Releases};
use crate::scheduling::{any_placeable_server, schedule_pending};
use crate::store::Store;
use kubeplace_core::placement::weighers::Weighers;

/// A pass's decisions.
#[derive(Debug, Default)]
pub struct Decisions {
    /// Finalizers to add and remove, and the claims of deleted servers to delete.
    pub releases: Releases,
    /// Claims refused as they were settled, with why.
    pub refused: Vec<(String, String)>,
    /// Allocations chosen for waiting servers.
    pub placements: Vec<Allocation>,
}

impl Decisions {
    /// Whether a claim was refused: its providers' usages change, and every status that
    /// reads them may too.
    pub fn refused_any(&self) -> bool {
        !self.refused.is_empty()
    }
}

/// Decides, changing the store as each decision is made: a deleted server's claim stops
/// counting first, so that a waiting server can use its capacity in the same pass. Servers
/// are placed weighing candidates by `weighers`.
pub fn decide(store: &mut Store, weighers: &Weighers) -> Decisions {
    let releases = release::releases(store);
    release::forget_allocations(store, &releases);
    let refused = claims::settle(store);
    let placements = schedule_pending(store, weighers);
    Decisions {
        releases,
        refused,
        placements,
    }
}

/// [`decide`] without changing the store, when the decisions need no change to it: no
/// deleted server's claim to forget, no claim to settle, no waiting server that fits
/// somewhere (only finalizers to add or remove, and servers that fit nowhere yet). `None`
/// when they do: the caller then decides over a store of its own.
pub fn decide_in_place(store: &Store, weighers: &Weighers) -> Option<Decisions> {
    let releases = release::releases(store);
    if !releases.delete_allocations.is_empty()
        || claims::any_undecided(store)
        || any_placeable_server(store, weighers)
    {
        return None;
    }
    Some(Decisions {
        releases,
        ..Decisions::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::HeadroomFigures;
    use crate::status::reconcile_all;
    use crate::store::{Change, ObjectKey};
    use kubeplace_api::{Kind, Object};

    /// The example cloud as the operator's watches put it in the store: no status yet.
    fn cloud() -> Store {
        // The workspace root holds examples/.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cloud");
        let mut store = Store::default();
        store.apply_changes(
            kubeplace_api::manifest::read_paths(&[dir], &mut std::io::empty())
                .unwrap()
                .into_iter()
                .filter_map(|d| d.object()?.ok())
                .map(|o| Change::Put(Box::new(o))),
        );
        store
    }

    /// Decides a pass and writes every status, as the operator's writes come back through
    /// its watches.
    fn settle_down(store: &mut Store) -> Decisions {
        let decisions = decide(store, &Weighers::default());
        reconcile_all(store, &HeadroomFigures::default(), 10);
        decisions
    }

    /// The example cloud settled: every verdict written, every server that fits placed.
    fn settled_cloud() -> Store {
        let mut store = cloud();
        settle_down(&mut store);
        store
    }

    /// The servers waiting for a host.
    fn waiting(store: &Store) -> Vec<String> {
        store
            .list(Kind::Server)
            .filter(|o| match o {
                Object::Server(s) => crate::scheduling::place::is_waiting(store, s),
                _ => false,
            })
            .map(|o| o.name().to_string())
            .collect()
    }

    fn server(store: &Store, namespace: &str, name: &str) -> kubeplace_api::Server {
        match store.get(&ObjectKey {
            kind: Kind::Server,
            namespace: namespace.into(),
            name: name.into(),
        }) {
            Some(Object::Server(s)) => s.clone(),
            other => panic!("no server {namespace}/{name}: {other:?}"),
        }
    }

    #[test]
    fn a_settled_cloud_is_decided_in_place_as_over_a_copy() {
        let mut store = cloud();
        // Claims without a verdict and servers without a host: a copy is needed.
        assert!(decide_in_place(&store, &Weighers::default()).is_none());
        let first = decide(&mut store, &Weighers::default());
        assert!(
            !first.placements.is_empty(),
            "the example's servers are placed"
        );
        let store = settled_cloud();
        // Once every verdict is written and every server placed, nothing changes the store.
        // The example's servers that fit nowhere still wait, and trying them again changes
        // nothing.
        assert_eq!(waiting(&store), vec!["batch-1", "licensed-1"]);
        let Some(in_place) = decide_in_place(&store, &Weighers::default()) else {
            panic!(
                "still something to decide: undecided claims {}, placeable servers {}",
                claims::any_undecided(&store),
                any_placeable_server(&store, &Weighers::default())
            );
        };
        let revision = store.revision();
        let mut copy = store.clone();
        let over_copy = decide(&mut copy, &Weighers::default());
        assert_eq!(
            copy.revision(),
            revision,
            "deciding over a copy changed nothing either"
        );
        assert!(in_place.placements.is_empty() && over_copy.placements.is_empty());
        assert!(in_place.refused.is_empty() && over_copy.refused.is_empty());
        assert_eq!(
            format!("{:?}", in_place.releases),
            format!("{:?}", over_copy.releases)
        );
    }

    #[test]
    fn a_new_server_or_a_deleted_one_needs_deciding_over_a_copy() {
        let mut store = settled_cloud();
        assert!(decide_in_place(&store, &Weighers::default()).is_some());

        // A new server waits for a host.
        let mut new = server(&store, "shop", "web-2");
        new.metadata.name = Some("web-9".into());
        new.metadata.uid = None;
        new.status = None;
        store.put(Object::Server(new));
        assert!(waiting(&store).contains(&"web-9".to_string()));
        assert!(any_placeable_server(&store, &Weighers::default()));
        assert!(decide_in_place(&store, &Weighers::default()).is_none());
        let placed = settle_down(&mut store);
        assert_eq!(
            placed
                .placements
                .iter()
                .map(|a| a.metadata.name.clone().unwrap_or_default())
                .collect::<Vec<_>>(),
            vec!["server.shop.web-9".to_string()]
        );
        assert!(decide_in_place(&store, &Weighers::default()).is_some());

        // A server being deleted gives its claim back.
        let mut going = server(&store, "shop", "web-9");
        going.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
        store.put(Object::Server(going));
        assert!(decide_in_place(&store, &Weighers::default()).is_none());
        let released = decide(&mut store, &Weighers::default());
        assert_eq!(
            released.releases.delete_allocations,
            vec!["server.shop.web-9".to_string()]
        );
    }

    #[test]
    fn a_claim_without_a_verdict_needs_deciding_over_a_copy() {
        let mut store = settled_cloud();
        assert!(decide_in_place(&store, &Weighers::default()).is_some());
        let key = store
            .keys()
            .find(|k| k.kind == Kind::Allocation)
            .cloned()
            .expect("the example has claims");
        let Some(Object::Allocation(mut claim)) = store.get(&key).cloned() else {
            unreachable!()
        };
        // A new generation of the claim, not decided yet.
        claim.metadata.generation = claim.metadata.generation.map(|g| g + 1);
        store.put(Object::Allocation(claim));
        assert!(claims::any_undecided(&store));
        assert!(decide_in_place(&store, &Weighers::default()).is_none());
        settle_down(&mut store);
        assert!(!claims::any_undecided(&store));
    }
}
