//! The `kops` binary's tests, as one test executable: each module is one
//! area (lifecycle on moto, bad input, PKI, rolling update, the Terraform
//! and CloudFormation targets, ...). One executable instead of one per file
//! because each links the AWS SDK: eleven of them cost gigabytes of disk and
//! minutes of linking in CI. Run one area with e.g.
//! `scripts/test -p kops -E 'test(/^lifecycle::/)'`.

mod common;
mod fake_kube;

mod addons_apply;
mod api_addresses;
mod apply_retries;
mod bad_input;
mod classic_api;
mod cloudformation_target;
mod command_flags;
mod create_gce;
mod edit;
mod enroll;
mod etcd_manifests;
mod existing_network;
mod gce_lifecycle;
mod gce_quotas;
mod gce_roll;
mod gce_update_options;
mod gcs_store;
mod get_assets;
mod gokops_gce;
mod gvisor_kops;
mod instance_group_options;
mod irsa_lifecycle;
mod kube_flags;
mod lifecycle;
mod more_commands;
mod node_bootstrap;
mod node_join;
mod nodeup_publish;
mod pki;
mod rate_limits;
mod render_account;
mod rolling_update;
mod roundtrip;
mod s3_endpoint;
mod seed001;
mod state_files;
mod switch_from_kops;
mod terraform_conformance;
mod toolbox_dump;
mod vsphere;
mod vsphere_network;
mod vsphere_roll;
mod vsphere_tls;
