//! The launch template of an instance group (`<group>.<cluster>`, or
//! `<group>.masters.<cluster>` for control-plane groups): image, machine
//! type, root volume, instance metadata options, instance profile, security
//! groups, public IP association, the tags instances and their volumes get,
//! and the user data.
//!
//! A launch template is versioned: a change creates a new version
//! (`CreateLaunchTemplateVersion`) and makes it the default, so an
//! autoscaling group can be pointed at it. `find` compares the default
//! version's data: one tagged `DescribeLaunchTemplates` per run for all
//! groups, then one `DescribeLaunchTemplateVersions` per template.
//!
//! A group with `spec.maxPrice` and no mixed-instances policy asks for spot
//! instances in the template's market options (a group with a policy has
//! its price in the policy instead: AWS refuses both).
//!
//! The image is the spec's text: an `ami-...` id, or `owner/name` resolved
//! to the newest image of that name (see [`AwsContext::image`], cached per
//! run).

use aws_sdk_ec2::types::{
    InstanceInterruptionBehavior, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMarketOptionsRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest,
    LaunchTemplateSpotMarketOptionsRequest, LaunchTemplateTagSpecificationRequest,
    LaunchTemplatesMonitoringRequest, MarketType, RequestLaunchTemplateData, ResourceType,
    ResponseLaunchTemplateData, VolumeType,
};
use base64::Engine as _;
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, ec2_tags, tag_map, tag_spec, AwsContext, Tags};
use crate::tasks::ec2::write_missing_tags;
use crate::tasks::iam_instance_profile::{IamInstanceProfileOutput, IamInstanceProfileRole};
use crate::tasks::managed_tags;
use crate::tasks::security_group::SecurityGroupId;
use crate::tasks::ssh_key::SshKeyName;

/// What an autoscaling group reads: the template's id and the version to
/// launch (the default one, which this task keeps at the wanted data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchTemplateOutput {
    pub id: String,
    pub version: i64,
    /// The template's latest version. kops points its groups at `$Latest`
    /// (and makes each new version the default too): such a group runs
    /// `version` when this equals it.
    pub latest_version: i64,
}

impl FieldValue for LaunchTemplateOutput {
    fn render(&self) -> String {
        format!("{} version {}", self.id, self.version)
    }
}

/// The root volume of the instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootVolume {
    /// GiB.
    pub size: i32,
    /// `gp3`, `gp2`, `io1`, ...
    pub volume_type: String,
    pub iops: Option<i32>,
    /// MiB/s (gp3 only).
    pub throughput: Option<i32>,
    pub encrypted: bool,
    pub kms_key_id: Option<String>,
}

/// A data volume besides the root one (`spec.volumes`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExtraVolume {
    /// `/dev/xvdd`...
    pub device: String,
    /// GiB.
    pub size: i32,
    pub volume_type: String,
    pub iops: Option<i32>,
    pub throughput: Option<i32>,
    pub encrypted: bool,
    pub kms_key_id: Option<String>,
    pub delete_on_termination: bool,
}

impl FieldValue for ExtraVolume {
    fn render(&self) -> String {
        format!(
            "{} {} GiB {}{}{}",
            self.device,
            self.size,
            self.volume_type,
            if self.encrypted { ", encrypted" } else { "" },
            if self.delete_on_termination {
                ""
            } else {
                ", kept on termination"
            }
        )
    }
}

impl FieldValue for RootVolume {
    fn render(&self) -> String {
        let mut text = format!("{} GiB {}", self.size, self.volume_type);
        if let Some(iops) = self.iops {
            text.push_str(&format!(", {iops} iops"));
        }
        if let Some(throughput) = self.throughput {
            text.push_str(&format!(", {throughput} MiB/s"));
        }
        text.push_str(if self.encrypted {
            ", encrypted"
        } else {
            ", not encrypted"
        });
        if let Some(key) = &self.kms_key_id {
            text.push_str(&format!(" with `{key}`"));
        }
        text
    }
}

/// The spot request of a template (its market options): instances are spot
/// instances bought at most at `max_price` an hour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpotMarket {
    /// US dollars an hour, as the spec writes it (`"0.1"`); compared as a
    /// number, since AWS may give it back with trailing zeros.
    pub max_price: String,
    /// `spec.spotDurationInMinutes`: a spot block of that many minutes.
    pub block_duration_minutes: Option<i32>,
    /// `spec.instanceInterruptionBehavior`: `terminate`, `stop` or
    /// `hibernate`.
    pub interruption_behavior: Option<String>,
}

impl SpotMarket {
    /// The same request with the price in a canonical form (`0.100` and
    /// `0.1` are one price).
    fn normalized(&self) -> Self {
        Self {
            max_price: normalize_price(&self.max_price),
            ..self.clone()
        }
    }
}

/// A price without trailing zeros after its decimal point (`0.100000` →
/// `0.1`, `1.0` → `1`); text that is not a decimal number is kept.
pub fn normalize_price(price: &str) -> String {
    let price = price.trim();
    if price.is_empty() || !price.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return price.to_string();
    }
    match price.split_once('.') {
        Some((whole, fraction)) => {
            let fraction = fraction.trim_end_matches('0');
            let whole = if whole.is_empty() { "0" } else { whole };
            if fraction.is_empty() {
                whole.to_string()
            } else {
                format!("{whole}.{fraction}")
            }
        }
        None => price.to_string(),
    }
}

impl FieldValue for SpotMarket {
    fn render(&self) -> String {
        let mut text = format!("spot, at most {} an hour", self.max_price);
        if let Some(minutes) = self.block_duration_minutes {
            text.push_str(&format!(", {minutes}-minute block"));
        }
        if let Some(behavior) = &self.interruption_behavior {
            text.push_str(&format!(", {behavior} on interruption"));
        }
        text
    }
}

/// What the launch template should be.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchTemplate {
    /// The task name and the template's name.
    pub name: String,
    /// The instance group, for messages.
    pub instance_group: String,
    /// `ami-...` or `owner/name`.
    pub image: String,
    pub instance_type: String,
    pub root_volume: RootVolume,
    /// `required` (IMDSv2 only) or `optional`.
    pub http_tokens: String,
    pub http_put_response_hop_limit: i32,
    pub instance_profile: OutputRef<IamInstanceProfileOutput>,
    /// The profile exists already with its role (`spec.iam.profile`): no
    /// task adds a role to it, so there is none to wait for.
    pub shared_profile: bool,
    /// The groups kops manages, by task.
    pub security_groups: Vec<OutputRef<SecurityGroupId>>,
    /// Existing groups by id (`additionalSecurityGroups`).
    pub additional_security_group_ids: Vec<String>,
    pub ssh_key: Option<OutputRef<SshKeyName>>,
    pub associate_public_ip: bool,
    /// The group's subnets have IPv6: one IPv6 address per instance, and
    /// the instance metadata service on IPv6 too.
    pub ipv6: bool,
    pub detailed_monitoring: bool,
    /// Data volumes besides the root one.
    pub extra_volumes: Vec<ExtraVolume>,
    /// `spec.cpuCredits` of burstable instance types.
    pub cpu_credits: Option<String>,
    /// Spot instances (`spec.maxPrice` of a group without a
    /// mixed-instances policy); `None` for on-demand ones.
    pub spot: Option<SpotMarket>,
    /// The user-data script, in clear; sent base64-encoded.
    pub user_data: String,
    /// The tags of the template, and of the instances, volumes and network
    /// interfaces launched from it.
    pub tags: Tags,
}

/// The parts of a template version kops sets, normalised for comparison.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TemplateData {
    pub image_id: String,
    pub instance_type: String,
    pub root_volume: Option<RootVolume>,
    pub http_tokens: String,
    pub http_put_response_hop_limit: i32,
    pub instance_profile: String,
    /// Sorted.
    pub security_groups: Vec<String>,
    pub key_name: Option<String>,
    pub associate_public_ip: bool,
    pub ipv6_address_count: i32,
    pub http_protocol_ipv6: bool,
    pub detailed_monitoring: bool,
    /// Base64.
    pub user_data: String,
    pub instance_tags: Tags,
    /// Sorted by device.
    pub extra_volumes: Vec<ExtraVolume>,
    /// `standard` or `unlimited` for burstable types.
    pub cpu_credits: Option<String>,
    /// The spot request, price normalised.
    pub spot: Option<SpotMarket>,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct LaunchTemplateActual {
    pub id: String,
    pub default_version: i64,
    /// The template's latest version number.
    pub latest_version: i64,
    /// The template's own tags.
    pub tags: Tags,
    /// The default version's data.
    pub data: TemplateData,
    /// The image the spec names, resolved in this run.
    pub resolved_image: String,
}

impl LaunchTemplate {
    pub const KIND: &'static str = "LaunchTemplate";

    /// The handle autoscaling groups keep to read the template id and version.
    pub fn output_ref(name: &str) -> OutputRef<LaunchTemplateOutput> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }

    fn encoded_user_data(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.user_data.as_bytes())
    }

    /// The data this template should hold; references not known yet (a dry
    /// run before their objects exist) are shown as `<Kind/name>`.
    fn expected(&self, image_id: &str, deps: &Outputs) -> Result<TemplateData, TaskError> {
        let mut groups = self.additional_security_group_ids.clone();
        for group in &self.security_groups {
            groups.push(match deps.try_get(group)? {
                Some(id) => id.0.clone(),
                None => format!("<{}>", group.key()),
            });
        }
        groups.sort();
        groups.dedup();
        let key_name = match &self.ssh_key {
            Some(key) => Some(match deps.try_get(key)? {
                Some(name) => name.0.clone(),
                None => key.key().name.clone(),
            }),
            None => None,
        };
        Ok(TemplateData {
            image_id: image_id.to_string(),
            instance_type: self.instance_type.clone(),
            root_volume: Some(self.root_volume.clone()),
            http_tokens: self.http_tokens.clone(),
            http_put_response_hop_limit: self.http_put_response_hop_limit,
            instance_profile: self.instance_profile.key().name.clone(),
            security_groups: groups,
            key_name,
            associate_public_ip: self.associate_public_ip,
            ipv6_address_count: i32::from(self.ipv6),
            http_protocol_ipv6: self.ipv6,
            detailed_monitoring: self.detailed_monitoring,
            user_data: self.encoded_user_data(),
            instance_tags: self.tags.clone(),
            extra_volumes: {
                let mut v = self.extra_volumes.clone();
                v.sort();
                v
            },
            cpu_credits: self.cpu_credits.clone(),
            spot: self.spot.as_ref().map(SpotMarket::normalized),
        })
    }

    /// The request for a new template or version.
    fn request(
        &self,
        image: &crate::context::Image,
        deps: &Outputs,
    ) -> Result<RequestLaunchTemplateData, TaskError> {
        let profile = deps.get(&self.instance_profile)?;
        let mut groups = self.additional_security_group_ids.clone();
        for group in &self.security_groups {
            groups.push(deps.get(group)?.0.clone());
        }
        groups.sort();
        groups.dedup();
        let key_name = match &self.ssh_key {
            Some(key) => Some(deps.get(key)?.0.clone()),
            None => None,
        };
        let volume = &self.root_volume;
        let ebs = LaunchTemplateEbsBlockDeviceRequest::builder()
            .volume_size(volume.size)
            .volume_type(VolumeType::from(volume.volume_type.as_str()))
            .set_iops(volume.iops)
            .set_throughput(volume.throughput)
            .encrypted(volume.encrypted)
            .set_kms_key_id(volume.kms_key_id.clone())
            .delete_on_termination(true)
            .build();
        let tag_specs = [
            ResourceType::Instance,
            ResourceType::Volume,
            ResourceType::NetworkInterface,
        ]
        .into_iter()
        .map(|kind| {
            LaunchTemplateTagSpecificationRequest::builder()
                .resource_type(kind)
                .set_tags(Some(ec2_tags(&self.tags)))
                .build()
        })
        .collect();
        let mut mappings = vec![LaunchTemplateBlockDeviceMappingRequest::builder()
            .device_name(&image.root_device_name)
            .ebs(ebs)
            .build()];
        for extra in &self.extra_volumes {
            mappings.push(
                LaunchTemplateBlockDeviceMappingRequest::builder()
                    .device_name(&extra.device)
                    .ebs(
                        LaunchTemplateEbsBlockDeviceRequest::builder()
                            .volume_size(extra.size)
                            .volume_type(VolumeType::from(extra.volume_type.as_str()))
                            .set_iops(extra.iops)
                            .set_throughput(extra.throughput)
                            .encrypted(extra.encrypted)
                            .set_kms_key_id(extra.kms_key_id.clone())
                            .delete_on_termination(extra.delete_on_termination)
                            .build(),
                    )
                    .build(),
            );
        }
        Ok(RequestLaunchTemplateData::builder()
            .set_credit_specification(self.cpu_credits.as_ref().map(|c| {
                aws_sdk_ec2::types::CreditSpecificationRequest::builder()
                    .cpu_credits(c)
                    .build()
            }))
            .image_id(&image.id)
            .instance_type(aws_sdk_ec2::types::InstanceType::from(
                self.instance_type.as_str(),
            ))
            .set_block_device_mappings(Some(mappings))
            .iam_instance_profile(
                LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                    .name(&profile.name)
                    .build(),
            )
            .metadata_options(
                LaunchTemplateInstanceMetadataOptionsRequest::builder()
                    .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::Enabled)
                    .http_tokens(LaunchTemplateHttpTokensState::from(
                        self.http_tokens.as_str(),
                    ))
                    .http_put_response_hop_limit(self.http_put_response_hop_limit)
                    .http_protocol_ipv6(if self.ipv6 {
                        LaunchTemplateInstanceMetadataProtocolIpv6::Enabled
                    } else {
                        LaunchTemplateInstanceMetadataProtocolIpv6::Disabled
                    })
                    .build(),
            )
            .network_interfaces(
                LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                    .device_index(0)
                    .associate_public_ip_address(self.associate_public_ip)
                    .ipv6_address_count(i32::from(self.ipv6))
                    .delete_on_termination(true)
                    .set_groups(Some(groups))
                    .build(),
            )
            .set_key_name(key_name)
            .set_instance_market_options(self.spot.as_ref().map(|spot| {
                LaunchTemplateInstanceMarketOptionsRequest::builder()
                    .market_type(MarketType::Spot)
                    .spot_options(
                        LaunchTemplateSpotMarketOptionsRequest::builder()
                            .max_price(&spot.max_price)
                            .set_block_duration_minutes(spot.block_duration_minutes)
                            .set_instance_interruption_behavior(
                                spot.interruption_behavior
                                    .as_deref()
                                    .map(InstanceInterruptionBehavior::from),
                            )
                            .build(),
                    )
                    .build()
            }))
            .monitoring(
                LaunchTemplatesMonitoringRequest::builder()
                    .enabled(self.detailed_monitoring)
                    .build(),
            )
            // An empty user data (a bastion's) is left out, as kops does.
            .set_user_data((!self.user_data.is_empty()).then(|| self.encoded_user_data()))
            .set_tag_specifications(Some(tag_specs))
            .build())
    }
}

/// The data of a version as AWS returns it, normalised; the root volume is
/// the mapping of `root_device_name`.
pub fn template_data(data: &ResponseLaunchTemplateData, root_device_name: &str) -> TemplateData {
    let root_volume = data
        .block_device_mappings()
        .iter()
        .find(|m| m.device_name() == Some(root_device_name))
        .and_then(|m| m.ebs())
        .map(|ebs| RootVolume {
            size: ebs.volume_size().unwrap_or_default(),
            volume_type: ebs
                .volume_type()
                .map(|t| t.as_str().to_string())
                .unwrap_or_default(),
            iops: ebs.iops(),
            throughput: ebs.throughput(),
            encrypted: ebs.encrypted().unwrap_or(false),
            kms_key_id: ebs.kms_key_id().map(str::to_string),
        });
    let metadata = data.metadata_options();
    let interface = data.network_interfaces().first();
    let mut groups: Vec<String> = interface.map(|i| i.groups().to_vec()).unwrap_or_default();
    groups.extend(data.security_group_ids().iter().cloned());
    groups.sort();
    groups.dedup();
    let mut extra_volumes: Vec<ExtraVolume> = data
        .block_device_mappings()
        .iter()
        .filter(|m| m.device_name() != Some(root_device_name))
        .filter_map(|m| {
            let ebs = m.ebs()?;
            Some(ExtraVolume {
                device: m.device_name()?.to_string(),
                size: ebs.volume_size().unwrap_or_default(),
                volume_type: ebs
                    .volume_type()
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_default(),
                iops: ebs.iops(),
                throughput: ebs.throughput(),
                encrypted: ebs.encrypted().unwrap_or(false),
                kms_key_id: ebs.kms_key_id().map(str::to_string),
                delete_on_termination: ebs.delete_on_termination().unwrap_or(true),
            })
        })
        .collect();
    extra_volumes.sort();
    // As kops reads it: market options without a price are no spot request.
    let spot = data
        .instance_market_options()
        .and_then(|m| m.spot_options())
        .and_then(|s| {
            let price = s.max_price().filter(|p| !p.is_empty())?;
            Some(
                SpotMarket {
                    max_price: price.to_string(),
                    block_duration_minutes: s.block_duration_minutes(),
                    interruption_behavior: s
                        .instance_interruption_behavior()
                        .map(|b| b.as_str().to_string()),
                }
                .normalized(),
            )
        });
    TemplateData {
        extra_volumes,
        spot,
        cpu_credits: data
            .credit_specification()
            .and_then(|c| c.cpu_credits())
            .map(str::to_string),
        image_id: data.image_id().unwrap_or_default().to_string(),
        instance_type: data
            .instance_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default(),
        root_volume,
        http_tokens: metadata
            .and_then(|m| m.http_tokens())
            .map(|t| t.as_str().to_string())
            .unwrap_or_else(|| "optional".to_string()),
        http_put_response_hop_limit: metadata
            .and_then(|m| m.http_put_response_hop_limit())
            .unwrap_or(1),
        instance_profile: data
            .iam_instance_profile()
            .and_then(|p| p.name())
            .unwrap_or_default()
            .to_string(),
        security_groups: groups,
        key_name: data.key_name().map(str::to_string),
        associate_public_ip: interface
            .and_then(|i| i.associate_public_ip_address())
            .unwrap_or(false),
        ipv6_address_count: interface
            .map(|i| {
                i.ipv6_address_count()
                    .unwrap_or(0)
                    .max(i32::try_from(i.ipv6_addresses().len()).unwrap_or(i32::MAX))
            })
            .unwrap_or(0),
        http_protocol_ipv6: metadata.and_then(|m| m.http_protocol_ipv6())
            == Some(&LaunchTemplateInstanceMetadataProtocolIpv6::Enabled),
        detailed_monitoring: data.monitoring().and_then(|m| m.enabled()).unwrap_or(false),
        user_data: data.user_data().unwrap_or_default().to_string(),
        instance_tags: data
            .tag_specifications()
            .iter()
            .find(|t| t.resource_type() == Some(&ResourceType::Instance))
            .map(|t| tag_map(t.tags()))
            .unwrap_or_default(),
    }
}

fn summarize_user_data(encoded: &String) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.as_bytes())
        .map(|b| b.len())
        .unwrap_or(0);
    format!("<user data, {bytes} bytes>")
}

impl Task<AwsContext> for LaunchTemplate {
    type Actual = LaunchTemplateActual;
    type Output = LaunchTemplateOutput;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        let mut keys = vec![self.instance_profile.key().clone()];
        if !self.shared_profile {
            // Instances launched before the role is in the profile would
            // start without credentials.
            keys.push(TaskKey::new(
                IamInstanceProfileRole::KIND,
                &self.instance_profile.key().name,
            ));
        }
        keys.extend(self.security_groups.iter().map(|g| g.key().clone()));
        keys.extend(self.ssh_key.iter().map(|k| k.key().clone()));
        keys
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<LaunchTemplateActual>, TaskError> {
        // Resolved first, also in a dry run: a missing image is reported
        // before anything is created.
        let image = ctx.image(&self.instance_group, &self.image).await?;
        let cached = ctx
            .launch_templates()
            .await?
            .iter()
            .find(|t| t.launch_template_name() == Some(self.name.as_str()))
            .cloned();
        let template = match cached {
            Some(t) => t,
            None => {
                // Created earlier in this run (a retried apply).
                let Some(id) = ctx.created_id(&self.key()) else {
                    return Ok(None);
                };
                let out = ctx
                    .ec2()
                    .describe_launch_templates()
                    .launch_template_ids(&id)
                    .send()
                    .await
                    .map_err(|e| classify("DescribeLaunchTemplates", &self.name, e))?;
                match out.launch_templates().first() {
                    Some(t) => t.clone(),
                    None => return Ok(None),
                }
            }
        };
        let id = template
            .launch_template_id()
            .unwrap_or_default()
            .to_string();
        // The run's one read of every template's default version answers
        // the first look; a template not in it, or a second look (a retry
        // after this task wrote a version), is read by id.
        let snapshot = if ctx.first_look(&self.key()) {
            ctx.default_template_version(&id).await?
        } else {
            None
        };
        let version = match snapshot {
            Some(v) => Some(v),
            None => ctx
                .ec2()
                .describe_launch_template_versions()
                .launch_template_id(&id)
                .versions("$Default")
                .send()
                .await
                .map_err(|e| classify("DescribeLaunchTemplateVersions", &self.name, e))?
                .launch_template_versions()
                .first()
                .cloned(),
        };
        let version = version.as_ref();
        let data = version
            .and_then(|v| v.launch_template_data())
            .map(|d| template_data(d, &image.root_device_name))
            .unwrap_or_default();
        let default_version = version
            .and_then(|v| v.version_number())
            .or(template.default_version_number())
            .unwrap_or(1);
        Ok(Some(LaunchTemplateActual {
            id,
            default_version,
            latest_version: template.latest_version_number().unwrap_or(default_version),
            tags: tag_map(template.tags()),
            data,
            resolved_image: image.id,
        }))
    }

    fn diff(
        &self,
        actual: Option<&LaunchTemplateActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let image = actual
            .map(|a| a.resolved_image.as_str())
            .unwrap_or(self.image.as_str());
        let expected = self.expected(image, deps)?;
        let data = actual.map(|a| &a.data);
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        let instance_tags = data.map(|d| managed_tags(&d.instance_tags, &self.tags));
        let mut changes = Changes::new();
        changes
            .compare(
                "imageId",
                data.map(|d| d.image_id.as_str()),
                expected.image_id.as_str(),
            )
            .compare(
                "instanceType",
                data.map(|d| d.instance_type.as_str()),
                expected.instance_type.as_str(),
            )
            .compare(
                "rootVolume",
                data.map(|d| &d.root_volume),
                &expected.root_volume,
            )
            .compare(
                "httpTokens",
                data.map(|d| d.http_tokens.as_str()),
                expected.http_tokens.as_str(),
            )
            .compare(
                "httpPutResponseHopLimit",
                data.map(|d| &d.http_put_response_hop_limit),
                &expected.http_put_response_hop_limit,
            )
            .compare(
                "iamInstanceProfile",
                data.map(|d| d.instance_profile.as_str()),
                expected.instance_profile.as_str(),
            )
            .compare(
                "securityGroups",
                data.map(|d| &d.security_groups),
                &expected.security_groups,
            )
            .compare("sshKey", data.map(|d| &d.key_name), &expected.key_name)
            .compare(
                "associatePublicIp",
                data.map(|d| &d.associate_public_ip),
                &expected.associate_public_ip,
            )
            .compare(
                "ipv6AddressCount",
                data.map(|d| &d.ipv6_address_count),
                &expected.ipv6_address_count,
            )
            .compare(
                "httpProtocolIpv6",
                data.map(|d| &d.http_protocol_ipv6),
                &expected.http_protocol_ipv6,
            )
            .compare(
                "detailedMonitoring",
                data.map(|d| &d.detailed_monitoring),
                &expected.detailed_monitoring,
            )
            .compare_with(
                "userData",
                data.map(|d| &d.user_data),
                &expected.user_data,
                summarize_user_data,
            )
            .compare("instanceTags", instance_tags.as_ref(), &self.tags)
            .compare("tags", tags.as_ref(), &self.tags);
        if !expected.extra_volumes.is_empty() || data.is_some_and(|d| !d.extra_volumes.is_empty()) {
            changes.compare(
                "volumes",
                data.map(|d| &d.extra_volumes),
                &expected.extra_volumes,
            );
        }
        if expected.spot.is_some() || data.is_some_and(|d| d.spot.is_some()) {
            changes.compare("spot", data.map(|d| &d.spot), &expected.spot);
        }
        if expected.cpu_credits.is_some() {
            changes.compare(
                "cpuCredits",
                data.map(|d| &d.cpu_credits),
                &expected.cpu_credits,
            );
        }
        Ok(changes)
    }

    fn output(&self, actual: &LaunchTemplateActual) -> LaunchTemplateOutput {
        LaunchTemplateOutput {
            id: actual.id.clone(),
            version: actual.default_version,
            latest_version: actual.latest_version,
        }
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&LaunchTemplateActual>,
        changes: &Changes,
    ) -> Result<LaunchTemplateOutput, TaskError> {
        let image = ctx.image(&self.instance_group, &self.image).await?;
        let data = self.request(&image, deps)?;
        let Some(actual) = actual else {
            let out = ctx
                .ec2()
                .create_launch_template()
                .launch_template_name(&self.name)
                .launch_template_data(data)
                .tag_specifications(tag_spec(ResourceType::LaunchTemplate, &self.tags))
                .send()
                .await
                .map_err(|e| classify("CreateLaunchTemplate", &self.name, e))?;
            let template = out.launch_template().ok_or_else(|| {
                TaskError::fatal(format!(
                    "CreateLaunchTemplate for `{}` returned no template",
                    self.name
                ))
            })?;
            let id = template
                .launch_template_id()
                .unwrap_or_default()
                .to_string();
            ctx.remember_created(self.key(), &id);
            let version = template.latest_version_number().unwrap_or(1);
            return Ok(LaunchTemplateOutput {
                id,
                version,
                latest_version: version,
            });
        };
        let data_changed = changes.iter().any(|c| c.field != "tags");
        let mut version = actual.default_version;
        if data_changed {
            // A version made by an earlier attempt of this run (whose
            // ModifyLaunchTemplate failed) is used, not made again.
            let version_key = TaskKey::new("LaunchTemplateVersion", &self.name);
            version = match ctx
                .created_id(&version_key)
                .and_then(|v| v.parse::<i64>().ok())
            {
                Some(made) => made,
                None => {
                    let out = ctx
                        .ec2()
                        .create_launch_template_version()
                        .launch_template_id(&actual.id)
                        .launch_template_data(data)
                        .send()
                        .await
                        .map_err(|e| classify("CreateLaunchTemplateVersion", &self.name, e))?;
                    let made = out
                        .launch_template_version()
                        .and_then(|v| v.version_number())
                        .ok_or_else(|| {
                            TaskError::fatal(format!(
                                "CreateLaunchTemplateVersion for `{}` returned no version",
                                self.name
                            ))
                        })?;
                    ctx.remember_created(version_key, &made.to_string());
                    made
                }
            };
            ctx.ec2()
                .modify_launch_template()
                .launch_template_id(&actual.id)
                .default_version(version.to_string())
                .send()
                .await
                .map_err(|e| classify("ModifyLaunchTemplate", &self.name, e))?;
        }
        write_missing_tags(ctx, &actual.id, &actual.tags, &self.tags).await?;
        Ok(LaunchTemplateOutput {
            id: actual.id.clone(),
            version,
            // A version made now is the newest.
            latest_version: if data_changed {
                version.max(actual.latest_version)
            } else {
                actual.latest_version
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_compare_as_numbers() {
        assert_eq!(normalize_price("0.100000"), "0.1");
        assert_eq!(normalize_price("0.1"), "0.1");
        assert_eq!(normalize_price("1.0"), "1");
        assert_eq!(normalize_price("2"), "2");
        assert_eq!(normalize_price(".5"), "0.5");
        assert_eq!(normalize_price("cheap"), "cheap");
    }

    #[test]
    fn market_options_without_a_price_are_on_demand() {
        use aws_sdk_ec2::types::{
            LaunchTemplateInstanceMarketOptions, LaunchTemplateSpotMarketOptions,
        };
        let read = |price: Option<&str>| {
            let data = ResponseLaunchTemplateData::builder()
                .instance_market_options(
                    LaunchTemplateInstanceMarketOptions::builder()
                        .market_type(MarketType::Spot)
                        .spot_options(
                            LaunchTemplateSpotMarketOptions::builder()
                                .set_max_price(price.map(str::to_string))
                                .build(),
                        )
                        .build(),
                )
                .build();
            template_data(&data, "/dev/xvda").spot
        };
        assert_eq!(read(None), None);
        assert_eq!(read(Some("")), None);
        assert_eq!(
            read(Some("0.050000")),
            Some(SpotMarket {
                max_price: "0.05".into(),
                block_duration_minutes: None,
                interruption_behavior: None,
            })
        );
    }
}
