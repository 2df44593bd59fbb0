//! The ProviderConfig entries in the store, as the provider config merge reads them.

use kubeplace_api::Kind;
use kubeplace_api::{Object, ProviderConfig};
use kubeplace_core::provider_config::ConfigEntry;

/// Every ProviderConfig entry as a core record, configs in name order.
pub(crate) fn config_entries(store: &super::Store) -> Vec<ConfigEntry> {
    store
        .list(Kind::ProviderConfig)
        .filter_map(|o| match o {
            Object::ProviderConfig(pc) => Some(entries_of(pc)),
            _ => None,
        })
        .flatten()
        .collect()
}

/// A ProviderConfig's entries as the provider config core reads them (Nova's rules: entries
/// with nothing additional are dropped; `name: $COMPUTE_NODE` targets compute nodes).
fn entries_of(pc: &ProviderConfig) -> Vec<ConfigEntry> {
    crate::translate::provider_config::spec_entries(
        &pc.spec,
        pc.metadata.name.as_deref().unwrap_or(""),
    )
}
