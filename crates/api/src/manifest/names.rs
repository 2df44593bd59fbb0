//! Kubernetes' rules for object and namespace names, and the names of kubeplace's kinds.

use crate::Kind;

/// Kubernetes' rule for namespace names: a DNS label (RFC 1123).
pub fn check_namespace_name(name: &str) -> Result<(), String> {
    check_object_name(name)?;
    if name.len() > 63 || name.contains('.') {
        return Err(
            "a namespace name is a DNS label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit".into(),
        );
    }
    Ok(())
}

/// The names of kubeplace's kinds, in the order `kubeplace crds` prints them.
pub(super) fn kind_names() -> Vec<&'static str> {
    Kind::ALL.iter().map(|k| k.as_str()).collect()
}

/// Kubernetes' rule for object names: a DNS subdomain (RFC 1123).
pub fn check_object_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("every object needs a name; set metadata.name".into());
    }
    if name.len() > 253 {
        return Err(format!(
            "it is {} characters long; at most 253 are allowed",
            name.len()
        ));
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !name.chars().all(ok_char) || !name.starts_with(alnum) || !name.ends_with(alnum) {
        return Err("names use lowercase letters, digits, '-' and '.', and start and end with a letter or digit".into());
    }
    Ok(())
}
