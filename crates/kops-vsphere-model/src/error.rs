//! Why a vSphere cluster's spec cannot be made, or vCenter refused.

use kops_api::FieldError;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// Fields of the spec (or its instance groups) refused, each with its
    /// fix.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Spec(Vec<FieldError>),
    #[error(transparent)]
    Vsphere(#[from] kops_vsphere::VsphereError),
}
