//! What `edit cluster` and `edit instancegroup` share: `--set`/`--unset`
//! (change the stored object without an editor) and the editor loop (open,
//! save, and on an invalid result reopen with the error at the top; leaving
//! the file unchanged or empty aborts).

use anyhow::{bail, Result};
use clap::Args;
use kops_api::manifest::to_yaml;
use kops_ops::{EditOutcome, OpsError};

use crate::args::GlobalArgs;
use crate::context::{cluster_name, state};
use crate::editor;
use crate::output::status;

/// `--set` / `--unset` of `edit cluster` and `edit instancegroup`: change
/// the stored object without an editor.
#[derive(Debug, Args, Default, Clone)]
pub struct SetFlags {
    /// Set a field without opening an editor: `spec.path=value` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub sets: Vec<String>,
    /// Remove a field without opening an editor: `spec.path` (repeatable).
    #[arg(long = "unset", value_name = "PATH")]
    pub unsets: Vec<String>,
}

impl SetFlags {
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty() && self.unsets.is_empty()
    }
}

/// How many times `--set` is applied again after another writer's save.
const SET_ATTEMPTS: u32 = 10;

/// One read-set-save round of [`edit_with_sets`].
async fn set_and_save(
    registry: &kops_ops::Registry,
    cluster: &str,
    group: Option<&str>,
    flags: &SetFlags,
) -> Result<EditOutcome, OpsError> {
    match group {
        None => {
            let (original, read_at) =
                kops_ops::require_cluster_versioned(registry, cluster).await?;
            let mut c = original.clone();
            kops_api::set::unset_cluster_fields(&mut c, &flags.unsets).map_err(OpsError::Flags)?;
            kops_api::set::set_cluster_fields(&mut c, &flags.sets).map_err(OpsError::Flags)?;
            kops_ops::save_edited_cluster_over(registry, cluster, &original, &read_at, &to_yaml(&c))
                .await
        }
        Some(g) => {
            let (original, read_at) =
                kops_ops::require_instance_group_versioned(registry, cluster, g).await?;
            let mut ig = original.clone();
            kops_api::set::unset_instance_group_fields(&mut ig, &flags.unsets)
                .map_err(OpsError::Flags)?;
            kops_api::set::set_instance_group_fields(&mut ig, &flags.sets)
                .map_err(OpsError::Flags)?;
            kops_ops::save_edited_instance_group_over(
                registry,
                cluster,
                g,
                &original,
                &read_at,
                &to_yaml(&ig),
            )
            .await
        }
    }
}

/// Applies `--unset` then `--set` (kops' order) to the stored cluster or
/// group and saves the result through the same checks as an edit.
pub async fn edit_with_sets(
    global: &GlobalArgs,
    cluster: Option<&str>,
    group: Option<&str>,
    flags: &SetFlags,
) -> Result<i32> {
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, cluster).await?;
    // Read, set, save over the version read; when another writer saved in
    // between, read their result and set again, so neither update is lost.
    let mut attempt = 1;
    let outcome = loop {
        let saved = set_and_save(&registry, &cluster, group, flags).await;
        match saved {
            Err(e) if e.is_conflict() && attempt < SET_ATTEMPTS => attempt += 1,
            other => break other?,
        }
    };
    let what = group
        .map(|g| format!("instance group {g}"))
        .unwrap_or_else(|| format!("cluster {cluster}"));
    match outcome {
        EditOutcome::Saved => status(&format!(
            "Saved {what}. Apply it with: kops update cluster --name {cluster} --yes"
        )),
        EditOutcome::Unchanged => status(&format!("No changes made to {what}.")),
    }
    Ok(0)
}

/// The object an edit started from.
enum Opened {
    Cluster(Box<kops_api::Cluster>),
    Group(Box<kops_api::InstanceGroup>),
}

/// Edits the cluster (`group` None) or one of its instance groups.
pub async fn edit_object(
    global: &GlobalArgs,
    positional_cluster: Option<&str>,
    group: Option<String>,
    set: &SetFlags,
) -> Result<i32> {
    if !set.is_empty() {
        return edit_with_sets(global, positional_cluster, group.as_deref(), set).await;
    }
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, positional_cluster).await?;
    // Read with its version: saving fails with a conflict, rather than
    // overwriting, if someone else saves the object while the editor is open.
    let opened = match &group {
        None => {
            let (c, version) = kops_ops::require_cluster_versioned(&registry, &cluster).await?;
            (to_yaml(&c), Opened::Cluster(Box::new(c)), version)
        }
        Some(g) => {
            let (ig, version) =
                kops_ops::require_instance_group_versioned(&registry, &cluster, g).await?;
            (to_yaml(&ig), Opened::Group(Box::new(ig)), version)
        }
    };
    let (original, opened, read_at) = opened;
    let mut current = original.clone();
    let mut last_error: Option<String> = None;
    loop {
        let edited = editor::edit(&format!(
            "{}{}",
            editor::header(last_error.as_deref()),
            current
        ))?;
        let body = editor::strip_header(&edited);
        if body.trim().is_empty() {
            status("Edit cancelled: the file is empty; nothing saved.");
            return Ok(0);
        }
        if body.trim() == current.trim() {
            if let Some(e) = last_error {
                bail!("edit aborted: the edited object is not valid and was left unchanged; nothing saved\n{e}");
            }
            status("Edit cancelled, no changes made.");
            return Ok(0);
        }
        let saved = match &opened {
            Opened::Cluster(c) => {
                kops_ops::save_edited_cluster_over(&registry, &cluster, c, &read_at, &body).await
            }
            Opened::Group(ig) => {
                kops_ops::save_edited_instance_group_over(
                    &registry,
                    &cluster,
                    ig.name(),
                    ig,
                    &read_at,
                    &body,
                )
                .await
            }
        };
        match saved {
            Ok(EditOutcome::Saved) => {
                status(&format!(
                    "Saved {}. Apply it with: kops update cluster --name {cluster} --yes",
                    group
                        .as_deref()
                        .map(|g| format!("instance group {g}"))
                        .unwrap_or_else(|| format!("cluster {cluster}"))
                ));
                return Ok(0);
            }
            Ok(EditOutcome::Unchanged) => {
                status("Edit cancelled, no changes made.");
                return Ok(0);
            }
            Err(e @ (OpsError::Manifest(_) | OpsError::Invalid(_) | OpsError::Rename { .. })) => {
                status(&format!(
                    "error: {e}\nReopening the editor; save the file unchanged to give up."
                ));
                last_error = Some(e.to_string());
                current = body;
            }
            Err(e) => return Err(e.into()),
        }
    }
}
