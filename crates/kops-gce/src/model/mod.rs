//! The GCE model builders: from the cluster spec and its instance groups
//! to the graph of GCE tasks (kops' `pkg/model/gcemodel`). Pure: no IO.

mod api;
mod compute;
mod firewall;
mod iam;
mod network;

pub use api::api_server_address_names;

use kops_api::{ClusterSubnetSpec, InstanceGroup, Role, SubnetType};
use kops_engine::{TaskGraph, TaskKey};
use kops_model::{Model, ModelError};

use crate::names;
use crate::tasks::{GceContext, Network, Subnet};

/// What the GCE builders read: the cloud-neutral model plus the project
/// and region.
pub struct GceModel<'a> {
    pub model: &'a Model<'a>,
    pub project: &'a str,
    pub region: &'a str,
}

/// Builds every GCE task for the cluster.
pub fn build(gce: &GceModel<'_>) -> Result<TaskGraph<GceContext>, ModelError> {
    let mut graph = TaskGraph::new();
    network::build(gce, &mut graph)?;
    firewall::build(gce, &mut graph)?;
    firewall::build_external_access(gce, &mut graph)?;
    iam::build(gce, &mut graph)?;
    compute::build_volumes(gce, &mut graph)?;
    compute::build(gce, &mut graph)?;
    api::build(gce, &mut graph)?;
    graph.validate()?;
    Ok(graph)
}

/// `networking.gce` or `networking.kindnet`: pods get IP aliases.
pub fn uses_ip_alias(cluster: &kops_api::Cluster) -> bool {
    cluster
        .spec
        .networking
        .as_ref()
        .is_some_and(|n| n.gce.is_some() || n.kindnet.is_some())
}

impl GceModel<'_> {
    pub fn cluster_name(&self) -> &str {
        self.model.name()
    }

    pub fn subnets(&self) -> &[ClusterSubnetSpec] {
        self.model
            .cluster
            .spec
            .subnets
            .as_deref()
            .unwrap_or_default()
    }

    pub fn groups(&self) -> &[InstanceGroup] {
        self.model.groups
    }

    /// The network task's name: `spec.networkID` (its last part) or the
    /// cluster's own network.
    pub fn network_key(&self) -> TaskKey {
        Network::key_of(&self.network_name_and_project().0)
    }

    /// `spec.networkID` as (name, project), or the cluster's own network.
    pub fn network_name_and_project(&self) -> (String, Option<String>) {
        match self.model.cluster.spec.network_id.as_deref() {
            Some(id) if !id.is_empty() => {
                let id = id.trim_start_matches("https://www.googleapis.com/compute/v1/");
                let parts: Vec<&str> = id.split('/').collect();
                match parts.as_slice() {
                    ["projects", project, "global", "networks", name] => {
                        (name.to_string(), Some(project.to_string()))
                    }
                    [project, name] => (name.to_string(), Some(project.to_string())),
                    _ => (id.to_string(), None),
                }
            }
            _ => (names::network_name(self.cluster_name()), None),
        }
    }

    /// A subnet's task name: its `id`, or `<name>-<cluster>`.
    pub fn subnet_name(&self, subnet: &ClusterSubnetSpec) -> String {
        match subnet.id.as_deref() {
            Some(id) if !id.is_empty() => id.to_string(),
            _ => names::suffixed(&subnet.name, self.cluster_name()),
        }
    }

    pub fn subnet_key(&self, subnet: &ClusterSubnetSpec) -> TaskKey {
        Subnet::key_of(&self.subnet_name(subnet))
    }

    /// The network tag of a role (`control-plane`, `node`, `master`...).
    pub fn tag(&self, role: &str) -> String {
        names::tag_for_role(self.cluster_name(), role)
    }

    pub fn has_api_server_only_groups(&self) -> bool {
        self.model.has_role(Role::ApiServer)
    }

    /// The tags of instances serving the API: the control plane's, and the
    /// API-server groups' when there are any.
    pub fn api_server_target_tags(&self) -> Vec<String> {
        let mut tags = vec![self.tag("control-plane")];
        if self.has_api_server_only_groups() {
            tags.push(self.tag("apiserver"));
        }
        tags
    }

    /// The API-serving tags plus the legacy `master` tag.
    pub fn control_plane_tags(&self) -> Vec<String> {
        let mut tags = self.api_server_target_tags();
        tags.push(self.tag("master"));
        tags
    }

    /// `networking.gce` or `networking.kindnet`: pods get IP aliases.
    pub fn uses_ip_alias(&self) -> bool {
        uses_ip_alias(self.model.cluster)
    }

    pub fn uses_gce_routes(&self) -> bool {
        self.networking_has(|n| n.kubenet.is_some())
    }

    fn networking_has(&self, f: impl Fn(&kops_api::networking::NetworkingSpec) -> bool) -> bool {
        self.model.cluster.spec.networking.as_ref().is_some_and(f)
    }

    pub fn uses_calico(&self) -> bool {
        self.networking_has(|n| n.calico.is_some())
    }

    pub fn uses_cilium(&self) -> bool {
        self.networking_has(|n| n.cilium.is_some())
    }

    /// Cilium with its own etcd cluster (an etcd cluster named `cilium`).
    pub fn uses_cilium_etcd(&self) -> bool {
        self.uses_cilium()
            && self
                .model
                .cluster
                .spec
                .etcd_clusters
                .iter()
                .flatten()
                .any(|e| e.name == "cilium")
    }

    /// The API load balancer's type, when there is one: `Public` or `Internal`.
    pub fn api_load_balancer_type(&self) -> Option<&str> {
        let lb = self
            .model
            .cluster
            .spec
            .api
            .as_ref()?
            .load_balancer
            .as_ref()?;
        Some(lb.kind.as_deref().unwrap_or("Public"))
    }

    /// `dns: None`: workers reach kops-controller through the load balancer.
    pub fn uses_load_balancer_for_kops_controller(&self) -> bool {
        self.model.uses_none_dns()
    }

    /// The cluster's service account when the spec names one (all
    /// instances run as it): `cloudConfig.gceServiceAccount`.
    pub fn shared_service_account(&self) -> Option<String> {
        let spec = &self.model.cluster.spec;
        let from_cloud_config = spec
            .cloud_config
            .as_ref()
            .and_then(|c| c.gce_service_account.as_deref());
        let from_provider = spec
            .extra
            .get("cloudProvider")
            .and_then(|c| c.get("gce"))
            .and_then(|g| g.get("serviceAccount"))
            .and_then(|v| v.as_str());
        from_cloud_config
            .or(from_provider)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    }

    /// The subnets of a group, as spec entries.
    pub fn group_subnets(&self, group: &InstanceGroup) -> Vec<&ClusterSubnetSpec> {
        group
            .spec
            .subnets
            .iter()
            .flatten()
            .filter_map(|name| self.subnets().iter().find(|s| &s.name == name))
            .collect()
    }

    /// The zones of a group: its `zones`, else its subnets' zones.
    pub fn group_zones(&self, group: &InstanceGroup) -> Vec<String> {
        match &group.spec.zones {
            Some(zones) if !zones.is_empty() => zones.clone(),
            _ => self
                .group_subnets(group)
                .iter()
                .filter_map(|s| s.zone.clone())
                .collect(),
        }
    }

    /// Whether a group's subnets are private (no external IP).
    pub fn subnet_is_public(subnet: &ClusterSubnetSpec) -> bool {
        matches!(
            subnet.subnet_type(),
            Some(SubnetType::Public) | Some(SubnetType::Utility) | None
        )
    }

    /// A spec error at `path`.
    pub fn error(
        path: impl Into<String>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> ModelError {
        ModelError::Spec {
            path: path.into(),
            message: message.into(),
            hint: hint.into(),
        }
    }
}
