//! How a request reached the Placement API, for the absolute URLs it answers with
//! (`Location`): the scheme it was served over and the `Host` the caller named; behind a
//! proxy trusted to say so (`--placement-proxy-headers`, Placement's `[oslo_middleware]
//! enable_proxy_headers_parsing`), the scheme and host the proxy reports — the first
//! entry of `Forwarded` (RFC 7239), else `X-Forwarded-Proto` and `X-Forwarded-Host` — and
//! the path prefix of `X-Forwarded-Prefix`. The port a scheme implies (80 for http, 443
//! for https) is left out of the host, as Placement's answers leave it out.

use std::collections::HashMap;

use http::HeaderMap;

/// What decides the URLs a request is answered with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Origin {
    /// Served over TLS.
    pub https: bool,
    /// The proxy headers are believed (only behind a proxy that sets them).
    pub proxy_headers: bool,
}

impl Origin {
    /// The absolute URL of `path` as the caller reached this server; `path` alone when the
    /// request names no host.
    pub fn url(&self, headers: &HeaderMap, path: &str) -> String {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let mut scheme = if self.https { "https" } else { "http" }.to_string();
        let mut host = header("host").map(str::to_string);
        let mut prefix = String::new();
        if self.proxy_headers {
            let (proto, forwarded_host) = match header("forwarded") {
                Some(forwarded) => {
                    let first = first_forwarded(forwarded);
                    (first.get("proto").cloned(), first.get("host").cloned())
                }
                None => (
                    header("x-forwarded-proto").map(str::to_string),
                    header("x-forwarded-host").map(str::to_string),
                ),
            };
            if let Some(proto) = proto.filter(|p| !p.is_empty()) {
                scheme = proto;
            }
            if let Some(h) = forwarded_host.filter(|h| !h.is_empty()) {
                host = Some(h);
            }
            prefix = header("x-forwarded-prefix").unwrap_or_default().to_string();
        }
        let Some(host) = host.filter(|h| !h.is_empty()) else {
            return format!("{prefix}{path}");
        };
        let implied = match scheme.as_str() {
            "http" => ":80",
            "https" => ":443",
            _ => "",
        };
        let host = match implied {
            "" => host.as_str(),
            port => host.strip_suffix(port).unwrap_or(&host),
        };
        format!("{scheme}://{host}{prefix}{path}")
    }
}

/// The first proxy's entry of a `Forwarded` header, keys lowercased, values trimmed; a
/// key given twice keeps its last value.
fn first_forwarded(header: &str) -> HashMap<String, String> {
    let first = header.split(',').next().unwrap_or_default();
    first
        .split(';')
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (key.trim().to_ascii_lowercase(), value.trim().to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(*name, value.parse().unwrap());
        }
        h
    }

    const PLAIN: Origin = Origin {
        https: false,
        proxy_headers: false,
    };
    const TLS: Origin = Origin {
        https: true,
        proxy_headers: false,
    };
    const PROXIED: Origin = Origin {
        https: false,
        proxy_headers: true,
    };

    #[test]
    fn the_scheme_served_and_the_host_named() {
        let h = headers(&[("host", "placement.example:8778")]);
        assert_eq!(
            PLAIN.url(&h, "/traits/CUSTOM_A"),
            "http://placement.example:8778/traits/CUSTOM_A"
        );
        assert_eq!(
            TLS.url(&h, "/traits/CUSTOM_A"),
            "https://placement.example:8778/traits/CUSTOM_A"
        );
        assert_eq!(PLAIN.url(&HeaderMap::new(), "/x"), "/x", "no host named");
        let implied = headers(&[("host", "placement.example:443")]);
        assert_eq!(TLS.url(&implied, "/x"), "https://placement.example/x");
        assert_eq!(PLAIN.url(&implied, "/x"), "http://placement.example:443/x");
    }

    #[test]
    fn proxy_headers_count_only_when_trusted() {
        let h = headers(&[
            ("host", "10.0.0.5:8778"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "placement.example"),
            ("x-forwarded-prefix", "/placement"),
        ]);
        assert_eq!(PLAIN.url(&h, "/x"), "http://10.0.0.5:8778/x");
        assert_eq!(
            PROXIED.url(&h, "/x"),
            "https://placement.example/placement/x"
        );
    }

    #[test]
    fn forwarded_wins_over_the_older_headers_and_its_first_entry_counts() {
        let h = headers(&[
            ("host", "10.0.0.5:8778"),
            ("x-forwarded-proto", "http"),
            (
                "forwarded",
                "for=192.0.2.60;Proto=https;host=api.example:443, proto=http;host=inner",
            ),
        ]);
        assert_eq!(PROXIED.url(&h, "/x"), "https://api.example/x");
        // An entry without proto or host leaves the served scheme and the Host.
        let h = headers(&[("host", "10.0.0.5:8778"), ("forwarded", "for=192.0.2.60")]);
        assert_eq!(PROXIED.url(&h, "/x"), "http://10.0.0.5:8778/x");
    }
}
