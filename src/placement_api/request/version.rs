//! Microversions: the `OpenStack-API-Version: placement X.Y` header, and `GET /`.

use http::{HeaderMap, StatusCode};
use serde_json::json;

use super::wire::{ApiError, Reply, json_reply};
pub(crate) use kubeplace_core::placement::microversion::Microversion as Version;

/// The version a request without a header gets, as in Placement.
pub(crate) const MIN: Version = Version(0);

/// The newest version served.
pub(crate) const MAX: Version = Version::LATEST;

/// Why the requested version is not served.
#[derive(Debug)]
pub(crate) enum VersionError {
    /// Not `X.Y` or `latest`: 400.
    Malformed(String),
    /// Outside 1.0–1.39: 406.
    Unacceptable(String),
}

impl VersionError {
    pub(crate) fn into_api_error(self) -> ApiError {
        match self {
            VersionError::Malformed(v) => ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "invalid version string: {v}; send `OpenStack-API-Version: placement 1.N` with N from 0 to 39, or `latest`"
                ),
            ),
            VersionError::Unacceptable(v) => ApiError::new(
                StatusCode::NOT_ACCEPTABLE,
                format!("Unacceptable version header: {v}"),
            ),
        }
    }
}

/// The version a request asks for: `OpenStack-API-Version: placement X.Y` (one entry of a
/// comma-separated list of services), else 1.0. Placement 16 ignores the legacy
/// `X-OpenStack-Placement-API-Version` header, and so does kubeplace.
pub(crate) fn requested(headers: &HeaderMap) -> Result<Version, VersionError> {
    // Several headers fold into one list; the last placement entry wins, and an entry
    // without a version is skipped, as microversion_parse does.
    let entries: Vec<String> = headers
        .get_all("openstack-api-version")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::to_string)
        .collect();
    let from_new = entries.iter().rev().find_map(|entry| {
        let (service, version) = entry.trim().split_once(char::is_whitespace)?;
        service
            .eq_ignore_ascii_case("placement")
            .then(|| version.trim().to_string())
    });
    match from_new {
        None => Ok(MIN),
        Some(v) => parse(&v),
    }
}

fn parse(v: &str) -> Result<Version, VersionError> {
    if v.eq_ignore_ascii_case("latest") {
        return Ok(MAX);
    }
    let malformed = || VersionError::Malformed(v.to_string());
    let (major, minor) = v.split_once('.').ok_or_else(malformed)?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(major) || !digits(minor) {
        return Err(malformed());
    }
    let (major, minor): (u32, u32) = match (major.parse(), minor.parse()) {
        (Ok(a), Ok(b)) => (a, b),
        _ => return Err(VersionError::Unacceptable(v.to_string())),
    };
    if major != 1 || minor > u32::from(MAX.0) {
        return Err(VersionError::Unacceptable(v.to_string()));
    }
    Ok(Version(minor as u16))
}

/// `GET /`: the one version document.
pub(crate) fn discovery() -> Reply {
    json_reply(
        StatusCode::OK,
        &json!({"versions": [{
            "id": "v1.0",
            "max_version": MAX.to_string(),
            "min_version": "1.0",
            "status": "CURRENT",
            "links": [{"rel": "self", "href": ""}],
        }]}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: &str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
        h
    }

    #[test]
    fn reads_the_placement_entry() {
        let h = with("OpenStack-API-Version", "compute 2.1, placement 1.17");
        assert_eq!(requested(&h).unwrap(), Version(17));
        let h = with("OpenStack-API-Version", "placement latest");
        assert_eq!(requested(&h).unwrap(), MAX);
        assert_eq!(requested(&HeaderMap::new()).unwrap(), Version(0));
        let h = with("X-OpenStack-Placement-API-Version", "1.5");
        assert_eq!(requested(&h).unwrap(), Version(0));
    }

    #[test]
    fn refuses_bad_versions() {
        let h = with("OpenStack-API-Version", "placement 1.40");
        assert!(matches!(requested(&h), Err(VersionError::Unacceptable(_))));
        let h = with("OpenStack-API-Version", "placement 2.0");
        assert!(matches!(requested(&h), Err(VersionError::Unacceptable(_))));
        let h = with("OpenStack-API-Version", "placement 1.x");
        assert!(matches!(requested(&h), Err(VersionError::Malformed(_))));
        let h = with("OpenStack-API-Version", "placement");
        assert_eq!(requested(&h).unwrap(), Version(0));
        let h = with("OpenStack-API-Version", "placement 1.2.3");
        assert!(matches!(requested(&h), Err(VersionError::Malformed(_))));
    }
}
