//! `google_compute_disk`, `_instance_template` and
//! `_instance_group_manager`.

use kops_render::hcl::{Body, Expr};
use kops_render::terraform::{Target, Terraform};
use kops_render::RenderError;

use super::{references, resource, string_list, string_map, GceResource};
use crate::tasks::{Disk, InstanceGroupManager, InstanceTemplate, TemplateServiceAccount};

impl GceResource for Disk {
    fn target(&self) -> Target {
        resource("google_compute_disk", &self.name)
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("labels", string_map(&self.labels))
            .set("name", self.name.as_str())
            .set_opt("provisioned_iops", self.iops)
            .set_opt("provisioned_throughput", self.throughput)
            .set("size", self.size_gb)
            .set("type", self.volume_type.as_str())
            .set("zone", self.zone.as_str());
        tf.resource("google_compute_disk", &self.name, b);
        Ok(())
    }
}

impl GceResource for InstanceTemplate {
    fn target(&self) -> Target {
        resource("google_compute_instance_template", &self.name)
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("can_ip_forward", self.can_ip_forward);
        let mut disk = Body::new();
        disk.set("auto_delete", true)
            .set("boot", true)
            .set("device_name", "persistent-disks-0")
            .set("disk_name", "")
            .set("disk_size_gb", self.boot_disk_size_gb)
            .set("disk_type", self.boot_disk_type.as_str())
            .set("interface", "")
            .set("mode", "READ_WRITE")
            .set("provisioned_iops", self.boot_disk_iops.unwrap_or(0))
            .set(
                "provisioned_throughput",
                self.boot_disk_throughput.unwrap_or(0),
            )
            .set("source", "")
            .set("source_image", self.boot_disk_image.as_str())
            .set("type", "PERSISTENT");
        b.block("disk", disk);
        for (kind, count) in &self.guest_accelerators {
            let mut g = Body::new();
            g.set("count", *count).set("type", kind.as_str());
            b.block("guest_accelerator", g);
        }
        b.set("labels", string_map(&self.labels));
        let mut lifecycle = Body::new();
        lifecycle.set("create_before_destroy", true);
        b.block("lifecycle", lifecycle);
        b.set("machine_type", self.machine_type.as_str());
        let mut metadata = Vec::new();
        for (key, value) in &self.metadata {
            // Multi-line values (the user data) go to `data/`.
            let expr = if value.contains('\n') {
                tf.file(
                    "google_compute_instance_template",
                    &self.name,
                    &format!("metadata_{key}"),
                    value.clone().into_bytes(),
                    false,
                )
            } else {
                Expr::str(value)
            };
            metadata.push((key.clone(), expr));
        }
        b.set("metadata", Expr::Map(metadata));
        b.set("name_prefix", self.name_prefix.as_str());
        let mut nic = Body::new();
        if self.has_external_ip {
            nic.block("access_config", Body::new());
        }
        for (range, cidr) in &self.alias_ip_ranges {
            let mut alias = Body::new();
            alias
                .set("ip_cidr_range", cidr.as_str())
                .set("subnetwork_range_name", range.as_str());
            nic.block("alias_ip_range", alias);
        }
        nic.set("network", tf.reference(&self.network, "name")?)
            .set("stack_type", self.stack_type.as_str())
            .set("subnetwork", tf.reference(&self.subnet, "name")?);
        b.block("network_interface", nic);
        let mut scheduling = Body::new();
        scheduling
            .set("automatic_restart", self.automatic_restart)
            .set("on_host_maintenance", self.on_host_maintenance.as_str())
            .set("preemptible", self.preemptible)
            .set("provisioning_model", self.provisioning_model.as_str());
        b.block("scheduling", scheduling);
        let email = match &self.service_account {
            TemplateServiceAccount::Email(email) => Expr::str(email),
            TemplateServiceAccount::Task(key) => tf.reference(key, "email")?,
        };
        let mut account = Body::new();
        account
            .set("email", email)
            .set("scopes", string_list(&self.scopes));
        b.block("service_account", account);
        b.set("tags", string_list(&self.tags));
        tf.resource("google_compute_instance_template", &self.name, b);
        Ok(())
    }
}

impl GceResource for InstanceGroupManager {
    fn target(&self) -> Target {
        resource("google_compute_instance_group_manager", &self.name)
    }

    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("base_instance_name", self.base_instance_name.as_str());
        let mut lifecycle = Body::new();
        lifecycle.set("ignore_changes", Expr::List(vec![Expr::raw("target_size")]));
        b.block("lifecycle", lifecycle);
        b.set(
            "list_managed_instances_results",
            self.list_managed_instances_results.as_str(),
        )
        .set("name", self.name.as_str());
        if !self.target_pools.is_empty() {
            b.set(
                "target_pools",
                references(tf, &self.target_pools, "self_link")?,
            );
        }
        b.set("target_size", self.target_size);
        let mut policy = Body::new();
        policy
            .set("minimal_action", self.minimal_action.as_str())
            .set("type", self.update_type.as_str());
        b.block("update_policy", policy);
        let mut version = Body::new();
        version.set(
            "instance_template",
            tf.reference(&self.instance_template, "self_link")?,
        );
        b.block("version", version);
        b.set("zone", self.zone.as_str());
        tf.resource("google_compute_instance_group_manager", &self.name, b);
        Ok(())
    }
}
