//! Cloud DNS (managed zones, record sets, changes), IAM (service
//! accounts) and Resource Manager (a project's IAM policy), plus the list
//! `filter` expressions Compute accepts.

use serde_json::{json, Value};

use super::error::ApiError;
use super::{fingerprint, page, timestamp, Incoming, State};

pub(crate) fn handle(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    match call.id {
        "dns.managedZones.list" => {
            let prefix = format!("{}/", call.path);
            let zones: Vec<Value> = children(state, &prefix)
                .into_iter()
                .filter(|z| call.param("dnsName").is_none_or(|n| z["dnsName"] == n))
                .collect();
            paged(
                state,
                call,
                &zones,
                "managedZones",
                "dns#managedZonesListResponse",
            )
        }
        "dns.managedZones.get" | "dns.resourceRecordSets.get" | "dns.changes.get" => {
            get(state, call.path, "dns")
        }
        "dns.managedZones.create" => create_zone(state, call),
        "dns.managedZones.delete" => {
            get(state, call.path, "dns")?;
            let records = format!("{}/rrsets/", call.path);
            let blocking = children_deep(state, &records)
                .into_iter()
                .any(|r| r["type"] != "NS" && r["type"] != "SOA");
            if blocking {
                return Err(ApiError::new(
                    400,
                    "containerNotEmpty",
                    "FAILED_PRECONDITION",
                    format!(
                        "The resource named '{}' cannot be deleted because it is not empty",
                        call.var("managedZone")
                    ),
                ));
            }
            state
                .resources
                .retain(|k, _| k != call.path && !k.starts_with(&format!("{}/", call.path)));
            Ok(json!({}))
        }
        "dns.resourceRecordSets.list" => {
            let prefix = format!("{}/", call.path);
            let name = call.param("name");
            let kind = call.param("type");
            let records: Vec<Value> = children_deep(state, &prefix)
                .into_iter()
                .filter(|r| name.is_none_or(|n| r["name"] == n))
                .filter(|r| kind.is_none_or(|t| r["type"] == t))
                .collect();
            paged(
                state,
                call,
                &records,
                "rrsets",
                "dns#resourceRecordSetsListResponse",
            )
        }
        "dns.changes.create" => change(state, call),
        "iam.projects.serviceAccounts.create" => create_service_account(state, call),
        "iam.projects.serviceAccounts.get" => find_service_account(state, call).map(|(_, a)| a),
        "iam.projects.serviceAccounts.list" => {
            let prefix = format!("{}/", call.path);
            let accounts = children(state, &prefix);
            let (items, next) = page(state, call, &accounts)?;
            let mut answer = json!({"accounts": items});
            if let Some(next) = next {
                answer["nextPageToken"] = next.into();
            }
            Ok(answer)
        }
        "iam.projects.serviceAccounts.patch" => {
            let (path, mut account) = find_service_account(state, call)?;
            let mask = call.body["updateMask"].as_str().unwrap_or("");
            for field in mask.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                if !["displayName", "description"].contains(&field) {
                    return Err(ApiError::invalid(format!(
                        "Invalid update mask path: '{field}'"
                    )));
                }
                account[field] = call.body["serviceAccount"][field].clone();
            }
            account["etag"] = fingerprint(&account).into();
            state.resources.insert(path, account.clone());
            Ok(account)
        }
        "iam.projects.serviceAccounts.update" => {
            // The older whole-account update: only the display name and
            // the description change.
            let (path, mut account) = find_service_account(state, call)?;
            if !call.body["etag"].is_null() && call.body["etag"] != account["etag"] {
                return Err(ApiError::new(
                    409,
                    "aborted",
                    "ABORTED",
                    "The etag does not match the service account's.".into(),
                ));
            }
            for field in ["displayName", "description"] {
                account[field] = call.body[field].clone();
            }
            account["etag"] = fingerprint(&account).into();
            state.resources.insert(path, account.clone());
            Ok(account)
        }
        "iam.projects.serviceAccounts.delete" => {
            let (path, _) = find_service_account(state, call)?;
            state.resources.remove(&path);
            Ok(json!({}))
        }
        "cloudresourcemanager.projects.get" => {
            let project = call.var("projectId");
            Ok(json!({
                "projectNumber": project_number(project),
                "projectId": project,
                "lifecycleState": "ACTIVE",
                "name": project,
                "createTime": "2020-01-01T00:00:00.000Z",
            }))
        }
        "cloudresourcemanager.projects.getIamPolicy" => Ok(policy(state, call.var("resource"))),
        "cloudresourcemanager.projects.setIamPolicy" => {
            let project = call.var("resource");
            let current = policy(state, project);
            let mut new = call.body["policy"].clone();
            if !new["etag"].is_null() && new["etag"] != current["etag"] {
                return Err(ApiError::new(
                    409,
                    "aborted",
                    "ABORTED",
                    "There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff.".into(),
                ));
            }
            // A new service account is not known to IAM policies at once.
            let young = new["bindings"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|b| b["members"].as_array())
                .flatten()
                .filter_map(|m| m.as_str()?.strip_prefix("serviceAccount:"))
                .find(|email| {
                    state
                        .accounts_made
                        .get(*email)
                        .is_some_and(|made| made.elapsed() < state.iam_delay)
                });
            if let Some(email) = young {
                return Err(ApiError::invalid(format!(
                    "Service account {email} does not exist."
                )));
            }
            new["version"] = new["version"].as_u64().unwrap_or(1).into();
            new["etag"] = "".into();
            new["etag"] = format!("BwX{}", fingerprint(&new)).into();
            state.resources.insert(policy_path(project), new.clone());
            Ok(new)
        }
        _ => Err(ApiError::not_implemented(call.id)),
    }
}

fn get(state: &State, path: &str, service: &str) -> Result<Value, ApiError> {
    state.resources.get(path).cloned().ok_or_else(|| {
        let what = path.strip_prefix(&format!("{service}/v1/")).unwrap_or(path);
        ApiError::not_found(what)
    })
}

/// The resources directly under `prefix` (which ends with `/`).
fn children(state: &State, prefix: &str) -> Vec<Value> {
    children_deep(state, prefix)
        .into_iter()
        .zip(
            state
                .resources
                .range(prefix.to_string()..)
                .take_while(|(k, _)| k.starts_with(prefix)),
        )
        .filter(|(_, (k, _))| !k[prefix.len()..].contains('/'))
        .map(|(v, _)| v)
        .collect()
}

/// Every resource under `prefix`.
fn children_deep(state: &State, prefix: &str) -> Vec<Value> {
    state
        .resources
        .range(prefix.to_string()..)
        .take_while(|(k, _)| k.starts_with(prefix))
        .map(|(_, v)| v.clone())
        .collect()
}

fn paged(
    state: &State,
    call: &Incoming<'_>,
    items: &[Value],
    field: &str,
    kind: &str,
) -> Result<Value, ApiError> {
    let (items, next) = page(state, call, items)?;
    let mut answer = json!({"kind": kind, field: items});
    if let Some(next) = next {
        answer["nextPageToken"] = next.into();
    }
    Ok(answer)
}

fn create_zone(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let name = call.body["name"].as_str().unwrap_or("");
    let dns_name = call.body["dnsName"].as_str().unwrap_or("");
    if name.is_empty() || !dns_name.ends_with('.') {
        return Err(ApiError::invalid(format!(
            "Invalid value for 'entity.managedZone': name '{name}', dnsName '{dns_name}' (the DNS name must end with a dot)"
        )));
    }
    let path = format!("{}/{name}", call.path);
    if state.resources.contains_key(&path) {
        return Err(ApiError::already_exists(&format!(
            "entity.managedZone {name}"
        )));
    }
    let zone = seed_zone(state, &path, call.body.clone());
    Ok(zone)
}

/// Stores a managed zone with what Cloud DNS adds: id, name servers and
/// the zone's NS and SOA records.
pub(crate) fn seed_zone(state: &mut State, path: &str, mut zone: Value) -> Value {
    let id = state.next_id();
    let dns_name = zone["dnsName"].as_str().unwrap_or("").to_string();
    zone["kind"] = "dns#managedZone".into();
    zone["id"] = (id * 104_729).to_string().into();
    zone["creationTime"] = timestamp().into();
    zone["visibility"] = zone["visibility"].as_str().unwrap_or("public").into();
    let servers: Vec<String> = (1..=4)
        .map(|n| format!("ns-cloud-a{n}.googledomains.com."))
        .collect();
    zone["nameServers"] = json!(servers);
    state.resources.insert(path.to_string(), zone.clone());
    let ns = json!({"kind": "dns#resourceRecordSet", "name": dns_name, "type": "NS", "ttl": 21600, "rrdatas": servers});
    let soa = json!({"kind": "dns#resourceRecordSet", "name": dns_name, "type": "SOA", "ttl": 21600,
        "rrdatas": ["ns-cloud-a1.googledomains.com. cloud-dns-hostmaster.google.com. 1 21600 3600 259200 300"]});
    state
        .resources
        .insert(format!("{path}/rrsets/{dns_name}/NS"), ns);
    state
        .resources
        .insert(format!("{path}/rrsets/{dns_name}/SOA"), soa);
    zone
}

fn change(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let zone_path = call.path.trim_end_matches("/changes").to_string();
    let zone = get(state, &zone_path, "dns")?;
    let suffix = zone["dnsName"].as_str().unwrap_or("").to_string();
    let record_path = |r: &Value| {
        format!(
            "{zone_path}/rrsets/{}/{}",
            r["name"].as_str().unwrap_or(""),
            r["type"].as_str().unwrap_or("")
        )
    };
    let empty = Vec::new();
    let additions = call.body["additions"].as_array().unwrap_or(&empty);
    let deletions = call.body["deletions"].as_array().unwrap_or(&empty);
    let mut after = state.resources.clone();
    for (i, deletion) in deletions.iter().enumerate() {
        let path = record_path(deletion);
        let name = deletion["name"].as_str().unwrap_or("");
        let kind = deletion["type"].as_str().unwrap_or("");
        match after.get(&path) {
            None => {
                return Err(ApiError::new(
                    404,
                    "notFound",
                    "NOT_FOUND",
                    format!("The resource 'entity.change.deletions[{i}]' named '{name} ({kind})' does not exist."),
                ))
            }
            Some(current) if !same_record(current, deletion) => {
                return Err(ApiError::condition_not_met(format!(
                    "Precondition not met for 'entity.change.deletions[{i}]'"
                )))
            }
            Some(_) => {
                after.remove(&path);
            }
        }
    }
    for (i, addition) in additions.iter().enumerate() {
        let name = addition["name"].as_str().unwrap_or("");
        let kind = addition["type"].as_str().unwrap_or("");
        if !name.ends_with(&suffix) || kind.is_empty() {
            return Err(ApiError::invalid(format!(
                "Invalid value for 'entity.change.additions[{i}].name': '{name}'"
            )));
        }
        let path = record_path(addition);
        if after.contains_key(&path) {
            return Err(ApiError::new(
                409,
                "alreadyExists",
                "ALREADY_EXISTS",
                format!("The resource 'entity.change.additions[{i}]' named '{name} ({kind})' already exists"),
            ));
        }
        let mut record = addition.clone();
        record["kind"] = "dns#resourceRecordSet".into();
        after.insert(path, record);
    }
    state.resources = after;
    let id = state
        .resources
        .keys()
        .filter(|k| k.starts_with(&format!("{zone_path}/changes/")))
        .count()
        + 1;
    let mut change = call.body.clone();
    change["kind"] = "dns#change".into();
    change["id"] = id.to_string().into();
    change["startTime"] = timestamp().into();
    change["status"] = "done".into();
    state
        .resources
        .insert(format!("{zone_path}/changes/{id}"), change.clone());
    change["status"] = "pending".into();
    Ok(change)
}

fn same_record(a: &Value, b: &Value) -> bool {
    let ttl = |v: &Value| {
        v["ttl"]
            .as_i64()
            .or(v["ttl"].as_str().and_then(|s| s.parse().ok()))
    };
    ttl(a) == ttl(b) && a["rrdatas"] == b["rrdatas"]
}

pub(crate) fn project_number(project: &str) -> String {
    let sum: u64 = project
        .bytes()
        .map(u64::from)
        .fold(7, |h, b| h.wrapping_mul(31).wrapping_add(b));
    (100_000_000_000 + sum % 900_000_000_000).to_string()
}

fn create_service_account(state: &mut State, call: &Incoming<'_>) -> Result<Value, ApiError> {
    let project = call.var("projectsId");
    let account_id = call.body["accountId"].as_str().unwrap_or("");
    let bytes = account_id.as_bytes();
    let valid = (6..=30).contains(&bytes.len())
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[bytes.len() - 1] != b'-';
    if !valid {
        return Err(ApiError::invalid(format!(
            "Invalid account ID '{account_id}'; it must be 6 to 30 characters of lower case letters, digits and dashes, starting with a letter."
        )));
    }
    let email = format!("{account_id}@{project}.iam.gserviceaccount.com");
    let path = format!("{}/{email}", call.path);
    if state.resources.contains_key(&path) {
        return Err(ApiError::new(
            409,
            "alreadyExists",
            "ALREADY_EXISTS",
            format!(
                "Service account {account_id} already exists within project projects/{project}."
            ),
        ));
    }
    let id = state.next_id();
    let given = &call.body["serviceAccount"];
    let mut account = json!({
        "name": format!("projects/{project}/serviceAccounts/{email}"),
        "projectId": project,
        "uniqueId": (100_000_000_000_000_000_000u128 + u128::from(id)).to_string(),
        "email": email,
        "oauth2ClientId": (100_000_000_000_000_000_000u128 + u128::from(id)).to_string(),
    });
    for field in ["displayName", "description"] {
        if let Some(value) = given[field].as_str() {
            account[field] = value.into();
        }
    }
    account["etag"] = fingerprint(&account).into();
    state.resources.insert(path, account.clone());
    state.accounts_made.insert(email, std::time::Instant::now());
    Ok(account)
}

fn find_service_account(state: &State, call: &Incoming<'_>) -> Result<(String, Value), ApiError> {
    let project = call.var("projectsId");
    let wanted = call.var("serviceAccountsId");
    state
        .resources
        .iter()
        .filter(|(k, _)| k.starts_with("iam/v1/projects/") && k.contains("/serviceAccounts/"))
        .find(|(_, a)| {
            (project == "-" || a["projectId"] == project)
                && (a["email"] == wanted || a["uniqueId"] == wanted)
        })
        .map(|(k, a)| (k.clone(), a.clone()))
        .ok_or_else(|| {
            ApiError::new(
                404,
                "notFound",
                "NOT_FOUND",
                format!("Unknown service account: projects/{project}/serviceAccounts/{wanted}"),
            )
        })
}

fn policy_path(project: &str) -> String {
    format!("cloudresourcemanager/v1/projects/{project}/iamPolicy")
}

/// A project's policy; a new project's has its owner only.
fn policy(state: &mut State, project: &str) -> Value {
    state
        .resources
        .entry(policy_path(project))
        .or_insert_with(|| {
            json!({
                "version": 1,
                "etag": "BwXowner",
                "bindings": [{"role": "roles/owner", "members": ["user:owner@example.com"]}],
            })
        })
        .clone()
}

/// A Compute list `filter`: clauses `field eq value`, `field ne value`,
/// `field = value`, `field != value` (in parentheses when several, all of
/// which must hold); `eq`/`ne` take a regular expression of which `.` and
/// `.*` are understood, the rest literal.
pub(crate) struct Filter {
    clauses: Vec<(String, String, String)>,
}

impl Filter {
    pub(crate) fn parse(text: &str) -> Result<Filter, ApiError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Filter {
                clauses: Vec::new(),
            });
        }
        let parts: Vec<String> = if text.starts_with('(') {
            text.split(')')
                .map(|p| p.trim().trim_start_matches('(').trim().to_string())
                .filter(|p| !p.is_empty() && p != "AND")
                .collect()
        } else {
            vec![text.to_string()]
        };
        let mut clauses = Vec::new();
        for part in parts {
            let part = part.trim_start_matches("AND ").trim();
            let found = [" eq ", " ne ", " != ", " = "]
                .iter()
                .find_map(|op| part.split_once(op).map(|(f, v)| (f, op.trim(), v)));
            let Some((field, op, value)) = found else {
                return Err(ApiError::invalid(format!(
                    "Invalid list filter expression '{text}'."
                )));
            };
            let value = value.trim().trim_matches('"').to_string();
            clauses.push((field.trim().to_string(), op.to_string(), value));
        }
        Ok(Filter { clauses })
    }

    pub(crate) fn matches(&self, resource: &Value) -> bool {
        self.clauses.iter().all(|(field, op, value)| {
            let actual = field.split('.').fold(resource, |v, k| &v[k]);
            let actual = match actual {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            match op.as_str() {
                "eq" => full_match(value, &actual),
                "ne" => !full_match(value, &actual),
                "=" => actual == *value,
                _ => actual != *value,
            }
        })
    }
}

/// Whether `pattern` (literal characters, `.`, `.*`, `\` escapes) matches
/// all of `text`.
fn full_match(pattern: &str, text: &str) -> bool {
    fn go(p: &[char], t: &[char]) -> bool {
        match p {
            [] => t.is_empty(),
            ['.', '*', rest @ ..] => (0..=t.len()).any(|i| go(rest, &t[i..])),
            ['\\', c, rest @ ..] => t.first() == Some(c) && go(rest, &t[1..]),
            ['.', rest @ ..] => !t.is_empty() && go(rest, &t[1..]),
            [c, rest @ ..] => t.first() == Some(c) && go(rest, &t[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    go(&p, &t)
}
