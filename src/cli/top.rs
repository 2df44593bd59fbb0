//! `kubeplace top`: the cloud at a glance. Hosts (provider trees, or each provider) ranked
//! by the share of a class they use, Flavors by how many more servers of them fit, projects
//! by how much of a quota limit they use; from manifest files (admitted and reconciled as
//! `kubeplace apply` does, headroom counted) or from the cluster (the statuses the operator
//! wrote). A table with bars, JSON or YAML.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;

use serde::Serialize;

use super::apply::{Applier, Options};
use super::exit::Exit;
use super::output::TopOutput;
use crate::args::HeadroomCap;
use crate::capacity_page::{self, PageLimits, reason};
use crate::operator::flags::ClusterFlags;
use kubeplace_api::Object;
use kubeplace_api::manifest::read_paths_each;
use kubeplace_policy::capacity::{self, Amounts, FlavorRoom, ProjectUse, Ranked, Scope};
use kubeplace_policy::store::{Change, Store};

/// Arguments of `kubeplace top`.
#[derive(clap::Args, Debug)]
pub struct TopArgs {
    /// What to show: hosts, flavors, projects, or all three.
    #[arg(value_enum, default_value_t = Section::All)]
    pub what: Section,
    /// Manifest files, folders or `-`, admitted and reconciled in memory as `kubeplace
    /// apply` does; without them, the cluster's objects and the statuses the operator wrote.
    #[arg(short = 'f', long = "filename", num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = TopOutput::Table)]
    pub output: TopOutput,
    /// Rank hosts by the share of this resource class they use (hosts without it are left
    /// out); without it, by the largest share of any class.
    #[arg(long, value_name = "CLASS")]
    pub class: Option<String>,
    /// One row per provider, its own inventories, rather than one per host (a tree, its
    /// providers summed).
    #[arg(long)]
    pub providers: bool,
    /// Rows per section at most; 0 shows every one.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 10,
          allow_hyphen_values = true, value_parser = rows)]
    pub limit: usize,
    #[command(flatten)]
    pub headroom: HeadroomCap,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

/// A count of rows. A negative one reaches this parser (rather than being taken for a flag)
/// so that the refusal says what is accepted.
fn rows(value: &str) -> Result<usize, String> {
    value.parse().map_err(|_| {
        format!("{value:?} is not a number of rows; give a whole number, 0 (every row) or more")
    })
}

/// The sections `kubeplace top` shows.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    All,
    Hosts,
    Flavors,
    Projects,
}

impl Section {
    fn shows(self, section: Section) -> bool {
        self == Section::All || self == section
    }
}

/// One class on a host, as `-o json` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassRow {
    pub total: i64,
    pub reserved: i64,
    pub allocation_ratio: f64,
    /// `(total - reserved) * allocationRatio`: what claims may take.
    pub capacity: i64,
    pub used: i64,
    pub free: i64,
    /// `used / capacity`; null when claims hold some of a class with no capacity.
    pub used_fraction: Option<f64>,
}

impl From<&Amounts> for ClassRow {
    fn from(a: &Amounts) -> ClassRow {
        ClassRow {
            total: a.total,
            reserved: a.reserved,
            allocation_ratio: a.allocation_ratio,
            capacity: a.capacity,
            used: a.used,
            free: a.free(),
            used_fraction: finite(a.used_fraction()),
        }
    }
}

/// A host (or provider) and what it holds.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostRow {
    /// The object's name (the root's, for a host).
    pub name: String,
    /// The name Placement shows, when it is another.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_name: Option<String>,
    pub zone: String,
    /// What it is ranked by: the share of `--class`, or the largest share of any class.
    pub used_fraction: Option<f64>,
    pub classes: BTreeMap<String, ClassRow>,
}

/// A Flavor's room.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlavorRow {
    pub name: String,
    /// Servers of it that still fit; null when not counted.
    pub headroom: Option<i64>,
    /// Counting stopped at the cap: at least `headroom` fit.
    pub capped: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    pub candidates: Option<i64>,
}

/// One limit of a project's quota.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectRow {
    pub namespace: String,
    pub quota: String,
    pub project: String,
    pub limit: String,
    /// The limit in force (-1: none).
    pub max: i64,
    pub used: i64,
    pub used_fraction: Option<f64>,
}

/// How many there are, and how many are shown.
#[derive(Debug, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub hosts: usize,
    pub hosts_shown: usize,
    pub flavors: usize,
    pub flavors_shown: usize,
    pub project_limits: usize,
    pub project_limits_shown: usize,
}

/// Everything `kubeplace top` shows, as `-o json` prints it.
#[derive(Debug, Serialize)]
pub struct Report {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<HostRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flavors: Option<Vec<FlavorRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projects: Option<Vec<ProjectRow>>,
    pub summary: Summary,
    /// What ranks the hosts: a class, or `any` (the largest share).
    #[serde(rename = "rankedBy")]
    pub ranked_by: String,
    /// The most servers of any Flavor that fit, shown or not: a full headroom bar.
    #[serde(skip)]
    pub most_headroom: i64,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Runs `kubeplace top`: 0 shown, 2 unreadable input, a class no host has, or a cluster
/// that cannot be read.
pub fn main(
    args: &TopArgs,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Exit {
    let store = if args.files.is_empty() {
        from_cluster(&args.cluster)
    } else {
        from_files(args, stdin, err)
    };
    let store = match store {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(err, "kubeplace top: {e}");
            return Exit::BadInput;
        }
    };
    // The page is written from the store; every other format from the report.
    let written = match args.output {
        TopOutput::Html => {
            let limits = PageLimits { rows: args.limit };
            capacity_page::render(&store, limits, &capacity_page::generated_now())
                .and_then(|page| write_out(out, page.as_bytes()))
        }
        format => report(&store, args).and_then(|report| match format {
            TopOutput::Json => serde_json::to_string_pretty(&report)
                .map_err(|e| e.to_string())
                .and_then(|t| write_out(out, format!("{t}\n").as_bytes())),
            TopOutput::Yaml => serde_saphyr::to_string(&report)
                .map_err(|e| e.to_string())
                .and_then(|t| write_out(out, t.as_bytes())),
            _ => write_out(out, table(&report).as_bytes()),
        }),
    };
    match written {
        Ok(()) => Exit::Ok,
        Err(e) => {
            let _ = writeln!(err, "kubeplace top: {e}");
            Exit::BadInput
        }
    }
}

fn write_out(out: &mut dyn Write, bytes: &[u8]) -> Result<(), String> {
    out.write_all(bytes)
        .map_err(|e| format!("cannot write output: {e}"))
}

/// The files admitted and reconciled as `kubeplace apply` does, headroom counted.
fn from_files(args: &TopArgs, stdin: &mut dyn Read, err: &mut dyn Write) -> Result<Store, String> {
    let options = Options {
        headroom_cap: args.headroom.headroom_cap,
        ..Options::default()
    };
    let mut applier = Applier::new(&options);
    read_paths_each(&args.files, stdin, &mut |document| applier.apply(document))
        .map_err(|e| e.to_string())?;
    let (report, store) = applier.finish();
    // As kubectl would refuse them: left out, each named with why.
    for item in report.items.iter().filter(|i| !i.admission.allowed) {
        let _ = writeln!(
            err,
            "kubeplace top: {} {} ({}) rejected and left out: {}",
            item.kind, item.name, item.source, item.admission.message
        );
    }
    Ok(store)
}

/// The cluster's objects that capacity reads, with the statuses the operator wrote.
fn from_cluster(flags: &ClusterFlags) -> Result<Store, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let objects = runtime.block_on(async {
        let client = crate::operator::client(flags)
            .await
            .map_err(|e| e.to_string())?;
        let mut objects: Vec<Object> = Vec::new();
        objects.extend(listed(&client, "ResourceProviders", Object::ResourceProvider).await?);
        objects.extend(listed(&client, "Allocations", Object::Allocation).await?);
        objects.extend(listed(&client, "Aggregates", Object::Aggregate).await?);
        objects.extend(listed(&client, "ProviderConfigs", Object::ProviderConfig).await?);
        objects.extend(listed(&client, "Flavors", Object::Flavor).await?);
        objects.extend(listed(&client, "ProjectQuotas", Object::ProjectQuota).await?);
        Ok::<_, String>(objects)
    })?;
    let mut store = Store::default();
    store.apply_changes(objects.into_iter().map(|o| Change::Put(Box::new(o))));
    Ok(store)
}

/// Every object of kind `K` in the cluster, as `Object`s.
async fn listed<K>(
    client: &kube::Client,
    what: &str,
    object: fn(K) -> Object,
) -> Result<Vec<Object>, String>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    kube::Api::<K>::all(client.clone())
        .list(&Default::default())
        .await
        .map(|list| list.items.into_iter().map(object).collect())
        .map_err(|e| format!("cannot list {what}: {e}"))
}

/// The report of `store` as `args` ask for it.
pub fn report(store: &Store, args: &TopArgs) -> Result<Report, String> {
    let limit = if args.limit == 0 {
        usize::MAX
    } else {
        args.limit
    };
    let mut summary = Summary::default();
    let hosts = if args.what.shows(Section::Hosts) {
        let scope = if args.providers {
            Scope::Providers
        } else {
            Scope::Trees
        };
        let all = capacity::hosts(store, scope);
        summary.hosts = all.len();
        let ranked = capacity::rank_hosts(all, args.class.as_deref())
            .map_err(|e| format!("--class {}: {e}", e.class))?;
        let rows: Vec<HostRow> = ranked.into_iter().take(limit).map(host_row).collect();
        summary.hosts_shown = rows.len();
        Some(rows)
    } else {
        None
    };
    let mut most_headroom = 0;
    let flavors = if args.what.shows(Section::Flavors) {
        let all = capacity::flavors(store);
        summary.flavors = all.len();
        most_headroom = all.iter().filter_map(|f| f.headroom).max().unwrap_or(0);
        let rows: Vec<FlavorRow> = all.into_iter().take(limit).map(flavor_row).collect();
        summary.flavors_shown = rows.len();
        Some(rows)
    } else {
        None
    };
    let projects = if args.what.shows(Section::Projects) {
        let all = capacity::projects(store);
        summary.project_limits = all.len();
        let rows: Vec<ProjectRow> = all.into_iter().take(limit).map(project_row).collect();
        summary.project_limits_shown = rows.len();
        Some(rows)
    } else {
        None
    };
    Ok(Report {
        hosts,
        flavors,
        projects,
        summary,
        ranked_by: args.class.clone().unwrap_or_else(|| "any".into()),
        most_headroom,
    })
}

fn host_row(ranked: Ranked) -> HostRow {
    let Ranked { share, host: h } = ranked;
    HostRow {
        used_fraction: share.and_then(finite),
        placement_name: (h.shown_name != h.name).then(|| h.shown_name.clone()),
        classes: h
            .classes
            .iter()
            .map(|(c, a)| (c.clone(), ClassRow::from(a)))
            .collect(),
        name: h.name,
        zone: h.zone,
    }
}

fn flavor_row(f: FlavorRoom) -> FlavorRow {
    FlavorRow {
        name: f.name,
        headroom: f.headroom,
        capped: f.capped,
        stopped_by: f.stopped_by,
        candidates: f.candidates,
    }
}

fn project_row(p: ProjectUse) -> ProjectRow {
    ProjectRow {
        used_fraction: (p.max >= 0).then(|| p.used_fraction()).and_then(finite),
        namespace: p.namespace,
        quota: p.quota,
        project: p.project,
        limit: p.limit,
        max: p.max,
        used: p.used,
    }
}

/// Cells of a bar.
const BAR: usize = 20;

/// A bar of `fraction` (0 to 1, more is drawn full and marked) in eighths of a cell.
pub fn bar(fraction: f64) -> String {
    const PARTS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let over = fraction > 1.0;
    let eighths = (fraction.clamp(0.0, 1.0) * (BAR * 8) as f64).round() as usize;
    let mut s = String::with_capacity(BAR * 3 + 2);
    s.push('[');
    s.extend(std::iter::repeat_n('█', eighths / 8));
    if eighths / 8 < BAR {
        s.push(PARTS[eighths % 8]);
        s.extend(std::iter::repeat_n(' ', BAR - eighths / 8 - 1));
    }
    s.push(if over { '!' } else { ']' });
    s
}

fn percent(fraction: Option<f64>) -> String {
    match fraction {
        Some(f) => format!("{:>4.0}%", f * 100.0),
        None => "  ∞ %".to_string(),
    }
}

/// A cell cut to `width` characters, with `…` when cut.
fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(width.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// The table for people.
pub fn table(report: &Report) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let s = &report.summary;
    if let Some(hosts) = &report.hosts {
        let by = match report.ranked_by.as_str() {
            "any" => "the largest share of any class used".to_string(),
            c => format!("the share of {c} used"),
        };
        let _ = writeln!(out, "HOSTS by {by} ({} of {})", s.hosts_shown, s.hosts);
        let name_w = width(hosts.iter().map(|h| h.name.as_str()), 4);
        let zone_w = width(hosts.iter().map(|h| h.zone.as_str()), 4);
        let class_w = width(
            hosts
                .iter()
                .flat_map(|h| h.classes.keys().map(String::as_str)),
            5,
        );
        let _ = writeln!(
            out,
            "{:name_w$}  {:zone_w$}  {:class_w$}  {:<w$}  {:>5}  USED/CAPACITY",
            "HOST",
            "ZONE",
            "CLASS",
            "USAGE",
            "",
            w = BAR + 2
        );
        for h in hosts {
            for (i, (class, c)) in h.classes.iter().enumerate() {
                let (name, zone) = if i == 0 {
                    (h.name.as_str(), h.zone.as_str())
                } else {
                    ("", "")
                };
                let _ = writeln!(
                    out,
                    "{name:name_w$}  {zone:zone_w$}  {class:class_w$}  {}  {}  {}/{}",
                    bar(c.used_fraction.unwrap_or(f64::INFINITY)),
                    percent(c.used_fraction),
                    c.used,
                    c.capacity
                );
            }
            if h.classes.is_empty() {
                let _ = writeln!(
                    out,
                    "{:name_w$}  {:zone_w$}  (no inventory)",
                    h.name, h.zone
                );
            }
        }
        out.push('\n');
    }
    if let Some(flavors) = &report.flavors {
        let _ = writeln!(
            out,
            "FLAVORS by servers that still fit, the fewest first ({} of {})",
            s.flavors_shown, s.flavors
        );
        let name_w = width(flavors.iter().map(|f| f.name.as_str()), 6);
        let most = report.most_headroom.max(1);
        let _ = writeln!(
            out,
            "{:name_w$}  {:>8}  {:<w$}  {:>10}  STOPPED BY",
            "FLAVOR",
            "HEADROOM",
            "",
            "CANDIDATES",
            w = BAR + 2
        );
        for f in flavors {
            let headroom = match (f.headroom, f.capped) {
                (Some(n), true) => format!("≥{n}"),
                (Some(n), false) => n.to_string(),
                (None, _) => "-".into(),
            };
            let drawn = f
                .headroom
                .map_or(String::new(), |n| bar(n as f64 / most as f64));
            let candidates = f.candidates.map_or("-".into(), |c| c.to_string());
            let _ = writeln!(
                out,
                "{:name_w$}  {headroom:>8}  {drawn:<w$}  {candidates:>10}  {}",
                f.name,
                cut(reason(f.stopped_by.as_deref().unwrap_or("")), 70),
                w = BAR + 2
            );
        }
        out.push('\n');
    }
    if let Some(projects) = &report.projects {
        let _ = writeln!(
            out,
            "PROJECTS by the share of a limit used ({} of {} limits)",
            s.project_limits_shown, s.project_limits
        );
        let ns_w = width(projects.iter().map(|p| p.namespace.as_str()), 9);
        let proj_w = width(projects.iter().map(|p| p.project.as_str()), 7);
        let limit_w = width(projects.iter().map(|p| p.limit.as_str()), 5);
        let _ = writeln!(
            out,
            "{:ns_w$}  {:proj_w$}  {:limit_w$}  {:<w$}  {:>5}  USED/LIMIT",
            "NAMESPACE",
            "PROJECT",
            "LIMIT",
            "USAGE",
            "",
            w = BAR + 2
        );
        for p in projects {
            let (drawn, share, max) = if p.max < 0 {
                (
                    format!("{:<w$}", "(no limit)", w = BAR + 2),
                    "     ".to_string(),
                    "-".to_string(),
                )
            } else {
                (
                    bar(p.used_fraction.unwrap_or(f64::INFINITY)),
                    percent(p.used_fraction),
                    p.max.to_string(),
                )
            };
            let _ = writeln!(
                out,
                "{:ns_w$}  {:proj_w$}  {:limit_w$}  {drawn}  {share}  {}/{max}",
                p.namespace, p.project, p.limit, p.used
            );
        }
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// A column's width: its longest cell, and at least `min` (the heading's).
fn width<'a>(cells: impl Iterator<Item = &'a str>, min: usize) -> usize {
    cells.map(str::len).fold(min, usize::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_fill_by_eighths_and_mark_what_is_over() {
        assert_eq!(bar(0.0), format!("[{}]", " ".repeat(BAR)));
        assert_eq!(bar(1.0), format!("[{}]", "█".repeat(BAR)));
        assert_eq!(bar(0.5), format!("[{}{}]", "█".repeat(10), " ".repeat(10)));
        // 1/16 of 20 cells: a cell and a quarter.
        assert_eq!(bar(1.0 / 16.0), format!("[█▎{}]", " ".repeat(18)));
        assert_eq!(bar(3.0), format!("[{}!", "█".repeat(BAR)));
        assert_eq!(bar(f64::INFINITY), format!("[{}!", "█".repeat(BAR)));
        assert_eq!(bar(f64::NAN).chars().count(), BAR + 2);
    }

    #[test]
    fn long_cells_are_cut_with_an_ellipsis() {
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 4), "abc");
    }
}
