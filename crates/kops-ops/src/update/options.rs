//! The choices `update cluster` takes beyond the cluster: which instance
//! groups (`--instance-group`, `--instance-group-roles`), which phase
//! (`--phase network|security|cluster`) and which task kinds to leave
//! alone (`--lifecycle-overrides Kind=Lifecycle`), and the refusal to
//! update a cluster last updated by a newer kops (`--allow-kops-downgrade`).

use std::collections::BTreeMap;

use kops_api::{InstanceGroup, Role};
use kops_engine::Lifecycle;

use crate::{flag_error, OpsError};

/// kops' phases: the kinds of task a run may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// IAM roles, policies and instance profiles, security groups and their
    /// rules, the SSH key.
    Security,
    /// The VPC, its CIDRs and DHCP options, gateways, subnets, routes.
    Network,
    /// Everything else: load balancers, launch templates, groups, DNS.
    Cluster,
}

impl Phase {
    /// Parses `--phase` as kops does (`iam` is an old name of `security`).
    pub fn parse(text: &str) -> Result<Phase, OpsError> {
        match text.to_ascii_lowercase().as_str() {
            "network" => Ok(Phase::Network),
            "security" | "iam" => Ok(Phase::Security),
            "cluster" => Ok(Phase::Cluster),
            _ => Err(flag_error(
                "--phase",
                &format!("unknown phase `{text}`"),
                "available phases: cluster, network, security",
            )),
        }
    }

    /// The phase a task kind belongs to, as kops' model builders assign
    /// lifecycles (the network builder, the IAM/firewall/SSH-key builders).
    pub fn of_kind(kind: &str) -> Phase {
        const NETWORK: &[&str] = &[
            "VPC",
            "VPCCIDRBlock",
            "VPCAmazonIPv6CIDRBlock",
            "DHCPOptions",
            "VPCDHCPOptionsAssociation",
            "InternetGateway",
            "EgressOnlyInternetGateway",
            "RouteTable",
            "Route",
            "RouteTableAssociation",
            "Subnet",
            "NatGateway",
            "ElasticIP",
        ];
        const SECURITY: &[&str] = &[
            "SecurityGroup",
            "SecurityGroupRule",
            "SecurityGroupCleanup",
            "SSHKey",
        ];
        if NETWORK.contains(&kind) {
            Phase::Network
        } else if SECURITY.contains(&kind) || kind.starts_with("IAM") {
            Phase::Security
        } else {
            Phase::Cluster
        }
    }

    /// The phase of a Google Cloud task kind, as kops' GCE model builders
    /// assign lifecycles: the network builder's (network, subnetworks, the
    /// NAT router) are the network phase; the API load balancer's (health
    /// checks, target pool, addresses, forwarding rules, backend services),
    /// the firewall and external-access rules and the state bucket's IAM
    /// members are the security phase; instance templates, managed groups,
    /// etcd disks, service accounts and the project's bindings the cluster
    /// phase.
    pub fn of_gce_kind(kind: &str) -> Phase {
        const NETWORK: &[&str] = &["Network", "Subnet", "Router"];
        const SECURITY: &[&str] = &[
            "FirewallRule",
            "Address",
            "ForwardingRule",
            "HttpHealthCheck",
            "HealthCheck",
            "BackendService",
            "TargetPool",
            "StorageBucketIAM",
        ];
        if NETWORK.contains(&kind) {
            Phase::Network
        } else if SECURITY.contains(&kind) {
            Phase::Security
        } else {
            Phase::Cluster
        }
    }

    /// The lifecycle kops gives the tasks of `phase` when it runs `self`:
    /// the other phases are ignored (network, security) or must exist
    /// (cluster: what it builds on must be there).
    fn lifecycle(self, of: Phase, dry_run: bool) -> Lifecycle {
        match (self, of) {
            (a, b) if a == b => Lifecycle::Sync,
            (Phase::Network, _) => Lifecycle::Ignore,
            (Phase::Security, Phase::Network) => Lifecycle::ExistsAndWarnIfChanges,
            (Phase::Security, _) => Lifecycle::Ignore,
            (Phase::Cluster, _) if dry_run => Lifecycle::ExistsAndWarnIfChanges,
            (Phase::Cluster, _) => Lifecycle::ExistsAndValidates,
        }
    }
}

/// Parses `--lifecycle-overrides` (`Kind=Lifecycle`, kops' exact task
/// type and lifecycle names).
pub fn parse_lifecycle_overrides(
    items: &[String],
) -> Result<BTreeMap<String, Lifecycle>, OpsError> {
    let mut out = BTreeMap::new();
    for item in items {
        let parts: Vec<&str> = item.split('=').collect();
        let [kind, name] = parts.as_slice() else {
            return Err(flag_error(
                "--lifecycle-overrides",
                &format!("`{item}` is not TaskName=Lifecycle"),
                "write e.g. `SecurityGroup=Ignore,InternetGateway=ExistsAndWarnIfChanges`",
            ));
        };
        let lifecycle = Lifecycle::parse(name).ok_or_else(|| {
            flag_error(
                "--lifecycle-overrides",
                &format!("unknown lifecycle `{name}`"),
                &format!(
                    "available lifecycles: {}",
                    Lifecycle::ALL.map(Lifecycle::name).join(",")
                ),
            )
        })?;
        out.insert((*kind).to_string(), lifecycle);
    }
    Ok(out)
}

/// The lifecycle of each kind in `kinds` that is not `Sync`: the phase's
/// first, then the overrides (which win, as in kops).
pub fn lifecycles<'a>(
    kinds: impl IntoIterator<Item = &'a str>,
    phase: Option<Phase>,
    overrides: &BTreeMap<String, Lifecycle>,
    dry_run: bool,
) -> BTreeMap<String, Lifecycle> {
    lifecycles_by(kinds, Phase::of_kind, phase, overrides, dry_run)
}

/// [`lifecycles`] for a Google Cloud cluster's kinds ([`Phase::of_gce_kind`]).
/// As kops does on GCE, the state bucket's IAM members are a best effort:
/// `WarnIfInsufficientAccess` whenever the security phase is not ignored
/// (with or without `--phase`).
pub fn gce_lifecycles<'a>(
    kinds: impl IntoIterator<Item = &'a str>,
    phase: Option<Phase>,
    overrides: &BTreeMap<String, Lifecycle>,
    dry_run: bool,
) -> BTreeMap<String, Lifecycle> {
    let kinds: Vec<&str> = kinds.into_iter().collect();
    let mut out = lifecycles_by(
        kinds.iter().copied(),
        Phase::of_gce_kind,
        phase,
        &BTreeMap::new(),
        dry_run,
    );
    const BUCKET_IAM: &str = "StorageBucketIAM";
    if kinds.contains(&BUCKET_IAM) {
        let security = phase.map_or(Lifecycle::Sync, |p| p.lifecycle(Phase::Security, dry_run));
        if security != Lifecycle::Ignore {
            out.insert(BUCKET_IAM.to_string(), Lifecycle::WarnIfInsufficientAccess);
        }
    }
    for (kind, l) in overrides {
        out.insert(kind.clone(), *l);
    }
    out
}

fn lifecycles_by<'a>(
    kinds: impl IntoIterator<Item = &'a str>,
    of_kind: fn(&str) -> Phase,
    phase: Option<Phase>,
    overrides: &BTreeMap<String, Lifecycle>,
    dry_run: bool,
) -> BTreeMap<String, Lifecycle> {
    let mut out = BTreeMap::new();
    if let Some(phase) = phase {
        for kind in kinds {
            let l = phase.lifecycle(of_kind(kind), dry_run);
            if l != Lifecycle::Sync {
                out.insert(kind.to_string(), l);
            }
        }
    }
    for (kind, l) in overrides {
        out.insert(kind.clone(), *l);
    }
    out
}

/// A role as `--instance-group-roles` takes it (any case; `master`,
/// `control-plane` and `controlplane` are the control plane).
pub fn parse_role(text: &str) -> Option<Role> {
    match text.to_ascii_lowercase().replace('-', "").as_str() {
        "master" | "controlplane" => Some(Role::ControlPlane),
        "node" => Some(Role::Node),
        "bastion" => Some(Role::Bastion),
        "apiserver" => Some(Role::ApiServer),
        _ => None,
    }
}

/// The groups an update builds: those named, else those of the roles
/// given, else all (kops' instance-group filter; roles it cannot read are
/// passed over, as in kops).
pub fn select_groups(
    groups: Vec<InstanceGroup>,
    names: &[String],
    roles: &[String],
) -> Vec<InstanceGroup> {
    if !names.is_empty() {
        return groups
            .into_iter()
            .filter(|g| names.iter().any(|n| n == g.name()))
            .collect();
    }
    if !roles.is_empty() {
        let wanted: Vec<Role> = roles.iter().filter_map(|r| parse_role(r)).collect();
        return groups
            .into_iter()
            .filter(|g| g.role().is_some_and(|r| wanted.contains(&r)))
            .collect();
    }
    groups
}

/// The ordering key of [`semver_key`].
type SemverKey = ((u64, u64, u64), bool, Vec<(bool, u64, String)>);

/// A semantic version's parts for ordering: the release, then whether it
/// is a release (a pre-release sorts before it), then the pre-release's
/// dot-separated identifiers (numbers numerically, below words).
fn semver_key(text: &str) -> Option<SemverKey> {
    let v = kops_api::version::KubernetesVersion::parse(text)?;
    let pre: Vec<(bool, u64, String)> = if v.pre.is_empty() {
        Vec::new()
    } else {
        v.pre
            .split('+')
            .next()
            .unwrap_or_default()
            .split('.')
            .map(|p| match p.parse::<u64>() {
                Ok(n) => (false, n, String::new()),
                Err(_) => (true, 0, p.to_string()),
            })
            .collect()
    };
    Some(((v.major, v.minor, v.patch), v.pre.is_empty(), pre))
}

/// kops' refusal: the state store's `kops-version.txt` names a newer kops
/// than this one. `Err` names both versions and the flag that overrides it.
pub fn check_downgrade(last: Option<&str>, current: &str) -> Result<(), OpsError> {
    let Some(last) = last.map(str::trim).filter(|l| !l.is_empty()) else {
        return Ok(());
    };
    let Some(last_key) = semver_key(last) else {
        return Err(OpsError::KopsVersionUnreadable {
            text: last.to_string(),
        });
    };
    match semver_key(current) {
        Some(now) if last_key > now => Err(OpsError::KopsDowngrade {
            last: last.to_string(),
            current: current.to_string(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_as_kops_assigns_them() {
        assert_eq!(Phase::of_kind("Subnet"), Phase::Network);
        assert_eq!(Phase::of_kind("IAMRolePolicy"), Phase::Security);
        assert_eq!(Phase::of_kind("SecurityGroupRule"), Phase::Security);
        assert_eq!(Phase::of_kind("LaunchTemplate"), Phase::Cluster);
        let l = lifecycles(
            ["VPC", "IAMRole", "AutoscalingGroup"],
            Some(Phase::Network),
            &BTreeMap::new(),
            false,
        );
        assert_eq!(l.get("VPC"), None);
        assert_eq!(l["IAMRole"], Lifecycle::Ignore);
        assert_eq!(l["AutoscalingGroup"], Lifecycle::Ignore);
        let l = lifecycles(
            ["VPC", "IAMRole"],
            Some(Phase::Cluster),
            &BTreeMap::new(),
            false,
        );
        assert_eq!(l["VPC"], Lifecycle::ExistsAndValidates);
        assert!(Phase::parse("IAM").is_ok());
        assert!(Phase::parse("nodes").is_err());
    }

    #[test]
    fn gce_phases_as_kops_assigns_them() {
        let kinds = [
            "Network",
            "Router",
            "FirewallRule",
            "TargetPool",
            "StorageBucketIAM",
            "InstanceTemplate",
            "ServiceAccount",
        ];
        let l = gce_lifecycles(kinds, Some(Phase::Network), &BTreeMap::new(), false);
        assert_eq!(l.get("Network"), None);
        assert_eq!(l.get("Router"), None);
        for kind in [
            "FirewallRule",
            "TargetPool",
            "StorageBucketIAM",
            "InstanceTemplate",
            "ServiceAccount",
        ] {
            assert_eq!(l[kind], Lifecycle::Ignore, "{kind}");
        }
        let l = gce_lifecycles(kinds, Some(Phase::Security), &BTreeMap::new(), false);
        assert_eq!(l["Network"], Lifecycle::ExistsAndWarnIfChanges);
        assert_eq!(l.get("FirewallRule"), None);
        assert_eq!(l["StorageBucketIAM"], Lifecycle::WarnIfInsufficientAccess);
        assert_eq!(l["InstanceTemplate"], Lifecycle::Ignore);
        let l = gce_lifecycles(kinds, Some(Phase::Cluster), &BTreeMap::new(), true);
        assert_eq!(l["Router"], Lifecycle::ExistsAndWarnIfChanges);
        assert_eq!(l["TargetPool"], Lifecycle::ExistsAndWarnIfChanges);
        assert_eq!(l["StorageBucketIAM"], Lifecycle::WarnIfInsufficientAccess);
        assert_eq!(l.get("ServiceAccount"), None);
        // Without --phase: only the bucket's members are a best effort.
        let l = gce_lifecycles(kinds, None, &BTreeMap::new(), false);
        assert_eq!(
            l.into_iter().collect::<Vec<_>>(),
            [(
                "StorageBucketIAM".to_string(),
                Lifecycle::WarnIfInsufficientAccess
            )]
        );
    }

    #[test]
    fn overrides_win_and_are_read_exactly() {
        let o = parse_lifecycle_overrides(&["SecurityGroup=Ignore".into()]).unwrap();
        let l = lifecycles(["SecurityGroup"], Some(Phase::Security), &o, false);
        assert_eq!(l["SecurityGroup"], Lifecycle::Ignore);
        assert!(parse_lifecycle_overrides(&["SecurityGroup=ignore".into()]).is_err());
        assert!(parse_lifecycle_overrides(&["SecurityGroup".into()]).is_err());
    }

    #[test]
    fn a_newer_kops_version_refuses_the_update() {
        assert!(check_downgrade(None, "1.37.0-alpha.1").is_ok());
        assert!(check_downgrade(Some("1.37.0-alpha.1"), "1.37.0-alpha.1").is_ok());
        assert!(check_downgrade(Some("1.36.2"), "1.37.0-alpha.1").is_ok());
        assert!(check_downgrade(Some("1.37.0"), "1.37.0-alpha.1").is_err());
        assert!(check_downgrade(Some("1.37.0-beta.1"), "1.37.0-alpha.1").is_err());
        assert!(check_downgrade(Some("1.37.0-alpha.2"), "1.37.0-alpha.1").is_err());
        assert!(check_downgrade(Some("1.37.0-alpha.10"), "1.37.0-alpha.9").is_err());
        assert!(check_downgrade(Some("banana"), "1.37.0").is_err());
    }
}
