//! `kops toolbox clusterapi generate machinedeployment`: Cluster API
//! objects that add nodes to a kops cluster on GCE: a `KopsConfigTemplate`
//! (bootstrap), a `GCPMachineTemplate` (the machines) and one
//! `MachineDeployment` per zone, the replicas spread over the zones.

use std::collections::BTreeSet;

use kops_api::{Cluster, InstanceGroup};
use serde_json::{json, Value};

use crate::{flag_error, OpsError};

/// What to generate; the empty fields are taken from the cluster's groups.
#[derive(Debug, Clone, Default)]
pub struct MachineDeploymentRequest {
    pub name: String,
    pub namespace: String,
    pub replicas: u32,
    pub zones: Vec<String>,
    pub instance_type: Option<String>,
    pub subnet: Option<String>,
    pub image: Option<String>,
}

/// The objects (and, one line each, the choices made for unset fields).
pub fn machine_deployment(
    cluster: &Cluster,
    groups: &[InstanceGroup],
    request: &MachineDeploymentRequest,
) -> Result<(Vec<Value>, Vec<String>), OpsError> {
    let name = cluster.name();
    let mut notes = Vec::new();
    if request.name.is_empty() {
        return Err(flag_error(
            "--name",
            "name is required",
            "name the MachineDeployment: `--name NAME` (the cluster with `--cluster`)",
        ));
    }
    // The first in sorted order, as kops picks "an arbitrary" one.
    let pick =
        |what: &str, given: &Option<String>, all: BTreeSet<String>, notes: &mut Vec<String>| {
            if let Some(v) = given.clone().filter(|v| !v.is_empty()) {
                return Ok(v);
            }
            let first = all.iter().next().cloned().ok_or_else(|| {
                flag_error(
                    &format!("--{what}"),
                    &format!("no {what} found in cluster `{name}`"),
                    &format!("pass --{what}"),
                )
            })?;
            if all.len() > 1 {
                notes.push(format!(
                    "multiple values of {what} in cluster `{name}`; using {first}"
                ));
            }
            Ok::<_, OpsError>(first)
        };
    let subnet = pick(
        "subnet",
        &request.subnet,
        cluster
            .spec
            .subnets
            .iter()
            .flatten()
            .map(|s| s.name.clone())
            .collect(),
        &mut notes,
    )?;
    let mut zones = request.zones.clone();
    if zones.is_empty() {
        zones = groups
            .iter()
            .flat_map(|g| g.spec.zones.clone().unwrap_or_default())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if zones.is_empty() {
            return Err(flag_error(
                "--zones",
                &format!("no zones found in instance groups in cluster `{name}`"),
                "pass --zones",
            ));
        }
    }
    let instance_type = pick(
        "instance-type",
        &request.instance_type,
        groups
            .iter()
            .filter_map(|g| g.spec.machine_type.clone())
            .filter(|m| !m.is_empty())
            .collect(),
        &mut notes,
    )?;
    let image = pick(
        "image",
        &request.image,
        groups
            .iter()
            .filter_map(|g| g.spec.image.clone())
            .filter(|m| !m.is_empty())
            .collect(),
        &mut notes,
    )?;
    let safe = name.replace('.', "-");
    let namespace = if request.namespace.is_empty() {
        "kube-system"
    } else {
        &request.namespace
    };
    let image = match image.split('/').collect::<Vec<_>>().as_slice() {
        [project, image] => format!("projects/{project}/global/images/{image}"),
        _ => image,
    };
    let role_tag = {
        let suffix = "-k8s-io-role-node";
        format!(
            "{}{suffix}",
            kops_model::iam::truncate_with_hash(&safe, 63 - suffix.len())
        )
    };
    let subnet_name = {
        let prefix = format!("{subnet}-");
        format!(
            "{prefix}{}",
            kops_model::iam::truncate_with_hash(&safe, 63usize.saturating_sub(prefix.len()))
        )
    };
    let config = json!({
        "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1",
        "kind": "KopsConfigTemplate",
        "metadata": {"name": request.name, "namespace": namespace},
        "spec": {"template": {"spec": {}}},
    });
    let machine = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "GCPMachineTemplate",
        "metadata": {"name": request.name, "namespace": namespace},
        "spec": {"template": {"spec": {
            "additionalMetadata": [{"key": "cluster-name", "value": name}],
            "additionalNetworkTags": [role_tag],
            "image": image,
            "instanceType": instance_type,
            "publicIP": true,
            "subnet": subnet_name,
        }}},
    });
    let reference = |v: &Value| {
        json!({
            "apiVersion": v["apiVersion"],
            "kind": v["kind"],
            "name": v["metadata"]["name"],
        })
    };
    let count = zones.len() as u32;
    let mut objects = vec![config.clone(), machine.clone()];
    let mut deployments: Vec<Value> = zones
        .iter()
        .enumerate()
        .map(|(i, zone)| {
            // An even share, the remainder to the first zones.
            let replicas =
                request.replicas / count + u32::from((i as u32) < request.replicas % count);
            json!({
                "apiVersion": "cluster.x-k8s.io/v1beta1",
                "kind": "MachineDeployment",
                "metadata": {"name": format!("{}-{zone}", request.name), "namespace": namespace},
                "spec": {
                    "clusterName": safe,
                    "replicas": replicas,
                    "template": {"spec": {
                        "bootstrap": {"configRef": reference(&config)},
                        "clusterName": safe,
                        "failureDomain": zone,
                        "infrastructureRef": reference(&machine),
                        "version": cluster.spec.kubernetes_version.clone().unwrap_or_default(),
                    }},
                },
            })
        })
        .collect();
    deployments.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    objects.extend(deployments);
    Ok((objects, notes))
}
