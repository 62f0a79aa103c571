//! Google's request-rate quotas, kept on our side: every call of a run
//! takes a token of its API group's bucket before it is sent, so a large
//! cluster is paced to what the project allows instead of retrying into an
//! exhausted quota.
//!
//! Compute Engine counts calls per project and per minute in groups
//! ("Compute Engine rate quotas"): queries (`default`: mutations and a few
//! others such as `listManagedInstances`), reads (`get`), lists (`list`),
//! operation reads (an operation's `get`) and heavy-weight reads
//! (`aggregatedList`, an operation's `wait`); global methods count against
//! the project's groups, regional and zonal ones against the `_per_region`
//! group of their region. Google's page gave 1,500 calls a minute for each
//! (36 for `projects.setCommonInstanceMetadata`); IAM allows 6,000 reads
//! and 600 writes a minute. Cloud DNS and Resource Manager publish no
//! figure that kops-rs' few calls to them could reach: they are not held
//! back, only their throttles are counted.
//!
//! A quota of N a minute refills at the start of each minute, all at once.
//! Its mirror here is a bucket of N/4 refilled at 3N/4 a minute: in any 60
//! seconds, whatever the minute's boundaries, it lets at most N calls
//! through, so a run alone in its project is never throttled, and a run of
//! up to N/4 calls of a group never waits. The buckets are the run's own: a
//! run started within a minute of another's busy end can still go past a
//! quota. When Google throttles a call anyway (that, other clients sharing
//! the project, or quotas lower than documented), the
//! bucket is emptied and slowed (see [`kops_engine::Pacer`]) and the call
//! is retried until the quota refills.
//!
//! `KOPS_GCE_RATE_LIMITS` changes them, in the syntax of
//! `KOPS_AWS_RATE_LIMITS`: `off` (never hold a call back, for a project
//! with raised quotas), or a comma list of `GROUP=SIZE/REFILL` where GROUP
//! is a Compute metric name (`list_requests`, `default_per_region`...),
//! `iam-read`, `iam-write`, `dns` or `cloudresourcemanager`. For a quota
//! raised to N a minute, `N/4` and `N/80` (`list_requests=1000/50` for
//! 4,000 a minute).

use std::collections::BTreeMap;

use hyper::Method;
use kops_engine::{BucketLimit, LimitSettings, LimitWaits, Pacer};

use crate::endpoints::Endpoints;

/// The environment variable that changes the limits.
pub const RATE_LIMITS_ENV: &str = "KOPS_GCE_RATE_LIMITS";

/// The bucket mirroring a quota of `quota` calls a minute.
const fn per_minute(quota: f64) -> BucketLimit {
    BucketLimit::new(quota / 4.0, quota * 0.75 / 60.0)
}

const COMPUTE: BucketLimit = per_minute(1500.0);

/// The groups paced by default, with their buckets.
const DOCUMENTED: &[(&str, BucketLimit)] = &[
    ("default", COMPUTE),
    ("read_requests", COMPUTE),
    ("list_requests", COMPUTE),
    ("operation_read_requests", COMPUTE),
    ("heavy_weight_read_requests", COMPUTE),
    (
        "project_set_common_instance_metadata_requests",
        per_minute(36.0),
    ),
    ("default_per_region", COMPUTE),
    ("read_requests_per_region", COMPUTE),
    ("list_requests_per_region", COMPUTE),
    ("operation_read_requests_per_region", COMPUTE),
    ("heavy_weight_read_requests_per_region", COMPUTE),
    ("iam-read", per_minute(6000.0)),
    ("iam-write", per_minute(600.0)),
];

/// Groups known but not paced unless the environment gives them a bucket.
const UNPACED: &[&str] = &["dns", "cloudresourcemanager"];

/// The limits of a run, shared by its calls.
#[derive(Debug, Clone, Default)]
pub struct RateLimits {
    pacer: Pacer,
    overrides: BTreeMap<String, BucketLimit>,
}

/// The bucket one call takes its token from.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    /// The group and where it is counted (`compute/list_requests`,
    /// `compute/read_requests_per_region/us-central1`, `iam-write`).
    pub key: String,
    /// The group's name.
    pub group: &'static str,
}

impl RateLimits {
    /// The documented limits, or those `KOPS_GCE_RATE_LIMITS` sets; a
    /// setting that does not parse is an error naming it.
    pub fn from_env() -> Result<Self, crate::GceError> {
        match kops_api::env::process_env(RATE_LIMITS_ENV) {
            Some(text) => Self::parse(&text).map_err(crate::GceError::RateLimits),
            None => Ok(Self::default()),
        }
    }

    /// `off`, or `GROUP=SIZE/REFILL,...`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let settings = LimitSettings::parse(RATE_LIMITS_ENV, text)?;
        let mut overrides = BTreeMap::new();
        for (kind, limit) in settings.buckets {
            if known(&kind).is_none() {
                return Err(format!(
                    "{RATE_LIMITS_ENV}: `{kind}` is not a quota group: one of {}",
                    DOCUMENTED
                        .iter()
                        .map(|(g, _)| *g)
                        .chain(UNPACED.iter().copied())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            overrides.insert(kind, limit);
        }
        Ok(Self {
            pacer: if settings.off {
                Pacer::disabled()
            } else {
                Pacer::new()
            },
            overrides,
        })
    }

    /// The bucket of `group`: the environment's, else the documented one
    /// (`None`: not paced).
    pub fn limit(&self, group: &str) -> Option<BucketLimit> {
        self.overrides.get(group).copied().or_else(|| {
            DOCUMENTED
                .iter()
                .find(|(g, _)| *g == group)
                .map(|(_, limit)| *limit)
        })
    }

    /// Waits for a token of `bucket`'s group (at once when it is not paced).
    pub async fn acquire(&self, bucket: &Bucket) {
        if let Some(limit) = self.limit(bucket.group) {
            self.pacer.acquire(&bucket.key, limit).await;
        }
    }

    /// Google answered a call of `bucket`: throttled (429, or Compute's 403
    /// `rateLimitExceeded`) or not.
    pub fn answered(&self, bucket: &Bucket, throttled: bool) {
        if throttled {
            tracing::debug!(bucket = %bucket.key, "throttled by Google; slowing this group down");
            self.pacer.throttled(&bucket.key);
        } else {
            self.pacer.answered(&bucket.key);
        }
    }

    /// What the run spent on limits so far.
    pub fn waits(&self) -> LimitWaits {
        self.pacer.waits()
    }
}

/// The group's own name, if `name` is one.
fn known(name: &str) -> Option<&'static str> {
    DOCUMENTED
        .iter()
        .map(|(g, _)| *g)
        .chain(UNPACED.iter().copied())
        .find(|g| *g == name)
}

/// The quota bucket of a call of `method` to `url` (`None`: an API without
/// quota groups here, such as Cloud Storage).
pub fn bucket(endpoints: &Endpoints, method: &Method, url: &str) -> Option<Bucket> {
    let path = url.split('?').next().unwrap_or(url);
    let make = |group: &'static str, key: String| Some(Bucket { key, group });
    if let Some(rest) = path.strip_prefix(endpoints.compute.as_str()) {
        return compute_bucket(method, rest);
    }
    if let Some(rest) = path.strip_prefix(endpoints.iam.as_str()) {
        let read = *method == Method::GET || rest.ends_with(":getIamPolicy");
        let group = if read { "iam-read" } else { "iam-write" };
        return make(group, group.to_string());
    }
    if path.starts_with(endpoints.dns.as_str()) {
        return make("dns", "dns".to_string());
    }
    if path.starts_with(endpoints.resource_manager.as_str()) {
        return make("cloudresourcemanager", "cloudresourcemanager".to_string());
    }
    None
}

/// Compute's group of a call to `rest` (the path after `compute/v1/`).
fn compute_bucket(method: &Method, rest: &str) -> Option<Bucket> {
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    let ["projects", _project, after @ ..] = parts.as_slice() else {
        return None;
    };
    let get = *method == Method::GET;
    let (region, within) = match after {
        ["regions" | "zones", scope, within @ ..] if !within.is_empty() => {
            let region = if after[0] == "zones" {
                kops_api::zones::gce_region(scope).unwrap_or_else(|| scope.to_string())
            } else {
                scope.to_string()
            };
            (Some(region), within)
        }
        _ => (None, after),
    };
    let base = match within {
        ["aggregated", ..] => {
            return Some(Bucket {
                key: "compute/heavy_weight_read_requests".into(),
                group: "heavy_weight_read_requests",
            })
        }
        ["setCommonInstanceMetadata"] => "project_set_common_instance_metadata_requests",
        // `projects.get`, `regions.get`, `zones.get` and their lists.
        [] => "read_requests",
        ["regions" | "zones"] => "list_requests",
        [scope @ .., "operations", _, "wait"] if scope.len() <= 1 => "heavy_weight_read_requests",
        [scope @ .., "operations", _] if scope.len() <= 1 && get => "operation_read_requests",
        ["global", _] | [_] if get => "list_requests",
        ["global", _, _] | [_, _] if get => "read_requests",
        _ => "default",
    };
    let Some(region) = region else {
        return Some(Bucket {
            key: format!("compute/{base}"),
            group: known(base)?,
        });
    };
    let group = known(&format!("{base}_per_region")).unwrap_or(known(base)?);
    Some(Bucket {
        key: format!("compute/{group}/{region}"),
        group,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints() -> Endpoints {
        Endpoints::from_lookup(&|_| None)
    }

    fn group_of(method: Method, rest: &str) -> (String, &'static str) {
        let url = format!("https://compute.googleapis.com/compute/v1/projects/p/{rest}");
        let b = bucket(&endpoints(), &method, &url).expect(rest);
        (b.key, b.group)
    }

    #[test]
    fn compute_calls_count_against_the_documented_groups() {
        let cases = [
            (
                Method::GET,
                "global/instanceTemplates",
                "compute/list_requests",
            ),
            (
                Method::GET,
                "global/instanceTemplates/t?fields=x",
                "compute/read_requests",
            ),
            (Method::POST, "global/instanceTemplates", "compute/default"),
            (
                Method::GET,
                "global/operations/op",
                "compute/operation_read_requests",
            ),
            (
                Method::POST,
                "global/operations/op/wait",
                "compute/heavy_weight_read_requests",
            ),
            (
                Method::GET,
                "aggregated/instanceGroupManagers",
                "compute/heavy_weight_read_requests",
            ),
            (Method::GET, "", "compute/read_requests"),
            (Method::GET, "regions/us-central1", "compute/read_requests"),
            (Method::GET, "zones", "compute/list_requests"),
            (
                Method::POST,
                "setCommonInstanceMetadata",
                "compute/project_set_common_instance_metadata_requests",
            ),
            (
                Method::GET,
                "zones/us-central1-a/instanceGroupManagers/g",
                "compute/read_requests_per_region/us-central1",
            ),
            (
                Method::GET,
                "zones/us-central1-b/instanceGroupManagers",
                "compute/list_requests_per_region/us-central1",
            ),
            (
                Method::POST,
                "zones/us-central1-a/instanceGroupManagers/g/listManagedInstances",
                "compute/default_per_region/us-central1",
            ),
            (
                Method::DELETE,
                "regions/europe-west4/subnetworks/s",
                "compute/default_per_region/europe-west4",
            ),
            (
                Method::GET,
                "zones/us-central1-a/operations/op",
                "compute/operation_read_requests_per_region/us-central1",
            ),
            (
                Method::POST,
                "regions/us-central1/operations/op/wait",
                "compute/heavy_weight_read_requests_per_region/us-central1",
            ),
        ];
        for (method, rest, key) in cases {
            assert_eq!(group_of(method, rest).0, key, "{rest}");
        }
    }

    #[test]
    fn other_apis_have_their_groups_and_storage_none() {
        let e = endpoints();
        let b = |m: Method, url: &str| bucket(&e, &m, url).map(|b| b.key);
        assert_eq!(
            b(
                Method::GET,
                "https://iam.googleapis.com/v1/projects/p/serviceAccounts"
            )
            .as_deref(),
            Some("iam-read")
        );
        assert_eq!(
            b(
                Method::POST,
                "https://iam.googleapis.com/v1/projects/p/serviceAccounts"
            )
            .as_deref(),
            Some("iam-write")
        );
        assert_eq!(
            b(
                Method::POST,
                "https://dns.googleapis.com/dns/v1/projects/p/managedZones/z/changes"
            )
            .as_deref(),
            Some("dns")
        );
        assert_eq!(
            b(
                Method::POST,
                "https://cloudresourcemanager.googleapis.com/v1/projects/p:getIamPolicy"
            )
            .as_deref(),
            Some("cloudresourcemanager")
        );
        assert_eq!(
            b(
                Method::GET,
                "https://storage.googleapis.com/storage/v1/b/x/iam"
            ),
            None
        );
    }

    #[test]
    fn a_quota_of_n_a_minute_never_lets_more_than_n_through_in_a_minute() {
        let limit = RateLimits::default().limit("list_requests").unwrap();
        assert!((limit.size + 60.0 * limit.refill - 1500.0).abs() < 1e-9);
        assert_eq!(limit.size, 375.0);
        let iam = RateLimits::default().limit("iam-write").unwrap();
        assert!((iam.size + 60.0 * iam.refill - 600.0).abs() < 1e-9);
        assert_eq!(RateLimits::default().limit("dns"), None);
    }

    #[test]
    fn the_environment_overrides_groups() {
        let limits =
            RateLimits::parse("list_requests=1000/50, dns=5/1,read_requests_per_region=10/2")
                .expect("parses");
        assert_eq!(
            limits.limit("list_requests"),
            Some(BucketLimit::new(1000.0, 50.0))
        );
        assert_eq!(limits.limit("dns"), Some(BucketLimit::new(5.0, 1.0)));
        assert_eq!(
            limits.limit("read_requests_per_region"),
            Some(BucketLimit::new(10.0, 2.0))
        );
        assert_eq!(limits.limit("default"), Some(COMPUTE));
        assert!(RateLimits::parse("off").is_ok());
        assert!(RateLimits::parse("").is_ok());
        for bad in ["list_requests", "reads=1/1", "list_requests=0/1"] {
            let e = RateLimits::parse(bad).expect_err(bad);
            assert!(e.starts_with(RATE_LIMITS_ENV), "{e}");
        }
    }

    #[tokio::test]
    async fn off_never_waits() {
        let limits = RateLimits::parse("off").unwrap();
        let b = Bucket {
            key: "compute/default".into(),
            group: "default",
        };
        // 2,000 calls: the documented bucket would hold them back 60 s.
        let start = std::time::Instant::now();
        for _ in 0..2000 {
            limits.acquire(&b).await;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(limits.waits().paced, 0);
        limits.answered(&b, true);
        assert_eq!(limits.waits().throttled, 1);
    }
}
