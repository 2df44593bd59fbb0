//! A request's way through the API before and around its handler: what its path names
//! (`routes`), its microversion (`version`) and `Accept` header (`accept`), its body and its
//! media type (`body`, read by `intake` once its caller is checked), the bounds on searches
//! (`searches`), where it is answered (`in_place`), and the wire format of every answer
//! (`wire`); `call` is what a handler sees of it.

pub(crate) mod accept;
pub(crate) mod body;
pub(crate) mod call;
pub(crate) mod ctx;
pub(crate) mod in_place;
pub(crate) mod intake;
pub(crate) mod routes;
pub(crate) mod searches;
pub(crate) mod version;
pub(crate) mod wire;
