//! `kops create cluster`: from flags to a Cluster and its InstanceGroups,
//! the way kops builds them (`upup/pkg/fi/cloudup/new_cluster.go`, the
//! post-processing in `cmd/kops/create_cluster.go` and the assignments of
//! `upup/pkg/fi/cloudup/defaults.go` / `subnets.go`).
//!
//! Everything here is pure. Where kops asks AWS (the CIDR of an existing VPC,
//! the zones of existing subnets) the caller passes the answers in
//! [`NewClusterOptions::existing_network`].
//!
//! Defaults that kops takes from its stable channel (images, Kubernetes
//! version) or from the cloud (machine types) are built in; see
//! [`default_image`] and [`default_machine_type`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::Ipv4Net;

use crate::cluster::{
    ApiSpec, AuthorizationSpec, BastionSpec, Cluster, ClusterSubnetSpec, DnsSpec, EtcdClusterSpec,
    EtcdManagerSpec, EtcdMemberSpec, IamSpec, KarpenterSpec, LoadBalancerAccessSpec,
    ServiceAccountIssuerDiscoveryConfig, SubnetType, TopologySpec,
};
use crate::components::{
    CloudConfiguration, CloudControllerManagerConfig, FeatureGates, KubeApiServerConfig,
    KubeControllerManagerConfig, KubeProxyConfig, KubeSchedulerConfig, KubeletConfig,
};
use crate::dns::{dns_name_problem, is_gossip_name, GOSSIP_HINT, GOSSIP_REMOVED};
use crate::field_error::FieldError;
use crate::gce;
use crate::instance_group::{InstanceGroup, MixedInstancesPolicy, Role};
use crate::meta::{Extra, LABEL_INSTANCE_GROUP};
use crate::networking::{
    CalicoSpec, CiliumSpec, FlannelSpec, NetworkingSpec, NETWORKING_FLAG_VALUES,
};
use crate::set;
use crate::validation::KNOWN_CLOUDS;
use crate::version::{self, KubernetesVersion, VersionProblem};
use crate::zones::{aws_region, gce_region};

/// The channel new clusters follow unless `--channel` says otherwise.
pub const DEFAULT_CHANNEL: &str = "stable";
/// The VPC CIDR kops gives a new AWS network.
pub const DEFAULT_AWS_NETWORK_CIDR: &str = "172.20.0.0/16";
/// The pod/service range kops reserves by default.
pub const DEFAULT_NON_MASQUERADE_CIDR: &str = "100.64.0.0/10";
/// Who may reach the API (and SSH) unless `--admin-access` narrows it.
pub const DEFAULT_ADMIN_ACCESS: [&str; 2] = ["0.0.0.0/0", "::/0"];
/// The region of kops' mock AWS cloud (zones `us-test-1a`, ...), used by
/// kops' own tests. Its machine types differ from a real region's.
pub const MOCK_AWS_REGION: &str = "us-test-1";

/// The flags of `kops create cluster`, already split into lists.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewClusterOptions {
    pub cluster_name: String,
    /// `--cloud`; guessed from the state store or the zones (AWS) when empty.
    pub cloud: Option<String>,
    pub zones: Vec<String>,
    pub control_plane_zones: Vec<String>,
    pub control_plane_count: Option<u32>,
    pub control_plane_size: Vec<String>,
    pub control_plane_volume_size: Option<i64>,
    pub control_plane_volume_type: Option<String>,
    pub control_plane_image: Option<String>,
    pub control_plane_security_groups: Vec<String>,
    pub node_count: Option<u32>,
    pub node_size: Vec<String>,
    pub node_volume_size: Option<i64>,
    pub node_image: Option<String>,
    pub node_security_groups: Vec<String>,
    pub bastion_image: Option<String>,
    pub apiserver_count: Option<u32>,
    pub apiserver_size: Vec<String>,
    pub image: Option<String>,
    /// `--networking`, e.g. `cilium`, `calico`, `cni`; kops' default is `cilium`.
    pub networking: Option<String>,
    /// `--topology public|private`.
    pub topology: Option<String>,
    pub bastion: bool,
    /// `--dns public|private|none`.
    pub dns_type: Option<String>,
    pub dns_zone: Option<String>,
    /// `--network-cidr`: the first is the VPC CIDR, the rest are additional.
    pub network_cidrs: Vec<String>,
    /// `--vpc` / `--network-id`.
    pub network_id: Option<String>,
    /// `--subnets`: existing subnet ids.
    pub subnet_ids: Vec<String>,
    /// `--utility-subnets`: existing utility subnet ids.
    pub utility_subnet_ids: Vec<String>,
    pub egress: Option<String>,
    pub kubernetes_version: Option<String>,
    pub kubernetes_feature_gates: Vec<String>,
    pub ssh_access: Vec<String>,
    pub admin_access: Vec<String>,
    /// `--api-loadbalancer-type public|internal`.
    pub api_load_balancer_type: Option<String>,
    pub api_public_name: Option<String>,
    pub api_ssl_certificate: Option<String>,
    pub encrypt_etcd_storage: Option<bool>,
    pub etcd_clusters: Vec<String>,
    pub cloud_labels: Option<String>,
    pub channel: Option<String>,
    pub discovery_store: Option<String>,
    pub instance_manager: Option<String>,
    pub ipv6: bool,
    /// The state store base URL; `configBase` becomes `<state>/<name>`.
    pub state_store: Option<String>,
    /// `--set path=value`, applied last. Paths start with `cluster.` (or
    /// directly with `spec.`); `instancegroup.spec...` paths are applied to
    /// every instance group.
    pub sets: Vec<String>,
    /// `--unset path`, applied last (before the sets).
    pub unsets: Vec<String>,
    /// `--authorization RBAC|AlwaysAllow` (default RBAC).
    pub authorization: Option<String>,
    /// `--node-volume-type`.
    pub node_volume_type: Option<String>,
    /// `--etcd-storage-type`: the volume type of every etcd member.
    pub etcd_storage_type: Option<String>,
    /// `--associate-public-ip`, only when given.
    pub associate_public_ip: Option<bool>,
    /// `--control-plane-tenancy default|dedicated`.
    pub control_plane_tenancy: Option<String>,
    /// `--node-tenancy default|dedicated`.
    pub node_tenancy: Option<String>,
    /// `--disable-subnet-tags`.
    pub disable_subnet_tags: bool,
    /// `--project`, the Google Cloud project of a GCE cluster. Given empty
    /// (`Some("")`, usually an unset variable in `--project=$PROJECT`) it is
    /// refused; absent on GCE, the caller fills in gcloud's default project
    /// as kops does, and a GCE cluster that still has none is refused.
    pub project: Option<String>,
    /// `--gce-service-account`: the service account GCE instances run as
    /// (kops' `cloudConfig.gceServiceAccount`; by default kops makes one per
    /// role).
    pub gce_service_account: Option<String>,
    /// vSphere: kops 1.17's `--vsphere-*` flags and kops-rs' additions.
    pub vsphere: VsphereOptions,
    /// What AWS says about the existing VPC and subnets named by `--vpc`,
    /// `--subnets` and `--utility-subnets`. kops looks these up itself
    /// (DescribeVpcs / DescribeSubnets); here the caller does.
    pub existing_network: Option<ExistingNetwork>,
}

/// `create cluster --cloud vsphere`'s flags (kops 1.17's, plus the folder,
/// network and control-plane virtual IP a working cluster needs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VsphereOptions {
    pub server: Option<String>,
    pub datacenter: Option<String>,
    pub resource_pool: Option<String>,
    pub datastore: Option<String>,
    pub core_dns_server: Option<String>,
    pub folder: Option<String>,
    pub network: Option<String>,
    pub control_plane_vip: Option<String>,
    /// Static `IP/prefix` addresses of the control-plane VMs, one per
    /// control-plane group in name order.
    pub control_plane_addresses: Vec<String>,
    pub gateway: Option<String>,
    pub nameservers: Vec<String>,
    /// `--vsphere-thumbprint`: vCenter's certificate's SHA-1 fingerprint.
    pub thumbprint: Option<String>,
    /// What `--vsphere-ca-file` holds (PEM; the caller reads the file).
    pub ca_certificate: Option<String>,
}

/// A SHA-1 fingerprint (20 hex bytes, colons optional) in govc's form
/// (`AB:CD:...`), or `None` when it is not one.
pub fn normalize_thumbprint(text: &str) -> Option<String> {
    let hex: String = text.trim().chars().filter(|c| *c != ':').collect();
    if hex.len() != 40 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let upper = hex.to_ascii_uppercase();
    Some(
        upper
            .as_bytes()
            .chunks(2)
            .map(|pair| String::from_utf8_lossy(pair).into_owned())
            .collect::<Vec<_>>()
            .join(":"),
    )
}

impl VsphereOptions {
    fn given(&self) -> Vec<&'static str> {
        [
            ("--vsphere-server", &self.server),
            ("--vsphere-datacenter", &self.datacenter),
            ("--vsphere-resource-pool", &self.resource_pool),
            ("--vsphere-datastore", &self.datastore),
            ("--vsphere-coredns-server", &self.core_dns_server),
            ("--vsphere-folder", &self.folder),
            ("--vsphere-network", &self.network),
            ("--vsphere-control-plane-vip", &self.control_plane_vip),
            ("--vsphere-thumbprint", &self.thumbprint),
            ("--vsphere-ca-file", &self.ca_certificate),
        ]
        .into_iter()
        .filter(|(_, v)| v.is_some())
        .map(|(flag, _)| flag)
        .chain(
            [
                (
                    "--vsphere-control-plane-addresses",
                    !self.control_plane_addresses.is_empty(),
                ),
                ("--vsphere-gateway", self.gateway.is_some()),
                ("--vsphere-nameservers", !self.nameservers.is_empty()),
            ]
            .into_iter()
            .filter(|(_, given)| *given)
            .map(|(flag, _)| flag),
        )
        .collect()
    }
}

/// `--vsphere-control-plane-addresses`: one address per control-plane
/// group, in the groups' name order, kept in the spec by group name.
fn assign_vsphere_addresses(
    cluster: &mut Cluster,
    groups: &[InstanceGroup],
    addresses: &[String],
) -> Result<(), Vec<FieldError>> {
    let addresses = clean_list(addresses);
    if addresses.is_empty() {
        return Ok(());
    }
    let mut control_plane: Vec<&str> = groups
        .iter()
        .filter(|g| g.is_control_plane())
        .map(|g| g.name())
        .collect();
    control_plane.sort();
    if addresses.len() != control_plane.len() {
        return Err(vec![FieldError::new(
            "--vsphere-control-plane-addresses",
            format!(
                "gives {} addresses for {} control-plane groups ({})",
                addresses.len(),
                control_plane.len(),
                control_plane.join(", ")
            ),
        )
        .hint(
            "give one `IP/prefix` address per control-plane VM (--control-plane-count)",
        )]);
    }
    let config = cluster
        .spec
        .cloud_config
        .get_or_insert_with(CloudConfiguration::default);
    config.vsphere_control_plane_addresses = Some(
        control_plane
            .iter()
            .map(|g| g.to_string())
            .zip(addresses)
            .collect(),
    );
    Ok(())
}

/// vSphere's default machine type: `<cpus>cpu-<memory>gb` (kops-rs' way of
/// sizing a group's VMs; the disk is the group's root volume size).
pub const VSPHERE_DEFAULT_MACHINE_TYPE: &str = "2cpu-4gb";

/// The vCenter's host and port as the in-cluster components name it
/// (cloud-provider-vsphere's `[VirtualCenter "<host>"]`, whose credentials
/// are `<host>.username`/`<host>.password` in its Secret): a server given as
/// a URL (`https://vc.example.com/sdk`) is its host; the port defaults to
/// 443; `insecure` for a plain `http://` URL (a test simulator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VsphereServer {
    pub host: String,
    pub port: String,
    pub insecure: bool,
}

impl VsphereServer {
    pub fn parse(server: &str) -> VsphereServer {
        let insecure = server.starts_with("http://");
        let host = server
            .split_once("://")
            .map_or(server, |(_, rest)| rest)
            .split('/')
            .next()
            .unwrap_or_default();
        let (host, port) = match host.rsplit_once(':') {
            Some((h, p)) if p.parse::<u16>().is_ok() => (h, p),
            _ => (host, "443"),
        };
        VsphereServer {
            host: host.to_string(),
            port: port.to_string(),
            insecure,
        }
    }
}

/// A vSphere machine size `<cpus>cpu-<memory>gb` as (CPUs, memory in MiB).
pub fn vsphere_machine_type(size: &str) -> Option<(u32, u64)> {
    let (cpus, memory) = size.trim().split_once("cpu-")?;
    let cpus: u32 = cpus.parse().ok().filter(|c| *c > 0)?;
    let gb: u64 = memory.strip_suffix("gb")?.parse().ok().filter(|m| *m > 0)?;
    Some((cpus, gb.checked_mul(1024)?))
}

/// An existing VPC and its subnets, as AWS describes them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExistingNetwork {
    /// `vpc-...`.
    pub network_id: String,
    /// The VPC's primary IPv4 CIDR.
    pub cidr: Option<String>,
    pub subnets: Vec<ExistingSubnet>,
}

/// One existing subnet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExistingSubnet {
    /// `subnet-...`.
    pub id: String,
    /// Its availability zone, e.g. `us-east-1a`.
    pub zone: String,
    /// Its IPv4 CIDR (absent for IPv6-only subnets).
    pub cidr: Option<String>,
}

impl ExistingNetwork {
    fn subnet(&self, id: &str) -> Option<&ExistingSubnet> {
        self.subnets.iter().find(|s| s.id == id)
    }
}

/// What `create cluster` makes.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCluster {
    pub cluster: Cluster,
    /// Sorted by name.
    pub instance_groups: Vec<InstanceGroup>,
}

/// A CPU architecture of machines and images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Amd64,
    Arm64,
}

/// The architecture of an EC2 instance type, from its name: Graviton
/// families carry a `g` after the generation (`t4g`, `m7gd`, `c6gn`) and
/// `a1` is arm64; everything else is x86-64.
pub fn machine_architecture(machine_type: &str) -> Architecture {
    let family = machine_type.split('.').next().unwrap_or("");
    if family == "a1" {
        return Architecture::Arm64;
    }
    let letters = family
        .chars()
        .take_while(|c| c.is_ascii_lowercase())
        .count();
    let rest = &family[letters..];
    let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
    if letters == 0 || digits == 0 {
        return Architecture::Amd64;
    }
    let suffix = &rest[digits..];
    let attributes = suffix.split('-').next().unwrap_or("");
    if attributes.contains('g') {
        Architecture::Arm64
    } else {
        Architecture::Amd64
    }
}

/// The image kops' stable channel gives instances of `cloud` running
/// `version` on `arch`, if it has one.
pub fn default_image(
    cloud: &str,
    version: &KubernetesVersion,
    arch: Architecture,
) -> Option<&'static str> {
    if cloud == "gce" {
        return gce::default_image(version);
    }
    if cloud != "aws" {
        return None;
    }
    let minor = (version.major, version.minor);
    let image = if minor >= (1, 32) {
        match arch {
            Architecture::Amd64 => {
                "099720109477/ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-20260714"
            }
            Architecture::Arm64 => {
                "099720109477/ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-arm64-server-20260714"
            }
        }
    } else if minor >= (1, 27) {
        match arch {
            Architecture::Amd64 => {
                "099720109477/ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-20260714"
            }
            Architecture::Arm64 => {
                "099720109477/ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-arm64-server-20260714"
            }
        }
    } else {
        return None;
    };
    Some(image)
}

/// The machine type kops picks on AWS for a group with `role` in `region`
/// whose image is `image`.
///
/// kops asks AWS for the first of its candidates offered in every zone of the
/// group: `t3.medium` (then `c5.large`, `c4.large`) for control-plane, API
/// server and worker nodes, `t3.micro` (then `t2.micro`) for bastions, and the
/// Graviton `t4g.medium` / `t4g.micro` when the image is arm64. `t3` is
/// offered in every current region, so the first candidate is used here. In
/// kops' mock region `us-test-1` the mock cloud answers `m3.medium`,
/// `t2.medium` and `t2.micro`, and so does this function.
pub fn default_machine_type(region: &str, role: Role, image: Option<&str>) -> &'static str {
    if region == MOCK_AWS_REGION {
        return match role {
            Role::ControlPlane | Role::ApiServer => "m3.medium",
            Role::Node => "t2.medium",
            Role::Bastion => "t2.micro",
        };
    }
    let arm = image.is_some_and(|i| i.contains("arm64") || i.contains("aarch64"));
    match (role, arm) {
        (Role::Bastion, false) => "t3.micro",
        (Role::Bastion, true) => "t4g.micro",
        (_, false) => "t3.medium",
        (_, true) => "t4g.medium",
    }
}

/// Parses `--cloud-labels`: `KEY=VALUE` pairs separated by commas; a key or
/// value holding `=` is written in double quotes (`dn="cn=x"`, `""` for a
/// quote). Leading spaces of keys and values are dropped. Commas cannot be
/// escaped.
pub fn parse_cloud_labels(text: &str) -> Result<BTreeMap<String, String>, String> {
    // Each comma ends a record, like a line of a CSV file whose separator is `=`.
    let records = text.replace(',', "\n");
    let chars: Vec<char> = records.chars().collect();
    let mut labels = BTreeMap::new();
    let mut i = 0;
    let mut record_no = 0;
    while i < chars.len() {
        if chars[i] == '\n' {
            i += 1;
            continue;
        }
        record_no += 1;
        let mut fields: Vec<String> = Vec::new();
        loop {
            while i < chars.len() && chars[i] != '\n' && chars[i].is_whitespace() {
                i += 1;
            }
            let mut field = String::new();
            if i < chars.len() && chars[i] == '"' {
                i += 1;
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(format!("pair {record_no}: a quoted text is not closed"))
                        }
                        Some('"') if chars.get(i + 1) == Some(&'"') => {
                            field.push('"');
                            i += 2;
                        }
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some(c) => {
                            // A comma inside quotes became a record break above.
                            field.push(if *c == '\n' { ',' } else { *c });
                            i += 1;
                        }
                    }
                }
                if let Some(c) = chars.get(i) {
                    if *c != '=' && *c != '\n' {
                        return Err(format!(
                            "pair {record_no}: unexpected `{c}` after a closing quote"
                        ));
                    }
                }
            } else {
                while i < chars.len() && chars[i] != '=' && chars[i] != '\n' {
                    if chars[i] == '"' {
                        return Err(format!(
                            "pair {record_no}: a quote inside an unquoted key or value; quote the whole text"
                        ));
                    }
                    field.push(chars[i]);
                    i += 1;
                }
            }
            fields.push(field);
            match chars.get(i) {
                Some('=') => i += 1,
                _ => break,
            }
        }
        if fields.len() != 2 {
            let shown: Vec<String> = fields.iter().map(|f| format!("`{f}`")).collect();
            return Err(format!(
                "pair {record_no} has {} part(s) ({}), expected KEY=VALUE",
                fields.len(),
                shown.join(" = ")
            ));
        }
        let value = fields.pop().unwrap_or_default();
        let key = fields.pop().unwrap_or_default();
        labels.insert(key, value);
    }
    Ok(labels)
}

/// Parses one `--kubernetes-feature-gates` entry: `Name` or `+Name` switch a
/// gate on, `-Name` switches it off.
pub fn parse_feature_gate(text: &str) -> Result<(String, bool), String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("a feature gate is empty".into());
    }
    let (name, enabled) = match t.as_bytes()[0] {
        b'+' => (t[1..].trim(), true),
        b'-' => (t[1..].trim(), false),
        _ => (t, true),
    };
    if name.is_empty() {
        return Err(format!("`{t}` names no feature gate"));
    }
    Ok((name.to_string(), enabled))
}

/// Splits `parent` into `2^additional_bits` equal IPv4 blocks, lowest first.
pub fn split_ipv4(parent: Ipv4Net, additional_bits: u8) -> Option<Vec<Ipv4Net>> {
    let prefix = parent.prefix_len().checked_add(additional_bits)?;
    if prefix > 32 {
        return None;
    }
    let base = u32::from(parent.network());
    let step = if prefix == 32 {
        1u64
    } else {
        1u64 << (32 - prefix)
    };
    (0..(1u64 << additional_bits))
        .map(|i| {
            let addr = (base as u64 + i * step) as u32;
            Ipv4Net::new(addr.into(), prefix).ok()
        })
        .collect()
}

fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// Gives a CIDR to every subnet that lacks one, as kops does: the VPC CIDR is
/// split into 1, 2, 4 or 8 blocks (one per Public/Private/DualStack subnet,
/// plus one shared by all Utility subnets, lowest first, split again into 8),
/// skipping blocks that overlap CIDRs already taken. Subnets outside the VPC
/// CIDR (additional CIDRs) are left alone; IPv6-only private subnets get none.
/// Subnets with an `id` take their CIDR (and zone) from `existing`.
pub fn assign_subnet_cidrs(
    cluster: &mut Cluster,
    existing: Option<&ExistingNetwork>,
) -> Result<(), FieldError> {
    let network_id = cluster.spec.network_id.clone().filter(|s| !s.is_empty());
    let subnets = cluster.spec.subnets.get_or_insert_with(Vec::new);
    let needs_cidr = |s: &ClusterSubnetSpec| {
        s.cidr.as_deref().unwrap_or("").is_empty()
            && !(s.ipv6_cidr.as_deref().is_some_and(|c| !c.is_empty())
                && s.subnet_type() == Some(SubnetType::Private))
    };
    let needs_zone = subnets.iter().any(|s| {
        s.id.as_deref().is_some_and(|i| !i.is_empty()) && s.zone.as_deref().unwrap_or("").is_empty()
    });
    if !subnets.iter().any(needs_cidr) && !needs_zone {
        return Ok(());
    }

    if let Some(network_id) = &network_id {
        take_existing_subnets(subnets, network_id, existing)?;
    }
    if let Some(s) = subnets.iter().find(|s| {
        s.id.as_deref().is_some_and(|i| !i.is_empty()) && s.zone.as_deref().unwrap_or("").is_empty()
    }) {
        return Err(FieldError::new(
            "spec.subnets",
            format!("the zone of subnet `{}` is not known", s.name),
        )
        .hint("set the subnet's zone in the cluster spec"));
    }
    if !subnets.iter().any(needs_cidr) {
        return Ok(());
    }

    let network_text = cluster.spec.network_cidr.clone().unwrap_or_default();
    let network: Ipv4Net = network_text
        .parse::<Ipv4Net>()
        .map_err(|_| {
            FieldError::new("spec.networkCIDR", "is not a valid IPv4 CIDR")
                .value(&network_text)
                .hint("write it as ADDRESS/PREFIX, e.g. `172.20.0.0/16`")
        })?
        .trunc();
    let subnets = cluster.spec.subnets.get_or_insert_with(Vec::new);

    let mut big: Vec<usize> = Vec::new();
    let mut little: Vec<usize> = Vec::new();
    let mut reserved: Vec<Ipv4Net> = Vec::new();
    for (i, s) in subnets.iter().enumerate() {
        let mut taken = None;
        if let Some(c) = s.cidr.as_deref().filter(|c| !c.is_empty()) {
            let net = c.parse::<Ipv4Net>().map_err(|_| {
                FieldError::new(
                    format!("spec.subnets[{i}].cidr"),
                    "is not a valid IPv4 CIDR",
                )
                .value(c)
                .hint("write it as ADDRESS/PREFIX, e.g. `172.20.32.0/19`")
            })?;
            if !network.contains(&net.addr()) {
                continue;
            }
            taken = Some(net.trunc());
        }
        match s.subnet_type() {
            Some(SubnetType::Public | SubnetType::Private | SubnetType::DualStack) => big.push(i),
            Some(SubnetType::Utility) => little.push(i),
            None => {
                return Err(FieldError::new(
                    format!("spec.subnets[{i}].type"),
                    "is not a subnet type",
                )
                .value(s.kind.as_deref().unwrap_or(""))
                .hint("use Public, Private, Utility or DualStack"))
            }
        }
        reserved.extend(taken);
    }
    let zone_of = |i: &usize| subnets[*i].zone.clone().unwrap_or_default();
    big.sort_by_key(zone_of);
    little.sort_by_key(zone_of);

    let blocks = big.len() + usize::from(!little.is_empty());
    let bits = match blocks {
        0 | 1 => 0,
        2 => 1,
        3 | 4 => 2,
        _ => 3,
    };
    let too_small = || {
        FieldError::new("spec.networkCIDR", "is too small to be split into subnets")
            .value(network)
            .hint("use a larger network CIDR such as `/16`, or give each subnet its `cidr`")
    };
    let mut free: Vec<Ipv4Net> = split_ipv4(network, bits)
        .ok_or_else(too_small)?
        .into_iter()
        .filter(|b| !reserved.iter().any(|r| overlaps(r, b)))
        .collect();
    if free.is_empty() {
        return Err(FieldError::new(
            "spec.subnets",
            "no part of the network CIDR is free for the subnets that have no CIDR",
        )
        .value(network)
        .hint("give those subnets a `cidr`, or widen the network CIDR"));
    }
    if !little.is_empty() {
        let mut small = split_ipv4(free.remove(0), 3)
            .ok_or_else(too_small)?
            .into_iter();
        for i in little {
            if subnets[i].cidr.as_deref().is_some_and(|c| !c.is_empty()) {
                continue;
            }
            let block = small.next().ok_or_else(|| {
                FieldError::new(
                    "spec.subnets",
                    format!("no CIDR left for utility subnet `{}`", subnets[i].name),
                )
                .hint("give the utility subnets a `cidr`")
            })?;
            subnets[i].cidr = Some(block.to_string());
        }
    }
    let mut free = free.into_iter();
    for i in big {
        if !needs_cidr(&subnets[i]) {
            continue;
        }
        let block = free.next().ok_or_else(|| {
            FieldError::new(
                "spec.subnets",
                format!("no CIDR left for subnet `{}`", subnets[i].name),
            )
            .hint("give the subnet a `cidr`, or widen the network CIDR")
        })?;
        subnets[i].cidr = Some(block.to_string());
    }
    Ok(())
}

/// Subnets with an `id` take their CIDR and zone from the existing
/// network's description (which kops reads from AWS), and must agree with
/// it where they set them.
fn take_existing_subnets(
    subnets: &mut [ClusterSubnetSpec],
    network_id: &str,
    existing: Option<&ExistingNetwork>,
) -> Result<(), FieldError> {
    let with_id: Vec<usize> = (0..subnets.len())
        .filter(|&i| subnets[i].id.as_deref().is_some_and(|id| !id.is_empty()))
        .collect();
    if !with_id.is_empty() {
        let info = existing.filter(|e| e.network_id == network_id).ok_or_else(|| {
            FieldError::new("--subnets", format!("the CIDRs of the subnets of VPC `{network_id}` are not known"))
                .value(network_id)
                .hint("kops reads them from AWS (DescribeSubnets); pass the existing network's description, or give each subnet its `cidr`")
        })?;
        for i in with_id {
            let subnet = &mut subnets[i];
            let id = subnet.id.clone().unwrap_or_default();
            let found = info.subnet(&id).ok_or_else(|| {
                FieldError::new(
                    "--subnets",
                    format!("subnet `{id}` is not in VPC `{network_id}`"),
                )
                .value(&id)
                .hint("name subnets of the VPC given with --vpc")
            })?;
            match subnet.cidr.as_deref().filter(|c| !c.is_empty()) {
                None => {
                    subnet.cidr = found.cidr.clone().filter(|c| !c.is_empty());
                    let ipv6_private = subnet.ipv6_cidr.as_deref().is_some_and(|c| !c.is_empty())
                        && subnet.subnet_type() == Some(SubnetType::Private);
                    if subnet.cidr.is_none() && !ipv6_private {
                        return Err(FieldError::new(
                            "--subnets",
                            format!("subnet `{id}` has no IPv4 CIDR"),
                        )
                        .value(&id)
                        .hint("use a subnet with an IPv4 CIDR"));
                    }
                }
                Some(c) if Some(c) != found.cidr.as_deref() => {
                    return Err(FieldError::new(
                        "spec.subnets",
                        format!(
                            "subnet `{id}` is configured with CIDR `{c}` but AWS has `{}`",
                            found.cidr.as_deref().unwrap_or("")
                        ),
                    )
                    .value(c)
                    .hint("remove the cidr or set the subnet's real CIDR"));
                }
                Some(_) => {}
            }
            let zone = subnet.zone.clone().unwrap_or_default();
            if zone.is_empty() {
                subnet.zone = Some(found.zone.clone());
            } else if zone != found.zone {
                return Err(FieldError::new(
                    "spec.subnets",
                    format!(
                        "subnet `{id}` is configured in zone `{zone}` but AWS has it in `{}`",
                        found.zone
                    ),
                )
                .value(&zone)
                .hint("use the subnet's real zone"));
            }
        }
    }
    Ok(())
}

fn uses_public_dns(cluster: &Cluster) -> bool {
    match cluster
        .spec
        .topology
        .as_ref()
        .and_then(|t| t.dns.as_ref())
        .and_then(|d| d.kind.as_deref())
    {
        None | Some("") | Some("Public") => true,
        Some(_) => false,
    }
}

fn increment_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(u32::from(v4).wrapping_add(1).into()),
        IpAddr::V6(v6) => IpAddr::V6(u128::from(v6).wrapping_add(1).into()),
    }
}

/// Adds kops' default exclusions to `spec.egressProxy.excludes`.
fn assign_proxy_excludes(cluster: &mut Cluster) -> Result<(), FieldError> {
    let Some(proxy) = cluster
        .spec
        .extra
        .get("egressProxy")
        .filter(|p| p.is_object())
    else {
        return Ok(());
    };
    let current = proxy
        .get("excludes")
        .and_then(|e| e.as_str())
        .unwrap_or("")
        .to_string();
    let mut excludes: Vec<String> = if current.is_empty() {
        Vec::new()
    } else {
        current.split(',').map(str::to_string).collect()
    };
    let non_masquerade = cluster.spec.non_masquerade_cidr.clone().unwrap_or_default();
    let (ip_text, _) = non_masquerade
        .split_once('/')
        .unwrap_or((&non_masquerade, ""));
    let ip: IpAddr = ip_text.parse().map_err(|_| {
        FieldError::new("spec.nonMasqueradeCIDR", "is not a valid CIDR")
            .value(&non_masquerade)
            .hint("the egress proxy needs it to exclude cluster traffic")
    })?;
    let first = increment_ip(ip).to_string();
    let spec = &cluster.spec;
    let mut wanted: Vec<String> = ["127.0.0.1", "localhost"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    wanted.extend(spec.cluster_dns_domain.clone());
    wanted.extend(spec.master_public_name.clone());
    wanted.push(cluster.metadata.name.clone());
    wanted.push(first);
    wanted.push(non_masquerade.clone());
    for w in wanted {
        if !w.is_empty() && !current.contains(&w) {
            excludes.push(w);
        }
    }
    if spec.cloud_provider.as_deref() == Some("aws") && !current.contains("169.254.169.254") {
        excludes.push("169.254.169.254".into());
    }
    if let Some(n) = spec.network_cidr.as_deref().filter(|n| !n.is_empty()) {
        if !current.contains(n) {
            excludes.push(n.to_string());
        }
    }
    for c in spec.additional_network_cidrs.iter().flatten() {
        if !current.contains(c.as_str()) {
            excludes.push(c.clone());
        }
    }
    if let Some(p) = cluster
        .spec
        .extra
        .get_mut("egressProxy")
        .and_then(|p| p.as_object_mut())
    {
        p.insert("excludes".into(), excludes.join(",").into());
    }
    Ok(())
}

/// The values kops fills in on every create and update, before it validates
/// (`PerformAssignments`): etcd backup retention, the network CIDR, the
/// non-masquerade CIDR, the API's public name, subnet CIDRs and the egress
/// proxy's exclusions.
pub fn perform_assignments(
    cluster: &mut Cluster,
    existing: Option<&ExistingNetwork>,
) -> Result<(), Vec<FieldError>> {
    for etcd in cluster.spec.etcd_clusters.iter_mut().flatten() {
        let manager = etcd.manager.get_or_insert_with(Default::default);
        manager.backup_retention_days.get_or_insert(90);
    }
    cluster.spec.topology.get_or_insert_with(Default::default);

    let aws = cluster.spec.cloud_provider.as_deref() == Some("aws");
    if aws
        && cluster
            .spec
            .network_cidr
            .as_deref()
            .unwrap_or("")
            .is_empty()
    {
        match cluster.spec.network_id.clone().filter(|n| !n.is_empty()) {
            Some(network_id) => {
                let cidr = existing
                    .filter(|e| e.network_id == network_id)
                    .and_then(|e| e.cidr.clone())
                    .filter(|c| !c.is_empty());
                match cidr {
                    Some(c) => cluster.spec.network_cidr = Some(c),
                    None => {
                        return Err(vec![FieldError::new(
                            "--network-cidr",
                            format!("the CIDR of VPC `{network_id}` is not known"),
                        )
                        .value(&network_id)
                        .hint("pass the VPC's CIDR with --network-cidr (kops reads it from AWS with DescribeVpcs)")])
                    }
                }
            }
            None => cluster.spec.network_cidr = Some(DEFAULT_AWS_NETWORK_CIDR.to_string()),
        }
        let amazon_vpc = cluster
            .spec
            .networking
            .as_ref()
            .is_some_and(|n| n.amazonvpc.is_some());
        if amazon_vpc && cluster.spec.non_masquerade_cidr.as_deref() != Some("::/0") {
            cluster.spec.non_masquerade_cidr = cluster.spec.network_cidr.clone();
        }
    }
    if cluster
        .spec
        .non_masquerade_cidr
        .as_deref()
        .unwrap_or("")
        .is_empty()
    {
        cluster.spec.non_masquerade_cidr = Some(DEFAULT_NON_MASQUERADE_CIDR.to_string());
    }
    if uses_public_dns(cluster)
        && cluster
            .spec
            .master_public_name
            .as_deref()
            .unwrap_or("")
            .is_empty()
        && !cluster.metadata.name.is_empty()
    {
        cluster.spec.master_public_name = Some(format!("api.{}", cluster.metadata.name));
    }
    if matches!(
        cluster.spec.cloud_provider.as_deref(),
        Some("aws" | "openstack" | "azure")
    ) {
        assign_subnet_cidrs(cluster, existing).map_err(|e| vec![e])?;
    }
    if cluster.spec.cloud_provider.as_deref() == Some("gce") && gce::needs_ranges(cluster) {
        // kops avoids the ranges of the network's subnetworks. A new
        // cluster's own network does not exist yet; a shared one (`--vpc`)
        // must be described by the caller.
        let used: Vec<Ipv4Net> = match (&cluster.spec.network_id, existing) {
            (_, Some(e)) => e
                .subnets
                .iter()
                .filter_map(|s| s.cidr.as_deref()?.parse().ok())
                .collect(),
            (Some(id), None) if !id.is_empty() => {
                return Err(vec![FieldError::new(
                    "--vpc",
                    format!("the ranges the subnetworks of network `{id}` use are not known"),
                )
                .value(id)
                .hint("kops reads them from Compute Engine; name the network's subnetwork of the region with --subnets, or give the subnet its `cidr`")])
            }
            _ => Vec::new(),
        };
        gce::assign_network(cluster, &used).map_err(|e| vec![e])?;
    }
    assign_proxy_excludes(cluster).map_err(|e| vec![e])?;
    Ok(())
}

// ------------------------------------------------------------------ flags

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Topology {
    Public,
    Private,
}

/// The clouds `create cluster` builds specs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cloud {
    Aws,
    Gce,
    Vsphere,
}

impl Cloud {
    fn parse(name: &str) -> Option<Cloud> {
        match name {
            "aws" => Some(Cloud::Aws),
            "gce" => Some(Cloud::Gce),
            "vsphere" => Some(Cloud::Vsphere),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Gce => "gce",
            Cloud::Vsphere => "vsphere",
        }
    }

    /// The region of one of this cloud's zones.
    fn zone_region(self, zone: &str) -> Option<String> {
        match self {
            Cloud::Aws => aws_region(zone),
            Cloud::Gce => gce_region(zone),
            // vSphere zones are names of the user's choosing, in one
            // datacenter.
            Cloud::Vsphere => Some("vsphere".into()),
        }
    }

    /// How the cloud's zones are named, for a hint.
    fn zone_hint(self) -> &'static str {
        match self {
            Cloud::Aws => "AWS zones are a region and a letter, e.g. `us-east-1a`",
            Cloud::Gce => "Compute Engine zones are a region and a letter, e.g. `us-central1-a`",
            Cloud::Vsphere => "vSphere zones are names of your choosing, e.g. `dc0`",
        }
    }
}

/// The flags, checked and normalised.
struct Flags {
    name: String,
    cloud: Cloud,
    region: String,
    zones: Vec<String>,
    control_plane_zones: Vec<String>,
    /// Zones and control-plane zones, sorted.
    all_zones: Vec<String>,
    control_plane_count: usize,
    topology: Topology,
    dns: &'static str,
    networking: String,
    kubernetes_version: String,
    parsed_version: KubernetesVersion,
    feature_gates: Vec<(String, bool)>,
    cloud_labels: BTreeMap<String, String>,
    api_lb_type: Option<&'static str>,
    karpenter: bool,
    always_allow: bool,
    network_id: Option<String>,
    project: Option<String>,
}

fn non_empty(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

fn clean_list(list: &[String]) -> Vec<String> {
    list.iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn guess_cloud(o: &NewClusterOptions) -> Option<&'static str> {
    let store = o.state_store.as_deref().unwrap_or("");
    if store.starts_with("s3://") {
        return Some("aws");
    }
    for (scheme, cloud) in [
        ("gs://", "gce"),
        ("do://", "digitalocean"),
        ("swift://", "openstack"),
        ("azureblob://", "azure"),
        ("scw://", "scaleway"),
    ] {
        if store.starts_with(scheme) {
            return Some(cloud);
        }
    }
    let zones = clean_list(&o.zones);
    if !zones.is_empty() && zones.iter().all(|z| aws_region(z).is_some()) {
        return Some("aws");
    }
    if !zones.is_empty() && zones.iter().all(|z| gce_region(z).is_some()) {
        return Some("gce");
    }
    None
}

/// The cloud `create cluster` builds for: `--cloud`, else the one guessed
/// from the state store or the zones.
pub fn chosen_cloud(o: &NewClusterOptions) -> Option<String> {
    match non_empty(&o.cloud) {
        Some(c) => Some(c.to_ascii_lowercase()),
        None => guess_cloud(o).map(str::to_string),
    }
}

/// Flags that only mean something on AWS, with what to do instead on GCE.
fn aws_only_flags(o: &NewClusterOptions) -> Vec<(&'static str, &'static str)> {
    let given = |v: &Option<String>| non_empty(v).is_some();
    let karpenter =
        non_empty(&o.instance_manager).is_some_and(|m| m.eq_ignore_ascii_case("karpenter"));
    [
        (
            !clean_list(&o.network_cidrs).is_empty(),
            "--network-cidr",
            "GCE networks have no CIDR of their own (kops refuses spec.networkCIDR on GCE); drop it: the region's subnet gets a /20 of 10.0.0.0/8",
        ),
        (o.ipv6, "--ipv6", "drop it: kops supports IPv6 on AWS only"),
        (
            !clean_list(&o.utility_subnet_ids).is_empty(),
            "--utility-subnets",
            "drop it: GCE clusters have no utility subnets",
        ),
        (given(&o.egress), "--egress", "drop it: private GCE subnets reach out through a Cloud NAT kops makes"),
        (given(&o.control_plane_tenancy), "--control-plane-tenancy", "drop it: tenancy is an EC2 setting"),
        (given(&o.node_tenancy), "--node-tenancy", "drop it: tenancy is an EC2 setting"),
        (given(&o.api_ssl_certificate), "--api-ssl-certificate", "drop it: kops supports a TLS certificate on the API load balancer on AWS only"),
        (karpenter, "--instance-manager", "use `cloudgroups` (the default): Karpenter runs on AWS only"),
        (o.disable_subnet_tags, "--disable-subnet-tags", "drop it: subnet tags are an AWS setting"),
    ]
    .into_iter()
    .filter(|(set, _, _)| *set)
    .map(|(_, flag, hint)| (flag, hint))
    .collect()
}

/// The flags checked one concern at a time, in the order their problems
/// are reported.
fn check_flags(o: &NewClusterOptions) -> Result<Flags, Vec<FieldError>> {
    let mut errors = Vec::new();
    let e = &mut errors;
    let name = check_name(o, e);
    let cloud = check_cloud(o, e);
    let project = check_cloud_flags(o, cloud, e);
    let zones = check_zones(o, cloud, e);
    let control_plane_count = check_control_plane_count(o, &zones.control_plane_zones, e);
    let (kubernetes_version, parsed_version) = check_kubernetes_version(o, e);
    let feature_gates = check_feature_gates(o, e);
    let networking = check_networking(o, e);
    let topology = check_topology(o, &networking, e);
    let dns = check_dns(o, cloud, &name, e);
    let api_lb_type = check_api_load_balancer_type(o, e);
    let always_allow = check_authorization(o, e);
    let karpenter = check_instance_manager(o, e);
    let cloud_labels = check_cloud_labels(o, e);
    check_network_cidrs_and_sizes(o, e);
    let network_id = check_network_id(o, cloud, e);

    if errors.is_empty() {
        let Zones {
            zones,
            control_plane_zones,
            all_zones,
            region,
        } = zones;
        Ok(Flags {
            name,
            cloud,
            region,
            zones,
            control_plane_zones,
            all_zones,
            control_plane_count,
            topology,
            dns,
            networking,
            kubernetes_version,
            parsed_version,
            feature_gates,
            cloud_labels,
            api_lb_type,
            karpenter,
            always_allow,
            network_id,
            project,
        })
    } else {
        Err(errors)
    }
}

/// The cluster's name, trimmed: a DNS name.
fn check_name(o: &NewClusterOptions, errors: &mut Vec<FieldError>) -> String {
    let name = o.cluster_name.trim().to_string();
    if let Some(problem) = dns_name_problem(&name) {
        errors.push(
            FieldError::new("--name", format!("the cluster name {problem}"))
                .value(&name)
                .hint("name the cluster with a DNS name such as `mycluster.example.com` (or `mycluster.k8s.local`)"),
        );
    }
    name
}

/// `--cloud`, or the cloud guessed; AWS stands in when it is unknown (its
/// problem is reported).
fn check_cloud(o: &NewClusterOptions, errors: &mut Vec<FieldError>) -> Cloud {
    let cloud = chosen_cloud(o).unwrap_or_else(|| {
        errors.push(
            FieldError::new("--cloud", "the cloud provider could not be guessed")
                .hint("pass `--cloud aws` or `--cloud gce` (it is guessed from an `s3://` or `gs://` state store, or from the zone names)"),
        );
        String::new()
    });
    match (cloud.as_str(), Cloud::parse(&cloud)) {
        (_, Some(c)) => c,
        ("", None) => Cloud::Aws,
        (other, None) => {
            let message = if KNOWN_CLOUDS.contains(&other) {
                "kops-rs creates clusters on AWS, GCE and vSphere only"
            } else {
                "is not a cloud provider kops knows"
            };
            errors.push(
                FieldError::new("--cloud", message)
                    .value(other)
                    .hint("use `--cloud aws`, `--cloud gce` or `--cloud vsphere`"),
            );
            Cloud::Aws
        }
    }
}

/// The flags of one cloud given for another; the Google Cloud project of
/// a GCE cluster.
fn check_cloud_flags(
    o: &NewClusterOptions,
    cloud: Cloud,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    let mut project = None;
    match cloud {
        Cloud::Gce => project = check_gce_flags(o, errors),
        Cloud::Vsphere => check_vsphere_flags(o, errors),
        Cloud::Aws => {
            for (flag, value) in gce_flags(o) {
                if value.is_some() {
                    errors.push(
                        FieldError::new(flag, "applies to Google Cloud (GCE) clusters only")
                            .value(format!("--cloud {}", cloud.as_str()))
                            .hint("drop it, or create the cluster with `--cloud gce`"),
                    );
                }
            }
        }
    }
    if cloud != Cloud::Vsphere {
        for flag in o.vsphere.given() {
            errors.push(
                FieldError::new(flag, "applies to vSphere clusters only")
                    .value(format!("--cloud {}", cloud.as_str()))
                    .hint("drop it, or create the cluster with `--cloud vsphere`"),
            );
        }
    }
    project
}

/// The flags that only Google Cloud reads.
fn gce_flags(o: &NewClusterOptions) -> [(&'static str, Option<&String>); 2] {
    [
        ("--project", o.project.as_ref()),
        ("--gce-service-account", o.gce_service_account.as_ref()),
    ]
}

/// A GCE cluster's flags: its project (returned), service account,
/// subnetwork and machine types, and no AWS-only flag.
fn check_gce_flags(o: &NewClusterOptions, errors: &mut Vec<FieldError>) -> Option<String> {
    let mut project = None;
    match o.project.as_deref().map(str::trim) {
        Some("") => errors.push(
            FieldError::new("--project", "is empty")
                .hint("name the Google Cloud project (an unset variable in `--project=$PROJECT`?), or leave --project out to use gcloud's default project"),
        ),
        Some(p) => project = Some(p.to_string()),
        None => errors.push(
            FieldError::new("--project", "no Google Cloud project is given and gcloud has no default project")
                .hint("pass `--project <project-id>`, or set gcloud's default with `gcloud config set project <project-id>`"),
        ),
    }
    if o.gce_service_account.as_deref().map(str::trim) == Some("") {
        errors.push(
            FieldError::new("--gce-service-account", "is empty")
                .hint("name a service account such as `kops@<project>.iam.gserviceaccount.com`, or leave the flag out (kops then makes one per role)"),
        );
    }
    for (flag, hint) in aws_only_flags(o) {
        errors.push(
            FieldError::new(flag, "applies to AWS clusters only")
                .value("--cloud gce")
                .hint(hint),
        );
    }
    if clean_list(&o.subnet_ids).len() > 1 {
        errors.push(
            FieldError::new(
                "--subnets",
                "a GCE cluster uses one subnetwork (GCE subnets are regional)",
            )
            .value(o.subnet_ids.join(","))
            .hint("name the one existing subnetwork of the cluster's region"),
        );
    }
    for (flag, sizes) in [
        ("--control-plane-size", &o.control_plane_size),
        ("--node-size", &o.node_size),
        ("--apiserver-size", &o.apiserver_size),
    ] {
        for t in clean_list(sizes) {
            if let Some(problem) = gce::machine_type_problem(&t) {
                errors.push(
                    FieldError::new(flag, problem)
                        .value(&t)
                        .hint(gce::MACHINE_TYPE_HINT),
                );
            }
        }
    }
    project
}

/// A vSphere cluster's flags: where its VMs go, how vCenter is trusted,
/// its machine sizes, and no flag of another cloud.
fn check_vsphere_flags(o: &NewClusterOptions, errors: &mut Vec<FieldError>) {
    let v = &o.vsphere;
    for (flag, value, hint) in [
        (
            "--vsphere-server",
            &v.server,
            "name the vCenter, e.g. `--vsphere-server vcenter.example.com`",
        ),
        (
            "--vsphere-datacenter",
            &v.datacenter,
            "name the datacenter the VMs run in",
        ),
        (
            "--vsphere-resource-pool",
            &v.resource_pool,
            "name the cluster, host or resource pool the VMs run in",
        ),
        (
            "--vsphere-datastore",
            &v.datastore,
            "name the datastore of the VMs' disks",
        ),
    ] {
        if non_empty(value).is_none() {
            errors.push(FieldError::new(flag, "is required for vSphere").hint(hint));
        }
    }
    if non_empty(&v.thumbprint).is_some() && non_empty(&v.ca_certificate).is_some() {
        errors.push(
            FieldError::new(
                "--vsphere-thumbprint",
                "and --vsphere-ca-file are both given",
            )
            .hint("pin vCenter's certificate or trust its CA, not both"),
        );
    }
    if let Some(t) = non_empty(&v.thumbprint) {
        if normalize_thumbprint(t).is_none() {
            errors.push(
                FieldError::new("--vsphere-thumbprint", "is not a SHA-1 fingerprint")
                    .value(t)
                    .hint("give 20 hex bytes as `govc about.cert -thumbprint` prints them (AB:CD:...)"),
            );
        }
    }
    if let Some(pem) = non_empty(&v.ca_certificate) {
        if !pem.contains("-----BEGIN CERTIFICATE-----") {
            errors.push(
                FieldError::new("--vsphere-ca-file", "holds no PEM certificate")
                    .hint("name the PEM file of the CA that signed vCenter's certificate (-----BEGIN CERTIFICATE-----)"),
            );
        }
    }
    for (flag, hint) in aws_only_flags(o) {
        errors.push(
            FieldError::new(flag, "applies to AWS clusters only")
                .value("--cloud vsphere")
                .hint(hint),
        );
    }
    for (flag, value) in gce_flags(o) {
        if value.is_some() {
            errors.push(
                FieldError::new(flag, "applies to Google Cloud (GCE) clusters only")
                    .value("--cloud vsphere")
                    .hint("drop it"),
            );
        }
    }
    for (flag, sizes) in [
        ("--control-plane-size", &o.control_plane_size),
        ("--node-size", &o.node_size),
    ] {
        for t in clean_list(sizes) {
            if vsphere_machine_type(&t).is_none() {
                errors.push(
                    FieldError::new(flag, "is not a vSphere machine size")
                        .value(&t)
                        .hint("size vSphere VMs as `<cpus>cpu-<memory>gb`, e.g. `2cpu-4gb`"),
                );
            }
        }
    }
}

/// The zones, checked and normalised.
struct Zones {
    zones: Vec<String>,
    control_plane_zones: Vec<String>,
    /// Zones and control-plane zones, sorted.
    all_zones: Vec<String>,
    region: String,
}

/// `--zones` and `--control-plane-zones`: each once, each a zone of the
/// cloud, all in one region (a vSphere cluster without any gets one named
/// after its datacenter).
fn check_zones(o: &NewClusterOptions, cloud: Cloud, errors: &mut Vec<FieldError>) -> Zones {
    let mut zones = clean_list(&o.zones);
    if zones.is_empty() && cloud == Cloud::Vsphere {
        if let Some(dc) = non_empty(&o.vsphere.datacenter) {
            let zone: String = dc
                .to_ascii_lowercase()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            zones.push(zone);
        }
    }
    let control_plane_zones = clean_list(&o.control_plane_zones);
    let mut region = String::new();
    if zones.is_empty() {
        errors.push(
            FieldError::new("--zones", "at least one zone is required")
                .hint("name the availability zones to run in, e.g. `--zones us-east-1a,us-east-1b,us-east-1c`"),
        );
    }
    for (flag, list) in [
        ("--zones", &zones),
        ("--control-plane-zones", &control_plane_zones),
    ] {
        let mut seen = BTreeSet::new();
        for z in list {
            if !seen.insert(z.as_str()) {
                errors.push(
                    FieldError::new(flag, "lists a zone twice")
                        .value(z)
                        .hint("name each zone once"),
                );
            }
        }
    }
    let mut regions: BTreeMap<String, String> = BTreeMap::new();
    for (flag, z) in zones.iter().map(|z| ("--zones", z)).chain(
        control_plane_zones
            .iter()
            .map(|z| ("--control-plane-zones", z)),
    ) {
        match cloud.zone_region(z) {
            Some(r) => {
                regions.entry(r).or_insert_with(|| z.clone());
            }
            None => errors.push(
                FieldError::new(
                    flag,
                    match cloud {
                        Cloud::Aws => "is not an AWS availability zone",
                        Cloud::Gce => "is not a Compute Engine zone",
                        Cloud::Vsphere => "is not a zone name",
                    },
                )
                .value(z)
                .hint(cloud.zone_hint()),
            ),
        }
    }
    if regions.len() > 1 {
        let shown: Vec<String> = regions
            .iter()
            .map(|(r, z)| format!("`{z}` is in {r}"))
            .collect();
        errors.push(
            FieldError::new("--zones", format!("the zones are in more than one region ({})", shown.join(", ")))
                .value(zones.join(","))
                .hint("a cluster lives in one region: pick all zones (and control-plane zones) from the same region"),
        );
    } else if let Some(r) = regions.keys().next() {
        region = r.clone();
    }
    let all_zones: Vec<String> = zones
        .iter()
        .chain(control_plane_zones.iter())
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    Zones {
        zones,
        control_plane_zones,
        all_zones,
        region,
    }
}

/// `--control-plane-count`: at least one, and one per control-plane zone.
fn check_control_plane_count(
    o: &NewClusterOptions,
    control_plane_zones: &[String],
    errors: &mut Vec<FieldError>,
) -> usize {
    let mut control_plane_count = 1;
    match o.control_plane_count {
        Some(0) => errors.push(
            FieldError::new("--control-plane-count", "must be at least 1")
                .value(0)
                .hint("use 1 for a single control-plane node, or 3 (or 5) for a highly available control plane"),
        ),
        Some(n) => {
            if !control_plane_zones.is_empty() && (n as usize) < control_plane_zones.len() {
                errors.push(
                    FieldError::new(
                        "--control-plane-count",
                        format!(
                            "asks for {n} control-plane nodes but {} control-plane zones are given",
                            control_plane_zones.len()
                        ),
                    )
                    .value(n)
                    .hint("give at least one control-plane node per control-plane zone, or leave the count out"),
                );
            }
            control_plane_count = n as usize;
        }
        None => {
            if !control_plane_zones.is_empty() {
                control_plane_count = control_plane_zones.len();
            }
        }
    }
    control_plane_count
}

/// `--kubernetes-version`, as given and parsed (the recommended version
/// stands in for one that is refused).
fn check_kubernetes_version(
    o: &NewClusterOptions,
    errors: &mut Vec<FieldError>,
) -> (String, KubernetesVersion) {
    let kubernetes_version = match non_empty(&o.kubernetes_version) {
        Some(v) => v.to_string(),
        None => version::recommended(None).to_string(),
    };
    let parsed_version = match version::check_supported(&kubernetes_version) {
        Ok(v) => v,
        Err(problem) => {
            let (message, hint) = match problem {
                VersionProblem::Unparsable => (
                    "is not a Kubernetes version",
                    format!(
                        "write it as `vMAJOR.MINOR.PATCH`, e.g. `{}`",
                        version::recommended(None)
                    ),
                ),
                VersionProblem::TooOld => (
                    "is older than the oldest Kubernetes version kops-rs deploys",
                    format!("use {} or newer", version::OLDEST_SUPPORTED),
                ),
                VersionProblem::TooNew => (
                    "is newer than the Kubernetes versions kops-rs deploys",
                    format!(
                        "use a version up to v{}.{}.x",
                        version::NEWEST_SUPPORTED.major,
                        version::NEWEST_SUPPORTED.minor
                    ),
                ),
            };
            errors.push(
                FieldError::new("--kubernetes-version", message)
                    .value(&kubernetes_version)
                    .hint(hint),
            );
            version::recommended(None)
        }
    };
    (kubernetes_version, parsed_version)
}

/// `--kubernetes-feature-gates`, parsed.
fn check_feature_gates(o: &NewClusterOptions, errors: &mut Vec<FieldError>) -> Vec<(String, bool)> {
    let mut feature_gates = Vec::new();
    for g in &o.kubernetes_feature_gates {
        match parse_feature_gate(g) {
            Ok(parsed) => feature_gates.push(parsed),
            Err(message) => errors.push(
                FieldError::new("--kubernetes-feature-gates", message)
                    .value(g)
                    .hint("write `Name` or `+Name` to enable a gate and `-Name` to disable it"),
            ),
        }
    }
    feature_gates
}

/// `--networking` (cilium unless given).
fn check_networking(o: &NewClusterOptions, errors: &mut Vec<FieldError>) -> String {
    let networking = non_empty(&o.networking).unwrap_or("cilium").to_string();
    let valid_networking =
        NETWORKING_FLAG_VALUES.contains(&networking.as_str()) || networking == "gcp";
    if !valid_networking {
        errors.push(
            FieldError::new("--networking", "is not a networking option kops knows")
                .value(&networking)
                .hint(format!("use one of: {}", NETWORKING_FLAG_VALUES.join(", "))),
        );
    }
    networking
}

/// `--topology`, and what it does not go with (a bastion on the public
/// topology, kubenet on the private one).
fn check_topology(
    o: &NewClusterOptions,
    networking: &str,
    errors: &mut Vec<FieldError>,
) -> Topology {
    let topology = match non_empty(&o.topology)
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None => {
            if o.ipv6 {
                Topology::Private
            } else {
                Topology::Public
            }
        }
        Some("public") => Topology::Public,
        Some("private") => Topology::Private,
        Some(other) => {
            errors.push(
                FieldError::new("--topology", "is not a topology")
                    .value(other)
                    .hint("use `public` (nodes get public IPs) or `private` (nodes behind NAT, with utility subnets)"),
            );
            Topology::Public
        }
    };
    if o.bastion && topology == Topology::Public {
        errors.push(
            FieldError::new("--bastion", "a bastion needs the private topology")
                .hint("add `--topology private`, or drop `--bastion`"),
        );
    }
    if topology == Topology::Private && networking == "kubenet" {
        errors.push(
            FieldError::new(
                "--networking",
                "kubenet does not support the private topology",
            )
            .value(networking)
            .hint("choose another CNI such as `cilium` or `calico`, or use `--topology public`"),
        );
    }
    topology
}

/// `--dns` (public when a DNS zone is given, else none), and what it needs:
/// a control-plane address on vSphere without DNS, no gossip name.
fn check_dns(
    o: &NewClusterOptions,
    cloud: Cloud,
    name: &str,
    errors: &mut Vec<FieldError>,
) -> &'static str {
    let dns = match non_empty(&o.dns_type)
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None => {
            if non_empty(&o.dns_zone).is_some() {
                "Public"
            } else {
                "None"
            }
        }
        Some("public") => "Public",
        Some("private") => "Private",
        Some("none") => "None",
        Some(other) => {
            errors.push(
                FieldError::new("--dns", "is not a DNS type")
                    .value(other)
                    .hint("use `public`, `private` or `none`"),
            );
            "None"
        }
    };

    if cloud == Cloud::Vsphere && dns == "None" && non_empty(&o.vsphere.control_plane_vip).is_none()
    {
        errors.push(
            FieldError::new(
                "--vsphere-control-plane-vip",
                "is required for a vSphere cluster without DNS (`--dns none`)",
            )
            .hint("give a free address of the VMs' network: kube-vip holds it on a control-plane VM and nodes reach the API there"),
        );
    }
    if dns != "None" && is_gossip_name(name) {
        errors.push(
            FieldError::new("--dns", GOSSIP_REMOVED)
                .value(dns.to_ascii_lowercase())
                .hint(GOSSIP_HINT),
        );
    }
    dns
}

/// `--api-loadbalancer-type`.
fn check_api_load_balancer_type(
    o: &NewClusterOptions,
    errors: &mut Vec<FieldError>,
) -> Option<&'static str> {
    match non_empty(&o.api_load_balancer_type)
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None => None,
        Some("public") => Some("Public"),
        Some("internal") => Some("Internal"),
        Some(other) => {
            errors.push(
                FieldError::new("--api-loadbalancer-type", "is not a load balancer type")
                    .value(other)
                    .hint("use `public` or `internal`"),
            );
            None
        }
    }
}

/// `--authorization`: whether it is `AlwaysAllow`.
fn check_authorization(o: &NewClusterOptions, errors: &mut Vec<FieldError>) -> bool {
    match non_empty(&o.authorization) {
        None => false,
        Some(a) if a.eq_ignore_ascii_case("rbac") => false,
        Some(a) if a.eq_ignore_ascii_case("alwaysallow") => true,
        Some(a) => {
            errors.push(
                FieldError::new("--authorization", "is not an authorization mode")
                    .value(a)
                    .hint("use `RBAC` (the default) or `AlwaysAllow`"),
            );
            false
        }
    }
}

/// `--instance-manager`: whether it is Karpenter (which needs a discovery
/// store).
fn check_instance_manager(o: &NewClusterOptions, errors: &mut Vec<FieldError>) -> bool {
    match non_empty(&o.instance_manager)
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("cloudgroups") => false,
        Some("karpenter") => {
            if non_empty(&o.discovery_store).is_none() {
                errors.push(
                    FieldError::new("--instance-manager", "karpenter needs IAM roles for service accounts")
                        .value("karpenter")
                        .hint("add `--discovery-store s3://<public-bucket>` to publish the OIDC documents"),
                );
            }
            true
        }
        Some(other) => {
            errors.push(
                FieldError::new("--instance-manager", "is not an instance manager")
                    .value(other)
                    .hint("use `cloudgroups` (the default) or `karpenter`"),
            );
            false
        }
    }
}

/// `--cloud-labels`, parsed.
fn check_cloud_labels(
    o: &NewClusterOptions,
    errors: &mut Vec<FieldError>,
) -> BTreeMap<String, String> {
    match non_empty(&o.cloud_labels) {
        None => BTreeMap::new(),
        Some(text) => parse_cloud_labels(text).unwrap_or_else(|message| {
            errors.push(
                FieldError::new("--cloud-labels", message)
                    .value(text)
                    .hint("write KEY=VALUE pairs separated by commas; quote a key or value that holds `=`, e.g. `dn=\"cn=x\"`"),
            );
            BTreeMap::new()
        }),
    }
}

/// `--network-cidr` and `--apiserver-size`.
fn check_network_cidrs_and_sizes(o: &NewClusterOptions, errors: &mut Vec<FieldError>) {
    for c in clean_list(&o.network_cidrs) {
        if c.parse::<Ipv4Net>().is_err() {
            errors.push(
                FieldError::new("--network-cidr", "is not an IPv4 CIDR")
                    .value(&c)
                    .hint("write it as ADDRESS/PREFIX, e.g. `10.0.0.0/16`"),
            );
        }
    }

    // Machine counts and sizes.
    if clean_list(&o.apiserver_size).len() > 1 {
        errors.push(
            FieldError::new(
                "--apiserver-size",
                "API server groups take one machine type",
            )
            .value(o.apiserver_size.join(","))
            .hint("give a single machine type"),
        );
    }
}

/// The VPC of the cluster: `--vpc`, else (on AWS) that of the first of
/// `--subnets`, which kops looks up.
fn check_network_id(
    o: &NewClusterOptions,
    cloud: Cloud,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    let mut network_id = non_empty(&o.network_id).map(str::to_string);
    let subnet_ids = clean_list(&o.subnet_ids);
    if network_id.is_none() && cloud == Cloud::Aws {
        if let Some(first) = subnet_ids.first() {
            match o.existing_network.as_ref().filter(|e| e.subnet(first).is_some()) {
                Some(e) => network_id = Some(e.network_id.clone()),
                None => errors.push(
                    FieldError::new("--subnets", format!("the VPC of subnet `{first}` is not known"))
                        .value(first)
                        .hint("pass the subnets' VPC with `--vpc vpc-...` (kops reads it from AWS with DescribeSubnets)"),
                ),
            }
        }
    }
    network_id
}

// ------------------------------------------------------------------ building

/// Maps each zone to the ids of existing subnets named for it; kops asks AWS
/// in which zone each of them is.
fn zone_to_subnet_id(
    flag: &str,
    ids: &[String],
    network_id: Option<&str>,
    existing: Option<&ExistingNetwork>,
) -> Result<BTreeMap<String, String>, FieldError> {
    let mut map = BTreeMap::new();
    if ids.is_empty() {
        return Ok(map);
    }
    let network_id = network_id.unwrap_or("");
    let info = existing.filter(|e| e.network_id == network_id).ok_or_else(|| {
        FieldError::new(flag, format!("the zones of the subnets of VPC `{network_id}` are not known"))
            .value(ids.join(","))
            .hint("kops reads them from AWS (DescribeVpcs/DescribeSubnets); pass the existing network's description")
    })?;
    for id in ids {
        let subnet = info.subnet(id).ok_or_else(|| {
            FieldError::new(flag, format!("subnet `{id}` is not in VPC `{network_id}`"))
                .value(id)
                .hint("name subnets of the VPC given with --vpc")
        })?;
        if let Some(other) = map.get(&subnet.zone) {
            return Err(FieldError::new(
                flag,
                format!(
                    "subnets `{id}` and `{other}` are in the same zone `{}`",
                    subnet.zone
                ),
            )
            .value(ids.join(","))
            .hint("name one subnet per zone"));
        }
        map.insert(subnet.zone.clone(), id.clone());
    }
    Ok(map)
}

fn networking_spec(name: &str, cluster: &mut Cluster) -> NetworkingSpec {
    let mut n = NetworkingSpec::default();
    let disable_kube_proxy = |cluster: &mut Cluster| {
        cluster
            .spec
            .kube_proxy
            .get_or_insert_with(KubeProxyConfig::default)
            .enabled = Some(false);
    };
    let cilium = |ipam: Option<&str>, etcd: bool| CiliumSpec {
        enable_node_port: Some(true),
        ipam: ipam.map(str::to_string),
        etcd_managed: etcd.then_some(true),
        ..Default::default()
    };
    match name {
        "kubenet" => n.kubenet = Some(Extra::new()),
        "external" => n.external = Some(Extra::new()),
        "cni" => n.cni = Some(Extra::new()),
        "kopeio" | "kopeio-vxlan" => n.kopeio = Some(Extra::new()),
        "flannel" | "flannel-vxlan" => {
            n.flannel = Some(FlannelSpec {
                backend: Some("vxlan".into()),
                ..Default::default()
            })
        }
        "flannel-udp" => {
            n.flannel = Some(FlannelSpec {
                backend: Some("udp".into()),
                ..Default::default()
            })
        }
        "calico" => n.calico = Some(CalicoSpec::default()),
        "kube-router" => {
            n.kuberouter = Some(Extra::new());
            disable_kube_proxy(cluster);
        }
        "amazonvpc" | "amazon-vpc-routed-eni" => n.amazonvpc = Some(Default::default()),
        "cilium-etcd" => {
            n.cilium = Some(cilium(None, true));
            disable_kube_proxy(cluster);
        }
        "cilium-eni" => {
            n.cilium = Some(cilium(Some("eni"), false));
            disable_kube_proxy(cluster);
        }
        "gce" | "gcp" => n.gce = Some(Extra::new()),
        "kindnet" => n.kindnet = Some(Extra::new()),
        _ => {
            n.cilium = Some(cilium(None, false));
            disable_kube_proxy(cluster);
        }
    }
    n
}

/// Etcd member names: the control-plane group names without the
/// `control-plane-` prefix and without the prefix they all share (`a`, `b`,
/// `c` for `us-east-1a..c`); a name that would start with a digit gets
/// `etcd-` in front.
fn etcd_member_names(groups: &[String]) -> Vec<String> {
    let mut names: Vec<String> = groups
        .iter()
        .map(|g| {
            let n = g.strip_prefix("control-plane-").unwrap_or(g);
            n.strip_prefix("master-").unwrap_or(n).to_string()
        })
        .collect();
    while let Some(first) = names.first() {
        if first.len() <= 1 {
            break;
        }
        let Some(prefix) = first.chars().next() else {
            break;
        };
        if !names.iter().all(|n| n.starts_with(prefix)) {
            break;
        }
        for n in &mut names {
            n.remove(0);
        }
    }
    for n in &mut names {
        if n.starts_with(|c: char| c.is_ascii_digit()) {
            *n = format!("etcd-{n}");
        }
    }
    names
}

/// The first size is the group's machine type; more than one make a mixed
/// instances policy where the cloud has one (AWS), else the rest are unused
/// (as kops).
fn apply_sizes(ig: &mut InstanceGroup, sizes: &[String], mixed: bool) {
    if let Some(first) = sizes.first() {
        ig.spec.machine_type = Some(first.clone());
    }
    if mixed && sizes.len() > 1 {
        ig.spec.mixed_instances_policy = Some(MixedInstancesPolicy {
            instances: Some(sizes.to_vec()),
            ..Default::default()
        });
    }
}

fn sized_group(cluster: &str, name: String, role: Role, size: i64) -> InstanceGroup {
    let mut ig = InstanceGroup::new(cluster, name, role);
    ig.spec.min_size = Some(size);
    ig.spec.max_size = Some(size);
    ig
}

/// Spreads `total` over `zones` the way kops does: the first zones get one
/// more when it does not divide evenly (10 over 3 zones → 4, 3, 3).
fn spread(total: usize, zones: usize) -> Vec<usize> {
    (0..zones)
        .map(|i| total / zones + usize::from(i < total % zones))
        .collect()
}

/// Builds the cluster and its instance groups from the flags. Every problem
/// with the flags comes back as a [`FieldError`] whose path is the flag
/// (`--zones`) so the user knows what to change.
pub fn new_cluster(options: &NewClusterOptions) -> Result<NewCluster, Vec<FieldError>> {
    let o = options;
    let f = check_flags(o)?;
    let existing = o.existing_network.as_ref();

    let mut cluster = base_cluster(o, &f);
    cluster.spec.network_id = f.network_id.clone();
    let mut errors = Vec::new();
    let (mut subnets, zone_subnets) = cluster_subnets(o, &f, existing, &mut errors);
    let networking = networking_spec(&f.networking, &mut cluster);
    cluster.spec.networking = Some(networking);
    let bastions = topology(o, &f, existing, &mut cluster, &mut subnets, &mut errors);
    let control_planes = control_plane_groups(o, &f, &zone_subnets);
    etcd_clusters(o, &f, &control_planes, &mut cluster);
    let nodes = node_groups(o, &f, &mut cluster, &zone_subnets);
    let apiservers = api_server_groups(o, &f, &zone_subnets);
    api_access(o, &f, &mut cluster);

    let mut groups: Vec<InstanceGroup> = control_planes;
    groups.extend(apiservers);
    groups.extend(nodes);
    groups.extend(bastions);
    complete_groups(o, &f, &subnets, &mut groups, &mut errors)?;
    cluster.spec.subnets = Some(subnets);
    if !errors.is_empty() {
        return Err(errors);
    }

    apply_create_flags(o, &f, &mut cluster, &mut groups);
    if f.cloud == Cloud::Vsphere {
        assign_vsphere_addresses(&mut cluster, &groups, &o.vsphere.control_plane_addresses)?;
    }
    apply_sets(o, &mut cluster, &mut groups)?;
    calico_bpf_replaces_kube_proxy(&mut cluster);
    perform_assignments(&mut cluster, existing)?;

    groups.sort_by(|a, b| a.name().cmp(b.name()));
    Ok(NewCluster {
        cluster,
        instance_groups: groups,
    })
}

/// The cluster as kops starts it: channel, version, state store,
/// authorization, IAM, kubelet, feature gates, who may reach it, the
/// cloud's settings and the service-account issuer's store.
fn base_cluster(o: &NewClusterOptions, f: &Flags) -> Cluster {
    let name = f.name.as_str();
    let gce = f.cloud == Cloud::Gce;
    let mut cluster = Cluster::new(name);
    let spec = &mut cluster.spec;
    spec.channel = Some(non_empty(&o.channel).unwrap_or(DEFAULT_CHANNEL).to_string());
    spec.kubernetes_version = Some(f.kubernetes_version.clone());
    if let Some(store) = non_empty(&o.state_store) {
        // As kops writes it: bare for a local directory.
        spec.config_base = Some(crate::store_path::join(store, name));
    }
    spec.authorization = Some(if f.always_allow {
        AuthorizationSpec {
            always_allow: Some(Extra::new()),
            ..Default::default()
        }
    } else {
        AuthorizationSpec {
            rbac: Some(Extra::new()),
            ..Default::default()
        }
    });
    spec.iam = Some(IamSpec {
        allow_container_registry: Some(true),
        legacy: Some(false),
        ..Default::default()
    });
    spec.kubelet = Some(KubeletConfig {
        anonymous_auth: Some(false),
        ..Default::default()
    });

    if !f.feature_gates.is_empty() {
        let gates: FeatureGates = f
            .feature_gates
            .iter()
            .map(|(g, on)| (g.clone(), on.to_string()))
            .collect();
        if let Some(k) = spec.kubelet.as_mut() {
            k.feature_gates = Some(gates.clone());
        }
        spec.kube_api_server = Some(KubeApiServerConfig {
            feature_gates: Some(gates.clone()),
            ..Default::default()
        });
        spec.kube_controller_manager = Some(KubeControllerManagerConfig {
            feature_gates: Some(gates.clone()),
            ..Default::default()
        });
        spec.kube_proxy = Some(KubeProxyConfig {
            feature_gates: Some(gates.clone()),
            ..Default::default()
        });
        spec.kube_scheduler = Some(KubeSchedulerConfig {
            feature_gates: Some(gates),
            ..Default::default()
        });
    }

    let mut admin_access = clean_list(&o.admin_access);
    if admin_access.is_empty() {
        admin_access = DEFAULT_ADMIN_ACCESS.iter().map(|s| s.to_string()).collect();
    }
    let ssh_access = clean_list(&o.ssh_access);
    spec.ssh_access = Some(if ssh_access.is_empty() {
        admin_access.clone()
    } else {
        ssh_access
    });
    spec.kubernetes_api_access = Some(admin_access);
    spec.cloud_provider = Some(f.cloud.as_str().into());
    if f.cloud == Cloud::Vsphere {
        let v = &o.vsphere;
        let get = |value: &Option<String>| non_empty(value).map(str::to_string);
        spec.cloud_config = Some(CloudConfiguration {
            vsphere_server: get(&v.server),
            vsphere_datacenter: get(&v.datacenter),
            vsphere_resource_pool: get(&v.resource_pool),
            vsphere_datastore: get(&v.datastore),
            vsphere_core_dns_server: get(&v.core_dns_server),
            vsphere_folder: get(&v.folder),
            vsphere_network: get(&v.network),
            vsphere_control_plane_vip: get(&v.control_plane_vip),
            vsphere_gateway: get(&v.gateway),
            vsphere_nameservers: Some(clean_list(&v.nameservers)).filter(|l| !l.is_empty()),
            vsphere_thumbprint: non_empty(&v.thumbprint).and_then(normalize_thumbprint),
            vsphere_ca_certificate: non_empty(&v.ca_certificate).map(|pem| format!("{pem}\n")),
            ..Default::default()
        });
    }
    if gce {
        spec.project = f.project.clone();
        spec.cloud_config = Some(CloudConfiguration {
            gce_service_account: non_empty(&o.gce_service_account).map(str::to_string),
            ..Default::default()
        });
    }

    if let Some(store) = non_empty(&o.discovery_store) {
        spec.service_account_issuer_discovery = Some(ServiceAccountIssuerDiscoveryConfig {
            discovery_store: Some(format!("{}/{}", store.trim_end_matches('/'), name)),
            enable_aws_oidc_provider: (!gce).then_some(true),
            ..Default::default()
        });
        if let Some(iam) = spec.iam.as_mut().filter(|_| !gce) {
            iam.use_service_account_external_permissions = Some(true);
        }
    }
    cluster
}

/// The subnets of the zones (one per region on GCE, one per zone
/// elsewhere, more for more `--network-cidr`s) and the subnets of each
/// zone, main one first.
fn cluster_subnets(
    o: &NewClusterOptions,
    f: &Flags,
    existing: Option<&ExistingNetwork>,
    errors: &mut Vec<FieldError>,
) -> (Vec<ClusterSubnetSpec>, BTreeMap<String, Vec<String>>) {
    let gce = f.cloud == Cloud::Gce;
    let subnet_ids = clean_list(&o.subnet_ids);
    // AWS subnets are per zone, so kops asks AWS for each one's zone.
    let aws_subnet_ids = if gce { &[][..] } else { &subnet_ids[..] };
    let zone_subnet_id = zone_to_subnet_id(
        "--subnets",
        aws_subnet_ids,
        f.network_id.as_deref(),
        existing,
    )
    .unwrap_or_else(|e| {
        errors.push(e);
        BTreeMap::new()
    });
    let egress = non_empty(&o.egress).map(str::to_string);
    let mut subnets: Vec<ClusterSubnetSpec> = Vec::new();
    let mut zone_subnets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // GCE subnets are regional: one per region, named after it.
    for zone in f.all_zones.iter().filter(|_| gce) {
        let region = gce_region(zone).unwrap_or_default();
        if !subnets.iter().any(|s| s.name == region) {
            subnets.push(ClusterSubnetSpec {
                name: region.clone(),
                region: Some(region.clone()),
                id: subnet_ids.first().cloned(),
                ..Default::default()
            });
        }
        zone_subnets.insert(zone.clone(), vec![region]);
    }
    for zone in f.all_zones.iter().filter(|_| !gce) {
        subnets.push(ClusterSubnetSpec {
            name: zone.clone(),
            zone: Some(zone.clone()),
            egress: egress.clone(),
            id: zone_subnet_id.get(zone).cloned(),
            ..Default::default()
        });
        zone_subnets
            .entry(zone.clone())
            .or_default()
            .push(zone.clone());
    }
    for (i, cidr) in clean_list(&o.network_cidrs).iter().enumerate().skip(1) {
        let zone = &f.zones[(i - 1) % f.zones.len()];
        let subnet_name = format!("{zone}-{i}");
        subnets.push(ClusterSubnetSpec {
            name: subnet_name.clone(),
            zone: Some(zone.clone()),
            cidr: Some(cidr.clone()),
            egress: egress.clone(),
            id: zone_subnet_id.get(zone).cloned(),
            ..Default::default()
        });
        zone_subnets
            .entry(zone.clone())
            .or_default()
            .push(subnet_name);
    }
    (subnets, zone_subnets)
}

/// Topology and DNS: the subnets' types, the private topology's utility
/// (and dual-stack) subnets and its bastion group (returned), IPv6.
fn topology(
    o: &NewClusterOptions,
    f: &Flags,
    existing: Option<&ExistingNetwork>,
    cluster: &mut Cluster,
    subnets: &mut Vec<ClusterSubnetSpec>,
    errors: &mut Vec<FieldError>,
) -> Vec<InstanceGroup> {
    let name = f.name.as_str();
    let gce = f.cloud == Cloud::Gce;
    let mut bastions = Vec::new();
    let mut topology = TopologySpec {
        dns: Some(DnsSpec {
            kind: Some(f.dns.to_string()),
            ..Default::default()
        }),
        ..Default::default()
    };
    match f.topology {
        Topology::Public => {
            for s in subnets.iter_mut() {
                s.kind = Some(SubnetType::Public.as_str().into());
            }
        }
        Topology::Private => {
            for s in subnets.iter_mut() {
                s.kind = Some(SubnetType::Private.as_str().into());
            }
            let utility_ids = clean_list(&o.utility_subnet_ids);
            let zone_utility_id = zone_to_subnet_id(
                "--utility-subnets",
                &utility_ids,
                f.network_id.as_deref(),
                existing,
            )
            .unwrap_or_else(|e| {
                errors.push(e);
                BTreeMap::new()
            });
            let derived = |subnets: &[ClusterSubnetSpec],
                           prefix: &str,
                           kind: SubnetType|
             -> Vec<ClusterSubnetSpec> {
                subnets
                    .iter()
                    .filter(|s| s.subnet_type() == Some(SubnetType::Private))
                    .map(|s| ClusterSubnetSpec {
                        name: format!("{prefix}{}", s.name),
                        zone: s.zone.clone(),
                        kind: Some(kind.as_str().into()),
                        region: s.region.clone(),
                        id: s
                            .zone
                            .as_ref()
                            .and_then(|z| zone_utility_id.get(z))
                            .cloned(),
                        ..Default::default()
                    })
                    .collect()
            };
            if o.ipv6 {
                let dual = derived(subnets, "dualstack-", SubnetType::DualStack);
                subnets.extend(dual);
            }
            // GCE needs no utility subnets.
            if !gce {
                let utility = derived(subnets, "utility-", SubnetType::Utility);
                subnets.extend(utility);
            }

            if o.bastion {
                let mut bastion = sized_group(name, "bastions".into(), Role::Bastion, 1);
                if f.dns != "None" {
                    topology.bastion = Some(BastionSpec {
                        bastion_public_name: Some(format!("bastion.{name}")),
                        ..Default::default()
                    });
                }
                if o.ipv6 {
                    let dual: Vec<String> = subnets
                        .iter()
                        .filter(|s| s.subnet_type() == Some(SubnetType::DualStack))
                        .map(|s| s.name.clone())
                        .collect();
                    if !dual.is_empty() {
                        bastion.spec.subnets = Some(dual);
                    }
                }
                if gce {
                    bastion.spec.zones = Some(f.all_zones.clone());
                }
                bastion.spec.image = non_empty(&o.bastion_image).map(str::to_string);
                bastions.push(bastion);
            }
        }
    }
    if o.ipv6 {
        cluster.spec.non_masquerade_cidr = Some("::/0".into());
        cluster.spec.cloud_controller_manager = Some(CloudControllerManagerConfig::default());
        for (i, s) in subnets.iter_mut().enumerate() {
            s.ipv6_cidr = Some(format!("/64#{i:x}"));
        }
    }
    cluster.spec.topology = Some(topology);
    bastions
}

/// One control-plane group per control-plane node, spread over the
/// control-plane zones (the zones when none are given).
fn control_plane_groups(
    o: &NewClusterOptions,
    f: &Flags,
    zone_subnets: &BTreeMap<String, Vec<String>>,
) -> Vec<InstanceGroup> {
    let name = f.name.as_str();
    let gce = f.cloud == Cloud::Gce;
    let cp_zones = if f.control_plane_zones.is_empty() {
        &f.zones
    } else {
        &f.control_plane_zones
    };
    let control_plane_sizes = clean_list(&o.control_plane_size);
    let mut control_planes = Vec::new();
    for i in 0..f.control_plane_count {
        let zone = &cp_zones[i % cp_zones.len()];
        let mut suffix = zone.clone();
        if f.control_plane_count > cp_zones.len() {
            suffix = format!("{zone}-{}", 1 + i / cp_zones.len());
        }
        let mut ig = sized_group(
            name,
            format!("control-plane-{suffix}"),
            Role::ControlPlane,
            1,
        );
        let main = zone_subnets
            .get(zone)
            .and_then(|s| s.first())
            .cloned()
            .unwrap_or_else(|| zone.clone());
        let subnet = if o.ipv6 && f.topology == Topology::Private {
            format!("dualstack-{main}")
        } else {
            main
        };
        ig.spec.subnets = Some(vec![subnet]);
        if gce {
            ig.spec.zones = Some(vec![zone.clone()]);
        }
        apply_sizes(&mut ig, &control_plane_sizes, f.cloud == Cloud::Aws);
        ig.spec.image = non_empty(&o.control_plane_image).map(str::to_string);
        control_planes.push(ig);
    }
    control_planes
}

/// The etcd clusters (`main`, `events`, and `cilium` for cilium-etcd), a
/// member on each control-plane group.
fn etcd_clusters(
    o: &NewClusterOptions,
    f: &Flags,
    control_planes: &[InstanceGroup],
    cluster: &mut Cluster,
) {
    let mut etcd_names = clean_list(&o.etcd_clusters);
    if etcd_names.is_empty() {
        etcd_names = vec!["main".into(), "events".into()];
    }
    if f.networking == "cilium-etcd" {
        etcd_names.push("cilium".into());
    }
    let encrypt = o.encrypt_etcd_storage.unwrap_or(f.cloud == Cloud::Aws);
    let group_names: Vec<String> = control_planes
        .iter()
        .map(|g| g.name().to_string())
        .collect();
    let member_names = etcd_member_names(&group_names);
    let storage_type = non_empty(&o.etcd_storage_type).map(str::to_string);
    cluster.spec.etcd_clusters = Some(
        etcd_names
            .iter()
            .map(|etcd| EtcdClusterSpec {
                name: etcd.clone(),
                cpu_request: Some(if etcd == "main" { "200m" } else { "100m" }.into()),
                memory_request: Some("100Mi".into()),
                manager: Some(EtcdManagerSpec {
                    backup_retention_days: Some(90),
                    ..Default::default()
                }),
                etcd_members: group_names
                    .iter()
                    .zip(&member_names)
                    .map(|(group, member)| EtcdMemberSpec {
                        name: member.clone(),
                        instance_group: Some(group.clone()),
                        encrypted_volume: encrypt.then_some(true),
                        volume_type: storage_type.clone(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
    );
}

/// The worker groups: one per zone sharing `--node-count`, or one
/// Karpenter group.
fn node_groups(
    o: &NewClusterOptions,
    f: &Flags,
    cluster: &mut Cluster,
    zone_subnets: &BTreeMap<String, Vec<String>>,
) -> Vec<InstanceGroup> {
    let name = f.name.as_str();
    let gce = f.cloud == Cloud::Gce;
    let node_sizes = clean_list(&o.node_size);
    let mut nodes = Vec::new();
    if f.karpenter {
        cluster.spec.karpenter = Some(KarpenterSpec {
            enabled: Some(true),
            ..Default::default()
        });
        let mut ig = InstanceGroup::new(name, "nodes", Role::Node);
        ig.spec.manager = Some("Karpenter".into());
        if let Some(n) = o.node_count.filter(|n| *n > 0) {
            ig.spec.min_size = Some(i64::from(n));
        }
        apply_sizes(&mut ig, &node_sizes, true);
        nodes.push(ig);
    } else {
        let total = o
            .node_count
            .filter(|n| *n > 0)
            .map(|n| n as usize)
            .unwrap_or(f.zones.len());
        for (zone, count) in f.zones.iter().zip(spread(total, f.zones.len())) {
            let mut ig = sized_group(name, format!("nodes-{zone}"), Role::Node, count as i64);
            let zs = zone_subnets.get(zone).cloned().unwrap_or_default();
            // Additional subnets take the workers; the zone's main subnet may be small.
            ig.spec.subnets = Some(if zs.len() > 1 { zs[1..].to_vec() } else { zs });
            if gce {
                ig.spec.zones = Some(vec![zone.clone()]);
            }
            apply_sizes(&mut ig, &node_sizes, f.cloud == Cloud::Aws);
            ig.spec.image = non_empty(&o.node_image).map(str::to_string);
            nodes.push(ig);
        }
    }
    nodes
}

/// The API server groups `--apiserver-count` asks for, spread over the
/// zones.
fn api_server_groups(
    o: &NewClusterOptions,
    f: &Flags,
    zone_subnets: &BTreeMap<String, Vec<String>>,
) -> Vec<InstanceGroup> {
    let name = f.name.as_str();
    let gce = f.cloud == Cloud::Gce;
    let mut apiservers = Vec::new();
    if let Some(total) = o.apiserver_count.filter(|n| *n > 0) {
        let sizes = clean_list(&o.apiserver_size);
        for (zone, count) in f.zones.iter().zip(spread(total as usize, f.zones.len())) {
            let mut ig = sized_group(
                name,
                format!("apiserver-{zone}"),
                Role::ApiServer,
                count as i64,
            );
            ig.spec.subnets = Some(zone_subnets.get(zone).cloned().unwrap_or_default());
            if gce {
                ig.spec.zones = Some(vec![zone.clone()]);
            }
            if let Some(size) = sizes.first() {
                ig.spec.machine_type = Some(size.clone());
            }
            apiservers.push(ig);
        }
    }
    apiservers
}

/// How the API is reached: a load balancer, or DNS records of the control
/// plane.
fn api_access(o: &NewClusterOptions, f: &Flags, cluster: &mut Cluster) {
    let gce = f.cloud == Cloud::Gce;
    let mut api = ApiSpec::default();
    let ssl_certificate = non_empty(&o.api_ssl_certificate).map(str::to_string);
    // vSphere has no cloud load balancer: the API is the control plane's
    // virtual IP (kube-vip) or, without one, its VMs' addresses.
    let wants_lb = f.cloud != Cloud::Vsphere
        && (f.api_lb_type.is_some()
            || ssl_certificate.is_some()
            || f.topology == Topology::Private
            || f.dns == "None");
    if wants_lb {
        api.load_balancer = Some(LoadBalancerAccessSpec {
            kind: Some(f.api_lb_type.unwrap_or("Public").into()),
            ssl_certificate,
            // The class is an AWS setting.
            class: (!gce).then(|| "Network".into()),
            ..Default::default()
        });
    } else {
        api.dns = Some(Extra::new());
    }
    cluster.spec.api = Some(api);
}

/// Per group: image, machine type, subnets, the instance-group node label.
fn complete_groups(
    o: &NewClusterOptions,
    f: &Flags,
    subnets: &[ClusterSubnetSpec],
    groups: &mut [InstanceGroup],
    errors: &mut Vec<FieldError>,
) -> Result<(), Vec<FieldError>> {
    let ipv6_only = o.ipv6;
    let image = non_empty(&o.image).map(str::to_string);
    for ig in groups.iter_mut() {
        if ig.spec.image.is_none() {
            ig.spec.image = match &image {
                Some(i) => Some(i.clone()),
                None => {
                    let arch = ig
                        .spec
                        .machine_type
                        .as_deref()
                        .map(machine_architecture)
                        .unwrap_or(Architecture::Amd64);
                    Some(
                        default_image(f.cloud.as_str(), &f.parsed_version, arch)
                            .map(str::to_string)
                            .ok_or_else(|| {
                                if f.cloud == Cloud::Vsphere {
                                    vec![FieldError::new(
                                        "--image",
                                        "is required for vSphere: the template VM the groups' VMs are cloned from",
                                    )
                                    .hint("name a template VM of the datacenter with --image (an Ubuntu cloud image with cloud-init's VMware data source)")]
                                } else {
                                    vec![FieldError::new(
                                        "--image",
                                        "kops has no default image for this Kubernetes version",
                                    )
                                    .value(&f.kubernetes_version)
                                    .hint("pass an image with --image")]
                                }
                            })?,
                    )
                }
            };
        }
        let role = ig.role().unwrap_or(Role::Node);
        if ig.spec.machine_type.is_none() && ig.spec.manager.as_deref() != Some("Karpenter") {
            ig.spec.machine_type = match f.cloud {
                Cloud::Aws => Some(default_machine_type(
                    &f.region,
                    role,
                    ig.spec.image.as_deref(),
                )),
                Cloud::Gce => gce::default_machine_type(role),
                Cloud::Vsphere => Some(VSPHERE_DEFAULT_MACHINE_TYPE),
            }
            .map(str::to_string);
        }
        let has_subnets = ig.spec.subnets.as_ref().is_some_and(|s| !s.is_empty());
        if role != Role::ControlPlane && !(role == Role::ApiServer && ipv6_only) && !has_subnets {
            let pick = |skip: &[SubnetType]| -> Vec<String> {
                subnets
                    .iter()
                    .filter(|s| !s.subnet_type().is_some_and(|t| skip.contains(&t)))
                    .map(|s| s.name.clone())
                    .collect()
            };
            let mut chosen = pick(&[SubnetType::DualStack, SubnetType::Utility]);
            if chosen.is_empty() {
                chosen = pick(&[SubnetType::Utility]);
            }
            ig.spec.subnets = Some(chosen);
        }
        if ig.spec.subnets.as_ref().is_none_or(|s| s.is_empty()) {
            errors.push(
                FieldError::new(
                    "--zones",
                    format!("no subnet fits instance group `{}`", ig.name()),
                )
                .hint("check the zones and the topology"),
            );
        }
        let label = ig.name().to_string();
        ig.spec
            .node_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(LABEL_INSTANCE_GROUP.to_string(), label);
    }
    Ok(())
}

/// What `create cluster` adds after building the spec: cloud labels,
/// tenancy, security groups and volumes of the groups, the DNS zone, the
/// network CIDRs, subnet tags, the API's public name.
fn apply_create_flags(
    o: &NewClusterOptions,
    f: &Flags,
    cluster: &mut Cluster,
    groups: &mut [InstanceGroup],
) {
    if !f.cloud_labels.is_empty() {
        cluster.spec.cloud_labels = Some(f.cloud_labels.clone());
    }
    let cp_tenancy = non_empty(&o.control_plane_tenancy).map(str::to_string);
    let node_tenancy = non_empty(&o.node_tenancy).map(str::to_string);
    let node_sgs = clean_list(&o.node_security_groups);
    let cp_sgs = clean_list(&o.control_plane_security_groups);
    let cp_volume_type = non_empty(&o.control_plane_volume_type).map(str::to_string);
    let node_volume_type = non_empty(&o.node_volume_type).map(str::to_string);
    for ig in groups.iter_mut() {
        if let Some(a) = o.associate_public_ip {
            ig.spec.associate_public_ip = Some(a);
        }
        let (tenancy, sgs, volume_size, volume_type) = match ig.role() {
            Some(Role::ControlPlane) => (
                &cp_tenancy,
                &cp_sgs,
                o.control_plane_volume_size,
                &cp_volume_type,
            ),
            Some(Role::Node) => (
                &node_tenancy,
                &node_sgs,
                o.node_volume_size,
                &node_volume_type,
            ),
            _ => continue,
        };
        if let Some(t) = tenancy {
            ig.spec.extra.insert("tenancy".into(), t.clone().into());
        }
        if !sgs.is_empty() {
            ig.spec.additional_security_groups = Some(sgs.clone());
        }
        if let Some(size) = volume_size.filter(|s| *s != 0) {
            ig.spec.root_volume_size = Some(size);
        }
        if let Some(t) = volume_type {
            ig.spec.root_volume_type = Some(t.clone());
        }
    }
    let spec = &mut cluster.spec;
    if let Some(zone) = non_empty(&o.dns_zone) {
        spec.dns_zone = Some(zone.to_string());
    }
    for (i, cidr) in clean_list(&o.network_cidrs).into_iter().enumerate() {
        if i == 0 {
            spec.network_cidr = Some(cidr);
        } else {
            spec.additional_network_cidrs
                .get_or_insert_with(Vec::new)
                .push(cidr);
        }
    }
    if o.disable_subnet_tags {
        spec.extra.insert("DisableSubnetTags".into(), true.into());
    }
    if let Some(public_name) = non_empty(&o.api_public_name) {
        spec.master_public_name = Some(public_name.to_string());
    }
}

/// `--unset` and `--set`, on the cluster and on every group.
fn apply_sets(
    o: &NewClusterOptions,
    cluster: &mut Cluster,
    groups: &mut [InstanceGroup],
) -> Result<(), Vec<FieldError>> {
    let is_group_path = |p: &str| p.trim_start().starts_with("instancegroup.");
    let (group_unsets, cluster_unsets): (Vec<String>, Vec<String>) =
        o.unsets.iter().cloned().partition(|u| is_group_path(u));
    let (group_sets, cluster_sets): (Vec<String>, Vec<String>) =
        o.sets.iter().cloned().partition(|s| is_group_path(s));
    set::unset_cluster_fields(cluster, &cluster_unsets)?;
    set::set_cluster_fields(cluster, &cluster_sets)?;
    for ig in groups.iter_mut() {
        set::unset_instance_group_fields(ig, &group_unsets)?;
        set::set_instance_group_fields(ig, &group_sets)?;
    }
    Ok(())
}

/// Calico's eBPF data plane replaces kube-proxy.
fn calico_bpf_replaces_kube_proxy(cluster: &mut Cluster) {
    let calico_bpf = cluster
        .spec
        .networking
        .as_ref()
        .and_then(|n| n.calico.as_ref())
        .is_some_and(|c| c.bpf_enabled == Some(true));
    if calico_bpf {
        let proxy = cluster
            .spec
            .kube_proxy
            .get_or_insert_with(KubeProxyConfig::default);
        proxy.enabled.get_or_insert(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vsphere_servers_are_named_by_host() {
        let s = super::VsphereServer::parse("http://127.0.0.1:8989/sdk");
        assert_eq!(
            (s.host.as_str(), s.port.as_str(), s.insecure),
            ("127.0.0.1", "8989", true)
        );
        let s = super::VsphereServer::parse("vc.example.com");
        assert_eq!(
            (s.host.as_str(), s.port.as_str(), s.insecure),
            ("vc.example.com", "443", false)
        );
    }

    fn opts(zones: &[&str]) -> NewClusterOptions {
        NewClusterOptions {
            cluster_name: "test.example.com".into(),
            cloud: Some("aws".into()),
            zones: zones.iter().map(|z| z.to_string()).collect(),
            state_store: Some("s3://bucket".into()),
            ..Default::default()
        }
    }

    fn errors_of(o: &NewClusterOptions) -> Vec<FieldError> {
        new_cluster(o).expect_err("flags should be rejected")
    }

    fn vsphere_opts() -> NewClusterOptions {
        NewClusterOptions {
            cloud: Some("vsphere".into()),
            state_store: Some("file:///tmp/store".into()),
            image: Some("ubuntu-template".into()),
            vsphere: VsphereOptions {
                server: Some("vc.example.com".into()),
                datacenter: Some("DC 1".into()),
                resource_pool: Some("Cluster1".into()),
                datastore: Some("ds1".into()),
                core_dns_server: Some("http://10.0.0.2:2379".into()),
                control_plane_vip: Some("10.0.0.100".into()),
                ..Default::default()
            },
            ..opts(&[])
        }
    }

    #[test]
    fn vsphere_without_dns_needs_the_control_plane_vip() {
        let mut o = vsphere_opts();
        o.vsphere.control_plane_vip = None;
        let errors = errors_of(&o);
        assert!(
            errors
                .iter()
                .any(|e| e.to_string().contains("--vsphere-control-plane-vip")),
            "{errors:?}"
        );
    }

    #[test]
    fn vsphere_cluster_from_kops_1_17_flags() {
        let built = new_cluster(&vsphere_opts()).unwrap();
        let spec = &built.cluster.spec;
        assert_eq!(spec.cloud_provider.as_deref(), Some("vsphere"));
        let config = spec.cloud_config.clone().unwrap();
        assert_eq!(config.vsphere_server.as_deref(), Some("vc.example.com"));
        assert_eq!(config.vsphere_datacenter.as_deref(), Some("DC 1"));
        assert_eq!(
            config.vsphere_core_dns_server.as_deref(),
            Some("http://10.0.0.2:2379")
        );
        assert_eq!(config.vsphere_username, None);
        // No zone given: one named after the datacenter; no load balancer.
        assert_eq!(subnet_cidrs(&built.cluster), [("dc-1".to_string(), None)]);
        assert!(spec.api.as_ref().unwrap().load_balancer.is_none());
        for group in &built.instance_groups {
            assert_eq!(group.spec.image.as_deref(), Some("ubuntu-template"));
            assert_eq!(
                group.spec.machine_type.as_deref(),
                Some(VSPHERE_DEFAULT_MACHINE_TYPE)
            );
            assert!(group.spec.mixed_instances_policy.is_none());
        }
    }

    #[test]
    fn vsphere_control_plane_addresses_go_to_the_groups_in_order() {
        let mut o = vsphere_opts();
        o.control_plane_count = Some(3);
        o.vsphere.control_plane_addresses = vec![
            "10.0.0.11/24".into(),
            "10.0.0.12/24".into(),
            "10.0.0.13/24".into(),
        ];
        o.vsphere.gateway = Some("10.0.0.1".into());
        o.vsphere.nameservers = vec!["10.0.0.2".into(), "10.0.0.3".into()];
        let built = new_cluster(&o).unwrap();
        let config = built.cluster.spec.cloud_config.clone().unwrap();
        let addresses = config.vsphere_control_plane_addresses.clone().unwrap();
        let groups: Vec<&str> = built
            .instance_groups
            .iter()
            .filter(|g| g.is_control_plane())
            .map(|g| g.name())
            .collect();
        assert_eq!(groups.len(), 3);
        for (group, address) in groups
            .iter()
            .zip(["10.0.0.11/24", "10.0.0.12/24", "10.0.0.13/24"])
        {
            assert_eq!(addresses[*group], address);
        }
        assert_eq!(config.vsphere_gateway.as_deref(), Some("10.0.0.1"));
        assert_eq!(config.vsphere_nameservers.unwrap().len(), 2);
        crate::validation::validate_all(&built.cluster, &built.instance_groups).unwrap();

        // Three members without addresses: one line naming the field.
        o.vsphere.control_plane_addresses.clear();
        o.vsphere.gateway = None;
        o.vsphere.nameservers.clear();
        let built = new_cluster(&o).unwrap();
        let e = crate::validation::validate_all(&built.cluster, &built.instance_groups)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("vSphereControlPlaneAddresses: has no address for")
                && e.contains("--vsphere-control-plane-addresses"),
            "{e}"
        );
        // A count that is not the groups'.
        o.vsphere.control_plane_addresses = vec!["10.0.0.11/24".into()];
        let errors = errors_of(&o);
        assert!(
            errors[0]
                .to_string()
                .contains("gives 1 addresses for 3 control-plane groups"),
            "{errors:?}"
        );
    }

    #[test]
    fn vsphere_flags_are_checked() {
        let mut o = vsphere_opts();
        o.vsphere.datastore = None;
        o.image = None;
        o.node_size = vec!["t3.medium".into()];
        let errors = errors_of(&o);
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert!(paths.contains(&"--vsphere-datastore"), "{errors:?}");
        assert!(paths.contains(&"--node-size"), "{errors:?}");
        let mut o = vsphere_opts();
        o.image = None;
        let errors = errors_of(&o);
        assert!(
            errors
                .iter()
                .any(|e| e.path == "--image" && e.message.contains("template VM")),
            "{errors:?}"
        );
        let mut o = opts(&["us-east-1a"]);
        o.vsphere.server = Some("vc".into());
        let errors = errors_of(&o);
        assert!(
            errors.iter().any(|e| e.path == "--vsphere-server"),
            "{errors:?}"
        );
        assert_eq!(vsphere_machine_type("4cpu-16gb"), Some((4, 16 * 1024)));
        assert_eq!(vsphere_machine_type("0cpu-1gb"), None);
        assert_eq!(vsphere_machine_type("t3.medium"), None);
    }

    fn subnet_cidrs(c: &Cluster) -> Vec<(String, Option<String>)> {
        c.spec
            .subnets
            .iter()
            .flatten()
            .map(|s| (s.name.clone(), s.cidr.clone()))
            .collect()
    }

    #[test]
    fn split_ipv4_blocks() {
        let net: Ipv4Net = "172.20.0.0/16".parse().unwrap();
        let parts: Vec<String> = split_ipv4(net, 2)
            .unwrap()
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(
            parts,
            [
                "172.20.0.0/18",
                "172.20.64.0/18",
                "172.20.128.0/18",
                "172.20.192.0/18"
            ]
        );
        assert_eq!(split_ipv4(net, 0).unwrap()[0].to_string(), "172.20.0.0/16");
        let small: Ipv4Net = "10.0.0.0/31".parse().unwrap();
        assert!(split_ipv4(small, 2).is_none());
    }

    #[test]
    fn carves_public_subnets() {
        let c = new_cluster(&opts(&["us-east-1a", "us-east-1b", "us-east-1c"]))
            .unwrap()
            .cluster;
        assert_eq!(
            subnet_cidrs(&c),
            [
                ("us-east-1a".to_string(), Some("172.20.0.0/18".to_string())),
                ("us-east-1b".to_string(), Some("172.20.64.0/18".to_string())),
                (
                    "us-east-1c".to_string(),
                    Some("172.20.128.0/18".to_string())
                ),
            ]
        );
        let one = new_cluster(&opts(&["us-east-1a"])).unwrap().cluster;
        assert_eq!(subnet_cidrs(&one)[0].1.as_deref(), Some("172.20.0.0/16"));
    }

    #[test]
    fn carves_private_and_utility_subnets() {
        let mut o = opts(&["us-east-1a", "us-east-1b"]);
        o.topology = Some("private".into());
        let c = new_cluster(&o).unwrap().cluster;
        // 2 private + 1 utility block → 4 blocks; utility takes the lowest, split in 8.
        assert_eq!(
            subnet_cidrs(&c),
            [
                ("us-east-1a".to_string(), Some("172.20.64.0/18".to_string())),
                (
                    "us-east-1b".to_string(),
                    Some("172.20.128.0/18".to_string())
                ),
                (
                    "utility-us-east-1a".to_string(),
                    Some("172.20.0.0/21".to_string())
                ),
                (
                    "utility-us-east-1b".to_string(),
                    Some("172.20.8.0/21".to_string())
                ),
            ]
        );
    }

    #[test]
    fn additional_network_cidrs_make_worker_subnets() {
        let mut o = opts(&["us-east-1a", "us-east-1b"]);
        o.network_cidrs = vec![
            "10.0.0.0/16".into(),
            "10.1.0.0/16".into(),
            "10.2.0.0/16".into(),
            "10.3.0.0/16".into(),
        ];
        let made = new_cluster(&o).unwrap();
        let c = &made.cluster;
        assert_eq!(c.spec.network_cidr.as_deref(), Some("10.0.0.0/16"));
        assert_eq!(
            subnet_cidrs(c),
            [
                ("us-east-1a".to_string(), Some("10.0.0.0/17".to_string())),
                ("us-east-1b".to_string(), Some("10.0.128.0/17".to_string())),
                ("us-east-1a-1".to_string(), Some("10.1.0.0/16".to_string())),
                ("us-east-1b-2".to_string(), Some("10.2.0.0/16".to_string())),
                ("us-east-1a-3".to_string(), Some("10.3.0.0/16".to_string())),
            ]
        );
        let nodes = made
            .instance_groups
            .iter()
            .find(|g| g.name() == "nodes-us-east-1a")
            .unwrap();
        assert_eq!(
            nodes.spec.subnets.as_deref(),
            Some(&["us-east-1a-1".to_string(), "us-east-1a-3".to_string()][..])
        );
    }

    #[test]
    fn ipv6_subnets_are_dual_stack() {
        let mut o = opts(&["us-east-1a"]);
        o.ipv6 = true;
        let made = new_cluster(&o).unwrap();
        let subnets = made.cluster.spec.subnets.clone().unwrap();
        let shown: Vec<(&str, Option<&str>, Option<&str>)> = subnets
            .iter()
            .map(|s| (s.name.as_str(), s.cidr.as_deref(), s.ipv6_cidr.as_deref()))
            .collect();
        assert_eq!(
            shown,
            [
                ("us-east-1a", None, Some("/64#0")),
                (
                    "dualstack-us-east-1a",
                    Some("172.20.64.0/18"),
                    Some("/64#1")
                ),
                ("utility-us-east-1a", Some("172.20.0.0/21"), Some("/64#2")),
            ]
        );
        assert_eq!(
            made.cluster.spec.non_masquerade_cidr.as_deref(),
            Some("::/0")
        );
        let cp = &made.instance_groups[0];
        assert_eq!(
            cp.spec.subnets.as_deref(),
            Some(&["dualstack-us-east-1a".to_string()][..])
        );
    }

    #[test]
    fn node_count_is_spread_over_zones() {
        assert_eq!(spread(10, 3), [4, 3, 3]);
        assert_eq!(spread(2, 3), [1, 1, 0]);
        let mut o = opts(&["us-east-1a", "us-east-1b", "us-east-1c"]);
        o.node_count = Some(10);
        let made = new_cluster(&o).unwrap();
        let sizes: Vec<(String, Option<i64>)> = made
            .instance_groups
            .iter()
            .filter(|g| g.role() == Some(Role::Node))
            .map(|g| (g.name().to_string(), g.spec.min_size))
            .collect();
        assert_eq!(
            sizes,
            [
                ("nodes-us-east-1a".to_string(), Some(4)),
                ("nodes-us-east-1b".to_string(), Some(3)),
                ("nodes-us-east-1c".to_string(), Some(3)),
            ]
        );
    }

    #[test]
    fn several_control_planes_per_zone() {
        let mut o = opts(&["us-east-1a", "us-east-1b"]);
        o.control_plane_count = Some(3);
        let made = new_cluster(&o).unwrap();
        let cps: Vec<&str> = made
            .instance_groups
            .iter()
            .filter(|g| g.is_control_plane())
            .map(|g| g.name())
            .collect();
        assert_eq!(
            cps,
            [
                "control-plane-us-east-1a-1",
                "control-plane-us-east-1a-2",
                "control-plane-us-east-1b-1"
            ]
        );
        let main = &made.cluster.spec.etcd_clusters.as_ref().unwrap()[0];
        let members: Vec<&str> = main.etcd_members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(members, ["a-1", "b-1", "a-2"]);
        assert_eq!(
            etcd_member_names(&[
                "control-plane-us-east-1a-1".into(),
                "control-plane-us-east-1a-2".into()
            ]),
            ["etcd-1", "etcd-2"]
        );
    }

    #[test]
    fn real_region_defaults() {
        let made = new_cluster(&opts(&["eu-west-1a"])).unwrap();
        let types: Vec<(&str, Option<&str>)> = made
            .instance_groups
            .iter()
            .map(|g| (g.name(), g.spec.machine_type.as_deref()))
            .collect();
        assert_eq!(
            types,
            [
                ("control-plane-eu-west-1a", Some("t3.medium")),
                ("nodes-eu-west-1a", Some("t3.medium"))
            ]
        );
        assert_eq!(
            made.cluster.spec.kubernetes_version.as_deref(),
            Some("v1.34.10")
        );
        assert_eq!(
            made.cluster.spec.config_base.as_deref(),
            Some("s3://bucket/test.example.com")
        );
        let networking = made.cluster.spec.networking.as_ref().unwrap();
        assert_eq!(
            networking.cilium.as_ref().unwrap().enable_node_port,
            Some(true)
        );
        assert_eq!(
            made.cluster.spec.kube_proxy.as_ref().unwrap().enabled,
            Some(false)
        );

        let mut arm = opts(&["eu-west-1a"]);
        arm.node_size = vec!["m7g.large".into()];
        let made = new_cluster(&arm).unwrap();
        let node = made
            .instance_groups
            .iter()
            .find(|g| g.role() == Some(Role::Node))
            .unwrap();
        assert!(node.spec.image.as_deref().unwrap().contains("arm64"));
        assert_eq!(machine_architecture("t3.medium"), Architecture::Amd64);
        assert_eq!(machine_architecture("g4dn.xlarge"), Architecture::Amd64);
        assert_eq!(machine_architecture("c6gn.large"), Architecture::Arm64);
    }

    #[test]
    fn public_dns_names_the_api_and_bastion() {
        let mut o = opts(&["us-east-1a"]);
        o.dns_type = Some("public".into());
        let c = new_cluster(&o).unwrap().cluster;
        assert_eq!(
            c.spec.master_public_name.as_deref(),
            Some("api.test.example.com")
        );
        let api = c.spec.api.unwrap();
        assert!(api.load_balancer.is_none());
        assert_eq!(api.dns, Some(Extra::new()));

        o.topology = Some("private".into());
        o.bastion = true;
        let made = new_cluster(&o).unwrap();
        let bastion = made
            .cluster
            .spec
            .topology
            .as_ref()
            .unwrap()
            .bastion
            .as_ref()
            .unwrap();
        assert_eq!(
            bastion.bastion_public_name.as_deref(),
            Some("bastion.test.example.com")
        );
        let b = made
            .instance_groups
            .iter()
            .find(|g| g.name() == "bastions")
            .unwrap();
        assert_eq!(b.spec.machine_type.as_deref(), Some("t3.micro"));
    }

    #[test]
    fn cloud_labels_with_quotes() {
        let labels = parse_cloud_labels(
            "Owner=John Doe,dn=\"cn=John Doe: dc=example dc=com\", foo/bar=fib+baz",
        )
        .unwrap();
        assert_eq!(labels.get("Owner").map(String::as_str), Some("John Doe"));
        assert_eq!(
            labels.get("dn").map(String::as_str),
            Some("cn=John Doe: dc=example dc=com")
        );
        assert_eq!(labels.get("foo/bar").map(String::as_str), Some("fib+baz"));
        assert!(parse_cloud_labels("a=b=c").is_err());
        assert!(parse_cloud_labels("novalue").is_err());
        assert!(parse_cloud_labels("a=x\"y").is_err());
        assert_eq!(
            parse_cloud_labels("a=\"x\"\"y\",")
                .unwrap()
                .get("a")
                .map(String::as_str),
            Some("x\"y")
        );
    }

    #[test]
    fn feature_gates() {
        assert_eq!(
            parse_feature_gate(" +Foo ").unwrap(),
            ("Foo".to_string(), true)
        );
        assert_eq!(
            parse_feature_gate("-Bar").unwrap(),
            ("Bar".to_string(), false)
        );
        assert!(parse_feature_gate("-").is_err());
        let mut o = opts(&["us-east-1a"]);
        o.kubernetes_feature_gates = vec!["+".into()];
        assert_eq!(errors_of(&o)[0].path, "--kubernetes-feature-gates");
    }

    #[test]
    fn bad_topology() {
        let mut o = opts(&["us-east-1a"]);
        o.topology = Some("hybrid".into());
        let e = errors_of(&o);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].path, "--topology");
        assert_eq!(e[0].value.as_deref(), Some("hybrid"));
        assert!(e[0].hint.as_deref().unwrap().contains("private"));
    }

    #[test]
    fn zones_missing() {
        let e = errors_of(&opts(&[]));
        assert!(
            e.iter()
                .any(|e| e.path == "--zones" && e.message.contains("at least one zone")),
            "{e:?}"
        );
    }

    #[test]
    fn zones_from_two_regions() {
        let e = errors_of(&opts(&["us-east-1a", "eu-west-1b"]));
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].path, "--zones");
        assert!(e[0].message.contains("more than one region"));
        assert!(e[0].message.contains("eu-west-1") && e[0].message.contains("us-east-1"));
        let e = errors_of(&opts(&["us-central1-a"]));
        assert!(
            e.iter()
                .any(|e| e.path == "--zones" && e.message.contains("not an AWS")),
            "{e:?}"
        );
    }

    #[test]
    fn zero_control_planes() {
        let mut o = opts(&["us-east-1a"]);
        o.control_plane_count = Some(0);
        let e = errors_of(&o);
        assert_eq!(e[0].path, "--control-plane-count");
        assert!(e[0].message.contains("at least 1"));
        let mut o = opts(&["us-east-1a", "us-east-1b", "us-east-1c"]);
        o.control_plane_zones = o.zones.clone();
        o.control_plane_count = Some(2);
        assert_eq!(errors_of(&o)[0].path, "--control-plane-count");
    }

    #[test]
    fn bad_networking_lists_the_choices() {
        let mut o = opts(&["us-east-1a"]);
        o.networking = Some("weave".into());
        let e = errors_of(&o);
        assert_eq!(e[0].path, "--networking");
        let hint = e[0].hint.as_deref().unwrap();
        for v in ["calico", "cilium", "cni", "kubenet", "amazonvpc"] {
            assert!(hint.contains(v), "{hint}");
        }
    }

    #[test]
    fn bad_set_path() {
        let mut o = opts(&["us-east-1a"]);
        o.sets = vec!["cluster.spec.kubeProxy.enabled=maybe".into()];
        let e = errors_of(&o);
        assert_eq!(e[0].path, "--set");
        assert!(e[0].message.contains("spec.kubeProxy.enabled"), "{e:?}");
        o.sets = vec!["cluster.spec.kubernetesVersion.major=1".into()];
        assert_eq!(errors_of(&o)[0].path, "--set");
        o.sets = vec!["cluster.spec.addons[3].manifest=x".into()];
        assert_eq!(errors_of(&o)[0].path, "--set");
    }

    #[test]
    fn other_flag_errors() {
        let mut o = opts(&["us-east-1a"]);
        o.bastion = true;
        assert_eq!(errors_of(&o)[0].path, "--bastion");
        let mut o = opts(&["us-east-1a"]);
        o.instance_manager = Some("karpenter".into());
        assert_eq!(errors_of(&o)[0].path, "--instance-manager");
        let mut o = opts(&["us-east-1a"]);
        o.cloud = Some("azure".into());
        assert_eq!(errors_of(&o)[0].path, "--cloud");
        let mut o = opts(&["us-east-1a"]);
        o.kubernetes_version = Some("v1.20.0".into());
        assert_eq!(errors_of(&o)[0].path, "--kubernetes-version");
        let mut o = opts(&["us-east-1a"]);
        o.network_id = Some("vpc-1".into());
        assert_eq!(errors_of(&o)[0].path, "--network-cidr");
        o.network_cidrs = vec!["10.0.0.0/16".into()];
        assert!(new_cluster(&o).is_ok());
    }

    fn gce_opts(zones: &[&str]) -> NewClusterOptions {
        NewClusterOptions {
            cloud: Some("gce".into()),
            project: Some("my-project".into()),
            ..opts(zones)
        }
    }

    fn paths(errors: &[FieldError]) -> Vec<&str> {
        errors.iter().map(|e| e.path.as_str()).collect()
    }

    #[test]
    fn gce_flag_errors() {
        let mut o = gce_opts(&["us-central1-a"]);
        o.project = None;
        let e = errors_of(&o);
        assert_eq!(paths(&e), ["--project"]);
        assert!(e[0]
            .hint
            .as_deref()
            .unwrap()
            .contains("gcloud config set project"));
        o.project = Some(" ".into());
        assert!(errors_of(&o)[0].message.contains("empty"));

        // A zone of another region, and an AWS zone.
        let e = errors_of(&gce_opts(&["us-central1-a", "europe-west4-b"]));
        assert_eq!(paths(&e), ["--zones"]);
        assert!(e[0].message.contains("more than one region"), "{e:?}");
        let e = errors_of(&gce_opts(&["us-east-1a"]));
        assert!(e[0].message.contains("not a Compute Engine zone"), "{e:?}");

        // Machine types GCE does not have; AWS-only flags.
        let mut o = gce_opts(&["us-central1-a"]);
        o.node_size = vec!["t3.medium".into()];
        o.network_cidrs = vec!["10.0.0.0/16".into()];
        o.egress = Some("nat-1".into());
        assert_eq!(
            paths(&errors_of(&o)),
            ["--network-cidr", "--egress", "--node-size"]
        );

        // GCE flags on an AWS cluster.
        let mut o = opts(&["us-east-1a"]);
        o.project = Some("p".into());
        o.gce_service_account = Some("sa@p.iam.gserviceaccount.com".into());
        assert_eq!(
            paths(&errors_of(&o)),
            ["--project", "--gce-service-account"]
        );

        // Gossip names need DNS type None.
        let mut o = gce_opts(&["us-central1-a"]);
        o.cluster_name = "c.k8s.local".into();
        o.dns_type = Some("private".into());
        assert_eq!(paths(&errors_of(&o)), ["--dns"]);
        o.dns_type = None;
        assert!(new_cluster(&o).is_ok());
    }

    #[test]
    fn gce_cluster() {
        let mut o = gce_opts(&["us-central1-a", "us-central1-b"]);
        o.networking = Some("gce".into());
        o.node_size = vec!["n2-standard-2".into(), "n2-standard-4".into()];
        o.state_store = None;
        let made = new_cluster(&o).unwrap();
        let spec = &made.cluster.spec;
        assert_eq!(spec.project.as_deref(), Some("my-project"));
        assert_eq!(spec.pod_cidr.as_deref(), Some("10.4.0.0/14"));
        assert_eq!(
            spec.service_cluster_ip_range.as_deref(),
            Some("10.1.0.0/16")
        );
        assert_eq!(spec.non_masquerade_cidr.as_deref(), Some("10.0.0.0/8"));
        let subnets = spec.subnets.as_ref().unwrap();
        assert_eq!(subnets.len(), 1);
        assert_eq!(subnets[0].cidr.as_deref(), Some("10.0.32.0/19"));
        assert_eq!(subnets[0].region.as_deref(), Some("us-central1"));
        assert_eq!(subnets[0].zone, None);
        let node = made
            .instance_groups
            .iter()
            .find(|g| g.name() == "nodes-us-central1-b")
            .unwrap();
        assert_eq!(node.spec.machine_type.as_deref(), Some("n2-standard-2"));
        assert_eq!(node.spec.mixed_instances_policy, None);
        assert_eq!(
            node.spec.zones.as_deref(),
            Some(&["us-central1-b".to_string()][..])
        );
        crate::validation::validate_all(&made.cluster, &made.instance_groups).unwrap();

        // A shared network's ranges must be known to pick the subnet's.
        let mut o = gce_opts(&["us-central1-a"]);
        o.network_id = Some("shared-net".into());
        assert_eq!(paths(&errors_of(&o)), ["--vpc"]);
        o.subnet_ids = vec!["shared-subnet".into()];
        let made = new_cluster(&o).unwrap();
        let s = &made.cluster.spec.subnets.as_ref().unwrap()[0];
        assert_eq!(
            (s.id.as_deref(), s.cidr.as_deref()),
            (Some("shared-subnet"), None)
        );
    }

    #[test]
    fn shared_subnets_from_existing_network() {
        let mut o = opts(&["us-east-1a"]);
        o.subnet_ids = vec!["subnet-1".into()];
        assert_eq!(errors_of(&o)[0].path, "--subnets");
        o.existing_network = Some(ExistingNetwork {
            network_id: "vpc-9".into(),
            cidr: Some("10.0.0.0/12".into()),
            subnets: vec![ExistingSubnet {
                id: "subnet-1".into(),
                zone: "us-east-1a".into(),
                cidr: Some("10.10.0.0/24".into()),
            }],
        });
        let c = new_cluster(&o).unwrap().cluster;
        assert_eq!(c.spec.network_id.as_deref(), Some("vpc-9"));
        assert_eq!(c.spec.network_cidr.as_deref(), Some("10.0.0.0/12"));
        let s = &c.spec.subnets.as_ref().unwrap()[0];
        assert_eq!(
            (s.id.as_deref(), s.cidr.as_deref()),
            (Some("subnet-1"), Some("10.10.0.0/24"))
        );
    }
}
