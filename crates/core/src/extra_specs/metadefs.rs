//! Glance metadata definitions (metadefs) generated from the registry, in the format of
//! Glance's etc/metadefs: one namespace per file, with resource type associations that
//! say which prefix a property takes on flavors (`hw:`) and on images (`hw_`).
//!
//! A flavor extra spec and an image property with the same name after the prefix and the
//! same type go into one namespace associated with both; the rest go into flavor-only or
//! image-only namespaces. Keys with placeholders (`hw:numa_cpus.{num}`, the trait and
//! resource-class families, nested capabilities) cannot be written as metadef properties
//! and are left out; the reference documentation lists them.

use serde_json::{Map, Value, json};

use super::definition::{Definition, Support};
use super::docs::NAMESPACES;
use super::image_properties::{ImageProperty, ImageValue, image_properties};
use super::registry::Registry;
use super::value::ValueType;

/// One metadef namespace file.
#[derive(Debug, Clone)]
pub struct MetadefFile {
    pub file_name: String,
    pub namespace: Value,
}

fn title_of(name: &str) -> String {
    let words = name.replace(['_', ':'], " ");
    let mut c = words.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn flavor_property(d: &Definition) -> Value {
    let mut p = Map::new();
    let name = d.key.split_once(':').map_or(d.key.as_str(), |(_, n)| n);
    p.insert("title".into(), json!(title_of(name)));
    let mut description = d.description.clone();
    if let Support::Deprecated { replacement } = &d.support {
        description = match replacement {
            Some(r) => format!("Deprecated: use {r} instead. {description}"),
            None => format!("Deprecated. {description}"),
        };
    }
    if !d.virt_drivers.is_empty() {
        description.push_str(&format!(" Virt drivers: {}.", d.virt_drivers.join(", ")));
    }
    p.insert("description".into(), json!(description));
    p.insert("type".into(), json!(d.value.type_name()));
    match &d.value {
        ValueType::Enum(m) => {
            p.insert("enum".into(), json!(m));
        }
        ValueType::Pattern(pat) => {
            p.insert("pattern".into(), json!(format!("^(?:{})$", pat.source())));
        }
        ValueType::Int { min, max } => {
            if let Some(min) = min {
                p.insert("minimum".into(), json!(min));
            }
            if let Some(max) = max {
                p.insert("maximum".into(), json!(max));
            }
        }
        ValueType::String | ValueType::Bool => {}
    }
    Value::Object(p)
}

fn image_property(prefix: &str, ip: &ImageProperty) -> Value {
    let mut p = Map::new();
    let name = ip.name.strip_prefix(prefix).unwrap_or(ip.name);
    p.insert("title".into(), json!(title_of(name)));
    p.insert("description".into(), json!(ip.description));
    p.insert("type".into(), json!(ip.value.type_name()));
    if let ImageValue::Enum {
        members,
        fold: false,
        ..
    } = &ip.value
    {
        p.insert("enum".into(), json!(members));
    }
    Value::Object(p)
}

/// Whether a flavor definition and an image property accept the same kind of value.
fn same_kind(d: &Definition, ip: &ImageProperty) -> bool {
    match (&d.value, &ip.value) {
        (
            ValueType::Enum(a),
            ImageValue::Enum {
                members,
                fold: false,
                ..
            },
        ) => {
            let mut a: Vec<&str> = a.iter().map(String::as_str).collect();
            let mut b: Vec<&str> = members.to_vec();
            a.sort();
            b.sort();
            a == b
        }
        (ValueType::Enum(_), _) | (_, ImageValue::Enum { .. }) => false,
        (v, i) => v.type_name() == i.type_name(),
    }
}

fn association(name: &str, prefix: &str) -> Value {
    if prefix.is_empty() {
        json!({"name": name})
    } else {
        json!({"name": name, "prefix": prefix})
    }
}

fn image_associations(prefix: &str) -> Vec<Value> {
    vec![
        association("OS::Glance::Image", prefix),
        json!({"name": "OS::Cinder::Volume", "prefix": prefix, "properties_target": "image"}),
    ]
}

fn namespace(
    file_stem: &str,
    namespace: &str,
    display: &str,
    description: &str,
    associations: Vec<Value>,
    properties: Map<String, Value>,
) -> MetadefFile {
    MetadefFile {
        file_name: format!("{file_stem}.json"),
        namespace: json!({
            "namespace": namespace,
            "display_name": display,
            "description": description,
            "visibility": "public",
            "protected": true,
            "resource_type_associations": associations,
            "properties": properties,
        }),
    }
}

fn camel(ns: &str) -> String {
    ns.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
        })
        .collect()
}

/// Every metadef namespace file, in a stable order.
pub fn metadef_files() -> Vec<MetadefFile> {
    let registry = Registry::in_tree();
    let mut files = Vec::new();
    let images = image_properties();
    let mut image_used = vec![false; images.len()];
    for (ns, summary) in NAMESPACES {
        if ns == "trait" || ns == "resources" {
            continue;
        }
        let flavor_prefix = if ns.is_empty() {
            String::new()
        } else {
            format!("{ns}:")
        };
        let image_prefix = if ns.is_empty() {
            String::new()
        } else {
            format!("{ns}_")
        };
        let mut shared = Map::new();
        let mut flavor_only = Map::new();
        for d in registry
            .definitions()
            .iter()
            .filter(|d| d.namespace == ns && d.is_literal())
        {
            let name = d
                .key
                .strip_prefix(&flavor_prefix)
                .unwrap_or(&d.key)
                .to_string();
            let image = images.iter().position(|ip| {
                !ns.is_empty()
                    && ip.replaced_by.is_none()
                    && ip.name == format!("{image_prefix}{name}")
            });
            match image {
                Some(i) if same_kind(d, &images[i]) => {
                    image_used[i] = true;
                    shared.insert(name, flavor_property(d));
                }
                _ => {
                    flavor_only.insert(name, flavor_property(d));
                }
            }
        }
        let stem = if ns.is_empty() {
            "unprefixed".to_string()
        } else {
            ns.replace('_', "-")
        };
        let title = if ns.is_empty() {
            "Unprefixed".to_string()
        } else {
            camel(ns)
        };
        if !shared.is_empty() {
            let mut assoc = vec![association("OS::Nova::Flavor", &flavor_prefix)];
            assoc.extend(image_associations(&image_prefix));
            files.push(namespace(
                &format!("kubeplace-{stem}"),
                &format!("OS::Kubeplace::{title}"),
                &format!("{title} (flavors and images)"),
                &format!("{summary} Flavor extra specs {flavor_prefix}NAME and image properties {image_prefix}NAME that take the same values. Generated by kubeplace."),
                assoc,
                shared,
            ));
        }
        if !flavor_only.is_empty() {
            files.push(namespace(
                &format!("kubeplace-{stem}-flavor"),
                &format!("OS::Kubeplace::{title}::Flavor"),
                &format!("{title} (flavors)"),
                &format!("{summary} Flavor extra specs only. Generated by kubeplace."),
                vec![association("OS::Nova::Flavor", &flavor_prefix)],
                flavor_only,
            ));
        }
    }
    for (prefix, title, summary) in [
        (
            "hw_",
            "Hw",
            "Guest hardware properties of images that have no flavor counterpart of the same kind.",
        ),
        (
            "img_",
            "Img",
            "Image handling: signatures, caching, block device mappings, hypervisor requirements.",
        ),
        ("os_", "Os", "The guest operating system and its agent."),
    ] {
        let mut props = Map::new();
        for (i, ip) in images.iter().enumerate() {
            if !image_used[i]
                && ip.replaced_by.is_none()
                && ip.name.starts_with(prefix)
                && !ip.name.contains('{')
            {
                props.insert(
                    ip.name[prefix.len()..].to_string(),
                    image_property(prefix, ip),
                );
            }
        }
        files.push(namespace(
            &format!("kubeplace-{}-image", prefix.trim_end_matches('_')),
            &format!("OS::Kubeplace::{title}::Image"),
            &format!("{title} (images)"),
            &format!("{summary} Image properties only. Generated by kubeplace."),
            image_associations(prefix),
            props,
        ));
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_namespaces_have_both_prefixes() {
        let files = metadef_files();
        let hw = files
            .iter()
            .find(|f| f.file_name == "kubeplace-hw.json")
            .unwrap();
        let assoc = hw.namespace["resource_type_associations"]
            .as_array()
            .unwrap();
        assert!(assoc.contains(&json!({"name": "OS::Nova::Flavor", "prefix": "hw:"})));
        assert!(assoc.contains(&json!({"name": "OS::Glance::Image", "prefix": "hw_"})));
        assert_eq!(
            hw.namespace["properties"]["cpu_policy"]["enum"],
            json!(["dedicated", "shared", "mixed"])
        );
        let flavor_hw = files
            .iter()
            .find(|f| f.file_name == "kubeplace-hw-flavor.json")
            .unwrap();
        assert!(
            flavor_hw.namespace["properties"]
                .get("cpu_realtime")
                .is_some()
        );
        assert_eq!(
            hw.namespace["properties"]["redirected_usb_ports"]["maximum"],
            15
        );
        let os_flavor = files
            .iter()
            .find(|f| f.file_name == "kubeplace-os-flavor.json")
            .unwrap();
        assert!(
            os_flavor.namespace["properties"]
                .get("secure_boot")
                .is_some(),
            "enums differ from the image's"
        );
        let img = files
            .iter()
            .find(|f| f.file_name == "kubeplace-img-image.json")
            .unwrap();
        assert!(img.namespace["properties"].get("config_drive").is_some());
    }
}
