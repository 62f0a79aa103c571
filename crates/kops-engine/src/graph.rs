//! [`TaskGraph`]: the tasks of one run and their dependencies.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;
use std::sync::Arc;

use crate::error::EngineError;
use crate::key::TaskKey;
use crate::task::{DynTask, Task};

struct Node<C: ?Sized> {
    task: Arc<dyn DynTask<C>>,
    /// Sorted and deduplicated, read once when the task is added.
    dependencies: Vec<TaskKey>,
}

/// The tasks of a run, keyed by [`TaskKey`], with their dependencies.
///
/// Adding checks keys (a duplicate is an error); the whole-graph checks — a
/// dependency on a task that is not there, cycles — run in
/// [`validate`](Self::validate), [`topological_order`](Self::topological_order),
/// [`longest_chain`](Self::longest_chain) and when the executor starts, since
/// a dependency may legitimately be added after its dependant.
pub struct TaskGraph<C: ?Sized> {
    nodes: BTreeMap<TaskKey, Node<C>>,
}

/// A validated graph in index form: tasks in key order, edges as indices.
pub(crate) struct Indexed<'g, C: ?Sized> {
    pub(crate) keys: Vec<&'g TaskKey>,
    pub(crate) tasks: Vec<&'g Arc<dyn DynTask<C>>>,
    /// `dependencies[i]`: the tasks `i` depends on.
    pub(crate) dependencies: Vec<Vec<usize>>,
    /// `dependants[i]`: the tasks that depend on `i`.
    pub(crate) dependants: Vec<Vec<usize>>,
    /// A topological order: dependencies first, ties broken by key.
    pub(crate) order: Vec<usize>,
}

impl<C: ?Sized> Default for TaskGraph<C> {
    fn default() -> Self {
        Self {
            nodes: BTreeMap::new(),
        }
    }
}

impl<C: ?Sized> fmt::Debug for TaskGraph<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(
                self.nodes
                    .iter()
                    .map(|(key, node)| (key.to_string(), &node.dependencies)),
            )
            .finish()
    }
}

impl<C: ?Sized + Sync + 'static> TaskGraph<C> {
    /// Adds a task; [`EngineError::DuplicateTask`] if its key is taken.
    pub fn add<T: Task<C>>(&mut self, task: T) -> Result<(), EngineError> {
        self.add_dyn(Arc::new(task))
    }

    /// Adds a task unless an equal one (same type, `==`) is already there,
    /// like kops' `EnsureTask`: for an object several builders add.
    /// [`EngineError::ConflictingTask`] if the existing one differs.
    pub fn ensure<T: Task<C>>(&mut self, task: T) -> Result<(), EngineError> {
        let key = Task::key(&task);
        match self.nodes.get(&key) {
            None => self.add(task),
            Some(existing) if existing.task.as_any().downcast_ref::<T>() == Some(&task) => Ok(()),
            Some(_) => Err(EngineError::ConflictingTask { key }),
        }
    }
}

impl<C: ?Sized + 'static> TaskGraph<C> {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an already boxed task; [`EngineError::DuplicateTask`] if its key is taken.
    pub fn add_dyn(&mut self, task: Arc<dyn DynTask<C>>) -> Result<(), EngineError> {
        let key = task.key();
        if self.nodes.contains_key(&key) {
            return Err(EngineError::DuplicateTask { key });
        }
        let mut dependencies = task.dependencies();
        dependencies.sort();
        dependencies.dedup();
        self.nodes.insert(key, Node { task, dependencies });
        Ok(())
    }

    /// The number of tasks.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no tasks.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Whether a task has this key.
    pub fn contains(&self, key: &TaskKey) -> bool {
        self.nodes.contains_key(key)
    }

    /// The task with this key.
    pub fn get(&self, key: &TaskKey) -> Option<&Arc<dyn DynTask<C>>> {
        self.nodes.get(key).map(|node| &node.task)
    }

    /// The (sorted) dependencies of the task with this key.
    pub fn dependencies_of(&self, key: &TaskKey) -> Option<&[TaskKey]> {
        self.nodes.get(key).map(|node| node.dependencies.as_slice())
    }

    /// The tasks in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&TaskKey, &Arc<dyn DynTask<C>>)> {
        self.nodes.iter().map(|(key, node)| (key, &node.task))
    }

    /// The graph without the tasks `drop` picks and every task that
    /// depends on one of them, directly or not: what can run before those.
    pub fn without(&self, drop: impl Fn(&TaskKey) -> bool) -> Result<TaskGraph<C>, EngineError> {
        let indexed = self.indexed()?;
        let mut dropped = vec![false; indexed.keys.len()];
        for &index in &indexed.order {
            dropped[index] = drop(indexed.keys[index])
                || indexed.dependencies[index]
                    .iter()
                    .any(|&dependency| dropped[dependency]);
        }
        let mut rest = TaskGraph::new();
        for (index, task) in indexed.tasks.iter().enumerate() {
            if !dropped[index] {
                rest.add_dyn(Arc::clone(task))?;
            }
        }
        Ok(rest)
    }

    /// Checks that every dependency is in the graph and that there is no cycle.
    pub fn validate(&self) -> Result<(), EngineError> {
        self.indexed().map(|_| ())
    }

    /// The keys with every task after its dependencies; among tasks that
    /// could go next, the smallest key first, so the order is deterministic.
    pub fn topological_order(&self) -> Result<Vec<TaskKey>, EngineError> {
        let indexed = self.indexed()?;
        Ok(indexed
            .order
            .iter()
            .map(|&index| indexed.keys[index].clone())
            .collect())
    }

    /// The number of tasks in the longest dependency chain (a task with no
    /// dependencies is a chain of 1; an empty graph has 0): a lower bound on
    /// the number of sequential steps a run takes, however parallel.
    pub fn longest_chain(&self) -> Result<usize, EngineError> {
        let indexed = self.indexed()?;
        let mut chain = vec![0_usize; indexed.keys.len()];
        for &index in &indexed.order {
            chain[index] = 1 + indexed.dependencies[index]
                .iter()
                .map(|&dependency| chain[dependency])
                .max()
                .unwrap_or(0);
        }
        Ok(chain.into_iter().max().unwrap_or(0))
    }

    /// Validates the graph and builds its index form.
    pub(crate) fn indexed(&self) -> Result<Indexed<'_, C>, EngineError> {
        let keys: Vec<&TaskKey> = self.nodes.keys().collect();
        let index_of = |key: &TaskKey| keys.binary_search(&key).ok();

        let mut dependencies = Vec::with_capacity(keys.len());
        let mut dependants = vec![Vec::new(); keys.len()];
        for (index, (key, node)) in self.nodes.iter().enumerate() {
            let mut edges = Vec::with_capacity(node.dependencies.len());
            for dependency in &node.dependencies {
                let Some(dependency_index) = index_of(dependency) else {
                    return Err(EngineError::MissingDependency {
                        task: key.clone(),
                        dependency: dependency.clone(),
                    });
                };
                edges.push(dependency_index);
                dependants[dependency_index].push(index);
            }
            dependencies.push(edges);
        }

        // Kahn's algorithm; the heap hands out the smallest ready key first.
        let mut waiting: Vec<usize> = dependencies.iter().map(Vec::len).collect();
        let mut ready: BinaryHeap<Reverse<usize>> = waiting
            .iter()
            .enumerate()
            .filter(|(_, &count)| count == 0)
            .map(|(index, _)| Reverse(index))
            .collect();
        let mut order = Vec::with_capacity(keys.len());
        while let Some(Reverse(index)) = ready.pop() {
            order.push(index);
            for &dependant in &dependants[index] {
                waiting[dependant] -= 1;
                if waiting[dependant] == 0 {
                    ready.push(Reverse(dependant));
                }
            }
        }
        if order.len() < keys.len() {
            let path = find_cycle(&dependencies, &waiting)
                .into_iter()
                .map(|index| keys[index].clone())
                .collect();
            return Err(EngineError::Cycle { path });
        }

        let tasks = self.nodes.values().map(|node| &node.task).collect();
        Ok(Indexed {
            keys,
            tasks,
            dependencies,
            dependants,
            order,
        })
    }
}

/// After Kahn's algorithm, every task left (`waiting > 0`) has a dependency
/// that is also left, so walking "first dependency left" from the smallest
/// one must come back to a task already seen: that loop is a cycle.
fn find_cycle(dependencies: &[Vec<usize>], waiting: &[usize]) -> Vec<usize> {
    let left = |index: usize| waiting[index] > 0;
    let Some(start) = (0..waiting.len()).find(|&index| left(index)) else {
        return Vec::new();
    };
    let mut path = vec![start];
    let mut seen_at = BTreeMap::from([(start, 0_usize)]);
    let mut current = start;
    loop {
        let Some(&next) = dependencies[current].iter().find(|&&dep| left(dep)) else {
            return path; // unreachable by the invariant above; report what we have
        };
        path.push(next);
        if let Some(&first) = seen_at.get(&next) {
            return path.split_off(first);
        }
        seen_at.insert(next, path.len() - 1);
        current = next;
    }
}
