//! The cluster's DHCP option set: the domain name instances get
//! (`ec2.internal` in us-east-1, `<region>.compute.internal` elsewhere) and
//! Amazon's resolver. Created for an owned VPC only; AWS cannot change an
//! option set in place, so a different domain is refused.

use aws_sdk_ec2::types::{NewDhcpConfiguration, ResourceType};
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, name_tag, tag_map, tag_spec, AwsContext, Tags};
use crate::tasks::ec2::{not_visible_yet, unless_not_found, write_missing_tags};
use crate::tasks::managed_tags;

/// A DHCP option set id, what the VPC association reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DhcpOptionsId(pub String);

impl FieldValue for DhcpOptionsId {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// What the option set should be.
#[derive(Debug, Clone, PartialEq)]
pub struct DhcpOptions {
    /// The task name and `Name` tag: the cluster's name.
    pub name: String,
    pub domain_name: String,
    pub domain_name_servers: Vec<String>,
    pub tags: Tags,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct DhcpOptionsActual {
    pub id: DhcpOptionsId,
    pub domain_name: Option<String>,
    pub domain_name_servers: Vec<String>,
    pub tags: Tags,
}

impl DhcpOptions {
    pub const KIND: &'static str = "DHCPOptions";

    /// The handle dependants keep to read the option set's id.
    pub fn id_ref(name: &str) -> OutputRef<DhcpOptionsId> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }

    /// The kops domain name of a region's instances.
    pub fn domain_name_for(region: &str) -> String {
        if region == "us-east-1" {
            "ec2.internal".to_string()
        } else {
            format!("{region}.compute.internal")
        }
    }
}

fn actual_of(options: &aws_sdk_ec2::types::DhcpOptions) -> DhcpOptionsActual {
    let values = |key: &str| -> Vec<String> {
        options
            .dhcp_configurations()
            .iter()
            .filter(|c| c.key() == Some(key))
            .flat_map(|c| c.values())
            .filter_map(|v| v.value().map(str::to_string))
            .collect()
    };
    DhcpOptionsActual {
        id: DhcpOptionsId(options.dhcp_options_id().unwrap_or_default().to_string()),
        domain_name: values("domain-name").into_iter().next(),
        domain_name_servers: values("domain-name-servers"),
        tags: tag_map(options.tags()),
    }
}

impl Task<AwsContext> for DhcpOptions {
    type Actual = DhcpOptionsActual;
    type Output = DhcpOptionsId;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<DhcpOptionsActual>, TaskError> {
        let named: Vec<_> = ctx
            .dhcp_options()
            .await?
            .iter()
            .filter(|o| name_tag(o.tags()) == Some(self.name.as_str()))
            .collect();
        if let [options] = named.as_slice() {
            return Ok(Some(actual_of(options)));
        }
        if !named.is_empty() {
            // A killed apply can leave a second option set with the
            // cluster's name (its tags landed after the next run looked).
            // The one the cluster's VPC uses is the cluster's; the other
            // is left for `delete cluster`, which removes both by tag.
            let in_use: Vec<&str> = ctx
                .vpcs()
                .await?
                .iter()
                .filter_map(|v| v.dhcp_options_id())
                .collect();
            let chosen = named
                .iter()
                .find(|o| o.dhcp_options_id().is_some_and(|id| in_use.contains(&id)))
                .unwrap_or(&named[0]);
            return Ok(Some(actual_of(chosen)));
        }
        let Some(id) = ctx.created_id(&self.key()) else {
            return Ok(None);
        };
        let out = unless_not_found(
            "DescribeDhcpOptions",
            &id,
            ctx.ec2()
                .describe_dhcp_options()
                .dhcp_options_ids(&id)
                .send()
                .await,
        )?;
        match out.as_ref().and_then(|o| o.dhcp_options().first()) {
            Some(options) => Ok(Some(actual_of(options))),
            None => Err(not_visible_yet("DHCP options", &id)),
        }
    }

    fn diff(&self, actual: Option<&DhcpOptionsActual>, _: &Outputs) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        changes
            .compare(
                "domainName",
                actual.map(|a| &a.domain_name),
                &Some(self.domain_name.clone()),
            )
            .compare(
                "domainNameServers",
                actual.map(|a| &a.domain_name_servers),
                &self.domain_name_servers,
            )
            .compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&DhcpOptionsActual>,
        changes: &Changes,
    ) -> Result<(), TaskError> {
        let Some(actual) = actual else { return Ok(()) };
        if changes.has("domainName") {
            return Err(TaskError::immutable(
                "domainName",
                &actual.domain_name,
                &Some(self.domain_name.clone()),
            ));
        }
        if changes.has("domainNameServers") {
            return Err(TaskError::immutable(
                "domainNameServers",
                &actual.domain_name_servers,
                &self.domain_name_servers,
            ));
        }
        Ok(())
    }

    fn output(&self, actual: &DhcpOptionsActual) -> DhcpOptionsId {
        actual.id.clone()
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
        actual: Option<&DhcpOptionsActual>,
        _: &Changes,
    ) -> Result<DhcpOptionsId, TaskError> {
        if let Some(actual) = actual {
            write_missing_tags(ctx, &actual.id.0, &actual.tags, &self.tags).await?;
            return Ok(actual.id.clone());
        }
        let configuration = |key: &str, values: &[String]| {
            NewDhcpConfiguration::builder()
                .key(key)
                .set_values(Some(values.to_vec()))
                .build()
        };
        let out = ctx
            .ec2()
            .create_dhcp_options()
            .dhcp_configurations(configuration(
                "domain-name",
                std::slice::from_ref(&self.domain_name),
            ))
            .dhcp_configurations(configuration(
                "domain-name-servers",
                &self.domain_name_servers,
            ))
            .tag_specifications(tag_spec(ResourceType::DhcpOptions, &self.tags))
            .send()
            .await
            .map_err(|e| classify("CreateDhcpOptions", &self.name, e))?;
        let created = out.dhcp_options();
        let id = created
            .and_then(|o| o.dhcp_options_id())
            .ok_or_else(|| {
                TaskError::fatal(format!(
                    "CreateDhcpOptions for `{}` returned no id",
                    self.name
                ))
            })?
            .to_string();
        ctx.remember_created(self.key(), &id);
        // AWS returns the tags given at creation; an endpoint that dropped
        // them (moto ignores TagSpecifications here) gets them written.
        let returned = created.map(|o| tag_map(o.tags())).unwrap_or_default();
        write_missing_tags(ctx, &id, &returned, &self.tags).await?;
        Ok(DhcpOptionsId(id))
    }
}
