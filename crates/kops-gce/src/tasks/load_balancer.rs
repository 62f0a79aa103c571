//! The API's load balancers: the public one (HTTP health check, target
//! pool, external address and forwarding rule) and the internal one
//! (region health check, region backend service, internal addresses and
//! forwarding rules per subnetwork).

use std::collections::BTreeMap;

use kops_engine::TaskKey;

/// A reserved IP address: external, or internal in a subnetwork.
#[derive(Debug, Clone, PartialEq)]
pub struct Address {
    pub name: String,
    /// `INTERNAL` for an internal address (none: external).
    pub address_type: Option<String>,
    /// `SHARED_LOADBALANCER_VIP`.
    pub purpose: Option<String>,
    pub subnetwork: Option<TaskKey>,
}

impl Address {
    pub const KIND: &'static str = "Address";

    pub fn key_of(name: &str) -> TaskKey {
        TaskKey::new(Self::KIND, name)
    }

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        self.subnetwork.iter().cloned().collect()
    }
}

/// Where a forwarding rule sends its traffic.
#[derive(Debug, Clone, PartialEq)]
pub enum ForwardingTarget {
    /// A target pool, over a port range (external).
    TargetPool { pool: TaskKey, port_range: String },
    /// A region backend service, on ports, in a network and subnetwork
    /// (internal).
    BackendService {
        service: TaskKey,
        ports: Vec<String>,
        network: TaskKey,
        subnetwork: TaskKey,
    },
}

/// A forwarding rule: an address and ports in front of a pool or service.
#[derive(Debug, Clone, PartialEq)]
pub struct ForwardingRule {
    pub name: String,
    pub address: TaskKey,
    pub ip_protocol: String,
    /// `EXTERNAL` or `INTERNAL`.
    pub load_balancing_scheme: String,
    pub target: ForwardingTarget,
    pub labels: BTreeMap<String, String>,
}

impl ForwardingRule {
    pub const KIND: &'static str = "ForwardingRule";

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        let mut deps = vec![self.address.clone()];
        match &self.target {
            ForwardingTarget::TargetPool { pool, .. } => deps.push(pool.clone()),
            ForwardingTarget::BackendService {
                service,
                network,
                subnetwork,
                ..
            } => deps.extend([service.clone(), network.clone(), subnetwork.clone()]),
        }
        deps
    }
}

/// A legacy HTTP health check (target pools use these).
#[derive(Debug, Clone, PartialEq)]
pub struct HttpHealthCheck {
    pub name: String,
    pub port: i64,
    pub request_path: String,
}

impl HttpHealthCheck {
    pub const KIND: &'static str = "HttpHealthCheck";

    pub fn key_of(name: &str) -> TaskKey {
        TaskKey::new(Self::KIND, name)
    }

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        Vec::new()
    }
}

/// A regional health check (backend services use these).
#[derive(Debug, Clone, PartialEq)]
pub struct HealthCheck {
    pub name: String,
    pub port: i64,
    /// `TCP` or `SSL`.
    pub protocol: String,
}

impl HealthCheck {
    pub const KIND: &'static str = "HealthCheck";

    pub fn key_of(name: &str) -> TaskKey {
        TaskKey::new(Self::KIND, name)
    }

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        Vec::new()
    }
}

/// A regional backend service over managed instance groups.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendService {
    pub name: String,
    pub protocol: String,
    pub load_balancing_scheme: String,
    pub health_checks: Vec<TaskKey>,
    pub instance_group_managers: Vec<TaskKey>,
}

impl BackendService {
    pub const KIND: &'static str = "BackendService";

    pub fn key_of(name: &str) -> TaskKey {
        TaskKey::new(Self::KIND, name)
    }

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        let mut deps = self.health_checks.clone();
        deps.extend(self.instance_group_managers.iter().cloned());
        deps
    }
}

/// A target pool, checked by an HTTP health check.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetPool {
    pub name: String,
    pub health_check: TaskKey,
}

impl TargetPool {
    pub const KIND: &'static str = "TargetPool";

    pub fn key_of(name: &str) -> TaskKey {
        TaskKey::new(Self::KIND, name)
    }

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.health_check.clone()]
    }
}
