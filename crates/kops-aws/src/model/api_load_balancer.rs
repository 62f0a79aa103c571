//! The API endpoint behind a load balancer (`spec.api.loadBalancer`,
//! class `Network`), as kops lays it out:
//!
//! - the Network Load Balancer `api.<cluster>` (its `Name` tag; its AWS name
//!   is `api-<cluster with dashes>` cut to 32 characters with a hash),
//!   `internet-facing` for type `Public` (in the public or utility subnets)
//!   or `internal` for type `Internal` (in the private subnets), one subnet
//!   per zone, with the `api-elb.<cluster>` security group;
//! - the target group `tcp-<cluster>...` (TCP 443, TCP health check every
//!   10 s, 2 healthy / 2 unhealthy, 30 s deregistration delay closing
//!   connections), which the control-plane autoscaling groups register in;
//! - the listener `api.<cluster>-443`, TCP 443 to that target group.
//!
//! With `sslCertificate`, TLS on 443 to a `tls-...` target group and TCP on
//! 8443 to the TCP one; explicit `subnets` with elastic IPs or private
//! addresses; `additionalSecurityGroups`; the cross-zone and access-log
//! attributes when the spec sets them, and the access log stated off
//! (`access_logs.s3.enabled=false`, as kops sets it) when it sets none.
//!
//! With DNS `None` nodes find kops-controller (port 3988) through the
//! balancer: a `kops-controller-...` target group (HTTPS health check on
//! `/healthz`) and the listener `api.<cluster>-3988`, plus, when Cilium
//! manages its etcd, an `etcd-cilium-...` target group and the listener
//! `etcd-cilium.<cluster>-4003`; cross-zone balancing is then always on.
//!
//! With `class: Classic` (a cluster kops 1.36 or earlier made; kops 1.37
//! refuses the class) the API is behind the Classic ELB `api.<cluster>`
//! instead, as kops 1.36 built it: TCP 443 to 443, an `SSL:443` health
//! check every 10 s (5 s timeout, 2 healthy / 2 unhealthy), connection
//! draining for 300 s, `idleTimeoutSeconds` (300 s by default), cross-zone
//! balancing as the spec says (off by default), the access log when the
//! spec sets one (else stated off), the same subnets and `api-elb`
//! security group as a Network Load Balancer would get, and the
//! control-plane autoscaling groups attached by name (`LoadBalancerNames`)
//! rather than through target groups. kops 1.36 built the bastion's
//! balancer as a Network Load Balancer whatever the API's class. Moved to
//! `class: Network`, the old ELB is deleted once the Network Load Balancer
//! and what points at it are in place ([`retire_classic`]).

use std::collections::BTreeMap;

use crate::tasks::classic_load_balancer::{
    ClassicAccessLog, ClassicAttributes, ClassicHealthCheck, ClassicListener, ClassicLoadBalancer,
    ClassicLoadBalancerRetirement,
};
use crate::tasks::listener::Listener;
use crate::tasks::network_load_balancer::{LoadBalancerOutput, NetworkLoadBalancer};
use crate::tasks::security_group::SecurityGroup;
use crate::tasks::target_group::{TargetGroup, TargetGroupArn};
use crate::AwsContext;
use kops_api::{ClusterSubnetSpec, Role};
use kops_engine::{OutputRef, TaskGraph};

use crate::model::network::{subnet_ref, vpc_ref};
use crate::model::security::{elb_group_name, uses_api_load_balancer};
pub use kops_model::api_load_balancer::*;
use kops_model::{Model, ModelError};

/// The cluster's Classic ELBs an instance group's autoscaling group
/// registers with: the API's, for control-plane and API-server groups of a
/// cluster whose API balancer is Classic.
pub fn classic_load_balancers_for(
    model: &Model<'_>,
    role: Option<Role>,
) -> Vec<OutputRef<LoadBalancerOutput>> {
    match role {
        Some(Role::ControlPlane | Role::ApiServer) if uses_classic(model) => {
            vec![ClassicLoadBalancer::output_ref(&load_balancer_name(model))]
        }
        _ => Vec::new(),
    }
}

/// The target groups an instance group's autoscaling group registers in:
/// the API's for control-plane and API-server groups when there is one.
pub fn target_groups_for(model: &Model<'_>, role: Option<Role>) -> Vec<OutputRef<TargetGroupArn>> {
    match role {
        Some(Role::ControlPlane | Role::ApiServer)
            if uses_api_load_balancer(model) && !uses_classic(model) =>
        {
            let mut groups = vec![TargetGroup::arn_ref(&target_group_name(model))];
            if ssl_certificate(model).is_some() {
                groups.push(TargetGroup::arn_ref(&resource_name32(model.name(), "tls")));
            }
            for (prefix, _) in kops_controller_ports(model) {
                groups.push(TargetGroup::arn_ref(&resource_name32(model.name(), prefix)));
            }
            groups
        }
        Some(Role::Bastion) => vec![TargetGroup::arn_ref(&resource_name32(
            model.name(),
            "bastion",
        ))],
        _ => Vec::new(),
    }
}

/// The bastion's load balancer, when the cluster has bastions: the Network
/// Load Balancer `bastion.<cluster>` (AWS name `bastion-<cluster>` cut to
/// 32), public in the utility/public subnets unless
/// `topology.bastion.loadBalancer.type: Internal`, with the
/// `bastion-elb.<cluster>` security group; a TCP 22 target group of the
/// same AWS name the bastion groups register in; the listener
/// `bastion.<cluster>-22`; and, with `bastionPublicName` and published DNS,
/// alias records for that name.
pub fn build_bastion(
    model: &Model<'_>,
    graph: &mut TaskGraph<AwsContext>,
) -> Result<(), ModelError> {
    if !model.has_role(Role::Bastion) {
        return Ok(());
    }
    let bastion = model
        .cluster
        .spec
        .topology
        .as_ref()
        .and_then(|t| t.bastion.as_ref());
    let internal = bastion
        .and_then(|b| b.extra.get("loadBalancer"))
        .and_then(|lb| lb.get("type"))
        .and_then(|t| t.as_str())
        == Some("Internal");
    let placed = subnets(model, internal);
    if placed.is_empty() {
        return Err(ModelError::Spec {
            path: "spec.topology.bastion.loadBalancer.type".into(),
            message: format!(
                "no {} subnet for the bastion's load balancer",
                if internal {
                    "private"
                } else {
                    "public or utility"
                }
            ),
            hint: "add such a subnet, or change the bastion load balancer's type".into(),
        });
    }
    let name = model.scoped("bastion");
    let aws_name = resource_name32(model.name(), "bastion");
    graph.add(NetworkLoadBalancer {
        load_balancer_name: aws_name.clone(),
        scheme: if internal {
            "internal"
        } else {
            "internet-facing"
        }
        .to_string(),
        subnets: placed.iter().map(|s| subnet_ref(model, &s.name)).collect(),
        security_groups: vec![SecurityGroup::id_ref(&elb_group_name(model, "bastion"))],
        tags: model.tags(&name, &[]),
        name: name.clone(),
        additional_security_groups: Vec::new(),
        subnet_allocations: Default::default(),
        subnet_private_addresses: Default::default(),
        attributes: Default::default(),
        dualstack: all_ipv6(&placed),
    })?;
    graph.add(TargetGroup {
        vpc: vpc_ref(model),
        protocol: "TCP".to_string(),
        port: 22,
        health_check_protocol: "TCP".to_string(),
        health_check_path: None,
        health_check_interval: 10,
        healthy_threshold: 2,
        unhealthy_threshold: 2,
        deregistration_delay: 30,
        connection_termination: true,
        tags: model.tags(&aws_name, &[]),
        name: aws_name.clone(),
    })?;
    graph.add(Listener {
        name: format!("{name}-22"),
        load_balancer: NetworkLoadBalancer::output_ref(&name),
        port: 22,
        protocol: "TCP".to_string(),
        target_group: TargetGroup::arn_ref(&aws_name),
        certificate_arn: None,
        ssl_policy: None,
    })?;
    if let Some(public_name) = bastion.and_then(|b| b.bastion_public_name.as_deref()) {
        if model.publishes_dns_records() {
            crate::model::dns::alias_records(
                graph,
                &crate::model::dns::zone(model),
                public_name,
                &NetworkLoadBalancer::output_ref(&name),
            )?;
        }
    }
    Ok(())
}

/// Adds the load balancer, its target group and listener when the spec
/// asks for one.
pub fn build(model: &Model<'_>, graph: &mut TaskGraph<AwsContext>) -> Result<(), ModelError> {
    let Some(lb) = model
        .cluster
        .spec
        .api
        .as_ref()
        .and_then(|a| a.load_balancer.as_ref())
    else {
        return Ok(());
    };
    match lb.class.as_deref() {
        None | Some("Network") | Some("Classic") => {}
        Some(other) => {
            return Err(spec_error(
                "class",
                format!("load balancer class `{other}` is not supported"),
                "use `class: Network`",
            ))
        }
    }
    let classic = lb.class.as_deref() == Some("Classic");
    let internal = match lb.kind.as_deref() {
        Some("Public") | None => false,
        Some("Internal") => true,
        Some(other) => {
            return Err(spec_error(
                "type",
                format!("unknown load balancer type `{other}`"),
                "use `Public` or `Internal`",
            ))
        }
    };
    let explicit = lb.subnets.clone().unwrap_or_default();
    let placed: Vec<&ClusterSubnetSpec> = if explicit.is_empty() {
        subnets(model, internal)
    } else {
        let all = model.cluster.spec.subnets.as_deref().unwrap_or_default();
        let mut placed = Vec::new();
        for (i, wanted) in explicit.iter().enumerate() {
            let Some(subnet) = all.iter().find(|s| s.name == wanted.name) else {
                return Err(spec_error(
                    &format!("subnets[{i}].name"),
                    format!("no subnet named `{}` in spec.subnets", wanted.name),
                    "name one of the cluster's subnets",
                ));
            };
            placed.push(subnet);
        }
        placed
    };
    if placed.is_empty() {
        return Err(spec_error(
            "type",
            format!(
                "no {} subnet for the {} load balancer",
                if internal {
                    "private"
                } else {
                    "public or utility"
                },
                if internal { "internal" } else { "public" },
            ),
            "add such a subnet, or change the load balancer's type",
        ));
    }
    let name = load_balancer_name(model);
    let group_name = target_group_name(model);
    let mut attributes = std::collections::BTreeMap::new();
    let extra_ports = kops_controller_ports(model);
    if !extra_ports.is_empty() {
        // Nodes of every zone must reach kops-controller.
        attributes.insert(
            "load_balancing.cross_zone.enabled".to_string(),
            "true".to_string(),
        );
    } else if let Some(cross_zone) = lb.cross_zone_load_balancing {
        attributes.insert(
            "load_balancing.cross_zone.enabled".to_string(),
            cross_zone.to_string(),
        );
    }
    if let Some(log) = &lb.access_log {
        attributes.insert("access_logs.s3.enabled".to_string(), "true".to_string());
        attributes.insert(
            "access_logs.s3.bucket".to_string(),
            log.bucket.clone().unwrap_or_default(),
        );
        attributes.insert(
            "access_logs.s3.prefix".to_string(),
            log.bucket_prefix.clone().unwrap_or_default(),
        );
    } else {
        // kops states the access log off when the spec configures none, so
        // a load balancer without the attribute is one it would change.
        attributes.insert("access_logs.s3.enabled".to_string(), "false".to_string());
    }
    if classic {
        return build_classic(model, graph, lb, internal, &placed, attributes);
    }
    let by_subnet = |pick: fn(&kops_api::cluster::LoadBalancerSubnetSpec) -> Option<&String>| {
        explicit
            .iter()
            .filter_map(|s| {
                Some((
                    crate::model::network::subnet_name(model, &s.name),
                    pick(s)?.clone(),
                ))
            })
            .collect()
    };
    graph.add(NetworkLoadBalancer {
        additional_security_groups: lb.additional_security_groups.clone().unwrap_or_default(),
        subnet_allocations: by_subnet(|s| s.allocation_id.as_ref()),
        subnet_private_addresses: by_subnet(|s| s.private_ipv4_address.as_ref()),
        attributes,
        load_balancer_name: resource_name32(model.name(), "api"),
        scheme: if internal {
            "internal"
        } else {
            "internet-facing"
        }
        .to_string(),
        subnets: placed.iter().map(|s| subnet_ref(model, &s.name)).collect(),
        dualstack: all_ipv6(&placed),
        security_groups: vec![SecurityGroup::id_ref(&elb_group_name(model, "api"))],
        tags: model.tags(&name, &[]),
        name: name.clone(),
    })?;
    graph.add(TargetGroup {
        vpc: vpc_ref(model),
        protocol: "TCP".to_string(),
        port: API_PORT,
        health_check_protocol: "TCP".to_string(),
        health_check_path: None,
        health_check_interval: 10,
        healthy_threshold: 2,
        unhealthy_threshold: 2,
        deregistration_delay: 30,
        connection_termination: true,
        tags: model.tags(&group_name, &[]),
        name: group_name.clone(),
    })?;
    match ssl_certificate(model) {
        None => graph.add(Listener {
            name: format!("{name}-{API_PORT}"),
            load_balancer: NetworkLoadBalancer::output_ref(&name),
            port: API_PORT,
            protocol: "TCP".to_string(),
            target_group: TargetGroup::arn_ref(&group_name),
            certificate_arn: None,
            ssl_policy: None,
        })?,
        Some(certificate) => {
            let tls_name = resource_name32(model.name(), "tls");
            graph.add(TargetGroup {
                vpc: vpc_ref(model),
                protocol: "TLS".to_string(),
                port: API_PORT,
                health_check_protocol: "TCP".to_string(),
                health_check_path: None,
                health_check_interval: 10,
                healthy_threshold: 2,
                unhealthy_threshold: 2,
                deregistration_delay: 30,
                connection_termination: true,
                tags: model.tags(&tls_name, &[]),
                name: tls_name.clone(),
            })?;
            graph.add(Listener {
                name: format!("{name}-{API_PORT}"),
                load_balancer: NetworkLoadBalancer::output_ref(&name),
                port: API_PORT,
                protocol: "TLS".to_string(),
                target_group: TargetGroup::arn_ref(&tls_name),
                certificate_arn: Some(certificate),
                ssl_policy: lb.ssl_policy.clone(),
            })?;
            // Clients with certificates (kubelets, admins) still reach the
            // API servers' own TLS, on 8443.
            graph.add(Listener {
                name: format!("{name}-8443"),
                load_balancer: NetworkLoadBalancer::output_ref(&name),
                port: 8443,
                protocol: "TCP".to_string(),
                target_group: TargetGroup::arn_ref(&group_name),
                certificate_arn: None,
                ssl_policy: None,
            })?;
        }
    }
    for (prefix, port) in extra_ports {
        let group = resource_name32(model.name(), prefix);
        let kops_controller = prefix == "kops-controller";
        graph.add(TargetGroup {
            vpc: vpc_ref(model),
            protocol: "TCP".to_string(),
            port,
            // kops-controller serves HTTPS with a health endpoint.
            health_check_protocol: if kops_controller { "HTTPS" } else { "TCP" }.to_string(),
            health_check_path: kops_controller.then(|| "/healthz".to_string()),
            health_check_interval: 10,
            healthy_threshold: 2,
            unhealthy_threshold: 2,
            deregistration_delay: 30,
            connection_termination: true,
            tags: model.tags(&group, &[]),
            name: group.clone(),
        })?;
        let listener = if kops_controller {
            format!("{name}-{port}")
        } else {
            format!("{}-{port}", model.scoped(prefix))
        };
        graph.add(Listener {
            name: listener,
            load_balancer: NetworkLoadBalancer::output_ref(&name),
            port,
            protocol: "TCP".to_string(),
            target_group: TargetGroup::arn_ref(&group),
            certificate_arn: None,
            ssl_policy: None,
        })?;
    }
    Ok(())
}

/// Deletes the Classic ELB a Network Load Balancer replaced: the API's
/// `api.<cluster>` of a cluster moved off `class: Classic`, and the
/// bastion's `bastion.<cluster>` of a cluster from the days bastions had a
/// Classic ELB (kops 1.36 did both on such a move). Each deletion waits for
/// the Network Load Balancer, its listeners, the records and the
/// autoscaling groups (which detach from the old balancer first). Call
/// after every other builder: it waits for tasks already in the graph.
pub fn retire_classic(
    model: &Model<'_>,
    graph: &mut TaskGraph<AwsContext>,
) -> Result<(), ModelError> {
    let mut replaced = Vec::new();
    if uses_api_load_balancer(model) && !uses_classic(model) {
        replaced.push(load_balancer_name(model));
    }
    if model.has_role(Role::Bastion) {
        replaced.push(model.scoped("bastion"));
    }
    let later: Vec<kops_engine::TaskKey> = graph
        .iter()
        .map(|(k, _)| k)
        .filter(|k| ["AutoscalingGroup", "DnsName", "Listener"].contains(&k.kind))
        .cloned()
        .collect();
    for name in replaced {
        let nlb = NetworkLoadBalancer::output_ref(&name).key().clone();
        if graph.get(&nlb).is_none() {
            continue;
        }
        let mut after = later.clone();
        after.push(nlb);
        graph.add(ClassicLoadBalancerRetirement { name, after })?;
    }
    Ok(())
}

/// The Classic ELB of the API, as kops 1.36 built it (see the module doc).
/// `attributes` are the Network Load Balancer's, whose cross-zone setting
/// (forced on, or the spec's) the Classic one shares.
fn build_classic(
    model: &Model<'_>,
    graph: &mut TaskGraph<AwsContext>,
    lb: &kops_api::cluster::LoadBalancerAccessSpec,
    internal: bool,
    placed: &[&ClusterSubnetSpec],
    attributes: BTreeMap<String, String>,
) -> Result<(), ModelError> {
    let name = load_balancer_name(model);
    let idle_timeout = match lb.idle_timeout_seconds {
        None => 300,
        Some(seconds) => i32::try_from(seconds).map_err(|_| {
            spec_error(
                "idleTimeoutSeconds",
                format!("`{seconds}` seconds is out of range"),
                "give a number of seconds between 1 and 4000",
            )
        })?,
    };
    let emit_interval = match lb.access_log.as_ref().and_then(|l| l.interval) {
        None | Some(0) => None,
        Some(minutes) => Some(i32::try_from(minutes).map_err(|_| {
            spec_error(
                "accessLog.interval",
                format!("`{minutes}` minutes is out of range"),
                "use 5 or 60",
            )
        })?),
    };
    let access_log = lb.access_log.as_ref().map(|log| ClassicAccessLog {
        bucket: log.bucket.clone().unwrap_or_default(),
        prefix: log.bucket_prefix.clone().filter(|p| !p.is_empty()),
        emit_interval,
    });
    graph.add(ClassicLoadBalancer {
        load_balancer_name: resource_name32(model.name(), "api"),
        scheme: if internal {
            "internal"
        } else {
            "internet-facing"
        }
        .to_string(),
        subnets: placed.iter().map(|s| subnet_ref(model, &s.name)).collect(),
        security_groups: vec![SecurityGroup::id_ref(&elb_group_name(model, "api"))],
        additional_security_groups: lb.additional_security_groups.clone().unwrap_or_default(),
        listeners: BTreeMap::from([(
            API_PORT,
            ClassicListener {
                instance_port: API_PORT,
                protocol: "TCP".to_string(),
            },
        )]),
        health_check: ClassicHealthCheck {
            target: format!("SSL:{API_PORT}"),
            healthy_threshold: 2,
            unhealthy_threshold: 2,
            interval: 10,
            timeout: 5,
        },
        attributes: ClassicAttributes {
            access_log,
            connection_draining_timeout: Some(300),
            idle_timeout,
            cross_zone: attributes
                .get("load_balancing.cross_zone.enabled")
                .is_some_and(|v| v == "true"),
        },
        tags: model.tags(&name, &[]),
        name,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::security::tests::{load, model, PUBLIC};

    fn with_load_balancer(extra: &str) -> String {
        PUBLIC.replace(
            "  networkCIDR:",
            &format!(
                "  api: {{loadBalancer: {{type: Public, class: Network}}}}\n{extra}  networkCIDR:"
            ),
        )
    }

    fn graph_of(yaml: &str) -> (kops_engine::TaskGraph<AwsContext>, String) {
        let (cluster, groups) = load(yaml);
        let m = model(&cluster, &groups);
        let mut graph = TaskGraph::new();
        build(&m, &mut graph).unwrap();
        (graph, m.name().to_string())
    }

    fn task<'g, T: 'static>(
        graph: &'g TaskGraph<AwsContext>,
        kind: &'static str,
        name: &str,
    ) -> Option<&'g T> {
        graph
            .get(&kops_engine::TaskKey::new(kind, name))
            .and_then(|t| t.as_any().downcast_ref::<T>())
    }

    #[test]
    fn dns_none_adds_the_kops_controller_listener_and_target_group() {
        let (graph, cluster) = graph_of(&with_load_balancer("  topology: {dns: {type: None}}\n"));
        let group = resource_name32(&cluster, "kops-controller");
        let tg: &TargetGroup = task(&graph, TargetGroup::KIND, &group).expect("the target group");
        assert_eq!((tg.port, tg.protocol.as_str()), (3988, "TCP"));
        assert_eq!(tg.health_check_protocol, "HTTPS");
        assert_eq!(tg.health_check_path.as_deref(), Some("/healthz"));
        let listener: &Listener =
            task(&graph, Listener::KIND, &format!("api.{cluster}-3988")).expect("the listener");
        assert_eq!(listener.target_group.key().name, group);
        let lb: &NetworkLoadBalancer =
            task(&graph, NetworkLoadBalancer::KIND, &format!("api.{cluster}")).unwrap();
        assert_eq!(
            lb.attributes
                .get("load_balancing.cross_zone.enabled")
                .map(String::as_str),
            Some("true")
        );
        // No Cilium etcd: no second listener.
        assert!(graph
            .iter()
            .all(|(k, _)| !k.name.starts_with("etcd-cilium")));

        // The control plane registers in both.
        let (cluster_spec, groups) = load(&with_load_balancer("  topology: {dns: {type: None}}\n"));
        let m = model(&cluster_spec, &groups);
        let registered: Vec<String> = target_groups_for(&m, Some(Role::ControlPlane))
            .iter()
            .map(|r| r.key().name.clone())
            .collect();
        assert_eq!(registered, [target_group_name(&m), group]);
    }

    #[test]
    fn dns_none_with_cilium_etcd_adds_its_listener_too() {
        let yaml = with_load_balancer("  topology: {dns: {type: None}}\n").replace(
            "networking: {cilium: {}}",
            "networking: {cilium: {etcdManaged: true}}",
        );
        let (graph, cluster) = graph_of(&yaml);
        let group = resource_name32(&cluster, "etcd-cilium");
        let tg: &TargetGroup = task(&graph, TargetGroup::KIND, &group).expect("the target group");
        assert_eq!((tg.port, tg.health_check_protocol.as_str()), (4003, "TCP"));
        assert!(tg.health_check_path.is_none());
        let listener: &Listener = task(
            &graph,
            Listener::KIND,
            &format!("etcd-cilium.{cluster}-4003"),
        )
        .expect("the listener");
        assert_eq!(listener.port, 4003);
    }

    #[test]
    fn published_dns_has_no_kops_controller_listener() {
        let (graph, cluster) = graph_of(&with_load_balancer(""));
        assert!(task::<Listener>(&graph, Listener::KIND, &format!("api.{cluster}-3988")).is_none());
        let lb: &NetworkLoadBalancer =
            task(&graph, NetworkLoadBalancer::KIND, &format!("api.{cluster}")).unwrap();
        assert!(!lb
            .attributes
            .contains_key("load_balancing.cross_zone.enabled"));
        // No access log in the spec: stated off, as kops does.
        assert_eq!(
            lb.attributes
                .get("access_logs.s3.enabled")
                .map(String::as_str),
            Some("false")
        );
    }

    #[test]
    fn classic_builds_the_elb_kops_1_36_built_and_no_target_groups() {
        let yaml = with_load_balancer("").replace("class: Network", "class: Classic");
        let (graph, cluster) = graph_of(&yaml);
        let lb: &ClassicLoadBalancer =
            task(&graph, ClassicLoadBalancer::KIND, &format!("api.{cluster}")).expect("the ELB");
        assert_eq!(lb.load_balancer_name, resource_name32(&cluster, "api"));
        assert_eq!(lb.scheme, "internet-facing");
        assert_eq!(
            lb.listeners.get(&443),
            Some(&ClassicListener {
                instance_port: 443,
                protocol: "TCP".into()
            })
        );
        assert_eq!(lb.health_check.target, "SSL:443");
        assert_eq!((lb.health_check.interval, lb.health_check.timeout), (10, 5));
        assert_eq!(lb.attributes.connection_draining_timeout, Some(300));
        assert_eq!(lb.attributes.idle_timeout, 300);
        assert!(!lb.attributes.cross_zone);
        assert!(lb.attributes.access_log.is_none());
        assert!(graph
            .iter()
            .all(|(k, _)| k.kind != TargetGroup::KIND && k.kind != NetworkLoadBalancer::KIND));

        // The control plane attaches by name, not through target groups.
        let (cluster_spec, groups) = load(&yaml);
        let m = model(&cluster_spec, &groups);
        assert!(target_groups_for(&m, Some(Role::ControlPlane)).is_empty());
        let attached = classic_load_balancers_for(&m, Some(Role::ControlPlane));
        assert_eq!(attached.len(), 1);
        assert_eq!(attached[0].key().kind, ClassicLoadBalancer::KIND);
        assert!(classic_load_balancers_for(&m, Some(Role::Node)).is_empty());
        assert_eq!(
            crate::model::dns::api_load_balancer_ref(&m).key().kind,
            ClassicLoadBalancer::KIND
        );
    }

    #[test]
    fn classic_takes_idle_timeout_cross_zone_and_access_log_from_the_spec() {
        let yaml = PUBLIC.replace(
            "  networkCIDR:",
            "  api: {loadBalancer: {type: Public, class: Classic, idleTimeoutSeconds: 600, \
             crossZoneLoadBalancing: true, accessLog: {bucket: logs, bucketPrefix: api, interval: 5}}}\n  networkCIDR:",
        );
        let (graph, cluster) = graph_of(&yaml);
        let lb: &ClassicLoadBalancer =
            task(&graph, ClassicLoadBalancer::KIND, &format!("api.{cluster}")).unwrap();
        assert_eq!(lb.scheme, "internet-facing");
        assert_eq!(lb.attributes.idle_timeout, 600);
        assert!(lb.attributes.cross_zone);
        let log = lb.attributes.access_log.as_ref().unwrap();
        assert_eq!(
            (
                log.bucket.as_str(),
                log.prefix.as_deref(),
                log.emit_interval
            ),
            ("logs", Some("api"), Some(5))
        );
    }

    #[test]
    fn a_network_balancer_retires_the_classic_one_after_its_replacement() {
        let network = with_load_balancer("");
        let (cluster, groups) = load(&network);
        let plain = crate::model::build(&model(&cluster, &groups)).unwrap();
        assert!(plain
            .iter()
            .all(|(k, _)| k.kind != ClassicLoadBalancerRetirement::KIND));
        let graph = crate::model::build_retiring_classic(&model(&cluster, &groups)).unwrap();
        let name = format!("api.{}", cluster.name());
        let retirement: &ClassicLoadBalancerRetirement =
            task(&graph, ClassicLoadBalancerRetirement::KIND, &name).expect("the retirement");
        assert!(retirement
            .after
            .contains(&kops_engine::TaskKey::new(NetworkLoadBalancer::KIND, &name)));
        assert!(retirement
            .after
            .iter()
            .any(|k| k.kind == "AutoscalingGroup"));

        let classic = network.replace("class: Network", "class: Classic");
        let (cluster, groups) = load(&classic);
        let graph = crate::model::build_retiring_classic(&model(&cluster, &groups)).unwrap();
        assert!(graph
            .iter()
            .all(|(k, _)| k.kind != ClassicLoadBalancerRetirement::KIND));
    }

    #[test]
    fn names_match_kops() {
        assert_eq!(
            resource_name32("privatecilium.example.com", "api"),
            "api-privatecilium-example-fnt793"
        );
        assert_eq!(
            resource_name32("privatecilium.example.com", "tcp"),
            "tcp-privatecilium-example-rga1vh"
        );
        assert_eq!(
            resource_name32("complex.example.com", "api"),
            "api-complex-example-com-vd3t5n"
        );
        assert_eq!(
            resource_name32("complex.example.com", "tcp"),
            "tcp-complex-example-com-vpjolq"
        );
        // kops' minimal-dns-none and minimal-ipv6-dns-none cases.
        assert_eq!(
            resource_name32("minimal.example.com", "kops-controller"),
            "kops-controller-minimal-e-uvauf3"
        );
        assert_eq!(
            resource_name32("minimal-ipv6.example.com", "kops-controller"),
            "kops-controller-minimal-i-fg70er"
        );
    }
}
