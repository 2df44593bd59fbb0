//! How Nova's pre-filters from Aggregates and server groups' policies decide where servers
//! go, through the planner.

mod aggregates;
mod server_groups;
