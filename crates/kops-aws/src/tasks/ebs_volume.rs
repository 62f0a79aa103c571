//! An EBS volume kops creates on its own: the etcd data volumes, one per
//! etcd member and etcd cluster (`<member>.etcd-<etcd cluster>.<cluster>`),
//! in the zone of the member's control-plane group. A control-plane node
//! finds and attaches them by their tags (`k8s.io/etcd/<etcd cluster>`,
//! `k8s.io/role/control-plane`), so a replacement node gets the data back.
//!
//! Found in one tagged `DescribeVolumes` per run. Size, type, IOPS and
//! throughput can be changed in place (`ModifyVolume`); the zone and the
//! encryption cannot.

use aws_sdk_ec2::types::{ResourceType, VolumeType};
use kops_engine::{Changes, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, name_tag, tag_map, tag_spec, AwsContext, Tags};
use crate::tasks::ec2::write_missing_tags;
use crate::tasks::managed_tags;

/// What the volume should be.
#[derive(Debug, Clone, PartialEq)]
pub struct EbsVolume {
    /// The task name and `Name` tag.
    pub name: String,
    pub availability_zone: String,
    /// GiB.
    pub size: i32,
    pub volume_type: String,
    pub iops: Option<i32>,
    pub throughput: Option<i32>,
    pub encrypted: bool,
    pub kms_key_id: Option<String>,
    pub tags: Tags,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct EbsVolumeActual {
    pub id: String,
    pub availability_zone: String,
    pub size: i32,
    pub volume_type: String,
    pub iops: Option<i32>,
    pub throughput: Option<i32>,
    pub encrypted: bool,
    pub kms_key_id: Option<String>,
    pub tags: Tags,
}

impl EbsVolume {
    pub const KIND: &'static str = "EBSVolume";
}

fn actual_of(volume: &aws_sdk_ec2::types::Volume) -> EbsVolumeActual {
    EbsVolumeActual {
        id: volume.volume_id().unwrap_or_default().to_string(),
        availability_zone: volume.availability_zone().unwrap_or_default().to_string(),
        size: volume.size().unwrap_or_default(),
        volume_type: volume
            .volume_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default(),
        iops: volume.iops(),
        throughput: volume.throughput(),
        encrypted: volume.encrypted().unwrap_or(false),
        kms_key_id: volume.kms_key_id().map(str::to_string),
        tags: tag_map(volume.tags()),
    }
}

impl Task<AwsContext> for EbsVolume {
    type Actual = EbsVolumeActual;
    type Output = String;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<EbsVolumeActual>, TaskError> {
        let volumes = ctx.volumes().await?;
        let wanted = ctx.created_id(&self.key());
        Ok(volumes
            .iter()
            .filter(|v| {
                !matches!(
                    v.state().map(|s| s.as_str()),
                    Some("deleting") | Some("deleted")
                )
            })
            .find(|v| {
                name_tag(v.tags()) == Some(self.name.as_str())
                    || (wanted.is_some() && v.volume_id() == wanted.as_deref())
            })
            .map(actual_of))
    }

    fn diff(&self, actual: Option<&EbsVolumeActual>, _: &Outputs) -> Result<Changes, TaskError> {
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        let mut changes = Changes::new();
        changes
            .compare(
                "availabilityZone",
                actual.map(|a| a.availability_zone.as_str()),
                self.availability_zone.as_str(),
            )
            .compare("size", actual.map(|a| &a.size), &self.size)
            .compare(
                "volumeType",
                actual.map(|a| a.volume_type.as_str()),
                self.volume_type.as_str(),
            )
            .compare("encrypted", actual.map(|a| &a.encrypted), &self.encrypted)
            .compare("tags", tags.as_ref(), &self.tags);
        // AWS reports IOPS and throughput for every gp3 volume: compare only
        // what the spec sets.
        if let Some(iops) = &self.iops {
            changes.compare("iops", actual.map(|a| &a.iops), &Some(*iops));
        }
        if let Some(throughput) = &self.throughput {
            changes.compare(
                "throughput",
                actual.map(|a| &a.throughput),
                &Some(*throughput),
            );
        }
        if let Some(key) = &self.kms_key_id {
            changes.compare(
                "kmsKeyId",
                actual.map(|a| &a.kms_key_id),
                &Some(key.clone()),
            );
        }
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&EbsVolumeActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let Some(actual) = actual else {
            return Ok(());
        };
        if actual.availability_zone != self.availability_zone {
            return Err(TaskError::immutable(
                "availabilityZone",
                actual.availability_zone.as_str(),
                self.availability_zone.as_str(),
            ));
        }
        if actual.encrypted != self.encrypted {
            return Err(TaskError::immutable(
                "encrypted",
                &actual.encrypted,
                &self.encrypted,
            ));
        }
        if actual.size > self.size {
            return Err(TaskError::fatal(format!(
                "the volume `{}` is {} GiB and cannot shrink to {} GiB\nhint: keep the etcd member's volumeSize at {} or more",
                self.name, actual.size, self.size, actual.size
            )));
        }
        Ok(())
    }

    fn output(&self, actual: &EbsVolumeActual) -> String {
        actual.id.clone()
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
        actual: Option<&EbsVolumeActual>,
        changes: &Changes,
    ) -> Result<String, TaskError> {
        let Some(actual) = actual else {
            let out = ctx
                .ec2()
                .create_volume()
                .availability_zone(&self.availability_zone)
                .size(self.size)
                .volume_type(VolumeType::from(self.volume_type.as_str()))
                .set_iops(self.iops)
                .set_throughput(self.throughput)
                .encrypted(self.encrypted)
                .set_kms_key_id(self.kms_key_id.clone())
                .tag_specifications(tag_spec(ResourceType::Volume, &self.tags))
                .send()
                .await
                .map_err(|e| classify("CreateVolume", &self.name, e))?;
            let id = out.volume_id().unwrap_or_default().to_string();
            ctx.remember_created(self.key(), &id);
            return Ok(id);
        };
        if ["size", "volumeType", "iops", "throughput"]
            .iter()
            .any(|f| changes.has(f))
        {
            ctx.ec2()
                .modify_volume()
                .volume_id(&actual.id)
                .size(self.size)
                .volume_type(VolumeType::from(self.volume_type.as_str()))
                .set_iops(self.iops)
                .set_throughput(self.throughput)
                .send()
                .await
                .map_err(|e| classify("ModifyVolume", &self.name, e))?;
        }
        write_missing_tags(ctx, &actual.id, &actual.tags, &self.tags).await?;
        Ok(actual.id.clone())
    }
}
