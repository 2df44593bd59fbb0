//! Aggregate admission: a uuid of its own, a zone name Nova would take, namespaces that
//! can exist, and traits that can exist.

use std::collections::BTreeSet;

use super::Review;
use crate::store::Store;
use kubeplace_api::{Aggregate, Kind, Object};
use kubeplace_core::placement::{check_trait, is_uuid};

/// Longest availability zone name Nova takes (its aggregate metadata values).
const ZONE_MAX: usize = 255;

/// Whether `s` is a namespace name: an RFC 1123 label.
fn is_namespace_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

pub(super) fn review(aggregate: &Aggregate, store: &Store, review: &mut Review) {
    let spec = &aggregate.spec;
    let name = aggregate.metadata.name.as_deref().unwrap_or("");
    if !is_uuid(&spec.uuid) {
        review.problem(format!(
            "spec.uuid {:?} is not a uuid; use the form 8-4-4-4-12 hex digits (the uuid providers list in spec.aggregates)",
            spec.uuid
        ));
    } else {
        let other = store.list(Kind::Aggregate).find_map(|o| match o {
            Object::Aggregate(a)
                if a.metadata.name.as_deref() != Some(name)
                    && a.spec.uuid.eq_ignore_ascii_case(&spec.uuid) =>
            {
                a.metadata.name.clone()
            }
            _ => None,
        });
        if let Some(other) = other {
            review.problem(format!(
                "spec.uuid {} is already the uuid of Aggregate {other:?}; every aggregate needs its own",
                spec.uuid
            ));
        }
    }
    if let Some(zone) = &spec.availability_zone {
        if zone.trim().is_empty() {
            review.problem("spec.availabilityZone is empty; name the zone or leave the field out");
        } else if zone.contains(':') {
            review.problem(format!(
                "spec.availabilityZone {zone:?} contains ':', which Nova does not allow in a zone name"
            ));
        } else if zone.len() > ZONE_MAX {
            review.problem(format!(
                "spec.availabilityZone is {} bytes long; at most {ZONE_MAX} are allowed",
                zone.len()
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for tenant in &spec.tenants {
        if !is_namespace_name(tenant) {
            review.problem(format!(
                "spec.tenants: {tenant:?} is not a namespace name (lowercase letters, digits and '-', at most 63)"
            ));
        }
        if !seen.insert(tenant) {
            review.problem(format!("spec.tenants: {tenant:?} is listed twice"));
        }
    }
    if spec.confine_tenants && spec.tenants.is_empty() {
        review.problem("spec.confineTenants is true but spec.tenants is empty; list the namespaces to confine, or leave confineTenants out");
    }
    for t in &spec.required_traits {
        if let Err(e) = check_trait(t) {
            review.problem(format!("spec.requiredTraits: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::admit_and_store;
    use crate::store::Store;
    use kubeplace_api::manifest::parse_stream;

    fn admit(store: &mut Store, spec: &str) -> (bool, String) {
        let yaml = format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Aggregate\nmetadata: {{name: a}}\nspec: {spec}\n"
        );
        let object = parse_stream("a.yaml", &yaml)
            .unwrap()
            .remove(0)
            .object()
            .unwrap()
            .unwrap();
        let v = admit_and_store(store, object);
        (v.allowed, v.message)
    }

    const UUID: &str = "a0000000-0000-4000-8000-000000000001";

    #[test]
    fn a_good_aggregate_is_admitted() {
        let mut store = Store::default();
        let (ok, message) = admit(
            &mut store,
            &format!(
                "{{uuid: {UUID}, availabilityZone: az1, tenants: [shop, research], confineTenants: true, requiredTraits: [CUSTOM_GOLD, HW_CPU_X86_AVX2]}}"
            ),
        );
        assert!(ok, "{message}");
    }

    #[test]
    fn bad_fields_are_named_with_what_is_accepted() {
        for (spec, words) in [
            (
                "{uuid: not-a-uuid}",
                "spec.uuid \"not-a-uuid\" is not a uuid",
            ),
            (
                &format!("{{uuid: {UUID}, availabilityZone: 'a:b'}}") as &str,
                "spec.availabilityZone \"a:b\" contains ':'",
            ),
            (
                &format!("{{uuid: {UUID}, availabilityZone: ' '}}"),
                "spec.availabilityZone is empty",
            ),
            (
                &format!("{{uuid: {UUID}, tenants: [Shop]}}"),
                "spec.tenants: \"Shop\" is not a namespace name",
            ),
            (
                &format!("{{uuid: {UUID}, tenants: [shop, shop]}}"),
                "spec.tenants: \"shop\" is listed twice",
            ),
            (
                &format!("{{uuid: {UUID}, confineTenants: true}}"),
                "spec.confineTenants is true but spec.tenants is empty",
            ),
            (
                &format!("{{uuid: {UUID}, requiredTraits: [GOLD]}}"),
                "spec.requiredTraits:",
            ),
        ] {
            let (ok, message) = admit(&mut Store::default(), spec);
            assert!(!ok, "{spec} was admitted");
            assert!(message.contains(words), "{spec}: {message}");
        }
    }

    #[test]
    fn two_aggregates_cannot_share_a_uuid() {
        let mut store = Store::default();
        assert!(admit(&mut store, &format!("{{uuid: {UUID}}}")).0);
        let yaml = format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Aggregate\nmetadata: {{name: b}}\nspec: {{uuid: {}}}\n",
            UUID.to_uppercase()
        );
        let object = parse_stream("b.yaml", &yaml)
            .unwrap()
            .remove(0)
            .object()
            .unwrap()
            .unwrap();
        let v = admit_and_store(&mut store, object);
        assert!(!v.allowed);
        assert!(
            v.message.contains("is already the uuid of Aggregate \"a\""),
            "{}",
            v.message
        );
        // The same object again is an update of itself, not a clash.
        assert!(
            admit(
                &mut store,
                &format!("{{uuid: {UUID}, availabilityZone: z}}")
            )
            .0
        );
    }
}
