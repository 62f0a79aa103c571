//! `delete cluster` and Classic ELBs, against moto: a cluster made by kops
//! 1.36 or earlier may still have its API (or bastion) behind a Classic
//! ELB, which kops deletes with the rest. The listing finds the cluster's
//! Classic ELB by its `KubernetesCluster` tag (and leaves another
//! cluster's alone), the deletion removes it, and nothing is left.

mod common;

use std::time::Duration;

use aws_sdk_elasticloadbalancing::types::{Listener, Tag};
use kops_aws::delete::{delete_resources, list_cluster_resources};

fn elb_client(cloud: &kops_aws::AwsCloud) -> aws_sdk_elasticloadbalancing::Client {
    aws_sdk_elasticloadbalancing::Client::new(cloud.sdk_config())
}

/// A Classic ELB `name` on TCP 443 in `subnet`, tagged for `cluster`.
async fn make_elb(cloud: &kops_aws::AwsCloud, cluster: &str, name: &str, subnet: &str) {
    let tag = |k: &str, v: &str| Tag::builder().key(k).value(v).build().unwrap();
    elb_client(cloud)
        .create_load_balancer()
        .load_balancer_name(name)
        .listeners(
            Listener::builder()
                .protocol("TCP")
                .load_balancer_port(443)
                .instance_protocol("TCP")
                .instance_port(443)
                .build()
                .unwrap(),
        )
        .subnets(subnet)
        .tags(tag("KubernetesCluster", cluster))
        .tags(tag(&format!("kubernetes.io/cluster/{cluster}"), "owned"))
        .tags(tag("Name", &format!("api.{cluster}")))
        .send()
        .await
        .unwrap_or_else(|e| panic!("create ELB {name}: {e:?}"));
}

async fn elb_names(cloud: &kops_aws::AwsCloud) -> Vec<String> {
    elb_client(cloud)
        .describe_load_balancers()
        .send()
        .await
        .expect("described")
        .load_balancer_descriptions()
        .iter()
        .filter_map(|l| l.load_balancer_name().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn delete_cluster_removes_classic_elbs() {
    let Some(cloud) = common::cloud().await else {
        return;
    };
    let cluster = "classic.example.com";
    let other = "other-classic.example.com";
    let vpc = cloud
        .ec2()
        .create_vpc()
        .cidr_block("10.77.0.0/16")
        .send()
        .await
        .expect("vpc");
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).expect("vpc id");
    let subnet = cloud
        .ec2()
        .create_subnet()
        .vpc_id(vpc_id)
        .cidr_block("10.77.1.0/24")
        .availability_zone("us-east-1a")
        .send()
        .await
        .expect("subnet");
    let subnet_id = subnet
        .subnet()
        .and_then(|s| s.subnet_id())
        .expect("subnet id");
    make_elb(&cloud, cluster, "api-classic-example-com", subnet_id).await;
    make_elb(&cloud, other, "api-other-classic-example-com", subnet_id).await;

    let resources = list_cluster_resources(&cloud, cluster)
        .await
        .expect("listed");
    let classic: Vec<_> = resources
        .iter()
        .filter(|r| r.kind == "classic-load-balancer")
        .collect();
    assert_eq!(classic.len(), 1, "{resources:?}");
    assert_eq!(classic[0].id, "api-classic-example-com");
    assert_eq!(classic[0].name, format!("api.{cluster}"));
    assert!(!classic[0].shared);

    delete_resources(&cloud, resources, 3, Duration::from_millis(50), &|_, _| {})
        .await
        .expect("deleted");
    let left = list_cluster_resources(&cloud, cluster)
        .await
        .expect("listed again");
    assert!(left.is_empty(), "left behind: {left:?}");
    let names = elb_names(&cloud).await;
    assert!(
        !names.contains(&"api-classic-example-com".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"api-other-classic-example-com".to_string()),
        "another cluster's ELB must stay: {names:?}"
    );
}
