//! The files `update cluster` writes into the cluster's state store besides
//! the spec: the completed spec, the etcd cluster specs and etcd-manager
//! manifests, the kube-apiserver health-check and kops-channels static pods,
//! the addons bootstrap channel and each addon's manifest, and (given by the
//! caller, from kops-nodeup) each instance group's node config.
//!
//! Each file has kops' task name (what the Terraform target names its
//! `aws_s3_object` after) and its path below the config base. Pure: no IO.
//!
//! Contents: the completed spec, etcd cluster specs, the channel, the
//! static pods and etcd-manager manifests are built from the spec. The
//! addon manifests themselves (CoreDNS, kops-controller, the AWS cloud
//! controller, ...) are NOT rendered yet: each is a YAML comment saying so,
//! listed in the channel with its real hash, so the set of objects and keys
//! is right but a cluster built from them has no addons.
//!
//! Also: the OIDC discovery document and the service-account signing keys
//! (JWKS) a cluster with a discovery store publishes there
//! ([`discovery_files`]), and the node config and bootstrap script of the
//! groups Karpenter launches ([`karpenter_files`]).

use std::collections::BTreeMap;

use kops_api::{Cluster, InstanceGroup, Role};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::Model;

/// One state-store object.
#[derive(Debug, Clone, PartialEq)]
pub struct StateFile {
    /// kops' name for it (`cluster-completed.spec`, `nodeupconfig-nodes`).
    pub name: String,
    /// Below the config base (`addons/bootstrap-channel.yaml`).
    pub path: String,
    pub contents: Vec<u8>,
    /// A canned S3 ACL kops requests, if any.
    pub acl: Option<String>,
    /// The store the file goes to when it is not the config base (the
    /// OIDC discovery store); `path` is then below it.
    pub base: Option<String>,
}

impl StateFile {
    pub fn new(
        name: impl Into<String>,
        path: impl Into<String>,
        contents: impl Into<Vec<u8>>,
    ) -> Self {
        Self {
            name: name.into(),
            path: path.into(),
            contents: contents.into(),
            acl: None,
            base: None,
        }
    }
}

use kops_api::KOPS_VERSION;

/// The image registry the static pods use.
fn registry(cluster: &Cluster) -> String {
    cluster
        .spec
        .assets
        .as_ref()
        .and_then(|a| a.container_registry.clone())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "registry.k8s.io".to_string())
}

fn k8s_minor(cluster: &Cluster) -> u64 {
    cluster
        .spec
        .kubernetes_version
        .as_deref()
        .and_then(kops_api::version::KubernetesVersion::parse)
        .map(|v| v.minor)
        .unwrap_or(0)
}

/// The etcd version of an etcd cluster: the spec's, or kops' default for
/// the Kubernetes version (3.6 from 1.34 on, 3.5 before).
pub fn etcd_version(cluster: &Cluster, spec_version: Option<&str>) -> String {
    if let Some(v) = spec_version.filter(|v| !v.is_empty()) {
        return v.trim_start_matches('v').to_string();
    }
    if k8s_minor(cluster) >= 34 {
        "3.6.12".to_string()
    } else {
        "3.5.31".to_string()
    }
}

/// Every state-store file of the cluster. `completed_spec` is the
/// populated spec as YAML; `node_configs` the node configs kops-nodeup
/// renders (name `nodeupconfig-<group>`), appended as they are.
pub fn state_files(
    model: &Model<'_>,
    completed_spec: &str,
    node_configs: Vec<StateFile>,
) -> Result<Vec<StateFile>, crate::ModelError> {
    state_files_keeping(model, completed_spec, node_configs, &BTreeMap::new())
}

/// [`state_files`], with the manifests of the addons `kept` names (by
/// addon key) taken as they are instead of rendered: the bootstrap channel
/// lists them with their own hashes. `update` keeps kops' kops-controller
/// addon on a cluster kops made, whose control plane runs it.
pub fn state_files_keeping(
    model: &Model<'_>,
    completed_spec: &str,
    node_configs: Vec<StateFile>,
    kept: &BTreeMap<String, String>,
) -> Result<Vec<StateFile>, crate::ModelError> {
    let cluster = model.cluster;
    let name = model.name();
    let mut files = vec![
        StateFile::new(
            "cluster-completed.spec",
            "cluster-completed.spec",
            completed_spec,
        ),
        StateFile::new(
            "kops-version.txt",
            "kops-version.txt",
            format!("{KOPS_VERSION}\n"),
        ),
    ];
    // What kops hands its system components from this process: the region
    // and a custom S3 state store's settings (`S3_ENDPOINT` etc.).
    let component_env = kops_api::env::forwarded_env(
        kops_api::env::EnvTarget::SystemComponent,
        Some(&region_of(cluster)),
        &kops_api::env::process_env,
    );
    let control_plane: Vec<&InstanceGroup> = model
        .groups
        .iter()
        .filter(|g| matches!(g.role(), Some(Role::ControlPlane)))
        .collect();
    for (index, etcd) in cluster.spec.etcd_clusters.iter().flatten().enumerate() {
        let version = etcd_version(cluster, etcd.version.as_deref());
        // kops' field order: member count first.
        let spec = format!(
            "{{\n  \"memberCount\": {},\n  \"etcdVersion\": {}\n}}",
            etcd.etcd_members.len(),
            Value::String(version)
        );
        files.push(StateFile::new(
            format!("etcd-cluster-spec-{}", etcd.name),
            format!("backups/etcd/{}/control/etcd-cluster-spec", etcd.name),
            spec,
        ));
        for group in &control_plane {
            let manifest = etcd_manager_manifest(model, etcd, index, &component_env);
            files.push(StateFile::new(
                format!("manifests-etcdmanager-{}-{}", etcd.name, group.name()),
                format!("manifests/etcd/{}-{}.yaml", etcd.name, group.name()),
                manifest,
            ));
        }
    }
    files.push(StateFile::new(
        "manifests-static-kube-apiserver-healthcheck",
        "manifests/static/kube-apiserver-healthcheck.yaml",
        healthcheck_manifest(cluster),
    ));
    files.push(StateFile::new(
        "manifests-channels-kops-channels",
        "manifests/channels/kops-channels.yaml",
        channels_manifest(model, &component_env),
    ));

    let addons = addons(model);
    let mut entries = Vec::new();
    for addon in &addons {
        let contents = if let Some(manifest) = kept.get(addon.key) {
            manifest.clone()
        } else if addon.empty {
            // kops' empty manifest is one line break.
            "\n".to_string()
        } else if let Some(manifest) = crate::addons::manifest(model, addon.key)? {
            manifest
        } else {
            format!(
                "# {}: this addon's manifest is not rendered by kops-rs yet.\n",
                addon.key
            )
        };
        // kops hashes the manifest without surrounding white space.
        let hash = hex(&Sha256::digest(contents.trim().as_bytes()));
        let mut entry = serde_json::Map::new();
        if !addon.id.is_empty() {
            entry.insert("id".into(), Value::String(addon.id.to_string()));
        }
        entry.insert("manifest".into(), Value::String(addon.location()));
        entry.insert("manifestHash".into(), Value::String(hash));
        entry.insert("name".into(), Value::String(addon.key.to_string()));
        if addon.needs_pki(model) {
            entry.insert("needsPKI".into(), Value::Bool(true));
        }
        if let Some(roles) = addon.needs_rolling_update() {
            entry.insert("needsRollingUpdate".into(), Value::String(roles.into()));
        }
        if addon.prunes() {
            entry.insert("prune".into(), prune_spec(addon.key, &contents));
        }
        entry.insert(
            "selector".into(),
            crate::addons::channel_selector(addon.key),
        );
        entries.push(Value::Object(entry));
        let suffix = if addon.id.is_empty() {
            String::new()
        } else {
            format!("-{}", addon.id)
        };
        files.push(StateFile::new(
            format!("{name}-addons-{}{suffix}", addon.key),
            format!("addons/{}", addon.location()),
            contents,
        ));
    }
    let channel = json!({
        "kind": "Addons",
        "metadata": {"name": "bootstrap"},
        "spec": {"addons": entries},
    });
    files.push(StateFile::new(
        format!("{name}-addons-bootstrap"),
        "addons/bootstrap-channel.yaml",
        kops_api::manifest::to_yaml(&channel),
    ));
    files.extend(node_configs);
    Ok(files)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One addon of the bootstrap channel.
#[derive(Debug, Clone, PartialEq)]
pub struct Addon {
    pub key: &'static str,
    pub id: &'static str,
    /// The manifest's file name below `addons/<key>/` when not `<id>.yaml`.
    pub file: Option<&'static str>,
    /// Applied with an empty manifest, so that pruning removes what an
    /// earlier configuration deployed (dns-controller when unused).
    pub empty: bool,
}

/// The kinds the channel prunes for addons that ask for it: objects of
/// these kinds labelled as the addon's that its manifest no longer has are
/// deleted (kops' list; namespaces and CRDs are never pruned).
const PRUNED_KINDS: [(&str, &str); 13] = [
    ("", "ConfigMap"),
    ("", "Service"),
    ("", "ServiceAccount"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("apps", "DaemonSet"),
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("policy", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
];

/// The channel's `prune` entry for `key` with manifest `contents`: every
/// kind of [`PRUNED_KINDS`], selected by the addon's labels, scoped to the
/// namespaces the manifest has objects of that kind in.
fn prune_spec(key: &str, contents: &str) -> Value {
    let mut namespaces: std::collections::BTreeMap<
        (String, String),
        std::collections::BTreeSet<String>,
    > = Default::default();
    let mut documents = vec![String::new()];
    for line in contents.lines() {
        if line.trim_end() == "---" {
            documents.push(String::new());
        } else if let Some(last) = documents.last_mut() {
            last.push_str(line);
            last.push('\n');
        }
    }
    for document in &documents {
        let Ok(object) = serde_yaml_ng::from_str::<Value>(document) else {
            continue;
        };
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let kind = object["kind"].as_str().unwrap_or_default();
        let entry = namespaces
            .entry((group.to_string(), kind.to_string()))
            .or_default();
        if let Some(ns) = object["metadata"]["namespace"].as_str() {
            entry.insert(ns.to_string());
        }
    }
    let selector = format!("addon.kops.k8s.io/name={key},app.kubernetes.io/managed-by=kops");
    let mut pruned = PRUNED_KINDS.to_vec();
    // Karpenter's node classes and pools are kops' (one per group): a
    // group deleted or no longer managed by Karpenter loses its own.
    if key == "karpenter.sh" {
        pruned.push(("karpenter.k8s.aws", "EC2NodeClass"));
        pruned.push(("karpenter.sh", "NodePool"));
        pruned.sort();
    }
    let kinds: Vec<Value> = pruned
        .iter()
        .map(|(group, kind)| {
            let mut spec = serde_json::Map::new();
            if !group.is_empty() {
                spec.insert("group".into(), json!(group));
            }
            spec.insert("kind".into(), json!(kind));
            spec.insert("labelSelector".into(), json!(selector));
            if let Some(ns) = namespaces.get(&(group.to_string(), kind.to_string())) {
                if !ns.is_empty() {
                    spec.insert("namespaces".into(), json!(ns));
                }
            }
            Value::Object(spec)
        })
        .collect();
    json!({ "kinds": kinds })
}

impl Addon {
    /// Whether the channel prunes this addon's leftovers: kops builds prune
    /// kinds for these addons (and for dns-controller when the cluster does
    /// not use it), not for the others (kube-router, the AWS VPC CNI,
    /// kindnet and Cilium included).
    fn prunes(&self) -> bool {
        self.empty
            || matches!(
                self.key,
                "certmanager.io"
                    | "karpenter.sh"
                    | "node-termination-handler.aws"
                    | "node-problem-detector.addons.k8s.io"
                    | "aws-load-balancer-controller.addons.k8s.io"
                    | "networking.kope.io"
                    | "networking.flannel"
                    | "networking.projectcalico.org"
                    | "gcp-cloud-controller.addons.k8s.io"
            )
    }

    /// The nodes kops marks for replacement when this addon changes
    /// (`needsRollingUpdate`): the control plane for kops-controller;
    /// every node for the CNIs that configure the host (the AWS VPC CNI,
    /// kindnet, Cilium; kops marks no other network plugin) and for
    /// NodeLocal DNSCache (kubelets point pods at its address).
    fn needs_rolling_update(&self) -> Option<&'static str> {
        match self.key {
            "kops-controller.addons.k8s.io" => Some("control-plane"),
            "networking.amazon-vpc-routed-eni"
            | "networking.kindnet"
            | "networking.cilium.io"
            | "nodelocaldns.addons.k8s.io" => Some("all"),
            _ => None,
        }
    }

    /// Whether the channel gives the addon a CA and issuer (`needsPKI`), as
    /// kops asks for the addons that serve webhooks or TLS: the load
    /// balancer controller, the pod identity webhook, the snapshot
    /// controller, metrics-server unless `insecure`, and Cilium with Hubble.
    fn needs_pki(&self, model: &Model<'_>) -> bool {
        let spec = &model.cluster.spec;
        match self.key {
            "aws-load-balancer-controller.addons.k8s.io"
            | "eks-pod-identity-webhook.addons.k8s.io"
            | "snapshot-controller.addons.k8s.io" => true,
            "metrics-server.addons.k8s.io" => {
                spec.metrics_server
                    .as_ref()
                    .and_then(|m| m.extra.get("insecure"))
                    .and_then(Value::as_bool)
                    != Some(true)
            }
            "networking.cilium.io" => {
                spec.networking
                    .as_ref()
                    .and_then(|n| n.cilium.as_ref())
                    .and_then(|c| c.hubble.as_ref())
                    .and_then(|h| h.get("enabled"))
                    .and_then(Value::as_bool)
                    == Some(true)
            }
            _ => false,
        }
    }

    fn new(key: &'static str, id: &'static str) -> Self {
        Self {
            key,
            id,
            file: None,
            empty: false,
        }
    }

    /// `<key>/<file>`.
    pub fn location(&self) -> String {
        match self.file {
            Some(file) => format!("{}/{file}", self.key),
            None => format!("{}/{}.yaml", self.key, self.id),
        }
    }
}

fn enabled(flag: Option<bool>) -> bool {
    flag.unwrap_or(false)
}

/// The addons kops puts in the bootstrap channel of an AWS or Google Cloud
/// cluster, in its order.
pub fn addons(model: &Model<'_>) -> Vec<Addon> {
    let spec = &model.cluster.spec;
    let gce = spec.cloud_provider.as_deref() == Some("gce");
    let vsphere = spec.cloud_provider.as_deref() == Some("vsphere");
    let mut out = vec![
        Addon::new("kops-controller.addons.k8s.io", "k8s-1.16"),
        // The cluster's DNS: kube-dns when asked for, else CoreDNS.
        if crate::addons::kube_dns::enabled(model) {
            Addon::new("kube-dns.addons.k8s.io", "k8s-1.12")
        } else {
            Addon::new("coredns.addons.k8s.io", "k8s-1.12")
        },
        Addon::new("kubelet-api.rbac.addons.k8s.io", "k8s-1.9"),
        Addon {
            key: "limit-range.addons.k8s.io",
            id: "",
            file: Some("v1.5.0.yaml"),
            empty: false,
        },
    ];
    let dns_none = spec
        .topology
        .as_ref()
        .and_then(|t| t.dns.as_ref())
        .and_then(|d| d.kind.as_deref())
        == Some("None");
    let external_dns = spec
        .external_dns
        .as_ref()
        .and_then(|e| e.provider.as_deref());
    // dns-controller is always in the channel; with an empty manifest when
    // the cluster does not use it, so pruning removes an old deployment.
    let mut dns_controller = Addon::new("dns-controller.addons.k8s.io", "k8s-1.12");
    dns_controller.empty = dns_none || !matches!(external_dns, None | Some("dns-controller"));
    out.push(dns_controller);
    if !dns_none && external_dns == Some("external-dns") {
        out.push(Addon::new("external-dns.addons.k8s.io", "k8s-1.19"));
    }
    if crate::addons::nodelocaldns::enabled(model) {
        out.push(Addon::new("nodelocaldns.addons.k8s.io", "k8s-1.12"));
    }
    if enabled(spec.cluster_autoscaler.as_ref().and_then(|c| c.enabled)) {
        out.push(Addon::new("cluster-autoscaler.addons.k8s.io", "k8s-1.15"));
    }
    if enabled(spec.metrics_server.as_ref().and_then(|c| c.enabled)) {
        out.push(Addon::new("metrics-server.addons.k8s.io", "k8s-1.11"));
    }
    // A cert-manager the user runs himself (`managed: false`) is not kops'.
    if let Some(cert_manager) = &spec.cert_manager {
        let managed = cert_manager.extra.get("managed").and_then(Value::as_bool);
        if enabled(cert_manager.enabled) && managed != Some(false) {
            out.push(Addon::new("certmanager.io", "k8s-1.16"));
        }
    }
    let karpenter = enabled(spec.karpenter.as_ref().and_then(|k| k.enabled));
    let nth = spec
        .node_termination_handler
        .as_ref()
        .and_then(|n| n.enabled)
        .unwrap_or(!karpenter);
    if nth && !gce && !vsphere {
        out.push(Addon::new("node-termination-handler.aws", "k8s-1.11"));
    }
    if enabled(spec.node_problem_detector.as_ref().and_then(|c| c.enabled)) {
        out.push(Addon::new(
            "node-problem-detector.addons.k8s.io",
            "k8s-1.17",
        ));
    }
    let gpu = |c: Option<&kops_api::components::ContainerdConfig>| {
        c.and_then(|c| c.nvidia_gpu.as_ref())
            .and_then(|n| n.get("enabled"))
            .and_then(Value::as_bool)
            == Some(true)
    };
    let nvidia = model.groups.iter().any(|g| gpu(g.spec.containerd.as_ref()))
        || gpu(spec.containerd.as_ref());
    if nvidia {
        out.push(Addon::new("nvidia.addons.k8s.io", "k8s-1.16"));
    }
    // The `gvisor` RuntimeClass, when a worker group runs gVisor.
    if model.groups.iter().any(InstanceGroup::has_gvisor) {
        out.push(Addon::new("gvisor.addons.k8s.io", "k8s-1.20"));
    }
    if enabled(
        spec.aws_load_balancer_controller
            .as_ref()
            .and_then(|c| c.enabled),
    ) {
        let irsa = spec
            .iam
            .as_ref()
            .and_then(|i| i.use_service_account_external_permissions)
            == Some(true);
        out.push(if irsa {
            Addon::new(
                "aws-load-balancer-controller.addons.k8s.io",
                "k8s-1.19-irsa",
            )
        } else {
            Addon::new("aws-load-balancer-controller.addons.k8s.io", "k8s-1.19")
        });
    }
    // kops lists the pod identity webhook after the load balancer controller.
    let pod_identity_webhook = spec
        .extra
        .get("podIdentityWebhook")
        .and_then(|w| w.get("enabled"))
        .and_then(Value::as_bool);
    if pod_identity_webhook == Some(true) {
        out.push(Addon::new(
            "eks-pod-identity-webhook.addons.k8s.io",
            "k8s-1.16",
        ));
    }
    let manage_storage = spec
        .extra
        .get("cloudConfig")
        .and_then(|c| c.get("manageStorageClasses"))
        .and_then(Value::as_bool)
        .unwrap_or(true);
    // kops' switch for the storage classes (its typed field on Google
    // Cloud; AWS reads it as before).
    let manage_storage = if gce {
        spec.cloud_config
            .as_ref()
            .and_then(|c| c.manage_storage_classes)
            .unwrap_or(true)
    } else {
        manage_storage
    };
    if manage_storage && !gce && !vsphere {
        out.push(Addon::new("storage-aws.addons.k8s.io", "v1.15.0"));
    }
    if vsphere {
        out.push(Addon::new(
            "vsphere-cloud-controller.addons.k8s.io",
            "k8s-1.25",
        ));
        out.push(Addon::new("vsphere-csi-driver.addons.k8s.io", "k8s-1.25"));
    }
    if gce {
        if manage_storage {
            out.push(Addon::new("storage-gce.addons.k8s.io", "v1.7.0"));
        }
        if crate::addons::gcp_pd_csi_driver::enabled(model) {
            out.push(Addon::new("gcp-pd-csi-driver.addons.k8s.io", "k8s-1.23"));
        }
        out.push(Addon::new("gcp-cloud-controller.addons.k8s.io", "k8s-1.23"));
    }
    if let Some(net) = &spec.networking {
        if net.kopeio.is_some() {
            out.push(Addon::new("networking.kope.io", "k8s-1.12"));
        }
        if net.flannel.is_some() {
            out.push(Addon::new("networking.flannel", "k8s-1.25"));
        }
        if net.calico.is_some() {
            out.push(Addon::new("networking.projectcalico.org", "k8s-1.25"));
        }
        if net.kuberouter.is_some() {
            out.push(Addon::new("networking.kuberouter", "k8s-1.12"));
        }
        if net.amazonvpc.is_some() {
            out.push(Addon::new("networking.amazon-vpc-routed-eni", "k8s-1.16"));
        }
        if net.kindnet.is_some() {
            out.push(Addon::new("networking.kindnet", "k8s-1.32"));
        }
        if net.cilium.is_some() {
            out.push(Addon {
                key: "networking.cilium.io",
                id: "k8s-1.16",
                file: Some("k8s-1.16-v1.15.yaml"),
                empty: false,
            });
        }
    }
    if spec
        .authentication
        .as_ref()
        .and_then(|a| a.aws.as_ref())
        .is_some()
    {
        out.push(Addon::new("authentication.aws", "k8s-1.12"));
    }
    if !gce && !vsphere {
        out.push(Addon::new("aws-cloud-controller.addons.k8s.io", "k8s-1.18"));
    }
    let ebs_csi_managed = spec
        .cloud_config
        .as_ref()
        .and_then(|c| c.aws_ebs_csi_driver.as_ref())
        .and_then(|d| d.get("managed"))
        .and_then(Value::as_bool);
    if !gce && !vsphere && ebs_csi_managed != Some(false) {
        out.push(Addon::new("aws-ebs-csi-driver.addons.k8s.io", "k8s-1.17"));
    }
    if enabled(spec.snapshot_controller.as_ref().and_then(|c| c.enabled)) {
        out.push(Addon::new("snapshot-controller.addons.k8s.io", "k8s-1.20"));
    }
    if karpenter {
        out.push(Addon::new("karpenter.sh", "k8s-1.19"));
    }
    out
}

/// The ports of an etcd cluster (client, peer, gRPC, quarantine): kops'
/// fixed ones for the clusters it knows, others after them.
fn etcd_ports(name: &str, index: usize) -> (u32, u32, u32, u32) {
    match kops_nodeup::config::etcd_ports(name) {
        Some(p) => (p.client, p.peer, p.grpc, p.quarantine),
        None => {
            let i = index as u32;
            (4007 + i, 2390 + i, 4010 + i, 4020 + i)
        }
    }
}

fn etcd_manager_manifest(
    model: &Model<'_>,
    spec: &kops_api::cluster::EtcdClusterSpec,
    index: usize,
    component_env: &[(String, String)],
) -> String {
    let etcd = spec.name.as_str();
    let manager = spec.manager.as_ref();
    let cluster = model.cluster;
    let name = model.name();
    let (client, peer, grpc, quarantine) = etcd_ports(etcd, index);
    // Where etcd's clients reach it: with kops' APIServerNodes feature (on
    // by KOPS_FEATURE_FLAGS, and always on for a cluster with API server
    // groups, which kops refuses without it) each cluster has its own name,
    // published by dns-controller from the pod's annotation; otherwise the
    // member's own name, but Cilium's etcd is reached through the API's
    // internal name, where the Cilium addon looks for it.
    let api_server_nodes = kops_api::env::feature_enabled("APIServerNodes")
        || model
            .groups
            .iter()
            .any(|g| matches!(g.role(), Some(Role::ApiServer)));
    let client_host = if api_server_nodes {
        format!("{etcd}.etcd.internal.{name}")
    } else if etcd == "cilium" {
        crate::dns::api_internal_name(model)
    } else {
        "__name__".to_string()
    };
    let cluster_name = if etcd == "main" {
        "etcd".to_string()
    } else {
        format!("etcd-{etcd}")
    };
    // Inside the pod the log is always /var/log/etcd.log (as kops); on the
    // host each etcd cluster has its own file.
    let log = "/var/log/etcd.log";
    let host_log = if etcd == "main" {
        log.to_string()
    } else {
        format!("/var/log/etcd-{etcd}.log")
    };
    let registry = kops_nodeup::config::DEFAULT_REGISTRY;
    // kops' order: the system-component variables sorted by name, then
    // etcd-manager's own.
    let mut env = env_list(component_env);
    env.extend(manager_env(manager));
    let mut mounts = vec![
        json!({"mountPath": "/rootfs", "name": "rootfs"}),
        json!({"mountPath": "/run", "name": "run"}),
        json!({"mountPath": "/etc/kubernetes/pki/etcd-manager", "name": "pki"}),
    ];
    let mut volumes = vec![
        json!({"hostPath": {"path": "/", "type": "Directory"}, "name": "rootfs"}),
        json!({"hostPath": {"path": "/run", "type": "DirectoryOrCreate"}, "name": "run"}),
        json!({"hostPath": {"path": format!("/etc/kubernetes/pki/etcd-manager-{etcd}"), "type": "DirectoryOrCreate"}, "name": "pki"}),
    ];
    // etcd's binaries: every version kops bundles, or only the spec's
    // version from the spec's own image (backups that need another
    // version's binaries cannot be restored then, as with kops).
    let (etcd_mounts, mut etcd_volumes) = match spec.image.as_deref().filter(|i| !i.is_empty()) {
        Some(image) => {
            let version = spec.version.as_deref().unwrap_or_default();
            let version = version.trim_start_matches('v');
            let volume = format!("etcd-v{}", version.replace('.', "-"));
            (
                vec![json!({"mountPath": format!("/opt/etcd-v{version}"), "name": volume})],
                vec![json!({
                    "image": {"pullPolicy": "IfNotPresent", "reference": image},
                    "name": volume,
                })],
            )
        }
        None => kops_nodeup::config::etcd_image_volumes(registry),
    };
    // The etcd images go through the cluster's registry mirror or proxy too.
    for volume in &mut etcd_volumes {
        if let Some(Value::String(image)) = volume.pointer_mut("/image/reference") {
            *image = crate::addons::remap_image(model, image);
        }
    }
    mounts.extend(etcd_mounts);
    volumes.extend(etcd_volumes);
    mounts.push(json!({"mountPath": log, "name": "varlogetcd"}));
    volumes.push(
        json!({"hostPath": {"path": host_log, "type": "FileOrCreate"}, "name": "varlogetcd"}),
    );
    let mut args = json!([
        format!("--log-file={log}"),
        "--also-stdout",
        "/ko-app/etcd-manager",
        format!("--backup-store={}/backups/etcd/{etcd}", model.config_base),
        format!("--client-urls=https://{client_host}:{client}"),
        format!("--cluster-name={cluster_name}"),
        "--containerized=true",
        format!("--dns-suffix=.internal.{name}"),
        format!("--grpc-port={grpc}"),
        format!("--peer-urls=https://__name__:{peer}"),
        format!("--quarantine-client-urls=https://__name__:{quarantine}"),
        format!("--v={}", manager.and_then(|m| m.log_level).unwrap_or(6)),
    ]);
    if let Value::Array(list) = &mut args {
        list.extend(volume_args(cluster, etcd));
    }
    let mut metadata = json!({
        "labels": {"k8s-app": format!("etcd-manager-{etcd}")},
        "name": format!("etcd-manager-{etcd}"),
        "namespace": "kube-system",
    });
    if api_server_nodes {
        metadata["annotations"] = json!({"dns.alpha.kubernetes.io/internal": client_host});
    }
    // The spec's `manager.image` replaces etcd-manager's own image.
    let manager_image = manager
        .and_then(|m| m.image.clone())
        .filter(|i| !i.is_empty())
        .unwrap_or_else(|| format!("{registry}/etcd-manager/etcd-manager-slim:v3.0.20260707"));
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "containers": [{
                "args": args,
                "command": ["/go-runner"],
                "env": env,
                "image": crate::addons::remap_image(model, &manager_image),
                "name": "etcd-manager",
                "resources": {"requests": {
                    "cpu": spec.cpu_request.as_deref().unwrap_or("200m"),
                    "memory": spec.memory_request.as_deref().unwrap_or("100Mi"),
                }},
                "securityContext": {"privileged": true},
                "volumeMounts": mounts,
            }],
            "hostNetwork": true,
            "hostPID": true,
            "priorityClassName": "system-cluster-critical",
            "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
            "volumes": volumes,
        },
        "status": {},
    });
    kops_api::manifest::to_yaml(&pod)
}

/// etcd-manager's own variables from the spec's `manager`, in kops' order:
/// the daily backups' retention (kops' assignments make it 90 days when
/// the spec has none), the metrics and plain-HTTP client URLs, then the
/// user's `env` as given.
fn manager_env(manager: Option<&kops_api::cluster::EtcdManagerSpec>) -> Vec<Value> {
    let days = manager.and_then(|m| m.backup_retention_days).unwrap_or(90);
    let mut out =
        vec![json!({"name": "ETCD_MANAGER_DAILY_BACKUPS_RETENTION", "value": format!("{days}d")})];
    let Some(manager) = manager else {
        return out;
    };
    for (field, name) in [
        ("listenMetricsURLs", "ETCD_LISTEN_METRICS_URLS"),
        ("listenClientHTTPURLs", "ETCD_LISTEN_CLIENT_HTTP_URLS"),
    ] {
        let urls: Vec<&str> = manager
            .extra
            .get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !urls.is_empty() {
            out.push(json!({"name": name, "value": urls.join(",")}));
        }
    }
    for var in manager.env.iter().flatten() {
        out.push(json!({"name": var.name, "value": var.value.clone().unwrap_or_default()}));
    }
    out
}

/// How etcd-manager finds its volumes: by the tags (AWS) or labels
/// (Google Cloud: dashes, the cluster's name as a label value) kops puts
/// on the etcd disks.
fn volume_args(cluster: &Cluster, etcd: &str) -> Vec<Value> {
    let name = cluster.name();
    let args = if cluster.spec.cloud_provider.as_deref() == Some("gce") {
        vec![
            format!("--volume-name-tag=k8s-io-etcd-{etcd}"),
            "--volume-provider=gce".into(),
            format!(
                "--volume-tag=k8s-io-cluster-name={}",
                kops_api::names::gce_safe_cluster_name(name)
            ),
            format!("--volume-tag=k8s-io-etcd-{etcd}"),
            "--volume-tag=k8s-io-role-master=master".into(),
        ]
    } else {
        vec![
            format!("--volume-name-tag=k8s.io/etcd/{etcd}"),
            "--volume-provider=aws".into(),
            format!("--volume-tag=k8s.io/etcd/{etcd}"),
            "--volume-tag=k8s.io/role/control-plane=1".into(),
            format!("--volume-tag=kubernetes.io/cluster/{name}=owned"),
        ]
    };
    args.into_iter().map(Value::from).collect()
}

fn region_of(cluster: &Cluster) -> String {
    cluster.aws_region().unwrap_or_default()
}

fn healthcheck_manifest(cluster: &Cluster) -> String {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {},
        "spec": {
            "containers": [{
                "args": [
                    "--ca-cert=/secrets/ca.crt",
                    "--client-cert=/secrets/client.crt",
                    "--client-key=/secrets/client.key",
                ],
                "image": format!("{}/kops/kube-apiserver-healthcheck:{KOPS_VERSION}", registry(cluster)),
                "livenessProbe": {
                    "httpGet": {"host": "127.0.0.1", "path": "/.kube-apiserver-healthcheck/healthz", "port": 3990},
                    "initialDelaySeconds": 5,
                    "timeoutSeconds": 5,
                },
                "name": "healthcheck",
                "resources": {},
                "securityContext": {"runAsNonRoot": true, "runAsUser": 10012},
                "volumeMounts": [{"mountPath": "/secrets", "name": "healthcheck-secrets", "readOnly": true}],
            }],
            "volumes": [{
                "hostPath": {"path": "/etc/kubernetes/kube-apiserver-healthcheck/secrets", "type": "Directory"},
                "name": "healthcheck-secrets",
            }],
        },
        "status": {},
    });
    kops_api::manifest::to_yaml(&pod)
}

/// A container's `env` entries for (name, value) pairs, in their order.
fn env_list(vars: &[(String, String)]) -> Vec<Value> {
    vars.iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect()
}

fn channels_manifest(model: &Model<'_>, component_env: &[(String, String)]) -> String {
    let cluster = model.cluster;
    // kops' order: the pod's own variables, then the system-component
    // ones sorted by name.
    let mut env = vec![
        json!({"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}),
        json!({"name": "KUBECONFIG", "value": "/var/lib/kops/kubeconfig"}),
        json!({"name": "HOME", "value": "/tmp"}),
    ];
    env.extend(env_list(component_env));
    // The bootstrap channel, then the cluster's own addon channels
    // (`spec.addons[].manifest`), as kops lists them.
    let mut args: Vec<Value> = [
        "apply",
        "channel",
        "--v=4",
        "--yes",
        "--interval=1m0s",
        "--node-labels=node-role.kubernetes.io/control-plane",
        "--node-name=$(NODE_NAME)",
    ]
    .iter()
    .map(|a| json!(a))
    .collect();
    // As kops writes the joined path: bare for a local directory.
    args.push(json!(kops_api::store_path::join(
        model.config_base,
        "addons/bootstrap-channel.yaml"
    )));
    for addon in cluster.spec.addons.iter().flatten() {
        args.push(json!(addon.manifest));
    }
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "labels": {"k8s-app": "kops-channels"},
            "name": "kops-channels",
            "namespace": "kube-system",
        },
        "spec": {
            "containers": [{
                "args": args,
                "env": env,
                "image": format!("{}/kops/channels:{KOPS_VERSION}", registry(cluster)),
                "name": "kops-channels",
                "readinessProbe": {
                    "failureThreshold": 2,
                    "httpGet": {"host": "127.0.0.1", "path": "/readyz", "port": 3986},
                    "initialDelaySeconds": 30,
                    "periodSeconds": 10,
                },
                "resources": {"requests": {"cpu": "50m", "memory": "50Mi"}},
                "securityContext": {"runAsNonRoot": true, "runAsUser": 10013},
                "volumeMounts": [{"mountPath": "/var/lib/kops/kubeconfig", "name": "kubeconfig", "readOnly": true}],
            }],
            "dnsPolicy": "Default",
            "hostNetwork": true,
            "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
            "volumes": [{"hostPath": {"path": "/var/lib/kops/kubeconfig", "type": "File"}, "name": "kubeconfig"}],
        },
        "status": {},
    });
    kops_api::manifest::to_yaml(&pod)
}

/// The OIDC documents published to `spec.serviceAccountIssuerDiscovery.discoveryStore`
/// (none without one): `discovery.json` at `.well-known/openid-configuration`
/// and `keys.json` at `openid/v1/jwks`, the public keys of the
/// `service-account` keyset's trusted certificates (`certificates`, PEM).
/// Objects in an S3 store whose URL is the issuer are public-read, as kops
/// makes them when the bucket itself is not public (which kops-rs, offline,
/// does not check).
pub fn discovery_files(
    model: &Model<'_>,
    region: &str,
    certificates: &[String],
) -> Result<Vec<StateFile>, crate::ModelError> {
    use crate::iam::irsa;
    let Some(store) = irsa::discovery_store(model) else {
        return Ok(Vec::new());
    };
    let issuer = irsa::service_account_issuer(model, region);
    let public = store.starts_with("s3://")
        && irsa::discovery_store_url(store, region, model.ipv6_only()).as_deref()
            == Some(issuer.as_str());
    let mut keys = Vec::new();
    for (index, pem) in certificates.iter().enumerate() {
        let key = jwk_of_certificate(pem).map_err(|message| crate::ModelError::Spec {
            path: format!("keyset `service-account`, certificate {index}"),
            message,
            hint: "the service-account keyset must hold RSA certificates; `kops create keypair service-account` makes a new one".into(),
        })?;
        keys.extend(key);
    }
    keys.sort_by(|a, b| a.kid.cmp(&b.kid));
    let mut files = vec![
        StateFile::new(
            "discovery.json",
            ".well-known/openid-configuration",
            irsa::discovery_document(&issuer),
        ),
        StateFile::new("keys.json", "openid/v1/jwks", jwks_document(&keys)),
    ];
    for file in &mut files {
        file.base = Some(store.trim_end_matches('/').to_string());
        if public {
            file.acl = Some("public-read".into());
        }
    }
    Ok(files)
}

/// The node config and bootstrap script (`nodeupscript.sh`, the user data
/// Karpenter gives the instances it launches) of each group Karpenter manages.
pub fn karpenter_files(model: &Model<'_>) -> Result<Vec<StateFile>, crate::ModelError> {
    let mut files = Vec::new();
    for (index, group) in model.groups.iter().enumerate() {
        if group.spec.manager.as_deref() != Some("Karpenter") {
            continue;
        }
        let error = |e: kops_nodeup::config::ConfigError| {
            let text = e.to_string();
            let (message, hint) = text.split_once("\nhint: ").unwrap_or((&text, ""));
            crate::ModelError::Spec {
                path: format!("instanceGroups[{index}]"),
                message: message.to_string(),
                hint: hint.to_string(),
            }
        };
        let inputs = model.node_inputs();
        let Some(rendered) = kops_nodeup::config::rendered_with_inputs(
            model.cluster,
            group,
            model.config_base,
            &inputs,
        )
        .map_err(error)?
        else {
            continue;
        };
        let script = kops_nodeup::bootstrap::user_data_with(
            model.cluster,
            group,
            model.config_base,
            &inputs,
        )
        .map_err(error)?;
        let dir = rendered
            .path
            .rsplit_once('/')
            .map(|(d, _)| d.to_string())
            .unwrap_or_default();
        files.push(StateFile::new(
            format!("nodeupconfig-{}", group.name()),
            rendered.path.clone(),
            rendered.yaml,
        ));
        files.push(StateFile::new(
            format!("nodeupscript-{}", group.name()),
            format!("{dir}/nodeupscript.sh"),
            script,
        ));
    }
    Ok(files)
}

/// One signing key of the JWKS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    /// base64url(SHA-256(DER SubjectPublicKeyInfo)), as kops and
    /// Kubernetes compute it.
    pub kid: String,
    /// base64url of the RSA modulus and exponent (big-endian, no padding).
    pub n: String,
    pub e: String,
}

/// The JWKS document, laid out as kops writes it.
pub fn jwks_document(keys: &[Jwk]) -> String {
    if keys.is_empty() {
        return "{\n\"keys\": null\n}".to_string();
    }
    let items: Vec<String> = keys
        .iter()
        .map(|k| {
            format!(
                "{{\n\"use\": \"sig\",\n\"kty\": \"RSA\",\n\"kid\": {},\n\"alg\": \"RS256\",\n\"n\": {},\n\"e\": {}\n}}",
                Value::String(k.kid.clone()),
                Value::String(k.n.clone()),
                Value::String(k.e.clone())
            )
        })
        .collect();
    format!("{{\n\"keys\": [\n{}\n]\n}}", items.join(",\n"))
}

/// The signing key of a `service-account` certificate (PEM); `None` for a
/// certificate of another subject, which kops leaves out.
pub fn jwk_of_certificate(pem: &str) -> Result<Option<Jwk>, String> {
    use base64::Engine;
    let body: String = pem
        .lines()
        .map(str::trim)
        .skip_while(|l| !l.starts_with("-----BEGIN CERTIFICATE"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body.as_bytes())
        .map_err(|e| format!("not a PEM certificate: {e}"))?;
    let certificate = der::read(&der).ok_or("not a DER certificate")?;
    let tbs = der::read(certificate.content).ok_or("no TBSCertificate")?;
    let mut rest = tbs.content;
    let mut fields = Vec::new();
    while let Some(item) = der::read(rest) {
        rest = &rest[item.len..];
        fields.push(item);
    }
    // [0] version is optional; then serial, signature, issuer, validity,
    // subject, subjectPublicKeyInfo.
    let offset = usize::from(fields.first().is_some_and(|f| f.tag == 0xa0));
    let (Some(subject), Some(spki)) = (fields.get(offset + 4), fields.get(offset + 5)) else {
        return Err("the certificate has no subject or public key".into());
    };
    if der::common_name(subject.content).as_deref() != Some("service-account") {
        return Ok(None);
    }
    let algorithm = der::read(spki.content).ok_or("no key algorithm")?;
    let bits = der::read(&spki.content[algorithm.len..]).ok_or("no public key")?;
    let key = bits.content.get(1..).ok_or("empty public key")?; // unused-bits byte
    let rsa = der::read(key).ok_or("not an RSA public key")?;
    let modulus = der::read(rsa.content).ok_or("no modulus")?;
    let exponent = der::read(&rsa.content[modulus.len..]).ok_or("no exponent")?;
    let unsigned = |b: &[u8]| -> Vec<u8> {
        let start = b.iter().position(|x| *x != 0).unwrap_or(b.len());
        b[start..].to_vec()
    };
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    Ok(Some(Jwk {
        kid: url.encode(Sha256::digest(&spki.raw[..spki.len])),
        n: url.encode(unsigned(modulus.content)),
        e: url.encode(unsigned(exponent.content)),
    }))
}

/// Just enough DER to find a certificate's subject and RSA public key.
mod der {
    pub struct Item<'a> {
        pub tag: u8,
        pub content: &'a [u8],
        /// The whole item (header and content) starts at `raw[0]`.
        pub raw: &'a [u8],
        /// Header and content length.
        pub len: usize,
    }

    pub fn read(bytes: &[u8]) -> Option<Item<'_>> {
        let tag = *bytes.first()?;
        let first = *bytes.get(1)? as usize;
        let (length, header) = if first < 0x80 {
            (first, 2)
        } else {
            let count = first & 0x7f;
            if count == 0 || count > 4 {
                return None;
            }
            let mut length = 0usize;
            for i in 0..count {
                length = (length << 8) | *bytes.get(2 + i)? as usize;
            }
            (length, 2 + count)
        };
        let end = header.checked_add(length)?;
        let content = bytes.get(header..end)?;
        Some(Item {
            tag,
            content,
            raw: bytes,
            len: end,
        })
    }

    /// The commonName (2.5.4.3) of a Name's content.
    pub fn common_name(name: &[u8]) -> Option<String> {
        const CN: [u8; 3] = [0x55, 0x04, 0x03];
        let mut sets = name;
        while let Some(set) = read(sets) {
            sets = &sets[set.len..];
            let mut attributes = set.content;
            while let Some(attribute) = read(attributes) {
                attributes = &attributes[attribute.len..];
                let oid = read(attribute.content)?;
                if oid.tag == 0x06 && oid.content == CN {
                    let value = read(&attribute.content[oid.len..])?;
                    return String::from_utf8(value.content.to_vec()).ok();
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::tests::{conformance_case, load, model};

    /// kops 1.37's bytes with a custom S3 state store: the `S3_*` variables
    /// sorted after AWS_REGION, before etcd-manager's own, and after the
    /// pod's own in kops-channels; without them, AWS_REGION alone.
    #[test]
    fn component_env_carries_custom_s3_variables() {
        let (cluster, groups) = load(crate::security::tests::PUBLIC);
        let m = model(&cluster, &groups);
        let vars = |name: &str| {
            match name {
                "S3_ENDPOINT" => Some("http://127.0.0.1:45261"),
                "S3_REGION" => Some("us-east-1"),
                "S3_ACCESS_KEY_ID" | "S3_SECRET_ACCESS_KEY" => Some("test"),
                _ => None,
            }
            .map(str::to_string)
        };
        let env_of = |lookup: &dyn Fn(&str) -> Option<String>| {
            kops_api::env::forwarded_env(
                kops_api::env::EnvTarget::SystemComponent,
                Some("us-east-1"),
                lookup,
            )
        };
        let s3 = "- name: AWS_REGION\n      value: us-east-1\n\
                  \x20   - name: S3_ACCESS_KEY_ID\n      value: test\n\
                  \x20   - name: S3_ENDPOINT\n      value: http://127.0.0.1:45261\n\
                  \x20   - name: S3_REGION\n      value: us-east-1\n\
                  \x20   - name: S3_SECRET_ACCESS_KEY\n      value: test\n";
        let plain = "- name: AWS_REGION\n      value: us-east-1\n";
        let retention = "    - name: ETCD_MANAGER_DAILY_BACKUPS_RETENTION\n";
        let main = kops_api::cluster::EtcdClusterSpec {
            name: "main".into(),
            manager: Some(kops_api::cluster::EtcdManagerSpec {
                backup_retention_days: Some(90),
                ..Default::default()
            }),
            ..Default::default()
        };
        let etcd = etcd_manager_manifest(&m, &main, 0, &env_of(&vars));
        assert!(
            etcd.contains(&format!("    env:\n    {s3}{retention}")),
            "{etcd}"
        );
        let etcd = etcd_manager_manifest(&m, &main, 0, &env_of(&|_| None));
        assert!(
            etcd.contains(&format!("    env:\n    {plain}{retention}")),
            "{etcd}"
        );
        let channels = channels_manifest(&m, &env_of(&vars));
        assert!(
            channels.contains(&format!("      value: /tmp\n    {s3}    image:")),
            "{channels}"
        );
        let channels = channels_manifest(&m, &env_of(&|_| None));
        assert!(
            channels.contains(&format!("      value: /tmp\n    {plain}    image:")),
            "{channels}"
        );
    }

    /// The bootstrap channel's addon entries for `cluster` and `groups`.
    fn channel_addons(cluster: &Cluster, groups: &[InstanceGroup]) -> Vec<Value> {
        let m = model(cluster, groups);
        let files = state_files(&m, "", Vec::new()).unwrap();
        let channel = files
            .iter()
            .find(|f| f.path == "addons/bootstrap-channel.yaml")
            .unwrap();
        let channel: Value = serde_yaml_ng::from_slice(&channel.contents).unwrap();
        channel["spec"]["addons"].as_array().unwrap().clone()
    }

    /// The channel entry of the network plugin of `cluster` (`addons`'
    /// small cluster with `networking` replaced).
    fn network_entry(networking: &str) -> Value {
        let (cluster, groups) = crate::addons::tests::cluster();
        let mut cluster = cluster;
        cluster.spec.networking = Some(serde_yaml_ng::from_str(networking).unwrap());
        channel_addons(&cluster, &groups)
            .into_iter()
            .find(|a| a["name"].as_str().unwrap().starts_with("networking."))
            .unwrap_or_else(|| panic!("no network plugin for {networking}"))
    }

    /// kops' channel for each network plugin it offers on AWS, including
    /// those kops' suite has no AWS case of (Calico, kube-router): which
    /// prune their leftovers, which roll every node, which need a CA. A
    /// channel that differs here is rewritten on every cluster kops made.
    #[test]
    fn network_plugins_are_listed_as_kops_lists_them() {
        for (networking, name, prunes, rolls, pki) in [
            (
                "calico: {}",
                "networking.projectcalico.org",
                true,
                None,
                false,
            ),
            ("flannel: {}", "networking.flannel", true, None, false),
            ("kopeio: {}", "networking.kope.io", true, None, false),
            (
                "kuberouter: {}",
                "networking.kuberouter",
                false,
                None,
                false,
            ),
            (
                "amazonvpc: {}",
                "networking.amazon-vpc-routed-eni",
                false,
                Some("all"),
                false,
            ),
            (
                "kindnet: {}",
                "networking.kindnet",
                false,
                Some("all"),
                false,
            ),
            (
                "cilium: {}",
                "networking.cilium.io",
                false,
                Some("all"),
                false,
            ),
            (
                "cilium: {hubble: {enabled: true}}",
                "networking.cilium.io",
                false,
                Some("all"),
                true,
            ),
        ] {
            let entry = network_entry(networking);
            assert_eq!(entry["name"], name, "{networking}");
            assert_eq!(
                entry.get("prune").is_some(),
                prunes,
                "{networking}: {entry}"
            );
            assert_eq!(
                entry.get("needsRollingUpdate").and_then(Value::as_str),
                rolls,
                "{networking}: {entry}"
            );
            assert_eq!(
                entry.get("needsPKI").is_some(),
                pki,
                "{networking}: {entry}"
            );
            assert_eq!(
                entry["selector"],
                json!({"role.kubernetes.io/networking": "1"})
            );
        }
    }

    /// gVisor's RuntimeClass as kops 1.37.0-alpha.1 wrote it for a cluster
    /// with one gVisor worker group (`update cluster --target terraform`
    /// on moto, `data/aws_s3_object_<cluster>-addons-gvisor...`), and its
    /// channel entry there. The `kops` binary's test `gvisor_kops` compares
    /// with a live kops when one is built.
    const KOPS_GVISOR_MANIFEST: &str = "apiVersion: node.k8s.io/v1\nhandler: runsc\nkind: RuntimeClass\nmetadata:\n  labels:\n    addon.kops.k8s.io/name: gvisor.addons.k8s.io\n    app.kubernetes.io/managed-by: kops\n    k8s-addon: gvisor.addons.k8s.io\n  name: gvisor\nscheduling:\n  nodeSelector:\n    kops.k8s.io/gvisor: \"1\"";
    const KOPS_GVISOR_HASH: &str =
        "2517c2feb8936012e2b57c9196a2d8a552a57832b48b6dca76b91150c907db5b";

    #[test]
    fn gvisor_addon_is_listed_and_rendered_as_kops_does() {
        let (cluster, mut groups) = crate::addons::tests::cluster();
        let listed = |groups: &[InstanceGroup]| channel_addons(&cluster, groups);
        let gvisor_entry = |entries: &[Value]| {
            entries
                .iter()
                .position(|a| a["name"] == "gvisor.addons.k8s.io")
        };
        assert_eq!(gvisor_entry(&listed(&groups)), None, "no group runs it");

        let mut sandboxed = InstanceGroup::new(cluster.name(), "sandboxed", Role::Node);
        sandboxed.spec.containerd =
            Some(serde_json::from_value(json!({"gvisor": {"enabled": true}})).unwrap());
        groups.push(sandboxed.clone());
        let entries = listed(&groups);
        let at = gvisor_entry(&entries).expect("listed");
        assert_eq!(
            entries[at],
            json!({
                "id": "k8s-1.20",
                "manifest": "gvisor.addons.k8s.io/k8s-1.20.yaml",
                "manifestHash": KOPS_GVISOR_HASH,
                "name": "gvisor.addons.k8s.io",
                "selector": {"k8s-addon": "gvisor.addons.k8s.io"},
            })
        );
        // kops' order: after the termination handler, before the storage classes.
        let name = |i: usize| entries[i]["name"].as_str().unwrap().to_string();
        assert_eq!(name(at - 1), "node-termination-handler.aws");
        assert_eq!(name(at + 1), "storage-aws.addons.k8s.io");

        let m = model(&cluster, &groups);
        let manifest = crate::addons::manifest(&m, "gvisor.addons.k8s.io")
            .unwrap()
            .unwrap();
        assert_eq!(manifest.trim(), KOPS_GVISOR_MANIFEST);

        // Only workers run it: the same block on a control-plane group lists nothing.
        sandboxed.spec.role = Some("Master".into());
        let last = groups.len() - 1;
        groups[last] = sandboxed;
        assert_eq!(gvisor_entry(&listed(&groups)), None);
    }

    /// A 512-bit self-signed `CN=service-account` certificate made for this
    /// test (openssl); its key id and modulus were computed with openssl.
    const SERVICE_ACCOUNT_PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIBizCCATWgAwIBAgIUI89fTNOgnukKDc8OtMSsdnEB1WowDQYJKoZIhvcNAQEL\nBQAwGjEYMBYGA1UEAwwPc2VydmljZS1hY2NvdW50MB4XDTI2MTEyMjA5MDc0M1oX\nDTM2MTExOTA5MDc0M1owGjEYMBYGA1UEAwwPc2VydmljZS1hY2NvdW50MFwwDQYJ\nKoZIhvcNAQEBBQADSwAwSAJBANsuSyaqBizj7IQsgq73V7PMvJTJQ4dWgI1v272/\nvxHH/Lb6u0YCbIf6gTY6PcMQPo8rucuzW+KluRV+VIBnkG8CAwEAAaNTMFEwHQYD\nVR0OBBYEFNKfz+vUgK4oAZNXidsh2O843Is0MB8GA1UdIwQYMBaAFNKfz+vUgK4o\nAZNXidsh2O843Is0MA8GA1UdEwEB/wQFMAMBAf8wDQYJKoZIhvcNAQELBQADQQA2\n2tKrn9iWRgJ7OJfjs1SQg9MqUqdyZOeubWmtKCP0PmRXeiC8ZjeVZvCXwLzqruwI\n5n1rqDvV1MSWKWVKsio/\n-----END CERTIFICATE-----";
    const OTHER_PEM: &str = "-----BEGIN CERTIFICATE-----\nMIICDDCCAXWgAwIBAgIUAhnrlOHlEHgK4rLV49n08d89mSMwDQYJKoZIhvcNAQEL\nBQAwGDEWMBQGA1UEAwwNa3ViZXJuZXRlcy1jYTAeFw0yNjExMjIwOTA3NDNaFw0z\nNjExMTkwOTA3NDNaMBgxFjAUBgNVBAMMDWt1YmVybmV0ZXMtY2EwgZ8wDQYJKoZI\nhvcNAQEBBQADgY0AMIGJAoGBAMFUqjUZF5Mj/aI/CkZg0RSg23se2N2201CytFDI\n0Lc0uwmHKfVtT9pIegKLrfe2h6rjCG/v/iWA5nb4hJiH2tXRJfVk9y0LyhWO/JgU\nTLo1yjZgWLqy+rptHxiILABKMg+/7wupsCft1keFVglGifu4rHybOs0sv1VdngJp\nx1UhAgMBAAGjUzBRMB0GA1UdDgQWBBQVQPFiy0KW1aeNI8gL69AEz0he/TAfBgNV\nHSMEGDAWgBQVQPFiy0KW1aeNI8gL69AEz0he/TAPBgNVHRMBAf8EBTADAQH/MA0G\nCSqGSIb3DQEBCwUAA4GBAAvx6pUJrNZwKO/1DRXu4RObrwxtJBzPd8UCBk7vV5G6\nihbIFvM1vaQObC0wQ4n5aP9JKi1rPLgJcdDLSE3ofjWMaG6ElPWrCuKu7dKRUvOb\nWPZlGl5xo5SBmp81AmRzpvKiO3WOgL3+NIR4kEkG0e4Gs2Rze55US/GqOcyt8Mxb\n-----END CERTIFICATE-----";

    #[test]
    fn jwks_has_the_service_account_keys_only() {
        let key = jwk_of_certificate(SERVICE_ACCOUNT_PEM).unwrap().unwrap();
        assert_eq!(key.kid, "Nb2JROYFMp3lFSzPawr_ArJRaAl-7FAzgMtAiA99TOM");
        assert_eq!(
            key.n,
            "2y5LJqoGLOPshCyCrvdXs8y8lMlDh1aAjW_bvb-_Ecf8tvq7RgJsh_qBNjo9wxA-jyu5y7Nb4qW5FX5UgGeQbw"
        );
        assert_eq!(key.e, "AQAB");
        assert_eq!(jwk_of_certificate(OTHER_PEM).unwrap(), None);
        assert!(
            jwk_of_certificate("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----")
                .is_err()
        );
        let doc = jwks_document(&[key]);
        let value: Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(value["keys"][0]["alg"], "RS256");
        assert!(
            doc.starts_with("{\n\"keys\": [\n{\n\"use\": \"sig\",\n\"kty\": \"RSA\",\n\"kid\": ")
        );
    }

    #[test]
    fn discovery_and_karpenter_files_match_kops_names_and_paths() {
        let Some(dir) = conformance_case("karpenter") else {
            return;
        };
        let yaml = std::fs::read_to_string(dir.join("in-v1alpha2.yaml")).unwrap();
        let (cluster, groups) = load(&yaml);
        let mut m = model(&cluster, &groups);
        let base = "memfs://clusters.example.com/minimal.example.com";
        m.config_base = base;
        let pems = [SERVICE_ACCOUNT_PEM.to_string(), OTHER_PEM.to_string()];
        let files = discovery_files(&m, "us-test-1", &pems).unwrap();
        let names: Vec<(&str, &str)> = files
            .iter()
            .map(|f| (f.name.as_str(), f.path.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("discovery.json", ".well-known/openid-configuration"),
                ("keys.json", "openid/v1/jwks")
            ]
        );
        assert!(files.iter().all(|f| f.base.as_deref()
            == Some("memfs://discovery.example.com/minimal.example.com")
            && f.acl.is_none()));
        let keys: Value = serde_json::from_slice(&files[1].contents).unwrap();
        assert_eq!(keys["keys"].as_array().unwrap().len(), 1);

        let karpenter = karpenter_files(&m).unwrap();
        let names: Vec<(&str, &str)> = karpenter
            .iter()
            .map(|f| (f.name.as_str(), f.path.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                (
                    "nodeupconfig-karpenter-nodes-single-machinetype",
                    "igconfig/node/karpenter-nodes-single-machinetype/nodeupconfig.yaml"
                ),
                (
                    "nodeupscript-karpenter-nodes-single-machinetype",
                    "igconfig/node/karpenter-nodes-single-machinetype/nodeupscript.sh"
                ),
                (
                    "nodeupconfig-karpenter-nodes-default",
                    "igconfig/node/karpenter-nodes-default/nodeupconfig.yaml"
                ),
                (
                    "nodeupscript-karpenter-nodes-default",
                    "igconfig/node/karpenter-nodes-default/nodeupscript.sh"
                ),
            ]
        );
        assert!(String::from_utf8_lossy(&karpenter[1].contents).starts_with("#!/bin/bash"));
    }

    #[test]
    fn an_s3_discovery_store_is_public_read() {
        let Some(dir) = conformance_case("vfs-said") else {
            return;
        };
        let yaml = std::fs::read_to_string(dir.join("in-v1alpha2.yaml"))
            .unwrap()
            .replace(
                "discoveryStore: memfs://discovery.example.com/minimal.example.com",
                "discoveryStore: s3://oidc-store/minimal.example.com",
            );
        let (cluster, groups) = load(&yaml);
        let m = model(&cluster, &groups);
        let files = discovery_files(&m, "eu-west-1", &[]).unwrap();
        assert!(files
            .iter()
            .all(|f| f.acl.as_deref() == Some("public-read")));
        assert_eq!(
            String::from_utf8_lossy(&files[1].contents),
            "{\n\"keys\": null\n}"
        );
        assert!(String::from_utf8_lossy(&files[0].contents).contains(
            "\"issuer\": \"https://oidc-store.s3.eu-west-1.amazonaws.com/minimal.example.com\""
        ));
    }
}
