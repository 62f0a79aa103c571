//! Keysets, secrets and kubeconfig through the binary: `update cluster --yes`
//! against moto creates the cluster's keysets and secrets once (and keeps a
//! CA that was already there, shaped like kops writes it), `get keypairs` and
//! `get secrets` list them, `export kubeconfig --admin` merges a kubeconfig
//! that kubectl loads and whose client certificate openssl verifies against
//! the CA. Bad input fails with exit code 1 and writes nothing.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use common::{command, file_url, kops, Run};

use crate::common::IMAGE;
const SSH_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b test@example\n";

fn run(moto: Option<&kops_testkit::Moto>, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut c = command(args);
    if let Some(moto) = moto {
        for (k, v) in moto.env() {
            c.env(k, v);
        }
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap().into()
}

fn have(tool: &str, args: &[&str]) -> bool {
    let ok = Command::new(tool)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("`{tool}` is not on PATH: skipping the checks that use it");
    }
    ok
}

fn openssl(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "openssl {args:?}: {text}");
    text
}

/// Every file under `dir` with its content and mode.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    for rel in common::tree(dir) {
        let p = dir.join(&rel);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        out.insert(PathBuf::from(rel), (std::fs::read(&p).unwrap(), mode));
    }
    out
}

/// A `kubernetes-ca` keyset as kops writes it, with a CA made by openssl.
/// Returns (keyset YAML, CA certificate PEM, key id).
fn kops_made_ca(dir: &Path) -> (String, String, String) {
    openssl(
        dir,
        &["genrsa", "-traditional", "-out", "seed-key.pem", "2048"],
    );
    let serial = "7210217637009291126409203712";
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            "seed-key.pem",
            "-subj",
            "/CN=kubernetes-ca",
            "-days",
            "3650",
            "-set_serial",
            serial,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-out",
            "seed.pem",
        ],
    );
    let cert = std::fs::read_to_string(dir.join("seed.pem")).unwrap();
    let key = std::fs::read_to_string(dir.join("seed-key.pem")).unwrap();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let yaml = format!(
        "apiVersion: kops.k8s.io/v1alpha2\nkind: Keyset\nmetadata:\n  creationTimestamp: null\n  name: kubernetes-ca\nspec:\n  keys:\n  - id: \"{serial}\"\n    privateMaterial: {}\n    publicMaterial: {}\n  primaryId: \"{serial}\"\n  type: Keypair\n",
        b64(&key),
        b64(&cert)
    );
    (yaml, cert, serial.to_string())
}

async fn api_load_balancer_dns(endpoint: &str, cluster: &str) -> Option<String> {
    use aws_config::{BehaviorVersion, Region};
    use aws_sdk_ec2::config::Credentials;
    let config = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await;
    let elb = aws_sdk_elasticloadbalancingv2::Client::new(&config);
    let lbs = elb.describe_load_balancers().send().await.unwrap();
    for lb in lbs.load_balancers() {
        let arn = lb.load_balancer_arn().unwrap().to_string();
        let tags = elb.describe_tags().resource_arns(arn).send().await.unwrap();
        let named = tags.tag_descriptions().iter().any(|d| {
            d.tags()
                .iter()
                .any(|t| t.key() == Some("Name") && t.value() == Some(&format!("api.{cluster}")))
        });
        if named {
            return lb.dns_name().map(str::to_string);
        }
    }
    None
}

fn decode(v: &serde_json::Value) -> String {
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn update_creates_keysets_once_and_export_kubeconfig_signs_with_the_ca() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let use_openssl = have("openssl", &["version"]);
    let use_kubectl = have("kubectl", &["version", "--client"]);
    let cluster = "pki.k8s.local";
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let key = tmp.path().join("id.pub");
    std::fs::write(&key, SSH_KEY).unwrap();
    let r = run(
        Some(moto),
        &[],
        &[
            "create",
            "cluster",
            cluster,
            "--zones",
            "us-east-1a",
            "--ssh-public-key",
            key.to_str().unwrap(),
            "--image",
            IMAGE,
            "--state",
            &state,
        ],
    );
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    let cluster_dir = tmp.path().join("state").join(cluster);

    // A kubernetes-ca made before (by kops): it must be read, not replaced.
    let seeded = use_openssl.then(|| {
        let (yaml, cert, id) = kops_made_ca(tmp.path());
        let dir = cluster_dir.join("pki/private/kubernetes-ca");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("keyset.yaml"), &yaml).unwrap();
        (yaml, cert, id)
    });

    // A dry run writes no keyset and no secret.
    let before = snapshot(&cluster_dir);
    let r = run(
        Some(moto),
        &[],
        &["update", "cluster", cluster, "--state", &state],
    );
    assert_eq!(r.code, 0, "dry run: {}", r.stderr);
    let after = snapshot(&cluster_dir);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );

    let started = std::time::Instant::now();
    let r = run(
        Some(moto),
        &[],
        &["update", "cluster", cluster, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply: {}", r.stderr);
    eprintln!(
        "update --yes (first, with keysets) took {:.1}s",
        started.elapsed().as_secs_f64()
    );

    let pki: BTreeMap<PathBuf, (Vec<u8>, u32)> = snapshot(&cluster_dir)
        .into_iter()
        .filter(|(p, _)| p.starts_with("pki/private") || p.starts_with("secrets"))
        .collect();
    let keysets: Vec<String> = pki
        .keys()
        .filter_map(|p| p.strip_prefix("pki/private").ok())
        .map(|p| p.parent().unwrap().display().to_string())
        .collect();
    assert_eq!(
        keysets,
        vec![
            "apiserver-aggregator-ca",
            "etcd-clients-ca",
            "etcd-manager-ca-events",
            "etcd-manager-ca-main",
            "etcd-peers-ca-events",
            "etcd-peers-ca-main",
            "kubernetes-ca",
            "service-account",
        ]
    );
    let secrets: Vec<String> = pki
        .keys()
        .filter_map(|p| p.strip_prefix("secrets").ok())
        .map(|p| p.display().to_string())
        .collect();
    assert_eq!(
        secrets,
        vec![
            "admin",
            "kube",
            "kube-proxy",
            "kubelet",
            "system:controller_manager",
            "system:dns",
            "system:logging",
            "system:monitoring",
            "system:scheduler",
        ]
    );
    for (path, (_, mode)) in &pki {
        if path.ends_with("kubernetes-ca/keyset.yaml") && seeded.is_some() {
            continue; // written by the test
        }
        assert_eq!(*mode, 0o600, "{}", path.display());
    }
    if let Some((yaml, _, _)) = &seeded {
        let kept = &pki[Path::new("pki/private/kubernetes-ca/keyset.yaml")].0;
        assert_eq!(
            String::from_utf8_lossy(kept),
            *yaml,
            "the existing CA was rewritten"
        );
    }

    // Second apply: nothing created, nothing rewritten.
    let r = run(
        Some(moto),
        &[],
        &["update", "cluster", cluster, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "second apply: {}", r.stderr);
    let again: BTreeMap<PathBuf, (Vec<u8>, u32)> = snapshot(&cluster_dir)
        .into_iter()
        .filter(|(p, _)| p.starts_with("pki/private") || p.starts_with("secrets"))
        .collect();
    assert!(again == pki, "the second update changed keysets or secrets");

    // get keypairs: a table, and JSON without private material.
    let r = run(None, &[], &["get", "keypairs", "--state", &state]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut lines = r.stdout.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        vec!["NAME", "ID", "ISSUED", "EXPIRES", "PRIMARY", "HASPRIVATE"]
    );
    assert_eq!(lines.count(), 8, "{}", r.stdout);
    let r = run(
        None,
        &[],
        &["get", "keypairs", "--state", &state, "-o", "json"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stdout.contains("PRIVATE KEY"), "{}", r.stdout);
    let rows: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let ca_row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "kubernetes-ca")
        .unwrap();
    assert_eq!(ca_row["subject"], "CN=kubernetes-ca");
    assert_eq!(ca_row["isCA"], true);
    assert_eq!(ca_row["isPrimary"], true);
    assert_eq!(ca_row["hasPrivateKey"], true);
    assert_eq!(ca_row["keyLength"], 2048);
    if let Some((_, _, id)) = &seeded {
        assert_eq!(ca_row["id"], id.as_str());
    }
    let r = run(
        None,
        &[],
        &["get", "keypairs", "etcd-clients-ca", "--state", &state],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 2, "{}", r.stdout);

    // get secrets: names only, values with -o plaintext.
    let r = run(None, &[], &["get", "secrets", "--state", &state]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let names: Vec<&str> = r.stdout.lines().skip(1).map(str::trim).collect();
    assert_eq!(
        names,
        secrets.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let r = run(
        None,
        &[],
        &[
            "get",
            "secrets",
            "admin",
            "--state",
            &state,
            "-o",
            "plaintext",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim().len(), 32, "{}", r.stdout);

    // export kubeconfig --admin, merged into an existing KUBECONFIG.
    let kubeconfig = tmp.path().join("kube").join("config");
    std::fs::create_dir_all(kubeconfig.parent().unwrap()).unwrap();
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster:\n    server: https://other.example.com\ncontexts:\n- name: other\n  context:\n    cluster: other\n    user: other\nusers:\n- name: other\n  user:\n    token: secret-token\ncurrent-context: other\n",
    )
    .unwrap();
    let kubeconfig_env = kubeconfig.to_str().unwrap();
    let r = run(
        Some(moto),
        &[("KUBECONFIG", kubeconfig_env)],
        &[
            "export",
            "kubeconfig",
            cluster,
            "--admin",
            "--state",
            &state,
        ],
    );
    assert_eq!(r.code, 0, "export: {}", r.stderr);
    assert!(
        r.stderr.contains(&format!("context to {cluster}")),
        "{}",
        r.stderr
    );
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    let config: serde_json::Value = if use_kubectl {
        let out = Command::new("kubectl")
            .args(["config", "view", "--raw", "-o", "json"])
            .env("KUBECONFIG", kubeconfig_env)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubectl config view: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    } else {
        serde_yaml_ng::from_str(&text).unwrap()
    };
    assert_eq!(config["current-context"], cluster);
    let named = |section: &str, name: &str| -> serde_json::Value {
        config[section]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {section} entry {name}: {config}"))
            .clone()
    };
    assert_eq!(named("users", "other")["user"]["token"], "secret-token");
    assert_eq!(
        named("clusters", "other")["cluster"]["server"],
        "https://other.example.com"
    );
    let context = named("contexts", cluster);
    assert_eq!(context["context"]["cluster"], cluster);
    assert_eq!(context["context"]["user"], cluster);
    let entry = named("clusters", cluster)["cluster"].clone();
    assert_eq!(entry["tls-server-name"], format!("api.internal.{cluster}"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let expected_server = match rt.block_on(api_load_balancer_dns(&moto.endpoint(), cluster)) {
        Some(dns) => format!("https://{dns}"),
        None => format!("https://api.{cluster}"),
    };
    eprintln!("kubeconfig server: {expected_server}");
    assert_eq!(entry["server"], expected_server.as_str());
    let ca_bundle = decode(&entry["certificate-authority-data"]);
    let user = named("users", cluster)["user"].clone();
    let client_cert = decode(&user["client-certificate-data"]);
    let client_key = decode(&user["client-key-data"]);
    assert!(client_key.starts_with("-----BEGIN RSA PRIVATE KEY-----"));
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kubeconfig).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    if let Some((_, seeded_cert, _)) = &seeded {
        assert_eq!(ca_bundle.trim(), seeded_cert.trim());
    }
    if use_openssl {
        std::fs::write(tmp.path().join("bundle.pem"), &ca_bundle).unwrap();
        std::fs::write(tmp.path().join("client.pem"), &client_cert).unwrap();
        let out = openssl(
            tmp.path(),
            &[
                "verify",
                "-purpose",
                "sslclient",
                "-CAfile",
                "bundle.pem",
                "client.pem",
            ],
        );
        assert!(out.contains("client.pem: OK"), "{out}");
        let subject = openssl(
            tmp.path(),
            &["x509", "-in", "client.pem", "-noout", "-subject", "-dates"],
        );
        assert!(subject.contains("O = system:masters"), "{subject}");
        assert!(subject.contains("CN = kubecfg"), "{subject}");
    }

    // --internal into another file, no user: the internal name, a warning.
    let internal = tmp.path().join("internal.yaml");
    let r = run(
        None,
        &[],
        &[
            "export",
            "kubecfg",
            cluster,
            "--internal",
            "--kubeconfig",
            internal.to_str().unwrap(),
            "--state",
            &state,
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("no user credentials"), "{}", r.stderr);
    let v: serde_json::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&internal).unwrap()).unwrap();
    assert_eq!(
        v["clusters"][0]["cluster"]["server"],
        format!("https://api.internal.{cluster}")
    );
    assert!(v.get("users").is_none(), "{v}");

    // Bad input: exit 1, clear message, nothing written.
    let before_state = snapshot(&tmp.path().join("state"));
    let before_kube = std::fs::read(&kubeconfig).unwrap();
    let kube_env = [("KUBECONFIG", kubeconfig_env)];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "export",
                "kubeconfig",
                cluster,
                "--admin=banana",
                "--state",
                &state,
            ],
            "is not a duration",
        ),
        (
            vec![
                "export",
                "kubeconfig",
                cluster,
                "--admin",
                "--user",
                "other",
                "--state",
                &state,
            ],
            "cannot use both --admin and --user",
        ),
        (
            vec![
                "export",
                "kubeconfig",
                "missing.k8s.local",
                "--admin",
                "--state",
                &state,
            ],
            "cluster `missing.k8s.local` not found",
        ),
        (
            vec![
                "export",
                "kubeconfig",
                cluster,
                "--user",
                "nobody",
                "--internal",
                "--state",
                &state,
            ],
            "user `nobody` was not found",
        ),
        (
            vec![
                "create",
                "secret",
                "weavepassword",
                cluster,
                "-f",
                "/etc/hostname",
                "--state",
                &state,
            ],
            "unknown secret type `weavepassword`",
        ),
        (
            vec![
                "create",
                "secret",
                "dockerconfig",
                cluster,
                "-f",
                key.to_str().unwrap(),
                "--state",
                &state,
            ],
            "not valid JSON",
        ),
        (
            vec![
                "get",
                "keypairs",
                "--name",
                "missing.k8s.local",
                "--state",
                &state,
            ],
            "not found",
        ),
        (
            vec!["get", "secrets", "nope", "--state", &state],
            "no secrets found",
        ),
    ];
    for (args, message) in cases {
        let r = run(None, &kube_env, &args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(message), "{args:?}: {}", r.stderr);
        assert_eq!(
            snapshot(&tmp.path().join("state")),
            before_state,
            "{args:?}"
        );
        assert_eq!(std::fs::read(&kubeconfig).unwrap(), before_kube, "{args:?}");
    }

    // create secret: stored 0600 in kops' format, refused twice without --force.
    let docker = tmp.path().join("docker.json");
    std::fs::write(
        &docker,
        r#"{"auths":{"registry.example.com":{"auth":"dTpw"}}}"#,
    )
    .unwrap();
    let args = [
        "create",
        "secret",
        "dockerconfig",
        "-f",
        docker.to_str().unwrap(),
        "--state",
        &state,
    ];
    assert_eq!(kops(&args).code, 0);
    let r = kops(&args);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("--force"), "{}", r.stderr);
    let mut forced = args.to_vec();
    forced.push("--force");
    assert_eq!(kops(&forced).code, 0);
    let raw = std::fs::read_to_string(cluster_dir.join("secrets/dockerconfig")).unwrap();
    let stored: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        decode(&stored["Data"]),
        r#"{"auths":{"registry.example.com":{"auth":"dTpw"}}}"#
    );
}

/// The same on an `s3://` state store (moto's S3): the keysets are created
/// once (create-only writes), listed, and signed with.
#[test]
fn keysets_on_an_s3_state_store() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    moto.create_bucket("kops-pki-state").unwrap();
    let state = "s3://kops-pki-state/clusters";
    let cluster = "s3pki.k8s.local";
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("id.pub");
    std::fs::write(&key, SSH_KEY).unwrap();
    let r = run(
        Some(moto),
        &[],
        &[
            "create",
            "cluster",
            cluster,
            "--zones",
            "us-east-1b",
            "--ssh-public-key",
            key.to_str().unwrap(),
            "--image",
            IMAGE,
            "--state",
            state,
        ],
    );
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    let ids = || -> Vec<(String, String)> {
        let r = run(
            Some(moto),
            &[],
            &[
                "get", "keypairs", "--name", cluster, "--state", state, "-o", "json",
            ],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        let rows: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_string(),
                    r["id"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let r = run(
        Some(moto),
        &[],
        &["get", "keypairs", "--name", cluster, "--state", state],
    );
    assert_eq!(r.code, 1, "no keypairs before the first update");
    let r = run(
        Some(moto),
        &[],
        &["update", "cluster", cluster, "--state", state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply: {}", r.stderr);
    let first = ids();
    assert_eq!(first.len(), 8, "{first:?}");
    let r = run(
        Some(moto),
        &[],
        &["update", "cluster", cluster, "--state", state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply: {}", r.stderr);
    assert_eq!(ids(), first);

    let kubeconfig = tmp.path().join("config");
    let r = run(
        Some(moto),
        &[],
        &[
            "export",
            "kubeconfig",
            "--name",
            cluster,
            "--admin=1h",
            "--internal",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--state",
            state,
        ],
    );
    assert_eq!(r.code, 0, "export: {}", r.stderr);
    let v: serde_json::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&kubeconfig).unwrap()).unwrap();
    assert_eq!(
        v["clusters"][0]["cluster"]["server"],
        format!("https://api.internal.{cluster}")
    );
    assert_eq!(v["users"][0]["name"], cluster);
    assert!(v["users"][0]["user"]["client-certificate-data"].is_string());
}

/// CA rotation through the binary, without AWS: add a keypair, promote it,
/// distrust the old one; the kubeconfig then trusts and is signed by the new
/// CA only. A user-provided CA (`--cert`/`--key`) keeps its serial as id.
#[test]
fn keypair_rotation() {
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let cluster = "rotate.k8s.local";
    let key = tmp.path().join("id.pub");
    std::fs::write(&key, SSH_KEY).unwrap();
    let ok = |args: &[&str]| {
        let r = kops(args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        r
    };
    ok(&[
        "create",
        "cluster",
        cluster,
        "--zones",
        "us-east-1a",
        "--ssh-public-key",
        key.to_str().unwrap(),
        "--state",
        &state,
    ]);
    let keypairs = |distrusted: bool| -> serde_json::Value {
        let mut args = vec!["get", "keypairs", "--state", &state, "-o", "json"];
        if distrusted {
            args.push("--distrusted");
        }
        serde_json::from_str(&ok(&args).stdout).unwrap()
    };
    let id_of = |r: &Run| -> String {
        r.stderr
            .split_whitespace()
            .last()
            .unwrap()
            .trim()
            .to_string()
    };

    let r = kops(&["create", "keypair", "kubernetes-ca", "--state", &state]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("must be primary"), "{}", r.stderr);
    let r = kops(&["create", "keypair", "nodes", "--state", &state]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("not supported"), "{}", r.stderr);

    let first = id_of(&ok(&[
        "create",
        "keypair",
        "kubernetes-ca",
        "--primary",
        "--state",
        &state,
    ]));
    let second = id_of(&ok(&[
        "create",
        "keypair",
        "kubernetes-ca",
        "--state",
        &state,
    ]));
    let rows = keypairs(false);
    assert_eq!(rows.as_array().unwrap().len(), 2, "{rows}");
    assert_eq!(rows[0]["id"], first.as_str());
    assert_eq!(rows[0]["isPrimary"], true);
    assert_eq!(rows[1]["id"], second.as_str());
    assert!(rows[1].get("isPrimary").is_none());
    assert_eq!(
        rows[1]["subject"],
        format!("CN=kubernetes-ca,SERIALNUMBER={second}")
    );

    let r = kops(&[
        "distrust",
        "keypair",
        "kubernetes-ca",
        &first,
        "--state",
        &state,
    ]);
    assert_eq!(r.code, 1, "the primary cannot be distrusted");
    let r = ok(&["promote", "keypair", "kubernetes-ca", "--state", &state]);
    assert!(
        r.stderr
            .contains(&format!("Promoted kubernetes-ca {second}")),
        "{}",
        r.stderr
    );
    let r = ok(&["distrust", "keypair", "kubernetes-ca", "--state", &state]);
    assert!(
        r.stderr
            .contains(&format!("Distrusted kubernetes-ca {first}")),
        "{}",
        r.stderr
    );
    let rows = keypairs(false);
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    let rows = keypairs(true);
    assert!(rows[0]["distrustTimestamp"].is_string(), "{rows}");
    let r = ok(&["get", "keypairs", "--distrusted", "--state", &state]);
    assert!(r.stdout.starts_with("NAME"), "{}", r.stdout);
    assert!(r.stdout.lines().next().unwrap().contains("DISTRUSTED"));

    // The kubeconfig trusts only the new CA, and its certificate is signed by it.
    let kubeconfig = tmp.path().join("config");
    ok(&[
        "export",
        "kubeconfig",
        "--admin=2h",
        "--internal",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--state",
        &state,
    ]);
    let v: serde_json::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&kubeconfig).unwrap()).unwrap();
    let bundle = decode(&v["clusters"][0]["cluster"]["certificate-authority-data"]);
    assert_eq!(bundle.matches("BEGIN CERTIFICATE").count(), 1);
    if have("openssl", &["version"]) {
        std::fs::write(tmp.path().join("bundle.pem"), &bundle).unwrap();
        std::fs::write(
            tmp.path().join("client.pem"),
            decode(&v["users"][0]["user"]["client-certificate-data"]),
        )
        .unwrap();
        let out = openssl(
            tmp.path(),
            &["verify", "-CAfile", "bundle.pem", "client.pem"],
        );
        assert!(out.contains("client.pem: OK"), "{out}");
        let serial = openssl(
            tmp.path(),
            &["x509", "-in", "bundle.pem", "-noout", "-serial"],
        );
        let hex = serial.trim().trim_start_matches("serial=");
        assert_eq!(u128::from_str_radix(hex, 16).unwrap().to_string(), second);

        // A CA brought by the user: its serial is its id.
        let (_, _, id) = kops_made_ca(tmp.path());
        let r = ok(&[
            "create",
            "keypair",
            "etcd-clients-ca",
            "--cert",
            tmp.path().join("seed.pem").to_str().unwrap(),
            "--key",
            tmp.path().join("seed-key.pem").to_str().unwrap(),
            "--primary",
            "--state",
            &state,
        ]);
        assert_eq!(id_of(&r), id);
        let r = ok(&["get", "keypairs", "etcd-clients-ca", "--state", &state]);
        assert!(r.stdout.contains(&id), "{}", r.stdout);
    }
}
