//! The kinds as the API server serves them: kind, plural and API resource.

use kube::core::ApiResource;

use crate::api::{
    Allocation, ExtraSpecDefinition, Flavor, Image, ProviderConfig, ResourceProvider, Server,
    ServiceProfile,
};

/// Every kubeplace kind's API resource, in the order of [`crate::api::KINDS`].
pub fn api_resources() -> Vec<ApiResource> {
    vec![
        ApiResource::erase::<ResourceProvider>(&()),
        ApiResource::erase::<Allocation>(&()),
        ApiResource::erase::<ProviderConfig>(&()),
        ApiResource::erase::<ExtraSpecDefinition>(&()),
        ApiResource::erase::<Flavor>(&()),
        ApiResource::erase::<Image>(&()),
        ApiResource::erase::<ServiceProfile>(&()),
        ApiResource::erase::<Server>(&()),
    ]
}

/// The API resource of a kind (`Flavor`), if it is kubeplace's.
pub fn by_kind(kind: &str) -> Option<ApiResource> {
    api_resources().into_iter().find(|r| r.kind == kind)
}

/// The API resource of a plural (`flavors`), if it is kubeplace's.
pub fn by_plural(plural: &str) -> Option<ApiResource> {
    api_resources().into_iter().find(|r| r.plural == plural)
}

/// The kind's name as a `&'static str` (what [`crate::store::ObjectKey`] holds).
pub fn static_kind(kind: &str) -> Option<&'static str> {
    crate::api::KINDS.iter().copied().find(|k| *k == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_follows_api_kinds() {
        let kinds: Vec<String> = api_resources().into_iter().map(|r| r.kind).collect();
        assert_eq!(kinds, crate::api::KINDS);
        assert_eq!(by_plural("flavors").unwrap().kind, "Flavor");
        assert_eq!(
            by_kind("ResourceProvider").unwrap().plural,
            "resourceproviders"
        );
        assert_eq!(by_plural("servers").unwrap().kind, "Server");
        assert_eq!(by_plural("widgets"), None);
        for r in api_resources() {
            assert_eq!(r.api_version, crate::api::API_VERSION);
        }
    }
}
