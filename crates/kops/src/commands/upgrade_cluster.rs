//! `kops upgrade cluster`: propose the Kubernetes version (and images) the
//! cluster's channel recommends; --yes stores them.

use anyhow::Result;
use clap::Args;
use kops_api::manifest::to_yaml;
use kops_api::version::KubernetesVersion;

use crate::args::GlobalArgs;
use crate::channel_versions::{
    channel_versions, proposed_version, semver_text, triple, upstream_image,
};
use crate::context::{cluster_name, state};
use crate::output::{print, status, Table};

#[derive(Debug, Args)]
pub struct UpgradeClusterArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Store the proposed changes (otherwise only show them).
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Channel to upgrade with: stable, alpha, or a channel file (path or file:// URL).
    #[arg(long, value_name = "CHANNEL")]
    pub channel: Option<String>,
    /// Kubernetes version to upgrade to (instead of the channel's recommendation).
    #[arg(long, value_name = "VERSION")]
    pub kubernetes_version: Option<String>,
}

pub async fn run(global: &GlobalArgs, a: UpgradeClusterArgs) -> Result<i32> {
    let registry = state(global).await?;
    let name = cluster_name(&registry, global, a.cluster_name.as_deref()).await?;
    let mut cluster = kops_ops::require_cluster(&registry, &name).await?;
    let mut groups = registry.list_instance_groups(&name).await?;
    let current_channel = cluster.spec.channel.clone().unwrap_or_default();
    let channel = a
        .channel
        .clone()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| {
            if current_channel.is_empty() {
                "stable".to_string()
            } else {
                current_channel.clone()
            }
        });
    let specs = channel_versions(&channel)?;
    // (item, property, old, new)
    let mut actions: Vec<[String; 4]> = Vec::new();
    if channel != current_channel {
        actions.push([
            "Cluster".into(),
            "Channel".into(),
            current_channel.clone(),
            channel.clone(),
        ]);
        cluster.spec.channel = Some(channel.clone());
    }
    let old_text = cluster.spec.kubernetes_version.clone().unwrap_or_default();
    let current = KubernetesVersion::parse(&old_text);
    if current.is_none() {
        status(&format!(
            "warning: cannot read the cluster's kubernetesVersion `{old_text}`"
        ));
    }
    let proposed = match &a.kubernetes_version {
        Some(v) => Some(KubernetesVersion::parse(v).ok_or_else(|| {
            kops_ops::flag_error(
                "--kubernetes-version",
                &format!("`{v}` is not a Kubernetes version"),
                "write e.g. `1.35.7`",
            )
        })?),
        None => current.as_ref().and_then(|c| {
            let p = proposed_version(&specs, c);
            if p.is_none() {
                status(&format!(
                    "warning: channel `{channel}` has no version information for Kubernetes {old_text}"
                ));
            }
            p
        }),
    };
    let proposed = match (&current, proposed) {
        (Some(c), Some(p)) if triple(c) > triple(&p) => Some(c.clone()),
        (_, p) => p,
    };
    if let (Some(c), Some(p)) = (&current, &proposed) {
        if c != p {
            let new = semver_text(p);
            actions.push([
                "Cluster".into(),
                "KubernetesVersion".into(),
                old_text.clone(),
                new.clone(),
            ]);
            cluster.spec.kubernetes_version = Some(new);
        }
    }
    let target = proposed.or(current);
    let mut changed_groups = Vec::new();
    if let Some(v) = &target {
        let cloud = cluster.spec.cloud_provider.clone().unwrap_or_default();
        for g in &mut groups {
            let arch = kops_api::new_cluster::machine_architecture(
                g.spec.machine_type.as_deref().unwrap_or_default(),
            );
            let Some(image) = kops_api::new_cluster::default_image(&cloud, v, arch) else {
                continue;
            };
            let old = g.spec.image.clone().unwrap_or_default();
            if (old.is_empty() || upstream_image(&old)) && old != image {
                actions.push([
                    format!("InstanceGroup/{}", g.name()),
                    "Image".into(),
                    old,
                    image.to_string(),
                ]);
                g.spec.image = Some(image.to_string());
                changed_groups.push(g.name().to_string());
            }
        }
    }
    if actions.is_empty() {
        status("\nNo upgrade required");
        return Ok(0);
    }
    let mut t = Table::new(&["ITEM", "PROPERTY", "OLD", "NEW"]);
    for row in &actions {
        t.row(row.to_vec());
    }
    print(&t.render());
    if !a.yes {
        print("\nMust specify --yes to perform upgrade\n");
        return Ok(0);
    }
    kops_ops::save_edited_cluster(&registry, &name, &to_yaml(&cluster)).await?;
    for g in groups
        .iter()
        .filter(|g| changed_groups.iter().any(|c| c == g.name()))
    {
        kops_ops::save_edited_instance_group(&registry, &name, g.name(), &to_yaml(g)).await?;
    }
    print(&format!(
        "\nUpdates applied to configuration.\nYou can now apply these changes, using `kops update cluster {name}`\n"
    ));
    Ok(0)
}
