//! The network builder and its AWS tasks against moto_server: a public
//! cluster in three zones, a private one (utility subnets, a NAT gateway
//! per zone, an extra VPC CIDR block), and one in an existing VPC and
//! subnet. Each: a dry run writes nothing, an apply creates kops' names and
//! tags, a second run changes nothing and only reads, with one Describe per
//! resource type (asserted per operation).
//!
//! Moto quirks met here (moto 5.2):
//! - ModifySubnetAttribute ignores `PrivateDnsHostnameTypeOnLaunch` (it
//!   answers 200 and keeps `ip-name`), so a cluster with resource-based
//!   naming (kops' default with the external cloud controller manager)
//!   would show that change on every run. The specs below have no
//!   `cloudControllerManager`, so the naming is left alone; the subnet's
//!   diff for it is covered by the builder's unit tests and one first-apply
//!   check below.
//! - NAT gateways are `available` as soon as they are created, so the
//!   `pending` wait (a retryable error until available) is not exercised.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use kops_api::manifest::{parse_objects, Object};
use kops_api::{Cluster, InstanceGroup};
use kops_aws::{AwsCloud, AwsContext};
use kops_engine::{
    EngineError, Executor, ExecutorOptions, Mode, Outcome, Report, RetryPolicy, TaskGraph,
};
use kops_model::Model;

const REGION: &str = "us-east-1";

async fn sdk_config() -> Option<SdkConfig> {
    let moto = kops_testkit::require_moto()?;
    Some(
        aws_config::defaults(BehaviorVersion::latest())
            .endpoint_url(moto.endpoint())
            .region(Region::new(REGION))
            .test_credentials()
            .load()
            .await,
    )
}

fn parse(yaml: &str) -> (Cluster, Vec<InstanceGroup>) {
    let mut cluster = None;
    let mut groups = Vec::new();
    for object in parse_objects("test.yaml", yaml).unwrap() {
        match object {
            Object::Cluster(c) => cluster = Some(*c),
            Object::InstanceGroup(g) => groups.push(*g),
            _ => {}
        }
    }
    (cluster.expect("a Cluster"), groups)
}

fn graph_of(cluster: &Cluster, groups: &[InstanceGroup]) -> TaskGraph<AwsContext> {
    let model = Model {
        cluster,
        groups,
        ssh_public_key: None,
        node_inputs: None,
        account_id: None,
        config_base: "memfs://clusters.example.com",
    };
    let mut graph = TaskGraph::new();
    kops_aws::model::network::build(&model, &mut graph).unwrap();
    graph.validate().unwrap();
    graph
}

fn executor() -> Executor {
    Executor::new(ExecutorOptions {
        retry: RetryPolicy {
            base: std::time::Duration::from_millis(20),
            max: std::time::Duration::from_millis(500),
            seed: Some(1),
        },
        task_deadline: std::time::Duration::from_secs(30),
        ..ExecutorOptions::default()
    })
}

/// The calls of one run, by operation (`EC2:DescribeSubnets` → 1).
type Calls = BTreeMap<String, u64>;

fn calls_since(cloud: &AwsCloud, before: &Calls) -> Calls {
    cloud
        .calls()
        .snapshot()
        .into_iter()
        .filter_map(|(op, n)| {
            let n = n - before.get(&op).copied().unwrap_or(0);
            (n > 0).then(|| (op.rsplit(':').next().unwrap_or(&op).to_string(), n))
        })
        .collect()
}

fn writes(calls: &Calls) -> u64 {
    calls
        .iter()
        .filter(|(op, _)| !op.starts_with("Describe"))
        .map(|(_, n)| n)
        .sum()
}

/// Runs the graph in a fresh context (fresh discovery caches); the report
/// and the calls of this run.
async fn try_run(
    cloud: &AwsCloud,
    cluster: &str,
    graph: &TaskGraph<AwsContext>,
    mode: Mode,
) -> (Result<Report, EngineError>, Calls) {
    let before = cloud.calls().snapshot();
    let context = Arc::new(AwsContext::new(cloud.clone(), cluster, Default::default()));
    let result = executor().run(graph, context, mode).await;
    (result, calls_since(cloud, &before))
}

async fn run(
    cloud: &AwsCloud,
    cluster: &str,
    graph: &TaskGraph<AwsContext>,
    mode: Mode,
) -> (Report, Calls) {
    let (result, calls) = try_run(cloud, cluster, graph, mode).await;
    (
        result.unwrap_or_else(|e| panic!("{mode:?} run failed: {e}")),
        calls,
    )
}

fn keys_with(report: &Report, wanted: fn(&Outcome) -> bool) -> BTreeSet<String> {
    report
        .tasks
        .iter()
        .filter(|t| wanted(&t.outcome))
        .map(|t| t.key.to_string())
        .collect()
}

fn expected_tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The first apply, the no-op re-run, and the calls of each, checked the
/// same way for every cluster.
async fn create_and_rerun(
    cloud: &AwsCloud,
    cluster: &str,
    graph: &TaskGraph<AwsContext>,
    expected_rerun: &[(&str, u64)],
) -> Report {
    let (dry, calls) = run(cloud, cluster, graph, Mode::DryRun).await;
    assert!(dry.has_changes());
    assert_eq!(writes(&calls), 0, "a dry run must not write: {calls:?}");
    eprintln!(
        "{cluster}: dry run {} calls {calls:?}",
        calls.values().sum::<u64>()
    );

    let (applied, calls) = run(cloud, cluster, graph, Mode::Apply).await;
    assert!(applied.has_changes());
    eprintln!(
        "{cluster}: first apply {} calls ({} writes) {calls:?}",
        calls.values().sum::<u64>(),
        writes(&calls)
    );

    let (again, calls) = run(cloud, cluster, graph, Mode::Apply).await;
    let changed: Vec<String> = again
        .tasks
        .iter()
        .map(|t| format!("{}: {:?}", t.key, t.outcome))
        .collect();
    assert!(!again.has_changes(), "second run changed: {changed:#?}");
    assert_eq!(writes(&calls), 0, "second run wrote: {calls:?}");
    eprintln!(
        "{cluster}: no-op re-run {} calls {calls:?}",
        calls.values().sum::<u64>()
    );
    let expected: Calls = expected_rerun
        .iter()
        .map(|(op, n)| (op.to_string(), *n))
        .collect();
    assert_eq!(calls, expected, "calls of the no-op re-run");
    applied
}

const PUBLIC: &str = r#"
apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata:
  name: public.example.com
spec:
  cloudProvider: aws
  networkCIDR: 172.20.0.0/16
  nonMasqueradeCIDR: 100.64.0.0/10
  subnets:
  - cidr: 172.20.32.0/19
    name: us-east-1a
    type: Public
    zone: us-east-1a
  - cidr: 172.20.64.0/19
    name: us-east-1b
    type: Public
    zone: us-east-1b
  - cidr: 172.20.96.0/19
    name: us-east-1c
    type: Public
    zone: us-east-1c
"#;

#[tokio::test]
async fn public_cluster_in_three_zones() {
    let Some(config) = sdk_config().await else {
        return;
    };
    let cloud = AwsCloud::from_config(REGION, config.clone());
    let name = "public.example.com";
    let (cluster, groups) = parse(PUBLIC);
    let graph = graph_of(&cluster, &groups);

    let applied = create_and_rerun(
        &cloud,
        name,
        &graph,
        &[
            ("DescribeDhcpOptions", 1),
            ("DescribeInternetGateways", 1),
            ("DescribeRouteTables", 1),
            ("DescribeSubnets", 1),
            ("DescribeVpcAttribute", 2),
            ("DescribeVpcs", 1),
        ],
    )
    .await;
    let created = keys_with(&applied, |o| matches!(o, Outcome::Created { .. }));
    assert_eq!(created.len(), 14, "{:#?}", applied.tasks);

    // What moto holds, read with a client that is not counted above.
    let ec2 = AwsCloud::from_config(REGION, config).ec2().clone();
    let vpc = ec2.describe_vpcs().send().await.unwrap();
    let vpc = vpc
        .vpcs()
        .iter()
        .find(|v| kops_aws::context::name_tag(v.tags()) == Some(name))
        .expect("the cluster's VPC");
    let vpc_id = vpc.vpc_id().unwrap();
    assert_eq!(
        kops_aws::context::tag_map(vpc.tags()),
        expected_tags(&[
            ("KubernetesCluster", name),
            ("Name", name),
            ("kubernetes.io/cluster/public.example.com", "owned"),
        ])
    );
    assert_eq!(
        vpc.ipv6_cidr_block_association_set().len(),
        1,
        "Amazon IPv6 block"
    );

    let options = ec2
        .describe_dhcp_options()
        .dhcp_options_ids(vpc.dhcp_options_id().unwrap())
        .send()
        .await
        .unwrap();
    let options = &options.dhcp_options()[0];
    assert_eq!(kops_aws::context::name_tag(options.tags()), Some(name));
    let configuration: BTreeMap<&str, Vec<&str>> = options
        .dhcp_configurations()
        .iter()
        .map(|c| {
            let values = c.values().iter().filter_map(|v| v.value()).collect();
            (c.key().unwrap(), values)
        })
        .collect();
    assert_eq!(configuration["domain-name"], ["ec2.internal"]);
    assert_eq!(configuration["domain-name-servers"], ["AmazonProvidedDNS"]);

    let subnets = ec2.describe_subnets().send().await.unwrap();
    let subnets: BTreeMap<&str, _> = subnets
        .subnets()
        .iter()
        .filter(|s| s.vpc_id() == Some(vpc_id))
        .map(|s| (kops_aws::context::name_tag(s.tags()).unwrap_or(""), s))
        .collect();
    assert_eq!(
        subnets.keys().copied().collect::<Vec<_>>(),
        [
            "us-east-1a.public.example.com",
            "us-east-1b.public.example.com",
            "us-east-1c.public.example.com"
        ]
    );
    let a = subnets["us-east-1a.public.example.com"];
    assert_eq!(a.cidr_block(), Some("172.20.32.0/19"));
    assert_eq!(a.availability_zone(), Some("us-east-1a"));
    assert_eq!(
        kops_aws::context::tag_map(a.tags()),
        expected_tags(&[
            ("KubernetesCluster", name),
            ("Name", "us-east-1a.public.example.com"),
            ("SubnetType", "Public"),
            ("kubernetes.io/cluster/public.example.com", "owned"),
            ("kubernetes.io/role/elb", "1"),
            ("kubernetes.io/role/internal-elb", "1"),
        ])
    );

    let gateways = ec2.describe_internet_gateways().send().await.unwrap();
    let gateway = gateways
        .internet_gateways()
        .iter()
        .find(|g| kops_aws::context::name_tag(g.tags()) == Some(name))
        .expect("the cluster's internet gateway");
    assert_eq!(gateway.attachments()[0].vpc_id(), Some(vpc_id));
    let gateway_id = gateway.internet_gateway_id().unwrap();

    let tables = ec2.describe_route_tables().send().await.unwrap();
    let table = tables
        .route_tables()
        .iter()
        .find(|t| kops_aws::context::name_tag(t.tags()) == Some(name))
        .expect("the public route table");
    assert_eq!(
        kops_aws::context::tag_map(table.tags())["kubernetes.io/kops/role"],
        "public"
    );
    let routes: BTreeMap<&str, &str> = table
        .routes()
        .iter()
        .filter_map(|r| {
            let destination = r
                .destination_cidr_block()
                .or(r.destination_ipv6_cidr_block())?;
            Some((destination, r.gateway_id()?))
        })
        .collect();
    assert_eq!(routes["0.0.0.0/0"], gateway_id);
    assert_eq!(routes["::/0"], gateway_id);
    let associated: BTreeSet<&str> = table
        .associations()
        .iter()
        .filter_map(|a| a.subnet_id())
        .collect();
    let subnet_ids: BTreeSet<&str> = subnets.values().filter_map(|s| s.subnet_id()).collect();
    assert_eq!(associated, subnet_ids);
}

const PRIVATE: &str = r#"
apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata:
  name: private.example.com
spec:
  cloudProvider: aws
  networkCIDR: 10.10.0.0/16
  additionalNetworkCIDRs:
  - 10.11.0.0/16
  nonMasqueradeCIDR: 100.64.0.0/10
  subnets:
  - cidr: 10.10.32.0/19
    name: us-east-1a
    type: Private
    zone: us-east-1a
  - cidr: 10.10.64.0/19
    name: us-east-1b
    type: Private
    zone: us-east-1b
  - cidr: 10.11.0.0/22
    name: utility-us-east-1a
    type: Utility
    zone: us-east-1a
  - cidr: 10.11.4.0/22
    name: utility-us-east-1b
    type: Utility
    zone: us-east-1b
"#;

/// The same cluster with a third zone.
const PRIVATE_THIRD_ZONE: &str = r#"
  - cidr: 10.10.96.0/19
    name: us-east-1c
    type: Private
    zone: us-east-1c
  - cidr: 10.11.8.0/22
    name: utility-us-east-1c
    type: Utility
    zone: us-east-1c
"#;

#[tokio::test]
async fn private_cluster_with_nat_gateways_per_zone() {
    let Some(config) = sdk_config().await else {
        return;
    };
    let cloud = AwsCloud::from_config(REGION, config.clone());
    let name = "private.example.com";
    let (cluster, groups) = parse(PRIVATE);
    let graph = graph_of(&cluster, &groups);
    create_and_rerun(
        &cloud,
        name,
        &graph,
        &[
            ("DescribeAddresses", 1),
            ("DescribeDhcpOptions", 1),
            ("DescribeInternetGateways", 1),
            ("DescribeNatGateways", 1),
            ("DescribeRouteTables", 1),
            ("DescribeSubnets", 1),
            ("DescribeVpcAttribute", 2),
            ("DescribeVpcs", 1),
        ],
    )
    .await;

    let ec2 = AwsCloud::from_config(REGION, config.clone()).ec2().clone();
    let vpcs = ec2.describe_vpcs().send().await.unwrap();
    let vpc = vpcs
        .vpcs()
        .iter()
        .find(|v| kops_aws::context::name_tag(v.tags()) == Some(name))
        .expect("the cluster's VPC");
    let vpc_id = vpc.vpc_id().unwrap();
    let blocks: BTreeSet<&str> = vpc
        .cidr_block_association_set()
        .iter()
        .filter_map(|a| a.cidr_block())
        .collect();
    assert_eq!(blocks, BTreeSet::from(["10.10.0.0/16", "10.11.0.0/16"]));

    let subnets = ec2.describe_subnets().send().await.unwrap();
    let subnets: BTreeMap<&str, _> = subnets
        .subnets()
        .iter()
        .filter(|s| s.vpc_id() == Some(vpc_id))
        .map(|s| (kops_aws::context::name_tag(s.tags()).unwrap_or(""), s))
        .collect();
    let private_a = subnets["us-east-1a.private.example.com"];
    assert_eq!(
        kops_aws::context::tag_map(private_a.tags()),
        expected_tags(&[
            ("KubernetesCluster", name),
            ("Name", "us-east-1a.private.example.com"),
            ("SubnetType", "Private"),
            ("kubernetes.io/cluster/private.example.com", "owned"),
            ("kubernetes.io/role/internal-elb", "1"),
        ])
    );
    let utility_a = subnets["utility-us-east-1a.private.example.com"];
    assert_eq!(utility_a.cidr_block(), Some("10.11.0.0/22"));
    assert_eq!(
        kops_aws::context::tag_map(utility_a.tags()),
        expected_tags(&[
            ("KubernetesCluster", name),
            ("Name", "utility-us-east-1a.private.example.com"),
            ("SubnetType", "Utility"),
            ("kubernetes.io/cluster/private.example.com", "owned"),
            ("kubernetes.io/role/elb", "1"),
        ])
    );

    // A NAT gateway and an elastic IP per zone, in the utility subnet.
    let gateways = ec2.describe_nat_gateways().send().await.unwrap();
    let gateways: BTreeMap<&str, _> = gateways
        .nat_gateways()
        .iter()
        .filter(|g| g.vpc_id() == Some(vpc_id))
        .map(|g| (kops_aws::context::name_tag(g.tags()).unwrap_or(""), g))
        .collect();
    assert_eq!(
        gateways.keys().copied().collect::<Vec<_>>(),
        [
            "us-east-1a.private.example.com",
            "us-east-1b.private.example.com"
        ]
    );
    let nat_a = gateways["us-east-1a.private.example.com"];
    assert_eq!(nat_a.subnet_id(), utility_a.subnet_id());
    assert_eq!(
        kops_aws::context::tag_map(nat_a.tags()),
        expected_tags(&[
            ("KubernetesCluster", name),
            ("Name", "us-east-1a.private.example.com"),
            ("kubernetes.io/cluster/private.example.com", "owned"),
        ])
    );
    let addresses = ec2.describe_addresses().send().await.unwrap();
    let address = addresses
        .addresses()
        .iter()
        .find(|a| kops_aws::context::name_tag(a.tags()) == Some("us-east-1a.private.example.com"))
        .expect("the zone's elastic IP");
    assert_eq!(
        nat_a.nat_gateway_addresses()[0].allocation_id(),
        address.allocation_id()
    );

    // Private route tables route to their zone's NAT gateway; utility
    // subnets use the public table.
    let tables = ec2.describe_route_tables().send().await.unwrap();
    let tables: BTreeMap<&str, _> = tables
        .route_tables()
        .iter()
        .filter(|t| t.vpc_id() == Some(vpc_id))
        .filter_map(|t| Some((kops_aws::context::name_tag(t.tags())?, t)))
        .collect();
    assert_eq!(
        tables.keys().copied().collect::<Vec<_>>(),
        [
            "private-us-east-1a.private.example.com",
            "private-us-east-1b.private.example.com",
            "private.example.com"
        ]
    );
    let private_table = tables["private-us-east-1a.private.example.com"];
    assert_eq!(
        kops_aws::context::tag_map(private_table.tags())["kubernetes.io/kops/role"],
        "private-us-east-1a"
    );
    let default_route = private_table
        .routes()
        .iter()
        .find(|r| r.destination_cidr_block() == Some("0.0.0.0/0"))
        .expect("the private default route");
    assert_eq!(default_route.nat_gateway_id(), nat_a.nat_gateway_id());
    let associated = |table: &str| -> BTreeSet<&str> {
        tables[table]
            .associations()
            .iter()
            .filter_map(|a| a.subnet_id())
            .collect()
    };
    assert_eq!(
        associated("private-us-east-1a.private.example.com"),
        BTreeSet::from([private_a.subnet_id().unwrap()])
    );
    assert_eq!(
        associated("private.example.com"),
        BTreeSet::from([
            utility_a.subnet_id().unwrap(),
            subnets["utility-us-east-1b.private.example.com"]
                .subnet_id()
                .unwrap()
        ])
    );

    // A subnet's CIDR cannot change: refused, in the dry run already.
    let changed = PRIVATE.replace("10.10.32.0/19", "10.10.0.0/19");
    let (cluster, groups) = parse(&changed);
    let (result, calls) = try_run(&cloud, name, &graph_of(&cluster, &groups), Mode::DryRun).await;
    assert_eq!(writes(&calls), 0);
    let error = result
        .expect_err("a CIDR change must be refused")
        .to_string();
    assert!(
        error.contains("Subnet/us-east-1a.private.example.com")
            && error
                .contains("field `cidr` cannot be changed from `10.10.32.0/19` to `10.10.0.0/19`"),
        "{error}"
    );

    // A third zone adds only its subnets, NAT gateway, route table and routes.
    let (cluster, groups) = parse(&format!("{PRIVATE}{PRIVATE_THIRD_ZONE}"));
    let bigger = graph_of(&cluster, &groups);
    let (plan, _) = run(&cloud, name, &bigger, Mode::DryRun).await;
    assert_eq!(
        keys_with(&plan, |o| matches!(o, Outcome::WouldCreate { .. })),
        BTreeSet::from(
            [
                "ElasticIP/us-east-1c.private.example.com",
                "NatGateway/us-east-1c.private.example.com",
                "Route/private-us-east-1c-0.0.0.0/0",
                "RouteTable/private-us-east-1c.private.example.com",
                "RouteTableAssociation/private-us-east-1c.private.example.com",
                "RouteTableAssociation/utility-us-east-1c.private.example.com",
                "Subnet/us-east-1c.private.example.com",
                "Subnet/utility-us-east-1c.private.example.com",
            ]
            .map(String::from)
        )
    );
    assert!(keys_with(&plan, |o| matches!(o, Outcome::WouldModify { .. })).is_empty());
    let (applied, calls) = run(&cloud, name, &bigger, Mode::Apply).await;
    eprintln!(
        "{name}: adding a zone {} calls ({} writes) {calls:?}",
        calls.values().sum::<u64>(),
        writes(&calls)
    );
    assert_eq!(keys_with(&applied, |o| o.is_change()).len(), 8);
    let (again, calls) = run(&cloud, name, &bigger, Mode::Apply).await;
    assert!(!again.has_changes());
    assert_eq!(writes(&calls), 0);
}

/// An existing VPC with its internet gateway and a subnet, made in moto as
/// their owner would; returns (VPC, gateway, subnet) ids.
async fn owners_network(cloud: &AwsCloud) -> (String, String, String) {
    let ec2 = cloud.ec2();
    let tag = |id: String, name: &'static str| async move {
        let tags = expected_tags(&[("Name", name), ("Owner", "network-team")]);
        ec2.create_tags()
            .resources(&id)
            .set_tags(Some(kops_aws::context::ec2_tags(&tags)))
            .send()
            .await
            .unwrap();
        id
    };
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.50.0.0/16")
        .send()
        .await
        .unwrap();
    let vpc = tag(
        vpc.vpc().unwrap().vpc_id().unwrap().to_string(),
        "owner-vpc",
    )
    .await;
    let gateway = ec2.create_internet_gateway().send().await.unwrap();
    let gateway = gateway
        .internet_gateway()
        .unwrap()
        .internet_gateway_id()
        .unwrap()
        .to_string();
    let gateway = tag(gateway, "owner-igw").await;
    ec2.attach_internet_gateway()
        .internet_gateway_id(&gateway)
        .vpc_id(&vpc)
        .send()
        .await
        .unwrap();
    let subnet = ec2
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block("10.50.1.0/24")
        .availability_zone("us-east-1a")
        .send()
        .await
        .unwrap();
    let subnet = tag(
        subnet.subnet().unwrap().subnet_id().unwrap().to_string(),
        "owner-subnet",
    )
    .await;
    (vpc, gateway, subnet)
}

#[tokio::test]
async fn shared_vpc_and_subnet_are_used_not_changed() {
    let Some(config) = sdk_config().await else {
        return;
    };
    let owner = AwsCloud::from_config(REGION, config.clone());
    let (vpc_id, gateway_id, shared_subnet_id) = owners_network(&owner).await;
    let ec2 = owner.ec2();
    let vpc_before = ec2.describe_vpcs().vpc_ids(&vpc_id).send().await.unwrap();
    let vpc_before = vpc_before.vpcs()[0].clone();
    let subnet_before = ec2
        .describe_subnets()
        .subnet_ids(&shared_subnet_id)
        .send()
        .await
        .unwrap();
    let subnet_before = subnet_before.subnets()[0].clone();

    let name = "shared.example.com";
    let yaml = format!(
        r#"
apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata:
  name: {name}
spec:
  cloudProvider: aws
  networkID: {vpc_id}
  networkCIDR: 10.50.0.0/16
  nonMasqueradeCIDR: 100.64.0.0/10
  subnets:
  - cidr: 10.50.1.0/24
    id: {shared_subnet_id}
    name: us-east-1a
    type: Public
    zone: us-east-1a
  - cidr: 10.50.2.0/24
    name: us-east-1b
    type: Public
    zone: us-east-1b
"#
    );
    let (cluster, groups) = parse(&yaml);
    let graph = graph_of(&cluster, &groups);
    let cloud = AwsCloud::from_config(REGION, config);
    create_and_rerun(
        &cloud,
        name,
        &graph,
        &[
            ("DescribeInternetGateways", 1),
            ("DescribeRouteTables", 1),
            ("DescribeSubnets", 1),
            ("DescribeVpcs", 1),
        ],
    )
    .await;

    // The VPC: not tagged, no DHCP options, no extra blocks.
    let vpc_after = ec2.describe_vpcs().vpc_ids(&vpc_id).send().await.unwrap();
    let vpc_after = &vpc_after.vpcs()[0];
    assert_eq!(vpc_after.tags(), vpc_before.tags());
    assert_eq!(vpc_after.dhcp_options_id(), vpc_before.dhcp_options_id());
    assert_eq!(
        vpc_after.cidr_block_association_set().len(),
        vpc_before.cidr_block_association_set().len()
    );
    assert!(vpc_after.ipv6_cidr_block_association_set().is_empty());

    // Its internet gateway: the only one, untouched.
    let gateways = ec2.describe_internet_gateways().send().await.unwrap();
    let attached: Vec<_> = gateways
        .internet_gateways()
        .iter()
        .filter(|g| g.attachments().iter().any(|a| a.vpc_id() == Some(&vpc_id)))
        .collect();
    assert_eq!(attached.len(), 1);
    assert_eq!(attached[0].internet_gateway_id(), Some(gateway_id.as_str()));
    assert_eq!(
        kops_aws::context::tag_map(attached[0].tags()),
        expected_tags(&[("Name", "owner-igw"), ("Owner", "network-team")])
    );

    // The shared subnet: kops' `shared` and load-balancer tags added to the
    // owner's, nothing else changed, no route table association.
    let subnet_after = ec2
        .describe_subnets()
        .subnet_ids(&shared_subnet_id)
        .send()
        .await
        .unwrap();
    let subnet_after = &subnet_after.subnets()[0];
    assert_eq!(
        kops_aws::context::tag_map(subnet_after.tags()),
        expected_tags(&[
            ("Name", "owner-subnet"),
            ("Owner", "network-team"),
            ("SubnetType", "Public"),
            ("kubernetes.io/cluster/shared.example.com", "shared"),
            ("kubernetes.io/role/elb", "1"),
            ("kubernetes.io/role/internal-elb", "1"),
        ])
    );
    assert_eq!(subnet_after.cidr_block(), subnet_before.cidr_block());
    assert_eq!(
        subnet_after.private_dns_name_options_on_launch(),
        subnet_before.private_dns_name_options_on_launch()
    );

    // The cluster's own subnet and public route table live in the VPC and
    // route through the owner's gateway.
    let tables = ec2.describe_route_tables().send().await.unwrap();
    let table = tables
        .route_tables()
        .iter()
        .find(|t| kops_aws::context::name_tag(t.tags()) == Some(name))
        .expect("the cluster's public route table");
    assert_eq!(table.vpc_id(), Some(vpc_id.as_str()));
    let default_route = table
        .routes()
        .iter()
        .find(|r| r.destination_cidr_block() == Some("0.0.0.0/0"))
        .unwrap();
    assert_eq!(default_route.gateway_id(), Some(gateway_id.as_str()));
    let associated: Vec<&str> = tables
        .route_tables()
        .iter()
        .flat_map(|t| t.associations())
        .filter_map(|a| a.subnet_id())
        .collect();
    assert!(!associated.contains(&shared_subnet_id.as_str()));
    let subnets = ec2.describe_subnets().send().await.unwrap();
    let own = subnets
        .subnets()
        .iter()
        .find(|s| kops_aws::context::name_tag(s.tags()) == Some("us-east-1b.shared.example.com"))
        .expect("the cluster's own subnet");
    assert_eq!(own.vpc_id(), Some(vpc_id.as_str()));
    assert!(associated.contains(&own.subnet_id().unwrap()));
    let options = ec2.describe_dhcp_options().send().await.unwrap();
    assert!(options
        .dhcp_options()
        .iter()
        .all(|o| kops_aws::context::name_tag(o.tags()) != Some(name)));
}

/// One `resource "TYPE" "NAME" { ... }` block of a golden kubernetes.tf:
/// its string attributes and its `tags`.
#[derive(Debug, Default)]
struct TfResource {
    attributes: BTreeMap<String, String>,
    tags: BTreeMap<String, String>,
}

fn unquote(text: &str) -> String {
    text.trim().trim_matches('"').to_string()
}

/// The network resources of a golden kubernetes.tf, by (type, name).
fn golden_network(tf: &str) -> BTreeMap<(String, String), TfResource> {
    const TYPES: [&str; 11] = [
        "aws_vpc",
        "aws_vpc_ipv4_cidr_block_association",
        "aws_vpc_dhcp_options",
        "aws_vpc_dhcp_options_association",
        "aws_internet_gateway",
        "aws_subnet",
        "aws_route_table",
        "aws_route",
        "aws_route_table_association",
        "aws_eip",
        "aws_nat_gateway",
    ];
    let mut resources = BTreeMap::new();
    let mut current: Option<((String, String), TfResource)> = None;
    let mut in_tags = false;
    for line in tf.lines() {
        if let Some(rest) = line.strip_prefix("resource ") {
            let parts: Vec<String> = rest.split_whitespace().take(2).map(unquote).collect();
            current = TYPES
                .contains(&parts[0].as_str())
                .then(|| ((parts[0].clone(), parts[1].clone()), TfResource::default()));
            continue;
        }
        let Some((_, resource)) = current.as_mut() else {
            continue;
        };
        let trimmed = line.trim();
        if line == "}" {
            let (key, resource) = current.take().unwrap();
            resources.insert(key, resource);
        } else if trimmed == "tags = {" {
            in_tags = true;
        } else if in_tags && trimmed == "}" {
            in_tags = false;
        } else if let Some((key, value)) = trimmed.split_once(" = ") {
            if in_tags {
                resource.tags.insert(unquote(key), unquote(value));
            } else if value.trim().starts_with('"') {
                resource.attributes.insert(unquote(key), unquote(value));
            }
        }
    }
    resources
}

/// How kops names a task's Terraform resource: `.` → `-`, `/` → `--`,
/// `:` → `_`, and `prefix_` before a leading digit.
fn terraform_name(name: &str) -> String {
    name.replace('.', "-").replace('/', "--").replace(':', "_")
}

fn with_digit_prefix(name: String) -> String {
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("prefix_{name}")
    } else {
        name
    }
}

/// The Terraform resource kops renders for one of our tasks, with the tags
/// we would set; `None` for tasks kops renders no resource for (the
/// Amazon IPv6 block is an attribute of `aws_vpc`; shared objects are not
/// rendered).
fn as_terraform(
    task: &dyn kops_engine::DynTask<AwsContext>,
) -> Option<((String, String), Option<Tags>)> {
    use kops_aws::tasks::{
        dhcp_options::DhcpOptions, elastic_ip::ElasticIp, internet_gateway::InternetGateway,
        nat_gateway::NatGateway, route_table::RouteTable, subnet::Subnet, vpc::Vpc,
    };
    let any = task.as_any();
    let key = task.key();
    let name = terraform_name(&key.name);
    let (kind, name, tags) = match key.kind {
        "VPC" => {
            let vpc = any.downcast_ref::<Vpc>()?;
            (
                vpc.shared_id.is_none().then_some("aws_vpc")?,
                name,
                Some(vpc.tags.clone()),
            )
        }
        "VPCCIDRBlock" => (
            "aws_vpc_ipv4_cidr_block_association",
            format!("cidr-{name}"),
            None,
        ),
        "DHCPOptions" => {
            let tags = any.downcast_ref::<DhcpOptions>()?.tags.clone();
            ("aws_vpc_dhcp_options", name, Some(tags))
        }
        "VPCDHCPOptionsAssociation" => ("aws_vpc_dhcp_options_association", name, None),
        "InternetGateway" => {
            let gateway = any.downcast_ref::<InternetGateway>()?;
            (
                (!gateway.shared).then_some("aws_internet_gateway")?,
                name,
                Some(gateway.tags.clone()),
            )
        }
        "Subnet" => {
            let subnet = any.downcast_ref::<Subnet>()?;
            (
                subnet.shared_id.is_none().then_some("aws_subnet")?,
                name,
                Some(subnet.tags.clone()),
            )
        }
        "RouteTable" => {
            let tags = any.downcast_ref::<RouteTable>()?.tags.clone();
            ("aws_route_table", name, Some(tags))
        }
        "Route" => ("aws_route", format!("route-{name}"), None),
        "RouteTableAssociation" => ("aws_route_table_association", name, None),
        "ElasticIP" => {
            let address = any.downcast_ref::<ElasticIp>()?;
            (
                address.existing.is_none().then_some("aws_eip")?,
                name,
                Some(address.tags.clone()),
            )
        }
        "NatGateway" => {
            let gateway = any.downcast_ref::<NatGateway>()?;
            (
                gateway.shared_id.is_none().then_some("aws_nat_gateway")?,
                name,
                Some(gateway.tags.clone()),
            )
        }
        _ => return None,
    };
    Some(((kind.to_string(), with_digit_prefix(name)), tags))
}

type Tags = BTreeMap<String, String>;

/// kops' own update_cluster cases (../shared/conformance): the network
/// resources we build, their names and their tags are the ones in kops'
/// golden Terraform, for every IPv4 AWS case.
#[test]
fn layout_matches_kops_golden_terraform() {
    let Some(shared) = kops_testkit::shared_dir() else {
        return;
    };
    let cases = shared.join("conformance/kops/update_cluster");
    let mut compared = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&cases).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let dir = entry.path();
        let (Ok(yaml), Ok(tf)) = (
            std::fs::read_to_string(dir.join("in-v1alpha2.yaml")),
            std::fs::read_to_string(dir.join("kubernetes.tf")),
        ) else {
            continue;
        };
        let (cluster, groups) = parse(&yaml);
        if cluster.spec.cloud_provider.as_deref() != Some("aws") {
            continue;
        }
        let case = entry.file_name().to_string_lossy().to_string();
        let model = Model {
            cluster: &cluster,
            groups: &groups,
            ssh_public_key: None,
            node_inputs: None,
            account_id: None,
            config_base: "memfs://clusters.example.com",
        };
        let mut graph = TaskGraph::new();
        if let Err(e) = kops_aws::model::network::build(&model, &mut graph) {
            // IPv6 clusters are refused on purpose; anything else is a bug.
            assert!(e.to_string().contains("IPv6"), "{case}: {e}");
            eprintln!(
                "{case}: skipped: {}",
                e.to_string().lines().next().unwrap_or("")
            );
            continue;
        }
        let golden = golden_network(&tf);
        let ours: BTreeMap<(String, String), Option<Tags>> = graph
            .iter()
            .filter_map(|(_, task)| as_terraform(task.as_ref()))
            .collect();
        let golden_keys: BTreeSet<_> = golden.keys().cloned().collect();
        let our_keys: BTreeSet<_> = ours.keys().cloned().collect();
        assert_eq!(
            our_keys.difference(&golden_keys).collect::<Vec<_>>(),
            Vec::<&(String, String)>::new(),
            "{case}: resources kops does not make"
        );
        assert_eq!(
            golden_keys.difference(&our_keys).collect::<Vec<_>>(),
            Vec::<&(String, String)>::new(),
            "{case}: kops resources we do not make"
        );
        for (key, tags) in &ours {
            if let Some(tags) = tags {
                assert_eq!(tags, &golden[key].tags, "{case}: tags of {key:?}");
            }
        }
        for ((kind, _), resource) in &golden {
            if kind == "aws_vpc_dhcp_options" {
                assert_eq!(
                    resource.attributes["domain_name"], "us-test-1.compute.internal",
                    "{case}"
                );
            }
        }
        compared.push(case);
    }
    eprintln!("compared with kops: {compared:?}");
    assert!(compared.len() >= 30, "{compared:?}");
}
