//! `google_service_account`, `google_project_iam_binding` and
//! `google_storage_bucket_iam_member`.

use kops_render::hcl::{Body, Expr};
use kops_render::terraform::{Target, Terraform};
use kops_render::RenderError;

use super::{resource, GceResource};
use crate::tasks::{ProjectIamBinding, ServiceAccount, StorageBucketIam};

impl GceResource for ServiceAccount {
    fn target(&self) -> Target {
        if self.shared {
            Target::Literal(self.email.clone())
        } else {
            resource("google_service_account", &self.name)
        }
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        if self.shared {
            return Ok(());
        }
        let mut b = Body::new();
        b.set("account_id", self.account_id.as_str())
            .set_opt("description", self.description.as_deref())
            .set_opt("display_name", self.display_name.as_deref())
            .set("project", self.project.as_str());
        tf.resource("google_service_account", &self.name, b);
        Ok(())
    }
}

/// `serviceAccount:<email>` of a service account.
fn member(tf: &Terraform, key: &kops_engine::TaskKey) -> Result<Expr, RenderError> {
    Ok(match tf.reference(key, "email")? {
        Expr::Str(email) => Expr::str(format!("serviceAccount:{email}")),
        Expr::Raw(reference) => Expr::raw(format!("format(\"serviceAccount:%s\", {reference})")),
        other => other,
    })
}

impl GceResource for ProjectIamBinding {
    fn target(&self) -> Target {
        resource("google_project_iam_binding", &self.name)
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("members", Expr::List(vec![member(tf, &self.member)?]))
            .set("project", self.project.as_str())
            .set("role", self.role.as_str());
        tf.resource("google_project_iam_binding", &self.name, b);
        Ok(())
    }
}

impl GceResource for StorageBucketIam {
    fn target(&self) -> Target {
        resource("google_storage_bucket_iam_member", &self.name)
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("bucket", self.bucket.as_str())
            .set("member", member(tf, &self.member)?)
            .set("role", self.role.as_str());
        tf.resource("google_storage_bucket_iam_member", &self.name, b);
        Ok(())
    }
}
