//! Set-up shared by the tests that run a kops-controller (its own tests,
//! nodeup's join tests, the CLI's): the cluster CA and the controller's
//! serving certificate in files, as nodeup writes them on a control-plane
//! node, and the controller served over TLS on a loopback port.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kops_pki::{CertificateAuthority, IssueRequest};

use crate::server::Controller;
use kops_bootstrap::config::Options;

/// A cluster CA and kops-controller's serving certificate, in files.
pub struct ServingPki {
    pub ca: CertificateAuthority,
    dir: PathBuf,
}

impl ServingPki {
    /// A new CA and a serving certificate for `cluster`'s controller
    /// address, written to `dir`.
    pub fn write(dir: &Path, cluster: &str) -> ServingPki {
        let ca = CertificateAuthority::generate("kubernetes-ca").expect("a CA");
        let serving = ca
            .issue(&IssueRequest::server(
                "kops-controller",
                &[kops_bootstrap::protocol::audience(cluster)],
            ))
            .expect("a serving certificate");
        std::fs::create_dir_all(dir).expect("the PKI directory");
        for (file, text) in [
            ("kubernetes-ca.crt", ca.certificate_pem()),
            ("kubernetes-ca.key", ca.private_key_pem()),
            ("kops-controller.crt", serving.certificate_pem.as_str()),
            ("kops-controller.key", serving.private_key_pem.as_str()),
        ] {
            std::fs::write(dir.join(file), text).expect("a PKI file");
        }
        ServingPki {
            ca,
            dir: dir.to_path_buf(),
        }
    }

    /// Points `options` at these files.
    pub fn configure(&self, options: &mut Options) {
        let path = |file: &str| self.dir.join(file).display().to_string();
        options.server.server_key_path = path("kops-controller.key");
        options.server.server_certificate_path = path("kops-controller.crt");
        options.server.ca_base_path = self.dir.display().to_string();
    }
}

/// Serves `controller` over TLS on a free loopback port until the test
/// ends; its URL.
pub async fn serve(controller: Arc<Controller>) -> String {
    let tls = controller.tls().expect("the serving certificate");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("https://{}/", listener.local_addr().expect("its address"));
    tokio::spawn(controller.serve(listener, tls, std::future::pending()));
    url
}
