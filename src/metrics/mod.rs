//! Prometheus metrics of the operator: reconciles, status writes, admission requests and
//! the claims decided, the index and watches, the serving certificate; the Placement API's
//! requests, searches, Keystone checks and cluster writes (`placement.rs`); capacity per
//! host, zone, Flavor and project (`capacity.rs`); the process (`process.rs`). Served as
//! text on `/metrics`; every name is listed in docs/observability.md.

mod capacity;
mod claims;
mod histograms;
mod labels;
mod placement;
mod process;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kubeplace_api::Kind;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use capacity::{CapacityMetrics, CapacitySettings, DEFAULT_MAX_HOSTS};
pub use claims::ClaimMetrics;
pub(crate) use labels::kind_label;
pub use labels::refusal_label;
pub use labels::{KindLabel, RefusalLabels, VerdictLabels, WatchLabels};
pub use placement::{KeystoneMetrics, PlacementMetrics, WriteMetrics, WriteOutcome};

use crate::cache::SharedStore;
use crate::serving::certs::CertResolver;
use capacity::CapacitySource;
use histograms::{Histograms, seconds};
use kubeplace_policy::admission::Refusal;
use process::ProcessMetrics;

/// Every metric, registered once in [`Metrics::registry`].
pub struct Metrics {
    registry: Registry,
    unprefixed: Registry,
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
    /// Watch streams that failed and were retried, by kind.
    pub watch_errors: Family<KindLabel, Counter>,
    /// 1 while a headroom round counts Flavors.
    pub headroom_counting: Gauge,
    /// Headroom rounds that counted every Flavor.
    pub headroom_rounds: Counter,
    /// Claims decided and refused (the Placement API counts into the same families).
    pub claims: ClaimMetrics,
    /// The Placement API's figures.
    pub placement: PlacementMetrics,
    /// 1, labelled with the version.
    build_info: Family<BuildLabels, Gauge>,
    process: ProcessMetrics,
    /// Where capacity is read from at each scrape, once the operator says.
    capacity: OnceLock<CapacitySource>,
    /// The serving certificate, whose expiry is read at each scrape.
    certificate: OnceLock<Arc<CertResolver>>,
}

/// The running binary's version.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
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
        let mut m = Metrics {
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
            watch_errors: Family::default(),
            headroom_counting: Gauge::default(),
            headroom_rounds: Counter::default(),
            claims: ClaimMetrics::default(),
            placement: PlacementMetrics::default(),
            build_info: Family::default(),
            process: ProcessMetrics::default(),
            capacity: OnceLock::new(),
            certificate: OnceLock::new(),
            registry: Registry::default(),
            unprefixed: Registry::default(),
        };
        m.build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_string(),
            })
            .set(1);
        registry.register(
            "build_info",
            "1, labelled with the running kubeplace's version",
            m.build_info.clone(),
        );
        registry.register(
            "watch_errors",
            "Watch streams of a kind that failed and were retried with backoff",
            m.watch_errors.clone(),
        );
        // Process figures keep their standard names, without the kubeplace_ prefix.
        let mut unprefixed = Registry::default();
        m.process.register(&mut unprefixed);
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
        registry.register(
            "headroom_counting",
            "1 while a headroom round counts the Flavors' headroom",
            m.headroom_counting.clone(),
        );
        registry.register(
            "headroom_rounds",
            "Headroom rounds that counted every Flavor",
            m.headroom_rounds.clone(),
        );
        registry.register(
            "claims_decided",
            "Claims this replica decided (Allocations, PlacementWrites, ResourceClaims' devices), by kind",
            m.claims.decided.clone(),
        );
        registry.register(
            "claims_refused",
            "Claims this replica refused, by kind and kind of refusal (no_room, over_quota, busy, stale, unavailable, invalid, mirrored, denied)",
            m.claims.refused.clone(),
        );
        // Every kind of refusal of an Allocation is there from the start, at 0, so that a
        // rate over the first refusal sees it rise.
        for refusal in Refusal::ALL {
            let _ = m.claims.refused.get_or_create(&RefusalLabels {
                kind: "Allocation".into(),
                reason: refusal_label(refusal).into(),
            });
        }
        let _ = m.claims.decided.get_or_create(&kind_label("Allocation"));
        // The API's refusals count with the webhook's.
        m.placement.claims = m.claims.clone();
        m.placement.register(&mut registry);
        Metrics {
            registry,
            unprefixed,
            ..m
        }
    }

    /// Reports capacity from `store` at each scrape, as `settings` say (once; a second
    /// call is ignored). Only while this replica leads.
    pub fn report_capacity(&self, store: SharedStore, settings: CapacitySettings) {
        let _ = self.capacity.set(CapacitySource { store, settings });
    }

    /// Reports the expiry of the certificate `resolver` serves, as it is renewed.
    pub fn report_certificate(&self, resolver: Arc<CertResolver>) {
        let _ = self.certificate.set(resolver);
    }

    /// Counts a claim this replica decided; `refused` with its kind of refusal.
    pub fn claim(&self, kind: &str, refused: Option<Refusal>) {
        self.claims.claim(kind, refused);
    }

    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
        self.process.refresh();
        let mut out = String::new();
        // Writing into a String cannot fail. Each registry ends with `# EOF`; only the last may.
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &self.unprefixed);
        if let Some(expiry) = self.certificate.get().and_then(|r| not_after(r)) {
            out.push_str(
                "# HELP kubeplace_serving_certificate_expiry_timestamp_seconds When the certificate the webhook and Placement API serve expires, in seconds since the Unix epoch\n\
                 # TYPE kubeplace_serving_certificate_expiry_timestamp_seconds gauge\n",
            );
            out.push_str(&format!(
                "kubeplace_serving_certificate_expiry_timestamp_seconds {expiry}\n"
            ));
        }
        if self.leader.get() == 1
            && let Some(capacity) = self.capacity.get()
        {
            capacity.encode(&mut out);
        }
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

    /// Counts a failed watch stream.
    pub(crate) fn watch_error(&self, kind: Kind) {
        self.watch_errors.get_or_create(&kind_label(kind)).inc();
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

/// When the leaf certificate `resolver` serves now expires, in seconds since the epoch.
fn not_after(resolver: &CertResolver) -> Option<i64> {
    let key = resolver.current();
    let leaf = key.cert.first()?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref()).ok()?;
    Some(cert.validity().not_after.timestamp())
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
        m.headroom_counting.set(1);
        m.headroom_rounds.inc();
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
        assert!(text.contains("kubeplace_headroom_counting 1"), "{text}");
        assert!(text.contains("kubeplace_headroom_rounds_total 1"), "{text}");
    }

    #[test]
    fn capacity_only_while_leading_in_one_exposition() {
        let mut store = kubeplace_policy::store::Store::default();
        let cn1 = "apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata: {name: cn1}
spec: {inventories: {VCPU: {total: 8}}}
";
        for doc in kubeplace_api::manifest::parse_stream("t.yaml", cn1).unwrap() {
            store.apply(doc.object().unwrap().unwrap());
        }
        let m = Metrics::new();
        m.report_capacity(
            Arc::new(std::sync::RwLock::new(store)),
            CapacitySettings::default(),
        );
        let series = r#"openstack_placement_resource_total{hostname="cn1",resourcetype="VCPU"} 8"#;
        // A follower holds the same figures: one copy, the leader's, keeps sum() right.
        assert!(!m.encode().contains("openstack_placement_resource"));
        m.leader.set(1);
        let text = m.encode();
        assert!(text.contains(series), "{text}");
        // Each family once, and one `# EOF` at the end, whatever registry wrote it.
        let mut families = std::collections::BTreeSet::new();
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            assert!(families.insert(line.to_string()), "{line} twice:\n{text}");
        }
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
        assert!(text.trim_end().ends_with("# EOF"));
        m.leader.set(0);
        assert!(!m.encode().contains("openstack_placement_resource"));
    }

    #[test]
    fn build_watch_errors_and_the_process() {
        let m = Metrics::new();
        m.watch_error(Kind::Flavor);
        m.watch_error(Kind::Flavor);
        let text = m.encode();
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            text.contains(&format!(r#"kubeplace_build_info{{version="{version}"}} 1"#)),
            "{text}"
        );
        assert!(text.contains(r#"kubeplace_watch_errors_total{kind="Flavor"} 2"#));
        // One `# EOF`, at the end, as Prometheus' parser wants.
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
        assert!(text.trim_end().ends_with("# EOF"));
        let figure = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
        };
        // This test process has memory, threads, open files and started after 2020.
        assert!(figure("process_resident_memory_bytes") > 1_000_000.0);
        assert!(figure("process_threads") >= 1.0);
        assert!(figure("process_open_fds") >= 3.0);
        assert!(figure("process_start_time_seconds") > 1_577_836_800.0);
        assert!(figure("process_cpu_seconds_total") >= 0.0);
    }
}
