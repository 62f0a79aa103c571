//! `google_compute_network`, `_subnetwork`, `_router`, `_router_nat` and
//! `_firewall`.

use kops_render::hcl::{Body, Expr};
use kops_render::terraform::{Target, Terraform};
use kops_render::RenderError;

use super::{resource, string_list, GceResource};
use crate::tasks::{FirewallRule, Network, Router, Subnet};

impl GceResource for Network {
    fn target(&self) -> Target {
        if self.shared {
            Target::Literal(self.name.clone())
        } else {
            resource("google_compute_network", &self.name)
        }
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        if self.shared {
            return Ok(());
        }
        let mut b = Body::new();
        b.set("auto_create_subnetworks", false)
            .set("name", self.name.as_str());
        tf.resource("google_compute_network", &self.name, b);
        Ok(())
    }
}

impl GceResource for Subnet {
    fn target(&self) -> Target {
        if self.shared {
            Target::Literal(self.name.clone())
        } else {
            resource("google_compute_subnetwork", &self.name)
        }
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        if self.shared {
            return Ok(());
        }
        let mut b = Body::new();
        b.set_opt("ip_cidr_range", self.cidr.as_deref())
            .set("name", self.name.as_str())
            .set("network", tf.reference(&self.network, "name")?)
            .set("region", self.region.as_str())
            .set("stack_type", self.stack_type.as_str())
            .set_opt("ipv6_access_type", self.ipv6_access_type.as_deref());
        for (name, range) in &self.secondary_ranges {
            let mut r = Body::new();
            r.set("ip_cidr_range", range.as_str())
                .set("range_name", name.as_str());
            b.block("secondary_ip_range", r);
        }
        tf.resource("google_compute_subnetwork", &self.name, b);
        Ok(())
    }
}

impl GceResource for Router {
    fn target(&self) -> Target {
        resource("google_compute_router", &self.name)
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        let mut router = Body::new();
        router
            .set("name", self.name.as_str())
            .set("network", tf.reference(&self.network, "name")?);
        tf.resource("google_compute_router", &self.name, router);

        let mut nat = Body::new();
        nat.set("name", self.name.as_str())
            .set(
                "nat_ip_allocate_option",
                self.nat_ip_allocate_option.as_str(),
            )
            .set("region", self.region.as_str())
            .set(
                "router",
                Expr::raw(format!(
                    "google_compute_router.{}.name",
                    kops_render::terraform::sanitize(&self.name)
                )),
            )
            .set(
                "source_subnetwork_ip_ranges_to_nat",
                self.source_subnetwork_ip_ranges_to_nat.as_str(),
            );
        for subnet in &self.subnetworks {
            let mut s = Body::new();
            s.set("name", tf.reference(subnet, "name")?).set(
                "source_ip_ranges_to_nat",
                Expr::List(vec![Expr::str("ALL_IP_RANGES")]),
            );
            nat.block("subnetwork", s);
        }
        tf.resource("google_compute_router_nat", &self.name, nat);
        Ok(())
    }
}

impl GceResource for FirewallRule {
    fn target(&self) -> Target {
        resource("google_compute_firewall", &self.name)
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        let mut b = Body::new();
        for allowed in &self.allowed {
            let mut a = Body::new();
            match allowed.split_once(':') {
                Some((protocol, ports)) => {
                    a.set("ports", string_list(&[ports.to_string()]))
                        .set("protocol", protocol);
                }
                None => {
                    a.set("protocol", allowed.as_str());
                }
            }
            b.block("allow", a);
        }
        b.set("disabled", self.disabled)
            .set("name", self.name.as_str())
            .set("network", tf.reference(&self.network, "name")?);
        if !self.source_ranges.is_empty() {
            b.set("source_ranges", string_list(&self.source_ranges));
        }
        if !self.source_tags.is_empty() {
            b.set("source_tags", string_list(&self.source_tags));
        }
        if !self.target_tags.is_empty() {
            b.set("target_tags", string_list(&self.target_tags));
        }
        tf.resource("google_compute_firewall", &self.name, b);
        Ok(())
    }
}
