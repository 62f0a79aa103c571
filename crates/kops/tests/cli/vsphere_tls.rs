//! vCenter over HTTPS with a certificate from its own CA, as every vCenter
//! serves (VMCA): without trust `update` stops in one line that names the
//! certificate's fingerprint and both fixes and makes nothing; pinned by
//! `--vsphere-thumbprint` or trusted through `--vsphere-ca-file` it builds
//! the cluster, and the cloud controller's config carries the same trust.

use kops_testkit::vcsim::{self, Vcsim};

use crate::common::file_url;
use crate::vsphere::{create_args, inventory, kops_vc, ok, update_yes};

#[test]
fn vcenter_certificates_are_checked_and_trusted_as_configured() {
    if !vcsim::vcsim_available() {
        println!("skipped: vcsim-kops not built (scripts/setup-vcsim)");
        return;
    }
    let sim = Vcsim::start_tls().unwrap();
    assert!(sim.url().starts_with("https://"), "{}", sim.url());
    let tls = sim.tls().unwrap();
    let ca_file = tls.ca_file();
    let thumbprint = tls.thumbprint();
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("state");
    let state = file_url(&store);
    let before = inventory(&sim);

    // Not trusted: one line with the fingerprint and the two fixes, quickly
    // (no retries of a certificate that will not change), nothing made.
    ok(&sim, &create_args(&sim, "untrusted.k8s.local", &state, "1"));
    let started = std::time::Instant::now();
    let r = kops_vc(
        &sim,
        &[
            "update",
            "cluster",
            "untrusted.k8s.local",
            "--yes",
            "--state",
            &state,
        ],
    );
    assert_ne!(r.code, 0, "{}", r.stderr);
    let line = r
        .stderr
        .lines()
        .find(|l| l.contains("is not trusted"))
        .unwrap_or_else(|| panic!("no trust error in:\n{}", r.stderr));
    assert!(line.contains(&thumbprint), "{line}");
    assert!(line.contains("--vsphere-thumbprint"), "{line}");
    assert!(line.contains("--vsphere-ca-file"), "{line}");
    assert!(!r.stderr.contains("{ "), "a Debug structure:\n{}", r.stderr);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        inventory(&sim),
        before,
        "an untrusted update made something"
    );

    // Pinned by the fingerprint govc prints.
    let mut pinned = create_args(&sim, "pinned.k8s.local", &state, "1");
    pinned.extend(["--vsphere-thumbprint", &thumbprint]);
    ok(&sim, &pinned);
    update_yes(&sim, "pinned.k8s.local", &state);
    let made = inventory(&sim);
    assert!(
        made.iter().any(|v| v.contains("pinned")),
        "no VM of the pinned cluster in {made:?}"
    );
    let cpi = read_addon(&store, "pinned.k8s.local", "vsphere-cloud-controller");
    assert!(
        cpi.contains(&format!("thumbprint: \"{thumbprint}\"")),
        "{cpi}"
    );
    // A fingerprint that is not the server's is refused the same way.
    let mut wrong = create_args(&sim, "wrong.k8s.local", &state, "1");
    let other = "00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33";
    wrong.extend(["--vsphere-thumbprint", other]);
    ok(&sim, &wrong);
    let r = kops_vc(
        &sim,
        &[
            "update",
            "cluster",
            "wrong.k8s.local",
            "--yes",
            "--state",
            &state,
        ],
    );
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains(&thumbprint), "{}", r.stderr);

    // Trusted through the CA that signed vCenter's certificate; the spec
    // carries the CA's text, so the file is not needed afterwards.
    let mut with_ca = create_args(&sim, "ca.k8s.local", &state, "1");
    let ca_path = ca_file.display().to_string();
    with_ca.extend(["--vsphere-ca-file", &ca_path]);
    ok(&sim, &with_ca);
    update_yes(&sim, "ca.k8s.local", &state);
    let cpi = read_addon(&store, "ca.k8s.local", "vsphere-cloud-controller");
    assert!(cpi.contains("caFile: /etc/cloud/vcenter-ca.pem"), "{cpi}");
    assert!(cpi.contains("BEGIN CERTIFICATE"), "{cpi}");
    // A CA file that is not PEM: one line naming the flag, nothing written.
    let junk = tmp.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let junk_path = junk.display().to_string();
    let mut bad = create_args(&sim, "badca.k8s.local", &state, "1");
    bad.extend(["--vsphere-ca-file", &junk_path]);
    let r = kops_vc(&sim, &bad);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("--vsphere-ca-file"), "{}", r.stderr);
    assert!(!store.join("badca.k8s.local").exists(), "create wrote");

    for name in ["pinned.k8s.local", "ca.k8s.local"] {
        ok(
            &sim,
            &["delete", "cluster", name, "--yes", "--state", &state],
        );
    }
    assert_eq!(inventory(&sim), before, "delete left something");
}

/// The text of the first addon manifest under `cluster`'s addons whose
/// path names `addon`.
fn read_addon(store: &std::path::Path, cluster: &str, addon: &str) -> String {
    let dir = store.join(cluster).join("addons");
    let file = crate::common::tree(&dir)
        .into_iter()
        .find(|f| f.contains(addon) && f.ends_with(".yaml"))
        .unwrap_or_else(|| panic!("no {addon} manifest under {}", dir.display()));
    std::fs::read_to_string(dir.join(file)).unwrap()
}
