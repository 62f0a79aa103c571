//! An IAM role for a Kubernetes service account (IRSA): pods of that
//! service account exchange their projected token for the role's
//! credentials (`sts:AssumeRoleWithWebIdentity`).
//!
//! It is an [`IamRole`] whose trust policy names the cluster's OIDC
//! provider by ARN, which holds the account id and is known only once the
//! provider exists: the trust policy is completed from the provider task's
//! output, then finding, comparing and applying are the plain role's. The
//! condition limits the role to one service account
//! (`<issuer>:sub = system:serviceaccount:<namespace>:<name>`; a namespace
//! with `*` matches with `StringLike`).

use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};
use serde_json::json;

use crate::context::{AwsContext, Tags};
use crate::tasks::iam_oidc_provider::{IamOidcProvider, IamOidcProviderOutput};
use crate::tasks::iam_role::{IamRole, IamRoleActual, IamRoleOutput};
use crate::tasks::policy_document::PolicyDocument;

/// What the role should be.
#[derive(Debug, Clone, PartialEq)]
pub struct IamServiceAccountRole {
    /// The task name and the role's name (`<sa>.<namespace>.sa.<cluster>`).
    pub name: String,
    pub namespace: String,
    pub service_account: String,
    /// The issuer URL the tokens carry (`https://...`).
    pub issuer: String,
    /// The OIDC provider the trust policy names.
    pub provider: OutputRef<IamOidcProviderOutput>,
    pub permissions_boundary: Option<String>,
    pub tags: Tags,
}

/// Stands for the provider's ARN in a dry run where it does not exist yet.
pub const UNKNOWN_PROVIDER_ARN: &str = "<the OIDC provider's ARN>";

impl IamServiceAccountRole {
    pub const KIND: &'static str = "IAMServiceAccountRole";

    /// The handle dependants (its policies) keep to read the role.
    pub fn output_ref(name: &str) -> OutputRef<IamRoleOutput> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }

    /// The trust policy, with the provider's ARN.
    pub fn trust_policy(&self, provider_arn: &str) -> PolicyDocument {
        let issuer = IamOidcProvider::issuer_host_path(&self.issuer);
        let operator = if self.namespace.contains('*') {
            "StringLike"
        } else {
            "StringEquals"
        };
        let subject = format!(
            "system:serviceaccount:{}:{}",
            self.namespace, self.service_account
        );
        PolicyDocument::new(json!({
            "Statement": [{
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {operator: {format!("{issuer}:sub"): subject}},
                "Effect": "Allow",
                "Principal": {"Federated": provider_arn},
            }],
            "Version": "2012-10-17",
        }))
    }

    /// The plain role this one is, once the provider's ARN is known.
    fn role(&self, provider_arn: &str) -> IamRole {
        IamRole {
            name: self.name.clone(),
            assume_role_policy: self.trust_policy(provider_arn),
            permissions_boundary: self.permissions_boundary.clone(),
            tags: self.tags.clone(),
        }
    }

    fn provider_arn(&self, deps: &Outputs) -> Result<Option<String>, TaskError> {
        Ok(deps.try_get(&self.provider)?.map(|p| p.arn.clone()))
    }
}

impl Task<AwsContext> for IamServiceAccountRole {
    type Actual = IamRoleActual;
    type Output = IamRoleOutput;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.provider.key().clone()]
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
    ) -> Result<Option<IamRoleActual>, TaskError> {
        let arn = self.provider_arn(deps)?;
        let role = self.role(arn.as_deref().unwrap_or(UNKNOWN_PROVIDER_ARN));
        role.find(ctx, deps).await
    }

    fn diff(&self, actual: Option<&IamRoleActual>, deps: &Outputs) -> Result<Changes, TaskError> {
        let arn = self.provider_arn(deps)?;
        let role = self.role(arn.as_deref().unwrap_or(UNKNOWN_PROVIDER_ARN));
        role.diff(actual, deps)
    }

    fn output(&self, actual: &IamRoleActual) -> IamRoleOutput {
        IamRoleOutput {
            name: actual.name.clone(),
            arn: actual.arn.clone(),
            created: false,
        }
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&IamRoleActual>,
        changes: &Changes,
    ) -> Result<IamRoleOutput, TaskError> {
        let arn = deps.get(&self.provider)?.arn.clone();
        self.role(&arn).apply(ctx, deps, actual, changes).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(namespace: &str) -> IamServiceAccountRole {
        IamServiceAccountRole {
            name: "dns-controller.kube-system.sa.a.example.com".into(),
            namespace: namespace.into(),
            service_account: "dns-controller".into(),
            issuer: "https://discovery.example.com/a.example.com".into(),
            provider: IamOidcProvider::output_ref("a.example.com"),
            permissions_boundary: None,
            tags: Tags::new(),
        }
    }

    #[test]
    fn trust_is_limited_to_the_service_account() {
        let doc = role("kube-system").trust_policy("arn:aws:iam::1:oidc-provider/x");
        let expected = PolicyDocument::parse(
            r#"{"Statement":[{"Action":"sts:AssumeRoleWithWebIdentity",
            "Condition":{"StringEquals":{"discovery.example.com/a.example.com:sub":"system:serviceaccount:kube-system:dns-controller"}},
            "Effect":"Allow","Principal":{"Federated":"arn:aws:iam::1:oidc-provider/x"}}],"Version":"2012-10-17"}"#,
        )
        .unwrap();
        assert_eq!(doc, expected);
        let wild = role("team-*").trust_policy("arn");
        assert!(wild.value().to_string().contains("StringLike"));
    }

    #[test]
    fn the_provider_is_a_dependency() {
        let r = role("kube-system");
        assert_eq!(r.dependencies(), vec![r.provider.key().clone()]);
        // Reading it without it being one is a task bug, not a panic.
        assert!(r.diff(None, &Outputs::empty(r.key())).is_err());
    }
}
