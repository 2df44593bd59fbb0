//! Who may call which endpoint, by role and scope: Placement 16's default policies
//! (enforce_scope and enforce_new_defaults on, as oslo.policy 6 has them by default), in
//! one table. They apply to callers that come with roles: Keystone tokens, and the test
//! mode that takes roles from headers. The static token of `serve` and Kubernetes callers
//! (whose RBAC verb was already checked) are not judged here.
//!
//! Measured against Placement 16 behind keystonemiddleware (tests/placement_keystone.rs
//! asserts the same answers from both): a project-scoped token with the role `admin` or
//! `service` may call every endpoint but `POST /reshaper`, which is `service` alone; a
//! project-scoped `reader` (Keystone's `member` and `admin` imply it) may read the usages of
//! its own project (`GET /usages?project_id=` its project) and nothing else; tokens scoped
//! to the system or a domain, and unscoped ones, are refused everything.

use crate::placement_api::caller::Credentials;
use http::Method;

/// What a rule asks of a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// `role:admin or role:service`, project scope.
    AdminOrService,
    /// `role:service`, project scope.
    Service,
    /// `role:admin or (role:reader and project_id:%(project_id)s) or role:service`,
    /// project scope; the target is the `project_id` the request asks about.
    AdminOrProjectReaderOrService,
}

/// One endpoint's policy: the method, the path (`{…}` stands for any one segment), the
/// policy's name in Placement, and its rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub method: &'static str,
    pub path: &'static str,
    pub name: &'static str,
    pub rule: Rule,
}

const fn entry(method: &'static str, path: &'static str, name: &'static str, rule: Rule) -> Entry {
    Entry {
        method,
        path,
        name,
        rule,
    }
}

use Rule::{AdminOrProjectReaderOrService as ProjectReader, AdminOrService, Service};

/// Every endpoint served, with Placement 16's policy for it (`placement/policies/` in its
/// package). kubeplace's own searches (`/kubeplace/…`) take the rule of
/// `GET /allocation_candidates`, whose work they share.
pub const TABLE: &[Entry] = &[
    entry(
        "GET",
        "/resource_providers",
        "placement:resource_providers:list",
        AdminOrService,
    ),
    entry(
        "POST",
        "/resource_providers",
        "placement:resource_providers:create",
        AdminOrService,
    ),
    entry(
        "GET",
        "/resource_providers/{uuid}",
        "placement:resource_providers:show",
        AdminOrService,
    ),
    entry(
        "PUT",
        "/resource_providers/{uuid}",
        "placement:resource_providers:update",
        AdminOrService,
    ),
    entry(
        "DELETE",
        "/resource_providers/{uuid}",
        "placement:resource_providers:delete",
        AdminOrService,
    ),
    entry(
        "GET",
        "/resource_providers/{uuid}/inventories",
        "placement:resource_providers:inventories:list",
        AdminOrService,
    ),
    entry(
        "POST",
        "/resource_providers/{uuid}/inventories",
        "placement:resource_providers:inventories:create",
        AdminOrService,
    ),
    entry(
        "PUT",
        "/resource_providers/{uuid}/inventories",
        "placement:resource_providers:inventories:update",
        AdminOrService,
    ),
    entry(
        "DELETE",
        "/resource_providers/{uuid}/inventories",
        "placement:resource_providers:inventories:delete",
        AdminOrService,
    ),
    entry(
        "GET",
        "/resource_providers/{uuid}/inventories/{resource_class}",
        "placement:resource_providers:inventories:show",
        AdminOrService,
    ),
    entry(
        "PUT",
        "/resource_providers/{uuid}/inventories/{resource_class}",
        "placement:resource_providers:inventories:update",
        AdminOrService,
    ),
    entry(
        "DELETE",
        "/resource_providers/{uuid}/inventories/{resource_class}",
        "placement:resource_providers:inventories:delete",
        AdminOrService,
    ),
    entry(
        "GET",
        "/resource_providers/{uuid}/aggregates",
        "placement:resource_providers:aggregates:list",
        AdminOrService,
    ),
    entry(
        "PUT",
        "/resource_providers/{uuid}/aggregates",
        "placement:resource_providers:aggregates:update",
        AdminOrService,
    ),
    entry(
        "GET",
        "/resource_providers/{uuid}/traits",
        "placement:resource_providers:traits:list",
        AdminOrService,
    ),
    entry(
        "PUT",
        "/resource_providers/{uuid}/traits",
        "placement:resource_providers:traits:update",
        AdminOrService,
    ),
    entry(
        "DELETE",
        "/resource_providers/{uuid}/traits",
        "placement:resource_providers:traits:delete",
        AdminOrService,
    ),
    entry(
        "GET",
        "/resource_providers/{uuid}/usages",
        "placement:resource_providers:usages",
        AdminOrService,
    ),
    entry(
        "GET",
        "/resource_providers/{uuid}/allocations",
        "placement:resource_providers:allocations:list",
        AdminOrService,
    ),
    entry(
        "GET",
        "/resource_classes",
        "placement:resource_classes:list",
        AdminOrService,
    ),
    entry(
        "POST",
        "/resource_classes",
        "placement:resource_classes:create",
        AdminOrService,
    ),
    entry(
        "GET",
        "/resource_classes/{name}",
        "placement:resource_classes:show",
        AdminOrService,
    ),
    entry(
        "PUT",
        "/resource_classes/{name}",
        "placement:resource_classes:update",
        AdminOrService,
    ),
    entry(
        "DELETE",
        "/resource_classes/{name}",
        "placement:resource_classes:delete",
        AdminOrService,
    ),
    entry("GET", "/traits", "placement:traits:list", AdminOrService),
    entry(
        "GET",
        "/traits/{name}",
        "placement:traits:show",
        AdminOrService,
    ),
    entry(
        "PUT",
        "/traits/{name}",
        "placement:traits:update",
        AdminOrService,
    ),
    entry(
        "DELETE",
        "/traits/{name}",
        "placement:traits:delete",
        AdminOrService,
    ),
    entry(
        "POST",
        "/allocations",
        "placement:allocations:manage",
        AdminOrService,
    ),
    entry(
        "GET",
        "/allocations/{consumer_uuid}",
        "placement:allocations:list",
        AdminOrService,
    ),
    entry(
        "PUT",
        "/allocations/{consumer_uuid}",
        "placement:allocations:update",
        AdminOrService,
    ),
    entry(
        "DELETE",
        "/allocations/{consumer_uuid}",
        "placement:allocations:delete",
        AdminOrService,
    ),
    entry(
        "GET",
        "/allocation_candidates",
        "placement:allocation_candidates:list",
        AdminOrService,
    ),
    entry("GET", "/usages", "placement:usages", ProjectReader),
    entry("POST", "/reshaper", "placement:reshaper:reshape", Service),
    entry(
        "GET",
        "/kubeplace/explain",
        "placement:allocation_candidates:list",
        AdminOrService,
    ),
    entry(
        "GET",
        "/kubeplace/headroom",
        "placement:allocation_candidates:list",
        AdminOrService,
    ),
    entry(
        "GET",
        "/kubeplace/quotas",
        "placement:usages",
        ProjectReader,
    ),
    // Every provider's usage and every project's quota: what listing providers shows.
    entry(
        "GET",
        "/kubeplace/capacity",
        "placement:resource_providers:list",
        AdminOrService,
    ),
];

/// The policy of a request, by method and path; `None` for a path not served (its 404 or
/// 405 comes from the router).
pub fn lookup(method: &Method, path: &str) -> Option<&'static Entry> {
    let method = if method == Method::HEAD {
        "GET"
    } else {
        method.as_str()
    };
    let segments = crate::placement_api::request::routes::segments(path);
    TABLE.iter().find(|e| {
        let pattern: Vec<&str> = e.path.split('/').filter(|s| !s.is_empty()).collect();
        e.method == method
            && pattern.len() == segments.len()
            && pattern
                .iter()
                .zip(&segments)
                .all(|(p, s)| p.starts_with('{') || p == s)
    })
}

/// Whether `creds` may do what `entry` guards, about `target_project` (the `project_id`
/// the request names, for rules that look at it). The refusal is Placement's words.
pub fn authorize(
    entry: &Entry,
    creds: &Credentials,
    target_project: Option<&str>,
) -> Result<(), String> {
    let refused = || {
        Err(format!(
            "Policy does not allow {} to be performed.",
            entry.name
        ))
    };
    // Every rule is for project scope: a system- or domain-scoped token is refused before
    // its roles are looked at.
    if creds.scope() != "project" {
        return refused();
    }
    let allowed = match entry.rule {
        Rule::AdminOrService => creds.has("admin") || creds.has("service"),
        Rule::Service => creds.has("service"),
        Rule::AdminOrProjectReaderOrService => {
            creds.has("admin")
                || creds.has("service")
                || (creds.has("reader")
                    && creds.project_id.is_some()
                    && creds.project_id.as_deref() == target_project)
        }
    };
    if allowed { Ok(()) } else { refused() }
}

/// The last value of `name` in a query string, decoded, as Placement reads one parameter.
pub fn query_value(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k) == name).then(|| decode(v))
        })
        .next_back()
}

/// Percent-decoding with `+` as a space, as a form's query string is read.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push(high * 16 + low);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(roles: &[&str], project: Option<&str>) -> Credentials {
        Credentials {
            roles: roles.iter().map(|r| r.to_string()).collect(),
            project_id: project.map(str::to_string),
            ..Credentials::default()
        }
    }

    #[test]
    fn every_route_of_the_router_has_a_policy() {
        for (method, path) in [
            (Method::GET, "/resource_providers/u/inventories/VCPU"),
            (Method::HEAD, "/traits"),
            (Method::POST, "/reshaper"),
            (Method::GET, "/usages"),
            (Method::GET, "/kubeplace/explain"),
        ] {
            assert!(lookup(&method, path).is_some(), "{method} {path}");
        }
        assert_eq!(
            lookup(&Method::PUT, "/resource_providers/u/traits").map(|e| e.name),
            Some("placement:resource_providers:traits:update")
        );
        assert!(lookup(&Method::GET, "/nowhere").is_none());
        assert!(lookup(&Method::PATCH, "/traits").is_none());
    }

    /// A project's quota is read as its usages are: a reader of the project may, another
    /// project's may not.
    #[test]
    fn a_projects_quota_is_read_under_the_usages_rule() {
        let quotas = lookup(&Method::GET, "/kubeplace/quotas").unwrap();
        assert_eq!(quotas.name, "placement:usages");
        let member = creds(&["member", "reader"], Some("p1"));
        assert!(authorize(quotas, &member, Some("p1")).is_ok());
        assert!(authorize(quotas, &member, Some("p2")).is_err());
    }

    #[test]
    fn roles_and_scope_decide_as_placements_defaults() {
        let list = lookup(&Method::GET, "/resource_providers").unwrap();
        let reshape = lookup(&Method::POST, "/reshaper").unwrap();
        let usages = lookup(&Method::GET, "/usages").unwrap();
        let admin = creds(&["admin", "member", "reader"], Some("p1"));
        let service = creds(&["service"], Some("svc"));
        let member = creds(&["member", "reader"], Some("p1"));
        let observer = creds(&["observer"], Some("p1"));
        let unscoped = creds(&[], None);
        let system = Credentials {
            system: true,
            ..creds(&["admin", "member", "reader"], None)
        };
        assert!(authorize(list, &admin, None).is_ok());
        assert!(authorize(list, &service, None).is_ok());
        assert!(authorize(list, &member, None).is_err());
        assert!(authorize(reshape, &service, None).is_ok());
        let e = authorize(reshape, &admin, None).unwrap_err();
        assert_eq!(
            e,
            "Policy does not allow placement:reshaper:reshape to be performed."
        );
        assert!(authorize(usages, &member, Some("p1")).is_ok());
        assert!(authorize(usages, &member, Some("p2")).is_err());
        assert!(authorize(usages, &member, None).is_err());
        assert!(authorize(usages, &admin, Some("p2")).is_ok());
        assert!(authorize(usages, &observer, Some("p1")).is_err());
        for e in TABLE {
            assert!(authorize(e, &unscoped, Some("p1")).is_err(), "{}", e.name);
            assert!(authorize(e, &system, None).is_err(), "{}", e.name);
        }
    }

    #[test]
    fn the_target_project_is_the_last_one_named_decoded() {
        assert_eq!(
            query_value("project_id=a&user_id=u&project_id=b%2Dc", "project_id"),
            Some("b-c".into())
        );
        assert_eq!(query_value("user_id=u", "project_id"), None);
        assert_eq!(query_value("project_id", "project_id"), Some(String::new()));
        assert_eq!(
            query_value("project_id=%zz%4", "project_id"),
            Some("%zz%4".into())
        );
    }
}
