//! The network, its subnetworks and the NAT router of private ones.

use std::collections::BTreeMap;

use kops_api::SubnetType;
use kops_engine::TaskGraph;
use kops_model::ModelError;

use super::GceModel;
use crate::names;
use crate::tasks::{GceContext, Network, Router, Subnet};

pub fn build(gce: &GceModel<'_>, graph: &mut TaskGraph<GceContext>) -> Result<(), ModelError> {
    let (name, project) = gce.network_name_and_project();
    let shared = gce
        .model
        .cluster
        .spec
        .network_id
        .as_deref()
        .is_some_and(|id| !id.is_empty());
    graph.add(Network {
        name,
        project,
        shared,
    })?;

    let ipv6 = gce.model.ipv6_only();
    let spec = &gce.model.cluster.spec;
    let mut nat_subnets = Vec::new();
    for (index, subnet) in gce.subnets().iter().enumerate() {
        let mut secondary_ranges = BTreeMap::new();
        if gce.uses_ip_alias() {
            let cluster = gce.cluster_name();
            if let Some(pods) = &spec.pod_cidr {
                secondary_ranges.insert(names::suffixed("pods", cluster), pods.clone());
            }
            if let Some(services) = &spec.service_cluster_ip_range {
                secondary_ranges.insert(names::suffixed("services", cluster), services.clone());
            }
        }
        let shared_subnet = subnet.id.as_deref().is_some_and(|id| !id.is_empty());
        graph.add(Subnet {
            name: gce.subnet_name(subnet),
            network: gce.network_key(),
            region: gce.region.to_string(),
            cidr: subnet.cidr.clone(),
            stack_type: if ipv6 { "IPV4_IPV6" } else { "IPV4_ONLY" }.to_string(),
            ipv6_access_type: ipv6.then(|| "EXTERNAL".to_string()),
            secondary_ranges,
            shared: shared_subnet,
        })?;

        let private = matches!(
            subnet.subnet_type(),
            Some(SubnetType::Private) | Some(SubnetType::DualStack)
        );
        if !private || shared_subnet {
            continue;
        }
        match subnet.egress.as_deref() {
            Some("External") => {}
            None | Some("") | Some("NatGateway") => nat_subnets.push(gce.subnet_key(subnet)),
            Some(other) => {
                return Err(GceModel::error(
                    format!("spec.subnets[{index}].egress"),
                    format!("egress `{other}` is not supported on GCE"),
                    "leave it empty (Cloud NAT) or set it to `External`",
                ))
            }
        }
    }
    if !nat_subnets.is_empty() {
        graph.add(Router {
            name: names::suffixed("nat", gce.cluster_name()),
            network: gce.network_key(),
            region: gce.region.to_string(),
            nat_ip_allocate_option: "AUTO_ONLY".into(),
            source_subnetwork_ip_ranges_to_nat: "LIST_OF_SUBNETWORKS".into(),
            subnetworks: nat_subnets,
        })?;
    }
    Ok(())
}
