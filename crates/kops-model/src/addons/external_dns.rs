//! external-dns (`external-dns.addons.k8s.io`), kops' alternative to
//! dns-controller when `spec.externalDns.provider` is `external-dns`: it
//! publishes Services, Ingresses (unless `watchIngress: false`) and Pods
//! in the cluster's hosted zone, owning its records by TXT records named
//! after the cluster, and watches one namespace when `watchNamespace` says.
//! It runs on the control plane; with service-account roles it assumes its
//! own role.
//!
//! The zone filter is `spec.dnsZone` as `update cluster` resolves it (the
//! zone's id).

use serde_json::{json, Value};

use super::{pods, service_account_role, template, TemplateError};
use crate::Model;

const KEY: &str = "external-dns.addons.k8s.io";
const TEMPLATE: &str = include_str!("external_dns/manifest.yaml");
const SERVICE_ACCOUNT: &str = "external-dns";

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let Some(spec) = model.cluster.spec.external_dns.as_ref() else {
        return Ok(None);
    };
    if spec.provider.as_deref() != Some("external-dns") {
        return Ok(None);
    }
    let mut args = vec!["--provider=aws".to_string(), "--events".to_string()];
    if spec.watch_ingress != Some(false) {
        args.push("--source=ingress".into());
    }
    args.extend(
        [
            "--source=pod",
            "--source=service",
            "--compatibility=kops-dns-controller",
            "--registry=txt",
        ]
        .map(String::from),
    );
    args.push(format!("--txt-owner-id=kops-{}", model.name()));
    args.push(format!("--zone-id-filter={}", crate::dns::zone(model)));
    if let Some(namespace) = spec
        .extra
        .get("watchNamespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        args.push(format!("--namespace={namespace}"));
    }
    let mut objects = template::render(KEY, TEMPLATE, &json!({ "args": args }))?;
    pods::mark(&mut objects);
    Ok(service_account_role::add(model, &mut objects, &[SERVICE_ACCOUNT]).map(|()| objects))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addons::tests::{cluster, compare_golden_in_account};
    use crate::security::tests::model;

    #[test]
    fn identical_to_kops_in_every_case() {
        // kops' test cloud resolves the zone to a fake id, which the
        // comparison puts in.
        let (identical, placeholders) = compare_golden_in_account(KEY, |cluster, theirs| {
            let id = theirs
                .lines()
                .find_map(|l| l.trim().strip_prefix("- --zone-id-filter="));
            cluster.spec.dns_zone = id.map(str::to_string);
        });
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert_eq!(identical, 1);
        }
    }

    #[test]
    fn ingress_and_namespace_flags() {
        let (mut cluster, groups) = cluster();
        assert!(objects(&model(&cluster, &groups)).unwrap().is_none());
        let mut spec = kops_api::cluster::ExternalDnsConfig {
            provider: Some("external-dns".into()),
            watch_ingress: Some(false),
            ..Default::default()
        };
        spec.extra.insert("watchNamespace".into(), json!("web"));
        cluster.spec.external_dns = Some(spec);
        let objects = objects(&model(&cluster, &groups)).unwrap().unwrap();
        let args = &objects[0]["spec"]["template"]["spec"]["containers"][0]["args"];
        let args: Vec<_> = args.as_array().unwrap().iter().collect();
        assert!(!args.contains(&&json!("--source=ingress")));
        assert!(args.contains(&&json!("--namespace=web")));
        assert!(args.contains(&&json!("--zone-id-filter=example.com")));
    }
}
