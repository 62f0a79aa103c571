//! Instance-group options that change what the launch template renders,
//! checked on kops' `minimal-aws` case with the option added to its
//! `nodes` group (skipped, with a reason, when ../shared is absent):
//!
//! - `spec.iam.profile`, an existing instance profile: the template names it
//!   literally and no role or profile is declared for the group;
//! - `spec.maxPrice` without a mixed-instances policy: the template asks for
//!   spot instances at that price.

use kops_api::manifest::Object;
use kops_api::{Cluster, InstanceGroup};
use kops_aws::render::Input;
use kops_model::Model;

const PROFILE_ARN: &str = "arn:aws:iam::123456789012:instance-profile/KopsExampleRole";

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

/// `minimal-aws` with `extra` added to the spec of its `nodes` group, or
/// `None` when kops' cases are not there.
fn minimal_aws_with(extra: &str) -> Option<String> {
    let Some(shared) = kops_testkit::shared_dir() else {
        eprintln!("skipped: ../shared (kops' conformance cases) is absent");
        return None;
    };
    let yaml = std::fs::read_to_string(
        shared.join("conformance/kops/update_cluster/minimal-aws/in-v1alpha2.yaml"),
    )
    .ok()?;
    let marker =
        "  name: nodes\n  labels:\n    kops.k8s.io/cluster: minimal-aws.example.com\nspec:\n";
    assert!(yaml.contains(marker), "minimal-aws changed shape");
    Some(yaml.replace(marker, &format!("{marker}{extra}")))
}

/// kubernetes.tf and the CloudFormation template of the case.
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

/// The text of `resource "<kind>" "<name>" { ... }` in kubernetes.tf.
fn tf_resource<'t>(tf: &'t str, kind: &str, name: &str) -> &'t str {
    let start = tf
        .find(&format!("resource \"{kind}\" \"{name}\" {{\n"))
        .unwrap_or_else(|| panic!("no {kind}.{name} in\n{tf}"));
    let len = tf[start..].find("\n}\n").expect("a closed block") + 3;
    &tf[start..start + len]
}

/// The `LaunchTemplateData` of the template named `name`.
fn cf_template_data<'c>(cf: &'c serde_json::Value, name: &str) -> &'c serde_json::Value {
    cf["Resources"]
        .as_object()
        .unwrap()
        .values()
        .find(|r| {
            r["Type"] == "AWS::EC2::LaunchTemplate" && r["Properties"]["LaunchTemplateName"] == name
        })
        .map(|r| &r["Properties"]["LaunchTemplateData"])
        .unwrap_or_else(|| panic!("no launch template {name}"))
}

/// Every `{"Ref": x}` in the template names a resource or a parameter.
fn assert_refs_resolve(cf: &serde_json::Value) {
    fn walk(v: &serde_json::Value, found: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(serde_json::Value::String(r)) = m.get("Ref") {
                    found.push(r.clone());
                }
                m.values().for_each(|v| walk(v, found));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, found)),
            _ => {}
        }
    }
    let mut refs = Vec::new();
    walk(&cf["Resources"], &mut refs);
    for r in refs {
        let declared = cf["Resources"].get(&r).is_some()
            || cf["Parameters"].get(&r).is_some()
            || r.starts_with("AWS::");
        assert!(declared, "`Ref` to undeclared `{r}`");
    }
}

#[test]
fn a_given_instance_profile_is_named_not_made() {
    let Some(yaml) = minimal_aws_with(&format!("  iam:\n    profile: {PROFILE_ARN}\n")) else {
        return;
    };
    let (tf, cf) = render(&yaml);

    let template = tf_resource(&tf, "aws_launch_template", "nodes-minimal-aws-example-com");
    assert!(
        template.contains("  iam_instance_profile {\n    name = \"KopsExampleRole\"\n  }\n"),
        "{template}"
    );
    for absent in [
        "aws_iam_instance_profile\" \"KopsExampleRole",
        "aws_iam_role\" \"nodes-minimal-aws-example-com",
        "aws_iam_instance_profile\" \"nodes-minimal-aws-example-com",
        "nodes_role_arn",
    ] {
        assert!(!tf.contains(absent), "{absent} in\n{tf}");
    }
    // The control plane keeps its own role and profile.
    tf_resource(
        &tf,
        "aws_iam_instance_profile",
        "masters-minimal-aws-example-com",
    );

    let data = cf_template_data(&cf, "nodes.minimal-aws.example.com");
    assert_eq!(
        data["IamInstanceProfile"],
        serde_json::json!({"Name": "KopsExampleRole"})
    );
    let kinds: Vec<&str> = cf["Resources"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|r| r["Type"].as_str())
        .filter(|k| k.starts_with("AWS::IAM::InstanceProfile"))
        .collect();
    assert_eq!(kinds, ["AWS::IAM::InstanceProfile"], "the masters' only");
    assert_refs_resolve(&cf);
}

#[test]
fn max_price_without_a_policy_asks_for_spot_instances() {
    let Some(yaml) = minimal_aws_with("  maxPrice: \"0.05\"\n") else {
        return;
    };
    let (tf, cf) = render(&yaml);
    let template = tf_resource(&tf, "aws_launch_template", "nodes-minimal-aws-example-com");
    assert!(
        template.contains(
            "  instance_market_options {\n    market_type = \"spot\"\n    spot_options {\n      max_price = \"0.05\"\n    }\n  }\n"
        ),
        "{template}"
    );
    // The control plane's group has no price.
    let masters = tf_resource(
        &tf,
        "aws_launch_template",
        "master-us-test-1a-masters-minimal-aws-example-com",
    );
    assert!(!masters.contains("instance_market_options"), "{masters}");

    let data = cf_template_data(&cf, "nodes.minimal-aws.example.com");
    assert_eq!(
        data["InstanceMarketOptions"],
        serde_json::json!({"MarketType": "spot", "SpotOptions": {"MaxPrice": "0.05"}})
    );
    let masters = cf_template_data(&cf, "master-us-test-1a.masters.minimal-aws.example.com");
    assert!(masters.get("InstanceMarketOptions").is_none());
}
