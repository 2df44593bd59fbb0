//! The `kubeplace` command as users run it: exit codes, messages and JSON.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn kubeplace(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubeplace runs");
    let mut pipe = child.stdin.take().expect("stdin");
    // A command that reads no stdin may have ended before this is written.
    if let Err(e) = pipe.write_all(stdin.unwrap_or("").as_bytes()) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
    }
    drop(pipe);
    child.wait_with_output().expect("kubeplace finishes")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn item<'a>(report: &'a Value, kind: &str, name: &str) -> &'a Value {
    report["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == kind && i["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the report"))
}

#[test]
fn crds_folder_is_the_output_of_kubeplace_crds() {
    let out = kubeplace(&["crds"], None);
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).unwrap();
    let stored =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/crds/kubeplace.yaml"))
            .unwrap();
    assert!(
        printed == stored,
        "crds/kubeplace.yaml is stale: run `cargo run -- crds > crds/kubeplace.yaml`"
    );
    for kind in [
        "ResourceProvider",
        "Allocation",
        "ProviderConfig",
        "ExtraSpecDefinition",
        "Flavor",
        "Image",
        "ServiceProfile",
    ] {
        assert!(
            printed.contains(&format!("kind: {kind}\n")),
            "{kind} CRD missing"
        );
    }
}

#[test]
fn example_cloud_is_admitted_with_statuses() {
    let out = kubeplace(&["apply", "-f", "examples/cloud", "-o", "json"], None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report = json(&out);
    assert_eq!(report["summary"]["rejected"], 0);
    let items = report["items"].as_array().unwrap();
    assert!(items.len() >= 20);
    for i in items {
        assert_eq!(i["admission"]["allowed"], true, "{i}");
        assert!(
            i["status"].as_object().is_some_and(|s| !s.is_empty()),
            "empty status: {i}"
        );
    }
    // The example creates the namespaces its servers live in, first.
    for ns in ["shop", "security", "research"] {
        let namespace = item(&report, "Namespace", ns);
        assert_eq!(
            namespace["source"].as_str().unwrap().split(':').next(),
            Some("examples/cloud/00-namespaces.yaml")
        );
        assert_eq!(namespace["status"]["phase"], "Active");
    }
    // Trees: a PF under a NUMA cell under a compute node.
    let pf = &item(&report, "ResourceProvider", "cn1-numa1-pf0")["status"];
    assert_eq!(pf["root"], "cn1");
    assert_eq!(pf["conditions"][0]["status"], "True");
    // Provider config: cn1 is named explicitly, cn2 and cn3 get the $COMPUTE_NODE entry.
    let cn1 = &item(&report, "ResourceProvider", "cn1")["status"];
    assert_eq!(cn1["effectiveInventories"]["CUSTOM_LLC"]["total"], 44);
    assert!(
        cn1["effectiveTraits"]
            .as_array()
            .unwrap()
            .contains(&"CUSTOM_FPGA_LOADED".into())
    );
    let cn3 = &item(&report, "ResourceProvider", "cn3")["status"];
    assert_eq!(cn3["effectiveInventories"]["CUSTOM_LLC"]["total"], 22);
    assert_eq!(
        cn3["appliedProviderConfigs"],
        serde_json::json!(["compute-defaults"])
    );
    assert!(cn3["effectiveInventories"].get("DISK_GB").is_none());
    let pc = &item(&report, "ProviderConfig", "compute-defaults")["status"];
    assert_eq!(pc["matchedProviderCount"], 3);
    // Usages: web-1's allocation (2 VCPU, 4096 MB) plus server vault-1's 8 VCPU.
    let numa = &item(&report, "ResourceProvider", "cn1-numa0")["status"];
    assert_eq!(
        numa["usages"],
        serde_json::json!({"MEMORY_MB": 4096, "VCPU": 10})
    );
    // Flavor requests as Nova builds them.
    let c1 = &item(&report, "Flavor", "c1.avx2")["status"]["request"];
    assert_eq!(
        c1["query"],
        "resources=DISK_GB:40,MEMORY_MB:16384,VCPU:8&required=HW_CPU_X86_AVX2,!CUSTOM_GOLD"
    );
    // Candidates: AVX2 is a root trait, so it counts only where the root supplies DISK_GB;
    // cn2's root also carries the forbidden CUSTOM_GOLD, which leaves cn1's four.
    let c1_status = &item(&report, "Flavor", "c1.avx2")["status"];
    assert_eq!(c1_status["candidateCount"], 4);
    assert_eq!(c1_status["conditions"][1]["reason"], "Candidates");
    assert!(
        c1_status["candidates"][0]["allocations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["provider"] == "cn1")
    );
    assert_eq!(
        item(&report, "Flavor", "m1.small")["status"]["candidateCount"],
        20
    );
    let pinned = &item(&report, "Flavor", "n1.sriov-pinned")["status"]["request"];
    assert_eq!(pinned["groupPolicy"], "isolate");
    assert_eq!(pinned["groups"].as_array().unwrap().len(), 3);
    assert_eq!(pinned["groups"][0]["resources"]["PCPU"], 4);
    // Servers: placed in file order, the huge one waits, the conflicting pair is named.
    let vault = &item(&report, "Server", "vault-1")["status"];
    assert_eq!(vault["host"], "cn1");
    assert_eq!(vault["conditions"][0]["reason"], "Scheduled");
    let lb = &item(&report, "Server", "lb-1")["status"];
    assert_eq!(
        lb["renderedMetadata"]["z23_funky_whitelist"],
        serde_json::json!(["1.2.3.4", "8.8.8.8"])
    );
    assert_eq!(
        item(&report, "Server", "batch-1")["status"]["conditions"][0]["reason"],
        "NoValidHost"
    );
    // The flavor says why nothing fits it, as the server does.
    let huge = &item(&report, "Flavor", "x1.huge")["status"]["conditions"];
    let schedulable = huge
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Schedulable")
        .unwrap();
    assert_eq!(schedulable["reason"], "NoCandidates");
    assert!(
        schedulable["message"].as_str().unwrap().ends_with(
            "no room for MEMORY_MB:1048576 for the unnumbered group (largest free 95232): 3 trees"
        ),
        "{schedulable}"
    );
    // Its message says why in at most three reasons, with counts.
    let why = item(&report, "Server", "batch-1")["status"]["conditions"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        why.contains(
            "no room for MEMORY_MB:1048576 for the unnumbered group (largest free 95232): 3 trees"
        ),
        "{why}"
    );
    assert!(why.split("; ").count() <= 3, "{why}");
    assert_eq!(
        item(&report, "Server", "licensed-1")["status"]["conditions"][0]["reason"],
        "TraitConflict"
    );
    // Strict mode admits every flavor with the cloud's custom definitions; the permissive
    // flavor is admitted with a warning for its unknown key.
    let experimental = &item(&report, "Flavor", "x1.experimental")["admission"];
    assert_eq!(
        experimental["warnings"],
        serde_json::json!([
            "spec.extraSpecs[\"lab:gpu_partition\"]=\"half\": no in-tree or custom definition matches this key; use an in-tree key (kubeplace extra-specs docs lists them) or define this one with an ExtraSpecDefinition; admitted because the validation mode is permissive"
        ])
    );
    for name in [
        "m1.small",
        "m1.large",
        "c1.avx2",
        "n1.sriov-pinned",
        "r1.cache",
        "lb.ddos",
    ] {
        let f = item(&report, "Flavor", name);
        assert_eq!(f["admission"]["warnings"], serde_json::json!([]), "{name}");
        assert_eq!(
            f["status"]["conditions"][0]["reason"], "ExtraSpecsValid",
            "{name}"
        );
    }
    let esd = &item(&report, "ExtraSpecDefinition", "acme-numa-cache")["status"];
    assert_eq!(esd["conditions"][1]["type"], "Shadowed");
    assert_eq!(esd["conditions"][1]["reason"], "NotShadowed");
    let image = &item(&report, "Image", "crypto-appliance")["status"];
    assert_eq!(
        image["requiredTraits"],
        serde_json::json!(["CUSTOM_P_STATE_ENABLED", "HW_CPU_X86_AVX512F"])
    );
}

#[test]
fn every_rejected_example_is_rejected_with_its_reason() {
    let expected = [
        (
            "allocation-unknown-provider.yaml",
            "spec.allocations[0].provider \"ghost-node\" does not exist",
        ),
        (
            "allocation-zero-amount.yaml",
            "spec.consumer \"not-a-uuid\" is not a uuid",
        ),
        (
            "extra-spec-definition-min-above-max.yaml",
            "spec.value.min (64) is greater than spec.value.max (8)",
        ),
        (
            "flavor-bad-enum.yaml",
            "spec.extraSpecs[\"hw:cpu_policy\"]=\"deddddicated\": \"deddddicated\" is not an accepted value; accepted values (exact, case-sensitive): dedicated, shared, mixed (did you mean \"dedicated\"?)",
        ),
        (
            "flavor-bad-trait-value.yaml",
            "spec.extraSpecs[\"trait:HW_CPU_X86_AVX2\"]=\"preferred\": \"preferred\" is not an accepted value; accepted values (exact, case-sensitive): required, forbidden",
        ),
        (
            "flavor-bad-validation-mode.yaml",
            "validation mode \"lenient\" is not one of strict, permissive, off",
        ),
        (
            "flavor-int-out-of-range.yaml",
            "spec.extraSpecs[\"hw:redirected_usb_ports\"]=\"16\": 16 is above the maximum of 15; expected a whole number from 0 to 15",
        ),
        ("flavor-key-characters.yaml", "the key has '/'"),
        (
            "flavor-unknown-field.yaml",
            "examples/rejected/flavor-unknown-field.yaml:11: document 1: unknown field \"spec.diskGB\" (did you mean diskGb?); spec has the fields description, diskGb,",
        ),
        (
            "flavor-negative-resources.yaml",
            "spec.extraSpecs[\"resources:VCPU\"]=\"-1\": -1 is below the minimum of 0",
        ),
        (
            "flavor-typo-key.yaml",
            "spec.extraSpecs[\"hw:cpu_pollllicy\"]=\"dedicated\": no in-tree or custom definition matches this key; use an in-tree key (kubeplace extra-specs docs lists them) or define this one with an ExtraSpecDefinition (did you mean \"hw:cpu_policy\"?)",
        ),
        (
            "flavor-wrong-field-type.yaml",
            "flavor-wrong-field-type.yaml:7: document 1: field spec.vcpus: invalid type: string \"two\"",
        ),
        (
            "image-bad-property.yaml",
            "spec.properties[\"hw_disk_bus\"]=\"VIRTIO\": \"VIRTIO\" is not an accepted value; accepted values (exact, case-sensitive): fdc, ide, sata, scsi, usb, virtio, xen, lxc, uml (did you mean \"virtio\"?)",
        ),
        (
            "image-trait-not-required.yaml",
            "the value must be \"required\"",
        ),
        (
            "project-quota-unknown-class.yaml",
            "spec.limits: \"class:VCPUS\" names no resource class: resource class \"VCPUS\" is neither a standard resource class nor CUSTOM_*; did you mean VCPU?; spec.limits: \"servers\" is -2; a limit is an integer of at least 0, or -1 for no limit",
        ),
        (
            "missing-name.yaml",
            "missing-name.yaml:2: document 1: field metadata.name is \"\": every object needs a name",
        ),
        (
            "provider-config-duplicate-identification.yaml",
            "provider 1 (name cn1): spec.providers[1].identification: \"cn1\" is already identified by spec.providers[0] (name cn1)",
        ),
        (
            "provider-config-standard-class.yaml",
            "resource class \"VCPU\" is not CUSTOM_",
        ),
        (
            "provider-config-unknown-major.yaml",
            "spec.meta.schemaVersion: schema version \"2.0\" is not supported",
        ),
        (
            "provider-own-parent.yaml",
            "spec.parent \"ouroboros\" names the provider itself",
        ),
        (
            "provider-reserved-above-total.yaml",
            "reserved (8192) is greater than total (4096)",
        ),
        (
            "provider-unknown-trait.yaml",
            "trait \"HW_CPU_X86_AVX3\" is neither a standard trait nor CUSTOM_*",
        ),
        (
            "server-unknown-flavor.yaml",
            "spec.flavor: Flavor \"m9.nonexistent\" does not exist",
        ),
        (
            "server-missing-namespace.yaml",
            "Server \"staging/web-staging\": namespaces \"staging\" not found; add a Namespace before it",
        ),
        ("service-profile-no-driver.yaml", "spec.driver is empty"),
        (
            "service-profile-growing-template.yaml",
            "spec.metadata is not a valid template: line 5: this expression could make a value of up to 131072 bytes; at most 65536 are allowed",
        ),
        (
            "unknown-api-version.yaml",
            "field apiVersion is \"kubeplace.io/v1\"; Flavor is served as kubeplace.io/v1alpha1",
        ),
        (
            "unknown-kind.yaml",
            "field kind is \"Flavour\", which kubeplace does not serve (did you mean Flavor?)",
        ),
    ];
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rejected");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    let mut listed: Vec<String> = expected.iter().map(|(f, _)| f.to_string()).collect();
    listed.sort();
    assert_eq!(
        files, listed,
        "every file under examples/rejected has an expected message here"
    );
    for (file, message) in expected {
        let path = format!("examples/rejected/{file}");
        let out = kubeplace(&["apply", "-f", &path, "-o", "json"], None);
        assert_eq!(out.status.code(), Some(1), "{file} was not rejected");
        let report = json(&out);
        let items = report["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{file} holds one object");
        let verdict = &items[0]["admission"];
        assert_eq!(verdict["allowed"], false);
        let text = verdict["message"].as_str().unwrap();
        assert!(
            text.contains(message),
            "{file}: {text:?} does not contain {message:?}"
        );
    }
    let all = kubeplace(&["apply", "-f", "examples/rejected", "-o", "json"], None);
    assert_eq!(all.status.code(), Some(1));
    let report = json(&all);
    assert_eq!(report["summary"]["admitted"], 0);
    assert_eq!(report["summary"]["rejected"], expected.len());
}

/// The API server refuses a namespaced object whose namespace does not exist; offline, the
/// namespaces are those of a new cluster and the input's Namespaces, in input order.
#[test]
fn a_server_needs_its_namespace_as_in_the_cluster() {
    let flavor = "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: m1\nspec:\n  vcpus: 1\n  memoryMb: 512\n";
    let image =
        "apiVersion: kubeplace.io/v1alpha1\nkind: Image\nmetadata:\n  name: cirros\nspec: {}\n";
    let server = |ns: &str| {
        format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata:\n  name: web-1\n{ns}spec:\n  flavor: m1\n  image: cirros\n"
        )
    };
    let namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n";
    let run = |docs: &[&str]| {
        let out = kubeplace(
            &["apply", "-f", "-", "-o", "json"],
            Some(&docs.join("---\n")),
        );
        (out.status.code(), json(&out))
    };
    let in_shop = server("  namespace: shop\n");

    // No Namespace: refused with the API server's words and what to do.
    let (code, report) = run(&[flavor, image, &in_shop]);
    assert_eq!(code, Some(1));
    let message = item(&report, "Server", "web-1")["admission"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with("Server \"shop/web-1\": namespaces \"shop\" not found; add a Namespace before it (apiVersion: v1, kind: Namespace, metadata.name: shop)"),
        "{message}"
    );
    assert!(
        message.contains("default, kube-system, kube-public, kube-node-lease"),
        "{message}"
    );

    // The Namespace after the Server comes too late, as with kubectl; the message points at it.
    let (code, report) = run(&[flavor, image, &in_shop, namespace]);
    assert_eq!(code, Some(1));
    let message = item(&report, "Server", "web-1")["admission"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("the input creates it only later, at -:"),
        "{message}"
    );

    // Before it, the Namespace is accepted and the Server admitted and placed nowhere yet.
    let (code, report) = run(&[namespace, flavor, image, &in_shop]);
    assert_eq!(code, Some(0), "{report}");
    let ns = item(&report, "Namespace", "shop");
    assert_eq!(ns["admission"]["allowed"], true);
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(report["summary"]["admitted"], 4);

    // The namespaces of a new cluster need no manifest; no namespace means `default`.
    for ns in ["", "  namespace: default\n", "  namespace: kube-system\n"] {
        let (code, report) = run(&[flavor, image, &server(ns)]);
        assert_eq!(code, Some(0), "{ns:?}: {report}");
    }

    // The table says what a Namespace is.
    let table = kubeplace(&["apply", "-f", "-"], Some(namespace));
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.contains("Namespace  shop  accepted  core v1 Namespace, not reviewed by kubeplace"),
        "{text}"
    );

    // Namespace names are DNS labels, as the API server requires.
    let (code, report) = run(&[&namespace.replace("shop", "shop.eu")]);
    assert_eq!(code, Some(1));
    assert!(
        report["items"][0]["admission"]["message"]
            .as_str()
            .unwrap()
            .contains("a namespace name is a DNS label"),
        "{report}"
    );
}

/// kubectl's strict field validation, offline: an unknown field refuses the object unless
/// `--validate` says otherwise, as it does for kubectl.
#[test]
fn unknown_fields_follow_kubectls_validate() {
    let typo = "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: m1\n  lables: {tier: gold}\nspec:\n  vcpus: 1\n  memoryMb: 512\n  diskGB: 10\n";
    let run = |args: &[&str]| {
        let mut all = vec!["apply", "-f", "-", "-o", "json"];
        all.extend(args);
        let out = kubeplace(&all, Some(typo));
        (out.status.code(), json(&out))
    };
    // Strict, the default (also `--validate` and `--validate=true`): every unknown field,
    // each with its line and the field meant, and no admission.
    for args in [
        &[][..],
        &["--validate"],
        &["--validate=true"],
        &["--validate=strict"],
    ] {
        let (code, report) = run(args);
        assert_eq!(code, Some(1), "{args:?}");
        let message = report["items"][0]["admission"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("-:5: document 1: unknown field \"metadata.lables\" (did you mean labels?); metadata has the fields annotations, "),
            "{message}"
        );
        assert!(
            message.contains(
                "; -:9: document 1: unknown field \"spec.diskGB\" (did you mean diskGb?)"
            ),
            "{message}"
        );
        assert!(
            message.ends_with(
                "with --validate=warn or --validate=false the object is applied without them)"
            ),
            "{message}"
        );
        assert_eq!(report["items"][0]["status"], serde_json::json!({}));
    }
    // Warn: admitted without the fields (no disk in the request), one warning each.
    let (code, report) = run(&["--validate=warn"]);
    assert_eq!(code, Some(0));
    let item = &report["items"][0];
    assert_eq!(item["admission"]["allowed"], true);
    assert_eq!(item["admission"]["warnings"].as_array().unwrap().len(), 2);
    assert!(
        item["admission"]["warnings"][1]
            .as_str()
            .unwrap()
            .starts_with("-:9: document 1: unknown field \"spec.diskGB\""),
        "{item}"
    );
    assert_eq!(
        item["status"]["request"]["query"],
        "resources=MEMORY_MB:512,VCPU:1"
    );
    // Ignore (also `false`): admitted, silently.
    for v in ["--validate=ignore", "--validate=false"] {
        let (code, report) = run(&[v]);
        assert_eq!(code, Some(0), "{v}");
        assert_eq!(
            report["items"][0]["admission"]["warnings"],
            serde_json::json!([])
        );
    }
    // Anything else is a usage error.
    let bad = kubeplace(&["apply", "-f", "-", "--validate=lenient"], Some(typo));
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn completion_scripts_know_the_subcommands_and_flags() {
    let bash = kubeplace(&["completion", "bash"], None);
    assert_eq!(bash.status.code(), Some(0));
    let script = String::from_utf8(bash.stdout).unwrap();
    for word in [
        "apply",
        "crds",
        "run",
        "placement",
        "provider-config",
        "extra-specs",
        "completion",
        "candidates",
        "--validate",
        "--filename",
    ] {
        assert!(script.contains(word), "the bash script lacks {word}");
    }
    assert!(script.contains("complete -F _kubeplace"), "{script}");
    // bash itself reads it without a syntax error.
    let checked = Command::new("bash")
        .args(["-n", "-c", &script])
        .output()
        .expect("bash runs");
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let zsh = kubeplace(&["completion", "zsh"], None);
    assert!(String::from_utf8_lossy(&zsh.stdout).starts_with("#compdef kubeplace"));
    let fish = kubeplace(&["completion", "fish"], None);
    assert!(String::from_utf8_lossy(&fish.stdout).contains("complete -c kubeplace"));
    let unknown = kubeplace(&["completion", "tcsh"], None);
    assert_eq!(unknown.status.code(), Some(2));
}

#[test]
fn unreadable_input_exits_2_with_file_and_line() {
    let out = kubeplace(
        &["apply", "-f", "-"],
        Some("apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nspec: [\n  vcpus: 1\n"),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("kubeplace apply: -: not valid YAML or JSON: line 3"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    let missing = kubeplace(&["apply", "-f", "no/such/file.yaml"], None);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no/such/file.yaml"));
}

#[test]
fn stdin_json_and_yaml_output() {
    let flavor = r#"{"apiVersion":"kubeplace.io/v1alpha1","kind":"Flavor","metadata":{"name":"tiny"},"spec":{"vcpus":1,"memoryMb":64}}"#;
    let out = kubeplace(&["apply", "-f", "-", "-o", "yaml"], Some(flavor));
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("query: resources=MEMORY_MB:64,VCPU:1"),
        "{text}"
    );
    assert!(text.contains("admitted: 1"), "{text}");
}

#[test]
fn a_second_document_for_the_same_object_is_an_update() {
    let v1 = "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: f\nspec:\n  vcpus: 1\n  memoryMb: 64\n";
    let stream = format!(
        "{v1}---\n{}---\n{}",
        v1.replace("vcpus: 1", "vcpus: 2"),
        v1.replace("vcpus: 1", "vcpus: 0")
    );
    let out = kubeplace(&["apply", "-f", "-", "-o", "json"], Some(&stream));
    assert_eq!(out.status.code(), Some(1), "the third document is rejected");
    let report = json(&out);
    let items = report["items"].as_array().unwrap();
    assert_eq!(
        items[2]["admission"]["message"],
        "Flavor \"f\" is invalid: spec.vcpus is 0; it must be between 1 and 2147483647"
    );
    // The rejected update left the stored object as the second document made it.
    assert_eq!(items[1]["status"]["observedGeneration"], 2);
    assert_eq!(
        items[1]["status"]["request"]["query"],
        "resources=MEMORY_MB:64,VCPU:2"
    );
}

#[test]
fn output_is_deterministic() {
    let a = kubeplace(&["apply", "-f", "examples/cloud", "-o", "json"], None);
    let b = kubeplace(&["apply", "-f", "examples/cloud", "-o", "json"], None);
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn the_reference_docs_are_current() {
    let out = kubeplace(&["extra-specs", "docs"], None);
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).unwrap();
    let stored = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/extra-specs-reference.md"
    ))
    .unwrap();
    assert!(
        printed == stored,
        "docs/extra-specs-reference.md is stale: run `cargo run -q -- extra-specs docs > docs/extra-specs-reference.md`"
    );
    let rst = kubeplace(&["extra-specs", "docs", "--format", "rst"], None);
    assert!(rst.status.success());
    assert!(String::from_utf8_lossy(&rst.stdout).contains("``hw:cpu_policy``"));
    let custom = kubeplace(
        &[
            "extra-specs",
            "docs",
            "-f",
            "examples/cloud/40-extra-spec-definitions.yaml",
        ],
        None,
    );
    let text = String::from_utf8_lossy(&custom.stdout);
    assert!(text.contains("#### `acme:numa_cache.{node}`"), "{text}");
    assert!(text.contains("ExtraSpecDefinition `acme-numa-cache`"));
}

#[test]
fn metadefs_follow_glances_namespace_schema() {
    let dir = tempfile::tempdir().unwrap();
    let out = kubeplace(
        &[
            "extra-specs",
            "metadefs",
            "--output-dir",
            dir.path().to_str().unwrap(),
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let schema: Value =
        serde_json::from_str(include_str!("data/glance-metadef-namespace-schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("Glance's schema compiles");
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    let mut flavor_props = 0;
    for path in &files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&doc)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        let assoc = doc["resource_type_associations"].as_array().unwrap();
        assert!(!assoc.is_empty());
        for a in assoc {
            match a["name"].as_str().unwrap() {
                "OS::Nova::Flavor" => {
                    flavor_props += doc["properties"].as_object().unwrap().len();
                    let prefix = a["prefix"].as_str().unwrap_or("");
                    assert!(prefix.is_empty() || prefix.ends_with(':'), "{prefix}");
                }
                "OS::Glance::Image" | "OS::Cinder::Volume" => {
                    assert!(a["prefix"].as_str().unwrap().ends_with('_'));
                }
                other => panic!("unexpected resource type {other}"),
            }
        }
    }
    // Every literal in-tree key is exported: 525 less the families and patterned keys.
    assert_eq!(flavor_props, 525 - 378 - 22 - 2 - 11 - 1);
    let hw: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("kubeplace-hw.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(hw["properties"]["cpu_policy"]["type"], "string");
}

#[test]
fn extra_specs_check_reports_each_spec() {
    let out = kubeplace(
        &[
            "extra-specs",
            "check",
            "hw:cpu_policy=dedicated",
            "hw:numa_nodes=0",
            "acme:x=1",
            "-o",
            "json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out);
    assert_eq!(report["summary"]["rejected"], 2);
    assert_eq!(report["items"][0]["status"], "valid");
    assert_eq!(report["items"][0]["definition"], "hw:cpu_policy");
    assert_eq!(report["items"][1]["status"], "invalid-value");
    assert_eq!(report["items"][2]["status"], "unknown-key");
    let permissive = kubeplace(
        &[
            "extra-specs",
            "check",
            "--mode",
            "permissive",
            "-f",
            "examples/cloud",
            "acme:cache_ways=4",
            "lab:x=1",
        ],
        None,
    );
    assert_eq!(
        permissive.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&permissive.stdout)
    );
    let pairs = r#"[["hw_disk_bus", "VIRTIO"], ["trait:CUSTOM_GOLD", "required"]]"#;
    let image = kubeplace(
        &[
            "extra-specs",
            "check",
            "--image",
            "--json-input",
            "-",
            "-o",
            "json",
        ],
        Some(pairs),
    );
    assert_eq!(image.status.code(), Some(1));
    let report = json(&image);
    assert_eq!(report["items"][0]["status"], "invalid");
    assert_eq!(report["items"][1]["status"], "valid");
    let bad = kubeplace(&["extra-specs", "check", "nokey"], None);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn custom_definitions_change_the_next_admission_and_report_shadowing() {
    let flavor = |name: &str| {
        format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: {name}\nspec:\n  vcpus: 1\n  memoryMb: 64\n  extraSpecs:\n    acme:turbo: \"on\"\n"
        )
    };
    let definition = "apiVersion: kubeplace.io/v1alpha1\nkind: ExtraSpecDefinition\nmetadata:\n  name: acme-turbo\nspec:\n  key: acme:turbo\n  description: Turbo mode.\n  value:\n    type: boolean\n";
    let shadowed = "apiVersion: kubeplace.io/v1alpha1\nkind: ExtraSpecDefinition\nmetadata:\n  name: my-realtime\nspec:\n  key: hw:cpu_realtime\n  description: Mine.\n  value:\n    type: string\n    enum: [always]\n";
    let stream = format!(
        "{}---\n{definition}---\n{}---\n{shadowed}",
        flavor("before"),
        flavor("after")
    );
    let out = kubeplace(&["apply", "-f", "-", "-o", "json"], Some(&stream));
    let report = json(&out);
    let before = &item(&report, "Flavor", "before")["admission"];
    assert_eq!(before["allowed"], false);
    assert!(before["message"].as_str().unwrap().contains("acme:turbo"));
    assert_eq!(
        item(&report, "Flavor", "after")["admission"]["allowed"],
        true
    );
    let mine = item(&report, "ExtraSpecDefinition", "my-realtime");
    assert_eq!(mine["admission"]["allowed"], true);
    assert!(
        mine["admission"]["warnings"][0].as_str().unwrap().contains(
            "shadowed: the in-tree definition hw:cpu_realtime covers every key it matches"
        ),
        "{mine}"
    );
    let conditions = &mine["status"]["conditions"];
    assert_eq!(conditions[0]["type"], "Valid");
    assert_eq!(conditions[0]["status"], "False");
    assert_eq!(conditions[0]["reason"], "Shadowed");
    assert_eq!(conditions[1]["type"], "Shadowed");
    assert_eq!(conditions[1]["status"], "True");
    assert_eq!(conditions[1]["reason"], "ShadowedByInTree");
}

/// A one-shot HTTP server on 127.0.0.1 that answers every request with `status`; its port.
fn answering(status: &'static str, requests: usize) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(requests) {
            let mut stream = stream.unwrap();
            let mut buf = [0u8; 1024];
            let _ = std::io::Read::read(&mut stream, &mut buf);
            let _ = stream.write_all(
                format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .as_bytes(),
            );
        }
    });
    port
}

#[test]
fn probe_exits_0_when_every_url_answers_2xx_and_1_otherwise() {
    let ok = answering("200 OK", 2);
    let unready = answering("503 Service Unavailable", 1);
    let out = kubeplace(
        &[
            "probe",
            &format!("http://127.0.0.1:{ok}/readyz"),
            &format!("http://127.0.0.1:{ok}/"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("http://127.0.0.1:{ok}/readyz: 200 OK")),
        "{said}"
    );
    let out = kubeplace(
        &["probe", &format!("http://127.0.0.1:{unready}/readyz")],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("503 Service Unavailable"));
    // Bad input is refused before anything is tried.
    let out = kubeplace(&["probe", "kubeplace-metrics:8080/readyz"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected http://HOST"));
    let out = kubeplace(&["probe", "https://127.0.0.1:1/healthz"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give --ca-file"));
}

/// An operator that never reached its API server (so never ready, its Placement API still
/// waiting for the first lists) stops on SIGTERM once the drain is over, instead of waiting
/// for servers that never started.
#[test]
fn run_stops_on_sigterm_before_its_cluster_ever_answered() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let made = kubeplace::serving::certs::self_signed("localhost").unwrap();
    std::fs::write(&cert, &made.cert_pem).unwrap();
    std::fs::write(&key, &made.key_pem).unwrap();
    // Nothing listens on port 1: every list and watch fails, and the store never syncs.
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(["run", "--leader-elect=false", "--drain-seconds", "1"])
        .args([
            "--webhook-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .args(["--placement-addr", "127.0.0.1:0", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--tls-cert-file")
        .arg(&cert)
        .arg("--tls-key-file")
        .arg(&key)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubeplace runs");
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        child.try_wait().unwrap().is_none(),
        "kubeplace run exited before SIGTERM: {:?}",
        child.wait_with_output()
    );
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running 10 s after SIGTERM (drain 1 s): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(status.success(), "{status:?}");
}

/// The Placement API's token audience and Service name are checked before anything
/// connects: exit 2, naming the flag, the value and what would be taken.
#[test]
fn run_refuses_a_placement_audience_or_service_it_cannot_use() {
    let on = ["run", "--placement-addr", "127.0.0.1:0"];
    let out = kubeplace(
        &[
            &on[..],
            &[
                "--self-signed",
                "--webhook-host=h",
                "--placement-token-audience=kubeplace placement",
            ],
        ]
        .concat(),
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--placement-token-audience")
            && err.contains("\"kubeplace placement\" holds ' '")
            && err.contains("printable ASCII characters without spaces or commas")
            && err.contains("an empty value"),
        "{err}"
    );
    // The Placement Service's names go into the certificate kubeplace makes in the Secret;
    // with a certificate from files they would go nowhere.
    let out = kubeplace(
        &[
            &on[..],
            &[
                "--tls-cert-file=c",
                "--tls-key-file=k",
                "--placement-tls",
                "--placement-service=kubeplace-placement",
            ],
        ]
        .concat(),
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--placement-service kubeplace-placement") && err.contains("--tls-secret"),
        "{err}"
    );
}

#[test]
fn run_refuses_a_log_filter_it_cannot_read() {
    let out = kubeplace(
        &["run", "--self-signed", "--log-level", "kubeplace=lots"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--log-level")
            && err.contains("\"kubeplace=lots\" is not a log filter")
            && err.contains("error, warn, info, debug, trace"),
        "{err}"
    );
}

/// `--webhook-client-ca` is read before anything connects: a file that is missing or holds
/// no CA certificate exits 2, naming the flag, the file and what is expected.
#[test]
fn run_refuses_a_webhook_client_ca_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing-ca.crt");
    let not_pem = dir.path().join("not-pem.crt");
    std::fs::write(&not_pem, "hello\n").unwrap();
    for (file, said) in [
        (&missing, "cannot be read"),
        (&not_pem, "holds no CERTIFICATE block"),
    ] {
        let out = kubeplace(
            &[
                "run",
                "--self-signed",
                "--webhook-host=127.0.0.1",
                &format!("--webhook-client-ca={}", file.display()),
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("--webhook-client-ca {}: ", file.display()))
                && err.contains(said)
                && err.contains("CA certificates"),
            "{err}"
        );
    }
}

#[test]
fn candidates_explain_where_they_were_lost() {
    // Only cn2 has CUSTOM_GOLD, and only cn1's numa1 NIC offloads VXLAN: no tree has both.
    let query = "resources=VCPU:8,MEMORY_MB:4096,DISK_GB:20&required=CUSTOM_GOLD,!HW_CPU_X86_AVX512F\
                 &resources1=SRIOV_NET_VF:2&required1=HW_NIC_OFFLOAD_VXLAN";
    let args = [
        "placement",
        "candidates",
        "-f",
        "examples/cloud",
        "--explain",
        "--query",
        query,
    ];
    let out = kubeplace(&args, None);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "The unnumbered group: 13 providers",
        "  - with forbidden trait HW_CPU_X86_AVX512F: 1 provider",
        "Group 1: 13 providers",
        "  - lacking required trait HW_NIC_OFFLOAD_VXLAN: 12 providers",
        "Provider trees: 4",
        "  - no provider supplying the unnumbered group with required trait CUSTOM_GOLD: 3 trees",
        "  - no provider for group 1: 1 tree",
        "  = with candidates: 0 trees",
        "Candidates: 0; returned 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in\n{text}"
        );
    }
    // As JSON: Placement's answer with the explanation beside it, counting what it returns.
    let mut args = args.to_vec();
    args[6] = "resources=VCPU:1&limit=2";
    args.extend(["-o", "json"]);
    let out = kubeplace(&args, None);
    assert_eq!(out.status.code(), Some(0));
    let body = json(&out);
    assert_eq!(body["allocation_requests"].as_array().unwrap().len(), 2);
    let e = &body["explain"];
    assert_eq!(
        (e["candidates"].as_u64(), e["cutByLimit"].as_u64()),
        (Some(6), Some(4))
    );
    assert_eq!(e["returned"], 2);
    assert_eq!(e["groups"][0]["lost"][0]["reason"], "NoInventory");
    assert_eq!(
        e["groups"][0]["lost"][0]["classes"],
        serde_json::json!(["VCPU"])
    );
    // Without --explain the body is Placement's alone.
    let plain = kubeplace(
        &[
            "placement",
            "candidates",
            "-f",
            "examples/cloud",
            "--query",
            args[6],
        ],
        None,
    );
    assert_eq!(plain.status.code(), Some(0));
    assert!(json(&plain).get("explain").is_none());
}

#[test]
fn explain_refuses_bad_input_by_name() {
    let base = [
        "placement",
        "candidates",
        "-f",
        "examples/cloud",
        "--explain",
    ];
    let bad_query = kubeplace(
        &[&base[..], &["--query", "resources=VCPU:x"]].concat(),
        None,
    );
    assert_eq!(bad_query.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad_query.stderr);
    assert!(
        err.contains("resource VCPU asks for \"x\", which is not a whole number"),
        "{err}"
    );
    let json_bad = kubeplace(
        &[&base[..], &["--query", "resources=VCPU:x", "-o", "json"]].concat(),
        None,
    );
    assert_eq!(json_bad.status.code(), Some(1));
    assert_eq!(json(&json_bad)["errors"][0]["status"], 400);
    let providers = kubeplace(
        &[
            "placement",
            "providers",
            "-f",
            "examples/cloud",
            "--explain",
            "--query",
            "resources=VCPU:1",
        ],
        None,
    );
    assert_eq!(providers.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&providers.stderr)
            .contains("--explain explains allocation candidates")
    );
    let text = kubeplace(
        &[
            "placement",
            "candidates",
            "-f",
            "examples/cloud",
            "-o",
            "text",
            "--query",
            "resources=VCPU:1",
        ],
        None,
    );
    assert_eq!(text.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&text.stderr)
            .contains("-o text prints an explanation; add --explain")
    );
    let format = kubeplace(
        &[&base[..], &["--query", "resources=VCPU:1", "-o", "yaml"]].concat(),
        None,
    );
    assert_eq!(format.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&format.stderr).contains("[possible values: json, text]"));
}

#[test]
fn headroom_counts_servers_placed_one_by_one_and_after_a_drain() {
    let base = [
        "placement",
        "headroom",
        "-f",
        "examples/cloud",
        "--flavor",
        "m1.small",
    ];
    let out = kubeplace(&[&base[..], &["-o", "json"]].concat(), None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = json(&out);
    let fits = all["fits"].as_u64().unwrap();
    let per_tree = all["perTree"].as_object().unwrap();
    assert_eq!(
        per_tree.values().filter_map(Value::as_u64).sum::<u64>(),
        fits
    );
    assert_eq!(all["capped"], false);
    assert!(
        all["stoppedBy"]
            .as_str()
            .unwrap()
            .starts_with("NoValidHost")
    );
    // The example's waiting servers take their places first.
    assert_eq!(all["pendingPlaced"], 4);
    // Draining cn1 (named by any provider of its tree) takes exactly its share away.
    let drained = json(&kubeplace(
        &[&base[..], &["--without", "cn1-numa0", "-o", "json"]].concat(),
        None,
    ));
    assert_eq!(drained["drained"], serde_json::json!(["cn1"]));
    assert!(drained["perTree"].get("cn1").is_none());
    assert!(drained["fits"].as_u64().unwrap() < fits);
    // A cap stops counting and says so.
    let table = kubeplace(&[&base[..], &["--cap", "3"]].concat(), None);
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.starts_with(
            "Flavor m1.small: at least 3 more fit (counting stopped at the cap of 3)\n"
        ),
        "{text}"
    );
}

#[test]
fn headroom_refuses_unknown_names_with_what_exists() {
    let base = ["placement", "headroom", "-f", "examples/cloud"];
    let flavor = kubeplace(&[&base[..], &["--flavor", "m1.tiny"]].concat(), None);
    assert_eq!(flavor.status.code(), Some(1));
    let err = String::from_utf8_lossy(&flavor.stderr);
    assert!(
        err.contains(
            "flavor \"m1.tiny\" does not exist; flavors: c1.avx2, lb.ddos, m1.large, m1.small"
        ),
        "{err}"
    );
    let provider = kubeplace(
        &[&base[..], &["--flavor", "m1.small", "--without", "cn9"]].concat(),
        None,
    );
    assert_eq!(provider.status.code(), Some(1));
    let err = String::from_utf8_lossy(&provider.stderr);
    assert!(err.contains("provider \"cn9\" (to drain) does not exist; give a ResourceProvider's name, e.g. one of: ceph-pool-ssd, cn1"), "{err}");
    let cap = kubeplace(
        &[&base[..], &["--flavor", "m1.small", "--cap", "0"]].concat(),
        None,
    );
    assert_eq!(cap.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&cap.stderr).contains("the cap must be at least 1 server, not 0")
    );
    let missing = kubeplace(
        &[
            "placement",
            "headroom",
            "-f",
            "no/such/dir",
            "--flavor",
            "f",
        ],
        None,
    );
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn apply_prints_admission_warnings_on_stderr_as_kubectl_does() {
    for format in ["table", "json"] {
        let out = kubeplace(&["apply", "-f", "examples/", "-o", format], None);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(
                "Warning: Flavor x1.experimental: spec.extraSpecs[\"lab:gpu_partition\"]"
            ),
            "{format}: {stderr}"
        );
        assert!(!stdout.contains("Warning:"), "{format}: {stdout}");
    }
    // The JSON report still carries the warning.
    let report = json(&kubeplace(
        &["apply", "-f", "examples/", "-o", "json"],
        None,
    ));
    let warnings = &item(&report, "Flavor", "x1.experimental")["admission"]["warnings"];
    assert_eq!(warnings.as_array().map(Vec::len), Some(1), "{warnings}");
}

#[test]
fn metadefs_take_their_directory_from_output_dir_and_warn_on_the_old_flag() {
    let count = |dir: &std::path::Path| std::fs::read_dir(dir).unwrap().count();
    let short = tempfile::tempdir().unwrap();
    let out = kubeplace(
        &[
            "extra-specs",
            "metadefs",
            "-d",
            short.path().to_str().unwrap(),
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = count(short.path());
    assert!(written > 10, "{written} files");
    // The old spelling still works, with a warning that names the new one.
    let old = tempfile::tempdir().unwrap();
    let out = kubeplace(
        &[
            "extra-specs",
            "metadefs",
            "-o",
            old.path().to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("use --output-dir DIR"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(count(old.path()), written);
    // No directory, or both spellings, is a usage error.
    let none = kubeplace(&["extra-specs", "metadefs"], None);
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("--output-dir"));
    let both = kubeplace(&["extra-specs", "metadefs", "-d", "a", "-o", "b"], None);
    assert_eq!(both.status.code(), Some(2));
}

/// Each server's host in `kubeplace apply -f examples/cloud` under `weighers`.
fn cloud_hosts(weighers: &str) -> Vec<(String, Value)> {
    let out = kubeplace(
        &[
            "apply",
            "-f",
            "examples/cloud",
            "-o",
            "json",
            "--weighers",
            weighers,
        ],
        None,
    );
    json(&out)["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "Server")
        .map(|i| {
            (
                i["name"].as_str().unwrap().to_string(),
                i["status"]["host"].clone(),
            )
        })
        .collect()
}

#[test]
fn weighers_decide_where_servers_go_and_bad_ones_are_refused() {
    let host = |hosts: &[(String, Value)], name: &str| {
        hosts.iter().find(|(n, _)| n == name).unwrap().1.clone()
    };
    let default = cloud_hosts("spread=1");
    assert_eq!(host(&default, "lb-1"), "cn2", "spread: the emptier tree");
    // Packing RAM puts the load balancer beside web-2 and vault-1 on cn1.
    let packed = cloud_hosts("spread=0,ram=-1");
    assert_eq!(host(&packed, "lb-1"), "cn1");
    assert_eq!(host(&packed, "web-2"), "cn1");
    // Nova's default weighers (free RAM, VCPU and disk) move the web servers.
    let nova = cloud_hosts("spread=0,ram=1,cpu=1,disk=1");
    assert_eq!(host(&nova, "web-2"), "cn2");
    assert_eq!(host(&nova, "web-3"), "cn3");

    for (bad, says) in [
        (
            "gpu=1",
            "unknown weigher \"gpu\"; the weighers are spread, ram, cpu, disk and instances",
        ),
        (
            "ram",
            "\"ram\" is not NAME=MULTIPLIER (for example ram=1.0 or cpu=-1)",
        ),
        (
            "cpu=lots",
            "weigher cpu: multiplier \"lots\" is not a finite number",
        ),
    ] {
        let out = kubeplace(&["apply", "-f", "examples/cloud", "--weighers", bad], None);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{bad}: {err}");
        assert!(out.stdout.is_empty(), "nothing applied under {bad}");
    }
    // A headroom cap that is not a count of servers, negative ones included, is refused
    // naming the flag, the value and what is accepted, by `apply` and `run` alike.
    for (command, cap) in [("apply", "-1"), ("apply", "lots"), ("run", "-1")] {
        let mut args = vec![command, "--headroom-cap", cap];
        if command == "apply" {
            args.extend(["-f", "examples/cloud"]);
        }
        let out = kubeplace(&args, None);
        assert_eq!(out.status.code(), Some(2), "{command} {cap}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--headroom-cap")
                && err.contains(&format!("{cap:?} is not a number of servers"))
                && err.contains("0 (no counting) or more"),
            "{command} {cap}: {err}"
        );
        assert!(out.stdout.is_empty(), "{command} {cap}");
    }
    let out = kubeplace(
        &[
            "placement",
            "headroom",
            "-f",
            "examples/cloud",
            "--flavor",
            "m1.small",
            "--weighers",
            "disk=x",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("weigher disk: multiplier \"x\""));
}

#[test]
fn candidates_naming_a_class_or_trait_no_object_has_are_a_400() {
    let ask = |query: &str| {
        kubeplace(
            &[
                "placement",
                "candidates",
                "-f",
                "examples/cloud",
                "--query",
                query,
            ],
            None,
        )
    };
    // A custom class no provider has an inventory of: Placement's 400, exit 1.
    let out = ask("resources=CUSTOM_NOPE:1");
    assert_eq!(out.status.code(), Some(1));
    let e = &json(&out)["errors"][0];
    assert_eq!(e["status"], 400);
    assert!(e["detail"].as_str().unwrap().contains("CUSTOM_NOPE"), "{e}");
    // Unknown traits, required and forbidden, named together.
    let out = ask("resources=VCPU:1&required=CUSTOM_NOPE,!CUSTOM_NADA");
    assert_eq!(out.status.code(), Some(1));
    let detail = json(&out)["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        detail.contains("CUSTOM_NADA") && detail.contains("CUSTOM_NOPE"),
        "{detail}"
    );
    // A standard class nobody has is no error: no candidates.
    let out = ask("resources=FPGA:1");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json(&out)["allocation_requests"], serde_json::json!([]));
}

/// Offline, a quota stops the Servers past it as the operator would: they wait with
/// `QuotaExceeded`, the ProjectQuota shows its usage, and headroom says how many more the
/// namespace may create.
#[test]
fn apply_and_headroom_know_quotas() {
    let quota = "apiVersion: kubeplace.io/v1alpha1\nkind: ProjectQuota\nmetadata: {name: tight, namespace: shop}\nspec:\n  limits:\n    class:VCPU: 3\n";
    let dir = std::env::temp_dir().join(format!("kubeplace-cli-quota-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("quota.yaml");
    std::fs::write(&file, quota).unwrap();
    let file = file.to_str().unwrap();
    // The quota first (after the namespaces), then the cloud and its Servers.
    let out = kubeplace(
        &[
            "apply",
            "-f",
            "examples/cloud/00-namespaces.yaml",
            "-f",
            file,
            "-f",
            "examples/cloud",
            "-o",
            "json",
        ],
        None,
    );
    let report = json(&out);
    let waiting = &item(&report, "Server", "web-3")["status"]["conditions"][0];
    assert_eq!(waiting["reason"], "QuotaExceeded", "{waiting}");
    assert!(
        waiting["message"]
            .as_str()
            .unwrap()
            .contains("class:VCPU is limited to 3; 3 in use, 4 more asked"),
        "{waiting}"
    );
    let status = &item(&report, "ProjectQuota", "tight")["status"];
    assert_eq!(status["usage"]["class:VCPU"]["used"], 3, "{status}");
    // The default's servers limit fills in the name the quota leaves out.
    assert_eq!(status["summary"], "class:VCPU 3/3, servers 2/20");
    let refused = &item(&report, "ProjectQuota", "limits")["admission"]["message"];
    assert!(
        refused
            .as_str()
            .unwrap()
            .contains("project \"shop\" is governed by ProjectQuota shop/tight already"),
        "{refused}"
    );
    // Headroom for the shop namespace: the cloud's room, and the quota's (examples/cloud
    // holds shop's ProjectQuota: 10 servers, 16 VCPU, 32768 MiB).
    let out = kubeplace(
        &[
            "placement",
            "headroom",
            "-f",
            "examples/cloud",
            "--flavor",
            "m1.small",
            "--project",
            "shop",
        ],
        None,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "10 of them within project shop's quota (ProjectQuota shop/limits; limited by servers)"
        ),
        "{text}"
    );
    let out = kubeplace(
        &[
            "placement",
            "headroom",
            "-f",
            "examples/cloud",
            "--flavor",
            "m1.small",
            "--project",
            "shop",
            "-o",
            "json",
        ],
        None,
    );
    assert_eq!(json(&out)["withinQuota"]["servers"], 10);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn apply_prints_a_table_row_for_a_name_longer_than_a_column_can_pad() {
    let name = "a".repeat(70_000);
    let input = format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: {name}}}\nspec: {{vcpus: 1, memoryMb: 1}}\n---\napiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: small}}\nspec: {{vcpus: 1, memoryMb: 1}}\n"
    );
    let out = kubeplace(&["apply", "-f", "-"], Some(&input));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let row = text
        .lines()
        .find(|l| l.starts_with("Flavor  aaa"))
        .expect("the long name's row");
    // The name is cut to one column of 253 characters, the last an ellipsis.
    let shown = row.split("  ").nth(1).unwrap();
    assert_eq!(shown, format!("{}…", "a".repeat(252)), "{row:.400}");
    assert!(row.contains("rejected"), "{row:.400}");
    // The refusal quotes the name's start and says how long it is.
    assert!(
        row.contains(&format!(
            "field metadata.name is \"{}\"…: it is 70000 characters long; at most 253 are allowed",
            "a".repeat(64)
        )),
        "{row:.1000}"
    );
    assert!(row.len() < 1_000, "{row:.1000}");
    assert!(
        text.contains(&format!("Flavor  small{}  admitted", " ".repeat(248))),
        "{text:.2000}"
    );
    // The JSON report keeps it whole.
    let out = kubeplace(&["apply", "-f", "-", "-o", "json"], Some(&input));
    assert_eq!(out.status.code(), Some(1));
    item(&json(&out), "Flavor", &name);
}

/// Runs kubeplace with stdout discarded and stderr kept; its exit code, its peak resident
/// set (VmHWM, read from /proc while it runs) in KiB, and its stderr.
fn run_measured(args: &[&str], stderr_file: &std::path::Path) -> (Option<i32>, u64, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubeplace"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(stderr_file).unwrap())
        .spawn()
        .expect("kubeplace runs");
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let status = loop {
        // The high-water mark only grows: the last reading before the exit is the peak.
        if let Ok(status) = std::fs::read_to_string(&status_path)
            && let Some(kb) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kb);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let err = std::fs::read_to_string(stderr_file).unwrap();
    (status.code(), peak, err)
}

/// Four megabytes of `{}` documents: each used to cost about 2 KB (1 GB in all); the stream
/// is now refused once it holds more documents than its length allows, in bounded memory.
#[test]
fn apply_refuses_megabytes_of_empty_documents_in_bounded_memory() {
    let dir = std::env::temp_dir().join(format!("kubeplace-empty-docs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("empty.yaml");
    std::fs::write(&file, "---\n{}\n".repeat((4 << 20) / 7)).unwrap();
    let (code, peak_kb, err) = run_measured(
        &["apply", "-f", file.to_str().unwrap()],
        &dir.join("stderr"),
    );
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, Some(2), "{err:.2000}");
    assert!(
        err.contains("empty.yaml: more than 131071 documents in 4194302 bytes"),
        "{err:.2000}"
    );
    assert!(peak_kb > 0 && peak_kb < 300 << 10, "peak RSS {peak_kb} KiB");
}

/// A Flavor of 60,000 extra specs of the wrong form: refused in a message of kilobytes
/// that says how many problems there were, as the webhook refuses it.
#[test]
fn apply_bounds_the_message_of_a_flavor_with_many_bad_extra_specs() {
    let specs: String = (0..60_000)
        .map(|i| format!("    hw:numa_cpus.{i}: \"x{i}\"\n"))
        .collect();
    let input = format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {{name: bad}}\nspec:\n  vcpus: 1\n  memoryMb: 1\n  extraSpecs:\n{specs}"
    );
    for output in ["json", "table"] {
        let out = kubeplace(&["apply", "-f", "-", "-o", output], Some(&input));
        assert_eq!(out.status.code(), Some(1), "{output}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.len() < 70_000, "{output}: {} bytes", text.len());
        let message = if output == "json" {
            item(&serde_json::from_str(&text).unwrap(), "Flavor", "bad")["admission"]["message"]
                .as_str()
                .unwrap()
                .to_string()
        } else {
            text
        };
        assert!(
            message
                .contains("Flavor \"bad\" has 60000 problems: spec.extraSpecs[\"hw:numa_cpus.0\"]"),
            "{message:.300}"
        );
        assert!(
            message.contains(" more problems (only the first "),
            "{}",
            &message[message.len().saturating_sub(300)..]
        );
    }
}

/// CORS settings are checked as the flags are read: an origin that is not one, a header
/// name that cannot be, each exit 2 naming the flag, the value and what is taken; for
/// `placement serve` and for `run` alike.
#[test]
fn cors_flags_refuse_what_is_not_an_origin_or_a_header_name() {
    for (args, flag, value, accepted) in [
        (
            vec![
                "placement",
                "serve",
                "--cors-allowed-origin",
                "horizon.example.com",
            ],
            "--cors-allowed-origin",
            "\"horizon.example.com\" is not an origin",
            "http:// or https://",
        ),
        (
            vec![
                "placement",
                "serve",
                "--cors-allowed-origin",
                "https://h.example.com/",
            ],
            "--cors-allowed-origin",
            "\"https://h.example.com/\" is not an origin",
            "no path or trailing slash",
        ),
        (
            vec![
                "placement",
                "serve",
                "--cors-allow-headers",
                "X-Auth-Token,bad header",
            ],
            "--cors-allow-headers",
            "\"bad header\" is not a header or method name",
            "letters, digits",
        ),
        (
            vec![
                "run",
                "--placement-addr",
                "127.0.0.1:0",
                "--cors-allowed-origin",
                "ftp://x",
            ],
            "--cors-allowed-origin",
            "\"ftp://x\" is not an origin",
            "http:// or https://",
        ),
    ] {
        let out = kubeplace(&args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(flag) && err.contains(value) && err.contains(accepted),
            "{args:?}: {err}"
        );
    }
}

/// Placement's `[placement]` candidate options as flags: a cap that is not -1 or a number
/// of candidates, or an unknown strategy, is refused naming what is accepted, on `serve`
/// and `run`.
#[test]
fn candidate_option_flags_refuse_what_placement_would_not_mean() {
    for (args, flag, value, accepted) in [
        (
            vec!["placement", "serve", "--max-allocation-candidates", "0"],
            "--max-allocation-candidates",
            "\"0\" is not a number of candidates",
            "-1 (no cap) or 1 or more",
        ),
        (
            vec!["placement", "serve", "--max-allocation-candidates", "-5"],
            "--max-allocation-candidates",
            "\"-5\" is not a number of candidates",
            "-1 (no cap) or 1 or more",
        ),
        (
            vec![
                "run",
                "--placement-addr",
                "127.0.0.1:0",
                "--allocation-candidates-generation-strategy",
                "widest-first",
            ],
            "--allocation-candidates-generation-strategy",
            "\"widest-first\" is not a generation strategy",
            "depth-first or breadth-first",
        ),
    ] {
        let out = kubeplace(&args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(flag) && err.contains(value) && err.contains(accepted),
            "{args:?}: {err}"
        );
    }
}
