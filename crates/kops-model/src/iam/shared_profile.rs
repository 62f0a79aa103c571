//! An existing instance profile's name from its ARN (`spec.iam.profile`;
//! the look-up task is `kops_aws::model::iam::shared_profile`'s).

/// The name of an instance profile from its ARN
/// (`arn:aws:iam::123456789012:instance-profile/[path/]name`), or `None`
/// when `arn` is not an instance profile's ARN.
pub fn profile_name_from_arn(arn: &str) -> Option<&str> {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(_partition), Some("iam"), Some(_region), Some(_account), Some(resource)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    let rest = resource.strip_prefix("instance-profile/")?;
    rest.rsplit('/').next().filter(|n| !n.is_empty())
}
