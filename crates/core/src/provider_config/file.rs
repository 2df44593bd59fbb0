//! One provider config file, as nova-compute reads it: parsing, every rule of the format,
//! and the entries it contributes.
//!
//! The same checks serve a file on disk and a ProviderConfig object: the object's spec is
//! turned into the file's shape first, and only the names in messages differ ([`Style`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::merge::{ConfigEntry, Identification};
use super::problem::{key, problem, provider_of, read_identification};
// Kept public here too: other crates name them through `provider_config::file`.
pub use super::problem::{COMPUTE_NODE_ID, Problem, ProviderRef, Seg, Style, camel, snake};
use super::schema::{self, Version};
use super::yaml11;
use crate::placement::Inventory;
use crate::yaml::{Located, Node};

/// The schema version kubeplace reads; a file with a higher 1.x minor loads with a warning.
pub(crate) const READ_VERSION: Version = Version { major: 1, minor: 0 };

/// One provider entry whose identification could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct FileEntry {
    /// Position in `providers`.
    pub index: usize,
    /// The uuid or name string as written: the key that must be unique across files.
    pub key: String,
    /// The identification as written, for messages (`name cn1`).
    pub written: String,
    /// What the entry targets (`name: $COMPUTE_NODE` targets compute nodes, as in Nova).
    pub identification: Identification,
    /// Inventories it adds, later items winning over earlier ones for the same class.
    pub inventories: BTreeMap<String, Inventory>,
    /// Traits it adds.
    pub traits: BTreeSet<String>,
    /// Whether the entry has no additional traits and no additional inventory items: such an
    /// entry is dropped before the duplicate check, as Nova does.
    pub dropped: bool,
    /// Whether the entry itself broke no rule.
    pub valid: bool,
}

impl FileEntry {
    /// The entry as a merge input.
    pub fn to_config_entry(&self, source: &str) -> ConfigEntry {
        ConfigEntry {
            source: source.to_string(),
            position: self.index,
            identification: self.identification.clone(),
            inventories: self.inventories.clone(),
            traits: self.traits.clone(),
        }
    }
}

/// The outcome of checking one file or one ProviderConfig spec.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    /// The schema version as written, when it is a string.
    pub schema_version: Option<String>,
    pub errors: Vec<Problem>,
    pub warnings: Vec<Problem>,
    /// Every entry with a readable identification, in file order.
    pub entries: Vec<FileEntry>,
}

impl Checked {
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    /// The entries that take part in duplicate checks and the merge: valid ones that add something.
    pub fn kept(&self) -> impl Iterator<Item = &FileEntry> {
        self.entries.iter().filter(|e| e.valid && !e.dropped)
    }
}

/// Why a file's text is not a YAML document at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not valid YAML: {0}")]
pub struct SyntaxError(pub String);

/// A file's text, parsed.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// How many YAML documents the text holds (a provider config file is one).
    pub documents: usize,
    /// The first document (null when there is none), with locations.
    pub root: Located,
    /// The first document's value, plain scalars read as YAML 1.1 (Nova's YAML library) reads them.
    pub value: Value,
    /// Line where the second document starts, if any.
    pub second_line: Option<u64>,
}

/// Parses a file's text.
pub fn parse_text(text: &str) -> Result<Parsed, SyntaxError> {
    let roots: Vec<serde_saphyr::Spanned<Node>> = serde_saphyr::from_multiple(text)
        .map_err(|e| SyntaxError(crate::yaml::syntax_message(&e)))?;
    let documents = roots.len();
    let mut roots = roots.into_iter().map(Located::from);
    let root = roots.next().unwrap_or(Located {
        node: Node::Null,
        line: 1,
        column: 1,
        bytes: None,
    });
    let second_line = roots.next().map(|r| r.line);
    let value = yaml11::to_json(&root, text);
    Ok(Parsed {
        documents,
        root,
        value,
        second_line,
    })
}

/// Parses and checks a file's text. A file holds one YAML document.
pub fn check_text(text: &str) -> Result<Checked, SyntaxError> {
    let parsed = parse_text(text)?;
    Ok(check_parsed(&parsed))
}

/// Checks a parsed file; messages carry lines.
pub fn check_parsed(parsed: &Parsed) -> Checked {
    if parsed.documents > 1 {
        let mut checked = Checked::default();
        checked.errors.push(problem(
            Style::File,
            &[],
            None,
            format!(
                "the file holds {} YAML documents; a provider config file is a single document (drop the `---` separators)",
                parsed.documents
            ),
            parsed.second_line,
        ));
        return checked;
    }
    let mut checked = check_value(&parsed.value, Style::File);
    for p in checked.errors.iter_mut().chain(checked.warnings.iter_mut()) {
        let segs: Vec<String> = p.segs.iter().map(Seg::as_str).collect();
        p.line = Some(parsed.root.locate(segs.iter().map(String::as_str)).line);
    }
    checked
}

/// A whole number, also when YAML wrote it as `1.0` (as JSON Schema's integer allows).
fn whole(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| f as i64)
    })
}

/// Known fields at each level that a later minor may extend.
const TOP_FIELDS: &[&str] = &["meta", "providers", "__source_file"];
const META_FIELDS: &[&str] = &["schema_version"];
const PROVIDER_FIELDS: &[&str] = &["identification", "inventories", "traits"];
const ADJECTIVES: &[&str] = &["additional"];

/// Every rule of the format over a file's value.
pub fn check_value(value: &Value, style: Style) -> Checked {
    let mut checked = Checked {
        schema_version: written_version(value),
        ..Checked::default()
    };
    let version = checked
        .schema_version
        .as_deref()
        .and_then(schema::parse_version);
    match version_rule(version, style) {
        Err(unreadable) => {
            checked.errors.push(unreadable);
            return checked;
        }
        Ok(newer) => checked.warnings.extend(newer),
    }
    checked.errors.extend(schema::problems(value, style));
    let rules = Rules {
        value,
        style,
        newer: version.is_some_and(|v| v.minor > READ_VERSION.minor),
    };
    // Warnings of the entries follow the version's, as they always have.
    let mut warnings = rules.unknown_top_and_meta_fields();
    let providers = value.get("providers").and_then(Value::as_array);
    for (i, provider) in providers.into_iter().flatten().enumerate() {
        rules.check_provider(i, provider, &mut checked, &mut warnings);
    }
    let duplicates = duplicate_identifications(&checked.entries, style);
    checked.errors.extend(duplicates);
    checked.warnings.extend(warnings);
    checked
}

/// `meta.schema_version` as written, when it is a string.
fn written_version(value: &Value) -> Option<String> {
    value
        .get("meta")
        .and_then(|m| m.get("schema_version"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The version rule: another major is an error that stops the check, a newer minor a warning.
fn version_rule(version: Option<Version>, style: Style) -> Result<Option<Problem>, Problem> {
    let Some(v) = version else {
        return Ok(None);
    };
    let version_segs = [key("meta"), key("schema_version")];
    if v.major != READ_VERSION.major {
        return Err(problem(
            style,
            &version_segs,
            None,
            format!(
                "schema version \"{v}\" is not supported: kubeplace reads major version 1 (any \"1.x\"); a file of another major version cannot be read"
            ),
            None,
        ));
    }
    if v.minor > READ_VERSION.minor {
        return Ok(Some(problem(
            style,
            &version_segs,
            None,
            format!(
                "schema version \"{v}\" is newer than {READ_VERSION}, which kubeplace reads; the file loads, and fields that version adds are ignored"
            ),
            None,
        )));
    }
    Ok(None)
}

/// What the per-entry rules read: the file's value, the message style, and whether the
/// file declares a newer minor than kubeplace reads.
struct Rules<'a> {
    value: &'a Value,
    style: Style,
    newer: bool,
}

/// What a provider entry's `inventories.additional` adds, and the problems found in it.
#[derive(Default)]
struct Additions {
    inventories: BTreeMap<String, Inventory>,
    items: usize,
    errors: Vec<Problem>,
    warnings: Vec<Problem>,
}

impl Rules<'_> {
    /// The warning for a field no rule knows at this level.
    fn unknown(&self, segs: &[Seg], field: &str, level: &str) -> Problem {
        let why = if self.newer {
            "a field of a newer 1.x minor, or a typo"
        } else {
            "not part of schema 1.0; a typo?"
        };
        problem(
            self.style,
            &[segs, &[key(field)]].concat(),
            provider_of(self.value, segs),
            format!(
                "unknown {level} field {}: {why}; it is ignored",
                self.style.field(field)
            ),
            None,
        )
    }

    /// Unknown fields at the top level and under `meta`.
    fn unknown_top_and_meta_fields(&self) -> Vec<Problem> {
        let mut warnings = Vec::new();
        if let Some(top) = self.value.as_object() {
            for k in top.keys().filter(|k| !TOP_FIELDS.contains(&k.as_str())) {
                warnings.push(self.unknown(&[], k, "top-level"));
            }
        }
        if let Some(meta) = self.value.get("meta").and_then(Value::as_object) {
            for k in meta.keys().filter(|k| !META_FIELDS.contains(&k.as_str())) {
                warnings.push(self.unknown(&[key("meta")], k, "meta"));
            }
        }
        warnings
    }

    /// Unknown fields of a provider entry and of its `inventories` and `traits` sections.
    fn unknown_provider_fields(&self, obj: &Map<String, Value>, at: &[Seg]) -> Vec<Problem> {
        let mut warnings = Vec::new();
        for k in obj
            .keys()
            .filter(|k| !PROVIDER_FIELDS.contains(&k.as_str()))
        {
            warnings.push(self.unknown(at, k, "provider"));
        }
        for section in ["inventories", "traits"] {
            if let Some(s) = obj.get(section).and_then(Value::as_object) {
                let here = [at.to_vec(), vec![key(section)]].concat();
                for k in s.keys().filter(|k| !ADJECTIVES.contains(&k.as_str())) {
                    warnings.push(self.unknown(&here, k, section));
                }
            }
        }
        warnings
    }

    /// Every rule of one provider entry; an entry with a readable identification is recorded.
    fn check_provider(
        &self,
        i: usize,
        provider: &Value,
        checked: &mut Checked,
        warnings: &mut Vec<Problem>,
    ) {
        let at = vec![key("providers"), Seg::Index(i)];
        let pref = provider_of(self.value, &at);
        let schema_errors = checked.errors.iter().any(|p| p.segs.starts_with(&at));
        let Some(obj) = provider.as_object() else {
            return;
        };
        warnings.extend(self.unknown_provider_fields(obj, &at));
        let Some((raw, written, identification)) = read_identification(provider) else {
            return;
        };
        warnings.extend(self.compute_node_by_name(obj, &identification, &at, &pref));
        let additions = self.additional_inventories(obj, &at, &pref);
        let valid = !schema_errors && additions.errors.is_empty();
        checked.errors.extend(additions.errors);
        warnings.extend(additions.warnings);
        let traits = additional_traits(obj);
        let dropped = traits.is_empty() && additions.items == 0;
        if dropped {
            warnings.push(problem(
                self.style,
                &at,
                pref.clone(),
                "the entry has no additional inventories or traits; it is ignored, and does not count when checking that each provider is identified once (as in Nova)".into(),
                None,
            ));
        }
        checked.entries.push(FileEntry {
            index: i,
            key: raw,
            written,
            identification,
            inventories: additions.inventories,
            traits,
            dropped,
            valid,
        });
    }

    /// `name: $COMPUTE_NODE` is read as the uuid, as Nova reads it; say so.
    fn compute_node_by_name(
        &self,
        obj: &Map<String, Value>,
        identification: &Identification,
        at: &[Seg],
        pref: &Option<ProviderRef>,
    ) -> Option<Problem> {
        let by_name = obj
            .get("identification")
            .and_then(|id| id.get("name"))
            .is_some();
        if !(matches!(identification, Identification::ComputeNode) && by_name) {
            return None;
        }
        Some(problem(
            self.style,
            &[at.to_vec(), vec![key("identification"), key("name")]].concat(),
            pref.clone(),
            format!(
                "name {COMPUTE_NODE_ID} is read as uuid {COMPUTE_NODE_ID}, as Nova reads it: the entry applies to every compute node not otherwise identified; write uuid: {COMPUTE_NODE_ID} to say so"
            ),
            None,
        ))
    }

    /// Inventories flattened, later items winning, with the cross-field rules the schema cannot say.
    fn additional_inventories(
        &self,
        obj: &Map<String, Value>,
        at: &[Seg],
        pref: &Option<ProviderRef>,
    ) -> Additions {
        let items = obj
            .get("inventories")
            .and_then(|i| i.get("additional"))
            .and_then(Value::as_array);
        let mut out = Additions {
            items: items.map_or(0, Vec::len),
            ..Additions::default()
        };
        for (j, item) in items.into_iter().flatten().enumerate() {
            let item_at = [
                at.to_vec(),
                vec![key("inventories"), key("additional"), Seg::Index(j)],
            ]
            .concat();
            let Some(map) = item.as_object() else {
                continue;
            };
            if map.is_empty() {
                out.warnings.push(problem(
                    self.style,
                    &item_at,
                    pref.clone(),
                    "the list item names no resource class and adds nothing".into(),
                    None,
                ));
            }
            for (class, inv) in map {
                let class_at = [item_at.clone(), vec![key(class)]].concat();
                let parsed = read_inventory(inv);
                let total_written = inv.get("total").and_then(whole).is_some();
                out.errors
                    .extend(self.inventory_bounds(&parsed, total_written, &class_at, pref));
                if out.inventories.insert(class.clone(), parsed).is_some() {
                    out.warnings.push(problem(
                        self.style,
                        &class_at,
                        pref.clone(),
                        format!("resource class {class} is listed more than once for this provider; the last one wins, as in Nova"),
                        None,
                    ));
                }
            }
        }
        out
    }

    /// Reserved within total and min_unit within max_unit, as Placement requires.
    fn inventory_bounds(
        &self,
        inv: &Inventory,
        total_written: bool,
        class_at: &[Seg],
        pref: &Option<ProviderRef>,
    ) -> Vec<Problem> {
        let style = self.style;
        let mut errors = Vec::new();
        if total_written && inv.reserved > inv.total {
            errors.push(problem(
                style,
                &[class_at.to_vec(), vec![key("reserved")]].concat(),
                pref.clone(),
                format!(
                    "{} ({}) is greater than {} ({}); Placement refuses an inventory that reserves more than its total",
                    style.field("reserved"),
                    inv.reserved,
                    style.field("total"),
                    inv.total
                ),
                None,
            ));
        }
        if inv.min_unit > inv.max_unit {
            errors.push(problem(
                style,
                &[class_at.to_vec(), vec![key("min_unit")]].concat(),
                pref.clone(),
                format!(
                    "{} ({}) is greater than {} ({}); no allocation could fit",
                    style.field("min_unit"),
                    inv.min_unit,
                    style.field("max_unit"),
                    inv.max_unit
                ),
                None,
            ));
        }
        errors
    }
}

/// One inventory's fields, each missing or unreadable one at Placement's default.
fn read_inventory(inv: &Value) -> Inventory {
    let field = |f: &str| inv.get(f).and_then(whole);
    let d = Inventory::default();
    Inventory {
        total: field("total").unwrap_or(d.total),
        reserved: field("reserved").unwrap_or(d.reserved),
        min_unit: field("min_unit").unwrap_or(d.min_unit),
        max_unit: field("max_unit").unwrap_or(d.max_unit),
        step_size: field("step_size").unwrap_or(d.step_size),
        allocation_ratio: inv
            .get("allocation_ratio")
            .and_then(Value::as_f64)
            .unwrap_or(d.allocation_ratio),
    }
}

/// The string traits of `traits.additional`.
fn additional_traits(obj: &Map<String, Value>) -> BTreeSet<String> {
    obj.get("traits")
        .and_then(|t| t.get("additional"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str().map(str::to_string))
        .collect()
}

/// The same uuid or name twice in one file, among entries that are not dropped.
fn duplicate_identifications(entries: &[FileEntry], style: Style) -> Vec<Problem> {
    let mut seen: BTreeMap<&str, &FileEntry> = BTreeMap::new();
    let mut duplicates = Vec::new();
    for e in entries.iter().filter(|e| !e.dropped) {
        if let Some(first) = seen.get(e.key.as_str()) {
            duplicates.push(problem(
                style,
                &[key("providers"), Seg::Index(e.index), key("identification")],
                Some(ProviderRef {
                    index: e.index,
                    identification: Some(e.written.clone()),
                }),
                format!(
                    "{:?} is already identified by {} ({}); each provider may be identified once across all provider configs",
                    e.key,
                    style.path(&[key("providers"), Seg::Index(first.index)]),
                    first.written
                ),
                None,
            ));
        } else {
            seen.insert(&e.key, e);
        }
    }
    duplicates
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "meta:\n  schema_version: '1.0'\nproviders:\n";

    fn check(body: &str) -> Checked {
        check_text(&format!("{HEAD}{body}")).expect("valid YAML")
    }

    fn messages(c: &Checked) -> Vec<String> {
        c.errors.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn the_sample_of_the_seed_loads() {
        let c = check(
            "- identification:\n    uuid: $COMPUTE_NODE\n  inventories:\n    additional:\n    - CUSTOM_LLC:\n        total: 22\n        reserved: 2\n        min_unit: 1\n        max_unit: 11\n        step_size: 1\n        allocation_ratio: 1\n  traits:\n    additional:\n    - CUSTOM_P_STATE_ENABLED\n",
        );
        assert!(c.is_valid(), "{:?}", messages(&c));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let e = &c.entries[0];
        assert_eq!(e.identification, Identification::ComputeNode);
        assert_eq!(e.inventories["CUSTOM_LLC"].max_unit, 11);
        assert!(e.traits.contains("CUSTOM_P_STATE_ENABLED"));
    }

    #[test]
    fn errors_name_line_provider_path_and_rule() {
        let c = check(
            "- identification:\n    name: cn1\n  inventories:\n    additional:\n    - CUSTOM_LLC:\n        total: lots\n",
        );
        assert_eq!(
            c.errors[0].located("a.yaml"),
            "a.yaml:9: provider 0 (name cn1): providers[0].inventories.additional[0].CUSTOM_LLC.total: must be a whole number; found the string \"lots\""
        );
    }

    #[test]
    fn resource_style_uses_spec_paths_and_camel_case() {
        let c = check_value(
            &serde_json::json!({"meta": {"schema_version": "1.0"}, "providers": [
                {"identification": {"name": "cn1"}, "inventories": {"additional": [
                    {"CUSTOM_X": {"total": 4, "min_unit": 8, "max_unit": 2}}]}}]}),
            Style::Resource,
        );
        assert_eq!(
            messages(&c),
            vec![
                "provider 0 (name cn1): spec.providers[0].inventories.additional[0].CUSTOM_X.minUnit: minUnit (8) is greater than maxUnit (2); no allocation could fit"
            ]
        );
    }

    #[test]
    fn empty_entries_are_dropped_before_the_duplicate_check() {
        let c = check(
            "- identification:\n    name: cn1\n- identification:\n    name: cn1\n  traits:\n    additional: [CUSTOM_A]\n",
        );
        assert!(c.is_valid(), "{:?}", messages(&c));
        assert!(c.entries[0].dropped && !c.entries[1].dropped);
        assert!(c.warnings[0].message.contains("is ignored"));
    }

    #[test]
    fn duplicates_in_one_file_name_both_entries() {
        let c = check(
            "- identification:\n    name: cn1\n  traits:\n    additional: [CUSTOM_A]\n- identification:\n    name: cn1\n  traits:\n    additional: [CUSTOM_B]\n",
        );
        assert_eq!(
            messages(&c),
            vec![
                "provider 1 (name cn1): providers[1].identification: \"cn1\" is already identified by providers[0] (name cn1); each provider may be identified once across all provider configs"
            ]
        );
    }

    #[test]
    fn multiple_documents_are_refused() {
        let c = check_text("meta:\n  schema_version: '1.0'\n---\nmeta:\n  schema_version: '1.0'\n")
            .unwrap();
        assert!(messages(&c)[0].contains("2 YAML documents"));
    }
}
