//! kubeplace: OpenStack's scheduling vocabulary as Kubernetes custom resources.
pub mod api;
pub mod cli {
    pub mod crds;
}
pub mod manifest;
pub mod placement;
