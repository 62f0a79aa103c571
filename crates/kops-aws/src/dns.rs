//! Finding the Route 53 hosted zone a cluster publishes its records in,
//! before the graph is built: `spec.dnsZone` as a zone id, as a zone name,
//! or (when unset) the zone whose name is the longest suffix of the
//! cluster name. Public or private as `spec.networking.topology.dns` says.

use aws_sdk_route53::types::HostedZone;

use crate::context::{classify, is_transient};
use crate::tasks::dns_name::normalise_dns_name;
use crate::AwsCloud;

/// A hosted zone: its id (without `/hostedzone/`) and name (no trailing dot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    pub id: String,
    pub name: String,
}

/// Why no zone could be used.
#[derive(Debug, thiserror::Error)]
pub enum ZoneError {
    #[error("no {visibility} Route 53 hosted zone {wanted}\nhint: create the hosted zone, set `spec.dnsZone` to its name or id, or use gossip DNS (a cluster name ending in `.k8s.local`) or `spec.networking.topology.dns.type: None`")]
    NotFound {
        visibility: &'static str,
        wanted: String,
    },
    #[error("{count} {visibility} Route 53 hosted zones are named `{name}`\nhint: set `spec.dnsZone` to the id (`Z...`) of the one to use")]
    Ambiguous {
        visibility: &'static str,
        name: String,
        count: usize,
    },
    #[error("{0}")]
    Call(String),
}

fn strip_id(id: &str) -> String {
    id.trim_start_matches("/hostedzone/").to_string()
}

fn zone_of(z: &HostedZone) -> Zone {
    Zone {
        id: strip_id(z.id()),
        name: normalise_dns_name(z.name()),
    }
}

/// The zone of `cluster` (see the module docs). One Route 53 call: a
/// `GetHostedZone` for an id, else one paginated `ListHostedZones`; asked
/// again while Route 53's answer is retryable (it runs before the graph,
/// whose tasks the executor would retry).
pub async fn find_hosted_zone(
    cloud: &AwsCloud,
    cluster: &str,
    dns_zone: Option<&str>,
    private: bool,
) -> Result<Zone, ZoneError> {
    let visibility = if private { "private" } else { "public" };
    let route53 = cloud.route53();
    if let Some(id) = dns_zone.filter(|z| !z.contains('.')) {
        let out = crate::retrying("GetHostedZone", is_transient, || {
            route53.get_hosted_zone().id(strip_id(id)).send()
        })
        .await
        .map_err(|e| match classify("GetHostedZone", id, e) {
            e if e.to_string().contains("NoSuchHostedZone") => ZoneError::NotFound {
                visibility,
                wanted: format!("with id `{id}`"),
            },
            e => ZoneError::Call(e.to_string()),
        })?;
        return out.hosted_zone().map(zone_of).ok_or(ZoneError::NotFound {
            visibility,
            wanted: format!("with id `{id}`"),
        });
    }
    let zones: Vec<HostedZone> = crate::retrying("ListHostedZones", is_transient, || {
        route53
            .list_hosted_zones()
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| ZoneError::Call(classify("ListHostedZones", cluster, e).to_string()))?;
    let is_private = |z: &HostedZone| z.config().is_some_and(|c| c.private_zone());
    let candidates = zones.iter().filter(|z| is_private(z) == private);
    let wanted = dns_zone.map(normalise_dns_name);
    let cluster = normalise_dns_name(cluster);
    let matching: Vec<&HostedZone> = match &wanted {
        Some(name) => candidates
            .filter(|z| normalise_dns_name(z.name()) == *name)
            .collect(),
        None => {
            let suffix_len = |z: &HostedZone| {
                let name = normalise_dns_name(z.name());
                (cluster == name || cluster.ends_with(&format!(".{name}"))).then_some(name.len())
            };
            let best = candidates.clone().filter_map(suffix_len).max();
            candidates
                .filter(|z| best.is_some() && suffix_len(z) == best)
                .collect()
        }
    };
    match matching.as_slice() {
        [one] => Ok(zone_of(one)),
        [] => Err(ZoneError::NotFound {
            visibility,
            wanted: match wanted {
                Some(name) => format!("named `{name}`"),
                None => format!("for `{cluster}` (a zone whose name ends the cluster name)"),
            },
        }),
        many => Err(ZoneError::Ambiguous {
            visibility,
            name: normalise_dns_name(many[0].name()),
            count: many.len(),
        }),
    }
}
