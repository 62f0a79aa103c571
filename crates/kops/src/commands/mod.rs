//! One file per kops command (as kops' `cmd/kops/` and cargo's
//! `src/bin/cargo/commands/`): each holds the command's flags and its run
//! function, which turns them into a kops-ops call and prints the result.
//! Here: the dispatch from the parsed command line. Each returns the
//! process exit code.

pub mod completion;
pub mod create;
pub mod create_cluster;
pub mod create_instancegroup;
pub mod create_keypair;
pub mod create_secret;
pub mod create_sshpublickey;
pub mod delete;
pub mod delete_cluster;
pub mod delete_instance;
pub mod delete_instancegroup;
pub mod delete_secret;
pub mod delete_sshpublickey;
pub mod distrust_keypair;
pub mod edit;
pub mod edit_cluster;
pub mod edit_instancegroup;
pub mod export_kubeconfig;
pub mod get;
pub mod get_all;
pub mod get_assets;
pub mod get_clusters;
pub mod get_instancegroups;
pub mod get_instances;
pub mod get_keypairs;
pub mod get_secrets;
pub mod get_sshpublickeys;
pub mod helpers_kubectl_auth;
pub mod promote_keypair;
pub mod reconcile_cluster;
pub mod replace;
pub mod rolling_update_cluster;
pub mod toolbox_addons_apply;
pub mod toolbox_addons_list;
pub mod toolbox_clusterapi_generate_machinedeployment;
pub mod toolbox_dump;
pub mod toolbox_enroll;
pub mod toolbox_instance_selector;
pub mod toolbox_template;
pub mod trust_keypair;
pub mod update_cluster;
pub mod upgrade_cluster;
pub mod validate_cluster;
pub mod version;

use anyhow::Result;

use crate::cli::*;

pub async fn run(cli: Cli) -> Result<i32> {
    let global = &cli.global;
    match cli.command {
        Command::Version(a) => version::run(global, a).await,
        Command::Completion(a) => completion::run(a),
        Command::Create(a) => create::run(global, a).await,
        Command::Get(a) => get::run(global, a).await,
        Command::Edit(a) => match a.what {
            EditCommand::Cluster(a) => edit_cluster::run(global, a).await,
            EditCommand::Instancegroup(a) => edit_instancegroup::run(global, a).await,
        },
        Command::Replace(a) => replace::run(global, a).await,
        Command::Update(a) => match a.what {
            UpdateCommand::Cluster(a) => update_cluster::run(global, *a).await,
        },
        Command::Delete(a) => delete::run(global, a).await,
        Command::Export(a) => match a.what {
            ExportCommand::Kubeconfig(a) => export_kubeconfig::run(global, a).await,
        },
        Command::Promote(a) => match a.what {
            PromoteCommand::Keypair(a) => promote_keypair::run(global, a).await,
        },
        Command::Distrust(a) => match a.what {
            DistrustCommand::Keypair(a) => distrust_keypair::run(global, a).await,
        },
        Command::Trust(a) => match a.what {
            TrustCommand::Keypair(a) => trust_keypair::run(global, a).await,
        },
        Command::Upgrade(a) => match a.what {
            UpgradeCommand::Cluster(a) => upgrade_cluster::run(global, a).await,
        },
        Command::Validate(a) => match a.what {
            ValidateCommand::Cluster(a) => validate_cluster::run(global, a).await,
        },
        Command::RollingUpdate(a) => match a.what {
            RollingUpdateCommand::Cluster(a) => rolling_update_cluster::run(global, *a).await,
        },
        Command::Toolbox(a) => match a.what {
            ToolboxCommand::Template(a) => toolbox_template::run(global, a),
            ToolboxCommand::Dump(a) => toolbox_dump::run(global, a).await,
            ToolboxCommand::Addons(a) => match a.what {
                ToolboxAddonsCommand::Apply(a) => toolbox_addons_apply::run(a).await,
                ToolboxAddonsCommand::List(a) => toolbox_addons_list::run(a).await,
            },
            ToolboxCommand::Enroll(a) => toolbox_enroll::run(global, a).await,
            ToolboxCommand::InstanceSelector(a) => toolbox_instance_selector::run(global, *a).await,
            ToolboxCommand::Clusterapi(a) => match a.what {
                ToolboxClusterapiCommand::Generate(g) => match g.what {
                    ToolboxClusterapiGenerateCommand::Machinedeployment(a) => {
                        toolbox_clusterapi_generate_machinedeployment::run(global, a).await
                    }
                },
            },
        },
        Command::Reconcile(a) => match a.what {
            ReconcileCommand::Cluster(a) => reconcile_cluster::run(global, *a).await,
        },
        Command::Helpers(a) => match a.what {
            HelpersCommand::KubectlAuth(a) => helpers_kubectl_auth::run(global, a).await,
        },
    }
}
