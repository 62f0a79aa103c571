//! What the spec needs to know about Google Compute Engine: zone names and
//! their regions, machine-type names, the defaults `create cluster` gives a
//! GCE cluster and the subnet ranges kops picks for it.
//!
//! kops' sources for these facts: `upup/pkg/fi/cloudup/gce/utils.go`
//! (`ZoneToRegion`), `upup/pkg/fi/cloudup/gce/network.go` (the subnet and IP
//! alias ranges), `pkg/util/subnet/cidrmap.go` (how a free range is found),
//! `upup/pkg/fi/cloudup/populate_instancegroup_spec.go` (machine types) and
//! the stable channel (images).

use ipnet::Ipv4Net;

use crate::cluster::Cluster;
use crate::field_error::FieldError;
use crate::instance_group::Role;
use crate::version::KubernetesVersion;
use crate::zones::gce_region;

/// Machine type of control-plane and worker nodes when none is given.
pub const DEFAULT_MACHINE_TYPE: &str = "e2-medium";
/// Machine type of bastions when none is given.
pub const DEFAULT_BASTION_MACHINE_TYPE: &str = "e2-micro";
/// The private range kops carves GCE subnets (and IP alias ranges) from.
pub const SUBNET_POOL: &str = "10.0.0.0/8";

/// What is wrong with a Compute Engine machine type name, if anything.
/// Compute Engine names are lowercase letters, digits and `-`, start with a
/// letter and do not end with `-`; every machine type has a family before a
/// `-` (`e2-medium`, `n2-standard-4`, `custom-2-4096`).
pub fn machine_type_problem(machine_type: &str) -> Option<&'static str> {
    let t = machine_type;
    let shaped = t.len() <= 63
        && t.starts_with(|c: char| c.is_ascii_lowercase())
        && !t.ends_with('-')
        && t.contains('-')
        && t.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    (!shaped).then_some("is not a Compute Engine machine type")
}

/// The hint that goes with [`machine_type_problem`].
pub const MACHINE_TYPE_HINT: &str =
    "Compute Engine machine types look like `e2-medium`, `n2-standard-4` or `e2-custom-2-4096`";

/// The machine type kops gives a GCE group of `role` when none is given.
/// kops has none for API-server groups (they take `--apiserver-size`).
pub fn default_machine_type(role: Role) -> Option<&'static str> {
    match role {
        Role::ControlPlane | Role::Node => Some(DEFAULT_MACHINE_TYPE),
        Role::Bastion => Some(DEFAULT_BASTION_MACHINE_TYPE),
        Role::ApiServer => None,
    }
}

/// The image kops' stable channel gives GCE instances running `version`.
/// kops takes every GCE machine to be amd64.
pub fn default_image(version: &KubernetesVersion) -> Option<&'static str> {
    let minor = (version.major, version.minor);
    if minor >= (1, 32) {
        Some("ubuntu-os-cloud/ubuntu-2404-noble-amd64-v20260615")
    } else if minor >= (1, 27) {
        Some("ubuntu-os-cloud/ubuntu-2204-jammy-v20260612")
    } else {
        None
    }
}

/// Hands out ranges of a pool that overlap none in use, as kops does: the
/// candidates are the pool's blocks of the wanted size in order, starting
/// with the second (the pool's first block is never used).
#[derive(Debug, Clone, Default)]
pub struct RangeAllocator {
    used: Vec<Ipv4Net>,
}

impl RangeAllocator {
    /// An allocator that avoids `used`.
    pub fn new(used: impl IntoIterator<Item = Ipv4Net>) -> Self {
        RangeAllocator {
            used: used.into_iter().map(|n| n.trunc()).collect(),
        }
    }

    /// The next free block of `prefix` bits in `pool`, now marked used.
    pub fn allocate(&mut self, pool: Ipv4Net, prefix: u8) -> Option<Ipv4Net> {
        if prefix < pool.prefix_len() || prefix > 32 {
            return None;
        }
        let step = 1u64 << (32 - prefix);
        let base = u64::from(u32::from(pool.network()));
        let end = base + (1u64 << (32 - pool.prefix_len()));
        let mut at = base + step;
        while at < end {
            let candidate = Ipv4Net::new((at as u32).into(), prefix).ok()?;
            let taken = self
                .used
                .iter()
                .any(|u| u.contains(&candidate.network()) || candidate.contains(&u.network()));
            if !taken {
                self.used.push(candidate);
                return Some(candidate);
            }
            at += step;
        }
        None
    }
}

/// Whether the cluster's pods take addresses from the network itself (IP
/// aliases): kops' `gce` networking and kindnet.
pub fn uses_ip_aliases(cluster: &Cluster) -> bool {
    cluster
        .spec
        .networking
        .as_ref()
        .is_some_and(|n| n.gce.is_some() || n.kindnet.is_some())
}

/// Whether [`assign_network`] has ranges to hand out.
pub fn needs_ranges(cluster: &Cluster) -> bool {
    let set = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
    let subnets = cluster.spec.subnets.as_deref().unwrap_or_default();
    if uses_ip_aliases(cluster) {
        let spec = &cluster.spec;
        return !(set(&spec.pod_cidr)
            && set(&spec.service_cluster_ip_range)
            && subnets.first().is_some_and(|s| set(&s.cidr)));
    }
    subnets.iter().any(|s| !set(&s.id) && !set(&s.cidr))
}

/// Gives GCE subnets their ranges, as kops does on create (its
/// `PerformNetworkAssignments`), avoiding the ranges in `used` (those of the
/// network's existing subnetworks). With IP aliases the one subnet gets a
/// `/19` for nodes and the cluster a `/14` for pods and a `/16` for
/// services, and `nonMasqueradeCIDR` becomes the whole pool; otherwise each
/// new subnet without a CIDR gets a `/20`.
pub fn assign_network(cluster: &mut Cluster, used: &[Ipv4Net]) -> Result<(), FieldError> {
    let needs = needs_ranges(cluster);
    let pool: Ipv4Net = SUBNET_POOL.parse().expect("the pool is a CIDR");
    let mut ranges = RangeAllocator::new(used.iter().copied());
    let exhausted = |what: &str| {
        FieldError::new(
            "spec.subnets",
            format!("no free {what} is left in {SUBNET_POOL}"),
        )
        .hint("free ranges in the network, or give the subnet its `cidr`")
    };
    if uses_ip_aliases(cluster) {
        let spec = &mut cluster.spec;
        let subnets = spec.subnets.get_or_insert_with(Vec::new);
        if subnets.len() != 1 {
            return Err(FieldError::new(
                "spec.subnets",
                format!(
                    "IP alias networking needs exactly one subnet, the cluster has {}",
                    subnets.len()
                ),
            )
            .hint("keep one subnet for the cluster's region"));
        }
        if !needs {
            return Ok(());
        }
        let pods = ranges
            .allocate(pool, 14)
            .ok_or_else(|| exhausted("/14 for pods"))?;
        let services = ranges
            .allocate(pool, 16)
            .ok_or_else(|| exhausted("/16 for services"))?;
        let nodes = ranges
            .allocate(pool, 19)
            .ok_or_else(|| exhausted("/19 for nodes"))?;
        subnets[0].cidr = Some(nodes.to_string());
        spec.pod_cidr = Some(pods.to_string());
        spec.service_cluster_ip_range = Some(services.to_string());
        spec.non_masquerade_cidr = Some(SUBNET_POOL.to_string());
        return Ok(());
    }
    for subnet in cluster.spec.subnets.iter_mut().flatten() {
        let has = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
        if has(&subnet.id) || has(&subnet.cidr) {
            continue;
        }
        let block = ranges
            .allocate(pool, 20)
            .ok_or_else(|| exhausted("/20 for a subnet"))?;
        subnet.cidr = Some(block.to_string());
    }
    Ok(())
}

/// The checks kops makes of a GCE cluster: no `networkCIDR` (GCE networks
/// have none), subnets that name their region (one region for the whole
/// cluster) and no zone (GCE subnets are regional).
pub fn validate_cluster(cluster: &Cluster, errors: &mut Vec<FieldError>) {
    let spec = &cluster.spec;
    if let Some(c) = spec.network_cidr.as_deref().filter(|c| !c.is_empty()) {
        errors.push(
            FieldError::new("spec.networkCIDR", "is not supported on GCE")
                .value(c)
                .hint("remove it: GCE networks have no range of their own, each subnet has one"),
        );
    }
    if spec
        .additional_network_cidrs
        .as_ref()
        .is_some_and(|a| !a.is_empty())
    {
        errors.push(
            FieldError::new("spec.additionalNetworkCIDRs", "is not supported on GCE")
                .hint("remove it: GCE networks have no range of their own, each subnet has one"),
        );
    }
    let mut first_region: Option<&str> = None;
    for (i, s) in spec.subnets.iter().flatten().enumerate() {
        let path = format!("spec.subnets[{i}]");
        if let Some(z) = s.zone.as_deref().filter(|z| !z.is_empty()) {
            errors.push(
                FieldError::new(format!("{path}.zone"), "is not allowed on GCE, where subnets are regional")
                    .value(z)
                    .hint("remove the zone and set the subnet's `region`; instance groups name their zones"),
            );
        }
        match s.region.as_deref().filter(|r| !r.is_empty()) {
            None => errors.push(
                FieldError::new(format!("{path}.region"), "is required on GCE")
                    .hint("set the subnet's region, e.g. `us-central1`"),
            ),
            Some(r) => match first_region {
                None => first_region = Some(r),
                Some(first) if first != r => errors.push(
                    FieldError::new(
                        format!("{path}.region"),
                        format!("is not the region of the cluster's other subnets (`{first}`)"),
                    )
                    .value(r)
                    .hint("a cluster lives in one region: put every subnet in the same one"),
                ),
                Some(_) => {}
            },
        }
    }
}

/// The checks kops makes of an instance group of a GCE cluster, and that
/// its machine type and zones can exist: zones are required (GCE subnets
/// do not say which zones to use) and must be in the region of the group's
/// subnets.
pub fn validate_instance_group(
    ig: &crate::instance_group::InstanceGroup,
    cluster: &Cluster,
    errors: &mut Vec<FieldError>,
) {
    let spec = &ig.spec;
    if let Some(t) = spec.machine_type.as_deref() {
        if let Some(problem) = machine_type_problem(t) {
            errors.push(
                FieldError::new("spec.machineType", problem)
                    .value(t)
                    .hint(MACHINE_TYPE_HINT),
            );
        }
    }
    if let Some(model) = spec.extra.get("gcpProvisioningModel") {
        if !matches!(model.as_str(), Some("STANDARD" | "SPOT")) {
            errors.push(
                FieldError::new("spec.gcpProvisioningModel", "is not a provisioning model")
                    .value(
                        model
                            .as_str()
                            .map_or_else(|| model.to_string(), str::to_string),
                    )
                    .hint("use `STANDARD` or `SPOT`"),
            );
        }
    }
    let zones = spec.zones.as_deref().unwrap_or_default();
    if zones.is_empty() {
        errors.push(
            FieldError::new("spec.zones", "is required on GCE")
                .hint("list the zones the group runs in, e.g. `us-central1-a`"),
        );
    }
    let regions: Vec<&str> = cluster
        .spec
        .subnets
        .iter()
        .flatten()
        .filter(|s| spec.subnets.iter().flatten().any(|n| *n == s.name))
        .filter_map(|s| s.region.as_deref())
        .collect();
    for (i, z) in zones.iter().enumerate() {
        let path = format!("spec.zones[{i}]");
        match gce_region(z) {
            None => errors.push(
                FieldError::new(path, "is not a Compute Engine zone")
                    .value(z)
                    .hint("Compute Engine zones are a region and a letter, e.g. `us-central1-a`"),
            ),
            Some(r) => {
                if let Some(other) = regions.iter().find(|s| **s != r) {
                    errors.push(
                        FieldError::new(
                            path,
                            format!("is not in the region of the group's subnets (`{other}`)"),
                        )
                        .value(z)
                        .hint(format!("use a zone of {other}, e.g. `{other}-a`")),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_type_names() {
        for good in [
            "e2-medium",
            "n2-standard-4",
            "custom-2-4096",
            "e2-custom-2-4096",
            "f1-micro",
        ] {
            assert_eq!(machine_type_problem(good), None, "{good}");
        }
        for bad in [
            "t3.medium",
            "e2 medium",
            "E2-medium",
            "medium",
            "e2-",
            "2-medium",
            "",
        ] {
            assert!(machine_type_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn ranges_as_kops_picks_them() {
        let pool: Ipv4Net = SUBNET_POOL.parse().unwrap();
        let mut r = RangeAllocator::default();
        assert_eq!(r.allocate(pool, 20).unwrap().to_string(), "10.0.16.0/20");
        assert_eq!(r.allocate(pool, 20).unwrap().to_string(), "10.0.32.0/20");
        // IP aliases: pods, services, nodes.
        let mut r = RangeAllocator::default();
        assert_eq!(r.allocate(pool, 14).unwrap().to_string(), "10.4.0.0/14");
        assert_eq!(r.allocate(pool, 16).unwrap().to_string(), "10.1.0.0/16");
        assert_eq!(r.allocate(pool, 19).unwrap().to_string(), "10.0.32.0/19");
        // Ranges already in the network are skipped.
        let mut r = RangeAllocator::new(["10.0.16.0/20".parse().unwrap()]);
        assert_eq!(r.allocate(pool, 20).unwrap().to_string(), "10.0.32.0/20");
        let small: Ipv4Net = "10.0.0.0/30".parse().unwrap();
        let mut r = RangeAllocator::default();
        assert_eq!(r.allocate(small, 31).unwrap().to_string(), "10.0.0.2/31");
        assert_eq!(r.allocate(small, 31), None);
    }
}
