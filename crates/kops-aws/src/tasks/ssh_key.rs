//! The cluster's EC2 key pair: the admin's SSH public key imported as
//! `kubernetes.<cluster>-<fingerprint>` (the name changes with the key, so a
//! found key never needs its material compared), or an existing key named by
//! `spec.sshKeyName`, used as it is.

use aws_sdk_ec2::primitives::Blob;
use aws_sdk_ec2::types::{Filter, ResourceType};
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, ec2_tags, tag_map, tag_spec, AwsContext, Tags};
use crate::tasks::{managed_tags, tags_to_write};

/// The key pair's name, what launch templates read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshKeyName(pub String);

impl FieldValue for SshKeyName {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// What the key pair should be.
#[derive(Debug, Clone, PartialEq)]
pub struct SshKey {
    /// The task name and the key pair's name.
    pub name: String,
    /// The OpenSSH public key to import (`ssh-rsa AAAA... comment`); `None`
    /// for a shared key.
    pub public_key: Option<String>,
    pub tags: Tags,
    /// An existing key (`spec.sshKeyName`): found by name, never changed.
    pub shared: bool,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct SshKeyActual {
    pub id: Option<String>,
    pub name: String,
    pub fingerprint: Option<String>,
    pub tags: Tags,
}

impl SshKey {
    pub const KIND: &'static str = "SSHKey";

    /// The handle launch templates keep to read the key's name.
    pub fn name_ref(name: &str) -> OutputRef<SshKeyName> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

fn actual_of(key: &aws_sdk_ec2::types::KeyPairInfo) -> SshKeyActual {
    SshKeyActual {
        id: key.key_pair_id().map(str::to_string),
        name: key.key_name().unwrap_or_default().to_string(),
        fingerprint: key.key_fingerprint().map(str::to_string),
        tags: tag_map(key.tags()),
    }
}

/// Looks a key pair up by name, whatever its tags (one call).
async fn describe_by_name(ctx: &AwsContext, name: &str) -> Result<Option<SshKeyActual>, TaskError> {
    let result = ctx
        .ec2()
        .describe_key_pairs()
        .filters(Filter::builder().name("key-name").values(name).build())
        .send()
        .await;
    match result {
        Ok(out) => Ok(out.key_pairs().first().map(actual_of)),
        Err(e) if e.code() == Some("InvalidKeyPair.NotFound") => Ok(None),
        Err(e) => Err(classify("DescribeKeyPairs", name, e)),
    }
}

impl Task<AwsContext> for SshKey {
    type Actual = SshKeyActual;
    type Output = SshKeyName;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    async fn find(&self, ctx: &AwsContext, _: &Outputs) -> Result<Option<SshKeyActual>, TaskError> {
        if self.shared {
            return describe_by_name(ctx, &self.name).await;
        }
        Ok(ctx
            .key_pairs()
            .await?
            .iter()
            .find(|k| k.key_name() == Some(self.name.as_str()))
            .map(actual_of))
    }

    fn diff(&self, actual: Option<&SshKeyActual>, _: &Outputs) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        if self.shared {
            if actual.is_none() {
                changes.compare("name", None, self.name.as_str());
            }
            return Ok(changes);
        }
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        changes.compare("name", actual.map(|a| a.name.as_str()), self.name.as_str());
        if actual.is_none() {
            if let Some(key) = &self.public_key {
                changes.compare_with("publicKey", None, key.as_str(), summarize_key);
            }
        }
        changes.compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn check_changes(&self, actual: Option<&SshKeyActual>, _: &Changes) -> Result<(), TaskError> {
        match (actual, self.shared, &self.public_key) {
            (None, true, _) => Err(TaskError::fatal(format!(
                "the EC2 key pair `{}` (spec.sshKeyName) does not exist\nhint: import the key in this region, or remove spec.sshKeyName and add a key with `kops create sshpublickey`",
                self.name
            ))),
            (None, false, None) => Err(TaskError::fatal(format!(
                "the EC2 key pair `{}` has no public key to import",
                self.name
            ))),
            _ => Ok(()),
        }
    }

    fn output(&self, actual: &SshKeyActual) -> SshKeyName {
        SshKeyName(actual.name.clone())
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
        actual: Option<&SshKeyActual>,
        _: &Changes,
    ) -> Result<SshKeyName, TaskError> {
        if self.shared {
            return Ok(SshKeyName(self.name.clone()));
        }
        let existing = match actual {
            Some(a) => a.clone(),
            None => {
                let material = self.public_key.as_deref().unwrap_or_default();
                let imported = ctx
                    .ec2()
                    .import_key_pair()
                    .key_name(&self.name)
                    .public_key_material(Blob::new(material.trim().as_bytes()))
                    .tag_specifications(tag_spec(ResourceType::KeyPair, &self.tags))
                    .send()
                    .await;
                match imported {
                    Ok(_) => return Ok(SshKeyName(self.name.clone())),
                    // Imported before without kops' tags (an older kops, by
                    // hand): it is the same key (the name carries the
                    // fingerprint); tag it below.
                    Err(e) if e.code() == Some("InvalidKeyPair.Duplicate") => {
                        describe_by_name(ctx, &self.name).await?.ok_or_else(|| {
                            TaskError::retryable(format!(
                                "ImportKeyPair on `{}`: the key pair exists but is not visible yet",
                                self.name
                            ))
                        })?
                    }
                    Err(e) => return Err(classify("ImportKeyPair", &self.name, e)),
                }
            }
        };
        let missing = tags_to_write(&existing.tags, &self.tags);
        if let (false, Some(id)) = (missing.is_empty(), &existing.id) {
            ctx.ec2()
                .create_tags()
                .resources(id)
                .set_tags(Some(ec2_tags(&missing)))
                .send()
                .await
                .map_err(|e| classify("CreateTags", &self.name, e))?;
        }
        Ok(SshKeyName(self.name.clone()))
    }
}

/// The key's type and comment, not the whole key, for the plan.
fn summarize_key(key: &str) -> String {
    let mut fields = key.split_whitespace();
    let kind = fields.next().unwrap_or("?");
    let comment = fields.nth(1).unwrap_or("");
    format!("<{kind} key {comment}>").replace(" >", ">")
}
