//! `kubeplace crds`: every CustomResourceDefinition as one YAML stream.

use kubeplace_api::all_crds;

/// The YAML that `kubeplace crds` prints and `crds/` holds.
pub(crate) fn render() -> Result<String, serde_saphyr::ser_error::Error> {
    let mut out = String::new();
    for crd in all_crds() {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}
