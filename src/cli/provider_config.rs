//! `kubeplace provider-config`: Nova's provider config files, validated as nova-compute would
//! load them, and converted into ProviderConfig manifests.

use super::exit::Exit;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::output::Output;
use kubeplace_api::ProviderConfig;
use kubeplace_core::provider_config::directory::{Report, Verdict, validate_paths};
use kubeplace_core::provider_config::file::{check_parsed, parse_text};
use kubeplace_policy::translate::provider_config::file_value_to_spec;

#[derive(Subcommand, Debug)]
pub enum ProviderConfigCommand {
    /// Validate provider config files as nova-compute loads them: per-file verdicts and
    /// messages, identifications repeated across files, ignored files, loose permissions, and
    /// what each identification adds. PATHs are files or directories (their `*.yaml` files, in
    /// lexicographic order), taken together as one set. Exit 0 when every file is valid, 1
    /// when any is not, 2 when any cannot be read.
    Validate {
        /// Provider config files or directories.
        #[arg(required = true, num_args = 1..)]
        paths: Vec<PathBuf>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Print a ProviderConfig manifest (YAML) for each Nova provider config file, named after
    /// the file. Exit 0 when every file converts, 1 when any is invalid, 2 when any cannot be read.
    Convert {
        /// Provider config files.
        #[arg(required = true, num_args = 1..)]
        files: Vec<PathBuf>,
    },
}

/// Runs a `provider-config` subcommand; returns the exit code.
pub fn run(command: &ProviderConfigCommand, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    match command {
        ProviderConfigCommand::Validate { paths, output } => validate(paths, *output, out, err),
        ProviderConfigCommand::Convert { files } => convert(files, out, err),
    }
}

fn validate(paths: &[PathBuf], output: Output, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let report = validate_paths(paths);
    let written = match output {
        Output::Json => serde_json::to_string_pretty(&report)
            .map_err(|e| e.to_string())
            .and_then(|s| writeln!(out, "{s}").map_err(|e| e.to_string())),
        Output::Yaml => serde_saphyr::to_string(&report)
            .map_err(|e| e.to_string())
            .and_then(|s| write!(out, "{s}").map_err(|e| e.to_string())),
        Output::Table => write_table(&report, out).map_err(|e| e.to_string()),
    };
    if let Err(e) = written {
        let _ = writeln!(
            err,
            "kubeplace provider-config validate: cannot write output: {e}"
        );
        return Exit::BadInput;
    }
    Exit::from_code(report.exit_code())
}

fn write_table(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    for f in &report.files {
        let verdict = match f.verdict {
            Verdict::Valid => "valid",
            Verdict::Invalid => "invalid",
            Verdict::Unreadable => "unreadable",
        };
        let version = f
            .schema_version
            .as_deref()
            .map(|v| format!(", schema {v}"))
            .unwrap_or_default();
        writeln!(
            out,
            "{}: {verdict}{version}, {} provider(s) kept",
            f.file, f.providers
        )?;
        for e in &f.errors {
            writeln!(out, "  error: {}", e.text)?;
        }
        for w in &f.warnings {
            writeln!(out, "  warning: {}", w.text)?;
        }
    }
    for d in &report.duplicates {
        writeln!(
            out,
            "duplicate: {:?} is identified by {} provider {} ({}) and by {} provider {} ({})",
            d.key,
            d.first.file,
            d.first.provider,
            d.first.identification,
            d.second.file,
            d.second.provider,
            d.second.identification
        )?;
    }
    for n in &report.notes {
        writeln!(out, "note: {n}")?;
    }
    if !report.merged.is_empty() {
        writeln!(out, "merged:")?;
    }
    for m in &report.merged {
        let inventories: Vec<String> = m
            .inventories
            .iter()
            .map(|(c, i)| {
                format!(
                    "{c}(total={} reserved={} min_unit={} max_unit={} step_size={} allocation_ratio={})",
                    i.total, i.reserved, i.min_unit, i.max_unit, i.step_size, i.allocation_ratio
                )
            })
            .collect();
        let traits: Vec<&str> = m.traits.iter().map(String::as_str).collect();
        writeln!(
            out,
            "  {} (from {} provider {}): inventories [{}] traits [{}]",
            m.target,
            m.file,
            m.provider,
            inventories.join(", "),
            traits.join(", ")
        )?;
    }
    let s = &report.summary;
    writeln!(
        out,
        "{} file(s): {} valid, {} invalid, {} unreadable; {} duplicate identification(s); {} identification(s) merged",
        s.files, s.valid, s.invalid, s.unreadable, s.duplicates, s.identifications
    )
}

/// A file stem as a Kubernetes object name (RFC 1123 subdomain).
pub(crate) fn object_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let mut name = String::new();
    for c in stem.chars() {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-' {
            c
        } else {
            '-'
        };
        // No runs of separators.
        if (c == '-' || c == '.') && name.ends_with(['-', '.']) {
            continue;
        }
        name.push(c);
    }
    let mut name = name
        .trim_matches(|c| c == '-' || c == '.')
        .chars()
        .take(253)
        .collect::<String>();
    while name.ends_with(['-', '.']) {
        name.pop();
    }
    if name.is_empty() {
        "provider-config".to_string()
    } else {
        name
    }
}

fn convert(files: &[PathBuf], out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let mut code = Exit::Ok;
    let mut used = BTreeSet::new();
    let mut documents = Vec::new();
    for path in files {
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                let _ = writeln!(err, "kubeplace provider-config convert: {shown}: {e}");
                code = Exit::BadInput;
                continue;
            }
        };
        let parsed = match parse_text(&text) {
            Ok(p) => p,
            Err(e) => {
                let _ = writeln!(err, "kubeplace provider-config convert: {shown}: {e}");
                code = Exit::BadInput;
                continue;
            }
        };
        let checked = check_parsed(&parsed);
        for w in &checked.warnings {
            let _ = writeln!(err, "warning: {}", w.located(&shown));
        }
        if !checked.is_valid() {
            for e in &checked.errors {
                let _ = writeln!(err, "error: {}", e.located(&shown));
            }
            let _ = writeln!(
                err,
                "kubeplace provider-config convert: {shown} is not a valid provider config; not converted"
            );
            code = code.max(Exit::Failed);
            continue;
        }
        // Fields a ProviderConfig has no place for were warned about by the check above.
        let spec = match file_value_to_spec(&parsed.value) {
            Ok(s) => s,
            Err(e) => {
                let _ = writeln!(
                    err,
                    "kubeplace provider-config convert: {shown}: cannot convert: {e}"
                );
                code = code.max(Exit::Failed);
                continue;
            }
        };
        let base = object_name(path);
        let mut name = base.clone();
        let mut n = 2;
        while !used.insert(name.clone()) {
            name = format!("{base}-{n}");
            n += 1;
        }
        let object = ProviderConfig::new(&name, spec);
        match serde_saphyr::to_string(&object) {
            Ok(yaml) => documents.push(format!("# converted from {shown}\n{yaml}")),
            Err(e) => {
                let _ = writeln!(err, "kubeplace provider-config convert: {shown}: {e}");
                code = Exit::BadInput;
            }
        }
    }
    let _ = write!(out, "{}", documents.join("---\n"));
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_dns_names() {
        assert_eq!(
            object_name(Path::new("/etc/nova/provider_config/10_GPU.yaml")),
            "10-gpu"
        );
        assert_eq!(object_name(Path::new("--Weird__Name--.yaml")), "weird-name");
        assert_eq!(object_name(Path::new("a..b.yaml")), "a.b");
        assert_eq!(object_name(Path::new("___.yaml")), "provider-config");
        assert_eq!(
            object_name(Path::new(&format!("{}.yaml", "x".repeat(300)))).len(),
            253
        );
    }
}
