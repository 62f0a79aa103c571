//! The Terraform of a GCE cluster declares exactly the task graph's
//! tasks: one `google_*` resource per task with the task's name (the
//! router also gives its NAT), none without a task, for every GCE case of
//! kops' update suite in ../shared (skipped with a reason when absent).

use std::collections::BTreeSet;

use kops_api::{parse_objects, Cluster, InstanceGroup, Object};
use kops_gce::{build, terraform, GceModel, Input};
use kops_model::Model;

fn load(text: &str) -> (Cluster, Vec<InstanceGroup>) {
    let mut cluster = None;
    let mut groups = Vec::new();
    for object in parse_objects("in-v1alpha2.yaml", text).expect("manifest") {
        match object {
            Object::Cluster(c) => cluster = Some(*c),
            Object::InstanceGroup(g) => groups.push(*g),
            _ => {}
        }
    }
    (cluster.expect("a Cluster"), groups)
}

/// `(type, name)` of every `resource` block of a kubernetes.tf.
fn resources(tf: &str) -> BTreeSet<(String, String)> {
    tf.lines()
        .filter_map(|l| l.strip_prefix("resource \""))
        .filter_map(|l| {
            let (kind, rest) = l.split_once("\" \"")?;
            let name = rest.strip_suffix("\" {")?;
            Some((kind.to_string(), name.to_string()))
        })
        .collect()
}

#[test]
fn terraform_resources_are_the_graph_tasks() {
    let Some(shared) = kops_testkit::shared_dir() else {
        return;
    };
    let root = shared.join("conformance/kops/update_cluster");
    let mut checked = 0;
    for entry in std::fs::read_dir(&root).expect("update_cluster cases") {
        let case = entry.expect("entry").path();
        let golden = std::fs::read_to_string(case.join("kubernetes.tf")).unwrap_or_default();
        if !golden.contains("resource \"google_") {
            continue;
        }
        let text = std::fs::read_to_string(case.join("in-v1alpha2.yaml")).expect("manifest");
        let (cluster, groups) = load(&text);
        let cluster = kops_api::populate::with_gce_network_ranges(
            &kops_api::populate::with_api_access(&cluster, Some(&groups)),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", case.display()));
        let config_base = cluster.spec.config_base.clone().unwrap_or_default();
        let model = Model {
            cluster: &cluster,
            groups: &groups,
            ssh_public_key: Some("ssh-rsa AAAA test"),
            config_base: &config_base,
            account_id: None,
            node_inputs: None,
        };
        let project = cluster.spec.project.clone().unwrap_or_default();
        let region = cluster.spec.subnets.as_ref().unwrap()[0]
            .region
            .clone()
            .unwrap_or_default();
        let gce = GceModel {
            model: &model,
            project: &project,
            region: &region,
        };
        let graph = build(&gce).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
        let outcome = terraform(&Input {
            graph: &graph,
            cluster: cluster.name(),
            project: &project,
            region: &region,
            config_base: &config_base,
            files: &[],
            files_region: "us-test-1",
        })
        .expect("render");
        assert!(outcome.unrendered.is_empty(), "{:?}", outcome.unrendered);
        let tf = String::from_utf8(outcome.rendered.files["kubernetes.tf"].clone()).unwrap();
        let rendered = resources(&tf);

        // Each task: its resource, named after the task (shared objects
        // render none).
        let mut expected = BTreeSet::new();
        for (key, _) in graph.iter() {
            let kind = match key.kind {
                "Network" => "google_compute_network",
                "Subnet" => "google_compute_subnetwork",
                "Router" => "google_compute_router",
                "FirewallRule" => "google_compute_firewall",
                "Disk" => "google_compute_disk",
                "InstanceTemplate" => "google_compute_instance_template",
                "InstanceGroupManager" => "google_compute_instance_group_manager",
                "Address" => "google_compute_address",
                "ForwardingRule" => "google_compute_forwarding_rule",
                "HttpHealthCheck" => "google_compute_http_health_check",
                "HealthCheck" => "google_compute_region_health_check",
                "BackendService" => "google_compute_region_backend_service",
                "TargetPool" => "google_compute_target_pool",
                "ServiceAccount" => "google_service_account",
                "ProjectIAMBinding" => "google_project_iam_binding",
                "StorageBucketIAM" => "google_storage_bucket_iam_member",
                other => panic!("task kind {other} has no resource type here"),
            };
            if key.kind == "ServiceAccount" && key.name == "shared" {
                continue;
            }
            expected.insert((kind.to_string(), key.name.clone()));
            if key.kind == "Router" {
                expected.insert(("google_compute_router_nat".to_string(), key.name.clone()));
            }
        }
        assert_eq!(rendered, expected, "{}", case.display());
        // And the same resources as kops' golden file.
        let golden: BTreeSet<_> = resources(&golden)
            .into_iter()
            .filter(|(kind, _)| kind.starts_with("google_"))
            .collect();
        assert_eq!(rendered, golden, "{}", case.display());
        checked += 1;
    }
    assert!(checked >= 11, "only {checked} GCE cases");
}
