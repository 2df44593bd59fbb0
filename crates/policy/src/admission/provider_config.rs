//! ProviderConfig admission: every rule Nova's loader applies to a provider config file (the
//! same checks as `kubeplace provider-config validate`, from the provider config core), plus
//! the rules that need the rest of the cluster: an identification already claimed by another
//! ProviderConfig, and an inventory of a class the identified provider already has.

use super::Review;
use crate::store::Store;
use crate::translate::provider_config::{check_spec, spec_entries};
use kubeplace_api::{Object, ProviderConfig};
use kubeplace_core::provider_config::{ConfigEntry, merge};

use kubeplace_api::Kind;
pub use kubeplace_core::provider_config::{COMPUTE_NODE_ID, identification_key};

pub(super) fn review(pc: &ProviderConfig, store: &Store, review: &mut Review) {
    let me = pc.metadata.name.as_deref().unwrap_or("");
    let checked = check_spec(&pc.spec);
    for p in &checked.errors {
        review.problem(p.to_string());
    }
    for w in &checked.warnings {
        review.warn(w.to_string());
    }
    // Other ProviderConfigs, in name order, and the identifications they claim.
    let others: Vec<(&str, &ProviderConfig)> = store
        .list(Kind::ProviderConfig)
        .filter_map(|o| match o {
            Object::ProviderConfig(other) if o.name() != me => Some((o.name(), other)),
            _ => None,
        })
        .collect();
    for entry in checked.kept() {
        let claim = others.iter().find_map(|(name, other)| {
            check_spec(&other.spec)
                .kept()
                .find(|e| e.key == entry.key)
                .map(|e| (*name, e.index, e.written.clone()))
        });
        if let Some((owner, index, written)) = claim {
            review.problem(format!(
                "provider {i} ({mine}): spec.providers[{i}].identification: {key:?} is already identified by ProviderConfig {owner:?} (spec.providers[{index}], {written}); ProviderConfig {me:?} and ProviderConfig {owner:?} cannot both configure it, as each provider is identified once across all provider configs",
                i = entry.index,
                mine = entry.written,
                key = entry.key,
            ));
        }
    }
    if !checked.is_valid() {
        return;
    }
    // Merge as the cluster would with this object stored, and keep what concerns it.
    let mut configs: Vec<(&str, Vec<ConfigEntry>)> = others
        .iter()
        .map(|(name, other)| (*name, spec_entries(&other.spec, name)))
        .collect();
    configs.push((me, checked.kept().map(|e| e.to_config_entry(me)).collect()));
    configs.sort_by(|a, b| a.0.cmp(b.0));
    let entries: Vec<ConfigEntry> = configs.into_iter().flat_map(|(_, e)| e).collect();
    let result = merge(store.index(), &entries);
    let Some(outcome) = result.configs.get(me) else {
        return;
    };
    for c in &outcome.inventory_conflicts {
        let written = checked
            .entries
            .iter()
            .find(|e| e.index == c.position)
            .map_or(String::new(), |e| e.written.clone());
        let item = pc.spec.providers[c.position]
            .inventories
            .iter()
            .flat_map(|i| i.additional.iter().enumerate())
            .filter(|(_, m)| m.contains_key(&c.class))
            .map(|(j, _)| j)
            .next_back()
            .unwrap_or(0);
        review.problem(format!(
            "provider {p} ({written}): spec.providers[{p}].inventories.additional[{item}].{class}: provider {provider:?} already has {class} inventory in its own spec (managed by the virt driver); a provider config may only add resource classes the provider does not have",
            p = c.position,
            class = c.class,
            provider = c.provider,
        ));
    }
    for c in outcome
        .conflicts
        .iter()
        .filter(|c| !c.contains("inventory of its own"))
    {
        review.warn(c.clone());
    }
}

#[cfg(test)]
mod tests {
    use crate::admission::{Operation, Verdict, admit};
    use crate::store::Store;
    use kubeplace_api::Object;

    use crate::test_objects::object;

    fn provider(name: &str, classes: &[&str]) -> Object {
        let inventories: String = classes
            .iter()
            .map(|c| format!("    {c}:\n      total: 8\n"))
            .collect();
        object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: {name}\nspec:\n  traits: [COMPUTE_NODE]\n  inventories:\n{inventories}"
        ))
    }

    fn config(name: &str, providers: &str) -> Object {
        object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: {name}\nspec:\n  meta:\n    schemaVersion: '1.0'\n  providers:\n{providers}"
        ))
    }

    fn entry(id: &str, class: Option<&str>, t: &str) -> String {
        let inv = class
            .map(|c| {
                format!("    inventories:\n      additional:\n      - {c}:\n          total: 4\n")
            })
            .unwrap_or_default();
        format!("  - identification:\n      {id}\n{inv}    traits:\n      additional: [{t}]\n")
    }

    fn review(store: &Store, o: &Object) -> Verdict {
        admit(Operation::Create, o, None, store)
    }

    #[test]
    fn the_file_rules_apply_with_spec_paths() {
        let v = review(
            &Store::default(),
            &config("pc", &entry("name: cn1", Some("VCPU"), "HW_CPU_X86_AVX2")),
        );
        assert!(!v.allowed);
        assert_eq!(
            v.message,
            "ProviderConfig \"pc\" has 2 problems: provider 0 (name cn1): spec.providers[0].inventories.additional[0].VCPU: resource class \"VCPU\" is not CUSTOM_[A-Z0-9_]+; a provider config may only add custom resource classes (the standard ones belong to the virt driver); provider 0 (name cn1): spec.providers[0].traits.additional[0]: trait \"HW_CPU_X86_AVX2\" is not CUSTOM_[A-Z0-9_]+; a provider config may only add custom traits (the standard ones belong to the virt driver)"
        );
        let v = review(
            &Store::default(),
            &config(
                "pc",
                &format!(
                    "{}{}",
                    entry("uuid: $COMPUTE_NODE", None, "CUSTOM_A"),
                    entry("name: $COMPUTE_NODE", None, "CUSTOM_B")
                ),
            ),
        );
        assert!(v.message.contains("spec.providers[1].identification: \"$COMPUTE_NODE\" is already identified by spec.providers[0] (uuid $COMPUTE_NODE)"), "{}", v.message);
    }

    #[test]
    fn an_identification_claimed_by_another_config_names_both() {
        let mut store = Store::default();
        store.apply(config("first", &entry("name: cn1", None, "CUSTOM_A")));
        let v = review(
            &store,
            &config("second", &entry("name: cn1", None, "CUSTOM_B")),
        );
        assert!(!v.allowed);
        assert!(v.message.contains("provider 0 (name cn1): spec.providers[0].identification: \"cn1\" is already identified by ProviderConfig \"first\" (spec.providers[0], name cn1); ProviderConfig \"second\" and ProviderConfig \"first\" cannot both configure it"), "{}", v.message);
        // Updating the claiming object itself is fine.
        let again = config("first", &entry("name: cn1", None, "CUSTOM_C"));
        assert!(admit(Operation::Update, &again, None, &store).allowed);
        // An entry with nothing additional claims nothing (as Nova drops it), with a warning.
        let quiet = config("quiet", "  - identification:\n      name: cn1\n");
        let v = review(&store, &quiet);
        assert!(v.allowed, "{}", v.message);
        assert!(
            v.warnings[0]
                .contains("the entry has no additional inventories or traits; it is ignored"),
            "{:?}",
            v.warnings
        );
    }

    #[test]
    fn an_inventory_the_provider_already_has_is_rejected() {
        let mut store = Store::default();
        store.apply(provider("cn1", &["VCPU", "CUSTOM_LLC"]));
        store.apply(provider("cn2", &["VCPU"]));
        let v = review(
            &store,
            &config("pc", &entry("name: cn1", Some("CUSTOM_LLC"), "CUSTOM_A")),
        );
        assert!(!v.allowed);
        assert!(v.message.contains("provider 0 (name cn1): spec.providers[0].inventories.additional[0].CUSTOM_LLC: provider \"cn1\" already has CUSTOM_LLC inventory in its own spec (managed by the virt driver)"), "{}", v.message);
        // $COMPUTE_NODE reaches cn1 too...
        let v = review(
            &store,
            &config(
                "pc",
                &entry("uuid: $COMPUTE_NODE", Some("CUSTOM_LLC"), "CUSTOM_A"),
            ),
        );
        assert!(
            v.message
                .contains("provider \"cn1\" already has CUSTOM_LLC"),
            "{}",
            v.message
        );
        // ... unless another config identifies cn1 explicitly.
        store.apply(config("cn1-only", &entry("name: cn1", None, "CUSTOM_ONE")));
        let v = review(
            &store,
            &config(
                "pc",
                &entry("uuid: $COMPUTE_NODE", Some("CUSTOM_LLC"), "CUSTOM_A"),
            ),
        );
        assert!(v.allowed, "{}", v.message);
        // A provider that does not exist yet is no reason to reject.
        let v = review(
            &store,
            &config("later", &entry("name: cn9", Some("CUSTOM_LLC"), "CUSTOM_A")),
        );
        assert!(v.allowed, "{}", v.message);
    }

    #[test]
    fn the_same_provider_by_name_and_uuid_is_a_warning_at_admission() {
        let mut store = Store::default();
        store.apply(provider("cn1", &["VCPU"]));
        let uuid = kubeplace_core::placement::derived_provider_uuid("cn1");
        store.apply(config("a", &entry("name: cn1", None, "CUSTOM_A")));
        let v = review(
            &store,
            &config("b", &entry(&format!("uuid: {uuid}"), None, "CUSTOM_B")),
        );
        assert!(v.allowed, "{}", v.message);
        assert!(
            v.warnings.iter().any(|w| w.contains(
                "reaches provider \"cn1\", already configured by a providers[0] (name cn1); ignored"
            )),
            "{:?}",
            v.warnings
        );
    }
}
