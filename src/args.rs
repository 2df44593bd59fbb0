//! Arguments that more than one command takes, declared once: how servers are weighed
//! (`kubeplace apply`, `placement headroom`, `run`), how many servers a Flavor's
//! headroom counts (`apply`, `run`), and how much search work the Placement API takes on
//! (`placement serve`, `run`); Keystone's `[keystone_authtoken]` section (`placement
//! serve`, `run`, `placement import`, `export`); which capacity `/metrics` reports
//! (`placement serve`, `run`).

use std::path::PathBuf;
use std::time::Duration;

use crate::metrics::{CapacityMetrics, CapacitySettings, DEFAULT_MAX_HOSTS};
use crate::placement_api::SearchLimits;

use kubeplace_core::placement::weighers::Weighers;

/// `--weighers`: how the scheduler weighs candidates.
#[derive(clap::Args, Debug, Clone)]
pub struct Weighing {
    /// How servers are weighed: NAME=MULTIPLIER items, comma-separated, over the
    /// default spread=1. Weighers: spread (the smallest share of capacity left free),
    /// ram, cpu, disk (free MEMORY_MB, VCPU, DISK_GB on the host tree, as Nova's);
    /// negative packs, 0 turns one off. Nova's defaults: spread=0,ram=1,cpu=1,disk=1.
    #[arg(
        long,
        env = "KUBEPLACE_WEIGHERS",
        value_name = "NAME=MULTIPLIER,...",
        default_value = "spread=1"
    )]
    pub weighers: Weighers,
}

/// `--capacity-metrics`, `--capacity-metrics-max-hosts`: which hosts' capacity `/metrics`
/// reports under openstack-exporter's names, and how many at most.
#[derive(clap::Args, Debug, Clone)]
pub struct CapacityArgs {
    /// Which hosts' capacity /metrics reports under openstack-exporter's names
    /// (`openstack_placement_resource_*` by hostname and resourcetype): `hosts`, one set per
    /// tree root with its tree summed; `providers`, one per provider as openstack-exporter
    /// reports Placement; `off`, none: zones, Flavors and quotas only (docs/observability.md).
    #[arg(long, value_enum, value_name = "PER", default_value_t = CapacityMetrics::Hosts)]
    pub capacity_metrics: CapacityMetrics,
    /// Hosts (or providers) whose capacity is reported at most, the first by name; the rest
    /// are counted in kubeplace_capacity_hosts_omitted. About four series per class each.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_HOSTS)]
    pub capacity_metrics_max_hosts: usize,
}

impl CapacityArgs {
    /// How capacity is reported on /metrics.
    pub fn settings(&self) -> CapacitySettings {
        CapacitySettings {
            per: self.capacity_metrics,
            max_hosts: self.capacity_metrics_max_hosts,
        }
    }
}

/// `--keystone-authtoken`: a Keystone and kubeplace's service user in it.
#[derive(clap::Args, Debug, Clone)]
pub struct KeystoneArgs {
    /// An oslo-style INI file (e.g. placement.conf) whose [keystone_authtoken] section names
    /// a Keystone and a service user (auth_type = password, or v3applicationcredential).
    /// Given again, or as a directory (its *.conf files in name order), the files are read
    /// in that order and a later key replaces an earlier one, as oslo.config reads
    /// --config-file and --config-dir. `placement serve` and `run` validate each request's
    /// X-Auth-Token with it, and callers may do what Placement's default policies give
    /// their roles; `placement import` and `export` log in as the user and find Placement
    /// in the catalog (region_name, valid_interfaces) unless given its URL
    /// (docs/placement-api.md, Keystone).
    #[arg(long, value_name = "FILE|DIR")]
    pub keystone_authtoken: Vec<PathBuf>,
}

impl KeystoneArgs {
    /// The section read, or why it cannot be used.
    pub fn config(&self) -> Result<Option<crate::keystone::config::KeystoneConfig>, String> {
        if self.keystone_authtoken.is_empty() {
            return Ok(None);
        }
        let config = crate::keystone::config::load_all(&self.keystone_authtoken)
            .map_err(|e| e.to_string())?;
        // The TLS settings (cafile, the system's CAs) are checked now, not at the first
        // request.
        crate::keystone::client::Client::new(
            &config.identity_url,
            config.cafile.as_deref(),
            config.connect_timeout,
            config.request_timeout,
        )
        .map_err(|e| format!("--keystone-authtoken: {e}"))?;
        Ok(Some(config))
    }
}

/// `--headroom-cap`: how many servers each Flavor's `status.headroom` counts.
#[derive(clap::Args, Debug, Clone)]
pub struct HeadroomCap {
    /// Servers each Flavor's `status.headroom` counts at most (placing them one by one as
    /// the scheduler would); 0 counts none.
    #[arg(long, value_name = "SERVERS", allow_hyphen_values = true,
          value_parser = headroom_cap,
          default_value_t = kubeplace_policy::scheduling::headroom::STATUS_CAP)]
    pub headroom_cap: usize,
}

/// A count of servers. A negative one reaches this parser (rather than being taken for a
/// flag) so that the refusal says what is accepted.
fn headroom_cap(value: &str) -> Result<usize, String> {
    value.parse().map_err(|_| {
        format!(
            "{value:?} is not a number of servers; give a whole number, 0 (no counting) or more"
        )
    })
}

/// `--max-searches`, `--max-queued-searches`, `--search-deadline`: how much search work
/// (`GET /allocation_candidates`, `/kubeplace/explain`, `/kubeplace/headroom`) the Placement
/// API takes on at once. Each search may hold a core and a few hundred MiB while it runs.
#[derive(clap::Args, Debug, Clone)]
pub struct Searching {
    /// Searches run at once [default: one a core]. Memory use grows with it: a search
    /// that spends its whole budget holds a few hundred MiB.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub max_searches: Option<usize>,
    /// Searches that wait for a turn, each for at most 2 s [default: four times
    /// --max-searches]; more are answered 503 with Retry-After at once.
    #[arg(long, value_name = "N", value_parser = a_count)]
    pub max_queued_searches: Option<usize>,
    /// Seconds a search may run; then it is stopped and answered 503.
    #[arg(long, value_name = "SECONDS", value_parser = at_least_one,
          default_value_t = crate::placement_api::DEFAULT_SEARCH_DEADLINE.as_secs() as usize)]
    pub search_deadline: usize,
}

impl Searching {
    /// The limits these flags set.
    pub fn limits(&self) -> SearchLimits {
        let mut limits = match self.max_searches {
            Some(n) => SearchLimits::for_cores(n),
            None => SearchLimits::default(),
        };
        if let Some(queued) = self.max_queued_searches {
            limits.queued = queued;
        }
        limits.deadline = Duration::from_secs(self.search_deadline as u64);
        limits
    }
}

/// `--placement-proxy-headers`: whether the Placement API believes the proxy in front of
/// it about the scheme, host and path prefix its callers used, as Placement does with
/// `[oslo_middleware] enable_proxy_headers_parsing`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ProxyArgs {
    /// Build `Location` URLs from the proxy's `Forwarded` header (its first entry's proto
    /// and host), else `X-Forwarded-Proto` and `X-Forwarded-Host`, and `X-Forwarded-Prefix`.
    /// Only behind a proxy that sets (or strips) them: a caller could otherwise name any.
    #[arg(long = "placement-proxy-headers")]
    pub proxy_headers: bool,
}

/// Placement's `[placement]` options for choosing among the allocation candidates found.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ChoosingArgs {
    /// Answer `GET /allocation_candidates` with a random sample of `limit` candidates (all
    /// of them shuffled without one), as `[placement] randomize_allocation_candidates`:
    /// schedulers asking at once then claim on different hosts.
    #[arg(long = "randomize-allocation-candidates")]
    pub randomize: bool,
    /// Generate at most N candidates a request before `limit` is applied, as
    /// `[placement] max_allocation_candidates` (-1: no cap).
    #[arg(long = "max-allocation-candidates", value_name = "N", default_value_t = -1,
          allow_hyphen_values = true, value_parser = max_candidates)]
    pub max: i64,
    /// With a cap: every candidate of the first tree before the next (depth-first) or one
    /// of each tree in turn (breadth-first), as `[placement]
    /// allocation_candidates_generation_strategy`.
    #[arg(
        long = "allocation-candidates-generation-strategy",
        value_name = "STRATEGY",
        default_value = "depth-first"
    )]
    pub strategy: kubeplace_core::placement::candidates::choice::Strategy,
}

impl ChoosingArgs {
    /// The options these flags give.
    pub fn choosing(&self) -> kubeplace_core::placement::candidates::choice::Choosing {
        kubeplace_core::placement::candidates::choice::Choosing {
            randomize: self.randomize,
            max: usize::try_from(self.max).ok(),
            strategy: self.strategy,
        }
    }
}

/// A cap of candidates: -1 (none) or 1 and more.
fn max_candidates(value: &str) -> Result<i64, String> {
    match value.parse::<i64>() {
        Ok(n) if n == -1 || n >= 1 => Ok(n),
        _ => Err(format!(
            "{value:?} is not a number of candidates; give -1 (no cap) or 1 or more"
        )),
    }
}

/// `--cors-*`: which other origins' web pages may call the Placement API, as Placement's
/// `[cors]` section says (oslo.middleware's options and defaults). Off without an origin.
#[derive(clap::Args, Debug, Clone)]
pub struct CorsArgs {
    /// An origin whose pages may call the API (`https://horizon.example.com`, scheme and
    /// host and an optional port, no path; `*` for any); repeat it or give several separated
    /// by commas. Without one, no cross-origin request is answered as such.
    #[arg(long = "cors-allowed-origin", value_name = "ORIGIN", value_delimiter = ',',
          value_parser = cors_origin)]
    pub allowed_origin: Vec<String>,
    /// Whether a cross-origin request may carry the user's credentials.
    #[arg(long = "cors-allow-credentials", value_name = "BOOL", default_value_t = true,
          action = clap::ArgAction::Set)]
    pub allow_credentials: bool,
    /// Headers of an answer a page may read beyond the simple ones, comma separated.
    #[arg(long = "cors-expose-headers", value_name = "HEADER", value_delimiter = ',',
          value_parser = cors_header)]
    pub expose_headers: Vec<String>,
    /// Seconds a browser may keep the answer to a preflight; 0 sends no Access-Control-Max-Age.
    #[arg(long = "cors-max-age", value_name = "SECONDS", default_value_t = 3600)]
    pub max_age: u32,
    /// Methods a cross-origin request may use, comma separated.
    #[arg(long = "cors-allow-methods", value_name = "METHOD", value_delimiter = ',',
          value_parser = cors_header,
          default_values_t = crate::placement_api::cors::DEFAULT_METHODS.iter().map(|m| m.to_string()))]
    pub allow_methods: Vec<String>,
    /// Headers a cross-origin request may send beyond the simple ones, comma separated
    /// (e.g. X-Auth-Token,OpenStack-API-Version).
    #[arg(long = "cors-allow-headers", value_name = "HEADER", value_delimiter = ',',
          value_parser = cors_header)]
    pub allow_headers: Vec<String>,
}

impl CorsArgs {
    /// The settings these flags give.
    pub fn cors(&self) -> crate::placement_api::cors::Cors {
        crate::placement_api::cors::Cors {
            allowed_origins: self.allowed_origin.clone(),
            allow_credentials: self.allow_credentials,
            expose_headers: self.expose_headers.clone(),
            max_age: Some(self.max_age).filter(|a| *a > 0),
            allow_methods: self.allow_methods.clone(),
            allow_headers: self.allow_headers.clone(),
        }
    }
}

/// An origin as a browser sends it: `*`, or `http://` or `https://`, a host and an optional
/// port, nothing after.
fn cors_origin(value: &str) -> Result<String, String> {
    let accepted = "give `*` or an origin as a browser sends it: http:// or https://, a host and an optional :port, no path or trailing slash (e.g. https://horizon.example.com)";
    if value == "*" {
        return Ok(value.to_string());
    }
    let rest = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"));
    match rest {
        Some(host)
            if !host.is_empty()
                && host.chars().all(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']')
                }) =>
        {
            Ok(value.to_string())
        }
        _ => Err(format!("{value:?} is not an origin; {accepted}")),
    }
}

/// A header or method name: letters, digits and `-`, `_`, `.`.
fn cors_header(value: &str) -> Result<String, String> {
    if !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        Ok(value.to_string())
    } else {
        Err(format!(
            "{value:?} is not a header or method name; give letters, digits, '-', '_' or '.' (e.g. OpenStack-API-Version)"
        ))
    }
}

fn a_count(value: &str) -> Result<usize, String> {
    value
        .parse()
        .map_err(|_| format!("{value:?} is not a count; give a whole number, 0 or more"))
}

fn at_least_one(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{value:?} is not accepted; give a whole number, 1 or more"
        )),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(clap::Parser, Debug)]
    struct Cmd {
        #[command(flatten)]
        searching: Searching,
    }

    fn parse(args: &[&str]) -> Result<Cmd, clap::Error> {
        Cmd::try_parse_from(std::iter::once("cmd").chain(args.iter().copied()))
    }

    #[test]
    fn search_limits_default_to_the_cores_and_follow_the_flags() {
        let defaults = parse(&[]).unwrap().searching.limits();
        assert_eq!(defaults, SearchLimits::default());
        let set = parse(&[
            "--max-searches=3",
            "--max-queued-searches=0",
            "--search-deadline=4",
        ])
        .unwrap()
        .searching
        .limits();
        assert_eq!(set.concurrent, 3);
        assert_eq!(set.queued, 0);
        assert_eq!(set.deadline, Duration::from_secs(4));
        // The queue follows --max-searches unless given.
        assert_eq!(
            parse(&["--max-searches=3"])
                .unwrap()
                .searching
                .limits()
                .queued,
            12
        );
    }

    #[test]
    fn bad_search_limits_name_the_flag_the_value_and_what_is_accepted() {
        for (args, value, accepted) in [
            (["--max-searches=0"], "\"0\"", "1 or more"),
            (["--max-searches=-1"], "\"-1\"", "1 or more"),
            (["--search-deadline=ten"], "\"ten\"", "1 or more"),
            (["--max-queued-searches=many"], "\"many\"", "0 or more"),
        ] {
            let e = parse(&args).unwrap_err().to_string();
            let flag = args[0].split('=').next().unwrap();
            assert!(e.contains(flag), "{e}");
            assert!(e.contains(value), "{e}");
            assert!(e.contains(accepted), "{e}");
        }
    }
}

/// `--mirror-traits`: rules that give mirrored Nodes traits from their labels, after the
/// default table (docs/mirror.md).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MirrorTraits {
    /// A YAML file of rules (`traits: [{label, value, trait}]`) read after the default
    /// table of Node labels to traits; see docs/mirror.md.
    #[arg(long, value_name = "FILE", env = "KUBEPLACE_MIRROR_TRAITS")]
    pub mirror_traits: Option<PathBuf>,
}

impl MirrorTraits {
    /// The table in force: the defaults, and the file's rules after them.
    pub fn table(&self) -> Result<kubeplace_policy::mirror::TraitTable, String> {
        let Some(path) = &self.mirror_traits else {
            return Ok(Default::default());
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--mirror-traits {}: {e}", path.display()))?;
        kubeplace_policy::mirror::TraitTable::with_rules(&text)
            .map_err(|e| format!("--mirror-traits {}: {e}", path.display()))
    }
}
