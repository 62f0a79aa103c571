//! `kops export kubeconfig`: the cluster, a context named after it and,
//! when asked, an admin user, merged into the kubeconfig files. The API
//! server's address is the spec's, or the name the cluster's cloud gives
//! its API load balancer (AWS).

use std::path::PathBuf;
use std::time::Duration;

use kops_api::Cluster;
use kops_pki::{
    IssueRequest, KubeconfigEntry, KubeconfigFiles, KubeconfigUser, ADMIN_GROUP, KUBERNETES_CA,
};

use crate::pki::{cluster_keystore, PkiOpsError};
use crate::{require_cluster, Registry};

/// How long `--admin` credentials last when no duration is given.
pub const DEFAULT_ADMIN_LIFETIME: Duration = Duration::from_secs(18 * 3600);

/// What `kops export kubeconfig` was asked to do.
#[derive(Debug, Clone)]
pub struct ExportKubeconfigRequest {
    pub cluster: String,
    /// `--admin[=DURATION]`: issue an admin client certificate this long.
    pub admin: Option<Duration>,
    /// `--user`: an existing kubeconfig user for the context.
    pub user: Option<String>,
    /// `--internal`: use `https://api.internal.<cluster>`.
    pub internal: bool,
    /// `--api-server`: use this URL as is.
    pub api_server: Option<String>,
    /// The files to merge into (from `--kubeconfig`, KUBECONFIG or HOME).
    pub files: KubeconfigFiles,
    /// The local user's name, for the admin certificate's `kubecfg-<name>`.
    pub local_user: Option<String>,
    /// `--auth-plugin`: the state store (as given) the exec plugin entry
    /// names (`kops helpers kubectl-auth --cluster=... --state=...`),
    /// instead of any client certificate.
    pub auth_plugin_state: Option<String>,
    /// Look the API load balancer's DNS name up in AWS when the spec has one
    /// (kops does); `false` keeps `api.<cluster>` (tests without AWS).
    pub lookup_load_balancer: bool,
}

/// What it wrote.
#[derive(Debug, Clone)]
pub struct ExportKubeconfigOutcome {
    /// The context (and cluster, and admin user) name: the cluster's name.
    pub context: String,
    pub server: String,
    pub files_written: Vec<PathBuf>,
    /// Whether an admin client certificate was written.
    pub admin: bool,
    /// Things the user should know (no user credentials, no load balancer found).
    pub warnings: Vec<String>,
}

fn load_balancer_class(cluster: &Cluster) -> Option<String> {
    let lb = cluster.spec.api.as_ref()?.load_balancer.as_ref()?;
    Some(lb.class.clone().unwrap_or_else(|| "Network".to_string()))
}

fn ssl_certificate(cluster: &Cluster) -> Option<&str> {
    cluster
        .spec
        .api
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ssl_certificate
        .as_deref()
        .filter(|s| !s.is_empty())
}

fn wrap_ipv6(host: &str) -> String {
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(_)) => format!("[{host}]"),
        _ => host.to_string(),
    }
}

/// `kops export kubeconfig`: the cluster, a context named after it and (with
/// `--admin`) an admin user with a client certificate from the cluster CA
/// (`CN=kubecfg-<user>`, `O=system:masters`), merged into the kubeconfig
/// files and made current.
pub async fn export_kubeconfig(
    registry: &Registry,
    request: ExportKubeconfigRequest,
) -> Result<ExportKubeconfigOutcome, PkiOpsError> {
    if request.admin.is_some() && request.user.is_some() {
        return Err(PkiOpsError::AdminAndUser);
    }
    if request.admin == Some(Duration::ZERO) {
        return Err(PkiOpsError::ZeroLifetime);
    }
    let cluster = require_cluster(registry, &request.cluster).await?;
    let name = cluster.name().to_string();
    let keyset = cluster_keystore(registry, &name)
        .0
        .require(KUBERNETES_CA)
        .await?;
    let mut warnings = Vec::new();

    let lb_class = load_balancer_class(&cluster);
    let network_lb = lb_class.as_deref() == Some("Network");
    let ssl = ssl_certificate(&cluster);
    let mut server = if let Some(s) = request.api_server.clone() {
        s
    } else if request.internal {
        format!("https://api.internal.{name}")
    } else {
        let public = cluster
            .spec
            .api
            .as_ref()
            .and_then(|a| a.public_name.clone())
            .filter(|p| !p.is_empty());
        let mut server = match public {
            Some(p) => format!("https://{}", wrap_ipv6(&p)),
            None => format!("https://api.{name}"),
        };
        let wants_lb = lb_class.is_some() && (ssl.is_none() || request.admin.is_some());
        // The load balancer's own name where the cloud gives it one; else
        // the API name stays.
        let cloud = crate::cloud::of(&cluster)
            .ok()
            .filter(|c| c.names_load_balancers());
        if let Some(cloud) =
            cloud.filter(|_| wants_lb && network_lb && request.lookup_load_balancer)
        {
            let found = cloud.api_load_balancer_dns_name(&cluster).await;
            match found.map_err(|reason| PkiOpsError::LoadBalancerLookup {
                cluster: name.clone(),
                reason,
            })? {
                Some(dns) => server = format!("https://{}", wrap_ipv6(&dns)),
                None => warnings.push(format!(
                    "did not find the API load balancer `api.{name}`; using {server}, which may not be reachable yet"
                )),
            }
        }
        server
    };
    if request.admin.is_some() && ssl.is_some() && network_lb && request.api_server.is_none() {
        server.push_str(":8443");
    }

    let trust_ca = lb_class.is_none() || ssl.is_none() || network_lb || request.internal;
    let certificate_authority_pem = trust_ca.then(|| keyset.trusted_certificates_pem());

    let user = match (&request.admin, &request.user) {
        _ if request.auth_plugin_state.is_some() => KubeconfigUser::Exec {
            api_version: "client.authentication.k8s.io/v1beta1".into(),
            command: "kops".into(),
            args: vec![
                "helpers".into(),
                "kubectl-auth".into(),
                format!("--cluster={name}"),
                format!(
                    "--state={}",
                    request.auth_plugin_state.as_deref().unwrap_or_default()
                ),
            ],
        },
        (Some(lifetime), _) => {
            let ca = keyset.certificate_authority()?;
            let mut issue = IssueRequest::client(
                &kops_pki::admin_common_name(request.local_user.as_deref()),
                Some(ADMIN_GROUP),
            );
            issue.validity = Some(*lifetime);
            let issued = ca.issue(&issue)?;
            KubeconfigUser::Certificate {
                certificate_pem: issued.certificate_pem,
                private_key_pem: issued.private_key_pem,
            }
        }
        (None, Some(u)) if *u != name => KubeconfigUser::Existing(u.clone()),
        _ => {
            warnings.push(
                "exported a kubeconfig with no user credentials; pass --admin or --user to add them"
                    .to_string(),
            );
            KubeconfigUser::None
        }
    };
    let admin = matches!(user, KubeconfigUser::Certificate { .. });
    let entry = KubeconfigEntry {
        name: name.clone(),
        server: server.clone(),
        tls_server_name: Some(format!("api.internal.{name}")),
        certificate_authority_pem,
        user,
    };
    let files_written = request.files.write_entry(&entry)?;
    Ok(ExportKubeconfigOutcome {
        context: name,
        server,
        files_written,
        admin,
        warnings,
    })
}
