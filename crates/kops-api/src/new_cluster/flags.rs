//! The flags checked before anything is built: one line per problem,
//! naming the flag and its fix.

use std::collections::{BTreeMap, BTreeSet};

use ipnet::Ipv4Net;

use crate::dns::{dns_name_problem, is_gossip_name, GOSSIP_HINT, GOSSIP_REMOVED};
use crate::field_error::FieldError;
use crate::gce;
use crate::networking::NETWORKING_FLAG_VALUES;
use crate::validation::KNOWN_CLOUDS;
use crate::version::{self, KubernetesVersion, VersionProblem};
use crate::zones::{aws_region, gce_region};

use super::options::{
    normalize_thumbprint, vsphere_machine_type, ExistingNetwork, NewClusterOptions,
};
use super::parse::{clean_list, non_empty, parse_cloud_labels, parse_feature_gate};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Topology {
    Public,
    Private,
}

/// The clouds `create cluster` builds specs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cloud {
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

    pub(super) fn as_str(self) -> &'static str {
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
pub(super) struct Flags {
    pub(super) name: String,
    pub(super) cloud: Cloud,
    pub(super) region: String,
    pub(super) zones: Vec<String>,
    pub(super) control_plane_zones: Vec<String>,
    /// Zones and control-plane zones, sorted.
    pub(super) all_zones: Vec<String>,
    pub(super) control_plane_count: usize,
    pub(super) topology: Topology,
    pub(super) dns: &'static str,
    pub(super) networking: String,
    pub(super) kubernetes_version: String,
    pub(super) parsed_version: KubernetesVersion,
    pub(super) feature_gates: Vec<(String, bool)>,
    pub(super) cloud_labels: BTreeMap<String, String>,
    pub(super) api_lb_type: Option<&'static str>,
    pub(super) karpenter: bool,
    pub(super) always_allow: bool,
    pub(super) network_id: Option<String>,
    pub(super) project: Option<String>,
}

pub(super) fn guess_cloud(o: &NewClusterOptions) -> Option<&'static str> {
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
pub(super) fn aws_only_flags(o: &NewClusterOptions) -> Vec<(&'static str, &'static str)> {
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
pub(super) fn check_flags(o: &NewClusterOptions) -> Result<Flags, Vec<FieldError>> {
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
pub(super) fn check_name(o: &NewClusterOptions, errors: &mut Vec<FieldError>) -> String {
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
pub(super) fn check_cloud(o: &NewClusterOptions, errors: &mut Vec<FieldError>) -> Cloud {
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
pub(super) fn check_cloud_flags(
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
pub(super) fn gce_flags(o: &NewClusterOptions) -> [(&'static str, Option<&String>); 2] {
    [
        ("--project", o.project.as_ref()),
        ("--gce-service-account", o.gce_service_account.as_ref()),
    ]
}

/// A GCE cluster's flags: its project (returned), service account,
/// subnetwork and machine types, and no AWS-only flag.
pub(super) fn check_gce_flags(
    o: &NewClusterOptions,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
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
pub(super) fn check_vsphere_flags(o: &NewClusterOptions, errors: &mut Vec<FieldError>) {
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
pub(super) struct Zones {
    pub(super) zones: Vec<String>,
    pub(super) control_plane_zones: Vec<String>,
    /// Zones and control-plane zones, sorted.
    pub(super) all_zones: Vec<String>,
    pub(super) region: String,
}

/// `--zones` and `--control-plane-zones`: each once, each a zone of the
/// cloud, all in one region (a vSphere cluster without any gets one named
/// after its datacenter).
pub(super) fn check_zones(
    o: &NewClusterOptions,
    cloud: Cloud,
    errors: &mut Vec<FieldError>,
) -> Zones {
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
pub(super) fn check_control_plane_count(
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
pub(super) fn check_kubernetes_version(
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
pub(super) fn check_feature_gates(
    o: &NewClusterOptions,
    errors: &mut Vec<FieldError>,
) -> Vec<(String, bool)> {
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
pub(super) fn check_networking(o: &NewClusterOptions, errors: &mut Vec<FieldError>) -> String {
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
pub(super) fn check_topology(
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
pub(super) fn check_dns(
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
pub(super) fn check_api_load_balancer_type(
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
pub(super) fn check_authorization(o: &NewClusterOptions, errors: &mut Vec<FieldError>) -> bool {
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
pub(super) fn check_instance_manager(o: &NewClusterOptions, errors: &mut Vec<FieldError>) -> bool {
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
pub(super) fn check_cloud_labels(
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
pub(super) fn check_network_cidrs_and_sizes(o: &NewClusterOptions, errors: &mut Vec<FieldError>) {
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
pub(super) fn check_network_id(
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
pub(super) fn zone_to_subnet_id(
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
