//! A Route 53 alias record pointing at a load balancer: `api.<cluster>` (A
//! and AAAA) at the API load balancer, `api.internal.<cluster>` when the
//! control plane uses the load balancer internally too, the bastion's name
//! at the bastion's.
//!
//! The hosted zone is resolved before the graph is built (by id, by name,
//! or as the longest zone suffix of the cluster name; see
//! [`crate::find_hosted_zone`]). A zone's records are listed once per run
//! ([`AwsContext::record_sets`]) and written with one UPSERT per record.

use aws_sdk_route53::types::{
    AliasTarget, Change, ChangeAction, ChangeBatch, ResourceRecordSet, RrType,
};
use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext};
use crate::tasks::network_load_balancer::LoadBalancerOutput;

/// What the record should be.
#[derive(Debug, Clone, PartialEq)]
pub struct DnsName {
    /// The task name: the record name, `-AAAA` appended for the IPv6 one.
    pub name: String,
    /// The DNS name, without the trailing dot.
    pub record_name: String,
    /// `A` or `AAAA`.
    pub record_type: String,
    /// The hosted zone id (`Z...`, without `/hostedzone/`).
    pub zone_id: String,
    pub target: OutputRef<LoadBalancerOutput>,
}

/// What exists: the alias target.
#[derive(Debug, Clone)]
pub struct DnsNameActual {
    /// Lower case, without the trailing dot.
    pub target_dns_name: String,
    pub target_zone_id: String,
}

impl DnsName {
    pub const KIND: &'static str = "DNSName";
}

/// A DNS name as Route 53 returns it: lower case, `\052` for `*`, no
/// trailing dot.
pub fn normalise_dns_name(name: &str) -> String {
    name.trim_end_matches('.')
        .replace("\\052", "*")
        .to_ascii_lowercase()
}

impl Task<AwsContext> for DnsName {
    type Actual = DnsNameActual;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.target.key().clone()]
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<DnsNameActual>, TaskError> {
        let wanted = normalise_dns_name(&self.record_name);
        Ok(ctx
            .record_sets(&self.zone_id)
            .await?
            .iter()
            .find(|r| {
                normalise_dns_name(r.name()) == wanted && r.r#type().as_str() == self.record_type
            })
            .and_then(|r| r.alias_target())
            .map(|a| DnsNameActual {
                target_dns_name: normalise_dns_name(a.dns_name()),
                target_zone_id: a.hosted_zone_id().to_string(),
            }))
    }

    fn diff(&self, actual: Option<&DnsNameActual>, deps: &Outputs) -> Result<Changes, TaskError> {
        let target = deps
            .try_get(&self.target)?
            .map(|t| normalise_dns_name(&t.dns_name));
        let mut changes = Changes::new();
        changes.compare_reference(
            "aliasTarget",
            actual.map(|a| a.target_dns_name.as_str()),
            target.as_deref(),
            self.target.key(),
        );
        Ok(changes)
    }

    fn output(&self, _: &DnsNameActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        _: Option<&DnsNameActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let target = deps.get(&self.target)?;
        let alias = AliasTarget::builder()
            .dns_name(&target.dns_name)
            .hosted_zone_id(&target.hosted_zone_id)
            .evaluate_target_health(false)
            .build()
            .map_err(|e| TaskError::fatal(format!("alias of `{}`: {e}", self.name)))?;
        let record = ResourceRecordSet::builder()
            .name(&self.record_name)
            .r#type(RrType::from(self.record_type.as_str()))
            .alias_target(alias)
            .build()
            .map_err(|e| TaskError::fatal(format!("record `{}`: {e}", self.name)))?;
        let change = Change::builder()
            .action(ChangeAction::Upsert)
            .resource_record_set(record)
            .build()
            .map_err(|e| TaskError::fatal(format!("change of `{}`: {e}", self.name)))?;
        let batch = ChangeBatch::builder()
            .changes(change)
            .comment("kops-rs update cluster")
            .build()
            .map_err(|e| TaskError::fatal(format!("change batch of `{}`: {e}", self.name)))?;
        ctx.cloud
            .route53()
            .change_resource_record_sets()
            .hosted_zone_id(&self.zone_id)
            .change_batch(batch)
            .send()
            .await
            .map_err(|e| classify("ChangeResourceRecordSets", &self.name, e))?;
        Ok(())
    }
}
