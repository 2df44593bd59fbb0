//! `kubeplace completion SHELL`: a completion script for the shell, generated from the same
//! clap definition the command line is parsed with, so it never lags a new flag.

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

use super::command_line::Cli;

/// Writes the script for `shell` to `out`.
pub(crate) fn write(shell: Shell, out: &mut dyn Write) {
    let mut command = Cli::command();
    clap_complete::generate(shell, &mut command, "kubeplace", out);
}
