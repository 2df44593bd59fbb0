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

/// Output of `kubeplace top`: the formats of [`Output`], or the capacity page.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopOutput {
    /// A table for people.
    Table,
    /// YAML.
    Yaml,
    /// JSON.
    Json,
    /// The capacity page: one self-contained HTML page of every section (`--limit` rows
    /// each; the section, `--class` and `--providers` are for the other formats).
    Html,
}

/// Output of a command that reports rather than prints objects: lines for people, or JSON.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Report {
    Text,
    Json,
}
