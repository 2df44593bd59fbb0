//! The `[keystone_authtoken]` section of an oslo-style INI file (`--keystone-authtoken
//! FILE`), as an operator copies it from placement.conf: which Keystone to ask, as whom,
//! and how long answers are kept. Keys keystonemiddleware and keystoneauth's password
//! plugin take are read or knowingly ignored; a key whose value kubeplace cannot honour is
//! refused, naming the key, the value and what is taken.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a validated token's answer is kept unless `token_cache_time` says otherwise:
/// keystonemiddleware's default.
pub const DEFAULT_CACHE_TIME: Duration = Duration::from_secs(300);
/// How long connecting to Keystone may take unless `http_connect_timeout` says otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one request to Keystone may take in all unless `timeout` says otherwise.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Retries of a request Keystone did not answer, unless `http_request_max_retries` says
/// otherwise (keystonemiddleware's default).
pub const DEFAULT_RETRIES: u32 = 3;
/// The longest `token_cache_time` taken: a revoked token passes for as long as this.
const MAX_CACHE_TIME: u64 = 3600;

/// What kubeplace needs of the section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeystoneConfig {
    /// Keystone's identity API, `…/v3` (from `auth_url`, `/v3` added when it is not there).
    pub identity_url: String,
    /// What a 401's `WWW-Authenticate: Keystone uri="…"` names (`www_authenticate_uri`,
    /// else the deprecated `auth_uri`, else `auth_url`).
    pub www_authenticate_uri: String,
    /// How kubeplace logs in: the service user's password, or an application credential.
    pub credential: Credential,
    /// A PEM bundle of the CAs Keystone's certificate is checked against (`cafile`);
    /// without it, the system's.
    pub cafile: Option<PathBuf>,
    /// How long a token's answer is kept (`token_cache_time`); zero keeps none.
    pub cache_time: Duration,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub retries: u32,
    /// `placement import` and `export`: the interfaces Placement's endpoint is looked for
    /// under in the catalog, in order (`valid_interfaces`, else `interface`); empty: the
    /// default (internal, then public).
    pub interfaces: Vec<String>,
    /// `placement import` and `export`: the region of Placement's endpoint (`region_name`);
    /// any when absent.
    pub region_name: Option<String>,
    /// Keys read and not used, for a log line.
    pub ignored: Vec<String>,
}

/// A user or project by id, or by name within a domain given by id or name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    Id(String),
    Name { name: String, domain: Domain },
}

/// How the service user logs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// `auth_type = password`: the user, the project its token is scoped to, the password.
    Password {
        user: Named,
        project: Named,
        password: String,
    },
    /// `auth_type = v3applicationcredential`: an application credential, by id or by name
    /// with its user; its token is scoped to the project it was made in.
    ApplicationCredential {
        id: Option<String>,
        name: Option<String>,
        user: Option<Named>,
        secret: String,
    },
}

/// A domain by id or name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Domain {
    Id(String),
    Name(String),
}

/// The section's keys kubeplace reads.
const USED: &[&str] = &[
    "auth_url",
    "www_authenticate_uri",
    "auth_uri",
    "auth_type",
    "auth_plugin",
    "username",
    "user_name",
    "user_id",
    "password",
    "project_name",
    "tenant_name",
    "project_id",
    "tenant_id",
    "user_domain_name",
    "user_domain_id",
    "project_domain_name",
    "project_domain_id",
    "default_domain_name",
    "default_domain_id",
    "cafile",
    "insecure",
    "token_cache_time",
    "http_connect_timeout",
    "timeout",
    "http_request_max_retries",
    "enforce_token_bind",
    "delay_auth_decision",
    "auth_version",
    "region_name",
    "interface",
    "valid_interfaces",
    "application_credential_id",
    "application_credential_name",
    "application_credential_secret",
];

/// Keys keystonemiddleware or keystoneauth take that change nothing here: where the
/// answers are cached (kubeplace keeps its own, in memory), logging, and options for kinds
/// of tokens kubeplace does not take.
const IGNORED: &[&str] = &[
    "memcached_servers",
    "memcache_servers",
    "memcache_security_strategy",
    "memcache_secret_key",
    "memcache_pool_dead_retry",
    "memcache_pool_maxsize",
    "memcache_pool_socket_timeout",
    "memcache_pool_unused_timeout",
    "memcache_pool_conn_get_timeout",
    "memcache_use_advanced_pool",
    "memcache_sasl_enabled",
    "memcache_username",
    "memcache_password",
    "memcache_tls_enabled",
    "memcache_tls_cafile",
    "memcache_tls_certfile",
    "memcache_tls_keyfile",
    "memcache_tls_allowed_ciphers",
    "cache",
    "service_type",
    "service_token_roles",
    "service_token_roles_required",
    "include_service_catalog",
    "hash_algorithms",
    "revocation_cache_time",
    "check_revocations_for_cached",
    "auth_admin_prefix",
    "collect_timing",
    "split_loggers",
    "log_name",
    "service_name",
    "auth_section",
];

/// Keys whose use kubeplace cannot honour whatever their value, with what to do instead.
const REFUSED: &[(&str, &str)] = &[
    (
        "certfile",
        "client certificates towards Keystone are not supported; authenticate the service user with its password",
    ),
    (
        "keyfile",
        "client certificates towards Keystone are not supported; authenticate the service user with its password",
    ),
    (
        "system_scope",
        "the service user's token must be scoped to a project (project_name and project_domain_name, or project_id)",
    ),
    (
        "domain_name",
        "the service user's token must be scoped to a project (project_name and project_domain_name, or project_id)",
    ),
    (
        "domain_id",
        "the service user's token must be scoped to a project (project_name and project_domain_name, or project_id)",
    ),
    (
        "trust_id",
        "trusts are not supported; give the service user's own project",
    ),
    (
        "auth_host",
        "the old host/port/protocol settings are gone from keystonemiddleware; give auth_url",
    ),
    (
        "auth_port",
        "the old host/port/protocol settings are gone from keystonemiddleware; give auth_url",
    ),
    (
        "auth_protocol",
        "the old host/port/protocol settings are gone from keystonemiddleware; give auth_url",
    ),
    (
        "admin_token",
        "a static admin token is not supported; give the service user's password credentials",
    ),
    (
        "admin_user",
        "the old admin_* credentials are gone from keystonemiddleware; give username, password and project_name",
    ),
    (
        "admin_password",
        "the old admin_* credentials are gone from keystonemiddleware; give username, password and project_name",
    ),
    (
        "admin_tenant_name",
        "the old admin_* credentials are gone from keystonemiddleware; give username, password and project_name",
    ),
];

/// Why the file cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("--keystone-authtoken {path}: {reason}")]
pub struct ConfigError {
    pub path: String,
    pub reason: String,
}

/// Reads the section from `path`.
pub fn load(path: &Path) -> Result<KeystoneConfig, ConfigError> {
    load_all(&[path.to_path_buf()])
}

/// Reads the section from several files and directories, as oslo.config reads
/// `--config-file` and `--config-dir`: in the order given, a directory's `*.conf` files in
/// name order, a key in a later file replacing the same key in an earlier one.
pub fn load_all(paths: &[PathBuf]) -> Result<KeystoneConfig, ConfigError> {
    let named = paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let mut files = Vec::new();
    for path in paths {
        let error = |reason: String| ConfigError {
            path: path.display().to_string(),
            reason,
        };
        if path.is_dir() {
            let entries =
                std::fs::read_dir(path).map_err(|e| error(format!("cannot list it: {e}")))?;
            let mut confs: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "conf") && !p.is_dir())
                .collect();
            confs.sort();
            files.extend(confs);
        } else {
            files.push(path.clone());
        }
    }
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut found = false;
    for file in &files {
        let error = |reason: String| ConfigError {
            path: file.display().to_string(),
            reason,
        };
        let text =
            std::fs::read_to_string(file).map_err(|e| error(format!("cannot read it: {e}")))?;
        if let Some(section) = section_keys(&text).map_err(error)? {
            found = true;
            for (key, value) in section {
                keys.retain(|(k, _)| *k != key);
                keys.push((key, value));
            }
        }
    }
    if !found {
        return Err(ConfigError {
            path: named,
            reason: NO_SECTION.into(),
        });
    }
    from_keys(&keys).map_err(|reason| ConfigError {
        path: named,
        reason,
    })
}

const NO_SECTION: &str = "it has no [keystone_authtoken] section; give the file whose [keystone_authtoken] section configures keystonemiddleware (as in placement.conf)";

/// Reads the section from the text of an INI file.
pub fn parse(text: &str) -> Result<KeystoneConfig, String> {
    let keys = section_keys(text)?.ok_or(NO_SECTION)?;
    from_keys(&keys)
}

/// The `[keystone_authtoken]` section's keys (in lower case) and values of an INI file's
/// text, a later line of a key replacing an earlier one; `None` without the section.
fn section_keys(text: &str) -> Result<Option<Vec<(String, String)>>, String> {
    let ini = ini::Ini::load_from_str_opt(
        text,
        ini::ParseOption {
            // oslo.config takes values as written (a password may hold `\` or quotes
            // inside), strips one pair of surrounding quotes, and continues a value on
            // indented lines.
            enabled_quote: false,
            enabled_escape: false,
            enabled_indented_mutiline_value: true,
            enabled_preserve_key_leading_whitespace: false,
        },
    )
    .map_err(|e| format!("not an INI file: line {}: {}", e.line + 1, e.msg))?;
    let Some(section) = ini.section(Some("keystone_authtoken")) else {
        return Ok(None);
    };
    let mut keys: Vec<(String, String)> = Vec::new();
    for (key, value) in section.iter() {
        let key = key.trim().to_ascii_lowercase();
        let value = unquote(value.trim()).to_string();
        // A later line wins, as in oslo.config.
        keys.retain(|(k, _)| *k != key);
        keys.push((key, value));
    }
    Ok(Some(keys))
}

/// The configuration the section's keys make.
pub(crate) fn from_keys(keys: &[(String, String)]) -> Result<KeystoneConfig, String> {
    let get = |name: &str| {
        keys.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    };
    let mut ignored = Vec::new();
    for (key, value) in keys {
        if let Some((_, why)) = REFUSED.iter().find(|(k, _)| k == key) {
            if value.is_empty() {
                continue;
            }
            return Err(format!("[keystone_authtoken] {key} = {value:?}: {why}"));
        }
        if IGNORED.contains(&key.as_str()) {
            ignored.push(key.clone());
            continue;
        }
        if !USED.contains(&key.as_str()) {
            return Err(format!(
                "[keystone_authtoken] {key} is not a key kubeplace knows; it reads {}, and accepts and ignores {}",
                USED.join(", "),
                IGNORED.join(", ")
            ));
        }
    }

    let auth_type = get("auth_type").or(get("auth_plugin"));
    let application_credential = match auth_type {
        Some("password" | "v3password") => false,
        Some("v3applicationcredential" | "applicationcredential") => true,
        Some(other) => {
            return Err(format!(
                "[keystone_authtoken] auth_type = {other:?}: kubeplace logs in with a password or an application credential; give auth_type = password (or v3password) or v3applicationcredential"
            ));
        }
        None => {
            return Err(
                "[keystone_authtoken] auth_type is missing; give auth_type = password with username, password, project_name, user_domain_name and project_domain_name, or auth_type = v3applicationcredential with application_credential_id and application_credential_secret".into(),
            );
        }
    };
    if let Some(version) = get("auth_version")
        && !matches!(version, "v3" | "3" | "v3.0" | "3.0")
    {
        return Err(format!(
            "[keystone_authtoken] auth_version = {version:?}: only Keystone's v3 API is spoken; give v3 or leave it out"
        ));
    }
    for (key, accepted) in [
        ("enforce_token_bind", &["disabled", "permissive"][..]),
        ("delay_auth_decision", &["false", "False", "0", "no"][..]),
        ("insecure", &["false", "False", "0", "no"][..]),
    ] {
        if let Some(value) = get(key)
            && !accepted.contains(&value)
        {
            let hint = match key {
                "insecure" => {
                    "Keystone's certificate is always checked: give cafile with the CA that signed it"
                }
                "delay_auth_decision" => "requests without a valid token are always refused here",
                _ => "token binding is not checked",
            };
            return Err(format!(
                "[keystone_authtoken] {key} = {value:?}: {hint}; accepted: {}",
                accepted.join(", ")
            ));
        }
    }

    let auth_url = get("auth_url").ok_or(
        "[keystone_authtoken] auth_url is missing; give Keystone's identity URL, e.g. auth_url = https://keystone.example:5000/v3",
    )?;
    let identity_url = identity_url(auth_url)?;
    let www_authenticate_uri = get("www_authenticate_uri")
        .or(get("auth_uri"))
        .unwrap_or(auth_url)
        .to_string();
    if www_authenticate_uri.contains('"') || www_authenticate_uri.chars().any(char::is_control) {
        return Err(format!(
            "[keystone_authtoken] www_authenticate_uri = {www_authenticate_uri:?}: give a URL without quotes or control characters"
        ));
    }
    let default_domain = get("default_domain_id")
        .map(|d| Domain::Id(d.into()))
        .or(get("default_domain_name").map(|d| Domain::Name(d.into())));
    let user = || {
        named(
            "user",
            get("user_id"),
            get("username").or(get("user_name")),
            get("user_domain_id"),
            get("user_domain_name"),
            default_domain.clone(),
        )
    };
    let credential = if application_credential {
        let secret = get("application_credential_secret")
            .ok_or("[keystone_authtoken] application_credential_secret is missing; give the secret Keystone answered when the application credential was made")?
            .to_string();
        let id = get("application_credential_id").map(str::to_string);
        let name = get("application_credential_name").map(str::to_string);
        let user = match (&id, &name) {
            (Some(_), _) => None,
            (None, Some(_)) => Some(user()?),
            (None, None) => {
                return Err(
                    "[keystone_authtoken] application_credential_id is missing; give it (or application_credential_name with username and user_domain_name)".into(),
                );
            }
        };
        Credential::ApplicationCredential {
            id,
            name,
            user,
            secret,
        }
    } else {
        let user = user()?;
        let project = named(
            "project",
            get("project_id").or(get("tenant_id")),
            get("project_name").or(get("tenant_name")),
            get("project_domain_id"),
            get("project_domain_name"),
            default_domain.clone(),
        )?;
        let password = get("password")
            .ok_or("[keystone_authtoken] password is missing; give the service user's password")?
            .to_string();
        Credential::Password {
            user,
            project,
            password,
        }
    };
    let cache_time = match get("token_cache_time") {
        None => DEFAULT_CACHE_TIME,
        Some(v) => match v.parse::<i64>() {
            Ok(-1 | 0) => Duration::ZERO,
            Ok(s) if (1..=MAX_CACHE_TIME as i64).contains(&s) => Duration::from_secs(s as u64),
            _ => {
                return Err(format!(
                    "[keystone_authtoken] token_cache_time = {v:?}: give whole seconds from 1 to {MAX_CACHE_TIME} (a revoked token passes for up to this long), or -1 to keep no answers"
                ));
            }
        },
    };
    let seconds = |key: &str, default: Duration| match get(key) {
        None => Ok(default),
        Some(v) => match v.parse::<f64>() {
            Ok(s) if s > 0.0 && s <= 300.0 => Ok(Duration::from_secs_f64(s)),
            _ => Err(format!(
                "[keystone_authtoken] {key} = {v:?}: give seconds above 0 and at most 300"
            )),
        },
    };
    let connect_timeout = seconds("http_connect_timeout", DEFAULT_CONNECT_TIMEOUT)?;
    let request_timeout = seconds("timeout", DEFAULT_REQUEST_TIMEOUT)?;
    let retries = match get("http_request_max_retries") {
        None => DEFAULT_RETRIES,
        Some(v) => v.parse::<u32>().ok().filter(|r| *r <= 10).ok_or(format!(
            "[keystone_authtoken] http_request_max_retries = {v:?}: give a whole number from 0 to 10"
        ))?,
    };
    let interfaces = match (get("valid_interfaces"), get("interface")) {
        (Some(list), _) => interfaces("valid_interfaces", list)?,
        (None, Some(one)) => interfaces("interface", one)?,
        (None, None) => Vec::new(),
    };
    Ok(KeystoneConfig {
        identity_url,
        www_authenticate_uri,
        credential,
        cafile: get("cafile").map(PathBuf::from),
        cache_time,
        connect_timeout,
        request_timeout,
        retries,
        interfaces,
        region_name: get("region_name").map(str::to_string),
        ignored,
    })
}

/// The interfaces of `valid_interfaces` (or `interface`): comma-separated, each public,
/// internal or admin (the older `publicURL` spelling taken too).
fn interfaces(key: &str, list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let name = item.strip_suffix("URL").unwrap_or(item);
        if !matches!(name, "public" | "internal" | "admin") {
            return Err(format!(
                "[keystone_authtoken] {key} = {list:?}: {item:?} is not an interface; give public, internal or admin, comma-separated in the order to try"
            ));
        }
        if !out.iter().any(|o| o == name) {
            out.push(name.to_string());
        }
    }
    Ok(out)
}

/// One pair of surrounding quotes off, as oslo.config does.
fn unquote(value: &str) -> &str {
    for q in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(q) && value.ends_with(q) {
            return &value[1..value.len() - 1];
        }
    }
    value
}

/// Keystone's v3 identity URL from `auth_url`: as given when it ends in `/v3`, else with
/// `/v3` added (keystoneauth finds it by discovery; Keystone serves it there).
pub(crate) fn identity_url(auth_url: &str) -> Result<String, String> {
    let url = auth_url.trim_end_matches('/');
    let uri: http::Uri = url.parse().map_err(|_| {
        format!("[keystone_authtoken] auth_url = {auth_url:?} is not a URL; give http(s)://HOST[:PORT][/PATH]")
    })?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(format!(
            "[keystone_authtoken] auth_url = {auth_url:?}: give an http:// or https:// URL with a host"
        ));
    }
    if url.ends_with("/v2.0") {
        return Err(format!(
            "[keystone_authtoken] auth_url = {auth_url:?}: Keystone's v2.0 API is gone; give the v3 URL (or the URL without a version)"
        ));
    }
    Ok(if url.ends_with("/v3") {
        url.to_string()
    } else {
        format!("{url}/v3")
    })
}

/// A user or a project: by id, or by name in a domain.
fn named(
    what: &str,
    id: Option<&str>,
    name: Option<&str>,
    domain_id: Option<&str>,
    domain_name: Option<&str>,
    default: Option<Domain>,
) -> Result<Named, String> {
    if let Some(id) = id {
        return Ok(Named::Id(id.into()));
    }
    let key = if what == "user" {
        "username"
    } else {
        "project_name"
    };
    let Some(name) = name else {
        return Err(format!(
            "[keystone_authtoken] {key} is missing; give the service {what}'s name (or {what}_id)"
        ));
    };
    let domain = domain_id
        .map(|d| Domain::Id(d.into()))
        .or(domain_name.map(|d| Domain::Name(d.into())))
        .or(default)
        .ok_or(format!(
            "[keystone_authtoken] {what}_domain_name is missing; give the domain of {key} = {name:?} ({what}_domain_name or {what}_domain_id, e.g. {what}_domain_name = Default)"
        ))?;
    Ok(Named::Name {
        name: name.into(),
        domain,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLACEMENT_CONF: &str = "[DEFAULT]\ndebug = true\n\n[api]\nauth_strategy = keystone\n\n\
        [keystone_authtoken]\n# what an installer writes\nauth_url = http://keystone:5000\n\
        www_authenticate_uri = http://keystone.example:5000\nauth_type = password\n\
        memcached_servers = localhost:11211\nusername = placement\npassword = \"s3cr\\et;#x\"\n\
        project_name = service\nuser_domain_name = Default\nproject_domain_name = Default\n\
        service_token_roles_required = true\nregion_name = RegionOne\ninterface = internal\n";

    #[test]
    fn placement_conf_as_installers_write_it_is_read() {
        let c = parse(PLACEMENT_CONF).unwrap();
        assert_eq!(c.identity_url, "http://keystone:5000/v3");
        assert_eq!(c.www_authenticate_uri, "http://keystone.example:5000");
        let Credential::Password { user, password, .. } = &c.credential else {
            panic!("a password login: {:?}", c.credential);
        };
        assert_eq!(password, "s3cr\\et;#x");
        assert_eq!(
            *user,
            Named::Name {
                name: "placement".into(),
                domain: Domain::Name("Default".into())
            }
        );
        assert_eq!(c.cache_time, DEFAULT_CACHE_TIME);
        assert_eq!(
            c.ignored,
            ["memcached_servers", "service_token_roles_required"]
        );
        assert_eq!(c.region_name.as_deref(), Some("RegionOne"));
        assert_eq!(c.interfaces, ["internal"]);
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_naming_key_value_and_what_is_taken() {
        let with = |line: &str| parse(&format!("{PLACEMENT_CONF}{line}\n")).unwrap_err();
        let e = with("auth_type = v3token");
        assert!(
            e.contains("auth_type = \"v3token\"") && e.contains("password"),
            "{e}"
        );
        let e = with("insecure = true");
        assert!(
            e.contains("insecure = \"true\"") && e.contains("cafile"),
            "{e}"
        );
        let e = with("certfile = /etc/c.pem");
        assert!(e.contains("certfile") && e.contains("/etc/c.pem"), "{e}");
        let e = with("token_cache_time = 1 week");
        assert!(
            e.contains("token_cache_time = \"1 week\"") && e.contains("3600"),
            "{e}"
        );
        let e = with("pasword = x");
        assert!(
            e.contains("pasword is not a key") && e.contains("password"),
            "{e}"
        );
        let e = with("valid_interfaces = internal, private");
        assert!(
            e.contains("\"private\" is not an interface")
                && e.contains("public, internal or admin"),
            "{e}"
        );
        assert_eq!(
            parse(&format!(
                "{PLACEMENT_CONF}valid_interfaces = publicURL,internal\n"
            ))
            .unwrap()
            .interfaces,
            ["public", "internal"]
        );
        let e = with("auth_url = http://keystone:5000/v2.0");
        assert!(e.contains("v2.0"), "{e}");
        let e = parse("[keystone_authtoken]\nauth_type = password\nauth_url = http://k/v3\nusername = p\npassword = x\nproject_name = s\n").unwrap_err();
        assert!(e.contains("user_domain_name is missing"), "{e}");
        let e = parse("[api]\nauth_strategy = keystone\n").unwrap_err();
        assert!(e.contains("no [keystone_authtoken] section"), "{e}");
    }

    #[test]
    fn ids_defaults_and_limits() {
        let c = parse(
            "[keystone_authtoken]\nauth_type = v3password\nauth_url = https://k/identity/v3/\nuser_id = u1\npassword = x\nproject_name = s\ndefault_domain_id = default\ntoken_cache_time = -1\nhttp_connect_timeout = 2\n",
        )
        .unwrap();
        assert_eq!(c.identity_url, "https://k/identity/v3");
        assert_eq!(c.www_authenticate_uri, "https://k/identity/v3/");
        assert_eq!(
            c.credential,
            Credential::Password {
                user: Named::Id("u1".into()),
                project: Named::Name {
                    name: "s".into(),
                    domain: Domain::Id("default".into())
                },
                password: "x".into()
            }
        );
        assert_eq!(c.cache_time, Duration::ZERO);
        assert_eq!(c.connect_timeout, Duration::from_secs(2));
    }

    #[test]
    fn an_application_credential_by_id_or_by_name_with_its_user() {
        let base =
            "[keystone_authtoken]\nauth_url = http://k:5000\nauth_type = v3applicationcredential\n";
        let c = parse(&format!(
            "{base}application_credential_id = ac1\napplication_credential_secret = s\n"
        ))
        .unwrap();
        assert_eq!(
            c.credential,
            Credential::ApplicationCredential {
                id: Some("ac1".into()),
                name: None,
                user: None,
                secret: "s".into()
            }
        );
        let c = parse(&format!(
            "{base}application_credential_name = kubeplace\nusername = placement\nuser_domain_name = Default\napplication_credential_secret = s\n"
        ))
        .unwrap();
        assert!(matches!(
            c.credential,
            Credential::ApplicationCredential {
                user: Some(Named::Name { .. }),
                ..
            }
        ));
        for (extra, said) in [
            (
                "application_credential_id = ac1\n",
                "application_credential_secret is missing",
            ),
            (
                "application_credential_secret = s\n",
                "application_credential_id is missing",
            ),
            (
                "application_credential_name = n\napplication_credential_secret = s\n",
                "username is missing",
            ),
        ] {
            let e = parse(&format!("{base}{extra}")).unwrap_err();
            assert!(e.contains(said), "{e}");
        }
    }

    /// Files and directories read as oslo.config reads them: in the order given, a
    /// directory's `*.conf` in name order, a later key replacing an earlier one.
    #[test]
    fn several_files_and_directories_are_merged_in_oslo_configs_order() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("placement.conf");
        std::fs::write(&main, PLACEMENT_CONF).unwrap();
        let conf_d = dir.path().join("placement.conf.d");
        std::fs::create_dir(&conf_d).unwrap();
        std::fs::write(
            conf_d.join("20-password.conf"),
            "[keystone_authtoken]\npassword = from-20\n",
        )
        .unwrap();
        std::fs::write(
            conf_d.join("10-password.conf"),
            "[keystone_authtoken]\npassword = from-10\nregion_name = RegionTwo\n",
        )
        .unwrap();
        std::fs::write(conf_d.join("notes.txt"), "not read").unwrap();
        std::fs::write(conf_d.join("30-other.conf"), "[DEFAULT]\ndebug = false\n").unwrap();
        let c = load_all(&[main.clone(), conf_d.clone()]).unwrap();
        let Credential::Password { password, .. } = &c.credential else {
            panic!()
        };
        assert_eq!(password, "from-20", "the last file in name order wins");
        assert_eq!(c.region_name.as_deref(), Some("RegionTwo"));
        assert_eq!(
            c.identity_url, "http://keystone:5000/v3",
            "kept from the first"
        );

        let broken = conf_d.join("40-broken.conf");
        std::fs::write(&broken, "[keystone_authtoken\nx = 1\n").unwrap();
        let e = load_all(&[main.clone(), conf_d.clone()]).unwrap_err();
        assert_eq!(
            e.path,
            broken.display().to_string(),
            "the file at fault named"
        );
        std::fs::remove_file(&broken).unwrap();

        let e = load_all(&[conf_d.join("30-other.conf")]).unwrap_err();
        assert!(e.reason.contains("no [keystone_authtoken] section"), "{e}");
        let e = load_all(&[dir.path().join("missing.conf")]).unwrap_err();
        assert!(e.reason.contains("cannot read it"), "{e}");
    }
}
