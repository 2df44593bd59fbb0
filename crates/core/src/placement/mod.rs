//! The placement core: resource classes, traits, inventories and provider trees.
//!
//! Pure code: no Kubernetes, network or async types. The shell feeds it plain
//! records built from ResourceProvider and Allocation objects.

pub mod candidates;
pub(crate) mod candidates_json;
pub mod candidates_parts;
pub mod explain;
mod extra_spec_keys;
pub(crate) mod fragments;
pub mod ids;
pub(crate) mod interner;
pub mod inventory;
pub mod kept_answers;
pub mod kept_parts;
pub mod list_parts;
pub mod microversion;
pub(crate) mod packed_tree;
pub(crate) mod provider;
pub mod provider_tree;
pub mod query;
pub mod rebuild;
pub mod request;
pub(crate) mod resource_class;
pub mod resource_providers;
pub mod response;
pub mod trait_name;
pub mod trait_rows;
pub(crate) mod tree_shapes;
pub mod weighers;

pub use inventory::{CapacityError, Inventory, InventoryError};
pub use provider_tree::{ProviderIndex, ProviderRecord, TreeError};
pub use resource_class::{check_resource_class, standard_resource_classes};
pub use trait_name::{check_trait, standard_traits};

/// Longest resource class or trait name Placement stores.
pub(crate) const MAX_NAME_LEN: usize = 255;

/// Why a resource class or trait name is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{what} name is empty")]
    Empty { what: &'static str },
    #[error("{what} {name:?} is {len} characters long; at most 255 are allowed")]
    TooLong {
        what: &'static str,
        name: String,
        len: usize,
    },
    #[error("{what} {name:?} has characters other than A-Z, 0-9 and _")]
    BadCharacters { what: &'static str, name: String },
    #[error("{what} {name:?} is neither a standard {what} nor CUSTOM_*{}", suggestion_text(.suggestion))]
    Unknown {
        what: &'static str,
        name: String,
        suggestion: Option<String>,
    },
}

fn suggestion_text(s: &Option<String>) -> String {
    match s {
        Some(s) => format!("; did you mean {s}?"),
        None => String::new(),
    }
}

/// Placement's pattern for the names of resource classes, traits and consumer types:
/// `^[A-Z0-9_]+$`, at most [`MAX_NAME_LEN`] characters.
pub fn is_placement_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Shared rule for resource classes and traits: standard, or `CUSTOM_[A-Z0-9_]+`.
pub(crate) fn check_name(
    what: &'static str,
    name: &str,
    is_standard: impl Fn(&str) -> bool,
    standard: &[&str],
) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty { what });
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong {
            what,
            name: name.to_string(),
            len: name.len(),
        });
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(NameError::BadCharacters {
            what,
            name: name.to_string(),
        });
    }
    if is_standard(name) || (name.starts_with("CUSTOM_") && name.len() > "CUSTOM_".len()) {
        return Ok(());
    }
    Err(NameError::Unknown {
        what,
        name: name.to_string(),
        suggestion: closest(name, standard),
    })
}

/// The standard name closest to `name` by edit distance, when close enough to be a typo.
pub fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a &'a str>,
) -> Option<String> {
    let limit = (name.len() / 3).max(2);
    candidates
        .into_iter()
        // The distance is at least the difference in length: skip the hopeless ones.
        .filter(|c| c.len().abs_diff(name.len()) <= limit)
        .map(|c| (edit_distance(name, c), *c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c.to_string())
}

/// Levenshtein distance over bytes.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

pub(crate) fn load_list(text: &'static str) -> Vec<&'static str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// The uuid of a provider whose spec gives none: a UUIDv5 of its name, so the same
/// manifest always yields the same uuid.
pub fn derived_provider_uuid(name: &str) -> String {
    // The namespace is itself a UUIDv5; hashed once, not for every provider.
    static NAMESPACE: std::sync::LazyLock<uuid::Uuid> = std::sync::LazyLock::new(|| {
        uuid::Uuid::new_v5(
            &uuid::Uuid::NAMESPACE_DNS,
            b"resourceproviders.kubeplace.io",
        )
    });
    // UUIDv5 is SHA-1 of the namespace and the name; `sha1` uses the CPU's SHA instructions
    // where it has them, which matters when a cloud's providers are read by the ten thousand.
    use sha1::Digest;
    let mut hash = sha1::Sha1::new();
    hash.update(NAMESPACE.as_bytes());
    hash.update(name.as_bytes());
    let digest = hash.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    let uuid = uuid::Builder::from_sha1_bytes(bytes).into_uuid();
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    uuid.hyphenated().encode_lower(&mut text).to_string()
}

/// Placement's uuids: 36 characters, hyphenated.
pub fn is_uuid(s: &str) -> bool {
    s.len() == 36 && uuid::Uuid::try_parse(s).is_ok()
}

/// Whether Placement takes `s` where it wants something like a uuid (an aggregate in a
/// body or in `member_of`): oslo.utils' `is_uuid_like`, which leaves out every `urn:` and
/// `uuid:`, the braces at either end and every hyphen, and then wants 32 hex digits. The
/// string itself is what Placement keeps and compares, in whichever of these forms.
pub fn is_uuid_like(s: &str) -> bool {
    let bare = s.replace("urn:", "").replace("uuid:", "");
    let digits = bare
        .trim_matches(|c| c == '{' || c == '}')
        .chars()
        .filter(|c| *c != '-');
    let mut n = 0usize;
    for c in digits {
        if !c.is_ascii_hexdigit() {
            return false;
        }
        n += 1;
    }
    n == 32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_like_is_oslo_utils_rule() {
        for ok in [
            "01234567-89ab-cdef-0123-456789abcdef",
            "0123456789abcdef0123456789ABCDEF",
            "{01234567-89ab-cdef-0123-456789abcdef}",
            "urn:uuid:01234567-89ab-cdef-0123-456789abcdef",
            "0123-4567-89ab-cdef-0123-4567-89ab-cdef",
            "{{0123456789abcdef0123456789abcdef}}",
        ] {
            assert!(is_uuid_like(ok), "{ok}");
        }
        for bad in [
            "",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdef0",
            "0123456789abcdef0123456789abcdeg",
            " 0123456789abcdef0123456789abcdef",
            "0123456789abcdef_0123456789abcdef",
            "0123456789abcdef0123456789abcdeＡ",
            "x{0123456789abcdef0123456789abcdef}",
        ] {
            assert!(!is_uuid_like(bad), "{bad}");
        }
    }

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("VCPU", "VCPU"), 0);
        assert_eq!(edit_distance("VCPUS", "VCPU"), 1);
        assert_eq!(edit_distance("MEMORY_MD", "MEMORY_MB"), 1);
        assert_eq!(edit_distance("", "ABC"), 3);
    }

    /// The derived uuid is RFC 4122's UUIDv5 of the name: what `uuid` computes, for names
    /// short and long, ASCII or not, and the same every time.
    #[test]
    fn derived_uuids_are_uuid_v5_of_the_name() {
        let namespace = uuid::Uuid::new_v5(
            &uuid::Uuid::NAMESPACE_DNS,
            b"resourceproviders.kubeplace.io",
        );
        let long = "n".repeat(300);
        for name in ["", "cn1", "tree-9999-numa-1", "nœud-α", long.as_str()] {
            let derived = derived_provider_uuid(name);
            assert_eq!(
                derived,
                uuid::Uuid::new_v5(&namespace, name.as_bytes()).to_string(),
                "{name}"
            );
            assert!(is_uuid(&derived), "{derived}");
        }
        assert_eq!(
            derived_provider_uuid("pool-5"),
            "6f87de65-f183-5f4c-921c-7716cca27dff"
        );
    }
}
