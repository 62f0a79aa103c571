//! A Classic ELB in front of the Kubernetes API (`api.<cluster>`), for
//! clusters made by kops 1.36 or earlier with
//! `spec.api.loadBalancer.class: Classic`. kops 1.37 refuses the class;
//! kops-rs keeps managing such balancers the way kops 1.36 did, so these
//! clusters can still be updated (and, in time, moved to a Network Load
//! Balancer).
//!
//! Like the Network Load Balancer it is found by its `Name` tag (with the
//! cluster's `KubernetesCluster` tag), not its AWS name: an older cluster's
//! balancer may carry another AWS name, which is kept (renaming would mean
//! replacing it). What kops 1.36 sets: TCP listeners, the `SSL:443` health
//! check, connection draining, idle timeout, cross-zone balancing and the
//! access log; subnets, security groups and tags are changed in place, the
//! scheme is fixed at creation.
//!
//! Classic ELBs have no ARN: the task's [`LoadBalancerOutput`] carries the
//! balancer's AWS name in its `arn` field, which is what autoscaling groups
//! attach by (`LoadBalancerNames`) and what Route 53 alias records do not
//! read (they use the DNS name and hosted zone).

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_elasticloadbalancing::types::{
    AccessLog, ConnectionDraining, ConnectionSettings, CrossZoneLoadBalancing, HealthCheck,
    Listener, LoadBalancerAttributes, LoadBalancerDescription, Tag,
};
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext, Tags, TAG_CLUSTER, TAG_NAME};
use crate::tasks::network_load_balancer::LoadBalancerOutput;
use crate::tasks::security_group::SecurityGroupId;
use crate::tasks::subnet::SubnetId;
use crate::tasks::{managed_tags, tags_to_write};
use crate::AwsCloud;

/// A client of the Classic ELB API that counts its calls with the cloud's
/// other clients. Classic ELBs are rare (old clusters' API balancers, and
/// what `delete cluster` removes), so the client is made where it is used.
pub fn classic_elb_client(cloud: &AwsCloud) -> aws_sdk_elasticloadbalancing::Client {
    aws_sdk_elasticloadbalancing::Client::from_conf(
        aws_sdk_elasticloadbalancing::config::Builder::from(cloud.sdk_config())
            .interceptor(cloud.calls().clone())
            .interceptor(cloud.limits().clone())
            .build(),
    )
}

/// One listener: the balancer's port forwards TCP to the instances' port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicListener {
    pub instance_port: i32,
    /// `TCP` (kops 1.36 made no other kind for the API: TLS termination
    /// needs a Network Load Balancer).
    pub protocol: String,
}

impl FieldValue for ClassicListener {
    fn render(&self) -> String {
        format!("{} to instance port {}", self.protocol, self.instance_port)
    }
}

/// The health check of the instances behind the balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicHealthCheck {
    /// `SSL:443` for the API: a TLS handshake with kube-apiserver.
    pub target: String,
    pub healthy_threshold: i32,
    pub unhealthy_threshold: i32,
    /// Seconds between checks.
    pub interval: i32,
    /// Seconds a check may take.
    pub timeout: i32,
}

impl FieldValue for ClassicHealthCheck {
    fn render(&self) -> String {
        format!(
            "{} every {}s (timeout {}s, healthy {}, unhealthy {})",
            self.target,
            self.interval,
            self.timeout,
            self.healthy_threshold,
            self.unhealthy_threshold
        )
    }
}

/// The access log, when on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicAccessLog {
    pub bucket: String,
    pub prefix: Option<String>,
    /// Minutes between log files (5 or 60); `None`: AWS' default.
    pub emit_interval: Option<i32>,
}

/// The balancer attributes kops sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicAttributes {
    /// `None`: stated off (kops turns it off when the spec has none).
    pub access_log: Option<ClassicAccessLog>,
    /// `Some(seconds)`: connection draining on, with that timeout.
    pub connection_draining_timeout: Option<i32>,
    /// Seconds an idle connection is kept.
    pub idle_timeout: i32,
    pub cross_zone: bool,
}

impl ClassicAttributes {
    /// The attributes as `name: value` pairs, the form they are compared
    /// and shown in: only those this task sets.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        let mut map = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            map.insert(k.to_string(), v);
        };
        put("accessLog.enabled", self.access_log.is_some().to_string());
        if let Some(log) = &self.access_log {
            put("accessLog.s3BucketName", log.bucket.clone());
            if let Some(prefix) = &log.prefix {
                put("accessLog.s3BucketPrefix", prefix.clone());
            }
            if let Some(interval) = log.emit_interval {
                put("accessLog.emitInterval", interval.to_string());
            }
        }
        put(
            "connectionDraining.enabled",
            self.connection_draining_timeout.is_some().to_string(),
        );
        if let Some(timeout) = self.connection_draining_timeout {
            put("connectionDraining.timeout", timeout.to_string());
        }
        put(
            "connectionSettings.idleTimeout",
            self.idle_timeout.to_string(),
        );
        put(
            "crossZoneLoadBalancing.enabled",
            self.cross_zone.to_string(),
        );
        map
    }

    fn to_api(&self) -> Result<LoadBalancerAttributes, TaskError> {
        let access_log = match &self.access_log {
            Some(log) => AccessLog::builder()
                .enabled(true)
                .s3_bucket_name(&log.bucket)
                .set_s3_bucket_prefix(log.prefix.clone())
                .set_emit_interval(log.emit_interval)
                .build(),
            None => AccessLog::builder().enabled(false).build(),
        };
        let attributes = LoadBalancerAttributes::builder()
            .access_log(access_log)
            .connection_draining(
                ConnectionDraining::builder()
                    .enabled(self.connection_draining_timeout.is_some())
                    // AWS' default when draining is off.
                    .timeout(self.connection_draining_timeout.unwrap_or(300))
                    .build(),
            )
            .connection_settings(
                ConnectionSettings::builder()
                    .idle_timeout(self.idle_timeout)
                    .build()
                    .map_err(|e| TaskError::fatal(format!("idle timeout: {e}")))?,
            )
            .cross_zone_load_balancing(
                CrossZoneLoadBalancing::builder()
                    .enabled(self.cross_zone)
                    .build(),
            )
            .build();
        Ok(attributes)
    }
}

/// The attributes AWS reports, as [`ClassicAttributes::to_map`] names them.
fn attributes_map(a: &LoadBalancerAttributes) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    if let Some(log) = a.access_log() {
        map.insert("accessLog.enabled".into(), log.enabled().to_string());
        if let Some(v) = log.s3_bucket_name() {
            map.insert("accessLog.s3BucketName".into(), v.to_string());
        }
        if let Some(v) = log.s3_bucket_prefix() {
            map.insert("accessLog.s3BucketPrefix".into(), v.to_string());
        }
        if let Some(v) = log.emit_interval() {
            map.insert("accessLog.emitInterval".into(), v.to_string());
        }
    }
    if let Some(d) = a.connection_draining() {
        map.insert("connectionDraining.enabled".into(), d.enabled().to_string());
        if let Some(t) = d.timeout() {
            map.insert("connectionDraining.timeout".into(), t.to_string());
        }
    }
    if let Some(s) = a.connection_settings() {
        map.insert(
            "connectionSettings.idleTimeout".into(),
            s.idle_timeout().to_string(),
        );
    }
    if let Some(c) = a.cross_zone_load_balancing() {
        map.insert(
            "crossZoneLoadBalancing.enabled".into(),
            c.enabled().to_string(),
        );
    }
    map
}

/// What the balancer should be.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassicLoadBalancer {
    /// The task name and the `Name` tag (`api.<cluster>`).
    pub name: String,
    /// The AWS name of a new balancer (at most 32 characters); an existing
    /// one keeps its own.
    pub load_balancer_name: String,
    /// `internal` or `internet-facing`.
    pub scheme: String,
    pub subnets: Vec<OutputRef<SubnetId>>,
    pub security_groups: Vec<OutputRef<SecurityGroupId>>,
    /// Security groups made outside the cluster (`sg-...`), added to those above.
    pub additional_security_groups: Vec<String>,
    /// By the balancer's port.
    pub listeners: BTreeMap<i32, ClassicListener>,
    pub health_check: ClassicHealthCheck,
    pub attributes: ClassicAttributes,
    pub tags: Tags,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct ClassicLoadBalancerActual {
    /// `arn` holds the AWS name (see the module doc).
    pub output: LoadBalancerOutput,
    pub scheme: String,
    /// Sorted.
    pub subnets: Vec<String>,
    /// Sorted.
    pub security_groups: Vec<String>,
    pub listeners: BTreeMap<i32, ClassicListener>,
    pub health_check: Option<ClassicHealthCheck>,
    /// The attributes this task sets (see [`ClassicAttributes::to_map`]).
    pub attributes: BTreeMap<String, String>,
    pub tags: Tags,
}

impl ClassicLoadBalancer {
    pub const KIND: &'static str = "ClassicLoadBalancer";

    /// The handle DNS records and autoscaling groups keep.
    pub fn output_ref(name: &str) -> OutputRef<LoadBalancerOutput> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }

    fn subnet_ids(&self, deps: &Outputs) -> Result<Vec<String>, TaskError> {
        let mut ids = Vec::new();
        for subnet in &self.subnets {
            ids.push(match deps.try_get(subnet)? {
                Some(id) => id.0.clone(),
                None => format!("<{}>", subnet.key()),
            });
        }
        ids.sort();
        Ok(ids)
    }

    fn group_ids(&self, deps: &Outputs) -> Result<Vec<String>, TaskError> {
        let mut ids = Vec::new();
        for group in &self.security_groups {
            ids.push(match deps.try_get(group)? {
                Some(id) => id.0.clone(),
                None => format!("<{}>", group.key()),
            });
        }
        ids.extend(self.additional_security_groups.iter().cloned());
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    fn api_listener(port: i32, listener: &ClassicListener) -> Result<Listener, TaskError> {
        Listener::builder()
            .load_balancer_port(port)
            .protocol(&listener.protocol)
            .instance_port(listener.instance_port)
            .instance_protocol(&listener.protocol)
            .build()
            .map_err(|e| TaskError::fatal(format!("listener on port {port}: {e}")))
    }

    fn api_health_check(&self) -> Result<HealthCheck, TaskError> {
        let h = &self.health_check;
        HealthCheck::builder()
            .target(&h.target)
            .healthy_threshold(h.healthy_threshold)
            .unhealthy_threshold(h.unhealthy_threshold)
            .interval(h.interval)
            .timeout(h.timeout)
            .build()
            .map_err(|e| TaskError::fatal(format!("health check of `{}`: {e}", self.name)))
    }

    /// The attributes found, kept to the keys this task sets.
    fn managed_attributes(&self, found: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let expected = self.attributes.to_map();
        found
            .iter()
            .filter(|(k, _)| expected.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    async fn read_attributes(
        &self,
        elb: &aws_sdk_elasticloadbalancing::Client,
        name: &str,
    ) -> Result<BTreeMap<String, String>, TaskError> {
        let out = elb
            .describe_load_balancer_attributes()
            .load_balancer_name(name)
            .send()
            .await
            .map_err(|e| classify("DescribeLoadBalancerAttributes", &self.name, e))?;
        Ok(out
            .load_balancer_attributes()
            .map(attributes_map)
            .map(|found| self.managed_attributes(&found))
            .unwrap_or_default())
    }

    async fn write_attributes(
        &self,
        elb: &aws_sdk_elasticloadbalancing::Client,
        name: &str,
    ) -> Result<(), TaskError> {
        elb.modify_load_balancer_attributes()
            .load_balancer_name(name)
            .load_balancer_attributes(self.attributes.to_api()?)
            .send()
            .await
            .map_err(|e| classify("ModifyLoadBalancerAttributes", &self.name, e))?;
        Ok(())
    }

    async fn write_health_check(
        &self,
        elb: &aws_sdk_elasticloadbalancing::Client,
        name: &str,
    ) -> Result<(), TaskError> {
        elb.configure_health_check()
            .load_balancer_name(name)
            .health_check(self.api_health_check()?)
            .send()
            .await
            .map_err(|e| classify("ConfigureHealthCheck", &self.name, e))?;
        Ok(())
    }
}

/// Every Classic ELB of the account tagged for the cluster, with its
/// tags: one paginated DescribeLoadBalancers and one DescribeTags per
/// 20 names (`task` names the asking task in errors).
async fn cluster_balancers(
    ctx: &AwsContext,
    elb: &aws_sdk_elasticloadbalancing::Client,
    task: &str,
) -> Result<Vec<(LoadBalancerDescription, Tags)>, TaskError> {
    let all = elb
        .describe_load_balancers()
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .map_err(|e| classify("DescribeLoadBalancers", task, e))?;
    let mut tags_by_name: BTreeMap<String, Tags> = BTreeMap::new();
    let names: Vec<String> = all
        .iter()
        .filter_map(|l| l.load_balancer_name().map(str::to_string))
        .collect();
    for chunk in names.chunks(20) {
        let out = match elb
            .describe_tags()
            .set_load_balancer_names(Some(chunk.to_vec()))
            .send()
            .await
        {
            Ok(out) => out,
            // Deleted between the two calls: found again next run.
            Err(e) if e.code() == Some("LoadBalancerNotFound") => continue,
            Err(e) => return Err(classify("DescribeTags", task, e)),
        };
        for d in out.tag_descriptions() {
            let Some(name) = d.load_balancer_name() else {
                continue;
            };
            tags_by_name.insert(
                name.to_string(),
                d.tags()
                    .iter()
                    .map(|t| {
                        (
                            t.key().to_string(),
                            t.value().unwrap_or_default().to_string(),
                        )
                    })
                    .collect(),
            );
        }
    }
    Ok(all
        .into_iter()
        .filter_map(|l| {
            let tags = tags_by_name.get(l.load_balancer_name()?)?.clone();
            (tags.get(TAG_CLUSTER) == Some(&ctx.cluster)).then_some((l, tags))
        })
        .collect())
}

fn elb_tags(tags: &Tags) -> Result<Vec<Tag>, TaskError> {
    tags.iter()
        .map(|(k, v)| {
            Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(|e| TaskError::fatal(format!("tag `{k}`: {e}")))
        })
        .collect()
}

fn actual_of(l: &LoadBalancerDescription, tags: Tags) -> ClassicLoadBalancerActual {
    let mut subnets = l.subnets().to_vec();
    subnets.sort();
    let mut security_groups = l.security_groups().to_vec();
    security_groups.sort();
    let listeners = l
        .listener_descriptions()
        .iter()
        .filter_map(|d| d.listener())
        .map(|x| {
            (
                x.load_balancer_port(),
                ClassicListener {
                    instance_port: x.instance_port(),
                    protocol: x.protocol().to_ascii_uppercase(),
                },
            )
        })
        .collect();
    let health_check = l.health_check().map(|h| ClassicHealthCheck {
        target: h.target().to_string(),
        healthy_threshold: h.healthy_threshold(),
        unhealthy_threshold: h.unhealthy_threshold(),
        interval: h.interval(),
        timeout: h.timeout(),
    });
    ClassicLoadBalancerActual {
        output: LoadBalancerOutput {
            arn: l.load_balancer_name().unwrap_or_default().to_string(),
            dns_name: l.dns_name().unwrap_or_default().to_string(),
            hosted_zone_id: l
                .canonical_hosted_zone_name_id()
                .unwrap_or_default()
                .to_string(),
        },
        scheme: l.scheme().unwrap_or("internet-facing").to_string(),
        subnets,
        security_groups,
        listeners,
        health_check,
        attributes: BTreeMap::new(),
        tags,
    }
}

/// The members of `a` that are not in `b`.
fn only_in<T: Ord + Clone>(a: &[T], b: &[T]) -> Vec<T> {
    let b: BTreeSet<&T> = b.iter().collect();
    a.iter().filter(|x| !b.contains(x)).cloned().collect()
}

impl Task<AwsContext> for ClassicLoadBalancer {
    type Actual = ClassicLoadBalancerActual;
    type Output = LoadBalancerOutput;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        let mut keys: Vec<TaskKey> = self.subnets.iter().map(|s| s.key().clone()).collect();
        keys.extend(self.security_groups.iter().map(|g| g.key().clone()));
        keys
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<ClassicLoadBalancerActual>, TaskError> {
        let elb = classic_elb_client(&ctx.cloud);
        let mut found = cluster_balancers(ctx, &elb, &self.name)
            .await?
            .into_iter()
            .find(|(_, tags)| tags.get(TAG_NAME) == Some(&self.name))
            .map(|(l, tags)| actual_of(&l, tags));
        if found.is_none() {
            if let Some(name) = ctx.created_id(&self.key()) {
                // Created earlier in this run (a retried apply), before its
                // tags could be read back.
                let out = elb
                    .describe_load_balancers()
                    .load_balancer_names(&name)
                    .send()
                    .await
                    .map_err(|e| classify("DescribeLoadBalancers", &self.name, e))?;
                found = out
                    .load_balancer_descriptions()
                    .first()
                    .map(|l| actual_of(l, self.tags.clone()));
            }
        }
        let Some(mut actual) = found else {
            return Ok(None);
        };
        actual.attributes = self.read_attributes(&elb, &actual.output.arn).await?;
        Ok(Some(actual))
    }

    fn diff(
        &self,
        actual: Option<&ClassicLoadBalancerActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        let mut changes = Changes::new();
        if actual.is_none() {
            changes.compare("loadBalancerName", None, self.load_balancer_name.as_str());
        }
        changes
            .compare(
                "scheme",
                actual.map(|a| a.scheme.as_str()),
                self.scheme.as_str(),
            )
            .compare(
                "subnets",
                actual.map(|a| &a.subnets),
                &self.subnet_ids(deps)?,
            )
            .compare(
                "securityGroups",
                actual.map(|a| &a.security_groups),
                &self.group_ids(deps)?,
            )
            .compare("listeners", actual.map(|a| &a.listeners), &self.listeners)
            .compare(
                "healthCheck",
                actual.map(|a| &a.health_check),
                &Some(self.health_check.clone()),
            )
            .compare(
                "attributes",
                actual.map(|a| &a.attributes),
                &self.attributes.to_map(),
            )
            .compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&ClassicLoadBalancerActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        match actual {
            Some(a) if a.scheme != self.scheme => Err(TaskError::immutable(
                "scheme",
                a.scheme.as_str(),
                self.scheme.as_str(),
            )),
            _ => Ok(()),
        }
    }

    fn output(&self, actual: &ClassicLoadBalancerActual) -> LoadBalancerOutput {
        actual.output.clone()
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&ClassicLoadBalancerActual>,
        changes: &Changes,
    ) -> Result<LoadBalancerOutput, TaskError> {
        let elb = classic_elb_client(&ctx.cloud);
        let subnets = self.subnet_ids(deps)?;
        let groups = self.group_ids(deps)?;
        let Some(actual) = actual else {
            let mut listeners = Vec::new();
            for (port, listener) in &self.listeners {
                listeners.push(Self::api_listener(*port, listener)?);
            }
            elb.create_load_balancer()
                .load_balancer_name(&self.load_balancer_name)
                .set_listeners(Some(listeners))
                .set_subnets(Some(subnets))
                .set_security_groups(Some(groups))
                // Internet-facing is AWS' default, and kops leaves it unsaid.
                .set_scheme((self.scheme == "internal").then(|| self.scheme.clone()))
                .set_tags(Some(elb_tags(&self.tags)?))
                .send()
                .await
                .map_err(|e| classify("CreateLoadBalancer", &self.name, e))?;
            ctx.remember_created(self.key(), &self.load_balancer_name);
            self.write_health_check(&elb, &self.load_balancer_name)
                .await?;
            self.write_attributes(&elb, &self.load_balancer_name)
                .await?;
            // The create answers with the DNS name only; the hosted zone
            // (for alias records) comes from a describe.
            let out = elb
                .describe_load_balancers()
                .load_balancer_names(&self.load_balancer_name)
                .send()
                .await
                .map_err(|e| classify("DescribeLoadBalancers", &self.name, e))?;
            let created = out.load_balancer_descriptions().first().ok_or_else(|| {
                TaskError::retryable(format!(
                    "the new Classic ELB `{}` is not listed yet",
                    self.load_balancer_name
                ))
            })?;
            return Ok(actual_of(created, self.tags.clone()).output);
        };
        let name = actual.output.arn.as_str();
        if changes.has("subnets") {
            let detach = only_in(&actual.subnets, &subnets);
            let attach = only_in(&subnets, &actual.subnets);
            // Attach first: a balancer must keep one subnet per zone, and a
            // zone's subnet is swapped by detaching the old one after.
            if !attach.is_empty() {
                elb.attach_load_balancer_to_subnets()
                    .load_balancer_name(name)
                    .set_subnets(Some(attach))
                    .send()
                    .await
                    .map_err(|e| classify("AttachLoadBalancerToSubnets", &self.name, e))?;
            }
            if !detach.is_empty() {
                elb.detach_load_balancer_from_subnets()
                    .load_balancer_name(name)
                    .set_subnets(Some(detach))
                    .send()
                    .await
                    .map_err(|e| classify("DetachLoadBalancerFromSubnets", &self.name, e))?;
            }
        }
        if changes.has("securityGroups") {
            elb.apply_security_groups_to_load_balancer()
                .load_balancer_name(name)
                .set_security_groups(Some(groups))
                .send()
                .await
                .map_err(|e| classify("ApplySecurityGroupsToLoadBalancer", &self.name, e))?;
        }
        if changes.has("listeners") {
            // A listener cannot be changed in place: the differing ones
            // (and those no longer wanted) are deleted, then recreated.
            let stale: Vec<i32> = actual
                .listeners
                .iter()
                .filter(|(port, l)| self.listeners.get(port) != Some(l))
                .map(|(port, _)| *port)
                .collect();
            if !stale.is_empty() {
                elb.delete_load_balancer_listeners()
                    .load_balancer_name(name)
                    .set_load_balancer_ports(Some(stale))
                    .send()
                    .await
                    .map_err(|e| classify("DeleteLoadBalancerListeners", &self.name, e))?;
            }
            let mut missing = Vec::new();
            for (port, listener) in &self.listeners {
                if actual.listeners.get(port) != Some(listener) {
                    missing.push(Self::api_listener(*port, listener)?);
                }
            }
            if !missing.is_empty() {
                elb.create_load_balancer_listeners()
                    .load_balancer_name(name)
                    .set_listeners(Some(missing))
                    .send()
                    .await
                    .map_err(|e| classify("CreateLoadBalancerListeners", &self.name, e))?;
            }
        }
        if changes.has("healthCheck") {
            self.write_health_check(&elb, name).await?;
        }
        if changes.has("attributes") {
            self.write_attributes(&elb, name).await?;
        }
        let missing = tags_to_write(&actual.tags, &self.tags);
        if !missing.is_empty() {
            elb.add_tags()
                .load_balancer_names(name)
                .set_tags(Some(elb_tags(&missing)?))
                .send()
                .await
                .map_err(|e| classify("AddTags", &self.name, e))?;
        }
        Ok(actual.output.clone())
    }
}

/// Deletes the Classic ELB a Network Load Balancer replaces: a cluster
/// moved from `class: Classic` to `class: Network` (what the deprecation
/// warning asks for) keeps no orphan ELB, as kops 1.36 deleted the old one
/// once the new one was made. The balancer is found by its `Name` tag
/// among the cluster's; the task runs after `after` (the new balancer, the
/// DNS records moved to it and the autoscaling groups, which detach from
/// the old one first), and does nothing when no such ELB exists.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassicLoadBalancerRetirement {
    /// The retired balancer's `Name` tag (`api.<cluster>`).
    pub name: String,
    pub after: Vec<TaskKey>,
}

impl ClassicLoadBalancerRetirement {
    pub const KIND: &'static str = "ClassicLoadBalancerRetirement";
}

impl Task<AwsContext> for ClassicLoadBalancerRetirement {
    /// The AWS names of the cluster's Classic ELBs with that `Name` tag.
    type Actual = Vec<String>;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        self.after.clone()
    }

    async fn find(&self, ctx: &AwsContext, _: &Outputs) -> Result<Option<Vec<String>>, TaskError> {
        let elb = classic_elb_client(&ctx.cloud);
        // One listing per run for every retirement task (API, bastion).
        let balancers = ctx
            .classic_balancers
            .get_or_try_init(|| cluster_balancers(ctx, &elb, &self.name))
            .await?;
        let mut names: Vec<String> = balancers
            .iter()
            .filter(|(_, tags)| tags.get(TAG_NAME) == Some(&self.name))
            .filter_map(|(l, _)| l.load_balancer_name().map(str::to_string))
            .collect();
        names.sort();
        Ok(Some(names))
    }

    fn diff(&self, actual: Option<&Vec<String>>, _: &Outputs) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        if let Some(found) = actual.filter(|f| !f.is_empty()) {
            changes.compare("classicLoadBalancers", Some(found), &Vec::new());
        }
        Ok(changes)
    }

    fn output(&self, _: &Vec<String>) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
        actual: Option<&Vec<String>>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let elb = classic_elb_client(&ctx.cloud);
        for name in actual.into_iter().flatten() {
            match elb
                .delete_load_balancer()
                .load_balancer_name(name)
                .send()
                .await
            {
                Ok(_) => {}
                Err(e) if e.code() == Some("LoadBalancerNotFound") => {}
                Err(e) => return Err(classify("DeleteLoadBalancer", &self.name, e)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attributes() -> ClassicAttributes {
        ClassicAttributes {
            access_log: None,
            connection_draining_timeout: Some(300),
            idle_timeout: 300,
            cross_zone: false,
        }
    }

    #[test]
    fn attributes_compare_on_what_kops_sets() {
        let expected = attributes().to_map();
        assert_eq!(expected["accessLog.enabled"], "false");
        assert!(!expected.contains_key("accessLog.emitInterval"));
        // AWS reports an emit interval even with the log off: not compared.
        let reported = attributes_map(&attributes().to_api().unwrap());
        let lb = ClassicLoadBalancer {
            name: "api.a.example.com".into(),
            load_balancer_name: "api-a-example-com-abcdef".into(),
            scheme: "internet-facing".into(),
            subnets: Vec::new(),
            security_groups: Vec::new(),
            additional_security_groups: Vec::new(),
            listeners: BTreeMap::new(),
            health_check: ClassicHealthCheck {
                target: "SSL:443".into(),
                healthy_threshold: 2,
                unhealthy_threshold: 2,
                interval: 10,
                timeout: 5,
            },
            attributes: attributes(),
            tags: Tags::new(),
        };
        assert_eq!(lb.managed_attributes(&reported), expected);
    }

    #[test]
    fn an_access_log_states_its_bucket() {
        let mut a = attributes();
        a.access_log = Some(ClassicAccessLog {
            bucket: "logs".into(),
            prefix: Some("api".into()),
            emit_interval: Some(5),
        });
        let map = a.to_map();
        assert_eq!(map["accessLog.enabled"], "true");
        assert_eq!(map["accessLog.s3BucketName"], "logs");
        assert_eq!(map["accessLog.emitInterval"], "5");
        assert_eq!(attributes_map(&a.to_api().unwrap()), map);
    }
}
