//! `kops delete cluster` on Google Cloud: the cluster's resources found
//! as kops finds them (`pkg/resources/gce`), then deleted in dependency
//! order, a phase at a time, retrying what Google says is still in use.
//!
//! How each kind is recognised:
//! - instance templates by their `cluster-name` metadata; the managed
//!   instance groups using one of them, and the groups' instances;
//! - disks by the `k8s-io-cluster-name` label;
//! - target pools (with their HTTP health checks), forwarding rules,
//!   addresses and routers by kops' name shapes: `<prefix>-<cluster>` with
//!   dots as dashes, or a name holding the cluster name's 6-character hash;
//! - firewall rules by that name shape (at most 5 prefix tokens) whose
//!   target tags are all the cluster's; the `k8s-*-node-http-hc` rules of
//!   the cluster's tags too;
//! - the load balancers of the cluster's Kubernetes Services (made by the
//!   GCP cloud controller manager): a `k8s-fw-<name>` firewall rule of the
//!   cluster's tags, its forwarding rule `<name>`, target pool and `k8s-`
//!   HTTP health checks (see [`service_load_balancers`]);
//! - subnetworks and the network by name, when an instance template of
//!   the cluster uses them; the spec's `networkID` and subnet ids are
//!   listed as shared and kept;
//! - regional backend services whose backends are all the cluster's
//!   groups, and the health checks they use;
//! - routes named `<cluster>-<uuid>` whose next hop is an instance being
//!   deleted or gone;
//! - service accounts `control-plane-`, `node-`, `bastion-<cluster>`;
//! - the A records `api.`, `api.internal.` and `bastion.<cluster>.` in the
//!   Cloud DNS zones the cluster name is in (unless DNS is `None`).
//!
//! kops leaves the project's IAM bindings and the state bucket's members
//! as they are; so does this.
//!
//! Listing is two rounds of parallel calls (every collection once, then
//! each group's instances and each zone's records); deleting runs every
//! resource of a phase at once, a few at a time. No printing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::stream::{self, StreamExt};
use hyper::Method;
use serde_json::{json, Value};

use crate::cloud::{ApiError, GceCloud};
use crate::names;

/// Deletions in flight at once.
const PARALLEL: usize = 8;

/// What to look for.
#[derive(Debug, Clone)]
pub struct Scope {
    pub cluster: String,
    /// Names the spec gives as existing (`networkID`, subnet ids): listed
    /// when found, never deleted.
    pub shared: BTreeSet<String>,
    /// Whether the cluster publishes its names in Cloud DNS (DNS not
    /// `None`, not gossip).
    pub dns: bool,
}

/// How a resource is deleted.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    /// A Compute resource by its self link.
    Compute(String),
    /// A service account by its `projects/P/serviceAccounts/EMAIL` name.
    ServiceAccount(String),
    /// A record set in a managed zone, as listed.
    Record { zone: String, record: Value },
}

/// One resource of the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// kops' type name (`InstanceTemplate`, `FirewallRule`, `DNSRecord`...).
    pub kind: &'static str,
    pub name: String,
    /// kops' id: the name, `<zone>/<name>` for zonal ones, the record name.
    pub id: String,
    /// Deletion phase: lower goes first.
    pub phase: u8,
    /// Given in the spec as existing: kept.
    pub shared: bool,
    target: Target,
}

/// What a deletion did.
#[derive(Debug, Default)]
pub struct Report {
    pub deleted: Vec<Resource>,
    pub kept: Vec<Resource>,
    pub passes: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    #[error("listing the cluster's Google Cloud resources: {0}")]
    List(Box<ApiError>),
    #[error("deleting {kind} `{id}`: {source}")]
    Delete {
        kind: &'static str,
        id: String,
        source: Box<ApiError>,
    },
    #[error("{} resources still there after {passes} passes: {}; last: {last_error}\nhint: run `kops delete cluster --yes` again, or raise --wait", .remaining.len(), .remaining.join(", "))]
    Incomplete {
        remaining: Vec<String>,
        passes: u32,
        last_error: String,
    },
}

fn listing(e: ApiError) -> DeleteError {
    DeleteError::List(Box::new(e))
}

fn last(link: &str) -> &str {
    link.rsplit('/').next().unwrap_or(link)
}

/// `projects/...` of a link, for comparing links whatever their host.
fn reference(link: &str) -> &str {
    link.find("projects/").map_or(link, |i| &link[i..])
}

fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field].as_str().unwrap_or("")
}

/// kops' check that `name` is one of the cluster's: one of its first
/// `max_parts` dash-separated prefixes followed by the cluster name is the
/// whole name, or the name holds the hash of the cluster's safe name.
pub fn matches_cluster_name(name: &str, cluster: &str, max_parts: usize) -> bool {
    let hash = kops_api::names::hash6(&names::safe_cluster_name(cluster));
    if name.contains(&hash) {
        return true;
    }
    let tokens: Vec<&str> = name.split('-').collect();
    (1..=max_parts.min(tokens.len())).any(|i| {
        let prefix = tokens[..i].join("-");
        !prefix.is_empty() && name == names::safe_object_name(&prefix, cluster)
    })
}

/// A route of the cluster: `<cluster, dashed and cut to fit>-<uuid>`.
fn matches_route_name(name: &str, cluster: &str) -> bool {
    const UUID: usize = 36;
    const MAX: usize = 63;
    if name.len() < UUID || !name.is_char_boundary(name.len() - UUID) {
        return false;
    }
    let safe = names::safe_cluster_name(cluster);
    let prefix = if safe.len() + 1 > MAX - UUID {
        format!("{}-", &safe[..(MAX - UUID - 1).min(safe.len())])
    } else {
        format!("{safe}-")
    };
    name[..name.len() - UUID] == prefix
}

/// Whether a template's `cluster-name` metadata names the cluster.
fn template_of_cluster(template: &Value, cluster: &str) -> bool {
    template["properties"]["metadata"]["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|item| item["key"] == "cluster-name")
        .is_some_and(|item| text(item, "value").trim() == cluster.trim())
}

/// Whether a firewall rule's target tags are all the cluster's (a rule
/// without target tags is not).
fn targets_cluster(rule: &Value, cluster: &str) -> bool {
    let safe = names::safe_cluster_name(cluster);
    let prefix = format!("{safe}-");
    let hash = kops_api::names::hash6(&safe);
    let tags: Vec<&str> = rule["targetTags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    !tags.is_empty()
        && tags
            .iter()
            .all(|t| t.starts_with(&prefix) || t.contains(&hash))
}

/// The names kops publishes for a cluster (`api`, `api.internal`,
/// `bastion`), with the trailing dot.
fn kops_record_names(cluster: &str) -> [String; 3] {
    ["api", "api.internal", "bastion"].map(|p| format!("{p}.{cluster}."))
}

fn compute(
    kind: &'static str,
    resource: &Value,
    phase: u8,
    zonal: bool,
    shared: &BTreeSet<String>,
) -> Resource {
    let name = text(resource, "name").to_string();
    let id = if zonal {
        format!("{}/{name}", last(text(resource, "zone")))
    } else {
        name.clone()
    };
    Resource {
        kind,
        shared: shared.contains(&name),
        name,
        id,
        phase,
        target: Target::Compute(text(resource, "selfLink").to_string()),
    }
}

/// The lists discovery reads, every one read once.
#[derive(Default)]
struct Lists {
    templates: Vec<Value>,
    groups: Vec<Value>,
    disks: Vec<Value>,
    pools: Vec<Value>,
    rules: Vec<Value>,
    firewalls: Vec<Value>,
    addresses: Vec<Value>,
    subnets: Vec<Value>,
    routers: Vec<Value>,
    networks: Vec<Value>,
    accounts: Vec<Value>,
    backends: Vec<Value>,
    routes: Vec<Value>,
    zones: Vec<Value>,
}

async fn read_lists(cloud: &GceCloud, scope: &Scope) -> Result<Lists, ApiError> {
    let regional = |kind: &str| cloud.compute_url(&format!("regions/{}/{kind}", cloud.region));
    let global = |kind: &str| cloud.compute_url(&format!("global/{kind}"));
    let zones = async {
        if scope.dns {
            cloud
                .list(&cloud.dns_url("managedZones"), "managedZones")
                .await
        } else {
            Ok(Vec::new())
        }
    };
    let urls = [
        global("instanceTemplates"),
        regional("targetPools"),
        regional("forwardingRules"),
        global("firewalls"),
        regional("addresses"),
        regional("subnetworks"),
        regional("routers"),
        global("networks"),
        cloud.iam_url("serviceAccounts"),
        regional("backendServices"),
        global("routes"),
    ];
    // Every list at once.
    let first = async {
        tokio::try_join!(
            cloud.list(&urls[0], "items"),
            cloud.aggregated("instanceGroupManagers"),
            cloud.aggregated("disks"),
            cloud.list(&urls[1], "items"),
            cloud.list(&urls[2], "items"),
            cloud.list(&urls[3], "items"),
            cloud.list(&urls[4], "items"),
        )
    };
    let second = async {
        tokio::try_join!(
            cloud.list(&urls[5], "items"),
            cloud.list(&urls[6], "items"),
            cloud.list(&urls[7], "items"),
            cloud.list(&urls[8], "accounts"),
            cloud.list(&urls[9], "items"),
            cloud.list(&urls[10], "items"),
            zones,
        )
    };
    let (first, second) = tokio::join!(first, second);
    let (templates, groups, disks, pools, rules, firewalls, addresses) = first?;
    let (subnets, routers, networks, accounts, backends, routes, zones) = second?;
    Ok(Lists {
        templates,
        groups,
        disks,
        pools,
        rules,
        firewalls,
        addresses,
        subnets,
        routers,
        networks,
        accounts,
        backends,
        routes,
        zones,
    })
}

/// Every resource of the cluster in the client's project and region.
pub async fn list_cluster_resources(
    cloud: &GceCloud,
    scope: &Scope,
) -> Result<Vec<Resource>, DeleteError> {
    let lists = read_lists(cloud, scope).await.map_err(listing)?;
    let cluster = scope.cluster.as_str();
    let shared = &scope.shared;
    let named = |r: &&Value| matches_cluster_name(text(r, "name"), cluster, 8);
    let mut out = Vec::new();

    let templates: Vec<&Value> = lists
        .templates
        .iter()
        .filter(|t| template_of_cluster(t, cluster))
        .collect();
    let template_links: BTreeSet<&str> = templates
        .iter()
        .map(|t| reference(text(t, "selfLink")))
        .collect();
    let interfaces = || {
        templates.iter().flat_map(|t| {
            t["properties"]["networkInterfaces"]
                .as_array()
                .into_iter()
                .flatten()
        })
    };
    let used_subnets: BTreeSet<&str> = interfaces()
        .map(|i| reference(text(i, "subnetwork")))
        .collect();
    let used_networks: BTreeSet<&str> = interfaces()
        .map(|i| reference(text(i, "network")))
        .collect();
    out.extend(
        templates
            .iter()
            .map(|t| compute("InstanceTemplate", t, 3, false, shared)),
    );

    // Groups made from the cluster's templates, and their instances.
    let groups: Vec<&Value> = lists
        .groups
        .iter()
        .filter(|g| template_links.contains(reference(text(g, "instanceTemplate"))))
        .collect();
    // Owned URLs: a closure over borrowed items would make this future
    // not `Send` (rustc's higher-ranked closure inference).
    let urls: Vec<String> = groups
        .iter()
        .map(|g| {
            format!(
                "{}/listManagedInstances",
                compute_url(cloud, text(g, "selfLink"))
            )
        })
        .collect();
    let instance_lists = stream::iter(urls.into_iter().map(|url: String| async move {
        cloud
            .list_with(Method::POST, &url, "managedInstances")
            .await
    }))
    .buffered(PARALLEL)
    .collect::<Vec<_>>()
    .await;
    let mut instances = BTreeSet::new();
    for (group, members) in groups.iter().zip(instance_lists) {
        out.push(compute("InstanceGroupManager", group, 2, true, shared));
        let zone = last(text(group, "zone"));
        for member in members.map_err(listing)? {
            let link = text(&member, "instance");
            let name = last(link).to_string();
            instances.insert(reference(link).to_string());
            out.push(Resource {
                kind: "Instance",
                id: format!("{zone}/{name}"),
                name,
                phase: 3,
                shared: false,
                target: Target::Compute(link.to_string()),
            });
        }
    }

    let safe = names::safe_cluster_name(cluster);
    out.extend(
        lists
            .disks
            .iter()
            .filter(|d| d["labels"]["k8s-io-cluster-name"] == safe.as_str())
            .map(|d| compute("Disk", d, 4, true, shared)),
    );

    let mut http_checks = BTreeSet::new();
    for pool in lists.pools.iter().filter(named) {
        out.push(compute("TargetPool", pool, 3, false, shared));
        for check in pool["healthChecks"].as_array().into_iter().flatten() {
            http_checks.insert(text_of(check).to_string());
        }
    }
    for check in http_checks {
        out.push(Resource {
            kind: "HTTP HealthCheck",
            name: last(&check).to_string(),
            id: last(&check).to_string(),
            phase: 4,
            shared: false,
            target: Target::Compute(check),
        });
    }
    out.extend(
        lists
            .rules
            .iter()
            .filter(named)
            .map(|r| compute("ForwardingRule", r, 0, false, shared)),
    );
    out.extend(
        lists
            .firewalls
            .iter()
            .filter(|f| {
                let name = text(f, "name");
                let ours = matches_cluster_name(name, cluster, 5);
                let node_check = name.starts_with("k8s-") && name.ends_with("-node-http-hc");
                (ours || node_check) && targets_cluster(f, cluster)
            })
            .map(|f| compute("FirewallRule", f, 4, false, shared)),
    );
    for lb in service_load_balancers(&lists, cluster, shared) {
        if !out.iter().any(|r| r.kind == lb.kind && r.id == lb.id) {
            out.push(lb);
        }
    }
    out.extend(
        lists
            .addresses
            .iter()
            .filter(named)
            .map(|a| compute("Address", a, 4, false, shared)),
    );
    out.extend(
        lists
            .subnets
            .iter()
            .filter(named)
            .filter(|s| used_subnets.contains(reference(text(s, "selfLink"))))
            .map(|s| compute("Subnet", s, 5, false, shared)),
    );
    out.extend(
        lists
            .routers
            .iter()
            .filter(named)
            .map(|r| compute("Router", r, 4, false, shared)),
    );
    let network = names::network_name(cluster);
    out.extend(
        lists
            .networks
            .iter()
            .filter(|n| text(n, "name") == network)
            .filter(|n| used_networks.contains(reference(text(n, "selfLink"))))
            .map(|n| compute("Network", n, 6, false, shared)),
    );

    let account_ids: Vec<String> = ["control-plane", "bastion", "node"]
        .iter()
        .map(|role| names::service_account_id(role, cluster))
        .collect();
    for account in &lists.accounts {
        let full = text(account, "name");
        let email = last(full);
        let id = email.split('@').next().unwrap_or("");
        if account_ids.iter().any(|a| a == id) {
            out.push(Resource {
                kind: "ServiceAccount",
                name: email.to_string(),
                id: full.to_string(),
                phase: 4,
                shared: false,
                target: Target::ServiceAccount(full.to_string()),
            });
        }
    }

    // Backend services whose every backend is one of the cluster's groups,
    // and their health checks.
    let group_names: Vec<&str> = groups.iter().map(|g| text(g, "name")).collect();
    let mut checks = BTreeSet::new();
    for service in &lists.backends {
        let backends: Vec<&str> = service["backends"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| text(b, "group"))
            .collect();
        let ours = !backends.is_empty()
            && backends
                .iter()
                .all(|b| group_names.iter().any(|g| b.ends_with(&format!("/{g}"))));
        if ours {
            out.push(compute("BackendService", service, 1, false, shared));
            for check in service["healthChecks"].as_array().into_iter().flatten() {
                checks.insert(text_of(check).to_string());
            }
        }
    }
    for check in checks {
        out.push(Resource {
            kind: "HealthCheck",
            name: last(&check).to_string(),
            id: last(&check).to_string(),
            phase: 3,
            shared: false,
            target: Target::Compute(check),
        });
    }

    for route in &lists.routes {
        if !matches_route_name(text(route, "name"), cluster) {
            continue;
        }
        let gone = route["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|w| w["code"] == "NEXT_HOP_INSTANCE_NOT_FOUND");
        let hop = reference(text(route, "nextHopInstance"));
        if gone || (!hop.is_empty() && instances.contains(hop)) {
            out.push(compute("Route", route, 4, false, shared));
        }
    }

    out.extend(dns_records(cloud, cluster, &lists.zones).await?);
    out.sort_by(|a, b| (a.phase, a.kind, &a.id).cmp(&(b.phase, b.kind, &b.id)));
    Ok(out)
}

/// The load balancers the GCP cloud controller manager made for the
/// cluster's Services of type LoadBalancer, as kops recognises them: a
/// firewall rule `k8s-fw-<name>` whose target tags are all the cluster's,
/// the regional forwarding rule `<name>` it is named after, that rule's
/// target pool, and the pool's HTTP health checks, which must all be
/// `k8s-` ones (otherwise none of it is taken as Kubernetes'). A rule
/// without a forwarding rule, or one without a target, is not a Service's
/// (kops skips it too). Read from the lists already made: no extra call.
/// (kops stops with an error when the target pool cannot be read; here a
/// pool missing from the list, gone since, leaves that balancer alone.)
fn service_load_balancers(
    lists: &Lists,
    cluster: &str,
    shared: &BTreeSet<String>,
) -> Vec<Resource> {
    let find = |items: &'_ [Value], name: &str| -> Option<Value> {
        items.iter().find(|i| text(i, "name") == name).cloned()
    };
    let mut out = Vec::new();
    for firewall in &lists.firewalls {
        let Some(rule_name) = text(firewall, "name").strip_prefix("k8s-fw-") else {
            continue;
        };
        if !targets_cluster(firewall, cluster) {
            continue;
        }
        let Some(rule) = find(&lists.rules, rule_name) else {
            continue;
        };
        let target = text(&rule, "target");
        if target.is_empty() {
            continue;
        }
        let Some(pool) = find(&lists.pools, last(target)) else {
            continue;
        };
        let checks: Vec<&str> = pool["healthChecks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text_of)
            .collect();
        let all_kubernetes = checks
            .iter()
            .all(|c| last(c).starts_with("k8s-") && c.contains("/httpHealthChecks/"));
        if !all_kubernetes {
            continue;
        }
        out.push(compute("FirewallRule", firewall, 4, false, shared));
        out.push(compute("ForwardingRule", &rule, 0, false, shared));
        out.push(compute("TargetPool", &pool, 3, false, shared));
        for check in checks {
            out.push(Resource {
                kind: "HTTP HealthCheck",
                name: last(check).to_string(),
                id: last(check).to_string(),
                phase: 4,
                shared: false,
                target: Target::Compute(check.to_string()),
            });
        }
    }
    out
}

fn text_of(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}

/// kops' A records of the cluster in the zones its name is in.
async fn dns_records(
    cloud: &GceCloud,
    cluster: &str,
    zones: &[Value],
) -> Result<Vec<Resource>, DeleteError> {
    let fqdn = format!("{cluster}.");
    let ours = kops_record_names(cluster);
    let zones: Vec<&str> = zones
        .iter()
        .filter(|z| {
            let dns_name = text(z, "dnsName");
            !dns_name.is_empty() && fqdn.ends_with(dns_name)
        })
        .map(|z| text(z, "name"))
        .collect();
    let urls: Vec<String> = zones
        .iter()
        .map(|zone| cloud.dns_url(&format!("managedZones/{zone}/rrsets")))
        .collect();
    let lists = stream::iter(
        urls.into_iter()
            .map(|url: String| async move { cloud.list(&url, "rrsets").await }),
    )
    .buffered(PARALLEL)
    .collect::<Vec<_>>()
    .await;
    let mut out = Vec::new();
    for (zone, records) in zones.iter().zip(lists) {
        for record in records.map_err(listing)? {
            let name = text(&record, "name");
            if record["type"] == "A" && ours.iter().any(|o| o == name) {
                out.push(Resource {
                    kind: "DNSRecord",
                    name: name.to_string(),
                    id: name.to_string(),
                    phase: 0,
                    shared: false,
                    target: Target::Record {
                        zone: zone.to_string(),
                        record: record.clone(),
                    },
                });
            }
        }
    }
    Ok(out)
}

/// Why one deletion did not go through.
enum Failure {
    /// Still in use, or not ready: try again in a later pass.
    Again(String),
    Fatal(ApiError),
}

fn classify(e: ApiError) -> Failure {
    // Operations name the reason in capitals.
    let in_use =
        ["RESOURCE_IN_USE_BY_ANOTHER_RESOURCE", "RESOURCE_NOT_READY"].contains(&e.reason.as_str());
    if in_use || e.is_transient() {
        Failure::Again(e.message.clone())
    } else {
        Failure::Fatal(e)
    }
}

/// A Compute link (a self link naming any host, or a `projects/...`
/// reference) on the client's Compute endpoint.
fn compute_url(cloud: &GceCloud, link: &str) -> String {
    format!("{}{}", cloud.endpoints.compute, reference(link))
}

/// Deletes one Compute resource and waits for it; gone already is done.
async fn delete_compute(cloud: &GceCloud, link: &str) -> Result<(), Failure> {
    let url = compute_url(cloud, link);
    match cloud.mutate(Method::DELETE, &url, None).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() || e.reason.eq_ignore_ascii_case("notFound") => Ok(()),
        Err(e) => Err(classify(e)),
    }
}

/// Deletes record sets of one zone in one change; records already gone
/// or changed since listing are read again first.
async fn delete_records(cloud: &GceCloud, zone: &str, records: &[Value]) -> Result<(), Failure> {
    let url = cloud.dns_url(&format!("managedZones/{zone}/changes"));
    let change = |records: &[Value]| json!({"kind": "dns#change", "deletions": records});
    match cloud.call(Method::POST, &url, Some(&change(records))).await {
        Ok(_) => return Ok(()),
        Err(e) if e.status == 404 || e.status == 412 => {}
        Err(e) => return Err(classify(e)),
    }
    let mut current = Vec::new();
    for record in records {
        let path = format!(
            "managedZones/{zone}/rrsets/{}/{}",
            text(record, "name"),
            text(record, "type")
        );
        if let Some(found) = cloud
            .get(&cloud.dns_url(&path))
            .await
            .map_err(Failure::Fatal)?
        {
            current.push(found);
        }
    }
    if current.is_empty() {
        return Ok(());
    }
    match cloud
        .call(Method::POST, &url, Some(&change(&current)))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => Err(classify(e)),
    }
}

/// Deletes a batch: Compute resources and service accounts one by one,
/// DNS records one change per zone; what happened to each.
async fn delete_batch(
    cloud: &GceCloud,
    batch: Vec<Resource>,
) -> Vec<(Vec<Resource>, Result<(), Failure>)> {
    let mut units: Vec<Vec<Resource>> = Vec::new();
    let mut by_zone: BTreeMap<String, Vec<Resource>> = BTreeMap::new();
    for r in batch {
        match &r.target {
            Target::Record { zone, .. } => by_zone.entry(zone.clone()).or_default().push(r),
            _ => units.push(vec![r]),
        }
    }
    units.extend(by_zone.into_values());
    stream::iter(units.into_iter().map(|unit| async move {
        let result = match &unit[0].target {
            Target::Compute(link) => delete_compute(cloud, link).await,
            Target::ServiceAccount(name) => {
                let email = last(name);
                let url = cloud.iam_url(&format!("serviceAccounts/{email}"));
                match cloud.call(Method::DELETE, &url, None).await {
                    Ok(_) => Ok(()),
                    Err(e) if e.is_not_found() => Ok(()),
                    Err(e) => Err(classify(e)),
                }
            }
            Target::Record { zone, .. } => {
                let records: Vec<Value> = unit
                    .iter()
                    .filter_map(|r| match &r.target {
                        Target::Record { record, .. } => Some(record.clone()),
                        _ => None,
                    })
                    .collect();
                delete_records(cloud, zone, &records).await
            }
        };
        (unit, result)
    }))
    .buffer_unordered(PARALLEL)
    .collect()
    .await
}

/// Deletes the resources (shared ones kept) phase by phase, a phase's all
/// at once; what Google says is still in use is tried again in the next
/// pass, `interval` later, for at most `passes` passes.
pub async fn delete_resources(
    cloud: &GceCloud,
    resources: Vec<Resource>,
    passes: u32,
    interval: Duration,
    progress: &(dyn Fn(&Resource, Option<&str>) + Sync),
) -> Result<Report, DeleteError> {
    let mut report = Report::default();
    let (kept, mut todo): (Vec<_>, Vec<_>) = resources.into_iter().partition(|r| r.shared);
    report.kept = kept;
    let mut last_error = String::new();
    while !todo.is_empty() {
        report.passes += 1;
        let mut phases: BTreeMap<u8, Vec<Resource>> = BTreeMap::new();
        for r in std::mem::take(&mut todo) {
            phases.entry(r.phase).or_default().push(r);
        }
        let mut blocked = false;
        for (_, batch) in phases {
            if blocked {
                todo.extend(batch);
                continue;
            }
            for (unit, result) in delete_batch(cloud, batch).await {
                match result {
                    Ok(()) => {
                        for r in unit {
                            progress(&r, None);
                            report.deleted.push(r);
                        }
                    }
                    Err(Failure::Again(why)) => {
                        for r in &unit {
                            progress(r, Some(&why));
                            last_error = format!("{} `{}`: {why}", r.kind, r.id);
                        }
                        blocked = true;
                        todo.extend(unit);
                    }
                    Err(Failure::Fatal(source)) => {
                        return Err(DeleteError::Delete {
                            kind: unit[0].kind,
                            id: unit[0].id.clone(),
                            source: Box::new(source),
                        })
                    }
                }
            }
        }
        if todo.is_empty() {
            break;
        }
        if report.passes >= passes {
            return Err(DeleteError::Incomplete {
                remaining: todo
                    .iter()
                    .map(|r| format!("{} {}", r.kind, r.id))
                    .collect(),
                passes: report.passes,
                last_error,
            });
        }
        tokio::time::sleep(interval).await;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_the_cluster_as_kops_matches_them() {
        let c = "minimal-gce.example.com";
        assert!(matches_cluster_name("nodes-minimal-gce-example-com", c, 8));
        assert!(matches_cluster_name(
            "ssh-external-to-master-minimal-gce-example-com",
            c,
            8
        ));
        assert!(!matches_cluster_name("nodes-other-example-com", c, 8));
        assert!(!matches_cluster_name("minimal-gce-example-com", c, 8));
        // Shortened names carry the hash of the safe name.
        let long = "minimal-gce-with-a-very-very-very-very-very-long-name.example.com";
        assert!(matches_cluster_name(
            &names::suffixed("a-etcd-main", long),
            long,
            8
        ));
        // Firewall rules: at most 5 prefix tokens.
        assert!(!matches_cluster_name(
            "a-b-c-d-e-f-minimal-gce-example-com",
            c,
            5
        ));
        let route = "minimal-gce-example-com-51a343e2-c285-4e73-b933-18a6ea44c3e4";
        assert!(matches_route_name(route, c));
        assert!(!matches_route_name(
            "other-example-com-51a343e2-c285-4e73-b933-18a6ea44c3e4",
            c
        ));
    }

    #[test]
    fn firewall_rules_must_target_only_the_cluster() {
        let c = "minimal-gce.example.com";
        let ours = json!({"targetTags": ["minimal-gce-example-com-k8s-io-role-node"]});
        let mixed = json!({"targetTags": ["minimal-gce-example-com-k8s-io-role-node", "web"]});
        assert!(targets_cluster(&ours, c));
        assert!(!targets_cluster(&mixed, c));
        assert!(!targets_cluster(&json!({}), c));
    }

    #[test]
    fn service_load_balancers_as_kops_takes_them() {
        let c = "minimal-gce.example.com";
        let tag = "minimal-gce-example-com-k8s-io-role-node";
        let p = "https://compute.googleapis.com/compute/v1/projects/p";
        let firewall = |name: &str, tag: &str| json!({"name": name, "targetTags": [tag], "selfLink": format!("{p}/global/firewalls/{name}")});
        let rule = |name: &str, pool: &str| json!({"name": name, "target": pool, "selfLink": format!("{p}/regions/r/forwardingRules/{name}")});
        let pool = |name: &str, check: &str| json!({"name": name, "healthChecks": [check], "selfLink": format!("{p}/regions/r/targetPools/{name}")});
        let node_check = format!("{p}/global/httpHealthChecks/k8s-0123-node");
        let lists = Lists {
            firewalls: vec![
                firewall("k8s-fw-aours", tag),
                firewall("k8s-fw-aother", "other-example-com-k8s-io-role-node"),
                firewall("k8s-fw-alocal", tag),
                firewall("k8s-fw-anorule", tag),
                firewall("k8s-fw-anotarget", tag),
            ],
            rules: vec![
                rule("aours", &format!("{p}/regions/r/targetPools/aours")),
                rule("aother", &format!("{p}/regions/r/targetPools/aother")),
                rule("alocal", &format!("{p}/regions/r/targetPools/alocal")),
                rule("anotarget", ""),
            ],
            pools: vec![
                pool("aours", &node_check),
                pool("aother", &node_check),
                pool("alocal", &format!("{p}/global/httpHealthChecks/alocal")),
            ],
            ..Lists::default()
        };
        let found: Vec<(&str, String, u8)> = service_load_balancers(&lists, c, &BTreeSet::new())
            .into_iter()
            .map(|r| (r.kind, r.id, r.phase))
            .collect();
        assert_eq!(
            found,
            [
                ("FirewallRule", "k8s-fw-aours".to_string(), 4),
                ("ForwardingRule", "aours".to_string(), 0),
                ("TargetPool", "aours".to_string(), 3),
                ("HTTP HealthCheck", "k8s-0123-node".to_string(), 4),
            ]
        );
    }

    #[test]
    fn templates_by_cluster_name_metadata() {
        let t = |v: &str| json!({"properties": {"metadata": {"items": [{"key": "cluster-name", "value": v}]}}});
        assert!(template_of_cluster(&t("a.example.com"), "a.example.com"));
        assert!(!template_of_cluster(&t("b.example.com"), "a.example.com"));
        assert!(!template_of_cluster(&json!({}), "a.example.com"));
    }
}
