//! Provider config: Nova's provider config entries and their merge into provider trees.
//!
//! Pure code: entries come in as plain records, the provider index as it is.

pub mod merge;

pub use merge::{ConfigEntry, ConfigOutcome, Effective, Identification, MergeResult, merge};
