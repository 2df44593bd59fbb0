//! `kubeplace placement candidates|providers`: Placement's GET queries over manifests.

use std::io::{Read, Write};
use std::path::PathBuf;

use serde_json::Value;

use kubeplace_api::manifest::read_paths;
use kubeplace_core::placement::candidates::try_allocation_candidates;
use kubeplace_core::placement::explain::{Explanation, explain};
use kubeplace_core::placement::microversion::Microversion;
use kubeplace_core::placement::query::{parse_candidates_query, parse_providers_query};
use kubeplace_core::placement::resource_providers::matching_providers;
use kubeplace_core::placement::response::{candidates_body, error_body, providers_body};
use kubeplace_policy::store::{Change, Store};

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
    // Namespaces hold nothing Placement answers about.
    let changes = documents
        .into_iter()
        .filter_map(|doc| {
            let origin = doc.origin.clone();
            doc.object().map(|o| {
                o.map(|o| Change::Put(Box::new(o)))
                    .map_err(|e| e.located(&origin))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut store = Store::default();
    store.apply_changes(changes);
    Ok(store)
}

/// Answers one query; returns the body and the exit code (0, or 1 for a Placement error).
pub(crate) fn answer(store: &Store, call: Call, query: &str, microversion: &str) -> (Value, u8) {
    let mv: Microversion = match microversion.parse() {
        Ok(mv) => mv,
        Err(e) => return (error_body(406, &e.to_string()), 1),
    };
    let index = store.index();
    match call {
        Call::Candidates => match parse_candidates_query(query, mv) {
            // A search that runs out of budget without a limit is a 400 naming the budget.
            Ok(q) => match try_allocation_candidates(index, &q) {
                Ok(set) => (candidates_body(index, &set, mv), 0),
                Err(e) => (error_body(400, &e.to_string()), 1),
            },
            Err(e) => (error_body(400, &e.detail), 1),
        },
        Call::Providers => match parse_providers_query(query, mv) {
            Ok(q) => (providers_body(index, &matching_providers(index, &q), mv), 0),
            Err(e) => (error_body(400, &e.detail), 1),
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

fn shape(call: Call, args: &super::PlacementArgs) -> Result<Shape, String> {
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
    args: &super::PlacementArgs,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
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
            return 2;
        }
    };
    let store = match load_state(files, stdin) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(err, "kubeplace placement: {e}");
            return 2;
        }
    };
    if time_repeat > 0 {
        let mut times: Vec<f64> = (0..time_repeat)
            .map(|_| {
                let started = std::time::Instant::now();
                std::hint::black_box(answer(&store, call, query, microversion));
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
    let (mut body, code) = answer(&store, call, query, microversion);
    if shape != Shape::Json && code == 0 {
        match explained(&store, query, microversion) {
            Ok(e) if shape == Shape::Text => {
                return match write!(out, "{}", e.text()) {
                    Ok(()) => 0,
                    Err(_) => 2,
                };
            }
            Ok(e) => body["explain"] = serde_json::to_value(&e).unwrap_or(Value::Null),
            Err(e) => body = e,
        }
    }
    if shape == Shape::Text && code != 0 {
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
            2
        }
    }
}
