//! A running cluster as its cloud's [`kops_cloud::Provider`]: what
//! `validate`, `rolling-update`, `get`/`delete instance` and `toolbox dump`
//! read and replace, with no question asked about which cloud it is.

use std::sync::Arc;

use kops_api::Cluster;
use kops_cloud::Provider;

use crate::{OpsError, Registry};

/// The running cluster on its cloud: AWS' autoscaling groups, GCE's
/// managed instance groups in `spec.project`, or vSphere's VMs (their
/// groups and the spec each VM should be made from are loaded here; no
/// cloud call is made yet).
pub async fn provider(
    registry: &Registry,
    cluster: &Cluster,
) -> Result<Arc<dyn Provider>, OpsError> {
    let cloud = crate::cloud::Cloud::of(cluster)?;
    let region = cloud.region(cluster)?;
    let name = cluster.name();
    Ok(match cloud {
        crate::cloud::Cloud::Aws => Arc::new(kops_aws::provider::AwsProvider {
            cloud: kops_aws::AwsCloud::new(&region).await,
            cluster: name.to_string(),
        }),
        crate::cloud::Cloud::Gce => {
            let project = crate::cloud::gce_project(cluster)?;
            let opened = kops_gce::provider::GceProvider::open(&project, &region, name);
            Arc::new(opened.map_err(|e| OpsError::CannotApply {
                cluster: name.to_string(),
                reason: e.to_string(),
            })?)
        }
        crate::cloud::Cloud::Vsphere => {
            Arc::new(crate::vsphere_instances::VsphereInstances::open(registry, name).await?)
        }
    })
}
