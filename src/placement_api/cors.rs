//! Cross-origin requests, as Placement answers them with `[cors] allowed_origin` set (its
//! oslo.middleware CORS layer, outside authentication): a preflight `OPTIONS` is answered
//! 200 with no body and, for an origin, method and headers allowed, the `Access-Control-*`
//! headers that let a browser send the request; any other answer to an allowed origin carries
//! `Access-Control-Allow-Origin` (and credentials and exposed headers as set). With no origin
//! set, nothing changes.

use http::{HeaderMap, HeaderValue, Method};

use crate::placement_api::request::wire::Reply;

/// Headers a browser may always send (oslo.middleware's simple headers).
const SIMPLE_HEADERS: &[&str] = &[
    "Accept",
    "Accept-Language",
    "Content-Type",
    "Cache-Control",
    "Content-Language",
    "Expires",
    "Last-Modified",
    "Pragma",
];

/// The methods allowed unless told otherwise (oslo.middleware's default).
pub const DEFAULT_METHODS: &[&str] = &[
    "OPTIONS", "GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "PATCH",
];

/// The CORS settings, as `[cors]` names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cors {
    /// Origins allowed (`*` for any); empty turns CORS off.
    pub allowed_origins: Vec<String>,
    pub allow_credentials: bool,
    pub expose_headers: Vec<String>,
    /// Seconds a browser may keep a preflight's answer; none for no `Access-Control-Max-Age`.
    pub max_age: Option<u32>,
    pub allow_methods: Vec<String>,
    pub allow_headers: Vec<String>,
}

impl Default for Cors {
    fn default() -> Cors {
        Cors {
            allowed_origins: Vec::new(),
            allow_credentials: true,
            expose_headers: Vec::new(),
            max_age: Some(3600),
            allow_methods: DEFAULT_METHODS.iter().map(|m| m.to_string()).collect(),
            allow_headers: Vec::new(),
        }
    }
}

/// What a request says that CORS reads, taken before the request is handled.
pub struct CorsAsk {
    origin: Option<String>,
    preflight: bool,
    method: Option<String>,
    headers: Vec<String>,
}

impl Cors {
    /// Whether any origin is allowed.
    pub fn on(&self) -> bool {
        !self.allowed_origins.is_empty()
    }

    /// The origin as answered: itself when listed, `*` when any origin is; none otherwise.
    fn allowed(&self, origin: &str) -> Option<String> {
        if self.allowed_origins.iter().any(|o| o == origin) {
            Some(origin.to_string())
        } else if self.allowed_origins.iter().any(|o| o == "*") {
            Some("*".to_string())
        } else {
            None
        }
    }

    /// Reads what CORS needs from a request's method and headers; `None` when CORS is off.
    pub fn ask(&self, method: &Method, headers: &HeaderMap) -> Option<CorsAsk> {
        if !self.on() {
            return None;
        }
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        Some(CorsAsk {
            origin: text("origin"),
            preflight: method == Method::OPTIONS,
            method: text("access-control-request-method"),
            headers: text("access-control-request-headers")
                .map(|h| {
                    h.split(',')
                        .map(str::trim)
                        .filter(|v| !v.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// The answer to a preflight: 200, no body, and the headers that allow the request when
    /// its origin, method and headers are all allowed.
    pub fn preflight(&self, ask: &CorsAsk) -> Reply {
        let mut reply = http::Response::new(Default::default());
        *reply.status_mut() = http::StatusCode::OK;
        reply
            .headers_mut()
            .insert(http::header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        let Some(origin) = ask.origin.as_deref().and_then(|o| self.allowed(o)) else {
            return reply;
        };
        let Some(method) = &ask.method else {
            return reply;
        };
        if !self.allow_methods.iter().any(|m| m == method) {
            return reply;
        }
        let permitted = |h: &str| {
            self.allow_headers
                .iter()
                .map(String::as_str)
                .chain(SIMPLE_HEADERS.iter().copied())
                .any(|p| p.eq_ignore_ascii_case(h))
        };
        if !ask.headers.iter().all(|h| permitted(h)) {
            return reply;
        }
        let headers = reply.headers_mut();
        self.allow_origin(headers, &origin);
        if let Some(age) = self.max_age.filter(|a| *a > 0) {
            put(headers, "access-control-max-age", &age.to_string());
        }
        put(headers, "access-control-allow-methods", method);
        if !ask.headers.is_empty() {
            put(
                headers,
                "access-control-allow-headers",
                &ask.headers.join(","),
            );
        }
        reply
    }

    /// Adds to an answer the headers an allowed origin is given.
    pub fn decorate(&self, ask: &CorsAsk, mut reply: Reply) -> Reply {
        let Some(origin) = ask.origin.as_deref().and_then(|o| self.allowed(o)) else {
            return reply;
        };
        let headers = reply.headers_mut();
        if headers.contains_key("access-control-allow-origin") {
            return reply;
        }
        self.allow_origin(headers, &origin);
        if !self.expose_headers.is_empty() {
            put(
                headers,
                "access-control-expose-headers",
                &self.expose_headers.join(","),
            );
        }
        reply
    }
}

impl Cors {
    /// The headers every answer to an allowed origin carries: `Vary: Origin` (added to any
    /// `Vary` there), the origin, and credentials when allowed.
    fn allow_origin(&self, headers: &mut HeaderMap, origin: &str) {
        let vary = match headers.get("vary").and_then(|v| v.to_str().ok()) {
            Some(v) => format!("{v},Origin"),
            None => "Origin".to_string(),
        };
        put(headers, "vary", &vary);
        put(headers, "access-control-allow-origin", origin);
        if self.allow_credentials {
            put(headers, "access-control-allow-credentials", "true");
        }
    }
}

impl CorsAsk {
    /// Whether the request is a preflight: `OPTIONS`, answered here and never by a route.
    pub fn is_preflight(&self) -> bool {
        self.preflight
    }
}

/// Sets a header whose value was read from a request or set by flags (visible ASCII); a
/// value a header cannot hold is left out.
fn put(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        headers.insert(name, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cors() -> Cors {
        Cors {
            allowed_origins: vec!["http://valid.example.com".into()],
            allow_headers: vec!["openstack-api-version".into()],
            ..Cors::default()
        }
    }

    fn ask(c: &Cors, method: Method, pairs: &[(&'static str, &str)]) -> CorsAsk {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        c.ask(&method, &h).expect("on")
    }

    fn header(r: &Reply, name: &str) -> Option<String> {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    }

    #[test]
    fn a_preflight_from_an_allowed_origin_is_allowed_its_method_and_headers() {
        let c = cors();
        let a = ask(
            &c,
            Method::OPTIONS,
            &[
                ("origin", "http://valid.example.com"),
                ("access-control-request-method", "GET"),
                ("access-control-request-headers", "openstack-api-version"),
            ],
        );
        let r = c.preflight(&a);
        assert_eq!(r.status(), 200);
        assert_eq!(
            header(&r, "access-control-allow-origin").as_deref(),
            Some("http://valid.example.com")
        );
        assert_eq!(
            header(&r, "access-control-allow-headers").as_deref(),
            Some("openstack-api-version")
        );
        assert_eq!(
            header(&r, "access-control-allow-methods").as_deref(),
            Some("GET")
        );
        assert_eq!(
            header(&r, "access-control-max-age").as_deref(),
            Some("3600")
        );
        assert_eq!(
            header(&r, "access-control-allow-credentials").as_deref(),
            Some("true")
        );
    }

    #[test]
    fn a_preflight_outside_what_is_allowed_gets_200_and_no_cors_headers() {
        let c = cors();
        for pairs in [
            vec![
                ("origin", "http://invalid.example.com"),
                ("access-control-request-method", "GET"),
            ],
            vec![("origin", "http://valid.example.com")],
            vec![
                ("origin", "http://valid.example.com"),
                ("access-control-request-method", "CONNECT"),
            ],
            vec![
                ("origin", "http://valid.example.com"),
                ("access-control-request-method", "GET"),
                ("access-control-request-headers", "x-auth-token"),
            ],
        ] {
            let r = c.preflight(&ask(&c, Method::OPTIONS, &pairs));
            assert_eq!(r.status(), 200);
            assert!(
                header(&r, "access-control-allow-origin").is_none(),
                "{pairs:?}"
            );
        }
    }

    #[test]
    fn answers_to_an_allowed_origin_carry_its_headers_others_none() {
        let c = Cors {
            expose_headers: vec!["X-Openstack-Request-Id".into()],
            ..cors()
        };
        let valid = ask(&c, Method::GET, &[("origin", "http://valid.example.com")]);
        let r = c.decorate(&valid, http::Response::new(Default::default()));
        assert_eq!(
            header(&r, "access-control-allow-origin").as_deref(),
            Some("http://valid.example.com")
        );
        assert_eq!(header(&r, "vary").as_deref(), Some("Origin"));
        assert_eq!(
            header(&r, "access-control-expose-headers").as_deref(),
            Some("X-Openstack-Request-Id")
        );
        let invalid = ask(&c, Method::GET, &[("origin", "http://invalid.example.com")]);
        let r = c.decorate(&invalid, http::Response::new(Default::default()));
        assert!(header(&r, "access-control-allow-origin").is_none());
        // Any origin, when `*` is allowed, answered as `*`.
        let any = Cors {
            allowed_origins: vec!["*".into()],
            ..Cors::default()
        };
        let a = ask(
            &any,
            Method::GET,
            &[("origin", "http://elsewhere.example.com")],
        );
        let r = any.decorate(&a, http::Response::new(Default::default()));
        assert_eq!(
            header(&r, "access-control-allow-origin").as_deref(),
            Some("*")
        );
    }

    #[test]
    fn off_without_an_origin() {
        let c = Cors::default();
        assert!(c.ask(&Method::OPTIONS, &HeaderMap::new()).is_none());
    }
}
