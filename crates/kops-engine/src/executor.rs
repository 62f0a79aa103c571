//! [`Executor`]: runs a [`TaskGraph`] — each task as soon as its
//! dependencies are done, independent ones in parallel, retryable errors
//! retried with jittered backoff, the first real failure stopping the run.

use std::any::Any;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::Instant;

use crate::error::EngineError;
use crate::graph::TaskGraph;
use crate::key::{OutputRef, TaskKey};
use crate::lifecycle::Lifecycle;
use crate::outputs::{OutputSlot, Outputs};
use crate::report::{Outcome, Report, SkipReason, TaskReport};
use crate::task::{DynTask, Mode, Operation, StepError, StepOutcome, StepResult};

/// Backoff between attempts of a task that failed with a retryable error:
/// "full jitter" exponential backoff, a uniformly random delay between zero
/// and `min(max, base × 2^(failures − 1))`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The cap of the first delay. Default 200 ms.
    pub base: Duration,
    /// The largest cap. Default 10 s.
    pub max: Duration,
    /// Seeds the jitter for reproducible delays (tests); random by default.
    pub seed: Option<u64>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(200),
            max: Duration::from_secs(10),
            seed: None,
        }
    }
}

impl RetryPolicy {
    /// The cap of the delay after `failures` failed attempts (1 for the first).
    pub fn cap(&self, failures: u32) -> Duration {
        let factor = 1_u32
            .checked_shl(failures.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.base
            .checked_mul(factor)
            .unwrap_or(self.max)
            .min(self.max)
    }

    /// A random delay in `0..=cap(failures)`.
    pub fn delay(&self, failures: u32, rng: &mut fastrand::Rng) -> Duration {
        let cap = u64::try_from(self.cap(failures).as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rng.u64(0..=cap))
    }
}

/// How the executor runs a graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorOptions {
    /// The most tasks running at once. Default 48 (a cluster of three
    /// zones has about 140 tasks, and most wait on AWS, not on the CPU);
    /// 0 counts as 1.
    pub concurrency: usize,
    /// Backoff between retries.
    pub retry: RetryPolicy,
    /// How long a task may keep retrying, from its first attempt; then it
    /// fails with its last error. Default 10 minutes, like kops'
    /// `MaxTaskDuration`. It bounds retries, not one attempt: a call that
    /// hangs is the cloud client's timeout to cut.
    pub task_deadline: Duration,
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        Self {
            concurrency: 48,
            retry: RetryPolicy::default(),
            task_deadline: Duration::from_secs(10 * 60),
        }
    }
}

/// What the executor reports while it runs, for a progress line per task.
/// The engine never prints: the binary decides how to show these.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProgressEvent<'a> {
    /// The task's first attempt is starting.
    Started {
        /// The task.
        key: &'a TaskKey,
    },
    /// An attempt failed with a retryable error; the next starts after `delay`.
    Retrying {
        /// The task.
        key: &'a TaskKey,
        /// The attempt that failed, from 1.
        attempt: u32,
        /// The step that failed.
        operation: Operation,
        /// The retryable error.
        reason: &'a str,
        /// The wait before the next attempt.
        delay: Duration,
    },
    /// The task is done (any outcome, skipped included).
    Finished {
        /// Its entry in the report.
        report: &'a TaskReport,
    },
}

/// Receives [`ProgressEvent`]s, from several tasks at once. Implemented for
/// closures: `executor.with_progress(|event: &ProgressEvent<'_>| ...)`.
pub trait Progress: Send + Sync {
    /// Called for each event, in the order they happen per task.
    fn event(&self, event: &ProgressEvent<'_>);
}

impl<F> Progress for F
where
    F: Fn(&ProgressEvent<'_>) + Send + Sync,
{
    fn event(&self, event: &ProgressEvent<'_>) {
        self(event);
    }
}

/// Runs task graphs. See the crate docs for the per-task sequence.
#[derive(Clone, Default)]
pub struct Executor {
    options: ExecutorOptions,
    progress: Option<Arc<dyn Progress>>,
    /// Lifecycles other than `Sync`, by task kind.
    lifecycles: BTreeMap<String, Lifecycle>,
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("options", &self.options)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// The tasks a run completed (found or made), with their definitions,
/// outputs and reports: what [`Executor::run_after`] continues from.
pub struct Completed<C: ?Sized> {
    tasks: BTreeMap<TaskKey, Done<C>>,
}

struct Done<C: ?Sized> {
    task: Arc<dyn DynTask<C>>,
    output: OutputSlot,
    report: TaskReport,
}

impl<C: ?Sized> Completed<C> {
    /// Nothing completed.
    pub fn new() -> Self {
        Self {
            tasks: BTreeMap::new(),
        }
    }

    /// The output a completed task published, if it is a `T` (`None` when
    /// the task did not complete, or in a dry run would be created).
    pub fn output<T: Any + Send + Sync>(&self, task: &OutputRef<T>) -> Option<&T> {
        match &self.tasks.get(task.key())?.output {
            OutputSlot::Available(value) => value.downcast_ref::<T>(),
            OutputSlot::NotCreated => None,
        }
    }

    /// How many tasks completed.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether none did.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

impl<C: ?Sized> Default for Completed<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: ?Sized> fmt::Debug for Completed<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.tasks.keys()).finish()
    }
}

/// Which step a running task is in, readable if it panics.
#[derive(Default)]
struct Tracker {
    operation: AtomicU8,
    attempts: AtomicU32,
}

impl Tracker {
    fn operation(&self) -> Operation {
        Operation::ALL
            .get(usize::from(self.operation.load(Ordering::Relaxed)))
            .copied()
            .unwrap_or(Operation::Find)
    }
}

/// Everything one spawned task needs.
struct TaskRun<C: ?Sized> {
    key: TaskKey,
    task: Arc<dyn DynTask<C>>,
    ctx: Arc<C>,
    outputs: Outputs,
    mode: Mode,
    retry: RetryPolicy,
    deadline: Duration,
    seed: Option<u64>,
    stop: watch::Receiver<Option<TaskKey>>,
    progress: Option<Arc<dyn Progress>>,
    tracker: Arc<Tracker>,
}

/// How a spawned task ended.
struct Finished {
    result: Result<StepResult, (Operation, String)>,
    attempts: u32,
    started: Instant,
    elapsed: Duration,
}

impl Executor {
    /// An executor with these options and no progress receiver.
    pub fn new(options: ExecutorOptions) -> Self {
        Self {
            options,
            progress: None,
            lifecycles: BTreeMap::new(),
        }
    }

    /// Runs the tasks of each kind named (`SecurityGroup`, ...) with that
    /// lifecycle instead of `Sync` (see [`Lifecycle`]).
    pub fn with_lifecycles(mut self, lifecycles: BTreeMap<String, Lifecycle>) -> Self {
        self.lifecycles = lifecycles;
        self
    }

    fn lifecycle_of(&self, key: &TaskKey) -> Lifecycle {
        self.lifecycles
            .get(key.kind)
            .copied()
            .unwrap_or(Lifecycle::Sync)
    }

    /// Sends progress events to `progress`.
    pub fn with_progress(mut self, progress: impl Progress + 'static) -> Self {
        self.progress = Some(Arc::new(progress));
        self
    }

    /// The options.
    pub fn options(&self) -> &ExecutorOptions {
        &self.options
    }

    /// Runs every task of `graph` against `ctx`.
    ///
    /// Each task starts as soon as all its dependencies are done (at most
    /// `concurrency` at once; among ready tasks, those with the longest
    /// chain of dependants first, so the critical path never waits behind
    /// leaves, then key order). Per task: find →
    /// diff → nothing to do: `Unchanged` → check changes → dry run: record
    /// `WouldCreate`/`WouldModify` → apply. A retryable error restarts the
    /// sequence after a backoff until the task's deadline.
    ///
    /// The first failure (fatal, or retryable past the deadline) stops the
    /// run: no new task starts, running ones finish their current attempt
    /// (without further retries), everything not run is reported
    /// `Skipped`, and the result is [`EngineError::TaskFailed`] with the
    /// full report. A malformed graph is an error before anything runs.
    pub async fn run<C>(
        &self,
        graph: &TaskGraph<C>,
        ctx: Arc<C>,
        mode: Mode,
    ) -> Result<Report, EngineError>
    where
        C: ?Sized + Send + Sync + 'static,
    {
        let (report, _) = self.run_after(graph, ctx, mode, &Completed::new()).await?;
        Ok(report)
    }

    /// [`run`](Self::run), continuing `earlier` (what a run over part of
    /// the graph did): a task that run completed is not run again when its
    /// definition is equal and every task it depends on was taken over
    /// too; its output and report are taken as they are, and its dependants
    /// start at once. Returns what this run completed, for the next one.
    pub async fn run_after<C>(
        &self,
        graph: &TaskGraph<C>,
        ctx: Arc<C>,
        mode: Mode,
        earlier: &Completed<C>,
    ) -> Result<(Report, Completed<C>), EngineError>
    where
        C: ?Sized + Send + Sync + 'static,
    {
        let graph = graph.indexed()?;
        let count = graph.keys.len();
        let run_started = Instant::now();
        let (stop_sender, stop) = watch::channel(None::<TaskKey>);
        let concurrency = self.options.concurrency.max(1);

        let mut waiting: Vec<usize> = graph.dependencies.iter().map(Vec::len).collect();
        let mut outputs: Vec<Option<OutputSlot>> = vec![None; count];
        let mut reports: Vec<Option<TaskReport>> = vec![None; count];
        for &index in &graph.order {
            let Some(done) = earlier.tasks.get(graph.keys[index]) else {
                continue;
            };
            let taken = graph.tasks[index].same_task(done.task.as_any())
                && graph.dependencies[index]
                    .iter()
                    .all(|&dependency| outputs[dependency].is_some());
            if taken {
                outputs[index] = Some(done.output.clone());
                reports[index] = Some(done.report.clone());
                for &dependant in &graph.dependants[index] {
                    waiting[dependant] -= 1;
                }
            }
        }
        // The longest chain of tasks from each one to the end of the graph.
        let mut height = vec![1_usize; count];
        for &index in graph.order.iter().rev() {
            height[index] += graph.dependants[index]
                .iter()
                .map(|&dependant| height[dependant])
                .max()
                .unwrap_or(0);
        }
        let rank = |index: usize| (height[index], Reverse(index));
        let mut ready: BinaryHeap<(usize, Reverse<usize>)> = (0..count)
            .filter(|&index| waiting[index] == 0 && outputs[index].is_none())
            .map(rank)
            .collect();
        let mut running: JoinSet<Finished> = JoinSet::new();
        let mut running_ids: HashMap<Id, (usize, Arc<Tracker>)> = HashMap::new();
        let mut first_failure: Option<usize> = None;

        loop {
            while first_failure.is_none() && running.len() < concurrency {
                let Some((_, Reverse(index))) = ready.pop() else {
                    break;
                };
                let key = graph.keys[index].clone();
                let run_mode = if self.lifecycle_of(&key).looks_only() {
                    Mode::DryRun
                } else {
                    mode
                };
                let visible = graph.dependencies[index]
                    .iter()
                    .filter_map(|&dependency| {
                        let slot = outputs[dependency].clone()?;
                        Some((graph.keys[dependency].clone(), slot))
                    })
                    .collect::<BTreeMap<_, _>>();
                let tracker = Arc::new(Tracker::default());
                let run = TaskRun {
                    outputs: Outputs::new(key.clone(), visible),
                    key,
                    task: Arc::clone(graph.tasks[index]),
                    ctx: Arc::clone(&ctx),
                    mode: run_mode,
                    retry: self.options.retry.clone(),
                    deadline: self.options.task_deadline,
                    seed: self
                        .options
                        .retry
                        .seed
                        .map(|seed| seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                    stop: stop.clone(),
                    progress: self.progress.clone(),
                    tracker: Arc::clone(&tracker),
                };
                self.emit(&ProgressEvent::Started {
                    key: graph.keys[index],
                });
                let handle = running.spawn(run_task(run));
                running_ids.insert(handle.id(), (index, tracker));
            }

            let Some(joined) = running.join_next_with_id().await else {
                break;
            };
            let (id, finished) = match joined {
                Ok((id, finished)) => (id, Ok(finished)),
                Err(error) => (error.id(), Err(error)),
            };
            let Some((index, tracker)) = running_ids.remove(&id) else {
                continue; // not ours: cannot happen, nothing to record
            };
            let finished = finished.unwrap_or_else(|error| panicked(error, &tracker));
            let key = graph.keys[index];
            let result = with_lifecycle(self.lifecycle_of(key), finished.result);
            let outcome = match result {
                Ok((step, lifecycle_outcome)) => {
                    outputs[index] = Some(step.output);
                    for &dependant in &graph.dependants[index] {
                        waiting[dependant] -= 1;
                        if waiting[dependant] == 0 {
                            ready.push(rank(dependant));
                        }
                    }
                    lifecycle_outcome.unwrap_or_else(|| outcome_of(step.outcome))
                }
                Err((operation, message)) => {
                    if first_failure.is_none() {
                        first_failure = Some(index);
                        stop_sender.send_replace(Some(key.clone()));
                    }
                    Outcome::Failed { operation, message }
                }
            };
            let report = TaskReport {
                key: key.clone(),
                outcome,
                attempts: finished.attempts,
                started: finished.started.saturating_duration_since(run_started),
                elapsed: finished.elapsed,
            };
            self.emit(&ProgressEvent::Finished { report: &report });
            reports[index] = Some(report);
        }

        // Whatever did not run was skipped: because something it depends on
        // failed, or because the run stopped before it could start.
        for &index in &graph.order {
            if reports[index].is_some() {
                continue;
            }
            let mut reason = None;
            for &dependency in &graph.dependencies[index] {
                match reports[dependency].as_ref().map(|report| &report.outcome) {
                    Some(Outcome::Failed { .. }) => {
                        reason = Some(SkipReason::DependencyFailed {
                            dependency: graph.keys[dependency].clone(),
                        });
                        break;
                    }
                    Some(Outcome::Skipped {
                        reason: inherited @ SkipReason::DependencyFailed { .. },
                    }) if reason.is_none() => reason = Some(inherited.clone()),
                    _ => {}
                }
            }
            let reason = reason.unwrap_or_else(|| SkipReason::Stopped {
                after: first_failure
                    .map_or(graph.keys[index], |failed| graph.keys[failed])
                    .clone(),
            });
            let report = TaskReport {
                key: graph.keys[index].clone(),
                outcome: Outcome::Skipped { reason },
                attempts: 0,
                started: Duration::ZERO,
                elapsed: Duration::ZERO,
            };
            self.emit(&ProgressEvent::Finished { report: &report });
            reports[index] = Some(report);
        }

        let mut completed = Completed::new();
        for (index, output) in outputs.into_iter().enumerate() {
            if let (Some(output), Some(report)) = (output, &reports[index]) {
                completed.tasks.insert(
                    graph.keys[index].clone(),
                    Done {
                        task: Arc::clone(graph.tasks[index]),
                        output,
                        report: report.clone(),
                    },
                );
            }
        }
        let report = Report {
            mode,
            tasks: reports.into_iter().flatten().collect(),
            elapsed: run_started.elapsed(),
        };
        match first_failure {
            None => Ok((report, completed)),
            Some(index) => {
                let (operation, message) = match &report.tasks[index].outcome {
                    Outcome::Failed { operation, message } => (*operation, message.clone()),
                    _ => (Operation::Apply, String::new()),
                };
                Err(EngineError::TaskFailed {
                    key: graph.keys[index].clone(),
                    operation,
                    message,
                    report: Box::new(report),
                })
            }
        }
    }

    fn emit(&self, event: &ProgressEvent<'_>) {
        if let Some(progress) = &self.progress {
            progress.event(event);
        }
    }
}

/// A task's result under its lifecycle: the step and, when the lifecycle
/// changes what is reported, the outcome to report instead.
#[allow(clippy::type_complexity)]
fn with_lifecycle(
    lifecycle: Lifecycle,
    result: Result<StepResult, (Operation, String)>,
) -> Result<(StepResult, Option<Outcome>), (Operation, String)> {
    let left_alone = |note: String| Outcome::Skipped {
        reason: SkipReason::Lifecycle { lifecycle, note },
    };
    let step = match (lifecycle, result) {
        (Lifecycle::WarnIfInsufficientAccess, Err((Operation::Find, message))) => {
            let step = StepResult {
                outcome: StepOutcome::Unchanged,
                output: OutputSlot::NotCreated,
            };
            let note = format!("could not be looked up, assumed correct: {message}");
            return Ok((step, Some(left_alone(note))));
        }
        (_, Err(e)) => return Err(e),
        (_, Ok(step)) => step,
    };
    let outcome = match (lifecycle, &step.outcome) {
        (Lifecycle::Ignore, _) => Some(left_alone("left alone".into())),
        (
            Lifecycle::ExistsAndValidates | Lifecycle::ExistsAndWarnIfChanges,
            StepOutcome::WouldCreate(_),
        ) => {
            return Err((
                Operation::Find,
                format!("it does not exist, and its lifecycle {lifecycle} does not create it"),
            ))
        }
        (Lifecycle::ExistsAndValidates, StepOutcome::WouldModify(changes)) => {
            return Err((
                Operation::CheckChanges,
                format!(
                "it differs from the spec ({}), and its lifecycle {lifecycle} does not change it",
                describe(changes)
            ),
            ))
        }
        (Lifecycle::ExistsAndWarnIfChanges, StepOutcome::WouldModify(changes)) => Some(left_alone(
            format!("differs from the spec, not changed: {}", describe(changes)),
        )),
        _ => None,
    };
    Ok((step, outcome))
}

fn describe(changes: &crate::Changes) -> String {
    changes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn outcome_of(step: StepOutcome) -> Outcome {
    match step {
        StepOutcome::Created(changes) => Outcome::Created { changes },
        StepOutcome::Modified(changes) => Outcome::Modified { changes },
        StepOutcome::Unchanged => Outcome::Unchanged,
        StepOutcome::WouldCreate(changes) => Outcome::WouldCreate { changes },
        StepOutcome::WouldModify(changes) => Outcome::WouldModify { changes },
    }
}

/// A task that panicked (or was cancelled) fails like any other, with the
/// step it was in.
fn panicked(error: JoinError, tracker: &Tracker) -> Finished {
    let message = match error.try_into_panic() {
        Ok(payload) => {
            let text = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("no message");
            format!("the task panicked (a bug in the task): {text}")
        }
        Err(_) => "the task was cancelled".to_owned(),
    };
    let now = Instant::now();
    Finished {
        result: Err((tracker.operation(), message)),
        attempts: tracker.attempts.load(Ordering::Relaxed),
        started: now,
        elapsed: Duration::ZERO,
    }
}

/// `1.2s`, `350ms`, `2m5s`.
fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1_000 {
        format!("{millis}ms")
    } else if millis < 60_000 {
        format!("{:.1}s", duration.as_secs_f64())
    } else {
        format!("{}m{}s", duration.as_secs() / 60, duration.as_secs() % 60)
    }
}

/// One task: attempts until success, a fatal error, the deadline, or a stop.
async fn run_task<C>(mut run: TaskRun<C>) -> Finished
where
    C: ?Sized + Send + Sync + 'static,
{
    let started = Instant::now();
    let deadline = started + run.deadline;
    let mut rng = run
        .seed
        .map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed);
    let mut attempt = 0_u32;
    // What an earlier attempt began to apply before it failed.
    let mut attempted: Option<StepOutcome> = None;
    let finish = |result, attempts| Finished {
        result,
        attempts,
        started,
        elapsed: started.elapsed(),
    };
    loop {
        attempt += 1;
        run.tracker.attempts.store(attempt, Ordering::Relaxed);
        let step = run
            .task
            .run_once(&*run.ctx, &run.outputs, run.mode, &run.tracker.operation)
            .await;
        let StepError {
            operation,
            error,
            attempted: began,
        } = match step {
            Ok(mut step) => {
                // The object was created (or changed) by an attempt that then
                // failed: report that change, not what the retry found.
                if let Some(first) = attempted.take() {
                    let replace = matches!(
                        (&step.outcome, &first),
                        (StepOutcome::Unchanged, _)
                            | (StepOutcome::Modified(_), StepOutcome::Created(_))
                    );
                    if replace {
                        step.outcome = first;
                    }
                }
                return finish(Ok(step), attempt);
            }
            Err(error) => error,
        };
        if attempted.is_none() {
            attempted = began;
        }
        if !error.is_retryable() {
            return finish(Err((operation, error.to_string())), attempt);
        }
        let abandoned = |failed: &TaskKey| {
            format!("{error} (not retried: the run is stopping because `{failed}` failed)")
        };
        if let Some(failed) = run.stop.borrow().as_ref() {
            return finish(Err((operation, abandoned(failed))), attempt);
        }
        let now = Instant::now();
        if now >= deadline {
            let message = format!(
                "gave up after {attempt} attempts in {}: {error}",
                format_duration(now - started)
            );
            return finish(Err((operation, message)), attempt);
        }
        let delay = run.retry.delay(attempt, &mut rng).min(deadline - now);
        if let Some(progress) = &run.progress {
            progress.event(&ProgressEvent::Retrying {
                key: &run.key,
                attempt,
                operation,
                reason: &error.to_string(),
                delay,
            });
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            Ok(()) = run.stop.changed() => {
                let failed = run.stop.borrow().clone();
                if let Some(failed) = failed {
                    return finish(Err((operation, abandoned(&failed))), attempt);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_caps_double_up_to_the_maximum() {
        let policy = RetryPolicy {
            base: Duration::from_millis(200),
            max: Duration::from_secs(10),
            seed: Some(7),
        };
        let caps: Vec<u128> = (1..=8).map(|n| policy.cap(n).as_millis()).collect();
        assert_eq!(caps, [200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]);
        assert_eq!(policy.cap(200), Duration::from_secs(10));
        let mut rng = fastrand::Rng::with_seed(1);
        for failures in 1..50 {
            assert!(policy.delay(failures, &mut rng) <= policy.cap(failures));
        }
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(format_duration(Duration::from_millis(350)), "350ms");
        assert_eq!(format_duration(Duration::from_millis(1_250)), "1.2s");
        assert_eq!(format_duration(Duration::from_secs(600)), "10m0s");
    }
}
