//! Typed diffs rendered to text only for the plan: [`Changes`], built by a
//! task's `diff` from typed comparisons, and [`FieldValue`], how a value is
//! shown in the plan.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::{self, Display};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use serde::Serialize;

use crate::key::TaskKey;

/// How a value is shown in the plan. Implemented for the standard types a
/// task compares (strings, numbers, booleans, addresses, options,
/// collections); implement it for your own newtypes, or use
/// [`Changes::compare_display`] / [`Changes::compare_with`] for foreign types.
///
/// Collections render like kops' dry run: lists as `[a, b]`, maps as
/// `{k: v, k2: v2}` (hash-based collections sorted, so plans are stable).
pub trait FieldValue {
    /// The text shown in the plan.
    fn render(&self) -> String;

    /// `true` for "not set" (`None`): such a field is left out of a create,
    /// where it would only say that nothing is set.
    fn is_unset(&self) -> bool {
        false
    }
}

macro_rules! field_value_via_display {
    ($($ty:ty),* $(,)?) => {
        $(impl FieldValue for $ty {
            fn render(&self) -> String {
                self.to_string()
            }
        })*
    };
}

field_value_via_display!(
    str, String, bool, char, u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32,
    f64, IpAddr, Ipv4Addr, Ipv6Addr,
);

impl<T: FieldValue + ?Sized> FieldValue for &T {
    fn render(&self) -> String {
        (**self).render()
    }
    fn is_unset(&self) -> bool {
        (**self).is_unset()
    }
}

impl<T: FieldValue + ?Sized> FieldValue for Box<T> {
    fn render(&self) -> String {
        (**self).render()
    }
    fn is_unset(&self) -> bool {
        (**self).is_unset()
    }
}

impl<T: FieldValue + ?Sized> FieldValue for Arc<T> {
    fn render(&self) -> String {
        (**self).render()
    }
    fn is_unset(&self) -> bool {
        (**self).is_unset()
    }
}

impl<T: FieldValue> FieldValue for Option<T> {
    fn render(&self) -> String {
        match self {
            Some(value) => value.render(),
            None => "<none>".to_owned(),
        }
    }
    fn is_unset(&self) -> bool {
        self.is_none()
    }
}

fn render_list<'a, T: FieldValue + 'a>(items: impl IntoIterator<Item = &'a T>) -> String {
    let items: Vec<String> = items.into_iter().map(FieldValue::render).collect();
    format!("[{}]", items.join(", "))
}

fn render_map(mut entries: Vec<(String, String)>, sort: bool) -> String {
    if sort {
        entries.sort();
    }
    let entries: Vec<String> = entries
        .into_iter()
        .map(|(key, value)| format!("{key}: {value}"))
        .collect();
    format!("{{{}}}", entries.join(", "))
}

impl<T: FieldValue> FieldValue for [T] {
    fn render(&self) -> String {
        render_list(self)
    }
}

impl<T: FieldValue> FieldValue for Vec<T> {
    fn render(&self) -> String {
        render_list(self)
    }
}

impl<T: FieldValue> FieldValue for BTreeSet<T> {
    fn render(&self) -> String {
        render_list(self)
    }
}

impl<T: FieldValue, S> FieldValue for HashSet<T, S> {
    fn render(&self) -> String {
        let mut items: Vec<String> = self.iter().map(FieldValue::render).collect();
        items.sort();
        format!("[{}]", items.join(", "))
    }
}

impl<K: FieldValue, V: FieldValue> FieldValue for BTreeMap<K, V> {
    fn render(&self) -> String {
        render_map(
            self.iter().map(|(k, v)| (k.render(), v.render())).collect(),
            false,
        )
    }
}

impl<K: FieldValue, V: FieldValue, S> FieldValue for HashMap<K, V, S> {
    fn render(&self) -> String {
        render_map(
            self.iter().map(|(k, v)| (k.render(), v.render())).collect(),
            true,
        )
    }
}

/// One field that differs between the object in the cloud and the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldChange {
    /// The field's name as the plan shows it (`cidr`, `enableDnsHostnames`).
    pub field: &'static str,
    /// Where inside `field` the change is, for a structured value
    /// (`properties.disks[0].initializeParams.diskType`); the plan shows it
    /// in place of `field`. `None`: the field as a whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The current value; `None` when the object does not exist yet.
    pub from: Option<String>,
    /// The value the task wants.
    pub to: String,
}

/// The field changes `Task::diff` found, in the order it compared them.
///
/// Built from typed comparisons: each `compare*` call takes the actual and
/// expected values with their real types (`PartialEq` decides whether they
/// differ); values become text only when recorded, for the plan.
///
/// `actual` is `None` when the object does not exist: every compared field
/// is then recorded (a create lists what will be set), except unset
/// optional ones.
///
/// ```
/// # use kops_engine::Changes;
/// struct Actual { cidr: String, dns: bool }
/// let actual = Actual { cidr: "10.0.0.0/16".into(), dns: false };
/// let mut changes = Changes::new();
/// changes
///     .compare("cidr", Some(&actual.cidr), &"10.0.0.0/16".to_string())
///     .compare("enableDnsHostnames", Some(&actual.dns), &true);
/// assert_eq!(changes.len(), 1);
/// assert!(changes.has("enableDnsHostnames"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Changes(Vec<FieldChange>);

impl Changes {
    /// No changes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `field` if `actual` differs from `expected` (or the object
    /// does not exist), rendering both with [`FieldValue`].
    pub fn compare<T>(&mut self, field: &'static str, actual: Option<&T>, expected: &T) -> &mut Self
    where
        T: PartialEq + FieldValue + ?Sized,
    {
        if actual.is_none() && expected.is_unset() {
            return self;
        }
        self.compare_with(field, actual, expected, FieldValue::render)
    }

    /// Like [`compare`](Self::compare) for a type shown with its `Display`
    /// (a CIDR newtype from another crate, say).
    pub fn compare_display<T>(
        &mut self,
        field: &'static str,
        actual: Option<&T>,
        expected: &T,
    ) -> &mut Self
    where
        T: PartialEq + Display + ?Sized,
    {
        self.compare_with(field, actual, expected, ToString::to_string)
    }

    /// Like [`compare`](Self::compare) with a custom renderer: for values too
    /// large or too secret for a plan (`|data| format!("<{} bytes>", data.len())`).
    pub fn compare_with<T, R>(
        &mut self,
        field: &'static str,
        actual: Option<&T>,
        expected: &T,
        render: R,
    ) -> &mut Self
    where
        T: PartialEq + ?Sized,
        R: Fn(&T) -> String,
    {
        if actual.is_some_and(|actual| actual == expected) {
            return self;
        }
        self.0.push(FieldChange {
            field,
            path: None,
            from: actual.map(&render),
            to: render(expected),
        });
        self
    }

    /// Compares a reference to another cloud object (a subnet's VPC id)
    /// where the expected value is a dependency's output, which is unknown
    /// (`None`) in a dry run when the dependency would be created. An
    /// unknown value is always a change and renders as `<Kind/name>`.
    pub fn compare_reference<T>(
        &mut self,
        field: &'static str,
        actual: Option<&T>,
        expected: Option<&T>,
        dependency: &TaskKey,
    ) -> &mut Self
    where
        T: PartialEq + FieldValue + ?Sized,
    {
        match expected {
            Some(expected) => self.compare(field, actual, expected),
            None => {
                self.0.push(FieldChange {
                    field,
                    path: None,
                    from: actual.map(FieldValue::render),
                    to: format!("<{dependency}>"),
                });
                self
            }
        }
    }

    /// Records a change built by hand.
    pub fn push(&mut self, change: FieldChange) -> &mut Self {
        self.0.push(change);
        self
    }

    /// `true` when nothing differs.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The number of changed fields.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether `field` changed (for `apply`, to call only the APIs needed).
    pub fn has(&self, field: &str) -> bool {
        self.get(field).is_some()
    }

    /// The change of `field`, if it changed.
    pub fn get(&self, field: &str) -> Option<&FieldChange> {
        self.0.iter().find(|change| change.field == field)
    }

    /// The changes, in the order they were compared.
    pub fn iter(&self) -> std::slice::Iter<'_, FieldChange> {
        self.0.iter()
    }

    /// The changes as a slice.
    pub fn as_slice(&self) -> &[FieldChange] {
        &self.0
    }
}

impl<'a> IntoIterator for &'a Changes {
    type Item = &'a FieldChange;
    type IntoIter = std::slice::Iter<'a, FieldChange>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl FromIterator<FieldChange> for Changes {
    fn from_iter<I: IntoIterator<Item = FieldChange>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl FieldChange {
    /// What the plan names: the path inside the field, else the field.
    pub fn label(&self) -> &str {
        self.path.as_deref().unwrap_or(self.field)
    }
}

impl fmt::Display for FieldChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.from {
            Some(from) => write!(f, "{}: {} -> {}", self.label(), from, self.to),
            None => write!(f, "{}: {}", self.label(), self.to),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_record_nothing_and_different_values_record_both_sides() {
        let mut changes = Changes::new();
        changes
            .compare("cidr", Some("10.0.0.0/16"), "10.0.0.0/16")
            .compare("enableDnsSupport", Some(&false), &true)
            .compare("count", Some(&3_u32), &3);
        assert_eq!(
            changes.as_slice(),
            [FieldChange {
                field: "enableDnsSupport",
                path: None,
                from: Some("false".into()),
                to: "true".into(),
            }]
        );
    }

    #[test]
    fn a_missing_object_records_every_set_field() {
        let tags = BTreeMap::from([("Name".to_string(), "main".to_string())]);
        let mut changes = Changes::new();
        changes
            .compare("cidr", None, "10.0.0.0/16")
            .compare("ipv6", None::<&Option<bool>>, &None)
            .compare("tags", None, &tags);
        let rendered: Vec<String> = changes.iter().map(ToString::to_string).collect();
        assert_eq!(rendered, ["cidr: 10.0.0.0/16", "tags: {Name: main}"]);
    }

    #[test]
    fn collections_render_sorted_and_kops_like() {
        let map = HashMap::from([("b", 2), ("a", 1)]);
        assert_eq!(map.render(), "{a: 1, b: 2}");
        assert_eq!(vec!["x", "y"].render(), "[x, y]");
        assert_eq!(HashSet::from([3, 1]).render(), "[1, 3]");
        assert_eq!(Some(Some(1)).render(), "1");
        assert_eq!(None::<i32>.render(), "<none>");
    }

    #[test]
    fn references_to_dependencies_not_created_yet_are_changes() {
        let vpc = TaskKey::new("VPC", "main");
        let mut changes = Changes::new();
        changes.compare_reference("vpc", None, None::<&str>, &vpc);
        changes.compare_reference("same", Some("vpc-1"), Some("vpc-1"), &vpc);
        changes.compare_reference("moved", Some("vpc-1"), Some("vpc-2"), &vpc);
        let rendered: Vec<String> = changes.iter().map(ToString::to_string).collect();
        assert_eq!(rendered, ["vpc: <VPC/main>", "moved: vpc-1 -> vpc-2"]);
    }

    #[test]
    fn custom_renderers_hide_large_values() {
        let mut changes = Changes::new();
        changes.compare_with("userData", Some(&vec![0_u8; 4]), &vec![1_u8; 7], |data| {
            format!("<{} bytes>", data.len())
        });
        assert_eq!(
            changes.get("userData").map(ToString::to_string).as_deref(),
            Some("userData: <4 bytes> -> <7 bytes>")
        );
    }
}
