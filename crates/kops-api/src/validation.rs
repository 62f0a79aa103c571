//! Validation of Clusters and InstanceGroups. Every problem names the field
//! path, the bad value and, where the user can fix it, how.

use std::collections::{BTreeMap, BTreeSet};

use ipnet::{IpNet, Ipv4Net};

use crate::cluster::{Cluster, SubnetType};
use crate::dns::{dns_name_problem, is_gossip_name, GOSSIP_HINT, GOSSIP_REMOVED};
use crate::field_error::into_result;
// Re-exported: the crates above name them from here.
pub use crate::field_error::{FieldError, ValidationError};
use crate::instance_group::{InstanceGroup, Role};
use crate::networking::KNOWN_NETWORKING;
use crate::version::{self, VersionProblem};

/// Cloud providers kops knows. Only `aws` is deployable by kops-rs; the
/// others load, round-trip and validate so existing specs keep working.
pub const KNOWN_CLOUDS: &[&str] = &[
    "aws",
    "gce",
    "openstack",
    "azure",
    "hetzner",
    "scaleway",
    "digitalocean",
    "do",
    "linode",
    "metal",
    // kops dropped vSphere in 1.18; kops-rs builds it again.
    "vsphere",
];

/// Spec fields (JSON pointers under `spec`) that only one cloud reads;
/// kops refuses each on a cluster of another cloud when it loads it.
const CLOUD_ONLY_FIELDS: &[(&str, &str)] = &[
    ("aws", "/cloudConfig/awsEBSCSIDriver"),
    ("aws", "/cloudConfig/disableSecurityGroupIngress"),
    ("aws", "/cloudConfig/elbSecurityGroup"),
    ("aws", "/cloudConfig/nlbSecurityGroupMode"),
    ("aws", "/cloudConfig/nodeIPFamilies"),
    ("aws", "/cloudConfig/spotinstOrientation"),
    ("aws", "/cloudConfig/spotinstProduct"),
    ("aws", "/nodeTerminationHandler"),
    ("aws", "/awsLoadBalancerController"),
    ("aws", "/warmPool"),
    ("aws", "/podIdentityWebhook"),
    ("gce", "/cloudConfig/gceServiceAccount"),
    ("gce", "/cloudConfig/gceUseStartupScript"),
    ("gce", "/cloudConfig/gcpPDCSIDriver"),
    ("gce", "/cloudConfig/multizone"),
    ("gce", "/cloudConfig/nodeTags"),
    ("gce", "/cloudConfig/nodeInstancePrefix"),
    ("gce", "/networking/gce"),
];

/// Settings of the API load balancer that only AWS has (kops refuses them
/// elsewhere), by their JSON pointer under `spec.api.loadBalancer`.
const AWS_ONLY_LOAD_BALANCER_FIELDS: &[&str] = &[
    "class",
    "securityGroupOverride",
    "additionalSecurityGroups",
    "sslCertificate",
    "sslPolicy",
    "crossZoneLoadBalancing",
    "accessLog",
];

/// The fields of `cluster` that belong to another cloud, and the checks of
/// access lists that only AWS allows prefix lists (`pl-...`) in.
fn validate_cloud_fields(cluster: &Cluster, cloud: &str, errors: &mut Vec<FieldError>) {
    // An unknown cloud is one error of its own; its fields are not judged.
    if !matches!(cloud, "aws" | "gce") {
        return;
    }
    let spec = crate::manifest::to_json_value(&cluster.spec);
    let present = |pointer: &str| {
        spec.pointer(pointer)
            .is_some_and(|v| !v.is_null() && v.as_str() != Some(""))
    };
    let cloud_name = |c: &str| if c == "gce" { "GCE" } else { "AWS" };
    for (owner, pointer) in CLOUD_ONLY_FIELDS {
        if *owner != cloud && present(pointer) {
            let path = format!("spec{}", pointer.replace('/', "."));
            errors.push(
                FieldError::new(
                    path,
                    format!("applies to {} clusters only", cloud_name(owner)),
                )
                .value(format!("cloudProvider: {cloud}"))
                .hint("remove it"),
            );
        }
    }
    if cloud == "aws" {
        return;
    }
    for field in AWS_ONLY_LOAD_BALANCER_FIELDS {
        if present(&format!("/api/loadBalancer/{field}")) {
            errors.push(
                FieldError::new(
                    format!("spec.api.loadBalancer.{field}"),
                    "applies to AWS clusters only",
                )
                .value(format!("cloudProvider: {cloud}"))
                .hint("remove it"),
            );
        }
    }
    for (path, list) in [
        ("spec.sshAccess", &cluster.spec.ssh_access),
        (
            "spec.kubernetesApiAccess",
            &cluster.spec.kubernetes_api_access,
        ),
        ("spec.nodePortAccess", &cluster.spec.node_port_access),
    ] {
        for (i, c) in list.iter().flatten().enumerate() {
            if c.starts_with("pl-") {
                errors.push(
                    FieldError::new(format!("{path}[{i}]"), "prefix lists are an AWS feature")
                        .value(c)
                        .hint("list CIDRs instead"),
                );
            }
        }
    }
}

fn parse_cidr(text: &str) -> Option<IpNet> {
    text.parse::<IpNet>().ok()
}

fn parse_ipv4_cidr(text: &str) -> Option<Ipv4Net> {
    text.parse::<Ipv4Net>().ok()
}

const CIDR_HINT: &str = "write it as ADDRESS/PREFIX, e.g. `172.20.0.0/16`";

fn check_cidr_list(errors: &mut Vec<FieldError>, path: &str, list: Option<&Vec<String>>) {
    for (i, c) in list.into_iter().flatten().enumerate() {
        // AWS managed prefix lists (`pl-...`) are allowed where CIDRs are.
        if parse_cidr(c).is_none() && !c.starts_with("pl-") {
            errors.push(
                FieldError::new(format!("{path}[{i}]"), "is not a valid CIDR")
                    .value(c)
                    .hint(format!("{CIDR_HINT}; `0.0.0.0/0` allows everyone")),
            );
        }
    }
}

/// What a subnet's `egress` may start with (before the first `-`): kops'
/// NAT gateway, Elastic IP, NAT instance, transit gateway and `External`.
const EGRESS_KINDS: &[&str] = &["nat", "eipalloc", "i", "tgw", "External"];

/// Whether `key` names a resource quantity: kops types every
/// `cpuRequest`, `cpuLimit`, `memoryRequest` and `memoryLimit` (of each
/// component and addon) as a Kubernetes quantity and refuses a manifest whose
/// value does not parse as one.
fn is_quantity_key(key: &str) -> bool {
    (key.starts_with("cpu") || key.starts_with("memory"))
        && (key.ends_with("Request") || key.ends_with("Limit"))
}

/// Checks every resource quantity in `value` (a spec as JSON), wherever
/// it is, including fields kops-rs keeps only as unmodelled `extra`.
fn check_quantities(errors: &mut Vec<FieldError>, path: &str, value: &serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                let child = format!("{path}.{key}");
                match v {
                    serde_json::Value::String(text) if is_quantity_key(key) => {
                        if !is_quantity(text) {
                            errors.push(
                                FieldError::new(child, "is not a Kubernetes quantity")
                                    .value(text)
                                    .hint("write CPU in cores or millicores (`1`, `200m`) and memory in bytes with a suffix (`800Mi`, `2Gi`)"),
                            );
                        }
                    }
                    _ => check_quantities(errors, &child, v),
                }
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                check_quantities(errors, &format!("{path}[{i}]"), v);
            }
        }
        _ => {}
    }
}

/// Whether `text` parses as a Kubernetes resource quantity: a signed
/// decimal number, then a binary suffix (`Ki`..`Ei`), a decimal suffix
/// (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`) or an exponent (`e3`).
pub fn is_quantity(text: &str) -> bool {
    let rest = text.strip_prefix(['+', '-']).unwrap_or(text);
    let number_len = rest
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_len);
    let digits = number.chars().filter(char::is_ascii_digit).count();
    if digits == 0 || number.matches('.').count() > 1 {
        return false;
    }
    const SUFFIXES: &[&str] = &[
        "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E",
    ];
    if SUFFIXES.contains(&suffix) {
        return true;
    }
    match suffix.strip_prefix(['e', 'E']) {
        Some(exp) => {
            let exp = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            !exp.is_empty() && exp.chars().all(|c| c.is_ascii_digit())
        }
        None => false,
    }
}

/// What is wrong with a port range as kube-apiserver reads it (`30000-32767`,
/// `30000+2767` or a single port), if anything.
fn port_range_problem(text: &str) -> Option<String> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let port = |p: &str| p.parse::<u32>().ok();
    let (low, high) = match (text.find('-'), text.find('+')) {
        (None, None) => (port(text), port(text)),
        (Some(i), None) => (port(&text[..i]), port(&text[i + 1..])),
        (None, Some(i)) => {
            let low = port(&text[..i]);
            (
                low,
                low.zip(port(&text[i + 1..]))
                    .map(|(l, o)| l.saturating_add(o)),
            )
        }
        (Some(_), Some(_)) => (None, None),
    };
    let (Some(low), Some(high)) = (low, high) else {
        return Some("is not a port range".into());
    };
    if low > 65535 || high > 65535 {
        Some("goes beyond port 65535".into())
    } else if high < low {
        Some("ends before it starts".into())
    } else {
        None
    }
}

/// Validates a cluster on its own (no instance groups).
pub fn validate_cluster(cluster: &Cluster) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let e = &mut errors;
    validate_name(cluster, e);
    let cloud = validate_cloud_provider(cluster, e);
    validate_kubernetes_version(cluster, e);
    validate_networking(cluster, e);
    let network_cidrs = validate_network_cidrs(cluster, e);
    validate_access_lists(cluster, e);
    validate_subnets(cluster, &network_cidrs, e);
    validate_cloud_fields(cluster, cloud, e);
    if cloud == "gce" {
        crate::gce::validate_cluster(cluster, e);
    }
    if cloud == "vsphere" {
        crate::vsphere::validate_cluster(cluster, e);
    }
    check_quantities(e, "spec", &crate::manifest::to_json_value(&cluster.spec));
    validate_node_port_range(cluster, e);
    validate_dns(cluster, e);
    validate_api_load_balancer(cluster, cloud, e);
    validate_etcd(cluster, e);
    validate_node_local_dns(cluster, e);
    errors
}

/// The cluster's name (a DNS name with a domain), and no gVisor
/// cluster-wide.
fn validate_name(cluster: &Cluster, errors: &mut Vec<FieldError>) {
    let spec = &cluster.spec;
    if let Some(problem) = dns_name_problem(&cluster.metadata.name) {
        errors.push(
            FieldError::new("metadata.name", format!("cluster name {problem}"))
                .value(&cluster.metadata.name)
                .hint("use a fully-qualified DNS name such as `mycluster.example.com`, or `mycluster.k8s.local` for gossip DNS"),
        );
    } else if !cluster.metadata.name.contains('.') {
        errors.push(
            FieldError::new("metadata.name", "cluster name must be a fully-qualified DNS name")
                .value(&cluster.metadata.name)
                .hint("add a domain, e.g. `mycluster.example.com`, or use `mycluster.k8s.local` for gossip DNS"),
        );
    }

    // kops installs gVisor per group, never cluster-wide.
    if spec.containerd.as_ref().is_some_and(|c| c.gvisor.is_some()) {
        errors.push(
            FieldError::new("spec.containerd.gvisor", "gVisor is set per instance group, not on the cluster")
                .hint("remove it here and set `spec.containerd.gvisor.enabled: true` on the worker groups that should run it"),
        );
    }
}

/// `spec.cloudProvider`: set, and a cloud kops knows. Returns it.
fn validate_cloud_provider<'a>(cluster: &'a Cluster, errors: &mut Vec<FieldError>) -> &'a str {
    let spec = &cluster.spec;
    let cloud = spec.cloud_provider.as_deref().unwrap_or("");
    if cloud.is_empty() {
        errors.push(
            FieldError::new("spec.cloudProvider", "is required")
                .hint("set `cloudProvider: aws` (or pass `--cloud aws`)"),
        );
    } else if !KNOWN_CLOUDS.contains(&cloud) {
        errors.push(
            FieldError::new("spec.cloudProvider", "is not a cloud provider kops knows")
                .value(cloud)
                .hint(format!("use one of: {}", KNOWN_CLOUDS.join(", "))),
        );
    }
    cloud
}

/// `spec.kubernetesVersion`: set, and one kops-rs deploys.
fn validate_kubernetes_version(cluster: &Cluster, errors: &mut Vec<FieldError>) {
    let spec = &cluster.spec;
    match spec.kubernetes_version.as_deref() {
        None | Some("") => errors.push(
            FieldError::new("spec.kubernetesVersion", "is required")
                .hint(format!("set a version such as `{}`", version::recommended(None))),
        ),
        Some(v) => match version::check_supported(v) {
            Ok(_) => {}
            Err(VersionProblem::Unparsable) => errors.push(
                FieldError::new("spec.kubernetesVersion", "is not a Kubernetes version")
                    .value(v)
                    .hint(format!("write it as `vMAJOR.MINOR.PATCH`, e.g. `{}`", version::recommended(None))),
            ),
            Err(VersionProblem::TooOld) => errors.push(
                FieldError::new("spec.kubernetesVersion", "is older than the oldest supported version")
                    .value(v)
                    .hint(format!(
                        "kops-rs deploys Kubernetes {} to {}.x; upgrade to at least `{}`",
                        version::OLDEST_SUPPORTED,
                        minor_text(&version::NEWEST_SUPPORTED),
                        version::OLDEST_SUPPORTED
                    )),
            ),
            Err(VersionProblem::TooNew) => errors.push(
                FieldError::new("spec.kubernetesVersion", "is newer than this kops-rs supports")
                    .value(v)
                    .hint(format!(
                        "kops-rs deploys Kubernetes up to {}.x; use a newer kops-rs or an older version",
                        minor_text(&version::NEWEST_SUPPORTED)
                    )),
            ),
        },
    }
}

/// `spec.networking`: exactly one known CNI.
fn validate_networking(cluster: &Cluster, errors: &mut Vec<FieldError>) {
    let spec = &cluster.spec;
    match &spec.networking {
        None => {
            errors.push(FieldError::new("spec.networking", "is required").hint(
                "choose a CNI, e.g. `networking: {cilium: {}}` (or pass `--networking cilium`)",
            ))
        }
        Some(n) => {
            let providers = n.providers();
            for p in &providers {
                if !KNOWN_NETWORKING.contains(p) {
                    errors.push(
                        FieldError::new(
                            format!("spec.networking.{p}"),
                            "is not a networking option kops knows",
                        )
                        .value(p)
                        .hint(format!("use one of: {}", KNOWN_NETWORKING.join(", "))),
                    );
                }
            }
            if providers.is_empty() {
                errors.push(
                    FieldError::new("spec.networking", "names no CNI").hint(format!(
                        "set exactly one of: {}",
                        KNOWN_NETWORKING.join(", ")
                    )),
                );
            } else if providers.len() > 1 {
                errors.push(
                    FieldError::new("spec.networking", "names more than one CNI")
                        .value(providers.join(", "))
                        .hint("keep exactly one"),
                );
            }
        }
    }
}

/// The network's CIDRs, the pod and service ranges, and that the pods'
/// range stays out of the VPC's. Returns the network's CIDRs by path.
fn validate_network_cidrs(cluster: &Cluster, errors: &mut Vec<FieldError>) -> Vec<(String, IpNet)> {
    let spec = &cluster.spec;
    let mut network_cidrs: Vec<(String, IpNet)> = Vec::new();
    if let Some(c) = spec.network_cidr.as_deref() {
        match parse_ipv4_cidr(c) {
            Some(net) if net.trunc() == net => {
                network_cidrs.push(("spec.networkCIDR".into(), IpNet::V4(net)))
            }
            Some(net) => errors.push(
                FieldError::new("spec.networkCIDR", "has host bits set")
                    .value(c)
                    .hint(format!("use the network address `{}`", net.trunc())),
            ),
            None => errors.push(
                FieldError::new("spec.networkCIDR", "is not a valid IPv4 CIDR")
                    .value(c)
                    .hint(CIDR_HINT),
            ),
        }
    }
    for (i, c) in spec.additional_network_cidrs.iter().flatten().enumerate() {
        let path = format!("spec.additionalNetworkCIDRs[{i}]");
        match parse_ipv4_cidr(c) {
            Some(net) => network_cidrs.push((path, IpNet::V4(net))),
            None => errors.push(
                FieldError::new(path, "is not a valid IPv4 CIDR")
                    .value(c)
                    .hint(CIDR_HINT),
            ),
        }
    }
    for (path, text) in [
        (
            "spec.nonMasqueradeCIDR",
            spec.non_masquerade_cidr.as_deref(),
        ),
        (
            "spec.serviceClusterIPRange",
            spec.service_cluster_ip_range.as_deref(),
        ),
        ("spec.podCIDR", spec.pod_cidr.as_deref()),
    ] {
        if let Some(t) = text {
            if parse_cidr(t).is_none() {
                errors.push(
                    FieldError::new(path, "is not a valid CIDR")
                        .value(t)
                        .hint(CIDR_HINT),
                );
            }
        }
    }
    if let (Some(nm), Some((_, net))) = (
        spec.non_masquerade_cidr.as_deref().and_then(parse_cidr),
        network_cidrs.first(),
    ) {
        // With the Amazon VPC CNI pods take VPC addresses, so the ranges coincide.
        let vpc_cni = spec
            .networking
            .as_ref()
            .is_some_and(|n| n.amazonvpc.is_some());
        if !vpc_cni
            && matches!(nm, IpNet::V4(_))
            && (nm.contains(&net.network()) || net.contains(&nm.network()))
        {
            errors.push(
                FieldError::new("spec.nonMasqueradeCIDR", "overlaps the VPC's networkCIDR")
                    .value(nm)
                    .hint(format!("pods and services need their own range; kops uses `100.64.0.0/10` with a VPC of `{net}`")),
            );
        }
    }
    network_cidrs
}

/// Who may reach SSH, the API and node ports: CIDRs.
fn validate_access_lists(cluster: &Cluster, errors: &mut Vec<FieldError>) {
    let spec = &cluster.spec;
    check_cidr_list(errors, "spec.sshAccess", spec.ssh_access.as_ref());
    check_cidr_list(
        errors,
        "spec.kubernetesApiAccess",
        spec.kubernetes_api_access.as_ref(),
    );
    check_cidr_list(
        errors,
        "spec.nodePortAccess",
        spec.node_port_access.as_ref(),
    );
}

/// `spec.kubeAPIServer.serviceNodePortRange`: a port range.
fn validate_node_port_range(cluster: &Cluster, errors: &mut Vec<FieldError>) {
    let spec = &cluster.spec;
    if let Some(range) = spec
        .kube_api_server
        .as_ref()
        .and_then(|a| a.service_node_port_range.as_deref())
    {
        if let Some(problem) = port_range_problem(range) {
            errors.push(
                FieldError::new("spec.kubeAPIServer.serviceNodePortRange", problem)
                    .value(range)
                    .hint(
                        "write it as `FIRST-LAST`, e.g. `30000-32767` (kube-apiserver's default)",
                    ),
            );
        }
    }
}

/// `spec.topology.dns.type`: a DNS type, and not gossip's.
fn validate_dns(cluster: &Cluster, errors: &mut Vec<FieldError>) {
    let spec = &cluster.spec;
    if let Some(topology) = &spec.topology {
        if let Some(t) = topology.dns.as_ref().and_then(|d| d.kind.as_deref()) {
            if !["Public", "Private", "None"].contains(&t) {
                errors.push(
                    FieldError::new("spec.topology.dns.type", "is not a DNS type")
                        .value(t)
                        .hint("use `Public`, `Private` or `None`"),
                );
            }
        }
    }
    let dns_type = spec
        .topology
        .as_ref()
        .and_then(|t| t.dns.as_ref())
        .and_then(|d| d.kind.as_deref())
        .unwrap_or("");
    if dns_type != "None" && is_gossip_name(&cluster.metadata.name) {
        errors.push(
            FieldError::new("spec.topology.dns.type", GOSSIP_REMOVED)
                .value(if dns_type.is_empty() {
                    "Public"
                } else {
                    dns_type
                })
                .hint(GOSSIP_HINT),
        );
    }
}

/// `spec.api.loadBalancer`: its subnets (AWS), type and class.
fn validate_api_load_balancer(cluster: &Cluster, cloud: &str, errors: &mut Vec<FieldError>) {
    let spec = &cluster.spec;
    if let Some(lb) = spec.api.as_ref().and_then(|a| a.load_balancer.as_ref()) {
        if cloud == "aws" {
            let known: Vec<&str> = spec
                .subnets
                .iter()
                .flatten()
                .map(|s| s.name.as_str())
                .collect();
            for (i, s) in lb.subnets.iter().flatten().enumerate() {
                let path = format!("spec.api.loadBalancer.subnets[{i}].name");
                if s.name.is_empty() {
                    errors.push(
                        FieldError::new(path, "is required")
                            .hint("name the cluster subnet the load balancer is placed in"),
                    );
                } else if !known.contains(&s.name.as_str()) {
                    errors.push(
                        FieldError::new(path, "is not a subnet of the cluster")
                            .value(&s.name)
                            .hint(if known.is_empty() {
                                "the cluster has no subnets; add them to spec.subnets first"
                                    .to_string()
                            } else {
                                format!("use one of: {}", known.join(", "))
                            }),
                    );
                }
            }
        }
        if let Some(t) = lb.kind.as_deref() {
            if !["Public", "Internal"].contains(&t) {
                errors.push(
                    FieldError::new("spec.api.loadBalancer.type", "is not a load balancer type")
                        .value(t)
                        .hint("use `Public` or `Internal`"),
                );
            }
        }
        match lb.class.as_deref() {
            None | Some("Network") => {}
            Some("Classic") if cloud == "aws" => validate_classic(cluster, lb, errors),
            Some("Classic") => {}
            Some(other) => errors.push(
                FieldError::new(
                    "spec.api.loadBalancer.class",
                    "is not a load balancer class",
                )
                .value(other)
                .hint("use `Network`"),
            ),
        }
    }
}

/// NodeLocal DNSCache runs beside CoreDNS only, at an IP address.
fn validate_node_local_dns(cluster: &Cluster, errors: &mut Vec<FieldError>) {
    let Some(kube_dns) = cluster.spec.extra.get("kubeDNS") else {
        return;
    };
    let Some(node_local) = kube_dns.get("nodeLocalDNS") else {
        return;
    };
    if node_local
        .get("enabled")
        .and_then(serde_json::Value::as_bool)
        != Some(true)
    {
        return;
    }
    let provider = kube_dns.get("provider").and_then(serde_json::Value::as_str);
    if let Some(provider) = provider.filter(|p| *p != "CoreDNS") {
        errors.push(
            FieldError::new(
                "spec.kubeDNS.provider",
                "must be CoreDNS when nodeLocalDNS is enabled",
            )
            .value(provider)
            .hint("set `kubeDNS.provider: CoreDNS`, or `kubeDNS.nodeLocalDNS.enabled: false`"),
        );
    }
    if let Some(ip) = node_local
        .get("localIP")
        .and_then(serde_json::Value::as_str)
    {
        if !ip.is_empty() && ip.parse::<std::net::IpAddr>().is_err() {
            errors.push(
                FieldError::new("spec.kubeDNS.nodeLocalDNS.localIP", "is not an IP address")
                    .value(ip)
                    .hint("use a link-local address such as `169.254.20.10`, or leave it out"),
            );
        }
    }
}

/// What kops 1.36 refused with a Classic API load balancer: the features
/// only a Network Load Balancer has (TLS termination, fixed addresses, and
/// reaching kops-controller through the balancer without DNS).
fn validate_classic(
    cluster: &Cluster,
    lb: &crate::cluster::LoadBalancerAccessSpec,
    errors: &mut Vec<FieldError>,
) {
    let to_network = "set `class: Network` (a Network Load Balancer)";
    if lb.ssl_certificate.as_deref().is_some_and(|c| !c.is_empty()) {
        errors.push(
            FieldError::new(
                "spec.api.loadBalancer.sslCertificate",
                "requires a Network Load Balancer",
            )
            .hint(to_network),
        );
    }
    if lb.ssl_policy.is_some() {
        errors.push(
            FieldError::new(
                "spec.api.loadBalancer.sslPolicy",
                "requires a Network Load Balancer",
            )
            .hint(to_network),
        );
    }
    for (i, s) in lb.subnets.iter().flatten().enumerate() {
        if s.allocation_id.is_some() {
            errors.push(
                FieldError::new(
                    format!("spec.api.loadBalancer.subnets[{i}].allocationId"),
                    "is only allowed for a public Network Load Balancer",
                )
                .hint(to_network),
            );
        }
        if s.private_ipv4_address.is_some() {
            errors.push(
                FieldError::new(
                    format!("spec.api.loadBalancer.subnets[{i}].privateIPv4Address"),
                    "is only allowed for an internal Network Load Balancer",
                )
                .hint(to_network),
            );
        }
    }
    let none_dns = cluster
        .spec
        .topology
        .as_ref()
        .and_then(|t| t.dns.as_ref())
        .and_then(|d| d.kind.as_deref())
        == Some("None");
    if none_dns {
        errors.push(
            FieldError::new(
                "spec.api.loadBalancer.class",
                "topology.dns.type `None` requires a Network Load Balancer",
            )
            .value("Classic")
            .hint(to_network),
        );
    }
}

/// Warnings about a spec that is valid but on its way out, one line each
/// (without a `warning:` prefix, which the printer adds):
/// today the Classic API load balancer (deprecated since kops 1.26, refused
/// by kops 1.37; kops-rs still manages it as kops 1.36 did).
pub fn warnings(cluster: &Cluster) -> Vec<String> {
    let classic = cluster.spec.cloud_provider.as_deref() == Some("aws")
        && cluster.api_load_balancer_class() == Some("Classic");
    if classic {
        vec![
            "spec.api.loadBalancer.class `Classic` is deprecated (kops 1.37 refuses it); \
             move to `class: Network`, a Network Load Balancer"
                .to_string(),
        ]
    } else {
        Vec::new()
    }
}

fn minor_text(v: &version::KubernetesVersion) -> String {
    format!("v{}.{}", v.major, v.minor)
}

fn validate_subnets(
    cluster: &Cluster,
    network_cidrs: &[(String, IpNet)],
    errors: &mut Vec<FieldError>,
) {
    let spec = &cluster.spec;
    let cloud = spec.cloud_provider.as_deref().unwrap_or("");
    let mut names = BTreeSet::new();
    let mut parsed: Vec<(usize, Ipv4Net)> = Vec::new();
    let mut regions: BTreeMap<String, String> = BTreeMap::new();
    for (i, s) in spec.subnets.iter().flatten().enumerate() {
        let path = format!("spec.subnets[{i}]");
        if s.name.is_empty() {
            errors.push(
                FieldError::new(format!("{path}.name"), "is required")
                    .hint("name each subnet, usually after its zone"),
            );
        } else if !names.insert(s.name.as_str()) {
            errors.push(
                FieldError::new(format!("{path}.name"), "is used by another subnet")
                    .value(&s.name)
                    .hint("subnet names must be unique"),
            );
        }
        match s.kind.as_deref() {
            None => errors.push(
                FieldError::new(format!("{path}.type"), "is required")
                    .hint("use `Public`, `Private`, `Utility` or `DualStack`"),
            ),
            Some(t) if SubnetType::parse(t).is_none() => errors.push(
                FieldError::new(format!("{path}.type"), "is not a subnet type")
                    .value(t)
                    .hint("use `Public`, `Private`, `Utility` or `DualStack`"),
            ),
            _ => {}
        }
        if cloud == "aws" {
            match s.zone.as_deref() {
                // An existing subnet's zone is looked up from AWS.
                None | Some("") if s.id.is_some() => {}
                None | Some("") => errors.push(
                    FieldError::new(format!("{path}.zone"), "is required on AWS")
                        .hint("set the availability zone, e.g. `us-east-1a`"),
                ),
                Some(z) => match crate::zones::aws_region(z) {
                    Some(r) => {
                        regions.entry(r).or_insert_with(|| format!("{path}.zone"));
                    }
                    None => errors.push(
                        FieldError::new(format!("{path}.zone"), "is not an availability zone")
                            .value(z)
                            .hint("AWS zones look like `us-east-1a`"),
                    ),
                },
            }
        }
        if let Some(c) = s.cidr.as_deref() {
            match parse_ipv4_cidr(c) {
                None => errors.push(
                    FieldError::new(format!("{path}.cidr"), "is not a valid IPv4 CIDR")
                        .value(c)
                        .hint(CIDR_HINT),
                ),
                Some(net) => {
                    if !network_cidrs.is_empty()
                        && s.id.is_none()
                        && !network_cidrs.iter().any(|(_, n)| match n {
                            IpNet::V4(n4) => n4.contains(&net),
                            _ => false,
                        })
                    {
                        let within: Vec<String> = network_cidrs
                            .iter()
                            .map(|(_, n)| format!("`{n}`"))
                            .collect();
                        errors.push(
                            FieldError::new(format!("{path}.cidr"), "is outside the cluster's network")
                                .value(c)
                                .hint(format!(
                                    "pick a range inside {} (spec.networkCIDR / spec.additionalNetworkCIDRs)",
                                    within.join(" or ")
                                )),
                        );
                    }
                    parsed.push((i, net));
                }
            }
        }
        if let Some(egress) = s.egress.as_deref().filter(|e| !e.is_empty()) {
            let kind = egress.split('-').next().unwrap_or("");
            if !EGRESS_KINDS.contains(&kind) {
                errors.push(
                    FieldError::new(format!("{path}.egress"), "is not an egress kops knows")
                        .value(egress)
                        .hint("use a NAT gateway (`nat-...`), an Elastic IP for a new NAT gateway (`eipalloc-...`), a NAT instance (`i-...`), a transit gateway (`tgw-...`) or `External`"),
                );
            }
            let subnet_type = s.kind.as_deref().unwrap_or("");
            let ipv6_public =
                subnet_type == "Public" && s.ipv6_cidr.as_deref().is_some_and(|c| !c.is_empty());
            if egress != "External"
                && subnet_type != "Private"
                && subnet_type != "DualStack"
                && !ipv6_public
            {
                errors.push(
                    FieldError::new(
                        format!("{path}.egress"),
                        "can only be set on private or IPv6-capable public subnets",
                    )
                    .value(egress)
                    .hint("remove it, or move it to the zone's `Private` subnet"),
                );
            }
        }
        if let Some(c) = s.ipv6_cidr.as_deref() {
            let shorthand = c.starts_with('/') && c.contains('#');
            if !shorthand && c.parse::<ipnet::Ipv6Net>().is_err() {
                errors.push(
                    FieldError::new(format!("{path}.ipv6CIDR"), "is not a valid IPv6 CIDR")
                        .value(c)
                        .hint("write a CIDR such as `2001:db8::/64`, or `/64#1` to carve one from the VPC's block"),
                );
            }
        }
    }
    for (a, (ia, na)) in parsed.iter().enumerate() {
        for (ib, nb) in parsed.iter().skip(a + 1) {
            if na.contains(&nb.network()) || nb.contains(&na.network()) {
                let subnets = spec.subnets.as_deref().unwrap_or_default();
                errors.push(
                    FieldError::new(
                        format!("spec.subnets[{ib}].cidr"),
                        format!("overlaps subnet `{}` (`{}`)", subnets[*ia].name, na),
                    )
                    .value(nb)
                    .hint("subnets of one VPC must not overlap; give each its own range"),
                );
            }
        }
    }
    if regions.len() > 1 {
        let list: Vec<String> = regions.keys().map(|r| format!("`{r}`")).collect();
        errors.push(
            FieldError::new(
                "spec.subnets",
                format!("zones span more than one region: {}", list.join(", ")),
            )
            .hint("a cluster lives in one region; use zones of a single region"),
        );
    }
}

fn validate_etcd(cluster: &Cluster, errors: &mut Vec<FieldError>) {
    let mut names = BTreeSet::new();
    for (i, etcd) in cluster.spec.etcd_clusters.iter().flatten().enumerate() {
        let path = format!("spec.etcdClusters[{i}]");
        if etcd.name.is_empty() {
            errors.push(
                FieldError::new(format!("{path}.name"), "is required")
                    .hint("kops names them `main` and `events`"),
            );
        } else if !names.insert(etcd.name.as_str()) {
            errors.push(
                FieldError::new(format!("{path}.name"), "is used by another etcd cluster")
                    .value(&etcd.name),
            );
        }
        if etcd.etcd_members.is_empty() {
            errors.push(
                FieldError::new(format!("{path}.etcdMembers"), "is empty")
                    .hint("add one member per control-plane instance group"),
            );
        }
        let mut member_names = BTreeSet::new();
        for (j, m) in etcd.etcd_members.iter().enumerate() {
            let mpath = format!("{path}.etcdMembers[{j}]");
            if m.name.is_empty() {
                errors.push(FieldError::new(format!("{mpath}.name"), "is required"));
            } else if !member_names.insert(m.name.as_str()) {
                errors.push(
                    FieldError::new(
                        format!("{mpath}.name"),
                        "is used by another member of this etcd cluster",
                    )
                    .value(&m.name),
                );
            }
            if m.instance_group.as_deref().unwrap_or("").is_empty() {
                errors.push(
                    FieldError::new(format!("{mpath}.instanceGroup"), "is required")
                        .hint("name the control-plane instance group this member runs on"),
                );
            }
        }
        if etcd.etcd_members.len() % 2 == 0 && !etcd.etcd_members.is_empty() {
            errors.push(
                FieldError::new(
                    format!("{path}.etcdMembers"),
                    format!(
                        "has {} members; etcd needs an odd number for quorum",
                        etcd.etcd_members.len()
                    ),
                )
                .hint("use 1, 3 or 5 control-plane instance groups"),
            );
        }
    }
}

/// Checks an instance-group name: a DNS-1123 subdomain.
fn ig_name_problem(name: &str) -> Option<&'static str> {
    dns_name_problem(name)
}

/// Validates an instance group, against its cluster when known.
pub fn validate_instance_group(ig: &InstanceGroup, cluster: Option<&Cluster>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let e = &mut errors;
    let role = validate_group_name_and_role(ig, e);
    validate_group_sizes(ig, e);
    let is_aws = cluster
        .and_then(|c| c.spec.cloud_provider.as_deref())
        .is_none_or(|c| c == "aws");
    if is_aws {
        validate_group_aws(ig, e);
    }
    validate_group_volumes(ig, e);
    validate_group_profile_and_taints(ig, e);
    if let Some(c) = cluster {
        validate_group_in_cluster(ig, c, role, is_aws, e);
    }
    errors
}

/// The group's name, role (returned when known) and manager; gVisor only
/// on workers.
fn validate_group_name_and_role(ig: &InstanceGroup, errors: &mut Vec<FieldError>) -> Option<Role> {
    let spec = &ig.spec;
    if let Some(problem) = ig_name_problem(&ig.metadata.name) {
        errors.push(
            FieldError::new("metadata.name", format!("instance group name {problem}"))
                .value(&ig.metadata.name)
                .hint("use lowercase letters, digits and `-`, e.g. `nodes-us-east-1a`"),
        );
    }
    let role = match spec.role.as_deref() {
        None | Some("") => {
            errors.push(
                FieldError::new("spec.role", "is required")
                    .hint("use `Master` (control plane), `Node`, `Bastion` or `APIServer`"),
            );
            None
        }
        Some(r) => match Role::parse(r) {
            Some(role) => Some(role),
            None => {
                errors.push(
                    FieldError::new("spec.role", "is not an instance group role")
                        .value(r)
                        .hint("use `Master` (control plane), `Node`, `Bastion` or `APIServer`"),
                );
                None
            }
        },
    };
    if let Some(m) = spec.manager.as_deref() {
        if !["CloudGroup", "Karpenter"].contains(&m) {
            errors.push(
                FieldError::new("spec.manager", "is not an instance manager")
                    .value(m)
                    .hint("use `CloudGroup` (an autoscaling group, the default) or `Karpenter`"),
            );
        }
    }
    if let Some(role) = role.filter(|r| *r != Role::Node) {
        if ig.gvisor().and_then(|g| g.enabled) == Some(true) {
            errors.push(
                FieldError::new(
                    "spec.containerd.gvisor",
                    format!(
                        "gVisor runs on worker groups only, not on a `{}` group",
                        role.as_str()
                    ),
                )
                .hint("remove it here, or enable it on a group with `role: Node`"),
            );
        }
    }
    role
}

/// Group sizes and root volume sizes.
fn validate_group_sizes(ig: &InstanceGroup, errors: &mut Vec<FieldError>) {
    let spec = &ig.spec;
    if let Some(min) = spec.min_size {
        if min < 0 {
            errors.push(FieldError::new("spec.minSize", "must not be negative").value(min));
        }
    }
    if let Some(max) = spec.max_size {
        if max < 0 {
            errors.push(FieldError::new("spec.maxSize", "must not be negative").value(max));
        }
    }
    if let (Some(min), Some(max)) = (spec.min_size, spec.max_size) {
        if min > max {
            errors.push(
                FieldError::new(
                    "spec.minSize",
                    format!("is greater than spec.maxSize (`{max}`)"),
                )
                .value(min)
                .hint(format!(
                    "raise maxSize to at least {min}, or lower minSize to at most {max}"
                )),
            );
        }
    }
    for (field, value) in [
        ("spec.rootVolumeSize", spec.root_volume_size),
        (
            "spec.rootVolume.size",
            spec.root_volume.as_ref().and_then(|r| r.size),
        ),
    ] {
        if let Some(v) = value {
            if v <= 0 {
                errors.push(
                    FieldError::new(field, "must be a positive size in GiB")
                        .value(v)
                        .hint("e.g. `64`"),
                );
            }
        }
    }
}

/// What only AWS groups are checked for.
fn validate_group_aws(ig: &InstanceGroup, errors: &mut Vec<FieldError>) {
    let spec = &ig.spec;
    const VOLUME_TYPES: &[&str] = &["gp2", "gp3", "io1", "io2", "st1", "sc1", "standard"];
    for (field, value) in [
        ("spec.rootVolumeType", spec.root_volume_type.as_deref()),
        (
            "spec.rootVolume.type",
            spec.root_volume.as_ref().and_then(|r| r.kind.as_deref()),
        ),
    ] {
        if let Some(t) = value {
            if !VOLUME_TYPES.contains(&t) {
                errors.push(
                    FieldError::new(field, "is not an EBS volume type")
                        .value(t)
                        .hint(format!("use one of: {}", VOLUME_TYPES.join(", "))),
                );
            }
        }
    }
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        if let Some(t) = v.kind.as_deref() {
            if !VOLUME_TYPES.contains(&t) {
                errors.push(
                    FieldError::new(
                        format!("spec.volumes[{i}].type"),
                        "is not an EBS volume type",
                    )
                    .value(t)
                    .hint(format!("use one of: {}", VOLUME_TYPES.join(", "))),
                );
            }
        }
    }
    if let Some(mt) = spec.machine_type.as_deref() {
        for (i, t) in mt.split(',').enumerate() {
            let t = t.trim();
            if t.is_empty() || !t.contains('.') || t.contains(char::is_whitespace) {
                let path = if mt.contains(',') {
                    format!("spec.machineType[{i}]")
                } else {
                    "spec.machineType".into()
                };
                errors.push(
                    FieldError::new(path, "is not an EC2 instance type")
                        .value(t)
                        .hint("EC2 instance types look like `t3.medium` or `m6i.large`"),
                );
            }
        }
    }
    if let Some(md) = &spec.instance_metadata {
        if let Some(t) = md.http_tokens.as_deref() {
            if !["required", "optional"].contains(&t) {
                errors.push(
                    FieldError::new("spec.instanceMetadata.httpTokens", "is not a valid setting")
                        .value(t)
                        .hint("use `required` (IMDSv2, the default) or `optional`"),
                );
            }
        }
        if let Some(h) = md.http_put_response_hop_limit {
            if !(1..=64).contains(&h) {
                errors.push(
                    FieldError::new(
                        "spec.instanceMetadata.httpPutResponseHopLimit",
                        "must be between 1 and 64",
                    )
                    .value(h),
                );
            }
        }
    }
}

/// The group's additional volumes: a device each, once, and a size.
fn validate_group_volumes(ig: &InstanceGroup, errors: &mut Vec<FieldError>) {
    let spec = &ig.spec;
    let mut devices = BTreeSet::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let path = format!("spec.volumes[{i}]");
        if v.device.is_empty() {
            errors.push(
                FieldError::new(format!("{path}.device"), "is required")
                    .hint("name the device, e.g. `/dev/xvdd`"),
            );
        } else if !devices.insert(v.device.as_str()) {
            errors.push(
                FieldError::new(format!("{path}.device"), "is used by another volume")
                    .value(&v.device),
            );
        }
        match v.size {
            Some(size) if size > 0 => {}
            Some(size) => errors.push(
                FieldError::new(format!("{path}.size"), "must be a positive size in GiB")
                    .value(size)
                    .hint("e.g. `20`"),
            ),
            None => errors.push(
                FieldError::new(format!("{path}.size"), "is required")
                    .hint("the size in GiB, e.g. `20`"),
            ),
        }
    }
}

/// Resource quantities, the instance profile's ARN and the taints.
fn validate_group_profile_and_taints(ig: &InstanceGroup, errors: &mut Vec<FieldError>) {
    let spec = &ig.spec;
    check_quantities(errors, "spec", &crate::manifest::to_json_value(&ig.spec));
    if let Some(profile) = spec.extra.get("iam").and_then(|i| i.get("profile")) {
        let arn = profile.as_str().unwrap_or("");
        let resource = arn
            .strip_prefix("arn:")
            .and_then(|rest| rest.splitn(5, ':').nth(4))
            .unwrap_or("");
        if !resource.starts_with("instance-profile/") || resource.ends_with('/') {
            errors.push(
                FieldError::new("spec.iam.profile", "is not an instance profile's ARN")
                    .value(profile.as_str().map_or_else(|| profile.to_string(), str::to_string))
                    .hint("write the ARN of an existing instance profile, e.g. `arn:aws:iam::123456789012:instance-profile/KopsExampleRole`"),
            );
        }
    }
    for (i, t) in spec.taints.iter().flatten().enumerate() {
        let ok = t.split_once(':').is_some_and(|(kv, effect)| {
            !kv.is_empty() && !effect.is_empty() && !kv.starts_with('=')
        });
        if !ok {
            errors.push(
                FieldError::new(format!("spec.taints[{i}]"), "is not a taint")
                    .value(t)
                    .hint("write taints as `key=value:Effect`, e.g. `dedicated=gpu:NoSchedule`"),
            );
        }
    }
}

/// The group against its cluster: its subnets are the cluster's, GCE's
/// rules on GCE, subnets required on AWS.
fn validate_group_in_cluster(
    ig: &InstanceGroup,
    c: &Cluster,
    role: Option<Role>,
    is_aws: bool,
    errors: &mut Vec<FieldError>,
) {
    let spec = &ig.spec;

    let subnet_names: BTreeSet<&str> = c
        .spec
        .subnets
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    for (i, s) in spec.subnets.iter().flatten().enumerate() {
        if !subnet_names.contains(s.as_str()) {
            let known: Vec<&str> = subnet_names.iter().copied().collect();
            errors.push(
                FieldError::new(
                    format!("spec.subnets[{i}]"),
                    "is not a subnet of the cluster",
                )
                .value(s)
                .hint(if known.is_empty() {
                    "the cluster has no subnets; add them to the cluster's spec.subnets first"
                        .to_string()
                } else {
                    format!("use one of: {}", known.join(", "))
                }),
            );
        }
    }
    if c.spec.cloud_provider.as_deref() == Some("gce") {
        crate::gce::validate_instance_group(ig, c, errors);
    }
    if is_aws && spec.subnets.as_ref().is_none_or(|s| s.is_empty()) && role.is_some() {
        errors.push(
            FieldError::new("spec.subnets", "is required")
                .hint("list the cluster subnets (by name) this group's instances run in"),
        );
    }
}

/// Validates a cluster together with its instance groups: everything
/// [`validate_cluster`] and [`validate_instance_group`] check, plus the links
/// between them. Errors are keyed by the object they belong to.
pub fn validate_all(cluster: &Cluster, groups: &[InstanceGroup]) -> Result<(), ValidationError> {
    let mut errors = validate_cluster(cluster);
    let mut by_name: BTreeMap<&str, &InstanceGroup> = BTreeMap::new();
    for ig in groups {
        for e in validate_instance_group(ig, Some(cluster)) {
            errors.push(FieldError {
                path: format!("instancegroup/{}: {}", ig.name(), e.path),
                ..e
            });
        }
        by_name.insert(ig.name(), ig);
    }
    if !groups.is_empty() {
        for (i, etcd) in cluster.spec.etcd_clusters.iter().flatten().enumerate() {
            for (j, m) in etcd.etcd_members.iter().enumerate() {
                let Some(ig_name) = m.instance_group.as_deref().filter(|s| !s.is_empty()) else {
                    continue;
                };
                let path = format!("spec.etcdClusters[{i}].etcdMembers[{j}].instanceGroup");
                match by_name.get(ig_name) {
                    None => {
                        let cp: Vec<&str> = groups.iter().filter(|g| g.is_control_plane()).map(|g| g.name()).collect();
                        errors.push(
                            FieldError::new(path, "names an instance group that does not exist")
                                .value(ig_name)
                                .hint(if cp.is_empty() {
                                    format!("create a control-plane instance group named `{ig_name}`")
                                } else {
                                    format!("use one of the control-plane groups: {}", cp.join(", "))
                                }),
                        );
                    }
                    Some(ig) if !ig.is_control_plane() && ig.role().is_some() => errors.push(
                        FieldError::new(path, "names an instance group that is not a control-plane group")
                            .value(ig_name)
                            .hint("etcd runs on control-plane nodes: point it at a group with `role: Master`"),
                    ),
                    _ => {}
                }
            }
        }
    }
    if !groups.is_empty() && cluster.spec.cloud_provider.as_deref() == Some("vsphere") {
        crate::vsphere::validate_groups(cluster, groups, &mut errors);
    }
    into_result(format!("cluster `{}`", cluster.name()), errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid cluster and node group, in the shape of kops' `complex` case.
    fn complex() -> (Cluster, InstanceGroup) {
        let text = r#"
apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata:
  name: complex.example.com
spec:
  api:
    loadBalancer:
      type: Public
      class: Network
      subnets:
      - name: us-test-1a
  cloudProvider: aws
  kubernetesVersion: v1.32.0
  networkCIDR: 172.20.0.0/16
  additionalNetworkCIDRs: [10.1.0.0/16]
  nonMasqueradeCIDR: 100.64.0.0/10
  networking: {cni: {}}
  kubeAPIServer:
    serviceNodePortRange: 28000-32767
    cpuRequest: 200m
    memoryLimit: 1000Mi
  clusterAutoscaler:
    cpuRequest: "1.5"
  etcdClusters:
  - name: main
    cpuRequest: 100m
    etcdMembers: [{name: a, instanceGroup: master-us-test-1a}]
  subnets:
  - {cidr: 172.20.32.0/19, name: us-test-1a, type: Public, zone: us-test-1a}
  - {cidr: 10.1.64.0/19, name: us-east-1a-private, type: Private, zone: us-test-1a, egress: tgw-123456}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  name: nodes
spec:
  role: Node
  machineType: t2.medium
  subnets: [us-test-1a]
  volumes:
  - {device: /dev/xvdd, size: 20, type: gp2}
"#;
        let objects = crate::manifest::parse_objects("complex.yaml", text).unwrap();
        let mut cluster = None;
        let mut ig = None;
        for o in objects {
            match o {
                crate::manifest::Object::Cluster(c) => cluster = Some(*c),
                crate::manifest::Object::InstanceGroup(g) => ig = Some(*g),
                _ => {}
            }
        }
        (cluster.unwrap(), ig.unwrap())
    }

    /// The problems of the cluster and the group, as `validate_all` words them
    /// (without its etcd-member check: the control-plane group is left out).
    fn problems(cluster: &Cluster, ig: &InstanceGroup) -> String {
        let mut errors = validate_cluster(cluster);
        for e in validate_instance_group(ig, Some(cluster)) {
            errors.push(FieldError {
                path: format!("instancegroup/{}: {}", ig.name(), e.path),
                ..e
            });
        }
        match into_result(format!("cluster `{}`", cluster.name()), errors) {
            Ok(()) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn node_local_dns_needs_coredns_and_an_address() {
        let (mut cluster, ig) = complex();
        cluster.spec.extra.insert(
            "kubeDNS".into(),
            serde_json::json!({"provider": "KubeDNS", "nodeLocalDNS": {"enabled": true, "localIP": "local"}}),
        );
        let text = problems(&cluster, &ig);
        assert!(text.contains("spec.kubeDNS.provider"), "{text}");
        assert!(text.contains("spec.kubeDNS.nodeLocalDNS.localIP"), "{text}");
        cluster.spec.extra.insert(
            "kubeDNS".into(),
            serde_json::json!({"nodeLocalDNS": {"enabled": true, "localIP": "169.254.20.10"}}),
        );
        assert!(!problems(&cluster, &ig).contains("kubeDNS"));
    }

    #[test]
    fn gvisor_is_refused_on_the_cluster_and_on_groups_that_are_not_workers() {
        let (mut cluster, mut ig) = complex();
        let gvisor = |enabled: bool| {
            serde_json::from_value(serde_json::json!({"gvisor": {"enabled": enabled}})).unwrap()
        };
        ig.spec.containerd = Some(gvisor(true));
        assert_eq!(problems(&cluster, &ig), "", "a worker group may run it");

        // Cluster-wide, even switched off: kops forbids the block there.
        cluster.spec.containerd = Some(gvisor(false));
        let text = problems(&cluster, &ig);
        assert_eq!(text.matches("\n- ").count(), 1, "{text}");
        assert!(
            text.contains("- spec.containerd.gvisor: gVisor is set per instance group, not on the cluster\n    hint: remove it here and set `spec.containerd.gvisor.enabled: true` on the worker groups"),
            "{text}"
        );
        cluster.spec.containerd = None;

        for role in ["Master", "Bastion", "APIServer"] {
            ig.spec.role = Some(role.into());
            let text = problems(&cluster, &ig);
            assert!(
                text.contains(&format!("instancegroup/nodes: spec.containerd.gvisor: gVisor runs on worker groups only, not on a `{role}` group\n    hint: remove it here, or enable it on a group with `role: Node`")),
                "{text}"
            );
        }
        // Switched off, it is allowed anywhere a group is (kops checks `enabled`).
        ig.spec.containerd = Some(gvisor(false));
        assert!(!problems(&cluster, &ig).contains("gvisor"));
    }

    #[test]
    fn complex_case_is_valid() {
        let (cluster, ig) = complex();
        assert_eq!(problems(&cluster, &ig), "");
    }

    #[test]
    fn classic_is_accepted_with_a_warning_but_not_with_network_only_features() {
        let (mut cluster, ig) = complex();
        assert!(warnings(&cluster).is_empty());
        let lb = cluster
            .spec
            .api
            .as_mut()
            .and_then(|a| a.load_balancer.as_mut())
            .unwrap();
        lb.class = Some("Classic".into());
        assert_eq!(problems(&cluster, &ig), "");
        let warned = warnings(&cluster);
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(warned[0].contains("class: Network"), "{}", warned[0]);

        let lb = cluster
            .spec
            .api
            .as_mut()
            .and_then(|a| a.load_balancer.as_mut())
            .unwrap();
        lb.ssl_certificate = Some("arn:aws:acm:us-test-1:123456789012:certificate/x".into());
        let found = problems(&cluster, &ig);
        assert!(
            found.contains("spec.api.loadBalancer.sslCertificate"),
            "{found}"
        );
    }

    #[test]
    fn quantities_are_checked_wherever_they_are() {
        let (mut cluster, ig) = complex();
        cluster.spec.kube_api_server.as_mut().unwrap().cpu_request = Some("100xyz".into());
        cluster
            .spec
            .cluster_autoscaler
            .as_mut()
            .unwrap()
            .extra
            .insert("memoryRequest".into(), serde_json::json!("lots"));
        assert_eq!(
            problems(&cluster, &ig),
            "cluster `complex.example.com` is not valid (2 problems):
- spec.clusterAutoscaler.memoryRequest: `lots`: is not a Kubernetes quantity
    hint: write CPU in cores or millicores (`1`, `200m`) and memory in bytes with a suffix (`800Mi`, `2Gi`)
- spec.kubeAPIServer.cpuRequest: `100xyz`: is not a Kubernetes quantity
    hint: write CPU in cores or millicores (`1`, `200m`) and memory in bytes with a suffix (`800Mi`, `2Gi`)"
        );
        for good in ["1", "0.5", "200m", "1Gi", "1e3", "+1.5E", "128974848"] {
            assert!(is_quantity(good), "{good}");
        }
        for bad in ["", "m", "1.2.3", "1x", "1e", "1Gb", "1 Gi", "Mi"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn volume_types_egress_port_ranges_and_subnet_references() {
        let (mut cluster, mut ig) = complex();
        ig.spec.volumes.as_mut().unwrap()[0].kind = Some("gp9".into());
        let subnets = cluster.spec.subnets.as_mut().unwrap();
        subnets[1].egress = Some("igw-123".into());
        // Renamed away: the load balancer and the group still name it.
        subnets[0].name = "renamed".into();
        cluster
            .spec
            .kube_api_server
            .as_mut()
            .unwrap()
            .service_node_port_range = Some("32767-28000".into());
        assert_eq!(
            problems(&cluster, &ig),
            "cluster `complex.example.com` is not valid (5 problems):
- spec.subnets[1].egress: `igw-123`: is not an egress kops knows
    hint: use a NAT gateway (`nat-...`), an Elastic IP for a new NAT gateway (`eipalloc-...`), a NAT instance (`i-...`), a transit gateway (`tgw-...`) or `External`
- spec.kubeAPIServer.serviceNodePortRange: `32767-28000`: ends before it starts
    hint: write it as `FIRST-LAST`, e.g. `30000-32767` (kube-apiserver's default)
- spec.api.loadBalancer.subnets[0].name: `us-test-1a`: is not a subnet of the cluster
    hint: use one of: renamed, us-east-1a-private
- instancegroup/nodes: spec.volumes[0].type: `gp9`: is not an EBS volume type
    hint: use one of: gp2, gp3, io1, io2, st1, sc1, standard
- instancegroup/nodes: spec.subnets[0]: `us-test-1a`: is not a subnet of the cluster
    hint: use one of: renamed, us-east-1a-private"
        );
        let (mut cluster, ig) = complex();
        cluster.spec.subnets.as_mut().unwrap()[0].egress = Some("nat-123".into());
        let text = problems(&cluster, &ig);
        assert!(
            text.contains("spec.subnets[0].egress: `nat-123`: can only be set on private or IPv6-capable public subnets"),
            "{text}"
        );
        let (cluster, mut ig) = complex();
        ig.spec.extra.insert(
            "iam".into(),
            serde_json::json!({"profile": "arn:aws:iam::123456789012:role/KopsExampleRole"}),
        );
        let text = problems(&cluster, &ig);
        assert!(
            text.contains("spec.iam.profile: `arn:aws:iam::123456789012:role/KopsExampleRole`: is not an instance profile's ARN"),
            "{text}"
        );
        ig.spec.extra.insert(
            "iam".into(),
            serde_json::json!({"profile": "arn:aws:iam::123456789012:instance-profile/KopsExampleRole"}),
        );
        assert_eq!(problems(&cluster, &ig), "");
        for (range, ok) in [
            ("30000-32767", true),
            ("30000+100", true),
            ("80", true),
            ("1-70000", false),
            ("a-b", false),
            ("1-2-3", false),
        ] {
            assert_eq!(port_range_problem(range).is_none(), ok, "{range}");
        }
    }
}
