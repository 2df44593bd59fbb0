//! A service's endpoint in the catalog of a Keystone token (`token.catalog`), chosen as
//! OpenStack clients choose it: the service type, then the first of the wanted interfaces
//! that has an endpoint, within the wanted region when one is named.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

/// The interfaces tried, in order, when the section names none.
pub const DEFAULT_INTERFACES: &[&str] = &["internal", "public"];

/// What is looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub service_type: String,
    /// Tried in order.
    pub interfaces: Vec<String>,
    /// Any region when `None`.
    pub region: Option<String>,
}

impl Wanted {
    /// Placement's endpoint, in the section's interfaces (default internal, then public)
    /// and region.
    pub fn placement(config: &super::config::KeystoneConfig) -> Wanted {
        Wanted {
            service_type: "placement".into(),
            interfaces: if config.interfaces.is_empty() {
                DEFAULT_INTERFACES.iter().map(|i| i.to_string()).collect()
            } else {
                config.interfaces.clone()
            },
            region: config.region_name.clone(),
        }
    }
}

/// The catalog has no endpoint that fits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotInCatalog {
    pub wanted: Wanted,
    /// The service types the catalog lists.
    pub types: BTreeSet<String>,
    /// The wanted type's endpoints, as `interface in region`.
    pub endpoints: BTreeSet<String>,
}

impl fmt::Display for NotInCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = &self.wanted;
        let region = w
            .region
            .as_ref()
            .map(|r| format!(" in region {r}"))
            .unwrap_or_default();
        let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
        if self.endpoints.is_empty() {
            let offered = if self.types.is_empty() {
                "the catalog is empty".to_string()
            } else if self.types.contains(&w.service_type) {
                format!(
                    "the catalog lists the service {} without endpoints (its service types: {})",
                    w.service_type,
                    list(&self.types)
                )
            } else {
                format!("the catalog's service types: {}", list(&self.types))
            };
            write!(
                f,
                "Keystone's service catalog has no {} endpoint (looked for interface {}{region}); {offered}",
                w.service_type,
                w.interfaces.join(" or "),
            )
        } else {
            write!(
                f,
                "Keystone's service catalog has no {} endpoint for interface {}{region}; it has {} endpoints for {} (set interface or valid_interfaces, and region_name, in [keystone_authtoken] to one of them)",
                w.service_type,
                w.interfaces.join(" or "),
                w.service_type,
                list(&self.endpoints)
            )
        }
    }
}

/// The URL of the endpoint `wanted` names in `catalog` (a v3 catalog: a list of services
/// with `type` and `endpoints` of `interface`, `region_id` or `region`, and `url`).
pub fn endpoint(catalog: &Value, wanted: &Wanted) -> Result<String, NotInCatalog> {
    let services = catalog.as_array().map(Vec::as_slice).unwrap_or_default();
    let types: BTreeSet<String> = services
        .iter()
        .filter_map(|s| s["type"].as_str().map(str::to_string))
        .collect();
    let endpoints: Vec<&Value> = services
        .iter()
        .filter(|s| s["type"].as_str() == Some(wanted.service_type.as_str()))
        .flat_map(|s| {
            s["endpoints"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
        })
        .collect();
    let region_of = |e: &Value| {
        e["region_id"]
            .as_str()
            .or(e["region"].as_str())
            .map(str::to_string)
    };
    for interface in &wanted.interfaces {
        let found = endpoints.iter().find(|e| {
            e["interface"].as_str() == Some(interface.as_str())
                && wanted.region.as_ref().is_none_or(|r| {
                    region_of(e).as_ref() == Some(r) || e["region"].as_str() == Some(r.as_str())
                })
        });
        if let Some(url) = found.and_then(|e| e["url"].as_str()) {
            return Ok(url.to_string());
        }
    }
    Err(NotInCatalog {
        wanted: wanted.clone(),
        types,
        endpoints: endpoints
            .iter()
            .map(|e| {
                format!(
                    "{} in {}",
                    e["interface"].as_str().unwrap_or("no interface"),
                    region_of(e).unwrap_or_else(|| "no region".into())
                )
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn catalog() -> Value {
        json!([
            {"type": "identity", "name": "keystone", "endpoints": [
                {"interface": "public", "region_id": "RegionOne", "region": "RegionOne", "url": "http://k:5000/v3"}]},
            {"type": "placement", "name": "placement", "endpoints": [
                {"interface": "public", "region_id": "RegionOne", "url": "https://cloud/placement"},
                {"interface": "internal", "region_id": "RegionOne", "url": "http://10.0.0.5:8778"},
                {"interface": "public", "region_id": "RegionTwo", "url": "https://two/placement"}]},
        ])
    }

    fn wanted(interfaces: &[&str], region: Option<&str>) -> Wanted {
        Wanted {
            service_type: "placement".into(),
            interfaces: interfaces.iter().map(|s| s.to_string()).collect(),
            region: region.map(str::to_string),
        }
    }

    #[test]
    fn the_first_wanted_interface_with_an_endpoint_in_the_region_wins() {
        let c = catalog();
        assert_eq!(
            endpoint(&c, &wanted(DEFAULT_INTERFACES, None)).unwrap(),
            "http://10.0.0.5:8778"
        );
        assert_eq!(
            endpoint(&c, &wanted(&["public"], Some("RegionTwo"))).unwrap(),
            "https://two/placement"
        );
        // Internal is first, but RegionTwo has only a public endpoint.
        assert_eq!(
            endpoint(&c, &wanted(DEFAULT_INTERFACES, Some("RegionTwo"))).unwrap(),
            "https://two/placement"
        );
    }

    #[test]
    fn what_is_missing_is_said_with_what_the_catalog_has() {
        let c = catalog();
        let e = endpoint(&c, &wanted(&["admin"], Some("RegionOne")))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no placement endpoint for interface admin in region RegionOne")
                && e.contains("internal in RegionOne, public in RegionOne, public in RegionTwo"),
            "{e}"
        );
        let e = endpoint(&c, &wanted(DEFAULT_INTERFACES, Some("RegionThree")))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("interface internal or public in region RegionThree"),
            "{e}"
        );
        let e = endpoint(&c, &wanted(&["public"], None))
            .map(|_| ())
            .and(endpoint(
                &json!([{"type": "identity", "endpoints": []}, {"type": "compute"}]),
                &wanted(DEFAULT_INTERFACES, None),
            ))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no placement endpoint (looked for interface internal or public)")
                && e.contains("service types: compute, identity"),
            "{e}"
        );
        let e = endpoint(
            &json!([{"type": "identity"}, {"type": "placement", "endpoints": []}]),
            &wanted(DEFAULT_INTERFACES, None),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("lists the service placement without endpoints (its service types: identity, placement)"),
            "{e}"
        );
        let e = endpoint(&Value::Null, &wanted(DEFAULT_INTERFACES, None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("the catalog is empty"), "{e}");
    }
}
