//! The Kubernetes side: nodes, pods, cordon, taint and eviction, behind the
//! [`Kubernetes`] trait, with [`KubeClient`] (kube-rs) as the implementation.
//!
//! The kubeconfig is read from `--kubeconfig`, else `KUBECONFIG`, else
//! `~/.kube/config`; the context named after the cluster is used (that is
//! what `kops export kubeconfig` writes), else the current context.

use std::collections::BTreeMap;
use std::path::Path;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{EvictParams, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::RollError;

/// The taint a roll puts on every node it is about to replace, so new pods
/// prefer other nodes.
pub const TAINT_SCHEDULED_FOR_UPDATE: &str = "kops.k8s.io/scheduled-for-update";
/// The label that takes a node out of external load balancers.
pub const LABEL_EXCLUDE_FROM_LOAD_BALANCERS: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";
/// The label of a node's zone.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// The annotation of a mirror pod (a static pod's API copy).
pub const ANNOTATION_MIRROR_POD: &str = "kubernetes.io/config.mirror";

/// A client through the kubeconfig's (`path`, else `KUBECONFIG`, else
/// `~/.kube/config`) context named `cluster`, and only that one (no
/// falling back to the current context, which may be another cluster's);
/// an error says why there is none.
pub async fn cluster_client(path: Option<&Path>, cluster: &str) -> Result<Client, String> {
    let kubeconfig = match path {
        Some(p) => Kubeconfig::read_from(p),
        None => Kubeconfig::read(),
    }
    .map_err(|e| format!("cannot read the kubeconfig: {e}"))?;
    if !kubeconfig.contexts.iter().any(|c| c.name == cluster) {
        return Err(format!("the kubeconfig has no context `{cluster}`"));
    }
    let options = KubeConfigOptions {
        context: Some(cluster.to_string()),
        ..Default::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| format!("context `{cluster}`: {e}"))?;
    Client::try_from(config).map_err(|e| e.to_string())
}

/// What a roll and a validation need to know about a node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeInfo {
    pub name: String,
    pub provider_id: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// `True`, `False` or `Unknown` (no Ready condition).
    pub ready_status: String,
    /// The `NetworkUnavailable` condition's status, when present.
    pub network_unavailable: Option<String>,
    pub unschedulable: bool,
    /// The node's taints as `key`, `value`, `effect`.
    pub taints: Vec<(String, Option<String>, String)>,
    /// The kubelet's version as the node reports it (`v1.34.1`).
    pub kubelet_version: Option<String>,
}

impl NodeInfo {
    /// The EC2 instance id at the end of `aws:///zone/i-...`.
    pub fn instance_id(&self) -> Option<&str> {
        let p = self.provider_id.as_deref()?;
        p.rsplit('/').next().filter(|s| !s.is_empty())
    }

    /// Ready: the Ready condition is `True` and the network is not
    /// reported unavailable.
    pub fn is_ready(&self) -> bool {
        self.ready_status == "True"
            && !matches!(self.network_unavailable.as_deref(), Some(s) if s != "False" && s != "Unknown")
    }

    pub fn is_control_plane(&self) -> bool {
        self.labels
            .contains_key("node-role.kubernetes.io/control-plane")
    }

    pub fn from_node(node: &Node) -> Self {
        let meta = &node.metadata;
        let spec = node.spec.as_ref();
        let conditions = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .cloned()
            .unwrap_or_default();
        let condition = |t: &str| {
            conditions
                .iter()
                .find(|c| c.type_ == t)
                .map(|c| c.status.clone())
        };
        NodeInfo {
            name: meta.name.clone().unwrap_or_default(),
            provider_id: spec.and_then(|s| s.provider_id.clone()),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            ready_status: condition("Ready").unwrap_or_else(|| "Unknown".to_string()),
            network_unavailable: condition("NetworkUnavailable"),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            taints: spec
                .and_then(|s| s.taints.as_ref())
                .map(|ts| {
                    ts.iter()
                        .map(|t| (t.key.clone(), t.value.clone(), t.effect.clone()))
                        .collect()
                })
                .unwrap_or_default(),
            kubelet_version: node
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map(|i| i.kubelet_version.clone())
                .filter(|v| !v.is_empty()),
        }
    }

    /// A Ready node with a provider id (tests and the benchmark).
    pub fn ready_for_test(name: &str, provider_id: &str) -> Self {
        NodeInfo {
            name: name.to_string(),
            provider_id: Some(provider_id.to_string()),
            ready_status: "True".to_string(),
            ..Default::default()
        }
    }
}

/// What a drain and a validation need to know about a pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub node_name: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub priority_class: Option<String>,
    /// `Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`.
    pub phase: String,
    /// Names of containers that are not ready.
    pub not_ready_containers: Vec<String>,
    /// Kinds of the pod's controllers (`ReplicaSet`, `DaemonSet`, ...).
    pub owner_kinds: Vec<String>,
    pub mirror: bool,
}

impl PodInfo {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// A drain leaves DaemonSet pods (their controller ignores cordons),
    /// mirror pods (the kubelet owns them) and finished pods alone.
    pub fn is_evictable(&self) -> bool {
        !self.mirror
            && !self.owner_kinds.iter().any(|k| k == "DaemonSet")
            && self.phase != "Succeeded"
            && self.phase != "Failed"
    }

    pub fn from_pod(pod: &Pod) -> Self {
        let meta = &pod.metadata;
        let spec = pod.spec.as_ref();
        let status = pod.status.as_ref();
        PodInfo {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            node_name: spec.and_then(|s| s.node_name.clone()),
            labels: meta.labels.clone().unwrap_or_default(),
            priority_class: spec.and_then(|s| s.priority_class_name.clone()),
            phase: status
                .and_then(|s| s.phase.clone())
                .unwrap_or_else(|| "Unknown".to_string()),
            not_ready_containers: status
                .and_then(|s| s.container_statuses.as_ref())
                .map(|cs| {
                    cs.iter()
                        .filter(|c| !c.ready)
                        .map(|c| c.name.clone())
                        .collect()
                })
                .unwrap_or_default(),
            owner_kinds: meta
                .owner_references
                .as_ref()
                .map(|o| o.iter().map(|r| r.kind.clone()).collect())
                .unwrap_or_default(),
            mirror: meta
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(ANNOTATION_MIRROR_POD)),
        }
    }
}

/// The answer to one eviction request.
#[derive(Debug, Clone, PartialEq)]
pub enum Eviction {
    /// Accepted: the pod is being deleted.
    Evicted,
    /// The pod no longer exists.
    Gone,
    /// Refused for now (HTTP 429: a PodDisruptionBudget does not allow it);
    /// the API's message.
    Blocked(String),
}

/// What a roll and a validation do with the Kubernetes API.
#[async_trait]
pub trait Kubernetes: Send + Sync {
    async fn nodes(&self) -> Result<Vec<NodeInfo>, RollError>;
    /// Pods of every namespace, or those bound to `node`.
    async fn pods(&self, node: Option<&str>) -> Result<Vec<PodInfo>, RollError>;
    /// Marks a node unschedulable and takes it out of external load
    /// balancers. A node that no longer exists is not an error.
    async fn cordon(&self, node: &str) -> Result<(), RollError>;
    /// Adds the `scheduled-for-update` taint (PreferNoSchedule).
    async fn taint_for_update(&self, node: &NodeInfo) -> Result<(), RollError>;
    /// Asks the Eviction API (policy/v1) to evict a pod.
    async fn evict(&self, pod: &PodInfo) -> Result<Eviction, RollError>;
}

/// [`Kubernetes`] through kube-rs.
#[derive(Clone)]
pub struct KubeClient {
    client: Client,
}

impl KubeClient {
    /// Connects with the kubeconfig at `path` (else `KUBECONFIG`, else
    /// `~/.kube/config`), using the context named `cluster` when there is
    /// one, else the current context.
    pub async fn connect(path: Option<&Path>, cluster: &str) -> Result<Self, RollError> {
        let error = |message: String| RollError::Kubeconfig {
            cluster: cluster.to_string(),
            path: path.map(|p| p.display().to_string()),
            message,
        };
        let kubeconfig = match path {
            Some(p) => Kubeconfig::read_from(p),
            None => Kubeconfig::read(),
        }
        .map_err(|e| error(e.to_string()))?;
        let context = kubeconfig
            .contexts
            .iter()
            .any(|c| c.name == cluster)
            .then(|| cluster.to_string());
        if context.is_none() && kubeconfig.current_context.is_none() {
            return Err(error(format!(
                "it has no context named `{cluster}` and no current context"
            )));
        }
        let config = Config::from_custom_kubeconfig(
            kubeconfig,
            &KubeConfigOptions {
                context,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| error(e.to_string()))?;
        let mut config = config;
        // kube-rs retries a 429 for minutes on its own; a refused eviction
        // must come back to the drain, which retries until --drain-timeout.
        config.default_retry = false;
        let client = Client::try_from(config).map_err(|e| error(e.to_string()))?;
        Ok(KubeClient { client })
    }

    fn nodes_api(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// Creates a namespaced object of kops' own kinds (`kops.k8s.io`), as
    /// given: `toolbox enroll` registers a machine as a `Host` (plural
    /// `hosts`) this way.
    pub async fn create_kops_object(
        &self,
        object: &serde_json::Value,
        plural: &str,
    ) -> Result<(), RollError> {
        let text = |path: &str| object.pointer(path).and_then(|v| v.as_str()).unwrap_or("");
        let (kind, namespace, name) = (
            text("/kind"),
            text("/metadata/namespace"),
            text("/metadata/name"),
        );
        let (group, version) = text("/apiVersion")
            .split_once('/')
            .unwrap_or(("kops.k8s.io", "v1alpha2"));
        let resource = kube::api::ApiResource {
            group: group.to_string(),
            version: version.to_string(),
            api_version: format!("{group}/{version}"),
            kind: kind.to_string(),
            plural: plural.to_string(),
        };
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resource);
        let failed = |message: String| RollError::KubeApi {
            operation: "create",
            object: format!("{kind} {namespace}/{name}"),
            message,
        };
        let dynamic: kube::api::DynamicObject =
            serde_json::from_value(object.clone()).map_err(|e| failed(e.to_string()))?;
        api.create(&kube::api::PostParams::default(), &dynamic)
            .await
            .map_err(|e| failed(e.to_string()))?;
        Ok(())
    }
}

fn status_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

#[async_trait]
impl Kubernetes for KubeClient {
    async fn nodes(&self) -> Result<Vec<NodeInfo>, RollError> {
        let list = self
            .nodes_api()
            .list(&ListParams::default())
            .await
            .map_err(|e| RollError::kube("list", "nodes", e))?;
        Ok(list.items.iter().map(NodeInfo::from_node).collect())
    }

    async fn pods(&self, node: Option<&str>) -> Result<Vec<PodInfo>, RollError> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let mut params = ListParams::default();
        if let Some(n) = node {
            params = params.fields(&format!("spec.nodeName={n}"));
        }
        let list = api.list(&params).await.map_err(|e| {
            RollError::kube(
                "list",
                node.map(|n| format!("pods on {n}"))
                    .unwrap_or_else(|| "pods".to_string()),
                e,
            )
        })?;
        Ok(list.items.iter().map(PodInfo::from_pod).collect())
    }

    async fn cordon(&self, node: &str) -> Result<(), RollError> {
        let patch = serde_json::json!({
            "metadata": {"labels": {LABEL_EXCLUDE_FROM_LOAD_BALANCERS: ""}},
            "spec": {"unschedulable": true},
        });
        match self
            .nodes_api()
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(404) => Ok(()),
            Err(e) => Err(RollError::kube("cordon node", node, e)),
        }
    }

    async fn taint_for_update(&self, node: &NodeInfo) -> Result<(), RollError> {
        if node
            .taints
            .iter()
            .any(|(k, _, _)| k == TAINT_SCHEDULED_FOR_UPDATE)
        {
            return Ok(());
        }
        let mut taints: Vec<serde_json::Value> = node
            .taints
            .iter()
            .map(|(k, v, e)| serde_json::json!({"key": k, "value": v, "effect": e}))
            .collect();
        taints.push(
            serde_json::json!({"key": TAINT_SCHEDULED_FOR_UPDATE, "effect": "PreferNoSchedule"}),
        );
        let patch = serde_json::json!({"spec": {"taints": taints}});
        match self
            .nodes_api()
            .patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(404) => Ok(()),
            Err(e) => Err(RollError::kube("taint node", &node.name, e)),
        }
    }

    async fn evict(&self, pod: &PodInfo) -> Result<Eviction, RollError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        match api.evict(&pod.name, &EvictParams::default()).await {
            Ok(_) => Ok(Eviction::Evicted),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Eviction::Gone),
            Err(kube::Error::Api(status)) if status.code == 429 => {
                Ok(Eviction::Blocked(status.message.clone()))
            }
            Err(e) => Err(RollError::kube("evict pod", pod.key(), e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_kops() {
        let mut n = NodeInfo::ready_for_test("a", "aws:///us-east-1a/i-0abc");
        assert!(n.is_ready());
        assert_eq!(n.instance_id(), Some("i-0abc"));
        n.network_unavailable = Some("True".into());
        assert!(!n.is_ready());
        n.network_unavailable = Some("False".into());
        assert!(n.is_ready());
        n.ready_status = "Unknown".into();
        assert!(!n.is_ready());
    }

    #[test]
    fn drains_skip_daemon_set_mirror_and_finished_pods() {
        let mut p = PodInfo {
            phase: "Running".into(),
            ..Default::default()
        };
        assert!(p.is_evictable());
        p.owner_kinds = vec!["DaemonSet".into()];
        assert!(!p.is_evictable());
        p.owner_kinds.clear();
        p.mirror = true;
        assert!(!p.is_evictable());
        p.mirror = false;
        p.phase = "Succeeded".into();
        assert!(!p.is_evictable());
    }
}
