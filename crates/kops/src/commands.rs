//! One function per command: turn arguments into options, call kops-ops,
//! print the result. Returns the process exit code.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::CommandFactory;
use kops_api::manifest::{to_json_value, to_yaml};
use kops_api::new_cluster::NewClusterOptions;
use kops_api::{Cluster, InstanceGroup, Role};
use kops_ops::{EditOutcome, OpsError, Registry};

use crate::cli::*;
use crate::editor;
use crate::output::{manifest_format, print, print_objects, status, Table};

pub async fn run(cli: Cli) -> Result<i32> {
    let global = cli.global;
    match cli.command {
        Command::Version(args) => {
            if args.short {
                print(&format!("{}\n", crate::VERSION));
            } else {
                print(&format!("Client version: {} (kops-rs)\n", crate::VERSION));
            }
            Ok(0)
        }
        Command::Completion(args) => {
            let mut cmd = Cli::command();
            let mut out = std::io::stdout();
            clap_complete::generate(args.shell, &mut cmd, "kops", &mut out);
            Ok(0)
        }
        Command::Create(args) => create(&global, args).await,
        Command::Get(args) => get(&global, args).await,
        Command::Edit(args) => edit(&global, args).await,
        Command::Replace(args) => {
            let registry = state(&global).await?;
            apply_files(
                &registry,
                &args.filenames,
                true,
                args.force,
                global.name.as_deref(),
            )
            .await
        }
        Command::Delete(args) => delete(&global, args).await,
        Command::Validate(args) => crate::roll_commands::validate(&global, args).await,
        Command::RollingUpdate(args) => crate::roll_commands::rolling_update(&global, args).await,
        Command::Toolbox(args) => crate::toolbox_commands::toolbox(&global, args).await,
        Command::Export(args) => crate::pki_commands::export(&global, args).await,
        Command::Promote(args) => crate::pki_commands::promote(&global, args).await,
        Command::Distrust(args) => crate::pki_commands::distrust(&global, args).await,
        Command::Trust(args) => crate::more_commands::trust(&global, args).await,
        Command::Upgrade(args) => crate::more_commands::upgrade(&global, args).await,
        Command::Update(args) => match args.what {
            UpdateCommand::Cluster(a) => update_cluster(&global, a).await,
        },
    }
}

async fn state(global: &GlobalArgs) -> Result<Registry> {
    Ok(kops_ops::open_state(global.state.as_deref()).await?)
}

async fn cluster_name(
    registry: &Registry,
    global: &GlobalArgs,
    positional: Option<&str>,
) -> Result<String> {
    let name = positional.or(global.name.as_deref());
    Ok(kops_ops::resolve_cluster_name(registry, name).await?)
}

fn read_input(path: &Path) -> Result<(String, String)> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the manifest from stdin")?;
        return Ok(("<stdin>".to_string(), text));
    }
    let text = std::fs::read_to_string(path).map_err(|source| OpsError::ReadFile {
        path: path.display().to_string(),
        source,
    })?;
    Ok((path.display().to_string(), text))
}

// ---------------------------------------------------------------- create

async fn create(global: &GlobalArgs, args: CreateArgs) -> Result<i32> {
    match args.what {
        None if args.filenames.is_empty() => {
            bail!("nothing to create\nhint: `kops create -f FILE`, `kops create cluster NAME --zones ZONES`, `kops create instancegroup NAME` or `kops create sshpublickey -i FILE`")
        }
        None => {
            let registry = state(global).await?;
            apply_files(
                &registry,
                &args.filenames,
                false,
                false,
                global.name.as_deref(),
            )
            .await
        }
        Some(CreateCommand::Cluster(a)) => create_cluster(global, *a).await,
        Some(CreateCommand::Instancegroup(a)) => create_instance_group(global, a).await,
        Some(CreateCommand::Secret(a)) => crate::pki_commands::create_secret(global, a).await,
        Some(CreateCommand::Keypair(a)) => crate::pki_commands::create_keypair(global, a).await,
        Some(CreateCommand::Sshpublickey(a)) => {
            let registry = state(global).await?;
            let name = cluster_name(&registry, global, a.cluster_name.as_deref()).await?;
            let (_, text) = read_input(&a.public_key)?;
            let id = kops_ops::add_ssh_public_key(&registry, &name, &text).await?;
            status(&format!("Added SSH public key {id} to cluster {name}"));
            Ok(0)
        }
    }
}

async fn apply_files(
    registry: &Registry,
    files: &[PathBuf],
    replace: bool,
    force: bool,
    default_cluster: Option<&str>,
) -> Result<i32> {
    // Read every file first: a missing second file must not leave the first applied.
    let mut inputs = Vec::new();
    for f in files {
        inputs.push(read_input(f)?);
    }
    for (source, text) in inputs {
        let applied =
            kops_ops::apply_manifest(registry, &source, &text, replace, force, default_cluster)
                .await?;
        for a in applied {
            status(&format!(
                "{} {} {}: {}",
                a.action,
                a.kind,
                a.name,
                describe_owner(&a)
            ));
        }
    }
    Ok(0)
}

fn describe_owner(a: &kops_ops::Applied) -> String {
    if a.kind == "Cluster" {
        "ok".into()
    } else {
        format!("in cluster {}", a.cluster)
    }
}

fn default_ssh_key() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let p = PathBuf::from(home).join(".ssh").join("id_rsa.pub");
    p.exists().then_some(p)
}

async fn create_cluster(global: &GlobalArgs, a: CreateClusterArgs) -> Result<i32> {
    let name = a
        .cluster_name
        .clone()
        .or_else(|| global.name.clone())
        .ok_or(OpsError::ClusterNameRequired { known: Vec::new() })?;
    if a.dry_run && a.output.is_none() {
        bail!("--dry-run needs an output format\nhint: add `-o yaml` or `-o json`");
    }
    let options = NewClusterOptions {
        cluster_name: name.clone(),
        cloud: a.cloud,
        project: a.project,
        gce_service_account: a.gce_service_account,
        zones: a.zones,
        control_plane_zones: a.control_plane_zones,
        control_plane_count: a.control_plane_count,
        control_plane_size: a.control_plane_size,
        control_plane_volume_size: a.control_plane_volume_size,
        control_plane_volume_type: a.control_plane_volume_type,
        control_plane_image: a.control_plane_image,
        control_plane_security_groups: a.control_plane_security_groups,
        node_count: a.node_count,
        node_size: a.node_size,
        node_volume_size: a.node_volume_size,
        node_image: a.node_image,
        node_security_groups: a.node_security_groups,
        bastion_image: a.bastion_image,
        apiserver_count: a.apiserver_count,
        apiserver_size: a.apiserver_size,
        image: a.image,
        networking: a.networking,
        topology: a.topology,
        bastion: a.bastion.unwrap_or(false),
        dns_type: a.dns_type,
        dns_zone: a.dns_zone,
        network_cidrs: a.network_cidr,
        network_id: a.vpc,
        subnet_ids: a.subnets,
        utility_subnet_ids: a.utility_subnets,
        egress: a.egress,
        kubernetes_version: a.kubernetes_version,
        kubernetes_feature_gates: a.kubernetes_feature_gates,
        ssh_access: a.ssh_access,
        admin_access: a.admin_access,
        api_load_balancer_type: a.api_load_balancer_type,
        api_public_name: a.api_public_name,
        api_ssl_certificate: a.api_ssl_certificate,
        encrypt_etcd_storage: a.encrypt_etcd_storage,
        etcd_clusters: a.etcd_clusters,
        cloud_labels: a.cloud_labels,
        channel: a.channel,
        discovery_store: a.discovery_store,
        instance_manager: a.instance_manager,
        ipv6: a.ipv6.unwrap_or(false),
        state_store: global.state.clone(),
        sets: a.sets,
        unsets: a.unsets,
        ..Default::default()
    };
    // Only the dry run may work without a state store.
    let registry = if a.dry_run {
        match global.state.as_deref() {
            Some(_) => Some(state(global).await?),
            None => None,
        }
    } else {
        Some(state(global).await?)
    };
    let key_path = match &a.ssh_public_key {
        Some(p) => Some(p.clone()),
        None => default_ssh_key(),
    };
    let ssh_public_key = match &key_path {
        Some(p) => Some(read_input(p)?.1),
        None => None,
    };
    let request = kops_ops::CreateClusterRequest {
        options,
        ssh_public_key,
        dry_run: a.dry_run,
    };
    let created = match &registry {
        Some(r) => kops_ops::create_cluster(r, request).await?,
        None => {
            let memory = kops_ops::open_state(Some("memory://dry-run")).await?;
            kops_ops::create_cluster(&memory, request).await?
        }
    };
    if let Some(project) = &created.gcloud_project {
        status(&format!("Using gcloud's default project {project}"));
    }
    if let (true, Some(format)) = (a.dry_run, a.output) {
        let mut values = vec![to_json_value(&created.spec.cluster)];
        let mut groups: Vec<&InstanceGroup> = created.spec.instance_groups.iter().collect();
        groups.sort_by(|x, y| x.name().cmp(y.name()));
        values.extend(groups.into_iter().map(to_json_value));
        print_objects(&values, format);
        return Ok(0);
    }
    status(&format!(
        "Created cluster {name} with {} instance groups in {}",
        created.spec.instance_groups.len(),
        global.state.as_deref().unwrap_or_default()
    ));
    if let Some(id) = &created.ssh_key_id {
        status(&format!("Added SSH public key {id}"));
    }
    if a.yes {
        // As kops: `create cluster --yes` also applies the cluster.
        let target = a.target.as_deref().unwrap_or("direct");
        return update_cluster(
            global,
            UpdateClusterArgs {
                cluster_name: Some(name),
                yes: true,
                target: target.to_string(),
                out: None,
                output: Output::Table,
                exit_code: false,
            },
        )
        .await;
    }
    // Name a group that exists: node groups are `nodes-<zone>`, one per zone.
    let mut node_groups: Vec<&str> = created
        .spec
        .instance_groups
        .iter()
        .filter(|g| g.role() == Some(Role::Node))
        .map(|g| g.name())
        .collect();
    node_groups.sort();
    let node_group = node_groups.first().copied().unwrap_or("nodes");
    status(&format!(
        "\nSuggestions:\n * list clusters with: kops get cluster\n * edit this cluster with: kops edit cluster {name}\n * edit your node instance group: kops edit ig --name={name} {node_group}\n * review the spec with: kops get all {name} -o yaml"
    ));
    Ok(0)
}

async fn create_instance_group(global: &GlobalArgs, a: CreateInstanceGroupArgs) -> Result<i32> {
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

// ---------------------------------------------------------------- get

fn cluster_zones(c: &Cluster) -> String {
    let mut zones: Vec<&str> = c
        .spec
        .subnets
        .iter()
        .flatten()
        .filter_map(|s| s.zone.as_deref().or(s.region.as_deref()))
        .collect();
    zones.sort();
    zones.dedup();
    zones.join(",")
}

fn group_zones(ig: &InstanceGroup, cluster: &Cluster) -> String {
    let subnets = cluster.spec.subnets.as_deref().unwrap_or_default();
    let mut zones: Vec<String> = ig
        .spec
        .subnets
        .iter()
        .flatten()
        .map(|name| {
            subnets
                .iter()
                .find(|s| &s.name == name)
                .and_then(|s| s.zone.clone())
                .unwrap_or_else(|| name.clone())
        })
        .chain(ig.spec.zones.iter().flatten().cloned())
        .collect();
    zones.sort();
    zones.dedup();
    zones.join(",")
}

async fn get(global: &GlobalArgs, args: GetArgs) -> Result<i32> {
    let registry = state(global).await?;
    let format = manifest_format(args.output.into());
    match args.what {
        Some(GetCommand::Clusters { names }) => {
            let mut clusters = registry.list_clusters().await?;
            // With no names, every cluster: --name / KOPS_CLUSTER_NAME picks the
            // cluster other commands work on, it does not filter this list.
            let wanted = names;
            if !wanted.is_empty() {
                for w in &wanted {
                    if !clusters.iter().any(|c| c.name() == w) {
                        return Err(OpsError::ClusterNotFound {
                            name: w.clone(),
                            store: registry.store().base_url().to_string(),
                        }
                        .into());
                    }
                }
                clusters.retain(|c| wanted.iter().any(|w| w == c.name()));
            }
            match format {
                Some(f) => {
                    print_objects(&clusters.iter().map(to_json_value).collect::<Vec<_>>(), f)
                }
                None => {
                    if clusters.is_empty() {
                        status(&format!(
                            "No clusters found in {}",
                            registry.store().base_url()
                        ));
                        return Ok(0);
                    }
                    let mut t = Table::new(&["NAME", "CLOUD", "ZONES"]);
                    for c in &clusters {
                        t.row(vec![
                            c.name().to_string(),
                            c.spec.cloud_provider.clone().unwrap_or_default(),
                            cluster_zones(c),
                        ]);
                    }
                    print(&t.render());
                }
            }
        }
        Some(GetCommand::Instancegroups { names }) => {
            let name = cluster_name(&registry, global, None).await?;
            let cluster = kops_ops::require_cluster(&registry, &name).await?;
            let mut groups = registry.list_instance_groups(&name).await?;
            for w in &names {
                if !groups.iter().any(|g| g.name() == w) {
                    return Err(OpsError::InstanceGroupNotFound {
                        cluster: name.clone(),
                        name: w.clone(),
                    }
                    .into());
                }
            }
            if !names.is_empty() {
                groups.retain(|g| names.iter().any(|w| w == g.name()));
            }
            match format {
                Some(f) => print_objects(&groups.iter().map(to_json_value).collect::<Vec<_>>(), f),
                None => print(&groups_table(&groups, &cluster)),
            }
        }
        Some(GetCommand::Sshpublickeys) => {
            let name = cluster_name(&registry, global, None).await?;
            kops_ops::require_cluster(&registry, &name).await?;
            let keys = registry.list_ssh_public_keys(&name).await?;
            let values: Vec<serde_json::Value> = keys
                .iter()
                .map(|k| serde_json::json!({"id": k.id, "publicKey": k.public_key}))
                .collect();
            match format {
                Some(ManifestOutput::Json) => {
                    print(&format!("{}\n", serde_json::to_string_pretty(&values)?))
                }
                Some(ManifestOutput::Yaml) => print(&serde_yaml_ng::to_string(&values)?),
                None => {
                    if keys.is_empty() {
                        bail!("no SSH public key found for cluster `{name}`\nhint: add one with `kops create sshpublickey -i ~/.ssh/id_ed25519.pub --name {name}`");
                    }
                    let mut t = Table::new(&["ID"]);
                    for k in keys {
                        t.row(vec![k.id]);
                    }
                    print(&t.render());
                }
            }
        }
        Some(GetCommand::Keypairs { names, distrusted }) => {
            return crate::pki_commands::get_keypairs(global, &names, distrusted, args.output).await
        }
        Some(GetCommand::Secrets { names }) => {
            return crate::pki_commands::get_secrets(global, &names, args.output).await
        }
        Some(GetCommand::Instances(a)) => {
            return crate::more_commands::get_instances(global, a, args.output).await
        }
        Some(GetCommand::Assets(a)) => {
            let name = cluster_name(&registry, global, a.cluster_name.as_deref()).await?;
            return crate::assets_commands::get_assets(&registry, &name, a, args.output).await;
        }
        Some(GetCommand::All { cluster_name: c }) => {
            get_all(&registry, global, c.as_deref(), args.output.into()).await?
        }
        None => get_all(&registry, global, None, args.output.into()).await?,
    }
    Ok(0)
}

fn groups_table(groups: &[InstanceGroup], cluster: &Cluster) -> String {
    let mut t = Table::new(&["NAME", "ROLE", "MACHINETYPE", "MIN", "MAX", "ZONES"]);
    for g in groups {
        t.row(vec![
            g.name().to_string(),
            g.role()
                .map(|r| {
                    if r == Role::ControlPlane {
                        "ControlPlane"
                    } else {
                        r.as_str()
                    }
                })
                .unwrap_or("")
                .to_string(),
            g.spec.machine_type.clone().unwrap_or_default(),
            g.spec.min_size.map(|v| v.to_string()).unwrap_or_default(),
            g.spec.max_size.map(|v| v.to_string()).unwrap_or_default(),
            group_zones(g, cluster),
        ]);
    }
    t.render()
}

async fn get_all(
    registry: &Registry,
    global: &GlobalArgs,
    positional: Option<&str>,
    out: Output,
) -> Result<()> {
    let name = cluster_name(registry, global, positional).await?;
    let cluster = kops_ops::require_cluster(registry, &name).await?;
    let groups = registry.list_instance_groups(&name).await?;
    match manifest_format(out) {
        Some(f) => {
            let mut values = vec![to_json_value(&cluster)];
            values.extend(groups.iter().map(to_json_value));
            print_objects(&values, f);
        }
        None => {
            let mut t = Table::new(&["NAME", "CLOUD", "ZONES"]);
            t.row(vec![
                name.clone(),
                cluster.spec.cloud_provider.clone().unwrap_or_default(),
                cluster_zones(&cluster),
            ]);
            print(&format!(
                "Cluster\n{}\nInstance Groups\n{}",
                t.render(),
                groups_table(&groups, &cluster)
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- edit

/// The edit loop: open, save, and on an invalid result reopen with the error
/// shown at the top. Leaving the file unchanged (or empty) aborts.
async fn edit(global: &GlobalArgs, args: EditArgs) -> Result<i32> {
    match &args.what {
        EditCommand::Cluster { cluster_name, set } if !set.is_empty() => {
            return crate::more_commands::edit_with_sets(global, cluster_name.as_deref(), None, set)
                .await
        }
        EditCommand::Instancegroup { group, set } if !set.is_empty() => {
            return crate::more_commands::edit_with_sets(global, None, Some(group), set).await
        }
        _ => {}
    }
    let registry = state(global).await?;
    let (cluster, group) = match &args.what {
        EditCommand::Cluster {
            cluster_name: c, ..
        } => (cluster_name(&registry, global, c.as_deref()).await?, None),
        EditCommand::Instancegroup { group, .. } => (
            cluster_name(&registry, global, None).await?,
            Some(group.clone()),
        ),
    };
    let original = match &group {
        None => to_yaml(&kops_ops::require_cluster(&registry, &cluster).await?),
        Some(g) => {
            let ig = registry
                .get_instance_group(&cluster, g)
                .await?
                .ok_or_else(|| OpsError::InstanceGroupNotFound {
                    cluster: cluster.clone(),
                    name: g.clone(),
                })?;
            to_yaml(&ig)
        }
    };
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
        let saved = match &group {
            None => kops_ops::save_edited_cluster(&registry, &cluster, &body).await,
            Some(g) => kops_ops::save_edited_instance_group(&registry, &cluster, g, &body).await,
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

// ---------------------------------------------------------------- update

async fn update_cluster(global: &GlobalArgs, a: UpdateClusterArgs) -> Result<i32> {
    let render_target = match a.target.as_str() {
        "direct" => None,
        "terraform" => Some(kops_ops::render::RenderTarget::Terraform),
        "cloudformation" => Some(kops_ops::render::RenderTarget::CloudFormation),
        other => bail!(
            "unknown target `{other}`\nhint: use `direct` (the default: apply through the AWS API), `terraform` or `cloudformation`"
        ),
    };
    if let Some(target) = render_target {
        return render_cluster(global, a, target).await;
    }
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, a.cluster_name.as_deref()).await?;
    let started = std::time::Instant::now();
    let outcome = kops_ops::update_cluster(
        &registry,
        kops_ops::UpdateRequest {
            cluster: cluster.clone(),
            apply: a.yes,
            progress: a.yes.then(|| {
                Box::new(crate::progress::ProgressLines::stderr(global.verbosity))
                    as Box<dyn kops_engine::Progress>
            }),
            sdk_config: None,
        },
    )
    .await?;
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
        "{} tasks (longest dependency chain {}) in {}, {calls} AWS calls, {:.1}s",
        outcome.tasks,
        outcome.longest_chain,
        outcome.region,
        started.elapsed().as_secs_f64()
    );
    if a.yes {
        status(&format!(
            "Cluster changes have been applied to the cloud ({summary})."
        ));
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
    global: &GlobalArgs,
    a: UpdateClusterArgs,
    target: kops_ops::render::RenderTarget,
) -> Result<i32> {
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, a.cluster_name.as_deref()).await?;
    let started = std::time::Instant::now();
    let outcome = kops_ops::render::render_cluster(
        &registry,
        kops_ops::render::RenderRequest {
            cluster,
            target,
            out: a.out,
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

// ---------------------------------------------------------------- delete

pub(crate) async fn delete(global: &GlobalArgs, args: DeleteArgs) -> Result<i32> {
    let what = match args.what {
        Some(w) => w,
        None if args.filenames.is_empty() => bail!(
            "nothing to delete\nhint: `kops delete -f FILE`, `kops delete cluster NAME`, `kops delete instancegroup NAME` or `kops delete instance ID`"
        ),
        None => return crate::more_commands::delete_files(global, &args.filenames, args.yes).await,
    };
    let registry = state(global).await?;
    match what {
        DeleteCommand::Instance(a) => crate::more_commands::delete_instance(global, a).await,
        DeleteCommand::Instancegroup { group, yes } => {
            let cluster = cluster_name(&registry, global, None).await?;
            let result = kops_ops::delete_instance_group(&registry, &cluster, &group, yes).await?;
            if result.deleted {
                status(&format!(
                    "Deleted instance group {group} from cluster {cluster}."
                ));
                status("Note: kops-rs does not yet remove the group's cloud resources; they go with `kops delete cluster` once the cloud commands land.");
            } else {
                print(&format!(
                    "InstanceGroup {group} (role {}, {} to {} instances) would be deleted from cluster {cluster}.\n",
                    result.group.spec.role.as_deref().unwrap_or("?"),
                    result.group.spec.min_size.unwrap_or(0),
                    result.group.spec.max_size.unwrap_or(0)
                ));
                status("Must specify --yes to delete");
            }
            Ok(0)
        }
        DeleteCommand::Cluster {
            cluster_name: c,
            yes,
            unregister,
            region,
            count,
            interval,
        } => {
            let cluster = match c.as_deref().or(global.name.as_deref()) {
                Some(n) => n.to_string(),
                None => kops_ops::resolve_cluster_name(&registry, None).await?,
            };
            if unregister {
                kops_ops::require_cluster(&registry, &cluster).await?;
                if !yes {
                    let keys = registry.store().list(&format!("{cluster}/")).await?;
                    let mut t = Table::new(&["TYPE", "NAME"]);
                    for k in &keys {
                        t.row(vec![
                            "state-store object".into(),
                            registry.store().url_of(k),
                        ]);
                    }
                    print(&t.render());
                    status("Must specify --yes to delete");
                    return Ok(0);
                }
                let n = kops_ops::unregister_cluster(&registry, &cluster).await?;
                status(&format!(
                    "Removed cluster {cluster} from the state store ({n} objects)."
                ));
                return Ok(0);
            }
            let progress = |r: &kops_aws::delete::Resource, blocked: Option<&str>| match blocked {
                None => status(&format!("  deleted  {} {} ({})", r.kind, r.id, r.name)),
                Some(why) => status(&format!("  waiting  {} {}: {why}", r.kind, r.id)),
            };
            let outcome = kops_ops::delete_cluster(
                &registry,
                kops_ops::DeleteRequest {
                    cluster: cluster.clone(),
                    yes,
                    region,
                    passes: count,
                    interval,
                    progress: Box::new(progress),
                    sdk_config: None,
                },
            )
            .await?;
            if !yes {
                let mut t = Table::new(&["TYPE", "NAME", "ID"]);
                for r in &outcome.resources {
                    let kind = if r.shared {
                        format!("{} (shared, kept)", r.kind)
                    } else {
                        r.kind.to_string()
                    };
                    t.row(vec![kind, r.name.clone(), r.id.clone()]);
                }
                for k in &outcome.state_keys {
                    t.row(vec![
                        "state-store object".into(),
                        k.clone(),
                        registry.store().url_of(k),
                    ]);
                }
                print(&t.render());
                status(&format!(
                    "Must specify --yes to delete ({} AWS calls)",
                    outcome.calls
                ));
                return Ok(0);
            }
            let report = outcome.report.unwrap_or_default();
            status(&format!(
                "Deleted cluster {cluster}: {} cloud resources in {} passes, {} kept as shared, state removed ({} AWS calls).",
                report.deleted.len(),
                report.passes,
                report.kept.len(),
                outcome.calls
            ));
            Ok(0)
        }
        DeleteCommand::Secret { names } => crate::pki_commands::delete_secret(global, &names).await,
        DeleteCommand::Sshpublickey { id } => {
            let cluster = cluster_name(&registry, global, None).await?;
            kops_ops::require_cluster(&registry, &cluster).await?;
            registry.delete_ssh_public_key(&cluster, &id).await?;
            status(&format!(
                "Deleted SSH public key {id} from cluster {cluster}."
            ));
            Ok(0)
        }
    }
}
