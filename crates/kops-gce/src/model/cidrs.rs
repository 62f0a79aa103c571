//! kops' offline CIDR assignment for GCE clusters (its populate step, when
//! no network exists yet): each subnet without a CIDR gets the next free
//! `/20` of `10.0.0.0/8` (never the first); with IP aliases, the pods get
//! a `/14`, services a `/16` and the one subnet a `/19`.

use std::net::Ipv4Addr;

use kops_api::Cluster;

/// IPv4 ranges in use, as (first address, size).
#[derive(Default)]
struct Used(Vec<(u64, u64)>);

impl Used {
    fn mark(&mut self, cidr: &str) {
        if let Some(range) = parse(cidr) {
            self.0.push(range);
        }
    }

    /// The next free block of `/bits` in `10.0.0.0/8` after the first.
    fn allocate(&mut self, bits: u32) -> Option<String> {
        let base = u64::from(u32::from(Ipv4Addr::new(10, 0, 0, 0)));
        let end = base + (1 << 24);
        let size = 1u64 << (32 - bits);
        let mut start = base + size;
        while start + size <= end {
            let free = self
                .0
                .iter()
                .all(|(s, n)| start + size <= *s || s + n <= start);
            if free {
                self.0.push((start, size));
                let ip = Ipv4Addr::from(u32::try_from(start).ok()?);
                return Some(format!("{ip}/{bits}"));
            }
            start += size;
        }
        None
    }
}

fn parse(cidr: &str) -> Option<(u64, u64)> {
    let (ip, bits) = cidr.split_once('/')?;
    let ip: Ipv4Addr = ip.parse().ok()?;
    let bits: u32 = bits.parse().ok()?;
    let size = 1u64 << (32 - bits.min(32));
    let start = u64::from(u32::from(ip)) & !(size - 1);
    Some((start, size))
}

/// Fills in the subnet (and, with IP aliases, pod and service) ranges
/// kops would assign; what the spec sets is kept.
pub fn assign(cluster: &mut Cluster, ip_alias: bool) {
    let spec = &mut cluster.spec;
    let mut used = Used::default();
    for subnet in spec.subnets.iter().flatten() {
        if let Some(cidr) = &subnet.cidr {
            used.mark(cidr);
        }
    }
    if ip_alias {
        let subnets = spec.subnets.get_or_insert_with(Vec::new);
        let complete = spec.pod_cidr.is_some()
            && spec.service_cluster_ip_range.is_some()
            && subnets.first().is_some_and(|s| s.cidr.is_some());
        if complete || subnets.len() != 1 {
            return;
        }
        let pods = used.allocate(14);
        let services = used.allocate(16);
        let nodes = used.allocate(19);
        spec.pod_cidr = pods;
        spec.service_cluster_ip_range = services;
        subnets[0].cidr = nodes;
        return;
    }
    for subnet in spec.subnets.iter_mut().flatten() {
        let shared = subnet.id.as_deref().is_some_and(|id| !id.is_empty());
        if subnet.cidr.is_none() && !shared {
            subnet.cidr = used.allocate(20);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assigns_as_kops() {
        let mut used = Used::default();
        assert_eq!(used.allocate(20).as_deref(), Some("10.0.16.0/20"));
        assert_eq!(used.allocate(20).as_deref(), Some("10.0.32.0/20"));
        let mut alias = Used::default();
        assert_eq!(alias.allocate(14).as_deref(), Some("10.4.0.0/14"));
        assert_eq!(alias.allocate(16).as_deref(), Some("10.1.0.0/16"));
        assert_eq!(alias.allocate(19).as_deref(), Some("10.0.32.0/19"));
    }
}
