//! A cluster's managed instance groups as they run, for `get instances`,
//! `validate cluster`, `rolling-update cluster`, `delete instance` and
//! `toolbox dump`, read as kops reads them on GCE:
//!
//! - the cluster's instance templates are those whose `cluster-name`
//!   metadata names it;
//! - its groups are the region's managed instance groups whose current
//!   template is one of them (one `aggregatedList`);
//! - each group's instances come from `listManagedInstances`: an instance
//!   is up to date when its intended template (`version.instanceTemplate`)
//!   is the group's current template, else it needs an update;
//! - their addresses, machine types and roles (`k8s-io-role-*` labels)
//!   from one `aggregatedList` of the cluster's instances (kops reads each
//!   instance with `instances.get`; one list answers the same).
//!
//! Replacing an instance is `recreateInstances`: the group deletes it and
//! makes it again, same name, from its current template. GCE has no way
//! to take an instance out of a group while it keeps running, so there is
//! no surge (kops: "gce cloud provider does not support surging").

use std::collections::{BTreeMap, BTreeSet};

use hyper::Method;
use serde_json::{json, Value};

use crate::cloud::{encode, ApiError, GceCloud};

/// One managed instance group of the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedGroup {
    pub name: String,
    pub zone: String,
    /// The name of the template it makes instances from now.
    pub template: String,
    pub target_size: i64,
    /// Its `kops-k8s-io-instance-group-name` (from the template's metadata).
    pub instance_group: Option<String>,
    pub instances: Vec<ManagedInstance>,
}

/// One instance of a managed group.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ManagedInstance {
    pub name: String,
    /// Google's numeric id (new when the instance is recreated).
    pub id: String,
    /// `RUNNING`, `STAGING`, ...; empty while it does not exist.
    pub status: String,
    /// What the group is doing to it: `NONE`, `CREATING`, `RECREATING`...
    pub current_action: String,
    /// The name of the template it is meant to run.
    pub template: Option<String>,
    pub machine_type: Option<String>,
    pub roles: Vec<String>,
    pub internal_ip: Option<String>,
    pub external_ip: Option<String>,
}

impl ManagedGroup {
    /// Whether `instance` runs another template than the group makes now.
    pub fn is_outdated(&self, instance: &ManagedInstance) -> bool {
        instance.template.as_deref() != Some(self.template.as_str())
    }
}

/// The last path segment of a URL or path.
fn last(text: &str) -> &str {
    text.rsplit('/').next().unwrap_or(text)
}

fn metadata<'a>(resource: &'a Value, key: &str) -> Option<&'a str> {
    resource["metadata"]["items"]
        .as_array()?
        .iter()
        .find(|i| i["key"] == key)
        .and_then(|i| i["value"].as_str())
}

/// The cluster's instance templates: name → its instance group's name.
pub async fn cluster_templates(
    cloud: &GceCloud,
    cluster: &str,
) -> Result<BTreeMap<String, Option<String>>, ApiError> {
    Ok(cloud
        .instance_templates()
        .await?
        .iter()
        .filter(|t| metadata(&t["properties"], "cluster-name") == Some(cluster))
        .filter_map(|t| {
            let group = metadata(&t["properties"], "kops-k8s-io-instance-group-name");
            Some((t["name"].as_str()?.to_string(), group.map(str::to_string)))
        })
        .collect())
}

/// Every item of a paged `aggregatedList` (`collection`: `instances`...),
/// with the zone (or region) it is in, for the cloud's region only.
pub async fn aggregated(
    cloud: &GceCloud,
    collection: &str,
    filter: Option<&str>,
) -> Result<Vec<(String, Value)>, ApiError> {
    let mut url = cloud.compute_url(&format!("aggregated/{collection}"));
    if let Some(f) = filter {
        url = format!("{url}?filter={}", encode(f));
    }
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let sep = if url.contains('?') { '&' } else { '?' };
        let page_url = match &token {
            Some(t) => format!("{url}{sep}pageToken={}", encode(t)),
            None => url.clone(),
        };
        let page = cloud.call(Method::GET, &page_url, None).await?;
        for (scope, entry) in page["items"].as_object().into_iter().flatten() {
            let place = last(scope);
            let in_region = place == cloud.region
                || place
                    .strip_prefix(&cloud.region)
                    .is_some_and(|rest| rest.starts_with('-'));
            if !in_region {
                continue;
            }
            for item in entry[collection].as_array().into_iter().flatten() {
                out.push((place.to_string(), item.clone()));
            }
        }
        match page["nextPageToken"].as_str().filter(|t| !t.is_empty()) {
            Some(t) => token = Some(t.to_string()),
            None => return Ok(out),
        }
    }
}

/// A managed group's instances (`listManagedInstances`, paged).
async fn managed_instances(
    cloud: &GceCloud,
    zone: &str,
    group: &str,
) -> Result<Vec<Value>, ApiError> {
    let url = cloud.compute_url(&format!(
        "zones/{zone}/instanceGroupManagers/{group}/listManagedInstances"
    ));
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page_url = match &token {
            Some(t) => format!("{url}?pageToken={}", encode(t)),
            None => url.clone(),
        };
        let page = cloud.call(Method::POST, &page_url, None).await?;
        out.extend(
            page["managedInstances"]
                .as_array()
                .into_iter()
                .flatten()
                .cloned(),
        );
        match page["nextPageToken"].as_str().filter(|t| !t.is_empty()) {
            Some(t) => token = Some(t.to_string()),
            None => return Ok(out),
        }
    }
}

/// The cluster's instances by name, as `instances.aggregatedList` shows
/// them (filtered by the cluster's label).
pub async fn cluster_instances(
    cloud: &GceCloud,
    cluster: &str,
) -> Result<BTreeMap<String, (String, Value)>, ApiError> {
    let filter = format!(
        "labels.k8s-io-cluster-name = {}",
        crate::names::safe_cluster_name(cluster)
    );
    Ok(aggregated(cloud, "instances", Some(&filter))
        .await?
        .into_iter()
        .filter_map(|(zone, i)| Some((i["name"].as_str()?.to_string(), (zone, i))))
        .collect())
}

/// Roles from `k8s-io-role-*` labels (`master` read as `control-plane`).
fn roles(instance: &Value) -> Vec<String> {
    let mut roles = BTreeSet::new();
    for key in instance["labels"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
    {
        if let Some(role) = key.strip_prefix("k8s-io-role-") {
            roles.insert(
                if role == "master" {
                    "control-plane"
                } else {
                    role
                }
                .to_string(),
            );
        }
    }
    roles.into_iter().collect()
}

/// The cluster's managed instance groups with their instances.
pub async fn cluster_groups(
    cloud: &GceCloud,
    cluster: &str,
) -> Result<Vec<ManagedGroup>, ApiError> {
    let templates = cluster_templates(cloud, cluster).await?;
    let managers = aggregated(cloud, "instanceGroupManagers", None).await?;
    let instances = cluster_instances(cloud, cluster).await?;
    let mut groups = Vec::new();
    for (zone, manager) in managers {
        let template = last(manager["instanceTemplate"].as_str().unwrap_or("")).to_string();
        let Some(instance_group) = templates.get(&template) else {
            continue;
        };
        let name = manager["name"].as_str().unwrap_or_default().to_string();
        let mut members = Vec::new();
        for m in managed_instances(cloud, &zone, &name).await? {
            let instance_name = m["name"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| last(m["instance"].as_str().unwrap_or("")).to_string());
            let details = instances.get(&instance_name).map(|(_, i)| i);
            let interface = details.map(|i| &i["networkInterfaces"][0]);
            members.push(ManagedInstance {
                id: m["id"].as_str().unwrap_or_default().to_string(),
                status: m["instanceStatus"].as_str().unwrap_or_default().to_string(),
                current_action: m["currentAction"].as_str().unwrap_or("NONE").to_string(),
                template: m["version"]["instanceTemplate"]
                    .as_str()
                    .filter(|t| !t.is_empty())
                    .map(|t| last(t).to_string()),
                machine_type: details
                    .and_then(|i| i["machineType"].as_str())
                    .map(|t| last(t).to_string()),
                roles: details.map(roles).unwrap_or_default(),
                internal_ip: interface
                    .and_then(|n| n["networkIP"].as_str())
                    .map(str::to_string),
                external_ip: interface
                    .and_then(|n| n["accessConfigs"][0]["natIP"].as_str())
                    .map(str::to_string),
                name: instance_name,
            });
        }
        members.sort_by(|a, b| a.name.cmp(&b.name));
        groups.push(ManagedGroup {
            name,
            zone,
            template,
            target_size: manager["targetSize"].as_i64().unwrap_or(0),
            instance_group: instance_group.clone(),
            instances: members,
        });
    }
    groups.sort_by(|a, b| (&a.name, &a.zone).cmp(&(&b.name, &b.zone)));
    Ok(groups)
}

/// Has the group recreate `instance` from its current template (kops'
/// `DeleteInstance` on GCE); an instance already gone is not an error.
pub async fn recreate(
    cloud: &GceCloud,
    zone: &str,
    group: &str,
    instance: &str,
) -> Result<(), ApiError> {
    let url = cloud.compute_url(&format!(
        "zones/{zone}/instanceGroupManagers/{group}/recreateInstances"
    ));
    let body = json!({"instances": [format!("zones/{zone}/instances/{instance}")]});
    match cloud.mutate(Method::POST, &url, Some(&body)).await {
        Err(e) if e.is_not_found() => Ok(()),
        other => other.map(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_come_from_role_labels_with_master_as_control_plane() {
        let i = json!({"labels": {
            "k8s-io-role-master": "master",
            "k8s-io-role-control-plane": "control-plane",
            "k8s-io-cluster-name": "c",
        }});
        assert_eq!(roles(&i), ["control-plane"]);
        let group = ManagedGroup {
            name: "a-nodes-c".into(),
            zone: "us-test1-a".into(),
            template: "nodes-c-2".into(),
            target_size: 1,
            instance_group: Some("nodes".into()),
            instances: Vec::new(),
        };
        let mut i = ManagedInstance {
            template: Some("nodes-c-1".into()),
            ..Default::default()
        };
        assert!(group.is_outdated(&i));
        i.template = Some("nodes-c-2".into());
        assert!(!group.is_outdated(&i));
    }
}
