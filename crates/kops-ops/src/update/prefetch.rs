//! Reading ahead for `update cluster`: the listings the model's tasks will
//! read start before anything else of the run (the account lookup, the
//! state store writes), so the tasks find them cached.

use std::sync::Arc;

use kops_aws::prefetch::Prefetch;
use kops_aws::AwsContext;
use kops_model::Model;

use crate::OpsError;

/// Starts filling `ctx`'s caches with what `model`'s graph reads, in the
/// background (the tasks wait for a listing still under way). The account
/// id does not change which tasks there are, so the graph is built without
/// it and the reads overlap the account lookup.
pub fn start(ctx: &Arc<AwsContext>, model: &Model<'_>) -> Result<(), OpsError> {
    let graph = kops_aws::model::build(&Model {
        account_id: None,
        ..model.clone()
    })?;
    let images = model.groups.iter().filter_map(|g| {
        let image = g.spec.image.as_deref().filter(|i| !i.is_empty())?;
        Some((g.name().to_string(), image.to_string()))
    });
    let plan = Prefetch::of_graph(&graph).with_images(images);
    let ctx = Arc::clone(ctx);
    tokio::spawn(async move { ctx.prefetch(&plan).await });
    Ok(())
}
