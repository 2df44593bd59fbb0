//! `kubeplace placement register`: Placement's entry in Keystone's catalog (the `placement`
//! service and its endpoints in a region) and kubeplace's service user, made as asked with
//! an admin's credentials (`OS_*`, as openstackclient reads them). Idempotent: a second run
//! changes nothing; `--dry-run` says what a run would change.

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;

use super::exit::Exit;
use super::output::Report;
use crate::keystone::config::{self, Credential, Domain, KeystoneConfig, Named};
use crate::keystone::registration::{Admin, Desired, DesiredUser};
use crate::keystone::service::ServiceUser;

/// The service type Placement is registered under.
const SERVICE_TYPE: &str = "placement";

/// Arguments of `kubeplace placement register`.
#[derive(clap::Args, Debug)]
pub struct RegisterArgs {
    /// Keystone's identity URL (`https://keystone.example:5000/v3`).
    #[arg(long, env = "OS_AUTH_URL", value_name = "URL")]
    pub os_auth_url: String,
    /// The admin who registers.
    #[arg(long, env = "OS_USERNAME", value_name = "NAME")]
    pub os_username: String,
    #[arg(
        long,
        env = "OS_PASSWORD",
        value_name = "PASSWORD",
        hide_env_values = true
    )]
    pub os_password: String,
    /// The project the admin's token is scoped to.
    #[arg(long, env = "OS_PROJECT_NAME", value_name = "NAME")]
    pub os_project_name: String,
    #[arg(
        long,
        env = "OS_USER_DOMAIN_NAME",
        value_name = "NAME",
        default_value = "Default"
    )]
    pub os_user_domain_name: String,
    #[arg(
        long,
        env = "OS_PROJECT_DOMAIN_NAME",
        value_name = "NAME",
        default_value = "Default"
    )]
    pub os_project_domain_name: String,
    /// The CAs (PEM) Keystone's certificate is checked against [default: the system's].
    #[arg(long, env = "OS_CACERT", value_name = "PATH")]
    pub os_cacert: Option<PathBuf>,
    /// The region the endpoints are in; it must exist.
    #[arg(long, env = "OS_REGION_NAME", value_name = "REGION")]
    pub region: String,
    /// The public endpoint's URL: how kubeplace's Placement API is reached from outside.
    #[arg(long, value_name = "URL")]
    pub public_url: String,
    /// The internal endpoint's URL, which Nova's services use [default: --public-url].
    #[arg(long, value_name = "URL")]
    pub internal_url: Option<String>,
    /// The admin endpoint's URL [default: --internal-url].
    #[arg(long, value_name = "URL")]
    pub admin_url: Option<String>,
    /// The service's name.
    #[arg(long, value_name = "NAME", default_value = "placement")]
    pub service_name: String,
    /// The service's description.
    #[arg(long, value_name = "TEXT", default_value = "Placement API (kubeplace)")]
    pub service_description: String,
    /// A file holding the service user's password (one line). Without it no user is made:
    /// only the service and its endpoints.
    #[arg(long, value_name = "PATH")]
    pub service_password_file: Option<PathBuf>,
    /// The service user kubeplace logs in as (`[keystone_authtoken] username`).
    #[arg(long, value_name = "NAME", default_value = "placement")]
    pub service_user: String,
    #[arg(long, value_name = "NAME", default_value = "Default")]
    pub service_user_domain: String,
    /// The project the service user is given its role in (created if missing).
    #[arg(long, value_name = "NAME", default_value = "service")]
    pub service_project: String,
    #[arg(long, value_name = "NAME", default_value = "Default")]
    pub service_project_domain: String,
    /// The service user's role in its project (created if missing).
    #[arg(long, value_name = "NAME", default_value = "service")]
    pub service_role: String,
    /// Say what would change; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// `text`: a line per change; `json`: `{"dryRun", "changes": [{"action", "kind",
    /// "name", "from"?, "to"?}]}`.
    #[arg(short = 'o', long, value_enum, default_value_t = Report::Text)]
    pub output: Report,
}

/// Runs the command.
pub fn main(args: &RegisterArgs) -> Exit {
    let fail = |exit: Exit, e: &dyn std::fmt::Display| {
        eprintln!("kubeplace placement register: {e}");
        exit
    };
    let desired = match desired(args) {
        Ok(d) => d,
        Err(e) => return fail(Exit::BadInput, &e),
    };
    let admin = match admin_login(args).and_then(ServiceUser::new) {
        Ok(a) => a,
        Err(e) => return fail(Exit::BadInput, &e),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(Exit::Failed, &format!("cannot start the runtime: {e}")),
    };
    let keystone = Admin { login: &admin };
    let result = runtime.block_on(async {
        let plan = keystone.plan(&desired).await?;
        let changes = plan.changes.clone();
        if !args.dry_run {
            keystone.apply(&desired, plan).await?;
        }
        Ok::<_, crate::keystone::registration::RegistrationError>(changes)
    });
    let changes = match result {
        Ok(c) => c,
        Err(e) => return fail(Exit::Failed, &e),
    };
    let mut out = std::io::stdout().lock();
    let _ = match args.output {
        Report::Json => writeln!(
            out,
            "{}",
            json!({"dryRun": args.dry_run, "changes": changes})
        ),
        Report::Text => {
            let verb = if args.dry_run { "would " } else { "" };
            for change in &changes {
                let _ = writeln!(out, "{verb}{change}");
            }
            if changes.is_empty() {
                writeln!(
                    out,
                    "Keystone already holds the {} service in {} as asked: nothing to change",
                    args.service_name, args.region
                )
            } else {
                Ok(())
            }
        }
    };
    Exit::Ok
}

/// What Keystone should hold, from the arguments; an error names the argument.
fn desired(args: &RegisterArgs) -> Result<Desired, String> {
    let public = url_of("--public-url", &args.public_url)?;
    let internal = match &args.internal_url {
        Some(u) => url_of("--internal-url", u)?,
        None => public.clone(),
    };
    let admin = match &args.admin_url {
        Some(u) => url_of("--admin-url", u)?,
        None => internal.clone(),
    };
    let user = match &args.service_password_file {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                format!(
                    "--service-password-file {}: cannot be read: {e}",
                    path.display()
                )
            })?;
            let password = text.trim_end_matches(['\r', '\n']).to_string();
            if password.is_empty() {
                return Err(format!(
                    "--service-password-file {}: the file is empty; it must hold the service user's password",
                    path.display()
                ));
            }
            Some(DesiredUser {
                name: args.service_user.clone(),
                domain: args.service_user_domain.clone(),
                password,
                project: args.service_project.clone(),
                project_domain: args.service_project_domain.clone(),
                role: args.service_role.clone(),
            })
        }
    };
    if args.region.is_empty() {
        return Err("--region is empty; give the region the endpoints are in".into());
    }
    Ok(Desired {
        service_name: args.service_name.clone(),
        service_type: SERVICE_TYPE.to_string(),
        description: args.service_description.clone(),
        region: args.region.clone(),
        endpoints: vec![
            ("public".into(), public),
            ("internal".into(), internal),
            ("admin".into(), admin),
        ],
        user,
    })
}

/// An endpoint URL: http or https, with a host; a trailing `/` dropped, as Keystone's
/// catalog is read by clients that add paths to it.
fn url_of(flag: &str, url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') && !url.contains(char::is_whitespace) => {
            Ok(url.trim_end_matches('/').to_string())
        }
        _ => Err(format!(
            "{flag} {url:?} is not an endpoint URL; give http://HOST[:PORT][/PATH] or https://…"
        )),
    }
}

/// The admin's login, as openstackclient takes it from `OS_*`.
fn admin_login(args: &RegisterArgs) -> Result<KeystoneConfig, String> {
    let identity_url =
        config::identity_url(&args.os_auth_url).map_err(|e| format!("--os-auth-url: {e}"))?;
    Ok(KeystoneConfig {
        www_authenticate_uri: identity_url.clone(),
        identity_url,
        credential: Credential::Password {
            user: Named::Name {
                name: args.os_username.clone(),
                domain: Domain::Name(args.os_user_domain_name.clone()),
            },
            project: Named::Name {
                name: args.os_project_name.clone(),
                domain: Domain::Name(args.os_project_domain_name.clone()),
            },
            password: args.os_password.clone(),
        },
        cafile: args.os_cacert.clone(),
        cache_time: std::time::Duration::ZERO,
        connect_timeout: config::DEFAULT_CONNECT_TIMEOUT,
        request_timeout: config::DEFAULT_REQUEST_TIMEOUT,
        retries: 3,
        interfaces: Vec::new(),
        region_name: None,
        ignored: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::url_of;

    #[test]
    fn an_endpoint_url_is_http_or_https_with_a_host() {
        assert_eq!(
            url_of("--public-url", "https://placement.example/").unwrap(),
            "https://placement.example"
        );
        for bad in [
            "placement.example",
            "ftp://x",
            "http://",
            "https:///x",
            "http://a b",
        ] {
            let e = url_of("--public-url", bad).unwrap_err();
            assert!(e.starts_with(&format!("--public-url {bad:?}")), "{e}");
        }
    }
}
