//! A ProviderConfig through kubectl: applied to a provider it names, and a conflict with
//! the provider's own inventory shown as a condition on both objects.

use super::support::exclusive_lock;
use super::{Operator, crds_installed, eventually};

const CONFIG: &str = r#"
apiVersion: kubeplace.io/v1alpha1
kind: ProviderConfig
metadata:
  name: e2e-pc
spec:
  meta:
    schemaVersion: "1.0"
  providers:
  - identification:
      name: e2e-pc-host
    inventories:
      additional:
      - CUSTOM_E2E_PC:
          total: 4
    traits:
      additional:
      - CUSTOM_E2E_PC_TUNED
"#;

fn provider(own_pc_inventory: bool) -> String {
    let extra = if own_pc_inventory {
        "\n    CUSTOM_E2E_PC: {total: 1}"
    } else {
        ""
    };
    format!(
        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: e2e-pc-host\nspec:\n  inventories:\n    VCPU: {{total: 4}}{extra}\n"
    )
}

fn field(cp: &super::ControlPlane, what: &str, path: &str, want: &str) -> String {
    eventually(cp, &["get", what, "-o", &format!("jsonpath={path}")], want)
}

#[test]
fn a_provider_config_conflict_shows_as_a_condition() {
    let _exclusive = exclusive_lock();
    let cp = crds_installed();
    let operator = Operator::start(cp, "kubeplace-provider-config", &["--leader-elect=false"]);
    cp.kubectl_stdin(&["apply", "-f", "-"], &provider(false))
        .ok();
    cp.kubectl_stdin(&["apply", "-f", "-"], CONFIG).ok();
    // Applied: the provider gains the config's inventory and trait.
    field(
        cp,
        "providerconfig/e2e-pc",
        "{.status.conditions[0].reason}",
        "Applied",
    );
    field(
        cp,
        "resourceprovider/e2e-pc-host",
        "{.status.effectiveInventories.CUSTOM_E2E_PC.total}",
        "4",
    );
    field(
        cp,
        "resourceprovider/e2e-pc-host",
        "{.status.effectiveTraits}",
        r#"["CUSTOM_E2E_PC_TUNED"]"#,
    );
    // The provider now reports the class itself: its own inventory wins, and both
    // objects say why the config's was ignored.
    cp.kubectl_stdin(&["apply", "-f", "-"], &provider(true))
        .ok();
    let message = "e2e-pc providers[0] (name e2e-pc-host): provider \"e2e-pc-host\" already has CUSTOM_E2E_PC inventory of its own; the config's is ignored";
    field(
        cp,
        "providerconfig/e2e-pc",
        "{.status.conditions[0].status}/{.status.conditions[0].reason}",
        "False/Conflict",
    );
    field(
        cp,
        "providerconfig/e2e-pc",
        "{.status.conditions[0].message}",
        message,
    );
    field(
        cp,
        "resourceprovider/e2e-pc-host",
        "{.status.conditions[?(@.type==\"ProviderConfigApplied\")].reason}",
        "Conflict",
    );
    field(
        cp,
        "resourceprovider/e2e-pc-host",
        "{.status.effectiveInventories.CUSTOM_E2E_PC.total}",
        "1",
    );
    // Resolving it clears the condition.
    cp.kubectl_stdin(&["apply", "-f", "-"], &provider(false))
        .ok();
    field(
        cp,
        "providerconfig/e2e-pc",
        "{.status.conditions[0].reason}",
        "Applied",
    );
    cp.kubectl(&["delete", "providerconfig", "e2e-pc"]).ok();
    cp.kubectl(&["delete", "resourceprovider", "e2e-pc-host"])
        .ok();
    operator.stop_and_unregister(cp);
}
