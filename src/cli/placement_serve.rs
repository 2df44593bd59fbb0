//! `kubeplace placement serve`: Placement's REST API over manifests loaded into memory.

use super::exit::Exit;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::args::{CapacityArgs, ChoosingArgs, CorsArgs, KeystoneArgs, ProxyArgs, Searching};
use crate::operator::standalone::{self, Callers, Standalone, StandaloneError};

/// Arguments of `kubeplace placement serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Files, folders or `-` with ResourceProvider, Allocation (and ProviderConfig) objects to
    /// start from; none for an empty cloud.
    #[arg(short = 'f', long = "filename", num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Address to listen on (plain HTTP); port 0 picks a free port. Loopback by default:
    /// the static token is no protection on a shared network.
    #[arg(long, default_value = "127.0.0.1:8778")]
    pub listen: SocketAddr,
    /// The `X-Auth-Token` every request but `GET /` must carry (Placement's noauth2 takes
    /// `admin`). Not empty; another than `admin` when `--listen` is not a loopback address.
    #[arg(long, default_value = DEFAULT_TOKEN, env = "KUBEPLACE_PLACEMENT_TOKEN")]
    pub token: String,
    #[command(flatten)]
    pub keystone: KeystoneArgs,
    /// FOR TESTS ONLY: take any token, and the roles and project the request's headers
    /// claim (X-Roles, X-Project-Id, OpenStack-System-Scope), as Placement's noauth2 does in
    /// Placement's own functional tests; Placement's default policies then judge them.
    /// Anyone can claim any role: loopback addresses only.
    #[arg(long, conflicts_with = "keystone_authtoken")]
    pub test_roles_from_headers: bool,
    #[command(flatten)]
    pub searching: Searching,
    #[command(flatten)]
    pub choosing: ChoosingArgs,
    #[command(flatten)]
    pub cors: CorsArgs,
    #[command(flatten)]
    pub proxy: ProxyArgs,
    /// Also serve Prometheus metrics (`/metrics`, with `/healthz` and `/readyz`) on this
    /// address, plain HTTP: the API's requests, searches and Keystone checks, and the
    /// served cloud's capacity (docs/observability.md).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics_addr: Option<SocketAddr>,
    #[command(flatten)]
    pub capacity: CapacityArgs,
}

/// The token Placement's noauth2 takes, and so every Placement client's example config.
const DEFAULT_TOKEN: &str = "admin";

/// Why `--token` cannot be used with `--listen`, if it cannot. The token is never shown: it
/// may be a real secret.
fn token_refusal(token: &str, listen: SocketAddr) -> Option<String> {
    if token.is_empty() {
        return Some(
            "--token is empty; give the token clients must send in X-Auth-Token (printable ASCII, at least one character), with --token or KUBEPLACE_PLACEMENT_TOKEN".to_string(),
        );
    }
    // An HTTP header value is visible ASCII and spaces, and loses its outer spaces on the
    // way: any other token could never be matched.
    if let Some((at, c)) = token
        .chars()
        .enumerate()
        .find(|(_, c)| !(c.is_ascii_graphic() || *c == ' '))
    {
        return Some(format!(
            "--token has {c:?} at character {}; a token is printable ASCII (letters, digits, punctuation and inner spaces), as an X-Auth-Token header carries it",
            at + 1
        ));
    }
    if token.trim() != token {
        return Some(
            "--token starts or ends with a space, which an X-Auth-Token header drops; give it without".to_string(),
        );
    }
    if token == DEFAULT_TOKEN && !listen.ip().to_canonical().is_loopback() {
        return Some(format!(
            "--listen {listen} is reachable from other machines, and --token is the default `{DEFAULT_TOKEN}`, which any Placement client tries first; give a token of your own with --token (or KUBEPLACE_PLACEMENT_TOKEN), or listen on a loopback address such as 127.0.0.1:{}",
            listen.port()
        ));
    }
    None
}

/// Runs the server until SIGINT or SIGTERM. Prints `listening on http://ADDR` on standard
/// output once it accepts connections, so scripts and tests can learn a picked port.
pub fn main(args: &ServeArgs) -> Exit {
    let keystone = match args.keystone.config() {
        Ok(k) => k,
        Err(e) => {
            eprintln!("kubeplace placement serve: {e}");
            return Exit::BadInput;
        }
    };
    if args.test_roles_from_headers && !args.listen.ip().to_canonical().is_loopback() {
        eprintln!(
            "kubeplace placement serve: --test-roles-from-headers lets any caller claim any role; it is for tests on a loopback address (--listen 127.0.0.1:PORT), not {}",
            args.listen
        );
        return Exit::BadInput;
    }
    if keystone.is_none()
        && !args.test_roles_from_headers
        && let Some(refusal) = token_refusal(&args.token, args.listen)
    {
        eprintln!("kubeplace placement serve: {refusal}");
        return Exit::BadInput;
    }
    init_logging();
    if args.test_roles_from_headers {
        tracing::warn!(
            "--test-roles-from-headers: any token is taken with the roles its headers claim; for tests only"
        );
    }
    let store = match super::placement::load_state(&args.files, &mut std::io::stdin().lock()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kubeplace placement serve: {e}");
            return Exit::BadInput;
        }
    };
    let callers = match keystone {
        Some(config) => Callers::Keystone(Box::new(config)),
        None if args.test_roles_from_headers => Callers::RolesFromHeaders,
        None => Callers::Token(args.token.clone()),
    };
    let served = standalone::serve(Standalone {
        store,
        callers,
        searches: args.searching.limits(),
        choosing: args.choosing.choosing(),
        cors: args.cors.cors(),
        proxy_headers: args.proxy.proxy_headers,
        listen: args.listen,
        metrics: args.metrics_addr,
        capacity: args.capacity.settings(),
    });
    match served {
        Ok(()) => Exit::Ok,
        Err(e) => {
            eprintln!("kubeplace placement serve: {e}");
            match e {
                StandaloneError::Settings(_) => Exit::BadInput,
                StandaloneError::Failed(_) => Exit::Failed,
            }
        }
    }
}

/// Logs to standard error: warnings and errors (a request that failed on an internal error,
/// with its request id), or what `RUST_LOG` asks for.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(token: &str, listen: &str) -> Option<String> {
        token_refusal(token, listen.parse().unwrap())
    }

    #[test]
    fn the_token_must_be_set_and_not_the_default_off_loopback() {
        assert!(
            refused("", "127.0.0.1:8778")
                .unwrap()
                .contains("--token is empty")
        );
        let open = refused("admin", "0.0.0.0:8778").unwrap();
        assert!(
            open.contains("--token") && open.contains("127.0.0.1:8778"),
            "{open}"
        );
        assert!(refused("admin", "[::]:0").is_some());
        assert!(refused("admin", "192.0.2.1:0").is_some());
        assert_eq!(refused("admin", "127.0.0.1:8778"), None);
        assert_eq!(refused("admin", "127.0.0.2:8778"), None);
        assert_eq!(refused("admin", "[::1]:8778"), None);
        assert_eq!(refused("admin", "[::ffff:127.0.0.1]:8778"), None);
        assert_eq!(refused("s3same open", "0.0.0.0:8778"), None);
    }

    #[test]
    fn a_token_no_header_can_carry_is_refused_without_showing_it() {
        let e = refused("secr\u{e9}t", "127.0.0.1:0").unwrap();
        assert!(
            e.contains("'é' at character 5") && !e.contains("secr"),
            "{e}"
        );
        assert!(refused("tab\there", "127.0.0.1:0").is_some());
        assert!(refused(" padded", "127.0.0.1:0").unwrap().contains("space"));
        assert!(refused("padded ", "127.0.0.1:0").is_some());
    }
}
