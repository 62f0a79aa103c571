//! kops' GCE update cases applied directly, through the binary, against
//! the GCE API test server (kops-testkit): apply, a second apply that
//! changes nothing, `delete cluster` (its dry run, then `--yes`) leaving
//! the project as it was (a Kubernetes Service's load balancer, made by
//! the cloud controller manager, included), another cluster's resources
//! and unrelated ones untouched, and the calls each makes.

use std::collections::BTreeMap;

use kops_testkit::GceApi;

use crate::common::{command, file_url, Run};

fn kops_on(api: &GceApi, args: &[&str]) -> Run {
    let mut c = command(args);
    for (k, v) in api.env() {
        c.env(k, v);
    }
    c.output().expect("run kops").into()
}

pub(crate) fn cluster_name(manifest: &str) -> String {
    let doc = manifest.split("\n---").next().unwrap_or("");
    doc.lines()
        .skip_while(|l| !l.starts_with("metadata:"))
        .find_map(|l| l.trim().strip_prefix("name: "))
        .unwrap_or("")
        .to_string()
}

/// The project and the DNS zone a case's cluster names.
pub(crate) fn seed(api: &GceApi, manifest: &str, name: &str) {
    let project = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("project: "))
        .unwrap_or("testproject");
    let zone = name.split_once('.').map_or(name, |(_, z)| z);
    api.seed(
        &format!(
            "dns/v1/projects/{project}/managedZones/{}",
            zone.replace('.', "-")
        ),
        serde_json::json!({"name": zone.replace('.', "-"), "dnsName": format!("{zone}.")}),
    );
}

/// Resources that are not the cluster's: another cluster's (named and
/// labelled as kops names its own) and a project's usual ones. Delete must
/// leave every one of them.
fn seed_others(api: &GceApi, project: &str) {
    let compute = format!("compute/v1/projects/{project}");
    let other = "other-example-com";
    let network = format!("projects/{project}/global/networks/{other}");
    api.seed(
        &format!("{compute}/global/networks/{other}"),
        serde_json::json!({"autoCreateSubnetworks": false}),
    );
    api.seed(
        &format!("{compute}/global/networks/default"),
        serde_json::json!({"autoCreateSubnetworks": true}),
    );
    api.seed(
        &format!("{compute}/regions/us-test1/subnetworks/us-test1-{other}"),
        serde_json::json!({"network": network, "ipCidrRange": "10.9.0.0/20"}),
    );
    api.seed(
        &format!("{compute}/global/instanceTemplates/nodes-us-test1-b-other-e-1a2b3c"),
        serde_json::json!({"properties": {
            "metadata": {"items": [{"key": "cluster-name", "value": "other.example.com"}]},
            "networkInterfaces": [{"network": network,
                "subnetwork": format!("projects/{project}/regions/us-test1/subnetworks/us-test1-{other}")}],
        }}),
    );
    api.seed(
        &format!("{compute}/global/firewalls/node-to-node-{other}"),
        serde_json::json!({"network": network, "sourceTags": [format!("{other}-k8s-io-role-node")],
            "targetTags": [format!("{other}-k8s-io-role-node")], "allowed": [{"IPProtocol": "tcp"}]}),
    );
    api.seed(
        &format!("{compute}/global/firewalls/default-allow-ssh"),
        serde_json::json!({"network": format!("projects/{project}/global/networks/default"),
            "sourceRanges": ["0.0.0.0/0"], "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}]}),
    );
    api.seed(
        &format!("{compute}/zones/us-test1-a/disks/a-etcd-main-{other}"),
        serde_json::json!({"sizeGb": "20", "labels": {"k8s-io-cluster-name": other}}),
    );
    seed_service_load_balancer(
        api,
        project,
        "a0f1e2d3c4b5a69788796a5b4c3d2e1f",
        "0123456789abcdef",
        &format!("{other}-k8s-io-role-node"),
        &format!("compute/v1/{network}"),
    );
    api.seed(
        &format!("{compute}/regions/us-test1/addresses/api-{other}"),
        serde_json::json!({"address": "203.0.113.200", "status": "RESERVED"}),
    );
    let email = format!("node-{other}@{project}.iam.gserviceaccount.com");
    api.seed(
        &format!("iam/v1/projects/{project}/serviceAccounts/{email}"),
        serde_json::json!({"name": format!("projects/{project}/serviceAccounts/{email}"),
            "projectId": project, "email": email, "uniqueId": "100000000000000000042"}),
    );
}

/// The load balancer the GCP cloud controller manager makes for a Service
/// of type LoadBalancer (`a<uid>` names, descriptions as it writes them):
/// a `k8s-fw-` firewall rule for the nodes' `tag` on `network`, the
/// forwarding rule, its target pool and the cluster's shared node HTTP
/// health check `k8s-<cluster id>-node`, and that check's firewall rule.
/// Returns the paths it made.
fn seed_service_load_balancer(
    api: &GceApi,
    project: &str,
    uid: &str,
    cluster_id: &str,
    tag: &str,
    network: &str,
) -> Vec<String> {
    let compute = format!("compute/v1/projects/{project}");
    let link = |path: &str| format!("{}/{path}", api.url());
    let service = serde_json::json!({"kubernetes.io/service-name": "default/web"}).to_string();
    let check = format!("{compute}/global/httpHealthChecks/k8s-{cluster_id}-node");
    let pool = format!("{compute}/regions/us-test1/targetPools/{uid}");
    let rule = format!("{compute}/regions/us-test1/forwardingRules/{uid}");
    let firewall = format!("{compute}/global/firewalls/k8s-fw-{uid}");
    let check_firewall = format!("{compute}/global/firewalls/k8s-{cluster_id}-node-http-hc");
    api.seed(
        &check,
        serde_json::json!({"port": 10256, "requestPath": "/healthz",
            "description": serde_json::json!({"kubernetes.io/service-name": format!("k8s-{cluster_id}-node")}).to_string()}),
    );
    api.seed(
        &pool,
        serde_json::json!({"healthChecks": [link(&check)], "sessionAffinity": "NONE",
            "region": link(&format!("{compute}/regions/us-test1")), "description": service}),
    );
    api.seed(
        &rule,
        serde_json::json!({"IPAddress": "203.0.113.50", "IPProtocol": "TCP", "portRange": "80-80",
            "loadBalancingScheme": "EXTERNAL", "target": link(&pool), "description": service}),
    );
    api.seed(
        &firewall,
        serde_json::json!({"network": link(network), "sourceRanges": ["0.0.0.0/0"],
            "targetTags": [tag], "allowed": [{"IPProtocol": "tcp", "ports": ["80"]}],
            "description": serde_json::json!({"kubernetes.io/service-name": "default/web",
                "kubernetes.io/service-ip": "203.0.113.50"}).to_string()}),
    );
    api.seed(
        &check_firewall,
        serde_json::json!({"network": link(network), "sourceRanges": ["130.211.0.0/22", "35.191.0.0/16"],
            "targetTags": [tag], "allowed": [{"IPProtocol": "tcp", "ports": ["10256"]}],
            "description": serde_json::json!({"kubernetes.io/cluster-id": cluster_id}).to_string()}),
    );
    vec![check, pool, rule, firewall, check_firewall]
}

/// An A record in `zone` (as dns-controller publishes them).
fn seed_record(api: &GceApi, project: &str, zone: &str, name: &str, ip: &str) {
    api.seed(
        &format!(
            "dns/v1/projects/{project}/managedZones/{}/rrsets/{name}./A",
            zone.replace('.', "-")
        ),
        serde_json::json!({"kind": "dns#resourceRecordSet", "name": format!("{name}."),
            "type": "A", "ttl": 60, "rrdatas": [ip]}),
    );
}

/// Calls of one run, by discovery method.
pub(crate) fn by_method(calls: &[kops_testkit::gce_api::Call]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for call in calls {
        *counts.entry(call.method.clone()).or_default() += 1;
    }
    counts
}

/// Google's behaviours the server can switch on, for [`lifecycle_with`].
#[derive(Clone, Copy, Default)]
struct Google {
    /// A new service account refused in IAM policies for this long.
    iam_delay: Option<std::time::Duration>,
    /// Operations take this long.
    operation_delay: Option<std::time::Duration>,
    /// The fraction of operations that end in an error.
    operation_failures: f64,
    /// `operations.wait` answers while the operation runs.
    early_wait: bool,
    /// Compute reads (gets, lists, aggregated lists) allowed per second in
    /// each of Google's read groups.
    read_quota: Option<u32>,
}

fn lifecycle(case_name: &str, fault_rate: f64) {
    lifecycle_with(case_name, fault_rate, Google::default());
}

fn lifecycle_with(case_name: &str, fault_rate: f64, google: Google) {
    let Some(shared) = kops_testkit::shared_dir() else {
        return;
    };
    let case = shared
        .join("conformance/kops/update_cluster")
        .join(case_name);
    if !case.join("in-v1alpha2.yaml").is_file() {
        eprintln!("skipping: {} not found", case.display());
        return;
    }
    let Some(api) = kops_testkit::require_gce_api() else {
        return;
    };
    api.set_page_size(Some(2));
    if let Some(delay) = google.iam_delay {
        api.set_iam_delay(delay);
    }
    if let Some(delay) = google.operation_delay {
        api.set_operation_delay(delay);
    }
    api.set_operation_failure_rate(google.operation_failures);
    api.set_wait_returns_early(google.early_wait);
    if let Some(limit) = google.read_quota {
        for group in [
            "read_requests",
            "list_requests",
            "heavy_weight_read_requests",
            "read_requests_per_region",
            "list_requests_per_region",
        ] {
            api.set_rate_quota(group, limit, std::time::Duration::from_secs(1));
        }
    }
    let work = tempfile::tempdir().unwrap();
    let state = file_url(&work.path().join("state"));
    let input = case.join("in-v1alpha2.yaml");
    let manifest = std::fs::read_to_string(&input).unwrap();
    let name = cluster_name(&manifest);
    seed(&api, &manifest, &name);
    let project = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("project: "))
        .unwrap_or("testproject")
        .to_string();
    seed_others(&api, &project);
    let zone = name.split_once('.').map_or("", |(_, z)| z).to_string();
    seed_record(
        &api,
        &project,
        &zone,
        "api.other.example.com",
        "203.0.113.200",
    );
    let before = api.paths();
    let r = kops_on(
        &api,
        &["create", "-f", input.to_str().unwrap(), "--state", &state],
    );
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    let key = case.join("id_rsa.pub");
    if key.is_file() {
        let r = kops_on(
            &api,
            &[
                "create",
                "sshpublickey",
                &name,
                "-i",
                key.to_str().unwrap(),
                "--state",
                &state,
            ],
        );
        assert_eq!(r.code, 0, "sshpublickey: {}", r.stderr);
    }
    let r = kops_on(&api, &["update", "cluster", &name, "--state", &state]);
    assert_eq!(r.code, 0, "dry run: {}", r.stderr);
    let dry = api.take_calls();
    assert!(
        !dry.iter().any(|c| c.is_write()),
        "a dry run wrote: {dry:?}"
    );

    api.set_fault_rate(fault_rate);
    let r = kops_on(
        &api,
        &["update", "cluster", &name, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply: {}\n{}", r.stderr, r.stdout);
    let apply = api.take_calls();
    api.set_fault_rate(0.0);
    // The no-op is counted exactly: nothing fails in it.
    api.set_operation_failure_rate(0.0);
    api_addresses_are_in_node_configs(&api, &work.path().join("state").join(&name));
    let r = kops_on(
        &api,
        &["update", "cluster", &name, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "re-apply: {}", r.stderr);
    let noop = api.take_calls();
    let writes: Vec<_> = noop.iter().filter(|c| c.is_write()).collect();
    assert!(writes.is_empty(), "the second apply wrote: {writes:?}");
    // A list is its first page (later pages carry pageToken).
    let first_pages: Vec<_> = noop
        .iter()
        .filter(|c| c.status == 200 && !c.query.contains("pageToken"))
        .cloned()
        .collect();
    let lists: BTreeMap<String, usize> = by_method(&first_pages)
        .into_iter()
        .filter(|(m, _)| m.ends_with(".list") || m.ends_with(".aggregatedList"))
        .collect();
    assert!(lists.values().all(|n| *n <= 1), "lists per kind: {lists:?}");
    let created: Vec<String> = api
        .paths()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    println!(
        "{case_name}: apply {} calls ({} writes, fault rate {fault_rate}), no-op {} calls, {} resources; no-op lists {lists:?}",
        apply.len(),
        apply.iter().filter(|c| c.is_write()).count(),
        noop.len(),
        created.len()
    );
    assert!(
        created
            .iter()
            .any(|p| p.contains("/instanceGroupManagers/")),
        "{created:?}"
    );

    // What dns-controller publishes once the control plane runs.
    // dns-controller's records, unless the cluster has no DNS
    // (`topology.dns.type: None`).
    let with_dns = !manifest.contains("type: None");
    if with_dns {
        seed_record(
            &api,
            &project,
            &zone,
            &format!("api.{name}"),
            "203.0.113.10",
        );
        seed_record(
            &api,
            &project,
            &zone,
            &format!("api.internal.{name}"),
            "10.0.16.2",
        );
    }
    // A Service of type LoadBalancer, made by the cloud controller manager.
    let network = created
        .iter()
        .find(|p| p.contains("/global/networks/"))
        .expect("the cluster's network");
    let safe = name.replace('.', "-");
    let balancer = seed_service_load_balancer(
        &api,
        &project,
        "a1b2c3d4e5f60718293a4b5c6d7e8f90",
        "fedcba9876543210",
        &format!("{safe}-k8s-io-role-node"),
        network,
    );
    let r = kops_on(&api, &["delete", "cluster", &name, "--state", &state]);
    assert_eq!(r.code, 0, "delete dry run: {}", r.stderr);
    for made in &balancer {
        let last = made.rsplit('/').next().unwrap();
        assert!(r.stdout.contains(last), "{last} not listed:\n{}", r.stdout);
    }
    assert!(!r.stdout.contains("a0f1e2d3c4b5"), "{}", r.stdout);
    let dry = api.take_calls();
    assert!(
        !dry.iter().any(|c| c.is_write()),
        "a delete dry run wrote: {dry:?}"
    );
    for kind in ["InstanceTemplate", "InstanceGroupManager", "Network"] {
        assert!(r.stdout.contains(kind), "{kind} not listed:\n{}", r.stdout);
    }
    assert_eq!(r.stdout.contains("DNSRecord"), with_dns, "{}", r.stdout);
    assert_eq!(
        r.stdout.contains(&format!("api.{name}.")),
        with_dns,
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("other"), "{}", r.stdout);

    api.set_fault_rate(fault_rate);
    api.set_operation_failure_rate(google.operation_failures);
    let r = kops_on(
        &api,
        &[
            "delete",
            "cluster",
            &name,
            "--state",
            &state,
            "--yes",
            "--interval",
            "1s",
        ],
    );
    api.set_fault_rate(0.0);
    assert_eq!(r.code, 0, "delete: {}\n{}", r.stderr, r.stdout);
    let delete = api.take_calls();
    // Cloud DNS keeps the zone's change history; kops leaves the project's
    // IAM bindings (Google shows a deleted account's as `deleted:`).
    let kept = |p: &String| !p.contains("/changes/") && !p.ends_with("/iamPolicy");
    let after: Vec<String> = api.paths().into_iter().filter(kept).collect();
    let before: Vec<String> = before.into_iter().filter(kept).collect();
    let left: Vec<&String> = after.iter().filter(|p| !before.contains(p)).collect();
    let lost: Vec<&String> = before.iter().filter(|p| !after.contains(p)).collect();
    assert!(left.is_empty(), "delete left: {left:?}");
    assert!(
        lost.is_empty(),
        "delete removed what was not the cluster's: {lost:?}"
    );
    let reads = delete.iter().filter(|c| !c.is_write()).count();
    println!(
        "{case_name}: delete {} calls ({} writes, {reads} reads and waits, fault rate {fault_rate}), {} resources",
        delete.len(),
        delete.iter().filter(|c| c.is_write()).count(),
        created.len()
    );
}

/// kops' node configs name the API's addresses once they exist, even on
/// the first apply: every control-plane config lists all of them
/// (`ApiserverAdditionalIPs`, the names its certificate carries); without
/// DNS, workers reach kops-controller at the internal ones.
fn api_addresses_are_in_node_configs(api: &GceApi, cluster_dir: &std::path::Path) {
    let suffix = cluster_dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .replace('.', "-");
    let mut addresses: Vec<String> = api
        .paths()
        .iter()
        .filter(|p| p.contains("/addresses/api-") && p.ends_with(&suffix))
        .filter_map(|p| api.get(p)?["address"].as_str().map(str::to_string))
        .collect();
    addresses.sort();
    let configs = cluster_dir.join("igconfig/control-plane");
    for group in std::fs::read_dir(&configs).unwrap() {
        let path = group.unwrap().path().join("nodeupconfig.yaml");
        let config: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let listed: Vec<&str> = config["ApiserverAdditionalIPs"]
            .as_sequence()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .collect();
        assert_eq!(listed, addresses, "{}", path.display());
    }
    let completed: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(cluster_dir.join("cluster-completed.spec")).unwrap(),
    )
    .unwrap();
    let spec = &completed["spec"];
    let none_dns = [&spec["networking"]["topology"], &spec["topology"]]
        .iter()
        .any(|t| t["dns"]["type"].as_str() == Some("None"));
    let cluster = cluster_dir.file_name().unwrap().to_string_lossy();
    for path in api
        .paths()
        .iter()
        .filter(|p| p.contains("/instanceTemplates/nodes"))
    {
        let template = api.get(path).unwrap();
        let item = |key: &str| {
            template["properties"]["metadata"]["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["key"] == key)
                .and_then(|i| i["value"].as_str())
                .unwrap_or_default()
                .to_string()
        };
        if item("cluster-name") != cluster {
            continue;
        }
        let user_data = item("user-data");
        let internal: Vec<&String> = addresses.iter().filter(|a| a.starts_with("10.")).collect();
        for address in internal {
            assert_eq!(
                user_data.contains(&format!("https://{address}:3988/")),
                none_dns,
                "{path}: kops-controller at {address} (without DNS: {none_dns})"
            );
        }
    }
}

#[test]
fn minimal_gce_dns_none_applies_reapplies_with_no_change_and_deletes() {
    lifecycle("minimal_gce_dns-none", 0.0);
}

#[test]
fn minimal_gce_applies_reapplies_with_no_change_and_deletes() {
    lifecycle("minimal_gce", 0.0);
}

#[test]
fn ha_gce_applies_reapplies_with_no_change_and_deletes() {
    lifecycle("ha_gce", 0.0);
}

#[test]
fn minimal_gce_ilb_applies_reapplies_with_no_change_and_deletes() {
    lifecycle("minimal_gce_ilb", 0.0);
}

#[test]
fn minimal_gce_converges_with_a_fifth_of_calls_failing() {
    lifecycle("minimal_gce", 0.2);
}

/// Google's behaviours all on: a new service account refused in IAM
/// policies for 2 s, operations of 300 ms that `wait` answers before they
/// finish, a tenth of operations ending in an error, a tenth of calls
/// failing (503, 429, 403 `rateLimitExceeded`, dropped connections) and a
/// read quota of 40 calls per second in each read group.
#[test]
fn minimal_gce_converges_with_google_behaviours_on() {
    lifecycle_with(
        "minimal_gce",
        0.1,
        Google {
            iam_delay: Some(std::time::Duration::from_secs(2)),
            operation_delay: Some(std::time::Duration::from_millis(300)),
            operation_failures: 0.1,
            early_wait: true,
            read_quota: Some(40),
        },
    );
}
