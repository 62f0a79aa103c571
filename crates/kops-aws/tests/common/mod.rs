//! Shared set-up for kops-aws integration tests: a context on moto_server.

#![allow(dead_code)]

use std::sync::Arc;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use kops_aws::{AwsCloud, AwsContext};
use kops_engine::{Executor, ExecutorOptions, Mode, Report, RetryPolicy, TaskGraph};

pub const REGION: &str = "us-east-1";

/// A cloud on this test process' moto, or `None` (skip) when moto is absent.
pub async fn cloud() -> Option<AwsCloud> {
    let moto = kops_testkit::require_moto()?;
    let config = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(moto.endpoint())
        .region(Region::new(REGION))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await;
    Some(AwsCloud::from_config(REGION, config))
}

/// A fresh context (new discovery caches) on the same cloud and counter.
pub fn context(cloud: &AwsCloud, cluster: &str) -> Arc<AwsContext> {
    Arc::new(AwsContext::new(cloud.clone(), cluster, Default::default()))
}

pub fn executor() -> Executor {
    Executor::new(ExecutorOptions {
        retry: RetryPolicy {
            base: std::time::Duration::from_millis(20),
            max: std::time::Duration::from_millis(500),
            seed: Some(1),
        },
        task_deadline: std::time::Duration::from_secs(30),
        ..ExecutorOptions::default()
    })
}

/// Runs the graph in a fresh context; returns the report and the calls made
/// (total, writes) during this run.
pub async fn run(
    cloud: &AwsCloud,
    cluster: &str,
    graph: &TaskGraph<AwsContext>,
    mode: Mode,
) -> (Report, u64, u64) {
    let (t0, w0) = (cloud.calls().total(), cloud.calls().writes());
    let report = executor()
        .run(graph, context(cloud, cluster), mode)
        .await
        .unwrap_or_else(|e| panic!("run failed: {e}"));
    (
        report,
        cloud.calls().total() - t0,
        cloud.calls().writes() - w0,
    )
}
