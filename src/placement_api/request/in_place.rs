//! Where a request is answered. Most of the API's work is short: one provider, one
//! consumer, the discovery document, a search that ends after a few thousand steps. Moving
//! such a request to a thread of the blocking pool and back costs two thread wake-ups, more
//! than the work itself, so it is answered on the runtime's thread that read it. Work that
//! grows with the cloud (long lists, writes, long searches) is answered on a thread apart,
//! so that it never holds up the connections the runtime serves. A candidates search is
//! first tried in place within [`IN_PLACE_STEPS`] steps; one that needs more is searched
//! again, apart, with its whole budget (which gives the same answer: see
//! `allocation_candidates_within`). A list of providers that names a provider, a tree or
//! an aggregate is made in place when it judges at most [`IN_PLACE_PROVIDERS`] providers,
//! known before the first is judged (`matching_providers_within`); a longer one, and any
//! other list, goes apart.

use std::sync::atomic::{AtomicBool, Ordering};

use http::{Method, StatusCode};

use super::wire::ApiError;

/// Steps of a candidates search tried in place. On the 10,000-tree cloud of
/// docs/performance.md (2 cores), searches with a limit of 50 or 100, or that few trees can
/// serve, end within them in 5–60 µs; an unlimited search of thousands of candidates
/// outgrows them after 75–160 µs, about 1 % of its time apart.
pub(crate) const IN_PLACE_STEPS: u64 = 2_000;

/// Providers a list may judge in place. A list answered apart waits for two thread
/// wake-ups, which on a loaded 2-core machine cost about as much as listing a thousand
/// providers; a list of up to this many is made where it was read (docs/performance.md).
pub(crate) const IN_PLACE_PROVIDERS: u64 = 2_048;

/// Candidates queries with a larger limit are searched apart at once: their answers are
/// long enough that the attempt in place would more often be lost than gained.
pub(crate) const IN_PLACE_LIMIT: u64 = 100;

/// Where a request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Where it was read: its work is bounded by one object or one small table.
    Here,
    /// Where it was read if its work ends within this many steps (a search's steps, or the
    /// providers a list judges); apart otherwise.
    HereWithin(u64),
    /// On a thread apart.
    Apart,
}

/// Where a request of `method` on `path` with `query` is answered.
pub(crate) fn place(method: &Method, path: &str, query: &str) -> Place {
    if method != Method::GET {
        return Place::Apart;
    }
    use super::routes::Route as R;
    match R::of(path) {
        Some(R::Root) => Place::Here,
        Some(R::Candidates) if limit_above(query, IN_PLACE_LIMIT) => Place::Apart,
        Some(R::Candidates) => Place::HereWithin(IN_PLACE_STEPS),
        Some(R::Providers) if narrowed_list(query) => Place::HereWithin(IN_PLACE_PROVIDERS),
        Some(
            R::Provider(_)
            | R::Inventories(_)
            | R::Inventory(..)
            | R::ProviderTraits(_)
            | R::ProviderAggregates(_)
            | R::ProviderUsages(_)
            | R::Consumer(_)
            | R::Classes
            | R::Class(_)
            | R::Trait(_),
        ) => Place::Here,
        // Lists of traits and a project's usages grow with the cloud; a provider's
        // allocations with its consumers; the extensions are searches.
        _ => Place::Apart,
    }
}

/// Whether a list of providers with `query` names a provider (by name or uuid), a tree or
/// aggregates to be a member of: such lists are most often short (a host's provider, its
/// tree, the members of an aggregate). Lists filtered by traits or resources alone most
/// often hold much of the cloud, and go apart at once rather than be tried in place first.
fn narrowed_list(query: &str) -> bool {
    query.split('&').any(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "name" | "in_tree" | "uuid" => true,
            "member_of" => !value.starts_with('!'),
            _ => false,
        }
    })
}

/// Whether `query` has a `limit` that is a number above `most` (one that is not a number
/// is refused by the search's parser, in place).
fn limit_above(query: &str, most: u64) -> bool {
    query
        .split('&')
        .filter_map(|pair| pair.strip_prefix("limit="))
        .any(|limit| limit.parse::<u64>().is_ok_and(|n| n > most))
}

/// What a request tried in place knows of it: its steps, and whether they were too few.
#[derive(Debug, Default)]
pub(crate) struct InPlace {
    steps: Option<u64>,
    outgrown: AtomicBool,
}

impl InPlace {
    /// Tried in place within `steps` steps of search.
    pub(crate) fn within(steps: u64) -> InPlace {
        InPlace {
            steps: Some(steps),
            outgrown: AtomicBool::new(false),
        }
    }

    /// The steps a search may take (or the providers a list may judge) here, when the
    /// request is tried in place.
    pub(crate) fn steps(&self) -> Option<u64> {
        self.steps
    }

    /// Notes that the work needs more than in place allows; the error the handler returns
    /// to end the attempt (it is never sent: the request is answered again, apart).
    pub(crate) fn outgrow(&self) -> ApiError {
        self.outgrown.store(true, Ordering::Relaxed);
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the work needs more than in place allows",
        )
    }

    /// Whether the attempt in place ended for want of steps.
    pub(crate) fn outgrown(&self) -> bool {
        self.outgrown.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_reads_are_answered_in_place_and_the_rest_apart() {
        use Method as M;
        let searched = Place::HereWithin(IN_PLACE_STEPS);
        let cases: &[(Method, &str, Place)] = &[
            (M::GET, "/", Place::Here),
            (M::GET, "", Place::Here),
            (M::GET, "/allocation_candidates", searched),
            (M::GET, "/allocation_candidates/", searched),
            (M::GET, "/resource_providers/u1", Place::Here),
            (M::GET, "/resource_providers/u1/inventories", Place::Here),
            (
                M::GET,
                "/resource_providers/u1/inventories/VCPU",
                Place::Here,
            ),
            (M::GET, "/resource_providers/u1/traits", Place::Here),
            (M::GET, "/resource_providers/u1/aggregates", Place::Here),
            (M::GET, "/resource_providers/u1/usages", Place::Here),
            (M::GET, "/allocations/c1", Place::Here),
            (M::GET, "/resource_classes", Place::Here),
            (M::GET, "/resource_classes/VCPU", Place::Here),
            (M::GET, "/traits/HW_CPU_X86_AVX2", Place::Here),
            // Grow with the cloud.
            (M::GET, "/resource_providers/u1/allocations", Place::Apart),
            (M::GET, "/traits", Place::Apart),
            (M::GET, "/usages", Place::Apart),
            (M::GET, "/kubeplace/explain", Place::Apart),
            (M::GET, "/kubeplace/headroom", Place::Apart),
            // Writes may wait for the cluster.
            (M::PUT, "/allocations/c1", Place::Apart),
            (M::POST, "/allocations", Place::Apart),
            (M::DELETE, "/resource_providers/u1", Place::Apart),
            (M::PUT, "/traits/CUSTOM_X", Place::Apart),
            (M::POST, "/reshaper", Place::Apart),
            (M::HEAD, "/", Place::Apart),
        ];
        for (method, path, want) in cases {
            assert_eq!(place(method, path, ""), *want, "{method} {path}");
        }
        // A search with a large limit goes apart at once; a small or malformed one is tried.
        let path = "/allocation_candidates";
        for (query, want) in [
            ("resources=VCPU:1&limit=50", searched),
            ("resources=VCPU:1&limit=100", searched),
            ("resources=VCPU:1&limit=101", Place::Apart),
            ("limit=1000&resources=VCPU:1", Place::Apart),
            ("resources=VCPU:1&limit=x", searched),
            ("resources=VCPU:1&limit=-5", searched),
            ("resources=VCPU:1&member_of=limit=1000", searched),
        ] {
            assert_eq!(place(&M::GET, path, query), want, "{query}");
        }
        // A list that names a provider (by name or uuid), a tree or an aggregate is tried in
        // place; one by traits or resources alone, or only away from aggregates, goes apart
        // at once.
        let path = "/resource_providers";
        let listed = Place::HereWithin(IN_PLACE_PROVIDERS);
        for (query, want) in [
            ("name=cn1", listed),
            ("in_tree=u1", listed),
            ("member_of=a1", listed),
            ("member_of=in:a1,a2&required=CUSTOM_X", listed),
            ("resources=VCPU:1&member_of=!a1&member_of=a2", listed),
            ("required=HW_CPU_X86_AVX2&name=cn1", listed),
            ("", Place::Apart),
            ("member_of=!a1", Place::Apart),
            ("member_of=!in:a1,a2", Place::Apart),
            ("required=HW_CPU_X86_AVX2", Place::Apart),
            ("resources=VCPU:2&required=!CUSTOM_GOLD", Place::Apart),
            ("uuid=u1", listed),
            ("required=name", Place::Apart),
        ] {
            assert_eq!(place(&M::GET, path, query), want, "{query}");
        }
        assert_eq!(place(&M::POST, path, "name=cn1"), Place::Apart);
    }

    #[test]
    fn an_attempt_notes_that_it_outgrew_its_steps() {
        let tried = InPlace::within(7);
        assert_eq!(tried.steps(), Some(7));
        assert!(!tried.outgrown());
        let e = tried.outgrow();
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(tried.outgrown());
        let apart = InPlace::default();
        assert_eq!(apart.steps(), None);
        assert!(!apart.outgrown());
    }
}
