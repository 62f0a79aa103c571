//! kops' state-store layout on top of an [`ObjectStore`]:
//!
//! ```text
//! <cluster>/config                                  Cluster (v1alpha2 YAML)
//! <cluster>/instancegroup/<name>                    InstanceGroup (v1alpha2 YAML)
//! <cluster>/clusteraddons/default                   additional objects from `create -f`
//! <cluster>/pki/ssh/public/admin/<md5 fingerprint>  admin SSH public key
//! <cluster>/cluster-completed.spec                  the populated spec (written by update)
//! <cluster>/igconfig/<role>/<group>/nodeupconfig.yaml  a group's node config (written by update)
//! ```

use std::sync::Arc;

use base64::Engine;
use kops_api::manifest::{parse_one, to_yaml, to_yaml_stream, ManifestError};
use kops_api::{Cluster, InstanceGroup, Role};
use md5::{Digest, Md5};

use crate::{ObjectStore, StoreError, Version, WriteOptions};

/// The key of a cluster's spec.
pub fn cluster_key(cluster: &str) -> String {
    format!("{cluster}/config")
}

/// The key of an instance group's spec.
pub fn instance_group_key(cluster: &str, name: &str) -> String {
    format!("{cluster}/instancegroup/{name}")
}

/// The key of the additional objects given to `create -f`.
pub fn additional_objects_key(cluster: &str) -> String {
    format!("{cluster}/clusteraddons/default")
}

/// The key of the populated spec written by `update cluster`.
pub fn completed_spec_key(cluster: &str) -> String {
    format!("{cluster}/cluster-completed.spec")
}

/// The key of a group's node config, which its nodes read at boot
/// (`<cluster>/igconfig/<role>/<group>/nodeupconfig.yaml`, role in lower
/// case: `control-plane`, `node`, `apiserver`).
pub fn nodeup_config_key(cluster: &str, role: Role, group: &str) -> String {
    format!(
        "{cluster}/igconfig/{}/{group}/nodeupconfig.yaml",
        role.path_name()
    )
}

fn ssh_admin_prefix(cluster: &str) -> String {
    format!("{cluster}/pki/ssh/public/admin/")
}

/// Errors from reading or writing kops objects in the store.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the object stored at `{url}` cannot be read: {source}\nhint: fix or remove that file; it was not written by kops or was edited by hand")]
    Corrupt {
        url: String,
        source: Box<ManifestError>,
    },
    #[error("`{text}` is not an SSH public key: {reason}\nhint: pass the `.pub` file, a line such as `ssh-ed25519 AAAA... user@host`")]
    BadSshKey { text: String, reason: String },
}

/// One admin SSH public key in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshPublicKey {
    /// The MD5 fingerprint, colon separated (`aa:bb:...`), as kops prints it.
    pub id: String,
    pub public_key: String,
}

/// Computes kops' id for an SSH public key: the MD5 of the key blob.
pub fn ssh_fingerprint(public_key: &str) -> Result<String, RegistryError> {
    let bad = |reason: &str| RegistryError::BadSshKey {
        text: public_key.chars().take(40).collect(),
        reason: reason.to_string(),
    };
    let mut fields = public_key.split_whitespace();
    let algorithm = fields.next().ok_or_else(|| bad("the text is empty"))?;
    let blob = fields
        .next()
        .ok_or_else(|| bad("it has no key data after the algorithm"))?;
    let data = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .map_err(|_| bad("the key data is not base64"))?;
    // The blob starts with the algorithm name, length-prefixed.
    let named = data
        .get(0..4)
        .map(|l| u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize)
        .and_then(|n| data.get(4..4 + n))
        .is_some_and(|name| name == algorithm.as_bytes());
    if !named {
        return Err(bad("the key data does not match its algorithm"));
    }
    let digest = Md5::digest(&data);
    Ok(digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":"))
}

/// Clusters, instance groups and SSH keys in kops' layout.
#[derive(Debug, Clone)]
pub struct Registry {
    store: Arc<dyn ObjectStore>,
}

impl Registry {
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        Registry { store }
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The `configBase` of a cluster in this store.
    pub fn config_base(&self, cluster: &str) -> String {
        self.store.url_of(cluster)
    }

    async fn read_object<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<T>, RegistryError> {
        let Some(bytes) = self.store.read(key).await? else {
            return Ok(None);
        };
        self.parse_object(key, &bytes).map(Some)
    }

    /// An object with the version it was read at, for [`Self::replace_cluster`]
    /// and [`Self::replace_instance_group`].
    async fn read_object_versioned<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<(T, Version)>, RegistryError> {
        let Some((bytes, version)) = self.store.read_versioned(key).await? else {
            return Ok(None);
        };
        Ok(Some((self.parse_object(key, &bytes)?, version)))
    }

    fn parse_object<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
        bytes: &[u8],
    ) -> Result<T, RegistryError> {
        let url = self.store.url_of(key);
        parse_one(&url, &String::from_utf8_lossy(bytes)).map_err(|source| RegistryError::Corrupt {
            url,
            source: Box::new(source),
        })
    }

    /// Every cluster in the store, sorted by name.
    pub async fn list_clusters(&self) -> Result<Vec<Cluster>, RegistryError> {
        let names = self.store.list_children("").await?;
        let mut clusters = Vec::new();
        for name in names {
            if let Some(c) = self.read_object::<Cluster>(&cluster_key(&name)).await? {
                clusters.push(c);
            }
        }
        Ok(clusters)
    }

    pub async fn get_cluster(&self, name: &str) -> Result<Option<Cluster>, RegistryError> {
        self.read_object(&cluster_key(name)).await
    }

    /// A cluster with the version it was read at.
    pub async fn get_cluster_versioned(
        &self,
        name: &str,
    ) -> Result<Option<(Cluster, Version)>, RegistryError> {
        self.read_object_versioned(&cluster_key(name)).await
    }

    /// Replaces a cluster's spec only if it is still at `read_at`; another
    /// writer's change in between is a [`StoreError::Conflict`], never lost.
    pub async fn replace_cluster(
        &self,
        cluster: &Cluster,
        read_at: &Version,
    ) -> Result<(), RegistryError> {
        let key = cluster_key(cluster.name());
        self.store
            .write_if(
                &key,
                to_yaml(cluster).as_bytes(),
                read_at,
                WriteOptions::default(),
            )
            .await?;
        Ok(())
    }

    /// Writes a new cluster's spec; [`StoreError::AlreadyExists`] when
    /// another writer created it first (atomic on gs:// and memory://).
    pub async fn create_cluster(&self, cluster: &Cluster) -> Result<(), RegistryError> {
        let key = cluster_key(cluster.name());
        let options = WriteOptions {
            create_only: true,
            ..WriteOptions::default()
        };
        self.store
            .write(&key, to_yaml(cluster).as_bytes(), options)
            .await?;
        Ok(())
    }

    /// Writes a cluster's spec (creates or replaces).
    pub async fn put_cluster(&self, cluster: &Cluster) -> Result<(), RegistryError> {
        let key = cluster_key(cluster.name());
        self.store
            .write(&key, to_yaml(cluster).as_bytes(), WriteOptions::default())
            .await?;
        Ok(())
    }

    pub async fn list_instance_groups(
        &self,
        cluster: &str,
    ) -> Result<Vec<InstanceGroup>, RegistryError> {
        let prefix = format!("{cluster}/instancegroup/");
        let names = self.store.list_children(&prefix).await?;
        let mut groups = Vec::new();
        for name in names {
            if let Some(ig) = self
                .read_object::<InstanceGroup>(&instance_group_key(cluster, &name))
                .await?
            {
                groups.push(ig);
            }
        }
        Ok(groups)
    }

    pub async fn get_instance_group(
        &self,
        cluster: &str,
        name: &str,
    ) -> Result<Option<InstanceGroup>, RegistryError> {
        self.read_object(&instance_group_key(cluster, name)).await
    }

    /// An instance group with the version it was read at.
    pub async fn get_instance_group_versioned(
        &self,
        cluster: &str,
        name: &str,
    ) -> Result<Option<(InstanceGroup, Version)>, RegistryError> {
        self.read_object_versioned(&instance_group_key(cluster, name))
            .await
    }

    /// Replaces an instance group only if it is still at `read_at`.
    pub async fn replace_instance_group(
        &self,
        cluster: &str,
        ig: &InstanceGroup,
        read_at: &Version,
    ) -> Result<(), RegistryError> {
        let key = instance_group_key(cluster, ig.name());
        self.store
            .write_if(
                &key,
                to_yaml(ig).as_bytes(),
                read_at,
                WriteOptions::default(),
            )
            .await?;
        Ok(())
    }

    pub async fn put_instance_group(
        &self,
        cluster: &str,
        ig: &InstanceGroup,
    ) -> Result<(), RegistryError> {
        let key = instance_group_key(cluster, ig.name());
        self.store
            .write(&key, to_yaml(ig).as_bytes(), WriteOptions::default())
            .await?;
        Ok(())
    }

    pub async fn delete_instance_group(
        &self,
        cluster: &str,
        name: &str,
    ) -> Result<(), RegistryError> {
        self.store
            .delete(&instance_group_key(cluster, name))
            .await?;
        Ok(())
    }

    /// Stores the additional objects given to `create -f` (any kind kops does
    /// not model), as one multi-document YAML file.
    pub async fn put_additional_objects(
        &self,
        cluster: &str,
        objects: &[serde_json::Value],
    ) -> Result<(), RegistryError> {
        let key = additional_objects_key(cluster);
        self.store
            .write(
                &key,
                to_yaml_stream(objects).as_bytes(),
                WriteOptions::default(),
            )
            .await?;
        Ok(())
    }

    /// Reads the additional objects, if any.
    pub async fn additional_objects(
        &self,
        cluster: &str,
    ) -> Result<Vec<serde_json::Value>, RegistryError> {
        let key = additional_objects_key(cluster);
        let Some(bytes) = self.store.read(&key).await? else {
            return Ok(Vec::new());
        };
        let url = self.store.url_of(&key);
        let objects = kops_api::manifest::parse_objects(&url, &String::from_utf8_lossy(&bytes))
            .map_err(|source| RegistryError::Corrupt {
                url,
                source: Box::new(source),
            })?;
        Ok(objects.iter().map(|o| o.to_json_value()).collect())
    }

    /// Adds an admin SSH public key; returns its id. Adding the same key twice
    /// is harmless.
    pub async fn add_ssh_public_key(
        &self,
        cluster: &str,
        public_key: &str,
    ) -> Result<String, RegistryError> {
        let text = public_key.trim();
        let id = ssh_fingerprint(text)?;
        let key = format!("{}{}", ssh_admin_prefix(cluster), id.replace(':', ""));
        self.store
            .write(&key, text.as_bytes(), WriteOptions::default())
            .await?;
        Ok(id)
    }

    pub async fn list_ssh_public_keys(
        &self,
        cluster: &str,
    ) -> Result<Vec<SshPublicKey>, RegistryError> {
        let prefix = ssh_admin_prefix(cluster);
        let mut keys = Vec::new();
        for name in self.store.list_children(&prefix).await? {
            if let Some(bytes) = self.store.read(&format!("{prefix}{name}")).await? {
                let public_key = String::from_utf8_lossy(&bytes).trim().to_string();
                let id = ssh_fingerprint(&public_key).unwrap_or(name);
                keys.push(SshPublicKey { id, public_key });
            }
        }
        Ok(keys)
    }

    /// Removes an admin SSH public key by id (with or without colons).
    pub async fn delete_ssh_public_key(
        &self,
        cluster: &str,
        id: &str,
    ) -> Result<(), RegistryError> {
        let key = format!("{}{}", ssh_admin_prefix(cluster), id.replace(':', ""));
        self.store.delete(&key).await?;
        Ok(())
    }

    /// The populated spec the last `update --yes` wrote
    /// (`cluster-completed.spec`), if any.
    pub async fn get_completed_spec(&self, name: &str) -> Result<Option<Cluster>, RegistryError> {
        self.read_object(&completed_spec_key(name)).await
    }

    /// Writes the populated spec (`cluster-completed.spec`).
    pub async fn put_completed_spec(&self, cluster: &Cluster) -> Result<(), RegistryError> {
        let key = completed_spec_key(cluster.name());
        self.store
            .write(&key, to_yaml(cluster).as_bytes(), WriteOptions::default())
            .await?;
        Ok(())
    }

    /// Writes a group's node config (the bytes whose hash the group's user
    /// data carries); rewriting the same bytes is harmless.
    pub async fn put_nodeup_config(
        &self,
        cluster: &str,
        role: Role,
        group: &str,
        yaml: &[u8],
    ) -> Result<(), RegistryError> {
        self.store
            .write(
                &nodeup_config_key(cluster, role, group),
                yaml,
                WriteOptions::default(),
            )
            .await?;
        Ok(())
    }

    /// Removes everything the store holds for a cluster.
    pub async fn delete_cluster_state(&self, cluster: &str) -> Result<usize, RegistryError> {
        let keys = self.store.list(&format!("{cluster}/")).await?;
        // The cluster's config goes last, so an interrupted delete still
        // leaves a cluster that `get` shows and a second delete finishes.
        let config = cluster_key(cluster);
        let mut count = 0;
        for key in keys.iter().filter(|k| **k != config) {
            self.store.delete(key).await?;
            count += 1;
        }
        self.store.delete(&config).await?;
        Ok(count + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_matches_ssh_keygen_md5() {
        // The value `ssh-keygen -l -E md5 -f key.pub` prints for this key.
        let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b test@example";
        assert_eq!(
            ssh_fingerprint(key).unwrap(),
            "07:76:b6:4c:75:8d:4d:2c:27:b9:ab:17:55:5c:8d:11"
        );
        assert!(ssh_fingerprint("ssh-rsa !!!").is_err());
        assert!(ssh_fingerprint("").is_err());
        assert!(ssh_fingerprint(
            "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b"
        )
        .is_err());
    }
}
