//! A Server's identity as the rest of the API sees it: the Allocation that holds its
//! resources and the consumer uuid it claims them as.

use kubeplace_core::placement::derived_provider_uuid;

use crate::{Allocation, Server};

/// Labels on a server's Allocation naming the server.
pub const SERVER_NAMESPACE_LABEL: &str = "kubeplace.io/server-namespace";
pub const SERVER_NAME_LABEL: &str = "kubeplace.io/server-name";

/// A Server by namespace and name (a server without a namespace is in `default`): the one
/// place its Allocation name and consumer uuid are derived from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServerRef {
    pub namespace: String,
    pub name: String,
}

impl ServerRef {
    /// The Server's namespace and name.
    pub fn of(server: &Server) -> ServerRef {
        ServerRef {
            namespace: server
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            name: server.metadata.name.clone().unwrap_or_default(),
        }
    }

    /// The name of the Allocation that holds the server's resources.
    pub fn allocation_name(&self) -> String {
        format!("server.{}.{}", self.namespace, self.name)
    }
}

/// The name of the Allocation that holds a server's resources.
pub fn allocation_name(server: &Server) -> String {
    ServerRef::of(server).allocation_name()
}

/// The consumer uuid of a server: stable for its namespace and name.
pub fn consumer_uuid(server: &Server) -> String {
    let who = ServerRef::of(server);
    derived_provider_uuid(&format!("server:{}/{}", who.namespace, who.name))
}

/// The server an Allocation was written for, when it is a server's allocation: labelled
/// with the server and named as the scheduler names it.
pub fn allocation_server(allocation: &Allocation) -> Option<ServerRef> {
    let labels = allocation.metadata.labels.as_ref()?;
    let server = ServerRef {
        namespace: labels.get(SERVER_NAMESPACE_LABEL)?.clone(),
        name: labels.get(SERVER_NAME_LABEL)?.clone(),
    };
    (allocation.metadata.name.as_deref() == Some(server.allocation_name().as_str()))
        .then_some(server)
}
