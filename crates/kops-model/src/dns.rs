//! The cluster's DNS names and zone (the Route 53 records are
//! `kops_aws::model::dns`'s).

use crate::Model;

/// The API's public name: `spec.api.publicName`, else `api.<cluster>`.
pub fn api_public_name(model: &Model<'_>) -> String {
    model
        .cluster
        .spec
        .api
        .as_ref()
        .and_then(|a| a.public_name.clone())
        .unwrap_or_else(|| model.scoped("api"))
}

/// The API's internal name: `api.internal.<cluster>`.
pub fn api_internal_name(model: &Model<'_>) -> String {
    model.scoped("api.internal")
}

/// The hosted zone records go to: `spec.dnsZone` (an id once resolved),
/// else the cluster name's parent domain (the zone's name, for an offline
/// render; `update cluster` resolves the real zone first).
pub fn zone(model: &Model<'_>) -> String {
    match model.cluster.spec.dns_zone.as_deref() {
        Some(z) => z.trim_start_matches("/hostedzone/").to_string(),
        None => model
            .name()
            .split_once('.')
            .map_or(model.name(), |(_, parent)| parent)
            .to_string(),
    }
}

/// Whether `update cluster` must resolve a hosted zone for this cluster.
pub fn needs_zone(model: &Model<'_>) -> bool {
    let bastion_name = model
        .cluster
        .spec
        .topology
        .as_ref()
        .and_then(|t| t.bastion.as_ref())
        .is_some_and(|b| b.bastion_public_name.is_some());
    model.publishes_dns_records() && (api_load_balancer(model).is_some() || bastion_name)
}

/// `spec.api.loadBalancer`, when the API is behind a load balancer.
pub fn api_load_balancer<'a>(
    model: &Model<'a>,
) -> Option<&'a kops_api::cluster::LoadBalancerAccessSpec> {
    model
        .cluster
        .spec
        .api
        .as_ref()
        .and_then(|a| a.load_balancer.as_ref())
}
