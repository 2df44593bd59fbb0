//! osc-placement, a real Placement client, against `kubeplace placement serve`: the
//! `openstack resource provider …`, `allocation candidate list` and `trait create` commands.
//!
//! The client lives in a virtualenv made by `hack/osc-venv.sh` (CI runs it before
//! `cargo test`); without it this test fails and says how to make it.

#[path = "support/osc.rs"]
mod osc_client;
mod placement_server;

use std::path::PathBuf;

use osc_client::split;
use placement_server::Server;
use serde_json::Value;

/// Runs `openstack … -f json` against the server; the parsed output, or the failure's
/// standard error.
fn osc(bin: &PathBuf, s: &Server, args: &[&str]) -> Result<Value, String> {
    osc_client::run(bin, &s.url(), "admin", args)
}

#[track_caller]
fn ok(bin: &PathBuf, s: &Server, args: &[&str]) -> Value {
    osc(bin, s, args).unwrap_or_else(|e| panic!("openstack {}: {e}", args.join(" ")))
}

/// The `resource provider` column of `allocation candidate list`.
fn candidate_providers(rows: &Value) -> Vec<String> {
    rows.as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            r["resource provider"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn osc_placement_drives_the_api() {
    let bin = osc_client::openstack_binary();
    let s = Server::start(&[]);
    let cn1 = ok(&bin, &s, &split("resource provider create cn1 -f json"));
    let cn1 = cn1["uuid"].as_str().expect("a uuid").to_string();
    let cn2 = ok(&bin, &s, &split("resource provider create cn2 -f json"));
    let cn2 = cn2["uuid"].as_str().expect("a uuid").to_string();
    let list = ok(&bin, &s, &split("resource provider list -f json"));
    assert_eq!(list.as_array().map(Vec::len), Some(2), "{list}");
    let shown = ok(
        &bin,
        &s,
        &[&split("resource provider show")[..], &[&cn1, "-f", "json"]].concat(),
    );
    assert_eq!(shown["name"], "cn1");
    assert_eq!(shown["generation"], 0);

    for rp in [&cn1, &cn2] {
        let inv = ok(
            &bin,
            &s,
            &[
                &split("resource provider inventory set")[..],
                &[
                    rp,
                    "--resource",
                    "VCPU=4",
                    "--resource",
                    "MEMORY_MB=2048",
                    "-f",
                    "json",
                ],
            ]
            .concat(),
        );
        assert_eq!(inv.as_array().map(Vec::len), Some(2), "{inv}");
    }
    let vcpu = ok(
        &bin,
        &s,
        &[
            &split("resource provider inventory show")[..],
            &[&cn1, "VCPU", "-f", "json"],
        ]
        .concat(),
    );
    assert_eq!(vcpu["total"], 4);

    // A custom trait must be created before a provider can have it.
    let refused = osc(
        &bin,
        &s,
        &[
            &split("resource provider trait set")[..],
            &[&cn1, "--trait", "CUSTOM_GOLD", "-f", "json"],
        ]
        .concat(),
    );
    assert!(
        refused.is_err(),
        "CUSTOM_GOLD was accepted before it was created"
    );
    ok(&bin, &s, &split("trait create CUSTOM_GOLD"));
    let traits = ok(
        &bin,
        &s,
        &[
            &split("resource provider trait set")[..],
            &[
                &cn1,
                "--trait",
                "CUSTOM_GOLD",
                "--trait",
                "COMPUTE_NODE",
                "-f",
                "json",
            ],
        ]
        .concat(),
    );
    assert_eq!(traits.as_array().map(Vec::len), Some(2), "{traits}");

    let gold = ok(
        &bin,
        &s,
        &split("allocation candidate list --resource VCPU=1 --required CUSTOM_GOLD -f json"),
    );
    assert_eq!(candidate_providers(&gold), vec![cn1.clone()]);
    let not_gold = ok(
        &bin,
        &s,
        &split("allocation candidate list --resource VCPU=1 --forbidden CUSTOM_GOLD -f json"),
    );
    assert_eq!(candidate_providers(&not_gold), vec![cn2.clone()]);

    let consumer = "33333333-3333-4333-8333-333333333333";
    let claim = |amount: u32| {
        osc(
            &bin,
            &s,
            &[
                &split("resource provider allocation set")[..],
                &[
                    consumer,
                    "--allocation",
                    &format!("rp={cn1},VCPU={amount}"),
                    "--project-id",
                    "p",
                    "--user-id",
                    "u",
                    "--consumer-type",
                    "INSTANCE",
                    "-f",
                    "json",
                ],
            ]
            .concat(),
        )
    };
    let set = claim(3).expect("a claim within capacity");
    assert_eq!(set[0]["resources"]["VCPU"], 3, "{set}");
    let over = claim(5).expect_err("a claim above capacity is refused");
    assert!(over.contains("Unable to allocate inventory"), "{over}");
    let shown = ok(
        &bin,
        &s,
        &[
            &split("resource provider allocation show")[..],
            &[consumer, "-f", "json"],
        ]
        .concat(),
    );
    assert_eq!(shown[0]["resource_provider"], cn1.as_str(), "{shown}");
    assert_eq!(shown[0]["resources"]["VCPU"], 3);
    // The claim leaves 1 VCPU on cn1.
    let two = ok(
        &bin,
        &s,
        &split("allocation candidate list --resource VCPU=2 --required CUSTOM_GOLD -f json"),
    );
    assert!(candidate_providers(&two).is_empty(), "{two}");
    ok(
        &bin,
        &s,
        &[
            &split("resource provider allocation unset")[..],
            &[consumer, "--provider", &cn1, "-f", "json"],
        ]
        .concat(),
    );
    let shown = ok(
        &bin,
        &s,
        &[
            &split("resource provider allocation show")[..],
            &[consumer, "-f", "json"],
        ]
        .concat(),
    );
    assert_eq!(shown.as_array().map(Vec::len), Some(0), "{shown}");

    ok(
        &bin,
        &s,
        &[&split("resource provider delete")[..], &[&cn2]].concat(),
    );
    let list = ok(&bin, &s, &split("resource provider list -f json"));
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
}
