//! The contents of the node's files: unpacked assets, containerd and
//! kubelet configuration, systemd units, sysctls, kubeconfigs, and on
//! control-plane nodes the static pods and their certificates.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;

use kops_api::Role;
use kops_pki::{CertificateUsage, IssueRequest};
use serde_json::{json, Value};

use super::files::{Change, ChangeKind, PlannedFile};
use super::pki::Keystore;
use super::{Loaded, NodeupError, ServiceAction};
use crate::assets::{Asset, AssetKind};
use crate::config::{ControlPlaneConfig, Settings};

/// What the renderers read.
pub struct Context<'a> {
    pub loaded: &'a Loaded,
    pub node_name: &'a str,
    pub node_ip: Option<&'a str>,
    pub region: Option<&'a str>,
    pub root: &'a Path,
    /// On a vSphere control-plane VM: its etcd disks (guestinfo).
    pub etcd_disks: &'a [kops_vsphere::disks::EtcdDisk],
}

/// The files an asset installs.
pub fn install_asset(
    kind: AssetKind,
    asset: &Asset,
    bytes: &[u8],
) -> Result<Vec<PlannedFile>, NodeupError> {
    if let Some(path) = kind.install_path() {
        return Ok(vec![PlannedFile::new(path, 0o755, bytes.to_vec())]);
    }
    let unpack = |reason: String| NodeupError::Unpack {
        asset: kind.as_str().to_string(),
        url: asset.urls[0].clone(),
        reason,
    };
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut out = Vec::new();
    for entry in archive.entries().map_err(|e| unpack(e.to_string()))? {
        let mut entry = entry.map_err(|e| unpack(e.to_string()))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry
            .path()
            .map_err(|e| unpack(e.to_string()))?
            .to_string_lossy()
            .into_owned();
        let path = path.trim_start_matches("./");
        let Some(name) = path.rsplit('/').next().filter(|n| !n.is_empty()) else {
            continue;
        };
        let target = match kind {
            // containerd-<v>-linux-<arch>.tar.gz: bin/containerd, bin/ctr, ...
            AssetKind::Containerd if path.starts_with("bin/") => {
                format!("/usr/local/bin/{name}")
            }
            AssetKind::CniPlugins if !path.contains('/') => format!("/opt/cni/bin/{name}"),
            _ => continue,
        };
        let mut contents = Vec::new();
        entry
            .read_to_end(&mut contents)
            .map_err(|e| unpack(e.to_string()))?;
        out.push(PlannedFile::new(target, 0o755, contents));
    }
    if out.is_empty() {
        return Err(unpack(
            "the archive holds none of the expected files".into(),
        ));
    }
    Ok(out)
}

/// The keysets a role reads.
pub fn keyset_names(loaded: &Loaded) -> Vec<String> {
    let mut names = vec!["kubernetes-ca".to_string()];
    if matches!(loaded.role, Role::ControlPlane | Role::ApiServer) {
        names.extend(
            [
                "service-account",
                "etcd-clients-ca",
                "apiserver-aggregator-ca",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
    }
    if loaded.role == Role::ControlPlane {
        for etcd in &loaded.config.etcd_cluster_names {
            names.push(format!("etcd-manager-ca-{etcd}"));
            names.push(format!("etcd-peers-ca-{etcd}"));
        }
    }
    names
}

fn yaml(value: &Value) -> String {
    serde_yaml_ng::to_string(value).unwrap_or_default()
}

fn str_of<'a>(settings: &'a Settings, key: &str) -> Option<&'a str> {
    settings.get(key).and_then(Value::as_str)
}

/// A kubeconfig that reads its client certificate from files.
fn kubeconfig(server: &str, ca_file: &str, cert_file: &str, key_file: &str, user: &str) -> String {
    yaml(&json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"certificate-authority": ca_file, "server": server}}],
        "contexts": [{"name": "service-account-context", "context": {"cluster": "local", "user": user}}],
        "current-context": "service-account-context",
        "users": [{"name": user, "user": {"client-certificate": cert_file, "client-key": key_file}}],
    }))
}

/// The shim configuration of gVisor's runtime.
const GVISOR_SHIM_CONFIG: &str = "/etc/containerd/runsc.toml";

/// containerd's `runsc` runtime, the handler of the `gvisor` RuntimeClass.
/// kops registers the runtime type alone; without the options naming its
/// configuration, gVisor's shim reads none, and the platform would be lost.
const GVISOR_RUNTIME: &str = "\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runsc]\n  runtime_type = \"io.containerd.runsc.v1\"\n\n\
     [plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runsc.options]\n  TypeUrl = \"io.containerd.runsc.v1.options\"\n  ConfigPath = \"/etc/containerd/runsc.toml\"\n";

/// gVisor's platform, on a node that runs it.
fn gvisor_platform(loaded: &Loaded) -> Option<&str> {
    Some(
        loaded
            .gvisor()?
            .platform
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or(kops_api::components::GVISOR_DEFAULT_PLATFORM),
    )
}

/// The shim's configuration: runsc's flags (`[runsc_config]`), the
/// platform here. A JSON string is a valid TOML basic string.
fn gvisor_shim_config(platform: &str) -> String {
    let quoted = serde_json::to_string(platform).unwrap_or_default();
    format!("# Written by kops-rs nodeup.\n[runsc_config]\n  platform = {quoted}\n")
}

/// Files every node gets.
pub fn node_files(ctx: &Context<'_>, ks: &Keystore) -> Result<Vec<PlannedFile>, NodeupError> {
    let mut out = Vec::new();
    sysctl_files(ctx, &mut out);
    containerd_files(ctx, &mut out);
    kubelet_files(ctx, ks, &mut out)?;
    kube_proxy_files(ctx, ks, &mut out)?;
    out.extend(etc_hosts(ctx));
    Ok(out)
}

/// The sysctls kubelet (protectKernelDefaults) and the network need, and
/// the cluster's and group's own.
fn sysctl_files(ctx: &Context<'_>, out: &mut Vec<PlannedFile>) {
    let config = &ctx.loaded.config;
    let mut sysctl = String::from("# Written by kops-rs nodeup.\n");
    for line in [
        "fs.inotify.max_user_instances=8192",
        "fs.inotify.max_user_watches=524288",
        "kernel.panic=10",
        "kernel.panic_on_oops=1",
        "net.bridge.bridge-nf-call-iptables=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.ip_forward=1",
        "net.ipv4.ip_local_reserved_ports=2380-2381,4001-4002,3994-3999",
        "vm.overcommit_memory=1",
        "vm.panic_on_oom=0",
    ] {
        sysctl.push_str(line);
        sysctl.push('\n');
    }
    for p in &config.sysctl_parameters {
        sysctl.push_str(p);
        sysctl.push('\n');
    }
    out.push(PlannedFile::new(
        "/etc/sysctl.d/99-k8s-general.conf",
        0o644,
        sysctl,
    ));
}

/// containerd's config (gVisor's runtime where the group runs it).
fn containerd_files(ctx: &Context<'_>, out: &mut Vec<PlannedFile>) {
    let config = &ctx.loaded.config;
    let containerd = config.containerd_config.clone().unwrap_or_default();
    let sandbox = str_of(&containerd, "sandboxImage").unwrap_or(crate::config::SANDBOX_IMAGE);
    let log_level = str_of(&containerd, "logLevel").unwrap_or("info");
    let mut containerd_toml = format!(
        "# Written by kops-rs nodeup.\nversion = 3\n\n[debug]\n  level = \"{log_level}\"\n\n\
         [plugins.\"io.containerd.cri.v1.images\".pinned_images]\n  sandbox = \"{sandbox}\"\n\n\
         [plugins.\"io.containerd.cri.v1.images\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n\n\
         [plugins.\"io.containerd.cri.v1.runtime\".cni]\n  bin_dir = \"/opt/cni/bin\"\n  conf_dir = \"/etc/cni/net.d\"\n\n\
         [plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\n\
         [plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc.options]\n  BinaryName = \"/usr/local/sbin/runc\"\n  SystemdCgroup = true\n"
    );
    if let Some(platform) = gvisor_platform(ctx.loaded) {
        containerd_toml.push_str(GVISOR_RUNTIME);
        out.push(PlannedFile::new(
            GVISOR_SHIM_CONFIG,
            0o644,
            gvisor_shim_config(platform),
        ));
    }
    out.push(PlannedFile::new(
        "/etc/containerd/config.toml",
        0o644,
        containerd_toml,
    ));
    out.push(PlannedFile::new(
        "/etc/systemd/system/containerd.service",
        0o644,
        "# Written by kops-rs nodeup.\n[Unit]\nDescription=containerd container runtime\nAfter=network.target local-fs.target\n\n\
         [Service]\nExecStartPre=-/sbin/modprobe overlay\nExecStartPre=-/sbin/modprobe br_netfilter\nExecStart=/usr/local/bin/containerd\n\
         Type=notify\nDelegate=yes\nKillMode=process\nRestart=always\nRestartSec=5\nLimitNPROC=infinity\nLimitCORE=infinity\nLimitNOFILE=infinity\nTasksMax=infinity\nOOMScoreAdjust=-999\n\n\
         [Install]\nWantedBy=multi-user.target\n",
    ));
    out.push(PlannedFile::new(
        "/etc/crictl.yaml",
        0o644,
        "runtime-endpoint: unix:///run/containerd/containerd.sock\n",
    ));
}

/// kubelet: its certificate, kubeconfig, config and flags.
fn kubelet_files(
    ctx: &Context<'_>,
    ks: &Keystore,
    out: &mut Vec<PlannedFile>,
) -> Result<(), NodeupError> {
    let config = &ctx.loaded.config;
    let kubelet = &config.kubelet_config;
    let ca_file = "/srv/kubernetes/ca.crt";
    out.push(PlannedFile::new(
        ca_file,
        0o644,
        ks.bundle("kubernetes-ca")?,
    ));
    let mut node_request = IssueRequest::client(
        &format!("system:node:{}", ctx.node_name),
        Some("system:nodes"),
    );
    node_request.usage = CertificateUsage::Client;
    out.extend(ks.certificate(
        ctx.root,
        "kubernetes-ca",
        "/var/lib/kubelet/pki/kubelet-client.crt",
        "/var/lib/kubelet/pki/kubelet-client.key",
        &node_request,
    )?);
    let server = api_server_url(ctx);
    let kubeconfig_path =
        str_of(kubelet, "kubeconfigPath").unwrap_or("/var/lib/kubelet/kubeconfig");
    out.push(PlannedFile::secret(
        kubeconfig_path,
        kubeconfig(
            &server,
            ca_file,
            "/var/lib/kubelet/pki/kubelet-client.crt",
            "/var/lib/kubelet/pki/kubelet-client.key",
            "kubelet",
        ),
    ));
    out.push(PlannedFile::new(
        "/var/lib/kubelet/kubelet.conf",
        0o644,
        kubelet_configuration(kubelet, ca_file),
    ));
    let mut kubelet_flags = vec![
        "--config=/var/lib/kubelet/kubelet.conf".to_string(),
        format!("--kubeconfig={kubeconfig_path}"),
        "--container-runtime-endpoint=unix:///run/containerd/containerd.sock".into(),
        format!("--hostname-override={}", ctx.node_name),
        format!(
            "--cloud-provider={}",
            str_of(kubelet, "cloudProvider").unwrap_or("external")
        ),
        format!(
            "--v={}",
            kubelet.get("logLevel").and_then(Value::as_i64).unwrap_or(2)
        ),
    ];
    let mut node_labels: Vec<String> = kubelet
        .get("nodeLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| kubelet_may_set(k))
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    if ctx.loaded.role == Role::ControlPlane {
        // This node runs kops-controller as a host service: kops'
        // kops-controller DaemonSet stays off it (see kops_api::switch).
        node_labels.push(format!(
            "{}={}",
            kops_api::switch::HOST_CONTROLLER_LABEL,
            kops_api::switch::HOST_CONTROLLER_VALUE
        ));
    }
    if !node_labels.is_empty() {
        kubelet_flags.push(format!("--node-labels={}", node_labels.join(",")));
    }
    if let Some(ip) = ctx.node_ip {
        kubelet_flags.push(format!("--node-ip={ip}"));
    }
    if config
        .assets
        .values()
        .flatten()
        .any(|a| a.contains("ecr-credential-provider"))
    {
        out.push(PlannedFile::new(
            "/var/lib/kubelet/credential-provider.conf",
            0o644,
            yaml(&json!({
                "apiVersion": "kubelet.config.k8s.io/v1",
                "kind": "CredentialProviderConfig",
                "providers": [{
                    "name": "ecr-credential-provider",
                    "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
                    "defaultCacheDuration": "12h",
                    "matchImages": ["*.dkr.ecr.*.amazonaws.com", "*.dkr.ecr.*.amazonaws.com.cn"],
                }],
            })),
        ));
        kubelet_flags.push(
            "--image-credential-provider-config=/var/lib/kubelet/credential-provider.conf".into(),
        );
        kubelet_flags.push("--image-credential-provider-bin-dir=/opt/kops/bin".into());
    }
    out.push(PlannedFile::new(
        "/etc/sysconfig/kubelet",
        0o644,
        format!("DAEMON_ARGS=\"{}\"\n", kubelet_flags.join(" ")),
    ));
    out.push(PlannedFile::new(
        "/etc/systemd/system/kubelet.service",
        0o644,
        "# Written by kops-rs nodeup.\n[Unit]\nDescription=Kubernetes Kubelet Server\nAfter=containerd.service\nWants=containerd.service\n\n\
         [Service]\nEnvironmentFile=/etc/sysconfig/kubelet\nExecStart=/usr/local/bin/kubelet $DAEMON_ARGS\nRestart=always\nRestartSec=2s\nStartLimitInterval=0\nKillMode=process\n\n\
         [Install]\nWantedBy=multi-user.target\n",
    ));
    Ok(())
}

/// Where the node's kubelet and kube-proxy reach the API: on nodes that
/// run the API server, their own.
fn api_server_url(ctx: &Context<'_>) -> String {
    if matches!(ctx.loaded.role, Role::ControlPlane | Role::ApiServer) {
        "https://127.0.0.1".to_string()
    } else {
        format!("https://api.internal.{}", ctx.loaded.config.cluster_name)
    }
}

/// kube-proxy, a static pod on every node, when the cluster runs it.
fn kube_proxy_files(
    ctx: &Context<'_>,
    ks: &Keystore,
    out: &mut Vec<PlannedFile>,
) -> Result<(), NodeupError> {
    let config = &ctx.loaded.config;
    let server = api_server_url(ctx);
    let ca_file = "/srv/kubernetes/ca.crt";
    if let Some(proxy) = &config.kube_proxy {
        let dir = "/var/lib/kube-proxy";
        out.extend(ks.certificate(
            ctx.root,
            "kubernetes-ca",
            &format!("{dir}/client.crt"),
            &format!("{dir}/client.key"),
            &IssueRequest::client("system:kube-proxy", None),
        )?);
        out.push(PlannedFile::secret(
            format!("{dir}/kubeconfig"),
            kubeconfig(
                &server,
                ca_file,
                &format!("{dir}/client.crt"),
                &format!("{dir}/client.key"),
                "kube-proxy",
            ),
        ));
        let mut proxy_flags = flags(proxy, &[]);
        proxy_flags.push(format!("--kubeconfig={dir}/kubeconfig"));
        proxy_flags.push(format!("--hostname-override={}", ctx.node_name));
        proxy_flags.sort();
        let mut command = vec!["/usr/local/bin/kube-proxy".to_string()];
        command.extend(proxy_flags);
        let image = str_of(proxy, "image").unwrap_or("registry.k8s.io/kube-proxy");
        let cpu = str_of(proxy, "cpuRequest").unwrap_or("100m");
        out.push(PlannedFile::new(
            "/etc/kubernetes/manifests/kube-proxy.manifest",
            0o644,
            pod(
                "kube-proxy",
                image,
                command,
                &[
                    (dir, dir, "Directory", true),
                    ("/srv/kubernetes", "/srv/kubernetes", "Directory", true),
                    ("/lib/modules", "/lib/modules", "Directory", true),
                    (
                        "/run/xtables.lock",
                        "/run/xtables.lock",
                        "FileOrCreate",
                        false,
                    ),
                ],
                cpu,
            ),
        ));
    }
    Ok(())
}

/// The names a node resolves through `/etc/hosts` when the cluster
/// publishes none (`dns: None`, gossip): on the control plane
/// `api.internal.<cluster>` (and the API's public name) is the node itself;
/// a worker whose boot config carries the control plane's addresses
/// (`APIServerIPs`) reaches the API and kops-controller there. `None` when
/// there is nothing to point (DNS names are published).
fn etc_hosts(ctx: &Context<'_>) -> Option<PlannedFile> {
    let config = &ctx.loaded.config;
    let cluster = &config.cluster_name;
    let publishes_dns = !config.uses_none_dns && !cluster.ends_with(".k8s.local");
    let mut records: Vec<(String, Vec<String>)> = Vec::new();
    if matches!(ctx.loaded.role, Role::ControlPlane) {
        if publishes_dns {
            return None;
        }
        let local = vec!["127.0.0.1".to_string()];
        records.push((format!("api.internal.{cluster}"), local.clone()));
        let public = config
            .api_server_config
            .as_ref()
            .and_then(|a| a.api.get("publicName"))
            .and_then(Value::as_str);
        if let Some(public) = public.filter(|p| !p.is_empty()) {
            records.push((public.to_string(), local));
        }
    } else {
        let ips = &ctx.loaded.boot.api_server_ips;
        if ips.is_empty() {
            return None;
        }
        records.push((format!("api.internal.{cluster}"), ips.clone()));
        records.push((format!("kops-controller.internal.{cluster}"), ips.clone()));
    }
    let existing =
        std::fs::read_to_string(super::files::under(ctx.root, HOSTS)).unwrap_or_default();
    Some(PlannedFile::new(
        HOSTS,
        0o644,
        with_host_entries(&existing, &records),
    ))
}

const HOSTS: &str = "/etc/hosts";
const HOSTS_BEGIN: &str = "# Begin host entries managed by kops - do not edit";
const HOSTS_END: &str = "# End host entries managed by kops";

/// `existing` (an `/etc/hosts`) with `records` (name → addresses) in the
/// block kops manages at its end, as kops' nodeup writes it: the lines
/// outside the block kept, one blank line, then the block, one line per
/// address with its names sorted, the lines sorted. Names the block held
/// that `records` does not set are kept; the ones it sets are replaced.
pub fn with_host_entries(existing: &str, records: &[(String, Vec<String>)]) -> String {
    let mut outside: Vec<&str> = Vec::new();
    let mut kept: Vec<(String, String)> = Vec::new();
    let mut in_block = false;
    for line in existing.split('\n') {
        match line.trim() {
            HOSTS_BEGIN => in_block = true,
            HOSTS_END => in_block = false,
            _ if !in_block => outside.push(line),
            entry => {
                let mut fields = entry.split_whitespace();
                if let Some(address) = fields.next().filter(|a| !a.starts_with('#')) {
                    for name in fields {
                        kept.push((address.to_string(), name.to_string()));
                    }
                }
            }
        }
    }
    while outside.last().is_some_and(|l| l.is_empty()) {
        outside.pop();
    }
    let set: BTreeSet<&str> = records.iter().map(|(name, _)| name.as_str()).collect();
    let mut by_address: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, addresses) in records {
        for address in addresses {
            by_address
                .entry(address.clone())
                .or_default()
                .insert(name.clone());
        }
    }
    for (address, name) in kept.into_iter().filter(|(_, n)| !set.contains(n.as_str())) {
        by_address.entry(address).or_default().insert(name);
    }
    let mut block: Vec<String> = by_address
        .into_iter()
        .map(|(address, names)| {
            format!(
                "{address}\t{}",
                names.into_iter().collect::<Vec<_>>().join(" ")
            )
        })
        .collect();
    block.sort();
    let mut out: Vec<&str> = outside;
    out.push("");
    out.push(HOSTS_BEGIN);
    let mut text = out.join("\n");
    for line in &block {
        text.push('\n');
        text.push_str(line);
    }
    text.push('\n');
    text.push_str(HOSTS_END);
    text.push('\n');
    text
}

/// kubelet's KubeletConfiguration from kops' kubelet settings.
fn kubelet_configuration(kubelet: &Settings, ca_file: &str) -> String {
    let mut c = serde_json::Map::new();
    c.insert("apiVersion".into(), json!("kubelet.config.k8s.io/v1beta1"));
    c.insert("kind".into(), json!("KubeletConfiguration"));
    c.insert(
        "authentication".into(),
        json!({"anonymous": {"enabled": kubelet.get("anonymousAuth").and_then(Value::as_bool).unwrap_or(false)},
               "webhook": {"enabled": true}, "x509": {"clientCAFile": ca_file}}),
    );
    c.insert("authorization".into(), json!({"mode": "Webhook"}));
    let copy = [
        ("cgroupDriver", "cgroupDriver"),
        ("cgroupRoot", "cgroupRoot"),
        ("clusterDomain", "clusterDomain"),
        ("enableDebuggingHandlers", "enableDebuggingHandlers"),
        ("protectKernelDefaults", "protectKernelDefaults"),
        ("shutdownGracePeriod", "shutdownGracePeriod"),
        (
            "shutdownGracePeriodCriticalPods",
            "shutdownGracePeriodCriticalPods",
        ),
        ("podManifestPath", "staticPodPath"),
        ("featureGates", "featureGates"),
        ("maxPods", "maxPods"),
        ("kubeReserved", "kubeReserved"),
        ("systemReserved", "systemReserved"),
    ];
    for (from, to) in copy {
        if let Some(v) = kubelet.get(from) {
            let v = match (from, v) {
                // kops writes feature gates as strings.
                ("featureGates", Value::Object(m)) => Value::Object(
                    m.iter()
                        .map(|(k, v)| {
                            (
                                k.clone(),
                                json!(v
                                    .as_str()
                                    .map_or(v.as_bool() == Some(true), |s| s == "true")),
                            )
                        })
                        .collect(),
                ),
                _ => v.clone(),
            };
            c.insert(to.into(), v);
        }
    }
    if let Some(dns) = str_of(kubelet, "clusterDNS") {
        c.insert(
            "clusterDNS".into(),
            json!(dns.split(',').map(str::trim).collect::<Vec<_>>()),
        );
    }
    if let Some(hard) = str_of(kubelet, "evictionHard") {
        let map: serde_json::Map<String, Value> = hard
            .split(',')
            .filter_map(|p| p.split_once('<'))
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        c.insert("evictionHard".into(), Value::Object(map));
    }
    if let Some(Value::Array(taints)) = kubelet.get("taints") {
        let list: Vec<Value> = taints
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|t| {
                let (rest, effect) = t.rsplit_once(':')?;
                let (key, value) = rest.split_once('=').unwrap_or((rest, ""));
                Some(json!({"key": key, "value": value, "effect": effect}))
            })
            .collect();
        c.insert("registerWithTaints".into(), Value::Array(list));
    }
    yaml(&Value::Object(c))
}

/// `serviceClusterIPRange`'s first address (the `kubernetes` service).
fn first_service_ip(range: &str) -> Option<String> {
    let ip: std::net::Ipv4Addr = range.split_once('/')?.0.parse().ok()?;
    Some(std::net::Ipv4Addr::from(u32::from(ip).wrapping_add(1)).to_string())
}

/// A component's flags from its kops settings.
fn flags(settings: &Settings, skip: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (key, value) in settings {
        if skip.contains(&key.as_str())
            || matches!(
                key.as_str(),
                "image" | "cpuRequest" | "cpuLimit" | "memoryRequest" | "memoryLimit"
            )
        {
            continue;
        }
        let flag = flag_name(key);
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.to_string(),
            Value::Array(items) => items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| i.to_string())
                })
                .collect::<Vec<_>>()
                .join(","),
            Value::Object(m) if key == "leaderElection" => {
                let on = m
                    .get("leaderElect")
                    .and_then(Value::as_bool)
                    .unwrap_or(true);
                out.push(format!("--leader-elect={on}"));
                continue;
            }
            Value::Object(m) if key == "featureGates" => m
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{k}={}",
                        v.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| v.to_string())
                    )
                })
                .collect::<Vec<_>>()
                .join(","),
            _ => continue,
        };
        out.push(format!("--{flag}={text}"));
    }
    out
}

/// kops' setting name → the component's flag name.
fn flag_name(key: &str) -> String {
    match key {
        "logLevel" => return "v".into(),
        "apiServerCount" => return "apiserver-count".into(),
        "serviceAccountJWKSURI" => return "service-account-jwks-uri".into(),
        "allocateNodeCIDRs" => return "allocate-node-cidrs".into(),
        "clusterCIDR" => return "cluster-cidr".into(),
        _ => {}
    }
    let chars: Vec<char> = key.chars().collect();
    let mut out = String::new();
    for (i, c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            let prev_lower = chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit();
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if prev_lower || (chars[i - 1].is_ascii_uppercase() && next_lower) {
                out.push('-');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A static pod.
/// `mounts`: (host path, path in the container, hostPath type, read-only).
fn pod(
    name: &str,
    image: &str,
    command: Vec<String>,
    mounts: &[(&str, &str, &str, bool)],
    cpu: &str,
) -> String {
    pod_with_env(name, image, command, &[], mounts, cpu)
}

/// A static pod with environment variables.
fn pod_with_env(
    name: &str,
    image: &str,
    command: Vec<String>,
    env: &[(&str, &str)],
    mounts: &[(&str, &str, &str, bool)],
    cpu: &str,
) -> String {
    yaml(&pod_value(name, image, command, env, mounts, cpu))
}

/// [`pod_with_env`]'s pod, before it is written out.
fn pod_value(
    name: &str,
    image: &str,
    command: Vec<String>,
    env: &[(&str, &str)],
    mounts: &[(&str, &str, &str, bool)],
    cpu: &str,
) -> Value {
    let volume_name = |p: &str| p.trim_matches('/').replace(['/', '.'], "-");
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "kube-system", "labels": {"k8s-app": name}},
        "spec": {
            "hostNetwork": true,
            "priorityClassName": "system-cluster-critical",
            "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
            "containers": [{
                "name": name,
                "image": image,
                "command": command,
                "env": env.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
                "resources": {"requests": {"cpu": cpu}},
                "volumeMounts": mounts.iter().map(|(_, path, _, ro)| json!({"name": volume_name(path), "mountPath": path, "readOnly": ro})).collect::<Vec<_>>(),
            }],
            "volumes": mounts.iter().map(|(host, path, kind, _)| json!({"name": volume_name(path), "hostPath": {"path": host, "type": kind}})).collect::<Vec<_>>(),
        },
    });
    if let Some(c) = pod["spec"]["containers"][0].as_object_mut() {
        if env.is_empty() {
            c.remove("env");
        }
        // kube-proxy programs iptables; etcd-manager mounts volumes.
        if name == "kube-proxy" || name.starts_with("etcd-manager") {
            c.insert("securityContext".into(), json!({"privileged": true}));
        }
    }
    pod
}

/// The API server's token webhook configuration (a kubeconfig naming the
/// authentication service), as kops writes it.
const AUTHN_CONFIG: &str = "/etc/kubernetes/authn.config";
/// The user id aws-iam-authenticator's container runs as, owning its
/// serving key pair on the node.
const AWS_IAM_AUTHENTICATOR_UID: u32 = 10000;

/// The service the API server asks about bearer tokens, from
/// `spec.authentication`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Webhook {
    /// kopeio's authenticator, plain HTTP on the node.
    Kopeio,
    /// aws-iam-authenticator, TLS on the node with a key pair nodeup issues.
    AwsIamAuthenticator,
}

fn authentication_webhook(authentication: Option<&Value>) -> Option<Webhook> {
    let set = |key: &str| {
        authentication
            .and_then(|a| a.get(key))
            .is_some_and(|v| !v.is_null())
    };
    if set("kopeio") {
        Some(Webhook::Kopeio)
    } else if set("aws") {
        Some(Webhook::AwsIamAuthenticator)
    } else {
        None
    }
}

/// The webhook's kubeconfig and, for aws-iam-authenticator, its serving
/// certificate and key (from the cluster CA, owned by the user its
/// container runs as, where its DaemonSet mounts them).
fn webhook_files(
    ctx: &Context<'_>,
    ks: &Keystore,
    webhook: Webhook,
) -> Result<Vec<PlannedFile>, NodeupError> {
    let context = |cluster: &str| json!([{"name": "webhook", "context": {"cluster": cluster, "user": "kube-apiserver"}}]);
    let users = json!([{"name": "kube-apiserver", "user": {}}]);
    match webhook {
        Webhook::Kopeio => Ok(vec![PlannedFile::new(
            AUTHN_CONFIG,
            0o644,
            yaml(&json!({
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "webhook", "cluster": {"server": "http://127.0.0.1:9001/hooks/authn"}}],
                "contexts": context("webhook"),
                "current-context": "webhook",
                "users": users,
            })),
        )]),
        Webhook::AwsIamAuthenticator => {
            use base64::Engine;
            let ca = ks.bundle(kops_pki::KUBERNETES_CA)?;
            let ca = base64::engine::general_purpose::STANDARD.encode(ca);
            let mut out = vec![PlannedFile::new(
                AUTHN_CONFIG,
                0o600,
                yaml(&json!({
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "aws-iam-authenticator", "cluster": {
                        "certificate-authority-data": ca,
                        "server": "https://127.0.0.1:21362/authenticate",
                    }}],
                    "contexts": context("aws-iam-authenticator"),
                    "current-context": "webhook",
                    "users": users,
                })),
            )];
            let dir = "/srv/kubernetes/aws-iam-authenticator";
            let pair = ks.certificate(
                ctx.root,
                kops_pki::KUBERNETES_CA,
                &format!("{dir}/cert.pem"),
                &format!("{dir}/key.pem"),
                &IssueRequest::server(
                    "aws-iam-authenticator",
                    &["localhost".to_string(), "127.0.0.1".to_string()],
                ),
            )?;
            out.extend(pair.into_iter().map(|mut file| {
                file.mode = 0o600;
                file.owned_by(AWS_IAM_AUTHENTICATOR_UID)
            }));
            Ok(out)
        }
    }
}

/// Files of nodes that run the API server (and, on the control plane,
/// controller manager, scheduler and etcd-manager).
pub fn control_plane_files(
    ctx: &Context<'_>,
    ks: &Keystore,
) -> Result<Vec<PlannedFile>, NodeupError> {
    let mut out = Vec::new();
    api_server_files(ctx, ks, &mut out)?;
    if ctx.loaded.role != Role::ControlPlane {
        return Ok(out);
    }
    let cp = ctx
        .loaded
        .config
        .control_plane_config
        .clone()
        .unwrap_or_default();
    controller_manager_files(ctx, ks, &cp, &mut out)?;
    scheduler_files(ctx, ks, &cp, &mut out)?;
    etcd_manager_files(ctx, ks, &mut out)?;
    addon_applier_files(ctx, ks, &mut out)?;
    // On vSphere, kube-vip holds the control plane's virtual IP (with the
    // addon applier's kubeconfig: a cluster admin, as kubeadm's admin.conf).
    if ctx.loaded.boot.cloud_provider == kops_vsphere::CLOUD {
        out.extend(super::vsphere::kube_vip(
            &ctx.loaded.config,
            CHANNELS_KUBECONFIG,
            &[CHANNELS_CERT, CHANNELS_KEY, "/srv/kubernetes/ca.crt"],
        )?);
    }
    Ok(out)
}

/// The API server's certificates, keys and static pod.
fn api_server_files(
    ctx: &Context<'_>,
    ks: &Keystore,
    out: &mut Vec<PlannedFile>,
) -> Result<(), NodeupError> {
    let config = &ctx.loaded.config;
    let cluster = &config.cluster_name;
    let api = config.api_server_config.clone().unwrap_or_default();
    let dir = "/srv/kubernetes/kube-apiserver";
    let domain = if api.cluster_dns_domain.is_empty() {
        "cluster.local".to_string()
    } else {
        api.cluster_dns_domain.clone()
    };
    let mut names = vec![
        "kubernetes".to_string(),
        "kubernetes.default".into(),
        "kubernetes.default.svc".into(),
        format!("kubernetes.default.svc.{domain}"),
        format!("api.internal.{cluster}"),
        "127.0.0.1".into(),
    ];
    if let Some(public) = api.api.get("publicName").and_then(Value::as_str) {
        names.push(public.to_string());
    }
    // The API load balancer's addresses, as kops adds them: clients that
    // reach the API through it by its DNS name (gossip, `dns: None`).
    names.extend(config.apiserver_additional_ips.iter().cloned());
    if let Some(ip) =
        str_of(&api.kube_api_server, "serviceClusterIPRange").and_then(first_service_ip)
    {
        names.push(ip);
    }
    if let Some(ip) = ctx.node_ip {
        names.push(ip.to_string());
    }
    names.sort();
    names.dedup();
    out.extend(ks.certificate(
        ctx.root,
        "kubernetes-ca",
        &format!("{dir}/server.crt"),
        &format!("{dir}/server.key"),
        &IssueRequest::server("kubernetes-master", &names),
    )?);
    out.extend(ks.certificate(
        ctx.root,
        "etcd-clients-ca",
        &format!("{dir}/etcd-client.crt"),
        &format!("{dir}/etcd-client.key"),
        &IssueRequest::client("kube-apiserver", None),
    )?);
    out.extend(ks.certificate(
        ctx.root,
        "kubernetes-ca",
        &format!("{dir}/kubelet-api.crt"),
        &format!("{dir}/kubelet-api.key"),
        &IssueRequest::client("kubelet-api", None),
    )?);
    out.extend(ks.certificate(
        ctx.root,
        "apiserver-aggregator-ca",
        &format!("{dir}/apiserver-aggregator.crt"),
        &format!("{dir}/apiserver-aggregator.key"),
        &IssueRequest::client("aggregator", None),
    )?);
    out.push(PlannedFile::new(
        format!("{dir}/etcd-ca.crt"),
        0o644,
        ks.bundle("etcd-clients-ca")?,
    ));
    out.push(PlannedFile::new(
        format!("{dir}/apiserver-aggregator-ca.crt"),
        0o644,
        ks.bundle("apiserver-aggregator-ca")?,
    ));
    let (_, sa_key) = ks.primary_pem("service-account")?;
    out.push(PlannedFile::secret(
        "/srv/kubernetes/service-account.key",
        sa_key,
    ));

    let webhook = authentication_webhook(api.authentication.as_ref());
    if let Some(webhook) = webhook {
        out.extend(webhook_files(ctx, ks, webhook)?);
    }
    let mut api_flags = flags(&api.kube_api_server, &[]);
    if webhook == Some(Webhook::AwsIamAuthenticator)
        && !api_flags
            .iter()
            .any(|f| f.starts_with("--authentication-token-webhook-config-file="))
    {
        api_flags.push(format!(
            "--authentication-token-webhook-config-file={AUTHN_CONFIG}"
        ));
    }
    api_flags.extend([
        "--client-ca-file=/srv/kubernetes/ca.crt".to_string(),
        format!("--tls-cert-file={dir}/server.crt"),
        format!("--tls-private-key-file={dir}/server.key"),
        format!("--etcd-cafile={dir}/etcd-ca.crt"),
        format!("--etcd-certfile={dir}/etcd-client.crt"),
        format!("--etcd-keyfile={dir}/etcd-client.key"),
        format!("--kubelet-client-certificate={dir}/kubelet-api.crt"),
        format!("--kubelet-client-key={dir}/kubelet-api.key"),
        format!("--proxy-client-cert-file={dir}/apiserver-aggregator.crt"),
        format!("--proxy-client-key-file={dir}/apiserver-aggregator.key"),
        format!("--requestheader-client-ca-file={dir}/apiserver-aggregator-ca.crt"),
        "--service-account-key-file=/srv/kubernetes/service-account.key".into(),
        "--service-account-signing-key-file=/srv/kubernetes/service-account.key".into(),
        "--cloud-provider=external".into(),
    ]);
    api_flags.sort();
    let mut command = vec!["/usr/local/bin/kube-apiserver".to_string()];
    command.extend(api_flags);
    let image = str_of(&api.kube_api_server, "image").unwrap_or("registry.k8s.io/kube-apiserver");
    out.push(PlannedFile::new(
        "/etc/kubernetes/manifests/kube-apiserver.manifest",
        0o644,
        pod(
            "kube-apiserver",
            image,
            command,
            &[
                ("/srv/kubernetes", "/srv/kubernetes", "Directory", true),
                ("/etc/ssl", "/etc/ssl", "DirectoryOrCreate", true),
            ]
            .into_iter()
            .chain(webhook.map(|_| (AUTHN_CONFIG, AUTHN_CONFIG, "", true)))
            .collect::<Vec<_>>(),
            "150m",
        ),
    ));
    Ok(())
}

/// The controller manager's certificate, kubeconfig and static pod.
fn controller_manager_files(
    ctx: &Context<'_>,
    ks: &Keystore,
    cp: &ControlPlaneConfig,
    out: &mut Vec<PlannedFile>,
) -> Result<(), NodeupError> {
    let kcm = "/srv/kubernetes/kube-controller-manager";
    out.extend(ks.certificate(
        ctx.root,
        "kubernetes-ca",
        &format!("{kcm}/client.crt"),
        &format!("{kcm}/client.key"),
        &IssueRequest::client("system:kube-controller-manager", None),
    )?);
    out.push(PlannedFile::secret(
        format!("{kcm}/kubeconfig"),
        kubeconfig(
            "https://127.0.0.1",
            "/srv/kubernetes/ca.crt",
            &format!("{kcm}/client.crt"),
            &format!("{kcm}/client.key"),
            "kube-controller-manager",
        ),
    ));
    let mut kcm_flags = flags(&cp.kube_controller_manager, &[]);
    kcm_flags.extend([
        format!("--kubeconfig={kcm}/kubeconfig"),
        format!("--authentication-kubeconfig={kcm}/kubeconfig"),
        format!("--authorization-kubeconfig={kcm}/kubeconfig"),
        "--root-ca-file=/srv/kubernetes/ca.crt".into(),
        "--service-account-private-key-file=/srv/kubernetes/service-account.key".into(),
    ]);
    kcm_flags.sort();
    let mut command = vec!["/usr/local/bin/kube-controller-manager".to_string()];
    command.extend(kcm_flags);
    let image = str_of(&cp.kube_controller_manager, "image")
        .unwrap_or("registry.k8s.io/kube-controller-manager");
    out.push(PlannedFile::new(
        "/etc/kubernetes/manifests/kube-controller-manager.manifest",
        0o644,
        pod(
            "kube-controller-manager",
            image,
            command,
            &[("/srv/kubernetes", "/srv/kubernetes", "Directory", true)],
            "100m",
        ),
    ));
    Ok(())
}

/// The scheduler's certificate, kubeconfig, config and static pod.
fn scheduler_files(
    ctx: &Context<'_>,
    ks: &Keystore,
    cp: &ControlPlaneConfig,
    out: &mut Vec<PlannedFile>,
) -> Result<(), NodeupError> {
    let ks_dir = "/var/lib/kube-scheduler";
    out.extend(ks.certificate(
        ctx.root,
        "kubernetes-ca",
        &format!("{ks_dir}/client.crt"),
        &format!("{ks_dir}/client.key"),
        &IssueRequest::client("system:kube-scheduler", None),
    )?);
    out.push(PlannedFile::secret(
        format!("{ks_dir}/kubeconfig"),
        kubeconfig(
            "https://127.0.0.1",
            "/srv/kubernetes/ca.crt",
            &format!("{ks_dir}/client.crt"),
            &format!("{ks_dir}/client.key"),
            "kube-scheduler",
        ),
    ));
    out.push(PlannedFile::new(
        format!("{ks_dir}/config.yaml"),
        0o644,
        yaml(&json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": format!("{ks_dir}/kubeconfig")},
        })),
    ));
    let mut sched_flags = flags(&cp.kube_scheduler, &["leaderElection"]);
    sched_flags.push(format!("--config={ks_dir}/config.yaml"));
    sched_flags.push(format!("--authentication-kubeconfig={ks_dir}/kubeconfig"));
    sched_flags.push(format!("--authorization-kubeconfig={ks_dir}/kubeconfig"));
    sched_flags.sort();
    let mut command = vec!["/usr/local/bin/kube-scheduler".to_string()];
    command.extend(sched_flags);
    let image = str_of(&cp.kube_scheduler, "image").unwrap_or("registry.k8s.io/kube-scheduler");
    out.push(PlannedFile::new(
        "/etc/kubernetes/manifests/kube-scheduler.manifest",
        0o644,
        pod(
            "kube-scheduler",
            image,
            command,
            &[
                (ks_dir, ks_dir, "Directory", true),
                ("/srv/kubernetes", "/srv/kubernetes", "Directory", true),
            ],
            "100m",
        ),
    ));
    Ok(())
}

/// etcd-manager, one per etcd cluster, with its CAs (it issues its own
/// peer and client certificates from them); on vSphere the units that
/// mount the etcd disks again at boot.
fn etcd_manager_files(
    ctx: &Context<'_>,
    ks: &Keystore,
    out: &mut Vec<PlannedFile>,
) -> Result<(), NodeupError> {
    let config = &ctx.loaded.config;
    let cluster = &config.cluster_name;
    for (index, etcd) in config.etcd_cluster_names.iter().enumerate() {
        let pki = format!("/etc/kubernetes/pki/etcd-manager-{etcd}");
        for (keyset, file) in [
            (format!("etcd-manager-ca-{etcd}"), "etcd-manager-ca"),
            (format!("etcd-peers-ca-{etcd}"), "etcd-peers-ca"),
            ("etcd-clients-ca".to_string(), "etcd-clients-ca"),
        ] {
            let (cert, key) = ks.primary_pem(&keyset)?;
            out.push(PlannedFile::new(format!("{pki}/{file}.crt"), 0o644, cert));
            out.push(PlannedFile::secret(format!("{pki}/{file}.key"), key));
        }
        let (client, peer, grpc, quarantine) = match crate::config::etcd_ports(etcd) {
            Some(p) => (p.client, p.peer, p.grpc, p.quarantine),
            // A name kops does not know: ports after kops' own.
            None => {
                let i = index as u32;
                (4007 + i, 2390 + i, 4010 + i, 4020 + i)
            }
        };
        let config_base = ctx.loaded.config_base.trim_end_matches('/');
        let on_vsphere = ctx.loaded.boot.cloud_provider == kops_vsphere::CLOUD;
        let backups = format!("{}/{etcd}", super::vsphere::etcd::BACKUPS_DIR);
        let backup_store = if on_vsphere {
            format!("file://{backups}")
        } else {
            format!("{config_base}/backups/etcd/{etcd}")
        };
        let mut command = vec![
            "/ko-app/etcd-manager".to_string(),
            format!("--backup-store={backup_store}"),
            format!("--client-urls=https://__name__:{client}"),
            "--cluster-name=etcd".to_string(),
            "--containerized=true".to_string(),
            format!("--dns-suffix=.internal.{cluster}"),
            format!("--grpc-port={grpc}"),
            format!("--peer-urls=https://__name__:{peer}"),
            format!("--quarantine-client-urls=https://__name__:{quarantine}"),
            "--v=6".to_string(),
        ];
        let mut mounts = vec![
            ("/", "/rootfs", "Directory", false),
            ("/run", "/run", "DirectoryOrCreate", false),
            (
                pki.as_str(),
                "/etc/kubernetes/pki/etcd-manager",
                "DirectoryOrCreate",
                false,
            ),
        ];
        if on_vsphere {
            command.extend(vsphere_etcd_flags(ctx, cluster, etcd)?);
            mounts.push((
                backups.as_str(),
                backups.as_str(),
                "DirectoryOrCreate",
                false,
            ));
        } else {
            command.extend([
                format!("--volume-name-tag=k8s.io/etcd/{etcd}"),
                "--volume-provider=aws".to_string(),
                format!("--volume-tag=k8s.io/etcd/{etcd}"),
                "--volume-tag=k8s.io/role/control-plane=1".to_string(),
                format!("--volume-tag=kubernetes.io/cluster/{cluster}=owned"),
            ]);
        }
        let mut pod = pod_value(
            &format!("etcd-manager-{etcd}"),
            ETCD_MANAGER_IMAGE,
            command,
            &ctx.region
                .filter(|_| !on_vsphere)
                .map(|r| vec![("AWS_REGION", r)])
                .unwrap_or_default(),
            &mounts,
            "200m",
        );
        // The slim image has no etcd: each version's binaries come from
        // the etcd images, mounted where etcd-manager looks for them.
        let (etcd_mounts, etcd_volumes) =
            crate::config::etcd_image_volumes(crate::config::DEFAULT_REGISTRY);
        if let Some(list) = pod["spec"]["containers"][0]["volumeMounts"].as_array_mut() {
            list.extend(etcd_mounts);
        }
        if let Some(list) = pod["spec"]["volumes"].as_array_mut() {
            list.extend(etcd_volumes);
        }
        out.push(PlannedFile::new(
            format!("/etc/kubernetes/manifests/etcd-manager-{etcd}.manifest"),
            0o644,
            yaml(&pod),
        ));
    }
    // On vSphere, the etcd disks are mounted again at boot by label.
    out.extend(super::vsphere::etcd::mount_units(cluster, ctx.etcd_disks));
    Ok(())
}

/// The addon applier (kops' channels): every minute it applies the
/// changed addons of the bootstrap channel and of the channels kops'
/// kops-channels pod manifest lists (custom addons, `spec.addons`), as a
/// cluster admin.
fn addon_applier_files(
    ctx: &Context<'_>,
    ks: &Keystore,
    out: &mut Vec<PlannedFile>,
) -> Result<(), NodeupError> {
    let config_base = ctx.loaded.config_base.trim_end_matches('/');
    let channels_manifest = ctx
        .loaded
        .config
        .channels_manifest
        .as_deref()
        .map(|m| format!(" --channels-manifest {m}"))
        .unwrap_or_default();
    out.extend(ks.certificate(
        ctx.root,
        "kubernetes-ca",
        CHANNELS_CERT,
        CHANNELS_KEY,
        &IssueRequest::client("kops", Some("system:masters")),
    )?);
    out.push(PlannedFile::secret(
        CHANNELS_KUBECONFIG,
        kubeconfig(
            "https://127.0.0.1",
            "/srv/kubernetes/ca.crt",
            CHANNELS_CERT,
            CHANNELS_KEY,
            "kops",
        ),
    ));
    // The store's settings and credentials in a root-only file: a unit
    // file is world-readable and `systemctl show` prints its Environment=.
    out.push(PlannedFile::secret(
        CHANNELS_ENV,
        service_environment(ctx.region, &kops_api::env::process_env),
    ));
    out.push(PlannedFile::new(
        CHANNELS_UNIT,
        0o644,
        format!(
            "# Written by kops-rs nodeup.\n[Unit]\nDescription=kops-rs addon applier (bootstrap channel and custom addons)\nAfter=kubelet.service\n\n\
             [Service]\nEnvironmentFile={CHANNELS_ENV}\nExecStart=/opt/kops/bin/nodeup channels apply --kubeconfig {CHANNELS_KUBECONFIG} --interval 60s{channels_manifest} {config_base}/addons/bootstrap-channel.yaml\n\
             Restart=always\nRestartSec=10s\nStartLimitInterval=0\n\n[Install]\nWantedBy=multi-user.target\n"
        ),
    ));
    Ok(())
}

/// Whether kubelet may give its node `label` itself (`--node-labels`): any
/// label outside the `kubernetes.io` and `k8s.io` namespaces, and in them
/// only kubelet's own (`kubelet.kubernetes.io/`, `node.kubernetes.io/` and
/// the well-known topology, OS and instance-type labels). kubelet refuses
/// to start with any other; kops-controller's labeller sets those (role
/// labels, `kops.k8s.io/*`), as kops does.
pub fn kubelet_may_set(label: &str) -> bool {
    const WELL_KNOWN: &[&str] = &[
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    ];
    let Some((namespace, _)) = label.split_once('/') else {
        return true;
    };
    let within = |domain: &str| namespace == domain || namespace.ends_with(&format!(".{domain}"));
    if !within("kubernetes.io") && !within("k8s.io") {
        return true;
    }
    WELL_KNOWN.contains(&label) || within("kubelet.kubernetes.io") || within("node.kubernetes.io")
}

/// kops-controller's files on a control-plane node: its configuration
/// (kops' JSON), its serving certificate for
/// `kops-controller.internal.<cluster>` (and the node's address), the key of
/// the one CA it signs with (`kubernetes-ca`) and that CA's primary keypair
/// id, and the systemd unit that runs it (`nodeup kops-controller`).
pub fn kops_controller_files(
    ctx: &Context<'_>,
    ks: &Keystore,
    options: &kops_bootstrap::config::Options,
) -> Result<Vec<PlannedFile>, NodeupError> {
    use kops_bootstrap::config::{CONFIG_PATH, PKI_DIR};
    let mut out = vec![PlannedFile::new(
        CONFIG_PATH,
        0o644,
        format!("{}\n", options.to_json()),
    )];
    let cluster = &ctx.loaded.config.cluster_name;
    let mut names = vec![kops_bootstrap::protocol::audience(cluster)];
    names.extend(ctx.node_ip.map(str::to_string));
    out.extend(ks.certificate(
        ctx.root,
        "kubernetes-ca",
        &options.server.server_certificate_path,
        &options.server.server_key_path,
        &IssueRequest::server("kops-controller", &names),
    )?);
    // Its identity in the cluster (labelling nodes): the user the
    // kops-controller addon's RBAC binds.
    out.extend(ks.certificate(
        ctx.root,
        "kubernetes-ca",
        KOPS_CONTROLLER_CLIENT_CERT,
        KOPS_CONTROLLER_CLIENT_KEY,
        &IssueRequest::client("system:kops-controller", None),
    )?);
    out.push(PlannedFile::secret(
        KOPS_CONTROLLER_KUBECONFIG,
        kubeconfig(
            "https://127.0.0.1",
            "/srv/kubernetes/ca.crt",
            KOPS_CONTROLLER_CLIENT_CERT,
            KOPS_CONTROLLER_CLIENT_KEY,
            "kops-controller",
        ),
    ));
    let mut ids = String::new();
    for ca in &options.server.signing_cas {
        let (cert, key) = ks.primary_pem(ca)?;
        out.push(PlannedFile::new(format!("{PKI_DIR}/{ca}.crt"), 0o644, cert));
        out.push(PlannedFile::secret(format!("{PKI_DIR}/{ca}.key"), key));
        ids.push_str(&format!("{ca}: \"{}\"\n", ks.primary_id(ca)?));
    }
    out.push(PlannedFile::new(
        format!("{PKI_DIR}/keypair-ids.yaml"),
        0o644,
        ids,
    ));
    // Workers find kops-controller at kops-controller.internal.<cluster>.
    // kops' dns-controller publishes that name for pods annotated with it;
    // the host service is no pod, so a placeholder static pod (the pause
    // image, on the host network) carries the annotation and dns-controller
    // points the name at this node. Gossip and `dns: None` clusters have no
    // dns-controller.
    let config = &ctx.loaded.config;
    if !config.uses_none_dns && !cluster.ends_with(".k8s.local") {
        let mut pod: Value = serde_yaml_ng::from_str(&pod(
            "kops-controller-dns",
            crate::config::SANDBOX_IMAGE,
            Vec::new(),
            &[],
            "10m",
        ))
        .unwrap_or_default();
        pod["metadata"]["annotations"] = json!({"dns.alpha.kubernetes.io/internal": kops_bootstrap::protocol::audience(cluster)});
        if let Some(c) = pod["spec"]["containers"][0].as_object_mut() {
            c.remove("command");
        }
        out.push(PlannedFile::new(
            "/etc/kubernetes/manifests/kops-controller-dns.manifest",
            0o644,
            yaml(&pod),
        ));
    }
    // The service runs as its own user (kops runs kops-controller as
    // uid 10011): its configuration, keys and kubeconfig are that user's.
    let mut out: Vec<PlannedFile> = out
        .into_iter()
        .map(|file| {
            if file.path.starts_with(KOPS_CONTROLLER_DIR) {
                file.owned_by(KOPS_CONTROLLER_UID)
            } else {
                file
            }
        })
        .collect();
    out.push(PlannedFile::secret(
        KOPS_CONTROLLER_ENV,
        service_environment(ctx.region, &kops_api::env::process_env),
    ));
    // LimitNOFILE: room above kops-controller's cap on connections (1,024)
    // for its own AWS and Kubernetes calls; systemd's default is 1,024.
    // It needs no privilege: port 3988 is above 1023, it reads its own
    // files and writes none, so it gets no capability, a read-only
    // system, no home directories, its own /tmp and no devices.
    out.push(PlannedFile::new(
        KOPS_CONTROLLER_UNIT,
        0o644,
        format!(
            "# Written by kops-rs nodeup.\n[Unit]\nDescription=kops-controller (node bootstrap: certificates and node configs for workers)\nAfter=network-online.target\n\n\
             [Service]\nEnvironmentFile={KOPS_CONTROLLER_ENV}\nExecStart=/opt/kops/bin/nodeup kops-controller --conf {CONFIG_PATH} --kubeconfig {KOPS_CONTROLLER_KUBECONFIG}\n\
             User={KOPS_CONTROLLER_UID}\nGroup={KOPS_CONTROLLER_UID}\n{KOPS_CONTROLLER_SANDBOX}\
             LimitNOFILE=65536\nRestart=always\nRestartSec=10s\nStartLimitInterval=0\n\n[Install]\nWantedBy=multi-user.target\n"
        ),
    ));
    Ok(out)
}

/// The environment file (`EnvironmentFile=`, mode 0600) of kops-rs' host
/// services that read the state store (kops-controller, the addon
/// applier): what kops gives its system components, `AWS_REGION` and
/// kops' custom S3 endpoint settings (`S3_ENDPOINT` and its credentials,
/// exported to nodeup by the control-plane user data). systemd reads it
/// as root before starting the service; no other local user can.
fn service_environment(region: Option<&str>, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    kops_api::env::forwarded_env(kops_api::env::EnvTarget::SystemComponent, region, lookup)
        .into_iter()
        .map(|(name, value)| format!("{name}={}\n", env_file_quote(&value)))
        .collect()
}

/// A value of a systemd environment file: as is when plain, else double
/// quoted with `\`, `"`, `$` and `` ` `` escaped (systemd's reading of
/// such a file expands no specifiers).
fn env_file_quote(value: &str) -> String {
    let plain = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-:/+=@,".contains(c));
    if plain {
        return value.to_string();
    }
    let mut out = String::from("\"");
    for c in value.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            out.push('\\');
        }
        if c == '\n' {
            out.push_str("\\n");
            continue;
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// kops-controller's unit, and its kubeconfig and client certificate.
const KOPS_CONTROLLER_UNIT: &str = "/etc/systemd/system/kops-controller.service";
/// Where its files are, and the user it runs as (kops' uid).
const KOPS_CONTROLLER_DIR: &str = "/etc/kubernetes/kops-controller/";
pub const KOPS_CONTROLLER_UID: u32 = 10011;
/// systemd's sandbox for kops-controller: no capability at all, no way to
/// gain one, the system read-only, private /tmp and /dev.
const KOPS_CONTROLLER_SANDBOX: &str = "NoNewPrivileges=yes\nCapabilityBoundingSet=\nAmbientCapabilities=\n\
    ProtectSystem=strict\nProtectHome=yes\nPrivateTmp=yes\nPrivateDevices=yes\n\
    ProtectKernelTunables=yes\nProtectKernelModules=yes\nProtectKernelLogs=yes\nProtectControlGroups=yes\n\
    ProtectClock=yes\nProtectHostname=yes\nRestrictSUIDSGID=yes\nRestrictNamespaces=yes\nLockPersonality=yes\n\
    RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK\nSystemCallArchitectures=native\n";
/// Its environment (the state store's settings and credentials), root-only.
const KOPS_CONTROLLER_ENV: &str = "/etc/sysconfig/kops-controller";
const KOPS_CONTROLLER_KUBECONFIG: &str = "/etc/kubernetes/kops-controller/kubeconfig";
const KOPS_CONTROLLER_CLIENT_CERT: &str = "/etc/kubernetes/kops-controller/client.crt";
const KOPS_CONTROLLER_CLIENT_KEY: &str = "/etc/kubernetes/kops-controller/client.key";

/// The addon applier's unit, kubeconfig and client certificate.
const CHANNELS_UNIT: &str = "/etc/systemd/system/kops-channels.service";
const CHANNELS_ENV: &str = "/etc/sysconfig/kops-channels";
const CHANNELS_KUBECONFIG: &str = "/var/lib/kops/kubeconfig";
const CHANNELS_CERT: &str = "/var/lib/kops/channels.crt";
const CHANNELS_KEY: &str = "/var/lib/kops/channels.key";

/// etcd-manager's flags on vSphere: the `external` volume provider (the
/// disk nodeup mounted under `/mnt/disks`, see [`super::vsphere::etcd`])
/// and a static config naming every member as its peer.
fn vsphere_etcd_flags(
    ctx: &Context<'_>,
    cluster: &str,
    etcd: &str,
) -> Result<Vec<String>, NodeupError> {
    use super::vsphere::etcd as disks;
    let disk = ctx
        .etcd_disks
        .iter()
        .find(|d| d.volume.etcd == etcd)
        .ok_or_else(|| NodeupError::Vsphere {
            reason: format!(
                "this control-plane VM has no disk for etcd `{etcd}` (guestinfo.kops.etcd); replace it with `kops rolling-update cluster` so it is cloned with one"
            ),
        })?;
    Ok(vec![
        format!(
            "--static-config={}",
            disks::static_config(cluster, disk, ctx.node_ip)
                .map_err(|reason| NodeupError::Vsphere { reason })?
        ),
        "--volume-provider=external".to_string(),
        format!("--volume-tag={}", disks::volume_tag(cluster, etcd)),
    ])
}

/// The etcd-manager image kops runs.
pub const ETCD_MANAGER_IMAGE: &str = "registry.k8s.io/etcd-manager/etcd-manager-slim:v3.0.20260707";

/// On a real node (`--root /`): reload systemd, apply sysctls, enable and
/// (re)start the units whose files changed.
pub fn start_services(changes: &[Change]) -> Result<ServiceAction, NodeupError> {
    let changed = |prefix: &str| {
        changes
            .iter()
            .any(|c| c.kind != ChangeKind::Unchanged && c.path.starts_with(prefix))
    };
    let run = |args: &[&str]| -> Result<(), NodeupError> {
        let command = args.join(" ");
        let status = std::process::Command::new(args[0])
            .args(&args[1..])
            .status()
            .map_err(|e| NodeupError::Service {
                command: command.clone(),
                reason: e.to_string(),
            })?;
        if status.success() {
            Ok(())
        } else {
            Err(NodeupError::Service {
                command,
                reason: status.to_string(),
            })
        }
    };
    run(&["systemctl", "daemon-reload"])?;
    if changed("/etc/sysctl.d/") {
        run(&["sysctl", "--system"])?;
    }
    let mut units = Vec::new();
    // The etcd disks' mount units (vSphere): nodeup mounted the disks;
    // enabled, they mount them again at boot.
    for change in changes {
        if let Some(unit) = change
            .path
            .strip_prefix("/etc/systemd/system/")
            .filter(|u| u.ends_with(".mount"))
        {
            run(&["systemctl", "enable", unit])?;
            units.push(unit.to_string());
        }
    }
    for (unit, prefixes) in [
        (
            "containerd.service",
            &[
                "/etc/containerd/",
                "/usr/local/bin/containerd",
                "/etc/systemd/system/containerd.service",
                "/usr/local/sbin/runc",
            ][..],
        ),
        (
            "kubelet.service",
            &[
                "/etc/sysconfig/kubelet",
                "/var/lib/kubelet/",
                "/usr/local/bin/kubelet",
                "/etc/systemd/system/kubelet.service",
                "/srv/kubernetes/ca.crt",
            ][..],
        ),
    ] {
        run(&["systemctl", "enable", "--now", unit])?;
        if prefixes.iter().any(|p| changed(p)) {
            run(&["systemctl", "restart", unit])?;
        }
        units.push(unit.to_string());
    }
    // Control-plane nodes only: the addon applier and kops-controller.
    for (unit, path, env, dir) in [
        (
            "kops-channels.service",
            CHANNELS_UNIT,
            CHANNELS_ENV,
            "/var/lib/kops/",
        ),
        (
            "kops-controller.service",
            KOPS_CONTROLLER_UNIT,
            KOPS_CONTROLLER_ENV,
            "/etc/kubernetes/kops-controller/",
        ),
    ] {
        if changes.iter().any(|c| c.path == path) {
            run(&["systemctl", "enable", "--now", unit])?;
            if changed(path) || changed(env) || changed(dir) {
                run(&["systemctl", "restart", unit])?;
            }
            units.push(unit.to_string());
        }
    }
    Ok(ServiceAction::Started { units })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_sets_only_labels_it_may() {
        for allowed in [
            "node.kubernetes.io/exclude-from-external-load-balancers",
            "kubernetes.io/arch",
            "example.com/team",
            "plain",
            "kops-rs.io/kops-controller",
        ] {
            assert!(kubelet_may_set(allowed), "{allowed}");
        }
        for refused in [
            "node-role.kubernetes.io/control-plane",
            "kops.k8s.io/kops-controller-pki",
            "kops.k8s.io/instancegroup",
            "kubernetes.io/role",
        ] {
            assert!(!kubelet_may_set(refused), "{refused}");
        }
    }

    #[test]
    fn flag_names() {
        assert_eq!(
            flag_name("serviceClusterIPRange"),
            "service-cluster-ip-range"
        );
        assert_eq!(flag_name("etcdServersOverrides"), "etcd-servers-overrides");
        assert_eq!(
            flag_name("enableAdmissionPlugins"),
            "enable-admission-plugins"
        );
        assert_eq!(
            flag_name("requestheaderAllowedNames"),
            "requestheader-allowed-names"
        );
        assert_eq!(flag_name("allocateNodeCIDRs"), "allocate-node-cidrs");
        assert_eq!(flag_name("logLevel"), "v");
    }

    /// kops-controller and the addon applier get kops' system-component
    /// variables, so they reach a custom S3 state store.
    #[test]
    fn host_services_get_custom_s3_variables() {
        let vars = |name: &str| {
            match name {
                "S3_ENDPOINT" => Some("http://127.0.0.1:45261"),
                "S3_REGION" => Some("us-east-1"),
                "S3_ACCESS_KEY_ID" => Some("test"),
                "S3_SECRET_ACCESS_KEY" => Some("a b\"%c"),
                _ => None,
            }
            .map(str::to_string)
        };
        assert_eq!(
            service_environment(Some("us-east-1"), &vars),
            "AWS_REGION=us-east-1\nS3_ACCESS_KEY_ID=test\n\
             S3_ENDPOINT=http://127.0.0.1:45261\nS3_REGION=us-east-1\n\
             S3_SECRET_ACCESS_KEY=\"a b\\\"%c\"\n"
        );
        assert_eq!(
            service_environment(Some("eu-west-1"), &|_| None),
            "AWS_REGION=eu-west-1\n"
        );
        assert_eq!(env_file_quote("a$b`c\\"), "\"a\\$b\\`c\\\\\"");
        assert_eq!(service_environment(None, &|_| None), "");
    }

    #[test]
    fn host_entries_go_in_kops_block_and_replace_only_their_names() {
        let records = vec![
            (
                "api.internal.c.k8s.local".to_string(),
                vec!["172.20.1.9".to_string(), "172.20.0.4".to_string()],
            ),
            (
                "kops-controller.internal.c.k8s.local".to_string(),
                vec!["172.20.0.4".to_string()],
            ),
        ];
        let first = with_host_entries("127.0.0.1 localhost\n\n\n", &records);
        assert_eq!(
            first,
            "127.0.0.1 localhost\n\n\
             # Begin host entries managed by kops - do not edit\n\
             172.20.0.4\tapi.internal.c.k8s.local kops-controller.internal.c.k8s.local\n\
             172.20.1.9\tapi.internal.c.k8s.local\n\
             # End host entries managed by kops\n"
        );
        assert_eq!(
            with_host_entries(&first, &records),
            first,
            "a second run changes nothing"
        );
        // New addresses replace the old ones; a name kops-rs does not set stays.
        let edited = first.replace("172.20.1.9\t", "10.0.0.1\tother.example.com\n172.20.1.9\t");
        let moved = vec![(
            "api.internal.c.k8s.local".to_string(),
            vec!["172.20.2.2".to_string()],
        )];
        let again = with_host_entries(&edited, &moved);
        assert!(again.contains("10.0.0.1\tother.example.com\n"), "{again}");
        assert!(
            again.contains("172.20.2.2\tapi.internal.c.k8s.local\n"),
            "{again}"
        );
        assert!(!again.contains("172.20.1.9"), "{again}");
        assert!(
            again.contains("172.20.0.4\tkops-controller.internal.c.k8s.local\n"),
            "{again}"
        );
        assert_eq!(again.matches("# Begin host entries").count(), 1, "{again}");
    }
}
