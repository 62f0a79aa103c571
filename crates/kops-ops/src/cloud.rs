//! The one place kops-ops looks at `spec.cloudProvider`: which cloud's
//! crate a use case goes to. Each cloud lives in its own crate (kops-aws
//! with kops-model's AWS builders and kops-render; kops-gce); a use case
//! matches on [`Cloud`] once and hands the cloud-neutral inputs over.

use kops_api::Cluster;

use crate::OpsError;

/// A cloud kops-rs builds clusters for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cloud {
    Aws,
    Gce,
    Vsphere,
}

impl Cloud {
    /// The cluster's cloud; an error naming `spec.cloudProvider` for one
    /// kops-rs does not build for.
    pub fn of(cluster: &Cluster) -> Result<Cloud, OpsError> {
        match cluster.spec.cloud_provider.as_deref().unwrap_or("") {
            "aws" => Ok(Cloud::Aws),
            kops_gce::CLOUD => Ok(Cloud::Gce),
            kops_vsphere::CLOUD => Ok(Cloud::Vsphere),
            other => Err(OpsError::NotOnAws {
                cluster: cluster.name().to_string(),
                reason: format!(
                    "its cloudProvider is `{other}`; kops-rs renders clusters on AWS, GCE and vSphere only"
                ),
            }),
        }
    }

    /// The cluster's region: from its subnets' zones (AWS) or its
    /// subnets' region (GCE).
    pub fn region(self, cluster: &Cluster) -> Result<String, OpsError> {
        match self {
            Cloud::Aws => crate::update::cluster_region(cluster),
            Cloud::Gce => gce_region(cluster),
            // vSphere has no regions: its datacenter stands in.
            Cloud::Vsphere => Ok(crate::vsphere::settings(cluster)?.placement.datacenter),
        }
    }
}

/// A GCE cluster's region: `subnets[].region`, else the region of a
/// subnet's zone.
fn gce_region(cluster: &Cluster) -> Result<String, OpsError> {
    let subnets = cluster.spec.subnets.iter().flatten();
    subnets
        .clone()
        .find_map(|s| s.region.clone().filter(|r| !r.is_empty()))
        .or_else(|| {
            subnets
                .filter_map(|s| s.zone.as_deref())
                .find_map(kops_api::zones::gce_region)
        })
        .ok_or_else(|| OpsError::NotOnAws {
            cluster: cluster.name().to_string(),
            reason: "its subnets name no GCE region (spec.subnets[].region)".into(),
        })
}
