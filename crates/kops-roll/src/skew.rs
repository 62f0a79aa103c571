//! The kubelet version skew rule of `update cluster` (kops'
//! `ControlPlaneRunningVersion`): while the control plane still runs an
//! older Kubernetes than the spec (an upgrade half rolled), workers keep
//! the kubelet of the oldest control-plane node, so no kubelet is ever
//! newer than an API server it talks to. The control plane gets the new
//! version first; once it runs it, the next `update cluster` moves the
//! workers. `--ignore-kubelet-version-skew` skips the look-up.
//!
//! As kops: the nodes labelled `node-role.kubernetes.io/control-plane`
//! are read through the kubeconfig's context named after the cluster;
//! when that fails (no kubeconfig, no such context, no answer), no upgrade
//! is taken to be in progress and every group gets the spec's version.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kops_api::version::KubernetesVersion;
use kube::api::ListParams;
use kube::Api;

/// How long the look-up may take before the spec's version is used.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The version workers may run: the oldest of `spec` and the control-plane
/// kubelets' versions (kops' comparison: major, minor and patch; a version
/// that does not parse is skipped). Without the `v`.
pub fn oldest_control_plane_version<'a>(
    spec: &str,
    kubelets: impl IntoIterator<Item = &'a str>,
) -> String {
    let triple = |v: &KubernetesVersion| (v.major, v.minor, v.patch);
    let mut oldest = spec.trim_start_matches('v').to_string();
    let Some(mut parsed) = KubernetesVersion::parse(spec) else {
        return oldest;
    };
    for kubelet in kubelets {
        if let Some(version) = KubernetesVersion::parse(kubelet) {
            if triple(&version) <= triple(&parsed) {
                oldest = kubelet.trim_start_matches('v').to_string();
                parsed = version;
            }
        }
    }
    oldest
}

/// The kubelet version of the oldest control-plane node, through the
/// context named `cluster` in the kubeconfig (`path`, else `KUBECONFIG`,
/// else `~/.kube/config`), when older than `spec`; else `spec`. An error
/// says why the cluster could not be asked (the caller then uses `spec`).
pub async fn control_plane_running_version(
    path: Option<&Path>,
    cluster: &str,
    spec: &str,
) -> Result<String, String> {
    let ask = async {
        let client = crate::k8s::cluster_client(path, cluster).await?;
        let nodes = Api::<Node>::all(client)
            .list(&ListParams::default().labels("node-role.kubernetes.io/control-plane"))
            .await
            .map_err(|e| format!("cannot list control-plane nodes: {e}"))?;
        let kubelets: Vec<String> = nodes
            .items
            .iter()
            .filter_map(|n| {
                Some(
                    n.status
                        .as_ref()?
                        .node_info
                        .as_ref()?
                        .kubelet_version
                        .clone(),
                )
            })
            .collect();
        Ok(oldest_control_plane_version(
            spec,
            kubelets.iter().map(String::as_str),
        ))
    };
    tokio::time::timeout(LOOKUP_TIMEOUT, ask)
        .await
        .map_err(|_| format!("no answer within {}s", LOOKUP_TIMEOUT.as_secs()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_keep_the_oldest_control_plane_kubelet() {
        // Half rolled: one control-plane node on the new version.
        assert_eq!(
            oldest_control_plane_version("1.34.1", ["v1.33.4", "v1.34.1", "v1.33.4"]),
            "1.33.4"
        );
        // All rolled, or no control-plane node answered: the spec's.
        assert_eq!(
            oldest_control_plane_version("1.34.1", ["v1.34.1", "v1.34.1"]),
            "1.34.1"
        );
        assert_eq!(oldest_control_plane_version("v1.34.1", []), "1.34.1");
        // A downgrade in progress never moves workers above the spec.
        assert_eq!(
            oldest_control_plane_version("1.33.4", ["v1.34.1"]),
            "1.33.4"
        );
        assert_eq!(
            oldest_control_plane_version("1.34.1", ["garbage", "v1.33.0"]),
            "1.33.0"
        );
    }
}
