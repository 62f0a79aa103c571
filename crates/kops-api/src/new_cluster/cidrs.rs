//! The subnets' address ranges: split from the network's, or taken from
//! the existing subnets kops found.

use ipnet::Ipv4Net;

use crate::cluster::{Cluster, ClusterSubnetSpec, SubnetType};
use crate::field_error::FieldError;

use super::options::ExistingNetwork;

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

pub(super) fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
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
pub(super) fn take_existing_subnets(
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
