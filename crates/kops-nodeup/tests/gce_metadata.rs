//! nodeup on Google Cloud reads its boot config from the instance's
//! metadata (a metadata test server written from Google's documented
//! metadata API) when the user data's file is not there, then the node
//! config the boot config pins, hash checked.

use kops_nodeup::bootstrap::{render_script, BootConfig};
use kops_nodeup::config;

#[tokio::test]
async fn the_boot_config_comes_from_the_user_data_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("state/gce.example.com");
    let node_config = "ClusterName: gce.example.com\n";
    let key = config::nodeup_config_path(kops_api::Role::Node, "nodes-us-test1-a");
    std::fs::create_dir_all(base.join(&key).parent().unwrap()).unwrap();
    std::fs::write(base.join(&key), node_config).unwrap();
    let boot = BootConfig {
        cloud_provider: "gce".into(),
        cluster_name: "gce.example.com".into(),
        config_base: Some(format!("file://{}", base.display())),
        instance_group_name: "nodes-us-test1-a".into(),
        instance_group_role: "Node".into(),
        nodeup_config_hash: config::config_hash(node_config.as_bytes()),
        ..Default::default()
    };
    let user_data = render_script(&[], None, &boot);
    let mut values = kops_testkit::gce_metadata::instance_values(
        "testproject",
        "us-test1-a",
        "nodes-us-test1-a-x",
        "10.0.16.3",
    );
    values.insert("instance/attributes/user-data".into(), user_data);
    let metadata = kops_testkit::gce_metadata::MetadataServer::start(values);
    std::env::set_var("GCE_METADATA_HOST", &metadata.host);

    let missing = tmp.path().join("conf/kube_env.yaml");
    let loaded = kops_nodeup::agent::load(&missing).await.unwrap();
    assert_eq!(loaded.boot, BootConfig::parse(&boot.to_yaml()).unwrap());
    assert_eq!(loaded.config.cluster_name, "gce.example.com");
    assert!(metadata
        .request_lines()
        .iter()
        .any(|l| l.starts_with("GET /computeMetadata/v1/instance/attributes/user-data ")));

    // Without user data, the message says what was looked for.
    metadata.set("instance/attributes/user-data", None);
    let err = kops_nodeup::agent::load(&missing)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("neither `user-data` nor `startup-script` metadata"),
        "{err}"
    );
}
