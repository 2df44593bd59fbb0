//! Provider config: Nova's provider config files (format, schema, directory rules) and their
//! merge into provider trees.
//!
//! Pure code: files come in as text, entries go out as plain records, and the merge reads the
//! provider index as it is.

pub mod directory;
pub mod file;
pub mod merge;
pub mod problem;
pub mod schema;
pub(crate) mod yaml11;

pub use file::{Checked, FileEntry, check_text, check_value};
pub use merge::{
    ConfigEntry, ConfigOutcome, Effective, Identification, InventoryConflict, MergeResult,
    ProviderFacts, merge, merge_changed,
};
pub use problem::{COMPUTE_NODE_ID, Problem, ProviderRef, Style};

/// The key under which an identification must be unique across configs: the uuid or name
/// string as written (Nova's rule: a name and a uuid written the same collide too).
pub fn identification_key(uuid: Option<&str>, name: Option<&str>) -> Option<String> {
    match (uuid, name) {
        (Some(u), None) => Some(u.to_string()),
        (None, Some(n)) => Some(n.to_string()),
        _ => None,
    }
}
