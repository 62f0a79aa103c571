//! The channel file, the installed-version records and the decision which
//! addons to apply. No IO here.

use std::collections::{BTreeMap, BTreeSet};

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
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ChannelMetadata,
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: ChannelSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChannelMetadata {
    /// The name of addons that do not name themselves.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChannelSpec {
    #[serde(default, deserialize_with = "null_as_default")]
    pub addons: Vec<AddonSpec>,
}

/// One addon of the channel.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddonSpec {
    /// The addon's name; the channel's `metadata.name` when absent.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// The namespace whose annotations record the addon (`kube-system`
    /// when absent).
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub id: String,
    /// The manifest: a URL, or a path relative to the channel file's
    /// directory.
    #[serde(default, deserialize_with = "null_as_default")]
    pub manifest: String,
    /// sha256 (hex) of the manifest.
    #[serde(default, deserialize_with = "null_as_default")]
    pub manifest_hash: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub selector: BTreeMap<String, String>,
    #[serde(default)]
    pub needs_rolling_update: Option<String>,
    #[serde(default)]
    pub prune: Option<PruneSpec>,
    /// A semver range of the Kubernetes versions this entry is for (all
    /// when empty).
    #[serde(default, deserialize_with = "null_as_default")]
    pub kubernetes_version: String,
    /// Informational; kops' records do not carry it, so a new `version`
    /// alone does not apply the addon again (a new `id` or manifest does).
    #[serde(default, deserialize_with = "null_as_default")]
    pub version: String,
    /// Asks for a CA of its own: a `kubernetes.io/tls` Secret `<name>-ca`
    /// and a cert-manager `Issuer` `<name>` signing with it, both in
    /// `kube-system`, made once when missing.
    #[serde(default, rename = "needsPKI", deserialize_with = "null_as_default")]
    pub needs_pki: bool,
}

/// What to delete after applying: objects of these kinds matching the
/// selector that the manifest does not have.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PruneSpec {
    #[serde(default, deserialize_with = "null_as_default")]
    pub kinds: Vec<PruneKind>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneKind {
    #[serde(default, deserialize_with = "null_as_default")]
    pub group: String,
    pub kind: String,
    /// Only these namespaces; all when empty.
    #[serde(default, deserialize_with = "null_as_default")]
    pub namespaces: Vec<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub label_selector: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub field_selector: String,
}

/// kops writes `selector: null` (Go's nil map); a null is the default.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
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
    IdChanged {
        from: String,
        to: String,
    },
    ManifestChanged,
    OlderGeneration(i64),
    /// The addon is current but its CA secret or cert-manager issuer
    /// (`needsPKI`) is missing.
    PkiMissing,
    /// kops' kops-controller DaemonSet runs as kops' applier left it, not
    /// kept off nodes that run the host service (see `kops_api::switch`).
    NotBridged,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::NotInstalled => write!(f, "not installed"),
            Reason::IdChanged { from, to } => write!(f, "id {from:?} → {to:?}"),
            Reason::ManifestChanged => write!(f, "manifest changed"),
            Reason::PkiMissing => write!(f, "its CA and issuer are missing"),
            Reason::NotBridged => write!(f, "kops' DaemonSet may land on host-service nodes"),
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
        Ok(channel.with_default_names())
    }

    /// Reads what is at `location` as kops' applier does: a `kind: Addons`
    /// index (its first document, without an `apiVersion`), or else any
    /// Kubernetes manifest, which is one addon named
    /// `manifest-<first 12 hex digits of sha256(location)>` whose manifest is
    /// the location itself and whose hash is that of the trimmed text. Empty
    /// text is a channel without addons.
    pub fn load(location: &str, bytes: &[u8]) -> Result<Self, ChannelError> {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim();
        let parse_error = |message: String| ChannelError::Parse {
            source_name: location.to_string(),
            message,
        };
        let mut first = None;
        for document in serde_yaml_ng::Deserializer::from_str(text) {
            let value = Value::deserialize(document).map_err(|e| parse_error(e.to_string()))?;
            if !value.is_null() {
                first = Some(value);
                break;
            }
        }
        let Some(first) = first else {
            return Ok(Channel {
                kind: "Addons".into(),
                metadata: ChannelMetadata::default(),
                spec: ChannelSpec::default(),
            });
        };
        let api_version = first.get("apiVersion").and_then(Value::as_str);
        if first.get("kind").and_then(Value::as_str) == Some("Addons")
            && api_version.is_none_or(str::is_empty)
        {
            let channel: Channel =
                serde_json::from_value(first).map_err(|e| parse_error(e.to_string()))?;
            return Ok(channel.with_default_names());
        }
        let name = format!(
            "manifest-{}",
            &hex(&Sha256::digest(location.as_bytes()))[..12]
        );
        Ok(Channel {
            kind: "Addons".into(),
            metadata: ChannelMetadata { name: name.clone() },
            spec: ChannelSpec {
                addons: vec![AddonSpec {
                    name,
                    namespace: None,
                    id: String::new(),
                    manifest: location.to_string(),
                    manifest_hash: hex(&Sha256::digest(text.as_bytes())),
                    selector: BTreeMap::new(),
                    needs_rolling_update: None,
                    prune: None,
                    kubernetes_version: String::new(),
                    version: String::new(),
                    needs_pki: false,
                }],
            },
        })
    }

    fn with_default_names(mut self) -> Self {
        for addon in &mut self.spec.addons {
            if addon.name.is_empty() {
                addon.name = self.metadata.name.clone();
            }
        }
        self
    }

    /// The namespaces whose annotations record this channel's addons.
    pub fn record_namespaces(&self) -> BTreeSet<String> {
        self.spec
            .addons
            .iter()
            .map(|a| a.record_namespace().to_string())
            .collect()
    }
}

/// A Kubernetes version without pre-release or build (kops compares the
/// server's version that way).
pub type Version = (u64, u64, u64);

/// Parses `v1.33.2`, `1.33`, `1.33.0-rc.1+abc` (missing parts are 0, the
/// pre-release and build are dropped).
pub fn parse_version(text: &str) -> Option<Version> {
    let text = text.trim().trim_start_matches(['v', 'V']);
    let core = text.split(['-', '+']).next()?;
    let mut parts = core.split('.');
    let mut next = || -> Option<u64> {
        match parts.next() {
            None => Some(0),
            Some(p) => p.parse().ok(),
        }
    };
    let version = (next()?, next()?, next()?);
    parts.next().is_none().then_some(version)
}

/// Whether `version` is in the semver `range` kops' channels accept
/// (blang/semver ranges: comparisons `>=1.20.0`, `<1.25.0`, `!=1.21.0`,
/// `=1.2.3` or a bare version, joined by spaces (and) and `||` (or);
/// `x` wildcards in bare versions). An error says why the range does not
/// parse.
pub fn version_in_range(range: &str, version: Version) -> Result<bool, String> {
    let mut any = false;
    for alternative in range.split("||") {
        let mut all = true;
        let mut terms = 0;
        for term in alternative.split_whitespace() {
            terms += 1;
            let (op, rest) = ["<=", ">=", "=<", "=>", "!=", "==", "<", ">", "=", "!"]
                .iter()
                .find_map(|op| term.strip_prefix(op).map(|rest| (*op, rest)))
                .unwrap_or(("", term));
            let wildcard = |p: &str| matches!(p, "x" | "X" | "*");
            let parts: Vec<&str> = rest.trim_start_matches(['v', 'V']).split('.').collect();
            let bad =
                || format!("{term:?} in kubernetesVersion {range:?} is not a version comparison");
            if let Some(w) = parts.iter().position(|p| wildcard(p)) {
                // 1.2.x: that minor; 1.x: that major.
                if !op.is_empty() && op != "=" && op != "==" {
                    return Err(bad());
                }
                let fixed: Vec<u64> = parts[..w]
                    .iter()
                    .map(|p| p.parse().map_err(|_| bad()))
                    .collect::<Result<_, _>>()?;
                let have = [version.0, version.1, version.2];
                if fixed.iter().zip(have).any(|(a, b)| *a != b) {
                    all = false;
                }
                continue;
            }
            let bound = parse_version(rest).ok_or_else(bad)?;
            let holds = match op {
                "" | "=" | "==" => version == bound,
                "!=" | "!" => version != bound,
                ">" => version > bound,
                ">=" | "=>" => version >= bound,
                "<" => version < bound,
                "<=" | "=<" => version <= bound,
                _ => return Err(bad()),
            };
            if !holds {
                all = false;
            }
        }
        if terms == 0 {
            return Err(format!(
                "kubernetesVersion {range:?} has an empty alternative"
            ));
        }
        any |= all;
    }
    Ok(any)
}

impl Channel {
    /// The entries for a cluster at `version`, as kops' menu: entries whose
    /// `kubernetesVersion` range excludes it are left out, and of several
    /// entries of one name the last that remains wins (in the place of the
    /// first). Ranges that do not parse are returned, by addon name.
    pub fn for_version(&self, version: Version) -> (Channel, Vec<(String, String)>) {
        let mut errors = Vec::new();
        let mut kept: Vec<AddonSpec> = Vec::new();
        for addon in &self.spec.addons {
            if !addon.kubernetes_version.is_empty() {
                match version_in_range(&addon.kubernetes_version, version) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        errors.push((addon.name.clone(), e));
                        continue;
                    }
                }
            }
            match kept.iter_mut().find(|k| k.name == addon.name) {
                Some(existing) => *existing = addon.clone(),
                None => kept.push(addon.clone()),
            }
        }
        let channel = Channel {
            kind: self.kind.clone(),
            metadata: self.metadata.clone(),
            spec: ChannelSpec { addons: kept },
        };
        (channel, errors)
    }
}

/// The channel locations kops' `kops-channels` static pod applies (its
/// container's arguments after `apply channel` that are not flags):
/// `kops update cluster` writes that pod to
/// `<configBase>/manifests/channels/kops-channels.yaml` with the bootstrap
/// channel first and then every `spec.addons[].manifest`.
pub fn channels_of_pod(source_name: &str, text: &str) -> Result<Vec<String>, ChannelError> {
    let error = |message: String| ChannelError::Parse {
        source_name: source_name.to_string(),
        message,
    };
    let pod: Value = serde_yaml_ng::from_str(text).map_err(|e| error(e.to_string()))?;
    let args = pod
        .pointer("/spec/containers/0/args")
        .and_then(Value::as_array)
        .ok_or_else(|| error("no spec.containers[0].args".into()))?;
    let args: Vec<&str> = args.iter().filter_map(Value::as_str).collect();
    let rest = match args.as_slice() {
        ["apply", "channel", rest @ ..] => rest,
        _ => return Err(error("the container does not run `apply channel`".into())),
    };
    Ok(rest
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(|a| a.to_string())
        .collect())
}

/// Resolves `reference` (an addon's `manifest`) against the channel at
/// `base`, as a URL reference: an absolute URL stays as it is, a path is
/// relative to the channel file's directory (`/…` to the bucket or host
/// root), `.` and `..` segments are resolved.
pub fn resolve(base: &str, reference: &str) -> String {
    if has_scheme(reference) {
        return reference.to_string();
    }
    // A bare absolute path (a local store as kops writes it) resolves as
    // the file it names, and stays bare.
    if base.starts_with('/') {
        let resolved = resolve(&format!("file://{base}"), reference);
        return resolved
            .strip_prefix("file://")
            .map_or(resolved.clone(), str::to_string);
    }
    let Some((scheme, rest)) = base.split_once("://") else {
        return reference.to_string();
    };
    // file:///path has an empty authority.
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let joined = if reference.starts_with('/') {
        reference.to_string()
    } else {
        let dir = path.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
        format!("{dir}/{reference}")
    };
    let mut segments: Vec<&str> = Vec::new();
    let parts: Vec<&str> = joined.split('/').collect();
    for (i, segment) in parts.iter().enumerate() {
        match *segment {
            "." => {}
            ".." => {
                segments.pop();
            }
            "" if i != 0 && i + 1 != parts.len() => {}
            s => segments.push(s),
        }
    }
    let path = segments.join("/");
    let path = if path.starts_with('/') {
        path
    } else {
        format!("/{path}")
    };
    format!("{scheme}://{authority}{path}")
}

/// Whether `s` starts with a URL scheme (`https:`, `s3:`, `file:`, ...).
pub fn has_scheme(s: &str) -> bool {
    match s.split_once(':') {
        Some((scheme, _)) => {
            scheme.len() > 1
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

impl AddonSpec {
    /// The namespace whose annotation records the addon.
    pub fn record_namespace(&self) -> &str {
        self.namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(RECORD_NAMESPACE)
    }

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
    /// data file may end with a newline), so either form matches. A hash
    /// that is not a sha256 (hand-written custom channels use any string as
    /// a version key; kops never checks it) is not checked either.
    pub fn verify(&self, manifest: &[u8]) -> Result<(), ChannelError> {
        let is_sha256 = self.manifest_hash.len() == 64
            && self.manifest_hash.bytes().all(|b| b.is_ascii_hexdigit());
        if !is_sha256 {
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

/// The addons to apply, in channel order, with why. `installed` holds the
/// records by namespace, then addon name.
pub fn plan<'a>(
    channel: &'a Channel,
    installed: &BTreeMap<String, BTreeMap<String, InstalledVersion>>,
) -> Vec<(&'a AddonSpec, Reason)> {
    channel
        .spec
        .addons
        .iter()
        .filter_map(|addon| {
            let record = installed
                .get(addon.record_namespace())
                .and_then(|records| records.get(&addon.name));
            Some((addon, addon.reason(record)?))
        })
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
    selector: null
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
        let installed = BTreeMap::from([(
            RECORD_NAMESPACE.to_string(),
            installed_versions(&annotations),
        )]);
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
    fn resolves_manifests_as_url_references() {
        let base = "s3://bucket/cluster/addons/bootstrap-channel.yaml";
        assert_eq!(
            resolve(base, "coredns.addons.k8s.io/k8s-1.12.yaml"),
            "s3://bucket/cluster/addons/coredns.addons.k8s.io/k8s-1.12.yaml"
        );
        assert_eq!(
            resolve(base, "./x/../y.yaml"),
            "s3://bucket/cluster/addons/y.yaml"
        );
        assert_eq!(resolve(base, "../../other.yaml"), "s3://bucket/other.yaml");
        assert_eq!(resolve(base, "/root.yaml"), "s3://bucket/root.yaml");
        assert_eq!(
            resolve(base, "https://example.com/a.yaml"),
            "https://example.com/a.yaml"
        );
        assert_eq!(
            resolve("file:///srv/addon.yaml", "a/b.yaml"),
            "file:///srv/a/b.yaml"
        );
        assert_eq!(resolve("file:///addon.yaml", "b.yaml"), "file:///b.yaml");
        // A local store as kops writes it: a bare path, resolved bare.
        assert_eq!(
            resolve("/srv/state/c/addons/bootstrap-channel.yaml", "dns/k8s.yaml"),
            "/srv/state/c/addons/dns/k8s.yaml"
        );
        assert!(has_scheme("file:///x") && has_scheme("s3://b") && !has_scheme("dir/x.yaml"));
    }

    #[test]
    fn loads_indexes_plain_manifests_and_nothing() {
        let index = Channel::load(
            "s3://b/addon.yaml",
            b"kind: Addons\nmetadata:\n  name: foo.org\nspec:\n  addons:\n  - manifest: foo/v1.yaml\n    version: 0.0.1\n    namespace: foo\n",
        )
        .unwrap();
        let addon = &index.spec.addons[0];
        assert_eq!(addon.name, "foo.org", "the index's name");
        assert_eq!(addon.record_namespace(), "foo");
        let plain = Channel::load(
            "s3://b/crds.yaml",
            b"\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n\n",
        )
        .unwrap();
        let addon = &plain.spec.addons[0];
        assert!(addon.name.starts_with("manifest-") && addon.name.len() == 21);
        assert_eq!(addon.manifest, "s3://b/crds.yaml");
        assert_eq!(
            addon.manifest_hash,
            hex(&Sha256::digest(
                b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x"
            ))
        );
        assert_eq!(addon.record_namespace(), RECORD_NAMESPACE);
        // An `Addons` kind with an apiVersion is a manifest to kops.
        let odd = Channel::load(
            "s3://b/a.yaml",
            b"apiVersion: v1\nkind: Addons\nmetadata:\n  name: a\n",
        )
        .unwrap();
        assert!(odd.spec.addons[0].name.starts_with("manifest-"));
        assert!(Channel::load("s3://b/e.yaml", b"# nothing\n")
            .unwrap()
            .spec
            .addons
            .is_empty());
        assert!(Channel::load("s3://b/e.yaml", b"kind: [").is_err());
    }

    #[test]
    fn lists_the_channels_of_kops_channels_pod() {
        let pod = "apiVersion: v1
kind: Pod
spec:
  containers:
  - args:
    - apply
    - channel
    - --v=4
    - --yes
    - --interval=1m0s
    - --node-name=$(NODE_NAME)
    - s3://b/c/addons/bootstrap-channel.yaml
    - https://example.org/addon.yaml
    name: kops-channels
";
        assert_eq!(
            channels_of_pod("p", pod).unwrap(),
            [
                "s3://b/c/addons/bootstrap-channel.yaml",
                "https://example.org/addon.yaml"
            ]
        );
        assert!(channels_of_pod("p", "kind: Pod\n").is_err());
    }

    #[test]
    fn filters_entries_by_kubernetes_version() {
        assert_eq!(parse_version("v1.33.2"), Some((1, 33, 2)));
        assert_eq!(parse_version("1.33.0-rc.1+abc"), Some((1, 33, 0)));
        assert_eq!(parse_version("1.33"), Some((1, 33, 0)));
        assert_eq!(parse_version("1.x"), None);
        let v = (1, 33, 0);
        assert!(version_in_range(">=1.20.0", v).unwrap());
        assert!(!version_in_range(">=1.20.0 <1.25.0", v).unwrap());
        assert!(version_in_range("<1.20.0 || >=1.30.0", v).unwrap());
        assert!(version_in_range("1.33.x", v).unwrap());
        assert!(!version_in_range("1.32.x", v).unwrap());
        assert!(version_in_range("!=1.32.0", v).unwrap());
        assert!(version_in_range(">=one", v).is_err());

        let channel = Channel::parse(
            "c",
            "kind: Addons
metadata:
  name: x
spec:
  addons:
  - name: a
    id: old
    manifest: a/old.yaml
    kubernetesVersion: <1.30.0
  - name: b
    manifest: b.yaml
  - name: a
    id: new
    manifest: a/new.yaml
    kubernetesVersion: '>=1.30.0'
  - name: c
    manifest: c.yaml
    kubernetesVersion: '>=x'
",
        )
        .unwrap();
        let (current, errors) = channel.for_version(v);
        let picked: Vec<_> = current
            .spec
            .addons
            .iter()
            .map(|a| format!("{}:{}", a.name, a.id))
            .collect();
        assert_eq!(picked, ["b:", "a:new"]);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].0, "c");
        let (old, _) = channel.for_version((1, 29, 3));
        assert_eq!(old.spec.addons[0].id, "old");
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
        // Not a sha256: a hand-written version key, not checked.
        addon.manifest_hash = "v2".into();
        addon.verify(b"x").unwrap();
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
