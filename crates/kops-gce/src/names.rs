//! kops' GCE names: Google Compute names allow `[a-z0-9-]` up to 63
//! characters, so the cluster's name has its dots turned into dashes and
//! is shortened with kops' 6-character hash when the whole does not fit.

use kops_api::Role;
use kops_model::iam::truncate_with_hash;

/// The cluster name with `.` turned into `-` (the `k8s-io-cluster-name` label).
pub fn safe_cluster_name(cluster: &str) -> String {
    cluster.replace('.', "-")
}

/// `<object>-<cluster>`, the cluster part shortened so the whole fits
/// `max` characters (kops' cluster-suffixed names).
pub fn cluster_suffixed(object: &str, cluster: &str, max: usize) -> String {
    let prefix = format!("{object}-");
    let room = max.saturating_sub(prefix.len()).max(10);
    format!(
        "{prefix}{}",
        truncate_with_hash(&safe_cluster_name(cluster), room)
    )
}

/// `<cluster>-<object>`, the cluster part shortened so the whole fits
/// `max` characters (kops' cluster-prefixed names: the role tags).
pub fn cluster_prefixed(object: &str, cluster: &str, max: usize) -> String {
    let suffix = format!("-{object}");
    let room = max.saturating_sub(suffix.len()).max(10);
    format!(
        "{}{suffix}",
        truncate_with_hash(&safe_cluster_name(cluster), room)
    )
}

/// A cluster-suffixed name of at most 63 characters (firewall rules,
/// subnets, routers, load-balancer parts, disks).
pub fn suffixed(object: &str, cluster: &str) -> String {
    cluster_suffixed(object, cluster, 63)
}

/// `<object>-<cluster>` with dots as dashes, not shortened (instance
/// templates' task names).
pub fn safe_object_name(object: &str, cluster: &str) -> String {
    safe_cluster_name(&format!("{object}-{cluster}"))
}

/// The network of a cluster without `networkID`: its shortened safe name.
pub fn network_name(cluster: &str) -> String {
    truncate_with_hash(&safe_cluster_name(cluster), 63)
}

/// The lower-case role name of tags and labels (`control-plane`, `node`,
/// `bastion`, `apiserver`).
pub fn role_name(role: Role) -> &'static str {
    role.path_name()
}

/// The network tag instances of a role carry, which firewall rules target.
pub fn tag_for_role(cluster: &str, role: &str) -> String {
    cluster_prefixed(&format!("k8s-io-role-{role}"), cluster, 63)
}

/// A managed instance group: `<zone letter>-<group>-<cluster>`, dashed and
/// shortened to 63 characters.
pub fn instance_group_manager(cluster: &str, group: &str, zone: &str) -> String {
    let short = zone.rsplit('-').next().unwrap_or(zone);
    truncate_with_hash(&safe_object_name(&format!("{short}.{group}"), cluster), 63)
}

/// The prefix of an instance template's generated names: its name
/// shortened to 32 characters, then `-`.
pub fn template_name_prefix(template: &str) -> String {
    format!("{}-", truncate_with_hash(template, 32))
}

/// A service account's id (`control-plane-<cluster>`), at most 30 characters.
pub fn service_account_id(name: &str, cluster: &str) -> String {
    cluster_suffixed(name, cluster, 30)
}

/// kops' encoding of a value into a label value: `[0-9a-z]` kept, every
/// other byte as `-` and two hex digits.
pub fn encode_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_digit() || byte.is_ascii_lowercase() {
            out.push(byte as char);
        } else {
            out.push_str(&format!("-{byte:02x}"));
        }
    }
    out
}

/// Whether `region` has the shape of a Compute Engine region
/// (`us-central1`, kops' `us-test1`) rather than an AWS one (`us-east-1`).
pub fn is_region(region: &str) -> bool {
    let zone = format!("{region}-a");
    kops_api::zones::gce_region(&zone).as_deref() == Some(region)
        && kops_api::zones::aws_region(&format!("{region}a")).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn google_and_aws_regions_are_told_apart() {
        for gce in ["us-central1", "us-test1", "europe-west4", "asia-northeast1"] {
            assert!(is_region(gce), "{gce}");
        }
        for aws in [
            "us-east-1",
            "eu-west-2",
            "us-gov-west-1",
            "ap-southeast-5",
            "x",
        ] {
            assert!(!is_region(aws), "{aws}");
        }
    }

    #[test]
    fn names_as_kops() {
        let long = "minimal-gce-with-a-very-very-very-very-very-long-name.example.com";
        assert_eq!(
            suffixed("a-etcd-main", long),
            "a-etcd-main-minimal-gce-with-a-very-very-very-very-very--96dqvi"
        );
        assert_eq!(
            network_name(long),
            "minimal-gce-with-a-very-very-very-very-very-long-name-ex-96dqvi"
        );
        assert_eq!(
            instance_group_manager(long, "nodes", "us-test1-b"),
            "b-nodes-minimal-gce-with-a-very-very-very-very-very-long-h6o2lg"
        );
        assert_eq!(
            template_name_prefix("master-us-test1-a-minimal-gce-example-com"),
            "master-us-test1-a-minimal-do16cp-"
        );
        assert_eq!(
            service_account_id("control-plane", "minimal-gce.example.com"),
            "control-plane-minimal-g-fu1mg6"
        );
        assert_eq!(
            service_account_id("node", "minimal-gce.example.com"),
            "node-minimal-gce-example-com"
        );
        assert_eq!(
            tag_for_role("minimal-gce-ilb-cilium-etcd.example.com", "control-plane"),
            "minimal-gce-ilb-cilium-etcd-ex-eqdptu-k8s-io-role-control-plane"
        );
        assert_eq!(encode_label("a/a"), "a-2fa");
    }
}
