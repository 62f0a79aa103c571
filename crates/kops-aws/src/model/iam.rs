//! IAM roles, their inline policies and instance profiles, one set per
//! instance role in use (`masters.<cluster>`, `apiservers.<cluster>`,
//! `nodes.<cluster>`, `bastions.<cluster>`).
//!
//! Policies follow kops' least-privilege builder: mutating EC2 and ELB
//! actions only on resources tagged for this cluster (or, for creates, only
//! when the request tags them so), KMS only through EC2 and S3, and S3 only
//! on the cluster's own state-store path (read) and its etcd backup paths
//! (write), plus bucket-level listing of those buckets. Nodes and bastions
//! get no inline policy unless the networking or registry options need one;
//! an empty policy means "must not exist", so a stale one is removed.
//!
//! Managed policies from `spec.externalPolicies` are attached to the
//! instance roles, and service accounts get their own roles (IRSA): see
//! [`irsa`].
//!
//! An instance group with its own `spec.iam.profile` (an existing instance
//! profile's ARN) gets no role, policy or profile: its launch template
//! names that profile, which is only looked up ([`shared_profile`]); a role
//! whose groups all name one gets none of its own either.
//!
//! Not handled yet: the Route 53 statements when `spec.dnsZone` is a name rather than a zone id
//! (the zone's id comes from the DNS task of the compute half).

pub mod irsa;
pub mod shared_profile;

use std::collections::BTreeSet;

use crate::tasks::iam_instance_profile::{IamInstanceProfile, IamInstanceProfileRole};
use crate::tasks::iam_role::IamRole;
use crate::tasks::iam_role_policy::IamRolePolicy;
use crate::tasks::policy_document::PolicyDocument;
use crate::AwsContext;
use kops_api::{InstanceGroup, Role};
use kops_engine::TaskGraph;
use serde_json::{json, Value};

pub use kops_model::iam::*;
use kops_model::{Model, ModelError};

const POLICY_VERSION: &str = "2012-10-17";
/// Where the policies are evaluated: the partition and region (for ARNs and
/// `kms:ViaService`) and the hosted zone dns-controller may change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyEnvironment {
    pub partition: String,
    pub region: String,
    /// The Route 53 hosted zone id (`Z...`); without it no Route 53 statements.
    pub hosted_zone_id: Option<String>,
}

impl PolicyEnvironment {
    /// The environment of the model's cluster: the region of its zones, the
    /// partition of that region, and `spec.dnsZone` when it is a zone id.
    pub fn of(model: &Model<'_>) -> Self {
        let region = region(model).unwrap_or_default();
        PolicyEnvironment {
            partition: partition(&region).to_string(),
            hosted_zone_id: hosted_zone_id(model),
            region,
        }
    }
}

/// Who may assume the instance roles: EC2.
pub fn assume_role_policy(partition: &str) -> PolicyDocument {
    let service = if partition == "aws-cn" {
        "ec2.amazonaws.com.cn"
    } else {
        "ec2.amazonaws.com"
    };
    PolicyDocument::new(json!({
        "Version": POLICY_VERSION,
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": service},
            "Action": "sts:AssumeRole"
        }]
    }))
}

/// The existing profiles groups name, each once, with the groups naming
/// it. kops refuses one profile for groups of different roles (their
/// instances would need different permissions).
fn shared_profiles(
    model: &Model<'_>,
) -> Result<Vec<shared_profile::SharedInstanceProfile>, ModelError> {
    let mut found: Vec<(shared_profile::SharedInstanceProfile, Role)> = Vec::new();
    for (index, group) in model.groups.iter().enumerate() {
        let (Some(arn), Some(role)) = (custom_profile_arn(group), group.role()) else {
            continue;
        };
        let name = instance_profile_name(model, index, group, role)?;
        match found.iter_mut().find(|(p, _)| p.name == name) {
            Some((_, other)) if *other != role => {
                return Err(ModelError::Spec {
                    path: format!("instanceGroups[{index}].spec.iam.profile"),
                    message: format!(
                        "instance profile `{arn}` is named by groups of two roles ({other:?} and {role:?})"
                    ),
                    hint: "give each role's groups their own instance profile".into(),
                })
            }
            Some((p, _)) => p.groups.push(group.name().to_string()),
            None => found.push((
                shared_profile::SharedInstanceProfile {
                    name,
                    arn: arn.to_string(),
                    groups: vec![group.name().to_string()],
                },
                role,
            )),
        }
    }
    Ok(found.into_iter().map(|(p, _)| p).collect())
}

/// Adds the IAM tasks.
pub fn build(model: &Model<'_>, graph: &mut TaskGraph<AwsContext>) -> Result<(), ModelError> {
    let env = PolicyEnvironment::of(model);
    for role in roles_in_use(model) {
        let name = iam_name(model, role);
        let tags = model.tags(&name, &[]);
        graph.add(IamRole {
            name: name.clone(),
            assume_role_policy: assume_role_policy(&env.partition),
            permissions_boundary: model
                .cluster
                .spec
                .iam
                .as_ref()
                .and_then(|i| i.permissions_boundary.clone()),
            tags: tags.clone(),
        })?;
        let policy = role_policy(model, role, &env)?.map(PolicyDocument::new);
        graph.add(IamRolePolicy::new(name.clone(), &name, policy))?;
        graph.add(IamRolePolicy::new(
            format!("additional.{name}"),
            &name,
            additional_policy(model, role)?,
        ))?;
        graph.add(IamInstanceProfile {
            name: name.clone(),
            tags,
        })?;
        graph.add(IamInstanceProfileRole::new(&name, &name))?;
        graph.add(irsa::instance_role_attachments(model, role))?;
    }
    let managed: Vec<String> = roles_in_use(model)
        .into_iter()
        .map(|r| iam_name(model, r))
        .collect();
    for profile in shared_profiles(model)? {
        // A group may name the profile kops-rs makes for its role anyway.
        if !managed.contains(&profile.name) {
            graph.add(profile)?;
        }
    }
    irsa::build(model, graph, &env)?;
    Ok(())
}

/// `spec.additionalPolicies.<role>`: a JSON list of statements, as a document.
fn additional_policy(model: &Model<'_>, role: Role) -> Result<Option<PolicyDocument>, ModelError> {
    let Some(policies) = &model.cluster.spec.additional_policies else {
        return Ok(None);
    };
    let Some((key, text)) = role_names(role)
        .1
        .iter()
        .find_map(|k| policies.get(*k).map(|t| (*k, t)))
    else {
        return Ok(None);
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    let statements: Value = serde_json::from_str(text).map_err(|e| ModelError::Spec {
        path: format!("spec.additionalPolicies.{key}"),
        message: format!("not a JSON list of IAM statements: {e}"),
        hint: r#"write a JSON list such as `[{"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["*"]}]`"#
            .into(),
    })?;
    let statements = match statements {
        Value::Array(items) if !items.is_empty() => items,
        Value::Array(_) => return Ok(None),
        single @ Value::Object(_) => vec![single],
        _ => {
            return Err(ModelError::Spec {
                path: format!("spec.additionalPolicies.{key}"),
                message: "not a JSON list of IAM statements".into(),
                hint: "write a JSON list of statement objects".into(),
            })
        }
    };
    Ok(Some(PolicyDocument::new(json!({
        "Version": POLICY_VERSION,
        "Statement": statements
    }))))
}

/// The inline policy of a role; `None` when the role needs no permissions.
pub fn role_policy(
    model: &Model<'_>,
    role: Role,
    env: &PolicyEnvironment,
) -> Result<Option<Value>, ModelError> {
    let mut p = PolicyBuilder::new(model.name(), env);
    let facts = Facts::of(model);
    match role {
        Role::ControlPlane => {
            p.etcd_manager();
            // kops-controller verifies and labels nodes.
            p.unconditional(&["ec2:DescribeInstances"]);
            p.nodeup(&facts, facts.gpu(model, Role::ControlPlane), false);
            if facts.ipv6_only {
                p.unconditional(&["ec2:DescribeNetworkInterfaces"]);
            }
            p.s3(model, role)?;
            p.kms(facts.encryption_config);
            if !facts.service_account_permissions {
                if let Some(zone) = &env.hosted_zone_id {
                    p.dns_controller(zone);
                }
                p.ebs_csi_driver(facts.snapshot_controller);
                p.cloud_controller_manager(facts.kubenet, facts.nlb_security_groups_managed);
                if facts.load_balancer_controller {
                    p.load_balancer_controller();
                }
                p.cluster_autoscaler(facts.autoscaler_static_instance_list);
                if facts.termination_handler_queue {
                    p.termination_handler_queue();
                }
            }
            p.networking_and_registry(&facts, role);
        }
        Role::ApiServer => {
            p.nodeup(
                &facts,
                facts.gpu(model, Role::ApiServer),
                facts.lifecycle_hooks(model, role),
            );
            p.s3(model, role)?;
            p.kms(facts.encryption_config);
            p.networking_and_registry(&facts, role);
        }
        Role::Node => {
            p.nodeup(
                &facts,
                facts.gpu(model, Role::Node),
                facts.lifecycle_hooks(model, role),
            );
            p.nodeup_download(model);
            p.networking_and_registry(&facts, role);
        }
        Role::Bastion => {}
    }
    Ok(p.finish())
}

/// The spec switches the policies depend on.
struct Facts {
    ipv6_only: bool,
    amazon_vpc: bool,
    cilium_eni: bool,
    calico_src_dst: bool,
    kube_router: bool,
    kindnet: bool,
    kubenet: bool,
    ecr: bool,
    ecr_pull_through: bool,
    cluster_gpu: bool,
    encryption_config: bool,
    service_account_permissions: bool,
    snapshot_controller: bool,
    load_balancer_controller: bool,
    nlb_security_groups_managed: bool,
    autoscaler_static_instance_list: bool,
    termination_handler_queue: bool,
}

impl Facts {
    fn of(model: &Model<'_>) -> Self {
        let spec = &model.cluster.spec;
        let networking = spec.networking.as_ref();
        let ipv6_only = spec
            .non_masquerade_cidr
            .as_deref()
            .is_some_and(|c| c.contains(':'));
        let calico_src_dst = networking.and_then(|n| n.calico.as_ref()).is_some_and(|c| {
            c.extra.get("awsSrcDstCheck").and_then(Value::as_str) != Some("DoNothing")
        }) && !ipv6_only;
        let enabled = |e: Option<bool>| e == Some(true);
        Facts {
            ipv6_only,
            amazon_vpc: networking.is_some_and(|n| n.amazonvpc.is_some()),
            cilium_eni: networking
                .and_then(|n| n.cilium.as_ref())
                .is_some_and(|c| c.ipam.as_deref() == Some("eni")),
            calico_src_dst,
            kube_router: networking.is_some_and(|n| n.kuberouter.is_some()),
            kindnet: networking.is_some_and(|n| n.kindnet.is_some()),
            kubenet: networking.is_some_and(|n| n.kubenet.is_some()),
            ecr: spec
                .iam
                .as_ref()
                .is_some_and(|i| enabled(i.allow_container_registry)),
            ecr_pull_through: spec
                .containerd
                .as_ref()
                .is_some_and(|c| enabled(c.use_ecr_credentials_for_mirrors)),
            cluster_gpu: spec.containerd.as_ref().is_some_and(gpu_enabled),
            encryption_config: spec
                .extra
                .get("encryptionConfig")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            service_account_permissions: spec
                .iam
                .as_ref()
                .is_some_and(|i| enabled(i.use_service_account_external_permissions)),
            snapshot_controller: spec
                .snapshot_controller
                .as_ref()
                .is_some_and(|s| enabled(s.enabled)),
            load_balancer_controller: spec
                .aws_load_balancer_controller
                .as_ref()
                .is_some_and(|s| enabled(s.enabled)),
            nlb_security_groups_managed: spec
                .cloud_config
                .as_ref()
                .and_then(|c| c.extra.get("nlbSecurityGroupMode"))
                .and_then(Value::as_str)
                == Some("Managed"),
            autoscaler_static_instance_list: spec
                .cluster_autoscaler
                .as_ref()
                .and_then(|c| c.extra.get("awsUseStaticInstanceList"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            termination_handler_queue: kops_model::nth_queue_mode(model.cluster),
        }
    }

    /// Whether instances of `role` run NVIDIA GPUs (cluster-wide or in one of its groups).
    fn gpu(&self, model: &Model<'_>, role: Role) -> bool {
        self.cluster_gpu
            || model
                .groups_with(role)
                .any(|g| g.spec.containerd.as_ref().is_some_and(gpu_enabled))
    }

    /// Whether a group of `role` has a warm pool with a lifecycle hook.
    fn lifecycle_hooks(&self, model: &Model<'_>, role: Role) -> bool {
        let cluster = model.cluster.spec.warm_pool.as_ref();
        model.groups_with(role).any(|g| warm_pool_hook(cluster, g))
    }
}

fn gpu_enabled(containerd: &kops_api::components::ContainerdConfig) -> bool {
    containerd
        .nvidia_gpu
        .as_ref()
        .and_then(|n| n.get("enabled"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// A warm pool (the group's, else the cluster's) that is on (its maximum
/// is not 0) and has the lifecycle hook.
fn warm_pool_hook(
    cluster: Option<&kops_api::cluster::WarmPoolSpec>,
    group: &InstanceGroup,
) -> bool {
    let Some(pool) = group.spec.warm_pool.as_ref().or(cluster) else {
        return false;
    };
    let max = pool.max_size.or_else(|| cluster.and_then(|c| c.max_size));
    let hook = pool
        .enable_lifecycle_hook
        .or_else(|| cluster.and_then(|c| c.enable_lifecycle_hook))
        .unwrap_or(false);
    max != Some(0) && hook
}

/// Collects statements and action sets, then renders them in kops' order:
/// explicit statements, the KMS statements, unconditional actions, actions
/// on cluster-tagged resources, creates that must tag for the cluster.
struct PolicyBuilder<'e> {
    cluster: String,
    env: &'e PolicyEnvironment,
    statements: Vec<Value>,
    unconditional: BTreeSet<String>,
    cluster_tagged: BTreeSet<String>,
    cluster_tagged_create: BTreeSet<String>,
    kms_grant: bool,
    kms_via_service: bool,
}

const KMS_DATA_ACTIONS: [&str; 5] = [
    "kms:Decrypt",
    "kms:DescribeKey",
    "kms:Encrypt",
    "kms:GenerateDataKey*",
    "kms:ReEncrypt*",
];

impl<'e> PolicyBuilder<'e> {
    fn new(cluster: &str, env: &'e PolicyEnvironment) -> Self {
        PolicyBuilder {
            cluster: cluster.to_string(),
            env,
            statements: Vec::new(),
            unconditional: BTreeSet::new(),
            cluster_tagged: BTreeSet::new(),
            cluster_tagged_create: BTreeSet::new(),
            kms_grant: false,
            kms_via_service: false,
        }
    }

    fn arn(&self, service: &str, rest: &str) -> String {
        format!("arn:{}:{service}:{rest}", self.env.partition)
    }

    fn unconditional(&mut self, actions: &[&str]) {
        self.unconditional
            .extend(actions.iter().map(|a| a.to_string()));
    }

    fn cluster_tagged(&mut self, actions: &[&str]) {
        self.cluster_tagged
            .extend(actions.iter().map(|a| a.to_string()));
    }

    fn cluster_tagged_create(&mut self, actions: &[&str]) {
        self.cluster_tagged_create
            .extend(actions.iter().map(|a| a.to_string()));
    }

    /// EC2 creates allowed only when tagged for the cluster, and tagging of
    /// those resources limited to the create itself or to resources already
    /// the cluster's (without moving them to another cluster).
    fn ec2_create(&mut self, actions: &[&str], resource_types: &[&str]) {
        let mut resources: Vec<String> = resource_types
            .iter()
            .map(|t| self.arn("ec2", &format!("*:*:{t}/*")))
            .collect();
        resources.sort();
        self.cluster_tagged_create
            .extend(actions.iter().map(|a| format!("ec2:{a}")));
        self.statements.push(json!({
            "Action": "ec2:CreateTags",
            "Condition": {"StringEquals": {
                "aws:RequestTag/KubernetesCluster": self.cluster,
                "ec2:CreateAction": actions,
            }},
            "Effect": "Allow",
            "Resource": resources,
        }));
        self.statements.push(json!({
            "Action": ["ec2:CreateTags", "ec2:DeleteTags"],
            "Condition": {
                "Null": {"aws:RequestTag/KubernetesCluster": "true"},
                "StringEquals": {"aws:ResourceTag/KubernetesCluster": self.cluster},
            },
            "Effect": "Allow",
            "Resource": resources,
        }));
    }

    /// etcd-manager finds its volumes and attaches only the cluster's
    /// control-plane volumes.
    fn etcd_manager(&mut self) {
        self.unconditional(&["ec2:DescribeInstances", "ec2:DescribeVolumes"]);
        self.statements.push(json!({
            "Action": "ec2:AttachVolume",
            "Condition": {"StringEquals": {
                "aws:ResourceTag/KubernetesCluster": self.cluster,
                "aws:ResourceTag/k8s.io/role/master": "1",
            }},
            "Effect": "Allow",
            "Resource": ["*"],
        }));
    }

    /// What nodeup needs on the instance itself.
    fn nodeup(&mut self, facts: &Facts, gpu: bool, lifecycle_hooks: bool) {
        if lifecycle_hooks {
            self.cluster_tagged(&["autoscaling:CompleteLifecycleAction"]);
            self.unconditional(&["autoscaling:DescribeLifecycleHooks"]);
        }
        if gpu || facts.amazon_vpc || facts.cilium_eni {
            self.unconditional(&["ec2:DescribeInstanceTypes"]);
        }
        if facts.ipv6_only {
            self.unconditional(&["ec2:AssignIpv6Addresses"]);
        }
    }

    /// Read access to the nodeup binaries `update` uploaded to the state
    /// store, and to nothing else there: workers download nodeup before
    /// anything else and may not read the rest of the state store (it holds
    /// the CA keys). Only when the binaries live in the state store.
    fn nodeup_download(&mut self, model: &Model<'_>) {
        let Some(prefix) = model
            .node_inputs
            .and_then(|i| i.nodeup.as_ref())
            .and_then(|n| n.state_store_prefix.as_deref())
        else {
            return;
        };
        let Some((_, path)) = s3_path(prefix, "placeholder-read-bucket") else {
            return;
        };
        self.statements.push(json!({
            "Action": ["s3:GetObject"],
            "Effect": "Allow",
            "Resource": self.arn("s3", &format!("::{path}/*")),
        }));
    }

    /// Read access to the cluster's state store (never the whole bucket's
    /// objects) and write access to its etcd backups.
    fn s3(&mut self, model: &Model<'_>, role: Role) -> Result<(), ModelError> {
        let spec = &model.cluster.spec;
        let mut locations: Vec<String> = [
            spec.key_store.as_deref(),
            spec.secret_store.as_deref(),
            Some(model.config_base),
        ]
        .into_iter()
        .flatten()
        .filter(|l| !l.is_empty())
        .map(|l| {
            if l.ends_with('/') {
                l.to_string()
            } else {
                format!("{l}/")
            }
        })
        .collect();
        locations.sort();
        locations.dedup();
        // A location inside another is covered by it.
        let roots: Vec<String> = locations
            .iter()
            .filter(|l| {
                !locations
                    .iter()
                    .any(|o| o != *l && l.starts_with(o.as_str()))
            })
            .cloned()
            .collect();

        let mut buckets = BTreeSet::new();
        for root in roots {
            let (bucket, path) =
                s3_path(&root, "placeholder-read-bucket").ok_or_else(|| ModelError::Spec {
                    path: "spec.configBase".into(),
                    message: format!("`{root}` is not a location instances can read (s3://...)"),
                    hint: "keep the state store in S3 (--state s3://bucket) for clusters on AWS"
                        .into(),
                })?;
            buckets.insert(bucket);
            if matches!(role, Role::ControlPlane | Role::ApiServer) {
                self.statements.push(json!({
                    "Action": ["s3:Get*"],
                    "Effect": "Allow",
                    "Resource": self.arn("s3", &format!("::{path}/*")),
                }));
            }
        }

        if role == Role::ControlPlane {
            let mut written = BTreeSet::new();
            for store in etcd_backup_stores(model) {
                if !written.insert(store.clone()) {
                    continue;
                }
                let (bucket, path) =
                    s3_path(&store, "placeholder-write-bucket").ok_or_else(|| {
                        ModelError::Spec {
                            path: "spec.etcdClusters[].backups.backupStore".into(),
                            message: format!(
                                "`{store}` is not a location instances can write (s3://...)"
                            ),
                            hint: "keep etcd backups in S3".into(),
                        }
                    })?;
                buckets.insert(bucket);
                self.statements.push(json!({
                    "Action": ["s3:DeleteObject", "s3:DeleteObjectVersion", "s3:GetObject", "s3:PutObject"],
                    "Effect": "Allow",
                    "Resource": self.arn("s3", &format!("::{path}/*")),
                }));
            }
        }

        for bucket in buckets {
            self.statements.push(json!({
                "Action": [
                    "s3:GetBucketLocation",
                    "s3:GetEncryptionConfiguration",
                    "s3:ListBucket",
                    "s3:ListBucketVersions",
                ],
                "Effect": "Allow",
                "Resource": [self.arn("s3", &format!("::{bucket}"))],
            }));
        }
        Ok(())
    }

    /// KMS for encrypted volumes and an SSE-KMS state store: grants only
    /// for AWS services, data actions only through EC2 and S3 (unless the
    /// API server's own KMS plugin calls KMS directly).
    fn kms(&mut self, direct: bool) {
        self.kms_grant = true;
        if direct || self.env.region.is_empty() {
            self.unconditional(&KMS_DATA_ACTIONS);
        } else {
            self.kms_via_service = true;
        }
    }

    fn dns_controller(&mut self, zone: &str) {
        self.statements.push(json!({
            "Action": [
                "route53:ChangeResourceRecordSets",
                "route53:GetHostedZone",
                "route53:ListResourceRecordSets",
            ],
            "Effect": "Allow",
            "Resource": [self.arn("route53", &format!("::hostedzone/{zone}"))],
        }));
        self.statements.push(json!({
            "Action": ["route53:GetChange"],
            "Effect": "Allow",
            "Resource": [self.arn("route53", "::change/*")],
        }));
        self.statements.push(json!({
            "Action": ["route53:ListHostedZones", "route53:ListTagsForResource"],
            "Effect": "Allow",
            "Resource": ["*"],
        }));
    }

    fn ebs_csi_driver(&mut self, snapshots: bool) {
        self.kms(false);
        if snapshots {
            self.unconditional(&[
                "ec2:CreateSnapshot",
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeSnapshots",
            ]);
            self.cluster_tagged(&["ec2:DeleteSnapshot", "ec2:EnableFastSnapshotRestores"]);
            self.ec2_create(&["CreateSnapshot"], &["volume", "snapshot"]);
            let resource = self.arn("ec2", "*:*:snapshot/*");
            self.statements.push(json!({
                "Action": "ec2:CreateVolume",
                "Condition": {"StringEquals": {"aws:ResourceTag/KubernetesCluster": self.cluster}},
                "Effect": "Allow",
                "Resource": [resource],
            }));
        }
        self.unconditional(&[
            "ec2:DescribeAvailabilityZones",
            "ec2:DescribeInstances",
            "ec2:DescribeInstanceTypes",
            "ec2:DescribeTags",
            "ec2:DescribeVolumes",
            "ec2:DescribeVolumesModifications",
            "ec2:DescribeVolumeStatus",
        ]);
        self.cluster_tagged(&[
            "ec2:AttachVolume",
            "ec2:DeleteVolume",
            "ec2:DetachVolume",
            "ec2:ModifyVolume",
        ]);
        self.ec2_create(&["CopyVolumes", "CreateVolume"], &["volume", "snapshot"]);
    }

    fn cloud_controller_manager(&mut self, cloud_routes: bool, nlb_security_groups: bool) {
        self.unconditional(&[
            "autoscaling:DescribeAutoScalingGroups",
            "autoscaling:DescribeTags",
            "ec2:DescribeAvailabilityZones",
            "ec2:DescribeInstances",
            "ec2:DescribeInstanceTopology",
            "ec2:DescribeRegions",
            "ec2:DescribeRouteTables",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeSubnets",
            "ec2:DescribeVpcs",
            "elasticloadbalancing:DescribeListeners",
            "elasticloadbalancing:DescribeLoadBalancerAttributes",
            "elasticloadbalancing:DescribeLoadBalancerPolicies",
            "elasticloadbalancing:DescribeLoadBalancers",
            "elasticloadbalancing:DescribeTargetGroupAttributes",
            "elasticloadbalancing:DescribeTargetGroups",
            "elasticloadbalancing:DescribeTargetHealth",
            "iam:CreateServiceLinkedRole",
            "kms:DescribeKey",
        ]);
        self.cluster_tagged(&[
            "ec2:AuthorizeSecurityGroupIngress",
            "ec2:DeleteSecurityGroup",
            "ec2:ModifyInstanceAttribute",
            "ec2:RevokeSecurityGroupIngress",
            "elasticloadbalancing:AddTags",
            "elasticloadbalancing:ApplySecurityGroupsToLoadBalancer",
            "elasticloadbalancing:AttachLoadBalancerToSubnets",
            "elasticloadbalancing:ConfigureHealthCheck",
            "elasticloadbalancing:CreateLoadBalancerListeners",
            "elasticloadbalancing:CreateLoadBalancerPolicy",
            "elasticloadbalancing:DeleteListener",
            "elasticloadbalancing:DeleteLoadBalancer",
            "elasticloadbalancing:DeleteLoadBalancerListeners",
            "elasticloadbalancing:DeleteTargetGroup",
            "elasticloadbalancing:DeregisterInstancesFromLoadBalancer",
            "elasticloadbalancing:DeregisterTargets",
            "elasticloadbalancing:DetachLoadBalancerFromSubnets",
            "elasticloadbalancing:ModifyListener",
            "elasticloadbalancing:ModifyLoadBalancerAttributes",
            "elasticloadbalancing:ModifyTargetGroup",
            "elasticloadbalancing:ModifyTargetGroupAttributes",
            "elasticloadbalancing:RegisterInstancesWithLoadBalancer",
            "elasticloadbalancing:RegisterTargets",
            "elasticloadbalancing:SetLoadBalancerPoliciesForBackendServer",
            "elasticloadbalancing:SetLoadBalancerPoliciesOfListener",
        ]);
        if nlb_security_groups {
            self.cluster_tagged(&["elasticloadbalancing:SetSecurityGroups"]);
        }
        self.cluster_tagged_create(&[
            "elasticloadbalancing:CreateListener",
            "elasticloadbalancing:CreateLoadBalancer",
            "elasticloadbalancing:CreateTargetGroup",
        ]);
        self.ec2_create(&["CreateSecurityGroup"], &["security-group"]);
        if cloud_routes {
            self.cluster_tagged(&["ec2:CreateRoute", "ec2:DeleteRoute"]);
        }
    }

    fn load_balancer_controller(&mut self) {
        self.unconditional(&[
            "acm:DescribeCertificate",
            "acm:ListCertificates",
            "cognito-idp:DescribeUserPoolClient",
            "ec2:DescribeAccountAttributes",
            "ec2:DescribeAvailabilityZones",
            "ec2:DescribeInstances",
            "ec2:DescribeInternetGateways",
            "ec2:DescribeNetworkInterfaces",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeSubnets",
            "ec2:DescribeVpcPeeringConnections",
            "ec2:DescribeVpcs",
            "ec2:GetSecurityGroupsForVpc",
            "elasticloadbalancing:DescribeCapacityReservation",
            "elasticloadbalancing:DescribeListenerAttributes",
            "elasticloadbalancing:DescribeListenerCertificates",
            "elasticloadbalancing:DescribeListeners",
            "elasticloadbalancing:DescribeLoadBalancerAttributes",
            "elasticloadbalancing:DescribeLoadBalancers",
            "elasticloadbalancing:DescribeRules",
            "elasticloadbalancing:DescribeTags",
            "elasticloadbalancing:DescribeTargetGroupAttributes",
            "elasticloadbalancing:DescribeTargetGroups",
            "elasticloadbalancing:DescribeTargetHealth",
            "elasticloadbalancing:DescribeTrustStores",
            "elasticloadbalancing:SetRulePriorities",
        ]);
        self.cluster_tagged(&[
            "ec2:AuthorizeSecurityGroupIngress",
            "ec2:DeleteSecurityGroup",
            "ec2:RevokeSecurityGroupIngress",
            "elasticloadbalancing:AddListenerCertificates",
            "elasticloadbalancing:AddTags",
            "elasticloadbalancing:DeleteListener",
            "elasticloadbalancing:DeleteLoadBalancer",
            "elasticloadbalancing:DeleteRule",
            "elasticloadbalancing:DeleteTargetGroup",
            "elasticloadbalancing:DeregisterTargets",
            "elasticloadbalancing:ModifyCapacityReservation",
            "elasticloadbalancing:ModifyListener",
            "elasticloadbalancing:ModifyListenerAttributes",
            "elasticloadbalancing:ModifyLoadBalancerAttributes",
            "elasticloadbalancing:ModifyRule",
            "elasticloadbalancing:ModifyTargetGroup",
            "elasticloadbalancing:ModifyTargetGroupAttributes",
            "elasticloadbalancing:RegisterTargets",
            "elasticloadbalancing:RemoveListenerCertificates",
            "elasticloadbalancing:RemoveTags",
            "elasticloadbalancing:SetIpAddressType",
            "elasticloadbalancing:SetSecurityGroups",
            "elasticloadbalancing:SetSubnets",
        ]);
        self.cluster_tagged_create(&[
            "elasticloadbalancing:CreateListener",
            "elasticloadbalancing:CreateLoadBalancer",
            "elasticloadbalancing:CreateRule",
            "elasticloadbalancing:CreateTargetGroup",
        ]);
        self.ec2_create(&["CreateSecurityGroup"], &["security-group"]);
    }

    /// What the load balancer controller adds for WAF, WAFv2 and Shield.
    fn load_balancer_controller_extras(&mut self, waf: bool, waf_v2: bool, shield: bool) {
        if waf {
            self.unconditional(&[
                "elasticloadbalancing:SetWebACL",
                "waf-regional:AssociateWebACL",
                "waf-regional:DisassociateWebACL",
                "waf-regional:GetWebACL",
                "waf-regional:GetWebACLForResource",
            ]);
        }
        if waf_v2 {
            self.unconditional(&[
                "elasticloadbalancing:SetWebACL",
                "wafv2:AssociateWebACL",
                "wafv2:DisassociateWebACL",
                "wafv2:GetWebACL",
                "wafv2:GetWebACLForResource",
            ]);
        }
        if shield {
            self.unconditional(&[
                "shield:CreateProtection",
                "shield:DeleteProtection",
                "shield:DescribeProtection",
                "shield:GetSubscriptionState",
            ]);
        }
    }

    /// cert-manager's DNS-01 challenges: TXT records under `_acme-challenge`
    /// in the given zones only.
    fn cert_manager(&mut self, zones: &[String]) {
        let resources: Vec<String> = zones
            .iter()
            .map(|z| self.arn("route53", &format!("::hostedzone/{z}")))
            .collect();
        self.statements.push(json!({
            "Action": "route53:ListResourceRecordSets",
            "Effect": "Allow",
            "Resource": resources,
        }));
        self.statements.push(json!({
            "Action": "route53:ChangeResourceRecordSets",
            "Condition": {
                "ForAllValues:StringEquals": {"route53:ChangeResourceRecordSetsRecordTypes": ["TXT"]},
                "ForAllValues:StringLike": {"route53:ChangeResourceRecordSetsNormalizedRecordNames": ["_acme-challenge.*"]},
            },
            "Effect": "Allow",
            "Resource": resources,
        }));
        self.statements.push(json!({
            "Action": ["route53:GetChange"],
            "Effect": "Allow",
            "Resource": [self.arn("route53", "::change/*")],
        }));
        self.statements.push(json!({
            "Action": ["route53:ListHostedZonesByName"],
            "Effect": "Allow",
            "Resource": ["*"],
        }));
    }

    /// Karpenter launches, tags and terminates only what it made for this
    /// cluster (tagged with the cluster and a `karpenter.sh/nodepool`), and
    /// passes only the node role (any role when groups bring their own
    /// instance profiles) to EC2.
    fn karpenter(&mut self, node_role: &str, custom_profiles: bool, customer_keys: bool) {
        if customer_keys {
            self.kms(false);
        }
        self.unconditional(&[
            "ec2:DescribeCapacityReservations",
            "ec2:DescribeImages",
            "ec2:DescribeInstanceStatus",
            "ec2:DescribeInstanceTypeOfferings",
            "ec2:DescribeInstanceTypes",
            "ec2:DescribeInstances",
            "ec2:DescribeLaunchTemplates",
            "ec2:DescribePlacementGroups",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeSpotPriceHistory",
            "ec2:DescribeSubnets",
            "iam:GetInstanceProfile",
            "iam:ListInstanceProfiles",
            "pricing:GetProducts",
            "ssm:GetParameter",
        ]);
        let ec2 = |rest: &str| self.arn("ec2", rest);
        let instance = ec2("*:*:instance/*");
        let launch_template = ec2("*:*:launch-template/*");
        let mut taggable = vec![
            ec2("*:*:fleet/*"),
            instance.clone(),
            launch_template.clone(),
            ec2("*:*:network-interface/*"),
            ec2("*:*:spot-instances-request/*"),
            ec2("*:*:volume/*"),
        ];
        taggable.sort();
        let mut launch_inputs = vec![
            ec2("*:*:capacity-reservation/*"),
            ec2("*::image/*"),
            ec2("*::snapshot/*"),
            ec2("*:*:security-group/*"),
            ec2("*:*:subnet/*"),
        ];
        launch_inputs.sort();
        let owned = json!({
            "StringEquals": {"aws:ResourceTag/KubernetesCluster": self.cluster},
            "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
        });
        let pass_role = if custom_profiles {
            self.arn("iam", ":*:role/*")
        } else {
            self.arn("iam", &format!(":*:role/{node_role}"))
        };
        let ec2_service = if self.env.partition == "aws-cn" {
            "ec2.amazonaws.com.cn"
        } else {
            "ec2.amazonaws.com"
        };
        self.statements.extend([
            json!({
                "Action": ["ec2:CreateFleet", "ec2:RunInstances"],
                "Effect": "Allow",
                "Resource": launch_inputs,
            }),
            json!({
                "Action": ["ec2:CreateFleet", "ec2:RunInstances"],
                "Condition": owned,
                "Effect": "Allow",
                "Resource": [launch_template.clone()],
            }),
            json!({
                "Action": ["ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:RunInstances"],
                "Condition": {
                    "StringEquals": {"aws:RequestTag/KubernetesCluster": self.cluster},
                    "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                },
                "Effect": "Allow",
                "Resource": taggable,
            }),
            json!({
                "Action": "ec2:CreateTags",
                "Condition": {
                    "StringEquals": {
                        "aws:RequestTag/KubernetesCluster": self.cluster,
                        "ec2:CreateAction": ["CreateFleet", "CreateLaunchTemplate", "RunInstances"],
                    },
                    "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                },
                "Effect": "Allow",
                "Resource": taggable,
            }),
            json!({
                "Action": ["ec2:CreateTags", "ec2:DeleteTags"],
                "Condition": {
                    "Null": {"aws:RequestTag/KubernetesCluster": "true"},
                    "StringEquals": {"aws:ResourceTag/KubernetesCluster": self.cluster},
                    "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                },
                "Effect": "Allow",
                "Resource": taggable,
            }),
            json!({
                "Action": ["ec2:DeleteLaunchTemplate", "ec2:TerminateInstances"],
                "Condition": owned,
                "Effect": "Allow",
                "Resource": [instance, launch_template],
            }),
            json!({
                "Action": "iam:PassRole",
                "Condition": {"StringEquals": {"iam:PassedToService": ec2_service}},
                "Effect": "Allow",
                "Resource": pass_role,
            }),
        ]);
    }

    fn cluster_autoscaler(&mut self, static_instance_list: bool) {
        self.cluster_tagged(&[
            "autoscaling:SetDesiredCapacity",
            "autoscaling:TerminateInstanceInAutoScalingGroup",
        ]);
        self.unconditional(&[
            "autoscaling:DescribeAutoScalingGroups",
            "autoscaling:DescribeAutoScalingInstances",
            "autoscaling:DescribeLaunchConfigurations",
            "autoscaling:DescribeScalingActivities",
            "ec2:DescribeImages",
            "ec2:DescribeLaunchTemplateVersions",
            "ec2:GetInstanceTypesFromInstanceRequirements",
        ]);
        if !static_instance_list {
            self.unconditional(&["ec2:DescribeInstanceTypes"]);
        }
    }

    fn termination_handler_queue(&mut self) {
        self.unconditional(&[
            "autoscaling:DescribeAutoScalingInstances",
            "autoscaling:DescribeTags",
            "ec2:DescribeInstances",
            // SQS takes no conditions.
            "sqs:DeleteMessage",
            "sqs:ReceiveMessage",
        ]);
        self.cluster_tagged(&["autoscaling:CompleteLifecycleAction"]);
    }

    /// Registry access and what the CNI needs, per role.
    fn networking_and_registry(&mut self, facts: &Facts, role: Role) {
        if facts.ecr {
            self.unconditional(&[
                "ecr:BatchCheckLayerAvailability",
                "ecr:BatchGetImage",
                "ecr:DescribeRepositories",
                "ecr:GetAuthorizationToken",
                "ecr:GetDownloadUrlForLayer",
                "ecr:GetRepositoryPolicy",
                "ecr:ListImages",
            ]);
        }
        if facts.ecr_pull_through {
            self.unconditional(&[
                "ecr:BatchImportUpstreamImage",
                "ecr:CreateRepository",
                "ecr:ReplicateImage",
                "ecr:TagResource",
            ]);
        }
        if facts.amazon_vpc {
            self.unconditional(&[
                "ec2:AssignPrivateIpAddresses",
                "ec2:AttachNetworkInterface",
                "ec2:CreateNetworkInterface",
                "ec2:DeleteNetworkInterface",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeInstances",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSubnets",
                "ec2:DescribeTags",
                "ec2:DetachNetworkInterface",
                "ec2:ModifyNetworkInterfaceAttribute",
                "ec2:UnassignPrivateIpAddresses",
            ]);
            let resource = self.arn("ec2", "*:*:network-interface/*");
            self.statements.push(json!({
                "Action": ["ec2:CreateTags"],
                "Effect": "Allow",
                "Resource": [resource],
            }));
        }
        if facts.cilium_eni && role != Role::Node {
            self.unconditional(&[
                "ec2:AssignPrivateIpAddresses",
                "ec2:AttachNetworkInterface",
                "ec2:CreateNetworkInterface",
                "ec2:CreateTags",
                "ec2:DeleteNetworkInterface",
                "ec2:DescribeInstances",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeRouteTables",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSubnets",
                "ec2:DescribeTags",
                "ec2:DescribeVpcs",
                "ec2:ModifyNetworkInterfaceAttribute",
                "ec2:UnassignPrivateIpAddresses",
            ]);
        }
        if facts.calico_src_dst {
            self.unconditional(&[
                "ec2:DescribeInstances",
                "ec2:ModifyNetworkInterfaceAttribute",
            ]);
        }
        if (facts.kube_router && role == Role::Node) || facts.kindnet {
            self.cluster_tagged(&["ec2:ModifyInstanceAttribute"]);
        }
    }

    /// The document, or `None` when nothing was granted.
    fn finish(self) -> Option<Value> {
        let mut statements = self.statements;
        if self.kms_grant {
            statements.push(json!({
                "Action": "kms:CreateGrant",
                "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}},
                "Effect": "Allow",
                "Resource": "*",
            }));
        }
        if self.kms_via_service {
            statements.push(json!({
                "Action": KMS_DATA_ACTIONS,
                "Condition": {"StringLike": {"kms:ViaService": [
                    format!("ec2.{}.amazonaws.com", self.env.region),
                    "s3.*.amazonaws.com",
                ]}},
                "Effect": "Allow",
                "Resource": "*",
            }));
        }
        if !self.unconditional.is_empty() {
            statements.push(json!({
                "Action": action_list(&self.unconditional),
                "Effect": "Allow",
                "Resource": "*",
            }));
        }
        if !self.cluster_tagged.is_empty() {
            statements.push(json!({
                "Action": action_list(&self.cluster_tagged),
                "Condition": {"StringEquals": {"aws:ResourceTag/KubernetesCluster": self.cluster}},
                "Effect": "Allow",
                "Resource": "*",
            }));
        }
        if !self.cluster_tagged_create.is_empty() {
            statements.push(json!({
                "Action": action_list(&self.cluster_tagged_create),
                "Condition": {"StringEquals": {"aws:RequestTag/KubernetesCluster": self.cluster}},
                "Effect": "Allow",
                "Resource": "*",
            }));
            // Creating a group also touches its VPC, which takes no request
            // tags (nor do kops' VPCs have to be tagged).
            if self
                .cluster_tagged_create
                .contains("ec2:CreateSecurityGroup")
            {
                statements.push(json!({
                    "Action": "ec2:CreateSecurityGroup",
                    "Effect": "Allow",
                    "Resource": format!("arn:{}:ec2:*:*:vpc/*", self.env.partition),
                }));
            }
        }
        if statements.is_empty() {
            return None;
        }
        Some(json!({"Statement": statements, "Version": POLICY_VERSION}))
    }
}

/// A statement's actions as kops writes them: one action as a string, more
/// as a list (kops' string-or-slice; a one-item list reads as a change).
fn action_list<'a>(actions: impl IntoIterator<Item = &'a String>) -> Value {
    let mut all: Vec<&String> = actions.into_iter().collect();
    match all.len() {
        1 => Value::from(all.remove(0).as_str()),
        _ => Value::from(all.into_iter().map(String::as_str).collect::<Vec<_>>()),
    }
}

/// Where each etcd cluster's backups go: its `backups.backupStore`, else
/// `<configBase>/backups/etcd/<name>` (kops' default).
fn etcd_backup_stores(model: &Model<'_>) -> Vec<String> {
    model
        .cluster
        .spec
        .etcd_clusters
        .iter()
        .flatten()
        .map(|c| {
            c.extra
                .get("backups")
                .and_then(|b| b.get("backupStore"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| {
                    format!(
                        "{}/backups/etcd/{}",
                        model.config_base.trim_end_matches('/'),
                        c.name
                    )
                })
        })
        .collect()
}

/// `(bucket, bucket/key)` of a location, as IAM ARNs name it. Local test
/// stores (`memfs://`, `file://`) stand for a placeholder bucket, as kops'
/// tests do.
fn s3_path(location: &str, placeholder: &str) -> Option<(String, String)> {
    let location = location.trim_end_matches('/');
    if let Some(rest) = location.strip_prefix("s3://") {
        let bucket = rest.split('/').next().filter(|b| !b.is_empty())?;
        return Some((bucket.to_string(), rest.to_string()));
    }
    if let Some(rest) = location.strip_prefix("memfs://") {
        return Some((placeholder.to_string(), format!("{placeholder}/{rest}")));
    }
    // A local directory: `file://` as given, or bare as kops writes it.
    let local = location
        .strip_prefix("file://")
        .or_else(|| location.starts_with('/').then_some(location));
    if let Some(rest) = local {
        // kops' file stores stand for the read placeholder in both cases.
        let bucket = "placeholder-read-bucket";
        return Some((bucket.to_string(), format!("{bucket}/{rest}")));
    }
    None
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::model::security::tests::{conformance_case, load, model, PUBLIC};

    use super::*;

    fn test_env(model: &Model<'_>, partition: &str) -> PolicyEnvironment {
        let private = model
            .cluster
            .spec
            .topology
            .as_ref()
            .and_then(|t| t.dns.as_ref())
            .and_then(|d| d.kind.as_deref());
        PolicyEnvironment {
            partition: partition.into(),
            region: region(model).unwrap(),
            // The zones kops' own tests fake.
            hosted_zone_id: match private {
                Some("None") => None,
                Some("Private") => Some("Z2AFAKE1ZON3NO".into()),
                _ => Some("Z1AFAKE1ZON3YO".into()),
            },
        }
    }

    #[test]
    fn role_policies_match_kops_golden_documents_in_every_aws_case() {
        let Some(root) = conformance_case("") else {
            return;
        };
        let mut checked = BTreeMap::new();
        for entry in std::fs::read_dir(root).unwrap() {
            let dir = entry.unwrap().path();
            let case = dir.file_name().unwrap().to_string_lossy().to_string();
            let Ok(yaml) = std::fs::read_to_string(dir.join("in-v1alpha2.yaml")) else {
                continue;
            };
            let Ok(tf) = std::fs::read_to_string(dir.join("kubernetes.tf")) else {
                continue;
            };
            if !tf.contains("resource \"aws_iam_role\"") {
                continue;
            }
            let (cluster, groups) = load(&yaml);
            let m = model(&cluster, &groups);
            let env = test_env(&m, "aws-test");
            for role in roles_in_use(&m) {
                let name = iam_name(&m, role);
                let golden = dir
                    .join("data")
                    .join(format!("aws_iam_role_policy_{name}_policy"));
                let expected = std::fs::read_to_string(&golden)
                    .ok()
                    .map(|t| PolicyDocument::parse(&t).unwrap());
                let ours = role_policy(&m, role, &env)
                    .unwrap()
                    .map(PolicyDocument::new);
                if ours != expected {
                    let show = |d: &Option<PolicyDocument>| {
                        d.as_ref()
                            .map(|d| serde_json::to_string_pretty(d.value()).unwrap())
                    };
                    panic!(
                        "{case}: policy of {name}\nours: {}\nkops: {}",
                        show(&ours).unwrap_or_default(),
                        show(&expected).unwrap_or_default()
                    );
                }
                let trust = std::fs::read_to_string(
                    dir.join("data").join(format!("aws_iam_role_{name}_policy")),
                )
                .unwrap();
                assert_eq!(
                    PolicyDocument::parse(&trust).unwrap(),
                    assume_role_policy("aws"),
                    "{case}: trust policy of {name}"
                );
                *checked.entry(case.clone()).or_insert(0) += 1;
            }
        }
        assert!(checked.contains_key("minimal-aws") && checked.contains_key("privatecilium"));
        assert!(
            checked.len() >= 30,
            "only {} cases: {checked:?}",
            checked.len()
        );
    }

    #[test]
    fn masters_read_only_their_cluster_state_and_write_only_etcd_backups() {
        let (cluster, groups) = load(PUBLIC);
        let m = model(&cluster, &groups);
        assert_eq!(m.config_base, "s3://state-bucket/pub.example.com");
        let env = PolicyEnvironment::of(&m);
        assert_eq!(
            env,
            PolicyEnvironment {
                partition: "aws".into(),
                region: "us-east-1".into(),
                // Not resolved here: the zone by name (renders look it up).
                hosted_zone_id: Some("example.com".into())
            }
        );
        let doc = PolicyDocument::new(role_policy(&m, Role::ControlPlane, &env).unwrap().unwrap());
        let s3: Vec<&Value> = doc
            .statements()
            .into_iter()
            .filter(|s| s.to_string().contains("\"s3:"))
            .collect();
        let s3_resources: BTreeSet<String> = s3
            .iter()
            .flat_map(|s| match &s["Resource"] {
                Value::String(r) => vec![r.clone()],
                Value::Array(rs) => rs.iter().map(|r| r.as_str().unwrap().to_string()).collect(),
                _ => vec![],
            })
            .collect();
        assert_eq!(
            s3_resources,
            [
                "arn:aws:s3:::state-bucket",
                "arn:aws:s3:::state-bucket/pub.example.com/*",
                "arn:aws:s3:::state-bucket/pub.example.com/backups/etcd/events/*",
                "arn:aws:s3:::state-bucket/pub.example.com/backups/etcd/main/*",
            ]
            .map(String::from)
            .into()
        );
        // Objects: only reads on the cluster's path; writes only under backups.
        for statement in &s3 {
            let text = statement.to_string();
            if text.contains("s3:PutObject") {
                assert!(text.contains("/backups/etcd/"), "{text}");
            }
            assert!(!text.contains("\"s3:*\""), "{text}");
        }
        // Nothing mutating is granted without a cluster condition or a narrow resource.
        for statement in doc.statements() {
            let text = statement.to_string();
            if statement["Resource"] == "*" && statement.get("Condition").is_none() {
                for action in doc_actions(statement) {
                    let verb = action.split(':').nth(1).unwrap_or_default();
                    assert!(
                        ["Describe", "Get", "List"]
                            .iter()
                            .any(|p| verb.starts_with(p))
                            || [
                                "iam:CreateServiceLinkedRole",
                                "sqs:DeleteMessage",
                                "sqs:ReceiveMessage"
                            ]
                            .contains(&action.as_str()),
                        "unconditional `{action}` in {text}"
                    );
                }
            }
        }
        assert!(doc.resources().iter().all(|r| !r.contains("placeholder")));
        // Nodes and (no) bastions need nothing here.
        assert_eq!(role_policy(&m, Role::Node, &env).unwrap(), None);
        assert_eq!(role_policy(&m, Role::Bastion, &env).unwrap(), None);
    }

    #[test]
    fn workers_read_only_the_uploaded_nodeup_prefix() {
        let (cluster, groups) = load(PUBLIC);
        let base = model(&cluster, &groups);
        let env = PolicyEnvironment::of(&base);
        let node_s3 = |m: &Model<'_>| -> Vec<String> {
            role_policy(m, Role::Node, &env)
                .unwrap()
                .map(|d| {
                    PolicyDocument::new(d)
                        .statements()
                        .into_iter()
                        .filter(|s| s.to_string().contains("\"s3:"))
                        .map(|s| s.to_string())
                        .collect()
                })
                .unwrap_or_default()
        };
        // kops' node role reads nothing of the state store.
        assert!(node_s3(&base).is_empty());
        let inputs = kops_nodeup::config::NodeInputs {
            nodeup: Some(kops_nodeup::bootstrap::NodeupSources {
                binaries: Vec::new(),
                state_store_prefix: Some(
                    "s3://state-bucket/pub.example.com/kops-rs/nodeup/".into(),
                ),
            }),
            ..Default::default()
        };
        let with = Model {
            node_inputs: Some(&inputs),
            ..base.clone()
        };
        let granted = node_s3(&with);
        assert_eq!(granted.len(), 1, "{granted:?}");
        assert!(
            granted[0].contains("\"arn:aws:s3:::state-bucket/pub.example.com/kops-rs/nodeup/*\"")
                && granted[0].contains("\"s3:GetObject\"")
                && !granted[0].contains("s3:Get*"),
            "{granted:?}"
        );
        // Served from elsewhere (a URL): no grant.
        let inputs = kops_nodeup::config::NodeInputs {
            nodeup: Some(Default::default()),
            ..Default::default()
        };
        let with = Model {
            node_inputs: Some(&inputs),
            ..base.clone()
        };
        assert!(node_s3(&with).is_empty());
    }

    fn doc_actions(statement: &Value) -> Vec<String> {
        match &statement["Action"] {
            Value::String(a) => vec![a.clone()],
            Value::Array(a) => a.iter().map(|a| a.as_str().unwrap().to_string()).collect(),
            _ => vec![],
        }
    }

    #[test]
    fn graph_has_one_role_policy_profile_per_role() {
        let yaml = crate::model::security::tests::private_with_bastion().replace(
            "  networkCIDR:",
            "  iam: {allowContainerRegistry: true, permissionsBoundary: arn:aws:iam::1:policy/b}\n  additionalPolicies:\n    node: '[{\"Effect\": \"Allow\", \"Action\": [\"s3:GetObject\"], \"Resource\": [\"arn:aws:s3:::extra/*\"]}]'\n  networkCIDR:",
        );
        let (cluster, groups) = load(&yaml);
        let m = model(&cluster, &groups);
        let mut graph = TaskGraph::new();
        build(&m, &mut graph).unwrap();
        let keys: Vec<String> = graph.iter().map(|(k, _)| k.to_string()).collect();
        for role in ["bastions", "masters", "nodes"] {
            let name = format!("{role}.priv.example.com");
            for key in [
                format!("IAMRole/{name}"),
                format!("IAMRolePolicy/{name}"),
                format!("IAMRolePolicy/additional.{name}"),
                format!("IAMInstanceProfile/{name}"),
                format!("IAMInstanceProfileRole/{name}"),
            ] {
                assert!(keys.contains(&key), "{key} in {keys:?}");
            }
        }
        for key in [
            "IAMRolePolicyAttachment/master-policyoverride",
            "IAMRolePolicyAttachment/node-policyoverride",
            "IAMRolePolicyAttachment/bastion-policyoverride",
        ] {
            assert!(keys.contains(&key.to_string()), "{key} in {keys:?}");
        }
        // No service-account roles or OIDC provider without IRSA.
        assert_eq!(keys.len(), 18);
        let task = |key: &str| {
            graph
                .iter()
                .find(|(k, _)| k.to_string() == key)
                .map(|(_, t)| t.clone())
                .unwrap()
        };
        let role = task("IAMRole/nodes.priv.example.com");
        let role = role.as_any().downcast_ref::<IamRole>().unwrap();
        assert_eq!(
            role.permissions_boundary.as_deref(),
            Some("arn:aws:iam::1:policy/b")
        );
        assert_eq!(
            role.tags
                .get("kubernetes.io/cluster/priv.example.com")
                .map(String::as_str),
            Some("owned")
        );
        assert_eq!(
            role.tags.get("Name").map(String::as_str),
            Some("nodes.priv.example.com")
        );
        let policy = |key: &str| {
            let t = task(key);
            t.as_any()
                .downcast_ref::<IamRolePolicy>()
                .unwrap()
                .document
                .clone()
        };
        // ECR for nodes; bastions get nothing (a stale policy would be removed).
        let nodes = policy("IAMRolePolicy/nodes.priv.example.com").unwrap();
        assert!(nodes
            .actions()
            .contains(&"ecr:GetAuthorizationToken".to_string()));
        assert_eq!(policy("IAMRolePolicy/bastions.priv.example.com"), None);
        let extra = policy("IAMRolePolicy/additional.nodes.priv.example.com").unwrap();
        assert_eq!(extra.resources(), ["arn:aws:s3:::extra/*"]);
        assert_eq!(
            policy("IAMRolePolicy/additional.masters.priv.example.com"),
            None
        );
    }

    #[test]
    fn a_bad_additional_policy_names_the_field() {
        let yaml = PUBLIC.replace(
            "  networkCIDR:",
            "  additionalPolicies:\n    master: 'not json'\n  networkCIDR:",
        );
        let (cluster, groups) = load(&yaml);
        let mut graph = TaskGraph::new();
        let err = build(&model(&cluster, &groups), &mut graph)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("spec.additionalPolicies.master: "), "{err}");
        assert!(err.contains("hint:"), "{err}");
    }

    #[test]
    fn long_names_are_shortened_like_kops() {
        let cluster = "this.is.truly.a.really.really.really.really.really.long.cluster-name.minimal.example.com";
        assert_eq!(
            truncate_with_hash(&format!("masters.{cluster}"), MAX_ROLE_NAME),
            "masters.this.is.truly.a.really.really.really.really.reall-g6fsnu"
        );
        assert_eq!(
            truncate_with_hash(&format!("nodes.{cluster}"), MAX_ROLE_NAME),
            "nodes.this.is.truly.a.really.really.really.really.really.-d86ibl"
        );
        assert_eq!(
            truncate_with_hash("nodes.short.example.com", MAX_ROLE_NAME),
            "nodes.short.example.com"
        );
    }

    #[test]
    fn regions_and_partitions() {
        assert_eq!(partition("cn-north-1"), "aws-cn");
        assert_eq!(partition("us-gov-west-1"), "aws-us-gov");
        assert_eq!(partition("eu-west-3"), "aws");
        let (cluster, groups) = load(&PUBLIC.replace("zone: us-east-1a", "zone: ap-southeast-2c"));
        assert_eq!(
            region(&model(&cluster, &groups)).as_deref(),
            Some("ap-southeast-2")
        );
    }

    /// `PUBLIC` with the nodes group (and, when asked, the control plane)
    /// naming an existing instance profile.
    fn with_profile(control_plane_too: bool) -> String {
        let profile =
            "iam: {profile: arn:aws:iam::123456789012:instance-profile/KopsExampleRole}, ";
        let mut yaml = PUBLIC.replace(
            "spec: {role: Node, ",
            &format!("spec: {{{profile}role: Node, "),
        );
        if control_plane_too {
            yaml = yaml.replace(
                "spec: {role: Master, ",
                &format!("spec: {{{profile}role: Master, "),
            );
        }
        yaml
    }

    #[test]
    fn a_group_with_its_own_profile_gets_no_role_or_profile() {
        let (cluster, groups) = load(&with_profile(false));
        let m = model(&cluster, &groups);
        let mut graph = TaskGraph::new();
        build(&m, &mut graph).unwrap();
        let keys: Vec<String> = graph.iter().map(|(k, _)| k.to_string()).collect();
        assert!(
            !keys
                .iter()
                .any(|k| k.contains("nodes.pub.example.com") || k.contains("node-policyoverride")),
            "{keys:?}"
        );
        for key in [
            "IAMRole/masters.pub.example.com",
            "IAMInstanceProfile/masters.pub.example.com",
            "IAMInstanceProfileRole/masters.pub.example.com",
        ] {
            assert!(keys.contains(&key.to_string()), "{key} in {keys:?}");
        }
        let (_, task) = graph
            .iter()
            .find(|(k, _)| k.to_string() == "IAMInstanceProfile/KopsExampleRole")
            .expect("the given profile, looked up");
        let shared = task
            .as_any()
            .downcast_ref::<shared_profile::SharedInstanceProfile>()
            .expect("only looked up, not made");
        assert_eq!(shared.groups, ["nodes"]);
        assert_eq!(
            instance_profile_name(&m, 1, &groups[1], Role::Node).unwrap(),
            "KopsExampleRole"
        );
        assert_eq!(
            instance_profile_name(&m, 0, &groups[0], Role::ControlPlane).unwrap(),
            "masters.pub.example.com"
        );
    }

    #[test]
    fn a_profile_for_two_roles_or_not_a_profile_is_refused() {
        let (cluster, groups) = load(&with_profile(true));
        let m = model(&cluster, &groups);
        let e = build(&m, &mut TaskGraph::new()).unwrap_err().to_string();
        assert!(e.contains("named by groups of two roles"), "{e}");

        let yaml =
            with_profile(false).replace("instance-profile/KopsExampleRole", "role/KopsExampleRole");
        let (cluster, groups) = load(&yaml);
        let m = model(&cluster, &groups);
        let e = build(&m, &mut TaskGraph::new()).unwrap_err().to_string();
        assert!(
            e.starts_with("instanceGroups[1].spec.iam.profile: `arn:aws:iam::123456789012:role/KopsExampleRole` is not an instance profile's ARN"),
            "{e}"
        );
    }
}
