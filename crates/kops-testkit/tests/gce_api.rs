//! The GCE API test server behaves as Google documents: schema checks,
//! operations, errors, fingerprints, references, pages, faults.

use std::time::Duration;

use kops_testkit::{require_gce_api, GceApi};
use serde_json::{json, Value};

const NETWORKS: &str = "/compute/v1/projects/p/global/networks";

fn wait(api: &GceApi, op: &Value) -> Value {
    let link = op["selfLink"].as_str().expect("an operation");
    let path = link.strip_prefix(api.url()).unwrap();
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
    assert_eq!(network["selfLink"], format!("{}{NETWORKS}/n", api.url()));
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
        .strip_prefix(api.url())
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
        format!("{}/compute/v1/projects/p/zones/z", api.url())
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
