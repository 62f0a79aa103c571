//! A Google Cloud worker joins through kops-controller: the GCE API test
//! server (kops-testkit, written from Google's discovery documents) is
//! Compute, a metadata test server gives the controller its token, and the
//! node's software key stands in for its vTPM attestation key (Compute
//! reports its public half as the instance's shielded-VM signing key). The
//! node gets its kubelet certificate and node config.
//!
//! Refused, each with one log line and nothing issued: a token naming
//! another project, an instance without the cluster's `cluster-name`
//! metadata, a replayed token, a signature by another key. Then the
//! controller labels a node from its managed instance group's template and
//! its network tags, and leaves a node claiming another instance alone.

use kops_controller::test_support::{self, ServingPki};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use kops_bootstrap::client::{BootstrapClient, ClientError};
use kops_bootstrap::gce::token::{create_token, InstanceRef, SoftwareKey};
use kops_bootstrap::protocol::{self, BootstrapRequest, BOOTSTRAP_API_VERSION};
use kops_controller::Options;
use kops_pki::CertificateAuthority;
use kops_testkit::logs::Logs;
use serde_json::json;

const CLUSTER: &str = "gce-join.example.com";
const PROJECT: &str = "testproject";
const REGION: &str = "us-test1";
const ZONE: &str = "us-test1-a";
const WORKERS: &str = "nodes-us-test1-a";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A new software key: the signer and the PEM Compute reports.
fn key() -> (SoftwareKey, String) {
    let (private, public_der) = kops_pki::new_private_key().unwrap();
    let der = base64_lines(&public_der);
    let public = format!("-----BEGIN PUBLIC KEY-----\n{der}-----END PUBLIC KEY-----\n");
    (SoftwareKey::from_pem(&private).unwrap(), public)
}

fn base64_lines(der: &[u8]) -> String {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    text.as_bytes()
        .chunks(64)
        .map(|c| format!("{}\n", String::from_utf8_lossy(c)))
        .collect()
}

/// An instance of `group` in the GCE API server, with its shielded-VM
/// signing key; without `cluster-name` metadata when `stranger`.
fn instance(api: &kops_testkit::GceApi, name: &str, ip: &str, ek_pub: &str, stranger: bool) {
    let mut items = vec![json!({"key": "kops-k8s-io-instance-group-name", "value": WORKERS})];
    if !stranger {
        items.push(json!({"key": "cluster-name", "value": CLUSTER}));
    }
    let path = format!("compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/{name}");
    api.seed(
        &path,
        json!({
            "name": name,
            "status": "RUNNING",
            "machineType": format!("zones/{ZONE}/machineTypes/e2-medium"),
            "metadata": {"items": items},
            "networkInterfaces": [{"networkIP": ip}],
            "tags": {"items": ["gce-join-example-com-k8s-io-role-node"]},
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
}

fn request() -> BootstrapRequest {
    let (_, public_key) = kops_pki::new_private_key().unwrap();
    BootstrapRequest {
        api_version: BOOTSTRAP_API_VERSION.to_string(),
        certs: BTreeMap::from([(
            "kubelet".to_string(),
            kops_bootstrap::protocol::public_key_pem(&public_key),
        )]),
        include_node_config: true,
        ..Default::default()
    }
}

fn refused(result: Result<protocol::BootstrapResponse, ClientError>) -> (u16, String) {
    match result {
        Err(ClientError::Refused {
            status, message, ..
        }) => (status, message),
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(_) => panic!("was accepted"),
    }
}

/// The GCE API test server, a metadata server giving the controller its
/// token (both kept alive by the caller), the environment pointing at
/// them, and the controller's log; `None` (skipped) without the API's
/// discovery documents.
fn environment() -> Option<(
    kops_testkit::GceApi,
    kops_testkit::gce_metadata::MetadataServer,
    Logs,
)> {
    let api = kops_testkit::require_gce_api()?;
    let metadata = kops_testkit::gce_metadata::MetadataServer::start(
        kops_testkit::gce_metadata::instance_values(
            PROJECT,
            "us-test1-b",
            "control-plane-x",
            "10.0.0.2",
        ),
    );
    for (k, v) in api.env() {
        std::env::set_var(k, v);
    }
    std::env::set_var("GCE_METADATA_HOST", &metadata.host);
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_env_filter("kops_controller=info")
        .init();
    Some((api, metadata, logs))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The cluster's controller with its PKI and state under `dir`
/// (`enableCloudIPAM` as given), and the CA it signs with.
async fn controller(
    dir: &Path,
    ipam: bool,
) -> (Arc<kops_controller::Controller>, CertificateAuthority) {
    let pki = ServingPki::write(&dir.join("pki"), CLUSTER);
    let state = dir.join("state").join(CLUSTER);
    write(
        &state.join(format!("igconfig/node/{WORKERS}/nodeupconfig.yaml")),
        "KubeletConfig:\n  nodeLabels:\n    node-role.kubernetes.io/node: \"\"\n",
    );
    let mut options = Options::for_gce(
        CLUSTER,
        &format!("file://{}", state.display()),
        "",
        PROJECT,
        REGION,
    );
    pki.configure(&mut options);
    options.enable_cloud_ipam = ipam;
    // As kops writes it with KOPS_FEATURE_FLAGS=Metal (enrolled machines
    // beside the instances).
    options.server.pki = Some(Default::default());
    let controller = kops_controller::build(options)
        .await
        .unwrap_or_else(|e| panic!("kops-controller: {e}"));
    (Arc::new(controller), pki.ca)
}

#[test]
fn a_gce_worker_joins_and_impostors_are_refused() {
    let Some((api, _metadata, logs)) = environment() else {
        return;
    };
    runtime().block_on(async move {
            let tmp = tempfile::tempdir().unwrap();
            let (controller, ca) = controller(tmp.path(), false).await;
            let url = test_support::serve(controller.clone()).await;
            let client = BootstrapClient::new(
                CLUSTER,
                REGION,
                std::slice::from_ref(&url),
                ca.certificate_pem(),
                &protocol::audience(CLUSTER),
            )
            .unwrap();

            // 1. The worker: its certificate and node config.
            let (signer, ek_pub) = key();
            instance(&api, "nodes-us-test1-a-w1", "10.0.16.3", &ek_pub, false);
            let me = InstanceRef {
                project: PROJECT.into(),
                zone: ZONE.into(),
                instance: "nodes-us-test1-a-w1".into(),
            };
            let request = request();
            let response = client
                .bootstrap_gce(&request, &me, &signer)
                .await
                .unwrap_or_else(|e| panic!("{e}\n{}\n{:?}\n{:?}", logs.text(), api.calls(), api.paths()));
            let config = response.node_config.expect("node config");
            assert!(config.nodeup_config.contains("node-role.kubernetes.io/node"));
            let cert = &response.certs["kubelet"];
            let (_, pem) = x509_parser::pem::parse_x509_pem(cert.as_bytes()).unwrap();
            let parsed = pem.parse_x509().unwrap();
            assert_eq!(
                parsed.subject().to_string(),
                "O=system:nodes, CN=system:node:nodes-us-test1-a-w1"
            );
            assert_eq!(
                logs.lines_with("node nodes-us-test1-a-w1 (instance group nodes-us-test1-a): issued kubelet and its node config")
                    .len(),
                1
            );
            let calls: Vec<String> = api.take_calls().into_iter().map(|c| c.method).collect();
            assert_eq!(
                calls,
                ["compute.instances.get", "compute.instances.getShieldedInstanceIdentity"]
            );

            let body = serde_json::to_vec(&request).unwrap();
            let token = |who: &InstanceRef, signer: &SoftwareKey| {
                create_token(who, signer, &body, SystemTime::now()).unwrap()
            };
            let expect_refusal = |result, log: &str| {
                let (status, message) = refused(result);
                assert_eq!((status, message.as_str()), (403, "failed to verify token"));
                let lines = logs.lines_with(log);
                assert_eq!(lines.len(), 1, "`{log}`: {lines:?}");
            };

            // 2. Another project.
            let elsewhere = InstanceRef {
                project: "otherproject".into(),
                ..me.clone()
            };
            expect_refusal(
                client.post(&url, &token(&elsewhere, &signer), &body).await,
                "names project `otherproject`, not this cluster's (`testproject`)",
            );
            assert!(api.take_calls().is_empty(), "no Compute call for another project");

            // 3. An instance without the cluster's metadata.
            let (stranger_key, stranger_pub) = key();
            instance(&api, "stranger-1", "10.0.16.4", &stranger_pub, true);
            let stranger = InstanceRef {
                instance: "stranger-1".into(),
                ..me.clone()
            };
            expect_refusal(
                client.post(&url, &token(&stranger, &stranger_key), &body).await,
                "instance `stranger-1` is not part of cluster `gce-join.example.com` (its `cluster-name` metadata: none)",
            );

            // 4. A replay: the same token twice. (kops' token has no nonce:
            // the same body signed in the same second is the same token, so
            // wait for the next second after the join's.)
            tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
            let once = token(&me, &signer);
            client.post(&url, &once, &body).await.unwrap();
            expect_refusal(
                client.post(&url, &once, &body).await,
                "the token was already used (replay)",
            );

            // 5. A signature by another key.
            let (forger, _) = key();
            expect_refusal(
                client.post(&url, &token(&me, &forger), &body).await,
                "does not verify with the shielded-VM signing key of instance `nodes-us-test1-a-w1`",
            );
            // Refused tokens are not kept; the two accepted are.
            assert_eq!(controller.verifier().replay_entries(), 2);

            // 6. Labels: the group from the managed instance group's
            // template (not the instance's own metadata, which says
            // otherwise here), the role from the network tags.
            let template = format!("projects/{PROJECT}/global/instanceTemplates/nodes-us-test1-a-gce-join-example-com");
            api.seed(
                &format!("compute/v1/{template}"),
                json!({"properties": {"metadata": {"items": [
                    {"key": "cluster-name", "value": CLUSTER},
                    {"key": "kops-k8s-io-instance-group-name", "value": WORKERS}
                ]}}}),
            );
            let manager = format!("projects/{PROJECT}/zones/{ZONE}/instanceGroupManagers/a-nodes-us-test1-a-gce-join-example-com");
            api.seed(
                &format!("compute/v1/{manager}"),
                json!({"instanceTemplate": format!("{}/compute/v1/{template}", api.url()), "targetSize": 1, "baseInstanceName": "nodes-us-test1-a"}),
            );
            let made = "nodes-us-test1-a-m1";
            api.seed(
                &format!("compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/{made}"),
                json!({
                    "status": "RUNNING",
                    "metadata": {"items": [
                        {"key": "cluster-name", "value": CLUSTER},
                        {"key": "kops-k8s-io-instance-group-name", "value": "control-plane-us-test1-a"},
                        {"key": "created-by", "value": manager},
                    ]},
                    "networkInterfaces": [{"networkIP": "10.0.16.9"}],
                    "tags": {"items": ["gce-join-example-com-k8s-io-role-node"]},
                }),
            );
            let kube_api = kops_testkit::kube_api::FakeApi::start();
            let node = |name: &str, instance: &str| {
                json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {"node-role.kubernetes.io/control-plane": ""}},
                    "spec": {"providerID": format!("gce://{PROJECT}/{ZONE}/{instance}")},
                })
            };
            kube_api.put("api/v1", "nodes", "", made, node(made, made));
            // A node claiming another instance is left alone.
            kube_api.put("api/v1", "nodes", "", "impostor", node("impostor", made));
            let kube = kops_controller::kube_client(&kube_api.write_kubeconfig(tmp.path()))
                .await
                .unwrap();
            assert!(
                controller.ipam(kube::Api::all(kube.clone())).is_none(),
                "no cloud IPAM without enableCloudIPAM"
            );
            let labeler = controller
                .labeler(kube::Api::all(kube))
                .expect("a GCE cluster");
            api.take_calls();
            assert_eq!(labeler.run_once().await.unwrap(), 1);
            let calls: Vec<String> = api.take_calls().into_iter().map(|c| c.method).collect();
            assert_eq!(
                calls,
                [
                    "compute.instances.get",
                    "compute.instanceGroupManagers.listManagedInstances",
                    "compute.instanceTemplates.get",
                ]
            );
            let labels = &kube_api.get("api/v1", "nodes", "", made).unwrap()["metadata"]["labels"];
            assert_eq!(labels["kops.k8s.io/instancegroup"], WORKERS, "{labels}");
            assert_eq!(labels["node-role.kubernetes.io/node"], "", "{labels}");
            assert!(labels.get("node-role.kubernetes.io/control-plane").is_none(), "{labels}");
            let impostor = &kube_api.get("api/v1", "nodes", "", "impostor").unwrap()["metadata"]["labels"];
            assert!(impostor.get("kops.k8s.io/instancegroup").is_none(), "{impostor}");
            assert_eq!(logs.lines_with("node labelling: node impostor").len(), 1);
            assert_eq!(labeler.run_once().await.unwrap(), 0, "second pass");

            // 7. With `server.pki` (KOPS_FEATURE_FLAGS=Metal at update), a
            // machine enrolled into this cluster is verified by its Host key
            // beside GCE's instances, as kops chains its verifiers.
            kube_api.serve_crd(&json!({"spec": {
                "group": "kops.k8s.io",
                "names": {"plural": "hosts", "kind": "Host"},
                "scope": "Namespaced",
                "versions": [{"name": "v1alpha2", "served": true}],
            }}));
            let (machine, _) = kops_bootstrap::hostkey::MachineKey::generate().unwrap();
            kube_api.put(
                "apis/kops.k8s.io/v1alpha2",
                "hosts",
                "kops-system",
                "enrolled-1",
                json!({
                    "apiVersion": "kops.k8s.io/v1alpha2", "kind": "Host",
                    "metadata": {"name": "enrolled-1", "namespace": "kops-system"},
                    "spec": {"instanceGroup": WORKERS, "publicKey": machine.public_pem()},
                }),
            );
            let kube = kops_controller::kube_client(&kube_api.write_kubeconfig(tmp.path()))
                .await
                .unwrap();
            controller
                .host_keys()
                .expect("server.pki")
                .read_hosts_from(kops_controller::hostkey::hosts_api(kube));
            api.take_calls();
            let enrolled =
                kops_bootstrap::hostkey::create_token("enrolled-1", &machine, &body, SystemTime::now())
                    .unwrap();
            let response = client
                .post(&url, &enrolled, &body)
                .await
                .unwrap_or_else(|e| panic!("{e}\n{}", logs.text()));
            let (_, pem) = x509_parser::pem::parse_x509_pem(response.certs["kubelet"].as_bytes()).unwrap();
            assert_eq!(
                pem.parse_x509().unwrap().subject().to_string(),
                "O=system:nodes, CN=system:node:enrolled-1"
            );
            assert_eq!(
                logs.lines_with("node enrolled-1 (instance group nodes-us-test1-a): issued kubelet and its node config").len(),
                1
            );
            assert!(api.take_calls().is_empty(), "no Compute call for an enrolled machine");
        });
}

/// kops-controller's cloud IPAM on an IPv6 cluster: a node bound to its
/// instance gets that instance's one external IPv6 range as its pod range
/// (one `instances.get` each); a node that has a range, one claiming
/// another instance, one whose instance is not the cluster's, is stopped
/// or has no IPv6 range get nothing, each named in one warning, once.
#[test]
fn gce_ipam_gives_nodes_their_instances_ipv6_ranges() {
    let Some((api, _metadata, logs)) = environment() else {
        return;
    };
    runtime().block_on(async move {
        let tmp = tempfile::tempdir().unwrap();
        let (controller, _) = controller(tmp.path(), true).await;
        let seed = |name: &str, status: &str, cluster: Option<&str>, ipv6: Option<&str>| {
            let mut items = vec![json!({"key": "kops-k8s-io-instance-group-name", "value": WORKERS})];
            if let Some(cluster) = cluster {
                items.push(json!({"key": "cluster-name", "value": cluster}));
            }
            let mut nic = json!({"name": "nic0", "networkIP": "10.0.16.3", "stackType": "IPV4_IPV6", "ipv6AccessType": "EXTERNAL"});
            if let Some(ipv6) = ipv6 {
                nic["ipv6AccessConfigs"] = json!([{
                    "kind": "compute#accessConfig",
                    "type": "DIRECT_IPV6",
                    "name": "external-ipv6",
                    "externalIpv6": ipv6,
                    "externalIpv6PrefixLength": 96,
                    "networkTier": "PREMIUM",
                }]);
            }
            api.seed(
                &format!("compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/{name}"),
                json!({"name": name, "status": status, "metadata": {"items": items}, "networkInterfaces": [nic]}),
            );
        };
        seed("nodes-a", "RUNNING", Some(CLUSTER), Some("2600:1900:4041:1a4::"));
        seed("nodes-ranged", "RUNNING", Some(CLUSTER), Some("2600:1900:4041:1a5::"));
        seed("stranger", "RUNNING", Some("other.example.com"), Some("2600:1900:4041:1a6::"));
        seed("nodes-stopped", "TERMINATED", Some(CLUSTER), Some("2600:1900:4041:1a7::"));
        seed("nodes-v4", "RUNNING", Some(CLUSTER), None);

        let kube_api = kops_testkit::kube_api::FakeApi::start();
        let node = |name: &str, instance: &str, cidrs: &[&str]| {
            let mut spec = json!({"providerID": format!("gce://{PROJECT}/{ZONE}/{instance}")});
            if !cidrs.is_empty() {
                spec["podCIDR"] = json!(cidrs[0]);
                spec["podCIDRs"] = json!(cidrs);
            }
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec})
        };
        for (name, instance, cidrs) in [
            ("nodes-a", "nodes-a", &[][..]),
            ("nodes-ranged", "nodes-ranged", &["fd00::/96"][..]),
            ("impostor", "nodes-a", &[][..]),
            ("stranger", "stranger", &[][..]),
            ("nodes-stopped", "nodes-stopped", &[][..]),
            ("nodes-v4", "nodes-v4", &[][..]),
        ] {
            kube_api.put("api/v1", "nodes", "", name, node(name, instance, cidrs));
        }
        let kube = kops_controller::kube_client(&kube_api.write_kubeconfig(tmp.path()))
            .await
            .unwrap();
        let ipam = controller
            .ipam(kube::Api::all(kube))
            .expect("enableCloudIPAM on a GCE cluster");
        api.take_calls();
        assert_eq!(ipam.run_once().await.unwrap(), 1);
        let calls: Vec<String> = api.take_calls().into_iter().map(|c| c.method).collect();
        assert_eq!(calls, ["compute.instances.get"; 4], "one read per node without a range, none for the impostor");

        let spec = |name: &str| kube_api.get("api/v1", "nodes", "", name).unwrap()["spec"].clone();
        assert_eq!(spec("nodes-a")["podCIDRs"], json!(["2600:1900:4041:1a4::/96"]));
        assert_eq!(spec("nodes-a")["podCIDR"], "2600:1900:4041:1a4::/96");
        assert_eq!(spec("nodes-ranged")["podCIDRs"], json!(["fd00::/96"]));
        for name in ["impostor", "stranger", "nodes-stopped", "nodes-v4"] {
            assert!(spec(name).get("podCIDRs").is_none(), "{name}: {}", spec(name));
        }
        for (node, reason) in [
            ("impostor", "names another instance than the node"),
            ("stranger", "instance stranger is not part of cluster gce-join.example.com"),
            ("nodes-stopped", "instance nodes-stopped is TERMINATED"),
            ("nodes-v4", "no pod range: instance nodes-v4 has no external IPv6 range"),
        ] {
            let lines = logs.lines_with(&format!("cloud IPAM: node {node}: "));
            assert_eq!(lines.len(), 1, "{node}: {lines:?}");
            assert!(lines[0].contains(reason), "{node}: {lines:?}");
        }

        // The next pass: the refused are read again, not warned again.
        assert_eq!(ipam.run_once().await.unwrap(), 0);
        assert_eq!(api.take_calls().len(), 3);
        assert_eq!(logs.lines_with("cloud IPAM: node").len(), 4);
    });
}
