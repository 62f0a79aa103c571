//! kops-controller, as kops-rs runs it: a host service on control-plane
//! nodes (`nodeup kops-controller`, installed by nodeup as the
//! `kops-controller` systemd unit) rather than a pod, because kops-rs
//! publishes no container images.
//!
//! It speaks kops' bootstrap protocol ([`protocol`]): a worker proves which
//! instance it is with a GetCallerIdentity request signed by its instance
//! role ([`client`]); the controller replays it to STS and checks the
//! answer against the cluster's worker roles and instances ([`verify`]);
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
//! its configuration in kops' format ([`config::Options`]), its serving
//! certificate, and the keys of the CAs it signs with (`kubernetes-ca`
//! only): nothing else of the PKI.

pub mod connections;
pub mod fairness;
pub mod gce;
pub mod hostkey;
pub mod ipam;
pub mod labels;
pub mod nodes;
pub mod replay;
pub mod server;
pub mod signed_claim;
pub mod test_support;
pub mod verify;
pub mod vsphere;

use std::sync::Arc;

pub use kops_bootstrap::config::{self, Options};
pub use server::{Controller, SigningKeys, StartError};
pub use verify::{AwsVerifier, NodeIdentity, Refusal, Verifier, VerifierParts};

/// Builds the controller from its options: on AWS the AWS clients (region
/// from the options) and this controller's own account (STS
/// GetCallerIdentity), on Google Cloud the Compute client (see
/// [`build_gce`]), on vSphere the one-time token verifier (it logs in to
/// vCenter at the first request), on bare metal none (enrolled machines
/// only, [`hostkey`]); the signing keys from `caBasePath`.
pub async fn build(options: Options) -> Result<Controller, StartError> {
    if options.cloud == config::METAL {
        let keys = SigningKeys::load(&options.server.ca_base_path, &options.server.signing_cas)?;
        return Controller::new(options, Verifier::Metal, keys).await;
    }
    if options.gce().is_some() {
        return build_gce(options).await;
    }
    if let Some(vsphere) = options.vsphere() {
        let verifier = vsphere::VsphereVerifier::from_options(&options.cluster_name, vsphere);
        let keys = SigningKeys::load(&options.server.ca_base_path, &options.server.signing_cas)?;
        return Controller::new(options, Verifier::Vsphere(Box::new(verifier)), keys).await;
    }
    let region = options.aws().map(|a| a.region.clone()).unwrap_or_default();
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region))
        .load()
        .await;
    build_with(options, &sdk).await
}

/// [`build`] with the AWS configuration given (credentials, endpoint).
pub async fn build_with(
    options: Options,
    sdk: &aws_config::SdkConfig,
) -> Result<Controller, StartError> {
    let aws = options
        .aws()
        .ok_or_else(|| StartError::Invalid {
            path: config::CONFIG_PATH.to_string(),
            reason: "kops-rs' kops-controller runs on AWS only (server.provider.aws is missing)"
                .into(),
        })?
        .clone();
    let sts = aws_sdk_sts::Client::new(sdk);
    let me = sts
        .get_caller_identity()
        .send()
        .await
        .map_err(|e| StartError::Aws(format!("STS GetCallerIdentity: {}", sdk_message(&e))))?;
    let arn = me.arn().unwrap_or_default();
    let partition = arn.split(':').nth(1).unwrap_or("aws").to_string();
    let verifier = Verifier::new(VerifierParts {
        cluster: options.cluster_name.clone(),
        account: me.account().unwrap_or_default().to_string(),
        partition,
        nodes_roles: aws.nodes_roles.clone(),
        region: aws.region.clone(),
        sts_url: kops_bootstrap::protocol::sts_url(&aws.region),
        use_ip_based_node_names: aws.use_ip_based_node_names,
        accept_kops_node_tokens: options.accept_kops_node_tokens,
        ec2: aws_sdk_ec2::Client::new(sdk),
    })
    .map_err(StartError::Tls)?;
    let keys = SigningKeys::load(&options.server.ca_base_path, &options.server.signing_cas)?;
    Controller::new(options, verifier, keys).await
}

/// The controller of a Google Cloud cluster: Compute at gcloud's endpoint
/// (`CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE`, else Google's), with the
/// instance's service-account token from the metadata server
/// (`GCE_METADATA_HOST`, else the link-local one).
pub async fn build_gce(options: Options) -> Result<Controller, StartError> {
    let gce = options
        .gce()
        .ok_or_else(|| StartError::Invalid {
            path: config::CONFIG_PATH.to_string(),
            reason: "server.provider.gce is missing".into(),
        })?
        .clone();
    if gce.project_id.is_empty() || gce.region.is_empty() {
        return Err(StartError::Invalid {
            path: config::CONFIG_PATH.to_string(),
            reason: "server.provider.gce needs projectID and region".into(),
        });
    }
    let metadata =
        Arc::new(kops_bootstrap::gce::metadata::Metadata::from_env().map_err(StartError::Tls)?);
    let compute = gce::compute::Compute::from_env(metadata).map_err(StartError::Tls)?;
    let verifier = Verifier::Gce(Box::new(gce::GceVerifier::new(
        &options.cluster_name,
        gce,
        compute,
    )));
    let keys = SigningKeys::load(&options.server.ca_base_path, &options.server.signing_cas)?;
    Controller::new(options, verifier, keys).await
}

/// How often nodes are labelled.
const LABEL_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

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
        if let Verifier::Vsphere(v) = controller.verifier() {
            v.read_secrets_from(kube::Api::namespaced(client.clone(), "kube-system"));
        }
        controller.refuse_registered_nodes(kube::Api::all(client.clone()));
        let aws_ipam = controller
            .ipam(kube::Api::all(client.clone()))
            .map(Arc::new);
        let gce_ipam = controller
            .gce_ipam(kube::Api::all(client.clone()))
            .map(Arc::new);
        if aws_ipam.is_some() || gce_ipam.is_some() {
            every("cloud IPAM", ipam::IPAM_INTERVAL, move || {
                let (aws, gce) = (aws_ipam.clone(), gce_ipam.clone());
                async move {
                    match (aws, gce) {
                        (Some(aws), _) => aws.run_once().await,
                        (None, Some(gce)) => gce.run_once().await,
                        (None, None) => Ok(0),
                    }
                }
            });
        }
        if let Some(labeler) = controller.labeler(kube::Api::all(client.clone())) {
            let labeler = Arc::new(labeler);
            every("node labelling", LABEL_INTERVAL, move || {
                let labeler = labeler.clone();
                async move { labeler.run_once().await }
            });
        } else if let Some(labeler) = controller.gce_labeler(kube::Api::all(client)) {
            let labeler = Arc::new(labeler);
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

/// An SDK error as code and message, one line.
fn sdk_message<E, R>(error: &aws_smithy_runtime_api::client::result::SdkError<E, R>) -> String
where
    E: aws_sdk_sts::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match error.as_service_error() {
        Some(e) => format!(
            "{}: {}",
            e.code().unwrap_or("error"),
            e.message().unwrap_or_default()
        ),
        None => kops_bootstrap::text::error_chain(error),
    }
}
