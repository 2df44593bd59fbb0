//! Capacity gauges, worked out from the store when `/metrics` is scraped (so a provider,
//! Flavor or quota that is gone leaves no series behind): per host and class under
//! openstack-exporter's names and labels (`openstack_placement_resource_total`, `…_reserved`,
//! `…_allocation_ratio`, `…_usage` by `hostname` and `resourcetype`), so that dashboards
//! and alerts made for it work unchanged; per zone and class; each Flavor's headroom and
//! candidates; each project's usage against each limit of its quota.
//!
//! Only the leader reports them (every replica's store holds the same figures; one copy
//! keeps `sum()` right). How many host series there are is bounded: one set per tree root
//! by default, per provider or none with `--capacity-metrics`, and at most
//! `--capacity-metrics-max-hosts` hosts, the first by name (docs/observability.md).

use std::collections::BTreeMap;

use clap::ValueEnum;
use kubeplace_policy::capacity::{self, Amounts, FlavorRoom, Host, ProjectUse, Scope};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, EncodeLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::cache::SharedStore;

/// Which hosts get openstack-exporter's per-host series.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CapacityMetrics {
    /// One per tree root, its tree's inventories summed by class: a compute node with
    /// its NUMA cells and devices, a sharing provider on its own.
    #[default]
    Hosts,
    /// One per provider, its own inventories: what openstack-exporter reports of Placement.
    Providers,
    /// None: per zone and class only.
    Off,
}

/// How capacity is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapacitySettings {
    pub per: CapacityMetrics,
    /// Hosts (or providers) reported at most; the rest are counted in
    /// `kubeplace_capacity_hosts_omitted`.
    pub max_hosts: usize,
}

/// Hosts reported by default at most: per-host series are about four per class per host.
pub const DEFAULT_MAX_HOSTS: usize = 20_000;

impl Default for CapacitySettings {
    fn default() -> Self {
        CapacitySettings {
            per: CapacityMetrics::Hosts,
            max_hosts: DEFAULT_MAX_HOSTS,
        }
    }
}

/// Where capacity is read from at each scrape.
pub(super) struct CapacitySource {
    pub(super) store: SharedStore,
    pub(super) settings: CapacitySettings,
}

impl CapacitySource {
    /// Appends the capacity gauges to `out`, in the text format, without `# EOF`.
    pub(super) fn encode(&self, out: &mut String) {
        let snapshot = {
            let Ok(store) = self.store.read() else {
                return;
            };
            Snapshot::of(&store, self.settings)
        };
        let mut registry = Registry::default();
        registry.register_collector(Box::new(snapshot));
        let _ = prometheus_client::encoding::text::encode_registry(out, &registry);
    }
}

/// The figures of one scrape.
#[derive(Debug)]
pub(super) struct Snapshot {
    hosts: Vec<Host>,
    omitted: usize,
    zones: BTreeMap<(String, String), Amounts>,
    zone_hosts: BTreeMap<String, usize>,
    flavors: Vec<FlavorRoom>,
    projects: Vec<ProjectUse>,
}

impl Snapshot {
    pub(super) fn of(
        store: &kubeplace_policy::store::Store,
        settings: CapacitySettings,
    ) -> Snapshot {
        // One walk over the providers, whichever series are on.
        let (trees, providers) = match settings.per {
            CapacityMetrics::Providers => capacity::trees_and_providers(store),
            _ => (capacity::hosts(store, Scope::Trees), Vec::new()),
        };
        let zones = capacity::zones(&trees);
        let mut zone_hosts: BTreeMap<String, usize> = BTreeMap::new();
        for tree in &trees {
            *zone_hosts.entry(tree.zone.clone()).or_default() += 1;
        }
        let mut hosts = match settings.per {
            CapacityMetrics::Hosts => trees,
            CapacityMetrics::Providers => providers,
            CapacityMetrics::Off => Vec::new(),
        };
        let omitted = hosts.len().saturating_sub(settings.max_hosts);
        hosts.truncate(settings.max_hosts);
        Snapshot {
            hosts,
            omitted,
            zones,
            zone_hosts,
            flavors: capacity::flavors(store),
            projects: capacity::projects(store),
        }
    }
}

/// One gauge family: its name, help and a series per label set.
fn gauge<L: EncodeLabelSet, V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    series: impl Iterator<Item = (L, V)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        family.encode_family(&labels)?.encode_gauge(&value)?;
    }
    Ok(())
}

/// One series per host and resource class, labelled as openstack-exporter labels them, with
/// the value `pick` takes from the class's amounts.
fn host_series<V>(
    hosts: &[Host],
    pick: fn(&Amounts) -> V,
) -> impl Iterator<Item = ([(&'static str, &str); 2], V)> {
    hosts.iter().flat_map(move |h| {
        h.classes.iter().map(move |(class, a)| {
            (
                [
                    ("hostname", h.shown_name.as_str()),
                    ("resourcetype", class.as_str()),
                ],
                pick(a),
            )
        })
    })
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        gauge(
            &mut encoder,
            "openstack_placement_resource_total",
            "Inventory total of a resource class on a host (openstack-exporter's name)",
            host_series(&self.hosts, |a| a.total),
        )?;
        gauge(
            &mut encoder,
            "openstack_placement_resource_reserved",
            "Inventory reserved of a resource class on a host (openstack-exporter's name)",
            host_series(&self.hosts, |a| a.reserved),
        )?;
        gauge(
            &mut encoder,
            "openstack_placement_resource_usage",
            "Amount of a resource class claims hold on a host (openstack-exporter's name)",
            host_series(&self.hosts, |a| a.used),
        )?;
        gauge(
            &mut encoder,
            "openstack_placement_resource_allocation_ratio",
            "Allocation ratio of a resource class on a host; for a tree, the one that makes (total - reserved) * ratio its capacity (openstack-exporter's name)",
            host_series(&self.hosts, |a| a.allocation_ratio),
        )?;
        gauge(
            &mut encoder,
            "kubeplace_capacity_hosts_omitted",
            "Hosts (or providers) left out of the per-host series by --capacity-metrics-max-hosts",
            std::iter::once(([("scope", "hosts")], self.omitted as i64)),
        )?;
        let zone_series = |pick: fn(&Amounts) -> i64| {
            self.zones.iter().map(move |((zone, class), a)| {
                (
                    [("zone", zone.as_str()), ("resourcetype", class.as_str())],
                    pick(a),
                )
            })
        };
        gauge(
            &mut encoder,
            "kubeplace_zone_capacity",
            "What claims may take of a resource class in an availability zone: (total - reserved) * allocation ratio, summed over its hosts",
            zone_series(|a| a.capacity),
        )?;
        gauge(
            &mut encoder,
            "kubeplace_zone_usage",
            "What claims hold of a resource class in an availability zone",
            zone_series(|a| a.used),
        )?;
        gauge(
            &mut encoder,
            "kubeplace_zone_hosts",
            "Hosts (provider trees) in an availability zone",
            self.zone_hosts
                .iter()
                .map(|(zone, n)| ([("zone", zone.as_str())], *n as i64)),
        )?;
        gauge(
            &mut encoder,
            "kubeplace_flavor_headroom",
            "Servers of a Flavor that still fit, as its status last counted them (at least that many when capped)",
            self.flavors
                .iter()
                .filter_map(|f| Some(([("flavor", f.name.as_str())], f.headroom?))),
        )?;
        gauge(
            &mut encoder,
            "kubeplace_flavor_headroom_capped",
            "1 when a Flavor's headroom count stopped at --headroom-cap",
            self.flavors
                .iter()
                .filter(|f| f.headroom.is_some())
                .map(|f| ([("flavor", f.name.as_str())], i64::from(f.capped))),
        )?;
        gauge(
            &mut encoder,
            "kubeplace_flavor_candidates",
            "Allocation candidates of a Flavor, as its status shows them",
            self.flavors
                .iter()
                .filter_map(|f| Some(([("flavor", f.name.as_str())], f.candidates?))),
        )?;
        let quota_series = |pick: fn(&ProjectUse) -> i64| {
            self.projects.iter().map(move |p| {
                (
                    [
                        ("namespace", p.namespace.as_str()),
                        ("project", p.project.as_str()),
                        ("limit", p.limit.as_str()),
                    ],
                    pick(p),
                )
            })
        };
        gauge(
            &mut encoder,
            "kubeplace_quota_limit",
            "A project's limit in force (its ProjectQuota's or the default's; -1 for none)",
            quota_series(|p| p.max),
        )?;
        gauge(
            &mut encoder,
            "kubeplace_quota_usage",
            "What a project's claims hold against a limit",
            quota_series(|p| p.used),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeplace_api::manifest::parse_stream;
    use kubeplace_policy::store::Store;

    fn store(yaml: &str) -> Store {
        let mut store = Store::default();
        for doc in parse_stream("t.yaml", yaml).unwrap() {
            store.apply(doc.object().unwrap().unwrap());
        }
        store
    }

    const CLOUD: &str = "apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata: {name: cn1}
spec: {inventories: {DISK_GB: {total: 100}}}
---
apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata: {name: cn1-numa0}
spec: {parent: cn1, inventories: {VCPU: {total: 8, reserved: 1, allocationRatio: 4.0}}}
---
apiVersion: kubeplace.io/v1alpha1
kind: ResourceProvider
metadata: {name: cn2}
spec: {inventories: {VCPU: {total: 4}}}
";

    fn text(snapshot: Snapshot) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(snapshot));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        out
    }

    #[test]
    fn openstack_exporters_names_per_tree_by_default() {
        let out = text(Snapshot::of(&store(CLOUD), CapacitySettings::default()));
        for line in [
            r#"openstack_placement_resource_total{hostname="cn1",resourcetype="VCPU"} 8"#,
            r#"openstack_placement_resource_reserved{hostname="cn1",resourcetype="VCPU"} 1"#,
            r#"openstack_placement_resource_usage{hostname="cn1",resourcetype="VCPU"} 0"#,
            r#"openstack_placement_resource_allocation_ratio{hostname="cn1",resourcetype="VCPU"} 4.0"#,
            r#"openstack_placement_resource_total{hostname="cn1",resourcetype="DISK_GB"} 100"#,
            r#"kubeplace_zone_capacity{zone="nova",resourcetype="VCPU"} 32"#,
            r#"kubeplace_zone_hosts{zone="nova"} 2"#,
            r#"kubeplace_capacity_hosts_omitted{scope="hosts"} 0"#,
        ] {
            assert!(out.contains(line), "{line} missing:\n{out}");
        }
        assert!(!out.contains(r#"hostname="cn1-numa0""#), "{out}");
    }

    #[test]
    fn per_provider_off_and_capped() {
        let s = store(CLOUD);
        let providers = text(Snapshot::of(
            &s,
            CapacitySettings {
                per: CapacityMetrics::Providers,
                max_hosts: 100,
            },
        ));
        assert!(providers.contains(
            r#"openstack_placement_resource_total{hostname="cn1-numa0",resourcetype="VCPU"} 8"#
        ));
        let off = text(Snapshot::of(
            &s,
            CapacitySettings {
                per: CapacityMetrics::Off,
                max_hosts: 100,
            },
        ));
        assert!(
            !off.contains("openstack_placement_resource_total{"),
            "{off}"
        );
        assert!(off.contains(r#"kubeplace_zone_capacity{zone="nova",resourcetype="VCPU"} 32"#));
        let capped = text(Snapshot::of(
            &s,
            CapacitySettings {
                per: CapacityMetrics::Hosts,
                max_hosts: 1,
            },
        ));
        assert!(capped.contains(r#"hostname="cn1""#));
        assert!(!capped.contains(r#"hostname="cn2""#), "{capped}");
        assert!(capped.contains(r#"kubeplace_capacity_hosts_omitted{scope="hosts"} 1"#));
    }
}
