//! Provider config files: every rule of the format with a good and a bad file, the intent of
//! Nova's own fixtures, directory rules, and the `kubeplace provider-config` commands.

use std::path::Path;
use std::process::{Command, Output};

use kubeplace_core::provider_config::{Identification, check_text};
use serde_json::Value;

const HEAD: &str = "meta:\n  schema_version: '1.0'\nproviders:\n";
const UUID: &str = "aa884151-b4e2-4e82-9fd4-81cfcd01abb9";

fn errors(text: &str) -> Vec<String> {
    check_text(text)
        .expect("valid YAML")
        .errors
        .iter()
        .map(|p| p.located("f.yaml"))
        .collect()
}

fn warnings(text: &str) -> Vec<String> {
    check_text(text)
        .expect("valid YAML")
        .warnings
        .iter()
        .map(|p| p.located("f.yaml"))
        .collect()
}

fn provider(body: &str) -> String {
    format!("{HEAD}{body}")
}

/// Files that load, each with the rule it exercises (Nova's validation_success and
/// validate_provider_good_config fixtures, in our own words, and more).
#[test]
fn valid_files_load() {
    let cases = [
        ("by uuid", format!("- identification:\n    uuid: {UUID}\n  traits:\n    additional: [CUSTOM_A]\n")),
        ("by upper-case uuid", format!("- identification:\n    uuid: {}\n  traits:\n    additional: [CUSTOM_A]\n", UUID.to_uppercase())),
        ("magic uuid", "- identification:\n    uuid: \"$COMPUTE_NODE\"\n  traits:\n    additional: [CUSTOM_A]\n".into()),
        ("by name", "- identification:\n    name: custom_provider\n  traits:\n    additional: [CUSTOM_A]\n".into()),
        ("name of 200 characters", format!("- identification:\n    name: {}\n  traits:\n    additional: [CUSTOM_A]\n", "n".repeat(200))),
        ("one inventory", "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_RESOURCE1:\n        total: 1\n".into()),
        ("every inventory field", "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_X:\n        total: 100\n        reserved: 0\n        min_unit: 1\n        max_unit: 10\n        step_size: 1\n        allocation_ratio: 1.0\n".into()),
        ("whole-number total written 4.0", "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_X:\n        total: 4.0\n".into()),
        ("integer ratio", "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_X:\n        total: 4\n        allocation_ratio: 2\n".into()),
        ("several inventory items", "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_RESOURCE1:\n        total: 1\n    - CUSTOM_RESOURCE2:\n        total: 1\n".into()),
        ("several classes in one item", "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_A: {total: 1}\n      CUSTOM_B: {total: 2}\n".into()),
        ("unknown inventory adjective", "- identification:\n    name: n\n  inventories:\n    invalid_adjective:\n    - CUSTOM_RESOURCE1:\n        total: 1\n  traits:\n    additional: [CUSTOM_A]\n".into()),
        ("one trait", "- identification:\n    name: n\n  traits:\n    additional:\n    - CUSTOM_TRAIT1\n".into()),
        ("several traits", "- identification:\n    name: n\n  traits:\n    additional: [CUSTOM_TRAIT1, CUSTOM_TRAIT2]\n".into()),
        ("unknown trait adjective", "- identification:\n    name: n\n  traits:\n    invalid: [CUSTOM_TRAIT1]\n".into()),
        ("inventories and traits", "- identification:\n    uuid: $COMPUTE_NODE\n  inventories:\n    additional:\n    - CUSTOM_RESOURCE1: {total: 1}\n  traits:\n    additional: [CUSTOM_TRAIT1]\n".into()),
        ("entry without additions", "- identification:\n    name: name\n".into()),
        ("empty trait list", "- identification:\n    name: name\n  traits:\n    additional: []\n".into()),
        ("empty inventory list", format!("- identification:\n    uuid: {UUID}\n  inventories:\n    additional: []\n")),
        ("four entries, one inventory each", format!("- identification:\n    name: name1\n  inventories:\n    additional: [CUSTOM_R: {{total: 1}}]\n- identification:\n    name: name2\n  inventories:\n    additional: [CUSTOM_R: {{total: 1}}]\n- identification:\n    uuid: {UUID}\n  inventories:\n    additional: [CUSTOM_R: {{total: 1}}]\n- identification:\n    uuid: 5213b75d-9260-42a6-b236-f39b0fd10561\n  inventories:\n    additional: [CUSTOM_R: {{total: 1}}]\n")),
        ("no providers at all", String::new()),
    ];
    for (rule, body) in cases {
        // `providers:` with nothing after it is null, which Nova refuses too.
        let text = if body.is_empty() {
            "meta:\n  schema_version: '1.0'\nproviders: []\n".to_string()
        } else {
            provider(&body)
        };
        let errors = errors(&text);
        assert!(errors.is_empty(), "{rule}: {errors:?}");
    }
    assert!(
        errors("meta:\n  schema_version: '1.0'\n").is_empty(),
        "meta alone"
    );
    assert!(
        errors("meta:\n  schema_version: '1.12'\n").is_empty(),
        "any 1.x minor"
    );
}

/// Files that are refused, each with the rule and a part of kubeplace's message (Nova's
/// validation_error and validate_provider_bad_config fixtures, in our own words, and more).
#[test]
fn invalid_files_are_refused_with_their_reason() {
    let p = |body: &str| provider(body);
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "no meta",
            "{}\n".into(),
            "f.yaml:1: meta: is missing; a provider config starts with meta",
        ),
        (
            "no schema version",
            "meta: {}\n".into(),
            "f.yaml:1: meta.schema_version: is missing; set it to '1.0'",
        ),
        (
            "unquoted version",
            "meta:\n  schema_version: 1.0\n".into(),
            "f.yaml:2: meta.schema_version: must be a string such as '1.0'; found the number 1.0: quote it",
        ),
        (
            "unsupported major",
            "meta:\n  schema_version: '99.99'\n".into(),
            "f.yaml:2: meta.schema_version: schema version \"99.99\" is not supported: kubeplace reads major version 1",
        ),
        (
            "major 0",
            "meta:\n  schema_version: '0.9'\n".into(),
            "schema version \"0.9\" is not supported",
        ),
        (
            "minor with leading zero",
            "meta:\n  schema_version: '1.05'\n".into(),
            "\"1.05\" is not a schema version: write \"1.N\"",
        ),
        (
            "version without minor",
            "meta:\n  schema_version: '1'\n".into(),
            "\"1\" is not a schema version",
        ),
        (
            "empty file",
            String::new(),
            "f.yaml:1: (the whole file): the file must be a mapping with meta and providers; found nothing (null)",
        ),
        (
            "a list, not a mapping",
            "- meta: {}\n".into(),
            "the file must be a mapping with meta and providers; found a list",
        ),
        (
            "two documents",
            format!("{HEAD}---\n{HEAD}"),
            "the file holds 2 YAML documents",
        ),
        (
            "__source_file set",
            format!("{HEAD}__source_file: present\n"),
            "f.yaml:4: __source_file: is reserved",
        ),
        (
            "__source_file null",
            format!("{HEAD}__source_file: null\n"),
            "__source_file: is reserved",
        ),
        (
            "providers left empty (null)",
            HEAD.into(),
            "f.yaml:3: providers: must be a list; found nothing (null)",
        ),
        (
            "providers not a list",
            "meta:\n  schema_version: '1.0'\nproviders: {a: 1}\n".into(),
            "f.yaml:3: providers: must be a list; found a mapping",
        ),
        (
            "provider not a mapping",
            p("- cn1\n"),
            "providers[0]: must be a mapping; found the string \"cn1\"",
        ),
        (
            "invalid uuid",
            p("- identification:\n    uuid: not quite a uuid\n"),
            "f.yaml:5: provider 0 (uuid not quite a uuid): providers[0].identification.uuid: \"not quite a uuid\" is neither a uuid (8-4-4-4-12 hex digits) nor $COMPUTE_NODE",
        ),
        (
            "null uuid",
            p("- identification:\n    uuid: null\n"),
            "provider 0 (no valid identification): providers[0].identification.uuid: must be a string, a uuid or $COMPUTE_NODE; found nothing (null)",
        ),
        (
            "empty name",
            p("- identification:\n    name: ''\n"),
            "providers[0].identification.name: is empty",
        ),
        (
            "null name",
            p("- identification:\n    name: null\n"),
            "providers[0].identification.name: must be a string; found nothing (null)",
        ),
        (
            "number as name",
            p("- identification:\n    name: 42\n"),
            "providers[0].identification.name: must be a string; found the number 42",
        ),
        (
            "name too long",
            p(&format!(
                "- identification:\n    name: {}\n",
                "n".repeat(201)
            )),
            "is 201 characters long; at most 200 are allowed",
        ),
        (
            "no uuid nor name",
            p("- identification:\n"),
            "providers[0].identification: must be a mapping; found nothing (null)",
        ),
        (
            "identification empty",
            p("- identification: {}\n"),
            "providers[0].identification: is empty; set exactly one of uuid or name",
        ),
        (
            "uuid and name",
            p(&format!(
                "- identification:\n    name: custom_provider\n    uuid: {UUID}\n"
            )),
            "providers[0].identification: has name and uuid; set exactly one of uuid or name",
        ),
        (
            "another identification method",
            p("- identification:\n    hostname: cn1\n"),
            "providers[0].identification.hostname: hostname is not a way to identify a provider",
        ),
        (
            "no identification",
            p("- {}\n"),
            "providers[0].identification: is missing; each provider entry names its provider",
        ),
        (
            "inventory without total",
            p(&format!(
                "- identification:\n    uuid: {UUID}\n  inventories:\n    additional:\n    - CUSTOM_RESOURCE1: {{}}\n"
            )),
            "providers[0].inventories.additional[0].CUSTOM_RESOURCE1.total: is missing; every inventory needs a total",
        ),
        (
            "second inventory without total",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_R1:\n        total: 1\n    - CUSTOM_R2: {}\n",
            ),
            "additional[1].CUSTOM_R2.total: is missing",
        ),
        (
            "total not a number",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_R1:\n        total: invalid_total\n",
            ),
            "CUSTOM_R1.total: must be a whole number; found the string \"invalid_total\"",
        ),
        (
            "total a fraction",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_R1:\n        total: 1.5\n",
            ),
            "CUSTOM_R1.total: must be a whole number; found the number 1.5",
        ),
        (
            "total a boolean",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_R1:\n        total: true\n",
            ),
            "must be a whole number; found the boolean true",
        ),
        (
            "ratio a string",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_R1:\n        total: 1\n        allocation_ratio: high\n",
            ),
            "allocation_ratio: must be a number; found the string \"high\"",
        ),
        (
            "unknown inventory field",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_R1:\n        total: 1\n        additional_property: 2\n",
            ),
            "CUSTOM_R1.additional_property: additional_property is not an inventory field; an inventory has total, reserved, min_unit, max_unit, step_size, allocation_ratio",
        ),
        (
            "standard resource class",
            p(
                "- identification:\n    name: NAME\n  inventories:\n    additional:\n    - CUSTOM_RESOURCE_CLASS:\n        total: 1\n    - INVALID_RESOURCE_CLASS:\n        total: 1\n",
            ),
            "providers[0].inventories.additional[1].INVALID_RESOURCE_CLASS: resource class \"INVALID_RESOURCE_CLASS\" is not CUSTOM_[A-Z0-9_]+; a provider config may only add custom resource classes",
        ),
        (
            "VCPU",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - VCPU: {total: 8}\n",
            ),
            "resource class \"VCPU\" is not CUSTOM_",
        ),
        (
            "class with other characters",
            p(
                "- identification:\n    uuid: aa884151-b4e2-4e82-9fd4-81cfcd01abb9\n  inventories:\n    additional:\n    - INVALID_RESOURCE_CLASS_NAME_!@#$%^&*()_+:\n        total: 1\n",
            ),
            "resource class \"INVALID_RESOURCE_CLASS_NAME_!@#$%^&*()_+\" is not a custom resource class name",
        ),
        (
            "lower-case class",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - custom_llc: {total: 1}\n",
            ),
            "resource class \"custom_llc\" is not a custom resource class name",
        ),
        (
            "inventory item not a mapping",
            p("- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_X\n"),
            "providers[0].inventories.additional[0]: must be a mapping; found the string \"CUSTOM_X\"",
        ),
        (
            "additional not a list",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n      CUSTOM_X: {total: 1}\n",
            ),
            "providers[0].inventories.additional: must be a list; found a mapping",
        ),
        (
            "inventories null",
            p("- identification:\n    name: n\n  inventories:\n"),
            "providers[0].inventories: must be a mapping; found nothing (null)",
        ),
        (
            "total 0",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_X: {total: 0}\n",
            ),
            "CUSTOM_X.total: total is 0; it must be between 1 and 2147483647",
        ),
        (
            "total above int32",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_X: {total: 2147483648}\n",
            ),
            "total is 2147483648; it must be between 1 and 2147483647",
        ),
        (
            "negative reserved",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_X: {total: 4, reserved: -1}\n",
            ),
            "reserved is -1; it must be between 0 and 2147483647",
        ),
        (
            "step 0",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_X: {total: 4, step_size: 0}\n",
            ),
            "step_size is 0; it must be between 1",
        ),
        (
            "ratio 0",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_X: {total: 4, allocation_ratio: 0}\n",
            ),
            "allocation_ratio is 0; it must be greater than 0",
        ),
        (
            "reserved above total",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_X: {total: 4, reserved: 8}\n",
            ),
            "CUSTOM_X.reserved: reserved (8) is greater than total (4)",
        ),
        (
            "min_unit above max_unit",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_X: {total: 4, min_unit: 3, max_unit: 2}\n",
            ),
            "CUSTOM_X.min_unit: min_unit (3) is greater than max_unit (2)",
        ),
        (
            "class CUSTOM_ alone",
            p(
                "- identification:\n    name: n\n  inventories:\n    additional:\n    - CUSTOM_: {total: 4}\n",
            ),
            "resource class \"CUSTOM_\" has nothing after CUSTOM_",
        ),
        (
            "standard trait",
            p(
                "- identification:\n    name: NAME\n  traits:\n    additional:\n    - CUSTOM_TRAIT\n    - INVALID_TRAIT\n",
            ),
            "f.yaml:9: provider 0 (name NAME): providers[0].traits.additional[1]: trait \"INVALID_TRAIT\" is not CUSTOM_[A-Z0-9_]+; a provider config may only add custom traits",
        ),
        (
            "two standard traits",
            p(
                "- identification:\n    name: NAME\n  traits:\n    additional: [CUSTOM_TRAIT, INVALID_TRAIT, INVALID_TRAIT2]\n",
            ),
            "traits.additional[2]: trait \"INVALID_TRAIT2\" is not CUSTOM_",
        ),
        (
            "trait as a mapping",
            p(&format!(
                "- identification:\n    uuid: {UUID}\n  traits:\n    additional:\n    - TRAIT1: invalid_trait\n"
            )),
            "providers[0].traits.additional[0]: must be a string; found a mapping",
        ),
        (
            "trait with other characters",
            p(
                "- identification:\n    name: n\n  traits:\n    additional:\n    - INVALID_TRAIT_NAME_!@#$%^&*()_+\n",
            ),
            "trait \"INVALID_TRAIT_NAME_!@#$%^&*()_+\" is not a custom trait name",
        ),
        (
            "trait CUSTOM_ alone",
            p("- identification:\n    name: n\n  traits:\n    additional: [CUSTOM_]\n"),
            "trait \"CUSTOM_\" has nothing after CUSTOM_",
        ),
        (
            "same name twice",
            p(
                "- identification:\n    name: n\n  traits:\n    additional: [CUSTOM_A]\n- identification:\n    name: n\n  traits:\n    additional: [CUSTOM_B]\n",
            ),
            "f.yaml:9: provider 1 (name n): providers[1].identification: \"n\" is already identified by providers[0] (name n)",
        ),
        (
            "magic uuid and magic name",
            p(
                "- identification:\n    uuid: $COMPUTE_NODE\n  traits:\n    additional: [CUSTOM_A]\n- identification:\n    name: $COMPUTE_NODE\n  traits:\n    additional: [CUSTOM_B]\n",
            ),
            "\"$COMPUTE_NODE\" is already identified by providers[0] (uuid $COMPUTE_NODE)",
        ),
    ];
    for (rule, text, expected) in cases {
        let errors = errors(&text);
        assert!(
            errors.iter().any(|e| e.contains(expected)),
            "{rule}: no error contains {expected:?}: {errors:#?}"
        );
    }
}

#[test]
fn warnings_for_what_loads_but_is_ignored() {
    let w = warnings(
        "meta:\n  schema_version: '1.3'\n  author: me\nproviders:\n- identification:\n    name: n\n  traits:\n    additional: [CUSTOM_A]\n  weight: 3\n",
    );
    assert!(
        w.iter()
            .any(|w| w.contains("meta.schema_version: schema version \"1.3\" is newer than 1.0")),
        "{w:?}"
    );
    assert!(w.iter().any(|w| w.contains("meta.author: unknown meta field author: a field of a newer 1.x minor, or a typo; it is ignored")), "{w:?}");
    assert!(
        w.iter().any(|w| w
            .contains("provider 0 (name n): providers[0].weight: unknown provider field weight")),
        "{w:?}"
    );
    let w = warnings(&provider(
        "- identification:\n    name: $COMPUTE_NODE\n  inventories:\n    additional:\n    - CUSTOM_X: {total: 1}\n    - CUSTOM_X: {total: 3}\n    - {}\n- identification:\n    name: quiet\n",
    ));
    assert!(
        w.iter()
            .any(|w| w.contains("name $COMPUTE_NODE is read as uuid $COMPUTE_NODE")),
        "{w:?}"
    );
    assert!(
        w.iter().any(|w| w
            .contains("additional[1].CUSTOM_X: resource class CUSTOM_X is listed more than once")),
        "{w:?}"
    );
    assert!(
        w.iter()
            .any(|w| w.contains("additional[2]: the list item names no resource class")),
        "{w:?}"
    );
    assert!(w.iter().any(|w| w.contains("provider 1 (name quiet): providers[1]: the entry has no additional inventories or traits; it is ignored")), "{w:?}");
    let c = check_text(&provider("- identification:\n    name: $COMPUTE_NODE\n  inventories:\n    additional:\n    - CUSTOM_X: {total: 1}\n    - CUSTOM_X: {total: 3}\n")).unwrap();
    assert_eq!(c.entries[0].identification, Identification::ComputeNode);
    assert_eq!(
        c.entries[0].inventories["CUSTOM_X"].total, 3,
        "the last one wins"
    );
}

// The commands.

fn kubeplace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("kubeplace runs")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
}

#[test]
fn the_sample_file_is_valid() {
    let out = kubeplace(&[
        "provider-config",
        "validate",
        "examples/provider-config",
        "-o",
        "json",
    ]);
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert_eq!(report["summary"]["valid"], 1);
    assert_eq!(report["merged"].as_array().unwrap().len(), 3);
    assert_eq!(report["merged"][1]["target"], "name compute-01.example.org");
    assert_eq!(
        report["merged"][0]["inventories"]["CUSTOM_LLC"]["reserved"],
        2
    );
    assert_eq!(
        report["merged"][0]["inventories"]["CUSTOM_LLC"]["step_size"],
        1
    );
}

#[test]
fn a_directory_is_read_like_nova_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let entry = |id: &str, t: &str| {
        format!("{HEAD}- identification:\n    {id}\n  traits:\n    additional: [{t}]\n")
    };
    write(d, "b.yaml", &entry("name: cn2", "CUSTOM_B"));
    write(d, "a.yaml", &entry("name: cn1", "CUSTOM_A"));
    write(
        d,
        "10-first.yaml",
        &entry("uuid: $COMPUTE_NODE", "CUSTOM_ALL"),
    );
    write(d, ".hidden.yaml", "not: [yaml\n");
    write(d, "old.yml", "not: [yaml\n");
    write(d, "README", "hello\n");
    write(d, "sub/c.yaml", "not: [yaml\n");
    let out = kubeplace(&[
        "provider-config",
        "validate",
        "-o",
        "json",
        d.to_str().unwrap(),
    ]);
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    let files: Vec<&str> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    let names: Vec<&str> = files
        .iter()
        .map(|f| f.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        names,
        ["10-first.yaml", "a.yaml", "b.yaml"],
        "lexicographic order, *.yaml only"
    );
    let notes: Vec<&str> = report["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(notes.len(), 4, "{notes:#?}");
    assert!(notes[0].ends_with(".hidden.yaml: ignored: a hidden name (starting with a dot) is skipped, as Nova's *.yaml match skips it"), "{notes:#?}");
    assert!(
        notes[1].ends_with("README: ignored: only names ending in .yaml are read"),
        "{notes:#?}"
    );
    assert!(notes[2].ends_with("old.yml: ignored: only names ending in .yaml are read; rename it to end in .yaml (lowercase) for it to be read"), "{notes:#?}");
    assert!(
        notes[3].ends_with(
            "sub: ignored: a subdirectory; provider configs are read from the directory itself only"
        ),
        "{notes:#?}"
    );
    let targets: Vec<&str> = report["merged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["$COMPUTE_NODE", "name cn1", "name cn2"]);
}

#[test]
fn duplicates_across_files_name_both_places() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let entry = |id: &str, t: &str| {
        format!("{HEAD}- identification:\n    {id}\n  traits:\n    additional: [{t}]\n")
    };
    write(d, "a.yaml", &entry("name: cn1", "CUSTOM_A"));
    write(
        d,
        "b.yaml",
        &format!(
            "{HEAD}- identification:\n    name: cn1\n- identification:\n    uuid: $COMPUTE_NODE\n  traits:\n    additional: [CUSTOM_X]\n"
        ),
    );
    write(d, "c.yaml", &entry("name: cn1", "CUSTOM_C"));
    write(d, "d.yaml", &entry("name: $COMPUTE_NODE", "CUSTOM_D"));
    let out = kubeplace(&[
        "provider-config",
        "validate",
        "-o",
        "json",
        d.to_str().unwrap(),
    ]);
    let report = json(&out);
    assert_eq!(out.status.code(), Some(1), "{report:#}");
    let dups = report["duplicates"].as_array().unwrap();
    assert_eq!(
        dups.len(),
        2,
        "the no-op cn1 entry of b.yaml does not count: {dups:#?}"
    );
    assert_eq!(dups[0]["key"], "cn1");
    assert!(
        dups[0]["first"]["file"]
            .as_str()
            .unwrap()
            .ends_with("a.yaml")
    );
    assert!(
        dups[0]["second"]["file"]
            .as_str()
            .unwrap()
            .ends_with("c.yaml")
    );
    assert_eq!(dups[1]["key"], "$COMPUTE_NODE");
    let c = &report["files"][2];
    assert_eq!(c["verdict"], "invalid");
    let text = c["errors"][0]["text"].as_str().unwrap();
    assert!(text.contains("c.yaml: provider 0 (name cn1): providers[0].identification: \"cn1\" is already identified in "), "{text}");
    assert!(text.contains("a.yaml by provider 0 (name cn1)"), "{text}");
    assert_eq!(report["files"][1]["verdict"], "valid");
    assert_eq!(report["files"][1]["warnings"].as_array().unwrap().len(), 1);
}

#[test]
fn exit_codes_and_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "ok.yaml",
        &format!("{HEAD}- identification:\n    name: cn1\n  traits:\n    additional: [CUSTOM_A]\n"),
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.join("ok.yaml"), std::fs::Permissions::from_mode(0o666))
            .unwrap();
    }
    let out = kubeplace(&[
        "provider-config",
        "validate",
        d.join("ok.yaml").to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    #[cfg(unix)]
    assert!(
        text.contains("ok.yaml: is writable by its group and by others (mode 0666)"),
        "{text}"
    );
    assert!(text.contains("name cn1 (from "), "{text}");
    write(d, "bad.yaml", "meta:\n  schema_version: 1.0\n");
    let out = kubeplace(&["provider-config", "validate", d.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("bad.yaml: invalid"), "{text}");
    assert!(
        text.contains("error: ")
            && text.contains("bad.yaml:2: meta.schema_version: must be a string"),
        "{text}"
    );
    write(d, "broken.yaml", "meta: [\n");
    let out = kubeplace(&["provider-config", "validate", d.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a file that is not YAML is unreadable"
    );
    let out = kubeplace(&["provider-config", "validate", "no/such/dir"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn convert_prints_provider_configs_that_are_admitted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "Compute_Defaults.yaml",
        &format!(
            "{HEAD}- identification:\n    uuid: $COMPUTE_NODE\n  inventories:\n    additional:\n    - CUSTOM_LLC: {{total: 22, min_unit: 1, allocation_ratio: 1.0}}\n  traits:\n    additional: [CUSTOM_P_STATE_ENABLED]\n"
        ),
    );
    let sample = "examples/provider-config/provider-config.yaml";
    let out = kubeplace(&[
        "provider-config",
        "convert",
        d.join("Compute_Defaults.yaml").to_str().unwrap(),
        sample,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).unwrap();
    assert!(yaml.contains("apiVersion: kubeplace.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: compute-defaults\n"), "{yaml}");
    assert!(yaml.contains("name: provider-config\n"), "{yaml}");
    assert!(
        yaml.contains("schemaVersion: '1.0'") || yaml.contains("schemaVersion: \"1.0\""),
        "{yaml}"
    );
    assert!(yaml.contains("minUnit: 1"), "{yaml}");
    // The manifests are admitted by `kubeplace apply`... except that both claim $COMPUTE_NODE.
    let manifests = d.join("manifests.yaml");
    std::fs::write(&manifests, &yaml).unwrap();
    let out = kubeplace(&["apply", "-f", manifests.to_str().unwrap(), "-o", "json"]);
    let report = json(&out);
    assert_eq!(
        report["items"][0]["admission"]["allowed"], true,
        "{report:#}"
    );
    let second = &report["items"][1]["admission"];
    assert_eq!(second["allowed"], false);
    assert!(
        second["message"].as_str().unwrap().contains(
            "\"$COMPUTE_NODE\" is already identified by ProviderConfig \"compute-defaults\""
        ),
        "{second}"
    );
    // An invalid file is not converted.
    write(d, "bad.yaml", "meta:\n  schema_version: '2.0'\n");
    let out = kubeplace(&[
        "provider-config",
        "convert",
        d.join("bad.yaml").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("schema version \"2.0\" is not supported")
    );
}
