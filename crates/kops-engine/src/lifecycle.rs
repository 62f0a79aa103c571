//! kops' task lifecycles: what a run may do to one kind of task. `Sync` is
//! the usual find → diff → apply; the others let a run leave a kind of
//! object to someone else (`update cluster --phase`,
//! `--lifecycle-overrides SecurityGroup=Ignore`).

use std::fmt;

/// What a run may do to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Lifecycle {
    /// Find, diff and apply (the default).
    Sync,
    /// Leave the object alone: it is only looked up, so the tasks that
    /// depend on it can read it; nothing is created or changed.
    Ignore,
    /// As `Sync`, but a failure to look the object up is a warning and the
    /// task is left alone (for credentials that may not read it).
    WarnIfInsufficientAccess,
    /// The object must exist as wanted: a missing one, or one that differs,
    /// fails the task; nothing is changed.
    ExistsAndValidates,
    /// The object must exist; differences are reported, not applied.
    ExistsAndWarnIfChanges,
}

impl Lifecycle {
    /// Every lifecycle, in kops' order of names.
    pub const ALL: [Lifecycle; 5] = [
        Lifecycle::ExistsAndValidates,
        Lifecycle::ExistsAndWarnIfChanges,
        Lifecycle::Ignore,
        Lifecycle::Sync,
        Lifecycle::WarnIfInsufficientAccess,
    ];

    /// kops' name (`Sync`, `Ignore`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Lifecycle::Sync => "Sync",
            Lifecycle::Ignore => "Ignore",
            Lifecycle::WarnIfInsufficientAccess => "WarnIfInsufficientAccess",
            Lifecycle::ExistsAndValidates => "ExistsAndValidates",
            Lifecycle::ExistsAndWarnIfChanges => "ExistsAndWarnIfChanges",
        }
    }

    /// The lifecycle named `name` (exactly, as kops matches it).
    pub fn parse(name: &str) -> Option<Lifecycle> {
        Lifecycle::ALL.into_iter().find(|l| l.name() == name)
    }

    /// Whether the task only looks (its apply is never called).
    pub(crate) fn looks_only(self) -> bool {
        matches!(
            self,
            Lifecycle::Ignore | Lifecycle::ExistsAndValidates | Lifecycle::ExistsAndWarnIfChanges
        )
    }
}

impl fmt::Display for Lifecycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
