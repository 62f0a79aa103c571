//! Renderers for IAM roles for service accounts: the OIDC provider, the
//! service-account roles and managed-policy attachments.
//!
//! A service-account role trusts the OIDC provider by ARN, which holds the
//! account id, unknown offline. Terraform therefore reads the trust policy
//! with `templatefile` and passes the provider's ARN (the provider resource,
//! or a data source looking the user's provider up by URL); CloudFormation
//! uses `Fn::GetAtt` on the provider, or `Fn::Sub` with `AWS::AccountId`
//! for the user's.

use std::any::Any;

use crate::tasks::iam_oidc_provider::IamOidcProvider;
use crate::tasks::iam_role_policy_attachment::IamRolePolicyAttachment;
use crate::tasks::iam_service_account_role::IamServiceAccountRole;
use kops_engine::TaskKey;

use crate::render::cloudformation::{CloudFormation, Json};
use crate::render::resource::{downcast_resource, tags_expr, AwsResource, Ctx};
use kops_render::hcl::{Body, Expr};
use kops_render::terraform::{sanitize, Terraform};
use kops_render::RenderError;

pub(crate) fn resource_of(task: &dyn Any) -> Option<&dyn AwsResource> {
    downcast_resource!(
        task,
        IamOidcProvider,
        IamRolePolicyAttachment,
        IamServiceAccountRole
    )
}

/// The variable the trust policy template names the provider's ARN by.
const PROVIDER_ARN_VARIABLE: &str = "oidc_provider_arn";

/// kops' attachment resource name: the task name and the FNV-1a (32-bit)
/// hash of the policy ARN, in decimal.
pub fn attachment_name(task: &str, arn: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in arn.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{task}-{hash}")
}

fn provider<'g>(ctx: &Ctx<'g>, key: &TaskKey) -> Option<&'g IamOidcProvider> {
    ctx.graph
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, t)| t.as_any().downcast_ref::<IamOidcProvider>())
}

impl AwsResource for IamOidcProvider {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_iam_openid_connect_provider")
    }
    fn tf_data_type(&self) -> Option<&'static str> {
        (!self.managed).then_some("aws_iam_openid_connect_provider")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let arn = if self.managed {
            let mut b = Body::new();
            b.set(
                "client_id_list",
                Expr::List(self.client_ids.iter().map(Expr::str).collect()),
            )
            .set("tags", tags_expr(&self.tags))
            .set(
                "thumbprint_list",
                Expr::List(self.thumbprints.iter().map(Expr::str).collect()),
            )
            .set("url", &self.url);
            tf.resource("aws_iam_openid_connect_provider", &self.name, b);
            format!(
                "aws_iam_openid_connect_provider.{}.arn",
                sanitize(&self.name)
            )
        } else {
            let mut b = Body::new();
            b.set("url", &self.url);
            format!(
                "{}.arn",
                tf.data_source("aws_iam_openid_connect_provider", &self.name, b)
            )
        };
        tf.output("iam_openid_connect_provider_arn", Expr::raw(arn));
        tf.output(
            "iam_openid_connect_provider_issuer",
            Expr::str(IamOidcProvider::issuer_host_path(&self.url)),
        );
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        if !self.managed {
            return Ok(()); // the user's: referred to by ARN
        }
        cf.resource(
            "AWS::IAM::OIDCProvider",
            &self.name,
            Json::obj([
                ("Url", Json::str(&self.url)),
                ("ClientIdList", Json::strs(&self.client_ids)),
                ("ThumbprintList", Json::strs(&self.thumbprints)),
                ("Tags", Json::tags(&self.tags)),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for IamServiceAccountRole {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_iam_role")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let placeholder = format!("${{{PROVIDER_ARN_VARIABLE}}}");
        let text = self.trust_policy(&placeholder).to_json() + "\n";
        // Registers the data file; the attribute reads it as a template.
        let _ = tf.file(
            "aws_iam_role",
            &self.name,
            "policy",
            text.into_bytes(),
            false,
        );
        let arn = tf.reference(self.provider.key(), "arn")?;
        let arn = match arn {
            Expr::Str(s) => kops_render::hcl::quote(&s),
            Expr::Raw(r) => r,
            other => format!("{other:?}"),
        };
        let policy = Expr::raw(format!(
            "templatefile(\"${{path.module}}/data/aws_iam_role_{}_policy\", {{ {PROVIDER_ARN_VARIABLE} = {arn} }})",
            self.name
        ));
        let mut b = Body::new();
        b.set("assume_role_policy", policy)
            .set("name", &self.name)
            .set_opt("permissions_boundary", self.permissions_boundary.as_ref())
            .set("tags", tags_expr(&self.tags));
        tf.resource("aws_iam_role", &self.name, b);
        let export = format!("{}-{}", self.namespace, self.service_account)
            .replace('*', "wildcard")
            .to_lowercase();
        let key = TaskKey::new(IamServiceAccountRole::KIND, &self.name);
        tf.output(&format!("{export}_role_arn"), tf.reference(&key, "arn")?);
        tf.output(&format!("{export}_role_name"), tf.reference(&key, "name")?);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, ctx: &Ctx<'_>) -> Result<(), RenderError> {
        let managed = provider(ctx, self.provider.key()).is_none_or(|p| p.managed);
        let arn = if managed {
            cf.attribute(self.provider.key(), "Arn")?
        } else {
            Json::obj([(
                "Fn::Sub",
                Json::str(format!(
                    "arn:${{AWS::Partition}}:iam::${{AWS::AccountId}}:oidc-provider/{}",
                    IamOidcProvider::issuer_host_path(&self.issuer)
                )),
            )])
        };
        // The document with the ARN's place taken by the intrinsic function.
        const MARK: &str = "__provider_arn__";
        let document = Json::from_value(self.trust_policy(MARK).value());
        let document = replace_string(document, MARK, &arn);
        let mut props = vec![
            ("RoleName", Json::str(&self.name)),
            ("AssumeRolePolicyDocument", document),
            ("Tags", Json::tags(&self.tags)),
        ];
        if let Some(boundary) = &self.permissions_boundary {
            props.push(("PermissionsBoundary", Json::str(boundary)));
        }
        cf.resource("AWS::IAM::Role", &self.name, Json::obj(props));
        Ok(())
    }
}

/// `json` with every string equal to `mark` replaced by `with`.
fn replace_string(json: Json, mark: &str, with: &Json) -> Json {
    match json {
        Json::Str(s) if s == mark => with.clone(),
        Json::Array(items) => Json::Array(
            items
                .into_iter()
                .map(|i| replace_string(i, mark, with))
                .collect(),
        ),
        Json::Object(entries) => Json::Object(
            entries
                .into_iter()
                .map(|(k, v)| (k, replace_string(v, mark, with)))
                .collect(),
        ),
        other => other,
    }
}

impl AwsResource for IamRolePolicyAttachment {
    /// One resource per policy (or none), named after the task and the
    /// policy: nothing else refers to them.
    fn tf_type(&self) -> Option<&'static str> {
        None
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        for arn in &self.policy_arns {
            let mut b = Body::new();
            b.set("policy_arn", arn)
                .set("role", tf.reference(self.role.key(), "name")?);
            tf.resource(
                "aws_iam_role_policy_attachment",
                &attachment_name(&self.name, arn),
                b,
            );
        }
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        for arn in &self.policy_arns {
            cf.add_to_list(self.role.key(), "ManagedPolicyArns", Json::str(arn))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_names_are_kops() {
        assert_eq!(
            attachment_name(
                "master-policyoverride",
                "arn:aws-test:iam::123456789000:policy/test-policy"
            ),
            "master-policyoverride-1544513530"
        );
        assert_eq!(
            sanitize(&attachment_name(
                "external-myserviceaccount.default.sa.123.example.com",
                "arn:aws-test:iam::123456789012:policy/UsersManageOwnCredentials"
            )),
            "external-myserviceaccount-default-sa-123-example-com-3197825879"
        );
    }
}
