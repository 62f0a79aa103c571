//! The completed cluster spec (`cluster-completed.spec`): the user's spec
//! with every value kops' populate step derives filled in (network ranges,
//! stores, API access, and each component's options), so nodes and later
//! runs read one fully specified document instead of re-deriving defaults.
//!
//! Works on the spec as a JSON map in its `v1alpha2` shape, so fields this
//! crate does not model are completed too. Pure: what needs the cloud (the
//! hosted zone's id) comes in through [`PopulateOptions`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::{json, Map, Value};

use crate::cluster::Cluster;
use crate::field_error::FieldError;
use crate::instance_group::{InstanceGroup, Role};
use crate::store_path;
use crate::version::KubernetesVersion;

/// What populating needs beyond the spec itself.
#[derive(Debug, Clone, Default)]
pub struct PopulateOptions<'a> {
    /// The cluster's directory in the state store, used when the spec names none.
    pub config_base: &'a str,
    /// The cluster's instance groups (where the API servers run decides
    /// between an API DNS name and a load balancer); `None` when unknown.
    pub instance_groups: Option<&'a [InstanceGroup]>,
    /// The id of the hosted zone found for the cluster's name, when the
    /// spec names no `dnsZone` and the cloud was asked.
    pub dns_zone_id: Option<&'a str>,
}

/// The completed spec for `cluster`. A spec that cannot be completed (no
/// object shape) comes back unchanged.
pub fn completed_spec(cluster: &Cluster, options: &PopulateOptions<'_>) -> Cluster {
    // A spec whose ranges cannot be assigned is refused by validation.
    let cluster = &with_gce_network_ranges(cluster).unwrap_or_else(|_| cluster.clone());
    map_spec(cluster, |spec| Populate::new(cluster, options).run(spec))
}

/// `cluster` with the API access kops' populate step defaults (see
/// `Populate::api_access`) and nothing else completed: what the cloud
/// model builds from, as kops builds from its completed cluster, so a
/// private control plane without `spec.api` gets its API load balancer.
pub fn with_api_access(cluster: &Cluster, groups: Option<&[InstanceGroup]>) -> Cluster {
    let options = PopulateOptions {
        instance_groups: groups,
        ..Default::default()
    };
    map_spec(cluster, |spec| {
        let had_api = spec.contains_key("api");
        Populate::new(cluster, &options).api_access(spec);
        if !had_api
            && spec
                .get("api")
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
        {
            spec.remove("api");
        }
    })
}

/// `cluster` with the network ranges kops' populate step gives a Google
/// Cloud cluster whose network does not exist yet
/// ([`crate::gce::assign_network`] with no range in use: the one place
/// these ranges are assigned, for `create cluster`, the model and the
/// completed spec alike); a cluster of another cloud comes back unchanged.
pub fn with_gce_network_ranges(cluster: &Cluster) -> Result<Cluster, FieldError> {
    let mut out = cluster.clone();
    if out.spec.cloud_provider.as_deref() == Some("gce") {
        crate::gce::assign_network(&mut out, &[])?;
    }
    Ok(out)
}

/// `cluster` with `change` applied to its spec as kops' untyped form; a
/// spec without an object shape comes back unchanged.
fn map_spec(cluster: &Cluster, change: impl FnOnce(&mut Map<String, Value>)) -> Cluster {
    let Ok(Value::Object(mut root)) = serde_json::to_value(cluster) else {
        return cluster.clone();
    };
    let mut spec = match root.remove("spec") {
        Some(Value::Object(s)) => s,
        _ => Map::new(),
    };
    change(&mut spec);
    root.insert("spec".into(), Value::Object(spec));
    serde_json::from_value(Value::Object(root)).unwrap_or_else(|_| cluster.clone())
}

const DEFAULT_REGISTRY: &str = "registry.k8s.io";
const SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.10.1";
const EVICTION_HARD: &str = "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<10%,imagefs.inodesFree<5%";

struct Populate<'a> {
    name: String,
    options: &'a PopulateOptions<'a>,
    version: KubernetesVersion,
}

impl<'a> Populate<'a> {
    fn new(cluster: &Cluster, options: &'a PopulateOptions<'a>) -> Self {
        let version = cluster
            .spec
            .kubernetes_version
            .as_deref()
            .and_then(KubernetesVersion::parse)
            .unwrap_or_else(|| crate::version::recommended(None));
        Populate {
            name: cluster.name().to_string(),
            options,
            version,
        }
    }

    fn lt(&self, minor: u64) -> bool {
        (self.version.major, self.version.minor) < (1, minor)
    }

    fn run(&self, spec: &mut Map<String, Value>) {
        dropped_fields(spec);
        self.cluster_defaults(spec);
        self.assign_ranges(spec);
        self.assignments(spec);
        self.stores_and_api(spec);
        // The component option builders, in kops' order.
        set_default(spec, "clusterDNSDomain", json!("cluster.local"));
        let cp_kubelet = merged(spec.get("kubelet"), spec.get("masterKubelet"));
        spec.insert("masterKubelet".into(), Value::Object(cp_kubelet));
        self.etcd(spec);
        self.kube_api_server(spec);
        self.containerd(spec);
        self.kube_dns(spec);
        self.kubelets(spec);
        self.kube_controller_manager(spec);
        self.kube_scheduler(spec);
        self.kube_proxy(spec);
        self.cloud_config(spec);
        self.networking(spec);
        self.discovery(spec);
        self.cluster_autoscaler(spec);
        self.node_termination_handler(spec);
        self.node_problem_detector(spec);
        self.cloud_controller_manager(spec);
        self.karpenter(spec);
    }

    /// What reading a v1alpha2 spec defaults: DNS topology, an API block,
    /// RBAC, the channel.
    fn cluster_defaults(&self, spec: &mut Map<String, Value>) {
        let topology = obj(spec, "topology");
        let dns = obj(topology, "dns");
        set_default(dns, "type", json!("Public"));
        if !is_openstack(spec) {
            obj(spec, "api");
        }
        let authz = obj(spec, "authorization");
        if authz.is_empty() {
            authz.insert("rbac".into(), json!({}));
        }
        set_default(spec, "channel", json!("stable"));
        if let Some(Value::Object(flannel)) = spec
            .get_mut("networking")
            .and_then(|n| n.get_mut("flannel"))
        {
            set_default(flannel, "backend", json!("udp"));
        }
        if let Some(Value::Object(iam)) = spec.get_mut("iam") {
            set_default(iam, "legacy", json!(false));
        }
    }

    /// Pod and service ranges derived from the non-masquerade range.
    fn assign_ranges(&self, spec: &mut Map<String, Value>) {
        let Some(non_masq) = str_at(spec, "nonMasqueradeCIDR").map(str::to_string) else {
            return;
        };
        let ipv6 = non_masq.contains(':');
        if !ipv6 && str_at(spec, "podCIDR").is_none() {
            if let Some(pod) = upper_half(&non_masq) {
                spec.insert("podCIDR".into(), json!(pod));
            }
        }
        let service = if ipv6 {
            "fd00:5e4f:ce::/108"
        } else {
            "100.64.0.0/13"
        };
        set_default(spec, "serviceClusterIPRange", json!(service));
    }

    fn assignments(&self, spec: &mut Map<String, Value>) {
        if let Some(Value::Array(etcd)) = spec.get_mut("etcdClusters") {
            for c in etcd.iter_mut().filter_map(Value::as_object_mut) {
                set_default(obj(c, "manager"), "backupRetentionDays", json!(90));
            }
        }
        let aws = is_aws(spec);
        if aws && str_at(spec, "networkCIDR").is_none() && str_at(spec, "networkID").is_none() {
            spec.insert("networkCIDR".into(), json!("172.20.0.0/16"));
        }
        set_default(spec, "nonMasqueradeCIDR", json!("100.64.0.0/10"));
        if self.dns_type(spec) == "Public" {
            set_default(
                spec,
                "masterPublicName",
                json!(format!("api.{}", self.name)),
            );
        }
        // The version without its `v` (the channel's recommended one when
        // the spec names none).
        let version = str_at(spec, "kubernetesVersion")
            .map(str::to_string)
            .unwrap_or_else(|| self.version.to_string());
        let trimmed = version.trim().trim_start_matches('v').to_string();
        spec.insert("kubernetesVersion".into(), json!(trimmed));
    }

    fn stores_and_api(&self, spec: &mut Map<String, Value>) {
        // kops writes the stores (and a configBase it reads from the
        // registry) as the paths it parsed: bare for a local directory.
        let base = match str_at(spec, "configBase") {
            Some(given) => given.trim_end_matches('/').to_string(),
            None => store_path::written(self.options.config_base),
        };
        set_default(spec, "configBase", json!(base));
        set_default(spec, "keyStore", json!(store_path::join(&base, "pki")));
        set_default(
            spec,
            "secretStore",
            json!(store_path::join(&base, "secrets")),
        );

        self.api_access(spec);

        let none_dns = self.uses_none_dns(spec);
        if str_at(spec, "dnsZone").is_none() && !none_dns && !self.is_gossip() {
            if let Some(zone) = self.options.dns_zone_id {
                spec.insert("dnsZone".into(), json!(zone));
            }
        }
        if !none_dns {
            if str_at(spec, "dnsZone").is_some() {
                set_default(
                    spec,
                    "masterPublicName",
                    json!(format!("api.{}", self.name)),
                );
            }
            set_default(
                obj(spec, "externalDns"),
                "provider",
                json!("dns-controller"),
            );
        }
    }

    /// The API access kops defaults when the spec sets neither `api.dns`
    /// nor `api.loadBalancer`: a load balancer when an API server runs in a
    /// private subnet, else a DNS name (not on OpenStack); a load
    /// balancer's type `Public` and, on AWS, class `Classic`.
    fn api_access(&self, spec: &mut Map<String, Value>) {
        if !is_openstack(spec) {
            let subnet_types: Vec<(String, String)> = arr(spec, "subnets")
                .iter()
                .map(|s| {
                    (
                        str_of(s, "name").unwrap_or_default().to_string(),
                        str_of(s, "type").unwrap_or_default().to_string(),
                    )
                })
                .collect();
            let api = obj(spec, "api");
            if api.get("dns").is_none() && api.get("loadBalancer").is_none() {
                let (mut dns, mut lb) = (false, false);
                let mut consider = |subnets: &[String]| {
                    for s in subnets {
                        match subnet_types
                            .iter()
                            .find(|(n, _)| n == s)
                            .map(|t| t.1.as_str())
                        {
                            Some("Private") => lb = true,
                            Some("Public") => dns = true,
                            _ => {}
                        }
                    }
                };
                match self.options.instance_groups {
                    Some(groups) => {
                        let api_nodes = groups.iter().any(|g| g.role() == Some(Role::ApiServer));
                        for g in groups {
                            let role = g.role();
                            if role == Some(Role::ApiServer)
                                || (!api_nodes && role == Some(Role::ControlPlane))
                            {
                                consider(g.spec.subnets.as_deref().unwrap_or_default());
                            }
                        }
                    }
                    None => {
                        let all: Vec<String> = subnet_types.iter().map(|t| t.0.clone()).collect();
                        consider(&all);
                    }
                }
                if lb {
                    api.insert("loadBalancer".into(), json!({}));
                } else if dns {
                    api.insert("dns".into(), json!({}));
                }
            }
            if let Some(Value::Object(lb)) = api.get_mut("loadBalancer") {
                set_default(lb, "type", json!("Public"));
            }
        }
        let aws = is_aws(spec);
        if let Some(Value::Object(lb)) = obj(spec, "api").get_mut("loadBalancer") {
            if aws {
                set_default(lb, "class", json!("Classic"));
            }
        }
    }

    fn is_gossip(&self) -> bool {
        self.name.ends_with(".k8s.local")
    }

    fn uses_none_dns(&self, spec: &Map<String, Value>) -> bool {
        self.dns_type(spec) == "None"
    }

    /// `topology.dns.type` (`Public` when unset).
    fn dns_type<'s>(&self, spec: &'s Map<String, Value>) -> &'s str {
        spec.get("topology")
            .and_then(|t| t.get("dns"))
            .and_then(|d| str_of(d, "type"))
            .unwrap_or("Public")
    }

    fn image(&self, spec: &Map<String, Value>, component: &str) -> String {
        remap_image(
            spec,
            &format!("{DEFAULT_REGISTRY}/{component}:{}", self.version),
        )
    }

    fn etcd(&self, spec: &mut Map<String, Value>) {
        let version = if self.lt(34) {
            "3.5.31"
        } else if self.lt(37) {
            "3.6.12"
        } else {
            "3.7.0"
        };
        if self.lt(36) && !self.lt(32) {
            let gates = obj(obj(spec, "masterKubelet"), "featureGates");
            set_default(gates, "ImageVolume", json!("true"));
        }
        let base = str_at(spec, "configBase").unwrap_or_default().to_string();
        if let Some(Value::Array(etcd)) = spec.get_mut("etcdClusters") {
            for c in etcd.iter_mut().filter_map(Value::as_object_mut) {
                set_default(c, "version", json!(version));
                let name = str_at(c, "name").unwrap_or_default().to_string();
                let backups = obj(c, "backups");
                let mut store = base.clone();
                for part in ["backups", "etcd", &name] {
                    if !store.ends_with('/') {
                        store.push('/');
                    }
                    store.push_str(part);
                }
                set_default(backups, "backupStore", json!(store));
            }
        }
    }

    fn kube_api_server(&self, spec: &mut Map<String, Value>) {
        let main_members = arr(spec, "etcdClusters")
            .iter()
            .find(|c| str_of(c, "name") == Some("main"))
            .map_or(0, |c| arr_of(c, "etcdMembers").len());
        let etcd_major = arr(spec, "etcdClusters")
            .first()
            .and_then(|c| str_of(c, "version"))
            .and_then(|v| v.trim_start_matches('v').split('.').next())
            .unwrap_or("3")
            .to_string();
        let etcd_names: Vec<String> = arr(spec, "etcdClusters")
            .iter()
            .filter_map(|c| str_of(c, "name").map(str::to_string))
            .collect();
        let kopeio_authn = spec
            .get("authentication")
            .and_then(|a| a.get("kopeio"))
            .is_some();
        let authz = spec.get("authorization").cloned().unwrap_or(json!({}));
        let ipv6 = is_ipv6_only(spec);
        let service_range = str_at(spec, "serviceClusterIPRange").map(str::to_string);
        let metrics_server = spec
            .get("metricsServer")
            .and_then(|m| m.get("enabled"))
            .and_then(Value::as_bool)
            == Some(true);
        let image = self.image(spec, "kube-apiserver");
        let c = obj(spec, "kubeAPIServer");
        set_default(c, "apiServerCount", json!(main_members));
        set_default(c, "storageBackend", json!(format!("etcd{etcd_major}")));
        set_default(
            c,
            "kubeletPreferredAddressTypes",
            json!(["InternalIP", "Hostname", "ExternalIP"]),
        );
        if kopeio_authn {
            c.insert(
                "authenticationTokenWebhookConfigFile".into(),
                json!("/etc/kubernetes/authn.config"),
            );
        }
        if authz.get("alwaysAllow").is_some() {
            c.insert("authorizationMode".into(), json!("AlwaysAllow"));
        } else if authz.get("rbac").is_some() {
            c.insert("authorizationMode".into(), json!("Node,RBAC"));
        }
        c.insert("requestheaderAllowedNames".into(), json!(["aggregator"]));
        c.insert(
            "requestheaderExtraHeaderPrefixes".into(),
            json!(["X-Remote-Extra-"]),
        );
        c.insert(
            "requestheaderGroupHeaders".into(),
            json!(["X-Remote-Group"]),
        );
        c.insert(
            "requestheaderUsernameHeaders".into(),
            json!(["X-Remote-User"]),
        );
        c.insert("image".into(), json!(image));
        if self.lt(33) {
            c.insert("cloudProvider".into(), json!("external"));
        }
        c.insert("logLevel".into(), json!(2));
        c.insert("securePort".into(), json!(443));
        c.insert(
            "bindAddress".into(),
            json!(if ipv6 { "::" } else { "0.0.0.0" }),
        );
        c.insert("allowPrivileged".into(), json!(true));
        if let Some(r) = service_range {
            c.insert("serviceClusterIPRange".into(), json!(r));
        }
        let mut servers = Vec::new();
        let mut overrides = Vec::new();
        for n in &etcd_names {
            match n.as_str() {
                "main" => servers.push(json!("https://127.0.0.1:4001")),
                "events" => overrides.push(json!("/events#https://127.0.0.1:4002")),
                "leases" => {
                    overrides.push(json!("coordination.k8s.io/leases#https://127.0.0.1:4003"))
                }
                _ => {}
            }
        }
        c.remove("etcdServers");
        c.remove("etcdServersOverrides");
        if !servers.is_empty() {
            c.insert("etcdServers".into(), Value::Array(servers));
        }
        if !overrides.is_empty() {
            c.insert("etcdServersOverrides".into(), Value::Array(overrides));
        }
        let mut plugins: Vec<Value> = [
            "DefaultStorageClass",
            "DefaultTolerationSeconds",
            "LimitRanger",
            "MutatingAdmissionWebhook",
            "NamespaceLifecycle",
            "NodeRestriction",
            "ResourceQuota",
            "RuntimeClass",
            "ServiceAccount",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionWebhook",
        ]
        .iter()
        .map(|p| json!(p))
        .collect();
        if let Some(Value::Array(extra)) = c.get("appendAdmissionPlugins") {
            plugins.extend(extra.iter().cloned());
        }
        c.insert("enableAdmissionPlugins".into(), Value::Array(plugins));
        c.insert("anonymousAuth".into(), json!(false));
        c.remove("insecureBindAddress");
        c.remove("insecurePort");
        if metrics_server {
            set_default(c, "enableAggregatorRouting", json!(true));
        }
    }

    fn containerd(&self, spec: &mut Map<String, Value>) {
        let sandbox = remap_image(spec, SANDBOX_IMAGE);
        let c = obj(spec, "containerd");
        if str_at(c, "version").is_none() {
            c.insert("version".into(), json!("2.3.4"));
            c.insert("runc".into(), json!({"version": "1.4.3"}));
        }
        c.insert("logLevel".into(), json!("info"));
        if str_at(c, "sandboxImage").is_none() {
            c.insert("sandboxImage".into(), json!(sandbox));
        }
        if let Some(Value::Object(gpu)) = c.get_mut("nvidiaGPU") {
            if gpu.get("enabled").and_then(Value::as_bool) == Some(true) {
                set_default(gpu, "package", json!("nvidia-driver-535-server"));
                set_default(
                    gpu,
                    "image",
                    json!("nvcr.io/nvidia/k8s-device-plugin:v0.17.3"),
                );
            }
        }
    }

    fn kube_dns(&self, spec: &mut Map<String, Value>) {
        let server_ip = str_at(spec, "serviceClusterIPRange").and_then(|r| service_ip(r, 10));
        let domain = str_at(spec, "clusterDNSDomain")
            .unwrap_or("cluster.local")
            .to_string();
        let ipv6 = is_ipv6_only(spec);
        let aws = is_aws(spec);
        let d = obj(spec, "kubeDNS");
        set_default(d, "provider", json!("CoreDNS"));
        set_nonzero(d, "cacheMaxSize", json!(1000));
        set_nonzero(d, "cacheMaxConcurrent", json!(150));
        if let Some(ip) = server_ip {
            set_default(d, "serverIP", json!(ip));
        }
        set_default(d, "domain", json!(domain));
        set_default(d, "memoryRequest", json!("70Mi"));
        set_default(d, "cpuRequest", json!("100m"));
        set_default(d, "memoryLimit", json!("170Mi"));
        if ipv6 && aws && arr_of_map(d, "upstreamNameservers").is_empty() {
            d.insert("upstreamNameservers".into(), json!(["fd00:ec2::253"]));
        }
        let n = obj(d, "nodeLocalDNS");
        set_default(n, "enabled", json!(false));
        if n.get("enabled").and_then(Value::as_bool) == Some(true) {
            let ip = if ipv6 {
                "fd00:90de:d95::1"
            } else {
                "169.254.20.10"
            };
            set_default(n, "localIP", json!(ip));
            set_default(n, "forwardToKubeDNS", json!(false));
        }
        set_default(n, "memoryRequest", json!("5Mi"));
        set_default(n, "cpuRequest", json!("25m"));
        set_default(
            n,
            "image",
            json!("registry.k8s.io/dns/k8s-dns-node-cache:1.26.0"),
        );
    }

    fn kubelets(&self, spec: &mut Map<String, Value>) {
        let domain = str_at(spec, "clusterDNSDomain")
            .unwrap_or("cluster.local")
            .to_string();
        let node_local = spec
            .get("kubeDNS")
            .and_then(|d| d.get("nodeLocalDNS"))
            .filter(|n| n.get("enabled").and_then(Value::as_bool) == Some(true))
            .and_then(|n| str_of(n, "localIP"))
            .map(str::to_string);
        let cluster_dns = node_local
            .or_else(|| str_at(spec, "serviceClusterIPRange").and_then(|r| service_ip(r, 10)));
        let amazon_vpc = networking_has(spec, "amazonvpc");
        let isolate = spec.get("isolateMasters").and_then(Value::as_bool) == Some(true);
        let gce = is_gce(spec);
        for key in ["kubelet", "masterKubelet"] {
            let k = obj(spec, key);
            if gce {
                k.insert("hairpinMode".into(), json!("promiscuous-bridge"));
            }
            k.insert("enableDebuggingHandlers".into(), json!(true));
            k.insert("podManifestPath".into(), json!("/etc/kubernetes/manifests"));
            k.insert("logLevel".into(), json!(2));
            k.insert("clusterDomain".into(), json!(domain));
            k.remove("allowPrivileged");
            if let Some(ip) = &cluster_dns {
                set_default(k, "clusterDNS", json!(ip));
            }
            set_default(k, "evictionHard", json!(EVICTION_HARD));
            k.insert(
                "kubeconfigPath".into(),
                json!("/var/lib/kubelet/kubeconfig"),
            );
            k.insert("cgroupRoot".into(), json!("/"));
            k.insert("cloudProvider".into(), json!("external"));
            k.insert("cgroupDriver".into(), json!("systemd"));
            set_default(k, "protectKernelDefaults", json!(true));
            if amazon_vpc {
                k.insert("shutdownGracePeriod".into(), json!("0s"));
                k.insert("shutdownGracePeriodCriticalPods".into(), json!("0s"));
            } else if k.get("shutdownGracePeriod").is_none() {
                k.insert("shutdownGracePeriod".into(), json!("30s"));
                k.insert("shutdownGracePeriodCriticalPods".into(), json!("10s"));
            }
            if self.lt(34) {
                k.insert("registerSchedulable".into(), json!(true));
            }
        }
        let cp = obj(spec, "masterKubelet");
        cp.insert("enableDebuggingHandlers".into(), json!(!isolate));
        if isolate {
            cp.insert("hairpinMode".into(), json!("none"));
        }
    }

    fn kube_controller_manager(&self, spec: &mut Map<String, Value>) {
        let ipv6 = is_ipv6_only(spec);
        let pod_cidr = str_at(spec, "podCIDR").map(str::to_string);
        let image = self.image(spec, "kube-controller-manager");
        let routes = configure_cloud_routes(spec);
        let name = self.name.clone();
        let k = obj(spec, "kubeControllerManager");
        match str_at(k, "attachDetachReconcileSyncPeriod") {
            None | Some("0s") => {
                k.insert("attachDetachReconcileSyncPeriod".into(), json!("1m0s"));
            }
            _ => {}
        }
        k.insert("clusterName".into(), json!(name));
        k.insert("cloudProvider".into(), json!("external"));
        set_nonzero(k, "logLevel", json!(2));
        k.insert("image".into(), json!(image));
        k.insert("leaderElection".into(), json!({"leaderElect": true}));
        k.insert("allocateNodeCIDRs".into(), json!(!ipv6));
        if !ipv6 && str_at(k, "clusterCIDR").is_none() {
            if let Some(p) = pod_cidr {
                k.insert("clusterCIDR".into(), json!(p));
            }
        }
        if let Some(size) = str_at(k, "clusterCIDR")
            .filter(|c| c.contains(':'))
            .and_then(|c| c.split_once('/'))
            .and_then(|(_, bits)| bits.parse::<u32>().ok())
        {
            let node = ((128 - size) / 2).min(16);
            k.insert("nodeCIDRMaskSize".into(), json!(size + node));
        }
        if let Some(r) = routes {
            k.insert("configureCloudRoutes".into(), json!(r));
        }
        set_default(k, "useServiceAccountCredentials", json!(true));
        if ipv6 && arr_of_map(k, "controllers").is_empty() {
            k.insert("controllers".into(), json!(["*", "-nodeipam"]));
        }
    }

    fn kube_scheduler(&self, spec: &mut Map<String, Value>) {
        let image = self.image(spec, "kube-scheduler");
        let s = obj(spec, "kubeScheduler");
        set_nonzero(s, "logLevel", json!(2));
        set_default(s, "image", json!(image));
        set_default(s, "leaderElection", json!({"leaderElect": true}));
    }

    fn kube_proxy(&self, spec: &mut Map<String, Value>) {
        let image = self.image(spec, "kube-proxy");
        let kcm_cidr = spec
            .get("kubeControllerManager")
            .and_then(|k| str_of(k, "clusterCIDR"))
            .map(str::to_string);
        let needs_cidr = !is_ipv6_only(spec) && !networking_has(spec, "amazonvpc");
        let p = obj(spec, "kubeProxy");
        set_nonzero(p, "logLevel", json!(2));
        set_default(p, "cpuRequest", json!("100m"));
        p.insert("image".into(), json!(image));
        if needs_cidr {
            if let Some(c) = kcm_cidr {
                set_default(p, "clusterCIDR", json!(c));
            }
        }
    }

    fn cloud_config(&self, spec: &mut Map<String, Value>) {
        let aws = is_aws(spec);
        let gce = is_gce(spec);
        let c = obj(spec, "cloudConfig");
        set_default(c, "manageStorageClasses", json!(true));
        if gce {
            // Nodes of every zone of the region, found by their network tag.
            c.insert("multizone".into(), json!(true));
            c.insert(
                "nodeTags".into(),
                json!(crate::names::gce_tag_for_role(&self.name, "node")),
            );
            let pd = obj(c, "gcpPDCSIDriver");
            set_default(pd, "enabled", json!(true));
            set_default(pd, "defaultStorageClassName", json!("balanced-csi"));
            set_default(pd, "version", json!("v1.22.1"));
        }
        if aws {
            let ebs = obj(c, "awsEBSCSIDriver");
            // kops writes the driver's switch only when it is off.
            if ebs.get("enabled").and_then(Value::as_bool) == Some(true) {
                ebs.remove("enabled");
            }
            set_default(ebs, "version", json!("v1.58.0"));
        }
        if aws && is_ipv6_only(spec) {
            let c = obj(spec, "cloudConfig");
            if arr_of_map(c, "nodeIPFamilies").is_empty() {
                c.insert("nodeIPFamilies".into(), json!(["ipv6", "ipv4"]));
            }
        }
    }

    fn networking(&self, spec: &mut Map<String, Value>) {
        let ipv6 = is_ipv6_only(spec);
        let ranges: Vec<Value> = ["networkCIDR", "podCIDR", "serviceClusterIPRange"]
            .iter()
            .filter_map(|k| str_at(spec, k).map(|v| json!(v)))
            .collect();
        let aws = is_aws(spec);
        let Some(Value::Object(net)) = spec.get_mut("networking") else {
            return;
        };
        if let Some(Value::Object(c)) = net.get_mut("cilium") {
            cilium_defaults(c, ipv6);
        }
        if let Some(Value::Object(c)) = net.get_mut("calico") {
            c.insert(
                "encapsulationMode".into(),
                json!(if ipv6 { "none" } else { "ipip" }),
            );
        }
        if let Some(Value::Object(k)) = net.get_mut("kindnet") {
            set_default(k, "version", json!("v1.0.1"));
            if k.get("masquerade").is_none() {
                let m = if ipv6 {
                    let mut m = json!({"enabled": false});
                    if !aws {
                        k.insert("nat64".into(), json!(true));
                    }
                    m.as_object_mut().map(std::mem::take).unwrap_or_default()
                } else {
                    let mut m = Map::new();
                    m.insert("enabled".into(), json!(true));
                    if !ranges.is_empty() {
                        m.insert("nonMasqueradeCIDRs".into(), Value::Array(ranges));
                    }
                    m
                };
                k.insert("masquerade".into(), Value::Object(m));
            }
            set_default(k, "fastPathThreshold", json!(0));
            set_default(k, "logLevel", json!(2));
        }
    }

    fn discovery(&self, spec: &mut Map<String, Value>) {
        let issuer = {
            let api = spec.get("kubeAPIServer");
            api.and_then(|a| str_of(a, "serviceAccountIssuer"))
                .map(str::to_string)
        };
        let issuer = issuer.unwrap_or_else(|| self.issuer(spec));
        let a = obj(spec, "kubeAPIServer");
        if arr_of_map(a, "apiAudiences").is_empty() {
            a.insert("apiAudiences".into(), json!(["kubernetes.svc.default"]));
        }
        a.insert("serviceAccountIssuer".into(), json!(issuer));
        a.insert(
            "serviceAccountJWKSURI".into(),
            json!(format!("{issuer}/openid/v1/jwks")),
        );
    }

    /// kops' service-account issuer when the spec names none.
    fn issuer(&self, spec: &Map<String, Value>) -> String {
        let said = spec.get("serviceAccountIssuerDiscovery");
        if let Some(store) = said
            .and_then(|s| str_of(s, "discoveryStore"))
            .filter(|s| !s.is_empty())
        {
            let region = arr(spec, "subnets")
                .iter()
                .filter_map(|s| str_of(s, "zone"))
                .find_map(crate::zones::aws_region)
                .unwrap_or_default();
            if let Some(url) =
                crate::cluster::discovery_store_url(store, &region, is_ipv6_only(spec))
            {
                return url;
            }
        }
        if let Some(url) = said
            .and_then(|s| s.get("discoveryService"))
            .and_then(|d| str_of(d, "url"))
        {
            return url.to_string();
        }
        let anonymous = spec
            .get("kubeAPIServer")
            .and_then(|a| a.get("anonymousAuth"))
            .and_then(Value::as_bool)
            == Some(true);
        let access = spec
            .get("api")
            .and_then(|a| a.get("access"))
            .or_else(|| spec.get("kubernetesApiAccess"));
        let open = access
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|c| c == "0.0.0.0/0" || c == "::/0"));
        match str_at(spec, "masterPublicName") {
            Some(name) if anonymous && open => format!("https://{name}"),
            _ => format!("https://api.internal.{}", self.name),
        }
    }

    fn cluster_autoscaler(&self, spec: &mut Map<String, Value>) {
        let minor = self.version.minor;
        let Some(Value::Object(c)) = spec.get_mut("clusterAutoscaler") else {
            return;
        };
        if c.get("enabled").and_then(Value::as_bool) != Some(true) {
            return;
        }
        let image = match minor {
            32 => "v1.32.7",
            33 => "v1.33.5",
            34 => "v1.34.4",
            35 => "v1.35.1",
            _ => "v1.36.0",
        };
        set_default(
            c,
            "image",
            json!(format!(
                "registry.k8s.io/autoscaling/cluster-autoscaler:{image}"
            )),
        );
        set_default(c, "expander", json!("random"));
        for (k, v) in [
            ("ignoreDaemonSetsUtilization", json!(false)),
            ("scaleDownUtilizationThreshold", json!("0.5")),
            ("skipNodesWithCustomControllerPods", json!(true)),
            ("skipNodesWithLocalStorage", json!(true)),
            ("skipNodesWithSystemPods", json!(true)),
            ("balanceSimilarNodeGroups", json!(false)),
            ("emitPerNodegroupMetrics", json!(false)),
            ("awsUseStaticInstanceList", json!(false)),
            ("newPodScaleUpDelay", json!("0s")),
            ("scaleDownDelayAfterAdd", json!("10m0s")),
            ("scaleDownUnneededTime", json!("10m0s")),
            ("scaleDownUnreadyTime", json!("20m0s")),
            ("maxNodeProvisionTime", json!("15m0s")),
        ] {
            set_default(c, k, v);
        }
        if str_at(c, "expander") == Some("priority") {
            c.insert("createPriorityExpanderConfig".into(), json!(true));
        }
    }

    fn node_termination_handler(&self, spec: &mut Map<String, Value>) {
        if !is_aws(spec) {
            return;
        }
        let karpenter = spec
            .get("karpenter")
            .and_then(|k| k.get("enabled"))
            .and_then(Value::as_bool)
            == Some(true);
        if karpenter {
            return;
        }
        let n = obj(spec, "nodeTerminationHandler");
        set_default(n, "enabled", json!(true));
        if n.get("enabled").and_then(Value::as_bool) != Some(true) {
            return;
        }
        for (k, v) in [
            ("deleteSQSMsgIfNodeNotFound", json!(false)),
            ("enableSpotInterruptionDraining", json!(true)),
            ("enableScheduledEventDraining", json!(true)),
            ("enableRebalanceMonitoring", json!(false)),
            ("enableRebalanceDraining", json!(false)),
            ("enableOutOfServiceTaint", json!(false)),
            ("prometheusEnable", json!(false)),
            ("excludeFromLoadBalancers", json!(true)),
            (
                "managedASGTag",
                json!("aws-node-termination-handler/managed"),
            ),
            ("podTerminationGracePeriod", json!(-1)),
            ("taintNode", json!(false)),
            ("cpuRequest", json!("50m")),
            ("memoryRequest", json!("64Mi")),
            ("version", json!("v1.25.5")),
        ] {
            set_default(n, k, v);
        }
    }

    fn node_problem_detector(&self, spec: &mut Map<String, Value>) {
        let Some(Value::Object(n)) = spec.get_mut("nodeProblemDetector") else {
            return;
        };
        for (k, v) in [
            ("enabled", json!(false)),
            ("cpuRequest", json!("20m")),
            ("memoryRequest", json!("100Mi")),
            ("memoryLimit", json!("100Mi")),
            (
                "image",
                json!("registry.k8s.io/node-problem-detector/node-problem-detector:v0.8.18"),
            ),
        ] {
            set_default(n, k, v);
        }
    }

    fn cloud_controller_manager(&self, spec: &mut Map<String, Value>) {
        if is_gce(spec) {
            self.gcp_cloud_controller_manager(spec);
            return;
        }
        if !is_aws(spec) {
            return;
        }
        let ipv6 = is_ipv6_only(spec);
        let pod_cidr = str_at(spec, "podCIDR").map(str::to_string);
        let routes = configure_cloud_routes(spec);
        let name = self.name.clone();
        let c = obj(spec, "cloudControllerManager");
        c.insert("leaderElection".into(), json!({"leaderElect": true}));
        c.insert("clusterName".into(), json!(name));
        c.insert("allocateNodeCIDRs".into(), json!(!ipv6));
        if !ipv6 && str_at(c, "clusterCIDR").is_none() {
            if let Some(p) = pod_cidr {
                c.insert("clusterCIDR".into(), json!(p));
            }
        }
        if let Some(r) = routes {
            c.insert("configureCloudRoutes".into(), json!(r));
        }
        set_default(
            c,
            "image",
            json!("registry.k8s.io/provider-aws/cloud-controller-manager:v1.36.1"),
        );
    }

    /// The Google Cloud controller manager's options: the cluster's name as
    /// Google Cloud accepts it, node ranges allocated by the cloud.
    fn gcp_cloud_controller_manager(&self, spec: &mut Map<String, Value>) {
        let pod_cidr = str_at(spec, "podCIDR").map(str::to_string);
        let ip_aliases = gce_uses_ip_aliases(spec);
        // kops-controller gives IPv6-only clusters their pod ranges (its
        // cloud IPAM), so the controller manager's own IPAM and routes
        // are off there, as kops sets them.
        let kops_controller_ipam = is_ipv6_only(spec);
        let name = crate::names::gce_safe_cluster_name(&self.name);
        let c = obj(spec, "cloudControllerManager");
        c.insert("leaderElection".into(), json!({"leaderElect": true}));
        c.insert("clusterName".into(), json!(name));
        c.insert("allocateNodeCIDRs".into(), json!(true));
        c.insert("cidrAllocatorType".into(), json!("CloudAllocator"));
        if str_at(c, "clusterCIDR").is_none() {
            if let Some(p) = pod_cidr {
                c.insert("clusterCIDR".into(), json!(p));
            }
        }
        if ip_aliases {
            c.insert("configureCloudRoutes".into(), json!(false));
        }
        if c.get("controllers").is_none() {
            let controllers = if kops_controller_ipam {
                json!(["*", "-node-ipam-controller", "-node-route-controller"])
            } else {
                json!(["*"])
            };
            c.insert("controllers".into(), controllers);
        }
        set_default(
            c,
            "image",
            json!("registry.k8s.io/cloud-provider-gcp/cloud-controller-manager:v35.0.0"),
        );
    }

    fn karpenter(&self, spec: &mut Map<String, Value>) {
        let Some(Value::Object(k)) = spec.get_mut("karpenter") else {
            return;
        };
        set_default(
            k,
            "image",
            json!("public.ecr.aws/karpenter/controller:1.13.0"),
        );
        set_default(k, "logEncoding", json!("console"));
        set_default(k, "logLevel", json!("debug"));
    }
}

/// Fields kops' v1alpha2 reads but no longer keeps (removed or unused).
fn dropped_fields(spec: &mut Map<String, Value>) {
    for key in [
        "containerRuntime",
        "masterInternalName",
        "serviceOIDCProvider",
    ] {
        spec.remove(key);
    }
}

fn cilium_defaults(c: &mut Map<String, Value>, ipv6: bool) {
    for (k, v) in [
        ("version", json!("v1.18.12")),
        ("enableEndpointHealthChecking", json!(true)),
        ("enableHostFirewall", json!(false)),
        ("identityAllocationMode", json!("crd")),
        ("identityChangeGracePeriod", json!("5s")),
        ("bpfCTGlobalAnyMax", json!(262144)),
        ("bpfCTGlobalTCPMax", json!(524288)),
        ("bpfLBAlgorithm", json!("random")),
        ("bpfLBMaglevTableSize", json!("16381")),
        ("bpfNATGlobalMax", json!(524288)),
        ("bpfNeighGlobalMax", json!(524288)),
        ("bpfPolicyMapMax", json!(16384)),
        ("bpfLBMapMax", json!(65536)),
        ("clusterName", json!("default")),
        ("monitorAggregation", json!("medium")),
        ("sidecarIstioProxyImage", json!("cilium/istio_proxy")),
        ("toFqdnsDnsRejectResponseCode", json!("refused")),
        ("agentPrometheusPort", json!(9090)),
        ("ipam", json!("kubernetes")),
        ("disableMasquerade", json!(ipv6)),
    ] {
        set_default(c, k, v);
    }
    let eni = str_at(c, "ipam") == Some("eni");
    set_default(
        c,
        "tunnel",
        json!(if eni || ipv6 { "disabled" } else { "vxlan" }),
    );
    for (k, v) in [
        ("enableRemoteNodeIdentity", json!(true)),
        ("enableUnreachableRoutes", json!(false)),
        ("enableBPFMasquerade", json!(eni)),
        ("enableL7Proxy", json!(true)),
        ("enableLocalRedirectPolicy", json!(false)),
        ("disableCNPStatusUpdates", json!(true)),
        ("cpuRequest", json!("25m")),
        ("memoryRequest", json!("128Mi")),
    ] {
        set_default(c, k, v);
    }
    if c.get("enableEncryption").and_then(Value::as_bool) == Some(true) {
        set_default(c, "encryptionType", json!("ipsec"));
    }
    set_default(c, "cniExclusive", json!(true));
    for key in ["hubble", "ingress", "gatewayAPI"] {
        match c.get_mut(key) {
            Some(Value::Object(h)) => set_default(h, "enabled", json!(true)),
            _ => {
                c.insert(key.into(), json!({"enabled": false}));
            }
        }
    }
}

/// `configureCloudRoutes` for the networking in use: only kubenet has the
/// cloud route pods; `None` when no networking is set.
fn configure_cloud_routes(spec: &Map<String, Value>) -> Option<bool> {
    let net = spec.get("networking").and_then(Value::as_object)?;
    if net.is_empty() {
        return None;
    }
    Some(net.contains_key("kubenet"))
}

fn networking_has(spec: &Map<String, Value>, key: &str) -> bool {
    spec.get("networking")
        .and_then(|n| n.get(key))
        .is_some_and(|v| !v.is_null())
}

fn is_aws(spec: &Map<String, Value>) -> bool {
    str_at(spec, "cloudProvider") == Some("aws")
}

fn is_gce(spec: &Map<String, Value>) -> bool {
    str_at(spec, "cloudProvider") == Some("gce")
}

/// Whether pods get addresses of the subnet's secondary ranges (Google
/// Cloud's IP aliases): with `networking.gce` (kops' GCP networking, whose
/// v1alpha2 key is `gce`) or kindnet.
fn gce_uses_ip_aliases(spec: &Map<String, Value>) -> bool {
    networking_has(spec, "gce") || networking_has(spec, "kindnet")
}

fn is_openstack(spec: &Map<String, Value>) -> bool {
    str_at(spec, "cloudProvider") == Some("openstack")
}

fn is_ipv6_only(spec: &Map<String, Value>) -> bool {
    str_at(spec, "nonMasqueradeCIDR").is_some_and(|c| c.contains(':'))
}

/// The upper half of an IPv4 range (`100.64.0.0/10` → `100.96.0.0/11`).
fn upper_half(cidr: &str) -> Option<String> {
    let (addr, bits) = cidr.split_once('/')?;
    let ip: Ipv4Addr = addr.parse().ok()?;
    let bits: u32 = bits.parse().ok()?;
    if bits >= 32 {
        return None;
    }
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    let base = u32::from(ip) & mask;
    let half = base | (1u32 << (31 - bits));
    Some(format!("{}/{}", Ipv4Addr::from(half), bits + 1))
}

/// The `n`th address of a service range (kube-dns listens on the 10th).
fn service_ip(range: &str, n: u32) -> Option<String> {
    let (addr, _) = range.split_once('/')?;
    match addr.parse::<IpAddr>().ok()? {
        IpAddr::V4(ip) => Some(Ipv4Addr::from(u32::from(ip).wrapping_add(n)).to_string()),
        IpAddr::V6(ip) => Some(Ipv6Addr::from(u128::from(ip).wrapping_add(n as u128)).to_string()),
    }
}

/// An image moved to the spec's registry mirror, as kops' asset builder
/// does: `assets.containerProxy` replaces the registry host,
/// `assets.containerRegistry` replaces the registry and keeps the name.
/// (`spec` is the cluster's spec as JSON.)
pub fn remap_image(spec: &Map<String, Value>, image: &str) -> String {
    let assets = spec.get("assets");
    if let Some(proxy) = assets
        .and_then(|a| str_of(a, "containerProxy"))
        .filter(|p| !p.is_empty())
    {
        let proxy = proxy.trim_end_matches('/');
        let rest = image.split_once('/').map_or(image, |(_, r)| r);
        return format!("{proxy}/{rest}");
    }
    if let Some(registry) = assets
        .and_then(|a| str_of(a, "containerRegistry"))
        .filter(|p| !p.is_empty())
    {
        let name = image.rsplit('/').next().unwrap_or(image);
        return format!("{}/{name}", registry.trim_end_matches('/'));
    }
    image.to_string()
}

/// `base` with `over` laid on top, key by key (kops merges the
/// cluster-wide kubelet into the control plane's this way).
fn merged(base: Option<&Value>, over: Option<&Value>) -> Map<String, Value> {
    let mut out = base.and_then(Value::as_object).cloned().unwrap_or_default();
    if let Some(over) = over.and_then(Value::as_object) {
        for (k, v) in over {
            match (out.get_mut(k), v) {
                (Some(Value::Object(b)), Value::Object(o)) => {
                    for (kk, vv) in o {
                        b.insert(kk.clone(), vv.clone());
                    }
                }
                _ => {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
    }
    out
}

/// The object at `key`, created (or replacing a non-object) when absent.
fn obj<'m>(map: &'m mut Map<String, Value>, key: &str) -> &'m mut Map<String, Value> {
    let entry = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

fn str_at<'m>(map: &'m Map<String, Value>, key: &str) -> Option<&'m str> {
    map.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn str_of<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn arr<'m>(map: &'m Map<String, Value>, key: &str) -> &'m [Value] {
    map.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn arr_of<'v>(value: &'v Value, key: &str) -> &'v [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn arr_of_map<'m>(map: &'m Map<String, Value>, key: &str) -> &'m [Value] {
    arr(map, key)
}

/// Sets `key` unless the map already has a value there.
fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    match map.get(key) {
        Some(v) if !v.is_null() => {}
        _ => {
            map.insert(key.to_string(), value);
        }
    }
}

/// Sets `key` unless the map holds a non-zero value there (kops' checks
/// for Go zero values on plain numbers).
fn set_nonzero(map: &mut Map<String, Value>, key: &str, value: Value) {
    match map.get(key) {
        Some(v) if !v.is_null() && v.as_i64() != Some(0) => {}
        _ => {
            map.insert(key.to_string(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(yaml: &str) -> Cluster {
        crate::manifest::parse_one("test.yaml", yaml).unwrap()
    }

    #[test]
    fn ranges_from_the_non_masquerade_range() {
        assert_eq!(
            upper_half("100.64.0.0/10").as_deref(),
            Some("100.96.0.0/11")
        );
        assert_eq!(
            upper_half("172.20.0.0/16").as_deref(),
            Some("172.20.128.0/17")
        );
        assert_eq!(
            service_ip("100.64.0.0/13", 10).as_deref(),
            Some("100.64.0.10")
        );
        assert_eq!(
            service_ip("fd00:5e4f:ce::/108", 10).as_deref(),
            Some("fd00:5e4f:ce::a")
        );
    }

    #[test]
    fn gce_ranges_as_kops_assigns_them() {
        let gce = |networking: &str, subnets: &str| {
            cluster(&format!(
                "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata: {{name: c.example.com}}\n\
                 spec:\n  cloudProvider: gce\n  networking: {networking}\n  subnets: {subnets}\n"
            ))
        };
        let ranges = |c: &Cluster| -> Vec<Option<String>> {
            let s = &with_gce_network_ranges(c).unwrap().spec;
            let mut out: Vec<Option<String>> =
                s.subnets.iter().flatten().map(|n| n.cidr.clone()).collect();
            out.extend([s.pod_cidr.clone(), s.service_cluster_ip_range.clone()]);
            out.push(s.non_masquerade_cidr.clone());
            out
        };
        let some = |s: &str| Some(s.to_string());
        // The next free /20 after the first, for each subnet without one;
        // a range the spec gives is not counted as used (kops counts only
        // an existing network's), an existing subnetwork gets none.
        let c = gce(
            "{cilium: {}}",
            "[{name: a, region: us-test1}, {name: b, region: us-test1, cidr: 10.0.16.0/20}, \
             {name: c, region: us-test1, id: existing}, {name: d, region: us-test1}]",
        );
        assert_eq!(
            ranges(&c),
            [
                some("10.0.16.0/20"),
                some("10.0.16.0/20"),
                None,
                some("10.0.32.0/20"),
                None,
                None,
                None
            ]
        );
        // IP aliases: pods a /14, services a /16, the one subnet a /19.
        let c = gce("{gce: {}}", "[{name: a, region: us-test1}]");
        assert_eq!(
            ranges(&c),
            [
                some("10.0.32.0/19"),
                some("10.4.0.0/14"),
                some("10.1.0.0/16"),
                some("10.0.0.0/8")
            ]
        );
        // Another cloud's cluster is left as it is.
        let mut aws = c.clone();
        aws.spec.cloud_provider = some("aws");
        assert_eq!(with_gce_network_ranges(&aws).unwrap(), aws);
        // The completed spec has the same ranges.
        let done = completed_spec(&c, &PopulateOptions::default());
        assert_eq!(done.spec.pod_cidr.as_deref(), Some("10.4.0.0/14"));
    }

    #[test]
    fn gce_ipv6_clusters_leave_pod_ranges_to_kops_controller() {
        let controllers = |non_masquerade: &str| {
            let c = cluster(&format!(
                "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata: {{name: c.example.com}}\n\
                 spec:\n  cloudProvider: gce\n  nonMasqueradeCIDR: \"{non_masquerade}\"\n  networking: {{cilium: {{}}}}\n  \
                 subnets: [{{name: a, region: us-test1}}]\n"
            ));
            let done = completed_spec(&c, &PopulateOptions::default());
            let ccm = done
                .spec
                .cloud_controller_manager
                .expect("a controller manager");
            ccm.extra["controllers"].clone()
        };
        assert_eq!(
            controllers("::/0"),
            serde_json::json!(["*", "-node-ipam-controller", "-node-route-controller"])
        );
        assert_eq!(controllers("100.64.0.0/10"), serde_json::json!(["*"]));
    }

    #[test]
    fn stores_below_a_local_directory_are_written_as_kops_writes_them() {
        let c = cluster(
            r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {name: c.example.com}
spec:
  cloudProvider: gce
  configBase: file:///srv/state/c.example.com
  kubernetesVersion: v1.34.0
  etcdClusters:
  - {name: main, etcdMembers: [{name: a, instanceGroup: cp}]}
"#,
        );
        let done = completed_spec(&c, &PopulateOptions::default());
        let s = &done.spec;
        // Parsed paths come back bare; the given base and the backup
        // store (a plain string join in kops) keep the URL.
        assert_eq!(
            s.config_base.as_deref(),
            Some("file:///srv/state/c.example.com")
        );
        assert_eq!(s.key_store.as_deref(), Some("/srv/state/c.example.com/pki"));
        assert_eq!(
            s.secret_store.as_deref(),
            Some("/srv/state/c.example.com/secrets")
        );
        let backups = serde_json::to_value(&s.etcd_clusters).unwrap();
        assert_eq!(
            backups[0]["backups"]["backupStore"],
            "file:///srv/state/c.example.com/backups/etcd/main"
        );
    }

    #[test]
    fn populate_without_groups_picks_the_api_from_subnets() {
        let c = cluster(
            r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {name: c.example.com}
spec:
  cloudProvider: aws
  kubernetesVersion: v1.34.0
  nonMasqueradeCIDR: 100.64.0.0/10
  networking: {cilium: {}}
  etcdClusters:
  - {name: main, etcdMembers: [{name: a, instanceGroup: cp}]}
  subnets:
  - {name: a, zone: us-test-1a, cidr: 172.20.32.0/19, type: Private}
"#,
        );
        let options = PopulateOptions {
            config_base: "s3://bucket/c.example.com",
            ..Default::default()
        };
        let done = completed_spec(&c, &options);
        let s = &done.spec;
        assert_eq!(s.kubernetes_version.as_deref(), Some("1.34.0"));
        assert_eq!(s.pod_cidr.as_deref(), Some("100.96.0.0/11"));
        assert_eq!(
            s.key_store.as_deref(),
            Some("s3://bucket/c.example.com/pki")
        );
        let lb = s
            .api
            .as_ref()
            .and_then(|a| a.load_balancer.as_ref())
            .unwrap();
        assert_eq!(lb.kind.as_deref(), Some("Public"));
        assert_eq!(lb.class.as_deref(), Some("Classic"));
        assert_eq!(s.dns_zone, None, "no zone without a look-up");
        let etcd = &s.etcd_clusters.as_ref().unwrap()[0];
        assert_eq!(etcd.version.as_deref(), Some("3.6.12"));
        // Populating the completed spec again changes nothing.
        assert_eq!(completed_spec(&done, &options), done);
    }

    /// kops' populate step gives a control plane in a private subnet an
    /// API load balancer (Public, Classic on AWS) and one in a public
    /// subnet an API DNS name; API-server groups decide when there are
    /// any; a spec that sets either keeps it.
    #[test]
    fn api_access_follows_where_the_api_servers_run() {
        let spec = |api: &str| {
            cluster(&format!(
                r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {{name: c.example.com}}
spec:
  cloudProvider: aws
  kubernetesVersion: v1.34.0
{api}  subnets:
  - {{name: private-a, zone: us-test-1a, cidr: 172.20.32.0/19, type: Private}}
  - {{name: utility-a, zone: us-test-1a, cidr: 172.20.0.0/22, type: Public}}
"#
            ))
        };
        let group = |name: &str, role: &str, subnet: &str| -> InstanceGroup {
            crate::manifest::parse_one(
                "ig.yaml",
                &format!(
                    "apiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata: {{name: {name}, labels: {{kops.k8s.io/cluster: c.example.com}}}}\nspec: {{role: {role}, subnets: [{subnet}]}}\n"
                ),
            )
            .unwrap()
        };
        let api = |c: &Cluster| serde_json::to_value(&c.spec.api).unwrap();

        let private = [
            group("cp", "ControlPlane", "private-a"),
            group("n", "Node", "utility-a"),
        ];
        let done = with_api_access(&spec(""), Some(&private));
        assert_eq!(
            api(&done),
            json!({"loadBalancer": {"type": "Public", "class": "Classic"}})
        );
        // The rest of the spec is not completed.
        assert_eq!(done.spec.pod_cidr, None);

        let public = [
            group("cp", "ControlPlane", "utility-a"),
            group("n", "Node", "private-a"),
        ];
        assert_eq!(
            api(&with_api_access(&spec(""), Some(&public))),
            json!({"dns": {}})
        );

        // API-server nodes in a private subnet decide over the control plane.
        let api_nodes = [
            group("cp", "ControlPlane", "utility-a"),
            group("api", "APIServer", "private-a"),
        ];
        let done = with_api_access(&spec(""), Some(&api_nodes));
        assert!(done.spec.api.unwrap().load_balancer.is_some());

        // Set by the user: kept (a load balancer's defaults filled in).
        let set = spec("  api:\n    loadBalancer: {class: Network}\n");
        assert_eq!(
            api(&with_api_access(&set, Some(&private))),
            json!({"loadBalancer": {"type": "Public", "class": "Network"}})
        );
        let dns = spec("  api:\n    dns: {}\n");
        assert_eq!(
            api(&with_api_access(&dns, Some(&private))),
            json!({"dns": {}})
        );
        // The completed spec agrees.
        let options = PopulateOptions {
            config_base: "s3://bucket/c.example.com",
            instance_groups: Some(&private),
            ..Default::default()
        };
        assert_eq!(
            api(&completed_spec(&spec(""), &options)),
            api(&with_api_access(&spec(""), Some(&private)))
        );
    }
}
