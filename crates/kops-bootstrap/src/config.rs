//! kops-controller's configuration, in kops' format (the JSON kops puts in
//! the `kops-controller` ConfigMap), written by nodeup on control-plane
//! nodes to `/etc/kubernetes/kops-controller/config/config.yaml`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where nodeup writes kops-controller's files on a control-plane node.
pub const CONFIG_PATH: &str = "/etc/kubernetes/kops-controller/config/config.yaml";
/// Its certificates and the CA keys it signs with.
pub const PKI_DIR: &str = "/etc/kubernetes/kops-controller/pki";

/// kops' name of the bare-metal "cloud" (`cloudProvider: metal`).
pub const METAL: &str = "metal";

/// The certificates kops-controller issues to workers.
pub const CERT_NAMES: &[&str] = &["kubelet", "kubelet-server", "kube-proxy"];

/// kops' `config.Options` for kops-controller (the fields kops-rs uses;
/// the rest are kept).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Options {
    #[serde(rename = "clusterName")]
    pub cluster_name: String,
    #[serde(default)]
    pub cloud: String,
    #[serde(rename = "configBase")]
    pub config_base: String,
    #[serde(rename = "secretStore", default)]
    pub secret_store: String,
    pub server: ServerOptions,
    /// Nodes get their pod ranges from their instances' IPv6 prefixes
    /// (IPv6-only clusters; see kops-controller's IPAM).
    #[serde(
        rename = "enableCloudIPAM",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub enable_cloud_ipam: bool,
    /// Also accept kops' nodes' tokens, which sign no audience
    /// (`X-Kops-Audience`), as kops' controller does: set by kops-rs'
    /// nodeup while the cluster's kops-controller addon is kops' DaemonSet
    /// (a control plane switching between kops and kops-rs, where a worker
    /// booted by either tool's nodeup may ask this controller). A token
    /// that names another audience is refused all the same.
    #[serde(
        rename = "acceptKopsNodeTokens",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub accept_kops_node_tokens: bool,
    /// How long slow clients may take (not in kops' options: always the
    /// production values, except in tests).
    #[serde(skip)]
    pub timeouts: Timeouts,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerOptions {
    /// `:3988`, or `host:port`.
    #[serde(rename = "Listen")]
    pub listen: String,
    pub provider: ProviderOptions,
    /// Machines enrolled with `toolbox enroll` prove themselves with their
    /// machine key, checked against their `Host` object (kops' `pki`: on
    /// bare-metal clusters, and beside the cloud's verifier on clusters
    /// updated with `KOPS_FEATURE_FLAGS=Metal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pki: Option<PkiOptions>,
    #[serde(rename = "serverKeyPath")]
    pub server_key_path: String,
    #[serde(rename = "serverCertificatePath")]
    pub server_certificate_path: String,
    /// Holds `<ca>.crt`, `<ca>.key` and `keypair-ids.yaml`.
    #[serde(rename = "caBasePath")]
    pub ca_base_path: String,
    #[serde(rename = "signingCAs", default)]
    pub signing_cas: Vec<String>,
    #[serde(rename = "certNames", default)]
    pub cert_names: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws: Option<AwsOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gce: Option<GceOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vsphere: Option<VsphereOptions>,
}

/// kops-rs' vSphere verifier options (kops has none): the vCenter and
/// datacenter a node's VM must be in, and where the controller's vCenter
/// credentials are (never in these options: a file mounted on the control
/// plane, else the `vsphere-cloud-secret` Secret of `kube-system`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VsphereOptions {
    pub server: String,
    pub datacenter: String,
    /// Two lines, user then password (as `VSPHERE_CREDENTIALS_FILE`).
    #[serde(rename = "credentialsFile", default)]
    pub credentials_file: String,
    /// vCenter's certificate pinned by its SHA-1 fingerprint (the spec's
    /// `vSphereThumbprint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thumbprint: Option<String>,
    /// The CA that signed vCenter's certificate, PEM (the spec's
    /// `vSphereCACertificate`). Neither: the system's store.
    #[serde(
        rename = "caCertificate",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub ca_certificate: Option<String>,
}

/// Where kops-controller looks for its vCenter credentials on vSphere.
pub const VSPHERE_CREDENTIALS_FILE: &str = "/etc/kubernetes/kops-controller/vsphere/credentials";

/// kops' GCE verifier options (`TPMVerifierOptions`): the project and
/// region a node's instance must be in, the `cluster-name` metadata it
/// must carry, and how far its token's time may be from the controller's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GceOptions {
    #[serde(
        rename = "projectID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub project_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub region: String,
    #[serde(
        rename = "clusterName",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub cluster_name: String,
    /// Seconds.
    #[serde(rename = "MaxTimeSkew", default, skip_serializing_if = "is_zero")]
    pub max_time_skew: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// kops' machine-key verifier options (`pkibootstrap.Options`): how far a
/// token's time may be from the controller's (0: kops' five minutes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PkiOptions {
    /// Seconds.
    #[serde(rename = "MaxTimeSkew", default, skip_serializing_if = "is_zero")]
    pub max_time_skew: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AwsOptions {
    /// The IAM roles of the cluster's worker groups: only their instances
    /// may bootstrap.
    #[serde(rename = "nodesRoles", default)]
    pub nodes_roles: Vec<String>,
    #[serde(rename = "Region", default)]
    pub region: String,
    #[serde(
        rename = "useIPBasedNodeNames",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub use_ip_based_node_names: bool,
}

impl Options {
    /// The options kops writes for a cluster on AWS, with kops' paths.
    pub fn for_aws(
        cluster: &str,
        config_base: &str,
        secret_store: &str,
        region: &str,
        nodes_roles: Vec<String>,
    ) -> Options {
        Options {
            cluster_name: cluster.to_string(),
            cloud: "aws".into(),
            config_base: config_base.to_string(),
            secret_store: secret_store.to_string(),
            server: ServerOptions {
                listen: format!(":{}", crate::protocol::KOPS_CONTROLLER_PORT),
                provider: ProviderOptions {
                    aws: Some(AwsOptions {
                        nodes_roles,
                        region: region.to_string(),
                        use_ip_based_node_names: false,
                    }),
                    gce: None,
                    vsphere: None,
                },
                pki: None,
                server_key_path: format!("{PKI_DIR}/kops-controller.key"),
                server_certificate_path: format!("{PKI_DIR}/kops-controller.crt"),
                ca_base_path: PKI_DIR.to_string(),
                signing_cas: vec![kops_pki::KUBERNETES_CA.to_string()],
                cert_names: CERT_NAMES.iter().map(|s| s.to_string()).collect(),
            },
            // Only IPv6-only clusters use it; their addon says so.
            enable_cloud_ipam: false,
            accept_kops_node_tokens: false,
            timeouts: Default::default(),
        }
    }

    /// kops writes the options as one line of JSON (valid YAML).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads the options (JSON or YAML).
    pub fn parse(text: &str) -> Result<Options, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// The address to listen on: `:3988` means every interface, IPv6 and
    /// IPv4 (`[::]:3988`, one dual-stack socket, as Go listens).
    pub fn listen_addr(&self) -> String {
        match self.server.listen.strip_prefix(':') {
            Some(port) => format!("[::]:{port}"),
            None => self.server.listen.clone(),
        }
    }

    pub fn aws(&self) -> Option<&AwsOptions> {
        self.server.provider.aws.as_ref()
    }

    pub fn gce(&self) -> Option<&GceOptions> {
        self.server.provider.gce.as_ref()
    }

    pub fn vsphere(&self) -> Option<&VsphereOptions> {
        self.server.provider.vsphere.as_ref()
    }

    /// Whether the controller checks machine keys (enrolled machines).
    pub fn pki(&self) -> Option<&PkiOptions> {
        self.server.pki.as_ref()
    }

    /// The options kops writes for a bare-metal cluster
    /// (`cloudProvider: metal`): no cloud verifier, the machine-key one.
    pub fn for_metal(cluster: &str, config_base: &str, secret_store: &str) -> Options {
        let mut options = Options::for_aws(cluster, config_base, secret_store, "", Vec::new());
        options.cloud = METAL.into();
        options.server.provider = ProviderOptions::default();
        options.server.pki = Some(PkiOptions::default());
        options
    }

    /// The options kops-rs writes for a cluster on vSphere.
    pub fn for_vsphere(
        cluster: &str,
        config_base: &str,
        secret_store: &str,
        server: &str,
        datacenter: &str,
    ) -> Options {
        let mut options = Options::for_aws(cluster, config_base, secret_store, "", Vec::new());
        options.cloud = kops_vsphere::CLOUD.into();
        options.server.provider = ProviderOptions {
            vsphere: Some(VsphereOptions {
                server: server.to_string(),
                datacenter: datacenter.to_string(),
                credentials_file: VSPHERE_CREDENTIALS_FILE.to_string(),
                ..VsphereOptions::default()
            }),
            ..ProviderOptions::default()
        };
        options
    }

    /// The options kops writes for a cluster on Google Cloud (kops allows
    /// five minutes of clock skew).
    pub fn for_gce(
        cluster: &str,
        config_base: &str,
        secret_store: &str,
        project: &str,
        region: &str,
    ) -> Options {
        let mut options = Options::for_aws(cluster, config_base, secret_store, region, Vec::new());
        options.cloud = "gce".into();
        options.server.provider = ProviderOptions {
            aws: None,
            gce: Some(GceOptions {
                project_id: project.to_string(),
                region: region.to_string(),
                cluster_name: cluster.to_string(),
                max_time_skew: 300,
            }),
            vsphere: None,
        };
        options
    }
}

/// Largest request body accepted: a node's request (its public keys and
/// keypair ids) is about 2 KiB.
pub const MAX_BODY: usize = 16 * 1024;
/// How long a TLS handshake may take.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request's head may take to arrive, and how long a
/// kept-alive connection may wait for its next request.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a request's body may take to arrive.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The slowest a request's body may arrive: its deadline is one second
/// plus its declared length at this rate, at most [`BODY_READ_TIMEOUT`]
/// (a node's 2 KiB body: 1.5 s; it comes within milliseconds).
pub const MIN_BODY_RATE: u64 = 4 * 1024;

/// How long a slow client may hold a connection at each step. Production
/// uses the constants above ([`Timeouts::default`]); tests shorten them
/// to see each one fire within a second or two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub tls_handshake: Duration,
    pub header_read: Duration,
    /// The most any body may take, however long it is.
    pub body_read: Duration,
    /// The slowest a body may arrive, in bytes a second, after a first
    /// second.
    pub min_body_rate: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            tls_handshake: TLS_HANDSHAKE_TIMEOUT,
            header_read: HEADER_READ_TIMEOUT,
            body_read: BODY_READ_TIMEOUT,
            min_body_rate: MIN_BODY_RATE,
        }
    }
}

impl Timeouts {
    /// How long the body of a request declaring `length` bytes may take:
    /// one second plus `length` at the minimum rate, at most `body_read`.
    pub fn body_deadline(&self, length: Option<u64>) -> Duration {
        let length = length.unwrap_or(MAX_BODY as u64);
        let rate = self.min_body_rate.max(1);
        let at_min_rate = Duration::from_millis(1_000 + length * 1_000 / rate);
        at_min_rate.min(self.body_read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_read_and_write_kops_json() {
        let kops = r#"{"clusterName":"minimal-aws.example.com","cloud":"aws","configBase":"memfs://clusters.example.com/minimal-aws.example.com","secretStore":"memfs://clusters.example.com/minimal-aws.example.com/secrets","server":{"Listen":":3988","provider":{"aws":{"nodesRoles":["nodes.minimal-aws.example.com"],"Region":"us-test-1"}},"serverKeyPath":"/etc/kubernetes/kops-controller/pki/kops-controller.key","serverCertificatePath":"/etc/kubernetes/kops-controller/pki/kops-controller.crt","caBasePath":"/etc/kubernetes/kops-controller/pki","signingCAs":["kubernetes-ca"],"certNames":["kubelet","kubelet-server","kube-proxy"]}}"#;
        let parsed = Options::parse(kops).unwrap();
        assert_eq!(
            parsed,
            Options::for_aws(
                "minimal-aws.example.com",
                "memfs://clusters.example.com/minimal-aws.example.com",
                "memfs://clusters.example.com/minimal-aws.example.com/secrets",
                "us-test-1",
                vec!["nodes.minimal-aws.example.com".into()],
            )
        );
        assert_eq!(parsed.to_json(), kops);
        assert_eq!(parsed.listen_addr(), "[::]:3988");
        // An IPv6-only cluster's options turn the cloud IPAM on.
        let ipv6 = kops.replacen(r#"]}}"#, r#"]},"enableCloudIPAM":true}"#, 1);
        let parsed = Options::parse(&ipv6).unwrap();
        assert!(parsed.enable_cloud_ipam);
        assert_eq!(parsed.to_json(), ipv6);
    }

    #[test]
    fn gce_options_read_and_write_kops_json() {
        let kops = r#"{"clusterName":"minimal-gce.example.com","cloud":"gce","configBase":"memfs://tests/minimal-gce.example.com","secretStore":"memfs://tests/minimal-gce.example.com/secrets","server":{"Listen":":3988","provider":{"gce":{"projectID":"testproject","region":"us-test1","clusterName":"minimal-gce.example.com","MaxTimeSkew":300}},"serverKeyPath":"/etc/kubernetes/kops-controller/pki/kops-controller.key","serverCertificatePath":"/etc/kubernetes/kops-controller/pki/kops-controller.crt","caBasePath":"/etc/kubernetes/kops-controller/pki","signingCAs":["kubernetes-ca"],"certNames":["kubelet","kubelet-server","kube-proxy"]}}"#;
        let parsed = Options::parse(kops).unwrap();
        assert_eq!(
            parsed,
            Options::for_gce(
                "minimal-gce.example.com",
                "memfs://tests/minimal-gce.example.com",
                "memfs://tests/minimal-gce.example.com/secrets",
                "testproject",
                "us-test1",
            )
        );
        assert_eq!(parsed.to_json(), kops);
        assert!(parsed.aws().is_none());
    }

    /// What kops 1.37 writes for `create cluster --cloud=metal` (its
    /// `kops-controller` ConfigMap after `update cluster --yes`).
    #[test]
    fn metal_options_read_and_write_kops_json() {
        let kops = r#"{"clusterName":"metal.k8s.local","cloud":"metal","configBase":"/tmp/state/metal.k8s.local","secretStore":"/tmp/state/metal.k8s.local/secrets","server":{"Listen":":3988","provider":{},"pki":{},"serverKeyPath":"/etc/kubernetes/kops-controller/pki/kops-controller.key","serverCertificatePath":"/etc/kubernetes/kops-controller/pki/kops-controller.crt","caBasePath":"/etc/kubernetes/kops-controller/pki","signingCAs":["kubernetes-ca"],"certNames":["kubelet","kubelet-server","kube-proxy"]}}"#;
        let parsed = Options::parse(kops).unwrap();
        assert_eq!(
            parsed,
            Options::for_metal(
                "metal.k8s.local",
                "/tmp/state/metal.k8s.local",
                "/tmp/state/metal.k8s.local/secrets",
            )
        );
        assert_eq!(parsed.to_json(), kops);
        // Beside a cloud's verifier (KOPS_FEATURE_FLAGS=Metal at update).
        let aws = r#"{"clusterName":"a","cloud":"aws","configBase":"b","server":{"Listen":":3988","provider":{"aws":{"nodesRoles":["nodes.a"],"Region":"us-east-1"}},"pki":{},"serverKeyPath":"k","serverCertificatePath":"c","caBasePath":"p"}}"#;
        let parsed = Options::parse(aws).unwrap();
        assert!(parsed.aws().is_some() && parsed.pki().is_some());
    }
}
