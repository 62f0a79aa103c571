//! The state-store files `update` writes besides the specs (the etcd
//! cluster specs, `kops-version.txt`, the etcd-manager, kops-channels and
//! static-pod manifests, each addon's manifest and the bootstrap channel):
//! compared with what the store holds, so the plan names every one that
//! would change (a dry run writes nothing, and a file kops wrote is never
//! replaced without the plan saying so), then written, each only when its
//! bytes differ.
//!
//! On a cluster kops made, its kops-controller addon (a DaemonSet: kops
//! runs kops-controller in a pod, kops-rs as a host service) is kept for
//! the control-plane nodes kops' nodeup set up, bridged
//! ([`kops_api::switch::bridge_manifest`]: the DaemonSet stays off nodes
//! kops-rs' nodeup set up, whose host service the binding also names), and
//! listed in the bootstrap channel with its own hash.

use std::collections::BTreeMap;

use kops_model::Model;

use crate::{OpsError, Registry};

/// The addon whose manifest differs by design between kops and kops-rs.
const KOPS_CONTROLLER: &str = kops_api::switch::KOPS_CONTROLLER_ADDON;

/// One state-store file `update --yes` would write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateFileWrite {
    /// The key below the cluster (`addons/coredns.addons.k8s.io/k8s-1.12.yaml`).
    pub path: String,
    /// The bytes to write.
    pub contents: Vec<u8>,
    /// Whether the store holds a different version of it.
    pub replaces: bool,
}

impl StateFileWrite {
    /// The plan's line for it.
    pub fn describe(&self) -> String {
        let what = if self.replaces { "changed" } else { "new" };
        format!("{} ({what})", self.path)
    }
}

/// The files whose stored bytes differ from what the model renders.
///
/// `host_controller`: the control-plane nodes this update configures run
/// kops-rs' nodeup, whose kops-controller is a host service: a kept kops
/// addon is bridged ([`kops_api::switch::bridge_manifest`]). Otherwise it is
/// kept exactly as stored (kops' nodeup keeps running kops' controller).
pub async fn plan(
    registry: &Registry,
    model: &Model<'_>,
    host_controller: bool,
) -> Result<Vec<StateFileWrite>, OpsError> {
    let cluster = model.name();
    if !kops_api::store_path::same(model.config_base, &registry.config_base(cluster)) {
        return Ok(Vec::new());
    }
    let store = registry.store();
    let store_error = |e: kops_state::StoreError| OpsError::Registry(e.into());
    let mut kept = BTreeMap::new();
    let controller = kops_model::files::addons(model)
        .into_iter()
        .find(|a| a.key == KOPS_CONTROLLER)
        .map(|a| format!("{cluster}/addons/{}", a.location()));
    if let Some(key) = controller {
        if let Some(current) = store.read(&key).await.map_err(store_error)? {
            let text = String::from_utf8_lossy(&current);
            if kops_api::switch::runs_in_a_pod(&text) && !host_controller {
                kept.insert(KOPS_CONTROLLER.to_string(), text.into_owned());
            } else if kops_api::switch::runs_in_a_pod(&text) {
                let bridged = kops_api::switch::bridge_manifest(&text).map_err(|message| {
                    OpsError::Model(kops_model::ModelError::Spec {
                        path: key.clone(),
                        message,
                        hint: "update the cluster once with kops 1.37, whose manifest has that term, then run kops-rs again"
                            .to_string(),
                    })
                })?;
                kept.insert(KOPS_CONTROLLER.to_string(), bridged.into_owned());
            }
        }
    }
    // The completed spec and node configs are written elsewhere.
    let files = kops_model::files::state_files_keeping(model, "", Vec::new(), &kept)?;
    let wanted: Vec<_> = files
        .into_iter()
        .filter(|f| f.base.is_none() && f.name != "cluster-completed.spec")
        .collect();
    let reads = wanted.iter().map(|file| {
        let key = format!("{cluster}/{}", file.path);
        async move { store.read(&key).await }
    });
    let current = futures::future::try_join_all(reads)
        .await
        .map_err(store_error)?;
    Ok(wanted
        .into_iter()
        .zip(current)
        .filter_map(|(file, current)| {
            let contents = as_kops_stores(&file.path, &file.contents);
            (current.as_deref() != Some(contents)).then(|| StateFileWrite {
                path: file.path.clone(),
                contents: contents.to_vec(),
                replaces: current.is_some(),
            })
        })
        .collect())
}

/// Writes the planned files.
pub async fn write(
    registry: &Registry,
    cluster: &str,
    writes: &[StateFileWrite],
) -> Result<(), OpsError> {
    let store = registry.store();
    let puts = writes.iter().map(|w| {
        let key = format!("{cluster}/{}", w.path);
        async move {
            store
                .write(&key, &w.contents, kops_state::WriteOptions::default())
                .await
        }
    });
    futures::future::try_join_all(puts)
        .await
        .map_err(|e| OpsError::Registry(e.into()))?;
    Ok(())
}

/// A state file's bytes as kops itself stores them. The rendered files end
/// with a newline, as kops' Terraform goldens do (its tests trim and add
/// one); kops' direct apply writes each addon manifest (not the bootstrap
/// channel) and `kops-version.txt` without the final newline. Writing the
/// same bytes lets kops and kops-rs each find the other's files unchanged.
fn as_kops_stores<'a>(path: &str, contents: &'a [u8]) -> &'a [u8] {
    let bare = path == "kops-version.txt"
        || (path.starts_with("addons/") && path != "addons/bootstrap-channel.yaml");
    if !bare {
        return contents;
    }
    let mut end = contents.len();
    while end > 0 && contents[end - 1] == b'\n' {
        end -= 1;
    }
    &contents[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addon_manifests_and_version_are_stored_without_the_final_newline() {
        let yaml = b"kind: ConfigMap\n".as_slice();
        assert_eq!(
            as_kops_stores("addons/coredns.addons.k8s.io/k8s-1.12.yaml", yaml),
            b"kind: ConfigMap"
        );
        assert_eq!(as_kops_stores("kops-version.txt", b"1.37.0\n"), b"1.37.0");
        // The bootstrap channel and everything else keep theirs.
        assert_eq!(as_kops_stores("addons/bootstrap-channel.yaml", yaml), yaml);
        assert_eq!(as_kops_stores("cluster-completed.spec", yaml), yaml);
    }
}
