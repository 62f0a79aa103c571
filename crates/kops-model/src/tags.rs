//! kops' tags on the AWS resources it owns, which the addons' manifests
//! (Karpenter's node classes) repeat: the cluster's cloud labels, its
//! ownership tags and the resource's `Name`.

use std::collections::BTreeMap;

/// The tag kops puts on everything it creates (legacy, still written).
pub const TAG_CLUSTER: &str = "KubernetesCluster";
/// The tag prefix of `kubernetes.io/cluster/<name>: owned|shared`.
pub const TAG_CLUSTER_PREFIX: &str = "kubernetes.io/cluster/";
pub const TAG_NAME: &str = "Name";

/// Tags as a sorted map.
pub type Tags = BTreeMap<String, String>;

/// The tags kops puts on an owned resource of `cluster` named `name`: the
/// cloud labels, `KubernetesCluster`, `kubernetes.io/cluster/<cluster>:
/// owned`, `Name`, then `extra` (which wins).
pub fn owned_tags(cluster: &str, cloud_labels: &Tags, name: &str, extra: &[(&str, &str)]) -> Tags {
    let mut tags = cloud_labels.clone();
    tags.insert(TAG_CLUSTER.to_string(), cluster.to_string());
    tags.insert(
        format!("{TAG_CLUSTER_PREFIX}{cluster}"),
        "owned".to_string(),
    );
    tags.insert(TAG_NAME.to_string(), name.to_string());
    for (k, v) in extra {
        tags.insert((*k).to_string(), (*v).to_string());
    }
    tags
}
