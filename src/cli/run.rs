//! `kubeplace run`: starts logging and a runtime for the operator (`crate::operator`), and
//! turns its end into the process's exit code.

use tracing::error;

use super::exit::Exit;
use crate::operator::{self, Flags, flags::LogFormat};

/// Runs the operator until SIGTERM or Ctrl-C.
pub fn main(flags: Flags) -> Exit {
    init_logging(flags.logs.log_format, &flags.logs.log_level);
    // The one TLS crypto provider in the build; kube's client uses it too.
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let Err(problem) = flags.check() {
        eprintln!("kubeplace run: {problem}");
        return Exit::BadInput;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kubeplace run: cannot start the runtime: {e}");
            return Exit::Failed;
        }
    };
    match runtime.block_on(operator::run(flags)) {
        Ok(()) => Exit::Ok,
        Err(e) => {
            error!("{e}");
            eprintln!("kubeplace run: {e}");
            if e.is_bad_input() {
                Exit::BadInput
            } else {
                Exit::Failed
            }
        }
    }
}

fn init_logging(format: LogFormat, level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};
    use crate::operator::Flags;

    fn parse(args: &[&str]) -> Flags {
        let mut argv = vec!["kubeplace", "run"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Run(a) => *a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn defaults_and_the_leader_elect_forms() {
        let a = parse(&["--self-signed", "--webhook-host", "127.0.0.1"]);
        assert!(a.leader.leader_elect);
        assert_eq!(a.webhook.webhook_addr.to_string(), "0.0.0.0:8443");
        assert_eq!(a.serving.metrics_addr.to_string(), "0.0.0.0:8080");
        assert_eq!(a.leader.lease_name, "kubeplace-leader");
        assert_eq!(a.webhook.webhook_config_name, "kubeplace");
        assert!(
            !parse(&[
                "--leader-elect=false",
                "--self-signed",
                "--webhook-host",
                "h"
            ])
            .leader
            .leader_elect
        );
        assert!(
            parse(&["--leader-elect", "--self-signed", "--webhook-host", "h"])
                .leader
                .leader_elect
        );
    }

    #[test]
    fn self_signed_needs_a_host_and_excludes_files() {
        let bad = |args: &[&str]| {
            let mut argv = vec!["kubeplace", "run"];
            argv.extend_from_slice(args);
            Cli::try_parse_from(argv).is_err()
        };
        assert!(bad(&["--self-signed"]));
        assert!(bad(&["--tls-cert-file", "c.pem"]));
        assert!(bad(&[
            "--self-signed",
            "--webhook-host",
            "h",
            "--tls-cert-file",
            "c",
            "--tls-key-file",
            "k"
        ]));
        assert!(!bad(&["--tls-cert-file", "c", "--tls-key-file", "k"]));
        assert!(bad(&[
            "--tls-secret",
            "s",
            "--self-signed",
            "--webhook-host",
            "h"
        ]));
        assert!(bad(&[
            "--tls-secret",
            "s",
            "--tls-cert-file",
            "c",
            "--tls-key-file",
            "k"
        ]));
        assert!(bad(&["--tls-secret", "s", "--tls-validity-days", "0"]));
    }

    #[test]
    fn the_secrets_certificate_is_for_the_service_and_the_host() {
        let a = parse(&[
            "--tls-secret",
            "kubeplace-webhook-tls",
            "--webhook-service",
            "kubeplace-webhook",
            "--namespace",
            "ops",
            "--webhook-host",
            "10.0.0.5",
        ]);
        assert_eq!(a.tls.tls_validity_days, 365);
        assert_eq!(a.serving.drain_seconds, 10);
        assert_eq!(
            a.certificate_names(),
            [
                "kubeplace-webhook.ops.svc",
                "kubeplace-webhook",
                "kubeplace-webhook.ops",
                "kubeplace-webhook.ops.svc.cluster.local",
                "10.0.0.5"
            ]
        );
        assert!(parse(&["--tls-secret", "s"]).certificate_names().is_empty());
    }

    /// `kubeplace run ARGS` as clap refuses it.
    fn refused(args: &[&str]) -> clap::Error {
        let mut argv = vec!["kubeplace", "run"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv) {
            Err(e) => e,
            Ok(_) => panic!("{args:?} was accepted"),
        }
    }

    #[test]
    fn the_placement_services_names_join_the_secrets_certificate() {
        let a = parse(&[
            "--tls-secret",
            "kubeplace-webhook-tls",
            "--webhook-service",
            "kubeplace-webhook",
            "--namespace",
            "ops",
            "--placement-addr",
            "0.0.0.0:8778",
            "--placement-tls",
            "--placement-service",
            "kubeplace-placement",
        ]);
        assert_eq!(
            a.certificate_names(),
            [
                "kubeplace-webhook.ops.svc",
                "kubeplace-webhook",
                "kubeplace-webhook.ops",
                "kubeplace-webhook.ops.svc.cluster.local",
                "kubeplace-placement.ops.svc",
                "kubeplace-placement",
                "kubeplace-placement.ops",
                "kubeplace-placement.ops.svc.cluster.local",
            ]
        );
        assert_eq!(a.check(), Ok(()));
        // Names for a certificate that is not served over the Placement API, or not made
        // here, would be set for nothing: each is refused with what it needs.
        let plain = refused(&[
            "--tls-secret=s",
            "--webhook-service=w",
            "--placement-addr=0.0.0.0:8778",
            "--placement-service=p",
        ]);
        assert_eq!(plain.exit_code(), 2);
        assert!(plain.to_string().contains("--placement-tls"), "{plain}");
        let files = parse(&[
            "--tls-cert-file=c",
            "--tls-key-file=k",
            "--placement-addr=0.0.0.0:8778",
            "--placement-tls",
            "--placement-service=p",
        ]);
        let why = files.check().unwrap_err();
        assert!(
            why.contains("--placement-service p") && why.contains("--tls-secret"),
            "{why}"
        );
        // Alone, the Placement Service's names do not name the webhook.
        let unnamed = parse(&[
            "--tls-secret=s",
            "--placement-addr=0.0.0.0:8778",
            "--placement-tls",
            "--placement-service=p",
        ]);
        assert!(unnamed.check().unwrap_err().contains("--webhook-service"));
    }

    #[test]
    fn keystone_needs_the_placement_api_and_a_usable_section() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("placement.conf");
        std::fs::write(
            &good,
            "[keystone_authtoken]\nauth_url = http://keystone:5000\nauth_type = password\nusername = placement\npassword = p\nproject_name = service\nuser_domain_name = Default\nproject_domain_name = Default\n",
        )
        .unwrap();
        let bad = dir.path().join("bad.conf");
        std::fs::write(&bad, "[keystone_authtoken]\nauth_type = token\n").unwrap();
        let flag = |p: &std::path::Path| format!("--keystone-authtoken={}", p.display());
        let base = ["--self-signed", "--webhook-host", "h"];
        let alone = parse(&[&base[..], &[flag(&good).as_str()]].concat());
        assert!(alone.check().unwrap_err().contains("--placement-addr"));
        let served = [&base[..], &["--placement-addr=0.0.0.0:8778"]].concat();
        assert_eq!(
            parse(&[&served[..], &[flag(&good).as_str()]].concat()).check(),
            Ok(())
        );
        let why = parse(&[&served[..], &[flag(&bad).as_str()]].concat())
            .check()
            .unwrap_err();
        assert!(
            why.contains("bad.conf") && why.contains("auth_type = \"token\""),
            "{why}"
        );
    }

    #[test]
    fn the_placement_token_audience_defaults_to_kubeplace_placement_and_may_be_emptied() {
        let on = [
            "--self-signed",
            "--webhook-host=h",
            "--placement-addr=0.0.0.0:8778",
        ];
        let a = parse(&on);
        assert_eq!(a.placement.placement_token_audience, "kubeplace-placement");
        assert_eq!(a.placement_audience(), Some("kubeplace-placement"));
        let given = parse(
            &[
                &on[..],
                &["--placement-token-audience=https://placement.example/"],
            ]
            .concat(),
        );
        assert_eq!(
            given.placement_audience(),
            Some("https://placement.example/")
        );
        // Empty: the API server's own audience, the weaker choice.
        let empty = parse(&[&on[..], &["--placement-token-audience="]].concat());
        assert_eq!(empty.placement_audience(), None);
        // Without the Placement API there is no audience to set.
        let off = refused(&[
            "--self-signed",
            "--webhook-host=h",
            "--placement-token-audience=x",
        ]);
        assert!(off.to_string().contains("--placement-addr"), "{off}");
    }

    #[test]
    fn a_bad_placement_token_audience_is_refused_naming_the_flag_the_value_and_what_is_taken() {
        let on = [
            "--self-signed",
            "--webhook-host=h",
            "--placement-addr=0.0.0.0:8778",
        ];
        let long = "a".repeat(257);
        for (value, said) in [
            ("kubeplace placement", "\"kubeplace placement\" holds ' '"),
            ("a,b", "\"a,b\" holds ','"),
            ("plac\u{e9}ment", "holds '\u{e9}'"),
            ("tab\there", "holds '\\t'"),
            (long.as_str(), "an audience of 257 characters is too long"),
        ] {
            let flag = format!("--placement-token-audience={value}");
            let e = refused(&[&on[..], &[flag.as_str()]].concat());
            assert_eq!(e.exit_code(), 2, "{value}");
            let text = e.to_string();
            for part in [
                "--placement-token-audience",
                said,
                "1 to 256 printable ASCII characters without spaces or commas",
                "e.g. kubeplace-placement",
                "an empty value",
            ] {
                assert!(text.contains(part), "{value:?}: no {part:?} in {text}");
            }
        }
        // 256 characters are taken.
        let at_most = "a".repeat(256);
        let flag = format!("--placement-token-audience={at_most}");
        assert_eq!(
            parse(&[&on[..], &[flag.as_str()]].concat()).placement_audience(),
            Some(at_most.as_str())
        );
    }

    /// Flags that parse but cannot run together are refused before anything starts.
    #[test]
    fn a_webhook_without_a_certificate_or_names_is_refused() {
        let none = parse(&[]);
        assert!(none.check().unwrap_err().contains("needs a certificate"));
        let unnamed = parse(&["--tls-secret", "s"]);
        assert!(unnamed.check().unwrap_err().contains("--webhook-service"));
        assert_eq!(
            parse(&["--self-signed", "--webhook-host", "h"]).check(),
            Ok(())
        );
    }
}
