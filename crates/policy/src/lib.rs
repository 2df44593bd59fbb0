//! kubeplace's policy: admission, statuses, scheduling and claims over an object store.
//!
//! Everything here is a plain function of a [`store::Store`]: the webhook, the controllers
//! and `kubeplace apply` all call it, with no Kubernetes client, async runtime or network
//! in between.

#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod admission;
pub mod capacity;
pub mod claims;
pub mod mirror;
pub mod namespaces;
pub mod numa;
pub mod pass;
pub mod placement_records;
pub mod quota;
pub mod scheduling;
pub mod status;
pub mod store;
pub mod sync;
pub mod translate;

/// What unit tests of several modules build objects with.
#[cfg(test)]
pub(crate) mod test_objects {
    use kubeplace_api::Object;
    use kubeplace_api::manifest::parse_stream;

    /// The one object of a YAML manifest.
    pub fn object(yaml: &str) -> Object {
        parse_stream("t.yaml", yaml).unwrap()[0]
            .clone()
            .object()
            .unwrap()
            .unwrap()
    }
}
