//! Manifests of the bootstrap addons kops-rs writes itself. Each object
//! carries kops' addon labels (added to the object's own), so the channel's
//! pruning and `kubectl get -l k8s-addon=<addon>` find them, and keeps kops'
//! object names, which workloads and other addons refer to.
//!
//! Manifests are data: each addon has a folder with its YAML template
//! (`manifest.yaml`, filled in by [`template`] with minijinja), and, when
//! its content depends on the cluster, a module building the template's
//! context from the model. Addons whose content never changes (the default
//! CPU request `limit-range`, the API server's access to kubelets
//! `kubelet-api.rbac`, the storage classes `storage-aws`, gVisor's
//! RuntimeClass `gvisor`) are a template alone. An addon without a renderer is written to the state store as a
//! placeholder comment.

mod amazon_vpc;
mod authentication_aws;
mod calico;
mod certmanager;
mod cilium;
mod cloud_controller;
mod cluster_autoscaler;
mod coredns;
mod dns_controller;
mod ebs_csi;
mod external_dns;
mod flannel;
mod fold;
mod gcp_cloud_controller;
pub mod gcp_pd_csi_driver;
mod go_quotes;
mod karpenter;
mod kindnet;
mod kopeio;
pub mod kops_controller;
pub(crate) mod kube_dns;
mod kuberouter;
mod lb_controller;
mod metrics_server;
mod networking;
mod node_problem_detector;
mod node_termination_handler;
pub(crate) mod nodelocaldns;
mod nvidia;
mod pod_identity_webhook;
mod pods;
mod service_account_role;
mod snapshot_controller;
pub mod template;
mod vsphere;

use crate::Model;
use serde_json::{json, Value};
pub use template::TemplateError;
pub use vsphere::{CPI_SECRET as VSPHERE_CPI_SECRET, CSI_SECRET as VSPHERE_CSI_SECRET};

/// The manifest of the addon `key` for this cluster, when kops-rs renders
/// it. An error is a template that does not render: a kops-rs bug, which
/// the addon's tests catch.
pub fn manifest(model: &Model<'_>, key: &str) -> Result<Option<String>, TemplateError> {
    let objects = match key {
        "limit-range.addons.k8s.io" => fixed(key, include_str!("limit_range/manifest.yaml"))?,
        "kubelet-api.rbac.addons.k8s.io" => {
            fixed(key, include_str!("kubelet_api_rbac/manifest.yaml"))?
        }
        "storage-aws.addons.k8s.io" => fixed(key, include_str!("storage_aws/manifest.yaml"))?,
        "gvisor.addons.k8s.io" => fixed(key, include_str!("gvisor/manifest.yaml"))?,
        "storage-gce.addons.k8s.io" => Some(template::render(
            key,
            include_str!("storage_gce/manifest.yaml"),
            &json!({"default_class": !gcp_pd_csi_driver::enabled(model)}),
        )?),
        "gcp-cloud-controller.addons.k8s.io" => gcp_cloud_controller::objects(model)?,
        "gcp-pd-csi-driver.addons.k8s.io" => gcp_pd_csi_driver::objects(model)?,
        "coredns.addons.k8s.io" => coredns::objects(model),
        "kube-dns.addons.k8s.io" => kube_dns::objects(model)?,
        "dns-controller.addons.k8s.io" => dns_controller::objects(model),
        "aws-cloud-controller.addons.k8s.io" => cloud_controller::objects(model),
        "aws-ebs-csi-driver.addons.k8s.io" => ebs_csi::objects(model)?,
        "node-termination-handler.aws" => node_termination_handler::objects(model)?,
        "cluster-autoscaler.addons.k8s.io" => cluster_autoscaler::objects(model)?,
        "metrics-server.addons.k8s.io" => metrics_server::objects(model)?,
        "certmanager.io" => certmanager::objects(model)?,
        "networking.cilium.io" => cilium::objects(model),
        "networking.projectcalico.org" => calico::objects(model)?,
        "networking.amazon-vpc-routed-eni" => amazon_vpc::objects(model)?,
        "networking.kindnet" => kindnet::objects(model)?,
        "networking.kope.io" => kopeio::objects(model)?,
        "networking.flannel" => flannel::objects(model)?,
        "networking.kuberouter" => kuberouter::objects(model)?,
        "kops-controller.addons.k8s.io" => kops_controller::objects(model)?,
        "aws-load-balancer-controller.addons.k8s.io" => lb_controller::objects(model)?,
        "node-problem-detector.addons.k8s.io" => node_problem_detector::objects(model)?,
        "nodelocaldns.addons.k8s.io" => nodelocaldns::objects(model)?,
        "external-dns.addons.k8s.io" => external_dns::objects(model)?,
        "nvidia.addons.k8s.io" => nvidia::objects(model)?,
        "snapshot-controller.addons.k8s.io" => snapshot_controller::objects(model)?,
        "authentication.aws" => authentication_aws::objects(model)?,
        "eks-pod-identity-webhook.addons.k8s.io" => pod_identity_webhook::objects(model)?,
        "karpenter.sh" => karpenter::objects(model)?,
        "vsphere-cloud-controller.addons.k8s.io" => vsphere::cloud_controller(model)?,
        "vsphere-csi-driver.addons.k8s.io" => vsphere::csi_driver()?,
        _ => None,
    };
    let Some(objects) = objects else {
        return Ok(None);
    };
    let objects: Vec<Value> = objects
        .into_iter()
        .map(|mut object| {
            label(&mut object, key);
            remap_images(model, &mut object);
            object
        })
        .collect();
    let text = kops_api::manifest::to_yaml_stream(&objects);
    Ok(Some(fold::fold(&go_quotes::requote(&text))))
}

/// The objects of an addon whose template needs no context.
fn fixed(key: &str, source: &str) -> Result<Option<Vec<Value>>, TemplateError> {
    template::render(key, source, &json!({})).map(Some)
}

/// Points every container image at `spec.assets.containerProxy` (the
/// image's registry replaced) and then `containerRegistry` (a flat mirror:
/// `registry.k8s.io/a/b:v` becomes `<mirror>/a-b:v`), as kops does.
fn remap_images(model: &Model<'_>, value: &mut Value) {
    match value {
        Value::Object(map) => {
            let container = map.contains_key("name");
            for (key, item) in map.iter_mut() {
                match item {
                    Value::String(image) if container && key == "image" => {
                        *image = remap_image(model, image);
                    }
                    _ => remap_images(model, item),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| remap_images(model, i)),
        _ => {}
    }
}

pub(crate) fn remap_image(model: &Model<'_>, image: &str) -> String {
    let assets = model.cluster.spec.assets.as_ref();
    let mut image = image.to_string();
    if let Some(proxy) = assets.and_then(|a| a.container_proxy.as_deref()) {
        let proxy = proxy.trim_end_matches('/');
        let first = image.split('/').next().unwrap_or_default();
        image = if image.matches('/').count() <= 1 && !first.contains(['.', ':']) {
            format!("{proxy}/{image}")
        } else {
            format!("{proxy}{}", &image[first.len()..])
        };
    }
    if let Some(mirror) = assets.and_then(|a| a.container_registry.as_deref()) {
        let rest = image.strip_prefix("registry.k8s.io/").unwrap_or(&image);
        if !rest.starts_with(&format!("{mirror}/")) {
            image = format!("{mirror}/{}", rest.replace('/', "-"));
        } else {
            image = rest.to_string();
        }
    }
    image
}

/// Adds the labels kops puts on every object of an addon (its name, kops as
/// manager, its channel selector) to the object's own labels.
fn label(object: &mut Value, key: &str) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    // kops rewrites the metadata through its typed form, which drops
    // fields left empty (`annotations:` with nothing under it).
    metadata.retain(|_, v| !v.is_null());
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert("addon.kops.k8s.io/name".into(), key.into());
        labels.insert("app.kubernetes.io/managed-by".into(), "kops".into());
        if let Some((name, value)) = selector(key) {
            labels.insert(name.into(), value.into());
        }
    }
}

/// The selector the bootstrap channel lists for an addon: the label its
/// objects carry (see `selector`); `null` for cert-manager, as kops writes
/// an addon without one.
pub fn channel_selector(key: &str) -> Value {
    selector(key).map_or(Value::Null, |(name, value)| json!({ name: value }))
}

/// The label the channel selects an addon's objects by: `k8s-addon=<key>`,
/// except metrics-server (`k8s-app=metrics-server`), the networking and
/// authentication addons (by role) and cert-manager (none).
fn selector(key: &str) -> Option<(&str, &str)> {
    match key {
        "metrics-server.addons.k8s.io" => Some(("k8s-app", "metrics-server")),
        "certmanager.io" => None,
        "authentication.aws" => Some(("role.kubernetes.io/authentication", "1")),
        // Networking addons are selected by role, as kops does.
        k if k.starts_with("networking.") => Some(("role.kubernetes.io/networking", "1")),
        _ => Some(("k8s-addon", key)),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use kops_api::{Cluster, InstanceGroup};

    use super::*;
    use crate::security::tests::{load, model};

    /// A small cluster for the addons' unit tests.
    pub(crate) fn cluster() -> (Cluster, Vec<InstanceGroup>) {
        load(
            "apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata:
  name: addons.example.com
spec:
  cloudProvider: aws
  configBase: s3://state/addons.example.com
  kubernetesVersion: v1.32.0
  networkCIDR: 172.20.0.0/16
  networking:
    cni: {}
  subnets:
  - cidr: 172.20.32.0/19
    name: us-test-1a
    type: Public
    zone: us-test-1a
",
        )
    }

    /// Every case of kops' suite on AWS with a golden manifest of `key`:
    /// its name, cluster, groups and kops' manifest (none without ../shared).
    pub(crate) fn golden_cases(key: &str) -> Vec<(String, Cluster, Vec<InstanceGroup>, String)> {
        let Some(shared) = kops_testkit::shared_dir() else {
            eprintln!("skipping: ../shared is not there");
            return Vec::new();
        };
        let root = shared.join("conformance/kops/update_cluster");
        let mut cases: Vec<_> = std::fs::read_dir(&root).unwrap().flatten().collect();
        cases.sort_by_key(|e| e.file_name());
        let mut out = Vec::new();
        for entry in cases {
            let case = entry.file_name().to_string_lossy().to_string();
            let dir = entry.path();
            let Ok(yaml) = std::fs::read_to_string(dir.join("in-v1alpha2.yaml")) else {
                continue;
            };
            if !yaml.contains("cloudProvider: aws") && !yaml.contains("aws: {}") {
                continue;
            }
            let golden = std::fs::read_dir(dir.join("data"))
                .into_iter()
                .flatten()
                .flatten()
                .find(|f| {
                    let n = f.file_name().to_string_lossy().to_string();
                    (n.contains(&format!("-addons-{key}-"))
                        || n.ends_with(&format!("-addons-{key}_content")))
                        && n.ends_with("_content")
                });
            let Some(golden) = golden else { continue };
            let (cluster, groups) = load(&yaml);
            out.push((
                case,
                cluster,
                groups,
                std::fs::read_to_string(golden.path()).unwrap(),
            ));
        }
        out
    }

    /// Renders `key` for every golden case (after `prepare` adjusts the
    /// cluster to kops' manifest) and compares: the number identical and the
    /// number kops-rs leaves as a placeholder.
    pub(crate) fn compare_golden(
        key: &str,
        prepare: impl Fn(&mut Cluster, &str),
    ) -> (usize, usize) {
        compare(key, None, prepare)
    }

    /// [`compare_golden`] with the model in kops' test account, for addons
    /// that name the account. kops' test cloud sits in the partition
    /// `aws-test`, which its ARNs name.
    pub(crate) fn compare_golden_in_account(
        key: &str,
        prepare: impl Fn(&mut Cluster, &str),
    ) -> (usize, usize) {
        compare(key, Some("123456789012"), prepare)
    }

    fn compare(
        key: &str,
        account: Option<&str>,
        prepare: impl Fn(&mut Cluster, &str),
    ) -> (usize, usize) {
        let (mut identical, mut placeholders) = (0, 0);
        for (case, mut cluster, groups, theirs) in golden_cases(key) {
            if theirs.trim().is_empty() {
                continue;
            }
            prepare(&mut cluster, &theirs);
            let mut model = model(&cluster, &groups);
            model.account_id = account;
            match manifest(&model, key).expect("renders") {
                Some(ours) => {
                    let ours = match account {
                        Some(_) => ours.replace("arn:aws:", "arn:aws-test:"),
                        None => ours,
                    };
                    // kops' integration tests pretend to be kops 1.34.0-beta.1.
                    let ours = ours.replace(kops_api::KOPS_VERSION, "1.34.0-beta.1");
                    assert_same(&case, &ours, &theirs);
                    identical += 1;
                }
                None => placeholders += 1,
            }
        }
        eprintln!("{key}: {identical} identical, {placeholders} not rendered");
        (identical, placeholders)
    }

    /// `key` renders in every golden case, identical to kops' in `expected`
    /// of them (checked only when ../shared is there).
    pub(crate) fn assert_golden(key: &str, expected: usize) {
        let (identical, placeholders) = compare_golden(key, |_, _| {});
        assert_eq!(placeholders, 0, "{key}");
        if kops_testkit::shared_dir().is_some() {
            assert_eq!(identical, expected, "{key}");
        }
    }

    /// Fails on the first line where `ours` and kops' manifest differ.
    pub(crate) fn assert_same(case: &str, ours: &str, theirs: &str) {
        let mismatch = ours
            .trim()
            .lines()
            .zip(theirs.trim().lines())
            .enumerate()
            .find(|(_, (a, b))| a != b);
        if let Some((n, (a, b))) = mismatch {
            panic!("case {case}, line {}: ours {a:?}, kops {b:?}", n + 1);
        }
        assert_eq!(ours.trim(), theirs.trim(), "case {case}");
    }

    #[test]
    fn fixed_addons_are_identical_to_kops_in_every_case() {
        for key in [
            "limit-range.addons.k8s.io",
            "kubelet-api.rbac.addons.k8s.io",
            "storage-aws.addons.k8s.io",
        ] {
            let (identical, placeholders) = compare_golden(key, |_, _| {});
            assert_eq!(placeholders, 0, "{key}");
            if kops_testkit::shared_dir().is_some() {
                assert!(identical > 0, "{key}: no golden case");
            }
        }
    }

    #[test]
    fn objects_carry_the_addon_labels_and_parse_back() {
        let (cluster, groups) = cluster();
        let model = model(&cluster, &groups);
        for key in [
            "limit-range.addons.k8s.io",
            "kubelet-api.rbac.addons.k8s.io",
            "storage-aws.addons.k8s.io",
        ] {
            let text = manifest(&model, key).unwrap().unwrap();
            for document in text.split("\n---\n") {
                assert!(document.contains("\nkind: "), "{document}");
                assert!(
                    document.contains(&format!("    k8s-addon: {key}\n")),
                    "{document}"
                );
            }
        }
        let storage = manifest(&model, "storage-aws.addons.k8s.io")
            .unwrap()
            .unwrap();
        assert_eq!(storage.matches("kind: StorageClass").count(), 4);
        assert!(manifest(&model, "no-such-addon.addons.k8s.io")
            .unwrap()
            .is_none());
    }
}
