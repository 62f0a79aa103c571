//! What every AWS task renderer shares: the context it may look at
//! ([`Ctx`]), the [`AwsResource`] trait each task type implements for
//! Terraform and CloudFormation, and small helpers.

use crate::context::Tags;
use crate::render::cloudformation::CloudFormation;
use crate::AwsContext;
use kops_engine::{TaskGraph, TaskKey};
use kops_render::hcl::Expr;
use kops_render::terraform::{Target, Terraform};
use kops_render::RenderError;

/// What every renderer may look at besides the task itself.
pub struct Ctx<'g> {
    pub graph: &'g TaskGraph<AwsContext>,
    pub cluster: &'g str,
    pub region: &'g str,
    pub private_zone: bool,
}

impl Ctx<'_> {
    pub(crate) fn find<T: 'static>(&self) -> impl Iterator<Item = &T> {
        self.graph
            .iter()
            .filter_map(|(_, t)| t.as_any().downcast_ref::<T>())
    }
}

/// How one task type becomes Terraform and CloudFormation.
pub trait AwsResource {
    /// The Terraform resource type, `None` for tasks folded into another
    /// resource (an instance profile's role) or with no counterpart.
    fn tf_type(&self) -> Option<&'static str>;
    /// The task name Terraform names the resource after (sanitized later).
    fn tf_name(&self) -> String;
    /// The existing object's id, for a task that only refers to it.
    fn existing_id(&self) -> Option<String> {
        None
    }
    /// The Terraform data source type, for an existing object Terraform
    /// looks up instead of managing.
    fn tf_data_type(&self) -> Option<&'static str> {
        None
    }
    /// The Terraform input variable holding the id of an existing object
    /// that Terraform can neither manage nor look up.
    fn tf_variable(&self) -> Option<String> {
        None
    }
    fn terraform(&self, tf: &mut Terraform, ctx: &Ctx<'_>) -> Result<(), RenderError>;
    fn cloudformation(&self, cf: &mut CloudFormation, ctx: &Ctx<'_>) -> Result<(), RenderError>;
}

/// The Terraform target of a task (resource address, literal id, or none).
pub fn target_of(resource: &dyn AwsResource) -> Target {
    if let Some(id) = resource.existing_id() {
        return Target::Literal(id);
    }
    if let Some(name) = resource.tf_variable() {
        return Target::Variable(name);
    }
    if let Some(kind) = resource.tf_data_type() {
        return Target::Data {
            kind,
            name: kops_render::terraform::sanitize(&resource.tf_name()),
        };
    }
    match resource.tf_type() {
        Some(kind) => Target::Resource {
            kind,
            name: kops_render::terraform::sanitize(&resource.tf_name()),
        },
        None => Target::None,
    }
}

pub(crate) fn tags_expr(tags: &Tags) -> Expr {
    Expr::Map(
        tags.iter()
            .map(|(k, v)| (k.clone(), Expr::str(v)))
            .collect(),
    )
}

pub(crate) fn id(tf: &Terraform, key: &TaskKey) -> Result<Expr, RenderError> {
    tf.reference(key, "id")
}

/// `task` as a `&dyn AwsResource` when it is one of the listed types.
macro_rules! downcast_resource {
    ($task:expr, $($t:ty),* $(,)?) => {{
        let task: &dyn std::any::Any = $task;
        $(if let Some(t) = task.downcast_ref::<$t>() {
            return Some(t as &dyn $crate::render::resource::AwsResource);
        })*
        None
    }};
}
pub(crate) use downcast_resource;
