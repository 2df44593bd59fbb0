//! `kubeplace apply`: the cluster's admission and reconcile, in memory, over manifest files.

use super::exit::Exit;
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::output::Output;
use kubeplace_api::manifest::{Content, Document, NAMESPACE_KIND, read_paths_each};
use kubeplace_api::{Kind, Object};
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_core::runs::{in_runs, threads_for};
use kubeplace_policy::admission::{Verdict, admit_and_store_in_order};
use kubeplace_policy::claims::record_admitted;
use kubeplace_policy::mirror::{Mirror, TraitTable};
use kubeplace_policy::namespaces::{MissingNamespace, Namespaces};
use kubeplace_policy::scheduling::headroom::{HeadroomFigures, STATUS_CAP, record_headroom};
use kubeplace_policy::scheduling::place;
use kubeplace_policy::status::reconcile_all;
use kubeplace_policy::store::{ObjectKey, Store};

/// Reconcile rounds before giving up on a fixed point (statuses depend on specs only, so
/// two rounds settle in practice).
const MAX_ROUNDS: usize = 10;

/// One object's outcome.
#[derive(Debug, Serialize)]
pub struct Item {
    pub kind: String,
    pub name: String,
    /// `FILE:LINE` of the document.
    pub source: String,
    pub admission: Verdict,
    pub status: ItemStatus,
}

/// An object's status as the report shows it: the object as apply left it, turned into JSON
/// only when printed (the table reads a few fields of tens of thousands of providers).
#[derive(Debug, Clone)]
pub enum ItemStatus {
    Object(Arc<Object>),
    /// A namespace in use, as the API server reports it.
    Namespace,
    /// Refused: an empty status.
    Empty,
    /// Admitted but no longer in the store: a null status.
    Missing,
    /// A cluster object, and the objects it is mirrored as.
    Mirrored(Vec<ObjectKey>),
}

impl ItemStatus {
    /// The status as JSON, as `-o json` prints it.
    pub fn value(&self) -> Value {
        match self {
            ItemStatus::Object(o) => o.status_value(),
            ItemStatus::Namespace => serde_json::json!({"phase": "Active"}),
            ItemStatus::Empty => Value::Object(Default::default()),
            ItemStatus::Missing => Value::Null,
            ItemStatus::Mirrored(keys) => serde_json::json!({
                "mirroredAs": keys.iter().map(|k| format!("{}/{}", k.kind, k.name)).collect::<Vec<_>>()
            }),
        }
    }
}

impl Serialize for ItemStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(serializer)
    }
}

/// Counts of admitted and rejected objects.
#[derive(Debug, Serialize, Default)]
pub struct Summary {
    pub admitted: usize,
    pub rejected: usize,
}

/// The whole result, as `-o json` prints it.
#[derive(Debug, Serialize)]
pub struct Report {
    pub items: Vec<Item>,
    pub summary: Summary,
}

/// kubectl's `--validate`: what to do with a field the kind's schema does not name.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Validate {
    /// Refuse the object, as the API server does under kubectl's default (also `true`).
    #[default]
    #[value(alias = "true")]
    Strict,
    /// Apply the object without the field, with a warning for each.
    Warn,
    /// Apply the object without the field, silently (also `false`).
    #[value(alias = "false")]
    Ignore,
}

/// What an admitted document became, for its status in the report.
enum Applied {
    Object(ObjectKey),
    Mirrored(Vec<ObjectKey>),
    Namespace,
    Nothing,
}

/// Applies documents in order to an empty store, as a cluster would, then reconciles.
/// Unknown fields are handled as the API server handles them under `validate`.
pub fn apply_documents(documents: Vec<Document>, validate: Validate) -> (Report, Store) {
    apply_documents_with(
        documents,
        &Options {
            validate,
            ..Options::default()
        },
    )
}

/// How `kubeplace apply` admits, places and counts.
#[derive(Debug, Clone)]
pub struct Options {
    /// What to do with fields the kind's schema does not name.
    pub validate: Validate,
    /// How servers are weighed.
    pub weighers: Weighers,
    /// Servers each Flavor's headroom counts at most (0: not counted).
    pub headroom_cap: usize,
    /// Which traits mirrored Nodes' labels give.
    pub mirror_traits: TraitTable,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            validate: Validate::Strict,
            weighers: Weighers::default(),
            headroom_cap: STATUS_CAP,
            mirror_traits: TraitTable::default(),
        }
    }
}

/// [`apply_documents`] with every [`Options`].
pub fn apply_documents_with(documents: Vec<Document>, options: &Options) -> (Report, Store) {
    let mut applier = Applier::new(options);
    for document in documents {
        applier.apply(document);
    }
    applier.finish()
}

/// Documents applied one at a time, in order, as they are read; [`Applier::finish`]
/// reconciles and reports.
pub struct Applier {
    validate: Validate,
    /// How the scheduler weighs candidates.
    weighers: Weighers,
    headroom_cap: usize,
    store: Store,
    /// Nodes, Pods and DRA objects read as the operator's `--mirror-cluster` reads them.
    mirror: Mirror,
    namespaces: Namespaces,
    /// Each document's item, in the input's order, its status still to come.
    outcomes: Vec<Item>,
    /// What each admitted document became (by its place in `outcomes`): a refused one
    /// became nothing and costs nothing here.
    applied: Vec<(usize, Applied)>,
    /// Objects refused for a namespace that did not exist yet (by their place in
    /// `outcomes`): their message may point at a Namespace further on in the input.
    missing_namespaces: Vec<(usize, MissingNamespace)>,
}

impl Applier {
    /// An empty cluster.
    pub fn new(options: &Options) -> Applier {
        Applier {
            validate: options.validate,
            weighers: options.weighers.clone(),
            headroom_cap: options.headroom_cap,
            store: Store::default(),
            mirror: Mirror::new(options.mirror_traits.clone()),
            namespaces: Namespaces::default(),
            outcomes: Vec::new(),
            applied: Vec::new(),
            missing_namespaces: Vec::new(),
        }
    }

    /// Applies the next document, as the API server and the webhook would.
    pub fn apply(&mut self, doc: Document) {
        let validate = self.validate;
        let store = &mut self.store;
        self.namespaces.note(&doc);
        let source = format!("{}:{}", doc.origin.file, doc.origin.line);
        let unknown: Vec<String> = doc
            .unknown_fields
            .iter()
            .map(|f| {
                format!(
                    "{}:{}: document {}: {f}",
                    doc.origin.file, f.line, doc.origin.document
                )
            })
            .collect();
        let mut class_problems = Vec::new();
        let (mut verdict, applied) = match doc.content {
            Err(e) => (Verdict::rejected(e.located(&doc.origin)), Applied::Nothing),
            // The API server decodes strictly before any admission: nothing else is asked.
            Ok(_) if validate == Validate::Strict && !unknown.is_empty() => (
                Verdict::rejected(format!(
                    "{} (kubectl apply refuses unknown fields too, under its default --validate=strict; with --validate=warn or --validate=false the object is applied without them)",
                    unknown.join("; ")
                )),
                Applied::Nothing,
            ),
            // Not a kubeplace kind: nothing to review, but the objects after it may use it.
            Ok(Content::Namespace(name)) => {
                self.namespaces.create(name);
                (Verdict::allowed(), Applied::Namespace)
            }
            // The custom names Placement holds: nothing to review, nothing to apply.
            Ok(Content::Registry(_)) => (Verdict::allowed(), Applied::Nothing),
            // Not a kubeplace kind either: mirrored, as `kubeplace run --mirror-cluster` would.
            Ok(Content::Cluster(source)) => {
                let observed = self.mirror.observe(&source);
                class_problems = observed.problems;
                store.finish_repacks();
                store.apply_changes(observed.changes);
                match observed.outcome {
                    Ok(keys) => (
                        Verdict {
                            // A written object of the same name stands in its place.
                            warnings: keys
                                .iter()
                                .filter(|k| store.mirrored_aside(k).is_some())
                                .map(|k| {
                                    format!(
                                        "{} {} is written by hand and stands in place of the mirrored one while it exists",
                                        k.kind, k.name
                                    )
                                })
                                .collect(),
                            ..Verdict::allowed()
                        },
                        Applied::Mirrored(keys),
                    ),
                    Err(e) => (
                        Verdict::rejected(e.located(&doc.origin, &source, &doc.name)),
                        Applied::Nothing,
                    ),
                }
            }
            Ok(Content::Object(object)) => match self.namespaces.missing(&object) {
                Some(missing) => {
                    self.missing_namespaces.push((self.outcomes.len(), missing));
                    // Its message is written once the whole input is read.
                    (Verdict::rejected(String::new()), Applied::Nothing)
                }
                None => {
                    let key = ObjectKey::of(&object);
                    let verdict = admit_and_store_in_order(store, object);
                    if verdict.allowed {
                        // The scheduler places a server as soon as it is stored.
                        schedule(store, &self.weighers, &key);
                        // A claim admitted is decided, as the operator records at once.
                        if let Some(claim) = claim_of(store, &key) {
                            record_admitted(store, &claim);
                        }
                    }
                    (verdict, Applied::Object(key))
                }
            },
        };
        if validate == Validate::Warn {
            verdict.warnings.extend(unknown);
        }
        // A DeviceClass that does not compile or passes a budget (found when it is applied,
        // or when a slice's devices are picked) is warned about where it was applied.
        for problem in class_problems {
            let class_item = self
                .outcomes
                .iter_mut()
                .rev()
                .find(|item| item.kind == "DeviceClass" && item.name == problem.class);
            match class_item {
                _ if doc.kind == "DeviceClass" && doc.name == problem.class => {
                    verdict.warnings.push(problem.problem.to_string())
                }
                Some(item) => item.admission.warnings.push(problem.problem.to_string()),
                None => verdict.warnings.push(problem.to_string()),
            }
        }
        if verdict.allowed && !matches!(applied, Applied::Nothing) {
            self.applied.push((self.outcomes.len(), applied));
        }
        self.outcomes.push(Item {
            kind: doc.kind,
            name: doc.name,
            source,
            admission: verdict,
            status: ItemStatus::Empty,
        });
    }

    /// Reconciles what was applied and reports on each document.
    pub fn finish(self) -> (Report, Store) {
        let Applier {
            weighers,
            headroom_cap,
            mut store,
            namespaces,
            mut outcomes,
            applied,
            missing_namespaces,
            ..
        } = self;
        for (at, missing) in missing_namespaces {
            outcomes[at].admission.message = namespaces.refusal(&missing);
        }
        store.finish_repacks();
        // Counted first, as the operator does: the statuses show the last count.
        let mut headroom = HeadroomFigures::default();
        if headroom_cap > 0 {
            record_headroom(&mut headroom, &store, &weighers, headroom_cap);
        }
        reconcile_all(&mut store, &headroom, MAX_ROUNDS);
        let mut summary = Summary::default();
        // Outcomes come in the input's order, not the store's: hashed, each is found in
        // one step rather than a search through tens of thousands of keys.
        let stored: HashMap<&ObjectKey, &Arc<Object>, foldhash::fast::RandomState> =
            store.iter_shared().collect();
        // The items are filled in where they are: a second list of tens of thousands would
        // double what the report holds.
        for (at, applied) in applied {
            outcomes[at].status = match applied {
                Applied::Object(k) => stored
                    .get(&k)
                    .map_or(ItemStatus::Missing, |o| ItemStatus::Object(Arc::clone(o))),
                Applied::Namespace => ItemStatus::Namespace,
                Applied::Mirrored(keys) => ItemStatus::Mirrored(keys),
                Applied::Nothing => ItemStatus::Empty,
            };
        }
        for item in &outcomes {
            if item.admission.allowed {
                summary.admitted += 1;
            } else {
                summary.rejected += 1;
            }
        }
        let items = outcomes;
        drop(stored);
        (Report { items, summary }, store)
    }
}

/// The claim an applied object makes: an Allocation's own, a Server's Allocation.
fn claim_of(store: &Store, key: &ObjectKey) -> Option<String> {
    match store.get(key)? {
        Object::Allocation(_) => Some(key.name.clone()),
        Object::Server(server) => Some(kubeplace_api::allocation_name(server)),
        _ => None,
    }
}

/// Places a server that holds no allocation (or one its flavor no longer matches): the
/// chosen Allocation goes through admission, as the operator's would, weighing candidates
/// by `weighers`.
pub(crate) fn schedule(store: &mut Store, weighers: &Weighers, key: &ObjectKey) {
    if key.kind != Kind::Server {
        return;
    }
    if let Some(Object::Server(server)) = store.get(key).cloned() {
        place(store, weighers, &server);
    }
}

/// Runs the subcommand; returns the exit code.
pub fn run(
    files: &[PathBuf],
    output: Output,
    options: &Options,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Exit {
    // Documents are applied as they are read, while later ones are still being read.
    let mut applier = Applier::new(options);
    if let Err(e) = read_paths_each(files, stdin, &mut |document| applier.apply(document)) {
        let _ = writeln!(err, "kubeplace apply: {e}");
        return Exit::BadInput;
    }
    let (report, store) = applier.finish();
    // The process ends after this: freeing a large cloud object by object (a tenth of a
    // second at 10,000 trees) would only delay the exit.
    std::mem::forget(store);
    // As kubectl prints admission warnings: on stderr, whatever the output format (the
    // JSON and YAML reports carry them too).
    for i in &report.items {
        for w in &i.admission.warnings {
            let _ = writeln!(err, "Warning: {} {}: {w}", i.kind, i.name);
        }
    }
    // A line per object: one write per line would cost a system call each.
    // Written as it is formatted: the text of a report is many times the input's size.
    let out = &mut std::io::BufWriter::new(out);
    let written = match output {
        Output::Json => match serde_json::to_writer_pretty(&mut *out, &report) {
            Ok(()) => Ok(writeln!(out)),
            Err(e) if e.is_io() => Ok(Err(e.into())),
            Err(e) => Err(e.to_string()),
        },
        Output::Yaml => {
            // The serializer's error hides the writer's: kept aside to report it as one.
            let mut failed = None;
            let mut writer = KeepError {
                inner: &mut *out,
                failed: &mut failed,
            };
            match serde_saphyr::to_io_writer(&mut writer, &report) {
                Ok(()) => Ok(Ok(())),
                Err(_) if failed.is_some() => Ok(Err(failed.take().expect("kept"))),
                Err(e) => Err(e.to_string()),
            }
        }
        Output::Table => Ok(write_table(&report, out)),
    }
    .map(|w| w.and_then(|()| out.flush()));
    match written {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            let _ = writeln!(err, "kubeplace apply: cannot write output: {e}");
            return Exit::BadInput;
        }
        Err(e) => {
            let _ = writeln!(err, "kubeplace apply: cannot format output: {e}");
            return Exit::BadInput;
        }
    }
    let code = if report.summary.rejected > 0 {
        Exit::Failed
    } else {
        Exit::Ok
    };
    std::mem::forget(report);
    code
}

/// A writer that keeps the first error of the one it writes to.
struct KeepError<'a, W: Write> {
    inner: &'a mut W,
    failed: &'a mut Option<std::io::Error>,
}

impl<W: Write> Write for KeepError<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf).inspect_err(|e| {
            self.failed
                .get_or_insert_with(|| std::io::Error::new(e.kind(), e.to_string()));
        })
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The widest a padded column of the table gets, in characters: the longest name
/// Kubernetes accepts. A longer cell (a name that admission refuses) is cut with `…`, so
/// the padding stays within what `format!` can pad (65,535) and the table readable; the
/// JSON and YAML reports keep it whole.
const MAX_COLUMN: usize = 253;

/// A padded column's cell, cut to [`MAX_COLUMN`] characters.
fn cell(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(MAX_COLUMN) {
        None => text.into(),
        Some(_) => {
            let (cut, _) = text.char_indices().nth(MAX_COLUMN - 1).expect("longer");
            format!("{}…", &text[..cut]).into()
        }
    }
}

/// Rows from which the table is written on several threads.
const ROWS_APART_FROM: usize = 4_096;

fn write_table(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    // Tens of thousands of statuses are summed up on every core.
    let threads = threads_for(report.items.len(), ROWS_APART_FROM);
    // Each run is a slice of references, so that a detail may borrow from its item.
    let items: Vec<&Item> = report.items.iter().collect();
    let details: Vec<Cow<'_, str>> = in_runs(&items, threads, |run| {
        run.iter().map(|i| table_detail(i)).collect::<Vec<_>>()
    })
    .into_iter()
    .flatten()
    .collect();
    let header = ["KIND", "NAME", "RESULT", "DETAIL"];
    let width = |column: fn(&Item) -> &str, c: usize| {
        report
            .items
            .iter()
            .map(|i| column(i).chars().count().min(MAX_COLUMN))
            .chain([header[c].len()])
            .max()
            .unwrap_or(0)
    };
    let w0 = width(|i| &i.kind, 0);
    let w1 = width(|i| &i.name, 1);
    let w2 = report
        .items
        .iter()
        .map(|i| table_result(i).len())
        .chain([header[2].len()])
        .max()
        .unwrap_or(0);
    let (h0, h1, h2, h3) = (header[0], header[1], header[2], header[3]);
    writeln!(out, "{h0:w0$}  {h1:w1$}  {h2:w2$}  {h3}")?;
    for (i, detail) in report.items.iter().zip(&details) {
        let (c0, c1, c2) = (cell(&i.kind), cell(&i.name), table_result(i));
        writeln!(out, "{c0:w0$}  {c1:w1$}  {c2:w2$}  {detail}")?;
    }
    writeln!(
        out,
        "{} admitted, {} rejected",
        report.summary.admitted, report.summary.rejected
    )
}

/// The RESULT column of an item.
fn table_result(i: &Item) -> &'static str {
    let namespace = i.kind == NAMESPACE_KIND && i.admission.allowed;
    let mirrored = matches!(i.status, ItemStatus::Mirrored(_));
    match (namespace, i.admission.allowed) {
        (true, _) => "accepted",
        (false, true) if mirrored => "mirrored",
        (false, true) => "admitted",
        (false, false) => "rejected",
    }
}

/// The DETAIL column of an item.
fn table_detail(i: &Item) -> Cow<'_, str> {
    if i.kind == NAMESPACE_KIND && i.admission.allowed {
        "core v1 Namespace, not reviewed by kubeplace".into()
    } else if let ItemStatus::Mirrored(keys) = &i.status {
        mirrored_summary(keys).into()
    } else if i.admission.allowed {
        status_summary(&i.kind, &i.status).into()
    } else {
        // A refusal is shown as it is, not copied: a report of many small refused documents
        // is mostly their messages.
        i.admission.message.as_str().into()
    }
}

/// What a cluster object is mirrored as, for the table.
fn mirrored_summary(keys: &[ObjectKey]) -> String {
    if keys.is_empty() {
        return "mirrored as nothing".into();
    }
    let names: Vec<String> = keys
        .iter()
        .map(|k| format!("{} {}", k.kind, k.name))
        .collect();
    format!("mirrored as {}", names.join(", "))
}

/// `FILE:LINE` of a document.
/// A one-line summary of a status for the table.
fn status_summary(kind: &str, status: &ItemStatus) -> String {
    let (lead, conditions) = match status {
        // Providers come by the ten thousand: their two fields are read without JSON.
        ItemStatus::Object(object) if matches!(**object, Object::ResourceProvider(_)) => {
            let Object::ResourceProvider(rp) = &**object else {
                unreachable!("matched above")
            };
            let status = rp.status.as_ref();
            let root = status.and_then(|s| s.root.as_deref()).unwrap_or("");
            let conditions = status
                .into_iter()
                .flat_map(|s| &s.conditions)
                .map(|c| format!("{}={}", c.type_, c.reason))
                .collect();
            (format!("root={root}"), conditions)
        }
        _ => value_summary(kind, &status.value()),
    };
    [lead, conditions.join(" ")]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("  ")
}

/// The lead and the `type=reason` of each condition, read from a status as JSON.
fn value_summary(kind: &str, status: &Value) -> (String, Vec<String>) {
    let s = |p: &str| {
        status
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let conditions: Vec<String> = status
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}={}",
                c["type"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or("")
            )
        })
        .collect();
    let lead = match kind {
        // A provider refused or gone from the store: its empty status, read as JSON.
        "ResourceProvider" => format!("root={}", s("/root")),
        "Flavor" => s("/request/query"),
        "Image" => {
            let traits: Vec<&str> = status["requiredTraits"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            format!("requires [{}]", traits.join(","))
        }
        "ProviderConfig" => format!("matched {}", status["matchedProviderCount"]),
        "ServerGroup" => {
            let hosts: Vec<String> = status["hosts"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| format!("{}:{}", h["host"].as_str().unwrap_or(""), h["members"]))
                .collect();
            format!("members {} [{}]", status["memberCount"], hosts.join(","))
        }
        "Aggregate" => {
            let hosts: Vec<&str> = status["hostNames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            format!("hosts {} [{}]", status["hosts"], hosts.join(","))
        }
        _ => String::new(),
    };
    (lead, conditions)
}
