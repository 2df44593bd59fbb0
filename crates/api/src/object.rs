//! Any kubeplace object, whatever its kind: what the store keeps and admission and
//! statuses take.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubeplace_core::yaml_plain::PlainNode;
use serde_json::Value;

use super::*;

/// Why a manifest's body does not fit its kind's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// Dotted path of the offending field, e.g. `spec.inventories.VCPU.total`.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

macro_rules! kinds {
    ($($kind:ident => $status:ident),* $(,)?) => {
        /// One kubeplace object of any kind.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Object {
            $($kind($kind),)*
        }

        /// The status of any kind.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Status {
            $($kind($status),)*
        }

        impl Status {
            /// The status as JSON, as an object of its kind carries it.
            pub fn to_value(&self) -> Value {
                match self { $(Status::$kind(s) => serde_json::to_value(s),)* }
                    .unwrap_or(Value::Null)
            }
        }

        impl Object {
            /// The object's kind.
            pub fn kind(&self) -> Kind {
                match self { $(Object::$kind(_) => Kind::$kind,)* }
            }

            /// The object's metadata.
            pub fn meta(&self) -> &ObjectMeta {
                match self { $(Object::$kind(o) => &o.metadata,)* }
            }

            /// The object's metadata, mutable.
            pub fn meta_mut(&mut self) -> &mut ObjectMeta {
                match self { $(Object::$kind(o) => &mut o.metadata,)* }
            }

            /// Parses a manifest body of the given kind.
            pub fn from_value(kind: Kind, value: Value) -> Result<Object, SchemaError> {
                match kind {
                    $(Kind::$kind => typed(value).map(Object::$kind),)*
                }
            }

            /// The object of a body read by the plain readers, as [`Object::from_value`] reads
            /// the same body as JSON, without tracking the path of a failure: for bodies
            /// expected to be well-formed, where a failure is read again for its message.
            pub fn from_plain_untracked(kind: Kind, body: &PlainNode<'_>) -> Option<Object> {
                match kind {
                    $(Kind::$kind => serde::Deserialize::deserialize(body).ok().map(Object::$kind),)*
                }
            }

            /// The object as JSON, as the API server would return it.
            pub fn to_value(&self) -> Value {
                match self { $(Object::$kind(o) => serde_json::to_value(o),)* }
                    .unwrap_or(Value::Null)
            }

            /// Whether both are of one kind with equal specs.
            pub fn same_spec(&self, other: &Object) -> bool {
                match (self, other) {
                    $((Object::$kind(a), Object::$kind(b)) => a.spec == b.spec,)*
                    _ => false,
                }
            }

            /// The current status, if any, as JSON.
            pub fn status_value(&self) -> Value {
                match self { $(Object::$kind(o) => serde_json::to_value(&o.status),)* }
                    .unwrap_or(Value::Null)
            }

            /// Replaces the status. A status of another kind is ignored.
            pub fn set_status(&mut self, status: Status) {
                match (self, status) {
                    $((Object::$kind(o), Status::$kind(s)) => o.status = Some(s),)*
                    _ => {}
                }
            }

            /// Whether the current status is this one, compared in place without a copy.
            pub fn has_status(&self, status: &Status) -> bool {
                match (self, status) {
                    $((Object::$kind(o), Status::$kind(s)) => o.status.as_ref() == Some(s),)*
                    _ => false,
                }
            }

            /// The current status, typed.
            pub fn status(&self) -> Option<Status> {
                match self { $(Object::$kind(o) => o.status.clone().map(Status::$kind),)* }
            }
        }
    };
}

kinds! {
    ResourceProvider => ResourceProviderStatus,
    Allocation => AllocationStatus,
    ProviderConfig => ProviderConfigStatus,
    ExtraSpecDefinition => ExtraSpecDefinitionStatus,
    Flavor => FlavorStatus,
    Image => ImageStatus,
    ServiceProfile => ServiceProfileStatus,
    Server => ServerStatus,
    Aggregate => AggregateStatus,
    ServerGroup => ServerGroupStatus,
    PlacementWrite => PlacementWriteStatus,
    ProjectQuota => ProjectQuotaStatus,
    DefaultProjectQuota => DefaultProjectQuotaStatus,
}

impl Object {
    /// `metadata.name`, empty when absent.
    pub fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or("")
    }

    /// The annotation's value, if set.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.meta()
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }
}

fn typed<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, SchemaError> {
    serde_path_to_error::deserialize(value).map_err(|e| SchemaError {
        path: e.path().to_string(),
        message: e.inner().to_string(),
    })
}
