//! One room per resource, as Placement's own handlers are: each answers its routes over the
//! API's state (`PlacementApi::read` and `write`), in Placement 16's words and shapes.

pub(crate) mod allocations;
pub(crate) mod classes;
pub(crate) mod extensions;
pub(crate) mod inventories;
pub(crate) mod providers;
pub(crate) mod reshaper;
pub(crate) mod traits;
