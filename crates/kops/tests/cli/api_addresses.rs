//! The API load balancer's DNS name in the control plane's node config, on
//! moto (issue 17): kops writes it as `ApiserverAdditionalIPs` even on the
//! first apply (its node configs are built after the balancer exists), so
//! `update --yes` creates the balancer first, the control-plane launch
//! template is created once with the final config, and the next `update`
//! plans nothing.

use base64::Engine;
use sha2::{Digest, Sha256};

use crate::common::{self, file_url, kops_on, IMAGE};

struct Cloud {
    lb_dns_names: Vec<String>,
    /// The control-plane launch template's versions' user data, decoded.
    user_data: Vec<String>,
    /// Egress rules to 0.0.0.0/0 without a Name tag (kops tags AWS'
    /// default egress rule of every group it creates).
    untagged_egress: usize,
}

fn cloud(endpoint: &str, template: &str) -> Cloud {
    common::with_moto_sdk(endpoint, |config| async move {
        let lbs = aws_sdk_elasticloadbalancingv2::Client::new(&config)
            .describe_load_balancers()
            .send()
            .await
            .unwrap();
        let rules = aws_sdk_ec2::Client::new(&config)
            .describe_security_group_rules()
            .send()
            .await
            .unwrap();
        // The cluster's groups (not the VPCs' own `default` groups).
        let groups = aws_sdk_ec2::Client::new(&config)
            .describe_security_groups()
            .send()
            .await
            .unwrap();
        let ours: Vec<&str> = groups
            .security_groups()
            .iter()
            .filter(|g| g.group_name() != Some("default"))
            .filter_map(|g| g.group_id())
            .collect();
        let versions = aws_sdk_ec2::Client::new(&config)
            .describe_launch_template_versions()
            .launch_template_name(template)
            .send()
            .await
            .unwrap();
        Cloud {
            untagged_egress: rules
                .security_group_rules()
                .iter()
                .filter(|r| {
                    r.is_egress() == Some(true)
                        && r.group_id().is_some_and(|g| ours.contains(&g))
                        && r.cidr_ipv4() == Some("0.0.0.0/0")
                        && !r.tags().iter().any(|t| t.key() == Some("Name"))
                })
                .count(),
            lb_dns_names: lbs
                .load_balancers()
                .iter()
                .filter(|l| {
                    l.load_balancer_name()
                        .unwrap_or_default()
                        .starts_with("api-api-ips")
                })
                .filter_map(|l| l.dns_name().map(str::to_string))
                .collect(),
            user_data: versions
                .launch_template_versions()
                .iter()
                .map(|v| {
                    let data = v
                        .launch_template_data()
                        .and_then(|d| d.user_data())
                        .unwrap_or_default();
                    String::from_utf8(
                        base64::engine::general_purpose::STANDARD
                            .decode(data)
                            .unwrap(),
                    )
                    .unwrap()
                })
                .collect(),
        }
    })
}

#[test]
fn first_apply_names_the_api_load_balancer_and_the_next_plans_nothing() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let cluster = "api-ips.k8s.local";
    let tmp = tempfile::tempdir().unwrap();
    let state_dir = tmp.path().join("state");
    let state = file_url(&state_dir);
    let r = kops_on(
        moto,
        &[
            "create",
            "cluster",
            cluster,
            "--zones",
            "us-east-1a",
            "--networking",
            "cilium",
            "--topology",
            "private",
            "--bastion",
            "--state",
            &state,
            "--image",
            IMAGE,
        ],
    );
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    let r = kops_on(
        moto,
        &["update", "cluster", cluster, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply: {}", r.stderr);

    let stored = std::fs::read(state_dir.join(format!(
        "{cluster}/igconfig/control-plane/control-plane-us-east-1a/nodeupconfig.yaml"
    )))
    .unwrap();
    let text = String::from_utf8(stored.clone()).unwrap();
    let template = format!("control-plane-us-east-1a.masters.{cluster}");
    let cloud = cloud(&moto.endpoint(), &template);
    assert_eq!(cloud.lb_dns_names.len(), 1, "{:?}", cloud.lb_dns_names);
    // The API load balancer's group, created in the apply's first pass,
    // has its default egress rule tagged like every other group's.
    assert_eq!(cloud.untagged_egress, 0, "untagged egress rules");
    let dns = &cloud.lb_dns_names[0];
    assert!(
        text.contains(&format!("\nApiserverAdditionalIPs:\n- {dns}\n")),
        "{text}"
    );
    // Gossip: no public API name, as kops.
    assert!(text.starts_with("APIServerConfig:\n  API: {}\n"), "{text}");
    // Workers do not run the API server.
    let nodes = std::fs::read_to_string(state_dir.join(format!(
        "{cluster}/igconfig/node/nodes-us-east-1a/nodeupconfig.yaml"
    )))
    .unwrap();
    assert!(!nodes.contains("ApiserverAdditionalIPs"), "{nodes}");
    // The launch template was made once, pinning the stored config.
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(&stored));
    assert_eq!(cloud.user_data.len(), 1, "template versions");
    assert!(
        cloud.user_data[0].contains(&format!("NodeupConfigHash: {hash}")),
        "{}",
        cloud.user_data[0]
    );

    let r = kops_on(
        moto,
        &[
            "update",
            "cluster",
            cluster,
            "--state",
            &state,
            "--exit-code",
        ],
    );
    assert_eq!(r.code, 0, "nothing to do:\n{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("No changes need to be applied"),
        "{}",
        r.stderr
    );
}
