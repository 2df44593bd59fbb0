//! Who may call the API.
//!
//! `kubeplace placement serve` accepts one static token, as Placement's noauth2 does. Over a
//! cluster, the token a client sends (`X-Auth-Token`, what OpenStack clients send, or
//! `Authorization: Bearer`) is checked with a Kubernetes TokenReview for the API's audience
//! (`kubeplace-placement` unless the operator is told otherwise), which the review's answer
//! must confirm: such a token is refused by the API server itself, so a token sent here
//! cannot be replayed against the rest of the cluster. What the caller
//! may do is asked of Kubernetes RBAC with a SubjectAccessReview on the resource
//! `placement` of the group `kubeplace.io`: `get` for reads, `create` for POST, `update`
//! for PUT and `delete` for DELETE. Answers are remembered for a short while, so a client
//! making many requests costs the API server two reviews now and then, not two a request;
//! refused tokens are remembered apart from accepted ones (so they never push a user out),
//! and reviews of tokens remembered in neither are rate-limited (past it, a 429).
//!
//! With `--keystone-authtoken` (both commands), tokens are checked by Keystone
//! (`keystone`) and what a caller may do is Placement's default policy for its roles
//! and scope (`policy`, applied by the router once the route is known). When a
//! cluster's Kubernetes tokens are taken too, a token shaped as a JWT (three dot-separated
//! base64url parts whose first is a JSON header with `alg`, as every Kubernetes service
//! account token is) goes to Kubernetes, any other (Keystone's fernet tokens) to Keystone:
//! neither is ever shown the other's tokens. The test-only `--test-roles-from-headers`
//! mode of `serve` takes any token and the roles and project its headers claim, as
//! Placement's noauth2 does in Placement's own functional tests.

pub mod check;
pub mod keystone;
pub mod kubernetes;
pub mod policy;
pub mod refusal;
pub(crate) mod remembered;
pub(crate) mod token_cache;

pub use check::{Auth, MAX_TOKEN_BYTES, verb};
pub use kubernetes::{KubernetesAuth, RBAC_GROUP, RBAC_RESOURCE};
pub use refusal::Refusal;
