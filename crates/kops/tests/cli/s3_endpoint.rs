//! A non-AWS S3 state store through kops' own variables (issue 17): the
//! store `s3://bucket` is reached only through `S3_ENDPOINT`, `S3_REGION`,
//! `S3_ACCESS_KEY_ID` and `S3_SECRET_ACCESS_KEY` (moto standing in for
//! MinIO), while EC2 and the other services go through `AWS_ENDPOINT_URL`.
//! `AWS_ENDPOINT_URL_S3` points at a closed port, so any S3 request that
//! ignored `S3_ENDPOINT` would fail.

use crate::common;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use base64::Engine;
use kops_state::s3::{default_client, CustomEndpoint};
use kops_state::{ObjectStore, S3Store};

/// The decoded user data of the latest version of a launch template.
async fn user_data(endpoint: &str, template: &str) -> String {
    let config = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await;
    let out = aws_sdk_ec2::Client::new(&config)
        .describe_launch_template_versions()
        .launch_template_name(template)
        .versions("$Latest")
        .send()
        .await
        .unwrap();
    let data = out.launch_template_versions()[0]
        .launch_template_data()
        .and_then(|d| d.user_data())
        .unwrap_or_default();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn custom_s3_endpoint_state_store() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let endpoint = moto.endpoint();
    let s3_vars = [
        ("S3_ENDPOINT", endpoint.clone()),
        ("S3_REGION", "us-east-1".to_string()),
        ("S3_ACCESS_KEY_ID", "test".to_string()),
        ("S3_SECRET_ACCESS_KEY", "test".to_string()),
    ];
    let lookup = |name: &str| {
        s3_vars
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(default_client(CustomEndpoint::from_lookup(&lookup)));
    rt.block_on(client.create_bucket().bucket("s3-endpoint").send())
        .unwrap();

    let run = |args: &[&str]| {
        let mut c = common::command(args);
        for (k, v) in moto.env() {
            c.env(k, v);
        }
        c.env("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1");
        for (k, v) in &s3_vars {
            c.env(k, v);
        }
        common::Run::from(c.output().expect("run kops"))
    };
    let cluster = "s3endpoint.example.com";
    let state = "s3://s3-endpoint";
    let r = run(&[
        "create",
        "cluster",
        cluster,
        "--zones",
        "us-east-1a",
        "--networking",
        "cilium",
        "--state",
        state,
        "--image",
        common::IMAGE,
        "--dns",
        "none",
    ]);
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    let r = run(&["update", "cluster", cluster, "--state", state, "--yes"]);
    assert_eq!(r.code, 0, "apply: {}", r.stderr);

    // The state went to the custom endpoint; etcd-manager reads its
    // backups there too.
    let store = S3Store::with_client(state, client).unwrap();
    let manifest = rt
        .block_on(store.read(&format!(
            "{cluster}/manifests/etcd/main-control-plane-us-east-1a.yaml"
        )))
        .unwrap()
        .expect("etcd-manager manifest in the store");
    let manifest = String::from_utf8(manifest).unwrap();
    let env = format!(
        "    env:\n    - name: AWS_REGION\n      value: us-east-1\n\
         \x20   - name: S3_ACCESS_KEY_ID\n      value: test\n\
         \x20   - name: S3_ENDPOINT\n      value: {endpoint}\n\
         \x20   - name: S3_REGION\n      value: us-east-1\n\
         \x20   - name: S3_SECRET_ACCESS_KEY\n      value: test\n\
         \x20   - name: ETCD_MANAGER_DAILY_BACKUPS_RETENTION\n"
    );
    assert!(manifest.contains(&env), "{manifest}");

    // Control planes export the variables to nodeup; workers do not.
    let script = rt.block_on(user_data(
        &endpoint,
        &format!("control-plane-us-east-1a.masters.{cluster}"),
    ));
    let exports = format!(
        "\nexport AWS_REGION=us-east-1\nexport S3_ACCESS_KEY_ID=test\n\
         export S3_ENDPOINT={endpoint}\nexport S3_REGION=us-east-1\n\
         export S3_SECRET_ACCESS_KEY=test\n\n"
    );
    assert!(script.contains(&exports), "{script}");
    let script = rt.block_on(user_data(&endpoint, &format!("nodes-us-east-1a.{cluster}")));
    assert!(
        script.contains("\nexport AWS_REGION=us-east-1\n\n"),
        "{script}"
    );
    assert!(!script.contains("S3_"), "{script}");
}
