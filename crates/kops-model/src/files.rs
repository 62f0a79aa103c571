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
        }
    }
}

/// The version kops-rs writes to `kops-version.txt`.
pub const KOPS_RS_VERSION: &str = env!("CARGO_PKG_VERSION");

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
) -> Vec<StateFile> {
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
            format!("{KOPS_RS_VERSION}\n"),
        ),
    ];
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
            let manifest = etcd_manager_manifest(
                model,
                &etcd.name,
                index,
                etcd.cpu_request.as_deref(),
                etcd.memory_request.as_deref(),
            );
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
        channels_manifest(model),
    ));

    let addons = addons(model);
    let mut entries = Vec::new();
    for addon in &addons {
        let contents = if addon.empty {
            String::new()
        } else {
            format!(
                "# {}: this addon's manifest is not rendered by kops-rs yet.\n",
                addon.key
            )
        };
        let hash = hex(&Sha256::digest(contents.as_bytes()));
        let mut entry = serde_json::Map::new();
        if !addon.id.is_empty() {
            entry.insert("id".into(), Value::String(addon.id.to_string()));
        }
        entry.insert("manifest".into(), Value::String(addon.location()));
        entry.insert("manifestHash".into(), Value::String(hash));
        entry.insert("name".into(), Value::String(addon.key.to_string()));
        if addon.key == "kops-controller.addons.k8s.io" {
            entry.insert(
                "needsRollingUpdate".into(),
                Value::String("control-plane".into()),
            );
        }
        entry.insert("selector".into(), json!({"k8s-addon": addon.key}));
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
    files
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

impl Addon {
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

/// The addons kops puts in the bootstrap channel of an AWS cluster, in its order.
pub fn addons(model: &Model<'_>) -> Vec<Addon> {
    let spec = &model.cluster.spec;
    let mut out = vec![
        Addon::new("kops-controller.addons.k8s.io", "k8s-1.16"),
        Addon::new("coredns.addons.k8s.io", "k8s-1.12"),
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
    if enabled(spec.cluster_autoscaler.as_ref().and_then(|c| c.enabled)) {
        out.push(Addon::new("cluster-autoscaler.addons.k8s.io", "k8s-1.15"));
    }
    if enabled(spec.metrics_server.as_ref().and_then(|c| c.enabled)) {
        out.push(Addon::new("metrics-server.addons.k8s.io", "k8s-1.11"));
    }
    if enabled(spec.cert_manager.as_ref().and_then(|c| c.enabled)) {
        out.push(Addon::new("certmanager.io", "k8s-1.16"));
    }
    let karpenter = enabled(spec.karpenter.as_ref().and_then(|k| k.enabled));
    let nth = spec
        .node_termination_handler
        .as_ref()
        .and_then(|n| n.enabled)
        .unwrap_or(!karpenter);
    if nth {
        out.push(Addon::new("node-termination-handler.aws", "k8s-1.11"));
    }
    if enabled(spec.node_problem_detector.as_ref().and_then(|c| c.enabled)) {
        out.push(Addon::new(
            "node-problem-detector.addons.k8s.io",
            "k8s-1.17",
        ));
    }
    let nvidia = model.groups.iter().any(|g| {
        g.spec
            .extra
            .get("containerd")
            .and_then(|c| c.get("nvidiaGPU"))
            .and_then(|n| n.get("enabled"))
            .and_then(Value::as_bool)
            == Some(true)
    }) || spec
        .containerd
        .as_ref()
        .and_then(|c| serde_json::to_value(c).ok())
        .and_then(|c| {
            c.get("nvidiaGPU")
                .and_then(|n| n.get("enabled"))
                .and_then(Value::as_bool)
        })
        == Some(true);
    if nvidia {
        out.push(Addon::new("nvidia.addons.k8s.io", "k8s-1.16"));
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
    let manage_storage = spec
        .extra
        .get("cloudConfig")
        .and_then(|c| c.get("manageStorageClasses"))
        .and_then(Value::as_bool)
        .unwrap_or(true);
    if manage_storage {
        out.push(Addon::new("storage-aws.addons.k8s.io", "v1.15.0"));
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
    out.push(Addon::new("aws-cloud-controller.addons.k8s.io", "k8s-1.18"));
    out.push(Addon::new("aws-ebs-csi-driver.addons.k8s.io", "k8s-1.17"));
    if enabled(spec.snapshot_controller.as_ref().and_then(|c| c.enabled)) {
        out.push(Addon::new("snapshot-controller.addons.k8s.io", "k8s-1.20"));
    }
    if karpenter {
        out.push(Addon::new("karpenter.sh", "k8s-1.19"));
    }
    out
}

/// The ports of an etcd cluster: kops' fixed ones for `main` and `events`,
/// others after them.
fn etcd_ports(name: &str, index: usize) -> (u32, u32, u32, u32) {
    match name {
        "main" => (3996, 4001, 3994, 2380),
        "events" => (3997, 4002, 3995, 2381),
        _ => {
            let i = index as u32;
            (3998 + i, 4003 + i, 3992u32.saturating_sub(i), 2382 + i)
        }
    }
}

/// The etcd versions etcd-manager can run, mounted from the image of the
/// latest patch of each minor.
const ETCD_MINORS: [(&str, u32); 3] = [("3.5", 31), ("3.6", 12), ("3.7", 0)];

fn etcd_manager_manifest(
    model: &Model<'_>,
    etcd: &str,
    index: usize,
    cpu: Option<&str>,
    memory: Option<&str>,
) -> String {
    let cluster = model.cluster;
    let name = model.name();
    let (grpc, client, quarantine, peer) = etcd_ports(etcd, index);
    let cluster_name = if etcd == "main" {
        "etcd".to_string()
    } else {
        format!("etcd-{etcd}")
    };
    let log = if etcd == "main" {
        "/var/log/etcd.log".to_string()
    } else {
        format!("/var/log/etcd-{etcd}.log")
    };
    let registry = registry(cluster);
    let region = region_of(cluster);
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
    for (minor, last) in ETCD_MINORS {
        let volume = format!("etcd-v{}-{last}", minor.replace('.', "-"));
        for patch in 0..=last {
            mounts
                .push(json!({"mountPath": format!("/opt/etcd-v{minor}.{patch}"), "name": volume}));
        }
        volumes.push(json!({
            "image": {"pullPolicy": "IfNotPresent", "reference": format!("{registry}/etcd:v{minor}.{last}")},
            "name": volume,
        }));
    }
    mounts.push(json!({"mountPath": log, "name": "varlogetcd"}));
    volumes.push(json!({"hostPath": {"path": log, "type": "FileOrCreate"}, "name": "varlogetcd"}));
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "labels": {"k8s-app": format!("etcd-manager-{etcd}")},
            "name": format!("etcd-manager-{etcd}"),
            "namespace": "kube-system",
        },
        "spec": {
            "containers": [{
                "args": [
                    format!("--log-file={log}"),
                    "--also-stdout",
                    "/ko-app/etcd-manager",
                    format!("--backup-store={}/backups/etcd/{etcd}", model.config_base),
                    format!("--client-urls=https://__name__:{client}"),
                    format!("--cluster-name={cluster_name}"),
                    "--containerized=true",
                    format!("--dns-suffix=.internal.{name}"),
                    format!("--grpc-port={grpc}"),
                    format!("--peer-urls=https://__name__:{peer}"),
                    format!("--quarantine-client-urls=https://__name__:{quarantine}"),
                    "--v=6",
                    format!("--volume-name-tag=k8s.io/etcd/{etcd}"),
                    "--volume-provider=aws",
                    format!("--volume-tag=k8s.io/etcd/{etcd}"),
                    "--volume-tag=k8s.io/role/control-plane=1",
                    format!("--volume-tag=kubernetes.io/cluster/{name}=owned"),
                ],
                "command": ["/go-runner"],
                "env": [
                    {"name": "AWS_REGION", "value": region},
                    {"name": "ETCD_MANAGER_DAILY_BACKUPS_RETENTION", "value": "90d"},
                ],
                "image": format!("{registry}/etcd-manager/etcd-manager-slim:v3.0.20260707"),
                "name": "etcd-manager",
                "resources": {"requests": {
                    "cpu": cpu.unwrap_or(if etcd == "main" { "200m" } else { "100m" }),
                    "memory": memory.unwrap_or("100Mi"),
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

fn region_of(cluster: &Cluster) -> String {
    cluster
        .spec
        .subnets
        .iter()
        .flatten()
        .filter_map(|s| s.zone.as_deref())
        .find_map(kops_api::new_cluster::aws_zone_region)
        .unwrap_or_default()
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
                "image": format!("{}/kops/kube-apiserver-healthcheck:{KOPS_RS_VERSION}", registry(cluster)),
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

fn channels_manifest(model: &Model<'_>) -> String {
    let cluster = model.cluster;
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
                "args": [
                    "apply", "channel", "--v=4", "--yes", "--interval=1m0s",
                    "--node-labels=node-role.kubernetes.io/control-plane",
                    "--node-name=$(NODE_NAME)",
                    format!("{}/addons/bootstrap-channel.yaml", model.config_base),
                ],
                "env": [
                    {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "KUBECONFIG", "value": "/var/lib/kops/kubeconfig"},
                    {"name": "HOME", "value": "/tmp"},
                    {"name": "AWS_REGION", "value": region_of(cluster)},
                ],
                "image": format!("{}/kops/channels:{KOPS_RS_VERSION}", registry(cluster)),
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
