//! `kops update cluster`: compare the spec with the cloud and, with --yes,
//! make the cloud match (`--target terraform|cloudformation` writes files).

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use crate::args::{bool_flag, GlobalArgs, KubeApiFlags, Output};
use crate::context::{cluster_name, read_input, state};
use crate::kubeconfig::{write_kubeconfig, KubeconfigChoice, KubeconfigUserFlags};
use crate::output::{print, status};

#[derive(Debug, Args, Default)]
pub struct UpdateClusterArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Apply the changes (otherwise only show them).
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Where to apply: `direct` (the AWS API), `terraform` (kubernetes.tf + data/)
    /// or `cloudformation` (kubernetes.json); the file targets make no cloud call.
    #[arg(long, default_value = "direct", value_name = "TARGET")]
    pub target: String,
    /// Output directory for file targets (default out/terraform, out/cloudformation).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Plan format: `table` (kops' text) or `json`.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// In a dry run, exit with 2 when there are changes (0 when none).
    #[arg(long)]
    pub exit_code: bool,
    /// SSH public key to add to the cluster's keys first (deprecated in kops:
    /// use `kops create sshpublickey`).
    #[arg(long, value_name = "FILE")]
    pub ssh_public_key: Option<PathBuf>,
    /// Write a kubeconfig for the cluster after applying (default true).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub create_kube_config: Option<bool>,
    #[command(flatten)]
    pub who: KubeconfigUserFlags,
    #[command(flatten)]
    pub kube: KubeApiFlags,
    /// Allow an older kops than the one that last updated the cluster.
    #[arg(long)]
    pub allow_kops_downgrade: bool,
    /// Instance groups to update (default: all).
    #[arg(long = "instance-group", value_delimiter = ',', value_name = "NAMES")]
    pub instance_groups: Vec<String>,
    /// Instance group roles to update (control-plane, apiserver, node, bastion).
    #[arg(
        long = "instance-group-roles",
        value_delimiter = ',',
        value_name = "ROLES"
    )]
    pub instance_group_roles: Vec<String>,
    /// Subset of tasks to run: cluster, network, security.
    #[arg(long, value_name = "PHASE")]
    pub phase: Option<String>,
    /// Comma-separated TaskType=Lifecycle overrides, e.g.
    /// `SecurityGroup=Ignore,InternetGateway=ExistsAndWarnIfChanges`
    /// (default: KOPS_LIFECYCLE_OVERRIDES, then the config file).
    #[arg(long, value_delimiter = ',', value_name = "OVERRIDES")]
    pub lifecycle_overrides: Vec<String>,
    /// Delete old revisions of cloud resources that were needed during an
    /// upgrade. kops defers some deletions to this flag (revoked security
    /// group rules, replaced load balancers and target groups); kops-rs
    /// defers none, it makes them in the update itself, so with --yes this
    /// only says so.
    #[arg(long)]
    pub prune: bool,
    /// Update every group's Kubernetes version even while the control plane
    /// runs an older one (otherwise workers keep the oldest control-plane
    /// kubelet's version, read through the kubeconfig context named after
    /// the cluster, until the control plane is rolled).
    #[arg(long)]
    pub ignore_kubelet_version_skew: bool,
    /// vSphere: give an in-cluster component without an account of its own
    /// (VSPHERE_CCM_CREDENTIALS_FILE, VSPHERE_CSI_CREDENTIALS_FILE) your own
    /// vCenter account, with a warning (it can clone and destroy VMs).
    #[arg(long)]
    pub vsphere_copy_operator_credentials: bool,
}

pub async fn run(global: &GlobalArgs, a: UpdateClusterArgs) -> Result<i32> {
    let admin = a.who.admin_lifetime()?;
    if admin.is_some() && a.who.user.is_some() {
        bail!("cannot use both --admin and --user\nhint: --admin writes a new admin credential; --user points the context at an existing kubeconfig user");
    }
    let phase = a
        .phase
        .as_deref()
        .map(kops_ops::update::options::Phase::parse)
        .transpose()?;
    // The flag, then KOPS_LIFECYCLE_OVERRIDES, then the config file (viper's order).
    let overrides = if !a.lifecycle_overrides.is_empty() {
        a.lifecycle_overrides.clone()
    } else if let Some(env) = std::env::var("KOPS_LIFECYCLE_OVERRIDES")
        .ok()
        .filter(|v| !v.is_empty())
    {
        env.split(',').map(|s| s.trim().to_string()).collect()
    } else {
        global.config_lifecycle_overrides.clone()
    };
    let lifecycle_overrides = kops_ops::update::options::parse_lifecycle_overrides(&overrides)?;
    let render_target = match a.target.as_str() {
        "direct" => None,
        "terraform" => Some(kops_ops::render::RenderTarget::Terraform),
        "cloudformation" => Some(kops_ops::render::RenderTarget::CloudFormation),
        other => bail!(
            "unknown target `{other}`\nhint: use `direct` (the default: apply through the AWS API), `terraform` or `cloudformation`"
        ),
    };
    if render_target.is_some() && !lifecycle_overrides.is_empty() {
        bail!("--lifecycle-overrides applies to `--target direct` only\nhint: leave it out when rendering to Terraform or CloudFormation");
    }
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, a.cluster_name.as_deref()).await?;
    if let Some(path) = &a.ssh_public_key {
        let (_, text) = read_input(path)?;
        let id = kops_ops::add_ssh_public_key(&registry, &cluster, &text).await?;
        status(&format!("Using SSH public key {} ({id})", path.display()));
    }
    // As kops: a kubeconfig after an apply unless --create-kube-config=false;
    // --admin, --user and --internal imply it.
    let create_kube_config = a.create_kube_config.unwrap_or(true)
        || admin.is_some()
        || a.who.user.is_some()
        || a.who.internal;
    if let Some(target) = render_target {
        return render_cluster(&registry, &cluster, a, target, phase).await;
    }
    let started = std::time::Instant::now();
    let updated = kops_ops::update_cluster(
        &registry,
        kops_ops::UpdateRequest {
            cluster: cluster.clone(),
            apply: a.yes,
            progress: a.yes.then(|| {
                Box::new(crate::progress::ProgressLines::stderr(global.verbosity))
                    as Box<dyn kops_engine::Progress>
            }),
            options: kops_ops::update::UpdateOptions {
                instance_groups: a.instance_groups.clone(),
                instance_group_roles: a.instance_group_roles.clone(),
                phase,
                lifecycle_overrides,
                allow_kops_downgrade: a.allow_kops_downgrade,
                control_plane_running_version: None,
                vsphere_copy_operator_credentials: a.vsphere_copy_operator_credentials,
            },
            running_version: (!a.ignore_kubelet_version_skew).then(|| {
                let cluster = cluster.clone();
                Box::new(move |spec: String| {
                    Box::pin(control_plane_running_version(cluster, spec))
                        as std::pin::Pin<
                            Box<dyn std::future::Future<Output = Option<String>> + Send>,
                        >
                }) as kops_ops::update::RunningVersion
            }),
        },
    )
    .await?;
    let outcome = match updated {
        kops_ops::Updated::Tasks(outcome) => outcome,
        kops_ops::Updated::Vms(outcome) => {
            return vms_updated(&cluster, &a, outcome, started).await
        }
    };
    for warning in &outcome.warnings {
        status(&format!("warning: {warning}"));
    }
    let report = &outcome.report;
    let plan = report.plan();
    let calls: u64 = outcome.calls.values().sum();
    if !a.yes {
        match a.output {
            Output::Json => print(&format!("{}\n", serde_json::to_string_pretty(&plan)?)),
            _ => {
                print(&plan.to_string());
                if !outcome.state_files.is_empty() {
                    let mut text = String::from("Will write state-store files:\n");
                    for line in &outcome.state_files {
                        text.push_str(&format!("  {line}\n"));
                    }
                    print(&text);
                }
            }
        }
    }
    let summary = format!(
        "{} tasks (longest dependency chain {}) in {}, {calls} {} calls{}, {:.1}s",
        outcome.tasks,
        outcome.longest_chain,
        outcome.region,
        outcome.provider,
        crate::output::limit_waits(&outcome.limits),
        started.elapsed().as_secs_f64()
    );
    if a.yes {
        status(&format!(
            "Cluster changes have been applied to the cloud ({summary})."
        ));
        if a.prune {
            status("--prune: nothing deferred to delete (kops-rs makes the deletions kops defers to --prune in the update itself)");
        }
        let mut first_run = false;
        if create_kube_config {
            first_run = export_after_apply(&registry, &cluster, &a, admin).await?;
        }
        print(&if first_run {
            "\nCluster is starting.  It should be ready in a few minutes.\n\nSuggestions:\n * validate cluster: kops validate cluster --wait 10m\n * list nodes: kubectl get nodes --show-labels\n * read about installing addons at: https://kops.sigs.k8s.io/addons.\n\n".to_string()
        } else {
            "\nChanges may require instances to restart: kops rolling-update cluster\n\n"
                .to_string()
        });
        return Ok(0);
    }
    if report.has_changes() || !outcome.state_files.is_empty() {
        status(&format!("Must specify --yes to apply changes ({summary})."));
        Ok(if a.exit_code { 2 } else { 0 })
    } else {
        status(&format!("No changes need to be applied ({summary})."));
        Ok(0)
    }
}

/// `update cluster --target terraform|cloudformation`: writes files; the
/// only cloud call is the account, when credentials are configured.
async fn render_cluster(
    registry: &kops_ops::Registry,
    cluster: &str,
    a: UpdateClusterArgs,
    target: kops_ops::render::RenderTarget,
    phase: Option<kops_ops::update::options::Phase>,
) -> Result<i32> {
    let cluster = cluster.to_string();
    let started = std::time::Instant::now();
    let outcome = kops_ops::render::render_cluster(
        registry,
        kops_ops::render::RenderRequest {
            cluster,
            target,
            out: a.out,
            phase,
        },
    )
    .await?;
    for warning in &outcome.warnings {
        status(&format!("warning: {warning}"));
    }
    if !outcome.unrendered.is_empty() {
        status(&format!(
            "warning: no renderer for {} (not in the output): {}",
            outcome.unrendered.len(),
            outcome.unrendered.join(", ")
        ));
    }
    for url in &outcome.state_files_written {
        status(&format!("  wrote {url}"));
    }
    status(&format!(
        "Wrote {} files to {} ({} tasks, {:.2}s).",
        outcome.files.len(),
        outcome.out.display(),
        outcome.tasks,
        started.elapsed().as_secs_f64()
    ));
    Ok(0)
}

/// Writes the cluster's kubeconfig after an apply, as `export kubeconfig`
/// does with these flags. Returns whether this was the cluster's first
/// (no context of its name was there before).
async fn export_after_apply(
    registry: &kops_ops::Registry,
    cluster: &str,
    a: &UpdateClusterArgs,
    admin: Option<std::time::Duration>,
) -> Result<bool> {
    let files = kops_pki::KubeconfigFiles::resolve(
        None,
        std::env::var("KUBECONFIG").ok().as_deref(),
        std::env::var_os("HOME").map(PathBuf::from).as_deref(),
    )
    .map_err(kops_ops::OpsError::from)?;
    let first_run = !files.has_context(cluster);
    let choice = KubeconfigChoice {
        admin,
        user: a.who.user.clone(),
        internal: a.who.internal,
        api_server: a.kube.api_server.clone(),
        auth_plugin: false,
    };
    write_kubeconfig(registry, cluster, choice, files).await?;
    Ok(first_run)
}

/// The oldest control-plane kubelet's version (kops' skew rule, see
/// `kops_roll::skew`); `None` when the cluster cannot be asked, said with
/// `-v`, as kops logs it.
async fn control_plane_running_version(cluster: String, spec: String) -> Option<String> {
    let cluster = cluster.as_str();
    match kops_roll::skew::control_plane_running_version(None, cluster, &spec).await {
        Ok(version) => {
            if version != spec.trim_start_matches('v') {
                status(&format!(
                    "The control plane runs Kubernetes {version}: groups without an API server keep it until it runs {spec} (--ignore-kubelet-version-skew to update them now)"
                ));
            }
            Some(version)
        }
        Err(reason) => {
            // One line whatever the verbosity: a plan needs no API server.
            status(&format!(
                "Skipped the control plane's Kubernetes version check: its API did not answer ({reason}); assuming no upgrade is in progress"
            ));
            None
        }
    }
}

/// `update cluster` where the cloud's work is VMs (vSphere): the VMs each
/// group lacks are cloned, the surplus destroyed; VMs made from an older
/// spec are left to `rolling-update`. The plan (or what was done) and the
/// SOAP calls made.
async fn vms_updated(
    cluster: &str,
    a: &UpdateClusterArgs,
    outcome: kops_ops::vsphere::VsphereUpdate,
    started: std::time::Instant,
) -> Result<i32> {
    for warning in &outcome.warnings {
        status(&format!("warning: {warning}"));
    }
    let changes = &outcome.changes;
    let mut text = String::new();
    let verb = |done: &'static str, planned: &'static str| if a.yes { done } else { planned };
    if changes.folder_created {
        text.push_str(&format!(
            "{} the cluster's VM folder\n",
            verb("Created", "Will create")
        ));
    }
    for (names, done, planned) in [
        (&changes.created, "Cloned VMs", "Will clone VMs"),
        (
            &changes.etcd_disks_made,
            "Made etcd disks (First Class Disks)",
            "Will make etcd disks (First Class Disks)",
        ),
        (
            &changes.etcd_disks_grown,
            "Grew etcd disks",
            "Will grow etcd disks",
        ),
        (&changes.destroyed, "Destroyed VMs", "Will destroy VMs"),
        (
            &outcome.state_writes,
            "Wrote state-store files",
            "Will write state-store files",
        ),
    ] {
        if !names.is_empty() {
            text.push_str(&format!("{}:\n", verb(done, planned)));
            for name in names {
                text.push_str(&format!("  {name}\n"));
            }
        }
    }
    if !changes.unfinished.is_empty() {
        text.push_str(&format!(
            "{} (powered off, never joined: left by an interrupted update):\n",
            verb(
                "Replaced VMs that never started",
                "Will replace VMs that never started"
            )
        ));
        for name in &changes.unfinished {
            text.push_str(&format!("  {name}\n"));
        }
    }
    if !changes.tokens_removed.is_empty() {
        text.push_str(&format!(
            "{} (control-plane VMs do not join through kops-controller): {}\n",
            verb(
                "Removed the join token of VMs",
                "Will remove the join token of VMs"
            ),
            changes.tokens_removed.join(", ")
        ));
    }
    if !changes.powered_off.is_empty() {
        text.push_str(&format!(
            "Left alone, powered off after they booted (power them on in vCenter): {}\n",
            changes.powered_off.join(", ")
        ));
    }
    if !changes.stale.is_empty() {
        text.push_str(
            "VMs made from an older spec (`kops rolling-update cluster` replaces them):\n",
        );
        for name in &changes.stale {
            text.push_str(&format!("  {name}\n"));
        }
    }
    print(&text);
    if a.yes && !outcome.secrets.is_empty() {
        component_secrets(cluster, &outcome.secrets).await;
    }
    let summary = format!(
        "{}, {:.1}s",
        crate::output::vsphere_calls(&outcome.calls),
        started.elapsed().as_secs_f64()
    );
    if outcome.is_empty() {
        status(&format!("No changes need to be applied ({summary})."));
        Ok(0)
    } else if a.yes {
        status(&format!(
            "Cluster changes have been applied to vSphere ({summary})."
        ));
        Ok(0)
    } else {
        status(&format!("Must specify --yes to apply changes ({summary})."));
        Ok(if a.exit_code { 2 } else { 0 })
    }
}

/// vSphere: the vCenter credentials of the in-cluster components (cloud
/// controller manager, kops-controller, CSI driver), written as Secrets
/// through the cluster's kubeconfig context once its API answers; until
/// then each `update --yes` says they are still to be written.
async fn component_secrets(cluster: &str, secrets: &[kops_ops::vsphere::ComponentSecret]) {
    let names = || {
        secrets
            .iter()
            .map(|s| format!("{}/{}", s.namespace, s.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match kops_roll::secrets::apply_secrets(None, cluster, secrets).await {
        kops_roll::secrets::SecretsOutcome::Applied(written) if written.is_empty() => {}
        kops_roll::secrets::SecretsOutcome::Applied(written) => status(&format!(
            "Wrote the vCenter credentials of the cluster's components: Secrets {}",
            written.join(", ")
        )),
        kops_roll::secrets::SecretsOutcome::Unreachable(reason) => status(&format!(
            "The cluster's Kubernetes API is not reachable yet ({reason}): the next `kops update cluster --yes` writes the Secrets {} once it answers",
            names()
        )),
        kops_roll::secrets::SecretsOutcome::Refused(reason) => status(&format!(
            "warning: the Secrets {} were not written: {reason}\nhint: check that the kubeconfig context `{cluster}` may write Secrets, then run `kops update cluster --yes` again",
            names()
        )),
    }
}
