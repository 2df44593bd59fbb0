//! Credentials as OpenStack's command-line clients take them: a cloud of `clouds.yaml`
//! (`--os-cloud`, `OS_CLOUD`), with its secrets from `secure.yaml` beside it, or the `OS_*`
//! variables an openrc file sets. Each is read into the keys of a `[keystone_authtoken]`
//! section and judged as one ([`super::config`]), so both log in as the section would.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::config::{self, KeystoneConfig};

/// Where `clouds.yaml` (or `secure.yaml`) is looked for when `OS_CLIENT_CONFIG_FILE` does
/// not name it: the current directory, the user's configuration, the system's; the first
/// found is read.
fn search_paths(file: &str, home: Option<&Path>) -> Vec<PathBuf> {
    let mut paths = vec![PathBuf::from(file)];
    if let Some(home) = home {
        paths.push(home.join(".config/openstack").join(file));
    }
    paths.push(Path::new("/etc/openstack").join(file));
    paths
}

/// The `OS_*` variables read, and the section key each becomes.
const VARIABLES: &[(&str, &str)] = &[
    ("OS_AUTH_URL", "auth_url"),
    ("OS_AUTH_TYPE", "auth_type"),
    ("OS_USERNAME", "username"),
    ("OS_USER_ID", "user_id"),
    ("OS_PASSWORD", "password"),
    ("OS_PROJECT_NAME", "project_name"),
    ("OS_TENANT_NAME", "tenant_name"),
    ("OS_PROJECT_ID", "project_id"),
    ("OS_TENANT_ID", "tenant_id"),
    ("OS_USER_DOMAIN_NAME", "user_domain_name"),
    ("OS_USER_DOMAIN_ID", "user_domain_id"),
    ("OS_PROJECT_DOMAIN_NAME", "project_domain_name"),
    ("OS_PROJECT_DOMAIN_ID", "project_domain_id"),
    ("OS_DEFAULT_DOMAIN_NAME", "default_domain_name"),
    ("OS_DEFAULT_DOMAIN_ID", "default_domain_id"),
    ("OS_APPLICATION_CREDENTIAL_ID", "application_credential_id"),
    (
        "OS_APPLICATION_CREDENTIAL_NAME",
        "application_credential_name",
    ),
    (
        "OS_APPLICATION_CREDENTIAL_SECRET",
        "application_credential_secret",
    ),
    ("OS_REGION_NAME", "region_name"),
    ("OS_INTERFACE", "interface"),
    ("OS_CACERT", "cafile"),
];

/// The login the `OS_*` variables describe (`var` reads one); `None` when `OS_AUTH_URL` is
/// not set.
pub fn from_environment(
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<KeystoneConfig>, String> {
    if var("OS_AUTH_URL").is_none_or(|u| u.is_empty()) {
        return Ok(None);
    }
    let mut keys = Vec::new();
    for (variable, key) in VARIABLES {
        if let Some(value) = var(variable).filter(|v| !v.is_empty()) {
            keys.push((key.to_string(), value));
        }
    }
    with_password_default(&mut keys);
    config::from_keys(&keys).map(Some).map_err(|e| {
        format!(
            "the OS_* variables: {} (read as the section's keys: {})",
            e.replace("[keystone_authtoken] ", ""),
            VARIABLES
                .iter()
                .map(|(v, k)| format!("{v} as {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// openstackclient logs in with a password unless told otherwise.
fn with_password_default(keys: &mut Vec<(String, String)>) {
    if !keys.iter().any(|(k, _)| k == "auth_type") {
        let kind = if keys
            .iter()
            .any(|(k, _)| k.starts_with("application_credential_"))
        {
            "v3applicationcredential"
        } else {
            "password"
        };
        keys.push(("auth_type".into(), kind.into()));
    }
}

/// The login of cloud `name` in the first `clouds.yaml` found (`OS_CLIENT_CONFIG_FILE`,
/// else the search paths), its secrets merged from `secure.yaml` when one is found.
pub fn from_clouds_yaml(
    name: &str,
    var: impl Fn(&str) -> Option<String>,
) -> Result<KeystoneConfig, String> {
    let home = var("HOME").map(PathBuf::from);
    let clouds_path = match var("OS_CLIENT_CONFIG_FILE").filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => {
            let tried = search_paths("clouds.yaml", home.as_deref());
            tried.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
                format!(
                    "--os-cloud {name}: no clouds.yaml found (looked at {}; OS_CLIENT_CONFIG_FILE names another)",
                    tried
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?
        }
    };
    let mut cloud = read_cloud(&clouds_path, name)?.ok_or_else(|| {
        format!(
            "--os-cloud {name}: {} has no cloud {name:?} under clouds:",
            clouds_path.display()
        )
    })?;
    let secure = search_paths("secure.yaml", home.as_deref())
        .into_iter()
        .find(|p| p.is_file());
    if let Some(secure) = secure
        && let Some(secrets) = read_cloud(&secure, name)?
    {
        merge(&mut cloud, secrets);
    }
    from_cloud(&cloud).map_err(|e| {
        format!(
            "--os-cloud {name} ({}): {}",
            clouds_path.display(),
            e.replace("[keystone_authtoken] ", "")
        )
    })
}

/// `clouds.<name>` of a YAML file; `None` when it has no such cloud.
fn read_cloud(path: &Path, name: &str) -> Result<Option<Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read it: {e}", path.display()))?;
    let value: Value =
        serde_saphyr::from_str(&text).map_err(|e| format!("{}: not YAML: {e}", path.display()))?;
    Ok(value.get("clouds").and_then(|c| c.get(name)).cloned())
}

/// `secure.yaml`'s values laid over `clouds.yaml`'s, key by key.
fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (k, v) in from {
                merge(into.entry(k).or_insert(Value::Null), v);
            }
        }
        (into, from) => *into = from,
    }
}

/// A cloud's entry as the section's keys: `auth`'s keys as they are, and `auth_type`,
/// `region_name`, `interface`, `cacert` beside it.
fn from_cloud(cloud: &Value) -> Result<KeystoneConfig, String> {
    let mut keys = Vec::new();
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    if let Some(auth) = cloud.get("auth").and_then(Value::as_object) {
        for (k, v) in auth {
            let v = text(v).ok_or(format!("auth.{k} is not a single value"))?;
            keys.push((k.clone(), v));
        }
    }
    if cloud.get("verify").and_then(Value::as_bool) == Some(false) {
        return Err(
            "verify: false: Keystone's certificate is always checked; give cacert with the CA that signed it".into(),
        );
    }
    for (field, key) in [
        ("auth_type", "auth_type"),
        ("region_name", "region_name"),
        ("interface", "interface"),
        ("cacert", "cafile"),
    ] {
        if let Some(v) = cloud.get(field).and_then(text) {
            keys.push((key.to_string(), v));
        }
    }
    with_password_default(&mut keys);
    config::from_keys(&keys)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::keystone::config::{Credential, Domain, Named};

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn an_openrc_files_variables_log_in_with_a_password() {
        let c = from_environment(vars(&[
            ("OS_AUTH_URL", "https://keystone.example:5000"),
            ("OS_USERNAME", "admin"),
            ("OS_PASSWORD", "secret"),
            ("OS_PROJECT_NAME", "admin"),
            ("OS_USER_DOMAIN_NAME", "Default"),
            ("OS_PROJECT_DOMAIN_NAME", "Default"),
            ("OS_REGION_NAME", "RegionOne"),
            ("OS_INTERFACE", "internal"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.identity_url, "https://keystone.example:5000/v3");
        assert_eq!(c.region_name.as_deref(), Some("RegionOne"));
        assert_eq!(c.interfaces, ["internal"]);
        assert!(matches!(c.credential, Credential::Password { .. }));
        assert!(from_environment(vars(&[])).unwrap().is_none());
        let e = from_environment(vars(&[("OS_AUTH_URL", "http://k:5000")])).unwrap_err();
        assert!(
            e.starts_with("the OS_* variables: username is missing")
                && e.contains("OS_USERNAME as username"),
            "{e}"
        );
    }

    #[test]
    fn a_cloud_of_clouds_yaml_with_its_secret_in_secure_yaml() {
        let dir = tempfile::tempdir().unwrap();
        let clouds = dir.path().join("clouds.yaml");
        std::fs::write(
            &clouds,
            "clouds:\n  prod:\n    auth:\n      auth_url: http://k:5000/v3\n      username: placement\n      project_name: service\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n  appcred:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: http://k:5000\n      application_credential_id: ac1\n      application_credential_secret: s\n  insecure:\n    verify: false\n    auth: {auth_url: 'http://k'}\n",
        )
        .unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".config/openstack")).unwrap();
        std::fs::write(
            home.join(".config/openstack/secure.yaml"),
            "clouds:\n  prod:\n    auth:\n      password: from-secure\n",
        )
        .unwrap();
        let env = [
            ("OS_CLIENT_CONFIG_FILE", clouds.to_str().unwrap()),
            ("HOME", home.to_str().unwrap()),
        ];
        let c = from_clouds_yaml("prod", vars(&env)).unwrap();
        assert_eq!(
            c.credential,
            Credential::Password {
                user: Named::Name {
                    name: "placement".into(),
                    domain: Domain::Name("Default".into())
                },
                project: Named::Name {
                    name: "service".into(),
                    domain: Domain::Name("Default".into())
                },
                password: "from-secure".into()
            }
        );
        let c = from_clouds_yaml("appcred", vars(&env)).unwrap();
        assert!(matches!(
            c.credential,
            Credential::ApplicationCredential { .. }
        ));
        let e = from_clouds_yaml("insecure", vars(&env)).unwrap_err();
        assert!(e.contains("verify: false"), "{e}");
        let e = from_clouds_yaml("staging", vars(&env)).unwrap_err();
        assert!(e.contains("has no cloud \"staging\""), "{e}");
        let e = from_clouds_yaml(
            "prod",
            vars(&[("HOME", "/nonexistent"), ("OS_CLIENT_CONFIG_FILE", "")]),
        );
        // The current directory of the tests has no clouds.yaml either.
        if !Path::new("clouds.yaml").exists() && !Path::new("/etc/openstack/clouds.yaml").exists() {
            let e = e.unwrap_err();
            assert!(e.contains("no clouds.yaml found"), "{e}");
        }
    }
}
