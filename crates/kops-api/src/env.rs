//! The environment variables kops hands from the `kops` process to the
//! nodes and the system components, so that they reach the same state store.
//!
//! Users of an S3-compatible state store that is not AWS (MinIO, Ceph, moto)
//! set `S3_ENDPOINT`, `S3_REGION`, `S3_ACCESS_KEY_ID` and
//! `S3_SECRET_ACCESS_KEY`. kops copies them into the control-plane user
//! data, and into the env of etcd-manager and kops-channels (which read the
//! store too). This module decides which variables go where; the caller
//! passes the variable lookup (`std::env::var` in production), so the
//! decision stays pure and testable.

/// The variables naming a custom S3 endpoint and its credentials, sorted by
/// name (the order kops writes them in).
pub const CUSTOM_S3_VARS: [&str; 4] = [
    "S3_ACCESS_KEY_ID",
    "S3_ENDPOINT",
    "S3_REGION",
    "S3_SECRET_ACCESS_KEY",
];

/// The variable that switches the state store to a custom S3 endpoint.
pub const S3_ENDPOINT: &str = "S3_ENDPOINT";

/// The process environment as a lookup, for production callers.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// A lookup's value, with unset and empty treated alike (as kops does).
fn non_empty(lookup: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    lookup(name).filter(|v| !v.is_empty())
}

/// Whether a custom S3 endpoint is configured (`S3_ENDPOINT` non-empty).
pub fn custom_s3_endpoint(lookup: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    non_empty(lookup, S3_ENDPOINT)
}

/// Which variables reach a node or component, and for whom:
/// - the control-plane user data exports the four `S3_*` variables when
///   `S3_ENDPOINT` is set (all four, empty ones included, as kops);
///   workers get none (they read their config through kops-controller or
///   the store's AWS endpoint);
/// - system components (etcd-manager, kops-channels, kops-rs' host
///   services) get `AWS_REGION` (the cluster's region, else the lookup's)
///   and each `S3_*` variable that is non-empty.
///
/// The result is sorted by name, the order kops writes both in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvTarget {
    /// `export` lines of a group's user data; `true` for control-plane groups.
    UserData { control_plane: bool },
    /// The env of a system component on a control-plane node.
    SystemComponent,
}

/// The variables (name, value) `target` gets, sorted by name. `aws_region`
/// is the cluster's region (from its subnets' zones) when known; `AWS_REGION`
/// is included for system components only (the user data adds its own).
pub fn forwarded_env(
    target: EnvTarget,
    aws_region: Option<&str>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match target {
        EnvTarget::UserData { control_plane } => {
            if control_plane && custom_s3_endpoint(lookup).is_some() {
                for name in CUSTOM_S3_VARS {
                    out.push((name.to_string(), lookup(name).unwrap_or_default()));
                }
            }
        }
        EnvTarget::SystemComponent => {
            let region = aws_region
                .filter(|r| !r.is_empty())
                .map(str::to_string)
                .or_else(|| non_empty(lookup, "AWS_REGION"));
            if let Some(region) = region {
                out.push(("AWS_REGION".to_string(), region));
            }
            for name in CUSTOM_S3_VARS {
                if let Some(value) = non_empty(lookup, name) {
                    out.push((name.to_string(), value));
                }
            }
        }
    }
    out.sort();
    out
}

/// Whether kops' feature flag `name` is on in `KOPS_FEATURE_FLAGS`
/// (comma-separated; `Name` or `+Name` turns it on, `-Name` off).
pub fn feature_enabled(name: &str) -> bool {
    feature_in(
        &std::env::var("KOPS_FEATURE_FLAGS").unwrap_or_default(),
        name,
    )
}

/// [`feature_enabled`] over a given flag list.
pub fn feature_in(flags: &str, name: &str) -> bool {
    let mut on = false;
    for flag in flags.split(',').map(str::trim) {
        if let Some(f) = flag.strip_prefix('-') {
            if f == name {
                on = false;
            }
        } else if flag.strip_prefix('+').unwrap_or(flag) == name {
            on = true;
        }
    }
    on
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    const MINIO: &[(&str, &str)] = &[
        ("S3_ENDPOINT", "http://127.0.0.1:45261"),
        ("S3_REGION", "us-east-1"),
        ("S3_ACCESS_KEY_ID", "test"),
        ("S3_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "eu-west-3"),
    ];

    fn names(env: &[(String, String)]) -> Vec<&str> {
        env.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn system_components_get_region_and_s3_sorted() {
        let env = forwarded_env(
            EnvTarget::SystemComponent,
            Some("us-east-1"),
            &lookup(MINIO),
        );
        assert_eq!(
            names(&env),
            [
                "AWS_REGION",
                "S3_ACCESS_KEY_ID",
                "S3_ENDPOINT",
                "S3_REGION",
                "S3_SECRET_ACCESS_KEY"
            ]
        );
        // The cluster's region wins over the process's.
        assert_eq!(env[0].1, "us-east-1");
        assert_eq!(env[2].1, "http://127.0.0.1:45261");
    }

    #[test]
    fn system_components_skip_empty_and_fall_back_to_process_region() {
        let env = forwarded_env(
            EnvTarget::SystemComponent,
            None,
            &lookup(&[
                ("AWS_REGION", "eu-west-3"),
                ("S3_REGION", ""),
                ("S3_ENDPOINT", "http://x"),
            ]),
        );
        assert_eq!(
            env,
            [
                ("AWS_REGION".to_string(), "eu-west-3".to_string()),
                ("S3_ENDPOINT".to_string(), "http://x".to_string())
            ]
        );
        let env = forwarded_env(EnvTarget::SystemComponent, Some("us-east-1"), &lookup(&[]));
        assert_eq!(names(&env), ["AWS_REGION"]);
    }

    #[test]
    fn user_data_exports_s3_only_on_control_plane_with_endpoint() {
        let cp = EnvTarget::UserData {
            control_plane: true,
        };
        let env = forwarded_env(cp, Some("us-east-1"), &lookup(MINIO));
        assert_eq!(names(&env), CUSTOM_S3_VARS);
        let worker = EnvTarget::UserData {
            control_plane: false,
        };
        assert!(forwarded_env(worker, None, &lookup(MINIO)).is_empty());
        // Credentials without an endpoint are plain AWS: nothing exported.
        let keys_only = lookup(&[("S3_ACCESS_KEY_ID", "a"), ("S3_SECRET_ACCESS_KEY", "b")]);
        assert!(forwarded_env(cp, None, &keys_only).is_empty());
        // With an endpoint, all four, empty ones included (as kops).
        let env = forwarded_env(cp, None, &lookup(&[("S3_ENDPOINT", "http://x")]));
        assert_eq!(env[2], ("S3_REGION".to_string(), String::new()));
    }
}
