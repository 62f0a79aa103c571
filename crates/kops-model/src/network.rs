//! (network builder: being written)

use kops_aws::AwsContext;
use kops_engine::TaskGraph;

use crate::{Model, ModelError};

/// Adds the network tasks.
pub fn build(_model: &Model<'_>, _graph: &mut TaskGraph<AwsContext>) -> Result<(), ModelError> {
    Ok(())
}
