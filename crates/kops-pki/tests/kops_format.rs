//! kops' keyset format both ways, and certificates checked by a verifier
//! that is not ours (the `openssl` command line, skipped with a message when
//! it is missing).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use base64::Engine;
use kops_pki::{
    ensure_cluster_pki, missing_cluster_pki, CertificateUsage, IssueRequest, Keyset, Keystore,
    SecretStore, KUBERNETES_CA, LEGACY_TOKENS,
};
use kops_state::{FileStore, ObjectStore};

fn openssl_available() -> bool {
    let ok = Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipping the openssl checks: `openssl` is not on PATH");
    }
    ok
}

fn openssl(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `openssl verify`: does `cert` chain to `ca`?
fn openssl_verifies(dir: &Path, ca_pem: &str, cert_pem: &str, purpose: &str) -> (bool, String) {
    std::fs::write(dir.join("ca.pem"), ca_pem).unwrap();
    std::fs::write(dir.join("cert.pem"), cert_pem).unwrap();
    openssl(
        dir,
        &[
            "verify", "-purpose", purpose, "-CAfile", "ca.pem", "cert.pem",
        ],
    )
}

/// A CA made the way kops (Go) makes it, by openssl: a PKCS#1 RSA key and a
/// self-signed `CN=<name>` certificate with a decimal serial. Returns
/// (certificate PEM, key PEM, serial in decimal).
fn openssl_ca(dir: &Path, name: &str, serial: &str) -> (String, String, String) {
    let (ok, out) = openssl(
        dir,
        &["genrsa", "-traditional", "-out", "ca-key.pem", "2048"],
    );
    assert!(ok, "{out}");
    let (ok, out) = openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            "ca-key.pem",
            "-subj",
            &format!("/CN={name}"),
            "-days",
            "3650",
            "-set_serial",
            serial,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-out",
            "ca.pem",
        ],
    );
    assert!(ok, "{out}");
    let cert = std::fs::read_to_string(dir.join("ca.pem")).unwrap();
    let key = std::fs::read_to_string(dir.join("ca-key.pem")).unwrap();
    assert!(key.starts_with("-----BEGIN RSA PRIVATE KEY-----"), "{key}");
    (cert, key, serial.to_string())
}

/// The YAML kops writes for a keyset (shape from kops' v1alpha2 Keyset:
/// sorted keys, base64 materials, quoted numeric ids).
fn kops_keyset_yaml(name: &str, items: &[(&str, &str, Option<&str>)], primary: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut yaml = format!(
        "apiVersion: kops.k8s.io/v1alpha2\nkind: Keyset\nmetadata:\n  creationTimestamp: null\n  name: {name}\nspec:\n  keys:\n"
    );
    for (id, cert, key) in items {
        yaml.push_str(&format!("  - id: \"{id}\"\n"));
        if let Some(key) = key {
            yaml.push_str(&format!("    privateMaterial: {}\n", b64(key)));
        }
        yaml.push_str(&format!("    publicMaterial: {}\n", b64(cert)));
    }
    yaml.push_str(&format!("  primaryId: \"{primary}\"\n  type: Keypair\n"));
    yaml
}

#[test]
fn reads_a_keyset_shaped_like_kops_and_signs_with_it() {
    if !openssl_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (old_cert, _, _) = openssl_ca(tmp.path(), "kubernetes-ca", "6986354184403674830401456128");
    let (cert, key, serial) =
        openssl_ca(tmp.path(), "kubernetes-ca", "7210217637009291126409203712");
    // Newer item listed first: the reader must sort oldest first.
    let yaml = kops_keyset_yaml(
        "kubernetes-ca",
        &[
            (&serial, &cert, Some(&key)),
            ("6986354184403674830401456128", &old_cert, None),
        ],
        &serial,
    );
    let keyset = Keyset::parse("test://kubernetes-ca", &yaml).unwrap();
    assert_eq!(keyset.name, "kubernetes-ca");
    assert_eq!(keyset.primary_id.as_deref(), Some(serial.as_str()));
    assert_eq!(
        keyset
            .items
            .iter()
            .map(|i| i.id.as_str())
            .collect::<Vec<_>>(),
        vec!["6986354184403674830401456128", serial.as_str()]
    );
    assert!(keyset.items[0].private_key_pem.is_none());
    // Both certificates are trusted, oldest first.
    assert_eq!(
        keyset.trusted_certificates_pem(),
        format!("{}{}", old_cert, cert)
    );

    // Writing it again gives the same document kops wrote.
    let again = Keyset::parse("again", &keyset.to_yaml()).unwrap();
    assert_eq!(again, keyset);
    let ours: serde_yaml_ng::Value = serde_yaml_ng::from_str(&keyset.to_yaml()).unwrap();
    let theirs: serde_yaml_ng::Value = serde_yaml_ng::from_str(&yaml).unwrap();
    let mut theirs_sorted = theirs.clone();
    // kops lists the keys oldest first when it writes.
    let keys = theirs_sorted["spec"]["keys"].as_sequence_mut().unwrap();
    keys.reverse();
    assert_eq!(ours, theirs_sorted);

    // The CA signs certificates openssl accepts, for each usage.
    let ca = keyset.certificate_authority().unwrap();
    let info = ca.info().unwrap();
    assert_eq!(info.subject, "CN=kubernetes-ca");
    assert_eq!(info.serial, serial);
    for (usage, purpose) in [
        (CertificateUsage::Client, "sslclient"),
        (CertificateUsage::Server, "sslserver"),
        (CertificateUsage::ClientServer, "sslserver"),
    ] {
        let issued = ca
            .issue(&IssueRequest {
                common_name: "kubelet".into(),
                organizations: vec!["system:nodes".into()],
                alternate_names: vec!["node-1.internal".into(), "10.0.0.1".into()],
                usage,
                validity: None,
            })
            .unwrap();
        let (ok, out) = openssl_verifies(tmp.path(), &cert, &issued.certificate_pem, purpose);
        assert!(ok, "{usage:?}: {out}");
        // The key matches the certificate.
        std::fs::write(tmp.path().join("key.pem"), &issued.private_key_pem).unwrap();
        let (ok, from_key) = openssl(tmp.path(), &["rsa", "-in", "key.pem", "-pubout"]);
        assert!(ok, "{from_key}");
        let (ok, from_cert) = openssl(
            tmp.path(),
            &["x509", "-in", "cert.pem", "-pubkey", "-noout"],
        );
        assert!(ok, "{from_cert}");
        assert_eq!(
            from_key
                .lines()
                .filter(|l| !l.contains("writing"))
                .collect::<Vec<_>>(),
            from_cert.lines().collect::<Vec<_>>()
        );
    }
    // A certificate from another CA does not verify.
    let other = Keyset::generate_ca("other").unwrap();
    let stranger = other
        .certificate_authority()
        .unwrap()
        .issue(&IssueRequest::client("x", None))
        .unwrap();
    let (ok, _) = openssl_verifies(tmp.path(), &cert, &stranger.certificate_pem, "sslclient");
    assert!(!ok);
}

#[test]
fn our_keysets_are_valid_for_openssl() {
    if !openssl_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let keyset = Keyset::generate_ca("etcd-peers-ca-main").unwrap();
    let primary = keyset.primary().unwrap();
    let cert = primary.certificate_pem.clone().unwrap();
    std::fs::write(tmp.path().join("ca.pem"), &cert).unwrap();
    let (ok, text) = openssl(
        tmp.path(),
        &["x509", "-in", "ca.pem", "-noout", "-text", "-serial"],
    );
    assert!(ok, "{text}");
    assert!(text.contains("CA:TRUE"), "{text}");
    assert!(text.contains("Certificate Sign, CRL Sign"), "{text}");
    assert!(text.contains("Subject: CN = etcd-peers-ca-main"), "{text}");
    assert!(text.contains("Public-Key: (2048 bit)"), "{text}");
    // The keyset id is the serial, in decimal.
    let hex = text
        .lines()
        .find_map(|l| l.strip_prefix("serial="))
        .unwrap()
        .trim()
        .to_string();
    let from_hex = u128::from_str_radix(&hex, 16).unwrap();
    assert_eq!(from_hex.to_string(), primary.id);
    // The key is PKCS#1 and matches.
    let key = primary.private_key_pem.clone().unwrap();
    assert!(key.starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
    std::fs::write(tmp.path().join("ca-key.pem"), &key).unwrap();
    let (ok, out) = openssl(
        tmp.path(),
        &["rsa", "-in", "ca-key.pem", "-check", "-noout"],
    );
    assert!(ok, "{out}");
    // Self-signed: verifies against itself.
    let (ok, out) = openssl_verifies(tmp.path(), &cert, &cert, "any");
    assert!(ok, "{out}");
}

fn cluster(name: &str) -> kops_api::Cluster {
    let yaml = format!(
        "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata:\n  name: {name}\nspec:\n  etcdClusters:\n  - name: main\n  - name: events\n"
    );
    kops_api::manifest::parse_one("test", &yaml).unwrap()
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn ensure_creates_once_keeps_existing_and_writes_0600() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(FileStore::at(tmp.path()));
    let c = cluster("a.example.com");

    // An existing kubernetes-ca, stored under kops' legacy name `ca`.
    let existing = Keyset::generate_ca("ca").unwrap();
    Keystore::new(store.clone(), "a.example.com")
        .put(&existing)
        .await
        .unwrap();

    let planned = missing_cluster_pki(&store, &c).await.unwrap();
    assert_eq!(planned.migrated_keysets, vec![KUBERNETES_CA]);
    assert_eq!(planned.created_keysets.len(), 7);
    assert_eq!(planned.created_secrets.len(), LEGACY_TOKENS.len());
    // Planning wrote nothing.
    assert!(!tmp.path().join("a.example.com/secrets").exists());

    let done = ensure_cluster_pki(&store, &c).await.unwrap();
    assert_eq!(done, planned);
    let keystore = Keystore::new(store.clone(), "a.example.com");
    let names: Vec<String> = keystore
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.name)
        .collect();
    assert_eq!(
        names,
        vec![
            "apiserver-aggregator-ca",
            "ca",
            "etcd-clients-ca",
            "etcd-manager-ca-events",
            "etcd-manager-ca-main",
            "etcd-peers-ca-events",
            "etcd-peers-ca-main",
            "kubernetes-ca",
            "service-account",
        ]
    );
    // The migrated CA is the one that existed.
    let ca = keystore.require(KUBERNETES_CA).await.unwrap();
    assert_eq!(ca.items, existing.items);

    let private = tmp.path().join("a.example.com/pki/private");
    assert_eq!(mode(&private.join("kubernetes-ca/keyset.yaml")), 0o600);
    assert_eq!(mode(&private.join("etcd-clients-ca/keyset.yaml")), 0o600);
    assert_eq!(mode(&tmp.path().join("a.example.com/secrets/admin")), 0o600);
    let secrets = SecretStore::new(store.clone(), "a.example.com");
    let admin = secrets.get("admin").await.unwrap().unwrap();
    assert_eq!(admin.data.len(), 32);
    let raw = std::fs::read_to_string(tmp.path().join("a.example.com/secrets/system:dns")).unwrap();
    assert!(raw.starts_with("{\"Data\":\""), "{raw}");

    // Second run: nothing to do, nothing changed.
    let before: Vec<(String, Vec<u8>)> = {
        let mut v = Vec::new();
        for k in store.list("a.example.com/").await.unwrap() {
            v.push((k.clone(), store.read(&k).await.unwrap().unwrap()));
        }
        v
    };
    let again = ensure_cluster_pki(&store, &c).await.unwrap();
    assert!(again.is_empty(), "{again:?}");
    let mut after = Vec::new();
    for k in store.list("a.example.com/").await.unwrap() {
        after.push((k.clone(), store.read(&k).await.unwrap().unwrap()));
    }
    assert_eq!(before, after);
}

#[tokio::test]
async fn a_broken_keyset_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(FileStore::at(tmp.path()));
    std::fs::create_dir_all(tmp.path().join("b/pki/private/kubernetes-ca")).unwrap();
    std::fs::write(
        tmp.path().join("b/pki/private/kubernetes-ca/keyset.yaml"),
        "kind: Keyset\napiVersion: kops.k8s.io/v1alpha2\nspec:\n  keys: 3\n",
    )
    .unwrap();
    let err = Keystore::new(store.clone(), "b")
        .certificate_authority(KUBERNETES_CA)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("keyset.yaml"), "{err}");
    assert!(err.contains("hint:"), "{err}");
    let err = Keystore::new(store, "b")
        .certificate_authority("etcd-clients-ca")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("`etcd-clients-ca` was not found"), "{err}");
}
