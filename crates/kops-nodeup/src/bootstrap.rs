//! What an instance runs at first boot: the boot config (kops'
//! `BootConfig`, written to `/opt/kops/conf/kube_env.yaml`) and the user-data
//! script that downloads `nodeup`, checks it, writes the boot config and
//! runs nodeup.
//!
//! The script is kops-rs' own, in the shape of kops' (per-architecture mirror
//! lists and hashes, a download loop over the mirrors with retries, hash
//! check before anything runs). Where kops-rs' nodeup is downloaded from:
//! `spec.assets.fileRepository` first (when set), then the project's release
//! location. Its hash comes from [`KNOWN_NODEUP_HASHES`] (the published
//! kops-rs releases); a build with no published release has none, and the
//! script then checks the binary against the `nodeup.sha256` file published
//! beside it on the same mirror, and says so in its output.

use kops_api::{Cluster, InstanceGroup, Role};
use serde::{Deserialize, Serialize};

use crate::assets::{self, Arch};
use crate::config::{self, ConfigError};

/// The kops-rs version whose nodeup the user data downloads.
pub const NODEUP_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where kops-rs releases are published (the workspace's repository).
pub const RELEASE_BASE: &str = env!("CARGO_PKG_REPOSITORY");

/// sha256 of published nodeup binaries: `(version, arch, sha256)`.
/// Empty until kops-rs publishes a release.
pub const KNOWN_NODEUP_HASHES: &[(&str, &str, &str)] = &[];

/// Where the boot config is written on the instance.
pub const BOOT_CONFIG_PATH: &str = "/opt/kops/conf/kube_env.yaml";

/// kops' `BootConfig` (`kube_env.yaml`): what nodeup needs to find the rest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BootConfig {
    #[serde(rename = "CloudProvider", default)]
    pub cloud_provider: String,
    #[serde(rename = "ClusterName", default)]
    pub cluster_name: String,
    /// The cluster's directory in the state store.
    #[serde(
        rename = "ConfigBase",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub config_base: Option<String>,
    /// Where workers get their config and certificates instead of the
    /// state store: kops-controller (kops' `ConfigServer`).
    #[serde(
        rename = "ConfigServer",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub config_server: Option<ConfigServer>,
    #[serde(rename = "InstanceGroupName", default)]
    pub instance_group_name: String,
    /// `ControlPlane`, `Node` or `APIServer`.
    #[serde(rename = "InstanceGroupRole", default)]
    pub instance_group_role: String,
    /// base64 sha256 of the stored node config.
    #[serde(rename = "NodeupConfigHash", default)]
    pub nodeup_config_hash: String,
    #[serde(flatten)]
    pub extra: config::Settings,
}

/// kops' `ConfigServerOptions`: the kops-controllers a worker asks, and the
/// CA certificates it trusts them with (the cluster's `kubernetes-ca`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigServer {
    #[serde(rename = "CACertificates", default)]
    pub ca_certificates: String,
    #[serde(rename = "servers", default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    /// The name to verify the servers' certificate against, when it is not
    /// the URL's host.
    #[serde(
        rename = "tlsServerName",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub tls_server_name: String,
}

/// The kops-controller URL workers use: `https://kops-controller.internal.<cluster>:3988/`.
pub fn kops_controller_url(cluster: &str) -> String {
    format!("https://kops-controller.internal.{cluster}:3988/")
}

impl BootConfig {
    /// The role as kops-rs knows it.
    pub fn role(&self) -> Option<Role> {
        match self.instance_group_role.as_str() {
            "ControlPlane" | "Master" => Some(Role::ControlPlane),
            "Node" => Some(Role::Node),
            "APIServer" => Some(Role::ApiServer),
            "Bastion" => Some(Role::Bastion),
            _ => None,
        }
    }

    pub fn to_yaml(&self) -> String {
        serde_yaml_ng::to_string(self).unwrap_or_default()
    }

    pub fn parse(text: &str) -> Result<BootConfig, String> {
        serde_yaml_ng::from_str(text).map_err(|e| e.to_string())
    }
}

/// kops' spelling of a role in the boot config.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::ControlPlane => "ControlPlane",
        Role::Node => "Node",
        Role::ApiServer => "APIServer",
        Role::Bastion => "Bastion",
    }
}

/// The nodeup binary for one architecture: mirrors in order and, when
/// known, its sha256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeupBinary {
    pub arch: Arch,
    pub urls: Vec<String>,
    pub sha256: Option<String>,
}

/// Where nodes download nodeup from, decided by `update cluster` (kops-ops:
/// kops' environment variables, or the binaries shipped beside `kops` and
/// uploaded to the state store) and handed to the renderer, which reads no
/// environment. Each binary is pinned by its sha256.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeupSources {
    /// One entry per architecture nodeup is available for.
    pub binaries: Vec<NodeupBinary>,
    /// The state-store folder (`s3://bucket/.../<cluster>/kops-rs/nodeup/`)
    /// the uploaded binaries live under, when they live in the state store:
    /// the node role gets read access to exactly this prefix.
    pub state_store_prefix: Option<String>,
}

impl NodeupSources {
    /// The binary for `arch`, if one is available.
    pub fn binary(&self, arch: Arch) -> Option<&NodeupBinary> {
        self.binaries.iter().find(|b| b.arch == arch)
    }
}

/// kops' environment variables that say where nodeup is, read by the caller
/// (`update`, `render`) and passed in. Empty values count as unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeupEnv {
    /// `KOPS_BASE_URL`: nodeup is at `<base>/linux/<arch>/nodeup`.
    pub kops_base_url: Option<String>,
    /// `NODEUP_URL_AMD64` / `NODEUP_URL_ARM64`: nodeup for one architecture.
    pub url_amd64: Option<String>,
    pub url_arm64: Option<String>,
    /// `NODEUP_HASH_AMD64` / `NODEUP_HASH_ARM64`: its sha256 (hex).
    pub hash_amd64: Option<String>,
    pub hash_arm64: Option<String>,
}

/// Where nodeup comes from for one architecture according to [`NodeupEnv`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvNodeup {
    pub url: String,
    /// The variable the URL came from, for messages.
    pub url_variable: String,
    /// The pinned sha256; `None`: read it from `<url>.sha256`, as kops does.
    pub sha256: Option<String>,
}

impl NodeupEnv {
    /// The variables, from a look-up such as `std::env::var`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        NodeupEnv {
            kops_base_url: get("KOPS_BASE_URL"),
            url_amd64: get("NODEUP_URL_AMD64"),
            url_arm64: get("NODEUP_URL_ARM64"),
            hash_amd64: get("NODEUP_HASH_AMD64"),
            hash_arm64: get("NODEUP_HASH_ARM64"),
        }
    }

    /// The name of an architecture's variable (`NODEUP_URL_AMD64`, ...).
    pub fn variable(kind: &str, arch: Arch) -> String {
        format!("NODEUP_{kind}_{}", arch.as_str().to_ascii_uppercase())
    }

    /// nodeup for `arch`: `NODEUP_URL_<ARCH>` first, then `KOPS_BASE_URL`
    /// (kops joins `linux/<arch>/nodeup` to the base's path); the hash from
    /// `NODEUP_HASH_<ARCH>` when set. `None` when neither variable is set.
    pub fn nodeup(&self, arch: Arch) -> Option<EnvNodeup> {
        let (url, hash) = match arch {
            Arch::Amd64 => (&self.url_amd64, &self.hash_amd64),
            Arch::Arm64 => (&self.url_arm64, &self.hash_arm64),
        };
        let (url, url_variable) = match (url, &self.kops_base_url) {
            (Some(url), _) => (url.clone(), Self::variable("URL", arch)),
            (None, Some(base)) => (
                format!(
                    "{}/linux/{}/nodeup",
                    base.trim_end_matches('/'),
                    arch.as_str()
                ),
                "KOPS_BASE_URL".to_string(),
            ),
            (None, None) => return None,
        };
        Some(EnvNodeup {
            url,
            url_variable,
            sha256: hash.as_ref().map(|h| h.to_ascii_lowercase()),
        })
    }
}

/// Whether `text` is a sha256 as nodes compare it (64 hex digits).
pub fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The sha256 in a `.sha256` file: its first word (kops' files hold only
/// the hash; `sha256sum` output adds the file name).
pub fn parse_sha256_file(text: &str) -> Option<String> {
    let word = text.split_whitespace().next()?;
    is_sha256(word).then(|| word.to_ascii_lowercase())
}

/// The sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Where `update` uploads a nodeup shipped beside `kops`, relative to the
/// cluster's folder in the state store:
/// `kops-rs/nodeup/<version>/<sha256>/linux/<arch>/nodeup`. Its own folder
/// (kops keeps nothing under `kops-rs/`), versioned, and content-addressed
/// so a rebuilt binary of the same version never replaces the one older
/// launch templates pin.
pub fn nodeup_store_path(version: &str, sha256: &str, arch: Arch) -> String {
    format!(
        "{NODEUP_STORE_DIR}/{version}/{sha256}/linux/{}/nodeup",
        arch.as_str()
    )
}

/// The folder of uploaded nodeup binaries inside the cluster's folder; the
/// node role may read this prefix and nothing else of the state store.
pub const NODEUP_STORE_DIR: &str = "kops-rs/nodeup";

/// The architectures a group's instances run: arm64 when its image names
/// arm64 (or aarch64), else those of its machine types (the group's and
/// its mixed-instances policy's). Bastions and Karpenter-managed groups
/// run no nodeup kops-rs pins, and need none.
pub fn group_architectures(group: &InstanceGroup) -> Vec<Arch> {
    if matches!(group.role(), Some(Role::Bastion) | None)
        || group.spec.manager.as_deref() == Some("Karpenter")
    {
        return Vec::new();
    }
    let image = group.spec.image.as_deref().unwrap_or_default();
    if image.contains("arm64") || image.contains("aarch64") {
        return vec![Arch::Arm64];
    }
    let mut types: Vec<&str> = group.spec.machine_type.iter().map(String::as_str).collect();
    if let Some(policy) = &group.spec.mixed_instances_policy {
        types.extend(policy.instances.iter().flatten().map(String::as_str));
    }
    let mut arches: Vec<Arch> = types
        .into_iter()
        .flat_map(|t| t.split(','))
        .map(
            |t| match kops_api::new_cluster::machine_architecture(t.trim()) {
                kops_api::new_cluster::Architecture::Arm64 => Arch::Arm64,
                kops_api::new_cluster::Architecture::Amd64 => Arch::Amd64,
            },
        )
        .collect();
    if arches.is_empty() {
        arches.push(Arch::Amd64);
    }
    arches.sort();
    arches.dedup();
    arches
}

/// Where nodes download nodeup from, per architecture, when `update` gave
/// no [`NodeupSources`] (tests, previews): the file repository, then the
/// release location.
pub fn nodeup_binaries(cluster: &Cluster) -> Result<Vec<NodeupBinary>, assets::AssetError> {
    let repo = assets::file_repository(cluster)?;
    let mut out = Vec::new();
    for arch in Arch::ALL {
        let a = arch.as_str();
        let mut urls = Vec::new();
        if let Some(repo) = repo {
            urls.push(format!(
                "{}/kops-rs/{NODEUP_VERSION}/linux/{a}/nodeup",
                repo.trim_end_matches('/')
            ));
        }
        urls.push(format!(
            "{}/releases/download/v{NODEUP_VERSION}/nodeup-linux-{a}",
            RELEASE_BASE.trim_end_matches('/')
        ));
        let sha256 = KNOWN_NODEUP_HASHES
            .iter()
            .find(|(v, ar, _)| *v == NODEUP_VERSION && *ar == a)
            .map(|(_, _, h)| h.to_string());
        out.push(NodeupBinary { arch, urls, sha256 });
    }
    Ok(out)
}

/// The region of the cluster (from its first subnet's zone), for
/// `AWS_REGION` on the instance.
fn region(cluster: &Cluster) -> Option<String> {
    cluster
        .spec
        .subnets
        .iter()
        .flatten()
        .filter_map(|s| s.zone.as_deref())
        .find_map(kops_api::new_cluster::aws_zone_region)
}

/// The boot config of a group whose node config hashes to `hash`.
pub fn boot_config(
    cluster: &Cluster,
    group: &InstanceGroup,
    role: Role,
    config_base: &str,
    hash: &str,
) -> BootConfig {
    BootConfig {
        cloud_provider: cluster
            .spec
            .cloud_provider
            .clone()
            .unwrap_or_else(|| "aws".into()),
        cluster_name: cluster.name().to_string(),
        config_base: Some(config_base.trim_end_matches('/').to_string()),
        config_server: None,
        instance_group_name: group.name().to_string(),
        instance_group_role: role_name(role).to_string(),
        nodeup_config_hash: hash.to_string(),
        extra: Default::default(),
    }
}

/// The user data of a group's instances: the bootstrap script, or, for a
/// bastion (which runs no nodeup), a script that only says so.
pub fn user_data(
    cluster: &Cluster,
    group: &InstanceGroup,
    config_base: &str,
) -> Result<String, ConfigError> {
    user_data_with(cluster, group, config_base, &config::NodeInputs::default())
}

/// [`user_data`] with the cluster's keysets and bootstrap choices: when
/// workers bootstrap through kops-controller (`inputs.config_server`), a
/// worker's boot config names kops-controller and carries the cluster CA it
/// trusts it with, and no state store (workers may not read it).
pub fn user_data_with(
    cluster: &Cluster,
    group: &InstanceGroup,
    config_base: &str,
    inputs: &config::NodeInputs,
) -> Result<String, ConfigError> {
    let additional = group
        .spec
        .additional_user_data
        .as_deref()
        .unwrap_or_default();
    let Some(rendered) = config::rendered_with_inputs(cluster, group, config_base, inputs)? else {
        if !additional.is_empty() {
            return Ok(multipart(None, additional));
        }
        return Ok(format!(
            "#!/bin/bash\n# kops-rs: bastion `{}` of cluster `{}` runs no node bootstrap.\n",
            group.name(),
            cluster.name()
        ));
    };
    let mut boot = boot_config(cluster, group, rendered.role, config_base, &rendered.hash);
    if inputs.config_server && rendered.role == Role::Node {
        boot.config_base = None;
        boot.config_server = Some(ConfigServer {
            ca_certificates: inputs
                .keysets
                .get("kubernetes-ca")
                .map(|k| k.certificates.clone())
                .unwrap_or_default(),
            servers: vec![kops_controller_url(cluster.name())],
            tls_server_name: String::new(),
        });
    }
    let binaries = match &inputs.nodeup {
        Some(sources) => sources.binaries.clone(),
        None => nodeup_binaries(cluster).map_err(|source| ConfigError::Asset {
            group: group.name().to_string(),
            source: Box::new(source),
        })?,
    };
    let script = render_script(&binaries, region(cluster).as_deref(), &boot);
    if additional.is_empty() {
        Ok(script)
    } else {
        Ok(multipart(Some(&script), additional))
    }
}

/// The MIME multipart document cloud-init reads when a group adds its own
/// user data (`spec.additionalUserData`): the bootstrap script first (as
/// `nodeup.sh`), then each addition in order, as kops lays it out.
pub fn multipart(
    script: Option<&str>,
    additional: &[kops_api::instance_group::UserData],
) -> String {
    const BOUNDARY: &str = "MIMEBOUNDARY";
    let mut out =
        format!("Content-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\nMIME-Version: 1.0\n\n");
    let mut part = |name: &str, kind: &str, content: &str| {
        out.push_str(&format!(
            "--{BOUNDARY}\nContent-Disposition: attachment; filename=\"{name}\"\n\
             Content-Transfer-Encoding: 7bit\nContent-Type: {kind}\nMime-Version: 1.0\n\n{content}"
        ));
        if !content.ends_with('\n') {
            out.push('\n');
        }
        out.push('\n');
    };
    if let Some(script) = script {
        part("nodeup.sh", "text/x-shellscript", script);
    }
    for extra in additional {
        part(&extra.name, &extra.kind, &extra.content);
    }
    out.push_str(&format!("--{BOUNDARY}--\n"));
    out
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Renders the bootstrap script.
pub fn render_script(binaries: &[NodeupBinary], region: Option<&str>, boot: &BootConfig) -> String {
    let mut s = String::new();
    s.push_str("#!/bin/bash\n");
    s.push_str("# Node bootstrap written by kops-rs: fetch nodeup, check its sha256, write the\n");
    s.push_str(
        "# boot config, run nodeup (which reads this group's node config from the state store).\n",
    );
    s.push_str("set -o errexit -o nounset -o pipefail\n\n");
    // Every architecture gets its two variables; an empty URL (no nodeup
    // published for it) makes the script stop with a message.
    for arch in Arch::ALL {
        let a = arch.as_str().to_ascii_uppercase();
        let b = binaries.iter().find(|b| b.arch == arch);
        s.push_str(&format!(
            "NODEUP_URL_{a}={}\n",
            shell_quote(&b.map(|b| b.urls.join(",")).unwrap_or_default())
        ));
        s.push_str(&format!(
            "NODEUP_HASH_{a}={}\n",
            shell_quote(b.and_then(|b| b.sha256.as_deref()).unwrap_or(""))
        ));
    }
    if let Some(region) = region {
        s.push_str(&format!("\nexport AWS_REGION={}\n", shell_quote(region)));
    }
    s.push_str(SCRIPT_BODY);
    s.push_str("cat > \"${INSTALL_DIR}/conf/kube_env.yaml\" <<'__KOPS_RS_BOOT_CONFIG'\n");
    s.push_str(&boot.to_yaml());
    s.push_str("__KOPS_RS_BOOT_CONFIG\n\n");
    s.push_str("install-nodeup\n");
    s.push_str("log \"running nodeup\"\n");
    s.push_str("\"${INSTALL_DIR}/bin/nodeup\" --conf=\"${INSTALL_DIR}/conf/kube_env.yaml\"\n");
    s.push_str("log \"node bootstrap done\"\n");
    s
}

const SCRIPT_BODY: &str = r#"
INSTALL_DIR=/opt/kops
mkdir -p "${INSTALL_DIR}/bin" "${INSTALL_DIR}/conf"

log() { echo "== kops-rs bootstrap: $* ==" | tee -a /dev/console >&2 || true; }

sha256-of() { sha256sum "$1" | cut -d' ' -f1; }

# fetch URL FILE: one URL, curl's own retries for transient errors. An s3://
# URL (nodeup uploaded to the state store) is read with the instance role's
# credentials from the metadata service, signed with SigV4 by curl itself.
fetch() {
  case "$1" in
    s3://*) fetch-s3 "$1" "$2" ;;
    *) curl -fsSL --connect-timeout 20 --retry 6 --retry-delay 10 -o "$2" "$1" ;;
  esac
}

imds-get() {
  curl -s -f --noproxy '*' --connect-timeout 2 --max-time 5 \
    -H "X-aws-ec2-metadata-token: $1" "http://169.254.169.254/latest/$2"
}

json-field() {
  local pattern="\"$2\"[[:space:]]*:[[:space:]]*\"([^\"]+)\""
  [[ $1 =~ ${pattern} ]] && printf '%s' "${BASH_REMATCH[1]}"
}

fetch-s3() {
  local region="${AWS_REGION:-us-east-1}" token profile creds id secret session
  token="$(curl -s -f -X PUT --noproxy '*' --connect-timeout 2 --max-time 5 \
    -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token)" || return 1
  profile="$(imds-get "${token}" meta-data/iam/security-credentials/ | head -n 1)" || return 1
  creds="$(imds-get "${token}" "meta-data/iam/security-credentials/${profile}")" || return 1
  id="$(json-field "${creds}" AccessKeyId)" || return 1
  secret="$(json-field "${creds}" SecretAccessKey)" || return 1
  session="$(json-field "${creds}" Token)" || return 1
  # The credentials go through stdin, never the command line.
  printf 'user "%s:%s"\nheader "x-amz-security-token: %s"\n' "${id}" "${secret}" "${session}" |
    curl -fsSL --connect-timeout 20 --retry 6 --retry-delay 10 --config - \
      --aws-sigv4 "aws:amz:${region}:s3" -o "$2" "https://s3.${region}.amazonaws.com/${1#s3://}"
}

# download-verified FILE HASH URLS: tries each mirror in turn until one gives a
# file with the expected sha256; sleeps and starts over when all fail. With no
# pinned HASH, the hash is read from the `.sha256` file next to the binary.
download-verified() {
  local file="$1" hash="$2" urls url expected
  IFS=, read -r -a urls <<< "$3"
  if [[ -f "${file}" && -n "${hash}" && "$(sha256-of "${file}")" == "${hash}" ]]; then
    return 0
  fi
  while true; do
    for url in "${urls[@]}"; do
      rm -f "${file}.part" "${file}.sha256"
      expected="${hash}"
      if [[ -z "${expected}" ]]; then
        log "no pinned sha256 for nodeup; reading ${url}.sha256"
        if ! fetch "${url}.sha256" "${file}.sha256"; then
          log "cannot download ${url}.sha256"
          continue
        fi
        expected="$(cut -d' ' -f1 < "${file}.sha256")"
      fi
      if ! fetch "${url}" "${file}.part"; then
        log "cannot download ${url}"
        continue
      fi
      if [[ "$(sha256-of "${file}.part")" != "${expected}" ]]; then
        log "${url} does not have sha256 ${expected}; not using it"
        continue
      fi
      mv -f "${file}.part" "${file}"
      log "downloaded ${url} (sha256 ${expected})"
      return 0
    done
    log "every mirror failed; retrying in 60s"
    sleep 60
  done
}

install-nodeup() {
  local url hash
  case "$(uname -m)" in
    x86_64|amd64) url="${NODEUP_URL_AMD64}"; hash="${NODEUP_HASH_AMD64}" ;;
    aarch64|arm64) url="${NODEUP_URL_ARM64}"; hash="${NODEUP_HASH_ARM64}" ;;
    *) log "unsupported architecture $(uname -m)"; exit 1 ;;
  esac
  if [[ -z "${url}" ]]; then
    log "no nodeup was published for $(uname -m) by kops update cluster; not booting"
    exit 1
  fi
  download-verified "${INSTALL_DIR}/bin/nodeup" "${hash}" "${url}"
  chmod 0755 "${INSTALL_DIR}/bin/nodeup"
}

/bin/systemd-machine-id-setup || log "could not set up the machine id"
log "writing the boot config"
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> NodeupEnv {
        NodeupEnv::from_lookup(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn nodeup_from_kops_environment_variables() {
        // Nothing set (or empty): no override.
        assert_eq!(env(&[]).nodeup(Arch::Amd64), None);
        assert_eq!(env(&[("KOPS_BASE_URL", " ")]).nodeup(Arch::Amd64), None);
        // KOPS_BASE_URL: `<base>/linux/<arch>/nodeup`, with or without a
        // trailing slash; the hash is read later from `<url>.sha256`.
        let base = env(&[("KOPS_BASE_URL", "https://example.com/kops/1.2.3/")]);
        assert_eq!(
            base.nodeup(Arch::Arm64),
            Some(EnvNodeup {
                url: "https://example.com/kops/1.2.3/linux/arm64/nodeup".into(),
                url_variable: "KOPS_BASE_URL".into(),
                sha256: None,
            })
        );
        assert_eq!(
            env(&[("KOPS_BASE_URL", "s3://b/k")])
                .nodeup(Arch::Amd64)
                .unwrap()
                .url,
            "s3://b/k/linux/amd64/nodeup"
        );
        // NODEUP_URL_<ARCH> wins over KOPS_BASE_URL for its architecture
        // only; NODEUP_HASH_<ARCH> pins whichever URL is used.
        let hash = "AB".repeat(32);
        let both = env(&[
            ("KOPS_BASE_URL", "https://example.com/kops/1.2.3"),
            ("NODEUP_URL_AMD64", "https://mirror/nodeup-amd64"),
            ("NODEUP_HASH_AMD64", &hash),
            ("NODEUP_HASH_ARM64", "cd"),
        ]);
        assert_eq!(
            both.nodeup(Arch::Amd64),
            Some(EnvNodeup {
                url: "https://mirror/nodeup-amd64".into(),
                url_variable: "NODEUP_URL_AMD64".into(),
                sha256: Some(hash.to_ascii_lowercase()),
            })
        );
        let arm = both.nodeup(Arch::Arm64).unwrap();
        assert_eq!(arm.url, "https://example.com/kops/1.2.3/linux/arm64/nodeup");
        assert_eq!(arm.sha256.as_deref(), Some("cd"));
        // A hash alone names no URL.
        assert_eq!(
            env(&[("NODEUP_HASH_AMD64", &hash)]).nodeup(Arch::Amd64),
            None
        );
    }

    #[test]
    fn sha256_files_and_store_keys() {
        let h = "0123456789abcdef".repeat(4);
        assert_eq!(parse_sha256_file(&format!("{h}\n")), Some(h.clone()));
        assert_eq!(
            parse_sha256_file(&format!("{h}  nodeup\n")),
            Some(h.clone())
        );
        assert_eq!(parse_sha256_file("<html>not found</html>"), None);
        assert_eq!(parse_sha256_file(""), None);
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            nodeup_store_path("1.0.0", &h, Arch::Arm64),
            format!("kops-rs/nodeup/1.0.0/{h}/linux/arm64/nodeup")
        );
    }

    #[test]
    fn group_architectures_from_image_and_machine_types() {
        let group = |yaml: &str| -> InstanceGroup {
            serde_yaml_ng::from_str(&format!(
                "apiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata: {{name: g}}\nspec:\n{yaml}"
            ))
            .unwrap()
        };
        assert_eq!(
            group_architectures(&group("  role: Node\n  machineType: t3.medium\n")),
            vec![Arch::Amd64]
        );
        assert_eq!(
            group_architectures(&group("  role: Node\n  machineType: m7g.large\n")),
            vec![Arch::Arm64]
        );
        assert_eq!(
            group_architectures(&group(
                "  role: Node\n  machineType: t3.medium\n  image: ubuntu/images/ubuntu-noble-24.04-arm64-server\n"
            )),
            vec![Arch::Arm64]
        );
        assert_eq!(
            group_architectures(&group(
                "  role: Node\n  machineType: t3.medium\n  mixedInstancesPolicy:\n    instances: [t4g.medium, t3.large]\n"
            )),
            vec![Arch::Amd64, Arch::Arm64]
        );
        assert!(
            group_architectures(&group("  role: Bastion\n  machineType: t3.micro\n")).is_empty()
        );
    }

    #[test]
    fn script_pins_given_sources_and_stops_without_one() {
        let h = "ab".repeat(32);
        let binaries = vec![NodeupBinary {
            arch: Arch::Amd64,
            urls: vec!["s3://bucket/c/kops-rs/nodeup/x/linux/amd64/nodeup".into()],
            sha256: Some(h.clone()),
        }];
        let script = render_script(&binaries, Some("eu-west-1"), &BootConfig::default());
        assert!(script
            .contains("NODEUP_URL_AMD64='s3://bucket/c/kops-rs/nodeup/x/linux/amd64/nodeup'\n"));
        assert!(script.contains(&format!("NODEUP_HASH_AMD64='{h}'\n")));
        assert!(script.contains("NODEUP_URL_ARM64=''\nNODEUP_HASH_ARM64=''\n"));
        assert!(script.contains("no nodeup was published for"));
        assert!(script.contains("--aws-sigv4"));
    }

    #[test]
    fn quotes() {
        assert_eq!(shell_quote("a'b"), r"'a'\''b'");
    }

    #[test]
    fn boot_config_round_trip() {
        let b = BootConfig {
            cloud_provider: "aws".into(),
            cluster_name: "c".into(),
            config_base: Some("s3://b/c".into()),
            config_server: None,
            instance_group_name: "nodes".into(),
            instance_group_role: "Node".into(),
            nodeup_config_hash: "x".into(),
            extra: Default::default(),
        };
        let text = b.to_yaml();
        assert!(text.starts_with("CloudProvider: aws\n"), "{text}");
        assert_eq!(BootConfig::parse(&text).unwrap(), b);
        assert_eq!(b.role(), Some(Role::Node));
    }
}
