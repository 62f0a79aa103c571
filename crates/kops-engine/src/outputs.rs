//! What tasks publish for their dependants: [`Outputs`], the read-only view a
//! running task gets of its direct dependencies' outputs.

use std::any::{type_name, Any};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::key::{OutputRef, TaskKey};

/// A published output, type-erased so tasks of different types share a map.
pub(crate) type OutputValue = Arc<dyn Any + Send + Sync>;

/// The state of one dependency's output as seen by a dependant.
#[derive(Clone)]
pub enum OutputSlot {
    /// The object exists (found or created) and published this value.
    Available(OutputValue),
    /// Dry run: the object would be created, so it has no output yet.
    NotCreated,
}

/// Why a dependency's output could not be read. Always a bug in a task or a
/// dry-run case the task did not handle; never a panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// The task read a task it does not depend on.
    #[error(
        "task `{task}` read the output of `{dependency}`, which is not one of its dependencies\n\
         hint: add `{dependency}` to the dependencies of `{task}`"
    )]
    NotADependency {
        /// The reading task.
        task: TaskKey,
        /// The task whose output was read.
        dependency: TaskKey,
    },
    /// Dry run: the dependency would be created, so its output (an id) is unknown.
    #[error(
        "the output of `{dependency}` is not known: it would be created (dry run)\n\
         hint: use `Outputs::try_get` in `find` and `diff`, which see this case as `None`"
    )]
    NotCreated {
        /// The task whose output was read.
        dependency: TaskKey,
    },
    /// The dependency publishes a value of another type.
    #[error("the output of `{dependency}` is not a `{expected}`")]
    WrongType {
        /// The task whose output was read.
        dependency: TaskKey,
        /// The type the reader asked for.
        expected: &'static str,
    },
}

/// The outputs of a task's direct dependencies, handed to `find`, `diff` and
/// `apply`. Only declared dependencies are visible: reading another task is
/// an [`OutputError::NotADependency`], so undeclared ordering bugs surface at
/// once instead of as races.
pub struct Outputs {
    task: TaskKey,
    entries: BTreeMap<TaskKey, OutputSlot>,
}

impl Outputs {
    pub(crate) fn new(task: TaskKey, entries: BTreeMap<TaskKey, OutputSlot>) -> Self {
        Self { task, entries }
    }

    /// An empty view for `task`, for calling a task's methods directly in tests.
    pub fn empty(task: TaskKey) -> Self {
        Self::new(task, BTreeMap::new())
    }

    /// Adds an output, for calling a task's methods directly in tests.
    pub fn with<T: Any + Send + Sync>(mut self, dependency: &OutputRef<T>, value: T) -> Self {
        self.entries.insert(
            dependency.key().clone(),
            OutputSlot::Available(Arc::new(value)),
        );
        self
    }

    /// The key of the task this view belongs to.
    pub fn task(&self) -> &TaskKey {
        &self.task
    }

    /// The output of `dependency`. Use in `apply`, where every dependency
    /// has run for real and must have published its output.
    pub fn get<T: Any>(&self, dependency: &OutputRef<T>) -> Result<&T, OutputError> {
        self.try_get(dependency)?
            .ok_or_else(|| OutputError::NotCreated {
                dependency: dependency.key().clone(),
            })
    }

    /// The output of `dependency`, or `None` when, in a dry run, the
    /// dependency would be created and has no output yet. Use in `find` and
    /// `diff`, which also run in dry runs.
    pub fn try_get<T: Any>(&self, dependency: &OutputRef<T>) -> Result<Option<&T>, OutputError> {
        let key = dependency.key();
        match self.entries.get(key) {
            None => Err(OutputError::NotADependency {
                task: self.task.clone(),
                dependency: key.clone(),
            }),
            Some(OutputSlot::NotCreated) => Ok(None),
            Some(OutputSlot::Available(value)) => {
                value
                    .downcast_ref::<T>()
                    .map(Some)
                    .ok_or_else(|| OutputError::WrongType {
                        dependency: key.clone(),
                        expected: type_name::<T>(),
                    })
            }
        }
    }
}

impl std::fmt::Debug for Outputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut map = f.debug_map();
        for (key, slot) in &self.entries {
            let state = match slot {
                OutputSlot::Available(_) => "available",
                OutputSlot::NotCreated => "not created",
            };
            map.entry(&key.to_string(), &state);
        }
        map.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct VpcId(String);

    #[test]
    fn reads_are_typed_and_limited_to_dependencies() {
        let vpc: OutputRef<VpcId> = OutputRef::new(TaskKey::new("VPC", "main"));
        let outputs = Outputs::empty(TaskKey::new("Subnet", "a")).with(&vpc, VpcId("vpc-1".into()));
        assert_eq!(outputs.get(&vpc), Ok(&VpcId("vpc-1".into())));

        let wrong: OutputRef<u32> = OutputRef::new(TaskKey::new("VPC", "main"));
        assert_eq!(
            outputs.get(&wrong).unwrap_err().to_string(),
            "the output of `VPC/main` is not a `u32`"
        );

        let other: OutputRef<VpcId> = OutputRef::new(TaskKey::new("VPC", "other"));
        assert_eq!(
            outputs.try_get(&other).unwrap_err().to_string(),
            "task `Subnet/a` read the output of `VPC/other`, which is not one of its dependencies\n\
             hint: add `VPC/other` to the dependencies of `Subnet/a`"
        );
    }

    #[test]
    fn outputs_of_tasks_not_created_are_none_or_an_error() {
        let vpc: OutputRef<VpcId> = OutputRef::new(TaskKey::new("VPC", "main"));
        let outputs = Outputs::new(
            TaskKey::new("Subnet", "a"),
            BTreeMap::from([(vpc.key().clone(), OutputSlot::NotCreated)]),
        );
        assert_eq!(outputs.try_get(&vpc), Ok(None));
        assert!(matches!(
            outputs.get(&vpc),
            Err(OutputError::NotCreated { .. })
        ));
    }
}
