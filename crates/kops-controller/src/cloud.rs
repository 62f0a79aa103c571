//! The one place the controller's cloud is picked (kops' `BuildCloud`):
//! from the options, the verifier of bare metal, Google Cloud, vSphere or
//! AWS. Nothing else in the controller asks which cloud it runs on.

use kops_bootstrap::config::{self, Options};

use crate::error::StartError;
use crate::verifier::Verifier;

/// The verifier the options call for: on bare metal none but the
/// enrolled machines' ([`crate::metal`]); on Google Cloud Compute through
/// the instance's service account ([`crate::gce::verifier`]); on vSphere
/// the one-time token verifier, which logs in to vCenter at the first
/// request ([`crate::vsphere`]); else AWS, with its clients for the
/// options' region and this controller's own account
/// ([`crate::aws::verifier`]).
pub async fn verifier(options: &Options) -> Result<Box<dyn Verifier>, StartError> {
    if options.cloud == config::METAL {
        return Ok(Box::new(crate::metal::MetalVerifier));
    }
    if options.gce().is_some() {
        return Ok(Box::new(crate::gce::verifier(options)?));
    }
    if let Some(vsphere) = options.vsphere() {
        return Ok(Box::new(crate::vsphere::VsphereVerifier::from_options(
            &options.cluster_name,
            vsphere,
        )));
    }
    Ok(Box::new(crate::aws::verifier(options).await?))
}
