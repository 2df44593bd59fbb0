//! Scheduling: choosing a host for each Server, placing it through admission, and releasing
//! what deleted Servers held.

pub mod aggregates;
pub mod headroom;
pub mod place;
pub mod plan;
pub mod release;
pub mod server_groups;
#[cfg(test)]
mod tests;

pub use headroom::{
    Headroom, HeadroomError, HeadroomFigures, HeadroomRound, headroom, headroom_of_copy,
    record_headroom,
};
pub use place::{any_placeable_server, place, schedule_pending};
pub use plan::plan;
pub(crate) use plan::{allocation_matches, flavor_and_image, host};
