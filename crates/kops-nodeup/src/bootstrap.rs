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

/// Where nodes download nodeup from, per architecture.
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
    let binaries = nodeup_binaries(cluster).map_err(|source| ConfigError::Asset {
        group: group.name().to_string(),
        source: Box::new(source),
    })?;
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
    for b in binaries {
        let a = b.arch.as_str().to_ascii_uppercase();
        s.push_str(&format!(
            "NODEUP_URL_{a}={}\n",
            shell_quote(&b.urls.join(","))
        ));
        s.push_str(&format!(
            "NODEUP_HASH_{a}={}\n",
            shell_quote(b.sha256.as_deref().unwrap_or(""))
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

# fetch URL FILE: one URL, curl's own retries for transient errors.
fetch() {
  curl -fsSL --connect-timeout 20 --retry 6 --retry-delay 10 -o "$2" "$1"
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
  download-verified "${INSTALL_DIR}/bin/nodeup" "${hash}" "${url}"
  chmod 0755 "${INSTALL_DIR}/bin/nodeup"
}

/bin/systemd-machine-id-setup || log "could not set up the machine id"
log "writing the boot config"
"#;

#[cfg(test)]
mod tests {
    use super::*;

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
