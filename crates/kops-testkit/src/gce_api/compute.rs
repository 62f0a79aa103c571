//! Compute Engine: resources under `compute/v1/projects/{project}/`
//! (global, regional, zonal), mutations through operations, managed
//! instance groups that make their instances from their template.

use serde_json::{json, Map, Value};

use super::error::ApiError;
use super::{fingerprint, page, timestamp, Incoming, Operation, State};

/// The collections the server stores (references to others, such as
/// images or machine types, are not checked).
const STORED: [&str; 15] = [
    "networks",
    "subnetworks",
    "firewalls",
    "routers",
    "addresses",
    "forwardingRules",
    "httpHealthChecks",
    "healthChecks",
    "backendServices",
    "targetPools",
    "instanceTemplates",
    "instanceGroupManagers",
    "disks",
    "instances",
    "routes",
];

/// Fields whose strings are not references.
const NOT_REFERENCES: [&str; 5] = [
    "metadata",
    "labels",
    "description",
    "selfLink",
    "instanceGroup",
];

pub(crate) fn handle(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let collection = call.id.split('.').nth(1).unwrap_or("");
    let is_operations = collection.ends_with("Operations");
    match (collection, call.verb()) {
        ("projects", "get") => return Ok(project(state, call.var("project"))),
        ("zones" | "regions", "get" | "list") => return places(state, call, collection),
        _ => {}
    }
    match call.verb() {
        "get" if is_operations => get_operation(state, call.path, false),
        // `POST .../operations/NAME/wait`: the operation is the path
        // without its verb.
        "wait" if is_operations => get_operation(
            state,
            call.path.strip_suffix("/wait").unwrap_or(call.path),
            true,
        ),
        "get" => state
            .resources
            .get(call.path)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&relative(call.path))),
        "list" => list(state, call),
        "aggregatedList" => aggregated_list(state, call),
        "insert" => insert(state, call),
        "delete" => delete(state, call),
        "patch" | "update" => modify(state, call),
        "setLabels" => set_labels(state, call),
        "setMetadata" | "setTags" => set_fingerprinted(state, call),
        "resize"
        | "setInstanceTemplate"
        | "setTargetPools"
        | "deleteInstances"
        | "recreateInstances" => group_change(state, call),
        "listManagedInstances" => list_managed_instances(state, call),
        "getShieldedInstanceIdentity" => shielded_identity(state, call.path),
        "addHealthCheck" | "removeHealthCheck" | "addInstance" | "removeInstance" => {
            pool_change(state, call)
        }
        _ => Err(ApiError::not_implemented(call.id)),
    }
}

/// `projects/...` from a stored path.
fn relative(path: &str) -> String {
    path.strip_prefix("compute/v1/").unwrap_or(path).to_string()
}

/// The stored path a reference names, when it names a stored collection.
fn reference_path(project: &str, text: &str) -> Option<String> {
    let tail = if let Some(i) = text.find("projects/") {
        text[i..].to_string()
    } else if ["global/", "regions/", "zones/"]
        .iter()
        .any(|p| text.starts_with(p))
    {
        format!("projects/{project}/{text}")
    } else {
        return None;
    };
    let parts: Vec<&str> = tail.split('/').collect();
    // `projects/P/global/KIND/NAME` or `projects/P/{regions,zones}/S/KIND/NAME`.
    let scoped = matches!(parts.get(2), Some(&"regions" | &"zones"));
    if parts.len() != if scoped { 6 } else { 5 } || !STORED.contains(&parts[parts.len() - 2]) {
        return None;
    }
    Some(format!("compute/v1/{tail}"))
}

/// Google's form of a reference: a `projects/...` path, a path partial
/// to the project (`global/...`, `regions/...`, `zones/...`) or a URL of
/// Compute's v1 API on any host becomes
/// `https://www.googleapis.com/compute/v1/projects/...`, as Compute Engine
/// stores every reference it is given. Anything else is left as it is.
pub(crate) fn expand_reference(project: &str, text: &str) -> Option<String> {
    let tail = if let Some(rest) = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
    {
        let (_, path) = rest.split_once('/')?;
        path.strip_prefix("compute/v1/projects/")
            .map(|t| format!("projects/{t}"))?
    } else if text.starts_with("projects/") {
        text.to_string()
    } else if ["global/", "regions/", "zones/"]
        .iter()
        .any(|p| text.starts_with(p))
    {
        format!("projects/{project}/{text}")
    } else {
        return None;
    };
    Some(format!("{}/compute/v1/{tail}", super::GOOGLE))
}

/// Rewrites every reference in a body as Google stores it
/// ([`expand_reference`]), skipping fields that are not references.
pub(crate) fn expand_references(project: &str, value: &mut Value) {
    match value {
        Value::String(text) => {
            if let Some(full) = expand_reference(project, text) {
                *text = full;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| expand_references(project, v)),
        Value::Object(map) => map
            .iter_mut()
            .filter(|(k, _)| !NOT_REFERENCES.contains(&k.as_str()))
            .for_each(|(_, v)| expand_references(project, v)),
        _ => {}
    }
}

/// Every reference string in a resource, skipping non-reference fields.
fn references(project: &str, value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.extend(reference_path(project, text)),
        Value::Array(items) => items.iter().for_each(|v| references(project, v, out)),
        Value::Object(map) => map
            .iter()
            .filter(|(k, _)| !NOT_REFERENCES.contains(&k.as_str()))
            .for_each(|(_, v)| references(project, v, out)),
        _ => {}
    }
}

fn check_references(state: &State, project: &str, body: &Value) -> Result<(), ApiError> {
    let mut refs = Vec::new();
    references(project, body, &mut refs);
    match refs.iter().find(|r| !state.resources.contains_key(*r)) {
        Some(missing) => Err(ApiError::not_found(&relative(missing))),
        None => Ok(()),
    }
}

/// The scope part of a path: `zones/z`, `regions/r` or `global`.
fn scope(call: &Incoming<'_>) -> String {
    if !call.var("zone").is_empty() {
        format!("zones/{}", call.var("zone"))
    } else if !call.var("region").is_empty() {
        format!("regions/{}", call.var("region"))
    } else {
        "global".to_string()
    }
}

/// Fills what Google sets on a stored Compute resource when missing.
pub(crate) fn with_defaults(state: &mut State, path: &str, mut resource: Value) -> Value {
    if !path.starts_with("compute/v1/") {
        return resource;
    }
    let project = path.split('/').nth(3).unwrap_or("").to_string();
    expand_references(&project, &mut resource);
    drop_empty_lists(&mut resource);
    default_network_tier(&mut resource);
    let Some(object) = resource.as_object_mut() else {
        return resource;
    };
    let id = state.next_id();
    object
        .entry("id")
        .or_insert_with(|| Value::String((id * 7_919 + 4_000_000_000).to_string()));
    object
        .entry("creationTimestamp")
        .or_insert_with(|| timestamp().into());
    object.insert("selfLink".into(), state.link(path).into());
    if let Some(name) = path.rsplit('/').next() {
        object.entry("name").or_insert_with(|| name.into());
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts.len() > 6 && (parts[4] == "zones" || parts[4] == "regions") {
        let key = if parts[4] == "zones" {
            "zone"
        } else {
            "region"
        };
        let link = state.link(&parts[..6].join("/"));
        object.entry(key).or_insert_with(|| link.into());
    }
    // A regional backend service of a passthrough load balancer
    // (`INTERNAL` or `EXTERNAL` scheme) balances by connection, the only
    // mode Google allows there: a backend sent without a mode reads back
    // with `CONNECTION`.
    if path.contains("/regions/") && path.contains("/backendServices/") {
        let passthrough = matches!(
            object.get("loadBalancingScheme").and_then(Value::as_str),
            Some("INTERNAL" | "EXTERNAL")
        );
        if passthrough {
            for backend in object
                .get_mut("backends")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(backend) = backend.as_object_mut() {
                    backend
                        .entry("balancingMode")
                        .or_insert_with(|| "CONNECTION".into());
                }
            }
        }
    }
    refresh_fingerprints(object);
    resource
}

/// An external access config without a tier gets the project's default
/// tier, `PREMIUM` unless the project changed it (Google's default).
fn default_network_tier(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                if key == "accessConfigs" {
                    for config in field.as_array_mut().into_iter().flatten() {
                        if let Some(config) = config.as_object_mut() {
                            config
                                .entry("networkTier")
                                .or_insert_with(|| "PREMIUM".into());
                        }
                    }
                } else {
                    default_network_tier(field);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(default_network_tier),
        _ => {}
    }
}

/// Google's answers leave out repeated fields that are empty (proto3's
/// JSON form): a list sent empty reads back absent.
fn drop_empty_lists(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !matches!(v, Value::Array(a) if a.is_empty()));
            map.values_mut().for_each(drop_empty_lists);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_empty_lists),
        _ => {}
    }
}

/// Recomputes the fingerprints a resource carries.
fn refresh_fingerprints(object: &mut Map<String, Value>) {
    let labels = object.get("labels").cloned().unwrap_or(json!({}));
    object.insert("labelFingerprint".into(), fingerprint(&labels).into());
    for field in ["metadata", "tags"] {
        if let Some(Value::Object(inner)) = object.get_mut(field) {
            inner.remove("fingerprint");
            let print = fingerprint(&Value::Object(inner.clone()));
            inner.insert("fingerprint".into(), print.into());
        }
    }
    if object.contains_key("fingerprint") {
        object.remove("fingerprint");
        let print = fingerprint(&Value::Object(object.clone()));
        object.insert("fingerprint".into(), print.into());
    }
}

/// Starts an operation on `target` that applies `effect` when done.
fn operation(state: &mut State, call: &Incoming<'_>, target: &str, effect: super::Effect) -> Value {
    let project = call.var("project");
    let scope = scope(call);
    let id = state.next_id();
    let name = format!("operation-{id}-{:08x}", (state.random() * 4e9) as u64);
    let path = format!("compute/v1/projects/{project}/{scope}/operations/{name}");
    let mut json = json!({
        "kind": "compute#operation",
        "id": (id * 31 + 7_000_000_000).to_string(),
        "name": name,
        "operationType": call.verb(),
        "targetLink": state.link(target),
        "targetId": state.resources.get(target).and_then(|r| r["id"].as_str()).unwrap_or("0"),
        "status": "PENDING",
        "user": "kops-testkit@example.com",
        "progress": 0,
        "insertTime": timestamp(),
        "selfLink": state.link(&path),
    });
    if scope != "global" {
        let key = if scope.starts_with("zones/") {
            "zone"
        } else {
            "region"
        };
        json[key] = state
            .link(&format!("compute/v1/projects/{project}/{scope}"))
            .into();
    }
    state.operations.push(Operation {
        path,
        json: json.clone(),
        started: std::time::Instant::now(),
        effect: Some(effect),
    });
    json
}

fn get_operation(state: &mut State, path: &str, wait: bool) -> Result<Value, ApiError> {
    let index = state
        .operations
        .iter()
        .position(|op| op.path == path)
        .ok_or_else(|| ApiError::not_found(&relative(path)))?;
    if wait && !state.wait_returns_early && state.operations[index].json["status"] != "DONE" {
        state.finish(index);
    }
    Ok(state.operations[index].json.clone())
}

/// Whether an unfinished operation of `verb` targets `path`.
fn pending(state: &State, path: &str, verb: &str) -> bool {
    let link = state.link(path);
    state.operations.iter().any(|op| {
        op.json["status"] != "DONE"
            && op.json["targetLink"] == link.as_str()
            && op.json["operationType"] == verb
    })
}

fn existing(state: &State, path: &str) -> Result<Value, ApiError> {
    state
        .resources
        .get(path)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&relative(path)))
}

fn check_name(name: &str) -> Result<(), ApiError> {
    let bytes = name.as_bytes();
    let ok = (1..=63).contains(&bytes.len())
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[bytes.len() - 1] != b'-';
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(format!(
            "Invalid value for field 'resource.name': '{name}'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?)'"
        )))
    }
}

fn insert(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let project = call.var("project").to_string();
    let name = call.body["name"].as_str().unwrap_or_default().to_string();
    check_name(&name)?;
    let path = format!("{}/{name}", call.path);
    if state.resources.contains_key(&path) || pending(state, &path, "insert") {
        return Err(ApiError::already_exists(&relative(&path)));
    }
    check_references(state, &project, &call.body)?;
    let mut resource = call.body.clone();
    let schema = call.id.split('.').nth(1).unwrap_or("");
    let schema = request_schema(call).unwrap_or(schema);
    if let Some(kind) = call.discovery.kind_of("compute", schema) {
        resource["kind"] = kind.into();
    }
    call.discovery.fill_kinds("compute", schema, &mut resource);
    let collection = path.split('/').nth_back(1).unwrap_or("").to_string();
    match collection.as_str() {
        "subnetworks" => {
            resource["fingerprint"] = "".into();
            if let Some(gateway) = resource["ipCidrRange"]
                .as_str()
                .and_then(|c| nth_address(c, 1))
            {
                resource["gatewayAddress"] = gateway.into();
            }
        }
        "backendServices" | "healthChecks" | "targetPools" | "routers" => {
            resource["fingerprint"] = "".into();
        }
        "addresses" => {
            if resource["address"].is_null() {
                let ip = new_address(state, &project, &resource);
                resource["address"] = ip.into();
            }
            resource["status"] = "RESERVED".into();
        }
        "forwardingRules" => {
            if resource["IPAddress"].is_null() {
                let ip = new_address(state, &project, &resource);
                resource["IPAddress"] = ip.into();
            }
            resource["fingerprint"] = "".into();
        }
        "disks" => {
            resource["status"] = "READY".into();
        }
        "networks" if resource["routingConfig"].is_null() => {
            resource["routingConfig"] = json!({"routingMode": "REGIONAL"});
        }
        "instanceGroupManagers" => {
            resource["fingerprint"] = "".into();
            resource["status"] = json!({"isStable": true});
            resource["instanceGroup"] = state
                .link(&path.replace("/instanceGroupManagers/", "/instanceGroups/"))
                .into();
        }
        _ => {}
    }
    let resource = with_defaults(state, &path, resource);
    let target = path.clone();
    let zone = call.var("zone").to_string();
    Ok(operation(
        state,
        call,
        &path,
        Box::new(move |state: &mut State| {
            let is_group = collection == "instanceGroupManagers";
            state.resources.insert(target.clone(), resource);
            if is_group {
                sync_group(state, &project, &zone, &target);
            }
            Ok(())
        }),
    ))
}

fn request_schema<'a>(call: &Incoming<'a>) -> Option<&'a str> {
    call.discovery.request_of(call.id)
}

/// The `n`th address of an IPv4 CIDR.
fn nth_address(cidr: &str, n: u32) -> Option<String> {
    let (ip, _) = cidr.split_once('/')?;
    let ip: std::net::Ipv4Addr = ip.parse().ok()?;
    Some(std::net::Ipv4Addr::from(u32::from(ip) + n).to_string())
}

/// An address for a new external or internal address / forwarding rule.
fn new_address(state: &mut State, project: &str, resource: &Value) -> String {
    let n = (state.next_id() % 250) as u32 + 2;
    let internal =
        resource["addressType"] == "INTERNAL" || resource["loadBalancingScheme"] == "INTERNAL";
    if internal {
        let cidr = resource["subnetwork"]
            .as_str()
            .and_then(|s| reference_path(project, s))
            .and_then(|p| state.resources.get(&p))
            .and_then(|s| s["ipCidrRange"].as_str().map(str::to_string));
        if let Some(ip) = cidr.and_then(|c| nth_address(&c, n + 10)) {
            return ip;
        }
        return format!("10.128.0.{n}");
    }
    format!("203.0.113.{n}")
}

fn delete(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let project = call.var("project").to_string();
    let path = call.path.to_string();
    existing(state, &path)?;
    if pending(state, &path, "delete") {
        return Err(ApiError::not_found(&relative(&path)));
    }
    let is_group = path.contains("/instanceGroupManagers/");
    let members = if is_group {
        group_members(state, &path)
    } else {
        Vec::new()
    };
    for (other_path, other) in &state.resources {
        if *other_path == path || members.contains(other_path) {
            continue;
        }
        let mut refs = Vec::new();
        references(&project, other, &mut refs);
        if refs.contains(&path) {
            let collection = path.split('/').nth_back(1).unwrap_or("");
            let singular = collection
                .strip_suffix("es")
                .filter(|s| s.ends_with("ss"))
                .or(collection.strip_suffix('s'))
                .unwrap_or(collection);
            return Err(ApiError::new(
                400,
                "resourceInUseByAnotherResource",
                "FAILED_PRECONDITION",
                format!(
                    "The {singular} resource '{}' is already being used by '{}'",
                    relative(&path),
                    relative(other_path)
                ),
            ));
        }
    }
    // A managed instance deleted on its own: its group makes another, as
    // Google's groups keep their target size.
    let owner = state.resources[&path]["metadata"]["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|item| item["key"] == "created-by")
        .and_then(|item| item["value"].as_str())
        .filter(|_| path.contains("/instances/"))
        .map(|group| format!("compute/v1/{group}"));
    let zone = call.var("zone").to_string();
    let target = path.clone();
    Ok(operation(
        state,
        call,
        &path,
        Box::new(move |state: &mut State| {
            // A group takes with it the instances it has when the deletion
            // ends, including any it made while the call was running.
            if is_group {
                for member in group_members(state, &target) {
                    state.resources.remove(&member);
                }
            }
            state.resources.remove(&target);
            if let Some(group) = owner {
                sync_group(state, &project, &zone, &group);
            }
            Ok(())
        }),
    ))
}

/// The fingerprint a change must carry, when the resource has one.
fn check_fingerprint(current: &Value, given: &Value, what: &str) -> Result<(), ApiError> {
    match (current.as_str(), given.as_str()) {
        (Some(current), Some(given)) if current != given => Err(ApiError::condition_not_met(
            format!("Supplied fingerprint does not match current {what} fingerprint."),
        )),
        _ => Ok(()),
    }
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (k, v) in patch {
                if v.is_null() {
                    target.remove(k);
                } else {
                    merge(target.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (target, patch) => *target = patch.clone(),
    }
}

fn modify(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let project = call.var("project").to_string();
    let path = call.path.to_string();
    let current = existing(state, &path)?;
    check_fingerprint(
        &current["fingerprint"],
        &call.body["fingerprint"],
        "resource",
    )?;
    check_references(state, &project, &call.body)?;
    let mut body = call.body.clone();
    expand_references(&project, &mut body);
    let mut updated = if call.verb() == "patch" {
        let mut merged = current.clone();
        merge(&mut merged, &body);
        merged
    } else {
        let mut replaced = body;
        for keep in [
            "id",
            "selfLink",
            "creationTimestamp",
            "kind",
            "zone",
            "region",
            "name",
        ] {
            if let Some(value) = current.get(keep) {
                replaced[keep] = value.clone();
            }
        }
        if current.get("fingerprint").is_some() {
            replaced["fingerprint"] = "".into();
        }
        replaced
    };
    if let Some(object) = updated.as_object_mut() {
        refresh_fingerprints(object);
    }
    let target = path.clone();
    let is_group = path.contains("/instanceGroupManagers/");
    let zone = call.var("zone").to_string();
    Ok(operation(
        state,
        call,
        &path,
        Box::new(move |state: &mut State| {
            state.resources.insert(target.clone(), updated);
            if is_group {
                sync_group(state, &project, &zone, &target);
            }
            Ok(())
        }),
    ))
}

/// The resource path of a custom method (`.../addresses/a/setLabels` →
/// `.../addresses/a`).
fn resource_of(call: &Incoming<'_>) -> String {
    call.path
        .rsplit_once('/')
        .map_or(call.path, |(resource, _)| resource)
        .to_string()
}

fn set_labels(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let path = resource_of(call);
    let current = existing(state, &path)?;
    if call.body["labelFingerprint"] != current["labelFingerprint"] {
        return Err(ApiError::condition_not_met(
            "Labels fingerprint either invalid or resource labels have changed".into(),
        ));
    }
    let labels = call.body["labels"].clone();
    Ok(set_field(state, call, path, "labels", labels))
}

/// An operation that, when done, replaces `field` of the resource at
/// `path` with `value` and gives it new fingerprints.
fn set_field(
    state: &mut State,
    call: &Incoming<'_>,
    path: String,
    field: &'static str,
    value: Value,
) -> Value {
    let target = path.clone();
    operation(
        state,
        call,
        &path,
        Box::new(move |state: &mut State| {
            if let Some(Value::Object(resource)) = state.resources.get_mut(&target) {
                resource.insert(field.into(), value);
                refresh_fingerprints(resource);
            }
            Ok(())
        }),
    )
}

/// `instances.setMetadata` and `instances.setTags`: the field's own
/// fingerprint must be current.
fn set_fingerprinted(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let path = resource_of(call);
    let current = existing(state, &path)?;
    let field = if call.verb() == "setMetadata" {
        "metadata"
    } else {
        "tags"
    };
    if call.body["fingerprint"] != current[field]["fingerprint"] {
        return Err(ApiError::condition_not_met(format!(
            "Supplied fingerprint does not match current {field} fingerprint."
        )));
    }
    let mut value = call.body.clone();
    value.as_object_mut().map(|m| m.remove("fingerprint"));
    Ok(set_field(state, call, path, field, value))
}

/// Instances a managed group made (their `created-by` metadata).
fn group_members(state: &State, group: &str) -> Vec<String> {
    let created_by = relative(group);
    state
        .resources
        .iter()
        .filter(|(path, _)| path.contains("/instances/"))
        .filter(|(_, instance)| {
            instance["metadata"]["items"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|item| item["key"] == "created-by" && item["value"] == created_by.as_str())
        })
        .map(|(path, _)| path.clone())
        .collect()
}

/// Makes or removes instances until the group has `targetSize`.
fn sync_group(state: &mut State, project: &str, zone: &str, group: &str) {
    let Some(manager) = state.resources.get(group).cloned() else {
        return;
    };
    // A group being deleted makes no new instances.
    if pending(state, group, "delete") {
        return;
    }
    let members = group_members(state, group);
    let target = manager["targetSize"].as_u64().unwrap_or(0) as usize;
    for extra in members.iter().skip(target) {
        state.resources.remove(extra);
    }
    for _ in members.len()..target {
        add_instance(state, project, zone, group, &manager, None);
    }
}

/// Makes an instance of the group from its current template: a new name
/// (`<baseInstanceName>-<4 characters>`), or `name` for an instance the
/// group recreates (Google keeps a recreated instance's name; its id is new).
fn add_instance(
    state: &mut State,
    project: &str,
    zone: &str,
    group: &str,
    manager: &Value,
    name: Option<&str>,
) {
    let template_path = manager["instanceTemplate"]
        .as_str()
        .and_then(|t| reference_path(project, t));
    let Some(template) = template_path
        .as_ref()
        .and_then(|p| state.resources.get(p))
        .cloned()
    else {
        return;
    };
    let properties = &template["properties"];
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let suffix: String = (0..4)
        .map(|_| LETTERS[(state.random() * LETTERS.len() as f64) as usize] as char)
        .collect();
    let base = manager["baseInstanceName"].as_str().unwrap_or("instance");
    let name = name.map_or_else(|| format!("{base}-{suffix}"), str::to_string);
    let path = format!("compute/v1/projects/{project}/zones/{zone}/instances/{name}");
    let mut items = properties["metadata"]["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    items.push(json!({"key": "instance-template", "value": relative(template_path.as_deref().unwrap_or(""))}));
    items.push(json!({"key": "created-by", "value": relative(group)}));
    let mut interfaces = properties["networkInterfaces"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, interface) in interfaces.iter_mut().enumerate() {
        interface["name"] = format!("nic{i}").into();
        let n = state.next_id() % 250 + 2;
        interface["networkIP"] = format!("10.0.16.{n}").into();
    }
    let machine_type = properties["machineType"].as_str().unwrap_or("e2-medium");
    let machine_type = machine_type.rsplit('/').next().unwrap_or(machine_type);
    let instance = json!({
        "kind": "compute#instance",
        "name": name,
        "machineType": state.link(&format!("compute/v1/projects/{project}/zones/{zone}/machineTypes/{machine_type}")),
        "status": "RUNNING",
        "labels": properties["labels"].clone(),
        "tags": {"items": properties["tags"]["items"].clone()},
        "metadata": {"kind": "compute#metadata", "items": items},
        "networkInterfaces": interfaces,
        "serviceAccounts": properties["serviceAccounts"].clone(),
        "scheduling": properties["scheduling"].clone(),
        "canIpForward": properties["canIpForward"].clone(),
        "fingerprint": "",
    });
    let instance = with_defaults(state, &path, instance);
    state.resources.insert(path, instance);
}

fn group_change(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let project = call.var("project").to_string();
    let zone = call.var("zone").to_string();
    let path = resource_of(call);
    let mut manager = existing(state, &path)?;
    let named: Vec<String> = call.body["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i.as_str().and_then(|i| reference_path(&project, i)))
        .collect();
    match call.verb() {
        "resize" => {
            let size: u64 = call
                .param("size")
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| {
                    ApiError::new(
                        400,
                        "required",
                        "INVALID_ARGUMENT",
                        "Required field 'size' not specified".into(),
                    )
                })?;
            manager["targetSize"] = size.into();
        }
        "setInstanceTemplate" => {
            check_references(state, &project, &call.body)?;
            manager["instanceTemplate"] = call.body["instanceTemplate"].clone();
            expand_references(&project, &mut manager["instanceTemplate"]);
        }
        "setTargetPools" => {
            check_fingerprint(
                &manager["fingerprint"],
                &call.body["fingerprint"],
                "resource",
            )?;
            check_references(state, &project, &call.body)?;
            manager["targetPools"] = call.body["targetPools"].clone();
            expand_references(&project, &mut manager["targetPools"]);
        }
        _ => {
            let members = group_members(state, &path);
            if let Some(stranger) = named.iter().find(|n| !members.contains(n)) {
                return Err(ApiError::invalid(format!(
                    "The instance '{}' is not a member of the instance group manager",
                    relative(stranger)
                )));
            }
            if call.verb() == "deleteInstances" {
                let size = manager["targetSize"].as_u64().unwrap_or(0);
                manager["targetSize"] = size.saturating_sub(named.len() as u64).into();
            }
        }
    }
    if let Some(object) = manager.as_object_mut() {
        refresh_fingerprints(object);
    }
    let recreate = call.verb() == "recreateInstances";
    let target = path.clone();
    Ok(operation(
        state,
        call,
        &path,
        Box::new(move |state: &mut State| {
            for instance in &named {
                state.resources.remove(instance);
            }
            state.resources.insert(target.clone(), manager.clone());
            if recreate {
                for instance in &named {
                    let name = instance.rsplit('/').next();
                    add_instance(state, &project, &zone, &target, &manager, name);
                }
            }
            sync_group(state, &project, &zone, &target);
            Ok(())
        }),
    ))
}

fn list_managed_instances(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let path = resource_of(call);
    let manager = existing(state, &path)?;
    let members: Vec<Value> = group_members(state, &path)
        .iter()
        .filter_map(|p| state.resources.get(p))
        .map(|instance| {
            json!({
                "instance": instance["selfLink"],
                "id": instance["id"],
                "instanceStatus": instance["status"],
                "name": instance["name"],
                "currentAction": "NONE",
                "version": {"instanceTemplate": intended_template(state, &manager, instance)},
            })
        })
        .collect();
    let (items, next) = page(state, call, &members)?;
    let mut answer = json!({"managedInstances": items});
    if let Some(next) = next {
        answer["nextPageToken"] = next.into();
    }
    Ok(answer)
}

/// A managed instance's intended template (`version.instanceTemplate`):
/// under an `OPPORTUNISTIC` update policy (the default) the group does not
/// act on running instances, so it stays the template the instance was
/// made from (its `instance-template` metadata, as Google sets it) until
/// the instance is recreated; under `PROACTIVE` it is the group's own.
fn intended_template(state: &State, manager: &Value, instance: &Value) -> Value {
    if manager["updatePolicy"]["type"] == "PROACTIVE" {
        return manager["instanceTemplate"].clone();
    }
    instance["metadata"]["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|item| item["key"] == "instance-template")
        .and_then(|item| item["value"].as_str())
        .map_or_else(
            || manager["instanceTemplate"].clone(),
            |t| state.link(&format!("compute/v1/{t}")).into(),
        )
}

fn list(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let filter = super::others::Filter::parse(call.param("filter").unwrap_or(""))?;
    let prefix = format!("{}/", call.path);
    let items: Vec<Value> = state
        .resources
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .filter(|(k, _)| !k[prefix.len()..].contains('/'))
        .map(|(_, v)| v.clone())
        .filter(|v| filter.matches(v))
        .collect();
    let (items, next) = page(state, call, &items)?;
    let collection = call.path.rsplit('/').next().unwrap_or("");
    let mut answer = json!({
        "kind": format!("compute#{}List", collection.trim_end_matches('s')),
        "id": relative(call.path),
        "items": items,
        "selfLink": state.link(call.path),
    });
    if let Some(next) = next {
        answer["nextPageToken"] = next.into();
    }
    Ok(answer)
}

fn aggregated_list(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let filter = super::others::Filter::parse(call.param("filter").unwrap_or(""))?;
    let project = call.var("project");
    let collection = call.path.rsplit('/').next().unwrap_or("");
    let prefix = format!("compute/v1/projects/{project}/");
    let found: Vec<(String, Value)> = state
        .resources
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .filter_map(|(k, v)| {
            let parts: Vec<&str> = k[prefix.len()..].split('/').collect();
            let scope = match parts.as_slice() {
                ["global", c, _] if *c == collection => "global".to_string(),
                [kind, place, c, _] if *c == collection => format!("{kind}/{place}"),
                _ => return None,
            };
            filter.matches(v).then(|| (scope, v.clone()))
        })
        .collect();
    let (found, next) = page(state, call, &found)?;
    let mut items = Map::new();
    for (scope, resource) in found {
        let entry = items
            .entry(scope)
            .or_insert_with(|| json!({collection: []}));
        entry[collection].as_array_mut().unwrap().push(resource);
    }
    let mut answer = json!({"kind": format!("compute#{collection}AggregatedList"), "items": items});
    if let Some(next) = next {
        answer["nextPageToken"] = next.into();
    }
    Ok(answer)
}

/// `instances.getShieldedInstanceIdentity`: the vTPM keys of a shielded
/// VM. The keys are the test's (seeded at
/// `<instance path>/shieldedInstanceIdentity`); 404 for a missing
/// instance, 400 for an instance without them (not a shielded VM).
fn shielded_identity(state: &State, path: &str) -> Result<Value, ApiError> {
    let instance = path.trim_end_matches("/getShieldedInstanceIdentity");
    existing(state, instance)?;
    let stored = state
        .resources
        .get(&format!("{instance}/shieldedInstanceIdentity"))
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "Instance '{}' is not a Shielded VM.",
                relative(instance)
            ))
        })?;
    let fields = [
        "kind",
        "signingKey",
        "encryptionKey",
        "eccP256SigningKey",
        "eccP256EncryptionKey",
    ];
    let mut answer = serde_json::Map::new();
    for field in fields {
        if let Some(value) = stored.get(field) {
            answer.insert(field.to_string(), value.clone());
        }
    }
    Ok(Value::Object(answer))
}

/// `compute.projects.get`: every project exists on Google (a call names
/// one it may use); a project seeded at `compute/v1/projects/P` answers
/// as seeded. The default service account is Compute Engine's,
/// `NUMBER-compute@developer.gserviceaccount.com`.
fn project(state: &State, project: &str) -> Value {
    let path = format!("compute/v1/projects/{project}");
    if let Some(seeded) = state.resources.get(&path) {
        return seeded.clone();
    }
    let number = super::others::project_number(project);
    json!({
        "kind": "compute#project",
        "id": number,
        "name": project,
        "creationTimestamp": "2020-01-01T00:00:00.000-00:00",
        "selfLink": state.link(&path),
        "defaultServiceAccount": format!("{number}-compute@developer.gserviceaccount.com"),
        "commonInstanceMetadata": {"kind": "compute#metadata", "fingerprint": fingerprint(&json!([])), "items": []},
        "defaultNetworkTier": "PREMIUM",
        "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS",
        "quotas": [],
    })
}

/// The regions and zones every project sees: a few of Google's, and
/// `us-test1` (kops' own test cases are in it).
const PLACES: &[(&str, &[&str])] = &[
    ("us-central1", &["a", "b", "c", "f"]),
    ("us-east1", &["b", "c", "d"]),
    ("us-west1", &["a", "b", "c"]),
    ("europe-west1", &["b", "c", "d"]),
    ("europe-west4", &["a", "b", "c"]),
    ("asia-east1", &["a", "b", "c"]),
    ("us-test1", &["a", "b", "c"]),
];

/// `zones.get` / `zones.list` / `regions.get` / `regions.list`.
fn places(state: &mut State, call: &Incoming<'_>, collection: &str) -> Result<Value, ApiError> {
    let project = call.var("project");
    let base = format!("compute/v1/projects/{project}");
    let mut all = Vec::new();
    for (n, (region, letters)) in PLACES.iter().enumerate() {
        let region_link = state.link(&format!("{base}/regions/{region}"));
        let zone_links: Vec<String> = letters
            .iter()
            .map(|l| state.link(&format!("{base}/zones/{region}-{l}")))
            .collect();
        if collection == "regions" {
            all.push(json!({
                "kind": "compute#region", "id": (1000 + n).to_string(), "name": region,
                "status": "UP", "zones": zone_links, "selfLink": region_link,
                "creationTimestamp": "2020-01-01T00:00:00.000-00:00", "quotas": [],
            }));
            continue;
        }
        for (i, letter) in letters.iter().enumerate() {
            all.push(json!({
                "kind": "compute#zone", "id": (2000 + n * 10 + i).to_string(),
                "name": format!("{region}-{letter}"), "status": "UP",
                "region": region_link, "selfLink": zone_links[i],
                "creationTimestamp": "2020-01-01T00:00:00.000-00:00",
                "availableCpuPlatforms": ["Intel Broadwell"],
            }));
        }
    }
    if call.verb() == "get" {
        let name = call.var(if collection == "zones" {
            "zone"
        } else {
            "region"
        });
        return all
            .into_iter()
            .find(|p| p["name"] == name)
            .ok_or_else(|| ApiError::not_found(&relative(call.path)));
    }
    let filter = super::others::Filter::parse(call.param("filter").unwrap_or(""))?;
    let found: Vec<Value> = all.into_iter().filter(|p| filter.matches(p)).collect();
    let (items, next) = page(state, call, &found)?;
    let mut answer = json!({
        "kind": format!("compute#{}List", collection.trim_end_matches('s')),
        "id": relative(call.path),
        "items": items,
        "selfLink": state.link(call.path),
    });
    if let Some(next) = next {
        answer["nextPageToken"] = next.into();
    }
    Ok(answer)
}

/// `targetPools.addHealthCheck` / `removeHealthCheck` / `addInstance` /
/// `removeInstance`: `{"healthChecks": [{"healthCheck": URL}]}` or
/// `{"instances": [{"instance": URL}]}`, each reference as Google accepts
/// it. A pool has at most one health check; what is added must exist.
fn pool_change(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let project = call.var("project").to_string();
    let path = resource_of(call);
    let mut pool = existing(state, &path)?;
    check_references(state, &project, &call.body)?;
    let (field, inner) = if call.verb().ends_with("HealthCheck") {
        ("healthChecks", "healthCheck")
    } else {
        ("instances", "instance")
    };
    let mut given: Vec<String> = call.body[field]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r[inner].as_str())
        .filter_map(|r| expand_reference(&project, r))
        .collect();
    given.dedup();
    let mut current: Vec<String> = pool[field]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_str().map(str::to_string))
        .collect();
    if call.verb().starts_with("add") {
        for reference in given {
            if !current.contains(&reference) {
                current.push(reference);
            }
        }
    } else {
        current.retain(|r| !given.contains(r));
    }
    if field == "healthChecks" && current.len() > 1 {
        return Err(ApiError::invalid(
            "Invalid value for field 'healthChecks': a target pool can have at most one health check."
                .into(),
        ));
    }
    pool[field] = json!(current);
    if let Some(object) = pool.as_object_mut() {
        refresh_fingerprints(object);
    }
    let target = path.clone();
    Ok(operation(
        state,
        call,
        &path,
        Box::new(move |state: &mut State| {
            state.resources.insert(target, pool);
            Ok(())
        }),
    ))
}
