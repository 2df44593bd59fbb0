//! The command line: every subcommand and its arguments, as clap parses them.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::output::Output;
use super::{
    apply, extra_specs, placement, placement_export, placement_import, placement_register,
    placement_serve, probe, provider_config, top, upgrade_check,
};
use crate::args::{HeadroomCap, MirrorTraits, Weighing};

/// kubeplace: OpenStack's scheduling vocabulary (flavors, extra specs, provider trees,
/// Placement's allocation candidates) as Kubernetes custom resources.
#[derive(Parser, Debug)]
#[command(name = "kubeplace", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
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
    /// The cloud at a glance: hosts ranked by the share of a class they use, Flavors by how
    /// many more servers of them fit, projects by their quotas' use; from the cluster or
    /// from manifest files (`-f`), as a table with bars, JSON or YAML.
    Top(Box<top::TopArgs>),
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
    Candidates(placement::PlacementArgs),
    /// `GET /resource_providers?QUERY`.
    Providers(placement::PlacementArgs),
    /// How many more servers of a flavor fit, placed one by one with the scheduler's
    /// choice and claims; with `--without`, after draining those providers' trees.
    Headroom(placement::HeadroomArgs),
    /// Placement's REST API (microversions 1.0–1.39, reads and writes) over an in-memory
    /// store seeded from manifests; docs/placement-api.md.
    Serve(Box<placement_serve::ServeArgs>),
    /// Copy a live Placement's whole state (custom classes and traits, providers,
    /// inventories, traits, aggregates, consumers' allocations) into the cluster, or into a
    /// manifest file with `--to-file`; only differences are written.
    Import(Box<placement_import::ImportArgs>),
    /// Write kubeplace's state (the cluster's, or manifest files with `-f`) into a live
    /// Placement, empty or the one it came from; only differences are written.
    Export(Box<placement_export::ExportArgs>),
    /// Register Placement in Keystone: the `placement` service, its public, internal and
    /// admin endpoints in a region, and (with --service-password-file) kubeplace's service
    /// user with its role in the service project; only what differs is changed, and
    /// --dry-run changes nothing.
    Register(Box<placement_register::RegisterArgs>),
    /// Whether the cluster is ready to serve Placement, as `placement-status upgrade check`
    /// says it: CRDs, the admission webhook, a leader, Keystone and the catalog, consumers
    /// without a project. Exit 0 passed, 1 a warning, 2 a failure, 255 not checked.
    UpgradeCheck(Box<upgrade_check::UpgradeCheckArgs>),
}
