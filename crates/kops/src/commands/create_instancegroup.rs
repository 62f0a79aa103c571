//! `kops create instancegroup NAME`: a new instance group (edited before it is stored).

use anyhow::{bail, Result};
use clap::Args;
use kops_api::manifest::{to_json_value, to_yaml};
use kops_api::Role;

use crate::args::{GlobalArgs, ManifestOutput};
use crate::context::{cluster_name, state};
use crate::editor;
use crate::output::{print_objects, status};

#[derive(Debug, Args)]
pub struct CreateInstanceGroupArgs {
    /// Name of the instance group.
    #[arg(value_name = "INSTANCEGROUP")]
    pub group: String,
    /// Role: Node, Master (ControlPlane), Bastion or APIServer.
    #[arg(long, default_value = "Node")]
    pub role: String,
    /// Subnets the group runs in (default: the subnets that fit the role).
    #[arg(long = "subnet", value_delimiter = ',', value_name = "NAMES")]
    pub subnets: Vec<String>,
    /// Zones the group runs in (its spec.zones), e.g. `us-east-1a,us-east-1b`.
    #[arg(long = "zone", value_delimiter = ',', value_name = "ZONES")]
    pub zones: Vec<String>,
    /// Print the group instead of storing it.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format for --dry-run.
    #[arg(short = 'o', long, value_name = "FORMAT")]
    pub output: Option<ManifestOutput>,
    /// Open the new group in $EDITOR before storing it (default true).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = true, value_name = "BOOL")]
    pub edit: bool,
}

pub async fn run(global: &GlobalArgs, a: CreateInstanceGroupArgs) -> Result<i32> {
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    let role = Role::parse(&a.role).ok_or_else(|| {
        kops_ops::flag_error(
            "--role",
            &format!("`{}` is not an instance group role", a.role),
            "use `Node`, `Master` (or `ControlPlane`), `Bastion` or `APIServer`",
        )
    })?;
    if a.dry_run && a.output.is_none() {
        bail!("--dry-run needs an output format\nhint: add `-o yaml` or `-o json`");
    }
    let request = kops_ops::NewInstanceGroup {
        cluster: cluster.clone(),
        name: a.group.clone(),
        role,
        subnets: a.subnets,
        zones: a.zones,
        // With --edit the group is stored after the edit, below.
        dry_run: a.dry_run || a.edit,
    };
    let ig = kops_ops::create_instance_group(&registry, request).await?;
    if a.dry_run {
        print_objects(
            &[to_json_value(&ig)],
            a.output.unwrap_or(ManifestOutput::Yaml),
        );
        return Ok(0);
    }
    if a.edit {
        let text = to_yaml(&ig);
        let edited = editor::edit(&format!("{}{}", editor::header(None), text))?;
        let body = editor::strip_header(&edited);
        if body.trim().is_empty() {
            status("Edit cancelled: the file is empty; nothing saved.");
            return Ok(0);
        }
        kops_ops::apply_manifest(
            &registry,
            "edited instance group",
            &body,
            false,
            false,
            Some(&cluster),
        )
        .await?;
    }
    status(&format!(
        "Created instance group {} in cluster {cluster}",
        a.group
    ));
    Ok(0)
}
