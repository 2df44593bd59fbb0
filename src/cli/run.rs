//! `kubeplace run`: starts logging and a runtime for the operator (`crate::operator`), and
//! turns its end into the process's exit code.

use tracing::error;

use super::Exit;
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
