//! `edit --set/--unset`, `delete -f`, `trust keypair`, `upgrade cluster`
//! (state store only), and `get instances` / `delete instance` on moto with
//! the test's small Kubernetes API.

use crate::common;
use crate::fake_kube;

use common::{command, file_url, kops, Run};

const EXTRA_GROUP: &str = r#"apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels: {kops.k8s.io/cluster: more.example.com}
  name: extra
spec: {machineType: t3.large, maxSize: 1, minSize: 1, role: Node, subnets: [us-east-1a]}
"#;

const NAME: &str = "more.example.com";

const SSH_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b test@example\n";

struct Fixture {
    dir: tempfile::TempDir,
    state: String,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.yaml");
        std::fs::write(&file, common::one_zone_cluster("more.example.com")).unwrap();
        let state = file_url(&dir.path().join("state"));
        let f = Fixture { dir, state };
        f.ok(&["create", "-f", file.to_str().unwrap()]);
        f
    }

    fn run(&self, args: &[&str]) -> Run {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--state", &self.state]);
        kops(&all)
    }

    fn ok(&self, args: &[&str]) -> Run {
        let r = self.run(args);
        assert_eq!(r.code, 0, "{args:?}:\n{}\n{}", r.stdout, r.stderr);
        r
    }

    /// A failure with a one-line error message.
    fn fails(&self, args: &[&str], needle: &str) -> Run {
        let r = self.run(args);
        assert_eq!(
            r.code, 1,
            "{args:?} should fail:\n{}\n{}",
            r.stdout, r.stderr
        );
        assert!(
            r.stderr.contains(needle),
            "{args:?}: `{needle}` not in\n{}",
            r.stderr
        );
        assert!(r.stderr.starts_with("Error: "), "{}", r.stderr);
        r
    }

    fn yaml(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend_from_slice(&["-o", "yaml"]);
        serde_yaml_ng::from_str(&self.ok(&all).stdout).unwrap()
    }

    fn write(&self, name: &str, text: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}

#[test]
fn edit_with_set_and_unset() {
    let f = Fixture::new();
    f.ok(&[
        "edit",
        "cluster",
        NAME,
        "--set",
        "spec.kubernetesVersion=1.35.0",
        "--set",
        "cluster.spec.kubeProxy.enabled=false",
    ]);
    let c = f.yaml(&["get", "cluster", NAME]);
    assert_eq!(c["spec"]["kubernetesVersion"], "1.35.0");
    assert_eq!(c["spec"]["kubeProxy"]["enabled"], false);
    f.ok(&["edit", "cluster", NAME, "--unset", "spec.kubeProxy"]);
    let c = f.yaml(&["get", "cluster", NAME]);
    assert!(c["spec"].get("kubeProxy").is_none(), "{c}");

    f.ok(&[
        "edit",
        "ig",
        "nodes",
        "--name",
        NAME,
        "--set",
        "spec.maxSize=4",
        "--set",
        "instancegroup.spec.minSize=3",
    ]);
    let g = f.yaml(&["get", "ig", "nodes", "--name", NAME]);
    assert_eq!(g["spec"]["maxSize"], 4);
    assert_eq!(g["spec"]["minSize"], 3);

    // Every write is validated: nothing is stored on an error.
    f.fails(
        &[
            "edit",
            "ig",
            "nodes",
            "--name",
            NAME,
            "--set",
            "spec.minSize=9",
        ],
        "minSize",
    );
    f.fails(
        &["edit", "cluster", NAME, "--set", "spec.kubernetesVersion"],
        "has no value",
    );
    f.fails(
        &[
            "edit",
            "cluster",
            NAME,
            "--set",
            "spec.kubernetesVersion=banana",
        ],
        "banana",
    );
    f.fails(
        &[
            "edit",
            "ig",
            "missing",
            "--name",
            NAME,
            "--set",
            "spec.maxSize=1",
        ],
        "not found",
    );
    let g = f.yaml(&["get", "ig", "nodes", "--name", NAME]);
    assert_eq!(g["spec"]["minSize"], 3);
    let c = f.yaml(&["get", "cluster", NAME]);
    assert_eq!(c["spec"]["kubernetesVersion"], "1.35.0");
}

#[test]
fn delete_from_file() {
    let f = Fixture::new();
    let group = f.write("extra.yaml", EXTRA_GROUP);
    f.ok(&["create", "-f", &group]);

    let r = f.ok(&["delete", "-f", &group]);
    assert!(r.stdout.contains("would be deleted"), "{}", r.stdout);
    f.ok(&["get", "ig", "extra", "--name", NAME]);
    f.ok(&["delete", "-f", &group, "--yes"]);
    let r = f.run(&["get", "ig", "extra", "--name", NAME]);
    assert_eq!(r.code, 1, "{}", r.stdout);

    f.fails(&["delete", "-f", &group, "--yes"], "not found");
    f.fails(&["delete", "-f", "/nonexistent/x.yaml"], "cannot read");
    f.fails(&["delete"], "nothing to delete");
    let empty = f.write("empty.yaml", "# nothing\n");
    f.fails(&["delete", "-f", &empty], "holds no objects");
    let secret = f.write(
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
    );
    f.fails(&["delete", "-f", &secret], "cannot delete a Secret");

    // An SSHCredential: the cluster's admin key.
    let key = f.write("id.pub", SSH_KEY);
    f.ok(&["create", "sshpublickey", "-i", &key, "--name", NAME]);
    let credential = f.write(
        "ssh.yaml",
        &format!("apiVersion: kops.k8s.io/v1alpha2\nkind: SSHCredential\nmetadata:\n  name: admin\n  labels: {{kops.k8s.io/cluster: {NAME}}}\nspec:\n  publicKey: {SSH_KEY}"),
    );
    let keys = |f: &Fixture| f.run(&["get", "sshpublickeys", "--name", NAME]).stdout;
    let r = f.ok(&["delete", "-f", &credential]);
    assert!(r.stdout.contains("would be deleted"), "{}", r.stdout);
    assert!(keys(&f).contains("07:76:b6"), "{}", keys(&f));
    f.ok(&["delete", "-f", &credential, "--yes"]);
    assert!(!keys(&f).contains("07:76:b6"), "{}", keys(&f));
    f.fails(&["delete", "-f", &credential, "--yes"], "not found");
}

#[test]
fn trust_keypair_reverses_distrust() {
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let cluster = "trust.k8s.local";
    let ok = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--state", &state]);
        let r = kops(&all);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        r
    };
    ok(&["create", "cluster", cluster, "--zones", "us-east-1a"]);
    let last_word = |r: &Run| r.stderr.split_whitespace().last().unwrap().to_string();
    let first = last_word(&ok(&["create", "keypair", "kubernetes-ca", "--primary"]));
    ok(&["create", "keypair", "kubernetes-ca", "--primary"]);
    ok(&["distrust", "keypair", "kubernetes-ca"]);
    let trusted = |r: Run| -> usize {
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        v.as_array().unwrap().len()
    };
    assert_eq!(trusted(ok(&["get", "keypairs", "-o", "json"])), 1);

    let r = ok(&["trust", "keypair", "kubernetes-ca", &first]);
    assert_eq!(r.stdout.trim(), format!("Trusted kubernetes-ca {first}"));
    assert_eq!(trusted(ok(&["get", "keypairs", "-o", "json"])), 2);
    // Trusting a trusted keypair changes nothing.
    let r = ok(&["trust", "keypair", "kubernetes-ca", &first]);
    assert!(r.stdout.is_empty(), "{}", r.stdout);

    for (args, needle) in [
        (
            vec!["trust", "keypair", "kubernetes-ca", "12345"],
            "no keypair 12345",
        ),
        (vec!["trust", "keypair", "all", &first], "not `all`"),
        (
            vec!["trust", "keypair", "no-such-keyset", &first],
            "no-such-keyset",
        ),
    ] {
        let mut all = args.clone();
        all.extend_from_slice(&["--state", &state]);
        let r = kops(&all);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stdout);
        assert!(r.stderr.contains(needle), "{args:?}: {}", r.stderr);
    }
    let r = kops(&["trust", "keypair", "kubernetes-ca", "--state", &state]);
    assert_eq!(r.code, 2, "clap rejects a missing ID: {}", r.stderr);
}

#[test]
fn upgrade_follows_the_channel() {
    let f = Fixture::new();
    let r = f.ok(&["upgrade", "cluster", NAME]);
    let lines: Vec<Vec<&str>> = r
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["ITEM", "PROPERTY", "OLD", "NEW"], "{}", r.stdout);
    assert!(
        lines.contains(&vec!["Cluster", "Channel", "stable"]),
        "{}",
        r.stdout
    );
    // kops 1.37 proposes the next minor's recommended release.
    assert!(
        lines.contains(&vec!["Cluster", "KubernetesVersion", "v1.34.1", "1.35.7"]),
        "{}",
        r.stdout
    );
    assert!(
        lines
            .iter()
            .any(|l| l[0] == "InstanceGroup/nodes" && l[1] == "Image"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("Must specify --yes to perform upgrade"));
    let c = f.yaml(&["get", "cluster", NAME]);
    assert_eq!(
        c["spec"]["kubernetesVersion"], "v1.34.1",
        "no --yes: nothing stored"
    );

    let r = f.ok(&["upgrade", "cluster", NAME, "--yes"]);
    assert!(
        r.stdout.contains("Updates applied to configuration."),
        "{}",
        r.stdout
    );
    let c = f.yaml(&["get", "cluster", NAME]);
    assert_eq!(c["spec"]["kubernetesVersion"], "1.35.7");
    assert_eq!(c["spec"]["channel"], "stable");
    let g = f.yaml(&["get", "ig", "nodes", "--name", NAME]);
    assert!(
        g["spec"]["image"]
            .as_str()
            .unwrap()
            .contains("ubuntu-noble-24.04-amd64"),
        "{g}"
    );
    f.ok(&["upgrade", "cluster", NAME, "--yes"]);
    let r = f.ok(&["upgrade", "cluster", NAME]);
    assert!(r.stderr.contains("No upgrade required"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);

    // A channel file: its recommendation, and the channel is recorded.
    let channel = f.write(
        "channel.yaml",
        "spec:\n  kubernetesVersions:\n  - range: \">=1.36.0\"\n    recommendedVersion: 1.36.5\n    requiredVersion: 1.36.0\n",
    );
    let r = f.ok(&["upgrade", "cluster", NAME, "--channel", &channel, "--yes"]);
    assert!(r.stdout.contains("1.36.5"), "{}", r.stdout);
    let c = f.yaml(&["get", "cluster", NAME]);
    assert_eq!(c["spec"]["kubernetesVersion"], "1.36.5");
    assert_eq!(c["spec"]["channel"], channel.as_str());

    f.fails(
        &["upgrade", "cluster", NAME, "--channel", "beta"],
        "not known",
    );
    f.fails(
        &[
            "upgrade",
            "cluster",
            NAME,
            "--channel",
            "/nonexistent/channel",
        ],
        "cannot read",
    );
    f.fails(
        &["upgrade", "cluster", NAME, "--kubernetes-version", "latest"],
        "not a Kubernetes version",
    );
}

// ---------------------------------------------------------------- on moto

use crate::common::IMAGE;

struct Live {
    moto: &'static kops_testkit::Moto,
    state: String,
    dir: tempfile::TempDir,
}

impl Live {
    fn kops(&self, args: &[&str]) -> Run {
        let mut c = command(args);
        c.args(["--state", &self.state]);
        for (k, v) in self.moto.env() {
            c.env(k, v);
        }
        c.env("KUBECONFIG", common::scratch_kubeconfig());
        c.output().unwrap().into()
    }

    fn ok(&self, args: &[&str]) -> Run {
        let r = self.kops(args);
        assert_eq!(r.code, 0, "{args:?}:\n{}\n{}", r.stdout, r.stderr);
        r
    }

    fn instances(&self, kubeconfig: &str) -> Vec<serde_json::Value> {
        let r = self.ok(&["get", "instances", "-o", "json", "--kubeconfig", kubeconfig]);
        serde_json::from_str::<Vec<serde_json::Value>>(&r.stdout).unwrap()
    }
}

#[test]
fn instances_listed_and_deleted_on_moto() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let name = "instances.example.com";
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    let key = dir.path().join("id.pub");
    std::fs::write(&key, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b test@example\n").unwrap();
    let c = Live { moto, state, dir };
    let r = c.ok(&[
        "create",
        "cluster",
        name,
        "--zones",
        "us-east-1a",
        "--node-count",
        "2",
        "--ssh-public-key",
        key.to_str().unwrap(),
        "--image",
        IMAGE,
    ]);
    // The suggestion names a group that exists.
    assert!(
        r.stderr
            .contains(&format!("kops edit ig --name={name} nodes-us-east-1a")),
        "{}",
        r.stderr
    );
    c.ok(&["update", "cluster", name, "--yes"]);

    let kube = fake_kube::FakeKube::start(&moto.endpoint(), name, fake_kube::Faults::default());
    let kc = kube.write_kubeconfig(c.dir.path(), name);
    let kc = kc.to_str().unwrap();

    let list = c.instances(kc);
    assert_eq!(list.len(), 3, "{list:?}");
    let nodes: Vec<&serde_json::Value> = list
        .iter()
        .filter(|i| i["roles"] == serde_json::json!(["node"]))
        .collect();
    assert_eq!(nodes.len(), 2, "{list:?}");
    assert!(list
        .iter()
        .any(|i| i["roles"] == serde_json::json!(["control-plane"])));
    for i in &list {
        assert_eq!(i["status"], "UpToDate", "{i}");
        assert!(i["internalIP"].as_str().unwrap().contains('.'), "{i}");
        assert!(i["id"].as_str().unwrap().starts_with("i-"), "{i}");
        assert!(i["nodeName"].is_string(), "{i}");
    }
    assert_eq!(
        nodes[0]["instanceGroup"],
        format!("nodes-us-east-1a.{name}")
    );
    let r = c.ok(&["get", "instances", "--kubeconfig", kc]);
    let header: Vec<&str> = r
        .stdout
        .trim_start()
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "ID",
            "NODE-NAME",
            "STATUS",
            "ROLES",
            "STATE",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "INSTANCE-GROUP",
            "MACHINE-TYPE"
        ]
    );
    // Without the Kubernetes API: the list still comes, without node names.
    let r = c.ok(&["get", "instances", "-o", "json"]);
    assert!(r.stderr.contains("cannot list node names"), "{}", r.stderr);

    // Dry run by node name, then delete in the group (no surge).
    let first = nodes[0]["id"].as_str().unwrap().to_string();
    let node = nodes[0]["nodeName"].as_str().unwrap().to_string();
    let r = c.ok(&["delete", "instance", &node, "--kubeconfig", kc]);
    assert!(
        r.stdout
            .contains(&format!("Instance {first} ({node}) found for deletion")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("Must specify --yes to delete instance"));
    assert!(c.instances(kc).iter().any(|i| i["id"] == first.as_str()));
    let r = c.ok(&[
        "delete",
        "instance",
        &first,
        "--yes",
        "--surge=false",
        "--cloudonly",
    ]);
    assert!(!r.stderr.contains("detached"), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("terminated {first}")),
        "{}",
        r.stderr
    );
    let now = c.instances(kc);
    assert!(!now.iter().any(|i| i["id"] == first.as_str()), "{now:?}");
    assert_eq!(now.len(), 3, "the group replaced it: {now:?}");

    // With surge (the default): detached, drained, terminated, replaced, validated.
    let second = nodes[1]["id"].as_str().unwrap().to_string();
    let r = c.ok(&[
        "delete",
        "instance",
        &second,
        "--yes",
        "--kubeconfig",
        kc,
        "--validate-count",
        "1",
        "--validate-tick",
        "200ms",
        "--validate-success-pause",
        "0s",
        "--post-drain-delay",
        "0s",
        "--validation-timeout",
        "30s",
    ]);
    assert!(
        r.stderr.contains(&format!("detached {second}")),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(&format!("terminated {second}")),
        "{}",
        r.stderr
    );
    let now = c.instances(kc);
    assert!(!now.iter().any(|i| i["id"] == second.as_str()), "{now:?}");
    assert_eq!(now.len(), 3, "{now:?}");

    // A control-plane instance is never detached.
    let cp = now
        .iter()
        .find(|i| i["roles"] == serde_json::json!(["control-plane"]))
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = c.ok(&["delete", "instance", &cp, "--yes", "--cloudonly"]);
    assert!(
        r.stderr.contains("cannot detach control-plane"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("detached i-"), "{}", r.stderr);
    assert!(!c.instances(kc).iter().any(|i| i["id"] == cp.as_str()));

    // `delete -f` with the cluster: its cloud resources are listed (no --yes).
    let spec = c.ok(&["get", "cluster", name, "-o", "yaml"]).stdout;
    let file = c.dir.path().join("cluster.yaml");
    std::fs::write(&file, spec).unwrap();
    let r = c.ok(&["delete", "-f", file.to_str().unwrap()]);
    assert!(r.stdout.contains("vpc"), "{}", r.stdout);
    assert!(r.stderr.contains("Must specify --yes"), "{}", r.stderr);

    let r = c.kops(&["delete", "instance", "i-0000000000", "--cloudonly"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stderr.contains("not found in cluster"), "{}", r.stderr);
    let r = c.kops(&["delete", "instance", &first]);
    assert_eq!(
        r.code, 1,
        "no Kubernetes API without --cloudonly: {}",
        r.stdout
    );
    assert!(r.stderr.contains("--cloudonly"), "{}", r.stderr);
}
