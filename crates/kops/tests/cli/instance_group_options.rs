//! Instance-group options of the launch template, applied on moto: a group
//! naming an existing instance profile (`spec.iam.profile`) and asking for
//! spot instances (`spec.maxPrice`, no mixed-instances policy). The
//! template carries both, and a second update finds nothing to do.

use crate::common::{self, file_url, kops_on, IMAGE};

const CLUSTER: &str = "spot.example.com";
const PROFILE: &str = "given-node-profile";

/// The `LaunchTemplateData` XML of the default version of `template`.
fn template_data(moto: &kops_testkit::Moto, template: &str) -> String {
    let (status, body) = moto
        .query_api(
            "ec2",
            &format!(
                "Action=DescribeLaunchTemplateVersions&Version=2016-11-15&LaunchTemplateName={template}&LaunchTemplateVersion.1=%24Default"
            ),
        )
        .unwrap();
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn a_given_profile_and_a_spot_price_are_applied_once() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    moto.ensure_hosted_zone("example.com").unwrap();
    let (status, body) = moto
        .query_api(
            "iam",
            &format!(
                "Action=CreateInstanceProfile&Version=2010-05-08&InstanceProfileName={PROFILE}"
            ),
        )
        .unwrap();
    assert!(
        status == 200 || body.contains("EntityAlreadyExists"),
        "{body}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let manifest = common::one_zone_cluster(CLUSTER)
        .replace(
            "spec: {machineType: t3.medium, maxSize: 2,",
            &format!(
                "spec: {{iam: {{profile: 'arn:aws:iam::123456789012:instance-profile/{PROFILE}'}}, maxPrice: '0.05', machineType: t3.medium, maxSize: 2,"
            ),
        )
        .replace("machineType:", &format!("image: {IMAGE}, machineType:"));
    assert!(
        manifest.contains("maxPrice"),
        "one_zone_cluster changed shape"
    );
    let file = tmp.path().join("c.yaml");
    std::fs::write(&file, manifest).unwrap();
    let r = kops_on(
        moto,
        &["create", "-f", file.to_str().unwrap(), "--state", &state],
    );
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    let r = kops_on(
        moto,
        &["update", "cluster", CLUSTER, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply: {}\n{}", r.stdout, r.stderr);

    let nodes = template_data(moto, &format!("nodes.{CLUSTER}"));
    assert!(
        nodes.contains(&format!("<name>{PROFILE}</name>")),
        "{nodes}"
    );
    assert!(nodes.contains("<marketType>spot</marketType>"), "{nodes}");
    assert!(nodes.contains("<maxPrice>0.05</maxPrice>"), "{nodes}");
    let masters = template_data(moto, &format!("control-plane-us-east-1a.masters.{CLUSTER}"));
    assert!(!masters.contains("marketType"), "{masters}");
    assert!(
        masters.contains(&format!("<name>masters.{CLUSTER}</name>")),
        "{masters}"
    );

    let r = kops_on(
        moto,
        &[
            "update",
            "cluster",
            CLUSTER,
            "--state",
            &state,
            "--exit-code",
        ],
    );
    assert_eq!(
        r.code, 0,
        "second run must find nothing to do:\n{}\n{}",
        r.stdout, r.stderr
    );

    // The given profile is not kops-rs' to delete.
    let r = kops_on(moto, &crate::common::delete_args(CLUSTER, &state));
    assert_eq!(r.code, 0, "delete: {}", r.stderr);
    let (status, body) = moto
        .query_api(
            "iam",
            &format!("Action=GetInstanceProfile&Version=2010-05-08&InstanceProfileName={PROFILE}"),
        )
        .unwrap();
    assert_eq!(status, 200, "the given profile was deleted: {body}");
}
