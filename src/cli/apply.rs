//! `kubeplace apply`: the cluster's admission and reconcile, in memory, over manifest files.

use std::io::{Read, Write};
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use super::Output;
use kubeplace_api::Object;
use kubeplace_api::manifest::{Content, Document, NAMESPACE_KIND, read_paths};
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_core::runs::{in_runs, threads_for};
use kubeplace_policy::admission::{Verdict, admit_and_store_in_order};
use kubeplace_policy::namespaces::Namespaces;
use kubeplace_policy::scheduling::headroom::{STATUS_CAP, record_headroom};
use kubeplace_policy::scheduling::place;
use kubeplace_policy::status::{STATUSES_APART_FROM, reconcile_all};
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
    pub status: Value,
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
}

impl Default for Options {
    fn default() -> Self {
        Options {
            validate: Validate::Strict,
            weighers: Weighers::default(),
            headroom_cap: STATUS_CAP,
        }
    }
}

/// [`apply_documents`] with every [`Options`].
pub fn apply_documents_with(documents: Vec<Document>, options: &Options) -> (Report, Store) {
    let Options {
        validate,
        ref weighers,
        headroom_cap,
    } = *options;
    let mut store = Store::default();
    store.set_weighers(weighers.clone());
    let mut namespaces = Namespaces::new(&documents);
    let mut outcomes = Vec::new();
    for doc in documents {
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
                namespaces.create(name);
                (
                    Verdict {
                        allowed: true,
                        message: String::new(),
                        warnings: Vec::new(),
                    },
                    Applied::Namespace,
                )
            }
            Ok(Content::Object(object)) => match namespaces.refusal(&object) {
                Some(refusal) => (Verdict::rejected(refusal), Applied::Nothing),
                None => {
                    let key = ObjectKey::of(&object);
                    let verdict = admit_and_store_in_order(&mut store, object);
                    if verdict.allowed {
                        // The scheduler places a server as soon as it is stored.
                        schedule(&mut store, &key);
                    }
                    (verdict, Applied::Object(key))
                }
            },
        };
        if validate == Validate::Warn {
            verdict.warnings.extend(unknown);
        }
        outcomes.push((doc.kind, doc.name, source, verdict, applied));
    }
    store.finish_repacks();
    // Counted first, as the operator does: the statuses show the last count.
    if headroom_cap > 0 {
        record_headroom(&mut store, headroom_cap);
    }
    reconcile_all(&mut store, MAX_ROUNDS);
    // Each object's status as JSON, on every core for a large cloud.
    let threads = threads_for(outcomes.len(), STATUSES_APART_FROM);
    let statuses: Vec<Value> = in_runs(&outcomes, threads, |run| {
        run.iter()
            .map(
                |(_, _, _, admission, applied)| match (applied, admission.allowed) {
                    (Applied::Object(k), true) => store
                        .get(k)
                        .map(|o| o.status_value())
                        .unwrap_or(Value::Null),
                    // What the API server reports for a namespace in use.
                    (Applied::Namespace, true) => serde_json::json!({"phase": "Active"}),
                    _ => Value::Object(Default::default()),
                },
            )
            .collect::<Vec<_>>()
    })
    .into_iter()
    .flatten()
    .collect();
    let mut summary = Summary::default();
    let items = outcomes
        .into_iter()
        .zip(statuses)
        .map(|((kind, name, source, admission, _), status)| {
            if admission.allowed {
                summary.admitted += 1;
            } else {
                summary.rejected += 1;
            }
            Item {
                kind,
                name,
                source,
                admission,
                status,
            }
        })
        .collect();
    (Report { items, summary }, store)
}

/// Places a server that holds no allocation (or one its flavor no longer matches): the
/// chosen Allocation goes through admission, as the operator's would.
pub(crate) fn schedule(store: &mut Store, key: &ObjectKey) {
    if let Some(Object::Server(server)) = store.get(key).cloned() {
        place(store, &server);
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
) -> u8 {
    let documents = match read_paths(files, stdin) {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(err, "kubeplace apply: {e}");
            return 2;
        }
    };
    let (report, store) = apply_documents_with(documents, options);
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
    let out = &mut std::io::BufWriter::new(out);
    let written = match output {
        Output::Json => serde_json::to_string_pretty(&report)
            .map(|s| writeln!(out, "{s}"))
            .map_err(|e| e.to_string()),
        Output::Yaml => serde_saphyr::to_string(&report)
            .map(|s| write!(out, "{s}"))
            .map_err(|e| e.to_string()),
        Output::Table => Ok(write_table(&report, out)),
    }
    .map(|w| w.and_then(|()| out.flush()));
    match written {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            let _ = writeln!(err, "kubeplace apply: cannot write output: {e}");
            return 2;
        }
        Err(e) => {
            let _ = writeln!(err, "kubeplace apply: cannot format output: {e}");
            return 2;
        }
    }
    let code = if report.summary.rejected > 0 { 1 } else { 0 };
    std::mem::forget(report);
    code
}

fn write_table(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let rows: Vec<[String; 4]> = report
        .items
        .iter()
        .map(|i| {
            let namespace = i.kind == NAMESPACE_KIND && i.admission.allowed;
            let result = match (namespace, i.admission.allowed) {
                (true, _) => "accepted",
                (false, true) => "admitted",
                (false, false) => "rejected",
            };
            let detail = if namespace {
                "core v1 Namespace, not reviewed by kubeplace".to_string()
            } else if i.admission.allowed {
                status_summary(&i.kind, &i.status)
            } else {
                i.admission.message.clone()
            };
            [i.kind.clone(), i.name.clone(), result.to_string(), detail]
        })
        .collect();
    let header = [
        "KIND".to_string(),
        "NAME".into(),
        "RESULT".into(),
        "DETAIL".into(),
    ];
    let width = |c: usize| {
        rows.iter()
            .map(|r| r[c].len())
            .chain([header[c].len()])
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0), width(1), width(2));
    for r in std::iter::once(&header).chain(rows.iter()) {
        writeln!(out, "{:w0$}  {:w1$}  {:w2$}  {}", r[0], r[1], r[2], r[3])?;
    }
    writeln!(
        out,
        "{} admitted, {} rejected",
        report.summary.admitted, report.summary.rejected
    )
}

/// A one-line summary of a status for the table.
fn status_summary(kind: &str, status: &Value) -> String {
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
    [lead, conditions.join(" ")]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("  ")
}
