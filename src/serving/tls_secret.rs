//! The webhook's CA and serving certificate, kept by the operator itself in a Secret
//! (`kubeplace run --tls-secret NAME`), so that nothing random is rendered by the chart.
//!
//! Every replica reads the Secret at start and every [`REFRESH`]. When it is missing,
//! incomplete, not for the webhook's names, not usable as a client certificate (replicas
//! present it to the leader), or within a third of its lifetime of expiring,
//! the replica makes a new one and writes it with optimistic concurrency: created if
//! absent, replaced at the resourceVersion it read. A replica whose write loses (409) reads
//! the winner's Secret and serves that, so replicas agree on one certificate. The CA is
//! kept across renewals while it outlives the new serving certificate; a new CA is
//! published next to the old one (`ca.crt` holds both while the old is valid), so a
//! replica still serving the previous certificate stays trusted until it refreshes.
//! The `caBundle` of every webhook of the ValidatingWebhookConfiguration named by
//! `--webhook-config-name` is kept equal to `ca.crt`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

use super::certs::{self, Ca, CertError, CertResolver};

/// How often each replica re-reads the Secret and the webhook configuration.
pub const REFRESH: Duration = Duration::from_secs(10);

/// The Secret's keys.
pub const CA_CERT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const TLS_CERT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";

/// How long what is made here lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    /// A serving certificate's validity; it is renewed when a third of it is left.
    pub serving: time::Duration,
}

impl Lifetimes {
    /// A serving certificate valid for `days`.
    pub fn days(days: u32) -> Lifetimes {
        Lifetimes {
            serving: time::Duration::days(i64::from(days)),
        }
    }

    /// How long before its end a serving certificate is renewed.
    pub fn renew_before(&self) -> time::Duration {
        self.serving / 3
    }

    /// A CA's validity: ten serving certificates, so it rarely changes.
    pub fn ca(&self) -> time::Duration {
        self.serving * 10
    }
}

/// The Secret's contents, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Material {
    /// The CA that signs now, then earlier CAs still valid: the webhooks' caBundle.
    pub ca_bundle: String,
    pub ca_key: String,
    pub cert: String,
    pub key: String,
}

impl Material {
    /// Reads the Secret's data; the error names the key that is missing or not text.
    pub fn from_data(data: &BTreeMap<String, ByteString>) -> Result<Material, String> {
        let text = |key: &str| -> Result<String, String> {
            let bytes = data
                .get(key)
                .filter(|b| !b.0.is_empty())
                .ok_or_else(|| format!("the Secret has no {key}"))?;
            String::from_utf8(bytes.0.clone()).map_err(|_| format!("{key} is not PEM text"))
        };
        Ok(Material {
            ca_bundle: text(CA_CERT)?,
            ca_key: text(CA_KEY)?,
            cert: text(TLS_CERT)?,
            key: text(TLS_KEY)?,
        })
    }

    /// The Secret's data.
    pub fn to_data(&self) -> BTreeMap<String, ByteString> {
        [
            (CA_CERT, &self.ca_bundle),
            (CA_KEY, &self.ca_key),
            (TLS_CERT, &self.cert),
            (TLS_KEY, &self.key),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
        .collect()
    }

    /// The serving certificate and key, for the resolver.
    pub fn certified_key(&self) -> Result<rustls::sign::CertifiedKey, CertError> {
        certs::certified_key(self.cert.as_bytes(), self.key.as_bytes())
    }

    /// The CA that signs now (the first of the bundle) with its key.
    fn signing_ca(&self) -> Option<Ca> {
        let (first, _) = pem_certificates(&self.ca_bundle).into_iter().next()?;
        Some(Ca {
            cert_pem: first,
            key_pem: self.ca_key.clone(),
        })
    }
}

/// What to do with the Secret as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Serve it; renew it from this time on.
    Keep { renew_at: OffsetDateTime },
    /// Make a new one, for this reason.
    Renew(String),
}

/// The certificates of a PEM text, each as its own PEM block and DER.
fn pem_certificates(pem: &str) -> Vec<(String, CertificateDer<'static>)> {
    const END: &str = "-----END CERTIFICATE-----";
    let mut out = Vec::new();
    let mut rest = pem;
    while let Some(end) = rest.find(END) {
        let (block, after) = rest.split_at(end + END.len());
        let block = block.trim_start();
        if let Ok(der) = CertificateDer::from_pem_slice(block.as_bytes()) {
            out.push((format!("{block}\n"), der));
        }
        rest = after;
    }
    out
}

fn parse<'a>(der: &'a CertificateDer<'_>) -> Result<X509Certificate<'a>, String> {
    x509_parser::parse_x509_certificate(der.as_ref())
        .map(|(_, c)| c)
        .map_err(|e| format!("cannot parse the certificate: {e}"))
}

fn time_of(t: x509_parser::time::ASN1Time) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(t.timestamp()).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// The DNS names and IP addresses a certificate is for.
fn subject_names(cert: &X509Certificate<'_>) -> Vec<String> {
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some(d.to_string()),
            GeneralName::IPAddress(ip) => match ip.len() {
                4 => <[u8; 4]>::try_from(*ip)
                    .ok()
                    .map(|a| std::net::IpAddr::from(a).to_string()),
                16 => <[u8; 16]>::try_from(*ip)
                    .ok()
                    .map(|a| std::net::IpAddr::from(a).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Whether a client may present `cert`: its extended key usages, when it has any, allow it.
fn usable_by_clients(cert: &X509Certificate<'_>) -> bool {
    match cert.extended_key_usage() {
        Ok(Some(eku)) => eku.value.client_auth || eku.value.any,
        Ok(None) => true,
        Err(_) => false,
    }
}

/// Whether `key_pem` is the private key of `cert`.
fn key_matches(cert: &X509Certificate<'_>, key_pem: &str) -> bool {
    rcgen::KeyPair::from_pem(key_pem)
        .is_ok_and(|k| k.public_key_raw() == &*cert.public_key().subject_public_key.data)
}

/// Decides whether the Secret's certificate can be served to callers that reach the
/// webhook by `names`, and until when.
pub fn decide(
    material: &Material,
    names: &[String],
    lifetimes: Lifetimes,
    now: OffsetDateTime,
) -> Decision {
    match check(material, names) {
        Err(why) => Decision::Renew(why),
        Ok((not_before, not_after)) => {
            let renew_at = not_after - lifetimes.renew_before();
            if now < not_before {
                Decision::Renew(format!("tls.crt is not valid before {not_before}"))
            } else if now >= renew_at {
                Decision::Renew(format!(
                    "tls.crt expires at {not_after}, within {} days",
                    lifetimes.renew_before().whole_days()
                ))
            } else {
                Decision::Keep { renew_at }
            }
        }
    }
}

/// The serving certificate's validity when the material is whole and consistent.
fn check(m: &Material, names: &[String]) -> Result<(OffsetDateTime, OffsetDateTime), String> {
    let cas = pem_certificates(&m.ca_bundle);
    let (_, ca_der) = cas.first().ok_or("ca.crt holds no certificate")?;
    let ca = parse(ca_der)?;
    if !key_matches(&ca, &m.ca_key) {
        return Err("ca.key is not the key of the first certificate of ca.crt".into());
    }
    let (_, leaf_der) = pem_certificates(&m.cert)
        .into_iter()
        .next()
        .ok_or("tls.crt holds no certificate")?;
    let leaf = parse(&leaf_der)?;
    if !key_matches(&leaf, &m.key) {
        return Err("tls.key is not the key of tls.crt".into());
    }
    leaf.verify_signature(Some(ca.public_key()))
        .map_err(|_| "tls.crt is not signed by the CA of ca.crt".to_string())?;
    let has = subject_names(&leaf);
    if let Some(missing) = names.iter().find(|n| !has.contains(n)) {
        return Err(format!(
            "tls.crt is not for {missing} (it is for {})",
            has.join(", ")
        ));
    }
    // Replicas present it to the leader as their client certificate; a Secret made before
    // it was issued for that is made again.
    if !usable_by_clients(&leaf) {
        return Err("tls.crt is not a client certificate (no clientAuth extended key usage), which replicas present to the leader".into());
    }
    let (leaf_from, leaf_to) = (
        time_of(leaf.validity().not_before),
        time_of(leaf.validity().not_after),
    );
    // Clients check the CA's validity too: the pair is good while both are.
    let ca_to = time_of(ca.validity().not_after);
    Ok((leaf_from, leaf_to.min(ca_to)))
}

/// Makes new material for `names`: a new serving certificate, signed by the previous CA
/// while that outlives it, else by a new CA published before the previous CAs that are
/// still valid.
pub fn issue(
    previous: Option<&Material>,
    names: &[String],
    lifetimes: Lifetimes,
    now: OffsetDateTime,
) -> Result<Material, CertError> {
    let not_before = now - time::Duration::hours(1);
    let not_after = now + lifetimes.serving;
    // The PEM blocks of a bundle whose certificates are still valid.
    let still_valid = |bundle: &str| -> String {
        pem_certificates(bundle)
            .into_iter()
            .filter(|(_, der)| parse(der).is_ok_and(|c| time_of(c.validity().not_after) > now))
            .map(|(pem, _)| pem)
            .collect()
    };
    let kept_ca = previous
        .and_then(|p| p.signing_ca().map(|ca| (p, ca)))
        .filter(|(_, ca)| {
            pem_certificates(&ca.cert_pem)
                .first()
                .is_some_and(|(_, der)| {
                    parse(der).is_ok_and(|c| {
                        key_matches(&c, &ca.key_pem) && time_of(c.validity().not_after) > not_after
                    })
                })
        });
    let (ca, bundle) = match kept_ca {
        Some((p, ca)) => (ca, still_valid(&p.ca_bundle)),
        None => {
            let ca = certs::generate_ca(not_before, now + lifetimes.ca())?;
            let older = previous.map(|p| still_valid(&p.ca_bundle));
            let bundle = format!("{}{}", ca.cert_pem, older.unwrap_or_default());
            (ca, bundle)
        }
    };
    let (cert, key) = certs::sign_serving(&ca, names, not_before, not_after)?;
    Ok(Material {
        ca_bundle: bundle,
        ca_key: ca.key_pem,
        cert,
        key,
    })
}

/// The names a webhook Service is called by, in-cluster.
pub fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Why the Secret could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TlsSecretError {
    #[error("Secret {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("Secret {0}: {1}")]
    Certificate(String, CertError),
    #[error("Secret {0}: other replicas changed it 5 times while this one tried to write it")]
    Contended(String),
}

/// The Secret and the webhook configuration one replica keeps.
#[derive(Clone)]
pub struct TlsSecret {
    secrets: Api<Secret>,
    configs: Api<ValidatingWebhookConfiguration>,
    namespace: String,
    name: String,
    config_name: String,
    names: Vec<String>,
    lifetimes: Lifetimes,
}

fn conflict_or_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_conflict() || s.is_already_exists())
}

impl TlsSecret {
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        config_name: &str,
        names: Vec<String>,
        lifetimes: Lifetimes,
    ) -> TlsSecret {
        TlsSecret {
            secrets: Api::namespaced(client.clone(), namespace),
            configs: Api::all(client),
            namespace: namespace.to_string(),
            name: name.to_string(),
            config_name: config_name.to_string(),
            names,
            lifetimes,
        }
    }

    fn api_error(&self, source: kube::Error) -> TlsSecretError {
        TlsSecretError::Api {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        }
    }

    fn issue(&self, previous: Option<&Material>) -> Result<Material, TlsSecretError> {
        issue(
            previous,
            &self.names,
            self.lifetimes,
            OffsetDateTime::now_utc(),
        )
        .map_err(|e| TlsSecretError::Certificate(self.name.clone(), e))
    }

    /// The material to serve: the Secret's when it is good, else new material this replica
    /// wrote, else (its write lost) the winner's.
    pub async fn ensure(&self) -> Result<Material, TlsSecretError> {
        for _ in 0..5 {
            let Some(mut secret) = self
                .secrets
                .get_opt(&self.name)
                .await
                .map_err(|e| self.api_error(e))?
            else {
                let material = self.issue(None)?;
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.namespace.clone()),
                        labels: Some(BTreeMap::from([(
                            "app.kubernetes.io/managed-by".to_string(),
                            "kubeplace".to_string(),
                        )])),
                        ..Default::default()
                    },
                    type_: Some("kubernetes.io/tls".into()),
                    data: Some(material.to_data()),
                    ..Default::default()
                };
                match self.secrets.create(&PostParams::default(), &secret).await {
                    Ok(_) => {
                        info!(secret = %self.name, "created the webhook's CA and serving certificate");
                        return Ok(material);
                    }
                    Err(e) if conflict_or_exists(&e) => continue,
                    Err(e) => return Err(self.api_error(e)),
                }
            };
            let current = Material::from_data(&secret.data.clone().unwrap_or_default());
            let why = match &current {
                Ok(m) => match decide(m, &self.names, self.lifetimes, OffsetDateTime::now_utc()) {
                    Decision::Keep { .. } => return Ok(m.clone()),
                    Decision::Renew(why) => why,
                },
                Err(why) => why.clone(),
            };
            let material = self.issue(current.as_ref().ok())?;
            secret.data = Some(material.to_data());
            // resourceVersion stays as read: a replica that wrote first makes this a 409.
            match self
                .secrets
                .replace(&self.name, &PostParams::default(), &secret)
                .await
            {
                Ok(_) => {
                    info!(secret = %self.name, reason = %why, "renewed the webhook's certificate");
                    return Ok(material);
                }
                Err(e) if conflict_or_exists(&e) => continue,
                Err(e) => return Err(self.api_error(e)),
            }
        }
        Err(TlsSecretError::Contended(self.name.clone()))
    }

    /// Sets the caBundle of every webhook of the configuration to `bundle`; whether it
    /// changed anything. A missing configuration is not an error: it may not exist yet.
    pub async fn sync_ca_bundle(&self, bundle: &str) -> Result<bool, kube::Error> {
        let Some(mut config) = self.configs.get_opt(&self.config_name).await? else {
            warn!(name = %self.config_name, "no ValidatingWebhookConfiguration to give the CA to yet");
            return Ok(false);
        };
        let want = ByteString(bundle.as_bytes().to_vec());
        let mut changed = false;
        for hook in config.webhooks.iter_mut().flatten() {
            if hook.client_config.ca_bundle.as_ref() != Some(&want) {
                hook.client_config.ca_bundle = Some(want.clone());
                changed = true;
            }
        }
        if changed {
            self.configs
                .replace(&self.config_name, &PostParams::default(), &config)
                .await?;
            info!(name = %self.config_name, "set the webhooks' caBundle to the Secret's CA");
        }
        Ok(changed)
    }

    /// Every [`REFRESH`] until `cancel`: reads (and renews) the Secret, serves a changed
    /// certificate, publishes a changed CA bundle on `ca`, and keeps the caBundle equal to
    /// the Secret's CA.
    pub async fn keep(
        self,
        resolver: Arc<CertResolver>,
        mut served: Material,
        ca: tokio::sync::watch::Sender<String>,
        cancel: CancellationToken,
    ) {
        loop {
            if let Err(e) = self.sync_ca_bundle(&served.ca_bundle).await {
                warn!(name = %self.config_name, error = %e, "cannot set the webhooks' caBundle; retrying");
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(REFRESH) => {}
            }
            match self.ensure().await {
                Ok(m) if m.cert != served.cert => match m.certified_key() {
                    Ok(key) => {
                        resolver.set(key);
                        info!(secret = %self.name, "serving the Secret's new certificate");
                        ca.send_if_modified(|c| {
                            let changed = *c != m.ca_bundle;
                            c.clone_from(&m.ca_bundle);
                            changed
                        });
                        served = m;
                    }
                    Err(e) => {
                        warn!(error = %e, "the Secret's certificate does not load; keeping the previous one")
                    }
                },
                Ok(m) => served = m,
                Err(e) => {
                    warn!(error = %e, "cannot read the webhook's certificate; serving the previous one")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        service_names("kubeplace-webhook", "kubeplace-system")
    }

    fn at(days: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap() + time::Duration::days(days)
    }

    const YEAR: Lifetimes = Lifetimes {
        serving: time::Duration::days(365),
    };

    #[test]
    fn new_material_is_kept_until_a_third_of_its_life_is_left() {
        let m = issue(None, &names(), YEAR, at(0)).unwrap();
        let Decision::Keep { renew_at } = decide(&m, &names(), YEAR, at(0)) else {
            panic!("fresh material is renewed");
        };
        assert_eq!(renew_at, at(365) - time::Duration::days(365) / 3);
        assert!(matches!(
            decide(&m, &names(), YEAR, at(243)),
            Decision::Keep { .. }
        ));
        let Decision::Renew(why) = decide(&m, &names(), YEAR, at(244)) else {
            panic!("not renewed four months before its end");
        };
        assert!(why.contains("tls.crt expires at"), "{why}");
        assert!(matches!(
            decide(&m, &names(), YEAR, at(400)),
            Decision::Renew(_)
        ));
    }

    #[test]
    fn the_certificate_serves_every_name_of_the_service_and_loads() {
        let m = issue(None, &names(), YEAR, at(0)).unwrap();
        m.certified_key().unwrap();
        let leaf = pem_certificates(&m.cert);
        assert_eq!(subject_names(&parse(&leaf[0].1).unwrap()), names());
        let other = service_names("other", "kubeplace-system");
        let Decision::Renew(why) = decide(&m, &other, YEAR, at(1)) else {
            panic!("kept for the wrong names");
        };
        assert!(
            why.contains("tls.crt is not for other.kubeplace-system.svc"),
            "{why}"
        );
        let ip = issue(None, &["127.0.0.1".to_string()], YEAR, at(0)).unwrap();
        assert!(matches!(
            decide(&ip, &["127.0.0.1".to_string()], YEAR, at(1)),
            Decision::Keep { .. }
        ));
    }

    #[test]
    fn a_certificate_without_the_placement_services_names_is_renewed_under_the_same_ca() {
        // Made before the Placement API was served over TLS: the webhook's names only.
        let before = issue(None, &names(), YEAR, at(0)).unwrap();
        let mut both = names();
        both.extend(service_names("kubeplace-placement", "kubeplace-system"));
        let Decision::Renew(why) = decide(&before, &both, YEAR, at(1)) else {
            panic!("kept without the Placement Service's names");
        };
        assert!(
            why.contains("tls.crt is not for kubeplace-placement.kubeplace-system.svc"),
            "{why}"
        );
        let renewed = issue(Some(&before), &both, YEAR, at(1)).unwrap();
        assert_eq!(
            renewed.ca_bundle, before.ca_bundle,
            "the CA clients trust is kept"
        );
        let leaf = pem_certificates(&renewed.cert);
        assert_eq!(subject_names(&parse(&leaf[0].1).unwrap()), both);
        assert!(matches!(
            decide(&renewed, &both, YEAR, at(2)),
            Decision::Keep { .. }
        ));
        // A replica not yet given the Placement Service's names keeps serving it.
        assert!(matches!(
            decide(&renewed, &names(), YEAR, at(2)),
            Decision::Keep { .. }
        ));
    }

    /// `m` with its certificate issued for serving only, as Secrets were made before
    /// replicas presented it to each other.
    fn serving_only(m: &Material) -> Material {
        use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, Issuer, KeyPair};
        let issuer = Issuer::from_ca_cert_pem(
            &m.signing_ca().unwrap().cert_pem,
            KeyPair::from_pem(&m.ca_key).unwrap(),
        )
        .unwrap();
        let key = KeyPair::generate().unwrap();
        let mut leaf = CertificateParams::new(names()).unwrap();
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        leaf.not_before = at(0);
        leaf.not_after = at(365);
        Material {
            cert: leaf.signed_by(&key, &issuer).unwrap().pem(),
            key: key.serialize_pem(),
            ..m.clone()
        }
    }

    #[test]
    fn a_broken_or_mixed_up_secret_is_renewed_with_the_reason() {
        let m = issue(None, &names(), YEAR, at(0)).unwrap();
        let other = issue(None, &names(), YEAR, at(0)).unwrap();
        let cases = [
            (
                Material {
                    key: other.key.clone(),
                    ..m.clone()
                },
                "tls.key is not the key of tls.crt",
            ),
            (
                Material {
                    ca_bundle: other.ca_bundle.clone(),
                    ca_key: other.ca_key.clone(),
                    ..m.clone()
                },
                "tls.crt is not signed by the CA of ca.crt",
            ),
            (
                Material {
                    ca_key: other.ca_key.clone(),
                    ..m.clone()
                },
                "ca.key is not the key",
            ),
            (
                Material {
                    ca_bundle: "nonsense".into(),
                    ..m.clone()
                },
                "ca.crt holds no certificate",
            ),
        ];
        for (material, want) in cases
            .into_iter()
            .chain([(serving_only(&m), "tls.crt is not a client certificate")])
        {
            match decide(&material, &names(), YEAR, at(1)) {
                Decision::Renew(why) => assert!(why.contains(want), "{why}"),
                d => panic!("{want}: {d:?}"),
            }
        }
        let mut data = m.to_data();
        data.remove(CA_KEY);
        assert_eq!(
            Material::from_data(&data).unwrap_err(),
            "the Secret has no ca.key"
        );
        assert_eq!(Material::from_data(&m.to_data()).unwrap(), m);
    }

    #[test]
    fn renewal_keeps_the_ca_while_it_outlives_the_new_certificate() {
        let first = issue(None, &names(), YEAR, at(0)).unwrap();
        let second = issue(Some(&first), &names(), YEAR, at(250)).unwrap();
        assert_eq!(second.ca_key, first.ca_key);
        assert_eq!(second.ca_bundle, first.ca_bundle);
        assert_ne!(second.cert, first.cert);
        assert!(matches!(
            decide(&second, &names(), YEAR, at(251)),
            Decision::Keep { .. }
        ));
    }

    #[test]
    fn a_new_ca_is_published_before_the_old_one_while_that_is_valid() {
        let first = issue(None, &names(), YEAR, at(0)).unwrap();
        // The CA lasts ten years: a certificate issued 9.5 years on would outlive it.
        let later = at(365 * 19 / 2);
        let renewed = issue(Some(&first), &names(), YEAR, later).unwrap();
        assert_ne!(renewed.ca_key, first.ca_key);
        let bundle = pem_certificates(&renewed.ca_bundle);
        assert_eq!(bundle.len(), 2, "the old CA stays trusted while valid");
        assert_eq!(bundle[1].0, first.ca_bundle);
        assert!(matches!(
            decide(&renewed, &names(), YEAR, later),
            Decision::Keep { .. }
        ));
        // Once the old CA has expired it leaves the bundle.
        let again = issue(Some(&renewed), &names(), YEAR, at(3660 + 365)).unwrap();
        assert_eq!(pem_certificates(&again.ca_bundle).len(), 1);
    }

    mod api {
        use http::{Method, Request, Response, StatusCode};
        use kube::client::Body;
        use serde_json::{Value, json};
        use tower_test::mock;

        use super::super::*;
        use super::{YEAR, names};

        type Handle = mock::Handle<Request<Body>, Response<Body>>;

        const SECRET: &str = "/api/v1/namespaces/kubeplace-system/secrets/kubeplace-webhook-tls";
        const SECRETS: &str = "/api/v1/namespaces/kubeplace-system/secrets";
        const CONFIG: &str =
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/kubeplace";

        /// Answers the next request, which must be `method path`, and returns its body.
        async fn expect(
            h: &mut Handle,
            method: Method,
            path: &str,
            code: u16,
            reply: Value,
        ) -> Value {
            let (request, send) = h.next_request().await.expect("a request");
            assert_eq!((request.method(), request.uri().path()), (&method, path));
            let body = request.into_body().collect_bytes().await.unwrap();
            send.send_response(
                Response::builder()
                    .status(StatusCode::from_u16(code).unwrap())
                    .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                    .unwrap(),
            );
            serde_json::from_slice(&body).unwrap_or(Value::Null)
        }

        fn status(code: u16, reason: &str) -> Value {
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                   "reason": reason, "code": code, "message": reason})
        }

        fn secret(m: &Material) -> Value {
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                   "metadata": {"name": "kubeplace-webhook-tls", "namespace": "kubeplace-system",
                                "resourceVersion": "41"},
                   "data": serde_json::to_value(m.to_data()).unwrap()})
        }

        fn kept() -> (TlsSecret, Handle) {
            let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
            let client = Client::new(service, "default");
            let kept = TlsSecret::new(
                client,
                "kubeplace-system",
                "kubeplace-webhook-tls",
                "kubeplace",
                names(),
                YEAR,
            );
            (kept, handle)
        }

        #[tokio::test]
        async fn a_replica_whose_create_loses_serves_the_winners_secret() {
            let (kept, mut h) = kept();
            let winner = issue(None, &names(), YEAR, OffsetDateTime::now_utc()).unwrap();
            let served = tokio::spawn(async move { kept.ensure().await });
            expect(&mut h, Method::GET, SECRET, 404, status(404, "NotFound")).await;
            let sent = expect(
                &mut h,
                Method::POST,
                SECRETS,
                409,
                status(409, "AlreadyExists"),
            )
            .await;
            assert_eq!(sent["type"], "kubernetes.io/tls");
            expect(&mut h, Method::GET, SECRET, 200, secret(&winner)).await;
            assert_eq!(served.await.unwrap().unwrap(), winner);
        }

        #[tokio::test]
        async fn a_renewal_is_written_at_the_version_read_and_yields_to_the_winner() {
            let (kept, mut h) = kept();
            let long_ago = OffsetDateTime::now_utc() - time::Duration::days(300);
            let stale = issue(None, &names(), YEAR, long_ago).unwrap();
            let winner = issue(Some(&stale), &names(), YEAR, OffsetDateTime::now_utc()).unwrap();
            let served = tokio::spawn(async move { kept.ensure().await });
            expect(&mut h, Method::GET, SECRET, 200, secret(&stale)).await;
            let sent = expect(&mut h, Method::PUT, SECRET, 409, status(409, "Conflict")).await;
            assert_eq!(sent["metadata"]["resourceVersion"], "41");
            let written =
                Material::from_data(&serde_json::from_value(sent["data"].clone()).unwrap())
                    .unwrap();
            assert_eq!(written.ca_key, stale.ca_key, "the renewal kept the CA");
            assert_ne!(written.cert, stale.cert);
            expect(&mut h, Method::GET, SECRET, 200, secret(&winner)).await;
            assert_eq!(served.await.unwrap().unwrap(), winner);
        }

        #[tokio::test]
        async fn the_ca_bundle_is_written_only_where_it_differs() {
            let (kept, mut h) = kept();
            let config = |bundles: [&str; 2]| {
                let hook = |name: &str, ca: &str| {
                    json!({
                    "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
                    "clientConfig": {"service": {"name": "kubeplace-webhook", "namespace": "kubeplace-system"},
                                     "caBundle": ca}})
                };
                json!({"apiVersion": "admissionregistration.k8s.io/v1",
                       "kind": "ValidatingWebhookConfiguration",
                       "metadata": {"name": "kubeplace", "resourceVersion": "7"},
                       "webhooks": [hook("flavors.kubeplace.io", bundles[0]),
                                    hook("servers.kubeplace.io", bundles[1])]})
            };
            let new = "bmV3"; // base64 of "new"
            let task = tokio::spawn(async move {
                let first = kept.sync_ca_bundle("new").await.unwrap();
                let second = kept.sync_ca_bundle("new").await.unwrap();
                (first, second)
            });
            expect(&mut h, Method::GET, CONFIG, 200, config([new, "b2xk"])).await;
            let sent = expect(&mut h, Method::PUT, CONFIG, 200, config([new, new])).await;
            assert_eq!(sent["metadata"]["resourceVersion"], "7");
            assert_eq!(sent["webhooks"][0]["clientConfig"]["caBundle"], new);
            assert_eq!(sent["webhooks"][1]["clientConfig"]["caBundle"], new);
            expect(&mut h, Method::GET, CONFIG, 200, config([new, new])).await;
            assert_eq!(task.await.unwrap(), (true, false));
        }
    }
}
