//! The writes that release a deleted server's allocation: the finalizer on every Server,
//! the Allocation deleted, then the finalizer removed. What to do is decided by
//! [`kubeplace_policy::scheduling::release::releases`]; this only talks to the API server.

use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tracing::{info, warn};

use kubeplace_api::ServerRef;
use kubeplace_api::{API_VERSION, Allocation, Server};
use kubeplace_policy::scheduling::release::{ALLOCATION_FINALIZER, Releases};

/// The field manager that owns kubeplace's finalizer on Servers (and only that).
pub(crate) const FINALIZER_MANAGER: &str = "kubeplace-finalizer";

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn ignore_not_found<T>(r: kube::Result<T>) -> kube::Result<()> {
    match r {
        // A server that is gone needs no finalizer, and has none left to remove.
        Err(e) if is_not_found(&e) => Ok(()),
        other => other.map(|_| ()),
    }
}

/// Adds the finalizer with server-side apply: the list this manager owns is just ours, and
/// every other finalizer stays, whoever set it.
async fn add_finalizer(client: &Client, who: &ServerRef) -> kube::Result<()> {
    let api: Api<Server> = Api::namespaced(client.clone(), &who.namespace);
    let body = json!({
        "apiVersion": API_VERSION,
        "kind": "Server",
        "metadata": {"name": who.name, "namespace": who.namespace, "finalizers": [ALLOCATION_FINALIZER]},
    });
    ignore_not_found(
        api.patch(
            &who.name,
            &PatchParams::apply(FINALIZER_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await,
    )
}

/// Removes the finalizer wherever it is in the list (a user may have written it in the
/// manifest too), guarded by a test so that a concurrent change of the list is not undone.
async fn remove_finalizer(client: &Client, who: &ServerRef) -> kube::Result<()> {
    let api: Api<Server> = Api::namespaced(client.clone(), &who.namespace);
    let Some(server) = api.get_opt(&who.name).await? else {
        return Ok(());
    };
    let finalizers = server.metadata.finalizers.unwrap_or_default();
    let Some(at) = finalizers.iter().position(|f| f == ALLOCATION_FINALIZER) else {
        return Ok(());
    };
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": format!("/metadata/finalizers/{at}"), "value": ALLOCATION_FINALIZER},
        {"op": "remove", "path": format!("/metadata/finalizers/{at}")},
    ]))
    .expect("a well-formed JSON patch");
    ignore_not_found(
        api.patch(
            &who.name,
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await,
    )
}

/// Carries out the releases. A failure is logged and left for the next pass, which sees
/// the same state and decides again.
pub async fn release(client: &Client, releases: &Releases) {
    for who in &releases.add_finalizer {
        if let Err(e) = add_finalizer(client, who).await {
            warn!(server = %who.name, namespace = %who.namespace, error = %e, "cannot add the allocation finalizer; will retry");
        }
    }
    let allocations: Api<Allocation> = Api::all(client.clone());
    let mut failed: Vec<&str> = Vec::new();
    for name in &releases.delete_allocations {
        match allocations.delete(name, &DeleteParams::default()).await {
            Ok(_) => info!(allocation = %name, "released a server's allocation"),
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                warn!(allocation = %name, error = %e, "cannot delete a server's allocation; will retry");
                failed.push(name);
            }
        }
    }
    for who in &releases.remove_finalizer {
        // The finalizer stays until the allocation is really gone.
        if failed.contains(&who.allocation_name().as_str()) {
            continue;
        }
        if let Err(e) = remove_finalizer(client, who).await {
            warn!(server = %who.name, namespace = %who.namespace, error = %e, "cannot remove the allocation finalizer; will retry");
        }
    }
}
