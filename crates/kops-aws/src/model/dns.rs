//! The cluster's names in Route 53, when it publishes DNS records (not
//! gossip, not DNS `None`) and its API is behind a load balancer: alias
//! records `api.<cluster>` (A and AAAA) at the API load balancer (Network,
//! or Classic for a cluster kops 1.36 or earlier made), and
//! `api.internal.<cluster>` too when the load balancer is also used for
//! the internal API (`useForInternalAPI`). Without a load balancer the API
//! records are dns-controller's, in the cluster. With private DNS
//! (`topology.dns: Private`) the zone is associated with the cluster's VPC
//! (kops' `aws_route53_zone_association`, named after the zone), so the
//! instances resolve its records.
//!
//! The zone is `spec.dnsZone`; `update cluster` resolves a zone name (or the
//! default, the longest zone suffix of the cluster name) to its id before
//! building the model, so here it is normally an id.

use crate::tasks::dns_name::DnsName;
use crate::tasks::hosted_zone_association::HostedZoneAssociation;
use crate::tasks::network_load_balancer::LoadBalancerOutput;
use crate::AwsContext;
use kops_engine::{OutputRef, TaskGraph};

use crate::model::network::vpc_ref;
use crate::tasks::classic_load_balancer::ClassicLoadBalancer;
use crate::tasks::network_load_balancer::NetworkLoadBalancer;
use kops_model::api_load_balancer::{load_balancer_name, uses_classic};
pub use kops_model::dns::*;
use kops_model::{Model, ModelError};

/// Adds the alias records of `name` (A and AAAA) at `target`.
pub fn alias_records(
    graph: &mut TaskGraph<AwsContext>,
    zone: &str,
    name: &str,
    target: &OutputRef<LoadBalancerOutput>,
) -> Result<(), ModelError> {
    for (record_type, suffix) in [("A", ""), ("AAAA", "-AAAA")] {
        graph.ensure(DnsName {
            name: format!("{name}{suffix}"),
            record_name: name.to_string(),
            record_type: record_type.to_string(),
            zone_id: zone.to_string(),
            target: target.clone(),
        })?;
    }
    Ok(())
}

/// The API load balancer's output (DNS name, hosted zone), whichever its
/// class: what the API's alias records point at.
pub fn api_load_balancer_ref(model: &Model<'_>) -> OutputRef<LoadBalancerOutput> {
    if uses_classic(model) {
        ClassicLoadBalancer::output_ref(&load_balancer_name(model))
    } else {
        NetworkLoadBalancer::output_ref(&load_balancer_name(model))
    }
}

/// Adds the private zone's association with the cluster's VPC, and the
/// API records.
pub fn build(model: &Model<'_>, graph: &mut TaskGraph<AwsContext>) -> Result<(), ModelError> {
    if !model.publishes_dns_records() {
        return Ok(());
    }
    if model.dns_type() == "Private" {
        let zone = zone(model);
        graph.ensure(HostedZoneAssociation {
            name: zone.clone(),
            zone,
            vpc: vpc_ref(model),
        })?;
    }
    let Some(lb) = api_load_balancer(model) else {
        return Ok(());
    };
    let zone = zone(model);
    // A Network Load Balancer, or the Classic ELB of an older cluster.
    let target = api_load_balancer_ref(model);
    alias_records(graph, &zone, &api_public_name(model), &target)?;
    if lb.use_for_internal_api == Some(true) {
        alias_records(graph, &zone, &api_internal_name(model), &target)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::security::tests::{load, model, PUBLIC};

    fn associations(yaml: &str) -> Vec<HostedZoneAssociation> {
        let (cluster, groups) = load(yaml);
        let m = model(&cluster, &groups);
        let mut graph = TaskGraph::new();
        build(&m, &mut graph).unwrap();
        graph
            .iter()
            .filter_map(|(_, t)| t.as_any().downcast_ref::<HostedZoneAssociation>())
            .cloned()
            .collect()
    }

    #[test]
    fn a_private_zone_is_associated_with_the_cluster_vpc() {
        let yaml = PUBLIC.replace(
            "  networkCIDR:",
            "  dnsZone: internal.example.com\n  topology: {dns: {type: Private}}\n  networkCIDR:",
        );
        let found = associations(&yaml);
        assert_eq!(found.len(), 1);
        // Named after the zone, as kops' DNSZone task (Terraform
        // `aws_route53_zone_association.internal-example-com`).
        assert_eq!(found[0].name, "internal.example.com");
        assert_eq!(found[0].zone, "internal.example.com");
        assert_eq!(found[0].vpc.key().name, "pub.example.com");

        // Resolved to an id by `update cluster`.
        let resolved = yaml.replace("internal.example.com", "/hostedzone/Z2AFAKE1ZON3NO");
        assert_eq!(associations(&resolved)[0].zone, "Z2AFAKE1ZON3NO");
    }

    #[test]
    fn public_and_none_dns_associate_nothing() {
        assert!(associations(PUBLIC).is_empty());
        let none = PUBLIC.replace(
            "  networkCIDR:",
            "  topology: {dns: {type: None}}\n  networkCIDR:",
        );
        assert!(associations(&none).is_empty());
    }
}
