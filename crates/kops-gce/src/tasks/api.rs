//! Direct apply: each task kind as the REST resource Google's API takes
//! ([`Spec`]: where it lives, the body kops sends, how a change is made),
//! and the generic find / compare / create / update over [`GceCloud`].
//! References to other resources are written as `projects/...` paths
//! and compared by that path, whatever host a self link names.

use std::collections::BTreeMap;

use hyper::Method;
use kops_engine::{Changes, FieldChange, OutputRef, Outputs, TaskError, TaskKey};
use serde_json::{json, Map, Value};

use super::{
    Address, BackendService, Disk, FirewallRule, ForwardingRule, ForwardingTarget, HealthCheck,
    HttpHealthCheck, InstanceGroupManager, InstanceTemplate, Network, Router, Subnet, TargetPool,
    TemplateServiceAccount,
};
use crate::cloud::GceCloud;

/// How a changed resource is brought in line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Update {
    /// `PATCH` the changed fields (with the current fingerprint).
    Patch,
    /// Only labels may change (`setLabels`); other fields are immutable.
    Labels,
    /// Nothing may change in place.
    Immutable,
}

/// A task as its REST resource.
pub(crate) struct Spec {
    /// The resource's path under the project (`global/networks/n`).
    pub path: String,
    pub body: Value,
    pub update: Update,
    /// An existing resource kops-rs uses but never creates or changes.
    pub shared: bool,
}

impl Spec {
    fn new(path: String, body: Value, update: Update) -> Spec {
        Spec {
            path,
            body,
            update,
            shared: false,
        }
    }

    /// The collection's path (`global/networks`).
    fn collection(&self) -> &str {
        self.path.rsplit_once('/').map_or("", |(c, _)| c)
    }
}

/// The field names a plan shows (a change names its top-level field).
const FIELDS: &[&str] = &[
    "autoCreateSubnetworks",
    "network",
    "ipCidrRange",
    "stackType",
    "ipv6AccessType",
    "secondaryIpRanges",
    "nats",
    "allowed",
    "sourceRanges",
    "sourceTags",
    "targetTags",
    "disabled",
    "sizeGb",
    "type",
    "labels",
    "provisionedIops",
    "provisionedThroughput",
    "baseInstanceName",
    "instanceTemplate",
    "targetSize",
    "targetPools",
    "updatePolicy",
    "listManagedInstancesResults",
    "addressType",
    "purpose",
    "subnetwork",
    "IPAddress",
    "IPProtocol",
    "loadBalancingScheme",
    "portRange",
    "ports",
    "target",
    "backendService",
    "port",
    "requestPath",
    "tcpHealthCheck",
    "httpHealthCheck",
    "httpsHealthCheck",
    "sslHealthCheck",
    "protocol",
    "healthChecks",
    "backends",
    "properties",
    "region",
];

fn field_name(key: &str) -> &'static str {
    FIELDS
        .iter()
        .find(|f| **f == key)
        .copied()
        .unwrap_or("spec")
}

/// A reference in one form, `projects/P/...`, whichever form it came in:
/// a URL of Compute's API on any host (Google answers with full URLs),
/// a `projects/...` path, or a path partial to `project`
/// (`zones/z/diskTypes/pd-ssd`), all three of which Google accepts.
/// Other text is returned as it is.
pub(crate) fn canonical(project: &str, text: &str) -> String {
    if let Some(i) = text.find("projects/") {
        let prefix = &text[..i];
        if prefix.is_empty() || prefix.ends_with("/compute/v1/") {
            return text[i..].to_string();
        }
    }
    if ["global/", "regions/", "zones/"]
        .iter()
        .any(|p| text.starts_with(p))
        && !project.is_empty()
    {
        return format!("projects/{project}/{text}");
    }
    text.to_string()
}

/// The project a found resource lives in (from its self link).
fn project_of(resource: &Value) -> &str {
    let link = resource["selfLink"].as_str().unwrap_or("");
    link.find("projects/")
        .map(|i| &link[i + "projects/".len()..])
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("")
}

/// Whether everything `want` says is in `have` (references compared in
/// their [`canonical`] form, numbers and numeric strings alike).
fn covers(project: &str, want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w
            .iter()
            .all(|(k, v)| covers(project, v, h.get(k).unwrap_or(&Value::Null))),
        (Value::Object(w), Value::Null) => w.values().all(is_empty),
        (Value::Array(w), Value::Array(h)) => match (keyed(w), keyed(h)) {
            (Some(w), Some(h)) => {
                w.len() == h.len()
                    && w.iter()
                        .all(|(k, a)| h.get(k).is_some_and(|b| covers(project, a, b)))
            }
            _ => w.len() == h.len() && w.iter().zip(h).all(|(a, b)| covers(project, a, b)),
        },
        (Value::Array(w), Value::Null) => w.is_empty(),
        (Value::String(w), Value::String(h)) => {
            w == h || canonical(project, w) == canonical(project, h)
        }
        (Value::String(w), Value::Number(h)) | (Value::Number(h), Value::String(w)) => {
            *w == h.to_string()
        }
        (Value::Bool(false), Value::Null) => true,
        (w, h) => w == h,
    }
}

/// A list of `{"key": ..., ...}` entries (metadata items) by key: Google
/// keeps them in the order sent, and kops sends them in no fixed order,
/// so only the keys and their entries count.
fn keyed(items: &[Value]) -> Option<BTreeMap<&str, &Value>> {
    if items.is_empty() {
        return None;
    }
    items
        .iter()
        .map(|item| item.get("key").and_then(Value::as_str).map(|k| (k, item)))
        .collect()
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_empty),
        Value::Bool(b) => !b,
        _ => false,
    }
}

/// What `find` found, with the body the task wants (built while the
/// project and region were at hand, for `diff`).
#[derive(Debug, Clone)]
pub struct Found {
    pub resource: Value,
    pub want: Value,
}

/// The top-level fields of the wanted body the found resource does not
/// match; a create lists none (the plan says what is created).
pub(crate) fn diff(actual: Option<&Found>) -> Changes {
    let mut changes = Changes::new();
    let Some(found) = actual else {
        return changes;
    };
    let Some(body) = found.want.as_object() else {
        return changes;
    };
    let project = project_of(&found.resource);
    for (key, want) in body {
        if key == "name" {
            continue;
        }
        let have = Some(found.resource.get(key).cloned().unwrap_or(Value::Null));
        if have.as_ref().is_some_and(|h| covers(project, want, h)) {
            continue;
        }
        if have.is_none() && is_empty(want) {
            continue;
        }
        let field = field_name(key);
        let mut inner = Vec::new();
        if let Some(have) = &have {
            if want.is_object() || want.is_array() {
                nested(project, key.to_string(), want, have, &mut inner);
            }
        }
        if inner.is_empty() || inner.len() > MAX_PATHS {
            changes.push(FieldChange {
                field,
                path: None,
                from: have.map(|h| short(&h)),
                to: short(want),
            });
        }
        for (path, from, to) in inner.into_iter().take(MAX_PATHS) {
            changes.push(FieldChange {
                field,
                path: Some(path),
                from: Some(from),
                to,
            });
        }
    }
    changes
}

/// At most this many nested paths of one field are shown; more are shown
/// as the field.
const MAX_PATHS: usize = 40;

/// The paths inside a structured field whose values differ
/// (`properties.disks[0].initializeParams.diskType`), with both values, as
/// [`covers`] decides: only what `want` says is compared.
fn nested(
    project: &str,
    path: String,
    want: &Value,
    have: &Value,
    out: &mut Vec<(String, String, String)>,
) {
    if covers(project, want, have) {
        return;
    }
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => {
            for (k, v) in w {
                let inner = h.get(k).unwrap_or(&Value::Null);
                nested(project, format!("{path}.{k}"), v, inner, out);
            }
        }
        (Value::Array(w), Value::Array(h)) if keyed(w).is_some() && keyed(h).is_some() => {
            let (w, h) = (keyed(w).unwrap_or_default(), keyed(h).unwrap_or_default());
            for (k, a) in &w {
                match h.get(k) {
                    Some(b) => nested(project, format!("{path}[{k}]"), a, b, out),
                    None => out.push((format!("{path}[{k}]"), "null".into(), short(a))),
                }
            }
            for (k, b) in h.iter().filter(|(k, _)| !w.contains_key(*k)) {
                out.push((format!("{path}[{k}]"), short(b), "null".into()));
            }
        }
        (Value::Array(w), Value::Array(h)) if w.len() == h.len() => {
            for (i, (a, b)) in w.iter().zip(h).enumerate() {
                nested(project, format!("{path}[{i}]"), a, b, out);
            }
        }
        _ => out.push((path, short(have), short(want))),
    }
}

/// A value for a plan line: long ones (metadata, user data) shortened.
fn short(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.len() > 120 {
        format!("<{} bytes>", text.len())
    } else {
        text
    }
}

/// Finds a resource by its path.
pub(crate) async fn find(cloud: &GceCloud, spec: &Spec) -> Result<Option<Value>, TaskError> {
    let found = cloud
        .get(&cloud.compute_url(&spec.path))
        .await
        .map_err(|e| e.into_task_error())?;
    if found.is_none() && spec.shared {
        return Err(TaskError::fatal(format!(
            "projects/{}/{} does not exist; it is shared (given in the cluster spec), so kops-rs does not create it\nhint: create it, or leave its id out of the spec so kops-rs manages its own",
            cloud.project, spec.path
        )));
    }
    Ok(found)
}

/// Creates or changes the resource; returns what it is now.
pub(crate) async fn apply(
    cloud: &GceCloud,
    spec: &Spec,
    actual: Option<&Value>,
    changes: &Changes,
    kind: &str,
) -> Result<Value, TaskError> {
    let fail = |e: crate::cloud::ApiError| e.into_task_error();
    let url = cloud.compute_url(&spec.path);
    match actual {
        None => {
            let inserted = cloud
                .mutate(
                    Method::POST,
                    &cloud.compute_url(spec.collection()),
                    Some(&spec.body),
                )
                .await;
            match inserted {
                Ok(_) => {}
                // A retried insert whose first try went through.
                Err(e) if e.status == 409 => {}
                Err(e) => return Err(fail(e)),
            }
        }
        Some(_) if spec.shared || changes.is_empty() => {}
        Some(actual) => match spec.update {
            Update::Patch => {
                let mut patch = Map::new();
                for change in changes.iter() {
                    if let Some(value) = spec.body.get(change.field) {
                        patch.insert(change.field.to_string(), value.clone());
                    }
                }
                if changes.iter().any(|c| c.field == "spec") {
                    patch = spec.body.as_object().cloned().unwrap_or_default();
                }
                if let Some(print) = actual.get("fingerprint") {
                    patch.insert("fingerprint".into(), print.clone());
                }
                cloud
                    .mutate(Method::PATCH, &url, Some(&Value::Object(patch)))
                    .await
                    .map_err(fail)?;
            }
            Update::Labels if changes.iter().all(|c| c.field == "labels") => {
                let body = json!({
                    "labels": spec.body["labels"],
                    "labelFingerprint": actual["labelFingerprint"],
                });
                cloud
                    .mutate(Method::POST, &format!("{url}/setLabels"), Some(&body))
                    .await
                    .map_err(fail)?;
            }
            Update::Labels | Update::Immutable => {
                let fields: Vec<&str> = changes.iter().map(|c| c.field).collect();
                return Err(TaskError::fatal(format!(
                    "{kind} {}: {} cannot be changed in place on Google Cloud\nhint: delete the {kind} so it is created again, or keep its current settings",
                    spec.path,
                    fields.join(", ")
                )));
            }
        },
    }
    cloud
        .get(&url)
        .await
        .map_err(fail)?
        .ok_or_else(|| TaskError::retryable(format!("{} not visible yet", spec.path)))
}

fn network_path(network: &TaskKey, project: &str, shared_project: Option<&str>) -> String {
    format!(
        "projects/{}/global/networks/{}",
        shared_project.unwrap_or(project),
        network.name
    )
}

impl Network {
    pub(crate) fn spec(&self, _cloud: &GceCloud) -> Spec {
        let mut spec = Spec::new(
            format!("global/networks/{}", self.name),
            json!({"name": self.name, "autoCreateSubnetworks": false}),
            Update::Immutable,
        );
        spec.shared = self.shared;
        spec
    }
}

impl Subnet {
    pub(crate) fn spec(&self, cloud: &GceCloud) -> Spec {
        let mut body = json!({
            "name": self.name,
            "network": network_path(&self.network, &cloud.project, None),
            "stackType": self.stack_type,
        });
        if let Some(cidr) = &self.cidr {
            body["ipCidrRange"] = cidr.as_str().into();
        }
        if let Some(access) = &self.ipv6_access_type {
            body["ipv6AccessType"] = access.as_str().into();
        }
        let ranges: Vec<Value> = self
            .secondary_ranges
            .iter()
            .map(|(name, cidr)| json!({"rangeName": name, "ipCidrRange": cidr}))
            .collect();
        if !ranges.is_empty() {
            body["secondaryIpRanges"] = ranges.into();
        }
        let mut spec = Spec::new(
            format!("regions/{}/subnetworks/{}", self.region, self.name),
            body,
            Update::Patch,
        );
        spec.shared = self.shared;
        spec
    }
}

impl Router {
    pub(crate) fn spec(&self, cloud: &GceCloud) -> Spec {
        let subnets: Vec<Value> = self
            .subnetworks
            .iter()
            .map(|s| {
                json!({
                    "name": format!("projects/{}/regions/{}/subnetworks/{}", cloud.project, self.region, s.name),
                    "sourceIpRangesToNat": ["ALL_IP_RANGES"],
                })
            })
            .collect();
        Spec::new(
            format!("regions/{}/routers/{}", self.region, self.name),
            json!({
                "name": self.name,
                "network": network_path(&self.network, &cloud.project, None),
                "nats": [{
                    "name": self.name,
                    "natIpAllocateOption": self.nat_ip_allocate_option,
                    "sourceSubnetworkIpRangesToNat": self.source_subnetwork_ip_ranges_to_nat,
                    "subnetworks": subnets,
                }],
            }),
            Update::Patch,
        )
    }
}

impl FirewallRule {
    pub(crate) fn spec(&self, cloud: &GceCloud) -> Spec {
        let allowed: Vec<Value> = self
            .allowed
            .iter()
            .map(|a| match a.split_once(':') {
                Some((protocol, ports)) => json!({"IPProtocol": protocol, "ports": [ports]}),
                None => json!({"IPProtocol": a}),
            })
            .collect();
        Spec::new(
            format!("global/firewalls/{}", self.name),
            json!({
                "name": self.name,
                "network": network_path(&self.network, &cloud.project, None),
                "allowed": allowed,
                "sourceRanges": self.source_ranges,
                "sourceTags": self.source_tags,
                "targetTags": self.target_tags,
                "disabled": self.disabled,
            }),
            Update::Patch,
        )
    }
}

impl Disk {
    pub(crate) fn spec(&self, _cloud: &GceCloud) -> Spec {
        let mut body = json!({
            "name": self.name,
            "sizeGb": self.size_gb.to_string(),
            "type": format!("zones/{}/diskTypes/{}", self.zone, self.volume_type),
            "labels": self.labels,
        });
        if let Some(iops) = self.iops {
            body["provisionedIops"] = iops.to_string().into();
        }
        if let Some(throughput) = self.throughput {
            body["provisionedThroughput"] = throughput.to_string().into();
        }
        Spec::new(
            format!("zones/{}/disks/{}", self.zone, self.name),
            body,
            Update::Labels,
        )
    }
}

impl InstanceTemplate {
    /// The template's properties (its name is generated: kops replaces
    /// templates, never changes them).
    pub(crate) fn properties(&self, cloud: &GceCloud, deps: &Outputs) -> Result<Value, TaskError> {
        let email = match &self.service_account {
            TemplateServiceAccount::Email(email) => Some(email.clone()),
            TemplateServiceAccount::Task(key) => deps
                .try_get(&OutputRef::<String>::new(key.clone()))?
                .cloned(),
        };
        let mut interface = json!({
            "network": network_path(&self.network, &cloud.project, None),
            "subnetwork": format!("projects/{}/regions/{}/subnetworks/{}", cloud.project, cloud.region, self.subnet.name),
            "stackType": self.stack_type,
        });
        if self.has_external_ip {
            // No name, as kops sends it: Google names an unnamed access
            // config itself, and the name changes nothing.
            interface["accessConfigs"] = json!([{"type": "ONE_TO_ONE_NAT"}]);
        }
        if !self.alias_ip_ranges.is_empty() {
            let ranges: Vec<Value> = self
                .alias_ip_ranges
                .iter()
                .map(|(name, cidr)| json!({"subnetworkRangeName": name, "ipCidrRange": cidr}))
                .collect();
            interface["aliasIpRanges"] = ranges.into();
        }
        let mut disk = json!({
            "boot": true,
            "autoDelete": true,
            // kops' name for the boot disk (its Terraform's too).
            "deviceName": "persistent-disks-0",
            "type": "PERSISTENT",
            "mode": "READ_WRITE",
            "initializeParams": {
                "diskSizeGb": self.boot_disk_size_gb.to_string(),
                "diskType": self.boot_disk_type,
                "sourceImage": self.boot_disk_image,
            },
        });
        if let Some(iops) = self.boot_disk_iops {
            disk["initializeParams"]["provisionedIops"] = iops.to_string().into();
        }
        if let Some(throughput) = self.boot_disk_throughput {
            disk["initializeParams"]["provisionedThroughput"] = throughput.to_string().into();
        }
        let metadata: Vec<Value> = self
            .metadata
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect();
        let accelerators: Vec<Value> = self
            .guest_accelerators
            .iter()
            .map(|(t, n)| json!({"acceleratorType": t, "acceleratorCount": n}))
            .collect();
        Ok(json!({
            "machineType": self.machine_type,
            "canIpForward": self.can_ip_forward,
            "disks": [disk],
            "networkInterfaces": [interface],
            "serviceAccounts": [{"email": email.unwrap_or_else(|| "<pending>".into()), "scopes": self.scopes}],
            "tags": {"items": self.tags},
            "labels": self.labels,
            "metadata": {"items": metadata},
            "scheduling": {
                "automaticRestart": self.automatic_restart,
                "onHostMaintenance": self.on_host_maintenance,
                "preemptible": self.preemptible,
                "provisioningModel": self.provisioning_model,
            },
            "guestAccelerators": accelerators,
        }))
    }
}

impl InstanceGroupManager {
    pub(crate) fn spec(&self, cloud: &GceCloud, deps: &Outputs) -> Result<Spec, TaskError> {
        let template = deps
            .try_get(&OutputRef::<String>::new(self.instance_template.clone()))?
            .cloned()
            .unwrap_or_else(|| format!("<{}>", self.instance_template));
        let pools: Vec<String> = self
            .target_pools
            .iter()
            .map(|p| {
                format!(
                    "projects/{}/regions/{}/targetPools/{}",
                    cloud.project, cloud.region, p.name
                )
            })
            .collect();
        Ok(Spec::new(
            format!("zones/{}/instanceGroupManagers/{}", self.zone, self.name),
            json!({
                "name": self.name,
                "baseInstanceName": self.base_instance_name,
                "instanceTemplate": format!("projects/{}/global/instanceTemplates/{template}", cloud.project),
                "targetSize": self.target_size,
                "targetPools": pools,
                "updatePolicy": {"minimalAction": self.minimal_action, "type": self.update_type},
                "listManagedInstancesResults": self.list_managed_instances_results,
            }),
            Update::Patch,
        ))
    }
}

impl Address {
    pub(crate) fn spec(&self, cloud: &GceCloud) -> Spec {
        let mut body = json!({"name": self.name});
        if let Some(t) = &self.address_type {
            body["addressType"] = t.as_str().into();
        }
        if let Some(p) = &self.purpose {
            body["purpose"] = p.as_str().into();
        }
        if let Some(s) = &self.subnetwork {
            body["subnetwork"] = format!(
                "projects/{}/regions/{}/subnetworks/{}",
                cloud.project, cloud.region, s.name
            )
            .into();
        }
        Spec::new(
            format!("regions/{}/addresses/{}", cloud.region, self.name),
            body,
            Update::Immutable,
        )
    }
}

impl ForwardingRule {
    pub(crate) fn spec(&self, cloud: &GceCloud, deps: &Outputs) -> Result<Spec, TaskError> {
        let address = deps
            .try_get(&OutputRef::<String>::new(self.address.clone()))?
            .cloned();
        let (p, r) = (&cloud.project, &cloud.region);
        let mut body = json!({
            "name": self.name,
            "IPAddress": address.unwrap_or_else(|| format!("<{}>", self.address)),
            "IPProtocol": self.ip_protocol,
            "loadBalancingScheme": self.load_balancing_scheme,
            "labels": self.labels,
        });
        match &self.target {
            ForwardingTarget::TargetPool { pool, port_range } => {
                body["target"] =
                    format!("projects/{p}/regions/{r}/targetPools/{}", pool.name).into();
                body["portRange"] = port_range.as_str().into();
            }
            ForwardingTarget::BackendService {
                service,
                ports,
                network,
                subnetwork,
            } => {
                body["backendService"] =
                    format!("projects/{p}/regions/{r}/backendServices/{}", service.name).into();
                body["ports"] = json!(ports);
                body["network"] = network_path(network, p, None).into();
                body["subnetwork"] =
                    format!("projects/{p}/regions/{r}/subnetworks/{}", subnetwork.name).into();
            }
        }
        Ok(Spec::new(
            format!("regions/{r}/forwardingRules/{}", self.name),
            body,
            Update::Labels,
        ))
    }
}

impl HttpHealthCheck {
    pub(crate) fn spec(&self, _cloud: &GceCloud) -> Spec {
        Spec::new(
            format!("global/httpHealthChecks/{}", self.name),
            json!({"name": self.name, "port": self.port, "requestPath": self.request_path}),
            Update::Patch,
        )
    }
}

impl HealthCheck {
    pub(crate) fn spec(&self, cloud: &GceCloud) -> Spec {
        let block = match self.protocol.as_str() {
            "SSL" => "sslHealthCheck",
            "HTTP" => "httpHealthCheck",
            "HTTPS" => "httpsHealthCheck",
            _ => "tcpHealthCheck",
        };
        let kind = if block == "tcpHealthCheck" {
            "TCP"
        } else {
            self.protocol.as_str()
        };
        let mut body = json!({"name": self.name, "type": kind});
        body[block] = json!({"port": self.port});
        Spec::new(
            format!("regions/{}/healthChecks/{}", cloud.region, self.name),
            body,
            Update::Patch,
        )
    }
}

impl BackendService {
    pub(crate) fn spec(&self, cloud: &GceCloud, deps: &Outputs) -> Result<Spec, TaskError> {
        let mut backends = Vec::new();
        for group in &self.instance_group_managers {
            let link = deps
                .try_get(&OutputRef::<String>::new(group.clone()))?
                .cloned();
            backends.push(json!({
                "balancingMode": "CONNECTION",
                "group": link.unwrap_or_else(|| format!("<{group}>")),
            }));
        }
        let checks: Vec<String> = self
            .health_checks
            .iter()
            .map(|c| {
                format!(
                    "projects/{}/regions/{}/healthChecks/{}",
                    cloud.project, cloud.region, c.name
                )
            })
            .collect();
        Ok(Spec::new(
            format!("regions/{}/backendServices/{}", cloud.region, self.name),
            json!({
                "name": self.name,
                "protocol": self.protocol,
                "loadBalancingScheme": self.load_balancing_scheme,
                "healthChecks": checks,
                "backends": backends,
            }),
            Update::Patch,
        ))
    }
}

impl TargetPool {
    pub(crate) fn spec(&self, cloud: &GceCloud) -> Spec {
        Spec::new(
            format!("regions/{}/targetPools/{}", cloud.region, self.name),
            json!({
                "name": self.name,
                "healthChecks": [format!("projects/{}/global/httpHealthChecks/{}", cloud.project, self.health_check.name)],
            }),
            Update::Immutable,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_compare_equal_in_every_form_google_accepts() {
        let found = |have: &str| Found {
            resource: json!({"selfLink": "https://www.googleapis.com/compute/v1/projects/p/zones/z/disks/d", "type": have}),
            want: json!({"name": "d", "type": "zones/z/diskTypes/pd-ssd"}),
        };
        for have in [
            "https://www.googleapis.com/compute/v1/projects/p/zones/z/diskTypes/pd-ssd",
            "http://127.0.0.1:1234/compute/v1/projects/p/zones/z/diskTypes/pd-ssd",
            "projects/p/zones/z/diskTypes/pd-ssd",
            "zones/z/diskTypes/pd-ssd",
        ] {
            assert!(diff(Some(&found(have))).is_empty(), "{have}");
        }
        for have in [
            "https://www.googleapis.com/compute/v1/projects/p/zones/z/diskTypes/pd-standard",
            "projects/other/zones/z/diskTypes/pd-ssd",
        ] {
            assert_eq!(diff(Some(&found(have))).len(), 1, "{have}");
        }
        assert_eq!(canonical("p", "pd-ssd"), "pd-ssd");
    }

    #[test]
    fn a_nested_change_names_its_path() {
        let found = Found {
            resource: json!({"selfLink": "projects/p/global/instanceTemplates/t",
                "properties": {"machineType": "e2-medium", "metadata": {"items": [{"key": "a", "value": "x".repeat(300)}]},
                    "disks": [{"boot": true, "initializeParams": {"diskType": "pd-standard", "diskSizeGb": "20"}}]}}),
            want: json!({"properties": {"machineType": "e2-medium", "metadata": {"items": [{"key": "a", "value": "x".repeat(300)}]},
                "disks": [{"boot": true, "initializeParams": {"diskType": "pd-balanced", "diskSizeGb": 20}}]}}),
        };
        let changes = diff(Some(&found));
        assert_eq!(changes.len(), 1, "{changes:?}");
        let change = changes.iter().next().unwrap();
        assert_eq!(change.field, "properties");
        assert_eq!(
            change.to_string(),
            "properties.disks[0].initializeParams.diskType: pd-standard -> pd-balanced"
        );
        assert_eq!(
            canonical("p", "https://www.googleapis.com/auth/cloud-platform"),
            "https://www.googleapis.com/auth/cloud-platform"
        );
    }

    #[test]
    fn metadata_items_compare_by_key_in_any_order() {
        let items = |order: &[(&str, &str)]| -> Value {
            order
                .iter()
                .map(|(k, v)| json!({"key": k, "value": v}))
                .collect()
        };
        let found = |have: Value, want: Value| Found {
            resource: json!({"selfLink": "projects/p/global/instanceTemplates/t",
                "properties": {"metadata": {"items": have}}}),
            want: json!({"properties": {"metadata": {"items": want}}}),
        };
        let kops = items(&[("user-data", "u"), ("ssh-keys", "k"), ("cluster-name", "c")]);
        let ours = items(&[("cluster-name", "c"), ("ssh-keys", "k"), ("user-data", "u")]);
        assert!(diff(Some(&found(kops.clone(), ours))).is_empty());

        let changed = items(&[
            ("cluster-name", "c"),
            ("ssh-keys", "k2"),
            ("user-data", "u"),
        ]);
        let changes = diff(Some(&found(kops.clone(), changed)));
        let lines: Vec<String> = changes.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            ["properties.metadata.items[ssh-keys].value: k -> k2"]
        );

        let more = items(&[
            ("cluster-name", "c"),
            ("ssh-keys", "k"),
            ("user-data", "u"),
            ("kube-env", "e"),
        ]);
        let changes = diff(Some(&found(kops, more)));
        let lines: Vec<String> = changes.iter().map(ToString::to_string).collect();
        assert_eq!(lines, ["properties.metadata.items[kube-env]: null -> {\"key\":\"kube-env\",\"value\":\"e\"}"]);
    }
}
