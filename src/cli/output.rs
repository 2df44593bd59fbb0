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

/// Output of a command that reports rather than prints objects: lines for people, or JSON.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Report {
    Text,
    Json,
}
