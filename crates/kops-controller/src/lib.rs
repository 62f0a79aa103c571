//! kops-controller, as kops-rs runs it: a host service on control-plane
//! nodes (`nodeup kops-controller`, installed by nodeup as the
//! `kops-controller` systemd unit) rather than a pod, because kops-rs
//! publishes no container images.
//!
//! It speaks kops' bootstrap protocol (`kops_bootstrap::protocol`): a worker proves which
//! instance it is with a GetCallerIdentity request signed by its instance
//! role (`kops_bootstrap::client`); the controller replays it to STS and checks the
//! answer against the cluster's worker roles and instances ([`aws`]);
//! then it signs the worker's kubelet and kube-proxy certificates with
//! `kubernetes-ca` and hands it its node config ([`server`]). Workers
//! therefore never read the state store, whose `pki/` holds the CA keys.
//!
//! Machines enrolled with `kops toolbox enroll` (bare metal) prove
//! themselves with a key pair made on them and registered in the cluster
//! as a `Host` object ([`hostkey`]), on bare-metal clusters and beside the
//! cloud's verifier when the options say so (`server.pki`).
//!
//! What it holds on the node (written by nodeup, `/etc/kubernetes/kops-controller/`):
//! its configuration in kops' format ([`Options`]), its serving
//! certificate, and the keys of the CAs it signs with (`kubernetes-ca`
//! only): nothing else of the PKI.
//!
//! Each cloud is a module (`aws`, `gce`, `vsphere`, `metal`) with its
//! [`Verifier`] and, where the cloud has them, its node labeller and cloud
//! IPAM; [`cloud::verifier`] is the one place the cloud is picked.

pub mod aws;
pub mod cloud;
pub mod connections;
pub mod error;
pub mod fairness;
pub mod gce;
pub mod hostkey;
pub mod identity;
pub mod metal;
pub mod node_labels;
pub mod refusal;
pub mod replay;
pub mod server;
pub mod signed_claim;
pub mod test_support;
pub mod verifier;
pub mod vsphere;

use std::sync::Arc;

pub use aws::{AwsVerifier, VerifierParts};
pub use error::StartError;
pub use identity::NodeIdentity;
pub use kops_bootstrap::config::Options;
pub use refusal::Refusal;
pub use server::{Controller, SigningKeys};
pub use verifier::{NodePass, Verifier};

/// Builds the controller from its options: its cloud's verifier
/// ([`cloud::verifier`]) and the signing keys from `caBasePath`.
pub async fn build(options: Options) -> Result<Controller, StartError> {
    let verifier = cloud::verifier(&options).await?;
    let keys = SigningKeys::load(&options.server.ca_base_path, &options.server.signing_cas)?;
    Controller::new(options, verifier, keys).await
}

/// [`build`] on AWS with the AWS configuration given (credentials,
/// endpoint).
pub async fn build_with(
    options: Options,
    sdk: &aws_config::SdkConfig,
) -> Result<Controller, StartError> {
    let verifier = aws::verifier_with(&options, sdk).await?;
    let keys = SigningKeys::load(&options.server.ca_base_path, &options.server.signing_cas)?;
    Controller::new(options, Box::new(verifier), keys).await
}

/// How often nodes are labelled.
const LABEL_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);
/// How often nodes without a pod range are looked for (cloud IPAM).
pub const IPAM_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs the controller until `shutdown` completes; with a kubeconfig, it
/// also labels the cluster's nodes from their instance groups, refuses to
/// bootstrap a node that is already registered and Ready, and, with
/// `enableCloudIPAM`, gives nodes their pod ranges.
pub async fn run(
    options: Options,
    kubeconfig: Option<&std::path::Path>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), StartError> {
    let addr = options.listen_addr();
    let controller = Arc::new(build(options).await?);
    let tls = controller.tls()?;
    let listener = server::listen(&addr).await?;
    tracing::info!("kops-controller listening on {addr}");
    if let Some(path) = kubeconfig {
        let client = kube_client(path).await?;
        if let Some(host_keys) = controller.host_keys() {
            host_keys.read_hosts_from(hostkey::hosts_api(client.clone()));
        }
        controller.verifier().connect(&client);
        controller.refuse_registered_nodes(kube::Api::all(client.clone()));
        if let Some(ipam) = controller.ipam(kube::Api::all(client.clone())) {
            every("cloud IPAM", IPAM_INTERVAL, move || {
                let ipam = ipam.clone();
                async move { ipam.run_once().await }
            });
        }
        if let Some(labeler) = controller.labeler(kube::Api::all(client)) {
            every("node labelling", LABEL_INTERVAL, move || {
                let labeler = labeler.clone();
                async move { labeler.run_once().await }
            });
        }
    } else if controller.host_keys().is_some() {
        tracing::warn!(
            "no kubeconfig: enrolled machines cannot be verified (their Host objects are in the cluster)"
        );
    }
    controller.serve(listener, tls, shutdown).await;
    Ok(())
}

/// Runs `pass` now and then every `interval`, in the background; a failed
/// pass is a warning naming `what`.
fn every<F, Fut>(what: &'static str, interval: std::time::Duration, mut pass: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<usize, String>> + Send,
{
    tokio::spawn(async move {
        loop {
            if let Err(e) = pass().await {
                tracing::warn!("{what}: {e}");
            }
            tokio::time::sleep(interval).await;
        }
    });
}

/// A Kubernetes client from a kubeconfig file.
pub async fn kube_client(path: &std::path::Path) -> Result<kube::Client, StartError> {
    let invalid = |reason: String| StartError::Invalid {
        path: path.display().to_string(),
        reason,
    };
    let kubeconfig =
        kube::config::Kubeconfig::read_from(path).map_err(|e| invalid(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| invalid(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| invalid(e.to_string()))
}
