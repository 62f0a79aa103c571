//! The cluster's IAM OpenID Connect provider: it lets IAM trust the
//! service-account tokens the cluster's API server signs, so pods can
//! assume the IAM roles of their service accounts (IRSA).
//!
//! A provider is identified by its issuer URL; its ARN ends with the URL
//! without `https://` (`arn:aws:iam::<account>:oidc-provider/<host>/<path>`),
//! so `find` is one `ListOpenIDConnectProviders` (names only, one page: an
//! account holds at most 100 providers) and one `GetOpenIDConnectProvider`
//! for the provider whose ARN matches, never one call per provider.
//!
//! Two modes: a *managed* provider (`enableAWSOIDCProvider: true`) is
//! created and kept as specified (audiences, thumbprints, tags); an
//! *existing* one is only looked up, for the service-account roles' trust
//! policies, and a missing one is an error that says how to fix it.

use aws_sdk_iam::types::Tag;
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext, Tags};
use crate::tasks::iam_role::{iam_tag_map, iam_tags, is_no_such_entity};
use crate::tasks::{managed_tags, tags_to_write};

/// What dependants (service-account roles) read: the provider's ARN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IamOidcProviderOutput {
    pub arn: String,
}

impl FieldValue for IamOidcProviderOutput {
    fn render(&self) -> String {
        self.arn.clone()
    }
}

/// What the provider should be.
#[derive(Debug, Clone, PartialEq)]
pub struct IamOidcProvider {
    /// The task name (kops: the cluster's name).
    pub name: String,
    /// The issuer URL (`https://...`), as the API server signs it.
    pub url: String,
    /// The audiences (`amazonaws.com` and any additional ones).
    pub client_ids: Vec<String>,
    /// SHA-1 fingerprints of the issuer's TLS root certificates.
    pub thumbprints: Vec<String>,
    pub tags: Tags,
    /// `false`: the provider is the user's; only looked up, never changed.
    pub managed: bool,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct IamOidcProviderActual {
    pub arn: String,
    pub client_ids: Vec<String>,
    pub thumbprints: Vec<String>,
    pub tags: Tags,
}

impl IamOidcProvider {
    pub const KIND: &'static str = "IAMOIDCProvider";

    /// The handle dependants keep to read the provider.
    pub fn output_ref(name: &str) -> OutputRef<IamOidcProviderOutput> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }

    /// The URL without its scheme: what IAM keeps and ARNs end with.
    pub fn issuer_host_path(url: &str) -> &str {
        url.split_once("://").map_or(url, |(_, rest)| rest)
    }
}

fn sorted(items: &[String]) -> Vec<String> {
    let mut out = items.to_vec();
    out.sort();
    out.dedup();
    out
}

/// The ARN of the account's OIDC provider for `url`, if there is one.
pub async fn find_provider_arn(ctx: &AwsContext, url: &str) -> Result<Option<String>, TaskError> {
    let issuer = IamOidcProvider::issuer_host_path(url).trim_end_matches('/');
    let list = ctx
        .iam()
        .list_open_id_connect_providers()
        .send()
        .await
        .map_err(|e| classify("ListOpenIDConnectProviders", url, e))?;
    let suffix = format!(":oidc-provider/{issuer}");
    Ok(list
        .open_id_connect_provider_list()
        .iter()
        .filter_map(|p| p.arn())
        .find(|arn| arn.ends_with(&suffix))
        .map(str::to_string))
}

impl Task<AwsContext> for IamOidcProvider {
    type Actual = IamOidcProviderActual;
    type Output = IamOidcProviderOutput;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<IamOidcProviderActual>, TaskError> {
        let Some(arn) = find_provider_arn(ctx, &self.url).await? else {
            return Ok(None);
        };
        if !self.managed {
            // Only its ARN matters; the rest is the user's.
            return Ok(Some(IamOidcProviderActual {
                arn,
                client_ids: self.client_ids.clone(),
                thumbprints: self.thumbprints.clone(),
                tags: self.tags.clone(),
            }));
        }
        let out = match ctx
            .iam()
            .get_open_id_connect_provider()
            .open_id_connect_provider_arn(&arn)
            .send()
            .await
        {
            Ok(out) => out,
            // Deleted between the list and the get.
            Err(e) if is_no_such_entity(&e) => return Ok(None),
            Err(e) => return Err(classify("GetOpenIDConnectProvider", &arn, e)),
        };
        Ok(Some(IamOidcProviderActual {
            arn,
            client_ids: out.client_id_list().to_vec(),
            thumbprints: out.thumbprint_list().to_vec(),
            tags: iam_tag_map(out.tags()),
        }))
    }

    fn diff(
        &self,
        actual: Option<&IamOidcProviderActual>,
        _: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        if !self.managed {
            // Exists or not: nothing of it is ours to change.
            if actual.is_none() {
                changes.compare("url", None, &self.url);
            }
            return Ok(changes);
        }
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        let client_ids = actual.map(|a| sorted(&a.client_ids));
        let thumbprints = actual.map(|a| sorted(&a.thumbprints));
        changes
            .compare("url", actual.map(|_| &self.url), &self.url)
            .compare("clientIDs", client_ids.as_ref(), &sorted(&self.client_ids))
            .compare(
                "thumbprints",
                thumbprints.as_ref(),
                &sorted(&self.thumbprints),
            )
            .compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&IamOidcProviderActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        if self.managed && self.thumbprints.is_empty() {
            return Err(TaskError::fatal(format!(
                "the IAM OIDC provider for `{}` needs at least one thumbprint",
                self.url
            )));
        }
        if actual.is_none() && !self.managed {
            return Err(TaskError::fatal(format!(
                "no IAM OIDC provider exists for the service-account issuer `{}`\nhint: set `spec.serviceAccountIssuerDiscovery.enableAWSOIDCProvider: true` so kops-rs creates it, or create it yourself",
                self.url
            )));
        }
        Ok(())
    }

    fn output(&self, actual: &IamOidcProviderActual) -> IamOidcProviderOutput {
        IamOidcProviderOutput {
            arn: actual.arn.clone(),
        }
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
        actual: Option<&IamOidcProviderActual>,
        changes: &Changes,
    ) -> Result<IamOidcProviderOutput, TaskError> {
        let iam = ctx.iam();
        let Some(actual) = actual else {
            let out = iam
                .create_open_id_connect_provider()
                .url(&self.url)
                .set_client_id_list(Some(self.client_ids.clone()))
                .set_thumbprint_list(Some(self.thumbprints.clone()))
                .set_tags(Some(iam_tags(&self.tags)))
                .send()
                .await
                .map_err(|e| classify("CreateOpenIDConnectProvider", &self.url, e))?;
            let arn = out
                .open_id_connect_provider_arn()
                .map(str::to_string)
                .ok_or_else(|| {
                    TaskError::fatal(format!(
                        "CreateOpenIDConnectProvider on `{}` returned no ARN",
                        self.url
                    ))
                })?;
            return Ok(IamOidcProviderOutput { arn });
        };
        if !self.managed {
            return Ok(self.output(actual));
        }
        let arn = &actual.arn;
        if changes.has("thumbprints") {
            iam.update_open_id_connect_provider_thumbprint()
                .open_id_connect_provider_arn(arn)
                .set_thumbprint_list(Some(self.thumbprints.clone()))
                .send()
                .await
                .map_err(|e| classify("UpdateOpenIDConnectProviderThumbprint", arn, e))?;
        }
        if changes.has("clientIDs") {
            let wanted = sorted(&self.client_ids);
            let have = sorted(&actual.client_ids);
            for extra in have.iter().filter(|c| !wanted.contains(c)) {
                iam.remove_client_id_from_open_id_connect_provider()
                    .open_id_connect_provider_arn(arn)
                    .client_id(extra)
                    .send()
                    .await
                    .map_err(|e| classify("RemoveClientIDFromOpenIDConnectProvider", arn, e))?;
            }
            for missing in wanted.iter().filter(|c| !have.contains(c)) {
                iam.add_client_id_to_open_id_connect_provider()
                    .open_id_connect_provider_arn(arn)
                    .client_id(missing)
                    .send()
                    .await
                    .map_err(|e| classify("AddClientIDToOpenIDConnectProvider", arn, e))?;
            }
        }
        let missing = tags_to_write(&actual.tags, &self.tags);
        if !missing.is_empty() {
            let tags: Vec<Tag> = iam_tags(&missing);
            iam.tag_open_id_connect_provider()
                .open_id_connect_provider_arn(arn)
                .set_tags(Some(tags))
                .send()
                .await
                .map_err(|e| classify("TagOpenIDConnectProvider", arn, e))?;
        }
        Ok(self.output(actual))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(managed: bool) -> IamOidcProvider {
        IamOidcProvider {
            name: "a.example.com".into(),
            url: "https://bucket.s3.us-east-1.amazonaws.com/a.example.com".into(),
            client_ids: vec!["amazonaws.com".into()],
            thumbprints: vec!["b".into(), "a".into()],
            tags: [("KubernetesCluster".to_string(), "a.example.com".to_string())].into(),
            managed,
        }
    }

    fn outputs() -> Outputs {
        Outputs::empty(TaskKey::new(IamOidcProvider::KIND, "a.example.com"))
    }

    #[test]
    fn issuer_is_the_url_without_its_scheme() {
        assert_eq!(
            IamOidcProvider::issuer_host_path("https://d.example.com/c"),
            "d.example.com/c"
        );
        assert_eq!(
            IamOidcProvider::issuer_host_path("d.example.com"),
            "d.example.com"
        );
    }

    #[test]
    fn order_of_thumbprints_and_foreign_tags_are_no_change() {
        let p = provider(true);
        let mut tags = p.tags.clone();
        tags.insert("other".into(), "x".into());
        let actual = IamOidcProviderActual {
            arn: "arn:aws:iam::1:oidc-provider/x".into(),
            client_ids: vec!["amazonaws.com".into()],
            thumbprints: vec!["a".into(), "b".into()],
            tags,
        };
        assert!(p.diff(Some(&actual), &outputs()).unwrap().is_empty());
        let mut more = p.clone();
        more.client_ids.push("sts.amazonaws.com".into());
        let changes = more.diff(Some(&actual), &outputs()).unwrap();
        assert!(changes.has("clientIDs") && changes.len() == 1);
    }

    #[test]
    fn an_existing_provider_must_exist_and_is_never_changed() {
        let p = provider(false);
        let changes = p.diff(None, &outputs()).unwrap();
        let err = p.check_changes(None, &changes).unwrap_err().to_string();
        assert!(err.contains("enableAWSOIDCProvider"), "{err}");
        let actual = IamOidcProviderActual {
            arn: "arn".into(),
            client_ids: vec![],
            thumbprints: vec![],
            tags: Tags::new(),
        };
        assert!(p.diff(Some(&actual), &outputs()).unwrap().is_empty());
    }
}
