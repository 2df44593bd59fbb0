//! The `kubeplace` command: one file per subcommand.

pub mod apply;
pub(crate) mod completion;
pub mod crds;
pub(crate) mod extra_specs;
pub mod placement;
pub mod placement_serve;
pub mod probe;
pub mod provider_config;
pub mod run;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use kubeplace_core::placement::weighers::Weighers;

/// kubeplace: OpenStack's scheduling vocabulary (flavors, extra specs, provider trees,
/// Placement's allocation candidates) as Kubernetes custom resources.
#[derive(Parser, Debug)]
#[command(name = "kubeplace", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Output formats.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// A table for people.
    Table,
    /// YAML.
    Yaml,
    /// JSON.
    Json,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run admission and reconcile over manifests with no cluster, and print each object's
    /// verdict and status. Exit 0 when every object is admitted, 1 when any is rejected,
    /// 2 when input cannot be read.
    Apply {
        /// Files, folders (read recursively, sorted) or `-` for standard input.
        #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// Fields the kind's schema does not name, as kubectl's `--validate`: `strict`
        /// (or `true`) refuses the object, as the API server does by default; `warn` and
        /// `ignore` (or `false`) apply it without them, `warn` with a warning each.
        #[arg(
            long,
            value_enum,
            default_value_t = apply::Validate::Strict,
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "strict"
        )]
        validate: apply::Validate,
        /// How servers are weighed: NAME=MULTIPLIER items, comma-separated, over the
        /// default spread=1. Weighers: spread (the smallest share of capacity left free),
        /// ram, cpu, disk (free MEMORY_MB, VCPU, DISK_GB on the host tree, as Nova's);
        /// negative packs, 0 turns one off. Nova's defaults: spread=0,ram=1,cpu=1,disk=1.
        #[arg(long, value_name = "NAME=MULTIPLIER,...", default_value = "spread=1")]
        weighers: Weighers,
        /// Servers each Flavor's `status.headroom` counts at most; 0 counts none.
        #[arg(long, value_name = "SERVERS", allow_hyphen_values = true,
              value_parser = headroom_cap,
              default_value_t = kubeplace_policy::scheduling::headroom::STATUS_CAP)]
        headroom_cap: usize,
    },
    /// Print every CustomResourceDefinition as YAML.
    Crds,
    /// Run the operator: watches and status controllers, the admission webhook (HTTPS), and
    /// health, readiness and metrics endpoints, against the cluster of the kubeconfig or the
    /// in-cluster service account.
    Run(Box<run::RunArgs>),
    /// Placement's GET queries over ResourceProvider and Allocation manifests, answered
    /// as Placement would (JSON in Placement's shape at the microversion), and Placement's
    /// REST API served over them.
    Placement {
        #[command(subcommand)]
        call: PlacementCall,
    },
    /// Nova's provider config files: validate them as nova-compute loads them, or convert them
    /// into ProviderConfig manifests.
    ProviderConfig {
        #[command(subcommand)]
        command: provider_config::ProviderConfigCommand,
    },
    /// The extra spec registry: reference docs, Glance metadefs, and checks of single
    /// extra specs or image properties.
    #[command(subcommand)]
    ExtraSpecs(extra_specs::ExtraSpecsCommand),
    /// GET each URL and say whether it answered 2xx (exit 0) or not (exit 1): the chart's
    /// `helm test` runs it against the release's Services.
    Probe(probe::ProbeArgs),
    /// Print a shell completion script: `source <(kubeplace completion bash)`, or write it
    /// where the shell loads completions from (bash, zsh, fish, elvish, powershell).
    Completion {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
}

/// The Placement calls `kubeplace placement` answers.
#[derive(Subcommand, Debug)]
pub enum PlacementCall {
    /// `GET /allocation_candidates?QUERY`.
    Candidates(PlacementArgs),
    /// `GET /resource_providers?QUERY`.
    Providers(PlacementArgs),
    /// How many more servers of a flavor fit, placed one by one with the scheduler's
    /// choice and claims; with `--without`, after draining those providers' trees.
    Headroom(placement::HeadroomArgs),
    /// Placement's REST API (microversions 1.0–1.39, reads and writes) over an in-memory
    /// store seeded from manifests; docs/placement-api.md.
    Serve(placement_serve::ServeArgs),
}

/// Arguments of a Placement call.
#[derive(clap::Args, Debug)]
pub struct PlacementArgs {
    /// Files, folders or `-` with ResourceProvider, Allocation (and ProviderConfig) objects.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Placement's query string, e.g. `resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GOLD`.
    #[arg(long)]
    pub query: String,
    /// Placement microversion, 1.10 to 1.39 or `latest`.
    #[arg(long, default_value = "1.39")]
    pub microversion: String,
    /// Output format: `json` (Placement's shape; with `--explain`, the explanation under
    /// the key `explain`), or `text` (the explanation alone; the default with `--explain`).
    #[arg(short = 'o', long, value_parser = ["json", "text"])]
    pub output: Option<String>,
    /// Say where the candidates were lost, in order, with counts: per request group, over
    /// the provider trees, when the groups are combined, and by `limit` (candidates only).
    #[arg(long)]
    pub explain: bool,
    /// Answer the query this many times after loading and print the median and fastest
    /// time in milliseconds to standard error (for speed comparisons).
    #[arg(long, hide = true, default_value_t = 0)]
    pub time_repeat: usize,
}

/// `--headroom-cap`: a count of servers. A negative one reaches this parser (rather than
/// being taken for a flag) so that the refusal says what is accepted.
pub(crate) fn headroom_cap(value: &str) -> Result<usize, String> {
    value.parse().map_err(|_| {
        format!(
            "{value:?} is not a number of servers; give a whole number, 0 (no counting) or more"
        )
    })
}

/// What the binary does to its process for a command, which this crate cannot do itself (it
/// forbids unsafe code).
pub struct Process {
    /// Called once before the operator starts (`kubeplace run`), on the main thread.
    pub before_the_operator: fn(),
}

/// Runs the command line and returns the process's exit code.
pub fn main(process: Process) -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Apply {
            files,
            output,
            validate,
            weighers,
            headroom_cap,
        } => {
            let stdin = &mut std::io::stdin().lock();
            let stdout = &mut std::io::stdout().lock();
            let stderr = &mut std::io::stderr().lock();
            let options = apply::Options {
                validate,
                weighers,
                headroom_cap,
            };
            ExitCode::from(apply::run(&files, output, &options, stdin, stdout, stderr))
        }
        Command::Placement { call } => {
            let (which, args) = match &call {
                PlacementCall::Candidates(a) => (placement::Call::Candidates, a),
                PlacementCall::Providers(a) => (placement::Call::Providers, a),
                PlacementCall::Serve(a) => return placement_serve::main(a),
                PlacementCall::Headroom(a) => {
                    let stdin = &mut std::io::stdin().lock();
                    let stdout = &mut std::io::stdout().lock();
                    let stderr = &mut std::io::stderr().lock();
                    return ExitCode::from(placement::headroom(a, stdin, stdout, stderr));
                }
            };
            let stdin = &mut std::io::stdin().lock();
            let stdout = &mut std::io::stdout().lock();
            let stderr = &mut std::io::stderr().lock();
            ExitCode::from(placement::run(which, args, stdin, stdout, stderr))
        }
        Command::ProviderConfig { command } => {
            let stdout = &mut std::io::stdout().lock();
            let stderr = &mut std::io::stderr().lock();
            ExitCode::from(provider_config::run(&command, stdout, stderr))
        }
        Command::ExtraSpecs(command) => {
            let stdin = &mut std::io::stdin().lock();
            let stdout = &mut std::io::stdout().lock();
            let stderr = &mut std::io::stderr().lock();
            ExitCode::from(extra_specs::run(command, stdin, stdout, stderr))
        }
        Command::Run(args) => {
            (process.before_the_operator)();
            run::main(*args)
        }
        Command::Probe(args) => probe::main(&args),
        Command::Completion { shell } => {
            completion::write(shell, &mut std::io::stdout().lock());
            ExitCode::SUCCESS
        }
        Command::Crds => match crds::render() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("kubeplace crds: {e}");
                ExitCode::from(2)
            }
        },
    }
}
