//! The webhook's serving certificate: from PEM files (re-read when they change), or a CA
//! and serving certificate generated here (at start for `--self-signed`, into a Secret for
//! `--tls-secret`, see `tls_secret.rs`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Why a certificate could not be loaded or made.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("no PEM certificate found: {0}")]
    Certificate(String),
    #[error("no usable PEM private key found: {0}")]
    Key(String),
    #[error("cannot generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// A certificate chain and key from PEM.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, CertError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertError::Certificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(CertError::Certificate(
            "the file holds no CERTIFICATE block".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| CertError::Key(e.to_string()))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| CertError::Key(e.to_string()))?;
    Ok(CertifiedKey::new(chain, signer))
}

fn read(path: &Path) -> Result<Vec<u8>, CertError> {
    std::fs::read(path).map_err(|source| CertError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// Loads a certificate chain and key from PEM files.
pub fn load_files(cert: &Path, key: &Path) -> Result<CertifiedKey, CertError> {
    certified_key(&read(cert)?, &read(key)?)
}

/// Serves the current certificate to every handshake; it can be swapped at any time.
#[derive(Debug)]
pub struct CertResolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertResolver {
    pub fn new(key: CertifiedKey) -> Arc<CertResolver> {
        Arc::new(CertResolver {
            current: RwLock::new(Arc::new(key)),
        })
    }

    /// Replaces the certificate for later handshakes.
    pub fn set(&self, key: CertifiedKey) {
        *crate::locks::write(&self.current) = Arc::new(key);
    }

    /// The certificate served now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        crate::locks::read(&self.current).clone()
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The CAs of `ca_pem` as roots to check a server against.
fn roots(ca_pem: &str) -> Result<rustls::RootCertStore, CertError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| CertError::Certificate(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| CertError::Certificate(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(CertError::Certificate(
            "the CA file holds no CERTIFICATE block".into(),
        ));
    }
    Ok(roots)
}

fn client_builder(
    ca_pem: &str,
) -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>, CertError>
{
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots(ca_pem)?))
}

/// A TLS client configuration (ring) that trusts the CAs of `ca_pem` only.
pub fn client_config(ca_pem: &str) -> Result<Arc<rustls::ClientConfig>, CertError> {
    Ok(Arc::new(client_builder(ca_pem)?.with_no_client_auth()))
}

/// [`client_config`], presenting the resolver's certificate when the server asks for one.
pub fn client_config_presenting(
    ca_pem: &str,
    identity: Arc<CertResolver>,
) -> Result<Arc<rustls::ClientConfig>, CertError> {
    Ok(Arc::new(
        client_builder(ca_pem)?.with_client_cert_resolver(identity),
    ))
}

/// A TLS server configuration (ring, TLS 1.2 and 1.3, HTTP/1.1) serving the resolver's
/// certificate.
pub fn server_config(resolver: Arc<CertResolver>) -> Result<Arc<ServerConfig>, CertError> {
    server_config_with(resolver, WebPkiClientVerifier::no_client_auth())
}

/// [`server_config`], requiring a client certificate that `clients` accepts: a client
/// without one fails the handshake.
pub fn server_config_checking(
    resolver: Arc<CertResolver>,
    clients: Arc<dyn ClientCertVerifier>,
) -> Result<Arc<ServerConfig>, CertError> {
    server_config_with(resolver, clients)
}

fn server_config_with(
    resolver: Arc<CertResolver>,
    clients: Arc<dyn ClientCertVerifier>,
) -> Result<Arc<ServerConfig>, CertError> {
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(clients)
            .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Re-reads the certificate and key files whenever their modification time or size
/// changes (checked every `every`), until `cancel`. A pair that does not load is logged
/// and the previous certificate is kept.
pub async fn reload_on_change(
    resolver: Arc<CertResolver>,
    cert: PathBuf,
    key: PathBuf,
    every: Duration,
    cancel: CancellationToken,
) {
    let mut seen = (stamp(&cert), stamp(&key));
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let now = (stamp(&cert), stamp(&key));
        if now == seen {
            continue;
        }
        match load_files(&cert, &key) {
            Ok(k) => {
                resolver.set(k);
                seen = now;
                info!(cert = %cert.display(), "reloaded the serving certificate");
            }
            // A half-written pair (cert renewed before key) loads on a later check.
            Err(e) => {
                warn!(error = %e, "cannot reload the serving certificate; keeping the previous one")
            }
        }
    }
}

/// A CA and a serving certificate it signed, PEM.
#[derive(Debug, Clone)]
pub struct SelfSigned {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// A CA certificate and its private key, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ca {
    pub cert_pem: String,
    pub key_pem: String,
}

/// Generates a CA (ECDSA P-256) valid from `not_before` to `not_after`.
pub fn generate_ca(
    not_before: time::OffsetDateTime,
    not_after: time::OffsetDateTime,
) -> Result<Ca, CertError> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name
        .push(DnType::CommonName, "kubeplace webhook CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.not_before = not_before;
    ca.not_after = not_after;
    let cert = ca.self_signed(&key)?;
    Ok(Ca {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A serving certificate for `names` (IP addresses or DNS names, the first also the
/// common name) signed by `ca`, and its new key: (certificate PEM, key PEM). It is a client
/// certificate too: a replica presents it to the leader when it passes a claim on.
pub fn sign_serving(
    ca: &Ca,
    names: &[String],
    not_before: time::OffsetDateTime,
    not_after: time::OffsetDateTime,
) -> Result<(String, String), CertError> {
    use rcgen::{
        CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose,
    };
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, KeyPair::from_pem(&ca.key_pem)?)?;
    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(names.to_vec())?;
    if let Some(first) = names.first() {
        leaf.distinguished_name
            .push(DnType::CommonName, first.as_str());
    }
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    leaf.not_before = not_before;
    leaf.not_after = not_after;
    let cert = leaf.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Generates a CA and a serving certificate for `host` (an IP address or a DNS name),
/// valid for a year from an hour ago.
pub fn self_signed(host: &str) -> Result<SelfSigned, CertError> {
    let not_before = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
    let not_after = not_before + time::Duration::days(366);
    let ca = generate_ca(not_before, not_after)?;
    let (cert_pem, key_pem) = sign_serving(&ca, &[host.to_string()], not_before, not_after)?;
    Ok(SelfSigned {
        ca_pem: ca.cert_pem,
        cert_pem,
        key_pem,
    })
}

impl SelfSigned {
    /// The serving certificate and key, for the resolver.
    pub fn certified_key(&self) -> Result<CertifiedKey, CertError> {
        certified_key(self.cert_pem.as_bytes(), self.key_pem.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_a_usable_pair_for_an_ip_and_a_name() {
        for host in ["127.0.0.1", "kubeplace.example"] {
            let s = self_signed(host).unwrap();
            assert!(s.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
            let key = s.certified_key().unwrap();
            assert_eq!(key.cert.len(), 1);
        }
    }

    #[test]
    fn bad_pem_is_an_error_not_a_panic() {
        assert!(matches!(
            certified_key(b"nonsense", b"nonsense"),
            Err(CertError::Certificate(_))
        ));
        let s = self_signed("127.0.0.1").unwrap();
        assert!(matches!(
            certified_key(
                s.cert_pem.as_bytes(),
                b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
            ),
            Err(CertError::Key(_))
        ));
    }
}
