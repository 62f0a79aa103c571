//! The task kinds that are not one Compute resource at a fixed path:
//! instance templates (generated names, replaced rather than changed),
//! service accounts (IAM), the project's IAM binding (Resource Manager)
//! and the state bucket's IAM members (Cloud Storage).

use hyper::Method;
use kops_engine::{Changes, FieldChange, OutputRef, Outputs, Task, TaskError, TaskKey};
use serde_json::{json, Value};

use super::api::{self, Found};
use super::{GceContext, InstanceTemplate, ProjectIamBinding, ServiceAccount, StorageBucketIam};
use crate::cloud::{encode, ApiError, GceCloud};

fn fail(e: ApiError) -> TaskError {
    e.into_task_error()
}

/// A template's generated name: kops' prefix and the time, at most 63
/// characters.
fn template_name(prefix: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut name = format!("{prefix}{now}");
    name.truncate(63);
    name
}

impl Task<GceContext> for InstanceTemplate {
    type Actual = Found;
    type Output = String;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, self.name.clone())
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        InstanceTemplate::dependencies(self)
    }

    /// The newest template with kops' name prefix; its properties decide
    /// whether a new one is needed.
    async fn find(&self, ctx: &GceContext, deps: &Outputs) -> Result<Option<Found>, TaskError> {
        let cloud = ctx.cloud()?;
        let want = self.properties(cloud, deps)?;
        let templates = cloud.instance_templates().await.map_err(fail)?;
        let mut candidates: Vec<&Value> = templates
            .iter()
            .filter(|t| {
                t["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(&self.name_prefix))
            })
            .collect();
        candidates.sort_by_key(|t| t["creationTimestamp"].as_str().unwrap_or("").to_string());
        let wanted = json!({"properties": want});
        let matching = candidates.iter().rev().find(|t| {
            api::diff(Some(&Found {
                resource: (**t).clone(),
                want: wanted.clone(),
            }))
            .is_empty()
        });
        Ok(matching.or(candidates.last()).map(|t| Found {
            resource: (*t).clone(),
            want: wanted,
        }))
    }

    fn diff(&self, actual: Option<&Found>, _deps: &Outputs) -> Result<Changes, TaskError> {
        Ok(api::diff(actual))
    }

    fn output(&self, actual: &Found) -> String {
        actual.resource["name"].as_str().unwrap_or("").to_string()
    }

    async fn apply(
        &self,
        ctx: &GceContext,
        deps: &Outputs,
        _actual: Option<&Found>,
        _changes: &Changes,
    ) -> Result<String, TaskError> {
        let cloud = ctx.cloud()?;
        let name = template_name(&self.name_prefix);
        let body = json!({"name": name, "properties": self.properties(cloud, deps)?});
        cloud
            .mutate(
                Method::POST,
                &cloud.compute_url("global/instanceTemplates"),
                Some(&body),
            )
            .await
            .map_err(fail)?;
        cloud.forget_instance_templates();
        Ok(name)
    }
}

impl Task<GceContext> for ServiceAccount {
    type Actual = Found;
    type Output = String;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, self.name.clone())
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        ServiceAccount::dependencies(self)
    }

    async fn find(&self, ctx: &GceContext, _deps: &Outputs) -> Result<Option<Found>, TaskError> {
        let cloud = ctx.cloud()?;
        if self.shared {
            // Given in the spec (`default` included): used as it is, as
            // kops does, without a look-up.
            return Ok(Some(Found {
                resource: json!({}),
                want: json!({}),
            }));
        }
        let url = format!(
            "{}v1/projects/{}/serviceAccounts/{}",
            cloud.endpoints.iam, self.project, self.email
        );
        let found = cloud.get(&url).await.map_err(fail)?;
        let want = json!({
            "displayName": self.display_name.clone().unwrap_or_default(),
            "description": self.description.clone().unwrap_or_default(),
        });
        Ok(found.map(|resource| Found { resource, want }))
    }

    fn diff(&self, actual: Option<&Found>, _deps: &Outputs) -> Result<Changes, TaskError> {
        Ok(api::diff(actual))
    }

    fn output(&self, _actual: &Found) -> String {
        self.email.clone()
    }

    async fn apply(
        &self,
        ctx: &GceContext,
        _deps: &Outputs,
        actual: Option<&Found>,
        changes: &Changes,
    ) -> Result<String, TaskError> {
        let cloud = ctx.cloud()?;
        if self.shared {
            return Ok(self.email.clone());
        }
        let details = json!({
            "displayName": self.display_name.clone().unwrap_or_default(),
            "description": self.description.clone().unwrap_or_default(),
        });
        let base = format!(
            "{}v1/projects/{}/serviceAccounts",
            cloud.endpoints.iam, self.project
        );
        if actual.is_none() {
            let body = json!({"accountId": self.account_id, "serviceAccount": details});
            match cloud.call(Method::POST, &base, Some(&body)).await {
                Ok(_) => {}
                Err(e) if e.status == 409 => {}
                Err(e) => return Err(fail(e)),
            }
        } else if !changes.is_empty() {
            let body = json!({"serviceAccount": details, "updateMask": "displayName,description"});
            cloud
                .call(
                    Method::PATCH,
                    &format!("{base}/{}", self.email),
                    Some(&body),
                )
                .await
                .map_err(fail)?;
        }
        Ok(self.email.clone())
    }
}

/// Whether `policy` binds `member` to `role`.
fn binds(policy: &Value, role: &str, member: &str) -> bool {
    policy["bindings"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|b| {
            b["role"] == role
                && b["members"]
                    .as_array()
                    .is_some_and(|m| m.iter().any(|x| x == member))
        })
}

/// `policy` with `member` added to `role`.
fn with_member(mut policy: Value, role: &str, member: &str) -> Value {
    let bindings = policy["bindings"].as_array_mut();
    let bindings = match bindings {
        Some(b) => b,
        None => {
            policy["bindings"] = json!([]);
            policy["bindings"].as_array_mut().unwrap()
        }
    };
    match bindings.iter_mut().find(|b| b["role"] == role) {
        Some(binding) => {
            if let Some(members) = binding["members"].as_array_mut() {
                members.push(member.into());
            } else {
                binding["members"] = json!([member]);
            }
        }
        None => bindings.push(json!({"role": role, "members": [member]})),
    }
    policy
}

/// The member of a binding: the service account's email from its task.
fn member(deps: &Outputs, key: &TaskKey) -> Result<Option<String>, TaskError> {
    Ok(deps
        .try_get(&OutputRef::<String>::new(key.clone()))?
        .map(|email| format!("serviceAccount:{email}")))
}

/// What a binding task finds: the policy, and whether it binds `member`
/// (once known) to `role`.
fn binding_found(policy: Value, role: &str, member: Option<String>) -> Found {
    let bound = member.as_deref().is_some_and(|m| binds(&policy, role, m));
    Found {
        resource: policy,
        want: json!({"bound": bound, "member": member}),
    }
}

/// The binding as a change (`Found.want` carries whether it is there).
fn binding_diff(actual: Option<&Found>, role: &str) -> Changes {
    let mut changes = Changes::new();
    if let Some(found) = actual {
        if found.want["bound"] != true {
            changes.push(FieldChange {
                field: "members",
                path: None,
                from: None,
                to: format!(
                    "{role}: {}",
                    found.want["member"].as_str().unwrap_or("<pending>")
                ),
            });
        }
    }
    changes
}

impl Task<GceContext> for ProjectIamBinding {
    type Actual = Found;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, self.name.clone())
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        ProjectIamBinding::dependencies(self)
    }

    async fn find(&self, ctx: &GceContext, deps: &Outputs) -> Result<Option<Found>, TaskError> {
        let cloud = ctx.cloud()?;
        let policy = project_policy(cloud, &self.project).await?;
        Ok(Some(binding_found(
            policy,
            &self.role,
            member(deps, &self.member)?,
        )))
    }

    fn diff(&self, actual: Option<&Found>, _deps: &Outputs) -> Result<Changes, TaskError> {
        Ok(binding_diff(actual, &self.role))
    }

    fn output(&self, _actual: &Found) {}

    async fn apply(
        &self,
        ctx: &GceContext,
        deps: &Outputs,
        _actual: Option<&Found>,
        _changes: &Changes,
    ) -> Result<(), TaskError> {
        let cloud = ctx.cloud()?;
        let member = member(deps, &self.member)?
            .ok_or_else(|| TaskError::retryable("the service account is not known yet"))?;
        // Read, modify, write with the policy's etag: a concurrent change
        // makes the write fail (409), and the retry reads again.
        let policy = project_policy(cloud, &self.project).await?;
        if binds(&policy, &self.role, &member) {
            return Ok(());
        }
        let url = format!(
            "{}v1/projects/{}:setIamPolicy",
            cloud.endpoints.resource_manager, self.project
        );
        let body = json!({"policy": with_member(policy, &self.role, &member)});
        cloud
            .call(Method::POST, &url, Some(&body))
            .await
            .map_err(|e| {
                // 409: a concurrent change (read again); a new service
                // account IAM does not know yet: retried (with the
                // engine's backoff) until it does.
                if e.status == 409 || e.is_iam_propagation() {
                    TaskError::retryable(e)
                } else {
                    fail(e)
                }
            })?;
        Ok(())
    }
}

async fn project_policy(cloud: &GceCloud, project: &str) -> Result<Value, TaskError> {
    let url = format!(
        "{}v1/projects/{project}:getIamPolicy",
        cloud.endpoints.resource_manager
    );
    cloud
        .call(Method::POST, &url, Some(&json!({})))
        .await
        .map_err(fail)
}

/// The Cloud Storage JSON API's bucket IAM policy URL
/// (`STORAGE_EMULATOR_HOST` honoured as for the state store).
fn bucket_policy_url(bucket: &str) -> String {
    let endpoint = kops_state::gcs::Endpoint::from_lookup(&kops_api::env::process_env);
    format!("{}/storage/v1/b/{}/iam", endpoint.url, encode(bucket))
}

impl Task<GceContext> for StorageBucketIam {
    type Actual = Found;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, self.name.clone())
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        StorageBucketIam::dependencies(self)
    }

    async fn find(&self, ctx: &GceContext, deps: &Outputs) -> Result<Option<Found>, TaskError> {
        let cloud = ctx.cloud()?;
        let policy = cloud
            .call(Method::GET, &bucket_policy_url(&self.bucket), None)
            .await
            .map_err(fail)?;
        Ok(Some(binding_found(
            policy,
            &self.role,
            member(deps, &self.member)?,
        )))
    }

    fn diff(&self, actual: Option<&Found>, _deps: &Outputs) -> Result<Changes, TaskError> {
        Ok(binding_diff(actual, &self.role))
    }

    fn output(&self, _actual: &Found) {}

    async fn apply(
        &self,
        ctx: &GceContext,
        deps: &Outputs,
        _actual: Option<&Found>,
        _changes: &Changes,
    ) -> Result<(), TaskError> {
        let cloud = ctx.cloud()?;
        let member = member(deps, &self.member)?
            .ok_or_else(|| TaskError::retryable("the service account is not known yet"))?;
        let url = bucket_policy_url(&self.bucket);
        let policy = cloud.call(Method::GET, &url, None).await.map_err(fail)?;
        if binds(&policy, &self.role, &member) {
            return Ok(());
        }
        let body = with_member(policy, &self.role, &member);
        cloud
            .call(Method::PUT, &url, Some(&body))
            .await
            .map_err(|e| {
                if e.is_iam_propagation() {
                    TaskError::retryable(e)
                } else {
                    fail(e)
                }
            })?;
        Ok(())
    }
}
