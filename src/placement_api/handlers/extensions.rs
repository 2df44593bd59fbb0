//! kubeplace's own answers on the Placement API's port, under `/kubeplace/`, so that
//! Placement's paths keep Placement's answers:
//!
//! - `GET /kubeplace/explain?QUERY`: where the candidates of `GET /allocation_candidates?QUERY`
//!   were lost, as `kubeplace placement candidates --explain -o json` puts it under `explain`;
//! - `GET /kubeplace/headroom?flavor=F[&without=PROVIDER…][&cap=N]`: how many more servers
//!   of a flavor fit over the cluster's state now, as `kubeplace placement headroom -o json`;
//!   with `project=P`, also how many of them P's quota allows;
//! - `GET /kubeplace/quotas?project_id=P`: the quota that governs project P (a namespace or
//!   a Placement project id), its limits and what P's claims hold against each;
//! - `GET /kubeplace/capacity[?rows=N]`: the capacity page (`crate::capacity_page`), as
//!   `kubeplace top -o html` writes it, of the cluster's state now.

use std::time::{Duration, Instant};

use http::StatusCode;

use kubeplace_core::placement::candidates::Stop;
use kubeplace_core::placement::explain::explain_until;
use kubeplace_core::placement::query::{decode_pairs, parse_candidates_query};
use kubeplace_policy::scheduling::headroom::{DEFAULT_CAP, HeadroomError, headroom_of_copy};
use kubeplace_policy::store::Store;

use crate::capacity_page::{self, PageLimits};
use crate::placement_api::api::PlacementApi;
use crate::placement_api::request::ctx::Ctx;
use crate::placement_api::request::searches;
use crate::placement_api::request::wire::{ApiError, Reply, json_reply};

/// Servers one headroom question places at most. Each costs one bounded search (about a
/// millisecond on a cloud of a few hundred hosts), so 10,000 answer within seconds, while
/// telling "thousands more fit" apart is all a capacity plan needs; a larger cap only
/// buys a longer count.
pub(crate) const MAX_CAP: usize = 10_000;

/// Providers one headroom question drains at most: a maintenance window drains a rack or
/// a few, not the cloud, and each one re-places its servers before the count.
pub(crate) const MAX_WITHOUT: usize = 100;

/// How long a headroom count may run before it stops: a question must end even when the
/// cloud is slow to search, so the worker thread it holds is given back.
pub(crate) const COUNT_BUDGET: Duration = Duration::from_secs(10);

/// A copy of the store as it is now. The copy shares its objects (by `Arc`) with the
/// store, so it costs the maps' nodes, not the objects; the locks are released when it is
/// made, so a count over it never keeps a watch (a writer), or the readers queued behind
/// that writer, waiting.
fn snapshot(api: &PlacementApi) -> Result<Store, ApiError> {
    api.read(|s| Ok(s.store().clone()))
}

/// `GET /kubeplace/explain?QUERY`, over the index as it is when asked, without the lock.
pub(crate) fn explain_candidates(
    api: &PlacementApi,
    ctx: &Ctx,
    query: &str,
    stop: &Stop,
) -> Result<Reply, ApiError> {
    let q = parse_candidates_query(query, ctx.mv).map_err(ApiError::from)?;
    let index = api.read(|s| Ok(s.store().index_now()))?;
    match explain_until(&index, &q, stop) {
        Some(explained) => Ok(json_reply(StatusCode::OK, &explained)),
        None => Err(searches::past_deadline(api.searches.limits().deadline)),
    }
}

/// `GET /kubeplace/headroom?flavor=F[&without=P…][&cap=N]`, weighing candidates by the
/// API's weighers, over a copy of the store, within [`COUNT_BUDGET`].
pub(crate) fn flavor_headroom(api: &PlacementApi, query: &str) -> Result<Reply, ApiError> {
    flavor_headroom_within(api, query, COUNT_BUDGET)
}

pub(crate) fn flavor_headroom_within(
    api: &PlacementApi,
    query: &str,
    budget: Duration,
) -> Result<Reply, ApiError> {
    let started = Instant::now();
    let mut flavor = None;
    let mut without = Vec::new();
    let mut cap = DEFAULT_CAP;
    let mut project = None;
    for (key, value) in decode_pairs(query).map_err(ApiError::from)? {
        match key.as_str() {
            "flavor" => flavor = Some(value),
            "without" => {
                if without.len() == MAX_WITHOUT {
                    return Err(ApiError::bad_request(format!(
                        "without={value:?} is one provider too many: headroom drains at most {MAX_WITHOUT} providers (without=) in one question"
                    )));
                }
                without.push(value)
            }
            "project" => project = Some(value),
            "cap" => {
                cap = match value.parse::<usize>() {
                    Ok(n) if (1..=MAX_CAP).contains(&n) => n,
                    _ => {
                        return Err(ApiError::bad_request(format!(
                            "cap={value:?} is not a number of servers in the accepted range: at least 1, at most {MAX_CAP}"
                        )));
                    }
                }
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {other:?}; headroom takes flavor, without, cap and project"
                )));
            }
        }
    }
    let Some(flavor) = flavor else {
        return Err(ApiError::bad_request(
            "flavor is required: /kubeplace/headroom?flavor=NAME",
        ));
    };
    let store = snapshot(api)?;
    // Quota usage is read as it is now, before the count places servers in the copy.
    let now = project.is_some().then(|| store.clone());
    match headroom_of_copy(
        store,
        &api.weighers,
        &flavor,
        &without,
        cap,
        Some((started, budget)),
    ) {
        Ok(h) => Ok(json_reply(
            StatusCode::OK,
            &match (&project, &now) {
                (Some(project), Some(now)) => h.within_quota_of(now, project),
                _ => h,
            },
        )),
        Err(e @ (HeadroomError::UnknownFlavor { .. } | HeadroomError::UnknownProvider { .. })) => {
            Err(ApiError::not_found(e.to_string()))
        }
        Err(e) => Err(ApiError::bad_request(e.to_string())),
    }
}

/// `GET /kubeplace/quotas?project_id=P`.
pub(crate) fn project_quota(store: &Store, query: &str) -> Result<Reply, ApiError> {
    let mut project = None;
    for (key, value) in decode_pairs(query).map_err(ApiError::from)? {
        match key.as_str() {
            "project_id" => project = Some(value),
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {other:?}; quotas takes project_id"
                )));
            }
        }
    }
    let Some(project) = project.filter(|p| !p.is_empty()) else {
        return Err(ApiError::bad_request(
            "project_id is required: /kubeplace/quotas?project_id=PROJECT (a namespace or a Placement project id)",
        ));
    };
    let governing = kubeplace_policy::quota::governing(store, &project);
    let projects = governing
        .as_ref()
        .map_or_else(|| vec![project.clone()], |g| g.projects.clone());
    let used = kubeplace_policy::quota::used_by(store, &projects);
    let limits: serde_json::Map<String, serde_json::Value> = governing
        .as_ref()
        .map(|g| {
            g.limits
                .0
                .iter()
                .map(|(key, limit)| {
                    (
                        key.to_string(),
                        serde_json::json!({"limit": limit, "used": used.of(key)}),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(json_reply(
        StatusCode::OK,
        &serde_json::json!({
            "project_id": project,
            "quota": governing.as_ref().map(|g| g.quota.clone()),
            "projects": projects,
            "limits": limits,
            "usages": used.resources,
            "servers": used.servers,
        }),
    ))
}

/// Rows per section of the capacity page unless `rows` says otherwise.
pub(crate) const CAPACITY_ROWS: usize = 20;

/// `GET /kubeplace/capacity[?rows=N]`: the capacity page, `N` rows a section (0: every one).
pub(crate) fn capacity_page(store: &Store, query: &str) -> Result<Reply, ApiError> {
    let mut rows = CAPACITY_ROWS;
    for (key, value) in decode_pairs(query).map_err(ApiError::from)? {
        match key.as_str() {
            "rows" => {
                rows = value.parse().map_err(|_| {
                    ApiError::bad_request(format!(
                        "rows={value:?} is not a number of rows; give a whole number, 0 (every row) or more"
                    ))
                })?;
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {other:?}; the capacity page takes rows"
                )));
            }
        }
    }
    let page = capacity_page::render(store, PageLimits { rows }, &capacity_page::generated_now())
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    Ok(http::Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "text/html; charset=utf-8")
        .body(page.into_bytes().into())
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use bytes::Bytes;
    use http::{Request, StatusCode};
    use kubeplace_api::manifest::parse_stream;
    use kubeplace_policy::store::Store;

    use super::*;

    /// One host with room for far more servers than any cap, and a one-VCPU flavor.
    fn roomy() -> Store {
        let yaml = "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {name: cn1}\nspec:\n  inventories:\n    VCPU: {total: 100000000}\n    MEMORY_MB: {total: 100000000}\n---\napiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: tiny}\nspec: {vcpus: 1, memoryMb: 1}\n";
        let mut store = Store::default();
        for doc in parse_stream("t.yaml", yaml).unwrap() {
            store.put(doc.object().unwrap().unwrap());
        }
        store
    }

    fn get(api: &PlacementApi, path: &str) -> StatusCode {
        api.answer_request(
            Request::builder()
                .uri(path)
                .header("x-auth-token", "admin")
                .body(Bytes::new())
                .unwrap(),
        )
        .status()
    }

    /// A watch's write (the store's write lock) goes through while a headroom count with
    /// the largest cap runs: the count works on a copy, not under the lock. Before, the
    /// writer waited for the whole count (never, for cap=100000000).
    #[test]
    fn a_write_is_not_kept_waiting_by_a_headroom_count() {
        let api = Arc::new(PlacementApi::new(roomy(), "admin".into()));
        let counting = {
            let api = api.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                let status = get(
                    &api,
                    &format!("/kubeplace/headroom?flavor=tiny&cap={MAX_CAP}"),
                );
                (status, started.elapsed())
            })
        };
        // Let the count start, then write as a watch does.
        std::thread::sleep(Duration::from_millis(100));
        let asked = Instant::now();
        drop(crate::locks::write(&api.store));
        let waited = asked.elapsed();
        // The write went through while the count was still running.
        let mid_count = !counting.is_finished();
        let (status, took) = counting.join().unwrap();
        eprintln!("write waited {waited:?}; headroom answered {status} in {took:?}");
        assert!(
            waited < Duration::from_secs(1),
            "the write waited {waited:?} (the count took {took:?})"
        );
        assert!(mid_count, "the count ended first, in {took:?}");
        assert_eq!(status, StatusCode::OK);
    }

    /// A count past its budget stops with a 400 saying how far it got.
    #[test]
    fn a_count_past_its_budget_stops() {
        let api = PlacementApi::new(roomy(), "admin".into());
        let started = Instant::now();
        let e = flavor_headroom_within(
            &api,
            &format!("flavor=tiny&cap={MAX_CAP}"),
            Duration::from_millis(50),
        )
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(
            e.detail.contains("ran out of its 50 ms budget"),
            "{}",
            e.detail
        );
    }
}
