//! `kops create cluster`: a cluster spec from flags, stored (and applied with --yes).

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use kops_api::manifest::to_json_value;
use kops_api::new_cluster::NewClusterOptions;
use kops_api::{InstanceGroup, Role};
use kops_ops::OpsError;

use crate::args::{bool_flag, GlobalArgs, ManifestOutput};
use crate::commands::update_cluster::{self, UpdateClusterArgs};
use crate::context::{read_input, state};
use crate::kubeconfig::KubeconfigUserFlags;
use crate::output::{print_objects, status};

#[derive(Debug, Args, Default)]
pub struct CreateClusterArgs {
    /// Name of the cluster (or --name / KOPS_CLUSTER_NAME).
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,

    /// Zones in which to run the cluster.
    #[arg(long, value_delimiter = ',', value_name = "ZONES")]
    pub zones: Vec<String>,
    /// Zones in which to run the control plane.
    #[arg(
        long,
        alias = "master-zones",
        value_delimiter = ',',
        value_name = "ZONES"
    )]
    pub control_plane_zones: Vec<String>,
    /// Number of control-plane nodes (defaults to one per control-plane zone).
    #[arg(long, alias = "master-count", value_name = "N")]
    pub control_plane_count: Option<u32>,
    /// Machine type(s) for the control plane.
    #[arg(
        long,
        alias = "master-size",
        value_delimiter = ',',
        value_name = "TYPE"
    )]
    pub control_plane_size: Vec<String>,
    /// Root volume size of control-plane nodes in GiB.
    #[arg(long, alias = "master-volume-size", value_name = "GIB")]
    pub control_plane_volume_size: Option<i64>,
    /// Root volume type of control-plane nodes.
    #[arg(long, alias = "master-volume-type", value_name = "TYPE")]
    pub control_plane_volume_type: Option<String>,
    /// Image for control-plane nodes (overrides --image).
    #[arg(long, alias = "master-image", value_name = "IMAGE")]
    pub control_plane_image: Option<String>,
    /// Extra security groups for control-plane nodes.
    #[arg(
        long,
        alias = "master-security-groups",
        value_delimiter = ',',
        value_name = "IDS"
    )]
    pub control_plane_security_groups: Vec<String>,
    /// Number of worker nodes (defaults to one per zone).
    #[arg(long, value_name = "N")]
    pub node_count: Option<u32>,
    /// Machine type(s) for worker nodes.
    #[arg(long, value_delimiter = ',', value_name = "TYPE")]
    pub node_size: Vec<String>,
    /// Root volume size of worker nodes in GiB.
    #[arg(long, value_name = "GIB")]
    pub node_volume_size: Option<i64>,
    /// Image for worker nodes (overrides --image).
    #[arg(long, value_name = "IMAGE")]
    pub node_image: Option<String>,
    /// Extra security groups for worker nodes.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub node_security_groups: Vec<String>,
    /// Image for bastions (overrides --image).
    #[arg(long, value_name = "IMAGE")]
    pub bastion_image: Option<String>,
    /// Number of API-server-only nodes.
    #[arg(long, value_name = "N")]
    pub apiserver_count: Option<u32>,
    /// Machine type(s) for API-server nodes.
    #[arg(long, value_delimiter = ',', value_name = "TYPE")]
    pub apiserver_size: Vec<String>,
    /// Machine image for all instances.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Networking (CNI): cilium, calico, cni, kubenet, flannel, amazonvpc, kindnet, ...
    #[arg(long, value_name = "CNI")]
    pub networking: Option<String>,
    /// Network topology: public or private.
    #[arg(long, short = 't', value_name = "TOPOLOGY")]
    pub topology: Option<String>,
    /// Create a bastion instance group (private topology).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub bastion: Option<bool>,
    /// DNS type: public, private or none.
    #[arg(long = "dns", value_name = "TYPE")]
    pub dns_type: Option<String>,
    /// DNS hosted zone (name or id).
    #[arg(long, value_name = "ZONE")]
    pub dns_zone: Option<String>,
    /// Network CIDR(s) of the VPC; extra ones become additional CIDRs.
    #[arg(long, value_delimiter = ',', value_name = "CIDR")]
    pub network_cidr: Vec<String>,
    /// An existing VPC to use.
    #[arg(long = "network-id", visible_alias = "vpc", value_name = "VPC-ID")]
    pub vpc: Option<String>,
    /// Existing subnets to use.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub subnets: Vec<String>,
    /// Existing utility subnets to use.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub utility_subnets: Vec<String>,
    /// Egress for private subnets: a NAT gateway or instance id.
    #[arg(long, value_name = "ID")]
    pub egress: Option<String>,
    /// Kubernetes version (defaults to the stable channel's recommendation).
    #[arg(long, value_name = "VERSION")]
    pub kubernetes_version: Option<String>,
    /// Kubernetes feature gates: `Gate`, `+Gate` (on) or `-Gate` (off).
    #[arg(long, value_delimiter = ',', value_name = "GATES")]
    pub kubernetes_feature_gates: Vec<String>,
    /// Path to the admin SSH public key (default ~/.ssh/id_rsa.pub when it exists).
    #[arg(long, value_name = "FILE")]
    pub ssh_public_key: Option<PathBuf>,
    /// CIDRs allowed to reach nodes over SSH (default: --admin-access).
    #[arg(long, value_delimiter = ',', value_name = "CIDRS")]
    pub ssh_access: Vec<String>,
    /// CIDRs allowed to reach the Kubernetes API (default 0.0.0.0/0 and ::/0).
    #[arg(long, value_delimiter = ',', value_name = "CIDRS")]
    pub admin_access: Vec<String>,
    /// API load balancer type: public or internal.
    #[arg(long = "api-loadbalancer-type", value_name = "TYPE")]
    pub api_load_balancer_type: Option<String>,
    /// Public DNS name of the API.
    #[arg(long, alias = "master-public-name", value_name = "NAME")]
    pub api_public_name: Option<String>,
    /// ACM certificate ARN for the API load balancer.
    #[arg(long, value_name = "ARN")]
    pub api_ssl_certificate: Option<String>,
    /// Encrypt etcd volumes (default true).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub encrypt_etcd_storage: Option<bool>,
    /// etcd clusters to create (default main,events).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub etcd_clusters: Vec<String>,
    /// Cloud provider: aws, gce or vsphere (guessed from the state store or zones).
    #[arg(long, value_name = "CLOUD")]
    pub cloud: Option<String>,
    /// GCE: the Google Cloud project (default: gcloud's default project).
    #[arg(long, value_name = "PROJECT")]
    pub project: Option<String>,
    /// GCE: the service account instances run as (default: one per role).
    #[arg(long, value_name = "EMAIL")]
    pub gce_service_account: Option<String>,
    #[command(flatten)]
    pub vsphere: VsphereFlags,
    /// Tags for all cloud resources: `Key=Value,Key2=Value2`.
    #[arg(long, value_name = "LABELS")]
    pub cloud_labels: Option<String>,
    /// Channel for default versions and images (default stable).
    #[arg(long, value_name = "CHANNEL")]
    pub channel: Option<String>,
    /// Publish OIDC discovery documents here (enables IRSA).
    #[arg(long, value_name = "URL")]
    pub discovery_store: Option<String>,
    /// Instance manager for nodes: cloudgroups or karpenter.
    #[arg(long, value_name = "MANAGER")]
    pub instance_manager: Option<String>,
    /// Use IPv6 for pods and services.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub ipv6: Option<bool>,
    /// Set a field of the spec: `cluster.spec.path=value` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub sets: Vec<String>,
    /// Remove a field of the spec: `cluster.spec.path` (repeatable).
    #[arg(long = "unset", value_name = "PATH")]
    pub unsets: Vec<String>,
    /// Print the spec instead of storing it (with -o).
    #[arg(long)]
    pub dry_run: bool,
    /// Output format for --dry-run.
    #[arg(short = 'o', long, value_name = "FORMAT")]
    pub output: Option<ManifestOutput>,
    /// Also apply the cluster to the cloud (runs `update cluster --yes`).
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Target for --yes: direct or terraform.
    #[arg(long, value_name = "TARGET")]
    pub target: Option<String>,
    /// Output directory for `--target terraform` (default out/terraform).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Associate public IPs with control-plane and node instances (default true).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub associate_public_ip: Option<bool>,
    /// Authorization mode: RBAC (default) or AlwaysAllow.
    #[arg(long, value_name = "MODE")]
    pub authorization: Option<String>,
    /// Tenancy of the control-plane group: default or dedicated.
    #[arg(long, alias = "master-tenancy", value_name = "TENANCY")]
    pub control_plane_tenancy: Option<String>,
    /// Tenancy of the node group: default or dedicated.
    #[arg(long, value_name = "TENANCY")]
    pub node_tenancy: Option<String>,
    /// Do not tag the subnets for load balancers.
    #[arg(long)]
    pub disable_subnet_tags: bool,
    /// The volume type of etcd members (e.g. gp3, io1).
    #[arg(long, value_name = "TYPE")]
    pub etcd_storage_type: Option<String>,
    /// Root volume type of worker nodes (e.g. gp3, io1).
    #[arg(long, value_name = "TYPE")]
    pub node_volume_type: Option<String>,
    /// Container runtime: containerd, the only one (deprecated in kops).
    #[arg(long, hide = true, value_name = "RUNTIME")]
    pub container_runtime: Option<String>,
    #[command(flatten)]
    pub openstack: OpenstackFlags,
}

/// kops' OpenStack flags: accepted so a script parses, answered with one
/// line (kops-rs serves AWS, not OpenStack).
#[derive(Debug, Args, Default)]
pub struct OpenstackFlags {
    /// External network to use with the OpenStack router (OpenStack: not supported).
    #[arg(long, value_name = "NETWORK")]
    pub os_ext_net: Option<String>,
    /// External floating subnet to use with the OpenStack router (OpenStack: not supported).
    #[arg(long, value_name = "SUBNET")]
    pub os_ext_subnet: Option<String>,
    /// External subnet to use with the Kubernetes API (OpenStack: not supported).
    #[arg(long, value_name = "SUBNET")]
    pub os_lb_floating_subnet: Option<String>,
    /// Attach volumes across availability zones (OpenStack: not supported).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub os_kubelet_ignore_az: Option<bool>,
    /// Use the Octavia load balancer API (OpenStack: not supported).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub os_octavia: Option<bool>,
    /// Octavia provider to use (OpenStack: not supported).
    #[arg(long, value_name = "PROVIDER")]
    pub os_octavia_provider: Option<String>,
    /// Comma-separated DNS servers of the network (OpenStack: not supported).
    #[arg(long, value_name = "SERVERS")]
    pub os_dns_servers: Option<String>,
    /// ID of the existing OpenStack network to use (OpenStack: not supported).
    #[arg(long, value_name = "ID")]
    pub os_network: Option<String>,
}

impl OpenstackFlags {
    /// The first OpenStack flag given, if any.
    fn first_given(&self) -> Option<&'static str> {
        [
            ("--os-ext-net", self.os_ext_net.is_some()),
            ("--os-ext-subnet", self.os_ext_subnet.is_some()),
            (
                "--os-lb-floating-subnet",
                self.os_lb_floating_subnet.is_some(),
            ),
            (
                "--os-kubelet-ignore-az",
                self.os_kubelet_ignore_az.is_some(),
            ),
            ("--os-octavia", self.os_octavia.is_some()),
            ("--os-octavia-provider", self.os_octavia_provider.is_some()),
            ("--os-dns-servers", self.os_dns_servers.is_some()),
            ("--os-network", self.os_network.is_some()),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }
}

fn default_ssh_key() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let p = PathBuf::from(home).join(".ssh").join("id_rsa.pub");
    p.exists().then_some(p)
}

pub async fn run(global: &GlobalArgs, a: CreateClusterArgs) -> Result<i32> {
    let name = a
        .cluster_name
        .clone()
        .or_else(|| global.name.clone())
        .ok_or(OpsError::ClusterNameRequired { known: Vec::new() })?;
    if a.dry_run && a.output.is_none() {
        bail!("--dry-run needs an output format\nhint: add `-o yaml` or `-o json`");
    }
    if let Some(flag) = a.openstack.first_given() {
        bail!("{flag}: OpenStack is not supported by kops-rs, which creates clusters on AWS\nhint: leave out the --os-* flags");
    }
    if let Some(rt) = a
        .container_runtime
        .as_deref()
        .filter(|r| *r != "containerd")
    {
        bail!("--container-runtime {rt}: containerd is the only container runtime\nhint: leave out --container-runtime");
    }
    let options = NewClusterOptions {
        cluster_name: name.clone(),
        cloud: a.cloud,
        project: a.project,
        gce_service_account: a.gce_service_account,
        vsphere: a.vsphere.into_options()?,
        zones: a.zones,
        control_plane_zones: a.control_plane_zones,
        control_plane_count: a.control_plane_count,
        control_plane_size: a.control_plane_size,
        control_plane_volume_size: a.control_plane_volume_size,
        control_plane_volume_type: a.control_plane_volume_type,
        control_plane_image: a.control_plane_image,
        control_plane_security_groups: a.control_plane_security_groups,
        node_count: a.node_count,
        node_size: a.node_size,
        node_volume_size: a.node_volume_size,
        node_image: a.node_image,
        node_security_groups: a.node_security_groups,
        bastion_image: a.bastion_image,
        apiserver_count: a.apiserver_count,
        apiserver_size: a.apiserver_size,
        image: a.image,
        networking: a.networking,
        topology: a.topology,
        bastion: a.bastion.unwrap_or(false),
        dns_type: a.dns_type,
        dns_zone: a.dns_zone,
        network_cidrs: a.network_cidr,
        network_id: a.vpc,
        subnet_ids: a.subnets,
        utility_subnet_ids: a.utility_subnets,
        egress: a.egress,
        kubernetes_version: a.kubernetes_version,
        kubernetes_feature_gates: a.kubernetes_feature_gates,
        ssh_access: a.ssh_access,
        admin_access: a.admin_access,
        api_load_balancer_type: a.api_load_balancer_type,
        api_public_name: a.api_public_name,
        api_ssl_certificate: a.api_ssl_certificate,
        encrypt_etcd_storage: a.encrypt_etcd_storage,
        etcd_clusters: a.etcd_clusters,
        cloud_labels: a.cloud_labels,
        channel: a.channel,
        discovery_store: a.discovery_store,
        instance_manager: a.instance_manager,
        ipv6: a.ipv6.unwrap_or(false),
        state_store: global.state.clone(),
        sets: a.sets,
        unsets: a.unsets,
        authorization: a.authorization,
        node_volume_type: a.node_volume_type,
        etcd_storage_type: a.etcd_storage_type,
        associate_public_ip: a.associate_public_ip,
        control_plane_tenancy: a.control_plane_tenancy,
        node_tenancy: a.node_tenancy,
        disable_subnet_tags: a.disable_subnet_tags,
        ..Default::default()
    };
    // Only the dry run may work without a state store.
    let registry = if a.dry_run {
        match global.state.as_deref() {
            Some(_) => Some(state(global).await?),
            None => None,
        }
    } else {
        Some(state(global).await?)
    };
    let key_path = match &a.ssh_public_key {
        Some(p) => Some(p.clone()),
        None => default_ssh_key(),
    };
    let ssh_public_key = match &key_path {
        Some(p) => Some(read_input(p)?.1),
        None => None,
    };
    let request = kops_ops::CreateClusterRequest {
        options,
        ssh_public_key,
        dry_run: a.dry_run,
    };
    let created = match &registry {
        Some(r) => kops_ops::create_cluster(r, request).await?,
        None => {
            let memory = kops_ops::open_state(Some("memory://dry-run")).await?;
            kops_ops::create_cluster(&memory, request).await?
        }
    };
    if let Some(project) = &created.gcloud_project {
        status(&format!("Using gcloud's default project {project}"));
    }
    if let (true, Some(format)) = (a.dry_run, a.output) {
        let mut values = vec![to_json_value(&created.spec.cluster)];
        let mut groups: Vec<&InstanceGroup> = created.spec.instance_groups.iter().collect();
        groups.sort_by(|x, y| x.name().cmp(y.name()));
        values.extend(groups.into_iter().map(to_json_value));
        print_objects(&values, format);
        return Ok(0);
    }
    status(&format!(
        "Created cluster {name} with {} instance groups in {}",
        created.spec.instance_groups.len(),
        global.state.as_deref().unwrap_or_default()
    ));
    if let Some(id) = &created.ssh_key_id {
        status(&format!("Added SSH public key {id}"));
    }
    let target = a.target.as_deref().unwrap_or("direct");
    if a.yes || target != "direct" {
        // As kops: `create cluster --yes` also applies the cluster (with an
        // 18h admin credential in the kubeconfig); `--target terraform`
        // renders it.
        return update_cluster::run(
            global,
            UpdateClusterArgs {
                cluster_name: Some(name),
                yes: a.yes,
                target: target.to_string(),
                out: a.out,
                who: KubeconfigUserFlags {
                    admin: (a.yes && target == "direct").then(|| "18h".to_string()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await;
    }
    // Name a group that exists: node groups are `nodes-<zone>`, one per zone.
    let mut node_groups: Vec<&str> = created
        .spec
        .instance_groups
        .iter()
        .filter(|g| g.role() == Some(Role::Node))
        .map(|g| g.name())
        .collect();
    node_groups.sort();
    let node_group = node_groups.first().copied().unwrap_or("nodes");
    status(&format!(
        "\nSuggestions:\n * list clusters with: kops get cluster\n * edit this cluster with: kops edit cluster {name}\n * edit your node instance group: kops edit ig --name={name} {node_group}\n * review the spec with: kops get all {name} -o yaml"
    ));
    Ok(0)
}

/// `--cloud vsphere`'s flags: kops 1.17's, plus what a working cluster
/// needs (folder, network, the control plane's virtual IP). Credentials are
/// no flags: they come from VSPHERE_USERNAME/VSPHERE_PASSWORD only.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct VsphereFlags {
    /// vSphere: the vCenter (host name or URL).
    #[arg(long, value_name = "SERVER")]
    pub vsphere_server: Option<String>,
    /// vSphere: the datacenter the VMs run in.
    #[arg(long, value_name = "DATACENTER")]
    pub vsphere_datacenter: Option<String>,
    /// vSphere: the cluster, host or resource pool the VMs run in.
    #[arg(long, value_name = "POOL")]
    pub vsphere_resource_pool: Option<String>,
    /// vSphere: the datastore of the VMs' disks.
    #[arg(long, value_name = "DATASTORE")]
    pub vsphere_datastore: Option<String>,
    /// vSphere (kops 1.17): the CoreDNS server; kept in the spec, unused.
    #[arg(long, value_name = "URL")]
    pub vsphere_coredns_server: Option<String>,
    /// vSphere: the cluster's VM folder (default: the cluster name).
    #[arg(long, value_name = "FOLDER")]
    pub vsphere_folder: Option<String>,
    /// vSphere: the network of the VMs (default: the template's).
    #[arg(long, value_name = "NETWORK")]
    pub vsphere_network: Option<String>,
    /// vSphere: the virtual IP kube-vip holds for the API server.
    #[arg(long, value_name = "IP")]
    pub vsphere_control_plane_vip: Option<String>,
    /// vSphere: static addresses (`IP/prefix`) of the control-plane VMs, one per control-plane group in name order; required for more than one.
    #[arg(long, value_name = "IP/PREFIX", value_delimiter = ',')]
    pub vsphere_control_plane_addresses: Vec<String>,
    /// vSphere: the default gateway of the control-plane VMs' static addresses.
    #[arg(long, value_name = "IP")]
    pub vsphere_gateway: Option<String>,
    /// vSphere: the DNS servers of the control-plane VMs' static addresses.
    #[arg(long, value_name = "IP", value_delimiter = ',')]
    pub vsphere_nameservers: Vec<String>,
    /// vSphere: pin vCenter's certificate by its SHA-1 fingerprint (as `govc about.cert -thumbprint` prints it).
    #[arg(long, value_name = "SHA1")]
    pub vsphere_thumbprint: Option<String>,
    /// vSphere: trust vCenter's certificate through this CA (PEM file; kept in the spec).
    #[arg(long, value_name = "FILE")]
    pub vsphere_ca_file: Option<std::path::PathBuf>,
}

impl VsphereFlags {
    /// The options, with `--vsphere-ca-file` read.
    fn into_options(self) -> Result<kops_api::new_cluster::VsphereOptions> {
        let ca_certificate = match &self.vsphere_ca_file {
            None => None,
            Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
                anyhow::anyhow!(
                    "--vsphere-ca-file: cannot read `{}`: {e}\nhint: name the PEM file of the CA that signed vCenter's certificate",
                    path.display()
                )
            })?),
        };
        let thumbprint = self.vsphere_thumbprint.clone();
        let mut options = kops_api::new_cluster::VsphereOptions::from(self);
        options.thumbprint = thumbprint;
        options.ca_certificate = ca_certificate;
        Ok(options)
    }
}

impl From<VsphereFlags> for kops_api::new_cluster::VsphereOptions {
    fn from(f: VsphereFlags) -> Self {
        Self {
            server: f.vsphere_server,
            datacenter: f.vsphere_datacenter,
            resource_pool: f.vsphere_resource_pool,
            datastore: f.vsphere_datastore,
            core_dns_server: f.vsphere_coredns_server,
            folder: f.vsphere_folder,
            network: f.vsphere_network,
            control_plane_vip: f.vsphere_control_plane_vip,
            control_plane_addresses: f.vsphere_control_plane_addresses,
            gateway: f.vsphere_gateway,
            nameservers: f.vsphere_nameservers,
            thumbprint: f.vsphere_thumbprint,
            ca_certificate: None,
        }
    }
}
