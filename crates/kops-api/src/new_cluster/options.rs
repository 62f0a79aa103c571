//! `create cluster`'s inputs: its options (the flags), what kops finds of
//! an existing network, the defaults kops takes from its channel, and what
//! a vSphere server and machine size look like.

use crate::cluster::Cluster;
use crate::components::CloudConfiguration;
use crate::field_error::FieldError;
use crate::instance_group::InstanceGroup;

use super::parse::clean_list;

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
    pub(super) fn given(&self) -> Vec<&'static str> {
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
pub(super) fn assign_vsphere_addresses(
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
    pub(super) fn subnet(&self, id: &str) -> Option<&ExistingSubnet> {
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
