//! A Google Cloud worker joins through kops-controller, from boot: nodeup
//! finds no boot config file, reads the instance's user data and identity
//! from the metadata server (a test server written from Google's metadata
//! API), signs its token with the shielded VM's vTPM (swtpm, a real TPM
//! 2.0, provisioned with Google's attestation key template as the VM's
//! firmware leaves it) and asks kops-controller, which looks the instance
//! up in Compute (the GCE API test server, reporting the TPM's key as the
//! instance's signing key) and issues the node's certificates and config.
//! The same node with another TPM is refused.

mod common;

use std::sync::Arc;
use std::time::Duration;

use kops_bootstrap::protocol;
use kops_controller::test_support::{self, ServingPki};
use kops_nodeup::agent::{self, tpm, NodeupError};
use kops_nodeup::bootstrap::{render_script, BootConfig, ConfigServer};
use kops_testkit::swtpm::Swtpm;
use serde_json::json;

const CLUSTER: &str = "gce-boot.example.com";
const PROJECT: &str = "testproject";
const REGION: &str = "us-test1";
const ZONE: &str = "us-test1-a";
const GROUP: &str = "nodes-us-test1-a";
const INSTANCE: &str = "nodes-us-test1-a-w1";

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A TPM as a new shielded VM has it, and its attestation key's PEM.
fn new_vtpm() -> Option<(Swtpm, String)> {
    let swtpm = Swtpm::start()?;
    swtpm.provision_gce_ak_template();
    let key = tpm::AttestationKey::load(
        tpm::Tpm::open(&swtpm.address()).unwrap(),
        tpm::GCE_AK_TEMPLATE_RSA,
    )
    .unwrap();
    let pem = key.public.to_pem();
    drop(key);
    Some((swtpm, pem))
}

#[test]
fn a_gce_worker_joins_from_boot_signing_with_its_vtpm() {
    let Some(api) = kops_testkit::require_gce_api() else {
        return;
    };
    let Some((vtpm, ek_pub)) = new_vtpm() else {
        return;
    };
    let Some((other_vtpm, _)) = new_vtpm() else {
        return;
    };
    common::run_with_logs(|logs| async move {
        let tmp = tempfile::tempdir().unwrap();

        // The control plane: kops-controller with its PKI and the
        // group's node config.
        let pki = ServingPki::write(&tmp.path().join("pki"), CLUSTER);
        let ca = &pki.ca;
        let state = tmp.path().join("state").join(CLUSTER);
        let node_config = format!(
                "ClusterName: {CLUSTER}\nKubeletConfig:\n  nodeLabels:\n    node-role.kubernetes.io/node: \"\"\n"
            );
        write(
            &state.join(format!("igconfig/node/{GROUP}/nodeupconfig.yaml")),
            &node_config,
        );
        let mut options = kops_controller::Options::for_gce(
            CLUSTER,
            &format!("file://{}", state.display()),
            "",
            PROJECT,
            REGION,
        );
        pki.configure(&mut options);

        // The instance, as the managed group made it: the cluster's
        // metadata, its group, and the vTPM's key as its signing key.
        let path = format!("compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/{INSTANCE}");
        api.seed(
            &path,
            json!({
                "name": INSTANCE,
                "status": "RUNNING",
                "machineType": format!("zones/{ZONE}/machineTypes/e2-medium"),
                "metadata": {"items": [
                    {"key": "kops-k8s-io-instance-group-name", "value": GROUP},
                    {"key": "cluster-name", "value": CLUSTER},
                ]},
                "networkInterfaces": [{"networkIP": "10.0.16.3"}],
            }),
        );
        api.seed(
            &format!("{path}/shieldedInstanceIdentity"),
            json!({
                "kind": "compute#shieldedInstanceIdentity",
                "signingKey": {"ekPub": ek_pub},
                "encryptionKey": {"ekPub": ek_pub},
            }),
        );
        for (k, v) in api.env() {
            std::env::set_var(k, v);
        }
        // The instance's metadata server (the controller asks it for
        // its Compute token; the node for who it is).
        let metadata = kops_testkit::gce_metadata::MetadataServer::start(
            kops_testkit::gce_metadata::instance_values(PROJECT, ZONE, INSTANCE, "10.0.16.3"),
        );
        std::env::set_var("GCE_METADATA_HOST", &metadata.host);

        let controller = Arc::new(
            kops_controller::build(options)
                .await
                .unwrap_or_else(|e| panic!("kops-controller: {e}")),
        );
        let url = test_support::serve(controller).await;

        // The instance's user data: the boot config naming
        // kops-controller.
        let boot = BootConfig {
            cloud_provider: "gce".into(),
            cluster_name: CLUSTER.into(),
            config_server: Some(ConfigServer {
                ca_certificates: ca.certificate_pem().to_string(),
                servers: vec![url.clone()],
                tls_server_name: protocol::audience(CLUSTER),
            }),
            instance_group_name: GROUP.into(),
            instance_group_role: "Node".into(),
            nodeup_config_hash: kops_nodeup::config::config_hash(node_config.as_bytes()),
            ..Default::default()
        };
        metadata.set(
            "instance/attributes/user-data",
            Some(&render_script(&[], None, &boot)),
        );

        let node = |tpm: &Swtpm| {
            let mut options = agent::Options::new(
                tmp.path().join("no-such-kube_env.yaml"),
                tmp.path().join("root"),
            );
            options.tpm = tpm.address();
            options.bootstrap_timeout = Duration::from_secs(5);
            options.retry_delay = Duration::from_millis(100);
            options
        };

        // The worker joins: named after its instance, its certificates.
        let joined = agent::join(&node(&vtpm))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", logs.text()));
        assert_eq!(joined.node_name, INSTANCE);
        assert_eq!(joined.options.region.as_deref(), Some(REGION));
        assert_eq!(joined.loaded.config.cluster_name, CLUSTER);
        let issued = joined.loaded.issued.expect("certificates");
        let kubelet = &issued["/var/lib/kubelet/pki/kubelet-client.crt"].0;
        let subject = kops_pki::certificate_info(kubelet).unwrap().subject;
        assert!(
            subject.contains(&format!("system:node:{INSTANCE}")),
            "{subject}"
        );
        // Its node config, then its certificates (nodeup asks twice).
        for what in ["issued its node config", "issued kubelet"] {
            let line = format!("node {INSTANCE} (instance group {GROUP}): {what}");
            assert_eq!(logs.count(&line), 1, "{line}\n{}", logs.text());
        }

        // The same instance's claim signed by another TPM: refused.
        match agent::join(&node(&other_vtpm)).await {
            Err(NodeupError::Bootstrap { reason }) => assert!(reason.contains("403"), "{reason}"),
            other => panic!("expected a refusal, got {:?}", other.map(|j| j.node_name)),
        }
        assert_eq!(
            logs.count(&format!(
                "does not verify with the shielded-VM signing key of instance `{INSTANCE}`"
            )),
            1,
            "{}",
            logs.text()
        );
        assert_eq!(
            logs.count("issued"),
            2,
            "nothing more issued: {}",
            logs.text()
        );
    });
}
