//! From custom resources to the core's requests, in one place: what a Flavor asks of
//! Placement, what an Image requires, which definitions an ExtraSpecDefinition adds, what a
//! ProviderConfig spec contributes to the merge. Admission, statuses and scheduling all read
//! custom resources through these functions.

pub mod extra_spec_definition;
pub mod flavor;
pub mod image;
pub mod provider_config;
pub mod server;

pub use extra_spec_definition::custom_definitions;
pub(crate) use extra_spec_definition::definition_shadowing;
pub(crate) use flavor::{flavor_request, validation_mode};
pub use image::required_traits;
pub(crate) use server::chosen_profile;
