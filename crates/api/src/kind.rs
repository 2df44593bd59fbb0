//! The kinds kubeplace serves, as a type: what a manifest's `kind` names, what the store keys
//! objects by, and how the API server serves each one (plural, scope).

use std::cmp::Ordering;
use std::fmt;

use kube::Resource;
use kube::core::ApiResource;

use crate::{
    Aggregate, Allocation, DefaultProjectQuota, ExtraSpecDefinition, Flavor, Image, PlacementWrite,
    ProjectQuota, ProviderConfig, ResourceProvider, Server, ServerGroup, ServiceProfile,
};

/// One of kubeplace's kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    ResourceProvider,
    Allocation,
    ProviderConfig,
    ExtraSpecDefinition,
    Flavor,
    Image,
    ServiceProfile,
    Server,
    Aggregate,
    ServerGroup,
    PlacementWrite,
    ProjectQuota,
    DefaultProjectQuota,
}

impl Kind {
    /// Every kind, in the order `kubeplace crds` prints them.
    pub const ALL: [Kind; 13] = [
        Kind::ResourceProvider,
        Kind::Allocation,
        Kind::ProviderConfig,
        Kind::ExtraSpecDefinition,
        Kind::Flavor,
        Kind::Image,
        Kind::ServiceProfile,
        Kind::Server,
        Kind::Aggregate,
        Kind::ServerGroup,
        Kind::PlacementWrite,
        Kind::ProjectQuota,
        Kind::DefaultProjectQuota,
    ];

    /// The kind as written in manifests (`Flavor`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ResourceProvider => "ResourceProvider",
            Kind::Allocation => "Allocation",
            Kind::ProviderConfig => "ProviderConfig",
            Kind::ExtraSpecDefinition => "ExtraSpecDefinition",
            Kind::Flavor => "Flavor",
            Kind::Image => "Image",
            Kind::ServiceProfile => "ServiceProfile",
            Kind::Server => "Server",
            Kind::Aggregate => "Aggregate",
            Kind::ServerGroup => "ServerGroup",
            Kind::PlacementWrite => "PlacementWrite",
            Kind::ProjectQuota => "ProjectQuota",
            Kind::DefaultProjectQuota => "DefaultProjectQuota",
        }
    }

    /// The kind a manifest names, if it is kubeplace's.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The kind served under a plural (`flavors`), if it is kubeplace's.
    pub fn from_plural(plural: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.plural() == plural)
    }

    /// The plural the API server serves the kind under (`flavors`).
    pub fn plural(self) -> &'static str {
        match self {
            Kind::ResourceProvider => "resourceproviders",
            Kind::Allocation => "allocations",
            Kind::ProviderConfig => "providerconfigs",
            Kind::ExtraSpecDefinition => "extraspecdefinitions",
            Kind::Flavor => "flavors",
            Kind::Image => "images",
            Kind::ServiceProfile => "serviceprofiles",
            Kind::Server => "servers",
            Kind::Aggregate => "aggregates",
            Kind::ServerGroup => "servergroups",
            Kind::PlacementWrite => "placementwrites",
            Kind::ProjectQuota => "projectquotas",
            Kind::DefaultProjectQuota => "defaultprojectquotas",
        }
    }

    /// Whether objects of the kind live in a namespace (Servers, ServerGroups and
    /// ProjectQuotas do).
    pub fn is_namespaced(self) -> bool {
        matches!(self, Kind::Server | Kind::ServerGroup | Kind::ProjectQuota)
    }

    /// The kind's API resource, for dynamic clients and watches.
    pub fn api_resource(self) -> ApiResource {
        match self {
            Kind::ResourceProvider => ApiResource::erase::<ResourceProvider>(&()),
            Kind::Allocation => ApiResource::erase::<Allocation>(&()),
            Kind::ProviderConfig => ApiResource::erase::<ProviderConfig>(&()),
            Kind::ExtraSpecDefinition => ApiResource::erase::<ExtraSpecDefinition>(&()),
            Kind::Flavor => ApiResource::erase::<Flavor>(&()),
            Kind::Image => ApiResource::erase::<Image>(&()),
            Kind::ServiceProfile => ApiResource::erase::<ServiceProfile>(&()),
            Kind::Server => ApiResource::erase::<Server>(&()),
            Kind::Aggregate => ApiResource::erase::<Aggregate>(&()),
            Kind::ServerGroup => ApiResource::erase::<ServerGroup>(&()),
            Kind::PlacementWrite => ApiResource::erase::<PlacementWrite>(&()),
            Kind::ProjectQuota => ApiResource::erase::<ProjectQuota>(&()),
            Kind::DefaultProjectQuota => ApiResource::erase::<DefaultProjectQuota>(&()),
        }
    }

    /// The kind of a type.
    pub fn of<K: Resource<DynamicType = ()>>() -> Option<Kind> {
        Kind::from_name(&K::kind(&()))
    }
}

/// Kinds sort by name, as the store lists objects.
impl Ord for Kind {
    fn cmp(&self, other: &Kind) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for Kind {
    fn partial_cmp(&self, other: &Kind) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_plurals_and_resources_agree() {
        for kind in Kind::ALL {
            let resource = kind.api_resource();
            assert_eq!(resource.kind, kind.as_str());
            assert_eq!(resource.plural, kind.plural());
            assert_eq!(resource.api_version, crate::API_VERSION);
            assert_eq!(Kind::from_name(kind.as_str()), Some(kind));
            assert_eq!(Kind::from_plural(kind.plural()), Some(kind));
        }
        assert_eq!(Kind::from_plural("widgets"), None);
        assert_eq!(Kind::from_name("flavor"), None);
    }

    #[test]
    fn kinds_sort_by_name() {
        let mut kinds = Kind::ALL.to_vec();
        kinds.sort();
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }
}
