//! The resource class of a driver's devices: named after the DeviceClass that selects the
//! driver's devices, else after the driver.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use kubeplace_api::cluster_source::DeviceClass;
use regex::Regex;

use super::traits::trait_part;

/// `device.driver == "gpu.example.com"`, the selector of a class of one driver's devices.
static DRIVER_SELECTOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^\s*device\.driver\s*==\s*["']([^"']+)["']\s*$"#).expect("a valid pattern")
});

/// The driver a DeviceClass selects the devices of, when its only selector names one driver
/// (the common form); `None` for other classes, which name no resource class.
pub(super) fn driver_of(class: &DeviceClass) -> Option<String> {
    let selectors = class.spec.selectors.as_deref().unwrap_or_default();
    let [only] = selectors else { return None };
    let expression = &only.cel.as_ref()?.expression;
    Some(DRIVER_SELECTOR.captures(expression)?[1].to_string())
}

/// DeviceClasses by the driver they select.
#[derive(Debug, Clone, Default)]
pub(super) struct DeviceClasses {
    by_driver: BTreeMap<String, BTreeSet<String>>,
    drivers: BTreeMap<String, String>,
}

impl DeviceClasses {
    /// Notes a class (again); the drivers whose resource class may have moved.
    pub fn put(&mut self, class: &DeviceClass) -> Vec<String> {
        let name = class.metadata.name.clone().unwrap_or_default();
        let mut moved = self.remove(&name);
        if let Some(driver) = driver_of(class) {
            self.by_driver
                .entry(driver.clone())
                .or_default()
                .insert(name.clone());
            self.drivers.insert(name, driver.clone());
            moved.push(driver);
        }
        moved
    }

    /// Forgets a class; the drivers whose resource class may have moved.
    pub fn remove(&mut self, name: &str) -> Vec<String> {
        let Some(driver) = self.drivers.remove(name) else {
            return Vec::new();
        };
        if let Some(set) = self.by_driver.get_mut(&driver) {
            set.remove(name);
            if set.is_empty() {
                self.by_driver.remove(&driver);
            }
        }
        vec![driver]
    }

    /// The resource class of a driver's devices: `CUSTOM_<CLASS>` after the first (by name)
    /// DeviceClass selecting the driver, else `CUSTOM_<DRIVER>`.
    pub fn resource_class(&self, driver: &str) -> String {
        let named = self.class_name(driver).unwrap_or(driver);
        format!("CUSTOM_{}", trait_part(named))
    }

    /// The DeviceClass a driver's resource class is named after, if one selects it.
    pub fn class_name(&self, driver: &str) -> Option<&str> {
        self.by_driver
            .get(driver)
            .and_then(|set| set.first())
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(yaml: &str) -> DeviceClass {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn a_class_of_one_driver_names_its_devices() {
        let mut classes = DeviceClasses::default();
        assert_eq!(
            classes.resource_class("gpu.example.com"),
            "CUSTOM_GPU_EXAMPLE_COM"
        );
        let gpu = class(
            "metadata: {name: gpu}\nspec: {selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]}\n",
        );
        assert_eq!(classes.put(&gpu), ["gpu.example.com"]);
        assert_eq!(classes.resource_class("gpu.example.com"), "CUSTOM_GPU");
        // A class with other selectors names nothing.
        let big = class(
            "metadata: {name: big-gpu}\nspec: {selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\" && device.capacity[\"gpu.example.com\"].memory > 1'}}]}\n",
        );
        assert!(classes.put(&big).is_empty());
        assert_eq!(classes.remove("gpu"), ["gpu.example.com"]);
        assert_eq!(
            classes.resource_class("gpu.example.com"),
            "CUSTOM_GPU_EXAMPLE_COM"
        );
    }
}
