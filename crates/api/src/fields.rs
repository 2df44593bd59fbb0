//! Unknown fields, found as the API server finds them: against the schema of each kind's CRD
//! (what `kubeplace crds` prints), with `metadata` checked against ObjectMeta's schema and a
//! core Namespace against its own, so no list of field names is kept by hand.
//!
//! The API server's strict field validation (kubectl's default `--validate=strict`) refuses
//! an object with a field its schema does not name; with `--validate=false` it drops the
//! field. `kubeplace apply` does either, so that offline and cluster verdicts agree.

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value, json};

use crate::{Kind, all_crds};
use kubeplace_core::placement::closest;
use kubeplace_core::yaml::{Located, Node};
use kubeplace_core::yaml_plain::PlainNode;

/// A field that the schema where it is written does not name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    /// The field's path as the API server writes it: `spec.diskGB`,
    /// `spec.inventories.VCPU.totl`, `spec.allocations[0].provder`.
    pub path: String,
    /// The line its value starts on.
    pub line: u64,
    /// The known field at the same place closest to it, if one is close.
    pub suggestion: Option<String>,
    /// The fields known at that place, sorted.
    pub known: Vec<String>,
}

impl fmt::Display for UnknownField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The API server's words first: `unknown field "spec.diskGB"`.
        write!(f, "unknown field {:?}", self.path)?;
        if let Some(s) = &self.suggestion {
            write!(f, " (did you mean {s}?)")?;
        }
        let parent = match self.path.rfind(['.', '[']) {
            Some(i) => format!("{} has", &self.path[..i]),
            None => "the top level has".to_string(),
        };
        write!(f, "; {parent} the fields {}", self.known.join(", "))
    }
}

/// The schemas checked against, built once from the types.
struct Schemas {
    /// Each kind's CRD schema with `apiVersion`, `kind` and ObjectMeta as `metadata`, in
    /// [`Kind::ALL`] order.
    kinds: Vec<Value>,
    namespace: Value,
}

fn schemas() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let meta = serde_json::to_value(schemars::schema_for!(ObjectMeta)).unwrap_or_default();
        let crds: Vec<Value> = all_crds()
            .iter()
            .map(|crd| {
                crd.spec
                    .versions
                    .first()
                    .and_then(|v| v.schema.as_ref())
                    .and_then(|s| s.open_api_v3_schema.as_ref())
                    .and_then(|s| serde_json::to_value(s).ok())
                    .unwrap_or_default()
            })
            .collect();
        Schemas {
            kinds: crds.into_iter().map(|crd| with_meta(crd, &meta)).collect(),
            namespace: serde_json::to_value(schemars::schema_for!(Namespace)).unwrap_or_default(),
        }
    })
}

/// A CRD's root schema as the API server applies it: the CRD names `spec` and `status`,
/// and every object also has `apiVersion`, `kind` and ObjectMeta's `metadata`.
fn with_meta(mut crd: Value, meta: &Value) -> Value {
    let mut meta = meta.clone();
    // ObjectMeta's own references (`#/$defs/OwnerReference`) resolve from the root.
    let defs = meta
        .as_object_mut()
        .and_then(|m| m.remove("$defs"))
        .unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(root) = crd.as_object_mut() {
        let properties = root
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(p) = properties.as_object_mut() {
            p.insert("apiVersion".into(), json!({"type": "string"}));
            p.insert("kind".into(), json!({"type": "string"}));
            p.insert("metadata".into(), meta);
        }
        root.insert("$defs".into(), defs);
    }
    crd
}

/// The unknown fields of a kubeplace object's document, in document order.
pub fn unknown_fields(kind: Kind, document: &Located) -> Vec<UnknownField> {
    let index = Kind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
    let checks = field_checks();
    let mut found = Vec::new();
    if let Some(root) = checks.kinds.get(index) {
        checks.tree.walk(document, *root, "", &mut found);
    }
    found
}

/// The unknown fields of a core Namespace's document.
pub fn unknown_namespace_fields(document: &Located) -> Vec<UnknownField> {
    let checks = field_checks();
    let mut found = Vec::new();
    checks.tree.walk(document, checks.namespace, "", &mut found);
    found
}

/// A document read without locations, as the quick check walks it: a JSON value or a plain
/// reader's tree.
pub trait Unlocated {
    /// For a mapping, whether `f` holds for one of its entries; `None` for anything else.
    fn any_entry(&self, f: impl FnMut(&str, &Self) -> bool) -> Option<bool>;
    /// For a list, whether `f` holds for one of its items; `None` for anything else.
    fn any_item(&self, f: impl FnMut(&Self) -> bool) -> Option<bool>;
}

impl Unlocated for Value {
    fn any_entry(&self, mut f: impl FnMut(&str, &Self) -> bool) -> Option<bool> {
        match self {
            Value::Object(entries) => Some(entries.iter().any(|(k, v)| f(k, v))),
            _ => None,
        }
    }

    fn any_item(&self, f: impl FnMut(&Self) -> bool) -> Option<bool> {
        match self {
            Value::Array(items) => Some(items.iter().any(f)),
            _ => None,
        }
    }
}

impl Unlocated for PlainNode<'_> {
    fn any_entry(&self, mut f: impl FnMut(&str, &Self) -> bool) -> Option<bool> {
        match self {
            PlainNode::Map(entries) => Some(entries.iter().any(|(k, v)| f(k, v))),
            _ => None,
        }
    }

    fn any_item(&self, f: impl FnMut(&Self) -> bool) -> Option<bool> {
        match self {
            PlainNode::Seq(items) => Some(items.iter().any(f)),
            _ => None,
        }
    }
}

/// Whether a kubeplace object's document, read without locations, has a field its kind's
/// schema does not name: the same rules as [`unknown_fields`], without building messages.
pub fn has_unknown_fields(kind: Kind, document: &impl Unlocated) -> bool {
    let index = Kind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
    let checks = field_checks();
    checks
        .kinds
        .get(index)
        .is_some_and(|root| checks.tree.any_unknown(document, *root))
}

/// Whether a core Namespace's document, read without locations, has an unknown field.
pub fn has_unknown_namespace_fields(document: &impl Unlocated) -> bool {
    let checks = field_checks();
    checks.tree.any_unknown(document, checks.namespace)
}

/// The schemas of [`Schemas`] reduced to what the field checks read, with references and
/// single-branch wrappers followed once: a document (a clean one among thousands, or one
/// whose mistakes are named) is checked without resolving `$ref`s or looking up schema
/// keywords at each of its values.
struct FieldChecks {
    tree: FieldTree,
    /// Each kind's root node, in [`Kind::ALL`] order.
    kinds: Vec<usize>,
    namespace: usize,
}

fn field_checks() -> &'static FieldChecks {
    static CHECKS: OnceLock<FieldChecks> = OnceLock::new();
    CHECKS.get_or_init(|| {
        let schemas = schemas();
        let mut tree = FieldTree::default();
        let kinds = schemas
            .kinds
            .iter()
            .map(|root| tree.compile(root, root, &mut HashMap::new()))
            .collect();
        let namespace = tree.compile(&schemas.namespace, &schemas.namespace, &mut HashMap::new());
        FieldChecks {
            tree,
            kinds,
            namespace,
        }
    })
}

/// What one (resolved) schema says of the fields and items of a value checked against it.
#[derive(Debug, Default)]
struct FieldNode {
    /// `x-kubernetes-preserve-unknown-fields`: nothing below is unknown.
    preserves_unknown: bool,
    /// `properties`, sorted by name, when the schema has them.
    properties: Option<Vec<(Box<str>, usize)>>,
    /// An `additionalProperties` schema: every field not named is checked against it.
    additional: Option<usize>,
    /// `additionalProperties: true`: fields not named are allowed.
    additional_allowed: bool,
    /// `items`: every item of a list is checked against it.
    items: Option<usize>,
}

/// Compiled schema nodes; references may form cycles, so children are indices.
#[derive(Debug, Default)]
struct FieldTree {
    nodes: Vec<FieldNode>,
}

impl FieldTree {
    /// The node of `schema` (resolved from `root`), compiling it and what it reaches once;
    /// `seen` maps a resolved schema's address to its node.
    fn compile(&mut self, schema: &Value, root: &Value, seen: &mut HashMap<usize, usize>) -> usize {
        let schema = resolve(schema, root);
        let address = schema as *const Value as usize;
        if let Some(node) = seen.get(&address) {
            return *node;
        }
        let at = self.nodes.len();
        self.nodes.push(FieldNode::default());
        seen.insert(address, at);
        let mut node = FieldNode {
            preserves_unknown: preserves_unknown(schema),
            ..FieldNode::default()
        };
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            let mut named: Vec<(Box<str>, usize)> = properties
                .iter()
                .map(|(name, s)| (name.as_str().into(), self.compile(s, root, seen)))
                .collect();
            named.sort_by(|a, b| a.0.cmp(&b.0));
            node.properties = Some(named);
        }
        match schema.get("additionalProperties") {
            Some(a) if a.is_object() => node.additional = Some(self.compile(a, root, seen)),
            Some(Value::Bool(true)) => node.additional_allowed = true,
            _ => {}
        }
        if let Some(items) = schema.get("items") {
            node.items = Some(self.compile(items, root, seen));
        }
        self.nodes[at] = node;
        at
    }

    /// Whether a value, read without locations, has a field its node does not name.
    fn any_unknown<T: Unlocated>(&self, value: &T, at: usize) -> bool {
        let node = &self.nodes[at];
        if node.preserves_unknown {
            return false;
        }
        if let Some(found) = value.any_entry(|key, value| match node.rule(key) {
            FieldRule::Known(child) => self.any_unknown(value, child),
            FieldRule::Unknown => true,
            FieldRule::Free => false,
        }) {
            return found;
        }
        match node.items {
            Some(child) => value
                .any_item(|item| self.any_unknown(item, child))
                .unwrap_or(false),
            None => false,
        }
    }

    /// The unknown fields of a located value, with their paths, lines and the fields known
    /// where each is written.
    fn walk(&self, value: &Located, at: usize, path: &str, found: &mut Vec<UnknownField>) {
        let node = &self.nodes[at];
        if node.preserves_unknown {
            return;
        }
        match &value.node {
            Node::Map(entries) => {
                for (key, value) in entries {
                    let here = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    match node.rule(key) {
                        FieldRule::Known(child) => self.walk(value, child, &here, found),
                        FieldRule::Unknown => {
                            let names: Vec<&str> = node
                                .properties
                                .iter()
                                .flatten()
                                .map(|(name, _)| &**name)
                                .collect();
                            found.push(UnknownField {
                                path: here,
                                line: value.line,
                                suggestion: closest(key, &names),
                                known: names.iter().map(|n| n.to_string()).collect(),
                            });
                        }
                        FieldRule::Free => {}
                    }
                }
            }
            Node::Seq(items) => {
                if let Some(child) = node.items {
                    for (i, item) in items.iter().enumerate() {
                        self.walk(item, child, &format!("{path}[{i}]"), found);
                    }
                }
            }
            _ => {}
        }
    }
}

/// What a node says of one field of a mapping.
enum FieldRule {
    /// A known field (or any field of a map of values), with its node.
    Known(usize),
    /// A field the schema does not name, where it names some.
    Unknown,
    /// A free-form object (neither properties nor additionalProperties): nothing is unknown.
    Free,
}

impl FieldNode {
    fn rule(&self, key: &str) -> FieldRule {
        let named = self.properties.as_ref().and_then(|p| {
            p.binary_search_by(|(name, _)| (**name).cmp(key))
                .ok()
                .map(|i| p[i].1)
        });
        match (named, self.additional) {
            (Some(child), _) | (None, Some(child)) => FieldRule::Known(child),
            (None, None) if self.properties.is_some() && !self.additional_allowed => {
                FieldRule::Unknown
            }
            (None, None) => FieldRule::Free,
        }
    }
}

fn preserves_unknown(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

/// Follows `$ref`s and single-branch `allOf`/`anyOf`/`oneOf` wrappers (how schemars writes
/// a referenced or optional type) to the schema that names the fields. Bounded, as
/// references may form a cycle.
fn resolve<'a>(mut schema: &'a Value, root: &'a Value) -> &'a Value {
    for _ in 0..32 {
        if let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|pointer| root.pointer(pointer))
        {
            schema = target;
            continue;
        }
        let single = ["allOf", "anyOf", "oneOf"].iter().find_map(|k| {
            let branches: Vec<&Value> = schema
                .get(*k)?
                .as_array()?
                .iter()
                .filter(|b| b.get("type") != Some(&json!("null")))
                .collect();
            (branches.len() == 1).then(|| branches[0])
        });
        match single {
            Some(next) if schema.get("properties").is_none() => schema = next,
            _ => break,
        }
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    fn located(yaml: &str) -> Located {
        let roots: Vec<serde_saphyr::Spanned<Node>> = serde_saphyr::from_multiple(yaml).unwrap();
        Located::from(roots.into_iter().next().unwrap())
    }

    const FLAVOR: &str = "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: m1\n  labels: {a: b}\nspec:\n  vcpus: 1\n  memoryMb: 512\n  extraSpecs:\n    hw:cpu_policy: dedicated\n";

    #[test]
    fn a_well_formed_object_has_none() {
        assert_eq!(unknown_fields(Kind::Flavor, &located(FLAVOR)), vec![]);
    }

    #[test]
    fn a_typo_in_spec_names_path_line_and_the_field_meant() {
        let found = unknown_fields(Kind::Flavor, &located(&format!("{FLAVOR}  diskGB: 10\n")));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].path, "spec.diskGB");
        assert_eq!(found[0].line, 11);
        assert_eq!(found[0].suggestion.as_deref(), Some("diskGb"));
        assert_eq!(
            found[0].to_string(),
            "unknown field \"spec.diskGB\" (did you mean diskGb?); spec has the fields description, diskGb, ephemeralGb, extraSpecs, isPublic, memoryMb, serviceProfiles, swapMb, vcpus"
        );
    }

    #[test]
    fn top_level_metadata_status_maps_and_lists_are_checked() {
        let yaml = FLAVOR.replace("  labels:", "  lables:") + "status:\n  bogus: 1\nspce: {}\n";
        let found: Vec<String> = unknown_fields(Kind::Flavor, &located(&yaml))
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(found, ["metadata.lables", "status.bogus", "spce"]);
        let top = unknown_fields(Kind::Flavor, &located(&(FLAVOR.to_string() + "spce: {}\n")));
        assert_eq!(top[0].suggestion.as_deref(), Some("spec"));
        assert!(
            top[0]
                .to_string()
                .ends_with("the top level has the fields apiVersion, kind, metadata, spec, status"),
            "{}",
            top[0]
        );
        // The value of a map (an inventory) and the items of a list (allocations).
        let provider = "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn1\nspec:\n  inventories:\n    VCPU:\n      total: 4\n      totl: 5\n";
        let found = unknown_fields(Kind::ResourceProvider, &located(provider));
        assert_eq!(found[0].path, "spec.inventories.VCPU.totl");
        assert_eq!(found[0].suggestion.as_deref(), Some("total"));
        let allocation = "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: a\nspec:\n  consumer: 5c8ed9b0-7a1f-4a3e-9a59-3f4c1f6e2b11\n  allocations:\n  - provider: cn1\n    resorces: {VCPU: 1}\n";
        let found = unknown_fields(Kind::Allocation, &located(allocation));
        assert_eq!(found[0].path, "spec.allocations[0].resorces");
        assert_eq!(found[0].suggestion.as_deref(), Some("resources"));
        // ObjectMeta's nested types are checked through their references.
        let owned = FLAVOR.replace(
            "  labels: {a: b}\n",
            "  ownerReferences:\n  - {apiVersion: v1, kind: X, name: x, uid: u, bogus: 1}\n",
        );
        let found = unknown_fields(Kind::Flavor, &located(&owned));
        assert_eq!(found[0].path, "metadata.ownerReferences[0].bogus");
    }

    #[test]
    fn free_form_fields_take_anything() {
        // A ServiceProfile's rendered metadata in status is free-form.
        let server = "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata:\n  name: s\nspec:\n  flavor: f\n  image: i\n  flavorMeta: {anything: 1}\nstatus:\n  renderedMetadata: {anything: {at: all}}\n";
        assert_eq!(unknown_fields(Kind::Server, &located(server)), vec![]);
    }

    #[test]
    fn a_namespace_is_checked_against_its_own_schema() {
        let ns = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels: {a: b}\nspec:\n  finalizerz: []\n";
        let found = unknown_namespace_fields(&located(ns));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].path, "spec.finalizerz");
        assert_eq!(found[0].suggestion.as_deref(), Some("finalizers"));
    }

    /// The check of clean documents (compiled schemas, no messages) finds an unknown field
    /// exactly where the located walk does, at every depth: maps of values, lists, ObjectMeta's
    /// references, free-form fields, a Namespace.
    #[test]
    fn the_quick_check_agrees_with_the_located_walk() {
        let provider = "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn1\nspec:\n  inventories:\n    VCPU:\n      total: 4\n";
        let allocation = "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: a\nspec:\n  consumer: 5c8ed9b0-7a1f-4a3e-9a59-3f4c1f6e2b11\n  allocations:\n  - provider: cn1\n    resources: {VCPU: 1}\n";
        let server = "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata:\n  name: s\nspec:\n  flavor: f\n  image: i\n  flavorMeta: {anything: 1}\nstatus:\n  renderedMetadata: {anything: {at: all}}\n";
        let owned = FLAVOR.replace(
            "  labels: {a: b}\n",
            "  ownerReferences:\n  - {apiVersion: v1, kind: X, name: x, uid: u}\n",
        );
        let cases: Vec<(Kind, String, bool)> = vec![
            (Kind::Flavor, FLAVOR.to_string(), false),
            (Kind::Flavor, format!("{FLAVOR}  diskGB: 10\n"), true),
            (Kind::Flavor, FLAVOR.replace("  labels:", "  lables:"), true),
            (Kind::Flavor, format!("{FLAVOR}status:\n  bogus: 1\n"), true),
            (Kind::Flavor, format!("{FLAVOR}spce: {{}}\n"), true),
            (Kind::Flavor, owned.clone(), false),
            (
                Kind::Flavor,
                owned.replace("uid: u}", "uid: u, bogus: 1}"),
                true,
            ),
            (Kind::ResourceProvider, provider.to_string(), false),
            (
                Kind::ResourceProvider,
                format!("{provider}      totl: 5\n"),
                true,
            ),
            (Kind::Allocation, allocation.to_string(), false),
            (
                Kind::Allocation,
                allocation.replace("    resources:", "    resorces:"),
                true,
            ),
            (Kind::Server, server.to_string(), false),
            (Kind::Server, format!("{server}  bogus: 1\n"), true),
        ];
        let mut plain_read = 0;
        for (kind, yaml, unknown) in &cases {
            let value: Value = serde_saphyr::from_str(yaml).unwrap();
            let walked = !unknown_fields(*kind, &located(yaml)).is_empty();
            assert_eq!(walked, *unknown, "the walk, {kind:?}:\n{yaml}");
            assert_eq!(
                has_unknown_fields(*kind, &value),
                *unknown,
                "{kind:?}:\n{yaml}"
            );
            // The plain reader's tree, as the fast path checks it (a uuid written plain is
            // not in its subset).
            if let Ok(plain) = kubeplace_core::yaml_plain::read_plain(yaml) {
                plain_read += 1;
                assert_eq!(
                    has_unknown_fields(*kind, &plain[0].value),
                    *unknown,
                    "plain, {kind:?}:\n{yaml}"
                );
            }
            let text = value.to_string();
            let json: PlainNode<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(has_unknown_fields(*kind, &json), *unknown, "json, {kind:?}");
        }
        assert!(plain_read >= 10, "{plain_read}");
        let ns =
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\nspec:\n  finalizers: []\n";
        let value = |y: &str| serde_saphyr::from_str::<Value>(y).unwrap();
        assert!(!has_unknown_namespace_fields(&value(ns)));
        assert!(has_unknown_namespace_fields(&value(
            &ns.replace("finalizers", "finalizerz")
        )));
        let plain = |y: &str| {
            kubeplace_core::yaml_plain::read_plain(y).unwrap()[0]
                .value
                .clone()
                .into_owned()
        };
        assert!(!has_unknown_namespace_fields(&plain(ns)));
        assert!(has_unknown_namespace_fields(&plain(
            &ns.replace("finalizers", "finalizerz")
        )));
    }
}
