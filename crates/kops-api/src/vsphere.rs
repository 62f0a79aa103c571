//! What the spec says about a vSphere cluster's network: the static
//! addresses of its control-plane VMs.
//!
//! vSphere VMs usually take DHCP addresses, which nobody knows before the
//! VM boots. etcd's members must know each other's addresses from the
//! start (etcd-manager runs from a static peer list on vSphere), so a
//! cluster with more than one etcd member gives each control-plane group a
//! static address (`spec.cloudConfig.vSphereControlPlaneAddresses`, with
//! `vSphereGateway` and `vSphereNameservers`). The VM gets it through
//! cloud-init's network config, and a VM that replaces it gets it again.
//! Workers keep DHCP.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::cluster::Cluster;
use crate::field_error::FieldError;
use crate::instance_group::InstanceGroup;

/// The field holding the addresses, for messages.
pub const ADDRESSES_FIELD: &str = "spec.cloudConfig.vSphereControlPlaneAddresses";
const GATEWAY_FIELD: &str = "spec.cloudConfig.vSphereGateway";
const NAMESERVERS_FIELD: &str = "spec.cloudConfig.vSphereNameservers";
const ADDRESSES_HINT: &str = "give each control-plane group a free address of the VMs' network with `kops edit cluster` (`create cluster` takes --vsphere-control-plane-addresses, --vsphere-gateway and --vsphere-nameservers)";

/// One control-plane VM's static network settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticNetwork {
    /// The VM's address and its network's prefix length.
    pub address: IpNet,
    pub gateway: IpAddr,
    pub nameservers: Vec<IpAddr>,
}

/// The static network of each control-plane group with an address (by
/// group name), or the errors of the fields when they do not make one.
pub fn control_plane_networks(
    cluster: &Cluster,
) -> Result<BTreeMap<String, StaticNetwork>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let networks = parse(cluster, &mut errors);
    if errors.is_empty() {
        Ok(networks)
    } else {
        Err(errors)
    }
}

fn parse(cluster: &Cluster, errors: &mut Vec<FieldError>) -> BTreeMap<String, StaticNetwork> {
    let Some(config) = cluster.spec.cloud_config.as_ref() else {
        return BTreeMap::new();
    };
    let addresses = config
        .vsphere_control_plane_addresses
        .clone()
        .unwrap_or_default();
    let nameserver_list = config.vsphere_nameservers.clone().unwrap_or_default();
    let gateway_text = config
        .vsphere_gateway
        .as_deref()
        .map(str::trim)
        .filter(|g| !g.is_empty());
    if addresses.is_empty() {
        if gateway_text.is_some() || !nameserver_list.is_empty() {
            errors.push(
                FieldError::new(
                    "spec.cloudConfig.vSphereGateway/vSphereNameservers",
                    format!("are used only with {ADDRESSES_FIELD}, which is empty"),
                )
                .hint("add the control-plane addresses, or remove the gateway and nameservers"),
            );
        }
        return BTreeMap::new();
    }
    let gateway = match gateway_text {
        None => {
            errors.push(
                FieldError::new(
                    GATEWAY_FIELD,
                    "is required with static control-plane addresses",
                )
                .hint("set the default gateway of the addresses' network (--vsphere-gateway)"),
            );
            None
        }
        Some(text) => match text.parse::<IpAddr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                errors.push(
                    FieldError::new(GATEWAY_FIELD, "is not an IP address")
                        .value(text)
                        .hint("write the gateway as an address, e.g. `10.0.0.1`"),
                );
                None
            }
        },
    };
    let mut nameservers = Vec::new();
    if nameserver_list.is_empty() {
        errors.push(
            FieldError::new(
                NAMESERVERS_FIELD,
                "is required with static control-plane addresses (the VMs get no DNS servers from DHCP)",
            )
            .hint("list the network's DNS servers (--vsphere-nameservers)"),
        );
    }
    for (i, text) in nameserver_list.iter().enumerate() {
        match text.trim().parse::<IpAddr>() {
            Ok(ip) => nameservers.push(ip),
            Err(_) => errors.push(
                FieldError::new(format!("{NAMESERVERS_FIELD}[{i}]"), "is not an IP address")
                    .value(text)
                    .hint("list DNS servers as addresses, e.g. `10.0.0.2`"),
            ),
        }
    }
    let vip = config
        .vsphere_control_plane_vip
        .as_deref()
        .and_then(|v| v.trim().parse::<IpAddr>().ok());
    let mut seen: BTreeMap<IpAddr, &str> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (group, text) in &addresses {
        let path = format!("{ADDRESSES_FIELD}.{group}");
        let Some(address) = text.trim().parse::<IpNet>().ok().filter(|a| {
            // A network's own address or (IPv4) its broadcast address
            // is no host's.
            a.prefix_len() >= a.max_prefix_len() - 1
                || (a.addr() != a.network() && a.addr() != a.broadcast())
        }) else {
            errors.push(
                FieldError::new(path, "is not a host address with its prefix length")
                    .value(text)
                    .hint("write it as `IP/prefix`, e.g. `10.0.0.11/24`"),
            );
            continue;
        };
        if let Some(other) = seen.insert(address.addr(), group) {
            errors.push(
                FieldError::new(path, format!("is also the address of group `{other}`"))
                    .value(text)
                    .hint("give each control-plane group its own address"),
            );
            continue;
        }
        if vip == Some(address.addr()) {
            errors.push(
                FieldError::new(
                    path,
                    "is the control plane's virtual IP (vSphereControlPlaneVIP)",
                )
                .value(text)
                .hint(
                    "kube-vip moves the virtual IP between the VMs: give each VM another address",
                ),
            );
            continue;
        }
        let Some(gateway) = gateway else {
            continue;
        };
        if !address.contains(&gateway) {
            errors.push(
                FieldError::new(path, format!("is not in the same network as the gateway `{gateway}`"))
                    .value(text)
                    .hint("use an address of the gateway's network, or fix the prefix length or the gateway"),
            );
            continue;
        }
        out.insert(
            group.clone(),
            StaticNetwork {
                address,
                gateway,
                nameservers: nameservers.clone(),
            },
        );
    }
    out
}

/// What the spec allows but will likely not work: a control-plane
/// virtual IP outside the network of every control-plane address (kube-vip
/// announces it by ARP on the control-plane VMs' network, so elsewhere
/// it is reachable only if routed there).
pub fn warnings(cluster: &Cluster) -> Vec<String> {
    let Ok(networks) = control_plane_networks(cluster) else {
        return Vec::new();
    };
    let vip = cluster
        .spec
        .cloud_config
        .as_ref()
        .and_then(|c| c.vsphere_control_plane_vip.as_deref())
        .and_then(|v| v.trim().parse::<IpAddr>().ok());
    match vip {
        Some(vip)
            if !networks.is_empty() && !networks.values().any(|n| n.address.contains(&vip)) =>
        {
            let nets: std::collections::BTreeSet<String> = networks
                .values()
                .map(|n| n.address.trunc().to_string())
                .collect();
            vec![format!(
                "spec.cloudConfig.vSphereControlPlaneVIP `{vip}` is outside the control-plane VMs' network ({}): kube-vip announces it by ARP there, so nodes reach it only if it is routed to that network",
                nets.into_iter().collect::<Vec<_>>().join(", ")
            )]
        }
        _ => Vec::new(),
    }
}

/// The checks of the fields on their own (no instance groups needed).
pub fn validate_cluster(cluster: &Cluster, errors: &mut Vec<FieldError>) {
    parse(cluster, errors);
}

/// The checks against the instance groups: each address names a
/// control-plane group of one VM, and every control-plane group holding
/// a member of an etcd cluster with more than one member has an address.
pub fn validate_groups(cluster: &Cluster, groups: &[InstanceGroup], errors: &mut Vec<FieldError>) {
    let addresses = cluster
        .spec
        .cloud_config
        .as_ref()
        .and_then(|c| c.vsphere_control_plane_addresses.clone())
        .unwrap_or_default();
    let control_plane: Vec<&str> = groups
        .iter()
        .filter(|g| g.is_control_plane())
        .map(|g| g.name())
        .collect();
    for name in addresses.keys() {
        let path = format!("{ADDRESSES_FIELD}.{name}");
        match groups.iter().find(|g| g.name() == name) {
            Some(group) if group.is_control_plane() => {
                let size = group.spec.max_size.or(group.spec.min_size).unwrap_or(1);
                if size > 1 {
                    errors.push(
                        FieldError::new(
                            path,
                            format!("gives one address to group `{name}`, which may have {size} VMs"),
                        )
                        .hint("a control-plane group with a static address holds one VM: set its minSize and maxSize to 1"),
                    );
                }
            }
            _ => errors.push(
                FieldError::new(path, "names no control-plane instance group").hint(format!(
                    "key the addresses by control-plane group: {}",
                    control_plane.join(", ")
                )),
            ),
        }
    }
    for etcd in cluster.spec.etcd_clusters.iter().flatten() {
        if etcd.etcd_members.len() < 2 {
            continue;
        }
        let missing: Vec<&str> = etcd
            .etcd_members
            .iter()
            .filter_map(|m| m.instance_group.as_deref())
            .filter(|g| !addresses.contains_key(*g))
            .collect();
        if !missing.is_empty() {
            errors.push(
                FieldError::new(
                    ADDRESSES_FIELD,
                    format!(
                        "has no address for {}: etcd `{}` has {} members, which find each other at static addresses on vSphere",
                        missing
                            .iter()
                            .map(|g| format!("`{g}`"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        etcd.name,
                        etcd.etcd_members.len()
                    ),
                )
                .hint(ADDRESSES_HINT),
            );
            // One line for all etcd clusters: they share the groups.
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::CloudConfiguration;

    fn cluster(addresses: &[(&str, &str)], gateway: Option<&str>, dns: &[&str]) -> Cluster {
        let mut c = Cluster::new("c.example.com");
        c.spec.cloud_provider = Some("vsphere".into());
        c.spec.cloud_config = Some(CloudConfiguration {
            vsphere_control_plane_vip: Some("10.0.0.100".into()),
            vsphere_control_plane_addresses: Some(
                addresses
                    .iter()
                    .map(|(g, a)| (g.to_string(), a.to_string()))
                    .collect(),
            ),
            vsphere_gateway: gateway.map(str::to_string),
            vsphere_nameservers: Some(dns.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        });
        c
    }

    fn messages(c: &Cluster) -> Vec<String> {
        let mut errors = Vec::new();
        validate_cluster(c, &mut errors);
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn parses_the_addresses() {
        let c = cluster(
            &[("cp-1", "10.0.0.11/24"), ("cp-2", "10.0.0.12/24")],
            Some("10.0.0.1"),
            &["10.0.0.2"],
        );
        let networks = control_plane_networks(&c).unwrap();
        assert_eq!(networks["cp-2"].address.to_string(), "10.0.0.12/24");
        assert_eq!(networks["cp-1"].gateway.to_string(), "10.0.0.1");
        assert_eq!(networks["cp-1"].nameservers.len(), 1);
    }

    #[test]
    fn refuses_bad_fields_one_line_each() {
        let c = cluster(
            &[
                ("a", "10.0.0.11"),
                ("b", "10.0.1.12/24"),
                ("c", "10.0.0.100/24"),
                ("d", "10.0.0.13/24"),
                ("e", "10.0.0.13/24"),
                ("f", "10.0.0.0/24"),
            ],
            None,
            &["dns"],
        );
        let lines = messages(&c);
        let has = |field: &str, message: &str| {
            lines.iter().any(|l| {
                l.starts_with(&format!("spec.cloudConfig.{field}:")) && l.contains(message)
            })
        };
        assert!(has("vSphereGateway", "is required"), "{lines:?}");
        assert!(
            has("vSphereNameservers[0]", "is not an IP address"),
            "{lines:?}"
        );
        assert!(
            has("vSphereControlPlaneAddresses.a", "is not a host address"),
            "{lines:?}"
        );
        assert!(
            has("vSphereControlPlaneAddresses.f", "is not a host address"),
            "{lines:?}"
        );
        assert!(
            has(
                "vSphereControlPlaneAddresses.c",
                "is the control plane's virtual IP"
            ),
            "{lines:?}"
        );
        assert!(
            has(
                "vSphereControlPlaneAddresses.e",
                "is also the address of group `d`"
            ),
            "{lines:?}"
        );
        assert_eq!(lines.len(), 6, "{lines:?}");
        let c = cluster(&[("b", "10.0.1.12/24")], Some("10.0.0.1"), &["10.0.0.2"]);
        assert!(messages(&c)[0].contains("not in the same network as the gateway"));
        let c = cluster(&[], Some("10.0.0.1"), &[]);
        assert!(messages(&c)[0].contains("are used only with"));
    }

    #[test]
    fn warns_of_a_vip_outside_the_control_plane_network() {
        let c = cluster(&[("cp-1", "10.0.0.11/24")], Some("10.0.0.1"), &["10.0.0.2"]);
        assert!(warnings(&c).is_empty());
        let c = cluster(&[("cp-1", "10.1.0.11/24")], Some("10.1.0.1"), &["10.1.0.2"]);
        let w = warnings(&c);
        assert!(
            w[0].contains("`10.0.0.100` is outside") && w[0].contains("10.1.0.0/24"),
            "{w:?}"
        );
    }
}
