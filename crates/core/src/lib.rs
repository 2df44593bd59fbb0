//! kubeplace's pure core: every semantic rule of Placement, Nova's extra specs and provider
//! config files, and Neutron's metadata templates, over plain data.
//!
//! Nothing here knows Kubernetes, async runtimes or the network; the crate does not depend
//! on kube, k8s-openapi, tokio or hyper, so the compiler keeps it that way. The layers
//! above (`kubeplace-api`, `kubeplace-policy`, the `kubeplace` binary) translate custom
//! resources into these types and back.

#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod extra_specs;
pub mod numa;
pub mod placement;
pub mod provider_config;
pub mod quota;
pub mod runs;
pub mod shelf;
pub mod templates;
pub mod text;
pub mod yaml;
pub mod yaml_plain;
