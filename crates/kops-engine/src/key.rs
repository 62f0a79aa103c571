//! Task identity: [`TaskKey`] and the typed handle [`OutputRef`] a task uses
//! to name a dependency whose output it reads.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

use serde::Serialize;

/// The stable identity of a task: its kind (`VPC`, `Subnet`, ...) and the
/// object's name. Rendered as `kind/name` (`VPC/main.example.com`), like kops.
///
/// Keys order by kind, then name; every listing the engine produces (plan,
/// report, topological order among ready tasks) follows that order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TaskKey {
    /// The task type, e.g. `VPC`. Kinds are fixed by the code, hence `'static`.
    pub kind: &'static str,
    /// The object's name, e.g. `main.example.com`.
    pub name: String,
}

impl TaskKey {
    /// A key for `kind/name`.
    pub fn new(kind: &'static str, name: impl Into<String>) -> Self {
        Self {
            kind,
            name: name.into(),
        }
    }
}

impl fmt::Display for TaskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

/// A typed reference to the output of another task: the key of the
/// dependency plus the type of the value it publishes (for a VPC, its id).
///
/// A task keeps an `OutputRef` in its fields, lists `r.key()` in
/// [`Task::dependencies`](crate::Task::dependencies), and reads the value with
/// [`Outputs::get`](crate::Outputs::get) — no turbofish, no string lookups.
/// Whether the dependency really publishes a `T` is checked when read: a
/// mismatch is an [`OutputError::WrongType`](crate::OutputError::WrongType),
/// never a panic.
pub struct OutputRef<T> {
    key: TaskKey,
    // `fn() -> T` keeps the handle `Send + Sync + Unpin` whatever `T` is.
    _output: PhantomData<fn() -> T>,
}

impl<T> OutputRef<T> {
    /// A reference to the output of the task `key`.
    pub fn new(key: TaskKey) -> Self {
        Self {
            key,
            _output: PhantomData,
        }
    }

    /// The key of the task that publishes the output.
    pub fn key(&self) -> &TaskKey {
        &self.key
    }
}

impl<T> Clone for OutputRef<T> {
    fn clone(&self) -> Self {
        Self::new(self.key.clone())
    }
}

impl<T> fmt::Debug for OutputRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OutputRef").field(&self.key).finish()
    }
}

impl<T> fmt::Display for OutputRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.key.fmt(f)
    }
}

impl<T> PartialEq for OutputRef<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl<T> Eq for OutputRef<T> {}

impl<T> Hash for OutputRef<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key.hash(state);
    }
}

impl<T> PartialOrd for OutputRef<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for OutputRef<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_render_and_order_like_kops() {
        let vpc = TaskKey::new("VPC", "main.example.com");
        assert_eq!(vpc.to_string(), "VPC/main.example.com");
        let mut keys = [
            TaskKey::new("VPCCIDRBlock", "a"),
            TaskKey::new("VPC", "z"),
            TaskKey::new("Subnet", "b"),
        ];
        keys.sort();
        let rendered: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(rendered, ["Subnet/b", "VPC/z", "VPCCIDRBlock/a"]);
    }

    #[test]
    fn output_refs_compare_by_key() {
        struct NotComparable;
        let a: OutputRef<NotComparable> = OutputRef::new(TaskKey::new("VPC", "a"));
        assert_eq!(a.clone(), a);
        assert_eq!(
            format!("{a:?}"),
            r#"OutputRef(TaskKey { kind: "VPC", name: "a" })"#
        );
    }
}
