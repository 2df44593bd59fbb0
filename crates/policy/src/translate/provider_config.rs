//! ProviderConfig resources and Nova's provider config files: a resource's spec is the
//! file's content with camelCase field names, checked by the same rules.

use kubeplace_api::ProviderConfigSpec;
use kubeplace_core::provider_config::ConfigEntry;
use kubeplace_core::provider_config::file::{Checked, Style, camel, check_value, snake};
use serde_json::Value;

/// Checks a ProviderConfig spec with the file's rules; paths and names in messages are the
/// resource's (`spec.providers[0].inventories.additional[0].CUSTOM_X.minUnit`).
pub fn check_spec(spec: &ProviderConfigSpec) -> Checked {
    check_value(&spec_to_file_value(spec), Style::Resource)
}

/// A ProviderConfig spec in the file's shape (snake_case field names).
pub(crate) fn spec_to_file_value(spec: &ProviderConfigSpec) -> Value {
    fn rename(v: Value) -> Value {
        match v {
            Value::Object(m) => {
                Value::Object(m.into_iter().map(|(k, v)| (snake(&k), rename(v))).collect())
            }
            Value::Array(items) => Value::Array(items.into_iter().map(rename).collect()),
            other => other,
        }
    }
    rename(serde_json::to_value(spec).unwrap_or(Value::Null))
}

/// A file's value as a ProviderConfig spec (camelCase field names); fields the resource has no
/// place for (unknown fields) are left out.
pub fn file_value_to_spec(value: &Value) -> Result<ProviderConfigSpec, String> {
    fn rename(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, v)| (camel(k), rename(v))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(rename).collect()),
            Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
                _ => v.clone(),
            },
            other => other.clone(),
        }
    }
    serde_path_to_error::deserialize(rename(value))
        .map_err(|e| format!("{}: {}", e.path(), e.inner()))
}

/// The entries of a ProviderConfig spec that take part in the merge, as Nova keeps them:
/// entries with nothing additional are dropped.
pub(crate) fn spec_entries(spec: &ProviderConfigSpec, source: &str) -> Vec<ConfigEntry> {
    check_spec(spec)
        .entries
        .iter()
        .filter(|e| !e.dropped)
        .map(|e| e.to_config_entry(source))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips_through_the_file_shape() {
        let v = serde_json::json!({"meta": {"schema_version": "1.0"}, "providers": [
            {"identification": {"uuid": "$COMPUTE_NODE"}, "inventories": {"additional": [
                {"CUSTOM_X": {"total": 4.0, "min_unit": 2, "allocation_ratio": 1.5}}]},
             "traits": {"additional": ["CUSTOM_T"]}}]});
        let spec = file_value_to_spec(&v).unwrap();
        assert_eq!(spec.meta.schema_version, "1.0");
        let inv = &spec.providers[0].inventories.as_ref().unwrap().additional[0]["CUSTOM_X"];
        assert_eq!((inv.total, inv.min_unit), (4, Some(2)));
        let back = spec_to_file_value(&spec);
        assert_eq!(
            back["providers"][0]["inventories"]["additional"][0]["CUSTOM_X"]["min_unit"],
            2
        );
        assert_eq!(spec_entries(&spec, "pc").len(), 1);
    }
}
