//! The Classic ELB of an older cluster's API (`class: Classic`): Terraform
//! `aws_elb` in kops 1.36's shape, and CloudFormation
//! `AWS::ElasticLoadBalancing::LoadBalancer` in the shape kops gave it
//! while kops still wrote CloudFormation (with the TCP listener spelled
//! out and numbers as strings where the resource type wants them).

use crate::tasks::classic_load_balancer::{ClassicLoadBalancer, ClassicLoadBalancerRetirement};

use crate::render::cloudformation::{CloudFormation, Json};
use crate::render::resource::{id, tags_expr, AwsResource, Ctx};
use kops_render::hcl::{Body, Expr};
use kops_render::terraform::Terraform;
use kops_render::RenderError;

/// Terraform writes reference lists sorted, as kops does.
fn sorted(mut items: Vec<Expr>) -> Vec<Expr> {
    items.sort_by_key(|e| match e {
        Expr::Raw(s) | Expr::Str(s) => s.clone(),
        other => format!("{other:?}"),
    });
    items
}

impl AwsResource for ClassicLoadBalancer {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_elb")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut groups: Vec<Expr> = Vec::new();
        for g in &self.security_groups {
            groups.push(id(tf, g.key())?);
        }
        groups.extend(self.additional_security_groups.iter().map(Expr::from));
        let mut subnets = Vec::new();
        for s in &self.subnets {
            subnets.push(id(tf, s.key())?);
        }
        let attributes = &self.attributes;
        let mut b = Body::new();
        if let Some(log) = &attributes.access_log {
            let mut logs = Body::new();
            logs.set("bucket", log.bucket.as_str())
                .set_opt("bucket_prefix", log.prefix.as_deref())
                .set("enabled", true)
                .set_opt("interval", log.emit_interval);
            b.block("access_logs", logs);
        }
        if let Some(timeout) = attributes.connection_draining_timeout {
            b.set("connection_draining", true)
                .set("connection_draining_timeout", timeout);
        } else {
            b.set("connection_draining", false);
        }
        let h = &self.health_check;
        let mut health = Body::new();
        health
            .set("healthy_threshold", h.healthy_threshold)
            .set("interval", h.interval)
            .set("target", h.target.as_str())
            .set("timeout", h.timeout)
            .set("unhealthy_threshold", h.unhealthy_threshold);
        b.set("cross_zone_load_balancing", attributes.cross_zone)
            .block("health_check", health)
            .set("idle_timeout", attributes.idle_timeout);
        if self.scheme == "internal" {
            b.set("internal", true);
        }
        for (port, listener) in &self.listeners {
            let mut l = Body::new();
            l.set("instance_port", listener.instance_port)
                .set("instance_protocol", listener.protocol.as_str())
                .set("lb_port", *port)
                .set("lb_protocol", listener.protocol.as_str());
            b.block("listener", l);
        }
        b.set("name", &self.load_balancer_name)
            .set("security_groups", Expr::List(sorted(groups)))
            .set("subnets", Expr::List(sorted(subnets)))
            .set("tags", tags_expr(&self.tags));
        tf.resource("aws_elb", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut groups = Vec::new();
        for g in &self.security_groups {
            groups.push(cf.reference(g.key())?);
        }
        groups.extend(self.additional_security_groups.iter().map(Json::str));
        let mut subnets = Vec::new();
        for s in &self.subnets {
            subnets.push(cf.reference(s.key())?);
        }
        let listeners = self
            .listeners
            .iter()
            .map(|(port, l)| {
                Json::obj([
                    ("InstancePort", Json::str(l.instance_port.to_string())),
                    ("InstanceProtocol", Json::str(&l.protocol)),
                    ("LoadBalancerPort", Json::str(port.to_string())),
                    ("Protocol", Json::str(&l.protocol)),
                ])
            })
            .collect();
        let h = &self.health_check;
        let attributes = &self.attributes;
        let mut props = vec![
            ("LoadBalancerName", Json::str(&self.load_balancer_name)),
            ("Listeners", Json::Array(listeners)),
            ("SecurityGroups", Json::Array(groups)),
            ("Subnets", Json::Array(subnets)),
        ];
        if self.scheme == "internal" {
            props.push(("Scheme", Json::str("internal")));
        }
        props.push((
            "HealthCheck",
            Json::obj([
                ("Target", Json::str(&h.target)),
                (
                    "HealthyThreshold",
                    Json::str(h.healthy_threshold.to_string()),
                ),
                (
                    "UnhealthyThreshold",
                    Json::str(h.unhealthy_threshold.to_string()),
                ),
                ("Interval", Json::str(h.interval.to_string())),
                ("Timeout", Json::str(h.timeout.to_string())),
            ]),
        ));
        if let Some(log) = &attributes.access_log {
            let mut policy = vec![
                ("Enabled", Json::Bool(true)),
                ("S3BucketName", Json::str(&log.bucket)),
            ];
            if let Some(prefix) = &log.prefix {
                policy.push(("S3BucketPrefix", Json::str(prefix)));
            }
            if let Some(interval) = log.emit_interval {
                policy.push(("EmitInterval", Json::Int(interval.into())));
            }
            props.push(("AccessLoggingPolicy", Json::obj(policy)));
        }
        let mut draining = vec![(
            "Enabled",
            Json::Bool(attributes.connection_draining_timeout.is_some()),
        )];
        if let Some(timeout) = attributes.connection_draining_timeout {
            draining.push(("Timeout", Json::Int(timeout.into())));
        }
        props.push(("ConnectionDrainingPolicy", Json::obj(draining)));
        props.push((
            "ConnectionSettings",
            Json::obj([("IdleTimeout", Json::Int(attributes.idle_timeout.into()))]),
        ));
        props.push(("CrossZone", Json::Bool(attributes.cross_zone)));
        props.push(("Tags", Json::tags(&self.tags)));
        cf.resource(
            "AWS::ElasticLoadBalancing::LoadBalancer",
            &self.name,
            Json::obj(props),
        );
        Ok(())
    }
}

impl AwsResource for ClassicLoadBalancerRetirement {
    fn tf_type(&self) -> Option<&'static str> {
        None // deletes a leftover of the direct target: nothing to declare
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, _: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        Ok(())
    }
    fn cloudformation(&self, _: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        Ok(())
    }
}
