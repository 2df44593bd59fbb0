//! Servers: the service profile a server uses.

use kubeplace_api::{Flavor, Server};

/// The service profile a server uses: the one it names, else the first of its flavor's
/// profiles that `enabled` accepts.
pub(crate) fn chosen_profile(
    server: &Server,
    flavor: Option<&Flavor>,
    enabled: impl Fn(&str) -> bool,
) -> Option<String> {
    if let Some(p) = &server.spec.service_profile {
        return Some(p.clone());
    }
    flavor?
        .spec
        .service_profiles
        .iter()
        .find(|p| enabled(p))
        .cloned()
}
