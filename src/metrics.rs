//! Prometheus metrics of the operator: reconciles, status writes, admission requests,
//! the index and watches. Served as text on `/metrics`.

use std::time::Duration;

use kubeplace_api::Kind;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A kind label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

/// An admission outcome: kind and `allowed`, `denied` or `invalid` (unreadable request).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabels {
    pub kind: String,
    pub verdict: String,
}

/// A watch event: kind and `apply`, `delete` or `relist`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchLabels {
    pub kind: String,
    pub event: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn seconds() -> Histogram {
    // 100 µs to about 13 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// Every metric, registered once in [`Metrics::registry`].
pub struct Metrics {
    registry: Registry,
    /// Statuses computed, by kind.
    pub reconciles: Family<KindLabel, Counter>,
    /// Status computations or writes that failed, by kind.
    pub reconcile_errors: Family<KindLabel, Counter>,
    /// Time to compute one object's status, by kind.
    pub reconcile_duration: Histograms<KindLabel>,
    /// Status writes sent to the API server, by kind.
    pub status_writes: Family<KindLabel, Counter>,
    /// Time of a whole reconcile pass.
    pub pass_duration: Histogram,
    /// Time spent finding allocation candidates for a Flavor's or an Image's status.
    pub candidate_search_duration: Histograms<KindLabel>,
    /// Admission requests by kind and verdict.
    pub admission_requests: Family<VerdictLabels, Counter>,
    /// Time to answer an admission request, by kind.
    pub admission_duration: Histograms<KindLabel>,
    /// Objects in the index, by kind.
    pub index_objects: Family<KindLabel, Gauge>,
    /// Watch events by kind and type.
    pub watch_events: Family<WatchLabels, Counter>,
    /// Objects a watch delivered that could not be read as their kind, by kind.
    pub watch_skipped: Family<KindLabel, Counter>,
    /// 1 while this replica holds the leader lease (and writes status).
    pub leader: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("kubeplace");
        let m = Metrics {
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_duration: Family::new_with_constructor(seconds),
            status_writes: Family::default(),
            pass_duration: seconds(),
            candidate_search_duration: Family::new_with_constructor(seconds),
            admission_requests: Family::default(),
            admission_duration: Family::new_with_constructor(seconds),
            index_objects: Family::default(),
            watch_events: Family::default(),
            watch_skipped: Family::default(),
            leader: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register(
            "reconciles",
            "Object statuses computed, by kind",
            m.reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Status computations or writes that failed, by kind",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time to compute one object's status, by kind",
            m.reconcile_duration.clone(),
        );
        registry.register(
            "status_writes",
            "Status writes (server-side apply) sent to the API server, by kind",
            m.status_writes.clone(),
        );
        registry.register(
            "reconcile_pass_duration_seconds",
            "Time of one reconcile pass over the changed objects, writes included",
            m.pass_duration.clone(),
        );
        registry.register(
            "candidate_search_duration_seconds",
            "Time to compute a Flavor's or Image's status, which is its allocation candidate search",
            m.candidate_search_duration.clone(),
        );
        registry.register(
            "admission_requests",
            "Admission requests by kind and verdict (allowed, denied, invalid)",
            m.admission_requests.clone(),
        );
        registry.register(
            "admission_duration_seconds",
            "Time to answer an admission request, by kind",
            m.admission_duration.clone(),
        );
        registry.register(
            "index_objects",
            "Objects in the in-memory index, by kind",
            m.index_objects.clone(),
        );
        registry.register(
            "watch_events",
            "Watch events by kind and type (apply, delete, relist)",
            m.watch_events.clone(),
        );
        registry.register(
            "watch_skipped_objects",
            "Objects from a watch that could not be read as their kind and were skipped",
            m.watch_skipped.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease and writes status",
            m.leader.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Counts one admission request and its time.
    pub fn admission(&self, kind: &str, verdict: &str, took: Duration) {
        self.admission_requests
            .get_or_create(&VerdictLabels {
                kind: kind.to_string(),
                verdict: verdict.to_string(),
            })
            .inc();
        self.admission_duration
            .get_or_create(&kind_label(kind))
            .observe(took.as_secs_f64());
    }

    /// Counts one watch event.
    pub(crate) fn watch_event(&self, kind: Kind, event: &str) {
        self.watch_events
            .get_or_create(&WatchLabels {
                kind: kind.to_string(),
                event: event.to_string(),
            })
            .inc();
    }
}

/// The label of a kind.
pub(crate) fn kind_label(kind: impl std::fmt::Display) -> KindLabel {
    KindLabel {
        kind: kind.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_every_family() {
        let m = Metrics::new();
        m.admission("Flavor", "denied", Duration::from_millis(3));
        m.reconciles.get_or_create(&kind_label("Flavor")).inc();
        m.leader.set(1);
        let text = m.encode();
        assert!(
            text.contains(
                r#"kubeplace_admission_requests_total{kind="Flavor",verdict="denied"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"kubeplace_reconciles_total{kind="Flavor"} 1"#));
        assert!(text.contains("kubeplace_admission_duration_seconds_count"));
        assert!(text.contains("kubeplace_leader 1"));
    }
}
