//! The GCE API test server behaves as Google documents: schema checks,
//! operations, errors, fingerprints, references, pages, faults.

use std::time::Duration;

use kops_testkit::gce_api::GOOGLE;
use kops_testkit::{require_gce_api, GceApi};
use serde_json::{json, Value};

const NETWORKS: &str = "/compute/v1/projects/p/global/networks";

fn wait(api: &GceApi, op: &Value) -> Value {
    let link = op["selfLink"].as_str().expect("an operation");
    let path = link.strip_prefix(GOOGLE).unwrap();
    for _ in 0..200 {
        let (status, op) = api.request("GET", path, None).unwrap();
        assert_eq!(status, 200, "{op}");
        if op["status"] == "DONE" {
            return op;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("operation never finished");
}

fn insert(api: &GceApi, path: &str, body: Value) -> (u16, Value) {
    api.request("POST", path, Some(&body)).unwrap()
}

#[test]
fn bodies_are_checked_against_the_discovery_schema() {
    let Some(api) = require_gce_api() else { return };
    let (status, body) = insert(
        &api,
        NETWORKS,
        json!({"name": "n", "autoCreateSubnetworks": false, "bogus": 1}),
    );
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Unknown name \"bogus\""),
        "{body}"
    );
    let (status, body) = insert(
        &api,
        NETWORKS,
        json!({"name": "n", "autoCreateSubnetworks": "no"}),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("TYPE_BOOL"),
        "{body}"
    );
    let (status, body) = insert(&api, NETWORKS, json!({"autoCreateSubnetworks": false}));
    assert_eq!(
        (status, body["error"]["errors"][0]["reason"].as_str()),
        (400, Some("required")),
        "{body}"
    );
    let (status, _) = insert(&api, NETWORKS, json!({"name": "Bad_Name"}));
    assert_eq!(status, 400);
    let (status, body) = api
        .request("GET", &format!("{NETWORKS}?nope=1"), None)
        .unwrap();
    assert_eq!(status, 400, "{body}");
    let (status, body) = insert(
        &api,
        "/compute/v1/projects/p/regions/r/subnetworks",
        json!({"name": "s", "network": "global/networks/n", "ipCidrRange": "10.0.0.0/20", "stackType": "NOPE"}),
    );
    assert_eq!(status, 400, "{body}");
    assert!(api.paths().is_empty());
}

#[test]
fn inserts_finish_through_operations_and_conflict_after() {
    let Some(api) = require_gce_api() else { return };
    let (status, op) = insert(
        &api,
        NETWORKS,
        json!({"name": "n", "autoCreateSubnetworks": false}),
    );
    assert_eq!(status, 200, "{op}");
    assert_eq!(op["kind"], "compute#operation");
    assert_eq!(op["status"], "PENDING");
    assert_eq!(
        api.request("GET", &format!("{NETWORKS}/n"), None)
            .unwrap()
            .0,
        404
    );
    let done = wait(&api, &op);
    assert!(done["error"].is_null(), "{done}");
    let (status, network) = api.request("GET", &format!("{NETWORKS}/n"), None).unwrap();
    assert_eq!(status, 200);
    assert_eq!(network["kind"], "compute#network");
    assert_eq!(network["selfLink"], format!("{GOOGLE}{NETWORKS}/n"));
    let (status, body) = insert(
        &api,
        NETWORKS,
        json!({"name": "n", "autoCreateSubnetworks": false}),
    );
    assert_eq!(
        (status, body["error"]["errors"][0]["reason"].as_str()),
        (409, Some("alreadyExists"))
    );
    // operations.wait returns the finished operation.
    let (_, op) = api
        .request("DELETE", &format!("{NETWORKS}/n"), None)
        .unwrap();
    let path = op["selfLink"]
        .as_str()
        .unwrap()
        .strip_prefix(GOOGLE)
        .unwrap()
        .to_string();
    let (status, waited) = api.request("POST", &format!("{path}/wait"), None).unwrap();
    assert_eq!(
        (status, waited["status"].as_str()),
        (200, Some("DONE")),
        "{waited}"
    );
    let (status, body) = api.request("GET", &format!("{NETWORKS}/n"), None).unwrap();
    assert_eq!((status, body["error"]["code"].as_u64()), (404, Some(404)));
}

#[test]
fn references_must_exist_and_block_deletes() {
    let Some(api) = require_gce_api() else { return };
    let subnet = json!({"name": "s", "network": "global/networks/n", "ipCidrRange": "10.0.0.0/20"});
    let subnets = "/compute/v1/projects/p/regions/r/subnetworks";
    assert_eq!(insert(&api, subnets, subnet.clone()).0, 404);
    wait(
        &api,
        &insert(
            &api,
            NETWORKS,
            json!({"name": "n", "autoCreateSubnetworks": false}),
        )
        .1,
    );
    wait(&api, &insert(&api, subnets, subnet).1);
    let (status, body) = api
        .request("DELETE", &format!("{NETWORKS}/n"), None)
        .unwrap();
    assert_eq!(status, 400);
    assert_eq!(
        body["error"]["errors"][0]["reason"], "resourceInUseByAnotherResource",
        "{body}"
    );
    wait(
        &api,
        &api.request("DELETE", &format!("{subnets}/s"), None)
            .unwrap()
            .1,
    );
    wait(
        &api,
        &api.request("DELETE", &format!("{NETWORKS}/n"), None)
            .unwrap()
            .1,
    );
    assert!(api.paths().is_empty());
}

#[test]
fn label_and_resource_fingerprints_must_be_current() {
    let Some(api) = require_gce_api() else { return };
    let disks = "/compute/v1/projects/p/zones/z/disks";
    wait(
        &api,
        &insert(
            &api,
            disks,
            json!({"name": "d", "sizeGb": "20", "labels": {"a": "1"}}),
        )
        .1,
    );
    let disk = api.get(&format!("{disks}/d")).unwrap();
    assert_eq!(
        disk["zone"],
        format!("{GOOGLE}/compute/v1/projects/p/zones/z")
    );
    let stale = json!({"labels": {"a": "2"}, "labelFingerprint": "stale"});
    let (status, _) = api
        .request("POST", &format!("{disks}/d/setLabels"), Some(&stale))
        .unwrap();
    assert_eq!(status, 412);
    let fresh = json!({"labels": {"a": "2"}, "labelFingerprint": disk["labelFingerprint"]});
    wait(
        &api,
        &api.request("POST", &format!("{disks}/d/setLabels"), Some(&fresh))
            .unwrap()
            .1,
    );
    let disk2 = api.get(&format!("{disks}/d")).unwrap();
    assert_eq!(disk2["labels"]["a"], "2");
    assert_ne!(disk2["labelFingerprint"], disk["labelFingerprint"]);
}

#[test]
fn lists_page_and_groups_make_instances() {
    let Some(api) = require_gce_api() else { return };
    api.set_page_size(Some(2));
    for name in ["a", "b", "c"] {
        wait(
            &api,
            &insert(
                &api,
                NETWORKS,
                json!({"name": name, "autoCreateSubnetworks": false}),
            )
            .1,
        );
    }
    let (_, first) = api.request("GET", NETWORKS, None).unwrap();
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    let token = first["nextPageToken"].as_str().unwrap();
    let (_, second) = api
        .request("GET", &format!("{NETWORKS}?pageToken={token}"), None)
        .unwrap();
    assert_eq!(second["items"][0]["name"], "c");
    assert!(second["nextPageToken"].is_null());
    let (_, only) = api
        .request(
            "GET",
            &format!("{NETWORKS}?filter=name%20eq%20%22b%22"),
            None,
        )
        .unwrap();
    assert_eq!(only["items"].as_array().unwrap().len(), 1);

    let template = json!({"name": "t", "properties": {
        "machineType": "e2-medium",
        "metadata": {"items": [{"key": "cluster-name", "value": "c.example.com"}]},
        "networkInterfaces": [{"network": "global/networks/a"}],
        "disks": [{"boot": true, "initializeParams": {"sourceImage": "projects/ubuntu-os-cloud/global/images/x"}}],
    }});
    wait(
        &api,
        &insert(
            &api,
            "/compute/v1/projects/p/global/instanceTemplates",
            template,
        )
        .1,
    );
    let groups = "/compute/v1/projects/p/zones/z/instanceGroupManagers";
    let group = json!({"name": "g", "baseInstanceName": "nodes", "targetSize": 3, "instanceTemplate": "global/instanceTemplates/t"});
    wait(&api, &insert(&api, groups, group).1);
    let (_, instances) = api
        .request("GET", "/compute/v1/projects/p/zones/z/instances", None)
        .unwrap();
    let instance = &instances["items"][0];
    assert!(instance["name"].as_str().unwrap().starts_with("nodes-"));
    assert!(instance["metadata"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["key"] == "cluster-name"));
    let (_, managed) = api
        .request("POST", &format!("{groups}/g/listManagedInstances"), None)
        .unwrap();
    assert_eq!(managed["managedInstances"].as_array().unwrap().len(), 2);
    assert!(managed["nextPageToken"].is_string());
    // The template is in use by the group; deleting the group removes its instances.
    let (status, _) = api
        .request(
            "DELETE",
            "/compute/v1/projects/p/global/instanceTemplates/t",
            None,
        )
        .unwrap();
    assert_eq!(status, 400);
    wait(
        &api,
        &api.request("DELETE", &format!("{groups}/g"), None)
            .unwrap()
            .1,
    );
    assert!(!api.paths().iter().any(|p| p.contains("/instances/")));
    assert!(api
        .calls()
        .iter()
        .any(|c| c.method == "compute.instanceGroupManagers.insert" && c.is_write()));
}

#[test]
fn dns_iam_and_project_policy() {
    let Some(api) = require_gce_api() else { return };
    api.seed(
        "dns/v1/projects/p/managedZones/z",
        json!({"name": "z", "dnsName": "example.com."}),
    );
    let changes = "/dns/v1/projects/p/managedZones/z/changes";
    let record =
        json!({"name": "api.c.example.com.", "type": "A", "ttl": 60, "rrdatas": ["203.0.113.1"]});
    let (status, change) = api
        .request("POST", changes, Some(&json!({"additions": [record]})))
        .unwrap();
    assert_eq!(status, 200, "{change}");
    let (status, _) = api
        .request("POST", changes, Some(&json!({"additions": [record]})))
        .unwrap();
    assert_eq!(status, 409);
    let (_, sets) = api
        .request(
            "GET",
            "/dns/v1/projects/p/managedZones/z/rrsets?type=A",
            None,
        )
        .unwrap();
    assert_eq!(sets["rrsets"].as_array().unwrap().len(), 1);

    let accounts = "/iam/v1/projects/p/serviceAccounts";
    let (status, account) = api
        .request(
            "POST",
            accounts,
            Some(&json!({"accountId": "node-c", "serviceAccount": {"displayName": "n"}})),
        )
        .unwrap();
    assert_eq!(status, 200, "{account}");
    assert_eq!(account["email"], "node-c@p.iam.gserviceaccount.com");
    let (status, _) = api
        .request("POST", accounts, Some(&json!({"accountId": "node-c"})))
        .unwrap();
    assert_eq!(status, 409);
    let (status, _) = api
        .request(
            "GET",
            &format!("{accounts}/node-c@p.iam.gserviceaccount.com"),
            None,
        )
        .unwrap();
    assert_eq!(status, 200);

    let crm = "/cloudresourcemanager/v1/projects/p";
    let (_, policy) = api
        .request("POST", &format!("{crm}:getIamPolicy"), Some(&json!({})))
        .unwrap();
    let mut changed = policy.clone();
    changed["bindings"].as_array_mut().unwrap().push(json!({"role": "roles/viewer", "members": ["serviceAccount:node-c@p.iam.gserviceaccount.com"]}));
    let (status, _) = api
        .request(
            "POST",
            &format!("{crm}:setIamPolicy"),
            Some(&json!({"policy": changed})),
        )
        .unwrap();
    assert_eq!(status, 200);
    let (status, _) = api
        .request(
            "POST",
            &format!("{crm}:setIamPolicy"),
            Some(&json!({"policy": changed})),
        )
        .unwrap();
    assert_eq!(status, 409, "a stale etag is refused");
}

#[test]
fn faults_fail_the_given_fraction_of_calls() {
    let Some(api) = require_gce_api() else { return };
    api.set_fault_rate(0.5);
    let statuses: Vec<u16> = (0..200)
        .map(|_| api.request("GET", NETWORKS, None).unwrap().0)
        .collect();
    let failed = statuses.iter().filter(|s| **s != 200).count();
    assert!((60..140).contains(&failed), "{failed} of 200 failed");
    assert!(statuses.contains(&503) && statuses.contains(&429) && statuses.contains(&0));
}

/// Inserts and waits; panics unless the operation ends without error.
fn made(api: &GceApi, path: &str, body: Value) -> Value {
    let (status, op) = insert(api, path, body);
    assert_eq!(status, 200, "{op}");
    let done = wait(api, &op);
    assert!(done["error"].is_null(), "{done}");
    done
}

#[test]
fn references_are_stored_as_full_urls_and_links_name_google() {
    let Some(api) = require_gce_api() else { return };
    let full = |rest: &str| format!("{GOOGLE}/compute/v1/projects/p/{rest}");
    let op = made(
        &api,
        NETWORKS,
        json!({"name": "n", "autoCreateSubnetworks": false}),
    );
    for field in ["selfLink", "targetLink"] {
        assert!(
            op[field].as_str().unwrap().starts_with(GOOGLE),
            "{field}: {op}"
        );
    }
    // A partial path, a `projects/...` path and a URL on the server's own
    // host are each stored as Google's full URL.
    made(
        &api,
        "/compute/v1/projects/p/regions/r/subnetworks",
        json!({"name": "s", "network": "global/networks/n", "ipCidrRange": "10.0.0.0/20"}),
    );
    made(
        &api,
        "/compute/v1/projects/p/global/firewalls",
        json!({"name": "f", "network": "projects/p/global/networks/n",
            "allowed": [{"IPProtocol": "tcp"}]}),
    );
    made(
        &api,
        "/compute/v1/projects/p/global/routes",
        json!({"name": "rt", "network": format!("{}/compute/v1/projects/p/global/networks/n", api.url()),
            "destRange": "10.1.0.0/16", "priority": 1000, "nextHopGateway": "global/gateways/default-internet-gateway"}),
    );
    let op = made(
        &api,
        "/compute/v1/projects/p/zones/z/disks",
        json!({"name": "d", "sizeGb": "20", "type": "zones/z/diskTypes/pd-ssd",
            "description": "zones/z/diskTypes/not-a-reference"}),
    );
    assert_eq!(op["zone"], full("zones/z"), "{op}");
    let subnet = api
        .request(
            "GET",
            "/compute/v1/projects/p/regions/r/subnetworks/s",
            None,
        )
        .unwrap()
        .1;
    assert_eq!(subnet["network"], full("global/networks/n"));
    assert_eq!(subnet["region"], full("regions/r"));
    assert_eq!(subnet["selfLink"], full("regions/r/subnetworks/s"));
    let firewall = api.get("compute/v1/projects/p/global/firewalls/f").unwrap();
    assert_eq!(firewall["network"], full("global/networks/n"));
    let route = api.get("compute/v1/projects/p/global/routes/rt").unwrap();
    assert_eq!(route["network"], full("global/networks/n"));
    assert_eq!(
        route["nextHopGateway"],
        full("global/gateways/default-internet-gateway")
    );
    let disk = api.get("compute/v1/projects/p/zones/z/disks/d").unwrap();
    assert_eq!(disk["type"], full("zones/z/diskTypes/pd-ssd"));
    assert_eq!(disk["zone"], full("zones/z"));
    assert_eq!(disk["description"], "zones/z/diskTypes/not-a-reference");
    // A patch's references too.
    let (status, op) = api
        .request(
            "PATCH",
            "/compute/v1/projects/p/global/firewalls/f",
            Some(&json!({"name": "f", "network": "global/networks/n", "sourceRanges": ["10.0.0.0/8"]})),
        )
        .unwrap();
    assert_eq!(status, 200, "{op}");
    wait(&api, &op);
    let firewall = api.get("compute/v1/projects/p/global/firewalls/f").unwrap();
    assert_eq!(firewall["network"], full("global/networks/n"));
    // A list's own link and its items'.
    let (_, list) = api.request("GET", NETWORKS, None).unwrap();
    assert!(list["selfLink"].as_str().unwrap().starts_with(GOOGLE));
    assert_eq!(list["items"][0]["selfLink"], full("global/networks/n"));
}

#[test]
fn projects_zones_and_target_pool_health_checks_are_served() {
    let Some(api) = require_gce_api() else { return };
    let (status, project) = api
        .request("GET", "/compute/v1/projects/any-project", None)
        .unwrap();
    assert_eq!(status, 200, "{project}");
    assert_eq!(project["name"], "any-project");
    assert!(
        project["defaultServiceAccount"]
            .as_str()
            .unwrap()
            .ends_with("-compute@developer.gserviceaccount.com"),
        "{project}"
    );
    let (status, zones) = api
        .request("GET", "/compute/v1/projects/p/zones", None)
        .unwrap();
    assert_eq!(status, 200, "{zones}");
    let zone = zones["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|z| z["name"] == "us-central1-a")
        .expect("us-central1-a");
    assert_eq!(
        zone["region"],
        format!("{GOOGLE}/compute/v1/projects/p/regions/us-central1")
    );
    let (status, _) = api
        .request("GET", "/compute/v1/projects/p/zones/nowhere-a", None)
        .unwrap();
    assert_eq!(status, 404);

    for check in ["c1", "c2"] {
        made(
            &api,
            "/compute/v1/projects/p/global/httpHealthChecks",
            json!({"name": check, "port": 8080}),
        );
    }
    made(
        &api,
        "/compute/v1/projects/p/regions/r/targetPools",
        json!({"name": "tp"}),
    );
    let pool = "/compute/v1/projects/p/regions/r/targetPools/tp";
    let add = |check: &str| {
        api.request(
            "POST",
            &format!("{pool}/addHealthCheck"),
            Some(&json!({"healthChecks": [{"healthCheck": check}]})),
        )
        .unwrap()
    };
    let (status, op) = add("global/httpHealthChecks/c1");
    assert_eq!(status, 200, "{op}");
    wait(&api, &op);
    let stored = api
        .get("compute/v1/projects/p/regions/r/targetPools/tp")
        .unwrap();
    assert_eq!(
        stored["healthChecks"],
        json!([format!(
            "{GOOGLE}/compute/v1/projects/p/global/httpHealthChecks/c1"
        )])
    );
    assert_eq!(add("global/httpHealthChecks/c2").0, 400);
    assert_eq!(add("global/httpHealthChecks/missing").0, 404);
    let (status, op) = api
        .request(
            "POST",
            &format!("{pool}/removeHealthCheck"),
            Some(&json!({"healthChecks": [{"healthCheck": "projects/p/global/httpHealthChecks/c1"}]})),
        )
        .unwrap();
    assert_eq!(status, 200, "{op}");
    wait(&api, &op);
    let stored = api
        .get("compute/v1/projects/p/regions/r/targetPools/tp")
        .unwrap();
    assert_eq!(stored["healthChecks"], json!([]));
}

/// Sends `head` (request line and headers, without the blank line) and
/// `body` as they are; the status answered.
fn raw(api: &GceApi, head: &str, body: &str) -> u16 {
    use std::io::{Read, Write};
    let addr = api.url().trim_start_matches("http://").to_string();
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(stream, "{head}\r\nConnection: close\r\n\r\n{body}").unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_post_without_a_length_gets_411() {
    let Some(api) = require_gce_api() else { return };
    let (_, op) = insert(
        &api,
        NETWORKS,
        json!({"name": "n", "autoCreateSubnetworks": false}),
    );
    let wait_path = format!(
        "{}/wait",
        op["selfLink"]
            .as_str()
            .unwrap()
            .strip_prefix(GOOGLE)
            .unwrap()
    );
    assert_eq!(
        raw(&api, &format!("POST {wait_path} HTTP/1.1\r\nHost: x"), ""),
        411
    );
    assert_eq!(
        raw(
            &api,
            &format!("POST {wait_path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0"),
            ""
        ),
        200
    );
    // Chunked encoding carries its own length.
    let body = json!({"name": "m", "autoCreateSubnetworks": false}).to_string();
    let chunked = format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
    assert_eq!(
        raw(
            &api,
            &format!("POST {NETWORKS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked"),
            &chunked
        ),
        200
    );
    // A GET needs no length.
    assert_eq!(
        raw(&api, &format!("GET {NETWORKS} HTTP/1.1\r\nHost: x"), ""),
        200
    );
}

#[test]
fn tokens_need_a_scope_that_covers_the_api() {
    let Some(api) = require_gce_api() else { return };
    api.require_tokens();
    let get = |token: Option<&str>, path: &str| {
        let auth = token.map_or(String::new(), |t| format!("\r\nAuthorization: Bearer {t}"));
        raw(&api, &format!("GET {path} HTTP/1.1\r\nHost: x{auth}"), "")
    };
    let compute = "/compute/v1/projects/p/global/networks";
    let dns = "/dns/v1/projects/p/managedZones";
    assert_eq!(get(None, compute), 401);
    assert_eq!(get(Some("ya29.unknown"), compute), 401);
    let storage_only =
        api.issue_token(&["https://www.googleapis.com/auth/devstorage.full_control"]);
    assert_eq!(get(Some(&storage_only), compute), 403);
    let compute_only = api.issue_token(&["https://www.googleapis.com/auth/compute"]);
    assert_eq!(get(Some(&compute_only), compute), 200);
    assert_eq!(get(Some(&compute_only), dns), 403);
    let platform = api.issue_token(&["https://www.googleapis.com/auth/cloud-platform"]);
    assert_eq!(get(Some(&platform), compute), 200);
    assert_eq!(get(Some(&platform), dns), 200);
    // The token endpoint: a JWT's scope claim, a refresh token's scope.
    let claims = base64_url(
        &json!({"iss": "a@p.iam.gserviceaccount.com", "scope": "https://www.googleapis.com/auth/compute.readonly"})
            .to_string(),
    );
    let form = format!(
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=e30.{claims}.sig"
    );
    let port = api.url().rsplit(':').next().unwrap();
    let answer: Value = {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        write!(stream, "POST /token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}", form.len()).unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap()
    };
    let read_only = answer["access_token"].as_str().expect("a token");
    assert_eq!(get(Some(read_only), compute), 200);
    let (_, op) = api.request("GET", "/compute/v1/projects/p", None).unwrap();
    assert_eq!(op["error"]["code"], 401, "{op}");
    let insert_status = raw(
        &api,
        &format!("POST {compute} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {read_only}\r\nContent-Length: 2"),
        "{}",
    );
    assert_eq!(insert_status, 403);
    assert_eq!(api.token_uri(), format!("{}/token", api.url()));
}

fn base64_url(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

#[test]
fn google_behaviours_can_be_switched_on() {
    let Some(api) = require_gce_api() else { return };
    // A new service account is refused in a policy for a while.
    api.set_iam_delay(Duration::from_millis(300));
    let (status, account) = api
        .request(
            "POST",
            "/iam/v1/projects/p/serviceAccounts",
            Some(&json!({"accountId": "node-abc", "serviceAccount": {}})),
        )
        .unwrap();
    assert_eq!(status, 200, "{account}");
    let member = format!("serviceAccount:{}", account["email"].as_str().unwrap());
    let set = || {
        api.request(
            "POST",
            "/cloudresourcemanager/v1/projects/p:setIamPolicy",
            Some(&json!({"policy": {"bindings": [{"role": "roles/viewer", "members": [member]}]}})),
        )
        .unwrap()
    };
    let (status, body) = set();
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{body}"
    );
    std::thread::sleep(Duration::from_millis(350));
    assert_eq!(set().0, 200);

    // wait answers while the operation runs; failed operations carry
    // Google's error codes and change nothing.
    api.set_operation_delay(Duration::from_millis(200));
    api.set_wait_returns_early(true);
    let (_, op) = insert(
        &api,
        NETWORKS,
        json!({"name": "n", "autoCreateSubnetworks": false}),
    );
    let path = op["selfLink"]
        .as_str()
        .unwrap()
        .strip_prefix(GOOGLE)
        .unwrap()
        .to_string();
    let (_, early) = api.request("POST", &format!("{path}/wait"), None).unwrap();
    assert_ne!(early["status"], "DONE", "{early}");
    wait(&api, &op);
    api.set_operation_delay(Duration::from_millis(1));
    api.set_operation_failure_rate(1.0);
    let (_, op) = insert(
        &api,
        NETWORKS,
        json!({"name": "m", "autoCreateSubnetworks": false}),
    );
    let done = wait(&api, &op);
    let code = done["error"]["errors"][0]["code"].as_str().unwrap();
    assert!(
        ["INTERNAL_ERROR", "RESOURCE_OPERATION_RATE_EXCEEDED"].contains(&code),
        "{done}"
    );
    assert!(done["httpErrorStatusCode"].as_u64().is_some(), "{done}");
    assert!(api.get("compute/v1/projects/p/global/networks/m").is_none());
    api.set_operation_failure_rate(0.0);
}

/// Compute Engine's rate quotas: per project and API group (per region for
/// regional and zonal methods), counted in synchronized windows, answered
/// as Google answers a call over a quota.
#[test]
fn calls_over_a_rate_quota_are_answered_as_google_answers_them() {
    use kops_testkit::gce_api::QUOTA_GROUPS;
    let Some(api) = require_gce_api() else { return };
    let per_minute = |name: &str| {
        QUOTA_GROUPS
            .iter()
            .find(|g| g.name == name)
            .and_then(|g| g.per_minute)
    };
    // Google's documented defaults, a minute per project.
    assert_eq!(per_minute("list_requests"), Some(1500));
    assert_eq!(per_minute("default_per_region"), Some(1500));
    assert_eq!(per_minute("iam-write"), Some(600));
    api.set_documented_quotas();
    // Windows of an hour: no boundary falls between the calls below.
    let hour = Duration::from_secs(3600);
    api.set_rate_quota("list_requests", 2, hour);
    let statuses: Vec<u16> = (0..3)
        .map(|_| api.request("GET", NETWORKS, None).unwrap().0)
        .collect();
    assert_eq!(statuses, [200, 200, 403]);
    let (status, body) = api.request("GET", NETWORKS, None).unwrap();
    assert_eq!(status, 403);
    let error = &body["error"];
    let number = error["details"][0]["metadata"]["consumer"]
        .as_str()
        .and_then(|c| c.strip_prefix("projects/"))
        .expect("the consumer")
        .to_string();
    let message = format!(
        "Quota exceeded for quota metric 'List requests' and limit 'List requests per minute' of service 'compute.googleapis.com' for consumer 'project_number:{number}'."
    );
    assert_eq!(
        body,
        json!({"error": {
            "code": 403,
            "message": message,
            "errors": [{"message": message, "domain": "usageLimits", "reason": "rateLimitExceeded"}],
            "status": "PERMISSION_DENIED",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "RATE_LIMIT_EXCEEDED",
                    "domain": "googleapis.com",
                    "metadata": {
                        "service": "compute.googleapis.com",
                        "consumer": format!("projects/{number}"),
                        "quota_metric": "compute.googleapis.com/list_requests",
                        "quota_limit": "ListRequestsPerMinutePerProject",
                        "quota_limit_value": "2",
                        "quota_location": "global",
                        "quota_unit": "1/min/{project}",
                    }
                },
                {
                    "@type": "type.googleapis.com/google.rpc.Help",
                    "links": [{"description": "Request a higher quota limit.",
                        "url": "https://cloud.google.com/docs/quotas/help/request_increase"}]
                }
            ]
        }})
    );
    // Other projects and groups have their own; a get is a read, not a list.
    let q = "/compute/v1/projects/q/global/networks";
    assert_eq!(api.request("GET", q, None).unwrap().0, 200);
    assert_eq!(
        api.request("GET", &format!("{NETWORKS}/none"), None)
            .unwrap()
            .0,
        404
    );

    // Zonal methods count per region: the zones of us-test1 share one.
    api.set_rate_quota("list_requests_per_region", 1, hour);
    let groups = |zone: &str| format!("/compute/v1/projects/p/zones/{zone}/instanceGroupManagers");
    assert_eq!(
        api.request("GET", &groups("us-test1-a"), None).unwrap().0,
        200
    );
    let (status, body) = api.request("GET", &groups("us-test1-b"), None).unwrap();
    assert_eq!(status, 403, "{body}");
    let info = &body["error"]["details"][0]["metadata"];
    assert_eq!(info["quota_location"], "us-test1");
    assert_eq!(info["quota_limit"], "ListRequestsPerMinutePerRegion");
    assert_eq!(info["quota_unit"], "1/min/{project}/{region}");
    assert_eq!(
        api.request("GET", &groups("us-central1-a"), None)
            .unwrap()
            .0,
        200
    );
    // A global list is not a regional one.
    assert_eq!(api.request("GET", q, None).unwrap().0, 200);

    // IAM answers 429.
    api.set_rate_quota("iam-read", 1, hour);
    let accounts = "/iam/v1/projects/p/serviceAccounts";
    assert_eq!(api.request("GET", accounts, None).unwrap().0, 200);
    let (status, body) = api.request("GET", accounts, None).unwrap();
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(body["error"]["errors"][0]["reason"], "rateLimitExceeded");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("of service 'iam.googleapis.com'"),
        "{body}"
    );

    // Windows are synchronized: the quota is whole again at the next one,
    // however late in the window it ran out.
    api.set_rate_quota("read_requests", 1, Duration::from_millis(500));
    let network = format!("{NETWORKS}/none");
    let mut refused = false;
    for _ in 0..2 {
        let first = api.request("GET", &network, None).unwrap().0;
        let second = api.request("GET", &network, None).unwrap().0;
        if first == 404 && second == 403 {
            refused = true;
            break;
        }
    }
    assert!(refused, "the second read of a window was not refused");
    std::thread::sleep(Duration::from_millis(550));
    assert_eq!(api.request("GET", &network, None).unwrap().0, 404);
}

/// kops deletes a group's instances and the group side by side. Google's
/// group makes no replacement once its deletion has begun, and takes the
/// instances it has when the deletion ends.
#[test]
fn a_group_being_deleted_replaces_no_instance() {
    let Some(api) = require_gce_api() else { return };
    made(
        &api,
        NETWORKS,
        json!({"name": "n", "autoCreateSubnetworks": true}),
    );
    let template = json!({"name": "t", "properties": {
        "machineType": "e2-medium",
        "networkInterfaces": [{"network": "global/networks/n"}],
        "disks": [{"boot": true, "initializeParams": {"sourceImage": "projects/ubuntu-os-cloud/global/images/x"}}],
    }});
    made(
        &api,
        "/compute/v1/projects/p/global/instanceTemplates",
        template,
    );
    let groups = "/compute/v1/projects/p/zones/z/instanceGroupManagers";
    let group = json!({"name": "g", "baseInstanceName": "nodes", "targetSize": 1, "instanceTemplate": "global/instanceTemplates/t"});
    made(&api, groups, group);
    let instance = api
        .paths()
        .into_iter()
        .find(|p| p.contains("/instances/"))
        .expect("the group made its instance");

    // On its own, a deleted member is replaced.
    wait(
        &api,
        &api.request("DELETE", &format!("/{instance}"), None)
            .unwrap()
            .1,
    );
    let replacement = api
        .paths()
        .into_iter()
        .find(|p| p.contains("/instances/"))
        .expect("the group replaced its instance");
    assert_ne!(replacement, instance);

    // Deleted with its group, it is not: the group's deletion ends last.
    api.set_operation_delay(Duration::from_millis(300));
    let (_, member) = api
        .request("DELETE", &format!("/{replacement}"), None)
        .unwrap();
    let (_, whole) = api.request("DELETE", &format!("{groups}/g"), None).unwrap();
    wait(&api, &member);
    wait(&api, &whole);
    let left: Vec<String> = api
        .paths()
        .into_iter()
        .filter(|p| p.contains("/instances/") || p.contains("/instanceGroupManagers/"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Google balances a passthrough load balancer's regional backend service
/// by connection: a backend stored without a mode reads back with it; and
/// it leaves empty lists out of what it answers.
#[test]
fn a_passthrough_backend_reads_back_balancing_by_connection() {
    let Some(api) = require_gce_api() else { return };
    let path = "compute/v1/projects/p/regions/r/backendServices/api";
    api.seed(
        path,
        json!({"name": "api", "loadBalancingScheme": "INTERNAL", "protocol": "TCP",
            "backends": [{"group": "zones/z/instanceGroups/g"}, {"group": "zones/z/instanceGroups/h", "balancingMode": "CONNECTION"}]}),
    );
    let (status, service) = api.request("GET", &format!("/{path}"), None).unwrap();
    assert_eq!(status, 200, "{service}");
    // An empty list (a repeated field) reads back absent.
    api.seed(
        "compute/v1/projects/p/global/firewalls/f",
        json!({"name": "f", "sourceTags": [], "sourceRanges": ["10.0.0.0/8"]}),
    );
    let (_, rule) = api
        .request("GET", "/compute/v1/projects/p/global/firewalls/f", None)
        .unwrap();
    assert!(rule.get("sourceTags").is_none(), "{rule}");
    assert_eq!(rule["sourceRanges"][0], "10.0.0.0/8");
    for backend in service["backends"].as_array().unwrap() {
        assert_eq!(backend["balancingMode"], "CONNECTION", "{service}");
        assert!(backend["group"]
            .as_str()
            .unwrap()
            .starts_with("https://www.googleapis.com/compute/v1/projects/p/zones/z/"));
    }
}

/// Google's answers name the kind of every message, nested ones included,
/// and give an external access config the project's default tier.
#[test]
fn nested_messages_read_back_with_their_kind_and_access_configs_with_a_tier() {
    let Some(api) = require_gce_api() else { return };
    made(
        &api,
        NETWORKS,
        json!({"name": "n", "autoCreateSubnetworks": true}),
    );
    let template = json!({"name": "t", "properties": {
        "machineType": "e2-medium",
        "metadata": {"items": [{"key": "a", "value": "b"}]},
        "networkInterfaces": [{"network": "global/networks/n", "accessConfigs": [{"type": "ONE_TO_ONE_NAT"}]}],
        "disks": [{"boot": true, "initializeParams": {"sourceImage": "projects/ubuntu-os-cloud/global/images/x"}}],
    }});
    let path = "/compute/v1/projects/p/global/instanceTemplates";
    made(&api, path, template);
    let (_, t) = api.request("GET", &format!("{path}/t"), None).unwrap();
    let p = &t["properties"];
    assert_eq!(t["kind"], "compute#instanceTemplate", "{t}");
    assert_eq!(p["disks"][0]["kind"], "compute#attachedDisk", "{t}");
    assert_eq!(p["metadata"]["kind"], "compute#metadata", "{t}");
    let interface = &p["networkInterfaces"][0];
    assert_eq!(interface["kind"], "compute#networkInterface", "{t}");
    assert_eq!(
        interface["accessConfigs"][0]["kind"],
        "compute#accessConfig"
    );
    assert_eq!(interface["accessConfigs"][0]["networkTier"], "PREMIUM");
}
