//! kubeplace's own answers on the Placement API's port, under `/kubeplace/`, so that
//! Placement's paths keep Placement's answers:
//!
//! - `GET /kubeplace/explain?QUERY`: where the candidates of `GET /allocation_candidates?QUERY`
//!   were lost, as `kubeplace placement candidates --explain -o json` puts it under `explain`;
//! - `GET /kubeplace/headroom?flavor=F[&without=PROVIDER…][&cap=N]`: how many more servers
//!   of a flavor fit over the cluster's state now, as `kubeplace placement headroom -o json`.

use http::StatusCode;

use kubeplace_core::placement::explain::explain;
use kubeplace_core::placement::query::{decode_pairs, parse_candidates_query};
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_policy::scheduling::headroom::{DEFAULT_CAP, HeadroomError, headroom};

use super::Ctx;
use super::wire::{ApiError, Reply, json_reply};
use kubeplace_policy::placement_records::State;

/// `GET /kubeplace/explain?QUERY`.
pub(crate) fn explain_candidates(
    state: &State<'_>,
    ctx: &Ctx,
    query: &str,
) -> Result<Reply, ApiError> {
    let q = parse_candidates_query(query, ctx.mv).map_err(|e| ApiError::bad_request(e.detail))?;
    Ok(json_reply(
        StatusCode::OK,
        &explain(state.store().index(), &q),
    ))
}

/// `GET /kubeplace/headroom?flavor=F[&without=P…][&cap=N]`, weighing candidates by
/// `weighers`.
pub(crate) fn flavor_headroom(
    state: &State<'_>,
    weighers: &Weighers,
    query: &str,
) -> Result<Reply, ApiError> {
    let mut flavor = None;
    let mut without = Vec::new();
    let mut cap = DEFAULT_CAP;
    for (key, value) in decode_pairs(query).map_err(|e| ApiError::bad_request(e.detail))? {
        match key.as_str() {
            "flavor" => flavor = Some(value),
            "without" => without.push(value),
            "cap" => {
                cap = value.parse().map_err(|_| {
                    ApiError::bad_request(format!(
                        "cap={value:?} is not a number of servers; give a whole number from 1"
                    ))
                })?
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {other:?}; headroom takes flavor, without and cap"
                )));
            }
        }
    }
    let Some(flavor) = flavor else {
        return Err(ApiError::bad_request(
            "flavor is required: /kubeplace/headroom?flavor=NAME",
        ));
    };
    match headroom(state.store(), weighers, &flavor, &without, cap) {
        Ok(h) => Ok(json_reply(StatusCode::OK, &h)),
        Err(e @ (HeadroomError::UnknownFlavor { .. } | HeadroomError::UnknownProvider { .. })) => {
            Err(ApiError::not_found(e.to_string()))
        }
        Err(e) => Err(ApiError::bad_request(e.to_string())),
    }
}
