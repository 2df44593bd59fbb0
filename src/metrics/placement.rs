//! The Placement API's figures: requests by route template, method, status and microversion,
//! their latency, searches refused and queued, Keystone's validations, and the writes it
//! made to the cluster. Each part holds clones of the
//! registered families, so the API, its Keystone check and its cluster writer count into the
//! operator's registry; a part made on its own (`kubeplace placement serve`, tests) counts
//! into families nobody scrapes.

use std::time::Duration;

use http::Method;
use kubeplace_policy::admission::Refusal;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::claims::ClaimMetrics;
use super::histograms::{Histograms, seconds};
use super::labels::refusal_label;

/// A request: its route's template, method, status and microversion.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: String,
    pub method: String,
    pub status: String,
    pub microversion: String,
}

/// A route's template and a method.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: String,
    pub method: String,
}

/// An outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: String,
}

/// A write to the cluster: its outcome, and the kind of refusal when refused (`none`
/// otherwise).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub outcome: String,
    pub refusal: String,
}

/// Keystone's validations of callers' tokens.
#[derive(Clone, Debug, Default)]
pub struct KeystoneMetrics {
    /// Tokens asked of Keystone, by outcome: `valid`, `invalid`, `unavailable`.
    pub validations: Family<OutcomeLabel, Counter>,
    /// Tokens answered from the cache, without asking Keystone.
    pub cache_hits: Counter,
}

impl KeystoneMetrics {
    /// Counts one validation Keystone answered (or could not).
    pub fn validated(&self, outcome: &str) {
        self.validations
            .get_or_create(&OutcomeLabel {
                outcome: outcome.to_string(),
            })
            .inc();
    }
}

/// Writes committed to the API server, by outcome.
#[derive(Clone, Debug, Default)]
pub struct WriteMetrics {
    pub writes: Family<WriteLabels, Counter>,
}

/// A write's outcome, as [`WriteMetrics::count`] labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Written,
    Refused(Refusal),
    KeptChanging,
    Unavailable,
    Internal,
}

impl WriteMetrics {
    /// Counts one write.
    pub fn count(&self, outcome: WriteOutcome) {
        self.writes.get_or_create(&write_labels(outcome)).inc();
    }

    /// Makes the series of `outcome`, at 0 until counted.
    fn touch(&self, outcome: WriteOutcome) {
        let _ = self.writes.get_or_create(&write_labels(outcome));
    }
}

/// The labels of a write's outcome.
fn write_labels(outcome: WriteOutcome) -> WriteLabels {
    let (outcome, refusal) = match outcome {
        WriteOutcome::Written => ("written", "none"),
        WriteOutcome::Refused(r) => ("refused", refusal_label(r)),
        WriteOutcome::KeptChanging => ("kept_changing", "none"),
        WriteOutcome::Unavailable => ("unavailable", "none"),
        WriteOutcome::Internal => ("internal", "none"),
    };
    WriteLabels {
        outcome: outcome.to_string(),
        refusal: refusal.to_string(),
    }
}

/// Everything the Placement API counts.
#[derive(Clone, Debug)]
pub struct PlacementMetrics {
    pub requests: Family<RequestLabels, Counter>,
    pub duration: Histograms<RouteLabels>,
    /// Searches answered 503 without running: the queue was full, or no turn came in time.
    pub searches_refused: Counter,
    /// Searches that waited in the queue for a turn.
    pub searches_queued: Counter,
    pub keystone: KeystoneMetrics,
    pub cluster: WriteMetrics,
    /// The claims it decided itself: the operator's claim families, shared.
    pub claims: ClaimMetrics,
}

impl Default for PlacementMetrics {
    fn default() -> Self {
        PlacementMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(seconds),
            searches_refused: Counter::default(),
            searches_queued: Counter::default(),
            keystone: KeystoneMetrics::default(),
            cluster: WriteMetrics::default(),
            claims: ClaimMetrics::default(),
        }
    }
}

impl PlacementMetrics {
    /// Registers every family in `registry` (the operator's, prefixed `kubeplace_`).
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "placement_requests",
            "Placement API requests by route template, method, status and microversion",
            self.requests.clone(),
        );
        registry.register(
            "placement_request_duration_seconds",
            "Time to answer a Placement API request (its body sent apart), by route template and method",
            self.duration.clone(),
        );
        registry.register(
            "placement_searches_refused",
            "Placement searches answered 503 without running: the queue was full or no turn came in time",
            self.searches_refused.clone(),
        );
        registry.register(
            "placement_searches_queued",
            "Placement searches that waited in the queue for a turn",
            self.searches_queued.clone(),
        );
        registry.register(
            "keystone_validations",
            "Callers' tokens asked of Keystone, by outcome (valid, invalid, unavailable)",
            self.keystone.validations.clone(),
        );
        registry.register(
            "keystone_token_cache_hits",
            "Callers' tokens answered from the token cache without asking Keystone",
            self.keystone.cache_hits.clone(),
        );
        registry.register(
            "cluster_writes",
            "Placement API writes committed to the API server (one object, or several recorded whole), by outcome (written, refused, kept_changing, unavailable, internal) and kind of refusal",
            self.cluster.writes.clone(),
        );
        // Every outcome is there from the start, at 0: a rate over the first one sees it
        // rise, and a query of it finds the metric before anything happened.
        for outcome in ["valid", "invalid", "unavailable"] {
            let _ = self.keystone.validations.get_or_create(&OutcomeLabel {
                outcome: outcome.to_string(),
            });
        }
        for outcome in [WriteOutcome::Written, WriteOutcome::Unavailable] {
            self.cluster.touch(outcome);
        }
        for refusal in Refusal::ALL {
            self.cluster.touch(WriteOutcome::Refused(refusal));
        }
    }

    /// Counts one answered request. Labels are bounded whatever the caller sends: a route
    /// is a template (or `unknown`), a method one of HTTP's own (or `other`), the
    /// microversion the one answered (`none` when the answer carries none).
    pub fn request(
        &self,
        route: &'static str,
        method: &Method,
        status: u16,
        microversion: Option<&str>,
        took: Duration,
    ) {
        let method = method_label(method);
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_string(),
                method: method.to_string(),
                status: status.to_string(),
                microversion: microversion_label(microversion).to_string(),
            })
            .inc();
        self.duration
            .get_or_create(&RouteLabels {
                route: route.to_string(),
                method: method.to_string(),
            })
            .observe(took.as_secs_f64());
    }
}

fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::PUT => "PUT",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// `1.N` from an `OpenStack-API-Version: placement 1.N` value, when N has at most three
/// digits; `none` for anything else.
fn microversion_label(header: Option<&str>) -> &str {
    let Some(version) = header
        .and_then(|h| h.trim().strip_prefix("placement "))
        .map(str::trim)
    else {
        return "none";
    };
    let well_formed = version.strip_prefix("1.").is_some_and(|minor| {
        !minor.is_empty() && minor.len() <= 3 && minor.bytes().all(|b| b.is_ascii_digit())
    });
    if well_formed { version } else { "none" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_stay_bounded_whatever_is_sent() {
        assert_eq!(microversion_label(Some("placement 1.39")), "1.39");
        assert_eq!(microversion_label(Some("placement 1.0")), "1.0");
        assert_eq!(microversion_label(Some("placement 1.x")), "none");
        assert_eq!(microversion_label(Some("placement 1.12345")), "none");
        assert_eq!(microversion_label(Some("compute 2.1")), "none");
        assert_eq!(microversion_label(None), "none");
        let odd = Method::from_bytes(b"BREW").unwrap();
        assert_eq!(method_label(&odd), "other");
        assert_eq!(method_label(&Method::DELETE), "DELETE");
    }

    #[test]
    fn every_kind_of_refusal_has_a_label_of_its_own() {
        let labels: std::collections::BTreeSet<&str> =
            Refusal::ALL.iter().map(|r| refusal_label(*r)).collect();
        assert_eq!(labels.len(), Refusal::ALL.len());
    }
}
