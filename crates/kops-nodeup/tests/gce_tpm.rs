//! A GCE node signs its bootstrap token with its vTPM: a real TPM 2.0
//! (swtpm, libtpms) holds Google's attestation key template in NV index
//! `0x01c10001`, as a shielded VM's firmware leaves it; nodeup's signer
//! recreates the key from it, has the TPM hash and sign the token, and
//! kops-controller's check (the one it runs against the key Compute
//! reports as the instance's signing key) accepts it.

use std::time::SystemTime;

use kops_bootstrap::gce::token::{self, InstanceRef, Signer};
use kops_nodeup::agent::tpm::{AttestationKey, Tpm, TpmSigner, GCE_AK_TEMPLATE_RSA};

#[test]
fn the_vtpm_signs_tokens_kops_controller_accepts() {
    let Some(swtpm) = kops_testkit::swtpm::Swtpm::start() else {
        return;
    };
    let address = swtpm.address();
    swtpm.provision_gce_ak_template();

    // The key Compute would report: the same on every load (a primary key
    // from the same template and seed), as a `PUBLIC KEY` PEM.
    let ek_pub = {
        let key = AttestationKey::load(Tpm::open(&address).unwrap(), GCE_AK_TEMPLATE_RSA).unwrap();
        assert_eq!(key.public.modulus.len(), 256);
        assert_eq!(key.public.exponent, 65537);
        key.public.to_pem()
    };
    let again = AttestationKey::load(Tpm::open(&address).unwrap(), GCE_AK_TEMPLATE_RSA).unwrap();
    assert_eq!(again.public.to_pem(), ek_pub);
    drop(again);

    let signer = TpmSigner {
        device: address.clone(),
    };
    let data = br#"{"gcpProjectID":"p","zone":"z","instance":"i"}"#;
    let signature = signer.sign(data).unwrap();
    assert_eq!(signature.len(), 256);
    assert!(token::signature_matches(&ek_pub, data, &signature).unwrap());
    assert!(!token::signature_matches(&ek_pub, b"something else", &signature).unwrap());

    // A whole token, as nodeup sends it, decoded and checked as
    // kops-controller does.
    let me = InstanceRef {
        project: "testproject".into(),
        zone: "us-test1-a".into(),
        instance: "nodes-us-test1-a-w1".into(),
    };
    let body = br#"{"apiVersion":"bootstrap.kops.k8s.io/v1alpha1"}"#;
    let header = token::create_token(&me, &signer, body, SystemTime::now()).unwrap();
    let (parsed, claims) = token::decode(&header).unwrap();
    assert_eq!(claims.instance, "nodes-us-test1-a-w1");
    assert!(token::signature_matches(&ek_pub, &parsed.data, &parsed.signature).unwrap());

    // Every key is flushed: the TPM's transient slots (3 in swtpm) would
    // run out otherwise.
    for _ in 0..5 {
        signer.sign(data).unwrap();
    }
}

#[test]
fn a_vm_without_the_template_is_a_clear_error() {
    let Some(swtpm) = kops_testkit::swtpm::Swtpm::start() else {
        return;
    };
    let signer = TpmSigner {
        device: swtpm.address(),
    };
    let err = signer.sign(b"x").unwrap_err();
    assert!(
        err.contains("reading the attestation key template (NV index 0x01c10001)"),
        "{err}"
    );
    let missing = TpmSigner {
        device: "/nonexistent/tpmrm0".into(),
    };
    let err = missing.sign(b"x").unwrap_err();
    assert!(
        err.contains("cannot open the TPM /nonexistent/tpmrm0"),
        "{err}"
    );
}
