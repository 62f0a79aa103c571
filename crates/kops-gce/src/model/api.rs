//! The API's load balancers (kops' GCE API load-balancer model): with
//! `api.loadBalancer.type: Public`, an external one (HTTP health check,
//! target pool, address, forwarding rule) plus the internal one; with
//! `Internal`, the internal one only: a region health check, a region
//! backend service over the API's instance groups, and per subnetwork an
//! internal address with forwarding rules for the API, kops-controller
//! (with `dns: None`) and Cilium's etcd.

use std::collections::BTreeMap;

use kops_api::Role;
use kops_engine::{TaskGraph, TaskKey};
use kops_model::ModelError;

use super::firewall::{add_pod_cidrs_to_api, Rule};
use super::GceModel;
use crate::names;
use crate::tasks::{
    Address, BackendService, ForwardingRule, ForwardingTarget, GceContext, HealthCheck,
    HttpHealthCheck, InstanceGroupManager, TargetPool,
};

const API_PORT: u16 = 443;
const API_HEALTH_CHECK_PORT: i64 = 3990;
const KOPS_CONTROLLER_PORT: u16 = 3988;
const CILIUM_ETCD_PORT: u16 = 4003;
const ETCD_MAIN_PORT: u16 = 4001;
const ETCD_EVENTS_PORT: u16 = 4002;

pub fn build(gce: &GceModel<'_>, graph: &mut TaskGraph<GceContext>) -> Result<(), ModelError> {
    match gce.api_load_balancer_type() {
        None => return Ok(()),
        Some("Public") => {
            public(gce, graph)?;
            internal(gce, graph)?;
        }
        Some("Internal") => internal(gce, graph)?,
        Some(other) => {
            return Err(GceModel::error(
                "spec.api.loadBalancer.type",
                format!("`{other}` is not a load balancer type"),
                "use `Public` or `Internal`",
            ))
        }
    }
    firewall(gce, graph)
}

/// The addresses kops gives the API server's well-known addresses (its
/// `KubeAPIServer` service): the public balancer's address, when public,
/// and each API subnet's internal address. Node configs list what they
/// hold once they exist (`ApiserverAdditionalIPs`, and the workers'
/// `APIServerIPs` without DNS).
pub fn api_server_address_names(gce: &GceModel<'_>) -> Vec<String> {
    let internal = || {
        api_subnets(gce)
            .into_iter()
            .map(|subnet| gce.suffixed(&format!("api-{}", subnet.name)))
    };
    match gce.api_load_balancer_type() {
        Some("Public") => std::iter::once(gce.suffixed("api"))
            .chain(internal())
            .collect(),
        Some("Internal") => internal().collect(),
        _ => Vec::new(),
    }
}

impl GceModel<'_> {
    fn labels(&self, name: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                "k8s-io-cluster-name".to_string(),
                names::safe_cluster_name(self.cluster_name()),
            ),
            ("name".to_string(), name.to_string()),
        ])
    }

    fn suffixed(&self, object: &str) -> String {
        names::suffixed(object, self.cluster_name())
    }
}

fn public(gce: &GceModel<'_>, graph: &mut TaskGraph<GceContext>) -> Result<(), ModelError> {
    let name = gce.suffixed("api");
    graph.add(HttpHealthCheck {
        name: name.clone(),
        port: API_HEALTH_CHECK_PORT,
        request_path: "/healthz".into(),
    })?;
    graph.add(TargetPool {
        name: name.clone(),
        health_check: HttpHealthCheck::key_of(&name),
    })?;
    graph.add(Address {
        name: name.clone(),
        address_type: None,
        purpose: None,
        subnetwork: None,
    })?;
    graph.add(ForwardingRule {
        name: name.clone(),
        address: Address::key_of(&name),
        ip_protocol: "TCP".into(),
        load_balancing_scheme: "EXTERNAL".into(),
        target: ForwardingTarget::TargetPool {
            pool: TargetPool::key_of(&name),
            port_range: format!("{API_PORT}-{API_PORT}"),
        },
        labels: gce.labels("api"),
    })?;
    Ok(())
}

fn internal(gce: &GceModel<'_>, graph: &mut TaskGraph<GceContext>) -> Result<(), ModelError> {
    let cluster = gce.cluster_name();
    let api = gce.suffixed("api");
    graph.add(HealthCheck {
        name: api.clone(),
        port: API_PORT.into(),
        protocol: "TCP".into(),
    })?;
    let mut api_groups = Vec::new();
    let mut control_plane_groups = Vec::new();
    let mut require_etcd_lb = false;
    for group in gce.groups() {
        let role = group.role();
        if !matches!(role, Some(Role::ControlPlane) | Some(Role::ApiServer)) {
            continue;
        }
        let zones = gce.group_zones(group);
        let [zone] = zones.as_slice() else {
            return Err(GceModel::error(
                format!("instanceGroups[{}].spec.zones", group.name()),
                format!(
                    "names {} zones; an instance group serving the API behind an internal load balancer has exactly one",
                    zones.len()
                ),
                "give the group one zone",
            ));
        };
        let igm = InstanceGroupManager::key_of(&names::instance_group_manager(
            cluster,
            group.name(),
            zone,
        ));
        api_groups.push(igm.clone());
        if role == Some(Role::ControlPlane) {
            control_plane_groups.push(igm);
        } else {
            require_etcd_lb = gce.model.uses_none_dns();
        }
    }
    graph.add(BackendService {
        name: api.clone(),
        protocol: "TCP".into(),
        load_balancing_scheme: "INTERNAL".into(),
        health_checks: vec![HealthCheck::key_of(&api)],
        instance_group_managers: api_groups,
    })?;
    let mut control_plane_service = BackendService::key_of(&api);
    if gce.has_api_server_only_groups() {
        let name = gce.suffixed("kops-controller");
        graph.add(HealthCheck {
            name: name.clone(),
            port: KOPS_CONTROLLER_PORT.into(),
            protocol: "SSL".into(),
        })?;
        graph.add(BackendService {
            name: name.clone(),
            protocol: "TCP".into(),
            load_balancing_scheme: "INTERNAL".into(),
            health_checks: vec![HealthCheck::key_of(&name)],
            instance_group_managers: control_plane_groups.clone(),
        })?;
        control_plane_service = BackendService::key_of(&name);
    }
    let service_keys = [
        ("api", BackendService::key_of(&api), vec![API_PORT], true),
        (
            "kops-controller",
            control_plane_service.clone(),
            vec![KOPS_CONTROLLER_PORT],
            gce.uses_load_balancer_for_kops_controller(),
        ),
        (
            "cilium-etcd",
            control_plane_service,
            vec![CILIUM_ETCD_PORT],
            gce.uses_cilium_etcd(),
        ),
    ];
    for subnet in api_subnets(gce) {
        let subnet_key = gce.subnet_key(subnet);
        let address = gce.suffixed(&format!("api-{}", subnet.name));
        add_internal_address(graph, &address, &subnet_key)?;
        for (what, service, ports, wanted) in &service_keys {
            if !wanted {
                continue;
            }
            let label = format!("{what}-{}", subnet.name);
            add_internal_rule(gce, graph, &label, &address, service, ports, &subnet_key)?;
        }
    }
    if require_etcd_lb {
        etcd_internal(gce, graph, control_plane_groups)?;
    }
    Ok(())
}

/// The subnets an API-serving group runs in.
fn api_subnets<'a>(gce: &'a GceModel<'_>) -> Vec<&'a kops_api::ClusterSubnetSpec> {
    gce.subnets()
        .iter()
        .filter(|subnet| {
            gce.groups().iter().any(|g| {
                matches!(g.role(), Some(Role::ControlPlane) | Some(Role::ApiServer))
                    && g.spec.subnets.iter().flatten().any(|s| s == &subnet.name)
            })
        })
        .collect()
}

fn add_internal_address(
    graph: &mut TaskGraph<GceContext>,
    name: &str,
    subnet: &TaskKey,
) -> Result<(), ModelError> {
    graph.add(Address {
        name: name.to_string(),
        address_type: Some("INTERNAL".into()),
        purpose: Some("SHARED_LOADBALANCER_VIP".into()),
        subnetwork: Some(subnet.clone()),
    })?;
    Ok(())
}

/// An internal forwarding rule named `<label>-<cluster>`.
fn add_internal_rule(
    gce: &GceModel<'_>,
    graph: &mut TaskGraph<GceContext>,
    label: &str,
    address: &str,
    service: &TaskKey,
    ports: &[u16],
    subnet: &TaskKey,
) -> Result<(), ModelError> {
    graph.add(ForwardingRule {
        name: gce.suffixed(label),
        address: Address::key_of(address),
        ip_protocol: "TCP".into(),
        load_balancing_scheme: "INTERNAL".into(),
        target: ForwardingTarget::BackendService {
            service: service.clone(),
            ports: ports.iter().map(ToString::to_string).collect(),
            network: gce.network_key(),
            subnetwork: subnet.clone(),
        },
        labels: gce.labels(label),
    })?;
    Ok(())
}

/// With API-server groups and `dns: None`, they reach etcd through an
/// internal load balancer of their own.
fn etcd_internal(
    gce: &GceModel<'_>,
    graph: &mut TaskGraph<GceContext>,
    control_plane_groups: Vec<TaskKey>,
) -> Result<(), ModelError> {
    let check = gce.suffixed("etcd-main");
    graph.add(HealthCheck {
        name: check.clone(),
        port: ETCD_MAIN_PORT.into(),
        protocol: "TCP".into(),
    })?;
    let service = gce.suffixed("etcd");
    graph.add(BackendService {
        name: service.clone(),
        protocol: "TCP".into(),
        load_balancing_scheme: "INTERNAL".into(),
        health_checks: vec![HealthCheck::key_of(&check)],
        instance_group_managers: control_plane_groups,
    })?;
    for subnet in api_subnets(gce) {
        let subnet_key = gce.subnet_key(subnet);
        let label = format!("etcd-{}", subnet.name);
        let address = gce.suffixed(&label);
        add_internal_address(graph, &address, &subnet_key)?;
        add_internal_rule(
            gce,
            graph,
            &label,
            &address,
            &BackendService::key_of(&service),
            &[ETCD_MAIN_PORT, ETCD_EVENTS_PORT],
            &subnet_key,
        )?;
    }
    Ok(())
}

/// The API's rules when a load balancer fronts it.
fn firewall(gce: &GceModel<'_>, graph: &mut TaskGraph<GceContext>) -> Result<(), ModelError> {
    let access = kops_model::security::api_access(gce.model);
    let rule = |targets: Vec<String>, port: u16| Rule {
        allowed: vec![format!("tcp:{port}")],
        source_ranges: access.clone(),
        source_tags: vec![],
        target_tags: targets,
    };
    gce.add_rule_pair(
        graph,
        "https-api",
        &rule(gce.api_server_target_tags(), API_PORT),
    )?;
    add_pod_cidrs_to_api(gce, graph)?;
    let control_plane = vec![gce.tag("control-plane")];
    if gce.uses_load_balancer_for_kops_controller() {
        gce.add_rule_pair(
            graph,
            "kops-controller",
            &rule(control_plane.clone(), KOPS_CONTROLLER_PORT),
        )?;
    }
    if gce.uses_cilium_etcd() {
        gce.add_rule_pair(graph, "cilium-etcd", &rule(control_plane, CILIUM_ETCD_PORT))?;
    }
    Ok(())
}
