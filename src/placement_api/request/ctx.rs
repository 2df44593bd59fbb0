//! What a handler knows of a request besides its body: the microversion it is answered at,
//! and its request id.

use kubeplace_core::placement::microversion::Microversion;

/// What a handler knows about the request besides its body.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub mv: Microversion,
    pub request_id: String,
}
