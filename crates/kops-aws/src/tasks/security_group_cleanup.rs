//! Revoking what kops no longer wants in a group it owns, so that access
//! taken out of the spec is really closed (an `sshAccess` CIDR removed, a
//! bastion added in front of the instances).
//!
//! Like kops, only permissions on "watched" ports are considered (22 and
//! 443 for most groups; etcd's, kops-controller's and ICMP's on the control
//! plane's): a permission there, in either direction, that none of the
//! group's wanted rules covers is revoked. Permissions on other ports are
//! left alone, whoever added them. The task runs after the group's rules,
//! so new access is in place before old access goes, and it reads the
//! group's permissions from the run's batched `DescribeSecurityGroups`.

use aws_sdk_ec2::types::{IpPermission, IpRange, Ipv6Range, PrefixListId, UserIdGroupPair};
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext};
use crate::tasks::security_group::SecurityGroupId;
use crate::tasks::security_group_rule::{RuleTarget, SecurityGroupRule};

/// What to revoke from one group.
#[derive(Debug, Clone, PartialEq)]
pub struct SecurityGroupCleanup {
    /// The task name: the group's name.
    pub name: String,
    pub group: OutputRef<SecurityGroupId>,
    /// The watched port ranges (`(22, 22)`, ICMP `(3, 4)`, `(-1, -1)` for
    /// rules without ports, as AWS reports all-traffic and ICMPv6 rules).
    pub ports: Vec<(i32, i32)>,
    /// The group's wanted rules (only those on watched ports matter).
    pub keep: Vec<SecurityGroupRule>,
}

/// One permission (a single source) found in the group.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraPermission {
    pub egress: bool,
    pub permission: IpPermission,
}

impl ExtraPermission {
    fn describe(&self) -> String {
        let p = &self.permission;
        let source = p
            .ip_ranges()
            .iter()
            .filter_map(|r| r.cidr_ip())
            .chain(p.ipv6_ranges().iter().filter_map(|r| r.cidr_ipv6()))
            .chain(
                p.prefix_list_ids()
                    .iter()
                    .filter_map(|r| r.prefix_list_id()),
            )
            .chain(p.user_id_group_pairs().iter().filter_map(|r| r.group_id()))
            .next()
            .unwrap_or("?");
        format!(
            "{} {} {}-{} {} {source}",
            if self.egress { "egress" } else { "ingress" },
            p.ip_protocol().unwrap_or("-1"),
            p.from_port().unwrap_or(-1),
            p.to_port().unwrap_or(-1),
            if self.egress { "to" } else { "from" },
        )
    }
}

/// The permissions to revoke (empty: nothing to do).
#[derive(Debug, Clone)]
pub struct SecurityGroupCleanupActual {
    pub group_id: String,
    pub extra: Vec<ExtraPermission>,
}

impl SecurityGroupCleanup {
    pub const KIND: &'static str = "SecurityGroupCleanup";
}

/// A permission split into one permission per source.
fn single_sources(p: &IpPermission) -> Vec<IpPermission> {
    let base = || {
        IpPermission::builder()
            .set_ip_protocol(p.ip_protocol().map(str::to_string))
            .set_from_port(p.from_port())
            .set_to_port(p.to_port())
    };
    let mut out = Vec::new();
    for r in p.ip_ranges() {
        out.push(
            base()
                .ip_ranges(
                    IpRange::builder()
                        .set_cidr_ip(r.cidr_ip().map(str::to_string))
                        .build(),
                )
                .build(),
        );
    }
    for r in p.ipv6_ranges() {
        out.push(
            base()
                .ipv6_ranges(
                    Ipv6Range::builder()
                        .set_cidr_ipv6(r.cidr_ipv6().map(str::to_string))
                        .build(),
                )
                .build(),
        );
    }
    for r in p.prefix_list_ids() {
        out.push(
            base()
                .prefix_list_ids(
                    PrefixListId::builder()
                        .set_prefix_list_id(r.prefix_list_id().map(str::to_string))
                        .build(),
                )
                .build(),
        );
    }
    for r in p.user_id_group_pairs() {
        out.push(
            base()
                .user_id_group_pairs(
                    UserIdGroupPair::builder()
                        .set_group_id(r.group_id().map(str::to_string))
                        .build(),
                )
                .build(),
        );
    }
    out
}

impl Task<AwsContext> for SecurityGroupCleanup {
    type Actual = SecurityGroupCleanupActual;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        let mut deps = vec![self.group.key().clone()];
        for rule in &self.keep {
            deps.extend(Task::<AwsContext>::dependencies(rule));
            deps.push(Task::<AwsContext>::key(rule));
        }
        deps
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
    ) -> Result<Option<SecurityGroupCleanupActual>, TaskError> {
        let nothing = |group_id: &str| {
            Ok(Some(SecurityGroupCleanupActual {
                group_id: group_id.to_string(),
                extra: Vec::new(),
            }))
        };
        // A group that would be created holds nothing to revoke.
        let Some(group_id) = deps.try_get(&self.group)? else {
            return nothing("");
        };
        let groups = ctx.security_groups().await?;
        // Not in this run's discovery: created in this run, nothing old in it.
        let Some(group) = groups
            .iter()
            .find(|g| g.group_id() == Some(group_id.0.as_str()))
        else {
            return nothing(&group_id.0);
        };
        // The wanted rules with their source groups' ids (a source group
        // that would be created matches nothing that exists).
        let mut keep = Vec::new();
        for rule in &self.keep {
            let source = match &rule.target {
                RuleTarget::Group(source) => match deps.try_get(source)? {
                    Some(id) => Some(id.0.clone()),
                    None => continue,
                },
                _ => None,
            };
            keep.push((rule, source));
        }
        let watched = |p: &IpPermission| {
            let ports = (p.from_port().unwrap_or(-1), p.to_port().unwrap_or(-1));
            self.ports.contains(&ports)
        };
        let mut extra = Vec::new();
        for (egress, permissions) in [
            (false, group.ip_permissions()),
            (true, group.ip_permissions_egress()),
        ] {
            for single in permissions
                .iter()
                .filter(|p| watched(p))
                .flat_map(single_sources)
            {
                let wanted = keep.iter().any(|(rule, source)| {
                    rule.egress == egress && rule.matches(&single, source.as_deref())
                });
                if !wanted {
                    extra.push(ExtraPermission {
                        egress,
                        permission: single,
                    });
                }
            }
        }
        extra.sort_by_cached_key(ExtraPermission::describe);
        Ok(Some(SecurityGroupCleanupActual {
            group_id: group_id.0.clone(),
            extra,
        }))
    }

    fn diff(
        &self,
        actual: Option<&SecurityGroupCleanupActual>,
        _: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        let found: Vec<String> = actual
            .map(|a| a.extra.iter().map(ExtraPermission::describe).collect())
            .unwrap_or_default();
        changes.compare("revoke", Some(&Vec::<String>::new()), &found);
        Ok(changes)
    }

    fn output(&self, _: &SecurityGroupCleanupActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
        actual: Option<&SecurityGroupCleanupActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let Some(actual) = actual else { return Ok(()) };
        for extra in &actual.extra {
            let result = if extra.egress {
                ctx.ec2()
                    .revoke_security_group_egress()
                    .group_id(&actual.group_id)
                    .ip_permissions(extra.permission.clone())
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| {
                        (
                            e.code() == Some("InvalidPermission.NotFound"),
                            classify("RevokeSecurityGroupEgress", &self.name, e),
                        )
                    })
            } else {
                ctx.ec2()
                    .revoke_security_group_ingress()
                    .group_id(&actual.group_id)
                    .ip_permissions(extra.permission.clone())
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| {
                        (
                            e.code() == Some("InvalidPermission.NotFound"),
                            classify("RevokeSecurityGroupIngress", &self.name, e),
                        )
                    })
            };
            match result {
                // Already gone (a retry after a revoke that went through).
                Ok(()) | Err((true, _)) => {}
                Err((false, e)) => return Err(e),
            }
        }
        Ok(())
    }
}
