//! The direct apply and the Terraform output describe the same resources:
//! for kops' own cases, every task of the graph `update cluster --yes`
//! would apply is rendered (or folded into a named resource), and every
//! resource in kubernetes.tf other than the state-store objects and data
//! sources comes from exactly one task of that graph.

use std::collections::{BTreeMap, BTreeSet};

use kops_api::manifest::Object;
use kops_api::{Cluster, InstanceGroup};
use kops_aws::render::resource::target_of;
use kops_aws::render::resource_of;
use kops_aws::render::Input;
use kops_model::Model;
use kops_render::terraform::Target;

fn load(yaml: &str) -> (Cluster, Vec<InstanceGroup>) {
    let mut cluster = None;
    let mut groups = Vec::new();
    for object in kops_api::parse_objects("in-v1alpha2.yaml", yaml).unwrap() {
        match object {
            Object::Cluster(c) => cluster = Some(*c),
            Object::InstanceGroup(g) => groups.push(*g),
            _ => {}
        }
    }
    (cluster.unwrap(), groups)
}

/// Task kinds that render into another task's resource, or into nothing
/// Terraform declares: the cleanup of hand-made rules, and role policies
/// to remove (a policy without a document; Terraform removes by omission).
const FOLDED: [&str; 6] = [
    "IAMInstanceProfileRole",
    "VPCAmazonIPv6CIDRBlock",
    "SecurityGroupCleanup",
    // Deletes the Classic ELB a cluster moved off: only the direct target has one.
    "ClassicLoadBalancerRetirement",
    "IAMRolePolicy",
    // One `aws_iam_role_policy_attachment` per policy, checked below.
    "IAMRolePolicyAttachment",
];

#[test]
fn terraform_resources_are_the_task_graph() {
    let Some(shared) = kops_testkit::shared_dir() else {
        return;
    };
    let root = shared.join("conformance/kops/update_cluster");
    let mut checked = 0;
    for case in [
        "minimal-aws",
        "privatecilium",
        "minimal-warmpool",
        "mixed_instances",
        "shared_subnet",
        "externalpolicies",
        "minimal-ipv6",
        "shared_vpc_ipv6",
        "aws-lb-controller",
        "digit",
        "karpenter",
    ] {
        let dir = root.join(case);
        let Ok(yaml) = std::fs::read_to_string(dir.join("in-v1alpha2.yaml")) else {
            continue;
        };
        let (cluster, groups) = load(&yaml);
        let key = std::fs::read_to_string(dir.join("id_rsa.pub")).ok();
        let config_base = cluster.spec.config_base.clone().unwrap_or_default();
        let model = Model {
            cluster: &cluster,
            groups: &groups,
            ssh_public_key: key.as_deref(),
            node_inputs: None,
            account_id: None,
            config_base: &config_base,
        };
        let graph = match kops_aws::model::build(&model) {
            Ok(g) => g,
            Err(e) if e.to_string().contains(" yet") => {
                eprintln!("{case}: not modelled yet: {e}");
                continue;
            }
            Err(e) => panic!("{case}: {e}"),
        };

        // Direct: the addresses the graph's tasks stand for.
        let mut from_tasks: BTreeMap<String, String> = BTreeMap::new();
        for (key, task) in graph.iter() {
            let resource = resource_of(task.as_any())
                .unwrap_or_else(|| panic!("{case}: no renderer for task {key}"));
            match target_of(resource) {
                Target::Resource { kind, name } => {
                    let address = format!("{kind}.{name}");
                    if let Some(other) = from_tasks.insert(address.clone(), key.to_string()) {
                        panic!("{case}: {address} stands for both {other} and {key}");
                    }
                }
                // An existing object, referred to or looked up, not managed.
                Target::Literal(_) | Target::Data { .. } | Target::Variable(_) => {}
                Target::None => assert!(
                    FOLDED.contains(&key.kind),
                    "{case}: task {key} renders to nothing"
                ),
            }
        }

        // Terraform: the resources in kubernetes.tf.
        let outcome = kops_aws::render::terraform(&Input {
            graph: &graph,
            cluster: cluster.name(),
            region: "us-test-1",
            config_base: &config_base,
            files: &[],
            private_zone: false,
        })
        .unwrap();
        assert!(
            outcome.unrendered.is_empty(),
            "{case}: {:?}",
            outcome.unrendered
        );
        let tf = String::from_utf8(outcome.rendered.files["kubernetes.tf"].clone()).unwrap();
        let rendered: BTreeSet<String> = tf
            .lines()
            .filter_map(|l| l.strip_prefix("resource \""))
            .map(|l| {
                l.trim_end_matches(" {")
                    .replace("\" \"", ".")
                    .trim_end_matches('"')
                    .to_string()
            })
            .collect();
        // A managed-policy set renders one attachment per policy, named
        // `<task>-<hash>`.
        let mut attachments = BTreeSet::new();
        for (_, task) in graph.iter() {
            if let Some(a) = task
                .as_any()
                .downcast_ref::<kops_aws::tasks::iam_role_policy_attachment::IamRolePolicyAttachment>()
            {
                for arn in &a.policy_arns {
                    let mut hash: u32 = 0x811c_9dc5;
                    for byte in arn.bytes() {
                        hash ^= u32::from(byte);
                        hash = hash.wrapping_mul(0x0100_0193);
                    }
                    attachments.insert(format!(
                        "aws_iam_role_policy_attachment.{}-{hash}",
                        kops_render::terraform::sanitize(&a.name)
                    ));
                }
            }
        }
        let tasks: BTreeSet<String> = from_tasks.keys().cloned().chain(attachments).collect();
        let only_tf: Vec<_> = rendered.difference(&tasks).collect();
        let only_direct: Vec<_> = tasks.difference(&rendered).collect();
        assert!(
            only_tf.is_empty() && only_direct.is_empty(),
            "{case}: in Terraform only: {only_tf:?}\nin the direct graph only: {only_direct:?}"
        );
        eprintln!(
            "{case}: {} tasks, {} Terraform resources, same set",
            graph.len(),
            rendered.len()
        );
        checked += 1;
    }
    assert!(checked >= 4, "only {checked} cases compared");
}
