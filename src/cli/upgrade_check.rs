//! `kubeplace placement upgrade-check`: whether a cluster is ready to serve Placement, as
//! `placement-status upgrade check` says it of a Placement: each check Success, Warning or
//! Failure with its details, and the exit code install automation reads (0 every check
//! passed, 1 a warning, 2 a failure, 255 the checks could not be made).
//!
//! What is read is gathered first ([`Facts`]); each check is a judgement of those facts
//! ([`judge`]).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use serde::Serialize;
use serde_json::{Value, json};

use super::exit::Exit;
use super::output::Report;
use crate::args::KeystoneArgs;
use crate::keystone::catalog::{self, Wanted};
use crate::keystone::service::ServiceUser;
use crate::operator::flags::ClusterFlags;
use kubeplace_api::{Kind, PROJECT_ANNOTATION};

/// Arguments of `kubeplace placement upgrade-check`.
#[derive(clap::Args, Debug)]
pub struct UpgradeCheckArgs {
    #[command(flatten)]
    pub cluster: ClusterFlags,
    /// The Lease the replicas elect a leader on (`kubeplace run --lease-name`).
    #[arg(long, value_name = "NAME", default_value = "kubeplace-leader")]
    pub lease_name: String,
    /// The `[keystone_authtoken]` kubeplace validates tokens with: its user must log in.
    #[command(flatten)]
    pub keystone: KeystoneArgs,
    /// The URL Placement is served at: with --keystone-authtoken, the catalog's placement
    /// endpoint (the section's region and interfaces) must be it.
    #[arg(long, value_name = "URL")]
    pub placement_url: Option<String>,
    /// `text`: placement-status' table; `json`: `{"checks": [{"check", "result",
    /// "details"}]}`.
    #[arg(short = 'o', long, value_enum, default_value_t = Report::Text)]
    pub output: Report,
}

/// A check's verdict, in placement-status' words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Verdict {
    Success,
    Warning,
    Failure,
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub check: &'static str,
    pub result: Verdict,
    pub details: Option<String>,
}

/// What the checks judge, as read from the cluster and Keystone.
#[derive(Debug, Default)]
pub struct Facts {
    /// Each CRD kubeplace has, with the one installed under its name (`None`: missing).
    pub crds: Vec<(String, Value, Option<Value>)>,
    /// The answer to a server-side dry run of a Flavor: `None` when admitted, else the
    /// status code and message.
    pub dry_run: Option<(u16, String)>,
    /// The Lease's holder and how long ago it was renewed against its duration.
    pub lease: Option<(Option<String>, Option<Duration>, Duration)>,
    /// Keystone, when asked.
    pub keystone: Option<KeystoneSeen>,
    /// Allocations without a project: their consumers are Placement's incomplete ones.
    pub without_project: usize,
}

/// What Keystone showed.
#[derive(Debug)]
pub enum KeystoneSeen {
    /// The login failed, and why.
    LoginFailed(String),
    /// The catalog's placement endpoint (or why there is none), and the URL served.
    LoggedIn {
        endpoint: Result<String, String>,
        served: Option<String>,
    },
}

/// Judges every check.
pub fn judge(f: &Facts) -> Vec<Outcome> {
    let mut out = Vec::new();
    let outcome = |check, result, details: Option<String>| Outcome {
        check,
        result,
        details,
    };
    let missing: Vec<&str> = f
        .crds
        .iter()
        .filter(|(_, _, installed)| installed.is_none())
        .map(|(n, _, _)| n.as_str())
        .collect();
    let stale: Vec<&str> = f
        .crds
        .iter()
        .filter(|(_, want, installed)| {
            installed
                .as_ref()
                .is_some_and(|i| versions(i) != versions(want))
        })
        .map(|(n, _, _)| n.as_str())
        .collect();
    out.push(if !missing.is_empty() {
        outcome(
            "CustomResourceDefinitions",
            Verdict::Failure,
            Some(format!(
                "not installed: {}; apply `kubeplace crds` (or the chart's crds/)",
                missing.join(", ")
            )),
        )
    } else if !stale.is_empty() {
        outcome(
            "CustomResourceDefinitions",
            Verdict::Warning,
            Some(format!(
                "installed from another kubeplace version (their versions or schemas differ): {}; apply `kubeplace crds` of this version",
                stale.join(", ")
            )),
        )
    } else {
        outcome("CustomResourceDefinitions", Verdict::Success, None)
    });
    out.push(match &f.dry_run {
        None => outcome("Admission webhook", Verdict::Success, None),
        Some((code, message)) => outcome(
            "Admission webhook",
            Verdict::Failure,
            Some(format!(
                "a Flavor sent with dryRun was answered {code}: {message}"
            )),
        ),
    });
    out.push(match &f.lease {
        None => outcome(
            "Leader",
            Verdict::Failure,
            Some("no leader Lease: is `kubeplace run` running in this namespace?".into()),
        ),
        Some((None, _, _)) => outcome(
            "Leader",
            Verdict::Failure,
            Some("the leader Lease has no holder: no replica decides claims".into()),
        ),
        Some((Some(holder), age, duration)) => match age {
            Some(age) if *age <= *duration * 3 => outcome(
                "Leader",
                Verdict::Success,
                Some(format!("{holder} leads")),
            ),
            _ => outcome(
                "Leader",
                Verdict::Failure,
                Some(format!(
                    "{holder} holds the Lease but has not renewed it for {} (its duration is {}s): it may be gone",
                    age.map_or("ever".to_string(), |a| format!("{}s", a.as_secs())),
                    duration.as_secs()
                )),
            ),
        },
    });
    match &f.keystone {
        None => {}
        Some(KeystoneSeen::LoginFailed(e)) => {
            out.push(outcome("Keystone", Verdict::Failure, Some(e.clone())));
        }
        Some(KeystoneSeen::LoggedIn { endpoint, served }) => {
            out.push(outcome("Keystone", Verdict::Success, None));
            out.push(match (endpoint, served) {
                (Err(e), _) => outcome("Catalog", Verdict::Failure, Some(e.clone())),
                (Ok(found), Some(served))
                    if found.trim_end_matches('/') != served.trim_end_matches('/') =>
                {
                    outcome(
                        "Catalog",
                        Verdict::Warning,
                        Some(format!(
                            "the catalog's placement endpoint is {found}, not {served}: clients still go there (`kubeplace placement register` points it here)"
                        )),
                    )
                }
                (Ok(found), _) => outcome(
                    "Catalog",
                    Verdict::Success,
                    Some(format!("placement endpoint {found}")),
                ),
            });
        }
    }
    out.push(if f.without_project == 0 {
        outcome("Incomplete Consumers", Verdict::Success, None)
    } else {
        outcome(
            "Incomplete Consumers",
            Verdict::Warning,
            Some(format!(
                "{} Allocations have no project ({PROJECT_ANNOTATION}): the Placement API shows their consumers in the incomplete-consumer project; write them again with their project",
                f.without_project
            )),
        )
    });
    out
}

/// What of a CRD must match: its versions, each with its schema (numbers as numbers: the
/// API server may keep `1.0` as `1`).
fn versions(crd: &Value) -> Value {
    let versions = crd["spec"]["versions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut v = Value::Array(
        versions
            .iter()
            .map(|v| json!({"name": v["name"], "served": v["served"], "schema": v["schema"]}))
            .collect(),
    );
    numbers_as_floats(&mut v);
    v
}

fn numbers_as_floats(v: &mut Value) {
    match v {
        Value::Number(n) => {
            if let Some(f) = n.as_f64() {
                *v = json!(f);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(numbers_as_floats),
        Value::Object(fields) => fields.values_mut().for_each(numbers_as_floats),
        _ => {}
    }
}

/// The exit code of the outcomes: the worst verdict.
pub fn exit_code(outcomes: &[Outcome]) -> u8 {
    match outcomes.iter().map(|o| o.result).max() {
        None | Some(Verdict::Success) => 0,
        Some(Verdict::Warning) => 1,
        Some(Verdict::Failure) => 2,
    }
}

/// What the command ends with: placement-status' code, or an input error.
pub enum Ended {
    Code(u8),
    BadInput,
}

/// The nearest of kubeplace's own exits, where a caller has no room for 255.
impl From<Ended> for Exit {
    fn from(ended: Ended) -> Exit {
        match ended {
            Ended::Code(0) => Exit::Ok,
            Ended::BadInput => Exit::BadInput,
            Ended::Code(_) => Exit::Failed,
        }
    }
}

/// The process's exit: placement-status' codes (0, 1, 2, 255), or kubeplace's 2 for bad
/// input.
pub fn exit_of(ended: Ended) -> ExitCode {
    match ended {
        Ended::Code(c) => ExitCode::from(c),
        Ended::BadInput => Exit::BadInput.into(),
    }
}

/// Runs the checks; placement-status' exit codes (255 when they could not be made).
pub fn main(args: &UpgradeCheckArgs) -> Ended {
    let failed = |e: &dyn std::fmt::Display| {
        eprintln!("kubeplace placement upgrade-check: {e}");
        Ended::Code(255)
    };
    let keystone = match args.keystone.config() {
        Ok(k) => k,
        Err(e) => {
            eprintln!("kubeplace placement upgrade-check: {e}");
            return Ended::BadInput;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return failed(&e),
    };
    let facts = match runtime.block_on(gather(args, keystone)) {
        Ok(f) => f,
        Err(e) => return failed(&e),
    };
    let outcomes = judge(&facts);
    let mut out = std::io::stdout().lock();
    let _ = match args.output {
        Report::Json => {
            writeln!(out, "{}", json!({"checks": outcomes}))
        }
        Report::Text => writeln!(out, "{}", table(&outcomes)),
    };
    Ended::Code(exit_code(&outcomes))
}

/// placement-status' table.
fn table(outcomes: &[Outcome]) -> String {
    let mut rows = vec!["Upgrade Check Results".to_string()];
    for o in outcomes {
        rows.push(format!(
            "Check: {}\nResult: {:?}\nDetails: {}",
            o.check,
            o.result,
            o.details.as_deref().unwrap_or("None")
        ));
    }
    let width = rows
        .iter()
        .flat_map(|r| r.lines())
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    let rule = format!("+{}+", "-".repeat(width + 2));
    let mut text = rule.clone();
    for row in rows {
        for line in row.lines() {
            text.push_str(&format!("\n| {line:<width$} |"));
        }
        text.push('\n');
        text.push_str(&rule);
    }
    text
}

/// Reads what the checks judge.
async fn gather(
    args: &UpgradeCheckArgs,
    keystone: Option<crate::keystone::config::KeystoneConfig>,
) -> Result<Facts, String> {
    let client = crate::operator::client(&args.cluster)
        .await
        .map_err(|e| e.to_string())?;
    let mut facts = Facts::default();

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for want in kubeplace_api::all_crds() {
        let name = want.metadata.name.clone().unwrap_or_default();
        let installed = crds
            .get_opt(&name)
            .await
            .map_err(|e| format!("reading CRD {name}: {e}"))?;
        let want = serde_json::to_value(&want).map_err(|e| e.to_string())?;
        let installed = installed
            .map(|i| serde_json::to_value(&i))
            .transpose()
            .map_err(|e| e.to_string())?;
        facts.crds.push((name, want, installed));
    }

    if facts.crds.iter().all(|(_, _, i)| i.is_some()) {
        let flavors: Api<DynamicObject> =
            Api::all_with(client.clone(), &Kind::Flavor.api_resource());
        let flavor: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubeplace.io/v1alpha1", "kind": "Flavor",
            "metadata": {"generateName": "kubeplace-upgrade-check-"},
            "spec": {"vcpus": 1, "memoryMb": 512, "diskGb": 1},
        }))
        .map_err(|e| e.to_string())?;
        let params = PostParams {
            dry_run: true,
            ..Default::default()
        };
        facts.dry_run = match flavors.create(&params, &flavor).await {
            Ok(_) => None,
            Err(kube::Error::Api(s)) => Some((s.code, s.message)),
            Err(e) => return Err(format!("sending a Flavor with dryRun: {e}")),
        };
    } else {
        facts.dry_run = Some((0, "not tried: the CRDs are not all installed".into()));
    }

    let leases: Api<Lease> = Api::namespaced(client.clone(), &args.cluster.namespace);
    facts.lease = leases
        .get_opt(&args.lease_name)
        .await
        .map_err(|e| format!("reading Lease {}: {e}", args.lease_name))?
        .map(|l| {
            let spec = l.spec.unwrap_or_default();
            let holder = spec.holder_identity.filter(|h| !h.is_empty());
            // A renewal stamped ahead of this clock (clocks differ) counts as just now.
            let age = spec.renew_time.map(|t| {
                Duration::try_from(jiff::Timestamp::now().duration_since(t.0))
                    .unwrap_or(Duration::ZERO)
            });
            let duration =
                Duration::from_secs(spec.lease_duration_seconds.unwrap_or(15).max(1) as u64);
            (holder, age, duration)
        });

    if facts
        .crds
        .iter()
        .any(|(n, _, i)| n.starts_with("allocations.") && i.is_some())
    {
        let allocations: Api<DynamicObject> =
            Api::all_with(client.clone(), &Kind::Allocation.api_resource());
        let listed = allocations
            .list_metadata(&Default::default())
            .await
            .map_err(|e| format!("listing Allocations: {e}"))?;
        facts.without_project = listed
            .items
            .iter()
            .filter(|a| {
                a.metadata
                    .annotations
                    .as_ref()
                    .is_none_or(|m| !m.contains_key(PROJECT_ANNOTATION))
            })
            .count();
    }

    if let Some(config) = keystone {
        let wanted = Wanted::placement(&config);
        let user = ServiceUser::new(config)?;
        facts.keystone = Some(match user.login_with_catalog().await {
            Err(e) => KeystoneSeen::LoginFailed(e.to_string()),
            Ok(login) => KeystoneSeen::LoggedIn {
                endpoint: catalog::endpoint(
                    login.catalog.as_ref().unwrap_or(&Value::Null),
                    &wanted,
                )
                .map_err(|e| e.to_string()),
                served: args.placement_url.clone(),
            },
        });
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> Facts {
        let crd = json!({"spec": {"versions": [{"name": "v1alpha1", "served": true, "schema": {"openAPIV3Schema": {"type": "object", "minimum": 1.0}}}]}});
        let stored = json!({"spec": {"versions": [{"name": "v1alpha1", "served": true, "schema": {"openAPIV3Schema": {"type": "object", "minimum": 1}}}]}});
        Facts {
            crds: vec![("flavors.kubeplace.io".into(), crd, Some(stored))],
            dry_run: None,
            lease: Some((
                Some("kubeplace-0".into()),
                Some(Duration::from_secs(1)),
                Duration::from_secs(2),
            )),
            keystone: Some(KeystoneSeen::LoggedIn {
                endpoint: Ok("https://placement.example".into()),
                served: Some("https://placement.example/".into()),
            }),
            without_project: 0,
        }
    }

    fn verdicts(f: &Facts) -> Vec<(&'static str, Verdict)> {
        judge(f).into_iter().map(|o| (o.check, o.result)).collect()
    }

    #[test]
    fn a_healthy_cluster_passes_every_check() {
        let f = healthy();
        assert!(
            judge(&f).iter().all(|o| o.result == Verdict::Success),
            "{:?}",
            judge(&f)
        );
        assert_eq!(exit_code(&judge(&f)), 0);
    }

    #[test]
    fn each_fault_is_its_checks_warning_or_failure() {
        let mut f = healthy();
        f.without_project = 3;
        f.keystone = Some(KeystoneSeen::LoggedIn {
            endpoint: Ok("https://old-placement".into()),
            served: Some("https://placement.example".into()),
        });
        assert_eq!(exit_code(&judge(&f)), 1, "{:?}", verdicts(&f));
        f.lease = Some((
            Some("kubeplace-0".into()),
            Some(Duration::from_secs(60)),
            Duration::from_secs(2),
        ));
        assert!(verdicts(&f).contains(&("Leader", Verdict::Failure)));
        assert_eq!(exit_code(&judge(&f)), 2);
        let mut f = healthy();
        f.crds[0].2 = None;
        assert!(verdicts(&f).contains(&("CustomResourceDefinitions", Verdict::Failure)));
        let mut f = healthy();
        f.crds[0].2 = Some(json!({"spec": {"versions": [{"name": "v1alpha0", "served": true}]}}));
        assert!(verdicts(&f).contains(&("CustomResourceDefinitions", Verdict::Warning)));
        let mut f = healthy();
        f.keystone = Some(KeystoneSeen::LoginFailed("refused".into()));
        assert_eq!(
            verdicts(&f).iter().filter(|(c, _)| *c == "Catalog").count(),
            0,
            "no catalog without a login"
        );
        assert!(verdicts(&f).contains(&("Keystone", Verdict::Failure)));
    }

    #[test]
    fn the_table_reads_as_placement_status_prints_it() {
        let text = table(&judge(&healthy()));
        assert!(text.starts_with("+---"), "{text}");
        assert!(text.contains("| Check: Leader"), "{text}");
        assert!(text.contains("| Result: Success"), "{text}");
        assert!(text.contains("| Details: kubeplace-0 leads"), "{text}");
    }
}
