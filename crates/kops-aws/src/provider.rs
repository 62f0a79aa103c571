//! A cluster on AWS as a [`kops_cloud::Provider`]: what `validate`,
//! `rolling-update`, `get`/`delete instance` and `toolbox dump` read and
//! change, over [`crate::instances`] and [`crate::delete::dump`].

use std::collections::BTreeMap;

use kops_cloud::{Group, Instance, InstanceDetails};

use crate::AwsCloud;

/// A cluster on AWS as a [`kops_cloud::Provider`]: its autoscaling groups,
/// replaced by terminating inside the group, with surge by detaching.
pub struct AwsProvider {
    pub cloud: AwsCloud,
    pub cluster: String,
}

#[async_trait::async_trait]
impl kops_cloud::Provider for AwsProvider {
    fn name(&self) -> &'static str {
        "aws"
    }

    async fn groups(&self) -> Result<Vec<Group>, kops_cloud::CloudError> {
        crate::instances::cluster_groups(&self.cloud, &self.cluster)
            .await
            .map_err(kops_cloud::CloudError::api)
    }

    async fn terminate(
        &self,
        _group: &str,
        instance: &Instance,
    ) -> Result<(), kops_cloud::CloudError> {
        if instance.detached {
            crate::instances::terminate_instance(&self.cloud, &instance.id).await
        } else {
            crate::instances::terminate_in_group(&self.cloud, &instance.id).await
        }
        .map_err(kops_cloud::CloudError::api)
    }

    fn supports_surge(&self) -> bool {
        true
    }

    async fn detach(&self, group: &str, instance: &Instance) -> Result<(), kops_cloud::CloudError> {
        crate::instances::detach_for_surge(&self.cloud, group, &instance.id)
            .await
            .map_err(kops_cloud::CloudError::api)
    }

    async fn details(&self) -> Result<BTreeMap<String, InstanceDetails>, kops_cloud::CloudError> {
        crate::instances::instance_details(&self.cloud, &self.cluster)
            .await
            .map_err(kops_cloud::CloudError::api)
    }

    async fn dump(&self) -> Result<kops_cloud::Dump, kops_cloud::CloudError> {
        crate::delete::dump::dump_cluster(&self.cloud, &self.cluster)
            .await
            .map_err(kops_cloud::CloudError::api)
    }
}
