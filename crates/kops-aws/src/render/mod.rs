//! Renders the task graph `update cluster` applies (`crate::model::build`)
//! as Terraform (`kubernetes.tf` + `data/`) or as a CloudFormation template
//! (`kubernetes.json`), instead of applying it.
//!
//! Design: the renderer walks the *same* graph the direct apply runs,
//! downcasts each task to its concrete type and renders it through
//! [`aws::AwsResource`], implemented per task type here. Dependencies
//! (`OutputRef`s and `TaskKey`s) become Terraform references
//! (`aws_vpc.<name>.id`) or CloudFormation `Ref`/`Fn::GetAtt`. Keeping the
//! rendering out of the task types keeps them about AWS calls, and
//! using one graph means direct apply and the rendered files describe the
//! same resources by construction (a test compares them). A task type with
//! no renderer is reported in [`Outcome::unrendered`], never dropped
//! silently. The HCL writer, the Terraform file set and the state-file
//! objects are kops-render's, shared with the other clouds.
//!
//! Rendering is offline: no cloud call. Where kops would ask the cloud (an
//! image given by name), the Terraform output declares a data source
//! (`data "aws_ami"`) and CloudFormation refuses with a hint.

pub mod aws;
mod aws_classic;
mod aws_extra;
mod aws_irsa;
pub mod cloudformation;
pub mod resource;

use std::collections::BTreeMap;

use kops_engine::{TaskGraph, TaskKey};
use kops_model::files::StateFile;
use kops_render::hcl::Expr;
use kops_render::terraform::{sanitize, Target, Terraform};
pub use kops_render::{
    gs_location, s3_location, state_file_objects, terraform_writes_files, Outcome, RenderError,
    Rendered,
};

use crate::render::cloudformation::CloudFormation;
use crate::render::resource::{target_of, AwsResource, Ctx};
use crate::tasks::autoscaling_group::AutoscalingGroup;
use crate::tasks::iam_role::IamRole;
use crate::tasks::route_table::RouteTable;
use crate::tasks::security_group::SecurityGroup;
use crate::tasks::shared_security_group::SharedSecurityGroup;
use crate::tasks::subnet::Subnet;
use crate::tasks::vpc::Vpc;
use crate::AwsContext;

/// The task as an [`AwsResource`], when kops-rs renders its type: every
/// renderer module is asked in turn.
pub fn resource_of(task: &dyn std::any::Any) -> Option<&dyn AwsResource> {
    aws::resource_of(task)
        .or_else(|| aws_extra::resource_of(task))
        .or_else(|| aws_irsa::resource_of(task))
}

/// What a render needs besides the graph.
pub struct Input<'a> {
    pub graph: &'a TaskGraph<AwsContext>,
    pub cluster: &'a str,
    pub region: &'a str,
    /// Where the cluster's state lives (`s3://bucket/prefix/<cluster>`,
    /// `memfs://...` in kops' tests).
    pub config_base: &'a str,
    /// The state-store files `update cluster` writes; rendered as
    /// `aws_s3_object` when the config base is in S3, as
    /// `google_storage_bucket_object` when it is in Cloud Storage.
    pub files: &'a [StateFile],
    /// Whether the cluster's DNS zone is private (for a zone looked up by name).
    pub private_zone: bool,
}

fn targets(graph: &TaskGraph<AwsContext>) -> (BTreeMap<TaskKey, Target>, Vec<TaskKey>) {
    let mut targets = BTreeMap::new();
    let mut unknown = Vec::new();
    for (key, task) in graph.iter() {
        match resource_of(task.as_any()) {
            Some(r) => {
                targets.insert(key.clone(), target_of(r));
            }
            None => unknown.push(key.clone()),
        }
    }
    (targets, unknown)
}

/// Renders the graph as Terraform.
pub fn terraform(input: &Input<'_>) -> Result<Outcome, RenderError> {
    let (targets, unrendered) = targets(input.graph);
    let mut tf = Terraform::new(input.region, targets);
    let ctx = Ctx {
        graph: input.graph,
        cluster: input.cluster,
        region: input.region,
        private_zone: input.private_zone,
    };
    for (_, task) in input.graph.iter() {
        if let Some(r) = resource_of(task.as_any()) {
            r.terraform(&mut tf, &ctx)?;
        }
    }
    state_file_objects(&mut tf, input.config_base, input.files);
    outputs(&mut tf, &ctx);
    Ok(Outcome {
        rendered: tf.finish(),
        unrendered,
    })
}

/// Renders the graph as a CloudFormation template.
pub fn cloudformation(input: &Input<'_>) -> Result<Outcome, RenderError> {
    let (_, unrendered) = targets(input.graph);
    let mut cf = CloudFormation::new(input.graph.iter().map(|(k, _)| k.clone()));
    for (key, task) in input.graph.iter() {
        if let Some(id) = resource_of(task.as_any()).and_then(|r| r.existing_id()) {
            cf.set_existing(key, id);
        }
    }
    let ctx = Ctx {
        graph: input.graph,
        cluster: input.cluster,
        region: input.region,
        private_zone: input.private_zone,
    };
    for (key, task) in input.graph.iter() {
        if let Some(r) = resource_of(task.as_any()) {
            cf.set_current(key);
            r.cloudformation(&mut cf, &ctx)?;
        }
    }
    Ok(Outcome {
        rendered: cf.finish()?,
        unrendered,
    })
}

/// The locals and outputs kops writes: the cluster's name and region, its
/// VPC, subnets, route tables, security groups, roles and groups, so other
/// Terraform can build on the cluster.
fn outputs(tf: &mut Terraform, ctx: &Ctx<'_>) {
    let cluster = ctx.cluster;
    tf.output("cluster_name", Expr::str(cluster));
    tf.output("region", Expr::str(ctx.region));
    let refer = |tf: &Terraform, kind: &'static str, name: &str, attr: &str| {
        tf.reference(&TaskKey::new(kind, name), attr).ok()
    };
    let mut lists: BTreeMap<&str, Vec<Expr>> = BTreeMap::new();
    let mut shared_lists: BTreeMap<&str, Vec<Expr>> = BTreeMap::new();
    for (key, task) in ctx.graph.iter() {
        let any = task.as_any();
        if any.downcast_ref::<AutoscalingGroup>().is_some() {
            let list = if key.name.contains(".masters.") {
                "master_autoscaling_group_ids"
            } else if key.name.contains(".apiservers.") {
                "apiserver_autoscaling_group_ids"
            } else if key.name.starts_with("bastion") {
                "bastion_autoscaling_group_ids"
            } else {
                "node_autoscaling_group_ids"
            };
            if let Ok(e) = tf.reference(key, "id") {
                lists.entry(list).or_default().push(e);
            }
        } else if let Some(sg) = any.downcast_ref::<SecurityGroup>() {
            let list = if sg.name == format!("masters.{cluster}") {
                Some("master_security_group_ids")
            } else if sg.name == format!("nodes.{cluster}") {
                Some("node_security_group_ids")
            } else if sg.name == format!("bastion.{cluster}") {
                Some("bastion_security_group_ids")
            } else {
                None
            };
            if let (Some(list), Ok(e)) = (list, tf.reference(key, "id")) {
                lists.entry(list).or_default().push(e);
            }
        } else if let Some(sg) = any.downcast_ref::<SharedSecurityGroup>() {
            // Existing groups (`securityGroupOverride`) come first, as
            // their quoted ids sort before resource addresses in kops.
            let list = if sg.name.ends_with("-ControlPlane") {
                Some("master_security_group_ids")
            } else if sg.name.ends_with("-Node") {
                Some("node_security_group_ids")
            } else if sg.name.ends_with("-Bastion") {
                Some("bastion_security_group_ids")
            } else {
                None
            };
            if let Some(list) = list {
                shared_lists
                    .entry(list)
                    .or_default()
                    .push(Expr::str(&sg.id));
            }
        } else if let Some(role) = any.downcast_ref::<IamRole>() {
            for prefix in ["masters", "nodes", "bastions"] {
                if role.name == format!("{prefix}.{cluster}") {
                    if let Some(e) = refer(tf, IamRole::KIND, &role.name, "arn") {
                        tf.output(&format!("{prefix}_role_arn"), e);
                    }
                    if let Some(e) = refer(tf, IamRole::KIND, &role.name, "name") {
                        tf.output(&format!("{prefix}_role_name"), e);
                    }
                }
            }
        } else if let Some(table) = any.downcast_ref::<RouteTable>() {
            let local = if table.name == cluster {
                "route_table_public_id".to_string()
            } else {
                let zone = table
                    .name
                    .strip_suffix(&format!(".{cluster}"))
                    .unwrap_or(&table.name);
                format!("route_table_{zone}_id")
            };
            if let Ok(e) = tf.reference(key, "id") {
                tf.output(&local, e);
            }
        } else if let Some(subnet) = any.downcast_ref::<Subnet>() {
            let short = subnet
                .name
                .strip_suffix(&format!(".{cluster}"))
                .unwrap_or(&subnet.name);
            if let Ok(e) = tf.reference(key, "id") {
                tf.output(&format!("subnet_{short}_id"), e.clone());
                let role = subnet.tags.get("SubnetType").map(String::as_str);
                if role != Some("Utility") {
                    lists.entry("node_subnet_ids").or_default().push(e);
                }
            }
        } else if let Some(vpc) = any.downcast_ref::<Vpc>() {
            if let Some(id) = &vpc.shared_id {
                tf.output("vpc_id", Expr::str(id));
            } else if let Ok(e) = tf.reference(key, "id") {
                tf.output("vpc_id", e);
                let name = sanitize(&vpc.name);
                tf.output(
                    "vpc_cidr_block",
                    Expr::raw(format!("aws_vpc.{name}.cidr_block")),
                );
                tf.output(
                    "vpc_ipv6_cidr_block",
                    Expr::raw(format!("aws_vpc.{name}.ipv6_cidr_block")),
                );
                tf.output(
                    "vpc_ipv6_cidr_length",
                    Expr::raw(
                        "local.vpc_ipv6_cidr_block == \"\" ? null : tonumber(regex(\".*/(\\\\d+)\", local.vpc_ipv6_cidr_block)[0])",
                    ),
                );
            }
        }
    }
    for (name, mut shared) in shared_lists {
        let own = lists.entry(name).or_default();
        shared.append(own);
        *own = shared;
    }
    for (name, mut items) in lists {
        items.dedup();
        tf.output(name, Expr::List(items));
    }
}

#[cfg(test)]
mod state_file_tests {
    use super::*;

    fn render(config_base: &str) -> Rendered {
        let graph = TaskGraph::<AwsContext>::new();
        let files = [StateFile::new(
            "cluster-completed.spec",
            "cluster-completed.spec",
            b"spec".to_vec(),
        )];
        let input = Input {
            graph: &graph,
            cluster: "c.example.com",
            region: "us-test-1",
            config_base,
            files: &files,
            private_zone: false,
        };
        terraform(&input).unwrap().rendered
    }

    /// A gs:// config base: kops' `google_storage_bucket_object` with its
    /// content as a `source` path, the `google.files` provider alias and
    /// the google provider required.
    #[test]
    fn gs_config_base_renders_bucket_objects() {
        let rendered = render("gs://state-bucket/kops/c.example.com");
        let tf = String::from_utf8(rendered.files["kubernetes.tf"].clone()).unwrap();
        let object = r#"resource "google_storage_bucket_object" "cluster-completed-spec" {
  bucket   = "state-bucket"
  name     = "kops/c.example.com/cluster-completed.spec"
  provider = google.files
  source   = "${path.module}/data/google_storage_bucket_object_cluster-completed.spec_content"
}"#;
        assert!(tf.contains(object), "{tf}");
        assert!(
            tf.contains("provider \"google\" {\n  alias = \"files\"\n}"),
            "{tf}"
        );
        assert!(
            tf.contains("\"configuration_aliases\" = [google.files]"),
            "{tf}"
        );
        assert!(tf.contains("\"hashicorp/google\""), "{tf}");
        assert!(!tf.contains("aws_s3_object"), "{tf}");
        assert_eq!(
            rendered.files["data/google_storage_bucket_object_cluster-completed.spec_content"],
            b"spec"
        );
        assert!(terraform_writes_files("gs://b"));
        assert!(terraform_writes_files("s3://b/x"));
        assert!(!terraform_writes_files("file:///x"));
    }

    #[test]
    fn s3_config_base_keeps_aws_objects() {
        let rendered = render("s3://state-bucket/c.example.com");
        let tf = String::from_utf8(rendered.files["kubernetes.tf"].clone()).unwrap();
        assert!(tf.contains("resource \"aws_s3_object\""), "{tf}");
        assert!(!tf.contains("google"), "{tf}");
    }
}
