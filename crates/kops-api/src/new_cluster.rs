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

use std::collections::BTreeMap;

use crate::cluster::{
    ApiSpec, AuthorizationSpec, BastionSpec, Cluster, ClusterSubnetSpec, DnsSpec, EtcdClusterSpec,
    EtcdManagerSpec, EtcdMemberSpec, IamSpec, KarpenterSpec, LoadBalancerAccessSpec,
    ServiceAccountIssuerDiscoveryConfig, SubnetType, TopologySpec,
};
use crate::components::{
    CloudConfiguration, CloudControllerManagerConfig, FeatureGates, KubeApiServerConfig,
    KubeControllerManagerConfig, KubeProxyConfig, KubeSchedulerConfig, KubeletConfig,
};
use crate::field_error::FieldError;
use crate::gce;
use crate::instance_group::{InstanceGroup, MixedInstancesPolicy, Role};
use crate::meta::{Extra, LABEL_INSTANCE_GROUP};
use crate::networking::{CalicoSpec, CiliumSpec, FlannelSpec, NetworkingSpec};
use crate::set;
use crate::zones::gce_region;

mod assign;
mod cidrs;
mod flags;
mod machines;
mod options;
mod parse;

pub use assign::perform_assignments;
pub use cidrs::{assign_subnet_cidrs, split_ipv4};
pub use flags::chosen_cloud;
use flags::{check_flags, zone_to_subnet_id, Cloud, Flags, Topology};
pub use machines::{default_image, default_machine_type, machine_architecture, Architecture};
use options::assign_vsphere_addresses;
pub use options::{
    normalize_thumbprint, vsphere_machine_type, ExistingNetwork, ExistingSubnet, NewCluster,
    NewClusterOptions, VsphereOptions, VsphereServer, DEFAULT_ADMIN_ACCESS,
    DEFAULT_AWS_NETWORK_CIDR, DEFAULT_CHANNEL, DEFAULT_NON_MASQUERADE_CIDR, MOCK_AWS_REGION,
    VSPHERE_DEFAULT_MACHINE_TYPE,
};
use parse::{clean_list, non_empty};
pub use parse::{parse_cloud_labels, parse_feature_gate};

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
    use ipnet::Ipv4Net;

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
