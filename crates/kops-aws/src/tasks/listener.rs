//! A listener of a Network Load Balancer (`api.<cluster>-443`): a port and
//! protocol forwarding to one target group.
//!
//! Found with one `DescribeListeners` of its load balancer (none while the
//! load balancer would still be created), matched by port.

use aws_sdk_elasticloadbalancingv2::types::{Action, ActionTypeEnum, ProtocolEnum};
use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext};
use crate::tasks::network_load_balancer::LoadBalancerOutput;
use crate::tasks::target_group::TargetGroupArn;

/// What the listener should be.
#[derive(Debug, Clone, PartialEq)]
pub struct Listener {
    /// The task name, `<load balancer>-<port>`.
    pub name: String,
    pub load_balancer: OutputRef<LoadBalancerOutput>,
    pub port: i32,
    /// `TCP`, or `TLS` with a certificate.
    pub protocol: String,
    pub target_group: OutputRef<TargetGroupArn>,
    /// The ACM certificate of a `TLS` listener.
    pub certificate_arn: Option<String>,
    /// The TLS security policy (`ELBSecurityPolicy-...`); AWS' default when unset.
    pub ssl_policy: Option<String>,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct ListenerActual {
    pub arn: String,
    pub protocol: String,
    pub target_group: String,
    pub certificate_arn: Option<String>,
    pub ssl_policy: Option<String>,
}

impl Listener {
    pub const KIND: &'static str = "Listener";

    fn action(&self, target_group: &str) -> Action {
        Action::builder()
            .r#type(ActionTypeEnum::Forward)
            .target_group_arn(target_group)
            .build()
    }
}

impl Task<AwsContext> for Listener {
    type Actual = ListenerActual;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![
            self.load_balancer.key().clone(),
            self.target_group.key().clone(),
        ]
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
    ) -> Result<Option<ListenerActual>, TaskError> {
        let Some(lb) = deps.try_get(&self.load_balancer)? else {
            return Ok(None);
        };
        // The load balancer's listeners, read once per run for all its
        // listener tasks; a port not among them is read again, so a
        // listener created after that read is found, not created twice.
        let mut listeners = ctx.listeners(&lb.arn, false).await?;
        if !listeners.iter().any(|l| l.port() == Some(self.port)) {
            listeners = ctx.listeners(&lb.arn, true).await?;
        }
        Ok(listeners
            .iter()
            .find(|l| l.port() == Some(self.port))
            .map(|l| ListenerActual {
                arn: l.listener_arn().unwrap_or_default().to_string(),
                protocol: l
                    .protocol()
                    .map(|p| p.as_str().to_string())
                    .unwrap_or_default(),
                target_group: l
                    .default_actions()
                    .iter()
                    .find_map(|a| a.target_group_arn())
                    .unwrap_or_default()
                    .to_string(),
                certificate_arn: l
                    .certificates()
                    .first()
                    .and_then(|c| c.certificate_arn())
                    .map(str::to_string),
                ssl_policy: l.ssl_policy().map(str::to_string),
            }))
    }

    fn diff(&self, actual: Option<&ListenerActual>, deps: &Outputs) -> Result<Changes, TaskError> {
        let target = deps.try_get(&self.target_group)?.map(|t| t.0.as_str());
        let mut changes = Changes::new();
        changes
            .compare("port", actual.map(|_| &self.port), &self.port)
            .compare(
                "protocol",
                actual.map(|a| a.protocol.as_str()),
                self.protocol.as_str(),
            )
            .compare_reference(
                "targetGroup",
                actual.map(|a| a.target_group.as_str()),
                target,
                self.target_group.key(),
            );
        if self.certificate_arn.is_some() || actual.is_some_and(|a| a.certificate_arn.is_some()) {
            changes.compare(
                "certificate",
                actual.map(|a| &a.certificate_arn),
                &self.certificate_arn,
            );
        }
        if self.ssl_policy.is_some() {
            changes.compare("sslPolicy", actual.map(|a| &a.ssl_policy), &self.ssl_policy);
        }
        Ok(changes)
    }

    fn output(&self, _: &ListenerActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&ListenerActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let target = deps.get(&self.target_group)?;
        let protocol = ProtocolEnum::from(self.protocol.as_str());
        let certificates = self.certificate_arn.as_ref().map(|arn| {
            vec![
                aws_sdk_elasticloadbalancingv2::types::Certificate::builder()
                    .certificate_arn(arn)
                    .build(),
            ]
        });
        match actual {
            None => {
                let lb = deps.get(&self.load_balancer)?;
                ctx.elbv2()
                    .create_listener()
                    .load_balancer_arn(&lb.arn)
                    .port(self.port)
                    .protocol(protocol)
                    .default_actions(self.action(&target.0))
                    .set_certificates(certificates)
                    .set_ssl_policy(self.ssl_policy.clone())
                    .send()
                    .await
                    .map_err(|e| classify("CreateListener", &self.name, e))?;
            }
            Some(actual) => {
                ctx.elbv2()
                    .modify_listener()
                    .listener_arn(&actual.arn)
                    .port(self.port)
                    .protocol(protocol)
                    .default_actions(self.action(&target.0))
                    .set_certificates(certificates)
                    .set_ssl_policy(self.ssl_policy.clone())
                    .send()
                    .await
                    .map_err(|e| classify("ModifyListener", &self.name, e))?;
            }
        }
        Ok(())
    }
}
