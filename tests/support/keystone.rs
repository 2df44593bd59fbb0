//! A real OpenStack Keystone (the virtualenv of `hack/keystone-venv.sh`) on SQLite on
//! 127.0.0.1, started by `hack/keystone-serve.py` with the projects, users and roles its
//! docstring lists, and a small blocking client of its REST API: tokens for each user and
//! scope, revocation, and a Placement endpoint in the catalog for a test's own region.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// The venv's python, or a failure that says how to make it.
pub fn python() -> PathBuf {
    let venv = std::env::var_os("KUBEPLACE_KEYSTONE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                .join(".cache/kubeplace/keystone-venv")
        });
    let manage = venv.join("bin/keystone-manage");
    assert!(
        manage.is_file(),
        "{} is missing: run hack/keystone-venv.sh to create the Keystone virtualenv (python3 and PyPI needed)",
        manage.display()
    );
    venv.join("bin/python")
}

/// A running Keystone, killed when dropped.
pub struct Keystone {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Every user's password but the bootstrap admin's.
    pub password: String,
    pub admin_password: String,
    pub projects: HashMap<String, String>,
    pub users: HashMap<String, String>,
    pub placement_service: String,
    dir: tempfile::TempDir,
}

impl Drop for Keystone {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a token is scoped to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// A project of the domain Default, by name.
    Project(&'a str),
    /// The whole system.
    System,
    /// Nothing.
    Unscoped,
}

impl Keystone {
    /// A fresh Keystone whose tokens live an hour.
    pub fn start() -> Keystone {
        Keystone::start_with(None)
    }

    /// A fresh Keystone whose tokens live `expiration` (`[token] expiration`).
    pub fn start_with(expiration: Option<Duration>) -> Keystone {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/hack/keystone-serve.py");
        let mut cmd = Command::new(python());
        cmd.arg(script).arg(dir.path().join("keystone"));
        if let Some(e) = expiration {
            cmd.args(["--expiration", &e.as_secs().to_string()]);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("keystone-serve.py starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("a line from keystone-serve.py");
        let info: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("keystone-serve.py said {line:?} ({e})"));
        let map = |key: &str| -> HashMap<String, String> {
            info[key]
                .as_object()
                .unwrap_or_else(|| panic!("no {key} in {info}"))
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        };
        let text = |key: &str| info[key].as_str().unwrap_or_default().to_string();
        Keystone {
            url: text("url"),
            password: text("password"),
            admin_password: text("admin_password"),
            projects: map("projects"),
            users: map("users"),
            placement_service: text("placement_service"),
            child,
            dir,
        }
    }

    /// The id of project `name`.
    pub fn project(&self, name: &str) -> &str {
        &self.projects[name]
    }

    /// A `[keystone_authtoken]` file for the service user `placement`, with Keystone at
    /// `auth_url` (this one's, or a proxy's in front of it) and `extra` lines; its path.
    pub fn authtoken_file(&self, name: &str, auth_url: &str, extra: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "[DEFAULT]\ndebug = false\n\n[keystone_authtoken]\nauth_url = {auth_url}\n\
                 www_authenticate_uri = {www}\nauth_type = password\nusername = placement\n\
                 password = {password}\nproject_name = service\nuser_domain_name = Default\n\
                 project_domain_name = Default\n{extra}\n",
                www = self.url,
                password = self.password,
            ),
        )
        .expect("write the authtoken file");
        path
    }

    /// A token for `user` (its password) with `scope`.
    pub fn token(&self, user: &str, scope: Scope<'_>) -> String {
        let password = if user == "admin" {
            &self.admin_password
        } else {
            &self.password
        };
        let mut auth = json!({"identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"id": "default"}, "password": password}}}});
        match scope {
            Scope::Project(p) => {
                auth["scope"] = json!({"project": {"name": p, "domain": {"id": "default"}}})
            }
            Scope::System => auth["scope"] = json!({"system": {"all": true}}),
            Scope::Unscoped => {}
        }
        let (status, headers, body) = http(
            "POST",
            &format!("{}/v3/auth/tokens?nocatalog", self.url),
            &[],
            Some(&json!({"auth": auth})),
        );
        assert_eq!(status, 201, "a token for {user} ({scope:?}): {body}");
        headers
            .get("x-subject-token")
            .cloned()
            .expect("X-Subject-Token")
    }

    /// The admin's project-scoped token.
    pub fn admin_token(&self) -> String {
        self.token("admin", Scope::Project("admin"))
    }

    /// Revokes `token`.
    pub fn revoke(&self, token: &str) {
        let admin = self.admin_token();
        let (status, _, body) = http(
            "DELETE",
            &format!("{}/v3/auth/tokens", self.url),
            &[("X-Auth-Token", &admin), ("X-Subject-Token", token)],
            None,
        );
        assert_eq!(status, 204, "revoke: {body}");
    }

    /// Adds the region `region` with a public Placement endpoint at `url`.
    pub fn add_placement_endpoint(&self, region: &str, url: &str) {
        let admin = self.admin_token();
        let auth = [("X-Auth-Token", admin.as_str())];
        let (status, _, body) = http(
            "POST",
            &format!("{}/v3/regions", self.url),
            &auth,
            Some(&json!({"region": {"id": region}})),
        );
        assert_eq!(status, 201, "region {region}: {body}");
        let (status, _, body) = http(
            "POST",
            &format!("{}/v3/endpoints", self.url),
            &auth,
            Some(&json!({"endpoint": {"service_id": self.placement_service,
                                      "interface": "public", "url": url,
                                      "region_id": region}})),
        );
        assert_eq!(status, 201, "endpoint in {region}: {body}");
    }

    /// Where its log is.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("keystone/keystone.log")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// One request (a connection each): status, headers (names in lower case), JSON body
/// (`Null` when empty, a string when not JSON).
pub fn http(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> (u16, HashMap<String, String>, Value) {
    let rest = url.trim_start_matches("http://");
    let (addr, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        request.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let value = if body.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or(Value::String(body.to_string()))
    };
    (status, headers, value)
}
