//! The fast readers against the located reader: whatever a fast reader reads, it reads as the
//! located reader does, and whatever it cannot read cleanly it leaves to the located reader.

use std::path::Path;

use kubeplace_core::yaml_plain::PlainNode;

use super::{FLAVOR_JSON, GOOD, json_fast, json_list, same, yaml_fast};
use crate::fields::has_unknown_fields;
use crate::manifest::fast::{
    PARALLEL_READ_FROM, PARALLEL_YAML_FROM, YAML_BYTES_A_RUN, parse_json_fast, parse_yaml_fast,
};
use crate::manifest::located::parse_stream_located as parse_located;
use crate::manifest::{ReadError, files_under, parse_stream, parse_stream_located};
use crate::{Kind, Object};

#[test]
fn a_clean_json_list_reads_the_same_fast_and_located() {
    let other = FLAVOR_JSON
        .replace("m1.small", "m1.large")
        .replace("512", "2048");
    let text = json_list(&[FLAVOR_JSON, &other]);
    let fast = json_fast("f.json", &text).expect("clean JSON takes the fast path");
    let located = parse_located("f.json", &text).unwrap();
    assert_eq!(fast.len(), 2);
    for (f, l) in fast.iter().zip(&located) {
        assert_eq!(f.origin, l.origin);
        assert_eq!(f.content, l.content);
        assert_eq!((&f.kind, &f.name), (&l.kind, &l.name));
    }
    assert_eq!(fast[1].origin.line, 11);
    // One object, not a List.
    let one = parse_stream("one.json", FLAVOR_JSON).unwrap();
    assert_eq!((one.len(), one[0].origin.line), (1, 1));
    // Lines end in `\r\n`, or in a `\r` alone in places: lines counted as YAML counts them.
    for (breaks, line) in [("\r\n", 11), ("\r", 11), ("\r\r", 14)] {
        let text = text.replacen('\n', breaks, 3);
        let fast = json_fast("f.json", &text).expect("clean JSON");
        same(&fast, &parse_located("f.json", &text).unwrap()).unwrap();
        assert_eq!(fast[1].origin.line, line, "{breaks:?}");
    }
}

/// A List large enough to be read on several threads reads as the located reader reads
/// it, in order and with each object's line; one mistake in its last part still sends it
/// to the located reader, which names the line.
#[test]
fn a_large_json_list_read_on_several_threads_keeps_order_and_lines() {
    let flavors: Vec<String> = (0..PARALLEL_READ_FROM + 500)
        .map(|i| FLAVOR_JSON.replace("m1.small", &format!("f{i:05}")))
        .collect();
    let refs: Vec<&str> = flavors.iter().map(String::as_str).collect();
    let text = json_list(&refs);
    let fast = json_fast("big.json", &text).expect("clean JSON takes the fast path");
    let located = parse_located("big.json", &text).unwrap();
    same(&fast, &located).unwrap();
    assert_eq!(fast.last().map(|d| d.name.as_str()), Some("f02499"));
    assert_eq!(fast[2_400].origin.line, 5 + 2_400 * 6);
    let typo = text.replace(
        "\"name\": \"f02400\"},\n      \"spec\": {\"vcpus\"",
        "\"name\": \"f02400\"},\n      \"spec\": {\"vcpu\"",
    );
    assert_ne!(typo, text);
    let mut handed = 0;
    assert!(!parse_json_fast("big.json", &typo, &mut |_| handed += 1));
    assert!(
        (1..=2_400).contains(&handed),
        "{handed} handed over before the mistake"
    );
    // The runs before the mistake were handed over as read; the located reader hands
    // over the rest: every object once, in order.
    let read = parse_stream("big.json", &typo).unwrap();
    same(&read, &parse_located("big.json", &typo).unwrap()).unwrap();
    let wrong = read[2_400].content.as_ref().unwrap_err();
    assert_eq!(wrong.line(), 5 + 2_400 * 6 + 4, "{wrong}");
}

/// A YAML stream large enough to be read in pieces on several threads reads as the
/// located reader reads it: documents numbered and lined as in the whole stream.
#[test]
fn a_large_yaml_stream_read_in_pieces_reads_as_the_whole() {
    let long = "x".repeat(2_000);
    let mut text = String::new();
    for i in 0..600 {
        text.push_str("---\n");
        if i == 450 {
            text.push_str("# a comment\n\n");
        }
        text.push_str(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: f{i:04}\nspec:\n  vcpus: 1\n  memoryMb: 512\n  description: \"{long}\"\n"
        ));
    }
    assert!(text.len() > PARALLEL_YAML_FROM);
    let pieces = kubeplace_core::yaml_plain::split_documents(&text, 2);
    assert_eq!(pieces.len(), 2, "the stream is cut");
    let fast = yaml_fast("big.yaml", &text).expect("plain YAML takes the fast path");
    let located = parse_located("big.yaml", &text).unwrap();
    same(&fast, &located).unwrap();
    assert_eq!(fast.len(), 600);
    assert_eq!(fast[599].origin.document, 600);
    // A mistake in a late piece: the pieces before it were handed over as read, the
    // located reader hands over the rest, every document once and in order.
    assert!(text.len() / YAML_BYTES_A_RUN > 2, "read in several runs");
    let typo = text.replace("name: f0550\nspec:\n  vcpus", "name: f0550\nspec:\n  vcpu");
    assert_ne!(typo, text);
    let mut handed = 0;
    assert!(!parse_yaml_fast("big.yaml", &typo, &mut |_| handed += 1));
    assert!(
        (1..=550).contains(&handed),
        "{handed} handed over before the mistake"
    );
    let read = parse_stream("big.yaml", &typo).unwrap();
    same(&read, &parse_located("big.yaml", &typo).unwrap()).unwrap();
    assert_eq!(read.len(), 600);
    let wrong = read[550].content.as_ref().unwrap_err();
    assert!(wrong.to_string().contains("vcpu"), "{wrong}");
}

#[test]
fn clean_yaml_reads_the_same_fast_and_located() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cloud");
    let mut fast_files = 0;
    for file in files_under(&dir).unwrap() {
        let text = std::fs::read_to_string(&file).unwrap();
        let located = parse_located("f", &text).unwrap();
        if let Some(fast) = yaml_fast("f", &text) {
            fast_files += 1;
            same(&fast, &located).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        }
        same(&parse_stream("f", &text).unwrap(), &located).unwrap();
    }
    assert!(fast_files >= 5, "{fast_files}");
    // A cloud as benches/manifest-load.py writes it: quoted strings, plain numbers.
    let provider = |name: &str| {
        format!(
            "---\napiVersion: \"kubeplace.io/v1alpha1\"\nkind: \"ResourceProvider\"\nmetadata:\n  name: \"{name}\"\nspec:\n  parent: \"cn000001\"\n  inventories:\n    VCPU:\n      total: 32\n      allocationRatio: 4.0\n  traits:\n    - \"HW_NIC_SRIOV\"\n"
        )
    };
    let text = format!(
        "{GOOD}{}{}",
        provider("cn000001-numa0"),
        provider("cn000001-numa1")
    );
    let fast = yaml_fast("cloud.yaml", &text).expect("a clean cloud takes the fast path");
    same(&fast, &parse_located("cloud.yaml", &text).unwrap()).unwrap();
    assert_eq!(fast.len(), 3);
    assert_eq!(fast[2].origin.line, 22);
    // A flow sequence in the last document: the line reader gives up after two
    // documents, the event reader reads the stream again, each object comes once.
    let flow = format!(
        "{text}{}",
        provider("cn000001-numa2")
            .replace("traits:\n    - \"HW_NIC_SRIOV\"", "traits: [HW_NIC_SRIOV]")
    );
    assert!(flow.contains("traits: [HW_NIC_SRIOV]"));
    let fast = yaml_fast("cloud.yaml", &flow).expect("still the plain subset");
    same(&fast, &parse_located("cloud.yaml", &flow).unwrap()).unwrap();
    let numbers: Vec<usize> = fast.iter().map(|d| d.origin.document).collect();
    assert_eq!(numbers, [1, 2, 3, 4]);
}

/// Every document of the examples that the plain readers read (YAML, and each as JSON)
/// becomes the object JSON values made it, with the same verdict on unknown fields;
/// objects with a mistake included.
#[test]
fn plain_trees_read_as_json_values_read() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut read = 0;
    for file in files_under(&dir).unwrap() {
        let text = std::fs::read_to_string(&file).unwrap();
        let Ok(documents) = kubeplace_core::yaml_plain::read_plain(&text) else {
            continue;
        };
        for doc in documents {
            let json = doc.value.to_value().to_string();
            let from_json: PlainNode<'_> = serde_json::from_str(&json).unwrap();
            for node in [&doc.value, &from_json] {
                let Some(kind) = node.get("kind").and_then(PlainNode::as_str) else {
                    continue;
                };
                let Some(kind) = Kind::from_name(kind) else {
                    continue;
                };
                let value = node.to_value();
                assert_eq!(
                    has_unknown_fields(kind, node),
                    has_unknown_fields(kind, &value),
                    "{file:?}"
                );
                assert_eq!(
                    Object::from_plain_untracked(kind, node),
                    Object::from_value(kind, value).ok(),
                    "{file:?}"
                );
                read += 1;
            }
        }
    }
    assert!(read >= 40, "{read}");
}

/// A character JSON strings may carry and YAML refuses: the same verdict by every reader.
#[test]
fn json_with_a_character_yaml_refuses_is_refused_by_every_reader() {
    for odd in ['\u{7f}', '\u{85}', '\u{feff}'] {
        let json = format!(
            "{{\"apiVersion\": \"kubeplace.io/v1alpha1\", \"kind\": \"Flavor\", \"metadata\": {{\"name\": \"m1.small\"}}, \"spec\": {{\"vcpus\": 1, \"memoryMb\": 512, \"description\": \"a{odd}b\"}}}}"
        );
        assert!(json_fast("f.json", &json).is_none(), "{odd:?}");
        let located = parse_stream_located("f.json", &json);
        assert_eq!(
            format!("{:?}", parse_stream("f.json", &json).map(|d| d.len())),
            format!("{:?}", located.map(|d| d.len())),
            "{odd:?}"
        );
    }
}

/// A key written twice is refused at its second line, in JSON as in YAML, small file or
/// large: the fast JSON reader does not keep one of the two values.
#[test]
fn a_key_written_twice_is_refused_in_json_as_in_yaml() {
    let json = "{\n  \"apiVersion\": \"kubeplace.io/v1alpha1\",\n  \"kind\": \"Flavor\",\n  \"metadata\": {\"name\": \"m1.small\"},\n  \"spec\": {\"vcpus\": 1, \"memoryMb\": 512},\n  \"spec\": {\"vcpus\": 2, \"memoryMb\": 512}\n}\n";
    assert!(json_fast("f.json", json).is_none());
    let err = parse_stream("f.json", json).unwrap_err();
    assert_eq!(
        err.to_string(),
        parse_stream_located("f.json", json)
            .unwrap_err()
            .to_string()
    );
    let ReadError::Syntax { message, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(
        message,
        "line 6 column 3: the key `spec` is written twice in one mapping"
    );
    let yaml = format!("{GOOD}spec:\n  vcpus: 2\n");
    let ReadError::Syntax { message, .. } = parse_stream("f.yaml", &yaml).unwrap_err() else {
        panic!()
    };
    assert_eq!(
        message,
        "line 8 column 1: the key `spec` is written twice in one mapping"
    );
}

/// A namespace written as null stays null in both readers; one left out is "default".
#[test]
fn a_null_namespace_reads_the_same_fast_and_located() {
    let server = "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata:\n  name: s1\n  namespace: ~\nspec:\n  flavor: f\n  image: i\n";
    for text in [
        server.to_string(),
        server.replace("  namespace: ~\n", ""),
        server.replace("~", "shop"),
    ] {
        let fast = yaml_fast("s.yaml", &text).expect("plain YAML");
        same(&fast, &parse_located("s.yaml", &text).unwrap()).unwrap();
        let json =
            serde_json::to_string(&serde_saphyr::from_str::<serde_json::Value>(&text).unwrap())
                .unwrap();
        let fast = json_fast("s.json", &json).expect("clean JSON");
        same(&fast, &parse_located("s.json", &json).unwrap()).unwrap();
    }
    let fast = yaml_fast("s.yaml", server).unwrap();
    let Some(Ok(object)) = fast[0].clone().object() else {
        panic!("{fast:?}")
    };
    assert_eq!(object.meta().namespace, None);
}

#[test]
fn yaml_with_a_mistake_is_read_by_the_located_reader() {
    for text in [
        GOOD.replace("vcpus: 1", "vcpus: two"),
        format!("{GOOD}  diskGB: 10\n"),
        GOOD.replace("kind: Flavor", "kind: Flavour"),
        GOOD.replace("m1.small", "M1"),
        format!("{GOOD}---\nkind: List\napiVersion: v1\nitems: []\n"),
        format!("{GOOD}---\njust text\n"),
    ] {
        assert!(yaml_fast("f.yaml", &text).is_none(), "{text}");
        let docs = parse_stream("f.yaml", &text).unwrap();
        same(&docs, &parse_located("f.yaml", &text).unwrap()).unwrap();
    }
}

fn provider_yaml(
    name: &str,
    parent: Option<&str>,
    total: i64,
    traits: &[String],
    style: u8,
    mistake: u8,
) -> String {
    let q = |s: &str| match style {
        0 => s.to_string(),
        1 => format!("'{s}'"),
        _ => format!("\"{s}\""),
    };
    let mut y = format!(
        "apiVersion: {}\nkind: {}\nmetadata:\n  name: {}\nspec:\n",
        q("kubeplace.io/v1alpha1"),
        q("ResourceProvider"),
        q(name)
    );
    if let Some(p) = parent {
        y += &format!("  parent: {}\n", q(p));
    }
    let total = match mistake {
        1 => "lots".to_string(),
        _ => total.to_string(),
    };
    y += &format!("  inventories:\n    VCPU: {{total: {total}, allocationRatio: 1.5}}\n");
    if mistake == 2 {
        y += "  inventorys: {}\n";
    }
    if !traits.is_empty() {
        y += "  traits:\n";
        for t in traits {
            y += &format!("  - {}\n", q(t));
        }
    }
    if mistake == 3 {
        y += "  aggregates: &a []\n";
    }
    y
}

proptest::proptest! {
    /// A stream of providers, some with a mistake, in any quoting: the fast path, when it
    /// reads the stream, gives what the located reader gives, and a mistake always comes
    /// out with the located reader's message.
    #[test]
    fn yaml_streams_read_the_same_fast_and_located(
        providers in proptest::collection::vec(
            ("[a-z][a-z0-9-]{0,8}[a-z0-9]", proptest::option::of("[a-z]{1,4}"), 0i64..100,
             proptest::collection::vec("(CUSTOM_[A-Z]{1,5}|HW_CPU_X86_AVX2|yes|[A-Z]{2})", 0..3),
             0u8..3, proptest::prop_oneof![9 => proptest::strategy::Just(0u8), 1 => 1u8..4]),
            1..8),
        blank in 0usize..3,
    ) {
        let text = providers
            .iter()
            .map(|(name, parent, total, traits, style, mistake)| {
                provider_yaml(name, parent.as_deref(), *total, traits, *style, *mistake)
            })
            .collect::<Vec<_>>()
            .join(&format!("{}---\n", "\n".repeat(blank)));
        let located = parse_located("p.yaml", &text).unwrap();
        if let Some(fast) = yaml_fast("p.yaml", &text) {
            proptest::prop_assert!(same(&fast, &located).is_ok(), "{}", same(&fast, &located).unwrap_err());
        }
        let read = parse_stream("p.yaml", &text).unwrap();
        proptest::prop_assert!(same(&read, &located).is_ok(), "{}", same(&read, &located).unwrap_err());
        if providers.iter().any(|p| p.5 != 0) {
            proptest::prop_assert!(yaml_fast("p.yaml", &text).is_none());
        }
    }
}

#[test]
fn a_json_list_with_a_mistake_names_the_line_of_the_field() {
    // An unknown field and a wrong type on lines 17 and 18: the fast path steps aside and
    // the messages name those lines, not the object's first line.
    let typo = "    {\n      \"apiVersion\": \"kubeplace.io/v1alpha1\",\n      \"kind\": \"Flavor\",\n      \"metadata\": {\"name\": \"m1.typo\"},\n      \"spec\": {\n        \"vcpus\": 1,\n        \"diskGB\": 10,\n        \"memoryMb\": \"lots\"\n      }\n    }";
    let text = json_list(&[FLAVOR_JSON, typo]);
    assert!(json_fast("f.json", &text).is_none());
    let docs = parse_stream("f.json", &text).unwrap();
    assert!(docs[0].content.is_ok());
    let err = docs[1].content.as_ref().unwrap_err();
    assert_eq!(err.line(), 18, "{err}");
    // The unknown field alone also steps aside, so its warning can name line 17.
    let text = json_list(&[FLAVOR_JSON, &typo.replace("\"lots\"", "512")]);
    assert!(json_fast("f.json", &text).is_none());
    let docs = parse_stream("f.json", &text).unwrap();
    assert_eq!(docs[1].unknown_fields.len(), 1);
    assert!(
        format!("{:?}", docs[1].unknown_fields).contains("17"),
        "{:?}",
        docs[1].unknown_fields
    );
    // Not JSON at all, or two JSON values: the located reader decides.
    assert!(json_fast("f.json", GOOD).is_none());
    assert!(json_fast("f.json", &format!("{FLAVOR_JSON}\n{FLAVOR_JSON}")).is_none());
}

/// The cluster's objects the mirror reads take the fast path when clean and read as the
/// located reader reads them (a pod without a namespace in "default"); a wrong apiVersion
/// is left to the located reader, which says which one is served.
#[test]
fn cluster_objects_read_the_same_fast_and_located() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mirror");
    let mut read = 0;
    for file in files_under(&dir).unwrap() {
        let text = std::fs::read_to_string(&file).unwrap();
        let located = parse_located("f", &text).unwrap();
        same(&parse_stream("f", &text).unwrap(), &located).unwrap();
        read += located.len();
    }
    assert!(read >= 10, "{read}");
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  nodeName: n1\n  containers:\n    - name: a\n      resources:\n        requests:\n          cpu: \"250m\"\n";
    // Quoted: the plain reader leaves a plain scalar such as 250m to the located reader.
    let fast = yaml_fast("p.yaml", pod).expect("a clean pod takes the fast path");
    same(&fast, &parse_located("p.yaml", pod).unwrap()).unwrap();
    let Ok(crate::manifest::Content::Cluster(source)) = &fast[0].content else {
        panic!("{:?}", fast[0].content)
    };
    assert_eq!(source.meta().namespace.as_deref(), Some("default"));
    let json = r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "4", "memory": "8Gi"}}}"#;
    let fast = json_fast("n.json", json).expect("a clean Node takes the fast path");
    same(&fast, &parse_located("n.json", json).unwrap()).unwrap();
    let wrong = pod.replace("apiVersion: v1", "apiVersion: apps/v1");
    assert!(yaml_fast("p.yaml", &wrong).is_none());
    let err = parse_stream("p.yaml", &wrong).unwrap()[0]
        .content
        .clone()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "field apiVersion is \"apps/v1\"; Pod is served as v1"
    );
}
