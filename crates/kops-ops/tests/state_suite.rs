//! The same lifecycle against every state-store backend: memory, file:// and
//! S3 (moto_server on 127.0.0.1). Checks kops' layout key by key.

use std::sync::Arc;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_s3::config::Credentials;
use kops_ops::{apply_manifest, EditOutcome, OpsError, Registry};
use kops_state::{FileStore, MemoryStore, ObjectStore, S3Store};

const MANIFEST: &str = r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata:
  name: suite.example.com
spec:
  cloudProvider: aws
  etcdClusters:
  - etcdMembers:
    - instanceGroup: control-plane-us-east-1a
      name: a
    name: main
  - etcdMembers:
    - instanceGroup: control-plane-us-east-1a
      name: a
    name: events
  kubernetesVersion: v1.34.1
  networkCIDR: 172.20.0.0/16
  networking:
    cilium: {}
  somethingNew:
    keptVerbatim: true
  subnets:
  - cidr: 172.20.32.0/19
    name: us-east-1a
    type: Public
    zone: us-east-1a
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels:
    kops.k8s.io/cluster: suite.example.com
  name: control-plane-us-east-1a
spec:
  machineType: t3.medium
  maxSize: 1
  minSize: 1
  role: Master
  subnets: [us-east-1a]
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels:
    kops.k8s.io/cluster: suite.example.com
  name: nodes
spec:
  machineType: t3.medium
  maxSize: 2
  minSize: 2
  role: Node
  subnets: [us-east-1a]
---
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: 3.1
"#;

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b test@example";

async fn suite(store: Arc<dyn ObjectStore>) {
    let registry = Registry::new(store.clone());
    let name = "suite.example.com";
    assert!(registry.list_clusters().await.unwrap().is_empty());

    let applied = apply_manifest(&registry, "suite.yaml", MANIFEST, false, false, None)
        .await
        .unwrap();
    assert_eq!(applied.len(), 4, "{applied:?}");
    let keys = store.list("").await.unwrap();
    assert_eq!(
        keys,
        vec![
            "suite.example.com/clusteraddons/default",
            "suite.example.com/config",
            "suite.example.com/instancegroup/control-plane-us-east-1a",
            "suite.example.com/instancegroup/nodes",
        ]
    );

    // Unknown fields survive the store.
    let cluster = registry.get_cluster(name).await.unwrap().unwrap();
    assert_eq!(cluster.spec.extra["somethingNew"]["keptVerbatim"], true);
    assert!(cluster.metadata.creation_timestamp.is_some());
    assert_eq!(registry.list_clusters().await.unwrap().len(), 1);
    let groups = registry.list_instance_groups(name).await.unwrap();
    assert_eq!(
        groups.iter().map(|g| g.name()).collect::<Vec<_>>(),
        ["control-plane-us-east-1a", "nodes"]
    );
    let extra = registry.additional_objects(name).await.unwrap();
    assert_eq!(extra[0]["clientConnection"]["qps"], 3.1);

    // Creating again is refused and changes nothing.
    let err = apply_manifest(&registry, "suite.yaml", MANIFEST, false, false, None)
        .await
        .unwrap_err();
    assert!(matches!(err, OpsError::ClusterExists { .. }), "{err}");
    assert_eq!(store.list("").await.unwrap().len(), 4);

    // SSH keys at pki/ssh/public/admin/<md5 without colons>.
    let id = kops_ops::add_ssh_public_key(&registry, name, KEY)
        .await
        .unwrap();
    assert_eq!(id, "07:76:b6:4c:75:8d:4d:2c:27:b9:ab:17:55:5c:8d:11");
    assert!(store
        .read("suite.example.com/pki/ssh/public/admin/0776b64c758d4d2c27b9ab17555c8d11")
        .await
        .unwrap()
        .is_some());
    let listed = registry.list_ssh_public_keys(name).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].public_key, KEY);

    // Replace: a changed group is written, an invalid one is not.
    let bigger = MANIFEST.replace(
        "  maxSize: 2\n  minSize: 2\n",
        "  maxSize: 5\n  minSize: 3\n",
    );
    let applied = apply_manifest(&registry, "suite.yaml", &bigger, true, false, None)
        .await
        .unwrap();
    let nodes = applied.iter().find(|a| a.name == "nodes").unwrap();
    assert_eq!(nodes.action, "replaced");
    assert_eq!(
        registry
            .get_instance_group(name, "nodes")
            .await
            .unwrap()
            .unwrap()
            .spec
            .min_size,
        Some(3)
    );
    let broken = MANIFEST.replace(
        "  maxSize: 2\n  minSize: 2\n",
        "  maxSize: 1\n  minSize: 4\n",
    );
    assert!(matches!(
        apply_manifest(&registry, "suite.yaml", &broken, true, false, None)
            .await
            .unwrap_err(),
        OpsError::Invalid(_)
    ));
    assert_eq!(
        registry
            .get_instance_group(name, "nodes")
            .await
            .unwrap()
            .unwrap()
            .spec
            .min_size,
        Some(3)
    );

    // Edits: unchanged, saved, refused.
    let ig_text = kops_api::to_yaml(
        &registry
            .get_instance_group(name, "nodes")
            .await
            .unwrap()
            .unwrap(),
    );
    assert_eq!(
        kops_ops::save_edited_instance_group(&registry, name, "nodes", &ig_text)
            .await
            .unwrap(),
        EditOutcome::Unchanged
    );
    let edited = ig_text.replace("machineType: t3.medium", "machineType: m6i.large");
    assert_eq!(
        kops_ops::save_edited_instance_group(&registry, name, "nodes", &edited)
            .await
            .unwrap(),
        EditOutcome::Saved
    );
    let renamed = ig_text.replace("name: nodes", "name: workers");
    assert!(
        kops_ops::save_edited_instance_group(&registry, name, "nodes", &renamed)
            .await
            .is_err()
    );
    assert_eq!(
        registry
            .get_instance_group(name, "nodes")
            .await
            .unwrap()
            .unwrap()
            .spec
            .machine_type
            .as_deref(),
        Some("m6i.large")
    );

    // Delete a group, then the whole cluster's state.
    let d = kops_ops::delete_instance_group(&registry, name, "nodes", false)
        .await
        .unwrap();
    assert!(!d.deleted);
    assert!(registry
        .get_instance_group(name, "nodes")
        .await
        .unwrap()
        .is_some());
    kops_ops::delete_instance_group(&registry, name, "nodes", true)
        .await
        .unwrap();
    assert!(registry
        .get_instance_group(name, "nodes")
        .await
        .unwrap()
        .is_none());
    let removed = kops_ops::unregister_cluster(&registry, name).await.unwrap();
    assert_eq!(removed, 4);
    assert!(store.list("").await.unwrap().is_empty());
    assert!(registry.list_clusters().await.unwrap().is_empty());
}

#[tokio::test]
async fn memory_store() {
    suite(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn file_store() {
    let dir = tempfile::tempdir().unwrap();
    suite(Arc::new(FileStore::at(dir.path()))).await;
}

#[tokio::test]
async fn s3_store_on_moto() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    moto.create_bucket("kops-ops-suite").unwrap();
    let config = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(moto.endpoint())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await;
    let store = S3Store::from_sdk_config("s3://kops-ops-suite/state", &config).unwrap();
    suite(Arc::new(store)).await;
}
