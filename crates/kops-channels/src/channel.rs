//! The channel file, the installed-version records and the decision which
//! addons to apply. No IO here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The prefix of the `kube-system` annotations recording installed addons.
pub const ANNOTATION_PREFIX: &str = "addons.k8s.io/";
/// The namespace whose annotations hold the records.
pub const RECORD_NAMESPACE: &str = "kube-system";
/// The generation of the applier's behaviour (1: pruning). An addon recorded
/// by an older generation is applied again; kops uses the same number.
pub const SYSTEM_GENERATION: i64 = 1;

/// A channel file (`kind: Addons`).
#[derive(Debug, Clone, Deserialize)]
pub struct Channel {
    pub kind: String,
    #[serde(default)]
    pub spec: ChannelSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChannelSpec {
    #[serde(default)]
    pub addons: Vec<AddonSpec>,
}

/// One addon of the channel.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddonSpec {
    pub name: String,
    #[serde(default)]
    pub id: String,
    /// The manifest's path, relative to the channel file's directory.
    pub manifest: String,
    /// sha256 (hex) of the manifest.
    #[serde(default)]
    pub manifest_hash: String,
    #[serde(default)]
    pub selector: BTreeMap<String, String>,
    #[serde(default)]
    pub needs_rolling_update: Option<String>,
    #[serde(default)]
    pub prune: Option<PruneSpec>,
}

/// What to delete after applying: objects of these kinds matching the
/// selector that the manifest does not have.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PruneSpec {
    #[serde(default)]
    pub kinds: Vec<PruneKind>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneKind {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    /// Only these namespaces; all when empty.
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub label_selector: String,
    #[serde(default)]
    pub field_selector: String,
}

/// What the cluster records for an installed addon (kops' `ChannelVersion`,
/// same JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstalledVersion {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub manifest_hash: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub system_generation: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl InstalledVersion {
    /// The annotation value.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Why an addon is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    NotInstalled,
    IdChanged { from: String, to: String },
    ManifestChanged,
    OlderGeneration(i64),
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::NotInstalled => write!(f, "not installed"),
            Reason::IdChanged { from, to } => write!(f, "id {from:?} → {to:?}"),
            Reason::ManifestChanged => write!(f, "manifest changed"),
            Reason::OlderGeneration(g) => {
                write!(f, "installed by an older applier (generation {g})")
            }
        }
    }
}

/// A channel that cannot be read or a manifest that cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("{source_name}: not a channel: {message}")]
    Parse {
        source_name: String,
        message: String,
    },
    #[error("{source_name}: kind is `{kind}`, a channel is `kind: Addons`")]
    Kind { source_name: String, kind: String },
    #[error(
        "addon {addon}: the manifest's sha256 is {actual}, the channel says {expected}\nhint: the state store is being written (retry), or run `kops update cluster --yes` again"
    )]
    HashMismatch {
        addon: String,
        expected: String,
        actual: String,
    },
    #[error("addon {addon}, document {document}: {message}")]
    Object {
        addon: String,
        document: usize,
        message: String,
    },
}

impl Channel {
    /// Parses a channel file.
    pub fn parse(source_name: &str, text: &str) -> Result<Self, ChannelError> {
        let channel: Channel = serde_yaml_ng::from_str(text).map_err(|e| ChannelError::Parse {
            source_name: source_name.to_string(),
            message: e.to_string(),
        })?;
        if channel.kind != "Addons" {
            return Err(ChannelError::Kind {
                source_name: source_name.to_string(),
                kind: channel.kind,
            });
        }
        Ok(channel)
    }
}

impl AddonSpec {
    /// The record this addon leaves once applied from `channel_url`.
    pub fn version(&self, channel_url: &str) -> InstalledVersion {
        InstalledVersion {
            channel: Some(channel_url.to_string()),
            id: self.id.clone(),
            manifest_hash: self.manifest_hash.clone(),
            system_generation: SYSTEM_GENERATION,
        }
    }

    /// Why the addon must be applied over `installed`, or `None` when the
    /// cluster has it already (kops' rules: a different id or manifest hash,
    /// or an older applier generation; a newer generation is left alone).
    pub fn reason(&self, installed: Option<&InstalledVersion>) -> Option<Reason> {
        let Some(installed) = installed else {
            return Some(Reason::NotInstalled);
        };
        if installed.id != self.id {
            return Some(Reason::IdChanged {
                from: installed.id.clone(),
                to: self.id.clone(),
            });
        }
        if installed.manifest_hash != self.manifest_hash {
            return Some(Reason::ManifestChanged);
        }
        if installed.system_generation < SYSTEM_GENERATION {
            return Some(Reason::OlderGeneration(installed.system_generation));
        }
        None
    }

    /// Checks `manifest` against the channel's hash (when it has one). kops
    /// hashes the manifest without surrounding white space (and a Terraform
    /// data file may end with a newline), so either form matches.
    pub fn verify(&self, manifest: &[u8]) -> Result<(), ChannelError> {
        if self.manifest_hash.is_empty() {
            return Ok(());
        }
        let actual = hex(&Sha256::digest(manifest));
        let trimmed = hex(&Sha256::digest(manifest.trim_ascii()));
        if actual != self.manifest_hash && trimmed != self.manifest_hash {
            return Err(ChannelError::HashMismatch {
                addon: self.name.clone(),
                expected: self.manifest_hash.clone(),
                actual,
            });
        }
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The installed versions recorded in the record namespace's annotations
/// (keys without the prefix). Records that do not parse are left out, so
/// their addons are applied again.
pub fn installed_versions(
    annotations: &BTreeMap<String, String>,
) -> BTreeMap<String, InstalledVersion> {
    annotations
        .iter()
        .filter_map(|(key, value)| {
            let name = key.strip_prefix(ANNOTATION_PREFIX)?;
            let version = serde_json::from_str(value).ok()?;
            Some((name.to_string(), version))
        })
        .collect()
}

/// The addons to apply, in channel order, with why.
pub fn plan<'a>(
    channel: &'a Channel,
    installed: &BTreeMap<String, InstalledVersion>,
) -> Vec<(&'a AddonSpec, Reason)> {
    channel
        .spec
        .addons
        .iter()
        .filter_map(|addon| Some((addon, addon.reason(installed.get(&addon.name))?)))
        .collect()
}

/// One object of a manifest, with what the API needs to find it.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestObject {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
    pub object: Value,
}

impl ManifestObject {
    /// Order of application: definitions before what uses them.
    fn rank(&self) -> u8 {
        match (self.group.as_str(), self.kind.as_str()) {
            ("apiextensions.k8s.io", "CustomResourceDefinition") => 0,
            ("", "Namespace") => 1,
            _ => 2,
        }
    }
}

/// The objects of `addon`'s manifest, in the order to apply them (custom
/// resource definitions, then namespaces, then the rest as written). Empty
/// documents are skipped; an empty manifest has no objects.
pub fn manifest_objects(addon: &str, text: &str) -> Result<Vec<ManifestObject>, ChannelError> {
    let mut out = Vec::new();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let error = |message: String| ChannelError::Object {
            addon: addon.to_string(),
            document: index + 1,
            message,
        };
        let value = Value::deserialize(document).map_err(|e| error(e.to_string()))?;
        if value.is_null() {
            continue;
        }
        let field = |path: &[&str]| {
            let mut v = &value;
            for key in path {
                v = v.get(key)?;
            }
            v.as_str().map(str::to_string)
        };
        let api_version = field(&["apiVersion"]).ok_or_else(|| error("no apiVersion".into()))?;
        let kind = field(&["kind"]).ok_or_else(|| error("no kind".into()))?;
        let name = field(&["metadata", "name"])
            .ok_or_else(|| error(format!("{kind} without metadata.name")))?;
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api_version.clone()),
        };
        out.push(ManifestObject {
            group,
            version,
            kind,
            name,
            namespace: field(&["metadata", "namespace"]),
            object: value,
        });
    }
    out.sort_by_key(ManifestObject::rank);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHANNEL: &str = "kind: Addons
metadata:
  name: bootstrap
spec:
  addons:
  - id: k8s-1.12
    manifest: coredns.addons.k8s.io/k8s-1.12.yaml
    manifestHash: aaaa
    name: coredns.addons.k8s.io
    selector:
      k8s-addon: coredns.addons.k8s.io
  - manifest: limit-range.addons.k8s.io/v1.5.0.yaml
    manifestHash: bbbb
    name: limit-range.addons.k8s.io
    prune:
      kinds:
      - kind: ConfigMap
        labelSelector: addon.kops.k8s.io/name=limit-range.addons.k8s.io,app.kubernetes.io/managed-by=kops
        namespaces:
        - kube-system
";

    #[test]
    fn parses_kops_channel() {
        let channel = Channel::parse("c.yaml", CHANNEL).unwrap();
        assert_eq!(channel.spec.addons.len(), 2);
        let prune = channel.spec.addons[1].prune.as_ref().unwrap();
        assert_eq!(prune.kinds[0].kind, "ConfigMap");
        assert_eq!(prune.kinds[0].group, "");
        assert_eq!(prune.kinds[0].namespaces, ["kube-system"]);
        let err = Channel::parse("c.yaml", "kind: Cluster\n").unwrap_err();
        assert!(err.to_string().contains("kind: Addons"), "{err}");
    }

    #[test]
    fn record_is_kops_json() {
        let channel = Channel::parse("c.yaml", CHANNEL).unwrap();
        let v = channel.spec.addons[0].version("s3://b/c/addons/bootstrap-channel.yaml");
        assert_eq!(
            v.encode(),
            r#"{"channel":"s3://b/c/addons/bootstrap-channel.yaml","id":"k8s-1.12","manifestHash":"aaaa","systemGeneration":1}"#
        );
        let no_id = channel.spec.addons[1].version("x");
        assert!(!no_id.encode().contains("\"id\""));
    }

    #[test]
    fn plans_what_changed_only() {
        let channel = Channel::parse("c.yaml", CHANNEL).unwrap();
        let mut annotations = BTreeMap::new();
        annotations.insert(
            "addons.k8s.io/coredns.addons.k8s.io".to_string(),
            r#"{"channel":"x","id":"k8s-1.12","manifestHash":"aaaa","systemGeneration":1}"#
                .to_string(),
        );
        annotations.insert("other/annotation".into(), "x".into());
        let installed = installed_versions(&annotations);
        let planned = plan(&channel, &installed);
        assert_eq!(planned.len(), 1);
        assert_eq!(planned[0].0.name, "limit-range.addons.k8s.io");
        assert_eq!(planned[0].1, Reason::NotInstalled);

        let older = InstalledVersion {
            id: "k8s-1.12".into(),
            manifest_hash: "aaaa".into(),
            ..Default::default()
        };
        assert_eq!(
            channel.spec.addons[0].reason(Some(&older)),
            Some(Reason::OlderGeneration(0))
        );
        let newer = InstalledVersion {
            system_generation: 2,
            ..older.clone()
        };
        assert_eq!(channel.spec.addons[0].reason(Some(&newer)), None);
        let moved = InstalledVersion {
            id: "k8s-1.9".into(),
            ..newer
        };
        assert!(matches!(
            channel.spec.addons[0].reason(Some(&moved)),
            Some(Reason::IdChanged { .. })
        ));
    }

    #[test]
    fn verifies_the_manifest_hash() {
        let mut addon = Channel::parse("c.yaml", CHANNEL).unwrap().spec.addons[0].clone();
        // sha256 of the empty string
        addon.manifest_hash =
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".into();
        addon.verify(b"").unwrap();
        addon.verify(b"\n").unwrap();
        let err = addon.verify(b"x").unwrap_err().to_string();
        assert!(
            err.contains("coredns.addons.k8s.io") && err.contains("hint:"),
            "{err}"
        );
    }

    #[test]
    fn objects_in_apply_order() {
        let text = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  namespace: kube-system
---

---
apiVersion: v1
kind: Namespace
metadata:
  name: n
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.com
";
        let objects = manifest_objects("a", text).unwrap();
        let kinds: Vec<_> = objects.iter().map(|o| o.kind.as_str()).collect();
        assert_eq!(
            kinds,
            ["CustomResourceDefinition", "Namespace", "Deployment"]
        );
        assert_eq!(objects[2].group, "apps");
        assert_eq!(objects[2].namespace.as_deref(), Some("kube-system"));
        assert_eq!(objects[1].group, "");
        assert!(manifest_objects("a", "").unwrap().is_empty());
        let err = manifest_objects("a", "kind: Pod\nmetadata:\n  name: p\n").unwrap_err();
        assert!(err.to_string().contains("no apiVersion"), "{err}");
    }
}
