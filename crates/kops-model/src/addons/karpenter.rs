//! Karpenter (`karpenter.sh`): the controller that launches nodes for
//! pending pods, with its CRDs, RBAC, Service and PodDisruptionBudget (the
//! upstream chart as kops ships it, `karpenter/manifest.yaml`), followed by
//! an `EC2NodeClass` and a `NodePool` for each group Karpenter manages
//! (`spec.manager: Karpenter`), so those groups are launched as kops would
//! launch them as autoscaling groups.
//!
//! From `spec.karpenter`: `image`, `logLevel`, `featureGates`,
//! `cpuRequest`, `memoryRequest`, `memoryLimit` (kops' defaults when unset
//! or empty). From the cluster: its name, the API's internal name, the
//! region, IPv6-only clusters' DNS policy. With service-account roles the
//! controller gets the role `karpenter.kube-system.sa.<cluster>`; its ARN
//! names the account, so without [`Model::account_id`] the addon stays a
//! placeholder.
//!
//! Per group, the node class carries the AMI selector (from `spec.image`:
//! an id, an SSM parameter, `<owner>/<name>` with kops' owner aliases, or a
//! name owned by the account), the instance profile, the tags of the
//! group's instances (less those Karpenter reserves), the subnets and
//! security groups by tag (or the override and additional groups by id),
//! whether instances get a public address (the first subnet's type), the
//! root volume with kops' defaults, the group's kubelet reservations and
//! the group's bootstrap script as user data. The node pool carries the
//! node labels, taints, instance types and capacity type (spot with a
//! `maxPrice`, mixed with a mixed-instances policy below 100% on-demand),
//! static capacity (`minSize`) and a node limit (`maxSize`).
//!
//! What an offline render cannot know: kops asks EC2 for the group's image
//! and uses its root device name, so the mapping replaces the image's root
//! volume. kops-rs does not resolve images while building the model, so
//! [`root_device_name`] names the device the image's publisher uses
//! (`/dev/sda1` for Canonical's and Red Hat's images, `/dev/xvda`
//! otherwise); an image that differs from its publisher's convention gets
//! an extra volume instead of a larger root volume.

use std::collections::BTreeMap;

use kops_api::{InstanceGroup, Role};
use serde_json::{json, Map, Value};

use super::{pods, service_account_role, template, TemplateError};
use crate::Model;

/// The controller image kops deploys unless `spec.karpenter.image` says otherwise.
const DEFAULT_IMAGE: &str = "public.ecr.aws/karpenter/controller:1.13.0";
/// The controller's feature gates unless `featureGates` says otherwise.
const DEFAULT_FEATURE_GATES: &str =
    "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=false,NodeOverlay=false,StaticCapacity=true";
/// The controller's service account, which carries the IAM role with IRSA.
const SERVICE_ACCOUNT: &str = "karpenter";
/// The API group of the node classes and of their references.
const AWS_GROUP: &str = "karpenter.k8s.aws";

/// Karpenter's objects; `None` when the cluster does not run it or kops-rs
/// cannot render it (see the module's notes), an error when the template
/// does not render (a kops-rs bug).
pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let spec = &model.cluster.spec;
    let Some(karpenter) = spec.karpenter.as_ref().filter(|k| k.enabled == Some(true)) else {
        return Ok(None);
    };
    let Some(region) = crate::iam::region(model) else {
        return Ok(None);
    };
    // kops fills unset and empty settings alike with its defaults.
    let setting = |value: Option<&str>, default: &str| -> String {
        value
            .filter(|v| !v.is_empty())
            .unwrap_or(default)
            .to_string()
    };
    let extra = |key: &str| karpenter.extra.get(key).and_then(Value::as_str);
    let context = json!({
        "feature_gates": setting(karpenter.feature_gates.as_deref(), DEFAULT_FEATURE_GATES),
        "log_level": setting(extra("logLevel"), "debug"),
        "image": setting(extra("image"), DEFAULT_IMAGE),
        "cpu_request": setting(karpenter.cpu_request.as_deref(), "500m"),
        "memory_request": setting(karpenter.memory_request.as_deref(), "1Gi"),
        "memory_limit": setting(karpenter.memory_limit.as_deref(), "1Gi"),
        "cluster_name": model.name(),
        "api_internal_name": crate::dns::api_internal_name(model),
        "region": region,
        "dns_policy": if model.ipv6_only() { "ClusterFirst" } else { "Default" },
    });
    let mut objects = template::render(
        "karpenter.sh",
        include_str!("karpenter/manifest.yaml"),
        &context,
    )?;
    pods::mark(&mut objects);
    if service_account_role::add(model, &mut objects, &[SERVICE_ACCOUNT]).is_none() {
        return Ok(None);
    }
    // kops lists the groups by name.
    let mut groups: Vec<(usize, &InstanceGroup)> = model
        .groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.spec.manager.as_deref() == Some("Karpenter"))
        .collect();
    groups.sort_by(|a, b| a.1.name().cmp(b.1.name()));
    for (index, group) in groups {
        // A group the model cannot describe (no image, bad profile ARN) is
        // refused by validation and the compute model; leave the addon a
        // placeholder rather than half a node class.
        let Some(node_class) = node_class(model, index, group) else {
            return Ok(None);
        };
        objects.push(node_class);
        objects.push(node_pool(model, group));
    }
    Ok(Some(objects))
}

/// The device a group's image attaches its root volume as, by the image's
/// publisher (see the module's notes): Canonical's and Red Hat's images
/// use `/dev/sda1`, Amazon Linux, Debian, Flatcar and most others
/// `/dev/xvda`.
fn root_device_name(image: &str) -> String {
    let image = image.trim();
    let sda1 = ["099720109477", "309956199498"];
    let by_owner = image
        .split_once('/')
        .is_some_and(|(owner, _)| sda1.contains(&owner_alias(owner)));
    let by_parameter = image.starts_with("ssm:") && image.contains("/canonical/");
    if by_owner || by_parameter {
        "/dev/sda1".into()
    } else {
        "/dev/xvda".into()
    }
}

/// The account behind an image owner alias kops accepts.
fn owner_alias(owner: &str) -> &str {
    match owner {
        "amazon" | "amazon.com" => "137112412989",
        "debian" | "debian11" => "136693071363",
        "flatcar" => "075585003325",
        "redhat" | "redhat.com" => "309956199498",
        "ubuntu" => "099720109477",
        "rocky" | "rockylinux" => "792107900819",
        other => other,
    }
}

/// The AMI selector of `spec.image`: an id, an SSM parameter,
/// `<owner>/<name>` or a name owned by the cluster's account.
fn ami_selector(image: &str) -> Option<Value> {
    let image = image.trim();
    if image.is_empty() || image.contains("://") {
        return None;
    }
    if image.starts_with("ami-") {
        return Some(json!({"id": image}));
    }
    if let Some(parameter) = image.strip_prefix("ssm:") {
        return (!parameter.is_empty()).then(|| json!({"ssmParameter": parameter}));
    }
    match image.split_once('/') {
        None => Some(json!({"name": image, "owner": "self"})),
        Some((owner, name)) if !owner.is_empty() && !name.is_empty() => {
            Some(json!({"name": name, "owner": owner_alias(owner)}))
        }
        Some(_) => None,
    }
}

/// The group's `EC2NodeClass`.
fn node_class(model: &Model<'_>, index: usize, group: &InstanceGroup) -> Option<Value> {
    let role = group.role().unwrap_or(Role::Node);
    let image = group.spec.image.as_deref()?;
    let profile = crate::iam::instance_profile_name(model, index, group, role).ok()?;
    let user_data = kops_nodeup::bootstrap::user_data_with(
        model.cluster,
        group,
        model.config_base,
        &model.node_inputs(),
    )
    .ok()?;
    // Karpenter sets these itself and refuses them in a node class.
    let tags: BTreeMap<String, String> = crate::compute::group_tags(model, group, role)
        .into_iter()
        .filter(|(k, _)| !k.is_empty() && !reserved_tag(k))
        .collect();
    let mut security_groups = vec![match group.spec.security_group_override.as_deref() {
        Some(id) => json!({"id": id}),
        None => json!({"tags": {
            "KubernetesCluster": model.name(),
            "Name": crate::security::group_name(model, role),
        }}),
    }];
    for id in group.spec.additional_security_groups.iter().flatten() {
        security_groups.push(json!({"id": id}));
    }
    let mut spec = Map::new();
    spec.insert("amiFamily".into(), json!("Custom"));
    spec.insert("amiSelectorTerms".into(), json!([ami_selector(image)?]));
    if let Some(public) = associate_public_ip(model, group) {
        spec.insert("associatePublicIPAddress".into(), json!(public));
    }
    spec.insert(
        "blockDeviceMappings".into(),
        json!([{
            "deviceName": root_device_name(image),
            "ebs": root_volume(group, role),
            "rootVolume": true,
        }]),
    );
    spec.insert("instanceProfile".into(), json!(profile));
    if let Some(kubelet) = kubelet(group) {
        spec.insert("kubelet".into(), kubelet);
    }
    spec.insert("securityGroupSelectorTerms".into(), json!(security_groups));
    spec.insert(
        "subnetSelectorTerms".into(),
        json!([{"tags": {
            "KubernetesCluster": model.name(),
            format!("kops.k8s.io/instance-group/{}", group.name()): "true",
        }}]),
    );
    if !tags.is_empty() {
        spec.insert("tags".into(), json!(tags));
    }
    // kops trims the node class it writes, and the user data comes last:
    // the script loses its final line break.
    spec.insert("userData".into(), json!(user_data.trim_end()));
    Some(json!({
        "apiVersion": format!("{AWS_GROUP}/v1"),
        "kind": "EC2NodeClass",
        "metadata": {"name": group.name()},
        "spec": spec,
    }))
}

/// Tags Karpenter puts on what it launches and refuses in a node class.
fn reserved_tag(key: &str) -> bool {
    key.starts_with("kubernetes.io/cluster")
        || matches!(
            key,
            "eks:eks-cluster-name"
                | "karpenter.sh/nodepool"
                | "karpenter.sh/nodeclaim"
                | "karpenter.k8s.aws/ec2nodeclass"
        )
}

/// Whether instances get a public address: as the group says in public
/// and utility subnets (default yes), never in private or dual-stack ones.
/// The group's first subnet decides.
fn associate_public_ip(model: &Model<'_>, group: &InstanceGroup) -> Option<bool> {
    let first = group.spec.subnets.as_ref()?.first()?;
    let subnet = model
        .cluster
        .spec
        .subnets
        .iter()
        .flatten()
        .find(|s| &s.name == first)?;
    match subnet.kind.as_deref()? {
        "Public" | "Utility" => Some(group.spec.associate_public_ip.unwrap_or(true)),
        "Private" | "DualStack" => Some(false),
        _ => None,
    }
}

/// The root volume's EBS settings with kops' defaults (as its launch
/// templates have them). The key is used only when encryption is asked for
/// explicitly.
fn root_volume(group: &InstanceGroup, role: Role) -> Value {
    let spec = &group.spec;
    let nested = spec.root_volume.as_ref();
    let size = nested
        .and_then(|r| r.size)
        .or(spec.root_volume_size)
        .filter(|s| *s > 0)
        .unwrap_or(match role {
            Role::ControlPlane => crate::compute::DEFAULT_ROOT_VOLUME_SIZE_CONTROL_PLANE,
            Role::Bastion => crate::compute::DEFAULT_ROOT_VOLUME_SIZE_BASTION,
            Role::Node | Role::ApiServer => crate::compute::DEFAULT_ROOT_VOLUME_SIZE_NODE,
        } as i64);
    let volume_type = nested
        .and_then(|r| r.kind.clone())
        .or_else(|| spec.root_volume_type.clone())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| crate::compute::DEFAULT_VOLUME_TYPE.to_string());
    let encryption = nested
        .and_then(|r| r.encryption)
        .or(spec.root_volume_encryption);
    let key = nested
        .and_then(|r| r.encryption_key.clone())
        .or_else(|| spec.root_volume_encryption_key.clone())
        .filter(|k| encryption == Some(true) && !k.is_empty());
    let iops = nested.and_then(|r| r.volume_iops).or(spec.root_volume_iops);
    let throughput = nested
        .and_then(|r| r.volume_throughput)
        .or(spec.root_volume_throughput);
    let at_least = |v: Option<i64>, min: i32| Some(v.unwrap_or(0).max(min as i64));
    let (iops, throughput) = match volume_type.as_str() {
        "io1" | "io2" => (at_least(iops, crate::compute::DEFAULT_IO_IOPS), None),
        "gp3" => (
            at_least(iops, crate::compute::DEFAULT_GP3_IOPS),
            at_least(throughput, crate::compute::DEFAULT_GP3_THROUGHPUT),
        ),
        _ => (None, None),
    };
    let mut ebs = Map::new();
    ebs.insert("deleteOnTermination".into(), json!(true));
    ebs.insert("encrypted".into(), json!(encryption.unwrap_or(true)));
    if let Some(iops) = iops {
        ebs.insert("iops".into(), json!(iops));
    }
    if let Some(key) = key {
        ebs.insert("kmsKeyID".into(), json!(key));
    }
    if let Some(throughput) = throughput {
        ebs.insert("throughput".into(), json!(throughput));
    }
    ebs.insert("volumeSize".into(), json!(format!("{size}Gi")));
    ebs.insert("volumeType".into(), json!(volume_type));
    Value::Object(ebs)
}

/// The group's kubelet settings Karpenter needs to compute a node's
/// allocatable capacity: `maxPods` and the reservations.
fn kubelet(group: &InstanceGroup) -> Option<Value> {
    let kubelet = group.spec.kubelet.as_ref()?;
    let mut out = Map::new();
    if let Some(max_pods) = kubelet.max_pods {
        out.insert("maxPods".into(), json!(max_pods));
    }
    for (key, value) in [
        ("systemReserved", &kubelet.system_reserved),
        ("kubeReserved", &kubelet.kube_reserved),
    ] {
        if let Some(map) = value.as_ref().filter(|m| !m.is_empty()) {
            out.insert(key.into(), json!(map));
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// The group's `NodePool`.
fn node_pool(model: &Model<'_>, group: &InstanceGroup) -> Value {
    let mut requirements = vec![json!({
        "key": "kubernetes.io/os", "operator": "In", "values": ["linux"],
    })];
    let types = instance_types(group);
    if !types.is_empty() {
        requirements.push(json!({
            "key": "node.kubernetes.io/instance-type", "operator": "In", "values": types,
        }));
    }
    requirements.push(json!({
        "key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity_types(group),
    }));
    let mut claim = Map::new();
    claim.insert(
        "nodeClassRef".into(),
        json!({"group": AWS_GROUP, "kind": "EC2NodeClass", "name": group.name()}),
    );
    claim.insert("requirements".into(), json!(requirements));
    let taints: Vec<Value> = group
        .spec
        .taints
        .iter()
        .flatten()
        .filter_map(|t| taint(t))
        .collect();
    if !taints.is_empty() {
        claim.insert("taints".into(), json!(taints));
    }
    let mut template = Map::new();
    let labels = node_labels(model, group);
    if !labels.is_empty() {
        template.insert("metadata".into(), json!({"labels": labels}));
    }
    template.insert("spec".into(), Value::Object(claim));
    let mut spec = Map::new();
    if let Some(max) = group.spec.max_size {
        spec.insert("limits".into(), json!({"nodes": max.to_string()}));
    }
    if let Some(min) = group.spec.min_size.filter(|m| *m > 0) {
        spec.insert("replicas".into(), json!(min));
    }
    spec.insert("template".into(), Value::Object(template));
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": group.name()},
        "spec": spec,
    })
}

/// The labels of the group's nodes (the kubelet's `nodeLabels`, the
/// role's, the group's `nodeLabels`) less those Karpenter sets itself.
fn node_labels(model: &Model<'_>, group: &InstanceGroup) -> BTreeMap<String, String> {
    let role = group.role().unwrap_or(Role::Node);
    let mut labels = BTreeMap::new();
    let cluster_kubelet = match role {
        Role::ControlPlane => model.cluster.spec.master_kubelet.as_ref(),
        _ => model.cluster.spec.kubelet.as_ref(),
    };
    for kubelet in [cluster_kubelet, group.spec.kubelet.as_ref()]
        .into_iter()
        .flatten()
    {
        if let Some(map) = kubelet.extra.get("nodeLabels").and_then(Value::as_object) {
            for (k, v) in map {
                labels.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
            }
        }
    }
    let own: &[&str] = match role {
        Role::ControlPlane => &[
            "node-role.kubernetes.io/control-plane",
            "kops.k8s.io/kops-controller-pki",
            "node.kubernetes.io/exclude-from-external-load-balancers",
        ],
        Role::ApiServer => &["node-role.kubernetes.io/api-server"],
        Role::Node => &["node-role.kubernetes.io/node"],
        Role::Bastion => &[],
    };
    for k in own {
        labels.insert((*k).to_string(), String::new());
    }
    labels.extend(group.node_labels());
    labels.retain(|k, _| !reserved_label(k));
    labels
}

/// Labels Karpenter owns in a node pool's template (its capacity type may
/// be pinned).
fn reserved_label(key: &str) -> bool {
    if key == "karpenter.sh/capacity-type" {
        return false;
    }
    if key == "kubernetes.io/hostname" {
        return true;
    }
    let Some((domain, _)) = key.split_once('/') else {
        return false;
    };
    ["karpenter.sh", "karpenter.k8s.aws"]
        .iter()
        .any(|d| domain == *d || domain.ends_with(&format!(".{d}")))
}

/// `key=value:Effect` or `key:Effect` as a node-pool taint.
fn taint(text: &str) -> Option<Value> {
    let (rest, effect) = text.rsplit_once(':')?;
    if effect.is_empty() {
        return None;
    }
    let (key, value) = rest.split_once('=').unwrap_or((rest, ""));
    let mut taint = Map::new();
    taint.insert("effect".into(), json!(effect));
    taint.insert("key".into(), json!(key));
    if !value.is_empty() {
        taint.insert("value".into(), json!(value));
    }
    Some(Value::Object(taint))
}

/// The group's instance types (mixed-instances policy and `machineType`,
/// comma-separated), each once, sorted.
fn instance_types(group: &InstanceGroup) -> Vec<String> {
    let mixed = group
        .spec
        .mixed_instances_policy
        .as_ref()
        .and_then(|p| p.instances.clone())
        .unwrap_or_default();
    let machine = group.spec.machine_type.as_deref().unwrap_or_default();
    let mut types: Vec<String> = mixed
        .iter()
        .map(String::as_str)
        .chain(machine.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    types.sort();
    types.dedup();
    types
}

/// Spot with a `maxPrice` (or spot duration), on-demand and spot with a
/// mixed-instances policy that is not all on-demand above its base, else
/// on-demand.
fn capacity_types(group: &InstanceGroup) -> Vec<&'static str> {
    if crate::compute::max_price(group).is_some()
        || group.spec.extra.contains_key("spotDurationInMinutes")
    {
        return vec!["spot"];
    }
    let above_base = group
        .spec
        .mixed_instances_policy
        .as_ref()
        .and_then(|p| p.on_demand_above_base);
    if above_base.is_some_and(|b| b < 100) {
        return vec!["on-demand", "spot"];
    }
    vec!["on-demand"]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addons::tests::golden_cases;
    use crate::security::tests::model;
    use sha2::Digest;

    const KEY: &str = "karpenter.sh";

    /// The manifest's `userData` blocks replaced by a marker: kops' carry
    /// kops' nodeup, kops-rs' its own (compared with the group's
    /// `nodeupscript` state file instead).
    fn without_user_data(text: &str) -> String {
        let mut out = String::new();
        let mut skipping = false;
        for line in text.lines() {
            if skipping && (line.starts_with("    ") || line.is_empty()) {
                continue;
            }
            skipping = false;
            if line == "  userData: |-" {
                out.push_str("  userData: (script)\n");
                skipping = true;
                continue;
            }
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    #[test]
    fn identical_to_kops_but_for_the_user_data() {
        let cases = golden_cases(KEY);
        if kops_testkit::shared_dir().is_some() {
            assert!(!cases.is_empty(), "no golden case of {KEY}");
        }
        for (case, cluster, groups, theirs) in cases {
            let mut m = model(&cluster, &groups);
            // Without the account the role's ARN is unknown: a placeholder.
            assert!(crate::addons::manifest(&m, KEY).unwrap().is_none());
            m.account_id = Some("123456789012");
            let ours = crate::addons::manifest(&m, KEY)
                .unwrap()
                .expect("rendered")
                .replace("arn:aws:", "arn:aws-test:")
                // kops' test cloud gives every image the root device
                // /dev/xvda; Canonical's images use /dev/sda1.
                .replace("deviceName: /dev/sda1", "deviceName: /dev/xvda");
            crate::addons::tests::assert_same(
                &case,
                &without_user_data(&ours),
                &without_user_data(&theirs),
            );
            // The user data is the group's bootstrap script, as written to
            // the state store.
            let files = crate::files::karpenter_files(&m).unwrap();
            let scripts: Vec<_> = files
                .iter()
                .filter(|f| f.name.starts_with("nodeupscript-"))
                .collect();
            assert_eq!(scripts.len(), ours.matches("\nkind: NodePool\n").count());
            for file in scripts {
                let indented: String = String::from_utf8_lossy(&file.contents)
                    .lines()
                    .map(|l| match l {
                        "" => "\n".to_string(),
                        l => format!("    {l}\n"),
                    })
                    .collect();
                assert!(ours.contains(&indented), "{case}: {}", file.name);
            }
        }
    }

    /// The bootstrap channel lists the addon as kops does (id, manifest,
    /// selector, pruning of its kinds and its node classes and pools); the
    /// hash is of kops-rs' manifest, whose user data differs from kops'.
    #[test]
    fn channel_entry_is_kops() {
        for (case, cluster, groups, _) in golden_cases(KEY) {
            let mut m = model(&cluster, &groups);
            m.account_id = Some("123456789012");
            let files = crate::files::state_files(&m, "", Vec::new()).unwrap();
            let entry = |text: &str| -> Value {
                let channel: Value = serde_yaml_ng::from_str(text).unwrap();
                let addons = channel["spec"]["addons"].as_array().unwrap().clone();
                addons.into_iter().find(|a| a["name"] == KEY).unwrap()
            };
            let channel = files
                .iter()
                .find(|f| f.path == "addons/bootstrap-channel.yaml");
            let ours = entry(&String::from_utf8_lossy(&channel.unwrap().contents));
            let manifest = files
                .iter()
                .find(|f| f.path == "addons/karpenter.sh/k8s-1.19.yaml");
            let manifest = String::from_utf8_lossy(&manifest.unwrap().contents).to_string();
            let hash: String = sha2::Sha256::digest(manifest.trim().as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(ours["manifestHash"], hash.as_str());
            let golden = kops_testkit::shared_dir().unwrap().join(format!(
                "conformance/kops/update_cluster/{case}/data/aws_s3_object_{}-addons-bootstrap_content",
                cluster.name()
            ));
            let mut theirs = entry(&std::fs::read_to_string(golden).unwrap());
            theirs["manifestHash"] = ours["manifestHash"].clone();
            assert_eq!(ours, theirs, "{case}");
        }
    }

    #[test]
    fn settings_defaults_and_groups() {
        let (mut cluster, mut groups) = crate::addons::tests::cluster();
        cluster.spec.karpenter = Some(kops_api::cluster::KarpenterSpec {
            enabled: Some(true),
            ..Default::default()
        });
        let mut group = InstanceGroup::new(cluster.name(), "spot", Role::Node);
        group.spec.manager = Some("Karpenter".into());
        group.spec.image = Some("ubuntu/images/x".into());
        group.spec.machine_type = Some("m5.large,c5.large".into());
        group.spec.subnets = Some(vec!["us-test-1a".into()]);
        group.spec.taints = Some(vec!["dedicated=gpu:NoSchedule".into()]);
        group.spec.root_volume_type = Some("io1".into());
        group.spec.extra.insert("maxPrice".into(), json!("0.10"));
        groups.push(group);
        let m = model(&cluster, &groups);
        let objects = objects(&m).unwrap().unwrap();
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], DEFAULT_IMAGE);
        assert_eq!(container["resources"]["requests"]["cpu"], "500m");
        assert_eq!(container["env"][0]["value"], DEFAULT_FEATURE_GATES);
        let class = objects
            .iter()
            .find(|o| o["kind"] == "EC2NodeClass")
            .unwrap();
        assert_eq!(class["spec"]["associatePublicIPAddress"], true);
        let device = &class["spec"]["blockDeviceMappings"][0];
        assert_eq!(device["deviceName"], "/dev/sda1");
        assert_eq!(device["ebs"]["iops"], 100);
        assert!(device["ebs"].get("throughput").is_none());
        assert_eq!(
            class["spec"]["amiSelectorTerms"][0]["owner"],
            "099720109477"
        );
        let pool = objects.iter().find(|o| o["kind"] == "NodePool").unwrap();
        let spec = &pool["spec"]["template"]["spec"];
        assert_eq!(
            spec["requirements"][1]["values"],
            json!(["c5.large", "m5.large"])
        );
        assert_eq!(spec["requirements"][2]["values"], json!(["spot"]));
        assert_eq!(
            spec["taints"],
            json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
        );
    }

    #[test]
    fn images_and_their_root_devices() {
        assert_eq!(ami_selector("ami-123"), Some(json!({"id": "ami-123"})));
        assert_eq!(
            ami_selector("ssm:/a/b"),
            Some(json!({"ssmParameter": "/a/b"}))
        );
        assert_eq!(
            ami_selector("my-image"),
            Some(json!({"name": "my-image", "owner": "self"}))
        );
        assert_eq!(ami_selector("https://x/y"), None);
        assert_eq!(ami_selector("/x"), None);
        assert_eq!(
            root_device_name("099720109477/ubuntu/images/x"),
            "/dev/sda1"
        );
        assert_eq!(root_device_name("amazon/al2023-ami-x"), "/dev/xvda");
        assert_eq!(root_device_name("ami-123"), "/dev/xvda");
    }
}
