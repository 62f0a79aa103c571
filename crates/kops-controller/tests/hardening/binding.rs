//! Hostile and broken nodes: the labeller and the cloud IPAM act only on a
//! node bound to its instance, and reconcile each node on its own.

use serde_json::{json, Value};

use crate::harness::{with_moto, Cluster, CONTROL_PLANE, WORKERS};

/// A node as a kubelet registers it.
fn node(name: &str, provider_id: &str, addresses: &[&str]) -> Value {
    let addresses: Vec<Value> = addresses
        .iter()
        .map(|a| json!({"type": "InternalIP", "address": a}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"providerID": provider_id},
        "status": {"addresses": addresses},
    })
}

fn provider_id(instance: &aws_sdk_ec2::types::Instance) -> String {
    format!(
        "aws:///{}/{}",
        instance
            .placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or_default(),
        instance.instance_id().unwrap()
    )
}

#[test]
fn nodes_are_bound_to_their_instances() {
    with_moto(|moto| async move {
        let cluster = Cluster::start(moto, "binding.example.com", true).await;
        let api = kops_testkit::kube_api::FakeApi::start();
        let kube = kops_controller::kube_client(&api.write_kubeconfig(cluster.tmp.path()))
            .await
            .unwrap();
        let labeler = cluster
            .controller
            .labeler(kube::Api::all(kube.clone()))
            .expect("AWS");
        let ipam = cluster
            .controller
            .ipam(kube::Api::all(kube))
            .expect("enableCloudIPAM");

        let worker = cluster.instance(WORKERS, false).await;
        let impostor = cluster.instance(WORKERS, false).await;
        let control_plane = cluster.instance(CONTROL_PLANE, false).await;
        let stranger = cluster.instance(WORKERS, true).await;
        let id = |i: &aws_sdk_ec2::types::Instance| i.instance_id().unwrap().to_string();
        let ip = |i: &aws_sdk_ec2::types::Instance| i.private_ip_address().unwrap().to_string();

        let thief = cluster.instance(WORKERS, false).await;
        let nodes = [
            // Honest nodes: named as their instances, their addresses.
            node(&id(&worker), &provider_id(&worker), &[&ip(&worker)]),
            node(
                &id(&control_plane),
                &provider_id(&control_plane),
                &[&ip(&control_plane)],
            ),
            // A compromised worker registering as the control-plane instance.
            node(
                &id(&impostor),
                &provider_id(&control_plane),
                &[&ip(&impostor)],
            ),
            // Its own id, but another instance's address.
            node(&id(&thief), &provider_id(&thief), &[&ip(&control_plane)]),
            // An instance that is not this cluster's.
            node(&id(&stranger), &provider_id(&stranger), &[&ip(&stranger)]),
            // Broken ones: a malformed and an unknown provider id.
            node("broken", "aws:///us-east-1a/i-nothex!", &[]),
            node("gone", "aws:///us-east-1a/i-0123456789abcdef0", &[]),
        ];
        for object in &nodes {
            let name = object["metadata"]["name"].as_str().unwrap();
            api.put("api/v1", "nodes", "", name, object.clone());
        }

        // Two passes of each: the honest nodes are labelled despite the
        // others; each bad node is named once.
        assert_eq!(labeler.run_once().await.unwrap(), 2);
        assert_eq!(labeler.run_once().await.unwrap(), 0);
        ipam.run_once().await.unwrap();
        ipam.run_once().await.unwrap();

        let labels = |name: &str| {
            api.get("api/v1", "nodes", "", name).unwrap()["metadata"]["labels"].clone()
        };
        assert_eq!(labels(&id(&worker))["node-role.kubernetes.io/node"], "");
        assert_eq!(labels(&id(&worker))["kops.k8s.io/instancegroup"], WORKERS);
        assert_eq!(
            labels(&id(&control_plane))["node-role.kubernetes.io/control-plane"],
            ""
        );
        let impostor_labels = labels(&id(&impostor));
        assert_eq!(
            impostor_labels,
            json!({"kubernetes.io/hostname": id(&impostor)})
        );
        let impostor_node = api.get("api/v1", "nodes", "", &id(&impostor)).unwrap();
        assert!(
            impostor_node["spec"].get("podCIDRs").is_none(),
            "{impostor_node}"
        );

        let logs = &cluster.logs;
        let warned = logs.lines_with(&format!("node {} claims provider id", id(&impostor)));
        assert_eq!(warned.len(), 1, "{}", logs.text());
        assert!(
            warned[0].contains("WARN") && warned[0].contains("is not instance"),
            "{warned:?}"
        );
        assert!(logs.lines_with(&format!("node {} claims", id(&thief)))[0].contains("addresses"));
        for other in [
            id(&thief),
            id(&stranger),
            "broken".to_string(),
            "gone".to_string(),
        ] {
            assert_eq!(
                logs.lines_with(&format!("node {other} claims provider id"))
                    .len(),
                1,
                "{other}: {}",
                logs.text()
            );
        }
        // The IPAM looked up the honest worker's interfaces (moto gives
        // them no IPv6 prefix), never the impostor's.
        assert!(!logs
            .lines_with(&format!("node {}: no pod range", id(&worker)))
            .is_empty());
        assert!(logs
            .lines_with(&format!("node {}: no pod range", id(&impostor)))
            .is_empty());
    });
}
