//! What the caller's `Accept` header asks for, as Placement honours it: a GET whose `Accept`
//! takes no JSON is a 406, and an error for a caller that prefers HTML is written as HTML.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, header};

use super::wire::{ErrorBody, Reply, ReplyBody};

/// One media range of an `Accept` header and its weight.
struct Range<'a> {
    kind: &'a str,
    sub: &'a str,
    q: f32,
}

fn ranges(headers: &HeaderMap) -> Option<Vec<Range<'_>>> {
    let value = headers.get(header::ACCEPT)?.to_str().ok()?;
    if value.trim().is_empty() {
        return None;
    }
    let ranges = value
        .split(',')
        .filter_map(|item| {
            let mut parts = item.split(';');
            let (kind, sub) = parts.next()?.trim().split_once('/')?;
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            Some(Range {
                kind: kind.trim(),
                sub: sub.trim(),
                q,
            })
        })
        .collect();
    Some(ranges)
}

/// The weight `Accept` gives `kind/sub`: that of the most specific range matching it, 0
/// when none does.
fn weight(ranges: &[Range<'_>], kind: &str, sub: &str) -> f32 {
    let exact = ranges
        .iter()
        .find(|r| r.kind.eq_ignore_ascii_case(kind) && r.sub.eq_ignore_ascii_case(sub));
    let family = || {
        ranges
            .iter()
            .find(|r| r.kind.eq_ignore_ascii_case(kind) && r.sub == "*")
    };
    let any = || ranges.iter().find(|r| r.kind == "*" && r.sub == "*");
    exact.or_else(family).or_else(any).map_or(0.0, |r| r.q)
}

/// Whether the caller takes JSON: no `Accept` (or an empty one), or one that gives
/// `application/json` a weight above 0.
#[cfg(test)]
pub(crate) fn takes_json(headers: &HeaderMap) -> bool {
    takes(headers, "application", "json")
}

/// Whether the caller takes `kind/sub`: no `Accept` (or an empty one), or one that gives
/// it a weight above 0.
pub(crate) fn takes(headers: &HeaderMap, kind: &str, sub: &str) -> bool {
    match ranges(headers) {
        None => true,
        Some(r) => weight(&r, kind, sub) > 0.0,
    }
}

/// Whether the caller prefers HTML to JSON and plain text, as a browser does.
fn prefers_html(headers: &HeaderMap) -> bool {
    let Some(r) = ranges(headers) else {
        return false;
    };
    let html = weight(&r, "text", "html");
    html > 0.0 && html > weight(&r, "application", "json") && html >= weight(&r, "text", "plain")
}

/// An answer written for the caller: an error as HTML (its title and detail) when the
/// caller prefers HTML, anything else as it is.
pub(crate) fn error_for(headers: &HeaderMap, reply: Reply) -> Reply {
    let Some(ErrorBody(body)) = reply.extensions().get::<ErrorBody>() else {
        return reply;
    };
    if !prefers_html(headers) {
        return reply;
    }
    let entry = &body["errors"][0];
    let title = entry["title"].as_str().unwrap_or("Error");
    let detail = entry["detail"].as_str().unwrap_or("");
    let html = html_page(reply.status().as_u16(), title, detail);
    let (mut parts, _) = reply.into_parts();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=UTF-8"),
    );
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(html.len()));
    http::Response::from_parts(parts, ReplyBody::from(Bytes::from(html)))
}

/// An error page: the status and title, then the detail, escaped.
fn html_page(status: u16, title: &str, detail: &str) -> String {
    format!(
        "<html>\n <head>\n  <title>{status} {}</title>\n </head>\n <body>\n  <h1>{status} {}</h1>\n  {}\n </body>\n</html>\n",
        escape(title),
        escape(title),
        escape(detail).replace("\n\n", "<br /><br />\n")
    )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, value.parse().unwrap());
        h
    }

    #[test]
    fn json_is_taken_unless_the_accept_header_leaves_it_out() {
        assert!(takes_json(&HeaderMap::new()));
        assert!(takes_json(&accept("application/json")));
        assert!(takes_json(&accept("application/*")));
        assert!(takes_json(&accept(
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        )));
        assert!(!takes_json(&accept("text/plain")));
        assert!(!takes_json(&accept(
            "text/html,application/xhtml+xml,application/xml;q=0.9"
        )));
        assert!(!takes_json(&accept("application/json;q=0, text/plain")));
    }

    #[test]
    fn html_is_preferred_only_when_weighed_above_json() {
        assert!(prefers_html(&accept("text/html")));
        assert!(prefers_html(&accept(
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        )));
        assert!(!prefers_html(&accept("application/json")));
        assert!(!prefers_html(&accept("text/html;q=0.5, application/json")));
        assert!(!prefers_html(&HeaderMap::new()));
    }

    #[test]
    fn an_error_is_html_for_a_browser_and_json_for_others() {
        let body = serde_json::json!({"errors": [{"title": "Not Found", "detail": "no <b>such</b> thing"}]});
        let reply = || {
            let mut r = http::Response::builder()
                .status(404)
                .header(header::CONTENT_TYPE, "application/json")
                .body(ReplyBody::from(Bytes::from_static(b"{}")))
                .unwrap();
            r.extensions_mut().insert(ErrorBody(body.clone()));
            r
        };
        let html = error_for(&accept("text/html"), reply());
        assert_eq!(
            html.headers()[header::CONTENT_TYPE],
            "text/html; charset=UTF-8"
        );
        let json = error_for(&accept("application/json"), reply());
        assert_eq!(json.headers()[header::CONTENT_TYPE], "application/json");
        // A page escapes what the detail holds.
        let page = html_page(404, "Not Found", "no <b>such</b> thing");
        assert!(page.contains("no &lt;b&gt;such&lt;/b&gt; thing"), "{page}");
        assert!(page.contains("<title>404 Not Found</title>"), "{page}");
    }
}
