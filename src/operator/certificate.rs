//! The serving certificate the webhook (and, with `--placement-tls`, the Placement API)
//! serves: from files re-read when they change, kept in a Secret shared by the replicas,
//! or generated at start.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::error::Error;
use super::flags::Flags;
use crate::serving::certs;
use crate::serving::tls_secret::{Lifetimes, TlsSecret};

/// How often files given with `--tls-cert-file` are looked at for a change.
const RELOAD_EVERY: Duration = Duration::from_secs(5);

/// What is served, and the CA that signed it.
pub(crate) struct Serving {
    /// TLS with the certificate in use; it follows renewals and changed files.
    pub tls: TlsAcceptor,
    /// The certificate served, which is also presented to the leader to pass it claims.
    pub resolver: Arc<certs::CertResolver>,
    /// The CA other replicas check this one's certificate with, or why it is not known.
    pub ca_pem: Result<String, String>,
    /// The CA as it changes (a renewal in the Secret), for the Lease.
    pub ca_changes: watch::Receiver<String>,
    /// A CA generated at start, to register in the webhook configuration (`--self-signed`).
    pub register_ca: Option<String>,
}

/// Loads, fetches or makes the certificate `flags` name, and keeps it current until
/// `files_until` (files) or `secret_until` (the Secret) is cancelled.
pub(crate) async fn serving(
    flags: &Flags,
    client: &Client,
    files_until: CancellationToken,
    secret_until: CancellationToken,
) -> Result<Serving, Error> {
    let tls_flags = &flags.tls;
    let (ca_tx, ca_changes) = watch::channel(String::new());
    let mut register_ca = None;
    let (resolver, ca_pem) = match (
        &tls_flags.tls_cert_file,
        &tls_flags.tls_key_file,
        &tls_flags.tls_secret,
    ) {
        (Some(cert), Some(key), _) => {
            let resolver = certs::CertResolver::new(certs::load_files(cert, key)?);
            tokio::spawn(certs::reload_on_change(
                resolver.clone(),
                cert.clone(),
                key.clone(),
                RELOAD_EVERY,
                files_until,
            ));
            (resolver, None)
        }
        (_, _, Some(secret)) => {
            let kept = TlsSecret::new(
                client.clone(),
                &flags.cluster.namespace,
                secret,
                &flags.webhook.webhook_config_name,
                flags.certificate_names(),
                Lifetimes::days(tls_flags.tls_validity_days),
            );
            let material = kept.ensure().await?;
            let resolver = certs::CertResolver::new(material.certified_key()?);
            let ca = material.ca_bundle.clone();
            ca_tx.send_replace(ca.clone());
            tokio::spawn(kept.keep(resolver.clone(), material, ca_tx, secret_until));
            (resolver, Some(ca))
        }
        _ => {
            let host = flags.webhook.webhook_host.clone().unwrap_or_default();
            let generated = certs::self_signed(&host)?;
            let resolver = certs::CertResolver::new(generated.certified_key()?);
            register_ca = Some(generated.ca_pem.clone());
            (resolver, Some(generated.ca_pem))
        }
    };
    let tls = TlsAcceptor::from(certs::server_config(resolver.clone())?);
    Ok(Serving {
        tls,
        resolver,
        ca_pem: replicas_ca(flags, ca_pem.as_deref()),
        ca_changes,
        register_ca,
    })
}

/// The CA that signed the serving certificate, which every replica shares: `--ca-file`, else
/// the CA made here (`--tls-secret`, `--self-signed`), else `ca.crt` beside
/// `--tls-cert-file`.
fn replicas_ca(flags: &Flags, made: Option<&str>) -> Result<String, String> {
    let tls = &flags.tls;
    match (&tls.ca_file, made, &tls.tls_cert_file) {
        (Some(path), _, _) => {
            std::fs::read_to_string(path).map_err(|e| format!("--ca-file {}: {e}", path.display()))
        }
        (None, Some(ca), _) => Ok(ca.to_string()),
        (None, None, Some(cert)) => {
            let beside = cert.with_file_name("ca.crt");
            std::fs::read_to_string(&beside)
                .map_err(|e| format!("give --ca-file ({} cannot be read: {e})", beside.display()))
        }
        (None, None, None) => Err("give --ca-file".into()),
    }
}
