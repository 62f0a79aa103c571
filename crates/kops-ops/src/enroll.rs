//! `kops toolbox enroll`: adds a machine kops did not launch to a cluster
//! over SSH, as kops does for bare-metal clusters. The machine gets a key
//! pair of its own (`/etc/kubernetes/kops/pki/machine/`, made there with
//! openssl when missing); its host name and public key make the `Host`
//! object (`kops.k8s.io/v1alpha2`, namespace `kops-system`) the binary
//! creates in the cluster for a worker; then the bootstrap files are copied
//! and the group's bootstrap script (the user data an instance of the group
//! would run: download nodeup, check its sha256, write the boot config, run
//! nodeup) runs there.
//!
//! A control-plane machine cannot read the state store (it has no cloud
//! credentials), so, as kops, its configuration is copied onto it under
//! `/etc/kubernetes/kops/config` (its node config, the cluster's keysets,
//! secrets, addons and static manifests) and its boot config names that
//! directory (`file:///etc/kubernetes/kops/config`).

pub mod ssh;

use std::collections::BTreeMap;

use kops_api::{Cluster, InstanceGroup, Role};
use serde_json::{json, Value};

use crate::{require_cluster, OpsError, Registry};
pub use ssh::{Echo, SshHost};

/// Where an enrolled control-plane machine keeps its configuration.
pub const LOCAL_CONFIG_DIR: &str = "/etc/kubernetes/kops/config";

/// The machine's key pair (its public half identifies it to kops-controller).
pub const MACHINE_KEY_DIR: &str = "/etc/kubernetes/kops/pki/machine";

/// The state-store trees a control-plane machine needs beside its node
/// config (relative to the cluster's directory).
const CONTROL_PLANE_TREES: [&str; 4] = ["pki/", "secrets/", "addons/", "manifests/"];

/// What goes wrong while enrolling.
#[derive(Debug, thiserror::Error)]
pub enum EnrollError {
    #[error("failed to SSH to `{host}` (with user `{user}`): {reason}\nhint: check --host, --ssh-port and --ssh-user, and that `ssh -p PORT USER@HOST true` works without a prompt (an SSH agent or a key the machine accepts)")]
    Connect {
        host: String,
        user: String,
        reason: String,
    },
    #[error("running `{command}` over SSH: {reason}")]
    Command { command: String, reason: String },
    #[error("{0}")]
    Local(String),
    /// A file read found no file (handled by the reader).
    #[error("no such file")]
    Missing,
    #[error("{message}\nhint: {hint}")]
    Input { message: String, hint: String },
}

/// What `toolbox enroll` was asked.
#[derive(Debug, Clone, Default)]
pub struct EnrollRequest {
    pub cluster: String,
    pub instance_group: String,
    pub pod_cidrs: Vec<String>,
}

/// What a machine needs to join: the bootstrap script and the files
/// written before it runs (remote path → contents).
#[derive(Debug, Clone, Default)]
pub struct BootstrapData {
    pub script: String,
    pub files: BTreeMap<String, Vec<u8>>,
    /// The group runs the control plane (no `Host` object: the API server
    /// is not running yet).
    pub control_plane: bool,
}

/// The `Host` object for a machine (kops' field names and order: kops
/// 1.37 prints the same YAML for `--build-host`).
pub fn host_object(hostname: &str, request: &EnrollRequest, public_key: &str) -> Value {
    let mut spec = serde_json::Map::new();
    spec.insert("instanceGroup".into(), json!(request.instance_group));
    if !request.pod_cidrs.is_empty() {
        spec.insert("podCIDRs".into(), json!(request.pod_cidrs));
    }
    if !public_key.is_empty() {
        spec.insert("publicKey".into(), json!(public_key));
    }
    json!({
        "apiVersion": "kops.k8s.io/v1alpha2",
        "kind": "Host",
        "metadata": {
            "name": hostname,
            "namespace": "kops-system",
        },
        "spec": spec,
    })
}

/// The shell script that makes the machine's key pair when it has none.
fn create_key_script() -> String {
    format!(
        "#!/bin/bash\nset -o errexit\nset -o nounset\nset -o pipefail\nset -x\n\n\
         DIR={MACHINE_KEY_DIR}\nmkdir -p \"${{DIR}}\"\n\
         if [[ ! -f \"${{DIR}}/private.pem\" ]]; then\n  \
         openssl ecparam -name prime256v1 -genkey -noout -out \"${{DIR}}/private.pem\"\nfi\n\
         if [[ ! -f \"${{DIR}}/public.pem\" ]]; then\n  \
         openssl ec -in \"${{DIR}}/private.pem\" -pubout -out \"${{DIR}}/public.pem\"\nfi\n"
    )
}

/// Reads (or first makes) the machine's public key and its host name, and
/// returns its `Host` object.
pub async fn build_host(target: &SshHost, request: &EnrollRequest) -> Result<Value, OpsError> {
    let path = format!("{MACHINE_KEY_DIR}/public.pem");
    let mut key = target.read_file(&path).await?.unwrap_or_default();
    if String::from_utf8_lossy(&key).trim().is_empty() {
        target.run_script(&create_key_script(), true).await?;
        key = target.read_file(&path).await?.unwrap_or_default();
    }
    let key = String::from_utf8_lossy(&key).trim().to_string();
    if key.is_empty() {
        return Err(EnrollError::Command {
            command: format!("cat {path}"),
            reason: "the machine's public key is empty after creating it".into(),
        }
        .into());
    }
    let hostname = target.hostname().await?;
    Ok(host_object(&hostname, request, &key))
}

/// The cluster and the group a machine joins, checked.
pub async fn load(
    registry: &Registry,
    request: &EnrollRequest,
) -> Result<(Cluster, Vec<InstanceGroup>, InstanceGroup), OpsError> {
    let cluster = require_cluster(registry, &request.cluster).await?;
    let groups = registry.list_instance_groups(&request.cluster).await?;
    let group = groups
        .iter()
        .find(|g| g.name() == request.instance_group)
        .cloned()
        .ok_or_else(|| OpsError::InstanceGroupNotFound {
            cluster: request.cluster.clone(),
            name: request.instance_group.clone(),
        })?;
    Ok((cluster, groups, group))
}

/// The address a machine reaches the API server at: kops' bare-metal rule,
/// `spec.api.publicName`, which must be an IP address.
pub fn api_server_address(cluster: &Cluster) -> Result<String, OpsError> {
    let name = cluster
        .spec
        .api
        .as_ref()
        .and_then(|a| a.public_name.clone())
        .or_else(|| cluster.spec.master_public_name.clone())
        .unwrap_or_default();
    if name.is_empty() {
        return Err(EnrollError::Input {
            message: format!(
                "cluster `{}`: spec.api.publicName must be set to enroll machines",
                cluster.name()
            ),
            hint: "set it to the control plane's IP address (`kops edit cluster`)".into(),
        }
        .into());
    }
    if name.parse::<std::net::IpAddr>().is_err() {
        return Err(EnrollError::Input {
            message: format!(
                "unable to determine IP address for kube-apiserver: spec.api.publicName `{name}` is not an IP address"
            ),
            hint: "set spec.api.publicName to the control plane's IP address (`kops edit cluster`)".into(),
        }
        .into());
    }
    Ok(name)
}

/// The bootstrap data of a machine joining `group`: its script and, for
/// the control plane, the files it reads instead of the state store.
/// Makes the cluster's missing CA keysets first (a bare-metal cluster has
/// no `update cluster --yes` in kops-rs to make them).
pub async fn bootstrap_data(
    registry: &Registry,
    cluster: &Cluster,
    groups: &[InstanceGroup],
    group: &InstanceGroup,
) -> Result<BootstrapData, OpsError> {
    let role = group.role().ok_or_else(|| EnrollError::Input {
        message: format!("instance group `{}` has no role", group.name()),
        hint: "set spec.role (`kops edit instancegroup`)".into(),
    })?;
    let address = api_server_address(cluster)?;
    crate::pki::ensure_cluster_pki(registry, cluster).await?;
    let nodeup = crate::update::nodeup::resolve_from_environment(
        registry,
        cluster,
        std::slice::from_ref(group),
    )
    .await?;
    nodeup.upload(registry).await?;
    let mut inputs = crate::pki::node_inputs(registry, cluster, groups).await?;
    inputs.nodeup = Some(nodeup.sources.clone());
    inputs.base_url_images = nodeup.images.clone();
    inputs.api_server_addresses = vec![address];
    let control_plane = role == Role::ControlPlane;
    let store_base = cluster
        .spec
        .config_base
        .clone()
        .unwrap_or_else(|| registry.config_base(cluster.name()));
    let local_base = format!("file://{LOCAL_CONFIG_DIR}");
    let config_base = if control_plane {
        local_base.as_str()
    } else {
        store_base.as_str()
    };
    let node_error = |e: kops_nodeup::config::ConfigError| EnrollError::Input {
        message: format!("instance group `{}`: {e}", group.name()),
        hint: "check the group and the cluster spec (`kops get ig -o yaml`)".into(),
    };
    let script = kops_nodeup::bootstrap::user_data_with(cluster, group, config_base, &inputs)
        .map_err(node_error)?;
    let mut files = BTreeMap::new();
    // A worker asks kops-controller for its node config: the controller
    // reads it from its config base, the state store (as `update cluster`
    // writes it) or, on an enrolled control plane, the local copy below.
    let worker_configs = groups
        .iter()
        .filter(|g| g.role() == Some(Role::Node))
        .filter(|g| control_plane || g.name() == group.name());
    for worker in worker_configs {
        let rendered =
            kops_nodeup::config::rendered_with_inputs(cluster, worker, &store_base, &inputs)
                .map_err(|e| EnrollError::Input {
                    message: format!("instance group `{}`: {e}", worker.name()),
                    hint: "check the group and the cluster spec (`kops get ig -o yaml`)".into(),
                })?;
        let Some(rendered) = rendered else { continue };
        let relative = rendered.path.trim_start_matches('/');
        if control_plane {
            files.insert(
                format!("{LOCAL_CONFIG_DIR}/{relative}"),
                rendered.yaml.into_bytes(),
            );
        } else {
            registry
                .store()
                .write(
                    &format!("{}/{relative}", cluster.name()),
                    rendered.yaml.as_bytes(),
                    kops_state::WriteOptions::default(),
                )
                .await
                .map_err(|e| OpsError::Registry(e.into()))?;
        }
    }
    if control_plane {
        let rendered =
            kops_nodeup::config::rendered_with_inputs(cluster, group, config_base, &inputs)
                .map_err(node_error)?;
        if let Some(rendered) = rendered {
            files.insert(
                format!(
                    "{LOCAL_CONFIG_DIR}/{}",
                    rendered.path.trim_start_matches('/')
                ),
                rendered.yaml.into_bytes(),
            );
        }
        let store = registry.store();
        let store_error = |e: kops_state::StoreError| OpsError::Registry(e.into());
        let prefix = format!("{}/", cluster.name());
        for tree in CONTROL_PLANE_TREES {
            for key in store
                .list(&format!("{prefix}{tree}"))
                .await
                .map_err(store_error)?
            {
                if let Some(bytes) = store.read(&key).await.map_err(store_error)? {
                    let relative = key.strip_prefix(&prefix).unwrap_or(&key);
                    files.insert(format!("{LOCAL_CONFIG_DIR}/{relative}"), bytes);
                }
            }
        }
    }
    Ok(BootstrapData {
        script,
        files,
        control_plane,
    })
}

/// Copies the bootstrap files to the machine and runs its script there
/// (its output echoed).
pub async fn enroll(target: &SshHost, data: &BootstrapData) -> Result<(), OpsError> {
    for (path, bytes) in &data.files {
        target.write_file(path, bytes).await?;
    }
    if !data.script.is_empty() {
        target.run_script(&data.script, true).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_object_has_kops_fields() {
        let request = EnrollRequest {
            cluster: "c.example.com".into(),
            instance_group: "nodes".into(),
            pod_cidrs: vec!["10.1.0.0/24".into()],
        };
        let host = host_object("m1", &request, "KEY");
        assert_eq!(host["metadata"]["namespace"], "kops-system");
        assert_eq!(host["spec"]["podCIDRs"][0], "10.1.0.0/24");
        assert_eq!(host["spec"]["publicKey"], "KEY");
    }
}
