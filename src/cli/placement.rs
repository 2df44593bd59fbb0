//! `kubeplace placement candidates|providers`: Placement's GET queries over manifests.

use super::exit::Exit;
use std::io::{Read, Write};
use std::path::PathBuf;

use serde_json::Value;

use kubeplace_api::manifest::{Content, read_paths};
use kubeplace_core::placement::candidates::try_allocation_candidates;
use kubeplace_core::placement::explain::{Explanation, explain};
use kubeplace_core::placement::microversion::Microversion;
use kubeplace_core::placement::query::{parse_candidates_query, parse_providers_query};
use kubeplace_core::placement::resource_providers::matching_providers;
use kubeplace_core::placement::response::{candidates_body, error_body, providers_body};
use kubeplace_policy::mirror::Mirror;
use kubeplace_policy::placement_records::{Backing, Book};
use kubeplace_policy::scheduling::headroom::{DEFAULT_CAP, Headroom};
use kubeplace_policy::store::{Change, Store};

/// Arguments of a Placement call.
#[derive(clap::Args, Debug)]
pub struct PlacementArgs {
    /// Files, folders or `-` with ResourceProvider, Allocation (and ProviderConfig) objects.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Placement's query string, e.g. `resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GOLD`.
    #[arg(long)]
    pub query: String,
    /// Placement microversion, 1.10 to 1.39 or `latest`.
    #[arg(long, default_value = "1.39")]
    pub microversion: String,
    /// Output format: `json` (Placement's shape; with `--explain`, the explanation under
    /// the key `explain`), or `text` (the explanation alone; the default with `--explain`).
    #[arg(short = 'o', long, value_parser = ["json", "text"])]
    pub output: Option<String>,
    /// Say where the candidates were lost, in order, with counts: per request group, over
    /// the provider trees, when the groups are combined, and by `limit` (candidates only).
    #[arg(long)]
    pub explain: bool,
    /// Answer the query this many times after loading and print the median and fastest
    /// time in milliseconds to standard error (for speed comparisons).
    #[arg(long, hide = true, default_value_t = 0)]
    pub time_repeat: usize,
}

/// Which Placement call to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `GET /allocation_candidates`.
    Candidates,
    /// `GET /resource_providers`.
    Providers,
}

/// Loads the state: every object of the files, without admission (usage may exceed
/// capacity, as Placement allows after an inventory shrinks).
pub(crate) fn load_state(files: &[PathBuf], stdin: &mut dyn Read) -> Result<Store, String> {
    let documents = read_paths(files, stdin).map_err(|e| e.to_string())?;
    // One provider config merge for the whole state, not one per object.
    // Namespaces hold nothing Placement answers about; Nodes, Pods and DRA objects are
    // mirrored as `kubeplace apply` mirrors them.
    let mut mirror = Mirror::default();
    let mut changes = Vec::new();
    let mut store = Store::default();
    for doc in documents {
        let origin = doc.origin.clone();
        match doc.content {
            Ok(Content::Object(o)) => changes.push(Change::Put(Box::new(o))),
            Ok(Content::Namespace(_)) => {}
            // Custom names no object needs to use: they exist, as in Placement.
            Ok(Content::Registry(names)) => store.seed_custom_names(&names),
            Ok(Content::Cluster(source)) => {
                let observed = mirror.observe(&source);
                observed
                    .outcome
                    .map_err(|e| e.located(&origin, &source, &doc.name))?;
                changes.extend(observed.changes);
            }
            Err(e) => return Err(e.located(&origin)),
        }
    }
    store.apply_changes(changes);
    Ok(store)
}

/// Answers one query; returns the JSON body (pretty-printed when asked) and the exit code (Ok,
/// or Failed for a Placement error).
pub(crate) fn answer(
    store: &Store,
    book: &Book,
    call: Call,
    query: &str,
    microversion: &str,
    pretty: bool,
) -> (String, Exit) {
    fn text(body: &impl serde::Serialize, pretty: bool) -> String {
        let written = if pretty {
            serde_json::to_string_pretty(body)
        } else {
            serde_json::to_string(body)
        };
        written.unwrap_or_default()
    }
    let mv: Microversion = match microversion.parse() {
        Ok(mv) => mv,
        Err(e) => return (text(&error_body(406, &e.to_string()), pretty), Exit::Failed),
    };
    let index = store.index();
    match call {
        Call::Candidates => match parse_candidates_query(query, mv) {
            // A class or trait that no object names does not exist, as in Placement.
            Ok(q) if let Some(detail) = book.unknown_names(&q) => {
                (text(&error_body(400, &detail), pretty), Exit::Failed)
            }
            // A search that runs out of budget without a limit is a 400 naming the budget.
            Ok(q) => match try_allocation_candidates(index, &q) {
                Ok(set) if !pretty => {
                    let threads = kubeplace_core::runs::cores();
                    let json = candidates_body(index, &set, mv).to_json(threads);
                    (String::from_utf8(json).unwrap_or_default(), Exit::Ok)
                }
                Ok(set) => (text(&candidates_body(index, &set, mv), pretty), Exit::Ok),
                Err(e) => (text(&error_body(400, &e.to_string()), pretty), Exit::Failed),
            },
            Err(e) => (text(&error_body(400, &e.detail), pretty), Exit::Failed),
        },
        Call::Providers => match parse_providers_query(query, mv) {
            Ok(q) => (
                text(
                    &providers_body(index, &matching_providers(index, &q), mv),
                    pretty,
                ),
                Exit::Ok,
            ),
            Err(e) => (text(&error_body(400, &e.detail), pretty), Exit::Failed),
        },
    }
}

/// How the answer is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Placement's JSON body.
    Json,
    /// Placement's JSON body with the explanation under `explain`.
    JsonExplained,
    /// The explanation as text.
    Text,
}

fn shape(call: Call, args: &PlacementArgs) -> Result<Shape, String> {
    match (call, args.explain, args.output.as_deref()) {
        (Call::Providers, true, _) => Err(
            "--explain explains allocation candidates; use it with `kubeplace placement candidates`"
                .to_string(),
        ),
        (_, false, Some("text")) => Err(
            "-o text prints an explanation; add --explain, or use -o json for Placement's answer"
                .to_string(),
        ),
        (_, false, _) => Ok(Shape::Json),
        (_, true, Some("json")) => Ok(Shape::JsonExplained),
        (_, true, _) => Ok(Shape::Text),
    }
}

/// The explanation of a candidates query, or Placement's error body for a bad one.
pub(crate) fn explained(
    store: &Store,
    query: &str,
    microversion: &str,
) -> Result<Explanation, Value> {
    let mv: Microversion = microversion.parse().map_err(
        |e: kubeplace_core::placement::microversion::MicroversionError| {
            error_body(406, &e.to_string())
        },
    )?;
    let q = parse_candidates_query(query, mv).map_err(|e| error_body(400, &e.detail))?;
    Ok(explain(store.index(), &q))
}

/// Runs the subcommand; returns the exit code.
pub fn run(
    call: Call,
    args: &PlacementArgs,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Exit {
    let (files, query, microversion, time_repeat) = (
        &args.files,
        args.query.as_str(),
        args.microversion.as_str(),
        args.time_repeat,
    );
    let shape = match shape(call, args) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(err, "kubeplace placement: {e}");
            return Exit::BadInput;
        }
    };
    let mut store = match load_state(files, stdin) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(err, "kubeplace placement: {e}");
            return Exit::BadInput;
        }
    };
    // The custom names the files use, which a query may name: once, not in each answer.
    let book = Book::new(&store, Backing::Memory);
    book.order_traits_of(&mut store);
    if time_repeat > 0 {
        let mut times: Vec<f64> = (0..time_repeat)
            .map(|_| {
                let started = std::time::Instant::now();
                std::hint::black_box(answer(&store, &book, call, query, microversion, false));
                started.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let _ = writeln!(
            err,
            "{{\"ms\": {:.3}, \"ms_min\": {:.3}}}",
            times[times.len() / 2],
            times[0]
        );
    }
    let (text, code) = answer(&store, &book, call, query, microversion, true);
    if shape == Shape::Json {
        return match writeln!(out, "{text}") {
            Ok(()) => code,
            Err(_) => {
                let _ = writeln!(err, "kubeplace placement: cannot write output");
                Exit::BadInput
            }
        };
    }
    // With --explain the answer is read back as JSON to carry the explanation.
    let mut body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if code == Exit::Ok {
        match explained(&store, query, microversion) {
            Ok(e) if shape == Shape::Text => {
                return match write!(out, "{}", e.text()) {
                    Ok(()) => Exit::Ok,
                    Err(_) => Exit::BadInput,
                };
            }
            Ok(e) => body["explain"] = serde_json::to_value(&e).unwrap_or(Value::Null),
            Err(e) => body = e,
        }
    }
    if shape == Shape::Text && code != Exit::Ok {
        let detail = body["errors"][0]["detail"]
            .as_str()
            .unwrap_or("bad request");
        let _ = writeln!(err, "kubeplace placement: {detail}");
        return code;
    }
    match serde_json::to_string_pretty(&body) {
        Ok(text) if writeln!(out, "{text}").is_ok() => code,
        _ => {
            let _ = writeln!(err, "kubeplace placement: cannot write output");
            Exit::BadInput
        }
    }
}

/// Arguments of `kubeplace placement headroom`.
#[derive(clap::Args, Debug)]
pub struct HeadroomArgs {
    /// Files, folders or `-` with ResourceProviders, Allocations, Flavors and Servers.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// The Flavor whose servers are counted.
    #[arg(long)]
    pub flavor: String,
    /// Providers whose whole trees are drained first (their servers are placed again).
    #[arg(long, num_args = 1..)]
    pub without: Vec<String>,
    /// Servers placed at most; beyond it the answer is "at least".
    #[arg(long, default_value_t = DEFAULT_CAP)]
    pub cap: usize,
    /// A namespace (or Placement project id): also say how many of them its quota allows.
    #[arg(long)]
    pub project: Option<String>,
    #[command(flatten)]
    pub weighing: crate::args::Weighing,
    /// Output format: `table` or `json`.
    #[arg(short = 'o', long, value_parser = ["table", "json"], default_value = "table")]
    pub output: String,
}

/// Runs `kubeplace placement headroom`: 0 answered, 1 for a flavor or provider that does
/// not exist, 2 for input that cannot be read.
pub fn headroom(
    args: &HeadroomArgs,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Exit {
    let store = match load_state(&args.files, stdin) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(err, "kubeplace placement headroom: {e}");
            return Exit::BadInput;
        }
    };
    let h = match kubeplace_policy::scheduling::headroom(
        &store,
        &args.weighing.weighers,
        &args.flavor,
        &args.without,
        args.cap,
    ) {
        Ok(h) => match &args.project {
            Some(project) => h.within_quota_of(&store, project),
            None => h,
        },
        Err(e) => {
            let _ = writeln!(err, "kubeplace placement headroom: {e}");
            return Exit::Failed;
        }
    };
    let text = if args.output == "json" {
        serde_json::to_string_pretty(&h)
            .map(|t| t + "\n")
            .unwrap_or_default()
    } else {
        headroom_table(&h)
    };
    match out.write_all(text.as_bytes()) {
        Ok(()) => Exit::Ok,
        Err(_) => Exit::BadInput,
    }
}

/// Headroom for people: the count, where they would go, and what the drain moved.
fn headroom_table(h: &Headroom) -> String {
    let mut out = if h.capped {
        format!(
            "Flavor {}: at least {} more fit (counting stopped at the cap of {})\n",
            h.flavor, h.fits, h.cap
        )
    } else {
        format!("Flavor {}: {} more fit\n", h.flavor, h.fits)
    };
    if let Some(q) = &h.within_quota {
        out.push_str(&format!(
            "  {} of them within project {}'s quota ({}; limited by {})\n",
            q.servers, q.project, q.quota, q.limited_by
        ));
    }
    let width = h.per_tree.keys().map(String::len).max().unwrap_or(0).max(4);
    if !h.per_tree.is_empty() {
        out.push_str(&format!("  {:<width$}  SERVERS\n", "TREE"));
        for (tree, n) in &h.per_tree {
            out.push_str(&format!("  {tree:<width$}  {n}\n"));
        }
    }
    if let Some(why) = &h.stopped_by {
        out.push_str(&format!("The next did not fit: {why}\n"));
    }
    if !h.drained.is_empty() {
        out.push_str(&format!(
            "Drained: {} ({} servers moved first, {} of them found no host)\n",
            h.drained.join(", "),
            h.displaced,
            h.displaced_unplaced
        ));
    }
    if h.pending_placed > 0 {
        out.push_str(&format!(
            "Placed first: {} servers that were waiting for a host\n",
            h.pending_placed
        ));
    }
    out
}
