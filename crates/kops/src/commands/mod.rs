//! One file per kops command (as kops' `cmd/kops/` and cargo's
//! `src/bin/cargo/commands/`): each holds the command's flags and its run
//! function, which turns them into a kops-ops call and prints the result.
//! Each run function returns the process exit code; `cli.rs` dispatches
//! to them.

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
