//! The Classic API load balancer of a cluster kops 1.36 or earlier made
//! (`class: Classic`), rendered for Terraform and CloudFormation, on kops'
//! `privateflannel` case with its class set back to Classic (kops 1.36's
//! golden of that case had this ELB). Skipped, with a reason, when
//! ../shared is absent.

use kops_api::manifest::Object;
use kops_api::{Cluster, InstanceGroup};
use kops_aws::render::Input;
use kops_model::Model;

fn load(yaml: &str) -> (Cluster, Vec<InstanceGroup>) {
    let mut cluster = None;
    let mut groups = Vec::new();
    for object in kops_api::parse_objects("in-v1alpha2.yaml", yaml).unwrap() {
        match object {
            Object::Cluster(c) => cluster = Some(*c),
            Object::InstanceGroup(g) => groups.push(*g),
            _ => {}
        }
    }
    (cluster.unwrap(), groups)
}

/// `privateflannel` with a Classic API load balancer, or `None` without
/// kops' cases.
fn classic_case() -> Option<String> {
    let Some(shared) = kops_testkit::shared_dir() else {
        eprintln!("skipped: ../shared (kops' conformance cases) is absent");
        return None;
    };
    let yaml = std::fs::read_to_string(
        shared.join("conformance/kops/update_cluster/privateflannel/in-v1alpha2.yaml"),
    )
    .ok()?;
    assert!(
        yaml.contains("      class: Network\n"),
        "privateflannel changed shape"
    );
    Some(yaml.replacen("      class: Network\n", "      class: Classic\n", 1))
}

fn render(yaml: &str) -> (String, serde_json::Value) {
    let (cluster, groups) = load(yaml);
    let config_base = cluster.spec.config_base.clone().unwrap_or_default();
    let model = Model {
        cluster: &cluster,
        groups: &groups,
        ssh_public_key: None,
        node_inputs: None,
        account_id: None,
        config_base: &config_base,
    };
    let graph = kops_aws::model::build(&model).unwrap();
    let input = Input {
        graph: &graph,
        cluster: cluster.name(),
        region: "us-test-1",
        config_base: &config_base,
        files: &[],
        private_zone: false,
    };
    let tf = kops_aws::render::terraform(&input).unwrap();
    assert!(tf.unrendered.is_empty(), "{:?}", tf.unrendered);
    let tf = String::from_utf8(tf.rendered.files["kubernetes.tf"].clone()).unwrap();
    let cf = kops_aws::render::cloudformation(&input).unwrap();
    assert!(cf.unrendered.is_empty(), "{:?}", cf.unrendered);
    let cf = serde_json::from_slice(&cf.rendered.files["kubernetes.json"]).unwrap();
    (tf, cf)
}

fn tf_resource<'t>(tf: &'t str, kind: &str, name: &str) -> &'t str {
    let start = tf
        .find(&format!("resource \"{kind}\" \"{name}\" {{\n"))
        .unwrap_or_else(|| panic!("no {kind}.{name} in\n{tf}"));
    let len = tf[start..].find("\n}\n").expect("a closed block") + 3;
    &tf[start..start + len]
}

/// The `aws_elb` as kops 1.36 wrote it for this case.
const ELB: &str = r#"resource "aws_elb" "api-privateflannel-example-com" {
  connection_draining         = true
  connection_draining_timeout = 300
  cross_zone_load_balancing   = false
  health_check {
    healthy_threshold   = 2
    interval            = 10
    target              = "SSL:443"
    timeout             = 5
    unhealthy_threshold = 2
  }
  idle_timeout = 300
  listener {
    instance_port     = 443
    instance_protocol = "TCP"
    lb_port           = 443
    lb_protocol       = "TCP"
  }
  name            = "api-privateflannel-exampl-hsu11v"
  security_groups = [aws_security_group.api-elb-privateflannel-example-com.id]
  subnets         = [aws_subnet.utility-us-test-1a-privateflannel-example-com.id]
  tags = {
    "KubernetesCluster"                                = "privateflannel.example.com"
    "Name"                                             = "api.privateflannel.example.com"
    "kubernetes.io/cluster/privateflannel.example.com" = "owned"
  }
}
"#;

#[test]
fn terraform_has_kops_1_36_aws_elb_and_its_attachments() {
    let Some(yaml) = classic_case() else {
        return;
    };
    let (tf, _) = render(&yaml);
    assert_eq!(
        tf_resource(&tf, "aws_elb", "api-privateflannel-example-com"),
        ELB
    );
    // No Network Load Balancer, target group or listener for the API.
    assert!(!tf.contains("resource \"aws_lb\" \"api-"), "{tf}");
    assert!(
        !tf.contains("resource \"aws_lb_target_group\" \"tcp-"),
        "{tf}"
    );
    let master = tf_resource(
        &tf,
        "aws_autoscaling_group",
        "master-us-test-1a-masters-privateflannel-example-com",
    );
    assert!(
        master.contains("  load_balancers        = [aws_elb.api-privateflannel-example-com.id]\n"),
        "{master}"
    );
    assert!(!master.contains("target_group_arns"), "{master}");
    let nodes = tf_resource(
        &tf,
        "aws_autoscaling_group",
        "nodes-privateflannel-example-com",
    );
    assert!(!nodes.contains("load_balancers"), "{nodes}");
    let record = tf_resource(&tf, "aws_route53_record", "api-privateflannel-example-com");
    assert!(
        record.contains("name                   = aws_elb.api-privateflannel-example-com.dns_name"),
        "{record}"
    );
    assert!(
        record.contains("zone_id                = aws_elb.api-privateflannel-example-com.zone_id"),
        "{record}"
    );
}

#[test]
fn cloudformation_has_the_classic_load_balancer_and_its_attachments() {
    let Some(yaml) = classic_case() else {
        return;
    };
    let (_, cf) = render(&yaml);
    let resources = cf["Resources"].as_object().unwrap();
    let (id, elb) = resources
        .iter()
        .find(|(_, r)| r["Type"] == "AWS::ElasticLoadBalancing::LoadBalancer")
        .expect("a Classic load balancer");
    let p = &elb["Properties"];
    assert_eq!(p["LoadBalancerName"], "api-privateflannel-exampl-hsu11v");
    assert_eq!(
        p["Listeners"],
        serde_json::json!([{"InstancePort": "443", "InstanceProtocol": "TCP", "LoadBalancerPort": "443", "Protocol": "TCP"}])
    );
    assert_eq!(
        p["HealthCheck"],
        serde_json::json!({"Target": "SSL:443", "HealthyThreshold": "2", "UnhealthyThreshold": "2", "Interval": "10", "Timeout": "5"})
    );
    assert_eq!(
        p["ConnectionDrainingPolicy"],
        serde_json::json!({"Enabled": true, "Timeout": 300})
    );
    assert_eq!(
        p["ConnectionSettings"],
        serde_json::json!({"IdleTimeout": 300})
    );
    assert_eq!(p["CrossZone"], false);
    // Public: the scheme is left to AWS' default.
    assert!(p.get("Scheme").is_none(), "{p}");
    assert!(p.get("AccessLoggingPolicy").is_none(), "{p}");
    let by_ref = serde_json::json!([{"Ref": id}]);
    let attached: Vec<&String> = resources
        .iter()
        .filter(|(_, r)| r["Properties"]["LoadBalancerNames"] == by_ref)
        .map(|(k, _)| k)
        .collect();
    assert_eq!(attached.len(), 1, "only the control plane: {attached:?}");
    let alias = resources
        .values()
        .find(|r| r["Type"] == "AWS::Route53::RecordSet")
        .map(|r| &r["Properties"]["AliasTarget"])
        .expect("the API record");
    assert_eq!(
        alias["HostedZoneId"],
        serde_json::json!({"Fn::GetAtt": [id, "CanonicalHostedZoneNameID"]})
    );
    assert!(!resources
        .values()
        .any(|r| r["Type"] == "AWS::ElasticLoadBalancingV2::LoadBalancer"
            && r["Properties"]["Name"]
                .as_str()
                .is_some_and(|n| n.starts_with("api-"))));
}
