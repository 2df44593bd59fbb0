//! Why the operator could not start.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::serving::certs::CertError;
use crate::serving::tls_secret::TlsSecretError;

/// Why the operator could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("no kubeconfig and not in a cluster: {0}")]
    NoCluster(#[source] kube::config::InferConfigError),
    #[error("cannot build the API client: {0}")]
    Client(#[source] kube::Error),
    #[error("cannot listen on {addr} for {what}: {source}")]
    Listen {
        addr: SocketAddr,
        what: &'static str,
        source: std::io::Error,
    },
    #[error(transparent)]
    Certificate(#[from] CertError),
    #[error(transparent)]
    TlsSecret(#[from] TlsSecretError),
    #[error("cannot start the webhook's server: {0}")]
    WebhookServer(#[source] std::io::Error),
    #[error("cannot create or update ValidatingWebhookConfiguration {name:?}: {source}")]
    Register { name: String, source: kube::Error },
    #[error("--webhook-client-ca {}: {reason}", path.display())]
    WebhookClientCa { path: PathBuf, reason: String },
    #[error("{0}")]
    MirrorTraits(String),
}

impl Error {
    /// Whether the operator's input is at fault (exit 2) rather than its surroundings.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, Error::WebhookClientCa { .. })
    }
}
