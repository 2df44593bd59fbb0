//! Who a request comes from, once its token is taken: anyone allowed everything, or roles
//! and a scope for Placement's policies to judge.

/// Who a request comes from, once its token is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// May call every endpoint: the static token, or a Kubernetes caller whose RBAC verb
    /// was allowed (its user, as the TokenReview named it, for logs).
    Unrestricted(Option<String>),
    /// Placement's policies decide, from these roles and scope.
    Roles(Credentials),
}

/// What a caller's token says about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// Its roles, implied ones included (Keystone expands them).
    pub roles: Vec<String>,
    /// The project the token is scoped to.
    pub project_id: Option<String>,
    /// The token is scoped to the system.
    pub system: bool,
    /// The domain the token is scoped to.
    pub domain_id: Option<String>,
    /// Who the caller is (for logs).
    pub user_id: Option<String>,
}

impl Credentials {
    pub(crate) fn has(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r.eq_ignore_ascii_case(role))
    }

    /// The scope oslo.policy sees: system, domain, else project (an unscoped token too).
    pub(crate) fn scope(&self) -> &'static str {
        if self.system {
            "system"
        } else if self.domain_id.is_some() {
            "domain"
        } else {
            "project"
        }
    }
}
