//! IAM roles for service accounts through the binary against moto:
//! `create cluster --discovery-store s3://BUCKET` (kops' way to switch IRSA
//! on) → `update cluster --yes` creates the OIDC provider and the addons'
//! service-account roles and publishes the discovery document and JWKS to
//! the bucket → a second update has nothing to do → `delete cluster --yes`
//! leaves no provider and no role of the cluster.

use crate::common;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use common::{file_url, kops_on};

use crate::common::IMAGE;
const CLUSTER: &str = "irsa.example.com";
const BUCKET: &str = "oidc-discovery";

#[tokio::test]
async fn irsa_lifecycle() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    moto.ensure_hosted_zone("example.com").unwrap();
    moto.create_bucket(BUCKET).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let key = tmp.path().join("id.pub");
    std::fs::write(&key, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b test@example\n").unwrap();
    let store = format!("s3://{BUCKET}");
    let r = kops_on(
        moto,
        &[
            "create",
            "cluster",
            CLUSTER,
            "--zones",
            "us-east-1a",
            "--networking",
            "cilium",
            "--ssh-public-key",
            key.to_str().unwrap(),
            "--state",
            &state,
            "--image",
            IMAGE,
            "--discovery-store",
            &store,
        ],
    );
    assert_eq!(r.code, 0, "create: {}", r.stderr);

    let r = kops_on(
        moto,
        &["update", "cluster", CLUSTER, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply: {}", r.stderr);

    let config = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(moto.endpoint())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await;
    let iam = aws_sdk_iam::Client::new(&config);
    let issuer = format!("{BUCKET}.s3.us-east-1.amazonaws.com/{CLUSTER}");
    let providers = iam.list_open_id_connect_providers().send().await.unwrap();
    let provider = providers
        .open_id_connect_provider_list()
        .iter()
        .filter_map(|p| p.arn())
        .find(|a| a.ends_with(&format!("oidc-provider/{issuer}")))
        .unwrap_or_else(|| panic!("no OIDC provider for {issuer}: {providers:?}"))
        .to_string();
    // (`create cluster` picks DNS `None`: no dns-controller role.)
    for sa in [
        "aws-cloud-controller-manager",
        "ebs-csi-controller-sa",
        "aws-node-termination-handler",
    ] {
        let role = format!("{sa}.kube-system.sa.{CLUSTER}");
        let got = iam.get_role().role_name(&role).send().await;
        let got = got.unwrap_or_else(|e| panic!("{role}: {e:?}"));
        let trust = got.role().unwrap().assume_role_policy_document().unwrap();
        assert!(trust.contains("oidc-provider"), "{role}: {trust}");
    }

    // The discovery documents, where IAM looks for them.
    for (k, v) in moto.env() {
        std::env::set_var(k, v);
    }
    let discovery = kops_state::open(&format!("s3://{BUCKET}/{CLUSTER}"))
        .await
        .unwrap();
    let doc = discovery
        .read(".well-known/openid-configuration")
        .await
        .unwrap()
        .expect("discovery document");
    let doc: serde_json::Value = serde_json::from_slice(&doc).unwrap();
    assert_eq!(doc["issuer"], format!("https://{issuer}"));
    let jwks = discovery
        .read("openid/v1/jwks")
        .await
        .unwrap()
        .expect("JWKS");
    let jwks: serde_json::Value = serde_json::from_slice(&jwks).unwrap();
    let keys = jwks["keys"].as_array().expect("keys");
    assert_eq!(keys.len(), 1, "{jwks}");
    assert_eq!(keys[0]["kty"], "RSA");
    assert_eq!(keys[0]["alg"], "RS256");

    let r = kops_on(
        moto,
        &[
            "update",
            "cluster",
            CLUSTER,
            "--state",
            &state,
            "--exit-code",
        ],
    );
    assert_eq!(r.code, 0, "second update has changes: {}", r.stdout);

    let r = kops_on(
        moto,
        &["delete", "cluster", CLUSTER, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "delete: {}", r.stderr);
    let providers = iam.list_open_id_connect_providers().send().await.unwrap();
    assert!(
        providers
            .open_id_connect_provider_list()
            .iter()
            .all(|p| p.arn() != Some(provider.as_str())),
        "the OIDC provider is left"
    );
    let roles = iam.list_roles().send().await.unwrap();
    let left: Vec<&str> = roles
        .roles()
        .iter()
        .map(|r| r.role_name())
        .filter(|n| n.ends_with(CLUSTER))
        .collect();
    assert!(left.is_empty(), "roles left: {left:?}");
}
