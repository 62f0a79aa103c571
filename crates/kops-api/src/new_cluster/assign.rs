//! kops' assignments after the spec is built: subnet ranges, the proxy's
//! exclusions, the API's DNS.

use std::net::IpAddr;

use ipnet::Ipv4Net;

use crate::cluster::Cluster;
use crate::field_error::FieldError;
use crate::gce;

use super::cidrs::assign_subnet_cidrs;
use super::options::{ExistingNetwork, DEFAULT_AWS_NETWORK_CIDR, DEFAULT_NON_MASQUERADE_CIDR};

pub(super) fn uses_public_dns(cluster: &Cluster) -> bool {
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

pub(super) fn increment_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(u32::from(v4).wrapping_add(1).into()),
        IpAddr::V6(v6) => IpAddr::V6(u128::from(v6).wrapping_add(1).into()),
    }
}

/// Adds kops' default exclusions to `spec.egressProxy.excludes`.
pub(super) fn assign_proxy_excludes(cluster: &mut Cluster) -> Result<(), FieldError> {
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
