//! `kops rolling-update cluster`: replaces the instances that run an
//! outdated launch template version (or carry the `kops.k8s.io/needs-update`
//! annotation on their node, or all of them with `--force`).
//!
//! Order, as kops: bastion groups (in parallel), then control-plane groups
//! one after the other, then API-server groups, then node groups one after
//! the other — or, with `parallel_node_groups`, all node groups at once,
//! each validating only what concerns it (failures of another worker group
//! do not hold it up; control-plane and cluster-wide failures do).
//!
//! Per group: validate first (not for bastions), taint the nodes to be
//! replaced `kops.k8s.io/scheduled-for-update:PreferNoSchedule`, then with
//! `maxSurge` > 0 detach that many instances (their group launches
//! replacements while they keep serving) and validate, then drain and
//! terminate with `maxSurge + maxUnavailable` at a time: cordon, evict every
//! pod but DaemonSet, mirror and finished ones through the Eviction API
//! (a 429 from a PodDisruptionBudget is retried until `--drain-timeout`),
//! terminate inside the group so it launches a replacement, wait until the
//! group is back to its desired capacity in service, sleep the interval,
//! and validate `--validate-count` times in a row. The control plane never
//! surges. With `--cloudonly` there is no Kubernetes API: no taint, drain
//! or validation, only the cloud.
//!
//! Everything is decided from the cloud as it is now, so a roll stopped
//! half way continues where it was: replaced instances are up to date, and
//! instances an earlier run detached for surge (tagged
//! `kops.k8s.io/detached-from-asg`) are found and terminated last.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use kops_api::{Cluster, InstanceGroup, Role};
use tokio::task::JoinSet;

use crate::groups::{build_groups, CloudGroup, CloudInstance, InstanceStatus};
use crate::k8s::{Eviction, Kubernetes, NodeInfo, TAINT_SCHEDULED_FOR_UPDATE};
use crate::validate::validate_once;
use crate::{Progress, Provider, RollError};

/// How a roll behaves (kops' flags and their defaults).
#[derive(Debug, Clone)]
pub struct RollOptions {
    /// Replace up-to-date instances too.
    pub force: bool,
    /// No Kubernetes API: no taint, drain or validation.
    pub cloud_only: bool,
    pub fail_on_drain_error: bool,
    pub fail_on_validate_error: bool,
    pub drain_timeout: Duration,
    pub post_drain_delay: Duration,
    pub validation_timeout: Duration,
    /// Consecutive successful validations after each replacement.
    pub validate_count: u32,
    pub control_plane_interval: Duration,
    pub node_interval: Duration,
    pub bastion_interval: Duration,
    /// Roll all node groups at the same time.
    pub parallel_node_groups: bool,
    /// Time between validation attempts while waiting for health (kops: 30s).
    pub validate_tick: Duration,
    /// Pause between two consecutive successful validations (kops: 10s).
    pub validate_success_pause: Duration,
    /// Time between eviction attempts of a blocked pod (kops: 5s).
    pub evict_retry: Duration,
    /// Time between cloud reads while waiting for a replacement.
    pub cloud_poll: Duration,
}

impl Default for RollOptions {
    fn default() -> Self {
        RollOptions {
            force: false,
            cloud_only: false,
            fail_on_drain_error: true,
            fail_on_validate_error: true,
            drain_timeout: Duration::from_secs(15 * 60),
            post_drain_delay: Duration::from_secs(5),
            validation_timeout: Duration::from_secs(15 * 60),
            validate_count: 2,
            control_plane_interval: Duration::from_secs(15),
            node_interval: Duration::from_secs(15),
            bastion_interval: Duration::from_secs(15),
            parallel_node_groups: false,
            validate_tick: Duration::from_secs(30),
            validate_success_pause: Duration::from_secs(10),
            evict_retry: Duration::from_secs(5),
            cloud_poll: Duration::from_secs(5),
        }
    }
}

/// What a roll is doing, for progress lines.
#[derive(Debug, Clone, PartialEq)]
pub enum RollEvent {
    GroupStarted {
        group: String,
        role: Role,
        instances: usize,
        max_surge: usize,
        concurrency: usize,
    },
    GroupFinished {
        group: String,
        elapsed: Duration,
    },
    Tainted {
        group: String,
        nodes: usize,
    },
    Detached {
        group: String,
        instance: String,
    },
    Cordoned {
        group: String,
        node: String,
    },
    EvictionBlocked {
        group: String,
        node: String,
        pod: String,
        message: String,
    },
    Drained {
        group: String,
        node: String,
        pods: usize,
    },
    NotDrained {
        group: String,
        instance: String,
        reason: String,
    },
    Terminated {
        group: String,
        instance: String,
        node: Option<String>,
    },
    ReplacementInService {
        group: String,
        instance: String,
    },
    ValidationPending {
        group: String,
        failures: Vec<String>,
    },
    Validated {
        group: String,
    },
    ValidationIgnored {
        group: String,
        error: String,
    },
    DrainErrorIgnored {
        group: String,
        node: String,
        error: String,
    },
    Warning {
        group: String,
        message: String,
    },
}

impl std::fmt::Display for RollEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RollEvent::GroupStarted {
                group,
                role,
                instances,
                max_surge,
                concurrency,
            } => write!(
                f,
                "[{group}] rolling {instances} instance(s) ({}; surge {max_surge}, {concurrency} at a time)",
                role.path_name()
            ),
            RollEvent::GroupFinished { group, elapsed } => {
                write!(f, "[{group}] done in {:.1}s", elapsed.as_secs_f64())
            }
            RollEvent::Tainted { group, nodes } => {
                write!(f, "[{group}] tainted {nodes} node(s) {TAINT_SCHEDULED_FOR_UPDATE}")
            }
            RollEvent::Detached { group, instance } => {
                write!(f, "[{group}] detached {instance} (surge; its replacement is launching)")
            }
            RollEvent::Cordoned { group, node } => write!(f, "[{group}] cordoned node {node}"),
            RollEvent::EvictionBlocked {
                group,
                node,
                pod,
                message,
            } => write!(
                f,
                "[{group}] eviction of {pod} on {node} refused, retrying: {message}"
            ),
            RollEvent::Drained { group, node, pods } => {
                write!(f, "[{group}] drained node {node} ({pods} pod(s) evicted)")
            }
            RollEvent::NotDrained {
                group,
                instance,
                reason,
            } => write!(f, "[{group}] not draining {instance}: {reason}"),
            RollEvent::Terminated {
                group,
                instance,
                node,
            } => match node {
                Some(n) => write!(f, "[{group}] terminated {instance} (node {n})"),
                None => write!(f, "[{group}] terminated {instance}"),
            },
            RollEvent::ReplacementInService { group, instance } => {
                write!(f, "[{group}] replacement for {instance} is in service")
            }
            RollEvent::ValidationPending { group, failures } => write!(
                f,
                "[{group}] cluster did not pass validation yet: {}",
                failures.join("; ")
            ),
            RollEvent::Validated { group } => write!(f, "[{group}] cluster validated"),
            RollEvent::ValidationIgnored { group, error } => write!(
                f,
                "[{group}] cluster validation failed, continuing (--fail-on-validate-error=false): {}",
                error.lines().next().unwrap_or_default()
            ),
            RollEvent::DrainErrorIgnored { group, node, error } => write!(
                f,
                "[{group}] draining {node} failed, terminating anyway (--fail-on-drain-error=false): {}",
                error.lines().next().unwrap_or_default()
            ),
            RollEvent::Warning { group, message } => write!(f, "[{group}] {message}"),
        }
    }
}

/// A group's resolved `rollingUpdate` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub max_surge: usize,
    pub max_unavailable: usize,
    pub drain_and_terminate: bool,
}

/// An integer or a percentage of `total` (rounded up for surge, down for
/// unavailability).
fn scaled(value: &serde_json::Value, total: usize, round_up: bool) -> Option<usize> {
    match value {
        serde_json::Value::Number(n) => n.as_u64().map(|n| n as usize),
        serde_json::Value::String(s) => {
            let s = s.trim();
            if let Some(p) = s.strip_suffix('%') {
                let pct: f64 = p.trim().parse().ok()?;
                let v = pct * total as f64 / 100.0;
                Some(if round_up { v.ceil() } else { v.floor() } as usize)
            } else {
                s.parse().ok()
            }
        }
        _ => None,
    }
}

/// The group's settings over the cluster's, then kops' defaults: surge 1
/// where the cloud can surge (`cloud_surges`: AWS; 0 for Karpenter
/// groups), unavailable 1 when there is no surge (else 0), a percentage of
/// unavailability never below 1.
pub fn resolve_settings(
    cluster: &Cluster,
    group: &InstanceGroup,
    instances: usize,
    cloud_surges: bool,
) -> Settings {
    let own = group.spec.rolling_update.clone().unwrap_or_default();
    let default = cluster.spec.rolling_update.clone().unwrap_or_default();
    let drain = own
        .drain_and_terminate
        .or(default.drain_and_terminate)
        .unwrap_or(true);
    let surge_value = own.max_surge.or(default.max_surge);
    let unavailable_value = own.max_unavailable.or(default.max_unavailable);
    let karpenter = group.spec.manager.as_deref() == Some("Karpenter");
    let max_surge = surge_value
        .as_ref()
        .and_then(|v| scaled(v, instances, true))
        .unwrap_or(if cloud_surges && !karpenter { 1 } else { 0 });
    let max_unavailable = match &unavailable_value {
        Some(v @ serde_json::Value::String(s)) if s.trim().ends_with('%') => {
            scaled(v, instances, false).unwrap_or(0).max(1)
        }
        Some(v) => scaled(v, instances, false).unwrap_or(0),
        None => usize::from(max_surge == 0),
    };
    Settings {
        max_surge,
        max_unavailable,
        drain_and_terminate: drain,
    }
}

/// Everything a roll needs.
pub struct Roller {
    pub cluster_name: String,
    pub cluster: Cluster,
    /// Every instance group of the cluster (validation looks at all).
    pub instance_groups: Vec<InstanceGroup>,
    pub cloud: Arc<dyn Provider>,
    /// `None` with `--cloudonly`.
    pub kube: Option<Arc<dyn Kubernetes>>,
    pub options: RollOptions,
    pub progress: Option<Progress>,
}

impl Roller {
    fn emit(&self, event: RollEvent) {
        if let Some(p) = &self.progress {
            p(&event);
        }
    }

    /// Rolls `groups` in kops' order. Errors of node groups are collected
    /// (the next group still rolls) unless validation timed out.
    pub async fn run(self: Arc<Self>, groups: Vec<CloudGroup>) -> Result<(), RollError> {
        let by_role = |role: Role| -> Vec<CloudGroup> {
            groups
                .iter()
                .filter(|g| g.role() == role)
                .cloned()
                .collect()
        };

        let mut bastions = JoinSet::new();
        for g in by_role(Role::Bastion) {
            let me = self.clone();
            let interval = self.options.bastion_interval;
            bastions.spawn(async move { me.roll_group(g, interval).await });
        }
        while let Some(r) = bastions.join_next().await {
            if let Err(e) = flatten(r) {
                bastions.abort_all();
                return Err(RollError::Stopped {
                    what: "bastion",
                    source: Box::new(e),
                });
            }
        }

        for g in by_role(Role::ControlPlane) {
            let interval = self.options.control_plane_interval;
            if let Err(e) = self.clone().roll_group(g, interval).await {
                return Err(RollError::Stopped {
                    what: "control-plane node",
                    source: Box::new(e),
                });
            }
        }

        let mut failed: Vec<(String, RollError)> = Vec::new();
        for g in by_role(Role::ApiServer) {
            let name = g.ig_name().to_string();
            if let Err(e) = self.clone().roll_group(g, self.options.node_interval).await {
                if e.stops_the_roll() {
                    return Err(e);
                }
                failed.push((name, e));
            }
        }

        let nodes = by_role(Role::Node);
        if self.options.parallel_node_groups {
            let mut set = JoinSet::new();
            for g in nodes {
                let me = self.clone();
                let interval = self.options.node_interval;
                let name = g.ig_name().to_string();
                set.spawn(async move { (name, me.roll_group(g, interval).await) });
            }
            while let Some(r) = set.join_next().await {
                match r {
                    Ok((_, Ok(()))) => {}
                    Ok((name, Err(e))) => failed.push((name, e)),
                    Err(e) => failed.push(("?".into(), join_error(e))),
                }
            }
        } else {
            for g in nodes {
                let name = g.ig_name().to_string();
                if let Err(e) = self.clone().roll_group(g, self.options.node_interval).await {
                    if e.stops_the_roll() {
                        return Err(e);
                    }
                    failed.push((name, e));
                }
            }
        }
        match failed.len() {
            0 => Ok(()),
            1 => Err(failed.remove(0).1),
            _ => Err(RollError::Groups(failed)),
        }
    }

    async fn roll_group(
        self: Arc<Self>,
        group: CloudGroup,
        interval: Duration,
    ) -> Result<(), RollError> {
        let started = Instant::now();
        let name = group.ig_name().to_string();
        let role = group.role();
        let is_bastion = role == Role::Bastion;
        let mut none_ready = group.ready.is_empty();
        let instances = group.ready.len() + group.need_update.len();
        let mut update: Vec<CloudInstance> = group.need_update.clone();
        if self.options.force {
            update.extend(group.ready.iter().cloned());
        }
        if update.is_empty() {
            return Ok(());
        }

        let settings = resolve_settings(
            &self.cluster,
            &group.instance_group,
            instances,
            self.cloud.supports_surge(),
        );
        let mut max_surge = settings.max_surge.min(update.len());
        let mut concurrency = max_surge + settings.max_unavailable;
        if role == Role::ControlPlane {
            // A control-plane node joins through its own API server and
            // etcd member: it cannot surge.
            max_surge = 0;
            concurrency = settings.max_unavailable.max(1);
        }
        let concurrency = concurrency.max(1);
        self.emit(RollEvent::GroupStarted {
            group: name.clone(),
            role,
            instances: update.len(),
            max_surge,
            concurrency,
        });

        if !is_bastion {
            self.maybe_validate("", 1, &name).await?;
        }
        if let (false, Some(kube)) = (self.options.cloud_only, &self.kube) {
            let mut tainted = 0;
            for u in &update {
                let Some(node) = &u.node else { continue };
                if node.unschedulable
                    || node
                        .taints
                        .iter()
                        .any(|(k, _, _)| k == TAINT_SCHEDULED_FOR_UPDATE)
                {
                    continue;
                }
                match kube.taint_for_update(node).await {
                    Ok(()) => tainted += 1,
                    Err(e) if self.options.fail_on_drain_error => return Err(e),
                    Err(e) => self.emit(RollEvent::DrainErrorIgnored {
                        group: name.clone(),
                        node: node.name.clone(),
                        error: e.to_string(),
                    }),
                }
            }
            if tainted > 0 {
                self.emit(RollEvent::Tainted {
                    group: name.clone(),
                    nodes: tainted,
                });
            }
        }

        // Attached instances first, detached ones last.
        update.sort_by_key(|u| u.status == InstanceStatus::Detached);

        if max_surge > 0 && !self.options.cloud_only {
            let mut skipped = 0;
            let mut surge = 1;
            while surge <= max_surge && surge + skipped <= update.len() {
                let index = update.len() - surge - skipped;
                if update[index].status != InstanceStatus::Detached {
                    match self
                        .cloud
                        .detach(&group.name, &update[index].instance)
                        .await
                    {
                        Ok(()) => {
                            let u = &mut update[index];
                            u.status = InstanceStatus::Detached;
                            u.instance.detached = true;
                            self.emit(RollEvent::Detached {
                                group: name.clone(),
                                instance: u.id().to_string(),
                            });
                        }
                        Err(e) => {
                            self.emit(RollEvent::Warning {
                                group: name.clone(),
                                message: format!(
                                    "could not detach {}, trying another: {e}",
                                    update[index].id()
                                ),
                            });
                            skipped += 1;
                            max_surge = max_surge.min(update.len().saturating_sub(skipped));
                            continue;
                        }
                    }
                    if surge == max_surge || none_ready {
                        tokio::time::sleep(interval).await;
                        self.maybe_validate(
                            " after detaching instance",
                            self.options.validate_count,
                            &name,
                        )
                        .await?;
                        none_ready = false;
                    }
                }
                surge += 1;
            }
        }

        if !settings.drain_and_terminate {
            self.emit(RollEvent::Warning {
                group: name.clone(),
                message: "rollingUpdate.drainAndTerminate is false: not replacing instances".into(),
            });
            return Ok(());
        }

        let mut running: JoinSet<Result<(), RollError>> = JoinSet::new();
        for (index, u) in update.into_iter().enumerate() {
            let me = self.clone();
            let group_name = name.clone();
            let asg = group.name.clone();
            running.spawn(async move {
                me.drain_terminate_and_wait(&group_name, &asg, role, u, interval)
                    .await
            });
            if running.len() < concurrency && (!none_ready || index > 0) {
                continue;
            }
            if let Some(r) = running.join_next().await {
                if let Err(e) = flatten(r) {
                    return Err(finish_pending(&mut running, e).await);
                }
            }
            if let Err(e) = self
                .maybe_validate(
                    " after terminating instance",
                    self.options.validate_count,
                    &name,
                )
                .await
            {
                return Err(finish_pending(&mut running, e).await);
            }
            // Validation fails from a drain's start until its replacement is
            // ready: collect every completion there is before the next drain.
            while let Some(r) = running.try_join_next() {
                if let Err(e) = flatten(r) {
                    return Err(finish_pending(&mut running, e).await);
                }
            }
        }
        if !running.is_empty() {
            while let Some(r) = running.join_next().await {
                if let Err(e) = flatten(r) {
                    return Err(finish_pending(&mut running, e).await);
                }
            }
            self.maybe_validate(
                " after terminating instance",
                self.options.validate_count,
                &name,
            )
            .await?;
        }
        self.emit(RollEvent::GroupFinished {
            group: name,
            elapsed: started.elapsed(),
        });
        Ok(())
    }

    async fn drain_terminate_and_wait(
        &self,
        group: &str,
        asg: &str,
        role: Role,
        u: CloudInstance,
        interval: Duration,
    ) -> Result<(), RollError> {
        let node_name = u.node.as_ref().map(|n| n.name.clone());
        if role != Role::Bastion && !self.options.cloud_only {
            match (&u.node, &self.kube) {
                (Some(node), Some(kube)) => {
                    if let Err(e) = self.drain(group, kube.clone(), node).await {
                        if self.options.fail_on_drain_error {
                            return Err(e);
                        }
                        self.emit(RollEvent::DrainErrorIgnored {
                            group: group.to_string(),
                            node: node.name.clone(),
                            error: e.to_string(),
                        });
                    }
                }
                _ => self.emit(RollEvent::NotDrained {
                    group: group.to_string(),
                    instance: u.id().to_string(),
                    reason: "it is not registered in Kubernetes".into(),
                }),
            }
        }
        self.cloud.terminate(asg, &u.instance).await?;
        self.emit(RollEvent::Terminated {
            group: group.to_string(),
            instance: u.id().to_string(),
            node: node_name,
        });
        self.wait_for_replacement(group, asg, u.id()).await?;
        tokio::time::sleep(interval).await;
        Ok(())
    }

    /// Waits until the group, without `gone`, has its desired capacity of
    /// instances in service.
    async fn wait_for_replacement(
        &self,
        group: &str,
        asg: &str,
        gone: &str,
    ) -> Result<(), RollError> {
        let deadline = Instant::now() + self.options.validation_timeout;
        loop {
            let groups = self.cloud.groups().await?;
            let ready = match groups.iter().find(|g| g.name == asg) {
                None => true,
                Some(g) => {
                    let in_service = g
                        .instances
                        .iter()
                        .filter(|i| !i.detached && i.lifecycle_state == "InService")
                        .count();
                    self.cloud.is_replaced(g, gone)
                        && in_service >= g.desired_capacity.max(0) as usize
                }
            };
            if ready {
                self.emit(RollEvent::ReplacementInService {
                    group: group.to_string(),
                    instance: gone.to_string(),
                });
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(RollError::ReplacementTimeout {
                    group: asg.to_string(),
                    instance: gone.to_string(),
                    timeout: self.options.validation_timeout,
                });
            }
            tokio::time::sleep(self.options.cloud_poll.min(deadline - now)).await;
        }
    }

    /// Cordons the node and evicts its pods, retrying refused evictions
    /// until the drain timeout, then waits for the evicted pods to go.
    async fn drain(
        &self,
        group: &str,
        kube: Arc<dyn Kubernetes>,
        node: &NodeInfo,
    ) -> Result<(), RollError> {
        let deadline = Instant::now() + self.options.drain_timeout;
        kube.cordon(&node.name).await?;
        self.emit(RollEvent::Cordoned {
            group: group.to_string(),
            node: node.name.clone(),
        });
        let mut pending: Vec<_> = kube
            .pods(Some(&node.name))
            .await?
            .into_iter()
            .filter(|p| p.is_evictable())
            .collect();
        let total = pending.len();
        let mut evicted: Vec<String> = Vec::new();
        let mut reported = std::collections::BTreeSet::new();
        let mut reason = String::new();
        while !pending.is_empty() {
            let mut set = JoinSet::new();
            for pod in pending.drain(..) {
                let kube = kube.clone();
                set.spawn(async move {
                    let r = kube.evict(&pod).await;
                    (pod, r)
                });
            }
            while let Some(r) = set.join_next().await {
                let (pod, result) = r.map_err(join_error)?;
                match result? {
                    Eviction::Evicted => evicted.push(pod.key()),
                    Eviction::Gone => {}
                    Eviction::Blocked(message) => {
                        if reported.insert(pod.key()) {
                            self.emit(RollEvent::EvictionBlocked {
                                group: group.to_string(),
                                node: node.name.clone(),
                                pod: pod.key(),
                                message: message.clone(),
                            });
                        }
                        reason = format!("last refusal for `{}`: {message}", pod.key());
                        pending.push(pod);
                    }
                }
            }
            if pending.is_empty() {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                pending.sort_by_key(|p| p.key());
                return Err(RollError::DrainTimeout {
                    node: node.name.clone(),
                    pods: pending.iter().map(|p| p.key()).collect(),
                    reason,
                    timeout: self.options.drain_timeout,
                });
            }
            tokio::time::sleep(self.options.evict_retry.min(deadline - now)).await;
        }
        // Evicted pods terminate gracefully; wait until they are gone.
        loop {
            let left: Vec<String> = kube
                .pods(Some(&node.name))
                .await?
                .into_iter()
                .map(|p| p.key())
                .filter(|k| evicted.contains(k))
                .collect();
            if left.is_empty() {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(RollError::DrainTimeout {
                    node: node.name.clone(),
                    pods: left,
                    reason: "the pods were evicted but have not terminated".into(),
                    timeout: self.options.drain_timeout,
                });
            }
            tokio::time::sleep(self.options.evict_retry.min(deadline - now)).await;
        }
        self.emit(RollEvent::Drained {
            group: group.to_string(),
            node: node.name.clone(),
            pods: total,
        });
        if !self.options.post_drain_delay.is_zero() {
            tokio::time::sleep(self.options.post_drain_delay).await;
        }
        Ok(())
    }

    async fn maybe_validate(
        &self,
        operation: &str,
        count: u32,
        group: &str,
    ) -> Result<(), RollError> {
        if self.options.cloud_only || self.kube.is_none() {
            return Ok(());
        }
        match self.validate_with_timeout(count, group).await {
            Ok(()) => Ok(()),
            Err(RollError::ValidationTimeout { timeout, last, .. })
                if self.options.fail_on_validate_error =>
            {
                Err(RollError::ValidationTimeout {
                    operation: operation.to_string(),
                    timeout,
                    last,
                })
            }
            Err(e) if self.options.fail_on_validate_error => Err(e),
            Err(e) => {
                self.emit(RollEvent::ValidationIgnored {
                    group: group.to_string(),
                    error: e.to_string(),
                });
                Ok(())
            }
        }
    }

    /// Validates until `count` consecutive validations show nothing
    /// relevant to `group`, or the validation timeout passes.
    async fn validate_with_timeout(&self, count: u32, group: &str) -> Result<(), RollError> {
        let Some(kube) = &self.kube else {
            return Ok(());
        };
        if count == 0 {
            return Ok(());
        }
        let deadline = Instant::now() + self.options.validation_timeout;
        let mut successes = 0;
        loop {
            let last = match validate_once(
                &self.cluster_name,
                &self.instance_groups,
                self.cloud.as_ref(),
                kube.as_ref(),
                0,
            )
            .await
            {
                Ok((v, _)) => {
                    let relevant = v.relevant_failures(Some(group));
                    if relevant.is_empty() {
                        successes += 1;
                        if successes >= count {
                            self.emit(RollEvent::Validated {
                                group: group.to_string(),
                            });
                            return Ok(());
                        }
                        tokio::time::sleep(self.options.validate_success_pause).await;
                        continue;
                    }
                    relevant.iter().map(|f| f.message.clone()).collect()
                }
                Err(e) => vec![e.to_string()],
            };
            successes = 0;
            let now = Instant::now();
            if now >= deadline {
                return Err(RollError::ValidationTimeout {
                    operation: String::new(),
                    timeout: self.options.validation_timeout,
                    last: last.join("; "),
                });
            }
            self.emit(RollEvent::ValidationPending {
                group: group.to_string(),
                failures: last,
            });
            tokio::time::sleep(self.options.validate_tick.min(deadline - now)).await;
        }
    }
}

fn join_error(e: tokio::task::JoinError) -> RollError {
    RollError::KubeApi {
        operation: "run",
        object: "a roll task".into(),
        message: e.to_string(),
    }
}

fn flatten(r: Result<Result<(), RollError>, tokio::task::JoinError>) -> Result<(), RollError> {
    r.map_err(join_error)?
}

/// Lets the drains already running finish, then returns `err`.
async fn finish_pending(running: &mut JoinSet<Result<(), RollError>>, err: RollError) -> RollError {
    while running.join_next().await.is_some() {}
    err
}

/// What `rolling-update cluster` was asked to do.
pub struct RollingUpdateRequest {
    pub cluster: String,
    pub kubeconfig: Option<PathBuf>,
    /// Only these instance groups (all when empty).
    pub instance_groups: Vec<String>,
    /// Only groups of these roles (all when empty): `control-plane`
    /// (`master`), `node`, `bastion`, `apiserver`.
    pub roles: Vec<String>,
    pub options: RollOptions,
    pub progress: Option<Progress>,
}

/// What would be rolled; [`RollingUpdatePlan::execute`] rolls it.
pub struct RollingUpdatePlan {
    /// The selected groups, as the cloud and Kubernetes show them now.
    pub groups: Vec<CloudGroup>,
    pub cloud_only: bool,
    roller: Arc<Roller>,
}

impl RollingUpdatePlan {
    /// True when some instance needs replacing (or `--force`).
    pub fn needs_update(&self) -> bool {
        self.roller.options.force || self.groups.iter().any(|g| !g.need_update.is_empty())
    }

    /// The cloud the roll reads and changes.
    pub fn cloud(&self) -> Arc<dyn Provider> {
        self.roller.cloud.clone()
    }

    /// Rolls the groups.
    pub async fn execute(self) -> Result<(), RollError> {
        self.roller.run(self.groups).await
    }
}

fn parse_role(text: &str) -> Option<Role> {
    match text.to_ascii_lowercase().replace('_', "-").as_str() {
        "control-plane" | "controlplane" | "master" => Some(Role::ControlPlane),
        "node" => Some(Role::Node),
        "bastion" => Some(Role::Bastion),
        "apiserver" | "api-server" => Some(Role::ApiServer),
        _ => None,
    }
}

/// Reads the cloud (and the nodes, unless `--cloudonly`) and works out what
/// needs replacing.
pub async fn plan_rolling_update(
    registry: &kops_ops::Registry,
    request: RollingUpdateRequest,
) -> Result<RollingUpdatePlan, RollError> {
    let (cluster, all_groups, cloud) = crate::load_cluster(registry, &request.cluster).await?;
    let kube: Option<Arc<dyn Kubernetes>> = if request.options.cloud_only {
        None
    } else {
        Some(Arc::new(
            crate::KubeClient::connect(request.kubeconfig.as_deref(), &request.cluster).await?,
        ))
    };

    let mut selected: Vec<InstanceGroup> = Vec::new();
    if request.instance_groups.is_empty() {
        selected = all_groups.clone();
    } else {
        for name in &request.instance_groups {
            let g = all_groups
                .iter()
                .find(|g| g.name() == name)
                .ok_or_else(|| RollError::InstanceGroupNotFound {
                    cluster: request.cluster.clone(),
                    name: name.clone(),
                })?;
            selected.push(g.clone());
        }
    }
    if !request.roles.is_empty() {
        let mut roles = Vec::new();
        for r in &request.roles {
            roles.push(parse_role(r).ok_or_else(|| RollError::InvalidRole { role: r.clone() })?);
        }
        selected.retain(|g| roles.contains(&g.role().unwrap_or(Role::Node)));
    }

    let nodes = match &kube {
        Some(k) => k.nodes().await?,
        None => Vec::new(),
    };
    let raw = cloud.groups().await?;
    let groups = build_groups(&request.cluster, &selected, &raw, &nodes);
    let roller = Arc::new(Roller {
        cluster_name: request.cluster.clone(),
        cluster,
        instance_groups: all_groups,
        cloud,
        kube,
        options: request.options.clone(),
        progress: request.progress,
    });
    Ok(RollingUpdatePlan {
        groups,
        cloud_only: request.options.cloud_only,
        roller,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(spec: Option<kops_api::cluster::RollingUpdateSpec>) -> Cluster {
        let mut c: Cluster = serde_json::from_value(json!({
            "apiVersion": "kops.k8s.io/v1alpha2",
            "kind": "Cluster",
            "metadata": {"name": "c.example.com"},
            "spec": {"cloudProvider": "aws"}
        }))
        .unwrap();
        c.spec.rolling_update = spec;
        c
    }

    fn spec(
        surge: Option<serde_json::Value>,
        unavailable: Option<serde_json::Value>,
    ) -> kops_api::cluster::RollingUpdateSpec {
        kops_api::cluster::RollingUpdateSpec {
            max_surge: surge,
            max_unavailable: unavailable,
            ..Default::default()
        }
    }

    #[test]
    fn settings_follow_kops_defaults_and_overrides() {
        let ig = InstanceGroup::new("c.example.com", "nodes", Role::Node);
        // Where the cloud cannot surge (GCE, vSphere), no surge by default.
        let s = resolve_settings(&cluster(None), &ig, 10, false);
        assert_eq!((s.max_surge, s.max_unavailable), (0, 1));
        let s = resolve_settings(&cluster(None), &ig, 10, true);
        assert_eq!(
            (s.max_surge, s.max_unavailable, s.drain_and_terminate),
            (1, 0, true)
        );

        // The cluster's default applies; a percentage of surge rounds up.
        let s = resolve_settings(
            &cluster(Some(spec(Some(json!("25%")), None))),
            &ig,
            10,
            true,
        );
        assert_eq!((s.max_surge, s.max_unavailable), (3, 0));

        // Surge 0: one unavailable at a time; a percentage never below 1.
        let s = resolve_settings(&cluster(Some(spec(Some(json!(0)), None))), &ig, 10, true);
        assert_eq!((s.max_surge, s.max_unavailable), (0, 1));
        let s = resolve_settings(
            &cluster(Some(spec(Some(json!(0)), Some(json!("5%"))))),
            &ig,
            10,
            true,
        );
        assert_eq!(s.max_unavailable, 1);

        // The group's own settings win over the cluster's.
        let mut own = ig.clone();
        own.spec.rolling_update = Some(spec(Some(json!(2)), Some(json!(1))));
        let s = resolve_settings(&cluster(Some(spec(Some(json!(5)), None))), &own, 10, true);
        assert_eq!((s.max_surge, s.max_unavailable), (2, 1));
    }

    #[test]
    fn roles_parse_as_kops_accepts_them() {
        assert_eq!(parse_role("Master"), Some(Role::ControlPlane));
        assert_eq!(parse_role("control-plane"), Some(Role::ControlPlane));
        assert_eq!(parse_role("APIServer"), Some(Role::ApiServer));
        assert_eq!(parse_role("node"), Some(Role::Node));
        assert_eq!(parse_role("worker"), None);
    }
}
