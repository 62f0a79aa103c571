//! What a vSphere cluster's instance groups ask for: each group's VMs
//! (size, template, boot disk, static network) and the etcd data disks of
//! its control-plane groups, as kops-vsphere's [`GroupSpec`]s.

use std::collections::BTreeMap;

use kops_api::vsphere::StaticNetwork;
use kops_api::{Cluster, InstanceGroup, Role};
use kops_vsphere::cluster::{self, GroupSpec};
use kops_vsphere::disks::EtcdVolume;

use crate::settings::spec_error;
use crate::ModelError;

/// A group's VM size from its machine type (`<cpus>cpu-<memory>gb`).
fn group_size(group: &InstanceGroup) -> Result<(u32, u64), ModelError> {
    let machine = group
        .spec
        .machine_type
        .as_deref()
        .unwrap_or(kops_api::new_cluster::VSPHERE_DEFAULT_MACHINE_TYPE);
    kops_api::new_cluster::vsphere_machine_type(machine).ok_or_else(|| {
        spec_error(
            &format!("instance group `{}` spec.machineType", group.name()),
            &format!("`{machine}` is not a vSphere machine size"),
            "size vSphere VMs as `<cpus>cpu-<memory>gb`, e.g. `2cpu-4gb`",
        )
    })
}

/// A group's boot disk size in GiB (`spec.rootVolume.size`, else kops'
/// older `rootVolumeSize`); `None` keeps the template's.
fn root_disk_gib(group: &InstanceGroup) -> Result<Option<u64>, ModelError> {
    let size = group
        .spec
        .root_volume
        .as_ref()
        .and_then(|r| r.size)
        .or(group.spec.root_volume_size);
    size.map(|s| {
        u64::try_from(s).ok().filter(|s| *s > 0).ok_or_else(|| {
            spec_error(
                &format!("instance group `{}` spec.rootVolume.size", group.name()),
                &format!("`{s}` is not a disk size"),
                "give the boot disk's size in GiB, or leave it unset to keep the template's",
            )
        })
    })
    .transpose()
}

/// The etcd data disks of a control-plane group: one per etcd cluster
/// with a member on the group (`etcdMembers[].instanceGroup`), sized as
/// the member's `volumeSize` (kops' default 20 GiB). A member is one VM,
/// so such a group must have one VM.
fn etcd_volumes(
    cluster: &Cluster,
    group: &InstanceGroup,
    networks: &BTreeMap<String, StaticNetwork>,
) -> Result<Vec<EtcdVolume>, ModelError> {
    if group.role() != Some(Role::ControlPlane) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for etcd in cluster.spec.etcd_clusters.iter().flatten() {
        let Some(member) = etcd
            .etcd_members
            .iter()
            .find(|m| m.instance_group.as_deref() == Some(group.name()))
        else {
            continue;
        };
        let size = member
            .volume_size
            .unwrap_or(i64::from(kops_model::compute::DEFAULT_ETCD_VOLUME_SIZE));
        out.push(EtcdVolume {
            etcd: etcd.name.clone(),
            member: member.name.clone(),
            members: etcd.etcd_members.iter().map(|m| m.name.clone()).collect(),
            // Every member's group has an address, or none is listed (a
            // single member on DHCP; validation refuses more without).
            addresses: etcd
                .etcd_members
                .iter()
                .map(|m| {
                    Some(
                        networks
                            .get(m.instance_group.as_deref()?)?
                            .address
                            .addr()
                            .to_string(),
                    )
                })
                .collect::<Option<Vec<String>>>()
                .unwrap_or_default(),
            version: kops_model::files::etcd_version(cluster, etcd.version.as_deref()),
            size_gib: u64::try_from(size).ok().filter(|s| *s > 0).ok_or_else(|| {
                spec_error(
                    &format!(
                        "spec.etcdClusters[{}].etcdMembers[{}].volumeSize",
                        etcd.name, member.name
                    ),
                    &format!("`{size}` is not a disk size"),
                    "give the etcd disk's size in GiB (kops' default is 20)",
                )
            })?,
        });
    }
    if !out.is_empty() && group.spec.min_size.unwrap_or(0) > 1 {
        return Err(spec_error(
            &format!("instance group `{}` spec.minSize", group.name()),
            "is more than 1, but the group holds one etcd member (one etcd disk set per VM)",
            "make one control-plane group per etcd member, each with minSize 1, as `kops create cluster --control-plane-count` does",
        ));
    }
    Ok(out)
}

/// The groups as GroupSpecs without user data (enough to look up their
/// templates).
pub fn group_specs(
    cluster: &Cluster,
    groups: &[InstanceGroup],
) -> Result<Vec<GroupSpec>, ModelError> {
    let networks = kops_api::vsphere::control_plane_networks(cluster).map_err(ModelError::Spec)?;
    groups
        .iter()
        .filter(|g| g.role() != Some(Role::Bastion))
        .map(|g| {
            let (cpus, memory_mb) = group_size(g)?;
            let template = g
                .spec
                .image
                .clone()
                .filter(|i| !i.is_empty())
                .ok_or_else(|| {
                    spec_error(
                        &format!("instance group `{}` spec.image", g.name()),
                        "names no template VM",
                        "set it to a template VM of the datacenter (`kops edit ig`)",
                    )
                })?;
            Ok(GroupSpec {
                name: g.name().to_string(),
                role: g.role().unwrap_or(Role::Node).as_str().to_string(),
                template,
                count: usize::try_from(g.spec.min_size.unwrap_or(0).max(0)).unwrap_or(0),
                cpus,
                memory_mb,
                user_data: String::new(),
                root_disk_gib: root_disk_gib(g)?,
                etcd: etcd_volumes(cluster, g, &networks)?,
                network: networks.get(g.name()).map(|n| cluster::StaticNetwork {
                    address: n.address.to_string(),
                    gateway: n.gateway.to_string(),
                    nameservers: n.nameservers.iter().map(ToString::to_string).collect(),
                }),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::cluster;

    #[test]
    fn control_plane_groups_get_etcd_disks_and_groups_their_disk_size() {
        let c = cluster(
            "    vSphereServer: vc\n  etcdClusters:\n  - {name: main, etcdMembers: [{name: a, instanceGroup: cp-a, volumeSize: 8}, {name: b, instanceGroup: cp-b}]}\n  - {name: events, etcdMembers: [{name: a, instanceGroup: cp-a}, {name: b, instanceGroup: cp-b}]}\n",
        );
        let group = |yaml: &str| -> InstanceGroup {
            serde_yaml_ng::from_str(&format!(
                "apiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata:\n  name: cp-a\nspec:\n{yaml}"
            ))
            .unwrap()
        };
        let cp = group("  role: Master\n  minSize: 1\n  rootVolume: {size: 60}\n");
        let none = BTreeMap::new();
        let volumes = etcd_volumes(&c, &cp, &none).unwrap();
        let summary: Vec<(&str, &str, u64)> = volumes
            .iter()
            .map(|v| (v.etcd.as_str(), v.member.as_str(), v.size_gib))
            .collect();
        assert_eq!(summary, [("main", "a", 8), ("events", "a", 20)]);
        assert_eq!(volumes[0].members, ["a", "b"]);
        assert!(volumes[0].addresses.is_empty());
        // With the groups' static addresses, every member's is listed.
        let c = cluster(
            "    vSphereServer: vc\n    vSphereControlPlaneAddresses: {cp-a: 10.0.0.11/24, cp-b: 10.0.0.12/24}\n    vSphereGateway: 10.0.0.1\n    vSphereNameservers: [10.0.0.2]\n  etcdClusters:\n  - {name: main, etcdMembers: [{name: a, instanceGroup: cp-a}, {name: b, instanceGroup: cp-b}]}\n",
        );
        let networks = kops_api::vsphere::control_plane_networks(&c).unwrap();
        let volumes = etcd_volumes(&c, &cp, &networks).unwrap();
        assert_eq!(volumes[0].addresses, ["10.0.0.11", "10.0.0.12"]);
        let specs = group_specs(
            &c,
            &[group("  role: Master\n  minSize: 1\n  image: tmpl\n")],
        )
        .unwrap();
        let network = specs[0].network.as_ref().unwrap();
        assert_eq!(
            (network.address.as_str(), network.gateway.as_str()),
            ("10.0.0.11/24", "10.0.0.1")
        );
        assert_eq!(root_disk_gib(&cp).unwrap(), Some(60));
        // Workers get no etcd disk; kops' older rootVolumeSize is read too.
        let worker = group("  role: Node\n  rootVolumeSize: 50\n");
        assert!(etcd_volumes(&c, &worker, &none).unwrap().is_empty());
        assert_eq!(root_disk_gib(&worker).unwrap(), Some(50));
        // One member is one VM.
        let e = etcd_volumes(&c, &group("  role: Master\n  minSize: 3\n"), &none)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cp-a")
                && e.contains("minSize")
                && e.contains("one control-plane group per etcd member"),
            "{e}"
        );
        let e = root_disk_gib(&group("  role: Node\n  rootVolume: {size: 0}\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("spec.rootVolume.size"), "{e}");
    }
}
