//! What the network tasks share: writing the tags an object lacks, and
//! telling "no such object" apart from other failures of a describe by id.

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use kops_engine::TaskError;

use crate::context::{classify, ec2_tags, AwsContext, Tags};
use crate::tasks::tags_to_write;

/// Writes the `expected` tags that `actual` lacks or holds with another
/// value, in one CreateTags call; no call when there are none. Tags others
/// added are left alone.
pub async fn write_missing_tags(
    ctx: &AwsContext,
    id: &str,
    actual: &Tags,
    expected: &Tags,
) -> Result<(), TaskError> {
    let missing = tags_to_write(actual, expected);
    if missing.is_empty() {
        return Ok(());
    }
    ctx.ec2()
        .create_tags()
        .resources(id)
        .set_tags(Some(ec2_tags(&missing)))
        .send()
        .await
        .map_err(|e| classify("CreateTags", id, e))?;
    Ok(())
}

/// The result of a describe by id, with "the id does not exist"
/// (`InvalidSubnetID.NotFound`, `NatGatewayNotFound`, ...) as `Ok(None)`:
/// the caller knows whether that means "not there" (an existing object
/// named in the spec) or "not visible yet" (one it just created).
pub fn unless_not_found<T, E>(
    operation: &'static str,
    resource: &str,
    result: Result<T, SdkError<E, HttpResponse>>,
) -> Result<Option<T>, TaskError>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match result {
        Ok(value) => Ok(Some(value)),
        Err(err) if err.code().is_some_and(|c| c.ends_with("NotFound")) => Ok(None),
        Err(err) => Err(classify(operation, resource, err)),
    }
}

/// The error of a task whose object, created earlier in this run, is not
/// visible yet: retried.
pub fn not_visible_yet(kind: &str, id: &str) -> TaskError {
    TaskError::retryable(format!(
        "{kind} `{id}` was created in this run but is not visible yet"
    ))
}

/// Asks `check` (at once, then once a second, `tries` times at most)
/// whether an object reached the state a task waits for. `Ok(false)` when
/// it did not: the task then returns a retryable error and the executor
/// keeps waiting with backoff. Waiting here first lets a change that
/// settles in seconds (a VPC CIDR association) be reported as made by
/// the attempt that made it.
pub async fn settle<F, Fut>(tries: u32, mut check: F) -> Result<bool, TaskError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, TaskError>>,
{
    for attempt in 0..tries {
        if attempt > 0 {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
        if check().await? {
            return Ok(true);
        }
    }
    Ok(false)
}
