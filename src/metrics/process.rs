//! The process's own figures under the standard `process_*` names, read from /proc when
//! the metrics are scraped, so that dashboards made for other exporters work.

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The process's own figures, read from /proc when the metrics are scraped (the standard
/// `process_*` names, so dashboards made for other exporters work).
#[derive(Default)]
pub(super) struct ProcessMetrics {
    cpu_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    resident_memory_bytes: Gauge,
    virtual_memory_bytes: Gauge,
    open_fds: Gauge,
    start_time_seconds: Gauge,
    threads: Gauge,
}

impl ProcessMetrics {
    pub(super) fn register(&self, registry: &mut Registry) {
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
    pub(super) fn refresh(&self) {
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
