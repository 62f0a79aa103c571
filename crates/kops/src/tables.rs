//! Table cells kops prints for clusters and instance groups (`get`, `validate`).

use kops_api::{Cluster, InstanceGroup, Role};

use crate::output::Table;

pub fn cluster_zones(c: &Cluster) -> String {
    let mut zones: Vec<&str> = c
        .spec
        .subnets
        .iter()
        .flatten()
        .filter_map(|s| s.zone.as_deref().or(s.region.as_deref()))
        .collect();
    zones.sort();
    zones.dedup();
    zones.join(",")
}

pub fn group_zones(ig: &InstanceGroup, cluster: &Cluster) -> String {
    let subnets = cluster.spec.subnets.as_deref().unwrap_or_default();
    let mut zones: Vec<String> = ig
        .spec
        .subnets
        .iter()
        .flatten()
        .map(|name| {
            subnets
                .iter()
                .find(|s| &s.name == name)
                .and_then(|s| s.zone.clone())
                .unwrap_or_else(|| name.clone())
        })
        .chain(ig.spec.zones.iter().flatten().cloned())
        .collect();
    zones.sort();
    zones.dedup();
    zones.join(",")
}

pub fn groups_table(groups: &[InstanceGroup], cluster: &Cluster) -> String {
    let mut t = Table::new(&["NAME", "ROLE", "MACHINETYPE", "MIN", "MAX", "ZONES"]);
    for g in groups {
        t.row(vec![
            g.name().to_string(),
            g.role()
                .map(|r| {
                    if r == Role::ControlPlane {
                        "ControlPlane"
                    } else {
                        r.as_str()
                    }
                })
                .unwrap_or("")
                .to_string(),
            g.spec.machine_type.clone().unwrap_or_default(),
            g.spec.min_size.map(|v| v.to_string()).unwrap_or_default(),
            g.spec.max_size.map(|v| v.to_string()).unwrap_or_default(),
            group_zones(g, cluster),
        ]);
    }
    t.render()
}
