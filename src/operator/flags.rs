//! The flags of `kubeplace run`, grouped by what they set up.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, ValueEnum};

use crate::args::{
    CapacityArgs, ChoosingArgs, CorsArgs, HeadroomCap, KeystoneArgs, MirrorTraits, ProxyArgs,
    Searching, Weighing,
};

/// Every flag of `kubeplace run`.
#[derive(clap::Args, Debug, Clone)]
pub struct Flags {
    #[command(flatten)]
    pub cluster: ClusterFlags,
    #[command(flatten, next_help_heading = "Scheduling")]
    pub scheduling: SchedulingFlags,
    #[command(flatten, next_help_heading = "Admission webhook")]
    pub webhook: WebhookFlags,
    #[command(flatten, next_help_heading = "Serving certificate")]
    pub tls: TlsFlags,
    #[command(flatten, next_help_heading = "Leader election and claims")]
    pub leader: LeaderFlags,
    #[command(flatten, next_help_heading = "Placement API")]
    pub placement: PlacementFlags,
    #[command(flatten, next_help_heading = "Cluster mirror")]
    pub mirror: MirrorFlags,
    #[command(flatten, next_help_heading = "Health, metrics and shutdown")]
    pub serving: ServingFlags,
    #[command(flatten, next_help_heading = "Logs")]
    pub logs: LogFlags,
}

/// Whether the cluster's Nodes, Pods and DRA devices feed the index (docs/mirror.md).
#[derive(clap::Args, Debug, Clone)]
pub struct MirrorFlags {
    /// Watch Nodes, Pods, ResourceSlices, ResourceClaims and DeviceClasses and count them
    /// as providers and allocations beside the written ones (never written back). Needs
    /// get, list and watch on those kinds.
    #[arg(long, env = "KUBEPLACE_MIRROR_CLUSTER")]
    pub mirror_cluster: bool,
    /// With --mirror-cluster: the image of the reservation pods that hold a Server's cores,
    /// memory and disk on a mirrored Node for kube-scheduler and the kubelet (a pause
    /// container; docs/mirror.md).
    #[arg(
        long,
        env = "KUBEPLACE_RESERVATION_IMAGE",
        default_value = "registry.k8s.io/pause:3.10"
    )]
    pub reservation_image: String,
    #[command(flatten)]
    pub traits: MirrorTraits,
}

/// Which cluster, and where in it kubeplace's own objects live.
#[derive(clap::Args, Debug, Clone)]
pub struct ClusterFlags {
    /// Kubeconfig file to reach the API server. Without it: $KUBECONFIG, then
    /// ~/.kube/config, then the in-cluster service account.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Namespace kubeplace runs in; the leader Lease lives here.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kubeplace-system")]
    pub namespace: String,
}

/// How servers are weighed, how headroom is counted, how statuses are written.
#[derive(clap::Args, Debug, Clone)]
pub struct SchedulingFlags {
    #[command(flatten)]
    pub weighing: Weighing,
    #[command(flatten)]
    pub headroom: HeadroomCap,
    /// Least seconds between the starts of two headroom rounds over every Flavor; a round
    /// starts only when something other than a status changed since the last one.
    #[arg(long, value_name = "SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub headroom_interval: u64,
    /// Status writes the leader keeps in flight at once (server-side applies of the status
    /// subresource); with fewer, a cloud applied in a hurry gets its statuses long after the
    /// objects, since the API server shares itself among the requests in flight.
    #[arg(long, value_name = "N", default_value_t = 32,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub status_writes_in_flight: u16,
}

/// Where the admission webhook listens and how the API server reaches it.
#[derive(clap::Args, Debug, Clone)]
pub struct WebhookFlags {
    /// Address of the admission webhook's HTTPS server.
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:8443")]
    pub webhook_addr: SocketAddr,
    /// The IP address or DNS name the API server reaches the webhook at (with --self-signed).
    #[arg(long, value_name = "HOST")]
    pub webhook_host: Option<String>,
    /// The webhook's Service in --namespace (with --tls-secret): the certificate is for
    /// NAME, NAME.NAMESPACE, NAME.NAMESPACE.svc and NAME.NAMESPACE.svc.cluster.local.
    #[arg(long, value_name = "NAME")]
    pub webhook_service: Option<String>,
    /// Name of the ValidatingWebhookConfiguration --self-signed manages, and whose caBundle
    /// --tls-secret keeps.
    #[arg(long, value_name = "NAME", default_value = "kubeplace")]
    pub webhook_config_name: String,
    /// Answer only clients that present a certificate signed by a CA of this PEM bundle (the
    /// one kube-apiserver's admission configuration gives it for webhooks): the TLS handshake
    /// of any other client fails. Replicas passing claims to the leader present their
    /// serving certificate, which is accepted when the webhook's own CA signed it. Read at
    /// start. See docs/webhook-security.md.
    #[arg(long, value_name = "PATH")]
    pub webhook_client_ca: Option<PathBuf>,
}

/// Where the serving certificate comes from: files, a Secret, or generated at start.
#[derive(clap::Args, Debug, Clone)]
pub struct TlsFlags {
    /// The webhook's serving certificate (PEM, chain first); re-read when it changes.
    /// Use with --tls-key-file, e.g. from cert-manager.
    #[arg(
        long,
        value_name = "PATH",
        requires = "tls_key_file",
        conflicts_with = "self_signed"
    )]
    pub tls_cert_file: Option<PathBuf>,
    /// The private key of --tls-cert-file (PEM); re-read when it changes.
    #[arg(long, value_name = "PATH", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// Generate a CA and a serving certificate for --webhook-host at start, and create or
    /// update the ValidatingWebhookConfiguration to call https://HOST:PORT/validate/<plural>
    /// with that CA. For running outside a cluster.
    #[arg(long, requires = "webhook_host")]
    pub self_signed: bool,
    /// Keep the webhook's CA and serving certificate in this Secret of --namespace: made
    /// when missing, renewed before it expires, shared by every replica (the one whose
    /// write loses serves the winner's), re-read every 10 s; the caBundle of the webhooks
    /// of --webhook-config-name is kept equal to its CA. The certificate is for the names
    /// of --webhook-service and for --webhook-host.
    #[arg(
        long,
        value_name = "NAME",
        conflicts_with_all = ["self_signed", "tls_cert_file"]
    )]
    pub tls_secret: Option<String>,
    /// Validity of the serving certificate --tls-secret makes, in days; it is renewed when a
    /// third is left. Its CA lasts ten times as long.
    #[arg(long, value_name = "DAYS", default_value_t = 365,
          value_parser = clap::value_parser!(u32).range(1..=36500))]
    pub tls_validity_days: u32,
    /// The CA (PEM) that signed --tls-cert-file, given to the other replicas to check this
    /// one. Default: ca.crt beside --tls-cert-file, when there is one.
    #[arg(long, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
}

/// Which replica leads, and how the others reach it with claims.
#[derive(clap::Args, Debug, Clone)]
pub struct LeaderFlags {
    /// Elect a leader on a Lease so that only one replica writes status
    /// (--leader-elect=false: this replica always writes).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,
    /// Name of the leader Lease in --namespace.
    #[arg(long, value_name = "NAME", default_value = "kubeplace-leader")]
    pub lease_name: String,
    /// How long the Lease stays held when its holder stops renewing it (whole seconds): how
    /// soon another replica takes over from a leader that died. Claims wait that long, and
    /// are not refused meanwhile unless it passes the webhook's wait.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = lease_seconds)]
    pub leader_elect_lease_duration: Duration,
    /// How long a leader keeps leading while renewals fail; less than the lease duration.
    #[arg(long, value_name = "DURATION", default_value = "1500ms", value_parser = duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often the Lease is renewed by its holder and read by the others.
    #[arg(long, value_name = "DURATION", default_value = "250ms", value_parser = duration)]
    pub leader_elect_retry_period: Duration,
    /// The address (HOST:PORT) other replicas reach this one's webhook at, to pass it the
    /// claims to decide while it leads. Default: $POD_IP, else --webhook-host, with the
    /// webhook's port.
    #[arg(long, value_name = "HOST:PORT")]
    pub claims_address: Option<String>,
    /// The name this replica's serving certificate is checked against when other replicas
    /// pass it claims (e.g. the webhook Service's DNS name). Default: --webhook-host.
    #[arg(long, value_name = "NAME")]
    pub claims_server_name: Option<String>,
}

/// Placement's REST API over the cluster.
#[derive(clap::Args, Debug, Clone)]
pub struct PlacementFlags {
    /// Serve Placement's REST API at this address (off without it): reads from the watched
    /// objects, writes made as Kubernetes objects, callers checked with TokenReview and
    /// SubjectAccessReview (docs/placement-api.md).
    #[arg(long, value_name = "ADDR:PORT")]
    pub placement_addr: Option<SocketAddr>,
    /// Serve the Placement API over HTTPS with the webhook's serving certificate. Without
    /// it, the tokens callers send travel in clear text.
    #[arg(long, requires = "placement_addr")]
    pub placement_tls: bool,
    /// The Placement API's Service in --namespace (with --tls-secret and --placement-tls):
    /// the serving certificate is also for NAME, NAME.NAMESPACE, NAME.NAMESPACE.svc and
    /// NAME.NAMESPACE.svc.cluster.local, so clients check it by the name they call.
    #[arg(long, value_name = "NAME", requires = "placement_tls")]
    pub placement_service: Option<String>,
    /// The audience a caller's token must be issued for (`kubectl create token SA
    /// --audience AUDIENCE`): it is asked of the TokenReview, and a token the API server
    /// does not confirm for it is refused, so no token sent here is valid against the API
    /// server. Empty (`--placement-token-audience=`): tokens for the API server's own
    /// audience, each of which is also a credential for the whole Kubernetes API.
    #[arg(long, value_name = "AUDIENCE", default_value = DEFAULT_TOKEN_AUDIENCE,
          value_parser = token_audience, requires = "placement_addr")]
    pub placement_token_audience: String,
    /// (`--keystone-authtoken FILE`, with --placement-addr) Keystone tokens are taken too,
    /// judged by Placement's default policies; a JWT-shaped token still goes to Kubernetes.
    #[command(flatten)]
    pub keystone: KeystoneArgs,
    #[command(flatten)]
    pub searching: Searching,
    #[command(flatten)]
    pub choosing: ChoosingArgs,
    #[command(flatten)]
    pub cors: CorsArgs,
    #[command(flatten)]
    pub proxy: ProxyArgs,
}

/// The audience the Placement API asks tokens to be issued for, unless told otherwise.
pub const DEFAULT_TOKEN_AUDIENCE: &str = "kubeplace-placement";

/// The longest audience taken.
const AUDIENCE_MAX: usize = 256;

/// Checks an audience: empty, or one name of printable ASCII without spaces or commas.
fn token_audience(text: &str) -> Result<String, String> {
    let accepted = format!(
        "give one audience of 1 to {AUDIENCE_MAX} printable ASCII characters without spaces or commas (e.g. {DEFAULT_TOKEN_AUDIENCE}), or an empty value to take tokens for the API server's own audience"
    );
    if text.len() > AUDIENCE_MAX {
        return Err(format!(
            "an audience of {} characters is too long; {accepted}",
            text.chars().count()
        ));
    }
    if let Some(c) = text.chars().find(|c| !c.is_ascii_graphic() || *c == ',') {
        return Err(format!("{text:?} holds {c:?}; {accepted}"));
    }
    Ok(text.to_string())
}

/// Health and metrics, and how a stop drains.
#[derive(clap::Args, Debug, Clone)]
pub struct ServingFlags {
    /// Address of the plain-HTTP server for /healthz, /readyz and /metrics.
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    /// On SIGTERM, report not ready at once, keep serving the webhook and the Placement API
    /// for this many seconds (each response closing its connection, so clients reconnect to
    /// a ready replica), then stop: long enough for the Service's endpoints to drop this
    /// replica, so rollouts refuse no request. A second signal, or Ctrl-C, stops at once.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub drain_seconds: u64,
    #[command(flatten)]
    pub capacity: CapacityArgs,
}

/// Log formats.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// One line per event for people.
    Text,
    /// One JSON object per event for log collectors.
    Json,
}

/// What is logged, and how.
#[derive(clap::Args, Debug, Clone)]
pub struct LogFlags {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Which logs to write: a level (error, warn, info, debug, trace), or directives such as
    /// `info,kubeplace=debug`.
    #[arg(long, env = "RUST_LOG", default_value = "info", value_parser = log_filter)]
    pub log_level: String,
}

/// Checks a log filter, so a typo is refused at start instead of silently logging at info.
fn log_filter(text: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(text)
        .map(|_| text.to_string())
        .map_err(|e| {
            format!(
                "{text:?} is not a log filter ({e}); give a level (error, warn, info, debug, trace) or directives such as info,kubeplace=debug"
            )
        })
}

impl Flags {
    /// Flags that parse but cannot run together, said as the operator would fix them.
    pub fn check(&self) -> Result<(), String> {
        let leader = &self.leader;
        if leader.leader_elect_renew_deadline >= leader.leader_elect_lease_duration
            || leader.leader_elect_retry_period >= leader.leader_elect_renew_deadline
        {
            return Err(format!(
                "--leader-elect-retry-period ({:?}) < --leader-elect-renew-deadline ({:?}) < --leader-elect-lease-duration ({:?}) is needed: a leader must step down before its lease can be taken, and renew more often than it steps down",
                leader.leader_elect_retry_period,
                leader.leader_elect_renew_deadline,
                leader.leader_elect_lease_duration
            ));
        }
        let tls = &self.tls;
        if tls.tls_cert_file.is_none() && !tls.self_signed && tls.tls_secret.is_none() {
            return Err("the webhook needs a certificate: give --tls-secret NAME --webhook-service SERVICE, --tls-cert-file and --tls-key-file, or --self-signed --webhook-host HOST".into());
        }
        if let Some(service) = &self.placement.placement_service
            && tls.tls_secret.is_none()
        {
            return Err(format!(
                "--placement-service {service} names the Placement Service for the certificate kubeplace makes with --tls-secret; a certificate from --tls-cert-file or --self-signed carries its own names (give the Service's names to its issuer, as the chart does for cert-manager)"
            ));
        }
        if !self.placement.keystone.keystone_authtoken.is_empty()
            && self.placement.placement_addr.is_none()
        {
            return Err("--keystone-authtoken configures the Placement API's Keystone tokens: give --placement-addr ADDR:PORT too".into());
        }
        self.placement.keystone.config()?;
        if tls.tls_secret.is_some()
            && self.webhook.webhook_service.is_none()
            && self.webhook.webhook_host.is_none()
        {
            return Err("--tls-secret needs the names the API server calls the webhook by: give --webhook-service SERVICE (and/or --webhook-host HOST)".into());
        }
        Ok(())
    }

    /// The names the certificate of --tls-secret is for: the webhook Service's, the
    /// Placement Service's (`--placement-service`) and `--webhook-host`.
    pub fn certificate_names(&self) -> Vec<String> {
        let mut names = self
            .webhook
            .webhook_service
            .as_deref()
            .map(|s| crate::serving::tls_secret::service_names(s, &self.cluster.namespace))
            .unwrap_or_default();
        if let Some(service) = &self.placement.placement_service {
            names.extend(crate::serving::tls_secret::service_names(
                service,
                &self.cluster.namespace,
            ));
        }
        names.extend(self.webhook.webhook_host.clone());
        names
    }

    /// The audience the Placement API's callers' tokens must be issued for; `None` takes
    /// tokens for the API server's own audience.
    pub fn placement_audience(&self) -> Option<&str> {
        Some(self.placement.placement_token_audience.as_str()).filter(|a| !a.is_empty())
    }
}

/// A duration as `250ms`, `1.5s` or `2m`.
fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or((text, ""), |at| text.split_at(at));
    let value: f64 = number.parse().map_err(|_| {
        format!("{text:?} is not a duration; give a number and a unit, as 250ms, 1.5s or 2m")
    })?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => {
            return Err(format!(
                "{text:?} has no unit kubeplace reads; give ms, s or m, as 250ms, 1.5s or 2m"
            ));
        }
    };
    if !(seconds > 0.0 && seconds <= 3600.0) {
        return Err(format!(
            "{text:?} is out of range; give more than 0 and at most 1h"
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A lease duration: whole seconds, as a Lease holds them.
fn lease_seconds(text: &str) -> Result<Duration, String> {
    let d = duration(text)?;
    if d.subsec_nanos() != 0 {
        return Err(format!(
            "{text:?} is not whole seconds; a Lease holds its duration in seconds (2s, 15s)"
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod duration_tests {
    use super::*;

    #[test]
    fn durations_read_and_refuse_with_what_is_taken() {
        assert_eq!(duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(duration("2m").unwrap(), Duration::from_secs(120));
        assert!(duration("2").unwrap_err().contains("unit"));
        assert!(duration("fast").unwrap_err().contains("250ms"));
        assert!(duration("0s").unwrap_err().contains("more than 0"));
        assert!(duration("2h").unwrap_err().contains("unit"));
        assert_eq!(lease_seconds("2s").unwrap(), Duration::from_secs(2));
        assert!(
            lease_seconds("1500ms")
                .unwrap_err()
                .contains("whole seconds")
        );
    }
}
