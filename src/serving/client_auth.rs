//! Client certificates the webhook requires (`kubeplace run --webhook-client-ca`): signed by
//! the CAs of that bundle (the API server's), or by the webhook's own CA, which signs the
//! serving certificate every replica also presents when it passes a claim to the leader.
//!
//! The webhook's own CA can change while the server runs (a renewal in the `--tls-secret`
//! Secret), so the verifier's roots can be replaced; each handshake checks against the roots
//! of the moment.

use std::sync::{Arc, RwLock};

use rustls::client::ResolvesClientCert;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

use super::certs::CertResolver;

/// The CA certificates of a PEM bundle; an error says what is wrong with it.
pub fn ca_certificates(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM bundle of CA certificates: {e}"))?;
    if certs.is_empty() {
        return Err(
            "it holds no CERTIFICATE block; expected one or more PEM CA certificates".into(),
        );
    }
    let mut roots = RootCertStore::empty();
    for cert in &certs {
        roots
            .add(cert.clone())
            .map_err(|e| format!("a certificate in it cannot be a CA: {e}"))?;
    }
    Ok(certs)
}

/// Requires a client certificate that chains to `fixed` (the `--webhook-client-ca` bundle)
/// or to the webhook's own CAs, which [`ClientCas::trust_own`] replaces.
#[derive(Debug)]
pub struct ClientCas {
    fixed: Vec<CertificateDer<'static>>,
    current: RwLock<Arc<dyn ClientCertVerifier>>,
}

impl ClientCas {
    /// A verifier that trusts the certificates of `fixed`, and of the webhook's own CAs once
    /// [`ClientCas::trust_own`] names them.
    pub fn new(fixed: Vec<CertificateDer<'static>>) -> Result<Arc<ClientCas>, String> {
        let current = verifier(&fixed, &[])?;
        Ok(Arc::new(ClientCas {
            fixed,
            current: RwLock::new(current),
        }))
    }

    /// Trusts the CAs of `own_pem` from now on, in place of the webhook's CAs trusted so far;
    /// the `--webhook-client-ca` bundle stays trusted. A bundle that cannot be read changes
    /// nothing.
    pub fn trust_own(&self, own_pem: &str) -> Result<(), String> {
        let own = ca_certificates(own_pem)?;
        let next = verifier(&self.fixed, &own)?;
        *crate::locks::write(&self.current) = next;
        Ok(())
    }

    fn now(&self) -> Arc<dyn ClientCertVerifier> {
        crate::locks::read(&self.current).clone()
    }
}

fn verifier(
    fixed: &[CertificateDer<'static>],
    own: &[CertificateDer<'static>],
) -> Result<Arc<dyn ClientCertVerifier>, String> {
    let mut roots = RootCertStore::empty();
    for cert in fixed.iter().chain(own) {
        roots.add(cert.clone()).map_err(|e| e.to_string())?;
    }
    WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    // No hints: the CAs change while the server runs (the hints are borrowed from the
    // verifier), and with none a client sends the certificate it has.
    .clear_root_hint_subjects()
    .build()
    .map_err(|e| format!("cannot check client certificates: {e}"))
}

impl ClientCertVerifier for ClientCas {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.now()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.now().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.now().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.now().supported_verify_schemes()
    }
}

/// A replica's serving certificate presented as its client certificate (to the leader, when
/// it passes a claim on), following renewals.
impl ResolvesClientCert for CertResolver {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::certs;
    use rustls::pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio_rustls::{TlsAcceptor, TlsConnector};

    /// A client certificate (clientAuth) signed by a new CA: (CA PEM, the client's key).
    fn client_of_a_new_ca(name: &str) -> (String, CertifiedKey) {
        let not_before = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
        let not_after = not_before + time::Duration::days(2);
        let ca = certs::generate_ca(not_before, not_after).unwrap();
        let (cert, key) =
            certs::sign_serving(&ca, &[name.to_string()], not_before, not_after).unwrap();
        (
            ca.cert_pem,
            certs::certified_key(cert.as_bytes(), key.as_bytes()).unwrap(),
        )
    }

    /// Serves one echo connection per accept with client certificates checked by `cas`.
    async fn server(cas: Arc<ClientCas>) -> (u16, String) {
        let served = certs::self_signed("127.0.0.1").unwrap();
        let resolver = certs::CertResolver::new(served.certified_key().unwrap());
        let acceptor = TlsAcceptor::from(certs::server_config_checking(resolver, cas).unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    if let Ok(mut tls) = acceptor.accept(tcp).await {
                        let mut buf = [0u8; 4];
                        if tls.read_exact(&mut buf).await.is_ok() {
                            let _ = tls.write_all(&buf).await;
                            let _ = tls.flush().await;
                        }
                    }
                });
            }
        });
        (port, served.ca_pem)
    }

    /// Whether a client presenting `key` (none: no certificate) gets its bytes echoed.
    async fn answered(port: u16, server_ca: &str, key: Option<CertifiedKey>) -> bool {
        let config = match key {
            Some(key) => certs::client_config_presenting(server_ca, certs::CertResolver::new(key)),
            None => certs::client_config(server_ca),
        }
        .unwrap();
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        // In TLS 1.3 the server refuses the client's certificate after the client's side of
        // the handshake is done: the refusal shows on the first read.
        let Ok(mut tls) = TlsConnector::from(config).connect(name, tcp).await else {
            return false;
        };
        if tls.write_all(b"ping").await.is_err() || tls.flush().await.is_err() {
            return false;
        }
        let mut buf = [0u8; 4];
        tls.read_exact(&mut buf).await.is_ok() && &buf == b"ping"
    }

    #[tokio::test]
    async fn only_clients_of_the_given_or_the_webhooks_own_cas_are_answered() {
        let (api_ca, api_client) = client_of_a_new_ca("kube-apiserver");
        let (own_ca, replica) = client_of_a_new_ca("kubeplace-webhook.kubeplace-system.svc");
        let (_, stranger) = client_of_a_new_ca("anyone");
        let fixed = ca_certificates(&api_ca).unwrap();
        let cas = ClientCas::new(fixed).unwrap();
        cas.trust_own(&own_ca).unwrap();
        let (port, server_ca) = server(cas.clone()).await;
        assert!(answered(port, &server_ca, Some(api_client.clone())).await);
        assert!(answered(port, &server_ca, Some(replica.clone())).await);
        assert!(!answered(port, &server_ca, None).await, "no certificate");
        assert!(!answered(port, &server_ca, Some(stranger)).await);
        // A renewed own CA replaces the old one; the API server's CA stays.
        let (new_own_ca, renewed) = client_of_a_new_ca("kubeplace-webhook.kubeplace-system.svc");
        cas.trust_own(&new_own_ca).unwrap();
        assert!(answered(port, &server_ca, Some(renewed)).await);
        assert!(!answered(port, &server_ca, Some(replica)).await);
        assert!(answered(port, &server_ca, Some(api_client)).await);
    }

    #[test]
    fn a_bundle_without_certificates_is_refused_with_what_is_expected() {
        let e = ca_certificates("hello\n").unwrap_err();
        assert!(e.contains("no CERTIFICATE block"), "{e}");
        assert!(e.contains("PEM CA certificates"), "{e}");
    }
}
