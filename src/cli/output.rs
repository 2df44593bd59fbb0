//! The output formats the subcommands that print objects share.

use clap::ValueEnum;

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
