//! The ValidatingWebhookConfiguration that sends kubeplace's kinds to the webhook: one
//! webhook per kind, by URL, for `kubeplace run --self-signed` outside a cluster.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};

use crate::controllers::status::FIELD_MANAGER;
use kubeplace_api::Kind;
use kubeplace_api::{GROUP, VERSION};

/// `https://HOST:PORT`, with an IPv6 address in brackets.
pub fn base_url(host: &str, port: u16) -> String {
    if host.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("https://[{host}]:{port}")
    } else {
        format!("https://{host}:{port}")
    }
}

/// The operations reviewed for a plural: creation and update, and deletion of providers
/// (a provider still in use must not go).
pub(crate) fn operations(plural: &str) -> Vec<String> {
    let mut ops = vec!["CREATE".to_string(), "UPDATE".to_string()];
    if plural == "resourceproviders" {
        ops.push("DELETE".into());
    }
    ops
}

/// The configuration: a webhook `<plural>.kubeplace.io` at `<base_url>/validate/<plural>`
/// for each kind, trusting `ca_bundle_pem`; failurePolicy Fail, no side effects,
/// AdmissionReview v1, matchPolicy Equivalent, 10 s timeout.
pub fn webhook_configuration(
    name: &str,
    base_url: &str,
    ca_bundle_pem: &str,
) -> ValidatingWebhookConfiguration {
    let webhooks = Kind::ALL
        .into_iter()
        .map(|kind| (kind, kind.api_resource()))
        .map(|(kind, r)| {
            webhook(
                &r.plural,
                base_url,
                ca_bundle_pem,
                vec![RuleWithOperations {
                    api_groups: Some(vec![GROUP.into()]),
                    api_versions: Some(vec![VERSION.into()]),
                    operations: Some(operations(&r.plural)),
                    resources: Some(vec![r.plural.clone()]),
                    scope: Some(
                        if kind.is_namespaced() {
                            "Namespaced"
                        } else {
                            "Cluster"
                        }
                        .into(),
                    ),
                }],
            )
        })
        .collect();
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                [(
                    "app.kubernetes.io/managed-by".to_string(),
                    "kubeplace".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        webhooks: Some(webhooks),
    }
}

/// The webhook that decides devices kube-scheduler allocates (`resourceclaims/status`
/// updates) at the claims ledger, registered with the cluster mirror: a device a Server
/// holds is not given to a pod (docs/mirror.md).
pub fn device_claims_webhook(base_url: &str, ca_bundle_pem: &str) -> ValidatingWebhook {
    webhook(
        "resourceclaims",
        base_url,
        ca_bundle_pem,
        vec![RuleWithOperations {
            api_groups: Some(vec!["resource.k8s.io".into()]),
            api_versions: Some(vec!["v1".into()]),
            operations: Some(vec!["UPDATE".into()]),
            resources: Some(vec!["resourceclaims/status".into()]),
            scope: Some("Namespaced".into()),
        }],
    )
}

/// The webhook that admits pods and ResourceClaims labelled `kubeplace.io/reservation-for`
/// only as the reservations kubeplace makes (the mirror leaves such objects out); it sees
/// only objects with that label. Registered with the cluster mirror.
pub fn reservations_webhook(base_url: &str, ca_bundle_pem: &str) -> ValidatingWebhook {
    let rule = |group: &str, plural: &str| RuleWithOperations {
        api_groups: Some(vec![group.into()]),
        api_versions: Some(vec!["v1".into()]),
        operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
        resources: Some(vec![plural.into()]),
        scope: Some("Namespaced".into()),
    };
    ValidatingWebhook {
        object_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: kubeplace_policy::mirror::RESERVATION_LABEL.into(),
                operator: "Exists".into(),
                values: None,
            }]),
            match_labels: None,
        }),
        ..webhook(
            "reservations",
            base_url,
            ca_bundle_pem,
            vec![rule("", "pods"), rule("resource.k8s.io", "resourceclaims")],
        )
    }
}

/// A webhook `<path>.kubeplace.io` at `<base_url>/validate/<path>` with `rules`, trusting
/// `ca_bundle_pem`; failurePolicy Fail, no side effects, AdmissionReview v1, matchPolicy
/// Equivalent, 10 s timeout.
fn webhook(
    path: &str,
    base_url: &str,
    ca_bundle_pem: &str,
    rules: Vec<RuleWithOperations>,
) -> ValidatingWebhook {
    ValidatingWebhook {
        name: format!("{path}.{GROUP}"),
        client_config: WebhookClientConfig {
            url: Some(format!("{base_url}/validate/{path}")),
            ca_bundle: Some(ByteString(ca_bundle_pem.as_bytes().to_vec())),
            service: None,
        },
        rules: Some(rules),
        failure_policy: Some("Fail".into()),
        side_effects: "None".into(),
        admission_review_versions: vec!["v1".into()],
        match_policy: Some("Equivalent".into()),
        timeout_seconds: Some(10),
        ..Default::default()
    }
}

/// Creates the configuration or brings it to `config` (server-side apply, forced).
pub async fn apply(
    client: Client,
    config: &ValidatingWebhookConfiguration,
) -> Result<(), kube::Error> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client);
    let name = config.metadata.name.clone().unwrap_or_default();
    let mut body = serde_json::to_value(config).unwrap_or_default();
    body["apiVersion"] = "admissionregistration.k8s.io/v1".into();
    body["kind"] = "ValidatingWebhookConfiguration".into();
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_webhook_per_kind_by_url() {
        let c = webhook_configuration("kubeplace", &base_url("127.0.0.1", 8443), "PEM");
        let v = serde_json::to_value(&c).unwrap();
        let hooks = v["webhooks"].as_array().unwrap();
        assert_eq!(hooks.len(), Kind::ALL.len());
        let flavors = hooks
            .iter()
            .find(|h| h["name"] == "flavors.kubeplace.io")
            .unwrap();
        assert_eq!(
            flavors["clientConfig"]["url"],
            "https://127.0.0.1:8443/validate/flavors"
        );
        assert_eq!(
            flavors["clientConfig"]["caBundle"], "UEVN",
            "base64 of the PEM"
        );
        assert_eq!(flavors["failurePolicy"], "Fail");
        assert_eq!(flavors["sideEffects"], "None");
        assert_eq!(flavors["matchPolicy"], "Equivalent");
        assert_eq!(flavors["timeoutSeconds"], 10);
        assert_eq!(flavors["admissionReviewVersions"][0], "v1");
        assert_eq!(
            flavors["rules"][0]["operations"],
            serde_json::json!(["CREATE", "UPDATE"])
        );
        let rps = hooks
            .iter()
            .find(|h| h["name"] == "resourceproviders.kubeplace.io")
            .unwrap();
        assert_eq!(
            rps["rules"][0]["operations"],
            serde_json::json!(["CREATE", "UPDATE", "DELETE"])
        );
        assert_eq!(base_url("::1", 9443), "https://[::1]:9443");
    }
}
