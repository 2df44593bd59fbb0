//! The provider config merge as the store keeps it: every ProviderConfig merged over the
//! providers, what each adds handed to the index, and merged again (for the providers a change
//! reached, where that gives the answer a full merge would) after a provider or a config
//! changes.

use kubeplace_api::{Kind, Object};
use kubeplace_core::provider_config::{MergeResult, ProviderFacts, merge, merge_changed};

use super::records::config_entries;
use super::{ObjectKey, Store};

impl Store {
    /// The merge of every ProviderConfig into the providers.
    pub(crate) fn config_merge(&self) -> &MergeResult {
        &self.config_merge
    }

    /// Re-merges provider configs after providers alone changed (`changed`: each one's name
    /// and what the merge read of it before; see [`merge_changed`]), working out only
    /// theirs where that gives the answer a full merge would, else as
    /// [`Self::refresh_config_merge`].
    pub(super) fn refresh_config_merge_for(
        &mut self,
        changed: &[(String, Option<ProviderFacts>)],
    ) -> Vec<String> {
        let entries = config_entries(self);
        let Some(moved) = merge_changed(&mut self.config_merge, &self.index, &entries, changed)
        else {
            return self.refresh_config_merge();
        };
        // Every changed provider's additions are handed to the index, moved or not: one
        // stored anew, or stored again over a version that had the class as its own, holds
        // other additions than its merge outcome (the index skips those that are the same).
        let names: std::collections::BTreeSet<&str> =
            changed.iter().map(|(name, _)| name.as_str()).collect();
        for name in names {
            self.hand_config_additions(name);
        }
        moved
    }

    /// Gives the index what the current merge adds to a provider (nothing, when no entry
    /// reaches it); the index skips additions it already has.
    pub(super) fn hand_config_additions(&mut self, name: &str) {
        let (inventories, traits) = self
            .config_merge
            .providers
            .get(name)
            .map(|e| (e.inventories.clone(), e.traits.clone()))
            .unwrap_or_default();
        self.index_mut()
            .set_config_additions(name, &inventories, &traits);
    }

    /// Re-merges provider configs after a provider or config changed, and puts what they add
    /// into the index so candidate search and capacity checks see it. The providers whose
    /// merge outcome (additions, configs applied, conflicts) changed, in name order.
    pub(super) fn refresh_config_merge(&mut self) -> Vec<String> {
        let merged = merge(&self.index, &config_entries(self));
        let touched: std::collections::BTreeSet<String> = self
            .config_merge
            .providers
            .keys()
            .chain(merged.providers.keys())
            .cloned()
            .collect();
        let moved: Vec<String> = touched
            .iter()
            .filter(|name| self.config_merge.providers.get(*name) != merged.providers.get(*name))
            .cloned()
            .collect();
        self.config_merge = merged;
        // Given to the index even when the outcome is the same: a provider stored again
        // meanwhile may have lost what configs added.
        for name in &touched {
            self.hand_config_additions(name);
        }
        moved
    }

    pub(super) fn after_change(&mut self, kind: Kind) {
        // The merge reads the ProviderConfigs' entries: with none at the last merge, a
        // provider's change cannot make it other than empty (a file of providers and no
        // configs would otherwise merge again after each one).
        let nothing_to_merge =
            kind == Kind::ResourceProvider && self.config_merge.configs.is_empty();
        if changes_merge(kind) && !nothing_to_merge {
            self.refresh_config_merge();
        }
    }
}

/// Whether a change of this kind changes the provider config merge.
pub(super) fn changes_merge(kind: Kind) -> bool {
    matches!(kind, Kind::ResourceProvider | Kind::ProviderConfig)
}

/// Notes a change the provider config merge reads: a provider's, with what the merge read of
/// it before (`old`), or a ProviderConfig's, after which every provider is merged again.
pub(super) fn note_merge_change(
    changed: &mut Option<Vec<(String, Option<ProviderFacts>)>>,
    key: &ObjectKey,
    old: Option<&Object>,
) {
    let Some(list) = changed else { return };
    if key.kind != Kind::ResourceProvider {
        *changed = None;
        return;
    }
    let facts = match old {
        Some(Object::ResourceProvider(rp)) => Some(ProviderFacts {
            uuid: crate::translate::provider_uuid(rp),
        }),
        _ => None,
    };
    list.push((key.name.clone(), facts));
}
