//! The install artefacts stay in step with the code: CRD copies, chart values
//! and their schema, webhook coverage of every kind; and the documentation's
//! links and `kubeplace` commands still lead somewhere.

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

const REFRESH: &str = "cargo run -- crds | tee crds/kubeplace.yaml manifests/01-crds.yaml \
                       charts/kubeplace/files/crds.yaml >/dev/null";

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).expect("YAML")
}

#[test]
fn manifests_crds_are_a_copy_of_crds() {
    assert!(
        read("manifests/01-crds.yaml") == read("crds/kubeplace.yaml"),
        "manifests/01-crds.yaml is stale: {REFRESH}"
    );
}

#[test]
fn chart_crds_are_a_copy_of_crds() {
    // templates/crds.yaml renders this file (tests/e2e/chart.rs compares the rendered CRDs).
    assert!(
        read("charts/kubeplace/files/crds.yaml") == read("crds/kubeplace.yaml"),
        "charts/kubeplace/files/crds.yaml is stale: {REFRESH}"
    );
    // The chart's crds/ folder would be installed once and never upgraded, and would
    // clash with the templated CRDs.
    assert!(
        !std::path::Path::new(&format!("{ROOT}/charts/kubeplace/crds")).exists(),
        "charts/kubeplace/crds/ is back: the CRDs live in templates/crds.yaml"
    );
}

fn values_validator() -> jsonschema::Validator {
    let schema: Value =
        serde_json::from_str(&read("charts/kubeplace/values.schema.json")).expect("schema JSON");
    jsonschema::validator_for(&schema).expect("a valid JSON schema")
}

#[test]
fn chart_values_validate_against_their_schema() {
    let validator = values_validator();
    let values = yaml(&read("charts/kubeplace/values.yaml"));
    let errors: Vec<String> = validator
        .iter_errors(&values)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "values.yaml: {errors:#?}");
}

#[test]
fn chart_values_schema_refuses_mistakes() {
    let validator = values_validator();
    let good = yaml(&read("charts/kubeplace/values.yaml"));
    let mistakes: [(&str, Value); 15] = [
        ("/weighers", serde_json::json!("gpu=1")),
        ("/weighers", serde_json::json!("ram")),
        ("/replicaCount", serde_json::json!("two")),
        ("/logFormat", serde_json::json!("xml")),
        ("/webhook/failurePolicy", serde_json::json!("Sometimes")),
        ("/leaderElection/enabled", serde_json::json!("yes")),
        ("/replicas", serde_json::json!(2)),
        ("/networkPolicy/enabled", serde_json::json!("yes")),
        (
            "/networkPolicy/webhook",
            serde_json::json!({"from": [{"cidr": "10.0.0.0/24"}]}),
        ),
        ("/webhook/clientCA", serde_json::json!({"pem": "not PEM"})),
        ("/placement/tls", serde_json::json!("yes")),
        (
            "/placement/tokenAudience",
            serde_json::json!("kubeplace placement"),
        ),
        ("/placement/tokenAudience", serde_json::json!("a,b")),
        (
            "/placement/keystone",
            serde_json::json!({"secretName": "Placement_Keystone"}),
        ),
        (
            "/placement/keystone",
            serde_json::json!({"secretName": "k", "key": "../placement.conf"}),
        ),
    ];
    for (pointer, value) in mistakes {
        let mut values = good.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        values
            .pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .unwrap_or_else(|| panic!("{parent}"))
            .insert(key.to_string(), value);
        assert!(
            !validator.is_valid(&values),
            "the schema accepts {pointer} = {}",
            values.pointer(pointer).unwrap()
        );
    }
}

#[test]
fn chart_values_schema_takes_the_weighers_kubeplace_takes() {
    let validator = values_validator();
    let good = yaml(&read("charts/kubeplace/values.yaml"));
    for weighers in ["", "spread=1", "spread=0,ram=1,cpu=1,disk=1", "ram=-1.5"] {
        let mut values = good.clone();
        values["weighers"] = serde_json::json!(weighers);
        assert!(validator.is_valid(&values), "{weighers:?} refused");
        if !weighers.is_empty() {
            weighers
                .parse::<kubeplace_core::placement::weighers::Weighers>()
                .unwrap_or_else(|e| panic!("{weighers}: {e}"));
        }
    }
}

#[test]
fn chart_app_version_is_the_crate_version() {
    let chart = yaml(&read("charts/kubeplace/Chart.yaml"));
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"));
    assert_eq!(chart["name"], "kubeplace");
}

/// (plural, scope) of every CRD in crds/.
fn crd_kinds() -> Vec<(String, String)> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(&read("crds/kubeplace.yaml")).unwrap();
    docs.iter()
        .map(|d| {
            (
                d["spec"]["names"]["plural"].as_str().unwrap().to_string(),
                d["spec"]["scope"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn manifest_webhook_covers_every_kind() {
    let webhook = yaml(&read("manifests/50-webhook.yaml"));
    let hooks = webhook["webhooks"].as_array().unwrap();
    let kinds = crd_kinds();
    assert_eq!(hooks.len(), kinds.len());
    for (plural, scope) in kinds {
        let hook = hooks
            .iter()
            .find(|h| h["name"] == format!("{plural}.kubeplace.io"))
            .unwrap_or_else(|| panic!("no webhook for {plural}"));
        assert_eq!(hook["failurePolicy"], "Fail");
        assert_eq!(hook["clientConfig"]["service"]["name"], "kubeplace-webhook");
        assert_eq!(
            hook["clientConfig"]["service"]["path"],
            format!("/validate/{plural}")
        );
        assert_eq!(hook["rules"][0]["resources"][0], plural.as_str());
        assert_eq!(hook["rules"][0]["scope"], scope.as_str());
    }
    // No CA is written down: kubeplace sets the caBundle of the configuration its
    // Deployment names, from the Secret its Role lets it keep, and nothing else.
    assert!(
        hooks
            .iter()
            .all(|h| h["clientConfig"]["caBundle"].is_null())
    );
    let deployment = yaml(&read("manifests/30-deployment.yaml"));
    let pod = &deployment["spec"]["template"]["spec"];
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let config_name = webhook["metadata"]["name"].as_str().unwrap();
    for arg in [
        "--tls-secret=kubeplace-webhook-tls",
        "--webhook-service=kubeplace-webhook",
        &format!("--webhook-config-name={config_name}"),
    ] {
        assert!(args.contains(&arg), "no {arg} in {args:?}");
    }
    let rbac: Vec<Value> = serde_saphyr::from_multiple(&read("manifests/10-rbac.yaml")).unwrap();
    let names_of = |kind: &str, resource: &str| -> Vec<Value> {
        let role = rbac.iter().find(|d| d["kind"] == kind).unwrap();
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["resources"][0] == resource)
            .flat_map(|r| r["resourceNames"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    assert_eq!(
        names_of("ClusterRole", "validatingwebhookconfigurations"),
        [Value::from(config_name)]
    );
    assert_eq!(
        names_of("Role", "secrets"),
        [Value::from("kubeplace-webhook-tls")]
    );
    // The Lease the Deployment elects its leader on, and no other.
    let lease = args
        .iter()
        .find_map(|a| a.strip_prefix("--lease-name="))
        .unwrap();
    assert_eq!(names_of("Role", "leases"), [Value::from(lease)]);
    // Drain: preStop sleep, then SIGTERM and --drain-seconds, within the grace period.
    let sleep = pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap();
    let drain: u64 = args
        .iter()
        .find_map(|a| a.strip_prefix("--drain-seconds="))
        .unwrap()
        .parse()
        .unwrap();
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(grace > sleep + drain, "{grace} <= {sleep} + {drain}");
}

/// The manifests serve the Placement API as the chart's defaults do: over TLS, with the
/// certificate made for the Placement Service, taking tokens for its own audience only.
#[test]
fn manifest_placement_api_is_https_for_its_service_and_audience() {
    let values = yaml(&read("charts/kubeplace/values.yaml"));
    assert_eq!(values["placement"]["tls"], true);
    assert_eq!(values["placement"]["tokenAudience"], "kubeplace-placement");
    let deployment = yaml(&read("manifests/30-deployment.yaml"));
    let args: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let services: Vec<Value> =
        serde_saphyr::from_multiple(&read("manifests/40-services.yaml")).unwrap();
    let placement = services
        .iter()
        .find(|s| s["spec"]["ports"][0]["name"] == "placement")
        .expect("a Service for the Placement API");
    let name = placement["metadata"]["name"].as_str().unwrap();
    for arg in [
        "--placement-addr=0.0.0.0:8778",
        "--placement-tls",
        &format!("--placement-service={name}"),
        "--placement-token-audience=kubeplace-placement",
        "--tls-secret=kubeplace-webhook-tls",
    ] {
        assert!(args.contains(&arg), "no {arg} in {args:?}");
    }
}

#[test]
fn manifest_rbac_covers_every_kind() {
    let docs: Vec<Value> = serde_saphyr::from_multiple(&read("manifests/10-rbac.yaml")).unwrap();
    let role = docs.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
    let watched = &role["rules"][0];
    assert_eq!(
        watched["verbs"],
        serde_json::json!(["get", "list", "watch"])
    );
    for (plural, _) in crd_kinds() {
        assert!(
            watched["resources"]
                .as_array()
                .unwrap()
                .contains(&Value::from(plural.clone())),
            "the ClusterRole does not watch {plural}"
        );
        assert!(
            role["rules"][1]["resources"]
                .as_array()
                .unwrap()
                .contains(&Value::from(format!("{plural}/status"))),
            "the ClusterRole cannot write {plural}/status"
        );
    }
    // Least privilege: no wildcards; Secrets only to create one and to read and update
    // that one by name (never list, watch or read others).
    let text = read("manifests/10-rbac.yaml");
    assert!(!text.contains('*'), "wildcard in RBAC");
    for d in &docs {
        for rule in d["rules"].as_array().into_iter().flatten() {
            if rule["resources"]
                .as_array()
                .unwrap()
                .contains(&Value::from("secrets"))
            {
                let verbs = rule["verbs"].clone();
                assert!(
                    verbs == serde_json::json!(["create"])
                        || (verbs == serde_json::json!(["get", "update"])
                            && rule["resourceNames"]
                                == serde_json::json!(["kubeplace-webhook-tls"])),
                    "RBAC grants too much on secrets: {rule}"
                );
            }
        }
    }
}

/// The sources `COPY` brings into the image's build stage.
fn dockerfile_copies() -> Vec<String> {
    read("Dockerfile")
        .lines()
        .filter_map(|l| l.strip_prefix("COPY "))
        .filter(|l| !l.starts_with("--from"))
        .flat_map(|l| {
            let mut parts: Vec<&str> = l.split_whitespace().collect();
            parts.pop(); // the destination
            parts
                .into_iter()
                .map(|p| p.trim_end_matches('/').to_string())
        })
        .collect()
}

#[test]
fn dockerfile_copies_everything_the_release_build_reads() {
    let copied = dockerfile_copies();
    let in_image = |path: &str| {
        copied
            .iter()
            .any(|c| path == c || path.starts_with(&format!("{c}/")))
    };
    for needed in ["Cargo.toml", "Cargo.lock", "src/main.rs", "src/lib.rs"] {
        assert!(in_image(needed), "the Dockerfile does not copy {needed}");
    }
    // Cargo reads every member's manifest and every declared target when it loads the
    // workspace.
    for dir in workspace_members() {
        let prefix = if dir == "." {
            String::new()
        } else {
            format!("{dir}/")
        };
        let manifest = format!("{prefix}Cargo.toml");
        assert!(
            in_image(&manifest),
            "the Dockerfile does not copy {manifest}"
        );
        for bench in bench_names(&read(&manifest)) {
            let path = format!("{prefix}benches/{bench}.rs");
            assert!(in_image(&path), "the Dockerfile does not copy {path}");
        }
    }
    // Every file the code embeds at compile time.
    let include = regex::Regex::new(r#"include_(?:str|bytes)!\("([^"]+)"\)"#).unwrap();
    let mut embedded = 0;
    let mut stack = vec![
        std::path::PathBuf::from(ROOT).join("src"),
        std::path::PathBuf::from(ROOT).join("crates"),
    ];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for cap in include.captures_iter(&text) {
                let target = path.parent().unwrap().join(&cap[1]);
                let target = target
                    .canonicalize()
                    .unwrap_or_else(|e| panic!("{}: {}: {e}", path.display(), &cap[1]));
                let relative = target
                    .strip_prefix(ROOT)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                assert!(
                    in_image(&relative),
                    "{} embeds {relative}, which the Dockerfile does not copy",
                    path.display()
                );
                embedded += 1;
            }
        }
    }
    assert!(embedded >= 3, "found only {embedded} embedded files");
    // Nothing the build needs is kept out of the context.
    for ignored in read(".dockerignore").lines().map(str::trim) {
        let ignored = ignored.trim_end_matches('/');
        assert!(
            ignored.is_empty() || !copied.iter().any(|c| c == ignored),
            ".dockerignore drops {ignored}, which the Dockerfile copies"
        );
    }
}

#[test]
fn the_image_runs_as_non_root_from_distroless() {
    let dockerfile = read("Dockerfile");
    let last_from = dockerfile
        .lines()
        .rev()
        .find(|l| l.starts_with("FROM "))
        .unwrap();
    assert!(last_from.contains("distroless"), "{last_from}");
    assert!(
        dockerfile.lines().any(|l| l.trim() == "USER 65532:65532"),
        "the image does not switch to a non-root user"
    );
}

/// The names of Cargo.toml's `[[bench]]` targets.
/// The folders of the workspace's members, as the root manifest lists them.
fn workspace_members() -> Vec<String> {
    let manifest = read("Cargo.toml");
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members = ["))
        .expect("the root Cargo.toml lists the workspace members");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn bench_names(cargo_toml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_bench = false;
    for line in cargo_toml.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bench = line == "[[bench]]";
        } else if in_bench && let Some(name) = line.strip_prefix("name = ") {
            out.push(name.trim_matches('"').to_string());
        }
    }
    out
}

/// README.md and every `docs/*.md`, by path from the repository's root.
fn documents() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(format!("{ROOT}/docs"))
        .expect("docs/")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    docs.insert(0, "README.md".to_string());
    docs
}

/// Each line of a Markdown text with its number and the info string of the fenced code
/// block it is in (`None` outside one); the fences themselves are left out.
fn lines_with_fences(text: &str) -> Vec<(usize, Option<String>, &str)> {
    let mut fence: Option<String> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(info.trim().to_string()),
            };
            continue;
        }
        out.push((i + 1, fence.clone(), line));
    }
    out
}

/// The anchors GitHub gives a Markdown file's headings: lower case, every character but
/// letters, digits, `-`, `_` and spaces dropped, spaces made hyphens, and a repeated
/// anchor numbered `-1`, `-2`, ….
fn heading_anchors(text: &str) -> std::collections::HashSet<String> {
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let mut anchors = std::collections::HashSet::new();
    for (_, fence, line) in lines_with_fences(text) {
        let Some(heading) = line
            .strip_prefix('#')
            .map(|h| h.trim_start_matches('#'))
            .filter(|h| h.starts_with(' ') && fence.is_none())
        else {
            continue;
        };
        let slug: String = heading
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.entry(slug.clone()).or_default();
        anchors.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    anchors
}

#[test]
fn every_relative_link_in_the_docs_reaches_a_file_and_its_heading() {
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let scheme = regex::Regex::new(r"^[a-z][a-z0-9+.-]*:").unwrap();
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = read(&doc);
        let dir = std::path::Path::new(&doc).parent().unwrap().to_path_buf();
        for (number, fence, line) in lines_with_fences(&text) {
            if fence.is_some() {
                continue;
            }
            for cap in link.captures_iter(line) {
                let target = &cap[1];
                if scheme.is_match(target) {
                    continue;
                }
                checked += 1;
                let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
                let file = if path.is_empty() {
                    std::path::PathBuf::from(&doc)
                } else {
                    dir.join(path)
                };
                let on_disk = std::path::Path::new(ROOT).join(&file);
                if !on_disk.exists() {
                    broken.push(format!(
                        "{doc}:{number}: {target}: no file {}",
                        file.display()
                    ));
                } else if !anchor.is_empty()
                    && file.extension().is_some_and(|e| e == "md")
                    && !heading_anchors(&std::fs::read_to_string(&on_disk).unwrap())
                        .contains(anchor)
                {
                    broken.push(format!(
                        "{doc}:{number}: {target}: no heading with the anchor #{anchor} in {}",
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(checked >= 50, "found only {checked} relative links");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The subcommands (one word, or two where the first has subcommands of its own) that the
/// shell lines of a Markdown text's code blocks run `kubeplace` with, directly or through
/// `cargo run … --`, with where each is written.
fn kubeplace_commands(doc: &str, text: &str) -> Vec<(Vec<String>, String)> {
    let word = regex::Regex::new(r"^[a-z][a-z-]*$").unwrap();
    let mut out = Vec::new();
    for (number, fence, line) in lines_with_fences(text) {
        let Some(fence) = fence else { continue };
        // A console block shows commands after `$ `; the other lines are their output.
        let line = match fence.as_str() {
            "console" => match line.trim_start().strip_prefix("$ ") {
                Some(command) => command,
                None => continue,
            },
            "" | "sh" | "bash" | "shell" => line,
            _ => continue,
        };
        let line = match line.find(" #") {
            Some(comment) => &line[..comment],
            None => line,
        };
        if line.trim_start().starts_with('#') {
            continue;
        }
        for command in line.split(['|', ';', '(']).flat_map(|c| c.split("&&")) {
            let mut tokens = command
                .split_whitespace()
                .skip_while(|t| matches!(*t, "sudo" | "source" | "<" | "$" | "exec"));
            let rest: Vec<&str> = match tokens.next() {
                Some(t) if t == "kubeplace" || t.ends_with("/kubeplace") => tokens.collect(),
                Some("cargo") => {
                    let all: Vec<&str> = tokens.collect();
                    match all.iter().position(|t| *t == "--") {
                        Some(dashes) if all.first() == Some(&"run") => all[dashes + 1..].to_vec(),
                        _ => continue,
                    }
                }
                _ => continue,
            };
            let words: Vec<String> = rest
                .iter()
                .take_while(|t| word.is_match(t))
                .take(2)
                .map(|t| t.to_string())
                .collect();
            if !words.is_empty() {
                out.push((words, format!("{doc}:{number}")));
            }
        }
    }
    out
}

#[test]
fn every_kubeplace_command_in_the_docs_code_blocks_exists() {
    let help = |words: &[String]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_kubeplace"))
            .arg("help")
            .args(words)
            .output()
            .expect("kubeplace runs")
    };
    let mut commands = std::collections::BTreeMap::<Vec<String>, String>::new();
    for doc in documents() {
        for (words, at) in kubeplace_commands(&doc, &read(&doc)) {
            commands.entry(words).or_insert(at);
        }
    }
    assert!(
        commands.keys().any(|w| w[0] == "apply") && commands.len() >= 5,
        "found only {commands:?}"
    );
    let mut missing = Vec::new();
    for (words, at) in &commands {
        let first = help(&words[..1]);
        if !first.status.success() {
            missing.push(format!("{at}: kubeplace {}: no such command", words[0]));
            continue;
        }
        // A second word is a subcommand only where the first has subcommands; otherwise
        // it is an argument (`kubeplace completion bash`).
        let has_subcommands = String::from_utf8_lossy(&first.stdout).contains("\nCommands:\n");
        if words.len() == 2 && has_subcommands && !help(words).status.success() {
            missing.push(format!(
                "{at}: kubeplace {}: no such command",
                words.join(" ")
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
