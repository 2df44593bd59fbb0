//! What every server of the operator is built on: HTTP/1 over TCP or TLS with bounded
//! handshakes, drain and stop (`http`), the connections a server holds and who may hold
//! them (`connections`), request bodies bounded in the bytes that arrive (`body`), serving
//! certificates from files or generated (`certs`), a CA and certificate kept in a Secret
//! shared by the replicas (`tls_secret`), and the client certificates the webhook may require
//! (`client_auth`). The admission webhook, health and metrics, and the Placement API serve
//! through it.

pub mod body;
pub mod certs;
pub mod client_auth;
pub mod connections;
pub mod http;
pub mod tls_secret;
