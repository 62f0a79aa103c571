//! The one place kops-ops looks at `spec.cloudProvider`: which cloud's
//! crate a use case goes to. Each cloud lives in its own crate (kops-aws
//! with kops-model's AWS builders and kops-render; kops-gce; kops-vsphere);
//! `crate::provider` opens a running cluster as a [`kops_cloud::Provider`]
//! for the use cases that read and replace instances, and a use case that
//! plans, renders or deletes matches on [`Cloud`] once and hands the
//! cloud-neutral inputs over.

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
            other => Err(OpsError::CannotApply {
                cluster: cluster.name().to_string(),
                reason: format!(
                    "its cloudProvider is `{other}`; kops-rs renders clusters on AWS, GCE and vSphere only"
                ),
            }),
        }
    }

    /// The machine types the cluster's region offers, with the resources
    /// `toolbox instance-selector` filters on: EC2's; the other clouds'
    /// are not read (an error naming the cluster's cloud).
    pub async fn instance_types(
        self,
        cluster: &Cluster,
    ) -> Result<Vec<kops_aws::instance_types::InstanceTypeInfo>, OpsError> {
        match self {
            Cloud::Aws => {
                let cloud = kops_aws::AwsCloud::new(&self.region(cluster)?).await;
                Ok(kops_aws::instance_types::instance_types(&cloud).await?)
            }
            Cloud::Gce | Cloud::Vsphere => Err(OpsError::NoInstanceTypes {
                cluster: cluster.name().to_string(),
            }),
        }
    }

    /// Whether the API's load balancer has a DNS name of the cloud's own
    /// that a kubeconfig reaches it by (AWS' `*.elb.amazonaws.com`); on
    /// the other clouds the API's name is what the kubeconfig says.
    pub fn names_load_balancers(self) -> bool {
        matches!(self, Cloud::Aws)
    }

    /// The cluster's region: from its subnets' zones (AWS) or its
    /// subnets' region (GCE).
    pub fn region(self, cluster: &Cluster) -> Result<String, OpsError> {
        match self {
            Cloud::Aws => aws_region(cluster),
            Cloud::Gce => gce_region(cluster),
            // vSphere has no regions: its datacenter stands in.
            Cloud::Vsphere => Ok(crate::vsphere::settings::settings(cluster)?
                .placement
                .datacenter),
        }
    }
}

/// An AWS cluster's region: the region of its subnets' zones.
pub fn aws_region(cluster: &kops_api::Cluster) -> Result<String, OpsError> {
    cluster.aws_region().ok_or_else(|| OpsError::CannotApply {
        cluster: cluster.name().to_string(),
        reason: "its subnets name no AWS availability zone".into(),
    })
}

/// The cluster's Google Cloud project (`spec.project`), required on GCE.
pub fn gce_project(cluster: &kops_api::Cluster) -> Result<String, OpsError> {
    cluster
        .spec
        .project
        .clone()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| OpsError::CannotApply {
            cluster: cluster.name().to_string(),
            reason:
                "spec.project is not set; set it to the Google Cloud project the cluster lives in"
                    .into(),
        })
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
        .ok_or_else(|| OpsError::CannotApply {
            cluster: cluster.name().to_string(),
            reason: "its subnets name no GCE region (spec.subnets[].region)".into(),
        })
}
