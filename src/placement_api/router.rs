//! Paths and methods to handlers, with the microversion each route starts at. A path
//! unknown at the requested version is a 404 and a method not served there a 405 with
//! `Allow`, as in Placement.

use http::{Method, StatusCode};

use crate::placement_api::api::PlacementApi;
use crate::placement_api::auth::policy;
use crate::placement_api::caller::Caller;
use crate::placement_api::handlers::{
    allocations, classes, extensions, inventories, providers, reshaper, traits,
};
use crate::placement_api::request::call::Call;
use crate::placement_api::request::ctx::Ctx;
use crate::placement_api::request::routes::{Methods, Route};
use crate::placement_api::request::wire::{self, ApiError, Reply};
use crate::placement_api::request::{accept, body};

/// Whether the request may go on to its handler, judged from its headers alone: the path
/// names a route, which serves the method at the requested version, can answer it in JSON,
/// is sent a JSON body where it takes one, and the caller's policy allows it. The same
/// answer before and after the body is read, so a caller refused is refused before.
pub(crate) fn gate(ctx: &Ctx, call: &Call) -> Result<(), ApiError> {
    let route = Route::of(&call.path).ok_or_else(|| ApiError::not_found(""))?;
    gate_route(ctx, call, &route)
}

fn gate_route(ctx: &Ctx, call: &Call, route: &Route<'_>) -> Result<(), ApiError> {
    use Method as M;
    // Deleting every inventory arrived in 1.5; before, Placement answers it 405.
    if matches!(route, Route::Inventories(_)) && call.method == M::DELETE && ctx.mv.0 < 5 {
        return Err(not_allowed(&call.method, [M::GET, M::PUT, M::POST].iter()));
    }
    served(ctx, call, route)?;
    if (call.method == Method::PUT || call.method == Method::POST)
        && route.writes_with_body(ctx.mv.0)
    {
        body::json_sent(call)?;
    }
    authorized(call)
}

/// Answers a request with a token and a served version.
pub(crate) fn route(api: &PlacementApi, ctx: &Ctx, call: &Call) -> Result<Reply, ApiError> {
    let route = Route::of(&call.path).ok_or_else(|| ApiError::not_found(""))?;
    gate_route(ctx, call, &route)?;
    let m = &call.method;
    use Method as M;
    use Route as R;
    match route {
        // `GET /` is version discovery, answered before routing.
        R::Root => Err(ApiError::not_found("")),
        R::Providers if m == M::GET => providers::list(api, ctx, call),
        R::Providers => api.write(|s| providers::create(s, ctx, call)),
        R::Provider(uuid) => match *m {
            M::GET => api.read(|s| providers::show(s, ctx, uuid)),
            M::PUT => api.write(|s| providers::update(s, ctx, uuid, call)),
            _ => api.write(|s| providers::delete(s, uuid)),
        },
        R::Inventories(uuid) => match *m {
            M::GET => api.read(|s| inventories::list(s, uuid)),
            M::PUT => api.write(|s| inventories::replace(s, ctx, uuid, call)),
            M::POST => api.write(|s| inventories::create(s, ctx, uuid, call)),
            _ => api.write(|s| inventories::delete_all(s, uuid)),
        },
        R::Inventory(uuid, class) => match *m {
            M::GET => api.read(|s| inventories::show(s, uuid, class)),
            M::PUT => api.write(|s| inventories::update(s, ctx, uuid, class, call)),
            _ => api.write(|s| inventories::delete(s, uuid, class)),
        },
        R::ProviderTraits(uuid) => match *m {
            M::GET => api.read(|s| traits::of_provider(s, uuid)),
            M::PUT => api.write(|s| traits::set_on_provider(s, uuid, call)),
            _ => api.write(|s| traits::clear_on_provider(s, uuid)),
        },
        R::ProviderAggregates(uuid) => match *m {
            M::GET => api.read(|s| providers::aggregates(s, ctx, uuid)),
            _ => api.write(|s| providers::set_aggregates(s, ctx, uuid, call)),
        },
        R::ProviderUsages(uuid) => api.read(|s| allocations::provider_usages(s, uuid)),
        R::ProviderAllocations(uuid) => api.read(|s| allocations::of_provider(s, ctx, uuid)),
        R::Traits => api.read(|s| traits::list(s, &call.query)),
        R::Trait(name) => match *m {
            M::GET => api
                .read(|s| traits::show(s, name))
                .map(|r| wire::fresh(ctx, r)),
            M::PUT => api
                .write(|s| traits::create(s, name, call))
                .map(|r| wire::fresh(ctx, r)),
            _ => api.write(|s| traits::delete(s, name)),
        },
        R::Classes if m == M::GET => api.read(classes::list),
        R::Classes => api.write(|s| classes::create(s, call)),
        R::Class(name) => match *m {
            M::GET => api.read(|s| classes::show(s, name)),
            // A PUT renames the class with a body before 1.7, and creates it without one from.
            M::PUT if ctx.mv.0 < 7 => api.write(|s| classes::rename(s, name, call)),
            M::PUT => api.write(|s| classes::put(s, name, call)),
            _ => api.write(|s| classes::delete(s, name)),
        },
        R::Consumer(consumer) => match *m {
            M::GET => api.read(|s| allocations::show(s, ctx, consumer)),
            M::PUT => api.write(|s| allocations::put(s, ctx, consumer, call)),
            _ => api.write(|s| allocations::delete(s, consumer)),
        },
        R::Explain => extensions::explain_candidates(api, ctx, &call.query, &call.stop),
        R::Headroom => extensions::flavor_headroom(api, &call.query),
        R::Quotas => api.read(|s| extensions::project_quota(s.store(), &call.query)),
        R::Capacity => api.read(|s| extensions::capacity_page(s.store(), &call.query)),
        R::Candidates => allocations::candidates(api, ctx, call),
        R::Allocations => api.write(|s| allocations::post(s, ctx, call)),
        R::Usages => api.read(|s| allocations::project_usages(s, ctx, &call.query)),
        R::Reshaper => api.write(|s| reshaper::reshape(s, ctx, call)),
    }
}

/// Whether the caller may call the route, by Placement's policy for it (`policy::TABLE`):
/// judged once the route, method, version and body type are known to be served, as
/// Placement's handlers check their policy first thing.
fn authorized(call: &Call) -> Result<(), ApiError> {
    let Caller::Roles(creds) = &call.caller else {
        return Ok(());
    };
    let Some(entry) = policy::lookup(&call.method, &call.path) else {
        // Every route served has an entry (policy's tests walk them): refuse what has not.
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "No policy covers this request.",
        ));
    };
    let target = policy::query_value(&call.query, "project_id");
    policy::authorize(entry, creds, target.as_deref()).map_err(|message| {
        tracing::info!(
            user = creds.user_id.as_deref().unwrap_or(""),
            project = creds.project_id.as_deref().unwrap_or(""),
            roles = %creds.roles.join(","),
            policy = entry.name,
            "refused by policy"
        );
        ApiError::new(StatusCode::FORBIDDEN, message)
    })
}

/// Whether the route serves the method at the requested version and can answer it.
fn served(ctx: &Ctx, call: &Call, route: &Route<'_>) -> Result<(), ApiError> {
    let method = &call.method;
    let methods: Methods<'_> = route.methods();
    match methods.iter().find(|(m, _)| m == method) {
        Some((_, from)) if ctx.mv.0 >= *from => {
            let (kind, sub) = route.media();
            if method == Method::GET && !accept::takes(&call.headers, kind, sub) {
                return Err(ApiError::new(
                    StatusCode::NOT_ACCEPTABLE,
                    format!(
                        "this path answers with {kind}/{sub} only; send an Accept header that takes it, or none"
                    ),
                ));
            }
            Ok(())
        }
        Some(_) => Err(ApiError::not_found("")),
        None => Err(not_allowed(method, methods.iter().map(|(m, _)| m))),
    }
}

/// A 405 whose `Allow` lists `allow`.
fn not_allowed<'a>(method: &Method, allow: impl Iterator<Item = &'a Method>) -> ApiError {
    let allow: Vec<&str> = allow.map(|m| m.as_str()).collect();
    let mut e = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("The method {method} is not allowed for this resource."),
    );
    e.allow = Some(allow.join(", "));
    e
}
