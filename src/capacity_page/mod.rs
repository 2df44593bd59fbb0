//! The capacity page: one self-contained HTML page (no script, no stylesheet or font from
//! elsewhere) of what the cloud holds, for people who would rather look than read. Each
//! zone's hosts with a bar per class, the hottest hosts, each Flavor's headroom and what
//! stops one more, the Servers that wait and why, and projects against their quotas.
//!
//! `kubeplace top -o html` writes it from files or a cluster; `kubeplace run` serves it at
//! `GET /kubeplace/capacity` on the Placement API's port, behind its authentication. Both
//! read the figures `kubeplace top -o json` prints (`kubeplace_policy::capacity`), and
//! every figure is also in a `data-` attribute, so that a test (or a script) reads the page
//! as a person sees it.

use std::sync::OnceLock;

use minijinja::Environment;
use serde::Serialize;

use kubeplace_policy::capacity::{
    self, Amounts, FlavorRoom, Host, ProjectUse, Scope, WaitingServer,
};
use kubeplace_policy::store::Store;

/// The page's template; `.html`, so that every value is escaped.
const TEMPLATE: &str = include_str!("page.html");

/// A share at or above which a bar is drawn hot, and warm.
const HOT: f64 = 0.9;
const WARM: f64 = 0.7;

/// What the page shows at most.
#[derive(Debug, Clone, Copy)]
pub struct PageLimits {
    /// Hosts per zone, hottest hosts, flavors, waiting servers and project limits, each at
    /// most; 0 shows every one.
    pub rows: usize,
}

/// One class of a host or zone, drawn as a bar.
#[derive(Serialize)]
struct Bar {
    class: String,
    used: i64,
    capacity: i64,
    /// The share used, in percent, for the bar's width (at most 100).
    width: f64,
    /// The share used, in percent, as written (more than 100 when over).
    percent: String,
    level: &'static str,
}

fn bar(class: &str, a: &Amounts) -> Bar {
    let share = a.used_fraction();
    Bar {
        class: class.to_string(),
        used: a.used,
        capacity: a.capacity,
        width: width(share),
        percent: percent(share),
        level: level(share),
    }
}

/// A bar's width for a share, in percent to a tenth: full for anything over (or a share
/// of nothing).
fn width(share: f64) -> f64 {
    if share.is_finite() {
        (share.clamp(0.0, 1.0) * 1000.0).round() / 10.0
    } else {
        100.0
    }
}

fn percent(share: f64) -> String {
    if share.is_finite() {
        format!("{:.0}%", share * 100.0)
    } else {
        "∞".to_string()
    }
}

fn level(share: f64) -> &'static str {
    if share >= HOT {
        "hot"
    } else if share >= WARM {
        "warm"
    } else {
        "cool"
    }
}

#[derive(Serialize)]
struct HostView {
    name: String,
    shown_name: String,
    zone: String,
    /// The largest share of any class, as written.
    share: String,
    bars: Vec<Bar>,
}

fn host_view(h: &Host, share: Option<f64>) -> HostView {
    HostView {
        name: h.name.clone(),
        shown_name: h.shown_name.clone(),
        zone: h.zone.clone(),
        share: share.map(percent).unwrap_or_default(),
        bars: h.classes.iter().map(|(c, a)| bar(c, a)).collect(),
    }
}

#[derive(Serialize)]
struct ZoneView {
    name: String,
    bars: Vec<Bar>,
    hosts: Vec<HostView>,
    /// Hosts of the zone not shown.
    more: usize,
}

#[derive(Serialize)]
struct FlavorView {
    name: String,
    headroom: Option<i64>,
    capped: bool,
    candidates: Option<i64>,
    stopped_by: Option<String>,
    /// Its headroom against the most of any Flavor, in percent.
    width: f64,
}

fn flavor_view(f: FlavorRoom, most: i64) -> FlavorView {
    let width = match f.headroom {
        Some(h) if most > 0 => (h.max(0) as f64 * 1000.0 / most as f64).round() / 10.0,
        _ => 0.0,
    };
    FlavorView {
        name: f.name,
        headroom: f.headroom,
        capped: f.capped,
        candidates: f.candidates,
        stopped_by: f.stopped_by.as_deref().map(|s| reason(s).to_string()),
        width,
    }
}

#[derive(Serialize)]
struct WaitingView {
    namespace: String,
    name: String,
    flavor: String,
    reason: String,
    message: String,
    since: String,
}

fn waiting_view(w: WaitingServer) -> WaitingView {
    WaitingView {
        namespace: w.namespace,
        name: w.name,
        flavor: w.flavor,
        reason: w.reason,
        message: reason(&w.message).to_string(),
        since: w.since.unwrap_or_default(),
    }
}

#[derive(Serialize)]
struct ProjectView {
    namespace: String,
    quota: String,
    project: String,
    limit: String,
    used: i64,
    /// The limit in force; -1 for none.
    max: i64,
    width: f64,
    percent: String,
    level: &'static str,
}

fn project_view(p: ProjectUse) -> ProjectView {
    let share = p.used_fraction();
    let limited = p.max >= 0;
    ProjectView {
        width: if limited { width(share) } else { 0.0 },
        percent: if limited {
            percent(share)
        } else {
            "no limit".into()
        },
        level: if limited { level(share) } else { "cool" },
        namespace: p.namespace,
        quota: p.quota,
        project: p.project,
        limit: p.limit,
        used: p.used,
        max: p.max,
    }
}

/// Everything the template reads.
#[derive(Serialize)]
struct Page {
    generated: String,
    hosts: usize,
    zones: Vec<ZoneView>,
    hottest: Vec<HostView>,
    hottest_of: usize,
    flavors: Vec<FlavorView>,
    flavors_of: usize,
    waiting: Vec<WaitingView>,
    waiting_of: usize,
    projects: Vec<ProjectView>,
    projects_of: usize,
}

/// The first `rows` of `all` (every one for 0), and how many there were.
fn first<T>(all: Vec<T>, rows: usize) -> (Vec<T>, usize) {
    let of = all.len();
    let shown = if rows == 0 { of } else { rows.min(of) };
    let mut all = all;
    all.truncate(shown);
    (all, of)
}

/// The page for the store as it is now; `generated` says when (written as given).
pub fn render(store: &Store, limits: PageLimits, generated: &str) -> Result<String, String> {
    let hosts = capacity::hosts(store, Scope::Trees);
    let zone_totals = capacity::zones(&hosts);
    let mut zones: Vec<ZoneView> = Vec::new();
    for ((zone, class), amounts) in &zone_totals {
        if zones.last().is_none_or(|z| &z.name != zone) {
            zones.push(ZoneView {
                name: zone.clone(),
                bars: Vec::new(),
                hosts: Vec::new(),
                more: 0,
            });
        }
        if let Some(z) = zones.last_mut() {
            z.bars.push(bar(class, amounts));
        }
    }
    for z in &mut zones {
        let in_zone: Vec<&Host> = hosts.iter().filter(|h| h.zone == z.name).collect();
        let (shown, of) = first(in_zone, limits.rows);
        z.more = of - shown.len();
        z.hosts = shown
            .into_iter()
            .map(|h| host_view(h, h.share(None)))
            .collect();
    }
    let host_count = hosts.len();
    let ranked = capacity::rank_hosts(hosts, None).map_err(|e| e.to_string())?;
    let (hottest, hottest_of) = first(ranked, limits.rows);
    let flavors = capacity::flavors(store);
    let most = flavors.iter().filter_map(|f| f.headroom).max().unwrap_or(0);
    let (flavors, flavors_of) = first(flavors, limits.rows);
    let (waiting, waiting_of) = first(capacity::waiting_servers(store), limits.rows);
    let (projects, projects_of) = first(capacity::projects(store), limits.rows);
    let page = Page {
        generated: generated.to_string(),
        hosts: host_count,
        zones,
        hottest: hottest
            .iter()
            .map(|r| host_view(&r.host, r.share))
            .collect(),
        hottest_of,
        flavors: flavors.into_iter().map(|f| flavor_view(f, most)).collect(),
        flavors_of,
        waiting: waiting.into_iter().map(waiting_view).collect(),
        waiting_of,
        projects: projects.into_iter().map(project_view).collect(),
        projects_of,
    };
    environment()
        .get_template("capacity.html")
        .and_then(|t| t.render(minijinja::value::Serde(&page)))
        .map_err(|e| format!("the capacity page could not be written: {e}"))
}

/// Why a server would not fit, without the request it restates: what follows the
/// search's `(query): `, when there is one.
pub fn reason(stopped_by: &str) -> &str {
    match (stopped_by.split_once(": "), stopped_by.find("): ")) {
        (Some((kind, _)), Some(at)) => {
            let rest = &stopped_by[at + 3..];
            // The kind (NoValidHost, QuotaExceeded…) says which check stopped it.
            if rest.is_empty() { kind } else { rest }
        }
        _ => stopped_by,
    }
}

/// When a page is written, as it says it.
pub fn generated_now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%d %H:%M:%S UTC")
        .to_string()
}

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.add_template("capacity.html", TEMPLATE)
            .expect("the capacity page's template parses");
        env
    })
}

#[cfg(test)]
mod tests;
