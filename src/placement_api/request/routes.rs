//! What a request's path names: its segments read as the router reads them, and the route
//! they name. Everything that classifies a request by its path (the router, the search
//! limits, where a request is answered, the policy table, version discovery) reads it here,
//! so that no spelling the router accepts is classified otherwise.

use http::Method;

/// One route: the methods served on a path, each from a microversion.
pub(crate) type Methods<'a> = &'a [(Method, u16)];

/// A path's segments, without empty ones (`//` and a trailing `/` name nothing): how the
/// router reads every path, and so how everything that classifies a request must.
pub(crate) fn segments(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

/// What a request's path names, read as the router reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route<'p> {
    /// `/`: version discovery.
    Root,
    Providers,
    Provider(&'p str),
    Inventories(&'p str),
    Inventory(&'p str, &'p str),
    ProviderTraits(&'p str),
    ProviderAggregates(&'p str),
    ProviderUsages(&'p str),
    ProviderAllocations(&'p str),
    Traits,
    Trait(&'p str),
    Classes,
    Class(&'p str),
    Consumer(&'p str),
    Explain,
    Headroom,
    Quotas,
    Capacity,
    Candidates,
    Allocations,
    Usages,
    Reshaper,
}

impl<'p> Route<'p> {
    /// The route `path` names, if any.
    pub(crate) fn of(path: &'p str) -> Option<Route<'p>> {
        use Route as R;
        Some(match segments(path).as_slice() {
            [] => R::Root,
            ["resource_providers"] => R::Providers,
            ["resource_providers", uuid] => R::Provider(uuid),
            ["resource_providers", uuid, "inventories"] => R::Inventories(uuid),
            ["resource_providers", uuid, "inventories", class] => R::Inventory(uuid, class),
            ["resource_providers", uuid, "traits"] => R::ProviderTraits(uuid),
            ["resource_providers", uuid, "aggregates"] => R::ProviderAggregates(uuid),
            ["resource_providers", uuid, "usages"] => R::ProviderUsages(uuid),
            ["resource_providers", uuid, "allocations"] => R::ProviderAllocations(uuid),
            ["traits"] => R::Traits,
            ["traits", name] => R::Trait(name),
            ["resource_classes"] => R::Classes,
            ["resource_classes", name] => R::Class(name),
            ["allocations", consumer] => R::Consumer(consumer),
            ["kubeplace", "explain"] => R::Explain,
            ["kubeplace", "headroom"] => R::Headroom,
            ["kubeplace", "quotas"] => R::Quotas,
            ["kubeplace", "capacity"] => R::Capacity,
            ["allocation_candidates"] => R::Candidates,
            ["allocations"] => R::Allocations,
            ["usages"] => R::Usages,
            ["reshaper"] => R::Reshaper,
            _ => return None,
        })
    }

    /// The route's path template, as the metrics label requests with it.
    pub(crate) fn template(&self) -> &'static str {
        use Route as R;
        match self {
            R::Root => "/",
            R::Providers => "/resource_providers",
            R::Provider(_) => "/resource_providers/{uuid}",
            R::Inventories(_) => "/resource_providers/{uuid}/inventories",
            R::Inventory(..) => "/resource_providers/{uuid}/inventories/{resource_class}",
            R::ProviderTraits(_) => "/resource_providers/{uuid}/traits",
            R::ProviderAggregates(_) => "/resource_providers/{uuid}/aggregates",
            R::ProviderUsages(_) => "/resource_providers/{uuid}/usages",
            R::ProviderAllocations(_) => "/resource_providers/{uuid}/allocations",
            R::Traits => "/traits",
            R::Trait(_) => "/traits/{name}",
            R::Classes => "/resource_classes",
            R::Class(_) => "/resource_classes/{name}",
            R::Consumer(_) => "/allocations/{consumer_uuid}",
            R::Explain => "/kubeplace/explain",
            R::Headroom => "/kubeplace/headroom",
            R::Quotas => "/kubeplace/quotas",
            R::Capacity => "/kubeplace/capacity",
            R::Candidates => "/allocation_candidates",
            R::Allocations => "/allocations",
            R::Usages => "/usages",
            R::Reshaper => "/reshaper",
        }
    }

    /// The media type a GET here answers with.
    pub(crate) fn media(&self) -> (&'static str, &'static str) {
        match self {
            Route::Capacity => ("text", "html"),
            _ => ("application", "json"),
        }
    }

    /// Whether a request of `method` here is a search, bounded by the API's search limits.
    pub(crate) fn is_search(&self, method: &Method) -> bool {
        method == Method::GET
            && matches!(self, Route::Candidates | Route::Explain | Route::Headroom)
    }

    /// The methods served here, each from its microversion.
    pub(crate) fn methods(&self) -> Methods<'static> {
        use Method as M;
        use Route as R;
        match self {
            R::Root | R::ProviderUsages(_) | R::ProviderAllocations(_) => &[(M::GET, 0)],
            R::Explain | R::Headroom | R::Quotas | R::Capacity => &[(M::GET, 0)],
            R::Providers => &[(M::GET, 0), (M::POST, 0)],
            R::Provider(_) | R::Inventory(..) | R::Consumer(_) => {
                &[(M::GET, 0), (M::PUT, 0), (M::DELETE, 0)]
            }
            R::Inventories(_) => &[(M::GET, 0), (M::PUT, 0), (M::POST, 0), (M::DELETE, 5)],
            R::ProviderTraits(_) => &[(M::GET, 6), (M::PUT, 6), (M::DELETE, 6)],
            R::ProviderAggregates(_) => &[(M::GET, 1), (M::PUT, 1)],
            R::Traits => &[(M::GET, 6)],
            R::Trait(_) => &[(M::GET, 6), (M::PUT, 6), (M::DELETE, 6)],
            R::Classes => &[(M::GET, 2), (M::POST, 2)],
            R::Class(_) => &[(M::GET, 2), (M::PUT, 2), (M::DELETE, 2)],
            R::Candidates => &[(M::GET, 10)],
            R::Allocations => &[(M::POST, 13)],
            R::Usages => &[(M::GET, 9)],
            R::Reshaper => &[(M::POST, 30)],
        }
    }

    /// Whether this route's writes carry a JSON body at microversion 1.`minor`: not
    /// creating a trait, nor a resource class from 1.7.
    pub(crate) fn writes_with_body(&self, minor: u16) -> bool {
        match self {
            Route::Trait(_) => false,
            Route::Class(_) => minor < 7,
            _ => true,
        }
    }
}
