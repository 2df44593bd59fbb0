//! The `kubeplace` command: one file per subcommand, and the exit codes they share.

pub mod apply;
pub(crate) mod completion;
pub mod crds;
pub(crate) mod extra_specs;
pub mod placement;
mod placement_client;
pub mod placement_export;
pub mod placement_import;
pub mod placement_serve;
mod placement_snapshot;
pub mod probe;
pub mod provider_config;
pub mod run;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use crate::args::{HeadroomCap, MirrorTraits, Weighing};

/// How every subcommand ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exit {
    /// Done, and every object, file or URL passed.
    Ok,
    /// Done, and something was refused: an object rejected, a query Placement would answer
    /// with an error, a URL that did not answer 2xx; or the operator failed.
    Failed,
    /// The input could not be read or the arguments cannot work together.
    BadInput,
}

impl Exit {
    /// The exit for a process exit code of 0, 1 or 2 (anything above 2 is bad input).
    pub fn from_code(code: u8) -> Exit {
        match code {
            0 => Exit::Ok,
            1 => Exit::Failed,
            _ => Exit::BadInput,
        }
    }

    /// The process exit code: 0, 1 or 2.
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::BadInput => 2,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

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
        #[command(flatten)]
        weighing: Weighing,
        #[command(flatten)]
        headroom: HeadroomCap,
        #[command(flatten)]
        mirror: MirrorTraits,
    },
    /// Print every CustomResourceDefinition as YAML.
    Crds,
    /// Run the operator: watches and status controllers, the admission webhook (HTTPS), and
    /// health, readiness and metrics endpoints, against the cluster of the kubeconfig or the
    /// in-cluster service account.
    Run(Box<crate::operator::Flags>),
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
    /// Copy a live Placement's whole state (custom classes and traits, providers,
    /// inventories, traits, aggregates, consumers' allocations) into the cluster, or into a
    /// manifest file with `--to-file`; only differences are written.
    Import(Box<placement_import::ImportArgs>),
    /// Write kubeplace's state (the cluster's, or manifest files with `-f`) into a live
    /// Placement, empty or the one it came from; only differences are written.
    Export(Box<placement_export::ExportArgs>),
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

/// What the binary does to its process for a command, which this crate cannot do itself (it
/// forbids unsafe code).
pub struct Process {
    /// Called once before the operator starts (`kubeplace run`), on the main thread.
    pub before_the_operator: fn(),
}

/// Runs the command line and returns the process's exit code.
pub fn main(process: Process) -> ExitCode {
    ExitCode::from(command(Cli::parse().command, process))
}

fn command(command: Command, process: Process) -> Exit {
    match command {
        Command::Apply {
            files,
            output,
            validate,
            weighing,
            headroom,
            mirror,
        } => {
            let mirror_traits = match mirror.table() {
                Ok(table) => table,
                Err(e) => {
                    eprintln!("kubeplace apply: {e}");
                    return Exit::BadInput;
                }
            };
            let options = apply::Options {
                validate,
                weighers: weighing.weighers,
                headroom_cap: headroom.headroom_cap,
                mirror_traits,
            };
            with_stdio(|i, o, e| apply::run(&files, output, &options, i, o, e))
        }
        Command::Placement { call } => match &call {
            PlacementCall::Candidates(a) => {
                with_stdio(|i, o, e| placement::run(placement::Call::Candidates, a, i, o, e))
            }
            PlacementCall::Providers(a) => {
                with_stdio(|i, o, e| placement::run(placement::Call::Providers, a, i, o, e))
            }
            PlacementCall::Serve(a) => placement_serve::main(a),
            PlacementCall::Headroom(a) => with_stdio(|i, o, e| placement::headroom(a, i, o, e)),
            PlacementCall::Import(a) => placement_import::main(a),
            PlacementCall::Export(a) => placement_export::main(a),
        },
        Command::ProviderConfig { command } => {
            with_stdio(|_, o, e| provider_config::run(&command, o, e))
        }
        Command::ExtraSpecs(command) => with_stdio(|i, o, e| extra_specs::run(command, i, o, e)),
        Command::Run(flags) => {
            (process.before_the_operator)();
            run::main(*flags)
        }
        Command::Probe(args) => probe::main(&args),
        Command::Completion { shell } => with_stdio(|_, o, _| {
            completion::write(shell, o);
            Exit::Ok
        }),
        Command::Crds => with_stdio(|_, o, e| match crds::render() {
            Ok(yaml) => {
                let _ = write!(o, "{yaml}");
                Exit::Ok
            }
            Err(err) => {
                let _ = writeln!(e, "kubeplace crds: {err}");
                Exit::BadInput
            }
        }),
    }
}

/// Runs a command that reads and writes the standard streams, each locked once (the
/// commands that log from other threads, `run` and `placement serve`, lock none).
fn with_stdio<R>(f: impl FnOnce(&mut dyn Read, &mut dyn Write, &mut dyn Write) -> R) -> R {
    f(
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    )
}
