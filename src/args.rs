//! Arguments that more than one command takes, declared once: how servers are weighed
//! (`kubeplace apply`, `placement headroom`, `run`) and how many servers a Flavor's
//! headroom counts (`apply`, `run`).

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
