//! Whether an operator's definition is shadowed by an in-tree one.
//!
//! In-tree definitions win. A custom definition with a literal key is shadowed exactly when
//! the in-tree registry covers that key. For a key with placeholders, deciding whether two
//! patterns overlap is hard in general, so kubeplace instantiates the custom key with sample
//! texts for each placeholder (those of a fixed list that its pattern accepts) and asks the
//! in-tree registry about each instance: all covered means shadowed, some covered means
//! partly shadowed. Samples can miss an overlap that only exotic texts reach.

use regex::Regex;

use super::definition::{Definition, Piece, template_pieces};
use super::registry::Registry;

/// How far in-tree definitions shadow a custom one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shadowing {
    /// No in-tree definition covers a key it matches (as far as the samples show).
    None,
    /// Some keys it matches (the example) are covered by the in-tree definition `by`.
    Partial { example: String, by: String },
    /// Every key it matches is covered in-tree; `by` covers the first example.
    Full { example: String, by: String },
}

const SAMPLES: [&str; 16] = [
    "0", "a", "A", "CUSTOM_X", "1", "x", "X", "foo", "FOO", "12", "7", "_", "-", "a_b", "", ":a",
];

/// Keys the definition matches, built from sample placeholder texts (at most 64).
pub(crate) fn sample_keys(def: &Definition) -> Vec<String> {
    let Ok(pieces) = template_pieces(&def.key) else {
        return Vec::new();
    };
    let mut keys = vec![String::new()];
    for piece in pieces {
        match piece {
            Piece::Literal(text) => keys.iter_mut().for_each(|k| k.push_str(text)),
            Piece::Param(name) => {
                let Some(p) = def.params.iter().find(|p| p.name == name) else {
                    return Vec::new();
                };
                let Ok(re) = Regex::new(&format!("^(?:{})$", p.pattern)) else {
                    return Vec::new();
                };
                let fits: Vec<&str> = SAMPLES
                    .iter()
                    .copied()
                    .filter(|s| re.is_match(s))
                    .take(6)
                    .collect();
                keys = keys
                    .iter()
                    .flat_map(|k| fits.iter().map(move |s| format!("{k}{s}")))
                    .take(64)
                    .collect();
            }
        }
    }
    keys.retain(|k| def.matches(k));
    keys
}

/// How the in-tree registry shadows `def`.
pub fn shadowing(def: &Definition, in_tree: &Registry) -> Shadowing {
    let keys = if def.is_literal() {
        vec![def.key.clone()]
    } else {
        sample_keys(def)
    };
    let covered: Vec<(&String, &Definition)> = keys
        .iter()
        .filter_map(|k| in_tree.find(k).map(|d| (k, d)))
        .collect();
    match covered.first() {
        None => Shadowing::None,
        Some((example, by)) => {
            let (example, by) = (example.to_string(), by.key.clone());
            if covered.len() == keys.len() {
                Shadowing::Full { example, by }
            } else {
                Shadowing::Partial { example, by }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extra_specs::definition::{DefinitionSpec, Origin, ValueSpec};

    fn custom(key: &str, params: &[(&str, &str)]) -> Definition {
        let mut d = DefinitionSpec::new(key, "test", ValueSpec::String);
        for (n, p) in params {
            d = d.param(n, p, "");
        }
        d.compile(Origin::Custom("t".into())).unwrap()
    }

    #[test]
    fn literal_keys() {
        let r = Registry::in_tree();
        assert_eq!(
            shadowing(&custom("hw:cpu_policy", &[]), r),
            Shadowing::Full {
                example: "hw:cpu_policy".into(),
                by: "hw:cpu_policy".into()
            }
        );
        assert_eq!(
            shadowing(&custom("acme:cache_ways", &[]), r),
            Shadowing::None
        );
        assert_eq!(
            shadowing(&custom("hw:acme_widget", &[]), r),
            Shadowing::None
        );
    }

    #[test]
    fn patterned_keys() {
        let r = Registry::in_tree();
        assert!(matches!(
            shadowing(&custom("hw:numa_cpus.{n}", &[("n", "[0-9]+")]), r),
            Shadowing::Full { by, .. } if by == "hw:numa_cpus.{num}"
        ));
        assert!(matches!(
            shadowing(&custom("trait:{t}", &[("t", "[A-Z_]+")]), r),
            Shadowing::Partial { by, .. } if by == "trait{group}:CUSTOM_{trait}"
        ));
        assert_eq!(
            shadowing(&custom("acme:numa_cache.{node}", &[("node", "[0-9]+")]), r),
            Shadowing::None
        );
    }
}
