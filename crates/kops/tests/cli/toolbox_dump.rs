//! `kops toolbox dump` through the binary on moto: one small public
//! cluster, applied, then dumped as JSON and YAML and checked against what
//! moto runs for it.

use std::collections::BTreeSet;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use aws_sdk_ec2::types::Filter;

use crate::common::{command, file_url, Run};

use crate::common::IMAGE;

fn kops_on(moto: &kops_testkit::Moto, state: &str, args: &[&str]) -> Run {
    let mut c = command(args);
    c.args(["--state", state]);
    for (k, v) in moto.env() {
        c.env(k, v);
    }
    c.output().unwrap().into()
}

/// What moto runs for the cluster: its instances (not terminated), the
/// load balancers' names, the subnets and the VPC.
struct Running {
    instances: BTreeSet<String>,
    load_balancers: BTreeSet<String>,
    subnets: BTreeSet<String>,
    vpcs: BTreeSet<String>,
}

async fn running(endpoint: &str, cluster: &str) -> Running {
    let config = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let tag = Filter::builder()
        .name("tag:KubernetesCluster")
        .values(cluster)
        .build();
    let live = Filter::builder()
        .name("instance-state-name")
        .values("pending")
        .values("running")
        .build();
    let r = ec2
        .describe_instances()
        .filters(tag.clone())
        .filters(live)
        .send()
        .await
        .unwrap();
    let instances = r
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect();
    let r = ec2
        .describe_subnets()
        .filters(tag.clone())
        .send()
        .await
        .unwrap();
    let subnets = r
        .subnets()
        .iter()
        .filter_map(|s| s.subnet_id().map(str::to_string))
        .collect();
    let r = ec2.describe_vpcs().filters(tag).send().await.unwrap();
    let vpcs = r
        .vpcs()
        .iter()
        .filter_map(|v| v.vpc_id().map(str::to_string))
        .collect();
    let elbv2 = aws_sdk_elasticloadbalancingv2::Client::new(&config);
    let r = elbv2.describe_load_balancers().send().await.unwrap();
    let mut load_balancers = BTreeSet::new();
    let lbs: Vec<(String, String)> = r
        .load_balancers()
        .iter()
        .filter_map(|l| {
            Some((
                l.load_balancer_arn()?.into(),
                l.load_balancer_name()?.into(),
            ))
        })
        .collect();
    // Other tests share this moto: only the load balancers tagged for the cluster.
    for chunk in lbs.chunks(20) {
        let arns: Vec<String> = chunk.iter().map(|(a, _)| a.clone()).collect();
        let tags = elbv2
            .describe_tags()
            .set_resource_arns(Some(arns))
            .send()
            .await
            .unwrap();
        for d in tags.tag_descriptions() {
            let ours = d
                .tags()
                .iter()
                .any(|t| t.key() == Some("KubernetesCluster") && t.value() == Some(cluster));
            if let Some((_, n)) = chunk
                .iter()
                .find(|(a, _)| Some(a.as_str()) == d.resource_arn())
            {
                if ours {
                    load_balancers.insert(n.clone());
                }
            }
        }
    }
    Running {
        instances,
        load_balancers,
        subnets,
        vpcs,
    }
}

fn strings(v: &serde_json::Value, key: &str) -> BTreeSet<String> {
    v.as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i[key].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn dump_lists_what_moto_runs_for_the_cluster() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let name = "dump.example.com";
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    let key = dir.path().join("id.pub");
    std::fs::write(&key, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b test@example\n").unwrap();
    let ok = |args: &[&str]| {
        let r = kops_on(moto, &state, args);
        assert_eq!(r.code, 0, "{args:?}:\n{}\n{}", r.stdout, r.stderr);
        r
    };
    ok(&[
        "create",
        "cluster",
        name,
        "--zones",
        "us-east-1a",
        "--node-count",
        "1",
        "--ssh-public-key",
        key.to_str().unwrap(),
        "--image",
        IMAGE,
    ]);
    ok(&["update", "cluster", name, "--yes"]);

    let r = ok(&["toolbox", "dump", name, "-o", "json"]);
    let dump: serde_json::Value =
        serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", r.stdout));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let live = rt.block_on(running(&moto.endpoint(), name));

    let vpc = dump["vpc"]["id"].as_str().unwrap_or_default().to_string();
    assert!(
        live.vpcs.contains(&vpc),
        "vpc {vpc:?} not in {:?}",
        live.vpcs
    );
    assert_eq!(strings(&dump["subnets"], "id"), live.subnets, "{dump:#}");
    for s in dump["subnets"].as_array().unwrap() {
        assert_eq!(s["zone"], "us-east-1a", "{s}");
    }
    assert_eq!(
        strings(&dump["loadBalancers"], "name"),
        live.load_balancers,
        "{dump:#}"
    );
    for lb in dump["loadBalancers"].as_array().into_iter().flatten() {
        assert!(lb["dnsName"].is_string(), "{lb}");
    }

    // One control-plane instance and one node, as the groups ask.
    assert_eq!(live.instances.len(), 2, "{:?}", live.instances);
    assert_eq!(
        strings(&dump["instances"], "name"),
        live.instances,
        "{dump:#}"
    );
    let instances = dump["instances"].as_array().unwrap();
    let names: Vec<&str> = instances
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let mut roles = BTreeSet::new();
    for i in instances {
        let addresses = if i["publicAddresses"].is_array() {
            &i["publicAddresses"]
        } else {
            &i["privateAddresses"]
        };
        assert!(
            addresses[0].as_str().is_some_and(|a| a.contains('.')),
            "{i}"
        );
        roles.extend(strings_of(&i["roles"]));
        // The image is Canonical's (owner 099720109477).
        assert_eq!(i["sshUser"], "ubuntu", "{i}");
    }
    assert_eq!(
        roles,
        BTreeSet::from(["control-plane".to_string(), "node".to_string()])
    );

    // Every resource has an id and a type; the VPC and instances are among them.
    let resources = dump["resources"].as_array().unwrap();
    for res in resources {
        assert!(res["id"].is_string() && res["type"].is_string(), "{res}");
        assert!(res["raw"].is_object(), "{res}");
    }
    let typed = |t: &str| -> BTreeSet<String> {
        resources
            .iter()
            .filter(|r| r["type"] == t)
            .filter_map(|r| r["id"].as_str().map(str::to_string))
            .collect()
    };
    assert!(typed("vpc").contains(&vpc));
    assert_eq!(typed("instance"), live.instances);

    // YAML (the default) parses to the same document.
    let r = ok(&["toolbox", "dump", name]);
    let yaml: serde_json::Value = serde_yaml_ng::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("not YAML ({e}):\n{}", r.stdout));
    assert_eq!(yaml["vpc"], dump["vpc"]);
    assert_eq!(yaml["instances"], dump["instances"]);

    // Log collection is refused, not silently skipped.
    let r = kops_on(moto, &state, &["toolbox", "dump", name, "--dir", "/tmp/x"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("not supported"), "{}", r.stderr);

    ok(&["delete", "cluster", name, "--yes"]);
}

fn strings_of(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
