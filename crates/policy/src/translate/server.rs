//! Servers: the service profile a server uses.

use kubeplace_api::{Object, Server};

use crate::store::Store;
use kubeplace_api::Kind;

/// The service profile a server uses: the one it names, else the flavor's first enabled one.
pub fn chosen_profile(store: &Store, server: &Server) -> Option<String> {
    if let Some(p) = &server.spec.service_profile {
        return Some(p.clone());
    }
    let Some(Object::Flavor(f)) = store.get_cluster(Kind::Flavor, &server.spec.flavor) else {
        return None;
    };
    f.spec
        .service_profiles
        .iter()
        .find(|p| matches!(store.get_cluster(Kind::ServiceProfile, p), Some(Object::ServiceProfile(sp)) if sp.spec.enabled))
        .cloned()
}
