//! What a run did: [`Report`] (per-task outcome and timing) and [`Plan`], the
//! kops-style "Will create resources:" view of a dry run.

use std::fmt::{self, Write as _};
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::changes::{Changes, FieldChange};
use crate::key::TaskKey;
use crate::task::{Mode, Operation};

/// What happened to one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum Outcome {
    /// The object did not exist and was created with these fields.
    Created {
        /// The fields set.
        changes: Changes,
    },
    /// The object existed and these fields were changed.
    Modified {
        /// The fields changed.
        changes: Changes,
    },
    /// The object exists as wanted.
    Unchanged,
    /// Dry run: the object does not exist and would be created.
    WouldCreate {
        /// The fields that would be set.
        changes: Changes,
    },
    /// Dry run: these fields of the existing object would change.
    WouldModify {
        /// The fields that would change.
        changes: Changes,
    },
    /// The task failed (after its retries, for a retryable error).
    Failed {
        /// The step that failed.
        operation: Operation,
        /// The error, with the cloud's message.
        message: String,
    },
    /// The task did not run.
    Skipped {
        /// Why not.
        reason: SkipReason,
    },
}

impl Outcome {
    /// Whether the outcome is (or would be) a change to the cloud.
    pub fn is_change(&self) -> bool {
        matches!(
            self,
            Self::Created { .. }
                | Self::Modified { .. }
                | Self::WouldCreate { .. }
                | Self::WouldModify { .. }
        )
    }

    /// A one-word label (`created`, `would create`, `failed`...), for progress lines.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Created { .. } => "created",
            Self::Modified { .. } => "modified",
            Self::Unchanged => "unchanged",
            Self::WouldCreate { .. } => "would create",
            Self::WouldModify { .. } => "would modify",
            Self::Failed { .. } => "failed",
            Self::Skipped { .. } => "skipped",
        }
    }
}

/// Why a task did not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "cause", rename_all = "camelCase")]
pub enum SkipReason {
    /// A task it depends on (directly or not) failed: this one names the
    /// failed task, not the skipped one in between.
    DependencyFailed {
        /// The failed task.
        dependency: TaskKey,
    },
    /// It was ready but the run stopped because another task failed.
    Stopped {
        /// The task whose failure stopped the run.
        after: TaskKey,
    },
    /// Its lifecycle (`--phase`, `--lifecycle-overrides`) kept it from
    /// changing anything: it was only looked up.
    Lifecycle {
        /// The task's lifecycle.
        lifecycle: crate::Lifecycle,
        /// What the look-up found (`left alone`, the differences not applied).
        note: String,
    },
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DependencyFailed { dependency } => {
                write!(f, "its dependency `{dependency}` failed")
            }
            Self::Stopped { after } => write!(f, "the run stopped after `{after}` failed"),
            Self::Lifecycle { lifecycle, note } => write!(f, "lifecycle {lifecycle}: {note}"),
        }
    }
}

fn millis<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
}

/// One task's line in the [`Report`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskReport {
    /// The task.
    #[serde(flatten)]
    pub key: TaskKey,
    /// What happened.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// How many times it ran (1 without retries, 0 if skipped).
    pub attempts: u32,
    /// When it started, from the start of the run (zero if skipped).
    #[serde(rename = "startedMs", serialize_with = "millis")]
    pub started: Duration,
    /// How long it took, retries included.
    #[serde(rename = "elapsedMs", serialize_with = "millis")]
    pub elapsed: Duration,
}

/// The result of [`Executor::run`](crate::Executor::run): every task of the
/// graph, in key order, with its outcome and timing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Whether the run applied changes.
    pub mode: Mode,
    /// One entry per task, sorted by key.
    pub tasks: Vec<TaskReport>,
    /// The run's wall time.
    #[serde(rename = "elapsedMs", serialize_with = "millis")]
    pub elapsed: Duration,
}

impl Report {
    /// The entry of `key`.
    pub fn get(&self, key: &TaskKey) -> Option<&TaskReport> {
        self.tasks
            .binary_search_by(|task| task.key.cmp(key))
            .ok()
            .map(|index| &self.tasks[index])
    }

    /// Whether anything was (or, in a dry run, would be) created or modified.
    /// Drives "must specify --yes" and exit codes.
    pub fn has_changes(&self) -> bool {
        self.tasks.iter().any(|task| task.outcome.is_change())
    }

    /// The tasks that failed.
    pub fn failures(&self) -> impl Iterator<Item = &TaskReport> {
        self.tasks
            .iter()
            .filter(|task| matches!(task.outcome, Outcome::Failed { .. }))
    }

    /// The tasks that were skipped.
    pub fn skipped(&self) -> impl Iterator<Item = &TaskReport> {
        self.tasks
            .iter()
            .filter(|task| matches!(task.outcome, Outcome::Skipped { .. }))
    }

    /// The dry-run plan: what would be created and modified. Only
    /// `WouldCreate`/`WouldModify` outcomes appear, so the plan of an
    /// applying run is empty.
    pub fn plan(&self) -> Plan {
        let mut plan = Plan::default();
        for task in &self.tasks {
            match &task.outcome {
                Outcome::WouldCreate { changes } => plan.create.push(PlannedTask {
                    key: task.key.clone(),
                    changes: changes.clone(),
                }),
                Outcome::WouldModify { changes } => plan.modify.push(PlannedTask {
                    key: task.key.clone(),
                    changes: changes.clone(),
                }),
                _ => {}
            }
        }
        plan
    }
}

/// One task in a [`Plan`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedTask {
    /// The task.
    #[serde(flatten)]
    pub key: TaskKey,
    /// The fields that would be set (create) or changed (modify).
    pub changes: Changes,
}

/// Reserved for deletions (kops' `ProducesDeletions`, `--prune`): the engine
/// does not produce any yet, but the plan has their place and rendering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedDeletion {
    /// The task that found the object to delete.
    #[serde(flatten)]
    pub key: TaskKey,
    /// What would be deleted, e.g. an extra CIDR association's id.
    pub item: String,
}

/// What a dry run would do, sorted by task key (so grouped by kind) like
/// kops' dry run. `Display` renders kops' text; `Serialize` is the `-o json`
/// form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Objects that would be created.
    pub create: Vec<PlannedTask>,
    /// Objects that would be modified.
    pub modify: Vec<PlannedTask>,
    /// Objects that would be deleted (always empty for now).
    pub delete: Vec<PlannedDeletion>,
}

impl Plan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.modify.is_empty() && self.delete.is_empty()
    }
}

/// kops' field line: `  \t<field padded to 20>\t<value>`.
fn field_line(out: &mut String, field: &str, value: &str) {
    let _ = writeln!(out, "  \t{field:<20}\t{value}");
}

fn multi_line(out: &mut String, field: &str, lines: impl IntoIterator<Item = String>) {
    let _ = writeln!(out, "  \t{field:<20}");
    for line in lines {
        field_line(out, "", &line);
    }
}

impl fmt::Display for Plan {
    /// kops' dry-run text (`upup/pkg/fi/dryrun_target.go`): a section per
    /// kind of change, each task as `  Kind/name` followed by its fields and
    /// a blank line. Multi-line values are shown line by line; a changed
    /// multi-line value as a line diff (`- ` removed, `+ ` added).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        if !self.create.is_empty() {
            out.push_str("Will create resources:\n");
            for task in &self.create {
                let _ = writeln!(out, "  {}", task.key);
                for change in &task.changes {
                    if change.to.contains('\n') {
                        multi_line(
                            &mut out,
                            change.label(),
                            change.to.lines().map(str::to_owned),
                        );
                    } else {
                        field_line(&mut out, change.label(), &change.to);
                    }
                }
                out.push('\n');
            }
        }
        if !self.modify.is_empty() {
            out.push_str("Will modify resources:\n");
            for task in &self.modify {
                let _ = writeln!(out, "  {}", task.key);
                for change in &task.changes {
                    render_modification(&mut out, change);
                }
                out.push('\n');
            }
        }
        if !self.delete.is_empty() {
            out.push_str("Will delete items:\n");
            for deletion in &self.delete {
                let _ = writeln!(out, "  {:<20} {}", deletion.key.to_string(), deletion.item);
            }
        }
        f.write_str(&out)
    }
}

fn render_modification(out: &mut String, change: &FieldChange) {
    let from = change.from.as_deref().unwrap_or("<none>");
    if from.contains('\n') || change.to.contains('\n') {
        multi_line(out, change.label(), line_diff(from, &change.to, 3));
    } else {
        // kops writes " old -> new", leading space included.
        field_line(out, change.label(), &format!(" {from} -> {}", change.to));
    }
}

/// A line diff of `from` → `to`: unchanged lines prefixed `  `, removed
/// `- `, added `+ `, keeping `context` unchanged lines around each change
/// and `...` for the lines left out.
fn line_diff(from: &str, to: &str, context: usize) -> Vec<String> {
    let old: Vec<&str> = from.lines().collect();
    let new: Vec<&str> = to.lines().collect();
    let edits = diff_edits(&old, &new);

    let changed: Vec<bool> = edits.iter().map(|(tag, _)| *tag != ' ').collect();
    let keep = |index: usize| {
        let start = index.saturating_sub(context);
        let end = (index + context + 1).min(changed.len());
        changed[start..end].iter().any(|&c| c)
    };
    let mut lines = Vec::new();
    let mut elided = false;
    for (index, (tag, line)) in edits.iter().enumerate() {
        if keep(index) {
            lines.push(format!("{tag} {line}"));
            elided = false;
        } else if !elided {
            lines.push("...".to_owned());
            elided = true;
        }
    }
    lines
}

/// Edit script of two line lists by longest common subsequence; falls back
/// to "all removed, all added" when the table would be too large.
fn diff_edits<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<(char, &'a str)> {
    const MAX_CELLS: usize = 4_000_000;
    if old.len().saturating_mul(new.len()) > MAX_CELLS {
        return old
            .iter()
            .map(|line| ('-', *line))
            .chain(new.iter().map(|line| ('+', *line)))
            .collect();
    }
    // lcs[i][j]: LCS length of old[i..] and new[j..].
    let width = new.len() + 1;
    let mut lcs = vec![0_usize; (old.len() + 1) * width];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            lcs[i * width + j] = if old[i] == new[j] {
                lcs[(i + 1) * width + j + 1] + 1
            } else {
                lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut edits = Vec::with_capacity(old.len() + new.len());
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            edits.push((' ', old[i]));
            i += 1;
            j += 1;
        } else if i < old.len()
            && (j == new.len() || lcs[(i + 1) * width + j] >= lcs[i * width + j + 1])
        {
            edits.push(('-', old[i]));
            i += 1;
        } else {
            edits.push(('+', new[j]));
            j += 1;
        }
    }
    edits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_diff_keeps_context_around_changes() {
        let from = "a\nb\nc\nd\ne\nf\ng\nh";
        let to = "a\nb\nc\nd\ne\nf\nG\nh";
        assert_eq!(line_diff(from, to, 1), ["...", "  f", "- g", "+ G", "  h"]);
        assert_eq!(line_diff("x", "x\ny", 3), ["  x", "+ y"]);
    }
}
