//! Reference documentation generated from the registry, in Markdown or reStructuredText.

use std::fmt::Write;

use super::definition::{Definition, Origin, Support, namespace_of};
use super::image_properties::image_properties;
use super::registry::Registry;

/// Output formats of `kubeplace extra-specs docs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Rst,
}

/// A one-line summary of each in-tree namespace, in documentation order.
pub(crate) const NAMESPACES: [(&str, &str); 13] = [
    (
        "hw",
        "Guest hardware: CPU pinning and topology, NUMA, memory, devices.",
    ),
    ("hw_rng", "The guest's virtual random number generator."),
    ("hw_video", "The guest's video device."),
    ("os", "Guest firmware and operating system features."),
    (
        "pci_passthrough",
        "PCI devices passed through to the guest.",
    ),
    ("accel", "Accelerators managed by Cyborg."),
    (
        "quota",
        "Limits, reservations and shares of CPU, memory, disk and network.",
    ),
    ("vmware", "Options of the VMware virt driver."),
    (
        "capabilities",
        "Host capabilities matched by the ComputeCapabilitiesFilter.",
    ),
    (
        "aggregate_instance_extra_specs",
        "Host aggregate metadata matched by the AggregateInstanceExtraSpecsFilter.",
    ),
    (
        "resources",
        "Amounts of resource classes requested from placement, per request group.",
    ),
    (
        "trait",
        "Traits required or forbidden on resource providers, per request group.",
    ),
    ("", "Keys with no namespace."),
];

struct Writer {
    format: Format,
    out: String,
}

impl Writer {
    fn heading(&mut self, level: usize, text: &str) {
        match self.format {
            Format::Markdown => {
                let _ = writeln!(self.out, "{} {text}\n", "#".repeat(level));
            }
            Format::Rst => {
                let ch = ['=', '-', '~', '^'][level.saturating_sub(1).min(3)];
                let line = ch.to_string().repeat(text.chars().count());
                if level == 1 {
                    let _ = writeln!(self.out, "{line}\n{text}\n{line}\n");
                } else {
                    let _ = writeln!(self.out, "{text}\n{line}\n");
                }
            }
        }
    }

    fn para(&mut self, text: &str) {
        let _ = writeln!(self.out, "{}\n", self.inline(text));
    }

    fn item(&mut self, label: &str, text: &str) {
        let text = self.inline(text);
        let label = self.inline(label);
        match self.format {
            Format::Markdown => {
                let _ = writeln!(self.out, "- **{label}:** {text}");
            }
            Format::Rst => {
                let _ = writeln!(self.out, "- **{label}:** {text}");
            }
        }
    }

    fn end_list(&mut self) {
        self.out.push('\n');
    }

    /// Markdown code spans become RST literals.
    fn inline(&self, text: &str) -> String {
        match self.format {
            Format::Markdown => text.to_string(),
            Format::Rst => {
                let mut s = String::new();
                let mut open = false;
                for c in text.chars() {
                    if c == '`' {
                        s.push_str("``");
                        open = !open;
                    } else if (c == '*' || c == '_' || c == '|') && !open {
                        s.push('\\');
                        s.push(c);
                    } else {
                        s.push(c);
                    }
                }
                s
            }
        }
    }
}

fn code(s: &str) -> String {
    format!("`{s}`")
}

fn describe(w: &mut Writer, d: &Definition, heading_level: usize) {
    w.heading(heading_level, &w.inline(&code(&d.key)));
    w.para(&d.description);
    let mut value = d.value.describe();
    if let Some(vd) = &d.value_description {
        value = format!("{value} — {vd}");
    }
    w.item("Value", &format!("{} ({})", value, d.value.type_name()));
    for p in &d.params {
        w.item(
            &format!("Parameter {{{}}}", p.name),
            &format!("{}; matches {}", p.description, code(&p.pattern)),
        );
    }
    match &d.support {
        Support::Supported => {}
        Support::Experimental => w.item("Status", "experimental"),
        Support::Deprecated { replacement } => w.item(
            "Status",
            &match replacement {
                Some(r) => format!(
                    "deprecated; use {} instead (admitted with a warning)",
                    code(r)
                ),
                None => "deprecated (admitted with a warning)".to_string(),
            },
        ),
    }
    if !d.virt_drivers.is_empty() {
        w.item("Virt drivers", &d.virt_drivers.join(", "));
    }
    if !d.depends_on.is_empty() {
        let deps: Vec<String> = d.depends_on.iter().map(|k| code(k)).collect();
        w.item("Works with", &deps.join(", "));
    }
    if let Origin::Custom(name) = &d.origin {
        w.item("Defined by", &format!("ExtraSpecDefinition {}", code(name)));
    }
    w.end_list();
}

/// Renders the reference: every in-tree namespace, then the custom definitions given, then
/// the image properties.
pub fn render(format: Format, custom: &Registry) -> String {
    let mut w = Writer {
        format,
        out: String::new(),
    };
    let in_tree = Registry::in_tree();
    w.heading(1, "Flavor extra spec and image property reference");
    w.para(&format!(
        "Generated by `kubeplace extra-specs docs` from kubeplace's registry of the {} extra specs Nova defines{}. Dependencies and virt drivers are documented only; they are never enforced. How values are checked, the validation modes and the differences from Nova are in docs/extra-specs.md.",
        in_tree.len(),
        if custom.is_empty() { String::new() } else { format!(" and {} custom definitions", custom.len()) }
    ));
    w.heading(2, "Flavor extra specs");
    for (ns, summary) in NAMESPACES {
        let title = if ns.is_empty() {
            "No namespace".to_string()
        } else {
            format!("Namespace {}", code(&format!("{ns}:")))
        };
        w.heading(3, &w.inline(&title));
        w.para(summary);
        let defs: Vec<&Definition> = in_tree
            .definitions()
            .iter()
            .filter(|d| d.namespace == ns)
            .collect();
        if ns == "trait" || ns == "resources" {
            family(&mut w, ns, &defs);
        } else {
            for d in defs {
                describe(&mut w, d, 4);
            }
        }
    }
    if !custom.is_empty() {
        w.heading(2, "Custom extra specs");
        w.para("Defined by ExtraSpecDefinition objects; in-tree definitions take precedence over these.");
        let mut namespaces: Vec<&str> = custom
            .definitions()
            .iter()
            .map(|d| namespace_of(&d.key))
            .collect();
        namespaces.sort();
        namespaces.dedup();
        for ns in namespaces {
            let title = if ns.is_empty() {
                "No namespace".to_string()
            } else {
                format!("Namespace {}", code(&format!("{ns}:")))
            };
            w.heading(3, &w.inline(&title));
            for d in custom
                .definitions()
                .iter()
                .filter(|d| namespace_of(&d.key) == ns)
            {
                describe(&mut w, d, 4);
            }
        }
    }
    w.heading(2, "Image properties");
    w.para("Glance image properties that Nova reads. Glance stores any property; kubeplace rejects a bad value of one of these, warns about a near miss of one, and warns about the older names. `trait:NAME` takes only the value `required`.");
    for p in image_properties() {
        w.heading(3, &w.inline(&code(p.name)));
        w.para(p.description);
        w.item(
            "Value",
            &format!("{} ({})", p.value.describe(), p.value.type_name()),
        );
        if let Some(r) = p.replaced_by {
            w.item(
                "Status",
                &format!(
                    "older name; use {} instead (admitted with a warning)",
                    code(r)
                ),
            );
        }
        w.end_list();
    }
    let mut out = w.out.trim_end().to_string();
    out.push('\n');
    out
}

/// The trait and resource-class families: the custom-name definition in full, and the
/// standard names as one entry.
fn family(w: &mut Writer, ns: &str, defs: &[&Definition]) {
    let (custom, standard): (Vec<&&Definition>, Vec<&&Definition>) =
        defs.iter().partition(|d| d.key.contains("CUSTOM_{"));
    if let Some(first) = standard.first() {
        let template = format!("{ns}{{group}}:{{name}}");
        w.heading(4, &w.inline(&code(&template)));
        let what = if ns == "trait" {
            "trait"
        } else {
            "resource class"
        };
        w.para(&format!(
            "One definition for each of the {} standard {what} names below: {}",
            standard.len(),
            if ns == "trait" {
                "asks placement for providers that have (required) or lack (forbidden) the trait."
            } else {
                "how much of the class the server asks placement for; it replaces the amount derived from the flavor's size."
            }
        ));
        w.item(
            "Value",
            &format!("{} ({})", first.value.describe(), first.value.type_name()),
        );
        for p in &first.params {
            w.item(
                &format!("Parameter {{{}}}", p.name),
                &format!("{}; matches {}", p.description, code(&p.pattern)),
            );
        }
        let names: Vec<String> = standard
            .iter()
            .map(|d| code(d.key.split_once(':').map_or("", |(_, n)| n)))
            .collect();
        // One name a line (indented under the item) keeps lines short enough for RST tools.
        w.item("Names", &names.join(",\n  "));
        w.end_list();
    }
    for d in custom {
        describe(w, d, 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_has_every_literal_key_and_family() {
        let md = render(Format::Markdown, &Registry::default());
        assert!(md.contains("#### `hw:cpu_policy`"));
        assert!(md.contains("one of `dedicated`, `shared`, `mixed`"));
        assert!(md.contains("deprecated; use `hw:hide_hypervisor_id` instead"));
        assert!(md.contains("#### `trait{group}:{name}`"));
        assert!(md.contains("`HW_CPU_X86_AVX2`"));
        assert!(md.contains("### `hw_numa_cpus.{num}`"));
        assert!(md.contains("- **Works with:** `hw:numa_nodes`"));
    }

    #[test]
    fn rst_uses_literals_and_underlines() {
        let rst = render(Format::Rst, &Registry::default());
        assert!(rst.contains("``hw:cpu_policy``\n^^^^^^^^^^^^^^^^^"));
        assert!(!rst.contains("#### "));
    }
}
