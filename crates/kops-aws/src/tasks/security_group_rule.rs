//! One ingress or egress permission of a security group: a protocol, a port
//! range and one source (an IPv4 or IPv6 CIDR, a prefix list, or another
//! security group).
//!
//! Rules are found without a call of their own: the group's `IpPermissions`
//! (or `IpPermissionsEgress`) come with the batched `DescribeSecurityGroups`
//! the context makes once per run, and a rule exists when one permission
//! there has its protocol, ports and source. A rule has nothing to modify: it
//! exists or it is authorized. A group created in this run is not in that
//! cache: it holds only the egress-to-everywhere rule AWS gives every new VPC
//! group (which is kops' IPv4 egress rule, so it is kept, not revoked), and
//! its other rules are authorized. AWS answering
//! `InvalidPermission.Duplicate` (a rule written by an interrupted run)
//! counts as success. AWS' own all-egress rules (`0.0.0.0/0`, and `::/0`
//! in a VPC with IPv6) are never authorized, so never tagged that way: in
//! the run that creates their group each is read by id (one
//! `DescribeSecurityGroupRules`) and tagged as kops tags it. Later runs do
//! not read rule tags (the no-op stays one batched describe per type), so
//! such a rule of a group made before this is not tagged afterwards.

use aws_sdk_ec2::types::{
    IpPermission, IpRange, Ipv6Range, PrefixListId, ResourceType, UserIdGroupPair,
};
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, tag_spec, AwsContext, Tags};
use crate::tasks::ec2::write_missing_tags;
use crate::tasks::managed_tags;
use crate::tasks::security_group::SecurityGroupId;

/// Where the traffic of a rule comes from (ingress) or goes to (egress).
#[derive(Debug, Clone, PartialEq)]
pub enum RuleTarget {
    /// An IPv4 CIDR, `0.0.0.0/0`.
    Cidr(String),
    /// An IPv6 CIDR, `::/0`.
    Ipv6Cidr(String),
    /// A managed prefix list, `pl-...`.
    PrefixList(String),
    /// Another security group (or the same one).
    Group(OutputRef<SecurityGroupId>),
}

impl RuleTarget {
    /// A CIDR or prefix list as kops accepts it in `sshAccess`,
    /// `kubernetesApiAccess` and `nodePortAccess`.
    pub fn from_access(value: &str) -> RuleTarget {
        if value.starts_with("pl-") {
            RuleTarget::PrefixList(value.to_string())
        } else if value.contains(':') {
            RuleTarget::Ipv6Cidr(value.to_string())
        } else {
            RuleTarget::Cidr(value.to_string())
        }
    }
}

/// What the rule should be.
#[derive(Debug, Clone, PartialEq)]
pub struct SecurityGroupRule {
    /// The task name: kops' rule name (`from-nodes.<c>-ingress-tcp-1to2379-masters.<c>`).
    pub name: String,
    /// The group the rule belongs to.
    pub group: OutputRef<SecurityGroupId>,
    pub egress: bool,
    /// `tcp`, `udp`, `icmp`, `icmpv6`, a protocol number (`4`), or `None` for all.
    pub protocol: Option<String>,
    /// The first port (ICMP: the type); `None` for all ports.
    pub from_port: Option<i32>,
    /// The last port (ICMP: the code); `None` for all ports.
    pub to_port: Option<i32>,
    pub target: RuleTarget,
    /// Written when the rule is authorized, or, for the all-egress rules AWS
    /// gives every new group (`0.0.0.0/0`, and `::/0` in a VPC with IPv6),
    /// in the run that creates the group. Not compared afterwards: the
    /// group's permissions, which is how rules are found, carry no tags.
    pub tags: Tags,
}

/// The rule exists in this group.
#[derive(Debug, Clone)]
pub struct SecurityGroupRuleActual {
    pub group_id: String,
    /// The rule's id and tags, read only for AWS' default egress rules of a
    /// group created in this run.
    pub described: Option<(String, Tags)>,
}

impl SecurityGroupRule {
    pub const KIND: &'static str = "SecurityGroupRule";

    /// The protocol as AWS spells it, `-1` for all.
    pub fn aws_protocol(&self) -> &str {
        self.protocol.as_deref().unwrap_or("-1")
    }

    /// Whether AWS stores ports for this protocol (tcp, udp, icmp, icmpv6).
    fn has_ports(&self) -> bool {
        matches!(
            self.aws_protocol(),
            "tcp" | "udp" | "icmp" | "icmpv6" | "6" | "17" | "1" | "58"
        )
    }

    /// Whether a permission AWS reports for the group covers this rule,
    /// `source_group` being the id of the target group when the target is one.
    pub fn matches(&self, permission: &IpPermission, source_group: Option<&str>) -> bool {
        if !same_protocol(
            permission.ip_protocol().unwrap_or("-1"),
            self.aws_protocol(),
        ) {
            return false;
        }
        if self.has_ports()
            && (permission.from_port() != self.from_port || permission.to_port() != self.to_port)
        {
            return false;
        }
        match &self.target {
            RuleTarget::Cidr(cidr) => permission
                .ip_ranges()
                .iter()
                .any(|r| r.cidr_ip() == Some(cidr.as_str())),
            RuleTarget::Ipv6Cidr(cidr) => permission
                .ipv6_ranges()
                .iter()
                .any(|r| r.cidr_ipv6() == Some(cidr.as_str())),
            RuleTarget::PrefixList(id) => permission
                .prefix_list_ids()
                .iter()
                .any(|p| p.prefix_list_id() == Some(id.as_str())),
            RuleTarget::Group(_) => permission
                .user_id_group_pairs()
                .iter()
                .any(|p| p.group_id().is_some() && p.group_id() == source_group),
        }
    }

    fn permission(&self, source_group: Option<&str>) -> IpPermission {
        let mut p = IpPermission::builder().ip_protocol(self.aws_protocol());
        if self.has_ports() {
            p = p.set_from_port(self.from_port).set_to_port(self.to_port);
        }
        p = match &self.target {
            RuleTarget::Cidr(cidr) => p.ip_ranges(IpRange::builder().cidr_ip(cidr).build()),
            RuleTarget::Ipv6Cidr(cidr) => {
                p.ipv6_ranges(Ipv6Range::builder().cidr_ipv6(cidr).build())
            }
            RuleTarget::PrefixList(id) => {
                p.prefix_list_ids(PrefixListId::builder().prefix_list_id(id).build())
            }
            RuleTarget::Group(_) => p.user_id_group_pairs(
                UserIdGroupPair::builder()
                    .set_group_id(source_group.map(str::to_string))
                    .build(),
            ),
        };
        p.build()
    }

    /// AWS' own rules of every new VPC group: all egress to `0.0.0.0/0`,
    /// and to `::/0` when the VPC has an IPv6 block.
    fn is_default_egress(&self) -> bool {
        self.egress
            && self.aws_protocol() == "-1"
            && (self.target == RuleTarget::Cidr("0.0.0.0/0".into())
                || self.target == RuleTarget::Ipv6Cidr("::/0".into()))
    }

    /// The id and tags of AWS' default egress rule of `group_id` (one
    /// `DescribeSecurityGroupRules`), when this task tags that rule: kops
    /// tags it like its other rules, and it was never authorized with tags
    /// (authorizing it answers `InvalidPermission.Duplicate`).
    async fn describe_default_egress(
        &self,
        ctx: &AwsContext,
        group_id: &str,
    ) -> Result<Option<(String, Tags)>, TaskError> {
        if !self.is_default_egress() || self.tags.is_empty() {
            return Ok(None);
        }
        let out = ctx
            .ec2()
            .describe_security_group_rules()
            .filters(
                aws_sdk_ec2::types::Filter::builder()
                    .name("group-id")
                    .values(group_id)
                    .build(),
            )
            .send()
            .await
            .map_err(|e| classify("DescribeSecurityGroupRules", &self.name, e))?;
        Ok(out
            .security_group_rules()
            .iter()
            .find(|r| {
                r.is_egress() == Some(true)
                    && r.group_id() == Some(group_id)
                    && same_protocol(r.ip_protocol().unwrap_or("-1"), "-1")
                    && match &self.target {
                        RuleTarget::Cidr(cidr) => r.cidr_ipv4() == Some(cidr.as_str()),
                        RuleTarget::Ipv6Cidr(cidr) => r.cidr_ipv6() == Some(cidr.as_str()),
                        _ => false,
                    }
            })
            .and_then(|r| {
                let tags = r
                    .tags()
                    .iter()
                    .filter_map(|t| {
                        Some((
                            t.key()?.to_string(),
                            t.value().unwrap_or_default().to_string(),
                        ))
                    })
                    .collect();
                Some((r.security_group_rule_id()?.to_string(), tags))
            }))
    }

    fn direction(&self) -> &'static str {
        if self.egress {
            "egress"
        } else {
            "ingress"
        }
    }
}

/// `tcp` and `6` are the same protocol; AWS answers with names when it has one.
fn same_protocol(actual: &str, expected: &str) -> bool {
    fn normal(p: &str) -> &str {
        match p {
            "6" => "tcp",
            "17" => "udp",
            "1" => "icmp",
            "58" => "icmpv6",
            "all" => "-1",
            other => other,
        }
    }
    normal(&actual.to_ascii_lowercase()) == normal(&expected.to_ascii_lowercase())
}

impl Task<AwsContext> for SecurityGroupRule {
    type Actual = SecurityGroupRuleActual;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        let mut deps = vec![self.group.key().clone()];
        if let RuleTarget::Group(source) = &self.target {
            deps.push(source.key().clone());
        }
        deps
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
    ) -> Result<Option<SecurityGroupRuleActual>, TaskError> {
        // Groups that would be created have no rules yet.
        let Some(group_id) = deps.try_get(&self.group)? else {
            return Ok(None);
        };
        let source = match &self.target {
            RuleTarget::Group(source) => match deps.try_get(source)? {
                Some(id) => Some(id.0.as_str()),
                None => return Ok(None),
            },
            _ => None,
        };
        let groups = ctx.security_groups().await?;
        // A shared group (`securityGroupOverride`) is not in the cluster's
        // discovery; its task described it by id.
        let shared = ctx.described_shared_security_group(&group_id.0);
        let Some(group) = groups
            .iter()
            .find(|g| g.group_id() == Some(group_id.0.as_str()))
            .or(shared.as_ref())
        else {
            // Not in this run's discovery: the group was created in this
            // run, and AWS gave it only its default rules, all egress to
            // 0.0.0.0/0 (kops' own IPv4 egress rule) and, in a VPC with an
            // IPv6 block, to ::/0.
            if !self.is_default_egress() {
                return Ok(None);
            }
            let described = self.describe_default_egress(ctx, &group_id.0).await?;
            let ipv4 = matches!(self.target, RuleTarget::Cidr(_));
            return Ok(
                (ipv4 || described.is_some()).then(|| SecurityGroupRuleActual {
                    group_id: group_id.0.clone(),
                    described,
                }),
            );
        };
        let permissions = if self.egress {
            group.ip_permissions_egress()
        } else {
            group.ip_permissions()
        };
        // Found in the batched discovery: its tags are not read (that would
        // be a call per rule on every run); it was tagged when its group
        // was created.
        Ok(permissions
            .iter()
            .any(|p| self.matches(p, source))
            .then(|| SecurityGroupRuleActual {
                group_id: group_id.0.clone(),
                described: None,
            }))
    }

    fn diff(
        &self,
        actual: Option<&SecurityGroupRuleActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        if let Some(actual) = actual {
            if let Some((_, tags)) = &actual.described {
                changes.compare("tags", Some(&managed_tags(tags, &self.tags)), &self.tags);
            }
            return Ok(changes);
        }
        let group = deps.try_get(&self.group)?.map(|g| g.0.as_str());
        changes
            .compare_reference("securityGroup", None, group, self.group.key())
            .compare("direction", None, self.direction())
            .compare("protocol", None, self.aws_protocol());
        if self.has_ports() {
            changes.compare("fromPort", None, &self.from_port).compare(
                "toPort",
                None,
                &self.to_port,
            );
        }
        match &self.target {
            RuleTarget::Cidr(cidr) => changes.compare("cidr", None, cidr.as_str()),
            RuleTarget::Ipv6Cidr(cidr) => changes.compare("ipv6Cidr", None, cidr.as_str()),
            RuleTarget::PrefixList(id) => changes.compare("prefixList", None, id.as_str()),
            RuleTarget::Group(source) => {
                let id = deps.try_get(source)?.map(|g| g.0.as_str());
                changes.compare_reference("sourceGroup", None, id, source.key())
            }
        };
        Ok(changes)
    }

    fn output(&self, _: &SecurityGroupRuleActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&SecurityGroupRuleActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        if let Some(actual) = actual {
            if let Some((id, tags)) = &actual.described {
                write_missing_tags(ctx, id, tags, &self.tags).await?;
            }
            return Ok(());
        }
        let group_id = deps.get(&self.group)?.0.clone();
        let source = match &self.target {
            RuleTarget::Group(source) => Some(deps.get(source)?.0.clone()),
            _ => None,
        };
        let permission = self.permission(source.as_deref());
        let tags =
            (!self.tags.is_empty()).then(|| tag_spec(ResourceType::SecurityGroupRule, &self.tags));
        let result = if self.egress {
            ctx.ec2()
                .authorize_security_group_egress()
                .group_id(&group_id)
                .ip_permissions(permission)
                .set_tag_specifications(tags.map(|t| vec![t]))
                .send()
                .await
                .map(|_| ())
                .map_err(|e| duplicate_is_done("AuthorizeSecurityGroupEgress", &self.name, e))
        } else {
            ctx.ec2()
                .authorize_security_group_ingress()
                .group_id(&group_id)
                .ip_permissions(permission)
                .set_tag_specifications(tags.map(|t| vec![t]))
                .send()
                .await
                .map(|_| ())
                .map_err(|e| duplicate_is_done("AuthorizeSecurityGroupIngress", &self.name, e))
        };
        match result {
            Ok(()) | Err(None) => Ok(()),
            Err(Some(e)) => Err(e),
        }
    }
}

/// `None` when AWS says the permission is already there; the classified
/// error otherwise.
fn duplicate_is_done<E>(
    operation: &'static str,
    rule: &str,
    err: aws_smithy_runtime_api::client::result::SdkError<
        E,
        aws_smithy_runtime_api::client::orchestrator::HttpResponse,
    >,
) -> Option<TaskError>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    if err.code() == Some("InvalidPermission.Duplicate") {
        return None;
    }
    Some(classify(operation, rule, err))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(
        protocol: Option<&str>,
        ports: Option<(i32, i32)>,
        target: RuleTarget,
    ) -> SecurityGroupRule {
        SecurityGroupRule {
            name: "r".into(),
            group: OutputRef::new(TaskKey::new("SecurityGroup", "masters.c")),
            egress: false,
            protocol: protocol.map(str::to_string),
            from_port: ports.map(|p| p.0),
            to_port: ports.map(|p| p.1),
            target,
            tags: Tags::new(),
        }
    }

    #[test]
    fn permissions_match_on_protocol_ports_and_source() {
        let tcp = rule(
            Some("tcp"),
            Some((1, 2379)),
            RuleTarget::Group(OutputRef::new(TaskKey::new("SecurityGroup", "nodes.c"))),
        );
        let p = IpPermission::builder()
            .ip_protocol("tcp")
            .from_port(1)
            .to_port(2379)
            .user_id_group_pairs(UserIdGroupPair::builder().group_id("sg-n").build())
            .build();
        assert!(tcp.matches(&p, Some("sg-n")));
        assert!(!tcp.matches(&p, Some("sg-other")));
        let wider = IpPermission::builder()
            .ip_protocol("tcp")
            .from_port(1)
            .to_port(65535)
            .user_id_group_pairs(UserIdGroupPair::builder().group_id("sg-n").build())
            .build();
        assert!(
            !tcp.matches(&wider, Some("sg-n")),
            "a wider range is another rule"
        );
    }

    #[test]
    fn all_traffic_ignores_ports_and_cidrs_are_exact() {
        let all = rule(None, None, RuleTarget::Cidr("0.0.0.0/0".into()));
        let p = IpPermission::builder()
            .ip_protocol("-1")
            .ip_ranges(IpRange::builder().cidr_ip("10.0.0.0/8").build())
            .ip_ranges(IpRange::builder().cidr_ip("0.0.0.0/0").build())
            .build();
        assert!(all.matches(&p, None));
        let v6 = rule(None, None, RuleTarget::Ipv6Cidr("::/0".into()));
        assert!(!v6.matches(&p, None));
    }

    #[test]
    fn access_values_become_targets() {
        assert_eq!(
            RuleTarget::from_access("pl-1234"),
            RuleTarget::PrefixList("pl-1234".into())
        );
        assert_eq!(
            RuleTarget::from_access("::/0"),
            RuleTarget::Ipv6Cidr("::/0".into())
        );
        assert_eq!(
            RuleTarget::from_access("1.2.3.4/32"),
            RuleTarget::Cidr("1.2.3.4/32".into())
        );
        assert!(same_protocol("6", "tcp"));
        assert!(!same_protocol("udp", "tcp"));
    }
}
