//! An autoscaling lifecycle hook (`<group>-NTHLifecycleHook`): holds a
//! terminating instance until the node-termination-handler has drained it,
//! or the heartbeat runs out and the default result applies.
//!
//! Found with one `DescribeLifecycleHooks` per autoscaling group.

use kops_engine::{Changes, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext};
use crate::tasks::autoscaling_group::AutoscalingGroup;

/// What the hook should be.
#[derive(Debug, Clone, PartialEq)]
pub struct LifecycleHook {
    /// The task name, unique in the cluster: `<group>-NTHLifecycleHook`,
    /// `kops-warmpool-<group>`.
    pub id: String,
    /// The hook's name (unique within its autoscaling group).
    pub name: String,
    /// The autoscaling group's name (its task runs first).
    pub autoscaling_group: String,
    /// `autoscaling:EC2_INSTANCE_TERMINATING` or `..._LAUNCHING`.
    pub transition: String,
    /// Seconds.
    pub heartbeat_timeout: i32,
    /// `CONTINUE` or `ABANDON`.
    pub default_result: String,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct LifecycleHookActual {
    pub transition: String,
    pub heartbeat_timeout: i32,
    pub default_result: String,
}

impl LifecycleHook {
    pub const KIND: &'static str = "AutoscalingLifecycleHook";
}

impl Task<AwsContext> for LifecycleHook {
    type Actual = LifecycleHookActual;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.id)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![TaskKey::new(
            AutoscalingGroup::KIND,
            &self.autoscaling_group,
        )]
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<LifecycleHookActual>, TaskError> {
        let exists = ctx
            .autoscaling_groups()
            .await?
            .iter()
            .any(|g| g.auto_scaling_group_name() == Some(self.autoscaling_group.as_str()));
        if !exists {
            // The group is new in this run (or, in a dry run, would be):
            // it has no hooks yet. PutLifecycleHook is idempotent, so a
            // retried apply is harmless.
            return Ok(None);
        }
        // The run's snapshot on the first look; afresh on a retry after
        // this task's own PutLifecycleHook.
        let hooks = if ctx.first_look(&self.key()) {
            ctx.lifecycle_hooks(&self.autoscaling_group).await?
        } else {
            ctx.autoscaling()
                .describe_lifecycle_hooks()
                .auto_scaling_group_name(&self.autoscaling_group)
                .lifecycle_hook_names(&self.name)
                .send()
                .await
                .map_err(|e| classify("DescribeLifecycleHooks", &self.name, e))?
                .lifecycle_hooks()
                .to_vec()
        };
        Ok(hooks
            .iter()
            .find(|h| h.lifecycle_hook_name() == Some(self.name.as_str()))
            .map(|h| LifecycleHookActual {
                transition: h.lifecycle_transition().unwrap_or_default().to_string(),
                heartbeat_timeout: h.heartbeat_timeout().unwrap_or_default(),
                default_result: h.default_result().unwrap_or_default().to_string(),
            }))
    }

    fn diff(
        &self,
        actual: Option<&LifecycleHookActual>,
        _: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        changes
            .compare(
                "lifecycleTransition",
                actual.map(|a| a.transition.as_str()),
                self.transition.as_str(),
            )
            .compare(
                "heartbeatTimeout",
                actual.map(|a| &a.heartbeat_timeout),
                &self.heartbeat_timeout,
            )
            .compare(
                "defaultResult",
                actual.map(|a| a.default_result.as_str()),
                self.default_result.as_str(),
            );
        Ok(changes)
    }

    fn output(&self, _: &LifecycleHookActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
        _: Option<&LifecycleHookActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        // PutLifecycleHook creates or replaces.
        ctx.autoscaling()
            .put_lifecycle_hook()
            .auto_scaling_group_name(&self.autoscaling_group)
            .lifecycle_hook_name(&self.name)
            .lifecycle_transition(&self.transition)
            .heartbeat_timeout(self.heartbeat_timeout)
            .default_result(&self.default_result)
            .send()
            .await
            .map_err(|e| classify("PutLifecycleHook", &self.name, e))?;
        Ok(())
    }
}
