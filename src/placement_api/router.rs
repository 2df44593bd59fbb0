//! Paths and methods to handlers, with the microversion each route starts at. A path
//! unknown at the requested version is a 404 and a method not served there a 405 with
//! `Allow`, as in Placement.

use http::{Method, StatusCode};

use super::auth::Caller;
use super::wire::{self, ApiError, Reply};
use super::{Call, Ctx, PlacementApi, accept, body, policy};
use super::{allocations, classes, extensions, inventories, providers, reshaper, traits};

/// One route: the methods served on a path, each from a microversion.
type Methods<'a> = &'a [(Method, u16)];

/// A path's segments, without empty ones (`//` and a trailing `/` name nothing).
pub(crate) fn segments(path: &str) -> Vec<&str> {
    path.trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect()
}

/// Answers a request with a token and a served version.
pub(crate) fn route(api: &PlacementApi, ctx: &Ctx, call: &Call) -> Result<Reply, ApiError> {
    let segments = segments(&call.path);
    let m = &call.method;
    use Method as M;
    match segments.as_slice() {
        // `GET /` is version discovery, answered before routing.
        [] => {
            allowed(ctx, call, &[(M::GET, 0)])?;
            Err(ApiError::not_found(""))
        }
        ["resource_providers"] => {
            allowed(ctx, call, &[(M::GET, 0), (M::POST, 0)])?;
            if m == M::GET {
                providers::list(api, ctx, call)
            } else {
                api.write(|s| providers::create(s, ctx, call))
            }
        }
        ["resource_providers", uuid] => {
            allowed(ctx, call, &[(M::GET, 0), (M::PUT, 0), (M::DELETE, 0)])?;
            match *m {
                M::GET => api.read(|s| providers::show(s, ctx, uuid)),
                M::PUT => api.write(|s| providers::update(s, ctx, uuid, call)),
                _ => api.write(|s| providers::delete(s, uuid)),
            }
        }
        ["resource_providers", uuid, "inventories"] => {
            // Deleting every inventory arrived in 1.5; before, Placement answers it 405.
            if m == M::DELETE && ctx.mv.0 < 5 {
                return Err(not_allowed(m, [M::GET, M::PUT, M::POST].iter()));
            }
            allowed(
                ctx,
                call,
                &[(M::GET, 0), (M::PUT, 0), (M::POST, 0), (M::DELETE, 5)],
            )?;
            match *m {
                M::GET => api.read(|s| inventories::list(s, uuid)),
                M::PUT => api.write(|s| inventories::replace(s, ctx, uuid, call)),
                M::POST => api.write(|s| inventories::create(s, ctx, uuid, call)),
                _ => api.write(|s| inventories::delete_all(s, uuid)),
            }
        }
        ["resource_providers", uuid, "inventories", class] => {
            allowed(ctx, call, &[(M::GET, 0), (M::PUT, 0), (M::DELETE, 0)])?;
            match *m {
                M::GET => api.read(|s| inventories::show(s, uuid, class)),
                M::PUT => api.write(|s| inventories::update(s, ctx, uuid, class, call)),
                _ => api.write(|s| inventories::delete(s, uuid, class)),
            }
        }
        ["resource_providers", uuid, "traits"] => {
            allowed(ctx, call, &[(M::GET, 6), (M::PUT, 6), (M::DELETE, 6)])?;
            match *m {
                M::GET => api.read(|s| traits::of_provider(s, uuid)),
                M::PUT => api.write(|s| traits::set_on_provider(s, uuid, call)),
                _ => api.write(|s| traits::clear_on_provider(s, uuid)),
            }
        }
        ["resource_providers", uuid, "aggregates"] => {
            allowed(ctx, call, &[(M::GET, 1), (M::PUT, 1)])?;
            match *m {
                M::GET => api.read(|s| providers::aggregates(s, ctx, uuid)),
                _ => api.write(|s| providers::set_aggregates(s, ctx, uuid, call)),
            }
        }
        ["resource_providers", uuid, "usages"] => {
            allowed(ctx, call, &[(M::GET, 0)])?;
            api.read(|s| allocations::provider_usages(s, uuid))
        }
        ["resource_providers", uuid, "allocations"] => {
            allowed(ctx, call, &[(M::GET, 0)])?;
            api.read(|s| allocations::of_provider(s, ctx, uuid))
        }
        ["traits"] => {
            allowed(ctx, call, &[(M::GET, 6)])?;
            api.read(|s| traits::list(s, &call.query))
        }
        ["traits", name] => {
            allowed_without_body(ctx, call, &[(M::GET, 6), (M::PUT, 6), (M::DELETE, 6)])?;
            match *m {
                M::GET => api
                    .read(|s| traits::show(s, name))
                    .map(|r| wire::fresh(ctx, r)),
                M::PUT => api
                    .write(|s| traits::create(s, name, call))
                    .map(|r| wire::fresh(ctx, r)),
                _ => api.write(|s| traits::delete(s, name)),
            }
        }
        ["resource_classes"] => {
            allowed(ctx, call, &[(M::GET, 2), (M::POST, 2)])?;
            match *m {
                M::GET => api.read(classes::list),
                _ => api.write(|s| classes::create(s, call)),
            }
        }
        ["resource_classes", name] => {
            // A PUT renames the class with a body before 1.7, and creates it without one from.
            let methods = &[(M::GET, 2), (M::PUT, 2), (M::DELETE, 2)];
            if ctx.mv.0 < 7 {
                allowed(ctx, call, methods)?;
            } else {
                allowed_without_body(ctx, call, methods)?;
            }
            match *m {
                M::GET => api.read(|s| classes::show(s, name)),
                M::PUT if ctx.mv.0 < 7 => api.write(|s| classes::rename(s, name, call)),
                M::PUT => api.write(|s| classes::put(s, name, call)),
                _ => api.write(|s| classes::delete(s, name)),
            }
        }
        ["allocations", consumer] => {
            allowed(ctx, call, &[(M::GET, 0), (M::PUT, 0), (M::DELETE, 0)])?;
            match *m {
                M::GET => api.read(|s| allocations::show(s, ctx, consumer)),
                M::PUT => api.write(|s| allocations::put(s, ctx, consumer, call)),
                _ => api.write(|s| allocations::delete(s, consumer)),
            }
        }
        ["kubeplace", "explain"] => {
            allowed(ctx, call, &[(M::GET, 0)])?;
            extensions::explain_candidates(api, ctx, &call.query, &call.stop)
        }
        ["kubeplace", "headroom"] => {
            allowed(ctx, call, &[(M::GET, 0)])?;
            extensions::flavor_headroom(api, &call.query)
        }
        ["kubeplace", "quotas"] => {
            allowed(ctx, call, &[(M::GET, 0)])?;
            api.read(|s| extensions::project_quota(s.store(), &call.query))
        }
        ["allocation_candidates"] => {
            allowed(ctx, call, &[(M::GET, 10)])?;
            allocations::candidates(api, ctx, call)
        }
        ["allocations"] => {
            allowed(ctx, call, &[(M::POST, 13)])?;
            api.write(|s| allocations::post(s, ctx, call))
        }
        ["usages"] => {
            allowed(ctx, call, &[(M::GET, 9)])?;
            api.read(|s| allocations::project_usages(s, ctx, &call.query))
        }
        ["reshaper"] => {
            allowed(ctx, call, &[(M::POST, 30)])?;
            api.write(|s| reshaper::reshape(s, ctx, call))
        }
        _ => Err(ApiError::not_found("")),
    }
}

/// Checks the method against the route's, as Placement's router and version checks do: a
/// method the path does not have is a 405 listing the methods it has (at any version); one
/// it has from a later version than the requested one is a 404. A GET served there must be
/// able to take JSON, the only type answered (406); a PUT or POST must say its body is JSON,
/// checked before anything it names is looked up, as Placement does.
fn allowed(ctx: &Ctx, call: &Call, methods: Methods<'_>) -> Result<(), ApiError> {
    served(ctx, call, methods)?;
    if call.method == Method::PUT || call.method == Method::POST {
        body::json_sent(call)?;
    }
    authorized(call)
}

/// [`allowed`] for a route whose writes take no body (creating a trait, and a resource
/// class from 1.7).
fn allowed_without_body(ctx: &Ctx, call: &Call, methods: Methods<'_>) -> Result<(), ApiError> {
    served(ctx, call, methods)?;
    authorized(call)
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
fn served(ctx: &Ctx, call: &Call, methods: Methods<'_>) -> Result<(), ApiError> {
    let method = &call.method;
    match methods.iter().find(|(m, _)| m == method) {
        Some((_, from)) if ctx.mv.0 >= *from => {
            if method == Method::GET && !accept::takes_json(&call.headers) {
                return Err(ApiError::new(
                    StatusCode::NOT_ACCEPTABLE,
                    "this server answers with application/json only; send an Accept header that takes it, or none",
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
