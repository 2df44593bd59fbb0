//! Placement's entry in Keystone: the `placement` service, its endpoints in a region, and
//! the service user kubeplace logs in as (a project member with the `service` role), made
//! to be as asked, idempotently. Everything is read first and the changes planned; a plan
//! that cannot be carried out (a region or domain that does not exist, two services or
//! endpoints where one is expected) is refused before anything is written.

use std::fmt;

use http::{Method, StatusCode};
use serde::Serialize;
use serde_json::{Value, json};

use super::service::{LoginError, ServiceUser};

/// What Keystone should hold.
#[derive(Debug, Clone)]
pub struct Desired {
    pub service_name: String,
    pub service_type: String,
    pub description: String,
    pub region: String,
    /// Interface (public, internal, admin) and URL.
    pub endpoints: Vec<(String, String)>,
    /// The service user, if it is to be made too.
    pub user: Option<DesiredUser>,
}

/// The service user, its project and role.
#[derive(Debug, Clone)]
pub struct DesiredUser {
    pub name: String,
    pub domain: String,
    pub password: String,
    pub project: String,
    pub project_domain: String,
    pub role: String,
}

/// One change to Keystone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// `create`, `update` or `grant`.
    pub action: Action,
    /// What is changed: service, endpoint, project, role, user, password, roleAssignment.
    pub kind: &'static str,
    /// Which, in words: `placement (type placement)`, `public in RegionOne`.
    pub name: String,
    /// For an endpoint's URL: what it was and what it becomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(skip)]
    step: Step,
}

/// The kind of change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Update,
    Grant,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let action = match self.action {
            Action::Create => "create",
            Action::Update => "update",
            Action::Grant => "grant",
        };
        write!(f, "{action} {} {}", self.kind, self.name)?;
        if let (Some(from), Some(to)) = (&self.from, &self.to) {
            write!(f, ": {from} -> {to}")?;
        } else if let Some(to) = &self.to {
            write!(f, ": {to}")?;
        }
        Ok(())
    }
}

/// How a change is made, with what was read while planning.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum Step {
    #[default]
    Service,
    Endpoint {
        interface: String,
        url: String,
    },
    EndpointUrl {
        id: String,
        url: String,
    },
    Project,
    Role,
    User,
    Password,
    Assignment,
}

/// Why the registration cannot be planned or made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistrationError {
    #[error("Keystone at {url}: {reason}")]
    Keystone { url: String, reason: String },
    #[error("Keystone answered {method} {path} with {status}: {detail}")]
    Answered {
        method: Method,
        path: String,
        status: u16,
        detail: String,
    },
    #[error(
        "Keystone refused the login of {user} in {project} ({status}): check OS_USERNAME, OS_PASSWORD, OS_PROJECT_NAME and their domains (or the --os-* flags)"
    )]
    AdminRefused {
        status: u16,
        user: String,
        project: String,
    },
    #[error("Keystone refused {method} {path} (403): the credentials given are not an admin's")]
    NotAdmin { method: Method, path: String },
    #[error(
        "region {region:?} does not exist in Keystone (its regions: {known}); give --region one of them, or create it first"
    )]
    NoRegion { region: String, known: String },
    #[error("domain {0:?} does not exist in Keystone")]
    NoDomain(String),
    #[error(
        "Keystone has {count} services of type {service_type} and none named {name:?}; remove all but one, or name the one to use with --service-name"
    )]
    ManyServices {
        service_type: String,
        name: String,
        count: usize,
    },
    #[error(
        "Keystone has {count} {interface} endpoints of the {service_type} service in region {region}; remove all but one"
    )]
    ManyEndpoints {
        service_type: String,
        interface: String,
        region: String,
        count: usize,
    },
}

/// Keystone as an admin sees it: requests with the admin's token.
pub struct Admin<'a> {
    pub login: &'a ServiceUser,
}

impl Admin<'_> {
    fn url(&self) -> &str {
        &self.login.config().identity_url
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(StatusCode, Value), RegistrationError> {
        let keystone = |reason: String| RegistrationError::Keystone {
            url: self.url().to_string(),
            reason,
        };
        let token = self.login.token(None).await.map_err(|e| match e {
            LoginError::Refused {
                status,
                user,
                project,
                ..
            } => RegistrationError::AdminRefused {
                status,
                user,
                project,
            },
            other => keystone(other.to_string()),
        })?;
        let headers = [
            ("x-auth-token", token.as_str()),
            ("content-type", "application/json"),
        ];
        let answer = self
            .login
            .send(
                method.clone(),
                &format!("{}{path}", self.url()),
                &headers,
                body.map(|b| b.to_string().into_bytes()),
            )
            .await
            .map_err(keystone)?;
        let value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        Ok((answer.status, value))
    }

    /// A request that must succeed.
    async fn ask(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, RegistrationError> {
        let (status, value) = self.call(method.clone(), path, body).await?;
        if status.is_success() {
            return Ok(value);
        }
        if status == StatusCode::FORBIDDEN {
            return Err(RegistrationError::NotAdmin {
                method,
                path: path.to_string(),
            });
        }
        let detail = value["error"]["message"]
            .as_str()
            .unwrap_or("no message")
            .to_string();
        Err(RegistrationError::Answered {
            method,
            path: path.to_string(),
            status: status.as_u16(),
            detail,
        })
    }

    /// The objects of a list, `GET path` answered as `{key: [...]}`.
    async fn list(&self, path: &str, key: &str) -> Result<Vec<Value>, RegistrationError> {
        let value = self.ask(Method::GET, path, None).await?;
        Ok(value[key].as_array().cloned().unwrap_or_default())
    }

    async fn domain_id(&self, name: &str) -> Result<String, RegistrationError> {
        let found = self
            .list(&format!("/domains?name={}", query(name)), "domains")
            .await?;
        id_of(found.first()).ok_or_else(|| RegistrationError::NoDomain(name.to_string()))
    }

    /// The changes that would make Keystone hold `desired`, read without writing.
    pub async fn plan(&self, desired: &Desired) -> Result<Plan, RegistrationError> {
        let regions = self.list("/regions", "regions").await?;
        if !regions
            .iter()
            .any(|r| r["id"].as_str() == Some(&desired.region))
        {
            let mut known: Vec<&str> = regions.iter().filter_map(|r| r["id"].as_str()).collect();
            known.sort_unstable();
            return Err(RegistrationError::NoRegion {
                region: desired.region.clone(),
                known: if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                },
            });
        }
        let mut plan = Plan::default();
        let services = self
            .list(
                &format!("/services?type={}", query(&desired.service_type)),
                "services",
            )
            .await?;
        let service = match services.len() {
            0 => None,
            1 => services.first(),
            count => {
                let named: Vec<&Value> = services
                    .iter()
                    .filter(|s| s["name"].as_str() == Some(&desired.service_name))
                    .collect();
                if named.len() != 1 {
                    return Err(RegistrationError::ManyServices {
                        service_type: desired.service_type.clone(),
                        name: desired.service_name.clone(),
                        count,
                    });
                }
                named.first().copied()
            }
        };
        let service_name = format!("{} (type {})", desired.service_name, desired.service_type);
        plan.service_id = id_of(service);
        let endpoints = match &plan.service_id {
            None => {
                plan.push(Action::Create, "service", service_name, None, Step::Service);
                Vec::new()
            }
            Some(id) => {
                self.list(
                    &format!(
                        "/endpoints?service_id={}&region_id={}",
                        query(id),
                        query(&desired.region)
                    ),
                    "endpoints",
                )
                .await?
            }
        };
        for (interface, url) in &desired.endpoints {
            let same: Vec<&Value> = endpoints
                .iter()
                .filter(|e| e["interface"].as_str() == Some(interface))
                .collect();
            match same.as_slice() {
                [] => plan.push_endpoint(interface, url, &desired.region),
                [one] => {
                    let now = one["url"].as_str().unwrap_or_default();
                    if now != url {
                        plan.push(
                            Action::Update,
                            "endpoint",
                            format!("{interface} in {}", desired.region),
                            Some(now.to_string()),
                            Step::EndpointUrl {
                                id: id_of(Some(one)).unwrap_or_default(),
                                url: url.clone(),
                            },
                        );
                    }
                }
                many => {
                    return Err(RegistrationError::ManyEndpoints {
                        service_type: desired.service_type.clone(),
                        interface: interface.clone(),
                        region: desired.region.clone(),
                        count: many.len(),
                    });
                }
            }
        }
        if let Some(user) = &desired.user {
            self.plan_user(user, &mut plan).await?;
        }
        Ok(plan)
    }

    async fn plan_user(
        &self,
        user: &DesiredUser,
        plan: &mut Plan,
    ) -> Result<(), RegistrationError> {
        let user_domain = self.domain_id(&user.domain).await?;
        let project_domain = self.domain_id(&user.project_domain).await?;
        plan.user_domain = user_domain.clone();
        plan.project_domain = project_domain.clone();
        let project = self
            .list(
                &format!(
                    "/projects?name={}&domain_id={}",
                    query(&user.project),
                    query(&project_domain)
                ),
                "projects",
            )
            .await?;
        plan.project_id = id_of(project.first());
        if plan.project_id.is_none() {
            plan.push(
                Action::Create,
                "project",
                format!("{} (domain {})", user.project, user.project_domain),
                None,
                Step::Project,
            );
        }
        let role = self
            .list(&format!("/roles?name={}", query(&user.role)), "roles")
            .await?;
        plan.role_id = id_of(role.first());
        if plan.role_id.is_none() {
            plan.push(Action::Create, "role", user.role.clone(), None, Step::Role);
        }
        let found = self
            .list(
                &format!(
                    "/users?name={}&domain_id={}",
                    query(&user.name),
                    query(&user_domain)
                ),
                "users",
            )
            .await?;
        plan.user_id = id_of(found.first());
        let who = format!("{} (domain {})", user.name, user.domain);
        match &plan.user_id {
            None => plan.push(Action::Create, "user", who.clone(), None, Step::User),
            Some(id) => {
                if !self.password_works(id, &user.password).await? {
                    plan.push(
                        Action::Update,
                        "password",
                        who.clone(),
                        None,
                        Step::Password,
                    );
                }
            }
        }
        let granted = match (&plan.user_id, &plan.project_id, &plan.role_id) {
            (Some(u), Some(p), Some(r)) => !self
                .list(
                    &format!(
                        "/role_assignments?user.id={}&scope.project.id={}&role.id={}",
                        query(u),
                        query(p),
                        query(r)
                    ),
                    "role_assignments",
                )
                .await?
                .is_empty(),
            _ => false,
        };
        if !granted {
            plan.push(
                Action::Grant,
                "roleAssignment",
                format!("{} to {who} in project {}", user.role, user.project),
                None,
                Step::Assignment,
            );
        }
        Ok(())
    }

    /// Whether the user logs in with `password` (an unscoped login: it needs no role).
    async fn password_works(
        &self,
        user_id: &str,
        password: &str,
    ) -> Result<bool, RegistrationError> {
        let body = json!({"auth": {"identity": {"methods": ["password"],
            "password": {"user": {"id": user_id, "password": password}}}}});
        let answer = self
            .login
            .send(
                Method::POST,
                &format!("{}/auth/tokens?nocatalog", self.url()),
                &[("content-type", "application/json")],
                Some(body.to_string().into_bytes()),
            )
            .await
            .map_err(|reason| RegistrationError::Keystone {
                url: self.url().to_string(),
                reason,
            })?;
        Ok(answer.status.is_success())
    }

    /// Makes the planned changes, in order.
    pub async fn apply(&self, desired: &Desired, mut plan: Plan) -> Result<(), RegistrationError> {
        let changes = std::mem::take(&mut plan.changes);
        for change in &changes {
            match &change.step {
                Step::Service => {
                    let made = self
                        .ask(
                            Method::POST,
                            "/services",
                            Some(json!({"service": {"name": desired.service_name,
                                "type": desired.service_type,
                                "description": desired.description, "enabled": true}})),
                        )
                        .await?;
                    plan.service_id = made["service"]["id"].as_str().map(str::to_string);
                }
                Step::Endpoint { interface, url } => {
                    let service_id = plan.service_id.clone().unwrap_or_default();
                    self.ask(
                        Method::POST,
                        "/endpoints",
                        Some(json!({"endpoint": {"service_id": service_id,
                            "interface": interface, "url": url,
                            "region_id": desired.region, "enabled": true}})),
                    )
                    .await?;
                }
                Step::EndpointUrl { id, url } => {
                    self.ask(
                        Method::PATCH,
                        &format!("/endpoints/{id}"),
                        Some(json!({"endpoint": {"url": url}})),
                    )
                    .await?;
                }
                Step::Project => {
                    let user = desired.user.as_ref().expect("planned with a user");
                    let made = self
                        .ask(
                            Method::POST,
                            "/projects",
                            Some(json!({"project": {"name": user.project,
                                "domain_id": plan.project_domain, "enabled": true}})),
                        )
                        .await?;
                    plan.project_id = made["project"]["id"].as_str().map(str::to_string);
                }
                Step::Role => {
                    let user = desired.user.as_ref().expect("planned with a user");
                    let made = self
                        .ask(
                            Method::POST,
                            "/roles",
                            Some(json!({"role": {"name": user.role}})),
                        )
                        .await?;
                    plan.role_id = made["role"]["id"].as_str().map(str::to_string);
                }
                Step::User => {
                    let user = desired.user.as_ref().expect("planned with a user");
                    let made = self
                        .ask(
                            Method::POST,
                            "/users",
                            Some(json!({"user": {"name": user.name,
                                "domain_id": plan.user_domain, "password": user.password,
                                "default_project_id": plan.project_id, "enabled": true}})),
                        )
                        .await?;
                    plan.user_id = made["user"]["id"].as_str().map(str::to_string);
                }
                Step::Password => {
                    let user = desired.user.as_ref().expect("planned with a user");
                    let id = plan.user_id.clone().unwrap_or_default();
                    self.ask(
                        Method::PATCH,
                        &format!("/users/{id}"),
                        Some(json!({"user": {"password": user.password}})),
                    )
                    .await?;
                }
                Step::Assignment => {
                    let (p, u, r) = (
                        plan.project_id.clone().unwrap_or_default(),
                        plan.user_id.clone().unwrap_or_default(),
                        plan.role_id.clone().unwrap_or_default(),
                    );
                    self.ask(
                        Method::PUT,
                        &format!("/projects/{p}/users/{u}/roles/{r}"),
                        None,
                    )
                    .await?;
                }
            }
        }
        Ok(())
    }
}

/// The changes planned, and the ids read while planning that later steps need.
#[derive(Debug, Default)]
pub struct Plan {
    pub changes: Vec<Change>,
    service_id: Option<String>,
    user_domain: String,
    project_domain: String,
    project_id: Option<String>,
    role_id: Option<String>,
    user_id: Option<String>,
}

impl Plan {
    fn push(
        &mut self,
        action: Action,
        kind: &'static str,
        name: String,
        from: Option<String>,
        step: Step,
    ) {
        let to = match &step {
            Step::Endpoint { url, .. } | Step::EndpointUrl { url, .. } => Some(url.clone()),
            _ => None,
        };
        self.changes.push(Change {
            action,
            kind,
            name,
            from,
            to,
            step,
        });
    }

    fn push_endpoint(&mut self, interface: &str, url: &str, region: &str) {
        self.push(
            Action::Create,
            "endpoint",
            format!("{interface} in {region}"),
            None,
            Step::Endpoint {
                interface: interface.to_string(),
                url: url.to_string(),
            },
        );
    }
}

fn id_of(v: Option<&Value>) -> Option<String> {
    v.and_then(|v| v["id"].as_str()).map(str::to_string)
}

/// A value for a query string.
fn query(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_reads_as_what_it_does() {
        let mut plan = Plan::default();
        plan.push_endpoint("public", "https://placement.example", "RegionOne");
        plan.push(
            Action::Update,
            "endpoint",
            "internal in RegionOne".into(),
            Some("http://old".into()),
            Step::EndpointUrl {
                id: "e1".into(),
                url: "http://new".into(),
            },
        );
        let lines: Vec<String> = plan.changes.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "create endpoint public in RegionOne: https://placement.example",
                "update endpoint internal in RegionOne: http://old -> http://new"
            ]
        );
        let json = serde_json::to_value(&plan.changes[1]).unwrap();
        assert_eq!(
            json,
            json!({"action": "update", "kind": "endpoint", "name": "internal in RegionOne",
                   "from": "http://old", "to": "http://new"})
        );
    }

    #[test]
    fn a_region_that_is_not_there_names_those_that_are() {
        let e = RegistrationError::NoRegion {
            region: "RegionTwo".into(),
            known: "RegionOne".into(),
        };
        assert_eq!(
            e.to_string(),
            "region \"RegionTwo\" does not exist in Keystone (its regions: RegionOne); give --region one of them, or create it first"
        );
    }
}
