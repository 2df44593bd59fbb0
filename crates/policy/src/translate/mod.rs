//! From custom resources to the core's requests, in one place: what a Flavor asks of
//! Placement, what an Image requires, which definitions an ExtraSpecDefinition adds, what a
//! ProviderConfig spec contributes to the merge, which
//! record the provider index keeps of a ResourceProvider and an Allocation. Admission, statuses and scheduling all read
//! custom resources through these functions.

pub mod allocation;
pub mod extra_spec_definition;
pub mod flavor;
pub mod image;
pub mod provider_config;
pub mod resource_provider;
pub mod server;

pub use allocation::{APPLIED, OVER_CAPACITY};
pub(crate) use allocation::{
    consumer_allocations, is_decided, is_refused, numa_cpu_key, numa_pages_key, takes,
};
pub use extra_spec_definition::custom_definitions;
pub(crate) use extra_spec_definition::definition_shadowing;
pub(crate) use flavor::{check_flavor_extra_specs, flavor_request, guest_source, validation_mode};
pub use image::{required_traits, server_request};
pub use resource_provider::inventory;
pub(crate) use resource_provider::{provider_record, provider_uuid};
pub(crate) use server::chosen_profile;
