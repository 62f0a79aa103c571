//! The cloud-neutral half of `update cluster --target terraform`: the HCL
//! writer ([`hcl`]), the Terraform file set with its providers, locals and
//! `data/` files ([`terraform`]), the render's outcome and errors, and the
//! state-store files as Terraform objects ([`state_file_objects`]: they
//! follow the store, `aws_s3_object` for `s3://`/`memfs://`,
//! `google_storage_bucket_object` for `gs://`, not the cloud).
//!
//! Each cloud renders its own task types on top: `kops_aws::render`
//! (Terraform and CloudFormation), `kops_gce::terraform`. The renderer walks
//! the *same* graph the direct apply runs, so both describe the same
//! resources by construction.
//!
//! Depends on kops-engine (task keys) and kops-model (the state-store
//! files); no IO, no printing.

pub mod hcl;
mod outcome;
pub mod terraform;

pub use outcome::{Outcome, RenderError, Rendered};

use kops_model::files::StateFile;

use crate::hcl::{Body, Expr};
use crate::terraform::Terraform;

/// Where Terraform puts a state-store file: bucket and key, for an S3
/// config base. kops' tests use `memfs://`, which it renders into the
/// bucket `testingBucket`; we do the same so its golden files compare.
pub fn s3_location(config_base: &str, path: &str) -> Option<(String, String)> {
    let (bucket, prefix) = if let Some(rest) = config_base.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        (bucket.to_string(), prefix.trim_matches('/').to_string())
    } else if let Some(rest) = config_base.strip_prefix("memfs://") {
        (
            "testingBucket".to_string(),
            rest.trim_matches('/').to_string(),
        )
    } else {
        return None;
    };
    let key = if prefix.is_empty() {
        path.to_string()
    } else {
        format!("{prefix}/{path}")
    };
    Some((bucket, key))
}

/// Where Terraform puts a state-store file in Cloud Storage: bucket and
/// object name, for a `gs://` config base.
pub fn gs_location(config_base: &str, path: &str) -> Option<(String, String)> {
    let rest = config_base.strip_prefix("gs://")?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let prefix = prefix.trim_matches('/');
    let name = if prefix.is_empty() {
        path.to_string()
    } else {
        format!("{prefix}/{path}")
    };
    Some((bucket.to_string(), name))
}

/// True when Terraform, not `update cluster`, writes the state files of
/// `config_base` (as objects in S3 or Cloud Storage).
pub fn terraform_writes_files(config_base: &str) -> bool {
    s3_location(config_base, "x").is_some() || gs_location(config_base, "x").is_some()
}

/// The state-store files as `aws_s3_object` resources (with the
/// `aws.files` provider), for a config base in S3 (or kops' test store),
/// or `google_storage_bucket_object` for one in Cloud Storage; files
/// elsewhere are left out (the caller writes them). Shared by every
/// cloud: the state-file objects follow the store, not the cloud.
pub fn state_file_objects(tf: &mut Terraform, config_base: &str, files: &[StateFile]) {
    for file in files {
        let base = file.base.as_deref().unwrap_or(config_base);
        if let Some((bucket, name)) = gs_location(base, &file.path) {
            // kops: the content as a `source` path, through `google.files`;
            // no object ACL (kops sets one only for GCE clusters on buckets
            // without uniform access, which it asks the cloud about).
            tf.use_google_files_provider();
            let source = tf.file_path(
                "google_storage_bucket_object",
                &file.name,
                "content",
                file.contents.clone(),
            );
            let mut b = Body::new();
            b.set("bucket", bucket)
                .set("name", name)
                .set("provider", Expr::raw("google.files"))
                .set("source", source);
            tf.resource("google_storage_bucket_object", &file.name, b);
            continue;
        }
        let Some((bucket, key)) = s3_location(base, &file.path) else {
            continue;
        };
        tf.use_files_provider();
        let content = tf.file(
            "aws_s3_object",
            &file.name,
            "content",
            file.contents.clone(),
            false,
        );
        let mut b = Body::new();
        b.set("bucket", bucket)
            .set("content", content)
            .set("key", key)
            .set("provider", Expr::raw("aws.files"))
            .set("server_side_encryption", "AES256");
        if let Some(acl) = &file.acl {
            b.set("acl", acl);
        }
        tf.resource("aws_s3_object", &file.name, b);
    }
}
