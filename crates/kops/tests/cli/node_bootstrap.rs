//! The node bootstrap chain through the binary against moto: `update
//! cluster --yes` stores each group's node config and the cluster's
//! keysets, and the launch templates' user data carries a boot config that
//! nodeup accepts: it names the state store, and the hash it pins is the
//! stored node config's (checked by nodeup's own loader, as on a node).

use crate::common;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use base64::Engine;
use common::{file_url, kops_on};

/// The decoded user data of the latest version of a launch template.
async fn user_data(endpoint: &str, template: &str) -> String {
    let config = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let out = ec2
        .describe_launch_template_versions()
        .launch_template_name(template)
        .versions("$Latest")
        .send()
        .await
        .unwrap();
    let data = out.launch_template_versions()[0]
        .launch_template_data()
        .and_then(|d| d.user_data())
        .unwrap_or_default();
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn update_stores_node_configs_that_the_user_data_pins() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let cluster = "bootstrap.example.com";
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    crate::common::create_and_apply(moto, cluster, &state);

    let base = tmp.path().join("state").join(cluster);
    let groups = std::fs::read_dir(base.join("instancegroup"))
        .unwrap()
        .count();
    let stored = common::tree(&base.join("igconfig"));
    assert_eq!(stored.len(), groups, "{stored:?}");
    assert!(
        stored.contains(&"node/nodes-us-east-1a/nodeupconfig.yaml".to_string()),
        "{stored:?}"
    );
    assert!(
        stored.contains(&"control-plane/control-plane-us-east-1a/nodeupconfig.yaml".to_string()),
        "{stored:?}"
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (template, role) in [
        (
            "control-plane-us-east-1a.masters.bootstrap.example.com",
            kops_api::Role::ControlPlane,
        ),
        (
            "nodes-us-east-1a.bootstrap.example.com",
            kops_api::Role::Node,
        ),
    ] {
        let script = rt.block_on(user_data(&moto.endpoint(), template));
        let boot = kops_nodeup::bootstrap::boot_config_text(&script)
            .unwrap_or_else(|| panic!("{template}: no boot config in\n{script}"));
        let boot_config = kops_nodeup::BootConfig::parse(boot).unwrap();
        if role == kops_api::Role::Node {
            // Workers ask kops-controller (node_join.rs runs that): their
            // boot config names it and the CA to trust it with, and no
            // state store; the hash pins the stored node config.
            assert_eq!(boot_config.config_base, None);
            let server = boot_config.config_server.clone().expect("ConfigServer");
            assert!(server.ca_certificates.contains("BEGIN CERTIFICATE"));
            let stored =
                std::fs::read(base.join("igconfig/node/nodes-us-east-1a/nodeupconfig.yaml"))
                    .unwrap();
            assert_eq!(
                boot_config.nodeup_config_hash,
                kops_nodeup::config::config_hash(&stored)
            );
            continue;
        }
        let conf = tmp.path().join(format!("{template}.kube_env.yaml"));
        std::fs::write(&conf, boot).unwrap();
        // nodeup's own first step on a node: read the config the boot
        // config points at and check its hash.
        let loaded = rt
            .block_on(kops_nodeup::agent::load(&conf))
            .unwrap_or_else(|e| panic!("{template}: {e}"));
        assert_eq!(loaded.role, role);
        assert_eq!(loaded.config.cluster_name, cluster);
        // The keysets nodeup issues certificates from are there too.
        let keypairs = loaded
            .config
            .config_store
            .as_ref()
            .unwrap()
            .keypairs
            .clone()
            .unwrap();
        let ca = keypairs.trim_start_matches("file://").to_string()
            + "/private/kubernetes-ca/keyset.yaml";
        assert!(std::path::Path::new(&ca).exists(), "{ca}");
    }

    // A second update rewrites nothing the nodes see: same bytes, same hash.
    let before =
        std::fs::read(base.join("igconfig/node/nodes-us-east-1a/nodeupconfig.yaml")).unwrap();
    let r = kops_on(
        moto,
        &["update", "cluster", cluster, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "second apply: {}", r.stderr);
    let after =
        std::fs::read(base.join("igconfig/node/nodes-us-east-1a/nodeupconfig.yaml")).unwrap();
    assert_eq!(before, after);

    let r = kops_on(
        moto,
        &["delete", "cluster", cluster, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "delete: {}", r.stderr);
    assert!(
        !base.join("igconfig").exists(),
        "delete removes the node configs"
    );
}
