//! A set of provider config files, processed as nova-compute processes its
//! provider_config_location: `*.yaml` names only (not hidden, not in subdirectories), in
//! lexicographic order, each provider identified once across all files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::file::{Checked, check_text};
use super::merge::Identification;
use super::problem::{Problem, ProviderRef};
use crate::placement::Inventory;

/// A file's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Valid,
    Invalid,
    Unreadable,
}

/// A problem with its sentence, ready to print.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// `FILE:LINE: provider N (ID): PATH: RULE`.
    pub text: String,
    #[serde(flatten)]
    pub problem: Problem,
}

/// What became of one file.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileReport {
    pub file: String,
    pub verdict: Verdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<String>,
    pub errors: Vec<Finding>,
    pub warnings: Vec<Finding>,
    /// Entries kept for the merge (with something additional and a valid identification).
    pub providers: usize,
    #[serde(skip)]
    pub checked: Checked,
}

/// One place a provider is identified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Place {
    pub file: String,
    pub provider: usize,
    pub identification: String,
}

/// The same uuid or name identified twice.
#[derive(Debug, Clone, Serialize)]
pub struct Duplicate {
    /// The uuid or name string (Nova's key: the string as written).
    pub key: String,
    pub first: Place,
    pub second: Place,
}

/// An inventory with Placement's defaults filled in, in the file's field names.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InventoryOut {
    pub total: i64,
    pub reserved: i64,
    pub min_unit: i64,
    pub max_unit: i64,
    pub step_size: i64,
    pub allocation_ratio: f64,
}

impl From<&Inventory> for InventoryOut {
    fn from(i: &Inventory) -> Self {
        InventoryOut {
            total: i.total,
            reserved: i.reserved,
            min_unit: i.min_unit,
            max_unit: i.max_unit,
            step_size: i.step_size,
            allocation_ratio: i.allocation_ratio,
        }
    }
}

/// What one identification adds, after all files.
#[derive(Debug, Clone, Serialize)]
pub struct Merged {
    /// The uuid or name string as written.
    pub key: String,
    /// `uuid …`, `name …` or `$COMPUTE_NODE` (every compute node root not otherwise identified).
    pub target: String,
    pub file: String,
    pub provider: usize,
    pub inventories: BTreeMap<String, InventoryOut>,
    pub traits: BTreeSet<String>,
}

/// Counts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub files: usize,
    pub valid: usize,
    pub invalid: usize,
    pub unreadable: usize,
    pub duplicates: usize,
    pub identifications: usize,
}

/// The whole outcome of validating paths.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub files: Vec<FileReport>,
    pub duplicates: Vec<Duplicate>,
    /// Things ignored or worth knowing that are not about a file's content.
    pub notes: Vec<String>,
    /// Per identification, what it adds (only when every file is valid, as Nova loads all or nothing;
    /// otherwise the entries of the valid files).
    pub merged: Vec<Merged>,
    pub summary: Summary,
}

impl Report {
    /// 0 when every file is valid, 1 when any is not, 2 when any could not be read.
    pub fn exit_code(&self) -> u8 {
        if self.summary.unreadable > 0 {
            2
        } else if self.summary.invalid > 0 || !self.duplicates.is_empty() {
            1
        } else {
            0
        }
    }
}

/// Which files of a directory Nova reads, and notes about the others.
pub(crate) fn list_directory(dir: &Path) -> std::io::Result<(Vec<PathBuf>, Vec<String>)> {
    let mut names: Vec<(String, PathBuf)> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| (e.file_name().to_string_lossy().into_owned(), e.path())))
        .collect::<Result<_, _>>()?;
    names.sort();
    let mut files = Vec::new();
    let mut notes = Vec::new();
    let shown = |p: &Path| p.display().to_string();
    for (name, path) in names {
        let is_dir = path.is_dir();
        if name.starts_with('.') {
            notes.push(format!(
                "{}: ignored: a hidden name (starting with a dot) is skipped, as Nova's *.yaml match skips it",
                shown(&path)
            ));
        } else if name.ends_with(".yaml") {
            files.push(path);
        } else if is_dir {
            notes.push(format!(
                "{}: ignored: a subdirectory; provider configs are read from the directory itself only",
                shown(&path)
            ));
        } else {
            let lower = name.to_ascii_lowercase();
            let hint = if lower.ends_with(".yml") || lower.ends_with(".yaml") {
                "; rename it to end in .yaml (lowercase) for it to be read"
            } else {
                ""
            };
            notes.push(format!(
                "{}: ignored: only names ending in .yaml are read{hint}",
                shown(&path)
            ));
        }
    }
    if files.is_empty() {
        notes.push(format!(
            "{}: no *.yaml file: there is no provider config to load",
            shown(dir)
        ));
    }
    Ok((files, notes))
}

#[cfg(unix)]
fn loose_permissions(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o7777;
    let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (true, true) => "its group and by others",
        (true, false) => "its group",
        (false, true) => "others",
        (false, false) => return None,
    };
    Some(format!(
        "is writable by {who} (mode {mode:04o}); provider configs change what the scheduler sees, so only their owner should be able to write them (chmod go-w)"
    ))
}

#[cfg(not(unix))]
fn loose_permissions(_meta: &std::fs::Metadata) -> Option<String> {
    None
}

fn read_file(path: &Path, given: bool, notes: &mut Vec<String>) -> FileReport {
    let file = path.display().to_string();
    let unreadable = |message: String| FileReport {
        file: file.clone(),
        verdict: Verdict::Unreadable,
        schema_version: None,
        errors: vec![Finding {
            text: format!("{file}: {message}"),
            problem: Problem {
                path: String::new(),
                provider: None,
                message,
                line: None,
                segs: Vec::new(),
            },
        }],
        warnings: Vec::new(),
        providers: 0,
        checked: Checked::default(),
    };
    if given {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') || !name.ends_with(".yaml") {
            notes.push(format!(
                "{file}: read because it was named; from its directory it would be ignored (only non-hidden names ending in .yaml are read)"
            ));
        }
    }
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => return unreadable(format!("cannot read: {e}")),
    };
    if meta.is_dir() {
        return unreadable(
            "is a directory, not a file; a name ending in .yaml is read as a file".into(),
        );
    }
    let text = match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(_) => return unreadable("is not UTF-8 text".into()),
        },
        Err(e) => return unreadable(format!("cannot read: {e}")),
    };
    let checked = match check_text(&text) {
        Ok(c) => c,
        Err(e) => return unreadable(e.to_string()),
    };
    let finding = |p: &Problem| Finding {
        text: p.located(&file),
        problem: p.clone(),
    };
    let mut warnings: Vec<Finding> = checked.warnings.iter().map(finding).collect();
    if let Some(w) = loose_permissions(&meta) {
        warnings.push(Finding {
            text: format!("{file}: {w}"),
            problem: Problem {
                path: String::new(),
                provider: None,
                message: w,
                line: None,
                segs: Vec::new(),
            },
        });
    }
    FileReport {
        file: file.clone(),
        verdict: if checked.is_valid() {
            Verdict::Valid
        } else {
            Verdict::Invalid
        },
        schema_version: checked.schema_version.clone(),
        errors: checked.errors.iter().map(finding).collect(),
        warnings,
        providers: checked.kept().count(),
        checked,
    }
}

/// Validates files and directories as one set of provider configs, in the order given (each
/// directory's files in lexicographic order).
pub fn validate_paths(paths: &[PathBuf]) -> Report {
    let mut notes = Vec::new();
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            #[cfg(unix)]
            if let Ok(meta) = std::fs::metadata(path)
                && let Some(w) = loose_permissions(&meta)
            {
                notes.push(format!("{}: the directory {w}", path.display()));
            }
            match list_directory(path) {
                Ok((found, more)) => {
                    notes.extend(more);
                    files.extend(found.iter().map(|f| read_file(f, false, &mut notes)));
                }
                Err(e) => files.push(
                    read_file(path, false, &mut notes)
                        .with_error(format!("cannot list the directory: {e}")),
                ),
            }
        } else {
            files.push(read_file(path, true, &mut notes));
        }
    }
    // Each uuid or name once across all files (entries with nothing additional do not count).
    let mut first: BTreeMap<String, Place> = BTreeMap::new();
    let mut duplicates = Vec::new();
    let mut merged = Vec::new();
    for report in &mut files {
        let mut extra = Vec::new();
        for entry in report.checked.kept() {
            let place = Place {
                file: report.file.clone(),
                provider: entry.index,
                identification: entry.written.clone(),
            };
            if let Some(earlier) = first.get(&entry.key) {
                if earlier.file != report.file {
                    let message = format!(
                        "{:?} is already identified in {} by provider {} ({}); each provider may be identified once across all provider configs",
                        entry.key, earlier.file, earlier.provider, earlier.identification
                    );
                    let problem = Problem {
                        path: format!("providers[{}].identification", entry.index),
                        provider: Some(ProviderRef {
                            index: entry.index,
                            identification: Some(entry.written.clone()),
                        }),
                        message,
                        line: None,
                        segs: Vec::new(),
                    };
                    extra.push(Finding {
                        text: problem.located(&report.file),
                        problem,
                    });
                }
                duplicates.push(Duplicate {
                    key: entry.key.clone(),
                    first: earlier.clone(),
                    second: place,
                });
                continue;
            }
            first.insert(entry.key.clone(), place);
            if report.verdict == Verdict::Valid {
                merged.push(Merged {
                    key: entry.key.clone(),
                    target: match &entry.identification {
                        Identification::ComputeNode => "$COMPUTE_NODE".to_string(),
                        other => other.to_string(),
                    },
                    file: report.file.clone(),
                    provider: entry.index,
                    inventories: entry
                        .inventories
                        .iter()
                        .map(|(c, i)| (c.clone(), InventoryOut::from(i)))
                        .collect(),
                    traits: entry.traits.clone(),
                });
            }
        }
        if !extra.is_empty() {
            report.errors.extend(extra);
            if report.verdict == Verdict::Valid {
                report.verdict = Verdict::Invalid;
            }
        }
    }
    // A duplicate's first entry may sit in a file that turned invalid; keep merged in step.
    merged.retain(|m| {
        files
            .iter()
            .any(|f| f.file == m.file && f.verdict == Verdict::Valid)
    });
    let summary = Summary {
        files: files.len(),
        valid: files.iter().filter(|f| f.verdict == Verdict::Valid).count(),
        invalid: files
            .iter()
            .filter(|f| f.verdict == Verdict::Invalid)
            .count(),
        unreadable: files
            .iter()
            .filter(|f| f.verdict == Verdict::Unreadable)
            .count(),
        duplicates: duplicates.len(),
        identifications: merged.len(),
    };
    Report {
        files,
        duplicates,
        notes,
        merged,
        summary,
    }
}

impl FileReport {
    fn with_error(mut self, message: String) -> Self {
        self.verdict = Verdict::Unreadable;
        self.errors = vec![Finding {
            text: format!("{}: {message}", self.file),
            problem: Problem {
                path: String::new(),
                provider: None,
                message,
                line: None,
                segs: Vec::new(),
            },
        }];
        self
    }
}
