//! `google_compute_address`, `_forwarding_rule`, `_http_health_check`,
//! `_region_health_check`, `_region_backend_service` and `_target_pool`.

use kops_render::hcl::{Body, Expr};
use kops_render::terraform::{Target, Terraform};
use kops_render::RenderError;

use super::{references, resource, string_list, string_map, GceResource};
use crate::tasks::{
    Address, BackendService, ForwardingRule, ForwardingTarget, HealthCheck, HttpHealthCheck,
    TargetPool,
};

impl GceResource for Address {
    fn target(&self) -> Target {
        resource("google_compute_address", &self.name)
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set_opt("address_type", self.address_type.as_deref())
            .set("name", self.name.as_str())
            .set_opt("purpose", self.purpose.as_deref());
        if let Some(subnet) = &self.subnetwork {
            b.set("subnetwork", tf.reference(subnet, "name")?);
        }
        tf.resource("google_compute_address", &self.name, b);
        Ok(())
    }
}

impl GceResource for ForwardingRule {
    fn target(&self) -> Target {
        resource("google_compute_forwarding_rule", &self.name)
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("ip_address", tf.reference(&self.address, "address")?)
            .set("ip_protocol", self.ip_protocol.as_str())
            .set("labels", string_map(&self.labels))
            .set("load_balancing_scheme", self.load_balancing_scheme.as_str())
            .set("name", self.name.as_str());
        match &self.target {
            ForwardingTarget::TargetPool { pool, port_range } => {
                b.set("port_range", port_range.as_str())
                    .set("target", tf.reference(pool, "self_link")?);
            }
            ForwardingTarget::BackendService {
                service,
                ports,
                network,
                subnetwork,
            } => {
                b.set("backend_service", tf.reference(service, "id")?)
                    .set("network", tf.reference(network, "name")?)
                    .set("ports", string_list(ports))
                    .set("subnetwork", tf.reference(subnetwork, "name")?);
            }
        }
        tf.resource("google_compute_forwarding_rule", &self.name, b);
        Ok(())
    }
}

impl GceResource for HttpHealthCheck {
    fn target(&self) -> Target {
        resource("google_compute_http_health_check", &self.name)
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("name", self.name.as_str())
            .set("port", self.port)
            .set("request_path", self.request_path.as_str());
        tf.resource("google_compute_http_health_check", &self.name, b);
        Ok(())
    }
}

impl GceResource for HealthCheck {
    fn target(&self) -> Target {
        resource("google_compute_region_health_check", &self.name)
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("name", self.name.as_str());
        let mut check = Body::new();
        check.set("port", self.port);
        let block = match self.protocol.as_str() {
            "SSL" => "ssl_health_check",
            "HTTP" => "http_health_check",
            "HTTPS" => "https_health_check",
            _ => "tcp_health_check",
        };
        b.block(block, check);
        tf.resource("google_compute_region_health_check", &self.name, b);
        Ok(())
    }
}

impl GceResource for BackendService {
    fn target(&self) -> Target {
        resource("google_compute_region_backend_service", &self.name)
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        let mut b = Body::new();
        for group in &self.instance_group_managers {
            let mut backend = Body::new();
            backend
                .set("balancing_mode", "CONNECTION")
                .set("group", tf.reference(group, "instance_group")?);
            b.block("backend", backend);
        }
        b.set("health_checks", references(tf, &self.health_checks, "id")?)
            .set("load_balancing_scheme", self.load_balancing_scheme.as_str())
            .set("name", self.name.as_str())
            .set("protocol", self.protocol.as_str());
        tf.resource("google_compute_region_backend_service", &self.name, b);
        Ok(())
    }
}

impl GceResource for TargetPool {
    fn target(&self) -> Target {
        resource("google_compute_target_pool", &self.name)
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set(
            "health_checks",
            Expr::List(vec![tf.reference(&self.health_check, "self_link")?]),
        )
        .set("name", self.name.as_str());
        tf.resource("google_compute_target_pool", &self.name, b);
        Ok(())
    }
}
