//! What a stream reads to: documents with their file, number and line, Lists expanded,
//! Namespaces checked, and messages that name the line of the field they are about.

use std::path::Path;

use super::GOOD;
use crate::manifest::{
    Content, CustomNames, DocumentError, Origin, ReadError, files_under, parse_stream,
    parse_stream_located,
};

#[test]
fn reads_multi_document_streams_with_lines() {
    let text = format!(
        "---\n{GOOD}---\n# nothing here\n---\n{}",
        GOOD.replace("m1.small", "m1.large")
    );
    let docs = parse_stream("f.yaml", &text).unwrap();
    assert_eq!(docs.len(), 2);
    assert_eq!(
        docs[0].origin,
        Origin {
            file: "f.yaml".into(),
            document: 1,
            line: 2
        }
    );
    assert_eq!(docs[1].origin.line, 12);
    assert_eq!(docs[1].name, "m1.large");
    assert!(docs.iter().all(|d| d.content.is_ok()));
}

/// A NUL byte ends a YAML parser's input early; the stream is refused, not read in half.
#[test]
fn a_nul_byte_is_a_syntax_error_not_the_end_of_the_file() {
    let text = format!("{GOOD}# \0\n---\n{}", GOOD.replace("m1.small", "m1.large"));
    let err = parse_stream("f.yaml", &text).unwrap_err();
    assert!(
        matches!(&err, ReadError::Syntax { message, .. } if message.contains("line 8")),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        parse_stream_located("f.yaml", &text)
            .unwrap_err()
            .to_string()
    );
}

#[test]
fn a_large_cloud_in_one_file_is_read() {
    // 1,100 documents (the parser's default allows 1,024) ...
    let provider = |i: usize| {
        format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn{i}\nspec:\n  inventories:\n    VCPU: {{total: 8}}\n"
        )
    };
    let stream: Vec<String> = (0..1_100).map(provider).collect();
    let docs = parse_stream("cloud.yaml", &stream.join("---\n")).unwrap();
    assert_eq!(docs.len(), 1_100);
    assert!(docs.iter().all(|d| d.content.is_ok()));
    // ... and a document of 300,000 nodes (the default allows 250,000).
    let traits = vec!["COMPUTE_NODE"; 300_000].join(",");
    let big = format!(
        r#"{{"apiVersion":"kubeplace.io/v1alpha1","kind":"ResourceProvider","metadata":{{"name":"big"}},"spec":{{"traits":[{traits}]}}}}"#
    );
    let docs = parse_stream("big.json", &big).unwrap();
    assert!(docs[0].content.is_ok());
}

#[test]
fn an_alias_bomb_is_still_refused() {
    let mut yaml = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let prev = format!("*a{}", i - 1);
        yaml += &format!("a{i}: &a{i} [{}]\n", [prev.as_str(); 10].join(", "));
    }
    let err = parse_stream("bomb.yaml", &yaml).unwrap_err();
    assert!(matches!(err, ReadError::Syntax { .. }), "{err}");
}

#[test]
fn reads_json() {
    let json = r#"{"apiVersion":"kubeplace.io/v1alpha1","kind":"Image","metadata":{"name":"cirros"},"spec":{"properties":{"hw_rng_model":"virtio"}}}"#;
    let docs = parse_stream("i.json", json).unwrap();
    assert_eq!(docs[0].kind, "Image");
    assert!(docs[0].content.is_ok());
}

#[test]
fn syntax_errors_are_read_errors_with_a_line() {
    let err = parse_stream("bad.yaml", "kind: Flavor\nspec: [\n  vcpus: 2\n").unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("bad.yaml: not valid YAML or JSON: line 2"),
        "{text}"
    );
}

#[test]
fn wrong_field_type_names_path_and_line() {
    let text = GOOD.replace("vcpus: 1", "vcpus: two");
    let docs = parse_stream("f.yaml", &text).unwrap();
    let err = docs[0].content.clone().unwrap_err();
    assert!(
        matches!(&err, DocumentError::Schema { path, line: 6, .. } if path == "spec.vcpus"),
        "{err:?}"
    );
    assert!(
        err.located(&docs[0].origin)
            .starts_with("f.yaml:6: document 1: field spec.vcpus: invalid type: string \"two\""),
        "{err}"
    );
}

#[test]
fn missing_required_field_points_at_its_parent() {
    let text = "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn1\nspec:\n  inventories:\n    VCPU:\n      reserved: 1\n";
    let err = parse_stream("f.yaml", text).unwrap()[0]
        .content
        .clone()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "field spec.inventories.VCPU: missing field `total`"
    );
    assert_eq!(err.line(), 8);
}

#[test]
fn unknown_kind_api_version_and_names() {
    let kind = parse_stream("f", &GOOD.replace("kind: Flavor", "kind: Flavour")).unwrap()[0]
        .content
        .clone()
        .unwrap_err();
    assert!(
        kind.to_string()
            .contains("\"Flavour\", which kubeplace does not serve (did you mean Flavor?)"),
        "{kind}"
    );
    let api = parse_stream("f", &GOOD.replace("v1alpha1", "v1")).unwrap()[0]
        .content
        .clone()
        .unwrap_err();
    assert_eq!(
        api.to_string(),
        "field apiVersion is \"kubeplace.io/v1\"; Flavor is served as kubeplace.io/v1alpha1"
    );
    let unnamed = parse_stream("f", &GOOD.replace("  name: m1.small\n", "  labels: {}\n")).unwrap()
        [0]
    .content
    .clone()
    .unwrap_err();
    assert!(
        unnamed
            .to_string()
            .contains("metadata.name is \"\": every object needs a name"),
        "{unnamed}"
    );
    let upper = parse_stream("f", &GOOD.replace("m1.small", "M1")).unwrap()[0]
        .content
        .clone()
        .unwrap_err();
    assert!(
        upper
            .to_string()
            .starts_with("field metadata.name is \"M1\""),
        "{upper}"
    );
    let scalar = parse_stream("f", "just text\n").unwrap()[0]
        .content
        .clone()
        .unwrap_err();
    assert!(matches!(scalar, DocumentError::NotAMapping { .. }));
    let missing = parse_stream("f", "kind: Flavor\n").unwrap()[0]
        .content
        .clone()
        .unwrap_err();
    assert!(matches!(
        missing,
        DocumentError::Missing {
            field: "apiVersion",
            ..
        }
    ));
}

#[test]
fn the_example_cloud_has_no_unknown_field() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cloud");
    for file in files_under(&dir).unwrap() {
        let text = std::fs::read_to_string(&file).unwrap();
        for doc in parse_stream("f", &text).unwrap() {
            assert!(doc.content.is_ok(), "{file:?}: {}", doc.name);
            assert_eq!(doc.unknown_fields, vec![], "{file:?}: {}", doc.name);
        }
    }
    // A typo is found with its line.
    let docs = parse_stream("f.yaml", &format!("{GOOD}  diskGB: 10\n")).unwrap();
    assert_eq!(docs[0].unknown_fields[0].path, "spec.diskGB");
    assert_eq!(docs[0].unknown_fields[0].line, 8);
}

#[test]
fn namespaces_are_read_and_checked() {
    let ns = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n";
    let docs = parse_stream("n.yaml", ns).unwrap();
    assert_eq!(docs[0].kind, "Namespace");
    assert_eq!(docs[0].content, Ok(Content::Namespace("shop".into())));
    assert_eq!(docs[0].clone().object(), None);
    let wrong = parse_stream("n.yaml", &ns.replace("v1", "kubeplace.io/v1alpha1")).unwrap();
    assert_eq!(
        wrong[0].content.clone().unwrap_err().to_string(),
        "field apiVersion is \"kubeplace.io/v1alpha1\"; Namespace is served as v1"
    );
    let dotted = parse_stream("n.yaml", &ns.replace("shop", "shop.eu")).unwrap();
    let err = dotted[0].content.clone().unwrap_err();
    assert_eq!(err.line(), 4);
    assert!(err.to_string().contains("a DNS label"), "{err}");
}

/// The registry ConfigMap is read as the custom names it lists, one a line, each once; any
/// other ConfigMap, field, key or name is refused, naming it.
#[test]
fn the_registry_configmap_is_read_and_checked() {
    let registry = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kubeplace-placement-registry\n  namespace: kubeplace\ndata:\n  traits: |\n    CUSTOM_B\n    CUSTOM_A\n    CUSTOM_B\n  resourceClasses: \"CUSTOM_R\\n\"\n";
    let docs = parse_stream("r.yaml", registry).unwrap();
    assert_eq!(
        docs[0].content,
        Ok(Content::Registry(CustomNames {
            traits: vec!["CUSTOM_B".into(), "CUSTOM_A".into()],
            resource_classes: vec!["CUSTOM_R".into()],
        }))
    );
    assert_eq!(docs[0].clone().object(), None);
    let empty =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kubeplace-placement-registry\n";
    let docs = parse_stream("r.yaml", empty).unwrap();
    assert_eq!(
        docs[0].content,
        Ok(Content::Registry(CustomNames::default()))
    );
    for (from, to, line, says) in [
        (
            "name: kubeplace-placement-registry",
            "name: other",
            4,
            "field metadata.name is \"other\": the one ConfigMap kubeplace reads is kubeplace-placement-registry",
        ),
        (
            "  traits:",
            "  trait:",
            8,
            "field data.trait: a key kubeplace does not read",
        ),
        (
            "CUSTOM_A",
            "HW_CPU_X86_AVX2",
            8,
            "field data.traits: \"HW_CPU_X86_AVX2\": is not a custom trait",
        ),
        (
            "CUSTOM_R",
            "CUSTOM_r",
            11,
            "field data.resourceClasses: \"CUSTOM_r\": resource class \"CUSTOM_r\" has characters",
        ),
        (
            "\ndata:",
            "\nbinaryData: {}\ndata:",
            6,
            "field binaryData: a field kubeplace does not read",
        ),
        (
            "apiVersion: v1",
            "apiVersion: v2",
            1,
            "field apiVersion is \"v2\"; ConfigMap is served as v1",
        ),
    ] {
        let docs = parse_stream("r.yaml", &registry.replace(from, to)).unwrap();
        let err = docs[0].content.clone().unwrap_err();
        assert!(err.to_string().starts_with(says), "{from} -> {to}: {err}");
        assert_eq!(err.line(), line, "{from} -> {to}: {err}");
    }
}

#[test]
fn lists_are_expanded() {
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}\n",
        GOOD.trim_end().replace('\n', "\n  ")
    );
    let docs = parse_stream("l.yaml", &list).unwrap();
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].origin.line, 4);
    assert!(docs[0].content.is_ok(), "{:?}", docs[0].content);
}

/// A stream of many tiny documents is refused at the first one more than its length
/// allows, by every reader; the shortest real objects are far from that limit.
#[test]
fn a_stream_of_more_documents_than_its_length_allows_is_refused() {
    let too_many = |err: ReadError| match err {
        ReadError::TooManyDocuments { limit, bytes, .. } => (limit, bytes),
        other => panic!("{other}"),
    };
    // `{}` 100,000 times: 700,000 bytes allow 21,875 documents.
    let empty = "---\n{}\n".repeat(100_000);
    let mut handed = 0;
    let err =
        crate::manifest::parse_stream_each("e.yaml", &empty, &mut |_| handed += 1).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "e.yaml: more than 21875 documents in 700000 bytes: a stream holds at most one document per 32 bytes (and 64 however short)"
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        parse_stream_located("e.yaml", &empty)
            .unwrap_err()
            .to_string()
    );
    assert_eq!(too_many(err), (21_875, 700_000));
    assert_eq!(handed, 21_875);
    // The items of a List count as documents; in JSON they are counted before any is read.
    let list = format!(
        "{{\"kind\": \"List\", \"apiVersion\": \"v1\", \"items\": [{}]}}",
        vec!["{}"; 100_000].join(",")
    );
    let mut handed = 0;
    let err =
        crate::manifest::parse_stream_each("l.json", &list, &mut |_| handed += 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        parse_stream_located("l.json", &list)
            .unwrap_err()
            .to_string()
    );
    assert_eq!(too_many(err).0, list.len() / 32);
    assert_eq!(handed, 0);
    let yaml_list = format!(
        "kind: List\napiVersion: v1\nitems: [{}]\n",
        vec!["{}"; 100_000].join(", ")
    );
    assert_eq!(
        too_many(parse_stream("l.yaml", &yaml_list).unwrap_err()).0,
        yaml_list.len() / 32
    );
    // A short stream may hold 64 documents whatever they are.
    let docs = parse_stream("s.yaml", &"---\n{}\n".repeat(64)).unwrap();
    assert_eq!(docs.len(), 64);
    assert!(parse_stream("s.yaml", &"---\n{}\n".repeat(65)).is_err());
    // The shortest objects kubeplace reads, as tightly as they can be written, are read.
    for shortest in [
        "{kind: Namespace, apiVersion: v1, metadata: {name: a}}\n",
        "{kind: Pod, apiVersion: v1, metadata: {name: a}}\n",
        "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\"}}\n",
        "kind: Node\napiVersion: v1\nmetadata: {name: a}\n",
    ] {
        let stream = format!("---\n{shortest}").repeat(10_000);
        let docs = parse_stream("short.yaml", &stream).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(docs.len(), 10_000);
    }
}
