//! [`EngineError`]: what can go wrong building a graph or running it.

use std::fmt::Write as _;

use crate::key::TaskKey;
use crate::report::{Outcome, Report};
use crate::task::Operation;

/// A failure of the engine: a malformed graph, or a task that failed during
/// a run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Two tasks with one key were added.
    #[error(
        "duplicate task `{key}`\n\
         hint: each cloud object must be added once; use `TaskGraph::ensure` for an object that several builders add identically"
    )]
    DuplicateTask {
        /// The key added twice.
        key: TaskKey,
    },
    /// `ensure` found a task with the same key but different contents.
    #[error(
        "task `{key}` was added twice with different contents\n\
         hint: two model builders disagree about this object; build it in one place"
    )]
    ConflictingTask {
        /// The key added twice.
        key: TaskKey,
    },
    /// A task depends on a task that is not in the graph.
    #[error(
        "task `{task}` depends on `{dependency}`, which is not in the graph\n\
         hint: add `{dependency}` to the graph, or remove it from the dependencies of `{task}`"
    )]
    MissingDependency {
        /// The depending task.
        task: TaskKey,
        /// The missing task.
        dependency: TaskKey,
    },
    /// The dependencies form a cycle; `path` starts and ends with the same task.
    #[error("dependency cycle: {}", render_path(.path))]
    Cycle {
        /// Each task depends on the next one.
        path: Vec<TaskKey>,
    },
    /// A task failed, which stopped the run. The report has every task's
    /// outcome, including other failures and the skipped tasks.
    #[error("{}", render_task_failed(.key, *.operation, .message, .report))]
    TaskFailed {
        /// The first task that failed.
        key: TaskKey,
        /// The step that failed.
        operation: Operation,
        /// The task's error (for a retryable one, the last).
        message: String,
        /// What the run did.
        report: Box<Report>,
    },
}

fn render_path(path: &[TaskKey]) -> String {
    path.iter()
        .map(|key| format!("`{key}`"))
        .collect::<Vec<_>>()
        .join(" -> ")
}

fn render_task_failed(
    key: &TaskKey,
    operation: Operation,
    message: &str,
    report: &Report,
) -> String {
    let mut out = format!("failed to {} `{key}`: {message}", operation.verb());
    for other in report.failures().filter(|task| &task.key != key) {
        if let Outcome::Failed { operation, message } = &other.outcome {
            let _ = write!(
                out,
                "\nalso failed to {} `{}`: {message}",
                operation.verb(),
                other.key
            );
        }
    }
    let skipped = report.skipped().count();
    if skipped > 0 {
        let noun = if skipped == 1 {
            "task was"
        } else {
            "tasks were"
        };
        let _ = write!(out, "\n{skipped} {noun} skipped because the run stopped");
    }
    out
}
