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
    /// 1, labelled with the version.
    build_info: Family<BuildLabels, Gauge>,
    process: ProcessMetrics,
}

/// The running binary's version.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
}

/// The process's own figures, read from /proc when the metrics are scraped (the standard
/// `process_*` names, so dashboards made for other exporters work).
#[derive(Default)]
struct ProcessMetrics {
    cpu_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    resident_memory_bytes: Gauge,
    virtual_memory_bytes: Gauge,
    open_fds: Gauge,
    start_time_seconds: Gauge,
    threads: Gauge,
}

impl ProcessMetrics {
    fn register(&self, registry: &mut Registry) {
        let process = registry.sub_registry_with_prefix("process");
        process.register(
            "cpu_seconds_total",
            "User and system CPU time of the process, in seconds",
            self.cpu_seconds.clone(),
        );
        process.register(
            "resident_memory_bytes",
            "Resident memory of the process, in bytes",
            self.resident_memory_bytes.clone(),
        );
        process.register(
            "virtual_memory_bytes",
            "Virtual memory of the process, in bytes",
            self.virtual_memory_bytes.clone(),
        );
        process.register(
            "open_fds",
            "Open file descriptors of the process",
            self.open_fds.clone(),
        );
        process.register(
            "start_time_seconds",
            "When the process started, in seconds since the Unix epoch",
            self.start_time_seconds.clone(),
        );
        process.register("threads", "Threads of the process", self.threads.clone());
    }

    /// Reads /proc/self; figures it cannot read keep their last value.
    fn refresh(&self) {
        let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
            return;
        };
        // Fields after the command name (which may hold spaces), from field 3 on.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            return;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
        let ticks = PROC_TICKS_PER_SECOND;
        if let (Some(utime), Some(stime)) = (field(14), field(15)) {
            self.cpu_seconds.set((utime + stime) as f64 / ticks);
        }
        if let Some(threads) = field(20) {
            self.threads.set(threads as i64);
        }
        if let Some(vsize) = field(23) {
            self.virtual_memory_bytes.set(vsize as i64);
        }
        if let Some(rss_pages) = field(24) {
            self.resident_memory_bytes.set((rss_pages * 4096) as i64);
        }
        if let (Some(start_ticks), Some(boot)) = (field(22), boot_time()) {
            self.start_time_seconds
                .set((boot + start_ticks as f64 / ticks) as i64);
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(fds.count() as i64);
        }
    }
}

/// Clock ticks per second of /proc's times: 100 on every Linux kubeplace runs on.
const PROC_TICKS_PER_SECOND: f64 = 100.0;

/// The system's boot time, in seconds since the epoch (`btime` of /proc/stat).
fn boot_time() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
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
            watch_errors: Family::default(),
            headroom_counting: Gauge::default(),
            headroom_rounds: Counter::default(),
            build_info: Family::default(),
            process: ProcessMetrics::default(),
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
        Metrics {
            registry,
            unprefixed,
            ..m
        }
    }

    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
        self.process.refresh();
        let mut out = String::new();
        // Writing into a String cannot fail. Each registry ends with `# EOF`; only the last may.
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &self.unprefixed);
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
