//! kops-model's tests against moto_server, as one test executable (each
//! links the AWS SDK; one per file cost gigabytes of disk and minutes of
//! linking in CI). Run one area with e.g.
//! `scripts/test -p kops-model -E 'test(/^irsa::/)'`.

mod common;

mod api_load_balancer;
mod bootstrap_channel;
mod compute;
mod conformance_apply;
mod irsa;
mod kops_interop;
mod network;
mod override_apply;
mod security;
mod user_data;
