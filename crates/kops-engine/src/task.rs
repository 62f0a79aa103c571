//! The task contract: [`Task`] (what a cloud object type implements),
//! [`TaskError`] (how it says whether to retry), and [`DynTask`], the
//! object-safe form the graph stores.

use std::any::Any;
use std::fmt::{self, Debug};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use serde::Serialize;

use crate::changes::{Changes, FieldValue};
use crate::key::TaskKey;
use crate::outputs::{OutputError, OutputSlot, Outputs};

/// One cloud object the engine keeps in sync: a VPC, a subnet, an IAM role.
///
/// `C` is the context a task runs against: for the direct AWS render, the
/// cloud clients; a Terraform writer can be another context, for which the
/// same task struct implements `Task<TerraformContext>` (`find` returns
/// `Ok(None)`, `apply` writes the resource and returns a Terraform reference
/// as output). A graph holds tasks of one context.
///
/// Per run the executor calls, retrying the whole sequence on a
/// [`TaskError::Retryable`]:
///
/// 1. [`find`](Task::find): what exists in the cloud (`None`: nothing).
/// 2. [`diff`](Task::diff): the typed field changes between that and `self`.
///    An existing object with no changes is `Unchanged`: its output is taken
///    from [`output`](Task::output) and nothing else runs.
/// 3. [`check_changes`](Task::check_changes): refuses what the cloud cannot do.
/// 4. dry run: stop and report `WouldCreate`/`WouldModify`; otherwise
///    [`apply`](Task::apply), which makes the changes and returns the output.
///
/// Tasks are plain data: `PartialEq` lets [`TaskGraph::ensure`] accept the
/// same object built twice by two model builders; `Debug` is for messages.
///
/// Implementations may write `async fn find(..)` and `async fn apply(..)`;
/// the futures must be `Send` (they run on a multi-task executor).
///
/// [`TaskGraph::ensure`]: crate::TaskGraph::ensure
pub trait Task<C: ?Sized>: PartialEq + Debug + Send + Sync + 'static {
    /// What `find` reports about the existing object (its id, current CIDR, tags...).
    type Actual: Debug + Send + Sync + 'static;
    /// What dependants read once this task is done (a VPC's id); `()` for nothing.
    type Output: Send + Sync + 'static;

    /// The task's stable identity, `kind/name`.
    fn key(&self) -> TaskKey;

    /// The tasks that must be done before this one; their outputs are
    /// readable from the [`Outputs`] this task is given.
    fn dependencies(&self) -> Vec<TaskKey> {
        Vec::new()
    }

    /// Looks the object up in the cloud (by id or tags). `Ok(None)` when it
    /// does not exist. Runs in dry runs too: read dependency outputs with
    /// [`Outputs::try_get`], which is `None` for a dependency that would be
    /// created.
    fn find(
        &self,
        ctx: &C,
        deps: &Outputs,
    ) -> impl Future<Output = Result<Option<Self::Actual>, TaskError>> + Send;

    /// The fields that differ between `actual` and `self`, compared with
    /// their types (see [`Changes`]). `actual` is `None` for a create.
    fn diff(&self, actual: Option<&Self::Actual>, deps: &Outputs) -> Result<Changes, TaskError>;

    /// Refuses changes the cloud cannot make (an immutable field, a missing
    /// required one); see [`TaskError::immutable`]. Runs for creates too.
    fn check_changes(
        &self,
        actual: Option<&Self::Actual>,
        changes: &Changes,
    ) -> Result<(), TaskError> {
        let _ = (actual, changes);
        Ok(())
    }

    /// The output of an object that exists and needs no change (and, in a
    /// dry run, of one that would be modified).
    fn output(&self, actual: &Self::Actual) -> Self::Output;

    /// Makes the changes: creates the object when `actual` is `None`,
    /// otherwise modifies the fields in `changes`. Returns the output.
    /// Must be safe to re-run after a retryable error part-way (the next
    /// attempt starts again from `find`).
    fn apply(
        &self,
        ctx: &C,
        deps: &Outputs,
        actual: Option<&Self::Actual>,
        changes: &Changes,
    ) -> impl Future<Output = Result<Self::Output, TaskError>> + Send;
}

/// How a task (or the cloud layer under it) reports a failure, classified
/// for the executor: retry it or stop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// Worth another try: throttling (`RequestLimitExceeded`, `Throttling`),
    /// a 5xx, eventual consistency (a just-created IAM role not visible
    /// yet), `DependencyViolation`. Retried with backoff until the task's
    /// deadline; then the last one is reported.
    #[error("{reason}")]
    Retryable {
        /// What happened, with the cloud's code and message.
        reason: String,
    },
    /// Retrying cannot help: stops the run.
    #[error("{message}")]
    Fatal {
        /// What happened, with the cloud's code and message.
        message: String,
    },
    /// `check_changes`: the cloud cannot change this field in place.
    #[error(
        "field `{field}` cannot be changed from `{from}` to `{to}`\n\
         hint: the cloud cannot change it in place: keep the old value, or delete the object so it is created again"
    )]
    ImmutableField {
        /// The field's name, as in the plan.
        field: &'static str,
        /// The current value.
        from: String,
        /// The wanted value.
        to: String,
    },
    /// A dependency's output could not be read (a task bug).
    #[error(transparent)]
    Output(#[from] OutputError),
}

impl TaskError {
    /// A [`TaskError::Retryable`].
    pub fn retryable(reason: impl fmt::Display) -> Self {
        Self::Retryable {
            reason: reason.to_string(),
        }
    }

    /// A [`TaskError::Fatal`].
    pub fn fatal(message: impl fmt::Display) -> Self {
        Self::Fatal {
            message: message.to_string(),
        }
    }

    /// A [`TaskError::ImmutableField`], rendering both values for the message.
    pub fn immutable<T: FieldValue + ?Sized>(field: &'static str, from: &T, to: &T) -> Self {
        Self::ImmutableField {
            field,
            from: from.render(),
            to: to.render(),
        }
    }

    /// Whether the executor retries it.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Retryable { .. })
    }
}

/// The step of a task's run that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Operation {
    /// [`Task::find`].
    Find,
    /// [`Task::diff`].
    Diff,
    /// [`Task::check_changes`].
    CheckChanges,
    /// [`Task::apply`].
    Apply,
}

impl Operation {
    /// Every operation, in the order a run goes through them.
    pub(crate) const ALL: [Operation; 4] =
        [Self::Find, Self::Diff, Self::CheckChanges, Self::Apply];

    /// The verb for "failed to `<verb>` `<task>`".
    pub fn verb(self) -> &'static str {
        match self {
            Self::Find => "find",
            Self::Diff => "diff",
            Self::CheckChanges => "check changes of",
            Self::Apply => "apply",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Find => "find",
            Self::Diff => "diff",
            Self::CheckChanges => "check changes",
            Self::Apply => "apply",
        })
    }
}

/// Whether a run changes the cloud.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    /// Find, diff, check and apply.
    Apply,
    /// Find, diff and check; record what would change; apply nothing.
    DryRun,
}

/// What one successful attempt of a task's run produced (public but
/// unnameable outside the crate: [`DynTask`] cannot be implemented by hand).
pub struct StepResult {
    pub(crate) outcome: StepOutcome,
    pub(crate) output: OutputSlot,
}

/// The outcome of one successful attempt (timing is added by the executor).
#[derive(Debug)]
pub enum StepOutcome {
    Created(Changes),
    Modified(Changes),
    Unchanged,
    WouldCreate(Changes),
    WouldModify(Changes),
}

/// A failed attempt: which step, and the task's error.
#[derive(Debug)]
pub struct StepError {
    pub(crate) operation: Operation,
    pub(crate) error: TaskError,
    /// For a failure inside `apply`: what the attempt set out to do. A retry
    /// that then finds the object as wanted reports this, not `Unchanged`.
    pub(crate) attempted: Option<StepOutcome>,
}

/// A boxed, `Send` future borrowing from the task and its inputs.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The object-safe form of [`Task`] the graph stores (`Arc<dyn DynTask<C>>`).
/// Implemented for every `Task<C>`; there is no reason to implement it by hand.
pub trait DynTask<C: ?Sized>: Debug + Send + Sync + 'static {
    /// [`Task::key`].
    fn key(&self) -> TaskKey;
    /// [`Task::dependencies`].
    fn dependencies(&self) -> Vec<TaskKey>;
    /// The task as `Any`, for [`TaskGraph::ensure`](crate::TaskGraph::ensure)'s equality check.
    fn as_any(&self) -> &dyn Any;
    /// Whether `other` is a task of the same type equal to this one.
    fn same_task(&self, other: &dyn Any) -> bool;
    /// One attempt: find → diff → check changes → (apply), storing the
    /// current [`Operation`] (as `u8`) in `step`.
    #[doc(hidden)]
    fn run_once<'a>(
        &'a self,
        ctx: &'a C,
        deps: &'a Outputs,
        mode: Mode,
        step: &'a AtomicU8,
    ) -> BoxFuture<'a, Result<StepResult, StepError>>;
}

fn at(operation: Operation) -> impl FnOnce(TaskError) -> StepError {
    move |error| StepError {
        operation,
        error,
        attempted: None,
    }
}

fn publish<T: Send + Sync + 'static>(output: T) -> OutputSlot {
    OutputSlot::Available(Arc::new(output))
}

impl<C, T> DynTask<C> for T
where
    C: ?Sized + Sync,
    T: Task<C>,
{
    fn key(&self) -> TaskKey {
        Task::key(self)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        Task::dependencies(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn same_task(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<T>() == Some(self)
    }

    fn run_once<'a>(
        &'a self,
        ctx: &'a C,
        deps: &'a Outputs,
        mode: Mode,
        step: &'a AtomicU8,
    ) -> BoxFuture<'a, Result<StepResult, StepError>> {
        let enter = move |operation: Operation| step.store(operation as u8, Ordering::Relaxed);
        Box::pin(async move {
            enter(Operation::Find);
            let actual = self.find(ctx, deps).await.map_err(at(Operation::Find))?;
            enter(Operation::Diff);
            let changes = self
                .diff(actual.as_ref(), deps)
                .map_err(at(Operation::Diff))?;
            if let Some(existing) = &actual {
                if changes.is_empty() {
                    return Ok(StepResult {
                        outcome: StepOutcome::Unchanged,
                        output: publish(self.output(existing)),
                    });
                }
            }
            enter(Operation::CheckChanges);
            self.check_changes(actual.as_ref(), &changes)
                .map_err(at(Operation::CheckChanges))?;
            match (mode, &actual) {
                (Mode::DryRun, None) => Ok(StepResult {
                    outcome: StepOutcome::WouldCreate(changes),
                    output: OutputSlot::NotCreated,
                }),
                (Mode::DryRun, Some(existing)) => Ok(StepResult {
                    output: publish(self.output(existing)),
                    outcome: StepOutcome::WouldModify(changes),
                }),
                (Mode::Apply, _) => {
                    enter(Operation::Apply);
                    let output = self
                        .apply(ctx, deps, actual.as_ref(), &changes)
                        .await
                        .map_err(|error| StepError {
                            operation: Operation::Apply,
                            error,
                            attempted: Some(match actual {
                                None => StepOutcome::Created(changes.clone()),
                                Some(_) => StepOutcome::Modified(changes.clone()),
                            }),
                        })?;
                    let outcome = match actual {
                        None => StepOutcome::Created(changes),
                        Some(_) => StepOutcome::Modified(changes),
                    };
                    Ok(StepResult {
                        outcome,
                        output: publish(output),
                    })
                }
            }
        })
    }
}
