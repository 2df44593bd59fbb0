//! `kubeplace extra-specs`: reference docs, Glance metadefs, and checking extra specs or
//! image properties from the command line.

use super::exit::Exit;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use clap::{Subcommand, ValueEnum};
use serde::Serialize;
use serde_json::{Value, json};

use super::output::Output;
use kubeplace_api::Object;
use kubeplace_api::manifest::read_paths;
use kubeplace_core::extra_specs::docs::{self, Format};
use kubeplace_core::extra_specs::image_properties::check_image_property;
use kubeplace_core::extra_specs::metadefs::metadef_files;
use kubeplace_core::extra_specs::registry::{Registry, Rejected};
use kubeplace_core::extra_specs::{
    Status, Support, ValidationMode, Validators, ValueType, check_spec,
};
use kubeplace_policy::store::Store;

/// Documentation formats.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocFormat {
    /// Markdown.
    Md,
    /// reStructuredText.
    Rst,
}

#[derive(Subcommand, Debug)]
pub enum ExtraSpecsCommand {
    /// Print reference documentation of every extra spec and image property, grouped by
    /// namespace, with parameters, values, deprecations and documented dependencies.
    Docs {
        #[arg(long, value_enum, default_value_t = DocFormat::Md)]
        format: DocFormat,
        /// Manifests whose ExtraSpecDefinitions are documented too.
        #[arg(short = 'f', long = "filename")]
        files: Vec<PathBuf>,
    },
    /// Write Glance metadata-definition namespace files (JSON) into DIR.
    Metadefs {
        /// The directory to write into (created if missing).
        #[arg(
            short = 'd',
            long = "output-dir",
            required_unless_present = "old_dir",
            conflicts_with = "old_dir"
        )]
        dir: Option<PathBuf>,
        /// The directory, as older releases took it; `-o` names an output format in every
        /// other command, so this prints a warning.
        #[arg(short = 'o', hide = true)]
        old_dir: Option<PathBuf>,
    },
    /// Check extra specs given as KEY=VALUE (or image properties with --image) and print
    /// each verdict. Exit 0 when nothing is rejected, 1 otherwise, 2 on bad input.
    Check {
        /// KEY=VALUE pairs.
        specs: Vec<String>,
        /// Validation mode: strict, permissive or off.
        #[arg(long, default_value = "strict")]
        mode: String,
        /// Manifests whose ExtraSpecDefinitions are used as custom definitions.
        #[arg(short = 'f', long = "filename")]
        files: Vec<PathBuf>,
        /// A JSON file (`-` for standard input) holding a list of [KEY, VALUE] pairs, checked
        /// after the pairs on the command line.
        #[arg(long = "json-input")]
        json_input: Option<PathBuf>,
        /// Check Glance image properties instead of flavor extra specs.
        #[arg(long)]
        image: bool,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Print the facts of the in-tree registry (keys, types, bounds, enums, patterns,
    /// parameters, support status) as JSON, for comparison with Nova's.
    #[command(hide = true)]
    Facts,
}

fn custom_from_files(
    files: &[PathBuf],
    stdin: &mut dyn Read,
) -> Result<(Registry, Vec<Rejected>), String> {
    if files.is_empty() {
        return Ok((Registry::default(), Vec::new()));
    }
    let docs = read_paths(files, stdin).map_err(|e| e.to_string())?;
    let mut store = Store::default();
    for d in docs {
        if let Some(Ok(o @ Object::ExtraSpecDefinition(_))) = d.object() {
            store.apply(o);
        }
    }
    Ok(store.custom_definitions())
}

fn read_pairs(path: &Path, stdin: &mut dyn Read) -> Result<Vec<(String, String)>, String> {
    let mut text = String::new();
    if path.as_os_str() == "-" {
        stdin
            .read_to_string(&mut text)
            .map_err(|e| format!("-: {e}"))?;
    } else {
        text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}: expected a JSON list of [KEY, VALUE] pairs: {e}",
            path.display()
        )
    })
}

/// Runs the subcommand; returns the exit code.
pub fn run(
    command: ExtraSpecsCommand,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Exit {
    match command {
        ExtraSpecsCommand::Docs { format, files } => {
            let custom = match custom_from_files(&files, stdin) {
                Ok((r, _)) => r,
                Err(e) => {
                    let _ = writeln!(err, "kubeplace extra-specs docs: {e}");
                    return Exit::BadInput;
                }
            };
            let format = match format {
                DocFormat::Md => Format::Markdown,
                DocFormat::Rst => Format::Rst,
            };
            let _ = write!(out, "{}", docs::render(format, &custom));
            Exit::Ok
        }
        ExtraSpecsCommand::Metadefs { dir, old_dir } => {
            if old_dir.is_some() {
                let _ = writeln!(
                    err,
                    "Warning: kubeplace extra-specs metadefs: -o DIR is deprecated; use --output-dir DIR (-d DIR), as -o names an output format elsewhere"
                );
            }
            let Some(dir) = dir.or(old_dir) else {
                return Exit::BadInput;
            };
            if let Err(e) = std::fs::create_dir_all(&dir) {
                let _ = writeln!(
                    err,
                    "kubeplace extra-specs metadefs: {}: {e}",
                    dir.display()
                );
                return Exit::BadInput;
            }
            for file in metadef_files() {
                let path = dir.join(&file.file_name);
                let text = serde_json::to_string_pretty(&file.namespace)
                    .expect("JSON values serialise")
                    + "\n";
                if let Err(e) = std::fs::write(&path, text) {
                    let _ = writeln!(
                        err,
                        "kubeplace extra-specs metadefs: {}: {e}",
                        path.display()
                    );
                    return Exit::BadInput;
                }
                let props = file.namespace["properties"]
                    .as_object()
                    .map_or(0, |p| p.len());
                let _ = writeln!(out, "{} ({props} properties)", path.display());
            }
            Exit::Ok
        }
        ExtraSpecsCommand::Check {
            specs,
            mode,
            files,
            json_input,
            image,
            output,
        } => check(
            specs,
            &mode,
            &files,
            json_input.as_deref(),
            image,
            output,
            stdin,
            out,
            err,
        ),
        ExtraSpecsCommand::Facts => {
            let _ = writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&facts()).expect("JSON")
            );
            Exit::Ok
        }
    }
}

#[derive(Serialize)]
struct CheckReport<'a, T> {
    items: &'a [T],
    summary: Value,
}

#[allow(clippy::too_many_arguments)]
fn check(
    specs: Vec<String>,
    mode: &str,
    files: &[PathBuf],
    json_input: Option<&Path>,
    image: bool,
    output: Output,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Exit {
    let fail = |err: &mut dyn Write, e: String| {
        let _ = writeln!(err, "kubeplace extra-specs check: {e}");
        Exit::BadInput
    };
    let mode: ValidationMode = match mode.parse() {
        Ok(m) => m,
        Err(e) => return fail(err, format!("--mode: {e}")),
    };
    let mut pairs = Vec::new();
    for s in specs {
        match s.split_once('=') {
            Some((k, v)) => pairs.push((k.to_string(), v.to_string())),
            None => return fail(err, format!("{s:?} is not KEY=VALUE")),
        }
    }
    if let Some(path) = json_input {
        match read_pairs(path, stdin) {
            Ok(more) => pairs.extend(more),
            Err(e) => return fail(err, e),
        }
    }
    let (custom, rejected) = match custom_from_files(files, stdin) {
        Ok(c) => c,
        Err(e) => return fail(err, e),
    };
    for r in rejected {
        let _ = writeln!(
            err,
            "Warning: ExtraSpecDefinition {:?} is not usable: {}",
            r.name,
            r.problems.join("; ")
        );
    }
    let checked = if image {
        Checked::image_properties(&pairs)
    } else {
        Checked::extra_specs(&pairs, &Validators::with_custom(&custom), mode)
    };
    if let Err(e) = checked.write(output, out) {
        return fail(err, format!("cannot write output: {e}"));
    }
    if checked.rejected > 0 {
        Exit::Failed
    } else {
        Exit::Ok
    }
}

/// The verdicts of `kubeplace extra-specs check`: a row for people and a JSON item each.
#[derive(Default)]
struct Checked {
    /// Key, value, status and the problem or warning.
    rows: Vec<(String, String, String, String)>,
    items: Vec<Value>,
    rejected: usize,
    warnings: usize,
}

impl Checked {
    /// Glance image properties.
    fn image_properties(pairs: &[(String, String)]) -> Checked {
        let mut checked = Checked::default();
        for (k, v) in pairs {
            let o = check_image_property(k, v);
            if o.problem.is_some() {
                checked.rejected += 1;
            }
            if o.warning.is_some() {
                checked.warnings += 1;
            }
            let detail = o.problem.clone().or(o.warning.clone()).unwrap_or_default();
            checked
                .rows
                .push((k.clone(), v.clone(), o.status.to_string(), detail));
            checked.items.push(serde_json::to_value(&o).expect("JSON"));
        }
        checked
    }

    /// Flavor extra specs under `mode`.
    fn extra_specs(
        pairs: &[(String, String)],
        validators: &Validators<'_>,
        mode: ValidationMode,
    ) -> Checked {
        let mut checked = Checked::default();
        for (k, v) in pairs {
            let o = check_spec(k, v, validators, mode);
            let rejects = match o.status {
                Status::InvalidValue | Status::BadSyntax => true,
                Status::UnknownKey => mode == ValidationMode::Strict,
                _ => false,
            };
            if rejects {
                checked.rejected += 1;
            } else if o.warning.is_some() {
                checked.warnings += 1;
            }
            let detail = if rejects {
                o.problem
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            } else {
                o.warning.clone().unwrap_or_default()
            };
            let status = serde_json::to_value(o.status).expect("JSON");
            checked.rows.push((
                k.clone(),
                v.clone(),
                status.as_str().unwrap_or("").to_string(),
                detail,
            ));
            let mut item = serde_json::to_value(&o).expect("JSON");
            item["rejected"] = json!(rejects);
            checked.items.push(item);
        }
        checked
    }

    fn write(&self, output: Output, out: &mut dyn Write) -> std::io::Result<()> {
        let (rejected, warnings) = (self.rejected, self.warnings);
        let report = CheckReport {
            summary: json!({"checked": self.items.len(), "rejected": rejected, "warnings": warnings}),
            items: &self.items,
        };
        match output {
            Output::Json => writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&report).expect("JSON")
            ),
            Output::Yaml => write!(
                out,
                "{}",
                serde_saphyr::to_string(&report).unwrap_or_default()
            ),
            Output::Table => {
                for (k, v, s, d) in &self.rows {
                    writeln!(out, "{k}={v}  {s}  {d}")?;
                }
                writeln!(
                    out,
                    "{} checked, {rejected} rejected, {warnings} warnings",
                    self.rows.len()
                )
            }
        }
    }
}

fn facts() -> Value {
    let defs: Vec<Value> = Registry::in_tree()
        .definitions()
        .iter()
        .map(|d| {
            let mut v = json!({
                "key": d.key,
                "namespace": d.namespace,
                "type": d.value.type_name(),
                "deprecated": matches!(d.support, Support::Deprecated { .. }),
                "params": d.params.iter().map(|p| json!({"name": p.name, "pattern": p.pattern})).collect::<Vec<_>>(),
            });
            match &d.value {
                ValueType::Enum(m) => v["enum"] = json!(m),
                ValueType::Pattern(p) => v["pattern"] = json!(p.source()),
                ValueType::Int { min, max } => {
                    v["min"] = json!(min);
                    v["max"] = json!(max);
                }
                ValueType::String | ValueType::Bool => {}
            }
            if let Support::Deprecated { replacement } = &d.support {
                v["replacement"] = json!(replacement);
            }
            v
        })
        .collect();
    json!({"definitions": defs})
}
