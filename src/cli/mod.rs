//! The `kubeplace` command: one file per subcommand, and the exit codes they share.

pub mod apply;
pub(crate) mod command_line;
pub(crate) mod completion;
pub mod crds;
mod exit;
pub(crate) mod extra_specs;
mod output;
pub mod placement;
mod placement_client;
pub mod placement_export;
pub mod placement_import;
pub mod placement_register;
pub mod placement_serve;
mod placement_snapshot;
pub mod probe;
pub mod provider_config;
pub mod run;
pub mod top;
pub mod upgrade_check;

use std::io::{Read, Write};
use std::process::ExitCode;

use clap::Parser;

use command_line::{Cli, Command, PlacementCall};
pub use exit::Exit;
pub use output::Output;
pub use placement::PlacementArgs;

/// What the binary does to its process for a command, which this crate cannot do itself (it
/// forbids unsafe code).
pub struct Process {
    /// Called once before the operator starts (`kubeplace run`), on the main thread.
    pub before_the_operator: fn(),
}

/// Runs the command line and returns the process's exit code.
pub fn main(process: Process) -> ExitCode {
    match Cli::parse().command {
        // placement-status' exit codes, 255 among them.
        Command::Placement {
            call: PlacementCall::UpgradeCheck(args),
        } => upgrade_check::exit_of(upgrade_check::main(&args)),
        other => ExitCode::from(command(other, process)),
    }
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
            PlacementCall::Register(a) => placement_register::main(a),
            PlacementCall::UpgradeCheck(a) => upgrade_check::main(a).into(),
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
        Command::Top(args) => with_stdio(|i, o, e| top::main(&args, i, o, e)),
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
